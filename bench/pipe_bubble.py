#!/usr/bin/python3
"""pipe_bubble.py - the idle share of a step of each pipeline stage that
cg's schedules leave where every stage's blocks cost the same and the
links nothing, for bench/pipeline.sh, beside the textbook
(N - 1) / (M + N - 1).

cg's stages (lib/train/train.c, stage_step) differ from the textbook's
in ways that change their idle shares: the last stage's forward turn
only takes its input in, its forward pass coming with its backward,
and it takes each micro-batch as it comes (under GPipe too: receive,
then forward and backward, in turn); and with --checkpoint-activations
(RECOMPUTE 1) a stage runs its blocks forward again before their
backward pass, so a micro-batch's backward costs F + B, not B (by
default a stage keeps the activations of the micro-batches in flight).
So, with F a micro-batch's forward pass through one stage's blocks and
B its backward (RATIO = B / F, 2 by default: two products a layer
backward for one forward), stage s runs, in stage_step's order: GPipe,
every micro-batch forward, then every one backward (B, or F + B where
recomputed; the last stage F + B, in turn with its inputs); 1F1B,
N - 1 - s forward, then one forward and one backward in turn, then the
backward passes left.  A forward of stage s waits for stage s - 1's of
the same micro-batch, a backward for stage s + 1's; each stage runs
its turns in order, one at a time.  Printed: each stage's idle share of
the step, 1 - busy / step, where step is when the last turn of any
stage ends (the optimizer's step left out).

usage: pipe_bubble.py N M gpipe|1f1b [RATIO [RECOMPUTE]]
"""
import sys


def order(s, n, m, one_f_one_b):
    w = min(n - 1 - s if one_f_one_b or s == n - 1 else m, m)
    ops = [("F", j) for j in range(w)]
    for i in range(m - w):
        ops += [("F", w + i), ("B", i)]
    ops += [("B", i) for i in range(m - w, m)]
    return ops


def simulate(n, m, one_f_one_b, ratio, recompute):
    f, b = 1.0, ratio
    cost = {("F", s): (0.0 if s == n - 1 else f) for s in range(n)}
    for s in range(n):
        cost[("B", s)] = f + b if recompute or s == n - 1 else b
    ops = [order(s, n, m, one_f_one_b) for s in range(n)]
    done = {}  # (kind, s, j): when it ends
    pos = [0] * n
    clock = [0.0] * n
    busy = [0.0] * n
    while any(pos[s] < len(ops[s]) for s in range(n)):
        moved = False
        for s in range(n):
            if pos[s] == len(ops[s]):
                continue
            kind, j = ops[s][pos[s]]
            if kind == "F":
                dep = ("F", s - 1, j) if s > 0 else None
            else:
                dep = ("B", s + 1, j) if s < n - 1 else None
            if dep is not None and dep not in done:
                continue
            start = max(clock[s], done[dep] if dep else 0.0)
            c = cost[(kind, s)]
            clock[s] = start + c
            busy[s] += c
            done[(kind, s, j)] = clock[s]
            pos[s] += 1
            moved = True
        if not moved:
            raise SystemExit("pipe_bubble.py: the schedule deadlocks")
    step = max(clock)
    return [1 - x / step for x in busy]


def main():
    if len(sys.argv) not in (4, 5, 6) or sys.argv[3] not in ("gpipe", "1f1b"):
        sys.exit("usage: pipe_bubble.py N M gpipe|1f1b [RATIO [RECOMPUTE]]")
    n, m = int(sys.argv[1]), int(sys.argv[2])
    ratio = float(sys.argv[4]) if len(sys.argv) >= 5 else 2.0
    recompute = len(sys.argv) == 6 and sys.argv[5] == "1"
    idle = simulate(n, m, sys.argv[3] == "1f1b", ratio, recompute)
    print(" ".join("%.3f" % x for x in idle))


if __name__ == "__main__":
    main()

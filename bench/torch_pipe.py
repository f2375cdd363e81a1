"""torch_pipe.py - a cgpt trained as pipeline stages by PyTorch's
torch.distributed.pipelining (ScheduleGPipe or Schedule1F1B, the gloo
backend), for bench/pipeline.sh.

The model is tests/torch_check.py's Block (cg's cgpt block: pre-LayerNorm,
causal attention, tanh GELU) with cg's embeddings and untied head, cut as
cg cuts it: stage 0 the embeddings and its blocks, the last stage its
blocks, the final LayerNorm and the head, the blocks of stage i those
from cut i - 1 to cut i (--cuts, N - 1 layers; two stages: --split).
AdamW at 1e-3.  The batches are random bytes of the context's length
(the work does not depend on them).  After one step not timed, STEPS
steps are timed between barriers.  Each rank prints one JSON line: its
rank, seconds, tokens/s, CPU seconds a step (process_time), peak RSS in
MiB (getrusage), and with --ifname the bytes that interface sent and
received over the timed steps (its statistics in /sys/class/net, which
count what crosses the link: a rank alone in its network namespace).

Without --rank, every rank runs on this machine (torch.multiprocessing,
MASTER_ADDR 127.0.0.1); with --rank R, this process is rank R alone, of
--stages, meeting the others at --master (each in a network namespace of
its own, say, with GLOO_SOCKET_IFNAME naming its link).
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B,
                                          ScheduleGPipe)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from torch_check import Block  # noqa: E402

V = 257  # 256 bytes and the end of a text; no conditions here


class Stage(nn.Module):
    """Stage i of n: blocks [a, b), the embeddings on the first, the
    final LayerNorm and the head on the last."""

    def __init__(self, args, i, n, a, b):
        super().__init__()
        self.first, self.last = i == 0, i == n - 1
        self.bf16 = args.wire == "bf16"
        if self.first:
            self.wte = nn.Embedding(V, args.width)
            self.wpe = nn.Embedding(args.context, args.width)
        self.h = nn.ModuleList([Block(args.width, args.heads)
                                for _ in range(a, b)])
        if self.last:
            self.lnf = nn.LayerNorm(args.width)
            self.lm_head = nn.Linear(args.width, V, bias=False)

    def forward(self, x):
        if self.first:
            T = x.shape[1]
            x = self.wte(x) + self.wpe(torch.arange(T))
        elif self.bf16:
            x = x.float()
        for blk in self.h:
            x = blk(x)
        if self.last:
            x = self.lm_head(self.lnf(x))
        elif self.bf16:
            # --wire bf16: what crosses to the next stage, and the
            # gradient that comes back, in bf16; the stage computes f32
            x = x.to(torch.bfloat16)
        return x


def link_bytes(ifname):
    """(tx, rx) bytes of interface ifname so far, or (0, 0) without."""
    if not ifname:
        return 0, 0
    d = "/sys/class/net/%s/statistics/" % ifname
    with open(d + "tx_bytes") as f:
        tx = int(f.read())
    with open(d + "rx_bytes") as f:
        rx = int(f.read())
    return tx, rx


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def worker(rank, a):
    n = a.stages
    if a.rank is None:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
    else:
        os.environ["MASTER_ADDR"] = a.master
    os.environ["MASTER_PORT"] = str(a.port)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1 + rank)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    bounds = [0] + a.cuts + [a.layers]
    mod = Stage(a, rank, n, bounds[rank], bounds[rank + 1])
    stage = PipelineStage(mod, rank, n, torch.device("cpu"))
    Sched = ScheduleGPipe if a.schedule == "gpipe" else Schedule1F1B
    sched = Sched(stage, n_microbatches=a.micro, loss_fn=loss_fn)
    opt = torch.optim.AdamW(mod.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(7)

    def step():
        tokens = torch.randint(0, V, (a.batch, a.context), generator=g)
        targets = torch.randint(0, V, (a.batch, a.context), generator=g)
        opt.zero_grad()
        if rank == 0:
            sched.step(tokens)
        elif rank == n - 1:
            sched.step(target=targets)
        else:
            sched.step()
        opt.step()

    step()
    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    tx0, rx0 = link_bytes(a.ifname)
    for _ in range(a.steps):
        step()
    dist.barrier()
    t1, c1 = time.perf_counter(), time.process_time()
    tx1, rx1 = link_bytes(a.ifname)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rank": rank, "seconds": t1 - t0,
                      "tokens_per_s": a.steps * a.batch * a.context /
                      (t1 - t0),
                      "cpu_s_per_step": (c1 - c0) / a.steps,
                      "params": sum(p.numel() for p in mod.parameters()),
                      "rss_mib": rss,
                      "tx_bytes": tx1 - tx0, "rx_bytes": rx1 - rx0}),
          flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--split", type=int, default=2)
    p.add_argument("--schedule", choices=["gpipe", "1f1b"], default="gpipe")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--wire", choices=["f32", "bf16"], default="f32")
    p.add_argument("--port", type=int, default=29571)
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--cuts", default=None,
                   help="the layers the stages are cut at, a,b,...")
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--master", default="127.0.0.1")
    p.add_argument("--ifname", default=None)
    a = p.parse_args()
    if a.cuts is not None:
        a.cuts = [int(c) for c in a.cuts.split(",")]
    elif a.stages == 2:
        a.cuts = [a.split]
    else:
        a.cuts = [a.layers * i // a.stages for i in range(1, a.stages)]
    if len(a.cuts) != a.stages - 1 or \
            [0] + a.cuts + [a.layers] != sorted([0] + a.cuts + [a.layers]):
        p.error("--cuts: %d increasing layers within 0..%d"
                % (a.stages - 1, a.layers))
    if a.rank is None:
        mp.spawn(worker, args=(a,), nprocs=a.stages, join=True)
    else:
        worker(a.rank, a)


if __name__ == "__main__":
    main()

"""torch_pipe.py - a cgpt trained as two pipeline stages by PyTorch's
torch.distributed.pipelining (ScheduleGPipe or Schedule1F1B, the gloo
backend, two processes on this machine), for bench/pipeline.sh.

The model is tests/torch_check.py's Block (cg's cgpt block: pre-LayerNorm,
causal attention, tanh GELU) with cg's embeddings and untied head, cut as
cg cuts it: stage 0 the embeddings and blocks [0, SPLIT), stage 1 the
rest, the final LayerNorm and the head.  AdamW at 1e-3.  The batches are
random bytes of the context's length (the work does not depend on them).
After one step not timed, STEPS steps are timed between barriers.  Each
rank prints one JSON line: its rank, seconds, tokens/s, CPU seconds
(process_time) and peak RSS in MiB (getrusage).
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


class First(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(V, a.width)
        self.wpe = nn.Embedding(a.context, a.width)
        self.h = nn.ModuleList([Block(a.width, a.heads)
                                for _ in range(a.split)])

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        return x


class Last(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.h = nn.ModuleList([Block(a.width, a.heads)
                                for _ in range(a.layers - a.split)])
        self.lnf = nn.LayerNorm(a.width)
        self.lm_head = nn.Linear(a.width, V, bias=False)

    def forward(self, x):
        for b in self.h:
            x = b(x)
        return self.lm_head(self.lnf(x))


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def worker(rank, a):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1 + rank)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mod = First(a) if rank == 0 else Last(a)
    stage = PipelineStage(mod, rank, 2, torch.device("cpu"))
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
        else:
            sched.step(target=targets)
        opt.step()

    step()
    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        step()
    dist.barrier()
    t1, c1 = time.perf_counter(), time.process_time()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rank": rank, "seconds": t1 - t0,
                      "tokens_per_s": a.steps * a.batch * a.context /
                      (t1 - t0),
                      "cpu_s_per_step": (c1 - c0) / a.steps,
                      "params": sum(p.numel() for p in mod.parameters()),
                      "rss_mib": rss}), flush=True)
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
    p.add_argument("--port", type=int, default=29571)
    a = p.parse_args()
    mp.spawn(worker, args=(a,), nprocs=2, join=True)


if __name__ == "__main__":
    main()

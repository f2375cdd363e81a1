#!/usr/bin/python3
"""torch_ddp.py - PyTorch DistributedDataParallel on cg's CVAE: one process
of a gloo group, trained until the test-set negative ELBO reaches a target.

bench/cluster.sh runs one of these in each of its test hosts (network
namespaces, `ip netns exec`), rank 0 in the first: the model of
bench/torch_cvae.py (lib/arch/cvae/cvae.c's), Adam, each rank a batch of --batch
from its own shard of the training set (a seeded permutation, every
world-th example from the rank's own offset), gradients averaged by DDP
every step, through the communication hook --hook names:

  none       DDP's own all-reduce of f32 gradient buckets
  fp16       the buckets cast to f16 for the all-reduce (fp16_compress_hook)
  powersgd   PowerSGD (Vogels et al. 2019) of rank --psgd-rank, with error
             feedback and warm start, after --psgd-start plain steps
  localsgd   post-local SGD (Lin et al. 2020): --localsgd-start steps of
             DDP's all-reduce, then none (post_localSGD_hook without
             its gradient all-reduce), each rank's Adam stepping alone,
             and the ranks' parameters averaged every --period steps
             (PostLocalSGDOptimizer with a PeriodicModelAverager,
             torch.distributed.algorithms.model_averaging); scored
             only right after an averaging, at least --eval-every steps
             apart

Every --eval-every steps rank 0 scores the test set (as torch_cvae.py: one
noise sample per image, fixed noise) while the clock is stopped on every
rank, and tells the others, by a broadcast, whether the target is reached.
Rank 0 prints one JSON line: steps, training seconds (the steps and their
exchanges, not the evaluations nor the start-up), the last score.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cvae import CVAE, load  # noqa: E402


def score(model, xte, yte, latent, seed):
    """Test-set negative ELBO, nats per image, fixed noise."""
    egen = torch.Generator().manual_seed(seed + 1)
    s = 0.0
    with torch.no_grad():
        for i in range(0, len(xte), 1000):
            x, y = xte[i:i + 1000], yte[i:i + 1000]
            eps = torch.randn(len(x), latent, generator=egen)
            rec, kl = model(x, y, eps)
            s += (rec + kl).double().sum().item()
    return s / len(xte)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="rank 0's address")
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--latent", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--hook", choices=["none", "fp16", "powersgd", "localsgd"],
                    default="none")
    ap.add_argument("--psgd-rank", type=int, default=2)
    ap.add_argument("--psgd-start", type=int, default=10)
    ap.add_argument("--period", type=int, default=50)
    ap.add_argument("--localsgd-start", type=int, default=10)
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--max-seconds", type=float, default=900)
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    dist.init_process_group(
        "gloo", init_method="tcp://%s:%d" % (a.master, a.port),
        rank=a.rank, world_size=a.world)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    ncond = int(max(ytr.max(), yte.max())) + 1
    # the same first weights on every rank (DDP also broadcasts rank 0's)
    model = CVAE(xtr.shape[1], ncond, a.hidden, a.layers, a.latent)
    ddp = DDP(model)
    if a.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif a.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        st = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=a.psgd_rank,
            start_powerSGD_iter=a.psgd_start, use_error_feedback=True,
            warm_start=True)
        ddp.register_comm_hook(st, powerSGD_hook.powerSGD_hook)
    opt = torch.optim.Adam(ddp.parameters(), lr=a.lr)
    avg = None
    if a.hook == "localsgd":
        from torch.distributed.algorithms.ddp_comm_hooks import \
            post_localSGD_hook
        from torch.distributed.algorithms.model_averaging import averagers
        from torch.distributed.optim import PostLocalSGDOptimizer
        st = post_localSGD_hook.PostLocalSGDState(
            process_group=None, subgroup=None,
            start_localSGD_iter=a.localsgd_start,
            post_local_gradient_allreduce=False)
        ddp.register_comm_hook(st, post_localSGD_hook.post_localSGD_hook)
        avg = averagers.PeriodicModelAverager(
            period=a.period, warmup_steps=a.localsgd_start)
        opt = PostLocalSGDOptimizer(optim=opt, averager=avg)

    def averaged():
        # whether the step just taken ended with an averaging (the
        # averager's count went past it)
        if avg is None:
            return True
        k = avg.step - 1
        return k >= a.localsgd_start and \
            (k - a.localsgd_start) % a.period == 0

    gen = torch.Generator().manual_seed(a.seed)
    shard = torch.randperm(len(xtr), generator=gen)[a.rank::a.world]
    rgen = torch.Generator().manual_seed(a.seed * 1000 + a.rank)
    perm, pos = torch.randperm(len(shard), generator=rgen), 0

    train_s, step, nelbo, reached = 0.0, 0, float("nan"), False
    flag = torch.zeros(1)
    while True:
        t0 = time.perf_counter()
        since = 0
        while since < a.eval_every or not averaged():
            if pos + a.batch > len(perm):
                perm, pos = torch.randperm(len(shard), generator=rgen), 0
            idx = shard[perm[pos:pos + a.batch]]
            pos += a.batch
            eps = torch.randn(len(idx), a.latent, generator=rgen)
            rec, kl = ddp(xtr[idx], ytr[idx], eps)
            loss = (rec + kl).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            since += 1
        train_s += time.perf_counter() - t0
        if a.rank == 0:
            nelbo = score(model, xte, yte, a.latent, a.seed)
            reached = nelbo <= a.target
            stop = reached or step >= a.max_steps or train_s >= a.max_seconds
            flag[0] = 1.0 if stop else 0.0
        dist.broadcast(flag, 0)
        if flag[0] > 0:
            break
    if a.rank == 0:
        print(json.dumps({
            "hook": a.hook, "steps": step, "train_s": round(train_s, 3),
            "nelbo": round(nelbo, 3), "reached": reached,
            "examples": step * a.batch * a.world,
            "params": sum(p.numel() for p in model.parameters()),
            "torch": torch.__version__}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""dp_parity.py - one DP-SGD gradient without noise, cg's against
Opacus' and against a pass per example, on the same weights and batch.

Reads cg's initial weights (--init: cg-convert of a cg-init cclf model)
and cg's gradient (--grad: cg-convert of cg-train-step --emit grad
--steps 1 --batch N --example-clip C --example-noise 0 on a shard of N
images: rate 1, every example in the one batch).  Makes the same
gradient with Opacus (make_private, noise 0, clip C, expected batch N:
each example's gradient clipped to C, the sum over N), and once more by
plain autograd one example at a time in float64 (the reference).
Prints one JSON object: for each pair, the largest absolute difference
over every parameter and that over the largest |reference|; each
example's gradient norm (least, median, largest) and how many the clip
reached.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_dp import (classifier, load_cclf_init, load_limit,  # noqa: E402
                      load_safetensors)


def names(net):
    """cg's view names of the classifier's parameters, in order."""
    cv = [m for m in net if isinstance(m, torch.nn.Conv2d)]
    lin = [m for m in net if isinstance(m, torch.nn.Linear)]
    out = []
    for i, m in enumerate(cv):
        out += [("conv.%d.w" % i, m.weight), ("conv.%d.b" % i, m.bias)]
    for i, m in enumerate(lin):
        nm = "hid.%d" % i if i < len(lin) - 1 else "out"
        out += [(nm + ".w", m.weight), (nm + ".b", m.bias)]
    return out


def diff(a, b):
    """Largest |a - b| over every tensor, and over the largest |b|."""
    d = max(float((a[k].double() - b[k].double()).abs().max()) for k in b)
    r = max(float(b[k].double().abs().max()) for k in b)
    return {"max_abs": d, "max_rel": d / r}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--init", required=True)
    ap.add_argument("--grad", required=True)
    ap.add_argument("--limit", type=int, default=256)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--conv", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    x, y = load_limit(a.data, "train", a.limit)
    N = len(x)

    # a pass per example, float64
    ref_net = classifier(784, a.hidden, a.layers, 10, a.conv)
    load_cclf_init(ref_net, a.init)
    ref_net = ref_net.double()
    params = names(ref_net)
    ref = {k: torch.zeros_like(p) for k, p in params}
    norms = []
    for b in range(N):
        ref_net.zero_grad()
        F.cross_entropy(ref_net(x[b:b + 1].double()), y[b:b + 1]).backward()
        n = torch.sqrt(sum((p.grad ** 2).sum() for _, p in params))
        f = min(1.0, a.clip / float(n))
        norms.append(float(n))
        for k, p in params:
            ref[k] += f * p.grad
    for k in ref:
        ref[k] /= N

    # Opacus
    from opacus import PrivacyEngine
    net = classifier(784, a.hidden, a.layers, 10, a.conv)
    load_cclf_init(net, a.init)
    opt = torch.optim.SGD(net.parameters(), lr=0.0)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=N)
    net, opt, _ = PrivacyEngine(accountant="rdp").make_private(
        module=net, optimizer=opt, data_loader=loader, noise_multiplier=0.0,
        max_grad_norm=a.clip, poisson_sampling=False)
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(net(x), y).backward()
    opt.pre_step()
    op = {k: p.grad.detach().clone() for k, p in names(net._module)}

    cg = load_safetensors(a.grad)
    for k in ref:
        if k not in cg or cg[k].shape != ref[k].shape:
            sys.exit("dp_parity.py: %s: no %s of shape %s"
                     % (a.grad, k, tuple(ref[k].shape)))
    norms.sort()
    print(json.dumps({
        "examples": N, "clip": a.clip, "conv": a.conv,
        "parameters": sum(p.numel() for _, p in params),
        "cg_vs_opacus": diff(cg, op), "cg_vs_perexample": diff(cg, ref),
        "opacus_vs_perexample": diff(op, ref),
        "norm_min": norms[0], "norm_median": norms[N // 2],
        "norm_max": norms[-1],
        "clipped": sum(n > a.clip for n in norms)}))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""torch_cclf.py - the PyTorch reference for cg's judge (cclf), on Fashion-MNIST.

The model of lib/arch/cclf/cclf.c, built with torch.nn: pixels x/255 -> layers x
(Linear, ReLU) of width hidden -> Linear to 10 logits; cross-entropy;
PyTorch's default init; Adam at 1e-3 for --epochs, then at 1e-4 for
--epochs2, batch 128, a new shuffle each epoch, as bench/judge.sh trains
the judge.  Prints the test-set cross-entropy and accuracy after each
epoch, one line each, and the total training time.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cvae import load  # noqa: E402  (the IDX reader)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--epochs2", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    layers, d = [], xtr.shape[1]
    for _ in range(a.layers):
        layers += [nn.Linear(d, a.hidden), nn.ReLU()]
        d = a.hidden
    net = nn.Sequential(*layers, nn.Linear(d, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    total = 0.0
    print("%5s %8s %10s %8s" % ("epoch", "lr", "test_xent", "test_acc"))
    for e in range(a.epochs + a.epochs2):
        lr = 1e-3 if e < a.epochs else 1e-4
        for g in opt.param_groups:
            g["lr"] = lr
        t0 = time.time()
        perm = torch.randperm(len(xtr))
        for i in range(0, len(xtr), a.batch):
            idx = perm[i:i + a.batch]
            loss = F.cross_entropy(net(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        total += time.time() - t0
        with torch.no_grad():
            logits = net(xte)
            xent = F.cross_entropy(logits, yte).item()
            acc = (logits.argmax(1) == yte).double().mean().item()
        print("%5d %8g %10.4f %8.4f" % (e + 1, lr, xent, acc), flush=True)
    print("# trained in %.0f s" % total)


if __name__ == "__main__":
    main()

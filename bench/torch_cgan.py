#!/usr/bin/python3
"""torch_cgan.py - PyTorch's same cgan as cg's, timed on Fashion-MNIST.

usage: torch_cgan.py [--steps N] [--warmup N] [--threads N] [--data DIR]

The model of lib/cgan.h in float32: G 64-512-512-784 (the condition's
embedding added to the first layer, ReLU, sigmoid), D 784-512-512 with
leaky ReLU (0.2) and the projection head, every matrix of D divided by
sigma = u^T W v from 5 power iterations that start from the same vector
at every step (under no_grad: u and v held fixed, as cg does); the hinge
loss; one simultaneous step of both nets per batch (L_D's gradient for
D with the fakes detached, L_G's for G, each by torch.autograd.grad),
Adam at 4e-4, betas 0.5 and 0.999, batch 128.  Prints one line: the
examples per second over --steps steps after --warmup.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cvae import read_idx  # noqa: E402

H, Z, K, D, L, ITERS, B = 512, 64, 10, 784, 2, 5, 128


class Gen(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(K, H)
        self.hid = nn.ModuleList([nn.Linear(Z if i == 0 else H, H)
                                  for i in range(L)])
        self.out = nn.Linear(H, D)

    def forward(self, z, y):
        h = F.relu(self.hid[0](z) + self.emb(y))
        for m in self.hid[1:]:
            h = F.relu(m(h))
        return torch.sigmoid(self.out(h))


class Disc(nn.Module):
    def __init__(self):
        super().__init__()
        self.hid = nn.ModuleList([nn.Linear(D if i == 0 else H, H)
                                  for i in range(L)])
        self.psi = nn.Linear(H, 1)
        self.emb = nn.Embedding(K, H)
        g = torch.Generator().manual_seed(1)
        self.v0 = [F.normalize(torch.randn(w.shape[1], generator=g), dim=0)
                   for w in self.mats()]

    def mats(self):
        return [m.weight for m in self.hid] + [self.psi.weight,
                                               self.emb.weight]

    def normalised(self):
        out = []
        for w, v in zip(self.mats(), self.v0):
            with torch.no_grad():
                for _ in range(ITERS):
                    u = F.normalize(w @ v, dim=0)
                    v = F.normalize(w.t() @ u, dim=0)
            out.append(w / (u @ (w @ v)))
        return out

    def forward(self, x, y, ws):
        h = x
        for m, w in zip(self.hid, ws):
            h = F.leaky_relu(F.linear(h, w, m.bias), 0.2)
        return F.linear(h, ws[L], self.psi.bias)[:, 0] + \
            (h * ws[L + 1][y]).sum(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    x8 = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"))
    y8 = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
    x8 = torch.from_numpy(x8.reshape(len(x8), -1).copy())
    ys = torch.from_numpy(y8.astype(np.int64))
    gen, disc = Gen(), Disc()
    gp, dp = list(gen.parameters()), list(disc.parameters())
    opt = torch.optim.Adam(gp + dp, lr=4e-4, betas=(0.5, 0.999))
    perm = torch.randperm(len(x8))

    def step(k):
        i = (k * B) % (len(x8) - B)
        idx = perm[i:i + B]
        x, y = x8[idx].float().div_(255.0), ys[idx]
        fake = gen(torch.randn(B, Z), y)
        ws = disc.normalised()
        s = disc(torch.cat([x, fake.detach()]), torch.cat([y, y]), ws)
        ld = F.relu(1 - s[:B]).mean() + F.relu(1 + s[B:]).mean()
        lg = -disc(fake, y, ws).mean()
        gd = torch.autograd.grad(ld, dp, retain_graph=True)
        gg = torch.autograd.grad(lg, gp)
        for p, g in zip(dp + gp, list(gd) + list(gg)):
            p.grad = g
        opt.step()
        return ld.item()

    for k in range(a.warmup):
        step(k)
    t0 = time.perf_counter()
    for k in range(a.steps):
        step(a.warmup + k)
    dt = time.perf_counter() - t0
    print("torch %s threads %d steps %d seconds %.3f examples/s %.1f"
          % (torch.__version__, a.threads, a.steps, dt, a.steps * B / dt))


if __name__ == "__main__":
    main()

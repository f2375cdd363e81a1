#!/usr/bin/python3
"""torch_cvae.py - the PyTorch reference for cg's CVAE, on Fashion-MNIST.

The model of lib/arch/cvae/cvae.c, built with torch.nn: x (+) onehot(label) ->
layers x (Linear, ReLU) -> Linear heads for mu and logvar; z (+) onehot ->
layers x (Linear, ReLU) -> Linear to 784 logits.  Loss per image: BCE with
logits summed over pixels (pixels x/255 as Bernoulli targets) plus
KL(q(z|x,y) || N(0, I)).  Adam, lr 1e-3, batch 128, PyTorch's default
init.  Prints, per epoch, the mean training loss, the test-set negative
ELBO (nats per image, one eps sample per image) and wall times, as a table
or (--json) one JSON object per line.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CVAE(nn.Module):
    def __init__(self, in_dim, ncond, hidden, layers, latent):
        super().__init__()
        self.ncond = ncond

        def mlp(d):
            out = []
            for _ in range(layers):
                out += [nn.Linear(d, hidden), nn.ReLU()]
                d = hidden
            return nn.Sequential(*out)

        self.enc = mlp(in_dim + ncond)
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.dec = mlp(latent + ncond)
        self.out = nn.Linear(hidden, in_dim)

    def forward(self, x, cond, eps):
        """Per-image rec and kl [B] for images x [B, D] with labels cond
        [B] and noise eps [B, latent]."""
        c = F.one_hot(cond, self.ncond).to(x.dtype)
        h = self.enc(torch.cat([x, c], 1))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.exp(0.5 * logvar) * eps
        logits = self.out(self.dec(torch.cat([z, c], 1)))
        rec = F.binary_cross_entropy_with_logits(
            logits, x, reduction="none").sum(1)
        kl = -0.5 * (1 + logvar - mu * mu - logvar.exp()).sum(1)
        return rec, kl


def read_idx(path):
    """An IDX file (gzip) as a numpy uint8 array of its shape."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    shape = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    n = int(np.prod(shape))
    body = data[4 + 4 * ndim:]
    if len(body) != n:
        raise ValueError("%s: %d bytes of data, shape says %d"
                         % (path, len(body), n))
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


def load(data_dir, split):
    x = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte.gz" % split))
    y = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte.gz" % split))
    x = torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(y.astype(np.int64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--latent", type=int, default=32)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per epoch instead of a table")
    a = ap.parse_args()
    if min(a.epochs, a.threads, a.hidden, a.layers, a.latent, a.batch) < 1:
        ap.error("--epochs, --threads, --hidden, --layers, --latent and "
                 "--batch must be positive")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    ncond = int(max(ytr.max(), yte.max())) + 1
    model = CVAE(xtr.shape[1], ncond, a.hidden, a.layers, a.latent)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    nparams = sum(p.numel() for p in model.parameters())
    if not a.json:
        print("# torch %s, %d threads, %d params, hidden %d x %d, latent %d"
              % (torch.__version__, a.threads, nparams, a.hidden, a.layers,
                 a.latent))
        print("%5s %12s %12s %9s %8s" % ("epoch", "train_loss", "test_nelbo",
                                         "train_s", "eval_s"))
    total = 0.0
    for epoch in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        lsum = 0.0
        for i in range(0, len(xtr), a.batch):
            idx = perm[i:i + a.batch]
            eps = torch.randn(len(idx), a.latent, generator=gen)
            rec, kl = model(xtr[idx], ytr[idx], eps)
            loss = (rec + kl).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            lsum += loss.item() * len(idx)
        t1 = time.perf_counter()

        # Test-set negative ELBO, fixed noise so epochs compare.
        model.eval()
        egen = torch.Generator().manual_seed(a.seed + 1)
        nelbo = 0.0
        with torch.no_grad():
            for i in range(0, len(xte), 1000):
                x, y = xte[i:i + 1000], yte[i:i + 1000]
                eps = torch.randn(len(x), a.latent, generator=egen)
                rec, kl = model(x, y, eps)
                nelbo += (rec + kl).double().sum().item()
        t2 = time.perf_counter()
        total += t2 - t0
        row = {"epoch": epoch, "train_loss": lsum / len(xtr),
               "test_nelbo": nelbo / len(xte), "train_s": t1 - t0,
               "eval_s": t2 - t1, "total_s": total, "threads": a.threads}
        if a.json:
            print(json.dumps(row))
        else:
            print("%5d %12.3f %12.3f %9.2f %8.2f" % (
                epoch, row["train_loss"], row["test_nelbo"], row["train_s"],
                row["eval_s"]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()

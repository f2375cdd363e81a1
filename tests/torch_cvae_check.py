#!/usr/bin/python3
"""torch_cvae_check.py - cg's CVAE loss and gradients against PyTorch's.

usage: torch_cvae_check.py [DIR | CVAE_DUMP]

DIR holds what tests/unit/cvae_dump wrote (config.txt, views.txt,
params.bin, x.bin, cond.bin, eps.bin, loss.txt, grad.bin).  Given the
cvae_dump program instead (default: $CVAE_DUMP, else unit/cvae_dump beside
this script), it is run on a few configs into temporary directories.  The
same architecture is built with torch.nn in float64, loaded with cg's
parameters in view order, and run on the same x, cond and eps; the loss and
every parameter gradient must match within atol + rtol*|ref|.

Exit status: 0 pass, 1 mismatch or error, 77 (skip) if torch is missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print("torch_cvae_check: skipped: %s" % e)
    sys.exit(77)

LOSS_RTOL, LOSS_ATOL = 1e-5, 1e-5
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-5

# in_dim ncond hidden layers latent batch seed, when running cvae_dump
CONFIGS = [
    ["20", "4", "16", "2", "5", "6", "1"],
    ["33", "10", "24", "1", "7", "9", "2"],
    ["12", "3", "8", "3", "2", "4", "3"],
]


class CVAE(nn.Module):
    """The architecture of lib/cvae.c (and of bench/torch_cvae.py)."""

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

    def named_linears(self):
        """(cg name, nn.Linear) in cg's buffer order."""
        enc = [m for m in self.enc if isinstance(m, nn.Linear)]
        dec = [m for m in self.dec if isinstance(m, nn.Linear)]
        return ([("enc.%d" % i, m) for i, m in enumerate(enc)] +
                [("enc.mu", self.mu), ("enc.logvar", self.logvar)] +
                [("dec.%d" % i, m) for i, m in enumerate(dec)] +
                [("dec.out", self.out)])

    def loss(self, x, cond, eps):
        """Batch means of (rec + kl), rec and kl."""
        c = F.one_hot(cond, self.ncond).to(x.dtype)
        h = self.enc(torch.cat([x, c], 1))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.exp(0.5 * logvar) * eps
        logits = self.out(self.dec(torch.cat([z, c], 1)))
        rec = F.binary_cross_entropy_with_logits(
            logits, x, reduction="none").sum(1)
        kl = -0.5 * (1 + logvar - mu * mu - logvar.exp()).sum(1)
        return (rec + kl).mean(), rec.mean(), kl.mean()


def read_kv(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            out[k] = v
    return out


def read_bin(d, name, dtype):
    return np.fromfile(os.path.join(d, name), dtype=dtype)


def check(d):
    """Compare one dump directory; returns True if it matches."""
    cfg = {k: int(v) for k, v in read_kv(os.path.join(d, "config.txt")).items()}
    want = {k: float(v) for k, v in read_kv(os.path.join(d, "loss.txt")).items()}
    B, D, Z = cfg["batch"], cfg["in_dim"], cfg["latent"]
    params = read_bin(d, "params.bin", "<f4")
    grad = read_bin(d, "grad.bin", "<f4")
    x = torch.from_numpy(read_bin(d, "x.bin", "<f4").astype(np.float64))
    cond = torch.from_numpy(read_bin(d, "cond.bin", "<i4").astype(np.int64))
    eps = torch.from_numpy(read_bin(d, "eps.bin", "<f4").astype(np.float64))
    if (params.size != cfg["nparams"] or grad.size != cfg["nparams"] or
            x.numel() != B * D or eps.numel() != B * Z or cond.numel() != B):
        print("torch_cvae_check: %s: file sizes do not match config.txt" % d)
        return False

    model = CVAE(D, cfg["ncond"], cfg["hidden"], cfg["layers"], Z).double()
    views = []
    with open(os.path.join(d, "views.txt")) as f:
        for line in f:
            w = line.split()
            views.append((w[0], int(w[1]), int(w[2]), [int(s) for s in w[3:]]))
    tensors = []
    for name, m in model.named_linears():
        tensors += [(name + ".w", m.weight), (name + ".b", m.bias)]
    if [v[0] for v in views] != [t[0] for t in tensors]:
        print("torch_cvae_check: %s: view names differ from the model's" % d)
        return False

    off = 0
    with torch.no_grad():
        for (name, voff, n, shape), (_, p) in zip(views, tensors):
            if voff != off or list(p.shape) != shape or p.numel() != n:
                print("torch_cvae_check: %s: view %s: offset %d shape %s, "
                      "model wants %d %s" % (d, name, voff, shape, off,
                                             list(p.shape)))
                return False
            p.copy_(torch.from_numpy(
                params[off:off + n].astype(np.float64)).view(p.shape))
            off += n
    if off != params.size:
        print("torch_cvae_check: %s: views cover %d of %d params"
              % (d, off, params.size))
        return False

    loss, rec, kl = model.loss(x.view(B, D), cond, eps.view(B, Z))
    loss.backward()

    ok = True
    print("%s: in=%d cond=%d hidden=%d layers=%d latent=%d batch=%d"
          % (d, D, cfg["ncond"], cfg["hidden"], cfg["layers"], Z, B))
    for key, ref in (("loss", loss), ("rec", rec), ("kl", kl)):
        ref = ref.item()
        diff = abs(want[key] - ref)
        good = diff <= LOSS_ATOL + LOSS_RTOL * abs(ref)
        ok &= good
        print("  %-4s %-12s cg %.9g torch %.9g diff %.3g"
              % ("ok" if good else "FAIL", key, want[key], ref, diff))
    worst_name, worst = "", 0.0
    off = 0
    for (name, _, n, _), (_, p) in zip(views, tensors):
        ref = p.grad.detach().reshape(-1).numpy()
        got = grad[off:off + n].astype(np.float64)
        off += n
        diff = np.abs(got - ref)
        ratio = (diff / (GRAD_ATOL + GRAD_RTOL * np.abs(ref))).max()
        good = ratio <= 1
        ok &= bool(good)
        print("  %-4s %-12s n=%-5d max |diff| %.3g (%.3g of tolerance)"
              % ("ok" if good else "FAIL", name, n, diff.max(), ratio))
        if diff.max() > worst:
            worst_name, worst = name, diff.max()
    print("  largest gradient difference %.3g in %s" % (worst, worst_name))
    return ok


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help")):
        print("usage: torch_cvae_check.py [DIR | CVAE_DUMP]",
              file=sys.stderr if len(sys.argv) > 2 else sys.stdout)
        sys.exit(2 if len(sys.argv) > 2 else 0)
    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    target = (sys.argv[1] if len(sys.argv) == 2 else
              os.environ.get("CVAE_DUMP", os.path.join(here, "unit", "cvae_dump")))
    if os.path.isdir(target):
        ok = check(target)
    elif os.access(target, os.X_OK):
        ok = True
        for args in CONFIGS:
            with tempfile.TemporaryDirectory() as d:
                r = subprocess.run([target, d] + args)
                if r.returncode != 0:
                    print("torch_cvae_check: %s failed (%d)"
                          % (target, r.returncode))
                    ok = False
                    continue
                ok &= check(d)
    else:
        print("torch_cvae_check: %s: not a dump directory nor a program"
              % target)
        sys.exit(1)
    print("torch_cvae_check: %s" % ("pass" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""torch_cgpt_check.py - cg's cgpt logits, loss and gradients against PyTorch's.

usage: torch_cgpt_check.py [DIR | CGPT_DUMP]

DIR holds what tests/unit/cgpt_dump wrote (config.txt, views.txt,
params.bin, tokens.bin, targets.bin, weight.bin, logits.bin, loss.txt,
grad.bin).  Given the cgpt_dump program instead (default: $CGPT_DUMP, else
unit/cgpt_dump beside this script), it is run on a few configs (tied and
untied, one head and several, fewer positions than the context) into
temporary directories.  The same architecture is built here from torch.nn
(nn.Embedding, nn.LayerNorm, nn.Linear, nn.GELU(approximate='tanh') and
causal attention written out) in float64, loaded with cg's parameters in
view order, and run on the same tokens; the logits, the loss
sum(weight * cross-entropy) and every parameter gradient must match
within atol + rtol*|ref|.

Exit status: 0 pass, 1 mismatch or error, 77 (skip) if torch is missing.
"""
import math
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
    print("torch_cgpt_check: skipped: %s" % e)
    sys.exit(77)

LOGIT_RTOL, LOGIT_ATOL = 1e-4, 1e-5
LOSS_RTOL, LOSS_ATOL = 1e-5, 1e-6
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-7

# ncond context width layers heads tied batch positions seed
CONFIGS = [
    ["3", "8", "16", "2", "2", "0", "3", "7", "1"],
    ["2", "6", "12", "1", "3", "1", "2", "6", "2"],
    ["5", "16", "32", "3", "4", "0", "4", "16", "3"],
    ["1", "12", "24", "2", "1", "1", "3", "5", "4"],
]


class Block(nn.Module):
    """Pre-LayerNorm block: x + attn(ln1(x)), then + mlp(ln2(x))."""

    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.gelu = nn.GELU(approximate="tanh")
        self.mproj = nn.Linear(4 * C, C)

    def attn(self, x):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mproj(self.gelu(self.fc(self.ln2(x))))


class CGPT(nn.Module):
    """The model of lib/cgpt.c (and of bench/torch_cgpt.py)."""

    def __init__(self, V, T, C, L, NH, tied):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        self.lm_head = None if tied else nn.Linear(C, V, bias=False)

    def named_tensors(self):
        """(cg view name, parameter) in cg's buffer order."""
        out = [("wte", self.wte.weight), ("wpe", self.wpe.weight)]
        for i, b in enumerate(self.h):
            for name, p in (("ln1.w", b.ln1.weight), ("ln1.b", b.ln1.bias),
                            ("attn.qkv.w", b.qkv.weight),
                            ("attn.qkv.b", b.qkv.bias),
                            ("attn.proj.w", b.proj.weight),
                            ("attn.proj.b", b.proj.bias),
                            ("ln2.w", b.ln2.weight), ("ln2.b", b.ln2.bias),
                            ("mlp.fc.w", b.fc.weight),
                            ("mlp.fc.b", b.fc.bias),
                            ("mlp.proj.w", b.mproj.weight),
                            ("mlp.proj.b", b.mproj.bias)):
                out.append(("h.%d.%s" % (i, name), p))
        out += [("lnf.w", self.lnf.weight), ("lnf.b", self.lnf.bias)]
        if self.lm_head is not None:
            out.append(("lm_head.w", self.lm_head.weight))
        return out

    def forward(self, tokens):
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        x = self.lnf(x)
        if self.lm_head is None:
            return x @ self.wte.weight.t()
        return self.lm_head(x)


def read_kv(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            out[k] = v
    return out


def read_bin(d, name, dtype):
    return np.fromfile(os.path.join(d, name), dtype=dtype)


def compare(label, got, ref, rtol, atol):
    """Print one line; True if every |got - ref| <= atol + rtol |ref|."""
    diff = np.abs(got - ref)
    ratio = float((diff / (atol + rtol * np.abs(ref))).max())
    good = ratio <= 1
    print("  %-4s %-18s n=%-6d max |diff| %.3g (%.3g of tolerance)"
          % ("ok" if good else "FAIL", label, got.size, diff.max(), ratio))
    return good, float(diff.max())


def check(d):
    """Compare one dump directory; returns True if it matches."""
    cfg = {k: int(v) for k, v in read_kv(os.path.join(d, "config.txt")).items()}
    want = float(read_kv(os.path.join(d, "loss.txt"))["loss"])
    B, T, V = cfg["batch"], cfg["positions"], cfg["vocab"]
    params = read_bin(d, "params.bin", "<f4")
    grad = read_bin(d, "grad.bin", "<f4")
    logits = read_bin(d, "logits.bin", "<f4").astype(np.float64)
    tokens = torch.from_numpy(read_bin(d, "tokens.bin", "<i4").astype(np.int64))
    targets = torch.from_numpy(read_bin(d, "targets.bin", "<i4").astype(np.int64))
    weight = torch.from_numpy(read_bin(d, "weight.bin", "<f4").astype(np.float64))
    if (params.size != cfg["nparams"] or grad.size != cfg["nparams"] or
            logits.size != B * T * V or tokens.numel() != B * T or
            targets.numel() != B * T or weight.numel() != B * T or
            V != 257 + cfg["ncond"]):
        print("torch_cgpt_check: %s: file sizes do not match config.txt" % d)
        return False

    model = CGPT(V, cfg["context"], cfg["width"], cfg["layers"],
                 cfg["heads"], cfg["tied"]).double()
    views = []
    with open(os.path.join(d, "views.txt")) as f:
        for line in f:
            w = line.split()
            views.append((w[0], int(w[1]), int(w[2]), [int(s) for s in w[3:]]))
    tensors = model.named_tensors()
    if [v[0] for v in views] != [t[0] for t in tensors]:
        print("torch_cgpt_check: %s: view names differ from the model's" % d)
        return False
    off = 0
    with torch.no_grad():
        for (name, voff, n, shape), (_, p) in zip(views, tensors):
            if voff != off or list(p.shape) != shape or p.numel() != n:
                print("torch_cgpt_check: %s: view %s: offset %d shape %s, "
                      "model wants %d %s" % (d, name, voff, shape, off,
                                             list(p.shape)))
                return False
            p.copy_(torch.from_numpy(
                params[off:off + n].astype(np.float64)).view(p.shape))
            off += n
    if off != params.size:
        print("torch_cgpt_check: %s: views cover %d of %d params"
              % (d, off, params.size))
        return False

    out = model(tokens.view(B, T))
    # Weight-0 positions carry target -1: never read, as in cg.
    tgt = torch.where(weight > 0, targets, torch.zeros_like(targets))
    ce = F.cross_entropy(out.view(B * T, V), tgt, reduction="none")
    loss = (weight * ce).sum()
    loss.backward()

    print("%s: ncond=%d context=%d width=%d layers=%d heads=%d tied=%d "
          "batch=%d positions=%d"
          % (d, cfg["ncond"], cfg["context"], cfg["width"], cfg["layers"],
             cfg["heads"], cfg["tied"], B, T))
    ok, _ = compare("logits", logits, out.detach().reshape(-1).numpy(),
                    LOGIT_RTOL, LOGIT_ATOL)
    ref = loss.item()
    diff = abs(want - ref)
    good = diff <= LOSS_ATOL + LOSS_RTOL * abs(ref)
    ok &= good
    print("  %-4s %-18s cg %.9g torch %.9g diff %.3g"
          % ("ok" if good else "FAIL", "loss", want, ref, diff))
    worst_name, worst = "", 0.0
    off = 0
    for (name, _, n, _), (_, p) in zip(views, tensors):
        got = grad[off:off + n].astype(np.float64)
        off += n
        good, dmax = compare(name, got, p.grad.detach().reshape(-1).numpy(),
                             GRAD_RTOL, GRAD_ATOL)
        ok &= good
        if dmax > worst:
            worst_name, worst = name, dmax
    print("  largest gradient difference %.3g in %s" % (worst, worst_name))
    return ok


def main():
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help")):
        print("usage: torch_cgpt_check.py [DIR | CGPT_DUMP]",
              file=sys.stderr if len(sys.argv) > 2 else sys.stdout)
        sys.exit(2 if len(sys.argv) > 2 else 0)
    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    target = (sys.argv[1] if len(sys.argv) == 2 else
              os.environ.get("CGPT_DUMP", os.path.join(here, "unit", "cgpt_dump")))
    if os.path.isdir(target):
        ok = check(target)
    elif os.access(target, os.X_OK):
        ok = True
        for args in CONFIGS:
            with tempfile.TemporaryDirectory() as d:
                r = subprocess.run([target, d] + args)
                if r.returncode != 0:
                    print("torch_cgpt_check: %s failed (%d)"
                          % (target, r.returncode))
                    ok = False
                    continue
                ok &= check(d)
    else:
        print("torch_cgpt_check: %s: not a dump directory nor a program"
              % target)
        sys.exit(1)
    print("torch_cgpt_check: %s" % ("pass" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

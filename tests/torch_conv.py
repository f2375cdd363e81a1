#!/usr/bin/python3
"""torch_conv.py - cg's convolutional kernels against PyTorch's.

usage: torch_conv.py CONV_DUMP

Runs CONV_DUMP (tests/unit/conv_dump) into a temporary directory and, for
every case it wrote, rebuilds the same computation from torch.nn.functional
in float64 (conv2d, group_norm, interpolate nearest x2, silu) on the same
inputs: the maps, channels-last in cg, are permuted to PyTorch's NCHW and
back; weights are PyTorch's layout in both.  The forward output and every
gradient (the backward of the dumped dout) must match within atol +
rtol*|ref|; cg computes in float, so rtol 1e-4 covers sums of up to a few
hundred terms, with atol 1e-5 for entries that cancel.

Exit status: 0 pass, 1 mismatch or error, 77 (skip) if torch is missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print("torch_conv: skipped: %s" % e)
    sys.exit(77)

RTOL, ATOL = 1e-4, 1e-5


def read_case(d, n):
    meta, arrays = {}, {}
    with open(os.path.join(d, "%d.txt" % n)) as f:
        for line in f:
            k, *v = line.split()
            if k == "array":
                a = np.fromfile(os.path.join(d, "%d.%s.bin" % (n, v[0])),
                                dtype="<f4")
                if a.size != int(v[1]):
                    raise ValueError("%d.%s: %d floats, %s said"
                                     % (n, v[0], a.size, v[1]))
                arrays[v[0]] = torch.from_numpy(a.astype(np.float64))
            else:
                meta[k] = v[0] if k == "op" else int(v[0])
    return meta, arrays


def nchw(t, B, H, W, C):
    return t.reshape(B, H, W, C).permute(0, 3, 1, 2).contiguous()


def nhwc(t):
    return t.permute(0, 2, 3, 1).reshape(-1)


def leaf(t):
    return t.clone().requires_grad_(True)


def run(m, a):
    """(name, cg's, PyTorch's) for every output and gradient of a case."""
    op = m["op"]
    B, H, W = m["B"], m["H"], m["W"]
    C = m["C"]
    x = leaf(nchw(a["x"], B, H, W, C))
    if op == "conv":
        K = m["K"]
        w = leaf(a["w"].reshape(m["OC"], C, K, K))
        b = leaf(a["b"])
        y = F.conv2d(x, w, b, stride=m["stride"], padding=m["pad"])
        y.backward(nchw(a["dout"], B, m["OH"], m["OW"], m["OC"]))
        return [("out", a["out"], nhwc(y.detach())),
                ("dx", a["dx"], nhwc(x.grad)),
                ("dw", a["dw"], w.grad.reshape(-1)),
                ("db", a["db"], b.grad)]
    if op == "groupnorm":
        g, be = leaf(a["gamma"]), leaf(a["beta"])
        y = F.group_norm(x, m["G"], g, be, eps=1e-5)
        y.backward(nchw(a["dout"], B, H, W, C))
        return [("out", a["out"], nhwc(y.detach())),
                ("dx", a["dx"], nhwc(x.grad)),
                ("dgamma", a["dgamma"], g.grad),
                ("dbeta", a["dbeta"], be.grad)]
    if op == "upsample2":
        y = F.interpolate(x, scale_factor=2, mode="nearest")
        y.backward(nchw(a["dout"], B, 2 * H, 2 * W, C))
        return [("out", a["out"], nhwc(y.detach())),
                ("dx", a["dx"], nhwc(x.grad))]
    if op == "silu":
        y = F.silu(x)
        y.backward(nchw(a["dout"], B, H, W, C))
        return [("out", a["out"], nhwc(y.detach())),
                ("dx", a["dx"], nhwc(x.grad))]
    raise ValueError("unknown op %s" % op)


def main():
    if len(sys.argv) != 2:
        print("usage: torch_conv.py CONV_DUMP", file=sys.stderr)
        return 1
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.argv[1], d], check=True)
        n = 0
        while os.path.exists(os.path.join(d, "%d.txt" % n)):
            m, a = read_case(d, n)
            desc = " ".join("%s=%s" % kv for kv in m.items())
            for name, got, ref in run(m, a):
                r = ((got - ref).abs() / (ATOL + RTOL * ref.abs())).max()
                ok = r.item() <= 1
                bad += not ok
                print("%-4s %-60s %-6s worst %.3g of tolerance"
                      % ("ok" if ok else "FAIL", desc, name, r.item()))
            n += 1
    if n == 0:
        print("torch_conv: conv_dump wrote no case")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

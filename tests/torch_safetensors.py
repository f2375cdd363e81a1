#!/usr/bin/python3
"""torch_safetensors.py - a cgpt model exported by cg-convert, loaded into
the PyTorch model of bench/torch_cgpt.py, gives cg's logits.

usage: torch_safetensors.py MODEL_DUMP CG_CONVERT

For a few configs (tied and untied, one head and several, fewer positions
than the context), MODEL_DUMP (tests/unit/model_dump) writes a cgpt model
(model.cgm), token inputs and cg's logits for them into a temporary
directory; CG_CONVERT writes the model as model.safetensors.  That file
is read with the safetensors package (safetensors.torch) where it is
importable, else with a few lines of struct and json here; bench/
torch_cgpt.py's CGPT is built from the configuration in the cg.json of
its metadata, in float64, every one of its tensors taken by name from the
file (and no tensor of the file left unused), and run on the same tokens.
Its logits must match cg's within atol + rtol*|ref| (tests/torch_check.py
explains the tolerances: cg computes in float).

Exit status: 0 pass, 1 mismatch or error, 77 (skip) if torch is missing.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print("torch_safetensors: skipped: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "bench"))
import torch_cgpt  # noqa: E402

CONFIGS = [
    ["ncond=3", "context=8", "width=16", "layers=2", "heads=2", "tied=0",
     "batch=3", "positions=7", "seed=1"],
    ["ncond=2", "context=6", "width=12", "layers=1", "heads=3", "tied=1",
     "batch=2", "positions=6", "seed=2"],
    ["ncond=5", "context=16", "width=32", "layers=3", "heads=4", "tied=0",
     "batch=4", "positions=16", "seed=3"],
]
RTOL, ATOL = 1e-4, 1e-5


def read_plain(path):
    """(metadata, {name: float64 tensor}) of an all-F32 safetensors file,
    read by hand."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            raise ValueError("%s: dtype %s" % (name, t["dtype"]))
        b, e = t["data_offsets"]
        a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4")
        out[name] = torch.from_numpy(a.astype(np.float64)).view(t["shape"])
    return meta, out


def read_file(path):
    """What the safetensors package reads, where it is importable."""
    try:
        from safetensors import safe_open
        from safetensors.torch import load_file
    except ImportError:
        return read_plain(path) + ("struct and json",)
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    return meta, load_file(path), "the safetensors package"


def check(dump, convert, args, d):
    subprocess.run([dump, d, "cgpt"] + args, check=True)
    st = os.path.join(d, "model.safetensors")
    subprocess.run([convert, os.path.join(d, "model.cgm"), st], check=True)
    meta, tensors, how = read_file(st)
    cfg = json.loads(meta["cg.json"])["config"]
    case = dict(a.split("=") for a in args)
    B, T = int(case["batch"]), int(case["positions"])
    V = 256 + cfg["ncond"] + 1
    model = torch_cgpt.CGPT(V, cfg["context"], cfg["width"], cfg["layers"],
                            cfg["heads"], cfg["tied"]).double()
    left = set(tensors)
    with torch.no_grad():
        for name, p, _ in model.named_tensors():
            t = tensors[name]
            if list(t.shape) != list(p.shape):
                raise ValueError("%s: shape %s, the model's %s"
                                 % (name, list(t.shape), list(p.shape)))
            p.copy_(t.double())
            left.discard(name)
    if left:
        raise ValueError("tensors the model does not have: %s"
                         % sorted(left))
    tok = np.fromfile(os.path.join(d, "tokens.bin"), dtype="<i4")
    want = np.fromfile(os.path.join(d, "logits.bin"), dtype="<f4")
    with torch.no_grad():
        got = model(torch.from_numpy(tok.astype(np.int64)).view(B, T))
    got = got.reshape(-1).numpy()
    if got.size != want.size:
        raise ValueError("%d logits, cg wrote %d" % (got.size, want.size))
    diff = np.abs(got - want.astype(np.float64))
    ratio = float((diff / (ATOL + RTOL * np.abs(got))).max())
    good = ratio <= 1
    print("  %-4s %s (read with %s): %d logits, max |diff| %.3g (%.3g of "
          "tolerance)" % ("ok" if good else "FAIL", " ".join(args), how,
                          got.size, diff.max(), ratio))
    return good


def main():
    if len(sys.argv) != 3:
        print("usage: torch_safetensors.py MODEL_DUMP CG_CONVERT",
              file=sys.stderr)
        return 2
    ok = True
    for args in CONFIGS:
        with tempfile.TemporaryDirectory() as d:
            try:
                ok &= check(sys.argv[1], sys.argv[2], args, d)
            except (subprocess.CalledProcessError, OSError, KeyError,
                    ValueError) as e:
                print("torch_safetensors: %s: %s" % (" ".join(args), e))
                ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

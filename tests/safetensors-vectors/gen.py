#!/usr/bin/env python3
"""gen.py - remake the safetensors test vector (tests/safetensors-vectors/).

vectors.safetensors is written by the safetensors package itself (the
reference implementation, its Rust writer behind the Python binding), not
by cg, so that tests/031-safetensors.bats checks cg-convert against an
independent writer: its tensors are f32, f16, bf16 (bit patterns rounded
here to nearest even, since numpy has no bfloat16), u8, i8, u32 and a
scalar, with nan, infinities, -0 and subnormals among them, and its
metadata is foreign ({"format": "pt"}, no cg manifest).
expected.txt holds what cg must read from it: per tensor a line
"NAME DTYPE SHAPE" (cg's names, "scalar" for no dimensions) and a line
of its values in storage order, printed as cg-inspect --tensor prints
them (%.9g for floats, integers exactly).  Python is needed only to
remake them:

    pip install safetensors numpy
    python3 tests/safetensors-vectors/gen.py tests/safetensors-vectors

Output is a pure function of this script.
"""
import os
import struct
import sys

import numpy as np
from safetensors import TensorSpec, deserialize, serialize_file


def bf16_bits(x):
    """The bf16 nearest f32 x, ties to even, as its 16 bits."""
    u = struct.unpack("<I", struct.pack("<f", float(np.float32(x))))[0]
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF):
        return (u >> 16) | 0x40  # a quiet nan
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def bf16_value(b):
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def shown(x, integer):
    if integer:
        return "%d" % x
    x = float(x)
    if x != x:
        return "nan"
    return "%.9g" % x


def main(out):
    nan, inf = float("nan"), float("inf")
    f32 = np.array([[1.0, -0.0, 1.0 / 3, 1e-45], [3.4028235e38, -inf, nan,
                    -2.5]], dtype=np.float32)
    f16 = np.array([1.0, -2.5, 0.1, 65504.0, 2.0 ** -24, -inf],
                   dtype=np.float16)
    bvals = [1.0, -3.14159, 1e-3, 3.0e38, -0.0, 7.5]
    bf16 = np.array([bf16_bits(v) for v in bvals], dtype=np.uint16)
    u8 = np.array([[0, 1], [254, 255]], dtype=np.uint8)
    i8 = np.array([-128, -1, 0, 127], dtype=np.int8)
    u32 = np.array([0, 7, 4294967295], dtype=np.uint32)
    scalar = np.array(0.75, dtype=np.float32)
    # (name, array, safetensors dtype, cg dtype, values as cg prints them)
    tensors = [
        ("layer.0.weight", f32, "float32", "f32",
         [shown(v, 0) for v in f32.ravel()]),
        ("layer.0.half", f16, "float16", "f16",
         [shown(v, 0) for v in f16.ravel()]),
        ("layer.1.bf", bf16, "bfloat16", "bf16",
         [shown(bf16_value(int(b)), 0) for b in bf16]),
        ("mask", u8, "uint8", "u8", [shown(v, 1) for v in u8.ravel()]),
        ("small", i8, "int8", "i8", [shown(v, 1) for v in i8]),
        ("index", u32, "uint32", "u32", [shown(v, 1) for v in u32]),
        ("temperature", scalar, "float32", "f32", [shown(scalar, 0)]),
    ]
    specs = {}
    for name, a, dt, _, _ in tensors:
        assert a.flags.c_contiguous  # the writer reads data_ptr as is
        specs[name] = TensorSpec(dtype=dt, shape=a.shape,
                                 data_ptr=a.ctypes.data, data_len=a.nbytes)
    # one pair: the reference writer orders several as its hash map does,
    # differently from run to run
    meta = {"format": "pt"}
    serialize_file(specs, os.path.join(out, "vectors.safetensors"),
                   metadata=meta)
    # the shapes the package itself reads back are the ones expected
    with open(os.path.join(out, "vectors.safetensors"), "rb") as fp:
        back = dict(deserialize(fp.read()))
    for name, a, _, _, _ in tensors:
        assert back[name]["shape"] == list(a.shape), name
    with open(os.path.join(out, "expected.txt"), "w") as fp:
        for name, a, _, cg, vals in tensors:
            shape = "x".join(str(d) for d in a.shape) or "scalar"
            fp.write("%s %s %s\n%s\n" % (name, cg, shape, " ".join(vals)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")

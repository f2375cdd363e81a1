#!/usr/bin/env python3
"""gen.py - remake the codec test vectors (tests/codec-vectors/*.txt).

The vectors are the expected results of cg's codec table made by
implementations independent of lib/core/dtype.c: numpy's float16 casts (f16),
exact nearest-value rounding in Python (bf16, the integer dtypes, and the
decoding of integers to f32), and the quantizers of the gguf package
(gguf.quants, written as a transcription of ggml's reference
quantize_row_q8_0_reference / quantize_row_q4_0_reference) for q8_0 and q4_0,
and for q2_0 (cg's own: q4_0's rule at four levels) a numpy transcription
of the rule as cg.h states it, in float32 arithmetic; q4_1 by gguf's
quantizer too (quantize_row_q4_1_reference), the sign of a zero minimum
or scale taken as ggml's C takes it.
tests/unit/test_codec reads the stored files; Python is needed only to
remake them:

    pip install numpy gguf
    python3 tests/codec-vectors/gen.py tests/codec-vectors

Output is a pure function of this script (fixed seed).  Each file has one
check per line, hex little-endian throughout:

    enc X1 .. Xb = BYTES   b f32 inputs (bit patterns) encode to one block
    dec BYTES = Y1 .. Yb   one block decodes to b f32 (bit patterns)
    nan X1 .. Xb           encoding refuses these inputs (returns -1)

b is the dtype's block size (1 for plain types, 32 for q8_0 and q4_0).
"""
import os
import struct
import sys

import numpy as np

F32_MAX = float(np.finfo(np.float32).max)
NAN = float("nan")
INF = float("inf")


def f32(x):
    """The f32 nearest x (Python float) as a Python float."""
    return float(np.float32(x))


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_bits(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def hexbytes(b):
    return bytes(b).hex()


def hexf32(vals):
    return " ".join("%08x" % bits(v) for v in vals)


def hexf32_bits(us):
    return " ".join("%08x" % u for u in us)


class Out:
    def __init__(self, path, name, block):
        self.f = open(path, "w")
        self.block = block
        self.f.write("# %s: made by tests/codec-vectors/gen.py; do not edit\n"
                     % name)

    def enc(self, xs, data):
        assert len(xs) == self.block
        self.f.write("enc %s = %s\n" % (hexf32(xs), hexbytes(data)))

    def dec(self, data, ys_bits):
        assert len(ys_bits) == self.block
        self.f.write("dec %s = %s\n" % (hexbytes(data), hexf32_bits(ys_bits)))

    def nan(self, xs):
        self.f.write("nan %s\n" % hexf32(xs))

    def close(self):
        self.f.close()


rng = np.random.default_rng(20261201)


def some_floats():
    """Edge cases of f32 and a spread of ordinary values (all f32)."""
    v = [0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.5, 1e-3, -7.25,
         65504.0, 65505.0, 65519.0, 65520.0, 1e6, -1e6, 1e30, -1e30,
         F32_MAX, -F32_MAX, INF, -INF,
         2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -26,
         2.0 ** -126, 2.0 ** -149, -(2.0 ** -149), 1e-40,
         1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
         1 + 2.0 ** -8 + 2.0 ** -20, 3.3895314e38, 3.3961776e38]
    v += list(rng.standard_normal(200) * 10.0 ** rng.integers(-8, 8, 200))
    v += list(rng.uniform(-1, 1, 50))
    return [f32(x) for x in v]


# ------------------------------------------------------------------- f32

def gen_f32(out):
    for x in some_floats() + [NAN]:
        out.enc([x], struct.pack("<f", x))
    for u in [0x7fc00000, 0xffc00000, 0x7f800001, 0x00000001, 0x80000000,
              0x3f800000, 0x7f7fffff]:
        out.dec(struct.pack("<I", u), [u])


# ------------------------------------------------------------------- f16

def gen_f16(out):
    for x in some_floats() + [NAN, -NAN]:
        with np.errstate(over="ignore"):  # beyond 65504 is inf: wanted
            h = np.array([x], dtype=np.float32).astype(np.float16)
        out.enc([x], h.tobytes())
    pats = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x7bff,
            0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7fff, 0x3555]
    pats += list(int(p) for p in rng.integers(0, 65536, 300))
    for p in pats:
        y = np.array([p], dtype=np.uint16).view(np.float16).astype(np.float32)
        out.dec(struct.pack("<H", p), [int(y.view(np.uint32)[0])])


# ------------------------------------------------------------------ bf16

def bf16_value(p):
    """The value of bf16 pattern p as a Python float; the pattern after
    the largest finite one counts as 2^128 for rounding."""
    if p & 0x7fff == 0x7f80:
        return (-1.0 if p & 0x8000 else 1.0) * 2.0 ** 128
    return from_bits(p << 16)


def f32_to_bf16(x):
    """Nearest bf16 to f32 x by comparing the two candidates exactly
    (floats hold every bf16 and f32 value, and their differences from x
    here are exact too), ties to the even pattern; nan quieted."""
    u = bits(x)
    if x != x:
        return (u >> 16) | 0x40
    lo = u >> 16
    if u & 0xffff == 0:
        return lo
    hi = lo + 1  # next pattern away from zero (same sign)
    dlo = abs(x - bf16_value(lo))
    dhi = abs(bf16_value(hi) - x)
    if dlo < dhi or (dlo == dhi and lo % 2 == 0):
        return lo
    return hi


def gen_bf16(out):
    try:
        import gguf.quants as gq
        from gguf import GGMLQuantizationType as T
    except ImportError:
        gq = None
    for x in some_floats() + [NAN, -NAN]:
        p = f32_to_bf16(x)
        if gq is not None:  # a second opinion, where installed
            g = gq.quantize(np.array([x], dtype=np.float32), T.BF16)
            assert int(g.view(np.uint16)[0]) == p, (x, p, g)
        out.enc([x], struct.pack("<H", p))
    pats = [0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0x7f7f, 0xff7f,
            0x7f80, 0xff80, 0x7fc0, 0x7f81]
    pats += list(int(p) for p in rng.integers(0, 65536, 200))
    for p in pats:
        out.dec(struct.pack("<H", p), [p << 16])


# -------------------------------------------------------------- integers

def nearest_f32_of_int(v):
    """The f32 nearest integer v, ties to even, in exact arithmetic."""
    s = -1 if v < 0 else 1
    m = abs(v)
    e = m.bit_length()
    if e > 24:
        shift = e - 24
        q, r = divmod(m, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q % 2 == 1):
            q += 1
        m = q << shift
    y = float(s * m)  # exact: at most 25 significant bits
    assert f32(y) == y
    return bits(y) if v != 0 else 0


def round_even(x):
    """x (a finite float) to the nearest integer, ties to even, exact."""
    from fractions import Fraction
    f = Fraction(x)
    n = f.numerator // f.denominator  # floor
    r = f - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2 == 1):
        n += 1
    return n


INTS = {
    # name: (bytes, signed, lo, hi)
    "i8": (1, True, -128, 127),
    "u8": (1, False, 0, 255),
    "u16": (2, False, 0, 65535),
    "u32": (4, False, 0, 2 ** 32 - 1),
    "u64": (8, False, 0, 2 ** 64 - 1),
}


def int_bytes(v, nbytes, signed):
    return v.to_bytes(nbytes, "little", signed=signed)


def gen_int(out, name):
    nbytes, signed, lo, hi = INTS[name]
    xs = some_floats() + [f32(v) for v in
                          [-0.5, -2.5, 4.5, 5.5, 126.5, 127.5, 128.0,
                           -128.5, -129.0, 254.5, 255.5, 256.0, 65535.5,
                           65536.0, 16777217.0, 4294967040.0, 4294967296.0,
                           9.2233715e18, 1.8446743e19, 1.8446744e19]]
    for x in xs:
        if x == INF:
            v = hi
        elif x == -INF:
            v = lo
        else:
            v = min(max(round_even(x), lo), hi)
        out.enc([x], int_bytes(v, nbytes, signed))
    out.nan([NAN])
    vals = [lo, hi, 0, 1, 2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1, 2 ** 24 + 3,
            2 ** 25 + 2, 2 ** 53 + 1, 2 ** 63, 2 ** 64 - 2 ** 40,
            2 ** 32 - 1, 2 ** 32 - 129, 2 ** 32 - 128, -1, -127]
    vals += [int(v) for v in rng.integers(lo, hi, 100, endpoint=True,
                                          dtype=np.int64 if signed
                                          else np.uint64)]
    for v in vals:
        if lo <= v <= hi:
            out.dec(int_bytes(v, nbytes, signed), [nearest_f32_of_int(v)])


# ---------------------------------------------------------------- blocks

def blocks_for(qtype):
    """Blocks of 32 f32 that probe the quantizer: ordinary spreads of many
    scales, ties of the rounding rule, zeros, a negative extreme, scales
    below f16's normal range."""
    b = []
    for _ in range(40):
        scale = 10.0 ** rng.integers(-6, 6)
        b.append(rng.standard_normal(32) * scale)
    b.append(np.zeros(32))
    b.append(-np.zeros(32))
    z = np.zeros(32)
    z[7] = -3.0
    b.append(z)
    # q8_0 with max 127 (d = 1): x.5 rounds away from zero
    t = np.array([127.0, -127.0] + [k + 0.5 for k in range(-15, 15)])
    b.append(t)
    # q4_0 with max -8 (d = 1): x + 8.5 truncated, 8 clamped to 15
    t = np.array([-8.0, 8.0, 7.5, 7.49, -7.5, 0.5, -0.5, 0.0]
                 + list(np.linspace(-7.9, 7.9, 24)))
    b.append(t)
    b.append(rng.standard_normal(32) * 1e-7)  # subnormal f16 scale
    b.append(rng.standard_normal(32) * 1e-12)  # scale rounds to 0
    b.append(rng.uniform(-65504 * 7, 65504 * 7, 32))  # scale near f16 max
    one = np.zeros(32)
    one[31] = 1e-3
    b.append(one)
    return [np.array(x, dtype=np.float32) for x in b]


def gen_quant(out, qname):
    import gguf.quants as gq
    from gguf import GGMLQuantizationType as T
    qtype = {"q8_0": T.Q8_0, "q4_0": T.Q4_0}[qname]
    for blk in blocks_for(qtype):
        q = gq.quantize(blk.reshape(1, 32), qtype).reshape(-1)
        if qname == "q4_0" and not np.any(blk != 0):
            # ggml's C starts from max = 0.0f and keeps it while no |x|
            # exceeds it, so a block of zeros of either sign has
            # d = 0.0f / -8 = -0 (f16 0x8000); gguf's transcription takes
            # the first element instead, and gets +0 for a block of -0.
            q[0], q[1] = 0x00, 0x80
        out.enc([float(x) for x in blk], q.tobytes())
        y = gq.dequantize(q.reshape(1, -1), qtype).reshape(-1)
        out.dec(q.tobytes(), [int(u) for u in
                              y.astype(np.float32).view(np.uint32)])
    # arbitrary stored blocks, any finite scale
    nb = 34 if qname == "q8_0" else 18
    for _ in range(40):
        raw = rng.integers(0, 256, nb, dtype=np.uint8)
        h = raw[:2].view(np.uint16)[0]
        if h & 0x7c00 == 0x7c00:
            raw[1] &= 0xbf  # keep the scale finite
        y = gq.dequantize(raw.reshape(1, -1), qtype).reshape(-1)
        out.dec(raw.tobytes(), [int(u) for u in
                                y.astype(np.float32).view(np.uint32)])
    bad = np.ones(32, dtype=np.float32)
    for v in [NAN, INF, -INF, 1e30]:
        b2 = bad.copy()
        b2[5] = v
        out.nan([float(x) for x in b2])


def q2_0_quantize(blk):
    """q2_0 by its stated rule: max the element of largest magnitude with
    its sign (the first of equals), d = max / -2, q = min(3, trunc(x * (1/d)
    + 2.5)), the f16 scale first and element j in bits 2(j%4) of byte
    j/4; every product and sum rounded to float32."""
    x = blk.astype(np.float32)
    amax, mx = np.float32(0), np.float32(0)
    for v in x:
        if amax < abs(v):
            amax, mx = abs(v), v
    d = np.float32(mx / np.float32(-2))
    idv = np.float32(1) / d if d != 0 else np.float32(0)
    out = bytearray(np.float16(d).tobytes()) + bytearray(8)
    for j, v in enumerate(x):
        q = min(3, int(np.float32(np.float32(v * idv) + np.float32(2.5))))
        out[2 + j // 4] |= q << (2 * (j % 4))
    return bytes(out)


def q2_0_dequantize(raw):
    d = np.frombuffer(raw[:2], dtype=np.float16)[0].astype(np.float32)
    return [np.float32(d * np.float32(((raw[2 + j // 4] >> (2 * (j % 4)))
                                       & 3) - 2)) for j in range(32)]


def gen_q2_0(out):
    for blk in blocks_for(None):
        if np.any(~np.isfinite(blk)) or \
                np.max(np.abs(blk)) / 2 > 65504:
            continue
        q = q2_0_quantize(blk)
        out.enc([float(x) for x in blk], q)
        out.dec(q, [int(np.float32(y).view(np.uint32))
                    for y in q2_0_dequantize(q)])
    for _ in range(40):
        raw = bytearray(rng.integers(0, 256, 10, dtype=np.uint8).tobytes())
        if raw[1] & 0x7c == 0x7c:
            raw[1] &= 0xbf  # keep the scale finite
        out.dec(bytes(raw), [int(np.float32(y).view(np.uint32))
                             for y in q2_0_dequantize(bytes(raw))])
    bad = np.ones(32, dtype=np.float32)
    for v in [NAN, INF, -INF, 1e30]:
        b2 = bad.copy()
        b2[5] = v
        out.nan([float(x) for x in b2])


def c_minmax(blk):
    """ggml's C reading of a block's min and max: the first of equals
    (numpy may pick the other zero of a block holding 0 and -0)."""
    mn, mx = blk[0], blk[0]
    for v in blk[1:]:
        if v < mn:
            mn = v
        if v > mx:
            mx = v
    return mn, mx


def gen_q4_1(out):
    import gguf.quants as gq
    from gguf import GGMLQuantizationType as T
    for blk in blocks_for(None):
        if np.max(np.abs(blk)) > 65504:
            out.nan([float(x) for x in blk])  # min or scale beyond f16
            continue
        q = bytearray(gq.quantize(blk.reshape(1, 32), T.Q4_1)
                      .reshape(-1).tobytes())
        mn, mx = c_minmax(blk)
        m16 = np.float16(mn).tobytes()
        d16 = np.float16((mx - mn) / np.float32(15)).tobytes()
        # only the sign of a zero minimum or scale may differ
        assert (q[0:2] == d16 or float(np.frombuffer(d16, np.float16)[0])
                == 0), (blk, q, d16)
        assert (q[2:4] == m16 or float(np.frombuffer(m16, np.float16)[0])
                == 0), (blk, q, m16)
        q[0:2], q[2:4] = d16, m16
        q = bytes(q)
        out.enc([float(x) for x in blk], q)
        y = gq.dequantize(np.frombuffer(q, np.uint8).reshape(1, -1), T.Q4_1)
        out.dec(q, [int(u) for u in
                    y.reshape(-1).astype(np.float32).view(np.uint32)])
    for _ in range(40):
        raw = rng.integers(0, 256, 20, dtype=np.uint8)
        for k in (1, 3):
            if raw[k] & 0x7c == 0x7c:
                raw[k] &= 0xbf  # keep the scale and the minimum finite
        y = gq.dequantize(raw.reshape(1, -1), T.Q4_1).reshape(-1)
        out.dec(raw.tobytes(), [int(u) for u in
                                y.astype(np.float32).view(np.uint32)])
    bad = np.ones(32, dtype=np.float32)
    for v in [NAN, INF, -INF, 1e30, 65600.0]:
        b2 = bad.copy()
        b2[5] = v
        out.nan([float(x) for x in b2])


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
    for name, block, fn in [("f32", 1, gen_f32), ("f16", 1, gen_f16),
                            ("bf16", 1, gen_bf16), ("q8_0", 32, None),
                            ("q4_0", 32, None)] + \
            [(n, 1, None) for n in INTS] + [("q2_0", 32, gen_q2_0),
                                            ("q4_1", 32, gen_q4_1)]:
        out = Out(os.path.join(d, name + ".txt"), name, block)
        if fn is not None:
            fn(out)
        elif name in INTS:
            gen_int(out, name)
        else:
            gen_quant(out, name)
        out.close()


if __name__ == "__main__":
    main()

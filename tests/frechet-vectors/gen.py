#!/usr/bin/env python3
"""gen.py - remake the Fréchet distance test vectors (tests/frechet-vectors).

Each case is two sets of float32 feature vectors and the Fréchet distance
between the Gaussians fitted to them, computed as FID's reference code
computes it, independently of lib/eval/frechet.c: numpy's mean and cov
(normalised by n - 1), and the trace term from scipy.linalg.sqrtm of the
product S1 S2 (a Schur method, where cg diagonalises S1 and then
S1^1/2 S2 S1^1/2 by Jacobi rotations):

    d^2 = |mu1 - mu2|^2 + tr(S1) + tr(S2) - 2 tr(sqrtm(S1 S2))

tests/unit/test_frechet reads the stored files; Python is needed only to
remake them:

    pip install numpy scipy
    python3 tests/frechet-vectors/gen.py tests/frechet-vectors

Output is a pure function of this script (fixed seed).  Each file:

    d N1 N2
    N1 lines of d numbers: the first set (%.9g: float32 exactly)
    N2 lines of d numbers: the second set
    distance D (%.17g)
"""
import os
import sys

import numpy as np
import scipy.linalg


def frechet(a, b):
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    mu1, mu2 = a.mean(0), b.mean(0)
    s1, s2 = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    root = scipy.linalg.sqrtm(s1 @ s2)
    if np.iscomplexobj(root):
        # rounding leaves imaginary parts of the order of 1e-10 at most
        assert np.abs(root.imag).max() < 1e-6, np.abs(root.imag).max()
        root = root.real
    d = mu1 - mu2
    return float(d @ d + np.trace(s1) + np.trace(s2) - 2 * np.trace(root))


def write(path, a, b):
    with open(path, "w") as f:
        f.write("%d %d %d\n" % (a.shape[1], a.shape[0], b.shape[0]))
        for row in np.concatenate([a, b]):
            f.write(" ".join("%.9g" % x for x in row) + "\n")
        f.write("distance %.17g\n" % frechet(a, b))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    rng = np.random.default_rng(16)
    f32 = np.float32

    # Gaussians of different means and covariances
    m = rng.normal(size=(8, 8))
    a = rng.normal(size=(60, 8)) @ m
    b = rng.normal(size=(45, 8)) @ (m + 0.5 * rng.normal(size=(8, 8))) + 0.7
    write(os.path.join(out, "gauss.txt"), a.astype(f32), b.astype(f32))

    # ReLU features as a classifier's: many zeros, a mean well away from
    # zero beside the spread, correlated units
    w = rng.normal(size=(24, 32))
    x = np.maximum(rng.normal(size=(300, 24)) @ w + 3.0, 0)
    y = np.maximum(rng.normal(size=(200, 24)) @ (w * 1.1) + 2.5, 0)
    write(os.path.join(out, "relu.txt"), x.astype(f32), y.astype(f32))

    # a set against a slight change of itself: a small distance, of
    # terms that nearly cancel
    c = rng.normal(size=(80, 12)) * rng.uniform(0.1, 5, size=12)
    e = c + 0.01 * rng.normal(size=c.shape)
    write(os.path.join(out, "near.txt"), c.astype(f32), e.astype(f32))

    # fewer vectors than features, as a judge's per-condition sets may
    # be: both covariances singular
    w = rng.normal(size=(16, 48))
    x = np.maximum(rng.normal(size=(30, 16)) @ w + 1.0, 0)
    y = np.maximum(rng.normal(size=(40, 16)) @ w + 1.5, 0)
    write(os.path.join(out, "lowrank.txt"), x.astype(f32), y.astype(f32))


if __name__ == "__main__":
    main()

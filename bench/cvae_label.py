#!/usr/bin/python3
"""cvae_label.py - where a cvae's draws lose their label.

usage: cvae_label.py MODEL.cgm JUDGE.cgm [DATA-DIR]

Reads a cg cvae (any of its options) and a cclf judge from their files,
and the Fashion-MNIST test set (t10k-*.gz under DATA-DIR, default
/usr/share/datasets/fashion-mnist), and runs both in PyTorch (float32,
images rounded to 8 bits as cg-eval --judge rounds them) to print, over
1000 draws a class (seed 0):

  prior T      the judge's share of draws from the model's prior, z at
               temperature T, decoded with the label (cg-sample's draws)
  posterior    z of each test image's own q(z|x, c), decoded with its
               label (a reconstruction)
  class fit    z from a diagonal Gaussian fitted to q(z|x, c) of class
               c's test images: what a prior per class could give
  swap         z of an image of class a decoded with a label b != a:
               which the judge sees (b, a, or neither)
  probe        a linear classifier of the class from mu (fitted on half
               the test set, scored on the other half; chance 0.10)
  kl           KL per image (nats) and the latent dims with a mean KL
               above 0.1
"""
import gzip
import json
import os
import sys
import tarfile

import numpy as np
import torch
import torch.nn.functional as F


def load(path):
    """The manifest and the f32 tensors of a cg file, by name."""
    t = tarfile.open(path)
    man = json.loads(t.extractfile("cg.json").read())
    ten = {}
    for d in man["tensors"]:
        if d["dtype"] == "f32":
            a = np.frombuffer(t.extractfile(d["name"]).read(), "<f4")
            ten[d["name"]] = torch.from_numpy(a.copy()).view(*d["shape"])
    return man, ten


def idx(path):
    with gzip.open(path) as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    data = sys.argv[3] if len(sys.argv) > 3 else \
        "/usr/share/datasets/fashion-mnist"
    torch.set_num_threads(1)
    torch.manual_seed(0)
    X = torch.from_numpy(idx(os.path.join(
        data, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784) / 255.0).float()
    Y = torch.from_numpy(idx(os.path.join(
        data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    man, P = load(sys.argv[1])
    cfg = man["config"]
    L, K, Z = cfg["layers"], cfg["ncond"], cfg["latent"]
    _, J = load(sys.argv[2])
    hid = sorted(k[:-2] for k in J if k.startswith("hid.") and k.endswith(".w"))

    def judge(img):
        h = (img.clamp(0, 1) * 255 + 0.5).floor() / 255
        for n in hid:
            h = F.relu(h @ J[n + ".w"].T + J[n + ".b"])
        return (h @ J["out.w"].T + J["out.b"]).argmax(1)

    def mlp(side, h, c):
        for l in range(L):
            h = h @ P["%s.%d.w" % (side, l)].T + P["%s.%d.b" % (side, l)]
            if l > 0 and "%s.%d.cond" % (side, l) in P:
                h = h + P["%s.%d.cond" % (side, l)][c]
            h = F.relu(h)
        return h

    def encode(x, c):
        h = mlp("enc", torch.cat([x, F.one_hot(c, K).float()], 1), c)
        return (h @ P["enc.mu.w"].T + P["enc.mu.b"],
                h @ P["enc.logvar.w"].T + P["enc.logvar.b"])

    def decode(z, c):
        h = mlp("dec", torch.cat([z, F.one_hot(c, K).float()], 1), c)
        return torch.sigmoid(h @ P["dec.out.w"].T + P["dec.out.b"])

    def share(zs):
        """The judge's share over the classes of z [K][N] decoded with
        their class."""
        return np.mean([(judge(decode(z, torch.full((len(z),), c))) == c)
                        .float().mean().item() for c, z in enumerate(zs)])

    N = 1000
    print("model %s: %s" % (sys.argv[1], json.dumps(cfg)))
    with torch.no_grad():
        print("judge on the test set  %.4f" % (judge(X) == Y).float().mean())
        for T in (1.0, 0.5, 0.0):
            zs = []
            for c in range(K):
                e = T * torch.randn(N, Z)
                if "prior.mu" in P:
                    e = P["prior.mu"][c] + (0.5 * P["prior.logvar"][c]).exp() * e
                zs.append(e)
            print("prior T=%.1f            %.4f" % (T, share(zs)))
        mu, lv = encode(X, Y)
        zq = mu + (0.5 * lv).exp() * torch.randn_like(mu)
        print("posterior              %.4f" % (judge(decode(zq, Y)) == Y)
              .float().mean())
        zs = []
        for c in range(K):
            q = zq[Y == c]
            zs.append(q.mean(0) + q.std(0) * torch.randn(N, Z))
        print("class fit              %.4f" % share(zs))
        b = (Y + torch.randint(1, K, Y.shape)) % K
        s = judge(decode(zq, b))
        print("swap: b %.4f, a %.4f, neither %.4f"
              % ((s == b).float().mean(), (s == Y).float().mean(),
                 ((s != b) & (s != Y)).float().mean()))
        if "prior.mu" in P:
            pm, plv = P["prior.mu"][Y], P["prior.logvar"][Y]
            kl = 0.5 * (plv - lv - 1 + (lv.exp() + (mu - pm) ** 2) / plv.exp())
        else:
            kl = 0.5 * (mu ** 2 + lv.exp() - 1 - lv)
    perm = torch.randperm(len(Y))
    tr, te = perm[:5000], perm[5000:]
    m0, s0 = mu[tr].mean(0), mu[tr].std(0) + 1e-6
    W = torch.zeros(Z, K, requires_grad=True)
    bb = torch.zeros(K, requires_grad=True)
    opt = torch.optim.LBFGS([W, bb], max_iter=200)

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(((mu[tr] - m0) / s0) @ W + bb, Y[tr]) + \
            1e-4 * (W ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    with torch.no_grad():
        acc = ((((mu[te] - m0) / s0) @ W + bb).argmax(1) == Y[te]).float()
    print("probe                  %.4f" % acc.mean())
    print("kl                     %.2f nats, %d of %d dims above 0.1"
          % (kl.sum(1).mean(), (kl.mean(0) > 0.1).sum(), Z))


if __name__ == "__main__":
    main()

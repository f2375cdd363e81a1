#!/usr/bin/python3
"""torch_dp.py - DP-SGD with Opacus on the models of torch_cvae.py and
torch_cclf.py (Fashion-MNIST), the reference for cg-train-step
--example-clip.

Trains the cvae (784+10 -> hidden x layers -> latent heads; N(0, I)
prior, the label at the first layers) or the classifier (784 -> hidden
x layers -> 10; with --conv C first cg's CNN trunk: three 3x3
convolutions with ReLU, padding 1, strides 1, 2, 2, to C, 2C and 4C
channels, the 7x7 map flattened channels-last) for --epochs of
Poisson-sampled batches of expected size --batch, each example's
gradient clipped to --clip and
Gaussian noise added at the noise multiplier Opacus' RDP accountant
picks for --epsilon at --delta (--epsilon 0: no DP, plain shuffled
batches).  Adam at --lr.  Prints one JSON object: the held-out figure
(cvae: test negative ELBO in nats per image, one noise draw per image;
cclf: test accuracy and cross-entropy), the noise multiplier, the
epsilon the accountant says was spent, and training examples per second
(the examples drawn, over the training loop's wall time, and over its CPU
time, every thread's).

Two options make a run comparable with cg-train-step's: --sample-rate Q
--steps T draw T Poisson batches at rate Q (Opacus' own loader has rate
1 / its number of batches, ceil(N / batch)), the noise multiplier from
Opacus' get_noise_multiplier for those and the spent epsilon from its
RDP accountant; --init FILE starts from the weights of a safetensors
file (cg-convert of a cg-init model: the classifier only).  --sigma S
sets the noise multiplier instead of --epsilon (0: clipping alone).
Without DP, --steps T stops after T shuffled batches (cg-train-step's
steps).  The row also gives the process' peak RSS up to the end of
training (train_maxrss_kib: the interpreter, torch, the training images
and the training).
"""
import argparse
import json
import os
import resource
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_cvae import CVAE, load, read_idx  # noqa: E402


class NHWCFlat(nn.Module):
    """An [B, C, H, W] map flattened channels-last, as cg's cclf lays its
    trunk's last map out."""

    def forward(self, x):
        return x.permute(0, 2, 3, 1).reshape(len(x), -1)


class Image(nn.Module):
    """[B, H * W] pixels as the [B, 1, H, W] map of one channel."""

    def __init__(self, h, w):
        super().__init__()
        self.h, self.w = h, w

    def forward(self, x):
        return x.view(len(x), 1, self.h, self.w)


def classifier(in_dim, hidden, layers, ncond, conv=0, side=28):
    """cg's cclf: with conv > 0 the CNN trunk of lib/arch/cclf (3x3,
    padding 1, strides 1, 2, 2, channels conv, 2 conv, 4 conv, ReLU)
    before the MLP."""
    mods, d = [], in_dim
    if conv > 0:
        mods.append(Image(side, side))
        c, h = 1, side
        for s in range(3):
            mods += [nn.Conv2d(c, conv << s, 3, 1 if s == 0 else 2, 1),
                     nn.ReLU()]
            c = conv << s
            if s:
                h = (h - 1) // 2 + 1
        mods.append(NHWCFlat())
        d = c * h * h
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    mods.append(nn.Linear(d, ncond))
    return nn.Sequential(*mods)


class VAELoss(nn.Module):
    """The cvae with its noise drawn inside, so that Opacus' hooks see one
    module whose output is each example's loss."""

    def __init__(self, vae, latent):
        super().__init__()
        self.vae, self.latent = vae, latent

    def forward(self, x, y):
        eps = torch.randn(len(x), self.latent)
        rec, kl = self.vae(x, y, eps)
        return rec + kl


def load_safetensors(path):
    """The tensors of a safetensors file (little-endian F32 only)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    head = json.loads(blob[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit("torch_dp.py: %s: %s is %s, not F32"
                     % (path, name, t["dtype"]))
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(blob[8 + n + a:8 + n + b]),
                                     dtype=torch.float32).reshape(t["shape"])
    return out


def load_cclf_init(net, path):
    """cg's cclf names (conv.I.w, conv.I.b, hid.I.w, hid.I.b, out.w,
    out.b) onto the nn.Sequential of classifier(): the same [out, in]
    and [out, in, 3, 3] layouts."""
    ts = load_safetensors(path)
    cv = [m for m in net if isinstance(m, nn.Conv2d)]
    lin = [m for m in net if isinstance(m, nn.Linear)]
    names = (["conv.%d" % i for i in range(len(cv))] +
             ["hid.%d" % i for i in range(len(lin) - 1)] + ["out"])
    want = set(nm + suf for nm in names for suf in (".w", ".b"))
    have = set(k for k in ts if k != "__metadata__")
    if want != have:
        sys.exit("torch_dp.py: %s: tensors %s, not %s"
                 % (path, sorted(have), sorted(want)))
    with torch.no_grad():
        for m, nm in zip(cv + lin, names):
            for attr, suf in (("weight", ".w"), ("bias", ".b")):
                t = ts[nm + suf]
                p = getattr(m, attr)
                if t.shape != p.shape:
                    sys.exit("torch_dp.py: %s: %s is %s, not %s"
                             % (path, nm + suf, tuple(t.shape),
                                tuple(p.shape)))
                p.copy_(t)


def load_limit(data_dir, split, limit):
    """load()'s images and labels, the first limit (0: all) made float
    alone: the process holds no more images than it trains on."""
    x = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte.gz" % split))
    y = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte.gz" % split))
    if limit > 0:
        x, y = x[:limit], y[:limit]
    x = torch.from_numpy(x.reshape(len(x), -1).astype("float32") / 255.0)
    return x, torch.from_numpy(y.astype("int64"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["cvae", "cclf"], required=True)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epsilon", type=float, default=0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--conv", type=int, default=0,
                    help="cclf: the CNN trunk's first channels (0: the MLP)")
    ap.add_argument("--latent", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0,
                    help="train on the first N training images (0: all)")
    ap.add_argument("--sample-rate", type=float, default=0,
                    help="Poisson rate of the DP batches (0: Opacus' 1/batches)")
    ap.add_argument("--steps", type=int, default=0,
                    help="with --sample-rate: the DP steps (0: epochs/rate);"
                    " without DP: stop after this many batches")
    ap.add_argument("--sigma", type=float, default=-1,
                    help="the noise multiplier (default: from --epsilon)")
    ap.add_argument("--init", default="",
                    help="initial weights: a safetensors file (cclf)")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load_limit(a.data, "train", a.limit)
    ncond = 10
    if a.model == "cvae":
        net = VAELoss(CVAE(784, ncond, a.hidden, a.layers, a.latent),
                      a.latent)
    else:
        net = classifier(784, a.hidden, a.layers, ncond, a.conv)
        if a.init:
            load_cclf_init(net, a.init)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    ds = torch.utils.data.TensorDataset(xtr, ytr)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch,
                                         shuffle=True)
    sigma = 0.0
    engine = None
    own = None
    if a.sample_rate > 0:
        # cg-train-step's sampling: T batches, each example in with
        # probability q; Opacus clips and adds the noise, the accountant is
        # given (sigma, q, T) itself
        from opacus import PrivacyEngine
        from opacus.accountants.utils import get_noise_multiplier
        q = a.sample_rate
        steps = a.steps or int(round(a.epochs / q))
        if a.sigma >= 0:
            sigma = a.sigma
        elif a.epsilon > 0:
            sigma = get_noise_multiplier(
                target_epsilon=a.epsilon, target_delta=a.delta,
                sample_rate=q, steps=steps, accountant="rdp")
        else:
            sys.exit("torch_dp.py: --sample-rate needs --epsilon or --sigma")
        engine = PrivacyEngine(accountant="rdp")
        net, opt, _ = engine.make_private(
            module=net, optimizer=opt, data_loader=loader,
            noise_multiplier=sigma, max_grad_norm=a.clip,
            poisson_sampling=False)
        opt.expected_batch_size = max(1, int(round(q * len(xtr))))
        gen = torch.Generator().manual_seed(a.seed)
        own = [torch.nonzero(torch.rand(len(xtr), generator=gen) < q)
               .flatten() for _ in range(steps)]
        a.epochs = 1
    elif a.sigma >= 0 and a.epsilon == 0:
        from opacus import PrivacyEngine
        engine = PrivacyEngine(accountant="rdp")
        net, opt, loader = engine.make_private(
            module=net, optimizer=opt, data_loader=loader,
            noise_multiplier=a.sigma, max_grad_norm=a.clip,
            poisson_sampling=True)
        sigma = a.sigma
    elif a.epsilon > 0:
        from opacus import PrivacyEngine
        engine = PrivacyEngine(accountant="rdp")
        net, opt, loader = engine.make_private_with_epsilon(
            module=net, optimizer=opt, data_loader=loader,
            target_epsilon=a.epsilon, target_delta=a.delta,
            epochs=a.epochs, max_grad_norm=a.clip, poisson_sampling=True)
        sigma = opt.noise_multiplier
    if own is not None:
        # gathered in the loop, as cg-train-step gathers its samples
        loader = ((xtr[i], ytr[i]) for i in own)

    plain_steps = a.steps if engine is None and a.steps > 0 else 0
    if plain_steps:
        a.epochs = -(-plain_steps * a.batch // len(xtr))
    seen = taken = 0
    t0, c0 = time.perf_counter(), time.process_time()
    net.train()
    for _ in range(a.epochs):
        for x, y in loader:
            if plain_steps and taken == plain_steps:
                break
            taken += 1
            if len(x) == 0:
                continue
            out = net(x, y) if a.model == "cvae" else net(x)
            per = out if a.model == "cvae" else F.cross_entropy(
                out, y, reduction="none")
            loss = per.mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen += len(x)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    xte, yte = load(a.data, "t10k")

    net.eval()
    torch.manual_seed(a.seed + 1)
    row = {"side": "opacus" if engine else "torch", "model": a.model,
           "epsilon_target": a.epsilon, "sigma": sigma, "clip": a.clip,
           "examples": seen, "train_s": secs, "examples_per_s": seen / secs,
           "train_cpu_s": cpu, "train_maxrss_kib": rss, "conv": a.conv,
           "threads": a.threads, "torch": torch.__version__}
    if engine:
        import opacus
        if own is not None:
            from opacus.accountants import RDPAccountant
            acc = RDPAccountant()
            acc.history = [(sigma, a.sample_rate, len(own))]
            row["epsilon_spent"] = (acc.get_epsilon(a.delta) if sigma > 0
                                    else None)
            row["sample_rate"] = a.sample_rate
            row["steps"] = len(own)
        elif sigma > 0:
            row["epsilon_spent"] = engine.get_epsilon(a.delta)
        else:
            row["epsilon_spent"] = None
        row["opacus"] = opacus.__version__
    with torch.no_grad():
        if a.model == "cvae":
            tot = 0.0
            for i in range(0, len(xte), 1000):
                tot += net(xte[i:i + 1000], yte[i:i + 1000]).double().sum()
            row["test_nelbo"] = float(tot) / len(xte)
        else:
            logits = net(xte)
            row["test_acc"] = float((logits.argmax(1) == yte).double().mean())
            row["test_xent"] = float(F.cross_entropy(logits, yte))
    print(json.dumps(row))


if __name__ == "__main__":
    main()

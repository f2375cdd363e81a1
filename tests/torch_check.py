#!/usr/bin/python3
"""torch_check.py - cg's losses and gradients against PyTorch's, per architecture.

usage: torch_check.py [--arch ARCH]... [DIR | MODEL_DUMP]

DIR holds what tests/unit/model_dump wrote for one architecture (arch.txt,
config.txt, views.txt, params.bin, grad.bin, loss.txt and the inputs).  Given the model_dump program instead
(default: $MODEL_DUMP, else unit/model_dump beside this script), it is run
on a few configs of every architecture below (or of those --arch names)
into temporary directories.  Each architecture is built here from torch.nn
in float64, loaded with cg's parameters in view order, and run on the same
inputs; the loss and its parts, every parameter gradient and the arch's
other outputs (cgpt's logits, cclf's logits and features) must match within atol + rtol*|ref|.

A dump with low-rank adapters (model_dump lora=R, lora.txt) is checked
against the arch's model with each target's nn.Linear replaced by a
LoRALinear: the frozen W plus the separate path x A^T B^T scaled by
alpha / r, with cg's A and B (B given nonzero values by the dump); cg
runs it merged (model/lora.h) and reports zeros for W's gradient, which
PyTorch, with W frozen, leaves None: zeros here.

What is shared: reading a dump, loading the views, comparing.  What an
architecture adds (class Cvae, class Cclf, class Cddpm, class Cgan,
class Cgpt): its configs, its torch.nn
model with its tensors in cg's order, its inputs and its forward pass.

Tolerances: cg computes in float (u = 2^-24, about 6e-8), PyTorch here in
float64, so the difference is cg's own rounding: a float sum of n terms is
within n u of the sum of its terms' magnitudes, and the longest sums here
(a softmax row over V = 260 to 262 tokens, a layer of up to 4 * 32 inputs,
a batch of up to 16 positions) give a few 1e-6 to 1e-5 of an entry's
scale, compounded through the layers.  rtol 1e-4 on gradients and logits
and 1e-5 on losses (summed in double by cg) leave a margin of several
times that; the atol floors cover the entries that cancel to much less
than their terms.  Each line prints the worst ratio to its tolerance.

Exit status: 0 pass, 1 mismatch or error, 2 usage, 77 (skip) if torch is
missing.
"""
import math
import os
import subprocess
import sys
import tempfile
import warnings

# A test pass may hold cg's oneDNN to AVX2 (DNNL_MAX_CPU_ISA): that is
# for model_dump, which runs cg.  PyTorch links oneDNN too, and its
# autocast asks it for bf16 products wherever the CPU has avx512_bf16:
# under the cap it fails ("could not create a primitive descriptor
# iterator"), so the reference runs without the cap and model_dump with
# the environment it was given.
DUMP_ENV = dict(os.environ)
os.environ.pop("DNNL_MAX_CPU_ISA", None)

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print("torch_check: skipped: %s" % e)
    sys.exit(77)


# ------------------------------------------------------------------ cvae

class Cvae:
    """The model of lib/arch/cvae/cvae.c (and, with class-prior=0 and
    cond-every=0, of bench/torch_cvae.py): with class-prior, the KL is
    against a learnt N(prior.mu[c], exp(prior.logvar[c])) per condition c,
    else against N(0, I); with cond-every, every hidden layer after the
    first adds the row c of its own table [ncond, hidden] before the
    ReLU.  With conv > 0 the nets are cvae.h's convolutional ones: stride-2
    3x3 convolutions down to H/4 x W/4 x 2 conv, the heads on that map
    (channels-last) beside the one-hot, a Linear layer from z beside the
    one-hot back to it, then nearest up-sampling and 3x3 convolutions;
    each stage group norm, with cond-every FiLM (x (1 + s) + t from the
    row c of its table), and SiLU."""

    name = "cvae"
    configs = [
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "latent=5",
         "batch=6", "seed=1"],
        ["in_dim=33", "ncond=10", "hidden=24", "layers=1", "latent=7",
         "batch=9", "seed=2"],
        ["in_dim=12", "ncond=3", "hidden=8", "layers=3", "latent=2",
         "batch=4", "seed=3"],
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "latent=5",
         "class-prior=0", "cond-every=0", "batch=6", "seed=4"],
        ["in_dim=20", "ncond=4", "hidden=16", "layers=3", "latent=5",
         "class-prior=0", "cond-every=1", "batch=6", "seed=5"],
        # low-rank adapters on every linear layer's matrix, scale 3 / 2
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "latent=5",
         "lora=2", "lora-alpha=3", "lora-on=*.w", "batch=6", "seed=6"],
        # the convolutional nets: FiLM and the class prior, neither,
        # and a wider map of 3 channels
        ["in_dim=64", "ncond=3", "hidden=8", "layers=1", "latent=3",
         "conv=4", "image_h=8", "image_w=8", "image_c=1", "batch=4",
         "seed=7"],
        ["in_dim=64", "ncond=3", "hidden=8", "layers=1", "latent=3",
         "conv=3", "class-prior=0", "cond-every=0", "image_h=8",
         "image_w=8", "image_c=1", "batch=3", "seed=8"],
        ["in_dim=288", "ncond=4", "hidden=8", "layers=1", "latent=4",
         "conv=8", "image_h=8", "image_w=12", "image_c=3", "batch=3",
         "seed=9"],
    ]
    tol = {"loss": (1e-5, 1e-5), "grad": (1e-4, 1e-5)}
    outputs = []

    class Net(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            hidden, layers = cfg["hidden"], cfg["layers"]
            self.ncond = cfg["ncond"]
            self.cfg = cfg
            if cfg.get("conv", 0) > 0:
                self.conv_nets(cfg)
                return

            def mlp(d):
                out = []
                for _ in range(layers):
                    out += [nn.Linear(d, hidden), nn.ReLU()]
                    d = hidden
                return nn.Sequential(*out)

            self.enc = mlp(cfg["in_dim"] + self.ncond)
            self.mu = nn.Linear(hidden, cfg["latent"])
            self.logvar = nn.Linear(hidden, cfg["latent"])
            self.dec = mlp(cfg["latent"] + self.ncond)
            self.out = nn.Linear(hidden, cfg["in_dim"])
            self.prior = None
            if cfg.get("class-prior", 0):
                self.prior = nn.ParameterList([
                    nn.Parameter(torch.zeros(self.ncond, cfg["latent"]))
                    for _ in range(2)])
            # the condition's rows of hidden layers 1 .. layers - 1,
            # encoder then decoder
            self.rows = nn.ParameterList([
                nn.Parameter(torch.zeros(self.ncond, hidden))
                for _ in range(2 * (layers - 1) if cfg.get("cond-every", 0)
                               else 0)])

        def conv_nets(self, cfg):
            """The convolutional nets of cvae.h (conv > 0)."""
            C, K, ch, Z = cfg["conv"], cfg["ncond"], cfg["image_c"], \
                cfg["latent"]
            self.F = cfg["image_h"] // 4 * cfg["image_w"] // 4 * 2 * C

            def norm(n):
                g = next((g for g in (8, 4, 2) if n % g == 0 and n // g >= 2),
                         1)
                return nn.GroupNorm(g, n)
            self.enc_c1 = nn.Conv2d(ch, C, 3, 2, 1)
            self.enc_n1 = norm(C)
            self.enc_c2 = nn.Conv2d(C, 2 * C, 3, 2, 1)
            self.enc_n2 = norm(2 * C)
            self.mu = nn.Linear(self.F + K, Z)
            self.logvar = nn.Linear(self.F + K, Z)
            self.dec_0 = nn.Linear(Z + K, self.F)
            self.dec_n0 = norm(2 * C)
            self.dec_c1 = nn.Conv2d(2 * C, C, 3, 1, 1)
            self.dec_n1 = norm(C)
            self.dec_c2 = nn.Conv2d(C, C, 3, 1, 1)
            self.dec_n2 = norm(C)
            self.out = nn.Conv2d(C, ch, 3, 1, 1)
            self.prior = None
            if cfg.get("class-prior", 0):
                self.prior = nn.ParameterList([
                    nn.Parameter(torch.zeros(K, Z)) for _ in range(2)])
            self.rows = nn.ParameterList([
                nn.Parameter(torch.zeros(K, 2 * n))
                for n in ((C, 2 * C, 2 * C, C, C)
                          if cfg.get("cond-every", 0) else ())])

        def conv_tensors(self):
            out = []
            for n in ["enc.c1", "enc.n1", "enc.c2", "enc.n2", "enc.mu",
                      "enc.logvar", "dec.0", "dec.n0", "dec.c1", "dec.n1",
                      "dec.c2", "dec.n2", "dec.out"]:
                m = {"enc.mu": self.mu, "enc.logvar": self.logvar,
                     "dec.out": self.out}.get(n) or \
                    getattr(self, n.replace(".", "_"))
                g = ".g" if n.split(".")[1].startswith("n") else ".w"
                out += [(n + g, m.weight), (n + ".b", m.bias)]
            if self.prior is not None:
                out += [("prior.mu", self.prior[0]),
                        ("prior.logvar", self.prior[1])]
            out += [(n + ".cond", r) for n, r in zip(
                ["enc.n1", "enc.n2", "dec.n0", "dec.n1", "dec.n2"],
                self.rows)]
            return out

        def stage(self, i, norm, p, cond):
            """norm, FiLM from the rows of table i (cond-every), SiLU."""
            a = group_norm(norm, p)
            if len(self.rows):
                e = self.rows[i][cond]
                n = a.shape[1]
                a = a * (1 + e[:, :n, None, None]) + e[:, n:, None, None]
            return F.silu(a)

        def conv_forward(self, x, c, cond, eps):
            """mu, logvar and the logits [B, in_dim] of the conv nets."""
            H, W, ch = (self.cfg["image_h"], self.cfg["image_w"],
                        self.cfg["image_c"])
            B = x.shape[0]
            a = x.view(B, H, W, ch).permute(0, 3, 1, 2)
            a = self.stage(0, self.enc_n1, self.enc_c1(a), cond)
            a = self.stage(1, self.enc_n2, self.enc_c2(a), cond)
            h = torch.cat([a.permute(0, 2, 3, 1).reshape(B, -1), c], 1)
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + torch.exp(0.5 * logvar) * eps
            a = self.dec_0(torch.cat([z, c], 1))
            a = a.view(B, H // 4, W // 4, -1).permute(0, 3, 1, 2)
            a = self.stage(2, self.dec_n0, a, cond)
            a = self.dec_c1(F.interpolate(a, scale_factor=2))
            a = self.stage(3, self.dec_n1, a, cond)
            a = self.dec_c2(F.interpolate(a, scale_factor=2))
            a = self.stage(4, self.dec_n2, a, cond)
            logits = self.out(a).permute(0, 2, 3, 1).reshape(B, -1)
            return mu, logvar, logits

        def hidden(self, side, h, cond):
            """side's (enc or dec) hidden layers on h, the rows of cond
            added where cond-every puts them."""
            lin = [m for m in getattr(self, side) if isinstance(m, nn.Linear)]
            base = 0 if side == "enc" else len(lin) - 1
            for i, m in enumerate(lin):
                h = m(h)
                if i > 0 and len(self.rows):
                    h = h + self.rows[base + i - 1][cond]
                h = F.relu(h)
            return h

        def named_tensors(self):
            """(cg view name, parameter) in cg's buffer order."""
            if self.cfg.get("conv", 0) > 0:
                return self.conv_tensors()
            enc = [m for m in self.enc if isinstance(m, nn.Linear)]
            dec = [m for m in self.dec if isinstance(m, nn.Linear)]
            lin = ([("enc.%d" % i, m) for i, m in enumerate(enc)] +
                   [("enc.mu", self.mu), ("enc.logvar", self.logvar)] +
                   [("dec.%d" % i, m) for i, m in enumerate(dec)] +
                   [("dec.out", self.out)])
            out = []
            for name, m in lin:
                out += [(name + ".w", m.weight), (name + ".b", m.bias)]
            if self.prior is not None:
                out += [("prior.mu", self.prior[0]),
                        ("prior.logvar", self.prior[1])]
            n = len(self.rows) // 2
            out += [("%s.%d.cond" % ("enc" if i < n else "dec", i % n + 1),
                     r) for i, r in enumerate(self.rows)]
            return out

    @staticmethod
    def run(net, cfg, d):
        """Batch means of (rec + kl), rec and kl; no other outputs."""
        B, D, Z = cfg["batch"], cfg["in_dim"], cfg["latent"]
        x = f64(read_bin(d, "x.bin", "<f4", B * D)).view(B, D)
        eps = f64(read_bin(d, "eps.bin", "<f4", B * Z)).view(B, Z)
        cond = i64(read_bin(d, "cond.bin", "<i4", B))
        c = F.one_hot(cond, net.ncond).to(x.dtype)
        if cfg.get("conv", 0) > 0:
            mu, logvar, logits = net.conv_forward(x, c, cond, eps)
        else:
            h = net.hidden("enc", torch.cat([x, c], 1), cond)
            mu, logvar = net.mu(h), net.logvar(h)
            z = mu + torch.exp(0.5 * logvar) * eps
            logits = net.out(net.hidden("dec", torch.cat([z, c], 1), cond))
        rec = F.binary_cross_entropy_with_logits(
            logits, x, reduction="none").sum(1)
        if net.prior is not None:
            pm, plv = net.prior[0][cond], net.prior[1][cond]
            kl = 0.5 * (plv - logvar - 1 + (logvar.exp() + (mu - pm) ** 2)
                        / plv.exp()).sum(1)
        else:
            kl = -0.5 * (1 + logvar - mu * mu - logvar.exp()).sum(1)
        return {"loss": (rec + kl).mean(), "rec": rec.mean(),
                "kl": kl.mean()}, {}


# ------------------------------------------------------------------ cclf

class Cclf:
    """The image classifier of lib/arch/cclf/cclf.c: an MLP, or a CNN
    (conv > 0: three 3x3 convolutions with ReLU, strides 1, 2, 2, channels
    conv, 2 conv, 4 conv, the last map flattened channels-last) before
    it; cross-entropy."""

    name = "cclf"
    configs = [
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "batch=6",
         "seed=1"],
        ["in_dim=33", "ncond=10", "hidden=24", "layers=1", "batch=9",
         "seed=2"],
        ["in_dim=12", "ncond=3", "hidden=8", "layers=3", "batch=4",
         "seed=3"],
        ["in_dim=60", "ncond=4", "hidden=12", "layers=1", "conv=3",
         "image_h=6", "image_w=5", "image_c=2", "batch=5", "seed=4"],
        ["in_dim=196", "ncond=10", "hidden=16", "layers=2", "conv=4",
         "image_h=14", "image_w=14", "image_c=1", "batch=3", "seed=5"],
        # distilled toward a teacher's log-probabilities at tau
        # (teacher=1: alpha in percent)
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "teacher=1",
         "alpha=70", "tau=2", "batch=6", "seed=6"],
        # (seed 7's batch here has a gradient that bf16 products cannot
        # hold to 5%: cg and autocast both land 7% from float64, 0.6%
        # from each other; seed 11's is an ordinary case)
        ["in_dim=33", "ncond=10", "hidden=24", "layers=1", "teacher=1",
         "alpha=100", "tau=1", "batch=9", "seed=11"],
        ["in_dim=60", "ncond=4", "hidden=12", "layers=1", "conv=3",
         "image_h=6", "image_w=5", "image_c=2", "teacher=1", "alpha=40",
         "tau=3", "batch=5", "seed=8"],
    ]
    tol = {"loss": (1e-5, 1e-6), "grad": (1e-4, 1e-6),
           "logits": (1e-4, 1e-6), "features": (1e-4, 1e-6)}
    outputs = ["logits", "features"]

    class Net(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            d, hidden = cfg["in_dim"], cfg["hidden"]
            self.conv = nn.ModuleList()
            if cfg.get("conv", 0) > 0:
                c, h, w = cfg["image_c"], cfg["image_h"], cfg["image_w"]
                for s in range(3):
                    oc = cfg["conv"] << s
                    self.conv.append(nn.Conv2d(c, oc, 3, 1 if s == 0 else 2,
                                               1))
                    if s:
                        h, w = (h - 1) // 2 + 1, (w - 1) // 2 + 1
                    c = oc
                d = c * h * w
            layers = []
            for _ in range(cfg["layers"]):
                layers += [nn.Linear(d, hidden), nn.ReLU()]
                d = hidden
            self.hid = nn.Sequential(*layers)
            self.out = nn.Linear(hidden, cfg["ncond"])

        def trunk(self, x, cfg):
            """The flattened (channels-last) last map of the trunk."""
            if not len(self.conv):
                return x
            B = x.shape[0]
            x = x.view(B, cfg["image_h"], cfg["image_w"], cfg["image_c"])
            x = x.permute(0, 3, 1, 2)
            for m in self.conv:
                x = F.relu(m(x))
            return x.permute(0, 2, 3, 1).reshape(B, -1)

        def named_tensors(self):
            """(cg view name, parameter) in cg's buffer order."""
            hid = [m for m in self.hid if isinstance(m, nn.Linear)]
            lin = ([("conv.%d" % i, m) for i, m in enumerate(self.conv)] +
                   [("hid.%d" % i, m) for i, m in enumerate(hid)] +
                   [("out", self.out)])
            out = []
            for name, m in lin:
                out += [(name + ".w", m.weight), (name + ".b", m.bias)]
            return out

    @staticmethod
    def run(net, cfg, d):
        """Mean cross-entropy and accuracy; the logits and features."""
        B, D = cfg["batch"], cfg["in_dim"]
        x = f64(read_bin(d, "x.bin", "<f4", B * D)).view(B, D)
        cond = i64(read_bin(d, "cond.bin", "<i4", B))
        feat = net.hid(net.trunk(x, cfg))
        logits = net.out(feat)
        acc = (logits.argmax(1) == cond).double().mean()
        ce = F.cross_entropy(logits, cond)
        outs = {"logits": logits, "features": feat}
        if "alpha_pct" not in cfg:
            return {"loss": ce, "acc": acc}, outs
        # Hinton et al.'s distillation: tau^2 KL(teacher || student),
        # both at tau, mixed with the cross-entropy
        a, tau = cfg["alpha_pct"] / 100, cfg["tau"]
        tlogp = f64(read_bin(d, "tlogp.bin", "<f4", B * cfg["ncond"]))
        kl = F.kl_div(F.log_softmax(logits / tau, 1),
                      tlogp.view(B, -1), log_target=True,
                      reduction="batchmean") * tau * tau
        return {"loss": (1 - a) * ce + a * kl, "acc": acc, "data": ce,
                "teacher": kl}, outs


# ----------------------------------------------------------------- cddpm

def groups(n):
    """The groups of a cddpm U-Net's norm over n channels: the most, up
    to 8, of at least 4 channels each."""
    return next((g for g in range(8, 1, -1) if n % g == 0 and n // g >= 4),
                1)


def group_norm(m, x):
    """nn.GroupNorm m on x in m's precision: under autocast a
    convolution's bf16 output meets float32 weights, which group_norm
    refuses (cg normalises in float too)."""
    return m(x.to(m.weight.dtype))


class ResBlock(nn.Module):
    """A residual block of the cddpm U-Net (cddpm.h): GN, SiLU, 3x3
    convolution, plus a projection of silu(emb) per channel, GN, SiLU,
    3x3 convolution, plus the input (through a 1x1 convolution where the
    channels change); with film the projection, twice as wide, scales
    and shifts the second GN's output instead."""

    def __init__(self, cin, cout, E, film):
        super().__init__()
        self.film = film
        self.n1 = nn.GroupNorm(groups(cin), cin)
        self.c1 = nn.Conv2d(cin, cout, 3, 1, 1)
        self.emb = nn.Linear(E, 2 * cout if film else cout)
        self.n2 = nn.GroupNorm(groups(cout), cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, es):
        h = self.c1(F.silu(group_norm(self.n1, x)))
        e = self.emb(es)[:, :, None, None]
        if self.film:
            s, t = e.chunk(2, dim=1)
            h = group_norm(self.n2, h) * (1 + s) + t
        else:
            h = group_norm(self.n2, h + e)
        h = self.c2(F.silu(h))
        return h + (self.skip(x) if self.skip is not None else x)

    def named_tensors(self, name):
        out = []
        for n, m in [("n1", self.n1), ("c1", self.c1), ("emb", self.emb),
                     ("n2", self.n2), ("c2", self.c2), ("skip", self.skip)]:
            if m is not None:
                w = "g" if isinstance(m, nn.GroupNorm) else "w"
                out += [("%s.%s.%s" % (name, n, w), m.weight),
                        ("%s.%s.b" % (name, n), m.bias)]
        return out


class Cddpm:
    """The diffusion model of lib/arch/cddpm/cddpm.h: an MLP that gives x0 or v, the
    time and condition embeddings added to every hidden layer, the
    weighted mean squared error of x0 or v (or, a v-network without
    snr-clip, of the noise); with unet > 0 a U-Net of three levels in
    its place (a residual block each way per level and one in the
    middle, skips concatenated, the embedding projected in each block).
    The schedule (linear, or with cosine=1 the cosine one), the time
    encoding and the noising are computed here from their definitions,
    in float64."""

    name = "cddpm"
    configs = [
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "embed=6",
         "timesteps=50", "batch=6", "seed=1"],
        ["in_dim=33", "ncond=10", "hidden=24", "layers=1", "embed=8",
         "timesteps=1000", "batch=12", "seed=2"],
        ["in_dim=12", "ncond=3", "hidden=8", "layers=3", "embed=4",
         "timesteps=200", "batch=9", "seed=3"],
        # the weighted loss, clipped at 5 and on x0 (clip 0), the
        # network giving v, then x0
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "embed=6",
         "timesteps=1000", "snr-clip=5", "batch=12", "seed=4"],
        ["in_dim=12", "ncond=3", "hidden=8", "layers=3", "embed=4",
         "timesteps=200", "snr-clip=0", "batch=9", "seed=5"],
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "embed=6",
         "timesteps=1000", "snr-clip=5", "predict-x0=1", "batch=12",
         "seed=6"],
        ["in_dim=12", "ncond=3", "hidden=8", "layers=3", "embed=4",
         "timesteps=200", "snr-clip=0", "predict-x0=1", "batch=9",
         "seed=7"],
        # the U-Net: 8x8x1 at 2 channels giving x0, 4x8x3 at 4 giving v
        # (down to 1x2), with the loss on eps, and 28x28x1 at 8 (groups
        # of 4 channels; 7x7 at the bottom)
        ["in_dim=64", "ncond=3", "hidden=6", "layers=1", "embed=4",
         "timesteps=100", "snr-clip=5", "predict-x0=1", "unet=2",
         "image_h=8", "image_w=8", "image_c=1", "batch=5", "seed=8"],
        ["in_dim=96", "ncond=4", "hidden=8", "layers=1", "embed=6",
         "timesteps=1000", "unet=4", "image_h=4", "image_w=8", "image_c=3",
         "batch=6", "seed=9"],
        ["in_dim=784", "ncond=10", "hidden=16", "layers=1", "embed=8",
         "timesteps=1000", "snr-clip=5", "predict-x0=1", "unet=8",
         "image_h=28", "image_w=28", "image_c=1", "batch=3", "seed=10"],
        # self-attention over 3x2 and 4x4 positions
        ["in_dim=96", "ncond=3", "hidden=6", "layers=1", "embed=4",
         "timesteps=100", "snr-clip=5", "predict-x0=1", "unet=2", "attn=1",
         "image_h=12", "image_w=8", "image_c=1", "batch=4", "seed=11"],
        ["in_dim=512", "ncond=4", "hidden=8", "layers=1", "embed=6",
         "timesteps=1000", "snr-clip=5", "unet=4", "attn=1", "image_h=16",
         "image_w=16", "image_c=2", "batch=3", "seed=12"],
        # the embedding as scale and shift after the norm, with and
        # without attention
        ["in_dim=64", "ncond=3", "hidden=6", "layers=1", "embed=4",
         "timesteps=100", "snr-clip=5", "predict-x0=1", "unet=2", "film=1",
         "image_h=8", "image_w=8", "image_c=1", "batch=5", "seed=13"],
        ["in_dim=512", "ncond=4", "hidden=8", "layers=1", "embed=6",
         "timesteps=1000", "unet=4", "attn=1", "film=1", "image_h=16",
         "image_w=16", "image_c=2", "batch=3", "seed=14"],
        # the cosine schedule, the MLP at T = 50 (its largest betas) and
        # the U-Net at 1000
        ["in_dim=20", "ncond=4", "hidden=16", "layers=2", "embed=6",
         "timesteps=50", "snr-clip=5", "predict-x0=1", "cosine=1",
         "batch=12", "seed=15"],
        ["in_dim=64", "ncond=3", "hidden=6", "layers=1", "embed=4",
         "timesteps=1000", "snr-clip=5", "predict-x0=1", "unet=2", "film=1",
         "cosine=1", "image_h=8", "image_w=8", "image_c=1", "batch=5",
         "seed=16"],
    ]
    tol = {"loss": (1e-5, 1e-6), "grad": (1e-4, 1e-6)}
    outputs = []

    class Net(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            H, layers = cfg["hidden"], cfg["layers"]
            self.cfg = cfg
            self.time = nn.Linear(cfg["embed"], H)
            # the last row is the null condition's
            self.cond = nn.Embedding(cfg["ncond"] + 1, H)
            if cfg.get("unet", 0) > 0:
                self.unet(cfg)
                return
            d, hid = cfg["in_dim"], []
            for _ in range(layers):
                hid.append(nn.Linear(d, H))
                d = H
            self.hid = nn.ModuleList(hid)
            self.out = nn.Linear(H, cfg["in_dim"])

        def unet(self, cfg):
            """The U-Net of cddpm.h (unet > 0)."""
            C, ch, E = cfg["unet"], cfg["image_c"], cfg["hidden"]
            self.inc = nn.Conv2d(ch, C, 3, 1, 1)
            self.ds1 = nn.Conv2d(C, C, 3, 2, 1)
            self.ds2 = nn.Conv2d(2 * C, 2 * C, 3, 2, 1)
            self.blocks = nn.ModuleDict()
            for name, cin, cout in [("down.0", C, C), ("down.1", C, 2 * C),
                                    ("down.2", 2 * C, 2 * C),
                                    ("mid", 2 * C, 2 * C),
                                    ("up.2", 4 * C, 2 * C),
                                    ("up.1", 4 * C, 2 * C),
                                    ("up.0", 3 * C, C)]:
                self.blocks[name.replace(".", "_")] = ResBlock(
                    cin, cout, E, cfg.get("film", 0))
            self.outn = nn.GroupNorm(groups(C), C)
            self.outc = nn.Conv2d(C, ch, 3, 1, 1)
            if cfg.get("attn", 0):
                self.attn_n = nn.GroupNorm(groups(2 * C), 2 * C)
                self.qkv = nn.Linear(2 * C, 6 * C)
                self.proj = nn.Linear(2 * C, 2 * C)

        def attn(self, x):
            """Self-attention over the positions of x (NCHW), one head."""
            B, d, h, w = x.shape
            n = group_norm(self.attn_n, x).permute(0, 2, 3, 1)
            q, k, v = self.qkv(n.reshape(B, h * w, d)).split(d, 2)
            a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), 2)
            o = self.proj(a @ v).view(B, h, w, d).permute(0, 3, 1, 2)
            return x + o

        def named_tensors(self):
            """(cg view name, parameter) in cg's buffer order."""
            out = [("time.w", self.time.weight), ("time.b", self.time.bias),
                   ("cond.emb", self.cond.weight)]
            if self.cfg.get("unet", 0) > 0:
                out += [("in.w", self.inc.weight), ("in.b", self.inc.bias)]
                for name in ["down.0", "down.1", "down.2", "mid", "up.2",
                             "up.1", "up.0"]:
                    if name in ("down.1", "down.2"):
                        m = self.ds1 if name == "down.1" else self.ds2
                        d = "ds." + name[-1]
                        out += [(d + ".w", m.weight), (d + ".b", m.bias)]
                    out += self.blocks[name.replace(".", "_")] \
                        .named_tensors(name)
                    if name == "mid" and self.cfg.get("attn", 0):
                        out += [("attn.n.g", self.attn_n.weight),
                                ("attn.n.b", self.attn_n.bias),
                                ("attn.qkv.w", self.qkv.weight),
                                ("attn.qkv.b", self.qkv.bias),
                                ("attn.proj.w", self.proj.weight),
                                ("attn.proj.b", self.proj.bias)]
                return out + [("out.n.g", self.outn.weight),
                              ("out.n.b", self.outn.bias),
                              ("out.w", self.outc.weight),
                              ("out.b", self.outc.bias)]
            for i, m in enumerate(self.hid):
                out += [("hid.%d.w" % i, m.weight), ("hid.%d.b" % i, m.bias)]
            return out + [("out.w", self.out.weight),
                          ("out.b", self.out.bias)]

        def forward(self, xt, t, cond, embed):
            half = embed // 2
            freq = torch.exp(-math.log(10000.0) *
                             torch.arange(half, dtype=torch.float64) / half)
            a = t.double()[:, None] * freq[None, :]
            # the encoding in float64 (cg's is in double), then in the
            # weights' precision (bench/torch_speed.py runs in float32)
            enc = torch.cat([a.sin(), a.cos()], 1).to(self.time.weight.dtype)
            emb = self.time(enc) + self.cond(cond)
            if self.cfg.get("unet", 0) > 0:
                return self.unet_forward(xt, emb)
            h = xt
            for m in self.hid:
                h = F.relu(m(h) + emb)
            return self.out(h)

        def unet_forward(self, xt, emb):
            """The U-Net on x_t [B, in_dim] (channels-last rows, as cg
            keeps an image) and emb [B, hidden]; its output as rows."""
            B, cfg, blk = xt.shape[0], self.cfg, self.blocks
            x = xt.view(B, cfg["image_h"], cfg["image_w"], cfg["image_c"])
            x = x.permute(0, 3, 1, 2)
            es = F.silu(emb)
            s0 = blk["down_0"](self.inc(x), es)
            s1 = blk["down_1"](self.ds1(s0), es)
            s2 = blk["down_2"](self.ds2(s1), es)
            h = blk["mid"](s2, es)
            if cfg.get("attn", 0):
                h = self.attn(h)
            h = blk["up_2"](torch.cat([h, s2], 1), es)
            h = F.interpolate(h, scale_factor=2)
            h = blk["up_1"](torch.cat([h, s1], 1), es)
            h = F.interpolate(h, scale_factor=2)
            h = blk["up_0"](torch.cat([h, s0], 1), es)
            o = self.outc(F.silu(group_norm(self.outn, h)))
            return o.permute(0, 2, 3, 1).reshape(B, -1)

    @staticmethod
    def run(net, cfg, d):
        """The batch mean of the per-example mean squared error."""
        B, D = cfg["batch"], cfg["in_dim"]
        x0 = f64(read_bin(d, "x0.bin", "<f4", B * D)).view(B, D)
        eps = f64(read_bin(d, "eps.bin", "<f4", B * D)).view(B, D)
        cond = i64(read_bin(d, "cond.bin", "<i4", B))
        t = i64(read_bin(d, "t.bin", "<i4", B))
        return {"loss": Cddpm.loss(net, cfg, x0, eps, cond, t)}, {}

    @staticmethod
    def loss(net, cfg, x0, eps, cond, t):
        """The loss of x0 [B, in_dim] noised by eps [B, in_dim] at t [B],
        conditions cond [B], in x0's precision (the schedule computed in
        float64); bench/torch_speed.py trains with it."""
        T = cfg["timesteps"]
        lo, hi = 0.1 / T, 20.0 / T
        beta = lo + (hi - lo) * torch.arange(T, dtype=torch.float64) / (T - 1)
        if cfg.get("cosine"):
            # Nichol and Dhariwal's: 1 - f((t + 1) / T) / f(t / T),
            # clipped at 0.999
            u = torch.arange(T + 1, dtype=torch.float64) / T
            f = torch.cos((u + 0.008) / 1.008 * math.pi / 2) ** 2
            beta = (1 - f[1:] / f[:-1]).clamp(max=0.999)
        abar = torch.cumprod(1 - beta, 0)[t][:, None].to(x0.dtype)
        xt = abar.sqrt() * x0 + (1 - abar).sqrt() * eps
        out = net(xt, t, cond, cfg["embed"])
        snr = abar / (1 - abar)
        if cfg.get("predict-x0"):
            # the network gives x0; the loss on it, weighted
            w = snr.clamp(max=cfg["snr-clip"]) + 1
            return (w * (out - x0) ** 2).mean(1).mean()
        vhat = out
        if "snr-clip" not in cfg:
            # a model made before the weighting: the loss on eps, which
            # follows from v and x_t
            pred = abar.sqrt() * vhat + (1 - abar).sqrt() * xt
            return ((pred - eps) ** 2).mean(1).mean()
        w = (snr.clamp(max=cfg["snr-clip"]) + 1) / (snr + 1)
        v = abar.sqrt() * eps - (1 - abar).sqrt() * x0
        return (w * (vhat - v) ** 2).mean(1).mean()


# ------------------------------------------------------------------ cgan

class Cgan:
    """The conditional GAN of lib/arch/cgan/cgan.h: an MLP generator (the condition's
    embedding added to the first layer), a projection discriminator whose
    matrices are divided by sigma = u^T W v, u and v the power iteration's
    vectors as cg's pass held them fixed (as PyTorch's spectral_norm does
    in training mode), the hinge loss.  The gradient to compare is L_G's
    for the generator's tensors and L_D's for the discriminator's: the
    backward objective here is L_D with the fakes detached plus L_G with
    the discriminator's tensors detached.  With r1 = gamma, L_D adds
    gamma / 2 mean |grad_x D(x, y)|^2 on the reals, grad_x D by
    torch.autograd.grad with create_graph, so that its own gradient is
    PyTorch's double backpropagation.  With aux = lambda, the
    discriminator's features feed a Linear classifier too, L_D adds
    lambda times its cross-entropy on the reals (F.cross_entropy) and
    L_G lambda times its cross-entropy on the fakes, through the
    discriminator's tensors detached."""

    name = "cgan"
    configs = [
        ["in_dim=20", "ncond=4", "latent=5", "hidden=16", "layers=2",
         "sn-iters=5", "batch=6", "seed=1"],
        ["in_dim=33", "ncond=10", "latent=8", "hidden=24", "layers=1",
         "sn-iters=1", "batch=12", "seed=2"],
        ["in_dim=12", "ncond=3", "latent=3", "hidden=8", "layers=3",
         "sn-iters=20", "batch=9", "seed=3"],
        ["in_dim=64", "ncond=3", "latent=4", "hidden=8", "layers=1",
         "sn-iters=3", "conv=3", "image_h=8", "image_w=8", "image_c=1",
         "batch=4", "seed=4"],
        ["in_dim=96", "ncond=4", "latent=5", "hidden=8", "layers=1",
         "sn-iters=2", "conv=2", "image_h=4", "image_w=8", "image_c=3",
         "batch=5", "seed=5"],
        # the R1 penalty (its loss is L_D + R1): the MLPs at 1 and 3
        # layers, and the two conv cases above with it (the same draws:
        # R1 leaves the generator's gradient as it was)
        ["in_dim=20", "ncond=4", "latent=5", "hidden=16", "layers=1",
         "sn-iters=5", "r1=10", "batch=6", "seed=6"],
        ["in_dim=12", "ncond=3", "latent=3", "hidden=8", "layers=3",
         "sn-iters=3", "r1=2", "batch=9", "seed=7"],
        ["in_dim=64", "ncond=3", "latent=4", "hidden=8", "layers=1",
         "sn-iters=3", "conv=3", "r1=10", "image_h=8", "image_w=8",
         "image_c=1", "batch=4", "seed=4"],
        ["in_dim=96", "ncond=4", "latent=5", "hidden=8", "layers=1",
         "sn-iters=2", "conv=2", "r1=5", "image_h=4", "image_w=8",
         "image_c=3", "batch=5", "seed=5"],
        # the discriminator's 4x4 kernels, without R1 and with it
        ["in_dim=64", "ncond=3", "latent=4", "hidden=8", "layers=1",
         "sn-iters=3", "conv=3", "disc-kernel=4", "image_h=8",
         "image_w=8", "image_c=1", "batch=4", "seed=12"],
        ["in_dim=96", "ncond=4", "latent=5", "hidden=8", "layers=1",
         "sn-iters=2", "conv=2", "disc-kernel=4", "r1=5", "image_h=4",
         "image_w=8", "image_c=3", "batch=5", "seed=13"],
        # distilled toward a teacher's images (teacher=1: alpha in
        # percent): the MLPs, with R1, and the conv nets
        ["in_dim=20", "ncond=4", "latent=5", "hidden=16", "layers=2",
         "sn-iters=5", "teacher=1", "alpha=60", "batch=6", "seed=8"],
        ["in_dim=12", "ncond=3", "latent=3", "hidden=8", "layers=3",
         "sn-iters=3", "r1=2", "teacher=1", "alpha=100", "batch=9",
         "seed=9"],
        ["in_dim=64", "ncond=3", "latent=4", "hidden=8", "layers=1",
         "sn-iters=3", "conv=3", "image_h=8", "image_w=8", "image_c=1",
         "teacher=1", "alpha=50", "batch=4", "seed=10"],
        # the auxiliary classifier (AC-GAN): the MLPs, with R1, the conv
        # nets with 4x4 kernels and R1, distilled
        ["in_dim=20", "ncond=4", "latent=5", "hidden=16", "layers=2",
         "sn-iters=5", "aux=1", "batch=6", "seed=14"],
        ["in_dim=12", "ncond=3", "latent=3", "hidden=8", "layers=1",
         "sn-iters=3", "r1=2", "aux=3", "batch=9", "seed=15"],
        ["in_dim=64", "ncond=3", "latent=4", "hidden=8", "layers=1",
         "sn-iters=3", "conv=3", "disc-kernel=4", "r1=5", "aux=2",
         "image_h=8", "image_w=8", "image_c=1", "batch=4", "seed=16"],
        ["in_dim=96", "ncond=4", "latent=5", "hidden=8", "layers=1",
         "sn-iters=2", "conv=2", "aux=1", "image_h=4", "image_w=8",
         "image_c=3", "teacher=1", "alpha=40", "batch=5", "seed=17"],
    ]
    tol = {"loss": (1e-5, 1e-6), "grad": (1e-4, 1e-6)}
    outputs = []

    class Net(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            if cfg.get("conv", 0) > 0:
                self.conv_nets(cfg)
                return
            H, K, layers = cfg["hidden"], cfg["ncond"], cfg["layers"]
            self.gen_emb = nn.Embedding(K, H)
            self.gen = nn.ModuleList(
                [nn.Linear(cfg["latent"] if i == 0 else H, H)
                 for i in range(layers)])
            self.gen_out = nn.Linear(H, cfg["in_dim"])
            self.disc = nn.ModuleList(
                [nn.Linear(cfg["in_dim"] if i == 0 else H, H)
                 for i in range(layers)])
            self.psi = nn.Linear(H, 1)
            self.disc_emb = nn.Embedding(K, H)
            if cfg.get("aux", 0) > 0:
                self.cls = nn.Linear(H, K)

        def conv_nets(self, cfg):
            """The DCGAN-like nets of cgan.h (conv > 0)."""
            C, K, ch = cfg["conv"], cfg["ncond"], cfg["image_c"]
            self.F = cfg["image_h"] // 4 * cfg["image_w"] // 4 * 2 * C
            self.gen_emb = nn.Embedding(K, self.F)
            def groups(n):
                return next(g for g in (8, 4, 2, 1) if n % g == 0)
            self.gen0 = nn.Linear(cfg["latent"], self.F)
            self.gen_n0 = nn.GroupNorm(groups(2 * C), 2 * C)
            self.gen_c1 = nn.Conv2d(2 * C, C, 3, 1, 1)
            self.gen_n1 = nn.GroupNorm(groups(C), C)
            self.gen_c2 = nn.Conv2d(C, C, 3, 1, 1)
            self.gen_n2 = nn.GroupNorm(groups(C), C)
            self.gen_out = nn.Conv2d(C, ch, 3, 1, 1)
            k = cfg.get("disc-kernel", 3)
            self.disc_c1 = nn.Conv2d(ch, C, k, 2, 1)
            self.disc_c2 = nn.Conv2d(C, 2 * C, k, 2, 1)
            self.psi = nn.Linear(self.F, 1)
            self.disc_emb = nn.Embedding(K, self.F)
            if cfg.get("aux", 0) > 0:
                self.cls = nn.Linear(self.F, K)

        def named_tensors(self):
            """(cg view name, parameter) in cg's buffer order."""
            cls = ([("disc.cls.w", self.cls.weight),
                    ("disc.cls.b", self.cls.bias)]
                   if self.cfg.get("aux", 0) > 0 else [])
            return self.named_tensors_but_cls() + cls

        def named_tensors_but_cls(self):
            if self.cfg.get("conv", 0) > 0:
                out = [("gen.emb", self.gen_emb.weight),
                       ("gen.0.w", self.gen0.weight),
                       ("gen.0.b", self.gen0.bias)]
                for n in ["gen.n0", "gen.c1", "gen.n1", "gen.c2", "gen.n2",
                          "gen.out", "disc.c1", "disc.c2"]:
                    m = getattr(self, n.replace(".", "_"))
                    g = ".g" if n.split(".")[1].startswith("n") else ".w"
                    out += [(n + g, m.weight),
                            (n + (".b"), m.bias)]
                return out + [("disc.psi.w", self.psi.weight),
                              ("disc.psi.b", self.psi.bias),
                              ("disc.emb", self.disc_emb.weight)]
            out = [("gen.emb", self.gen_emb.weight)]
            for i, m in enumerate(self.gen):
                out += [("gen.%d.w" % i, m.weight), ("gen.%d.b" % i, m.bias)]
            out += [("gen.out.w", self.gen_out.weight),
                    ("gen.out.b", self.gen_out.bias)]
            for i, m in enumerate(self.disc):
                out += [("disc.%d.w" % i, m.weight),
                        ("disc.%d.b" % i, m.bias)]
            return out + [("disc.psi.w", self.psi.weight),
                          ("disc.psi.b", self.psi.bias),
                          ("disc.emb", self.disc_emb.weight)]

        def nchw(self, x, h, w):
            """A channels-last map [B, h w C] as NCHW."""
            return x.view(x.shape[0], h, w, -1).permute(0, 3, 1, 2)

        def flat(self, x):
            """An NCHW map as cg's rows, channels-last."""
            return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)

        def generate(self, z, y):
            if self.cfg.get("conv", 0) > 0:
                H, W = self.cfg["image_h"], self.cfg["image_w"]
                a = self.nchw(self.gen0(z) + self.gen_emb(y), H // 4, W // 4)
                a = F.relu(group_norm(self.gen_n0, a))
                a = self.gen_c1(F.interpolate(a, scale_factor=2))
                a = F.relu(group_norm(self.gen_n1, a))
                a = self.gen_c2(F.interpolate(a, scale_factor=2))
                a = F.relu(group_norm(self.gen_n2, a))
                return torch.sigmoid(self.flat(self.gen_out(a)))
            h = F.relu(self.gen[0](z) + self.gen_emb(y))
            for m in self.gen[1:]:
                h = F.relu(m(h))
            return torch.sigmoid(self.gen_out(h))

        def discriminate(self, x, y, uv, fixed):
            """D(x, y); with fixed, the discriminator's tensors detached."""
            return self.discriminate_cls(x, y, uv, fixed)[0]

        def discriminate_cls(self, x, y, uv, fixed):
            """D(x, y) and the classifier's logits (None without
            one)."""
            def t(p):
                return p.detach() if fixed else p

            def sn(w, i):
                u, v = uv[i]
                return w / (u @ (w.reshape(w.shape[0], -1) @ v))
            if self.cfg.get("conv", 0) > 0:
                H, W = self.cfg["image_h"], self.cfg["image_w"]
                h = self.nchw(x, H, W)
                for i, m in enumerate([self.disc_c1, self.disc_c2]):
                    h = F.leaky_relu(F.conv2d(h, sn(t(m.weight), i),
                                              t(m.bias), 2, 1), 0.2)
                h = self.flat(h)
                s = F.linear(h, sn(t(self.psi.weight), 2), t(self.psi.bias))
                e = sn(t(self.disc_emb.weight), 3)[y]
                return s[:, 0] + (h * e).sum(1), self.logits(h, t)
            h = x
            for i, m in enumerate(self.disc):
                h = F.leaky_relu(F.linear(h, sn(t(m.weight), i), t(m.bias)),
                                 0.2)
            L = len(self.disc)
            s = F.linear(h, sn(t(self.psi.weight), L), t(self.psi.bias))
            e = sn(t(self.disc_emb.weight), L + 1)[y]
            return s[:, 0] + (h * e).sum(1), self.logits(h, t)

        def logits(self, h, t):
            if self.cfg.get("aux", 0) == 0:
                return None
            return F.linear(h, t(self.cls.weight), t(self.cls.bias))

    @staticmethod
    def run(net, cfg, d):
        B, D, Z = cfg["batch"], cfg["in_dim"], cfg["latent"]
        H, K, L = cfg["hidden"], cfg["ncond"], cfg["layers"]
        x = f64(read_bin(d, "x.bin", "<f4", B * D)).view(B, D)
        z = f64(read_bin(d, "z.bin", "<f4", B * Z)).view(B, Z)
        cond = i64(read_bin(d, "cond.bin", "<i4", B))
        shapes = [(H, D if i == 0 else H) for i in range(L)] + \
            [(1, H), (K, H)]
        if cfg.get("conv", 0) > 0:
            C, Fw = cfg["conv"], net.F
            kk = cfg.get("disc-kernel", 3) ** 2
            shapes = [(C, cfg["image_c"] * kk), (2 * C, C * kk), (1, Fw),
                      (K, Fw)]
        sn = f64(read_bin(d, "sn.bin", "<f4",
                          sum(r + c for r, c in shapes)))
        uv, off = [], 0
        for r, c in shapes:
            uv.append((sn[off:off + r], sn[off + r:off + r + c]))
            off += r + c
        fake = net.generate(z, cond)
        gamma = cfg.get("r1", 0)
        x.requires_grad_(gamma > 0)
        s_real, c_real = net.discriminate_cls(x, cond, uv, False)
        d_real = F.relu(1 - s_real).mean()
        d_fake = F.relu(1 + net.discriminate(fake.detach(), cond, uv,
                                             False)).mean()
        s_g, c_fake = net.discriminate_cls(fake, cond, uv, True)
        g = -s_g.mean()
        loss = d_real + d_fake
        lam = cfg.get("aux", 0)
        aux = {}
        if lam > 0:
            # the classifier: D learns the reals' classes, G to draw
            # what it takes for their condition (D's tensors detached)
            aux = {"aux_real": F.cross_entropy(c_real, cond),
                   "aux_fake": F.cross_entropy(c_fake, cond)}
            loss = loss + lam * aux["aux_real"]
            g_obj = g + lam * aux["aux_fake"]
        else:
            g_obj = g
        if gamma > 0:
            # R1: gamma / 2 mean |grad_x D(x, y)|^2 on the reals, its
            # gradient by double backpropagation
            gx, = torch.autograd.grad(s_real.sum(), x, create_graph=True)
            loss = loss + gamma / 2 * (gx ** 2).sum(1).mean()
        out = {"loss": loss, "d_real": d_real, "d_fake": d_fake, "g": g,
               "backward": loss + g_obj, **aux}
        if "alpha_pct" in cfg:
            # the generator's objective (1 - a) L_G + a T, T the squared
            # distance to the teacher's images for the same z and y
            a = cfg["alpha_pct"] / 100
            target = f64(read_bin(d, "target.bin", "<f4", B * D)).view(B, D)
            T = ((fake - target) ** 2).sum(1).mean()
            out.update(teacher=T, backward=loss + (1 - a) * g_obj + a * T)
        return out, {}


# ------------------------------------------------------------------ cgpt

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


class Cgpt:
    """The model of lib/arch/cgpt/cgpt.c (and of bench/torch_cgpt.py): tied and
    untied, one head and several, fewer positions than the context."""

    name = "cgpt"
    configs = [
        ["ncond=3", "context=8", "width=16", "layers=2", "heads=2",
         "tied=0", "batch=3", "positions=7", "seed=1"],
        ["ncond=2", "context=6", "width=12", "layers=1", "heads=3",
         "tied=1", "batch=2", "positions=6", "seed=2"],
        ["ncond=5", "context=16", "width=32", "layers=3", "heads=4",
         "tied=0", "batch=4", "positions=16", "seed=3"],
        ["ncond=1", "context=12", "width=24", "layers=2", "heads=1",
         "tied=1", "batch=3", "positions=5", "seed=4"],
        # low-rank adapters: on every matrix of the blocks (scale 2), and
        # on one block's attention and the head (rank 3, scale 1 / 3)
        ["ncond=3", "context=8", "width=16", "layers=2", "heads=2",
         "tied=1", "lora=2", "lora-alpha=4", "lora-on=h.*.w", "batch=3",
         "positions=7", "seed=5"],
        ["ncond=2", "context=8", "width=12", "layers=2", "heads=3",
         "tied=0", "lora=3", "lora-alpha=1", "lora-on=h.1.attn.*",
         "lora-on=lm_head.w", "batch=2", "positions=8", "seed=6"],
        # on the embedding, which holds the conditions' rows: tied (the
        # head reads the merged table too), and beside the head
        ["ncond=2", "context=8", "width=12", "layers=2", "heads=3",
         "tied=1", "lora=2", "lora-alpha=2", "lora-on=wte",
         "lora-on=h.0.mlp.fc.w", "batch=2", "positions=8", "seed=7"],
        ["ncond=3", "context=8", "width=12", "layers=1", "heads=2",
         "tied=0", "lora=3", "lora-alpha=6", "lora-on=wte",
         "lora-on=lm_head.w", "batch=3", "positions=6", "seed=8"],
    ]
    tol = {"loss": (1e-5, 1e-6), "grad": (1e-4, 1e-7),
           "logits": (1e-4, 1e-5)}
    outputs = ["logits"]

    class Net(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            V, C = 257 + cfg["ncond"], cfg["width"]
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(cfg["context"], C)
            self.h = nn.ModuleList([Block(C, cfg["heads"])
                                    for _ in range(cfg["layers"])])
            self.lnf = nn.LayerNorm(C)
            self.lm_head = (None if cfg["tied"] else
                            nn.Linear(C, V, bias=False))

        def named_tensors(self):
            """(cg view name, parameter) in cg's buffer order."""
            out = [("wte", self.wte.weight), ("wpe", self.wpe.weight)]
            for i, b in enumerate(self.h):
                for name, p in (("ln1.w", b.ln1.weight),
                                ("ln1.b", b.ln1.bias),
                                ("attn.qkv.w", b.qkv.weight),
                                ("attn.qkv.b", b.qkv.bias),
                                ("attn.proj.w", b.proj.weight),
                                ("attn.proj.b", b.proj.bias),
                                ("ln2.w", b.ln2.weight),
                                ("ln2.b", b.ln2.bias),
                                ("mlp.fc.w", b.fc.weight),
                                ("mlp.fc.b", b.fc.bias),
                                ("mlp.proj.w", b.mproj.weight),
                                ("mlp.proj.b", b.mproj.bias)):
                    out.append(("h.%d.%s" % (i, name), p))
            out += [("lnf.w", self.lnf.weight), ("lnf.b", self.lnf.bias)]
            if self.lm_head is not None:
                out.append(("lm_head.w", self.lm_head.weight))
            return out

    @staticmethod
    def run(net, cfg, d):
        """The loss sum(weight * cross-entropy), and the logits."""
        B, T, V = cfg["batch"], cfg["positions"], 257 + cfg["ncond"]
        tokens = i64(read_bin(d, "tokens.bin", "<i4", B * T)).view(B, T)
        targets = i64(read_bin(d, "targets.bin", "<i4", B * T))
        weight = f64(read_bin(d, "weight.bin", "<f4", B * T))
        x = net.wte(tokens) + net.wpe(torch.arange(T))
        for b in net.h:
            x = b(x)
        x = net.lnf(x)
        out = (x @ table(net.wte).t() if net.lm_head is None
               else net.lm_head(x))
        # Weight-0 positions carry target -1: never read, as in cg.
        tgt = torch.where(weight > 0, targets, torch.zeros_like(targets))
        ce = F.cross_entropy(out.view(B * T, V), tgt, reduction="none")
        return {"loss": (weight * ce).sum()}, {"logits": out}


ARCHS = {a.name: a for a in (Cvae, Cclf, Cddpm, Cgan, Cgpt)}

# --autocast: cg's bf16 products (model_dump bf16=1) against PyTorch's
# autocast on the same weights.  Both round the operands of every matrix
# product to bf16 (unit roundoff u = 2^-9, about 2e-3) and sum in float32;
# autocast also rounds each product's output to bf16 and runs more in
# bf16 (cgan's spectral-norm iterations, for one), where cg keeps float32.
# Each side is some u from float64, so they may differ by about as much:
# a loss (or its part) agrees within 4u of autocast's plus 2e-3, or cg's
# is the nearer to float64; the whole gradient (relative, in the 2-norm)
# agrees within 0.05, or cg's is the nearer to float64; and cg's is
# within 0.05 of float64's in every case.  Each line shows both sides'
# distances from float64.
AUTOCAST_TOL = {"loss": (2 ** -7, 2e-3), "grad": 0.05}

# --f16: cg's f16 products (model_dump f16=1: operands rounded to IEEE
# half, u = 2^-11, with the trainer's loss scaling) against float64: a
# loss (or its part) within 4u plus 5e-4, the whole gradient (relative,
# in the 2-norm) within 0.01.  Where this PyTorch runs autocast in
# float16 on the CPU (2.x; Debian's 1.13 does bfloat16 alone there) its
# distances are printed beside cg's, and cg's gradient must also be
# within 0.01 of autocast's or the nearer to float64.
F16_TOL = {"loss": (2 ** -9, 5e-4), "grad": 0.01}


# ---------------------------------------------------------- shared code

class LoRALinear(nn.Linear):
    """A linear layer with a low-rank adapter, as one writes it in
    PyTorch: the frozen weight W [out, in] (and the bias) plus the path
    x A^T B^T scaled by alpha / r, A [r, in] and B [out, r] trained."""

    def __init__(self, lin, r, alpha):
        super().__init__(lin.in_features, lin.out_features,
                         bias=lin.bias is not None)
        self.to(lin.weight.dtype)
        self.weight.requires_grad_(False)
        self.lora_a = nn.Parameter(lin.weight.new_zeros(r, lin.in_features))
        self.lora_b = nn.Parameter(lin.weight.new_zeros(lin.out_features, r))
        self.scale = alpha / r

    def forward(self, x):
        return (F.linear(x, self.weight, self.bias) +
                (x @ self.lora_a.t() @ self.lora_b.t()) * self.scale)


class LoRAEmbedding(nn.Embedding):
    """An nn.Embedding whose table is W + (alpha / r) B A, A [r, dim] and
    B [rows, r] trained: cg's adapters on an embedding view [rows, dim]
    (the table as a matrix [out, in])."""

    def __init__(self, emb, r, alpha):
        super().__init__(emb.num_embeddings, emb.embedding_dim)
        self.to(emb.weight.dtype)
        self.weight.requires_grad_(False)
        self.lora_a = nn.Parameter(emb.weight.new_zeros(r, emb.embedding_dim))
        self.lora_b = nn.Parameter(emb.weight.new_zeros(emb.num_embeddings,
                                                        r))
        self.scale = alpha / r

    def merged(self):
        """The table as the model uses it."""
        return self.weight + (self.lora_b @ self.lora_a) * self.scale

    def forward(self, x):
        return F.embedding(x, self.merged())


def table(emb):
    """An embedding's table as the model uses it (adapters merged)."""
    return emb.merged() if isinstance(emb, LoRAEmbedding) else emb.weight


def add_lora(d, net, names):
    """Where the dump has adapters (lora.txt; views named NAME.lora_a and
    NAME.lora_b after the arch's), each target NAME's nn.Linear of net in
    place replaced by a LoRALinear, its nn.Embedding by a LoRAEmbedding;
    the adapters' (name, parameter) in view order.  No adapters: []."""
    path = os.path.join(d, "lora.txt")
    if not os.path.exists(path):
        return []
    lo = read_kv(path)
    r, alpha = int(lo["r"]), float(lo["alpha"])
    params = dict(net.named_tensors())
    out = []
    for name in names:
        if not name.endswith(".lora_a"):
            continue
        w = params.get(name[:-len(".lora_a")])
        hit = [(parent, key) for parent in net.modules()
               for key, m in parent.named_children()
               if isinstance(m, (nn.Linear, nn.Embedding)) and
               m.weight is w]
        if w is None or len(hit) != 1:
            raise DumpError("%s: no linear layer or embedding of the "
                            "model" % name)
        parent, key = hit[0]
        m = getattr(parent, key)
        m = (LoRALinear(m, r, alpha) if isinstance(m, nn.Linear)
             else LoRAEmbedding(m, r, alpha))
        setattr(parent, key, m)
        out += [(name, m.lora_a), (name[:-1] + "b", m.lora_b)]
    return out


def grad_of(p):
    """p's gradient; a frozen p's (no gradient) as zeros."""
    return (p.grad if p.grad is not None else torch.zeros_like(p)) \
        .detach().reshape(-1)


class DumpError(Exception):
    pass


# The dtype of the reference's inputs: float64, or float32 under autocast.
DTYPE = [torch.float64]


def f64(a):
    return torch.from_numpy(a.astype(np.float64)).to(DTYPE[0])


def i64(a):
    return torch.from_numpy(a.astype(np.int64))


def read_kv(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            out[k] = v
    return out


def read_bin(d, name, dtype, count=None):
    a = np.fromfile(os.path.join(d, name), dtype=dtype)
    if count is not None and a.size != count:
        raise DumpError("%s: %d values, config.txt says %d"
                        % (name, a.size, count))
    return a


def compare(label, got, ref, rtol, atol):
    """Print one line; True if every |got - ref| <= atol + rtol |ref|."""
    diff = np.abs(got - ref)
    ratio = float((diff / (atol + rtol * np.abs(ref))).max())
    good = ratio <= 1
    print("  %-4s %-18s n=%-6d max |diff| %.3g (%.3g of tolerance)"
          % ("ok" if good else "FAIL", label, got.size, diff.max(), ratio))
    return good, float(diff.max())


def load_views(d, net, params):
    """Copy params into net's tensors in view order; the view list."""
    views = []
    with open(os.path.join(d, "views.txt")) as f:
        for line in f:
            w = line.split()
            views.append((w[0], int(w[1]), int(w[2]),
                          [int(s) for s in w[3:]]))
    # the adapters' views follow the arch's
    lora = add_lora(d, net, [v[0] for v in views][len(net.named_tensors()):])
    tensors = net.named_tensors() + lora
    if [v[0] for v in views] != [t[0] for t in tensors]:
        raise DumpError("view names differ from the model's")
    off = 0
    with torch.no_grad():
        for (name, voff, n, shape), (_, p) in zip(views, tensors):
            if voff != off or list(p.shape) != shape or p.numel() != n:
                raise DumpError("view %s: offset %d shape %s, model wants "
                                "%d %s" % (name, voff, shape, off,
                                           list(p.shape)))
            p.copy_(f64(params[off:off + n]).view(p.shape))
            off += n
    if off != params.size:
        raise DumpError("views cover %d of %d params" % (off, params.size))
    return views, tensors


def read_case(arch, d, label=""):
    """A dump's config, cg's losses, parameters and gradient, and arch's
    float64 model loaded with the parameters (its views and tensors); the
    case's line printed."""
    cfg = {k: int(float(v))
           for k, v in read_kv(os.path.join(d, "config.txt")).items()}
    want = {k: float(v)
            for k, v in read_kv(os.path.join(d, "loss.txt")).items()}
    print("%s: %s%s %s" % (d, arch.name, label, " ".join(
        "%s=%d" % kv for kv in cfg.items() if kv[0] != "nparams")))
    params = read_bin(d, "params.bin", "<f4", cfg["nparams"])
    grad = read_bin(d, "grad.bin", "<f4", cfg["nparams"])
    net = arch.Net(cfg).double()
    views, tensors = load_views(d, net, params)
    return cfg, want, params, grad, net, views, tensors


def check(arch, d):
    """Compare one dump directory of arch; True if it matches."""
    cfg, want, _, grad, net, views, tensors = read_case(arch, d)

    losses, outs = arch.run(net, cfg, d)
    # An arch whose gradient is not the loss's (cgan's two objectives)
    # names what to differentiate.
    (losses.pop("backward") if "backward" in losses
     else losses["loss"]).backward()
    ok = True
    for name in arch.outputs:
        ref = outs[name].detach().reshape(-1).numpy()
        got = read_bin(d, name + ".bin", "<f4", ref.size).astype(np.float64)
        good, _ = compare(name, got, ref, *arch.tol[name])
        ok &= good
    if sorted(want) != sorted(losses):
        raise DumpError("loss.txt has %s, the model %s"
                        % (sorted(want), sorted(losses)))
    rtol, atol = arch.tol["loss"]
    for key, ref in losses.items():
        ref = ref.item()
        diff = abs(want[key] - ref)
        good = diff <= atol + rtol * abs(ref)
        ok &= good
        print("  %-4s %-18s cg %.9g torch %.9g diff %.3g"
              % ("ok" if good else "FAIL", key, want[key], ref, diff))
    worst_name, worst = "", 0.0
    off = 0
    for (name, _, n, _), (_, p) in zip(views, tensors):
        got = grad[off:off + n].astype(np.float64)
        off += n
        good, dmax = compare(name, got, grad_of(p).numpy(),
                             *arch.tol["grad"])
        ok &= good
        if dmax > worst:
            worst_name, worst = name, dmax
    print("  largest gradient difference %.3g in %s" % (worst, worst_name))
    return ok


def autocast(arch, cfg, d, params, dtype=torch.bfloat16):
    """The losses and the gradient (in view order) of arch in float32 under
    torch.autocast("cpu", dtype=dtype): PyTorch's mixed precision on cg's
    weights and inputs; None where this PyTorch does not run autocast in
    dtype on the CPU."""
    DTYPE[0] = torch.float32
    try:
        net = arch.Net(cfg).float()
        views, tensors = load_views(d, net, params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ctx = torch.autocast("cpu", dtype=dtype)
        try:
            ctx.__enter__()
        except RuntimeError:  # 1.13: "only support Bfloat16"
            return None, None
        try:
            if not torch.is_autocast_cpu_enabled():
                return None, None
            losses, _ = arch.run(net, cfg, d)
        finally:
            ctx.__exit__(None, None, None)
        (losses.pop("backward") if "backward" in losses
         else losses["loss"]).backward()
    finally:
        DTYPE[0] = torch.float64
    grad = np.concatenate([grad_of(p).double().numpy()
                           for _, p in tensors])
    return {k: v.item() for k, v in losses.items()}, grad


def check_bf16(arch, d):
    """cg with bf16 operands (model_dump bf16=1) against PyTorch's autocast
    on the same weights, both measured from the float64 model: True if
    they agree within AUTOCAST_TOL and neither is further from float64."""
    cfg, want, params, got, net, _, tensors = read_case(arch, d, " bf16")
    got = got.astype(np.float64)
    ref, _ = arch.run(net, cfg, d)
    (ref.pop("backward") if "backward" in ref else ref["loss"]).backward()
    g64 = np.concatenate([grad_of(p).numpy() for _, p in tensors])
    ac, gac = autocast(arch, cfg, d, params)
    ok = True
    rtol, atol = AUTOCAST_TOL["loss"]
    for key in sorted(want):
        r = ref[key].item()
        diff = abs(want[key] - ac[key])
        good = (diff <= atol + rtol * abs(ac[key]) or
                abs(want[key] - r) <= abs(ac[key] - r))
        ok &= good
        print("  %-4s %-18s cg %.7g autocast %.7g (float64 %.7g): "
              "diff %.3g, from float64 cg %.3g autocast %.3g"
              % ("ok" if good else "FAIL", key, want[key], ac[key], r,
                 diff, abs(want[key] - r), abs(ac[key] - r)))

    def rel(a, b):
        return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    e, e_cg, e_ac = rel(got, gac), rel(got, g64), rel(gac, g64)
    good = e_cg <= AUTOCAST_TOL["grad"] and (
        e <= AUTOCAST_TOL["grad"] or e_cg <= e_ac)
    ok &= good
    print("  %-4s gradient            |cg - autocast| / |autocast| %.3g; "
          "from float64: cg %.3g, autocast %.3g"
          % ("ok" if good else "FAIL", e, e_cg, e_ac))
    return ok


def check_f16(arch, d):
    """cg with f16 operands and loss scaling (model_dump f16=1) against the
    float64 model: True if within F16_TOL; PyTorch's autocast in float16
    beside it where it has one on the CPU."""
    cfg, want, params, got, net, _, tensors = read_case(arch, d, " f16")
    got = got.astype(np.float64)
    ref, _ = arch.run(net, cfg, d)
    (ref.pop("backward") if "backward" in ref else ref["loss"]).backward()
    g64 = np.concatenate([grad_of(p).numpy() for _, p in tensors])
    ac, gac = autocast(arch, cfg, d, params, torch.float16)
    ok = True
    rtol, atol = F16_TOL["loss"]
    for key in sorted(want):
        r = ref[key].item()
        diff = abs(want[key] - r)
        good = diff <= atol + rtol * abs(r)
        ok &= good
        print("  %-4s %-18s cg %.7g float64 %.7g: diff %.3g%s"
              % ("ok" if good else "FAIL", key, want[key], r, diff,
                 "" if ac is None else
                 "; autocast f16 %.3g" % abs(ac[key] - r)))

    def rel(a, b):
        return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))
    e_cg = rel(got, g64)
    # beside autocast: within the tolerance of it, or the nearer float64
    good = e_cg <= F16_TOL["grad"] and (
        gac is None or rel(got, gac) <= F16_TOL["grad"] or
        e_cg <= rel(gac, g64))
    ok &= good
    print("  %-4s gradient            from float64: cg %.3g%s"
          % ("ok" if good else "FAIL", e_cg,
             "" if gac is None else ", autocast f16 %.3g" % rel(gac, g64)))
    return ok


def check_dir(arch, d, prec=None):
    try:
        return (check_bf16(arch, d) if prec == "bf16" else
                check_f16(arch, d) if prec == "f16" else check(arch, d))
    except (DumpError, OSError, KeyError, ValueError) as e:
        print("torch_check: %s: %s" % (d, e))
        return False


def usage(code):
    print("usage: torch_check.py [--autocast | --f16] [--arch ARCH]... "
          "[DIR | MODEL_DUMP]",
          file=sys.stderr if code else sys.stdout)
    sys.exit(code)


def main():
    args, archs, prec = sys.argv[1:], [], None
    while args and args[0] in ("--arch", "--autocast", "--f16", "-h",
                               "--help"):
        if args[0] in ("--autocast", "--f16"):
            prec = "bf16" if args[0] == "--autocast" else "f16"
            args = args[1:]
            continue
        if args[0] != "--arch":
            usage(0)
        if len(args) < 2 or args[1] not in ARCHS:
            print("torch_check: --arch: one of %s" % ", ".join(ARCHS),
                  file=sys.stderr)
            usage(2)
        archs.append(ARCHS[args[1]])
        args = args[2:]
    if len(args) > 1:
        usage(2)
    torch.set_num_threads(1)
    here = os.path.dirname(os.path.abspath(__file__))
    target = (args[0] if args else os.environ.get(
        "MODEL_DUMP", os.path.join(here, "unit", "model_dump")))
    if os.path.isdir(target):
        try:
            with open(os.path.join(target, "arch.txt")) as f:
                arch = ARCHS[f.read().strip()]
        except (OSError, KeyError) as e:
            print("torch_check: %s: arch.txt: %s" % (target, e))
            sys.exit(1)
        ok = check_dir(arch, target, prec)
    elif os.access(target, os.X_OK):
        ok = True
        for arch in archs or ARCHS.values():
            for cfg in arch.configs:
                with tempfile.TemporaryDirectory() as d:
                    r = subprocess.run([target, d, arch.name] + cfg +
                                       (["%s=1" % prec] if prec else []),
                                       env=DUMP_ENV)
                    if r.returncode != 0:
                        print("torch_check: %s %s failed (%d)"
                              % (target, arch.name, r.returncode))
                        ok = False
                        continue
                    ok &= check_dir(arch, d, prec)
    else:
        print("torch_check: %s: not a dump directory nor a program" % target)
        sys.exit(1)
    print("torch_check: %s" % ("pass" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

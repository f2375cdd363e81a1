#!/usr/bin/python3
"""torch_speed.py - PyTorch's side of bench/speed.sh, and its report.

usage: torch_speed.py run --model MODEL[,MODEL...] [options]  (torch)
       torch_speed.py tune --python PY --impl NAME [options]
       torch_speed.py measure --tuned TUNE.jsonl --impl NAME --model M ...
       torch_speed.py report RESULTS.jsonl
       torch_speed.py cores

run: trains the PyTorch reference of cg's cvae (bench/torch_cvae.py),
cgpt (bench/torch_cgpt.py), cddpm or cgan (the classes Cddpm and Cgan of
tests/torch_check.py, which check cg's gradients against them) on real
data for --warmup untimed steps, then --reps times --steps timed steps,
and prints one JSON object per variant.  The same architecture,
hyper-parameters and batch as cg's benchmark: cvae 784-512-512-32, batch
128, Adam 1e-3 on Fashion-MNIST (images kept as bytes and scaled per
batch, as cg does); cgpt context 128, width 256, 4 layers, 4 heads, batch
16, AdamW 3e-4 / wd 0.1 on a cg text shard, the batches built beforehand
(the reference's pure-Python batch builder is not what is being timed);
cddpm and cgan as cg-init makes them by default, batch 128 of
Fashion-MNIST: the cddpm with Adam 1e-3, each batch drawing its
timesteps, dropped conditions (10%) and noise as cg's does; the cgan with
Adam 4e-4, betas 0.5 and 0.999, one simultaneous step of both nets.
The convolutional models are the same classes (and tests/torch_check.py's
Cclf) as cg-init makes them with --conv or --unet: cclf-conv, the CNN
judge (--conv 32 --hidden 256 --layers 1), batch 128, Adam 1e-3;
cgan-conv (--conv 32), the cgan's batch and Adam; cddpm-unet (--unet 16
--hidden 128 --embed 64, the embedding as scale and shift), batch 64,
Adam 1e-3.
Variants change how, never what, is computed: the attention of the cgpt,
naive (the reference: masked_fill + softmax) or sdpa
(F.scaled_dot_product_attention, is_causal), or in its place the memory
layout of a convolutional model, nchw (the module as made) or
channels_last (m.to(memory_format=torch.channels_last)); the optimizer,
loop, foreach or fused (torch.optim's three implementations of the same
update); and the precision: f32, or bf16,
the forward pass and the loss under torch.autocast("cpu",
dtype=torch.bfloat16), the backward pass and the optimizer outside it
(PyTorch's recipe for the CPU; cg-train-step --precision bf16's
counterpart).  A torch whose autocast cannot give bf16 matrix products,
or fails in a step, gives an error row for that variant, not a crash.

tune (standard library only): finds PyTorch's fastest configuration for
one interpreter, in three greedy stages of short runs, each a fresh
process: (1) the process environment (OpenMP wait policy, BLAS kernel set
and thread counts; see envs_for), in f32, (2) the in-process variants,
once for each of --precisions, (3) torch.set_num_interop_threads(1) or
not, for each precision's best.  Prints one JSON line per model of
--models with the winner over every precision, each precision's winner
(by_precision) and every candidate's rate.

measure (standard library only): one timed run of a tuned configuration
(--precision's winner, or tune's overall one) in a fresh process under
/usr/bin/time, printed as one JSON line with its peak RSS.

report (standard library only): the tables of bench/speed.sh from its
JSON lines; a line without a precision is f32 (files from before bf16).

cores (standard library only): the OpenBLAS kernel sets this CPU can run
among those the benches force (SkylakeX, Haswell), best first, one a
line, from the flags in /proc/cpuinfo (or $CG_CPUINFO).  Forced on a CPU
without its instructions a kernel set dies on an illegal instruction, so
the benches force only these; and a candidate whose process is killed
all the same (by SIGILL or any signal) is reported as skipped, not fatal.
"""
import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# tests/torch_check.py: the cddpm and cgan references
TESTS = os.path.join(os.path.dirname(HERE), "tests")
MODELS = ("cvae", "cgpt", "cddpm", "cgan", "cclf-conv", "cgan-conv",
          "cddpm-unet")
# the models whose variants try the memory layout (in the attention's
# place: the cgpt alone has attention), and their two layouts
CONV_MODELS = ("cclf-conv", "cgan-conv", "cddpm-unet")
LAYOUTS = ("nchw", "channels_last")
PRECISIONS = ("f32", "bf16")
THREAD_VARS = ("OMP_", "MKL_", "OPENBLAS_", "GOTO_", "KMP_", "GOMP_",
               "CG_NO_REEXEC", "CG_NO_RUNTIME_DEFAULTS")

# OpenBLAS kernel sets the benches may force, best first, with the CPU
# flags each needs.
OPENBLAS_CORES = [
    ("SkylakeX", {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}),
    ("Haswell", {"avx2", "fma"}),
]


def cpu_flags():
    """The instruction-set flags of the first CPU in /proc/cpuinfo."""
    path = os.environ.get("CG_CPUINFO", "/proc/cpuinfo")
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def openblas_cores():
    flags = cpu_flags()
    return [name for name, need in OPENBLAS_CORES if need <= flags]


def cores(a):
    for name in openblas_cores():
        print(name)

# ------------------------------------------------------------ formulas

CVAE = dict(in_dim=784, ncond=10, hidden=512, layers=2, latent=32,
            batch=128, lr=1e-3)
CGPT = dict(context=128, width=256, layers=4, heads=4, batch=16, lr=3e-4,
            wd=0.1)
# cg-init's defaults (lib/arch/cddpm/cddpm_arch.c, lib/arch/cgan/cgan_arch.c) on Fashion-MNIST;
# torch_check.py's configuration keys
CDDPM = {"in_dim": 784, "ncond": 10, "hidden": 512, "layers": 3,
         "embed": 128, "timesteps": 1000, "snr-clip": 5, "predict-x0": 1,
         "cond_drop": 0.1, "batch": 128, "lr": 1e-3}
CGAN = {"in_dim": 784, "ncond": 10, "latent": 64, "hidden": 512,
        "layers": 2, "sn_iters": 5, "batch": 128, "lr": 4e-4,
        "betas": (0.5, 0.999)}
# the convolutional models as speed.sh's cg-init commands make them (the
# config cg-inspect --json shows, the image's shape from the data)
IMAGE = {"image_h": 28, "image_w": 28, "image_c": 1}
CCLF_CONV = dict(IMAGE, in_dim=784, ncond=10, hidden=256, layers=1,
                 conv=32, batch=128, lr=1e-3)


def opts_of(words):
    """cg-init's options of a model as key=value words (speed.sh's
    CGAN_CONV_OPTS: "r1=0.1 disc-kernel=4 aux=1"), as a config's keys."""
    out = {}
    for w in words.split():
        k, v = w.split("=", 1)
        out[k] = float(v) if k in ("r1", "aux") else int(v)
    return out


CGAN_CONV = dict(CGAN, conv=32, **IMAGE,
                 **opts_of(os.environ.get("CGAN_CONV_OPTS", "")))
CDDPM_UNET = dict(CDDPM, hidden=128, embed=64, unet=16, film=1, attn=0,
                  batch=64, **IMAGE)


def cvae_flops(in_dim=784, ncond=10, hidden=512, layers=2, latent=32):
    """Training FLOPs per example: 3 x forward, forward = 2 x the weights
    of the matrix products (encoder, mu and logvar heads, decoder, output
    layer); biases and element-wise work are not counted."""
    w = (in_dim + ncond) * hidden + (layers - 1) * hidden * hidden
    w += 2 * hidden * latent
    w += (latent + ncond) * hidden + (layers - 1) * hidden * hidden
    w += hidden * in_dim
    return 6 * w


def cgpt_flops(V, T=128, C=256, L=4):
    """Training FLOPs per token (PaLM's count): 6 N + 12 L T C, N = the
    matrix-product weights 12 L C^2 + C V (qkv 3C^2, proj C^2, fc 4C^2,
    mlp proj 4C^2 per block; the output projection C V); 12 L T C is
    attention's two T x T products (Q K^T and att V, 2 T C each forward
    per token and layer, the whole square, causal mask not subtracted)
    times 3.  Embedding lookups, layer norms, softmax, GELU not counted."""
    return 6 * (12 * L * C * C + C * V) + 12 * L * T * C


def cddpm_flops(in_dim=784, hidden=512, layers=3, embed=128):
    """Training FLOPs per example: 6 x the matrix-product weights (the
    time encoding's layer, the hidden layers, the output layer); the
    encoding, the condition's embedding and the noising not counted."""
    w = embed * hidden + in_dim * hidden + (layers - 1) * hidden * hidden
    w += hidden * in_dim
    return 6 * w


def cgan_flops(in_dim=784, latent=64, hidden=512, layers=2):
    """Training FLOPs per example (one real image and one fake) of what a
    step multiplies (lib/arch/cgan/cgan.c): G forward and backward, 6 Wg; D forward
    and backward on the real and the fake, 2 x 6 Wd; and L_G's pass back
    through D to the fake, 2 Wd: 6 Wg + 14 Wd.  Wg = latent H + (layers -
    1) H^2 + H in_dim; Wd = in_dim H + (layers - 1) H^2 + 2 H (the head's
    two dot products with the features: psi and the condition's row).
    The power iterations (5 of each matrix a step, not per example), the
    embeddings and the loss not counted."""
    H = hidden
    wg = latent * H + (layers - 1) * H * H + H * in_dim
    wd = in_dim * H + (layers - 1) * H * H + 2 * H
    return 6 * wg + 14 * wd


def conv_macs(cin, cout, positions, k=3):
    """Multiply-adds of a k x k convolution forward: its weights times
    the positions of its output map."""
    return k * k * cin * cout * positions


def cclf_conv_flops(conv=32, hidden=256, ncond=10, h=28, w=28, c=1):
    """Training FLOPs per example of the CNN judge: 6 W, W the forward's
    multiply-adds: each 3x3 convolution's weights times its output's
    positions (conv channels at h x w, 2 conv at h/2, 4 conv at h/4:
    strides 1, 2, 2), the hidden layer over the flattened last map and
    the output layer.  Biases, ReLU and the loss not counted; nor that
    the first convolution needs no gradient for the image (the count
    charges every layer both backward products, as the MLPs' do).
    Conv 32 on 28 x 28: 225,792 + 3,612,672 + 3,612,672 + 6272 x 256 +
    256 x 10 = 9,059,328; 54.36 MFLOP."""
    h1, w1 = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    h2, w2 = (h1 - 1) // 2 + 1, (w1 - 1) // 2 + 1
    m = (conv_macs(c, conv, h * w) + conv_macs(conv, 2 * conv, h1 * w1) +
         conv_macs(2 * conv, 4 * conv, h2 * w2))
    m += 4 * conv * h2 * w2 * hidden + hidden * ncond
    return 6 * m


def cgan_conv_flops(conv=32, latent=64, h=28, w=28, c=1):
    """Training FLOPs per example (one real image and one fake) of the
    convolutional cgan, counted as the MLP cgan's: 6 Wg + 14 Wd, Wg and
    Wd the multiply-adds of each net's forward.  F = h/4 w/4 2 conv (the
    generator's first map, the discriminator's features).
    Wg = latent F                       the first layer, to a map
       + 9 (2C) C (h/2 w/2)             3x3 convolution after the first
                                        up-sampling
       + 9 C C (h w)                    after the second
       + 9 C c (h w)                    the output convolution
    Wd = 9 c C (h/2 w/2)                stride-2 convolutions
       + 9 C (2C) (h/4 w/4)
       + 2 F                            the head's two dot products
    Conv 32 on 28 x 28: Wg 11,264,512, Wd 965,888; 81.11 MFLOP.  The
    group norms, the up-sampling, the power iterations (of the
    convolutions' weights as [out, in 9] matrices) not counted."""
    C, F = conv, h // 4 * (w // 4) * 2 * conv
    wg = (latent * F + conv_macs(2 * C, C, h // 2 * (w // 2)) +
          conv_macs(C, C, h * w) + conv_macs(C, c, h * w))
    wd = (conv_macs(c, C, h // 2 * (w // 2)) +
          conv_macs(C, 2 * C, h // 4 * (w // 4)) + 2 * F)
    return 6 * wg + 14 * wd


def cddpm_unet_flops(unet=16, hidden=128, embed=64, film=1, h=28, w=28,
                     c=1):
    """Training FLOPs per example of the cddpm U-Net: 6 W, W the
    forward's multiply-adds.  C = unet; levels at h x w (C channels),
    h/2 (2C) and h/4 (2C).  Each residual block (cin -> cout at P
    positions): two 3x3 convolutions, 9 cin cout P + 9 cout^2 P, a 1x1
    skip cin cout P where the channels change, and the embedding's
    projection hidden x cout (2 cout with film) once an example.
    W = 9 c C P0                        input convolution
      + down.0 (C->C, P0) + 9 C^2 P1    stride-2 convolution
      + down.1 (C->2C, P1) + 9 (2C)^2 P2
      + down.2 (2C->2C, P2) + mid (2C->2C, P2)
      + up.2 (4C->2C, P2) + up.1 (4C->2C, P1) + up.0 (3C->C, P0)
                                        skips concatenated
      + 9 C c P0                        output convolution
      + embed hidden                    time encoding's layer
    P0 = h w, P1 = h/2 w/2, P2 = h/4 w/4.  Unet 16, hidden 128, embed
    64, film, 28 x 28: W = 24,518,144; 147.11 MFLOP.  The group norms,
    SiLU, the up-sampling and the loss not counted."""
    C, f = unet, 2 if film else 1
    P0, P1, P2 = h * w, (h // 2) * (w // 2), (h // 4) * (w // 4)

    def block(cin, cout, P):
        m = conv_macs(cin, cout, P) + conv_macs(cout, cout, P)
        if cin != cout:
            m += conv_macs(cin, cout, P, 1)
        return m + hidden * f * cout
    m = conv_macs(c, C, P0) + block(C, C, P0) + conv_macs(C, C, P1)
    m += block(C, 2 * C, P1) + conv_macs(2 * C, 2 * C, P2)
    m += block(2 * C, 2 * C, P2) + block(2 * C, 2 * C, P2)
    m += block(4 * C, 2 * C, P2) + block(4 * C, 2 * C, P1)
    m += block(3 * C, C, P0) + conv_macs(C, c, P0) + embed * hidden
    return 6 * m

# ------------------------------------------------------------------ run


def run(a):
    import torch
    torch.set_num_threads(a.threads)
    if a.interop:
        torch.set_num_interop_threads(a.interop)
    models = a.model.split(",")
    steps, warmup = a.steps.split(","), a.warmup.split(",")
    variants = a.variants.split("|")
    for i, model in enumerate(models):
        b = argparse.Namespace(**vars(a))
        b.steps = int(steps[min(i, len(steps) - 1)])
        b.warmup = int(warmup[min(i, len(warmup) - 1)])
        b.variants = variants[min(i, len(variants) - 1)]
        run_model(b, model, torch)


def run_model(a, model, torch):
    """Time one model's variants; one JSON line each."""
    import numpy as np
    import torch.nn.functional as F
    sys.path.insert(0, HERE)

    def make_opt(kind, groups, cls, **kw):
        if kind == "foreach":
            kw["foreach"] = True
        elif kind == "loop":
            kw["foreach"] = False
        elif kind == "fused":
            kw["fused"] = True
        return cls(groups, **kw)

    def autocast(variant):
        """The forward pass's context for the variant's precision: none
        for f32; for bf16, CPU autocast to bfloat16, checked to give a
        bf16 matrix product (a torch that cannot warns and stays f32)."""
        if variant["prec"] == "f32":
            return contextlib.nullcontext
        if not hasattr(torch, "autocast"):
            raise RuntimeError("this torch has no torch.autocast")
        amp = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with amp():
                got = torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype
        if got != torch.bfloat16:
            raise RuntimeError("autocast bf16 on the CPU gives %s matrix "
                               "products" % got)
        return amp

    def descend(opt, loss):
        """One optimizer step on loss's gradient; the loss as a float."""
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    def layout(m, variant):
        """A convolutional model in the variant's memory layout: as made
        (nchw), or its 4-d tensors channels-last, which the convolutions'
        outputs then follow."""
        if variant["attn"] == "channels_last":
            m.to(memory_format=torch.channels_last)
        elif variant["attn"] != "nchw":
            raise ValueError("layout %s: not one of %s"
                             % (variant["attn"], ", ".join(LAYOUTS)))
        return m

    if model != "cgpt":
        # Fashion-MNIST's images as bytes, labels as int64
        from torch_cvae import read_idx
        x8 = read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"))
        y8 = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))
        x8 = torch.from_numpy(x8.reshape(len(x8), -1).copy())
        y = torch.from_numpy(y8.astype(np.int64))
        unit = "examples"
        attns = list(LAYOUTS) if model in CONV_MODELS else ["none"]

        def sampler(B, gen):
            """The next batch's indices: epochs of shuffled examples."""
            state = {"perm": torch.randperm(len(x8), generator=gen), "i": 0}

            def next_batch():
                i = state["i"]
                if i + B > len(x8):
                    state["perm"] = torch.randperm(len(x8), generator=gen)
                    i = 0
                state["i"] = i + B
                return state["perm"][i:i + B]
            return next_batch
    if model == "cvae":
        import torch_cvae as R
        B = CVAE["batch"]
        per_step = B

        def setup(variant):
            torch.manual_seed(1)
            m = R.CVAE(784, 10, CVAE["hidden"], CVAE["layers"],
                       CVAE["latent"])
            opt = make_opt(variant["opt"], m.parameters(), torch.optim.Adam,
                           lr=CVAE["lr"])
            gen = torch.Generator().manual_seed(1)
            next_batch = sampler(B, gen)
            amp = autocast(variant)

            def step(k):
                idx = next_batch()
                x = x8[idx].float().div_(255.0)
                eps = torch.randn(B, CVAE["latent"], generator=gen)
                with amp():
                    rec, kl = m(x, y[idx], eps)
                    loss = (rec + kl).mean()
                return descend(opt, loss)
            return step
    elif model in ("cddpm", "cddpm-unet"):
        sys.path.insert(0, TESTS)
        from torch_check import Cddpm
        cfg = CDDPM if model == "cddpm" else CDDPM_UNET
        B = cfg["batch"]
        per_step = B

        def setup(variant):
            torch.manual_seed(1)
            m = Cddpm.Net(cfg)
            if model == "cddpm-unet":
                layout(m, variant)
            opt = make_opt(variant["opt"], m.parameters(), torch.optim.Adam,
                           lr=cfg["lr"])
            gen = torch.Generator().manual_seed(1)
            next_batch = sampler(B, gen)
            amp = autocast(variant)

            def step(k):
                # each example's timestep, dropped condition and noise,
                # as lib/arch/cddpm/cddpm_arch.c draws them (from other generators)
                idx = next_batch()
                x0 = x8[idx].float().div_(127.5).sub_(1.0)
                t = torch.randint(cfg["timesteps"], (B,), generator=gen)
                c = y[idx].clone()
                c[torch.rand(B, generator=gen) < cfg["cond_drop"]] = \
                    cfg["ncond"]
                eps = torch.randn(B, cfg["in_dim"], generator=gen)
                with amp():
                    loss = Cddpm.loss(m, cfg, x0, eps, c, t)
                return descend(opt, loss)
            return step
    elif model in ("cgan", "cgan-conv"):
        sys.path.insert(0, TESTS)
        from torch_check import Cgan
        cfg = CGAN if model == "cgan" else CGAN_CONV
        B = cfg["batch"]
        per_step = B

        def setup(variant):
            torch.manual_seed(1)
            m = Cgan.Net(cfg)
            if model == "cgan-conv":
                layout(m, variant)
            # cg's buffer order: the generator's tensors, then the
            # discriminator's (the MLP's: gen_emb, gen, gen_out; disc,
            # psi, disc_emb)
            named = m.named_tensors()
            gp = [p for n, p in named if n.startswith("gen.")]
            dp = [p for n, p in named if not n.startswith("gen.")]
            opt = make_opt(variant["opt"], gp + dp, torch.optim.Adam,
                           lr=cfg["lr"], betas=cfg["betas"])
            gen = torch.Generator().manual_seed(1)
            next_batch = sampler(B, gen)
            # the normalised matrices, a convolution's weight as
            # [out, in 9] (lib/arch/cgan/cgan.c), the head's psi and
            # embedding last
            if model == "cgan":
                mats = [l.weight for l in m.disc]
            else:
                mats = [m.disc_c1.weight, m.disc_c2.weight]
            mats += [m.psi.weight, m.disc_emb.weight]
            # the power iteration's fixed start (lib/nn/nn.c
            # cg_spectral_power: a normalised draw, the same every step)
            v0 = [F.normalize(torch.randn(w[0].numel(), generator=gen),
                              dim=0) for w in mats]
            amp = autocast(variant)

            def step(k):
                idx = next_batch()
                x, yb = x8[idx].float().div_(255.0), y[idx]
                z = torch.randn(B, cfg["latent"], generator=gen)
                uv = []
                with torch.no_grad():
                    for w, v in zip(mats, v0):
                        w = w.reshape(w.shape[0], -1)
                        for _ in range(cfg["sn_iters"]):
                            u = F.normalize(w @ v, dim=0)
                            v = F.normalize(w.t() @ u, dim=0)
                        uv.append((u, v))
                # D on the reals and the fakes once; L_D's gradient for
                # D (not reaching G), L_G's back through the same D to G:
                # lib/arch/cgan/cgan.c's work, no second pass of D forward.
                # The power iteration stays f32 (cg's does too).  With
                # r1, the R1 penalty by double backpropagation; with aux,
                # the classifier's cross-entropies (torch_check's Cgan).
                gamma, lam = cfg.get("r1", 0), cfg.get("aux", 0)
                x.requires_grad_(gamma > 0)
                with amp():
                    fake = m.generate(z, yb)
                    s_real, c_real = m.discriminate_cls(x, yb, uv, False)
                    s_fake, c_fake = m.discriminate_cls(fake, yb, uv,
                                                        False)
                    ld = (F.relu(1 - s_real).mean() +
                          F.relu(1 + s_fake).mean())
                    lg = -s_fake.mean()
                    if lam > 0:
                        ld = ld + lam * F.cross_entropy(c_real, yb)
                        lg = lg + lam * F.cross_entropy(c_fake, yb)
                    if gamma > 0:
                        gx, = torch.autograd.grad(s_real.sum(), x,
                                                  create_graph=True)
                        ld = ld + gamma / 2 * (
                            gx.float() ** 2).flatten(1).sum(1).mean()
                gd = torch.autograd.grad(ld, dp, retain_graph=True)
                gg = torch.autograd.grad(lg, gp)
                for p, g in zip(dp + gp, gd + gg):
                    p.grad = g
                opt.step()
                return ld.item()
            return step
    elif model == "cclf-conv":
        sys.path.insert(0, TESTS)
        from torch_check import Cclf
        cfg, B = CCLF_CONV, CCLF_CONV["batch"]
        per_step = B

        def setup(variant):
            torch.manual_seed(1)
            m = layout(Cclf.Net(cfg), variant)
            opt = make_opt(variant["opt"], m.parameters(), torch.optim.Adam,
                           lr=cfg["lr"])
            gen = torch.Generator().manual_seed(1)
            next_batch = sampler(B, gen)
            amp = autocast(variant)

            def step(k):
                idx = next_batch()
                x = x8[idx].float().div_(255.0)
                with amp():
                    logits = m.out(m.hid(m.trunk(x, cfg)))
                    loss = F.cross_entropy(logits, y[idx])
                return descend(opt, loss)
            return step
    else:
        import torch_cgpt as R
        train = R.Shard(a.shard)
        ncond = len(train.conditions)
        T, B = CGPT["context"], CGPT["batch"]
        V = 256 + ncond + 1
        unit, per_step = "tokens", B * T
        order = R.Order(train.n, 1)
        nb = a.warmup + a.steps
        batches = []
        for s in range(nb):
            ex = [order.at(s * B + b) for b in range(B)]
            noise = R.Rng.derive(1, R.NOISE_TAG, s).u64()
            batches.append(R.make_batch(train, ex, ncond, T, noise))

        def sdpa_forward(self, x, mask):
            Bx, Tx, C = x.shape
            hs = C // self.NH
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(Bx, Tx, self.NH, hs).transpose(1, 2)
            k = k.view(Bx, Tx, self.NH, hs).transpose(1, 2)
            v = v.view(Bx, Tx, self.NH, hs).transpose(1, 2)
            yy = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            yy = yy.transpose(1, 2).contiguous().view(Bx, Tx, C)
            x = x + self.proj(yy)
            return x + self.mproj(self.gelu(self.fc(self.ln2(x))))

        def setup(variant):
            torch.manual_seed(1)
            m = R.CGPT(V, T, CGPT["width"], CGPT["layers"], CGPT["heads"],
                       0)
            if variant["attn"] == "sdpa":
                if not hasattr(F, "scaled_dot_product_attention"):
                    raise RuntimeError("this torch has no "
                                       "scaled_dot_product_attention")
                for b in m.h:
                    b.forward = sdpa_forward.__get__(b)
            named = m.named_tensors()
            groups = [{"params": [p for _, p, d in named if d],
                       "weight_decay": CGPT["wd"]},
                      {"params": [p for _, p, d in named if not d],
                       "weight_decay": 0.0}]
            opt = make_opt(variant["opt"], groups, torch.optim.AdamW,
                           lr=CGPT["lr"], betas=(0.9, 0.999), eps=1e-8)
            amp = autocast(variant)

            def step(k):
                with amp():
                    loss, _ = R.batch_loss(m, *batches[k % nb])
                return descend(opt, loss)
            return step
        attns = ["naive", "sdpa"]

    def measure_variant(variant):
        row = {"model": model, "torch": torch.__version__,
               "threads": torch.get_num_threads(),
               "interop": torch.get_num_interop_threads(),
               "attn": variant["attn"], "opt": variant["opt"],
               "precision": variant["prec"], "steps": a.steps,
               "per_step": per_step, "unit": unit}
        try:
            step = setup(variant)
            start = time.perf_counter()
            late = lambda: (a.max_seconds and
                            time.perf_counter() - start > a.max_seconds)
            k = 0
            for _ in range(a.warmup):
                step(k)
                k += 1
                if late():
                    break
            times, cut = [], 0
            for _ in range(a.reps):
                t0 = time.perf_counter()
                for done in range(1, a.steps + 1):
                    loss = step(k)
                    k += 1
                    if late():
                        break
                times.append(time.perf_counter() - t0)
                if done < a.steps:
                    cut = done
                    break
            if cut:
                # a hopeless candidate: its rate from the steps it did
                row.update(times=times, loss=loss, cut_after=cut,
                           rate=per_step * cut / times[-1])
            else:
                row.update(times=times, loss=loss,
                           rate=per_step * a.steps /
                           statistics.median(times))
        except (RuntimeError, TypeError, ValueError) as e:
            row.update(error=str(e).splitlines()[0][:200])
        print(json.dumps(row))
        sys.stdout.flush()
        return row

    if a.variants != "greedy":
        # ATTN,OPT[,PREC][;...]; only the cgpt has attention to choose
        for v in a.variants.split(";"):
            at, opt, prec = (v.split(",") + [a.precision])[:3]
            measure_variant({"attn": at if model == "cgpt" or
                             model in CONV_MODELS else "none",
                             "opt": opt, "prec": prec})
        return
    # greedy, in --precision: the reference's variant, the other
    # attentions (layouts) with its optimizer, then the other optimizers
    # with the best attention (layout)
    rate = lambda r: r.get("rate", 0.0)
    prec = a.precision
    best = measure_variant({"attn": attns[0], "opt": "foreach",
                            "prec": prec})
    for at in attns[1:]:
        best = max(best, measure_variant({"attn": at, "opt": "foreach",
                                          "prec": prec}), key=rate)
    for opt in ("fused", "loop"):
        best = max(best, measure_variant({"attn": best["attn"],
                                          "opt": opt, "prec": prec}),
                   key=rate)

# ----------------------------------------------------------------- tune


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(THREAD_VARS)}
    env.update(extra)
    return env


class Killed(Exception):
    """A run's process was killed by a signal (the message names it)."""


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "signal %d" % n


def spawn(py, env, args, rss=False):
    """JSON lines printed by `py torch_speed.py run ARGS` under env, and
    with rss its peak RSS in KiB (from /usr/bin/time).  Raises Killed if
    the process dies by a signal; exits on any other failure."""
    cmd = [py, os.path.abspath(__file__), "run"] + args
    tf = None
    if rss:
        tf = tempfile.NamedTemporaryFile("r", suffix=".rss")
        cmd = ["/usr/bin/time", "-f", "%M", "-o", tf.name] + cmd
    p = subprocess.run(cmd, env=clean_env(env), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    # killed: -N from subprocess, 128 + N through a shell or GNU time
    sig = (-p.returncode if p.returncode < 0 else
           p.returncode - 128 if p.returncode > 128 else 0)
    if sig:
        raise Killed("killed by " + signal_name(sig))
    if p.returncode != 0:
        sys.exit("torch_speed: %s failed (%d): %s" % (
            " ".join(cmd), p.returncode, p.stderr.strip()[-2000:]))
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    peak = int(open(tf.name).read().split()[-1]) if rss else None
    return rows, peak


def probe(py):
    code = ("import json, torch; c = torch.__config__.show(); "
            "print(json.dumps({'version': torch.__version__, "
            "'mkl': torch.backends.mkl.is_available(), "
            "'blas': [w for w in c.replace(',', ' ').split() "
            "if w.startswith('BLAS_INFO=')]}))")
    p = subprocess.run([py, "-c", code], env=clean_env({}),
                       stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(p.stdout)


def envs_for(info, threads):
    """Candidate process environments: torch's defaults, the OpenMP wait
    policy, and the knobs of the BLAS this build calls (MKL inside PyPI's
    wheels; the system's libblas, OpenBLAS here, under Debian's)."""
    n = str(threads)
    omp = {"OMP_NUM_THREADS": n}
    out = [("defaults", {}),
           ("OMP_WAIT_POLICY=passive", dict(omp, OMP_WAIT_POLICY="PASSIVE")),
           ("OMP_WAIT_POLICY=active", dict(omp, OMP_WAIT_POLICY="ACTIVE"))]
    if info["mkl"]:
        out += [("OMP_WAIT_POLICY=passive MKL_NUM_THREADS=%s MKL_DYNAMIC="
                 "FALSE" % n, dict(omp, OMP_WAIT_POLICY="PASSIVE",
                                   MKL_NUM_THREADS=n, MKL_DYNAMIC="FALSE")),
                ("GOMP_SPINCOUNT=10000", dict(omp, GOMP_SPINCOUNT="10000"))]
    else:
        # the best kernel set the CPU has (OpenBLAS 0.3.21 takes a CPU it
        # does not know for its oldest), none where it has neither
        for core in openblas_cores()[:1]:
            ct = "OPENBLAS_CORETYPE=" + core
            forced = dict(omp, OPENBLAS_CORETYPE=core)
            out += [("OMP_WAIT_POLICY=passive " + ct,
                     dict(forced, OMP_WAIT_POLICY="PASSIVE")),
                    ("OMP_WAIT_POLICY=active " + ct,
                     dict(forced, OMP_WAIT_POLICY="ACTIVE")),
                    ("OMP_WAIT_POLICY=passive %s OPENBLAS_NUM_THREADS=1"
                     % ct, dict(forced, OMP_WAIT_POLICY="PASSIVE",
                                OPENBLAS_NUM_THREADS="1"))]
    # CG_BENCH_EXTRA_ENV="NAME=VALUE ...": one more candidate, to try a
    # setting (or to see a crashing candidate skipped)
    extra = os.environ.get("CG_BENCH_EXTRA_ENV", "").split()
    if extra:
        out.append((" ".join(extra),
                    dict(omp, **dict(kv.split("=", 1) for kv in extra))))
    return out


def tune(a):
    info = probe(a.python)
    common = ["--threads", str(a.threads), "--data", a.data,
              "--shard", a.shard]
    models = a.models.split(",")
    # (steps, warm-up steps) of a candidate
    short = {"cvae": (a.cvae_steps, 3), "cgpt": (a.cgpt_steps, 2),
             "cddpm": (a.cddpm_steps, 3), "cgan": (a.cgan_steps, 3),
             "cclf-conv": (a.cclf_conv_steps, 2),
             "cgan-conv": (a.cgan_conv_steps, 2),
             "cddpm-unet": (a.cddpm_unet_steps, 2)}
    ref = {m: "naive,foreach" if m == "cgpt" else
           "nchw,foreach" if m in CONV_MODELS else "none,foreach"
           for m in models}
    precs = a.precisions.split(",")
    cands = {m: [] for m in models}
    envs = envs_for(info, a.threads)
    envd = dict(envs)

    def best_of(m, prec=None):
        """The fastest candidate of m (in prec), None if none ran."""
        ok = [c for c in cands[m] if "rate" in c and
              prec in (None, c["precision"])]
        return max(ok, key=lambda c: c["rate"]) if ok else None

    def add(stage, m, env, prec, r):
        c = dict(r, env=env, stage=stage,
                 precision=r.get("precision", prec))
        cands[m].append(c)
        sys.stderr.write("torch_speed: %s %s stage %d: %s, interop %s, "
                         "%s/%s/%s: %s\n" % (
                             a.impl, m, stage, c["env"], c.get("interop"),
                             c["attn"], c["opt"], c["precision"],
                             "%.0f" % c["rate"] if "rate" in c
                             else c.get("error")))

    def config(c):
        """What measure needs to run candidate c again."""
        return {"env_name": c["env"], "env": envd[c["env"]],
                "interop": 1 if c["stage"] == 3 else 0,
                "attn": c["attn"], "opt": c["opt"],
                "precision": c["precision"], "rate": c["rate"]}

    # (1) the environment, with the reference's variant in f32; every
    # model in one process
    for name, env in envs:
        try:
            rows, _ = spawn(a.python, env, common + [
                "--model", ",".join(models),
                "--steps", ",".join(str(short[m][0]) for m in models),
                "--warmup", ",".join(str(short[m][1]) for m in models),
                "--variants=" + "|".join(ref[m] for m in models),
                "--max-seconds", str(a.max_seconds)])
        except Killed as e:
            # the candidate, not the bench: say so and go on
            rows = [{"model": m, "attn": ref[m].split(",")[0],
                     "opt": ref[m].split(",")[1], "interop": 0,
                     "error": "skipped: %s" % e} for m in models]
        for r in rows:
            add(1, r["model"], name, "f32", r)
    out = []
    for m in models:
        steps = ["--model", m, "--steps", str(short[m][0]),
                 "--warmup", str(short[m][1])]
        if best_of(m, "f32") is None:
            sys.exit("torch_speed: %s %s: no candidate ran" % (a.impl, m))
        env_name = best_of(m, "f32")["env"]
        # (2) the in-process variants under that environment, in each
        # precision
        for prec in precs:
            try:
                rows, _ = spawn(a.python, envd[env_name], common + steps + [
                    "--precision", prec, "--max-seconds",
                    str(a.max_seconds)])
            except Killed as e:
                rows = [{"model": m, "attn": "greedy", "opt": "greedy",
                         "interop": 0, "error": "skipped: %s" % e}]
            for r in rows:
                add(2, m, env_name, prec, r)
        # (3) one inter-op thread, with each precision's best so far,
        # unless that is already the default
        for prec in precs:
            best = best_of(m, prec)
            if best is None or best["interop"] == 1:
                continue
            try:
                rows, _ = spawn(a.python, envd[best["env"]],
                                common + steps + [
                                    "--interop", "1", "--max-seconds",
                                    str(a.max_seconds),
                                    "--variants=%s,%s,%s" % (
                                        best["attn"], best["opt"], prec)])
            except Killed as e:
                rows = [{"model": m, "attn": best["attn"],
                         "opt": best["opt"], "interop": 1,
                         "error": "skipped: %s" % e}]
            for r in rows:
                add(3, m, best["env"], prec, r)
        # a precision none of whose candidates ran keeps the first error,
        # for measure to report it skipped
        by_prec = {}
        for prec in precs:
            b = best_of(m, prec)
            errs = [c["error"] for c in cands[m]
                    if c["precision"] == prec and c.get("error")]
            by_prec[prec] = (config(b) if b else
                             {"error": "skipped: no candidate ran (%s)"
                              % (errs[0] if errs else "none tried")})
        out.append(dict({"type": "tune", "impl": a.impl,
                         "python": a.python, "torch": info["version"],
                         "blas": info["blas"], "model": m},
                        **config(best_of(m)), by_precision=by_prec,
                        candidates=[{k: c.get(k) for k in (
                            "stage", "env", "interop", "attn", "opt",
                            "precision", "rate", "error")}
                            for c in cands[m]]))
    for o in out:
        print(json.dumps(o))

# -------------------------------------------------------------- measure


def measure(a):
    tuned = None
    with open(a.tuned) as f:
        for line in f:
            r = json.loads(line)
            if (r.get("type") == "tune" and r["impl"] == a.impl and
                    r["model"] == a.model):
                tuned = r
    if tuned is None:
        sys.exit("torch_speed: %s: no tuned %s configuration for %s"
                 % (a.tuned, a.model, a.impl))
    # tune's lines from before the precisions: f32 alone
    cfg = tuned
    if a.precision != "best":
        cfg = tuned.get("by_precision", {"f32": tuned}).get(
            a.precision, {"error": "skipped: not tuned"})
    prec = cfg.get("precision", "f32")

    def skipped(why):
        # one run lost, not the bench: the report counts the others
        sys.stderr.write("torch_speed: %s %s %s: %s\n"
                         % (a.impl, a.model, a.precision, why))
        print(json.dumps({"type": "torch", "impl": a.impl,
                          "model": a.model, "precision": a.precision,
                          "error": why}))
    if "error" in cfg:
        return skipped(cfg["error"])
    args = ["--model", a.model, "--steps", str(a.steps), "--warmup",
            str(a.warmup), "--threads", str(a.threads), "--data", a.data,
            "--shard", a.shard, "--interop", str(cfg["interop"]),
            "--max-seconds", str(a.max_seconds),
            "--variants=%s,%s,%s" % (cfg["attn"], cfg["opt"], prec)]
    try:
        rows, peak = spawn(tuned["python"], cfg["env"], args, rss=True)
    except Killed as e:
        return skipped("skipped: %s" % e)
    r = rows[0]
    if "error" in r:
        # bf16 ran in tuning, so an error now is the bench's, not torch's
        sys.exit("torch_speed: %s %s: %s" % (a.impl, a.model, r["error"]))
    out = {"type": "torch", "impl": a.impl, "model": a.model,
           "torch": r["torch"], "precision": prec,
           "steps": r.get("cut_after", a.steps), "wall": r["times"][0],
           "rate": r["rate"], "rss_kb": peak, "threads": r["threads"],
           "interop": r["interop"]}
    if "cut_after" in r:
        out["cut_after"] = r["cut_after"]
    print(json.dumps(out))

# --------------------------------------------------------------- report


def spread(xs):
    return statistics.median(xs), min(xs), max(xs)


def bf16_table(models, impls, med, unit):
    """cg and PyTorch in bf16 against f32, each model: PyTorch's best is
    the fastest median of any interpreter in either precision."""
    print("bf16 against f32: medians from the table above; PyTorch: the "
          "faster interpreter")
    print()
    print("| workload | cg f32 | cg bf16 | PyTorch f32 | PyTorch autocast "
          "bf16 | PyTorch's best | cg bf16 / PyTorch's best | cg bf16 / "
          "cg f32 |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for m in models:
        def fastest(p):
            got = [(med[m, i, p], i) for i in impls if (m, i, p) in med]
            return max(got) if got else None
        cell = lambda v: "%.0f" % v if v is not None else "n/a"
        tf, tb = fastest("f32"), fastest("bf16")
        best = max([(v, i, p) for p, x in (("f32", tf), ("bf16", tb)) if x
                    for v, i in [x]], default=None)
        cf, cb = med.get((m, "cg", "f32")), med.get((m, "cg", "bf16"))
        print("| %s (%s) | %s | %s | %s | %s | %s | %s | %s |" % (
            m, unit[m], cell(cf), cell(cb),
            "%.0f (%s)" % tf if tf else "n/a",
            "%.0f (%s)" % tb if tb else "skipped",
            "%.0f (%s, %s)" % best if best else "n/a",
            "%.2f" % (cb / best[0]) if cb and best else "n/a",
            "%.2f" % (cb / cf) if cb and cf else "n/a"))
    print()


def report(a):
    rows = [json.loads(l) for l in open(a.results) if l.startswith("{")]
    # lines from before the precisions were all f32
    for r in rows:
        if r.get("type") in ("cg", "torch", "tune"):
            r.setdefault("precision", "f32")
    get = lambda t: [r for r in rows if r.get("type") == t]
    meta = {r["key"]: r["value"] for r in get("meta")}
    skipped = [g for g in get("gemm") if "error" in g]
    gemm = [g for g in get("gemm") if "error" not in g]
    peak = max(g["gflops_best"] for g in gemm)
    V = int(meta.get("cgpt_vocab", 300))
    fl = {"cvae": cvae_flops(), "cgpt": cgpt_flops(V),
          "cddpm": cddpm_flops(), "cgan": cgan_flops(),
          "cclf-conv": cclf_conv_flops(), "cgan-conv": cgan_conv_flops(),
          "cddpm-unet": cddpm_unet_flops()}
    unit = {m: "tokens/s" if m == "cgpt" else "examples/s" for m in MODELS}
    per = {"cvae": CVAE["batch"], "cgpt": CGPT["batch"] * CGPT["context"],
           "cddpm": CDDPM["batch"], "cgan": CGAN["batch"],
           "cclf-conv": CCLF_CONV["batch"], "cgan-conv": CGAN_CONV["batch"],
           "cddpm-unet": CDDPM_UNET["batch"]}
    # the models measured, in MODELS's order
    models = [m for m in MODELS if any(r["model"] == m for r in get("cg"))]
    tuned = {(r["impl"], r["model"]): r for r in get("tune")}
    impls = []
    for r in get("tune"):
        if r["impl"] not in impls:
            impls.append(r["impl"])
    precs = [p for p in PRECISIONS
             if any(r["precision"] == p for r in get("cg") + get("torch"))]
    # what a variant's "attn" names: the convolutional models' layout
    slot = lambda m: "layout" if m in CONV_MODELS else "attention"
    # the row's name after the implementation
    pname = {"f32": "", "bf16": ", bf16"}
    tname = {"f32": "", "bf16": ", autocast bf16"}

    print("GEMM peak (bench/gemm-peak.c: cblas_sgemm, N=%d, %d threads, "
          "best of %d)" % (gemm[0]["n"], gemm[0]["threads"],
                           gemm[0]["reps"]))
    print()
    print("| OPENBLAS_CORETYPE | core OpenBLAS used | GFLOP/s best | median |")
    print("|---|---|--:|--:|")
    for g in gemm:
        print("| %s | %s | %.1f | %.1f |" % (g["label"], g["core"],
                                            g["gflops_best"],
                                            g["gflops_median"]))
    for g in skipped:
        print("| %s | %s | | |" % (g["label"], g["error"]))
    print()
    print("MFU below = achieved model FLOP/s / %.1f GFLOP/s (the best row "
          "above).  FLOPs: %s (bench/README).\n" % (peak, ", ".join(
              "%s %.2f MFLOP per %s" % (m, fl[m] / 1e6,
                                        unit[m][:-3]) for m in models)))

    print("Training throughput, %s threads each: median of runs [min-max]"
          % meta.get("threads", "2"))
    print()
    if len(precs) > 1:
        print("(cg / it: cg at the row's precision over the row; MFU "
              "against the f32 GEMM peak in every row)")
        print()
    print("| workload | implementation | throughput | cg / it | MFU | "
          "peak RSS | runs |")
    print("|---|---|--:|--:|--:|--:|--:|")
    desc = {"cvae": "cvae 784-512-512-32, batch 128, Adam",
            "cgpt": "cgpt T128 C256 L4 H4, batch 16, AdamW",
            "cddpm": "cddpm 784-512x3-784, T1000, batch 128, Adam",
            "cgan": "cgan G 64-512-512-784, D 784-512-512, batch 128, "
                    "Adam",
            "cclf-conv": "cclf conv 32-64-128, 6272-256-10, batch 128, "
                         "Adam",
            "cgan-conv": "cgan conv 32, G 64-7x7x64-32-32-1, D 32-64, "
                         "batch 128, Adam" +
                         "".join(", %s %g" % kv for kv in sorted(
                             opts_of(os.environ.get("CGAN_CONV_OPTS",
                                                    "")).items())),
            "cddpm-unet": "cddpm U-Net 16/32/32, film, T1000, batch 64, "
                          "Adam"}
    over = {}
    # med[(model, who, precision)]: the median throughput, who "cg" or
    # an impl; skipped[(model, impl, precision)]: why PyTorch did not run
    med, skipped = {}, {}
    for m in models:
        first = True
        for p in precs:
            cg = [r for r in get("cg") if r["model"] == m and
                  r["precision"] == p]
            one = [r["wall"] for r in cg if r["steps"] == 1]
            many = [r for r in cg if r["steps"] > 1]
            if not one or not many:
                continue
            n = many[0]["steps"]
            t1 = statistics.median(one)
            tn = statistics.median([r["wall"] for r in many])
            s = (tn - t1) / (n - 1)
            overhead = t1 - s
            rates = [per[m] * (n - 1) / (r["wall"] - t1) for r in many]
            if p == "f32":
                over[m] = (overhead, s, n, one, [r["wall"] for r in many],
                           [r["rss_kb"] for r in cg])
            med_cg, lo, hi = spread(rates)
            med[m, "cg", p] = med_cg
            rss = max(r["rss_kb"] for r in many)
            print("|%s| cg (%s)%s | %.0f %s [%.0f-%.0f] | 1.00 | %.1f%% | "
                  "%.0f MiB | %d |" % (" %s " % desc[m] if first else " ",
                                       meta.get("cg_version", "cg"),
                                       pname[p], med_cg, unit[m], lo, hi,
                                       100 * med_cg * fl[m] / (peak * 1e9),
                                       rss / 1024, len(many)))
            first = False
        for p in precs:
            for impl in impls:
                every = [r for r in get("torch") if r["model"] == m and
                         r["impl"] == impl and r["precision"] == p]
                tr = [r for r in every if "error" not in r]
                if not tr:
                    if every:
                        skipped[m, impl, p] = every[0]["error"]
                    continue
                med[m, impl, p], lo, hi = spread([r["rate"] for r in tr])
                rss = max(r["rss_kb"] for r in tr)
                cut = sum(1 for r in tr if "cut_after" in r)
                ratio = ("%.2f" % (med[m, "cg", p] / med[m, impl, p])
                         if (m, "cg", p) in med else "")
                print("| | torch %s (%s)%s | %.0f %s [%.0f-%.0f] | %s | "
                      "%.1f%% | %.0f MiB | %d%s |" % (
                          tr[0]["torch"], impl, tname[p], med[m, impl, p],
                          unit[m], lo, hi, ratio,
                          100 * med[m, impl, p] * fl[m] / (peak * 1e9),
                          rss / 1024, len(tr),
                          " (%d cut)" % cut if cut else ""))
    print()
    if any(r.get("cut_after") for r in get("torch")):
        print("(cut: a PyTorch run stopped by TORCH_MAX_SECONDS, rated on "
              "the steps it timed)")
        print()
    for (m, impl, p), why in skipped.items():
        print("- torch (%s)%s, %s: %s" % (impl, tname[p], m, why))
    if skipped:
        print()
    if "bf16" in precs:
        bf16_table(models, impls, med, unit)
    print("PyTorch configurations used (fastest found by `torch_speed.py "
          "tune`; every candidate's rate is in the JSON lines):")
    print()
    for impl in impls:
        for m in models:
            t = tuned.get((impl, m))
            if not t:
                continue
            cands = t["candidates"]
            for c in cands:
                c.setdefault("precision", "f32")
            for p, b in t.get("by_precision", {"f32": t}).items():
                if "error" in b:
                    print("- torch %s (%s), %s%s: %s" % (
                        t["torch"], impl, m, tname[p], b["error"]))
                    continue
                rates = sorted({(c["env"], c["interop"], c["attn"],
                                 c["opt"]): c["rate"] for c in cands
                                if c.get("rate") and c["precision"] == p
                                }.items(), key=lambda kv: kv[1])
                worst = rates[0][1]
                print("- torch %s (%s), %s%s: %s; set_num_threads(%s)%s; "
                      "%s %s, optimizer %s (tune: %.0f %s%s; the "
                      "slowest candidate %.0f, %s)" % (
                          t["torch"], impl, m, tname[p], b["env_name"],
                          meta.get("threads", "2"),
                          ", set_num_interop_threads(1)" if b["interop"]
                          else "", slot(m), b["attn"], b["opt"], b["rate"],
                          unit[m],
                          ", tuning's fastest" if len(precs) > 1 and
                          t["precision"] == p else "", worst,
                          rates[0][0][0]))
            # a failed candidate (SIGILL, an attention or an autocast this
            # torch lacks) is skipped, and said
            for c in cands:
                if c.get("error"):
                    err = c["error"]
                    if err.startswith("skipped: "):
                        err = err[len("skipped: "):]
                    print("  - skipped: candidate %s (stage %d%s, "
                          "%s %s, optimizer %s): %s" % (
                              c["env"], c["stage"], tname[c["precision"]],
                              slot(m), c["attn"], c["opt"], err))
    print()
    print("cg per-call overhead (load + save + start: t(1 step) - one step "
          "time; step time = (t(N) - t(1)) / (N - 1))%s" % (
              "; f32" if len(precs) > 1 else ""))
    print()
    print("| workload | t(1) s [min-max] | t(N) s [min-max] | N | step s | "
          "overhead s | share of a 100-step call | peak RSS |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for m in models:
        if m not in over:
            continue
        o, s, n, one, many, rss = over[m]
        print("| %s | %.3f [%.3f-%.3f] | %.2f [%.2f-%.2f] | %d | %.4f | "
              "%.3f | %.1f%% | %.0f MiB |" % (
                  m, *spread(one), *spread(many), n, s, o,
                  100 * o / (o + 100 * s), max(rss) / 1024))
    print()
    red = get("reduce")
    if red:
        print("cg-reduce against cat (%s-parameter gradient, %.1f MB a "
              "file; output to /dev/null, inputs in the page cache)" % (
                  meta.get("reduce_params", "?"),
                  red[0]["bytes"] / red[0]["inputs"] / 1e6))
        print()
        print("| program | inputs | input MB | wall s [min-max] | GB/s | "
              "peak RSS | runs |")
        print("|---|--:|--:|--:|--:|--:|--:|")
        keys = []
        for r in red:
            if (r["prog"], r["inputs"]) not in keys:
                keys.append((r["prog"], r["inputs"]))
        for prog, k in keys:
            rs = [r for r in red if r["prog"] == prog and r["inputs"] == k]
            med, lo, hi = spread([r["wall"] for r in rs])
            print("| %s | %d | %.0f | %.3f [%.3f-%.3f] | %.2f | %.0f MiB | "
                  "%d |" % (prog, k, rs[0]["bytes"] / 1e6, med, lo, hi,
                            rs[0]["bytes"] / med / 1e9,
                            max(r["rss_kb"] for r in rs) / 1024, len(rs)))
        print()
    base = get("torch-import")
    if base:
        print("For scale: `import torch` alone peaks at " + ", ".join(
            "%.0f MiB (%s)" % (r["rss_kb"] / 1024, r["impl"]) for r in base)
            + ".")
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", required=True,
                   help="one of %s, or several with commas"
                   % ", ".join(MODELS))
    r.add_argument("--steps", default="20",
                   help="timed steps, or N,M: one per model")
    r.add_argument("--warmup", default="3",
                   help="untimed steps, or N,M: one per model")
    r.add_argument("--reps", type=int, default=1)
    r.add_argument("--max-seconds", type=float, default=0,
                   help="cut a variant short after this long (tuning)")
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--interop", type=int, default=0,
                   help="set_num_interop_threads (0: leave it)")
    r.add_argument("--variants", default="greedy",
                   help="ATTN,OPT[,PREC][;ATTN,OPT[,PREC]...] or greedy "
                   "(the default: attention first, then the optimizer); "
                   "ATTN is a convolutional model's layout, %s"
                   % " or ".join(LAYOUTS))
    r.add_argument("--precision", choices=PRECISIONS, default="f32",
                   help="of greedy's variants, and of those that name "
                   "none: f32, or bf16 (autocast)")
    r.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    r.add_argument("--shard")
    t = sub.add_parser("tune")
    t.add_argument("--python", required=True)
    t.add_argument("--impl", required=True)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--cvae-steps", type=int, default=30)
    t.add_argument("--cgpt-steps", type=int, default=4)
    t.add_argument("--cddpm-steps", type=int, default=30)
    t.add_argument("--cgan-steps", type=int, default=30)
    t.add_argument("--cclf-conv-steps", type=int, default=5)
    t.add_argument("--cgan-conv-steps", type=int, default=5)
    t.add_argument("--cddpm-unet-steps", type=int, default=5)
    t.add_argument("--models", default=",".join(MODELS),
                   help="the models to tune, with commas")
    t.add_argument("--precisions", default=",".join(PRECISIONS),
                   help="f32 and/or bf16 (autocast), with commas; "
                   "f32 always runs (stage 1)")
    t.add_argument("--max-seconds", type=float, default=10,
                   help="time box of one candidate (warm-up included)")
    t.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    t.add_argument("--shard", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--tuned", required=True)
    m.add_argument("--impl", required=True)
    m.add_argument("--model", choices=MODELS, required=True)
    m.add_argument("--steps", type=int, required=True)
    m.add_argument("--warmup", type=int, default=3)
    m.add_argument("--precision", choices=PRECISIONS + ("best",),
                   default="best",
                   help="that precision's tuned winner, or the fastest of "
                   "all (the default)")
    m.add_argument("--max-seconds", type=float, default=0,
                   help="stop after this long and rate the steps timed "
                   "(0: never)")
    m.add_argument("--threads", type=int, default=2)
    m.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    m.add_argument("--shard", required=True)
    p = sub.add_parser("report")
    p.add_argument("results")
    sub.add_parser("cores")
    a = ap.parse_args()
    if a.cmd == "run":
        if not set(a.model.split(",")) <= set(MODELS):
            ap.error("--model: %s, or several with commas"
                     % ", ".join(MODELS))
        if "cgpt" in a.model and not a.shard:
            ap.error("run --model cgpt needs --shard")
        try:
            ok = (min(int(v) for v in a.steps.split(",")) >= 1 and
                  min(int(v) for v in a.warmup.split(",")) >= 0)
        except ValueError:
            ok = False
        if not ok or min(a.reps, a.threads) < 1:
            ap.error("--steps, --reps and --threads must be positive")
        run(a)
    else:
        if a.cmd == "tune" and not set(a.models.split(",")) <= set(MODELS):
            ap.error("--models: some of %s, with commas" % ", ".join(MODELS))
        if (a.cmd == "tune" and
                not set(a.precisions.split(",")) <= set(PRECISIONS)):
            ap.error("--precisions: some of %s, with commas"
                     % ", ".join(PRECISIONS))
        {"tune": tune, "measure": measure, "report": report,
         "cores": cores}[a.cmd](a)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""torch_cgpt.py - the PyTorch reference for cg's cgpt, on cg text shards.

usage: torch_cgpt.py [options] TRAIN.cgd TEST.cgd

The model of lib/arch/cgpt/cgpt.c built from torch.nn (GPT-2: token + position
embeddings, pre-LayerNorm blocks of causal self-attention and a tanh-GELU
MLP, final LayerNorm, bias-free output projection, optionally tied to the
token embedding), trained with AdamW (lr 3e-4, betas 0.9/0.999, eps 1e-8,
weight decay 0.1 on the Linear weights only, as cg's views say) on batches
of 16 sequences of 128 positions.

The shards are read directly (tarfile + json: cg.json, then the raw
little-endian tensors "cond" u32, "index" u64, "offset" u64, "payload" u8
and optional "prompt_len" u32; plain or gzip, not zstd), and sequences are
built exactly as lib/arch/cgpt/cgpt_arch.c builds them: COND = 256 + cond, EOT =
256 + ncond as the mark of a text's start, the prompt and text bytes, EOT
as its end; only text bytes and the end are scored; an example longer than
context + 1 tokens keeps COND and a window of the rest, the start window
(with the mark) one time in four where it scores, else one from the middle
(without it), drawn with cg's generator (xoshiro256** seeded through
splitmix64, reimplemented here) from the step's noise seed and the
example's index.  The data order and the noise seeds are those of
`cg-train-step --emit model --batch 16 --seed SEED` (lib/train/train.c), and the
held-out figure is computed as `cg-eval --seed 0 --batch EVAL_BATCH`
computes it (lib/train/train.c cg_eval_shard: the mean per scored token over the
whole shard, each batch's mean weighted by its scored tokens).  So with
--init MODEL.cgm (cg's initial weights) both programs see the same bits of
data from the same start.  Without --init the weights are drawn by torch
with GPT-2's init, N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 L)).

Prints, every --eval-every steps and at the end, the mean training loss
(nats per scored token) since the last report, the held-out loss and bits
per byte, and the training wall time so far (evaluation excluded): a table,
or with --json one JSON object per line.
"""
import argparse
import io
import json
import math
import os
import sys
import tarfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ------------------------------------------------------------- cg's rng

M64 = (1 << 64) - 1


def _splitmix64(x):
    """(new state, output) of splitmix64 from state x."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Rng:
    """lib/core/rng.c: xoshiro256** seeded through splitmix64."""

    def __init__(self, seed):
        self.s = []
        x = seed & M64
        for _ in range(4):
            x, v = _splitmix64(x)
            self.s.append(v)

    @classmethod
    def derive(cls, seed, a, b):
        """cg_rng_derive: an independent stream from (seed, a, b)."""
        x, h = _splitmix64(seed & M64)
        x, h = _splitmix64(h ^ (a & M64))
        x, h = _splitmix64(h ^ (b & M64))
        return cls(h)

    def u64(self):
        s = self.s
        res = (_rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return res

    def below(self, n):
        lim = M64 - M64 % n
        while True:
            v = self.u64()
            if v < lim:
                return v % n


ORDER_TAG = 0x6F72646572      # "order", lib/train/train.c
NOISE_TAG = 0x6E6F697365      # "noise", lib/train/train.c
EVAL_TAG = 0x6576616C         # "eval", lib/train/train.c
WINDOW_TAG = 0x77696E646F77   # "window", lib/arch/cgpt/cgpt_arch.c
START_ODDS = 4                # lib/arch/cgpt/cgpt_arch.c: 1 in 4 windows a start

# ---------------------------------------------------------------- data


def read_cg(path):
    """(manifest, {tensor name: numpy array}) of a cg file."""
    try:
        tf = tarfile.open(path, "r:*")
    except tarfile.ReadError as e:
        sys.exit("torch_cgpt: %s: cannot read (%s; zstd is not supported "
                 "here)" % (path, e))
    with tf:
        members = tf.getmembers()
        if not members or members[0].name != "cg.json":
            sys.exit("torch_cgpt: %s: not a cg file" % path)
        man = json.load(tf.extractfile(members[0]))
        dt = {"f32": "<f4", "u8": "u1", "u32": "<u4", "u64": "<u8"}
        out = {}
        for t in man.get("tensors", []):
            if t["dtype"] not in dt:
                continue
            data = tf.extractfile(t["name"]).read()
            out[t["name"]] = np.frombuffer(data, dtype=dt[t["dtype"]]).reshape(
                t["shape"])
    return man, out


class Shard:
    def __init__(self, path):
        man, t = read_cg(path)
        if man.get("kind") != "data" or man.get("payload") != "text":
            sys.exit("torch_cgpt: %s: not a text data shard" % path)
        self.conditions = man["conditions"]
        self.cond = t["cond"].astype(np.int64)
        self.index = t["index"]
        self.offset = t["offset"]
        self.payload = t["payload"]
        self.prompt_len = t.get("prompt_len")
        self.n = len(self.cond)


def make_seq(s, i, ncond, T, noise):
    """Example i of s as (tokens [T], targets [T], scored [T]), as
    lib/arch/cgpt/cgpt_arch.c make_seq: rest = EOT (the start mark), the payload,
    EOT (the end); a window at offset o is COND, rest[o:o+T-1] with the
    targets rest[o:o+T]; o = 0 (the start window) one time in START_ODDS
    where it scores, else uniform over the middle offsets that score."""
    EOT = 256 + ncond
    lo_, hi_ = int(s.offset[i]), int(s.offset[i + 1])
    p = s.payload[lo_:hi_]
    n = hi_ - lo_
    P = int(s.prompt_len[i]) if s.prompt_len is not None else 0
    R = n + 2
    o = 0
    if R > T:
        lo = P + 2 - T if P + 2 > T else 0
        r = Rng.derive(noise, int(s.index[i]), WINDOW_TAG)
        if lo > 0 or r.below(START_ODDS) != 0:
            lo = max(lo, 1)
            o = lo + r.below(R - T - lo + 1)
    rest = np.full(o + T + 1, EOT, dtype=np.int64)
    m = min(n, o + T)  # payload bytes that reach rest[1 .. o+T]
    rest[1:1 + m] = p[:m]
    j = np.arange(o, o + T)
    tok = np.empty(T, dtype=np.int64)
    tok[0] = 256 + int(s.cond[i])
    tok[1:] = rest[o:o + T - 1]
    tgt = rest[o:o + T]
    scored = (j < R) & (j > P)
    return tok, tgt, scored


def make_batch(s, ex, ncond, T, noise):
    seqs = [make_seq(s, i, ncond, T, noise) for i in ex]
    tok = torch.from_numpy(np.stack([q[0] for q in seqs]))
    tgt = torch.from_numpy(np.stack([q[1] for q in seqs]))
    w = torch.from_numpy(np.stack([q[2] for q in seqs]).astype(np.float32))
    return tok, tgt, w


class Order:
    """lib/train/train.c's batch order: epoch e is a Fisher-Yates permutation
    seeded from (seed, e)."""

    def __init__(self, n, seed):
        self.n, self.seed, self.epoch, self.perm = n, seed, -1, None

    def at(self, pos):
        e = pos // self.n
        if e != self.epoch:
            r = Rng.derive(self.seed, ORDER_TAG, e)
            perm = list(range(self.n))
            for i in range(self.n - 1, 0, -1):
                j = r.below(i + 1)
                perm[i], perm[j] = perm[j], perm[i]
            self.perm, self.epoch = perm, e
        return self.perm[pos % self.n]

# --------------------------------------------------------------- model


class Block(nn.Module):
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

    def forward(self, x, mask):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.mproj(self.gelu(self.fc(self.ln2(x))))


class CGPT(nn.Module):
    def __init__(self, V, T, C, L, NH, tied):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        self.lm_head = None if tied else nn.Linear(C, V, bias=False)
        self.register_buffer(
            "mask", ~torch.tril(torch.ones(T, T, dtype=torch.bool)),
            persistent=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("lnf"):
                nn.init.ones_(p)
            elif name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def named_tensors(self):
        """(cg view name, parameter, decay) in cg's buffer order."""
        out = [("wte", self.wte.weight, 0), ("wpe", self.wpe.weight, 0)]
        for i, b in enumerate(self.h):
            for name, p, d in (("ln1.w", b.ln1.weight, 0),
                               ("ln1.b", b.ln1.bias, 0),
                               ("attn.qkv.w", b.qkv.weight, 1),
                               ("attn.qkv.b", b.qkv.bias, 0),
                               ("attn.proj.w", b.proj.weight, 1),
                               ("attn.proj.b", b.proj.bias, 0),
                               ("ln2.w", b.ln2.weight, 0),
                               ("ln2.b", b.ln2.bias, 0),
                               ("mlp.fc.w", b.fc.weight, 1),
                               ("mlp.fc.b", b.fc.bias, 0),
                               ("mlp.proj.w", b.mproj.weight, 1),
                               ("mlp.proj.b", b.mproj.bias, 0)):
                out.append(("h.%d.%s" % (i, name), p, d))
        out += [("lnf.w", self.lnf.weight, 0), ("lnf.b", self.lnf.bias, 0)]
        if self.lm_head is not None:
            out.append(("lm_head.w", self.lm_head.weight, 1))
        return out

    def forward(self, tokens):
        B, T = tokens.shape
        x = self.wte(tokens) + self.wpe.weight[:T]
        for b in self.h:
            x = b(x, self.mask)
        x = self.lnf(x)
        if self.lm_head is None:
            return F.linear(x, self.wte.weight)
        return self.lm_head(x)


def batch_loss(model, tok, tgt, w):
    """Mean cross-entropy per scored token, and the scored count."""
    logits = model(tok)
    V = logits.shape[-1]
    ce = F.cross_entropy(logits.view(-1, V), tgt.view(-1), reduction="none")
    count = w.sum()
    return (ce * w.view(-1)).sum() / count.clamp(min=1), int(count.item())


def evaluate(model, s, ncond, T, batch):
    """cg-eval's figure: the mean per scored token over the shard (batch
    means weighted by their token counts), noise from seed 0."""
    noise = Rng.derive(0, EVAL_TAG, 0).u64()
    total, n = 0.0, 0
    model.eval()
    with torch.no_grad():
        for i in range(0, s.n, batch):
            ex = range(i, min(i + batch, s.n))
            loss, count = batch_loss(model,
                                     *make_batch(s, ex, ncond, T, noise))
            total += loss.item() * count
            n += count
    model.train()
    return total / max(n, 1)


def load_init(model, path):
    """Copy cg's weights (a model file of arch cgpt) into model."""
    man, t = read_cg(path)
    if man.get("arch") != "cgpt":
        sys.exit("torch_cgpt: %s: not a cgpt model" % path)
    with torch.no_grad():
        for name, p, _ in model.named_tensors():
            if name not in t or list(t[name].shape) != list(p.shape):
                sys.exit("torch_cgpt: %s: tensor %s missing or misshapen"
                         % (path, name))
            p.copy_(torch.from_numpy(t[name].copy()))
    return man["config"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train")
    ap.add_argument("test")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--eval-every", type=int, default=0,
                    help="steps between evaluations (0: only at the end)")
    ap.add_argument("--eval-batch", type=int, default=500)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--tied", type=int, choices=(0, 1), default=0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--init", metavar="MODEL.cgm",
                    help="start from cg's weights (sizes from its config)")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per report instead of a table")
    a = ap.parse_args()
    if min(a.steps, a.threads, a.batch, a.context, a.width, a.layers,
           a.heads, a.eval_batch) < 1 or a.eval_every < 0:
        ap.error("sizes, --steps, --threads and --eval-batch must be "
                 "positive")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train, test = Shard(a.train), Shard(a.test)
    if train.conditions != test.conditions:
        sys.exit("torch_cgpt: the shards name their conditions differently")
    ncond = len(train.conditions)
    if a.init:
        man, _ = read_cg(a.init)
        c = man.get("config", {})
        a.context, a.width, a.layers = c["context"], c["width"], c["layers"]
        a.heads, a.tied = c["heads"], c["tied"]
        if c["ncond"] != ncond:
            sys.exit("torch_cgpt: %s: %d conditions, the data has %d"
                     % (a.init, c["ncond"], ncond))
    if a.width % a.heads:
        ap.error("--width must be a multiple of --heads")
    T, V = a.context, 256 + ncond + 1
    model = CGPT(V, T, a.width, a.layers, a.heads, a.tied)
    if a.init:
        load_init(model, a.init)
    named = model.named_tensors()
    opt = torch.optim.AdamW(
        [{"params": [p for _, p, d in named if d], "weight_decay": a.wd},
         {"params": [p for _, p, d in named if not d], "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    nparams = sum(p.numel() for _, p, _ in named)
    if not a.json:
        print("# torch %s, %d threads, %d params, V %d, T %d, C %d, L %d, "
              "NH %d, tied %d" % (torch.__version__, a.threads, nparams, V,
                                  T, a.width, a.layers, a.heads, a.tied))
        print("%7s %11s %10s %10s %9s" % ("step", "train_loss", "test_loss",
                                          "test_bpb", "train_s"))
    order = Order(train.n, a.seed)
    train_s, lsum, lcount = 0.0, 0.0, 0
    for step in range(a.steps):
        t0 = time.perf_counter()
        ex = [order.at(step * a.batch + b) for b in range(a.batch)]
        noise = Rng.derive(a.seed, NOISE_TAG, step).u64()
        tok, tgt, w = make_batch(train, ex, ncond, T, noise)
        loss, _ = batch_loss(model, tok, tgt, w)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        train_s += time.perf_counter() - t0
        lsum += loss.item()
        lcount += 1
        done = step + 1
        if done == a.steps or (a.eval_every and done % a.eval_every == 0):
            tl = evaluate(model, test, ncond, T, a.eval_batch)
            row = {"step": done, "train_loss": lsum / lcount,
                   "test_loss": tl, "test_bits_per_byte": tl / math.log(2),
                   "train_s": train_s, "threads": a.threads}
            if a.json:
                print(json.dumps(row))
            else:
                print("%7d %11.4f %10.4f %10.4f %9.2f" % (
                    done, row["train_loss"], tl, row["test_bits_per_byte"],
                    train_s))
            sys.stdout.flush()
            lsum, lcount = 0.0, 0


if __name__ == "__main__":
    main()

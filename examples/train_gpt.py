#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A small GPT trained twice: with libattn's attention and with torch's.

    /usr/bin/python3 examples/train_gpt.py [--steps 200] [--text FILE] [--check]

A character-level GPT (2 layers, 4 heads of 16, causal, context 64) learns
the repository's documentation: README.md followed by docs/guide/*.md in
name order, concatenated, about 100 KB (--text FILE: that file alone). It
is trained two times from the same seed, on the same batches: once with
libattn.torch's scaled_dot_product_attention (forward and attn_backward),
once with torch's own attention
(torch.nn.functional.scaled_dot_product_attention where torch has it,
else its math path: softmax(q k^T / sqrt(d) + causal mask) v).
Everything else is the same torch code. It prints both loss curves side
by side and the time per training step of each.

Both runs are deterministic; they differ only in the rounding of the
attention, so their curves agree closely. With --check it exits 1 unless
the step-0 gradients of every parameter agree within 1e-4 of their norm
and every loss agrees within 1e-3 (regression thresholds for this seeded
run, far above float32 rounding, far below what a wrong gradient gives);
the test suite runs it so with --steps 30.

Needs PyTorch (Debian: python3-torch); exits 77 (skipped) without it.
"""

import argparse
import glob
import math
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("train_gpt: skipped, PyTorch is not installed (Debian: python3-torch)")
    sys.exit(77)

import libattn.torch as lt


def torch_attention(q, k, v):
    """torch's causal attention: its fused SDPA where it has one (2.0+)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    L = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    keep = torch.ones(L, L, dtype=torch.bool).tril()
    return torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1) @ v


def libattn_attention(q, k, v):
    return lt.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(nn.Module):
    def __init__(self, d, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        B, L, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        # [B, L, H, Dh] viewed as [B, H, L, Dh]: libattn reads the strides in place
        q, k, v = (t.view(B, L, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = self.attend(q, k, v).transpose(1, 2).reshape(B, L, d)
        x = x + self.proj(a)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d, heads, layers, context, attend):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads, attend) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def batches(data, steps, batch, context, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        at = torch.randint(0, len(data) - context - 1, (batch,), generator=g)
        x = torch.stack([data[i:i + context] for i in at])
        y = torch.stack([data[i + 1:i + 1 + context] for i in at])
        yield x, y


def train(attend, data, vocab, args):
    torch.manual_seed(args.seed)
    model = GPT(vocab, 64, 4, 2, args.context, attend)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses, grads0, seconds = [], None, 0.0
    for step, (x, y) in enumerate(batches(data, args.steps, args.batch, args.context, args.seed)):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if step == 0:
            grads0 = [p.grad.detach().clone() for p in model.parameters()]
        opt.step()
        seconds += time.perf_counter() - t0 if step else 0.0  # step 0 warms up
        losses.append(loss.item())
    return losses, grads0, seconds / max(1, args.steps - 1)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (both runs)")
    ap.add_argument("--text", metavar="FILE",
                    help="train on FILE alone (default: README.md and docs/guide/*.md)")
    ap.add_argument("--check", action="store_true", help="exit 1 when the runs disagree")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.text:
        paths, corpus = [args.text], os.path.basename(args.text)
    else:
        # README.md is the overview and the guides hold the rest: together
        # about the text README.md alone was before they moved out of it.
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        paths = [os.path.join(root, "README.md")]
        paths += sorted(glob.glob(os.path.join(root, "docs", "guide", "*.md")))
        corpus = "README.md + docs/guide/*.md (%d files)" % len(paths)
    text = "".join(open(p, encoding="utf-8").read() for p in paths)
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    vocab = len(chars)
    print("corpus %s: %d characters, %d distinct; GPT 2 layers, d 64, 4 heads, context %d, "
          "batch %d, %d thread(s), torch %s" % (corpus, len(text), vocab, args.context,
                                                args.batch, args.threads, torch.__version__))
    lib_loss, lib_g, lib_t = train(libattn_attention, data, vocab, args)
    ref_loss, ref_g, ref_t = train(torch_attention, data, vocab, args)
    print("%6s %12s %12s %10s" % ("step", "libattn", "torch", "|diff|"))
    for s in range(args.steps):
        if s % max(1, args.steps // 10) == 0 or s == args.steps - 1:
            print("%6d %12.6f %12.6f %10.2e" % (s, lib_loss[s], ref_loss[s],
                                                abs(lib_loss[s] - ref_loss[s])))
    print("time per training step: libattn %.2f ms, torch %.2f ms (%.2fx)"
          % (lib_t * 1e3, ref_t * 1e3, ref_t / lib_t if lib_t else float("nan")))
    worst_g = max(((a - b).norm() / max(b.norm(), 1e-30)).item() for a, b in zip(lib_g, ref_g))
    worst_l = max(abs(a - b) for a, b in zip(lib_loss, ref_loss))
    print("step-0 gradients: worst relative difference %.2e; losses: worst difference %.2e"
          % (worst_g, worst_l))
    if args.check and not (worst_g <= 1e-4 and worst_l <= 1e-3):
        print("FAIL: the two runs disagree")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

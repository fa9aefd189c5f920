#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""ALiBi on a 131,072-key cache: the error of libattn's alibi_slopes (the
distance form -slope*|i + Lk - Lq - j|, from positions) against the same
attention given as an explicit f32 bias tensor, in FlashAttention's causal
absolute form (+slope*j, a per-row shift of the distance form, |bias| up to
~4e4) and in the distance form; all against float64.

    ATTN_LIBRARY=build/src/libattn.so PYTHONPATH=python \
        /usr/bin/python3 bench/alibi_accuracy.py

Rounding s + bias in f32 costs u*|bias| per score: with the absolute form
that is large exactly at the keys near the query, which carry the weight.
"""
import math

import numpy as np

import libattn

rng = np.random.default_rng(1)
Lk, D, H = 131072, 64, 4
q = rng.standard_normal((H, 1, D)).astype(np.float32)
k = rng.standard_normal((1, Lk, D)).astype(np.float32)
v = rng.standard_normal((1, Lk, D)).astype(np.float32)
slopes = np.array([0.3, 0.1, 0.01, 0.001], np.float32)
s = (q.astype(np.float64) @ k[0].T.astype(np.float64)) / math.sqrt(D)  # [H, 1, Lk]
j = np.arange(Lk)
dist = (Lk - 1 - j).astype(np.float64)
s64 = s - slopes.astype(np.float64)[:, None, None] * dist
p = np.exp(s64 - s64.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
ref = p @ v[0].astype(np.float64)
o1 = libattn.forward(q, k, v, causal=True, alibi=slopes)
# FlashAttention's causal absolute form: + slope * j (a per-row constant shift of the relative form)
bias_abs = (slopes[:, None, None] * j[None, None, :].astype(np.float32)).astype(np.float32)
o2 = libattn.forward(q, k, v, causal=True, bias=bias_abs)
bias_rel = (-(slopes[:, None, None] * dist[None, None, :].astype(np.float32))).astype(np.float32)
o3 = libattn.forward(q, k, v, causal=True, bias=bias_rel)
for name, o in (("alibi_slopes", o1), ("bias tensor, absolute slope*j", o2), ("bias tensor, relative", o3)):
    print("%-32s max|err| %.3g" % (name, np.abs(o - ref).max()))
print("max |absolute bias| %.3g" % np.abs(bias_abs).max())

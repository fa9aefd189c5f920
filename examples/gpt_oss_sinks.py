#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A gpt-oss-style attention stack with libattn: attention sinks on every
layer, layers alternating between a causal sliding window of 128 keys and
full causal attention, grouped-query heads.

    /usr/bin/python3 examples/gpt_oss_sinks.py [--len 1024] [--layers 4]

For each layer it runs the prefill (libattn.forward with sinks= and, on the
banded layers, window=128) and one decode step against the layer's cache
(q_len 1: bottom-right alignment puts the new token last), checks both
against a float64 NumPy reference written here, and prints how much of each
row's probability the sink absorbed (exp(sink - lse), from the row stats).

The toy weights are random; what it shows is the call pattern and that the
sink enters the softmax denominator and nothing else. The printed errors are
for reading; the error bounds themselves are checked by the test suites
(tests/ops/test_ops.c, python/tests/test_mods.py). It fails only on a broken
result: a non-finite output or a sink share outside (0, 1). Exits 77
(skipped) without NumPy.
"""

import argparse
import math
import sys

try:
    import numpy as np
except ImportError as err:
    print("gpt_oss_sinks.py needs NumPy: %s" % err)
    sys.exit(77)

import libattn

Q_HEADS, KV_HEADS, HEAD_DIM, WINDOW = 8, 2, 64, 128


def reference(q, k, v, sinks, window):
    """float64 softmax(q k^T / sqrt(d) with causal (+ window) mask, sink in the
    denominator) . v, bottom-right aligned; also lse."""
    hq, lq, d = q.shape
    lk = k.shape[1]
    kk = np.repeat(k.astype(np.float64), hq // k.shape[0], axis=0)
    vv = np.repeat(v.astype(np.float64), hq // v.shape[0], axis=0)
    s = q.astype(np.float64) @ kk.transpose(0, 2, 1) / math.sqrt(d)
    i = np.arange(lq)[:, None] + (lk - lq)
    j = np.arange(lk)[None, :]
    visible = j <= i
    if window:
        visible &= j > i - window
    s = np.where(visible, s, -np.inf)
    z = sinks.astype(np.float64)[:, None, None]
    m = np.maximum(s.max(axis=-1, keepdims=True), z)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True) + np.exp(z - m)
    return (e / total) @ vv, (m + np.log(total))[..., 0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--len", type=int, default=1024, help="prefill length (default 1024)")
    ap.add_argument("--layers", type=int, default=4, help="layers (default 4)")
    args = ap.parse_args()
    rng = np.random.default_rng(20250805)
    L = args.len
    print("libattn %s on %s: %d layers, %d query heads / %d KV heads, d=%d, L=%d"
          % (libattn.version(), libattn.isa_active(), args.layers, Q_HEADS, KV_HEADS,
             HEAD_DIM, L))
    broken = False
    for layer in range(args.layers):
        window = WINDOW if layer % 2 == 0 else 0  # banded, dense, banded, ...
        # One learned logit per query head (gpt-oss keeps them in the
        # attention block as `sinks`); random here.
        sinks = rng.uniform(-1.0, 3.0, Q_HEADS).astype(np.float32)
        q = rng.standard_normal((Q_HEADS, L + 1, HEAD_DIM)).astype(np.float32)
        k = rng.standard_normal((KV_HEADS, L + 1, HEAD_DIM)).astype(np.float32)
        v = rng.standard_normal((KV_HEADS, L + 1, HEAD_DIM)).astype(np.float32)

        # Prefill: the first L tokens.
        out, stats = libattn.forward(q[:, :L], k[:, :L], v[:, :L], causal=True, window=window,
                                     sinks=sinks, stats=True)
        want, want_lse = reference(q[:, :L], k[:, :L], v[:, :L], sinks, window)
        err = float(np.max(np.abs(out - want)))
        lse_err = float(np.max(np.abs(stats["lse"] - want_lse)))
        share = np.exp(sinks[:, None].astype(np.float64) - stats["lse"])

        # Decode: token L against the cache of L + 1 keys (a view, no copy).
        step = libattn.forward(q[:, L:L + 1], k, v, causal=True, window=window, sinks=sinks)
        want_step, _ = reference(q[:, L:L + 1], k, v, sinks, window)
        step_err = float(np.max(np.abs(step - want_step)))
        broken |= not (np.isfinite(out).all() and np.isfinite(step).all())
        broken |= not ((share > 0.0) & (share < 1.0)).all()
        print("layer %d  %-18s prefill max|err| %.2e  lse %.2e  decode %.2e  "
              "sink share: mean %.3f, first row %.3f, last row %.3f"
              % (layer, "window %d" % window if window else "full causal", err, lse_err,
                 step_err, share.mean(), share[:, 0].mean(), share[:, -1].mean()))
    if broken:
        print("FAILED: a non-finite output or a sink share outside (0, 1)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

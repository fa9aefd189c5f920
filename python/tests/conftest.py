# SPDX-License-Identifier: MIT
"""Float64 NumPy reference for the binding's tests (shares no code with libattn).

Tolerances are error bounds, not tuned constants. With u = 2**-24 (f32 unit
roundoff) and a dot product of length D computed in f32:
    |s - s_ref| <= (D + 2) u sum_i |q_i k_i| |scale|  (+ u |s| per later f32 op)
the standard forward-error bound for a sum of D products plus the scale,
softcap and bias roundings. A shift δ in the scores of a row moves each
softmax weight by a relative 2δ (numerator and lse), and exp/log and the sum
of n terms add (n + C) u relative; C = 16 covers the few ulp of the
vectorised exp/log and the online-softmax rescalings of the fused forward.
"""

import math
import os

import numpy as np
import pytest

import libattn

U = 2.0 ** -24
C_ULPS = 16


@pytest.fixture
def rng(request):
    # One stream per test, reproducible from its name.
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(request.node.name)) % (2 ** 32)
    return np.random.default_rng(seed)


def bf16_bits(x):
    """Round-to-nearest-even float32 -> bfloat16 bits (uint16)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def as4(x):
    x = np.asarray(x, dtype=np.float64)
    return x.reshape((1,) * (4 - x.ndim) + x.shape)


def ref_visible(batch, heads, q_len, kv_len, *, causal=False, window=0, q_lens=None,
                kv_lens=None, mask=None):
    """bool [B,H,Lq,Lk]: which keys each query may see (attn.h's rules)."""
    vis = np.zeros((batch, heads, q_len, kv_len), dtype=bool)
    i = np.arange(q_len)[:, None]
    j = np.arange(kv_len)[None, :]
    for b in range(batch):
        lq = q_len if q_lens is None else int(np.broadcast_to(q_lens, (batch,))[b])
        lk = kv_len if kv_lens is None else int(np.broadcast_to(kv_lens, (batch,))[b])
        ok = (i < lq) & (j < lk)
        shift = lk - lq
        if causal:
            ok &= j <= i + shift
        if window:
            ok &= j > i + shift - window
        vis[b] = ok
    if mask is not None:
        m = np.asarray(mask).astype(bool)
        vis &= np.broadcast_to(m.reshape((1,) * (4 - m.ndim) + m.shape), vis.shape)
    return vis


class Reference:
    """Scores, weights, output and row stats in float64, with error bounds."""

    def __init__(self, q, k, v=None, *, causal=False, scale=0.0, softcap=0.0, window=0,
                 q_lens=None, kv_lens=None, mask=None, bias=None):
        q4, k4 = as4(q), as4(k)
        batch, hq, lq, d = q4.shape
        hk, lk = k4.shape[1], k4.shape[2]
        kk = np.repeat(k4, hq // hk, axis=1)
        sc = float(np.float32(scale if scale else 1.0 / math.sqrt(d)))
        dot = q4 @ kk.transpose(0, 1, 3, 2)
        dot_abs = np.abs(q4) @ np.abs(kk).transpose(0, 1, 3, 2)
        s = dot * sc
        err = (d + 2) * U * dot_abs * abs(sc) + U * np.abs(s)
        if softcap:
            s = softcap * np.tanh(s / softcap)
            err = err + C_ULPS * U * softcap
        if bias is not None:
            b = as4(bias)
            s = s + b
            err = err + U * (np.abs(s) + np.abs(b))
        vis = ref_visible(batch, hq, lq, lk, causal=causal, window=window, q_lens=q_lens,
                          kv_lens=kv_lens, mask=mask)
        self.visible = vis
        self.scores = np.where(vis, s, -np.inf)
        self.score_err = np.where(vis, err, 0.0)
        any_vis = vis.any(axis=-1)
        self.masked_rows = ~any_vis
        finite = np.where(vis, s, -np.inf)
        m = finite.max(axis=-1)
        safe_m = np.where(any_vis, m, 0.0)
        e = np.where(vis, np.exp(finite - safe_m[..., None]), 0.0)
        total = e.sum(axis=-1)
        safe_total = np.where(any_vis, total, 1.0)
        p = e / safe_total[..., None]
        self.weights = p
        self.max_score = np.where(any_vis, m, -np.inf)
        self.lse = np.where(any_vis, safe_m + np.log(safe_total), -np.inf)
        logp = np.where(vis & (p > 0), np.log(np.where(p > 0, p, 1.0)), 0.0)
        self.entropy = -(p * logp).sum(axis=-1)
        n = vis.sum(axis=-1)
        row_err = self.score_err.max(axis=-1)
        self.row_err = row_err
        rel = 2 * row_err + (n + C_ULPS) * U
        self.weight_tol = p * rel[..., None] + C_ULPS * U * U
        spread = (p * np.abs(np.where(vis, finite - safe_m[..., None], 0.0))).sum(axis=-1)
        self.lse_tol = row_err + C_ULPS * U * (np.abs(np.where(any_vis, self.lse, 0.0)) + 1)
        self.entropy_tol = 2 * row_err + (n + C_ULPS) * U * (1 + np.log(np.maximum(n, 1))
                                                              + spread)
        if v is not None:
            v4 = as4(v)
            vv = np.repeat(v4, hq // hk, axis=1)
            self.out = p @ vv
            mag = p @ np.abs(vv)
            self.out_tol = mag * (rel + lk * U)[..., None] + C_ULPS * U * U


def assert_close(actual, expected, tol, what):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, "%s: shape %r != %r" % (what, actual.shape,
                                                                   expected.shape)
    both_inf = np.isinf(expected) & (actual == expected)
    with np.errstate(invalid="ignore"):
        diff = np.where(both_inf, 0.0, np.abs(actual - expected))
    tol = np.broadcast_to(tol, diff.shape)
    bad = ~(diff <= tol)
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        raise AssertionError("%s: %d of %d elements off; first at %r: got %r, want %r, "
                             "|diff| %.3g > tol %.3g" % (what, bad.sum(), bad.size, idx,
                                                         actual[idx], expected[idx], diff[idx],
                                                         tol[idx]))


@pytest.fixture(autouse=True, scope="session")
def _installed_copy_check():
    # run_installed.py sets this: prove the installed package is under test.
    expected = os.environ.get("ATTN_EXPECT_PACKAGE_DIR")
    if expected:
        here = os.path.dirname(os.path.abspath(libattn.__file__))
        assert here == os.path.abspath(expected), \
            "testing %s, expected the installed copy %s" % (here, expected)
    yield

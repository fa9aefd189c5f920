# SPDX-License-Identifier: MIT
"""Score modifiers: sinks=, alibi=, window=(left, right), against a float64
reference written here from attn.h's rules (it shares no code with libattn).

Bounds follow conftest.py's model: the score error of a dot product of
length D, plus for ALiBi the rounding of slope * distance and of the
addition (3u |a| + u |s|, tests/tolerance.h "alibi"); the sink is one more
exact softmax entry, so a row of n visible keys sums n + 1 terms.
"""

import math

import numpy as np
import pytest

import libattn
from conftest import C_ULPS, U, as4, assert_close


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def reference(q, k, v=None, *, causal=False, window=0, sinks=None, alibi=None, q_lens=None,
              kv_lens=None):
    q4, k4 = as4(q), as4(k)
    batch, hq, lq, d = q4.shape
    hk, lk = k4.shape[1], k4.shape[2]
    kk = np.repeat(k4, hq // hk, axis=1)
    sc = float(np.float32(1.0 / math.sqrt(d)))
    s = (q4 @ kk.transpose(0, 1, 3, 2)) * sc
    err = (d + 2) * U * (np.abs(q4) @ np.abs(kk).transpose(0, 1, 3, 2)) * sc + U * np.abs(s)
    left, right = window if isinstance(window, tuple) else (window, 0)
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    vis = np.zeros((batch, hq, lq, lk), dtype=bool)
    valid_q = np.zeros((batch, lq), dtype=bool)
    for b in range(batch):
        lqb = lq if q_lens is None else q_lens[b]
        lkb = lk if kv_lens is None else kv_lens[b]
        aligned = i + (lkb - lqb)
        ok = (i < lqb) & (j < lkb)
        if causal:
            ok &= j <= aligned
        if left:
            ok &= j > aligned - left
        if right:
            ok &= j < aligned + right
        vis[b] = ok
        valid_q[b] = np.arange(lq) < lqb
        if alibi is not None:
            slopes = np.broadcast_to(np.asarray(alibi, dtype=np.float64), (batch, hq))[b]
            a = slopes[:, None, None] * np.abs(aligned - j)[None]
            s[b] = s[b] - a
            err[b] = err[b] + 3 * U * a + U * np.abs(s[b])
    z = np.full((batch, hq, lq), -np.inf)
    if sinks is not None:
        zz = np.broadcast_to(np.asarray(sinks, dtype=np.float64), (batch, hq))
        z = np.where(valid_q[:, None, :], zz[:, :, None], -np.inf)
    scores = np.where(vis, s, -np.inf)
    m = np.maximum(scores.max(axis=-1), z)
    has = m > -np.inf
    sm = np.where(has, m, 0.0)
    e = np.where(vis, np.exp(scores - sm[..., None]), 0.0)
    total = e.sum(axis=-1) + np.where(z > -np.inf, np.exp(z - sm), 0.0)
    tot = np.where(has, total, 1.0)
    p = e / tot[..., None]
    lse = np.where(has, sm + np.log(tot), -np.inf)
    n = vis.sum(axis=-1) + (z > -np.inf)
    row_err = np.where(vis, err, 0.0).max(axis=-1)
    rel = 2 * row_err + (n + C_ULPS) * U
    r = {"scores": scores, "score_err": np.where(vis, err, 0.0), "weights": p,
         "weight_tol": p * rel[..., None] + C_ULPS * U * U, "lse": lse,
         "lse_tol": row_err + C_ULPS * U * (np.abs(np.where(has, lse, 0.0)) + 1),
         "max": np.where(has, m, -np.inf), "visible": vis}
    if v is not None:
        vv = np.repeat(as4(v), hq // hk, axis=1)
        r["out"] = p @ vv
        r["out_tol"] = (p @ np.abs(vv)) * (rel + lk * U)[..., None] + C_ULPS * U * U
    return r


B, HQ, HK, LQ, LK, D = 2, 4, 2, 7, 12, 16
CASES = {
    "sinks_per_head": {"sinks": "head"},
    "sinks_per_batch_head": {"sinks": "batch_head", "causal": True},
    "alibi": {"alibi": "head"},
    "alibi_causal_lens": {"alibi": "batch_head", "causal": True, "kv_lens": [12, 5],
                          "q_lens": [7, 3]},
    "two_sided": {"window": (3, 2)},
    "right_only": {"window": (0, 4)},
    "gpt_oss_layer": {"sinks": "head", "window": 4, "causal": True},
    "everything": {"sinks": "batch_head", "alibi": "head", "window": (5, 3),
                   "kv_lens": [10, 0], "q_lens": [7, 6]},
}


def make(rng, spec):
    kw = dict(spec)
    for key in ("sinks", "alibi"):
        if kw.get(key) == "head":
            kw[key] = rng.uniform(-1, 2, HQ).astype(np.float32) if key == "sinks" else \
                np.asarray(libattn.alibi_slopes(HQ), dtype=np.float32)
        elif kw.get(key) == "batch_head":
            kw[key] = rng.uniform(0, 1, (B, HQ)).astype(np.float32)
    return kw


@pytest.mark.parametrize("name", sorted(CASES))
def test_modifiers_against_float64(rng, name):
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, LK, D), randn(rng, B, HK, LK, 5)
    kw = make(rng, CASES[name])
    ref = reference(q, k, v, **kw)
    no_sinks = {key: val for key, val in kw.items() if key != "sinks"}

    s = libattn.scores(q, k, **no_sinks)
    assert np.array_equal(np.isneginf(s), ~ref["visible"])
    assert_close(s, ref["scores"], ref["score_err"], "scores")

    w, st = libattn.weights(q, k, stats=True, **kw)
    assert_close(w, ref["weights"], ref["weight_tol"], "weights")
    assert_close(st["lse"], ref["lse"], ref["lse_tol"], "lse")

    o, st = libattn.forward(q, k, v, stats=True, **kw)
    assert_close(o, ref["out"], ref["out_tol"], "out")
    assert_close(st["lse"], ref["lse"], ref["lse_tol"], "forward lse")

    raw = (q.astype(np.float64) @ np.repeat(k, HQ // HK, axis=1).transpose(0, 1, 3, 2)
           .astype(np.float64)).astype(np.float32)
    applied = libattn.mask_apply(raw, copy=True, **{key: val for key, val in no_sinks.items()})
    assert np.array_equal(np.isneginf(applied), ~ref["visible"])


def test_sink_only_rows():
    """A row whose keys are all hidden has output 0, lse = max_score = its sink."""
    q, k, v = np.ones((1, 2, 3, 4), np.float32), np.ones((1, 2, 5, 4), np.float32), \
        np.ones((1, 2, 5, 4), np.float32)
    sinks = np.array([0.5, -2.0], np.float32)
    o, st = libattn.forward(q, k, v, sinks=sinks, kv_lens=[0], stats=True)
    assert np.all(o == 0.0)
    assert np.array_equal(st["lse"][0], np.repeat(sinks[:, None], 3, axis=1))
    assert np.array_equal(st["max_score"], st["lse"])
    assert np.all(st["entropy"] == 0.0)
    # padded query rows have no sink
    o, st = libattn.forward(q, k, v, sinks=sinks, q_lens=[1], stats=True)
    assert np.all(np.isneginf(st["lse"][0, :, 1:])) and np.all(np.isfinite(st["lse"][0, :, 0]))


def test_one_sided_tuple_is_window():
    rng = np.random.default_rng(7)
    q, k, v = randn(rng, 2, 9, 8), randn(rng, 2, 11, 8), randn(rng, 2, 11, 8)
    a = libattn.forward(q, k, v, window=4, causal=True)
    b = libattn.forward(q, k, v, window=(4, 0), causal=True)
    assert np.array_equal(a, b)
    # a right bound of 1 is the causal mask
    c = libattn.forward(q, k, v, window=(4, 1))
    assert np.array_equal(a, c)


def test_sink_lowers_the_weights():
    rng = np.random.default_rng(3)
    q, k = randn(rng, 3, 8), randn(rng, 6, 8)
    w = libattn.weights(q, k, sinks=[1.0])
    ref = reference(q, k, sinks=[[1.0]])
    assert_close(w, ref["weights"].reshape(3, 6), ref["weight_tol"].reshape(3, 6), "weights")
    assert np.all(w.sum(axis=-1) < 1.0)


def test_alibi_slopes_helper():
    assert libattn.alibi_slopes(8) == [2.0 ** -(i + 1) for i in range(8)]
    s12 = libattn.alibi_slopes(12)
    assert len(s12) == 12 and s12[:8] == libattn.alibi_slopes(8)
    assert s12[8:] == libattn.alibi_slopes(16)[0::2][:4]


@pytest.mark.parametrize("kw, exc", [
    ({"window": (1, 2, 3)}, ValueError),
    ({"window": (-1, 0)}, ValueError),
    ({"window": (1, 2.5)}, TypeError),
    ({"window": (1, 2 ** 64)}, ValueError),
    ({"sinks": [1.0, 2.0, 3.0]}, ValueError),
    ({"sinks": ["a"] * 4}, TypeError),
    ({"alibi": np.zeros((3, 4), np.float32)}, ValueError),
    ({"alibi": "slopes"}, TypeError),
])
def test_argument_errors(kw, exc):
    q = np.zeros((2, 4, 3, 8), np.float32)
    k = np.zeros((2, 2, 5, 8), np.float32)
    with pytest.raises(exc):
        libattn.forward(q, k, k, **kw)


def test_tree_parents_is_its_dense_mask():
    """A draft tree equals the BOOL mask it stands for (prefix visible, the
    draft keys of each query: itself and its ancestors), bit for bit."""
    g = np.random.default_rng(7)
    B, H, Lq, Lk, D = 2, 2, 5, 12, 16
    q = g.standard_normal((B, H, Lq, D), dtype=np.float32)
    k = g.standard_normal((B, H, Lk, D), dtype=np.float32)
    v = g.standard_normal((B, H, Lk, D), dtype=np.float32)
    parents = np.array([[-1, 0, 0, 1, -1], [-1, 0, 1, 2, 3]])
    mask = np.ones((B, H, Lq, Lk), dtype=bool)
    for b in range(B):
        for i in range(Lq):
            seen, a = set(), i
            while a >= 0:  # i, its parent, its parent's parent, ...
                seen.add(a)
                a = parents[b, a]
            for t in range(Lq):
                mask[b, :, i, Lk - Lq + t] = t in seen
    got = libattn.forward(q, k, v, tree_parents=parents)
    want = libattn.forward(q, k, v, mask=mask)
    assert np.array_equal(got, want)
    # one tree for every sequence: the [Lq] form
    got1 = libattn.forward(q, k, v, tree_parents=parents[1])
    want1 = libattn.forward(q, k, v, tree_parents=np.stack([parents[1]] * B))
    assert np.array_equal(got1, want1)
    with pytest.raises(libattn.AttnError):
        libattn.forward(q, k, v, tree_parents=[[0] * Lq] * B)  # a token its own parent

# SPDX-License-Identifier: MIT
"""merge(), split-KV forward and global positions, against float64."""

import math

import numpy as np
import pytest

import libattn
from conftest import U, Reference, assert_close, ref_visible


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def merge_reference(outs, lses, out_errs=None, lse_errs=None):
    """Exact merge in float64 and tests/tolerance.h's bound ("attn_merge")."""
    o = np.stack([np.asarray(x, np.float64) for x in outs])        # [n, ..., Lq, Dv]
    lse = np.stack([np.asarray(x, np.float64) for x in lses])      # [n, ..., Lq]
    n = o.shape[0]
    e = np.zeros_like(o) if out_errs is None else np.stack(out_errs)
    le = np.zeros_like(lse) if lse_errs is None else np.stack(lse_errs)
    used = lse != -np.inf
    m = np.where(used, lse, -np.inf).max(axis=0)
    any_used = used.any(axis=0)
    safe_m = np.where(any_used, m, 0.0)
    w = np.where(used, np.exp(np.where(used, lse, 0.0) - safe_m), 0.0)
    total = np.where(any_used, w.sum(axis=0), 1.0)
    w = w / total
    lmax = np.where(used, le, 0.0).max(axis=0)
    out = np.where(any_used[..., None], (w[..., None] * np.where(used[..., None], o, 0.0)).sum(0),
                   0.0)
    eps_w = U + (n + 4) * 2.0 ** -52
    gamma = n * U / (1 - n * U)
    rho = np.expm1(le + lmax)
    c = (1 + rho) * (1 + eps_w) * (1 + gamma)
    tiny = np.finfo(np.float32).tiny
    absx = np.where(used[..., None], np.abs(o), 0.0)
    err = (w[..., None] * ((c[..., None] - 1) * absx + c[..., None] * e)).sum(0) \
        + tiny * (n + (absx + e).sum(0))
    L = np.where(any_used, safe_m + np.log(total), -np.inf)
    L_err = lmax * (1 + U) + (U + (n + 4) * 2.0 ** -52) * (
        np.abs(np.where(any_used, L, 0.0)) + lmax + math.log(n) + 1)
    return out, err, L, L_err


@pytest.mark.parametrize("n", [1, 2, 5])
def test_merge_against_float64(rng, n):
    outs = [randn(rng, 2, 3, 7, 16) * 5 for _ in range(n)]
    lses = [(rng.standard_normal((2, 3, 7)) * 30).astype(np.float32) for _ in range(n)]
    lses[0][0, 0, :] = -np.inf          # part 0 sees nothing for these rows
    outs[0][0, 0, :, :] = np.nan        # and is not read there
    for x in lses:
        x[1, 2, 3] = -np.inf            # a row no part sees
    out, lse = libattn.merge(outs, lses)
    want, err, L, L_err = merge_reference(outs, lses)
    assert out.shape == (2, 3, 7, 16) and lse.shape == (2, 3, 7)
    assert_close(out, want, err, "merged out")
    assert_close(lse, L, L_err, "merged lse")
    assert np.all(out[1, 2, 3] == 0.0) and lse[1, 2, 3] == -np.inf
    again, _ = libattn.merge(outs, lses, threads=3)
    assert np.array_equal(again.view(np.uint32), out.view(np.uint32))


def test_merge_poison_and_errors(rng):
    outs = [randn(rng, 4, 8) for _ in range(2)]
    lses = [np.zeros(4, np.float32), np.zeros(4, np.float32)]
    lses[1][1] = np.nan
    lses[1][2] = np.inf
    out, lse = libattn.merge(outs, lses)
    assert np.isnan(out[1]).all() and np.isnan(out[2]).all()
    assert np.isnan(lse[1]) and np.isnan(lse[2]) and np.isfinite(lse[[0, 3]]).all()
    with pytest.raises(ValueError):
        libattn.merge([], [])
    with pytest.raises(ValueError):
        libattn.merge(outs, lses[:1])
    with pytest.raises(ValueError):
        libattn.merge(outs, [np.zeros(3, np.float32)] * 2)
    with pytest.raises(ValueError):
        libattn.merge([outs[0], outs[1][:, :4]], lses)
    with pytest.raises(ValueError):
        libattn.merge(outs, lses, out=outs[0])   # overlaps an input


@pytest.mark.parametrize("hq,hk", [(8, 1), (4, 2)])
def test_split_forward_threads_and_reference(rng, hq, hk):
    lk = 5000
    q, k, v = randn(rng, 1, hq, 1, 32), randn(rng, 1, hk, lk, 32), randn(rng, 1, hk, lk, 32)
    ref = Reference(q, k, v, causal=True)
    results = []
    for threads in (None, 2, 3):
        out, st = libattn.forward(q, k, v, causal=True, stats=True, threads=threads)
        assert_close(out, ref.out, ref.out_tol, "split decode out")
        assert_close(st["lse"], ref.lse, ref.lse_tol, "split decode lse")
        results.append(out)
    for other in results[1:]:
        assert np.array_equal(other.view(np.uint32), results[0].view(np.uint32))
    for splits in (1, 2, 7):
        out = libattn.forward(q, k, v, causal=True, kv_splits=splits)
        assert_close(out, ref.out, ref.out_tol, "kv_splits=%d" % splits)
    with pytest.raises(ValueError):
        libattn.forward(q, k, v, kv_splits=-1)


@pytest.mark.parametrize("causal,window", [(True, 0), (True, 40), (False, 25)])
def test_shards_with_positions_merge_to_the_whole(rng, causal, window):
    hq, hk, lq, lk, d = 4, 2, 48, 160, 16
    q, k, v = randn(rng, 1, hq, lq, d), randn(rng, 1, hk, lk, d), randn(rng, 1, hk, lk, d)
    whole = Reference(q, k, v, causal=causal, window=window)
    # whole-call positions: key j at j, query i at lk - lq + i (bottom-right)
    q0 = lk - lq
    cuts = [0, 37, 100, 101, lk]
    outs, lses, oerr, lerr = [], [], [], []
    for a, b in zip(cuts[:-1], cuts[1:]):
        out, st = libattn.forward(q, k[:, :, a:b], v[:, :, a:b], causal=causal, window=window,
                                  stats=True, q_pos=q0, k_pos=a)
        # the shard's reference: the whole call's visibility, columns a..b
        vis = ref_visible(1, hq, lq, lk, causal=causal, window=window)[..., a:b]
        sref = Reference(q, k[:, :, a:b], v[:, :, a:b], mask=vis)
        assert_close(out, sref.out, sref.out_tol, "shard %d..%d" % (a, b))
        outs.append(out)
        lses.append(st["lse"])
        oerr.append(sref.out_tol)
        lerr.append(np.where(np.isfinite(sref.lse), sref.lse_tol, 0.0))
    merged, lse = libattn.merge(outs, lses)
    shard_refs = [Reference(q, k[:, :, a:b], v[:, :, a:b],
                            mask=ref_visible(1, hq, lq, lk, causal=causal,
                                             window=window)[..., a:b])
                  for a, b in zip(cuts[:-1], cuts[1:])]
    _, bound, _, lbound = merge_reference([r.out for r in shard_refs],
                                          [r.lse for r in shard_refs], oerr, lerr)
    assert_close(merged, whole.out, bound, "sharded + merged vs whole")
    assert_close(lse, whole.lse, lbound, "merged lse vs whole")


def test_merge_half_out(rng):
    # merge into float16 / bfloat16: the float32 merge rounded once, bit for bit
    outs = [randn(rng, 2, 3, 7, 16) * 5 for _ in range(3)]
    lses = [(rng.standard_normal((2, 3, 7)) * 30).astype(np.float32) for _ in range(3)]
    o32, l32 = libattn.merge(outs, lses)
    o16 = np.empty((2, 3, 7, 16), np.float16)
    got, lse = libattn.merge(outs, lses, out=o16)
    assert got is o16 and np.array_equal(lse.view(np.uint32), l32.view(np.uint32))
    assert np.array_equal(o16, o32.astype(np.float16))
    ob = np.empty((2, 3, 7, 16), np.uint16)
    libattn.merge(outs, lses, out=ob, dtype="bf16")
    bits = o32.view(np.uint32).astype(np.uint64)
    assert np.array_equal(ob, ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16))

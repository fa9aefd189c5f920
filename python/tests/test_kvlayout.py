# SPDX-License-Identifier: MIT
"""Packed, left-padded and paged K/V (attn.h 1.1) through the keyword arguments,
against the float64 reference of conftest.py run on each sequence alone."""

import numpy as np
import pytest

import libattn
from conftest import Reference, assert_close

HQ, HK, D, DV = 4, 2, 16, 8


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def compare(o, w, s, st, ref, what):
    assert_close(o, ref.out[0], ref.out_tol[0], what + ": out")
    assert_close(w, ref.weights[0], ref.weight_tol[0], what + ": weights")
    assert_close(s, ref.scores[0], ref.score_err[0], what + ": scores")
    assert_close(st["lse"], ref.lse[0], ref.lse_tol[0], what + ": lse")


@pytest.mark.parametrize("causal", [False, True])
def test_packed_varlen(rng, causal):
    lens_q = [5, 0, 12, 1]
    lens_k = [5, 3, 20, 1]  # the second sequence: keys but no query
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q, k, v = randn(rng, cu_q[-1], HQ, D), randn(rng, cu_k[-1], HK, D), randn(rng, cu_k[-1], HK, DV)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=causal, window=6)
    o, st = libattn.forward(q, k, v, stats=True, **kw)
    w = libattn.weights(q, k, **kw)
    s = libattn.scores(q, k, **kw)
    assert o.shape == (cu_q[-1], HQ, DV) and s.shape == (HQ, cu_q[-1], cu_k[-1])
    assert st["lse"].shape == (HQ, cu_q[-1])
    for b in range(len(lens_q)):
        if lens_q[b] == 0:
            continue
        rq, rk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        ref = Reference(q[rq].transpose(1, 0, 2)[None], k[rk].transpose(1, 0, 2)[None],
                        v[rk].transpose(1, 0, 2)[None], causal=causal, window=6)
        compare(o[rq].transpose(1, 0, 2), w[:, rq, rk], s[:, rq, rk], {"lse": st["lse"][:, rq]},
                ref, "sequence %d" % b)
        # columns of other sequences: untouched (-inf in a fresh score table)
        others = np.ones(cu_k[-1], dtype=bool)
        others[rk] = False
        assert np.all(np.isneginf(s[:, rq][:, :, others]))
        assert np.all(w[:, rq][:, :, others] == 0.0)


def test_left_padded_cache(rng):
    B, LQ, LK = 3, 2, 24
    pad = np.array([0, 7, 24], dtype=np.int32)
    valid = np.array([24, 10, 0], dtype=np.int32)  # full, partial, empty
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, LK, D), randn(rng, B, HK, LK, DV)
    for b in range(B):  # never read: NaN outside the valid keys
        k[b, :, :pad[b]] = v[b, :, :pad[b]] = np.nan
        k[b, :, pad[b] + valid[b]:] = v[b, :, pad[b] + valid[b]:] = np.nan
    kw = dict(kv_offsets=pad, kv_lens=valid, causal=True)
    o, st = libattn.forward(q, k, v, stats=True, **kw)
    w = libattn.weights(q, k, **kw)
    s = libattn.scores(q, k, **kw)
    for b in range(B):
        keys = slice(pad[b], pad[b] + valid[b])
        if valid[b] == 0:
            assert np.all(o[b] == 0.0) and np.all(np.isneginf(st["lse"][b]))
            continue
        ref = Reference(q[b:b + 1], k[b:b + 1, :, keys], v[b:b + 1, :, keys], causal=True)
        compare(o[b], w[b][:, :, keys], s[b][:, :, keys], {"lse": st["lse"][b]}, ref,
                "sequence %d" % b)


def make_pool(rng, lens, block_size, max_blocks, shuffle=True):
    """A vLLM pool [num_blocks, block_size, HK, D] and its table; NaN where unused."""
    need = [-(-n // block_size) for n in lens]
    total = sum(need) + 2
    order = rng.permutation(total) if shuffle else np.arange(total)
    table = np.full((len(lens), max_blocks), -1, dtype=np.int32)  # -1: never read
    k_pool = np.full((total, block_size, HK, D), np.nan, dtype=np.float32)
    v_pool = np.full((total, block_size, HK, DV), np.nan, dtype=np.float32)
    dense_k = randn(rng, len(lens), HK, max_blocks * block_size, D)
    dense_v = randn(rng, len(lens), HK, max_blocks * block_size, DV)
    at = 0
    for b, n in enumerate(lens):
        for page in range(need[b]):
            blk = order[at]
            at += 1
            table[b, page] = blk
            slots = range(page * block_size, min(n, (page + 1) * block_size))
            for j in slots:
                k_pool[blk, j % block_size] = dense_k[b, :, j]
                v_pool[blk, j % block_size] = dense_v[b, :, j]
    return table, k_pool, v_pool, dense_k, dense_v


@pytest.mark.parametrize("block_size", [1, 16, 256])
def test_paged_decode_and_prefill(rng, block_size):
    lens = [0, 37, 300, 1]
    max_blocks = -(-300 // block_size)
    table, k_pool, v_pool, dk, dv = make_pool(rng, lens, block_size, max_blocks)
    for LQ in (1, 3):
        q = randn(rng, len(lens), HQ, LQ, D)
        q_lens = [min(LQ, n) for n in lens]
        kw = dict(block_table=table, kv_lens=lens, q_lens=q_lens, causal=True)
        o, st = libattn.forward(q, k_pool, v_pool, stats=True, **kw)
        w = libattn.weights(q, k_pool, **kw)
        s = libattn.scores(q, k_pool, **kw)
        assert s.shape == (len(lens), HQ, LQ, max_blocks * block_size)
        for b, n in enumerate(lens):
            if n == 0:
                assert np.all(o[b] == 0.0)
                continue
            lq = q_lens[b]
            ref = Reference(q[b:b + 1, :, :lq], dk[b:b + 1, :, :n], dv[b:b + 1, :, :n],
                            causal=True)
            compare(o[b, :, :lq], w[b, :, :lq, :n], s[b, :, :lq, :n],
                    {"lse": st["lse"][b, :, :lq]}, ref, "bs %d, sequence %d" % (block_size, b))


def test_paged_with_packed_queries(rng):
    """FlashAttention's varlen + paged KV: packed queries, lengths per sequence."""
    lens_k, lens_q = [40, 17], [4, 17]
    table, k_pool, v_pool, dk, dv = make_pool(rng, lens_k, 16, 3)
    cu_q = np.array([0, 4, 21], dtype=np.int32)
    q = randn(rng, 21, HQ, D)
    o = libattn.forward(q, k_pool, v_pool, cu_seqlens_q=cu_q, block_table=table,
                        kv_lens=lens_k, causal=True)
    for b in range(2):
        rq = slice(cu_q[b], cu_q[b + 1])
        ref = Reference(q[rq].transpose(1, 0, 2)[None], dk[b:b + 1, :, :lens_k[b]],
                        dv[b:b + 1, :, :lens_k[b]], causal=True)
        assert_close(o[rq].transpose(1, 0, 2), ref.out[0], ref.out_tol[0], "out %d" % b)


def test_errors(rng):
    table, k_pool, v_pool, _, _ = make_pool(rng, [20], 16, 2)
    q = randn(rng, 1, HQ, 1, D)
    bad = table.copy()
    bad[0, 1] = k_pool.shape[0]  # outside the pool, and a key there is seen
    with pytest.raises(libattn.AttnError) as err:
        libattn.forward(q, k_pool, v_pool, block_table=bad, kv_lens=[20])
    assert err.value.status == libattn.Status.ERR_ARG
    with pytest.raises(ValueError, match="nondecreasing"):
        libattn.forward(randn(rng, 4, HQ, D), randn(rng, 4, HK, D), randn(rng, 4, HK, DV),
                        cu_seqlens_q=[0, 3, 2], cu_seqlens_k=[0, 2, 4])
    with pytest.raises(ValueError, match="2 sequences, but the batch has 1"):
        libattn.forward(randn(rng, 4, HQ, D), randn(rng, 4, HK, D), randn(rng, 4, HK, DV),
                        cu_seqlens_q=[0, 4], cu_seqlens_k=[0, 2, 4])
    with pytest.raises(libattn.AttnError):  # offset + length past the tensor
        libattn.forward(randn(rng, 1, HQ, 2, D), randn(rng, 1, HK, 8, D),
                        randn(rng, 1, HK, 8, DV), kv_offsets=[5], kv_lens=[4])


def test_mask_apply_offsets(rng):
    s = randn(rng, 2, HQ, 3, 10)
    before = s.copy()
    libattn.mask_apply(s, q_offsets=[0, 1], q_lens=[3, 2], kv_offsets=[2, 0], kv_lens=[5, 10],
                       causal=True)
    # sequence 0: columns 2..6 only; the others keep their values
    assert np.array_equal(s[0][:, :, :2], before[0][:, :, :2])
    assert np.array_equal(s[0][:, :, 7:], before[0][:, :, 7:])
    # sequence 1: row 0 is outside it (rows 1, 2 are its queries 0, 1)
    assert np.array_equal(s[1][:, 0], before[1][:, 0])
    vis = np.arange(10)[None, :] <= np.arange(2)[:, None] + 8
    assert np.array_equal(np.isneginf(s[1][:, 1:]), np.broadcast_to(~vis, (HQ, 2, 10)))


def test_packed_half_out(rng):
    # a float16 out with cu_seqlens: every sequence's rows are the float32
    # result rounded (RNE), the rows no sequence owns keep what they held
    lens_q, lens_k = [3, 0, 5], [4, 2, 7]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q, k, v = randn(rng, cu_q[-1], HQ, D), randn(rng, cu_k[-1], HK, D), randn(rng, cu_k[-1], HK, DV)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
    o32 = libattn.forward(q, k, v, **kw)
    o16 = np.zeros((cu_q[-1], HQ, DV), np.float16)
    assert libattn.forward(q, k, v, out=o16, **kw) is o16
    assert np.array_equal(o16, o32.astype(np.float16))


@pytest.mark.parametrize("kv_splits", [0, 1, 3])
def test_shared_prefix(rng, kv_splits):
    """attn.h 1.4: sequences 1 and 2 share 1500 keys with the one before
    them (a group of three, attended once), sequence 3 starts a group of its
    own; the shared keys of their own storage are NaN and never read."""
    lens = [1600, 1700, 1550, 40]
    shared = [0, 1500, 1500, 0]
    B, LQ, LK = len(lens), 2, max(lens)
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, LK, D), randn(rng, B, HK, LK, DV)
    dk, dv = k.copy(), v.copy()
    for b in range(1, B):
        k[b, :, :shared[b]] = v[b, :, :shared[b]] = np.nan
        dk[b, :, :shared[b]], dv[b, :, :shared[b]] = dk[b - 1, :, :shared[b]], dv[b - 1, :, :shared[b]]
    kw = dict(kv_lens=lens, causal=True, shared_prefix=shared, kv_splits=kv_splits)
    o, st = libattn.forward(q, k, v, stats=True, **kw)
    w = libattn.weights(q, k, kv_lens=lens, causal=True, shared_prefix=shared)
    for b, n in enumerate(lens):
        ref = Reference(q[b:b + 1], dk[b:b + 1, :, :n], dv[b:b + 1, :, :n], causal=True)
        assert_close(o[b], ref.out[0], ref.out_tol[0], "out %d" % b)
        assert_close(st["lse"][b], ref.lse[0], ref.lse_tol[0], "lse %d" % b)
        assert_close(w[b, :, :, :n], ref.weights[0], ref.weight_tol[0], "weights %d" % b)
    with pytest.raises(libattn.AttnError):  # sequence 0 has no sequence before it
        libattn.forward(q, k, v, kv_lens=lens, shared_prefix=[1, 0, 0, 0])


def test_kv_splits_with_layouts(rng):
    """kv_splits reaches the C call with every layout keyword (it was
    dropped there): refused past ATTN_MAX_KV_SPLITS, and a forced split of
    a paged decode agrees with the unsplit call."""
    lens = [1500, 700]
    table, k_pool, v_pool, dk, dv = make_pool(rng, lens, 16, -(-1500 // 16))
    q = randn(rng, 2, HQ, 1, D)
    kw = dict(block_table=table, kv_lens=lens)
    with pytest.raises(ValueError, match="kv_splits"):
        libattn.forward(q, k_pool, v_pool, kv_splits=5000, **kw)
    whole = libattn.forward(q, k_pool, v_pool, kv_splits=1, **kw)
    split = libattn.forward(q, k_pool, v_pool, kv_splits=4, **kw)
    # the split ran: its merge rounds differently (the inputs are this
    # test's own seeded draw, so this holds or fails every time alike)
    assert not np.array_equal(whole, split)
    for b, n in enumerate(lens):
        ref = Reference(q[b:b + 1], dk[b:b + 1, :, :n], dv[b:b + 1, :, :n])
        assert_close(split[b], ref.out[0], ref.out_tol[0], "split, sequence %d" % b)
        assert_close(whole[b], ref.out[0], ref.out_tol[0], "whole, sequence %d" % b)
    cu = np.array([0, 40, 100], dtype=np.int32)
    qp, kp, vp = randn(rng, 100, HQ, D), randn(rng, 100, HK, D), randn(rng, 100, HK, DV)
    with pytest.raises(ValueError, match="kv_splits"):
        libattn.forward(qp, kp, vp, cu_seqlens_q=cu, cu_seqlens_k=cu, kv_splits=5000)

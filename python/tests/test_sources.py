# SPDX-License-Identifier: MIT
"""forward_sources (attn_forward_sources, attn.h 1.13): two K/V sources, one softmax.

The reference is float64 attention on one cache holding both sources' keys,
the first source's then the second's, with each query row's visible keys
written out as a mask: the first source's rules (causal, window, q_lens,
kv_lens) on its keys, and of the second's exactly those its list names
(entries below kv2_lens[b]; -1 and repeats allowed), for the rows below
q_lens[b]. conftest's Reference computes that call and its bounds, the
same as forward()'s against NumPy (test_ops.py). Quantized second caches
are decoded here from their formats' descriptions.
"""

import ctypes
import inspect
import os
import re

import numpy as np
import pytest

import libattn
from conftest import Reference, assert_close, bf16_bits, bf16_value, ref_visible
from libattn import _capi, _keywords, _options

HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = pytest.mark.skipif(
    not _capi.has("attn_forward_sources"),
    reason="the loaded libattn has no attn_forward_sources (1.13)")

# Lk1 keys in the first source, Lk2 rows in the second, T entries per list
B, HQ, HK, LQ, L1, L2, D, DV, T = 3, 4, 2, 5, 9, 13, 32, 8, 6


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def make_lists(rng, lens2, q_len=LQ, t=T):
    """int32 [B, Lq, t]: entries of [0, lens2[b]), about one in five -1, a
    repeat in every row, and one row of sequence 0 that lists nothing."""
    out = np.empty((len(lens2), q_len, t), np.int32)
    for b, n in enumerate(lens2):
        out[b] = rng.integers(0, n, size=(q_len, t))
        out[b][rng.random((q_len, t)) < 0.2] = -1
    out[:, :, 1] = out[:, :, 0]  # a list is a set: repeats count once
    out[0, 1] = -1
    return out


def visible(lists, *, l1=L1, l2=L2, causal=False, window=0, q_lens=None, kv_lens=None,
            heads=HQ):
    """bool [B, Hq, Lq, Lk1 + Lk2]: the first source's keys as forward() sees
    them, then the second's its lists name (rows past q_lens see nothing)."""
    batch, q_len, _ = lists.shape
    first = ref_visible(batch, heads, q_len, l1, causal=causal, window=window, q_lens=q_lens,
                        kv_lens=kv_lens)
    second = np.zeros((batch, heads, q_len, l2), bool)
    for b in range(batch):
        rows = q_len if q_lens is None else int(np.broadcast_to(q_lens, (batch,))[b])
        for i in range(rows):
            for j in lists[b, i]:
                if j >= 0:
                    second[b, :, i, j] = True
    return np.concatenate([first, second], axis=-1)


def reference(q, k, v, k2, v2, lists, **kw):
    """Reference on the cache of both sources' keys (float64 values)."""
    scale, softcap = kw.pop("scale", 0.0), kw.pop("softcap", 0.0)
    vis = visible(lists, l1=k.shape[2], l2=k2.shape[2], heads=q.shape[1], **kw)
    return Reference(q, np.concatenate([k, k2], axis=2), np.concatenate([v, v2], axis=2),
                     mask=vis, scale=scale, softcap=softcap)


def check(out, st, ref, what):
    assert_close(out, ref.out, ref.out_tol, what)
    assert_close(st["lse"], ref.lse, ref.lse_tol, what + " lse")
    assert_close(st["max_score"], ref.max_score, ref.row_err, what + " max_score")
    assert_close(st["entropy"], ref.entropy, ref.entropy_tol, what + " entropy")


def encode(x, dt):
    """(array as the call takes it, its float64 values)."""
    if dt == "f16":
        return x.astype(np.float16), x.astype(np.float16).astype(np.float64)
    if dt == "bf16":
        bits = bf16_bits(x)
        return bits, bf16_value(bits)
    return x, x.astype(np.float64)


LENS2 = [13, 5, 9]
CASES = {
    "plain": {},
    # sequence 2's first source is empty: its rows see the second's keys alone
    "causal_lens": {"causal": True, "kv_lens": [9, 4, 0]},
    "window_q_lens": {"causal": True, "window": 3, "q_lens": [5, 2, 0], "kv_lens": [7, 9, 3]},
    "scale_softcap": {"causal": True, "scale": 0.3, "softcap": 5.0, "kv_lens": [9, 6, 8]},
}
# (first cache, second cache): each may be float32, float16 or bfloat16
PAIRS = [("f32", "f32"), ("f32", "f16"), ("f32", "bf16"), ("f16", "f32"), ("bf16", "f16")]


@pytest.mark.parametrize("pair", PAIRS, ids=["%s-%s" % p for p in PAIRS])
@pytest.mark.parametrize("case", sorted(CASES))
def test_against_float64(rng, case, pair):
    q = randn(rng, B, HQ, LQ, D)
    (k, kd), (v, vd) = encode(randn(rng, B, HK, L1, D), pair[0]), \
        encode(randn(rng, B, HK, L1, DV), pair[0])
    (k2, k2d), (v2, v2d) = encode(randn(rng, B, HK, L2, D), pair[1]), \
        encode(randn(rng, B, HK, L2, DV), pair[1])
    lists = make_lists(rng, LENS2)
    kw = dict(CASES[case])
    dtype = "bf16" if "bf16" in pair else None
    out, st = libattn.forward_sources(q, k, v, k2, v2, lists, kv2_lens=LENS2, stats=True,
                                      dtype=dtype, **kw)
    assert out.dtype == np.float32 and out.shape == (B, HQ, LQ, DV)
    ref = reference(q, kd, vd, k2d, v2d, lists, **kw)
    check(out, st, ref, "%s %s/%s" % (case, *pair))
    dead = ref.masked_rows
    if "q_lens" in kw:
        assert dead.any(), "this case is meant to have fully masked rows"
    assert np.all(out[dead] == 0.0) and np.all(np.isneginf(st["lse"][dead]))


def decode_q8_0(raw):
    """ggml's block_q8_0: per 32 values a float16 scale d, then 32 int8 q; q * d."""
    blocks = raw.reshape(raw.shape[:-1] + (-1, 34))
    d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
    q = blocks[..., 2:].view(np.int8).astype(np.float64)
    return (q * d[..., None]).reshape(raw.shape[:-1] + (-1,))


def decode_u8(raw, group):
    """OpenVINO's u8 records of `group` values: float32 scale s, float32 zero
    point zp, a byte per code; fl32(fl32(code - zp) * s)."""
    recs = raw.reshape(raw.shape[:-1] + (-1, 8 + group))
    s = recs[..., 0:4].copy().view(np.float32)[..., 0]
    zp = recs[..., 4:8].copy().view(np.float32)[..., 0]
    diff = (recs[..., 8:].astype(np.float32) - zp[..., None]).astype(np.float32)
    return (diff * s[..., None]).astype(np.float32).astype(np.float64).reshape(
        raw.shape[:-1] + (-1,))


def e4m3(raw):
    """OCP E4M3 bytes as float64 (no NaN among quantize()'s outputs)."""
    e, m = (raw >> 3) & 15, raw & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e.astype(np.float64) - 7))
    return np.where(raw & 0x80, -mag, mag)


@pytest.mark.parametrize("kv2_dtype", ["q8_0", "u8", "fp8"])
def test_quantized_second_source(rng, kv2_dtype):
    """A quantized second cache beside a float32 first: kv2_dtype with its
    record groups (u8: k2_scale_group / v2_scale_group) or its row scales
    (fp8: k2_scales / v2_scales, powers of two, which move no rounding)."""
    dv = D  # q8_0 rows are whole blocks of 32
    q = randn(rng, B, HQ, LQ, D)
    k, v = randn(rng, B, HK, L1, D), randn(rng, B, HK, L1, dv)
    kx, vx = randn(rng, B, HK, L2, D), randn(rng, B, HK, L2, dv)
    extra = {}
    if kv2_dtype == "q8_0":
        k2, v2 = libattn.quantize(kx, "q8_0"), libattn.quantize(vx, "q8_0")
        k2d, v2d = decode_q8_0(k2), decode_q8_0(v2)
    elif kv2_dtype == "u8":
        k2, v2 = libattn.quantize(kx, "u8", group=16), libattn.quantize(vx, "u8", group=8)
        k2d, v2d = decode_u8(k2, 16), decode_u8(v2, 8)
        extra = {"k2_scale_group": 16, "v2_scale_group": 8}
    else:
        ks = np.exp2(rng.integers(-3, 3, (B, HK, L2))).astype(np.float32)
        vs = np.exp2(rng.integers(-3, 3, (B, HK, L2))).astype(np.float32)
        k2 = libattn.quantize(kx / ks[..., None], "fp8")
        v2 = libattn.quantize(vx / vs[..., None], "fp8")
        k2d, v2d = e4m3(k2) * ks[..., None], e4m3(v2) * vs[..., None]
        extra = {"k2_scales": ks, "v2_scales": vs}
    lists = make_lists(rng, LENS2)
    kw = {"causal": True, "kv_lens": [9, 4, 7]}
    out, st = libattn.forward_sources(q, k, v, k2, v2, lists, kv2_dtype=kv2_dtype,
                                      kv2_lens=LENS2, stats=True, **extra, **kw)
    ref = reference(q, k, v, k2d, v2d, lists, **kw)
    check(out, st, ref, kv2_dtype)


def test_gqa_and_mqa(rng):
    q = randn(rng, 1, 6, 4, 16)
    for kv_heads in (1, 2, 3, 6):
        k, v = randn(rng, 1, kv_heads, 7, 16), randn(rng, 1, kv_heads, 7, 16)
        k2, v2 = randn(rng, 1, kv_heads, 10, 16), randn(rng, 1, kv_heads, 10, 16)
        lists = make_lists(rng, [10], q_len=4, t=3)
        out, st = libattn.forward_sources(q, k, v, k2, v2, lists, causal=True, stats=True)
        check(out, st, reference(q, k, v, k2, v2, lists, causal=True), "Hkv %d" % kv_heads)


def test_one_table_for_every_sequence(rng):
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, L1, D), randn(rng, B, HK, L1, DV)
    k2, v2 = randn(rng, B, HK, L2, D), randn(rng, B, HK, L2, DV)
    shared = make_lists(rng, [L2])[0]
    both = np.stack([shared] * B)
    got = libattn.forward_sources(q, k, v, k2, v2, shared, causal=True)
    want = libattn.forward_sources(q, k, v, k2, v2, both, causal=True)
    assert np.array_equal(got, want)
    # nested lists too
    assert np.array_equal(libattn.forward_sources(q, k, v, k2, v2, shared.tolist(), causal=True),
                          want)


def test_a_pool_every_sequence_reads(rng):
    """k2, v2 of batch 1 (here a paged pool [num_blocks, block_size, Hkv, D]
    viewed as [1, Hkv, slots, D], no copy) are one cache of every sequence,
    the lists naming its slots: the same bits as that cache copied per
    sequence."""
    nb, bs = 4, 4
    pool_k, pool_v = randn(rng, nb, bs, HK, D), randn(rng, nb, bs, HK, DV)
    k2 = pool_k.reshape(1, nb * bs, HK, D).transpose(0, 2, 1, 3)
    v2 = pool_v.reshape(1, nb * bs, HK, DV).transpose(0, 2, 1, 3)
    assert np.shares_memory(k2, pool_k)
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, L1, D), randn(rng, B, HK, L1, DV)
    lists = make_lists(rng, [nb * bs] * B)
    out, st = libattn.forward_sources(q, k, v, k2, v2, lists, causal=True, stats=True)
    copies = libattn.forward_sources(q, k, v, np.repeat(k2, B, axis=0), np.repeat(v2, B, axis=0),
                                     lists, causal=True)
    assert np.array_equal(out, copies)
    ref = reference(q, k, v, np.repeat(k2, B, axis=0), np.repeat(v2, B, axis=0), lists,
                    causal=True)
    check(out, st, ref, "pool")


def test_paged_first_source(rng):
    """The first source in a layout (block_table, kv_lens): the second is
    left as it is."""
    nb, bs, mb = 7, 4, 3
    pool_k, pool_v = randn(rng, nb, bs, HK, D), randn(rng, nb, bs, HK, DV)
    table = np.array([[3, 0, 5], [1, 6, 2], [4, 2, 0]], np.int32)
    lens = [12, 5, 9]
    dense_k = pool_k[table].reshape(B, mb * bs, HK, D).transpose(0, 2, 1, 3)
    dense_v = pool_v[table].reshape(B, mb * bs, HK, DV).transpose(0, 2, 1, 3)
    q = randn(rng, B, HQ, LQ, D)
    k2, v2 = randn(rng, B, HK, L2, D), randn(rng, B, HK, L2, DV)
    lists = make_lists(rng, LENS2)
    out, st = libattn.forward_sources(q, pool_k, pool_v, k2, v2, lists, block_table=table,
                                      kv_lens=lens, kv2_lens=LENS2, causal=True, stats=True)
    ref = reference(q, dense_k, dense_v, k2, v2, lists, causal=True, kv_lens=lens)
    check(out, st, ref, "paged")


def test_packed_queries(rng):
    """cu_seqlens_q / _k: packed q and first source; the lists [B, Tq, T]
    are read at each sequence's packed rows (attn.h: entry of row
    q_offsets[b] + i), and rows outside a sequence are not its rows."""
    cu_q, cu_k = [0, 2, 5], [0, 4, 11]
    tq, tk = cu_q[-1], cu_k[-1]
    q, k, v = randn(rng, tq, HQ, D), randn(rng, tk, HK, D), randn(rng, tk, HK, DV)
    k2, v2 = randn(rng, 2, HK, L2, D), randn(rng, 2, HK, L2, DV)
    lists = make_lists(rng, [L2, L2], q_len=tq)
    out, st = libattn.forward_sources(q, k, v, k2, v2, lists, cu_seqlens_q=cu_q,
                                      cu_seqlens_k=cu_k, causal=True, stats=True)
    assert out.shape == (tq, HQ, DV) and st["lse"].shape == (HQ, tq)
    for b in range(2):
        rows, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        qb = q[rows].transpose(1, 0, 2)[None]
        kb, vb = k[keys].transpose(1, 0, 2)[None], v[keys].transpose(1, 0, 2)[None]
        ref = reference(qb, kb, vb, k2[b:b + 1], v2[b:b + 1], lists[b:b + 1, rows], causal=True)
        got = out[rows].transpose(1, 0, 2)[None]
        stats = {name: a[:, rows][None] for name, a in st.items()}
        check(got, stats, ref, "sequence %d" % b)


def test_threads_and_splits_give_the_same_bits(rng):
    q, k, v = randn(rng, 2, 8, 40, D), randn(rng, 2, 2, 90, D), randn(rng, 2, 2, 90, DV)
    k2, v2 = randn(rng, 2, 2, 70, D), randn(rng, 2, 2, 70, DV)
    lists = make_lists(rng, [70, 70], q_len=40, t=24)
    kw = dict(causal=True, window=32, kv_lens=[90, 61], stats=True)
    base, st = libattn.forward_sources(q, k, v, k2, v2, lists, **kw)
    for extra in ({"threads": 3}, {"threads": 0}, {"kv_splits": 1}):
        out, st2 = libattn.forward_sources(q, k, v, k2, v2, lists, **extra, **kw)
        assert np.array_equal(out.view(np.uint32), base.view(np.uint32)), extra
        for name in st:
            assert np.array_equal(st2[name].view(np.uint32), st[name].view(np.uint32)), name


def test_out_buffers(rng):
    """out= as forward()'s: float32 written in place, float16 / bfloat16 the
    float32 result rounded once; stats stay float32."""
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, L1, D), randn(rng, B, HK, L1, DV)
    k2, v2 = randn(rng, B, HK, L2, D), randn(rng, B, HK, L2, DV)
    lists = make_lists(rng, LENS2)
    kw = dict(causal=True, kv_lens=[9, 4, 0], kv2_lens=LENS2)
    o32, st32 = libattn.forward_sources(q, k, v, k2, v2, lists, stats=True, **kw)
    buf = np.full((B, HQ, LQ, DV), np.nan, np.float32)
    got = libattn.forward_sources(q, k, v, k2, v2, lists, out=buf, **kw)
    assert got is buf and np.array_equal(buf, o32)
    o16 = np.full((B, HQ, LQ, DV), np.nan, np.float16)
    got, st = libattn.forward_sources(q, k, v, k2, v2, lists, out=o16, stats=True, **kw)
    assert got is o16
    assert np.array_equal(o16.view(np.uint16), o32.astype(np.float16).view(np.uint16))
    for name in st32:
        assert np.array_equal(st[name].view(np.uint32), st32[name].view(np.uint32)), name
    ob = np.zeros((B, HQ, LQ, DV), np.uint16)  # bfloat16 bits: dtype='bf16'
    libattn.forward_sources(q, k, v, k2, v2, lists, out=ob, dtype="bf16", **kw)
    assert np.array_equal(ob, bf16_bits(o32))
    # a Tensor q: Tensor results, without NumPy on the call's side
    t = libattn.Tensor(q.tobytes(), q.shape, dtype="f32")
    res = libattn.forward_sources(t, k, v, k2, v2, lists, **kw)
    assert isinstance(res, libattn.Tensor) and np.array_equal(res.numpy(), o32)


def test_empty_problems(rng):
    k, v = randn(rng, B, HK, L1, D), randn(rng, B, HK, L1, DV)
    k2, v2 = randn(rng, B, HK, L2, D), randn(rng, B, HK, L2, DV)
    # no query row: an empty result, no library call (as forward())
    out, st = libattn.forward_sources(randn(rng, B, HQ, 0, D), k, v, k2, v2,
                                      np.zeros((B, 0, T), np.int32), stats=True)
    assert out.shape == (B, HQ, 0, DV) and st["lse"].shape == (B, HQ, 0)
    # a first source without keys: the rows see the second's listed keys alone
    q = randn(rng, B, HQ, LQ, D)
    lists = make_lists(rng, LENS2)
    out, st = libattn.forward_sources(q, k[:, :, :0], v[:, :, :0], k2, v2, lists,
                                      kv2_lens=LENS2, causal=True, stats=True)
    ref = reference(q, k[:, :, :0], v[:, :, :0], k2, v2, lists, causal=True)
    check(out, st, ref, "no first keys")


# ------------------------------------------------------------------ refusals

def _refusal_problem(rng):
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, L1, D), randn(rng, B, HK, L1, DV)
    k2, v2 = randn(rng, B, HK, L2, D), randn(rng, B, HK, L2, DV)
    return q, k, v, k2, v2, make_lists(rng, LENS2)


def _untouched(buf):
    return np.isnan(buf).all()


@pytest.mark.parametrize("bad", ["past_kv2_lens", "past_lk2", "below_minus_one"])
def test_bad_entries_raise_before_writing(rng, bad):
    q, k, v, k2, v2, lists = _refusal_problem(rng)
    b, i, t = 1, 2, 3
    lists[b, i, t] = {"past_kv2_lens": LENS2[b], "past_lk2": L2, "below_minus_one": -2}[bad]
    out = np.full((B, HQ, LQ, DV), np.nan, np.float32)
    with pytest.raises(libattn.AttnError) as err:
        libattn.forward_sources(q, k, v, k2, v2, lists, kv2_lens=LENS2, causal=True, out=out)
    e = err.value
    assert e.status == libattn.Status.ERR_ARG and e.function == "attn_forward_sources"
    if e.detail:  # libattn's own line names the source at fault
        assert str(e).startswith(e.detail) and "second source" in e.detail, str(e)
    assert _untouched(out), "an output was written before the refusal"


def test_kv_splits(rng):
    """Split into chunks of the second source's keys (the binding sizes the
    workspace with attn_forward_sources_workspace_size): within the float64
    bound, the same bits on every thread count."""
    l2 = 700  # chunks of 256 keys: up to three
    q = randn(rng, B, HQ, LQ, D)
    k, v = randn(rng, B, HK, L1, D), randn(rng, B, HK, L1, DV)
    k2, v2 = randn(rng, B, HK, l2, D), randn(rng, B, HK, l2, DV)
    lists = make_lists(rng, [l2] * B, t=64)
    ref = reference(q, k, v, k2, v2, lists, causal=True)
    for splits in (2, 3):
        got = [libattn.forward_sources(q, k, v, k2, v2, lists, causal=True, kv_splits=splits,
                                       threads=threads, stats=True) for threads in (None, 3)]
        check(got[0][0], got[0][1], ref, "kv_splits %d" % splits)
        assert np.array_equal(got[0][0], got[1][0])
        assert np.array_equal(got[0][1]["lse"], got[1][1]["lse"])


def test_an_empty_second_source_is_refused(rng):
    q, k, v, k2, v2, lists = _refusal_problem(rng)
    lists[:] = -1
    with pytest.raises(libattn.AttnError) as err:
        libattn.forward_sources(q, k, v, k2[:, :, :0], v2[:, :, :0], lists)
    assert err.value.status == libattn.Status.ERR_ARG


def test_argument_errors_name_the_argument(rng):
    q, k, v, k2, v2, lists = _refusal_problem(rng)
    out = np.full((B, HQ, LQ, DV), np.nan, np.float32)
    cases = [
        (ValueError, r"^indices: ", dict(indices=lists[:, :2])),
        (ValueError, r"^indices: ", dict(indices=lists[..., :0])),
        (ValueError, r"^k2: 1 heads", dict(k2=k2[:, :1], v2=v2[:, :1])),
        (ValueError, r"^k2: head_dim", dict(k2=k2[..., :16])),
        (ValueError, r"^v2: ", dict(v2=v2[:, :, :5])),
        (ValueError, r"^v2: ", dict(v2=v2[..., :4])),
        (ValueError, r"^k2: batch 2", dict(k2=k2[:2], v2=v2[:2])),
        (ValueError, r"^kv2_lens\[0\] = 14", dict(kv2_lens=[14, 1, 1])),
        (ValueError, r"^kv2_lens: ", dict(kv2_lens=[1, 2])),
        (ValueError, r"^k2_scales/v2_scales: only for kv2_dtype=",
         dict(k2_scales=np.ones((B, HK, L2), np.float32))),
        (ValueError, r"^k2_scale_group/v2_scale_group: ", dict(k2_scale_group=16)),
        (ValueError, r"^kv2_dtype: ", dict(kv2_dtype="q9")),
        (TypeError, r"^k2: an array is required", dict(k2=None)),
        (TypeError, r"unexpected keyword argument 'k3'", dict(k3=k2)),
    ]
    for exc, message, change in cases:
        args = dict(q=q, k=k, v=v, k2=k2, v2=v2, indices=lists, out=out)
        args.update(change)
        with pytest.raises(exc, match=message):
            libattn.forward_sources(**args)
        assert _untouched(out), message
    # an out sharing memory with k2
    mem = np.zeros(k2.size, np.float32)
    shared_k2 = mem.reshape(k2.shape)
    shared_k2[...] = k2
    inside = mem[100:100 + B * HQ * LQ * DV].reshape(B, HQ, LQ, DV)
    with pytest.raises(ValueError, match=r"^out: overlaps k2"):
        libattn.forward_sources(q, k, v, shared_k2, v2, lists, out=inside)
    # k_scale / v_scale scale both sources' caches (attn.h): both must be fp8
    k8, v8 = libattn.quantize(k, "fp8"), libattn.quantize(v, "fp8")
    k28, v28 = libattn.quantize(k2, "fp8"), libattn.quantize(v2, "fp8")
    with pytest.raises(ValueError, match=r"^k_scale/v_scale/k_scales/v_scales: only for kv_dtype"):
        libattn.forward_sources(q, k, v, k28, v28, lists, kv2_dtype="fp8", k_scale=2.0)
    with pytest.raises(ValueError, match=r"^k_scale/v_scale: only for kv2_dtype"):
        libattn.forward_sources(q, k8, v8, k2, v2, lists, kv_dtype="fp8", k_scale=2.0)
    # and reach both: powers of two, so k_scale = 0.5 is the score scale
    # halved and v_scale = 0.5 the output halved, bit for bit
    fp8 = dict(kv_dtype="fp8", kv2_dtype="fp8")
    scaled = libattn.forward_sources(q, k8, v8, k28, v28, lists, scale=0.25, k_scale=0.5,
                                     v_scale=0.5, **fp8)
    plain = libattn.forward_sources(q, k8, v8, k28, v28, lists, scale=0.125, **fp8)
    assert np.array_equal(scaled, plain * np.float32(0.5))


# ------------------------------------------------------------------ the binding's tables

def test_kv_source_is_attn_h_struct():
    """_capi.KvSource has attn_kv_source's fields, in include/attn.h's order
    and C types (the binding sets struct_size to its size)."""
    header = os.path.join(HERE, os.pardir, os.pardir, "include", "attn.h")
    if not os.path.isfile(header):
        pytest.skip("include/attn.h is not beside these tests")
    with open(header, encoding="utf-8") as f:
        text = f.read()
    body = re.search(r"typedef struct attn_kv_source \{(.*?)\} attn_kv_source;", text, re.S)
    fields = re.findall(r"^\s*(?:const\s+)?(\w+)\s*(\*?)\s*(\w+);", body.group(1), re.M)
    c_types = {("uint32_t", ""): ctypes.c_uint32, ("int64_t", ""): ctypes.c_int64,
               ("int32_t", "*"): ctypes.POINTER(ctypes.c_int32),
               ("attn_tensor", "*"): ctypes.POINTER(_capi.Tensor)}
    assert [(name, c_types[(ty, star)]) for ty, star, name in fields] == \
        list(_capi.KvSource._fields_)
    last = _capi.KvSource._fields_[-1][0]
    assert ctypes.sizeof(_capi.KvSource) == getattr(_capi.KvSource, last).offset + 8


def test_signature_is_forwards_and_the_second_sources():
    """forward_sources takes every keyword of forward() (the table's rows,
    defaults and hints) and SOURCE_KEYWORDS, which set attn_options fields
    that attn_kv_source carries under the same names."""
    params = inspect.signature(libattn.forward_sources).parameters
    forward_params = inspect.signature(libattn.forward).parameters
    for name, p in forward_params.items():
        assert name in params and params[name].default == p.default, name
        assert params[name].annotation == p.annotation, name
    option_fields = {row.name for row in _options.ROWS}
    source_fields = {name for name, _ in _capi.KvSource._fields_}
    for k in _keywords.SOURCE_KEYWORDS:
        assert params[k.name].kind == params[k.name].KEYWORD_ONLY
        assert params[k.name].default == k.default and params[k.name].annotation == k.hint
        assert k.hint in _keywords.HINTS, k.name
        assert "\n%s " % k.name in libattn.forward_sources.__doc__, k.name
        assert set(k.fields) <= option_fields & source_fields, (k.name, k.fields)
        assert k.name not in {kw.name for kw in _keywords.KEYWORDS}
    assert list(params)[:6] == ["q", "k", "v", "k2", "v2", "indices"]

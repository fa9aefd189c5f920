# SPDX-License-Identifier: MIT
"""Quantized K/V caches through the binding: libattn.quantize and kv_dtype=.

The decoding below is written from the formats' descriptions (ggml's
block_q8_0 / block_q4_0, OCP E4M3), in NumPy, sharing nothing with the
library; the attention results are then checked with conftest's float64
Reference on the decoded values, i.e. with the same bounds as float32 K/V.
"""

import math

import numpy as np
import pytest

import libattn
from conftest import Reference, assert_close
from libattn import _dtypes

# The quantized K/V dtypes of src/dtype_list.h (libattn/_dtypes.py is its
# table), in its order: a dtype the list gains is tested here by itself, and
# fails where this file lacks its decoder or its constants.
QBLOCK = [r.name for r in _dtypes.ROWS if r.kind == "qblock"]
FP8 = [r.name for r in _dtypes.ROWS if r.kind == "fp8"]
QUANT = [r.name for r in _dtypes.ROWS if r.kind in ("qblock", "fp8")]


def e4m3_values():
    """float64[256]: the value of every E4M3 byte (NaN for S.1111.111)."""
    codes = np.arange(256)
    e, m = (codes >> 3) & 15, codes & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return np.where(codes & 0x80, -mag, mag)


def e5m2_values():
    """float64[256]: the value of every E5M2 byte, from its fields."""
    codes = np.arange(256)
    e, m = (codes >> 2) & 31, codes & 3
    with np.errstate(over="ignore"):
        mag = np.where(e == 0, m * 2.0 ** -16, (1 + m / 4.0) * 2.0 ** (e - 15.0))
    mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
    return np.where(codes & 0x80, -mag, mag)


def decode(raw, dtype):
    """float64 [..., D] from a quantized uint8 cache [..., row_bytes]."""
    raw = np.asarray(raw, dtype=np.uint8)
    if dtype == "fp8":
        return e4m3_values()[raw]
    if dtype == "e5m2":
        return e5m2_values()[raw]
    assert dtype in ("q8_0", "q4_0"), "no decoder here for %r" % dtype
    unit = 34 if dtype == "q8_0" else 18
    blocks = raw.reshape(raw.shape[:-1] + (raw.shape[-1] // unit, unit))
    d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
    if dtype == "q8_0":
        q = blocks[..., 2:].view(np.int8).astype(np.float64)
    else:
        b = blocks[..., 2:].astype(np.int64)
        q = np.concatenate([b & 15, b >> 4], axis=-1).astype(np.float64) - 8.0
    return (q * d[..., None]).reshape(raw.shape[:-1] + (-1,))


def ggml_q8_0(x):
    """ggml's quantize_row_q8_0_ref from its formulas, in float32 NumPy."""
    x = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(x).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    y = (x * inv[:, None]).astype(np.float32)
    q = (np.sign(y) * np.floor(np.abs(y).astype(np.float64) + 0.5)).astype(np.int8)
    out = np.empty((x.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(-1)


@pytest.mark.parametrize("dtype", QUANT)
def test_quantize_shapes_and_roundtrip(rng, dtype):
    x = rng.standard_normal((2, 3, 5, 64)).astype(np.float32)
    raw = libattn.quantize(x, dtype)
    per = {"q8_0": 34 * 2, "q4_0": 18 * 2, "fp8": 64, "e5m2": 64}[dtype]
    assert raw.dtype == np.uint8 and raw.shape == (2, 3, 5, per)
    back = decode(raw, dtype)
    if dtype == "fp8":
        # nearest E4M3: within half a spacing (3 mantissa bits: 2^-4 relative)
        assert np.all(np.abs(back - x) <= np.abs(x) * 2.0 ** -4 + 2.0 ** -10)
    elif dtype == "e5m2":
        # nearest E5M2: 2 mantissa bits (2^-3 relative), subnormal steps 2^-16
        assert np.all(np.abs(back - x) <= np.abs(x) * 2.0 ** -3 + 2.0 ** -17)
        # and the byte is float16's upper half: numpy's float16 agrees on exact values
        exact = (raw.astype(np.uint16) << 8).view(np.float16).astype(np.float64)
        assert np.array_equal(exact, back)
    else:
        # q is rounded with the exact d but decoded with f16(d), |d - f16(d)| <= 2^-11 |d|:
        # q8_0: half a step + 127 * 2^-11 d; q4_0 truncates x/d + 8.5 and clamps 16 to 15,
        # so up to a whole step + 8 * 2^-11 d
        top = 127.0 if dtype == "q8_0" else 8.0
        step = np.abs(x.reshape(-1, 32)).max(axis=1).astype(np.float64) / top
        within = (0.5 if dtype == "q8_0" else 1.0) + top * 2.0 ** -11
        err = np.abs(back - x).reshape(-1, 32).max(axis=1)
        assert np.all(err <= step * within * (1 + 2.0 ** -20))


def test_quantize_q8_0_matches_ggml_rounding(rng):
    x = np.concatenate([rng.standard_normal(32 * 50),
                        0.5 * rng.integers(-254, 255, 32 * 50)]).astype(np.float32)
    assert np.array_equal(libattn.quantize(x.reshape(-1, 32), "q8_0").reshape(-1), ggml_q8_0(x))


def test_quantize_fp8_scale_and_saturation():
    x = np.array([1.0, 448.0, 1000.0, -np.inf, np.nan, 2.0 ** -10, 6.0], dtype=np.float32)
    raw = libattn.quantize(x, "fp8")
    assert raw[:4].tolist() == [0x38, 0x7E, 0x7E, 0xFE]
    assert raw[4] & 0x7F == 0x7F and raw[5] == 0x00
    assert libattn.quantize(np.float32([6.0]), "fp8", scale=2.0).tolist() == [0x44]


def test_quantize_e5m2_scale_and_saturation():
    x = np.array([1.0, 57344.0, 1e6, -np.inf, np.nan, 2.0 ** -17, 6.0], dtype=np.float32)
    raw = libattn.quantize(x, "e5m2")
    assert raw[:4].tolist() == [0x3C, 0x7B, 0x7B, 0xFB]
    assert raw[4] & 0x7C == 0x7C and raw[4] & 3 and raw[5] == 0x00
    assert libattn.quantize(np.float32([6.0]), "e5m2", scale=2.0).tolist() == [0x42]


def test_quantize_errors():
    with pytest.raises(ValueError):
        libattn.quantize(np.zeros((2, 33), np.float32), "q8_0")
    with pytest.raises(ValueError):
        libattn.quantize(np.zeros((2, 32), np.float32), "q9")
    with pytest.raises(ValueError):
        libattn.quantize(np.zeros((2, 32), np.float32), "q8_0", scale=2.0)
    with pytest.raises(libattn.AttnError) as err:
        libattn.quantize(np.full((1, 32), np.nan, np.float32), "q4_0")
    assert err.value.status == libattn.Status.ERR_ARG


CASES = {
    "decode_gqa": dict(B=1, HQ=8, HK=2, LQ=1, LK=300, D=128, kw={}),
    "prefill_causal": dict(B=2, HQ=4, HK=4, LQ=70, LK=70, D=64, kw={"causal": True}),
    "window_lens": dict(B=2, HQ=4, HK=1, LQ=9, LK=120, D=96,
                        kw={"causal": True, "window": 33, "kv_lens": [120, 50]}),
}


@pytest.mark.parametrize("dtype", QUANT)
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_on_quantized_cache(rng, dtype, case):
    c = CASES[case]
    q = rng.standard_normal((c["B"], c["HQ"], c["LQ"], c["D"])).astype(np.float32)
    kx = rng.standard_normal((c["B"], c["HK"], c["LK"], c["D"])).astype(np.float32)
    vx = rng.standard_normal((c["B"], c["HK"], c["LK"], c["D"])).astype(np.float32)
    ks = vs = 0.0
    fp8 = dtype in FP8
    if fp8:
        ks, vs = 0.0123, 0.0321  # the cache holds x / scale, in range of E4M3
    k = libattn.quantize(kx, dtype, scale=ks)
    v = libattn.quantize(vx, dtype, scale=vs)
    kd, vd = decode(k, dtype), decode(v, dtype)
    kw = dict(c["kw"])
    scale = 1.0 / math.sqrt(c["D"])
    extra = {}
    if fp8:
        # the library multiplies dot(q, e4m3) by float32(scale * k_scale)
        scale = float(np.float32(np.float32(scale) * np.float32(ks)))
        extra = {"k_scale": ks, "v_scale": vs}
    ref = Reference(q, kd, vd, scale=scale, **kw)
    s = libattn.scores(q, k, kv_dtype=dtype, scale=float(np.float32(1.0 / math.sqrt(c["D"]))),
                       **({"k_scale": ks} if fp8 else {}), **kw)
    assert_close(s, ref.scores, ref.score_err, "scores")
    o = libattn.forward(q, k, v, kv_dtype=dtype, **extra, **kw)
    vscale = vs if fp8 else 1.0
    tol = ref.out_tol * vscale
    if fp8:  # one more rounding: the v_scale multiply of the normalised output
        tol = tol + 2.0 ** -24 * np.abs(ref.out * vscale) + 2.0 ** -150
    assert_close(o, ref.out * vscale, tol, "forward")


def test_blhd_cache_view(rng):
    """A [B,L,H,row_bytes] cache read in place through a transposed view."""
    B, L, H, D = 1, 40, 2, 64
    cache = libattn.quantize(rng.standard_normal((B, L, H, D)).astype(np.float32), "q8_0")
    k = cache.transpose(0, 2, 1, 3)  # [B,H,L,row_bytes], strides in whole blocks
    q = rng.standard_normal((B, 4, 3, D)).astype(np.float32)
    ref = Reference(q, decode(k, "q8_0"), decode(k, "q8_0"))
    o = libattn.forward(q, k, k, kv_dtype="q8_0")
    assert_close(o, ref.out, ref.out_tol, "forward")


def test_quantized_cache_errors(rng):
    q = np.zeros((1, 1, 1, 64), np.float32)
    k = libattn.quantize(np.zeros((1, 1, 4, 64), np.float32), "q8_0")
    with pytest.raises(TypeError):  # not raw bytes
        libattn.forward(q, k.astype(np.float32), k, kv_dtype="q8_0")
    with pytest.raises(ValueError):  # a row that is not whole blocks
        libattn.forward(q, k[..., :50], k[..., :50], kv_dtype="q8_0")
    with pytest.raises(ValueError):  # scales belong to fp8
        libattn.forward(q, k, k, kv_dtype="q8_0", k_scale=2.0)
    with pytest.raises(ValueError):  # head_dim mismatch: 68 bytes = 64 values, q has 32
        libattn.forward(q[..., :32], k, k, kv_dtype="q8_0")


def _i8_score_bound(q, k, scale):
    """attn.h's ATTN_PRECISION_INT8 score bound, per (b, h, i, j): half a
    quantization step of each query value, the f32 sums over the
    dequantized query, and blocks that count as 0 (q [B,H,Lq,D], k decoded
    [B,H,Lk,D], D whole 32-blocks, equal head counts)."""
    B, H, Lq, D = q.shape
    nb = D // 32
    qb = np.abs(q.astype(np.float64)).reshape(B, H, Lq, nb, 32)
    kb = np.abs(k).reshape(B, H, -1, nb, 32)
    dq = (qb.max(axis=-1).astype(np.float32) / np.float32(127.0)).astype(np.float64)
    ksum = kb.sum(axis=-1)  # [B,H,Lk,nb]
    gamma = (D + 3) * 2.0 ** -24 / (1 - (D + 3) * 2.0 ** -24)
    half = np.einsum("bhin,bhjn->bhij", dq / 2 * (1 + 2.0 ** -15), ksum)
    mag = np.einsum("bhinc,bhjnc->bhij", qb + dq[..., None] / 2, kb)
    tiny = 127.0 * 2.0 ** -126 * ksum.sum(axis=-1)[:, :, None, :]
    return abs(scale) * (half + gamma * mag + tiny)


@pytest.mark.parametrize("dtype", QBLOCK)
def test_int8_precision_scores(rng, dtype):
    """precision='int8' reaches the library: its scores are within attn.h's
    int8 bound (plus the f32 bound) of float64, and the mode is refused by
    name when unknown."""
    B, H, L, D = 1, 2, 40, 96
    q = rng.standard_normal((B, H, L, D)).astype(np.float32)
    k = libattn.quantize(rng.standard_normal((B, H, L, D)).astype(np.float32), dtype)
    kd = decode(k, dtype)
    scale = 1.0 / math.sqrt(D)
    ref = Reference(q, kd, kd, scale=scale, causal=True)
    s = libattn.scores(q, k, kv_dtype=dtype, causal=True, precision="int8")
    bound = ref.score_err + np.where(np.isfinite(ref.scores), _i8_score_bound(q, kd, scale), 0.0)
    assert_close(s, ref.scores, bound, "int8 scores")
    with pytest.raises(ValueError, match="precision"):
        libattn.scores(q, k, kv_dtype=dtype, precision="fp4")
    with pytest.raises(ValueError, match="precision"):
        libattn.scores(q, k, kv_dtype=dtype, precision=3)


@pytest.mark.parametrize("dtype", FP8)
def test_row_scales_per_head_are_per_call_scales(rng, dtype):
    """k_scales / v_scales of one value per KV head ([Hkv, 1]) give, head by
    head, the bits of k_scale / v_scale (attn.h 1.6: the score is
    (q . fp8) * fl32(scale * s) either way; a power-of-two v scale moves no
    rounding), and per-token values reach their own rows."""
    B, HQ, HKV, LQ, LK, D = 2, 4, 2, 3, 37, 32
    q = rng.standard_normal((B, HQ, LQ, D)).astype(np.float32)
    k8 = libattn.quantize(rng.standard_normal((B, HKV, LK, D)), dtype)
    v8 = libattn.quantize(rng.standard_normal((B, HKV, LK, D)), dtype)
    ks = np.array([0.013, 0.071], np.float32)
    vs = np.array([0.25, 4.0], np.float32)
    out = libattn.forward(q, k8, v8, kv_dtype=dtype, causal=True, k_scales=ks[:, None],
                          v_scales=vs[:, None])
    g = HQ // HKV
    for h in range(HKV):
        want = libattn.forward(q[:, h * g:(h + 1) * g], k8[:, h:h + 1], v8[:, h:h + 1],
                               kv_dtype=dtype, causal=True, k_scale=float(ks[h]),
                               v_scale=float(vs[h]))
        assert np.array_equal(out[:, h * g:(h + 1) * g], want)
    # per token: doubling one key's k scale doubles its score, nothing else
    per_token = np.ones((B, HKV, LK), np.float32)
    per_token[1, 0, 5] = 2.0
    s1 = libattn.scores(q, k8, kv_dtype=dtype, k_scales=per_token)
    s0 = libattn.scores(q, k8, kv_dtype=dtype, k_scales=np.ones((B, HKV, LK), np.float32))
    changed = s1 != s0
    assert changed[1, :g, :, 5].all()
    changed[1, :g, :, 5] = False
    assert not changed.any()
    assert np.array_equal(s1[1, :g, :, 5], s0[1, :g, :, 5] * 2)


@pytest.mark.parametrize("dtype", FP8)
def test_group_scales(rng, dtype):
    """A 4-D k_scales/v_scales [B, Hkv, Lk, G] is G scales per row over
    D / G channels each (attn.h 1.8): equal groups of a power of two are the
    row's scale (the same real numbers; the grouped rows go through the f32
    kernels, so the sums' order may differ: f32 closeness), and a group's
    scale reaches only its own channels."""
    B, HQ, HKV, LQ, LK, D, G = 2, 4, 2, 3, 37, 32, 4
    q = rng.standard_normal((B, HQ, LQ, D)).astype(np.float32)
    k8 = libattn.quantize(rng.standard_normal((B, HKV, LK, D)), dtype)
    v8 = libattn.quantize(rng.standard_normal((B, HKV, LK, D)), dtype)
    rows = np.exp2(rng.integers(-3, 3, (B, HKV, LK))).astype(np.float32)
    grouped = np.repeat(rows[..., None], G, axis=-1)
    out_rows = libattn.forward(q, k8, v8, kv_dtype=dtype, k_scales=rows, v_scales=rows)
    out_groups = libattn.forward(q, k8, v8, kv_dtype=dtype, k_scales=grouped, v_scales=grouped)
    np.testing.assert_allclose(out_groups, out_rows, rtol=1e-5, atol=1e-6)
    # zero scales on a group: that group's channels of every V row are 0
    vz = grouped.copy()
    vz[..., 1] = 0.0
    out = libattn.forward(q, k8, v8, kv_dtype=dtype, k_scales=grouped, v_scales=vz)
    assert not out[..., 8:16].any() and out[..., :8].any()
    with pytest.raises(ValueError, match="groups"):
        libattn.forward(q, k8, v8, kv_dtype=dtype, k_scales=np.ones((B, HKV, LK, 5), np.float32))


def test_row_scales_errors(rng):
    q = rng.standard_normal((1, 2, 1, 32)).astype(np.float32)
    k = rng.standard_normal((1, 2, 8, 32)).astype(np.float32)
    k8 = libattn.quantize(k, "fp8")
    with pytest.raises(ValueError, match="k_scales"):
        libattn.forward(q, k, k, k_scales=np.ones(8, np.float32))
    with pytest.raises(ValueError, match="broadcast"):
        libattn.forward(q, k8, k8, kv_dtype="fp8", k_scales=np.ones(7, np.float32))
    with pytest.raises(libattn.AttnError, match="k_scale"):
        libattn.forward(q, k8, k8, kv_dtype="fp8", k_scale=2.0, k_scales=np.ones(8, np.float32))


@pytest.mark.parametrize("dtype", FP8)
def test_quantize_rows(rng, dtype):
    """One scale per row: amax / the format's largest finite value (1 for a
    zero row), and each row's bytes those of quantize() with that scale."""
    x = rng.standard_normal((2, 3, 5, 24)).astype(np.float32) * 7
    x[1, 2, 3] = 0.0
    q8, scales = libattn.quantize_rows(x, dtype)
    top = {"fp8": 448.0, "e5m2": 57344.0}[dtype]  # the largest finite value
    assert scales.shape == (2, 3, 5) and scales.dtype == np.float32
    assert scales[1, 2, 3] == 1.0
    want = np.abs(x).max(axis=-1).astype(np.float32) / np.float32(top)
    want[1, 2, 3] = 1.0
    assert np.array_equal(scales, want)
    for idx in np.ndindex(*x.shape[:-1]):
        assert np.array_equal(q8[idx], libattn.quantize(x[idx], dtype, scale=float(scales[idx])))
    # what forward reads: the cache with its scales per token and head
    q = rng.standard_normal((2, 6, 1, 24)).astype(np.float32)
    out = libattn.forward(q, q8, q8, kv_dtype=dtype, k_scales=scales, v_scales=scales)
    assert np.isfinite(out).all()
    with pytest.raises(ValueError, match="non-finite"):
        libattn.quantize_rows(np.array([[np.nan, 1.0]], np.float32), dtype)
    with pytest.raises(ValueError, match="quantize_rows"):
        libattn.quantize_rows(x, "q8_0")


@pytest.mark.parametrize("paged", [False, True])
def test_cache_append_writes_row_scales(rng, paged):
    """cache_append(k_scales=...) writes what quantize_rows() makes of the
    new rows, at their slots; forward then reads them."""
    B, H, L, T, D = 2, 2, 16, 3, 32
    k_new = rng.standard_normal((B, H, T, D)).astype(np.float32) * 5
    kv_lens = [16, 9]
    want_bytes, want_scales = libattn.quantize_rows(k_new, "fp8")
    if paged:
        bs, nb = 4, 10
        table = np.array([[3, 7, 1, 9], [0, 5, 8, 2]], np.int32)
        cache = np.zeros((nb, bs, H, D), np.uint8)
        scales = np.full((nb, bs, H), -1.0, np.float32)
        libattn.cache_append(k_new, cache, kv_lens=kv_lens, block_table=table, kv_dtype="fp8",
                             k_scales=scales)
        for b in range(B):
            for i in range(T):
                j = kv_lens[b] - T + i
                blk, slot = table[b, j // bs], j % bs
                assert np.array_equal(cache[blk, slot, :, :], want_bytes[b, :, i])
                assert np.array_equal(scales[blk, slot, :], want_scales[b, :, i])
        assert (scales == -1).sum() == scales.size - B * T * H
    else:
        cache = np.zeros((B, H, L, D), np.uint8)
        scales = np.full((B, H, L), -1.0, np.float32)
        libattn.cache_append(k_new, cache, kv_lens=kv_lens, kv_dtype="fp8", k_scales=scales)
        for b in range(B):
            j0 = kv_lens[b] - T
            assert np.array_equal(cache[b, :, j0:j0 + T], want_bytes[b])
            assert np.array_equal(scales[b, :, j0:j0 + T], want_scales[b])
        assert (scales == -1).sum() == scales.size - B * T * H
        q = rng.standard_normal((B, 4, 1, D)).astype(np.float32)
        out = libattn.forward(q, cache[:, :, :9], cache[:, :, :9], kv_dtype="fp8",
                              k_scales=scales[:, :, :9], v_scales=scales[:, :, :9],
                              kv_lens=[9, 9])
        assert np.isfinite(out).all()
    k_bad = k_new.copy()
    k_bad[0, 0, 0, 0] = np.inf
    before = cache.copy()
    with pytest.raises(libattn.AttnError, match="non-finite"):
        libattn.cache_append(k_bad, cache, kv_lens=kv_lens, kv_dtype="fp8", k_scales=scales,
                             **({"block_table": table} if paged else {}))
    assert np.array_equal(cache, before)

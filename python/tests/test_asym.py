# SPDX-License-Identifier: MIT
"""OpenVINO's asymmetric K/V caches through the binding: kv_dtype='u8' / 'u4'.

The encoder and the decoder below are written from attn.h's description of
the records (attn_quantize, "Quantized K/V caches"), in NumPy, sharing
nothing with the library: a row of D values is D / g records of an f32
scale s, an f32 zero point zp and g codes (u8: a byte each; u4: two per
byte, value 2i in the high nibble of byte i), value = fl32(fl32(code - zp)
* s). quantize()'s bytes must be the encoder's exactly; the attention
results are checked with conftest's float64 Reference on the decoded values,
i.e. within the float32 bound (attn.h: the call is the F32 call on those
values).

The encoder's fused multiply-add, fl32(x * inv + zp) with one rounding, is
computed exactly: the product of two float32 is exact in float64 (48
significant bits), the sum with zp is a float64 s plus its exact error e
(TwoSum), and s rounded to float32 is the correctly rounded sum unless s is
exactly halfway between two float32 (a float64 can be; then the sign of e
says which side the exact sum lies on, and only e == 0 is a tie to even).
test_fma_f32_is_one_rounding checks that against exact rational arithmetic.
"""

import fractions
import math

import numpy as np
import pytest

import libattn
from conftest import Reference, assert_close
from libattn import _dtypes

# the asym dtypes of src/dtype_list.h, in its order
ASYM = [r.name for r in _dtypes.ROWS if r.kind == "asym"]
BITS = {"u8": 8, "u4": 4}
F32 = np.float32
FLT_MIN = np.finfo(np.float32).tiny


# ------------------------------------------------------------------ reference codec

def fma_f32(a, b, c):
    """fl32(a * b + c) rounded once, to nearest even: a, b, c float32 arrays."""
    a, b, c = (np.asarray(t, dtype=np.float32) for t in (a, b, c))
    p = a.astype(np.float64) * b.astype(np.float64)  # exact: 48 bits
    c64 = c.astype(np.float64)
    s = p + c64
    # TwoSum: s + e == p + c exactly
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    r = s.astype(np.float32)
    with np.errstate(over="ignore"):
        other = np.nextafter(r, np.where(s > r.astype(np.float64), np.float32(np.inf),
                                         np.float32(-np.inf)).astype(np.float32))
        mid = (r.astype(np.float64) + other.astype(np.float64)) / 2
    # s on a float32 midpoint with a nonzero error: the exact sum is past it on e's side
    past = (s == mid) & (e != 0) & ((e > 0) == (other > r))
    return np.where(past, other, r).astype(np.float32)


def _first_extreme(x, arg):
    """The first value equal to the row's least (largest): the C loop keeps
    the first of equal values, which tells -0.0 from 0.0 in zp = -lo / s."""
    idx = arg(x, axis=-1)[..., None]
    return np.take_along_axis(x, idx, axis=-1)[..., 0]


def encode_records(x, bits):
    """float32 [n, g] -> uint8 [n, record bytes], one record per row (attn.h)."""
    x = np.asarray(x, dtype=np.float32)
    top = F32(255 if bits == 8 else 15)
    lo = _first_extreme(x, np.argmin)
    hi = _first_extreme(x, np.argmax)
    s = (hi - lo) / top  # float32 subtraction, then division
    s = np.where(s >= FLT_MIN, s, F32(0.0001)).astype(np.float32)
    zp = (-lo / s).astype(np.float32)
    inv = (F32(1) / s).astype(np.float32)
    c = fma_f32(x, inv[:, None], zp[:, None])
    codes = np.clip(np.rint(c), 0, top).astype(np.uint8)
    if bits == 4:
        codes = (codes[:, 0::2] << 4) | codes[:, 1::2]
    head = np.concatenate([s[:, None], zp[:, None]], axis=1).view(np.uint8)
    return np.concatenate([head, codes], axis=1)


def encode(x, dtype, group=0):
    """float [..., D] -> uint8 [..., row_bytes]: D / g records per row."""
    x = np.asarray(x, dtype=np.float32)
    d = x.shape[-1]
    g = group or d
    recs = encode_records(x.reshape(-1, g), BITS[dtype])
    return recs.reshape(x.shape[:-1] + (d // g * recs.shape[-1],))


def row_bytes(dtype, d, group=0):
    g = group or d
    return d // g * (8 + g * BITS[dtype] // 8)


def decode(raw, dtype, group=0):
    """float64 [..., D] from uint8 [..., row_bytes]: fl32(fl32(code - zp) * s)."""
    raw = np.asarray(raw, dtype=np.uint8)
    per_byte = 8 // BITS[dtype]
    nbytes = raw.shape[-1]
    if group:
        n, rec = nbytes // (8 + group // per_byte), 8 + group // per_byte
    else:
        n, rec = 1, nbytes
    assert n * rec == nbytes
    recs = raw.reshape(raw.shape[:-1] + (n, rec))
    s = recs[..., 0:4].copy().view(np.float32)[..., 0]
    zp = recs[..., 4:8].copy().view(np.float32)[..., 0]
    codes = recs[..., 8:]
    if per_byte == 2:
        codes = np.stack([codes >> 4, codes & 15], axis=-1).reshape(codes.shape[:-1] + (-1,))
    diff = (codes.astype(np.float32) - zp[..., None]).astype(np.float32)
    value = (diff * s[..., None]).astype(np.float32)
    return value.astype(np.float64).reshape(raw.shape[:-1] + (-1,))


# ------------------------------------------------------------------ the codec itself

def test_fma_f32_is_one_rounding(rng):
    """fma_f32 against exact rationals: random operands, and sums whose
    float64 value is a float32 midpoint that the exact sum is not (where
    rounding twice would be wrong), and exact ties."""
    n = 3000
    a = rng.standard_normal(n).astype(np.float32)
    b = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    c = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    # (1 + 2^-23) * -(1 - 2^-23) 2^-24 + (1 + 2^-23) = 1 + 2^-24 + 2^-70: float64 rounds it
    # to the midpoint 1 + 2^-24, whose even neighbour 1 is the wrong answer
    u = 2.0 ** -23
    crafted = [(1 + u, -(1 - u) * 2.0 ** -24, 1 + u), (1 + u, (1 - u) * 2.0 ** -24, 1.0),
               (1.0, 2.0 ** -24, 1.0), (3.0, 2.0 ** -24, 1.0), (1.5, 0.5, 1.25),
               (-(1 + u), (1 - u) * 2.0 ** -24, -(1 + u))]
    a = np.concatenate([a, np.float32([t[0] for t in crafted])])
    b = np.concatenate([b, np.float32([t[1] for t in crafted])])
    c = np.concatenate([c, np.float32([t[2] for t in crafted])])
    got = fma_f32(a, b, c)

    def nearest_f32(q):
        """Round the rational q to float32, nearest even (normal range)."""
        if q == 0:
            return 0.0
        e = math.floor(math.log2(abs(q)))
        while abs(q) >= fractions.Fraction(2) ** (e + 1):
            e += 1
        while abs(q) < fractions.Fraction(2) ** e:
            e -= 1
        ulp = fractions.Fraction(2) ** (max(e, -126) - 23)
        m = q / ulp
        fl = math.floor(m)
        rest = m - fl
        r = fl + (1 if rest > fractions.Fraction(1, 2) or
                  (rest == fractions.Fraction(1, 2) and fl % 2) else 0)
        return float(r * ulp)

    for i in range(a.size):
        exact = fractions.Fraction(float(a[i])) * fractions.Fraction(float(b[i])) + \
            fractions.Fraction(float(c[i]))
        assert float(got[i]) == nearest_f32(exact), (i, a[i], b[i], c[i])
    # the crafted midpoint case: one rounding gives 1 + 2^-23, two would give 1
    assert float(got[n]) == 1 + u


def _rows_for_codec(rng, d):
    """Rows that reach every branch of the rule: random scales and offsets,
    a constant row (range 0: s = 0.0001), a range below 255 * FLT_MIN
    (s < FLT_MIN: 0.0001 too), exact code ties (x * (1/s) + zp halfway between
    integers, rounded to even), -0.0 / 0.0 extremes, a huge range."""
    rows = [rng.standard_normal(d) * 10.0 ** rng.uniform(-3, 3) + rng.uniform(-50, 50)
            for _ in range(40)]
    rows.append(np.full(d, 3.25))
    rows.append(np.zeros(d))
    rows.append(1.0 + np.arange(d) * 2.0 ** -23)  # a range of a few float32 steps
    rows.append(np.linspace(0, 1e-37, d))  # range / 255 < FLT_MIN
    ties = np.resize(np.arange(d) % 15 + 0.5, d)
    ties[0], ties[1] = 0.0, 15.0  # u4: lo 0, hi 15, s 1: x + 0 halfway
    rows.append(ties)
    ties8 = np.resize(np.arange(d) * 2.5 % 255, d)
    ties8[0], ties8[1] = 0.0, 255.0  # u8: s 1
    rows.append(ties8)
    for first, later in ((-0.0, 0.0), (0.0, -0.0)):  # the least value 0 twice, signed
        signed = np.abs(rng.standard_normal(d)) + 0.5
        signed[1], signed[6] = first, later
        rows.append(signed)
    rows.append(rng.uniform(-3e37, 3e37, d))
    return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("dtype", ASYM)
@pytest.mark.parametrize("group", [0, 2, 16, 32, 64])
def test_quantize_is_the_rule_of_attn_h(rng, dtype, group):
    d = 128
    x = _rows_for_codec(rng, d)[None]  # [1, rows, D]
    raw = libattn.quantize(x, dtype, group=group)
    assert raw.dtype == np.uint8 and raw.shape == x.shape[:-1] + (row_bytes(dtype, d, group),)
    want = encode(x, dtype, group)
    bad = np.argwhere(raw != want)
    assert not bad.size, "first byte off at %r: %d, want %d" % (
        tuple(bad[0]), raw[tuple(bad[0])], want[tuple(bad[0])])
    # None is the whole row, like 0; the row's records are one call each
    if group == 0:
        assert np.array_equal(libattn.quantize(x, dtype, group=None), raw)
    # decoded values are within half a step (plus the roundings) of x, where
    # s is not the 0.0001 stand-in of a (near) constant row
    back = decode(raw, dtype, group)
    g = group or d
    xr = x.reshape(-1, g).astype(np.float64)
    step = (xr.max(axis=1) - xr.min(axis=1)) / (255 if dtype == "u8" else 15)
    ok = step >= 1e-30
    err = np.abs(back.reshape(-1, g) - xr).max(axis=1)
    assert np.all(err[ok] <= step[ok] * (0.5 + 1e-5) + np.abs(xr).max(axis=1)[ok] * 2.0 ** -21)


@pytest.mark.parametrize("dtype", ASYM)
def test_quantize_byte_layout(dtype):
    """A record by hand: lo 0, hi = top, so s = 1, zp = -0.0, code = x."""
    top = 255 if dtype == "u8" else 15
    x = np.float32([0, top, 1, 2, 3, 4, 5, 6])
    raw = libattn.quantize(x, dtype)
    assert raw[:4].view(np.float32)[0] == 1.0
    assert raw[4:8].view(np.uint32)[0] == 0x80000000  # -0.0: -lo / s with lo = +0
    if dtype == "u8":
        assert raw[8:].tolist() == [0, 255, 1, 2, 3, 4, 5, 6]
    else:
        assert raw[8:].tolist() == [0x0F, 0x12, 0x34, 0x56]  # value 2i in the high nibble
    # two groups of 4: two records, each with its own s and zp
    two = libattn.quantize(x, dtype, group=4)
    assert two.shape == (2 * (8 + 4 * BITS[dtype] // 8),)
    assert np.array_equal(two, encode(x, dtype, 4))


def test_quantize_errors():
    x = np.zeros((2, 64), np.float32)
    with pytest.raises(ValueError, match="group"):
        libattn.quantize(x, "q8_0", group=32)
    with pytest.raises(ValueError, match="group"):
        libattn.quantize(x, "u8", group=-1)
    with pytest.raises(ValueError, match="D = 64"):  # 48 does not divide 64
        libattn.quantize(x, "u8", group=48)
    with pytest.raises(ValueError, match="even"):
        libattn.quantize(x, "u4", group=7)
    with pytest.raises(ValueError, match="even"):
        libattn.quantize(np.zeros((2, 63), np.float32), "u4")
    with pytest.raises(ValueError, match="scale"):
        libattn.quantize(x, "u8", scale=2.0)
    bad = x.copy()
    bad[1, 40] = np.inf
    with pytest.raises(libattn.AttnError) as err:
        libattn.quantize(bad, "u4", group=32)
    assert err.value.status == libattn.Status.ERR_ARG
    # the dtype's ID spelled as the enum's
    assert np.array_equal(libattn.quantize(x, "u8_asym"), libattn.quantize(x, "u8"))


# ------------------------------------------------------------------ attention

CASES = {
    "decode_gqa": dict(B=1, HQ=8, HK=2, LQ=1, LK=300, D=128, DV=128, kw={}),
    "prefill_causal": dict(B=2, HQ=4, HK=4, LQ=70, LK=70, D=64, DV=64, kw={"causal": True}),
    "window_lens_dv": dict(B=2, HQ=4, HK=1, LQ=9, LK=120, D=128, DV=64,
                           kw={"causal": True, "window": 33, "kv_lens": [120, 50]}),
}


def _spread(rng, shape):
    """K/V rows with an offset and a scale per row, as real caches have."""
    x = rng.standard_normal(shape)
    return (x * rng.uniform(0.2, 3, shape[:-1] + (1,)) + rng.uniform(-2, 2, shape[:-1] + (1,))
            ).astype(np.float32)


@pytest.mark.parametrize("dtype", ASYM)
@pytest.mark.parametrize("group", [0, 32, 64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_attention_on_asym_cache(rng, dtype, group, case):
    c = CASES[case]
    q = rng.standard_normal((c["B"], c["HQ"], c["LQ"], c["D"])).astype(np.float32)
    kx = _spread(rng, (c["B"], c["HK"], c["LK"], c["D"]))
    vx = _spread(rng, (c["B"], c["HK"], c["LK"], c["DV"]))
    # k and v with groups of their own: v's the other group size, the whole
    # row for the largest
    v_group = {0: 32, 32: 0, 64: 16}[group]
    k = libattn.quantize(kx, dtype, group=group)
    v = libattn.quantize(vx, dtype, group=v_group)
    kd, vd = decode(k, dtype, group), decode(v, dtype, v_group)
    kw = dict(c["kw"])
    ref = Reference(q, kd, vd, **kw)
    s = libattn.scores(q, k, kv_dtype=dtype, k_scale_group=group, **kw)
    assert_close(s, ref.scores, ref.score_err, "scores")
    w, st = libattn.weights(q, k, kv_dtype=dtype, k_scale_group=group, stats=True, **kw)
    assert_close(w, ref.weights, ref.weight_tol, "weights")
    assert_close(st["lse"], ref.lse, ref.lse_tol, "lse")
    o = libattn.forward(q, k, v, kv_dtype=dtype, k_scale_group=group, v_scale_group=v_group,
                        **kw)
    assert_close(o, ref.out, ref.out_tol, "forward")
    # the plan of prepare() and forward()'s cached plan give the same bits
    step = libattn.prepare(q, k, v, kv_dtype=dtype, k_scale_group=group,
                           v_scale_group=v_group, **kw)
    assert np.array_equal(step(q, k, v), o)
    again = libattn.forward(q, k, v, kv_dtype=dtype, k_scale_group=group,
                            v_scale_group=v_group, **kw)
    assert np.array_equal(again, o)


@pytest.mark.parametrize("dtype", ASYM)
def test_blhd_cache_view_and_k_tail(rng, dtype):
    """A [B,L,H,row_bytes] cache read through a transposed view (byte strides
    of any size: no alignment), and an asym k beside a float k_tail."""
    B, L, H, D, G = 1, 40, 2, 64, 16
    cache = libattn.quantize(_spread(rng, (B, L, H, D)), dtype, group=G)
    k = cache.transpose(0, 2, 1, 3)
    q = rng.standard_normal((B, 4, 3, D)).astype(np.float32)
    kd = decode(k, dtype, G)
    ref = Reference(q, kd, kd)
    o = libattn.forward(q, k, k, kv_dtype=dtype, k_scale_group=G, v_scale_group=G)
    assert_close(o, ref.out, ref.out_tol, "forward")
    tail = rng.standard_normal((B, H, L, 8)).astype(np.float32)
    qt = rng.standard_normal((B, 4, 3, D + 8)).astype(np.float32)
    ref = Reference(qt, np.concatenate([kd, tail], axis=-1), kd)
    o = libattn.forward(qt, k, k, kv_dtype=dtype, k_scale_group=G, v_scale_group=G,
                        k_tail=tail)
    assert_close(o, ref.out, ref.out_tol, "forward with k_tail")


def _gather(pool, table, length):
    """[num_blocks, block_size, ...] pool pages as dense [B, L, ...] rows."""
    bs = pool.shape[1]
    return np.stack([np.stack([pool[row[j // bs], j % bs] for j in range(length)])
                     for row in table])


@pytest.mark.parametrize("dtype", ASYM)
@pytest.mark.parametrize("group", [0, 32, 64])
def test_paged_and_packed_against_float64(rng, dtype, group):
    """An OpenVINO-style pool [num_blocks, block_size, Hkv, row_bytes] read
    with a block table, and the same rows packed [Tk, Hkv, row_bytes]."""
    B, HQ, H, D, bs, nb = 2, 4, 2, 64, 4, 9
    table = np.array([[3, 7, 1], [0, 5, 8]], np.int32)
    kv_lens, L = [11, 6], 12
    pool_k = libattn.quantize(_spread(rng, (nb, bs, H, D)), dtype, group=group)
    pool_v = libattn.quantize(_spread(rng, (nb, bs, H, D)), dtype, group=group)
    q = rng.standard_normal((B, HQ, 2, D)).astype(np.float32)
    groups = dict(k_scale_group=group, v_scale_group=group)
    out = libattn.forward(q, pool_k, pool_v, kv_dtype=dtype, block_table=table,
                          kv_lens=kv_lens, causal=True, **groups)
    kd = decode(_gather(pool_k, table, L), dtype, group).swapaxes(1, 2)
    vd = decode(_gather(pool_v, table, L), dtype, group).swapaxes(1, 2)
    ref = Reference(q, kd, vd, kv_lens=kv_lens, causal=True)
    assert_close(out, ref.out, ref.out_tol, "paged forward")
    s = libattn.scores(q, pool_k, kv_dtype=dtype, block_table=table, kv_lens=kv_lens,
                       causal=True, k_scale_group=group)
    assert_close(s, ref.scores, ref.score_err, "paged scores")
    step = libattn.prepare(q, pool_k, pool_v, kv_dtype=dtype, block_table=table,
                           kv_lens=kv_lens, causal=True, **groups)
    assert np.array_equal(step(q, pool_k, pool_v), out)
    # packed: the sequences' rows one after the other
    dense_k, dense_v = (_gather(p, table, L) for p in (pool_k, pool_v))  # [B, L, H, bytes]
    cu = [0, kv_lens[0], kv_lens[0] + kv_lens[1]]
    pk, pv = (np.concatenate([d[b, :kv_lens[b]] for b in range(B)]) for d in (dense_k, dense_v))
    qp = np.ascontiguousarray(q[:, :, -1])  # one query per sequence: [B, Hq, D] = [Tq, Hq, D]
    packed = libattn.forward(qp, pk, pv, kv_dtype=dtype, cu_seqlens_q=[0, 1, 2],
                             cu_seqlens_k=cu, **groups)
    ref1 = Reference(q[:, :, -1:], kd, vd, kv_lens=kv_lens)
    assert_close(packed, ref1.out[:, :, 0], ref1.out_tol[:, :, 0], "packed forward")


# ------------------------------------------------------------------ cache_append

@pytest.mark.parametrize("dtype", ASYM)
@pytest.mark.parametrize("group", [0, 32, 64])
@pytest.mark.parametrize("paged", [False, True])
def test_cache_append_round_trip(rng, dtype, group, paged):
    """cache_append encodes each new row one record per group, as quantize()
    and the NumPy encoder do, at the slots forward() reads; other bytes are
    untouched; forward over the result is the float64 attention over the
    decoded rows."""
    B, H, HQ, D, DV, T = 2, 2, 4, 128, 64, 3
    v_group = 0 if group else 32
    kv_lens = [10, 7]
    k_new = _spread(rng, (B, H, T, D))
    v_new = _spread(rng, (B, H, T, DV))
    want_k, want_v = encode(k_new, dtype, group), encode(v_new, dtype, v_group)
    assert np.array_equal(libattn.quantize(k_new, dtype, group=group), want_k)
    groups = dict(k_scale_group=group, v_scale_group=v_group)
    if paged:
        bs, nb = 4, 8
        table = np.array([[6, 2, 4], [1, 7, 3]], np.int32)
        kc = libattn.quantize(_spread(rng, (nb, bs, H, D)), dtype, group=group)
        vc = libattn.quantize(_spread(rng, (nb, bs, H, DV)), dtype, group=v_group)
        layout = dict(block_table=table)
    else:
        L = 12
        kc = libattn.quantize(_spread(rng, (B, H, L, D)), dtype, group=group)
        vc = libattn.quantize(_spread(rng, (B, H, L, DV)), dtype, group=v_group)
        layout = {}
    before_k, before_v = kc.copy(), vc.copy()
    libattn.cache_append(k_new, kc, v_new, vc, kv_lens=kv_lens, kv_dtype=dtype, **groups,
                         **layout)
    exp_k, exp_v = before_k.copy(), before_v.copy()
    for b in range(B):
        for i in range(T):
            j = kv_lens[b] - T + i
            if paged:
                at = (table[b, j // bs], j % bs)
                exp_k[at] = want_k[b, :, i]
                exp_v[at] = want_v[b, :, i]
            else:
                exp_k[b, :, j] = want_k[b, :, i]
                exp_v[b, :, j] = want_v[b, :, i]
    assert np.array_equal(kc, exp_k) and np.array_equal(vc, exp_v)
    # the appended rows decode to within a step of the new values
    q = rng.standard_normal((B, HQ, T, D)).astype(np.float32)
    out = libattn.forward(q, kc, vc, kv_dtype=dtype, kv_lens=kv_lens, causal=True, **groups,
                          **layout)
    if paged:
        kd = decode(_gather(kc, table, 12), dtype, group).swapaxes(1, 2)
        vd = decode(_gather(vc, table, 12), dtype, v_group).swapaxes(1, 2)
    else:
        kd, vd = decode(kc, dtype, group), decode(vc, dtype, v_group)
    ref = Reference(q, kd, vd, kv_lens=kv_lens, causal=True)
    assert_close(out, ref.out, ref.out_tol, "forward after append")


def test_cache_append_refusals(rng):
    k_new = rng.standard_normal((1, 2, 1, 64)).astype(np.float32)
    cache = libattn.quantize(np.zeros((1, 2, 4, 64), np.float32), "u8", group=32)
    before = cache.copy()
    with pytest.raises(ValueError, match="records hold their own scale"):
        libattn.cache_append(k_new, cache, kv_lens=4, kv_dtype="u8", k_scale_group=32,
                             k_scales=np.ones((1, 2, 4), np.float32))
    with pytest.raises(ValueError, match="only for kv_dtype='fp8'"):
        libattn.cache_append(k_new, cache, kv_lens=4, kv_dtype="u8", k_scale_group=32,
                             k_scale=2.0)
    with pytest.raises(ValueError, match="record group"):
        libattn.cache_append(k_new, cache, kv_lens=4, kv_dtype="q8_0", k_scale_group=32)
    with pytest.raises(ValueError, match="k_scale_group"):  # 80 bytes are not 64-value records
        libattn.cache_append(k_new, cache, kv_lens=4, kv_dtype="u8", k_scale_group=64)
    bad = k_new.copy()
    bad[0, 1, 0, 3] = np.nan
    with pytest.raises(libattn.AttnError, match="non-finite"):
        libattn.cache_append(bad, cache, kv_lens=4, kv_dtype="u8", k_scale_group=32)
    assert np.array_equal(cache, before)


def test_attention_refusals(rng):
    q = rng.standard_normal((1, 2, 1, 64)).astype(np.float32)
    k = libattn.quantize(rng.standard_normal((1, 2, 5, 64)), "u4", group=32)  # 2 x 24 bytes
    with pytest.raises(ValueError, match="records hold their own scale"):
        libattn.forward(q, k, k, kv_dtype="u4", k_scale_group=32, v_scale_group=32,
                        k_scales=np.ones((1, 2, 5), np.float32))
    with pytest.raises(ValueError, match="records hold their own scale"):
        libattn.forward(q, k, k, kv_dtype="u4", k_scale_group=32, v_scale_group=32,
                        block_table=[[0]], kv_lens=[1], v_scales=np.ones((1, 2, 5), np.float32))
    with pytest.raises(ValueError, match="only for kv_dtype='fp8'"):
        libattn.scores(q, k, kv_dtype="u4", k_scale_group=32, k_scale=0.5)
    with pytest.raises(ValueError, match="record group"):
        libattn.scores(q, k, k_scale_group=32)
    with pytest.raises(ValueError, match="record group"):
        libattn.forward(q, k, k, kv_dtype="fp8", v_scale_group=32)
    # the group the bytes were written with is needed to read them: 48 bytes
    # are one u4 record of 80 values, which q's 64 do not match
    with pytest.raises(ValueError, match=r"head_dim 80 \(48 bytes of u4 records of "
                                         r"k_scale_group=0\)"):
        libattn.scores(q, k, kv_dtype="u4")
    with pytest.raises(ValueError, match="not whole u4 records"):
        libattn.scores(q, k, kv_dtype="u4", k_scale_group=64)
    with pytest.raises(ValueError, match="multiple of 2"):
        libattn.scores(q, k, kv_dtype="u4", k_scale_group=3)
    with pytest.raises(TypeError):
        libattn.scores(q, k, kv_dtype="u4", k_scale_group=32.0)

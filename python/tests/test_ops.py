# SPDX-License-Identifier: MIT
"""Every operation against the float64 reference in conftest.py."""

import numpy as np
import pytest

import libattn
from conftest import U, Reference, as4, assert_close, bf16_bits, bf16_value, ref_visible


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# Mask combinations: every kind alone, pairs, and all together. Shapes are
# chosen so each mask hides something (q_len != kv_len to exercise the
# bottom-right alignment).
B, HQ, HK, LQ, LK, D, DV = 3, 4, 2, 5, 9, 16, 7
MASKS = {
    "none": {},
    "causal": {"causal": True},
    "kv_lens": {"kv_lens": [9, 4, 0]},
    "q_lens": {"q_lens": [5, 2, 0]},
    "window": {"window": 3},
    "causal_window": {"causal": True, "window": 3},
    "bool_mask": {"mask": "bool"},
    "bias": {"bias": "bias"},
    "softcap": {"softcap": 2.5},
    "scale": {"scale": 0.7},
    "all": {"causal": True, "window": 4, "kv_lens": [8, 6, 9], "q_lens": [5, 3, 1],
            "mask": "bool", "bias": "bias", "softcap": 5.0, "scale": 0.3},
}


def make_kwargs(rng, spec):
    kw = dict(spec)
    if kw.get("mask") == "bool":
        # Broadcast over batch and heads: [Lq, Lk].
        kw["mask"] = rng.random((LQ, LK)) < 0.7
    if kw.get("bias") == "bias":
        # Per head, broadcast over batch and query rows: [H, 1, Lk].
        kw["bias"] = randn(rng, HQ, 1, LK)
    return kw


@pytest.mark.parametrize("name", sorted(MASKS))
def test_scores_weights_forward(rng, name):
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, LK, D), randn(rng, B, HK, LK, DV)
    kw = make_kwargs(rng, MASKS[name])
    ref = Reference(q, k, v, **kw)

    s = libattn.scores(q, k, **kw)
    assert s.dtype == np.float32 and s.shape == (B, HQ, LQ, LK)
    assert np.array_equal(np.isneginf(s), ~ref.visible), "masked scores must be exactly -inf"
    assert_close(s, ref.scores, ref.score_err, "scores")

    w, st = libattn.weights(q, k, stats=True, **kw)
    assert_close(w, ref.weights, ref.weight_tol, "weights")
    assert np.all(w[~ref.visible] == 0.0)
    assert_close(st["lse"], ref.lse, ref.lse_tol, "lse")
    assert_close(st["max_score"], ref.max_score, ref.row_err, "max_score")
    assert_close(st["entropy"], ref.entropy, ref.entropy_tol, "entropy")

    o, st2 = libattn.forward(q, k, v, stats=True, **kw)
    assert o.shape == (B, HQ, LQ, DV)
    assert_close(o, ref.out, ref.out_tol, "forward")
    assert_close(st2["lse"], ref.lse, ref.lse_tol, "forward lse")
    assert_close(st2["max_score"], ref.max_score, ref.row_err, "forward max_score")
    assert_close(st2["entropy"], ref.entropy, ref.entropy_tol, "forward entropy")

    # Fully masked rows: weights 0, output 0, lse = max = -inf, entropy 0. Never NaN.
    dead = ref.masked_rows
    if name in ("kv_lens", "q_lens", "all"):
        assert dead.any(), "this case is meant to have fully masked rows"
    assert np.all(o[dead] == 0.0) and np.all(w[dead] == 0.0)
    assert np.all(np.isneginf(st2["lse"][dead])) and np.all(np.isneginf(st2["max_score"][dead]))
    assert np.all(st2["entropy"][dead] == 0.0)
    assert not np.isnan(o).any() and not np.isnan(w).any()


@pytest.mark.parametrize("name", sorted(MASKS))
def test_mask_apply(rng, name):
    kw = make_kwargs(rng, MASKS[name])
    kw.pop("scale", None)  # mask_apply takes already-scaled scores
    raw = randn(rng, B, HQ, LQ, LK) * 3
    ref_vis = ref_visible(B, HQ, LQ, LK, causal=kw.get("causal", False),
                          window=kw.get("window", 0), q_lens=kw.get("q_lens"),
                          kv_lens=kw.get("kv_lens"), mask=kw.get("mask"))
    expect = raw.astype(np.float64)
    tol = np.zeros_like(expect)
    if kw.get("softcap"):
        cap = kw["softcap"]
        expect = cap * np.tanh(expect / cap)
        tol = tol + 16 * U * cap
    if kw.get("bias") is not None:
        expect = expect + as4(kw["bias"])
        tol = tol + U * (np.abs(expect) + np.abs(as4(kw["bias"])))
    expect = np.where(ref_vis, expect, -np.inf)

    table = raw.copy()
    result = libattn.mask_apply(table, **kw)
    assert result is table, "mask_apply works in place and returns its argument"
    assert np.array_equal(np.isneginf(table), ~ref_vis)
    if not kw.get("softcap") and kw.get("bias") is None:
        # Only masking: unmasked entries are untouched, bit for bit.
        assert np.array_equal(table[ref_vis], raw[ref_vis])
    assert_close(table, expect, tol, "mask_apply")

    fresh = libattn.mask_apply(raw, copy=True, **kw)
    assert fresh is not raw and np.array_equal(fresh, table)


def test_mask_apply_ranks(rng):
    raw = randn(rng, LQ, LK)
    out = libattn.mask_apply(raw.copy(), causal=True)
    assert np.array_equal(np.isneginf(out), ~np.tri(LQ, LK, LK - LQ, dtype=bool))
    raw3 = randn(rng, 2, LQ, LK)
    out3 = libattn.mask_apply(raw3.astype(np.float64), window=2, copy=True)
    assert out3.dtype == np.float32 and out3.shape == (2, LQ, LK)


def ref_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    dead = np.isneginf(m)
    m = np.where(dead, 0.0, m)
    e = np.exp(x - m)
    total = e.sum(axis=-1, keepdims=True)
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, total))
    lse = np.where(dead[..., 0], -np.inf, (m + np.log(np.where(dead, 1.0, total)))[..., 0])
    # |x_j - m| is rounded once in f32 before exp; sum of n terms; exp/log ulps.
    n = x.shape[-1]
    tol = p * (U * np.abs(np.where(np.isinf(x), 0.0, x - m)) + (n + 16) * U) + 16 * U * U
    lse_tol = 16 * U * (np.abs(np.where(np.isinf(lse), 0.0, lse)) + 1)
    return p, lse, tol, lse_tol


@pytest.mark.parametrize("shape", [(7,), (3, 1), (4, 33), (2, 3, 65), (2, 2, 2, 129)])
def test_softmax(rng, shape):
    x = randn(rng, *shape) * 8
    if len(shape) > 1:
        x[..., 0, :] = -np.inf          # a fully masked row becomes zeros
    if len(shape) > 1 and shape[-1] > 3:
        x[..., -1, 2] = -np.inf         # a single masked entry
        x[..., -1, 1] = 90.0            # exp would overflow without the max shift
    p_ref, lse_ref, tol, lse_tol = ref_softmax(x)
    p, st = libattn.softmax(x, stats=True)
    assert p.shape == x.shape and p.dtype == np.float32
    assert_close(p, p_ref, tol, "softmax")
    lse = st["lse"]
    assert_close(lse, lse_ref.reshape(lse.shape), lse_tol.reshape(lse.shape), "softmax lse")
    # In place, and on a strided view (rows not evenly spaced).
    y = x.copy()
    assert libattn.softmax(y, out=y) is y
    assert np.array_equal(y, p)
    if len(shape) >= 3:
        big = np.zeros(shape[:-1] + (shape[-1] + 5,), dtype=np.float32)
        view = big.transpose(*range(len(shape) - 3), -2, -3, -1)[..., :shape[-1]]
        src = x.transpose(*range(len(shape) - 3), -2, -3, -1)
        libattn.softmax(src, out=view)
        assert np.array_equal(view, p.transpose(*range(len(shape) - 3), -2, -3, -1))
        assert np.all(big[..., shape[-1]:] == 0), "wrote outside the view"


def test_softmax_backward(rng):
    for shape in [(1,), (5, 17), (2, 3, 64), (3, 1, 1)]:
        p = libattn.softmax(randn(rng, *shape) * 2)
        dp = randn(rng, *shape)
        ds = libattn.softmax_backward(p, dp)
        p64, dp64 = p.astype(np.float64), dp.astype(np.float64)
        dot = (p64 * dp64).sum(axis=-1, keepdims=True)
        want = p64 * (dp64 - dot)
        n = shape[-1]
        absdot = (np.abs(p64) * np.abs(dp64)).sum(axis=-1, keepdims=True)
        tol = np.abs(p64) * ((n + 2) * U * absdot + 2 * U * np.abs(dp64 - dot)) + U * U
        assert_close(ds, want, tol, "softmax_backward %r" % (shape,))
        # In place over dp and over p.
        dp2 = dp.copy()
        assert libattn.softmax_backward(p, dp2, out=dp2) is dp2
        assert np.array_equal(dp2, ds)
        p2 = p.copy()
        libattn.softmax_backward(p2, dp, out=p2)
        assert np.array_equal(p2, ds)


def test_layouts_and_ranks(rng):
    # [B,L,H,D] storage passed as transposed [B,H,L,D] views: used without copies.
    q_blhd = randn(rng, 2, 6, 4, 8)
    k_blhd = randn(rng, 2, 10, 2, 8)
    v_blhd = randn(rng, 2, 10, 2, 5)
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (q_blhd, k_blhd, v_blhd))
    op = libattn._tensor.as_operand(q, "q", "qkv")
    assert op.address == q.__array_interface__["data"][0] and op.keep[0] is q
    ref = Reference(q, k, v, causal=True)
    out = libattn.forward(q, k, v, causal=True)
    assert_close(out, ref.out, ref.out_tol, "forward [B,L,H,D]")
    # Output into a [B,L,H,Dv] buffer through a transposed view.
    out_blhd = np.full((2, 6, 4, 5), np.nan, dtype=np.float32)
    libattn.forward(q, k, v, causal=True, out=out_blhd.transpose(0, 2, 1, 3))
    assert np.array_equal(out_blhd.transpose(0, 2, 1, 3), out)

    # Views that need a copy: strided innermost, negative strides, Fortran order.
    for name, qq in [("strided", np.repeat(q, 2, axis=3)[..., ::2]),
                     ("reversed", q[:, :, ::-1][:, :, ::-1]),
                     ("fortran", np.asfortranarray(q))]:
        assert np.array_equal(qq, q), name
        assert np.array_equal(libattn.forward(qq, k, v, causal=True), out), name

    # [H,L,D] and [L,D]: results shaped like the inputs.
    r3 = libattn.forward(q[0], k[0], v[0], causal=True)
    assert r3.shape == (4, 6, 5) and np.array_equal(r3, out[0])
    # One head alone is another call shape than 2 query heads stacked on one
    # KV head (a tile of 6 rows, not 12), so it may round differently from
    # out[0, 0] (attn.h promises bits across threads, not across shapes):
    # bitwise against the same problem at rank 4, within tolerance otherwise.
    r2, st2 = libattn.forward(q[0, 0], k[0, 0], v[0, 0], causal=True, stats=True)
    r4 = libattn.forward(q[:1, :1], k[:1, :1], v[:1, :1], causal=True)
    assert r2.shape == (6, 5) and np.array_equal(r2, r4[0, 0])
    assert_close(r2, ref.out[0, 0], ref.out_tol[0, 0], "forward [L,D]")
    assert st2["entropy"].shape == (6,)
    w3 = libattn.weights(q[1], k[1], window=2)
    assert w3.shape == (4, 6, 10)


def test_broadcast_inputs(rng):
    # k/v shared across the batch by stride 0 (np.broadcast_to), mask with a
    # key axis of 1 (widened once), bias as a Python list.
    q = randn(rng, 3, 2, 4, 8)
    k1, v1 = randn(rng, 1, 2, 6, 8), randn(rng, 1, 2, 6, 8)
    k, v = np.broadcast_to(k1, (3, 2, 6, 8)), np.broadcast_to(v1, (3, 2, 6, 8))
    row_mask = np.array([True, False, True, True])[:, None]      # [Lq, 1]
    bias = [[0.5 * j for j in range(6)]]                          # [1, Lk] list
    ref = Reference(q, k, v, mask=row_mask, bias=np.array(bias))
    out = libattn.forward(q, k, v, mask=row_mask, bias=bias)
    assert_close(out, ref.out, ref.out_tol, "broadcast forward")
    assert np.all(out[:, :, 1] == 0.0)


@pytest.mark.parametrize("qdt,kvdt", [("f16", "f16"), ("bf16", "bf16"), ("f32", "f16"),
                                      ("f32", "bf16"), ("f64", "f64")])
def test_dtypes(rng, qdt, kvdt):
    base = [randn(rng, 2, 4, 5, 32), randn(rng, 2, 2, 7, 32), randn(rng, 2, 2, 7, 6)]

    def encode(x, dt):
        if dt == "f16":
            return x.astype(np.float16), x.astype(np.float16).astype(np.float64)
        if dt == "bf16":
            bits = bf16_bits(x)
            return bits, bf16_value(bits)
        if dt == "f64":
            return x.astype(np.float64), x.astype(np.float64)
        return x, x.astype(np.float64)

    (q, qv), (k, kv), (v, vv) = encode(base[0], qdt), encode(base[1], kvdt), encode(base[2], kvdt)
    dtype = "bf16" if "bf16" in (qdt, kvdt) else None
    ref = Reference(qv, kv, vv, causal=True)
    out, st = libattn.forward(q, k, v, causal=True, dtype=dtype, stats=True)
    assert out.dtype == np.float32
    assert_close(out, ref.out, ref.out_tol, "forward %s/%s" % (qdt, kvdt))
    assert_close(st["entropy"], ref.entropy, ref.entropy_tol, "entropy %s/%s" % (qdt, kvdt))
    s = libattn.scores(q, k, causal=True, dtype=dtype)
    assert_close(s, ref.scores, ref.score_err, "scores %s/%s" % (qdt, kvdt))


def test_half_dtypes_used_as_is(rng):
    k = randn(rng, 2, 3, 8).astype(np.float16)
    op = libattn._tensor.as_operand(k, "k", "qkv")
    assert op.dtype == libattn.DType.F16 and op.keep[0] is k
    bits = bf16_bits(randn(rng, 2, 3, 8))
    op = libattn._tensor.as_operand(bits, "k", "qkv", libattn.DType.BF16)
    assert op.dtype == libattn.DType.BF16 and op.keep[0] is bits


def bits_of(x):
    return np.ascontiguousarray(x).view(np.uint32)


def test_threads_bitwise_identical(rng):
    # Big enough to be cut into many tasks.
    q, k, v = randn(rng, 2, 8, 70, 24), randn(rng, 2, 2, 150, 24), randn(rng, 2, 2, 150, 24)
    kw = dict(causal=True, window=64, kv_lens=[150, 97], bias=randn(rng, 8, 1, 150),
              mask=rng.random((70, 150)) < 0.9, softcap=30.0)
    results = {}
    for threads in (None, 1, 2, 7, 0):
        o, st = libattn.forward(q, k, v, threads=threads, stats=True, **kw)
        w = libattn.weights(q, k, threads=threads, **kw)
        s = libattn.scores(q, k, threads=threads, **kw)
        m = libattn.mask_apply(s.copy(), threads=threads, causal=True)
        results[threads] = [o, st["lse"], st["max_score"], st["entropy"], w, s, m]
    base = results[1]
    for threads, arrays in results.items():
        for i, (a, b) in enumerate(zip(arrays, base)):
            assert np.array_equal(bits_of(a), bits_of(b)), \
                "threads=%r differs from threads=1 in output %d" % (threads, i)
    assert libattn.thread_pool_size(7) == 7
    assert libattn.thread_pool_size(1) == 1


def test_gqa_and_mqa(rng):
    q = randn(rng, 1, 6, 4, 8)
    for kv_heads in (1, 2, 3, 6):
        k, v = randn(rng, 1, kv_heads, 9, 8), randn(rng, 1, kv_heads, 9, 8)
        ref = Reference(q, k, v)
        assert_close(libattn.forward(q, k, v), ref.out, ref.out_tol, "GQA %d" % kv_heads)


def test_decode_sees_every_valid_key(rng):
    # Lq = 1 with causal: bottom-right alignment lets the query see all keys.
    q, k = randn(rng, 2, 2, 1, 8), randn(rng, 2, 2, 12, 8)
    w = libattn.weights(q, k, causal=True, kv_lens=[12, 5])
    assert np.all(w[0] > 0)
    assert np.all(w[1, :, :, :5] > 0) and np.all(w[1, :, :, 5:] == 0)


def test_nonfinite_inputs_stay_local(rng):
    # On every ISA this library and CPU run (the library's own list).
    for isa in libattn.available_isas():
        check_nonfinite_inputs_stay_local(rng, isa)


def check_nonfinite_inputs_stay_local(rng, isa):
    # A NaN reaches only its own rows, and does reach them: a NaN query row
    # gives a NaN output row (not zeros, which would pass it off as masked).
    q, k, v = randn(rng, 1, 1, 4, 8), randn(rng, 1, 1, 4, 8), randn(rng, 1, 1, 4, 8)
    q[0, 0, 2, 3] = np.nan
    k2 = k.copy()
    k2[0, 0, 1, 0] = np.inf
    try:
        libattn.isa_select(isa)
        out, st = libattn.forward(q, k, v, stats=True)
        w = libattn.weights(q, k)
        causal_inf = libattn.forward(np.nan_to_num(q), k2, v, causal=True)
    finally:
        libattn.isa_select("auto")
    assert not np.isnan(out[0, 0, [0, 1, 3]]).any() and not np.isnan(w[0, 0, [0, 1, 3]]).any()
    assert np.isnan(out[0, 0, 2]).all(), "NaN query row gave %r on %s" % (out[0, 0, 2], isa)
    assert np.isnan(w[0, 0, 2]).all(), "NaN query row gave weights %r on %s" % (w[0, 0, 2], isa)
    assert np.isnan(st["lse"][0, 0, 2])
    # +inf in key 1 reaches only the rows that can see key 1 (causal: rows >= 1).
    assert np.isfinite(causal_inf[0, 0, 0]).all()


def test_isa_switching(rng):
    assert libattn.isa_active() in libattn.isa_names()
    assert libattn.isa_available("scalar") and libattn.isa_available("auto")
    available = libattn.available_isas()
    assert "scalar" in available
    q, k, v = randn(rng, 1, 2, 9, 40), randn(rng, 1, 2, 9, 40), randn(rng, 1, 2, 9, 40)
    ref = Reference(q, k, v, causal=True)
    try:
        for name in available:
            libattn.isa_select(name)
            assert libattn.isa_active() == name
            out = libattn.forward(q, k, v, causal=True)
            assert_close(out, ref.out, ref.out_tol, "forward on %s" % name)
        missing = [n for n in libattn.isa_names() if n not in available]
        before = libattn.isa_active()
        for name in missing:
            with pytest.raises(libattn.AttnError) as err:
                libattn.isa_select(name)
            assert err.value.status == libattn.Status.ERR_UNSUPPORTED
            assert libattn.isa_active() == before
    finally:
        libattn.isa_select("auto")


def test_version():
    assert libattn.version_info()[0] == libattn.ABI_MAJOR
    assert libattn.version() == "%d.%d.%d" % libattn.version_info()
    assert libattn.library_path()


def test_isa_enum_walks_the_library():
    # Isa is the library's own list (attn_isa_name until "unknown").
    from libattn import _capi
    isa = libattn.Isa
    assert isa.AUTO == 0 and isa.SCALAR == 1
    for m in isa:
        assert _capi.lib().attn_isa_name(int(m)).decode() == m.name.lower()
    assert _capi.lib().attn_isa_name(len(isa)).decode() == "unknown"
    assert libattn.isa_names() == [m.name.lower() for m in isa][1:]
    with pytest.raises(ValueError):
        libattn.isa_select("no-such-isa")


def rounded_bits(x, dtype):
    """float32 x rounded to nearest even, as float16 or bfloat16 bits (uint16)."""
    x = np.asarray(x, np.float32)
    return x.astype(np.float16).view(np.uint16) if dtype == "f16" else bf16_bits(x)


@pytest.mark.parametrize("name", ["none", "causal", "q_lens", "all"])
def test_forward_half_out(rng, name):
    # A float16 / bfloat16 out: the float32 result rounded once (RNE), bit
    # for bit; the stats are the float32 call's.
    q, k, v = randn(rng, B, HQ, LQ, D), randn(rng, B, HK, LK, D), randn(rng, B, HK, LK, DV)
    kw = make_kwargs(rng, MASKS[name])
    o32, st32 = libattn.forward(q, k, v, stats=True, **kw)
    o16 = np.full((B, HQ, LQ, DV), np.nan, dtype=np.float16)
    got, st = libattn.forward(q, k, v, out=o16, stats=True, **kw)
    assert got is o16
    assert np.array_equal(o16.view(np.uint16), rounded_bits(o32, "f16"))
    for key in st32:
        assert np.array_equal(st[key].view(np.uint32), st32[key].view(np.uint32)), key
    ob = np.zeros((B, HQ, LQ, DV), dtype=np.uint16)  # bfloat16 bits: dtype='bf16'
    libattn.forward(q, k, v, out=ob, dtype="bf16", **kw)
    assert np.array_equal(ob, rounded_bits(o32, "bf16"))
    ref = Reference(q, k, v, **kw)
    # the float32 bound plus one rounding (tests/tolerance.h, "16-bit outputs")
    assert_close(o16.astype(np.float32), ref.out, ref.out_tol * (1 + 2.0 ** -11) +
                 2.0 ** -11 * np.abs(ref.out) + 2.0 ** -25, "f16 out")
    assert_close(bf16_value(ob), ref.out, ref.out_tol * (1 + 2.0 ** -8) +
                 2.0 ** -8 * np.abs(ref.out) + 2.0 ** -134, "bf16 out")


def test_half_out_only_where_rounded(rng):
    q, k, v = randn(rng, 1, 2, 3, 8), randn(rng, 1, 2, 4, 8), randn(rng, 1, 2, 4, 8)
    with pytest.raises(TypeError, match=r"^out: "):
        libattn.scores(q, k, out=np.empty((1, 2, 3, 4), np.float16))
    with pytest.raises(TypeError, match=r"^out: "):
        libattn.forward(q, k, v, out=np.empty((1, 2, 3, 8), np.float64))
    with pytest.raises(TypeError, match=r"^out: uint16 array"):
        libattn.forward(q, k, v, out=np.empty((1, 2, 3, 8), np.uint16))
    # a Tensor of f16 (no NumPy needed for the call)
    t = libattn.Tensor(bytearray(2 * 3 * 8 * 2), (1, 2, 3, 8), dtype="f16")
    libattn.forward(q, k, v, out=t)
    want = rounded_bits(libattn.forward(q, k, v), "f16")
    assert np.array_equal(np.frombuffer(t.buffer, np.uint16).reshape(want.shape), want)

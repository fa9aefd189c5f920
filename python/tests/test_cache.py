# SPDX-License-Identifier: MIT
"""libattn.cache_append: new K/V rows land where forward() reads them.

Each test writes a step's new tokens into a cache through the binding and
compares every byte of the cache with NumPy's own placement of the same
rows (float32 as is, float16 by NumPy's rounding, quantized rows with
libattn.quantize, whose bytes test_quant.py checks against its own
decoder); the forward over the appended cache then equals the forward over
a cache built by hand.
"""

import numpy as np
import pytest

import libattn
from libattn import _dtypes


def rng():
    return np.random.default_rng(1234)


def test_dense_f32_and_forward():
    g = rng()
    B, H, L, D, T = 3, 2, 20, 16, 2
    kv_lens = [20, 7, 12]
    k = g.standard_normal((B, H, L, D), dtype=np.float32)
    v = g.standard_normal((B, H, L, D), dtype=np.float32)
    k_new = g.standard_normal((B, H, T, D), dtype=np.float32)
    v_new = g.standard_normal((B, H, T, D), dtype=np.float32)
    want_k, want_v = k.copy(), v.copy()
    for b, n in enumerate(kv_lens):
        want_k[b, :, n - T:n] = k_new[b]
        want_v[b, :, n - T:n] = v_new[b]
    libattn.cache_append(k_new, k, v_new, v, kv_lens=kv_lens)
    assert np.array_equal(k, want_k) and np.array_equal(v, want_v)
    q = g.standard_normal((B, 4, T, D), dtype=np.float32)
    got = libattn.forward(q, k, v, kv_lens=kv_lens, causal=True)
    want = libattn.forward(q, want_k, want_v, kv_lens=kv_lens, causal=True)
    assert np.array_equal(got, want)


def test_paged_f16_pool():
    g = rng()
    B, H, D, bs, pages = 2, 2, 8, 4, 3
    table = np.array([[5, 0, 3], [1, 4, 2]])
    pool = np.zeros((6, bs, H, D), dtype=np.float16)
    k_new = g.standard_normal((B, H, 1, D), dtype=np.float32)
    kv_lens = [9, 5]
    libattn.cache_append(k_new, pool, kv_lens=kv_lens, block_table=table)
    want = np.zeros_like(pool)
    for b, n in enumerate(kv_lens):
        pos = n - 1
        want[table[b, pos // bs], pos % bs] = k_new[b, :, 0].astype(np.float16)
    assert np.array_equal(pool.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("kv_dtype", ["q8_0", "q4_0", "fp8"])
def test_quantized(kv_dtype):
    g = rng()
    B, H, L, D, T = 2, 2, 10, 64, 3
    scale = 0.5 if kv_dtype == "fp8" else 0.0
    cache = libattn.quantize(g.standard_normal((B, H, L, D)), kv_dtype, scale=scale)
    k_new = g.standard_normal((B, H, T, D), dtype=np.float32)
    want = cache.copy()
    want[:, :, L - T:] = libattn.quantize(k_new, kv_dtype, scale=scale)
    libattn.cache_append(k_new, cache, kv_lens=L, kv_dtype=kv_dtype, k_scale=scale)
    assert np.array_equal(cache, want)


def test_refused_writes_nothing():
    g = rng()
    k = np.zeros((1, 1, 4, 32), dtype=np.float32)
    cache = libattn.quantize(k, "q8_0")
    before = cache.copy()
    bad = g.standard_normal((1, 1, 2, 32), dtype=np.float32)
    bad[0, 0, 1, 5] = np.nan
    with pytest.raises(libattn.AttnError):
        libattn.cache_append(bad, cache, kv_lens=4, kv_dtype="q8_0")
    with pytest.raises(libattn.AttnError):  # more new tokens than keys
        libattn.cache_append(bad[:, :, :1].copy(), cache, kv_lens=0, kv_dtype="q8_0")
    assert np.array_equal(cache, before)
    with pytest.raises(TypeError):
        libattn.cache_append(bad, cache, v_new=bad, kv_lens=4, kv_dtype="q8_0")


def _gather(pool, table, length):
    """[num_blocks, block_size, ...] pool pages as dense [B, L, ...] rows."""
    bs = pool.shape[1]
    return np.stack([np.stack([pool[row[j // bs], j % bs] for j in range(length)])
                     for row in table])


# every quantized K/V dtype of src/dtype_list.h (libattn/_dtypes.py), FP8
# with scales per row and per group, and the asym records in groups
@pytest.mark.parametrize("kv_dtype", [r.name for r in _dtypes.ROWS
                                      if r.kind in ("qblock", "fp8", "asym")]
                         + ["fp8_rows", "fp8_groups", "u8_g16", "u4_g32"])
def test_quantized_paged_and_packed_caches_are_read(kv_dtype):
    """A quantized pool written by cache_append is what forward() and
    prepare() read with its block_table, and the same cache packed
    ([Tk, Hkv, row_bytes] with cu_seqlens_k) too: bit for bit the dense
    forward over the same bytes (and scales)."""
    g = rng()
    B, H, HQ, D, bs, nb = 2, 2, 4, 64, 4, 10
    table = np.array([[3, 7, 1], [0, 5, 8]], np.int32)
    kv_lens, L = [11, 6], 12
    dt = kv_dtype.split("_")[0] if kv_dtype.startswith(("fp8", "u8", "u4")) else kv_dtype
    # the asym records' group (values per record; 0: one per row)
    group = int(kv_dtype[len("u8_g"):]) if kv_dtype.startswith(("u8_g", "u4_g")) else 0
    row = libattn.quantize(np.zeros((1, D), np.float32), dt, group=group).shape[-1]
    k_pool = np.zeros((nb, bs, H, row), np.uint8)
    v_pool = np.zeros_like(k_pool)
    k_new = g.standard_normal((B, H, L, D), dtype=np.float32)
    v_new = g.standard_normal((B, H, L, D), dtype=np.float32)
    kw, scales = {}, None
    if kv_dtype == "fp8":
        kw = dict(k_scale=0.5, v_scale=0.25)
    elif group:
        kw = dict(k_scale_group=group, v_scale_group=group)
    elif kv_dtype != dt:  # fp8: one scale per row, or 4 groups of 16 channels per row
        groups = (4,) if kv_dtype == "fp8_groups" else ()
        scales = [np.ones((nb, bs, H) + groups, np.float32) for _ in range(2)]
    # the whole sequences in one append (q_lens = kv_lens); row scales are
    # written by cache_append, group scales given
    append_kw = dict(kw, k_scales=scales[0], v_scales=scales[1]) \
        if kv_dtype == "fp8_rows" else kw
    if kv_dtype == "fp8_groups":
        for pool, new, sc in ((k_pool, k_new, scales[0]), (v_pool, v_new, scales[1])):
            for b in range(B):
                for j in range(kv_lens[b]):
                    sc[table[b, j // bs], j % bs] = 0.5 + np.arange(4) / 8
                    blk = pool[table[b, j // bs], j % bs]
                    x = new[b, :, j].reshape(H, 4, 16) / sc[table[b, j // bs], j % bs][..., None]
                    blk[...] = libattn.quantize(x.reshape(H, D).astype(np.float32), "fp8")
    else:
        libattn.cache_append(k_new, k_pool, v_new, v_pool, kv_lens=kv_lens, q_lens=kv_lens,
                             block_table=table, kv_dtype=dt, **append_kw)
    if scales is not None:
        kw = dict(k_scales=scales[0], v_scales=scales[1])
    q = g.standard_normal((B, HQ, 1, D), dtype=np.float32)
    paged = libattn.forward(q, k_pool, v_pool, kv_dtype=dt, block_table=table,
                            kv_lens=kv_lens, **kw)
    # the same bytes dense: [B, Hkv, L, row_bytes], scales [B, Hkv, L(, G)]
    k_dense, v_dense = (_gather(p, table, L).swapaxes(1, 2).copy() for p in (k_pool, v_pool))
    dense_kw = dict(kw)
    if scales is not None:
        dense_kw = {name: _gather(sc, table, L).swapaxes(1, 2).copy()
                    for name, sc in zip(("k_scales", "v_scales"), scales)}
    want = libattn.forward(q, k_dense, v_dense, kv_dtype=dt, kv_lens=kv_lens, **dense_kw)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(paged, want)
    step = libattn.prepare(q, k_pool, v_pool, kv_dtype=dt, block_table=table, kv_lens=kv_lens,
                           **kw)
    np.testing.assert_array_equal(step(q, k_pool, v_pool), want)
    # packed: each sequence's rows one after the other, [Tk, Hkv, row_bytes]
    cu = [0, kv_lens[0], kv_lens[0] + kv_lens[1]]
    k_packed, v_packed = (np.concatenate([c[b, :, :kv_lens[b]].swapaxes(0, 1)
                                          for b in range(B)]) for c in (k_dense, v_dense))
    packed_kw = dict(kw)
    if scales is not None:
        packed_kw = {name: np.concatenate([sc[b, :, :kv_lens[b]].swapaxes(0, 1)
                                           for b in range(B)])
                     for name, sc in dense_kw.items()}
    packed = libattn.forward(q[:, :, 0], k_packed, v_packed, kv_dtype=dt, cu_seqlens_q=[0, 1, 2],
                             cu_seqlens_k=cu, **packed_kw)
    np.testing.assert_array_equal(packed, want[:, :, 0])
    if dt in ("q8_0", "q4_0"):
        with pytest.raises(ValueError, match="only for kv_dtype='fp8'"):
            libattn.forward(q, k_pool, v_pool, kv_dtype=dt, block_table=table,
                            kv_lens=kv_lens, k_scale=2.0)

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

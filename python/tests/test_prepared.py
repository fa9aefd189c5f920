# SPDX-License-Identifier: MIT
"""prepare(): a forward call planned once (attn_plan_forward) and run on new
arrays, bit for bit what forward() returns for the same arguments."""

import numpy as np
import pytest

import libattn


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("kw", [
    dict(causal=True),
    dict(causal=True, stats=True, sinks=np.linspace(-1, 1, 8, dtype=np.float32)),
    dict(window=5, softcap=20.0, threads=2),
    dict(kv_splits=3, stats=True),
    dict(alibi=libattn.alibi_slopes(8), causal=True, kv_lens=[30, 64], q_lens=[2, 3]),
])
def test_dense_bitwise(rng, kw):
    q, k, v = randn(rng, 2, 8, 3, 32), randn(rng, 2, 2, 64, 32), randn(rng, 2, 2, 64, 16)
    call = libattn.prepare(q, k, v, **kw)
    for step in range(3):  # new arrays of the same layout each step
        q, k, v = randn(rng, 2, 8, 3, 32), randn(rng, 2, 2, 64, 32), randn(rng, 2, 2, 64, 16)
        got, want = call(q, k, v), libattn.forward(q, k, v, **kw)
        if kw.get("stats"):
            same(got[0], want[0])
            for name in ("lse", "max_score", "entropy"):
                same(got[1][name], want[1][name])
        else:
            same(got, want)


def test_f16_cache_and_out(rng):
    q = randn(rng, 1, 4, 1, 64)
    k, v = randn(rng, 1, 4, 100, 64, dtype=np.float16), randn(rng, 1, 4, 100, 64, dtype=np.float16)
    out = np.empty((1, 4, 1, 64), np.float16)
    call = libattn.prepare(q, k, v, out=out)
    got = call(q, k, v, out=np.empty_like(out))
    want = libattn.forward(q, k, v, out=np.empty_like(out))
    same(got, want)
    same(call(q, k, v), want)  # a new out like the prepared one


def test_strided_out(rng):
    """An out view given to prepare() (every other row of a larger array):
    calls without out= get a new array of the same strides, which the plan
    writes at."""
    q, k, v = randn(rng, 1, 4, 3, 32), randn(rng, 1, 4, 40, 32), randn(rng, 1, 4, 40, 32)
    out = np.zeros((1, 4, 6, 32), np.float32)[:, :, ::2]
    call = libattn.prepare(q, k, v, out=out)
    got = call(q, k, v)
    assert got.strides == out.strides
    same(np.ascontiguousarray(got), libattn.forward(q, k, v))


def test_quantized_cache(rng):
    q = randn(rng, 1, 8, 1, 64)
    kq = libattn.quantize(randn(rng, 1, 2, 80, 64), "q8_0")
    vq = libattn.quantize(randn(rng, 1, 2, 80, 64), "q8_0")
    call = libattn.prepare(q, kq, vq, kv_dtype="q8_0")
    same(call(q, kq, vq), libattn.forward(q, kq, vq, kv_dtype="q8_0"))


def test_paged_and_shared_prefix(rng):
    """A paged decode whose sequences share a prefix (attn.h 1.4): the plan
    copies the table and the lengths; new pools of the same layout per step."""
    bs, lens, shared = 16, [100, 120, 90], [0, 80, 80]
    table = np.arange(3 * 8, dtype=np.int32).reshape(3, 8)
    q = randn(rng, 3, 4, 1, 32)
    kw = dict(block_table=table, kv_lens=lens, shared_prefix=shared, causal=True)
    k, v = randn(rng, 24, bs, 2, 32), randn(rng, 24, bs, 2, 32)
    call = libattn.prepare(q, k, v, **kw)
    table[:] = -1  # copied: the plan does not read the caller's table again
    table[:] = np.arange(3 * 8, dtype=np.int32).reshape(3, 8)
    for step in range(2):
        k, v = randn(rng, 24, bs, 2, 32), randn(rng, 24, bs, 2, 32)
        same(call(q, k, v), libattn.forward(q, k, v, **kw))


def test_packed(rng):
    cu = np.array([0, 5, 12], dtype=np.int32)
    q, k, v = randn(rng, 12, 4, 16), randn(rng, 12, 2, 16), randn(rng, 12, 2, 16)
    kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True)
    call = libattn.prepare(q, k, v, **kw)
    same(call(q, k, v), libattn.forward(q, k, v, **kw))
    with pytest.raises(ValueError, match="stats"):
        libattn.prepare(q, k, v, stats=True, **kw)


def test_errors(rng):
    q, k, v = randn(rng, 1, 4, 2, 32), randn(rng, 1, 4, 50, 32), randn(rng, 1, 4, 50, 32)
    call = libattn.prepare(q, k, v)
    with pytest.raises(ValueError, match="q: dtype, shape or strides"):
        call(randn(rng, 1, 4, 3, 32), k, v)
    with pytest.raises(ValueError, match="k: dtype, shape or strides"):
        call(q, k.astype(np.float16), v)
    with pytest.raises(ValueError, match="v: dtype, shape or strides"):
        call(q, k, np.asfortranarray(v))
    with pytest.raises(ValueError, match="out: dtype, shape or strides"):
        call(q, k, v, out=np.empty((1, 4, 2, 16), np.float32))
    with pytest.raises(TypeError, match="NumPy arrays or libattn.Tensor"):
        libattn.prepare(q.tolist(), k, v)
    with pytest.raises(ValueError, match="in place"):  # float64 would be converted per call
        libattn.prepare(q.astype(np.float64), k, v)
    with pytest.raises(libattn.AttnError):  # what the C library refuses, at prepare time
        libattn.prepare(q, k, v, shared_prefix=[1])


def _uncached(q, k, v, **kw):
    """forward() by its normal path (an array keyword keeps it off the cache):
    a mask of all True changes no score."""
    mask = np.ones((q.shape[-2], k.shape[-2]), dtype=bool)
    return libattn.forward(q, k, v, mask=mask, **kw)


@pytest.mark.parametrize("kw", [
    dict(causal=True),
    dict(causal=True, q_lens=[1, 1], kv_lens=[40, 64], threads=2),
    dict(kv_splits=4, window=9),
])
def test_forward_cache_is_forward(rng, kw):
    # forward() runs repeated calls of one layout through a cached plan:
    # each new step's arrays are read (nothing stale), bit for bit the
    # normal path's result, and a new layout gets a plan of its own
    for step in range(4):
        lq = 1 if step < 3 else 2
        q, k, v = randn(rng, 2, 8, lq, 32), randn(rng, 2, 2, 64, 32), randn(rng, 2, 2, 64, 16)
        got = libattn.forward(q, k, v, **kw)
        same(got, _uncached(q, k, v, **kw))
        got, st = libattn.forward(q, k, v, stats=True, **kw)
        want, wst = _uncached(q, k, v, stats=True, **kw)
        same(got, want)
        for name in wst:
            same(st[name], wst[name])


def test_forward_cache_reads_array_keywords_each_call(rng):
    q, k, v = randn(rng, 1, 4, 1, 16), randn(rng, 1, 4, 9, 16), randn(rng, 1, 4, 9, 16)
    a = libattn.forward(q, k, v, bias=np.zeros((1, 9), np.float32))
    b = libattn.forward(q, k, v, bias=np.full((1, 9), -50.0, np.float32) *
                        (np.arange(9) > 0))  # only key 0 left
    assert not np.array_equal(a, b)
    same(b, np.broadcast_to(v[:, :, :1], b.shape).copy())


def test_forward_cache_errors_and_threads(rng):
    q, k, v = randn(rng, 1, 4, 1, 16), randn(rng, 1, 4, 9, 16), randn(rng, 1, 4, 9, 16)
    for _ in range(2):  # a bad call is refused every time, cached or not
        with pytest.raises((ValueError, libattn.AttnError)):
            libattn.forward(q, k, v, kv_lens=[10])
    import threading
    results, errors = {}, []

    def worker(i):
        try:
            local = np.random.default_rng(i)
            for _ in range(20):
                x = randn(local, 1, 4, 1, 16)
                got = libattn.forward(x, k, v, kv_splits=3)
                if not np.array_equal(got, _uncached(x, k, v, kv_splits=3)):
                    errors.append(i)
            results[i] = True
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4

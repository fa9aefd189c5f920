# SPDX-License-Identifier: MIT
"""k_tail (attn.h 1.9): key rows in two parts, against the same call on whole rows."""

import numpy as np
import pytest

import libattn


def _case(rng, n, tail_dtype=np.float32):
    b, hq, hkv, lq, lk, d, dv = 2, 4, 2, 3, 37, 48, 24
    q = rng.standard_normal((b, hq, lq, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, lk, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, lk, dv)).astype(np.float32)
    k[..., d - n:] = k[..., d - n:].astype(tail_dtype).astype(np.float32)
    return q, k, v


@pytest.mark.parametrize("n", [1, 16, 47])
@pytest.mark.parametrize("tail_dtype", [np.float32, np.float16])
def test_tail_matches_whole_rows(n, tail_dtype):
    rng = np.random.default_rng(n)
    q, k, v = _case(rng, n, tail_dtype)
    d = q.shape[-1]
    main = np.ascontiguousarray(k[..., :d - n])
    tail = k[..., d - n:].astype(tail_dtype)
    for fn, args in ((libattn.forward, (q, k, v)), (libattn.scores, (q, k))):
        want = fn(*args, causal=True)
        got = fn(q, main, *args[2:], causal=True, k_tail=tail)
        # the same values in f32 either way; rows decoded into scratch may
        # take other tiles: within the F32 bound, not always the same bits
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_tail_in_place_and_broadcast():
    rng = np.random.default_rng(7)
    q, k, v = _case(rng, 8)
    d = q.shape[-1]
    # the rope part of one shared row per (batch, head): a broadcast axis
    tail = rng.standard_normal((2, 2, 1, 8)).astype(np.float32)
    k[..., d - 8:] = tail
    got = libattn.forward(q, np.ascontiguousarray(k[..., :d - 8]), v, k_tail=tail)
    np.testing.assert_allclose(got, libattn.forward(q, k, v), rtol=1e-5, atol=1e-5)


def test_tail_errors():
    rng = np.random.default_rng(3)
    q, k, v = _case(rng, 8)
    d = q.shape[-1]
    main = k[..., :d - 8].copy()
    with pytest.raises(ValueError, match="k_tail's 9"):
        libattn.forward(q, main, v, k_tail=np.zeros((2, 2, 37, 9), np.float32))
    with pytest.raises(ValueError, match="does not broadcast"):
        libattn.forward(q, main, v, k_tail=np.zeros((3, 2, 37, 8), np.float32))
    out, lse = libattn.forward(q, k, v, stats=True)[0], None
    with pytest.raises(TypeError):  # the backward takes no tail (attn.h 1.9)
        libattn.backward(q, main, v, out, out, lse, k_tail=np.zeros((2, 2, 37, 8), np.float32))

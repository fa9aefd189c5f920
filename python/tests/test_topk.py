# SPDX-License-Identifier: MIT
"""topk_indices (attn.h 1.7): the selection is the BOOL mask of the listed
keys, for forward, weights and backward, on lists with repeats and -1
slots; bad entries raise before anything is written."""
import numpy as np
import pytest

import libattn


def _problem(seed, B=2, H=4, Hkv=2, L=5, K=70, D=32, k=9):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, L, D), dtype=np.float32)
    kk = rng.standard_normal((B, Hkv, K, D), dtype=np.float32)
    v = rng.standard_normal((B, Hkv, K, D), dtype=np.float32)
    idx = rng.integers(-1, K, size=(B, L, k)).astype(np.int32)
    idx[:, :, 0] = idx[:, :, 1]  # a repeat in every row
    mask = np.zeros((B, H, L, K), bool)
    for b in range(B):
        for i in range(L):
            for j in idx[b, i]:
                if j >= 0:
                    mask[b, :, i, j] = True
    return q, kk, v, idx, mask


@pytest.mark.parametrize("causal", [False, True])
def test_forward_is_the_mask_of_the_lists(causal):
    q, k, v, idx, mask = _problem(1)
    got = libattn.forward(q, k, v, causal=causal, topk_indices=idx)
    want = libattn.forward(q, k, v, causal=causal, mask=mask)
    # two f32 computations of one problem: within rounding of each other
    np.testing.assert_allclose(got, want, atol=2e-6, rtol=0)
    w_got = libattn.weights(q, k, causal=causal, topk_indices=idx)
    w_want = libattn.weights(q, k, causal=causal, mask=mask)
    np.testing.assert_allclose(w_got, w_want, atol=1e-6, rtol=0)


def test_one_table_for_every_sequence():
    q, k, v, idx, _ = _problem(2)
    shared = idx[0]
    both = np.stack([shared, shared])
    np.testing.assert_array_equal(libattn.forward(q, k, v, topk_indices=shared),
                                  libattn.forward(q, k, v, topk_indices=both))


def test_backward_is_the_mask_of_the_lists():
    q, k, v, idx, mask = _problem(3)
    dout = np.random.default_rng(4).standard_normal(q.shape, dtype=np.float32)
    o1, st1 = libattn.forward(q, k, v, causal=True, topk_indices=idx, stats=("lse",))
    o2, st2 = libattn.forward(q, k, v, causal=True, mask=mask, stats=("lse",))
    got = libattn.backward(q, k, v, o1, dout, st1["lse"], causal=True, topk_indices=idx)
    want = libattn.backward(q, k, v, o2, dout, st2["lse"], causal=True, mask=mask)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=0)


@pytest.mark.parametrize("bad", [70, -2])
def test_bad_entries_raise(bad):
    q, k, v, idx, _ = _problem(5)
    idx[1, 2, 3] = bad
    with pytest.raises(libattn.AttnError):
        libattn.forward(q, k, v, topk_indices=idx)
    with pytest.raises(ValueError):
        libattn.forward(q, k, v, topk_indices=idx[:, :2])

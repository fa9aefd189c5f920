# SPDX-License-Identifier: MIT
"""k_positions= (attn.h 1.11): a position per key slot. A cache whose slots
hold the keys shuffled, some empty (-1), against the same keys sorted into
position order with k_pos=: scores column for column (bit for bit where
every row sees every key of the sorted call: no causal, no window), the
rest within float64's bound of conftest.py; then the argument checks.
"""

import numpy as np
import pytest

import libattn
from conftest import C_ULPS, U


def shuffled(seed, B=2, Hq=4, Hkv=2, Lq=3, n=23, holes=4, D=16):
    """(q, sorted k, v, slot k, v, positions, key of each slot) with key j of
    sequence b at position 100 * b + j; the slots hold them shuffled."""
    g = np.random.default_rng(seed)
    q = g.standard_normal((B, Hq, Lq, D), dtype=np.float32)
    ks = g.standard_normal((B, Hkv, n, D), dtype=np.float32)
    vs = g.standard_normal((B, Hkv, n, D), dtype=np.float32)
    slots = n + holes
    kp = g.standard_normal((B, Hkv, slots, D), dtype=np.float32)
    vp = g.standard_normal((B, Hkv, slots, D), dtype=np.float32)
    key_of = np.full((B, slots), -1)
    pos = np.full((B, slots), -1, dtype=np.int64)
    for b in range(B):
        order = g.permutation(slots)
        for t, j in enumerate(order):
            if j < n:
                key_of[b, t] = j
                pos[b, t] = 100 * b + j
                kp[b, :, t] = ks[b, :, j]
                vp[b, :, t] = vs[b, :, j]
    return q, ks, vs, kp, vp, pos, key_of


def test_scores_are_the_sorted_cache_columns():
    q, ks, vs, kp, vp, pos, key_of = shuffled(1)
    B, n, holes = ks.shape[0], ks.shape[2], kp.shape[2] - ks.shape[2]
    # scores takes no q_pos: the queries sit at Lk - Lq + i of each call, so
    # the slots' keys sit `holes` further on, as far from them as sorted
    pos = np.where(key_of >= 0, key_of + holes, -1)
    want = libattn.scores(q, ks, alibi=0.25)
    got = libattn.scores(q, kp, alibi=0.25, k_positions=pos)
    for b in range(B):
        for t in range(pos.shape[1]):
            j = key_of[b, t]
            if j < 0:
                assert np.all(got[b, :, :, t] == -np.inf)
            else:
                assert np.array_equal(got[b, :, :, t], want[b, :, :, j])


@pytest.mark.parametrize("window", [0, 5, (4, 3)])
def test_forward_and_backward_match_the_sorted_cache(window):
    q, ks, vs, kp, vp, pos, key_of = shuffled(2)
    B, n = ks.shape[0], ks.shape[2]
    q_pos = [100 * b + n - q.shape[2] - 1 for b in range(B)]
    kw = dict(causal=True, window=window, alibi=[0.5, 0.25, 0.125, 0.0625], q_pos=q_pos)
    out_s, st_s = libattn.forward(q, ks, vs, k_pos=[100 * b for b in range(B)], stats=True,
                                  **kw)
    out_p, st_p = libattn.forward(q, kp, vp, k_positions=pos, stats=True, **kw)
    # the same softmax over the same keys, summed in another order
    tol = (n + C_ULPS) * U * 4 * np.abs(vs).max()
    assert np.allclose(out_p, out_s, rtol=0, atol=tol)
    assert np.allclose(st_p["lse"], st_s["lse"], rtol=0, atol=(n + C_ULPS) * U * 8)
    dout = np.random.default_rng(3).standard_normal(out_s.shape, dtype=np.float32)
    dq_s, dk_s, dv_s = libattn.backward(q, ks, vs, out_s, dout, st_s["lse"],
                                        k_pos=[100 * b for b in range(B)], **kw)
    dq_p, dk_p, dv_p = libattn.backward(q, kp, vp, out_s, dout, st_s["lse"], k_positions=pos,
                                        **kw)
    assert np.allclose(dq_p, dq_s, rtol=0, atol=1e-5)
    for b in range(B):
        for t in range(pos.shape[1]):
            j = key_of[b, t]
            want_k = dk_s[b, :, j] if j >= 0 else 0.0
            want_v = dv_s[b, :, j] if j >= 0 else 0.0
            assert np.allclose(dk_p[b, :, t], want_k, rtol=0, atol=1e-5)
            assert np.allclose(dv_p[b, :, t], want_v, rtol=0, atol=1e-5)


def test_one_row_for_every_sequence_and_mask_apply():
    """[Lk] gives every sequence the same positions; mask_apply reads them."""
    g = np.random.default_rng(4)
    s = g.standard_normal((2, 1, 3, 6), dtype=np.float32)
    row = [5, -1, 3, 4, 0, 2]
    got = libattn.mask_apply(s, copy=True, causal=True, k_positions=row)
    same = libattn.mask_apply(s, copy=True, causal=True, k_positions=[row, row])
    assert np.array_equal(got, same)
    # query i at Lk - Lq + i = 3 + i: sees positions <= 3 + i, never the empty slot
    for i in range(3):
        for t, p in enumerate(row):
            seen = p >= 0 and p <= 3 + i
            assert (got[:, 0, i, t] == s[:, 0, i, t]).all() if seen else \
                (got[:, 0, i, t] == -np.inf).all()


def test_argument_errors():
    q = np.zeros((2, 4, 3, 8), np.float32)
    k = np.zeros((2, 2, 5, 8), np.float32)
    with pytest.raises(ValueError, match="k_positions: expected"):
        libattn.forward(q, k, k, k_positions=[[0, 1, 2]] * 2)
    with pytest.raises(TypeError):
        libattn.forward(q, k, k, k_positions=[[0.5] * 5] * 2)
    with pytest.raises(libattn.AttnError, match="k_positions and opt->k_pos are both given"):
        libattn.forward(q, k, k, k_positions=[[0, 1, 2, 3, 4]] * 2, k_pos=0)
    with pytest.raises(libattn.AttnError, match=r"opt->k_positions\[7\] = 4611686018427387905 "
                                                r"\(sequence 1, key 2\): above 2\^62"):
        libattn.forward(q, k, k, k_positions=[[0, 1, 2, 3, 4], [0, 1, 2 ** 62 + 1, 3, 4]])
    # a slot past the sequence's keys is never read
    out = libattn.forward(q, k, k, kv_lens=[5, 2],
                          k_positions=[[0, 1, 2, 3, 4], [0, 1, 2 ** 62 + 1, 3, 4]])
    assert np.isfinite(out).all()

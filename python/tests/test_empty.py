# SPDX-License-Identifier: MIT
"""Empty problems: a zero batch, head count, query length or key length.

The library is not called for them; the binding writes what attn.h's
conventions make of them. With no key at all every query row is a row that
sees no key: output 0, lse = max_score = -inf, entropy 0, or with a sink z
lse = max_score = z (NaN for a NaN or +inf sink, the output too); padded
rows (i >= q_lens[b]) have no sink. The tests hold that to the library's
own answer for such rows (one key hidden by kv_lens = 0) bit for bit, and
libattn.torch to torch's math path (softmax over no key, then a product
with no term: zeros).
"""

import math

import numpy as np
import pytest

import libattn


def arrays(rng, *shapes):
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


SINKS = np.float32([1.5, -np.inf, np.nan, np.inf])


@pytest.mark.parametrize("kw", [dict(), dict(causal=True, window=3), dict(sinks=SINKS),
                                dict(sinks=SINKS, q_lens=[3, 1]), dict(sinks=0.25)],
                         ids=["plain", "causal_window", "sinks", "sinks_q_lens", "one_sink"])
def test_no_keys_is_rows_that_see_no_key(rng, kw):
    """kv_len 0 gives, bit for bit, what the library gives rows whose only
    key is hidden (kv_lens = 0): forward's out and stats, weights' stats."""
    B, H, L, D = 2, 4, 3, 8
    q, k, v = arrays(rng, (B, H, L, D), (B, H, 1, D), (B, H, 1, D))
    got, got_st = libattn.forward(q, k[:, :, :0], v[:, :, :0], stats=True, **kw)
    want, want_st = libattn.forward(q, k, v, stats=True, kv_lens=0, **kw)
    np.testing.assert_array_equal(got, want)
    for name in want_st:
        np.testing.assert_array_equal(got_st[name], want_st[name], err_msg=name)
    w, w_st = libattn.weights(q, k[:, :, :0], stats=True, **kw)
    assert w.shape == (B, H, L, 0)
    _, want_wst = libattn.weights(q, k, stats=True, kv_lens=0, **kw)
    for name in want_wst:
        np.testing.assert_array_equal(w_st[name], want_wst[name], err_msg=name)
    assert libattn.scores(q, k[:, :, :0], **{n: x for n, x in kw.items() if n != "sinks"}
                          ).shape == (B, H, L, 0)
    # into a given out, of a 16-bit dtype too
    out = np.full((B, H, L, D), 7, np.float16)
    libattn.forward(q, k[:, :, :0], v[:, :, :0], out=out, **kw)
    np.testing.assert_array_equal(out, want.astype(np.float16))


def test_empty_shapes_and_gradients(rng):
    """Zero query rows, batch or heads: empty results; the gradients of an
    empty problem are zeros of the inputs' shapes (nothing depends on what
    is not there), dbias and dsinks included."""
    B, H, L, D = 2, 2, 5, 8
    q, k, v = arrays(rng, (B, H, L, D), (B, H, L, D), (B, H, L, D))
    cases = {"Lq=0": (q[:, :, :0], k, v), "Lk=0": (q, k[:, :, :0], v[:, :, :0]),
             "B=0": (q[:0], k[:0], v[:0]), "H=0": (q[:, :0], k[:, :0], v[:, :0])}
    for name, (qq, kk, vv) in cases.items():
        out, st = libattn.forward(qq, kk, vv, stats=True, causal=True, sinks=0.5)
        assert out.shape == qq.shape and st["lse"].shape == qq.shape[:3], name
        assert not np.any(out), name
        assert libattn.weights(qq, kk).shape == qq.shape[:3] + kk.shape[2:3], name
        dout = rng.standard_normal(out.shape).astype(np.float32)
        grads = libattn.backward(qq, kk, vv, out, dout, st["lse"], causal=True, sinks=0.5,
                                 dbias=True, dsinks=True)
        shapes = [qq.shape, kk.shape, vv.shape, qq.shape[:3] + kk.shape[2:3], qq.shape[:2]]
        assert [g.shape for g in grads] == shapes, name
        assert all(g.dtype == np.float32 and not np.any(g) for g in grads), name
    # [L, D] operands and a mask / bias as wide as the (empty) key axis
    assert not np.any(libattn.forward(q[0, 0], k[0, 0, :0], v[0, 0, :0],
                                      mask=np.ones((L, 0), bool), bias=np.zeros((1, 0))))
    # rows of no values are still an error (torch's 1/sqrt(0) has no meaning)
    with pytest.raises(ValueError, match="rows of no values"):
        libattn.forward(q[..., :0], k[..., :0], v)


def test_empty_without_numpy_buffers():
    q = libattn.Tensor(bytearray(4 * 2 * 3 * 4), (2, 3, 4), dtype="f32")
    k = libattn.Tensor(bytearray(0), (2, 0, 4), dtype="f32")
    out, st = libattn.forward(q, k, k, stats=True)
    assert isinstance(out, libattn.Tensor) and out.shape == (2, 3, 4)
    assert out.tolist() == [[[0.0] * 4] * 3] * 2
    assert st["lse"].tolist() == [[-math.inf] * 3] * 2
    grads = libattn.backward(q, k, k, out, out, st["lse"])
    assert [g.shape for g in grads] == [(2, 3, 4), (2, 0, 4), (2, 0, 4)]


def test_empty_layouts(rng):
    """A packed batch without keys (cu_seqlens_k all equal) and one without
    query rows: the sequences' rows as rows without keys; forward, weights
    and backward make no library call."""
    H, D = 2, 8
    q = rng.standard_normal((5, H, D)).astype(np.float32)
    k = np.zeros((0, H, D), np.float32)
    cu_q, cu_k = [0, 3, 5], [0, 0, 0]
    out, st = libattn.forward(q, k, k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, stats=True,
                              sinks=np.float32([0.5, np.nan]))
    assert out.shape == (5, H, D)
    assert not np.any(out[:, 0]) and np.isnan(out[:, 1]).all()
    np.testing.assert_array_equal(st["lse"], [[0.5] * 5, [np.nan] * 5])
    grads = libattn.backward(q, k, k, out, np.ones_like(out), st["lse"], cu_seqlens_q=cu_q,
                             cu_seqlens_k=cu_k)
    assert [g.shape for g in grads] == [q.shape, k.shape, k.shape]
    assert not np.any(grads[0])
    kk = rng.standard_normal((4, H, D)).astype(np.float32)
    out = libattn.forward(q[:0], kk, kk, cu_seqlens_q=[0, 0, 0], cu_seqlens_k=[0, 1, 4])
    assert out.shape == (0, H, D)


def test_prepare_refuses_an_empty_problem(rng):
    q, k = arrays(rng, (1, 2, 3, 8), (1, 2, 0, 8))
    with pytest.raises(ValueError, match="nothing to plan"):
        libattn.prepare(q, k, k)
    for _ in range(2):  # forward() then takes the normal path, twice the same
        assert not np.any(libattn.forward(q, k, k))


# ------------------------------------------------------------------ torch

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("shapes", [
    ((2, 3, 0, 8), (2, 3, 5, 8), (2, 3, 5, 6)),   # no query rows
    ((2, 3, 4, 8), (2, 3, 0, 8), (2, 3, 0, 6)),   # no keys
    ((0, 3, 4, 8), (0, 3, 5, 8), (0, 3, 5, 6)),   # no batch
    ((2, 0, 4, 8), (2, 0, 5, 8), (2, 0, 5, 6)),   # no heads
], ids=["Lq0", "Lk0", "B0", "H0"])
def test_torch_empty_matches_torch(rng, shapes):
    """Output and gradients as torch's math path gives them: empty, or zeros
    for queries without keys; a float mask's gradient too."""
    torch = _torch()
    import libattn.torch as lt
    q, k, v = (torch.tensor(rng.standard_normal(s), dtype=torch.float32, requires_grad=True)
               for s in shapes)
    bias = torch.zeros(shapes[0][2], shapes[1][2], requires_grad=True)
    out = lt.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    dout = torch.ones(out.shape)
    out.backward(dout)
    q64, k64, v64, b64 = (x.detach().double().requires_grad_() for x in (q, k, v, bias))
    s = q64 @ k64.transpose(-1, -2) / math.sqrt(q.shape[-1]) + b64
    ref = torch.softmax(s, dim=-1) @ v64
    ref.backward(dout.double())
    assert out.shape == ref.shape and torch.equal(out.double(), ref)
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad),
                      (bias.grad, b64.grad)):
        assert got.shape == want.shape and torch.equal(got.double(), want)
    with torch.no_grad():
        causal = lt.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert causal.shape == ref.shape and not torch.any(causal)


def test_torch_attention_no_keys_with_sinks(rng):
    torch = _torch()
    import libattn.torch as lt
    q = torch.tensor(rng.standard_normal((2, 4, 3, 8)), dtype=torch.float32, requires_grad=True)
    k = torch.zeros(2, 4, 0, 8, requires_grad=True)
    sinks = torch.tensor([0.5, 1.0, -2.0, 3.0], requires_grad=True)
    out = lt.attention(q, k, k, sinks=sinks, causal=True)
    out.sum().backward()
    assert out.shape == (2, 4, 3, 8) and not torch.any(out)
    assert not torch.any(q.grad) and k.grad.shape == k.shape
    assert sinks.grad.shape == (4,) and not torch.any(sinks.grad)

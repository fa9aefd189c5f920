# SPDX-License-Identifier: MIT
"""libattn.backward against the float64 gradients of grad_reference.py."""

import numpy as np
import pytest

import libattn
from conftest import assert_close
from grad_reference import grads

B, HQ, HK, LQ, LK, D, DV = 2, 4, 2, 5, 9, 16, 7
CASES = {
    "none": {},
    "causal": {"causal": True},
    "lens": {"kv_lens": [9, 0], "q_lens": [5, 2]},
    "window": {"window": 3, "causal": True},
    "bool_mask": {"mask": "bool"},
    "bias": {"bias": "bias"},
    "softcap": {"softcap": 2.5},
    "scale": {"scale": 0.7},
    "all": {"causal": True, "window": 4, "kv_lens": [8, 6], "q_lens": [5, 3],
            "mask": "bool", "bias": "bias", "softcap": 5.0, "scale": 0.3},
}


def make(rng, spec):
    kw = dict(spec)
    if kw.get("mask") == "bool":
        kw["mask"] = rng.random((LQ, LK)) < 0.7
    if kw.get("bias") == "bias":
        kw["bias"] = rng.standard_normal((HQ, 1, LK)).astype(np.float32)
    q = rng.standard_normal((B, HQ, LQ, D)).astype(np.float32)
    k = rng.standard_normal((B, HK, LK, D)).astype(np.float32)
    v = rng.standard_normal((B, HK, LK, DV)).astype(np.float32)
    dout = rng.standard_normal((B, HQ, LQ, DV)).astype(np.float32)
    return q, k, v, dout, kw


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_matches_reference(rng, name):
    q, k, v, dout, kw = make(rng, CASES[name])
    out, st = libattn.forward(q, k, v, stats=True, **kw)
    dq, dk, dv, dbias = libattn.backward(q, k, v, out, dout, st["lse"], dbias=True, **kw)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert dbias.shape == (B, HQ, LQ, LK)
    want, tol = grads(q, k, v, dout, st["lse"], out, **kw)
    for name_, got in (("dq", dq), ("dk", dk), ("dv", dv), ("dbias", dbias)):
        assert not np.isnan(got).any()
        assert_close(got, want[name_], tol[name_], name_)


def test_backward_threads_bitwise(rng):
    q, k, v, dout, kw = make(rng, CASES["all"])
    out, st = libattn.forward(q, k, v, stats=True, **kw)
    one = libattn.backward(q, k, v, out, dout, st["lse"], dbias=True, threads=1, **kw)
    for threads in (2, 3, 0):
        other = libattn.backward(q, k, v, out, dout, st["lse"], dbias=True, threads=threads, **kw)
        for a, b in zip(one, other):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_backward_layouts_and_ranks(rng):
    q, k, v, dout, kw = make(rng, CASES["causal"])
    out, st = libattn.forward(q, k, v, stats=True, **kw)
    ref = libattn.backward(q, k, v, out, dout, st["lse"], **kw)
    # [B,L,H,D] memory viewed as [B,H,L,D]: passed in place
    tq = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    got = libattn.backward(tq, k, v, out, dout, st["lse"], **kw)
    for a, b in zip(ref, got):
        assert np.array_equal(a, b)
    # 3-D (one batch entry) equals the batch slice
    o3, st3 = libattn.forward(q[1], k[1], v[1], stats=True, **kw_single(kw))
    g3 = libattn.backward(q[1], k[1], v[1], o3, dout[1], st3["lse"], **kw_single(kw))
    for a, b in zip(ref, g3):
        assert np.array_equal(a[1], b)


def kw_single(kw):
    return {key: val for key, val in kw.items() if key not in ("q_lens", "kv_lens")}


def test_backward_errors(rng):
    q, k, v, dout, kw = make(rng, CASES["none"])
    out, st = libattn.forward(q, k, v, stats=True)
    with pytest.raises(ValueError, match="dout"):
        libattn.backward(q, k, v, out, dout[:, :, :2], st["lse"])
    with pytest.raises(ValueError, match="lse"):
        libattn.backward(q, k, v, out, dout, st["lse"][:, :1])
    # a strided lse is copied to the dense array the C side reads
    padded = np.zeros((B, HQ, LQ + 3), dtype=np.float32)
    padded[..., :LQ] = st["lse"]
    a = libattn.backward(q, k, v, out, dout, st["lse"])
    b = libattn.backward(q, k, v, out, dout, padded[..., :LQ])
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    with pytest.raises(TypeError, match="v"):
        libattn.backward(q, k, None, out, dout, st["lse"])


def test_torch_front_end_is_optional():
    # `import libattn` never imports torch; libattn.torch without torch says what to install
    import os
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "import libattn\n"
            "assert sys.modules['torch'] is None\n"
            "try:\n"
            "    import libattn.torch\n"
            "except ImportError as e:\n"
            "    assert 'python3-torch' in str(e), e\n"
            "else:\n"
            "    raise SystemExit('libattn.torch imported without torch')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_backward_with_sinks_and_alibi(rng):
    # numerics are checked in C (float64 gradients, finite differences, every
    # ISA); here: the keywords reach the library, shapes, threads, errors
    q, k, v, dout, kw = make(rng, CASES["causal"])
    kw.update(sinks=rng.standard_normal(HQ).astype(np.float32),
              alibi=libattn.alibi_slopes(HQ), window=(4, 2))
    out, st = libattn.forward(q, k, v, stats=True, **kw)
    one = libattn.backward(q, k, v, out, dout, st["lse"], dsinks=True, **kw)
    assert len(one) == 4 and one[3].shape == (B, HQ) and np.isfinite(one[3]).all()
    other = libattn.backward(q, k, v, out, dout, st["lse"], dsinks=True, threads=3, **kw)
    for a, b in zip(one, other):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    plain = libattn.backward(q, k, v, out, dout, st["lse"], causal=True)
    assert not np.array_equal(plain[0], one[0])  # the modifiers changed the gradients
    with pytest.raises(ValueError, match="dsinks"):
        libattn.backward(q, k, v, out, dout, st["lse"], dsinks=True, causal=True)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_packed_matches_padded(rng, causal):
    # cu_seqlens against the same sequences padded into [B,H,Lmax,D] with
    # lengths: bit for bit (attn.h: a sequence is cut into the same blocks
    # wherever it lies; the batch, hence the plan, is the same), and rows of
    # no sequence stay 0
    lens = [3, 0, 70, 1, 18]
    nb, lmax = len(lens), max(lens)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    t = int(cu[-1])
    q = rng.standard_normal((t, HQ, D)).astype(np.float32)
    k = rng.standard_normal((t, HK, D)).astype(np.float32)
    v = rng.standard_normal((t, HK, DV)).astype(np.float32)
    dout = rng.standard_normal((t, HQ, DV)).astype(np.float32)
    sinks = rng.standard_normal((nb, HQ)).astype(np.float32)
    kw = dict(causal=causal, sinks=sinks)
    out, st = libattn.forward(q, k, v, stats=True, cu_seqlens_q=cu, cu_seqlens_k=cu, **kw)
    dq, dk, dv, dbias, dsinks = libattn.backward(q, k, v, out, dout, st["lse"], dbias=True,
                                                 dsinks=True, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                                 **kw)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert dbias.shape == (HQ, t, t) and dsinks.shape == (nb, HQ)

    def padded(x):  # [T,H,C] -> [B,H,Lmax,C], zeros past each length
        p = np.zeros((nb, x.shape[1], lmax, x.shape[2]), np.float32)
        for b in range(nb):
            p[b, :, :lens[b]] = x[cu[b]:cu[b + 1]].transpose(1, 0, 2)
        return p

    lse = np.full((nb, HQ, lmax), -np.inf, np.float32)
    for b in range(nb):
        lse[b, :, :lens[b]] = st["lse"][:, cu[b]:cu[b + 1]]
    g = libattn.backward(padded(q), padded(k), padded(v), padded(out), padded(dout), lse,
                         q_lens=lens, kv_lens=lens, dbias=True, dsinks=True, **kw)
    for b, n in enumerate(lens):
        s = slice(cu[b], cu[b + 1])
        for got, want in ((dq, g[0]), (dk, g[1]), (dv, g[2])):
            assert np.array_equal(got[s], want[b, :, :n].transpose(1, 0, 2))
        assert np.array_equal(dbias[:, s, s], g[3][b, :, :n, :n])
    assert np.array_equal(dsinks, g[4])


def test_backward_global_positions(rng):
    # q_pos/k_pos: a shard whose keys lie before the queries; against the
    # float64 reference with the same positions written as a mask
    q, k, v, dout, _ = make(rng, {})
    kw = dict(causal=True, q_pos=[6, 2], k_pos=[0, 0])
    out, st = libattn.forward(q, k, v, stats=True, **kw)
    got = libattn.backward(q, k, v, out, dout, st["lse"], **kw)
    qp = np.array(kw["q_pos"])[:, None, None] + np.arange(LQ)[None, :, None]
    kp = np.arange(LK)[None, None, :]
    mask = np.broadcast_to((kp <= qp)[:, None], (B, HQ, LQ, LK))
    want, tol = grads(q, k, v, dout, st["lse"], out, mask=mask)
    for name_, g in zip(("dq", "dk", "dv"), got):
        assert_close(g, want[name_], tol[name_], name_)

# SPDX-License-Identifier: MIT
"""libattn.torch against torch's own autograd through the math path
(matmul, softmax, matmul in float64), bounds from grad_reference.py."""

import io
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import libattn  # noqa: E402
import libattn.torch as lt  # noqa: E402
from conftest import assert_close  # noqa: E402
from grad_reference import grads  # noqa: E402


def math_path(q, k, v, *, bias=None, mask=None, causal_top_left=False, scale=None):
    """torch float64 attention by matmul/softmax/matmul, GQA by repetition."""
    g = q.shape[-3] // k.shape[-3]
    kk, vv = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
    sc = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = (q @ kk.transpose(-1, -2)) * sc
    if bias is not None:
        s = s + bias
    if causal_top_left:
        keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ vv


def leaves(rng, *shapes):
    return [torch.tensor(rng.standard_normal(s), dtype=torch.float32, requires_grad=True)
            for s in shapes]


CASES = [
    dict(name="plain"),
    dict(name="causal", is_causal=True),
    dict(name="causal_rect", is_causal=True, lk=12),
    dict(name="bool_mask", mask=True),
    dict(name="float_mask", bias=True),
    dict(name="scale_gqa", scale=0.4, gqa=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_sdpa_matches_math_path(rng, case):
    B, HQ, LQ, D, DV = 2, 4, 7, 8, 5
    HK = 2 if case.get("gqa") else HQ
    LK = case.get("lk", LQ)
    q, k, v = leaves(rng, (B, HQ, LQ, D), (B, HK, LK, D), (B, HK, LK, DV))
    mask = torch.tensor(rng.random((LQ, LK)) < 0.7) if case.get("mask") else None
    bias = torch.tensor(rng.standard_normal((1, HQ, 1, LK)), dtype=torch.float32,
                        requires_grad=True) if case.get("bias") else None
    attn_mask = mask if mask is not None else bias
    dout = torch.tensor(rng.standard_normal((B, HQ, LQ, DV)), dtype=torch.float32)

    out = lt.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                          is_causal=case.get("is_causal", False),
                                          scale=case.get("scale"),
                                          enable_gqa=case.get("gqa", False))
    out.backward(dout)

    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    b64 = bias.detach().double().requires_grad_() if bias is not None else None
    ref = math_path(q64, k64, v64, bias=b64, mask=mask,
                    causal_top_left=case.get("is_causal", False), scale=case.get("scale"))
    ref.backward(dout.double())

    # the bounds, from the forward libattn ran (deterministic: the same bits)
    kw = {}
    if case.get("scale"):
        kw["scale"] = case["scale"]
    if mask is not None:
        kw["mask"] = mask.numpy()
    if case.get("is_causal"):
        kw["mask"] = np.tril(np.ones((LQ, LK), dtype=bool))
    if bias is not None:
        kw["bias"] = bias.detach().numpy()
    qn, kn, vn = (x.detach().numpy() for x in (q, k, v))
    o32, st = libattn.forward(qn, kn, vn, stats=True, **kw)
    _, tol = grads(qn, kn, vn, dout.numpy(), st["lse"], o32, **kw)

    dead = ~torch.isfinite(ref.detach()).all(dim=-1)  # torch: NaN rows where nothing is seen
    assert_close(out.detach().numpy()[~dead.numpy()], ref.detach().numpy()[~dead.numpy()],
                 1e-5, "out")  # the forward has its own bound tests; this checks the wiring
    for name, got, want in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad),
                            ("dv", v.grad, v64.grad)):
        assert_close(got.numpy(), want.numpy(), tol[name], name)
    if bias is not None:
        full = tol["dbias"].sum(axis=(0, 2), keepdims=True)  # bias [1,H,1,Lk]: summed
        assert_close(bias.grad.numpy(), b64.grad.numpy(), full, "dbias")


def test_autograd_function_gradcheck_shape_and_dtypes(rng):
    q, k, v = leaves(rng, (3, 6, 4), (3, 9, 4), (3, 9, 4))
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        qd, kd, vd = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
        out = lt.attention(qd, kd, vd, causal=True)
        assert out.dtype == dtype and out.shape == (3, 6, 4)
        out.float().sum().backward()
        assert qd.grad.dtype == dtype and kd.grad.shape == kd.shape
        assert torch.isfinite(qd.grad.float()).all()


def test_no_copy_for_transposed_layout(rng):
    # [B, L, H, D] storage viewed as [B, H, L, D]: the binding reads it in place
    base = torch.tensor(rng.standard_normal((1, 5, 2, 8)), dtype=torch.float32)
    q = base.transpose(1, 2).requires_grad_()
    k = base.transpose(1, 2).clone().requires_grad_()
    v = base.transpose(1, 2).clone().requires_grad_()
    out = lt.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.sum().backward()
    assert q.grad.shape == q.shape and torch.isfinite(q.grad).all()


def test_sdpa_arguments():
    q = torch.zeros(1, 4, 3, 4)
    with pytest.raises(NotImplementedError):
        lt.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="enable_gqa"):
        lt.scaled_dot_product_attention(q, torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError):
        lt.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 3, dtype=torch.bool),
                                        is_causal=True)


def _torch_sdpa():
    # torch 1.13's own SDPA (private there), to compare what torch raises
    import torch.nn.functional as F
    fn = getattr(F, "scaled_dot_product_attention", None) or \
        getattr(F, "_scaled_dot_product_attention", None)
    if fn is None:
        pytest.skip("this torch has no scaled_dot_product_attention")
    return fn


def test_sdpa_misuse_raises_runtime_error():
    """What torch refuses with a RuntimeError, libattn.torch refuses with an
    ArgumentError: a RuntimeError as torch's, and a ValueError as before
    (and ArgumentTypeError: a RuntimeError and a TypeError)."""
    sdpa = lt.scaled_dot_product_attention
    q = torch.zeros(1, 4, 3, 8)
    k3 = torch.zeros(1, 3, 3, 8)
    bool_mask = torch.ones(3, 3, dtype=torch.bool)
    cases = [
        ("is_causal", lambda: sdpa(q, q, q, attn_mask=bool_mask, is_causal=True)),
        ("at least 2 dimensions", lambda: sdpa(q[0, 0, 0], q[0, 0, 0], q[0, 0, 0])),
        ("enable_gqa", lambda: sdpa(q, k3, k3)),
        ("3 heads do not divide", lambda: sdpa(q, k3, k3, enable_gqa=True)),
        ("head_dim", lambda: sdpa(q, q[..., :4], q)),
        ("does not broadcast", lambda: sdpa(q, q, q, attn_mask=torch.ones(2, 2, dtype=torch.bool))),
        ("window", lambda: torch.ops.libattn.attention(q, q, q, window=[1, 2, 3])),
        ("is_causal", lambda: torch.ops.libattn.scaled_dot_product_attention(
            q, q, q, bool_mask, 0.0, True)),
    ]
    for match, call in cases:
        with pytest.raises(RuntimeError, match=match) as err:
            call()
        assert isinstance(err.value, lt.ArgumentError) and isinstance(err.value, ValueError)
    with pytest.raises(RuntimeError) as err:
        sdpa(q.half(), q.bfloat16(), q.bfloat16())
    assert isinstance(err.value, lt.ArgumentTypeError) and isinstance(err.value, TypeError)
    with pytest.raises(TypeError, match="no_such"):
        lt.attention(q, q, q, no_such=1)
    # torch itself raises a RuntimeError for the same misuses
    theirs = _torch_sdpa()
    with pytest.raises(RuntimeError):
        theirs(q, q, q, bool_mask, 0.0, False, True)
    with pytest.raises(RuntimeError):
        theirs(q, k3, k3, None, 0.0, False, False)


def test_sdpa_scale_zero_averages_v(rng):
    """scale=0.0 is torch's zero scale (not libattn's default): every score
    q.k * 0 is 0, plus the float mask, so a row is the mean of v over its
    visible keys; dq and dk are 0, and a non-finite q.k gives NaN as torch."""
    B, H, L, S, D = 2, 3, 5, 7, 8
    q, k, v = leaves(rng, (B, H, L, D), (B, H, S, D), (B, H, S, D))
    bias = torch.tensor(rng.standard_normal((H, L, S)), dtype=torch.float32, requires_grad=True)
    dout = torch.tensor(rng.standard_normal((B, H, L, D)), dtype=torch.float32)
    out = lt.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.0)
    out.backward(dout)
    q64, k64, v64, b64 = (x.detach().double().requires_grad_() for x in (q, k, v, bias))
    ref = math_path(q64, k64, v64, bias=b64, scale=0.0)
    ref.backward(dout.double())
    assert torch.allclose(out.double(), ref, atol=1e-6)
    assert torch.count_nonzero(q.grad) == 0 and torch.count_nonzero(k.grad) == 0
    for got, want in ((v.grad, v64.grad), (bias.grad, b64.grad)):
        assert torch.allclose(got.double(), want, atol=1e-5)
    # causal: row i is the mean of v[:i + 1]
    with torch.no_grad():
        causal = lt.scaled_dot_product_attention(q, k[:, :, :L], v[:, :, :L], is_causal=True,
                                                 scale=0.0)
        means = v[:, :, :L].cumsum(2) / torch.arange(1, L + 1).reshape(L, 1)
        assert torch.allclose(causal, means, atol=1e-6)
        bad = q.detach().clone()
        bad[0, 0, 1, 2] = float("inf")
        got = lt.scaled_dot_product_attention(bad, k, v, scale=0.0)
        want = math_path(bad.double(), k.double(), v.double(), scale=0.0)
        assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.isnan(got).any()


def test_sdpa_torch_shapes(rng):
    """torch's layouts libattn does not state: more than 4 dimensions (the
    leading ones one batch) and a single key head broadcast over the query
    heads without enable_gqa."""
    q, k, v = leaves(rng, (2, 3, 4, 5, 8), (2, 3, 4, 6, 8), (2, 3, 4, 6, 8))
    mask = torch.tensor(rng.random((3, 1, 5, 6)) < 0.8)
    out = lt.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    flat = [x.detach().reshape(6, 4, x.shape[-2], 8) for x in (q, k, v)]
    want = lt.scaled_dot_product_attention(*flat, attn_mask=mask.expand(2, 3, 4, 5, 6)
                                           .reshape(6, 4, 5, 6))
    assert out.shape == (2, 3, 4, 5, 8) and torch.equal(out.detach().reshape(6, 4, 5, 8), want)
    out.sum().backward()
    assert q.grad.shape == q.shape and torch.isfinite(q.grad).all()
    with torch.no_grad():
        mq = lt.scaled_dot_product_attention(q[0], k[0, :, :1], v[0, :, :1])
        assert torch.equal(mq, lt.scaled_dot_product_attention(q[0], k[0, :, :1], v[0, :, :1],
                                                               enable_gqa=True))
        theirs = _torch_sdpa()(q[0], k[0, :, :1], v[0, :, :1], None, 0.0, False, False)
        assert torch.allclose(mq, theirs[0] if isinstance(theirs, tuple) else theirs,
                              atol=1e-5)


@pytest.mark.parametrize("B,H,L,D,causal", [(1, 4, 256, 128, True), (1, 4, 512, 64, False),
                                           (2, 2, 300, 128, True)])
def test_bf16_mode_error_against_torch_bf16(B, H, L, D, causal):
    """precision='bf16' against float64 is at most twice as far off as the
    same formula computed in bf16 by torch (FlashAttention's acceptance rule
    for its bf16 kernels): fixed inputs, so the result is deterministic.
    Measured on Zen 5: 0.43-0.58 of torch's error."""
    rng = np.random.default_rng(B * 1000 + L)
    q, k, v = (rng.standard_normal((B, H, L, D)).astype(np.float32) for _ in range(3))
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64)) / math.sqrt(D)
    if causal:
        s = np.where(np.tril(np.ones((L, L), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    ours = libattn.forward(q, k, v, causal=causal, precision="bf16")
    tq, tk, tv = (torch.from_numpy(x).bfloat16() for x in (q, k, v))
    st = (tq @ tk.transpose(-1, -2)) / math.sqrt(D)
    if causal:
        st = st.masked_fill(~torch.tril(torch.ones(L, L, dtype=torch.bool)), float("-inf"))
    theirs = (torch.softmax(st, -1) @ tv).float().numpy()
    assert np.abs(ours - ref).max() <= 2.0 * np.abs(theirs - ref).max()


def test_sinks_alibi_window_gradients(rng):
    # sinks get their gradient; ALiBi and a two-sided window are constants;
    # against torch's float64 math path with the sink as an extra logit
    B, HQ, HK, L, D = 2, 4, 2, 9, 8
    q, k, v = leaves(rng, (B, HQ, L, D), (B, HK, L, D), (B, HK, L, D))
    sinks = torch.tensor(rng.standard_normal((B, HQ)), dtype=torch.float32, requires_grad=True)
    slopes = np.float32(rng.uniform(0.1, 0.9, HQ))
    out = lt.attention(q, k, v, sinks=sinks, alibi=slopes, window=(4, 3))
    dout = torch.tensor(rng.standard_normal(out.shape), dtype=torch.float32)
    out.backward(dout)

    q64, k64, v64, s64 = (x.detach().double().requires_grad_() for x in (q, k, v, sinks))
    i = torch.arange(L)[:, None]
    j = torch.arange(L)[None, :]
    keep = (j > i - 4) & (j < i + 3)
    g = HQ // HK
    s = (q64 @ k64.repeat_interleave(g, 1).transpose(-1, -2)) / math.sqrt(D)
    s = s - torch.tensor(slopes, dtype=torch.float64)[None, :, None, None] * (i - j).abs()
    s = s.masked_fill(~keep, float("-inf"))
    logits = torch.cat([s, s64[:, :, None, None].expand(B, HQ, L, 1)], dim=-1)
    p = torch.softmax(logits, dim=-1)[..., :L]
    ref = p @ v64.repeat_interleave(g, 1)
    ref.backward(dout.double())
    assert torch.allclose(out.double(), ref, atol=1e-5)
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad),
                      (sinks.grad, s64.grad)):
        assert torch.allclose(got.double(), want, atol=2e-5), (got - want).abs().max()


def test_packed_cu_seqlens_through_autograd(rng):
    # a packed batch through autograd equals each sequence on its own
    lens = [5, 1, 12]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    t, H, D = int(cu[-1]), 2, 8
    q, k, v = leaves(rng, (t, H, D), (t, H, D), (t, H, D))
    out = lt.attention(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu)
    assert out.shape == (t, H, D)
    dout = torch.tensor(rng.standard_normal(out.shape), dtype=torch.float32)
    out.backward(dout)
    for b in range(len(lens)):
        s = slice(int(cu[b]), int(cu[b + 1]))
        qs, ks, vs = (x.detach()[s].transpose(0, 1).double().requires_grad_() for x in (q, k, v))
        ref = math_path(qs, ks, vs, causal_top_left=True)
        ref.backward(dout[s].transpose(0, 1).double())
        assert torch.allclose(out[s].detach().transpose(0, 1).double(), ref, atol=1e-5)
        for got, want in ((q.grad, qs.grad), (k.grad, ks.grad), (v.grad, vs.grad)):
            assert torch.allclose(got[s].transpose(0, 1).double(), want, atol=2e-5)


def test_float64_gradcheck_recipe(rng):
    # float64 is computed in float32: gradcheck with float32 tolerances
    q, k, v = (torch.tensor(rng.standard_normal(s), dtype=torch.float64, requires_grad=True)
               for s in ((1, 2, 4, 3), (1, 2, 5, 3), (1, 2, 5, 3)))
    out = lt.attention(q, k, v, causal=True)
    assert out.dtype == torch.float64
    assert torch.autograd.gradcheck(lambda a, b, c: lt.attention(a, b, c, causal=True),
                                    (q, k, v), eps=1e-3, atol=1e-2, rtol=1e-2)


def test_double_backward_is_a_clear_error(rng):
    q, k, v = leaves(rng, (1, 2, 4, 3), (1, 2, 4, 3), (1, 2, 4, 3))
    out = lt.attention(q, k, v)
    with pytest.raises(RuntimeError, match="no second derivative"):
        torch.autograd.grad(out.sum(), q, create_graph=True)


def test_mixed_dtypes_and_threads(rng):
    # f32 queries over an f16 cache; and torch's thread count does not change bits
    q = torch.tensor(rng.standard_normal((1, 4, 6, 8)), dtype=torch.float32, requires_grad=True)
    k = torch.tensor(rng.standard_normal((1, 2, 9, 8)), dtype=torch.float16, requires_grad=True)
    v = torch.tensor(rng.standard_normal((1, 2, 9, 8)), dtype=torch.float16, requires_grad=True)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = lt.attention(q, k, v, causal=True)
        one.sum().backward()
        g1 = [x.grad.clone() for x in (q, k, v)]
        for x in (q, k, v):
            x.grad = None
        torch.set_num_threads(2)
        two = lt.attention(q, k, v, causal=True)
        two.sum().backward()
    finally:
        torch.set_num_threads(before)
    assert one.dtype == torch.float32 and k.grad.dtype == torch.float16
    assert torch.equal(one, two)
    for a, x in zip(g1, (q, k, v)):
        assert torch.equal(a, x.grad)


# ------------------------------------------------------------------ torch.library

def _grads_of(fn, tensors, dout):
    for t in tensors:
        t.grad = None
    out = fn()
    out.backward(dout)
    return out.detach().clone(), [t.grad.clone() for t in tensors]


def test_operator_matches_attention_with_gradients(rng):
    """torch.ops.libattn.attention is attention(): the same output and
    gradients bit for bit, keyword by keyword through its schema."""
    B, HQ, HK, LQ, LK, D = 2, 4, 2, 6, 9, 8
    q, k, v = leaves(rng, (B, HQ, LQ, D), (B, HK, LK, D), (B, HK, LK, D))
    sinks = torch.tensor(rng.standard_normal(HQ), dtype=torch.float32, requires_grad=True)
    dout = torch.tensor(rng.standard_normal((B, HQ, LQ, D)), dtype=torch.float32)
    for kw in (dict(causal=True), dict(window=[3, 1], kv_lens=[9, 7], q_lens=[6, 4]),
               dict(window=[4], softcap=5.0, scale=0.3),
               dict(alibi=torch.tensor(libattn.alibi_slopes(HQ)), q_pos=[3, 0], k_pos=[0, 0])):
        direct_kw = dict(kw)
        if "window" in kw:
            w = kw["window"]
            direct_kw["window"] = tuple(w) if len(w) == 2 else w[0]
        want = _grads_of(lambda: lt.attention(q, k, v, sinks=sinks, **direct_kw),
                         (q, k, v, sinks), dout)
        got = _grads_of(lambda: torch.ops.libattn.attention(q, k, v, sinks=sinks, **kw),
                        (q, k, v, sinks), dout)
        assert torch.equal(want[0], got[0]), kw
        for a, b in zip(want[1], got[1]):
            assert torch.equal(a, b), kw
    with pytest.raises(ValueError, match="window"):
        torch.ops.libattn.attention(q, k, v, window=[1, 2, 3])


def test_operator_schema_has_every_forward_keyword():
    from libattn._keywords import KEYWORDS
    schema = torch.ops.libattn.attention.default._schema
    names = [a.name for a in schema.arguments]
    assert names == ["q", "k", "v"] + [k.name for k in KEYWORDS if "forward" in k.ops]


def _scripted():
    # torch.jit.script reads the source of what it compiles: a function of
    # this file (not of a string) is what a user's module would be.
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sinks: torch.Tensor):
        a = torch.ops.libattn.attention(q, k, v, causal=True, sinks=sinks, window=[5, 0])
        b = torch.ops.libattn.scaled_dot_product_attention(q, k, v, None, 0.0, True, None, True)
        return a + b
    return torch.jit.script(fn)


def test_jit_script_and_trace(rng):
    B, HQ, HK, L, D = 1, 4, 2, 7, 8
    q, k, v = leaves(rng, (B, HQ, L, D), (B, HK, L, D), (B, HK, L, D))
    sinks = torch.tensor(rng.standard_normal(HQ), dtype=torch.float32, requires_grad=True)
    dout = torch.tensor(rng.standard_normal((B, HQ, L, D)), dtype=torch.float32)

    def eager():
        return (lt.attention(q, k, v, causal=True, sinks=sinks, window=(5, 0))
                + lt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))

    scripted = _scripted()
    want = _grads_of(eager, (q, k, v, sinks), dout)
    got = _grads_of(lambda: scripted(q, k, v, sinks), (q, k, v, sinks), dout)
    assert torch.equal(want[0], got[0])
    assert all(torch.equal(a, b) for a, b in zip(want[1], got[1]))

    # trace: one libattn::attention node, replayed at another length
    traced = torch.jit.trace(
        lambda q, k, v: torch.ops.libattn.attention(q, k, v, causal=True), (q, k, v))
    nodes = [n.kind() for n in traced.graph.nodes()]
    assert nodes.count("libattn::attention") == 1, nodes
    q2, k2, v2 = leaves(rng, (B, HQ, 3, D), (B, HK, 11, D), (B, HK, 11, D))
    assert torch.equal(traced(q2, k2, v2), lt.attention(q2, k2, v2, causal=True))


class _Layer(torch.nn.Module):
    """A model's attention as a user writes it: the functions, not the operators."""

    def forward(self, q, k, v, bias):
        slopes = np.float32([0.25, 0.5])
        return (lt.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=False)
                + lt.attention(q, k, v, causal=True, window=(4, 0), kv_lens=5, alibi=slopes,
                               sinks=bias[0, 0, 0, :2]))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_trace_of_the_functions_records_the_operators(rng, grad):
    """torch.jit.trace of a module calling libattn.torch's functions records
    one operator node per call (no constant output, no warning), with and
    without gradients; the trace replays new inputs at new shapes, with
    gradients, also after a torch.jit.save / load round trip."""
    def inputs(B, L):
        q, k, v = leaves(rng, (B, 2, L, 8), (B, 2, L, 8), (B, 2, L, 8))
        bias = torch.tensor(rng.standard_normal((1, 1, L, L)), dtype=torch.float32,
                            requires_grad=True)
        return q, k, v, bias

    example = inputs(1, 6)
    if not grad:
        example = tuple(x.detach() for x in example)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch.jit.TracerWarning)
        with torch.set_grad_enabled(grad):
            traced = torch.jit.trace(_Layer(), example)
    nodes = [n.kind() for n in traced.graph.nodes()]
    assert nodes.count("libattn::scaled_dot_product_attention") == 1, nodes
    assert nodes.count("libattn::attention") == 1, nodes
    buf = io.BytesIO()
    torch.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    for B, L in ((1, 6), (3, 9)):
        x = inputs(B, L)
        dout = torch.tensor(rng.standard_normal((B, 2, L, 8)), dtype=torch.float32)
        want = _grads_of(lambda: _Layer()(*x), x, dout)
        for module in (traced, loaded):
            got = _grads_of(lambda: module(*x), x, dout)
            assert torch.equal(want[0], got[0]), (B, L)
            assert all(torch.equal(a, b) for a, b in zip(want[1], got[1])), (B, L)
        with torch.no_grad():
            assert torch.equal(loaded(*x), _Layer()(*x))


TRACED_KEYWORDS = [
    dict(q_lens=4, kv_lens=np.int64(5), causal=True, scale=np.float32(0.3), threads=2),
    dict(window=(3, 2), alibi=[0.5, 0.25], sinks=0.5, softcap=20.0, precision="default"),
    dict(mask=np.tril(np.ones((6, 6), bool)), q_pos=[0, 2], k_pos=np.array([0, 0]),
         kv_splits=2),
    dict(tree_parents=[-1, 0, 0, 1, 1, 2], causal=True, window=4),
    dict(cu_seqlens_q=np.array([0, 2, 6], np.int32), cu_seqlens_k=[0, 2, 6], causal=True),
]


@pytest.mark.parametrize("kw", TRACED_KEYWORDS, ids=["lens", "window", "mask", "tree", "packed"])
def test_trace_keeps_every_keyword(rng, kw):
    """Each keyword goes through the operator's schema as attention() reads
    it (ints, NumPy values, lists, tensors made of them): a traced call is
    one node and gives eager's bits."""
    shape = (6, 2, 8) if "cu_seqlens_q" in kw else (2, 2, 6, 8)
    q, k, v = leaves(rng, shape, shape, shape)
    with torch.no_grad():
        traced = torch.jit.trace(lambda q, k, v: lt.attention(q, k, v, **kw), (q, k, v))
        nodes = [n.kind() for n in traced.graph.nodes()]
        assert nodes.count("libattn::attention") == 1, nodes
        assert torch.equal(traced(q, k, v), lt.attention(q, k, v, **kw))


@pytest.mark.parametrize("B,H,L,D,causal", [(1, 4, 256, 128, True), (2, 2, 300, 64, True)])
def test_bf16_mode_gradients_against_torch_bf16(B, H, L, D, causal):
    """The backward in precision='bf16' (after a bf16-mode forward) against
    float64 gradients is at most twice as far off as torch's autograd of the
    same formula in bf16 (FlashAttention's rule, as above), per gradient:
    fixed inputs, so the result is deterministic. Where the CPU has no bf16
    dot units the default mode runs, which is closer still."""
    rng = np.random.default_rng(B * 1000 + L + 7)
    q, k, v, dout = (rng.standard_normal((B, H, L, D)).astype(np.float32) for _ in range(4))
    keep = torch.tril(torch.ones(L, L, dtype=torch.bool)) if causal else None

    def torch_grads(dtype):
        tq, tk, tv = (torch.from_numpy(x).to(dtype).requires_grad_() for x in (q, k, v))
        s = (tq @ tk.transpose(-1, -2)) / math.sqrt(D)
        if causal:
            s = s.masked_fill(~keep, float("-inf"))
        (torch.softmax(s, -1) @ tv).backward(torch.from_numpy(dout).to(dtype))
        return [t.grad.double().numpy() for t in (tq, tk, tv)]

    ref = torch_grads(torch.float64)
    theirs = torch_grads(torch.bfloat16)
    out, st = libattn.forward(q, k, v, causal=causal, precision="bf16", stats=True)
    ours = libattn.backward(q, k, v, out, dout, st["lse"], causal=causal, precision="bf16")
    for name, o, t, r in zip("qkv", ours, theirs, ref):
        assert np.abs(o - r).max() <= 2.0 * np.abs(t - r).max(), "d" + name

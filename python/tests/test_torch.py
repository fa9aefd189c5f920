"""libattn.torch against torch's own autograd through the math path
(matmul, softmax, matmul in float64), bounds from grad_reference.py."""

import math

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
    q = torch.zeros(1, 2, 3, 4)
    with pytest.raises(NotImplementedError):
        lt.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match="enable_gqa"):
        lt.scaled_dot_product_attention(q, torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4))
    with pytest.raises(ValueError):
        lt.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 3, dtype=torch.bool),
                                        is_causal=True)


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

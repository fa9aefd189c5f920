"""PyTorch front end: attention forward and backward through libattn.

    import torch, libattn.torch as lt
    out = lt.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.sum().backward()          # q.grad, k.grad, v.grad from attn_backward

Needs PyTorch (Debian: python3-torch); `import libattn` itself never imports
torch. Tensors must be on the CPU, float32, float16 or bfloat16 (one dtype
for q, k and v); views whose last axis is contiguous are passed to the
library in place (a [B,L,H,D] tensor transposed to [B,H,L,D] is not
copied), others are copied once. Gradients come back in the inputs' dtype.

Differences from torch.nn.functional.scaled_dot_product_attention:
dropout is not supported (dropout_p must be 0), and a query row that sees no
key gets output 0 and gradient 0 where torch gives NaN.
"""

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("libattn.torch needs PyTorch (Debian: apt-get install python3-torch); "
                      "the rest of libattn works without it") from exc

from . import _ops

__all__ = ["AttentionFunction", "attention", "scaled_dot_product_attention"]

_HALF = {torch.bfloat16: "bf16", torch.float16: None, torch.float32: None}


def _to_numpy(t, name):
    """A NumPy view of a CPU tensor (uint16 bits for bfloat16), and libattn's dtype name."""
    if t.device.type != "cpu":
        raise ValueError("%s: libattn runs on the CPU, got a tensor on %s" % (name, t.device))
    if t.dtype not in _HALF:
        raise TypeError("%s: expected float32, float16 or bfloat16, got %s" % (name, t.dtype))
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "bf16"
    return t.numpy(), None


def _reduce_to(grad, shape):
    """Sum a full-shape gradient over the axes a broadcast operand of `shape` spans."""
    extra = grad.dim() - len(shape)
    if extra:
        grad = grad.sum(dim=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(dim=axes, keepdim=True)
    return grad


class AttentionFunction(torch.autograd.Function):
    """out = attention(q, k, v) with libattn's forward and attn_backward.

    apply(q, k, v, bias, mask, causal, scale, softcap, window, threads):
    bias (float, broadcastable to [B,H,Lq,Lk]) gets a gradient when it
    requires one; mask (bool) never does. causal is libattn's bottom-right
    aligned mask (attention() and the SDPA wrapper build torch's top-left
    one as a mask where they differ).
    """

    @staticmethod
    def forward(ctx, q, k, v, bias, mask, causal, scale, softcap, window, threads):
        dtypes = {q.dtype, k.dtype, v.dtype}
        if len(dtypes) != 1:
            raise TypeError("q, k, v: one dtype expected, got %s" % sorted(map(str, dtypes)))
        qn, half = _to_numpy(q, "q")
        kn, _ = _to_numpy(k, "k")
        vn, _ = _to_numpy(v, "v")
        bn = None
        if bias is not None:
            bn = bias.detach().to(torch.float32).numpy() if bias.dtype != torch.float32 \
                else bias.detach().numpy()
        mn = mask.detach().numpy() if mask is not None else None
        kw = dict(causal=bool(causal), scale=float(scale), softcap=float(softcap),
                  window=int(window), mask=mn, bias=bn, threads=threads, dtype=half)
        out, stats = _ops.forward(qn, kn, vn, stats=True, **kw)
        out_t = torch.from_numpy(out)
        lse_t = torch.from_numpy(stats["lse"])
        ctx.kw = kw
        ctx.half = half
        ctx.bias_shape = tuple(bias.shape) if bias is not None else None
        ctx.save_for_backward(q, k, v, out_t, lse_t)
        return out_t.to(q.dtype) if q.dtype != torch.float32 else out_t

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        want_dbias = ctx.bias_shape is not None and ctx.needs_input_grad[3]
        dout = dout.to(torch.float32) if dout.dtype != torch.float32 else dout
        grads = _ops.backward(_to_numpy(q, "q")[0], _to_numpy(k, "k")[0],
                              _to_numpy(v, "v")[0], out.numpy(), dout.detach().numpy(),
                              lse.numpy(), dbias=want_dbias, **ctx.kw)
        dq, dk, dv = (torch.from_numpy(g) for g in grads[:3])
        dbias = None
        if want_dbias:
            dbias = _reduce_to(torch.from_numpy(grads[3]), ctx.bias_shape)
        return (dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), dbias,
                None, None, None, None, None, None)


def attention(q, k, v, *, bias=None, mask=None, causal=False, scale=0.0, softcap=0.0,
              window=0, threads=None):
    """libattn's attention with autograd: the keywords of libattn.forward()."""
    return AttentionFunction.apply(q, k, v, bias, mask, causal, scale, softcap, window,
                                   threads)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *,
                                 threads=None):
    """torch.nn.functional.scaled_dot_product_attention's signature, run by libattn.

    query [..., Hq, L, E], key [..., Hkv, S, E], value [..., Hkv, S, Ev]
    (2 to 4 dimensions). attn_mask: bool (True = may attend) or float
    (added to the scores, differentiable), broadcastable to [.., Hq, L, S].
    is_causal: torch's top-left aligned lower triangle. scale: None means
    1/sqrt(E). enable_gqa: Hkv may divide Hq.
    """
    if dropout_p != 0.0:
        raise NotImplementedError("dropout_p: libattn has no dropout (use 0.0)")
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask and is_causal cannot both be set")
    if query.dim() != key.dim() or query.dim() != value.dim() or query.dim() not in (2, 3, 4):
        raise ValueError("query, key, value: 2 to 4 dimensions each, all the same")
    if query.dim() >= 3 and query.shape[-3] != key.shape[-3] and not enable_gqa:
        raise ValueError("query has %d heads, key %d: pass enable_gqa=True for grouped-query "
                         "attention" % (query.shape[-3], key.shape[-3]))
    bias = mask = None
    causal = False
    q_len, kv_len = query.shape[-2], key.shape[-2]
    if is_causal:
        if q_len == kv_len:
            causal = True  # both alignments agree
        else:
            mask = torch.ones(q_len, kv_len, dtype=torch.bool).tril()
    elif attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            mask = attn_mask
        else:
            bias = attn_mask
    if scale is None:
        scale = 0.0
    elif scale == 0.0:
        raise ValueError("scale: 0 is not a usable scale (None means 1/sqrt(E))")
    return attention(query, key, value, bias=bias, mask=mask, causal=causal, scale=scale,
                     threads=threads)

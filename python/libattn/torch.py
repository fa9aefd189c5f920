# SPDX-License-Identifier: MIT
"""PyTorch front end: attention forward and backward through libattn.

    import torch, libattn.torch as lt
    out = lt.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.sum().backward()          # q.grad, k.grad, v.grad from attn_backward

Needs PyTorch (Debian: python3-torch); `import libattn` itself never imports
torch. Tensors must be on the CPU: float32, float16 or bfloat16 (float32
mixes with either), or float64 computed in float32; views whose last axis is
contiguous are passed to the library in place (a [B,L,H,D] tensor
transposed to [B,H,L,D] is not copied), others are copied once. Gradients
come back in the inputs' dtypes. attention() takes every keyword of
libattn.forward() (sinks and bias with their gradients; packed cu_seqlens
batches, lengths, windows, ALiBi, positions as constants).

Differences from torch.nn.functional.scaled_dot_product_attention:
dropout is not supported (dropout_p must be 0), and a query row that sees no
key gets output 0 and gradient 0 where torch gives NaN.

Importing this module also registers both functions as torch operators
(torch.library): torch.ops.libattn.attention (every keyword of
attention(), typed from libattn's keyword table: lengths and positions as
int lists, tables and per-head values as tensors, window as [W] or [W, R])
and torch.ops.libattn.scaled_dot_product_attention (torch's own schema).
Through them torch.jit.script compiles calls and torch.jit.trace records
one node per call (replayed with new shapes, gradients included); the
operators' kernels are these Python functions, so a scripted or traced
module runs where libattn.torch is imported, not in a C++-only runtime.
"""

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("libattn.torch needs PyTorch (Debian: apt-get install python3-torch); "
                      "the rest of libattn works without it") from exc

from . import _ops
from ._keywords import KEYWORDS

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


# Keywords of libattn.forward that are tensors of the graph: each gets its
# gradient through attn_backward when it requires one.
_DIFFERENTIABLE = ("bias", "sinks")
# Those whose gradient attn_backward does not give (constants of the model)
_CONSTANT_TENSORS = ("mask", "alibi_slopes")


def _threads(threads):
    """None: torch's own thread count (results are identical for any count)."""
    if threads is not None:
        return threads
    n = torch.get_num_threads()
    return n if n > 1 else None


def _as_array(x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        return x.to(torch.float32).numpy() if x.is_floating_point() and \
            x.dtype != torch.float32 else x.numpy()
    return x


class AttentionFunction(torch.autograd.Function):
    """out = attention(q, k, v) with libattn's forward and attn_backward.

    apply(q, k, v, bias, sinks, options): bias (float, broadcastable to
    [B,H,Lq,Lk]) and sinks ([B,Hq] or [Hq] logits) get gradients when they
    require them; options is a dict of any other libattn.forward keywords
    (causal, scale, softcap, window, window_right, mask, alibi_slopes,
    q_lens, kv_lens, cu_seqlens_q/_k, q_offsets, kv_offsets, q_pos, k_pos,
    threads, ...), none differentiable. Once differentiable: backward with
    create_graph=True raises (attn_backward has no derivative of its own).
    """

    @staticmethod
    def forward(ctx, q, k, v, bias, sinks, options):
        ctx.in_dtypes = tuple(x.dtype for x in (q, k, v))
        (q, k, v), (qn, kn, vn), kw = _forward_args(q, k, v, bias, sinks, options)
        out, stats = _ops.forward(qn, kn, vn, stats=True, **kw)
        out_t = torch.from_numpy(out)
        lse_t = torch.from_numpy(stats["lse"])
        ctx.kw = kw
        ctx.shapes = (tuple(bias.shape) if bias is not None else None,
                      tuple(sinks.shape) if sinks is not None else None)
        ctx.save_for_backward(q, k, v, out_t, lse_t)
        return out_t

    @staticmethod
    def backward(ctx, dout):
        if torch.is_grad_enabled():  # create_graph=True: a second derivative is coming
            raise RuntimeError("libattn.torch.attention has no second derivative "
                               "(attn_backward is not differentiable): create_graph=True and "
                               "double backward are not supported")
        q, k, v, out, lse = ctx.saved_tensors
        bias_shape, sinks_shape = ctx.shapes
        want_dbias = bias_shape is not None and ctx.needs_input_grad[3]
        want_dsinks = sinks_shape is not None and ctx.needs_input_grad[4]
        dout = dout.to(torch.float32) if dout.dtype != torch.float32 else dout
        grads = list(_ops.backward(_to_numpy(q, "q")[0], _to_numpy(k, "k")[0],
                                   _to_numpy(v, "v")[0], out.numpy(),
                                   dout.detach().contiguous().numpy(), lse.numpy(),
                                   dbias=want_dbias, dsinks=want_dsinks, **ctx.kw))
        dq, dk, dv = (torch.from_numpy(g).to(dt) for g, dt in zip(grads[:3], ctx.in_dtypes))
        rest = grads[3:]
        dbias = dsinks = None
        if want_dbias:
            dbias = _reduce_to(torch.from_numpy(rest.pop(0)), bias_shape)
        if want_dsinks:
            dsinks = torch.from_numpy(rest.pop(0)).reshape(-1, sinks_shape[-1])
            dsinks = dsinks.sum(dim=0) if len(sinks_shape) == 1 else dsinks.reshape(sinks_shape)
        return dq, dk, dv, dbias, dsinks, None


def _forward_args(q, k, v, bias, sinks, options):
    """q, k, v as the call reads them (float64 computed in float32, see
    attention()), their NumPy views, and libattn.forward's keywords."""
    if torch.float64 in (q.dtype, k.dtype, v.dtype):
        q, k, v = (x.to(torch.float32) if x.dtype == torch.float64 else x for x in (q, k, v))
    halves = {_HALF.get(x.dtype) for x in (q, k, v) if x.dtype != torch.float32}
    if halves == {"bf16", None}:
        raise TypeError("q, k, v: float16 and bfloat16 cannot be mixed (one 16-bit format "
                        "per call; float32 mixes with either)")
    qn, half = _to_numpy(q, "q")
    kn, half_k = _to_numpy(k, "k")
    vn, half_v = _to_numpy(v, "v")
    kw = {name: _as_array(value) for name, value in options.items()}
    kw["threads"] = _threads(kw.get("threads"))
    kw["dtype"] = half or half_k or half_v
    if bias is not None:
        kw["bias"] = _as_array(bias)
    if sinks is not None:
        kw["sinks"] = _as_array(sinks)
    return (q, k, v), (qn, kn, vn), kw


def _inference(q, k, v, bias, sinks, options):
    """The forward alone (nothing needs a gradient): no autograd node and no
    row statistics, through forward()'s cached plans where it can."""
    _, (qn, kn, vn), kw = _forward_args(q, k, v, bias, sinks, options)
    return torch.from_numpy(_ops.forward(qn, kn, vn, **kw))


def attention(q, k, v, *, bias=None, sinks=None, threads=None, **options):
    """libattn's attention with autograd: every keyword of libattn.forward().

    q, k, v: float32, float16 or bfloat16 CPU tensors (float32 mixes with
    either 16-bit format; the output is float32, or q's dtype when all three
    share a 16-bit one), or float64, computed in float32 and returned as
    float64 (so torch.autograd.gradcheck needs float32 tolerances:
    eps=1e-3, atol=1e-2, rtol=1e-2, as python/tests/test_torch.py runs it).
    bias and sinks get gradients (dbias summed over the axes the bias
    broadcasts; dsinks per batch entry and head, summed over the batch for
    [Hq] sinks). Masks, ALiBi slopes, lengths, cu_seqlens (packed [T,H,D]
    tensors) and positions are constants. threads=None follows
    torch.get_num_threads() (results are bitwise the same for any count).
    Once differentiable: backward with create_graph=True (double backward)
    raises a RuntimeError saying so.
    """
    for name in _DIFFERENTIABLE:
        if name in options:
            raise TypeError("%s: pass it as attention()'s own keyword" % name)
    options["threads"] = threads
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (q, k, v, bias, sinks)):
        out = AttentionFunction.apply(q, k, v, bias, sinks, options)
    else:  # inference: no graph, no lse to keep
        out = _inference(q, k, v, bias, sinks, options)
    dtypes = {q.dtype, k.dtype, v.dtype}
    if torch.float64 in dtypes:
        return out.to(torch.float64)
    if len(dtypes) == 1 and q.dtype != torch.float32:
        return out.to(q.dtype)
    return out


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
    positions = {}
    q_len, kv_len = query.shape[-2], key.shape[-2]
    if is_causal:
        causal = True
        if q_len != kv_len:
            # torch's top-left alignment: query i sees keys j <= i, which is
            # libattn's causal mask on positions that both start at 0
            positions = dict(q_pos=0, k_pos=0)
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
                     threads=threads, **positions)


# ------------------------------------------------------------------ torch.library

# Each keyword hint of _keywords.HINTS as a torch schema type; a hint missing
# here stops the import (KeyError), so a new keyword cannot be left out of
# the operator. Window is [] (off), [W] or [W, R].
_SCHEMA_TYPES = {"bool": "bool", "int": "int", "float": "float", "str": "str",
                 "Optional[int]": "int?", "Window": "int[]", "Optional[Heads]": "Tensor?",
                 "Optional[Ints]": "int[]?", "Optional[IntTable]": "Tensor?",
                 "Optional[Array]": "Tensor?"}


def _schema_default(keyword):
    if keyword.hint == "Window":
        return "[]"
    value = keyword.default
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return '"%s"' % value
    return repr(value)


_OP_KEYWORDS = [k for k in KEYWORDS if "forward" in k.ops]
ATTENTION_SCHEMA = "attention(Tensor q, Tensor k, Tensor v, *, %s) -> Tensor" % ", ".join(
    "%s %s=%s" % (_SCHEMA_TYPES[k.hint], k.name, _schema_default(k)) for k in _OP_KEYWORDS)
SDPA_SCHEMA = ("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
               "Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, "
               "float? scale=None, bool enable_gqa=False) -> Tensor")


def _attention_op(q, k, v, **kw):
    """torch.ops.libattn.attention: the schema's values as attention() takes them."""
    window = kw.pop("window", None)
    if window is not None:
        if len(window) > 2:
            raise ValueError("window: [W] or [W, R], got %d values" % len(window))
        kw["window"] = tuple(window) if len(window) == 2 else (window[0] if window else 0)
    return attention(q, k, v, **kw)


def _sdpa_op(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
    return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                        scale, enable_gqa)


# The Python kernels run for every key (CompositeImplicitAutograd): autograd
# sees AttentionFunction inside, as in a direct call.
_LIBRARY = torch.library.Library("libattn", "DEF")
_LIBRARY.define(ATTENTION_SCHEMA)
_LIBRARY.impl("attention", _attention_op, "CompositeImplicitAutograd")
_LIBRARY.define(SDPA_SCHEMA)
_LIBRARY.impl("scaled_dot_product_attention", _sdpa_op, "CompositeImplicitAutograd")

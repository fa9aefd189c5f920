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
libattn.forward()'s keyword table (sinks and bias with their gradients;
packed cu_seqlens batches, lengths, windows, ALiBi, positions as constants).

Differences from torch.nn.functional.scaled_dot_product_attention:
dropout is not supported (dropout_p must be 0), and a query row that sees no
key gets output 0 and gradient 0 where torch gives NaN. Empty problems (a
zero batch, head count or length) give what torch gives: an empty result,
or zeros where there are queries but no key. Arguments libattn.torch
refuses raise ArgumentError / ArgumentTypeError, which are RuntimeError as
torch raises and ValueError / TypeError as libattn raises.

Importing this module also registers both functions as torch operators
(torch.library): torch.ops.libattn.attention (every keyword of
attention(), typed from libattn's keyword table: lengths and positions as
int lists, tables and per-head values as tensors, window as [W] or [W, R])
and torch.ops.libattn.scaled_dot_product_attention (torch's own schema, and
threads). Through them torch.jit.script compiles calls, and under
torch.jit.trace attention() and scaled_dot_product_attention() call them, so
a trace records one node per call (replayed with new inputs and shapes,
gradients included; keyword values are constants of the trace) and can be
saved; outside a trace they run directly (no operator dispatch). The
operators' kernels are these Python functions, so a scripted or traced
module runs where libattn.torch is imported, not in a C++-only runtime.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("libattn.torch needs PyTorch (Debian: apt-get install python3-torch); "
                      "the rest of libattn works without it") from exc

from . import _ops
from ._keywords import KEYWORDS
from ._types import Any, Optional, Sequence, Tuple, Union

__all__ = ["ArgumentError", "ArgumentTypeError", "AttentionFunction", "attention",
           "scaled_dot_product_attention"]

# -- aliases (copied into torch.pyi) --
# A tensor-valued keyword (mask, bias, k_scales, ...): a torch tensor or a NumPy array.
Array = Union[torch.Tensor, "numpy.ndarray[Any, Any]"]
# One int for every batch entry, or one per entry.
Ints = Union[int, Sequence[int], torch.Tensor, "numpy.ndarray[Any, Any]"]
# A table of ints: [B, n] (block_table, tree_parents) or one row for every entry.
IntTable = Union[Sequence[Sequence[int]], Sequence[int], torch.Tensor,
                 "numpy.ndarray[Any, Any]"]
# Per-head values (sinks, ALiBi slopes): a number, [Hq] or [B, Hq].
Heads = Union[float, Sequence[float], Array]
# A sliding window: W, or (W, R) for a two-sided one.
Window = Union[int, Tuple[int, int]]
# -- end of aliases --


class ArgumentError(ValueError, RuntimeError):
    """An argument libattn.torch refuses: a RuntimeError, as torch's
    scaled_dot_product_attention raises for a misuse, and a ValueError, as
    libattn raises (so `except ValueError` keeps working)."""


class ArgumentTypeError(TypeError, RuntimeError):
    """A type or dtype libattn.torch refuses: a RuntimeError, as torch
    raises, and a TypeError, as libattn raises."""


def _torch_errors(fn):
    """fn raising ArgumentError / ArgumentTypeError for libattn's
    ValueError / TypeError (the message kept)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ArgumentError, ArgumentTypeError):
            raise
        except ValueError as exc:
            raise ArgumentError(*exc.args).with_traceback(exc.__traceback__) from None
        except TypeError as exc:
            raise ArgumentTypeError(*exc.args).with_traceback(exc.__traceback__) from None
    return wrapper


_HALF = {torch.bfloat16: "bf16", torch.float16: None, torch.float32: None}
# True while torch.jit.trace runs (torch.jit.is_tracing() without its check
# for scripting, which a Python function never runs under)
_is_tracing = getattr(torch._C, "_is_tracing", None) or torch.jit.is_tracing


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
    if extra > 0:
        grad = grad.sum(dim=tuple(range(extra)))
    elif extra < 0:  # an operand with more (size-1) leading dimensions than the result
        grad = grad.reshape((1,) * -extra + tuple(grad.shape))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if axes:
        grad = grad.sum(dim=axes, keepdim=True)
    return grad


# Keywords of libattn.forward that are tensors of the graph: each gets its
# gradient through attn_backward when it requires one.
_DIFFERENTIABLE = ("bias", "sinks")
# Those whose gradient attn_backward does not give (constants of the model)
_CONSTANT_TENSORS = ("mask", "alibi_slopes")
# attention()'s keywords: libattn.forward()'s table
_OP_KEYWORDS = [k for k in KEYWORDS if "forward" in k.ops]
_OPTION_NAMES = frozenset(k.name for k in _OP_KEYWORDS)


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
    [B,H,Lq,Lk]) and sinks (a number, [Hq] or [B,Hq] logits) get gradients
    when they require them; options is a dict of any other libattn.forward
    keywords (causal, scale, softcap, window, window_right, mask,
    alibi_slopes, q_lens, kv_lens, cu_seqlens_q/_k, q_offsets, kv_offsets,
    q_pos, k_pos, threads, ...), none differentiable. Once differentiable:
    backward with create_graph=True raises (attn_backward has no derivative
    of its own).
    """

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                bias: Optional[torch.Tensor], sinks: Optional[torch.Tensor],
                options: Any) -> torch.Tensor:
        ctx.in_dtypes = tuple(x.dtype for x in (q, k, v))
        (q, k, v), (qn, kn, vn), kw = _forward_args(q, k, v, bias, sinks, options)
        out, stats = _ops.forward(qn, kn, vn, stats=True, **kw)
        out_t = torch.from_numpy(out)
        lse_t = torch.from_numpy(stats["lse"])
        ctx.kw = kw
        ctx.shapes = (tuple(np.shape(bias)) if bias is not None else None,
                      tuple(np.shape(sinks)) if sinks is not None else None)
        ctx.save_for_backward(q, k, v, out_t, lse_t)
        return out_t

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
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
        if want_dsinks:  # [B, Hq] (or [Hq]) summed to the sinks' shape
            dsinks = _reduce_to(torch.from_numpy(rest.pop(0)), sinks_shape)
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


@_torch_errors
def _attention(q, k, v, bias, sinks, threads, options):
    """attention() itself (also the kernel of torch.ops.libattn.attention)."""
    for name in options:
        if name not in _OPTION_NAMES or name in _DIFFERENTIABLE or name == "threads":
            raise TypeError("attention() got an unexpected keyword argument %r" % name)
    options["threads"] = threads
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
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


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              bias: Optional[Array] = None, sinks: Optional[Heads] = None,
              threads: Optional[int] = None, **options: Any) -> torch.Tensor:
    """libattn's attention with autograd: every keyword of libattn.forward()'s table.

    q, k, v: float32, float16 or bfloat16 CPU tensors (float32 mixes with
    either 16-bit format; the output is float32, or q's dtype when all three
    share a 16-bit one), or float64, computed in float32 and returned as
    float64 (so torch.autograd.gradcheck needs float32 tolerances:
    eps=1e-3, atol=1e-2, rtol=1e-2, as python/tests/test_torch.py runs it).
    bias and sinks get gradients (dbias summed over the axes the bias
    broadcasts; dsinks per batch entry and head, summed to the sinks'
    shape). Masks, ALiBi slopes, lengths, cu_seqlens (packed [T,H,D]
    tensors) and positions are constants. threads=None follows
    torch.get_num_threads() (results are bitwise the same for any count).
    Once differentiable: backward with create_graph=True (double backward)
    raises a RuntimeError saying so. Under torch.jit.trace the call goes
    through torch.ops.libattn.attention (one node of the trace).
    """
    if _is_tracing():
        return _traced_attention(q, k, v, bias, sinks, threads, options)
    return _attention(q, k, v, bias, sinks, threads, options)


def _sdpa_shapes(query, key, value, attn_mask, enable_gqa):
    """torch's shape rules that libattn does not state itself: (query, key,
    value, attn_mask as 2- to 4-D, the leading dims to restore or None)."""
    dims = (query.dim(), key.dim(), value.dim())
    if min(dims) < 2:
        raise ValueError("query, key, value: at least 2 dimensions each ([..., L, E]), got "
                         "%d, %d and %d" % dims)
    if len(set(dims)) != 1:
        raise ValueError("query, key, value: the same number of dimensions, got %d, %d and %d"
                         % dims)
    lead = None
    if dims[0] > 4:  # [N, ..., H, L, E]: the leading dims as one batch
        lead = tuple(query.shape[:-3])
        if tuple(key.shape[:-3]) != lead or tuple(value.shape[:-3]) != lead:
            raise ValueError("query, key, value: leading dimensions %r, %r and %r differ"
                             % (lead, tuple(key.shape[:-3]), tuple(value.shape[:-3])))
        n = 1
        for size in lead:
            n *= size
        query, key, value = (x.reshape((n,) + tuple(x.shape[-3:])) for x in (query, key, value))
        if attn_mask is not None and attn_mask.dim() > 3:
            mask = attn_mask.reshape((1,) * (dims[0] - attn_mask.dim()) + tuple(attn_mask.shape))
            mask = mask.expand(lead + tuple(mask.shape[-3:]))
            attn_mask = mask.reshape((n,) + tuple(mask.shape[-3:]))
    if dims[0] >= 3:
        hq, hk = query.shape[-3], key.shape[-3]
        # torch broadcasts a single key head; other counts need enable_gqa
        if hq != hk and hk != 1 and not enable_gqa:
            raise ValueError("query has %d heads, key %d: pass enable_gqa=True for "
                             "grouped-query attention" % (hq, hk))
    return query, key, value, attn_mask, lead


@_torch_errors
def _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, threads):
    """scaled_dot_product_attention() itself (also its operator's kernel)."""
    if dropout_p != 0.0:
        raise NotImplementedError("dropout_p: libattn has no dropout (use 0.0)")
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask and is_causal cannot both be set (torch: explicit "
                         "attn_mask should not be set when is_causal=True)")
    query, key, value, attn_mask, lead = _sdpa_shapes(query, key, value, attn_mask,
                                                      enable_gqa)
    bias = mask = None
    options = {}
    q_len, kv_len = query.shape[-2], key.shape[-2]
    if is_causal:
        options["causal"] = True
        if q_len != kv_len:
            # torch's top-left alignment: query i sees keys j <= i, which is
            # libattn's causal mask on positions that both start at 0
            options.update(q_pos=0, k_pos=0)
    elif attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            mask = attn_mask
        else:
            bias = attn_mask
    if mask is not None:
        options["mask"] = mask
    if scale is None:
        options["scale"] = 0.0  # libattn's 0: 1/sqrt(E)
    elif scale == 0.0:
        # every score q.k * 0 is 0 (NaN where q.k is not finite), which
        # (q * 0).k at scale 1 is exactly; masks and bias still apply, and
        # the gradient of q is 0 (times what flows back)
        query = query * 0
        options["scale"] = 1.0
    else:
        options["scale"] = scale
    out = _attention(query, key, value, bias, None, threads, options)
    return out.reshape(lead + tuple(out.shape[1:])) if lead is not None else out


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: Optional[torch.Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: Optional[float] = None, enable_gqa: bool = False, *,
                                 threads: Optional[int] = None) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention's signature, run by libattn.

    query [..., Hq, L, E], key [..., Hkv, S, E], value [..., Hkv, S, Ev]
    (2 dimensions or more, all the same; dimensions before the last three
    equal in all three). attn_mask: bool (True = may attend) or float
    (added to the scores, differentiable), broadcastable to [.., Hq, L, S].
    is_causal: torch's top-left aligned lower triangle. scale: None means
    1/sqrt(E); 0.0 makes every score 0 (with the mask's bias added), so each
    row averages v over its visible keys. enable_gqa: Hkv may divide Hq (a
    single key head broadcasts without it, as in torch). Misuses torch
    refuses with a RuntimeError raise ArgumentError (a RuntimeError and a
    ValueError). Under torch.jit.trace the call goes through
    torch.ops.libattn.scaled_dot_product_attention (one node of the trace).
    """
    if _is_tracing():
        return torch.ops.libattn.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
            threads=threads)
    return _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                 threads)


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


ATTENTION_SCHEMA = "attention(Tensor q, Tensor k, Tensor v, *, %s) -> Tensor" % ", ".join(
    "%s %s=%s" % (_SCHEMA_TYPES[k.hint], k.name, _schema_default(k)) for k in _OP_KEYWORDS)
SDPA_SCHEMA = ("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
               "Tensor? attn_mask=None, float dropout_p=0.0, bool is_causal=False, "
               "float? scale=None, bool enable_gqa=False, *, int? threads=None) -> Tensor")


# Ints keywords that take one int for every batch entry: the operator reads
# a list of one value so (a list of one per entry means the same at batch 1)
_ONE_FOR_ALL = ("q_lens", "kv_lens", "q_pos", "k_pos")


def _schema_value(keyword, value):
    """A keyword's value as its schema type takes it (a trace keeps it)."""
    kind = _SCHEMA_TYPES[keyword.hint]
    if value is None:
        return None
    if isinstance(value, np.generic):  # a NumPy scalar: the Python number
        value = value.item()
    if kind == "int[]":  # W or (W, R)
        return [value] if isinstance(value, int) else list(value)
    if kind == "int[]?":
        if isinstance(value, int) and keyword.name in _ONE_FOR_ALL:
            return [value]  # one for every batch entry
        if isinstance(value, (torch.Tensor, np.ndarray)):
            return [int(n) for n in np.asarray(_as_array(value)).reshape(-1).tolist()]
        return list(value)
    if kind == "Tensor?" and not isinstance(value, torch.Tensor):
        # a copy, made outside the trace: the trace keeps it as a constant
        state = torch._C._get_tracing_state()
        torch._C._set_tracing_state(None)
        try:
            return torch.tensor(np.asarray(value))
        finally:
            torch._C._set_tracing_state(state)
    return value


def _traced_attention(q, k, v, bias, sinks, threads, options):
    """attention() as one torch.ops.libattn.attention node of a trace."""
    by_name = {kw.name: kw for kw in _OP_KEYWORDS}
    for name in options:
        if name not in by_name or name in _DIFFERENTIABLE or name == "threads":
            raise ArgumentTypeError("attention() got an unexpected keyword argument %r" % name)
    kw = {name: _schema_value(by_name[name], value) for name, value in options.items()}
    return torch.ops.libattn.attention(q, k, v, bias=_schema_value(by_name["bias"], bias),
                                       sinks=_schema_value(by_name["sinks"], sinks),
                                       threads=threads, **kw)


def _attention_op(q, k, v, **kw):
    """torch.ops.libattn.attention: the schema's values as attention() takes them."""
    window = kw.pop("window", None)
    if window is not None:
        if len(window) > 2:
            raise ArgumentError("window: [W] or [W, R], got %d values" % len(window))
        kw["window"] = tuple(window) if len(window) == 2 else (window[0] if window else 0)
    for name in _ONE_FOR_ALL:
        if kw.get(name) is not None and len(kw[name]) == 1:
            kw[name] = kw[name][0]
    bias, sinks, threads = kw.pop("bias", None), kw.pop("sinks", None), kw.pop("threads", None)
    return _attention(q, k, v, bias, sinks, threads, kw)


def _sdpa_op(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False, threads=None):
    return _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, threads)


# attention()'s signature spells out its keywords (help(), and the stub
# torch.pyi that python/gen_stub.py writes from it)
_OWN = ("bias", "sinks", "threads")
attention.__signature__ = inspect.signature(attention).replace(parameters=[
    p for p in inspect.signature(attention).parameters.values()
    if p.kind != inspect.Parameter.VAR_KEYWORD] + [
    inspect.Parameter(k.name, inspect.Parameter.KEYWORD_ONLY, default=k.default,
                      annotation=k.hint) for k in _OP_KEYWORDS if k.name not in _OWN])

# The Python kernels run for every key (CompositeImplicitAutograd): autograd
# sees AttentionFunction inside, as in a direct call.
_LIBRARY = torch.library.Library("libattn", "DEF")
_LIBRARY.define(ATTENTION_SCHEMA)
_LIBRARY.impl("attention", _attention_op, "CompositeImplicitAutograd")
_LIBRARY.define(SDPA_SCHEMA)
_LIBRARY.impl("scaled_dot_product_attention", _sdpa_op, "CompositeImplicitAutograd")

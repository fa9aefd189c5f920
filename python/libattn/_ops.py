# SPDX-License-Identifier: MIT
"""The operations of include/attn.h, with Python argument checking.

The keywords that set attn_options are declared once, in _keywords.py:
@operation(op) adds the ones `op` takes to its signature and docstring and
hands them to the function as the dict `_kw`, which _keywords.build() turns
into the Options.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from ._capi import Grads, KvSource, Partial, RowStats, Shape, check, has, lib
from ._loader import LibraryError
from ._tensor import (Operand, as_operand, check_no_overlap, check_output, copy_f32,
                      dtype_from_name, either, indices, is_empty, is_tensor, new_f32, np)
from ._capi import DType
from ._dtypes import ROWS
from . import _kvlayout
from ._types import (Any, Array, ArrayT, Dict, IntTable, List, Optional, Sequence, Tuple,
                     Union)
from ._keywords import (LAYOUT, SOURCE_KEYWORDS, build, build_source, float_arg, int_arg,
                        k_tail_dim, operation, side_inputs)

if TYPE_CHECKING:
    import numpy


def alibi_slopes(heads: int) -> List[float]:
    """The ALiBi paper's slopes for `heads` heads: 2^(-8 i / n) for i = 1..heads
    with n = heads when it is a power of two (else the closest power below,
    interleaved with the next power's odd slopes, as in the reference code)."""
    heads = int_arg(heads, "heads", 1)

    def power_of_two(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if heads & (heads - 1) == 0:
        return power_of_two(heads)
    low = 1 << (heads.bit_length() - 1)
    return power_of_two(low) + power_of_two(2 * low)[0::2][:heads - low]


# ------------------------------------------------------------------ q, k, v

_LAYOUTS = "[B,H,L,D], [H,L,D] or [L,D]"


def _half_bits(dtype):
    if dtype is None:
        return None
    dt = dtype_from_name(dtype, "dtype")
    if dt not in (DType.BF16, DType.F16):
        raise ValueError("dtype: names how uint16 arrays are read: 'bf16' or 'f16', got %r"
                         % (dtype,))
    return dt


_QUANT_ROWS = [row for row in ROWS if row.kind in ("qblock", "fp8", "asym")]
# by the list's name, and by its ID in lower case ("fp8_e4m3", as vLLM's
# kv_cache_dtype spells it; "u8_asym")
_QUANT_DTYPES = {row.name: DType(row.value) for row in _QUANT_ROWS}
_QUANT_DTYPES.update({row.id.lower(): DType(row.value) for row in _QUANT_ROWS})
_QUANT_NAMES = either(row.name for row in _QUANT_ROWS)
# FP8: one byte per value, scaled by k_scale / v_scale (scale= in quantize())
_FP8 = frozenset(DType(row.value) for row in _QUANT_ROWS if row.kind == "fp8")
_FP8_NAMES = either(row.name for row in _QUANT_ROWS if row.kind == "fp8")
# OpenVINO's asymmetric records (attn.h 1.12): per group of values an f32
# scale, an f32 zero point, then the codes; strides in bytes
_ASYM = frozenset(DType(row.value) for row in _QUANT_ROWS if row.kind == "asym")
_ASYM_NAMES = either(row.name for row in _QUANT_ROWS if row.kind == "asym")
_ASYM_HEADER = 8  # bytes: the record's scale and zero point
# values per stride unit, bytes per stride unit (asym: codes per byte, 1)
_QUANT_LAYOUT = {DType(row.value): (row.block, row.bytes) for row in _QUANT_ROWS}
_QUANT_NAME = {DType(row.value): row.name for row in _QUANT_ROWS}


def _quant_dtype(name, what):
    if isinstance(name, DType) and name in _QUANT_LAYOUT:
        return name
    try:
        return _QUANT_DTYPES[str(name).lower()]
    except KeyError:
        raise ValueError("%s: expected %s, got %r" % (what, _QUANT_NAMES, name)) from None


def _dt_name(dt):
    """The list's name of a quantized dtype ('u8' for U8_ASYM)."""
    return _QUANT_NAME[dt]


def _group_arg(value, what):
    """A record group: an int >= 0 (0: the whole row); None means 0."""
    return 0 if value is None else int_arg(value, what, 0)


def _asym_record_bytes(dt, group):
    """Bytes of one record of `group` values (8 + g for u8, 8 + g / 2 for u4)."""
    return _ASYM_HEADER + group // _QUANT_LAYOUT[dt][0]


def _asym_row_values(dt, row_bytes, group, name, what):
    """The values in an asym row of `row_bytes` bytes of records of `group`
    values (0: one record, the whole row): row_bytes / (8 + g) * g for u8
    (/ (8 + g / 2) * g for u4), row_bytes - 8 (2 * (row_bytes - 8)) for the
    whole row. ValueError naming `name` (the cache) and `what` (the group's
    keyword) when the bytes are not whole records."""
    per_byte = _QUANT_LAYOUT[dt][0]
    label = _dt_name(dt)
    if group:
        if group % per_byte:
            raise ValueError("%s: %s records hold whole bytes of codes: the group must be a "
                             "multiple of %d, got %d" % (what, label, per_byte, group))
        rec = _asym_record_bytes(dt, group)
        if row_bytes % rec:
            raise ValueError("%s: %d bytes per row are not whole %s records of %s=%d values "
                             "(%d bytes each)" % (name, row_bytes, label, what, group, rec))
        return row_bytes // rec * group
    if row_bytes <= _ASYM_HEADER:
        raise ValueError("%s: a %s row of one record (%s=0) is 8 header bytes and its codes; "
                         "got %d bytes" % (name, label, what, row_bytes))
    return (row_bytes - _ASYM_HEADER) * per_byte


def _quant_operand(x, name, dt, group=0, what="k_scale_group"):
    """A quantized K or V cache: uint8 (or int8) NumPy array [..., row_bytes].

    Its last axis holds one row in the format's bytes (Q8_0: 34 per 32
    values, Q4_0: 18, FP8: 1 per value, U8/U4: records of `group` values,
    8 + g (U4: 8 + g / 2) bytes each, 0 meaning one record per row) and must
    be contiguous; the other byte strides must be whole blocks (Q8_0/Q4_0),
    as a cache stored by llama.cpp or returned by quantize() is. The
    Operand's last dimension counts stride units (blocks, or bytes). Returns
    (Operand, values per row); `what` names the group's keyword in errors.
    """
    if np is None or is_tensor(x):
        raise TypeError("%s: a quantized cache must be a NumPy uint8 array" % name)
    arr = np.asarray(x)
    if arr.dtype not in (np.uint8, np.int8):
        raise TypeError("%s: kv_dtype=%r needs the cache's raw bytes as uint8, got %s"
                        % (name, dt.name.lower(), arr.dtype))
    values, unit = _QUANT_LAYOUT[dt]
    if arr.ndim < 1 or arr.shape[-1] == 0 or arr.shape[-1] % unit:
        raise ValueError("%s: rows of %s are whole %d-byte blocks; the last axis has %r bytes"
                         % (name, dt.name.lower(), unit, arr.shape[-1:] or None))
    if dt in _ASYM:
        cols = _asym_row_values(dt, arr.shape[-1], group, name, what)
    else:
        cols = arr.shape[-1] // unit * values
    if arr.shape[-1] > 1 and arr.strides[-1] != 1:
        raise ValueError("%s: the last axis (a row's bytes) must be contiguous" % name)
    strides = []
    for n, s in zip(arr.shape[:-1], arr.strides[:-1]):
        if n == 1:
            strides.append(0)
        elif s < 0 or s % unit:
            raise ValueError("%s: byte stride %d is not a whole number of %d-byte blocks"
                             % (name, s, unit))
        else:
            strides.append(s // unit)
    shape = arr.shape[:-1] + (arr.shape[-1] // unit,)
    return Operand(arr.__array_interface__["data"][0], dt, shape, strides + [1], [arr], x,
                   arr.flags.writeable), cols


def _kv_keywords(kw, kv_dtype, k="k", v="v"):
    """The cache keywords checked against kv_dtype: (its DType or None, the
    k and v record groups). k_scale/v_scale/k_scales/v_scales are FP8's;
    k_scale_group/v_scale_group (an int >= 0) the asym formats' groups.
    k="k2", v="v2": forward_sources' second source (kv2_dtype, k2_scales,
    ...), whose caches the per-call k_scale/v_scale scale too (attn.h)."""
    kv = "kv2" if k == "k2" else "kv"
    dt = None if kv_dtype is None else _quant_dtype(kv_dtype, kv + "_dtype")
    k_group = _group_arg(kw.get(k + "_scale_group"), k + "_scale_group")
    v_group = _group_arg(kw.get(v + "_scale_group"), v + "_scale_group")
    row_scales = kw.get(k + "_scales") is not None or kw.get(v + "_scales") is not None
    if dt in _ASYM and row_scales:
        raise ValueError("%s_scales/%s_scales: %s_dtype=%r records hold their own scale and "
                         "zero point (row scales are for %s); give %s_scale_group/"
                         "%s_scale_group for their group"
                         % (k, v, kv, _dt_name(dt), _FP8_NAMES, k, v))
    scaled = kw.get("k_scale") or kw.get("v_scale")
    if (scaled or row_scales) and dt not in _FP8:
        names = ("k_scale/v_scale/k_scales/v_scales" if k == "k" else
                 "%s_scales/%s_scales" % (k, v) if row_scales else "k_scale/v_scale")
        raise ValueError("%s: only for %s_dtype=%s%s"
                         % (names, kv, _FP8_NAMES, "" if dt is None else ", not %r" % (kv_dtype,)))
    if (k_group or v_group) and dt not in _ASYM:
        raise ValueError("%s_scale_group/%s_scale_group: the record group of %s_dtype=%s "
                         "caches (FP8 groups are %s_scales' last axis)"
                         % (k, v, kv, _ASYM_NAMES, k))
    return dt, k_group, v_group


def _attention_inputs(q, k, v, dtype, kv_dtype=None, tail_dim=0, k_group=0, v_group=0):
    half = _half_bits(dtype)
    qo = as_operand(q, "q", "qkv", half)
    rank = len(qo.shape)
    if rank not in (2, 3, 4):
        raise ValueError("q: expected %s, got shape %r" % (_LAYOUTS, qo.shape))
    named = [("q", qo)]
    if kv_dtype is None:
        ko = as_operand(k, "k", "qkv", half)
        k_cols = ko.shape[-1]
    else:
        ko, k_cols = _quant_operand(k, "k", _quant_dtype(kv_dtype, "kv_dtype"), k_group,
                                    "k_scale_group")
    named.append(("k", ko))
    vo = None
    if v is not None:
        if kv_dtype is None:
            vo = as_operand(v, "v", "qkv", half)
            v_cols = vo.shape[-1]
        else:
            vo, v_cols = _quant_operand(v, "v", ko.dtype, v_group, "v_scale_group")
        named.append(("v", vo))
    for name, op in named:
        if len(op.shape) != rank:
            raise ValueError("%s: shape %r has %d dimensions but q has %d (all of q, k, v use "
                             "one of %s)" % (name, op.shape, len(op.shape), rank, _LAYOUTS))
        if not op.shape[-1]:  # a zero batch, head count or length is fine
            raise ValueError("%s: shape %r has rows of no values" % (name, op.shape))
    q4, k4 = qo.padded(), ko.padded()
    batch, q_heads, q_len, head_dim = q4.shape
    kb, kv_heads, kv_len, _ = k4.shape
    kd = k_cols  # values per row (a quantized row's bytes hold more or fewer)
    if kb != batch:
        raise ValueError("k: batch %d, but q has batch %d" % (kb, batch))
    if kd + tail_dim != head_dim:
        # an asym row's values follow from its bytes and the group (_asym_row_values)
        rule = "" if ko.dtype not in _ASYM else " (%d bytes of %s records of k_scale_group=%d)" \
            % (k4.shape[3], _dt_name(ko.dtype), k_group)
        if tail_dim:
            raise ValueError("k: %d values per row%s and k_tail's %d, but q has head_dim %d"
                             % (kd, rule, tail_dim, head_dim))
        raise ValueError("k: head_dim %d%s, but q has head_dim %d" % (kd, rule, head_dim))
    if q_heads % kv_heads if kv_heads else q_heads:
        raise ValueError("k: %d heads do not divide q's %d heads (grouped-query attention "
                         "needs q_heads %% kv_heads == 0)" % (kv_heads, q_heads))
    v4, v_dim = None, head_dim
    if vo is not None:
        v4 = vo.padded()
        vb, vh, vl, _ = v4.shape
        v_dim = v_cols
        if (vb, vh, vl) != (batch, kv_heads, kv_len):
            raise ValueError("v: shape %r does not match k's %r in batch, heads and length"
                             % (vo.shape, ko.shape))
    shape = Shape(batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim)
    return rank, shape, q4, k4, v4


def _stats_outputs(shape, rank, like_tensor):
    dims = (shape.batch, shape.q_heads, shape.q_len)[3 - (rank - 1):]
    arrays, ops = {}, []
    for name in ("lse", "max_score", "entropy"):
        arrays[name], op = new_f32(dims, like_tensor)
        ops.append(op)
    return arrays, RowStats(*(op.address for op in ops)), ops


def _output(out, name, dims, like_tensor, rounded=False, half_bits=None):
    if out is None:
        return new_f32(dims, like_tensor)
    return out, check_output(out, name, dims, rounded, half_bits)


# Not converted by build() with a cache layout: run_layout sets the layouts,
# the lengths and the row scales (laid out like the caches) itself.
# kv_splits is converted: its workspace probe sees the call without lengths
# and table, which asks for at least the workspace the call needs (every
# sequence as long as kv_len; paging changes no size).
_LAYOUT_SKIPS = LAYOUT + ("q_lens", "kv_lens", "k_scales", "v_scales")


# the operations whose out is forward's (f32, or f16/bf16 rounded once)
_FORWARDS = ("attn_forward", "attn_forward_sources")


def _call(function, args, keep):
    """The C call of an attention operation (prepare() captures it instead)."""
    check(getattr(lib(), function)(*args), function)


def _run_attention(function, q, k, v, kw, *, out, stats, dtype, kv_dtype=None, invoke=_call,
                   second=None):
    """An attention operation's call. second: forward_sources' second source
    (a _Second; function is then attn_forward_sources), which needs no
    workspace; the library then runs a first source without keys too (its
    rows see the second's keys alone), so only a call without query rows is
    left empty."""
    dt, k_group, v_group = _kv_keywords(kw, kv_dtype)
    if second is not None:
        second.check_keywords()
    workspace = second is None
    if any(kw.get(name) is not None for name in LAYOUT):
        if kw.get("k_tail") is not None:
            raise ValueError("k_tail: not supported with q_offsets/cu_seqlens/block_table in "
                             "this binding (the C API takes it)")
        if q is None or k is None:
            raise TypeError("q, k: arrays are required, got None")
        if kw.get("q_pos") is not None or kw.get("k_pos") is not None:
            raise ValueError("q_pos, k_pos: not supported with q_offsets/kv_offsets, "
                             "cu_seqlens or block_table in this binding")
        kv_operand = None
        if dt is not None:  # the caches cache_append writes, in any layout

            def kv_operand(x, name):
                if name == "k":
                    return _quant_operand(x, name, dt, k_group, "k_scale_group")
                return _quant_operand(x, name, dt, v_group, "v_scale_group")
        return _kvlayout.run_layout(
            function, q, k, v, out=out, stats=stats,
            options=lambda shape, sides: build(kw, shape, sides, skip=_LAYOUT_SKIPS,
                                               workspace=workspace),
            side_inputs=lambda target: side_inputs(kw, target), q_lens=kw["q_lens"],
            kv_lens=kw["kv_lens"], dtype=dtype, half_bits=_half_bits(dtype),
            is_tensor_result=is_tensor(q), invoke=invoke, kv_operand=kv_operand,
            scales={name: kw.get(name) for name in ("k_scales", "v_scales")}, plain_call=_call,
            second=second.source if second is not None else None,
            **{name: kw[name] for name in LAYOUT})
    rank, shape, q4, k4, v4 = _attention_inputs(q, k, v, dtype, kv_dtype, k_tail_dim(kw),
                                                k_group, v_group)
    sides = side_inputs(kw, (shape.batch, shape.q_heads, shape.q_len, shape.kv_len))
    opt, keep = build(kw, shape, sides, workspace=workspace)
    extra, extra_keep, extra_ops = (second.source(shape) if second is not None
                                    else (None, [], []))
    if extra is not None:
        extra_keep.append(_sources_workspace(shape, opt, extra))
    last = shape.v_dim if v4 is not None else shape.kv_len
    dims = (shape.batch, shape.q_heads, shape.q_len, last)[4 - rank:]
    like_tensor = is_tensor(q)
    result, out_op = _output(out, "out", dims, like_tensor, function in _FORWARDS,
                             _half_bits(dtype))
    check_no_overlap(out_op, "out", [(q4, "q"), (k4, "k"), (v4, "v")] + extra_ops +
                     [(side, name) for name, side in sides.items()])
    out4 = out_op.padded()
    stats_arrays, stats_c, stats_ops = (None, None, None)
    if stats:
        stats_arrays, stats_c, stats_ops = _stats_outputs(shape, rank, like_tensor)
    if is_empty(shape) and extra is None:
        if invoke is not _call:
            raise ValueError("q, k: a zero batch, head count or length leaves nothing to "
                             "plan (forward() takes it)")
        _no_keys_dense(shape, opt, out4 if function == "attn_forward" else None, result,
                       out is None, stats_ops)
        return (result, stats_arrays) if stats else result
    tensors = [q4.c_tensor(), k4.c_tensor()]
    if v4 is not None:
        tensors.append(v4.c_tensor())
    tensors.append(out4.c_tensor())
    args = [ctypes.byref(shape), opt] + [ctypes.byref(t) for t in tensors]
    if function != "attn_scores":
        args.append(ctypes.byref(stats_c) if stats_c is not None else None)
    if extra is not None:  # attn_forward_sources: the second source after v
        args.insert(5, ctypes.byref(extra))
    invoke(function, args, [keep, sides, tensors, stats_c, stats_ops, out_op, extra_keep])
    del keep, stats_ops, extra_keep
    return (result, stats_arrays) if stats else result


def _zeros(dims, like_tensor):
    # a new Tensor holds zeros
    return new_f32(dims, True)[0] if like_tensor else np.zeros(dims, np.float32)


def _no_keys_dense(shape, opt, out4, result, fresh, stats_ops):
    """An empty problem's results without a library call: every result is
    empty unless kv_len alone is 0, where each query row sees no key (see
    _kvlayout.fill_without_keys)."""
    for op, value in zip(stats_ops or (), (float("-inf"), float("-inf"), 0.0)):
        _kvlayout._fill(op, value, op.shape)
    if shape.kv_len or not (shape.batch and shape.q_heads and shape.q_len):
        return
    if out4 is not None and fresh:
        if not is_tensor(result):  # a Tensor result starts as zeros
            result[...] = 0
        if not opt.sinks:  # no NaN rows to write
            out4 = None
    lens = opt.q_lens
    stats = {name: op.padded(3) for name, op in zip(("lse", "max_score", "entropy"),
                                                    stats_ops or ())}
    _kvlayout.fill_without_keys(
        opt, shape.batch, shape.q_heads,
        lambda b: (0, shape.q_len, lens[b] if lens else shape.q_len), out4, stats)


@operation("scores")
def scores(q: ArrayT, k: Array, *, dtype: Optional[str] = None, out: Optional[ArrayT] = None,
           kv_dtype: Optional[str] = None, _kw) -> ArrayT:
    """Final attention scores, -inf where masked: [..., Lq, Lk] float32.

    q [B,H,Lq,D] / [H,Lq,D] / [Lq,D] and k [B,Hkv,Lk,D] (same rank) in
    float32, float16 or bfloat16 (uint16 with dtype='bf16'). See forward()
    for dtype, out, kv_dtype and the caches.
    """
    return _run_attention("attn_scores", q, k, None, _kw, out=out, stats=False, dtype=dtype,
                          kv_dtype=kv_dtype)


@operation("weights")
def weights(q: ArrayT, k: Array, *, dtype: Optional[str] = None, out: Optional[ArrayT] = None,
            stats: bool = False, kv_dtype: Optional[str] = None,
            _kw) -> Union[ArrayT, Tuple[ArrayT, Dict[str, ArrayT]]]:
    """Attention weights softmax(scores): [..., Lq, Lk] float32 (+ row stats).

    With stats=True returns (weights, {'lse', 'max_score', 'entropy'}), each
    [..., Lq]. See forward() for dtype, out, kv_dtype and the caches.
    """
    return _run_attention("attn_weights", q, k, None, _kw, out=out, stats=stats, dtype=dtype,
                          kv_dtype=kv_dtype)


@operation("forward")
def forward(q: ArrayT, k: Array, v: Array, *, dtype: Optional[str] = None,
            out: Optional[ArrayT] = None, stats: bool = False, kv_dtype: Optional[str] = None,
            _kw) -> Union[ArrayT, Tuple[ArrayT, Dict[str, ArrayT]]]:
    """Fused attention softmax(scores) . v: [..., Lq, Dv] float32.

    q        [B,Hq,Lq,D], [Hq,Lq,D] or [Lq,D]; k [..,Hkv,Lk,D], v [..,Hkv,Lk,Dv]
             of the same rank. Hq % Hkv == 0 (grouped-query attention).
             Any strides: views with a contiguous last axis (e.g. a [B,L,H,D]
             array transposed to [B,H,L,D]) are used in place, others copied.
    dtype    'bf16' (or 'f16'): how uint16 inputs (and a uint16 out) are read.
    out      optional output to write into: float32, or the model's float16
             or bfloat16 (ml_dtypes, or uint16 with dtype='bf16'; a Tensor
             of 'f16'/'bf16'), which gets the float32 result rounded once to
             nearest even (stats stay float32).
    stats    True: return (out, {'lse', 'max_score', 'entropy'}).
    kv_dtype 'q8_0', 'q4_0', 'fp8', 'e5m2', 'u8' or 'u4': k and v are
             quantized caches, uint8 arrays [..., Lk, row_bytes] as quantize()
             returns them (or as llama.cpp / vLLM / OpenVINO store them):
             D = row_bytes / 34 * 32 (q8_0), / 18 * 32 (q4_0), = row_bytes
             (fp8, e5m2); u8 and u4 rows are records of g values (g =
             k_scale_group for k, v_scale_group for v), so D = row_bytes /
             (8 + g) * g (u4: / (8 + g / 2) * g), or with g = 0 (one record
             per row) row_bytes - 8 (u4: 2 * (row_bytes - 8)); their records
             hold their scales (no k_scale(s) / v_scale(s)). They are read in
             place, in any of the cache layouts below too (a pool
             [num_blocks, block_size, Hkv, row_bytes], packed [Tk, Hkv,
             row_bytes]), as cache_append() writes them.

    Caches as engines keep them (q_offsets, kv_offsets, cu_seqlens_q,
    cu_seqlens_k, block_table below; see libattn._kvlayout for the details):
    only each sequence's rows are written; other rows of a fresh result are 0
    (stats: -inf, -inf, 0).

    A zero batch, head count or length (Lq, Lk) is an empty problem: no
    library call; results are empty, or with Lk = 0 each query row is a row
    that sees no key (output 0, lse = max_score = -inf or its sink,
    entropy 0). backward() gives zeros for it.
    """
    if v is None:
        raise TypeError("v: an array is required, got None")
    # the same call again (a decode step): a plan made once (_prepared.py)
    fast = _prepared.cached_forward(q, k, v, out, stats, dtype, kv_dtype, _kw)
    if fast is not None:
        return fast
    return _run_attention("attn_forward", q, k, v, _kw, out=out, stats=stats, dtype=dtype,
                          kv_dtype=kv_dtype)


# attn_kv_source's fields that carry attn_options fields (attn.h 1.13: "the
# attn_options fields of those names"; the lists as topk_indices and topk)
_SOURCE_FIELDS = (("kv_lens", "kv_lens"), ("indices", "topk_indices"), ("topk", "topk"),
                  ("k_scales", "k_scales"), ("v_scales", "v_scales"),
                  ("k_scale_group", "k_scale_group"), ("v_scale_group", "v_scale_group"),
                  ("k_tail", "k_tail"), ("k_tail_dim", "k_tail_dim"))


def _sources_workspace(shape, opt, extra):
    """forward_sources' split workspace (the binding owns it), sized from
    the second source as the library asks; None where it asks for none (a
    rejected argument: the call itself reports it)."""
    if not has("attn_forward_sources_workspace_size"):
        return None
    need = ctypes.c_size_t(0)
    status = lib().attn_forward_sources_workspace_size(ctypes.byref(shape), opt,
                                                       ctypes.byref(extra), ctypes.byref(need))
    if status != 0 or not need.value:
        return None
    workspace = ctypes.create_string_buffer(need.value)
    opt.workspace = ctypes.addressof(workspace)
    opt.workspace_size = need.value
    return workspace


class _Second:
    """forward_sources' second source: k2, v2 (float arrays, or quantized
    caches of kv2_dtype), their lists and keywords, turned into an
    attn_kv_source once the call's shape is known (source())."""

    def __init__(self, k2, v2, indices, kw, kv2_dtype, dtype):
        self.k2, self.v2, self.indices, self.kw = k2, v2, indices, kw
        self.kv2_dtype = kv2_dtype
        self.dt = None if kv2_dtype is None else _quant_dtype(kv2_dtype, "kv2_dtype")
        self.half = _half_bits(dtype)
        self.k_group = self.v_group = 0

    def check_keywords(self):
        """Its cache keywords against kv2_dtype (k_scale/v_scale scale both
        sources' caches: both must then be FP8)."""
        _, self.k_group, self.v_group = _kv_keywords(self.kw, self.kv2_dtype, "k2", "v2")

    def _operands(self, shape):
        """The C views of k2 and v2 ([B or 1, Hkv, Lk2, D]) checked against
        the call's shape."""
        if self.dt is None:
            ko = as_operand(self.k2, "k2", "qkv", self.half)
            vo = as_operand(self.v2, "v2", "qkv", self.half)
        else:
            ko, k_cols = _quant_operand(self.k2, "k2", self.dt, self.k_group, "k2_scale_group")
            vo, v_cols = _quant_operand(self.v2, "v2", self.dt, self.v_group, "v2_scale_group")
        for name, op in (("k2", ko), ("v2", vo)):
            if len(op.shape) not in (2, 3, 4):
                raise ValueError("%s: expected %s, got shape %r" % (name, _LAYOUTS2, op.shape))
            if not op.shape[-1]:
                raise ValueError("%s: shape %r has rows of no values" % (name, op.shape))
        if self.dt is None:  # values per row (a quantized row's bytes hold more or fewer)
            k_cols, v_cols = ko.shape[-1], vo.shape[-1]
        k4, v4 = ko.padded(), vo.padded()
        kb, kh, kl, _ = k4.shape
        if kb not in (shape.batch, 1):
            raise ValueError("k2: batch %d, but the call has batch %d (or 1: one cache that "
                             "every sequence reads)" % (kb, shape.batch))
        if kh != shape.kv_heads:
            raise ValueError("k2: %d heads, but k has %d" % (kh, shape.kv_heads))
        tail = k_tail_dim(self.kw, "k2_tail")
        if k_cols + tail != shape.head_dim:
            rule = "" if ko.dtype not in _ASYM else " (%d bytes of %s records of " \
                "k2_scale_group=%d)" % (k4.shape[3], _dt_name(ko.dtype), self.k_group)
            if tail:
                raise ValueError("k2: %d values per row%s and k2_tail's %d, but q has head_dim "
                                 "%d" % (k_cols, rule, tail, shape.head_dim))
            raise ValueError("k2: head_dim %d%s, but q has head_dim %d"
                             % (k_cols, rule, shape.head_dim))
        if v4.shape[:3] != k4.shape[:3]:
            raise ValueError("v2: shape %r does not match k2's %r in batch, heads and length"
                             % (vo.shape, ko.shape))
        if v_cols != shape.v_dim:
            raise ValueError("v2: %d values per row, but v has %d" % (v_cols, shape.v_dim))
        return k4, v4

    def source(self, shape):
        """(attn_kv_source, objects to keep alive, [(Operand, name)] for the
        output's overlap check) for a call of `shape`; the source is None
        where the call has no query row (no library call then)."""
        k4, v4 = self._operands(shape)
        named = [(k4, "k2"), (v4, "v2")]
        if not (shape.batch and shape.q_heads and shape.q_len):
            return None, [], named
        kv_len = k4.shape[2]
        opt, keep = build_source(self.kw, Shape(shape.batch, shape.q_heads, shape.kv_heads,
                                                shape.q_len, kv_len, shape.head_dim,
                                                shape.v_dim), self.indices)
        tensors = [k4.c_tensor(), v4.c_tensor()]
        src = KvSource()
        src.struct_size = ctypes.sizeof(KvSource)
        src.kv_len = kv_len
        src.k, src.v = ctypes.pointer(tensors[0]), ctypes.pointer(tensors[1])
        for name, field in _SOURCE_FIELDS:
            setattr(src, name, getattr(opt, field))
        return src, [opt, keep, tensors, k4, v4], named


_LAYOUTS2 = "[B,Hkv,Lk2,D] (B may be 1), [Hkv,Lk2,D] or [Lk2,D]"


@operation("forward", extra=SOURCE_KEYWORDS)
def forward_sources(q: ArrayT, k: Array, v: Array, k2: Array, v2: Array, indices: IntTable, *,
                    dtype: Optional[str] = None, out: Optional[ArrayT] = None,
                    stats: bool = False, kv_dtype: Optional[str] = None,
                    kv2_dtype: Optional[str] = None,
                    _kw) -> Union[ArrayT, Tuple[ArrayT, Dict[str, ArrayT]]]:
    """Attention over two K/V sources in one call, one softmax over both.

    The first source is k, v with every keyword as forward() takes them
    (causal, windows, kv_lens, masks, sinks, the cache layouts, kv_dtype,
    ...). The second is k2, v2, whose keys each query row names in its list
    (DeepSeek V4: a window over the latest keys, and the rows an indexer
    picked from a compressed cache; SGLang's extra_k_cache and
    extra_indices). The result is forward()'s on one cache holding both
    sources' keys, the first's masks on the first's keys, each row seeing
    of the second's exactly what its list names; lse, max_score and entropy
    are over both (a sink counts once). Returns what forward() returns.

    k2, v2   [B,Hkv,Lk2,D] / [B,Hkv,Lk2,Dv] (or [Hkv,Lk2,..], [Lk2,..]; a
             batch of 1 is one cache that every sequence reads, such as a
             paged pool [num_blocks, block_size, Hkv, D] reshaped to
             [1, Hkv, num_blocks * block_size, D] by a transposed view):
             float32, float16 or bfloat16 (dtype= as for q, k, v), their
             own dtype, or a quantized cache of kv2_dtype.
    indices  the second source's keys of each query row: [Lq, T] (the same
             lists for every sequence) or [B, Lq, T] (rows as q's) row
             indices of k2 in [0, kv2_lens[b]), -1 for an unused slot; a set
             (order and repeats do not matter), the same for every head.
             An entry outside that range raises AttnError before anything
             is written.
    kv2_dtype
             the second source's quantized format, as kv_dtype (k2_scales,
             v2_scales, k2_scale_group, v2_scale_group below); k_scale,
             v_scale (both sources then FP8) and precision apply to both.

    The second source's keys take the score scale and softcap only: the
    first source's masks and score terms (causal, windows, mask, bias,
    ALiBi, positions, tree_parents, topk_indices) and its layouts do not
    apply to them. A row that sees no key of either source is fully masked
    as in forward(). kv_splits >= 2 raises AttnError (a call with two
    sources runs unsplit, ATTN_ERR_UNSUPPORTED; it takes no workspace). The
    first source may have no key (Lk = 0: the rows see the second's keys
    alone); the second needs Lk2 >= 1 (AttnError). A zero batch, head count
    or Lq is an empty problem, as in forward(). libattn >= 1.13.
    """
    if not has("attn_forward_sources"):
        raise LibraryError("forward_sources: the loaded libattn has no attn_forward_sources (it "
                           "needs 1.13 or later)")
    if v is None:
        raise TypeError("v: an array is required, got None")
    for name, x in (("k2", k2), ("v2", v2)):
        if x is None:
            raise TypeError("%s: an array is required, got None" % name)
    if indices is None:
        raise TypeError("indices: a table of key indices is required, got None")
    second = _Second(k2, v2, indices, _kw, kv2_dtype, dtype)
    return _run_attention("attn_forward_sources", q, k, v, _kw, out=out, stats=stats,
                          dtype=dtype, kv_dtype=kv_dtype, second=second)


@operation("merge")
def merge(outs: Sequence[ArrayT], lses: Sequence[Array], *, out: Optional[ArrayT] = None,
          dtype: Optional[str] = None, _kw) -> Tuple[ArrayT, ArrayT]:
    """Merge partial attention results over disjoint key sets: (out, lse).

    outs     sequence of n >= 1 float32 arrays of one shape [B,H,Lq,Dv],
             [H,Lq,Dv] or [Lq,Dv]: forward() outputs over the key subsets.
    lses     sequence of n float32 arrays [B,H,Lq] / [H,Lq] / [Lq]: their
             stats['lse'].
    out      optional output: float32, float16 or bfloat16 (as forward()'s;
             dtype='bf16' or 'f16' says how a uint16 out is read), which gets
             the float32 merge rounded once to nearest even; lse stays float32.
    Per row: L = log sum exp(lse_i), out = sum exp(lse_i - L) out_i in part
    order. A part with lse -inf contributes nothing (its row is not read);
    all -inf gives 0 and -inf; a NaN or +inf lse gives NaN.
    """
    if not has("attn_merge"):
        raise LibraryError("merge: the loaded libattn has no attn_merge (it needs 1.1 or later)")
    outs, lses = list(outs), list(lses)
    if not outs:
        raise ValueError("outs: at least one partial result is needed")
    if len(lses) != len(outs):
        raise ValueError("lses: %d arrays for %d outputs" % (len(lses), len(outs)))
    like_tensor = is_tensor(outs[0])
    ops = [as_operand(o, "outs[%d]" % i, "f32") for i, o in enumerate(outs)]
    rank = len(ops[0].shape)
    if rank not in (2, 3, 4):
        raise ValueError("outs[0]: expected [B,H,Lq,Dv], [H,Lq,Dv] or [Lq,Dv], got shape %r"
                         % (ops[0].shape,))
    for i, op in enumerate(ops):
        if op.shape != ops[0].shape:
            raise ValueError("outs[%d]: shape %r differs from outs[0]'s %r"
                             % (i, op.shape, ops[0].shape))
        if not all(op.shape):
            raise ValueError("outs[%d]: shape %r has an empty dimension" % (i, op.shape))
    lead = ops[0].shape[:-1]
    lse_ops = []
    for i, x in enumerate(lses):
        op = as_operand(x, "lses[%d]" % i, "f32")
        if op.shape != lead:
            raise ValueError("lses[%d]: shape %r, expected %r" % (i, op.shape, lead))
        want, step = [], 1
        for n in reversed(op.shape):
            want.insert(0, step)
            step *= n
        if any(n > 1 and s != w for n, s, w in zip(op.shape, op.strides, want)):
            raise ValueError("lses[%d]: must be C-contiguous" % i)
        lse_ops.append(op)
    o4 = [op.padded() for op in ops]
    batch, heads, q_len, v_dim = o4[0].shape
    result, out_op = _output(out, "out", ops[0].shape, like_tensor, True, _half_bits(dtype))
    lse_result, lse_op = new_f32(lead, like_tensor)
    inputs = [(op, "outs[%d]" % i) for i, op in enumerate(ops)] + \
        [(op, "lses[%d]" % i) for i, op in enumerate(lse_ops)]
    check_no_overlap(out_op, "out", inputs)
    n = len(ops)
    parts = (Partial * n)()
    for i in range(n):
        parts[i].out = o4[i].c_tensor()
        parts[i].lse = lse_ops[i].address
    shape = Shape(batch, heads, heads, q_len, 1, v_dim, v_dim)
    opt, keep = build(_kw, shape)
    table = out_op.padded().c_tensor()
    check(lib().attn_merge(ctypes.byref(shape), opt, parts, n,
                           ctypes.byref(table), lse_op.address), "attn_merge")
    del keep, ops, lse_ops
    return result, lse_result


@operation("backward")
def backward(q: ArrayT, k: Array, v: Array, out: Array, dout: Array, lse: Array, *,
             dtype: Optional[str] = None, dbias: bool = False, dsinks: bool = False,
             _kw) -> Tuple[ArrayT, ...]:
    """Gradients of forward(): (dq, dk, dv), then dbias when dbias=True and
    dsinks when dsinks=True, in that order.

    q, k, v and every keyword as given to forward(); out and lse are what
    that forward returned (out, and stats['lse']), dout = d loss / d out of
    out's shape. dq has q's shape, dk k's and dv v's, all float32; with GQA
    dk and dv are summed over the query heads of each group. dbias is
    d loss / d scores at the full [..., Lq, Lk] shape (0 where masked): sum it
    over the axes a broadcast bias spans. Padded and fully masked rows get 0.
    dsinks (needs sinks=) is d loss / d sink logit per (batch entry, query
    head): [B, Hq] float32 (one row less per missing leading axis of q).
    Results are identical for every `threads`.

    Packed and offset batches (cu_seqlens_q/_k, q_offsets, kv_offsets, as
    given to forward): out and dout as forward's out, lse as its
    stats['lse']; dq, dk, dv are laid out like q, k, v (packed: [T,H,D]),
    dbias like scores, and rows outside every sequence are 0. q_pos/k_pos
    (a shard of a longer sequence) as in forward, with the merged lse and
    out. Paged caches (block_table) are not taken.
    """
    if v is None:
        raise TypeError("v: an array is required, got None")
    if any(_kw.get(name) is not None for name in LAYOUT):
        return _kvlayout.run_backward_layout(
            q, k, v, out, dout, lse,
            options=lambda shape, sides: build(_kw, shape, sides, skip=_LAYOUT_SKIPS),
            side_inputs=lambda target: side_inputs(_kw, target), q_lens=_kw["q_lens"],
            kv_lens=_kw["kv_lens"], half_bits=_half_bits(dtype), is_tensor_result=is_tensor(q),
            dbias=dbias, dsinks=dsinks, sinks_given=_kw["sinks"] is not None, grads_type=Grads,
            **{name: _kw.get(name) for name in LAYOUT})
    rank, shape, q4, k4, v4 = _attention_inputs(q, k, v, dtype)
    target = (shape.batch, shape.q_heads, shape.q_len, shape.kv_len)
    opt, keep = build(_kw, shape, side_inputs(_kw, target))
    lead = 4 - rank
    o_dims = (shape.batch, shape.q_heads, shape.q_len, shape.v_dim)
    outs = {}
    for name, x in (("out", out), ("dout", dout)):
        op = as_operand(x, name, "qkv", _half_bits(dtype))
        if op.shape != o_dims[lead:]:
            raise ValueError("%s: shape %r, expected %r" % (name, op.shape, o_dims[lead:]))
        outs[name] = op.padded()
    lse_op = as_operand(lse, "lse", "f32")
    lse_dims = (shape.batch, shape.q_heads, shape.q_len)[lead:]
    if lse_op.shape != lse_dims:
        raise ValueError("lse: shape %r, expected %r" % (lse_op.shape, lse_dims))
    contiguous, step = True, 1
    for n, st in reversed(list(zip(lse_op.shape, lse_op.strides))):
        if n > 1 and st != step:
            contiguous = False
        step *= n
    if not contiguous:  # the C side reads lse as one dense array
        if np is None or not isinstance(lse, np.ndarray):
            raise ValueError("lse: must be C-contiguous (as forward(stats=True) returns it)")
        lse = np.ascontiguousarray(lse, dtype=np.float32)
        lse_op = as_operand(lse, "lse", "f32")
    like_tensor = is_tensor(q)
    dims = {"dq": (shape.batch, shape.q_heads, shape.q_len, shape.head_dim),
            "dk": (shape.batch, shape.kv_heads, shape.kv_len, shape.head_dim),
            "dv": (shape.batch, shape.kv_heads, shape.kv_len, shape.v_dim),
            "dbias": target}
    if dsinks and _kw["sinks"] is None:
        raise ValueError("dsinks: needs sinks= (the gradient of sinks that are not there)")
    names = ["dq", "dk", "dv"] + (["dbias"] if dbias else [])
    if is_empty(shape):  # no library call: nothing depends on what is not there
        return tuple(_zeros(dims[name][lead:], like_tensor) for name in names) + (
            (_zeros((shape.batch, shape.q_heads)[min(lead, 1):], like_tensor),) if dsinks
            else ())
    results, c_tensors = [], {}
    for name in names:
        arr, op = new_f32(dims[name][lead:], like_tensor)
        results.append(arr)
        c_tensors[name] = op.padded().c_tensor()
        keep.append(op)
    grads = Grads()
    grads.struct_size = ctypes.sizeof(Grads)
    for name in names:
        setattr(grads, name, ctypes.pointer(c_tensors[name]))
    if dsinks:
        arr, op = new_f32((shape.batch, shape.q_heads)[min(lead, 1):], like_tensor)
        results.append(arr)
        keep.append(op)
        grads.dsinks = op.address
    tensors = [q4.c_tensor(), k4.c_tensor(), v4.c_tensor(), outs["out"].c_tensor(),
               outs["dout"].c_tensor()]
    args = [ctypes.byref(shape), opt] + [ctypes.byref(t) for t in tensors]
    check(lib().attn_backward(*args, lse_op.address, ctypes.byref(grads)), "attn_backward")
    del keep, outs, lse_op
    return tuple(results)


def quantize(x: Array, dtype: str, *, scale: float = 0.0,
             group: Optional[int] = 0) -> numpy.ndarray[Any, Any]:
    """Quantize float rows for a K/V cache: uint8 array [..., row_bytes].

    x      float array [..., D] (NumPy), converted to float32 once.
    dtype  'q8_0' (D % 32 == 0; 34 bytes per 32 values), 'q4_0' (18 bytes per
           32), 'fp8' (E4M3, one byte per value), 'e5m2' (FP8 E5M2, one
           byte per value: the upper half of a float16), or OpenVINO's
           asymmetric 'u8' / 'u4': per group of g values a record of a
           float32 scale, a float32 zero point and the codes (u8: a byte
           each, 8 + g bytes; u4: two per byte, value 2i in the high nibble
           of byte i, 8 + g / 2 bytes), value = (code - zp) * scale.
    scale  fp8/e5m2 only: the cache stores x / scale (0 means 1); pass the
           same value as k_scale / v_scale to forward().
    group  u8/u4 only: values per record, dividing D (even for u4); 0 or
           None: one record per row (OpenVINO's default). row_bytes is
           D / g * (8 + g) (u4: D / g * (8 + g / 2)); pass the same group
           as k_scale_group / v_scale_group to forward().
    Rounds exactly as llama.cpp's reference quantizers (q8_0, q4_0), to
    nearest even with saturation at +-448 (fp8) or +-57344 (e5m2), and as
    OpenVINO's u8/u4 codec (attn_quantize in attn.h: per record s = (max -
    min) / 255 (u4: / 15), zp = -min / s, code = round(x * (1 / s) + zp)
    clamped; a non-finite value raises AttnError). The result can be passed
    to forward(..., kv_dtype=dtype).
    """
    if np is None:
        raise TypeError("quantize: needs NumPy")
    dt = _quant_dtype(dtype, "dtype")
    arr = np.ascontiguousarray(np.asarray(x), dtype=np.float32)
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError("x: needs a non-empty last axis, got shape %r" % (arr.shape,))
    values, unit = _QUANT_LAYOUT[dt]
    cols = arr.shape[-1]
    scale = float_arg(scale, "scale", minimum=0.0)
    if dt not in _FP8 and scale:
        raise ValueError("scale: only for dtype=" + _FP8_NAMES)
    group = _group_arg(group, "group")
    if dt not in _ASYM and group:
        raise ValueError("group: only for dtype=" + _ASYM_NAMES)
    rows = arr.size // cols
    src = arr.__array_interface__["data"][0]
    if dt in _ASYM:
        g = group or cols
        if g % values:
            raise ValueError("group: %s records hold two codes per byte: the group (D for "
                             "group 0) must be even, got %d" % (_dt_name(dt), g))
        if cols % g:
            raise ValueError("group: %d values per %s record do not divide the rows' D = %d"
                             % (g, _dt_name(dt), cols))
        rec = _asym_record_bytes(dt, g)
        row_bytes = cols // g * rec
        out = np.empty(arr.shape[:-1] + (row_bytes,), dtype=np.uint8)
        dst = out.__array_interface__["data"][0]
        # attn_quantize writes one record per row: a call per group, its
        # rows at the group's record, strides in bytes
        for j in range(cols // g if rows else 0):
            check(lib().attn_quantize(int(dt), src + j * g * 4, rows, g, cols, dst + j * rec,
                                      row_bytes, 0.0), "attn_quantize")
        return out
    if cols % values:
        raise ValueError("x: %s rows are whole blocks of %d values; D = %d"
                         % (dt.name.lower(), values, cols))
    row_bytes = cols // values * unit
    out = np.empty(arr.shape[:-1] + (row_bytes,), dtype=np.uint8)
    if rows:
        check(lib().attn_quantize(int(dt), src, rows, cols, cols,
                                  out.__array_interface__["data"][0], cols // values, scale),
              "attn_quantize")
    return out


# The largest finite value of each FP8 format (attn.h; _dtypes.py's `max`): the
# per-row scale quantize_rows() picks maps a row's largest magnitude onto it.
_FP8_MAX = {DType(row.value): row.max for row in _QUANT_ROWS if row.kind == "fp8"}


def quantize_rows(x: Array, dtype: str) -> Tuple[numpy.ndarray[Any, Any],
                                                 numpy.ndarray[Any, Any]]:
    """FP8 cache rows with one scale per row: (uint8 [..., D], float32 [...]).

    dtype 'fp8' (E4M3) or 'e5m2'. Each row's scale is its largest magnitude
    over the format's largest finite value (448, 57344), 1 for a row of
    zeros; the row is stored as x / scale, rounded as quantize(x, dtype,
    scale=that scale) rounds it (x / scale in float32, then to nearest
    even). Pass the scales as forward()'s k_scales / v_scales (the cache's
    shape without its last axis, e.g. [B, Hkv, Lk]: one per token and
    head). Non-finite values are refused (ValueError): a row's scale would
    not be a number.
    """
    if np is None:
        raise TypeError("quantize_rows: needs NumPy")
    dt = _quant_dtype(dtype, "dtype")
    if dt not in _FP8:
        raise ValueError("dtype: quantize_rows is for %s, got %r" % (_FP8_NAMES, dtype))
    arr = np.ascontiguousarray(np.asarray(x), dtype=np.float32)
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError("x: needs a non-empty last axis, got shape %r" % (arr.shape,))
    if not np.isfinite(arr).all():
        raise ValueError("x: non-finite values have no per-row scale")
    amax = np.abs(arr).max(axis=-1)
    scales = np.where(amax > 0, amax / np.float32(_FP8_MAX[dt]), 1).astype(np.float32)
    # a row whose scale would not be a positive normal float: scale 1
    scales[~(scales >= np.finfo(np.float32).tiny)] = 1.0
    with np.errstate(over="ignore"):
        scaled = arr / scales[..., None]  # float32 division, as attn_quantize divides
    return quantize(scaled, dtype), scales


@operation("mask_apply")
def mask_apply(scores: ArrayT, *, copy: bool = False, _kw) -> ArrayT:
    """Apply softcap, bias, ALiBi and masks to a score table you computed: [B,H,Lq,Lk],
    [H,Lq,Lk] or [Lq,Lk] float32 (already scaled).

    Works in place and returns `scores`, which must then be a writable
    float32 array with a contiguous last axis; copy=True leaves it untouched
    and returns a new array instead.
    """
    like_tensor = is_tensor(scores)
    if copy:
        src = as_operand(scores, "scores", "f32")
        if like_tensor:
            result, op = new_f32(src.shape, True)
            copy_f32(src, op)
        else:
            result, op = new_f32(src.shape, False)
            result[...] = src.keep[0]
    else:
        result = scores
        op = as_operand(scores, "scores", "f32", need_writable=True, allow_copy=False)
    rank = len(op.shape)
    if rank not in (2, 3, 4):
        raise ValueError("scores: expected [B,H,Lq,Lk], [H,Lq,Lk] or [Lq,Lk], got shape %r"
                         % (op.shape,))
    if not all(op.shape):
        raise ValueError("scores: shape %r has an empty dimension" % (op.shape,))
    for n, s in zip(op.shape, op.strides):
        if n > 1 and s == 0:
            raise ValueError("scores: is written in place and cannot broadcast (stride 0)")
    s4 = op.padded()
    batch, heads, q_len, kv_len = s4.shape
    sides = side_inputs(_kw, s4.shape)
    check_no_overlap(s4, "scores", [(side, name) for name, side in sides.items()])
    # head_dim and v_dim are not used by mask_apply but must be valid.
    shape = Shape(batch, heads, heads, q_len, kv_len, 1, 0)
    opt, keep = build(_kw, shape, sides)
    table = s4.c_tensor()
    check(lib().attn_mask_apply(ctypes.byref(shape), opt, ctypes.byref(table)),
          "attn_mask_apply")
    del keep
    return result


# ------------------------------------------------------------------ row operations

def _row_groups(ops, extra=()):
    """Yield (addresses, rows, row_stride) covering every row of the same-shape
    operands `ops` with as few calls as the layouts allow. `extra` operands
    (per-row outputs such as lse) have the shape of the leading dimensions
    and must be C-contiguous; they get their addresses too.
    """
    shape = ops[0].shape
    cols = shape[-1]
    lead = shape[:-1]
    everything = list(ops) + list(extra)

    # Drop size-1 dimensions, then merge neighbours every operand steps over evenly.
    dims = [(lead[d], [op.strides[d] for op in everything]) for d in range(len(lead))
            if lead[d] != 1]
    merged = []
    for n, strides in dims:
        if merged:
            prev_n, prev_strides = merged[-1]
            if all(ps == s * n for ps, s in zip(prev_strides, strides)):
                merged[-1] = (prev_n * n, strides)
                continue
        merged.append((n, strides))
    if not merged:
        yield [op.address for op in everything], 1, cols
        return
    inner_n, inner_strides = merged[-1]
    outer = merged[:-1]
    row_strides = inner_strides[:len(ops)]
    together = all(s == row_strides[0] for s in row_strides) and row_strides[0] >= cols and \
        all(s == 1 for s in inner_strides[len(ops):])
    for index in indices(tuple(n for n, _ in outer)):
        base = [op.address + sum(i * st[j] for i, (_, st) in zip(index, outer)) * op.itemsize
                for j, op in enumerate(everything)]
        if together:
            yield base, inner_n, row_strides[0]
        else:
            for r in range(inner_n):
                yield [b + r * inner_strides[j] * everything[j].itemsize
                       for j, b in enumerate(base)], 1, cols


def _check_rows_writable(op, name):
    for n, s in zip(op.shape[:-1], op.strides[:-1]):
        if n > 1 and s == 0:
            raise ValueError("%s: is written and cannot broadcast (stride 0)" % name)


def softmax(x: ArrayT, *, out: Optional[ArrayT] = None,
            stats: bool = False) -> Union[ArrayT, Tuple[ArrayT, Dict[str, ArrayT]]]:
    """Log-sum-exp softmax over the last axis of a float array (any rank >= 1).

    Returns a new float32 array, or writes into `out` (which may be `x`
    itself for an in-place softmax). A row of only -inf becomes zeros.
    stats=True returns (p, {'lse': [...]}), lse over the leading axes.
    """
    like_tensor = is_tensor(x)
    xo = as_operand(x, "x", "f32")
    if len(xo.shape) < 1 or not all(xo.shape):
        raise ValueError("x: needs at least one axis and no empty axis, got shape %r"
                         % (xo.shape,))
    if out is None:
        result, oo = new_f32(xo.shape, like_tensor)
        if like_tensor:
            copy_f32(xo, oo)
        else:
            result[...] = xo.keep[0]
    else:
        result = out
        oo = check_output(out, "out", xo.shape)
        if oo.address != xo.address or oo.strides != xo.strides:
            check_no_overlap(oo, "out", [(xo, "x")])
            if like_tensor or not hasattr(out, "__array_interface__"):
                copy_f32(xo, oo)
            else:
                out[...] = xo.keep[0]
    _check_rows_writable(oo, "out" if out is not None else "x")
    extra, lse = (), None
    if stats:
        # lse has the leading shape (1 element for a single row), C-contiguous.
        lse, lse_op = new_f32(xo.shape[:-1] or (1,), like_tensor)
        extra = (lse_op,)
    fn = lib().attn_softmax
    for addresses, rows, row_stride in _row_groups([oo], extra):
        lse_address = addresses[1] if stats else None
        check(fn(addresses[0], rows, xo.shape[-1], row_stride, lse_address), "attn_softmax")
    return (result, {"lse": lse}) if stats else result


def softmax_backward(p: ArrayT, dp: Array, *, out: Optional[ArrayT] = None) -> ArrayT:
    """ds = p * (dp - sum(p * dp)) over the last axis; p, dp of equal shape.

    Returns a new float32 array, or writes into `out`, which may be `p` or
    `dp` itself (element-wise in place) but must not partially overlap them.
    """
    like_tensor = is_tensor(p)
    po = as_operand(p, "p", "f32")
    do = as_operand(dp, "dp", "f32")
    if po.shape != do.shape:
        raise ValueError("dp: shape %r differs from p's %r" % (do.shape, po.shape))
    if len(po.shape) < 1 or not all(po.shape):
        raise ValueError("p: needs at least one axis and no empty axis, got shape %r"
                         % (po.shape,))
    if out is None:
        result, oo = new_f32(po.shape, like_tensor)
    else:
        result = out
        oo = check_output(out, "out", po.shape)
        _check_rows_writable(oo, "out")
        for op, name in ((po, "p"), (do, "dp")):
            same = oo.address == op.address and oo.strides == op.strides
            if not same:
                check_no_overlap(oo, "out", [(op, name)])
    fn = lib().attn_softmax_backward
    for (pa, da, oa), rows, row_stride in _row_groups([po, do, oo]):
        check(fn(pa, da, oa, rows, po.shape[-1], row_stride), "attn_softmax_backward")
    return result


from . import _prepared  # noqa: E402 (it imports _run_attention from here)

# SPDX-License-Identifier: MIT
"""Offset, packed and paged K/V (attn.h 1.1) for scores, weights and forward.

Three keyword families, which combine:

  q_offsets, kv_offsets   per-sequence first row / key position inside the
                          usual [B,H,L,D] tensors (a left-padded cache:
                          kv_offsets = padding, kv_lens = valid keys).
  cu_seqlens_q/_k         FlashAttention's varlen convention: B + 1 int
                          offsets into packed [T,H,D] tensors; results are
                          [Tq,Hq,Dv] (forward), [Hq,Tq,Tk] (scores/weights),
                          stats [Hq,Tq].
  block_table             [B, max_blocks] pool block of every page; k and v
                          are then pools [num_blocks, block_size, Hkv, D]
                          (vLLM, FlashAttention's paged k_cache); the logical
                          key extent is max_blocks * block_size and kv_lens
                          gives each sequence's length.

Only a sequence's own rows (and, with key offsets, columns) are written; the
rest of a fresh result holds what a row without keys gets (0 for outputs and
weights, -inf for scores, lse and max_score).

k and v may be quantized caches (kv_dtype) in each layout, with their FP8
row scales laid out as the caches (_layout_scales).
"""

import ctypes
import numbers
import struct

from ._capi import DType, RowStats, Shape, check, lib
from ._tensor import Operand, as_operand, check_no_overlap, is_empty, new_f32, np

_NEG_INF = float("-inf")
_NAN = float("nan")
# one NaN element of each output dtype, as the library writes a NaN row
_NAN_BYTES = {DType.F32: struct.pack("=f", _NAN), DType.F16: struct.pack("=e", _NAN),
              DType.BF16: struct.pack("=H", 0x7FC0)}


def _int_list(value, name, count=None):
    """A list of Python ints from an int sequence / integer array."""
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise TypeError("%s: expected integers, got an array of %s" % (name, value.dtype))
        value = value.reshape(-1).tolist()
    try:
        values = list(value)
    except TypeError:
        raise TypeError("%s: expected a sequence of ints, got %r" % (name, value)) from None
    for i, n in enumerate(values):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError("%s[%d]: expected an int, got %r" % (name, i, n))
    if count is not None and len(values) != count:
        raise ValueError("%s: %d values for a batch of %d" % (name, len(values), count))
    return [int(n) for n in values]


def _int32_array(values, name):
    for i, n in enumerate(values):
        if not -2 ** 31 <= n < 2 ** 31:
            raise ValueError("%s[%d] = %d does not fit int32" % (name, i, n))
    return (ctypes.c_int32 * max(1, len(values)))(*values)


def _cu_seqlens(value, name):
    """(offsets, lengths) from B + 1 nondecreasing offsets starting anywhere >= 0."""
    cu = _int_list(value, name)
    if len(cu) < 2:
        raise ValueError("%s: needs batch + 1 >= 2 entries, got %d" % (name, len(cu)))
    for b in range(len(cu) - 1):
        if cu[b] < 0 or cu[b + 1] < cu[b]:
            raise ValueError("%s: must be >= 0 and nondecreasing, got %r" % (name, cu))
    return cu[:-1], [cu[b + 1] - cu[b] for b in range(len(cu) - 1)]


def _view(op, shape, strides):
    """`op` described as the 4-D C view (shape, element strides)."""
    return Operand(op.address, op.dtype, shape, strides, op.keep, op.source, op.writable)


def _packed(op, name, batch):
    """[T,H,D] packed rows as the C view [B,H,T,D] with batch_stride 0."""
    if len(op.shape) != 3:
        raise ValueError("%s: packed sequences need [T,H,D], got shape %r" % (name, op.shape))
    t, h, d = op.shape
    st, sh, _ = op.strides
    return _view(op, (batch, h, t, d), (0, sh, st, 1))


def _pool(op, name):
    """[num_blocks, block_size, Hkv, D] as the C view [blocks][heads][slots][D]."""
    if len(op.shape) != 4:
        raise ValueError("%s: a paged pool needs [num_blocks, block_size, Hkv, D], got shape "
                         "%r" % (name, op.shape))
    nb, bs, h, d = op.shape
    s0, s1, s2, _ = op.strides
    return _view(op, (nb, h, bs, d), (s0, s2, s1, 1))


def _fill(op, value, shape):
    """Sets every element of a fresh C-contiguous f32 result."""
    count = 1
    for n in shape:
        count *= n
    if count:
        ctypes.memmove(op.address, (ctypes.c_float * count)(*([value] * count)), count * 4)


def _fill_floats(address, value, count):
    if count:
        ctypes.memmove(address, (ctypes.c_float * count)(*([value] * count)), count * 4)


def fill_without_keys(opt, batch, heads, rows_of, out4, stats):
    """Writes what a call with no key at all (kv_len 0, which the library
    is not asked to run) means for the query rows it would write, attn.h's
    rows without a visible key: output 0; lse and max_score -inf, entropy 0;
    with sinks a row i < Lq_b has lse = max_score = its sink z instead, and
    a NaN or +inf z makes the row NaN (output included).

    rows_of(b) -> (first row, rows written, rows with a sink) of sequence b
    in the C views; out4 the 4-D view of out (forward) or None; stats
    {name: Operand [B,H,Lq] f32}, already filled with -inf, -inf, 0.
    """
    sinks = opt.sinks.contents if opt.sinks else None
    for b in range(batch):
        first, written, valid = rows_of(b)
        for h in range(heads):
            z = _NEG_INF
            if sinks is not None:
                z = ctypes.c_float.from_address(
                    sinks.data + 4 * (b * sinks.batch_stride + h * sinks.head_stride)).value
            nan = z != z or z == float("inf")
            if out4 is not None and written:
                row = out4.shape[3] * out4.itemsize
                for i in range(first, first + written):
                    at = out4.at((b, h, i))
                    if nan and i < first + valid:
                        ctypes.memmove(at, _NAN_BYTES[out4.dtype] * out4.shape[3], row)
                    else:
                        ctypes.memset(at, 0, row)
            if z == _NEG_INF or not valid:
                continue
            for name, op in stats.items():
                if nan or name != "entropy":  # a finite sink's entropy stays 0
                    _fill_floats(op.at((b, h, first)), _NAN if nan else z, valid)


class _Problem:
    """What _setup resolved: the C views, the shape, the options and the
    per-sequence lists (None where not given)."""


def _layout_scales(value, field, cache, view, dim):
    """k_scales / v_scales beside a cache in a layout: float32 values of the
    cache's shape without its last axis (a pool's [num_blocks, block_size,
    Hkv], packed [Tk, Hkv], or [B, Hkv, Lk]), broadcastable, or with a last
    axis of G groups per row (each over dim / G channels), as cache_append
    writes them. view() turns the cache's Operand into its C view; the
    scales get the same. Returns (attn_tensor, G or 0, arrays to keep)."""
    if np is None:
        raise TypeError("%s: needs NumPy" % field)
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise TypeError("%s: expected numbers, got an array of %s" % (field, arr.dtype))
    arr = arr.astype(np.float32, copy=False)
    lead = cache.shape[:-1]
    groups = arr.shape[-1] if arr.ndim == len(cache.shape) else 0
    if groups and dim % groups:
        raise ValueError("%s: %d groups per row do not divide the row's %d channels"
                         % (field, groups, dim))
    try:
        full = np.broadcast_to(arr if groups else arr[..., None], lead + (max(groups, 1),))
    except ValueError:
        raise ValueError("%s: shape %r does not broadcast to the cache's %r without its last "
                         "axis (or with G groups on it)" % (field, arr.shape, lead)) from None
    if groups > 1 and full.strides[-1] != 4:
        full = np.ascontiguousarray(full)
    strides = [st // 4 if n > 1 else 0 for st, n in zip(full.strides, full.shape)]
    op = Operand(full.__array_interface__["data"][0], DType.F32, full.shape, strides[:-1] + [1],
                 [arr, full], arr, False)
    return view(op, field).c_tensor(), groups, [arr, full]


def _setup(q, k, v, *, options, side_inputs, q_lens, kv_lens, q_offsets, kv_offsets,
           cu_seqlens_q, cu_seqlens_k, block_table, half_bits, kv_operand=None, scales=None):
    """The layout keywords checked and turned into C views of q, k, v, the
    shape, and the options with the layouts and lengths set.

    side_inputs(target) -> {keyword: Operand or None} broadcasts the score-shaped
    tensors (mask, bias); options(shape, sides) -> (Options, keep) sets every
    field but the layouts and the lengths, which this sets. kv_operand(x,
    name) -> (Operand, values per row) reads a quantized k and v;
    scales {'k_scales': ..., 'v_scales': ...} are their row scales in the
    caches' layout (see _layout_scales).
    """
    packed_q = cu_seqlens_q is not None
    packed_k = cu_seqlens_k is not None
    paged = block_table is not None
    if packed_q and q_offsets is not None:
        raise ValueError("q_offsets: not with cu_seqlens_q (which gives the offsets)")
    if packed_k and kv_offsets is not None:
        raise ValueError("kv_offsets: not with cu_seqlens_k (which gives the offsets)")
    if packed_k and paged:
        raise ValueError("cu_seqlens_k: not with block_table (use kv_lens for the lengths)")
    if packed_q and q_lens is not None:
        raise ValueError("q_lens: not with cu_seqlens_q (which gives the lengths)")
    if packed_k and kv_lens is not None:
        raise ValueError("kv_lens: not with cu_seqlens_k (which gives the lengths)")

    qo = as_operand(q, "q", "qkv", half_bits)
    # values per row of k and v (a quantized row's bytes hold more or fewer)
    if kv_operand is not None:
        ko, k_cols = kv_operand(k, "k")
        vo, v_cols = kv_operand(v, "v") if v is not None else (None, 0)
    else:
        ko = as_operand(k, "k", "qkv", half_bits)
        vo = as_operand(v, "v", "qkv", half_bits) if v is not None else None
        k_cols, v_cols = ko.shape[-1], (vo.shape[-1] if vo is not None else 0)

    # batch and the per-sequence arrays
    q_off, q_len_list, kv_off, kv_len_list = None, None, None, None
    if packed_q:
        q_off, q_len_list = _cu_seqlens(cu_seqlens_q, "cu_seqlens_q")
    if packed_k:
        kv_off, kv_len_list = _cu_seqlens(cu_seqlens_k, "cu_seqlens_k")
    table = None
    if paged:
        if np is not None and isinstance(block_table, np.ndarray):
            if block_table.ndim != 2:
                raise ValueError("block_table: expected [B, max_blocks], got shape %r"
                                 % (block_table.shape,))
            rows = block_table.tolist()
        else:
            rows = [_int_list(r, "block_table row") for r in block_table]
        if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
            raise ValueError("block_table: expected a non-empty [B, max_blocks] table")
        table = rows
    if packed_q:
        batch = len(q_off)
    elif paged:
        batch = len(table)
    elif packed_k:
        batch = len(kv_off)
    else:
        if len(qo.shape) != 4:
            raise ValueError("q: q_offsets/kv_offsets take [B,H,L,D] tensors, got shape %r"
                             % (qo.shape,))
        batch = qo.shape[0]
    for name, other in (("cu_seqlens_k", kv_off), ("block_table", table)):
        if other is not None and len(other) != batch:
            raise ValueError("%s: %d sequences, but the batch has %d" % (name, len(other), batch))

    # the C views of q, k, v
    q4 = _packed(qo, "q", batch) if packed_q else qo
    if not packed_q and (len(q4.shape) != 4 or q4.shape[0] != batch):
        raise ValueError("q: expected [%d,H,Lq,D], got shape %r" % (batch, qo.shape))
    if paged:
        k4, v4 = _pool(ko, "k"), (_pool(vo, "v") if vo is not None else None)
    elif packed_k:
        k4, v4 = _packed(ko, "k", batch), (_packed(vo, "v", batch) if vo is not None else None)
    else:
        k4, v4 = ko, vo
        if len(k4.shape) != 4 or k4.shape[0] != batch:
            raise ValueError("k: expected [%d,Hkv,Lk,D], got shape %r" % (batch, ko.shape))
    _, q_heads, q_len, head_dim = q4.shape
    _, kv_heads, kv_rows, _ = k4.shape
    kd = k_cols
    if kd != head_dim:
        raise ValueError("k: head_dim %d, but q has head_dim %d" % (kd, head_dim))
    for name, op in (("q", qo), ("k", ko), ("v", vo)):
        if op is not None and not op.shape[-1]:
            raise ValueError("%s: shape %r has rows of no values" % (name, op.shape))
    if q_heads % kv_heads if kv_heads else q_heads:
        raise ValueError("k: %d heads do not divide q's %d heads" % (kv_heads, q_heads))
    v_dim = head_dim
    if v4 is not None:
        if v4.shape[1:3] != k4.shape[1:3] or (paged and v4.shape[0] != k4.shape[0]):
            raise ValueError("v: shape %r does not match k's %r" % (vo.shape, ko.shape))
        v_dim = v_cols
    block_size = k4.shape[2] if paged else 0
    kv_len = len(table[0]) * block_size if paged else kv_rows

    if q_offsets is not None:
        q_off = _int_list(q_offsets, "q_offsets", batch)
    if kv_offsets is not None:
        kv_off = _int_list(kv_offsets, "kv_offsets", batch)
    if q_lens is not None:
        q_len_list = _int_list([q_lens] * batch if isinstance(q_lens, numbers.Integral)
                               else q_lens, "q_lens", batch)
    if kv_lens is not None:
        kv_len_list = _int_list([kv_lens] * batch if isinstance(kv_lens, numbers.Integral)
                                else kv_lens, "kv_lens", batch)

    shape = Shape(batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim)
    sides = side_inputs((batch, q_heads, q_len, kv_len))
    opt, keep = options(shape, sides)
    arrays = {}
    for field, values in (("q_lens", q_len_list), ("kv_lens", kv_len_list),
                          ("q_offsets", q_off), ("kv_offsets", kv_off)):
        if values is not None:
            arrays[field] = _int32_array(values, field)
            setattr(opt, field, ctypes.cast(arrays[field], ctypes.POINTER(ctypes.c_int32)))
    if paged:
        flat = [n for row in table for n in row]
        arrays["block_table"] = _int32_array(flat, "block_table")
        opt.block_table = ctypes.cast(arrays["block_table"], ctypes.POINTER(ctypes.c_int32))
        opt.block_table_stride = len(table[0])
        opt.block_size = block_size
        opt.num_blocks = k4.shape[0]
    for field, cache, dim in (("k_scales", ko, head_dim), ("v_scales", vo, v_dim)):
        value = (scales or {}).get(field)
        if value is None or cache is None:
            continue
        view = (_pool if paged else (lambda op, name: _packed(op, name, batch)) if packed_k
                else (lambda op, name: op))
        t, groups, held = _layout_scales(value, field, cache, view, dim)
        arrays[field] = t
        keep.extend(held)
        setattr(opt, field, ctypes.pointer(t))
        if groups:
            setattr(opt, field[0] + "_scale_group", dim // groups)

    p = _Problem()
    p.packed_q, p.packed_k, p.paged, p.batch = packed_q, packed_k, paged, batch
    p.q4, p.k4, p.v4, p.shape, p.sides, p.opt, p.keep, p.arrays = (
        q4, k4, v4, shape, sides, opt, keep, arrays)
    p.q_off, p.q_len_list, p.kv_off, p.kv_len_list = q_off, q_len_list, kv_off, kv_len_list
    return p


def run_layout(function, q, k, v, *, out, stats, options, side_inputs, q_lens, kv_lens,
               q_offsets, kv_offsets, cu_seqlens_q, cu_seqlens_k, block_table, dtype,
               half_bits, is_tensor_result, invoke, kv_operand=None, scales=None,
               plain_call=None, second=None):
    """One of attn_scores / attn_weights / attn_forward (or
    attn_forward_sources) with the 1.1 layout keywords (_setup says what
    options, side_inputs, kv_operand and scales are). second(shape) ->
    (attn_kv_source or None, objects to keep, [(Operand, name)]) gives
    attn_forward_sources' second source, which the layouts leave as it is.
    An empty problem runs no library call, and only when invoke is
    plain_call (not a plan); with a second source, only where no query
    row is left (the library runs a first source without keys)."""
    p = _setup(q, k, v, options=options, side_inputs=side_inputs, q_lens=q_lens,
               kv_lens=kv_lens, q_offsets=q_offsets, kv_offsets=kv_offsets,
               cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, block_table=block_table,
               half_bits=half_bits, kv_operand=kv_operand, scales=scales)
    packed_q, batch, q4, k4, v4 = p.packed_q, p.batch, p.q4, p.k4, p.v4
    shape, sides, opt, keep, arrays = p.shape, p.sides, p.opt, p.keep, p.arrays
    q_off, q_len_list = p.q_off, p.q_len_list
    q_heads, q_len, kv_len, v_dim = shape.q_heads, shape.q_len, shape.kv_len, shape.v_dim
    extra, extra_keep, extra_ops = second(shape) if second is not None else (None, [], [])

    # the result: fresh ones start as rows without keys
    forward = function in ("attn_forward", "attn_forward_sources")
    if packed_q:
        dims = (q_len, q_heads, v_dim) if forward else (q_heads, q_len, kv_len)
    else:
        dims = (batch, q_heads, q_len, v_dim if forward else kv_len)
    if out is None:
        result, out_op = new_f32(dims, is_tensor_result)
        _fill(out_op, _NEG_INF if function == "attn_scores" else 0.0, dims)
    else:
        # the forward's out may be f16/bf16 too (the library rounds its rows)
        slot = "qkv" if forward else "f32"
        result, out_op = out, as_operand(out, "out", slot, half_bits, need_writable=True,
                                         allow_copy=False)
        if out_op.shape != dims:
            raise ValueError("out: shape %r, expected %r" % (out_op.shape, dims))
    if packed_q and forward:
        out4 = _view(out_op, (batch, q_heads, q_len, v_dim),
                     (0, out_op.strides[1], out_op.strides[0], 1))
    elif packed_q:
        out4 = _view(out_op, (batch, q_heads, q_len, kv_len),
                     (0, out_op.strides[0], out_op.strides[1], 1))
    else:
        out4 = out_op
    check_no_overlap(out4, "out", [(q4, "q"), (k4, "k"), (v4, "v")] + extra_ops +
                     [(side, name) for name, side in sides.items()])

    stats_c, stats_ops = None, []
    if stats:
        for name, value in (("lse", _NEG_INF), ("max_score", _NEG_INF), ("entropy", 0.0)):
            arr, op = new_f32((batch, q_heads, q_len), is_tensor_result)
            _fill(op, value, (batch, q_heads, q_len))
            stats_ops.append((name, arr, op))
        stats_c = RowStats(*(op.address for _, _, op in stats_ops))

    if is_empty(shape) and not (second is not None and batch and q_heads and q_len):
        if invoke is not plain_call:
            raise ValueError("q, k: a zero batch, head count or length leaves nothing to "
                             "plan (forward() takes it)")
        if not kv_len and batch and q_heads and q_len:  # rows of sequences, no keys

            def rows_of(b):
                n = p.q_len_list[b] if p.q_len_list is not None else q_len
                return (q_off[b] if q_off is not None else 0), n, n

            fill_without_keys(opt, batch, q_heads, rows_of, out4 if forward else None,
                              {name: op for name, _, op in stats_ops})
    else:
        tensors = [q4.c_tensor(), k4.c_tensor()]
        if v4 is not None:
            tensors.append(v4.c_tensor())
        tensors.append(out4.c_tensor())
        args = [ctypes.byref(shape), opt] + [ctypes.byref(t) for t in tensors]
        if function != "attn_scores":
            args.append(ctypes.byref(stats_c) if stats_c is not None else None)
        if second is not None:  # attn_forward_sources: the source after v
            args.insert(5, ctypes.byref(extra))
        invoke(function, args, [keep, sides, tensors, stats_c, stats_ops, out_op, extra_keep])
    del keep, arrays, extra_keep
    if not stats:
        return result

    stats_out = {}
    for name, arr, op in stats_ops:
        if not packed_q:
            stats_out[name] = arr
            continue
        # [B,Hq,Tq] -> [Hq,Tq]: each packed row belongs to one sequence
        packed_arr, packed_op = new_f32((q_heads, q_len), is_tensor_result)
        _fill(packed_op, _NEG_INF if name != "entropy" else 0.0, (q_heads, q_len))
        for b in range(batch):
            for h in range(q_heads):
                if q_len_list[b]:
                    ctypes.memmove(packed_op.at((h, q_off[b])), op.at((b, h, q_off[b])),
                                   q_len_list[b] * 4)
        stats_out[name] = packed_arr
    return result, stats_out



def run_backward_layout(q, k, v, out, dout, lse, *, options, side_inputs, q_lens, kv_lens,
                        q_offsets, kv_offsets, cu_seqlens_q, cu_seqlens_k, block_table,
                        half_bits, is_tensor_result, dbias, dsinks, sinks_given, grads_type):
    """attn_backward with the offset and packed layouts (attn.h 1.5).

    out, dout and lse are laid out as forward() returned them for the same
    keywords: packed q gives out/dout [Tq,Hq,Dv] and lse [Hq,Tq], else
    [B,Hq,Lq,Dv] and [B,Hq,Lq]. dq has q's layout, dk and dv k's and v's,
    dbias the score layout ([Hq,Tq,Tk] packed, else [B,Hq,Lq,Lk]), dsinks
    [B,Hq]; rows outside every sequence are 0.
    """
    if block_table is not None:
        raise ValueError("block_table: attn_backward does not read paged caches "
                         "(training keeps K and V dense)")
    p = _setup(q, k, v, options=options, side_inputs=side_inputs, q_lens=q_lens,
               kv_lens=kv_lens, q_offsets=q_offsets, kv_offsets=kv_offsets,
               cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, block_table=None,
               half_bits=half_bits)
    s, batch = p.shape, p.batch
    hq, lq, lk = s.q_heads, s.q_len, s.kv_len

    def c_view(op, name, packed, heads, length, cols):
        """out/dout or a gradient as the C [B,H,L,cols] view of its layout."""
        dims = (length, heads, cols) if packed else (batch, heads, length, cols)
        if op.shape != dims:
            raise ValueError("%s: shape %r, expected %r" % (name, op.shape, dims))
        return _packed(op, name, batch) if packed else op

    views = {}
    for name, x in (("out", out), ("dout", dout)):
        views[name] = c_view(as_operand(x, name, "qkv", half_bits), name, p.packed_q, hq, lq,
                             s.v_dim)
    # lse as the C call reads it: float[B][Hq][Lq], a sequence's rows at its offsets
    lse_op = as_operand(lse, "lse", "f32")
    want = (hq, lq) if p.packed_q else (batch, hq, lq)
    if lse_op.shape != want:
        raise ValueError("lse: shape %r, expected %r" % (lse_op.shape, want))
    lse_arr, lse_c = new_f32((batch, hq, lq), False)
    _fill(lse_c, _NEG_INF, (batch, hq, lq))
    for b in range(batch):
        n = p.q_len_list[b] if p.q_len_list is not None else lq
        first = p.q_off[b] if p.q_off is not None else 0
        for h in range(hq):
            src = (h, first) if p.packed_q else (b, h, first)
            if n and lse_op.strides[-1] == 1:  # a row of floats in one move
                ctypes.memmove(lse_c.at((b, h, first)), lse_op.at(src), n * 4)
                continue
            for i in range(n):  # other strides: element by element
                ctypes.memmove(lse_c.at((b, h, first + i)),
                               lse_op.at(src[:-1] + (src[-1] + i,)), 4)

    results, c_tensors, keep = [], {}, [p.keep, p.sides, views, lse_op, lse_c]
    specs = [("dq", p.packed_q, hq, lq, s.head_dim), ("dk", p.packed_k, s.kv_heads, lk,
             s.head_dim), ("dv", p.packed_k, s.kv_heads, lk, s.v_dim)]
    for name, packed, heads, length, cols in specs:
        dims = (length, heads, cols) if packed else (batch, heads, length, cols)
        arr, op = new_f32(dims, is_tensor_result)
        _fill(op, 0.0, dims)
        results.append(arr)
        keep.append(op)
        c_tensors[name] = (_packed(op, name, batch) if packed else op).c_tensor()
    if dbias:
        dims = (hq, lq, lk) if p.packed_q else (batch, hq, lq, lk)
        arr, op = new_f32(dims, is_tensor_result)
        _fill(op, 0.0, dims)
        results.append(arr)
        keep.append(op)
        view = (_view(op, (batch, hq, lq, lk), (0, op.strides[0], op.strides[1], 1))
                if p.packed_q else op)
        c_tensors["dbias"] = view.c_tensor()
    grads = grads_type()
    grads.struct_size = ctypes.sizeof(grads_type)
    for name, t in c_tensors.items():
        setattr(grads, name, ctypes.pointer(t))
    if dsinks:
        if not sinks_given:
            raise ValueError("dsinks: needs sinks= (the gradient of sinks that are not there)")
        arr, op = new_f32((batch, hq), is_tensor_result)
        _fill(op, 0.0, (batch, hq))
        results.append(arr)
        keep.append(op)
        grads.dsinks = op.address
    if is_empty(s):  # no library call: every gradient is 0
        return tuple(results)
    tensors = [p.q4.c_tensor(), p.k4.c_tensor(), p.v4.c_tensor(), views["out"].c_tensor(),
               views["dout"].c_tensor()]
    args = [ctypes.byref(s), p.opt] + [ctypes.byref(t) for t in tensors]
    check(lib().attn_backward(*args, lse_c.address, ctypes.byref(grads)), "attn_backward")
    del keep, lse_arr
    return tuple(results)

# SPDX-License-Identifier: MIT
"""The keyword arguments that set attn_options: one table, read by every operation.

KEYWORDS has one Keyword per Python keyword, in the order the operations'
signatures list them and convert them (a call with two bad arguments
reports the first in this order, the score-shaped tensors before the rest):

  name     the keyword
  fields   the attn_options fields it sets (src/option_list.h, _options.ROWS)
  default  its default, which leaves those fields at their C defaults
  ops      the operations that take it: ATTENTION (all but merge, which
           takes threads only) unless the row says why fewer
  convert  convert(value, call) checks the value and sets its fields on
           call.opt (a Call); None: only _kvlayout.run_layout reads it
  slot     for the score-shaped tensors (mask, bias): the dtype slot their
           operand is read in, converted by side_inputs() before the rest
           (the operations check them for overlap with the output)
  doc      its lines in the operations' docstrings

NOT_EXPOSED names every field that no keyword sets, and why. test_options.py
fails unless the two cover _options.ROWS (so src/option_list.h) exactly.
@operation(op) gives a function the keywords of `op`: in its signature and
its docstring, and as one dict, converted by build(). SOURCE_KEYWORDS are
forward_sources' second source (attn_kv_source, no attn_options field of
its own): the rows of the forward keywords they mirror, converted by
build_source().
"""

import ctypes
import functools
import inspect
import math
import numbers

from . import _kvlayout
from ._options import ROWS
from ._capi import CAUSAL, MAX_KV_SPLITS, MAX_POSITION, DType, Options, has, lib, pool_for
from ._capi import Tensor as _CTensor
from ._tensor import as_operand, broadcast, is_empty, materialize_columns, np

_FLT_MAX = 3.4028234663852886e38


# ------------------------------------------------------------------ converters

def float_arg(value, name, minimum=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s: expected a number, got %r" % (name, value))
    value = float(value)
    if not math.isfinite(value) or abs(value) > _FLT_MAX:
        raise ValueError("%s: must be a finite float32 value, got %r" % (name, value))
    if minimum is not None and value < minimum:
        raise ValueError("%s: must be >= %g, got %r" % (name, minimum, value))
    return value


def int_arg(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: expected an int, got %r" % (name, value))
    value = int(value)
    if value < minimum:
        raise ValueError("%s: must be >= %d, got %d" % (name, minimum, value))
    return value


def _per_batch(value, name, batch, ctype, what, limit, limit_text):
    """ctype[batch] from an int or a sequence of ints in [0, limit], or None."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        values = [value] * batch
    else:
        if np is not None and isinstance(value, np.ndarray):
            if value.dtype.kind not in "iu":
                raise TypeError("%s: expected integers, got an array of %s" % (name, value.dtype))
            value = value.reshape(-1).tolist()
        try:
            values = list(value)
        except TypeError:
            raise TypeError("%s: expected an int or a sequence of %d ints, got %r"
                            % (name, batch, value)) from None
        if len(values) != batch:
            raise ValueError("%s: %d %s for a batch of %d" % (name, len(values), what, batch))
    out = (ctype * batch)()
    for b, n in enumerate(values):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError("%s[%d]: expected an int, got %r" % (name, b, n))
        if not 0 <= n <= limit:
            raise ValueError("%s[%d] = %d is outside [0, %s]" % (name, b, n, limit_text))
        out[b] = int(n)
    return out


def _windows(window):
    """(window, window_right) from an int or a (left, right) pair, in attn.h's
    convention: each side counts the query's own aligned position, 0 = off."""
    if isinstance(window, (tuple, list)):
        if len(window) != 2:
            raise ValueError("window: expected an int or a (left, right) pair, got %r"
                             % (window,))
        sides = [(window[0], "window[0]"), (window[1], "window[1]")]
    else:
        sides = [(window, "window"), (0, "window_right")]
    out = []
    for value, name in sides:
        value = int_arg(value, name, 0)
        if value > 2 ** 63 - 1:  # ctypes would wrap it silently
            raise ValueError("%s: must fit in int64, got %d" % (name, value))
        out.append(value)
    return tuple(out)


def _per_head(value, name, batch, heads):
    """A float32 [B][H] attn_tensor (data, strides) for sinks / ALiBi slopes:
    a number (every head), H values (per head) or B x H values. Returns
    (Tensor, buffer to keep alive) or (None, None)."""
    if value is None:
        return None, None
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype.kind not in "fiu":
            raise TypeError("%s: expected numbers, got an array of %s" % (name, value.dtype))
        dims = value.shape
        flat = [float(x) for x in value.reshape(-1).tolist()]
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        dims, flat = (), [float(value)]
    else:
        try:
            rows = list(value)
        except TypeError:
            raise TypeError("%s: expected a number or a sequence of numbers, got %r"
                            % (name, value)) from None
        if rows and not isinstance(rows[0], numbers.Real):
            nested = [list(r) for r in rows]
            dims = (len(nested), len(nested[0]) if nested else 0)
            if any(len(r) != dims[1] for r in nested):
                raise ValueError("%s: rows of different lengths" % name)
            flat = [x for r in nested for x in r]
        else:
            dims, flat = (len(rows),), rows
        for x in flat:
            if isinstance(x, bool) or not isinstance(x, numbers.Real):
                raise TypeError("%s: expected numbers, got %r" % (name, x))
        flat = [float(x) for x in flat]
    if dims == ():
        batch_stride, head_stride = 0, 0
    elif dims == (heads,):
        batch_stride, head_stride = 0, 1
    elif dims == (batch, heads):
        batch_stride, head_stride = heads, 1
    else:
        raise ValueError("%s: expected a number, %d values (one per query head) or [%d, %d] "
                         "(per batch entry and head), got shape %r"
                         % (name, heads, batch, heads, dims))
    data = (ctypes.c_float * len(flat))(*flat)
    return _CTensor(ctypes.addressof(data), DType.F32, batch_stride, head_stride, 0), data


_FIELD_TYPES = dict(Options._fields_)


class Call:
    """One call's attn_options while its keywords are converted.

    opt holds the fields; keep, what they point into (alive until the C
    call returns); shape, the call's attn_shape; sides, the score-shaped
    operands side_inputs() made; workspace, whether kv_splits provides one
    (attn_forward_sources reads none). struct_size is left to
    _capi.OptionsArg.
    """

    def __init__(self, shape, sides, workspace=True):
        self.opt = Options()
        self.keep = []
        self.shape = shape
        self.sides = sides
        self.workspace = workspace

    def point(self, field, array, keep=()):
        """opt.field = the address of ctypes `array` (an array or a struct)."""
        if isinstance(array, ctypes.Array):
            setattr(self.opt, field, ctypes.cast(array, _FIELD_TYPES[field]))
        else:
            setattr(self.opt, field, ctypes.pointer(array))
        self.keep += [array, *keep]


def _value(field, check):
    """A converter setting `field` to check(value)."""
    def convert(value, call):
        setattr(call.opt, field, check(value))
    return convert


def _causal(value, call):
    if not isinstance(value, (bool, int)) and not (np is not None and isinstance(value, np.bool_)):
        raise TypeError("causal: expected a bool, got %r" % (value,))
    call.opt.flags = CAUSAL if value else 0


# attn_precision (include/attn.h), by name, in the enum's order
PRECISIONS = ("default", "bf16", "int8")


def _precision(value, call):
    if isinstance(value, str):
        if value not in PRECISIONS:
            raise ValueError("precision: expected one of %s, got %r" % (", ".join(PRECISIONS), value))
        call.opt.precision = PRECISIONS.index(value)
        return
    call.opt.precision = int_arg(value, "precision", 0)
    if call.opt.precision >= len(PRECISIONS):
        raise ValueError("precision: expected 0..%d, got %r" % (len(PRECISIONS) - 1, value))


def _window(value, call):
    call.opt.window, call.opt.window_right = _windows(value)


def _heads(field, name):
    def convert(value, call):
        t, data = _per_head(value, name, call.shape.batch, call.shape.q_heads)
        if t is not None:
            call.point(field, t, [data])
    return convert


def _row_scales(field, name=None):
    """k_scales / v_scales: float32 values broadcastable to [B, Hkv, Lk] (the
    cache's shape without its last axis), read in place where they can be
    (a float32 array; broadcast axes become strides of 0). A 4-D array
    [B, Hkv, Lk, G] gives G scales per row, each over dim / G consecutive
    channels (attn.h 1.8: k_scale_group / v_scale_group), its groups
    contiguous (copied when they are not). `name`: the keyword that errors
    name (the field's own by default)."""
    group_field = field[0] + "_scale_group"
    name = name or field

    def convert(value, call):
        if value is None:
            return
        if np is None:
            raise TypeError("%s: needs NumPy" % name)
        arr = np.asarray(value)
        if arr.dtype.kind not in "fiu":
            raise TypeError("%s: expected numbers, got an array of %s" % (name, arr.dtype))
        if arr.dtype != np.float32:
            arr = arr.astype(np.float32)
        s = call.shape
        shape = (s.batch, s.kv_heads, s.kv_len)
        dim = s.head_dim if field == "k_scales" else (s.v_dim or s.head_dim)
        groups = arr.shape[-1] if arr.ndim == 4 else 0
        if arr.ndim == 4 and (groups < 1 or dim % groups):
            raise ValueError("%s: %d groups per row do not divide the row's %d channels"
                             % (name, groups, dim))
        try:
            view = np.broadcast_to(arr, shape + ((groups,) if groups else ()))
        except ValueError:
            raise ValueError("%s: shape %r does not broadcast to [B, Hkv, Lk] = [%d, %d, %d]"
                             " (or [B, Hkv, Lk, G])" % ((name, arr.shape) + shape)) from None
        if groups > 1 and view.strides[3] != 4:
            view = np.ascontiguousarray(view)
        strides = [st // 4 if n > 1 else 0 for st, n in zip(view.strides[:3], view.shape[:3])]
        t = _CTensor(view.__array_interface__["data"][0], DType.F32, *strides)
        call.point(field, t, [arr, view])
        if groups:
            setattr(call.opt, group_field, dim // groups)
    return convert


def _record_group(field, name=None):
    """k_scale_group / v_scale_group of an asym (u8, u4) cache: values per
    record, 0 for one record per row. Set only when nonzero: k_scales /
    v_scales set the field for an FP8 cache's groups."""
    name = name or field

    def convert(value, call):
        group = 0 if value is None else int_arg(value, name, 0)
        if group:
            setattr(call.opt, field, group)
    return convert


def _lengths(name, extent, field=None):
    """q_lens / kv_lens (or, with `field`, a keyword `name` setting that field)."""
    def convert(value, call):
        arr = _per_batch(value, name, call.shape.batch, ctypes.c_int32, "lengths",
                         getattr(call.shape, extent), str(getattr(call.shape, extent)))
        if arr is not None:
            call.point(field or name, arr)
    return convert


def _positions(name):
    def convert(value, call):
        arr = _per_batch(value, name, call.shape.batch, ctypes.c_int64, "positions",
                         MAX_POSITION, "2**62")
        if arr is not None:
            call.point(name, arr)
    return convert


def _side(name):
    def convert(value, call):
        op = call.sides.get(name)
        if op is not None:
            call.point(name, op.c_tensor(), [op])
    return convert


def _offsets(name):
    def convert(value, call):
        if value is not None:  # rows / columns of each sequence (attn.h 1.1)
            call.point(name, _kvlayout._int32_array(
                _kvlayout._int_list(value, name, call.shape.batch), name))
    return convert


def _tree(value, call):
    """tree_parents: [Lq] (one tree for every sequence) or [B, Lq] parents,
    as the int32 [B][q_len] array of attn.h (entry b * q_len + row)."""
    if value is None:
        return
    batch, q_len = call.shape.batch, call.shape.q_len
    rows = value.tolist() if np is not None and isinstance(value, np.ndarray) else list(value)
    if rows and not isinstance(rows[0], (list, tuple)):
        rows = [rows] * batch
    if len(rows) != batch or any(len(r) != q_len for r in rows):
        raise ValueError("tree_parents: expected [%d] or [%d, %d] parents"
                         % (q_len, batch, q_len))
    flat = [int(p) for r in rows for p in _kvlayout._int_list(r, "tree_parents")]
    call.point("tree_parents", _kvlayout._int32_array(flat, "tree_parents"))


def _slot_positions(value, call):
    """k_positions: [B, Lk] (or [Lk], the same for every sequence) position
    of each key slot, Lk the call's key extent (packed: Tk; paged: max_blocks
    * block_size), negative for an empty slot; as the int64 [B][kv_len]
    array of attn.h (entry b * kv_len + slot). The library checks the
    values (at most 2**62)."""
    if value is None:
        return
    batch, kv_len = call.shape.batch, call.shape.kv_len
    rows = value.tolist() if np is not None and isinstance(value, np.ndarray) else list(value)
    if not rows or not isinstance(rows[0], (list, tuple)):
        rows = [rows] * batch
    if len(rows) != batch or any(len(r) != kv_len for r in rows):
        raise ValueError("k_positions: expected [%d] or [%d, %d] positions"
                         % (kv_len, batch, kv_len))
    flat = [p for r in rows for p in _kvlayout._int_list(r, "k_positions")]
    for i, p in enumerate(flat):
        if not -2 ** 63 <= p < 2 ** 63:
            raise ValueError("k_positions[%d] = %d does not fit int64" % (i, p))
    call.point("k_positions", (ctypes.c_int64 * max(1, len(flat)))(*flat))


def _tail(name):
    """k_tail (or a keyword `name` setting its fields): the last n values of
    every key row (attn.h 1.9), an array broadcastable to [B, Hkv, Lk, n],
    float16 read as F16, anything else as float32; read in place where it
    can be (broadcast axes become strides of 0; a last axis that is not
    contiguous is copied). Sets k_tail_dim = n; k then holds the first
    head_dim - n values of each row."""
    def convert(value, call):
        if value is None:
            return
        if np is None:
            raise TypeError("%s: needs NumPy" % name)
        arr = np.asarray(value)
        if arr.dtype.kind not in "fiu":
            raise TypeError("%s: expected numbers, got an array of %s" % (name, arr.dtype))
        if arr.dtype not in (np.float16, np.float32):
            arr = arr.astype(np.float32)
        s = call.shape
        n = arr.shape[-1] if arr.ndim else 0
        if arr.ndim < 1 or n < 1:
            raise ValueError("%s: expected [B, Hkv, Lk, n] values, got shape %r"
                             % (name, arr.shape))
        try:
            view = np.broadcast_to(arr, (s.batch, s.kv_heads, s.kv_len, n))
        except ValueError:
            raise ValueError("%s: shape %r does not broadcast to [B, Hkv, Lk, n] = [%d, %d, "
                             "%d, %d]" % (name, arr.shape, s.batch, s.kv_heads, s.kv_len, n)) \
                from None
        item = arr.dtype.itemsize
        if n > 1 and view.strides[3] != item:
            view = np.ascontiguousarray(view)
        strides = [st // item if d > 1 else 0 for st, d in zip(view.strides[:3], view.shape[:3])]
        dt = DType.F16 if arr.dtype == np.float16 else DType.F32
        call.point("k_tail", _CTensor(view.__array_interface__["data"][0], dt, *strides),
                   [arr, view])
        call.opt.k_tail_dim = n
    return convert


_k_tail = _tail("k_tail")


def k_tail_dim(kw, name="k_tail"):
    """The k_tail keyword's n (its last axis), 0 without one: the operations'
    shape checks take k rows of head_dim - n values then (`name`: another
    keyword of a tail, forward_sources' k2_tail)."""
    tail = kw.get(name)
    if tail is None:
        return 0
    shape = getattr(tail, "shape", None)
    if shape is None and np is not None:
        shape = np.asarray(tail).shape
    return int(shape[-1]) if shape else 0


def _lists(name):
    """topk_indices (or a keyword `name` setting its fields): [Lq, k] (the
    same lists for every sequence) or [B, Lq, k] key indices, as the int32
    [B][q_len][k] array of attn.h (entry (b * q_len + row) * k + t), and
    topk = k."""
    def convert(value, call):
        if value is None:
            return
        batch, q_len = call.shape.batch, call.shape.q_len
        data = value.tolist() if hasattr(value, "tolist") else value
        rows = [r.tolist() if hasattr(r, "tolist") else r for r in data]
        if rows and rows[0] and isinstance(rows[0][0], (list, tuple)):
            seqs = [[list(r) for r in s] for s in rows]
        else:
            seqs = [[list(r) for r in rows]] * batch
        k = len(seqs[0][0]) if seqs and seqs[0] else 0
        if (len(seqs) != batch or any(len(s) != q_len for s in seqs) or k < 1
                or any(len(r) != k for s in seqs for r in s)):
            raise ValueError("%s: expected [%d, k] or [%d, %d, k] key indices, k >= 1"
                             % (name, q_len, batch, q_len))
        flat = [n for s in seqs for r in s for n in _kvlayout._int_list(r, name)]
        call.point("topk_indices", _kvlayout._int32_array(flat, name))
        call.opt.topk = k
    return convert


_topk = _lists("topk_indices")


def _threads(value, call):
    call.opt.parallel_for, call.opt.parallel_ctx = pool_for(value)


def _kv_splits(value, call):
    """Split-KV, with the workspace the binding owns. The probe reads every
    other field, which is why this row is the table's last."""
    splits = int_arg(value, "kv_splits", 0)
    if splits > MAX_KV_SPLITS:
        raise ValueError("kv_splits: at most %d, got %d" % (MAX_KV_SPLITS, splits))
    if not call.workspace:  # the value alone (forward_sources: sized with its source)
        call.opt.kv_splits = splits
        return
    can_ask = has("attn_forward_workspace_size")
    # kv_splits 1 still asks: a shared prefix is attended once with a workspace
    if not (splits >= 2 or can_ask):
        return
    probe = Options.from_buffer_copy(call.opt)
    probe.kv_splits = splits
    need = ctypes.c_size_t(0)
    # a rejected shape or option: attn_forward reports it as its own
    status = (lib().attn_forward_workspace_size(ctypes.byref(call.shape), probe,
                                                ctypes.byref(need)) if can_ask else 0)
    if splits >= 2 or need.value:
        call.opt.kv_splits = splits
    if status == 0 and need.value:
        workspace = ctypes.create_string_buffer(need.value)
        call.opt.workspace = ctypes.addressof(workspace)
        call.opt.workspace_size = need.value
        call.keep.append(workspace)


# ------------------------------------------------------------------ the table

class Keyword:
    __slots__ = ("name", "fields", "default", "hint", "ops", "convert", "slot", "doc")

    def __init__(self, name, fields, default, hint, convert, doc, ops=None, slot=None):
        self.name, self.fields, self.default = name, tuple(fields.split()), default
        self.hint = hint
        self.ops = ATTENTION if ops is None else ops
        self.convert, self.slot, self.doc = convert, slot, doc


# The keywords' type hints, each one of these (the aliases are _types.py's);
# libattn.torch maps each to a torch.library schema type.
HINTS = ("bool", "int", "float", "str", "Optional[int]", "Window", "Optional[Heads]",
         "Optional[Ints]", "Optional[IntTable]", "Optional[Array]")


# The operations that take the score options (merge takes threads only).
ATTENTION = ("scores", "weights", "forward", "backward", "mask_apply")
# The cache layouts: with any of them set, _kvlayout.run_layout runs the call.
LAYOUT = ("q_offsets", "kv_offsets", "cu_seqlens_q", "cu_seqlens_k", "block_table")

NOT_EXPOSED = {
    "struct_size": "set for each call by _capi.OptionsArg: the size of the oldest "
                   "attn_options that has every field the call sets",
}


def _default_keywords(by_hand):
    """A keyword for each value field of _options.ROWS that no row of `by_hand`
    and no NOT_EXPOSED entry names: named after the field, its value checked by the
    field's rule as the library would (a negative integer or float is
    refused where the rule wants >= 0), its help pointing at attn.h. So a new
    value option reaches every operation without a row; a row of its own
    replaces this when it needs another name, converter or help text."""
    named = {f for k in by_hand for f in k.fields} | set(NOT_EXPOSED)
    for row in ROWS:
        if row.kind != "value" or row.name in named:
            continue
        nonneg = row.rule in ("cap", "nonneg", "splits")
        if row.ctype == "float":
            check = (lambda name, m: lambda v: float_arg(v, name, minimum=m))(
                row.name, 0.0 if nonneg else None)
        else:
            check = (lambda name, m: lambda v: int_arg(v, name, m))(
                row.name, 0 if nonneg else -(1 << 63))
        yield Keyword(row.name, row.name, row.default,
                      "float" if row.ctype == "float" else "int", _value(row.name, check),
                      "attn_options.%s (include/attn.h)." % row.name)


_BY_HAND = (
    Keyword("causal", "flags", False, "bool", _causal,
            "bottom-right aligned causal mask."),
    # mask_apply's scores are already scaled
    Keyword("scale", "scale", 0.0, "float", _value("scale", lambda v: float_arg(v, "scale")),
            "0 means 1/sqrt(D).", ops=("scores", "weights", "forward", "backward")),
    Keyword("softcap", "softcap", 0.0, "float",
            _value("softcap", lambda v: float_arg(v, "softcap", minimum=0.0)),
            "0 means off."),
    Keyword("window", "window window_right", 0, "Window", _window,
            "sliding window: W keys up to and including the query's aligned\n"
            "position (0 = off), or (W, R): also at most R keys from that\n"
            "position on (two-sided; FlashAttention's window_size=(l, r) is\n"
            "(l + 1, r + 1) here, its -1 is 0)."),
    # scores come before the softmax that the sink enters
    Keyword("sinks", "sinks", None, "Optional[Heads]", _heads("sinks", "sinks"),
            "attention-sink logits: a number, [Hq] or [B,Hq]; one more softmax\n"
            "entry per row with no value (gpt-oss). Stats include it.",
            ops=("weights", "forward", "backward")),
    Keyword("alibi", "alibi_slopes", None, "Optional[Heads]", _heads("alibi_slopes", "alibi"),
            "ALiBi slopes, [Hq] or [B,Hq] (or a number): adds\n"
            "-slope * |i + Lk - Lq - j| to each score (see alibi_slopes())."),
    # FP8 caches (kv_dtype=): read by the operations that take one; v by forward only
    Keyword("k_scale", "k_scale", 0.0, "float",
            _value("k_scale", lambda v: float_arg(v, "k_scale", minimum=0.0)),
            "fp8 only: the K cache holds values / k_scale (0 means 1).",
            ops=("scores", "weights", "forward")),
    Keyword("v_scale", "v_scale", 0.0, "float",
            _value("v_scale", lambda v: float_arg(v, "v_scale", minimum=0.0)),
            "fp8 only: the V cache holds values / v_scale (0 means 1).", ops=("forward",)),
    # the operations that multiply q by k (attn.h: backward takes default and bf16)
    Keyword("precision", "precision", "default", "str", _precision,
            "'default' (f32 products), 'bf16' (q, k, weights and v rounded to\n"
            "bfloat16 for the bf16 dot units; backward: its scores, dQ, dK, dV)\n"
            "or 'int8' (q quantized per 32-block against q8_0/q4_0 keys; not\n"
            "backward); each mode's error bound is in attn.h. Where the CPU lacks\n"
            "the instructions: the default's result.",
            ops=("scores", "weights", "forward", "backward")),
    # FP8 caches, scales per key row (attn.h 1.6); with a cache layout
    # _kvlayout lays them out as the caches
    Keyword("k_scales", "k_scales k_scale_group", None, "Optional[Array]",
            _row_scales("k_scales"),
            "fp8 only, instead of k_scale: one scale per key row, float32\n"
            "broadcastable to [B, Hkv, Lk] (per token and head; [Hkv, 1] per\n"
            "head, [B, 1, Lk] per token), or G per row over head_dim / G\n"
            "channels each, [B, Hkv, Lk, G] (attn.h 1.8; per channel: G =\n"
            "head_dim). With a cache layout: the cache's shape without its\n"
            "last axis (a pool's [num_blocks, block_size, Hkv], packed\n"
            "[Tk, Hkv]), or with G on it, as cache_append writes them.",
            ops=("scores", "weights", "forward")),
    # key rows in two parts (attn.h 1.9): dense caches only here
    Keyword("k_tail", "k_tail k_tail_dim", None, "Optional[Array]", _k_tail,
            "the last n values of every key row, [B, Hkv, Lk, n] (float16 or\n"
            "float32, broadcastable): k then holds the first head_dim - n\n"
            "values (a DeepSeek MLA cache's rope part kept apart from its\n"
            "latent, or beside an fp8 latent with k_scales groups). Not with\n"
            "the cache layouts.",
            ops=("scores", "weights", "forward")),
    Keyword("v_scales", "v_scales v_scale_group", None, "Optional[Array]",
            _row_scales("v_scales"),
            "fp8 only, instead of v_scale: one scale per value row, likewise.",
            ops=("forward",)),
    # the asym caches' record groups (attn.h 1.12); FP8's groups are set by
    # k_scales / v_scales above, so 0 here leaves the field to them
    Keyword("k_scale_group", "k_scale_group", 0, "int", _record_group("k_scale_group"),
            "u8/u4 only: values per record of the K cache (0: one record\n"
            "per row, OpenVINO's default); with it D = row_bytes / (8 + g) * g\n"
            "(u4: / (8 + g / 2) * g), or row_bytes - 8 (u4: 2 * (row_bytes - 8))\n"
            "for 0.", ops=("scores", "weights", "forward")),
    Keyword("v_scale_group", "v_scale_group", 0, "int", _record_group("v_scale_group"),
            "u8/u4 only: values per record of the V cache, likewise.", ops=("forward",)),
    Keyword("q_lens", "q_lens", None, "Optional[Ints]", _lengths("q_lens", "q_len"),
            "valid query rows per batch entry (int or sequence)."),
    Keyword("kv_lens", "kv_lens", None, "Optional[Ints]", _lengths("kv_lens", "kv_len"),
            "valid keys per batch entry (int or sequence)."),
    Keyword("mask", "mask", None, "Optional[Array]", _side("mask"),
            "bool, broadcastable to [B,Hq,Lq,Lk]; True = may attend.", slot="mask"),
    Keyword("bias", "bias", None, "Optional[Array]", _side("bias"),
            "float, broadcastable to [B,Hq,Lq,Lk]; added to the scores.", slot="bias"),
    # forward only: merge() combines the shards' forward outputs
    Keyword("q_pos", "q_pos", None, "Optional[Ints]", _positions("q_pos"),
            "global position of query row 0 (int or one per batch entry): masks\n"
            "and ALiBi then compare positions, so a call can cover a shard of a\n"
            "longer sequence (see merge(); give sinks to one shard only).",
            ops=("forward", "backward")),
    Keyword("k_pos", "k_pos", None, "Optional[Ints]", _positions("k_pos"),
            "global position of key row 0, likewise.", ops=("forward", "backward")),
    Keyword("k_positions", "k_positions", None, "Optional[IntTable]", _slot_positions,
            "position of every key slot, int [B, Lk] (or [Lk] for every entry;\n"
            "Lk the key extent, packed Tk, paged max_blocks * block_size), -1\n"
            "for an empty slot: causal, windows and ALiBi compare q_pos + i (or\n"
            "Lk_b - Lq_b + i) with it, key by key, so a cache need not be in\n"
            "position order (llama.cpp's cells). Not with k_pos (attn.h 1.11)."),
    Keyword("tree_parents", "tree_parents", None, "Optional[IntTable]", _tree,
            "a draft tree: each query's parent query (-1: the prefix), [Lq] or\n"
            "[B, Lq] (rows as q's); the last Lq keys are the queries' own, and\n"
            "a query sees the prefix, itself and its ancestors (attn.h 1.3)."),
    Keyword("shared_prefix", "shared_prefix", None, "Optional[Ints]", _offsets("shared_prefix"),
            "keys each sequence shares with the one before it (int per batch\n"
            "entry, the first 0): read from the earlier sequence's cache, and\n"
            "attended once per group by forward (attn.h 1.4).",
            ops=("scores", "weights", "forward")),
    Keyword("topk_indices", "topk_indices topk", None, "Optional[IntTable]", _topk,
            "top-k sparse attention: each query row's keys, [Lq, k] or [B, Lq, k]\n"
            "(rows as q's) key indices of its sequence, -1 for an unused slot;\n"
            "a set (order and repeats do not matter), combined with every other\n"
            "mask; forward reads only the selected keys (attn.h 1.7)."),
    Keyword("threads", "parallel_for parallel_ctx", None, "Optional[int]", _threads,
            "None/1: the calling thread; n > 1: a cached pool of n threads;\n"
            "0: one per CPU. Results are identical for every value.",
            ops=ATTENTION + ("merge",)),
    # the cache layouts (_kvlayout.py) of the attention operations; mask_apply
    # takes the offsets into its dense table; backward every layout but pages
    Keyword("q_offsets", "q_offsets", None, "Optional[Ints]", _offsets("q_offsets"),
            "first row of each sequence in [B,H,L,D] tensors.",
            ops=("scores", "weights", "forward", "backward", "mask_apply")),
    Keyword("kv_offsets", "kv_offsets", None, "Optional[Ints]", _offsets("kv_offsets"),
            "first key of each sequence (a left-padded cache: kv_offsets=pad,\n"
            "kv_lens=valid keys).",
            ops=("scores", "weights", "forward", "backward", "mask_apply")),
    Keyword("cu_seqlens_q", "q_offsets q_lens", None, "Optional[Ints]", None,
            "B + 1 offsets into packed q [Tq,Hq,D] (FlashAttention varlen);\n"
            "out is then [Tq,Hq,Dv].", ops=("scores", "weights", "forward", "backward")),
    Keyword("cu_seqlens_k", "kv_offsets kv_lens", None, "Optional[Ints]", None,
            "B + 1 offsets into packed k, v [Tk,Hkv,D].",
            ops=("scores", "weights", "forward", "backward")),
    Keyword("block_table", "block_table block_table_stride block_size num_blocks", None,
            "Optional[IntTable]", None,
            "int [B, max_blocks]: k, v are pools [num_blocks, block_size, Hkv, D]\n"
            "(vLLM / FlashAttention paged cache); kv_lens = lengths.",
            ops=("scores", "weights", "forward")),
    # last: its workspace probe reads every other field
    Keyword("kv_splits", "kv_splits workspace workspace_size", 0, "int", _kv_splits,
            "0: split the keys into chunks when the shape gives few tasks\n"
            "(decode, MQA), 1: never, n >= 2: about n chunks. The binding\n"
            "provides the workspace; results are identical for every\n"
            "`threads` value.", ops=("forward",)),
)
# every value field no row names (a new option of src/option_list.h) gets a
# default row, before kv_splits
KEYWORDS = _BY_HAND[:-1] + tuple(_default_keywords(_BY_HAND)) + _BY_HAND[-1:]

# The second source of forward_sources (attn_forward_sources, attn.h 1.13):
# attn_kv_source's fields, which are no attn_options fields (so not in
# KEYWORDS, nor in src/option_list.h). attn_kv_source carries, for its k and
# v, the attn_options fields of the same names (the lists: topk_indices and
# topk as indices and topk), so each keyword here is the forward keyword it
# mirrors with "2" after its k, v or kv: the same converter, run on a Call of
# the second source's shape (build_source), whose fields _ops copies into
# the struct. Their order is the struct's. `fields`: the attn_options
# fields set, which are attn_kv_source's of those names.
SOURCE_KEYWORDS = (
    Keyword("kv2_lens", "kv_lens", None, "Optional[Ints]", _lengths("kv2_lens", "kv_len",
                                                                    "kv_lens"),
            "valid rows of k2, v2 per batch entry (int or sequence; default\n"
            "Lk2): a list entry at or past it raises AttnError.",
            ops=("forward_sources",)),
    Keyword("k2_scales", "k_scales k_scale_group", None, "Optional[Array]",
            _row_scales("k_scales", "k2_scales"),
            "kv2_dtype fp8 only: k2's row scales, as k_scales (over [B, Hkv,\n"
            "Lk2], or [B, Hkv, Lk2, G]).", ops=("forward_sources",)),
    Keyword("v2_scales", "v_scales v_scale_group", None, "Optional[Array]",
            _row_scales("v_scales", "v2_scales"),
            "kv2_dtype fp8 only: v2's row scales, likewise.", ops=("forward_sources",)),
    Keyword("k2_scale_group", "k_scale_group", 0, "int",
            _record_group("k_scale_group", "k2_scale_group"),
            "kv2_dtype u8/u4 only: values per record of k2, as k_scale_group.",
            ops=("forward_sources",)),
    Keyword("v2_scale_group", "v_scale_group", 0, "int",
            _record_group("v_scale_group", "v2_scale_group"),
            "kv2_dtype u8/u4 only: values per record of v2, likewise.",
            ops=("forward_sources",)),
    Keyword("k2_tail", "k_tail k_tail_dim", None, "Optional[Array]", _tail("k2_tail"),
            "the last n values of every row of k2, [B, Hkv, Lk2, n], as k_tail.",
            ops=("forward_sources",)),
)


def side_inputs(kw, target):
    """{keyword: Operand or None}: the score-shaped tensors of `kw` broadcast
    to `target` = (B, H, Lq, Lk)."""
    sides = {}
    for k in KEYWORDS:
        if k.slot is not None and k.name in kw:
            x = kw[k.name]
            op = None
            if x is not None:
                op = as_operand(materialize_columns(x, k.name, k.slot, target[3]), k.name,
                                k.slot)
                if not all(op.shape) and all(target):  # else broadcast() judges it
                    raise ValueError("%s: shape %r has an empty dimension" % (k.name, op.shape))
                op = broadcast(op, target, k.name)
            sides[k.name] = op
    return sides


# Not converted for an empty problem (a zero batch, head count or length),
# which the library never sees: the integer tables over query rows or keys
# (an extent other than the batch's) it has none of, and the workspace probe
# (a library call).
_EMPTY_FIELDS = {row.name for row in ROWS
                 if row.kind in ("i32", "i64") and row.extent not in (None, "batch")
                 or row.kind == "scratch"}
EMPTY_SKIPS = tuple(k.name for k in KEYWORDS if _EMPTY_FIELDS.intersection(k.fields))


def build(kw, shape, sides=None, skip=(), workspace=True):
    """(attn_options, objects to keep alive during the call) from the keywords
    `kw` of one operation, in the table's order; `skip`: keywords read elsewhere;
    `workspace`: whether kv_splits provides one (see Call)."""
    if is_empty(shape):
        skip = tuple(skip) + EMPTY_SKIPS
    call = Call(shape, sides or {}, workspace)
    for k in KEYWORDS:
        if k.name in kw and k.convert is not None and k.name not in skip:
            k.convert(kw[k.name], call)
    return call.opt, call.keep


_source_lists = _lists("indices")


def build_source(kw, shape, indices):
    """The second source's fields of forward_sources: (an attn_options whose
    fields of attn_kv_source's names hold them, objects to keep alive) from
    the SOURCE_KEYWORDS of `kw` and its lists `indices` (as topk_indices),
    converted as the keywords they mirror on `shape`, the call's shape with
    the second source's kv_len."""
    call = Call(shape, {})
    for k in SOURCE_KEYWORDS:
        if k.name in kw:
            k.convert(kw[k.name], call)
    _source_lists(indices, call)
    return call.opt, call.keep


def _doc(own, rows, extra=()):
    """The function's docstring, then the table's lines for its keywords
    (and those of `extra`, SOURCE_KEYWORDS, under their own heading)."""
    lines = [inspect.cleandoc(own)]
    for heading, table in (("Options (one meaning in every operation that takes them):", rows),
                           ("The second source's options (attn_kv_source):", extra)):
        if not table:
            continue
        lines += ["", heading]
        for k in table:
            first, *rest = k.doc.split("\n")
            lines.append("%-8s %s" % (k.name, first) if len(k.name) < 9
                         else "%s  %s" % (k.name, first))
            lines += [" " * 9 + line for line in rest]
    return "\n".join(lines) + "\n"


def operation(op, extra=()):
    """Decorator: the function takes the keywords whose ops name `op`
    (and the rows of `extra`: forward_sources takes forward's and
    SOURCE_KEYWORDS).

    It is written with its own parameters and a keyword-only `_kw`, which
    receives those keywords as a dict (defaults filled in). The wrapper's
    signature lists them after the function's positional parameters, and
    its docstring documents them, so inspect.signature() and help() show
    every keyword; a keyword added to KEYWORDS reaches every operation of
    its row this way.
    """
    rows = [k for k in KEYWORDS if op in k.ops]
    extra = list(extra)

    def decorate(fn):
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.name != "_kw"]
        first_kw = next((i for i, p in enumerate(own) if p.kind == p.KEYWORD_ONLY), len(own))
        table = [inspect.Parameter(k.name, inspect.Parameter.KEYWORD_ONLY, default=k.default,
                                   annotation=k.hint) for k in rows + extra]

        defaults = {k.name: k.default for k in rows + extra}

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if "_kw" in kwargs:  # not a public keyword
                raise TypeError("%s() got an unexpected keyword argument '_kw'" % fn.__name__)
            # the table's defaults, then the caller's keywords (a call names
            # few of them: cheaper than one lookup per row)
            kw, own = defaults.copy(), {}
            for name, value in kwargs.items():
                if name in defaults:
                    kw[name] = value
                else:
                    own[name] = value
            return fn(*args, _kw=kw, **own)

        wrapper.__signature__ = sig.replace(parameters=own[:first_kw] + table + own[first_kw:])
        wrapper.__doc__ = _doc(fn.__doc__, rows, extra)
        return wrapper
    return decorate

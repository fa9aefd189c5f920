# SPDX-License-Identifier: MIT
"""prepare(): a forward call validated and planned once, run per step.

An engine calls attention once per layer with the same shapes, dtypes,
layout and options; only the arrays change. prepare() takes the keywords of
forward() and arrays of the layout the steps will use, goes through
forward()'s own argument handling once, and hands the result to the C plan
(attn_plan_forward, libattn 1.3): the C library validates and partitions
once. A call of the Prepared object then checks only that each new array
has the prepared dtype, shape and strides (one comparison each) and runs
attn_plan_run with their addresses, which re-checks nothing but the
pointers. The results are forward()'s for the same arguments, bit for bit.
"""

from __future__ import annotations

import ctypes

from ._capi import AttnError, RowStats, check, has, lib
from ._keywords import operation
from ._ops import _run_attention
from ._tensor import Tensor, as_operand, np
from ._types import Any, Array, ArrayT, Dict, Optional, Tuple, Union


def _layout(x):
    """What a new array must share with the prepared one: its type, dtype,
    shape and strides (the C views of q, k, v and out follow from them)."""
    t = type(x)
    if t is _ndarray or t is Tensor:
        return (t, x.dtype, x.shape, x.strides)
    return (t,)


_ndarray = np.ndarray if np is not None else Tensor
_empty = np.empty if np is not None else None


_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer


def _address(x):
    """The address of an array's first element. A writable C-contiguous
    array exports it through the buffer protocol (0.15 us here, against
    0.65 us for __array_interface__, which the other arrays take)."""
    if type(x) is Tensor:
        return as_operand(x, "array", "qkv").address
    try:
        return _addressof(_from_buffer(x))
    except (TypeError, ValueError, BufferError):
        return x.__array_interface__["data"][0]


class Prepared:
    """A forward() call planned once: call it with new q, k, v (and out).

    prepared(q, k, v, out=None) -> out, or (out, stats) when prepared with
    stats=True. Each array must have the dtype, shape and strides of the
    one given to prepare() (ValueError otherwise: prepare again for another
    layout); out=None returns a new array like forward()'s. The lengths,
    offsets, block table and draft tree were copied when preparing (a step
    with other lengths needs a new prepare()); mask, bias, sinks and slopes
    are read from the arrays given then, at every call. Calls may run in
    several threads at once unless the call splits (kv_splits, whose
    workspace the object owns). A plan keeps its thread pool: in an
    os.fork() child of a libattn older than 1.11, prepare again (threads=).
    """

    __slots__ = ("_plan", "_mem", "_keep", "_layouts", "_result", "_stats", "_fresh", "_run")

    # made by prepare(), not by callers
    def __init__(self, plan: Any, mem: Any, keep: Any, layouts: Any, result: Any, stats: Any,
                 fresh: bool) -> None:
        self._plan = plan
        self._mem = mem
        self._keep = keep
        self._layouts = layouts
        self._result = result
        self._stats = stats
        self._fresh = fresh
        self._run = lib().attn_plan_run

    def _like(self, template):
        """A new result of the template's layout (its strides too: the plan
        writes at them): every element is written by a dense call; with a
        cache layout, rows outside every sequence hold forward()'s fill, 0
        (no stats there)."""
        if isinstance(template, Tensor):
            new = Tensor.empty(template.shape, template.dtype)  # zero-filled
            if _layout(new) != _layout(template):
                raise ValueError("out: the prepared out is a strided Tensor; give out= of its "
                                 "layout at every call")
            return new
        fill = np.zeros if self._fresh else _empty
        if template.flags.c_contiguous:
            return fill(template.shape, template.dtype)
        # a strided out given to prepare(): a buffer of its span, viewed alike
        span = sum((n - 1) * st for n, st in zip(template.shape, template.strides))
        buf = fill(span // template.itemsize + 1, template.dtype)
        return np.lib.stride_tricks.as_strided(buf, template.shape, template.strides)

    def __call__(self, q: ArrayT, k: Array, v: Array, out: Optional[ArrayT] = None
                 ) -> Union[ArrayT, Tuple[ArrayT, Dict[str, ArrayT]]]:
        lq, lk, lv, lo = self._layouts
        if _layout(q) != lq or _layout(k) != lk or _layout(v) != lv:
            for name, x, want in (("q", q, lq), ("k", k, lk), ("v", v, lv)):
                if _layout(x) != want:
                    raise ValueError("%s: dtype, shape or strides differ from the prepared %s "
                                     "(prepare() again for another layout)" % (name, name))
        if out is None:
            out = self._like(self._result)
        elif _layout(out) != lo:
            raise ValueError("out: dtype, shape or strides differ from the prepared out")
        stats_c, stats = None, None
        if self._stats is not None:
            stats = {name: self._like(arr) for name, arr in self._stats.items()}
            stats_c = RowStats(_address(stats["lse"]), _address(stats["max_score"]),
                               _address(stats["entropy"]))
        check(self._run(self._plan, _address(q), _address(k), _address(v), _address(out),
                        ctypes.byref(stats_c) if stats_c is not None else None),
              "attn_plan_run")
        return (out, stats) if stats is not None else out


@operation("forward")
def prepare(q: Array, k: Array, v: Array, *, dtype: Optional[str] = None,
            out: Optional[Array] = None, stats: bool = False, kv_dtype: Optional[str] = None,
            _kw) -> Prepared:
    """A forward() call validated and planned once (libattn 1.3's attn_plan).

    Takes forward()'s arguments: q, k, v (and out) give the layout every
    call will have (their values are not read here). Returns a Prepared
    object; prepared(q, k, v, out=None) runs the call on new arrays of that
    layout and returns what forward() would. The arrays must be read in
    place: float32, float16 or bfloat16 arrays with a contiguous last axis
    (or uint8 caches with kv_dtype), NumPy arrays or libattn.Tensor. With
    cache layouts (cu_seqlens_q, q_offsets, ...) stats=True is not taken.
    """
    if not has("attn_plan_size"):
        raise NotImplementedError("prepare: the loaded libattn is older than 1.3 (no plans)")
    if v is None:
        raise TypeError("v: an array is required, got None")
    layout_kw = any(_kw.get(n) is not None for n in ("cu_seqlens_q", "cu_seqlens_k", "q_offsets",
                                                      "kv_offsets", "block_table"))
    if stats and layout_kw:
        raise ValueError("stats: not with cache layouts in a prepared call (forward() takes "
                         "them)")
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
        if x is None:
            continue
        if type(x) is not _ndarray and type(x) is not Tensor:
            raise TypeError("%s: a prepared call takes NumPy arrays or libattn.Tensor, got %s"
                            % (name, type(x).__name__))
    captured = {}

    def plan(function, args, keep):
        size = ctypes.c_size_t(0)
        check(lib().attn_plan_size(args[0], args[1], ctypes.byref(size)), "attn_plan_size")
        mem = ctypes.create_string_buffer(size.value)
        handle = ctypes.c_void_p()
        check(lib().attn_plan_forward(mem, size, *args, ctypes.byref(handle)),
              "attn_plan_forward")
        # the C views must be the arrays themselves, not copies forward() made
        for i, (name, x) in enumerate((("q", q), ("k", k), ("v", v))):
            if args[2 + i]._obj.data != _address(x):
                raise ValueError("%s: forward() would copy it (a dtype to convert or a "
                                 "non-contiguous last axis); a prepared call reads its arrays "
                                 "in place" % name)
        captured.update(plan=handle, mem=mem, keep=keep, out_address=args[5]._obj.data)

    result = _run_attention("attn_forward", q, k, v, _kw, out=out, stats=stats, dtype=dtype,
                            kv_dtype=kv_dtype, invoke=plan)
    template, stats_arrays = result if stats else (result, None)
    if captured["out_address"] != _address(template):
        raise ValueError("out: forward() would write a view of it; give an out of the "
                         "result's own layout")
    prepared = Prepared(captured["plan"], captured["mem"], captured["keep"],
                        tuple(_layout(x) for x in (q, k, v, template)), template, stats_arrays,
                        layout_kw)
    return prepared


# ------------------------------------------------------------ forward()'s cache

# forward() runs through a Prepared object when its arguments allow one: the
# keyword values are scalars or integer lists (the plan copies those; an
# array keyword such as mask or bias is read in place by a plan, so a new
# array of the same layout would be missed: those calls take the normal
# path), q, k, v (and out) are read in place, and the result is small (a
# decode step's: the plan keeps a template of it alive). Per thread, so a
# plan's workspace (kv_splits) is never shared; the least recently used of
# _CACHE_SIZE plans goes first.
_CACHE_SIZE = 64
_CACHE_MAX_RESULT = 1 << 20  # bytes of out a cached plan may keep a template of
_local = __import__("threading").local()
_UNCACHEABLE = object()
_SCALARS = (type(None), bool, int, float, str)
_SCALAR_SET = frozenset(_SCALARS)


def forget_plans():
    """Drops this thread's cached plans (a forked child whose parent's pools
    it may not use: see _capi._after_fork_in_child)."""
    _local.__dict__.pop("cache", None)


def _key_value(value):
    t = type(value)
    if t in _SCALARS:
        return value
    if (t is list or t is tuple) and all(type(x) is int for x in value):
        return (t, tuple(value))
    raise KeyError  # an array keyword: no cached plan


def cached_forward(q, k, v, out, stats, dtype, kv_dtype, kw):
    """forward()'s result through a cached Prepared, or None for the normal
    path (forward() then raises whatever error the arguments deserve)."""
    if (type(q) is not _ndarray and type(q) is not Tensor) or \
            (out is not None and type(out) is not _ndarray and type(out) is not Tensor):
        return None
    values = tuple(kw.values())
    if not _SCALAR_SET.issuperset(map(type, values)):  # lists, or an array keyword
        try:
            values = tuple(_key_value(x) for x in values)
        except KeyError:
            return None
    key = (_layout(q), _layout(k), _layout(v), None if out is None else _layout(out), stats,
           dtype, kv_dtype, values)
    try:
        cache = _local.cache
    except AttributeError:  # this thread's first call
        cache = _local.cache = __import__("collections").OrderedDict()
    entry = cache.get(key)
    if entry is None:
        try:
            entry = prepare(q, k, v, dtype=dtype, out=out, stats=stats, kv_dtype=kv_dtype, **kw)
            template = entry._result
            if getattr(template, "nbytes", _CACHE_MAX_RESULT + 1) > _CACHE_MAX_RESULT:
                entry = _UNCACHEABLE
        except (ValueError, TypeError, NotImplementedError, AttnError):
            # the normal path raises the error as forward()'s own
            entry = _UNCACHEABLE
        cache[key] = entry
        if len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    if entry is _UNCACHEABLE:
        return None
    return entry(q, k, v, out)

# SPDX-License-Identifier: MIT
"""cache_append: a step's new K/V rows into the caches the next forward reads.

The C call (attn_cache_append, libattn 1.3) writes new token t of sequence b
at key position kv_lens[b] - q_lens[b] + t of that sequence, in the cache's
layout and dtype: the positions forward(..., kv_lens=..., block_table=...)
reads as the sequence's last keys. Nothing is written when an argument is
refused.
"""

from __future__ import annotations

import ctypes
import numbers

from ._capi import DType, Options, Shape, check, has, lib
from ._capi import Tensor as _CTensor
from ._kvlayout import _int32_array, _int_list, _pool
from ._ops import (_ASYM, _ASYM_NAMES, _FP8_NAMES, _group_arg, _quant_dtype,
                   _quant_operand)
from ._tensor import as_operand, np
from ._types import Array, IntTable, Ints, Optional


def _cache_operand(x, name, dt, group, what):
    """(Operand, values per row) of a cache written in place."""
    if dt is None:
        op = as_operand(x, name, "qkv", need_writable=True, allow_copy=False)
        return op, op.shape[-1]
    op, cols = _quant_operand(x, name, dt, group, what)
    if not op.writable:
        raise ValueError("%s: the cache must be writable" % name)
    return op, cols


def cache_append(k_new: Array, k_cache: Array, v_new: Optional[Array] = None,
                 v_cache: Optional[Array] = None, *, kv_lens: Ints,
                 q_lens: Optional[Ints] = None, block_table: Optional[IntTable] = None,
                 kv_dtype: Optional[str] = None, k_scale: float = 0.0,
                 v_scale: float = 0.0, k_scales: Optional[Array] = None,
                 v_scales: Optional[Array] = None, k_scale_group: int = 0,
                 v_scale_group: int = 0) -> None:
    """Write new K (and V) rows into caches, in place; returns None.

    k_new, v_new      float32 or float16 arrays [B, Hkv, T, D] (T: the most new
                      tokens of a sequence; [Hkv, T, D] for B = 1).
    k_cache, v_cache  writable caches, the arrays forward() reads: dense
                      [B, Hkv, L, D], or with block_table a pool [num_blocks,
                      block_size, Hkv, D] (vLLM's); float32/float16, or with
                      kv_dtype ('q8_0', 'q4_0', 'fp8', 'e5m2', 'u8', 'u4') the raw
                      uint8 bytes of such a cache, rows of row_bytes ([...,
                      row_bytes]; D follows from row_bytes as for forward()).
    kv_lens           each sequence's keys after the append (an int: all).
    q_lens            each sequence's new tokens (default T): token t of
                      sequence b goes to key kv_lens[b] - q_lens[b] + t.
    block_table       [B, max_blocks] pool block of each page (the logical key
                      extent is max_blocks * block_size).
    k_scale, v_scale  fp8/e5m2 only: the cache stores x / scale (0 means 1).
    k_scales, v_scales  fp8/e5m2 only, instead: writable float32 arrays of
                      the cache's shape without its last axis ([B, Hkv, L],
                      or the pool's [num_blocks, block_size, Hkv]); each new
                      row's scale (its largest magnitude over 448, resp.
                      57344; 1 for a zero row) is written at its slot and
                      the row stored as x / scale: what forward(...,
                      k_scales=...) reads. A non-finite new value is refused.
    k_scale_group, v_scale_group  u8/u4 only: values per record of k_cache,
                      v_cache (0: one record per row); each new row is
                      encoded one record per group, as quantize(x, kv_dtype,
                      group=g) encodes it (a non-finite value is refused).
                      Pass the same groups to forward().
    The values are rounded once (float16 to nearest even) or quantized
    exactly as quantize() does; v_new and v_cache go together (neither: keys
    only).
    """
    if not has("attn_cache_append"):
        raise NotImplementedError("cache_append: the loaded libattn is older than 1.3")
    if (v_new is None) != (v_cache is None):
        raise TypeError("v_new, v_cache: give both or neither")
    dt = None if kv_dtype is None else _quant_dtype(kv_dtype, "kv_dtype")
    groups = {"k": _group_arg(k_scale_group, "k_scale_group"),
              "v": _group_arg(v_scale_group, "v_scale_group")}
    if dt in _ASYM and (k_scales is not None or v_scales is not None):
        raise ValueError("k_scales/v_scales: kv_dtype=%r records hold their own scale and zero "
                         "point (row scales are for %s); give k_scale_group/v_scale_group for "
                         "their group" % (kv_dtype, _FP8_NAMES))
    if dt in _ASYM and (k_scale or v_scale):
        raise ValueError("k_scale/v_scale: only for kv_dtype=%s, not %r" % (_FP8_NAMES, kv_dtype))
    if (groups["k"] or groups["v"]) and dt not in _ASYM:
        raise ValueError("k_scale_group/v_scale_group: the record group of kv_dtype=%s "
                         "caches" % _ASYM_NAMES)
    rank = None
    pairs = []
    for name, new, cache in (("k", k_new, k_cache), ("v", v_new, v_cache)):
        if new is None:
            continue
        n = as_operand(new, name + "_new", "qkv")
        if rank is None:
            rank = len(n.shape)
        if len(n.shape) != rank or rank not in (3, 4):
            raise ValueError("%s_new: expected [B, Hkv, T, D] or [Hkv, T, D], got shape %r"
                             % (name, n.shape))
        c, cols = _cache_operand(cache, name + "_cache", dt, groups[name],
                                 name + "_scale_group")
        pairs.append((name, n.padded(), c, cols))
    batch, kv_heads, q_len, head_dim = pairs[0][1].shape
    views, v_dim, kv_len, block_size, num_blocks = [], head_dim, None, 0, 0
    for name, n, c, cols in pairs:
        if block_table is not None:
            c4 = _pool(c, name + "_cache")
            block_size, num_blocks = c4.shape[2], c4.shape[0]
        else:
            if len(c.shape) != rank:
                raise ValueError("%s_cache: shape %r, but %s_new has %d dimensions"
                                 % (name, c.shape, name, rank))
            c4 = c.padded()
            if c4.shape[0] != batch:
                raise ValueError("%s_cache: batch %d, but %s_new has %d"
                                 % (name, c4.shape[0], name, batch))
            kv_len = c4.shape[2] if kv_len is None else kv_len
            if c4.shape[2] != kv_len:
                raise ValueError("v_cache: %d keys, but k_cache has %d" % (c4.shape[2], kv_len))
        if n.shape[:3] != (batch, kv_heads, q_len) or n.shape[3] != cols or \
                c4.shape[1] != kv_heads:
            raise ValueError("%s_new: shape %r does not fit %s_cache (%d heads of %d values)"
                             % (name, n.shape, name, c4.shape[1], cols))
        if name == "v":
            v_dim = cols
        views.append((name, n, c4))
    opt = Options()
    keep = []
    if block_table is not None:
        table = block_table.tolist() if np is not None and isinstance(block_table, np.ndarray) \
            else [_int_list(r, "block_table row") for r in block_table]
        if len(table) != batch or not table or not table[0] or \
                any(len(r) != len(table[0]) for r in table):
            raise ValueError("block_table: expected [%d, max_blocks]" % batch)
        flat = _int32_array([int(x) for r in table for x in r], "block_table")
        keep.append(flat)
        opt.block_table = ctypes.cast(flat, ctypes.POINTER(ctypes.c_int32))
        opt.block_table_stride = len(table[0])
        opt.block_size = block_size
        opt.num_blocks = num_blocks
        kv_len = len(table[0]) * block_size
    for field, value, count in (("kv_lens", kv_lens, batch), ("q_lens", q_lens, batch)):
        if value is None:
            continue
        values = _int_list([value] * count if isinstance(value, numbers.Integral) else value,
                           field, count)
        arr = _int32_array(values, field)
        keep.append(arr)
        setattr(opt, field, ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32)))
    opt.k_scale = float(k_scale)
    opt.v_scale = float(v_scale)
    opt.k_scale_group = groups["k"]
    opt.v_scale_group = groups["v"]
    scale_views = {}
    for name, arr in (("k", k_scales), ("v", v_scales)):
        if arr is None:
            continue
        if np is None or not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
            raise TypeError("%s_scales: expected a float32 NumPy array" % name)
        if not arr.flags.writeable:
            raise ValueError("%s_scales: must be writable (the scales are written)" % name)
        if block_table is not None:
            want = (num_blocks, block_size, kv_heads)
            axes = (0, 2, 1)  # pool block, head, slot
        else:
            want = (batch, kv_heads, kv_len) if rank == 4 else (kv_heads, kv_len)
            axes = (0, 1, 2) if rank == 4 else (None, 0, 1)
        if arr.shape != want:
            raise ValueError("%s_scales: shape %r, the cache's without its last axis is %r"
                             % (name, arr.shape, want))
        strides = [0 if a is None else arr.strides[a] // 4 for a in axes]
        t = _CTensor(arr.__array_interface__["data"][0], DType.F32, *strides)
        keep.append(t)
        scale_views[name] = t
    if "k" in scale_views:
        opt.k_scales = ctypes.pointer(scale_views["k"])
    if "v" in scale_views:
        opt.v_scales = ctypes.pointer(scale_views["v"])
    shape = Shape(batch, kv_heads, kv_heads, q_len, kv_len, head_dim, v_dim)
    ct = {name: (n.c_tensor(), c4.c_tensor()) for name, n, c4 in views}
    k = ct["k"]
    v = ct.get("v")
    check(lib().attn_cache_append(ctypes.byref(shape), opt, ctypes.byref(k[0]),
                                  ctypes.byref(v[0]) if v else None, ctypes.byref(k[1]),
                                  ctypes.byref(v[1]) if v else None), "attn_cache_append")
    del keep

# SPDX-License-Identifier: MIT
"""Turning NumPy arrays and flat buffers into attn_tensor descriptions.

Everything here runs before any C call, so shape, dtype and layout mistakes
become ValueError/TypeError naming the argument instead of a status code.
"""

from __future__ import annotations

import array
import ctypes
import struct
import sys

from ._capi import DType, Tensor as CTensor
from ._dtypes import ROWS
from ._types import Any, Optional, Sequence, Tuple, Union

try:
    import numpy as np
except ImportError:  # NumPy is optional: libattn.Tensor works without it
    np = None

# Bytes per stride unit: an element, or one block of the block formats.
_ITEMSIZE = {DType(row.value): row.bytes for row in ROWS}


def either(names):
    """The names as a message offers them: 'a', 'b' or 'c'."""
    quoted = ["'%s'" % n for n in names]
    return " or ".join(filter(None, (", ".join(quoted[:-1]), quoted[-1])))


# The names of the float and bool dtypes, and NumPy's spellings of the floats.
_DTYPE_NAMES = {row.name: DType(row.value) for row in ROWS if row.kind in ("float", "bool")}
_DTYPE_LISTED = either(_DTYPE_NAMES)
_DTYPE_NAMES.update({"float32": DType.F32, "float16": DType.F16, "bfloat16": DType.BF16})
_NATIVE = "<" if sys.byteorder == "little" else ">"


def dtype_from_name(name, what="dtype"):
    if isinstance(name, DType):
        return name
    try:
        return _DTYPE_NAMES[str(name).lower()]
    except KeyError:
        raise ValueError("%s: unknown dtype %r (use %s)" % (what, name, _DTYPE_LISTED)) from None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool) or \
        (np is not None and isinstance(value, np.integer))


class Tensor:
    """A strided view of a flat buffer, for callers without NumPy.

    Tensor(buffer, shape, strides=None, dtype=None, offset=0)

    buffer   anything with the buffer protocol: array.array('f'), bytearray,
             memoryview, ctypes arrays, NumPy arrays. It must be C-contiguous;
             outputs need a writable one.
    shape    1 to 4 dimensions, outermost first: [B,H,L,D], [H,L,D], [L,D]
             (mask/bias: anything broadcastable to [B,H,Lq,Lk]).
    strides  in ELEMENTS, one per dimension, >= 0; the last must be 1.
             Default: C-contiguous. A stride of 0 broadcasts (inputs only).
    dtype    'f32', 'f16', 'bf16' or 'bool'; by default taken from the
             buffer's format ('f' f32, 'e' f16, '?'/'B'/'b' bool). Raw byte
             buffers accept any dtype; 'H' (uint16) needs 'bf16' or 'f16'.
    offset   in elements, where element [0,..,0] lives.

    Operations given a Tensor as their first array return Tensors backed by
    array.array('f') (see tolist(), numpy()).
    """

    __slots__ = ("buffer", "shape", "strides", "dtype", "offset", "_view", "_nelems")
    buffer: Any
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: DType
    offset: int

    def __init__(self, buffer: Any, shape: Union[int, Sequence[int]],
                 strides: Optional[Sequence[int]] = None, dtype: Union[str, DType, None] = None,
                 offset: int = 0) -> None:
        try:
            view = memoryview(buffer)
        except TypeError:
            raise TypeError("Tensor: buffer must support the buffer protocol "
                            "(array.array, bytearray, memoryview), got %s"
                            % type(buffer).__name__) from None
        if not view.c_contiguous:
            raise ValueError("Tensor: buffer must be C-contiguous; describe the layout "
                             "with strides= instead")
        fmt = view.format
        if fmt[:1] in ("@", "="):
            fmt = fmt[1:]
        elif fmt[:1] == _NATIVE:
            fmt = fmt[1:]
        raw = fmt in ("B", "b", "c")
        if dtype is None:
            inferred = {"f": DType.F32, "e": DType.F16, "?": DType.BOOL,
                        "B": DType.BOOL, "b": DType.BOOL}.get(fmt)
            if inferred is None:
                hint = " (bfloat16 data: pass dtype='bf16')" if fmt in ("H", "h") else ""
                raise TypeError("Tensor: cannot infer a dtype from buffer format %r%s"
                                % (view.format, hint))
            dt = inferred
        else:
            dt = dtype_from_name(dtype, "Tensor")
            compatible = {DType.F32: ("f",), DType.F16: ("e", "H", "h"),
                          DType.BF16: ("H", "h"), DType.BOOL: ("?", "B", "b")}[dt]
            if not raw and fmt not in compatible:
                raise TypeError("Tensor: buffer format %r does not hold %s elements"
                                % (view.format, dt.name.lower()))
        itemsize = _ITEMSIZE[dt]
        if view.nbytes % itemsize:
            raise ValueError("Tensor: buffer of %d bytes is not a whole number of %s elements"
                             % (view.nbytes, dt.name.lower()))
        shape = tuple(shape) if not _is_int(shape) else (shape,)
        if not 1 <= len(shape) <= 4 or not all(_is_int(n) and n >= 0 for n in shape):
            raise ValueError("Tensor: shape must be 1 to 4 non-negative ints, got %r" % (shape,))
        shape = tuple(int(n) for n in shape)
        if strides is None:
            strides, step = [], 1
            for n in reversed(shape):
                strides.append(step)
                step *= max(n, 1)
            strides = tuple(reversed(strides))
        else:
            strides = tuple(strides) if not _is_int(strides) else (strides,)
            if len(strides) != len(shape) or not all(_is_int(s) and s >= 0 for s in strides):
                raise ValueError("Tensor: strides must be %d non-negative ints (elements), got %r"
                                 % (len(shape), strides))
            strides = tuple(int(s) for s in strides)
            if shape[-1] > 1 and strides[-1] != 1:
                raise ValueError("Tensor: the innermost dimension must be contiguous "
                                 "(last stride 1), got strides %r" % (strides,))
        if not _is_int(offset) or offset < 0:
            raise ValueError("Tensor: offset must be a non-negative int, got %r" % (offset,))
        nelems = view.nbytes // itemsize
        if all(shape):
            last = offset + sum((n - 1) * s for n, s in zip(shape, strides))
            if last >= nelems:
                raise ValueError("Tensor: shape %r with strides %r and offset %d reaches element "
                                 "%d, but the buffer holds %d" % (shape, strides, offset, last,
                                                                  nelems))
        self.buffer = buffer
        self.shape = shape
        self.strides = strides
        self.dtype = dt
        self.offset = int(offset)
        self._view = view
        self._nelems = nelems

    @classmethod
    def empty(cls, shape: Union[int, Sequence[int]], dtype: Union[str, DType] = "f32") -> Tensor:
        """A zero-filled C-contiguous tensor backed by array.array."""
        dt = dtype_from_name(dtype)
        count = 1
        for n in (shape if not _is_int(shape) else (shape,)):
            count *= n
        code = {DType.F32: "f", DType.F16: "H", DType.BF16: "H", DType.BOOL: "B"}[dt]
        return cls(array.array(code, bytes(_ITEMSIZE[dt] * count)), shape, dtype=dt)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _element(self, index):
        raw = self._view.cast("B")
        itemsize = _ITEMSIZE[self.dtype]
        at = (self.offset + sum(i * s for i, s in zip(index, self.strides))) * itemsize
        if self.dtype == DType.F32:
            return struct.unpack_from("=f", raw, at)[0]
        if self.dtype == DType.F16:
            return struct.unpack_from("=e", raw, at)[0]
        if self.dtype == DType.BF16:
            bits = struct.unpack_from("=H", raw, at)[0]
            return struct.unpack("=f", struct.pack("=I", bits << 16))[0]
        return raw[at] != 0

    def tolist(self) -> Any:
        """Nested Python lists of the elements (floats, or bools for masks)."""

        def build(prefix, dim):
            if dim == len(self.shape):
                return self._element(prefix)
            return [build(prefix + (i,), dim + 1) for i in range(self.shape[dim])]

        return build((), 0)

    def numpy(self) -> numpy.ndarray[Any, Any]:
        """The same elements as a NumPy array (a view when possible)."""
        if np is None:
            raise ImportError("Tensor.numpy() needs NumPy")
        dt = {DType.F32: np.float32, DType.F16: np.float16, DType.BF16: np.uint16,
              DType.BOOL: np.bool_}[self.dtype]
        flat = np.frombuffer(self._view.cast("B"), dtype=dt)
        itemsize = _ITEMSIZE[self.dtype]
        return np.lib.stride_tricks.as_strided(
            flat[self.offset:], shape=self.shape,
            strides=tuple(s * itemsize for s in self.strides),
            writeable=not self._view.readonly)

    def __repr__(self):
        return "libattn.Tensor(shape=%r, strides=%r, dtype=%r, offset=%d, buffer=%s)" % (
            self.shape, self.strides, self.dtype.name.lower(), self.offset,
            type(self.buffer).__name__)


class Operand:
    """One array as the C library sees it: address, dtype, shape, element strides."""

    __slots__ = ("address", "dtype", "shape", "strides", "keep", "source", "writable")

    def __init__(self, address, dtype, shape, strides, keep, source, writable):
        self.address = address
        self.dtype = dtype
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.keep = keep          # objects that must stay alive during the call
        self.source = source      # the caller's object (for overlap checks)
        self.writable = writable

    @property
    def itemsize(self):
        return _ITEMSIZE[self.dtype]

    def span(self):
        """[first byte, last byte + 1) touched by this view."""
        if not all(self.shape):
            return self.address, self.address
        last = sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        return self.address, self.address + (last + 1) * self.itemsize

    def padded(self, rank=4):
        """The same view with size-1 dimensions prepended up to `rank`."""
        extra = rank - len(self.shape)
        return Operand(self.address, self.dtype, (1,) * extra + self.shape,
                       (0,) * extra + self.strides, self.keep, self.source, self.writable)

    def c_tensor(self):
        """attn_tensor for a 4-D operand (the column stride is implied 1)."""
        assert len(self.shape) == 4
        return CTensor(self.address, int(self.dtype), *self.strides[:3])

    def at(self, index):
        """Address of element `index` (a prefix of indices is fine)."""
        return self.address + sum(i * s for i, s in zip(index, self.strides)) * self.itemsize


def is_tensor(x):
    return isinstance(x, Tensor)


def _tensor_operand(t, name, need_writable):
    view = t._view
    if need_writable and view.readonly:
        raise ValueError("%s: the buffer is read-only" % name)
    if view.readonly:
        # ctypes can only take the address of a writable buffer: copy once.
        holder = (ctypes.c_char * view.nbytes).from_buffer_copy(view)
    else:
        holder = (ctypes.c_char * view.nbytes).from_buffer(view)
    base = ctypes.addressof(holder)
    address = base + t.offset * _ITEMSIZE[t.dtype]
    return Operand(address, t.dtype, t.shape, t.strides, [holder, t], t, not view.readonly)


# NumPy dtypes kinds per slot: which inputs may be converted, which are kept.
def _numpy_dtype(x, name, slot, half_bits):
    """(array with a dtype the C side takes, DType) for `slot`, converting once if needed."""
    kind = x.dtype.kind
    if slot == "mask":
        if x.dtype == np.bool_ or x.dtype in (np.uint8, np.int8):
            return x, DType.BOOL
        if kind in "iu":
            return x != 0, DType.BOOL
        raise TypeError("%s: a mask must be bool (nonzero = may attend), got %s; an additive "
                        "float mask goes in bias=" % (name, x.dtype))
    if slot in ("f32", "bias"):
        if x.dtype == np.float32:
            return x, DType.F32
        if kind == "f":
            return x.astype(np.float32), DType.F32
        raise TypeError("%s: expected a float array, got %s" % (name, x.dtype))
    # q, k, v: f32 / f16 / bf16 are passed through, other floats become f32.
    if x.dtype == np.float32:
        return x, DType.F32
    if x.dtype == np.float16:
        return x, DType.F16
    if x.dtype.name == "bfloat16":  # ml_dtypes / jax bfloat16
        return x.view(np.uint16), DType.BF16
    if x.dtype == np.uint16:
        if half_bits is None:
            raise TypeError("%s: uint16 array: pass dtype='bf16' (or 'f16') to say how its "
                            "bits are meant" % name)
        return x, half_bits
    if kind == "f":
        return x.astype(np.float32), DType.F32
    raise TypeError("%s: dtype %s is not supported; use float32, float16, or bfloat16 "
                    "bits as uint16 with dtype='bf16'" % (name, x.dtype))


def _numpy_operand(x, name, slot, half_bits, need_writable, allow_copy):
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    converted, dt = _numpy_dtype(x, name, slot, half_bits)
    # a bfloat16 array's uint16 view is the same memory: written in place
    if converted is not x and not allow_copy and not np.may_share_memory(converted, x):
        raise TypeError("%s: must already be %s to be written in place, got %s"
                        % (name, dt.name.lower(), x.dtype))
    arr = converted
    if need_writable and not arr.flags.writeable:
        raise ValueError("%s: the array is read-only" % name)
    itemsize = arr.dtype.itemsize

    def element_strides(a):
        if a.size == 0:  # NumPy gives empty arrays zero strides: any layout will do
            return contiguous_strides(a.shape)
        out = []
        for n, s in zip(a.shape, a.strides):
            if n == 1:
                out.append(0)  # a size-1 dimension is never stepped over
            elif s < 0 or s % itemsize:
                return None
            else:
                out.append(s // itemsize)
        if a.ndim and a.shape[-1] > 1 and out[-1] != 1:
            return None
        return out

    strides = element_strides(arr)
    if strides is None:
        if not allow_copy:
            raise ValueError("%s: the innermost dimension must be contiguous and strides "
                             "non-negative to be written in place (strides %r bytes)"
                             % (name, x.strides))
        arr = np.ascontiguousarray(arr)
        strides = element_strides(arr)
    address = arr.__array_interface__["data"][0]
    return Operand(address, dt, arr.shape, strides, [arr], x, arr.flags.writeable)


def contiguous_strides(shape):
    """C-contiguous element strides of `shape` (0 for size-1 dimensions)."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step if n != 1 else 0)
        step *= max(n, 1)
    return out[::-1]


def is_empty(shape):
    """True when an attn_shape has a zero batch, head count or length: the
    library gets no call then (the binding writes what such a call means)."""
    return not (shape.batch and shape.q_heads and shape.kv_heads and shape.q_len
                and shape.kv_len)


def as_operand(x, name, slot, half_bits=None, need_writable=False, allow_copy=True):
    """Describe `x` (ndarray, array-like or Tensor) for the C side."""
    if x is None:
        raise TypeError("%s: an array is required, got None" % name)
    if is_tensor(x):
        want = {"qkv": (DType.F32, DType.F16, DType.BF16), "f32": (DType.F32,),
                "bias": (DType.F32,), "mask": (DType.BOOL,)}[slot]
        if x.dtype not in want:
            raise TypeError("%s: Tensor of %s where %s is needed"
                            % (name, x.dtype.name.lower(),
                               " or ".join(d.name.lower() for d in want)))
        return _tensor_operand(x, name, need_writable)
    if np is None:
        raise TypeError("%s: got %s; without NumPy, wrap buffers in libattn.Tensor"
                        % (name, type(x).__name__))
    if need_writable and not isinstance(x, np.ndarray):
        # A temporary array made from a list would take the result with it.
        raise TypeError("%s: is written to, so it must be a NumPy array or a libattn.Tensor, "
                        "got %s" % (name, type(x).__name__))
    return _numpy_operand(x, name, slot, half_bits, need_writable, allow_copy)


def new_f32(shape, like_tensor):
    """A fresh C-contiguous f32 result: (object for the caller, Operand)."""
    if like_tensor:
        t = Tensor.empty(shape, "f32")
        return t, _tensor_operand(t, "result", True)
    arr = np.empty(shape, dtype=np.float32)
    strides = []
    for n, s in zip(arr.shape, arr.strides):
        strides.append(s // 4)
    return arr, Operand(arr.__array_interface__["data"][0], DType.F32, arr.shape, strides,
                        [arr], arr, True)


def check_output(out, name, shape, rounded=False, half_bits=None):
    """Operand for a caller-provided output of exactly `shape`: f32, or with
    `rounded` (forward's and merge's out) also f16 or bf16 (uint16 arrays as
    half_bits says), which the library fills with its f32 rows rounded once."""
    op = as_operand(out, name, "qkv" if rounded else "f32", half_bits, need_writable=True,
                    allow_copy=False)
    if op.shape != tuple(shape):
        raise ValueError("%s: shape %r, expected %r" % (name, op.shape, tuple(shape)))
    for n, s in zip(op.shape, op.strides):
        if n > 1 and s == 0:
            raise ValueError("%s: an output cannot broadcast (stride 0)" % name)
    return op


def check_no_overlap(out, name, inputs):
    """ValueError when output `out` may share memory with any (Operand, name) input."""
    lo, hi = out.span()
    for op, other in inputs:
        if op is None:
            continue
        a, b = op.span()
        if a < hi and lo < b:
            if np is not None and isinstance(out.source, np.ndarray) \
                    and isinstance(op.source, np.ndarray):
                try:
                    if not np.shares_memory(out.source, op.source, max_work=100000):
                        continue
                except np.TooHardError:
                    pass
            raise ValueError("%s: overlaps %s; outputs must not overlap inputs" % (name, other))


def broadcast(op, target, name):
    """`op` viewed with the 4-D shape `target`, broadcasting NumPy-style (stride 0)."""
    if len(op.shape) > len(target):
        raise ValueError("%s: %d dimensions, at most %d allowed" % (name, len(op.shape),
                                                                     len(target)))
    padded = op.padded(len(target))
    strides = []
    for axis, (have, want, stride) in enumerate(zip(padded.shape, target, padded.strides)):
        if have == want:
            strides.append(stride if want > 1 else 0)
        elif have == 1:
            strides.append(0)
        else:
            raise ValueError("%s: shape %r does not broadcast to %r"
                             % (name, op.shape, tuple(target)))
    return Operand(padded.address, padded.dtype, target, strides, padded.keep, padded.source,
                   padded.writable)


def materialize_columns(x, name, slot, cols):
    """For mask/bias whose last dimension is 1 but must be `cols` wide.

    The C API broadcasts any dimension but the innermost, which is always
    contiguous; such an input is widened once along that dimension only.
    """
    if is_tensor(x):
        if x.shape[-1] != 1 or cols == 1:
            return x
        op = as_operand(x, name, slot)
        outer = x.shape[:-1]
        out = Tensor.empty(outer + (cols,), x.dtype)
        dst = _tensor_operand(out, name, True)
        size = op.itemsize
        for index in _indices(outer):
            src = op.at(index)
            base = dst.at(index)
            for c in range(cols):
                ctypes.memmove(base + c * size, src, size)
        return out
    arr = np.asarray(x)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.shape[-1] != 1 or cols == 1:
        return arr
    return np.ascontiguousarray(np.broadcast_to(arr, arr.shape[:-1] + (cols,)))


def _indices(shape):
    if not shape:
        yield ()
        return
    head, rest = shape[0], shape[1:]
    for i in range(head):
        for tail in _indices(rest):
            yield (i,) + tail


indices = _indices


def copy_f32(src, dst):
    """Copy f32 operand `src` into `dst` (same shape), one memmove per row."""
    cols = src.shape[-1]
    for index in _indices(src.shape[:-1]):
        ctypes.memmove(dst.at(index), src.at(index), cols * 4)

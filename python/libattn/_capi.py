# SPDX-License-Identifier: MIT
"""ctypes mirror of include/attn.h, the loaded library, errors and thread pools."""

from __future__ import annotations

import atexit
import ctypes
import enum
import os
import sys
import threading

from . import _dtypes, _loader, _options
from ._types import Union


class Status(enum.IntEnum):
    OK = 0
    ERR_NULL = 1
    ERR_SHAPE = 2
    ERR_STRIDE = 3
    ERR_ARG = 4
    ERR_UNSUPPORTED = 5
    ERR_NOMEM = 6
    ERR_VERSION = 7


# attn_dtype, one member per row of src/dtype_list.h (_dtypes.py, which gives
# each one's layout; include/attn.h says what its bytes hold).
DType = enum.IntEnum("DType", [(row.id, row.value) for row in _dtypes.ROWS], module=__name__)


CAUSAL = 1


class Shape(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in
                ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim", "v_dim")]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p),
                ("dtype", ctypes.c_int32),
                ("batch_stride", ctypes.c_int64),
                ("head_stride", ctypes.c_int64),
                ("row_stride", ctypes.c_int64)]


_CTYPES = {"uint32": ctypes.c_uint32, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
           "size_t": ctypes.c_size_t, "float": ctypes.c_float,
           "int32*": ctypes.POINTER(ctypes.c_int32), "int64*": ctypes.POINTER(ctypes.c_int64),
           "tensor*": ctypes.POINTER(Tensor), "void*": ctypes.c_void_p,
           # parallel_for: only ever the library's own attn_threadpool_parallel_for,
           # never a Python callback, so a plain address
           "fn*": ctypes.c_void_p}


class Options(ctypes.Structure):
    """attn_options: one field per row of src/option_list.h (_options.py)."""
    _fields_ = [(row.name, _CTYPES[row.ctype]) for row in _options.ROWS]


def _minor_sizes():
    """{minor: struct_size of a 1.minor attn_options}: where the first field of
    a later minor begins, or the whole struct for the newest."""
    sizes = {}
    for minor in sorted({row.since for row in _options.ROWS}):
        later = [getattr(Options, row.name).offset for row in _options.ROWS if row.since > minor]
        sizes[minor] = min(later) if later else ctypes.sizeof(Options)
    return sizes


_MINOR_SIZES = _minor_sizes()
_FIELD_ROWS = [row for row in _options.ROWS if row.kind != "header"]


def struct_size_for(opt):
    """The size of the oldest attn_options that has every field `opt` sets (a
    field is set when it differs from its C default). A call that uses no
    1.1 field thus runs on a 1.0 library too, which refuses larger sizes
    (ATTN_ERR_VERSION); the fields beyond the size are read as their
    defaults, which is what they hold."""
    newest = 0
    for row in _FIELD_ROWS:
        value = getattr(opt, row.name)
        if row.since > newest and (bool(value) if row.default is None
                                   else value != row.default):
            newest = row.since
    return _MINOR_SIZES[newest]


class OptionsArg:
    """The argtypes entry of every const attn_options *: callers pass the
    Options itself, and the one place its struct_size is set is here, as it
    goes to the library, so no call can leave it stale."""

    @staticmethod
    def from_param(opt):
        if not isinstance(opt, Options):
            raise TypeError("expected an Options, got %s" % type(opt).__name__)
        opt.struct_size = struct_size_for(opt)
        return ctypes.byref(opt)


MAX_POSITION = 1 << 62
MAX_KV_SPLITS = 1024


class Grads(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32),
                ("dq", ctypes.POINTER(Tensor)),
                ("dk", ctypes.POINTER(Tensor)),
                ("dv", ctypes.POINTER(Tensor)),
                ("dbias", ctypes.POINTER(Tensor)),
                ("dsinks", ctypes.c_void_p)]


class RowStats(ctypes.Structure):
    _fields_ = [("lse", ctypes.c_void_p),
                ("max_score", ctypes.c_void_p),
                ("entropy", ctypes.c_void_p)]


class Partial(ctypes.Structure):
    _fields_ = [("out", Tensor),
                ("lse", ctypes.c_void_p)]


class KvSource(ctypes.Structure):
    """attn_kv_source (attn.h 1.13): the second source of attn_forward_sources.
    Its fields from kv_lens on carry the attn_options fields of those names
    (indices and topk: topk_indices and topk) for the second source's k and
    v, with their C types (test_sources.py checks the layout against
    include/attn.h); struct_size is sizeof, set by the binding."""
    _fields_ = [("struct_size", ctypes.c_uint32),
                ("flags", ctypes.c_uint32),
                ("kv_len", ctypes.c_int64),
                ("k", ctypes.POINTER(Tensor)),
                ("v", ctypes.POINTER(Tensor)),
                ("kv_lens", ctypes.POINTER(ctypes.c_int32)),
                ("indices", ctypes.POINTER(ctypes.c_int32)),
                ("topk", ctypes.c_int64),
                ("k_scales", ctypes.POINTER(Tensor)),
                ("v_scales", ctypes.POINTER(Tensor)),
                ("k_scale_group", ctypes.c_int64),
                ("v_scale_group", ctypes.c_int64),
                ("k_tail", ctypes.POINTER(Tensor)),
                ("k_tail_dim", ctypes.c_int64)]


_P = ctypes.POINTER
_status = ctypes.c_int
_PROTOTYPES = {
    "attn_strerror": (ctypes.c_char_p, [_status]),
    "attn_version": (ctypes.c_uint32, []),
    "attn_version_string": (ctypes.c_char_p, []),
    "attn_isa_active": (ctypes.c_int, []),
    "attn_isa_available": (ctypes.c_int, [ctypes.c_int]),
    "attn_isa_select": (_status, [ctypes.c_int]),
    "attn_isa_name": (ctypes.c_char_p, [ctypes.c_int]),
    "attn_scores": (_status, [_P(Shape), OptionsArg, _P(Tensor), _P(Tensor), _P(Tensor)]),
    "attn_mask_apply": (_status, [_P(Shape), OptionsArg, _P(Tensor)]),
    "attn_softmax": (_status, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                               ctypes.c_int64, ctypes.c_void_p]),
    "attn_weights": (_status, [_P(Shape), OptionsArg, _P(Tensor), _P(Tensor), _P(Tensor),
                               _P(RowStats)]),
    "attn_forward": (_status, [_P(Shape), OptionsArg, _P(Tensor), _P(Tensor), _P(Tensor),
                               _P(Tensor), _P(RowStats)]),
    "attn_backward": (_status, [_P(Shape), OptionsArg, _P(Tensor), _P(Tensor), _P(Tensor),
                                _P(Tensor), _P(Tensor), ctypes.c_void_p, _P(Grads)]),
    "attn_softmax_backward": (_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    "attn_quantize": (_status, [ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                     ctypes.c_float]),
    "attn_threadpool_create": (_status, [ctypes.c_int32, _P(ctypes.c_void_p)]),
    "attn_threadpool_destroy": (None, [ctypes.c_void_p]),
    "attn_threadpool_size": (ctypes.c_int32, [ctypes.c_void_p]),
    "attn_threadpool_parallel_for": (None, [ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_size_t]),
}

# Functions added in 1.1 and later: declared when the library has them, so
# an older library still runs everything else (has() tells).
_PROTOTYPES_1_1 = {
    "attn_forward_workspace_size": (_status, [_P(Shape), OptionsArg, _P(ctypes.c_size_t)]),
    "attn_merge": (_status, [_P(Shape), OptionsArg, _P(Partial), ctypes.c_int64, _P(Tensor),
                             ctypes.c_void_p]),
    # 1.3
    "attn_cache_append": (_status, [_P(Shape), OptionsArg, _P(Tensor), _P(Tensor), _P(Tensor),
                                    _P(Tensor)]),
    "attn_plan_size": (_status, [_P(Shape), OptionsArg, _P(ctypes.c_size_t)]),
    "attn_plan_forward": (_status, [ctypes.c_void_p, ctypes.c_size_t, _P(Shape), OptionsArg,
                                    _P(Tensor), _P(Tensor), _P(Tensor), _P(Tensor), _P(RowStats),
                                    _P(ctypes.c_void_p)]),
    "attn_plan_run": (_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p, _P(RowStats)]),
    # 1.5
    "attn_last_error": (ctypes.c_char_p, []),
    # 1.11
    "attn_isa_built": (ctypes.c_int, [ctypes.c_int]),
    "attn_build_config": (ctypes.c_char_p, []),
    "attn_isa_support": (ctypes.c_uint, [ctypes.c_int]),
    "attn_plan_run_share": (_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p, _P(RowStats),
                                      ctypes.c_int32, ctypes.c_int32]),
    # 1.13
    "attn_forward_sources": (_status, [_P(Shape), OptionsArg, _P(Tensor), _P(Tensor),
                                       _P(Tensor), _P(KvSource), _P(Tensor), _P(RowStats)]),
    "attn_forward_sources_workspace_size": (_status, [_P(Shape), OptionsArg, _P(KvSource),
                                                      _P(ctypes.c_size_t)]),
}

_state = {"lib": None, "path": None, "has": set()}
_load_lock = threading.Lock()


def lib():
    """The loaded library with every prototype declared (loads on first use)."""
    handle = _state["lib"]
    if handle is not None:
        return handle
    with _load_lock:
        if _state["lib"] is None:
            handle, path = _loader.load()
            for name, (restype, argtypes) in _PROTOTYPES.items():
                try:
                    fn = getattr(handle, name)
                except AttributeError:
                    raise _loader.LibraryError(
                        "%s: libattn without %s(): this binding needs the full 1.x API"
                        % (path, name)) from None
                fn.restype = restype
                fn.argtypes = argtypes
            for name, (restype, argtypes) in _PROTOTYPES_1_1.items():
                fn = getattr(handle, name, None)
                if fn is not None:
                    fn.restype = restype
                    fn.argtypes = argtypes
                    _state["has"].add(name)
            _state["path"] = path
            _state["lib"] = handle
    return _state["lib"]


def isa_enum():
    """The Isa IntEnum: every attn_isa value the loaded library names, found
    by walking attn_isa_name() from 0 ("auto") until "unknown", so a new ISA
    of the library appears here without a change to this binding."""
    cls = _state.get("isa")
    if cls is not None:
        return cls
    handle = lib()
    with _load_lock:
        if _state.get("isa") is None:
            members = []
            while True:
                name = handle.attn_isa_name(len(members)).decode()
                if name == "unknown":
                    break
                members.append((name.upper(), len(members)))
            _state["isa"] = enum.IntEnum("Isa", members, module="libattn")
    return _state["isa"]


def has(name):
    """Whether the loaded library has the (1.1) function `name`."""
    lib()
    return name in _state["has"]


def library_path() -> str:
    """Path of the libattn shared library in use."""
    lib()
    return _state["path"]


class AttnError(RuntimeError):
    """A libattn call returned an error status.

    .status is a Status (or the raw int for a code this binding does not
    know), .message the library's attn_strerror() sentence, .detail what
    attn_last_error() said (libattn 1.5: which argument, with its values;
    "" with an older library) and .function the C function that failed.
    The text starts with that detail line ("attn_forward: opt->kv_lens[1] =
    9 is above kv_len 8"; "attn_forward_sources, second source: ..." for
    that source), then the status and its sentence in brackets;
    without a detail, with "function: sentence".
    """

    status: Union[Status, int]
    function: str
    message: str
    detail: str

    def __init__(self, status: int, function: str) -> None:
        try:
            self.status = Status(status)
        except ValueError:
            self.status = status
        self.function = function
        self.message = lib().attn_strerror(status).decode("utf-8", "replace")
        self.detail = ""
        if has("attn_last_error"):  # read before any other call can fail
            self.detail = (lib().attn_last_error() or b"").decode("utf-8", "replace")
        name = "ATTN_" + self.status.name if isinstance(self.status, Status) else str(status)
        generic = "%s: %s" % (function, self.message)
        # this call's line: "function: ...", or "function, part: ..." (a part
        # of its arguments, attn_forward_sources' second source)
        if self.detail.startswith((function + ": ", function + ", ")) and self.detail != generic:
            text = "%s (%s: %s)" % (self.detail, name, self.message)
        else:  # nothing more specific (or a line that is not this call's)
            text = "%s (%s)" % (generic, name)
            if self.detail and self.detail != generic:
                text += "; last error: " + self.detail
        super().__init__(text)


def check(status, function):
    if status != Status.OK:
        raise AttnError(status, function)


# ------------------------------------------------------------------ pools

_pools = {}
_pools_lock = threading.Lock()

# The library version from which a forked child may go on using its
# parent's pools (attn.h: pools survive fork() since 1.11).
_FORK_SAFE_POOLS = (1 << 16) | (11 << 8)


def _after_fork_in_child():
    """os.fork() copied only the forking thread: a lock another thread held
    stays held in the child, so the child gets fresh ones. The parent's pools
    are kept where the library restarts their workers in a child; with an
    older library they are dropped (never destroyed: their workers are not
    in this process), with the plans that point at them, and the child
    makes its own."""
    global _pools_lock, _load_lock
    _pools_lock = threading.Lock()
    _load_lock = threading.Lock()
    handle = _state["lib"]
    if _pools and (handle is None or handle.attn_version() < _FORK_SAFE_POOLS):
        _pools.clear()
        prepared = sys.modules.get(__package__ + "._prepared")
        if prepared is not None:
            prepared.forget_plans()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def pool_for(threads):
    """(parallel_for address, pool) for `threads`, or (None, None) for the calling thread.

    Pools are created once per thread count and live until the interpreter
    exits; the library serialises concurrent calls on one pool.
    """
    if threads is None:
        return None, None
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError("threads: expected an int or None, got %r" % (threads,))
    if threads < 0:
        raise ValueError("threads: must be >= 0 (0 = one per online CPU), got %d" % threads)
    if threads == 1:
        return None, None
    handle = lib()
    with _pools_lock:
        pool = _pools.get(threads)
        if pool is None:
            out = ctypes.c_void_p()
            check(handle.attn_threadpool_create(threads, ctypes.byref(out)),
                  "attn_threadpool_create")
            pool = out.value
            _pools[threads] = pool
    return ctypes.cast(handle.attn_threadpool_parallel_for, ctypes.c_void_p).value, pool


def pool_size(threads):
    """Threads the cached pool for `threads` runs on (1 for the calling thread)."""
    _, pool = pool_for(threads)
    return 1 if pool is None else lib().attn_threadpool_size(pool)


@atexit.register
def _destroy_pools():
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        _state["lib"].attn_threadpool_destroy(pool)

# SPDX-License-Identifier: MIT
"""libattn: transformer attention on CPUs, through ctypes.

    import numpy as np, libattn
    q = np.random.randn(2, 8, 128, 64).astype(np.float32)   # [B,H,L,D]
    k = np.random.randn(2, 2, 128, 64).astype(np.float32)   # 2 KV heads (GQA)
    v = np.random.randn(2, 2, 128, 64).astype(np.float32)
    out, st = libattn.forward(q, k, v, causal=True, threads=4, stats=True)
    st["entropy"]          # [B,H,L] nats per query row

Operations: scores, mask_apply, softmax, weights, forward, forward_sources
(two K/V caches, one softmax), backward, softmax_backward, merge;
libattn.torch wraps forward and backward for PyTorch;
quantize() makes Q8_0 / Q4_0 / FP8 K/V caches and OpenVINO's asymmetric
u8 / u4 ones that forward(..., kv_dtype='q8_0') reads in place;
cache_append() writes a step's new K/V rows into such caches (dense or
paged) where forward() reads them.
They take NumPy arrays (float32, float16, bfloat16 bits as uint16 with
dtype='bf16') or, without NumPy, libattn.Tensor views of flat buffers.
Failures inside the library raise AttnError; arguments Python can check
raise ValueError/TypeError naming the argument before any C call.

The shared library is found through ATTN_LIBRARY, the install prefix, the
dynamic linker, then a build tree (see libattn._loader).
"""

from __future__ import annotations

from . import _capi
from ._types import Dict, List, Optional, Tuple, Union
from ._capi import AttnError, DType, Status, library_path
from ._loader import ABI_MAJOR, LibraryError
from ._ops import (alibi_slopes, backward, forward, forward_sources, mask_apply, merge, quantize,
                   quantize_rows, scores, softmax, softmax_backward, weights)
from ._tensor import Tensor
from ._cache import cache_append
from ._prepared import Prepared, prepare

__version__ = "1.13.1"

__all__ = [
    "ABI_MAJOR", "AttnError", "LibraryError", "Status", "DType", "Isa", "Tensor",
    "scores", "mask_apply", "softmax", "weights", "forward", "forward_sources", "backward",
    "softmax_backward",
    "alibi_slopes", "merge", "quantize", "quantize_rows", "cache_append", "prepare", "Prepared",
    "isa_active", "isa_available", "isa_built", "isa_support", "isa_select", "isa_names",
    "available_isas",
    "build_config",
    "version", "version_info", "library_path", "thread_pool_size",
]

def __getattr__(name):
    # Isa is built from the library on first use (loading it), not at import.
    if name == "Isa":
        return _capi.isa_enum()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _isa(name):
    isa = _capi.isa_enum()
    if isinstance(name, isa):
        return name
    if not isinstance(name, str):
        raise TypeError("isa: expected a name such as 'scalar', got %r" % (name,))
    try:
        return isa[name.upper()]
    except KeyError:
        raise ValueError("isa: unknown name %r (known: %s)"
                         % (name, ", ".join(sorted(m.name.lower() for m in isa)))) from None


def isa_names() -> List[str]:
    """Every ISA name the library knows, built and supported or not."""
    return [m.name.lower() for m in _capi.isa_enum() if m.value != 0]


def isa_active() -> str:
    """Name of the instruction set the operations use now ('avx2', 'scalar', ...)."""
    lib = _capi.lib()
    return lib.attn_isa_name(lib.attn_isa_active()).decode()


def isa_available(name: Union[str, int]) -> bool:
    """True when `name` is compiled into the library and this CPU runs it."""
    return bool(_capi.lib().attn_isa_available(int(_isa(name))))


def isa_built(name: Union[str, int]) -> bool:
    """True when `name`'s kernels are compiled into the library, whatever the CPU
    (libattn >= 1.11; an older library answers as isa_available)."""
    if not _capi.has("attn_isa_built"):
        return isa_available(name)
    return bool(_capi.lib().attn_isa_built(int(_isa(name))))


def isa_support(name: Union[str, int]) -> Dict[str, bool]:
    """What stands between `name` and this process: {'built': its kernels are
    compiled in, 'cpu': this CPU has its instructions, 'os': the OS lets the
    process use their state (AMX: Linux's grant of the tile data, which the
    library requests at its first call)}. libattn >= 1.11 with
    attn_isa_support; an older one answers from isa_built and
    isa_available."""
    if not _capi.has("attn_isa_support"):
        built, avail = isa_built(name), isa_available(name)
        return {"built": built, "cpu": avail, "os": avail}
    bits = _capi.lib().attn_isa_support(int(_isa(name)))
    return {"built": bool(bits & 1), "cpu": bool(bits & 2), "os": bool(bits & 4)}


def build_config() -> str:
    """One line on how the loaded library was built: version, ISA tables,
    compiler, buildtype (libattn >= 1.11; older: its version only)."""
    if not _capi.has("attn_build_config"):
        return "libattn " + version()
    return _capi.lib().attn_build_config().decode()


def available_isas() -> List[str]:
    """Names of the instruction sets this library and CPU can use."""
    return [name for name in isa_names() if isa_available(name)]


def isa_select(name: Union[str, int]) -> None:
    """Make `name` ('auto' = the best) the active ISA for the whole process.

    Raises AttnError (Status.ERR_UNSUPPORTED) when it is not available; the
    active ISA is then unchanged.
    """
    _capi.check(_capi.lib().attn_isa_select(int(_isa(name))), "attn_isa_select")


def version() -> str:
    """Version string of the loaded library, e.g. '1.0.0'."""
    return _capi.lib().attn_version_string().decode()


def version_info() -> Tuple[int, int, int]:
    """(major, minor, patch) of the loaded library."""
    v = _capi.lib().attn_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def thread_pool_size(threads: Optional[int]) -> int:
    """Threads that `threads=` runs on (creates and caches that pool)."""
    return _capi.pool_size(threads)

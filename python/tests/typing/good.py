# SPDX-License-Identifier: MIT
"""Calls a user writes, typed as the stub says: mypy --strict must accept them
(test_typing.py). Never run, only checked."""

from typing import Dict, Tuple

import numpy as np
import numpy.typing as npt

import libattn

F32 = npt.NDArray[np.float32]


def decode(q: F32, k: F32, v: F32) -> libattn.Array:
    out = libattn.forward(q, k, v, causal=True, window=(128, 0), threads=2, kv_lens=[5, 7],
                          sinks=np.zeros(8, np.float32), precision="bf16")
    return out


def with_stats(q: F32, k: F32, v: F32) -> Tuple[libattn.Array, Dict[str, libattn.Array]]:
    out, st = libattn.forward(q, k, v, stats=True, block_table=[[0, 1], [2, 3]])
    lse: libattn.Array = st["lse"]
    return out, {"lse": lse}


def planned(q: F32, k: F32, v: F32) -> None:
    call: libattn.Prepared = libattn.prepare(q, k, v, causal=True)
    call(q, k, v)
    dq, dk, dv = libattn.backward(q, k, v, q, q, q[..., 0], causal=True)[:3]
    merged, lse = libattn.merge([q, q], [q[..., 0], q[..., 0]], threads=None)
    t = libattn.Tensor(bytearray(16), (2, 2), dtype="f32")
    rows: int = t.ndim
    status: libattn.Status = libattn.Status.ERR_ARG
    cache = libattn.quantize(k, "q8_0")
    libattn.cache_append(k, cache, kv_lens=3, kv_dtype="q8_0")
    major, minor, patch = libattn.version_info()
    names: str = ",".join(libattn.available_isas())
    del dq, dk, dv, merged, lse, rows, status, major, minor, patch, names


def two_sources(q: F32, k: F32, v: F32, t: libattn.Tensor) -> None:
    # forward_sources: forward's keywords and the second source's
    idx = np.zeros((2, 4, 3), np.int32)
    a: npt.NDArray[np.float32] = libattn.forward_sources(
        q, k, v, k, v, idx, causal=True, kv_lens=[5, 7], kv2_lens=[3, 4], k2_scale_group=0,
        kv2_dtype=None, threads=2)
    b, st = libattn.forward_sources(q, k, v, k, v, [[0, -1]], stats=True, window=(8, 0))
    lse: npt.NDArray[np.float32] = st["lse"]
    c: libattn.Tensor = libattn.forward_sources(t, t, t, t, t, [[0]])
    del a, b, lse, c


def kinds(q: F32, t: libattn.Tensor, either: libattn.Array) -> None:
    # each result is the kind of array its first operand is
    a: npt.NDArray[np.float32] = libattn.forward(q, q, q)
    b: libattn.Tensor = libattn.forward(t, t, t, out=libattn.Tensor.empty((1, 4, 8)))
    w, st = libattn.weights(t, t, stats=True)
    lse: libattn.Tensor = st["lse"]
    s: libattn.Tensor = libattn.scores(t, t)
    dq: npt.NDArray[np.float32] = libattn.backward(q, q, q, q, q, q[..., 0])[0]
    dt: libattn.Tensor = libattn.backward(t, t, t, t, t, t)[0]
    m, m_lse = libattn.merge([t, t], [t, t])
    p: npt.NDArray[np.float32] = libattn.softmax(q)
    p2, p_st = libattn.softmax(t, stats=True)
    g: libattn.Tensor = libattn.softmax_backward(t, t)
    masked: npt.NDArray[np.float32] = libattn.mask_apply(q, causal=True)
    cache: npt.NDArray[np.uint8] = libattn.quantize(q, "q8_0")
    rows, scales = libattn.quantize_rows(q, "fp8")
    # an Array (either kind) gives either kind
    e: libattn.Array = libattn.forward(either, q, q)
    step = libattn.prepare(q, q, q)
    r = step(t, q, q)
    del a, b, w, lse, s, dq, dt, m, m_lse, p, p2, p_st, g, masked, cache, rows, scales, e, r

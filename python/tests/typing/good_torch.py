# SPDX-License-Identifier: MIT
"""Calls of libattn.torch a user writes, typed as its stub (torch.pyi) says:
mypy --strict must accept them (test_typing.py). Never run, only checked."""

import numpy as np
import torch

import libattn.torch as lt


def layer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    a = lt.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.0, enable_gqa=True,
                                        threads=2)
    b = lt.attention(q, k, v, bias=bias, sinks=torch.zeros(4), causal=True, window=(8, 0),
                     kv_lens=[3, 4], alibi=np.zeros(4, np.float32), softcap=30.0,
                     mask=torch.zeros(5, 5, dtype=torch.bool), cu_seqlens_q=None)
    c = lt.attention(q, k, v, sinks=0.5, q_pos=np.array([0, 1]), block_table=[[0, 1], [2, 3]])
    return a + b + c


def errors(q: torch.Tensor) -> str:
    try:
        lt.scaled_dot_product_attention(q, q, q)
    except lt.ArgumentError as exc:
        err: ValueError = exc
        also: RuntimeError = exc
        return str(err) + str(also)
    except lt.ArgumentTypeError as exc:
        wrong: TypeError = exc
        return str(wrong)
    return ""

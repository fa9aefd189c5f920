# SPDX-License-Identifier: MIT
"""Calls of libattn.torch its stub must refuse (test_typing.py, as bad.py).
Never run, only checked."""

import torch

import libattn.torch as lt

q = torch.zeros(1, 2, 3, 4)
lt.attention(q, q, q, causal="yes")  # error: "causal"
lt.attention(q, q, q, no_such_keyword=1)  # error: "no_such_keyword"
lt.attention(q, q, q, window=(1, 2, 3))  # error: "window"
lt.scaled_dot_product_attention(q, q, q, is_causal=1.5)  # error: "is_causal"
lt.scaled_dot_product_attention(q, q, q, dropout_p="0")  # error: "dropout_p"
n: int = lt.attention(q, q, q)  # error: Incompatible types

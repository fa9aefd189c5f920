# SPDX-License-Identifier: MIT
"""Calls the stub must refuse: each line whose comment names an error must get
a mypy error containing that text, and no other line any (test_typing.py).
Never run, only checked."""

import numpy as np

import libattn

q = np.zeros((1, 1, 4, 8), np.float32)
libattn.forward(q, q, q, causal="yes")  # error: No overload variant
libattn.forward(q, q, q, no_such_keyword=1)  # error: No overload variant
libattn.forward(q, q, q, window=(1, 2, 3))  # error: "window"
libattn.forward(q, q, q).shape[0] + ""  # error: Unsupported operand
out, st = libattn.forward(q, q, q)  # error: not iterable
libattn.merge(q, q, threads="2")  # error: "threads"
libattn.isa_select(3.5)  # error: "isa_select"

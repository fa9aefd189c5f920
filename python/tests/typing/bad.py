# SPDX-License-Identifier: MIT
"""Calls the stub must refuse: each line whose comment names an error must get
a mypy error containing that text, and no other line any (test_typing.py).
Never run, only checked."""

from typing import Any

import numpy as np

import libattn

q = np.zeros((1, 1, 4, 8), np.float32)
t = libattn.Tensor(bytearray(128), (1, 4, 8), dtype="f32")
libattn.forward(q, q, q, causal="yes")  # error: No overload variant
libattn.forward(q, q, q, no_such_keyword=1)  # error: No overload variant
libattn.forward(q, q, q, window=(1, 2, 3))  # error: "window"
libattn.forward(q, q, q).shape[0] + ""  # error: Unsupported operand
out, st = libattn.forward(t, t, t)  # error: not iterable
libattn.merge([q], [q[..., 0]], threads="2")  # error: No overload variant of "merge"
libattn.isa_select(3.5)  # error: "isa_select"
# the result is the kind of array q is, and out= must be of that kind
a: np.ndarray[Any, Any] = libattn.forward(t, t, t)  # error: Incompatible types
libattn.forward(t, t, t).reshape(3)  # error: "Tensor" has no attribute "reshape"
libattn.forward(q, q, q, out=t)  # error: No overload variant
libattn.scores(t, t)[0]  # error: not indexable
lse: libattn.Tensor = libattn.weights(q, q, stats=True)[1]["lse"]  # error: Incompatible types
# forward_sources: the second source's keywords are typed as forward's
libattn.forward_sources(q, q, q, q, q, [[0]], k2_scale_group="2")  # error: No overload variant
libattn.forward_sources(q, q, q, q, q, [[0]], nope=1)  # error: No overload variant
out2, st2 = libattn.forward_sources(t, t, t, t, t, [[0]])  # error: not iterable

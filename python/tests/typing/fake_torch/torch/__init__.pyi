# SPDX-License-Identifier: MIT
# The few names of torch that libattn/torch.pyi and typing/*_torch.py use:
# test_typing.py puts this first on MYPYPATH, since mypy takes over a minute
# to read the real torch (ATTN_MYPY_REAL_TORCH=1 checks against it instead).
from typing import Any

from . import autograd as autograd


class dtype: ...


float32: dtype
bool: dtype


class Tensor:
    requires_grad: Any
    def sum(self) -> Tensor: ...
    def backward(self) -> None: ...
    def __add__(self, other: Tensor) -> Tensor: ...


def zeros(*size: int, dtype: dtype = ..., requires_grad: Any = ...) -> Tensor: ...

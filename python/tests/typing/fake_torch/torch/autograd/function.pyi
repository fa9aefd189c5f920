# SPDX-License-Identifier: MIT
from typing import Any


class Function:
    @classmethod
    def apply(cls, *args: Any) -> Any: ...

# SPDX-License-Identifier: MIT
"""The type aliases of the public API's annotations.

The modules write their annotations as strings (PEP 563) in these names and
never evaluate them, so NumPy stays optional. python/gen_stub.py copies the
block below the marker into __init__.pyi, the stub that type checkers read
(the keywords of each operation exist only at run time, from
_keywords.KEYWORDS, so the source alone cannot type them).
"""

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

if TYPE_CHECKING:
    import numpy
    from ._tensor import Tensor

# The kind of array an operation returns: the kind of the operand that the
# annotation marks with it (q, x, scores, ...). gen_stub.py writes one
# overload per kind, so the stub has overloads where the source has ArrayT.
ArrayT = TypeVar("ArrayT", "numpy.ndarray[Any, Any]", "Tensor")

# -- aliases (copied into __init__.pyi) --
# An array operand or result: a NumPy array or a libattn.Tensor view.
Array = Union["numpy.ndarray[Any, Any]", "Tensor"]
# One int for every batch entry, or one per entry.
Ints = Union[int, Sequence[int], "numpy.ndarray[Any, Any]"]
# A table of ints: [B, n] (block_table, tree_parents) or one row for every entry.
IntTable = Union[Sequence[Sequence[int]], Sequence[int], "numpy.ndarray[Any, Any]"]
# Per-head values (sinks, ALiBi slopes): a number, [Hq] or [B, Hq].
Heads = Union[float, Array]
# A sliding window: W, or (W, R) for a two-sided one.
Window = Union[int, Tuple[int, int]]
# Row statistics by name: 'lse', 'max_score', 'entropy'.
Stats = Dict[str, Array]

__all__ = ["Any", "Array", "ArrayT", "Dict", "Heads", "IntTable", "Ints", "List", "Optional",
           "Sequence", "Stats", "Tuple", "Union", "Window"]

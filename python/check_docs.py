# SPDX-License-Identifier: MIT
"""Checks that the package's docstrings list the K/V cache formats completely.

    python3 python/check_docs.py     exit 1 with the stale docstrings (test 'python-docs')

The binding's code reads the dtypes from src/dtype_list.h (_dtypes.py), but
its docstrings describe the formats in prose, one by one (layout, rounding,
largest value), so they stay written. A docstring that names two or more
dtypes of one kind of _dtypes.ROWS ('qblock', 'fp8', 'asym') lists that
kind, and must then name every dtype of it; one that gives two or more of the FP8
formats' largest values must give them all. So a new dtype fails here until
the lists that name its siblings name it too; a lone name ("fp8 only") is
not a list. Every docstring of every module of libattn is read (libattn.torch
where torch imports); the library is not loaded.
"""

import importlib
import inspect
import os
import pkgutil
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import libattn  # noqa: E402  (from this source tree)
from libattn import _dtypes  # noqa: E402


def modules():
    for info in pkgutil.iter_modules(libattn.__path__):
        try:
            yield importlib.import_module("libattn." + info.name)
        except ImportError:  # libattn.torch without torch
            continue
    yield libattn


def docstrings(module):
    """(where, text) of the module and of what it defines."""
    yield module.__name__, inspect.getdoc(module) or ""
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj):
            yield "%s.%s" % (module.__name__, name), inspect.getdoc(obj) or ""
            for attr, value in vars(obj).items():
                fn = getattr(value, "fget", None) or getattr(value, "__func__", None) or value
                if inspect.isfunction(fn):
                    yield "%s.%s.%s" % (module.__name__, name, attr), inspect.getdoc(fn) or ""
        elif inspect.isfunction(obj):
            yield "%s.%s" % (module.__name__, name), inspect.getdoc(obj) or ""


def word(text):
    return re.compile(r"(?<![\w.])%s(?![\w])" % re.escape(text))


def lists():
    """(what, [(item, pattern)]): each list a docstring must give whole."""
    kinds = {}
    for row in _dtypes.ROWS:
        if row.kind in ("qblock", "fp8", "asym"):
            kinds.setdefault(row.kind, []).append(row)
    for kind, rows in kinds.items():
        yield "the %s dtypes" % kind, [(row.name, word(row.name)) for row in rows]
    maxima = ["%g" % row.max for row in kinds.get("fp8", [])]
    yield "the FP8 largest values", [(m, word(m)) for m in maxima]


def main():
    stale = []
    seen = set()
    wanted = list(lists())
    for module in modules():
        for where, text in docstrings(module):
            if where in seen:
                continue
            seen.add(where)
            for what, items in wanted:
                named = [item for item, pattern in items if pattern.search(text)]
                if 2 <= len(named) < len(items):
                    missing = [item for item, _ in items if item not in named]
                    stale.append("%s: names %s of %s, not %s"
                                 % (where, ", ".join(named), what, ", ".join(missing)))
    for line in stale:
        print("check_docs: " + line, file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

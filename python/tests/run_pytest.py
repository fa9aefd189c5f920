# SPDX-License-Identifier: MIT
"""Run the binding's pytest suite; exit 77 (meson's 'skipped') without NumPy or pytest."""

import sys

try:
    import numpy  # noqa: F401
    import pytest  # noqa: F401
except ImportError as err:
    print("skipping the Python tests: %s (install python3-numpy and python3-pytest)" % err)
    sys.exit(77)

sys.exit(pytest.main(["-p", "no:cacheprovider"] + sys.argv[1:]))

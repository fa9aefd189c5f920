# SPDX-License-Identifier: MIT
from . import function as function

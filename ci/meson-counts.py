#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Prints 'passed failed skipped' for a meson test run, from its JSON log.

An expected failure counts as passed; a missing log counts nothing.
"""
import json
import sys

passed = failed = skipped = 0
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    lines = []
for line in lines:
    result = json.loads(line)["result"]
    if result in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif result == "SKIP":
        skipped += 1
    else:
        failed += 1
print(passed, failed, skipped)

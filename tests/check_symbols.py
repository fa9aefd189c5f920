#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""debian/gen-symbols gives every function that takes attn_options the
version of attn_options' last growth, so apt never pairs a program with a
library that refuses its struct_size (ATTN_ERR_VERSION).

Independently of gen-symbols' own parsing: the functions are found here
from attn.h's prototypes, and the growth from the comments that open the
struct's groups of appended fields, so a mistake in either script fails the check.

    tests/check_symbols.py SOURCE_ROOT"""
import os
import re
import subprocess
import sys

root = sys.argv[1]
header = open(os.path.join(root, "include", "attn.h")).read()
symbols = subprocess.run([sys.executable, os.path.join(root, "debian", "gen-symbols"),
                          os.path.join(root, "src", "libattn.map")],
                         check=True, capture_output=True, text=True).stdout

# The struct's text, from "typedef struct attn_options {" to "} attn_options;".
body = header[header.index("typedef struct attn_options {"):header.index("} attn_options;")]
# The comment that opens each group of appended fields: "/* since 1.N" or "/* 1.N:".
growth = max(int(m) for m in re.findall(r"^\s*/\* (?:since )?1\.(\d+)\b", body, re.M))

# Prototypes: "ATTN_API <type> attn_name(" up to the closing ");".
takes = set()
for m in re.finditer(r"^ATTN_API .*?(attn_\w+)\((.*?)\);", header, re.S | re.M):
    if "attn_options" in m.group(2):
        takes.add(m.group(1))

versions = {}
for line in symbols.splitlines():
    m = re.match(r" (attn_\w+)@ATTN_1\.\d+ 1\.(\d+)\.0$", line)
    if m:
        versions[m.group(1)] = int(m.group(2))

bad = []
for name in sorted(takes):
    if name not in versions:
        bad.append("%s takes attn_options but is not in the symbols file" % name)
    elif versions[name] < growth:
        bad.append("%s: libattn1 (>= 1.%d.0), but attn_options grew in 1.%d"
                   % (name, versions[name], growth))
for name in ("attn_forward", "attn_backward", "attn_plan_forward", "attn_cache_append"):
    if name not in takes:
        bad.append("%s not recognised as taking attn_options" % name)
for msg in bad:
    print("check_symbols:", msg)
print("check_symbols: %d functions take attn_options, last growth 1.%d: %s"
      % (len(takes), growth, "FAIL" if bad else "ok"))
sys.exit(1 if bad else 0)

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The option list (src/option_list.h), attn.h and the Python mirror agree.

    check_options.py LAYOUT_EXE HEADER PYTHON_DIR

LAYOUT_EXE (tests/abi/option_layout.c) prints the list as the compiler lays
it out. This checks, and fails with each disagreement on its own line:
  - include/attn.h's `struct attn_options` declares exactly the list's
    fields, in its order (the compile-time checks of option_list.h cannot
    see a field missing from the list that would fit in padding), and
    ATTN_OPTIONS_INIT has one initialiser per field;
  - python/libattn/_capi.py's Options has the same fields in the same
    order, each at the C offset with the C size and a ctypes type of the
    line's kind (int32/int64 array, tensor pointer), and the same sizeof.
Standard library only (the binding's rule).
"""
import ctypes
import re
import subprocess
import sys


def header_fields(text):
    m = re.search(r"typedef struct attn_options \{(.*?)\} attn_options;", text, re.S)
    if not m:
        raise SystemExit("check_options: struct attn_options not found in the header")
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    names = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        # function pointer typedefs are named types here; split declarators
        head, *rest = decl.split(",")
        names.append(re.findall(r"[A-Za-z_]\w*", head)[-1])
        names += [re.findall(r"[A-Za-z_]\w*", r)[-1] for r in rest]
    return names


def init_count(text):
    m = re.search(r"#define ATTN_OPTIONS_INIT\s*\\?\s*\{(.*?)\}", text, re.S)
    if not m:
        raise SystemExit("check_options: ATTN_OPTIONS_INIT not found")
    body = m.group(1).replace("\\\n", " ")
    depth, count = 0, 1
    for ch in body:
        depth += ch == "("
        depth -= ch == ")"
        count += ch == "," and depth == 0
    return count


def main(argv):
    if len(argv) != 4:
        raise SystemExit(__doc__)
    exe, header, pydir = argv[1:]
    rows, c_size = [], None
    for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split("\n"):
        if not line:
            continue
        parts = line.split()
        if parts[0] == "sizeof":
            c_size = int(parts[1])
        else:
            rows.append((parts[0], parts[1], int(parts[2]), int(parts[3])))
    errors = []
    names = [r[0] for r in rows]

    with open(header, encoding="utf-8") as f:
        text = f.read()
    hdr = header_fields(text)
    if hdr != names:
        errors.append("attn.h's attn_options fields %s != src/option_list.h's lines %s"
                      % (hdr, names))
    if init_count(text) != len(names):
        errors.append("ATTN_OPTIONS_INIT has %d initialisers, attn_options %d fields"
                      % (init_count(text), len(names)))

    sys.path.insert(0, pydir)
    from libattn import _capi  # noqa: E402 (ctypes declarations only: loads no library)
    opts = _capi.Options
    py = [f[0] for f in opts._fields_]
    if py != names:
        errors.append("python Options fields %s != src/option_list.h's lines %s" % (py, names))
    want_type = {"I32": ctypes.POINTER(ctypes.c_int32), "I64": ctypes.POINTER(ctypes.c_int64),
                 "TENSOR": ctypes.POINTER(_capi.Tensor)}
    types = dict(opts._fields_)
    for name, kind, off, size in rows:
        if name not in types:
            continue
        fld = getattr(opts, name)
        if fld.offset != off or fld.size != size:
            errors.append("python Options.%s at %d size %d, C at %d size %d"
                          % (name, fld.offset, fld.size, off, size))
        if kind in want_type and types[name] is not want_type[kind]:
            errors.append("python Options.%s is %s, its kind %s wants %s"
                          % (name, types[name].__name__, kind, want_type[kind].__name__))
    if ctypes.sizeof(opts) != c_size:
        errors.append("sizeof: python %d, C %d" % (ctypes.sizeof(opts), c_size))
    for e in errors:
        print("check_options:", e)
    print("check_options: %d fields, %s" % (len(names), "FAIL" if errors else "ok"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

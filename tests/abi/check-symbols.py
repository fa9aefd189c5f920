#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Symbol discipline of libattn's shared library (a leak test).

Three sets must be identical:
  1. the functions include/attn.h declares with ATTN_API,
  2. the names in the global: lists of src/libattn.map,
  3. the functions the built library exports (`nm -D --defined-only`).
Every exported function must carry a version node of the map, nothing else
may be exported (no Sleef_*, cpu_features/GetX86*, internal attn_*_with or
data symbols), and the SONAME must be the expected one.

Standard library only. Exit status: 0 pass, 1 fail, 2 usage or tool error.
"""

import argparse
import re
import subprocess
import sys


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_api_functions(path):
    with open(path, encoding="utf-8") as f:
        text = strip_c_comments(f.read())
    # Preprocessor lines (the ATTN_API definitions themselves) are not declarations.
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    names = re.findall(r"\bATTN_API\b[^;{}()]*?\b([A-Za-z_]\w*)\s*\(", text)
    return set(names), len(names)


def map_globals(path):
    """Names of every global: list, per version node."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    text = re.sub(r"#[^\n]*", " ", text)
    nodes = {}
    for node, body in re.findall(r"([A-Za-z_][\w.]*)\s*\{(.*?)\}\s*[\w.]*\s*;", text, flags=re.S):
        names = []
        section = None
        for token in re.findall(r"[\w.*]+:|[^\s;]+", body):
            if token.endswith(":"):
                section = token[:-1]
            elif section == "global":
                names.append(token)
        nodes[node] = names
    return nodes


def run(cmd):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", "") or str(e)
        print(f"check-symbols: cannot run {' '.join(cmd)}: {err.strip()}", file=sys.stderr)
        sys.exit(2)


def library_symbols(nm, lib):
    """(functions: {name: version}, others: [(type, name)]) of the defined dynamic symbols."""
    functions, others = {}, []
    for line in run([nm, "-D", "--defined-only", lib]).splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        sym_type, sym = parts[-2], parts[-1]
        name, _, version = sym.partition("@")
        version = version.lstrip("@")
        if sym_type in ("T", "t", "i", "W"):
            functions[name] = version
        else:
            others.append((sym_type, name))
    return functions, others


def soname_of(readelf, lib):
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", run([readelf, "-d", lib]))
    return m.group(1) if m else None


def describe(names):
    return ", ".join(sorted(names)) if names else "(none)"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--header", required=True, help="include/attn.h")
    ap.add_argument("--map", required=True, help="src/libattn.map")
    ap.add_argument("--lib", required=True, help="the built libattn.so")
    ap.add_argument("--soname", required=True, help="expected SONAME, e.g. libattn.so.1")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--readelf", default="readelf")
    args = ap.parse_args()

    failures = []

    header, declarations = header_api_functions(args.header)
    if declarations != len(header):
        failures.append(f"{args.header} declares some ATTN_API function twice")
    if not header:
        failures.append(f"no ATTN_API declarations found in {args.header}")

    nodes = map_globals(args.map)
    mapped = set()
    for node, names in nodes.items():
        wildcards = [n for n in names if any(c in n for c in "*?[")]
        if wildcards:
            failures.append(f"{args.map}: node {node} exports by wildcard: {describe(wildcards)}")
        dup = mapped.intersection(names)
        if dup:
            failures.append(f"{args.map}: listed in more than one node: {describe(dup)}")
        mapped.update(names)
    if not nodes:
        failures.append(f"no version node found in {args.map}")

    functions, others = library_symbols(args.nm, args.lib)
    exported = set(functions)

    def compare(a_name, a, b_name, b):
        if a - b:
            failures.append(f"in {a_name} but not in {b_name}: {describe(a - b)}")
        if b - a:
            failures.append(f"in {b_name} but not in {a_name}: {describe(b - a)}")

    compare("attn.h (ATTN_API)", header, "libattn.map", mapped)
    compare("libattn.map", mapped, "the library's exports", exported)
    compare("attn.h (ATTN_API)", header, "the library's exports", exported)

    # Name the usual leaks explicitly, so a failure says what went wrong.
    leak_patterns = {
        "SLEEF": r"^Sleef_",
        "cpu_features": r"^(GetX86|GetAarch64|GetArm|X86|Aarch64|CpuFeatures|cpu_features)",
        "internal attn_*_with": r"^attn_\w+_with$",
        "internal kernel (attn_*_<isa>)": r"^attn_\w+_(scalar|avx2|avx512|amx|neon|sve)$",
        "not attn_-prefixed": r"^(?!attn_)",
    }
    for what, pattern in leak_patterns.items():
        leaked = {n for n in exported if re.search(pattern, n)}
        if leaked:
            failures.append(f"exported {what} symbols: {describe(leaked)}")

    unversioned = {n for n, v in functions.items() if v not in nodes}
    if unversioned:
        failures.append("exported without a libattn.map version node: "
                        + describe(f"{n}@{functions[n] or '(none)'}" for n in unversioned))
    # The only other defined dynamic symbols allowed are the version nodes themselves.
    stray = [f"{n} ({t})" for t, n in others if not (t == "A" and n in nodes)]
    if stray:
        failures.append(f"exported non-function symbols: {describe(stray)}")

    soname = soname_of(args.readelf, args.lib)
    if soname != args.soname:
        failures.append(f"SONAME is {soname!r}, expected {args.soname!r}")

    if failures:
        for f in failures:
            print(f"FAIL: {f}")
        return 1
    print(f"ok: {len(header)} functions, identical in attn.h, libattn.map "
          f"({', '.join(nodes)}) and {args.lib}; SONAME {soname}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

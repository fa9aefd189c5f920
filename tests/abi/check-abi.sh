#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ABI gate: dump the built libattn with abidw and compare it with the
# committed baseline (abi/libattn.so.<major>.abi) using abidiff.
#
#   check-abi.sh BASELINE LIBRARY HEADERS_DIR            compare
#   check-abi.sh --update BASELINE LIBRARY HEADERS_DIR   rewrite the baseline
#                                                        (deliberate ABI change only)
#
# Environment: ABIDW, ABIDIFF, READELF name the tools (default: from PATH).
#
# Exit status (meson's conventions): 0 identical, or only functions added
# (reported), 1 any other ABI change (see below), 77 skipped (no
# abidw/abidiff, or the library has no debug info: build with
# -Dbuildtype=debugoptimized or -Dc_args=-g), 99 error (missing baseline,
# abidw/abidiff failure).
set -u

usage() {
    echo "usage: $0 [--update] BASELINE LIBRARY HEADERS_DIR" >&2
    exit 99
}

update=0
if [ "${1-}" = "--update" ]; then
    update=1
    shift
fi
[ $# -eq 3 ] || usage
baseline=$1
library=$2
headers=$3

ABIDW=${ABIDW:-abidw}
ABIDIFF=${ABIDIFF:-abidiff}
READELF=${READELF:-readelf}

for tool in "$ABIDW" "$ABIDIFF"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "SKIP: $tool not found (Debian: apt-get install abigail-tools)"
        exit 77
    fi
done
if [ ! -f "$library" ]; then
    echo "ERROR: $library does not exist" >&2
    exit 99
fi
# abidw reads types from DWARF: without it there is nothing to compare.
if command -v "$READELF" >/dev/null 2>&1; then
    if ! "$READELF" -S --wide "$library" | grep -q '\.debug_info'; then
        echo "SKIP: $library has no debug info (configure with -Dbuildtype=debugoptimized)"
        exit 77
    fi
else
    echo "SKIP: $READELF not found: cannot tell whether $library has debug info"
    exit 77
fi

# The representation options are part of the baseline's format: the
# baseline and every later dump must use the same ones.
#   --headers-dir + --drop-private-types + --exported-interfaces-only:
#       only the exported functions and the public types of attn.h;
#   --no-architecture, --no-elf-needed: independent of the target and of
#       which optional dependencies (SLEEF) this build links;
#   --no-corpus-path, --no-comp-dir-path, --short-locs: no build paths.
abidw_flags=(--headers-dir "$headers" --drop-private-types --exported-interfaces-only
             --no-architecture --no-elf-needed --no-corpus-path --no-comp-dir-path
             --short-locs)

if [ $update -eq 1 ]; then
    if ! "$ABIDW" "${abidw_flags[@]}" --out-file "$baseline" "$library"; then
        echo "ERROR: abidw failed on $library" >&2
        exit 99
    fi
    echo "wrote $baseline from $library"
    exit 0
fi

if [ ! -f "$baseline" ]; then
    echo "ERROR: no baseline $baseline. A new major version needs a new baseline:" >&2
    echo "       see abi/README.md" >&2
    exit 99
fi

tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT
current=$tmpdir/current.abi
if ! "$ABIDW" "${abidw_flags[@]}" --out-file "$current" "$library"; then
    echo "ERROR: abidw failed on $library" >&2
    exit 99
fi

"$ABIDIFF" "$baseline" "$current" >"$tmpdir/report" 2>&1
status=$?
# abidiff's exit status is a bit field:
#   bit 0 (1): abidiff itself failed (bad input, internal error)
#   bit 1 (2): usage error
#   bit 2 (4): the ABIs differ (any change, compatible or not)
#   bit 3 (8): the change is incompatible (set together with bit 2)
# Bit 3 covers only what abidiff can prove breaks old binaries (a removed
# function, a changed symbol version). A changed layout or member type of a
# public struct sets bit 2 alone, so bit 2 fails too, unless the change is
# nothing but added functions (checked by a second run with --no-added-syms).
if [ $((status & 3)) -ne 0 ]; then
    echo "ERROR: abidiff failed (status $status):" >&2
    cat "$tmpdir/report" >&2
    exit 99
fi
if [ $((status & 8)) -ne 0 ]; then
    echo "FAIL: incompatible ABI change against $baseline (abidiff status $status):"
    cat "$tmpdir/report"
    echo "Restore the ABI, or make the break deliberate: bump ATTN_VERSION_MAJOR (the"
    echo "SONAME follows) and write the new baseline (abi/README.md)."
    exit 1
fi
if [ $((status & 4)) -eq 0 ]; then
    echo "ok: ABI of $library identical to $baseline"
    exit 0
fi
"$ABIDIFF" --no-added-syms "$baseline" "$current" >/dev/null 2>&1
beyond_additions=$?
if [ $((beyond_additions & 3)) -ne 0 ]; then
    echo "ERROR: abidiff --no-added-syms failed (status $beyond_additions)" >&2
    exit 99
fi
if [ $((beyond_additions & 4)) -ne 0 ]; then
    echo "FAIL: the ABI changed against $baseline beyond added functions (abidiff status"
    echo "$status; abidiff cannot prove such changes compatible):"
    cat "$tmpdir/report"
    echo "Restore the ABI. If the change is deliberate and compatible (e.g. a field"
    echo "appended to attn_options, which struct_size versioning allows), write the"
    echo "new baseline in the same commit (abi/README.md); if it breaks old binaries,"
    echo "bump ATTN_VERSION_MAJOR too."
    exit 1
fi
echo "ABI changed compatibly against $baseline: functions were added (abidiff status $status):"
cat "$tmpdir/report"
echo "Passing. New functions need a new version node in src/libattn.map; write the"
echo "baseline again in the release that ships them (abi/README.md)."
exit 0

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds libattn and tests/tsan/stress.c with ThreadSanitizer in its own build
# directory and runs the stress test. Any TSan report fails the run.
#
#   tests/tsan/run.sh            (CC defaults to clang; CC=gcc works too)
#   ATTN_TSAN_BUILD=dir tests/tsan/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${ATTN_TSAN_BUILD:-$root/build-tsan}
export CC=${CC:-clang}

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Dbuildtype=debugoptimized -Db_sanitize=thread \
        -Db_lundef=false -Dbench=disabled -Dpython=disabled -Dcli=false >/dev/null
fi
ninja -C "$build" tests/tsan/attn-tsan-stress tests/tsan/attn-tsan-split >/dev/null

export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
run() { "$build/tests/tsan/attn-tsan-stress"; }
# Kernels with 32-bit mmap randomisation break older TSan runtimes
# ("unexpected memory mapping"); without ASLR they work.
if ! out=$(run 2>&1) && grep -q "unexpected memory mapping" <<<"$out"; then
    out=$(setarch "$(uname -m)" -R "$build/tests/tsan/attn-tsan-stress" 2>&1) || {
        echo "$out"; exit 1; }
elif grep -q "WARNING: ThreadSanitizer\|FAIL" <<<"$out"; then
    echo "$out"; exit 1
fi
echo "$out"
# split-KV: partial states, the atomic election of the merging task, the merge
if ! out=$(setarch "$(uname -m)" -R "$build/tests/tsan/attn-tsan-split" 2>&1) ||
    grep -q "WARNING: ThreadSanitizer" <<<"$out"; then
    echo "$out"; exit 1
fi
echo "$out"

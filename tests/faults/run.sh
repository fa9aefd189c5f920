#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds tests/faults (fault injection, hostile inputs) against libattn with
# ASan+UBSan (LeakSanitizer on) in its own build directory and runs both; with
# --valgrind, also runs them from a build without sanitizers under valgrind's
# leak checker.
#
#   tests/faults/run.sh [--valgrind]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${ATTN_FAULTS_BUILD:-$root/build-faults}
common=(-Dbuildtype=debugoptimized -Dbench=disabled -Dpython=disabled -Dcli=false)

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" "${common[@]}" -Db_sanitize=address,undefined \
        -Db_lundef=false >/dev/null
fi
ninja -C "$build" tests/faults/attn-faults tests/faults/attn-hostile >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
"$build/tests/faults/attn-faults"
"$build/tests/faults/attn-hostile" | tail -1

if [ "${1:-}" = --valgrind ]; then
    plain=${build}-plain
    [ -f "$plain/build.ninja" ] || meson setup "$plain" "$root" "${common[@]}" >/dev/null
    ninja -C "$plain" tests/faults/attn-faults tests/faults/attn-hostile >/dev/null
    for t in attn-faults attn-hostile; do
        valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
            --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=1 \
            "$plain/tests/faults/$t" | tail -1
    done
fi

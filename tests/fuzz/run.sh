#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets with clang, ASan and UBSan in their own build
# directory and fuzzes each for a bounded time, starting from the committed
# corpus (which it never modifies: new inputs go to the build directory).
#
#   tests/fuzz/run.sh                 about 30 s per fuzzer (ATTN_FUZZ_SECONDS)
#   tests/fuzz/run.sh 600             10 minutes per fuzzer
#   tests/fuzz/run.sh --coverage      replay committed + generated corpora in a
#                                     coverage build and print llvm-cov's report of src/
#   tests/fuzz/run.sh --replay api|diff FILE...
#                                     run inputs once (a finding's reproducer)
#   tests/fuzz/run.sh --setup         only configure the build directory (the
#                                     test command runs the ASan+UBSan suites
#                                     in it too: one sanitizer build, not two)
# Environment: ATTN_FUZZ_BUILD (default build-fuzz), ATTN_FUZZ_JOBS (parallel
# fuzzing processes per target, default 1), ATTN_FUZZ_PARALLEL (targets
# fuzzed at once, default one per CPU), ATTN_FUZZ_TARGETS ("api diff kvlayout
# merge split backward quant sources").
# A crash leaves crash-* in the build directory's fuzz-artifacts/ and fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/fuzz
build=${ATTN_FUZZ_BUILD:-$root/build-fuzz}
targets=${ATTN_FUZZ_TARGETS:-api diff kvlayout merge split backward quant sources}
seconds=${ATTN_FUZZ_SECONDS:-30}
coverage=0
setup_only=0
replay=()
while (($#)); do
    case $1 in
    --coverage) coverage=1 ;;
    --setup) setup_only=1 ;;
    --replay)
        (($# >= 3)) || { echo "usage: $0 --replay api|diff FILE..." >&2; exit 2; }
        targets=$2
        shift 2
        replay=("$@")
        break
        ;;
    ''|*[!0-9]*) echo "usage: $0 [seconds] [--coverage] | --setup | --replay api|diff FILE..." >&2; exit 2 ;;
    *) seconds=$1 ;;
    esac
    shift
done
command -v clang >/dev/null || { echo "fuzz: clang not found, skipped"; exit 0; }
common=(-Dbuildtype=debugoptimized -Dbench=disabled -Dpython=disabled -Dcli=false)

if [ ! -f "$build/build.ninja" ]; then
    # fuzzer-no-link: coverage feedback from the library too, not only the harness
    CC=clang CFLAGS="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined -g" \
        meson setup "$build" "$root" "${common[@]}" -Db_sanitize=address,undefined \
        -Db_lundef=false >/dev/null
fi
((setup_only)) && exit 0
ninja -C "$build" $(for t in $targets; do echo tests/fuzz/attn-fuzz-$t; done) >/dev/null

artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
if ((${#replay[@]})); then
    exec "$build/tests/fuzz/attn-fuzz-$targets" "${replay[@]}"
fi
# A finding must be fixable from the log alone (CI keeps nothing else): the
# input as base64 and the one command that replays it on a fresh clone.
report_finding() {
    local t=$1 log=$2 input
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    if [ -z "$input" ] || [ ! -f "$input" ]; then
        echo "fuzz $t: no input was written (see $log)"
        return
    fi
    echo "fuzz $t: failing input, base64 (commit it as tests/fuzz/corpus/$t/regress-<what>):"
    base64 -w0 "$input"
    echo
    echo "replay: echo '$(base64 -w0 "$input")' | base64 -d >/tmp/attn-$t-input &&" \
        "tests/fuzz/run.sh --replay $t /tmp/attn-$t-input"
}

# fuzz_one TARGET: one bounded run; its summary lines and any finding go to
# $artifacts/TARGET.out (printed in target order once all have ended).
fuzz_one() {
    local t=$1 work=$build/fuzz-corpus/$1 log=$artifacts/$1.log out=$artifacts/$1.out rc=0
    mkdir -p "$work"
    "$build/tests/fuzz/attn-fuzz-$t" -max_total_time="$seconds" -timeout=30 \
        -rss_limit_mb=4096 -max_len=512 -len_control=0 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$t-" ${ATTN_FUZZ_JOBS:+-jobs=$ATTN_FUZZ_JOBS -workers=$ATTN_FUZZ_JOBS} \
        "$work" "$here/corpus/$t" >"$log" 2>&1 || rc=1
    {
        echo "== fuzzed $t for ${seconds}s"
        if [ "$rc" != 0 ]; then
            grep -E "FUZZ CHECK|ERROR|runtime error|SUMMARY|Test unit written" "$log" || tail -30 "$log"
            report_finding "$t" "$log"
        fi
        grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|DONE" "$log" | tr '\n' ' '
        echo
    } >"$out"
    echo "$rc" >"$artifacts/$t.rc"
}

# The targets run side by side, ATTN_FUZZ_PARALLEL at a time (default: one
# per CPU): each still gets its full time, the stage takes a fraction of it.
parallel=${ATTN_FUZZ_PARALLEL:-$(nproc)}
echo "== fuzzing $targets for ${seconds}s each, $parallel at a time"
status=0
for t in $targets; do
    rm -f "$artifacts/$t.rc" "$artifacts/$t.out"
    while (($(jobs -rp | wc -l) >= parallel)); do
        wait -n || true
    done
    fuzz_one "$t" &
done
wait
for t in $targets; do
    cat "$artifacts/$t.out" 2>/dev/null || echo "== $t: no result"
    [ "$(cat "$artifacts/$t.rc" 2>/dev/null)" = 0 ] || status=1
done

if [ "$coverage" = 1 ]; then
    cov=${build}-cov
    if [ ! -f "$cov/build.ninja" ]; then
        CC=clang CFLAGS="-fprofile-instr-generate -fcoverage-mapping" \
            LDFLAGS="-fprofile-instr-generate" \
            meson setup "$cov" "$root" "${common[@]}" >/dev/null
    fi
    ninja -C "$cov" $(for t in $targets; do echo tests/fuzz/attn-fuzz-$t-replay; done) >/dev/null
    rm -f "$cov"/*.profraw
    objs=()
    for t in $targets; do
        LLVM_PROFILE_FILE="$cov/$t-%p.profraw" "$cov/tests/fuzz/attn-fuzz-$t-replay" \
            "$here/corpus/$t" "$build/fuzz-corpus/$t" >/dev/null
        objs+=(-object "$cov/tests/fuzz/attn-fuzz-$t-replay")
    done
    llvm-profdata merge -sparse "$cov"/*.profraw -o "$cov/fuzz.profdata"
    llvm-cov report "${objs[@]:1}" -instr-profile="$cov/fuzz.profdata" \
        -ignore-filename-regex='(^|/)(tests|include)/|config\.h$'
fi
exit $status

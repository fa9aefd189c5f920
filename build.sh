#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libattn's one entry point for people and CI.
#
#   ./build.sh run  [attn run options]   build everything, run the main job
#   ./build.sh test [--arm]              build and run every test suite
#   ./build.sh bench [benchmark options] build and run the benchmarks
#   ./build.sh bench --readme-table      ... and print the README's results table
#   ./build.sh coverage                  line coverage of src/ by the test suites
#
# Missing Debian packages are installed first (as root, or through sudo).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(meson ninja-build pkg-config cmake gcc g++ libsleef-dev libcpu-features-dev
          libcriterion-dev libbenchmark-dev libopenblas-dev libsimde-dev abigail-tools
          python3-numpy python3-pytest python3-matplotlib qemu-user binutils
          clang libclang-rt-14-dev libopenmpi-dev openmpi-bin)
# Only the tests need PyTorch (libattn.torch is checked against torch's autograd),
# man-db (the man-pages test renders attn(1) and libattn(3) with man's warnings on),
# the wheel's tools (ci/python-wheel.sh: meson-python, build, venv; patchelf,
# which meson-python only recommends and `python3 -m build` requires) and mypy
# (test_typing.py checks the type stub as a user's type checker reads it).
TEST_PACKAGES=(python3-torch man-db python3-mesonpy python3-build python3-venv patchelf mypy)

install_missing() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    local sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    echo "== installing ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null
}

# configure DIR [meson options]: set up once, reconfigure on later runs.
configure() {
    local dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson configure "$dir" "$@" >/dev/null
    else
        meson setup "$dir" "$@" >/dev/null
    fi
    ninja -C "$dir" >/dev/null
}

# "== [m:ss] what": a section of the test command, with the time since the
# script started, so a CI log shows where its minutes go.
section() { printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

JOBS=$(nproc)
PASSED=0
FAILED=0
SKIPPED=0

# Adds one meson test run's counts (from its JSON log) to the totals.
count_results() {
    local counts
    counts=$(/usr/bin/python3 ci/meson-counts.py "$1/meson-logs/testlog.json")
    read -r p f s <<<"$counts"
    PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); SKIPPED=$((SKIPPED + s))
}

# meson_test DIR [args]: runs, records counts, never aborts the script.
meson_test() {
    local dir=$1 rc=0
    shift
    rm -f "$dir/meson-logs/testlog.json" # never count a previous run
    meson test -C "$dir" --print-errorlogs --num-processes "$JOBS" "$@" || rc=$?
    count_results "$dir"
    if [ "$rc" != 0 ] && [ ! -s "$dir/meson-logs/testlog.json" ]; then
        echo "FAIL: meson test in $dir did not run (exit $rc)"
        FAILED=$((FAILED + 1))
    fi
}

cmd_run() {
    install_missing "${PACKAGES[@]}"
    configure build -Dbuildtype=release
    ./build/tools/attn info
    ./build/tools/attn run "$@"
}

cmd_bench() {
    install_missing "${PACKAGES[@]}"
    configure build -Dbuildtype=release -Dbench=enabled
    if [ "${1:-}" = --readme-table ]; then # README's "Benchmarks" table, from one run
        /usr/bin/python3 bench/readme_table.py build
        return
    fi
    ./build/bench/attn_bench "$@"
}

cmd_test() {
    local arm=0 system=0
    for a in "$@"; do
        case $a in
        --arm) arm=1 ;;
        --system) system=1 ;;
        *) echo "unknown option $a" >&2; exit 2 ;;
        esac
    done
    [ -z "${CI:-}" ] || { arm=1; system=1; }
    install_missing "${PACKAGES[@]}" "${TEST_PACKAGES[@]}"

    section "native build (warnings as errors, AVX-512 kernels also built against SIMDe)"
    configure build-test -Dbuildtype=debugoptimized -Dwerror=true -Dsimde_emulation=true \
        -Dtests=enabled -Dbench=disabled
    meson_test build-test

    # One sanitizer build serves the suites and the fuzzers: clang, ASan +
    # UBSan, libFuzzer's coverage hooks (tests/fuzz/run.sh --setup), so the
    # test command compiles the library instrumented once, not twice.
    section "AddressSanitizer + UndefinedBehaviorSanitizer (clang; the fuzzers' build, build-fuzz)"
    tests/fuzz/run.sh --setup
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson_test build-fuzz --suite kernels --suite api --suite fuzz --suite faults --suite tsan

    # step NAME COMMAND...: one pass/fail entry in the summary.
    step() {
        local name=$1
        shift
        if "$@"; then PASSED=$((PASSED + 1)); else echo "FAIL: $name"; FAILED=$((FAILED + 1)); fi
    }

    # What the README tells users to build: meson's default buildtype
    # (release, -O3), without -Dwerror; the -O2 builds above do not prove it.
    section "the README's build (default buildtype) and its smoke test"
    step readme-build configure build
    step readme-smoke ./build/tests/baseline/attn-baseline-smoke

    # Installing as the README says: that build's `meson install` (in a
    # private mount namespace over /usr/local) used with no environment,
    # and the Python wheel (pyproject.toml) built and tested in a venv.
    section "meson install as the README says; the Python wheel in a venv"
    step meson-install ci/meson-install.sh build
    step python-wheel ci/python-wheel.sh

    section "libFuzzer (clang, ASan+UBSan): API and differential fuzzers, ${ATTN_FUZZ_SECONDS:-30} s each"
    step fuzzers env ATTN_FUZZ_SECONDS="${ATTN_FUZZ_SECONDS:-30}" tests/fuzz/run.sh

    section "ThreadSanitizer: concurrent calls, first-call dispatch race, isa_select, pools"
    step tsan tests/tsan/run.sh

    section "baseline x86-64 (qemu -cpu Nehalem: any AVX outside the ISA files traps)"
    step baseline-nehalem qemu-x86_64 -cpu Nehalem ./build-test/tests/baseline/attn-baseline-smoke
    step cli-nehalem qemu-x86_64 -cpu Nehalem -E LD_LIBRARY_PATH=build-test/src \
        ./build-test/tools/attn run --preset small --threads 2

    if [ "$system" = 1 ]; then # installs and removes packages system-wide
        section "Debian packages: build, lintian, install, use from /usr, remove"
        step debian-packages ci/debian-packages.sh
    fi

    if [ "$arm" = 1 ]; then
        section "AArch64 cross build under qemu"
        step aarch64 ci/aarch64-test.sh
    fi

    section "end of the test command"
    echo "summary: $PASSED passed, $FAILED failed, $SKIPPED skipped"
    [ "$FAILED" = 0 ]
}

# Line coverage of src/ (gcc --coverage, gcovr) by every native suite that
# drives the library: the Criterion suites, the committed fuzz corpora, the
# hostile-input and fault-injection programs, and the pool stress program
# (the only callers of the thread pool's worker paths).
cmd_coverage() {
    install_missing "${PACKAGES[@]}" gcovr
    local dir=build-cov
    # atomic counters: the pool's threads run the same code at once, and
    # plain counter updates race (gcov then reads negative branch counts)
    configure "$dir" -Dbuildtype=debug -Db_coverage=true -Dc_args=-fprofile-update=atomic \
        -Dtests=enabled -Dbench=disabled -Dpython=disabled -Dabi_check=disabled
    find "$dir" -name '*.gcda' -delete
    meson_test "$dir" --suite kernels --suite api --suite fuzz --suite faults --suite tsan
    echo "== line coverage of src/ (uncovered lines under 'Missing')"
    gcovr -r . --object-directory "$dir" --filter 'src/' --print-summary \
        --exclude-unreachable-branches
    [ "$FAILED" = 0 ]
}

case "${1:-}" in
run) shift; cmd_run "$@" ;;
coverage) shift; cmd_coverage ;;
test) shift; cmd_test "$@" ;;
bench) shift; cmd_bench "$@" ;;
*)
    sed -n '2,10p' "$0"
    exit 2
    ;;
esac

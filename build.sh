#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libattn's one entry point for people and CI.
#
#   ./build.sh run  [attn run options]   build the library, CLI and Python
#                                        binding, run the main job
#   ./build.sh test [--arm]              build and run every test suite
#   ./build.sh bench [benchmark options] build and run the benchmarks
#   ./build.sh bench --readme-table      ... and print the README's results table
#   ./build.sh coverage                  line coverage of src/ by the test suites
#
# Options before the command: -j N (or ATTN_JOBS=N): parallel compile and
# test jobs (default: the CPUs this process may use).
# Missing Debian packages are installed first (as root, or through sudo):
# `run` only what it needs, the others what their tools need too.
set -euo pipefail
cd "$(dirname "$0")"

# What `run` needs: the compilers, meson, SLEEF and cpu_features (found
# through its CMake package), python3 for the binding it installs.
RUN_PACKAGES=(meson ninja-build pkg-config cmake gcc libsleef-dev libcpu-features-dev python3)
PACKAGES=("${RUN_PACKAGES[@]}" g++
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
    echo "== installing ${#missing[@]} Debian packages: ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null
    echo "== installed (${SECONDS} s so far)"
}

# configure DIR [meson options]: set up once, reconfigure on later runs;
# then build with ninja's progress on one line per step when VERBOSE_BUILD
# is set (the run command), else quietly.
configure() {
    local dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson configure "$dir" "$@" >/dev/null
    else
        meson setup "$dir" "$@" >/dev/null
    fi
    if [ -n "${VERBOSE_BUILD:-}" ]; then
        # "[n/N] step" rewrites one line; anything else (errors) is printed whole
        set +o pipefail
        ninja -C "$dir" -j "$JOBS" 2>&1 |
            awk '/^\[[0-9]+\/[0-9]+\]/ { printf "\r%-110.110s", $0; fflush(); next }
                 { print } END { print "" }'
        local rc=${PIPESTATUS[0]}
        set -o pipefail
        return "$rc"
    fi
    ninja -C "$dir" -j "$JOBS" >/dev/null
}

# "== [m:ss] what": a section of the test command, with the time since the
# script started, so a CI log shows where its minutes go; each section's
# minutes are also listed at the end (section_summary).
SECTIONS=()
SECTION_START=0
SECTION_NAME=""
section_end() {
    [ -z "$SECTION_NAME" ] ||
        SECTIONS+=("$(printf '%3d:%02d  %s' $(((SECONDS - SECTION_START) / 60)) \
            $(((SECONDS - SECTION_START) % 60)) "$SECTION_NAME")")
    SECTION_NAME=""
}
section() {
    section_end
    SECTION_START=$SECONDS
    SECTION_NAME=${2:-$1}
    printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$1"
}
section_summary() {
    section_end
    echo "== minutes per step (m:ss; the AArch64 job ran beside the x86 steps)"
    printf '%s\n' "${SECTIONS[@]}"
    printf '%3d:%02d  in all\n' $((SECONDS / 60)) $((SECONDS % 60))
}

JOBS=${ATTN_JOBS:-$(nproc)}
while [ $# -gt 0 ]; do
    case $1 in
    -j) JOBS=$2; shift 2 ;;
    -j*) JOBS=${1#-j}; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    --jobs=*) JOBS=${1#--jobs=}; shift ;;
    *) break ;;
    esac
done
case $JOBS in
'' | *[!0-9]* | 0) echo "build.sh: -j expects a positive number of jobs, got '$JOBS'" >&2; exit 2 ;;
esac
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
    install_missing "${RUN_PACKAGES[@]}"
    echo "== building the library, the CLI and the Python binding in build/ ($JOBS jobs)"
    VERBOSE_BUILD=1 configure build -Dbuildtype=release -Dtests=disabled -Dbench=disabled
    echo "== built (${SECONDS} s so far)"
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
    section "Debian packages the tests need" packages
    install_missing "${PACKAGES[@]}" "${TEST_PACKAGES[@]}"

    # The AArch64 job (cross build, qemu) shares nothing with the x86 steps
    # but the machine: after its packages (apt takes one client at a time)
    # it runs beside them, its log printed at the end. The 2 cores are then
    # shared, and each side's single-threaded stretches (a long test, a
    # link, a package's install) leave room for the other.
    local arm_pid="" arm_log=build-arm64.log arm_start=0
    if [ "$arm" = 1 ]; then
        section "AArch64: packages and binfmt_misc" "AArch64 setup"
        ci/aarch64-test.sh --setup-only
        arm_start=$SECONDS
        (
            t0=$(date +%s)
            rc=0
            ci/aarch64-test.sh --no-setup >"$arm_log" 2>&1 || rc=$?
            echo $(($(date +%s) - t0)) >"$arm_log.seconds"
            exit "$rc"
        ) &
        arm_pid=$!
        # a failing x86 step ends the script (set -e): the job ends with it
        trap 'kill "$arm_pid" 2>/dev/null; pkill -P "$arm_pid" 2>/dev/null || true' EXIT
        echo "== the AArch64 job runs in the background (log: $arm_log)"
    fi

    section "native build (warnings as errors, AVX-512 kernels also built against SIMDe)" \
        "native build and suites"
    configure build-test -Dbuildtype=debugoptimized -Dwerror=true -Dsimde_emulation=true \
        -Dtests=enabled -Dbench=disabled
    meson_test build-test

    # One sanitizer build serves the suites and the fuzzers: clang, ASan +
    # UBSan, libFuzzer's coverage hooks (tests/fuzz/run.sh --setup), so the
    # test command compiles the library instrumented once, not twice.
    # The kernel suites' SIMD rows only: the scalar oracle's own rows ran in
    # the native build, and the oracle runs here anyway inside every
    # comparison (tests/harness.c, ATTN_TEST_ROWS).
    section "AddressSanitizer + UndefinedBehaviorSanitizer (clang; the fuzzers' build, build-fuzz)" \
        "ASan+UBSan build and suites"
    tests/fuzz/run.sh --setup
    ninja -C build-fuzz -j "$JOBS" >/dev/null
    ATTN_TEST_ROWS=avx2,avx512 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
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
    section "the README's build (default buildtype) and its smoke test" "README build"
    # (the options `run` may have set there reset to the defaults)
    step readme-build configure build -Dbuildtype=release -Dtests=auto -Dbench=auto
    step readme-smoke ./build/tests/baseline/attn-baseline-smoke

    # Installing as the README says: that build's `meson install` (in a
    # private mount namespace over /usr/local) used with no environment,
    # and the Python wheel (pyproject.toml) built and tested in a venv.
    section "meson install as the README says; the Python wheel in a venv" "install, wheel"
    step meson-install ci/meson-install.sh build
    step python-wheel ci/python-wheel.sh

    section "libFuzzer (clang, ASan+UBSan): API and differential fuzzers, ${ATTN_FUZZ_SECONDS:-30} s each" \
        "libFuzzer"
    step fuzzers env ATTN_FUZZ_SECONDS="${ATTN_FUZZ_SECONDS:-30}" tests/fuzz/run.sh

    section "ThreadSanitizer: concurrent calls, first-call dispatch race, isa_select, pools" \
        "ThreadSanitizer"
    step tsan tests/tsan/run.sh

    section "baseline x86-64 (qemu -cpu Nehalem: any AVX outside the ISA files traps)" \
        "baseline x86-64"
    step baseline-nehalem qemu-x86_64 -cpu Nehalem ./build-test/tests/baseline/attn-baseline-smoke
    step cli-nehalem qemu-x86_64 -cpu Nehalem -E LD_LIBRARY_PATH=build-test/src \
        ./build-test/tools/attn run --preset small --threads 2

    if [ "$system" = 1 ]; then # installs and removes packages system-wide
        section "Debian packages: build, lintian, install, use from /usr, remove" \
            "Debian packages"
        step debian-packages ci/debian-packages.sh
    fi

    if [ -n "$arm_pid" ]; then
        section "AArch64 cross build under qemu (waiting for the background job)" \
            "waiting for AArch64"
        local arm_rc=0
        wait "$arm_pid" || arm_rc=$?
        trap - EXIT
        echo "== the AArch64 job's log (it started at $((arm_start / 60)):$(printf '%02d' $((arm_start % 60))))"
        cat "$arm_log"
        if [ "$arm_rc" = 0 ]; then PASSED=$((PASSED + 1)); else echo "FAIL: aarch64"; FAILED=$((FAILED + 1)); fi
        local arm_took
        arm_took=$(cat "$arm_log.seconds" 2>/dev/null || echo 0)
        SECTIONS+=("$(printf '%3d:%02d  AArch64 job, from %d:%02d (beside the x86 steps)' \
            $((arm_took / 60)) $((arm_took % 60)) $((arm_start / 60)) $((arm_start % 60)))")
    fi

    section "end of the test command"
    section_summary
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
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac

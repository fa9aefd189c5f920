#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Cross-builds libattn for AArch64 and runs the test suite under
# qemu-aarch64: the whole suite on qemu's max CPU (NEON, SVE2) at an SVE
# vector length of 128 bits; the length-dependent suites (LENGTH_SUITES) at
# 256 and 512 bits (the SVE kernels are vector-length-agnostic, and each
# length puts their predicated tails elsewhere), with QEMU_CPU=cortex-a72
# (NEON only, where SVE must not be chosen), and at 2048 bits from the
# README's release build; then `attn info` and a short
# `attn run --preset small` when the CLI is built.
#
#   ci/aarch64-test.sh          (root, or a user with sudo, on Debian 12 amd64)
#
# It changes the system, so nothing runs it unasked (./build.sh test runs it
# only with --arm or in CI). What it sets up, once, when missing:
#   - dpkg --add-architecture arm64, and the aarch64 cross gcc, qemu-user,
#     qemu-user-static and the arm64 SLEEF and cpu_features packages;
#   - Criterion for arm64, unpacked into /opt/arm64-criterion: installing
#     libcriterion-dev:arm64 would remove the amd64 Criterion, whose
#     dependencies are not Multi-Arch: same;
#   - binfmt_misc for aarch64 ELF: Criterion re-executes /proc/self/exe for
#     every test, which under qemu-user only works through binfmt_misc.
# See the README's AArch64 section and docs/CROSS_TESTING.md.
#
# Environment: ATTN_ARM64_BUILD (build dir, default build-arm64),
# ATTN_ARM64_TIMEOUT (seconds per meson test run, default 3600),
# ATTN_ARM64_TIMEOUT_MULTIPLIER (for the tests' own timeouts, default 10:
# everything is much slower under emulation).
# Exit status: 0 when every run passes and the CLI (if any) runs.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${ATTN_ARM64_BUILD:-build-arm64}
RUN_TIMEOUT=${ATTN_ARM64_TIMEOUT:-3600}
TIMEOUT_MULTIPLIER=${ATTN_ARM64_TIMEOUT_MULTIPLIER:-10}
CRIT=/opt/arm64-criterion
BINFMT=/proc/sys/fs/binfmt_misc

SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo)

# the time since this script started, so a CI log shows where its minutes go
log() { printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

setup_packages() {
    local packages=(meson ninja-build pkg-config cmake gcc-aarch64-linux-gnu libc6-dev:arm64
                    qemu-user qemu-user-static binfmt-support
                    libsleef-dev:arm64 libcpu-features-dev:arm64
                    libffi8:arm64 libgit2-1.5:arm64) # the arm64 Criterion's runtime deps
    local missing=() p need_update=0
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        log "adding the arm64 architecture to dpkg"
        "${SUDO[@]}" dpkg --add-architecture arm64
        need_update=1
    fi
    for p in "${packages[@]}"; do
        installed "$p" || missing+=("$p")
    done
    ((${#missing[@]})) && need_update=1
    ((need_update)) || return 0
    "${SUDO[@]}" apt-get update -qq
    ((${#missing[@]})) || return 0
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null
}

setup_criterion() {
    local pc=$CRIT/usr/lib/aarch64-linux-gnu/pkgconfig/criterion.pc
    [ -f "$pc" ] && return 0
    log "unpacking the arm64 Criterion into $CRIT"
    local debs
    debs=$(mktemp -d)
    (cd "$debs" && apt-get download -qq libcriterion3:arm64 libcriterion-dev:arm64 \
        libnanomsg5:arm64)
    "${SUDO[@]}" mkdir -p "$CRIT"
    local d
    for d in "$debs"/*.deb; do
        "${SUDO[@]}" dpkg-deb -x "$d" "$CRIT"
    done
    rm -rf "$debs"
    # point the .pc at the private prefix; the static-link fields name
    # packages that are not installed for arm64
    "${SUDO[@]}" sed -i "s|^prefix=/usr\$|prefix=$CRIT/usr|; /^Requires.private/d; /^Libs.private/d" \
        "$pc"
}

setup_binfmt() {
    if ! mountpoint -q "$BINFMT"; then
        "${SUDO[@]}" mount -t binfmt_misc binfmt_misc "$BINFMT" || {
            echo "error: cannot mount $BINFMT; Criterion tests cannot run under qemu-user" >&2
            return 1
        }
    fi
    if ! grep -qx enabled "$BINFMT/qemu-aarch64" 2>/dev/null; then
        "${SUDO[@]}" update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    fi
    if ! grep -qx enabled "$BINFMT/qemu-aarch64" 2>/dev/null; then
        echo "error: binfmt_misc has no enabled qemu-aarch64 entry" >&2
        return 1
    fi
}

build() {
    local options=(-Dbuildtype=debugoptimized -Dwerror=true -Dtests=enabled -Dbench=disabled
                   -Dpython=disabled -Dabi_check=disabled)
    if [ -f "$BUILD/build.ninja" ]; then
        meson configure "$BUILD" "${options[@]}" >/dev/null
    else
        log "configuring $BUILD (cross file ci/aarch64-linux-gnu.ini)"
        meson setup "$BUILD" --cross-file ci/aarch64-linux-gnu.ini "${options[@]}"
    fi
    log "building $BUILD"
    ninja -C "$BUILD"
    # a NEON table that silently dropped out of the build would leave every
    # NEON test row skipped and the suite green
    grep -q '^#define HAVE_NEON 1' "$BUILD/src/config.h" || {
        echo "error: $BUILD was configured without the NEON kernels" >&2
        return 1
    }
    # likewise for SVE: its rows would be skipped at every vector length
    grep -q '^#define HAVE_SVE 1' "$BUILD/src/config.h" || {
        echo "error: $BUILD was configured without the SVE kernels" >&2
        return 1
    }
}

# QEMU_CPU values of the runs: SVE at 128, 256, 512 and 2048 bits (the
# property takes bytes), then NEON only.
SVE_VECTOR_BYTES=(16 32 64 256)
NEON_ONLY_CPU=cortex-a72

PASSED=0
FAILED=0
SKIPPED=0

# Prints and adds up the counts of the last meson test run (its JSON log).
count_results() {
    local label=$1 counts p f s
    counts=$(/usr/bin/python3 ci/meson-counts.py "$BUILD/meson-logs/testlog.json")
    read -r p f s <<<"$counts"
    echo "$label: $p passed, $f failed, $s skipped"
    PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); SKIPPED=$((SKIPPED + s))
}

# Suites whose tests run build-machine programs (x86-64 python3, the native
# compiler) against the library: they cannot load or link an aarch64 one.
HOST_ONLY_SUITES=(python consumers examples)

# Suites run at the SVE lengths after the first, on the NEON-only CPU and
# from the README's build (LENGTH_SUITES): those whose results depend on the
# vector length or the table, the kernels against the scalar oracle on
# every shape class (suite vl: checkasm and the kernel-level tests, so every
# predicated tail). The others (operations on every layout, API contract,
# ABI, CLI, threads, faults, the fuzz corpora's replays, and the exp sweep,
# whose per-lane arithmetic is the same at every length) run in full once,
# at the first length, where both the NEON and the SVE rows run (the
# differential fuzzer compares every table there): under emulation they
# take most of the time (the kernels suite alone, 9 minutes at 2048 bits on
# a loaded Zen 5; suite vl about 1). The corpora's replays left the length
# list to keep CI under 30 minutes: what they check at another length is
# the kernels' tails, which suite vl checks on every shape class.
LENGTH_SUITES=(vl)

# run_tests LABEL [--suites] [ENV=VALUE...]: the whole suite under
# qemu-aarch64 (with --suites: only LENGTH_SUITES).
run_tests() {
    local label=$1
    shift
    local skip=() suite rc=0
    if [ "${1:-}" = --suites ]; then
        shift
        for suite in "${LENGTH_SUITES[@]}"; do
            skip+=(--suite "$suite")
        done
        label="$label, suites ${LENGTH_SUITES[*]}"
    else
        for suite in "${HOST_ONLY_SUITES[@]}"; do
            skip+=(--no-suite "$suite")
        done
    fi
    log "meson test under qemu-aarch64 ($label)"
    rm -f "$BUILD/meson-logs/testlog.json" "$BUILD/meson-logs/testlog.txt"
    env "$@" timeout -s KILL "$RUN_TIMEOUT" meson test -C "$BUILD" --print-errorlogs \
        --num-processes "$(nproc)" --timeout-multiplier "$TIMEOUT_MULTIPLIER" "${skip[@]}" \
        || rc=$?
    # Criterion's own per-case counts (each ISA row of a parameterized test is a case)
    grep -h -e '^test:' -e 'Synthesis:' "$BUILD/meson-logs/testlog.txt" 2>/dev/null || true
    count_results "$label"
    if [ "$rc" = 137 ]; then
        echo "$label: meson test killed after ${RUN_TIMEOUT}s"
        FAILED=$((FAILED + 1))
    elif [ "$rc" != 0 ] && [ ! -s "$BUILD/meson-logs/testlog.json" ]; then
        echo "$label: meson test failed to run (exit $rc)"
        FAILED=$((FAILED + 1))
    fi
}

# The CLI under qemu: it must find the best table (SVE where the CPU has
# it, NEON otherwise) and compute.
run_cli() {
    local attn=$BUILD/tools/attn
    [ -x "$attn" ] || { log "no CLI in $BUILD/tools: skipped"; return 0; }
    local cpu expected
    for cpu in "max,sve-default-vector-length=${SVE_VECTOR_BYTES[0]}" "$NEON_ONLY_CPU"; do
        expected=sve
        [ "$cpu" = "$NEON_ONLY_CPU" ] && expected=neon
        log "attn info / attn run --preset small (QEMU_CPU=$cpu)"
        local info=""
        if info=$(QEMU_CPU=$cpu timeout -s KILL 600 qemu-aarch64 "$attn" info) &&
            printf '%s\n' "$info" &&
            QEMU_CPU=$cpu timeout -s KILL 600 qemu-aarch64 "$attn" run --preset small; then
            PASSED=$((PASSED + 1))
        else
            echo "FAIL: attn under qemu-aarch64 (QEMU_CPU=$cpu)"
            FAILED=$((FAILED + 1))
            continue
        fi
        # dispatch must pick SVE on an SVE CPU and NEON on one without
        if ! grep -Eq "^[[:space:]]*active[[:space:]]+$expected\$" <<<"$info"; then
            echo "FAIL: attn info does not report $expected as the active ISA (QEMU_CPU=$cpu)"
            FAILED=$((FAILED + 1))
        fi
    done
}

# A consumer program built as a user would: the cross compiler and nothing
# but `pkg-config --cflags --libs attn` against a `meson install --destdir`
# prefix, then run under qemu-aarch64.
run_consumer() {
    local stage
    stage=$(mktemp -d)
    log "pkg-config consumer against an installed prefix, under qemu-aarch64"
    local libdir # absolute: <prefix>/<libdir>
    libdir=$(meson introspect "$BUILD" --buildoptions | /usr/bin/python3 -c '
import json, os, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(os.path.join(o["prefix"], o["libdir"]))')
    if DESTDIR=$stage meson install -C "$BUILD" --quiet >/dev/null &&
        aarch64-linux-gnu-gcc -O2 -o "$stage/consumer" examples/c/main.c \
            $(PKG_CONFIG_SYSROOT_DIR=$stage PKG_CONFIG_LIBDIR=$stage$libdir/pkgconfig \
              pkg-config --cflags --libs attn) -lm &&
        timeout -s KILL 600 qemu-aarch64 -E LD_LIBRARY_PATH="$stage$libdir" \
            "$stage/consumer"; then
        PASSED=$((PASSED + 1))
    else
        echo "FAIL: pkg-config consumer under qemu-aarch64"
        FAILED=$((FAILED + 1))
    fi
    rm -rf "$stage"
}

# ---- the README's by-hand commands, default buildtype (release, -O3) ----
# The build above is debugoptimized (-O2); users follow the README, whose
# commands take meson's default buildtype. GCC 12's -O3 once failed on a
# test program there (an internal compiler error) while CI stayed green, so
# CI now runs exactly those commands too, in their own directory, and the
# suite once (default CPU) from that build.
README_BUILD=${ATTN_ARM64_README_BUILD:-build-arm64-release}

build_readme() {
    log "the README's commands: meson setup $README_BUILD --cross-file ci/aarch64-linux-gnu.ini"
    if [ ! -f "$README_BUILD/build.ninja" ]; then
        meson setup "$README_BUILD" --cross-file ci/aarch64-linux-gnu.ini >/dev/null || return 1
    fi
    ninja -C "$README_BUILD"
}

run_readme() {
    if build_readme; then
        PASSED=$((PASSED + 1))
        local saved=$BUILD
        BUILD=$README_BUILD
        # the whole suite ran from the -O2 build above: here the suites of
        # the longer vector lengths, on code compiled as the README builds
        # it, at the longest length (which the -O2 build leaves to this one)
        local last=${SVE_VECTOR_BYTES[-1]}
        run_tests "README build (default buildtype), SVE $((last * 8))-bit (max)" --suites \
            ATTN_TEST_ROWS=sve QEMU_CPU="max,sve-default-vector-length=$last"
        BUILD=$saved
    else
        echo "FAIL: the README's AArch64 build ($README_BUILD)"
        FAILED=$((FAILED + 1))
    fi
}
# ---- end of the README build block ----

# --setup-only: the packages, Criterion and binfmt_misc, then exit (build.sh
# runs that first, then the rest with --no-setup beside the x86 steps:
# apt serves one client at a time).
case ${1:-} in
--setup-only) setup_packages; setup_criterion; setup_binfmt; exit 0 ;;
--no-setup) ;;
'') setup_packages; setup_criterion; setup_binfmt ;;
*) echo "usage: $0 [--setup-only | --no-setup]" >&2; exit 2 ;;
esac
build
# Which tables each run tests (ATTN_TEST_ROWS, read by the harness and
# checkasm): the whole suite at the first length runs the NEON and SVE rows
# (the scalar oracle's own rows are x86's, the same C; here it still runs
# inside every comparison); the other lengths only SVE's (NEON's 128-bit
# code does not change with the SVE length), the NEON-only CPU only NEON's.
run_tests "SVE $((SVE_VECTOR_BYTES[0] * 8))-bit (max)" ATTN_TEST_ROWS=neon,sve \
    QEMU_CPU="max,sve-default-vector-length=${SVE_VECTOR_BYTES[0]}"
# the last length runs from the README's build (run_readme)
for bytes in "${SVE_VECTOR_BYTES[@]:1:${#SVE_VECTOR_BYTES[@]}-2}"; do
    run_tests "SVE $((bytes * 8))-bit (max)" --suites ATTN_TEST_ROWS=sve \
        QEMU_CPU="max,sve-default-vector-length=$bytes"
done
run_tests "$NEON_ONLY_CPU (NEON only)" --suites ATTN_TEST_ROWS=neon QEMU_CPU="$NEON_ONLY_CPU"
run_cli
run_consumer
run_readme
echo "aarch64 summary: $PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" = 0 ]

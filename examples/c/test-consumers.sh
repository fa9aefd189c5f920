#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the current build into a temporary DESTDIR, then build and run the
# consumer exactly as a user would: once through pkg-config (Makefile), once
# through find_package(attn) (CMake). Exit 77 (skip) when a tool is missing.
#
# usage: test-consumers.sh MESON BUILD_ROOT EXAMPLE_DIR PREFIX LIBDIR
set -eu

meson=$1 build_root=$2 example_dir=$3 prefix=$4 libdir=$5

for tool in cc make pkg-config cmake; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipping: $tool not found"
        exit 77
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/libattn-consumers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

stage=$tmp/root
"$meson" install -C "$build_root" --no-rebuild --quiet --destdir "$stage"

case $libdir in
/*) staged_libdir=$stage$libdir ;;
*) staged_libdir=$stage$prefix/$libdir ;;
esac
[ -f "$staged_libdir/pkgconfig/attn.pc" ] || { echo "no attn.pc in $staged_libdir/pkgconfig"; exit 1; }

# The README's recipe: PKG_CONFIG_PATH alone. attn.pc is relocatable (its
# prefix is ${pcfiledir}/..: pkgconfig.relocatable=true, the project's
# default), so its paths point into $stage; it comes before any attn.pc of
# the system.
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
PKG_CONFIG_PATH=$staged_libdir/pkgconfig
export PKG_CONFIG_PATH
if ! grep -q '^prefix=${pcfiledir}' "$staged_libdir/pkgconfig/attn.pc"; then
    # A build directory configured with -Dpkgconfig.relocatable=false, or set
    # up before it was the default (meson keeps an old directory's value).
    echo "note: attn.pc is not relocatable ($(grep '^prefix=' "$staged_libdir/pkgconfig/attn.pc")):"
    echo "      staged with PKG_CONFIG_SYSROOT_DIR (meson configure -Dpkgconfig.relocatable=true)"
    PKG_CONFIG_SYSROOT_DIR=$stage
    export PKG_CONFIG_SYSROOT_DIR
fi
echo "pkg-config --cflags --libs attn: $(pkg-config --cflags --libs attn)"
case $(pkg-config --cflags attn) in
*"$stage"*) ;;
*) echo "FAIL: pkg-config --cflags does not point into the staged prefix"; exit 1 ;;
esac

LD_LIBRARY_PATH=$staged_libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH

check_links_staged() {
    if command -v ldd >/dev/null 2>&1; then
        if ! ldd "$1" | grep "libattn" | grep "$staged_libdir" >/dev/null; then
            echo "FAIL: $1 does not load libattn from $staged_libdir:"
            ldd "$1"
            exit 1
        fi
    fi
}

echo "== pkg-config consumer (the README's command)"
cp "$example_dir/main.c" "$tmp/app.c"
# shellcheck disable=SC2046 # pkg-config's words are the flags
(cd "$tmp" && cc app.c $(pkg-config --cflags --libs attn) -o app -lm) # -lm: main.c's own
check_links_staged "$tmp/app"
"$tmp/app" >/dev/null

echo "== pkg-config consumer (Makefile)"
mkdir "$tmp/make"
make -s -f "$example_dir/Makefile" BUILD="$tmp/make" CFLAGS="-O2 -Wall -Wextra -Werror"
check_links_staged "$tmp/make/attn-demo"
"$tmp/make/attn-demo"

echo "== CMake consumer (find_package(attn))"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
cmake_configure() {
    rm -rf "$tmp/cmake"
    cmake -S "$example_dir/cmake" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$stage$prefix" \
        -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
        -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" "$@" >"$tmp/cmake.log" 2>&1
}
if ! cmake_configure; then
    # CMake searches <prefix>/lib, lib/<arch> and share, but lib64 and other
    # libdirs only where the platform uses them (not on Debian). Such a
    # package is found by naming its directory, as a user would have to.
    case $libdir in
    lib | lib/*)
        cat "$tmp/cmake.log"; exit 1 ;;
    esac
    echo "note: CMake does not search libdir '$libdir' on this platform; using attn_DIR"
    cmake_configure -Dattn_DIR="$staged_libdir/cmake/attn" || { cat "$tmp/cmake.log"; exit 1; }
fi
attn_dir=$(sed -n 's/^attn_DIR:[A-Z]*=//p' "$tmp/cmake/CMakeCache.txt")
case $attn_dir in
"$stage"*) echo "attn_DIR=$attn_dir" ;;
*) echo "FAIL: CMake found the attn package at '$attn_dir', not in $stage"; exit 1 ;;
esac
cmake --build "$tmp/cmake" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
check_links_staged "$tmp/cmake/attn-demo"
"$tmp/cmake/attn-demo"

# The version file refuses a major version this package does not provide.
mkdir "$tmp/cmake-v2"
cat >"$tmp/cmake-v2/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.10)
project(attn_v2 LANGUAGES NONE)
find_package(attn 2.0 QUIET)
if(attn_FOUND)
  message(FATAL_ERROR "find_package(attn 2.0) accepted a 1.x package")
endif()
CMAKE
cmake -S "$tmp/cmake-v2" -B "$tmp/cmake-v2/build" -DCMAKE_PREFIX_PATH="$stage$prefix" \
    -Dattn_DIR="$attn_dir" >"$tmp/cmake-v2.log" 2>&1 || { cat "$tmp/cmake-v2.log"; exit 1; }
echo "find_package(attn 2.0) correctly refused the 1.x package"
echo "ok: both consumers built and ran against the staged install"

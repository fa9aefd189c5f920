#!/bin/sh
# SPDX-License-Identifier: MIT
# The static library as a user links it: install the build into a temporary
# DESTDIR, then build examples/c/main.c with the README's static recipe
# (libattn.a, and what attn.pc's Libs.private names, from pkg-config
# --static) and run it. It must not load libattn.so, must hold every object
# of the build's attn_core (the scalar and every ISA module), and must run
# the same kernels as the shared library under each ATTN_ISA.
# Exit 77 (skip) when a tool is missing.
#
# usage: test-static.sh MESON BUILD_ROOT EXAMPLE_DIR PREFIX LIBDIR STATIC_LIB CORE_LIB
#   STATIC_LIB: the build's libattn.a; CORE_LIB: the build's libattn_core.a
set -eu

meson=$1 build_root=$2 example_dir=$3 prefix=$4 libdir=$5 static_lib=$6 core_lib=$7

for tool in cc pkg-config ar ldd; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipping: $tool not found"
        exit 77
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/libattn-static.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

stage=$tmp/root
"$meson" install -C "$build_root" --no-rebuild --quiet --destdir "$stage"
case $libdir in
/*) staged_libdir=$stage$libdir ;;
*) staged_libdir=$stage$prefix/$libdir ;;
esac

archive=$staged_libdir/libattn.a
if [ ! -f "$archive" ]; then
    # -Ddefault_library=shared installs no libattn.a; put the build's copy
    # (a thin archive: its members by path) where =both would install it.
    echo "note: this build installs no libattn.a (default_library=shared); using the build's"
    ar t "$static_lib" >"$tmp/members"
    while IFS= read -r member; do
        ar rc "$archive" "$member"
    done <"$tmp/members"
    ar s "$archive"
fi

# Every object of attn_core, which takes the scalar and every ISA module whole.
ar t "$core_lib" | sed 's|.*/||' | sort >"$tmp/core.list"
ar t "$archive" | sed 's|.*/||' | sort >"$tmp/static.list"
if ! cmp -s "$tmp/core.list" "$tmp/static.list"; then
    echo "FAIL: libattn.a does not hold exactly the objects of attn_core:"
    diff "$tmp/core.list" "$tmp/static.list" || true
    exit 1
fi
echo "libattn.a: $(wc -l <"$tmp/static.list") objects, those of attn_core"

# The README's recipe, word for word (PKG_CONFIG_PATH into the staged prefix,
# which a relocatable attn.pc needs alone; see test-consumers.sh).
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
PKG_CONFIG_PATH=$staged_libdir/pkgconfig
export PKG_CONFIG_PATH
if ! grep -q '^prefix=${pcfiledir}' "$staged_libdir/pkgconfig/attn.pc"; then
    echo "note: attn.pc is not relocatable: staged with PKG_CONFIG_SYSROOT_DIR"
    PKG_CONFIG_SYSROOT_DIR=$stage
    export PKG_CONFIG_SYSROOT_DIR
fi
echo "pkg-config --static --libs attn: $(pkg-config --static --libs attn)"
case $(pkg-config --static --libs attn) in
*-lcpu_features*) ;;
*) echo "FAIL: attn.pc's Libs.private lacks -lcpu_features"; exit 1 ;;
esac
cp "$example_dir/main.c" "$tmp/app.c"
cd "$tmp"
# shellcheck disable=SC2046 # pkg-config's words are the flags
cc -O2 app.c -o app $(pkg-config --cflags attn) -Wl,--as-needed \
    -Wl,-Bstatic -lattn -Wl,-Bdynamic $(pkg-config --static --libs attn)
if ldd ./app | grep libattn >/dev/null; then
    echo "FAIL: the static consumer loads libattn.so:"
    ldd ./app
    exit 1
fi
./app

# The shared library of the same install, for comparison.
# shellcheck disable=SC2046
cc -O2 app.c -o app-shared $(pkg-config --cflags --libs attn) -lm # -lm: main.c's own
# An ISA that is not there falls back to the default: both must agree.
for isa in scalar avx2 avx512 neon sve; do
    static_out=$(ATTN_ISA=$isa ./app) || { echo "FAIL: ATTN_ISA=$isa ./app"; exit 1; }
    shared_out=$(ATTN_ISA=$isa LD_LIBRARY_PATH=$staged_libdir ./app-shared) ||
        { echo "FAIL: ATTN_ISA=$isa ./app-shared"; exit 1; }
    static_isa=$(printf '%s\n' "$static_out" | sed -n 's/.*, ISA //p')
    shared_isa=$(printf '%s\n' "$shared_out" | sed -n 's/.*, ISA //p')
    if [ -z "$static_isa" ] || [ "$static_isa" != "$shared_isa" ]; then
        echo "FAIL: ATTN_ISA=$isa: the static consumer runs '$static_isa', the shared one '$shared_isa'"
        exit 1
    fi
    echo "ATTN_ISA=$isa: $static_isa (static and shared)"
done
# The same through CMake: find_package(attn) gives attn::attn_static with
# the archive's dependencies, which must link without naming any by hand.
if command -v cmake >/dev/null 2>&1; then
    cmake -S "$example_dir/cmake" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$stage$prefix" \
        -Dattn_DIR="$staged_libdir/cmake/attn" -DATTN_DEMO_STATIC=ON >"$tmp/cmake.log" 2>&1 &&
        cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 ||
        { echo "FAIL: CMake's attn::attn_static consumer:"; cat "$tmp/cmake.log"; exit 1; }
    if ldd "$tmp/cmake/attn-demo" | grep libattn >/dev/null; then
        echo "FAIL: the CMake static consumer loads libattn.so"
        exit 1
    fi
    "$tmp/cmake/attn-demo" >/dev/null || { echo "FAIL: the CMake static consumer"; exit 1; }
    echo "CMake attn::attn_static: built, no libattn.so, ran"
else
    echo "note: no cmake: attn::attn_static not tried"
fi
echo "ok: the static consumer built, linked no libattn.so, and ran"

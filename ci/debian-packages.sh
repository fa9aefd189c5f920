#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian packages (debian/) from a clean clone of this
# repository's HEAD, checks them with lintian, installs them, and uses them
# as a new user would: the C consumer through pkg-config and through CMake
# against /usr with no environment variables, libattn.a with the private
# libraries `pkg-config --static` names, the Python module with
# /usr/bin/python3 from outside the source tree, and `attn info`. Then it
# removes the packages again.
#
#   ci/debian-packages.sh      (root, or a user with sudo, on Debian 12)
#
# It installs packages system-wide, so nothing runs it unasked: ./build.sh
# test runs it in CI or with --system. Exit status 0 when every check passes.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo)
log() { printf '== %s\n' "$*"; }

# What dpkg-buildpackage needs beyond the build's own packages (build.sh
# installs those): debian/control's Build-Depends, and lintian.
need=(dpkg-dev debhelper dh-python lintian meson ninja-build pkg-config cmake gcc
      libsleef-dev libcpu-features-dev python3-numpy)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    "${SUDO[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/libattn-deb.XXXXXX")
packages=(libattn1 libattn-dev python3-libattn attn-tools)
cleanup() {
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y -qq \
        "${packages[@]}" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

log "dpkg-buildpackage -us -uc -b in a clean clone of HEAD"
git clone --quiet --no-hardlinks "$repo" "$tmp/libattn"
(cd "$tmp/libattn" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$tmp/build.log" 2>&1) || {
    tail -50 "$tmp/build.log"
    echo "FAIL: dpkg-buildpackage"
    exit 1
}
ls "$tmp"/*.deb

log "lintian (errors fail)"
lintian --allow-root --fail-on error --info "$tmp"/*.changes

log "installing the packages"
debs=()
for p in "${packages[@]}"; do
    debs+=("$tmp/${p}_"*.deb)
done
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${debs[@]}" >/dev/null

# From here on nothing points into the tree or the build: a user's machine.
unset PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR LD_LIBRARY_PATH \
    ATTN_LIBRARY ATTN_BUILD_DIR PYTHONPATH CMAKE_PREFIX_PATH
work=$tmp/user
mkdir "$work"
# the C examples as libattn-dev ships them
shipped=/usr/share/doc/libattn-dev/examples
[ -f "$shipped/c/main.c" ] && [ -f "$shipped/c/cmake/CMakeLists.txt" ] ||
    { echo "FAIL: libattn-dev ships no C examples under $shipped"; exit 1; }
[ -n "$(ls /usr/share/doc/python3-libattn/examples/*.py 2>/dev/null)" ] ||
    { echo "FAIL: python3-libattn ships no examples"; exit 1; }
cp -r "$shipped/c" "$work/c"
cd "$work"

log "pkg-config consumer against /usr"
pc=$(ls /usr/lib/*/pkgconfig/attn.pc)
grep -qx 'prefix=/usr' "$pc" || { echo "FAIL: $pc is not written for /usr:"; cat "$pc"; exit 1; }
pkg-config --cflags --libs attn
make -s -f c/Makefile BUILD="$work" CFLAGS="-O2 -Wall -Wextra -Werror"
# (Debian 12 merges /lib into /usr/lib: ldd may name either)
# grep reads all of ldd's output (-q would exit at the match and, with
# pipefail, fail the pipeline whenever ldd is still writing: SIGPIPE)
ldd ./attn-demo | grep -E '=> (/usr)?/lib/[^ ]*/libattn\.so\.1 ' >/dev/null ||
    { ldd ./attn-demo; exit 1; }
./attn-demo

archive=$(ls /usr/lib/*/libattn.a 2>/dev/null || true)
if [ -n "$archive" ]; then
    # Debian's libsleef-dev has no libsleef.a, so `cc -static` cannot be
    # fully static here: libattn.a goes in whole, what attn.pc's
    # Libs.private names is linked as the system provides it.
    log "static libattn: $archive with pkg-config --static's private libraries"
    # shellcheck disable=SC2046 # pkg-config's words are the flags
    cc -O2 -o attn-demo-static c/main.c $(pkg-config --cflags attn) "$archive" \
        $(pkg-config --static --libs attn | sed 's/-lattn\b//') -lm
    if ldd ./attn-demo-static | grep libattn >/dev/null; then
        echo "FAIL: the static consumer loads libattn.so"
        exit 1
    fi
    ./attn-demo-static
else
    echo "FAIL: libattn-dev ships no static library"
    exit 1
fi

log "CMake consumer (find_package(attn)) against /usr"
cmake -S c/cmake -B cmake-build -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >cmake.log 2>&1 ||
    { cat cmake.log; exit 1; }
cmake --build cmake-build >>cmake.log 2>&1 || { cat cmake.log; exit 1; }
grep -q "attn_DIR:PATH=/usr/lib/" cmake-build/CMakeCache.txt ||
    { grep attn_DIR cmake-build/CMakeCache.txt; exit 1; }
./cmake-build/attn-demo
cmake -S c/cmake -B cmake-static -DATTN_DEMO_STATIC=ON >cmake.log 2>&1 &&
    cmake --build cmake-static >>cmake.log 2>&1 || { cat cmake.log; exit 1; }
if ldd ./cmake-static/attn-demo | grep libattn >/dev/null; then
    echo "FAIL: CMake's attn::attn_static consumer loads libattn.so"
    exit 1
fi
./cmake-static/attn-demo

log "/usr/bin/python3 imports the installed module (from $work)"
/usr/bin/python3 - <<'PY'
import libattn, numpy as np
assert libattn.__file__.startswith("/usr/lib/python3/dist-packages/"), libattn.__file__
q = np.random.default_rng(0).standard_normal((1, 2, 5, 16)).astype(np.float32)
out = libattn.forward(q, q, q, causal=True)
# the first row sees one key: its output is that key's v
assert np.array_equal(out[0, :, 0], q[0, :, 0]), "row 0"
print("libattn", libattn.version(), "from", libattn.__file__, "ISA", libattn.isa_active())
PY

log "attn info"
attn info
man -w attn >/dev/null && man -w libattn >/dev/null && echo "man pages: attn(1), libattn(3)"

log "removing the packages"
cd "$repo"
cleanup
trap - EXIT
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        echo "FAIL: $p still installed"
        exit 1
    fi
done
echo "debian packages: built, lintian-clean, installed, used and removed"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's `meson install` with the default prefix (/usr/local), used as
# the README says, with no environment variables: /usr/bin/python3 imports
# the package from outside the tree and it loads the installed library;
# `cc app.c $(pkg-config --cflags --libs attn)` builds a consumer that runs
# after ldconfig. All of it in a private mount namespace: an empty tmpfs
# over /usr/local and a private ld.so.cache, so the machine's /usr/local and
# /etc/ld.so.cache are never written.
#
#   ci/meson-install.sh [BUILD_DIR]   (root; BUILD_DIR: default build, the
#                                      README's build, already built)
#
# Exit status 0 when every check passes (or, with a note, when this machine
# allows no private mount namespace).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
build=${1:-build}

if [ -z "${ATTN_IN_NAMESPACE:-}" ]; then
    [ -f "$build/build.ninja" ] || { echo "FAIL: $build is not a configured build"; exit 1; }
    if ! unshare -m true 2>/dev/null; then
        echo "skipped: no private mount namespace here (unshare -m needs root)"
        exit 0
    fi
    ATTN_IN_NAMESPACE=1 exec unshare -m --propagation private "$0" "$build"
fi

# Inside the namespace: nothing mounted here outlives this script.
mount -t tmpfs tmpfs /usr/local
tmp=$(mktemp -d "${TMPDIR:-/tmp}/libattn-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log() { printf '== %s\n' "$*"; }

log "meson install -C $build (prefix $(meson introspect "$build" --buildoptions |
    /usr/bin/python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])'))"
meson install -C "$build" --no-rebuild --quiet
# meson 1.0 runs no ldconfig; the README's `ldconfig`, into a private cache
ldconfig -C "$tmp/ld.so.cache"
mount --bind "$tmp/ld.so.cache" /etc/ld.so.cache

unset ATTN_LIBRARY ATTN_BUILD_DIR PYTHONPATH LD_LIBRARY_PATH PKG_CONFIG_PATH \
    PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
cp examples/c/main.c "$tmp/app.c"
cd "$tmp"

log "/usr/bin/python3 -c 'import libattn' (from $tmp)"
/usr/bin/python3 - <<'PY'
import libattn
where, lib = libattn.__file__, libattn.library_path()
print("libattn", libattn.version(), "from", where, "library", lib, "ISA", libattn.isa_active())
assert where.startswith("/usr/local/lib/python3"), where
assert lib.startswith("/usr/local/lib/"), lib
PY

log "cc app.c \$(pkg-config --cflags --libs attn)"
pkg-config --cflags --libs attn
# shellcheck disable=SC2046 # pkg-config's words are the flags
cc -O2 app.c $(pkg-config --cflags --libs attn) -o app -lm # -lm: main.c's own
linked=$(ldd ./app)
grep -q '=> /usr/local/lib/.*libattn\.so\.1 ' <<<"$linked" || { echo "$linked"; exit 1; }
./app

archive=$(ls /usr/local/lib/*/libattn.a /usr/local/lib/libattn.a 2>/dev/null || true)
if [ -n "$archive" ]; then # -Ddefault_library=both or static
    log "the README's static link against $archive"
    # shellcheck disable=SC2046
    cc -O2 app.c -o app-static $(pkg-config --cflags attn) -Wl,--as-needed \
        -Wl,-Bstatic -lattn -Wl,-Bdynamic $(pkg-config --static --libs attn)
    linked=$(ldd ./app-static)
    if grep -q libattn <<<"$linked"; then echo "$linked"; exit 1; fi
    ./app-static >/dev/null
    echo "static consumer: no libattn.so, ran"
fi
cd "$repo"
echo "meson install: the package imports with /usr/bin/python3, the C consumer builds and runs"

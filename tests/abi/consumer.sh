#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds tests/abi/consumer.c exactly as a user would: `meson install` of
# this build into a temporary DESTDIR, then the compiler with nothing but
# `pkg-config --cflags --libs attn` (pointed into that DESTDIR), and runs
# the program against the installed libattn.so.
#
#   consumer.sh BUILD_DIR CONSUMER_C
# Environment: MESON (default: meson), PKG_CONFIG (default: pkg-config),
# CC (default: cc; may hold several words, e.g. "ccache gcc").
# Exit status: 0 pass, 1 fail, 77 skip (no pkg-config), 99 error.
set -u

[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR CONSUMER_C" >&2; exit 99; }
build_dir=$1
source=$2
MESON=${MESON:-meson}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
read -r -a cc <<<"${CC:-cc}"

if ! command -v "$PKG_CONFIG" >/dev/null 2>&1; then
    echo "SKIP: $PKG_CONFIG not found"
    exit 77
fi

destdir=$(mktemp -d)
trap 'rm -rf "$destdir"' EXIT

# Without --no-rebuild: `meson test --suite abi` builds only what its tests
# depend on, and install needs every installed target (a no-op when built).
if ! "$MESON" install -C "$build_dir" --destdir "$destdir" >"$destdir.log" 2>&1; then
    echo "ERROR: meson install --destdir failed:" >&2
    cat "$destdir.log" >&2
    rm -f "$destdir.log"
    exit 99
fi
rm -f "$destdir.log"

pc=$(find "$destdir" -name attn.pc -print -quit)
if [ -z "$pc" ]; then
    echo "FAIL: meson install did not install attn.pc" >&2
    exit 1
fi
if [ ! -f "$(find "$destdir" -name attn.h -print -quit)" ]; then
    echo "FAIL: meson install did not install attn.h" >&2
    exit 1
fi

# PKG_CONFIG_LIBDIR (not _PATH) so no attn.pc installed on the system can
# answer instead; the sysroot prefixes -I/-L with the DESTDIR.
export PKG_CONFIG_LIBDIR=$(dirname "$pc")
unset PKG_CONFIG_PATH
export PKG_CONFIG_SYSROOT_DIR=$destdir
if ! flags=$("$PKG_CONFIG" --cflags --libs attn); then
    echo "FAIL: pkg-config --cflags --libs attn failed" >&2
    exit 1
fi
echo "pkg-config --cflags --libs attn: $flags"
case " $flags " in
    *" -L$destdir/"*) ;;
    *) echo "FAIL: the flags do not point into the installed tree ($destdir)" >&2; exit 1 ;;
esac

# Word splitting of $flags is intended: it is a list of compiler arguments.
# shellcheck disable=SC2086
if ! "${cc[@]}" -Wall -Wextra -Werror -o "$destdir/consumer" "$source" $flags -lm; then
    echo "FAIL: the consumer does not build with the installed header and pkg-config flags" >&2
    exit 1
fi

libdir=$(dirname "$(find "$destdir" -name 'libattn.so.*' -print -quit)")
export LD_LIBRARY_PATH=$libdir
# It must load the installed copy, not the one in the build tree.
if command -v ldd >/dev/null 2>&1; then
    resolved=$(ldd "$destdir/consumer" | awk '/libattn\.so/ { print $3 }')
    case "$resolved" in
        "$destdir"/*) echo "loads $resolved" ;;
        *) echo "FAIL: the consumer loads libattn from '$resolved', not from $libdir" >&2
           exit 1 ;;
    esac
fi
"$destdir/consumer"

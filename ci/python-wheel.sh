#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Python wheel as a user builds and installs it: `python3 -m build
# --wheel --no-isolation` from this tree (pyproject.toml, meson-python), the
# wheel installed with pip into a fresh venv (--system-site-packages, for
# NumPy and pytest) without network, then, from outside the tree and with no
# ATTN_LIBRARY, ATTN_BUILD_DIR or PYTHONPATH: the venv's package must load
# the library inside it, the binding's pytest suite runs against that
# installed copy, and two examples run with the venv's python
# (gpt_oss_sinks.py, and train_gpt.py for 10 steps with --check).
#
#   ci/python-wheel.sh      (Debian 12: python3-build, python3-mesonpy,
#                            python3-venv, python3-pip, patchelf; build.sh
#                            installs them)
#
# Exit status 0 when the wheel builds, installs and passes.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
python=/usr/bin/python3
log() { printf '== %s\n' "$*"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/libattn-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

log "python3 -m build --wheel --no-isolation"
if ! "$python" -m build --wheel --no-isolation --outdir "$tmp/dist" . >"$tmp/build.log" 2>&1; then
    tail -40 "$tmp/build.log"
    echo "FAIL: the wheel does not build"
    exit 1
fi
wheel=$(ls "$tmp"/dist/libattn-*.whl)
echo "$wheel"
# The wheel carries the library, and nothing meant for a C prefix.
"$python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
libs = [n for n in names if n.startswith("libattn/libattn.so.")]
assert libs, "no libattn/libattn.so.* in the wheel: %s" % names
stray = [n for n in names if not n.startswith(("libattn/", "libattn-"))]
assert not stray, "files outside the package: %s" % stray
print("wheel holds %s and %d other files" % (", ".join(libs), len(names) - len(libs)))
PY

log "pip install into a fresh venv (--system-site-packages, no network)"
"$python" -m venv --system-site-packages "$tmp/venv"
venv_python=$tmp/venv/bin/python
"$venv_python" -m pip install --quiet --no-index --no-deps --disable-pip-version-check "$wheel"

# From here on nothing points into the tree: a user's shell.
unset ATTN_LIBRARY ATTN_BUILD_DIR PYTHONPATH LD_LIBRARY_PATH
cd "$tmp"
site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
package=$site/libattn

log "the venv's libattn loads the library inside the wheel"
found=$("$venv_python" -c 'import libattn; print(libattn.__file__); print(libattn.library_path()); print(libattn.version(), libattn.isa_active())')
echo "$found"
file=$(sed -n 1p <<<"$found")
library=$(sed -n 2p <<<"$found")
case $file in
"$package"/*) ;;
*) echo "FAIL: imported $file, not the venv's copy under $package"; exit 1 ;;
esac
case $library in
"$package"/libattn.so.*) ;;
*) echo "FAIL: loaded $library, not the library inside the package ($package)"; exit 1 ;;
esac

log "pytest against the installed wheel"
ATTN_EXPECT_PACKAGE_DIR=$package "$venv_python" -m pytest -q -p no:cacheprovider \
    "$repo/python/tests"

log "the examples with the venv's python (the wheel's library)"
MPLBACKEND=Agg "$venv_python" "$repo/examples/gpt_oss_sinks.py" --len 256 --layers 2
MPLBACKEND=Agg "$venv_python" "$repo/examples/train_gpt.py" --steps 10 --check

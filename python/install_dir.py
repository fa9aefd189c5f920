# SPDX-License-Identifier: MIT
"""Where `meson install` puts the libattn package (python/meson.build runs this
with the interpreter meson found).

usage: install_dir.py PREFIX MESON_DIR

MESON_DIR is meson's python.get_install_dir(). Prints it when this
interpreter imports from it (or when it lies outside PREFIX); else the first
directory this interpreter imports from that lies under PREFIX; else
MESON_DIR. On Debian, meson says <prefix>/lib/python3/dist-packages for every
prefix, which python3 reads for /usr only: for /usr/local this prints
/usr/local/lib/python3.X/dist-packages. A prefix the interpreter does not
know (/opt/x) keeps MESON_DIR: PYTHONPATH or -Dpython_install_dir then.
"""

import os
import site
import sys


def under(path, prefix):
    try:
        return os.path.commonpath([path, prefix]) == prefix
    except ValueError:  # different drives
        return False


def main(prefix, meson_dir):
    prefix = os.path.normpath(prefix)
    wanted = os.path.normpath(meson_dir)
    read = []
    try:
        read += site.getsitepackages()  # those that do not exist yet, too
    except AttributeError:  # old virtualenv's site.py
        pass
    if site.ENABLE_USER_SITE:
        read.append(site.getusersitepackages())
    read += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    read = [os.path.normpath(p) for p in read if p]
    if wanted in read or not under(wanted, prefix):
        return meson_dir
    for path in read:
        if under(path, prefix):
            return path
    return meson_dir


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(main(sys.argv[1], sys.argv[2]))

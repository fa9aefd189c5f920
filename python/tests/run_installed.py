# SPDX-License-Identifier: MIT
"""Install the current build into a temporary DESTDIR and test that copy.

1. `meson install --destdir TMP` (no rebuild: meson test already built it).
   The package's directory must be one this interpreter imports from when
   it imports from any directory of the prefix (python/install_dir.py).
2. With ATTN_LIBRARY unset, the installed package must find the installed
   library by itself (through its generated _config.py, relocated to TMP).
3. The pytest suite runs against the installed package and library only.
"""

import argparse
import os
import site
import subprocess
import sys
import tempfile


def staged(destdir, path):
    return os.path.join(destdir, os.path.relpath(path, os.sep)) if os.path.isabs(path) \
        else os.path.join(destdir, path)


def imported_dirs():
    """The site directories this interpreter reads, whether they exist yet or not."""
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [os.path.normpath(d) for d in dirs if d]


def under(path, prefix):
    return os.path.commonpath([path, prefix]) == prefix


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meson", required=True)
    ap.add_argument("--build-root", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--libdir", required=True)
    ap.add_argument("--python-dir", required=True)
    ap.add_argument("--library-name", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--python-dir-set", action="store_true",
                    help="-Dpython_install_dir chose --python-dir: do not second-guess it")
    args = ap.parse_args()

    try:
        import numpy  # noqa: F401
        import pytest  # noqa: F401
    except ImportError as err:
        print("skipping: %s" % err)
        return 77

    # `meson install` puts the package where this Python imports from
    # (Debian: /usr/local/lib/python3.X/dist-packages for /usr/local).
    prefix = os.path.normpath(args.prefix)
    python_dir = os.path.normpath(args.python_dir)
    read = imported_dirs()
    read_in_prefix = [d for d in read if under(d, prefix)]
    if read_in_prefix and python_dir not in read and not args.python_dir_set:
        print("FAIL: the package goes to %s, which %s does not import from; under %s it "
              "imports from %s" % (python_dir, sys.executable, prefix, ", ".join(read_in_prefix)))
        return 1
    print("package directory: %s (%s)" % (python_dir, "imported by %s" % sys.executable
                                          if python_dir in read else "not a site directory "
                                          "of %s: PYTHONPATH" % sys.executable))

    with tempfile.TemporaryDirectory(prefix="libattn-install-") as destdir:
        subprocess.run([args.meson, "install", "-C", args.build_root, "--no-rebuild",
                        "--quiet", "--destdir", destdir], check=True)
        site = staged(destdir, args.python_dir)
        libdir = args.libdir if os.path.isabs(args.libdir) else os.path.join(args.prefix,
                                                                              args.libdir)
        library = os.path.join(staged(destdir, libdir), args.library_name)
        package = os.path.join(site, "libattn")
        for path in (package, os.path.join(package, "_config.py"), library):
            if not os.path.exists(path):
                print("not installed: %s" % path)
                return 1

        env = dict(os.environ)
        env.pop("ATTN_LIBRARY", None)
        env.pop("ATTN_BUILD_DIR", None)
        env["PYTHONPATH"] = site
        found = subprocess.run(
            [sys.executable, "-c",
             "import libattn; print(libattn.__file__); print(libattn.library_path())"],
            env=env, check=True, stdout=subprocess.PIPE, universal_newlines=True,
            cwd=destdir).stdout.split("\n")
        print("installed package: %s\nlibrary it found: %s" % (found[0], found[1]))
        if not found[0].startswith(package + os.sep):
            print("FAIL: imported libattn from %s, not the installed copy" % found[0])
            return 1
        if os.path.realpath(found[1]) != os.path.realpath(library):
            print("FAIL: the installed package loaded %s, expected %s" % (found[1], library))
            return 1

        env["ATTN_LIBRARY"] = library
        env["ATTN_EXPECT_PACKAGE_DIR"] = package
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               args.tests], env=env, cwd=destdir).returncode


if __name__ == "__main__":
    sys.exit(main())

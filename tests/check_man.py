#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The functions' manual pages: one per exported symbol, each renders cleanly.

    check_man.py SOURCE_ROOT

Runs `tools/gen_man.py funcs` on include/attn.h (with src/libattn.map, as
the build does) into a temporary folder and checks that it writes exactly
one page per symbol of the map, each naming its function in NAME and in
the SYNOPSIS prototype, and that man (`man --warnings -l`) renders each
without a warning, or groff (`groff -man -ww`) where man is not installed.
Then that the generator refuses a header with a function that has no doc
comment: a non-zero exit whose message names the function. Exits 77
(skipped) with neither man nor groff. Standard library only.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

ENV = {"LC_ALL": "C.UTF-8", "MANWIDTH": "80", "PATH": "/usr/bin:/bin"}


def renderer():
    if shutil.which("man", path=ENV["PATH"]):
        return ["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z"]
    if shutil.which("groff", path=ENV["PATH"]):
        return ["groff", "-k", "-man", "-Tutf8", "-ww", "-z"]
    return None


def generate(root, header, outdir, *extra):
    return subprocess.run([sys.executable, os.path.join(root, "tools", "gen_man.py"), "funcs",
                           header, "0.0.0", outdir, *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)


def main(root):
    render = renderer()
    if not render:
        print("skipping: neither man nor groff is installed")
        return 77
    sys.path.insert(0, os.path.join(root, "tools"))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    import gen_man  # noqa: E402 (its map reader: the one the build's output list follows)
    symbols = gen_man.map_symbols(os.path.join(root, "src", "libattn.map"))
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        r = generate(root, os.path.join(root, "include", "attn.h"), tmp,
                     os.path.join(root, "src", "libattn.map"))
        if r.returncode:
            print("FAIL: gen_man.py funcs exited %d:\n%s" % (r.returncode, r.stdout))
            return 1
        pages = sorted(f[:-2] for f in os.listdir(tmp) if f.endswith(".3"))
        if pages != sorted(symbols) or len(os.listdir(tmp)) != len(pages):
            failures.append("pages %s are not the map's symbols %s"
                            % (sorted(os.listdir(tmp)), sorted(symbols)))
        for name in sorted(set(pages) & set(symbols)):
            path = os.path.join(tmp, name + ".3")
            text = open(path, encoding="utf-8").read().replace("\\-", "-")
            named = re.search(r"^\.SH NAME\n%s - \S" % re.escape(name), text, re.M)
            synopsis = text.split(".SH SYNOPSIS\n", 1)[-1].split(".SH DESCRIPTION", 1)[0]
            if not named or not re.search(r"\b%s\(" % re.escape(name), synopsis):
                failures.append("%s.3: NAME or SYNOPSIS does not name %s" % (name, name))
            r = subprocess.run(render + [path], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, universal_newlines=True,
                               check=False, env=ENV)
            if r.returncode or r.stderr.strip():
                failures.append("%s.3: %s: %s" % (name, render[0], r.stderr.strip()))
        # An undocumented function among documented ones is refused.
        bad = os.path.join(tmp, "bad.h")
        with open(bad, "w", encoding="utf-8") as f:
            f.write("/* Documented. */\nATTN_API int attn_good(void);\n\n"
                    "/* ---------------------------------------------------------------- x */\n"
                    "typedef struct attn_y { int a; } attn_y;\n"
                    "ATTN_API int attn_undocumented(int a,\n"
                    "                               int b);\n")
        os.mkdir(os.path.join(tmp, "bad"))
        r = generate(root, bad, os.path.join(tmp, "bad"))
        if r.returncode == 0 or "attn_undocumented" not in r.stdout or "attn_good" in r.stdout:
            failures.append("gen_man.py accepted (or misreported) an undocumented function:"
                            " exit %d, %r" % (r.returncode, r.stdout))
    for f in failures:
        print("FAIL " + f)
    if not failures:
        print("%d function pages, one per exported symbol, render without warnings (%s)"
              % (len(symbols), render[0]))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))

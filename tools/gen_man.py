#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The two manual pages, generated from what the sources already say.

    gen_man.py lib  include/attn.h VERSION OUT   libattn(3): the header itself
    gen_man.py cli  path/to/attn   VERSION OUT   attn(1): the tool's own --help
    gen_man.py test LIB3 attn.h CLI1 attn [COMP] the 'man-pages' test (CLI1 '-': none)

libattn(3) is attn.h read top to bottom: each comment block becomes text
(kept as laid out: the header aligns its tables and formulas), each
declaration code, the banner comments ("---- dispatch") section headings,
and the SYNOPSIS lists every ATTN_API prototype. attn(1) is `attn --help`
followed by `attn <command> --help` for every command that help lists. So a
page cannot say something the header or the tool does not; the 'man-pages'
test renders both with man's warnings on and checks that every exported
function, every command and every option of a command (--json among them,
with the JSON section of run's and bench's help) is there. The bash
completion is the tool's own (`attn completion bash`, from its option
table); the test checks that it offers the commands and options the help
lists (tools/cli_test.py checks the values). Standard library only.
"""

import re
import subprocess
import sys


def esc(line):
    """A line of text as roff: backslashes escaped, no control character first."""
    line = line.replace("\\", "\\e")
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def block(lines):
    """Lines shown as they are (no filling, no hyphenation)."""
    out = [".PP", ".nf"]
    out += [esc(line) if line.strip() else "" for line in lines]
    out += [".fi"]
    return out


def header(name, section, version, title):
    return ['.TH %s %s "" "libattn %s" "%s"' % (name.upper(), section, version, title)]


def comment_text(raw):
    """The text of a /* ... */ block: the leading ' * ' of each line removed."""
    body = raw[2:-2]
    lines = body.split("\n")
    out = []
    for line in lines:
        s = line.strip()
        if s.startswith("* "):
            out.append(line.split("* ", 1)[1].rstrip())
        elif s == "*":
            out.append("")
        else:
            out.append(s)
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


BANNER = re.compile(r"^/\* -{8,} ([a-z ]+) \*/$")


def lib_page(path, version):
    src = open(path, encoding="utf-8").read()
    protos = []  # as the header lays them out, less "ATTN_API " (9 columns)
    for m in re.finditer(r"^ATTN_API [^;]*;", src, re.M):
        lines = m.group(0)[len("ATTN_API "):].split("\n")
        protos += [lines[0]] + [line[9:] if line.startswith(" " * 9) else line
                                for line in lines[1:]]
    page = header("libattn", 3, version, "Library Functions Manual")
    page += [".SH NAME", "libattn \\- transformer attention on CPUs (scores, masks, softmax,"
             " fused forward and backward)"]
    page += [".SH SYNOPSIS", ".nf", "#include <attn.h>", "",
             "cc app.c $(pkg-config \\-\\-cflags \\-\\-libs attn)", ""]
    page += [esc(p) for p in protos]
    page += [".fi", ".SH DESCRIPTION",
             "The text below is the public header,",
             ".IR attn.h ,",
             "in order: its comments are the contract of every type and function."]
    # Walk the header: comments, banners, declarations; preprocessor lines
    # other than #define of public constants are skipped.
    pos, code = 0, []

    def flush_code():
        while code and not code[-1].strip():
            code.pop()
        if code:
            page.extend(block(code))
        code.clear()

    for m in re.finditer(r"/\*.*?\*/", src, re.S):
        between = src[pos:m.start()]
        pos = m.end()
        for line in between.split("\n"):
            s = line.rstrip()
            if s.startswith("#") and (not s.startswith("#define ATTN_") or s == "#define ATTN_H"
                                      or s.startswith("#define ATTN_API")):
                continue
            if s in ('extern "C" {', "}") or s.startswith("ATTN_API_EXTERN"):
                continue
            if s.strip() or code:
                code.append(s)
        raw = m.group(0)
        if BANNER.match(raw):
            flush_code()
            page += [".SH " + BANNER.match(raw).group(1).upper()]
            continue
        line_start = src.rfind("\n", 0, m.start()) + 1
        if src[line_start:m.start()].strip():
            # a trailing comment of a declaration line: keep it with the code
            if code:
                code[-1] = code[-1] + " " + " ".join(raw.split())
            continue
        flush_code()
        page += block(comment_text(raw))
    flush_code()
    page += [".SH SEE ALSO", ".BR attn (1)"]
    return page


def run(exe, *args):
    r = subprocess.run([exe, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       check=False, universal_newlines=True)
    return r.stdout.rstrip("\n").split("\n")


def cli_page(exe, version):
    top = run(exe, "--help")
    commands, _ = commands_of(exe)
    page = header("attn", 1, version, "User Commands")
    page += [".SH NAME", "attn \\- the libattn command-line tool (CPU and library info,"
             " timed and verified attention runs)"]
    page += [".SH SYNOPSIS", ".B attn", ".I command", ".RI [ options ]", ".br",
             ".B attn", "\\-\\-help | \\-\\-version"]
    page += [".SH DESCRIPTION", "What", ".B attn \\-\\-help", "prints:"]
    page += block(top)
    page += [".SH COMMANDS"]
    for c in commands:
        if c == "help":
            continue
        page += [".SS attn %s" % c]
        page += block(run(exe, c, "--help"))
    page += [".SH VERSION"]
    page += block(run(exe, "--version"))
    page += [".SH SEE ALSO", ".BR libattn (3)"]
    return page


def commands_of(exe):
    """The commands `attn --help` lists, and each one's --options."""
    commands, listing = [], False
    for line in run(exe, "--help"):
        if line.startswith("Commands:"):
            listing = True
            continue
        if listing:
            m = re.match(r"^  ([a-z][a-z-]*)\s", line)
            if m:
                commands.append(m.group(1))
            elif line and not line.startswith(" "):
                listing = False
    options = {}
    for c in commands:
        if c != "help":
            options[c] = sorted({m.group(1) for line in run(exe, c, "--help")
                                 for m in [re.match(r"^  (--[a-z0-9-]+)", line)] if m})
    return commands, options


def completes(script, exe):
    """The completion script offers what the tool's help lists."""
    commands, options = commands_of(exe)
    cases = [("attn r", "run")] + [("attn %s --%s" % (c, opts[0][2:4]), opts[0])
                                   for c, opts in options.items() if opts]
    ok = True
    for line, want in cases:
        words = line.split(" ")
        prog = ". %s; COMP_WORDS=(%s); COMP_CWORD=%d; _attn; printf '%%s\\n' \"${COMPREPLY[@]}\"" % (
            script, " ".join("'%s'" % w for w in words), len(words) - 1)
        r = subprocess.run(["bash", "-c", prog], stdout=subprocess.PIPE,
                           universal_newlines=True, check=False)
        if want not in r.stdout.split():
            print("FAIL %s: '%s<TAB>' does not offer %s (got %r)" % (script, line, want,
                                                                    r.stdout.split()))
            ok = False
    if ok:
        print("%s: completes %d commands and their options" % (script, len(commands)))
    return ok


def has_all(page_path, names):
    text = open(page_path, encoding="utf-8").read().replace("\\-", "-").replace("\\e", "\\")
    missing = [n for n in names if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(n), text)]
    if missing:
        print("FAIL %s: missing %s" % (page_path, ", ".join(missing)))
        return False
    print("%s: all %d names present" % (page_path, len(names)))
    return True


def renders(page_path):
    """man's own check (as lintian runs it): no warning from groff."""
    r = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", page_path],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False,
                       env={"LC_ALL": "C.UTF-8", "MANWIDTH": "80", "PATH": "/usr/bin:/bin"})
    if r.returncode or r.stderr.strip():
        print("FAIL %s: man --warnings: %s" % (page_path, r.stderr.strip()))
        return False
    print("%s: renders without warnings" % page_path)
    return True


def test(page3, header_path, page1, exe, script=None):
    """The 'man-pages' test: both pages render cleanly and name everything,
    and the completion script (when given) completes what the tool lists."""
    if subprocess.run(["sh", "-c", "command -v man"], stdout=subprocess.DEVNULL,
                      check=False).returncode:
        print("skipping: man (man-db) is not installed")
        return 77
    functions = re.findall(r"^ATTN_API [^;(]*?\b(attn_\w+)\(",
                           open(header_path, encoding="utf-8").read(), re.M)
    ok = renders(page3) and has_all(page3, functions)
    if page1 != "-":
        commands = [line.split()[0] for line in run(exe, "--help")
                    if re.match(r"^  [a-z]+ ", line)]
        _, options = commands_of(exe)
        names = ["attn " + c for c in commands if c != "help"]
        names += sorted({o for opts in options.values() for o in opts})
        ok = renders(page1) and has_all(page1, names) and ok
    if script:
        ok = completes(script, exe) and ok
    return 0 if ok else 1


def main(argv):
    if len(argv) in (6, 7) and argv[1] == "test":
        return test(*argv[2:])
    if len(argv) != 5 or argv[1] not in ("lib", "cli"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    page = (lib_page if argv[1] == "lib" else cli_page)(argv[2], argv[3])
    with open(argv[4], "w", encoding="utf-8") as f:
        f.write("\n".join(page) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The manual pages, generated from what the sources already say.

    gen_man.py lib  include/attn.h VERSION OUT   libattn(3): the header itself
    gen_man.py funcs include/attn.h VERSION DIR [MAP]  DIR/attn_*.3, a page per function
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
lists (tools/cli_test.py checks the values).

A function's own page (`man attn_forward`) is its declaration and the
comment right above it in attn.h: NAME is the function and the comment's
first sentence, SYNOPSIS the prototype as the header lays it out, and
DESCRIPTION the comment, prose filled and indented lines (formulas, tables,
code) kept as they are. Functions declared together under one comment
share it and name each other in SEE ALSO. A function without such a
comment is an error, and so (given MAP, src/libattn.map) is a header whose
functions are not exactly the exported symbols: the build installs one page
per symbol of the map. tests/check_man.py checks the pages. Standard
library only.
"""

import os
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


def roff(line):
    """esc(), and '-' as the minus/hyphen-minus '\\-': names and code are copied."""
    return esc(line).replace("-", "\\-")


def declarations(path):
    """The ATTN_API functions of the header, in order, as
    (name, prototype lines, doc lines or None, line number).

    A function's doc comment is the last comment block before it, provided
    only blank lines, other ATTN_API declarations (a group under one comment)
    and opaque typedefs (`typedef struct attn_plan attn_plan;`) come between;
    a banner, a type definition or a preprocessor line ends a comment's
    reach. A comment on the declaration's own line stays with the prototype.
    """
    src = open(path, encoding="utf-8").read()
    out, doc, last_decl = [], None, None
    i = 0
    while i < len(src):
        c = src[i]
        if c in " \t\n":
            i += 1
            continue
        line_start = src.rfind("\n", 0, i) + 1
        if src.startswith("/*", i):
            end = src.index("*/", i) + 2
            raw = src[i:end]
            if src[line_start:i].strip():
                # trailing: a declaration's keeps it in its prototype
                if last_decl is not None and last_decl[1] == line_start:
                    last_decl[0][-1] += " " + " ".join(raw.split())
            else:
                doc = None if BANNER.match(raw) else comment_text(raw)
                last_decl = None
            i = end
            continue
        if i == line_start and re.match(r"ATTN_API\s", src[i:i + 9]):
            end = src.index(";", i) + 1
            lines = src[i + len("ATTN_API "):end].split("\n")
            # continuation lines are aligned under the ATTN_API line's "("
            proto = [lines[0]] + [line[9:] if line.startswith(" " * 9) else line
                                  for line in lines[1:]]
            name = re.match(r"[^(]*?\b(attn_\w+)\s*\(", lines[0])
            if not name:
                raise SystemExit("gen_man.py: %s:%d: no function name in %r"
                                 % (path, src.count("\n", 0, i) + 1, lines[0]))
            out.append((name.group(1), proto, doc, src.count("\n", 0, i) + 1))
            last_decl = (proto, src.rfind("\n", 0, end) + 1)
            i = end
            continue
        # anything else, to the end of its line (or to a comment on it)
        eol = src.find("\n", i)
        eol = len(src) if eol < 0 else eol
        while src[i:eol].rstrip().endswith("\\") and eol < len(src):  # #define ... \
            nxt = src.find("\n", eol + 1)
            eol = len(src) if nxt < 0 else nxt
        com = src.find("/*", i, eol)
        end = eol if com < 0 else com
        if not re.match(r"typedef struct (\w+) \1;$", src[i:end].strip()):
            doc = None
        last_decl = None
        i = end
    return out


def first_sentence(doc):
    """The comment's first sentence: the text up to the first '.' that ends
    one (not "e.g.", "i.e." or a dot standing alone, as in "softmax(S) . V"),
    within its first paragraph of flush-left prose."""
    words = []
    for line in doc:
        if not line.strip() or (words and line[0] == " "):
            break
        words.append(line.strip())
    text = " ".join(words) or doc[0].strip()
    for m in re.finditer(r"\.(?=\s|$)", text):
        before = text[:m.start()]
        if before and not before[-1].isspace() and not re.search(r"\b(e\.g|i\.e)$", before):
            return text[:m.end()]
    return text.rstrip(":")


def description(doc):
    """The comment as man text: paragraphs at blank lines, flush-left prose
    filled, indented lines (formulas, tables, code) kept as laid out."""
    out, nofill = [], False
    for n, line in enumerate(doc):
        if not line.strip():
            if nofill:
                out.append(".fi")
                nofill = False
            if out and out[-1] != ".PP":
                out.append(".PP")
            continue
        if line[0] == " ":
            if not nofill:
                out.append(".nf")
                nofill = True
            out.append(roff(line.rstrip()))
        else:
            if nofill:
                out.append(".fi")
                nofill = False
            out.append(roff(line.strip()))
    if nofill:
        out.append(".fi")
    return out


def func_pages(path, version):
    """{name: page lines} for every ATTN_API function, or SystemExit naming
    each one without a doc comment."""
    decls = declarations(path)
    missing = ["%s:%d: %s has no doc comment" % (path, line, name)
               for name, _, doc, line in decls if not doc]
    if missing:
        raise SystemExit("gen_man.py: every ATTN_API function needs the comment its manual"
                         " page is made of, right above its declaration (or its group's):\n  "
                         + "\n  ".join(missing))
    names = [d[0] for d in decls]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SystemExit("gen_man.py: %s: declared twice: %s" % (path, ", ".join(dup)))
    pages = {}
    for name, proto, doc, _ in decls:
        group = [d[0] for d in decls if d[2] is doc and d[0] != name]
        page = header(name, 3, version, "Library Functions Manual")
        # no hyphenation, ragged right: the text is full of identifiers and paths
        page += [".nh", ".ad l"]
        page += [".SH NAME", "%s \\- %s" % (roff(name), roff(first_sentence(doc)))]
        page += [".SH SYNOPSIS", ".nf", ".B #include <attn.h>", ".PP"]
        page += [roff(line.rstrip()) for line in proto]
        page += [".fi", ".PP", "cc app.c $(pkg\\-config \\-\\-cflags \\-\\-libs attn)"]
        page += [".SH DESCRIPTION"] + description(doc)
        if proto[0].startswith("attn_status "):
            page += [".SH RETURN VALUE", ".B ATTN_OK", "(0) on success, else an",
                     ".B ATTN_ERR_*", "code of", ".BR attn_status ,",
                     "each described in", ".BR libattn (3);",
                     ".BR attn_strerror (3)", "gives a code's sentence and",
                     ".BR attn_last_error (3)", "what the failing call found."]
        page += [".SH NOTES", "This page is the comment on this declaration in",
                 ".IR attn.h .",
                 "The rules it refers to elsewhere in the header and those every",
                 "function follows (shapes, masks, errors, aliasing) are in",
                 ".BR libattn (3)."]
        see = ["libattn"] + group
        page += [".SH SEE ALSO"]
        page += [".BR %s (3)%s" % (roff(n), "," if k + 1 < len(see) else "")
                 for k, n in enumerate(see)]
        pages[name] = page
    return pages


def map_symbols(path):
    """The exported names of a linker version script (src/libattn.map)."""
    text = re.sub(r"/\*.*?\*/", "", open(path, encoding="utf-8").read(), flags=re.S)
    return [m.group(1) for m in re.finditer(r"^\s*(attn_\w+)\s*;", text, re.M)]


def write_func_pages(path, version, outdir, map_path=None):
    pages = func_pages(path, version)
    if map_path:
        exported = map_symbols(map_path)
        extra = sorted(set(pages) - set(exported))
        absent = sorted(set(exported) - set(pages))
        if extra or absent:
            raise SystemExit("gen_man.py: the ATTN_API functions of %s are not the symbols of"
                             " %s (the pages the build installs):%s%s" % (
                                 path, map_path,
                                 "\n  not exported: " + ", ".join(extra) if extra else "",
                                 "\n  not declared: " + ", ".join(absent) if absent else ""))
    for name, page in pages.items():
        with open(os.path.join(outdir, name + ".3"), "w", encoding="utf-8") as f:
            f.write("\n".join(page) + "\n")
    return 0


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
    if len(argv) in (5, 6) and argv[1] == "funcs":
        return write_func_pages(*argv[2:])
    if len(argv) != 5 or argv[1] not in ("lib", "cli"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    page = (lib_page if argv[1] == "lib" else cli_page)(argv[2], argv[3])
    with open(argv[4], "w", encoding="utf-8") as f:
        f.write("\n".join(page) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

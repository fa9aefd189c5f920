#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""True text: comments and docs name only paths, ISAs and sections that exist.

Why: a comment that names a moved file or a retired ISA misleads the next
reader more than no comment (issue 22 found 8 of 15 sampled comments
false). This catches the mechanical part: names that do not resolve.

Scans the text files git knows (tracked, or untracked and not ignored; a
walk of the tree when there is no git checkout) under src/ include/ problems/ tools/ tests/ bench/ python/ docs/
examples/ ci/ abi/ cmake/ and README.md, build.sh, meson.build,
meson_options.txt, code and comments alike. Skipped: the fuzz corpora
(tests/fuzz/corpus/), the generated ABI baseline (*.abi), images, and any
file that is not UTF-8 text. Prints file:line: message for each finding and
exits 1 when there is one.

Rules:
 1. Repository paths. A token that starts with a top-level folder
    (src/ include/ problems/ tools/ tests/ bench/ python/ docs/ examples/ ci/ abi/
    cmake/), optionally after "./", and whose last part has a file
    extension or that ends in "/", must exist relative to the repository
    root (or to the file's own folder: meson's files() paths). Tokens that continue another path (after "/", ".", a letter or a
    digit: build/src/..., ../include/...) are not repository paths and are
    skipped, and so are templates and globs (tokens with < > * { } $ @:
    src/<arch>/<isa>.h, src/*/quant_*.c). Extensionless names are not
    checked: tools/attn and tests/baseline/attn-baseline-smoke are build
    outputs. Trailing sentence punctuation is dropped.
 2. ISA names. The registry is the X(ID, name, ...) rows of ATTN_ISA_LIST
    in src/isa_list.h. These must use a registry name (or ID):
      attn_dsp_init_[tiles_|tile_|merge_|backward_|quant_]<isa>
      attn_<slot>_<dtype>_<isa>   slot: a field of struct attn_dsp
                                  (src/dsp.h), dtype: f32 f16 bf16 q8_0
                                  q4_0 fp8
      <kind>_<x>.c                kind: tile row alibi merge backward
                                  quant kernels baseline fma_peak; unless
                                  a file of that name is in the tree, <x>
                                  must be an ISA and the file must exist
      <anything>_<isa>.c          a file of that name is in the tree
      ATTN_ISA_<ID>               or a name #defined / enumerated in src/,
                                  include/ or tests/ (ATTN_ISA_COUNT, ...)
      ATTN_CPU_<BIT>              a bit #defined in src/dsp.h
      HAVE_<ID>                   the `have` macro of a registry row
      ATTN_ISA=<name>             a registry name or auto
    An _emu suffix after the ISA is allowed: the AVX-512 sources built
    against SIMDe (src/x86/avx512.h, tests/emu/) rename their symbols so.
    A template (followed by < or ##, or ending in _) is skipped. CPU
    feature and compiler names (AVX512_BF16, -mavx512f, __ARM_FEATURE_SVE,
    "AVX-512 F + BW") are not ISA table names and are not checked.
 3. Section references. "docs/<doc>.md §<n>" or "docs/<doc>.md, section
    <n>" must name a numbered heading of that file, and 'docs/<doc>.md,
    "<Title>"' or 'README, "<Title>"' the start of one of its headings (a
    reference may wrap onto the next comment line).
 4. The operation list. Each X(ID, name, "test") line of ATTN_OP_LIST in
    tests/ops_list.h names a module, src/driver/<name>.c, that defines
    attn_<name>_with or attn_<name> (attn_quantize takes no kernel table),
    and a test file that exists and calls attn_<name> (or its _with twin);
    every file of src/driver/ that defines an attn_<x>_with has a line.
    So an operation cannot be added without its line, its module and its
    test.
 5. The examples' index. Every file under examples/ (but meson.build
    files) is named, in backquotes and relative to examples/, in
    examples/README.md.
 6. Licence headers. Every source file (C, Python, shell, meson, CMake,
    the linker map, debian/rules) says "SPDX-License-Identifier: MIT" in
    its first three lines.
 7. The documentation's links and commands, in README.md and docs/**/*.md:
    every Markdown link [text](target) that is not a URL resolves, relative
    to the file, to a path that exists, and its #anchor, if any, to a
    heading of the target Markdown file (GitHub's slugs); an extensionless
    docs/... path exists too; in code (`spans` and fenced blocks) every
    `./build.sh <command>` names a label of build.sh's last `case` (its
    commands; -j N before it is skipped) and every `attn <command>` an entry
    of cli_commands in tools/main.c. README.md has at most 250 lines: it
    is the front door, the rest lives in the guides (docs/README.md).
A file the text tells the reader to create is named as a template
(abi/libattn.so.<major>.abi) or without its folder, so rule 1 passes it.

Usage: check_text.py [REPO_ROOT]   (default: the parent of this file's folder)
"""
import os
import re
import subprocess
import sys

ROOTS = ("src", "include", "problems", "tools", "tests", "bench", "python", "docs",
         "examples", "ci", "abi", "cmake")
TOP_FILES = ("README.md", "build.sh", "meson.build", "meson_options.txt")
SKIP_DIRS = ("tests/fuzz/corpus/",)
SKIP_EXT = (".abi", ".png", ".jpg", ".svg", ".pdf", ".gz", ".bin")

PATH_RE = re.compile(
    r"(?<![\w./$@{}<>-])(?:\./)?((?:%s)/[A-Za-z0-9_./*<>{}$@+-]*)" % "|".join(ROOTS))
TEMPLATE_CHARS = set("<>*{}$@")
README_MAX_LINES = 250
LINK_RE = re.compile(r"!?\[[^\]\n]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
BUILD_SH_RE = re.compile(r"(?<![\w/.-])\./build\.sh((?:\s+-j\s*\d+|\s+--jobs[= ]\d+)*)\s+([A-Za-z][\w-]*)")
ATTN_CMD_RE = re.compile(r"(?<![\w.-])attn[ \t]+([a-z][a-z0-9-]*)")


def repo_files(root):
    """Tracked files (plus untracked, not ignored ones), or a tree walk."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"],
            check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, names in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            dirnames[:] = [d for d in dirnames
                           if not d.startswith(".") and d != "__pycache__"
                           and not (rel == "." and d.startswith("build"))]
            for n in names:
                files.append(os.path.normpath(os.path.join(rel, n)))
    return sorted(f for f in set(files) if os.path.isfile(os.path.join(root, f)))


def in_scope(f):
    if f in TOP_FILES:
        return True
    if f.split("/", 1)[0] not in ROOTS:
        return False
    if any(f.startswith(d) for d in SKIP_DIRS):
        return False
    return not f.endswith(SKIP_EXT) and "__pycache__" not in f


def read_text(path):
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if b"\0" in data:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def registry(root):
    """(names, IDs, have macros) of the X(...) rows of ATTN_ISA_LIST."""
    text = read_text(os.path.join(root, "src", "isa_list.h"))
    m = re.search(r"#define ATTN_ISA_LIST\(X\)(.*?)(?:\n\s*\n|\n#)", text, re.S)
    rows = re.findall(r"X\(\s*(\w+)\s*,\s*(\w+)\s*,[^,]*,[^,]*,[^,]*,\s*(\w+)\s*\)",
                      m.group(1))
    if not rows:
        sys.exit("check_text: no X(...) rows in ATTN_ISA_LIST (src/isa_list.h)")
    ids = {r[0] for r in rows}
    names = {r[1] for r in rows}
    haves = {r[2] for r in rows}
    dsp = read_text(os.path.join(root, "src", "dsp.h"))
    cpu_bits = set(re.findall(r"#define (ATTN_CPU_\w+)", dsp))
    return names, ids, haves, cpu_bits


def dsp_slots(root):
    text = read_text(os.path.join(root, "src", "dsp.h"))
    m = re.search(r"typedef struct attn_dsp \{(.*?)\} attn_dsp;", text, re.S)
    return set(re.findall(r"attn_\w+_fn\s+(\w+)", m.group(1)))


def headings(text):
    """Numbers ("2.3", "2a") and titles of a Markdown file's headings."""
    nums, titles = set(), []
    for line in text.splitlines():
        m = re.match(r"#+\s+(.*)", line)
        if not m:
            continue
        title = m.group(1).strip()
        n = re.match(r"(\d+(?:\.\d+)*[a-z]?)\.?\s+(.*)", title)
        if n:
            nums.add(n.group(1))
            title = n.group(2)
        titles.append(title)
    return nums, titles


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def slug(title):
    """GitHub's anchor for a heading: lower case, punctuation dropped,
    spaces to hyphens."""
    title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title.strip().lower())
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def anchors(text):
    """The anchors of a Markdown file's headings (repeats get -1, -2, ...)."""
    seen, out, fence = {}, set(), False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fence or not m:
            continue
        a = slug(m.group(1))
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else "%s-%d" % (a, n))
    return out


def code_parts(text):
    """(offset, text) of the fenced blocks and `code spans` of Markdown."""
    parts, pos, fence_at = [], 0, None
    for line in text.splitlines(True):
        if line.lstrip().startswith("```"):
            if fence_at is None:
                fence_at = pos + len(line)
            else:
                parts.append((fence_at, text[fence_at:pos]))
                fence_at = None
        elif fence_at is None:
            for m in re.finditer(r"(`+)(.+?)\1", line):
                parts.append((pos + m.start(2), m.group(2)))
        pos += len(line)
    return parts


def build_sh_commands(root):
    """The labels of build.sh's last case statement: its commands."""
    text = read_text(os.path.join(root, "build.sh")) or ""
    cases = list(re.finditer(r"^case [^\n]*\bin\n(.*?)^esac", text, re.S | re.M))
    if not cases:
        return set()
    labels = re.findall(r"^([\w|-]+)\)", cases[-1].group(1), re.M)
    return {w for label in labels for w in label.split("|")}


def attn_commands(root):
    text = read_text(os.path.join(root, "tools", "main.c")) or ""
    m = re.search(r"cli_commands\[\]\s*=\s*\{([^}]*)\}", text)
    return set(re.findall(r'"([^"]+)"', m.group(1))) if m else set()


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    all_files = repo_files(root)
    files = [f for f in all_files if in_scope(f)]
    basenames = {os.path.basename(f) for f in all_files}
    names, ids, haves, cpu_bits = registry(root)
    slots = dsp_slots(root)

    texts = {}
    for f in files:
        t = read_text(os.path.join(root, f))
        if t is not None:
            texts[f] = t

    # ATTN_ISA_* names the code itself defines (COUNT, LIST, NOT_DEFAULT_ON...).
    isa_macros = set(ids) | {"AUTO"}
    for f, t in texts.items():
        if f.split("/", 1)[0] in ("src", "include", "tests"):
            isa_macros |= set(re.findall(r"#define ATTN_ISA_(\w+)", t))
            isa_macros |= set(re.findall(r"\bATTN_ISA_(\w+)\s*=", t))

    isa_alt = "|".join(sorted(names))
    init_re = re.compile(r"\battn_dsp_init_(\w*)")
    kernel_re = re.compile(r"\battn_(%s)_(f32|f16|bf16|q8_0|q4_0|fp8)_(\w*)"
                           % "|".join(sorted(slots, key=len, reverse=True)))
    kindfile_re = re.compile(
        r"(?<![\w-])((tile|row|alibi|merge|backward|quant|kernels|baseline|fma_peak)_"
        r"([A-Za-z0-9]+(?:_emu)?)\.(c|h))\b")
    isafile_re = re.compile(r"(?<![\w-])(\w+_(?:%s)\.c)\b" % isa_alt)
    isa_id_re = re.compile(r"\bATTN_ISA_(\w*)")
    cpu_re = re.compile(r"\bATTN_CPU_(\w*)")
    have_re = re.compile(r"\bHAVE_(\w*)")
    env_re = re.compile(r"\bATTN_ISA=([A-Za-z0-9_-]+)")
    secnum_re = re.compile(
        r"(?<![\w/])(docs/[A-Za-z_]+\.md),?(?:\s|\*|#|//)*(?:§\s*|section\s+)"
        r"(\d+(?:\.\d+)*[a-z]?)")
    sectitle_re = re.compile(
        r"(?<![\w/])(docs/[A-Za-z_]+\.md|README(?:\.md)?)(?:,|\s)(?:\s|\*|#|//)*\"([A-Z][^\"<]{0,200})\"")

    heads = {}

    def doc_heads(doc):
        if doc not in heads:
            t = read_text(os.path.join(root, doc))
            heads[doc] = headings(t) if t is not None else None
        return heads[doc]

    findings = []

    def bad(f, text, pos, msg):
        findings.append((f, line_of(text, pos), msg))

    def template_after(text, end):
        return text[end:end + 1] == "<" or text[end:end + 2] == "##"

    # the module files of src/kernel_list.h (ATTN_FILE_<file>), whose inits
    # are attn_dsp_init_<file>_<isa>
    module_files = sorted(set(re.findall(r"#define ATTN_FILE_(\w+)\(",
                                         read_text(os.path.join(root, "src", "kernel_list.h")))),
                          key=len, reverse=True)

    def isa_of(suffix):
        """The ISA part of a symbol suffix: last component, _emu dropped."""
        if suffix.endswith("_emu"):
            suffix = suffix[:-4]
        return suffix.rsplit("_", 1)[-1]

    for f, text in texts.items():
        # 1. paths
        for m in PATH_RE.finditer(text):
            tok = m.group(1)
            if TEMPLATE_CHARS & set(tok) or text[m.end():m.end() + 1] in "<{*$@":
                continue
            tok = tok.rstrip(".")
            last = tok.rsplit("/", 1)[-1]
            if not (tok.endswith("/") or re.search(r"\.[A-Za-z0-9]+$", last)):
                continue
            here = os.path.dirname(os.path.join(root, f))
            if not (os.path.exists(os.path.join(root, tok))
                    or os.path.exists(os.path.join(here, tok))):
                bad(f, text, m.start(1), "no such path: %s" % tok)

        # 2. ISA names
        for m in init_re.finditer(text):
            suf = m.group(1)
            if not suf or suf.endswith("_") or template_after(text, m.end()):
                continue
            # a module file's init: attn_dsp_init_<file>_<isa> (longest file first)
            for fname in module_files:
                if suf.startswith(fname + "_"):
                    suf = suf[len(fname) + 1:]
                    break
            if isa_of(suf) not in names or (suf.endswith("_emu") and suf.count("_") > 1):
                bad(f, text, m.start(), "unknown ISA in attn_dsp_init_%s" % m.group(1))
        for m in kernel_re.finditer(text):
            suf = m.group(3)
            if not suf or suf == "fn" or suf.endswith("_") or template_after(text, m.end()):
                continue
            if isa_of(suf) not in names or suf.replace("_emu", "").count("_"):
                bad(f, text, m.start(), "unknown ISA in kernel name %s" % m.group(0))
        for m in kindfile_re.finditer(text):
            fname, isa = m.group(1), m.group(3)
            if fname in basenames:
                continue
            if isa_of(isa) not in names:
                bad(f, text, m.start(), "unknown ISA in file name %s" % fname)
            else:
                bad(f, text, m.start(), "no file %s in the tree" % fname)
        for m in isafile_re.finditer(text):
            if m.group(1) not in basenames and not kindfile_re.match(m.group(1)):
                bad(f, text, m.start(), "no file %s in the tree" % m.group(1))
        for m in isa_id_re.finditer(text):
            suf = m.group(1)
            if not suf or template_after(text, m.end()) or suf in isa_macros:
                continue
            bad(f, text, m.start(), "ATTN_ISA_%s is no registry ID or defined name" % suf)
        for m in cpu_re.finditer(text):
            name = "ATTN_CPU_" + m.group(1)
            if not m.group(1) or template_after(text, m.end()) or name in cpu_bits:
                continue
            bad(f, text, m.start(), "%s is no CPU bit of src/dsp.h" % name)
        for m in have_re.finditer(text):
            name = "HAVE_" + m.group(1)
            if not m.group(1) or template_after(text, m.end()) or name in haves:
                continue
            bad(f, text, m.start(), "%s is no registry `have` macro" % name)
        for m in env_re.finditer(text):
            if m.group(1) not in names and m.group(1) != "auto":
                bad(f, text, m.start(), "ATTN_ISA=%s names no registry ISA" % m.group(1))

        # 3. section references
        for m in secnum_re.finditer(text):
            h = doc_heads(m.group(1))
            if h is None:
                bad(f, text, m.start(), "no such document: %s" % m.group(1))
            elif m.group(2) not in h[0]:
                bad(f, text, m.start(), "%s has no section %s" % (m.group(1), m.group(2)))
        for m in sectitle_re.finditer(text):
            doc = m.group(1)
            if doc.startswith("README"):
                doc = "README.md"
            want = re.sub(r"\s*(?:\n\s*(?:\*|#|//)?\s*)+", " ", m.group(2)).strip()
            h = doc_heads(doc)
            if h is None:
                bad(f, text, m.start(), "no such document: %s" % doc)
            elif not any(t.startswith(want) for t in h[1]):
                bad(f, text, m.start(), '%s has no section "%s"' % (doc, want))

    # 7. the documentation's links and commands
    build_cmds, cli_cmds = build_sh_commands(root), attn_commands(root)
    if not build_cmds:
        findings.append(("build.sh", 1, "no case statement of commands found"))
    if not cli_cmds:
        findings.append(("tools/main.c", 1, "no cli_commands table found"))
    anchor_cache = {}

    def doc_anchors(path):
        if path not in anchor_cache:
            t = read_text(os.path.join(root, path)) if os.path.isfile(os.path.join(root, path)) else None
            anchor_cache[path] = anchors(t) if t is not None else None
        return anchor_cache[path]

    for f, text in texts.items():
        if not (f == "README.md" or (f.startswith("docs/") and f.endswith(".md"))):
            continue
        if f == "README.md" and text.count("\n") > README_MAX_LINES:
            findings.append((f, README_MAX_LINES + 1, "README.md has %d lines, more than %d: move "
                             "the detail into a guide under docs/" % (text.count("\n"), README_MAX_LINES)))
        code = code_parts(text)
        fenced = [(o, o + len(t)) for o, t in code]
        here = os.path.dirname(f)
        for m in LINK_RE.finditer(text):
            if any(a <= m.start() < b for a, b in fenced):
                continue
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("<"):
                continue
            path, _, anchor = target.partition("#")
            rel = os.path.normpath(os.path.join(here, path)) if path else f
            if rel.startswith("..") or not os.path.exists(os.path.join(root, rel)):
                bad(f, text, m.start(1), "link to a missing path: %s" % target)
            elif anchor:
                a = doc_anchors(rel) if rel.endswith(".md") else None
                if a is None or anchor not in a:
                    bad(f, text, m.start(1), "link to a missing heading: %s" % target)
        for m in re.finditer(r"(?<![\w./$@{}<>-])(docs/[A-Za-z0-9_./-]*[A-Za-z0-9_])", text):
            tok = m.group(1)
            if re.search(r"\.[A-Za-z0-9]+$", tok.rsplit("/", 1)[-1]):
                continue  # rule 1 checks names with an extension
            if not os.path.exists(os.path.join(root, tok)):
                bad(f, text, m.start(1), "no such path: %s" % tok)
        for off, part in code:
            for m in BUILD_SH_RE.finditer(part):
                if m.group(2) not in build_cmds:
                    bad(f, text, off + m.start(2), "./build.sh has no command %s (its case "
                        "statement: %s)" % (m.group(2), " ".join(sorted(build_cmds))))
            for m in ATTN_CMD_RE.finditer(part):
                if m.group(1) not in cli_cmds:
                    bad(f, text, off + m.start(1), "attn has no command %s (tools/main.c: %s)"
                        % (m.group(1), " ".join(sorted(cli_cmds))))

    # 4. the operation list
    ops_file = "tests/ops_list.h"
    ops_text = texts.get(ops_file, "")
    m = re.search(r"#define ATTN_OP_LIST\(X\)(.*?)(?:\n\s*\n|\n#)", ops_text, re.S)
    ops = re.findall(r"X\(\s*(\w+)\s*,\s*(\w+)\s*,\s*\"([^\"]+)\"\s*\)",
                     m.group(1)) if m else []
    if not ops:
        findings.append((ops_file, 1, "no X(ID, name, \"test\") lines in ATTN_OP_LIST"))
    listed = {name for _, name, _ in ops}
    for _, name, test in ops:
        at = ops_text.index('"%s"' % test, ops_text.index(name))
        module = "src/driver/%s.c" % name
        mod_text = texts.get(module)
        if mod_text is None:
            bad(ops_file, ops_text, at, "operation %s: no module %s" % (name, module))
        elif not re.search(r"^attn_status attn_%s(?:_with)?\(" % name, mod_text, re.M):
            bad(ops_file, ops_text, at, "operation %s: %s defines no attn_%s" % (name, module, name))
        test_text = texts.get(test)
        if test_text is None:
            bad(ops_file, ops_text, at, "operation %s: no test file %s" % (name, test))
        elif not re.search(r"\battn_%s(?:_with)?\(" % name, test_text):
            bad(ops_file, ops_text, at, "operation %s: %s never calls attn_%s" % (name, test, name))
    for f, t in texts.items():
        if not (f.startswith("src/driver/") and f.endswith(".c")):
            continue
        for d in re.finditer(r"^attn_status attn_(\w+)_with\(", t, re.M):
            if d.group(1) not in listed:
                bad(f, t, d.start(), "attn_%s_with has no line in %s" % (d.group(1), ops_file))

    # 6. licence headers: every source file names its licence in its first lines
    spdx_ext = (".c", ".h", ".cc", ".py", ".pyi", ".sh", ".build", ".map", ".in")
    for f in sorted(texts):
        base = f.rsplit("/", 1)[-1]
        if not (f.endswith(spdx_ext) or base in ("meson_options.txt", "CMakeLists.txt", "Makefile",
                                                 "build.sh", "rules", "gen-symbols")):
            continue
        if "SPDX-License-Identifier: MIT" not in "\n".join(texts[f].split("\n")[:3]):
            findings.append((f, 1, "no SPDX-License-Identifier: MIT in its first 3 lines"))

    # 5. the examples' index: every example file has a row in examples/README.md
    index_file = "examples/README.md"
    index = texts.get(index_file)
    if index is None:
        findings.append((index_file, 1, "no index of the examples"))
    else:
        for f in sorted(texts):
            if not f.startswith("examples/") or f == index_file or f.endswith("meson.build"):
                continue
            if "`%s`" % f[len("examples/"):] not in index:
                findings.append((index_file, 1, "%s has no row in the index" % f))

    for f, line, msg in sorted(set(findings)):
        print("%s:%d: %s" % (f, line, msg))
    if findings:
        print("check_text: %d finding(s) in %d files scanned" % (len(set(findings)), len(texts)))
        return 1
    print("check_text: %d files, no stale path, ISA, section, operation, link or command name"
          % len(texts))
    return 0


if __name__ == "__main__":
    sys.exit(main())

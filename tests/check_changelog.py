#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""CHANGELOG.md against the lists it mirrors.

Every function of src/libattn.map is named (as `name`) in the section of the
version whose node exports it (ATTN_1.N: "## 1.N.0"), every attn_options
field of src/option_list.h in the section of its `since` minor version, and
the newest section is include/attn.h's version, as are meson.build's project
version, the Python package's __version__ and debian/changelog's newest
entry. Exits 1 with one line per mismatch.
"""

import re
import sys


def main(root):
    text = open(root + "/CHANGELOG.md", encoding="utf-8").read()
    sections = {}
    for m in re.finditer(r"^## 1\.(\d+)\.0\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        sections[int(m.group(1))] = m.group(2)
    problems = []

    mapfile = open(root + "/src/libattn.map", encoding="utf-8").read()
    for m in re.finditer(r"ATTN_1\.(\d+)\s*\{\s*global:(.*?)(?:local:.*?)?\}", mapfile, re.S):
        minor = int(m.group(1))
        for name in re.findall(r"(attn_\w+);", m.group(2)):
            if "`%s`" % name not in sections.get(minor, ""):
                problems.append("CHANGELOG.md: %s (ATTN_1.%d) is not listed under 1.%d.0"
                                % (name, minor, minor))

    options = open(root + "/src/option_list.h", encoding="utf-8").read()
    for field, since in re.findall(r"X\((\w+),\s*\w+,\s*\w+,\s*\w+,\s*\d+,\s*(\d+),", options):
        minor = int(since)
        if "`%s`" % field not in sections.get(minor, ""):
            problems.append("CHANGELOG.md: option %s (since 1.%d) is not listed under 1.%d.0"
                            % (field, minor, minor))

    header = open(root + "/include/attn.h", encoding="utf-8").read()
    version = int(re.search(r"#define ATTN_VERSION_MINOR (\d+)", header).group(1))
    if not sections or max(sections) != version:
        problems.append("CHANGELOG.md: the newest section is 1.%s.0, attn.h says 1.%d.0"
                        % (max(sections) if sections else "?", version))
    # the other places a release is named: each must be attn.h's version
    major = int(re.search(r"#define ATTN_VERSION_MAJOR (\d+)", header).group(1))
    patch = int(re.search(r"#define ATTN_VERSION_PATCH (\d+)", header).group(1))
    full = "%d.%d.%d" % (major, version, patch)
    mirrors = (("meson.build", r"project\([^)]*?version:\s*'([^']+)'"),
               ("python/libattn/__init__.py", r'^__version__ = "([^"]+)"'),
               ("debian/changelog", r"^libattn \(([^)]+)\)"))
    for path, pattern in mirrors:
        try:
            text = open(root + "/" + path, encoding="utf-8").read()
        except FileNotFoundError:
            problems.append("%s: missing" % path)
            continue
        m = re.search(pattern, text, re.S | re.M)
        if not m or m.group(1) != full:
            problems.append("%s: version %s, attn.h says %s"
                            % (path, m.group(1) if m else "not found", full))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))

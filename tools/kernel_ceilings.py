#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes docs/perf/ceilings.md: each tile kernel's inner loop and its ceiling.

    kernel_ceilings.py [--build DIR] [--arm-build DIR] [--measure DIR] [--core ISA=CPU]
    kernel_ceilings.py --check

For every tile kernel of src/kernel_list.h (the slots qk_tile, pv_tile,
pt_tile, qk_bf16, pv_bf16, pt_bf16, qk_i8, every dtype the list gives them)
on AVX2, AVX-512 and NEON: the hot loop of the compiled kernel, its counts
per iteration, and what llvm-mca (Debian's llvm-14) predicts for it.

  --build DIR       the x86-64 build (default: build-ceilings, set up as a
                    release build when it does not exist); its kernel
                    objects are built with ninja first, then disassembled
  --arm-build DIR   the AArch64 cross build (default: build-ceilings-arm64),
                    set up with ci/aarch64-linux-gnu.ini when it does not
                    exist (apart from ci/aarch64-test.sh's build-arm64);
                    without aarch64-linux-gnu-gcc the page keeps its NEON
                    rows as they were
  --measure DIR     also time the kernels with DIR/tests/checkasm --bench and
                    the one-thread peaks of DIR/bench/attn_bench on this
                    machine: the page's measured column
  --core ISA=CPU    another llvm-mca -mcpu for an ISA's rows
  --loop ISA:SLOT:DTYPE  also print that row's loop
  --check           no build, nothing run: the page has one row for every
                    (ISA, slot, dtype) of the kernel list, and no other

The loop: in the kernel's function (attn_<slot>_<dtype>_<isa>, static in the
object), each backward branch to an address of the function closes a loop;
of the innermost ones, the one with the most FLOPs per iteration. Kernels
are always-inline bodies, so this is the micro-kernel as the entry point
runs it.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PAGE = os.path.join(ROOT, "docs", "perf", "ceilings.md")
COMMAND = "/usr/bin/python3 tools/kernel_ceilings.py"
MCA = "llvm-mca"
ITERATIONS = 100
TILE_SLOTS = ("qk_tile", "pv_tile", "pt_tile", "qk_bf16", "pv_bf16", "pt_bf16", "qk_i8")
BENCH_SHAPE = "block, d 128"  # tests/kernels/checkasm_tile.c's first bench shape
TARGET = 90.0  # percent of the unit's rate, the line

# Per ISA: its architecture and the llvm-mca core (llvm-14 has no znver4,
# and no AMX model: the amx rows count their loops, unpredicted), and the
# ATTN_CPU_* bit of its registry line when its files' own need none.
# --check holds this to src/isa_list.h: every ISA is here or in UNANALYSED.
ISAS = {
    "avx2": {"arch": "x86", "cpu": "znver3"},
    "avx512": {"arch": "x86", "cpu": "icelake-server"},
    "amx": {"arch": "x86", "cpu": "icelake-server", "need": ["AMX"]},
    "neon": {"arch": "aarch64", "cpu": "neoverse-v1"},
}
UNANALYSED = {"scalar": "the oracle", "sve": "its FLOP per iteration follow the vector length"}
ARCH = {
    "x86": {"objdump": "objdump", "triple": "x86_64-linux-gnu",
            "mattr": "+avx512f,+avx512vl,+avx512bw,+avx512dq,+avx512bf16,+avx512vnni,"
                     "+avxvnni,+amx-tile,+amx-bf16,+amx-int8"},
    "aarch64": {"objdump": "aarch64-linux-gnu-objdump", "triple": "aarch64-linux-gnu",
                "mattr": "+bf16,+i8mm,+dotprod,+fullfp16"},
}
# What each core is, for the preamble (the hardware, not llvm's model of it).
CORE_NOTES = {
    "znver3": "Zen 3: two 256-bit FMA pipes, 2 ymm FMAs per cycle, and no VNNI. llvm-14's "
              "model holds both FMA pipes for a cycle per ymm FMA (1 per cycle, half the "
              "hardware's peak) and schedules vpdpbusd, which Zen 3 lacks, at 2 per cycle.",
    "icelake-server": "Ice Lake SP: two 512-bit FMA units (ports 0 and 5), 2 zmm FMAs per "
                      "cycle. Stands in for Zen 4, which llvm-14 does not know: Zen 4 runs a "
                      "zmm operation as two halves on its two 256-bit pipes, one zmm FMA, "
                      "vdpbf16ps or vpdpbusd per cycle, so this model's per-cycle peak is "
                      "twice Zen 4's and its other limits (one shuffle port, two loads of "
                      "64 bytes) are Intel's.",
    "neoverse-v1": "llvm-14 schedules neoverse-v1 (and neoverse-n1, cortex-a76) with the "
                   "Cortex-A57 model: one 128-bit fmla per cycle, where Neoverse N1 issues "
                   "two and V1 four; it has no figures of its own for bfdot, bfmmla, sdot, "
                   "smmla (A57 lacks them).",
}
# ATTN_CPU_* bits of src/dsp.h as /proc/cpuinfo flags, for which file's
# kernel checkasm's row of an ISA runs on this machine.
CPU_FLAGS = {"AVX512_BF16": "avx512_bf16", "AVX512_VNNI": "avx512_vnni",
             "AVX_VNNI": "avx_vnni", "AMX": "amx_tile"}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kw).stdout


# ------------------------------------------------------------ the kernel list

def macros(path):
    """name -> (params, body) of each function-like #define, lines joined."""
    text = open(path, encoding="utf-8").read().replace("\\\n", " ")
    out = {}
    for m in re.finditer(r"^#define\s+(\w+)\(([^)]*)\)(.*)$", text, re.M):
        out[m.group(1)] = ([p.strip() for p in m.group(2).split(",")], m.group(3))
    return out


def expand(defs, body, dt=None):
    """(slot, dtype) of each R(...) a file's macro body reaches."""
    for m in re.finditer(r"(\w+)\(([^()]*)\)", body):
        name, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        if name == "R":
            yield args[0], dt if args[1] == "dt" else args[1]
        elif name in defs:
            params, sub = defs[name]
            yield from expand(defs, sub, args[params.index("dt")] if "dt" in params else dt)


def kernel_rows():
    """Per ISA, in the list's order: (file, need bits, slot, dtype)."""
    defs = macros(os.path.join(ROOT, "src", "kernel_list.h"))
    rows = []
    for isa in ISAS:
        for f in re.finditer(r"F\((\w+),\s*([^,]+),\s*a\)", defs["ATTN_KERNELS_" + isa][1]):
            fname, need = f.group(1), f.group(2).strip()
            bits = [] if need == "0" else [b.strip().replace("ATTN_CPU_", "")
                                            for b in need.split("|")]
            bits += ISAS[isa].get("need", [])
            seen = []
            for slot, dt in expand(defs, defs["ATTN_FILE_" + fname][1]):
                if slot in TILE_SLOTS and (slot, dt) not in seen:
                    seen.append((slot, dt))
                    rows.append({"isa": isa, "file": fname, "need": bits, "slot": slot, "dt": dt,
                                 "src": source_of(isa, fname)})
    return rows


def source_of(isa, fname):
    """<file>_<isa>.c, or the file of the ISA's that instantiates it beside
    its own (ATTN_TILE_FILE(file, isa, ...): dot_qv in the dot files)."""
    hits = glob.glob(os.path.join(ROOT, "src", "*", "%s_%s.c" % (fname, isa)))
    if not hits:
        pat = re.compile(r"ATTN_TILE_FILE\(%s,\s*%s," % (fname, isa))
        hits = [f for f in sorted(glob.glob(os.path.join(ROOT, "src", "*", "*_%s.c" % isa)))
                if pat.search(open(f, encoding="utf-8").read())]
    return os.path.relpath(hits[0], ROOT) if hits else None


# ------------------------------------------------------------ objects

def objects(build, sources):
    """source -> object path of a build (its compile_commands.json), built now."""
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        cc = json.load(f)
    out = {}
    for src in sources:
        for e in cc:
            path = os.path.normpath(os.path.join(e["directory"], e["file"]))
            if path == os.path.join(ROOT, src) and "ATTN_SIMDE_EMU" not in e["command"]:
                out[src] = e["output"]
    if out:
        run(["ninja", "-C", build] + sorted(set(out.values())))
    return {s: os.path.join(build, o) for s, o in out.items()}


def disassemble(arch, obj):
    """symbol -> [(address, text)] of each function in obj."""
    funcs, cur = {}, None
    comment = r"\s*#.*$" if arch == "x86" else r"\s*//.*$"
    for line in run([ARCH[arch]["objdump"], "-d", "-w", "--no-show-raw-insn", obj]).splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*\S)\s*$", line)
        if m and cur is not None:
            text = re.sub(comment, "", m.group(2))
            if text and not text.startswith("(bad)"):
                cur.append((int(m.group(1), 16), text))
    return funcs


# ------------------------------------------------------------ instructions

X86_PREFIXES = {"{vex}", "{evex}", "rep", "repz", "repnz", "lock", "notrack", "bnd", "cs",
                "ds", "data16"}


def split_ops(s):
    ops, depth, cur = [], 0, ""
    for ch in s:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            ops.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        ops.append(cur.strip())
    return ops


class Insn:
    """One instruction's class: mnemonic, FLOPs, memory, data movement."""

    def __init__(self, arch, addr, text):
        self.addr, self.text = addr, text
        words = text.split()
        while arch == "x86" and len(words) > 1 and words[0] in X86_PREFIXES:
            words = words[1:]
        self.mn = words[0]
        self.ops = split_ops(" ".join(words[1:]))
        self.flops, self.form = 0, None
        self.load = self.store = self.shuffle = self.convert = False
        self.branch_to = None
        self.jump = self.mn in ("jmp", "ret", "b", "br")  # no fall-through
        (self._x86 if arch == "x86" else self._a64)()

    def _x86(self):
        mn, ops = self.mn, self.ops
        regs = [(r, w) for r, w in (("zmm", 512), ("ymm", 256), ("xmm", 128), ("tmm", 0))
                if any("%" + r in o for o in ops)]
        reg, width = regs[0] if regs else ("", 0)
        m = re.match(r"v?f(n?)m(add|sub|addsub|subadd)(132|213|231)(ps|pd|ss|sd)$", mn)
        if m:
            lanes = {"ps": width // 32, "pd": width // 64}.get(m.group(4), 1)
            self.flops = 2 * lanes
        elif mn == "vdpbf16ps":
            self.flops = 4 * width // 32
        elif re.match(r"vpdpbusds?$", mn):
            self.flops = 8 * width // 32
        elif re.match(r"vpdpwssds?$", mn):
            self.flops = 4 * width // 32
        elif re.match(r"tdp(bf16|fp16)ps$", mn):
            self.flops = 16 * 16 * 32 * 2
        elif re.match(r"tdpb(ss|su|us|uu)d$", mn):
            self.flops = 16 * 16 * 64 * 2
        if self.flops:
            self.form = (mn, reg)
        if mn.startswith("j") and ops:
            t = re.match(r"([0-9a-f]+)\s*<", ops[-1])
            if t:
                self.branch_to = int(t.group(1), 16)
        if mn.startswith(("lea", "nop", "prefetch", "j", "call")):
            return
        mem = [i for i, o in enumerate(ops) if "(" in o]
        if mem:
            last = mem[-1] == len(ops) - 1 and len(ops) > 1
            movish = re.match(r"v?(p?mov|extract|pextr|cvtps2ph|p?maskmov|p?scatter|"
                              r"p?compress|movnt)", mn)
            if not last or mn.startswith(("cmp", "test", "bt", "vptest", "ucomi", "vucomi")):
                self.load = True
            elif movish:
                self.store = True
            else:
                self.load = self.store = True
        elif mn.startswith("push"):
            self.store = True
        elif mn.startswith("pop"):
            self.load = True
        if re.match(r"v?(cvt|pmov(zx|sx))", mn):
            self.convert = True
        elif re.match(r"v?(p?shuf|perm|unpck|punpck|insert|extract|palignr|align[dq]|"
                      r"pack|p?compress|p?expand|movs[hl]dup|movddup|pinsr|pextr|"
                      r"p?broadcast)", mn) and not (self.load and "broadcast" in mn):
            self.shuffle = True

    def _a64(self):
        mn, ops = self.mn, self.ops
        arr = re.search(r"\.(\d+)([bhsd])$", ops[0]) if ops else None
        lanes = int(arr.group(1)) if arr else 1
        if mn in ("fmla", "fmls", "fmadd", "fmsub", "fnmadd", "fnmsub"):
            self.flops = 2 * lanes
        elif mn == "bfdot":
            self.flops = 4 * lanes
        elif mn in ("bfmlalb", "bfmlalt"):
            self.flops = 2 * lanes
        elif mn == "bfmmla":
            self.flops = 32
        elif mn in ("sdot", "udot", "usdot", "sudot"):
            self.flops = 8 * lanes
        elif mn in ("smmla", "ummla", "usmmla"):
            self.flops = 64
        if self.flops:
            self.form = (mn, ops[0].split(".")[-1] if arr else ops[0][:1])
        if mn in ("b", "cbz", "cbnz", "tbz", "tbnz") or mn.startswith("b."):
            t = re.match(r"([0-9a-f]+)\s*<", ops[-1]) if ops else None
            if t:
                self.branch_to = int(t.group(1), 16)
        if mn.startswith("ld"):
            self.load = True
        elif mn.startswith("st"):
            self.store = True
        elif re.match(r"(fcvt[ln]|bfcvt|[su]cvtf|fcvtz|[su]xtl|[su]?shll|[su]?q?xtn)", mn):
            self.convert = True
        elif mn in ("zip1", "zip2", "uzp1", "uzp2", "trn1", "trn2", "ext", "tbl", "tbx", "dup",
                    "ins", "umov", "smov", "rev16", "rev32", "rev64") or (
                mn == "mov" and any("[" in o for o in ops)):
            self.shuffle = True


def unit_of(mn):
    """The unit a product instruction runs on: fma, bf16 (dot) or int8 (dot)."""
    if re.match(r"(vdpbf16ps|tdpbf16ps|tdpfp16ps|bfdot|bfmmla|bfmlal)", mn):
        return "bf16"
    if re.match(r"(vpdp|tdpb|[su]?[su]dot|[su]?[su]mmla)", mn):
        return "int8"
    return "fma"


def slot_unit(slot):
    return "bf16" if slot.endswith("_bf16") else "int8" if slot.endswith("_i8") else "fma"


def hot_loop(insns, unit):
    """The innermost loop with the most FLOPs per iteration on `unit` (any
    unit when no loop has one): a slice of insns. A loop is a backward
    branch and the code from its target that falls through to it (a jump in
    between makes it the tail of another block)."""
    index = {i.addr: k for k, i in enumerate(insns)}
    loops = [(index[i.branch_to], k) for k, i in enumerate(insns)
             if i.branch_to is not None and i.branch_to in index and index[i.branch_to] <= k
             and not any(j.jump for j in insns[index[i.branch_to]:k])]
    for want in (unit, None):
        work = [(a, b, sum(i.flops for i in insns[a:b + 1] if want in (None, unit_of(i.mn))))
                for a, b in loops]
        work = [(a, b, f) for a, b, f in work if f]
        inner = [(a, b, f) for a, b, f in work
                 if not any((c, d) != (a, b) and a <= c and d <= b for c, d, _ in work)]
        if inner:
            a, b, _ = max(inner, key=lambda t: (t[2], -t[0]))
            return insns[a:b + 1]
    return None


# ------------------------------------------------------------ llvm-mca

def mca(arch, cpu, lines):
    """(Block RThroughput, cycles per iteration) for a loop body."""
    a = ARCH[arch]
    with tempfile.NamedTemporaryFile("w", suffix=".s", delete=False) as f:
        f.write(".Ltop:\n" + "".join("\t%s\n" % l for l in lines))
        path = f.name
    try:
        out = run([MCA, "-mtriple=" + a["triple"], "-mcpu=" + cpu, "-mattr=" + a["mattr"],
                   "-iterations=%d" % ITERATIONS, path])
    finally:
        os.unlink(path)
    rt = float(re.search(r"Block RThroughput:\s+([\d.]+)", out).group(1))
    cyc = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1))
    return rt, cyc / ITERATIONS


def mca_text(insn):
    """The instruction as llvm-mca reads it: a branch goes to the loop's label."""
    return re.sub(r"[0-9a-f]+\s*<[^>]*>$", ".Ltop", insn.text)


def form_block(arch, form):
    """8 independent copies of a product instruction, register operands."""
    mn, w = form
    if arch == "x86":
        if mn.startswith("t"):
            return None  # AMX: no llvm-14 model
        return ["%s %%%s1, %%%s2, %%%s%d" % (mn, w, w, w, 3 + i) for i in range(8)]
    if not w[:1].isdigit():  # scalar: fmadd s0, s30, s31, s0
        return ["%s %s%d, %s30, %s31, %s%d" % (mn, w, i, w, w, w, i) for i in range(8)]
    src = "8h" if mn.startswith("bf") else "16b" if unit_of(mn) == "int8" else w
    return ["%s v%d.%s, v30.%s, v31.%s" % (mn, i, w, src, src) for i in range(8)]


_form_cycles = {}


def form_cycles(arch, cpu, form):
    """Cycles per product instruction at the model's peak (None: no model)."""
    key = (arch, cpu, form)
    if key not in _form_cycles:
        block = form_block(arch, form)
        _form_cycles[key] = mca(arch, cpu, block)[0] / len(block) if block else None
    return _form_cycles[key]


# ------------------------------------------------------------ analysis

def analyse(rows, build, cores):
    """Fills each row of an ISA built in `build` with its loop's figures."""
    by_src = {}
    for r in rows:
        by_src.setdefault(r["src"], []).append(r)
    objs = objects(build, [s for s in by_src if s])
    for src, rs in by_src.items():
        if src not in objs:
            continue
        arch = ISAS[rs[0]["isa"]]["arch"]
        funcs = disassemble(arch, objs[src])
        for r in rs:
            cpu = r["cpu"] = cores[r["isa"]]
            name = "attn_%s_%s_%s" % (r["slot"], r["dt"], r["isa"])
            insns = [Insn(arch, a, t) for a, t in funcs.get(name, [])]
            loop = hot_loop(insns, slot_unit(r["slot"])) if insns else None
            r["done"] = True
            if not loop:
                r["note"] = "no loop with products found"
                continue
            loop = [i for i in loop if not i.mn.startswith("nop")]
            r["loop"] = ["%x: %s" % (i.addr, i.text) for i in loop]
            r["insns"] = len(loop)
            r["branchy"] = any(i.branch_to is not None for i in loop[:-1])
            r["flops"] = sum(i.flops for i in loop)
            r["loads"] = sum(i.load for i in loop)
            r["stores"] = sum(i.store for i in loop)
            r["shuffles"] = sum(i.shuffle for i in loop)
            r["converts"] = sum(i.convert for i in loop)
            forms, r["form_flops"] = {}, {}
            for i in loop:
                if i.form:
                    forms[i.form] = forms.get(i.form, 0) + 1
                    r["form_flops"][i.form] = i.flops
            r["products"] = forms
            r["unit"] = max(forms, key=lambda f: forms[f] * r["form_flops"][f])
            cyc = [form_cycles(arch, cpu, f) for f in forms]
            if None in cyc:
                r["note"] = "llvm-14 has no AMX model"
                continue
            r["rthroughput"], r["cycles"] = mca(arch, cpu, [mca_text(i) for i in loop])
            busy = sum(n * c for n, c in zip(forms.values(), cyc))
            r["predicted"] = 100.0 * busy / max(r["cycles"], r["rthroughput"])


def cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            m = re.search(r"^flags\s*:(.*)$", f.read(), re.M)
        return set(m.group(1).split()) if m else set()
    except OSError:
        return set()


def unit_peak_name(r):
    mn, w = r["unit"]
    if mn == "tdpbf16ps":
        return "bf16tile_peak_amx"
    if mn.startswith("tdpb"):
        return "int8tile_peak_amx"
    if mn == "vdpbf16ps":
        return "bf16dot_peak_avx512"
    if mn.startswith("vpdpbusd"):
        return "int8dot_peak_avx512"  # ymm and zmm: the same ops per cycle on Zen 4
    return "fma_peak_avx512" if w == "zmm" else "fma_peak_avx2"


def measure(rows, build):
    """Measured GFLOP/s of each row's kernel where checkasm's ISA row runs it,
    and the one-thread peaks; returns the peaks."""
    flags = cpu_flags()
    have = lambda bits: all(CPU_FLAGS.get(b) in flags for b in bits)
    cap = {}
    for r in rows:  # a later file of the list overwrites an earlier one's slot
        if ISAS[r["isa"]]["arch"] == "x86" and have(r["need"]):
            cap[(r["isa"], r["slot"], r["dt"])] = r["file"]
    bench = os.path.join(build, "bench", "attn_bench")
    if not os.path.exists(bench):
        run(["ninja", "-C", build, "bench/attn_bench"])
    doc = json.loads(run([bench, "--benchmark_filter=^ref/.*peak", "--benchmark_format=json"]))
    peaks = {b["name"].split("/")[1].replace("_1thread", ""): b["flops"] / 1e9
             for b in doc["benchmarks"]}
    got = {}
    for slot in TILE_SLOTS:
        out = run([os.path.join(build, "tests", "checkasm"), "--bench", "--slot", slot])
        for line in out.splitlines():
            m = re.match(r"(\S+)\s+(\S+)\s+(\S+)\s+%s\s+([\d.]+) ns.*\s([\d.]+) GFLOP/s"
                         % re.escape(BENCH_SHAPE), line)
            if m:
                got[(m.group(3), m.group(1), m.group(2))] = float(m.group(5))
    for r in rows:
        k = (r["isa"], r["slot"], r["dt"])
        if cap.get(k) == r["file"] and k in got and r.get("unit"):
            peak = peaks.get(unit_peak_name(r))
            if peak:
                r["measured"] = 100.0 * got[k] / peak
                r["gflops"] = got[k]
    return peaks


# ------------------------------------------------------------ the page

COLUMNS = ["ISA", "slot", "dtype", "file", "core (llvm-mca)", "instr/iter", "FLOP/iter",
           "loads/iter", "stores/iter", "shuffles/iter", "converts/iter", "products/iter",
           "RThroughput", "cycles/iter", "predicted % of unit peak", "measured % in cache",
           "verdict"]


def fmt(x, nd=0):
    """x with at most nd decimals, no trailing zeros; blank for None."""
    if x is None:
        return ""
    return str(x) if nd == 0 else ("%.*f" % (nd, x)).rstrip("0").rstrip(".")


def form_name(f):
    """vfmadd231ps ymm, fmla .4s"""
    return "%s %s%s" % (f[0], "." if f[1][:1].isdigit() else "", f[1]) if f[1] else f[0]


def row_line(r):
    if not r.get("done"):
        return None
    forms = r.get("products") or {}
    prod = ", ".join("%d %s" % (n, form_name(f)) for f, n in forms.items())
    pred, meas = r.get("predicted"), r.get("measured")
    basis, pct = ("measured", meas) if meas is not None else ("predicted", pred)
    if pct is None:
        verdict = r.get("note", "")
    elif pct >= TARGET:
        verdict = "≥ 90 %% (%s)" % basis
    else:
        verdict = "below 90 %% (%s): redesign" % basis
    cells = [r["isa"], r["slot"], r["dt"], "`%s`" % r["src"], r.get("cpu", ""),
             fmt(r.get("insns")) + (" ‡" if r.get("branchy") else ""),
             fmt(r.get("flops")), fmt(r.get("loads")), fmt(r.get("stores")),
             fmt(r.get("shuffles")), fmt(r.get("converts")), prod,
             fmt(r.get("rthroughput"), 2), fmt(r.get("cycles"), 2),
             "" if pred is None else "%.1f %%" % pred,
             "" if meas is None else "%.1f %%" % meas, verdict]
    return "| " + " | ".join(cells) + " |"


def page_rows(path, ncells=len(COLUMNS)):
    """The page's table lines as it is: (isa, slot, dtype, file) -> line, or
    with ncells=PEAK_CELLS the peak model's lines, (core, product) -> line."""
    out = {}
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| ") and len(cells) == ncells and (
                    cells[0] in ISAS or ncells == PEAK_CELLS and cells[2].isdigit()):
                key = cells[:3] + [cells[3].strip("`")] if ncells == len(COLUMNS) else cells[:2]
                out[tuple(key)] = line.rstrip("\n")
    return out


PEAK_CELLS = 5


def peak_lines(rows, kept):
    """The model's products per cycle, per core and product form the table
    uses; the lines of a core no row was analysed on this run are kept."""
    lines = ["| core (llvm-mca) | product | FLOP per instruction | model: cycles per "
             "instruction | model peak, FLOP/cycle |", "|---|---|---|---|---|"]
    seen = set()
    for r in rows:
        arch = ISAS[r["isa"]]["arch"]
        for f in (r.get("products") or {}):
            if (r["cpu"], f) in seen:
                continue
            seen.add((r["cpu"], f))
            c = form_cycles(arch, r["cpu"], f)
            flops = r["form_flops"][f]
            lines.append("| %s | %s | %s | %s | %s |" % (
                r["cpu"], form_name(f), fmt(flops), "no model" if c is None else fmt(c, 3),
                "" if c is None else fmt(flops / c, 1)))
    done = {cpu for cpu, _ in seen}
    lines.extend(line for (cpu, _), line in kept.items() if cpu not in done)
    return lines


def render(rows, cores, kept, kept_peaks, peaks, measured_on):
    out = []
    w = out.append
    w("# Kernel ceilings")
    w("")
    w("<!-- Generated by %s: edit the script, not this file. -->" % COMMAND)
    w("")
    w("Each tile kernel's hot loop against its unit's limit: what the loop does per "
      "iteration, what llvm-mca (llvm-14) predicts it takes on a core, and, where "
      "measured, the rate `checkasm --bench` times in cache. A kernel below 90 % of its "
      "unit's rate in cache is redesigned, not retuned. Regenerate with")
    w("")
    w("    %s" % COMMAND)
    w("")
    w("on an x86-64 machine: it sets up (release) and builds the kernel objects of `build-ceilings` and, "
      "with ci/aarch64-linux-gnu.ini, `build-ceilings-arm64` (`--build`, `--arm-build` name "
      "others; without aarch64-linux-gnu-gcc the NEON rows are kept as they were). "
      "`--measure build` fills the measured column on the machine that runs it; "
      "`--check` (test check-ceilings) checks that the table has one row per (ISA, "
      "slot, dtype) of `src/kernel_list.h`, building and timing nothing.")
    w("")
    w("## Columns")
    w("")
    w("- **The loop**: in the kernel's compiled function, disassembled from the build's "
      "object, each backward branch closes a loop; the row is the innermost loop with "
      "the most FLOPs per iteration (the micro-kernel's step).")
    w("- **FLOP/iter**: the products' floating-point (or, for int8, integer) operations, "
      "two per multiply-add: vfmadd ymm 16, zmm 32; vdpbf16ps zmm 64; vpdpbusd ymm 64, "
      "zmm 128; fmla .4s 8; bfdot .4s 16; bfmmla 32; sdot .4s 32; smmla 64; AMX "
      "tdpbf16ps 16384. **products/iter** names them.")
    w("- **loads, stores**: instructions that read or write memory (a memory-source "
      "broadcast or an FMA with a memory operand is one load); prefetches are neither. "
      "**shuffles**: permutes, shuffles, unpacks, inserts, extracts, alignments and "
      "broadcasts from a register. **converts**: dtype widenings (x86 vcvt*, vpmovzx/sx; "
      "AArch64 fcvtl, shll, sxtl/uxtl, scvtf).")
    w("- **RThroughput**: llvm-mca's Block RThroughput, the cycles per iteration the "
      "busiest resource needs; **cycles/iter**: its simulated cycles over %d iterations "
      "divided by %d (dependency chains included)." % (ITERATIONS, ITERATIONS))
    w("- **predicted % of unit peak**: the cycles the loop's products need at the "
      "model's peak rate (below) over the larger of the two figures.")
    w("- **‡** after instr/iter: the loop's range holds conditional branches besides its "
      "back edge (an early exit, a skipped step, a tail, an inner loop); every "
      "instruction of the range is counted, as llvm-mca runs it straight through, so "
      "look at the loop (`--loop ISA:SLOT:DTYPE` prints it) before trusting the row.")
    w("- **measured %% in cache**: `tests/kernels/checkasm.c`'s GFLOP/s for the shape "
      "\"%s\" (a full block, one thread) over the one-thread peak `bench/attn_bench` "
      "measures with the same instruction (`tools/peak_loops.h`): fma_peak_avx2 for "
      "ymm FMAs, fma_peak_avx512 for zmm, bf16dot_peak_avx512, int8dot_peak_avx512 "
      "(zmm; the AVX2 table's ymm vpdpbusd is held against it too, the same operations "
      "per cycle on Zen 4), bf16tile_peak_amx and int8tile_peak_amx for AMX tile "
      "products. It is the whole call (packing, tails, the score "
      "scaling), not the loop alone. Only where checkasm's row of the ISA runs that "
      "file's kernel on the machine." % BENCH_SHAPE)
    w("- **verdict**: the measured figure against 90 %, else the predicted one.")
    w("")
    w("## The peak model")
    w("")
    w("The unit's peak is taken from the llvm-mca model itself: its Block RThroughput for "
      "eight independent register copies of the product instruction, over eight. So a "
      "row's prediction is the share of the model's product units the loop keeps busy. "
      "Where the model is wrong about the hardware, the cores say so:")
    w("")
    for cpu in sorted(set(cores.values())):
        w("- **%s**: %s" % (cpu, CORE_NOTES.get(cpu, "")))
    w("")
    out.extend(peak_lines(rows, kept_peaks))
    w("")
    if peaks:
        w("Measured on: %s, one thread; peaks (GFLOP/s, bench/attn_bench `ref/*_peak_*`): %s."
          % (measured_on, ", ".join("%s %.1f" % (k, v) for k, v in sorted(peaks.items()))))
        w("")
    w("## Table")
    w("")
    w("| " + " | ".join(COLUMNS) + " |")
    w("|" + "---|" * len(COLUMNS))
    for r in rows:
        line = row_line(r) or kept.get((r["isa"], r["slot"], r["dt"], r["src"]))
        if line:
            w(line)
    w("")
    w("SVE (`src/arm/tile_sve.c`) is not analysed: its FLOPs per iteration depend on the "
      "vector length.")
    return "\n".join(out) + "\n"


def check():
    want = {(r["isa"], r["slot"], r["dt"], r["src"]) for r in kernel_rows()}
    have = set(page_rows(PAGE))
    bad = 0
    with open(os.path.join(ROOT, "src", "isa_list.h"), encoding="utf-8") as f:
        listed = re.findall(r"^\s*X\(\w+,\s*(\w+),", f.read(), re.M)
    for isa in listed:
        if isa not in ISAS and isa not in UNANALYSED:
            print("%s: ISA %s of src/isa_list.h is neither in ISAS nor in UNANALYSED"
                  % (os.path.relpath(__file__, ROOT), isa))
            bad += 1
    for k in sorted(want - have):
        print("%s: no row for %s %s %s (%s)" % (os.path.relpath(PAGE, ROOT), *k))
        bad += 1
    for k in sorted(have - want):
        print("%s: row %s %s %s (%s) is not in src/kernel_list.h"
              % (os.path.relpath(PAGE, ROOT), *k))
        bad += 1
    if bad:
        print("regenerate it: %s" % COMMAND)
    return 1 if bad else 0


def setup(build, options):
    """meson setup a build directory that is not one yet."""
    if not os.path.exists(os.path.join(build, "build.ninja")):
        run(["meson", "setup", build] + options, cwd=ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-ceilings")
    ap.add_argument("--arm-build", default="build-ceilings-arm64")
    ap.add_argument("--measure", metavar="DIR")
    ap.add_argument("--core", action="append", default=[], metavar="ISA=CPU")
    ap.add_argument("--loop", action="append", default=[], metavar="ISA:SLOT:DTYPE")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--out", default=PAGE)
    args = ap.parse_args()
    if args.check:
        return check()
    cores = {isa: v["cpu"] for isa, v in ISAS.items()}
    for c in args.core:
        isa, cpu = c.split("=", 1)
        cores[isa] = cpu
    rows = kernel_rows()
    x86 = [r for r in rows if ISAS[r["isa"]]["arch"] == "x86"]
    arm = [r for r in rows if ISAS[r["isa"]]["arch"] == "aarch64"]
    build = os.path.abspath(args.build)
    setup(build, ["--buildtype=release"])
    analyse(x86, build, cores)
    arm_build = os.path.abspath(args.arm_build)
    if shutil.which("aarch64-linux-gnu-gcc"):
        setup(arm_build, ["--cross-file", os.path.join(ROOT, "ci", "aarch64-linux-gnu.ini"),
                          "-Dtests=disabled", "-Dbench=disabled", "-Dcli=false",
                          "-Dpython=disabled", "-Dabi_check=disabled"])
        analyse(arm, arm_build, cores)
    else:
        print("no aarch64-linux-gnu-gcc: the NEON rows are kept as they were", file=sys.stderr)
    peaks, on = {}, ""
    if args.measure:
        peaks = measure(rows, os.path.abspath(args.measure))
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
        on = m.group(1) if m else "this machine"
    for want in args.loop:
        for r in rows:
            if "%s:%s:%s" % (r["isa"], r["slot"], r["dt"]) == want and r.get("loop"):
                print("%s (%s):\n  %s" % (want, r["src"], "\n  ".join(r["loop"])))
    text = render(rows, cores, page_rows(args.out), page_rows(args.out, PEAK_CELLS), peaks, on)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s" % os.path.relpath(args.out, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())

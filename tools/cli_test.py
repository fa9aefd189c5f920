#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks of attn's command line that a plain run cannot make (suite 'cli').

    cli_test.py usage-errors ATTN     invalid option combinations: exit 2 before any call
    cli_test.py progress ATTN         the progress count's total from the first call
    cli_test.py json ATTN             --json: one document with the report's keys
    cli_test.py busy-warning ATTN     the busy machine's warning and JSON field
    cli_test.py completion ATTN SCRIPT  the bash completion offers each option's values

No check depends on a timing: the progress line and the busy verdict are
forced by the tool's test hooks (ATTN_CLI_TEST). Standard library only;
exits 77 (skipped) where bash is missing for the completion.
"""

import json
import os
import re
import runpy
import shutil
import subprocess
import sys

# The dtypes of src/dtype_list.h, as the Python binding's table holds them
# (python/libattn/_dtypes.py, generated and checked by test 'python-dtypes'):
# the K/V names the tool takes, by kind.
_ROWS = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                                    "libattn", "_dtypes.py"))["ROWS"]
KV_NAMES = [row.name for row in _ROWS if row.kv]
FP8_NAMES = [row.name for row in _ROWS if row.kv and row.kind == "fp8"]
FLOAT_KV = [row.name for row in _ROWS if row.kv and row.kind == "float"]


def either(names):
    """'a, b or c', as the tool lists values."""
    return " or ".join(filter(None, (", ".join(names[:-1]), names[-1])))


# Small problems: one timed call, few verified rows.
QUICK = ["--iters", "1", "--verify-rows", "2", "--no-progress"]
SMALL = ["--preset", "small", "--q-len", "32", "--kv-len", "48"] + QUICK


def attn(exe, *args, env=None):
    e = dict(os.environ)
    e.pop("ATTN_CLI_TEST", None)
    e.update(env or {})
    return subprocess.run([exe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=e, check=False)


class Checker:
    def __init__(self):
        self.failures = 0

    def check(self, ok, what):
        if not ok:
            self.failures += 1
            print("FAIL %s" % what)
        return ok

    def result(self, name):
        print("%s: %s" % (name, "%d failure(s)" % self.failures if self.failures else "ok"))
        return 1 if self.failures else 0


# ------------------------------------------------------------ usage errors

# (options after `attn run --preset small`, what the message must say)
USAGE = [
    (["--k-tail", "64"], ["--k-tail 64 leaves no value of head_dim 64 to k",
                          "at most head_dim - 1"]),
    (["--fp8-scales", "row"], ["--fp8-scales needs an FP8 --kv-dtype"] + FP8_NAMES),
    (["--kv-dtype", "fp8", "--k-tail", "8"], ["--k-tail 8 with --kv-dtype fp8 needs",
                                              "--fp8-scales G"]),
    (["--kv-dtype", "fp8", "--fp8-scales", "48"], ["--fp8-scales 48 must divide"]),
] + [
    (["--kv-dtype", name, "--fp8-scales", "16", "--v-dim", "24"], ["v_dim (24)"])
    for name in FP8_NAMES
] + [
    (["--kv-dtype", "q8_0", "--k-tail", "40"], ["--kv-dtype q8_0", "blocks of 32",
                                                "--k-tail 40"]),
    (["--kv-dtype", "q4_0", "--head-dim", "48"], ["--kv-dtype q4_0", "head_dim 48"]),
    (["--kv-dtype", "q8_0", "--paged-block", "8"], ["--paged-block"]),
    (["--kv-group", "16"], ["--kv-group needs an asymmetric --kv-dtype"]),
    (["--kv-dtype", "u8", "--kv-group", "48"], ["--kv-group 48 must divide"]),
    (["--kv-dtype", "u4", "--kv-group", "7"], ["--kv-group 7", "be even"]),
    (["--k-tail", "8", "--packed"], ["--k-tail with --packed"]),
    (["--kv-heads", "3"], ["--q-heads (8)", "--kv-heads (3)"]),
    (["--packed", "--q-len", "60", "--kv-len", "48"], ["--packed needs --kv-len"]),
    (["--tree", "chain", "--q-len", "60", "--kv-len", "48"], ["--tree needs --q-len"]),
    (["--window", "9223372036854775807"], ["--window expects an integer"]),
    (["--backward", "--kv-dtype", "q8_0"], ["--backward needs --kv-dtype " + either(FLOAT_KV)]),
    (["--backward", "--kv-dtype", "fp8"], ["--backward needs --kv-dtype"]),
    (["--backward", "--precision", "int8", "--kv-dtype", "q4_0"],
     ["--backward needs --kv-dtype"]),
    (["--backward", "--precision", "int8"], ["--backward takes --precision default or bf16"]),
    (["--backward", "--k-tail", "8"], ["--backward does not take --k-tail"]),
    (["--backward", "--shared-prefix", "10"], ["--backward does not take a shared prefix"]),
    (["--backward", "--splits", "4"], ["--splits"]),
    (["--backward", "--plan"], ["--plan"]),
    (["--backward", "--paged-block", "8"], ["--backward", "--paged-block"]),
]


def unbuilt_isa(exe):
    """An ISA name `attn info` lists as not built into the library, or None."""
    for line in attn(exe, "info").stdout.split("\n"):
        m = re.match(r"^  ([a-z0-9]+)\s+(yes|no)\s+(yes|no)\b", line)
        if m and m.group(3) == "no":
            return m.group(1)
    return None


def usage_errors(exe):
    c = Checker()
    cases = [(["run", "--preset", "small"] + QUICK + args, want) for args, want in USAGE]
    isa = unbuilt_isa(exe)
    if isa:
        for cmd in ("run", "bench"):
            cases.append(([cmd, "--isa", isa] + QUICK, ["--isa %s" % isa, "built without it"]))
    for args, want in cases:
        r = attn(exe, *args)
        line = " ".join(args)
        c.check(r.returncode == 2, "attn %s: exit %d, not 2 (%s)" % (line, r.returncode,
                                                                     r.stderr.strip()))
        c.check(r.stdout == "", "attn %s: printed to stdout before the error: %r"
                % (line, r.stdout[:200]))
        c.check(r.stderr.startswith("attn %s: " % args[0]),
                "attn %s: message does not start 'attn %s: ': %r" % (line, args[0], r.stderr))
        for w in want:
            c.check(w in r.stderr, "attn %s: message lacks %r: %r" % (line, w, r.stderr))
    # The combinations that are valid stay valid.
    for args in (["--kv-dtype", "fp8", "--k-tail", "8", "--fp8-scales", "8"],
                 ["--kv-dtype", "q8_0", "--k-tail", "32"],
                 ["--kv-dtype", "u8", "--kv-group", "16", "--paged-block", "8"],
                 ["--kv-dtype", "u4", "--kv-group", "32", "--packed"],
                 ["--backward", "--precision", "bf16"]):
        r = attn(exe, "run", *SMALL, *args)
        c.check(r.returncode == 0, "attn run %s: exit %d (%s)" % (" ".join(args), r.returncode,
                                                                 r.stderr.strip()))
    return c.result("usage-errors")


# ------------------------------------------------------------ progress

def progress(exe):
    """The test hook prints the line at the start of every call: every
    line's total is the phase's, the first call's included."""
    c = Checker()
    hook = {"ATTN_CLI_TEST": "progress"}
    for args, phases, calls in (
            (["run"] + SMALL[:-5] + ["--iters", "3", "--verify-rows", "0"], 1, 4),
            (["run"] + SMALL[:-5] + ["--iters", "2", "--plan", "--verify-rows", "0"], 1, 3),
            (["bench", "--presets", "small,small", "--iters", "2", "--verify-rows", "0"], 2, 3)):
        r = attn(exe, *args, env=hook)
        counts = [(int(a), int(b)) for a, b in re.findall(r"call (\d+)/(\d+),", r.stderr)]
        want = [(k, calls) for _ in range(phases) for k in range(1, calls + 1)]
        c.check(r.returncode == 0, "attn %s: exit %d" % (" ".join(args), r.returncode))
        c.check(counts == want, "attn %s: progress counts %r, want %r"
                % (" ".join(args), counts, want))
    return c.result("progress")


# ------------------------------------------------------------ --json

RUN_KEYS = {"command", "libattn", "preset", "about", "changed_by_options", "op", "shape",
            "options", "isa", "threads", "split_workspace_bytes", "time", "gflop_per_call",
            "gflops", "visible_pairs_percent", "peak", "busy", "busy_why", "memory", "verify"}
SHAPE_KEYS = {"batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim", "v_dim"}
OPTION_KEYS = {"causal", "window", "window_right", "scale", "softcap", "kv_dtype", "k_tail",
               "fp8_scales", "sinks", "alibi", "packed", "paged_block", "shared_prefix", "topk",
               "tree", "precision", "precision_native", "splits", "seed"}
TIME_KEYS = {"calls", "single_cold", "mean_ms", "median_ms", "min_ms"}
PEAK_KEYS = {"gflops", "units", "kind", "threads", "before_gflops", "after_gflops",
             "single_thread_gflops", "cores"}
MEMORY_KEYS = {"kv_gb_s", "kv_mb_per_call", "copies", "floor_gb_s", "x_floor", "t_star_ms",
               "x_t_star"}
VERIFY_KEYS = {"rows", "against", "max_abs", "max_rel", "worst_ratio", "pass"}
BENCH_KEYS = {"command", "libattn", "isa", "threads", "peak", "busy", "busy_why", "presets"}
PRESET_KEYS = {"preset", "kv_dtype", "isa", "threads", "time", "gflops", "peak_percent",
               "kv_gb_s", "x_floor", "x_t_star", "verify"}


def document(c, exe, args, env=None):
    """stdout parsed as one JSON document (json.loads takes nothing else)."""
    r = attn(exe, *args, env=env)
    line = "attn " + " ".join(args)
    if not c.check(r.returncode == 0, "%s: exit %d (%s)" % (line, r.returncode, r.stderr)):
        return None
    try:
        return json.loads(r.stdout)
    except ValueError as err:
        c.check(False, "%s: stdout is not one JSON document (%s): %r" % (line, err, r.stdout))
        return None


def keys(c, what, obj, want):
    if c.check(isinstance(obj, dict), "%s: not an object: %r" % (what, obj)):
        c.check(set(obj) == want, "%s: keys %s, want %s" % (what, sorted(obj), sorted(want)))


def json_output(exe):
    c = Checker()
    for cmd in ("run", "bench"):
        h = attn(exe, cmd, "--help").stdout
        c.check("--json" in h and "JSON (--json):" in h, "attn %s --help: no --json" % cmd)
    runs = (["run"] + SMALL[:-5] + ["--iters", "2", "--verify-rows", "4", "--json"],
            ["run", "--preset", "decode", "--kv-len", "512", "--q-heads", "8", "--kv-heads", "2",
             "--head-dim", "64", "--iters", "2", "--verify-rows", "2", "--json", "--no-progress"],
            ["run"] + SMALL[:-5] + ["--backward", "--iters", "1", "--verify-rows", "2", "--json"],
            ["run"] + SMALL[:-5] + ["--verify-rows", "0", "--iters", "1", "--kv-dtype", "fp8",
                                    "--fp8-scales", "row", "--tree", "flat", "--json"])
    for args in runs:
        d = document(c, exe, args)
        if d is None:
            continue
        what = " ".join(args)
        keys(c, what, d, RUN_KEYS)
        keys(c, what + " shape", d.get("shape"), SHAPE_KEYS)
        keys(c, what + " options", d.get("options"), OPTION_KEYS)
        keys(c, what + " time", d.get("time"), TIME_KEYS)
        keys(c, what + " peak", d.get("peak"), PEAK_KEYS | {"percent"})
        keys(c, what + " verify", d.get("verify"), VERIFY_KEYS)
        c.check(d.get("command") == "run" and isinstance(d.get("busy"), bool),
                "%s: command %r, busy %r" % (what, d.get("command"), d.get("busy")))
        t = d.get("time", {})
        c.check(t.get("calls", 0) >= 1 and 0 < t.get("min_ms", 0) <= t.get("median_ms", 0),
                "%s: time %r" % (what, t))
        v = d.get("verify", {})
        rows = int(args[args.index("--verify-rows") + 1])
        c.check(v.get("rows") == rows and v.get("pass") is (True if rows else None),
                "%s: verify %r" % (what, v))
        if "decode" in args:
            keys(c, what + " memory", d.get("memory"), MEMORY_KEYS)
            c.check(d["memory"]["copies"] >= 2 and d["memory"]["floor_gb_s"] > 0,
                    "%s: memory %r" % (what, d.get("memory")))
        else:
            c.check(d.get("memory") is None, "%s: memory %r" % (what, d.get("memory")))
        if "--backward" in args:
            c.check(d.get("op") == "attn_backward", "%s: op %r" % (what, d.get("op")))
        if "--tree" in args:
            o = d.get("options", {})
            c.check(o.get("tree") == "flat" and o.get("fp8_scales") == "row"
                    and o.get("kv_dtype") == "fp8", "%s: options %r" % (what, o))
    args = ["bench", "--presets", "small,decode-f16", "--iters", "1", "--verify-rows", "1",
            "--json", "--no-progress"]
    d = document(c, exe, args)
    if d is not None:
        keys(c, "bench", d, BENCH_KEYS)
        keys(c, "bench peak", d.get("peak"), PEAK_KEYS)
        presets = d.get("presets", [])
        c.check([p.get("preset") for p in presets] == ["small", "decode-f16"],
                "bench presets %r" % presets)
        for p in presets:
            keys(c, "bench preset", p, PRESET_KEYS)
            keys(c, "bench preset time", p.get("time"), TIME_KEYS)
            keys(c, "bench preset verify", p.get("verify"), VERIFY_KEYS)
        if len(presets) == 2:
            c.check(presets[0]["kv_gb_s"] is None and presets[1]["kv_gb_s"] > 0,
                    "bench GB/s: %r, %r" % (presets[0]["kv_gb_s"], presets[1]["kv_gb_s"]))
    return c.result("json")


# ------------------------------------------------------------ busy

def busy_warning(exe):
    c = Checker()
    hook = {"ATTN_CLI_TEST": "busy"}
    warning = "warning: the machine looks busy"
    d = document(c, exe, ["run"] + SMALL + ["--json"], env=hook)
    if d is not None:
        c.check(d.get("busy") is True and "ATTN_CLI_TEST" in (d.get("busy_why") or ""),
                "run --json under the hook: busy %r, why %r" % (d.get("busy"), d.get("busy_why")))
    for args in (["run"] + SMALL, ["bench", "--presets", "small"] + QUICK):
        r = attn(exe, *args, env=hook)
        line = "attn " + " ".join(args)
        c.check(r.returncode == 0, "%s: exit %d" % (line, r.returncode))
        c.check(("attn %s: %s" % (args[0], warning)) in r.stderr and "unreliable" in r.stderr,
                "%s: no busy warning on stderr: %r" % (line, r.stderr))
        c.check("unreliable, the machine looks busy" in r.stdout,
                "%s: the peak figure is not marked: %r" % (line, r.stdout))
        c.check(warning not in r.stdout, "%s: the warning is on stdout" % line)
    # Without the hook the field is there; its value is the machine's.
    d = document(c, exe, ["run"] + SMALL + ["--json"])
    if d is not None:
        c.check(isinstance(d.get("busy"), bool) and
                (d["busy_why"] is None) == (not d["busy"]),
                "run --json: busy %r, why %r" % (d.get("busy"), d.get("busy_why")))
    return c.result("busy-warning")


# ------------------------------------------------------------ completion

def complete(script, words, cword=None):
    """What _attn offers for COMP_WORDS = words, COMP_CWORD = cword (the last)."""
    cword = len(words) - 1 if cword is None else cword
    prog = ". '%s'; COMP_WORDS=(%s); COMP_CWORD=%d; _attn; printf '%%s\\n' \"${COMPREPLY[@]}\"" % (
        script, " ".join("'%s'" % w for w in words), cword)
    r = subprocess.run(["bash", "-c", prog], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, check=False)
    return set(w for w in r.stdout.split("\n") if w), r.stderr


def parser_names(exe, cmd, option):
    """The names the parser's own message lists for a bad value."""
    r = attn(exe, cmd, option, "no-such-value")
    m = re.search(r"(?:expects|\() ?([^(]*?)(?:, got '|\)\n)", r.stderr)
    if not m:
        return None
    return set(re.split(r", | or ", m.group(1).strip()))


def completion(exe, script):
    if not shutil.which("bash"):
        print("skipping: no bash")
        return 77
    c = Checker()

    def offers(words, want, exact=True):
        got, err = complete(script, words)
        ok = got == set(want) if exact else set(want) <= got
        c.check(ok, "%r<TAB>: offers %s, want %s%s" % (" ".join(words), sorted(got),
                                                        sorted(want), (": " + err) if err else ""))
        return got

    offers(["attn", ""], ["info", "run", "bench", "completion", "help", "--help", "--version"])
    offers(["attn", "help", "r"], ["run"])
    offers(["attn", "run", "--kv"], ["--kv-dtype", "--kv-group", "--kv-heads", "--kv-len"])
    offers(["attn", "run", "--causal", "--pre"], ["--preset", "--precision"])
    offers(["attn", "bench", "--pre"], ["--presets"])
    # after an option that takes a name: the names its parser accepts
    for cmd, option in (("run", "--kv-dtype"), ("run", "--precision"), ("run", "--tree"),
                        ("run", "--preset"), ("run", "--isa"), ("bench", "--isa")):
        got = offers(["attn", cmd, option, ""], parser_names(exe, cmd, option) or ["?"])
        for v in got:
            r = attn(exe, cmd, option, v, "--help")
            c.check(r.returncode == 0, "attn %s %s %s: refused (%s)" % (cmd, option, v, r.stderr))
    offers(["attn", "run", "--kv-dtype", "f"], [n for n in KV_NAMES if n.startswith("f")])
    offers(["attn", "run", "--kv-dtype", "=", "f"], [n for n in KV_NAMES if n.startswith("f")])
    offers(["attn", "run", "--precision", "="], ["default", "bf16", "int8"])
    offers(["attn", "run", "--fp8-scales", ""], ["row"])
    offers(["attn", "bench", "--presets", "small,pre"], ["small,prefill", "small,prefill-f16"])
    # a free-form value: no option names (bash then offers files)
    for cmd, option in (("run", "--threads"), ("run", "--head-dim"), ("bench", "--iters")):
        offers(["attn", cmd, option, ""], [])
        offers(["attn", cmd, option, "--"], [])
    offers(["attn", "completion", ""], ["bash", "--help"])
    return c.result("completion")


def main(argv):
    cases = {"usage-errors": usage_errors, "progress": progress, "json": json_output,
             "busy-warning": busy_warning}
    if len(argv) == 3 and argv[1] in cases:
        return cases[argv[1]](argv[2])
    if len(argv) == 4 and argv[1] == "completion":
        return completion(argv[2], argv[3])
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

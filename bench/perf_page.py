#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Renders docs/PERFORMANCE.md and its plots from the measured figures.

    perf_page.py                      render docs/PERFORMANCE.md and docs/perf/<machine>.png
    perf_page.py --add DIR --machine NAME [--cpu TEXT] [--system TEXT]
                                      first turn the bench outputs in DIR into
                                      entries of docs/perf/<NAME>.json, then render

The figures live in docs/perf/<machine>.json, one file per machine they were
measured on: its CPU and conditions, a list of entries (one measured call
each: the call, shape, dtypes, ISA, threads, the measured value, the
hardware limit it is held against and its ratio to it, a baseline and the
ratio to that, the target, the source) and notes (the analysis that goes
with a topic's figures). Values are kept as the text the measurement was
reported in ("1.01–1.02", "87 %"), so the page shows them exactly; the
plots parse the numbers out of them.

--add reads what the tools print, so a new machine needs no hand-typing:
  *.json  `attn run --json`, `attn bench --json` (tools/cmd_run.c,
          tools/cmd_bench.c list the keys) or Google Benchmark's JSON of
          build/bench/attn_bench (`bench/readme_table.py --json FILE` keeps it);
  *.txt   the text of the ratio programs of build/bench/: lines
          "ratio <what>  <number>" and "<variant>  median <t> ms (<r>x <base>) ...",
          after a "libattn <version>, ISA <isa>, <n> thread(s)" line.

The page and the plots depend on the data files only (no date, no host
name), so running the script twice gives the same bytes. Needs
python3-matplotlib for the plots (Debian's /usr/bin/python3 has it).
"""
import argparse
import glob
import json
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DATA = os.path.join(ROOT, "docs", "perf")
PAGE = os.path.join(ROOT, "docs", "PERFORMANCE.md")
COMMAND = "/usr/bin/python3 bench/perf_page.py"

# Sections of the page, in order: (topic id, title, the guide of the feature).
TOPICS = [
    ("forward", "Forward, scores and softmax", "guide/benchmarks.md"),
    ("decode", "Decode against the memory floor", "guide/benchmarks.md#the-roofline-of-a-call"),
    ("dispatch", "The default table", "guide/benchmarks.md#which-table-runs-by-default"),
    ("masks", "Masks and score modifiers", "guide/masks.md"),
    ("kv", "KV cache layouts", "guide/kv-layouts.md"),
    ("serving", "Serving: plans, shared prefixes, top-k, cache append", "guide/serving.md"),
    ("quant", "Quantized and FP8 caches", "guide/quantized-caches.md"),
    ("precision", "Precision modes", "guide/precision.md"),
    ("training", "Training: the backward", "guide/training.md"),
    ("split", "Split-KV and merge", "guide/split-merge.md"),
    ("python", "Python and PyTorch", "guide/python.md"),
    ("other", "Other measurements", "guide/benchmarks.md"),
]

# What a limit is, in words: (of_limit phrase, x_limit phrase, is it memory).
LIMITS = {
    "fma_peak": ("of the FMA peak", "× the FMA roofline (FLOPs / FMA peak)", False),
    "dot_peak": ("of the dot-product peak", "× the dot-product roofline", False),
    "read_floor": ("of the read floor's speed", "× the read floor (a plain read of the same bytes)", True),
    "t_star": ("of the roofline T*", "× T*", True),
    "memcpy": ("of memcpy's speed on the same bytes", "× a memcpy of the same bytes", True),
}


def dump_json(obj, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def load_machines(data_dir):
    machines = []
    for path in sorted(glob.glob(os.path.join(data_dir, "*.json"))):
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        m["_file"] = os.path.relpath(path, ROOT)
        m["_id"] = os.path.splitext(os.path.basename(path))[0]
        for e in m.get("entries", []):
            if e.get("topic") not in [t[0] for t in TOPICS]:
                sys.exit("%s: unknown topic %r" % (path, e.get("topic")))
        machines.append(m)
    return machines


# ---------------------------------------------------------------- numbers

NUM = re.compile(r"\d+(?:\.\d+)?")


def numbers(text):
    """The first one or two numbers of a reported value: (lo, hi), or None.
    "87 %" gives (0.87, 0.87), "1.01–1.02" (1.01, 1.02)."""
    if not text:
        return None
    found = [float(x) for x in NUM.findall(text)[:2]]
    if not found:
        return None
    lo = found[0]
    hi = found[1] if len(found) > 1 and re.search(r"\d\s*[–-]\s*\d", text) else lo
    if "%" in text:
        lo, hi = lo / 100.0, hi / 100.0
    return min(lo, hi), max(lo, hi)


def fraction_of_limit(e):
    """(lo, hi) of the share of its limit a call reaches (1 = at the limit)."""
    lim = e.get("limit")
    if not lim:
        return None
    r = numbers(lim.get("ratio"))
    if not r:
        return None
    if lim.get("ratio_kind") == "x_limit":
        return 1.0 / r[1], 1.0 / r[0]
    return r


# ---------------------------------------------------------------- the page

def cell(text):
    if text is None or text == "":
        return "—"
    return str(text).replace("|", "\\|").replace("\n", " ")


def limit_text(lim):
    if not lim:
        return None
    of, x, _ = LIMITS.get(lim.get("kind"), ("of the limit", "× the limit", False))
    phrase = x if lim.get("ratio_kind") == "x_limit" else of
    sep = "" if lim.get("ratio_kind") == "x_limit" and lim["ratio"].endswith("×") else " "
    if lim.get("ratio_kind") == "x_limit" and sep == "":
        phrase = phrase[1:]
    out = "%s%s%s" % (lim["ratio"], sep, phrase)
    if lim.get("value"):
        out += " (%s)" % lim["value"]
    return out


def baseline_text(b):
    if not b:
        return None
    if b.get("ratio"):
        return "%s: %s (%s)" % (b["what"], b["ratio"], b.get("means", ""))
    return b["what"]


def target_text(e):
    t = e.get("target")
    if not t:
        return None
    met = e.get("met")
    return t + ("" if met is None else (": met" if met else ": not met"))


def measured_text(e):
    out = e.get("measured") or "—"
    for isa, v in sorted((e.get("other_isas") or {}).items()):
        out += "; %s: %s" % (isa, v)
    return out


def isa_text(e):
    isa = e.get("isa") or "—"
    t = e.get("threads")
    return isa if t is None else "%s, %s" % (isa, t)


def shape_text(e):
    parts = [p for p in (e.get("shape"), e.get("dtype")) if p]
    return "; ".join(parts) if parts else None


def table(entries):
    with_note = any(e.get("note") for e in entries)
    head = ["call", "shape; dtypes", "ISA, threads", "measured", "against the limit",
            "against a baseline", "target", "source"] + (["note"] if with_note else [])
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in entries:
        row = [e.get("call"), shape_text(e), isa_text(e), measured_text(e),
               limit_text(e.get("limit")), baseline_text(e.get("baseline")), target_text(e),
               e.get("source")] + ([e.get("note")] if with_note else [])
        rows.append("| " + " | ".join(cell(c) for c in row) + " |")
    return rows


def render(machines, plots):
    out = []
    w = out.append
    w("# Performance")
    w("")
    w("<!-- Generated by %s from docs/perf/*.json: edit those, not this file. -->" % COMMAND)
    w("")
    w("Generated by `%s` from the data files of `docs/perf/`, one per machine the "
      "figures were measured on; to add a machine, give the script the JSON or text "
      "the benchmarks print (`--add`, docs/guide/benchmarks.md) and run it again. "
      "How the figures are taken (the FMA peak, the read floor, the roofline T*) is "
      "[guide/benchmarks.md](guide/benchmarks.md); what each feature does, its guide "
      "(linked from each section)." % COMMAND)
    w("")
    w("Every figure holds for the machine, build and load its source names. Ratios "
      "of variants timed in one process hold better than absolute times; rerun a "
      "benchmark on a quiet machine before quoting a figure.")
    w("")
    w("Each tile kernel's inner loop against its unit's limit (instructions, loads and "
      "shuffles per product, llvm-mca's prediction, the rate in cache) is "
      "[perf/ceilings.md](perf/ceilings.md), generated by `/usr/bin/python3 "
      "tools/kernel_ceilings.py`.")
    w("")
    w("## Machines")
    w("")
    w("| data file | CPU | system | figures | plot |")
    w("|---|---|---|---|---|")
    for m in machines:
        plot = plots.get(m["_id"])
        w("| `%s` | %s | %s | %d | %s |" % (
            m["_file"], cell(m.get("cpu")), cell(m.get("system")), len(m.get("entries", [])),
            "[%s](%s)" % (os.path.basename(plot[0]), os.path.relpath(plot[0], os.path.dirname(PAGE)))
            if plot else "—"))
    w("")
    for m in machines:
        if m.get("about"):
            w("**%s.** %s" % (m["_id"], m["about"]))
            w("")
    w("## Against the hardware's limits")
    w("")
    w("Each bar is one call's share of the limit it is held against: the FMA peak "
      "(or the dot-product units' peak) for compute, a plain read of the same bytes "
      "or the roofline T* = max(bytes / read bandwidth, FLOPs / FMA peak) for memory. "
      "1 is the limit itself; a range is drawn as a bar to its low end and a line to "
      "its high end. A machine with no such figure gets its calls against their "
      "baselines instead (this call's time over the baseline's, with the target "
      "marked).")
    w("")
    for m in machines:
        plot = plots.get(m["_id"])
        if not plot:
            w("**%s**: no figure of this machine is held against a limit or a "
              "baseline with a ratio; nothing to plot." % m["_id"])
            w("")
            continue
        w("**%s** (%s):" % (m["_id"], plot[1]))
        w("")
        w("![%s: %s](%s)" % (m["_id"], plot[1], os.path.relpath(plot[0], os.path.dirname(PAGE))))
        w("")
    for topic, title, guide in TOPICS:
        parts = []
        for m in machines:
            es = [e for e in m.get("entries", []) if e["topic"] == topic]
            ns = m.get("notes", {}).get(topic, [])
            if es or ns:
                parts.append((m, es, ns))
        if not parts:
            continue
        w("## " + title)
        w("")
        w("The feature: [%s](%s)." % (guide.split("#")[0], guide))
        w("")
        for m, es, ns in parts:
            w("### %s: %s" % (title.split(":")[0], m["_id"]))
            w("")
            if es:
                out.extend(table(es))
                w("")
            for n in ns:
                w(n)
                w("")
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- plots

def short(e, n=100):
    """A plot label: the call, its dtypes, ISA and threads, then as much of
    the shape as fits."""
    label = e.get("call") or ""
    tags = [e.get("dtype"), e.get("isa")]
    if e.get("threads") and e["threads"] != 1:
        tags.append("%s threads" % e["threads"])
    label += " · " + ", ".join(t for t in tags if t)
    if e.get("shape") and e["shape"] != "as above":
        label += " · " + e["shape"]
    label = label.replace("`", "")
    return label if len(label) <= n else label[:n - 1] + "…"


def plot_machine(m, path):
    """Draws m's figures; returns a caption, or None when there is nothing to draw."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcdefaults()

    lim = [(e, fraction_of_limit(e)) for e in m.get("entries", [])]
    lim = [(e, f) for e, f in lim if f]
    if lim:
        caption = "each call's share of its limit"
        rows = [(short(e), f, LIMITS.get(e["limit"]["kind"], ("", "", False))[2], e["limit"]["ratio"])
                for e, f in lim]
        xmax = max(1.1, max(f[1] for _, f, _, _ in rows) * 1.1)
    else:
        rows = []
        for e in m.get("entries", []):
            b = e.get("baseline") or {}
            r = numbers(b.get("ratio"))
            if r and b.get("means", "").startswith("this call's time"):
                t = re.match(r"\s*≤\s*(\d+(?:\.\d+)?)", e.get("target") or "")
                rows.append((short(e, 80) + " ÷ " + b["what"].replace("`", "")[:30], r, float(t.group(1)) if t else None, b["ratio"]))
        if not rows:
            return None
        caption = "each call's time over its baseline's, target marked"
        xmax = max(max(r[1] for _, r, _, _ in rows), max((t or 0) for _, _, t, _ in rows)) * 1.15
    h = 0.9 + 0.32 * len(rows)
    fig, ax = plt.subplots(figsize=(13, h), dpi=100)
    ys = list(range(len(rows)))[::-1]
    for y, (label, r, third, text) in zip(ys, rows):
        if lim:
            color = "#4477aa" if third else "#cc6677"
        else:
            color = "#999933" if third is None or r[1] <= third else "#cc6677"
        ax.barh(y, r[0], color=color, height=0.6)
        if r[1] > r[0]:
            ax.plot([r[0], r[1]], [y, y], color="black", linewidth=1.2)
        if not lim and third is not None:
            ax.plot([third, third], [y - 0.35, y + 0.35], color="black", linewidth=2)
        ax.text(r[1] + xmax * 0.01, y, text, va="center", fontsize=7)
    ax.set_yticks(ys)
    ax.set_yticklabels([r[0] for r in rows], fontsize=7)
    ax.set_xlim(0, xmax)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=0.8)
    if lim:
        ax.set_xlabel("share of the limit (1 = at the limit); blue: the read floor, memcpy or the "
                      "roofline T*; red: the FMA or dot-product peak", fontsize=8)
    else:
        ax.set_xlabel("time ÷ baseline's time (black tick: target ≤; red: above its target)", fontsize=8)
    ax.set_title("%s: %s" % (m["_id"], caption), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)
    return caption


# ---------------------------------------------------------------- --add

def entry(topic, call, shape, measured, isa=None, threads=None, dtype=None, limit=None,
          baseline=None, source=None):
    return {"topic": topic, "call": call, "shape": shape, "dtype": dtype, "isa": isa,
            "threads": threads, "measured": measured, "limit": limit, "baseline": baseline,
            "target": None, "met": None, "source": source}


def from_attn_json(doc, name):
    """Entries of `attn run --json` or `attn bench --json`."""
    out = []
    src = "`attn %s --json` (libattn %s), %s" % (doc["command"], doc.get("libattn", "?"), name)
    items = [doc] if doc["command"] == "run" else doc.get("presets", [])
    for it in items:
        t = it.get("time") or {}
        med = t.get("median_ms")
        mem = it.get("memory") if doc["command"] == "run" else None
        peak = it.get("peak") if doc["command"] == "run" else doc.get("peak")
        if doc["command"] == "run":
            s = it["shape"]
            shape = "B %d, Hq %d, Hkv %d, Lq %d, Lk %d, d %d" % (
                s["batch"], s["q_heads"], s["kv_heads"], s["q_len"], s["kv_len"], s["head_dim"])
            opts = it.get("options") or {}
            prec = opts.get("precision")
            call = "%s (preset %s%s%s)" % (it.get("op", "attn_forward"), it.get("preset"),
                                          ", changed" if it.get("changed_by_options") else "",
                                          ", %s mode" % prec if prec and prec != "default" else "")
            dtype = opts.get("kv_dtype")
            x_t = (mem or {}).get("x_t_star")
            pct = (peak or {}).get("percent")
        else:
            shape, call, dtype = "preset %s" % it.get("preset"), "attn_forward (preset %s)" % it.get("preset"), it.get("kv_dtype")
            x_t = it.get("x_t_star")
            pct = it.get("peak_percent")
        limit = None
        if x_t:
            limit = {"kind": "t_star", "value": None, "ratio": "%.2f×" % x_t, "ratio_kind": "x_limit"}
        elif pct:
            limit = {"kind": "fma_peak", "value": "%.1f GFLOP/s" % peak["gflops"] if peak and peak.get("gflops") else None,
                     "ratio": "%.0f %%" % pct, "ratio_kind": "of_limit"}
        measured = "%.3g ms" % med if med else None
        if it.get("gflops") and not x_t:
            measured = "%s, %.1f GFLOP/s" % (measured, it["gflops"]) if measured else "%.1f GFLOP/s" % it["gflops"]
        out.append(entry("decode" if x_t else "forward", call, shape, measured, it.get("isa", doc.get("isa")),
                         it.get("threads", doc.get("threads")), dtype, limit, None, src))
    return out


def from_google_benchmark(doc, name):
    """Entries of build/bench/attn_bench's JSON: forward, scores and decode runs."""
    runs = doc.get("benchmarks", [])
    aggregated = any("aggregate_name" in b for b in runs)
    med = {}
    for b in runs:
        if aggregated and b.get("aggregate_name") != "median":
            continue
        med[b["run_name"]] = b
    peaks = [b["flops"] for n, b in med.items() if n.startswith("ref/fma_peak") and "1thread" in n and "flops" in b]
    peak = max(peaks) if peaks else None
    out = []
    src = "`attn_bench` (Google Benchmark JSON), %s" % name
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    for n in sorted(med):
        b = med[n]
        parts = n.split("/")
        if parts[0] not in ("forward", "scores", "decode") or len(parts) < 3:
            continue
        isa = parts[2]
        if isa.startswith(("baseline", "ref")):
            continue
        threads = 2 if "2threads" in isa else 1
        isa = isa.replace("_2threads", "")
        ms = b["real_time"] * scale[b["time_unit"]]
        if "x_Tstar" in b:
            limit = {"kind": "t_star", "value": None, "ratio": "%.2f×" % b["x_Tstar"], "ratio_kind": "x_limit"}
            out.append(entry("decode", "attn_forward, decode", parts[1], "%.3g ms" % ms, isa, threads, None, limit, None, src))
        elif "flops" in b:
            limit = None
            if peak and threads == 1:
                limit = {"kind": "fma_peak", "value": "%.1f GFLOP/s" % (peak / 1e9),
                         "ratio": "%.0f %%" % (100 * b["flops"] / peak), "ratio_kind": "of_limit"}
            call = "attn_scores" if parts[0] == "scores" else "attn_forward"
            out.append(entry("forward", call, parts[1], "%.1f GFLOP/s" % (b["flops"] / 1e9), isa, threads, None,
                             limit, None, src))
    return out


def from_text(text, name):
    """Entries of the ratio programs' text output."""
    out = []
    isa = threads = None
    title = ""
    src = "`build/bench/` output, %s" % name
    for line in text.splitlines():
        m = re.match(r"libattn \S+, ISA (\w+), (\d+) thread", line)
        if m:
            isa, threads = m.group(1), int(m.group(2))
            continue
        if line and not line[0].isspace():
            title = line.strip().rstrip(":")
            continue
        m = re.match(r"\s+ratio (.+?)\s{2,}(\d+(?:\.\d+)?)", line)
        if m:
            what = m.group(1).split(" / ")
            out.append(entry("other", what[0].strip(), title, None, isa, threads,
                             baseline={"what": what[1].strip() if len(what) > 1 else "the baseline",
                                       "ratio": m.group(2), "means": "this call's time ÷ its"},
                             source=src))
            continue
        m = re.match(r"\s+(\S.*?)\s+median\s+([\d.]+) ms \(([\d.]+)x (\S+)\)", line)
        if m:
            out.append(entry("other", m.group(1), title, m.group(2) + " ms", isa, threads,
                             baseline={"what": m.group(4), "ratio": m.group(3) + "×",
                                       "means": "this call's time ÷ its"}, source=src))
    return out


def add(directory, machine, cpu, system):
    new = []
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if name.endswith(".json"):
            doc = json.loads(text)
            if doc.get("command") in ("run", "bench"):
                new += from_attn_json(doc, name)
            elif "benchmarks" in doc:
                new += from_google_benchmark(doc, name)
            else:
                print("perf_page: %s: not a JSON this script knows, skipped" % path, file=sys.stderr)
        elif name.endswith(".txt"):
            new += from_text(text, name)
    if not new:
        sys.exit("perf_page: no figures found in %s" % directory)
    path = os.path.join(DATA, machine + ".json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    else:
        if not cpu:
            sys.exit("perf_page: a new machine needs --cpu")
        m = {"machine": machine, "cpu": cpu, "system": system or "not recorded", "about": "",
             "entries": [], "notes": {}}
    added = [e for e in new if e not in m["entries"]]
    m["entries"].extend(added)
    dump_json(m, path)
    print("perf_page: %d new figure(s) in %s" % (len(added), os.path.relpath(path, ROOT)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--add", metavar="DIR", help="bench outputs to turn into a machine's entries")
    ap.add_argument("--machine", help="the data file's name (docs/perf/<NAME>.json) for --add")
    ap.add_argument("--cpu", help="the CPU, for a new machine")
    ap.add_argument("--system", help="cores, VM, load: the conditions, for a new machine")
    args = ap.parse_args()
    if args.add:
        if not args.machine or not re.match(r"^[a-z0-9][a-z0-9-]*$", args.machine):
            sys.exit("perf_page: --add needs --machine NAME (lower case, digits, '-')")
        add(args.add, args.machine, args.cpu, args.system)
    machines = load_machines(DATA)
    plots = {}
    for m in machines:
        path = os.path.join(DATA, m["_id"] + ".png")
        caption = plot_machine(m, path)
        if caption:
            plots[m["_id"]] = (path, caption)
        elif os.path.exists(path):
            os.remove(path)
    page = render(machines, plots)
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(page)
    print("perf_page: wrote %s and %d plot(s) from %d machine(s)" % (
        os.path.relpath(PAGE, ROOT), len(plots), len(machines)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs bench/'s benchmarks once and prints the forward/decode results table.

    python3 bench/readme_table.py [BUILD_DIR] [--repetitions N] [--json FILE]

The table is Markdown (`./build.sh bench --readme-table` prints it);
--json FILE also keeps the run's Google Benchmark JSON, which
`bench/perf_page.py --add` turns into a machine's figures for
docs/PERFORMANCE.md (docs/guide/benchmarks.md).

Every figure in the table comes from this one run of BUILD_DIR/bench/attn_bench
(medians of N repetitions, 1 thread unless a row says otherwise): libattn's
SIMD tables, the baselines (OpenBLAS, a SLEEF softmax loop) and the hardware
references (FMA peak, one read of K and V) measured in the same process, so
the ratios hold even where the absolute figures drift with the machine's load.

OpenBLAS picks its kernels by CPU model and falls back to older ones on CPUs
it does not know (Debian's 0.3.21 runs its AVX2 "Haswell" kernels on AMD Zen 5
and its SSE3 "Prescott" ones on Sapphire Rapids). Unless OPENBLAS_CORETYPE is
set, this script sets it to the newest core type the CPU can run (SkylakeX
with AVX-512, else Haswell with AVX2), and the table says which one ran.
Standard library only.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

FILTER = r"^(scores|softmax|forward|decode|ref)/"
# Benchmarks that are not in the table (the small shapes run once, scalar).
SKIP = ("/scalar", "iterations:1")


def cpu_description():
    model, flags, family, cpu_model = "unknown CPU", set(), "?", "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value
                elif key == "flags" and not flags:
                    flags = set(value.split())
                elif key == "cpu family" and family == "?":
                    family = value
                elif key == "model" and cpu_model == "?":
                    cpu_model = value
    except OSError:
        pass
    return f"{model} (family {family}, model {cpu_model}, {platform.machine()})", flags


def run_bench(build, repetitions, env):
    exe = os.path.join(build, "bench", "attn_bench")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found: build with -Dbench=enabled first (./build.sh bench)")
    cmd = [exe, f"--benchmark_filter={FILTER}", "--benchmark_format=json",
           "--benchmark_min_time=0.3"]
    if repetitions > 1:
        cmd += [f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true"]
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    core = "?"
    for line in out.stderr.splitlines():
        if line.startswith("Core:"):
            core = line.split(":", 1)[1].strip()
    return json.loads(out.stdout), core


def medians(data):
    """run name -> its median entry (its only entry without repetitions)."""
    res = {}
    aggregated = any("aggregate_name" in b for b in data["benchmarks"])
    for b in data["benchmarks"]:
        if aggregated and b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        if any(s in name for s in SKIP):
            continue
        res[name] = b
    return res


def ms(b):
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--json", metavar="FILE", help="also write the run's Google Benchmark JSON here")
    args = ap.parse_args()

    cpu, flags = cpu_description()
    env = dict(os.environ, OPENBLAS_VERBOSE="2")
    if "OPENBLAS_CORETYPE" not in os.environ:
        env["OPENBLAS_CORETYPE"] = "SkylakeX" if "avx512f" in flags else "Haswell"
    data, core = run_bench(args.build, args.repetitions, env)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
    m = medians(data)
    ctx = data["context"]
    isas = [i for i in ctx.get("attn_isas", "").split(",") if i and i != "scalar"]
    default = ctx.get("attn_isa_active", isas[-1] if isas else "?")
    peaks = {n: b["flops"] for n, b in m.items() if n.startswith("ref/fma_peak")}
    peak = max(peaks.values()) if peaks else float("nan")
    peak_name = max(peaks, key=peaks.get) if peaks else "?"

    def get(name):
        return m.get(name)

    rows = []

    def gflops_row(label, base, baseline, base_label):
        cells, dflt = [], None
        for isa in isas:
            b = get(f"{base}/{isa}")
            cells.append(f"{b['flops'] / 1e9:.1f}" if b else "-")
            if isa == default:
                dflt = b
        bl = get(f"{base}/{baseline}") if baseline else None
        pct = f"{100 * dflt['flops'] / peak:.0f} %" if dflt else "-"
        # the same FLOPs on both sides: the rate ratio is the time ratio
        ratio = f"{dflt['flops'] / bl['flops']:.2f}×" if bl and dflt else "-"
        blcell = f"{base_label} {bl['flops'] / 1e9:.1f}" if bl else "-"
        rows.append([label + " (GFLOP/s)"] + cells + [pct, blcell, ratio])

    def ms_row(label, base, baseline, base_label, extra=None):
        cells, dflt = [], None
        for isa in isas:
            b = get(f"{base}/{isa}")
            cells.append(f"{ms(b):.3g} ms" if b else "-")
            if isa == default:
                dflt = b
        bl = get(f"{base}/{baseline}") if baseline else None
        third = extra(dflt) if extra and dflt else "-"
        ratio = f"{ms(bl) / ms(dflt):.2f}×" if bl and dflt else "-"
        blcell = f"{base_label} {ms(bl):.3g} ms" if bl else "-"
        rows.append([label] + cells + [third, blcell, ratio])

    for d in (64, 128):
        gflops_row(f"scores L=2048 d={d}", f"scores/L2048_d{d}", "baseline_sgemm", "sgemm")
    for n in (512, 2048, 4096):
        ms_row(f"softmax {n}×{n}", f"softmax/{n}x{n}", "baseline_sleef_loop", "SLEEF loop",
               extra=(lambda b, n=n: f"{ms(get(f'softmax/{n}x{n}/ref_memcpy')) / ms(b):.2f}× memcpy"
                      if get(f"softmax/{n}x{n}/ref_memcpy") else "-"))
    fwd = "forward/Hq{}_Hkv{}_Lq2048_Lk2048_d128{}"
    gflops_row("prefill B=1 H=8 L=2048 d=128 causal", fwd.format(8, 8, "_causal_f32"),
               "baseline_composition", "composition")
    gflops_row("prefill same, not causal", fwd.format(8, 8, "_f32"), "baseline_composition",
               "composition")
    gflops_row("prefill GQA Hq=32 Hkv=8 causal", fwd.format(32, 8, "_causal_f32"),
               "baseline_composition", "composition")
    gflops_row("prefill H=8 causal, F16 K/V", fwd.format(8, 8, "_causal_f16kv"), None, "")

    # The precision modes (attn.h): "% peak" against the peak of the units
    # the mode runs on (the dot-product loops of bench/peak.c,
    # same run), the baseline the same call in the default mode.
    def dot_peak(kind):
        b = get(f"ref/{kind}dot_peak_avx512_1thread")
        return b["flops"] if b else None
    bf16_peak, int8_peak = dot_peak("bf16"), dot_peak("int8")
    # int8 mode: QK on the int8 units, PV on the FMA (d = dv: half each)
    int8_mode_peak = 2.0 / (1.0 / int8_peak + 1.0 / peak) if int8_peak else None

    def mode_row(label, base, ref_base, ref_label, mode_peak, peak_label):
        cells, dflt = [], None
        for isa in isas:
            b = get(f"{base}/{isa}")
            cells.append(f"{b['flops'] / 1e9:.1f}" if b else "-")
            if isa == default:
                dflt = b
        ref = get(f"{ref_base}/{default}")
        pct = (f"{100 * dflt['flops'] / mode_peak:.0f} % {peak_label}"
               if dflt and mode_peak else "-")
        rows.append([label + " (GFLOP/s)"] + cells +
                    [pct, f"{ref_label} {ref['flops'] / 1e9:.1f}" if ref else "-",
                     f"{dflt['flops'] / ref['flops']:.2f}×" if ref and dflt else "-"])

    c = "_causal"
    mode_row("prefill H=8 causal, BF16 q/k/v, default mode", fwd.format(8, 8, c + "_bf16qkv"),
             fwd.format(8, 8, c + "_f32"), "F32", peak, "FMA")
    mode_row("same, bf16 mode", fwd.format(8, 8, c + "_bf16qkv_bf16mode"),
             fwd.format(8, 8, c + "_bf16qkv"), "default mode", bf16_peak, "bf16 dot")
    mode_row("same, not causal, bf16 mode", fwd.format(8, 8, "_bf16qkv_bf16mode"),
             fwd.format(8, 8, "_f32"), "F32 default", bf16_peak, "bf16 dot")
    mode_row("prefill H=8 causal, F32, bf16 mode", fwd.format(8, 8, c + "_f32_bf16mode"),
             fwd.format(8, 8, c + "_f32"), "default mode", bf16_peak, "bf16 dot")
    mode_row("prefill H=8 causal, Q8_0 K/V, default mode", fwd.format(8, 8, c + "_q8_0kv"),
             fwd.format(8, 8, c + "_f32"), "F32", peak, "FMA")
    mode_row("same, int8 mode", fwd.format(8, 8, c + "_q8_0kv_int8mode"),
             fwd.format(8, 8, c + "_q8_0kv"), "default mode", int8_mode_peak,
             "int8 dot + FMA")

    def tstar(b):
        return f"{b['x_Tstar']:.2f}× T*" if "x_Tstar" in b else "-"

    dec = "decode/Hq32_Hkv8_Lq{}_Lk4096_d128_{}"
    for lq, kv, threads, label in ((1, "f32", "", "decode Lq=1 Lk=4096 Hq=32 Hkv=8, F32 K/V"),
                                   (1, "f16kv", "", "decode same, F16 K/V"),
                                   (4, "f32", "", "decode Lq=4 (speculative), F32 K/V"),
                                   (1, "f32", "_2threads", "decode Lq=1, F32, 2 threads"),
                                   (4, "f32", "_2threads", "decode Lq=4, F32, 2 threads")):
        base = dec.format(lq, kv)
        cells, dflt = [], None
        for isa in isas:
            b = get(f"{base}/{isa}{threads}/real_time")
            cells.append(f"{ms(b):.3g} ms" if b else "-")
            if isa == default:
                dflt = b
        bl = get(f"{base}/baseline_gemv") if not threads else None
        rows.append([label] + cells + [tstar(dflt) if dflt else "-",
                                       f"gemv {ms(bl):.3g} ms" if bl else "-",
                                       f"{ms(bl) / ms(dflt):.2f}×" if bl and dflt else "-"])

    print(f"Measured {time.strftime('%Y-%m-%d')} by `python3 bench/readme_table.py` on "
          f"{cpu}, {ctx.get('num_cpus', '?')} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in ctx.get('load_avg', []))} at the start; "
          f"medians of {args.repetitions}, 1 thread unless the row says 2; default table "
          f"`{default}`; FMA peak {peak / 1e9:.1f} GFLOP/s ({peak_name.split('/')[-1]}); "
          + (f"bf16 dot peak {bf16_peak / 1e9:.1f} GFLOP/s; " if bf16_peak else "")
          + (f"int8 dot peak {int8_peak / 1e9:.1f} GOP/s; " if int8_peak else "") +
          f"OpenBLAS core type {core} (OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']}).")
    print()
    head = ["shape"] + [f"{i}{' (default)' if i == default else ''}" for i in isas] + \
           ["default: % peak / x roofline", "baseline", "baseline ÷ default (time)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()

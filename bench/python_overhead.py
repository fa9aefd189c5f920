#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python binding's cost per call, against the C call, in one process.

    /usr/bin/python3 bench/python_overhead.py [--reps 7] [--calls 20000]

A tiny decode (q [1,8,1,64], k/v [1,8,64,64], f32, causal), the shape where
the binding's own work shows most. Each variant makes --calls calls per
repetition; repetitions are interleaved (so a change of machine load hits
every variant alike) and the min and median of the per-call times printed:

  c          attn_forward through ctypes with every struct built once, on a
             handle without argtypes (the C call and ctypes' own cost: the
             floor; bench/plan_ratio.c times the C call alone)
  plan_run   attn_plan_run through ctypes on a plan made once
  forward    libattn.forward(q, k, v, causal=True)
  prepared   a libattn.prepare(...) object called with (q, k, v)

and prints forward - c and prepared - c (targets: <= 5 us and <= 2 us).
One thread of the library (no threads= keyword); pin the process with taskset.
"""

import argparse
import ctypes
import statistics
import time

import numpy as np

import libattn
from libattn._capi import Options, RowStats, Shape, Tensor, lib


def per_call(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 8, 1, 64)).astype(np.float32)
    k = rng.standard_normal((1, 8, 64, 64)).astype(np.float32)
    v = rng.standard_normal((1, 8, 64, 64)).astype(np.float32)
    out = np.empty((1, 8, 1, 64), np.float32)

    def tensor(a):
        s = [x // 4 for x in a.strides]
        return Tensor(a.__array_interface__["data"][0], 0, s[0], s[1], s[2])

    shape = Shape(1, 8, 8, 1, 64, 64, 64)
    opt = Options()
    opt.flags = 1  # ATTN_CAUSAL
    tq, tk, tv, to = (tensor(a) for a in (q, k, v, out))
    # a handle of its own without argtypes: no conversion but ctypes' own
    raw = ctypes.CDLL(libattn.library_path())
    c_forward = raw.attn_forward
    opt.struct_size = ctypes.sizeof(Options)
    args_c = (ctypes.byref(shape), ctypes.byref(opt), ctypes.byref(tq), ctypes.byref(tk), ctypes.byref(tv),
              ctypes.byref(to), None)
    size = ctypes.c_size_t()
    lib().attn_plan_size(ctypes.byref(shape), opt, ctypes.byref(size))
    mem = ctypes.create_string_buffer(size.value)
    plan = ctypes.c_void_p()
    st = lib().attn_plan_forward(mem, size, ctypes.byref(shape), opt, ctypes.byref(tq),
                                 ctypes.byref(tk), ctypes.byref(tv), ctypes.byref(to), None,
                                 ctypes.byref(plan))
    assert st == 0, st
    run = lib().attn_plan_run
    addr = [a.__array_interface__["data"][0] for a in (q, k, v, out)]
    prepared = libattn.prepare(q, k, v, causal=True)
    variants = {
        "c": lambda: c_forward(*args_c),
        "plan_run": lambda: run(plan, addr[0], addr[1], addr[2], addr[3], None),
        "forward": lambda: libattn.forward(q, k, v, causal=True),
        "prepared": lambda: prepared(q, k, v),
    }
    assert np.array_equal(prepared(q, k, v), libattn.forward(q, k, v, causal=True))
    times = {name: [] for name in variants}
    for _ in range(args.reps + 1):  # the first round warms up
        for name, fn in variants.items():
            times[name].append(per_call(fn, args.calls))
    print("tiny decode q [1,8,1,64], k/v [1,8,64,64], f32, causal; %d reps x %d calls "
          "(min / median, us per call), isa %s" % (args.reps, args.calls, libattn.isa_active()))
    med = {}
    for name, t in times.items():
        t = t[1:]
        med[name] = statistics.median(t) * 1e6
        print("  %-10s %7.2f  %7.2f" % (name, min(t) * 1e6, med[name]))
    print("  forward - c   %6.2f us  (target <= 5)" % (med["forward"] - med["c"]))
    print("  prepared - c  %6.2f us  (target <= 2)" % (med["prepared"] - med["c"]))


if __name__ == "__main__":
    main()

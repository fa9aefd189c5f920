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
             floor; bench/ratios/plan.c times the C call alone)
  plan_run   attn_plan_run through ctypes on a plan made once
  forward    libattn.forward(q, k, v, causal=True)
  prepared   a libattn.prepare(...) object called with (q, k, v)

and prints forward - c and prepared - c (targets: <= 5 us and <= 2 us).
Where PyTorch is installed, also under torch.no_grad() on the same tensors:

  torch_sdpa torch's own SDPA, no mask (torch 1.13: F._scaled_dot_product_attention;
             F.scaled_dot_product_attention where torch has it)
  lt_sdpa    libattn.torch.scaled_dot_product_attention
  lt_op      torch.ops.libattn.scaled_dot_product_attention (the operator)

(target: lt_sdpa <= torch_sdpa), and forward + backward of q/k/v
[16,4,128,32] causal with libattn.torch against torch's SDPA (target: >= 2x
faster; --train-calls calls per repetition).
One thread of the library and of torch; pin the process with taskset.
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
    ap.add_argument("--train-calls", type=int, default=20)
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
    torch = torch_variants(variants, q, k, v)
    print("tiny decode q [1,8,1,64], k/v [1,8,64,64], f32, causal; %d reps x %d calls "
          "(min / median, us per call), isa %s" % (args.reps, args.calls, libattn.isa_active()))
    med = report(variants, args.reps, args.calls, 1e6)
    print("  forward - c   %6.2f us  (target <= 5)" % (med["forward"] - med["c"]))
    print("  prepared - c  %6.2f us  (target <= 2)" % (med["prepared"] - med["c"]))
    if torch is None:
        print("  (no PyTorch: torch variants skipped)")
        return
    print("  lt_sdpa / torch_sdpa  %5.2f  (target <= 1)" % (med["lt_sdpa"] / med["torch_sdpa"]))
    train = train_variants(torch, rng)
    print("forward + backward q/k/v [16,4,128,32] f32 causal; %d reps x %d calls (min / median, "
          "ms per call)" % (args.reps, args.train_calls))
    med = report(train, args.reps, args.train_calls, 1e3)
    print("  torch / libattn  %5.2f  (target >= 2)" % (med["torch"] / med["libattn"]))


def report(variants, reps, calls, unit):
    """Interleaved repetitions (the first warms up); prints min and median."""
    times = {name: [] for name in variants}
    for _ in range(reps + 1):
        for name, fn in variants.items():
            times[name].append(per_call(fn, calls))
    med = {}
    for name, t in times.items():
        t = t[1:]
        med[name] = statistics.median(t) * unit
        print("  %-10s %8.2f  %8.2f" % (name, min(t) * unit, med[name]))
    return med


def _torch_sdpa(torch):
    """torch's fused SDPA: (q, k, v, causal) -> out."""
    F = torch.nn.functional
    if hasattr(F, "scaled_dot_product_attention"):
        return lambda q, k, v, causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return lambda q, k, v, causal: F._scaled_dot_product_attention(
        q, k, v, None, 0.0, False, causal)[0]


def torch_variants(variants, q, k, v):
    """Adds the torch variants to `variants`; returns torch, or None without it."""
    try:
        import torch
        import libattn.torch as lt
    except ImportError:
        return None
    torch.set_num_threads(1)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    sdpa = _torch_sdpa(torch)
    op = torch.ops.libattn.scaled_dot_product_attention

    def no_grad(fn):
        def run():
            with torch.no_grad():
                fn()
        return run
    # a decode row sees every key, as the C variants' (bottom-right) causal
    # row does; torch's is_causal is top-left (key 0 only at Lq 1)
    variants["torch_sdpa"] = no_grad(lambda: sdpa(tq, tk, tv, False))
    variants["lt_sdpa"] = no_grad(lambda: lt.scaled_dot_product_attention(tq, tk, tv))
    variants["lt_op"] = no_grad(lambda: op(tq, tk, tv))
    with torch.no_grad():
        want = sdpa(tq, tk, tv, False)
        assert torch.allclose(lt.scaled_dot_product_attention(tq, tk, tv), want, atol=1e-5)
        assert torch.allclose(op(tq, tk, tv), want, atol=1e-5)
    return torch


def train_variants(torch, rng):
    import libattn.torch as lt
    shapes = [(16, 4, 128, 32)] * 3
    leaves = [torch.tensor(rng.standard_normal(s), dtype=torch.float32, requires_grad=True)
              for s in shapes]
    dout = torch.tensor(rng.standard_normal(shapes[0]), dtype=torch.float32)
    sdpa = _torch_sdpa(torch)

    def step(fn):
        def run():
            for t in leaves:
                t.grad = None
            fn(*leaves).backward(dout)
        return run
    return {"torch": step(lambda q, k, v: sdpa(q, k, v, True)),
            "libattn": step(lambda q, k, v: lt.scaled_dot_product_attention(q, k, v,
                                                                           is_causal=True))}


if __name__ == "__main__":
    main()

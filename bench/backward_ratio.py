#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The backward's speed targets as ratios measured in one process.

    /usr/bin/python3 bench/backward_ratio.py [--reps 5] [--len 2048] [--threads 1]
                                             [--precision default|bf16]

Shape B=1, H=8, L=2048, d=128, causal by default. Times, each the median of
--reps repetitions run interleaved (forward, backward, torch, forward, ...)
so that a change of machine load hits all of them alike:

  forward    libattn.forward(..., stats=True)
  backward   libattn.backward (dq, dk, dv)
  torch      the backward pass of torch's autograd through the math path
             (q k^T * scale, causal mask, softmax, @ v) in float32, on the
             same thread count, its forward done before the clock starts
  torch_step the same forward and backward together (a training step's
             attention), against libattn's forward + backward

and prints backward/forward (target <= 2.2) and torch's forward+backward over
libattn's (target >= 3; >= 2.5 on the training shape --batch 16 --heads 4
--len 128 --dim 32). --precision applies to libattn's forward and backward
alike (torch stays f32). The library's ISA is the active one (ATTN_ISA=...
to pick another).
"""

import argparse
import math
import statistics
import sys
import time

import numpy as np

import libattn


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--len", type=int, default=2048, dest="length")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-causal", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--precision", default="default", choices=("default", "bf16"))
    args = ap.parse_args(argv[1:])
    causal = not args.no_causal
    rng = np.random.default_rng(0)
    shape = (args.batch, args.heads, args.length, args.dim)
    q, k, v, dout = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    kw = dict(causal=causal, threads=args.threads, precision=args.precision)
    out, st = libattn.forward(q, k, v, stats=True, **kw)

    torch = None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(args.threads)
        except ImportError:
            print("torch not installed: no torch comparison")

    def run_torch():
        t_start = time.perf_counter()
        tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (q, k, v))
        s = (tq @ tk.transpose(-1, -2)) * (1.0 / math.sqrt(args.dim))
        if causal:
            keep = torch.ones(args.length, args.length, dtype=torch.bool).tril()
            s = s.masked_fill(~keep, float("-inf"))
        o = torch.softmax(s, dim=-1) @ tv
        g = torch.from_numpy(dout)
        t0 = time.perf_counter()
        o.backward(g)
        t1 = time.perf_counter()
        return t1 - t0, t1 - t_start

    times = {"forward": [], "backward": [], "torch": [], "torch_step": []}
    for _ in range(args.reps):
        t0 = time.perf_counter()
        libattn.forward(q, k, v, stats=True, **kw)
        times["forward"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        libattn.backward(q, k, v, out, dout, st["lse"], **kw)
        times["backward"].append(time.perf_counter() - t0)
        if torch is not None:
            back, step = run_torch()
            times["torch"].append(back)
            times["torch_step"].append(step)
    med = {name: statistics.median(t) for name, t in times.items() if t}
    print("libattn %s, ISA %s, %d thread(s), B=%d H=%d L=%d d=%d %s, precision %s, median of %d"
          % (libattn.version(), libattn.isa_active(), args.threads, args.batch, args.heads,
             args.length, args.dim, "causal" if causal else "full", args.precision, args.reps))
    for name, t in med.items():
        print("  %-9s %8.1f ms" % (name, t * 1e3))
    print("backward / forward       %.2f   (target <= 2.2)" % (med["backward"] / med["forward"]))
    if "torch" in med:
        print("torch backward / backward %.2f" % (med["torch"] / med["backward"]))
        print("torch forward+backward / libattn forward+backward %.2f   (target >= 3)"
              % (med["torch_step"] / (med["forward"] + med["backward"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Watching attention entropy per head during training.

    /usr/bin/python3 examples/entropy_watch.py [--steps N] [--plot out.png]

Two failure modes of attention show up in the row entropy that
libattn.forward(..., stats=True) returns at no extra pass over the data:

  collapse  a head puts all its weight on one key: entropy -> 0, usually
            with exploding max scores (logit growth);
  flatness  a head spreads its weight evenly: entropy -> log n, the head
            averages its inputs and carries no information.

A row that sees n keys has entropy in [0, log n], so EntropyMonitor
normalises each row by log n (n differs per row under a causal mask) and
averages per head. The "training run" here is synthetic: four heads whose
query projections drift, one towards collapse (its logits grow), one towards
flatness (its logits shrink), two that stay healthy. In a real training loop
call monitor.update(step, stats, visible) after the forward pass.
"""

import argparse
import math
import sys

try:
    import numpy as np
except ImportError as err:
    print("entropy_watch.py needs NumPy: %s" % err)
    sys.exit(77)  # meson's "skipped"

import libattn


def visible_keys(q_len, kv_len, causal, window=0):
    """Keys each query row sees (the masks' row counts), int [q_len]."""
    i = np.arange(q_len)
    last = i + (kv_len - q_len)                  # bottom-right aligned position
    hi = np.minimum(last, kv_len - 1) if causal else np.full(q_len, kv_len - 1)
    lo = np.maximum(last - window + 1, 0) if window else np.zeros(q_len, dtype=int)
    return np.maximum(hi - lo + 1, 0)


class EntropyMonitor:
    """Per-head normalised entropy with collapse/flatness alarms.

    collapse_below / flat_above are fractions of log n; `patience` steps in a
    row must agree before a head is flagged, so one odd batch does not alarm.
    """

    def __init__(self, heads, collapse_below=0.15, flat_above=0.97, patience=3):
        self.heads = heads
        self.collapse_below = collapse_below
        self.flat_above = flat_above
        self.patience = patience
        self.streak = {"collapse": np.zeros(heads, int), "flat": np.zeros(heads, int)}
        self.flagged = {}          # head -> (kind, step)
        self.history = []          # (step, normalised entropy [H], max score [H])

    def update(self, step, stats, visible):
        entropy = stats["entropy"]                   # [B, H, Lq]
        max_score = stats["max_score"]
        usable = visible > 1                         # log 1 = 0: nothing to normalise
        norm = entropy[..., usable] / np.log(visible[usable])
        per_head = norm.mean(axis=(0, 2))
        top = np.where(np.isfinite(max_score), max_score, -np.inf).max(axis=(0, 2))
        self.history.append((step, per_head, top))
        events = []
        for kind, hit in (("collapse", per_head < self.collapse_below),
                          ("flat", per_head > self.flat_above)):
            self.streak[kind] = np.where(hit, self.streak[kind] + 1, 0)
            for h in np.flatnonzero(self.streak[kind] == self.patience):
                if h not in self.flagged:
                    self.flagged[h] = (kind, step)
                    events.append((h, kind))
        return events


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--len", type=int, default=64, dest="length")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--plot", help="also save the entropy curves to this PNG")
    ap.add_argument("--expect-flags", action="store_true",
                    help="exit 1 unless head 0 is flagged as collapse, head 1 as flat, and "
                         "no other head (used as a test)")
    args = ap.parse_args(argv[1:])

    rng = np.random.default_rng(0)
    H, L, D = args.heads, args.length, 32
    wq = rng.standard_normal((H, D, D)) / math.sqrt(D)
    wk = rng.standard_normal((H, D, D)) / math.sqrt(D)
    # Logit temperature per head over "training": head 0 sharpens, head 1
    # flattens, the rest drift a little.
    def temperature(h, t):
        if h == 0:
            return 1.0 + 14.0 * t ** 2
        if h == 1:
            return max(1.0 - 1.1 * t, 0.02)
        return 1.0 + 0.2 * math.sin(3 * t + h)

    visible = visible_keys(L, L, causal=True)
    monitor = EntropyMonitor(H)
    print("libattn %s on %s, %d threads" % (libattn.version(), libattn.isa_active(),
                                            libattn.thread_pool_size(args.threads)))
    print("step  " + "  ".join("head%d H/logn  max" % h for h in range(H)))
    for step in range(args.steps):
        t = step / max(args.steps - 1, 1)
        x = rng.standard_normal((args.batch, L, D)).astype(np.float32)   # a synthetic batch
        q = np.einsum("bld,hde->bhle", x, wq * np.array([temperature(h, t) for h in
                                                         range(H)])[:, None, None])
        k = np.einsum("bld,hde->bhle", x, wk)
        v = k
        _, stats = libattn.forward(q.astype(np.float32), k.astype(np.float32),
                                   v.astype(np.float32), causal=True, stats=True,
                                   threads=args.threads)
        for h, kind in monitor.update(step, stats, visible):
            print("  !! step %d: head %d %s (normalised entropy %.3f, max score %.1f)"
                  % (step, h, "COLLAPSING" if kind == "collapse" else "FLAT",
                     monitor.history[-1][1][h], monitor.history[-1][2][h]))
        if step % 10 == 0 or step == args.steps - 1:
            _, ent, top = monitor.history[-1]
            print("%4d  " % step + "  ".join("     %5.3f %6.1f" % (e, m) for e, m in zip(ent, top)))

    print("flagged: " + (", ".join("head %d %s at step %d" % (h, kind, s)
                                   for h, (kind, s) in sorted(monitor.flagged.items()))
                         or "nothing"))

    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        steps = [s for s, _, _ in monitor.history]
        ent = np.array([e for _, e, _ in monitor.history])
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for h in range(H):
            ax.plot(steps, ent[:, h], label="head %d" % h)
        ax.axhline(monitor.collapse_below, color="red", linestyle=":", label="collapse")
        ax.axhline(monitor.flat_above, color="orange", linestyle=":", label="flat")
        ax.set_xlabel("step")
        ax.set_ylabel("entropy / log n")
        ax.set_ylim(0, 1.05)
        ax.legend(loc="center left")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        print("wrote %s" % args.plot)

    if args.expect_flags:
        want = {0: "collapse", 1: "flat"}
        got = {h: kind for h, (kind, _) in monitor.flagged.items()}
        if got != want:
            print("FAIL: expected %r, flagged %r" % (want, got))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Training an attention layer with libattn's forward and backward, three ways.

    /usr/bin/python3 examples/train_stability.py [--steps N] [--plot out.png]

A one-layer, multi-head causal attention model (NumPy for the projections,
libattn.forward / libattn.backward for attention itself) learns a synthetic
task: at each position, output the mean embedding of the last WINDOW tokens.
Positions are learned embeddings, so the heads must learn where to look.
The same model and data are trained three times:

  scaled     scores scaled by 1/sqrt(d_k): the softmax starts soft and
             learns to spread over the last WINDOW keys;
  unscaled   scale 1: q.k has a standard deviation of sqrt(d_k) at
             initialisation, the softmax saturates, its gradient vanishes
             and the heads stay collapsed onto single keys;
  lr too high  scaled, but a learning rate 30x too large: the logits grow
             step after step until the heads collapse and the loss blows up.

Every step logs each head's mean normalised entropy (entropy / log n, n the
row's visible keys) and largest score from the forward's row stats, and
flags a run when a head stays collapsed (entropy < COLLAPSE of log n) for
PATIENCE steps, when a score passes MAX_SCORE, or when the loss stops being
finite. The PNG shows loss, entropy and max score of the three runs with
the flag marked, each row on one y axis across the runs. With --expect-flags (the test command) it exits 1 unless
exactly the unscaled and the too-fast runs are flagged.
"""

import argparse
import math
import sys

try:
    import numpy as np
except ImportError as err:
    print("train_stability.py needs NumPy: %s" % err)
    sys.exit(77)  # meson's "skipped"

import libattn

WINDOW = 4
COLLAPSE = 0.15
PATIENCE = 5
MAX_SCORE = 60.0


def visible_keys(length):
    return np.arange(1, length + 1)  # causal, square: row i sees i + 1 keys


class Model:
    def __init__(self, rng, vocab, d_model, heads, d_k, length):
        s = 1.0 / math.sqrt(d_model)
        self.p = {
            "emb": rng.standard_normal((vocab, d_model)),
            "pos": rng.standard_normal((length, d_model)),
            "wq": rng.standard_normal((heads, d_model, d_k)) * s,
            "wk": rng.standard_normal((heads, d_model, d_k)) * s,
            "wv": rng.standard_normal((heads, d_model, d_k)) * s,
            "wo": rng.standard_normal((heads, d_k, d_model)) / math.sqrt(heads * d_k),
        }
        self.m = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.t = 0

    def step(self, tokens, target, scale, lr, threads):
        """One Adam step; returns (loss, stats of the forward)."""
        p = self.p
        x = p["emb"][tokens] + p["pos"][None]                       # [B, L, D]
        f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)   # noqa: E731
        q = f32(np.einsum("bld,hde->bhle", x, p["wq"]))
        k = f32(np.einsum("bld,hde->bhle", x, p["wk"]))
        v = f32(np.einsum("bld,hde->bhle", x, p["wv"]))
        o, stats = libattn.forward(q, k, v, causal=True, scale=scale, stats=True,
                                   threads=threads)
        pred = np.einsum("bhle,hed->bld", o, p["wo"])
        diff = pred - target
        loss = float(np.mean(diff * diff))
        if not math.isfinite(loss):
            return loss, stats
        dpred = 2.0 * diff / diff.size
        g = {"wo": np.einsum("bhle,bld->hed", o, dpred)}
        do = f32(np.einsum("bld,hed->bhle", dpred, p["wo"]))
        dq, dk, dv = libattn.backward(q, k, v, o, do, stats["lse"], causal=True, scale=scale,
                                      threads=threads)
        g["wq"] = np.einsum("bld,bhle->hde", x, dq)
        g["wk"] = np.einsum("bld,bhle->hde", x, dk)
        g["wv"] = np.einsum("bld,bhle->hde", x, dv)
        dx = (np.einsum("bhle,hde->bld", dq, p["wq"]) + np.einsum("bhle,hde->bld", dk, p["wk"])
              + np.einsum("bhle,hde->bld", dv, p["wv"]))
        g["pos"] = dx.sum(axis=0)
        g["emb"] = np.zeros_like(p["emb"])
        np.add.at(g["emb"], tokens, dx)
        self.t += 1
        for name, grad in g.items():  # Adam
            self.m[name] = 0.9 * self.m[name] + 0.1 * grad
            self.v[name] = 0.999 * self.v[name] + 0.001 * grad * grad
            mh = self.m[name] / (1 - 0.9 ** self.t)
            vh = self.v[name] / (1 - 0.999 ** self.t)
            p[name] -= lr * mh / (np.sqrt(vh) + 1e-8)
        return loss, stats


def batch(rng, vocab, emb, size, length):
    tokens = rng.integers(0, vocab, size=(size, length))
    e = emb[tokens]
    target = np.zeros_like(e)
    for w in range(WINDOW):  # mean of the last WINDOW token embeddings
        target[:, w:] += e[:, :length - w] / WINDOW
    return tokens, target


def train(name, scale, lr, args):
    rng = np.random.default_rng(1)
    model = Model(rng, args.vocab, args.d_model, args.heads, args.d_k, args.length)
    data_rng = np.random.default_rng(2)
    target_emb = np.random.default_rng(3).standard_normal((args.vocab, args.d_model))
    visible = visible_keys(args.length)
    usable = visible > 1
    log = {"loss": [], "entropy": [], "max_score": [], "flag": None}
    streak = np.zeros(args.heads, int)
    for step in range(args.steps):
        tokens, target = batch(data_rng, args.vocab, target_emb, args.batch, args.length)
        loss, stats = model.step(tokens, target, scale, lr, args.threads)
        ent = stats["entropy"][..., usable] / np.log(visible[usable])
        per_head = ent.mean(axis=(0, 2))
        top = stats["max_score"].max(axis=(0, 2))
        log["loss"].append(loss)
        log["entropy"].append(per_head)
        log["max_score"].append(top)
        streak = np.where(per_head < COLLAPSE, streak + 1, 0)
        why = None
        if not math.isfinite(loss):
            why = "loss not finite"
        elif (streak >= PATIENCE).any():
            h = int(np.argmax(streak))
            why = "head %d collapsed (entropy %.3f of log n)" % (h, per_head[h])
        elif np.nanmax(top) > MAX_SCORE:
            why = "score %.0f > %.0f" % (np.nanmax(top), MAX_SCORE)
        if why and log["flag"] is None:
            log["flag"] = (step, why)
            print("  !! %s: step %d: %s" % (name, step, why))
        if not math.isfinite(loss):
            break
        if step % 25 == 0 or step == args.steps - 1:
            print("%-11s step %3d  loss %9.4f  entropy/log n %s  max score %s"
                  % (name, step, loss, " ".join("%.2f" % e for e in per_head),
                     " ".join("%6.1f" % m for m in top)))
    return log


def plot(runs, path):
    """The three runs side by side, saved to path; returns the figure and its
    axes [row][run] (None without matplotlib). A row's y axis is shared, so
    the runs' losses compare at a glance."""
    try:
        import matplotlib
    except ImportError as err:
        print("no PNG: %s (install python3-matplotlib)" % err)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, len(runs), figsize=(4.2 * len(runs), 8), sharex="col",
                             sharey="row", squeeze=False)
    for col, (name, log) in enumerate(runs):
        steps = np.arange(len(log["loss"]))
        ent = np.array(log["entropy"])
        top = np.array(log["max_score"])
        loss = np.array(log["loss"])
        axes[0, col].semilogy(steps, np.where(np.isfinite(loss), loss, np.nan))
        for h in range(ent.shape[1]):
            axes[1, col].plot(steps, ent[:, h], label="head %d" % h)
            axes[2, col].plot(steps, top[:, h], label="head %d" % h)
        axes[1, col].axhline(COLLAPSE, color="red", linestyle=":", linewidth=1)
        axes[2, col].axhline(MAX_SCORE, color="red", linestyle=":", linewidth=1)
        axes[1, col].set_ylim(0, 1.05)
        title = name
        if log["flag"]:
            step, why = log["flag"]
            for row in range(3):
                axes[row, col].axvline(step, color="red", linewidth=2, alpha=0.6)
            title += "\nFLAGGED at step %d: %s" % (step, why)
        else:
            title += "\nhealthy"
        axes[0, col].set_title(title, fontsize=9, color="red" if log["flag"] else "green")
        axes[2, col].set_xlabel("step")
    axes[0, 0].set_ylabel("loss")
    axes[1, 0].set_ylabel("entropy / log n")
    axes[2, 0].set_ylabel("max score")
    axes[1, 0].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print("wrote %s" % path)
    return fig, axes


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--len", type=int, default=24, dest="length")
    ap.add_argument("--vocab", type=int, default=16)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--d-k", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--plot", help="save the three runs to this PNG")
    ap.add_argument("--expect-flags", action="store_true",
                    help="exit 1 unless exactly the unscaled and too-fast runs are flagged")
    args = ap.parse_args(argv[1:])
    print("libattn %s on %s" % (libattn.version(), libattn.isa_active()))
    runs = [("scaled", train("scaled", 1.0 / math.sqrt(args.d_k), args.lr, args)),
            ("unscaled", train("unscaled", 1.0, args.lr, args)),
            ("lr too high", train("lr too high", 1.0 / math.sqrt(args.d_k), 30 * args.lr,
                                  args))]
    if args.plot:
        plot(runs, args.plot)
    for name, log in runs:
        print("%-11s final loss %.4f  %s" % (name, log["loss"][-1],
                                              "FLAGGED: %s" % log["flag"][1] if log["flag"]
                                              else "healthy"))
    if args.expect_flags:
        got = [bool(log["flag"]) for _, log in runs]
        if got != [False, True, True]:
            print("FAIL: expected only the unscaled and too-fast runs flagged, got %r" % got)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

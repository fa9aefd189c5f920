#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Attention maps of a toy 16-token sequence under libattn's masks.

    /usr/bin/python3 examples/attention_map.py [out.png]

Renders one heatmap of attention weights (rows: queries, columns: keys) per
mask or score modifier: causal, padding (q_lens/kv_lens), causal sliding
window, a boolean document mask (two packed documents), ALiBi slopes, an
attention sink on a sliding window (gpt-oss style), a two-sided local window
(non-causal), and masks combined. Masked keys (a score of -inf from
attn_scores) are drawn in a grey of their own, so they do not look like
visible keys of weight near 0. Each row is annotated with its entropy H
(nats) and max score m from attn_weights' row statistics (with a sink: also
the sink's share of the row, which its keys' weights leave out); fully
masked rows (no visible key) are hatched, and listed on stdout.

Needs NumPy and matplotlib (Debian: python3-numpy python3-matplotlib); finds
libattn like any libattn Python program (ATTN_LIBRARY, install prefix, ...).
"""

import argparse
import math
import sys

try:
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle
except ImportError as err:
    print("attention_map.py needs NumPy and matplotlib: %s" % err)
    sys.exit(77)  # meson's "skipped"

import libattn

TOKENS = ("the cat sat on the mat it was warm | a dog ran <pad> <pad> <pad>").split()
N = len(TOKENS)          # 16
VALID = TOKENS.index("<pad>")          # 13 real tokens, then padding
DOC_BREAK = TOKENS.index("|")          # a second document starts after '|'
D = 32
CMAP = "viridis"
MASKED = "0.78"          # masked keys: a grey viridis never reaches
DEAD_ROW = "0.9"         # rows with no visible key: hatched over it


def toy_projections():
    """q, k [1, 1, N, D] from fixed random embeddings plus a position signal."""
    rng = np.random.default_rng(2024)
    vocab = {w: rng.standard_normal(D) for w in sorted(set(TOKENS))}
    x = np.stack([vocab[w] for w in TOKENS])
    pos = np.arange(N)[:, None] / N
    x = x + np.sin(pos * np.arange(1, D + 1)[None, :] * 3.0)
    wq = rng.standard_normal((D, D)) / math.sqrt(D)
    wk = rng.standard_normal((D, D)) / math.sqrt(D)
    q = (x @ wq).astype(np.float32)[None, None]
    k = (x @ wk).astype(np.float32)[None, None]
    return q, k


def panels():
    same_doc = np.zeros((N, N), dtype=bool)
    same_doc[:DOC_BREAK + 1, :DOC_BREAK + 1] = True
    same_doc[DOC_BREAK + 1:, DOC_BREAK + 1:] = True
    return [
        ("causal", dict(causal=True)),
        ("padding (q_lens = kv_lens = %d)" % VALID, dict(q_lens=[VALID], kv_lens=[VALID])),
        ("causal sliding window 4", dict(causal=True, window=4)),
        ("document mask (bool)", dict(mask=same_doc)),
        ("causal + ALiBi (alibi=[0.5])", dict(causal=True, alibi=[0.5])),
        ("sink 2.0 + causal window 4\n(gpt-oss style)", dict(causal=True, window=4,
                                                               sinks=[2.0])),
        ("two-sided window (3, 3),\nnot causal", dict(window=(3, 3))),
        ("combined: causal, window 5,\npadding, document mask, softcap 3",
         dict(causal=True, window=5, q_lens=[VALID], kv_lens=[VALID], mask=same_doc,
              softcap=3.0)),
    ]


def masked_keys(q, k, opts):
    """Where attn_scores gives -inf (a sink is no key: scores takes none)."""
    keys = {name: v for name, v in opts.items() if name != "sinks"}
    return np.isneginf(libattn.scores(q, k, **keys)[0, 0])


def render():
    """The figure and, per panel, (title, options, image, masked keys)."""
    q, k = toy_projections()
    cases = panels()
    fig, axes = plt.subplots(2, 4, figsize=(25, 12))
    cmap = plt.get_cmap(CMAP).copy()
    cmap.set_bad(MASKED)  # masked entries of the array below
    drawn = []
    for ax, (title, opts) in zip(axes.flat, cases):
        w, stats = libattn.weights(q, k, stats=True, **opts)
        w = w[0, 0]
        masked = masked_keys(q, k, opts)
        entropy = stats["entropy"][0, 0]
        max_score = stats["max_score"][0, 0]
        dead = np.isneginf(stats["lse"][0, 0])
        print("%-40s fully masked rows: %s" % (title.replace("\n", " "),
              ", ".join("%d (%s)" % (i, TOKENS[i]) for i in np.flatnonzero(dead)) or "none"))

        image = ax.imshow(np.ma.masked_array(w, mask=masked), cmap=cmap, vmin=0.0, vmax=1.0,
                          interpolation="nearest")
        for i in np.flatnonzero(dead):
            ax.add_patch(Rectangle((-0.5, i - 0.5), N, 1, facecolor=DEAD_ROW, edgecolor="0.5",
                                   hatch="///", linewidth=0.0))
        ax.set_title(title, fontsize=11)
        ax.set_xticks(range(N))
        ax.set_xticklabels(TOKENS, rotation=90, fontsize=8)
        ax.set_yticks(range(N))
        ax.set_yticklabels(["%2d %s" % (i, t) for i, t in enumerate(TOKENS)], fontsize=8)
        ax.set_xlabel("key", fontsize=9)
        # Row statistics to the right of the map.
        sink_share = 1.0 - w.sum(axis=-1)  # exp(z - lse): what the sink holds
        for i in range(N):
            text = "masked" if dead[i] else "H=%.2f m=%+.1f" % (entropy[i], max_score[i])
            if "sinks" in opts and not dead[i]:
                text += " s=%.2f" % sink_share[i]
            ax.text(N - 0.2, i, text, va="center", ha="left", fontsize=7,
                    color="0.4" if dead[i] else "black")
        ax.set_xlim(-0.5, N - 0.5)
        ax.text(N - 0.2, -0.9, "H (nats), m", fontsize=7, ha="left")
        drawn.append((title, opts, image, masked))

    fig.suptitle("libattn attention weights of a 16-token toy sequence "
                 "(rows: queries; grey: masked keys; hatched: fully masked rows)", fontsize=14)
    fig.subplots_adjust(left=0.04, right=0.93, top=0.93, bottom=0.09, wspace=0.62,
                        hspace=0.32)
    fig.colorbar(drawn[0][2], ax=axes, fraction=0.015, pad=0.06, label="weight")
    fig.legend(handles=[Patch(facecolor=MASKED, edgecolor="0.5", label="masked key"),
                        Patch(facecolor=DEAD_ROW, edgecolor="0.5", hatch="///",
                              label="fully masked row")],
               loc="lower center", ncol=2, fontsize=10, frameon=False)
    return fig, drawn


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                 epilog="Needs NumPy and matplotlib.")
    ap.add_argument("out", nargs="?", default="attention_map.png",
                    help="the PNG to write (default: attention_map.png)")
    args = ap.parse_args(argv[1:])
    print("libattn %s on %s" % (libattn.version(), libattn.isa_active()))
    fig, _ = render()
    fig.savefig(args.out, dpi=90)
    print("wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

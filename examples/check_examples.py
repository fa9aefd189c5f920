#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks of the examples' plots and command lines (suite 'examples').

    check_examples.py attention-map-help     --help prints usage, writes no file
    check_examples.py attention-map-masked   masked keys have a colour of their own
    check_examples.py train-stability-axes   each row's y axis shared across runs

Run with the examples' environment (PYTHONPATH, ATTN_LIBRARY, MPLBACKEND=Agg);
exits 77 (skipped) without NumPy or matplotlib.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.colors as mcolors
    import matplotlib.pyplot
except ImportError as err:
    print("skipping: %s" % err)
    sys.exit(77)

sys.path.insert(0, HERE)


def attention_map_help():
    with tempfile.TemporaryDirectory() as cwd:
        r = subprocess.run([sys.executable, os.path.join(HERE, "attention_map.py"), "--help"],
                           cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, check=False)
        left = os.listdir(cwd)
    ok = r.returncode == 0 and r.stdout.startswith("usage:") and not left
    if not ok:
        print("FAIL attention_map.py --help: exit %d, files written %r, stdout %r"
              % (r.returncode, left, r.stdout[:300]))
    return ok


def attention_map_masked():
    import libattn
    import attention_map
    fig, drawn = attention_map.render()
    q, k = attention_map.toy_projections()
    ok = True
    for title, opts, image, masked in drawn:
        name = title.replace("\n", " ")
        keys = {key: v for key, v in opts.items() if key != "sinks"}
        want = np.isneginf(libattn.scores(q, k, **keys)[0, 0])
        arr = image.get_array()
        got = np.ma.getmaskarray(arr)
        if not np.array_equal(got, want):
            print("FAIL %s: the image masks %d cells, the scores %d" % (name, got.sum(),
                                                                       want.sum()))
            ok = False
            continue
        rgba = image.to_rgba(arr)
        bad = np.array(image.cmap.get_bad())
        # every masked cell in the bad colour, no visible cell in it
        if want.any() and not np.allclose(rgba[want], bad):
            print("FAIL %s: masked cells are not in the masked colour" % name)
            ok = False
        visible = rgba[~want]
        if (np.abs(visible - bad).max(axis=-1) < 0.05).any():
            print("FAIL %s: a visible cell has the masked colour" % name)
            ok = False
    # and the masked colour is none the colour map gives a weight
    cmap = drawn[0][2].cmap
    scale = cmap(np.linspace(0.0, 1.0, 256))
    nearest = np.abs(scale - np.array(cmap.get_bad())).max(axis=-1).min()
    if nearest < 0.1:
        print("FAIL the masked colour %s is a weight's colour (distance %.3f)"
              % (mcolors.to_hex(cmap.get_bad()), nearest))
        ok = False
    if not any(m.any() for _, _, _, m in drawn):
        print("FAIL no panel has a masked key")
        ok = False
    matplotlib.pyplot.close(fig)
    return ok


def train_stability_axes():
    import train_stability
    rng = np.random.default_rng(0)
    runs = []
    for name, scale in (("scaled", 1e-2), ("unscaled", 1.0), ("lr too high", 1e6)):
        steps = 20
        runs.append((name, {"loss": list(scale * (1.0 + rng.random(steps))),
                            "entropy": list(rng.random((steps, 2))),
                            "max_score": list(scale * rng.random((steps, 2))),
                            "flag": None}))
    with tempfile.TemporaryDirectory() as d:
        made = train_stability.plot(runs, os.path.join(d, "t.png"))
    if made is None:
        print("FAIL plot() returned nothing")
        return False
    fig, axes = made
    ok = True
    for row in range(axes.shape[0]):
        first = axes[row, 0]
        for col in range(1, axes.shape[1]):
            ax = axes[row, col]
            if not first.get_shared_y_axes().joined(first, ax) or ax.get_ylim() != first.get_ylim():
                print("FAIL row %d: run %d has y limits %r, run 0 %r"
                      % (row, col, ax.get_ylim(), first.get_ylim()))
                ok = False
    matplotlib.pyplot.close(fig)
    return ok


def main(argv):
    cases = {"attention-map-help": attention_map_help,
             "attention-map-masked": attention_map_masked,
             "train-stability-axes": train_stability_axes}
    if len(argv) != 2 or argv[1] not in cases:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    ok = cases[argv[1]]()
    print("%s: %s" % (argv[1], "ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

# SPDX-License-Identifier: MIT
"""The flat-buffer API with NumPy made unimportable (run by test_buffers.py).

Everything here uses the standard library only: array.array buffers,
libattn.Tensor views, and a float64 reference in plain Python.
Exits non-zero with a message on the first mismatch.
"""

import array
import math
import random
import struct
import sys

sys.modules["numpy"] = None  # `import numpy` now raises ImportError

import libattn  # noqa: E402

assert libattn._tensor.np is None, "NumPy should be hidden in this process"
U = 2.0 ** -24
rng = random.Random(1234)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def randn(n):
    return [rng.gauss(0.0, 1.0) for _ in range(n)]


def f32(values):
    return array.array("f", values)


def reference_forward(q, k, v, B, H, HK, LQ, LK, D, DV, causal, kv_lens):
    """Returns out [B][H][LQ][DV] and a per-element bound, in float64."""
    group = H // HK
    out, tol = {}, {}
    scale = struct.unpack("f", struct.pack("f", 1.0 / math.sqrt(D)))[0]
    for b in range(B):
        lk = kv_lens[b]
        for h in range(H):
            g = h // group
            for i in range(LQ):
                scores, bounds = [], []
                for j in range(LK):
                    visible = j < lk and (not causal or j <= i + (lk - LQ))
                    if not visible:
                        continue
                    dot = sum(q[((b * H + h) * LQ + i) * D + c] * k[((b * HK + g) * LK + j) * D + c]
                              for c in range(D))
                    mag = sum(abs(q[((b * H + h) * LQ + i) * D + c] *
                                  k[((b * HK + g) * LK + j) * D + c]) for c in range(D))
                    scores.append((j, dot * scale))
                    bounds.append((D + 2) * U * mag * scale + U * abs(dot * scale))
                if not scores:
                    for c in range(DV):
                        out[b, h, i, c], tol[b, h, i, c] = 0.0, 0.0
                    continue
                m = max(s for _, s in scores)
                e = [(j, math.exp(s - m)) for j, s in scores]
                total = sum(x for _, x in e)
                rel = 2 * max(bounds) + (len(scores) + 16) * U
                for c in range(DV):
                    acc = sum(x / total * v[((b * HK + g) * LK + j) * DV + c] for j, x in e)
                    mag = sum(x / total * abs(v[((b * HK + g) * LK + j) * DV + c]) for j, x in e)
                    out[b, h, i, c] = acc
                    tol[b, h, i, c] = mag * (rel + LK * U) + 16 * U * U
    return out, tol


def check_forward():
    B, H, HK, LQ, LK, D, DV = 2, 4, 2, 3, 6, 5, 3
    q = f32(randn(B * H * LQ * D))
    k = f32(randn(B * HK * LK * D))
    v = f32(randn(B * HK * LK * DV))
    kv_lens = [6, 2]
    qt = libattn.Tensor(q, (B, H, LQ, D))
    kt = libattn.Tensor(k, (B, HK, LK, D))
    vt = libattn.Tensor(v, (B, HK, LK, DV))
    out, st = libattn.forward(qt, kt, vt, causal=True, kv_lens=kv_lens, threads=2, stats=True)
    if not isinstance(out, libattn.Tensor) or out.shape != (B, H, LQ, DV):
        fail("forward returned %r" % (out,))
    if not isinstance(out.buffer, array.array) or out.buffer.typecode != "f":
        fail("result should be backed by array.array('f')")
    want, tol = reference_forward(q, k, v, B, H, HK, LQ, LK, D, DV, True, kv_lens)
    got = out.tolist()
    for (b, h, i, c), w in want.items():
        if abs(got[b][h][i][c] - w) > tol[b, h, i, c]:
            fail("forward[%d][%d][%d][%d] = %r, want %r" % (b, h, i, c, got[b][h][i][c], w))
    # Batch 1 sees 2 keys, bottom-right aligned: row 0 sees none (j <= 0 + 2 - 3).
    ent = st["entropy"].tolist()
    lse = st["lse"].tolist()
    if not (ent[1][0][0] == 0.0 and lse[1][0][0] == -math.inf):
        fail("fully masked row: entropy %r lse %r" % (ent[1][0][0], lse[1][0][0]))
    if abs(ent[1][0][2] - math.log(2)) > 0.7:  # two visible keys: entropy in [0, log 2]
        fail("entropy out of range: %r" % ent[1][0][2])

    # The same inputs through [B,L,H,D] storage described by strides.
    q_blhd = f32([0.0] * len(q))
    for b in range(B):
        for h in range(H):
            for i in range(LQ):
                for c in range(D):
                    q_blhd[((b * LQ + i) * H + h) * D + c] = q[((b * H + h) * LQ + i) * D + c]
    qs = libattn.Tensor(q_blhd, (B, H, LQ, D), strides=(LQ * H * D, D, H * D, 1))
    again = libattn.forward(qs, kt, vt, causal=True, kv_lens=kv_lens)
    if again.tolist() != got:
        fail("strided [B,L,H,D] view gave a different result")

    # Into a caller's buffer, and with bf16 K/V given as raw uint16 bits.
    dest = f32([0.0] * (B * H * LQ * DV))
    libattn.forward(qt, kt, vt, causal=True, kv_lens=kv_lens, out=libattn.Tensor(dest, out.shape))
    if list(dest) != list(out.buffer):
        fail("out= buffer differs")
    kb = array.array("H", [struct.unpack("I", struct.pack("f", x))[0] >> 16 for x in k])
    vb = array.array("H", [struct.unpack("I", struct.pack("f", x))[0] >> 16 for x in v])
    half = libattn.forward(qt, libattn.Tensor(kb, kt.shape, dtype="bf16"),
                           libattn.Tensor(vb, vt.shape, dtype="bf16"), causal=True,
                           kv_lens=kv_lens)
    k_trunc = [struct.unpack("f", struct.pack("I", x << 16))[0] for x in kb]
    v_trunc = [struct.unpack("f", struct.pack("I", x << 16))[0] for x in vb]
    want_h, tol_h = reference_forward(q, k_trunc, v_trunc, B, H, HK, LQ, LK, D, DV, True, kv_lens)
    got_h = half.tolist()
    for (b, h, i, c), w in want_h.items():
        if abs(got_h[b][h][i][c] - w) > tol_h[b, h, i, c]:
            fail("bf16 forward[%d][%d][%d][%d] = %r, want %r" % (b, h, i, c, got_h[b][h][i][c], w))


def check_masks_and_rows():
    LQ, LK, D = 3, 4, 2
    q = libattn.Tensor(f32(randn(LQ * D)), (LQ, D))
    k = libattn.Tensor(f32(randn(LK * D)), (LK, D))
    # A bool mask from a bytearray, broadcast over rows by a 1-row shape.
    mask = libattn.Tensor(bytearray([1, 0, 1, 1]), (1, LK))
    s = libattn.scores(q, k, mask=mask).tolist()
    if not all(row[1] == -math.inf for row in s) or any(row[0] == -math.inf for row in s):
        fail("mask broadcast over rows: %r" % s)
    # bias broadcast over rows by stride 0.
    bias = libattn.Tensor(f32([0.0, 0.0, 100.0, 0.0]), (LQ, LK), strides=(0, 1))
    w = libattn.weights(q, k, bias=bias).tolist()
    if not all(row[2] > 0.99 for row in w):
        fail("bias broadcast: %r" % w)
    # mask_apply in place on a Tensor.
    table = f32([0.5] * (LQ * LK))
    libattn.mask_apply(libattn.Tensor(table, (LQ, LK)), causal=True)
    want = [0.5 if j <= i + 1 else -math.inf for i in range(LQ) for j in range(LK)]
    if list(table) != want:
        fail("mask_apply causal: %r" % list(table))
    # softmax and its backward on flat rows.
    x = f32([1.0, 2.0, 3.0, -math.inf, -math.inf, -math.inf])
    p, st = libattn.softmax(libattn.Tensor(x, (2, 3)), stats=True)
    e = [math.exp(1 - 3), math.exp(2 - 3), 1.0]
    ref = [t / sum(e) for t in e]
    got = p.tolist()
    if any(abs(a - b) > 8 * U for a, b in zip(got[0], ref)) or got[1] != [0.0, 0.0, 0.0]:
        fail("softmax: %r" % got)
    if abs(st["lse"].tolist()[0] - (3 + math.log(sum(e)))) > 8 * U * 4:
        fail("softmax lse: %r" % st["lse"].tolist())
    dp = libattn.Tensor(f32([1.0, 0.0, -1.0, 1.0, 1.0, 1.0]), (2, 3))
    ds = libattn.softmax_backward(p, dp).tolist()
    dot = ref[0] - ref[2]
    want_ds = [ref[0] * (1 - dot), ref[1] * (0 - dot), ref[2] * (-1 - dot)]
    if any(abs(a - b) > 16 * U for a, b in zip(ds[0], want_ds)) or ds[1] != [0.0, 0.0, 0.0]:
        fail("softmax_backward: %r" % ds)
    # In place: x itself is the output.
    libattn.softmax(libattn.Tensor(x, (2, 3)), out=libattn.Tensor(x, (2, 3)))
    if list(x)[:3] != got[0]:
        fail("in-place softmax")


def check_merge():
    # Plumbing of merge() on Tensors, with results exact by construction:
    # one part merges to itself (weight exp(0)/1 = 1), two equal parts with
    # equal lse to the part (weights 1/2: x/2 + x/2 is exact) and lse + log 2
    # (computed in double and rounded once, here as in the library).
    H, LQ, DV = 2, 3, 5
    o = f32(randn(H * LQ * DV))
    l = f32(randn(H * LQ))
    ot, lt = libattn.Tensor(o, (H, LQ, DV)), libattn.Tensor(l, (H, LQ))
    out, lse = libattn.merge([ot], [lt])
    if not isinstance(out, libattn.Tensor) or out.shape != (H, LQ, DV) or lse.shape != (H, LQ):
        fail("merge returned %r, %r" % (out, lse))
    if list(out.buffer) != list(o) or list(lse.buffer) != list(l):
        fail("merge of one part changed it")
    out2, lse2 = libattn.merge([ot, ot], [lt, lt])
    if list(out2.buffer) != list(o):
        fail("merge of two equal parts: %r" % list(out2.buffer))
    want = [struct.unpack("f", struct.pack("f", x + math.log(2.0)))[0] for x in l]
    if list(lse2.buffer) != want:
        fail("merged lse %r, want %r" % (list(lse2.buffer), want))


def check_errors():
    buf = f32([0.0] * 8)

    def expect(exc, text, fn, *args, **kwargs):
        try:
            fn(*args, **kwargs)
        except exc as err:
            if text not in str(err):
                fail("expected %r in %r" % (text, str(err)))
            return
        fail("%s(%r) did not raise %s" % (fn.__name__, args, exc.__name__))

    expect(ValueError, "reaches element 8", libattn.Tensor, buf, (3, 3))
    expect(ValueError, "innermost dimension must be contiguous", libattn.Tensor, buf, (2, 2),
           strides=(4, 2))
    expect(TypeError, "pass dtype='bf16'", libattn.Tensor, array.array("H", [0] * 4), (4,))
    expect(TypeError, "does not hold f16", libattn.Tensor, buf, (8,), dtype="f16")
    expect(TypeError, "wrap buffers in libattn.Tensor", libattn.forward, [[1.0]], [[1.0]],
           [[1.0]])
    t = libattn.Tensor(buf, (2, 4))
    expect(ValueError, "the buffer is read-only", libattn.softmax, t,
           out=libattn.Tensor(bytes(32), (2, 4), dtype="f32"))
    expect(ValueError, "q_lens[0] = 5 is outside [0, 2]", libattn.weights, t, t, q_lens=[5])


check_forward()
check_merge()
check_masks_and_rows()
check_errors()
print("ok: flat-buffer API without NumPy")

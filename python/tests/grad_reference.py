# SPDX-License-Identifier: MIT
"""Float64 gradients of attention and their f32 error bounds, for the backward
tests of the binding (NumPy only; shares no code with libattn).

The bounds follow the derivation written in tests/tolerance.h ("backward"),
at first order, on top of conftest.Reference's score bounds: P = exp(S - lse)
carries the score bound, the actual error of the lse the forward returned
and the subtraction and exp roundings (C_ULPS ulp for the vectorised exp);
dP = dO.V^T and D = dO.O are dot products of dv terms (D also carries the
actual error of the forward's output); dS = P (dP - D); the softcap's
derivative 1 - t^2 is computed from the capped score; dq, dk, dv are sums of
Lk (dq) or group * Lq (dk, dv) products. Using the actual lse and output
errors (not their bounds) tests the backward alone.
"""

import numpy as np

from conftest import C_ULPS, U, Reference, as4


def grads(q, k, v, dout, lse_f32, out_f32, **kw):
    """(dict of exact gradients, dict of bounds) for dq, dk, dv, dbias."""
    ref = Reference(q, k, v, **kw)
    q4, k4, v4, do = (as4(x).astype(np.float64) for x in (q, k, v, dout))
    lse_f32 = np.asarray(lse_f32, dtype=np.float64).reshape(ref.lse.shape)
    out_f32 = as4(out_f32).astype(np.float64)
    batch, hq, lq, d = q4.shape
    hk, lk = k4.shape[1], k4.shape[2]
    g = hq // hk
    kk, vv = np.repeat(k4, g, axis=1), np.repeat(v4, g, axis=1)
    scale = kw.get("scale", 0.0)
    sc = float(np.float32(scale if scale else 1.0 / np.sqrt(d)))
    vis = ref.visible
    live = ~ref.masked_rows
    safe_lse = np.where(live, ref.lse, 0.0)
    p = np.where(vis, ref.weights, 0.0)
    E = ref.score_err

    L = np.where(live, np.abs(np.where(live, lse_f32, 0.0) - safe_lse), 0.0)
    s_fin = np.where(vis, ref.scores, 0.0)
    rel_p = E + L[..., None] + U * (np.abs(s_fin - safe_lse[..., None]) + C_ULPS)
    pe = np.where(vis, p * np.expm1(rel_p) * (1 + 2 * C_ULPS * U) + C_ULPS * U * U, 0.0)

    dv_dim = v4.shape[-1]
    dp = do @ vv.transpose(0, 1, 3, 2)
    F = (dv_dim + 2) * U * (np.abs(do) @ np.abs(vv).transpose(0, 1, 3, 2))
    D = (do * ref.out).sum(-1)
    G = (np.abs(do) * np.abs(out_f32 - ref.out)).sum(-1) + \
        (dv_dim + 2) * U * (np.abs(do) * np.abs(out_f32)).sum(-1)
    a = dp - D[..., None]
    A = F + G[..., None] + U * (np.abs(a) + F + G[..., None])
    ds = np.where(vis, p * a, 0.0)
    S = np.where(vis, pe * (np.abs(a) + A) + p * A + U * (p + pe) * (np.abs(a) + A), 0.0)

    dsp, S2 = ds, S
    cap = kw.get("softcap", 0.0)
    if cap:
        x = (q4 @ kk.transpose(0, 1, 3, 2)) * sc
        t = np.tanh(x / cap)
        slope = 1 - t * t
        T = E / cap + 3 * U * (np.abs(t) + E / cap)
        Gg = (2 * np.abs(t) + T) * T + 2 * U * ((np.abs(t) + T) ** 2 + slope)
        dsp = ds * slope
        S2 = S * (slope + Gg) + np.abs(ds) * Gg + U * (np.abs(ds) + S) * (slope + Gg)

    def group_sum(x):  # [B, Hq, ...] -> [B, Hk, ...]
        return x.reshape(batch, hk, g, *x.shape[2:]).sum(axis=2)

    exact = {
        "dq": sc * dsp @ kk,
        "dk": group_sum(sc * dsp.transpose(0, 1, 3, 2) @ q4),
        "dv": group_sum(p.transpose(0, 1, 3, 2) @ do),
        "dbias": ds,
    }
    mag_s = np.abs(dsp) + S2
    bound = {
        "dq": abs(sc) * (S2 @ np.abs(kk) + (lk + 4) * U * (mag_s @ np.abs(kk))),
        "dk": group_sum(abs(sc) * (S2.transpose(0, 1, 3, 2) @ np.abs(q4) + (g * lq + 4) * U *
                                   (mag_s.transpose(0, 1, 3, 2) @ np.abs(q4)))),
        "dv": group_sum(pe.transpose(0, 1, 3, 2) @ np.abs(do) + (g * lq + 1) * U *
                        ((p + pe).transpose(0, 1, 3, 2) @ np.abs(do))),
        "dbias": S,
    }
    return exact, bound

/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the FP8 scale-group slots of the quant files (quant_<isa>.c):
 * qk_grp and pv_grp.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkasm.h"

/*
 * FP8 scale groups read in place (qk_grp, pv_grp; src/dsp.h): the kernels
 * on an FP8 cache with one scale per key and group of g channels (g a
 * multiple of ATTN_GRP_STEP, d a multiple of g, keys' scales a stride
 * apart, or the same for every key: stride 0) against
 *   - the oracle within the F32 pair bound of the staged values fl32(x s)
 *     (the oracle's to_f32_scaled: the values the kernels claim);
 *   - the table's own F32 kernel on those staged rows, bit for bit: the
 *     claim that each sums as its few-row qk_tile and its pv_tile do (for
 *     qk from 1 to 8 rows, where every table's F32 qk_tile takes its
 *     few-row path; pv_tile sums each element key by key for any rows).
 * The shapes: the bench shape (4 x 256, d 128 in groups of 64), then
 * random rows, keys and groups.
 */
typedef struct grp_case {
    size_t nq, nk, d, g;
    ptrdiff_t ks, ss; /* key row stride (units), scale stride (floats) */
    unsigned char *k;
    float *sc, *kf; /* scales [nk][ss]; staged rows [nk][d] */
} grp_case;

static grp_case grp_case_make(checkasm *c, int i)
{
    const int dt = c->dt;
    grp_case g;
    g.nq = i == 0 ? 4 : pick(c, 1, i % 2 ? 9 : 20);
    g.nk = i == 0 ? 256 : pick(c, 1, c->t->block_k + 1);
    g.g = i == 0 ? 64 : (size_t)ATTN_GRP_STEP << pick(c, 0, 3);
    g.d = i == 0 ? 128 : g.g * pick(c, 1, 256 / g.g);
    g.ks = (ptrdiff_t)(g.d + pick(c, 0, 2));
    g.ss = i % 5 == 4 ? 0 : (ptrdiff_t)(g.d / g.g + pick(c, 0, 3));
    const size_t nsc = g.nk * (size_t)g.ss + g.d / g.g;
    g.k = xalloc(g.nk * (size_t)g.ks * unit_bytes(dt));
    g.sc = xalloc(nsc * 4);
    g.kf = xalloc(g.nk * g.d * 4);
    fill_kv(c, g.k, dt, g.nk * (size_t)g.ks);
    for (size_t j = 0; j < nsc; j++) /* powers of two now and then: exact products */
        g.sc[j] = next(c) % 4 ? uniform(c, 0.001f, 3.0f) : ldexpf(1.0f, (int)pick(c, 0, 12) - 6);
    c->ref->to_f32_scaled[dt](g.k, g.ks * (ptrdiff_t)unit_bytes(dt), g.nk, g.d, g.sc, g.ss, g.g,
                              g.kf, (ptrdiff_t)g.d);
    return g;
}

static void grp_case_free(grp_case *g) { free(g->k), free(g->sc), free(g->kf); }

void check_qk_grp(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        grp_case g = grp_case_make(c, i);
        const size_t nq = g.nq, nk = g.nk, d = g.d, qs = d + pick(c, 0, 3), ss = nk + pick(c, 0, 3);
        const float scale = random_scale(c);
        float *q = xalloc(nq * qs * 4), *s = xalloc(nq * ss * 4), *s_ref = xalloc(nq * ss * 4);
        float *s_f32 = xalloc(nq * ss * 4);
        random_row(c, q, nq * qs, -3.0f, 3.0f);
        for (size_t j = 0; j < nq * ss; j++)
            s[j] = s_ref[j] = s_f32[j] = -7.0f; /* the row gaps must keep it */
        c->t->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s, (ptrdiff_t)ss, g.sc,
                         g.ss, g.g);
        c->ref->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s_ref, (ptrdiff_t)ss,
                           g.sc, g.ss, g.g);
        c->t->qk_tile[ATTN_KV_F32](q, (ptrdiff_t)qs, g.kf, (ptrdiff_t)d, nq, nk, d, scale, s_f32,
                                   (ptrdiff_t)ss);
        for (size_t col = 0; col < ss; col++)
            for (size_t r = 0; r < nq; r++) {
                const float got = s[r * ss + col];
                if (col >= nk) {
                    if (got != -7.0f)
                        fail(c, "nq=%zu nk=%zu d=%zu: wrote into the row gap at [%zu][%zu]", nq,
                             nk, d, r, col);
                    continue;
                }
                double mag = 0.0, folded = 0.0;
                for (size_t t = 0; t < d; t++) {
                    const double qv = q[r * qs + t], kv = g.kf[col * d + t];
                    mag += fabs(qv * kv);
                    folded += fmax(fabs(qv), fabs(kv));
                }
                const double bound = TOL_PAIR(tol_qk((double)d, fabs((double)scale), mag, folded));
                if (!near(got, s_ref[r * ss + col], bound))
                    fail(c, "nq=%zu nk=%zu d=%zu group=%zu: s[%zu][%zu] = %.9g, scalar %.9g, "
                         "bound %.3g", nq, nk, d, g.g, r, col, (double)got,
                         (double)s_ref[r * ss + col], bound);
                if (nq <= 8 && !same_bits(got, s_f32[r * ss + col]))
                    fail(c, "nq=%zu nk=%zu d=%zu group=%zu: s[%zu][%zu] = %a, the table's F32 "
                         "qk_tile on the staged rows %a (bitwise)", nq, nk, d, g.g, r, col,
                         (double)got, (double)s_f32[r * ss + col]);
            }
        if (i == 0)
            CA_BENCH(c, "4 x 256, d 128, groups of 64", 2.0 * nq * nk * d,
                     c->t->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s,
                                      (ptrdiff_t)ss, g.sc, g.ss, g.g),
                     c->ref->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s_ref,
                                        (ptrdiff_t)ss, g.sc, g.ss, g.g));
        free(q), free(s), free(s_ref), free(s_f32);
        grp_case_free(&g);
    }
}

void check_pv_grp(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        grp_case g = grp_case_make(c, i);
        const size_t nq = g.nq, nk = g.nk, dv = g.d, ps = nk + pick(c, 0, 3);
        const size_t as = dv + pick(c, 0, 3);
        float *p = xalloc(nq * ps * 4), *acc = xalloc(nq * as * 4), *acc_ref = xalloc(nq * as * 4);
        float *acc_f32 = xalloc(nq * as * 4), *acc0 = xalloc(nq * as * 4);
        random_weights(c, p, nq * ps);
        random_row(c, acc0, nq * as, -2.0f, 2.0f);
        memcpy(acc, acc0, nq * as * 4);
        memcpy(acc_ref, acc0, nq * as * 4);
        memcpy(acc_f32, acc0, nq * as * 4);
        c->t->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc, (ptrdiff_t)as, g.sc, g.ss,
                         g.g);
        c->ref->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc_ref, (ptrdiff_t)as, g.sc,
                           g.ss, g.g);
        c->t->pv_tile[ATTN_KV_F32](p, (ptrdiff_t)ps, g.kf, (ptrdiff_t)dv, nq, nk, dv, acc_f32,
                                   (ptrdiff_t)as);
        for (size_t r = 0; r < nq; r++)
            for (size_t t = 0; t < as; t++) {
                const float got = acc[r * as + t];
                if (t >= dv) {
                    if (!same_bits(got, acc0[r * as + t]))
                        fail(c, "nq=%zu nk=%zu dv=%zu: wrote into the row gap at [%zu][%zu]",
                             nq, nk, dv, r, t);
                    continue;
                }
                double bound;
                if (!pv_sum_ok(CA_EXACT, got, acc_ref[r * as + t], 0.0f, acc0[r * as + t],
                               p + r * ps, 1, g.kf + t, (ptrdiff_t)dv, nk, &bound))
                    fail(c, "nq=%zu nk=%zu dv=%zu group=%zu: acc[%zu][%zu] = %.9g, scalar %.9g, "
                         "bound %.3g", nq, nk, dv, g.g, r, t, (double)got,
                         (double)acc_ref[r * as + t], bound);
                if (!same_bits(got, acc_f32[r * as + t]))
                    fail(c, "nq=%zu nk=%zu dv=%zu group=%zu: acc[%zu][%zu] = %a, the table's F32 "
                         "pv_tile on the staged rows %a (bitwise)", nq, nk, dv, g.g, r, t,
                         (double)got, (double)acc_f32[r * as + t]);
            }
        if (i == 0)
            CA_BENCH(c, "4 x 256, d 128, groups of 64", 2.0 * nq * nk * dv,
                     c->t->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc, (ptrdiff_t)as,
                                      g.sc, g.ss, g.g),
                     c->ref->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc_ref,
                                        (ptrdiff_t)as, g.sc, g.ss, g.g));
        free(p), free(acc), free(acc_ref), free(acc_f32), free(acc0);
        grp_case_free(&g);
    }
}


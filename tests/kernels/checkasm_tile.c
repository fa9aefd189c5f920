/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the tile family (tile_<isa>.c, quant_<isa>.c): qk_tile, pv_tile,
 * to_f32, qk_diag and to_f32_scaled for every K/V dtype; and the score and
 * weighted-sum checks in a precision, which the dot family's slots run in
 * theirs (checkasm_dot.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkasm.h"
#include "lowp.h"

/* Shapes of a tile check: rows and keys past the table's block (tails of
   every path), head dims from 1 to 256. The first CA_BENCH_SHAPES are the
   bench shapes: a full block (prefill), and 4 and 16 rows over 256 keys
   (decode of a GQA group of 4; speculative decoding, Lq = 4 of it). */
const char *const tile_bench_names[CA_BENCH_SHAPES] = {"block, d 128", "4 x 256, d 128",
                                                        "16 x 256, d 128"};

tile_shape tile_shape_of(checkasm *c, int i, int dt)
{
    tile_shape s;
    if (i < CA_BENCH_SHAPES) {
        s.nq = i == 0 ? c->t->block_q : i == 1 ? 4 : 16;
        s.nk = i == 0 ? c->t->block_k : 256;
        s.d = 128;
        return s;
    }
    const size_t rows = c->t->block_q > ATTN_MAX_QK_ROWS ? c->t->block_q : ATTN_MAX_QK_ROWS;
    s.nq = i % 3 == 0 ? pick(c, 1, 4) : pick(c, 1, rows + 1);
    s.nk = pick(c, 1, c->t->block_k + 1);
    s.d = dim_for(c, dt, 1, i % 4 == 0 ? 256 : 140);
    return s;
}

/* Dequantized int8-mode query row (src/lowp.h), d a multiple of 32. */
static void i8_query(const float *q, size_t d, float *out)
{
    for (size_t b = 0; b < d; b += ATTN_QBLOCK) {
        attn_q8_block x;
        attn_q8_quantize(q + b, &x);
        for (size_t t = 0; t < ATTN_QBLOCK; t++)
            out[b + t] = x.dq * (float)x.n[t];
    }
}

/* vdpbf16ps and BFDOT flush subnormal factors and sums (attn.h): what that
   may move a score by, beyond the f32 bound (T = 2^-126). */
static double tol_flush(double d, double abs_scale, double folded)
{
    return abs_scale * 0x1p-126 * (folded + d);
}

/* twin, unless NULL: a kernel that must give kernel's bits (one ISA's int8
   files, and the AMX table's against its base's: the same integer sums and
   f32 steps on other instructions). */
void check_qk_mode(checkasm *c, int mode, attn_qk_tile_fn *kernel, attn_qk_tile_fn *oracle,
                   attn_qk_tile_fn *twin)
{
    const int dt = c->dt;
    if (!kernel)
        return; /* a dot slot this table has no kernel for (src/kernel_list.h) */
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        tile_shape sh = tile_shape_of(c, i, dt);
        if (mode == CA_I8 && i == CA_TILE_SHAPES - 1)
            sh.d = ATTN_QBLOCK * pick(c, 17, 33); /* past 512: under 16 rows a pass */
        const size_t nq = sh.nq, nk = sh.nk, d = sh.d;
        const size_t qs = d + pick(c, 0, 3), ks = d / unit_values(dt) + pick(c, 0, 2);
        const size_t ss = nk + pick(c, 0, 3);
        const float scale = random_scale(c);
        float *q = xalloc(nq * qs * 4), *s = xalloc(nq * ss * 4), *s_ref = xalloc(nq * ss * 4);
        float *s_exact = xalloc(nq * ss * 4), *qr = xalloc(d * 4);
        unsigned char *k = xalloc(nk * ks * unit_bytes(dt));
        float *kd = xalloc(d * 4);
        random_row(c, q, nq * qs, -3.0f, 3.0f);
        fill_kv(c, k, dt, nk * ks);
        for (size_t j = 0; j < nq * ss; j++)
            s[j] = s_ref[j] = s_exact[j] = -7.0f; /* the row gaps must keep it */
        kernel(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s, (ptrdiff_t)ss);
        oracle(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_ref, (ptrdiff_t)ss);
        if (twin && twin != kernel) {
            twin(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_exact, (ptrdiff_t)ss);
            for (size_t j = 0; j < nq * ss; j++)
                if (memcmp(&s[j], &s_exact[j], sizeof s[j]) != 0) {
                    fail(c, "nq=%zu nk=%zu d=%zu: s[%zu][%zu] = %a, its twin's int8 "
                         "kernel %a: they must give the same bits",
                         nq, nk, d, j / ss, j % ss, (double)s[j], (double)s_exact[j]);
                    break;
                }
        }
        if (mode == CA_BF16)
            c->ref->qk_tile[dt](q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_exact,
                                (ptrdiff_t)ss);
        for (size_t col = 0; col < nk; col++) {
            decode(c, k + col * ks * unit_bytes(dt), dt, d, kd);
            for (size_t r = 0; r < nq; r++) {
                const float *qrow = q + r * qs;
                if (mode == CA_I8) {
                    i8_query(qrow, d, qr);
                    qrow = qr;
                }
                double mag = 0.0, folded = 0.0, mag_e = 0.0, folded_e = 0.0;
                for (size_t t = 0; t < d; t++) {
                    const double qv = mode == CA_BF16 ? attn_bf16_round(qrow[t]) : qrow[t];
                    const double kv = mode == CA_BF16 ? attn_bf16_round(kd[t]) : kd[t];
                    mag += fabs(qv * kv);
                    folded += fmax(fabs(qv), fabs(kv));
                    mag_e += fabs((double)qrow[t] * kd[t]);
                    folded_e += fmax(fabs((double)qrow[t]), fabs((double)kd[t]));
                }
                const double as = fabs((double)scale);
                /* the int8 mode sums a converted partial per 4 values and
                   one scale product per block: d + 2 roundings at most */
                const double n = mode == CA_I8 ? (double)d + 2.0 : (double)d;
                double bound = TOL_PAIR(tol_qk(n, as, mag, folded));
                if (mode == CA_BF16)
                    bound += tol_flush((double)d, as, folded);
                const float got = s[r * ss + col];
                const int ok = near(got, s_ref[r * ss + col], bound) ||
                               (mode == CA_BF16 &&
                                near(got, s_exact[r * ss + col],
                                     TOL_PAIR(tol_qk((double)d, as, mag_e, folded_e))));
                if (!ok)
                    fail(c, "nq=%zu nk=%zu d=%zu: s[%zu][%zu] = %.9g, scalar %.9g, bound %.3g",
                         nq, nk, d, r, col, (double)got, (double)s_ref[r * ss + col], bound);
            }
        }
        for (size_t r = 0; r < nq; r++)
            for (size_t col = nk; col < ss; col++)
                if (s[r * ss + col] != -7.0f)
                    fail(c, "nq=%zu nk=%zu d=%zu: wrote into the row gap at [%zu][%zu]", nq, nk,
                         d, r, col);
        if (i < CA_BENCH_SHAPES)
            CA_BENCH(c, tile_bench_names[i], 2.0 * nq * nk * d,
                     kernel(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s, (ptrdiff_t)ss),
                     oracle(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_ref,
                            (ptrdiff_t)ss));
        free(q), free(s), free(s_ref), free(s_exact), free(qr), free(k), free(kd);
    }
}

void check_qk_tile(checkasm *c)
{
    check_qk_mode(c, CA_EXACT, c->t->qk_tile[c->dt], c->ref->qk_tile[c->dt], NULL);
}


/*
 * qk_diag against the same table's qk_tile (src/dsp.h): row r of q against
 * its own K row must give, bit for bit, the score qk_tile gives that pair
 * in a call with the same nq rows (the K rows as its keys). Its accuracy is
 * then qk_tile's, checked above against the scalar kernel and float64. The
 * rows are passed in reverse memory order: only the pointers locate them.
 */
void check_qk_diag(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const tile_shape sh = tile_shape_of(c, i, dt);
        const size_t nq = sh.nq, d = sh.d;
        const size_t qs = d + pick(c, 0, 3), ks = d / unit_values(dt) + pick(c, 0, 2);
        const float scale = random_scale(c);
        float *q = xalloc(nq * qs * 4), *s = xalloc(nq * nq * 4), *diag = xalloc((nq + 1) * 4);
        unsigned char *k = xalloc(nq * ks * unit_bytes(dt));
        const void **rows = xalloc(nq * sizeof *rows);
        random_row(c, q, nq * qs, -3.0f, 3.0f);
        fill_kv(c, k, dt, nq * ks);
        for (size_t r = 0; r < nq; r++) /* row r's K row is key nq - 1 - r */
            rows[r] = k + (nq - 1 - r) * ks * unit_bytes(dt);
        diag[nq] = -7.0f; /* past the end: must stay */
        c->t->qk_tile[dt](q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nq, d, scale, s, (ptrdiff_t)nq);
        c->t->qk_diag[dt](q, (ptrdiff_t)qs, rows, nq, d, scale, diag);
        for (size_t r = 0; r < nq; r++)
            if (!same_bits(diag[r], s[r * nq + (nq - 1 - r)]))
                fail(c, "nq=%zu d=%zu: row %zu = %.9g, qk_tile's score %.9g", nq, d, r,
                     (double)diag[r], (double)s[r * nq + (nq - 1 - r)]);
        if (!same_bits(diag[nq], -7.0f))
            fail(c, "nq=%zu d=%zu: wrote past s[nq - 1]", nq, d);
        /* and as qk_tile sums the same values in f32: the backward's D
           (o's dtype) meets dP (v's dtype) */
        float *kd = xalloc(nq * d * 4);
        for (size_t r = 0; r < nq; r++)
            decode(c, k + r * ks * unit_bytes(dt), dt, d, kd + r * d);
        c->t->qk_tile[ATTN_KV_F32](q, (ptrdiff_t)qs, kd, (ptrdiff_t)d, nq, nq, d, scale, s,
                                   (ptrdiff_t)nq);
        for (size_t r = 0; r < nq; r++)
            if (!same_bits(diag[r], s[r * nq + (nq - 1 - r)]))
                fail(c, "nq=%zu d=%zu: row %zu = %.9g, qk_tile's f32 score %.9g", nq, d, r,
                     (double)diag[r], (double)s[r * nq + (nq - 1 - r)]);
        free(q), free(s), free(diag), free(k), free(rows), free(kd);
    }
}

/* One element of a P.V-shaped sum (check_pv_mode, check_pt_mode): got =
   acc0 + sum_i w[i * ws] x[i * xs] over n terms, within the f32 pair bound
   of the oracle's `ref` (bf16: of the rounded factors' products, and the
   flush of a subnormal factor or sum, T each), or (bf16) of `exact`, the
   f32 oracle's, for a kernel that took the exact path. */
int pv_sum_ok(int mode, float got, float ref, float exact, float acc0, const float *w,
              ptrdiff_t ws, const float *x, ptrdiff_t xs, size_t n, double *bound)
{
    double mag = fabs((double)acc0), mag_e = mag;
    for (size_t i = 0; i < n; i++) {
        const double wv = w[(ptrdiff_t)i * ws], xv = x[(ptrdiff_t)i * xs];
        mag_e += fabs(wv * xv);
        mag += mode == CA_BF16
                   ? fabs((double)attn_bf16_round((float)wv) * attn_bf16_round((float)xv))
                   : fabs(wv * xv);
    }
    /* the bf16 units flush: T per product and per sum (attn.h) */
    *bound = TOL_PAIR(tol_pv((double)n, mag)) + (mode == CA_BF16 ? 2.0 * (double)n * 0x1p-126 : 0.0);
    return near(got, ref, *bound) ||
           (mode == CA_BF16 && near(got, exact, TOL_PAIR(tol_pv((double)n, mag_e))));
}

void check_pv_mode(checkasm *c, int mode, attn_pv_tile_fn *kernel, attn_pv_tile_fn *oracle)
{
    const int dt = c->dt;
    if (!kernel)
        return; /* a dot slot this table has no kernel for (src/kernel_list.h) */
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const tile_shape sh = tile_shape_of(c, i, dt);
        const size_t nq = sh.nq, nk = sh.nk, dv = sh.d;
        const size_t ps = nk + pick(c, 0, 3), vs = dv / unit_values(dt) + pick(c, 0, 2);
        const size_t as = dv + pick(c, 0, 3);
        float *p = xalloc(nq * ps * 4), *acc = xalloc(nq * as * 4), *acc_ref = xalloc(nq * as * 4);
        float *acc_exact = xalloc(nq * as * 4);
        unsigned char *v = xalloc(nk * vs * unit_bytes(dt));
        float *vd = xalloc(nk * dv * 4);
        random_weights(c, p, nq * ps);
        fill_kv(c, v, dt, nk * vs);
        float *acc0 = xalloc(nq * as * 4);
        random_row(c, acc0, nq * as, -2.0f, 2.0f);
        memcpy(acc, acc0, nq * as * 4);
        memcpy(acc_ref, acc0, nq * as * 4);
        memcpy(acc_exact, acc0, nq * as * 4);
        kernel(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc, (ptrdiff_t)as);
        oracle(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc_ref, (ptrdiff_t)as);
        if (mode == CA_BF16)
            c->ref->pv_tile[dt](p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc_exact,
                                (ptrdiff_t)as);
        for (size_t col = 0; col < nk; col++)
            decode(c, v + col * vs * unit_bytes(dt), dt, dv, vd + col * dv);
        for (size_t r = 0; r < nq; r++)
            for (size_t t = 0; t < as; t++) {
                if (t >= dv) {
                    if (!same_bits(acc[r * as + t], acc0[r * as + t]))
                        fail(c, "nq=%zu nk=%zu dv=%zu: wrote into the row gap at [%zu][%zu]",
                             nq, nk, dv, r, t);
                    continue;
                }
                double bound;
                const float got = acc[r * as + t];
                if (!pv_sum_ok(mode, got, acc_ref[r * as + t], acc_exact[r * as + t],
                               acc0[r * as + t], p + r * ps, 1, vd + t, (ptrdiff_t)dv, nk, &bound))
                    fail(c, "nq=%zu nk=%zu dv=%zu: acc[%zu][%zu] = %.9g, scalar %.9g, bound %.3g",
                         nq, nk, dv, r, t, (double)got, (double)acc_ref[r * as + t], bound);
            }
        if (i < CA_BENCH_SHAPES)
            CA_BENCH(c, tile_bench_names[i], 2.0 * nq * nk * dv,
                     kernel(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc, (ptrdiff_t)as),
                     oracle(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc_ref,
                            (ptrdiff_t)as));
        free(p), free(acc), free(acc_ref), free(acc_exact), free(acc0), free(v), free(vd);
    }
}


void check_pv_tile(checkasm *c)
{
    check_pv_mode(c, CA_EXACT, c->t->pv_tile[c->dt], c->ref->pv_tile[c->dt]);
}

void check_to_f32(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const size_t n = i == 0 ? 4096 : dim_for(c, dt, 1, 300);
        const size_t units = n / unit_values(dt);
        unsigned char *x = xalloc(units * unit_bytes(dt));
        float *y = xalloc((n + 1) * 4), *y_ref = xalloc((n + 1) * 4);
        fill_kv(c, x, dt, units);
        y[n] = y_ref[n] = -7.0f;
        c->t->to_f32[dt](x, y, n);
        c->ref->to_f32[dt](x, y_ref, n);
        for (size_t j = 0; j <= n; j++)
            if (!same_bits(y[j], y_ref[j]))
                fail(c, "n=%zu: y[%zu] = %.9g, scalar %.9g (bitwise)", n, j, (double)y[j],
                     (double)y_ref[j]);
        if (i == 0)
            CA_BENCH(c, "4096 values", 0, c->t->to_f32[dt](x, y, n), c->ref->to_f32[dt](x, y_ref, n));
        free(x), free(y), free(y_ref);
    }
}

/* FP8 scale groups (attn.h 1.8): rows decoded and times their groups'
   scales, bit for bit as the oracle (one decode, one f32 product each);
   a group of 1, of a power of two, of the whole row; rows at a byte
   stride past the row, scales at a stride past the groups or 0. */
void check_to_f32_scaled(checkasm *c)
{
    const int dt = c->dt;
    if (dtype_kind(dt) == ATTN_DTYPE_KIND_ASYM) { /* records: their own scales */
        check_asym_to_f32_scaled(c);
        return;
    }
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const size_t pv = unit_values(dt), rows = pick(c, 1, 9);
        const size_t n = i == 0 ? 512 : dim_for(c, dt, 1, 300);
        size_t g = i % 3 == 0 ? n : i % 3 == 1 ? 1 : (size_t)1 << pick(c, 0, 6);
        while (n % g)
            g /= 2; /* down to 1 at worst */
        const size_t units = n / pv, ub = unit_bytes(dt);
        const ptrdiff_t sstride = (ptrdiff_t)((units + pick(c, 0, 3)) * ub);
        const ptrdiff_t scstride = i % 4 == 3 ? 0 : (ptrdiff_t)(n / g + pick(c, 0, 2));
        const ptrdiff_t dstride = (ptrdiff_t)(n + pick(c, 0, 5));
        unsigned char *x = xalloc(rows * (size_t)sstride);
        float *sc = xalloc((rows * (size_t)(scstride ? scstride : 1) + n / g) * 4);
        float *y = xalloc((rows * (size_t)dstride + 1) * 4);
        float *y_ref = xalloc((rows * (size_t)dstride + 1) * 4);
        for (size_t r = 0; r < rows; r++)
            fill_kv(c, x + r * (size_t)sstride, dt, units);
        for (size_t k = 0; k < rows * (size_t)(scstride ? scstride : 1) + n / g; k++)
            sc[k] = uniform(c, 0.001f, 3.0f);
        for (size_t k = 0; k <= rows * (size_t)dstride; k++)
            y[k] = y_ref[k] = -7.0f; /* the gaps: never written */
        c->t->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y, dstride);
        c->ref->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y_ref, dstride);
        for (size_t k = 0; k <= rows * (size_t)dstride; k++)
            if (!same_bits(y[k], y_ref[k]))
                fail(c, "rows=%zu n=%zu group=%zu: y[%zu] = %.9g, scalar %.9g (bitwise)", rows,
                     n, g, k, (double)y[k], (double)y_ref[k]);
        if (i == 0)
            CA_BENCH(c, "rows of 512", 0,
                     c->t->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y, dstride),
                     c->ref->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y_ref,
                                               dstride));
        free(x), free(sc), free(y), free(y_ref);
    }
}

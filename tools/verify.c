/* Verification: sampled output rows against the scalar oracle. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

/* ------------------------------------------------------------------ verification */

#define F32_UNIT_ROUNDOFF 0x1p-24

static attn_status verify_one_row(const problem *p, const buffers *b, int64_t bi, int64_t h,
                                  int64_t i, float *ref, float *bias, verify_result *vr)
{
    const attn_shape *s = &p->shape;
    const int64_t d = s->head_dim, dv = v_dim_of(s), lk = s->kv_len;
    const int64_t kvh = h / (s->q_heads / s->kv_heads);
    const size_t esize = dtype_size(p->kv_dtype);
    const int64_t block = dtype_block(p->kv_dtype); /* K/V rows are whole blocks */
    const size_t q_off = (size_t)(((bi * s->q_heads + h) * s->q_len + i) * d);
    const size_t kv_row0 = (size_t)((bi * s->kv_heads + kvh) * lk);
    const float *got = b->out + ((bi * s->q_heads + h) * s->q_len + i) * dv;
    int64_t lo, hi;
    visible_keys(p, bi, i, &lo, &hi);
    const int64_t n = hi - lo;

    double tol = 0.0; /* a row with no visible key must be exactly 0 */
    if (n > 0) {
        /* The oracle: a one-query problem over exactly the visible keys, no masks. */
        const attn_shape one = { 1, 1, 1, 1, n, d, s->v_dim };
        attn_options o = ATTN_OPTIONS_INIT;
        o.scale = p->scale;
        o.softcap = p->softcap;
        if (p->has_sink)
            o.sinks = &b->tsinks; /* the same logit, broadcast */
        /* ALiBi as an explicit bias row: the oracle's keys start at lo, so
           its own alignment would measure distances from the wrong place */
        double alibi_max = 0.0;
        attn_tensor tb = make_tensor(bias, ATTN_DTYPE_F32, 1, 1, n);
        if (p->alibi) {
            int64_t seq_q, seq_k;
            seq_lengths(p, bi, &seq_q, &seq_k);
            const int64_t pos = i + (seq_k - seq_q);
            for (int64_t j = lo; j < hi; j++) {
                const float a = b->slopes[h] * (float)llabs(pos - j);
                bias[j - lo] = -a;
                if (fabs((double)a) > alibi_max)
                    alibi_max = fabs((double)a);
            }
            o.bias = &tb;
        }
        attn_tensor tq = make_tensor(b->q + q_off, ATTN_DTYPE_F32, 1, 1, d);
        attn_tensor tk = make_tensor((char *)b->k + (kv_row0 + (size_t)lo) * (size_t)(d / block) * esize,
                                     p->kv_dtype, 1, lk, d);
        attn_tensor tv = make_tensor((char *)b->v + (kv_row0 + (size_t)lo) * (size_t)(dv / block) * esize,
                                     p->kv_dtype, 1, lk, dv);
        attn_tensor to = make_tensor(ref, ATTN_DTYPE_F32, 1, 1, dv);
        attn_status st = attn_forward(&one, &o, &tq, &tk, &tv, &to, NULL);
        if (st != ATTN_OK)
            return st;

        /* A and V of the tolerance (see `attn run --help`). */
        const float *qr = b->q + q_off;
        double a = 0.0, vmax = 0.0;
        for (int64_t j = lo; j < hi; j++) {
            const size_t krow = (kv_row0 + (size_t)j) * (size_t)d;
            const size_t vrow = (kv_row0 + (size_t)j) * (size_t)dv;
            double terms = 0.0;
            for (int64_t t = 0; t < d; t++)
                terms += fabs((double)qr[t] * (double)load_elem(b->k, p->kv_dtype, krow + (size_t)t));
            if (terms > a)
                a = terms;
            for (int64_t t = 0; t < dv; t++) {
                const double x = fabs((double)load_elem(b->v, p->kv_dtype, vrow + (size_t)t));
                if (x > vmax)
                    vmax = x;
            }
        }
        a *= fabs((double)scale_of(p));
        tol = 8.0 * F32_UNIT_ROUNDOFF * (2.0 * sqrt((double)d) * a + sqrt((double)n) + 8.0) * vmax;
        /* ALiBi: the library may fuse s - slope*dist into one FMA where the
           oracle rounds the product and the sum; each is within 3u|a| of the
           exact score (tests/tolerance.h "alibi"), so the scores differ by
           <= 6u|a| and the output by <= 2 * 6u * max|a| * V */
        tol += 12.0 * F32_UNIT_ROUNDOFF * alibi_max * vmax;
    } else {
        for (int64_t t = 0; t < dv; t++)
            ref[t] = 0.0f;
    }

    double row_err = 0.0, row_ref = 0.0;
    for (int64_t t = 0; t < dv; t++) {
        double e = fabs((double)got[t] - (double)ref[t]);
        /* The inputs are finite: a NaN output (or an unwritten, NaN-poisoned one) is wrong. */
        if (isnan(e))
            e = INFINITY;
        if (e > row_err)
            row_err = e;
        if (fabs((double)ref[t]) > row_ref)
            row_ref = fabs((double)ref[t]);
    }
    const double rel = row_ref > 0.0 ? row_err / row_ref : (row_err > 0.0 ? INFINITY : 0.0);
    const double ratio = tol > 0.0 ? row_err / tol : (row_err > 0.0 ? INFINITY : 0.0);
    if (!(row_err <= tol))
        vr->pass = false;
    if (row_err > vr->max_abs)
        vr->max_abs = row_err;
    if (rel > vr->max_rel)
        vr->max_rel = rel;
    if (ratio > vr->worst_ratio || vr->rows == 0) {
        vr->worst_ratio = ratio;
        vr->worst_b = bi;
        vr->worst_h = h;
        vr->worst_i = i;
    }
    vr->rows++;
    return ATTN_OK;
}

/*
 * Verifies `rows` rows spread evenly over the flattened (batch, head, query)
 * index, first and last included, on the scalar ISA; restores the active ISA.
 */
int verify(const problem *p, const buffers *b, int64_t rows, verify_result *vr)
{
    const attn_shape *s = &p->shape;
    const int64_t total = s->batch * s->q_heads * s->q_len;
    *vr = (verify_result){ 0, 0.0, 0.0, 0.0, true, 0, 0, 0 };
    if (rows <= 0)
        return EXIT_OK;
    if (rows > total)
        rows = total;
    float *ref = alloc_elems(v_dim_of(s), sizeof(float));
    float *bias = p->alibi ? alloc_elems(s->kv_len, sizeof(float)) : NULL;
    if (!ref || (p->alibi && !bias)) {
        free(ref);
        free(bias);
        fprintf(stderr, "attn: out of memory\n");
        return EXIT_LIBRARY;
    }
    const attn_isa previous = attn_isa_active();
    attn_status st = attn_isa_select(ATTN_ISA_SCALAR);
    if (st != ATTN_OK) {
        free(ref);
        free(bias);
        return library_error("attn_isa_select(scalar)", st);
    }
    for (int64_t r = 0; r < rows && st == ATTN_OK; r++) {
        int64_t flat = rows == 1 ? 0
                                 : (int64_t)floor((double)r * (double)(total - 1) /
                                                  (double)(rows - 1) + 0.5);
        if (flat > total - 1)
            flat = total - 1;
        const int64_t bi = flat / (s->q_heads * s->q_len);
        const int64_t h = (flat / s->q_len) % s->q_heads;
        const int64_t i = flat % s->q_len;
        st = verify_one_row(p, b, bi, h, i, ref, bias, vr);
    }
    free(ref);
    free(bias);
    attn_status restore = attn_isa_select(previous);
    if (st != ATTN_OK)
        return library_error("attn_forward (scalar oracle)", st);
    if (restore != ATTN_OK)
        return library_error("attn_isa_select (restoring the active ISA)", restore);
    return EXIT_OK;
}

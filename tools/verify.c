/* SPDX-License-Identifier: MIT */
/*
 * Verification: sampled output rows against the scalar oracle, and one
 * measured and verified problem (measure_verified): this file reads exec.c's
 * buffers and calls its timing, never the other way.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ------------------------------------------------------------------ verification */


/* Whether the draft tree (attn_options.tree_parents) hides key j (counted
   from the sequence's start) from query i of sequence b: j is a draft key
   (one of the last Lq_b) that is neither the query's own nor an ancestor's. */
static int tree_hides(const problem *p, int64_t b, int64_t i, int64_t j)
{
    const int64_t *parents = p->g.ints[ATTN_OPT_POS_tree_parents];
    int64_t lq, lk;
    seq_lengths(p, b, &lq, &lk);
    const int64_t t = j - (lk - lq);
    if (!parents || t < 0)
        return 0;
    const int64_t *par = parents + b * p->shape.q_len + gen_q_offset(&p->g, b);
    int64_t a = i;
    while (a > t)
        a = par[a];
    return a != t;
}

/* Whether query i of sequence b has a top-k list (topk_indices) that does
   not name key j. */
static int topk_hides(const problem *p, int64_t b, int64_t i, int64_t j)
{
    const int64_t *lists = p->g.ints[ATTN_OPT_POS_topk_indices];
    const int64_t k = p->g.opt.topk;
    if (!lists)
        return 0;
    const int64_t *list = lists + (b * p->shape.q_len + gen_q_offset(&p->g, b) + i) * k;
    for (int64_t t = 0; t < k; t++)
        if (list[t] == j)
            return 0;
    return 1;
}

bool key_hidden(const problem *p, int64_t b, int64_t i, int64_t j)
{
    return tree_hides(p, b, i, j) || topk_hides(p, b, i, j);
}

/*
 * Row i of (batch bi, head h) on its own: the K and V rows it may see,
 * gathered from the problem's layout (dense, packed or paged: gen_kv_row)
 * into kbuf and vbuf, make a one-query problem without masks.
 */
static attn_status verify_one_row(const problem *p, const buffers *b, int64_t bi, int64_t h,
                                  int64_t i, float *ref, float *bias, void *kbuf, void *vbuf,
                                  verify_result *vr)
{
    const attn_shape *s = &p->shape;
    const gen_bufs *m = &b->m;
    const int64_t d = s->head_dim, dv = v_dim_of(s);
    const int64_t kvh = h / (s->q_heads / s->kv_heads);
    const attn_dtype kt = kv_dtype_of(p);
    /* an ASYM cache's records (attn.h): their group is the scale group's
       option, their headers part of the row */
    const int asym = gen_dtype_asym(kt);
    const int64_t kr_g = asym ? b->m.opt.k_scale_group : 0, vr_g = asym ? b->m.opt.v_scale_group : 0;
    const size_t k_row = (size_t)gen_row_units(kt, d, kr_g) * dtype_size(kt);
    const size_t v_row = (size_t)gen_row_units(kt, dv, vr_g) * dtype_size(kt);
    int64_t lo, hi, lq, lk;
    visible_keys(p, bi, i, &lo, &hi);
    seq_lengths(p, bi, &lq, &lk);
    /* a packed batch has no row past a sequence's end: what a padded row gets, 0 */
    const int64_t qrow = gen_q_offset(&p->g, bi) + i, k0 = gen_kv_offset(&p->g, bi);
    /* the keys the row sees: [lo, hi) less the draft keys a tree hides and
       the keys its top-k list does not name */
    int64_t *keys = malloc((size_t)(hi > lo ? hi - lo : 1) * sizeof *keys);
    if (!keys)
        return ATTN_ERR_NOMEM;
    int64_t n = 0;
    for (int64_t j = lo; j < hi; j++)
        if (!key_hidden(p, bi, i, j))
            keys[n++] = j;
    const float *got = i < lq ? gen_at(&m->t[GEN_OUT], bi, h, qrow, 0) : NULL;

    double tol = 0.0; /* a row with no visible key must be exactly 0 */
    if (n > 0) {
        /* The oracle: a one-query problem over exactly the visible keys, no masks. */
        const attn_shape one = { 1, 1, 1, 1, n, d, s->v_dim };
        attn_options o = ATTN_OPTIONS_INIT;
        o.scale = p->g.opt.scale;
        o.softcap = p->g.opt.softcap;
        attn_tensor ts;
        if (has_sink(p)) { /* the same logit: its (batch entry, head)'s */
            ts = (attn_tensor){ gen_at(&m->t[GEN_OPT(sinks)], bi, h, 0, 0), ATTN_DTYPE_F32, 0,
                                0, 0 };
            o.sinks = &ts;
        }
        /* FP8 scales per row or per group of channels (--fp8-scales):
           gathered with their rows, the oracle reads them as the call did */
        const int64_t kg = asym ? 0 : m->opt.k_scale_group, vg = asym ? 0 : m->opt.v_scale_group;
        /* a tail of the key rows (--k-tail): gathered likewise, F32 */
        const int64_t tail = m->opt.k_tail ? m->opt.k_tail_dim : 0, dm = d - tail;
        const int64_t kgn = kg ? dm / kg : 1, vgn = vg ? dv / vg : 1;
        float *ksc = NULL, *vsc = NULL, *tbuf = NULL;
        attn_tensor tks, tvs, ttl;
        if (tail) {
            tbuf = malloc((size_t)(n * tail) * sizeof *tbuf);
            if (!tbuf) {
                free(keys);
                return ATTN_ERR_NOMEM;
            }
            ttl = (attn_tensor){tbuf, ATTN_DTYPE_F32, 0, 0, tail};
            o.k_tail = &ttl;
            o.k_tail_dim = tail;
        }
        if (m->opt.k_scales) {
            ksc = malloc((size_t)(n * kgn) * sizeof *ksc);
            vsc = malloc((size_t)(n * vgn) * sizeof *vsc);
            if (!ksc || !vsc) {
                free(ksc);
                free(vsc);
                free(tbuf);
                free(keys);
                return ATTN_ERR_NOMEM;
            }
            tks = (attn_tensor){ksc, ATTN_DTYPE_F32, 0, 0, kgn};
            tvs = (attn_tensor){vsc, ATTN_DTYPE_F32, 0, 0, vgn};
            o.k_scales = &tks;
            o.v_scales = &tvs;
            o.k_scale_group = kg;
            o.v_scale_group = vg;
        }
        for (int64_t x = 0; x < n; x++) {
            /* a shared key lives with the sequence it is shared from */
            const int64_t j = keys[x];
            int64_t src = bi;
            while (j < shared_keys(p, src))
                src--;
            const int64_t at = src == bi ? k0 + j : gen_kv_offset(&p->g, src) + j;
            memcpy((char *)kbuf + (size_t)x * k_row, gen_kv_row(m, GEN_K, src, kvh, at), k_row);
            memcpy((char *)vbuf + (size_t)x * v_row, gen_kv_row(m, GEN_V, src, kvh, at), v_row);
            if (tbuf)
                memcpy(tbuf + x * tail, gen_kv_row(m, GEN_OPT(k_tail), src, kvh, at),
                       (size_t)tail * sizeof *tbuf);
            if (ksc) {
                memcpy(ksc + x * kgn, gen_kv_row(m, GEN_OPT(k_scales), src, kvh, at),
                       (size_t)kgn * sizeof *ksc);
                memcpy(vsc + x * vgn, gen_kv_row(m, GEN_OPT(v_scales), src, kvh, at),
                       (size_t)vgn * sizeof *vsc);
            }
        }
        /* ALiBi as an explicit bias row: the oracle's keys start at lo, so
           its own alignment would measure distances from the wrong place */
        double alibi_max = 0.0;
        attn_tensor tb = make_tensor(bias, ATTN_DTYPE_F32, 1, 1, n);
        if (has_alibi(p)) {
            const float slope = *(const float *)gen_at(&m->t[GEN_OPT(alibi_slopes)], bi, h, 0, 0);
            const int64_t pos = i + (lk - lq);
            for (int64_t x = 0; x < n; x++) {
                const float a = slope * (float)llabs(pos - keys[x]);
                bias[x] = -a;
                if (fabs((double)a) > alibi_max)
                    alibi_max = fabs((double)a);
            }
            o.bias = &tb;
        }
        const float *qr = gen_at(&m->t[GEN_Q], bi, h, qrow, 0);
        attn_tensor tq = make_tensor((void *)qr, ATTN_DTYPE_F32, 1, 1, d);
        attn_tensor tk = make_tensor(kbuf, kt, 1, n, d);
        attn_tensor tv = make_tensor(vbuf, kt, 1, n, dv);
        if (asym) { /* rows of records, strides in bytes */
            tk.row_stride = (int64_t)k_row, tk.head_stride = tk.batch_stride = n * (int64_t)k_row;
            tv.row_stride = (int64_t)v_row, tv.head_stride = tv.batch_stride = n * (int64_t)v_row;
            o.k_scale_group = kr_g;
            o.v_scale_group = vr_g;
        }
        attn_tensor to = make_tensor(ref, ATTN_DTYPE_F32, 1, 1, dv);
        attn_status st = attn_forward(&one, &o, &tq, &tk, &tv, &to, NULL);
        if (st != ATTN_OK) {
            free(ksc);
            free(vsc);
            free(tbuf);
            free(keys);
            return st;
        }

        /* A and V of the tolerance (see `attn run --help`); E, the
           precision mode's score bound (attn.h), the largest of the keys' */
        double a = 0.0, vmax = 0.0, e_mode = 0.0;
        const int64_t prec = p->g.opt.precision;
        /* rows decoded to f32 first (scale groups, a tail: attn.h 1.8, 1.9)
           take the F32 kernels, so the bf16 mode's and not the int8 one */
        const int staged = kg || tail || asym;
        const int i8 = prec == ATTN_PRECISION_INT8 && !staged &&
                       (kt == ATTN_DTYPE_Q8_0 || kt == ATTN_DTYPE_Q4_0);
        const int bf = prec == ATTN_PRECISION_BF16 &&
                       (staged || kt == ATTN_DTYPE_F32 || kt == ATTN_DTYPE_F16 ||
                        kt == ATTN_DTYPE_BF16);
        for (int64_t j = 0; j < n; j++) {
            const void *kr = (const char *)kbuf + (size_t)j * k_row;
            const void *vr_ = (const char *)vbuf + (size_t)j * v_row;
            double terms = 0.0, folded = 0.0, e_i8 = 0.0;
            for (int64_t t = 0; t < d; t++) {
                const double kv = t >= dm ? (double)tbuf[j * tail + t - dm]
                                          : gen_load_g(kr, kt, t, ksc ? ksc[j * kgn + t * kgn / dm]
                                                                      : p->g.opt.k_scale, kr_g);
                terms += fabs((double)qr[t] * kv);
                folded += fmax(fabs((double)qr[t]), fabs(kv));
            }
            for (int64_t b0 = 0; i8 && b0 < d; b0 += 32) {
                double qmax = 0.0, ks = 0.0, mag = 0.0;
                for (int64_t t = b0; t < b0 + 32; t++) {
                    qmax = fmax(qmax, fabs((double)qr[t]));
                    ks += fabs((double)gen_load(kr, kt, t, 1.0f));
                }
                const double dq = (double)((float)qmax / 127.0f);
                for (int64_t t = b0; t < b0 + 32; t++)
                    mag += (fabs((double)qr[t]) + dq / 2.0) *
                           fabs((double)gen_load(kr, kt, t, 1.0f));
                e_i8 += dq / 2.0 * (1.0 + 0x1p-15) * ks +
                        (double)(d + 3) * F32_UNIT_ROUNDOFF / (1.0 - (double)(d + 3) * F32_UNIT_ROUNDOFF) * mag +
                        127.0 * 0x1p-126 * ks;
            }
            const double e = bf ? bf16_score_bound(terms, folded, d) : e_i8;
            if (e > e_mode)
                e_mode = e;
            if (terms > a)
                a = terms;
            for (int64_t t = 0; t < dv; t++) {
                const double x = fabs((double)gen_load_g(vr_, kt, t, vsc ? vsc[j * vgn + t * vgn / dv]
                                                                       : p->g.opt.v_scale, vr_g));
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
        /* the mode's bound, derived (attn.h): a score error E moves the
           weights by expm1(2E) relative; bf16 also rounds p and v */
        e_mode *= fabs((double)scale_of(p));
        /* both modes round p and a Q8_0 or Q4_0 v too (attn.h) */
        const int qv = kt == ATTN_DTYPE_Q8_0 || kt == ATTN_DTYPE_Q4_0;
        const int pv_bf = bf || (prec != ATTN_PRECISION_DEFAULT && qv);
        tol += expm1(2.0 * e_mode) * vmax + (pv_bf ? BF16_PRODUCT * vmax : 0.0);
        free(ksc);
        free(vsc);
        free(tbuf);
    } else {
        for (int64_t t = 0; t < dv; t++)
            ref[t] = 0.0f;
    }
    free(keys);

    double row_err = 0.0, row_ref = 0.0;
    for (int64_t t = 0; t < dv; t++) {
        double e = fabs((double)(got ? got[t] : 0.0f) - (double)ref[t]);
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
    const attn_dtype kt = kv_dtype_of(p);
    const int64_t d = s->head_dim, dv = v_dim_of(s);
    float *ref = alloc_elems(dv, sizeof(float));
    float *bias = alloc_elems(s->kv_len, sizeof(float));
    const int64_t kg = b->m.opt.k_scale_group, vg = b->m.opt.v_scale_group; /* ASYM records */
    void *kbuf = alloc_elems(s->kv_len, (size_t)gen_row_units(kt, d, kg) * dtype_size(kt));
    void *vbuf = alloc_elems(s->kv_len, (size_t)gen_row_units(kt, dv, vg) * dtype_size(kt));
    if (!ref || !bias || !kbuf || !vbuf) {
        free(ref);
        free(bias);
        free(kbuf);
        free(vbuf);
        fprintf(stderr, "attn: out of memory\n");
        return EXIT_LIBRARY;
    }
    const attn_isa previous = attn_isa_active();
    attn_status st = attn_isa_select(ATTN_ISA_SCALAR);
    if (st != ATTN_OK) {
        free(ref);
        free(bias);
        free(kbuf);
        free(vbuf);
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
        st = verify_one_row(p, b, bi, h, i, ref, bias, kbuf, vbuf, vr);
    }
    free(ref);
    free(bias);
    free(kbuf);
    free(vbuf);
    attn_status restore = attn_isa_select(previous);
    if (st != ATTN_OK)
        return library_error("attn_forward (scalar oracle)", st);
    if (restore != ATTN_OK)
        return library_error("attn_isa_select (restoring the active ISA)", restore);
    return EXIT_OK;
}

int measure_verified(const problem *p, const cli_settings *x, attn_threadpool *pool,
                     double target_s, measurement *m)
{
    buffers b;
    int rc = buffers_init(&b, p, x->seed);
    if (rc)
        return rc;
    rc = measure(p, x, pool, target_s, &b, m);
    if (!rc)
        rc = verify(p, &b, x->verify_rows, &m->verify);
    buffers_free(&b);
    return rc;
}

/* SPDX-License-Identifier: MIT */
/* attn run --backward: time attn_backward and verify sampled dq rows in float64. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Algorithmic FLOPs of one backward: per visible pair S (2d), dP (2dv),
   dV (2dv), dK (2d), dQ (2d): 2.5x the forward's when dv = d. */
double backward_flops_per_call(const problem *p)
{
    const attn_shape *s = &p->shape;
    return (double)s->batch * (double)s->q_heads * visible_pairs(p) *
           (6.0 * (double)s->head_dim + 4.0 * (double)v_dim_of(s));
}

typedef struct grads {
    float *dout, *lse, *dq, *dk, *dv;
    attn_tensor tdout, tdq, tdk, tdv;
} grads;

static void grads_free(grads *g)
{
    free(g->dout);
    free(g->lse);
    free(g->dq);
    free(g->dk);
    free(g->dv);
}

/*
 * dq of row (bi, h, i) in float64 from the inputs, the f32 forward's output
 * and the seeded dout, and the row's tolerance: a model like the forward's
 * (`attn run --help`), safety factor 8 over
 *   |scale| max|k| [ e_s sum_j p_j |a_j| + e_a + sqrt(n) sum_j |dS'_j| ]
 * with a_j = dP_j - D, e_s = u (2 sqrt(d) A + sqrt(n) + 8) the relative
 * error of a recomputed weight (score, lse, exp), e_a the error of a_j:
 * dot products of dv terms (2 sqrt(dv) u W, W = max_j sum_t |dO_t v_jt|)
 * plus D's share of the forward output's tolerance. In the bf16 mode
 * (attn.h) the forward and the backward compute the scores within the
 * mode's bound E (the largest over the row's keys): e_s gains expm1(2E),
 * as the forward's verification counts it, and D the forward's rounding
 * of p and v, sum_t |dO_t| B max|v|.
 */
static double dq_row(const problem *p, const buffers *b, const grads *g, int64_t bi, int64_t h,
                     int64_t i, double *ref)
{
    const attn_shape *s = &p->shape;
    const gen_bufs *m = &b->m;
    const int64_t d = s->head_dim, dv = v_dim_of(s), lk = s->kv_len;
    const int64_t kvh = h / (s->q_heads / s->kv_heads);
    const size_t row = (size_t)((bi * s->q_heads + h) * s->q_len + i);
    const attn_dtype kt = kv_dtype_of(p);
    const float *q = gen_at(&m->t[GEN_Q], bi, h, i, 0), *dout = g->dout + row * (size_t)dv;
    const double scale = scale_of(p), cap = p->g.opt.softcap;
    int64_t lo, hi;
    visible_keys(p, bi, i, &lo, &hi);
    for (int64_t t = 0; t < d; t++)
        ref[t] = 0.0;
    if (hi <= lo)
        return 0.0; /* no visible key: dq must be exactly 0 */
    /* the keys the row sees: [lo, hi) less what a tree or top-k list hides */
    double *sc = malloc((size_t)(hi - lo) * 4 * sizeof(double));
    if (!sc)
        return NAN;
    double *dp = sc + (hi - lo), *slope = dp + (hi - lo), *key = slope + (hi - lo);
    int64_t n = 0;
    for (int64_t j = lo; j < hi; j++)
        if (!key_hidden(p, bi, i, j))
            key[n++] = (double)j;
    if (n == 0) {
        free(sc);
        return 0.0;
    }
    /* the score modifiers as the library applies them: ALiBi from the
       query's aligned position, the sink as one more logit in the softmax */
    const int64_t pos = i + (lk - s->q_len);
    const double alibi_slope_h =
        has_alibi(p) ? (double)*(const float *)gen_at(&m->t[GEN_OPT(alibi_slopes)], bi, h, 0, 0)
                     : 0.0;
    const double sink =
        has_sink(p) ? (double)*(const float *)gen_at(&m->t[GEN_OPT(sinks)], bi, h, 0, 0)
                    : -INFINITY;
    double mx = sink;
    double a_max = 0.0, w_max = 0.0, k_max = 0.0, v_max = 0.0, alibi_max = 0.0, e_mode = 0.0;
    const int bf = p->g.opt.precision == ATTN_PRECISION_BF16;
    for (int64_t j = 0; j < n; j++) {
        const int64_t kj = (int64_t)key[j];
        const void *kr = gen_kv_row(m, GEN_K, bi, kvh, kj);
        const void *vr = gen_kv_row(m, GEN_V, bi, kvh, kj);
        double dot = 0.0, terms = 0.0, folded = 0.0, pd = 0.0, w = 0.0;
        for (int64_t t = 0; t < d; t++) {
            const double kx = gen_load(kr, kt, t, p->g.opt.k_scale);
            dot += q[t] * kx;
            terms += fabs(q[t] * kx);
            folded += fmax(fabs((double)q[t]), fabs(kx));
            k_max = fmax(k_max, fabs(kx));
        }
        if (bf) /* the mode's score bound (attn.h), before the scale */
            e_mode = fmax(e_mode, bf16_score_bound(terms, folded, d));
        for (int64_t t = 0; t < dv; t++) {
            const double vt = gen_load(vr, kt, t, p->g.opt.v_scale);
            pd += dout[t] * vt;
            w += fabs(dout[t] * vt);
            v_max = fmax(v_max, fabs(vt));
        }
        double x = dot * scale;
        slope[j] = 1.0;
        if (cap != 0.0) {
            const double th = tanh(x / cap);
            x = cap * th;
            slope[j] = 1.0 - th * th;
        }
        if (has_alibi(p)) {
            const double a = alibi_slope_h * (double)llabs(pos - kj);
            x -= a;
            alibi_max = fmax(alibi_max, a);
        }
        sc[j] = x;
        dp[j] = pd;
        mx = fmax(mx, x);
        a_max = fmax(a_max, terms * fabs(scale));
        w_max = fmax(w_max, w);
    }
    double sum = has_sink(p) ? exp(sink - mx) : 0.0, D = 0.0;
    for (int64_t j = 0; j < n; j++)
        sum += exp(sc[j] - mx);
    for (int64_t j = 0; j < n; j++)
        D += exp(sc[j] - mx) / sum * dp[j];
    double pa = 0.0, ds_abs = 0.0, dout_abs = 0.0;
    for (int64_t t = 0; t < dv; t++)
        dout_abs += fabs(dout[t]);
    for (int64_t j = 0; j < n; j++) {
        const double pj = exp(sc[j] - mx) / sum, a = dp[j] - D, ds = pj * a * slope[j];
        const void *kr = gen_kv_row(m, GEN_K, bi, kvh, (int64_t)key[j]);
        for (int64_t t = 0; t < d; t++)
            ref[t] += scale * ds * gen_load(kr, kt, t, p->g.opt.k_scale);
        pa += pj * fabs(a);
        ds_abs += fabs(ds);
    }
    free(sc);
    const double u = F32_UNIT_ROUNDOFF, rn = sqrt((double)n);
    /* ALiBi: the library may fuse s - slope * dist into one FMA (as the
       forward's verification, `attn run --help`): a few u of it per score */
    const double e_s = u * (2.0 * sqrt((double)d) * a_max + rn + 8.0 + 12.0 * alibi_max) +
                       expm1(2.0 * fabs(scale) * e_mode);
    const double e_a = 2.0 * sqrt((double)dv) * u * w_max + dout_abs * e_s * v_max +
                       (bf ? dout_abs * BF16_PRODUCT * v_max : 0.0);
    return 8.0 * fabs(scale) * k_max * (e_s * pa + e_a + rn * u * ds_abs);
}

static int verify_dq(const problem *p, const buffers *b, const grads *g, int64_t rows,
                     verify_result *vr)
{
    const attn_shape *s = &p->shape;
    const int64_t total = s->batch * s->q_heads * s->q_len, d = s->head_dim;
    *vr = (verify_result){ 0, 0.0, 0.0, 0.0, true, 0, 0, 0 };
    if (rows <= 0)
        return EXIT_OK;
    if (rows > total)
        rows = total;
    double *ref = malloc((size_t)d * sizeof(double));
    if (!ref)
        return EXIT_LIBRARY;
    for (int64_t r = 0; r < rows; r++) {
        int64_t flat = rows == 1 ? 0 : (int64_t)floor((double)r * (double)(total - 1) /
                                                      (double)(rows - 1) + 0.5);
        flat = flat > total - 1 ? total - 1 : flat;
        const int64_t bi = flat / (s->q_heads * s->q_len), h = (flat / s->q_len) % s->q_heads,
                      i = flat % s->q_len;
        const double tol = dq_row(p, b, g, bi, h, i, ref);
        const float *got = g->dq + (size_t)flat * (size_t)d;
        double err = 0.0, mag = 0.0;
        for (int64_t t = 0; t < d; t++) {
            double e = fabs((double)got[t] - ref[t]);
            err = fmax(err, isnan(e) ? INFINITY : e);
            mag = fmax(mag, fabs(ref[t]));
        }
        const double ratio = tol > 0.0 ? err / tol : (err > 0.0 ? INFINITY : 0.0);
        if (!(err <= tol))
            vr->pass = false;
        vr->max_abs = fmax(vr->max_abs, err);
        vr->max_rel = fmax(vr->max_rel, mag > 0.0 ? err / mag : (err > 0.0 ? INFINITY : 0.0));
        if (ratio > vr->worst_ratio || vr->rows == 0) {
            vr->worst_ratio = ratio;
            vr->worst_b = bi;
            vr->worst_h = h;
            vr->worst_i = i;
        }
        vr->rows++;
    }
    free(ref);
    return EXIT_OK;
}

/*
 * Debian 12's aarch64-linux-gnu-gcc 12.2.0 (12.2.0-14) dies at -O3 with an
 * internal compiler error "in vect_transform_reduction, at
 * tree-vect-loop.cc:7457" on this function, the same vectoriser bug as in
 * tests/baseline/smoke.c (an fmax/max reduction it cannot transform). Loop
 * vectorisation is off for this one function, for that compiler only.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__aarch64__) && __GNUC__ == 12
__attribute__((optimize("no-tree-loop-vectorize")))
#endif
int measure_backward(const problem *p, const cli_settings *x, attn_threadpool *pool,
                     double target_s, measurement *m)
{
    const attn_shape *s = &p->shape;
    const int64_t dv = v_dim_of(s), rows = s->batch * s->q_heads * s->q_len;
    buffers b;
    int rc = buffers_init(&b, p, x->seed);
    if (rc)
        return rc;
    grads g = {0};
    g.dout = alloc_elems(rows * dv, sizeof(float));
    g.lse = alloc_elems(rows, sizeof(float));
    g.dq = alloc_elems(rows * s->head_dim, sizeof(float));
    g.dk = alloc_elems(s->batch * s->kv_heads * s->kv_len * s->head_dim, sizeof(float));
    g.dv = alloc_elems(s->batch * s->kv_heads * s->kv_len * dv, sizeof(float));
    if (!g.dout || !g.lse || !g.dq || !g.dk || !g.dv) {
        fprintf(stderr, "attn: cannot allocate the gradients of this problem\n");
        grads_free(&g);
        buffers_free(&b);
        return EXIT_LIBRARY;
    }
    uint64_t seed = x->seed ^ 0x6464646464646464u;
    gen_fill(g.dout, ATTN_DTYPE_F32, rows * dv, &p->g.val[GEN_Q], &seed); /* q's distribution */
    for (int64_t i = 0; i < rows * s->head_dim; i++)
        g.dq[i] = NAN; /* a row the library failed to write cannot pass */
    g.tdout = make_tensor(g.dout, ATTN_DTYPE_F32, s->q_heads, s->q_len, dv);
    g.tdq = make_tensor(g.dq, ATTN_DTYPE_F32, s->q_heads, s->q_len, s->head_dim);
    g.tdk = make_tensor(g.dk, ATTN_DTYPE_F32, s->kv_heads, s->kv_len, s->head_dim);
    g.tdv = make_tensor(g.dv, ATTN_DTYPE_F32, s->kv_heads, s->kv_len, dv);
    attn_grads gr = ATTN_GRADS_INIT;
    gr.dq = &g.tdq;
    gr.dk = &g.tdk;
    gr.dv = &g.tdv;

    attn_options o = b.m.opt;
    o.parallel_for = attn_threadpool_parallel_for;
    o.parallel_ctx = pool;
    const attn_row_stats st = { g.lse, NULL, NULL };
    m->isa = attn_isa_active();
    m->threads = attn_threadpool_size(pool);
    m->floor = (timing){ 0, 0.0, 0.0, 0.0, false };
    m->workspace = 0;
    m->split = 0;
    m->kv_copies = 1;
    const attn_tensor *tq = &b.m.t[GEN_Q], *tk = &b.m.t[GEN_K], *tv = &b.m.t[GEN_V],
                      *tout = &b.m.t[GEN_OUT];
    attn_status status = attn_forward(s, &o, tq, tk, tv, tout, &st);
    double first = 0.0;
    int64_t n = 0;
    if (status == ATTN_OK) {
        const double t0 = now_seconds();
        status = attn_backward(s, &o, tq, tk, tv, tout, &g.tdout, g.lse, &gr);
        first = now_seconds() - t0;
    }
    if (status == ATTN_OK && x->iters == 0 && first >= SINGLE_CALL_SECONDS) {
        m->time = (timing){ 1, first, first, first, true };
    } else if (status == ATTN_OK) {
        n = x->iters;
        if (n == 0) {
            const double want = target_s / (first > 1e-9 ? first : 1e-9);
            n = want < 1.0 ? 1 : want > 1e6 ? 1000000 : (int64_t)want;
        }
        samples calls;
        if (!samples_init(&calls, n)) {
            fprintf(stderr, "attn: out of memory for the times of %" PRId64 " calls\n", n);
            grads_free(&g);
            buffers_free(&b);
            return EXIT_LIBRARY;
        }
        for (int64_t it = 0; it < n && status == ATTN_OK; it++) {
            const double t0 = now_seconds();
            status = attn_backward(s, &o, tq, tk, tv, tout, &g.tdout, g.lse, &gr);
            samples_add(&calls, now_seconds() - t0);
        }
        m->time = samples_timing(&calls);
    }
    if (status != ATTN_OK) {
        grads_free(&g);
        buffers_free(&b);
        return library_error(n || first > 0.0 ? "attn_backward" : "attn_forward", status);
    }
    m->gflops = backward_flops_per_call(p) / m->time.mean_s * 1e-9;
    m->kv_gbytes_s = kv_bytes_per_call(p) / m->time.mean_s * 1e-9;
    m->floor_gbytes_s = 0.0;
    m->peak_gflops = cli_fma_peak_gflops(pool); /* after the timed calls, as measure() */
    m->peak_what = "FMA";
    m->t_star_s = 0.0; /* no floor: the backward is not a decode step */
    rc = verify_dq(p, &b, &g, x->verify_rows, &m->verify);
    grads_free(&g);
    buffers_free(&b);
    return rc;
}

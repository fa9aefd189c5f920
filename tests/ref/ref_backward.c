/* SPDX-License-Identifier: MIT */
/* The float64 gradients of attention and their f32 error bounds (ref_backward.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "ref_backward.h"
#include "tolerance.h"

static double *dense(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p)
        abort();
    return p;
}

static void load(double *dst, const attn_tensor *t, int64_t nb, int64_t nh, int64_t nr,
                 int64_t nc)
{
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t r = 0; r < nr; r++)
                for (int64_t c = 0; c < nc; c++)
                    dst[((b * nh + h) * nr + r) * nc + c] = ref_tensor_get(t, b, h, r, c);
}

void ref_bwd_load(ref_bwd_in *in, const attn_shape *shape, const attn_options *opt,
                  const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                  const attn_tensor *dout)
{
    attn_shape s = *shape;
    if (s.v_dim == 0)
        s.v_dim = s.head_dim;
    in->shape = s;
    in->opt = opt;
    const int64_t B = s.batch, Hq = s.q_heads, Hk = s.kv_heads;
    in->q = dense((size_t)(B * Hq * s.q_len * s.head_dim));
    in->k = dense((size_t)(B * Hk * s.kv_len * s.head_dim));
    in->v = dense((size_t)(B * Hk * s.kv_len * s.v_dim));
    in->dout = dense((size_t)(B * Hq * s.q_len * s.v_dim));
    load(in->q, q, B, Hq, s.q_len, s.head_dim);
    load(in->k, k, B, Hk, s.kv_len, s.head_dim);
    load(in->v, v, B, Hk, s.kv_len, s.v_dim);
    load(in->dout, dout, B, Hq, s.q_len, s.v_dim);
    in->sinks = NULL;
    if (opt && opt->sinks) {
        in->sinks = dense((size_t)(B * Hq));
        load(in->sinks, opt->sinks, B, Hq, 1, 1);
    }
    in->bias = NULL;
    if (opt && opt->bias) {
        in->bias = dense((size_t)(B * Hq * s.q_len * s.kv_len));
        load(in->bias, opt->bias, B, Hq, s.q_len, s.kv_len);
    }
}

void ref_bwd_free(ref_bwd_in *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->dout);
    free(in->bias);
    free(in->sinks);
    memset(in, 0, sizeof *in);
}

/* One row's scores and what the bound needs of them. */
typedef struct score {
    double s;     /* final score, -inf where hidden */
    double err;   /* bound of the f32 recomputation of s (tolerance.h) */
    double slope; /* d s / d (q.k * scale): 1 - tanh^2 with softcap, else 1 */
    double t, t_err; /* tanh(x / cap) and the bound of the f32 capped/cap */
} score;

static void row_scores(const ref_bwd_in *in, int64_t b, int64_t h, int64_t i, score *out)
{
    const attn_shape *s = &in->shape;
    const attn_options *opt = in->opt;
    const int64_t d = s->head_dim, group = s->q_heads / s->kv_heads;
    const int default_scale = !opt || opt->scale == 0.0f;
    const double scale = default_scale ? 1.0 / sqrt((double)d) : (double)opt->scale;
    const double cap = opt ? (double)opt->softcap : 0.0, u = TOL_U;
    const double *q = in->q + ((b * s->q_heads + h) * s->q_len + i) * d;
    for (int64_t j = 0; j < s->kv_len; j++) {
        score *o = &out[j];
        o->slope = 1.0;
        o->t = o->t_err = 0.0;
        if (!ref_visible(s, opt, b, h, i, j)) {
            o->s = -INFINITY;
            o->err = 0.0;
            continue;
        }
        const double *k = in->k + ((b * s->kv_heads + h / group) * s->kv_len + j) * d;
        double dot = 0.0, mag = 0.0, sum_max = 0.0;
        for (int64_t t = 0; t < d; t++) {
            dot += q[t] * k[t];
            mag += fabs(q[t] * k[t]);
            sum_max += fmax(fabs(q[t]), fabs(k[t]));
        }
        double x = dot * scale;
        double e = tol_gamma((double)d + 1.0) * fabs(scale) * mag +
                   tol_under_qk((double)d, fabs(scale), sum_max);
        if (opt && opt->precision == ATTN_PRECISION_BF16) /* attn.h: the mode's scores */
            e += fabs(scale) * (REF_BF16_B * (1.0 + tol_gamma((double)d + 1.0)) * mag +
                                REF_FLUSH * (sum_max + (double)d));
        if (default_scale)
            e += 2.0 * u * fabs(x);
        if (cap != 0.0) {
            const double t = tanh(x / cap), y = cap * t, slope = 1.0 - t * t;
            e = ref_softcap_error(x, e, cap); /* as ref.c: the largest slope near x */
            o->slope = slope;
            o->t = t;
            /* capped * fl(1/cap): the capped error over cap, then 1/cap and the product */
            o->t_err = e / cap + 3.0 * u * (fabs(t) + e / cap);
            x = y;
        }
        if (in->bias) {
            x += in->bias[((b * s->q_heads + h) * s->q_len + i) * s->kv_len + j];
            e += u * fabs(x);
        }
        if (opt && opt->alibi_slopes) { /* as ref.c, tolerance.h "alibi" */
            /* |qpos - kpos| (attn.h: positions), bottom-right aligned by default */
            int64_t qp, kp;
            ref_positions(s, opt, b, i, j, &qp, &kp);
            const double a = ref_tensor_get(opt->alibi_slopes, b, h, 0, 0) *
                             fabs((double)(qp - kp));
            x -= a;
            e += TOL_ALIBI_A * u * fabs(a) + u * fabs(x);
        }
        o->s = x;
        o->err = e;
    }
}

/* The sink logit of row (b, h, i): -inf without sinks and for padded rows. */
static double row_sink(const ref_bwd_in *in, int64_t b, int64_t h, int64_t i)
{
    const attn_options *opt = in->opt;
    if (!in->sinks || i >= (opt->q_lens ? opt->q_lens[b] : in->shape.q_len))
        return -INFINITY;
    return in->sinks[b * in->shape.q_heads + h];
}

/* log(exp(sink) + sum_j exp(s_j)): a sink is one more logit, with no value. */
static double row_lse(const score *sc, int64_t n, double sink)
{
    double m = sink, sum = 0.0;
    for (int64_t j = 0; j < n; j++)
        m = sc[j].s > m ? sc[j].s : m;
    if (m == -INFINITY)
        return -INFINITY;
    sum = exp(sink - m);
    for (int64_t j = 0; j < n; j++)
        sum += exp(sc[j].s - m);
    return m + log(sum);
}

double ref_bwd_forward(const ref_bwd_in *in, double *o, double *lse)
{
    const attn_shape *s = &in->shape;
    const int64_t lk = s->kv_len, dv = s->v_dim, group = s->q_heads / s->kv_heads;
    score *sc = calloc((size_t)lk, sizeof *sc);
    double *orow = dense((size_t)dv);
    double loss = 0.0;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++) {
                const int64_t row = (b * s->q_heads + h) * s->q_len + i;
                row_scores(in, b, h, i, sc);
                const double l = row_lse(sc, lk, row_sink(in, b, h, i));
                memset(orow, 0, (size_t)dv * sizeof(double));
                if (l != -INFINITY)
                    for (int64_t j = 0; j < lk; j++) {
                        if (sc[j].s == -INFINITY)
                            continue;
                        const double p = exp(sc[j].s - l);
                        const double *v = in->v + ((b * s->kv_heads + h / group) * lk + j) * dv;
                        for (int64_t t = 0; t < dv; t++)
                            orow[t] += p * v[t];
                    }
                for (int64_t t = 0; t < dv; t++)
                    loss += in->dout[row * dv + t] * orow[t];
                if (o)
                    memcpy(o + row * dv, orow, (size_t)dv * sizeof(double));
                if (lse)
                    lse[row] = l;
            }
    free(sc);
    free(orow);
    return loss;
}

/* The bf16 mode's rounding of one summed product s a b (a, b >= 0 the
   magnitudes of its factors with their errors; attn.h, tolerance.h
   "backward"): both factors rounded to bfloat16, B of the product, in the
   error and in the magnitude the sum's gamma part takes; a subnormal factor
   or sum flushed to 0, s T (a + b + 1). */
static void bf16_product(double s, double a, double b, double *err, double *mag)
{
    const double m = s * a * b;
    *err += REF_BF16_B * m + s * REF_FLUSH * (b + a + 1.0);
    *mag += REF_BF16_B * m;
}

/* The pt_tile calls that may add to dk and dv of key j of KV head kvh of
   batch entry b (tolerance.h, "backward", step 9): the pieces into which
   the block boundaries and the rows that do not reach the key cut those
   that do, in the plan's row order. reach: [B][Hq][Lq][Lk]. */
static int64_t kv_calls(const ref_bwd_in *in, const ref_bwd_blocks *blk,
                        const unsigned char *reach, int64_t b, int64_t kvh, int64_t j)
{
    const attn_shape *s = &in->shape;
    const int64_t group = s->q_heads / s->kv_heads, lq = s->q_len, lk = s->kv_len;
    const int64_t heads = blk->fused ? 1 : group; /* heads interleaved in a block */
    int64_t calls = 0;
    for (int64_t h0 = 0; h0 < group; h0 += heads) {
        int prev = 0;
        for (int64_t x = 0; x < lq * heads; x++) {
            const int64_t h = kvh * group + h0 + x % heads, i = x / heads;
            const int r = reach[((b * s->q_heads + h) * lq + i) * lk + j];
            calls += r && (!prev || x % blk->block_rows == 0);
            prev = r;
        }
    }
    return calls;
}

void ref_bwd_grads(ref_grads *g, const ref_bwd_in *in, const float *lse_f32, const float *o_f32)
{
    ref_bwd_grads_blocks(g, in, lse_f32, o_f32, NULL);
}

void ref_bwd_grads_blocks(ref_grads *g, const ref_bwd_in *in, const float *lse_f32,
                          const float *o_f32, const ref_bwd_blocks *blocks)
{
    const attn_shape *s = &in->shape;
    const int64_t B = s->batch, Hq = s->q_heads, Hk = s->kv_heads, lq = s->q_len,
                  lk = s->kv_len, d = s->head_dim, dv = s->v_dim, group = Hq / Hk;
    const int default_scale = !in->opt || in->opt->scale == 0.0f;
    const double scale = default_scale ? 1.0 / sqrt((double)d) : (double)in->opt->scale;
    const double u = TOL_U;
    const int softcap = in->opt && in->opt->softcap != 0.0f;
    /* the bf16 mode: the products dS' k (dQ), dS' q (dK) and P dO (dV)
       rounded (attn.h, tolerance.h) */
    const int bf16 = in->opt && in->opt->precision == ATTN_PRECISION_BF16;
    const size_t nq = (size_t)(B * Hq * lq), nk = (size_t)(B * Hk * lk);
    g->dq = dense(nq * (size_t)d);
    g->dq_err = dense(nq * (size_t)d);
    g->dk = dense(nk * (size_t)d);
    g->dk_err = dense(nk * (size_t)d);
    g->dv = dense(nk * (size_t)dv);
    g->dv_err = dense(nk * (size_t)dv);
    g->ds = dense(nq * (size_t)lk);
    g->ds_err = dense(nq * (size_t)lk);
    g->dsinks = dense((size_t)(B * Hq));
    g->dsinks_err = dense((size_t)(B * Hq));
    double *dsinks_mag = dense((size_t)(B * Hq));
    /* second pass sums: sum |dS'| |x| etc., folded into the bounds at the end */
    double *dq_mag = dense(nq * (size_t)d), *dk_mag = dense(nk * (size_t)d),
           *dv_mag = dense(nk * (size_t)dv);

    score *sc = calloc((size_t)lk, sizeof *sc);
    double *dp = dense((size_t)lk), *pj = dense((size_t)lk); /* dP and P of a row */
    /* which rows reach which keys (a visible score of a row with a key) */
    unsigned char *reach = blocks ? calloc(nq * (size_t)lk, 1) : NULL;
    if (blocks && !reach)
        abort();
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < lq; i++) {
                const int64_t row = (b * Hq + h) * lq + i, kvh = b * Hk + h / group;
                const double *q = in->q + row * d, *dout = in->dout + row * dv;
                row_scores(in, b, h, i, sc);
                const double l = row_lse(sc, lk, row_sink(in, b, h, i));
                if (l == -INFINITY)
                    continue; /* no visible key: every gradient of the row is 0 */
                /* D = dO . O with O exact, and its f32 error G (step 3 of tolerance.h) */
                double D = 0.0, G = 0.0, L = 0.0;
                for (int64_t j = 0; j < lk; j++) {
                    if (sc[j].s == -INFINITY)
                        continue;
                    const double p = pj[j] = exp(sc[j].s - l);
                    const double *v = in->v + (kvh * lk + j) * dv;
                    double dpj = 0.0;
                    for (int64_t t = 0; t < dv; t++)
                        dpj += dout[t] * v[t];
                    dp[j] = dpj;
                    D += p * dpj;
                }
                if (lse_f32 && o_f32) {
                    double mag = 0.0;
                    /* O exact from p and v, to measure the f32 output's error */
                    for (int64_t t = 0; t < dv; t++) {
                        double ot = 0.0;
                        for (int64_t j = 0; j < lk; j++)
                            if (sc[j].s != -INFINITY)
                                ot += pj[j] * in->v[(kvh * lk + j) * dv + t];
                        const double of = o_f32[row * dv + t];
                        G += fabs(dout[t]) * fabs(of - ot);
                        mag += fabs(dout[t] * of);
                    }
                    G += tol_gamma((double)dv + 1.0) * mag;
                    L = fabs((double)lse_f32[row] - l);
                }
                /* the sink: -p_sink D, p_sink = exp(sink - lse); computed in
                   f32 as exp of fl(sink - lse^) (libm: TOL_EXP_ULP), times
                   D^ (off by G), summed over the head's rows */
                const double sink = row_sink(in, b, h, i);
                if (sink != -INFINITY) {
                    const double ps = exp(sink - l);
                    g->dsinks[b * Hq + h] -= ps * D;
                    if (lse_f32 && o_f32) {
                        const double delta = L + u * (fabs(sink - l) + L);
                        const double pse =
                            ps * (exp(delta) * (1.0 + 2.0 * TOL_EXP_ULP * u) - 1.0) + TOL_TINY;
                        g->dsinks_err[b * Hq + h] += pse * (fabs(D) + G) + ps * G +
                                                     u * (ps + pse) * (fabs(D) + G) +
                                                     2.0 * TOL_ETA;
                        dsinks_mag[b * Hq + h] += (ps + pse) * (fabs(D) + G);
                    }
                }
                for (int64_t j = 0; j < lk; j++) {
                    if (sc[j].s == -INFINITY)
                        continue;
                    const score *c = &sc[j];
                    const double p = pj[j];
                    const double a = dp[j] - D;
                    const double ds = p * a, dsp = ds * c->slope;
                    g->ds[row * lk + j] = ds;
                    if (reach)
                        reach[row * lk + j] = 1;
                    const double *k = in->k + (kvh * lk + j) * d;
                    const double *v = in->v + (kvh * lk + j) * dv;
                    for (int64_t t = 0; t < d; t++) {
                        g->dq[row * d + t] += scale * dsp * k[t];
                        g->dk[(kvh * lk + j) * d + t] += scale * dsp * q[t];
                    }
                    for (int64_t t = 0; t < dv; t++)
                        g->dv[(kvh * lk + j) * dv + t] += p * dout[t];
                    if (!lse_f32 || !o_f32)
                        continue;
                    /* steps 1-6 of the backward bound (tolerance.h) */
                    const double delta = c->err + L + u * (fabs(c->s - l) + c->err + L);
                    const double pe = p * (exp(delta) * (1.0 + 2.0 * TOL_EXP_ULP * u) - 1.0) +
                                      TOL_TINY;
                    double F = 0.0;
                    for (int64_t t = 0; t < dv; t++)
                        F += fabs(dout[t] * v[t]);
                    F *= tol_gamma((double)dv + 1.0);
                    const double A = F + G + u * (fabs(a) + F + G);
                    /* gradual underflow (tolerance.h): dP's and D's products, p * a */
                    const double S = pe * (fabs(a) + A) + p * A + u * (p + pe) * (fabs(a) + A) +
                                     2.0 * TOL_ETA * (2.0 * (double)dv + 2.0);
                    g->ds_err[row * lk + j] = S;
                    double S2 = S, ds2 = fabs(dsp);
                    if (softcap) {
                        const double t = fabs(c->t), T = c->t_err, gv = c->slope;
                        const double Gg = (2.0 * t + T) * T + 2.0 * u * ((t + T) * (t + T) + gv);
                        S2 = S * (gv + Gg) + fabs(ds) * Gg + u * (fabs(ds) + S) * (gv + Gg) +
                             2.0 * TOL_ETA * (2.0 + fabs(ds)); /* t * t, dS * g */
                    }
                    /* step 7-9: the sums' element parts; the gamma parts below */
                    for (int64_t t = 0; t < d; t++) {
                        /* S2 carries dS's underflow; each dS' * k product adds 2 eta */
                        g->dq_err[row * d + t] +=
                            fabs(scale) * (S2 * fabs(k[t]) + 2.0 * TOL_ETA);
                        dq_mag[row * d + t] += fabs(scale) * (ds2 + S2) * fabs(k[t]);
                        if (bf16) /* dS' and k rounded */
                            bf16_product(fabs(scale), ds2 + S2, fabs(k[t]), &g->dq_err[row * d + t],
                                         &dq_mag[row * d + t]);
                        g->dk_err[(kvh * lk + j) * d + t] +=
                            fabs(scale) * (S2 * fabs(q[t]) + 2.0 * TOL_ETA);
                        dk_mag[(kvh * lk + j) * d + t] += fabs(scale) * (ds2 + S2) * fabs(q[t]);
                        if (bf16) /* dS' and q rounded */
                            bf16_product(fabs(scale), ds2 + S2, fabs(q[t]),
                                         &g->dk_err[(kvh * lk + j) * d + t],
                                         &dk_mag[(kvh * lk + j) * d + t]);
                    }
                    for (int64_t t = 0; t < dv; t++) {
                        g->dv_err[(kvh * lk + j) * dv + t] += pe * fabs(dout[t]) + 2.0 * TOL_ETA;
                        dv_mag[(kvh * lk + j) * dv + t] += (p + pe) * fabs(dout[t]);
                        if (bf16) /* P and dO rounded */
                            bf16_product(1.0, p + pe, fabs(dout[t]),
                                         &g->dv_err[(kvh * lk + j) * dv + t],
                                         &dv_mag[(kvh * lk + j) * dv + t]);
                    }
                }
            }
    if (lse_f32 && o_f32) {
        /* dq: up to lk terms, then the scale (and its own rounding when default) */
        const double gq = tol_gamma((double)lk + 4.0);
        for (size_t x = 0; x < nq * (size_t)d; x++)
            g->dq_err[x] += gq * dq_mag[x] + (dq_mag[x] > 0.0 ? 2.0 * TOL_ETA : 0.0);
        /* dk, dv: K roundings of the blocked sum (tolerance.h, step 9), dk
           3 more for the scale. + 2 eta: the final scale multiply's
           underflow, where anything was summed (an element nothing reaches
           stays exactly 0) */
        for (size_t key = 0; key < nk; key++) {
            const int64_t calls = blocks ? kv_calls(in, blocks, reach, (int64_t)key / lk / Hk,
                                                    (int64_t)key / lk % Hk, (int64_t)key % lk)
                                         : 0;
            const double K = tol_bwd_kv_count((double)(group * lq),
                                              blocks ? (double)blocks->block_rows : 0.0,
                                              (double)calls);
            const double gk = tol_gamma(K + 3.0), gv = tol_gamma(K);
            for (size_t x = key * (size_t)d; x < (key + 1) * (size_t)d; x++)
                g->dk_err[x] += gk * dk_mag[x] + (dk_mag[x] > 0.0 ? 2.0 * TOL_ETA : 0.0);
            for (size_t x = key * (size_t)dv; x < (key + 1) * (size_t)dv; x++)
                g->dv_err[x] += gv * dv_mag[x];
        }
    }
    if (lse_f32 && o_f32) /* the sum over the head's rows, any order */
        for (int64_t x = 0; x < B * Hq; x++)
            g->dsinks_err[x] += tol_gamma((double)lq + 1.0) * dsinks_mag[x];
    free(reach);
    free(dsinks_mag);
    free(dq_mag);
    free(dk_mag);
    free(dv_mag);
    free(sc);
    free(dp);
    free(pj);
}

void ref_grads_free(ref_grads *g)
{
    free(g->dq);
    free(g->dq_err);
    free(g->dk);
    free(g->dk_err);
    free(g->dv);
    free(g->dv_err);
    free(g->ds);
    free(g->ds_err);
    free(g->dsinks);
    free(g->dsinks_err);
    memset(g, 0, sizeof *g);
}

/* SPDX-License-Identifier: MIT */
/*
 * float64 reference of attention, from the contract alone (see ref.h).
 * Deliberately naive: one score at a time, two-pass softmax, no tiling.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/dtype_list.h" /* data on attn.h only: examples/mpi builds ref.c too */
#include "ref.h"
#include "tolerance.h"

/* ------------------------------------------------------------ 16-bit formats */

double ref_f16_to_double(uint16_t h)
{
    const int negative = h >> 15;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    double v;
    if (exponent == 0x1f)
        v = mantissa ? NAN : INFINITY;
    else if (exponent == 0)
        v = ldexp((double)mantissa, -24); /* subnormal: m * 2^-24 */
    else
        v = ldexp((double)(mantissa + 1024), exponent - 25);
    return negative ? -v : v;
}

double ref_bf16_to_double(uint16_t h)
{
    const int negative = h >> 15;
    const int exponent = (h >> 7) & 0xff;
    const int mantissa = h & 0x7f;
    double v;
    if (exponent == 0xff)
        v = mantissa ? NAN : INFINITY;
    else if (exponent == 0)
        v = ldexp((double)mantissa, -133); /* subnormal: m * 2^-126 * 2^-7 */
    else
        v = ldexp((double)(mantissa + 128), exponent - 134);
    return negative ? -v : v;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

uint16_t ref_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest even */
    return (uint16_t)(u >> 16);
}

uint16_t ref_f32_to_f16(float f)
{
    const uint16_t sign = (uint16_t)((bits_of(f) >> 16) & 0x8000u);
    double a = fabs((double)f);
    if (isnan(f))
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 65520.0) /* rounds to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < ldexp(1.0, -14)) { /* subnormal range: multiples of 2^-24 */
        double m = nearbyint(a * ldexp(1.0, 24)); /* default rounding: to even */
        return (uint16_t)(sign | (uint16_t)m);
    }
    int e;
    double fr = frexp(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
    double m = nearbyint(fr * 2048.0); /* 11 significant bits */
    if (m == 2048.0) {
        m = 1024.0;
        e++;
    }
    /* value = m * 2^(e - 11), biased exponent e - 1 + 15 */
    return (uint16_t)(sign | (uint16_t)((e + 14) << 10) | ((uint16_t)m & 0x3ffu));
}

/* ------------------------------------------------------------ tensors */

/* Bytes per stride unit, from src/dtype_list.h (data, not src/ code); 1 for
   a value outside it, as before the list. */
size_t ref_dtype_size(int32_t dtype) { ATTN_DTYPE_GET(dtype, bytes, 1) }

/* Values per stride unit, from the list; 1 outside it. */
int64_t ref_dtype_block(int32_t dtype) { ATTN_DTYPE_GET(dtype, block, 1) }

/* The list's name ("q8_0"), "?" outside it. */
const char *ref_dtype_name(int32_t dtype) { ATTN_DTYPE_GET(dtype, name, "?") }

void *ref_tensor_at(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c)
{
    int64_t off = b * t->batch_stride + h * t->head_stride + r * t->row_stride + c;
    return (char *)t->data + off * (int64_t)ref_dtype_size(t->dtype);
}

double ref_tensor_get(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c)
{
    const void *p = ref_tensor_at(t, b, h, r, c);
    uint16_t h16;
    float f;
    /* the oracle decodes values itself, on purpose: only sizes come from the list */
    switch (t->dtype) {
    case ATTN_DTYPE_F32:
        memcpy(&f, p, sizeof f);
        return f;
    case ATTN_DTYPE_F16:
        memcpy(&h16, p, sizeof h16);
        return ref_f16_to_double(h16);
    case ATTN_DTYPE_BF16:
        memcpy(&h16, p, sizeof h16);
        return ref_bf16_to_double(h16);
    default:
        return *(const uint8_t *)p;
    }
}

/* ------------------------------------------------------------ masks */

static int64_t ref_lq(const attn_shape *shape, const attn_options *opt, int64_t b)
{
    return opt && opt->q_lens ? opt->q_lens[b] : shape->q_len;
}

static int64_t ref_lk(const attn_shape *shape, const attn_options *opt, int64_t b)
{
    return opt && opt->kv_lens ? opt->kv_lens[b] : shape->kv_len;
}

double ref_softcap_error(double x, double e0, double cap)
{
    const double u = TOL_U, t = tanh(x / cap), y = cap * t, slope = 1.0 - t * t;
    /* e0 passes through at the largest slope over [x - e0, x + e0] (mean
       value theorem; 1 - t^2 at x alone is first order only, too small for
       the errors of the rounded precision modes) */
    const double near0 = fabs(x) > e0 ? fabs(x) - e0 : 0.0;
    const double tn = tanh(near0 / cap), slope_max = 1.0 - tn * tn;
    return e0 * slope_max + (2.0 * TOL_TANH_ULP + 1.0) * u * fabs(y) +
           2.0 * u * fabs(x) * slope + tol_under_softcap(cap, x, slope);
}

void ref_positions(const attn_shape *shape, const attn_options *opt, int64_t b, int64_t i,
                   int64_t j, int64_t *qpos, int64_t *kpos)
{
    const int64_t lq = ref_lq(shape, opt, b), lk = ref_lk(shape, opt, b);
    if (opt && opt->k_positions) { /* slot kv_offsets[b] + j of row b of the table */
        const int64_t slot = (opt->kv_offsets ? opt->kv_offsets[b] : 0) + j;
        *kpos = opt->k_positions[b * shape->kv_len + slot];
        *qpos = (opt->q_pos ? opt->q_pos[b] : lk - lq) + i;
        return;
    }
    const int64_t kpos0 = opt && opt->k_pos ? opt->k_pos[b] : 0;
    *qpos = (opt && opt->q_pos ? opt->q_pos[b] : kpos0 + lk - lq) + i;
    *kpos = kpos0 + j;
}

int ref_visible(const attn_shape *shape, const attn_options *opt, int64_t b, int64_t h,
                int64_t i, int64_t j)
{
    int64_t lq = shape->q_len, lk = shape->kv_len;
    if (opt && opt->q_lens)
        lq = opt->q_lens[b];
    if (opt && opt->kv_lens)
        lk = opt->kv_lens[b];
    if (i >= lq || j >= lk)
        return 0;
    if (!opt)
        return 1;
    /* positions (attn.h): key j at K + j, or at its slot's own position,
       query i at Q + i */
    int64_t qp, kp;
    ref_positions(shape, opt, b, i, j, &qp, &kp);
    if (opt->k_positions && kp < 0) /* an empty slot */
        return 0;
    if ((opt->flags & ATTN_CAUSAL) && kp > qp)
        return 0;
    if (opt->window > 0 && !(kp > qp - opt->window))
        return 0;
    if (opt->window_right > 0 && !(kp < qp + opt->window_right))
        return 0;
    if (opt->mask && *(const uint8_t *)ref_tensor_at(opt->mask, b, h, i, j) == 0)
        return 0;
    /* a draft tree: key j is draft token t = j - (lk - lq); visible when t is
       i or reached from i by following parents */
    if (opt->tree_parents && j >= lk - lq) {
        const int32_t *par =
            opt->tree_parents + b * shape->q_len + (opt->q_offsets ? opt->q_offsets[b] : 0);
        int64_t a = i;
        while (a > j - (lk - lq))
            a = par[a];
        if (a != j - (lk - lq))
            return 0;
    }
    /* top-k: key j must be one of the row's list entries (any slot, any
       number of times) */
    if (opt->topk_indices) {
        const int32_t *list =
            opt->topk_indices +
            (b * shape->q_len + (opt->q_offsets ? opt->q_offsets[b] : 0) + i) * opt->topk;
        int64_t t = 0;
        while (t < opt->topk && list[t] != j)
            t++;
        if (t == opt->topk)
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------ softmax of a row */

static double max_d(double a, double b) { return a > b ? a : b; }

void ref_softmax_row(const double *s, const double *s_err, size_t n, int64_t rescales,
                     double *p, double *p_err, ref_row_stats *st)
{
    const double u = TOL_U;
    const double R = (double)rescales;
    ref_row_stats dummy;
    if (!st)
        st = &dummy;

    int poisoned = 0;
    double m = -INFINITY;
    size_t visible = 0;
    for (size_t j = 0; j < n; j++) {
        if (isnan(s[j]) || s[j] == INFINITY)
            poisoned = 1;
        else if (s[j] > m)
            m = s[j];
        if (s[j] != -INFINITY)
            visible++;
    }
    if (poisoned) { /* visible entries NaN; masked ones unspecified */
        for (size_t j = 0; j < n; j++) {
            p[j] = s[j] == -INFINITY ? 0.0 : NAN;
            if (p_err)
                p_err[j] = s[j] == -INFINITY ? INFINITY : 0.0;
        }
        *st = (ref_row_stats){NAN, 0.0, NAN, 0.0, NAN, 0.0};
        return;
    }
    if (m == -INFINITY) { /* fully masked */
        for (size_t j = 0; j < n; j++) {
            p[j] = 0.0;
            if (p_err)
                p_err[j] = 0.0;
        }
        *st = (ref_row_stats){-INFINITY, 0.0, -INFINITY, 0.0, 0.0, 0.0};
        return;
    }

    double l = 0.0;
    for (size_t j = 0; j < n; j++)
        l += exp(s[j] - m);
    const double log_l = log(l);
    double ent = 0.0, w_over_l = 0.0;
    for (size_t j = 0; j < n; j++) {
        p[j] = exp(s[j] - m) / l;
        if (p[j] > 0.0) {
            ent -= p[j] * (s[j] - m - log_l);
            w_over_l += p[j] * (m - s[j]);
        }
    }
    st->lse = m + log_l;
    st->max = m;
    st->ent = ent;

    /* error bounds (tolerance.h, "softmax of a row") */
    double e_bar = 0.0, e_max = 0.0, a_bar = 0.0, a_max = 0.0, ent_in = 0.0, w_tiny = 0.0;
    for (size_t j = 0; j < n; j++) {
        if (s[j] == -INFINITY)
            continue;
        const double ej = s_err ? s_err[j] : 0.0;
        const double aj = u * (m - s[j]) + 2.0 * TOL_EXP_ULP * u;
        e_bar += p[j] * ej;
        e_max = max_d(e_max, ej);
        a_bar += p[j] * aj;
        if (p[j] > TOL_TINY)
            a_max = max_d(a_max, aj);
        /* exp below FLT_MIN: absolute error TOL_TINY, times (m - s_j) in W;
           the product e_j (m - s_j) may round into the subnormal range */
        w_tiny += TOL_TINY * (m - s[j]) + TOL_ETA;
    }
    /* the normaliser's change: log sum_k p_k e^(d_k) lies in [-e_bar, E]
       with E = log sum_k p_k e^(E_k) >= e_bar (Jensen): rigorous for score
       errors of any size (e_bar alone is first order, too small where a
       key of tiny weight has a large error, as in the rounded precision
       modes), and equal to e_bar to first order */
    {
        double lmax = -INFINITY, acc = 0.0;
        for (size_t j = 0; j < n; j++)
            if (s[j] != -INFINITY && p[j] > 0.0)
                lmax = max_d(lmax, log(p[j]) + (s_err ? s_err[j] : 0.0));
        for (size_t j = 0; j < n; j++)
            if (s[j] != -INFINITY && p[j] > 0.0)
                acc += exp(log(p[j]) + (s_err ? s_err[j] : 0.0) - lmax);
        if (lmax > -INFINITY)
            e_bar = max_d(e_bar, lmax + log(acc));
    }
    for (size_t j = 0; j < n; j++)
        if (p[j] > 0.0)
            ent_in += p[j] * fabs(s[j] - st->lse) * ((s_err ? s_err[j] : 0.0) + e_bar);
    ent_in *= exp(e_max + e_bar);

    const double r_l = tol_gamma((double)visible) + a_bar + R * TOL_RESCALE;
    if (p_err)
        for (size_t j = 0; j < n; j++) {
            if (s[j] == -INFINITY) {
                p_err[j] = 0.0;
                continue;
            }
            const double ej = s_err ? s_err[j] : 0.0;
            const double rel = expm1(ej + e_bar) + u * (m - s[j]) + 2.0 * TOL_EXP_ULP * u + r_l +
                               2.0 * u + R * TOL_RESCALE;
            p_err[j] = p[j] * rel * (1.0 + rel) + TOL_TINY;
        }
    st->max_err = e_max;
    st->lse_err = e_bar + r_l / (1.0 - r_l) + 2.0 * TOL_LOG_ULP * u * fabs(log_l) +
                  u * fabs(st->lse);
    const double r_w = tol_gamma((double)visible + 1.0) + a_max + 2.0 * u + R * TOL_RESCALE;
    st->ent_err = ent_in + r_l / (1.0 - r_l) + 2.0 * TOL_LOG_ULP * u * fabs(log_l) +
                  w_over_l * (r_w + r_l + u) + R * TOL_RESCALE * (1.0 + w_over_l) +
                  u * fabs(ent) + w_tiny;
}

void ref_softmax_bwd_row(const float *p, const float *dp, size_t n, double *ds, double *ds_err)
{
    double dot = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) {
        dot += (double)p[i] * dp[i];
        mag += fabs((double)p[i] * dp[i]);
    }
    for (size_t j = 0; j < n; j++) {
        ds[j] = (double)p[j] * ((double)dp[j] - dot);
        ds_err[j] = fabs((double)p[j]) * tol_gamma((double)n) * mag +
                    3.0 * TOL_U * (fabs((double)p[j] * dp[j]) + fabs((double)p[j] * dot)) +
                    tol_under_bwd((double)n, fabs((double)p[j]));
    }
}

/* ------------------------------------------------------------ whole problems */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        abort();
    return p;
}

static void ref_alloc(ref_attn *r, const attn_shape *shape, int with_out)
{
    memset(r, 0, sizeof *r);
    r->rows = shape->batch * shape->q_heads * shape->q_len;
    r->kv_len = shape->kv_len;
    r->v_dim = shape->v_dim ? shape->v_dim : shape->head_dim;
    const size_t cells = (size_t)(r->rows * r->kv_len), rows = (size_t)r->rows;
    r->s = xcalloc(cells, sizeof(double));
    r->s_err = xcalloc(cells, sizeof(double));
    r->p = xcalloc(cells, sizeof(double));
    r->p_err = xcalloc(cells, sizeof(double));
    if (with_out) {
        r->o = xcalloc(rows * (size_t)r->v_dim, sizeof(double));
        r->o_err = xcalloc(rows * (size_t)r->v_dim, sizeof(double));
    }
    r->lse = xcalloc(rows, sizeof(double));
    r->lse_err = xcalloc(rows, sizeof(double));
    r->max = xcalloc(rows, sizeof(double));
    r->max_err = xcalloc(rows, sizeof(double));
    r->ent = xcalloc(rows, sizeof(double));
    r->ent_err = xcalloc(rows, sizeof(double));
    r->row_nan = xcalloc(rows, 1);
}

void ref_attn_free(ref_attn *r)
{
    free(r->s);
    free(r->s_err);
    free(r->p);
    free(r->p_err);
    free(r->o);
    free(r->o_err);
    free(r->lse);
    free(r->lse_err);
    free(r->max);
    free(r->max_err);
    free(r->ent);
    free(r->ent_err);
    free(r->row_nan);
    memset(r, 0, sizeof *r);
}

/*
 * softcap, bias and masks on one pre-score x (error bound e0) of (b,h,i,j).
 * Returns the final score and stores its bound.
 */
static double finish_score(const attn_shape *shape, const attn_options *opt, int64_t b,
                           int64_t h, int64_t i, int64_t j, double x, double e0, double *err)
{
    const double u = TOL_U;
    if (!ref_visible(shape, opt, b, h, i, j)) {
        *err = 0.0;
        return -INFINITY;
    }
    if (opt && opt->softcap != 0.0f) {
        const double cap = opt->softcap;
        const double t = tanh(x / cap);
        const double y = cap * t;
        if (isinf(x)) {
            /* tanh(+-inf) = +-1 exactly: y = +-cap, one rounding of the
               final multiply; the argument terms would be inf * 0 */
            e0 = u * fabs(y);
        } else {
            e0 = ref_softcap_error(x, e0, cap);
        }
        x = y;
    }
    if (opt && opt->bias) {
        x += ref_tensor_get(opt->bias, b, h, i, j);
        e0 += u * fabs(x);
    }
    if (opt && opt->alibi_slopes) { /* tolerance.h, "alibi" */
        /* |qpos - kpos| (attn.h: positions), bottom-right aligned by default */
        int64_t qp, kp;
        ref_positions(shape, opt, b, i, j, &qp, &kp);
        const double dist = fabs((double)(qp - kp));
        const double a = ref_tensor_get(opt->alibi_slopes, b, h, 0, 0) * dist;
        x -= a;
        e0 += TOL_ALIBI_A * u * fabs(a) + u * fabs(x);
    }
    *err = e0;
    return x;
}

/* The sink logit of row (b, h, i): -inf without sinks and for padded rows. */
static double ref_sink(const attn_shape *shape, const attn_options *opt, int64_t b, int64_t h,
                       int64_t i)
{
    if (!opt || !opt->sinks || i >= ref_lq(shape, opt, b))
        return -INFINITY;
    return ref_tensor_get(opt->sinks, b, h, 0, 0);
}

/* fmax(a, b), NaN included, inline: libm's fmax was a call per term of
   every score, 14 % of a quantized test's time. */
static double fmax_inline(double a, double b) { return a > b || isnan(b) ? a : b; }

/*
 * The rows of one (batch, head) of a tensor, each decoded on first use. The
 * reference reads a key or value row once per query row, and decoding it
 * value by value each time (ref_tensor_get) was most of its time; the
 * values and their order of use are the same. A row that is never read is
 * never touched: packed and paged layouts may have no memory there. Rows
 * are kept only when asked (a query row is reused through its pointer
 * alone) and up to ROW_CACHE_MAX values; otherwise each read decodes its
 * row into the one-row buffer.
 */
#define ROW_CACHE_MAX ((int64_t)1 << 22)

typedef struct row_cache {
    const attn_tensor *t;
    int64_t b, h, rows, cols;
    double *val;         /* [rows][cols] kept, or [cols]: the last row read */
    unsigned char *done; /* [rows]: decoded for (b, h); NULL: not kept */
} row_cache;

static void row_cache_init(row_cache *c, const attn_tensor *t, int64_t rows, int64_t cols,
                           int keep)
{
    *c = (row_cache){t, -1, -1, rows, cols, NULL, NULL};
    keep = keep && rows * cols <= ROW_CACHE_MAX;
    c->val = xcalloc((size_t)((keep ? rows : 1) * cols), sizeof(double));
    if (keep)
        c->done = xcalloc((size_t)rows, 1);
}

/* Row r of (b, h), decoded. */
static const double *row_cache_row(row_cache *c, int64_t b, int64_t h, int64_t r)
{
    double *row = c->val;
    if (c->done) {
        if (b != c->b || h != c->h) {
            memset(c->done, 0, (size_t)c->rows);
            c->b = b;
            c->h = h;
        }
        row += r * c->cols;
        if (c->done[r])
            return row;
        c->done[r] = 1;
    }
    for (int64_t t = 0; t < c->cols; t++)
        row[t] = ref_tensor_get(c->t, b, h, r, t);
    return row;
}

static void row_cache_free(row_cache *c)
{
    free(c->val);
    free(c->done);
}

/* Row softmax, stats and (when v) the output of every row of r. */
static void finish_rows(ref_attn *r, const attn_shape *shape, const attn_options *opt,
                        const attn_tensor *v, int64_t rescales, double pv_rel)
{
    const int64_t lk = shape->kv_len, dv = r->v_dim;
    const int64_t group = shape->q_heads / shape->kv_heads;
    /* With sinks, each row's softmax runs over lk + 1 entries, the sink last
       (exact, error 0); its weight is dropped: it has no value. */
    row_cache vc;
    row_cache_init(&vc, v, lk, dv, 1);
    double *o_acc = xcalloc((size_t)dv, sizeof(double)), *e_acc = xcalloc((size_t)dv, sizeof(double));
    double *aug = xcalloc((size_t)lk + 1, sizeof(double)),
           *aug_err = xcalloc((size_t)lk + 1, sizeof(double)),
           *aug_p = xcalloc((size_t)lk + 1, sizeof(double)),
           *aug_pe = xcalloc((size_t)lk + 1, sizeof(double));
    for (int64_t row = 0; row < r->rows; row++) {
        const double *s = r->s + row * lk;
        double *p = r->p + row * lk, *pe = r->p_err + row * lk;
        ref_row_stats st;
        if (opt && opt->sinks) {
            const int64_t i = row % shape->q_len, h = row / shape->q_len % shape->q_heads,
                          b = row / shape->q_len / shape->q_heads;
            memcpy(aug, s, (size_t)lk * sizeof(double));
            memcpy(aug_err, r->s_err + row * lk, (size_t)lk * sizeof(double));
            aug[lk] = ref_sink(shape, opt, b, h, i);
            aug_err[lk] = 0.0;
            ref_softmax_row(aug, aug_err, (size_t)lk + 1, rescales, aug_p, aug_pe, &st);
            memcpy(p, aug_p, (size_t)lk * sizeof(double));
            memcpy(pe, aug_pe, (size_t)lk * sizeof(double));
        } else {
            ref_softmax_row(s, r->s_err + row * lk, (size_t)lk, rescales, p, pe, &st);
        }
        r->lse[row] = st.lse;
        r->lse_err[row] = st.lse_err;
        r->max[row] = st.max;
        r->max_err[row] = st.max_err;
        r->ent[row] = st.ent;
        r->ent_err[row] = st.ent_err;
        r->row_nan[row] = isnan(st.lse);
        if (!v)
            continue;
        const int64_t h = row / shape->q_len % shape->q_heads,
                      b = row / shape->q_len / shape->q_heads;
        size_t visible = 0;
        for (int64_t j = 0; j < lk; j++)
            visible += s[j] != -INFINITY;
        const double spread =
            tol_gamma((double)visible) + (double)rescales * TOL_RESCALE;
        /* each o_t sums its keys in order; keys outer, so that a value
           row is decoded once per query row, not once per value */
        for (int64_t t = 0; t < dv; t++) {
            o_acc[t] = r->row_nan[row] ? NAN : 0.0;
            e_acc[t] = 0.0;
        }
        for (int64_t j = 0; j < lk && !r->row_nan[row]; j++) {
            if (s[j] == -INFINITY)
                continue;
            const double *vr = row_cache_row(&vc, b, h / group, j);
            for (int64_t t = 0; t < dv; t++) {
                double vj = vr[t];
                /* per-row FP8 scales (attn.h 1.6): the library rounds
                   fl32(p_j * v_scales_j) (tolerance.h, "Per-row FP8
                   scales"): one more relative u, and the product's
                   underflow, absolute TOL_ETA, on that term */
                double row_rel = 0.0, row_abs = 0.0;
                if (opt && opt->v_scales) {
                    const int64_t vg = opt->v_scale_group;
                    vj *= ref_tensor_get(opt->v_scales, b, h / group, j, vg ? t / vg : 0);
                    row_rel = TOL_VSCALES_REL * TOL_U;
                    row_abs = TOL_ETA * fabs(vr[t]);
                    /* groups (tolerance.h): also a staged fl32(s v) below
                       the normal range, off by eta, times p <= 1 */
                    if (vg)
                        row_abs = TOL_ETA * fmax(1.0, fabs(vr[t]));
                }
                o_acc[t] += p[j] * vj;
                /* pe[j] already holds p_j * rel_p_j + TOL_TINY; pv_rel:
                   the precision mode's rounding of p_j and v_j */
                /* a zero value adds exactly 0 whatever its weight (whose
                   bound may be infinite where the scores' is huge) */
                if (vj != 0.0)
                    e_acc[t] += pe[j] * fabs(vj) + p[j] * fabs(vj) * (spread + pv_rel + row_rel);
                e_acc[t] += row_abs;
            }
        }
        for (int64_t t = 0; t < dv; t++) {
            r->o[row * dv + t] = o_acc[t];
            r->o_err[row * dv + t] =
                r->row_nan[row] ? 0.0
                                : e_acc[t] + TOL_U * fabs(o_acc[t]) +
                                      tol_under_pv((double)visible, (double)rescales);
        }
    }
    free(aug);
    free(aug_err);
    free(aug_p);
    free(aug_pe);
    row_cache_free(&vc);
    free(o_acc);
    free(e_acc);
}

/*
 * The precision modes (attn.h, attn_precision), as the library applies them
 * to a call whose q, k and v have dtypes qdt, kdt, vdt: which rounding the
 * scores get, and the relative error the weighted sum gains. b = 2^-8 is
 * bfloat16's unit roundoff, B = 2b + b^2 bounds a product of two rounded
 * factors, T = 2^-126 the flush of vdpbf16ps and BFDOT.
 */
enum { REF_QK_EXACT, REF_QK_BF16, REF_QK_BF16_INPUTS, REF_QK_I8 };

/* The float dtypes: src/dtype_list.h's kind FLOAT; and those the modes
   treat as such: the ASYM formats, decoded into f32 rows first (attn.h). */
static int is_float_dtype(int32_t dt) { ATTN_DTYPE_GET(dt, float, 0) }
static int ref_kind(int32_t dt) { ATTN_DTYPE_GET(dt, kind, -1) }
static int read_as_float(int32_t dt)
{
    return is_float_dtype(dt) || ref_kind(dt) == ATTN_DTYPE_KIND_ASYM;
}

static int qk_mode(const attn_options *opt, int32_t qdt, int32_t kdt)
{
    const int64_t prec = opt ? opt->precision : 0;
    if (prec == ATTN_PRECISION_INT8 && (kdt == ATTN_DTYPE_Q8_0 || kdt == ATTN_DTYPE_Q4_0))
        return REF_QK_I8;
    if (prec == ATTN_PRECISION_BF16 && read_as_float(kdt))
        return REF_QK_BF16;
    if (qdt == ATTN_DTYPE_BF16 && kdt == ATTN_DTYPE_BF16)
        return REF_QK_BF16_INPUTS;
    return REF_QK_EXACT;
}

/* The int8 mode's extra score error (attn.h) over one query row and key:
   half a quantization step per value, the f32 sums over the dequantized
   query, and the blocks that count as 0; q, k in double, d whole blocks. */
static double i8_error(const double *q, const double *k, int64_t d, double abs_scale)
{
    double err = 0.0;
    for (int64_t b = 0; b < d; b += 32) {
        double m = 0.0, ks = 0.0;
        for (int64_t t = b; t < b + 32; t++) {
            m = fmax(m, fabs(q[t]));
            ks += fabs(k[t]);
        }
        const double dq = (double)((float)m / 127.0f); /* the library's f32 step */
        double mag = 0.0;
        for (int64_t t = b; t < b + 32; t++)
            mag += (fabs(q[t]) + dq / 2.0) * fabs(k[t]);
        err += (dq / 2.0) * (1.0 + 0x1p-15) * ks + tol_gamma((double)d + 3.0) * mag +
               127.0 * REF_FLUSH * ks;
    }
    return abs_scale * err;
}

/*
 * A score with FP8 scales per group of channels (attn.h 1.8; tolerance.h,
 * "FP8 scales per group"): k holds the FP8 values as decoded (exact, no
 * scale), k_scales their groups' scales, the last k_tail_dim columns (1.9)
 * the tail's values (factor: the scale alone). x = sum_t f_t q_t k_t with
 * f_t = fl32(scale * s_t) for a grouped column (the library's factor),
 * the f32 scale for a tail column.
 */
static double group_score(const attn_shape *shape, const attn_options *opt, const attn_tensor *q,
                          const attn_tensor *k, int64_t b, int64_t h, int64_t i, int64_t j,
                          int vis, int mode, int64_t kg, double *err)
{
    const int64_t d = shape->head_dim, group = shape->q_heads / shape->kv_heads;
    const int64_t main = d - (opt->k_tail ? opt->k_tail_dim : 0);
    const float sf = opt->scale != 0.0f ? opt->scale : (float)(1.0 / sqrt((double)d));
    double x = 0.0, mag = 0.0, under = 0.0, mags = 0.0, folds = 0.0, qsum = 0.0;
    for (int64_t t = 0; vis && t < d; t++) {
        const double qt = ref_tensor_get(q, b, h, i, t), kt = ref_tensor_get(k, b, h / group, j, t);
        const float st = t < main ? (float)ref_tensor_get(opt->k_scales, b, h / group, j, t / kg)
                                  : 1.0f;
        const double ft = t < main ? (double)(sf * st) : (double)sf;
        x += ft * qt * kt;
        mag += fabs(ft * qt * kt);
        /* the segments' kernels (scale 1): their absolute term per value,
           times the factor (3 >= 2 L + 1 over L values) */
        under += fabs(ft) * 2.0 * TOL_ETA * (3.0 + fmax(fabs(qt), fabs(kt)));
        /* the staged values k' = fl32(k s): |k'| <= 2 |k s| + eta */
        mags += fabs(qt * kt * (double)st);
        folds += fmax(fabs(qt), 2.0 * fabs(kt * (double)st) + TOL_ETA);
        qsum += fabs(qt);
    }
    if (!vis) {
        *err = 0.0;
        return finish_score(shape, opt, b, h, i, j, 0.0, 0.0, err);
    }
    const double as = fabs((double)sf);
    double e0 = tol_gamma((double)d + 4.0) * mag + 2.0 * under + ((double)d + 1.0) * TOL_ETA +
                tol_under_qk((double)d, as, folds) + 2.0 * TOL_ETA * as * qsum;
    if (mode == REF_QK_BF16) /* the staged values rounded to bf16: |k'| <= (1 + 2u) |k s| */
        e0 += as * REF_BF16_B * (1.0 + tol_gamma((double)d + 1.0)) * (1.0 + 4.0 * TOL_U) * mags;
    if (mode == REF_QK_BF16 || mode == REF_QK_BF16_INPUTS)
        e0 += as * REF_FLUSH * (folds + (double)d);
    if (isnan(mag) || isinf(mag))
        e0 = 0.0;
    return finish_score(shape, opt, b, h, i, j, x, e0, err);
}

void ref_attn_compute_as(ref_attn *r, const attn_shape *shape, const attn_options *opt,
                         const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                         int64_t rescales, int32_t kdt, int32_t vdt)
{
    ref_alloc(r, shape, v != NULL);
    const int64_t d = shape->head_dim, lk = shape->kv_len;
    const int64_t group = shape->q_heads / shape->kv_heads;
    const int default_scale = !opt || opt->scale == 0.0f;
    const double scale = default_scale ? 1.0 / sqrt((double)d) : (double)opt->scale;
    const int mode = qk_mode(opt, q->dtype, kdt);
    const int64_t kg = opt && opt->k_scales ? opt->k_scale_group : 0;
    row_cache qc, kc;
    row_cache_init(&qc, q, shape->q_len, d, 0);
    row_cache_init(&kc, k, lk, d, 1);
    for (int64_t b = 0; b < shape->batch; b++)
        for (int64_t h = 0; h < shape->q_heads; h++)
            for (int64_t i = 0; i < shape->q_len; i++) {
                const int64_t row = (b * shape->q_heads + h) * shape->q_len + i;
                const double *qr = NULL; /* decoded at its first visible key */
                for (int64_t j = 0; j < lk; j++) {
                    double dot = 0.0, mag = 0.0, folded = 0.0;
                    const int vis = ref_visible(shape, opt, b, h, i, j);
                    if (vis && !qr)
                        qr = row_cache_row(&qc, b, h, i);
                    const double *kr = vis ? row_cache_row(&kc, b, h / group, j) : NULL;
                    if (vis)
                        for (int64_t t = 0; t < d; t++) {
                            const double qt = qr[t], kt = kr[t];
                            dot += qt * kt;
                            mag += fabs(qt * kt);
                            folded += fmax_inline(fabs(qt), fabs(kt));
                        }
                    /* per-row FP8 scales (attn.h 1.6): the key's score is
                       dot * fl32(scale * k_scales_j), the library's f32
                       scale (1/sqrt(d) rounded for the default) times the
                       key's, one f32 product the reference takes as is */
                    double kscale = scale;
                    if (kg > 0) { /* the bound of groups: below */
                        r->s[row * lk + j] =
                            group_score(shape, opt, q, k, b, h, i, j, vis, mode, kg,
                                        &r->s_err[row * lk + j]);
                        continue;
                    }
                    if (opt && opt->k_scales) {
                        const float sf = default_scale ? (float)(1.0 / sqrt((double)d))
                                                       : opt->scale;
                        kscale = (double)(sf * (float)ref_tensor_get(opt->k_scales, b,
                                                                     h / group, j, 0));
                    }
                    const double x = dot * kscale;
                    double e0 = tol_gamma((double)d + 1.0) * fabs(kscale) * mag +
                                tol_under_qk((double)d, fabs(kscale), folded);
                    if (mode == REF_QK_BF16)
                        e0 += fabs(scale) * REF_BF16_B * (1.0 + tol_gamma((double)d + 1.0)) * mag;
                    if (mode == REF_QK_BF16 || mode == REF_QK_BF16_INPUTS)
                        e0 += fabs(scale) * REF_FLUSH * (folded + (double)d);
                    if (mode == REF_QK_I8 && vis)
                        e0 += i8_error(qr, kr, d, fabs(scale));
                    if (default_scale && !(opt && opt->k_scales))
                        e0 += 2.0 * TOL_U * fabs(x);
                    if (isnan(mag) || isinf(mag))
                        e0 = 0.0;
                    r->s[row * lk + j] =
                        finish_score(shape, opt, b, h, i, j, x, e0, &r->s_err[row * lk + j]);
                }
            }
    row_cache_free(&qc);
    row_cache_free(&kc);
    /* p and v rounded to bf16: the bf16 mode's float v, and both modes'
       Q8_0 and Q4_0 v (attn.h) */
    const int64_t prec = opt ? opt->precision : ATTN_PRECISION_DEFAULT;
    const int qv = vdt == ATTN_DTYPE_Q8_0 || vdt == ATTN_DTYPE_Q4_0;
    const int pv_bf16 = (prec == ATTN_PRECISION_BF16 && (read_as_float(vdt) || qv)) ||
                        (prec == ATTN_PRECISION_INT8 && qv);
    finish_rows(r, shape, opt, v, rescales, pv_bf16 ? REF_BF16_B : 0.0);
}

void ref_attn_compute(ref_attn *r, const attn_shape *shape, const attn_options *opt,
                      const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                      int64_t rescales)
{
    ref_attn_compute_as(r, shape, opt, q, k, v, rescales, k->dtype,
                        v ? v->dtype : ATTN_DTYPE_F32);
}

void ref_attn_from_scores(ref_attn *r, const attn_shape *shape, const attn_options *opt,
                          const attn_tensor *scores)
{
    ref_alloc(r, shape, 0);
    const int64_t lk = shape->kv_len;
    for (int64_t b = 0; b < shape->batch; b++)
        for (int64_t h = 0; h < shape->q_heads; h++)
            for (int64_t i = 0; i < shape->q_len; i++) {
                const int64_t row = (b * shape->q_heads + h) * shape->q_len + i;
                for (int64_t j = 0; j < lk; j++)
                    r->s[row * lk + j] =
                        finish_score(shape, opt, b, h, i, j, ref_tensor_get(scores, b, h, i, j),
                                     0.0, &r->s_err[row * lk + j]);
            }
    finish_rows(r, shape, opt, NULL, 0, 0.0);
}

/* ------------------------------------------------------------ merge */

void ref_merge_row(size_t n, const double *lse, const double *lse_err,
                   const double *const *o, const double *const *o_err, size_t dv, double *out,
                   double *out_err, double *L, double *L_err)
{
    const double u = TOL_U;
    double m = -INFINITY, lmax = 0.0;
    int poisoned = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(lse[i]) || lse[i] == INFINITY)
            poisoned = 1;
        else if (lse[i] > m)
            m = lse[i];
        if (lse_err && lse[i] != -INFINITY && lse_err[i] > lmax)
            lmax = lse_err[i];
    }
    if (poisoned || m == -INFINITY) {
        for (size_t t = 0; t < dv; t++) {
            out[t] = poisoned ? NAN : 0.0;
            out_err[t] = 0.0;
        }
        *L = poisoned ? NAN : -INFINITY;
        *L_err = 0.0;
        return;
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        if (lse[i] != -INFINITY)
            sum += exp(lse[i] - m);
    const double lstar = m + log(sum);
    const double eps_w = u + ((double)n + 4.0) * TOL_MERGE_DOUBLE;
    const double g = tol_gamma((double)n);
    for (size_t t = 0; t < dv; t++) {
        double acc = 0.0, err = (double)n * TOL_TINY;
        for (size_t i = 0; i < n; i++) {
            if (lse[i] == -INFINITY)
                continue;
            /* relative to m, not to lstar: m + log(sum) may round to m */
            const double w = exp(lse[i] - m) / sum;
            const double e = o_err ? o_err[i][t] : 0.0;
            const double rho = expm1((lse_err ? lse_err[i] : 0.0) + lmax);
            const double c = (1.0 + rho) * (1.0 + eps_w) * (1.0 + g);
            acc += w * o[i][t];
            err += w * ((c - 1.0) * fabs(o[i][t]) + c * e) + TOL_TINY * (fabs(o[i][t]) + e);
        }
        out[t] = acc;
        out_err[t] = err;
    }
    *L = lstar;
    *L_err = lmax * (1.0 + u) +
             (u + ((double)n + 4.0) * TOL_MERGE_DOUBLE) * (fabs(lstar) + lmax + log((double)n) + 1.0);
}

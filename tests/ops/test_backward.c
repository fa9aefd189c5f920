/* SPDX-License-Identifier: MIT */
/*
 * attn_backward: the float64 reference of the gradients against central
 * finite differences of its own forward; every ISA row against that
 * reference (bounds of tolerance.h, "backward", dk's and dv's counted
 * from the plan's blocks) and against the scalar row; a long sequence
 * whose dk and dv one f32 chain would sum beyond that bound; bitwise
 * determinism over thread counts and task orders; argument errors that
 * leave every output untouched.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "harness.h"
#include "ref/ref.h"
#include "ref/ref_backward.h"
#include "tolerance.h"
#include "workload.h"

/* ------------------------------------------------------------ the reference vs finite differences */

/* Central difference of the loss in *x, with the step h. */
static double central(ref_bwd_in *in, double *x, double h)
{
    const double keep = *x;
    *x = keep + h;
    const double up = ref_bwd_forward(in, NULL, NULL);
    *x = keep - h;
    const double down = ref_bwd_forward(in, NULL, NULL);
    *x = keep;
    return (up - down) / (2.0 * h);
}

/*
 * grad[i] against the central difference of every element of x[0..n).
 * The difference's error is bounded from the data, not guessed:
 *  - truncation: fd(h) = g + c h^2 + O(h^4), so |fd(h) - g| is within
 *    (4/3)|fd(h) - fd(h/2)| to leading order; we take 2|fd(h) - fd(h/2)|;
 *  - rounding: each loss evaluation is a float64 sum of products whose
 *    relative error is at most (d + Lk + dv + 32) eps (dot, exp/log, the
 *    P.V sum, the loss sum), on a loss of magnitude <= M = sum|dout| max|v|;
 *    two evaluations over 2h (h/2 in the second difference: twice that).
 * The bound must also be tight enough to mean something: at most
 * 1e-4 (1 + max|g|), max|g| over the tensor, so a difference check that
 * would accept anything fails instead. (Relative to the tensor, not to the
 * element: an element whose gradient is 0, e.g. dq with one visible key,
 * still has the rounding of the whole loss, which grows with the rows a
 * key or value reaches; a wrong formula moves gradients by a fraction of
 * their scale, far above 1e-4 of it.)
 */
static double max_abs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

static void check_fd(const char *what, ref_bwd_in *in, double *x, const double *grad, size_t n,
                     double roundoff, double gmax)
{
    const double h = 2e-4;
    for (size_t i = 0; i < n; i++) {
        const double f1 = central(in, &x[i], h), f2 = central(in, &x[i], h / 2.0);
        const double bound = 2.0 * fabs(f1 - f2) + 2.0 * roundoff / h;
        CHECK(bound <= 1e-4 * (1.0 + gmax),
              "%s[%zu]: the finite difference itself is too uncertain (%.3g)", what, i, bound);
        CHECK(fabs(f2 - grad[i]) <= bound,
              "%s[%zu]: reference %.12g, central difference %.12g, |diff| %.3g > %.3g", what, i,
              grad[i], f2, fabs(f2 - grad[i]), bound);
    }
}

static void fd_problem(workload *wp)
{
    workload w = *wp;
    harness_context("finite differences on %s", wl_describe(&w));
    const attn_shape *s = &w.shape;
    const int64_t dv = w.dv;
    /* dout as an f32 [B][Hq][Lq][dv] tensor */
    const size_t nd = (size_t)(s->batch * s->q_heads * s->q_len * dv);
    float *dout = xmalloc(nd * 4);
    rng_fill(harness_rng(), dout, nd, -1.0f, 1.0f);
    attn_tensor dt = {dout, ATTN_DTYPE_F32, s->q_heads * s->q_len * dv, s->q_len * dv, dv};

    ref_bwd_in in;
    ref_bwd_load(&in, s, &w.opt, &w.q, &w.k, &w.v, &dt);
    ref_grads g;
    ref_bwd_grads(&g, &in, NULL, NULL);

    double vmax = 0.0, dsum = 0.0;
    for (size_t i = 0; i < (size_t)(s->batch * s->kv_heads * s->kv_len * dv); i++)
        vmax = fmax(vmax, fabs(in.v[i]));
    for (size_t i = 0; i < nd; i++)
        dsum += fabs(in.dout[i]);
    const double roundoff =
        (double)(s->head_dim + s->kv_len + dv + 32) * DBL_EPSILON * dsum * vmax;

    const size_t nq = (size_t)(s->batch * s->q_heads * s->q_len * s->head_dim),
                 nk = (size_t)(s->batch * s->kv_heads * s->kv_len * s->head_dim),
                 nv = (size_t)(s->batch * s->kv_heads * s->kv_len * dv);
    check_fd("dq", &in, in.q, g.dq, nq, roundoff, max_abs(g.dq, nq));
    check_fd("dk", &in, in.k, g.dk, nk, roundoff, max_abs(g.dk, nk));
    check_fd("dv", &in, in.v, g.dv, nv, roundoff, max_abs(g.dv, nv));
    if (in.sinks) {
        const size_t ns = (size_t)(s->batch * s->q_heads);
        check_fd("dsinks", &in, in.sinks, g.dsinks, ns, roundoff, max_abs(g.dsinks, ns));
    }
    if (in.bias) { /* dbias = dS; a -inf bias entry stays -inf: its derivative is 0 */
        const size_t nb = (size_t)(s->batch * s->q_heads * s->q_len * s->kv_len);
        for (size_t i = 0; i < nb; i++)
            if (in.bias[i] == -INFINITY)
                CHECK(g.ds[i] == 0.0, "ds[%zu] = %g under a -inf bias", i, g.ds[i]);
            else
                check_fd("dbias", &in, &in.bias[i], &g.ds[i], 1, roundoff, max_abs(g.ds, nb));
    }
    ref_grads_free(&g);
    ref_bwd_free(&in);
    free(dout);
}

Test(backward_ref, finite_differences, .timeout = ATTN_TEST_TIMEOUT)
{
    harness_begin_plain("float64");
    static const unsigned specs[] = {
        0,
        WL_CAUSAL | WL_GQA,
        WL_SOFTCAP | WL_SCALE,
        WL_BIAS | WL_MASK,
        WL_WINDOW | WL_LENS | WL_CAUSAL,
        WL_MQA | WL_VDIM | WL_SOFTCAP | WL_BIAS | WL_CAUSAL,
        WL_Q_SHORT | WL_WINDOW | WL_MASK,
        WL_F16 | WL_CAUSAL,
        WL_SINKS | WL_CAUSAL | WL_GQA,
        WL_ALIBI | WL_WINDOW | WL_WINDOW_R,
        WL_SINKS | WL_ALIBI | WL_SOFTCAP | WL_LENS,
        WL_TOPK | WL_CAUSAL | WL_SOFTCAP,
        WL_KPOS | WL_CAUSAL | WL_ALIBI | WL_WINDOW,
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        /* small enough for a difference per element: redraw (wl_make picks
           lengths up to 129; about one draw in five is small) */
        workload w;
        for (int tries = 0;; tries++) {
            CHECK(tries < 10000, "no small problem drawn for spec %#x", specs[i]);
            wl_make(&w, specs[i]);
            const attn_shape *s = &w.shape;
            if (s->batch * s->q_heads * s->q_len * s->kv_len * (s->head_dim + w.dv) <= 12000)
                break;
            wl_free(&w);
        }
        fd_problem(&w);
        wl_free(&w);
    }
}

/* ------------------------------------------------------------ every ISA vs the reference */

/* Gradient outputs of one run: dense, guarded. */
typedef struct grads_buf {
    buf qb, kb, vb, bb, sb;
    attn_tensor dq, dk, dv, dbias;
    attn_grads g;
} grads_buf;

static void grads_alloc(grads_buf *gb, const workload *w, int with_dbias)
{
    const attn_shape *s = &w->shape;
    const int64_t d = s->head_dim, dv = w->dv;
    float *dq = buf_alloc(&gb->qb, (size_t)(s->batch * s->q_heads * s->q_len * d) * 4, 0);
    float *dk = buf_alloc(&gb->kb, (size_t)(s->batch * s->kv_heads * s->kv_len * d) * 4, 4);
    float *dvp = buf_alloc(&gb->vb, (size_t)(s->batch * s->kv_heads * s->kv_len * dv) * 4, 0);
    gb->dq = (attn_tensor){dq, ATTN_DTYPE_F32, s->q_heads * s->q_len * d, s->q_len * d, d};
    gb->dk = (attn_tensor){dk, ATTN_DTYPE_F32, s->kv_heads * s->kv_len * d, s->kv_len * d, d};
    gb->dv = (attn_tensor){dvp, ATTN_DTYPE_F32, s->kv_heads * s->kv_len * dv, s->kv_len * dv, dv};
    attn_grads init = ATTN_GRADS_INIT;
    gb->g = init;
    gb->g.dq = &gb->dq;
    gb->g.dk = &gb->dk;
    gb->g.dv = &gb->dv;
    gb->bb.base = NULL;
    gb->sb.base = NULL;
    gb->sb.bytes = 0;
    if (w->opt.sinks) /* always asked for when there are sinks */
        gb->g.dsinks = buf_alloc(&gb->sb, (size_t)(s->batch * s->q_heads) * 4, 4);
    if (with_dbias) {
        const int64_t lk = s->kv_len;
        float *db = buf_alloc(&gb->bb, (size_t)(s->batch * s->q_heads * s->q_len * lk) * 4, 4);
        gb->dbias = (attn_tensor){db, ATTN_DTYPE_F32, s->q_heads * s->q_len * lk,
                                  s->q_len * lk, lk};
        gb->g.dbias = &gb->dbias;
    }
}

static void grads_poison(grads_buf *gb)
{
    buf *all[5] = {&gb->qb, &gb->kb, &gb->vb, &gb->bb, &gb->sb};
    for (int i = 0; i < 5; i++)
        if (all[i]->base)
            memset(all[i]->data, 0x7f, all[i]->bytes); /* a NaN-free huge pattern */
}

static void grads_check_guards(const grads_buf *gb)
{
    buf_check(&gb->qb, "dq");
    buf_check(&gb->kb, "dk");
    buf_check(&gb->vb, "dv");
    if (gb->bb.base)
        buf_check(&gb->bb, "dbias");
    if (gb->sb.base)
        buf_check(&gb->sb, "dsinks");
}

static void grads_free(grads_buf *gb)
{
    buf_free(&gb->qb);
    buf_free(&gb->kb);
    buf_free(&gb->vb);
    if (gb->bb.base)
        buf_free(&gb->bb);
    if (gb->sb.base)
        buf_free(&gb->sb);
}

/* got (n values) vs float64, and vs the scalar row's when scalar != NULL. */
static void compare_grad(const char *what, const float *got, const float *scalar,
                         const double *want, const double *err, size_t n)
{
    expect_near_and_scalar(what, got, scalar, want, err, 1, n);
}

/* The forward on t, then attn_backward on t (and scalar) with the
   workload's options but the precision mode bwd_precision, against float64. */
static void check_backward_in(const attn_dsp *t, workload *w, int64_t bwd_precision)
{
    const attn_dsp *sc = harness_scalar();
    const int is_scalar = harness_is_scalar(t);
    const attn_shape *s = &w->shape;
    const int64_t dv = w->dv;
    rng *g = harness_rng();
    const int with_dbias = (int)rng_int(g, 0, 1) || w->opt.bias;
    harness_context("backward (%s plan) on %s%s",
                    attn_bwd_fused_min_tasks <= s->batch * s->kv_heads ? "fused" : "split",
                    wl_describe(w), with_dbias ? " +dbias" : "");

    attn_status st = attn_forward_with(t, s, &w->opt, &w->q, &w->k, &w->v, &w->out, &w->stats);
    CHECK(st == ATTN_OK, "forward status %d", st);
    const size_t rows = (size_t)wl_rows(w);
    float *o = xmalloc(rows * (size_t)dv * 4);
    wl_gather(w, &w->out, dv, o);

    /* dout, and sometimes out, as F16 or BF16 (the backward reads them like q) */
    int32_t dtypes[ATTN_DTYPE_COUNT]; /* the float dtypes (tests/dtypes.h) */
    const int n_dtypes = test_dtypes_of(DT_FLOAT, dtypes);
    const int32_t dout_type = dtypes[rng_int(g, 0, n_dtypes - 1)];
    const int32_t out_type = dtypes[rng_int(g, 0, n_dtypes - 1)];
    const size_t n_o = rows * (size_t)dv;
    buf db, ob;
    void *dout = buf_alloc(&db, n_o * ref_dtype_size(dout_type), 0);
    void *out_in = buf_alloc(&ob, n_o * ref_dtype_size(out_type), 0);
    for (size_t i = 0; i < n_o; i++) {
        const float x = rng_float(g, -2.0f, 2.0f);
        if (dout_type == ATTN_DTYPE_F32)
            ((float *)dout)[i] = x;
        else
            ((uint16_t *)dout)[i] =
                dout_type == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
        if (out_type == ATTN_DTYPE_F32) {
            ((float *)out_in)[i] = o[i];
        } else { /* the reference then measures the rounded output's error */
            const uint16_t h = out_type == ATTN_DTYPE_F16 ? ref_f32_to_f16(o[i])
                                                          : ref_f32_to_bf16(o[i]);
            ((uint16_t *)out_in)[i] = h;
            o[i] = (float)(out_type == ATTN_DTYPE_F16 ? ref_f16_to_double(h)
                                                      : ref_bf16_to_double(h));
        }
    }
    attn_tensor dt = {dout, dout_type, s->q_heads * s->q_len * dv, s->q_len * dv, dv};
    const attn_tensor ot = {out_in, out_type, s->q_heads * s->q_len * dv, s->q_len * dv, dv};
    harness_context("backward (%s plan) on %s%s, dout/out dtype %d/%d",
                    attn_bwd_fused_min_tasks <= s->batch * s->kv_heads ? "fused" : "split",
                    wl_describe(w), with_dbias ? " +dbias" : "", dout_type, out_type);

    grads_buf got, ref_scalar;
    grads_alloc(&got, w, with_dbias);
    grads_poison(&got);
    attn_options bo = w->opt;
    bo.precision = bwd_precision;
    st = attn_backward_with(t, s, &bo, &w->q, &w->k, &w->v, &ot, &dt, w->stats.lse,
                            &got.g);
    CHECK(st == ATTN_OK, "backward status %d (%s)", st, attn_strerror(st));
    grads_check_guards(&got);
    if (!is_scalar) {
        grads_alloc(&ref_scalar, w, with_dbias);
        st = attn_backward_with(sc, s, &bo, &w->q, &w->k, &w->v, &ot, &dt,
                                w->stats.lse, &ref_scalar.g);
        CHECK(st == ATTN_OK, "scalar backward status %d", st);
    }

    /* dk's and dv's bound counts the plan's blocks (tolerance.h, "backward") */
    ref_bwd_blocks blk;
    st = attn_bwd_plan_blocks(t, s, &bo, &w->q, &w->k, &w->v, &ot, &dt, w->stats.lse, &got.g,
                              &blk.block_rows, &blk.fused);
    CHECK(st == ATTN_OK, "backward blocks status %d", st);
    ref_bwd_in in;
    ref_bwd_load(&in, s, &bo, &w->q, &w->k, &w->v, &dt);
    ref_grads r;
    ref_bwd_grads_blocks(&r, &in, w->stats.lse, o, &blk);
    const size_t nq = rows * (size_t)s->head_dim;
    const size_t nk = (size_t)(s->batch * s->kv_heads * s->kv_len);
    compare_grad("dq", got.dq.data, is_scalar ? NULL : ref_scalar.dq.data, r.dq, r.dq_err, nq);
    compare_grad("dk", got.dk.data, is_scalar ? NULL : ref_scalar.dk.data, r.dk, r.dk_err,
                 nk * (size_t)s->head_dim);
    compare_grad("dv", got.dv.data, is_scalar ? NULL : ref_scalar.dv.data, r.dv, r.dv_err,
                 nk * (size_t)dv);
    if (with_dbias)
        compare_grad("dbias", got.dbias.data, is_scalar ? NULL : ref_scalar.dbias.data, r.ds,
                     r.ds_err, rows * (size_t)s->kv_len);
    if (w->opt.sinks)
        compare_grad("dsinks", got.g.dsinks, is_scalar ? NULL : ref_scalar.g.dsinks, r.dsinks,
                     r.dsinks_err, (size_t)(s->batch * s->q_heads));

    ref_grads_free(&r);
    ref_bwd_free(&in);
    grads_free(&got);
    if (!is_scalar)
        grads_free(&ref_scalar);
    buf_free(&db);
    buf_free(&ob);
    free(o);
}

static void check_backward(const attn_dsp *t, workload *w)
{
    check_backward_in(t, w, w->opt.precision);
}

#define ALL_MASKS (WL_CAUSAL | WL_LENS | WL_WINDOW | WL_SOFTCAP | WL_BIAS | WL_MASK)

static const unsigned bwd_specs[] = {
    0,
    WL_CAUSAL,
    WL_CAUSAL | WL_Q_SHORT,
    WL_CAUSAL | WL_Q_LONG,
    WL_CAUSAL | WL_DECODE,
    WL_LENS,
    WL_LENS | WL_CAUSAL | WL_Q_LONG,
    WL_WINDOW,
    WL_WINDOW | WL_CAUSAL | WL_LENS | WL_Q_SHORT,
    WL_SOFTCAP,
    WL_SOFTCAP | WL_SCALE,
    WL_BIAS,
    WL_MASK,
    WL_BIAS | WL_MASK | WL_CAUSAL,
    WL_GQA,
    WL_GQA | WL_CAUSAL | WL_LENS,
    WL_MQA | WL_DECODE | WL_CAUSAL,
    WL_MQA,
    WL_BLHD | WL_PAD | WL_OFFSET,
    WL_F16,
    WL_BF16,
    WL_F16 | WL_GQA | WL_CAUSAL,
    WL_VDIM,
    WL_VDIM0,
    WL_BIG_HEAD | WL_CAUSAL,
    ALL_MASKS | WL_GQA | WL_BLHD | WL_PAD | WL_BF16 | WL_VDIM | WL_SCALE | WL_OFFSET,
    ALL_MASKS | WL_MQA | WL_F16 | WL_VDIM0 | WL_Q_SHORT,
    WL_SINKS,
    WL_SINKS | WL_LENS | WL_Q_LONG | WL_CAUSAL,
    WL_ALIBI | WL_CAUSAL,
    WL_ALIBI | WL_GQA | WL_BIAS,
    WL_WINDOW | WL_WINDOW_R | WL_Q_SHORT,
    WL_WINDOW_R | WL_CAUSAL | WL_SINKS,
    ALL_MASKS | WL_SINKS | WL_ALIBI | WL_WINDOW_R | WL_GQA | WL_BF16,
    WL_TREE | WL_Q_SHORT,
    WL_TREE | WL_CAUSAL | WL_LENS | WL_SINKS | WL_ALIBI | WL_GQA,
    WL_TOPK,
    WL_TOPK | WL_CAUSAL | WL_LENS | WL_SOFTCAP | WL_GQA,
    WL_TOPK | WL_SINKS | WL_ALIBI | WL_BIAS | WL_MQA | WL_F16,
    WL_KPOS | WL_CAUSAL | WL_ALIBI,
    WL_KPOS | WL_WINDOW | WL_WINDOW_R | WL_LENS | WL_GQA | WL_SINKS,
    WL_KPOS | WL_CAUSAL | WL_WINDOW | WL_ALIBI | WL_SOFTCAP | WL_BIAS | WL_Q_SHORT,
};

/* Both plans of the driver (backward.c) on every spec: fused (one task per
   (batch entry, KV head)) and split (query and key tasks). */
static const int64_t plans[] = {1, INT64_MAX};

/* One workload per spec, forward and backward in `precision`. */
static void check_specs(const attn_dsp *t, const unsigned *specs, size_t n, int64_t precision)
{
    for (size_t i = 0; i < n; i++) {
        workload w;
        wl_make(&w, specs[i]);
        w.opt.precision = precision;
        check_backward(t, &w);
        wl_free(&w);
    }
}

HARNESS_ISA_PARAMS(backward, vs_reference)
ParameterizedTest(isa_row *row, backward, vs_reference, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    for (int plan = 0; plan < 2; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        check_specs(t, bwd_specs, sizeof bwd_specs / sizeof bwd_specs[0],
                    ATTN_PRECISION_DEFAULT);
    }
}

/* The bf16 mode (attn.h, attn_precision): the forward and the backward both
   in it, so the scores the backward recomputes are the forward's (its lse's);
   the float64 gradients' bound takes the mode's score bound (ref_backward.c,
   row_scores). Rows without bf16 kernels compute the default mode, within it. */
static const unsigned bf16_specs[] = {
    WL_CAUSAL,
    WL_CAUSAL | WL_Q_LONG | WL_GQA,
    WL_LENS | WL_SOFTCAP | WL_BIAS,
    WL_F16 | WL_CAUSAL | WL_SINKS,
    WL_BF16 | WL_GQA | WL_ALIBI,
    WL_BIG_HEAD | WL_CAUSAL,
    WL_BLHD | WL_PAD | WL_OFFSET | WL_VDIM | WL_WINDOW,
    WL_MQA | WL_DECODE | WL_CAUSAL,
};

HARNESS_ISA_PARAMS(backward, bf16_mode)
ParameterizedTest(isa_row *row, backward, bf16_mode, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    for (int plan = 0; plan < 2; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        check_specs(t, bf16_specs, sizeof bf16_specs / sizeof bf16_specs[0],
                    ATTN_PRECISION_BF16);
        /* q = 0 and a default-mode forward: every score is exactly 0 and
           out is f32's, so the bf16 backward's score terms vanish and only
           dQ's rounded products (dS and k) can move dq. Two draws with
           enough rows, keys and dims for the dot kernels to round (the
           first qualifying ones; a draw that does not qualify is skipped) */
        for (int tries = 0, done = 0; tries < 200 && done < 2; tries++) {
            workload w;
            wl_make(&w, WL_CAUSAL | WL_Q_LONG);
            const attn_shape *s = &w.shape;
            if (s->q_len >= 16 && s->kv_len >= 16 && s->head_dim >= 8) {
                for (int64_t b = 0; b < s->batch; b++)
                    for (int64_t h = 0; h < s->q_heads; h++)
                        for (int64_t r = 0; r < s->q_len; r++)
                            for (int64_t c = 0; c < s->head_dim; c++)
                                wl_set(&w.q, b, h, r, c, 0.0f);
                check_backward_in(t, &w, ATTN_PRECISION_BF16);
                done++;
            }
            wl_free(&w);
        }
    }
}

/* ------------------------------------------------------------ long sequences */

/*
 * dk and dv of a long sequence (attn_backward sums them over every row of
 * the group): Lq rows that are all the same (one q row, one dO row), so
 * each element sums Lq equal terms. One f32 chain of them rounds the same
 * way at every step of a binade, and its error grows like Lq (its worst is
 * about Lq u / 4); the blocked sum of src/dsp.h (pt_tile) meets at most
 * R + M - 1 roundings per term, R rows a block and M = Lq / R blocks
 * (tolerance.h, "backward"), the bound this takes. Small scores (q within
 * 1/8), dO of one sign and V rows of one sign each keep the bound's other
 * terms (the scores' and dP's roundings) small beside the sum's: a single
 * chain of 4096 rows then exceeds the bound several times over (2.7 to 6.7
 * times on the x86 tables), the blocked sum stays within a quarter of it.
 * Lk 8 keeps the float64 reference short, and with one head both plans cut
 * the rows alike, so one reference serves both where their blocks have as
 * many rows.
 */
static void check_long_rows(const attn_dsp *t, int64_t lq)
{
    enum { LK = 8, D = 64 };
    const attn_shape s = {1, 1, 1, lq, LK, D, D};
    harness_context("long rows, Lq %lld, Lk %d, d %d", (long long)lq, LK, D);
    rng *g = harness_rng();
    float *q = xmalloc((size_t)lq * D * 4), *dout = xmalloc((size_t)lq * D * 4);
    float k[LK * D], v[LK * D];
    rng_fill(g, q, D, -0.125f, 0.125f);
    rng_fill(g, dout, D, 0.5f, 1.0f);
    for (int64_t i = 1; i < lq; i++) {
        memcpy(q + i * D, q, D * 4);
        memcpy(dout + i * D, dout, D * 4);
    }
    rng_fill(g, k, LK * D, -1.0f, 1.0f);
    rng_fill(g, v, LK * D, 0.5f, 1.0f);
    for (int j = 1; j < LK; j += 2)
        for (int c = 0; c < D; c++)
            v[j * D + c] = -v[j * D + c];
    const attn_tensor qt = {q, ATTN_DTYPE_F32, lq * D, lq * D, D};
    const attn_tensor kt = {k, ATTN_DTYPE_F32, LK * D, LK * D, D};
    const attn_tensor vt = {v, ATTN_DTYPE_F32, LK * D, LK * D, D};
    const attn_tensor dt = {dout, ATTN_DTYPE_F32, lq * D, lq * D, D};
    float *o = xmalloc((size_t)lq * D * 4), *lse = xmalloc((size_t)lq * 4);
    float *dq = xmalloc((size_t)lq * D * 4), dk[LK * D], dvp[LK * D];
    const attn_tensor ot = {o, ATTN_DTYPE_F32, lq * D, lq * D, D};
    const attn_tensor dqt = {dq, ATTN_DTYPE_F32, lq * D, lq * D, D};
    const attn_tensor dkt = {dk, ATTN_DTYPE_F32, LK * D, LK * D, D};
    const attn_tensor dvt = {dvp, ATTN_DTYPE_F32, LK * D, LK * D, D};
    attn_row_stats stats = {0};
    stats.lse = lse;
    const attn_options opt = ATTN_OPTIONS_INIT;
    CHECK(attn_forward_with(t, &s, &opt, &qt, &kt, &vt, &ot, &stats) == ATTN_OK, "forward");
    attn_grads gr = ATTN_GRADS_INIT;
    gr.dq = &dqt;
    gr.dk = &dkt;
    gr.dv = &dvt;
    ref_bwd_in in;
    ref_bwd_load(&in, &s, &opt, &qt, &kt, &vt, &dt);
    ref_grads r;
    memset(&r, 0, sizeof r);
    int64_t ref_rows = 0; /* the block rows r was computed for */
    for (int plan = 0; plan < 2; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        harness_context("long rows (%s plan), Lq %lld, Lk %d, d %d", plan ? "split" : "fused",
                        (long long)lq, LK, D);
        ref_bwd_blocks blk;
        CHECK(attn_bwd_plan_blocks(t, &s, &opt, &qt, &kt, &vt, &ot, &dt, lse, &gr,
                                   &blk.block_rows, &blk.fused) == ATTN_OK,
              "blocks");
        if (blk.block_rows != ref_rows) {
            if (ref_rows)
                ref_grads_free(&r);
            ref_bwd_grads_blocks(&r, &in, lse, o, &blk);
            ref_rows = blk.block_rows;
        }
        CHECK(attn_backward_with(t, &s, &opt, &qt, &kt, &vt, &ot, &dt, lse, &gr) == ATTN_OK,
              "backward");
        compare_grad("dv", dvp, NULL, r.dv, r.dv_err, LK * D);
        compare_grad("dk", dk, NULL, r.dk, r.dk_err, LK * D);
    }
    ref_grads_free(&r);
    ref_bwd_free(&in);
    free(q), free(dout), free(o), free(lse), free(dq);
}

HARNESS_ISA_PARAMS(backward, long_rows)
ParameterizedTest(isa_row *row, backward, long_rows, .timeout = ATTN_TEST_TIMEOUT)
{
    check_long_rows(harness_begin(row), 4096);
}

/* ------------------------------------------------------------ determinism */

typedef struct reverse_pool {
    int calls;
} reverse_pool;

static void reverse_parallel_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    ((reverse_pool *)ctx)->calls++;
    for (size_t i = count; i-- > 0;)
        task(task_ctx, i);
}

static void check_deterministic(const attn_dsp *t);

static void snapshot(const grads_buf *gb, float **dst, size_t sizes[5])
{
    const buf *all[5] = {&gb->qb, &gb->kb, &gb->vb, &gb->bb, &gb->sb};
    for (int i = 0; i < 5; i++) {
        sizes[i] = all[i]->bytes;
        dst[i] = xmalloc(sizes[i]);
        if (sizes[i])
            memcpy(dst[i], all[i]->data, sizes[i]);
    }
}

HARNESS_ISA_PARAMS(backward, deterministic)
ParameterizedTest(isa_row *row, backward, deterministic, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    for (int plan = 0; plan < 2; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        check_deterministic(t);
    }
}

static void check_deterministic(const attn_dsp *t)
{
    workload w;
    wl_make(&w, WL_GQA | WL_CAUSAL | WL_LENS | WL_BIAS | WL_SOFTCAP | WL_SINKS | WL_ALIBI);
    harness_context("determinism (%s plan) on %s",
                    attn_bwd_fused_min_tasks == 1 ? "fused" : "split", wl_describe(&w));
    CHECK(attn_forward_with(t, &w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) == ATTN_OK,
          "forward");
    const size_t rows = (size_t)wl_rows(&w);
    float *dout = xmalloc(rows * (size_t)w.dv * 4);
    rng_fill(harness_rng(), dout, rows * (size_t)w.dv, -1.0f, 1.0f);
    attn_tensor dt = {dout, ATTN_DTYPE_F32, w.shape.q_heads * w.shape.q_len * w.dv,
                      w.shape.q_len * w.dv, w.dv};
    grads_buf gb;
    grads_alloc(&gb, &w, 1);

    float *serial[5], *other[5];
    size_t sizes[5];
    CHECK(attn_backward_with(t, &w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &dt, w.stats.lse,
                             &gb.g) == ATTN_OK, "serial");
    snapshot(&gb, serial, sizes);

    attn_threadpool *pool;
    const int32_t threads[] = {1, 2, 7};
    for (int c = 0; c < 4; c++) {
        reverse_pool rp = {0};
        grads_poison(&gb);
        attn_options opt = w.opt;
        if (c < 3) {
            CHECK(attn_threadpool_create(threads[c], &pool) == ATTN_OK, "pool");
            opt.parallel_for = attn_threadpool_parallel_for;
            opt.parallel_ctx = pool;
        } else {
            opt.parallel_for = reverse_parallel_for;
            opt.parallel_ctx = &rp;
        }
        CHECK(attn_backward_with(t, &w.shape, &opt, &w.q, &w.k, &w.v, &w.out, &dt, w.stats.lse,
                                 &gb.g) == ATTN_OK, "parallel run %d", c);
        if (c < 3)
            attn_threadpool_destroy(pool);
        else
            CHECK(rp.calls == 1, "parallel_for called %d times", rp.calls);
        snapshot(&gb, other, sizes);
        static const char *const names[5] = {"dq", "dk", "dv", "dbias", "dsinks"};
        for (int i = 0; i < 5; i++) {
            expect_bits(names[i], other[i], serial[i], sizes[i] / 4);
            free(other[i]);
        }
    }
    for (int i = 0; i < 5; i++)
        free(serial[i]);
    grads_free(&gb);
    free(dout);
    wl_free(&w);
}

/* ------------------------------------------------------------ fully masked rows, errors */

Test(backward, masked_rows_are_zero)
{
    harness_begin_plain("active");
    /* q_lens 0 for one batch entry, a BOOL mask hiding every key of some rows */
    workload w;
    wl_make(&w, WL_LENS | WL_MASK | WL_CAUSAL);
    const attn_shape *s = &w.shape;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i += 2)
                for (int64_t j = 0; j < s->kv_len; j++)
                    *(uint8_t *)wl_at(&w.mask, b, h, i, j) = 0;
    harness_context("%s", wl_describe(&w));
    CHECK(attn_forward(s, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) == ATTN_OK, "forward");
    const size_t rows = (size_t)wl_rows(&w);
    float *dout = xmalloc(rows * (size_t)w.dv * 4);
    rng_fill(harness_rng(), dout, rows * (size_t)w.dv, -1.0f, 1.0f);
    attn_tensor dt = {dout, ATTN_DTYPE_F32, s->q_heads * s->q_len * w.dv, s->q_len * w.dv, w.dv};
    grads_buf gb;
    grads_alloc(&gb, &w, 1);
    grads_poison(&gb);
    CHECK(attn_backward(s, &w.opt, &w.q, &w.k, &w.v, &w.out, &dt, w.stats.lse, &gb.g) == ATTN_OK,
          "backward");
    const float *dq = gb.dq.data, *dbias = gb.dbias.data;
    for (size_t r = 0; r < rows; r++) {
        if (w.stats.lse[r] != -INFINITY)
            continue;
        for (int64_t t = 0; t < s->head_dim; t++)
            CHECK(dq[r * (size_t)s->head_dim + (size_t)t] == 0.0f, "dq row %zu not 0", r);
        for (int64_t j = 0; j < s->kv_len; j++)
            CHECK(dbias[r * (size_t)s->kv_len + (size_t)j] == 0.0f, "dbias row %zu not 0", r);
    }
    /* keys beyond kv_lens: dk and dv exactly 0 */
    const float *dk = gb.dk.data, *dvp = gb.dv.data;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->kv_heads; h++)
            for (int64_t j = w.kv_lens[b]; j < s->kv_len; j++) {
                const size_t at = (size_t)((b * s->kv_heads + h) * s->kv_len + j);
                for (int64_t t = 0; t < s->head_dim; t++)
                    CHECK(dk[at * (size_t)s->head_dim + (size_t)t] == 0.0f, "dk key %zu", at);
                for (int64_t t = 0; t < w.dv; t++)
                    CHECK(dvp[at * (size_t)w.dv + (size_t)t] == 0.0f, "dv key %zu", at);
            }
    grads_free(&gb);
    free(dout);
    wl_free(&w);
}

/* ------------------------------------------------------- exact cancellation */

/*
 * Rows that see one key: the softmax is constant there (P = 1), so the
 * exact dq, dk and dbias are 0, and O is that key's V. The backward sums
 * D = dO.O in the order of dP's tile (src/dsp.h, qk_diag), so dP - D is
 * exactly 0, and so are dq, dk and dbias, on every ISA and both plans.
 * Case 0 is FlashAttention's test_flash_attn_splitkv case (f16, d 64,
 * ALiBi, q_len 339, kv_len 1), where two differently ordered sums left
 * dk ~1e-5. Q, K, V and out share a dtype, so O == V holds in storage.
 *
 * Near-one-hot rows (one_hot): every key visible, but a bias of -40 on all
 * keys but row i's key i % Lk leaves the others weights below e^-30, so O
 * rounds to that key's V in most rows; there dS of that key (dbias) must be
 * exactly 0 as well (the other keys' dS are ~1e-13, within the reference
 * bound of the vs_reference tests).
 */
typedef struct one_key_case {
    attn_shape shape;
    int32_t dtype;
    int causal_diagonal; /* causal with window 1: each row sees its own key */
    int alibi, bias, one_hot;
} one_key_case;

static const one_key_case one_key_cases[] = {
    {{1, 2, 2, 339, 1, 64, 0}, ATTN_DTYPE_F16, 0, 1, 0, 0},
    {{2, 4, 2, 100, 100, 128, 0}, ATTN_DTYPE_BF16, 1, 0, 1, 0},
    {{1, 3, 1, 40, 1, 80, 0}, ATTN_DTYPE_F32, 0, 0, 1, 0},
    {{1, 2, 2, 70, 70, 256, 0}, ATTN_DTYPE_F16, 1, 1, 0, 0},
    {{3, 1, 1, 18, 18, 40, 24}, ATTN_DTYPE_F32, 1, 0, 0, 0},
    {{1, 2, 1, 48, 8, 64, 0}, ATTN_DTYPE_F16, 0, 1, 1, 1},
    {{2, 2, 2, 20, 5, 128, 0}, ATTN_DTYPE_F32, 0, 0, 1, 1},
};

/* n random values in [-2, 2) stored as dtype. */
static void *one_key_fill(int32_t dtype, size_t n)
{
    rng *g = harness_rng();
    const size_t size = dtype == ATTN_DTYPE_F32 ? 4 : 2;
    unsigned char *x = xmalloc(n * size);
    for (size_t i = 0; i < n; i++) {
        const float f = rng_float(g, -2.0f, 2.0f);
        if (dtype == ATTN_DTYPE_F32)
            memcpy(x + 4 * i, &f, 4);
        else
            ((uint16_t *)x)[i] = dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(f) : ref_f32_to_bf16(f);
    }
    return x;
}

static void check_one_key(const attn_dsp *t, const one_key_case *c)
{
    const attn_shape *s = &c->shape;
    const int64_t d = s->head_dim, dv = s->v_dim ? s->v_dim : d;
    const int64_t B = s->batch, hq = s->q_heads, hk = s->kv_heads, lq = s->q_len, lk = s->kv_len;
    harness_context("one visible key: B %lld Hq %lld Hkv %lld Lq %lld Lk %lld d %lld dv %lld "
                    "dtype %d%s%s%s%s",
                    (long long)B, (long long)hq, (long long)hk, (long long)lq, (long long)lk,
                    (long long)d, (long long)dv, c->dtype, c->causal_diagonal ? " diagonal" : "",
                    c->alibi ? " alibi" : "", c->bias ? " bias" : "",
                    c->one_hot ? " near-one-hot" : "");
    void *q = one_key_fill(c->dtype, (size_t)(B * hq * lq * d));
    void *k = one_key_fill(c->dtype, (size_t)(B * hk * lk * d));
    void *v = one_key_fill(c->dtype, (size_t)(B * hk * lk * dv));
    void *o = one_key_fill(c->dtype, (size_t)(B * hq * lq * dv));
    float *dout = one_key_fill(ATTN_DTYPE_F32, (size_t)(B * hq * lq * dv));
    float *bias = one_key_fill(ATTN_DTYPE_F32, (size_t)(B * hq * lq * lk));
    float *slopes = one_key_fill(ATTN_DTYPE_F32, (size_t)(B * hq));
    float *lse = xmalloc((size_t)(B * hq * lq) * 4);
    const attn_tensor tq = {q, c->dtype, hq * lq * d, lq * d, d};
    const attn_tensor tk = {k, c->dtype, hk * lk * d, lk * d, d};
    const attn_tensor tv = {v, c->dtype, hk * lk * dv, lk * dv, dv};
    const attn_tensor to = {o, c->dtype, hq * lq * dv, lq * dv, dv};
    const attn_tensor tdo = {dout, ATTN_DTYPE_F32, hq * lq * dv, lq * dv, dv};
    const attn_tensor tb = {bias, ATTN_DTYPE_F32, hq * lq * lk, lq * lk, lk};
    const attn_tensor ta = {slopes, ATTN_DTYPE_F32, hq, 1, 0};
    attn_options opt = ATTN_OPTIONS_INIT;
    if (c->causal_diagonal) {
        opt.flags = ATTN_CAUSAL;
        opt.window = 1;
    }
    if (c->one_hot)
        for (int64_t r = 0; r < B * hq * lq; r++)
            for (int64_t j = 0; j < lk; j++)
                bias[r * lk + j] = j == r % lq % lk ? 0.0f : -40.0f;
    if (c->bias)
        opt.bias = &tb;
    if (c->alibi)
        opt.alibi_slopes = &ta;
    attn_row_stats stats = {lse, NULL, NULL};
    attn_status st = attn_forward_with(t, s, &opt, &tq, &tk, &tv, &to, &stats);
    CHECK(st == ATTN_OK, "forward status %d", st);

    const size_t nq = (size_t)(B * hq * lq * d), nk = (size_t)(B * hk * lk * d);
    const size_t nb = (size_t)(B * hq * lq * lk);
    float *dq = xmalloc(nq * 4), *dk = xmalloc(nk * 4), *dvv = xmalloc((size_t)(B * hk * lk * dv) * 4);
    float *dbias = xmalloc(nb * 4);
    attn_tensor tdq = {dq, ATTN_DTYPE_F32, hq * lq * d, lq * d, d};
    attn_tensor tdk = {dk, ATTN_DTYPE_F32, hk * lk * d, lk * d, d};
    attn_tensor tdv = {dvv, ATTN_DTYPE_F32, hk * lk * dv, lk * dv, dv};
    attn_tensor tdb = {dbias, ATTN_DTYPE_F32, hq * lq * lk, lq * lk, lk};
    attn_grads gr = ATTN_GRADS_INIT;
    gr.dq = &tdq;
    gr.dk = &tdk;
    gr.dv = &tdv;
    gr.dbias = &tdb;
    st = attn_backward_with(t, s, &opt, &tq, &tk, &tv, &to, &tdo, lse, &gr);
    CHECK(st == ATTN_OK, "backward status %d", st);
    if (c->one_hot) {
        const size_t es = c->dtype == ATTN_DTYPE_F32 ? 4 : 2;
        int64_t exact_rows = 0;
        for (int64_t r = 0; r < B * hq * lq; r++) {
            const int64_t b = r / (hq * lq), h = r / lq % hq, i = r % lq, j = i % lk;
            const int64_t kh = h / (hq / hk);
            const unsigned char *orow = (const unsigned char *)o + (size_t)(r * dv) * es;
            const unsigned char *vrow =
                (const unsigned char *)v + (size_t)(((b * hk + kh) * lk + j) * dv) * es;
            if (memcmp(orow, vrow, (size_t)dv * es) != 0)
                continue;
            exact_rows++;
            CHECK(dbias[r * lk + j] == 0.0f, "row %lld: dS of its dominant key = %g, exactly 0 "
                  "expected (O is that key's V)", (long long)r, (double)dbias[r * lk + j]);
        }
        CHECK(2 * exact_rows >= B * hq * lq, "only %lld of %lld rows have O == V",
              (long long)exact_rows, (long long)(B * hq * lq));
        goto done;
    }
    for (size_t i = 0; i < nq; i++)
        CHECK(dq[i] == 0.0f, "dq[%zu] = %g, exactly 0 expected", i, (double)dq[i]);
    for (size_t i = 0; i < nk; i++)
        CHECK(dk[i] == 0.0f, "dk[%zu] = %g, exactly 0 expected", i, (double)dk[i]);
    for (size_t i = 0; i < nb; i++)
        CHECK(dbias[i] == 0.0f, "dbias[%zu] = %g, exactly 0 expected", i, (double)dbias[i]);
done:
    free(q), free(k), free(v), free(o), free(dout), free(bias), free(slopes), free(lse);
    free(dq), free(dk), free(dvv), free(dbias);
}

HARNESS_ISA_PARAMS(backward, one_visible_key_exact)
ParameterizedTest(isa_row *row, backward, one_visible_key_exact, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    for (int plan = 0; plan < 2; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        for (size_t i = 0; i < sizeof one_key_cases / sizeof one_key_cases[0]; i++)
            check_one_key(t, &one_key_cases[i]);
    }
}

/* ------------------------------------------------------------ layouts */

/*
 * Packed and left-padded batches (q_offsets / kv_offsets): every sequence's
 * gradients must equal, bit for bit, those of the same sequence alone in a
 * dense call (attn_backward cuts a sequence's rows and keys into the same
 * blocks wherever it lies, and the plan is forced to be the same). Both
 * calls get the same out and lse (the packed forward's), so only the
 * backward is compared; the dense one is checked against float64 by the
 * vs_reference tests. Sequences of 0 keys or 0 queries are included.
 */
typedef struct layout_case {
    int64_t heads, kv_heads, d;
    int packed;      /* 1: [T][H][D] tensors, batch_stride 0; 0: left padding */
    int causal, alibi, sinks, bias;
    int64_t window;
    float softcap;
} layout_case;

static const layout_case layout_cases[] = {
    {4, 2, 64, 1, 1, 0, 0, 0, 0, 0.0f},  {2, 2, 40, 1, 1, 1, 1, 1, 0, 0.0f},
    {8, 1, 128, 1, 0, 0, 1, 0, 33, 0.0f}, {3, 3, 24, 0, 1, 1, 0, 1, 0, 0.0f},
    {4, 1, 72, 0, 0, 0, 0, 0, 17, 20.0f},
};

static float *layout_fill(size_t n)
{
    float *x = xmalloc((n ? n : 1) * 4);
    rng_fill(harness_rng(), x, n, -1.5f, 1.5f);
    return x;
}

static int same_floats(const float *a, const float *b, size_t n)
{
    return n == 0 || memcmp(a, b, n * 4) == 0;
}

static void check_layout(const attn_dsp *t, const layout_case *c)
{
    enum { NB = 5 };
    rng *g = harness_rng();
    const int64_t H = c->heads, HK = c->kv_heads, d = c->d;
    int32_t lq[NB], lk[NB], qo[NB], ko[NB];
    int64_t tq = 0, tk = 0, maxq = 0, maxk = 0;
    for (int b = 0; b < NB; b++) {
        lk[b] = b == 2 ? 0 : (int32_t)rng_int(g, 1, 300);
        lq[b] = b == 3 ? 0 : c->causal ? (int32_t)rng_int(g, 1, lk[b] ? lk[b] : 5)
                                       : (int32_t)rng_int(g, 1, 200);
        qo[b] = c->packed ? (int32_t)tq : 0;
        ko[b] = c->packed ? (int32_t)tk : (int32_t)rng_int(g, 0, 40); /* left padding */
        tq += lq[b];
        tk += c->packed ? lk[b] : 0;
        maxq = lq[b] > maxq ? lq[b] : maxq;
        maxk = ko[b] + lk[b] > maxk ? ko[b] + lk[b] : maxk;
    }
    /* packed: one [T][H][D] row space; left padding: [B][H][L][D], L the longest */
    const int64_t QL = c->packed ? tq : maxq, KL = c->packed ? tk : maxk;
    const int64_t QB = c->packed ? 0 : 1; /* batch strides in units of a batch entry */
    harness_context("backward layout: %s, H %lld/%lld d %lld%s%s%s%s window %lld softcap %g",
                    c->packed ? "packed" : "left-padded", (long long)H, (long long)HK,
                    (long long)d, c->causal ? " causal" : "", c->alibi ? " alibi" : "",
                    c->sinks ? " sinks" : "", c->bias ? " bias" : "", (long long)c->window,
                    (double)c->softcap);
    const int64_t nbat = c->packed ? 1 : NB;
    const size_t nq = (size_t)(nbat * H * QL * d), nk = (size_t)(nbat * HK * KL * d);
    const size_t nbias = (size_t)(nbat * H * QL * KL);
    float *q = layout_fill(nq), *k = layout_fill(nk), *v = layout_fill(nk);
    float *dout = layout_fill(nq), *bias = layout_fill(nbias);
    float *sinks = layout_fill((size_t)(NB * H)), *slopes = layout_fill((size_t)(NB * H));
    float *o = xmalloc(nq * 4), *lse = xmalloc((size_t)(NB * H * QL) * 4);
    /* [batch][head][row][col] with the heads inside rows ([T][H][D]) */
    const attn_tensor tq_ = {q, ATTN_DTYPE_F32, QB * QL * H * d, d, H * d};
    const attn_tensor tk_ = {k, ATTN_DTYPE_F32, QB * KL * HK * d, d, HK * d};
    const attn_tensor tv_ = {v, ATTN_DTYPE_F32, QB * KL * HK * d, d, HK * d};
    const attn_tensor to_ = {o, ATTN_DTYPE_F32, QB * QL * H * d, d, H * d};
    const attn_tensor tdo = {dout, ATTN_DTYPE_F32, QB * QL * H * d, d, H * d};
    const attn_tensor tb = {bias, ATTN_DTYPE_F32, QB * H * QL * KL, QL * KL, KL};
    const attn_tensor ts = {sinks, ATTN_DTYPE_F32, H, 1, 0};
    const attn_tensor ta = {slopes, ATTN_DTYPE_F32, H, 1, 0};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = c->causal ? ATTN_CAUSAL : 0;
    opt.window = c->window;
    opt.softcap = c->softcap;
    opt.q_lens = lq;
    opt.kv_lens = lk;
    opt.q_offsets = c->packed ? qo : NULL;
    opt.kv_offsets = ko;
    opt.alibi_slopes = c->alibi ? &ta : NULL;
    opt.sinks = c->sinks ? &ts : NULL;
    opt.bias = c->bias ? &tb : NULL;
    const attn_shape shape = {NB, H, HK, QL, KL, d, 0};
    const attn_row_stats stats = {lse, NULL, NULL};
    attn_status st = attn_forward_with(t, &shape, &opt, &tq_, &tk_, &tv_, &to_, &stats);
    CHECK(st == ATTN_OK, "forward status %d", st);

    float *dq = xmalloc(nq * 4), *dk = xmalloc(nk * 4), *dv = xmalloc(nk * 4);
    float *dbias = xmalloc(nbias * 4), *dsinks = xmalloc((size_t)(NB * H) * 4);
    /* a canary: rows outside every sequence must keep it */
    for (size_t i = 0; i < nk; i++)
        dk[i] = dv[i] = -3.0f;
    const attn_tensor tdq = {dq, ATTN_DTYPE_F32, QB * QL * H * d, d, H * d};
    const attn_tensor tdk = {dk, ATTN_DTYPE_F32, QB * KL * HK * d, d, HK * d};
    const attn_tensor tdv = {dv, ATTN_DTYPE_F32, QB * KL * HK * d, d, HK * d};
    const attn_tensor tdb = {dbias, ATTN_DTYPE_F32, QB * H * QL * KL, QL * KL, KL};
    attn_grads gr = ATTN_GRADS_INIT;
    gr.dq = &tdq;
    gr.dk = &tdk;
    gr.dv = &tdv;
    gr.dbias = c->bias ? &tdb : NULL;
    gr.dsinks = c->sinks ? dsinks : NULL;
    st = attn_backward_with(t, &shape, &opt, &tq_, &tk_, &tv_, &to_, &tdo, lse, &gr);
    CHECK(st == ATTN_OK, "backward status %d (%s)", st, attn_strerror(st));

    for (int b = 0; b < NB; b++) {
        /* sequence b alone, dense [1][H][L][D] copies of its rows and keys */
        const int64_t L = lq[b], K = lk[b], bq = c->packed ? 0 : b, bk = bq;
        const size_t sq = (size_t)(H * (L ? L : 1) * d), sk = (size_t)(HK * (K ? K : 1) * d);
        if (L == 0 || K == 0) { /* nothing of it may be written but zeros */
            for (int64_t i = 0; i < L; i++)
                for (int64_t x = 0; x < H * d; x++)
                    CHECK(dq[(size_t)((bq * QL + qo[b] + i) * H * d + x)] == 0.0f,
                          "seq %d: row %lld sees no key, dq not 0", b, (long long)i);
            for (int64_t j = 0; j < K; j++)
                for (int64_t h = 0; h < HK; h++)
                    for (int64_t x = 0; x < d; x++) {
                        const size_t at = (size_t)(((bk * KL + ko[b] + j) * HK + h) * d + x);
                        CHECK(dk[at] == 0.0f && dv[at] == 0.0f, "seq %d: key %lld not 0", b,
                              (long long)j);
                    }
            continue;
        }
        float *q1 = xmalloc(sq * 4), *k1 = xmalloc(sk * 4), *v1 = xmalloc(sk * 4);
        float *o1 = xmalloc(sq * 4), *do1 = xmalloc(sq * 4), *lse1 = xmalloc((size_t)(H * L) * 4);
        float *b1 = xmalloc((size_t)(H * L * K) * 4);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++) {
                const size_t src = (size_t)(((bq * QL + qo[b] + i) * H + h) * d);
                const size_t dst = (size_t)((h * L + i) * d);
                memcpy(q1 + dst, q + src, (size_t)d * 4);
                memcpy(o1 + dst, o + src, (size_t)d * 4);
                memcpy(do1 + dst, dout + src, (size_t)d * 4);
                lse1[h * L + i] = lse[(b * H + h) * QL + qo[b] + i];
                for (int64_t j = 0; j < K; j++)
                    b1[(h * L + i) * K + j] =
                        bias[((bq * H + h) * QL + qo[b] + i) * KL + ko[b] + j];
            }
        for (int64_t h = 0; h < HK; h++)
            for (int64_t j = 0; j < K; j++) {
                const size_t src = (size_t)(((bk * KL + ko[b] + j) * HK + h) * d);
                memcpy(k1 + (size_t)((h * K + j) * d), k + src, (size_t)d * 4);
                memcpy(v1 + (size_t)((h * K + j) * d), v + src, (size_t)d * 4);
            }
        const attn_tensor a_q = {q1, ATTN_DTYPE_F32, H * L * d, L * d, d};
        const attn_tensor a_k = {k1, ATTN_DTYPE_F32, HK * K * d, K * d, d};
        const attn_tensor a_v = {v1, ATTN_DTYPE_F32, HK * K * d, K * d, d};
        const attn_tensor a_o = {o1, ATTN_DTYPE_F32, H * L * d, L * d, d};
        const attn_tensor a_do = {do1, ATTN_DTYPE_F32, H * L * d, L * d, d};
        const attn_tensor a_b = {b1, ATTN_DTYPE_F32, H * L * K, L * K, K};
        const attn_tensor a_s = {sinks + b * H, ATTN_DTYPE_F32, H, 1, 0};
        const attn_tensor a_a = {slopes + b * H, ATTN_DTYPE_F32, H, 1, 0};
        attn_options o1pt = opt;
        o1pt.q_lens = o1pt.kv_lens = o1pt.q_offsets = o1pt.kv_offsets = NULL;
        o1pt.alibi_slopes = c->alibi ? &a_a : NULL;
        o1pt.sinks = c->sinks ? &a_s : NULL;
        o1pt.bias = c->bias ? &a_b : NULL;
        const attn_shape s1 = {1, H, HK, L, K, d, 0};
        float *gq = xmalloc(sq * 4), *gk = xmalloc(sk * 4), *gv = xmalloc(sk * 4);
        float *gb = xmalloc((size_t)(H * L * K) * 4), *gs = xmalloc((size_t)H * 4);
        const attn_tensor g_q = {gq, ATTN_DTYPE_F32, H * L * d, L * d, d};
        const attn_tensor g_k = {gk, ATTN_DTYPE_F32, HK * K * d, K * d, d};
        const attn_tensor g_v = {gv, ATTN_DTYPE_F32, HK * K * d, K * d, d};
        const attn_tensor g_b = {gb, ATTN_DTYPE_F32, H * L * K, L * K, K};
        attn_grads g1 = ATTN_GRADS_INIT;
        g1.dq = &g_q;
        g1.dk = &g_k;
        g1.dv = &g_v;
        g1.dbias = c->bias ? &g_b : NULL;
        g1.dsinks = c->sinks ? gs : NULL;
        st = attn_backward_with(t, &s1, &o1pt, &a_q, &a_k, &a_v, &a_o, &a_do, lse1, &g1);
        CHECK(st == ATTN_OK, "dense backward of sequence %d: status %d", b, st);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++) {
                const size_t at = (size_t)(((bq * QL + qo[b] + i) * H + h) * d);
                CHECK(same_floats(dq + at, gq + (h * L + i) * d, (size_t)d),
                      "seq %d head %lld row %lld: dq differs from the dense call", b,
                      (long long)h, (long long)i);
                if (c->bias)
                    CHECK(same_floats(dbias + ((bq * H + h) * QL + qo[b] + i) * KL + ko[b],
                                      gb + (h * L + i) * K, (size_t)K),
                          "seq %d head %lld row %lld: dbias differs", b, (long long)h,
                          (long long)i);
            }
        for (int64_t h = 0; h < HK; h++)
            for (int64_t j = 0; j < K; j++) {
                const size_t at = (size_t)(((bk * KL + ko[b] + j) * HK + h) * d);
                CHECK(same_floats(dk + at, gk + (h * K + j) * d, (size_t)d) &&
                          same_floats(dv + at, gv + (h * K + j) * d, (size_t)d),
                      "seq %d kv head %lld key %lld: dk/dv differ from the dense call", b,
                      (long long)h, (long long)j);
            }
        if (c->sinks)
            CHECK(same_floats(dsinks + b * H, gs, (size_t)H), "seq %d: dsinks differ", b);
        free(q1), free(k1), free(v1), free(o1), free(do1), free(lse1), free(b1);
        free(gq), free(gk), free(gv), free(gb), free(gs);
    }
    /* left padding: the pad keys before each sequence are not its to write */
    if (!c->packed)
        for (int b = 0; b < NB; b++)
            for (int64_t j = 0; j < ko[b]; j++)
                for (int64_t x = 0; x < HK * d; x++) {
                    const size_t at = (size_t)(((int64_t)b * KL + j) * HK * d + x);
                    CHECK(dk[at] == -3.0f && dv[at] == -3.0f,
                          "seq %d: pad key %lld was written", b, (long long)j);
                }
    free(q), free(k), free(v), free(dout), free(bias), free(sinks), free(slopes), free(o);
    free(lse), free(dq), free(dk), free(dv), free(dbias), free(dsinks);
}

HARNESS_ISA_PARAMS(backward, layouts_match_dense)
ParameterizedTest(isa_row *row, backward, layouts_match_dense, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    for (int plan = 0; plan < 2; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        for (size_t i = 0; i < sizeof layout_cases / sizeof layout_cases[0]; i++)
            check_layout(t, &layout_cases[i]);
    }
}

/*
 * Global positions (q_pos/k_pos): a call that is a shard of a longer
 * sequence, checked against the float64 reference like the specs above;
 * the queries are placed anywhere from before the shard's keys (rows that
 * see none) to past them.
 */
static const unsigned position_specs[] = {
    WL_CAUSAL,
    WL_CAUSAL | WL_ALIBI | WL_GQA,
    WL_WINDOW | WL_WINDOW_R | WL_ALIBI | WL_SINKS,
    WL_CAUSAL | WL_LENS | WL_SOFTCAP | WL_MQA,
    WL_CAUSAL | WL_WINDOW | WL_BIAS | WL_F16,
};

HARNESS_ISA_PARAMS(backward, global_positions)
ParameterizedTest(isa_row *row, backward, global_positions, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int plan = 0; plan < 2; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        for (size_t i = 0; i < sizeof position_specs / sizeof position_specs[0]; i++) {
            workload w;
            wl_make(&w, position_specs[i]);
            int64_t qp[WL_MAX_BATCH], kp[WL_MAX_BATCH];
            for (int64_t b = 0; b < w.shape.batch; b++) {
                kp[b] = rng_int(g, 0, 5000);
                qp[b] = kp[b] + rng_int(g, -w.shape.q_len, w.shape.kv_len + 8);
                if (qp[b] < 0)
                    qp[b] = 0;
            }
            w.opt.q_pos = qp;
            w.opt.k_pos = kp;
            check_backward(t, &w);
            wl_free(&w);
        }
    }
}

/* An error leaves every gradient byte as it was. */
static void expect_error(const char *what, attn_status want, const workload *w,
                         const attn_options *opt, const attn_tensor *dout, const float *lse,
                         const attn_grads *g, grads_buf *gb)
{
    grads_poison(gb);
    unsigned char *before = xmalloc(gb->qb.bytes + gb->kb.bytes + gb->vb.bytes);
    memcpy(before, gb->qb.data, gb->qb.bytes);
    memcpy(before + gb->qb.bytes, gb->kb.data, gb->kb.bytes);
    memcpy(before + gb->qb.bytes + gb->kb.bytes, gb->vb.data, gb->vb.bytes);
    attn_status st = attn_backward(&w->shape, opt, &w->q, &w->k, &w->v, &w->out, dout, lse, g);
    CHECK(st == want, "%s: status %d, expected %d", what, st, want);
    expect_bytes("dq", gb->qb.data, before, gb->qb.bytes);
    expect_bytes("dk", gb->kb.data, before + gb->qb.bytes, gb->kb.bytes);
    expect_bytes("dv", gb->vb.data, before + gb->qb.bytes + gb->kb.bytes, gb->vb.bytes);
    free(before);
}

Test(backward, errors)
{
    harness_begin_plain("active");
    workload w;
    wl_make(&w, WL_CAUSAL);
    const size_t rows = (size_t)wl_rows(&w);
    float *dout = xcalloc0(rows * (size_t)w.dv, 4);
    attn_tensor dt = {dout, ATTN_DTYPE_F32, w.shape.q_heads * w.shape.q_len * w.dv,
                      w.shape.q_len * w.dv, w.dv};
    float *lse = xcalloc0(rows, 4);
    grads_buf gb;
    grads_alloc(&gb, &w, 0);
    harness_context("%s", wl_describe(&w));

    expect_error("NULL grads", ATTN_ERR_NULL, &w, &w.opt, &dt, lse, NULL, &gb);
    expect_error("NULL lse", ATTN_ERR_NULL, &w, &w.opt, &dt, NULL, &gb.g, &gb);
    expect_error("NULL dout", ATTN_ERR_NULL, &w, &w.opt, NULL, lse, &gb.g, &gb);
    attn_grads g = gb.g;
    g.dk = NULL;
    expect_error("NULL dk", ATTN_ERR_NULL, &w, &w.opt, &dt, lse, &g, &gb);
    g = gb.g;
    g.struct_size = 4;
    expect_error("struct_size", ATTN_ERR_VERSION, &w, &w.opt, &dt, lse, &g, &gb);
    /* a newer attn.h's struct: its extra field set is refused, left 0 it is not */
    struct {
        attn_grads g;
        uint64_t tail;
    } newer = {gb.g, 1};
    newer.g.struct_size = sizeof(attn_grads) + 8;
    expect_error("struct_size", ATTN_ERR_VERSION, &w, &w.opt, &dt, lse, &newer.g, &gb);
    newer.tail = 0;
    CHECK(attn_backward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &dt, lse, &newer.g) ==
              ATTN_OK,
          "a newer attn_grads with its new field 0: %s", attn_last_error());
    /* a struct_size that stops before dbias: dbias is not read (garbage here) */
    g = gb.g;
    g.struct_size = (uint32_t)offsetof(attn_grads, dbias);
    g.dbias = (const attn_tensor *)(uintptr_t)1;
    CHECK(attn_backward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &dt, lse, &g) == ATTN_OK,
          "an attn_grads without dbias");
    /* wrong dtypes */
    attn_tensor bad = gb.dk;
    bad.dtype = ATTN_DTYPE_F16;
    g = gb.g;
    g.dk = &bad;
    expect_error("dk F16", ATTN_ERR_ARG, &w, &w.opt, &dt, lse, &g, &gb);
    /* dsinks without sinks */
    float dsinks[64];
    g = gb.g;
    g.dsinks = dsinks;
    expect_error("dsinks without sinks", ATTN_ERR_ARG, &w, &w.opt, &dt, lse, &g, &gb);
    attn_tensor bad_dout = dt;
    bad_dout.dtype = ATTN_DTYPE_BOOL;
    expect_error("dout BOOL", ATTN_ERR_ARG, &w, &w.opt, &bad_dout, lse, &gb.g, &gb);
    /* dk aliasing dq, dv aliasing an input, lse inside dq */
    g = gb.g;
    g.dk = &gb.dq;
    expect_error("dk = dq", ATTN_ERR_STRIDE, &w, &w.opt, &dt, lse, &g, &gb);
    expect_error("lse in dq", ATTN_ERR_STRIDE, &w, &w.opt, &dt, gb.dq.data, &gb.g, &gb);
    attn_tensor dq_on_dout = gb.dq;
    dq_on_dout.data = dout;
    g = gb.g;
    g.dq = &dq_on_dout;
    expect_error("dq on dout", ATTN_ERR_STRIDE, &w, &w.opt, &dt, lse, &g, &gb);
    /* two outputs, each with a valid layout of its own, in one buffer ("dk = dq"
       may stop at dk's own layout check): the smaller one moved into the larger */
    attn_tensor moved;
    g = gb.g;
    if (gb.vb.bytes <= gb.kb.bytes) {
        moved = gb.dv;
        moved.data = gb.kb.data;
        g.dv = &moved;
    } else {
        moved = gb.dk;
        moved.data = gb.vb.data;
        g.dk = &moved;
    }
    expect_error("dk and dv in one buffer", ATTN_ERR_STRIDE, &w, &w.opt, &dt, lse, &g, &gb);
    /* q_lens / kv_lens (valid values) inside dk's buffer: the backward's own
       range check left them out before (src/option_list.h registers every
       pointer option); poisoned first, so the arrays are written after it */
    for (int which = 0; which < 2; which++) {
        int32_t lens[64];
        CHECK(w.shape.batch <= 64, "batch %lld", (long long)w.shape.batch);
        for (int64_t b = 0; b < w.shape.batch; b++)
            lens[b] = (int32_t)(which ? w.shape.kv_len : w.shape.q_len);
        grads_poison(&gb);
        memcpy(gb.kb.data, lens, (size_t)w.shape.batch * sizeof lens[0]);
        unsigned char *before = xmalloc(gb.kb.bytes);
        memcpy(before, gb.kb.data, gb.kb.bytes);
        attn_options o = w.opt;
        if (which)
            o.kv_lens = (const int32_t *)gb.kb.data;
        else
            o.q_lens = (const int32_t *)gb.kb.data;
        attn_status st = attn_backward(&w.shape, &o, &w.q, &w.k, &w.v, &w.out, &dt, lse, &gb.g);
        CHECK(st == ATTN_ERR_STRIDE, "%s inside dk: status %d, expected ATTN_ERR_STRIDE",
              which ? "kv_lens" : "q_lens", st);
        expect_bytes("dk", gb.kb.data, before, gb.kb.bytes);
        free(before);
    }
    /* broadcast output */
    attn_tensor bcast = gb.dv;
    bcast.batch_stride = bcast.head_stride = bcast.row_stride = 0;
    g = gb.g;
    g.dv = &bcast;
    if (w.shape.batch * w.shape.kv_heads * w.shape.kv_len > 1)
        expect_error("dv broadcast", ATTN_ERR_STRIDE, &w, &w.opt, &dt, lse, &g, &gb);
    /* a packed dk (batch_stride 0) whose sequences would share key rows */
    int32_t offsets[64] = {0}, table[64] = {0};
    CHECK(w.shape.batch <= 64, "batch %lld", (long long)w.shape.batch);
    attn_options o = w.opt;
    if (w.shape.batch > 1) {
        o.kv_offsets = offsets;
        o.kv_lens = NULL;
        attn_tensor packed_dk = gb.dk;
        packed_dk.batch_stride = 0;
        g = gb.g;
        g.dk = &packed_dk;
        expect_error("packed dk, sequences overlapping", ATTN_ERR_STRIDE, &w, &o, &dt, lse, &g,
                     &gb);
    }
    /* FP8 K over the same bytes: a valid forward input, not a backward one */
    workload w8 = w;
    w8.k.dtype = ATTN_DTYPE_FP8_E4M3;
    expect_error("FP8 k", ATTN_ERR_UNSUPPORTED, &w8, &w.opt, &dt, lse, &gb.g, &gb);
    if (w.shape.kv_len <= 64) { /* a valid paging of the same K/V: one block per batch entry */
        o = w.opt;
        for (int64_t b = 0; b < w.shape.batch; b++)
            table[b] = (int32_t)b;
        o.block_table = table;
        o.block_table_stride = 1;
        o.block_size = w.shape.kv_len;
        o.num_blocks = w.shape.batch;
        expect_error("block_table", ATTN_ERR_UNSUPPORTED, &w, &o, &dt, lse, &gb.g, &gb);
    }
    grads_free(&gb);
    free(dout);
    free(lse);
    wl_free(&w);
}

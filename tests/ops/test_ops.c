/* SPDX-License-Identifier: MIT */
/*
 * Operation-level tests: the whole driver through attn_*_with(table, ...)
 * for every ISA row, against the float64 reference (bounds of tolerance.h)
 * and, for SIMD rows, against the scalar table (the sum of both bounds).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops_list.h"
#include "ref/ref.h"
#include "tolerance.h"
#include "workload.h"

#define ALL_MASKS (WL_CAUSAL | WL_LENS | WL_WINDOW | WL_SOFTCAP | WL_BIAS | WL_MASK)

/* The feature combinations every operation is run on. */
static const unsigned specs[] = {
    0,
    WL_CAUSAL,
    WL_CAUSAL | WL_Q_SHORT,
    WL_CAUSAL | WL_Q_LONG,
    WL_CAUSAL | WL_DECODE,
    WL_DECODE | WL_LENS,
    WL_LENS,
    WL_LENS | WL_CAUSAL | WL_Q_LONG,
    WL_WINDOW,
    WL_WINDOW | WL_Q_SHORT,
    WL_WINDOW | WL_CAUSAL,
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
    WL_BLHD,
    WL_PAD,
    WL_BLHD | WL_PAD | WL_OFFSET,
    WL_F16,
    WL_BF16,
    WL_F16 | WL_GQA | WL_CAUSAL,
    WL_BF16 | WL_DECODE | WL_MQA,
    WL_VDIM,
    WL_VDIM0,
    WL_VDIM | WL_BLHD | WL_PAD,
    WL_SCALE,
    WL_BIG_HEAD,
    WL_BIG_HEAD | WL_CAUSAL | WL_F16 | WL_DECODE,
    WL_OFFSET | WL_CAUSAL,
    ALL_MASKS | WL_GQA | WL_BLHD | WL_PAD | WL_BF16 | WL_VDIM | WL_SCALE | WL_OFFSET,
    ALL_MASKS | WL_MQA | WL_F16 | WL_VDIM0 | WL_Q_SHORT,
    ALL_MASKS | WL_Q_LONG | WL_PAD,
    /* score modifiers (1.1): sinks, ALiBi, two-sided windows */
    WL_SINKS,
    WL_SINKS | WL_CAUSAL | WL_LENS,
    WL_SINKS | WL_WINDOW | WL_CAUSAL | WL_MASK,
    WL_SINKS | WL_DECODE | WL_GQA | WL_F16,
    WL_ALIBI,
    WL_ALIBI | WL_CAUSAL | WL_Q_SHORT,
    WL_ALIBI | WL_Q_LONG | WL_LENS | WL_BF16,
    WL_ALIBI | WL_SOFTCAP | WL_BIAS | WL_MQA,
    WL_WINDOW_R,
    WL_WINDOW | WL_WINDOW_R,
    WL_WINDOW | WL_WINDOW_R | WL_Q_SHORT | WL_LENS,
    WL_WINDOW | WL_WINDOW_R | WL_Q_LONG | WL_GQA | WL_BLHD,
    WL_WINDOW_R | WL_CAUSAL | WL_DECODE,
    WL_SINKS | WL_ALIBI | WL_WINDOW | WL_WINDOW_R | WL_LENS | WL_PAD | WL_OFFSET,
    ALL_MASKS | WL_SINKS | WL_ALIBI | WL_WINDOW_R | WL_GQA | WL_F16 | WL_VDIM,
    /* draft trees (1.3) */
    WL_TREE | WL_Q_SHORT,
    WL_TREE | WL_CAUSAL | WL_Q_SHORT | WL_GQA,
    WL_TREE | WL_LENS | WL_SINKS | WL_ALIBI | WL_WINDOW | WL_SOFTCAP,
    WL_TREE | WL_CAUSAL | WL_MASK | WL_BIAS | WL_GQA | WL_F16,
    WL_TOPK,
    WL_TOPK | WL_CAUSAL | WL_GQA | WL_LENS,
    WL_TOPK | WL_MQA | WL_DECODE | WL_LONG_KV | WL_SOFTCAP | WL_BF16,
    WL_TOPK | WL_WINDOW | WL_SINKS | WL_ALIBI | WL_BIAS | WL_MASK | WL_VDIM,
    WL_TOPK | WL_TREE | WL_Q_SHORT | WL_CAUSAL,
    WL_TOPK | WL_LONG_KV | WL_CAUSAL | WL_GQA | WL_F16,
    /* positions per key slot (1.11) */
    WL_KPOS | WL_CAUSAL,
    WL_KPOS | WL_CAUSAL | WL_ALIBI | WL_LENS | WL_GQA,
    WL_KPOS | WL_WINDOW | WL_WINDOW_R | WL_ALIBI | WL_Q_SHORT,
    WL_KPOS | WL_CAUSAL | WL_WINDOW | WL_SINKS | WL_DECODE | WL_MQA | WL_F16,
    WL_KPOS | WL_CAUSAL | WL_ALIBI | WL_LONG_KV | WL_DECODE | WL_BF16,
    WL_KPOS | WL_TREE | WL_TOPK | WL_CAUSAL | WL_Q_SHORT | WL_BIAS | WL_MASK,
    WL_KPOS | WL_CAUSAL | WL_WINDOW | WL_ALIBI | WL_SOFTCAP | WL_BLHD | WL_PAD | WL_VDIM,
};
#define N_SPECS (sizeof specs / sizeof specs[0])

/* Online-softmax rescales of a forward with this table (tolerance.h R). */
static int64_t forward_rescales(const attn_dsp *t, const workload *w)
{
    const attn_dsp *sc = harness_scalar();
    uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
    return (w->shape.kv_len + bk - 1) / bk + 1;
}

static void compare_stats(const workload *w, const ref_attn *r, const float *stats[3],
                          const float *scalar_stats[3])
{
    const size_t rows = (size_t)wl_rows(w);
    expect_near_and_scalar("lse", stats[0], scalar_stats ? scalar_stats[0] : NULL, r->lse,
                           r->lse_err, 1, rows);
    /* max_score of a row poisoned by NaN is NaN too (driver), in the
     * reference as well; compare everything */
    expect_near_and_scalar("max_score", stats[1], scalar_stats ? scalar_stats[1] : NULL, r->max,
                           r->max_err, 1, rows);
    expect_near_and_scalar("entropy", stats[2], scalar_stats ? scalar_stats[2] : NULL, r->ent,
                           r->ent_err, 1, rows);
}

/* The operations (ops_list.h) this file runs on workloads: those that
   compute from q and k. mask_apply has its own cases; softmax and
   softmax_backward work on plain rows and have their own tests below;
   merge, backward and quantize have their own suites (op_tests[]). */
static const op_kind qk_ops[] = {OP_SCORES, OP_WEIGHTS, OP_FORWARD};
#define QK_OPS (sizeof qk_ops / sizeof qk_ops[0])

/* Runs one operation on table t; returns the status. */
static attn_status run_op(const attn_dsp *t, workload *w, op_kind op, int with_stats)
{
    const attn_row_stats *st = with_stats ? &w->stats : NULL;
    switch (op) {
    case OP_SCORES:
        return attn_scores_with(t, &w->shape, &w->opt, &w->q, &w->k, &w->scores);
    case OP_WEIGHTS:
        return attn_weights_with(t, &w->shape, &w->opt, &w->q, &w->k, &w->scores, st);
    case OP_FORWARD:
        return attn_forward_with(t, &w->shape, &w->opt, &w->q, &w->k, &w->v, &w->out, st);
    case OP_MASK_APPLY:
        return attn_mask_apply_with(t, &w->shape, &w->opt, &w->scores);
    case OP_SOFTMAX:     /* on plain rows: ops/softmax below */
    case OP_SOFTMAX_BWD: /* on plain rows: ops/softmax_backward below */
    case OP_MERGE:       /* tests/ops/test_split.c */
    case OP_BACKWARD:    /* tests/ops/test_backward.c */
    case OP_QUANTIZE:    /* tests/api/test_quantize.c */
    case OP_CACHE_APPEND: /* tests/ops/test_cache_append.c */
    case OP_PLAN_FORWARD: /* beside every forward below (check_plan), tests/ops/test_plan.c */
    case OP_FORWARD_SOURCES: /* two caches: tests/ops/test_sources.c */
    case OP_COUNT:
        break;
    }
    CHECK(0, "%s is not an operation on a workload", op < OP_COUNT ? op_names[op] : "?");
}

/* Output of one run, dense. */
typedef struct result {
    float *table; /* scores/weights [rows][kv_len] or out [rows][dv] */
    float *stats[3];
} result;

static void capture(const workload *w, op_kind op, result *res)
{
    const size_t rows = (size_t)wl_rows(w);
    const int64_t cols = op == OP_FORWARD ? w->dv : w->shape.kv_len;
    res->table = xmalloc(rows * (size_t)cols * 4);
    wl_gather(w, op == OP_FORWARD ? &w->out : &w->scores, cols, res->table);
    for (int i = 0; i < 3; i++) {
        res->stats[i] = xmalloc(rows * 4);
        const float *src = i == 0 ? w->stats.lse : i == 1 ? w->stats.max_score : w->stats.entropy;
        memcpy(res->stats[i], src, rows * 4);
    }
}

static void release(result *res)
{
    free(res->table);
    for (int i = 0; i < 3; i++)
        free(res->stats[i]);
}

/*
 * The same forward through a plan (attn.h, attn_plan_forward and
 * attn_plan_run on the same table): out and stats bit for bit as the
 * direct call's (`got`).
 */
static void check_plan(const attn_dsp *t, workload *w, const result *got)
{
    size_t bytes = 0;
    CHECK(attn_plan_size(&w->shape, &w->opt, &bytes) == ATTN_OK, "attn_plan_size");
    void *mem = xmalloc(bytes);
    attn_plan *plan = NULL;
    attn_status st = attn_plan_forward_with(t, mem, bytes, &w->shape, &w->opt, &w->q, &w->k,
                                            &w->v, &w->out, &w->stats, &plan);
    CHECK(st == ATTN_OK, "attn_plan_forward: status %d (%s)", st, attn_strerror(st));
    wl_poison_outputs(w);
    st = attn_plan_run(plan, w->q.data, w->k.data, w->v.data, w->out.data, &w->stats);
    CHECK(st == ATTN_OK, "attn_plan_run: status %d (%s)", st, attn_strerror(st));
    result again;
    capture(w, OP_FORWARD, &again);
    const size_t rows = (size_t)wl_rows(w);
    expect_bits("plan: out", again.table, got->table, rows * (size_t)w->dv);
    for (int i = 0; i < 3; i++)
        expect_bits("plan: stats", again.stats[i], got->stats[i], rows);
    release(&again);
    free(mem);
}

/*
 * One problem, one operation: run on t (and on scalar), compare with the
 * reference, check padding and guards. score_lo/hi: the score table given to
 * mask_apply.
 */
static void check_problem(const attn_dsp *t, workload *w, op_kind op, float score_lo,
                          float score_hi)
{
    const attn_dsp *sc = harness_scalar();
    const int is_scalar = harness_is_scalar(t);
    const int with_stats = op == OP_WEIGHTS || op == OP_FORWARD;
    harness_context("%s on %s", op_names[op], wl_describe(w));

    ref_attn r;
    float *scores_in = NULL;
    if (op == OP_MASK_APPLY) {
        wl_fill_scores(w, score_lo, score_hi);
        scores_in = xmalloc(w->sb.bytes);
        memcpy(scores_in, w->sb.data, w->sb.bytes);
        ref_attn_from_scores(&r, &w->shape, &w->opt, &w->scores);
    } else {
        ref_attn_compute(&r, &w->shape, &w->opt, &w->q, &w->k, op == OP_FORWARD ? &w->v : NULL,
                         op == OP_FORWARD ? forward_rescales(t, w) : 0);
    }

    result got, ref_scalar;
    if (op != OP_MASK_APPLY)
        wl_poison_outputs(w);
    attn_status st = run_op(t, w, op, with_stats);
    CHECK(st == ATTN_OK, "status %d (%s)", st, attn_strerror(st));
    wl_check_outputs(w, op != OP_FORWARD, op == OP_FORWARD, with_stats);
    capture(w, op, &got);
    if (!is_scalar) {
        if (op == OP_MASK_APPLY)
            memcpy(w->sb.data, scores_in, w->sb.bytes);
        else
            wl_poison_outputs(w);
        st = run_op(sc, w, op, with_stats);
        CHECK(st == ATTN_OK, "scalar status %d", st);
        capture(w, op, &ref_scalar);
    }

    const size_t rows = (size_t)wl_rows(w);
    const float *scalar_table = is_scalar ? NULL : ref_scalar.table;
    switch (op) {
    case OP_SCORES:
    case OP_MASK_APPLY:
        expect_near_and_scalar(op_names[op], got.table, scalar_table, r.s, r.s_err, rows,
                               (size_t)w->shape.kv_len);
        break;
    case OP_WEIGHTS:
        expect_near_and_scalar("weights", got.table, scalar_table, r.p, r.p_err, rows,
                               (size_t)w->shape.kv_len);
        compare_stats(w, &r, (const float **)got.stats,
                      is_scalar ? NULL : (const float **)ref_scalar.stats);
        break;
    case OP_FORWARD:
        expect_near_and_scalar("out", got.table, scalar_table, r.o, r.o_err, rows, (size_t)w->dv);
        compare_stats(w, &r, (const float **)got.stats,
                      is_scalar ? NULL : (const float **)ref_scalar.stats);
        check_plan(t, w, &got);
        break;
    case OP_SOFTMAX:
    case OP_SOFTMAX_BWD:
    case OP_MERGE:
    case OP_BACKWARD:
    case OP_QUANTIZE: /* not on workloads: see run_op */
    case OP_CACHE_APPEND:
    case OP_PLAN_FORWARD:
    case OP_FORWARD_SOURCES:
    case OP_COUNT:
        CHECK(0, "%s is not an operation on a workload", op < OP_COUNT ? op_names[op] : "?");
    }
    release(&got);
    if (!is_scalar)
        release(&ref_scalar);
    free(scores_in);
    ref_attn_free(&r);
}

static void run_specs(const isa_row *row, op_kind op, int repeats)
{
    const attn_dsp *t = harness_begin(row);
    for (int rep = 0; rep < repeats; rep++)
        for (size_t i = 0; i < N_SPECS; i++) {
            workload w;
            wl_make(&w, specs[i]);
            check_problem(t, &w, op, -10.0f, 10.0f);
            wl_free(&w);
        }
}

HARNESS_ISA_PARAMS(ops, scores)
ParameterizedTest(isa_row *row, ops, scores, .timeout = ATTN_TEST_TIMEOUT)
{
    run_specs(row, OP_SCORES, 2);
}

HARNESS_ISA_PARAMS(ops, mask_apply)
ParameterizedTest(isa_row *row, ops, mask_apply, .timeout = ATTN_TEST_TIMEOUT)
{
    run_specs(row, OP_MASK_APPLY, 2);
}

HARNESS_ISA_PARAMS(ops, weights)
ParameterizedTest(isa_row *row, ops, weights, .timeout = ATTN_TEST_TIMEOUT)
{
    run_specs(row, OP_WEIGHTS, 2);
}

HARNESS_ISA_PARAMS(ops, forward)
ParameterizedTest(isa_row *row, ops, forward, .timeout = ATTN_TEST_TIMEOUT)
{
    run_specs(row, OP_FORWARD, 2);
}

/* ------------------------------------------------------------ 16-bit out */

/* Problems of the forward with an F16/BF16 out: masks, lengths (rows with
   no key: zeros), GQA/MQA, sinks (rows with only a sink), half inputs,
   layouts (padded, [B,L,H,D], misaligned). */
static const unsigned out16_specs[] = {
    0,
    WL_CAUSAL | WL_LENS,
    WL_GQA | WL_CAUSAL | WL_WINDOW,
    WL_MQA | WL_DECODE | WL_CAUSAL | WL_LENS,
    WL_BLHD | WL_PAD | WL_OFFSET | WL_VDIM,
    ALL_MASKS | WL_GQA | WL_BF16 | WL_SINKS,
    WL_F16 | WL_ALIBI | WL_WINDOW | WL_WINDOW_R | WL_Q_SHORT,
    WL_SINKS | WL_LENS | WL_CAUSAL | WL_BLHD,
    WL_BIG_HEAD | WL_F16 | WL_DECODE,
};

/*
 * The forward into an F16 and a BF16 out: bit for bit the F32 out of the
 * same call on the same table rounded to nearest even, the same stats bits,
 * nothing written outside the view, and within tolerance.h's "16-bit
 * outputs" bound of float64. `vscale` scales v (F32 v only): 2^13 makes
 * some outputs overflow F16 (+-inf), 2^-20 puts them among F16's
 * subnormals and 2^-128 among BF16's (and f32's).
 */
static void check_out16(const attn_dsp *t, unsigned features, float vscale, int nan_row)
{
    rng *g = harness_rng();
    workload w;
    wl_make(&w, features);
    const attn_shape *s = &w.shape;
    if (vscale != 1.0f && w.v.dtype == ATTN_DTYPE_F32)
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->kv_heads; h++)
                for (int64_t j = 0; j < s->kv_len; j++)
                    for (int64_t c = 0; c < w.dv; c++)
                        wl_set(&w.v, b, h, j, c, vscale * rng_float(g, -10.0f, 10.0f));
    if (nan_row) /* one query element NaN: its row is NaN (the fill path) */
        wl_set(&w.q, rng_int(g, 0, s->batch - 1), rng_int(g, 0, s->q_heads - 1),
               rng_int(g, 0, s->q_len - 1), rng_int(g, 0, s->head_dim - 1), NAN);
    harness_context("forward, 16-bit out, v x %g, on %s", (double)vscale, wl_describe(&w));
    ref_attn r;
    ref_attn_compute(&r, s, &w.opt, &w.q, &w.k, &w.v, forward_rescales(t, &w));
    result f32;
    wl_poison_outputs(&w);
    attn_status st = run_op(t, &w, OP_FORWARD, 1);
    CHECK(st == ATTN_OK, "status %d (%s)", st, attn_strerror(st));
    capture(&w, OP_FORWARD, &f32);
    const size_t rows = (size_t)wl_rows(&w);
    static const int32_t dtypes[] = {ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        buf b16;
        const attn_tensor o16 = wl_out16(&w, dtypes[d], &b16);
        wl_poison_outputs(&w);
        st = attn_forward_with(t, s, &w.opt, &w.q, &w.k, &w.v, &o16, &w.stats);
        CHECK(st == ATTN_OK, "%s out: status %d (%s)", ref_dtype_name(dtypes[d]), st,
              attn_strerror(st));
        wl_check_out16(&w, &b16, &o16, f32.table, r.o, r.o_err);
        const float *stats[3] = {w.stats.lse, w.stats.max_score, w.stats.entropy};
        for (int k = 0; k < 3; k++)
            expect_bits("stats with a 16-bit out vs with an f32 out", stats[k], f32.stats[k],
                        rows);
        wl_check_outputs(&w, 0, 0, 1);
        buf_free(&b16);
    }
    release(&f32);
    ref_attn_free(&r);
    wl_free(&w);
}

HARNESS_ISA_PARAMS(ops, out_dtype)
ParameterizedTest(isa_row *row, ops, out_dtype, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    for (size_t i = 0; i < sizeof out16_specs / sizeof out16_specs[0]; i++) {
        check_out16(t, out16_specs[i], 1.0f, 0);
        check_out16(t, out16_specs[i], 1.0f, 1);
    }
    static const float vscales[] = {0x1p13f, 0x1p-20f, 0x1p-128f};
    for (size_t i = 0; i < 3; i++) {
        check_out16(t, WL_CAUSAL | WL_LENS | WL_GQA, vscales[i], 0);
        check_out16(t, WL_DECODE | WL_MQA | WL_SINKS, vscales[i], 0);
    }
}

/* ------------------------------------------------------------ extreme values */

static void set_bias_range(workload *w, float lo, float hi, int inf_rows)
{
    rng *g = harness_rng();
    const attn_shape *s = &w->shape;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++) {
                const int dead = inf_rows && rng_int(g, 0, 3) == 0; /* a row of only -inf */
                for (int64_t j = 0; j < s->kv_len; j++)
                    wl_set(&w->bias, b, h, i, j, dead ? -INFINITY : rng_float(g, lo, hi));
            }
}

HARNESS_ISA_PARAMS(ops, extreme_values)
ParameterizedTest(isa_row *row, ops, extreme_values, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    static const float lo[] = {90.0f, -150.0f, -10.0f};
    static const float hi[] = {100.0f, 190.0f, 10.0f};
    static const unsigned extra[] = {0, WL_CAUSAL | WL_LENS, WL_GQA | WL_WINDOW, WL_DECODE,
                                     WL_BLHD | WL_F16 | WL_MASK};
    for (int rg = 0; rg < 3; rg++)
        for (size_t e = 0; e < sizeof extra / sizeof extra[0]; e++)
            for (size_t o = 1; o < QK_OPS; o++) { /* the ones with stats */
                const op_kind op = qk_ops[o];
                workload w;
                wl_make(&w, WL_BIAS | extra[e]);
                set_bias_range(&w, lo[rg], hi[rg], rg == 2);
                check_problem(t, &w, op, 0, 0);
                wl_free(&w);
            }
    /* mask_apply on score tables in the extreme ranges */
    for (int rg = 0; rg < 2; rg++)
        for (size_t e = 0; e < sizeof extra / sizeof extra[0]; e++) {
            workload w;
            wl_make(&w, ALL_MASKS | extra[e]);
            check_problem(t, &w, OP_MASK_APPLY, lo[rg], hi[rg]);
            wl_free(&w);
        }
}

/*
 * NaN in q, k or v reaches only the rows that see it; NaN and inf in padded
 * slots (queries beyond q_lens, keys beyond kv_lens) are never read.
 */
HARNESS_ISA_PARAMS(ops, nan_inputs)
ParameterizedTest(isa_row *row, ops, nan_inputs, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 12; rep++)
        for (int where = 0; where < 4; where++)
            for (size_t o = 0; o < QK_OPS; o++) {
                const op_kind op = qk_ops[o];
                workload w;
                wl_make(&w, WL_LENS | (rep & 1 ? WL_GQA : 0) | (rep & 2 ? WL_F16 : 0));
                const attn_shape *s = &w.shape;
                const int64_t b = rng_int(g, 0, s->batch - 1);
                const int64_t lq = w.q_lens[b], lk = w.kv_lens[b];
                /* garbage in every padded slot */
                for (int64_t bb = 0; bb < s->batch; bb++) {
                    for (int64_t h = 0; h < s->q_heads; h++)
                        for (int64_t i = w.q_lens[bb]; i < s->q_len; i++)
                            wl_set(&w.q, bb, h, i, rng_int(g, 0, s->head_dim - 1),
                                   rng_int(g, 0, 1) ? NAN : INFINITY);
                    for (int64_t h = 0; h < s->kv_heads; h++)
                        for (int64_t j = w.kv_lens[bb]; j < s->kv_len; j++) {
                            wl_set(&w.k, bb, h, j, rng_int(g, 0, s->head_dim - 1), NAN);
                            wl_set(&w.v, bb, h, j, rng_int(g, 0, w.dv - 1), -INFINITY);
                        }
                }
                if (where == 1 && lq > 0)
                    wl_set(&w.q, b, rng_int(g, 0, s->q_heads - 1), rng_int(g, 0, lq - 1),
                           rng_int(g, 0, s->head_dim - 1), NAN);
                if (where == 2 && lk > 0)
                    wl_set(&w.k, b, rng_int(g, 0, s->kv_heads - 1), rng_int(g, 0, lk - 1),
                           rng_int(g, 0, s->head_dim - 1), NAN);
                if (where == 3 && lk > 0)
                    wl_set(&w.v, b, rng_int(g, 0, s->kv_heads - 1), rng_int(g, 0, lk - 1),
                           rng_int(g, 0, w.dv - 1), NAN);
                check_problem(t, &w, op, 0, 0);
                wl_free(&w);
            }
}

/* ------------------------------------------------------------ row operations */

static size_t row_len(rng *g)
{
    static const int64_t extra[] = {255, 256, 257, 1000};
    return rng_int(g, 0, 3) ? (size_t)rng_int(g, 1, 129) : (size_t)rng_pick(g, extra, 4);
}

HARNESS_ISA_PARAMS(ops, softmax)
ParameterizedTest(isa_row *row, ops, softmax)
{
    const attn_dsp *t = harness_begin(row);
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    static const float lo[] = {-10.0f, 90.0f, -150.0f}, hi[] = {10.0f, 100.0f, 190.0f};
    for (int rep = 0; rep < 120; rep++) {
        const size_t rows = (size_t)rng_int(g, 1, 6), cols = row_len(g);
        const size_t stride = cols + (size_t)rng_int(g, 0, 3);
        const int rg = rep % 3, offset = (rep / 3) & 1, want_lse = rep % 5 != 0;
        harness_context("softmax rows=%zu cols=%zu stride=%zu range=%d offset=%d", rows, cols,
                        stride, rg, offset);
        buf bx, bl;
        float *x = buf_alloc(&bx, ((rows - 1) * stride + cols) * 4, (size_t)offset * 4);
        float *lse = buf_alloc(&bl, rows * 4, 0);
        for (size_t i = 0; i < (rows - 1) * stride + cols; i++) {
            const uint32_t c = BUF_CANARY;
            memcpy(&x[i], &c, 4);
        }
        for (size_t r = 0; r < rows; r++) {
            const int kind = (int)rng_int(g, 0, 9); /* 0: all -inf, 1: some -inf, 2: a NaN */
            for (size_t c = 0; c < cols; c++) {
                const int dead = kind == 0 || (kind == 1 && rng_int(g, 0, 2) == 0);
                x[r * stride + c] = dead ? -INFINITY : rng_float(g, lo[rg], hi[rg]);
            }
            if (kind == 1)
                x[r * stride + (size_t)rng_int(g, 0, (int64_t)cols - 1)] = lo[rg];
            if (kind == 2)
                x[r * stride + (size_t)rng_int(g, 0, (int64_t)cols - 1)] = NAN;
        }
        const size_t total = (rows - 1) * stride + cols;
        float *x0 = xmalloc(total * 4);
        memcpy(x0, x, total * 4);
        double *want = xmalloc(rows * cols * sizeof(double)),
               *err = xmalloc(rows * cols * sizeof(double)), *sd = xmalloc(cols * sizeof(double));
        double *lse_want = xmalloc(rows * sizeof(double));
        double *lse_err = xmalloc(rows * sizeof(double));
        for (size_t r = 0; r < rows; r++) {
            ref_row_stats st;
            for (size_t c = 0; c < cols; c++)
                sd[c] = x0[r * stride + c];
            ref_softmax_row(sd, NULL, cols, 0, want + r * cols, err + r * cols, &st);
            lse_want[r] = st.lse;
            lse_err[r] = st.lse_err;
        }
        attn_status s = attn_softmax_with(t, x, (int64_t)rows, (int64_t)cols, (int64_t)stride,
                                          want_lse ? lse : NULL);
        CHECK(s == ATTN_OK, "status %d", s);
        buf_check(&bx, "x");
        buf_check(&bl, "lse");
        for (size_t r = 0; r + 1 < rows; r++)
            for (size_t c = cols; c < stride; c++)
                expect_bytes("softmax row gap", &x[r * stride + c], &x0[r * stride + c], 4);
        float *dense = xmalloc(rows * cols * 4);
        for (size_t r = 0; r < rows; r++)
            memcpy(dense + r * cols, x + r * stride, cols * 4);
        float *dense_scalar = NULL, lse_scalar[6];
        if (!harness_is_scalar(t)) {
            memcpy(x, x0, total * 4);
            attn_softmax_with(sc, x, (int64_t)rows, (int64_t)cols, (int64_t)stride, lse_scalar);
            dense_scalar = xmalloc(rows * cols * 4);
            for (size_t r = 0; r < rows; r++)
                memcpy(dense_scalar + r * cols, x + r * stride, cols * 4);
        }
        expect_near_and_scalar("softmax", dense, dense_scalar, want, err, rows, cols);
        if (want_lse)
            expect_near_and_scalar("softmax lse", lse, dense_scalar ? lse_scalar : NULL, lse_want,
                                   lse_err, 1, rows);
        free(dense);
        free(dense_scalar);
        free(x0);
        free(want);
        free(err);
        free(sd);
        free(lse_want);
        free(lse_err);
        buf_free(&bx);
        buf_free(&bl);
    }
}

HARNESS_ISA_PARAMS(ops, softmax_backward)
ParameterizedTest(isa_row *row, ops, softmax_backward)
{
    const attn_dsp *t = harness_begin(row);
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    for (int rep = 0; rep < 120; rep++) {
        const size_t rows = (size_t)rng_int(g, 1, 6), cols = row_len(g);
        const size_t stride = cols + (size_t)rng_int(g, 0, 3), total = (rows - 1) * stride + cols;
        const int in_place = rep % 3; /* 0: separate ds, 1: ds == dp, 2: ds == p */
        harness_context("softmax_backward rows=%zu cols=%zu stride=%zu in_place=%d", rows, cols,
                        stride, in_place);
        buf bp, bdp, bds;
        float *p = buf_alloc(&bp, total * 4, (size_t)(rep & 1) * 4);
        float *dp = buf_alloc(&bdp, total * 4, 0);
        float *ds = buf_alloc(&bds, total * 4, (size_t)(rep & 1) * 4);
        for (size_t i = 0; i < total; i++) {
            p[i] = rng_float(g, 0.0f, 1.0f) / (float)cols;
            dp[i] = rng_float(g, -10.0f, 10.0f);
            const uint32_t c = BUF_CANARY;
            memcpy(&ds[i], &c, 4);
        }
        float *p0 = xmalloc(total * 4), *dp0 = xmalloc(total * 4);
        memcpy(p0, p, total * 4);
        memcpy(dp0, dp, total * 4);
        double *want = xmalloc(rows * cols * sizeof(double)),
               *err = xmalloc(rows * cols * sizeof(double));
        for (size_t r = 0; r < rows; r++)
            ref_softmax_bwd_row(p + r * stride, dp + r * stride, cols, want + r * cols,
                                err + r * cols);
        float *dst = in_place == 0 ? ds : in_place == 1 ? dp : p;
        attn_status s = attn_softmax_backward_with(t, p, dp, dst, (int64_t)rows, (int64_t)cols,
                                                   (int64_t)stride);
        CHECK(s == ATTN_OK, "status %d", s);
        buf_check(in_place == 0 ? &bds : in_place == 1 ? &bdp : &bp, "ds");
        float *dense = xmalloc(rows * cols * 4), *dense_scalar = NULL;
        for (size_t r = 0; r < rows; r++)
            memcpy(dense + r * cols, dst + r * stride, cols * 4);
        if (in_place == 0)
            for (size_t r = 0; r + 1 < rows; r++)
                for (size_t c = cols; c < stride; c++) {
                    uint32_t v;
                    memcpy(&v, &ds[r * stride + c], 4);
                    CHECK(v == BUF_CANARY, "wrote into the row gap [%zu][%zu]", r, c);
                }
        if (!harness_is_scalar(t)) {
            float *out = xmalloc(total * 4);
            attn_softmax_backward_with(sc, p0, dp0, out, (int64_t)rows, (int64_t)cols,
                                       (int64_t)stride);
            dense_scalar = xmalloc(rows * cols * 4);
            for (size_t r = 0; r < rows; r++)
                memcpy(dense_scalar + r * cols, out + r * stride, cols * 4);
            free(out);
        }
        expect_near_and_scalar("softmax_backward", dense, dense_scalar, want, err, rows, cols);
        free(dense);
        free(dense_scalar);
        free(p0);
        free(dp0);
        free(want);
        free(err);
        buf_free(&bp);
        buf_free(&bdp);
        buf_free(&bds);
    }
}

/* ------------------------------------------------------------ threads, per table */

/*
 * Bitwise the same results with any parallel_for, for every table (the
 * public-API version in test_threads.c covers the active table and more
 * pool sizes).
 */
HARNESS_ISA_PARAMS(ops, thread_invariance)
ParameterizedTest(isa_row *row, ops, thread_invariance, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    static const unsigned which[] = {WL_CAUSAL | WL_LENS | WL_GQA, WL_DECODE | WL_MQA,
                                     ALL_MASKS | WL_BLHD | WL_F16, WL_Q_LONG | WL_BIG_HEAD};
    attn_threadpool *pool;
    CHECK(attn_threadpool_create(3, &pool) == ATTN_OK, "pool");
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++)
        for (size_t o = 0; o < QK_OPS; o++) {
            const op_kind op = qk_ops[o];
            workload w;
            wl_make(&w, which[i]);
            harness_context("%s, thread invariance, %s", op_names[op], wl_describe(&w));
            result serial, pooled, reversed;
            wl_poison_outputs(&w);
            CHECK(run_op(t, &w, op, 1) == ATTN_OK, "serial");
            capture(&w, op, &serial);
            w.opt.parallel_for = attn_threadpool_parallel_for;
            w.opt.parallel_ctx = pool;
            wl_poison_outputs(&w);
            CHECK(run_op(t, &w, op, 1) == ATTN_OK, "pooled");
            capture(&w, op, &pooled);
            w.opt.parallel_for = harness_reverse_for;
            wl_poison_outputs(&w);
            CHECK(run_op(t, &w, op, 1) == ATTN_OK, "reversed");
            capture(&w, op, &reversed);
            const size_t rows = (size_t)wl_rows(&w);
            const size_t n = rows * (size_t)(op == OP_FORWARD ? w.dv : w.shape.kv_len);
            expect_bits("pool of 3 vs serial", pooled.table, serial.table, n);
            expect_bits("reverse order vs serial", reversed.table, serial.table, n);
            if (op != OP_SCORES)
                for (int s = 0; s < 3; s++) {
                    expect_bits("stats, pool of 3", pooled.stats[s], serial.stats[s], rows);
                    expect_bits("stats, reverse order", reversed.stats[s], serial.stats[s], rows);
                }
            release(&serial);
            release(&pooled);
            release(&reversed);
            wl_free(&w);
        }
    attn_threadpool_destroy(pool);
}

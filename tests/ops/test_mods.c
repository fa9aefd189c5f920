/* SPDX-License-Identifier: MIT */
/*
 * Score modifiers (sinks, ALiBi, two-sided windows) beyond the random
 * operation specs of test_ops.c: the alibi kernel slot against float64 and
 * the scalar oracle on every ISA row, rows whose only entry is their sink,
 * tiles skipped on both edges of a two-sided window, ALiBi on a long cache,
 * and the argument checks of the new options.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ref/ref.h"
#include "tolerance.h"
#include "workload.h"

/* ------------------------------------------------------------ the alibi slot */

/* y = x - slope * |pos - j| in float64, and the bound of tolerance.h "alibi". */
static void alibi_want(const float *x, size_t n, float slope, int64_t pos, double *want,
                       double *bound)
{
    for (size_t j = 0; j < n; j++) {
        const double a = (double)slope * fabs((double)(pos - (int64_t)j));
        want[j] = (double)x[j] - a;
        bound[j] = TOL_ALIBI_A * TOL_U * fabs(a) + TOL_U * fabs(want[j]);
    }
}

HARNESS_ISA_PARAMS(mods, alibi_kernel)
ParameterizedTest(isa_row *row, mods, alibi_kernel)
{
    const attn_dsp *t = harness_begin(row);
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    static const int64_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 255, 256, 1000};
    /* positions before, inside and after the row, and near the int32 limits */
    static const int64_t far = 2147483000;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int kind = 0; kind < 6; kind++)
            for (int offset = 0; offset < 2; offset++) {
                const size_t n = (size_t)lens[li];
                const int64_t pos = kind == 0   ? rng_int(g, 0, (int64_t)n)
                                    : kind == 1 ? -rng_int(g, 1, 300)
                                    : kind == 2 ? (int64_t)n + rng_int(g, 0, 300)
                                    : kind == 3 ? far
                                    : kind == 4 ? (int64_t)n - far
                                                : rng_int(g, 1 << 24, 1 << 26); /* inexact */
                const float slope = kind == 5 ? rng_float(g, 0.0f, 1e-3f)
                                              : rng_float(g, -0.25f, 2.0f);
                harness_context("alibi n=%zu pos=%lld slope=%g offset=%d", n, (long long)pos,
                                (double)slope, offset);
                buf bx;
                float *x = buf_alloc(&bx, n * 4, (size_t)offset * 4);
                rng_fill(g, x, n, -20.0f, 20.0f);
                if (n > 3)
                    x[rng_int(g, 0, (int64_t)n - 1)] = -INFINITY; /* masked stays -inf */
                float *x0 = xmalloc(n * 4 + 4), *xs = xmalloc(n * 4 + 4);
                memcpy(x0, x, n * 4);
                memcpy(xs, x, n * 4);
                double *want = xmalloc(n * sizeof(double) + 8),
                       *bound = xmalloc(n * sizeof(double) + 8);
                alibi_want(x0, n, slope, pos, want, bound);
                t->alibi(x, n, slope, pos);
                buf_check(&bx, "alibi x");
                expect_near("alibi vs float64", x, 0, want, bound, 1, n);
                if (!harness_is_scalar(t)) {
                    sc->alibi(xs, n, slope, pos);
                    for (size_t j = 0; j < n; j++)
                        bound[j] = TOL_PAIR(bound[j]);
                    expect_near_f("alibi vs scalar", x, 0, xs, 0, bound, 1, n);
                }
                free(x0);
                free(xs);
                free(want);
                free(bound);
                buf_free(&bx);
            }
}

/* ------------------------------------------------------------ sink-only rows */

/*
 * Rows that see no key but have a finite sink: weights and output 0,
 * lse = max_score = the sink, entropy 0; padded rows keep -inf; a -inf sink
 * is no sink. Checked exactly (these values involve no rounding).
 */
HARNESS_ISA_PARAMS(mods, sink_only_rows)
ParameterizedTest(isa_row *row, mods, sink_only_rows)
{
    const attn_dsp *t = harness_begin(row);
    for (int rep = 0; rep < 8; rep++)
        for (int op = 0; op < 2; op++) { /* weights, forward */
            workload w;
            wl_make(&w, WL_SINKS | WL_LENS | WL_MASK | (rep & 1 ? WL_GQA : 0) |
                            (rep & 2 ? WL_WINDOW | WL_WINDOW_R : 0));
            const attn_shape *s = &w.shape;
            /* hide every key from every row of batch entry 0 (a BOOL mask of 0) */
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = 0; i < s->q_len; i++)
                    for (int64_t j = 0; j < s->kv_len; j++)
                        *(uint8_t *)wl_at(&w.mask, 0, h, i, j) = 0;
            harness_context("sink-only rows, %s, %s", op ? "forward" : "weights",
                            wl_describe(&w));
            wl_poison_outputs(&w);
            attn_status st =
                op ? attn_forward_with(t, &w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats)
                   : attn_weights_with(t, &w.shape, &w.opt, &w.q, &w.k, &w.scores, &w.stats);
            CHECK(st == ATTN_OK, "status %d", st);
            /* the mask may broadcast over the batch: only entry 0 is known empty */
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = 0; i < s->q_len; i++) {
                    const size_t at = (size_t)(h * s->q_len + i);
                    const int valid = i < w.q_lens[0];
                    const float z = *(const float *)wl_at(&w.sinks, 0, h, 0, 0);
                    const float want = valid ? z : -INFINITY;
                    CHECK(w.stats.lse[at] == want && w.stats.max_score[at] == want,
                          "h=%lld i=%lld: lse %g max %g, want %g", (long long)h, (long long)i,
                          (double)w.stats.lse[at], (double)w.stats.max_score[at], (double)want);
                    CHECK(w.stats.entropy[at] == 0.0f, "entropy %g", (double)w.stats.entropy[at]);
                    const int64_t cols = op ? w.dv : s->kv_len;
                    const attn_tensor *o = op ? &w.out : &w.scores;
                    for (int64_t c = 0; c < cols; c++) {
                        float v;
                        memcpy(&v, wl_at(o, 0, h, i, c), 4);
                        CHECK(v == 0.0f, "h=%lld i=%lld c=%lld: %g, want 0", (long long)h,
                              (long long)i, (long long)c, (double)v);
                    }
                }
            wl_free(&w);
        }
}

/* ------------------------------------------------------------ tile skipping */

static const attn_dsp *g_inner;
static unsigned long long g_qk_pairs, g_pv_pairs;

static void counting_qk(const float *q, ptrdiff_t q_stride, const void *k, ptrdiff_t k_stride,
                        size_t nq, size_t nk, size_t d, float scale, float *s,
                        ptrdiff_t s_stride)
{
    g_qk_pairs += (unsigned long long)(nq * nk);
    g_inner->qk_tile[ATTN_KV_F32](q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);
}

static void counting_pv(const float *p, ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride,
                        size_t nq, size_t nk, size_t dv, float *acc, ptrdiff_t acc_stride)
{
    g_pv_pairs += (unsigned long long)(nq * nk);
    g_inner->pv_tile[ATTN_KV_F32](p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);
}

/*
 * A two-sided window on a long sequence: the (row, key) pairs the tile
 * kernels compute stay within what the window needs. Each task of up to
 * block_q rows reads at most block_q - 1 + W + R - 1 keys (the union of its
 * rows' windows, clipped exactly, never rounded to blocks): so the pairs are
 * at most rows * (block_q + W + R). Without the right edge the count would
 * grow with L (about L^2 / 2); without the left edge as well.
 */
HARNESS_ISA_PARAMS(mods, window_tiles_skipped)
ParameterizedTest(isa_row *row, mods, window_tiles_skipped)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    attn_dsp counted = *t;
    counted.qk_tile[ATTN_KV_F32] = counting_qk;
    counted.pv_tile[ATTN_KV_F32] = counting_pv;
    g_inner = t;
    const int64_t L = 2048, D = 8, H = 2;
    attn_shape shape = {1, H, H, L, L, D, D};
    const size_t n = (size_t)(H * L * D);
    float *q = xmalloc(n * 4), *k = xmalloc(n * 4), *v = xmalloc(n * 4), *o = xmalloc(n * 4);
    rng_fill(g, q, n, -1.0f, 1.0f);
    rng_fill(g, k, n, -1.0f, 1.0f);
    rng_fill(g, v, n, -1.0f, 1.0f);
    attn_tensor tq = {q, ATTN_DTYPE_F32, H * L * D, L * D, D}, tk = tq, tv = tq, to = tq;
    tk.data = k;
    tv.data = v;
    to.data = o;
    static const int64_t windows[][2] = {{65, 65}, {1, 200}, {200, 1}, {513, 513}};
    for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
        attn_options opt = ATTN_OPTIONS_INIT;
        opt.window = windows[wi][0];
        opt.window_right = windows[wi][1];
        harness_context("window %lld + %lld, L=%lld", (long long)opt.window,
                        (long long)opt.window_right, (long long)L);
        g_qk_pairs = g_pv_pairs = 0;
        CHECK(attn_forward_with(&counted, &shape, &opt, &tq, &tk, &tv, &to, NULL) == ATTN_OK,
              "forward");
        const unsigned long long limit =
            (unsigned long long)(H * L * ((int64_t)t->block_q + opt.window + opt.window_right));
        CHECK(g_qk_pairs > 0 && g_qk_pairs <= limit, "forward qk pairs %llu > %llu",
              g_qk_pairs, limit);
        CHECK(g_pv_pairs <= limit, "forward pv pairs %llu > %llu", g_pv_pairs, limit);
        g_qk_pairs = 0;
        float *sc = xmalloc((size_t)(H * L * L) * 4);
        attn_tensor ts = {sc, ATTN_DTYPE_F32, H * L * L, L * L, L};
        CHECK(attn_scores_with(&counted, &shape, &opt, &tq, &tk, &ts) == ATTN_OK, "scores");
        CHECK(g_qk_pairs > 0 && g_qk_pairs <= limit, "scores qk pairs %llu > %llu", g_qk_pairs,
              limit);
        /* and the result is the windowed one: -inf outside, finite inside */
        for (int64_t i = 0; i < L; i += 97)
            for (int64_t j = 0; j < L; j++) {
                const int in = j > i - opt.window && j < i + opt.window_right;
                CHECK(in ? isfinite(sc[i * L + j]) : sc[i * L + j] == -INFINITY,
                      "score [%lld][%lld] = %g", (long long)i, (long long)j,
                      (double)sc[i * L + j]);
            }
        free(sc);
    }
    free(q);
    free(k);
    free(v);
    free(o);
}

/* ------------------------------------------------------------ ALiBi, long cache */

/*
 * Decode against a long cache with ALiBi: distances up to 70,000 make the
 * bias up to ~2e4; the result must still meet the float64 bounds (the
 * distance form keeps the keys near the query exact).
 */
HARNESS_ISA_PARAMS(mods, alibi_long_decode)
ParameterizedTest(isa_row *row, mods, alibi_long_decode, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    const int64_t Lk = 70001, D = 16, H = 2;
    attn_shape shape = {1, H, 1, 1, Lk, D, D};
    float *q = xmalloc((size_t)(H * D) * 4), *k = xmalloc((size_t)(Lk * D) * 4),
          *v = xmalloc((size_t)(Lk * D) * 4), *o = xmalloc((size_t)(H * D) * 4);
    float slopes[2] = {0.3f, 1.0f / 256.0f}, lse[2];
    rng_fill(g, q, (size_t)(H * D), -1.0f, 1.0f);
    rng_fill(g, k, (size_t)(Lk * D), -1.0f, 1.0f);
    rng_fill(g, v, (size_t)(Lk * D), -1.0f, 1.0f);
    attn_tensor tq = {q, ATTN_DTYPE_F32, H * D, D, D};
    attn_tensor tk = {k, ATTN_DTYPE_F32, Lk * D, Lk * D, D}, tv = tk;
    tv.data = v;
    attn_tensor to = {o, ATTN_DTYPE_F32, H * D, D, D};
    attn_tensor ts = {slopes, ATTN_DTYPE_F32, 0, 1, 0};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    opt.alibi_slopes = &ts;
    attn_row_stats stats = {lse, NULL, NULL};
    harness_context("alibi decode Lk=%lld", (long long)Lk);
    CHECK(attn_forward_with(t, &shape, &opt, &tq, &tk, &tv, &to, &stats) == ATTN_OK, "forward");
    ref_attn r;
    const int64_t bk = t->block_k < harness_scalar()->block_k ? t->block_k
                                                              : harness_scalar()->block_k;
    ref_attn_compute(&r, &shape, &opt, &tq, &tk, &tv, (Lk + bk - 1) / bk + 1);
    expect_near("out vs float64", o, D, r.o, r.o_err, (size_t)H, (size_t)D);
    expect_near("lse vs float64", lse, 2, r.lse, r.lse_err, 1, 2);
    ref_attn_free(&r);
    free(q);
    free(k);
    free(v);
    free(o);
}

/* ------------------------------------------------------------ arguments */

Test(mods, option_errors)
{
    harness_begin_plain("mods/option_errors");
    float q[4] = {1, 2, 3, 4}, k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4}, out[4], canary[4];
    attn_shape shape = {1, 1, 1, 2, 2, 2, 2};
    attn_tensor tq = {q, ATTN_DTYPE_F32, 4, 4, 2}, tk = {k, ATTN_DTYPE_F32, 4, 4, 2},
                tv = {v, ATTN_DTYPE_F32, 4, 4, 2}, to = {out, ATTN_DTYPE_F32, 4, 4, 2};
    float sink = 1.0f;
    attn_tensor ts = {&sink, ATTN_DTYPE_F32, 0, 0, 0};
    for (int c = 0; c < 4; c++)
        canary[c] = out[c] = -7.0f;

#define EXPECT(status, what, ...)                                                         \
    do {                                                                                  \
        attn_options o = ATTN_OPTIONS_INIT;                                               \
        __VA_ARGS__;                                                                      \
        attn_status got = attn_forward(&shape, &o, &tq, &tk, &tv, &to, NULL);             \
        CHECK(got == (status), "%s: status %d, want %d", what, got, status);              \
        if ((status) != ATTN_OK)                                                          \
            expect_bits(what, out, canary, 4);                                            \
    } while (0)

    EXPECT(ATTN_ERR_ARG, "window_right < 0", o.window_right = -1);
    attn_tensor null_sinks = ts;
    null_sinks.data = NULL;
    EXPECT(ATTN_ERR_NULL, "sinks data NULL", o.sinks = &null_sinks);
    EXPECT(ATTN_ERR_NULL, "alibi data NULL", o.alibi_slopes = &null_sinks);
    attn_tensor f16 = ts;
    f16.dtype = ATTN_DTYPE_F16;
    EXPECT(ATTN_ERR_ARG, "sinks F16", o.sinks = &f16);
    EXPECT(ATTN_ERR_ARG, "alibi F16", o.alibi_slopes = &f16);
    attn_tensor neg = ts;
    neg.head_stride = -1;
    EXPECT(ATTN_ERR_STRIDE, "sinks negative stride", o.sinks = &neg);
    /* an output sharing memory with the sinks */
    attn_tensor in_out = ts;
    in_out.data = &out[3];
    EXPECT(ATTN_ERR_STRIDE, "sinks inside out", o.sinks = &in_out);
    EXPECT(ATTN_ERR_STRIDE, "alibi inside out", o.alibi_slopes = &in_out);
    /* a 1.0 caller (struct_size without the new fields): they are never read */
    EXPECT(ATTN_OK, "1.0 struct_size ignores the new fields",
           o.struct_size = (uint32_t)offsetof(attn_options, window_right);
           o.window_right = -5; o.sinks = &null_sinks; o.alibi_slopes = &f16);
    EXPECT(ATTN_OK, "valid sinks, slopes and windows", o.sinks = &ts; o.alibi_slopes = &ts;
           o.window = 1; o.window_right = 2);
    /* draft trees (1.3): a parent is an earlier query or -1, and the draft
       fits among the keys */
    int32_t chain[2] = {-1, 0}, self[2] = {-1, 1}, low[2] = {-2, 0}, ahead[2] = {1, -1};
    EXPECT(ATTN_OK, "a chain", o.tree_parents = chain);
    for (int c = 0; c < 4; c++) /* the canary again, for the refused calls */
        out[c] = -7.0f;
    EXPECT(ATTN_ERR_ARG, "a token its own parent", o.tree_parents = self);
    EXPECT(ATTN_ERR_ARG, "parent -2", o.tree_parents = low);
    EXPECT(ATTN_ERR_ARG, "a later parent", o.tree_parents = ahead);
    const int32_t one_key[1] = {1};
    EXPECT(ATTN_ERR_ARG, "2 draft tokens, 1 key", o.tree_parents = chain; o.kv_lens = one_key);
    EXPECT(ATTN_OK, "a 1.2 struct_size ignores tree_parents",
           o.struct_size = (uint32_t)offsetof(attn_options, tree_parents); o.tree_parents = low);
#undef EXPECT

    /* windows wider than everything hide nothing (and must not overflow) */
    float plain[4], wide[4];
    attn_options o = ATTN_OPTIONS_INIT;
    to.data = plain;
    CHECK(attn_forward(&shape, &o, &tq, &tk, &tv, &to, NULL) == ATTN_OK, "plain");
    o.window = INT64_MAX;
    o.window_right = INT64_MAX;
    to.data = wide;
    CHECK(attn_forward(&shape, &o, &tq, &tk, &tv, &to, NULL) == ATTN_OK, "widest windows");
    expect_bits("INT64_MAX windows vs none", wide, plain, 4);
}

/* ------------------------------------------------------------ half bias */

/*
 * An F16 or BF16 bias (an engine's additive mask in the model's dtype, 0 and
 * -inf, or any values) is read in place and widened exactly: every
 * operation that reads the bias gives the bits of the same call with an F32
 * bias holding the widened values, on every ISA row. Row lengths past the
 * widening piece (128) and a broadcast bias ([1][1][Lq][Lk], strides 0).
 */
enum { HB_B = 2, HB_HQ = 4, HB_HKV = 2, HB_LQ = 19, HB_LK = 301, HB_D = 32 };

static void half_bias_case(const attn_dsp *t, int32_t dtype, int broadcast, int masklike)
{
    rng *g = harness_rng();
    static float q[HB_B * HB_HQ * HB_LQ * HB_D], k[HB_B * HB_HKV * HB_LK * HB_D],
        v[HB_B * HB_HKV * HB_LK * HB_D], bias32[HB_B * HB_HQ * HB_LQ * HB_LK];
    static uint16_t bias16[HB_B * HB_HQ * HB_LQ * HB_LK];
    static float out[2][HB_B * HB_HQ * HB_LQ * HB_D], sc[2][HB_B * HB_HQ * HB_LQ * HB_LK],
        lse[2][HB_B * HB_HQ * HB_LQ], sc_in[HB_B * HB_HQ * HB_LQ * HB_LK];
    rng_fill(g, q, sizeof q / 4, -1.0f, 1.0f);
    rng_fill(g, k, sizeof k / 4, -1.0f, 1.0f);
    rng_fill(g, v, sizeof v / 4, -1.0f, 1.0f);
    const size_t nb = broadcast ? (size_t)HB_LQ * HB_LK : sizeof bias16 / 2;
    for (size_t i = 0; i < nb; i++) {
        const float x = masklike ? (rng_int(g, 0, 3) == 0 ? -INFINITY : 0.0f)
                                 : rng_float(g, -6.0f, 6.0f);
        bias16[i] = dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
        bias32[i] = dtype == ATTN_DTYPE_F16 ? (float)ref_f16_to_double(bias16[i])
                                            : (float)ref_bf16_to_double(bias16[i]);
    }
    harness_context("%s bias, %s%s", dtype == ATTN_DTYPE_F16 ? "F16" : "BF16",
                    broadcast ? "broadcast" : "full", masklike ? ", 0/-inf" : "");
    const attn_shape s = {HB_B, HB_HQ, HB_HKV, HB_LQ, HB_LK, HB_D, 0};
    const attn_tensor tq = {q, ATTN_DTYPE_F32, HB_HQ * HB_LQ * HB_D, HB_LQ * HB_D, HB_D};
    const attn_tensor tk = {k, ATTN_DTYPE_F32, HB_HKV * HB_LK * HB_D, HB_LK * HB_D, HB_D};
    const attn_tensor tv = {v, ATTN_DTYPE_F32, HB_HKV * HB_LK * HB_D, HB_LK * HB_D, HB_D};
    const int64_t bs = broadcast ? 0 : HB_HQ * HB_LQ * HB_LK, hs = broadcast ? 0 : HB_LQ * HB_LK;
    const attn_tensor b32 = {bias32, ATTN_DTYPE_F32, bs, hs, HB_LK};
    const attn_tensor b16 = {bias16, dtype, bs, hs, HB_LK};
    for (int op = 0; op < 4; op++)
        for (int w = 0; w < 2; w++) {
            attn_options o = ATTN_OPTIONS_INIT;
            o.flags = op == 3 ? ATTN_CAUSAL : 0;
            o.bias = w ? &b16 : &b32;
            const attn_tensor to = {out[w], ATTN_DTYPE_F32, HB_HQ * HB_LQ * HB_D, HB_LQ * HB_D,
                                    HB_D};
            const attn_tensor ts = {sc[w], ATTN_DTYPE_F32, HB_HQ * HB_LQ * HB_LK, HB_LQ * HB_LK,
                                    HB_LK};
            attn_row_stats st = {lse[w], NULL, NULL};
            memset(out[w], 0, sizeof out[w]);
            if (op != 2)
                memset(sc[w], 0, sizeof sc[w]);
            memset(lse[w], 0, sizeof lse[w]);
            attn_status r;
            if (op == 2 && w == 0)
                rng_fill(g, sc_in, sizeof sc_in / 4, -3.0f, 3.0f);
            if (op == 2) /* the same input scores for both */
                memcpy(sc[w], sc_in, sizeof sc_in);
            if (op == 0)
                r = attn_scores_with(t, &s, &o, &tq, &tk, &ts);
            else if (op == 1)
                r = attn_weights_with(t, &s, &o, &tq, &tk, &ts, &st);
            else if (op == 2)
                r = attn_mask_apply_with(t, &s, &o, &ts);
            else
                r = attn_forward_with(t, &s, &o, &tq, &tk, &tv, &to, &st);
            CHECK(r == ATTN_OK, "op %d: %s", op, attn_last_error());
            if (w == 0)
                continue;
            static const char *const names[4] = {"scores", "weights", "mask_apply", "forward"};
            char what[96];
            snprintf(what, sizeof what, "%s, half bias vs its F32 widening", names[op]);
            if (op < 3)
                expect_bits(what, sc[1], sc[0], sizeof sc[0] / 4);
            if (op == 1 || op == 3)
                expect_bits(what, lse[1], lse[0], sizeof lse[0] / 4);
            if (op == 3)
                expect_bits(what, out[1], out[0], sizeof out[0] / 4);
        }
}

HARNESS_ISA_PARAMS(mods, half_bias_bits)
ParameterizedTest(isa_row *row, mods, half_bias_bits, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    const int32_t dtypes[] = {ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    for (int d = 0; d < 2; d++)
        for (int broadcast = 0; broadcast < 2; broadcast++)
            for (int masklike = 0; masklike < 2; masklike++)
                half_bias_case(t, dtypes[d], broadcast, masklike);
}

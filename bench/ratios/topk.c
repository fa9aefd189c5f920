/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios topk: the top-k targets (attn.h, "Top-k sparse attention")
 * as times measured in one process, variants interleaved per repetition,
 * one thread:
 *   decode   MLA-shaped (Hq 16, one latent KV head, d 576, v 512, BF16
 *            K = V's first 512 columns of the same rows), Lq 1: top-k 2048
 *            of 32768 keys vs the dense call over 2048 contiguous keys;
 *   prefill  256 query rows (Hq 8, Hkv 8, d 128, F32), top-k 512 of 8192,
 *            each row keeping 4 in 5 of the row before's keys: one call vs
 *            256 calls of one row each;
 *   fp8      the decode's top-k call on DeepSeek V3.2's FP8 rows read in
 *            place (656 bytes per token: 512 E4M3 with 4 f32 scales of 128
 *            channels, then the 64 rope values in bf16 as k's tail; attn.h
 *            1.8, 1.9) vs the same call on the bf16 latent (1152 bytes).
 * The caches are read from DRAM each call (the decode rotates copies past
 * the LLC). Median and minimum over the repetitions.
 *
 * The decode's and the prefill's problems (queries, the latent cache, the
 * top-k lists: distinct keys, drawn at random) come from the problem
 * generator; the FP8 rows, whose scales and tail live inside each row, are
 * laid out here.
 *
 *   attn_ratios topk [--reps N] [--splits N] [--only V]
 *   (defaults 9, 0: automatic; --only: time variant V alone, 0..4 as
 *   below, for a profiler)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

enum { COPIES = 6 }; /* of the decode's caches: 226 MiB of BF16, past the LLC */
enum { D = 576, DV = 512, LK = 32768, TOPK = 2048, HQ = 16 };
enum { ROW = 656, G = 128 }; /* an FP8 row's bytes; channels per scale */
enum { PL = 256, PK = 8192, PT = 512, PH = 8, PD = 128 };
/* the variants, in the order a repetition times them */
enum { V_SPARSE, V_DENSE, V_FP8, V_PREFILL, V_ROWS, VARIANTS };
/* --only's numbers, in the order the output lists them */
static const int only_of[VARIANTS] = {V_SPARSE, V_DENSE, V_PREFILL, V_ROWS, V_FP8};

typedef struct topk {
    gen_problem dd, pd; /* decode, prefill */
    gen_bufs dm, pm;
    void *cache[COPIES];
    unsigned char *rows8[COPIES];
    attn_shape sparse, dense;
    attn_options os, od, o8;
} topk;

/* One sample of variant v: 20 decode calls (caches rotated), one prefill
   call, or its 256 rows one call each. */
static void call(void *ctx, int v, int rep, int c)
{
    topk *t = ctx;
    const int copy = (c + (rep < 0 ? 0 : rep)) % COPIES;
    const attn_tensor *tq = &t->dm.t[GEN_Q], *to = &t->dm.t[GEN_OUT];
    if (v == V_SPARSE || v == V_DENSE) {
        const uint16_t *kv = t->cache[copy];
        /* the dense call's 2048 keys: a contiguous stretch of the cache */
        const uint16_t *at = v == V_DENSE ? kv + (size_t)(c % 16) * (size_t)(TOPK * D) : kv;
        attn_tensor tk = {(void *)at, ATTN_DTYPE_BF16, LK * D, D, D};
        ratio_ok(attn_forward(v == V_DENSE ? &t->dense : &t->sparse, v == V_DENSE ? &t->od : &t->os,
                              tq, &tk, &tk, to, NULL),
                 "decode");
    } else if (v == V_FP8) {
        unsigned char *x = t->rows8[copy];
        attn_tensor tk = {x, ATTN_DTYPE_FP8_E4M3, LK * ROW, ROW, ROW};
        attn_tensor ts = {x + DV, ATTN_DTYPE_F32, LK * ROW / 4, ROW / 4, ROW / 4};
        attn_tensor tt = {x + DV + 4 * (DV / G), ATTN_DTYPE_BF16, LK * ROW / 2, ROW / 2, ROW / 2};
        attn_options oc = t->o8;
        oc.k_scales = oc.v_scales = &ts;
        oc.k_tail = &tt;
        ratio_ok(attn_forward(&t->sparse, &oc, tq, &tk, &tk, to, NULL), "fp8 rows");
    } else {
        const gen_bufs *m = &t->pm;
        if (v == V_PREFILL) {
            ratio_forward(m, &m->opt, "prefill");
            return;
        }
        const attn_shape one = {1, PH, PH, 1, PK, PD, 0};
        for (int64_t i = 0; i < PL; i++) { /* row i alone: its q row, out row, list */
            attn_tensor q = m->t[GEN_Q], o = m->t[GEN_OUT];
            q.data = gen_at(&m->t[GEN_Q], 0, 0, i, 0);
            o.data = gen_at(&m->t[GEN_OUT], 0, 0, i, 0);
            attn_options o1 = m->opt;
            o1.topk_indices = m->opt.topk_indices + i * PT;
            o1.flags = 0;
            ratio_ok(attn_forward(&one, &o1, &q, &m->t[GEN_K], &m->t[GEN_V], &o, NULL), "row");
        }
    }
}

/* A top-k problem: B 1, one KV head group, F32 q, top-k lists of distinct
   keys (each row keeping about 4 in 5 of the row before's when shared). */
static void topk_problem(gen_problem *d, gen_bufs *m, int64_t kv_heads, int64_t group,
                         int64_t lq, int64_t lk, int64_t hd, int64_t vd, int32_t kv_dtype,
                         int64_t k, int shared, unsigned flags)
{
    gen_profile p;
    ratio_profile_dims(&p, -1.0f, 1.0f,
                       (ratio_dims){.kv_heads = kv_heads, .group = group, .q_len = lq,
                                    .kv_len = lk, .head_dim = hd});
    gen_pin(&p, GEN_C_V_DIM, vd);
    gen_pin(&p, GEN_C_K_DTYPE, kv_dtype);
    gen_pin(&p, GEN_C_OPT(topk_indices), 1);
    gen_pin(&p, GEN_C_OPT(topk), k);
    gen_pin(&p, GEN_C_TOPK_DISTINCT, 1);
    gen_pin(&p, GEN_C_TOPK_SHARED, shared);
    ratio_problem(d, m, &p, 88172645463325252ull, 1, flags);
}

/* A variant's line: its median and minimum in ms, `digits` decimals. */
static void time_line(const char *what, int digits, ratio_stat s)
{
    printf("%s%.*f ms (min %.*f)\n", what, digits, s.median * 1e3, digits, s.min * 1e3);
}

/* A ratio's line, indented under the two variants it compares, then tail. */
static void vs_line(const char *what, ratio_stat x, ratio_stat y, const char *tail)
{
    printf("        %s %.2f (median) %.2f (min)%s", what, x.median / y.median, x.min / y.min, tail);
}

static int topk_run(const ratio_args *a)
{
    const int reps = a->reps, splits = ratio_opt_int(a, 0, 0), only = ratio_opt_int(a, 1, -1);
    if (only < -1 || only >= VARIANTS) {
        fprintf(stderr, "attn_ratios topk: --only 0..4\n");
        return 2;
    }
    topk t;
    memset(&t, 0, sizeof t);

    /* decode: MLA, V the first 512 columns of K's rows (no V of its own) */
    topk_problem(&t.dd, &t.dm, 1, HQ, 1, LK, D, DV, ATTN_DTYPE_BF16, TOPK, 0,
                 GEN_M_OUT | GEN_M_NO_V);
    ratio_copies(t.cache, t.dm.t[GEN_K].data, t.dm.bytes[GEN_K], COPIES);
    t.sparse = t.dm.shape;
    t.dense = t.sparse;
    t.dense.kv_len = TOPK;
    t.os = t.dm.opt;
    t.od = (attn_options)ATTN_OPTIONS_INIT;
    t.os.kv_splits = t.od.kv_splits = splits;
    ratio_workspace(&t.os, &t.sparse, NULL);
    ratio_workspace(&t.od, &t.dense, NULL);

    /* DeepSeek V3.2's FP8 rows: 656 bytes, in place (k, its scales and tail
       inside each row; v = k's 512 values) */
    uint64_t st = 88172645463325252ull;
    for (int c = 0; c < COPIES; c++) {
        unsigned char *x = ratio_alloc((size_t)LK * ROW);
        for (int64_t j = 0; j < LK; j++) {
            unsigned char *r = x + j * ROW;
            for (int i = 0; i < DV; i++) {
                r[i] = (unsigned char)(gen_splitmix(&st) & 0xff);
                if ((r[i] & 0x7f) == 0x7f) /* not NaN */
                    r[i] ^= 1;
            }
            for (int gi = 0; gi < DV / G; gi++) {
                const float s = (float)(1 + gen_splitmix(&st) % 64) / 4096.0f;
                memcpy(r + DV + 4 * gi, &s, 4);
            }
            ratio_fill(r + DV + 4 * (DV / G), ATTN_DTYPE_BF16, D - DV, -1.0f, 1.0f, &st);
        }
        t.rows8[c] = x;
    }
    t.o8 = t.os;
    t.o8.k_scale_group = t.o8.v_scale_group = G;
    t.o8.k_tail_dim = D - DV;

    /* prefill: 256 rows, top-k 512 of 8192, each row keeping 4 in 5 */
    topk_problem(&t.pd, &t.pm, PH, 1, PL, PK, PD, 0, ATTN_DTYPE_F32, PT, 1, GEN_M_OUT);

    const int c20 = ratio_calls(a, 20);
    const int calls[VARIANTS] = {c20, c20, c20, 1, 1};
    const ratio_loop l = {.variants = VARIANTS, .reps = reps, .warmup = 0, .order = RATIO_IN_TURN,
                          .calls = calls, .only = only < 0 ? -1 : only_of[only], .call = call,
                          .ctx = &t};
    ratio_stat s[VARIANTS];
    ratio_measure(&l, s, NULL);
    time_line("decode  MLA Hq 16, bf16 latent 576/512, top-k 2048 of 32768: ", 3, s[V_SPARSE]);
    time_line("decode  dense over 2048 contiguous keys of the same shape:     ", 3, s[V_DENSE]);
    vs_line("ratio", s[V_SPARSE], s[V_DENSE], "   target <= 1.3\n");
    time_line("prefill 256 rows, top-k 512 of 8192, 4/5 shared, one call:     ", 2, s[V_PREFILL]);
    time_line("prefill the same as 256 one-row calls:                         ", 2, s[V_ROWS]);
    vs_line("speedup", s[V_ROWS], s[V_PREFILL], "   target >= 2\n");
    time_line("fp8     the decode's top-k call on DeepSeek V3.2 FP8 rows:     ", 3, s[V_FP8]);
    vs_line("ratio to the bf16 latent", s[V_FP8], s[V_SPARSE], "   bytes ");
    printf("%.2f\n", (double)ROW / (double)(2 * D));

    ratio_copies_free(t.cache, COPIES);
    for (int c = 0; c < COPIES; c++)
        free(t.rows8[c]);
    free(t.os.workspace);
    free(t.od.workspace);
    ratio_problem_free(&t.dd, &t.dm);
    ratio_problem_free(&t.pd, &t.pm);
    return 0;
}

RATIO_FAMILY(topk, 9, RATIO_ONE_THREAD, NULL,
             "top-k sparse decode (MLA, FP8 rows in place) and prefill vs dense / per-row calls",
             {"--splits", "N", "kv_splits of the decode calls (default 0: automatic)"},
             {"--only", "V", "time variant V alone (0..4: decode, dense, prefill, rows, fp8)"});

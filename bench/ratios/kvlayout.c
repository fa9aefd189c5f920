/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios kvlayout: the targets of paged, packed and left-padded K/V
 * (docs/guide/kv-layouts.md). Every configuration of a target runs in
 * turn, repetition after repetition, and each one's median is reported
 * with its ratio to the first. With one thread the clock is the thread's
 * CPU time, which a loaded machine disturbs far less than wall time.
 *
 *   attn_ratios kvlayout [--threads N] [--reps N] [--part decode|prefill]
 *
 * Every configuration's problem comes from the problem generator with its
 * choices pinned.
 *
 * decode: Lq 1, Lk 4096, Hq 32, Hkv 8, d 128, f32 and f16 K/V: a contiguous
 *   cache ([B,H,L,D], and [B,L,H,D], whose rows are strided like a vLLM
 *   pool's) against paged pools [blocks][block_size][Hkv][d] with shuffled
 *   tables (block sizes 16 and 1), an in-order table (block size 16), and a
 *   head-major pool [blocks][Hkv][16][d] with a shuffled table.
 * prefill: 8 causal sequences of lengths 100..2000 (evenly spaced), Hq 32,
 *   Hkv 8, d 128: packed [T,H,D] with offsets against the padded batch of the
 *   same tokens ([8,H,2000,D] with q_lens/kv_lens); at most 5 repetitions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

/* A configuration: its problem, drawn with every choice pinned or off, and
   materialised with values in [-0.5, 0.5) at the sequences' rows only, so
   every configuration of a target holds the same values in its own
   layout. */
typedef struct config {
    const char *name;
    gen_problem d;
    gen_bufs m;
    attn_options opt;
} config;

static void base_profile(gen_profile *p, int64_t batch, int64_t kv_heads, int64_t group,
                         int64_t q_len, int64_t kv_len, int32_t kv_dtype)
{
    ratio_profile_dims(p, -0.5f, 0.5f, (ratio_dims){batch, kv_heads, group, q_len, kv_len, 128});
    gen_pin(p, GEN_C_K_DTYPE, kv_dtype);
    gen_pin(p, GEN_C_OPT(flags), ATTN_CAUSAL);
}

static void make_config(config *c, const char *name, const gen_profile *p, attn_threadpool *pool)
{
    c->name = name;
    ratio_problem(&c->d, &c->m, p, 0, 1, GEN_M_OUT | GEN_M_POISON);
    c->opt = c->m.opt;
    ratio_use_pool(&c->opt, pool);
}

static void forward(void *ctx, int v, int rep, int call)
{
    (void)rep, (void)call;
    const config *c = (const config *)ctx + v;
    ratio_forward(&c->m, &c->opt, c->name);
}

/* Runs every config `reps` times, interleaved; each sample is the mean of
   enough calls to last about 0.2 s (the same count for every config; one
   with --quick). Prints medians and ratios to config 0. */
static void run(config *c, int n, int reps, int quick, int cpu_clock)
{
    forward(c, 0, -1, 0); /* warm, then time one call */
    const double t0 = cpu_clock ? ratio_cpu() : ratio_wall();
    forward(c, 0, -1, 0);
    const double once = (cpu_clock ? ratio_cpu() : ratio_wall()) - t0;
    const int calls = quick || once >= 0.2 ? 1 : (int)(0.2 / (once > 1e-6 ? once : 1e-6));
    const ratio_loop l = {.variants = n, .reps = reps, .warmup = 1, .order = RATIO_IN_TURN,
                          .each = calls, .only = -1, .call = forward, .ctx = c};
    ratio_stat s[8];
    ratio_measure(&l, cpu_clock ? NULL : s, cpu_clock ? s : NULL);
    for (int i = 0; i < n; i++)
        printf("  %-44s %9.3f ms  x%.3f  (min %.3f, max %.3f)\n", c[i].name, s[i].median * 1e3,
               s[i].median / s[0].median, s[i].min * 1e3, s[i].max * 1e3);
}

static void decode(int32_t dtype, const ratio_args *a, attn_threadpool *pool)
{
    enum { N = 6 };
    config c[N];
    memset(c, 0, sizeof c);
    /* Lq 1, Lk 4096, Hq 32, Hkv 8, d 128; the pools [blocks][block_size][Hkv][d]
       (vLLM) or [blocks][Hkv][block_size][d] */
    static const struct {
        const char *name;
        int rows_outer;
        int64_t bs;
        int pool, heads_outer;
    } cf[N] = {{"contiguous [B,H,L,D]", 0, 0, 0, 0},
               {"contiguous [B,L,H,D]", 1, 0, 0, 0},
               {"paged, block 16, shuffled table", 0, 16, GEN_POOL_SHUFFLED, 0},
               {"paged, block 16, in-order table", 0, 16, GEN_POOL_ADJOIN, 0},
               {"paged, block 1, shuffled table", 0, 1, GEN_POOL_SHUFFLED, 0},
               {"paged [blocks][Hkv][16][d], shuffled table", 0, 16, GEN_POOL_SHUFFLED, 1}};
    for (int i = 0; i < N; i++) {
        gen_profile p;
        base_profile(&p, 1, 8, 4, 1, 4096, dtype);
        gen_pin(&p, GEN_C_ROWS_OUTER, cf[i].rows_outer);
        gen_pin(&p, GEN_C_BLOCK_SIZE, cf[i].bs);
        gen_pin(&p, GEN_C_POOL, cf[i].pool);
        gen_pin(&p, GEN_C_POOL_HEADS_OUTER, cf[i].heads_outer);
        make_config(&c[i], cf[i].name, &p, pool);
    }
    printf("decode, K/V %s (Lq 1, Lk 4096, Hq 32, Hkv 8, d 128), median of %d:\n",
           dtype == ATTN_DTYPE_F32 ? "f32" : "f16", a->reps);
    run(c, N, a->reps, a->quick, ratio_pool_size(pool) == 1);
    for (int i = 0; i < N; i++)
        ratio_problem_free(&c[i].d, &c[i].m);
}

static void prefill(const ratio_args *a, attn_threadpool *pool)
{
    enum { B = 8 };
    const int64_t lmax = 2000;
    const int reps = a->reps < 5 ? a->reps : 5;
    /* lengths 100..2000 evenly spaced (the generator's spread: lmax/20 first),
       padded [8,2000,H,D] with q_lens/kv_lens, or packed [T,H,D] with offsets */
    config c[2];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 2; i++) {
        gen_profile p;
        base_profile(&p, B, 8, 4, lmax, lmax, ATTN_DTYPE_F32);
        gen_pin(&p, GEN_C_SPREAD_LENS, 1);
        gen_pin(&p, GEN_C_ROWS_OUTER, 1);
        gen_pin(&p, GEN_C_Q_PACKED, i);
        gen_pin(&p, GEN_C_KV_PACKED, i);
        make_config(&c[i], i ? "packed [T,H,D] with offsets (cu_seqlens)"
                             : "padded [8,2000,H,D] with q_lens/kv_lens", &p, pool);
    }
    printf("prefill, 8 causal sequences of 100..2000 tokens (%lld in all), Hq 32, Hkv 8, "
           "d 128, median of %d:\n", (long long)c[1].m.shape.q_len, reps);
    run(c, 2, reps, a->quick, ratio_pool_size(pool) == 1);
    /* the same rows must come out of both */
    double worst = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < 32; h++)
            for (int64_t i = 0; i < gen_seq_q(&c[0].d, b); i++) {
                const float *x = gen_at(&c[1].m.t[GEN_OUT], b, h, gen_q_offset(&c[1].d, b) + i, 0);
                const float *y = gen_at(&c[0].m.t[GEN_OUT], b, h, i, 0);
                for (int64_t e = 0; e < 128; e++)
                    worst = fabs((double)x[e] - y[e]) > worst ? fabs((double)x[e] - y[e]) : worst;
            }
    printf("  largest |packed - padded| over the outputs: %.3g\n", worst);
    ratio_problem_free(&c[0].d, &c[0].m);
    ratio_problem_free(&c[1].d, &c[1].m);
}

static int kvlayout_run(const ratio_args *a)
{
    const char *part = a->opt[0] ? a->opt[0] : "";
    if (a->threads < 0 || (*part && strcmp(part, "decode") && strcmp(part, "prefill"))) {
        fprintf(stderr, "attn_ratios kvlayout: --threads N >= 0, --part decode|prefill\n");
        return 2;
    }
    attn_threadpool *pool = ratio_pool(a->threads);
    const int threads = ratio_pool_size(pool);
    ratio_header("%d thread(s), %s\n", threads,
                 threads == 1 ? "CPU time of the calling thread" : "wall time");
    if (strcmp(part, "prefill")) {
        decode(ATTN_DTYPE_F32, a, pool);
        decode(ATTN_DTYPE_F16, a, pool);
    }
    if (strcmp(part, "decode"))
        prefill(a, pool);
    attn_threadpool_destroy(pool);
    return 0;
}

RATIO_FAMILY(kvlayout, 7, 1, "threads (1: CPU time of this thread, else wall time)",
             "paged, packed and strided K/V against a contiguous cache (decode, prefill)",
             {"--part", "decode|prefill", "only the decode or only the prefill targets"});

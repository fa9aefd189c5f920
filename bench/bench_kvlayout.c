/* SPDX-License-Identifier: MIT */
/*
 * The targets of paged, packed and left-padded K/V (docs/guide/kv-layouts.md),
 * measured as ratios inside one process: every
 * configuration of a target runs in turn, repetition after repetition
 * (interleaved, so a slow phase of the machine hits all of them), and each
 * configuration's median over the repetitions is reported with its ratio to
 * the baseline. With one thread the clock is the thread's CPU time, which a
 * loaded machine disturbs far less than wall time. Public API only.
 *
 *   bench_kvlayout [threads=1] [repetitions=7] [decode|prefill]
 *
 * Every configuration's problem comes from the problem generator (gen/gen.h)
 * with its choices pinned.
 *
 * decode: Lq 1, Lk 4096, Hq 32, Hkv 8, d 128, f32 and f16 K/V: a contiguous
 *   cache ([B,H,L,D], and [B,L,H,D], whose rows are strided like a vLLM
 *   pool's) against paged pools [blocks][block_size][Hkv][d] with shuffled
 *   tables (block sizes 16 and 1), an in-order table (block size 16), and a
 *   head-major pool [blocks][Hkv][16][d] with a shuffled table.
 * prefill: 8 causal sequences of lengths 100..2000 (evenly spaced), Hq 32,
 *   Hkv 8, d 128: packed [T,H,D] with offsets against the padded batch of the
 *   same tokens ([8,H,2000,D] with q_lens/kv_lens).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "bench_util.h"
#include "gen.h"

/* With one thread every task runs on this thread, so its CPU time is the
   cost of a call without the time the scheduler gave to other processes
   (a loaded machine); with more threads, wall time. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) { return bench_seconds(bench_clock); }

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "bench_kvlayout: out of memory\n");
        exit(1);
    }
    return p;
}

/* A configuration: its problem, drawn by the generator with every choice
   pinned or off (gen/gen.h), and materialised with values in [-0.5, 0.5)
   at the sequences' rows only, so every configuration of a target holds
   the same values in its own layout. */
typedef struct config {
    const char *name;
    gen_problem d;
    gen_bufs m;
    double *times;
} config;

static void base_profile(gen_profile *p, int64_t batch, int64_t kv_heads, int64_t group,
                         int64_t q_len, int64_t kv_len, int32_t kv_dtype)
{
    gen_profile_init(p);
    p->work_cap = 0;
    gen_pin(p, GEN_C_BATCH, batch);
    gen_pin(p, GEN_C_KV_HEADS, kv_heads);
    gen_pin(p, GEN_C_GROUP, group);
    gen_pin(p, GEN_C_Q_LEN, q_len);
    gen_pin(p, GEN_C_KV_LEN, kv_len);
    gen_pin(p, GEN_C_HEAD_DIM, 128);
    gen_pin(p, GEN_C_K_DTYPE, kv_dtype);
    gen_pin(p, GEN_C_OPT(flags), ATTN_CAUSAL);
    for (int r = GEN_Q; r <= GEN_V; r++)
        p->val[r].lo = -0.5f, p->val[r].hi = 0.5f;
}

static void make_config(config *c, const char *name, const gen_profile *p)
{
    gen_src fixed = {NULL, NULL};
    c->name = name;
    gen_draw(&c->d, &fixed, p);
    if (gen_materialise(&c->m, &c->d, 1, GEN_M_OUT | GEN_M_POISON, NULL) != 0) {
        fprintf(stderr, "bench_kvlayout: out of memory\n");
        exit(1);
    }
}

static void free_config(config *c)
{
    gen_release(&c->m);
    gen_free(&c->d);
}

static attn_status forward(const config *c, const attn_options *o)
{
    const gen_bufs *m = &c->m;
    return attn_forward(&m->shape, o, &m->t[GEN_Q], &m->t[GEN_K], &m->t[GEN_V], &m->t[GEN_OUT],
                        NULL);
}

/* Runs every config `reps` times, interleaved; each sample is the mean of
   enough calls to last about 0.2 s (the same count for every config).
   Prints medians and ratios to config 0. */
static void run(config *c, int n, int reps, attn_threadpool *pool)
{
    int calls = 1;
    attn_options *opt = xalloc(sizeof *opt * (size_t)n);
    for (int i = 0; i < n; i++) {
        opt[i] = c[i].m.opt;
        opt[i].parallel_for = attn_threadpool_parallel_for;
        opt[i].parallel_ctx = pool;
        c[i].times = xalloc(sizeof(double) * (size_t)reps);
        attn_status st = forward(&c[i], &opt[i]); /* warm-up, and a check */
        if (st != ATTN_OK) {
            fprintf(stderr, "%s: %s\n", c[i].name, attn_strerror(st));
            exit(1);
        }
        if (i == 0) {
            const double t0 = now();
            forward(&c[0], &opt[0]);
            const double once = now() - t0;
            calls = once >= 0.2 ? 1 : (int)(0.2 / (once > 1e-6 ? once : 1e-6));
        }
    }
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            const double t0 = now();
            for (int k = 0; k < calls; k++)
                forward(&c[i], &opt[i]);
            c[i].times[r] = (now() - t0) / calls;
        }
    free(opt);
    double base = 0.0;
    for (int i = 0; i < n; i++) {
        qsort(c[i].times, (size_t)reps, sizeof(double), bench_cmp_double);
        const double med = c[i].times[reps / 2];
        if (i == 0)
            base = med;
        printf("  %-44s %9.3f ms  x%.3f  (min %.3f, max %.3f)\n", c[i].name, med * 1e3,
               med / base, c[i].times[0] * 1e3, c[i].times[reps - 1] * 1e3);
        free(c[i].times);
    }
}

static void decode(int32_t dtype, int reps, attn_threadpool *pool)
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
        make_config(&c[i], cf[i].name, &p);
    }
    printf("decode, K/V %s (Lq 1, Lk 4096, Hq 32, Hkv 8, d 128), median of %d:\n",
           dtype == ATTN_DTYPE_F32 ? "f32" : "f16", reps);
    run(c, N, reps, pool);
    for (int i = 0; i < N; i++)
        free_config(&c[i]);
}

static void prefill(int reps, attn_threadpool *pool)
{
    enum { B = 8 };
    const int64_t lmax = 2000;
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
                              : "padded [8,2000,H,D] with q_lens/kv_lens", &p);
    }
    printf("prefill, 8 causal sequences of 100..2000 tokens (%lld in all), Hq 32, Hkv 8, "
           "d 128, median of %d:\n", (long long)c[1].m.shape.q_len, reps);
    run(c, 2, reps, pool);
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
    free_config(&c[0]);
    free_config(&c[1]);
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    const int reps = argc > 2 ? atoi(argv[2]) : 7;
    attn_threadpool *pool;
    if (threads < 0 || reps < 1 || attn_threadpool_create(threads, &pool) != ATTN_OK) {
        fprintf(stderr, "usage: bench_kvlayout [threads=1] [repetitions=7] [decode|prefill]\n");
        return 2;
    }
    if (attn_threadpool_size(pool) == 1)
        bench_clock = CLOCK_THREAD_CPUTIME_ID;
    printf("libattn %s, ISA %s, %d thread(s), %s\n", attn_version_string(),
           attn_isa_name(attn_isa_active()), attn_threadpool_size(pool),
           attn_threadpool_size(pool) == 1 ? "CPU time of the calling thread" : "wall time");
    const char *only = argc > 3 ? argv[3] : "";
    if (strcmp(only, "prefill")) {
        decode(ATTN_DTYPE_F32, reps, pool);
        decode(ATTN_DTYPE_F16, reps, pool);
    }
    if (strcmp(only, "decode"))
        prefill(reps < 5 ? reps : 5, pool);
    attn_threadpool_destroy(pool);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * attn_split_targets: the split-KV / attn_merge targets of issue 13 as ratios
 * measured in one process, configurations interleaved repetition by
 * repetition, medians compared (so a machine shared with other work slows
 * every configuration alike, as far as it can):
 *
 *   decode-2t   MQA decode (Lq 1, Lk 32768, Hq 8, Hkv 1, d 128, f32 K/V),
 *               automatic split-KV: 1 thread / 2 threads    target >= 1.8
 *   (unsplit)   the same without split-KV (kv_splits 1), for reference:
 *               one task, so about 1.0
 *   split-1t    1 thread: split decode / unsplit decode     target <= 1.05
 *   merge       attn_merge of 8 partials x 4096 rows x d 128 / one read of
 *               the partials (a plain summing loop)          target <= 1.3
 *   decode-Nt   with --threads N (N > 2): Hq 32, Hkv 8, Lk 32768:
 *               1 thread / N threads                        target >= 10 at 16
 *
 * Usage: attn_split_targets [--reps R] [--threads N]   (default 15 reps)
 * Public API only; uses the active ISA (ATTN_ISA picks another).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "bench_util.h"
#include "gen.h"

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static float *filled(size_t n, unsigned seed)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    unsigned s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
    }
    return p;
}

/* A decode problem (the problem generator's, gen/gen.h, every choice pinned
   or off: B = 1, Lq = 1, d = 128, f32 in [-1, 1), causal), its split-KV
   workspace of the size the library asks for, and a way to time one
   attn_forward of it. */
typedef struct decode {
    gen_problem g;
    gen_bufs m;
} decode;

static void decode_init(decode *d, int64_t hq, int64_t hkv, int64_t lk)
{
    gen_profile p;
    gen_profile_init(&p);
    p.work_cap = 0;
    gen_pin(&p, GEN_C_KV_HEADS, hkv);
    gen_pin(&p, GEN_C_GROUP, hq / hkv);
    gen_pin(&p, GEN_C_Q_LEN, 1);
    gen_pin(&p, GEN_C_KV_LEN, lk);
    gen_pin(&p, GEN_C_HEAD_DIM, 128);
    gen_pin(&p, GEN_C_OPT(flags), ATTN_CAUSAL);
    gen_pin(&p, GEN_C_OPT(workspace), 1);
    for (int r = GEN_Q; r <= GEN_V; r++)
        p.val[r].lo = -1.0f, p.val[r].hi = 1.0f;
    gen_src fixed = {NULL, NULL};
    gen_draw(&d->g, &fixed, &p);
    if (gen_materialise(&d->m, &d->g, 1, GEN_M_OUT, NULL) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
}

static void decode_free(decode *d)
{
    gen_release(&d->m);
    gen_free(&d->g);
}

/* Seconds per call over `calls` calls (wall; *cpu: this thread's CPU time). */
static double time_decode_cpu(decode *d, attn_threadpool *pool, int split, int calls,
                              double *cpu)
{
    const gen_bufs *m = &d->m;
    attn_options o = m->opt;
    o.parallel_for = attn_threadpool_parallel_for;
    o.parallel_ctx = pool;
    o.kv_splits = split ? 0 : 1;
    if (!split) {
        o.workspace = NULL;
        o.workspace_size = 0;
    }
    const double t0 = bench_wall(), c0 = bench_cpu();
    for (int i = 0; i < calls; i++)
        if (attn_forward(&m->shape, &o, &m->t[GEN_Q], &m->t[GEN_K], &m->t[GEN_V], &m->t[GEN_OUT],
                         NULL) != ATTN_OK) {
            fprintf(stderr, "attn_forward failed\n");
            exit(2);
        }
    *cpu = (bench_cpu() - c0) / calls;
    return (bench_wall() - t0) / calls;
}

static double time_decode(decode *d, attn_threadpool *pool, int split, int calls)
{
    double cpu;
    return time_decode_cpu(d, pool, split, calls, &cpu);
}

/* One read of n floats (several accumulators: bandwidth-bound); CPU time. */
static double sink;
static double time_read(const float *x, size_t n)
{
    const double t0 = bench_cpu();
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        a0 += x[i], a1 += x[i + 1], a2 += x[i + 2], a3 += x[i + 3];
        a4 += x[i + 4], a5 += x[i + 5], a6 += x[i + 6], a7 += x[i + 7];
    }
    const double t = bench_cpu() - t0;
    sink += a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return t;
}

int main(int argc, char **argv)
{
    int reps = 15, big_threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            big_threads = atoi(argv[i + 1]);
    }
    if (reps < 1)
        reps = 1;
    attn_threadpool *p1, *p2, *pn = NULL;
    if (attn_threadpool_create(1, &p1) != ATTN_OK || attn_threadpool_create(2, &p2) != ATTN_OK ||
        (big_threads > 2 && attn_threadpool_create(big_threads, &pn) != ATTN_OK)) {
        fprintf(stderr, "pool creation failed\n");
        return 2;
    }
    printf("isa %s, %d repetitions, medians\n", attn_isa_name(attn_isa_active()), reps);

    /* ---- decode, MQA */
    decode d;
    decode_init(&d, 8, 1, 32768);
    double *t1s = malloc(sizeof(double) * (size_t)reps), *t2s = malloc(sizeof(double) * (size_t)reps);
    double *t1u = malloc(sizeof(double) * (size_t)reps), *t2u = malloc(sizeof(double) * (size_t)reps);
    double *c1s = malloc(sizeof(double) * (size_t)reps), *c1u = malloc(sizeof(double) * (size_t)reps);
    const int calls = 8;
    time_decode(&d, p2, 1, 2); /* warm-up: pages, caches, pool threads */
    time_decode(&d, p1, 0, 2);
    for (int r = 0; r < reps; r++) {
        t1s[r] = time_decode_cpu(&d, p1, 1, calls, &c1s[r]);
        t2s[r] = time_decode(&d, p2, 1, calls);
        t1u[r] = time_decode_cpu(&d, p1, 0, calls, &c1u[r]);
        t2u[r] = time_decode(&d, p2, 0, calls);
    }
    const double m1s = median(t1s, reps), m2s = median(t2s, reps);
    const double m1u = median(t1u, reps), m2u = median(t2u, reps);
    printf("MQA decode Lk 32768 Hq 8 Hkv 1 d 128 f32 (workspace %zu bytes)\n",
           d.m.opt.workspace_size);
    printf("  split   1 thread %8.3f ms, 2 threads %8.3f ms: speed-up %.2fx (target >= 1.8)\n",
           m1s * 1e3, m2s * 1e3, m1s / m2s);
    printf("  unsplit 1 thread %8.3f ms, 2 threads %8.3f ms: speed-up %.2fx (one task)\n",
           m1u * 1e3, m2u * 1e3, m1u / m2u);
    printf("  1 thread split / unsplit: %.3f wall, %.3f CPU time (target <= 1.05)\n", m1s / m1u,
           median(c1s, reps) / median(c1u, reps));
    decode_free(&d);

    /* ---- merge of 8 partials x 4096 rows x 128 */
    {
        const int64_t n = 8, rows = 4096, D = 128;
        float *parts = filled((size_t)(n * rows * D), 5);
        float *lses = filled((size_t)(n * rows), 6);
        float *out = filled((size_t)(rows * D), 7), *lse = filled((size_t)rows, 8);
        attn_partial pp[8];
        for (int64_t i = 0; i < n; i++) {
            pp[i].out = (attn_tensor){parts + i * rows * D, ATTN_DTYPE_F32, rows * D, rows * D, D};
            pp[i].lse = lses + i * rows;
        }
        const attn_shape s = {1, 1, 1, rows, 1, D, D};
        const attn_tensor to = {out, ATTN_DTYPE_F32, rows * D, rows * D, D};
        attn_options o = ATTN_OPTIONS_INIT; /* one thread */
        double *tm = malloc(sizeof(double) * (size_t)reps), *tr = malloc(sizeof(double) * (size_t)reps);
        attn_merge(&s, &o, pp, n, &to, lse);
        time_read(parts, (size_t)(n * rows * D));
        for (int r = 0; r < reps; r++) {
            double t0 = bench_cpu();
            attn_merge(&s, &o, pp, n, &to, lse);
            tm[r] = bench_cpu() - t0;
            tr[r] = time_read(parts, (size_t)(n * rows * D));
        }
        const double mm = median(tm, reps), mr = median(tr, reps);
        printf("attn_merge 8 partials x 4096 rows x d 128, 1 thread: %.3f ms; one read of the "
               "partials (%.1f MiB): %.3f ms (CPU time): ratio %.2f (target <= 1.3)\n",
               mm * 1e3, (double)(n * rows * D * 4) / 1048576.0, mr * 1e3, mm / mr);
        free(parts), free(lses), free(out), free(lse), free(tm), free(tr);
    }

    /* ---- many threads, GQA decode */
    if (pn) {
        decode_init(&d, 32, 8, 32768);
        time_decode(&d, pn, 1, 2);
        for (int r = 0; r < reps; r++) {
            t1s[r] = time_decode(&d, p1, 1, 4);
            t2s[r] = time_decode(&d, pn, 1, 4);
        }
        const double a = median(t1s, reps), b = median(t2s, reps);
        printf("GQA decode Lk 32768 Hq 32 Hkv 8: 1 thread %.3f ms, %d threads %.3f ms: "
               "speed-up %.2fx\n", a * 1e3, big_threads, b * 1e3, a / b);
        decode_free(&d);
        attn_threadpool_destroy(pn);
    }
    free(t1s), free(t2s), free(t1u), free(t2u), free(c1s), free(c1u);
    attn_threadpool_destroy(p1);
    attn_threadpool_destroy(p2);
    return sink == 12345.678 ? 1 : 0;
}

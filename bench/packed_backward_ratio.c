/* SPDX-License-Identifier: MIT */
/*
 * The packed backward against the padded one, per visible (query, key)
 * pair, in one process:
 *
 *   <build>/bench/attn_packed_backward_ratio [--reps N] [--threads T]
 *
 * Eight causal sequences of 100..2000 tokens (fixed lengths, H 8, d 128,
 * f32), their gradients computed two ways: packed (q_offsets = kv_offsets =
 * cu_seqlens, [T][H][D] tensors with batch_stride 0, nothing padded) and
 * padded ([8][H][2000][D] with q_lens/kv_lens). Both do the same visible
 * pairs; the padded call also walks the padding's empty row blocks. Prints
 * min and median of N interleaved runs of each (CPU time of the calling
 * thread with --threads 1, wall time otherwise) and packed/padded (target
 * <= 1.05).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "bench_util.h"

enum { NB = 8, H = 8, D = 128, LMAX = 2000 };
static const int32_t lens[NB] = {100, 1900, 350, 2000, 720, 1280, 150, 1000};

static float *filled(size_t n, uint32_t seed)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return x;
}

typedef struct layout {
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, o, dout, dq, dk, dv;
    float *buf[8], *lse;
} layout;

/* packed: one [T][H][D] row space; else [NB][LMAX][H][D] with lengths */
static void make(layout *l, int packed, int32_t *offsets, attn_threadpool *pool)
{
    int64_t total = 0;
    for (int b = 0; b < NB; b++) {
        offsets[b] = packed ? (int32_t)total : 0;
        total += lens[b];
    }
    const int64_t L = packed ? total : LMAX, nb = packed ? 1 : NB;
    const size_t n = (size_t)(nb * L * H * D);
    for (int i = 0; i < 8; i++)
        l->buf[i] = filled(n, (uint32_t)(7 + i));
    l->lse = malloc((size_t)(NB * H * L) * sizeof(float));
    const int64_t bs = packed ? 0 : L * H * D;
    attn_tensor *t[8] = {&l->q, &l->k, &l->v, &l->o, &l->dout, &l->dq, &l->dk, &l->dv};
    for (int i = 0; i < 8; i++)
        *t[i] = (attn_tensor){l->buf[i], ATTN_DTYPE_F32, bs, D, H * D};
    l->shape = (attn_shape){NB, H, H, L, L, D, 0};
    l->opt = (attn_options)ATTN_OPTIONS_INIT;
    l->opt.flags = ATTN_CAUSAL;
    l->opt.q_lens = l->opt.kv_lens = lens;
    if (packed)
        l->opt.q_offsets = l->opt.kv_offsets = offsets;
    if (pool) {
        l->opt.parallel_for = attn_threadpool_parallel_for;
        l->opt.parallel_ctx = pool;
    }
    const attn_row_stats st = {l->lse, NULL, NULL};
    bench_ok(attn_forward(&l->shape, &l->opt, &l->q, &l->k, &l->v, &l->o, &st), "forward");
}

static double run(const layout *l, int threads)
{
    attn_grads g = ATTN_GRADS_INIT;
    g.dq = &l->dq;
    g.dk = &l->dk;
    g.dv = &l->dv;
    const double c0 = bench_cpu(), w0 = bench_wall();
    bench_ok(attn_backward(&l->shape, &l->opt, &l->q, &l->k, &l->v, &l->o, &l->dout, l->lse, &g),
             "backward");
    return threads == 1 ? bench_cpu() - c0 : bench_wall() - w0;
}

int main(int argc, char **argv)
{
    int reps = 5, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
    }
    if (reps < 1 || reps > 100 || threads < 1) {
        fprintf(stderr, "usage: %s [--reps N] [--threads T]\n", argv[0]);
        return 2;
    }
    attn_threadpool *pool = NULL;
    if (threads > 1)
        bench_ok(attn_threadpool_create(threads, &pool), "threadpool");
    int32_t off_packed[NB], off_padded[NB];
    layout packed, padded;
    make(&packed, 1, off_packed, pool);
    make(&padded, 0, off_padded, pool);
    double pairs = 0.0;
    for (int b = 0; b < NB; b++)
        pairs += (double)H * lens[b] * (lens[b] + 1) / 2.0;
    double tp[100], td[100];
    run(&packed, threads), run(&padded, threads); /* warm */
    for (int r = 0; r < reps; r++) {
        tp[r] = run(&packed, threads);
        td[r] = run(&padded, threads);
    }
    qsort(tp, (size_t)reps, sizeof tp[0], bench_cmp_double);
    qsort(td, (size_t)reps, sizeof td[0], bench_cmp_double);
    printf("packed backward vs padded: %d causal sequences of 100..2000, H %d, d %d, f32, "
           "%d thread(s), %s time, libattn %s (%s)\n",
           NB, H, D, threads, threads == 1 ? "CPU" : "wall", attn_version_string(),
           attn_isa_name(attn_isa_active()));
    printf("  packed  min %8.2f ms  median %8.2f ms  (%.2f ns per visible pair, min)\n",
           tp[0] * 1e3, tp[reps / 2] * 1e3, tp[0] / pairs * 1e9);
    printf("  padded  min %8.2f ms  median %8.2f ms  (%.2f ns per visible pair, min)\n",
           td[0] * 1e3, td[reps / 2] * 1e3, td[0] / pairs * 1e9);
    printf("  packed / padded: min %.3f, median %.3f (target <= 1.05)\n", tp[0] / td[0],
           tp[reps / 2] / td[reps / 2]);
    attn_threadpool_destroy(pool);
    return 0;
}

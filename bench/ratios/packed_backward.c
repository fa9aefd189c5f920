/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios packed_backward: the packed backward against the padded one,
 * per visible (query, key) pair, in one process:
 *
 *   attn_ratios packed_backward [--reps N] [--threads T]   (default 5, 1)
 *
 * Eight causal sequences of 100..2000 tokens (fixed lengths, H 8, d 128,
 * f32), their gradients computed two ways: packed (q_offsets = kv_offsets =
 * cu_seqlens, [T][H][D] tensors with batch_stride 0, nothing padded) and
 * padded ([8][2000][H][D] with q_lens/kv_lens). Both do the same visible
 * pairs; the padded call also walks the padding's empty row blocks. Prints
 * min and median of N interleaved runs of each (CPU time of the calling
 * thread with --threads 1, wall time otherwise) and packed/padded (target
 * <= 1.05).
 *
 * Laid out here, not drawn by the problem generator: its lengths are these
 * eight, in this order, and it draws a sequence's length itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

enum { NB = 8, H = 8, D = 128, LMAX = 2000 };
static const int32_t lens[NB] = {100, 1900, 350, 2000, 720, 1280, 150, 1000};

typedef struct layout {
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, o, dout, dq, dk, dv;
    float *buf[8], *lse;
    int32_t offsets[NB];
} layout;

/* packed: one [T][H][D] row space; else [NB][LMAX][H][D] with lengths */
static void make(layout *l, int packed, attn_threadpool *pool)
{
    int64_t total = 0;
    for (int b = 0; b < NB; b++) {
        l->offsets[b] = packed ? (int32_t)total : 0;
        total += lens[b];
    }
    const int64_t L = packed ? total : LMAX, nb = packed ? 1 : NB;
    const size_t n = (size_t)(nb * L * H * D);
    uint64_t stream = 7;
    for (int i = 0; i < 8; i++)
        l->buf[i] = ratio_filled(n, -0.5f, 0.5f, &stream);
    l->lse = ratio_alloc((size_t)(NB * H * L) * sizeof(float));
    const int64_t bs = packed ? 0 : L * H * D;
    attn_tensor *t[8] = {&l->q, &l->k, &l->v, &l->o, &l->dout, &l->dq, &l->dk, &l->dv};
    for (int i = 0; i < 8; i++)
        *t[i] = (attn_tensor){l->buf[i], ATTN_DTYPE_F32, bs, D, H * D};
    l->shape = (attn_shape){NB, H, H, L, L, D, 0};
    l->opt = (attn_options)ATTN_OPTIONS_INIT;
    l->opt.flags = ATTN_CAUSAL;
    l->opt.q_lens = l->opt.kv_lens = lens;
    if (packed)
        l->opt.q_offsets = l->opt.kv_offsets = l->offsets;
    ratio_use_pool(&l->opt, pool);
    const attn_row_stats st = {l->lse, NULL, NULL};
    ratio_ok(attn_forward(&l->shape, &l->opt, &l->q, &l->k, &l->v, &l->o, &st), "forward");
}

static void backward(void *ctx, int v, int rep, int call)
{
    (void)rep, (void)call;
    const layout *l = (const layout *)ctx + v;
    attn_grads g = ATTN_GRADS_INIT;
    g.dq = &l->dq;
    g.dk = &l->dk;
    g.dv = &l->dv;
    ratio_ok(attn_backward(&l->shape, &l->opt, &l->q, &l->k, &l->v, &l->o, &l->dout, l->lse, &g),
             "backward");
}

static int packed_backward_run(const ratio_args *a)
{
    const int reps = a->reps, threads = a->threads;
    if (threads < 1) {
        fprintf(stderr, "attn_ratios packed_backward: --threads N >= 1\n");
        return 2;
    }
    attn_threadpool *pool = ratio_pool(threads);
    layout l[2]; /* packed, padded */
    make(&l[0], 1, pool);
    make(&l[1], 0, pool);
    double pairs = 0.0;
    for (int b = 0; b < NB; b++)
        pairs += (double)H * lens[b] * (lens[b] + 1) / 2.0;
    const ratio_loop lp = {.variants = 2, .reps = reps, .warmup = 1, .order = RATIO_IN_TURN,
                           .only = -1, .call = backward, .ctx = l};
    ratio_stat s[2];
    ratio_measure(&lp, threads == 1 ? NULL : s, threads == 1 ? s : NULL);
    const ratio_stat tp = s[0], td = s[1];
    printf("packed backward vs padded: %d causal sequences of 100..2000, H %d, d %d, f32, "
           "%d thread(s), %s time, libattn %s (%s)\n",
           NB, H, D, threads, threads == 1 ? "CPU" : "wall", attn_version_string(),
           attn_isa_name(attn_isa_active()));
    for (int i = 0; i < 2; i++)
        printf("  %s  min %8.2f ms  median %8.2f ms  (%.2f ns per visible pair, min)\n",
               i ? "padded" : "packed", s[i].min * 1e3, s[i].median * 1e3, s[i].min / pairs * 1e9);
    printf("  packed / padded: min %.3f, median %.3f (target <= 1.05)\n", tp.min / td.min,
           tp.median / td.median);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 8; j++)
            free(l[i].buf[j]);
        free(l[i].lse);
    }
    attn_threadpool_destroy(pool);
    return 0;
}

RATIO_FAMILY(packed_backward, 5, 1, "threads (1: CPU time of this thread, else wall time)",
             "the packed backward of 8 causal sequences against the padded one, per pair",
             RATIO_NO_OPTIONS);

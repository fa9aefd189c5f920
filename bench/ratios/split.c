/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios split: the split-KV and attn_merge targets as ratios,
 * configurations interleaved repetition by repetition, medians compared
 * (so a machine shared with other work slows every configuration alike, as
 * far as it can):
 *
 *   decode-2t   MQA decode (Lq 1, Lk 32768, Hq 8, Hkv 1, d 128, f32 K/V),
 *               automatic split-KV: 1 thread / 2 threads    target >= 1.8
 *   (unsplit)   the same without split-KV (kv_splits 1), for reference:
 *               one task, so about 1.0
 *   split-1t    1 thread: split decode / unsplit decode     target <= 1.05
 *   merge       attn_merge of 8 partials x 4096 rows x d 128 / one read of
 *               the partials (a plain read)                  target <= 1.3
 *   decode-Nt   with --threads N (N > 2): Hq 32, Hkv 8, Lk 32768:
 *               1 thread / N threads                        target >= 10 at 16
 *
 *   attn_ratios split [--reps N] [--threads N]   (default 15 repetitions)
 */
#include <stdio.h>
#include <stdlib.h>

#include "ratio_driver.h"

/* A decode problem from the generator, every choice pinned or off: B = 1,
   Lq = 1, d = 128, f32 in [-1, 1), causal, with a split-KV workspace of the
   size the library asks for; and the options of each timed way to call
   it. */
typedef struct decode {
    gen_problem g;
    gen_bufs m;
    attn_options opt[4];
} decode;

static void decode_init(decode *d, int64_t hq, int64_t hkv, int64_t lk)
{
    gen_profile p;
    ratio_profile_dims(&p, -1.0f, 1.0f,
                       (ratio_dims){.kv_heads = hkv, .group = hq / hkv, .q_len = 1, .kv_len = lk,
                                    .head_dim = 128});
    gen_pin(&p, GEN_C_OPT(flags), ATTN_CAUSAL);
    gen_pin(&p, GEN_C_OPT(workspace), 1);
    ratio_problem(&d->g, &d->m, &p, 0, 1, GEN_M_OUT);
}

/* Way v of calling d: on `pool`, split (kv_splits 0: automatic) or not
   (kv_splits 1, no workspace). */
static void decode_way(decode *d, int v, attn_threadpool *pool, int split)
{
    attn_options *o = &d->opt[v];
    *o = d->m.opt;
    ratio_use_pool(o, pool);
    o->kv_splits = split ? 0 : 1;
    if (!split) {
        o->workspace = NULL;
        o->workspace_size = 0;
    }
}

static void decode_call(void *ctx, int v, int rep, int call)
{
    (void)rep, (void)call;
    const decode *d = ctx;
    ratio_forward(&d->m, &d->opt[v], "attn_forward");
}

/* attn_merge of 8 partials (variant 0), or one read of their bytes (1) */
typedef struct merge {
    attn_shape s;
    attn_partial pp[8];
    attn_tensor out;
    float *lse, *parts;
    size_t bytes;
} merge;

static void merge_call(void *ctx, int v, int rep, int call)
{
    (void)rep, (void)call;
    merge *g = ctx;
    const attn_options o = ATTN_OPTIONS_INIT; /* one thread */
    if (v == 0)
        ratio_ok(attn_merge(&g->s, &o, g->pp, 8, &g->out, g->lse), "attn_merge");
    else
        ratio_read(g->parts, g->bytes);
}

/* n values in [-1, 1), of a stream of their own */
static float *filled(size_t n, uint64_t stream) { return ratio_filled(n, -1.0f, 1.0f, &stream); }

static int split_run(const ratio_args *a)
{
    const int reps = a->reps, big_threads = a->threads;
    attn_threadpool *p2 = ratio_pool(2), *pn = big_threads > 2 ? ratio_pool(big_threads) : NULL;
    printf("isa %s, %d repetitions, medians\n", attn_isa_name(attn_isa_active()), reps);

    /* ---- decode, MQA: split and unsplit, on 1 and 2 threads */
    decode d;
    decode_init(&d, 8, 1, 32768);
    enum { SPLIT_1, SPLIT_2, UNSPLIT_1, UNSPLIT_2 };
    decode_way(&d, SPLIT_1, NULL, 1);
    decode_way(&d, SPLIT_2, p2, 1);
    decode_way(&d, UNSPLIT_1, NULL, 0);
    decode_way(&d, UNSPLIT_2, p2, 0);
    ratio_loop l = {.variants = 4, .reps = reps, .warmup = 1, .order = RATIO_IN_TURN,
                    .each = ratio_calls(a, 8), .only = -1, .call = decode_call, .ctx = &d};
    ratio_stat w[4], c[4];
    ratio_measure(&l, w, c);
    printf("MQA decode Lk 32768 Hq 8 Hkv 1 d 128 f32 (workspace %zu bytes)\n",
           d.m.opt.workspace_size);
    printf("  split   1 thread %8.3f ms, 2 threads %8.3f ms: speed-up %.2fx (target >= 1.8)\n",
           w[SPLIT_1].median * 1e3, w[SPLIT_2].median * 1e3, w[SPLIT_1].median / w[SPLIT_2].median);
    printf("  unsplit 1 thread %8.3f ms, 2 threads %8.3f ms: speed-up %.2fx (one task)\n",
           w[UNSPLIT_1].median * 1e3, w[UNSPLIT_2].median * 1e3,
           w[UNSPLIT_1].median / w[UNSPLIT_2].median);
    printf("  1 thread split / unsplit: %.3f wall, %.3f CPU time (target <= 1.05)\n",
           w[SPLIT_1].median / w[UNSPLIT_1].median, c[SPLIT_1].median / c[UNSPLIT_1].median);
    ratio_problem_free(&d.g, &d.m);

    /* ---- merge of 8 partials x 4096 rows x 128, against one read of them */
    {
        const int64_t n = 8, rows = 4096, D = 128;
        merge g;
        g.parts = filled((size_t)(n * rows * D), 5);
        g.bytes = (size_t)(n * rows * D) * sizeof(float);
        float *lses = filled((size_t)(n * rows), 6);
        float *out = filled((size_t)(rows * D), 7);
        g.lse = filled((size_t)rows, 8);
        for (int64_t i = 0; i < n; i++) {
            g.pp[i].out = (attn_tensor){g.parts + i * rows * D, ATTN_DTYPE_F32, rows * D, rows * D, D};
            g.pp[i].lse = lses + i * rows;
        }
        g.s = (attn_shape){1, 1, 1, rows, 1, D, D};
        g.out = (attn_tensor){out, ATTN_DTYPE_F32, rows * D, rows * D, D};
        ratio_loop lm = {.variants = 2, .reps = reps, .warmup = 1, .order = RATIO_IN_TURN,
                         .only = -1, .call = merge_call, .ctx = &g};
        ratio_measure(&lm, NULL, c);
        const double mm = c[0].median, mr = c[1].median;
        printf("attn_merge 8 partials x 4096 rows x d 128, 1 thread: %.3f ms; one read of the "
               "partials (%.1f MiB): %.3f ms (CPU time): ratio %.2f (target <= 1.3)\n",
               mm * 1e3, (double)g.bytes / 1048576.0, mr * 1e3, mm / mr);
        free(g.parts), free(lses), free(out), free(g.lse);
    }

    /* ---- many threads, GQA decode */
    if (pn) {
        decode_init(&d, 32, 8, 32768);
        decode_way(&d, 0, NULL, 1);
        decode_way(&d, 1, pn, 1);
        l.variants = 2;
        l.each = ratio_calls(a, 4);
        ratio_measure(&l, w, NULL);
        const double t1 = w[0].median, tn = w[1].median;
        printf("GQA decode Lk 32768 Hq 32 Hkv 8: 1 thread %.3f ms, %d threads %.3f ms: "
               "speed-up %.2fx\n", t1 * 1e3, big_threads, tn * 1e3, t1 / tn);
        ratio_problem_free(&d.g, &d.m);
        attn_threadpool_destroy(pn);
    }
    attn_threadpool_destroy(p2);
    return 0;
}

RATIO_FAMILY(split, 15, 0, "N > 2: also GQA decode on N threads against 1",
             "split-KV decode on 1 and 2 threads, attn_merge against a read of its partials",
             RATIO_NO_OPTIONS);

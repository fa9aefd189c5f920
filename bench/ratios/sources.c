/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios sources: attention over two K/V caches in one call (attn.h,
 * attn_forward_sources) as times measured in one process, variants
 * interleaved per repetition, one thread. DeepSeek V4-shaped decode: MLA
 * (Hq 16, one latent KV head, d 576, v 512, BF16 K whose first 512 columns
 * are V), Lq 1 or 4 (MTP), each query row seeing the window of the 128
 * latest keys of its sliding-window cache and 2048 rows its indexer
 * selected from a 32768-row compressed cache.
 *   one    attn_forward_sources: the window as the first source (kv_len
 *          128), the selected rows as the second;
 *   two    the path without it, at its best: attn_forward over the window
 *          and attn_forward over the selected rows (top-k lists), each with
 *          its lse, then attn_merge of the two parts;
 *   read   a plain read of as many bytes as the rows the call reads (the
 *          window's and the union of the selections'), the read floor.
 * And the products' floor: 2 (d + dv) FLOP per row and key it multiplies
 * (every row of a block with the union of the block's selections) at the
 * f32 FMA peak measured in the process (the bf16 dot units' is twice it on
 * AVX-512 BF16).
 * The caches are rotated through copies past the LLC, so every call reads
 * them from memory. Median and minimum over the repetitions.
 *
 *   attn_ratios sources [--reps N] [--lq N]   (defaults 9, 1)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

enum { COPIES = 6 }; /* of the compressed cache: 226 MiB of BF16, past the LLC */
enum { D = 576, DV = 512, LC = 32768, TOPK = 2048, HQ = 16, WIN = 128 };
enum { V_ONE, V_TWO, V_READ, VARIANTS };

typedef struct sources {
    int64_t lq;
    float *q, *out, *part[2], *lse[2], *lse_out;
    uint16_t *comp[COPIES], *win[COPIES];
    int32_t *idx;
    unsigned char *flat[COPIES]; /* the read floor's bytes */
    size_t read_bytes;
} sources;

static attn_tensor latent(const uint16_t *x, int64_t rows)
{
    return (attn_tensor){(void *)x, ATTN_DTYPE_BF16, rows * D, D, D};
}

static void call(void *ctx, int v, int rep, int c)
{
    sources *s = ctx;
    const int copy = (c + (rep < 0 ? 0 : rep)) % COPIES;
    const int64_t lq = s->lq;
    const attn_shape win = {1, HQ, 1, lq, WIN, D, DV};
    const attn_shape comp = {1, HQ, 1, lq, LC, D, DV};
    const attn_tensor q = {s->q, ATTN_DTYPE_F32, HQ * lq * D, lq * D, D};
    const attn_tensor kw = latent(s->win[copy], WIN), kc = latent(s->comp[copy], LC);
    attn_tensor out = {s->out, ATTN_DTYPE_F32, HQ * lq * DV, lq * DV, DV};
    attn_options o = ATTN_OPTIONS_INIT;
    o.flags = ATTN_CAUSAL;
    if (v == V_ONE) {
        const attn_kv_source x = {sizeof x, 0, LC, &kc, &kc, NULL, s->idx, TOPK,
                                  NULL, NULL, 0, 0, NULL, 0};
        ratio_ok(attn_forward_sources(&win, &o, &q, &kw, &kw, &x, &out, NULL), "one call");
    } else if (v == V_TWO) {
        attn_tensor p0 = out, p1 = out;
        p0.data = s->part[0], p1.data = s->part[1];
        const attn_row_stats st0 = {s->lse[0], NULL, NULL}, st1 = {s->lse[1], NULL, NULL};
        ratio_ok(attn_forward(&win, &o, &q, &kw, &kw, &p0, &st0), "window");
        attn_options ot = ATTN_OPTIONS_INIT;
        ot.topk_indices = s->idx;
        ot.topk = TOPK;
        ratio_ok(attn_forward(&comp, &ot, &q, &kc, &kc, &p1, &st1), "selected rows");
        const attn_partial parts[2] = {{p0, s->lse[0]}, {p1, s->lse[1]}};
        ratio_ok(attn_merge(&win, NULL, parts, 2, &out, s->lse_out), "merge");
    } else {
        ratio_read(s->flat[copy], s->read_bytes);
    }
}

static int sources_run(const ratio_args *a)
{
    sources s;
    memset(&s, 0, sizeof s);
    s.lq = ratio_opt_int(a, 0, 1);
    if (s.lq < 1 || s.lq > 64) {
        fprintf(stderr, "attn_ratios sources: --lq 1..64\n");
        return 2;
    }
    uint64_t st = 88172645463325252ull;
    const int64_t lq = s.lq;
    s.q = ratio_filled((size_t)(HQ * lq * D), -1.0f, 1.0f, &st);
    s.out = ratio_alloc((size_t)(HQ * lq * DV) * 4);
    for (int p = 0; p < 2; p++) {
        s.part[p] = ratio_alloc((size_t)(HQ * lq * DV) * 4);
        s.lse[p] = ratio_alloc((size_t)(HQ * lq) * 4);
    }
    s.lse_out = ratio_alloc((size_t)(HQ * lq) * 4);
    uint16_t *comp = ratio_alloc((size_t)LC * D * 2), *win = ratio_alloc((size_t)WIN * D * 2);
    ratio_fill(comp, ATTN_DTYPE_BF16, (int64_t)LC * D, -1.0f, 1.0f, &st);
    ratio_fill(win, ATTN_DTYPE_BF16, (int64_t)WIN * D, -1.0f, 1.0f, &st);
    ratio_copies((void **)s.comp, comp, (size_t)LC * D * 2, COPIES);
    ratio_copies((void **)s.win, win, (size_t)WIN * D * 2, COPIES);
    /* each row's 2048 distinct selections; MTP rows keep 4 in 5 of the
       row before's (an indexer's lists of neighbouring tokens overlap) */
    s.idx = ratio_alloc((size_t)(lq * TOPK) * 4);
    unsigned char *mark = calloc(LC, 1), *any = calloc(LC, 1);
    for (int64_t i = 0; i < lq; i++) {
        int32_t *l = s.idx + i * TOPK;
        memset(mark, 0, LC);
        int64_t n = 0;
        for (int64_t t = 0; i > 0 && t < TOPK; t++) {
            const int32_t j = l[t - TOPK];
            if (gen_splitmix(&st) % 5 != 0 && !mark[j])
                mark[j] = 1, l[n++] = j;
        }
        while (n < TOPK) {
            const int32_t j = (int32_t)(gen_splitmix(&st) % LC);
            if (!mark[j])
                mark[j] = 1, l[n++] = j;
        }
        for (int64_t t = 0; t < TOPK; t++)
            any[l[t]] = 1;
    }
    int64_t rows = WIN;
    for (int64_t j = 0; j < LC; j++)
        rows += any[j];
    free(mark), free(any);
    s.read_bytes = (size_t)rows * D * 2;
    for (int c = 0; c < COPIES; c++) {
        s.flat[c] = ratio_alloc(s.read_bytes);
        memset(s.flat[c], c + 1, s.read_bytes);
    }

    const int c20 = ratio_calls(a, 20);
    const int calls[VARIANTS] = {c20, c20, c20};
    const ratio_loop l = {.variants = VARIANTS, .reps = a->reps, .order = RATIO_ROTATE,
                          .calls = calls, .only = -1, .call = call, .ctx = &s};
    ratio_stat t[VARIANTS];
    ratio_measure(&l, t, NULL);
    ratio_header("1 thread\n");
    printf("two sources, MLA Hq 16 bf16 576/512, Lq %lld: window 128 + top-k 2048 of 32768 "
           "(%lld rows, %.2f MiB)\n",
           (long long)lq, (long long)rows, (double)s.read_bytes / (1 << 20));
    ratio_print_vs(28, "attn_forward_sources", t[V_ONE], t[V_TWO], "two calls + merge");
    ratio_print_vs(28, "two calls + merge", t[V_TWO], t[V_TWO], "two calls + merge");
    ratio_print_vs(28, "read of its rows", t[V_READ], t[V_TWO], "two calls + merge");
    ratio_print_ratio(28, "one / two calls + merge", "%.2f (median) %.2f (min)   target <= 1.15\n",
                      t[V_ONE].median / t[V_TWO].median, t[V_ONE].min / t[V_TWO].min);
    ratio_print_ratio(28, "one / read of its rows", "%.2f (median) %.2f (min)   target <= 1.3\n",
                      t[V_ONE].median / t[V_READ].median, t[V_ONE].min / t[V_READ].min);
    const double flop = 2.0 * (double)(HQ * lq) * (double)rows * (double)(D + DV);
    const double at_peak = flop / ratio_fma_peak();
    ratio_print_ratio(28, "one / products at FMA peak", "%.2f (median) %.2f (min)   (%.1f GFLOP/s)\n",
                      t[V_ONE].median / at_peak, t[V_ONE].min / at_peak, flop / t[V_ONE].min * 1e-9);

    ratio_copies_free((void **)s.comp, COPIES);
    free(s.comp[0]);
    free(s.win[0]);
    ratio_copies_free((void **)s.win, COPIES);
    for (int c = 0; c < COPIES; c++)
        free(s.flat[c]);
    for (int p = 0; p < 2; p++)
        free(s.part[p]), free(s.lse[p]);
    free(s.q), free(s.out), free(s.lse_out), free(s.idx);
    return 0;
}

RATIO_FAMILY(sources, 9, RATIO_ONE_THREAD, NULL,
             "two K/V caches in one call (DeepSeek V4 decode) vs two calls + merge, vs a read",
             {"--lq", "N", "query rows per sequence (default 1; 4: MTP)"});

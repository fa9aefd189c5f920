/*
 * attn_merge: partial results (out_i, lse_i) of the same query rows over
 * disjoint key sets into the result over their union. One task per block of
 * MERGE_ROWS query rows of one (batch entry, head); each row on its own:
 * the weights exp(lse_i - L) and L in double (libm, the same on every ISA),
 * then out = sum_i w_i out_i with the table's wsum, in part order.
 */
#include <math.h>

#include "driver.h"

#define MERGE_ROWS 64
#define MERGE_CACHE 64 /* parts whose exp a row keeps */

typedef struct merge_ctx {
    const attn_dsp *dsp;
    const attn_merge_problem *mp;
    int64_t blocks; /* per (b, h) */
} merge_ctx;

static void merge_row(const attn_dsp *dsp, const attn_merge_problem *mp, int64_t b, int64_t h,
                      int64_t i)
{
    const size_t at = (size_t)((b * mp->q_heads + h) * mp->q_len + i);
    float *dst = attn_out_row(&mp->out, b, h, i);
    double m = -INFINITY;
    int poisoned = 0;
    for (int64_t p = 0; p < mp->n_parts; p++) {
        const float l = mp->parts[p].lse[at];
        if (isnan(l) || l == INFINITY)
            poisoned = 1; /* never produced by a forward except from NaN/+inf scores */
        else if (l > m)
            m = l;
    }
    if (poisoned || m == -INFINITY) {
        attn_fill(dst, mp->v_dim, poisoned ? NAN : 0.0f);
        if (mp->lse)
            mp->lse[at] = poisoned ? NAN : -INFINITY;
        return;
    }
    /* exp(lse_p - m) once per part (the first MERGE_CACHE kept; later ones,
       rare, are recomputed, identically) */
    double e[MERGE_CACHE], sum = 0.0;
    for (int64_t p = 0; p < mp->n_parts; p++) {
        const float l = mp->parts[p].lse[at];
        const double t = l != -INFINITY ? exp((double)l - m) : 0.0;
        if (p < MERGE_CACHE)
            e[p] = t;
        sum += t;
    }
    /* sum >= 1 (the largest term is exp(0)). The parts that see anything,
       with their weights, go to wsum in groups, in part order. */
    const float *x[ATTN_WSUM_MAX_PARTS];
    float w[ATTN_WSUM_MAX_PARTS];
    size_t k = 0;
    attn_fill(dst, mp->v_dim, 0.0f);
    for (int64_t p = 0; p < mp->n_parts; p++) {
        const float l = mp->parts[p].lse[at];
        if (l == -INFINITY)
            continue; /* nothing visible there: its out row is not read */
        w[k] = (float)((p < MERGE_CACHE ? e[p] : exp((double)l - m)) / sum);
        x[k++] = (const float *)attn_row_ptr(&mp->parts[p].out, b, h, i);
        if (k == ATTN_WSUM_MAX_PARTS) {
            dsp->wsum(dst, x, w, k, (size_t)mp->v_dim);
            k = 0;
        }
    }
    if (k)
        dsp->wsum(dst, x, w, k, (size_t)mp->v_dim);
    if (mp->lse)
        mp->lse[at] = (float)(m + log(sum));
}

static void merge_task(void *vctx, size_t index)
{
    const merge_ctx *ctx = vctx;
    const attn_merge_problem *mp = ctx->mp;
    const int64_t blk = (int64_t)index % ctx->blocks;
    const int64_t bh = (int64_t)index / ctx->blocks;
    const int64_t b = bh / mp->q_heads, h = bh % mp->q_heads;
    const int64_t i0 = blk * MERGE_ROWS, i1 = attn_min64(i0 + MERGE_ROWS, mp->q_len);
    for (int64_t i = i0; i < i1; i++)
        merge_row(ctx->dsp, mp, b, h, i);
}

void attn_run_merge(const attn_dsp *dsp, const attn_merge_problem *mp)
{
    merge_ctx ctx = {dsp, mp, (mp->q_len + MERGE_ROWS - 1) / MERGE_ROWS};
    const size_t count = (size_t)(mp->batch * mp->q_heads * ctx.blocks);
    if (mp->parallel_for) {
        mp->parallel_for(mp->parallel_ctx, merge_task, &ctx, count);
    } else {
        for (size_t i = 0; i < count; i++)
            merge_task(&ctx, i);
    }
}

/* SPDX-License-Identifier: MIT */
/*
 * attn_merge: partial results (out_i, lse_i) of the same query rows over
 * disjoint key sets into the result over their union. One task per block of
 * MERGE_ROWS query rows of one (batch entry, head); each row on its own:
 * the weights exp(lse_i - L) and L in double (libm, the same on every ISA),
 * then out = sum_i w_i out_i with the table's wsum, in part order, into an
 * f32 row that is then stored (rounded once when out is F16 or BF16).
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "driver.h"
#include "validate.h"

#define MERGE_ROWS 64
#define MERGE_CACHE 64 /* parts whose exp a row keeps */

/* A validated attn_merge: n partial tensors and lse arrays into out. */
typedef struct merge_problem {
    int64_t batch, q_heads, q_len, v_dim, n_parts;
    const attn_partial *parts;
    attn_tensor out;
    float *lse; /* may be NULL */
    attn_parallel_for_fn parallel_for;
    void *parallel_ctx;
} merge_problem;

typedef struct merge_ctx {
    const attn_dsp *dsp;
    const merge_problem *mp;
    int64_t blocks; /* per (b, h) */
    size_t tasks;
} merge_ctx;

/* One row into out; acc: v_dim floats of scratch. */
static void merge_row(const attn_dsp *dsp, const merge_problem *mp, int64_t b, int64_t h,
                      int64_t i, float *acc)
{
    const size_t at = (size_t)((b * mp->q_heads + h) * mp->q_len + i);
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
        attn_fill_out_row(&mp->out, b, h, i, poisoned ? NAN : 0.0f, mp->v_dim);
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
    attn_fill(acc, mp->v_dim, 0.0f);
    for (int64_t p = 0; p < mp->n_parts; p++) {
        const float l = mp->parts[p].lse[at];
        if (l == -INFINITY)
            continue; /* nothing visible there: its out row is not read */
        w[k] = (float)((p < MERGE_CACHE ? e[p] : exp((double)l - m)) / sum);
        x[k++] = (const float *)attn_row_ptr(&mp->parts[p].out, b, h, i);
        if (k == ATTN_WSUM_MAX_PARTS) {
            dsp->wsum(acc, x, w, k, (size_t)mp->v_dim);
            k = 0;
        }
    }
    if (k)
        dsp->wsum(acc, x, w, k, (size_t)mp->v_dim);
    attn_store_out_row(&mp->out, b, h, i, acc, mp->v_dim);
    if (mp->lse)
        mp->lse[at] = (float)(m + log(sum));
}

static void merge_task(void *vctx, size_t index)
{
    const merge_ctx *ctx = vctx;
    const merge_problem *mp = ctx->mp;
    const int64_t blk = (int64_t)index % ctx->blocks;
    const int64_t bh = (int64_t)index / ctx->blocks;
    const int64_t b = bh / mp->q_heads, h = bh % mp->q_heads;
    const int64_t i0 = blk * MERGE_ROWS, i1 = attn_min64(i0 + MERGE_ROWS, mp->q_len);
    /* the f32 row wsum accumulates (16 KiB at v_dim = ATTN_MAX_HEAD_DIM) */
    _Alignas(64) float acc[ATTN_MAX_HEAD_DIM];
    for (int64_t i = i0; i < i1; i++)
        merge_row(ctx->dsp, mp, b, h, i, acc);
}

/* The plan: blocks of MERGE_ROWS rows of each (batch entry, head), a task each. */
static merge_ctx plan_merge(const attn_dsp *dsp, const merge_problem *mp)
{
    merge_ctx ctx = {dsp, mp, (mp->q_len + MERGE_ROWS - 1) / MERGE_ROWS, 0};
    ctx.tasks = (size_t)(mp->batch * mp->q_heads * ctx.blocks);
    return ctx;
}

/* ------------------------------------------------------------ entry points */

static attn_status validate_merge(merge_problem *mp, const attn_shape *shape,
                                  const attn_options *opt, const attn_partial *parts,
                                  int64_t n_parts, const attn_tensor *out, float *lse)
{
    /* pointers */
    if (!shape || !out || !out->data || (n_parts > 0 && !parts))
        return ATTN_ERR_NULL;
    for (int64_t i = 0; i < n_parts; i++)
        if (!parts[i].out.data || !parts[i].lse)
            return ATTN_ERR_NULL;

    /* options (only the pool is used, but flags are checked as everywhere:
       bits no version defines are a mistake), shape */
    attn_options o;
    ATTN_TRY(attn_read_options(&o, opt));
    if (n_parts <= 0)
        return ATTN_ERR_SHAPE;
    ATTN_TRY(attn_check_shape(shape));
    const attn_shape s = *shape;
    const int64_t v_dim = s.v_dim ? s.v_dim : s.head_dim;
    if (o.flags & ~ATTN_OPT_FLAGS_ALL)
        return ATTN_ERR_ARG;
    /* out: F32, or rounded into F16/BF16; the parts: F32 (they are read
       as the f32 rows wsum sums) */
    if (!attn_dtype_is_output(out->dtype, 1))
        return ATTN_ERR_ARG;
    for (int64_t i = 0; i < n_parts; i++)
        if (!attn_dtype_is_output(parts[i].out.dtype, 0))
            return ATTN_ERR_ARG;

    /* tensors; no output byte may meet an input or the other output */
    attn_byte_range ro, rl = {0, 0}, r;
    ATTN_TRY(attn_check_tensor(out, s.batch, s.q_heads, s.q_len, v_dim, 1, &ro));
    const int64_t rows = s.batch * s.q_heads * s.q_len;
    if ((uint64_t)rows > (uint64_t)(PTRDIFF_MAX / (ptrdiff_t)sizeof(float)))
        return ATTN_ERR_SHAPE;
    const uintptr_t lse_bytes = (uintptr_t)rows * sizeof(float);
    if (lse) {
        if ((uintptr_t)lse > UINTPTR_MAX - lse_bytes)
            return ATTN_ERR_SHAPE;
        rl = (attn_byte_range){(uintptr_t)lse, (uintptr_t)lse + lse_bytes};
        if (attn_ranges_meet(ro, rl))
            return ATTN_ERR_STRIDE;
    }
    for (int64_t i = 0; i < n_parts; i++) {
        ATTN_TRY(attn_check_tensor(&parts[i].out, s.batch, s.q_heads, s.q_len, v_dim, 0, &r));
        attn_byte_range rp;
        if ((uintptr_t)parts[i].lse > UINTPTR_MAX - lse_bytes)
            return ATTN_ERR_SHAPE;
        rp = (attn_byte_range){(uintptr_t)parts[i].lse, (uintptr_t)parts[i].lse + lse_bytes};
        if (attn_ranges_meet(ro, r) || attn_ranges_meet(ro, rp))
            return ATTN_ERR_STRIDE;
        if (lse && (attn_ranges_meet(rl, r) || attn_ranges_meet(rl, rp)))
            return ATTN_ERR_STRIDE;
    }

    memset(mp, 0, sizeof *mp);
    mp->batch = s.batch;
    mp->q_heads = s.q_heads;
    mp->q_len = s.q_len;
    mp->v_dim = v_dim;
    mp->n_parts = n_parts;
    mp->parts = parts;
    mp->out = *out;
    mp->lse = lse;
    mp->parallel_for = o.parallel_for;
    mp->parallel_ctx = o.parallel_ctx;
    return ATTN_OK;
}

attn_status attn_merge_with(const attn_dsp *dsp, const attn_shape *shape,
                            const attn_options *opt, const attn_partial *parts,
                            int64_t n_parts, const attn_tensor *out, float *lse)
{
    merge_problem mp;
    attn_status status = validate_merge(&mp, shape, opt, parts, n_parts, out, lse);
    if (status == ATTN_OK) {
        merge_ctx ctx = plan_merge(dsp, &mp);
        attn_run_tasks(mp.parallel_for, mp.parallel_ctx, merge_task, &ctx, ctx.tasks);
    }
    return status;
}

static attn_status checked_merge(const attn_shape *shape, const attn_options *opt,
                                 const attn_partial *parts, int64_t n_parts, const attn_tensor *out,
                                 float *lse)
{
    return attn_merge_with(attn_dsp_active(), shape, opt, parts, n_parts, out, lse);
}

attn_status attn_merge(const attn_shape *shape, const attn_options *opt,
                       const attn_partial *parts, int64_t n_parts, const attn_tensor *out,
                       float *lse)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_merge", mark, checked_merge(shape, opt, parts, n_parts, out, lse));
}

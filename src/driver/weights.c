/* SPDX-License-Identifier: MIT */
/*
 * attn_weights: the softmax of the final scores, and the row statistics.
 * attn_scores' plan and first pass (scores.c) fill the caller's table with
 * q.k; each row then gets the epilogue and the softmax in place, 0 where
 * masked.
 */
#include "internal.h"
#include "driver.h"
#include "validate.h"

static void task_weights(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    row_ref rows[ATTN_SCORES_BLOCK_Q];
    float *out0 = NULL;
    const int64_t n = attn_score_tiles(ctx, index, rows, &out0);
    for (int64_t r = 0; r < n; r++) {
        const row_ref *row = &rows[r];
        float *s = out0 + r * pb->out.row_stride;
        const int64_t lo = row->lo, hi = row->hi;
        attn_score_epilogue(dsp, pb, row, s + lo, lo, hi - lo);
        float lse, max_score, entropy;
        attn_softmax_segment(dsp, s + lo, hi - lo, attn_row_sink(pb, row), &lse, &max_score,
                             &entropy, pb->stats.entropy != NULL);
        attn_write_stats(pb, row, lse, max_score, entropy);
        attn_fill(s + row->col_lo, lo - row->col_lo, 0.0f);
        attn_fill(s + hi, row->col_hi - hi, 0.0f);
    }
}

static const attn_op weights_op = {
    .reads_qk = 1,
    .out_cols = ATTN_OUT_KV_LEN,
    .writes_stats = 1,
    .plan = attn_plan_scores,
    .task = task_weights,
};

attn_status attn_weights_with(const attn_dsp *dsp, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *weights,
                              const attn_row_stats *stats)
{
    attn_problem pb;
    attn_status status = attn_validate(&pb, &weights_op, shape, opt, q, k, NULL, weights, stats);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

static attn_status checked_weights(const attn_shape *shape, const attn_options *opt,
                                   const attn_tensor *q, const attn_tensor *k,
                                   const attn_tensor *weights, const attn_row_stats *stats)
{
    return attn_weights_with(attn_dsp_active(), shape, opt, q, k, weights, stats);
}

attn_status attn_weights(const attn_shape *shape, const attn_options *opt,
                         const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *weights, const attn_row_stats *stats)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_weights", mark, checked_weights(shape, opt, q, k, weights, stats));
}

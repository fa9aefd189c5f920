/* SPDX-License-Identifier: MIT */
/*
 * attn_mask_apply: the score epilogue (softcap, bias, ALiBi, the boolean
 * mask) and the masks' -inf on the caller's table of scores, in place. It
 * reads no q, k or v, so the paging fields do not concern it. One task per
 * block of block_q rows of one head.
 */
#include <math.h>

#include "internal.h"
#include "driver.h"
#include "validate.h"

static task_plan plan_mask_apply(const attn_dsp *dsp, const attn_problem *pb)
{
    task_plan p = attn_plan_common(dsp, pb, 1);
    p.block_rows = dsp->block_q;
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    p.tasks = (size_t)(pb->batch * p.groups * p.blocks);
    return p;
}

static void task_mask_apply(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_problem *pb = ctx->pb;
    row_ref rows[ATTN_MAX_BLOCK_Q];
    int64_t kv_head;
    int64_t n = attn_task_rows(pb, &ctx->plan, index, rows, &kv_head);
    for (int64_t r = 0; r < n; r++) {
        const row_ref *row = &rows[r];
        float *s = attn_out_row(&pb->out, row->b, row->h, row->i);
        attn_score_epilogue(ctx->dsp, pb, row, s + row->lo, row->lo, row->hi - row->lo);
        attn_fill(s + row->col_lo, row->lo - row->col_lo, -INFINITY);
        attn_fill(s + row->hi, row->col_hi - row->hi, -INFINITY);
    }
}

static const attn_op mask_apply_op = {
    .out_cols = ATTN_OUT_KV_LEN,
    .plan = plan_mask_apply,
    .task = task_mask_apply,
};

attn_status attn_mask_apply_with(const attn_dsp *dsp, const attn_shape *shape,
                                 const attn_options *opt, const attn_tensor *scores)
{
    attn_problem pb;
    attn_status status =
        attn_validate(&pb, &mask_apply_op, shape, opt, NULL, NULL, NULL, scores, NULL);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

static attn_status checked_mask_apply(const attn_shape *shape, const attn_options *opt,
                                      const attn_tensor *scores)
{
    return attn_mask_apply_with(attn_dsp_active(), shape, opt, scores);
}

attn_status attn_mask_apply(const attn_shape *shape, const attn_options *opt,
                            const attn_tensor *scores)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_mask_apply", mark, checked_mask_apply(shape, opt, scores));
}

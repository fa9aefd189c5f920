/* SPDX-License-Identifier: MIT */
/*
 * attn_softmax_backward: ds = p * (dp - rowsum(p * dp)) row by row, the
 * softmax_bwd kernel on each row. The plan is trivial: one task on the
 * calling thread (the call takes no options, so no pool) runs the rows in
 * order.
 */
#include "internal.h"
#include "driver.h"
#include "validate.h"

typedef struct softmax_bwd_ctx {
    const attn_dsp *dsp;
    const float *p, *dp;
    float *ds;
    int64_t rows, cols, row_stride;
} softmax_bwd_ctx;

static void task_softmax_backward(void *vctx, size_t index)
{
    const softmax_bwd_ctx *c = vctx;
    (void)index; /* the one task */
    for (int64_t r = 0; r < c->rows; r++)
        c->dsp->softmax_bwd(c->p + r * c->row_stride, c->dp + r * c->row_stride,
                            c->ds + r * c->row_stride, (size_t)c->cols);
}

attn_status attn_softmax_backward_with(const attn_dsp *dsp, const float *p,
                                       const float *dp, float *ds, int64_t rows,
                                       int64_t cols, int64_t row_stride)
{
    if (!p || !dp || !ds)
        return ATTN_ERR_NULL;
    attn_status status = attn_validate_rows(rows, cols, row_stride);
    /* ds may be p or dp exactly (element-wise in place), nothing in between */
    if (status == ATTN_OK &&
        ((ds != p && attn_rows_overlap(ds, rows, cols, row_stride, p, rows, cols, row_stride)) ||
         (ds != dp && attn_rows_overlap(ds, rows, cols, row_stride, dp, rows, cols, row_stride))))
        status = ATTN_ERR_STRIDE;
    if (status == ATTN_OK) {
        softmax_bwd_ctx ctx = {dsp, p, dp, ds, rows, cols, row_stride};
        attn_run_tasks(NULL, NULL, task_softmax_backward, &ctx, 1);
    }
    return status;
}

static attn_status checked_softmax_backward(const float *p, const float *dp, float *ds, int64_t rows,
                                            int64_t cols, int64_t row_stride)
{
    return attn_softmax_backward_with(attn_dsp_active(), p, dp, ds, rows, cols, row_stride);
}

attn_status attn_softmax_backward(const float *p, const float *dp, float *ds, int64_t rows,
                                  int64_t cols, int64_t row_stride)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_softmax_backward", mark, checked_softmax_backward(p, dp, ds, rows, cols, row_stride));
}

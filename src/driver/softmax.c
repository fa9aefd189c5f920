/* SPDX-License-Identifier: MIT */
/*
 * attn_softmax: each of `rows` rows of `cols` floats replaced by its
 * softmax, in place, and its log-sum-exp in lse when given. The plan is
 * trivial: one task on the calling thread (the call takes no options, so
 * no pool) runs the rows in order.
 */
#include <math.h>

#include "internal.h"
#include "driver.h"
#include "validate.h"

typedef struct softmax_ctx {
    const attn_dsp *dsp;
    float *x, *lse;
    int64_t rows, cols, row_stride;
} softmax_ctx;

static void task_softmax(void *vctx, size_t index)
{
    const softmax_ctx *c = vctx;
    (void)index; /* the one task */
    for (int64_t r = 0; r < c->rows; r++) {
        float row_lse, max_score, entropy;
        attn_softmax_segment(c->dsp, c->x + r * c->row_stride, c->cols, -INFINITY, &row_lse,
                             &max_score, &entropy, 0);
        if (c->lse)
            c->lse[r] = row_lse;
    }
}

attn_status attn_softmax_with(const attn_dsp *dsp, float *x, int64_t rows, int64_t cols,
                              int64_t row_stride, float *lse)
{
    if (!x)
        return ATTN_ERR_NULL;
    attn_status status = attn_validate_rows(rows, cols, row_stride);
    if (status == ATTN_OK && lse && attn_rows_overlap(lse, rows, 1, 1, x, rows, cols, row_stride))
        status = ATTN_ERR_STRIDE;
    if (status == ATTN_OK) {
        softmax_ctx ctx = {dsp, x, lse, rows, cols, row_stride};
        attn_run_tasks(NULL, NULL, task_softmax, &ctx, 1);
    }
    return status;
}

static attn_status checked_softmax(float *x, int64_t rows, int64_t cols, int64_t row_stride, float *lse)
{
    return attn_softmax_with(attn_dsp_active(), x, rows, cols, row_stride, lse);
}

attn_status attn_softmax(float *x, int64_t rows, int64_t cols, int64_t row_stride, float *lse)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_softmax", mark, checked_softmax(x, rows, cols, row_stride, lse));
}

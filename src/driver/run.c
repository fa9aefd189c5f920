/*
 * attn_run: maps each operation to its plan and task and runs the tasks,
 * on the caller's parallel_for or in order on this thread. The row
 * operations (softmax and its backward) have no tasks: they run here.
 */
#include "driver.h"

typedef struct op_module {
    task_plan (*plan)(const attn_dsp *dsp, const attn_problem *pb);
    attn_task_fn task;
} op_module;

static op_module module_of(attn_op op)
{
    switch (op) {
    case ATTN_OP_FORWARD: return (op_module){attn_plan_forward, attn_task_forward};
    case ATTN_OP_MASK_APPLY: return (op_module){attn_plan_mask_apply, attn_task_mask_apply};
    case ATTN_OP_SCORES:
    case ATTN_OP_WEIGHTS: break;
    }
    return (op_module){attn_plan_scores, attn_task_scores};
}

void attn_run(const attn_dsp *dsp, const attn_problem *pb)
{
    const op_module m = module_of(pb->op);
    task_ctx ctx = {dsp, pb, m.plan(dsp, pb)};
    size_t count = (size_t)(pb->batch * ctx.plan.groups * ctx.plan.blocks);
    if (pb->parallel_for) {
        pb->parallel_for(pb->parallel_ctx, m.task, &ctx, count);
    } else {
        for (size_t i = 0; i < count; i++)
            m.task(&ctx, i);
    }
}

void attn_run_softmax(const attn_dsp *dsp, float *x, int64_t rows, int64_t cols,
                      int64_t row_stride, float *lse)
{
    for (int64_t r = 0; r < rows; r++) {
        float row_lse, max_score, entropy;
        attn_softmax_segment(dsp, x + r * row_stride, cols, -INFINITY, &row_lse, &max_score,
                             &entropy, 0);
        if (lse)
            lse[r] = row_lse;
    }
}

void attn_run_softmax_backward(const attn_dsp *dsp, const float *p, const float *dp, float *ds,
                               int64_t rows, int64_t cols, int64_t row_stride)
{
    for (int64_t r = 0; r < rows; r++)
        dsp->softmax_bwd(p + r * row_stride, dp + r * row_stride, ds + r * row_stride,
                         (size_t)cols);
}

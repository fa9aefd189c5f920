/*
 * attn_run: runs an operation's tasks, on the caller's parallel_for or in
 * order on this thread. It knows no operation: each one's plan, task and
 * preparation come from ATTN_DRIVER_OPS (driver.h). The row operations
 * (softmax and its backward) have no tasks: they run here.
 */
#include "driver.h"

typedef struct op_module {
    task_plan (*plan)(const attn_dsp *dsp, const attn_problem *pb);
    attn_task_fn task;
    void (*prepare)(const task_ctx *ctx, size_t count);
} op_module;

#define ATTN_X_MODULE(ID, plan_fn, task_fn, prepare_fn) [ATTN_OP_##ID] = {plan_fn, task_fn, prepare_fn},
static const op_module g_modules[] = {ATTN_DRIVER_OPS(ATTN_X_MODULE)};
#undef ATTN_X_MODULE
#define ATTN_X_COUNT(ID, plan_fn, task_fn, prepare_fn) +1
_Static_assert(sizeof g_modules / sizeof g_modules[0] == ATTN_OP_COUNT &&
                   0 ATTN_DRIVER_OPS(ATTN_X_COUNT) == ATTN_OP_COUNT,
               "ATTN_DRIVER_OPS: one line per attn_op");
#undef ATTN_X_COUNT

void attn_run(const attn_dsp *dsp, const attn_problem *pb)
{
    const op_module *m = &g_modules[pb->op];
    task_ctx ctx = {dsp, pb, m->plan(dsp, pb)};
    size_t count = (size_t)(pb->batch * (ctx.plan.groups * ctx.plan.blocks * ctx.plan.splits +
                                         pb->kv_heads * ctx.plan.kv_blocks));
    if (m->prepare)
        m->prepare(&ctx, count);
    if (pb->parallel_for) {
        pb->parallel_for(pb->parallel_ctx, m->task, &ctx, count);
    } else {
        for (size_t i = 0; i < count; i++)
            m->task(&ctx, i);
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

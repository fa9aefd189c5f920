/* SPDX-License-Identifier: MIT */
/*
 * The runner: an operation's tasks on the caller's parallel_for, or in
 * order on this thread. It knows no operation: a problem's plan, task and
 * preparation come from its attn_op (src/problem.h), which the operation's
 * module defines; the operations on other arguments hand over their task
 * and count themselves.
 */
#include "driver.h"

void attn_run_tasks(attn_parallel_for_fn parallel_for, void *parallel_ctx, attn_task_fn task,
                    void *ctx, size_t count)
{
    if (parallel_for) {
        parallel_for(parallel_ctx, task, ctx, count);
    } else {
        for (size_t i = 0; i < count; i++)
            task(ctx, i);
    }
}

void attn_run(const attn_dsp *dsp, const attn_problem *pb)
{
    const task_plan tp = pb->op->plan(dsp, pb);
    attn_run_planned(dsp, pb, &tp);
}

void attn_run_planned(const attn_dsp *dsp, const attn_problem *pb, const task_plan *tp)
{
    const attn_op *op = pb->op;
    task_ctx ctx = {dsp, pb, *tp};
    if (op->prepare)
        op->prepare(&ctx);
    attn_run_tasks(pb->parallel_for, pb->parallel_ctx, op->task, &ctx, ctx.plan.tasks);
}

void attn_run_planned_range(const attn_dsp *dsp, const attn_problem *pb, const task_plan *tp,
                            size_t lo, size_t hi)
{
    task_ctx ctx = {dsp, pb, *tp};
    for (size_t i = lo; i < hi; i++)
        pb->op->task(&ctx, i);
}

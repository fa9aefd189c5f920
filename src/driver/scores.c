/* SPDX-License-Identifier: MIT */
/*
 * attn_scores: the final scores, -inf where masked, one task per block of
 * query rows of one head: the tile kernels write straight into the caller's
 * table. The plan and that first pass are attn_weights' as well
 * (weights.c).
 */
#include <math.h>

#include "internal.h"
#include "kv.h"
#include "validate.h"

/*
 * Query rows per task without a sliding window: up to 128 (as many as the
 * scratch holds, ATTN_SCORES_BLOCK_Q), twice the largest block_q of a
 * table. The tile kernels pack each K panel once per call; more rows per
 * call spread that cost thinner. A window keeps the table's block_q: a
 * block computes the union of its rows' windows, which grows with the rows
 * (tests/ops/test_mods.c).
 */
task_plan attn_plan_scores(const attn_dsp *dsp, const attn_problem *pb)
{
    task_plan p = attn_plan_common(dsp, pb, 1);
    const int windowed = pb->opt.window > 0 || pb->opt.window_right > 0;
    /* FP8 with scale groups: the decoded keys' stage after the queries */
    const int64_t room = ATTN_SCRATCH_FLOATS - attn_plan_stage(pb, &p, p.block_k);
    p.block_rows = windowed ? attn_block_rows_within(dsp, p.q_stride, room)
                            : attn_max64(1, attn_min64(ATTN_SCORES_BLOCK_Q, room / p.q_stride));
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    p.tasks = (size_t)(pb->batch * p.groups * p.blocks);
    return p;
}

int64_t attn_score_tiles(const task_ctx *ctx, size_t index, row_ref *rows, float **out0)
{
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;

    _Alignas(64) float qbuf[ATTN_SCRATCH_FLOATS];
    int64_t kv_head;
    int64_t n = attn_task_rows(pb, p, index, rows, &kv_head);
    if (n == 0)
        return 0;
    const int64_t out_stride = pb->out.row_stride;
    float *const out = attn_out_row(&pb->out, rows[0].b, rows[0].h, rows[0].i);
    const kv_src ks = attn_kv_open(pb, &pb->k, rows[0].b, kv_head, attn_k_cols(pb), pb->k_group);
    /* FP8 scales per key row (attn.h 1.6): qk_scale is then 1; per group
       of channels (1.8), or a tail (1.9): the rows decoded into the stage
       after the queries */
    const int k_rows = pb->k_scales.data && !pb->k_group;
    const kv_src kss =
        attn_kv_open_scales(pb, &pb->k_scales, pb->k_group, attn_k_cols(pb), rows[0].b, kv_head);
    const kv_src kts = attn_kv_open_tail(pb, rows[0].b, kv_head);
    const kv_src *const tail = pb->k_tail_dim ? &kts : NULL;
    float *const stage = qbuf + p->block_rows * p->q_stride;
    float kfac[ATTN_MAX_BLOCK_K];

    attn_qk_tile_fn *const qk = attn_qk_kernel(dsp, pb);
    attn_convert_queries(dsp, pb, p, rows, n, qbuf);
    int64_t ulo, uhi;
    attn_visible_union(rows, n, &ulo, &uhi);
    for (int64_t k0 = ulo < uhi ? ulo / p->block_k * p->block_k : uhi; k0 < uhi;
         k0 += p->block_k) {
        const int64_t kb = attn_max64(k0, ulo), ke = attn_min64(k0 + p->block_k, uhi);
        if (k_rows)
            attn_kv_scales(&kss, kb, ke, 0, pb->scale, kfac);
        for (int64_t r = 0, run_end; (run_end = attn_next_run(rows, n, &r, kb, ke)) > r;
             r = run_end) {
            for (int64_t j = kb, len; j < ke; j += len) {
                ptrdiff_t kstride;
                const void *kp =
                    attn_kv_rows(dsp, &ks, &kss, pb->k_group, tail, stage, p, j, ke, &len, &kstride);
                qk(qbuf + r * p->q_stride, p->q_stride, kp, kstride,
                                          (size_t)(run_end - r), (size_t)len,
                                          (size_t)pb->head_dim, pb->qk_scale,
                                          out + r * out_stride + j, out_stride);
            }
            if (k_rows)
                attn_scale_columns(out + r * out_stride + kb, out_stride, run_end - r, kfac,
                                   ke - kb);
        }
    }
    *out0 = out;
    return n;
}

static void task_scores(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_problem *pb = ctx->pb;
    row_ref rows[ATTN_SCORES_BLOCK_Q];
    float *out0 = NULL;
    const int64_t n = attn_score_tiles(ctx, index, rows, &out0);
    for (int64_t r = 0; r < n; r++) {
        const row_ref *row = &rows[r];
        float *s = out0 + r * pb->out.row_stride;
        const int64_t lo = row->lo, hi = row->hi;
        attn_score_epilogue(ctx->dsp, pb, row, s + lo, lo, hi - lo);
        attn_fill(s + row->col_lo, lo - row->col_lo, -INFINITY);
        attn_fill(s + hi, row->col_hi - hi, -INFINITY);
    }
}

static const attn_op scores_op = {
    .reads_qk = 1,
    .out_cols = ATTN_OUT_KV_LEN,
    .plan = attn_plan_scores,
    .task = task_scores,
};

attn_status attn_scores_with(const attn_dsp *dsp, const attn_shape *shape,
                             const attn_options *opt, const attn_tensor *q,
                             const attn_tensor *k, const attn_tensor *scores)
{
    attn_problem pb;
    attn_status status = attn_validate(&pb, &scores_op, shape, opt, q, k, NULL, scores, NULL);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

static attn_status checked_scores(const attn_shape *shape, const attn_options *opt,
                                  const attn_tensor *q, const attn_tensor *k, const attn_tensor *scores)
{
    return attn_scores_with(attn_dsp_active(), shape, opt, q, k, scores);
}

attn_status attn_scores(const attn_shape *shape, const attn_options *opt,
                        const attn_tensor *q, const attn_tensor *k, const attn_tensor *scores)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_scores", mark, checked_scores(shape, opt, q, k, scores));
}

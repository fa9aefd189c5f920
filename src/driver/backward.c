/*
 * The attention backward, flash-style and deterministic without atomics:
 * P is recomputed from Q, K and the forward's lse in tiles and never stored,
 * and every gradient element has exactly one owner task, which accumulates
 * it in a fixed order:
 *   - query tasks (index < batch * groups * blocks), cut like the forward's
 *     (a block of rows of a GQA group, heads stacked position-major), own
 *     dq and dbias of their rows;
 *   - key tasks (the rest), one per block of block_k keys of one
 *     (batch entry, KV head), own dk and dv of those keys and sum over every
 *     query row of the group (all its heads), in row order.
 * Both kinds recompute S, P = exp(S - lse), dP = dO.V^T and dS, so the
 * backward costs 7 tile products to the forward's 2 (FlashAttention-2 does 5
 * by adding dq with atomics, which would make the sums' order depend on the
 * scheduling). D_i = rowsum(dO_i * O_i) is computed by each task for its
 * rows before their first tile: one dot product of v_dim per row and key
 * block, which needs no workspace.
 *
 * Which keys a row sees comes from the same row geometry as the forward
 * (make_row via attn_task_rows) and where keys live from kv.h only, so an
 * option that reshapes the rows or the cache (sinks, ALiBi, pages) changes
 * the backward where it changes the forward: in the epilogue and in kv.h.
 */
#include <math.h>
#include <string.h>

#include "kv.h"

task_plan attn_plan_backward(const attn_dsp *dsp, const attn_problem *pb)
{
    task_plan p = attn_plan_common(dsp, pb, pb->group);
    /* per row: q, dO, the dq accumulator, and three score tiles (S then P,
       dP then dS, the capped scores for the softcap's derivative); at
       ATTN_MAX_HEAD_DIM the three vectors take 12288 of the 16384 floats,
       so a 256-key tile still fits one row */
    p.block_rows = attn_block_rows_for(dsp, 2 * p.q_stride + p.acc_stride + 3 * p.block_k);
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    p.kv_blocks = (pb->kv_len + p.block_k - 1) / p.block_k;
    return p;
}

/* What a task knows about one of its rows beyond its geometry. */
typedef struct row_grad {
    float lse;  /* the forward's */
    float dsum; /* D = rowsum(dO * O) */
} row_grad;

typedef struct bwd_scratch {
    float *q, *dout, *acc, *s, *dp, *capped;
} bwd_scratch;

static bwd_scratch carve(const task_plan *p, float *scratch)
{
    bwd_scratch b;
    b.q = scratch;
    b.dout = b.q + p->block_rows * p->q_stride;
    b.acc = b.dout + p->block_rows * p->acc_stride;
    b.s = b.acc + p->block_rows * p->q_stride;
    b.dp = b.s + p->block_rows * p->block_k;
    b.capped = b.dp + p->block_rows * p->block_k;
    return b;
}

/*
 * The rows of block `index` (attn_task_rows), then what the backward needs
 * of them: a row whose lse is -inf saw no key in the forward and contributes
 * nothing (it becomes empty here); q and dO converted, D and lse read.
 */
static int64_t load_rows(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                         size_t index, row_ref *rows, row_grad *g, const bwd_scratch *b,
                         int64_t *kv_head)
{
    int64_t n = attn_task_rows(pb, p, index, rows, kv_head);
    for (int64_t r = 0; r < n; r++) {
        row_ref *row = &rows[r];
        if (row->lo == row->hi)
            continue;
        g[r].lse = pb->lse[(row->b * pb->q_heads + row->h) * pb->q_len + row->i];
        if (g[r].lse == -INFINITY) {
            row->lo = row->hi = 0;
            continue;
        }
        float *dout = b->dout + r * p->acc_stride;
        dsp->to_f32[pb->dout.dtype](attn_row_ptr(&pb->dout, row->b, row->h, row->i), dout,
                                    (size_t)pb->v_dim);
        /* D as a 1x1 tile: the kernels' dot product, in o's dtype */
        dsp->qk_tile[pb->o.dtype](dout, 0, attn_row_ptr(&pb->o, row->b, row->h, row->i), 0, 1,
                                  1, (size_t)pb->v_dim, 1.0f, &g[r].dsum, 1);
    }
    attn_convert_queries(dsp, pb, p, rows, n, b->q);
    return n;
}

/*
 * For the run of rows [r0, r1) and keys [kb, ke): leaves P in b->s and
 * dS = P * (dP - D) in b->dp (row stride block_k, zero outside each row's
 * visible keys), and the softcapped scores in b->capped when softcap is on.
 */
static void run_grads(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                      const row_ref *rows, const row_grad *g, int64_t r0, int64_t r1,
                      int64_t kb, int64_t ke, const kv_src *ks, const kv_src *vs,
                      const bwd_scratch *b)
{
    const size_t nr = (size_t)(r1 - r0);
    const int64_t nk = ke - kb;
    float *s0 = b->s + r0 * p->block_k, *dp0 = b->dp + r0 * p->block_k;
    for (int64_t j = kb, len; j < ke; j += len) {
        const void *kp = attn_kv_run(ks, j, ke, &len);
        dsp->qk_tile[pb->k.dtype](b->q + r0 * p->q_stride, p->q_stride, kp, ks->stride, nr,
                                  (size_t)len, (size_t)pb->head_dim, pb->scale, s0 + (j - kb),
                                  p->block_k);
    }
    for (int64_t j = kb, len; j < ke; j += len) {
        const void *vp = attn_kv_run(vs, j, ke, &len);
        dsp->qk_tile[pb->v.dtype](b->dout + r0 * p->acc_stride, p->acc_stride, vp, vs->stride,
                                  nr, (size_t)len, (size_t)pb->v_dim, 1.0f, dp0 + (j - kb),
                                  p->block_k);
    }
    for (int64_t r = r0; r < r1; r++) {
        const row_ref *row = &rows[r];
        float *s = b->s + r * p->block_k, *dp = b->dp + r * p->block_k;
        const int64_t a = attn_max64(row->lo, kb) - kb, z = attn_min64(row->hi, ke) - kb;
        if (a >= z) { /* the run's neighbours see this block, this row not */
            attn_fill(s, nk, 0.0f);
            attn_fill(dp, nk, 0.0f);
            continue;
        }
        /* the forward's epilogue, keeping the capped scores for their derivative */
        if (pb->softcap > 0.0f) {
            dsp->softcap(s + a, (size_t)(z - a), pb->softcap);
            memcpy(b->capped + r * p->block_k + a, s + a, (size_t)(z - a) * sizeof(float));
        }
        if (pb->bias.data)
            dsp->add_bias(s + a,
                          (const float *)attn_row_ptr(&pb->bias, row->b, row->h, row->i) + kb + a,
                          (size_t)(z - a));
        if (pb->mask.data)
            dsp->mask_bool(s + a,
                           (const uint8_t *)attn_row_ptr(&pb->mask, row->b, row->h, row->i) +
                               kb + a,
                           (size_t)(z - a));
        if (isfinite(g[r].lse)) /* exp(s - lse): exp_sum with lse as its "max" */
            (void)dsp->exp_sum(s + a, (size_t)(z - a), g[r].lse, NULL);
        else /* NaN or +inf: the forward's row was NaN */
            attn_fill(s + a, z - a, NAN);
        dsp->score_grad(s + a, dp + a, g[r].dsum, (size_t)(z - a));
        attn_fill(s, a, 0.0f);
        attn_fill(s + z, nk - z, 0.0f);
        attn_fill(dp, a, 0.0f);
        attn_fill(dp + z, nk - z, 0.0f);
    }
}

/* dS *= d softcap / dx = 1 - tanh^2 = 1 - (capped / cap)^2, rows [r0, r1). */
static void softcap_grad(const attn_problem *pb, const task_plan *p, const row_ref *rows,
                         int64_t r0, int64_t r1, int64_t kb, int64_t ke, const bwd_scratch *b)
{
    const float inv = 1.0f / pb->softcap;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t a = attn_max64(rows[r].lo, kb) - kb, z = attn_min64(rows[r].hi, ke) - kb;
        float *dp = b->dp + r * p->block_k;
        const float *c = b->capped + r * p->block_k;
        for (int64_t j = a; j < z; j++) {
            const float t = c[j] * inv;
            dp[j] *= 1.0f - t * t;
        }
    }
}

/* A query task: dq (and dbias) of one block of rows. */
static void task_query(const task_ctx *ctx, size_t index, float *scratch)
{
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;
    const bwd_scratch b = carve(p, scratch);
    row_ref rows[ATTN_MAX_BLOCK_Q];
    row_grad g[ATTN_MAX_BLOCK_Q];
    int64_t kv_head;
    const int64_t n = load_rows(dsp, pb, p, index, rows, g, &b, &kv_head);
    const kv_src ks = attn_kv_open(&pb->k, rows[0].b, kv_head);
    const kv_src vs = attn_kv_open(&pb->v, rows[0].b, kv_head);

    for (int64_t r = 0; r < n; r++) {
        attn_fill(b.acc + r * p->q_stride, pb->head_dim, 0.0f);
        if (pb->dbias.data)
            attn_fill(attn_out_row(&pb->dbias, rows[r].b, rows[r].h, rows[r].i), pb->kv_len,
                      0.0f);
    }

    int64_t ulo, uhi;
    attn_visible_union(rows, n, &ulo, &uhi);
    for (int64_t k0 = ulo < uhi ? ulo / p->block_k * p->block_k : uhi; k0 < uhi;
         k0 += p->block_k) {
        const int64_t kb = attn_max64(k0, ulo), ke = attn_min64(k0 + p->block_k, uhi);
        for (int64_t r = 0, run_end; (run_end = attn_next_run(rows, n, &r, kb, ke)) > r;
             r = run_end) {
            run_grads(dsp, pb, p, rows, g, r, run_end, kb, ke, &ks, &vs, &b);
            if (pb->dbias.data)
                for (int64_t rr = r; rr < run_end; rr++) {
                    const int64_t a = attn_max64(rows[rr].lo, kb), z = attn_min64(rows[rr].hi, ke);
                    if (a < z)
                        memcpy(attn_out_row(&pb->dbias, rows[rr].b, rows[rr].h, rows[rr].i) + a,
                               b.dp + rr * p->block_k + (a - kb),
                               (size_t)(z - a) * sizeof(float));
                }
            if (pb->softcap > 0.0f)
                softcap_grad(pb, p, rows, r, run_end, kb, ke, &b);
            for (int64_t j = kb, len; j < ke; j += len) {
                const void *kp = attn_kv_run(&ks, j, ke, &len);
                dsp->pv_tile[pb->k.dtype](b.dp + r * p->block_k + (j - kb), p->block_k, kp,
                                          ks.stride, (size_t)(run_end - r), (size_t)len,
                                          (size_t)pb->head_dim, b.acc + r * p->q_stride,
                                          p->q_stride);
            }
        }
    }

    for (int64_t r = 0; r < n; r++) {
        float *acc = b.acc + r * p->q_stride;
        dsp->row_scale(acc, (size_t)pb->head_dim, pb->scale);
        memcpy(attn_out_row(&pb->out, rows[r].b, rows[r].h, rows[r].i), acc,
               (size_t)pb->head_dim * sizeof(float));
    }
}

/* A key task: dk and dv of keys [kb, ke) of one (batch entry, KV head). */
static void task_keys(const task_ctx *ctx, size_t index, float *scratch)
{
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;
    const bwd_scratch b = carve(p, scratch);
    const int64_t blk = (int64_t)index % p->kv_blocks;
    const int64_t kv_head = (int64_t)index / p->kv_blocks % pb->kv_heads;
    const int64_t batch = (int64_t)index / p->kv_blocks / pb->kv_heads;
    const int64_t kb0 = blk * p->block_k, ke0 = attn_min64(kb0 + p->block_k, pb->kv_len);
    const kv_src ks = attn_kv_open(&pb->k, batch, kv_head);
    const kv_src vs = attn_kv_open(&pb->v, batch, kv_head);
    float *dk0 = attn_out_row(&pb->dk, batch, kv_head, kb0);
    float *dv0 = attn_out_row(&pb->dv, batch, kv_head, kb0);

    for (int64_t j = 0; j < ke0 - kb0; j++) {
        attn_fill(dk0 + j * pb->dk.row_stride, pb->head_dim, 0.0f);
        attn_fill(dv0 + j * pb->dv.row_stride, pb->v_dim, 0.0f);
    }

    /* every block of query rows of the group, in order (the group of KV
       head h is h: heads_per_group == pb->group) */
    row_ref rows[ATTN_MAX_BLOCK_Q];
    row_grad g[ATTN_MAX_BLOCK_Q];
    for (int64_t qb = 0; qb < p->blocks; qb++) {
        const size_t qindex = (size_t)((batch * p->groups + kv_head) * p->blocks + qb);
        int64_t unused, ulo, uhi;
        /* skip blocks that cannot see these keys before converting anything */
        const int64_t n0 = attn_task_rows(pb, p, qindex, rows, &unused);
        attn_visible_union(rows, n0, &ulo, &uhi);
        const int64_t kb = attn_max64(kb0, ulo), ke = attn_min64(ke0, uhi);
        if (kb >= ke)
            continue;
        const int64_t n = load_rows(dsp, pb, p, qindex, rows, g, &b, &unused);
        for (int64_t r = 0, run_end; (run_end = attn_next_run(rows, n, &r, kb, ke)) > r;
             r = run_end) {
            const size_t nr = (size_t)(run_end - r);
            run_grads(dsp, pb, p, rows, g, r, run_end, kb, ke, &ks, &vs, &b);
            dsp->pt_tile(b.s + r * p->block_k, p->block_k, b.dout + r * p->acc_stride,
                         p->acc_stride, nr, (size_t)(ke - kb), (size_t)pb->v_dim,
                         dv0 + (kb - kb0) * pb->dv.row_stride, pb->dv.row_stride);
            if (pb->softcap > 0.0f)
                softcap_grad(pb, p, rows, r, run_end, kb, ke, &b);
            dsp->pt_tile(b.dp + r * p->block_k, p->block_k, b.q + r * p->q_stride, p->q_stride,
                         nr, (size_t)(ke - kb), (size_t)pb->head_dim,
                         dk0 + (kb - kb0) * pb->dk.row_stride, pb->dk.row_stride);
        }
    }

    for (int64_t j = 0; j < ke0 - kb0; j++)
        dsp->row_scale(dk0 + j * pb->dk.row_stride, (size_t)pb->head_dim, pb->scale);
}

void attn_task_backward(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const task_plan *p = &ctx->plan;
    _Alignas(64) float scratch[ATTN_SCRATCH_FLOATS];
    const size_t query_tasks = (size_t)(ctx->pb->batch * p->groups * p->blocks);
    if (index < query_tasks)
        task_query(ctx, index, scratch);
    else
        task_keys(ctx, index - query_tasks, scratch);
}

/* SPDX-License-Identifier: MIT */
/*
 * attn_backward: flash-style, deterministic without atomics. P is recomputed
 * from Q, K and the forward's lse and never stored; every gradient element
 * has one owner task that sums it in a fixed order. The plan depends on the
 * shape only, never on the thread count:
 *  - fused (batch * kv_heads >= attn_bwd_fused_min_tasks): one task per
 *    (batch, KV head) owns its dk, dv, dq and dbias; five tile products.
 *  - split, for fewer pairs: query tasks own dq and dbias, key tasks dk and
 *    dv (summing every row of the group in order); both recompute S and dP,
 *    seven tile products.
 * Rows, keys and scores come from the forward's geometry and epilogue, so
 * an option changes the backward where it changes the forward (a new
 * additive term needs its derivative in run_grads only). Key blocks count
 * from a sequence's first key (seq_keys): a packed sequence gets the bits
 * it would get alone.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "kv.h"
#include "validate.h"

/* Each call adds one chain from zero to dk, dv (src/dsp.h): a two-level sum
   rather than one chain of group * q_len rows (tests/tolerance.h, "backward"). */
static attn_pt_tile_fn *pt_kernel(const attn_dsp *dsp, const attn_problem *pb)
{
    attn_pt_tile_fn *f = pb->opt.precision == ATTN_PRECISION_BF16 ? dsp->pt_bf16 : NULL;
    return f ? f : dsp->pt_tile;
}

/* Pairs from which one task per pair keeps a pool busy. A variable so that
   the tests can run both plans on every shape. */
int64_t attn_bwd_fused_min_tasks = 8;

/* q and dO (unless direct), two or three score tiles, and the split plan's
   dq accumulator (fused accumulates in place). */
static int64_t bwd_row_floats(const task_plan *p, const attn_problem *pb)
{
    const int64_t tiles = pb->opt.softcap > 0.0f ? 3 : 2;
    return (p->q_direct ? 0 : p->q_stride + p->acc_stride) +
           (p->fused_blocks ? 0 : p->q_stride) + tiles * p->block_k;
}

static task_plan plan_backward(const attn_dsp *dsp, const attn_problem *pb)
{
    const int fused = pb->batch * pb->kv_heads >= attn_bwd_fused_min_tasks;
    /* fused: one head per block, so a run of rows has one dq stride */
    task_plan p = attn_plan_common(dsp, pb, fused ? 1 : pb->group);
    /* more rows fit the scratch, amortising the kernels' packing */
    p.block_k = attn_min64(p.block_k, 64);
    /* F32 q and dO read in place when a block's rows share one stride, as
       the forward does: more rows per packed panel */
    p.q_direct = pb->q.dtype == ATTN_DTYPE_F32 && pb->dout.dtype == ATTN_DTYPE_F32 &&
                 (p.heads_per_group == 1 || pb->q_extent == 1);
    p.fused_blocks = fused; /* for bwd_row_floats; the block count below */
    p.block_rows = attn_block_rows_for(dsp, bwd_row_floats(&p, pb));
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    p.kv_blocks = (pb->kv_len + p.block_k - 1) / p.block_k;
    p.fused_blocks = 0;
    if (fused) {
        p.fused_blocks = p.blocks;
        p.blocks = 0;
        p.kv_blocks = 1;
    }
    p.tasks = (size_t)(pb->batch * (p.groups * p.blocks * p.splits + pb->kv_heads * p.kv_blocks));
    return p;
}

/* The key rows of dk and dv sequence b owns (with kv_offsets, the rest are
   other sequences' or padding). */
static void seq_keys(const attn_problem *pb, int64_t b, int64_t *lo, int64_t *hi)
{
    *lo = 0;
    *hi = pb->kv_len;
    if (pb->kv_offsets) {
        *lo = pb->kv_offsets[b];
        *hi = *lo + (pb->kv_lens ? pb->kv_lens[b] : pb->kv_len);
    }
}

typedef struct row_grad {
    float lse;  /* the forward's */
    float dsum; /* D = rowsum(dO * O) */
} row_grad;

typedef struct bwd_scratch {
    const float *q, *dout;
    ptrdiff_t q_stride, dout_stride;
    float *qbuf, *doutbuf, *acc, *s, *dp, *capped;
} bwd_scratch;

static bwd_scratch carve(const task_plan *p, const attn_problem *pb, float *scratch)
{
    bwd_scratch b;
    b.qbuf = b.doutbuf = NULL;
    b.s = scratch;
    if (!p->q_direct) {
        b.qbuf = scratch;
        b.doutbuf = b.qbuf + p->block_rows * p->q_stride;
        b.s = b.doutbuf + p->block_rows * p->acc_stride;
    }
    b.q = b.qbuf;
    b.dout = b.doutbuf;
    b.q_stride = p->q_stride;
    b.dout_stride = p->acc_stride;
    b.dp = b.s + p->block_rows * p->block_k;
    float *next = b.dp + p->block_rows * p->block_k;
    b.capped = NULL;
    if (pb->opt.softcap > 0.0f) {
        b.capped = next;
        next += p->block_rows * p->block_k;
    }
    b.acc = p->fused_blocks ? NULL : next;
    return b;
}

/* A row whose lse is -inf saw no key in the forward: it becomes empty. */
static int64_t load_rows(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                         size_t index, row_ref *rows, row_grad *g, bwd_scratch *b,
                         int64_t *kv_head)
{
    int64_t n = attn_task_rows(pb, p, index, rows, kv_head);
    if (p->q_direct) {
        const int heads = p->heads_per_group > 1;
        b->q = attn_row_ptr(&pb->q, rows[0].b, rows[0].h, rows[0].i);
        b->dout = attn_row_ptr(&pb->dout, rows[0].b, rows[0].h, rows[0].i);
        b->q_stride = heads ? pb->q.head_stride : pb->q.row_stride;
        b->dout_stride = heads ? pb->dout.head_stride : pb->dout.row_stride;
    }
    for (int64_t r = 0; r < n; r++) {
        row_ref *row = &rows[r];
        if (row->lo == row->hi)
            continue;
        g[r].lse = pb->lse[(row->b * pb->q_heads + row->h) * pb->q_len + row->i];
        if (g[r].lse == -INFINITY) {
            row->lo = row->hi = 0;
            continue;
        }
        const float *dout = b->dout + r * b->dout_stride;
        if (!p->q_direct)
            dsp->to_f32[pb->dout.dtype](attn_row_ptr(&pb->dout, row->b, row->h, row->i),
                                        b->doutbuf + r * b->dout_stride, (size_t)pb->v_dim);
        /* D for the sinks' gradient; run_dsums sums it again to match dP */
        const void *o = attn_row_ptr(&pb->o, row->b, row->h, row->i);
        dsp->qk_diag[pb->o.dtype](dout, 0, &o, 1, (size_t)pb->v_dim, 1.0f, &g[r].dsum);
    }
    if (!p->q_direct)
        attn_convert_queries(dsp, pb, p, rows, n, b->qbuf);
    return n;
}

/* Sinks' gradient, in row order: -exp(sink - lse) D per row of `head` (-1:
   all). Rows that see no key have D = 0 and are not loaded. */
static void sink_grads(const attn_problem *pb, const row_ref *rows, const row_grad *g, int64_t n,
                       int64_t head, float *acc)
{
    for (int64_t r = 0; r < n; r++)
        if (rows[r].lo < rows[r].hi && (head < 0 || rows[r].h == head))
            *acc -= expf(attn_row_sink(pb, &rows[r]) - g[r].lse) * g[r].dsum;
}

/*
 * D of rows [r0, r1), summed as dP's tile of that run sums (qk_diag,
 * src/dsp.h), so that where O is a visible key's V, dP - D cancels exactly.
 * last: the run D was last summed for ({0, 0}: none). Not inlined: its
 * arrays stay off the tile calls' stack (ATTN_TASK_STACK_BYTES).
 */
static __attribute__((noinline)) void run_dsums(const attn_dsp *dsp, const attn_problem *pb,
                                                const task_plan *p, const row_ref *rows,
                                                row_grad *g, int64_t r0, int64_t r1,
                                                const bwd_scratch *b, int64_t last[2])
{
    if (last[0] == r0 && last[1] == r1)
        return;
    const size_t nr = (size_t)(r1 - r0);
    const void *o[ATTN_MAX_BLOCK_Q] = {NULL}; /* all set below; gcc 12 cannot tell */
    float dsum[ATTN_MAX_BLOCK_Q];
    for (int64_t r = r0; r < r1; r++)
        o[r - r0] = attn_row_ptr(&pb->o, rows[r].b, rows[r].h, rows[r].i);
    dsp->qk_diag[pb->o.dtype](b->dout + r0 * b->dout_stride, b->dout_stride, o, nr,
                              (size_t)pb->v_dim, 1.0f, dsum);
    for (int64_t r = r0; r < r1; r++)
        g[r].dsum = dsum[r - r0];
    last[0] = r0;
    last[1] = r1;
}

/* Leaves P in b->s, dS = P (dP - D) in b->dp (zero outside each row's
   visible keys) and, with softcap, the capped scores in b->capped. */
static void run_grads(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                      const row_ref *rows, row_grad *g, int64_t r0, int64_t r1,
                      int64_t kb, int64_t ke, const kv_src *ks, const kv_src *vs,
                      const bwd_scratch *b, int64_t dsum_run[2])
{
    const size_t nr = (size_t)(r1 - r0);
    run_dsums(dsp, pb, p, rows, g, r0, r1, b, dsum_run);
    const int64_t nk = ke - kb;
    float *s0 = b->s + r0 * p->block_k, *dp0 = b->dp + r0 * p->block_k;
    /* the scores must be the forward's in the mode (its lse's); dP stays
       f32, so that dP - D still cancels */
    attn_qk_tile_fn *const qk = pb->opt.precision == ATTN_PRECISION_BF16
                                    ? attn_qk_kernel_for(dsp, pb, pb->k.dtype)
                                    : dsp->qk_tile[pb->k.dtype];
    for (int64_t j = kb, len; j < ke; j += len) {
        const void *kp = attn_kv_run(ks, j, ke, &len);
        qk(b->q + r0 * b->q_stride, b->q_stride, kp, ks->stride, nr, (size_t)len,
           (size_t)pb->head_dim, pb->scale, s0 + (j - kb), p->block_k);
    }
    for (int64_t j = kb, len; j < ke; j += len) {
        const void *vp = attn_kv_run(vs, j, ke, &len);
        dsp->qk_tile[pb->v.dtype](b->dout + r0 * b->dout_stride, b->dout_stride, vp, vs->stride,
                                  nr, (size_t)len, (size_t)pb->v_dim, 1.0f, dp0 + (j - kb),
                                  p->block_k);
    }
    for (int64_t r = r0; r < r1; r++) {
        const row_ref *row = &rows[r];
        float *s = b->s + r * p->block_k, *dp = b->dp + r * p->block_k;
        const int64_t a = attn_max64(row->lo, kb) - kb, z = attn_min64(row->hi, ke) - kb;
        if (a >= z) {
            attn_fill(s, nk, 0.0f);
            attn_fill(dp, nk, 0.0f);
            continue;
        }
        if (pb->opt.softcap > 0.0f) {
            dsp->softcap(s + a, (size_t)(z - a), pb->opt.softcap);
            memcpy(b->capped + r * p->block_k + a, s + a, (size_t)(z - a) * sizeof(float));
        }
        attn_score_epilogue_after_softcap(dsp, pb, row, s + a, kb + a, z - a);
        if (isfinite(g[r].lse))
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

/* dS *= 1 - tanh^2 = 1 - (capped / cap)^2 */
static void softcap_grad(const attn_problem *pb, const task_plan *p, const row_ref *rows,
                         int64_t r0, int64_t r1, int64_t kb, int64_t ke, const bwd_scratch *b)
{
    const float inv = 1.0f / pb->opt.softcap;
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

/* dq and dbias of a block of rows; with_kv (fused) also dk and dv. */
static void query_block(const task_ctx *ctx, const task_plan *p, size_t index, float *scratch,
                        int with_kv, float *dsink)
{
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    bwd_scratch b = carve(p, pb, scratch);
    row_ref rows[ATTN_MAX_BLOCK_Q];
    row_grad g[ATTN_MAX_BLOCK_Q];
    int64_t kv_head;
    const int64_t n = load_rows(dsp, pb, p, index, rows, g, &b, &kv_head);
    int64_t dsum_run[2] = {0, 0};
    const kv_src ks = attn_kv_open(pb, &pb->k, rows[0].b, kv_head, pb->head_dim, 0);
    const kv_src vs = attn_kv_open(pb, &pb->v, rows[0].b, kv_head, pb->v_dim, 0);
    float *dk0 = attn_out_row(&pb->dk, rows[0].b, kv_head, 0);
    float *dv0 = attn_out_row(&pb->dv, rows[0].b, kv_head, 0);
    if (dsink)
        sink_grads(pb, rows, g, n, -1, dsink);

    float *const acc0 = with_kv ? attn_out_row(&pb->out, rows[0].b, rows[0].h, rows[0].i) : b.acc;
    const int64_t acc_stride = with_kv ? pb->out.row_stride : p->q_stride;
    for (int64_t r = 0; r < n; r++) {
        attn_fill(acc0 + r * acc_stride, pb->head_dim, 0.0f);
        if (pb->dbias.data)
            attn_fill(attn_out_row(&pb->dbias, rows[r].b, rows[r].h, rows[r].i) +
                          rows[r].col_lo,
                      rows[r].col_hi - rows[r].col_lo, 0.0f);
    }

    attn_pv_tile_fn *const dq_kernel = attn_pv_kernel_for(dsp, pb, pb->k.dtype);
    attn_pt_tile_fn *const pt = pt_kernel(dsp, pb);

    int64_t ulo, uhi, kbase, kend;
    attn_visible_union(rows, n, &ulo, &uhi);
    seq_keys(pb, rows[0].b, &kbase, &kend); /* key blocks as the key tasks cut them */
    for (int64_t k0 = ulo < uhi ? kbase + (ulo - kbase) / p->block_k * p->block_k : uhi; k0 < uhi;
         k0 += p->block_k) {
        const int64_t kb = attn_max64(k0, ulo), ke = attn_min64(k0 + p->block_k, uhi);
        for (int64_t r = 0, run_end; (run_end = attn_next_run(rows, n, &r, kb, ke)) > r;
             r = run_end) {
            const size_t nr = (size_t)(run_end - r);
            run_grads(dsp, pb, p, rows, g, r, run_end, kb, ke, &ks, &vs, &b, dsum_run);
            if (with_kv)
                pt(b.s + r * p->block_k, p->block_k, b.dout + r * b.dout_stride,
                   b.dout_stride, nr, (size_t)(ke - kb), (size_t)pb->v_dim,
                   dv0 + kb * pb->dv.row_stride, pb->dv.row_stride);
            if (pb->dbias.data)
                for (int64_t rr = r; rr < run_end; rr++) {
                    const int64_t a = attn_max64(rows[rr].lo, kb), z = attn_min64(rows[rr].hi, ke);
                    if (a < z)
                        memcpy(attn_out_row(&pb->dbias, rows[rr].b, rows[rr].h, rows[rr].i) + a,
                               b.dp + rr * p->block_k + (a - kb),
                               (size_t)(z - a) * sizeof(float));
                }
            if (pb->opt.softcap > 0.0f)
                softcap_grad(pb, p, rows, r, run_end, kb, ke, &b);
            if (with_kv)
                pt(b.dp + r * p->block_k, p->block_k, b.q + r * b.q_stride,
                   b.q_stride, nr, (size_t)(ke - kb), (size_t)pb->head_dim,
                   dk0 + kb * pb->dk.row_stride, pb->dk.row_stride);
            for (int64_t j = kb, len; j < ke; j += len) {
                const void *kp = attn_kv_run(&ks, j, ke, &len);
                dq_kernel(b.dp + r * p->block_k + (j - kb), p->block_k, kp, ks.stride, nr,
                          (size_t)len, (size_t)pb->head_dim, acc0 + r * acc_stride, acc_stride);
            }
        }
    }

    for (int64_t r = 0; r < n; r++) {
        float *acc = acc0 + r * acc_stride;
        dsp->row_scale(acc, (size_t)pb->head_dim, pb->scale);
        if (!with_kv)
            memcpy(attn_out_row(&pb->out, rows[r].b, rows[r].h, rows[r].i), acc,
                   (size_t)pb->head_dim * sizeof(float));
    }
}

static void task_fused(const task_ctx *ctx, size_t index, float *scratch)
{
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    task_plan p = ctx->plan;
    p.blocks = p.fused_blocks;
    const int64_t kv_head = (int64_t)index % pb->kv_heads, batch = (int64_t)index / pb->kv_heads;
    float *dk0 = attn_out_row(&pb->dk, batch, kv_head, 0);
    float *dv0 = attn_out_row(&pb->dv, batch, kv_head, 0);
    int64_t klo, khi;
    seq_keys(pb, batch, &klo, &khi);
    for (int64_t j = klo; j < khi; j++) {
        attn_fill(dk0 + j * pb->dk.row_stride, pb->head_dim, 0.0f);
        attn_fill(dv0 + j * pb->dv.row_stride, pb->v_dim, 0.0f);
    }
    for (int64_t h = kv_head * pb->group; h < (kv_head + 1) * pb->group; h++) {
        float dsink = 0.0f;
        for (int64_t qb = 0; qb < p.blocks; qb++)
            query_block(ctx, &p, (size_t)((batch * p.groups + h) * p.blocks + qb), scratch, 1,
                        pb->dsinks ? &dsink : NULL);
        if (pb->dsinks)
            pb->dsinks[batch * pb->q_heads + h] = dsink;
    }
    for (int64_t j = klo; j < khi; j++)
        dsp->row_scale(dk0 + j * pb->dk.row_stride, (size_t)pb->head_dim, pb->scale);
}

static void task_keys(const task_ctx *ctx, size_t index, float *scratch)
{
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;
    attn_pt_tile_fn *const pt = pt_kernel(dsp, pb);
    bwd_scratch b = carve(p, pb, scratch);
    const int64_t blk = (int64_t)index % p->kv_blocks;
    const int64_t kv_head = (int64_t)index / p->kv_blocks % pb->kv_heads;
    const int64_t batch = (int64_t)index / p->kv_blocks / pb->kv_heads;
    int64_t klo, khi;
    seq_keys(pb, batch, &klo, &khi);
    const int64_t kb0 = klo + blk * p->block_k, ke0 = attn_min64(kb0 + p->block_k, khi);
    if (kb0 >= khi && !(pb->dsinks && blk == 0)) /* past a shorter sequence's keys */
        return;
    const kv_src ks = attn_kv_open(pb, &pb->k, batch, kv_head, pb->head_dim, 0);
    const kv_src vs = attn_kv_open(pb, &pb->v, batch, kv_head, pb->v_dim, 0);
    float *dk0 = attn_out_row(&pb->dk, batch, kv_head, kb0);
    float *dv0 = attn_out_row(&pb->dv, batch, kv_head, kb0);

    for (int64_t j = 0; j < ke0 - kb0; j++) {
        attn_fill(dk0 + j * pb->dk.row_stride, pb->head_dim, 0.0f);
        attn_fill(dv0 + j * pb->dv.row_stride, pb->v_dim, 0.0f);
    }

    /* every block of the group's rows, in order (group index == KV head) */
    row_ref rows[ATTN_MAX_BLOCK_Q];
    row_grad g[ATTN_MAX_BLOCK_Q];
    for (int64_t qb = 0; qb < p->blocks; qb++) {
        const size_t qindex = (size_t)((batch * p->groups + kv_head) * p->blocks + qb);
        int64_t unused, ulo, uhi;
        const int64_t n0 = attn_task_rows(pb, p, qindex, rows, &unused);
        attn_visible_union(rows, n0, &ulo, &uhi);
        const int64_t kb = attn_max64(kb0, ulo), ke = attn_min64(ke0, uhi);
        if (kb >= ke)
            continue;
        const int64_t n = load_rows(dsp, pb, p, qindex, rows, g, &b, &unused);
        int64_t dsum_run[2] = {0, 0};
        for (int64_t r = 0, run_end; (run_end = attn_next_run(rows, n, &r, kb, ke)) > r;
             r = run_end) {
            const size_t nr = (size_t)(run_end - r);
            run_grads(dsp, pb, p, rows, g, r, run_end, kb, ke, &ks, &vs, &b, dsum_run);
            pt(b.s + r * p->block_k, p->block_k, b.dout + r * b.dout_stride,
               b.dout_stride, nr, (size_t)(ke - kb), (size_t)pb->v_dim,
               dv0 + (kb - kb0) * pb->dv.row_stride, pb->dv.row_stride);
            if (pb->opt.softcap > 0.0f)
                softcap_grad(pb, p, rows, r, run_end, kb, ke, &b);
            pt(b.dp + r * p->block_k, p->block_k, b.q + r * b.q_stride, b.q_stride,
               nr, (size_t)(ke - kb), (size_t)pb->head_dim,
               dk0 + (kb - kb0) * pb->dk.row_stride, pb->dk.row_stride);
        }
    }

    for (int64_t j = 0; j < ke0 - kb0; j++)
        dsp->row_scale(dk0 + j * pb->dk.row_stride, (size_t)pb->head_dim, pb->scale);

    /* split plan: the first key task sums dsinks, a pass per head so that
       every sum runs in row order */
    if (pb->dsinks && blk == 0)
        for (int64_t h = kv_head * pb->group; h < (kv_head + 1) * pb->group; h++) {
            float dsink = 0.0f;
            for (int64_t qb = 0; qb < p->blocks; qb++) {
                int64_t unused;
                const int64_t n = load_rows(dsp, pb, p, (size_t)((batch * p->groups + kv_head) *
                                                                p->blocks + qb),
                                            rows, g, &b, &unused);
                sink_grads(pb, rows, g, n, h, &dsink);
            }
            pb->dsinks[batch * pb->q_heads + h] = dsink;
        }
}

static void task_backward(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const task_plan *p = &ctx->plan;
    _Alignas(64) float scratch[ATTN_SCRATCH_FLOATS];
    const size_t query_tasks = (size_t)(ctx->pb->batch * p->groups * p->blocks);
    if (p->fused_blocks)
        task_fused(ctx, index, scratch);
    else if (index < query_tasks)
        query_block(ctx, p, index, scratch, 0, NULL);
    else
        task_keys(ctx, index - query_tasks, scratch);
}

/* ------------------------------------------------------------ entry points */

static const attn_op backward_op = {
    .reads_qk = 1,
    .reads_v = 1,
    .out_cols = ATTN_OUT_HEAD_DIM, /* dq */
    .plan = plan_backward,
    .task = task_backward,
};

static attn_status read_grads(attn_grads *g, const attn_grads *grads, const attn_tensor *out,
                              const attn_tensor *dout, const float *lse)
{
    if (!grads || !out || !dout || !lse || !out->data || !dout->data)
        return ATTN_ERR_NULL;
    const attn_grads defaults = ATTN_GRADS_INIT;
    *g = defaults;
    const uint32_t size = grads->struct_size;
    if (size < offsetof(attn_grads, dv) + sizeof(grads->dv))
        return attn_fail(ATTN_ERR_VERSION, "grads->struct_size = %u: at least %zu",
                         (unsigned)size, offsetof(attn_grads, dv) + sizeof(grads->dv));
    if (!attn_struct_tail_zero(grads, sizeof(attn_grads), size))
        return attn_fail(ATTN_ERR_VERSION,
                         "grads->struct_size = %u: this library knows %zu bytes of attn_grads, "
                         "and a field past them is set, or the size is above %d",
                         (unsigned)size, sizeof(attn_grads), ATTN_STRUCT_SIZE_MAX);
    g->dq = grads->dq;
    g->dk = grads->dk;
    g->dv = grads->dv;
    if (size >= offsetof(attn_grads, dbias) + sizeof(grads->dbias))
        g->dbias = grads->dbias;
    if (size >= offsetof(attn_grads, dsinks) + sizeof(grads->dsinks))
        g->dsinks = grads->dsinks;
    if (!g->dq || !g->dk || !g->dv || !g->dk->data || !g->dv->data ||
        (g->dbias && !g->dbias->data))
        return ATTN_ERR_NULL;
    return ATTN_OK;
}

static attn_status check_supported(const attn_problem *p)
{
    if (p->k_tail.data)
        return ATTN_ERR_UNSUPPORTED;
    /* paged K/V: training does not read a cache */
    if (p->block_table)
        return ATTN_ERR_UNSUPPORTED;
    /* a shared key's gradient belongs to every sequence that reads it */
    if (p->opt.shared_prefix)
        return ATTN_ERR_UNSUPPORTED;
    if (p->opt.precision == ATTN_PRECISION_INT8)
        return ATTN_ERR_UNSUPPORTED;
    /* training keeps K and V in float */
    if (!attn_dtype_is_float_input(p->k.dtype) || !attn_dtype_is_float_input(p->v.dtype))
        return ATTN_ERR_UNSUPPORTED;
    return ATTN_OK;
}

static attn_status check_grad_dtypes(const attn_problem *p, const attn_grads *g,
                                     const attn_tensor *out, const attn_tensor *dout)
{
    if (g->dsinks && !p->sinks.data)
        return ATTN_ERR_ARG;
    if (!attn_dtype_is_float_input(out->dtype) || !attn_dtype_is_float_input(dout->dtype) ||
        g->dk->dtype != ATTN_DTYPE_F32 || g->dv->dtype != ATTN_DTYPE_F32 ||
        (g->dbias && g->dbias->dtype != ATTN_DTYPE_F32))
        return ATTN_ERR_ARG;
    return ATTN_OK;
}

/* A packed batch's gradients (batch_stride 0): each sequence writes only its
   own rows, which must be in order and disjoint, as for the forward's out. */
static attn_status check_grad_ranges(const attn_problem *p, const attn_grads *g,
                                     const attn_tensor *q, const attn_tensor *k,
                                     const attn_tensor *v, const attn_tensor *out,
                                     const attn_tensor *dout, const float *lse)
{
    attn_range_set set = {.n_in = 0};
    const attn_shape bs = {p->batch, p->q_heads, p->kv_heads, p->q_len, p->kv_len, p->head_dim,
                           p->v_dim};
    ATTN_TRY(attn_add_qkv(&set, &bs, &p->opt, 0, q, k, v));
    ATTN_TRY(attn_add_tensor(&set, out, p->batch, p->q_heads, p->q_len, p->v_dim, 0));
    ATTN_TRY(attn_add_tensor(&set, dout, p->batch, p->q_heads, p->q_len, p->v_dim, 0));
    ATTN_TRY(attn_add_array(&set, lse, p->batch * p->q_heads * p->q_len, sizeof(float), 0));
    ATTN_TRY(attn_add_option_ranges(&set, &p->opt, &bs));

    const int packed_keys = p->kv_offsets && p->batch > 1 &&
                            (g->dk->batch_stride == 0 || g->dv->batch_stride == 0);
    if (packed_keys && !attn_seqs_in_order(p->kv_offsets, p->kv_lens, p->kv_len, p->batch))
        return ATTN_ERR_STRIDE;
    const int packed_rows = p->q_offsets && p->batch > 1;
    const int64_t qb = packed_rows && g->dq->batch_stride == 0 ? 1 : p->batch;
    const int64_t kb = p->kv_offsets && p->batch > 1 ? 1 : p->batch;
    ATTN_TRY(attn_add_tensor(&set, g->dq, qb, p->q_heads, p->q_len, p->head_dim, 1));
    ATTN_TRY(attn_add_tensor(&set, g->dk, g->dk->batch_stride == 0 ? kb : p->batch, p->kv_heads,
                             p->kv_len, p->head_dim, 1));
    ATTN_TRY(attn_add_tensor(&set, g->dv, g->dv->batch_stride == 0 ? kb : p->batch, p->kv_heads,
                             p->kv_len, p->v_dim, 1));
    if (g->dbias) {
        const int packed_bias = packed_rows && g->dbias->batch_stride == 0;
        if (packed_bias && !attn_seqs_in_order(p->q_offsets, p->q_lens, p->q_len, p->batch))
            return ATTN_ERR_STRIDE;
        ATTN_TRY(attn_add_tensor(&set, g->dbias, packed_bias ? 1 : p->batch, p->q_heads,
                                 p->q_len, p->kv_len, 1));
    }
    if (g->dsinks)
        ATTN_TRY(attn_add_array(&set, g->dsinks, p->batch * p->q_heads, sizeof(float), 1));
    return attn_check_disjoint(&set);
}

/* All checked before the problem is filled: nothing is written on error. */
static attn_status validate_backward(attn_problem *pb, const attn_shape *shape,
                                     const attn_options *opt, const attn_tensor *q,
                                     const attn_tensor *k, const attn_tensor *v,
                                     const attn_tensor *out, const attn_tensor *dout,
                                     const float *lse, const attn_grads *grads)
{
    attn_grads g;
    ATTN_TRY(read_grads(&g, grads, out, dout, lse));
    attn_problem p;
    ATTN_TRY(attn_validate(&p, &backward_op, shape, opt, q, k, v, g.dq, NULL));
    ATTN_TRY(check_supported(&p));
    ATTN_TRY(check_grad_dtypes(&p, &g, out, dout));
    ATTN_TRY(check_grad_ranges(&p, &g, q, k, v, out, dout, lse));

    *pb = p;
    pb->o = *out;
    pb->dout = *dout;
    pb->dk = *g.dk;
    pb->dv = *g.dv;
    if (g.dbias)
        pb->dbias = *g.dbias;
    pb->lse = lse;
    pb->dsinks = g.dsinks;
    return ATTN_OK;
}

attn_status attn_bwd_plan_blocks(const attn_dsp *dsp, const attn_shape *shape,
                                 const attn_options *opt, const attn_tensor *q,
                                 const attn_tensor *k, const attn_tensor *v,
                                 const attn_tensor *out, const attn_tensor *dout,
                                 const float *lse, const attn_grads *grads,
                                 int64_t *block_rows, int *fused)
{
    attn_problem pb;
    attn_status status = validate_backward(&pb, shape, opt, q, k, v, out, dout, lse, grads);
    if (status == ATTN_OK) {
        const task_plan p = plan_backward(dsp, &pb);
        *block_rows = p.block_rows;
        *fused = p.fused_blocks != 0;
    }
    return status;
}

attn_status attn_backward_with(const attn_dsp *dsp, const attn_shape *shape,
                               const attn_options *opt, const attn_tensor *q,
                               const attn_tensor *k, const attn_tensor *v,
                               const attn_tensor *out, const attn_tensor *dout,
                               const float *lse, const attn_grads *grads)
{
    attn_problem pb;
    attn_status status = validate_backward(&pb, shape, opt, q, k, v, out, dout, lse, grads);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

static attn_status checked_backward(const attn_shape *shape, const attn_options *opt,
                                    const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                                    const attn_tensor *out, const attn_tensor *dout, const float *lse,
                                    const attn_grads *grads)
{
    return attn_backward_with(attn_dsp_active(), shape, opt, q, k, v, out, dout, lse, grads);
}

attn_status attn_backward(const attn_shape *shape, const attn_options *opt,
                          const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                          const attn_tensor *out, const attn_tensor *dout, const float *lse,
                          const attn_grads *grads)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_backward", mark, checked_backward(shape, opt, q, k, v, out, dout, lse, grads));
}

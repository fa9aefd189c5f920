/* SPDX-License-Identifier: MIT */
/*
 * attn_forward: out = softmax(S) . V with an online softmax, one task per
 * block of query rows of a head group, keys in blocks of block_k over the
 * union of the rows' visible ranges (keys beyond kv_lens never touched).
 * The dense path lives here; split-KV, shared prefixes and top-k lists are
 * modules of their own (forward.h).
 */
#include <math.h>
#include <stdint.h>

#include "forward.h"
#include "internal.h"
#include "validate.h"

/*
 * Rows in segments. FP8 rows with scale groups and key rows with a tail are
 * read in place where the kernels can: Q.K^T runs each segment's kernel on
 * its columns, the scores sum_i fl(scale * s_ji) dot_i in f32; P.V runs per
 * V group on the weights times its scales. Each value is read once, rather
 * than written to an f32 stage and read again. One bound covers both (attn.h
 * at k_scale_group, tests/tolerance.h): the stage rounds each value, the
 * segments each factor and the partial sums. Staged instead: groups under
 * SEG_MIN_COLS (a kernel call per few values) or over SEG_MAX_GROUPS, the
 * modes that round the staged values (bf16, int8), and top-k lists (their
 * gathered rows are decoded once for every row, and MLA's V read from K's
 * decoded copy), and the ASYM formats (their scales are in their records).
 */
#define SEG_MIN_COLS 64
#define SEG_MAX_GROUPS 8

/*
 * Few rows (decode) with two groups or more go to qk_grp and pv_grp
 * (src/dsp.h): the stage's values and bits, without a stage, faster than
 * either way (docs/PERFORMANCE.md). One group per row stays a segment (a
 * factor per score is cheaper than one per value), and so do more rows.
 */
#define GRP_MAX_ROWS 8

static void plan_segments(const attn_dsp *dsp, const attn_problem *pb, task_plan *p)
{
    if (pb->opt.precision != ATTN_PRECISION_DEFAULT || pb->opt.topk_indices)
        return;
    /* ASYM records carry their scales: staged (their groups read no view) */
    if ((pb->k.data && attn_dtype_is_asym(pb->k.dtype)) || attn_dtype_is_asym(pb->v.dtype))
        return;
    const int few = p->rows <= GRP_MAX_ROWS;
    if (few && pb->k_group > 0 && pb->k_group % ATTN_GRP_STEP == 0 &&
        pb->k_group < attn_k_cols(pb) && !pb->k_tail_dim && dsp->qk_grp[pb->k.dtype])
        p->k_grp = 1;
    else if (attn_k_staged(pb)) {
        const int64_t g = pb->k_group ? pb->k_group : attn_k_cols(pb);
        if (g >= SEG_MIN_COLS && attn_k_cols(pb) / g <= SEG_MAX_GROUPS)
            p->k_segs = (int)(attn_k_cols(pb) / g + (pb->k_tail_dim > 0));
    }
    if (few && pb->v_group > 0 && pb->v_group % ATTN_GRP_STEP == 0 && pb->v_group < pb->v_dim &&
        dsp->pv_grp[pb->v.dtype])
        p->v_grp = 1;
    else if (pb->v_group >= SEG_MIN_COLS && pb->v_dim / pb->v_group <= SEG_MAX_GROUPS)
        p->v_segs = (int)(pb->v_dim / pb->v_group);
}

static int64_t forward_row_floats(const task_plan *p)
{
    return (p->q_direct ? 0 : p->q_stride) + p->block_k * (1 + (p->k_segs || p->v_segs)) +
           (p->acc_ws ? 0 : p->acc_stride);
}

static void plan_dense(const attn_dsp *dsp, const attn_problem *pb, task_plan *p)
{
    /* a block's rows share one stride without GQA stacking, or at one
       position: F32 queries read in place leave the scratch to more rows,
       so fewer passes over K and V */
    p->q_direct = pb->q.dtype == ATTN_DTYPE_F32 && (p->heads_per_group == 1 || pb->q_extent == 1);
    plan_segments(dsp, pb, p);
    const int64_t staged = attn_plan_stage(pb, p, p->block_k);
    p->block_rows = attn_block_rows_within(dsp, forward_row_floats(p), ATTN_SCRATCH_FLOATS - staged);
    /* Wide rows (MLA's 576/512: 25 of 128 heads beside their accumulators)
       keep those in the workspace where it has room: taller blocks, so K
       and V are read and packed fewer times. */
    if (pb->acc_workspace && p->block_rows < p->rows && p->block_rows < (int64_t)dsp->block_q) {
        p->acc_ws = 1;
        p->block_rows =
            attn_block_rows_within(dsp, forward_row_floats(p), ATTN_SCRATCH_FLOATS - staged);
    }
}

static task_plan plan_forward(const attn_dsp *dsp, const attn_problem *pb)
{
    task_plan p = attn_plan_common(dsp, pb, pb->group);
    if (pb->opt.topk_indices)
        attn_plan_topk(dsp, pb, &p);
    else
        plan_dense(dsp, pb, &p);
    if (pb->kv2) {
        int64_t direct_rows = 0;
        if (!pb->opt.topk_indices && !p.q_direct && pb->q.dtype == ATTN_DTYPE_F32) {
            task_plan d = p;
            d.q_direct = 1;
            direct_rows = attn_block_rows_within(dsp, forward_row_floats(&d),
                                                 ATTN_SCRATCH_FLOATS -
                                                     p.stage_keys * p.stage_stride);
        }
        attn_plan_extra(dsp, pb, &p, direct_rows);
    }
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    p.splits = pb->splits;
    p.tasks = (size_t)(pb->batch * (p.groups * p.blocks * p.splits));
    return p;
}

static void online_update(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                          online_row *o, float *s, int64_t kb, int64_t nk, float *acc,
                          int want_entropy)
{
    const int64_t a = attn_max64(row->lo, kb) - kb, z = attn_min64(row->hi, kb + nk) - kb;
    attn_score_epilogue(dsp, pb, row, s + a, kb + a + row->shift, z - a);
    attn_online_fold(dsp, pb, o, s, nk, a, z, acc, want_entropy);
}

void attn_forward_finish_row(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                             const online_row *o, float *acc)
{
    const attn_tensor *out = &pb->out;
    if (o->poisoned) {
        attn_fill_out_row(out, row->b, row->h, row->i, NAN, pb->v_dim);
        attn_write_stats(pb, row, NAN, NAN, NAN);
    } else if (o->m == -INFINITY) {
        attn_fill_out_row(out, row->b, row->h, row->i, 0.0f, pb->v_dim);
        attn_write_stats(pb, row, -INFINITY, -INFINITY, 0.0f);
    } else if (!attn_row_sees_keys(row)) { /* only the sink: acc was never started */
        attn_fill_out_row(out, row->b, row->h, row->i, 0.0f, pb->v_dim);
        attn_write_stats(pb, row, o->m, o->m, 0.0f);
    } else {
        dsp->row_scale(acc, (size_t)pb->v_dim, 1.0f / o->l);
        /* not folded into 1/l: v_scale / l could go subnormal */
        if (pb->v_scale != 1.0f)
            dsp->row_scale(acc, (size_t)pb->v_dim, pb->v_scale);
        attn_store_out_row(out, row->b, row->h, row->i, acc, pb->v_dim);
        const float log_l = logf(o->l);
        attn_write_stats(pb, row, o->m + log_l, o->m, fmaxf(0.0f, log_l - o->t / o->l));
    }
}

/* part: a tile like s for the partial scores. */
static void segment_scores(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                           const kv_src *ks, const kv_src *kss, const kv_src *tail,
                           const float *q, int64_t q_stride, size_t nr, int64_t kb, int64_t ke,
                           float *s, float *part)
{
    const int64_t nk = ke - kb, B = p->block_k;
    const int64_t g = pb->k_group ? pb->k_group : attn_k_cols(pb);
    float fac[ATTN_MAX_BLOCK_K];
    for (int i = 0; i < p->k_segs; i++) {
        const int is_tail = tail && i == p->k_segs - 1, scaled = pb->k_group && !is_tail;
        const kv_src *src = is_tail ? tail : ks;
        const int64_t col = i * g, cols = is_tail ? pb->k_tail_dim : g;
        const size_t at = is_tail ? 0 : (size_t)col;
        attn_qk_tile_fn *const qk = attn_qk_kernel_for(dsp, pb, src->t->dtype);
        for (int64_t j = kb, len; j < ke; j += len) {
            const char *kp = (const char *)attn_kv_run(src, j, ke, &len) + at;
            qk(q + col, q_stride, kp, src->stride, nr, (size_t)len, (size_t)cols,
               scaled ? 1.0f : pb->qk_scale, (i == 0 ? s : part) + (j - kb), B);
        }
        if (scaled)
            attn_kv_scales(kss, kb, ke, i, pb->scale, fac);
        for (size_t r = 0; r < nr; r++) {
            float *sr = s + (int64_t)r * B;
            const float *pr = part + (int64_t)r * B;
            if (i == 0 && scaled)
                for (int64_t c = 0; c < nk; c++)
                    sr[c] *= fac[c];
            else if (i > 0 && scaled)
                for (int64_t c = 0; c < nk; c++)
                    sr[c] += fac[c] * pr[c];
            else if (i > 0)
                for (int64_t c = 0; c < nk; c++)
                    sr[c] += pr[c];
        }
    }
}

/* A call per run whose rows and scales both lie at one stride (their
   views' pages may adjoin differently). */
static void grp_scores(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const kv_src *ks, const kv_src *kss, const float *q, int64_t q_stride,
                       size_t nr, int64_t kb, int64_t ke, float *s)
{
    attn_qk_grp_fn *const qk = dsp->qk_grp[pb->k.dtype];
    for (int64_t j = kb, len, slen; j < ke; j += len) {
        const void *kp = attn_kv_run(ks, j, ke, &len);
        const float *sp = (const float *)attn_kv_run(kss, j, j + len, &slen);
        len = slen;
        qk(q, q_stride, kp, ks->stride, nr, (size_t)len, (size_t)pb->head_dim, pb->qk_scale,
           s + (j - kb), p->block_k, sp, kss->stride, (size_t)pb->k_group);
    }
}

static void grp_values(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const kv_src *vs, const kv_src *vss, size_t nr, int64_t kb, int64_t ke,
                       const float *s, float *acc)
{
    attn_pv_grp_fn *const pv = dsp->pv_grp[pb->v.dtype];
    for (int64_t j = kb, len, slen; j < ke; j += len) {
        const void *vp = attn_kv_run(vs, j, ke, &len);
        const float *sp = (const float *)attn_kv_run(vss, j, j + len, &slen);
        len = slen;
        pv(s + (j - kb), p->block_k, vp, vs->stride, nr, (size_t)len, (size_t)pb->v_dim, acc,
           p->acc_stride, sp, vss->stride, (size_t)pb->v_group);
    }
}

static void segment_values(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                           const kv_src *vs, const kv_src *vss, size_t nr, int64_t kb, int64_t ke,
                           const float *s, float *part, float *acc)
{
    const int64_t nk = ke - kb, B = p->block_k, g = pb->v_group;
    attn_pv_tile_fn *const pv = dsp->pv_tile[pb->v.dtype];
    float fac[ATTN_MAX_BLOCK_K];
    for (int i = 0; i < p->v_segs; i++) {
        attn_kv_scales(vss, kb, ke, i, 1.0f, fac);
        for (size_t r = 0; r < nr; r++)
            for (int64_t c = 0; c < nk; c++)
                part[(int64_t)r * B + c] = s[(int64_t)r * B + c] * fac[c];
        for (int64_t j = kb, len; j < ke; j += len) {
            const char *vp = (const char *)attn_kv_run(vs, j, ke, &len) + i * g;
            pv(part + (j - kb), B, vp, vs->stride, nr, (size_t)len, (size_t)g, acc + i * g,
               p->acc_stride);
        }
    }
}

static void tile_scores(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                        const kv_views *kv, attn_qk_tile_fn *qk, float *stage, const float *q,
                        int64_t q_stride, size_t nr, int64_t kb, int64_t ke, float *s,
                        float *part)
{
    const kv_src *const tail = pb->k_tail_dim ? &kv->k_tail : NULL;
    if (p->k_segs) {
        segment_scores(dsp, pb, p, &kv->k, &kv->k_scales, tail, q, q_stride, nr, kb, ke, s,
                       part);
        return;
    }
    if (p->k_grp) {
        grp_scores(dsp, pb, p, &kv->k, &kv->k_scales, q, q_stride, nr, kb, ke, s);
        return;
    }
    for (int64_t j = kb, len; j < ke; j += len) {
        ptrdiff_t kstride;
        const void *kp = attn_kv_rows(dsp, &kv->k, &kv->k_scales, pb->k_group, tail, stage, p, j,
                                      ke, &len, &kstride);
        qk(q, q_stride, kp, kstride, nr, (size_t)len, (size_t)pb->head_dim, pb->qk_scale,
           s + (j - kb), p->block_k);
    }
}

/* pairs: pv is the bf16 kernel; base: the sequence's first key. */
static void tile_values(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                        const kv_views *kv, attn_pv_tile_fn *pv, int pairs, int64_t base,
                        float *stage, size_t nr, int64_t kb, int64_t ke, float *s, float *part,
                        float *acc)
{
    if (p->v_segs) {
        segment_values(dsp, pb, p, &kv->v, &kv->v_scales, nr, kb, ke, s, part, acc);
        return;
    }
    if (p->v_grp) {
        grp_values(dsp, pb, p, &kv->v, &kv->v_scales, nr, kb, ke, s, acc);
        return;
    }
    for (int64_t j = kb, len; j < ke; j += len) {
        /* bf16 P.V pairs keys 2m, 2m + 1 of a call: an odd start key gets
           a call of its own, so page or stage cuts do not change the pairs */
        const int64_t end = pairs && (j - base) % 2 ? j + 1 : ke;
        ptrdiff_t vstride;
        const void *vp = attn_kv_rows(dsp, &kv->v, &kv->v_scales, pb->v_group, NULL, stage, p, j,
                                      end, &len, &vstride);
        pv(s + (j - kb), p->block_k, vp, vstride, nr, (size_t)len, (size_t)pb->v_dim, acc,
           p->acc_stride);
    }
}

/* Blocks count from the sequence's first key, base: otherwise a packed
   sequence's online softmax would group its keys differently than alone. */
void attn_forward_keys(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t kv_seq, int64_t kv_head,
                       int64_t base, int64_t klo, int64_t khi, online_row *st, const float *q,
                       int64_t q_stride, float *sbuf, float *acc)
{
    /* the scratch past the scores and the accumulators */
    float *const rest = p->acc_ws ? sbuf + p->block_rows * p->block_k
                                  : acc + p->block_rows * p->acc_stride;
    if (pb->opt.topk_indices) { /* its bitmaps are uint64: 64-byte aligned (topk.c) */
        attn_forward_topk(dsp, pb, p, rows, n, kv_head, base, klo, khi, st, q, q_stride, sbuf,
                          acc, (float *)(((uintptr_t)rest + 63) & ~(uintptr_t)63));
        return;
    }
    const int want_entropy = pb->stats.entropy != NULL;
    attn_qk_tile_fn *const qk = attn_qk_kernel(dsp, pb);
    attn_pv_tile_fn *const pv = attn_pv_kernel(dsp, pb);
    const int pairs = pv != dsp->pv_tile[attn_v_kernel_dtype(pb)]; /* pv_bf16 */
    const kv_views kv = attn_kv_views_open(pb, kv_seq, kv_head);
    const int k_rows = pb->k_scales.data && !pb->k_group;
    const int v_rows = pb->v_scales.data && !pb->v_group;
    float *const stage = rest;
    float *const part = stage + p->stage_keys * p->stage_stride;
    float kfac[ATTN_MAX_BLOCK_K], vfac[ATTN_MAX_BLOCK_K];
    int64_t ulo, uhi;
    attn_visible_union(rows, n, &ulo, &uhi);
    ulo = attn_max64(ulo, klo);
    uhi = attn_min64(uhi, khi);
    for (int64_t k0 = ulo < uhi ? base + (ulo - base) / p->block_k * p->block_k : uhi; k0 < uhi;
         k0 += p->block_k) {
        const int64_t kb = attn_max64(k0, ulo), ke = attn_min64(k0 + p->block_k, uhi);
        const int64_t nk = ke - kb;
        if (k_rows)
            attn_kv_scales(&kv.k_scales, kb, ke, 0, pb->scale, kfac);
        if (v_rows)
            attn_kv_scales(&kv.v_scales, kb, ke, 0, 1.0f, vfac);
        for (int64_t r = 0, run_end; (run_end = attn_next_run(rows, n, &r, kb, ke)) > r;
             r = run_end) {
            const size_t nr = (size_t)(run_end - r);
            float *s = sbuf + r * p->block_k;
            tile_scores(dsp, pb, p, &kv, qk, stage, q + r * q_stride, q_stride, nr, kb, ke, s,
                        part + r * p->block_k);
            if (k_rows) /* qk_scale is 1 */
                attn_scale_columns(s, p->block_k, (int64_t)nr, kfac, nk);
            for (int64_t rr = r; rr < run_end; rr++)
                online_update(dsp, pb, &rows[rr], &st[rr], sbuf + rr * p->block_k, kb, nk,
                              acc + rr * p->acc_stride, want_entropy);
            /* after the sum and entropy took the weights */
            if (v_rows)
                attn_scale_columns(s, p->block_k, (int64_t)nr, vfac, nk);
            tile_values(dsp, pb, p, &kv, pv, pairs, base, stage, nr, kb, ke, s,
                        part + r * p->block_k, acc + r * p->acc_stride);
        }
    }
}

/* ------------------------------------------------------------ tasks */

/* On the calling thread, before the tasks. */
static void prepare_forward(const task_ctx *ctx)
{
    const attn_problem *pb = ctx->pb;
    if (ctx->plan.splits > 1)
        attn_split_reset(pb, &ctx->plan);
    if (!pb->prefix_parts)
        return;
    task_plan pp = ctx->plan;
    pp.q_direct = 0; /* rows of several sequences */
    pp.acc_ws = 0;   /* the workspace holds the forward's tasks' blocks */
    pp.block_rows = attn_block_rows_within(ctx->dsp, forward_row_floats(&pp),
                                           ATTN_SCRATCH_FLOATS - pp.stage_keys * pp.stage_stride);
    attn_prefix_round(ctx->dsp, pb, &pp);
}

static const float *task_queries(const attn_dsp *dsp, const attn_problem *pb,
                                 const task_plan *p, const row_ref *rows, int64_t n, float *qbuf,
                                 int64_t *q_stride)
{
    if (!p->q_direct) {
        attn_convert_queries(dsp, pb, p, rows, n, qbuf);
        *q_stride = p->q_stride;
        return qbuf;
    }
    *q_stride = p->heads_per_group > 1 ? pb->q.head_stride : pb->q.row_stride;
    return attn_row_ptr(&pb->q, rows[0].b, rows[0].h, rows[0].i);
}

/* With a shared prefix, chunk 0 starts from the prefix's stored chunks. */
static void start_rows(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t chunk, int64_t parts,
                       online_row *st, float *acc)
{
    const attn_split_ws pws = parts ? attn_split_ws_open(pb, pb->prefix_workspace,
                                                         pb->prefix_parts)
                                    : (attn_split_ws){0};
    for (int64_t r = 0; r < n; r++) {
        /* a sink is the row's first entry, without a value; counted once,
           in chunk 0 */
        const float sink = chunk == 0 ? attn_row_sink(pb, &rows[r]) : -INFINITY;
        st[r] = (online_row){-INFINITY, 0.0f, 0.0f, 0};
        if (isnan(sink) || sink == INFINITY)
            st[r].poisoned = 1;
        else if (sink != -INFINITY)
            st[r] = (online_row){sink, 1.0f, 0.0f, 0};
        if (attn_row_sees_keys(&rows[r]))
            attn_fill(acc + r * p->acc_stride, pb->v_dim, 0.0f);
        if (parts && chunk == 0 && rows[r].is_query)
            attn_split_merge(dsp, pb, &pws, &rows[r], parts, &st[r], acc + r * p->acc_stride);
    }
}

static void task_forward(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;

    _Alignas(64) float scratch[ATTN_SCRATCH_FLOATS];
    row_ref rows[ATTN_MAX_BLOCK_Q];
    online_row st[ATTN_MAX_BLOCK_Q];
    const size_t block = index / (size_t)p->splits;
    const int64_t chunk = (int64_t)(index % (size_t)p->splits);
    int64_t kv_head;
    int64_t n = attn_task_rows(pb, p, block, rows, &kv_head);
    if (n == 0)
        return; /* no chunk of it waits for a merge either */
    for (int64_t r = 0; pb->kv2 && r < n; r++) {
        const row_ref x = attn_extra_row(pb, &rows[r]);
        rows[r].extra = x.lo < x.hi;
    }
    const int64_t b = rows[0].b;
    /* keys [0, start): the shared prefix, attended by the prefix tasks */
    int64_t parts;
    const int64_t start = attn_prefix_start(pb, b, &parts);

    float *qbuf = scratch;
    float *sbuf = qbuf + (p->q_direct ? 0 : p->block_rows * p->q_stride);
    float *acc = p->acc_ws ? pb->acc_workspace + index * (size_t)(p->block_rows * p->acc_stride)
                           : sbuf + p->block_rows * p->block_k;
    int64_t q_stride;
    const float *q = task_queries(dsp, pb, p, rows, n, qbuf, &q_stride);
    start_rows(dsp, pb, p, rows, n, chunk, parts, st, acc);
    const int64_t base = pb->kv_offsets ? pb->kv_offsets[b] : 0;
    if (pb->kv2) { /* chunks of the second source's keys, chunk 0 with the first's */
        int64_t xsplits, xchunk;
        attn_split_seq(pb->kv2, p, b, 0, &xsplits, &xchunk);
        if (chunk >= xsplits)
            return;
        if (chunk == 0)
            attn_forward_keys(dsp, pb, p, rows, n, b, kv_head, base, base + start, INT64_MAX, st,
                              q, q_stride, sbuf, acc);
        const int64_t klo = xsplits > 1 ? chunk * xchunk : 0;
        attn_forward_extra(dsp, pb, p, rows, n, kv_head, klo, xsplits > 1 ? klo + xchunk : INT64_MAX,
                           st, q, q_stride, sbuf, acc);
        if (xsplits > 1) {
            attn_split_finish(dsp, pb, p, rows, n, block, chunk, xsplits, st, acc);
            return;
        }
        for (int64_t r = 0; r < n; r++)
            attn_forward_finish_row(dsp, pb, &rows[r], &st[r], acc + r * p->acc_stride);
        return;
    }
    int64_t splits, chunk_keys;
    attn_split_seq(pb, p, b, start, &splits, &chunk_keys);
    if (chunk >= splits)
        return;
    if (splits == 1) {
        attn_forward_keys(dsp, pb, p, rows, n, b, kv_head, base, base + start, INT64_MAX, st, q,
                          q_stride, sbuf, acc);
        for (int64_t r = 0; r < n; r++)
            attn_forward_finish_row(dsp, pb, &rows[r], &st[r], acc + r * p->acc_stride);
        return;
    }
    const int64_t klo = base + start + chunk * chunk_keys;
    attn_forward_keys(dsp, pb, p, rows, n, b, kv_head, base, klo, klo + chunk_keys, st, q,
                      q_stride, sbuf, acc);
    attn_split_finish(dsp, pb, p, rows, n, block, chunk, splits, st, acc);
}

/* ------------------------------------------------------------ entry points */


/* Every task's block of accumulators: tasks x block_rows <= batch x groups
   x splits x (rows + block_rows), whatever the ISA's blocks (64 bytes of
   slack align it). */
size_t attn_wide_need(const attn_shape *s, const attn_options *o, int64_t splits)
{
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    const size_t stride = (size_t)((v_dim + 15) & ~(int64_t)15);
    const size_t dims = (size_t)((s->head_dim + 15) & ~(int64_t)15) + stride;
    if (dims <= ATTN_WIDE_DIMS || o->topk_indices)
        return 0;
    const size_t rows = (size_t)s->q_len * (size_t)(s->q_heads / s->kv_heads) + ATTN_MAX_BLOCK_Q;
    size_t n;
    if (__builtin_mul_overflow((size_t)s->batch, (size_t)s->kv_heads, &n) ||
        __builtin_mul_overflow(n, (size_t)(splits > 1 ? splits : 1), &n) ||
        __builtin_mul_overflow(n, rows, &n) || __builtin_mul_overflow(n, stride, &n) ||
        __builtin_mul_overflow(n, sizeof(float), &n) || __builtin_add_overflow(n, 64, &n))
        return 0;
    return n;
}

/* Whether this call splits, shares prefixes and keeps wide rows'
   accumulators in the workspace: split's, prefixes', accumulators', an
   output. */
static attn_status forward_scratch(attn_problem *pb, const attn_options *o, attn_range_set *set)
{
    const attn_shape s = {pb->batch, pb->q_heads, pb->kv_heads, pb->q_len,
                          pb->kv_len, pb->head_dim, pb->v_dim};
    int64_t splits, parts;
    size_t need = attn_split_need(&s, o, &splits);
    const size_t pneed = attn_prefix_need(&s, o, &parts);
    const size_t have = o->workspace ? o->workspace_size : 0;
    if (splits > 1 && need == 0 && o->kv_splits >= 2)
        return ATTN_ERR_SHAPE;
    if (splits > 1 && (need == 0 || have < need)) {
        if (o->kv_splits >= 2)
            return ATTN_ERR_ARG; /* asked for, impossible: say so */
        splits = 1;              /* automatic: the documented unsplit fallback */
        need = 0;
    }
    /* without room, or with top-k lists (whose selections decide which
       prefix keys are read), each sequence reads its own prefix */
    const int shared = pneed > 0 && have >= need && have - need >= pneed && !o->topk_indices;
    const size_t used = need + (shared ? pneed : 0);
    /* then the wide rows' accumulators, where the rest has room for them */
    const size_t aneed = attn_wide_need(&s, o, splits);
    const int wide = aneed > 0 && have >= used && have - used >= aneed;
    if (splits > 1 || shared || wide)
        ATTN_TRY(attn_add_array(set, o->workspace, (int64_t)(used + (wide ? aneed : 0)), 1, 1));
    pb->splits = splits;
    pb->workspace = splits > 1 ? o->workspace : NULL;
    pb->prefix_parts = shared ? parts : 0;
    pb->prefix_workspace = shared ? (char *)o->workspace + need : NULL;
    pb->acc_workspace = wide ? (float *)(void *)(((uintptr_t)o->workspace + used + 63) &
                                                 ~(uintptr_t)63)
                             : NULL;
    return ATTN_OK;
}

const attn_op attn_forward_op = {
    .reads_qk = 1,
    .reads_v = 1,
    .out_cols = ATTN_OUT_V_DIM,
    .rounds_out = 1,
    .writes_stats = 1,
    .scratch = forward_scratch,
    .plan = plan_forward,
    .task = task_forward,
    .prepare = prepare_forward,
};

attn_status attn_forward_with(const attn_dsp *dsp, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *v,
                              const attn_tensor *out, const attn_row_stats *stats)
{
    attn_problem pb;
    attn_status status = attn_validate(&pb, &attn_forward_op, shape, opt, q, k, v, out, stats);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

static attn_status checked_forward(const attn_shape *shape, const attn_options *opt,
                                   const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                                   const attn_tensor *out, const attn_row_stats *stats)
{
    return attn_forward_with(attn_dsp_active(), shape, opt, q, k, v, out, stats);
}

attn_status attn_forward(const attn_shape *shape, const attn_options *opt,
                         const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                         const attn_tensor *out, const attn_row_stats *stats)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_forward", mark, checked_forward(shape, opt, q, k, v, out, stats));
}

static attn_status checked_forward_workspace_size(const attn_shape *shape, const attn_options *opt,
                                                  size_t *bytes)
{
    if (!shape || !bytes)
        return ATTN_ERR_NULL;
    attn_options o;
    ATTN_TRY(attn_check_shape_options(shape, opt, &o));
    int64_t splits, parts;
    size_t need = attn_split_need(shape, &o, &splits);
    const size_t pneed = attn_prefix_need(shape, &o, &parts);
    const size_t aneed = attn_wide_need(shape, &o, splits);
    if ((splits > 1 && need == 0) || (parts > 0 && pneed == 0) ||
        __builtin_add_overflow(need, pneed, &need) || __builtin_add_overflow(need, aneed, &need))
        return ATTN_ERR_SHAPE;
    *bytes = need;
    return ATTN_OK;
}

/* The most any contents of q_lens, kv_lens and shared_prefix can need. */
static attn_status checked_forward_workspace_bound(const attn_shape *shape,
                                                   const attn_options *opt, size_t *bytes)
{
    if (!shape || !bytes)
        return ATTN_ERR_NULL;
    attn_options o = ATTN_OPTIONS_INIT;
    ATTN_TRY(attn_read_options(&o, opt));
    const int lens = o.q_lens || o.kv_lens, prefix = o.shared_prefix != NULL;
    o.q_lens = o.kv_lens = o.q_offsets = o.kv_offsets = o.shared_prefix = NULL;
    o.tree_parents = o.topk_indices = NULL;
    o.block_table = NULL;
    o.block_table_stride = o.block_size = o.num_blocks = 0;
    o.flags &= ~ATTN_SHARED_BLOCK_TABLE;
    const int64_t topk = o.topk;
    o.topk = 0;
    attn_options checked;
    ATTN_TRY(attn_check_shape_options(shape, &o, &checked));
    const attn_shape s = *shape;
    const int64_t v_dim = s.v_dim ? s.v_dim : s.head_dim;
    const int64_t splits = attn_split_grid_bound(s.q_heads, s.kv_heads, s.q_len, s.kv_len, topk,
                                                 lens, o.kv_splits);
    size_t need = splits > 1 ? attn_split_bytes(s.batch, s.q_heads, s.q_len, v_dim, splits) : 0;
    const int64_t parts = prefix && !topk ? attn_prefix_chunks(s.kv_len) : 0;
    const size_t pneed = parts ? attn_split_bytes(s.batch, s.q_heads, s.q_len, v_dim, parts) : 0;
    /* top-k lists take no wide accumulators: the bound counts them in */
    const size_t aneed = attn_wide_need(&s, &o, splits);
    if ((splits > 1 && need == 0) || (parts > 0 && pneed == 0) ||
        __builtin_add_overflow(need, pneed, &need) || __builtin_add_overflow(need, aneed, &need))
        return attn_fail(ATTN_ERR_SHAPE, "the workspace would not fit size_t");
    *bytes = need;
    return ATTN_OK;
}

attn_status attn_forward_workspace_bound(const attn_shape *shape, const attn_options *opt,
                                         size_t *bytes)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_forward_workspace_bound", mark,
                           checked_forward_workspace_bound(shape, opt, bytes));
}

attn_status attn_forward_workspace_size(const attn_shape *shape, const attn_options *opt,
                                        size_t *bytes)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_forward_workspace_size", mark, checked_forward_workspace_size(shape, opt, bytes));
}

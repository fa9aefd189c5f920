/* SPDX-License-Identifier: MIT */
/*
 * attn_forward, the fused forward: out = softmax(S) . V with an online
 * softmax, one task per block of query rows of a head group. Per task, keys are visited in
 * blocks of block_k over the union of the rows' visible ranges; a block no
 * row sees is skipped, and keys beyond kv_lens are never touched. Within a
 * block, runs of consecutive rows that see it go through qk_tile / pv_tile
 * together.
 *
 * This file is the dense path, the plan, the tasks, the attn_op and the
 * entry points; the other paths are modules of their own (forward.h):
 * split-KV (split.c), shared prefixes attended once per group (prefix.c)
 * and top-k lists (topk.c).
 */
#include <math.h>
#include <stdint.h>

#include "forward.h"
#include "internal.h"
#include "validate.h"

/*
 * Rows in segments. FP8 rows with scale groups and key rows with a tail
 * (attn.h 1.8, 1.9) are read in place where the kernels can: Q.K^T runs the
 * kernel of each segment's dtype (a scale group of k, the tail) on its
 * columns with scale 1 (an unscaled k, or the tail: with the call's
 * qk_scale), and the scores are sum_i fl(scale * s_ji) dot_i, summed in
 * f32; P.V runs per V group on the weights times that group's scales. Each
 * value is then read once, as its own dtype (FP8 decode on a Zen 5 with
 * d 128 in one group: 0.77 ms against 1.25 ms through the f32 stage, whose
 * rows were written and read again). One bound covers both ways (attn.h
 * at k_scale_group, tests/tolerance.h): the stage rounds each value,
 * fl32(fp8 * s), the segments each factor, fl32(p s) or fl32(scale s),
 * and sum the partial scores. Groups of fewer than SEG_MIN_COLS
 * channels (ONNX Runtime's per channel: a kernel call per value) and more
 * than SEG_MAX_GROUPS per row stay staged, as do the modes whose kernels
 * round the staged f32 values (bf16, int8), and top-k lists: their
 * gathered rows are decoded once for every row of the task, and MLA's V,
 * the latent, is then read from K's decoded copy (segments on the gathered
 * bytes decoded each value twice, once per product: DeepSeek V3.2's FP8
 * rows, top-k 2048 of 32768, Hq 16, took 1.22 ms against 1.07 staged).
 */
#define SEG_MIN_COLS 64
#define SEG_MAX_GROUPS 8

/*
 * With few rows per task (decode: a GQA group's heads at one position)
 * rows of two groups or more, each a multiple of ATTN_GRP_STEP channels,
 * go to the qk_grp and pv_grp kernels instead (src/dsp.h): each value
 * times its scale where it is loaded, one call per run of keys, no
 * partial rows to sum. Those are the stage's values, so the bits are the
 * stage's (checkasm checks the kernels against the F32 ones on staged
 * rows). Decode Hq 32 Hkv 8 Lk 4096 d 128 on Zen 5, 1 thread, E4M3 in
 * groups of 64: 0.96 -> 0.84 ms, of 32: 1.35 -> 0.85 (segments), of 16:
 * 1.54 -> 0.88 (staged); E5M2 groups of 64 1.03 -> 0.83. One group per
 * row stays a segment (a factor per score: the kernel's product per value
 * measured 1-2 % slower), and more rows too, whose packed Q.K^T path sums
 * no score across lanes.
 */
#define GRP_MAX_ROWS 8

static void plan_segments(const attn_dsp *dsp, const attn_problem *pb, task_plan *p)
{
    if (pb->opt.precision != ATTN_PRECISION_DEFAULT || pb->opt.topk_indices)
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

/* Scratch floats per query row of a dense forward task: its query (unless
   read in place), score row, accumulator and (segments) partial row. */
static int64_t forward_row_floats(const task_plan *p)
{
    return (p->q_direct ? 0 : p->q_stride) + p->block_k * (1 + (p->k_segs || p->v_segs)) +
           p->acc_stride;
}

/* The dense path's plan: queries in place, segments or the stage, and the
   rows of a block. */
static void plan_dense(const attn_dsp *dsp, const attn_problem *pb, task_plan *p)
{
    /* Without GQA stacking a block's rows are consecutive positions of one
       head, at one stride, and with one query position (decode) they are
       consecutive heads of it, one head stride apart: F32 queries are then
       read where they lie, and the scratch their copy would take holds more
       rows (d 128: 64 instead of 42, which made prefill 7 % of the FMA peak
       faster on Zen 5: fewer passes over K and V, each K panel packed for
       more rows; MLA decode at d 576: 25 instead of 13). */
    p->q_direct = pb->q.dtype == ATTN_DTYPE_F32 && (p->heads_per_group == 1 || pb->q_extent == 1);
    plan_segments(dsp, pb, p);
    const int64_t staged = attn_plan_stage(pb, p, p->block_k); /* after the accumulator */
    p->block_rows = attn_block_rows_within(dsp, forward_row_floats(p), ATTN_SCRATCH_FLOATS - staged);
}

static task_plan plan_forward(const attn_dsp *dsp, const attn_problem *pb)
{
    task_plan p = attn_plan_common(dsp, pb, pb->group);
    if (pb->opt.topk_indices)
        attn_plan_topk(dsp, pb, &p);
    else
        plan_dense(dsp, pb, &p);
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    p.splits = pb->splits;
    p.tasks = (size_t)(pb->batch * (p.groups * p.blocks * p.splits));
    return p;
}

/* Folds one row's scores of keys [kb, kb + nk) into its online state, after
   the epilogue on the keys it sees (attn_online_fold's weights). */
static void online_update(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                          online_row *o, float *s, int64_t kb, int64_t nk, float *acc,
                          int want_entropy)
{
    const int64_t a = attn_max64(row->lo, kb) - kb, z = attn_min64(row->hi, kb + nk) - kb;
    attn_score_epilogue(dsp, pb, row, s + a, kb + a + row->shift, z - a);
    attn_online_fold(dsp, pb, o, s, nk, a, z, acc, want_entropy);
}

/* The output row is the normalised f32 row, rounded once into an F16/BF16
   out (the stats stay f32). */
void attn_forward_finish_row(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                             const online_row *o, float *acc)
{
    const attn_tensor *out = &pb->out;
    if (o->poisoned) {
        attn_fill_out_row(out, row->b, row->h, row->i, NAN, pb->v_dim);
        attn_write_stats(pb, row, NAN, NAN, NAN);
    } else if (o->m == -INFINITY) { /* no visible key, no sink */
        attn_fill_out_row(out, row->b, row->h, row->i, 0.0f, pb->v_dim);
        attn_write_stats(pb, row, -INFINITY, -INFINITY, 0.0f);
    } else if (row->lo >= row->hi) { /* only the sink: acc was never started */
        attn_fill_out_row(out, row->b, row->h, row->i, 0.0f, pb->v_dim);
        attn_write_stats(pb, row, o->m, o->m, 0.0f);
    } else {
        dsp->row_scale(acc, (size_t)pb->v_dim, 1.0f / o->l);
        /* FP8 v: its scale after the normaliser (not folded into it: v_scale / l
           could fall into the subnormal range and lose precision) */
        if (pb->v_scale != 1.0f)
            dsp->row_scale(acc, (size_t)pb->v_dim, pb->v_scale);
        attn_store_out_row(out, row->b, row->h, row->i, acc, pb->v_dim);
        const float log_l = logf(o->l);
        attn_write_stats(pb, row, o->m + log_l, o->m, fmaxf(0.0f, log_l - o->t / o->l));
    }
}

/* Scores of rows [0, nr) (q, rows q_stride apart) for keys [kb, ke) into s
   (rows block_k apart) from p->k_segs segments of the key rows (above);
   part: a tile of the same shape for the partial scores. */
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
        /* bytes into the row: a group of an FP8 row (one byte a value); the
           tail and an unscaled k start their rows */
        const size_t at = is_tail ? 0 : (size_t)col;
        attn_qk_tile_fn *const qk = attn_qk_kernel_for(dsp, pb, src->t->dtype);
        for (int64_t j = kb, len; j < ke; j += len) {
            const char *kp = (const char *)attn_kv_run(src, j, ke, &len) + at;
            qk(q + col, q_stride, kp, src->stride, nr, (size_t)len, (size_t)cols,
               scaled ? 1.0f : pb->qk_scale, (i == 0 ? s : part) + (j - kb), B);
        }
        if (scaled) /* each key's factor fl(scale * s_ji): one rounding */
            attn_kv_scales(kss, kb, ke, i, pb->scale, fac);
        /* the first segment's scores times their factors, then each next
           one's added (unscaled: the kernel applied the call's scale) */
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

/* Scores of rows [0, nr) for keys [kb, ke) into s (rows block_k apart)
   by qk_grp, and their P.V into acc by pv_grp (p->k_grp, p->v_grp: the
   scale groups read where they lie), a call per run of keys whose rows and
   scales both lie at one stride (their views' pages may adjoin
   differently). */
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

/* P.V of rows [0, nr) for keys [kb, ke) into acc (rows acc_stride apart)
   from the weights s (rows block_k apart), one V scale group at a time:
   its weights fl(p_j s_jg) in part, then the kernel of V's dtype on the
   group's columns. */
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

/* Q.K^T of the run of nr rows at q for keys [kb, ke) into s (rows block_k
   apart): by segments, by the grp kernel, or by the kernel of K's dtype on
   the cache's runs (or the stage's rows). */
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

/* P.V of the run of nr rows for keys [kb, ke) from the weights s into acc:
   by segments, by the grp kernel, or by the kernel of V's dtype on the
   cache's runs (or the stage's rows). `pairs`: pv is the bf16 kernel;
   `base`, the sequence's first key. */
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
        /* the bf16 P.V pairs keys 2m, 2m + 1 of a call: a run
           that starts at an odd key of the sequence gives that key
           a call of its own, so that the pairs are the same keys
           whether a page boundary (or a stage) cuts the run or not */
        const int64_t end = pairs && (j - base) % 2 ? j + 1 : ke;
        ptrdiff_t vstride;
        const void *vp = attn_kv_rows(dsp, &kv->v, &kv->v_scales, pb->v_group, NULL, stage, p, j,
                                      end, &len, &vstride);
        pv(s + (j - kb), p->block_k, vp, vstride, nr, (size_t)len, (size_t)pb->v_dim, acc,
           p->acc_stride);
    }
}

/* Keys are taken in blocks of block_k counted from the sequence's first key
   `base` (its kv_offsets entry): where its blocks start must not depend on
   where the sequence lies in the tensor, or its online softmax would group
   its keys differently alone and in a packed batch. */
void attn_forward_keys(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t kv_seq, int64_t kv_head,
                       int64_t base, int64_t klo, int64_t khi, online_row *st, const float *q,
                       int64_t q_stride, float *sbuf, float *acc)
{
    if (pb->opt.topk_indices) { /* the gather buffer follows the accumulator */
        attn_forward_topk(dsp, pb, p, rows, n, kv_head, base, klo, khi, st, q, q_stride, sbuf,
                          acc, acc + p->block_rows * p->acc_stride);
        return;
    }
    const int want_entropy = pb->stats.entropy != NULL;
    attn_qk_tile_fn *const qk = attn_qk_kernel(dsp, pb);
    attn_pv_tile_fn *const pv = attn_pv_kernel(dsp, pb);
    const int pairs = pv != dsp->pv_tile[attn_v_kernel_dtype(pb)]; /* pv_bf16 */
    /* FP8 scales per key row (attn.h 1.6), or per group of channels (1.8,
       the rows then decoded into the stage after the accumulator): their
       views, opened like k, v */
    const kv_views kv = attn_kv_views_open(pb, kv_seq, kv_head);
    const int k_rows = pb->k_scales.data && !pb->k_group;
    const int v_rows = pb->v_scales.data && !pb->v_group;
    float *const stage = acc + p->block_rows * p->acc_stride;
    /* segments (above): the partial scores, then the weights of a V group */
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
            if (k_rows) /* qk_scale is 1: each score times fl(scale * its key's scale) */
                attn_scale_columns(s, p->block_k, (int64_t)nr, kfac, nk);
            for (int64_t rr = r; rr < run_end; rr++)
                online_update(dsp, pb, &rows[rr], &st[rr], sbuf + rr * p->block_k, kb, nk,
                              acc + rr * p->acc_stride, want_entropy);
            /* the weights' sum (and entropy) are taken: each weight times
               its value row's scale before P.V */
            if (v_rows)
                attn_scale_columns(s, p->block_k, (int64_t)nr, vfac, nk);
            tile_values(dsp, pb, p, &kv, pv, pairs, base, stage, nr, kb, ke, s,
                        part + r * p->block_k, acc + r * p->acc_stride);
        }
    }
}

/* ------------------------------------------------------------ tasks */

/* Before the tasks, on the calling thread: the merge counters of a split,
   and the round of prefix tasks. */
static void prepare_forward(const task_ctx *ctx)
{
    const attn_problem *pb = ctx->pb;
    if (ctx->plan.splits > 1)
        attn_split_reset(pb, &ctx->plan);
    if (!pb->prefix_parts)
        return;
    task_plan pp = ctx->plan;
    pp.q_direct = 0; /* rows of several sequences: always converted */
    pp.block_rows = attn_block_rows_within(ctx->dsp, forward_row_floats(&pp),
                                           ATTN_SCRATCH_FLOATS - pp.stage_keys * pp.stage_stride);
    attn_prefix_round(ctx->dsp, pb, &pp);
}

/* The task's queries as the kernels read them, *q_stride floats apart:
   where they lie (q_direct), else converted into qbuf. */
static const float *task_queries(const attn_dsp *dsp, const attn_problem *pb,
                                 const task_plan *p, const row_ref *rows, int64_t n, float *qbuf,
                                 int64_t *q_stride)
{
    if (!p->q_direct) {
        attn_convert_queries(dsp, pb, p, rows, n, qbuf);
        *q_stride = p->q_stride;
        return qbuf;
    }
    /* a block's rows: positions, or the heads of one position (top-k) */
    *q_stride = p->heads_per_group > 1 ? pb->q.head_stride : pb->q.row_stride;
    return attn_row_ptr(&pb->q, rows[0].b, rows[0].h, rows[0].i);
}

/* The rows' states before their keys of chunk `chunk`, and their
   accumulators: with a shared prefix, chunk 0 starts from the prefix's
   `parts` stored chunks. */
static void start_rows(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t chunk, int64_t parts,
                       online_row *st, float *acc)
{
    const attn_split_ws pws = parts ? attn_split_ws_open(pb, pb->prefix_workspace,
                                                         pb->prefix_parts)
                                    : (attn_split_ws){0};
    for (int64_t r = 0; r < n; r++) {
        /* A sink starts the row as its first entry: max z, sum exp(z - z) = 1,
           no value (the accumulator stays 0 for it). Split-KV counts it once,
           in chunk 0, and so the shared prefix's states. */
        const float sink = chunk == 0 ? attn_row_sink(pb, &rows[r]) : -INFINITY;
        st[r] = (online_row){-INFINITY, 0.0f, 0.0f, 0};
        if (isnan(sink) || sink == INFINITY)
            st[r].poisoned = 1;
        else if (sink != -INFINITY)
            st[r] = (online_row){sink, 1.0f, 0.0f, 0};
        if (rows[r].lo < rows[r].hi)
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
        return; /* nothing of this block exists; a split counts it as done
                   nowhere, so no chunk of it waits for a merge either */
    const int64_t b = rows[0].b;
    /* keys [0, start) of this sequence: its group's shared prefix, which
       the prefix tasks attended */
    int64_t parts;
    const int64_t start = attn_prefix_start(pb, b, &parts);

    float *qbuf = scratch;
    float *sbuf = qbuf + (p->q_direct ? 0 : p->block_rows * p->q_stride);
    float *acc = sbuf + p->block_rows * p->block_k;
    int64_t q_stride;
    const float *q = task_queries(dsp, pb, p, rows, n, qbuf, &q_stride);
    start_rows(dsp, pb, p, rows, n, chunk, parts, st, acc);
    /* this sequence's own chunks (split.c): the grid's tasks past them have
       nothing to do */
    int64_t splits, chunk_keys;
    attn_split_seq(pb, p, b, start, &splits, &chunk_keys);
    if (chunk >= splits)
        return;
    const int64_t base = pb->kv_offsets ? pb->kv_offsets[b] : 0;
    if (splits == 1) {
        attn_forward_keys(dsp, pb, p, rows, n, b, kv_head, base, base + start, INT64_MAX, st, q,
                          q_stride, sbuf, acc);
        for (int64_t r = 0; r < n; r++)
            attn_forward_finish_row(dsp, pb, &rows[r], &st[r], acc + r * p->acc_stride);
        return;
    }
    /* chunks counted from the sequence's first own key, like the blocks */
    const int64_t klo = base + start + chunk * chunk_keys;
    attn_forward_keys(dsp, pb, p, rows, n, b, kv_head, base, klo, klo + chunk_keys, st, q,
                      q_stride, sbuf, acc);
    attn_split_finish(dsp, pb, p, rows, n, block, chunk, splits, st, acc);
}

/* ------------------------------------------------------------ entry points */


/* attn_op.scratch: whether this call splits and attends shared prefixes
   once, and its workspace (the split's, then the prefixes') as an output. */
static attn_status forward_scratch(attn_problem *pb, const attn_options *o, attn_range_set *set)
{
    const attn_shape s = {pb->batch, pb->q_heads, pb->kv_heads, pb->q_len,
                          pb->kv_len, pb->head_dim, pb->v_dim};
    int64_t splits, parts;
    size_t need = attn_split_need(&s, o, &splits);
    const size_t pneed = attn_prefix_need(&s, o, &parts);
    const size_t have = o->workspace ? o->workspace_size : 0;
    if (splits > 1 && need == 0 && o->kv_splits >= 2)
        return ATTN_ERR_SHAPE; /* its workspace would not fit size_t */
    if (splits > 1 && (need == 0 || have < need)) {
        if (o->kv_splits >= 2)
            return ATTN_ERR_ARG; /* asked for, impossible: say so */
        splits = 1;              /* automatic: the documented unsplit fallback */
        need = 0;
    }
    /* without room for the prefix states each sequence reads its prefix */
    /* (a sequence with top-k lists reads its prefix itself: its rows'
       selections decide which prefix keys are read at all) */
    const int shared = pneed > 0 && have >= need && have - need >= pneed && !o->topk_indices;
    if (splits > 1 || shared)
        ATTN_TRY(attn_add_array(set, o->workspace, (int64_t)(need + (shared ? pneed : 0)), 1, 1));
    pb->splits = splits;
    pb->workspace = splits > 1 ? o->workspace : NULL;
    pb->prefix_parts = shared ? parts : 0;
    pb->prefix_workspace = shared ? (char *)o->workspace + need : NULL;
    return ATTN_OK;
}

const attn_op attn_forward_op = {
    .reads_qk = 1,
    .reads_v = 1,
    .out_cols = ATTN_OUT_V_DIM,
    .rounds_out = 1, /* F32, F16 or BF16 out */
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
    if ((splits > 1 && need == 0) || (parts > 0 && pneed == 0) ||
        __builtin_add_overflow(need, pneed, &need))
        return ATTN_ERR_SHAPE; /* does not fit size_t */
    *bytes = need;
    return ATTN_OK;
}

/* The most any contents of q_lens, kv_lens and shared_prefix can need:
   the split of one query row over every key, and (with shared_prefix) a
   prefix of every key. */
static attn_status checked_forward_workspace_bound(const attn_shape *shape,
                                                   const attn_options *opt, size_t *bytes)
{
    if (!shape || !bytes)
        return ATTN_ERR_NULL;
    attn_options o = ATTN_OPTIONS_INIT;
    ATTN_TRY(attn_read_options(&o, opt));
    /* the arrays' contents are not read: only whether they are given */
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
    if ((splits > 1 && need == 0) || (parts > 0 && pneed == 0) ||
        __builtin_add_overflow(need, pneed, &need))
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

/* SPDX-License-Identifier: MIT */
/* The geometry, planning, epilogue and softmax that every operation shares. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "driver.h"
#include "half.h"

static int64_t round_up16(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* Row i of sequence b (i counted from its start) at its place in the tensors:
   the query row and the key positions shifted by the sequence's offsets. */
row_ref attn_make_row(const attn_problem *pb, int64_t b, int64_t h, int64_t i)
{
    const int64_t qo = pb->q_offsets ? pb->q_offsets[b] : 0;
    const int64_t ko = pb->kv_offsets ? pb->kv_offsets[b] : 0;
    const int64_t lq = pb->q_lens ? pb->q_lens[b] : pb->q_len;
    const int64_t lk = pb->kv_lens ? pb->kv_lens[b] : pb->kv_len;
    /* aligned: the query's position as a key index (q_pos/k_pos or
       bottom-right), what ALiBi measures from */
    row_ref row = {b, h, qo + i, ko, ko, 0, pb->kv_len, ko + i + attn_seq_rel(pb, b, lq, lk),
                   0, i < lq, 0};
    if (pb->kv_offsets) { /* only the sequence's own columns are written */
        row.col_lo = ko;
        row.col_hi = ko + lk;
    }
    int64_t lo, hi;
    attn_seq_keys(pb, b, i, &lo, &hi);
    if (hi > lo) {
        row.lo = ko + lo;
        row.hi = ko + hi;
    }
    return row;
}

int64_t attn_block_rows_within(const attn_dsp *dsp, int64_t per_row_floats, int64_t floats)
{
    int64_t fit = floats / per_row_floats;
    return attn_max64(1, attn_min64((int64_t)dsp->block_q, fit));
}

int64_t attn_block_rows_for(const attn_dsp *dsp, int64_t per_row_floats)
{
    return attn_block_rows_within(dsp, per_row_floats, ATTN_SCRATCH_FLOATS);
}

int64_t attn_plan_stage(const attn_problem *pb, task_plan *p, int64_t max_keys)
{
    const int64_t dim =
        attn_max64(attn_k_staged(pb) && !p->k_segs && !p->k_grp ? pb->head_dim : 0,
                   pb->v_group && !p->v_segs && !p->v_grp ? pb->v_dim : 0);
    if (dim == 0)
        return 0;
    p->stage_stride = round_up16(dim);
    /* a power of two, at most a tile's keys, of about 4 KiB (a stage that
       stays in L1 beside the tiles: smaller stages measured faster), 4 keys
       at least (wide rows: MLA's 512) */
    int64_t keys = 1;
    while (keys * 2 <= max_keys &&
           (keys * 2 * p->stage_stride <= 1024 || keys * 2 <= 4) &&
           keys * 2 * p->stage_stride <= ATTN_SCRATCH_FLOATS / 2)
        keys *= 2;
    p->stage_keys = keys;
    return keys * p->stage_stride;
}

task_plan attn_plan_common(const attn_dsp *dsp, const attn_problem *pb, int64_t heads_per_group)
{
    task_plan p;
    p.heads_per_group = heads_per_group;
    p.groups = pb->q_heads / p.heads_per_group;
    p.rows = pb->q_extent * p.heads_per_group;
    p.block_k = dsp->block_k;
    p.q_stride = round_up16(pb->head_dim);
    p.acc_stride = round_up16(pb->v_dim);
    p.block_rows = 1; /* each operation sets it, then blocks */
    p.blocks = 0;
    p.splits = 1;
    p.kv_blocks = 0;
    p.fused_blocks = 0;
    p.q_direct = 0;
    p.acc_ws = 0;
    p.gather_keys = 0;
    p.gather_floats = 0;
    p.topk_window = 0;
    p.stage_keys = 0;
    p.stage_stride = 0;
    p.k_segs = p.v_segs = p.k_grp = p.v_grp = 0;
    p.x_rows = p.x_block_k = p.x_gather_keys = p.x_gather_floats = p.x_window = 0;
    p.tasks = 0; /* each operation counts its own */
    return p;
}

int64_t attn_task_rows(const attn_problem *pb, const task_plan *p, size_t index, row_ref *rows,
                       int64_t *kv_head)
{
    int64_t blk = (int64_t)index % p->blocks;
    int64_t rest = (int64_t)index / p->blocks;
    int64_t group = rest % p->groups;
    int64_t b = rest / p->groups;
    int64_t r0 = blk * p->block_rows;
    int64_t n = attn_min64(p->block_rows, p->rows - r0);
    if (pb->q_offsets) { /* rows past the sequence's end are not ours to write */
        const int64_t lq = pb->q_lens ? pb->q_lens[b] : pb->q_len;
        n = attn_max64(0, attn_min64(n, lq * p->heads_per_group - r0));
    }
    for (int64_t r = 0; r < n; r++) {
        int64_t pos = (r0 + r) / p->heads_per_group;
        int64_t h = group * p->heads_per_group + (r0 + r) % p->heads_per_group;
        rows[r] = attn_make_row(pb, b, h, pos);
    }
    *kv_head = group * p->heads_per_group / pb->group;
    return n;
}

void attn_convert_queries(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                          const row_ref *rows, int64_t n, float *qbuf)
{
    for (int64_t r = 0; r < n; r++)
        if (attn_row_sees_keys(&rows[r]))
            dsp->to_f32[pb->q.dtype](attn_row_ptr(&pb->q, rows[r].b, rows[r].h, rows[r].i),
                                     qbuf + r * p->q_stride, (size_t)pb->head_dim);
}

void attn_visible_union(const row_ref *rows, int64_t n, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX;
    *hi = 0;
    for (int64_t r = 0; r < n; r++)
        if (rows[r].lo < rows[r].hi) {
            *lo = attn_min64(*lo, rows[r].lo);
            *hi = attn_max64(*hi, rows[r].hi);
        }
}

static int sees(const row_ref *row, int64_t kb, int64_t ke)
{
    return row->lo < ke && row->hi > kb && row->lo < row->hi;
}

int64_t attn_next_run(const row_ref *rows, int64_t n, int64_t *r, int64_t kb, int64_t ke)
{
    while (*r < n && !sees(&rows[*r], kb, ke))
        (*r)++;
    int64_t end = *r;
    while (end < n && sees(&rows[end], kb, ke))
        end++;
    return end;
}

/*
 * The draft tree (attn.h, attn_options.tree_parents) on the scores of keys
 * [k0, k0 + n) of one row: of the draft's keys in that range, only the
 * row's own and its ancestors' stay; the others become -inf. The ancestors
 * form a path of decreasing indices, walked once against the keys from the
 * last down: O(n + depth) per call, nothing where the range holds no draft
 * key (a decode's prefix blocks).
 */
static void tree_mask(const attn_problem *pb, const row_ref *row, float *s, int64_t k0, int64_t n)
{
    const int64_t b = row->b, lq = attn_seq_q_len(pb, b), lk = attn_seq_kv_len(pb, b);
    const int64_t qo = pb->q_offsets ? pb->q_offsets[b] : 0;
    const int64_t p0 = (pb->kv_offsets ? pb->kv_offsets[b] : 0) + lk - lq; /* draft key 0 */
    const int64_t t_lo = attn_max64(k0 - p0, 0), t_hi = attn_min64(k0 + n - p0, lq);
    if (t_lo >= t_hi || !row->is_query)
        return;
    const int32_t *par = pb->opt.tree_parents + b * pb->q_len + qo;
    int64_t a = row->i - qo; /* the query's own draft index, then its ancestors */
    while (a >= t_hi)
        a = par[a];
    for (int64_t t = t_hi - 1; t >= t_lo; t--) {
        if (t == a)
            a = par[a];
        else
            s[p0 + t - k0] = -INFINITY;
    }
}

void attn_score_epilogue(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                         float *s, int64_t k0, int64_t n)
{
    if (n <= 0)
        return;
    if (pb->opt.softcap > 0.0f)
        dsp->softcap(s, (size_t)n, pb->opt.softcap);
    attn_score_epilogue_after_softcap(dsp, pb, row, s, k0, n);
}

/*
 * The top-k selection (attn.h, "Top-k sparse attention") on the scores of
 * keys [k0, k0 + n) of one row: those its list does not name become -inf.
 * In chunks of TOPK_CHUNK keys, each marked from one pass over the list
 * (the list is a set in any order: O(topk) per chunk, no sorting).
 */
#define TOPK_CHUNK 1024
static void topk_mask(const attn_problem *pb, const row_ref *row, float *s, int64_t k0, int64_t n)
{
    const int32_t *list = attn_topk_list(pb, row);
    const int64_t j0 = k0 - (pb->kv_offsets ? pb->kv_offsets[row->b] : 0);
    uint64_t seen[TOPK_CHUNK / 64];
    for (int64_t c = 0; c < n; c += TOPK_CHUNK) {
        const int64_t m = attn_min64(TOPK_CHUNK, n - c);
        memset(seen, 0, sizeof seen);
        for (int64_t t = 0; t < pb->opt.topk; t++) {
            const int64_t x = (int64_t)list[t] - (j0 + c); /* -1 entries fall outside */
            if (x >= 0 && x < m)
                seen[x >> 6] |= (uint64_t)1 << (x & 63);
        }
        for (int64_t x = 0; x < m; x++)
            if (!(seen[x >> 6] >> (x & 63) & 1))
                s[c + x] = -INFINITY;
    }
}

void attn_score_epilogue_after_softcap(const attn_dsp *dsp, const attn_problem *pb,
                                       const row_ref *row, float *s, int64_t k0, int64_t n)
{
    attn_score_terms(dsp, pb, row, s, k0, n);
    if (n > 0 && pb->opt.topk_indices)
        topk_mask(pb, row, s, k0, n);
}

/*
 * The positional rules by each key's own position (attn.h, "Positions per
 * key slot") on the scores of keys [k0, k0 + n) of one row. ALiBi goes
 * through the alibi slot over each run of slots whose positions step by
 * one, so a key gets the bits it would get at that position in order
 * (validation kept every distance below 2^31, the slot's int32 lanes).
 * Then -inf for an empty slot and for a key the causal or window rules
 * hide.
 */
static void slot_terms(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row, float *s,
                       int64_t k0, int64_t n)
{
    const int64_t b = row->b, lq = attn_seq_q_len(pb, b), lk = attn_seq_kv_len(pb, b);
    const int64_t qo = pb->q_offsets ? pb->q_offsets[b] : 0;
    const int64_t qp = attn_query_pos(pb, b, row->i - qo, lq, lk);
    const int64_t *kp = pb->opt.k_positions + b * pb->kv_len + k0;
    if (pb->alibi.data) {
        const float slope = *(const float *)attn_row_ptr(&pb->alibi, b, row->h, 0);
        for (int64_t a = 0, z; a < n; a = z) {
            z = a + 1;
            if (kp[a] < 0) /* empty: masked below */
                continue;
            while (z < n && kp[z] == kp[z - 1] + 1)
                z++;
            dsp->alibi(s + a, (size_t)(z - a), slope, qp - kp[a]);
        }
    }
    const int causal = (pb->opt.flags & ATTN_CAUSAL) != 0;
    const int64_t W = pb->opt.window, R = pb->opt.window_right;
    for (int64_t t = 0; t < n; t++) {
        const int64_t p = kp[t];
        if (p < 0 || (causal && p > qp) || (W > 0 && qp - p >= W) || (R > 0 && p - qp >= R))
            s[t] = -INFINITY;
    }
}

/* Bias values an F16/BF16 bias row is widened by at a time (512 bytes of
   task stack). */
#define BIAS_PIECE 128

void attn_score_terms(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row, float *s,
                      int64_t k0, int64_t n)
{
    if (n <= 0)
        return;
    if (pb->bias.data && pb->bias.dtype == ATTN_DTYPE_F32)
        dsp->add_bias(s, (const float *)attn_row_ptr(&pb->bias, row->b, row->h, row->i) + k0,
                      (size_t)n);
    else if (pb->bias.data) { /* F16, BF16: widened exactly, a piece at a time */
        const unsigned char *at = (const unsigned char *)attn_row_ptr(&pb->bias, row->b, row->h,
                                                                      row->i);
        const size_t es = attn_dtype_size(pb->bias.dtype);
        float wide[BIAS_PIECE];
        for (int64_t c = 0; c < n; c += BIAS_PIECE) {
            const size_t m = (size_t)attn_min64(BIAS_PIECE, n - c);
            dsp->to_f32[pb->bias.dtype](at + (size_t)(k0 + c) * es, wide, m);
            dsp->add_bias(s + c, wide, m);
        }
    }
    if (pb->opt.k_positions) /* ALiBi and the positional masks, key by key */
        slot_terms(dsp, pb, row, s, k0, n);
    else if (pb->alibi.data) /* from positions: no bias table is ever formed */
        dsp->alibi(s, (size_t)n, *(const float *)attn_row_ptr(&pb->alibi, row->b, row->h, 0),
                   row->aligned - k0);
    if (pb->mask.data)
        dsp->mask_bool(s, (const uint8_t *)attn_row_ptr(&pb->mask, row->b, row->h, row->i) + k0,
                       (size_t)n);
    if (pb->opt.tree_parents)
        tree_mask(pb, row, s, k0, n);
}

float attn_row_sink(const attn_problem *pb, const row_ref *row)
{
    if (!pb->sinks.data || !row->is_query)
        return -INFINITY;
    return *(const float *)attn_row_ptr(&pb->sinks, row->b, row->h, 0);
}

void attn_softmax_segment(const attn_dsp *dsp, float *x, int64_t n, float sink, float *lse,
                          float *max_score, float *entropy, int want_entropy)
{
    float m = n > 0 ? dsp->row_max(x, (size_t)n) : -INFINITY;
    if (isnan(sink) || (!isnan(m) && sink > m)) /* a NaN sink must poison the row */
        m = sink;
    if (m == -INFINITY) {
        attn_fill(x, n, 0.0f);
        *lse = *max_score = -INFINITY;
        *entropy = 0.0f;
        return;
    }
    float weighted = 0.0f, sum = NAN;
    if (m <= FLT_MAX) { /* finite */
        sum = n > 0 ? dsp->exp_sum(x, (size_t)n, m, want_entropy ? &weighted : NULL) : 0.0f;
        if (sink != -INFINITY) { /* the sink's term: in the sum, never in x */
            const float e = expf(sink - m);
            sum += e;
            weighted += e * (sink - m);
        }
    }
    if (isnan(sum)) {
        attn_fill(x, n, NAN);
        *lse = *max_score = *entropy = NAN;
        return;
    }
    if (n > 0)
        dsp->row_scale(x, (size_t)n, 1.0f / sum);
    float log_sum = logf(sum);
    *lse = m + log_sum;
    *max_score = m;
    /* H = log l - sum e (s-m) / l >= 0 */
    *entropy = want_entropy ? fmaxf(0.0f, log_sum - weighted / sum) : 0.0f;
}

void attn_write_stats(const attn_problem *pb, const row_ref *row, float lse, float max_score,
                      float entropy)
{
    size_t at = (size_t)((row->b * pb->q_heads + row->h) * pb->q_len + row->i);
    if (pb->stats.lse)
        pb->stats.lse[at] = lse;
    if (pb->stats.max_score)
        pb->stats.max_score[at] = max_score;
    if (pb->stats.entropy)
        pb->stats.entropy[at] = entropy;
}

/* n values as 16-bit elements at dst (any alignment): F16 or BF16. */
static void store_halves(unsigned char *dst, const float *x, int64_t n, int32_t dtype)
{
    const int f16 = dtype == ATTN_DTYPE_F16;
    for (int64_t j = 0; j < n; j++) {
        const uint16_t h = f16 ? attn_f32_to_f16(x[j]) : attn_f32_to_bf16(x[j]);
        memcpy(dst + 2 * j, &h, sizeof h);
    }
}

void attn_store_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r, const float *x,
                        int64_t n)
{
    unsigned char *dst = (unsigned char *)attn_row_ptr(t, b, h, r);
    if (t->dtype == ATTN_DTYPE_F32)
        memcpy(dst, x, (size_t)n * sizeof(float));
    else
        store_halves(dst, x, n, t->dtype);
}

void attn_fill_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r, float value,
                       int64_t n)
{
    unsigned char *dst = (unsigned char *)attn_row_ptr(t, b, h, r);
    if (t->dtype == ATTN_DTYPE_F32) {
        attn_fill((float *)(void *)dst, n, value);
        return;
    }
    store_halves(dst, &value, 1, t->dtype); /* rounded once, then copied */
    for (int64_t j = 1; j < n; j++)
        memcpy(dst + 2 * j, dst, 2);
}

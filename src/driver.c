/*
 * The drivers: everything between a validated problem and the kernels.
 * Written once for every ISA; they call only through the kernel table.
 *
 * Work is cut into tasks by the shape alone (never by the thread count):
 * a task is one block of query rows of one batch entry and one head group.
 * For the fused forward a head group is all query heads sharing a KV head
 * (GQA), stacked position-major, so each K/V block is read once for all of
 * them; that is what makes decode run at memory speed. For the score
 * operations a group is one head, so output rows have a uniform stride and
 * the tile kernels write straight into the caller's table.
 *
 * Per task, keys are visited in blocks of block_k over the union of the
 * rows' visible ranges; a block no row sees is skipped, and keys beyond
 * kv_lens are never touched. Within a block, runs of consecutive rows that
 * see it go through qk_tile / pv_tile together.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "problem.h"

/* Task scratch (query block, score tile, accumulator): 64 KiB of stack. */
#define SCRATCH_FLOATS 16384

typedef struct task_plan {
    int64_t heads_per_group; /* query heads stacked in one block */
    int64_t groups;          /* q_heads / heads_per_group */
    int64_t rows;            /* rows of a group: q_len * heads_per_group */
    int64_t block_rows;
    int64_t blocks;          /* per group */
    int64_t q_stride;        /* f32 row stride of the converted query block */
    int64_t acc_stride;      /* f32 row stride of the accumulator */
    int64_t block_k;
} task_plan;

typedef struct task_ctx {
    const attn_dsp *dsp;
    const attn_problem *pb;
    task_plan plan;
} task_ctx;

/* One query row of a block. Visible keys are [lo, hi); empty when lo == hi. */
typedef struct row_ref {
    int64_t b, h, i, lo, hi;
} row_ref;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t round_up16(int64_t n) { return (n + 15) & ~(int64_t)15; }

static void fill(float *x, int64_t n, float value)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = value;
}

static const void *row_ptr(const attn_tensor *t, int64_t b, int64_t h, int64_t r)
{
    int64_t off = b * t->batch_stride + h * t->head_stride + r * t->row_stride;
    return (const char *)t->data + off * (int64_t)attn_dtype_size(t->dtype);
}

static float *out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r)
{
    return (float *)row_ptr(t, b, h, r);
}

/* The mask rules of attn.h that shape a row into one interval of keys. */
static row_ref make_row(const attn_problem *pb, int64_t b, int64_t h, int64_t i)
{
    row_ref row = {b, h, i, 0, 0};
    int64_t lq = pb->q_lens ? pb->q_lens[b] : pb->q_len;
    int64_t lk = pb->kv_lens ? pb->kv_lens[b] : pb->kv_len;
    if (i >= lq)
        return row;
    int64_t aligned = i + (lk - lq); /* bottom-right alignment */
    int64_t lo = 0, hi = lk;
    if (pb->flags & ATTN_CAUSAL)
        hi = min64(hi, aligned + 1);
    if (pb->window > 0 && aligned >= pb->window)
        lo = aligned - pb->window + 1;
    if (hi > lo) {
        row.lo = lo;
        row.hi = hi;
    }
    return row;
}

static size_t stat_index(const attn_problem *pb, const row_ref *row)
{
    return (size_t)((row->b * pb->q_heads + row->h) * pb->q_len + row->i);
}

static void write_stats(const attn_problem *pb, const row_ref *row, float lse, float max_score,
                        float entropy)
{
    size_t at = stat_index(pb, row);
    if (pb->stats.lse)
        pb->stats.lse[at] = lse;
    if (pb->stats.max_score)
        pb->stats.max_score[at] = max_score;
    if (pb->stats.entropy)
        pb->stats.entropy[at] = entropy;
}

/* softcap, then bias, then the BOOL mask on scores of keys [k0, k0 + n). */
static void score_epilogue(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                           float *s, int64_t k0, int64_t n)
{
    if (n <= 0)
        return;
    if (pb->softcap > 0.0f)
        dsp->softcap(s, (size_t)n, pb->softcap);
    if (pb->bias.data)
        dsp->add_bias(s, (const float *)row_ptr(&pb->bias, row->b, row->h, row->i) + k0, (size_t)n);
    if (pb->mask.data)
        dsp->mask_bool(s, (const uint8_t *)row_ptr(&pb->mask, row->b, row->h, row->i) + k0,
                       (size_t)n);
}

/*
 * Softmax of one segment in place; the stats follow attn.h: an empty or
 * all -inf segment gives zeros and (-inf, -inf, 0); a NaN or +inf score
 * makes the whole row NaN (so every ISA agrees on such rows).
 */
static void softmax_segment(const attn_dsp *dsp, float *x, int64_t n, float *lse,
                            float *max_score, float *entropy, int want_entropy)
{
    float m = n > 0 ? dsp->row_max(x, (size_t)n) : -INFINITY;
    if (m == -INFINITY) {
        fill(x, n, 0.0f);
        *lse = *max_score = -INFINITY;
        *entropy = 0.0f;
        return;
    }
    float weighted = 0.0f, sum = NAN;
    if (m <= FLT_MAX) /* finite */
        sum = dsp->exp_sum(x, (size_t)n, m, want_entropy ? &weighted : NULL);
    if (isnan(sum)) {
        fill(x, n, NAN);
        *lse = *max_score = *entropy = NAN;
        return;
    }
    dsp->row_scale(x, (size_t)n, 1.0f / sum);
    float log_sum = logf(sum);
    *lse = m + log_sum;
    *max_score = m;
    /* H = log l - sum e (s-m) / l >= 0 */
    *entropy = want_entropy ? fmaxf(0.0f, log_sum - weighted / sum) : 0.0f;
}

static int64_t block_rows_for(const attn_dsp *dsp, int64_t per_row_floats)
{
    int64_t fit = SCRATCH_FLOATS / per_row_floats;
    return max64(1, min64((int64_t)dsp->block_q, fit));
}

static task_plan make_plan(const attn_dsp *dsp, const attn_problem *pb)
{
    task_plan p;
    p.heads_per_group = pb->op == ATTN_OP_FORWARD ? pb->group : 1;
    p.groups = pb->q_heads / p.heads_per_group;
    p.rows = pb->q_len * p.heads_per_group;
    p.block_k = dsp->block_k;
    p.q_stride = round_up16(pb->head_dim);
    p.acc_stride = round_up16(pb->v_dim);
    if (pb->op == ATTN_OP_FORWARD)
        p.block_rows = block_rows_for(dsp, p.q_stride + p.block_k + p.acc_stride);
    else if (pb->op == ATTN_OP_MASK_APPLY)
        p.block_rows = dsp->block_q;
    else
        p.block_rows = block_rows_for(dsp, p.q_stride);
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    return p;
}

/* Rows of task `index`: fills rows[] and returns their count. */
static int64_t task_rows(const attn_problem *pb, const task_plan *p, size_t index, row_ref *rows,
                         int64_t *kv_head)
{
    int64_t blk = (int64_t)index % p->blocks;
    int64_t rest = (int64_t)index / p->blocks;
    int64_t group = rest % p->groups;
    int64_t b = rest / p->groups;
    int64_t r0 = blk * p->block_rows;
    int64_t n = min64(p->block_rows, p->rows - r0);
    for (int64_t r = 0; r < n; r++) {
        int64_t pos = (r0 + r) / p->heads_per_group;
        int64_t h = group * p->heads_per_group + (r0 + r) % p->heads_per_group;
        rows[r] = make_row(pb, b, h, pos);
    }
    *kv_head = group * p->heads_per_group / pb->group;
    return n;
}

static void convert_queries(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                            const row_ref *rows, int64_t n, float *qbuf)
{
    for (int64_t r = 0; r < n; r++)
        if (rows[r].lo < rows[r].hi)
            dsp->to_f32[pb->q.dtype](row_ptr(&pb->q, rows[r].b, rows[r].h, rows[r].i),
                                     qbuf + r * p->q_stride, (size_t)pb->head_dim);
}

static void visible_union(const row_ref *rows, int64_t n, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX;
    *hi = 0;
    for (int64_t r = 0; r < n; r++)
        if (rows[r].lo < rows[r].hi) {
            *lo = min64(*lo, rows[r].lo);
            *hi = max64(*hi, rows[r].hi);
        }
}

static int sees(const row_ref *row, int64_t kb, int64_t ke)
{
    return row->lo < ke && row->hi > kb && row->lo < row->hi;
}

/*
 * Advances *r to the next row that sees keys [kb, ke) and returns the end of
 * the run of consecutive rows that do; returns *r == n when none is left.
 */
static int64_t next_run(const row_ref *rows, int64_t n, int64_t *r, int64_t kb, int64_t ke)
{
    while (*r < n && !sees(&rows[*r], kb, ke))
        (*r)++;
    int64_t end = *r;
    while (end < n && sees(&rows[end], kb, ke))
        end++;
    return end;
}

/* ------------------------------------------------------------ fused forward */

typedef struct online_row {
    float m, l, t; /* running max, sum of exp(s - m), sum of exp(s - m) * (s - m) */
    int poisoned;  /* a NaN or +inf score was seen: the row's result is NaN */
} online_row;

static void forward_task(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;

    _Alignas(64) float scratch[SCRATCH_FLOATS];
    row_ref rows[ATTN_MAX_BLOCK_Q];
    online_row st[ATTN_MAX_BLOCK_Q];
    int64_t kv_head;
    int64_t n = task_rows(pb, p, index, rows, &kv_head);

    float *qbuf = scratch;
    float *sbuf = qbuf + p->block_rows * p->q_stride;
    float *acc = sbuf + p->block_rows * p->block_k;
    const int want_entropy = pb->stats.entropy != NULL;
    const size_t k_size = attn_dtype_size(pb->k.dtype), v_size = attn_dtype_size(pb->v.dtype);
    const char *k_head = (const char *)row_ptr(&pb->k, rows[0].b, kv_head, 0);
    const char *v_head = (const char *)row_ptr(&pb->v, rows[0].b, kv_head, 0);

    convert_queries(dsp, pb, p, rows, n, qbuf);
    for (int64_t r = 0; r < n; r++) {
        st[r] = (online_row){-INFINITY, 0.0f, 0.0f, 0};
        if (rows[r].lo < rows[r].hi)
            fill(acc + r * p->acc_stride, pb->v_dim, 0.0f);
    }

    int64_t ulo, uhi;
    visible_union(rows, n, &ulo, &uhi);
    for (int64_t k0 = ulo < uhi ? ulo / p->block_k * p->block_k : uhi; k0 < uhi; k0 += p->block_k) {
        const int64_t kb = max64(k0, ulo), ke = min64(k0 + p->block_k, uhi), nk = ke - kb;
        const void *k_block = k_head + kb * pb->k.row_stride * (int64_t)k_size;
        const void *v_block = v_head + kb * pb->v.row_stride * (int64_t)v_size;
        for (int64_t r = 0, run_end; (run_end = next_run(rows, n, &r, kb, ke)) > r; r = run_end) {
            dsp->qk_tile[pb->k.dtype](qbuf + r * p->q_stride, p->q_stride, k_block,
                                      pb->k.row_stride, (size_t)(run_end - r), (size_t)nk,
                                      (size_t)pb->head_dim, pb->scale, sbuf + r * p->block_k,
                                      p->block_k);
            for (int64_t rr = r; rr < run_end; rr++) {
                float *s = sbuf + rr * p->block_k;
                online_row *o = &st[rr];
                const int64_t a = max64(rows[rr].lo, kb) - kb, z = min64(rows[rr].hi, ke) - kb;
                score_epilogue(dsp, pb, &rows[rr], s + a, kb + a, z - a);
                float bm = o->poisoned ? -INFINITY : dsp->row_max(s + a, (size_t)(z - a));
                if (isnan(bm) || bm == INFINITY)
                    o->poisoned = 1;
                if (o->poisoned || bm == -INFINITY) {
                    fill(s, nk, 0.0f); /* nothing visible here: weight 0 */
                    continue;
                }
                const float m_new = bm > o->m ? bm : o->m;
                if (o->m != -INFINITY && m_new != o->m) { /* rescale what we have */
                    const float alpha = expf(o->m - m_new);
                    dsp->row_scale(acc + rr * p->acc_stride, (size_t)pb->v_dim, alpha);
                    o->t = alpha * (o->t + o->l * (o->m - m_new));
                    o->l *= alpha;
                }
                float weighted = 0.0f;
                float sum = dsp->exp_sum(s + a, (size_t)(z - a), m_new,
                                         want_entropy ? &weighted : NULL);
                if (isnan(sum)) {
                    o->poisoned = 1;
                    fill(s, nk, 0.0f);
                    continue;
                }
                o->m = m_new;
                o->l += sum;
                o->t += weighted;
                fill(s, a, 0.0f);
                fill(s + z, nk - z, 0.0f);
            }
            dsp->pv_tile[pb->v.dtype](sbuf + r * p->block_k, p->block_k, v_block,
                                      pb->v.row_stride, (size_t)(run_end - r), (size_t)nk,
                                      (size_t)pb->v_dim, acc + r * p->acc_stride, p->acc_stride);
        }
    }

    for (int64_t r = 0; r < n; r++) {
        const row_ref *row = &rows[r];
        const online_row *o = &st[r];
        float *dst = out_row(&pb->out, row->b, row->h, row->i);
        if (o->poisoned) {
            fill(dst, pb->v_dim, NAN);
            write_stats(pb, row, NAN, NAN, NAN);
        } else if (o->m == -INFINITY) { /* no visible key */
            fill(dst, pb->v_dim, 0.0f);
            write_stats(pb, row, -INFINITY, -INFINITY, 0.0f);
        } else {
            float *a = acc + r * p->acc_stride;
            dsp->row_scale(a, (size_t)pb->v_dim, 1.0f / o->l);
            memcpy(dst, a, (size_t)pb->v_dim * sizeof(float));
            const float log_l = logf(o->l);
            write_stats(pb, row, o->m + log_l, o->m, fmaxf(0.0f, log_l - o->t / o->l));
        }
    }
}

/* ------------------------------------------------------------ scores and weights */

static void scores_task(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;

    _Alignas(64) float qbuf[SCRATCH_FLOATS];
    row_ref rows[ATTN_MAX_BLOCK_Q];
    int64_t kv_head;
    int64_t n = task_rows(pb, p, index, rows, &kv_head);
    const int64_t out_stride = pb->out.row_stride;
    float *out0 = out_row(&pb->out, rows[0].b, rows[0].h, rows[0].i);
    const char *k_head = (const char *)row_ptr(&pb->k, rows[0].b, kv_head, 0);
    const size_t k_size = attn_dtype_size(pb->k.dtype);

    convert_queries(dsp, pb, p, rows, n, qbuf);
    int64_t ulo, uhi;
    visible_union(rows, n, &ulo, &uhi);
    for (int64_t k0 = ulo < uhi ? ulo / p->block_k * p->block_k : uhi; k0 < uhi; k0 += p->block_k) {
        const int64_t kb = max64(k0, ulo), ke = min64(k0 + p->block_k, uhi), nk = ke - kb;
        for (int64_t r = 0, run_end; (run_end = next_run(rows, n, &r, kb, ke)) > r; r = run_end)
            dsp->qk_tile[pb->k.dtype](qbuf + r * p->q_stride, p->q_stride,
                                      k_head + kb * pb->k.row_stride * (int64_t)k_size,
                                      pb->k.row_stride, (size_t)(run_end - r), (size_t)nk,
                                      (size_t)pb->head_dim, pb->scale, out0 + r * out_stride + kb,
                                      out_stride);
    }

    for (int64_t r = 0; r < n; r++) {
        const row_ref *row = &rows[r];
        float *s = out0 + r * out_stride;
        const int64_t lo = row->lo, hi = row->hi;
        score_epilogue(dsp, pb, row, s + lo, lo, hi - lo);
        if (pb->op == ATTN_OP_WEIGHTS) {
            float lse, max_score, entropy;
            softmax_segment(dsp, s + lo, hi - lo, &lse, &max_score, &entropy,
                            pb->stats.entropy != NULL);
            write_stats(pb, row, lse, max_score, entropy);
            fill(s, lo, 0.0f);
            fill(s + hi, pb->kv_len - hi, 0.0f);
        } else {
            fill(s, lo, -INFINITY);
            fill(s + hi, pb->kv_len - hi, -INFINITY);
        }
    }
}

static void mask_apply_task(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_problem *pb = ctx->pb;
    row_ref rows[ATTN_MAX_BLOCK_Q];
    int64_t kv_head;
    int64_t n = task_rows(pb, &ctx->plan, index, rows, &kv_head);
    for (int64_t r = 0; r < n; r++) {
        const row_ref *row = &rows[r];
        float *s = out_row(&pb->out, row->b, row->h, row->i);
        score_epilogue(ctx->dsp, pb, row, s + row->lo, row->lo, row->hi - row->lo);
        fill(s, row->lo, -INFINITY);
        fill(s + row->hi, pb->kv_len - row->hi, -INFINITY);
    }
}

void attn_run(const attn_dsp *dsp, const attn_problem *pb)
{
    task_ctx ctx = {dsp, pb, make_plan(dsp, pb)};
    attn_task_fn fn = pb->op == ATTN_OP_FORWARD      ? forward_task
                      : pb->op == ATTN_OP_MASK_APPLY ? mask_apply_task
                                                     : scores_task;
    size_t count = (size_t)(pb->batch * ctx.plan.groups * ctx.plan.blocks);
    if (pb->parallel_for) {
        pb->parallel_for(pb->parallel_ctx, fn, &ctx, count);
    } else {
        for (size_t i = 0; i < count; i++)
            fn(&ctx, i);
    }
}

/* ------------------------------------------------------------ row operations */

void attn_run_softmax(const attn_dsp *dsp, float *x, int64_t rows, int64_t cols,
                      int64_t row_stride, float *lse)
{
    for (int64_t r = 0; r < rows; r++) {
        float row_lse, max_score, entropy;
        softmax_segment(dsp, x + r * row_stride, cols, &row_lse, &max_score, &entropy, 0);
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

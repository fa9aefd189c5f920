/* SPDX-License-Identifier: MIT */
/*
 * The forward's split-KV path (attn.h, "Split-KV"). A sequence splits as it
 * would alone (src/problem.h). Each chunk's task leaves its online state and
 * unnormalised output in the workspace; the task finishing a block's last
 * chunk (an atomic count elects it) merges the chunks in chunk order and
 * writes the rows: which task merges varies, what it computes does not.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "forward.h"

/* Before rounding chunks to ATTN_SPLIT_ALIGN; 1: whole. */
static int64_t split_want(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                          int64_t topk, int32_t kv_splits)
{
    if (kv_splits == 1 || kv_len <= 0)
        return 1;
    if (kv_splits >= 2)
        return attn_min64(kv_splits, (kv_len + ATTN_SPLIT_ALIGN - 1) / ATTN_SPLIT_ALIGN);
    /* unsplit tasks in blocks of 64 rows of one KV head (no ISA's block is
       larger): with enough of them every core is busy without splitting */
    const int64_t group_rows = attn_max64(q_len, 1) * (q_heads / kv_heads);
    const int64_t units = kv_heads * ((group_rows + 63) / 64);
    if (units >= ATTN_SPLIT_TARGET)
        return 1;
    const int64_t keys = topk > 0 ? attn_min64(kv_len, topk) : kv_len;
    return attn_min64((ATTN_SPLIT_TARGET + units - 1) / units, keys / ATTN_SPLIT_MIN_CHUNK);
}

void attn_split_plan(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                     int64_t topk, int32_t kv_splits, int64_t *splits, int64_t *chunk)
{
    *splits = 1;
    *chunk = kv_len;
    const int64_t want = split_want(q_heads, kv_heads, q_len, kv_len, topk, kv_splits);
    if (want < 2)
        return;
    const int64_t per = (kv_len + want - 1) / want;
    const int64_t c = (per + ATTN_SPLIT_ALIGN - 1) / ATTN_SPLIT_ALIGN * ATTN_SPLIT_ALIGN;
    const int64_t s = (kv_len + c - 1) / c;
    if (s < 2)
        return;
    *splits = s;
    *chunk = c;
}

/* The largest want of the call's sequences with query rows. */
int64_t attn_split_grid(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len,
                        int64_t kv_len, int64_t topk, const int32_t *q_lens,
                        const int32_t *kv_lens, int32_t kv_splits)
{
    int64_t grid = 1;
    for (int64_t b = 0; b < batch; b++) {
        /* attn_forward_workspace_size reads the lengths unchecked */
        const int64_t lq = q_lens ? attn_min64(q_lens[b], q_len) : q_len;
        const int64_t lk = kv_lens ? attn_max64(0, attn_min64(kv_lens[b], kv_len)) : kv_len;
        if (lq > 0)
            grid = attn_max64(grid, split_want(q_heads, kv_heads, lq, lk, topk, kv_splits));
        if (!q_lens && !kv_lens)
            break;
    }
    return grid;
}

int64_t attn_split_grid_bound(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                              int64_t topk, int lens_given, int32_t kv_splits)
{
    /* split_want grows as rows fall and keys grow: one row and every key
       bound it */
    return split_want(q_heads, kv_heads, lens_given ? attn_min64(q_len, 1) : q_len, kv_len, topk,
                      kv_splits);
}

static int add_rounded(size_t *total, size_t bytes)
{
    size_t r;
    if (__builtin_add_overflow(bytes, (size_t)63, &r))
        return 0;
    r &= ~(size_t)63;
    return !__builtin_add_overflow(*total, r, total);
}

size_t attn_split_bytes(int64_t batch, int64_t q_heads, int64_t q_len, int64_t v_dim,
                        int64_t splits)
{
    attn_split_layout l;
    if (!attn_split_layout_of(batch, q_heads, q_len, v_dim, splits, &l))
        return 0;
    return l.bytes;
}

int attn_split_layout_of(int64_t batch, int64_t q_heads, int64_t q_len, int64_t v_dim,
                         int64_t splits, attn_split_layout *l)
{
    /* validated to fit int64; their products may still exceed size_t */
    size_t rows, parts, acc_floats, b;
    const size_t acc_stride = (size_t)((v_dim + 15) & ~(int64_t)15);
    if (__builtin_mul_overflow((size_t)batch, (size_t)q_heads, &rows) ||
        __builtin_mul_overflow(rows, (size_t)q_len, &rows) ||
        __builtin_mul_overflow(rows, (size_t)splits, &parts) ||
        __builtin_mul_overflow(parts, acc_stride, &acc_floats))
        return 0;
    size_t total = 64; /* slack to align the caller's pointer to 64 bytes */
    l->counters_at = 0;
    if (__builtin_mul_overflow(rows, sizeof(int), &b) || !add_rounded(&total, b))
        return 0;
    l->states_at = total - 64;
    if (__builtin_mul_overflow(parts, 4 * sizeof(float), &b) || !add_rounded(&total, b))
        return 0;
    l->acc_at = total - 64;
    if (__builtin_mul_overflow(acc_floats, sizeof(float), &b) ||
        __builtin_add_overflow(total, b, &total))
        return 0;
    l->acc_stride = (int64_t)acc_stride;
    l->bytes = total;
    return 1;
}

/* ------------------------------------------------------------ the workspace */

attn_split_ws attn_split_ws_open(const attn_problem *pb, void *mem, int64_t parts)
{
    attn_split_layout l;
    attn_split_layout_of(pb->batch, pb->q_heads, pb->q_len, pb->v_dim, parts, &l);
    char *base = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    return (attn_split_ws){(atomic_int *)(void *)(base + l.counters_at),
                           (float *)(void *)(base + l.states_at),
                           (float *)(void *)(base + l.acc_at), l.acc_stride, parts};
}

static attn_split_ws split_open(const attn_problem *pb)
{
    return attn_split_ws_open(pb, pb->workspace, pb->splits);
}

static int64_t row_index(const attn_problem *pb, const row_ref *row)
{
    return (row->b * pb->q_heads + row->h) * pb->q_len + row->i;
}

void attn_split_store(const attn_problem *pb, const attn_split_ws *ws, const task_plan *p,
                      const row_ref *rows, int64_t n, int64_t c, const online_row *st,
                      const float *acc)
{
    for (int64_t r = 0; r < n; r++) {
        const int64_t at = row_index(pb, &rows[r]) * ws->parts + c;
        float *state = ws->states + at * 4;
        state[0] = st[r].m;
        state[1] = st[r].l;
        state[2] = st[r].t;
        state[3] = (float)st[r].poisoned;
        /* a row that sees no key at all has no accumulator (only a sink) */
        if (!st[r].poisoned && st[r].m != -INFINITY && attn_row_sees_keys(&rows[r]))
            memcpy(ws->acc + at * ws->acc_stride, acc + r * p->acc_stride,
                   (size_t)pb->v_dim * sizeof(float));
    }
}

void attn_split_merge(const attn_dsp *dsp, const attn_problem *pb, const attn_split_ws *ws,
                      const row_ref *row, int64_t parts, online_row *o, float *acc)
{
    const int64_t first = row_index(pb, row) * ws->parts;
    const online_row in = *o;
    if (in.poisoned)
        return;
    for (int64_t c = 0; c < parts; c++) {
        const float *state = ws->states + (first + c) * 4;
        if (state[3] != 0.0f)
            o->poisoned = 1;
        else if (state[0] > o->m)
            o->m = state[0];
    }
    if (o->poisoned || o->m == -INFINITY)
        return;
    o->l = o->t = 0.0f;
    if (in.m != -INFINITY) { /* the sink's entry */
        const float alpha = expf(in.m - o->m);
        o->l += alpha * in.l;
        o->t += alpha * (in.t + in.l * (in.m - o->m));
    }
    /* else only a sink: attn_forward_finish_row needs none */
    const int has_acc = attn_row_sees_keys(row);
    const float *x[ATTN_WSUM_MAX_PARTS];
    float w[ATTN_WSUM_MAX_PARTS];
    size_t k = 0;
    if (has_acc)
        attn_fill(acc, pb->v_dim, 0.0f);
    for (int64_t c = 0; c < parts; c++) {
        const float *state = ws->states + (first + c) * 4;
        if (state[0] == -INFINITY)
            continue; /* its acc was not written */
        const float alpha = expf(state[0] - o->m);
        o->l += alpha * state[1];
        o->t += alpha * (state[2] + state[1] * (state[0] - o->m));
        if (!has_acc)
            continue;
        w[k] = alpha;
        x[k++] = ws->acc + (first + c) * ws->acc_stride;
        if (k == ATTN_WSUM_MAX_PARTS) {
            dsp->wsum(acc, x, w, k, (size_t)pb->v_dim);
            k = 0;
        }
    }
    if (k)
        dsp->wsum(acc, x, w, k, (size_t)pb->v_dim);
}

/* ------------------------------------------------------------ the forward's chunks */

void attn_split_reset(const attn_problem *pb, const task_plan *p)
{
    const attn_split_ws ws = split_open(pb);
    for (size_t u = 0; u < p->tasks / (size_t)p->splits; u++)
        atomic_init(&ws.done[u], 0);
}

/* Without query rows it stays whole: the grid does not count it. */
void attn_split_seq(const attn_problem *pb, const task_plan *p, int64_t b, int64_t start,
                    int64_t *splits, int64_t *chunk_keys)
{
    *splits = 1;
    *chunk_keys = 0;
    const int64_t seq_rows = attn_seq_q_len(pb, b);
    if (p->splits > 1 && seq_rows > 0)
        attn_split_plan(pb->q_heads, pb->kv_heads, seq_rows, attn_seq_kv_len(pb, b) - start,
                        pb->opt.topk_indices ? pb->opt.topk : 0, pb->opt.kv_splits, splits,
                        chunk_keys);
}

void attn_split_finish(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, size_t block, int64_t chunk,
                       int64_t splits, const online_row *st, float *acc)
{
    const attn_split_ws ws = split_open(pb);
    attn_split_store(pb, &ws, p, rows, n, chunk, st, acc);
    /* acq_rel: the last task sees every chunk's stores of this block */
    if (atomic_fetch_add_explicit(&ws.done[block], 1, memory_order_acq_rel) != splits - 1)
        return;
    for (int64_t r = 0; r < n; r++) {
        online_row merged = {-INFINITY, 0.0f, 0.0f, 0};
        attn_split_merge(dsp, pb, &ws, &rows[r], splits, &merged, acc + r * p->acc_stride);
        attn_forward_finish_row(dsp, pb, &rows[r], &merged, acc + r * p->acc_stride);
    }
}

size_t attn_split_need(const attn_shape *s, const attn_options *o, int64_t *splits)
{
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    *splits = attn_split_grid(s->batch, s->q_heads, s->kv_heads, s->q_len, s->kv_len,
                              o->topk_indices ? o->topk : 0, o->q_lens,
                              o->kv_lens, o->kv_splits);
    if (*splits <= 1)
        return 0;
    return attn_split_bytes(s->batch, s->q_heads, s->q_len, v_dim, *splits);
}

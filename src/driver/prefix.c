/* SPDX-License-Identifier: MIT */
/*
 * The forward's shared-prefix path (attn.h, "Shared prefixes";
 * pb->prefix_parts > 0): before the tasks, one round of prefix tasks
 * attends each group's shared keys once for the query rows of all its
 * sequences, in chunks of ATTN_PREFIX_CHUNK keys, and leaves each chunk's
 * online state in the workspace (split.c's layout, the chunks as its
 * parts); each sequence's tasks (forward.c) then start their rows from
 * those states (merged in chunk order, the rescale split-KV uses) and fold
 * in the sequence's own keys only. kv.h finds a shared key in the sequence
 * that holds it, for every operation; only this round knows a prefix can
 * be attended once for a group.
 */
#include <math.h>
#include <stdint.h>

#include "forward.h"

/* The groups of a call, and the prefix tasks of one: its query rows
   (sequence-major, then position, then head, as a head group stacks them)
   per KV head, in blocks of block_rows, for each chunk of its keys. */
typedef struct prefix_group {
    int64_t b0, b1, keys;          /* sequences [b0, b1], keys [0, keys) of b0 */
    int64_t rows, blocks, chunks;  /* per KV head */
    int64_t block_rows;            /* rows per block: the fewest blocks, evened out */
} prefix_group;

/* The chunks of a shared prefix: the prefix tasks' count, the parts a
   sequence's task merges and the workspace's. */
int64_t attn_prefix_chunks(int64_t keys)
{
    return (keys + ATTN_PREFIX_CHUNK - 1) / ATTN_PREFIX_CHUNK;
}

/* The group that starts at sequence b, and the sequence after it. */
static int64_t next_group(const attn_problem *pb, int64_t block_rows, int64_t b,
                          prefix_group *g)
{
    attn_prefix_group(pb->opt.shared_prefix, pb->batch, b, &g->b0, &g->b1, &g->keys);
    g->rows = 0;
    for (int64_t c = g->b0; c <= g->b1; c++)
        g->rows += attn_seq_q_len(pb, c) * pb->group;
    g->blocks = (g->rows + block_rows - 1) / block_rows;
    /* 64 rows in blocks of 42 would leave 22 for a second pass at a lower
       rate: two of 32 read the same keys as often, each at the full rate */
    g->block_rows = g->blocks ? (g->rows + g->blocks - 1) / g->blocks : 0;
    g->chunks = attn_prefix_chunks(g->keys);
    return g->b1 + 1;
}

static size_t group_tasks(const attn_problem *pb, const prefix_group *g)
{
    return (size_t)(pb->kv_heads * g->blocks * g->chunks);
}

typedef struct prefix_ctx {
    const attn_dsp *dsp;
    const attn_problem *pb;
    task_plan plan; /* the forward's geometry, block_rows for converted queries */
} prefix_ctx;

/* Row r of a group's rows of KV head kv_head, in the first sequence's key
   positions (row_ref.shift), seeing only the shared keys. */
static row_ref group_row(const attn_problem *pb, const prefix_group *g, int64_t kv_head,
                         int64_t r)
{
    int64_t b = g->b0;
    for (; r >= attn_seq_q_len(pb, b) * pb->group; b++)
        r -= attn_seq_q_len(pb, b) * pb->group;
    row_ref row = attn_make_row(pb, b, kv_head * pb->group + r % pb->group, r / pb->group);
    const int64_t ko = pb->kv_offsets ? pb->kv_offsets[b] : 0;
    row.shift = ko - (pb->kv_offsets ? pb->kv_offsets[g->b0] : 0);
    row.hi = attn_min64(row.hi, ko + g->keys) - row.shift;
    row.lo -= row.shift;
    if (row.hi <= row.lo)
        row.lo = row.hi = ko - row.shift;
    return row;
}

static void task_prefix(void *vctx, size_t index)
{
    const prefix_ctx *ctx = vctx;
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;
    prefix_group g = {0};
    for (int64_t b = 0; b < pb->batch;) {
        b = next_group(pb, p->block_rows, b, &g);
        if (g.keys > 0 && index < group_tasks(pb, &g))
            break;
        if (g.keys > 0)
            index -= group_tasks(pb, &g);
    }
    const int64_t blk = (int64_t)index % g.blocks;
    const int64_t chunk = (int64_t)index / g.blocks % g.chunks;
    const int64_t kv_head = (int64_t)index / g.blocks / g.chunks;

    _Alignas(64) float scratch[ATTN_SCRATCH_FLOATS];
    row_ref rows[ATTN_MAX_BLOCK_Q];
    online_row st[ATTN_MAX_BLOCK_Q];
    const int64_t r0 = blk * g.block_rows, n = attn_min64(g.block_rows, g.rows - r0);
    float *qbuf = scratch, *sbuf = qbuf + p->block_rows * p->q_stride;
    float *acc = sbuf + p->block_rows * p->block_k;
    for (int64_t r = 0; r < n; r++) {
        rows[r] = group_row(pb, &g, kv_head, r0 + r);
        st[r] = (online_row){-INFINITY, 0.0f, 0.0f, 0};
        if (rows[r].lo < rows[r].hi)
            attn_fill(acc + r * p->acc_stride, pb->v_dim, 0.0f);
    }
    attn_convert_queries(dsp, pb, p, rows, n, qbuf);
    const int64_t base = pb->kv_offsets ? pb->kv_offsets[g.b0] : 0;
    const int64_t klo = base + chunk * ATTN_PREFIX_CHUNK;
    attn_forward_keys(dsp, pb, p, rows, n, g.b0, kv_head, base, klo,
                      attn_min64(klo + ATTN_PREFIX_CHUNK, base + g.keys), st, qbuf, p->q_stride,
                      sbuf, acc);
    const attn_split_ws ws = attn_split_ws_open(pb, pb->prefix_workspace, pb->prefix_parts);
    attn_split_store(pb, &ws, p, rows, n, chunk, st, acc);
}

void attn_prefix_round(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p)
{
    prefix_ctx pc = {dsp, pb, *p};
    size_t tasks = 0;
    prefix_group g;
    for (int64_t b = 0; b < pb->batch;) {
        b = next_group(pb, pc.plan.block_rows, b, &g);
        if (g.keys > 0)
            tasks += group_tasks(pb, &g);
    }
    attn_run_tasks(pb->parallel_for, pb->parallel_ctx, task_prefix, &pc, tasks);
}

int64_t attn_prefix_start(const attn_problem *pb, int64_t b, int64_t *parts)
{
    int64_t start = 0;
    *parts = 0;
    if (pb->prefix_parts) {
        int64_t b0, b1;
        attn_prefix_group(pb->opt.shared_prefix, pb->batch, b, &b0, &b1, &start);
        *parts = attn_prefix_chunks(start);
    }
    return start;
}

/* The most chunks a group's shared prefix takes (0: no group shares). The
   entries are clamped: attn_forward_workspace_size reads them unchecked. */
static int64_t prefix_parts_of(const attn_shape *s, const attn_options *o)
{
    int64_t most = 0;
    for (int64_t b = 0, b0, b1, keys; o->shared_prefix && b < s->batch; b = b1 + 1) {
        attn_prefix_group(o->shared_prefix, s->batch, b, &b0, &b1, &keys);
        keys = attn_min64(keys, s->kv_len);
        most = attn_max64(most, attn_prefix_chunks(keys));
    }
    return most;
}

size_t attn_prefix_need(const attn_shape *s, const attn_options *o, int64_t *parts)
{
    *parts = prefix_parts_of(s, o);
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    return *parts ? attn_split_bytes(s->batch, s->q_heads, s->q_len, v_dim, *parts) : 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * What the modules of attn_forward share. The operation is one module in
 * four files, one per path: forward.c, the dense forward (a task's rows
 * over their keys in blocks of block_k), its plan, tasks, attn_op and
 * entry points; split.c, split-KV (a sequence's chunks of keys, the
 * workspace of their states, the merge); prefix.c, shared prefixes
 * attended once per group before the tasks; topk.c, top-k lists, whose
 * keys a task gathers. A path reaches another only through this header.
 */
#ifndef ATTN_FORWARD_H
#define ATTN_FORWARD_H

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* A query row's online softmax. */
typedef struct online_row {
    float m, l, t; /* running max, sum of exp(s - m), sum of exp(s - m) * (s - m) */
    int poisoned;  /* a NaN or +inf score was seen: the row's result is NaN */
} online_row;

/* Folds the final scores s[a, z) of a tile of nk keys into a row's online
   state; leaves in s the weights exp(s - m) to multiply V by (0 outside
   [a, z) and where the row sees nothing). Inline: the dense and the top-k
   path call it per row and tile. */
static inline void attn_online_fold(const attn_dsp *dsp, const attn_problem *pb, online_row *o,
                                    float *s, int64_t nk, int64_t a, int64_t z, float *acc,
                                    int want_entropy)
{
    float bm = o->poisoned ? -INFINITY : dsp->row_max(s + a, (size_t)(z - a));
    if (isnan(bm) || bm == INFINITY)
        o->poisoned = 1;
    if (o->poisoned || bm == -INFINITY) {
        attn_fill(s, nk, 0.0f); /* nothing visible here: weight 0 */
        return;
    }
    const float m_new = bm > o->m ? bm : o->m;
    if (o->m != -INFINITY && m_new != o->m) { /* rescale what we have */
        const float alpha = expf(o->m - m_new);
        dsp->row_scale(acc, (size_t)pb->v_dim, alpha);
        o->t = alpha * (o->t + o->l * (o->m - m_new));
        o->l *= alpha;
    }
    float weighted = 0.0f;
    float sum = dsp->exp_sum(s + a, (size_t)(z - a), m_new, want_entropy ? &weighted : NULL);
    if (isnan(sum)) {
        o->poisoned = 1;
        attn_fill(s, nk, 0.0f);
        return;
    }
    o->m = m_new;
    o->l += sum;
    o->t += weighted;
    attn_fill(s, a, 0.0f);
    attn_fill(s + z, nk - z, 0.0f);
}

/* The views a task reads the keys and values of (sequence b, KV head)
   through (kv.h): K, V, the key rows' tail (attn.h 1.9) and the FP8
   scales of K and V (1.6, 1.8); the absent ones are k's own view, never
   read. */
typedef struct kv_views {
    kv_src k, v, k_tail, k_scales, v_scales;
} kv_views;

static inline kv_views attn_kv_views_open(const attn_problem *pb, int64_t b, int64_t kv_head)
{
    kv_views w;
    w.k = attn_kv_open(pb, &pb->k, b, kv_head, attn_k_cols(pb));
    w.v = attn_kv_open(pb, &pb->v, b, kv_head, pb->v_dim);
    w.k_tail = attn_kv_open_tail(pb, b, kv_head);
    w.k_scales = attn_kv_open_scales(pb, &pb->k_scales, pb->k_group, attn_k_cols(pb), b, kv_head);
    w.v_scales = attn_kv_open_scales(pb, &pb->v_scales, pb->v_group, pb->v_dim, b, kv_head);
    return w;
}

/* ------------------------------------------------------------ forward.c */

/* Folds keys [klo, khi) of the rows' visible ranges into their states st,
   the keys of sequence kv_seq (`base`: its first key) of KV head kv_head:
   q holds the n rows' queries (rows q_stride floats apart), sbuf their
   score tile, acc their accumulators, followed by the rest of the task
   scratch. */
void attn_forward_keys(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t kv_seq, int64_t kv_head,
                       int64_t base, int64_t klo, int64_t khi, online_row *st, const float *q,
                       int64_t q_stride, float *sbuf, float *acc);
/* Writes one row's output and stats from its online state. */
void attn_forward_finish_row(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                             const online_row *o, float *acc);

/* ------------------------------------------------------------ split.c */

/* The split-KV workspace (driver.h, attn_split_layout), or the shared
   prefixes' (the same layout, with the prefix chunks as parts; its
   counters unused). */
typedef struct attn_split_ws {
    atomic_int *done; /* per task block: chunks finished */
    float *states;    /* per (row, part): m, l, t, poisoned */
    float *acc;       /* per (row, part): acc_stride floats */
    int64_t acc_stride;
    int64_t parts;    /* per row */
} attn_split_ws;

attn_split_ws attn_split_ws_open(const attn_problem *pb, void *mem, int64_t parts);
/* Stores the rows' states of part c in the workspace. */
void attn_split_store(const attn_problem *pb, const attn_split_ws *ws, const task_plan *p,
                      const row_ref *rows, int64_t n, int64_t c, const online_row *st,
                      const float *acc);
/*
 * Merges the first `parts` stored parts of a row in order into acc and the
 * state *o, which holds at most a sink (no accumulator): acc = sum_c
 * exp(m_c - M) acc_c, l and t likewise (the online softmax's rescale, once
 * per part), M the largest m.
 */
void attn_split_merge(const attn_dsp *dsp, const attn_problem *pb, const attn_split_ws *ws,
                      const row_ref *row, int64_t parts, online_row *o, float *acc);
/* Before the tasks: the merge counters of a split call. */
void attn_split_reset(const attn_problem *pb, const task_plan *p);
/* Sequence b's own chunks, of its keys from `start` on (after a shared
   prefix): *splits of *chunk_keys keys (1 and 0 when it stays whole). */
void attn_split_seq(const attn_problem *pb, const task_plan *p, int64_t b, int64_t start,
                    int64_t *splits, int64_t *chunk_keys);
/* After chunk `chunk` of task block `block` is folded: its states into the
   workspace, and the last chunk to finish merges the block's rows and
   writes them. */
void attn_split_finish(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, size_t block, int64_t chunk,
                       int64_t splits, const online_row *st, float *acc);
/* The workspace bytes a forward of this shape and these lengths needs to
   split (0: unsplit), for the most chunks one of its sequences takes. */
size_t attn_split_need(const attn_shape *s, const attn_options *o, int64_t *splits);

/* ------------------------------------------------------------ prefix.c */

/* The chunks a shared prefix of `keys` keys is attended in. */
int64_t attn_prefix_chunks(int64_t keys);
/* Keys [0, start) of sequence b that the prefix tasks attended (returned;
   0 when the call has no prefix round), in *parts chunks. */
int64_t attn_prefix_start(const attn_problem *pb, int64_t b, int64_t *parts);
/* The round of prefix tasks, on the forward's plan p (queries converted). */
void attn_prefix_round(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p);
/* The workspace of the prefix states (0: none, or it overflows size_t),
   for *parts chunks at most. */
size_t attn_prefix_need(const attn_shape *s, const attn_options *o, int64_t *parts);

/* ------------------------------------------------------------ topk.c */

/* The plan's tiles, gather and window of a call with top-k lists. */
void attn_plan_topk(const attn_dsp *dsp, const attn_problem *pb, task_plan *p);
/* attn_forward_keys for a call with top-k lists: gbuf, the gather buffer,
   follows the accumulator. */
void attn_forward_topk(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t kv_head, int64_t base,
                       int64_t klo, int64_t khi, online_row *st, const float *q,
                       int64_t q_stride, float *sbuf, float *acc, float *gbuf);

#endif /* ATTN_FORWARD_H */

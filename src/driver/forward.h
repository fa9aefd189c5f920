/* SPDX-License-Identifier: MIT */
/* What the files of attn_forward share, one file per path: a path reaches
   another only through this header. */
#ifndef ATTN_FORWARD_H
#define ATTN_FORWARD_H

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* A query row's online softmax. */
typedef struct online_row {
    float m, l, t; /* max, sum of exp(s - m), sum of exp(s - m) * (s - m) */
    int poisoned;  /* a NaN or +inf score was seen */
} online_row;

/* Leaves in s the weights exp(s - m) for V (0 outside [a, z)). Inline: both
   paths call it per row and tile. */
static inline void attn_online_fold(const attn_dsp *dsp, const attn_problem *pb, online_row *o,
                                    float *s, int64_t nk, int64_t a, int64_t z, float *acc,
                                    int want_entropy)
{
    float bm = o->poisoned ? -INFINITY : dsp->row_max(s + a, (size_t)(z - a));
    if (isnan(bm) || bm == INFINITY)
        o->poisoned = 1;
    if (o->poisoned || bm == -INFINITY) {
        attn_fill(s, nk, 0.0f);
        return;
    }
    const float m_new = bm > o->m ? bm : o->m;
    if (o->m != -INFINITY && m_new != o->m) {
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

/* Absent views are k's own, never read. */
typedef struct kv_views {
    kv_src k, v, k_tail, k_scales, v_scales;
} kv_views;

static inline kv_views attn_kv_views_open(const attn_problem *pb, int64_t b, int64_t kv_head)
{
    kv_views w;
    w.k = attn_kv_open(pb, &pb->k, b, kv_head, attn_k_cols(pb), pb->k_group);
    w.v = attn_kv_open(pb, &pb->v, b, kv_head, pb->v_dim, pb->v_group);
    w.k_tail = attn_kv_open_tail(pb, b, kv_head);
    w.k_scales = attn_kv_open_scales(pb, &pb->k_scales, pb->k_group, attn_k_cols(pb), b, kv_head);
    w.v_scales = attn_kv_open_scales(pb, &pb->v_scales, pb->v_group, pb->v_dim, b, kv_head);
    return w;
}

/* ------------------------------------------------------------ forward.c */

/* Folds keys [klo, khi) into the rows' states; base: the sequence's first
   key. The rest of the task scratch follows acc. */
void attn_forward_keys(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t kv_seq, int64_t kv_head,
                       int64_t base, int64_t klo, int64_t khi, online_row *st, const float *q,
                       int64_t q_stride, float *sbuf, float *acc);
void attn_forward_finish_row(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                             const online_row *o, float *acc);

/* ------------------------------------------------------------ split.c */

/* The split-KV workspace, or the shared prefixes' (the same layout). */
typedef struct attn_split_ws {
    atomic_int *done; /* per task block: chunks finished */
    float *states;    /* per (row, part) */
    float *acc;       /* per (row, part) */
    int64_t acc_stride;
    int64_t parts;    /* per row */
} attn_split_ws;

attn_split_ws attn_split_ws_open(const attn_problem *pb, void *mem, int64_t parts);
void attn_split_store(const attn_problem *pb, const attn_split_ws *ws, const task_plan *p,
                      const row_ref *rows, int64_t n, int64_t c, const online_row *st,
                      const float *acc);
/* Merges the parts in order: acc = sum_c exp(m_c - M) acc_c, l and t
   likewise; *o holds at most a sink on entry. */
void attn_split_merge(const attn_dsp *dsp, const attn_problem *pb, const attn_split_ws *ws,
                      const row_ref *row, int64_t parts, online_row *o, float *acc);
void attn_split_reset(const attn_problem *pb, const task_plan *p);
/* Of its keys from start on; 1 and 0 when it stays whole. */
void attn_split_seq(const attn_problem *pb, const task_plan *p, int64_t b, int64_t start,
                    int64_t *splits, int64_t *chunk_keys);
/* The last chunk of a block to finish merges and writes its rows. */
void attn_split_finish(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, size_t block, int64_t chunk,
                       int64_t splits, const online_row *st, float *acc);
/* 0: unsplit */
size_t attn_split_need(const attn_shape *s, const attn_options *o, int64_t *splits);

/* ------------------------------------------------------------ prefix.c */

int64_t attn_prefix_chunks(int64_t keys);
/* Returns the keys the prefix tasks attended for sequence b. */
int64_t attn_prefix_start(const attn_problem *pb, int64_t b, int64_t *parts);
void attn_prefix_round(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p);
/* 0: none, or it overflows size_t */
size_t attn_prefix_need(const attn_shape *s, const attn_options *o, int64_t *parts);

/* Rows whose head_dim + v_dim (each rounded up to 16) exceed this keep
   their accumulators in the workspace, where it has room: attn.h, "wide
   rows". A property of the dims alone, so of every sequence alike. */
#define ATTN_WIDE_DIMS 256
/* 0: no wide rows, or it overflows size_t */
size_t attn_wide_need(const attn_shape *s, const attn_options *o, int64_t splits);

/* ------------------------------------------------------------ topk.c */

void attn_plan_topk(const attn_dsp *dsp, const attn_problem *pb, task_plan *p);
/* The second source's tiles (pb->kv2), after the first source's plan;
   direct_rows > 0: the first source's block may read F32 queries in place
   instead, with at most that many rows, if each block lies in one
   position. */
void attn_plan_extra(const attn_dsp *dsp, const attn_problem *pb, task_plan *p,
                     int64_t direct_rows);
/* Folds the second source's selected keys of [klo, khi) into the rows' states, the rows
   becoming the second source's; sbuf and acc: the block's, as
   attn_forward_keys takes them. */
void attn_forward_extra(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                        row_ref *rows, int64_t n, int64_t kv_head, int64_t klo, int64_t khi,
                        online_row *st,
                        const float *q, int64_t q_stride, float *sbuf, float *acc);

/* A row of pb as the second source's problem sees it. */
static inline row_ref attn_extra_row(const attn_problem *pb, const row_ref *row)
{
    const int64_t qo = pb->q_offsets ? pb->q_offsets[row->b] : 0;
    return attn_make_row(pb->kv2, row->b, row->h, row->i - qo);
}
/* gbuf follows the accumulator. */
void attn_forward_topk(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const row_ref *rows, int64_t n, int64_t kv_head, int64_t base,
                       int64_t klo, int64_t khi, online_row *st, const float *q,
                       int64_t q_stride, float *sbuf, float *acc, float *gbuf);

#endif /* ATTN_FORWARD_H */

/* SPDX-License-Identifier: MIT */
/*
 * What the operations' modules share (one module per operation:
 * tests/ops_list.h). Key and value addresses are kv.h's alone; the shared
 * checks are src/validate.h's.
 *
 * Tasks are cut by the shape alone, never by the thread count: one block of
 * query rows of one batch entry and head group. The fused forward groups
 * the query heads of a KV head, so each K/V block is read once for all of
 * them (decode at memory speed); the score operations group one head, so
 * the kernels write straight into the caller's table.
 */
#ifndef ATTN_DRIVER_H
#define ATTN_DRIVER_H

#include <math.h>
#include <stdint.h>

#include "problem.h"

/* Key rows decoded to f32 before the kernels (kv.h, attn_kv_stage). */
static inline int attn_k_staged(const attn_problem *pb)
{
    return pb->k_group || pb->k_tail_dim;
}

static inline int64_t attn_k_cols(const attn_problem *pb)
{
    return pb->head_dim - pb->k_tail_dim;
}

static inline int32_t attn_k_kernel_dtype(const attn_problem *pb)
{
    return attn_k_staged(pb) ? ATTN_DTYPE_F32 : pb->k.dtype;
}
static inline int32_t attn_v_kernel_dtype(const attn_problem *pb)
{
    return pb->v_group ? ATTN_DTYPE_F32 : pb->v.dtype;
}

/* The mode's dot-product kernel where the table has one, else the default
   kernel, within every mode's bound. The default mode takes the bf16 kernel
   for BF16 q and k: exact products (attn.h states what flushing adds). */
static inline attn_qk_tile_fn *attn_qk_kernel_for(const attn_dsp *dsp, const attn_problem *pb,
                                                  int32_t dt)
{
    attn_qk_tile_fn *f = NULL;
    if (pb->opt.precision == ATTN_PRECISION_INT8)
        f = dsp->qk_i8[dt];
    if (!f && (pb->opt.precision == ATTN_PRECISION_BF16 ||
               (pb->q.dtype == ATTN_DTYPE_BF16 && dt == ATTN_DTYPE_BF16)))
        f = dsp->qk_bf16[dt];
    return f ? f : dsp->qk_tile[dt];
}

static inline attn_qk_tile_fn *attn_qk_kernel(const attn_dsp *dsp, const attn_problem *pb)
{
    return attn_qk_kernel_for(dsp, pb, attn_k_kernel_dtype(pb));
}

/* The bf16 mode's P.V kernel for float operands of dtype dt (v, or the
   backward's k of dS.K), where the table has one. */
static inline attn_pv_tile_fn *attn_pv_kernel_for(const attn_dsp *dsp, const attn_problem *pb,
                                                  int32_t dt)
{
    attn_pv_tile_fn *f = pb->opt.precision == ATTN_PRECISION_BF16 && attn_dtype_is_float_input(dt)
                             ? dsp->pv_bf16[dt]
                             : NULL;
    return f ? f : dsp->pv_tile[dt];
}

/* The forward's P.V: in both low-precision modes, Q8_0 and Q4_0 v decoded
   and rounded to bf16 where the table has the kernel (attn.h). */
static inline attn_pv_tile_fn *attn_pv_kernel(const attn_dsp *dsp, const attn_problem *pb)
{
    const int32_t dt = attn_v_kernel_dtype(pb);
    if (pb->opt.precision != ATTN_PRECISION_DEFAULT &&
        attn_dtype_kind_of(dt) == ATTN_DTYPE_KIND_QBLOCK && dsp->pv_bf16[dt])
        return dsp->pv_bf16[dt];
    return attn_pv_kernel_for(dsp, pb, dt);
}

/* 64 KiB of stack per task */
#define ATTN_SCRATCH_FLOATS 16384

typedef struct task_plan {
    int64_t heads_per_group; /* query heads stacked in one block */
    int64_t groups;          /* q_heads / heads_per_group */
    int64_t rows;            /* rows of a group: q_extent * heads_per_group */
    int64_t block_rows;
    int64_t blocks;          /* per group */
    int64_t q_stride;        /* f32 row stride of the converted query block */
    int64_t acc_stride;      /* f32 row stride of the accumulator */
    int64_t block_k;
    int64_t splits;          /* key chunks per block (split-KV forward), else 1 */
    int64_t kv_blocks;       /* attn_backward: key blocks per (batch, KV head); 0 else */
    int64_t fused_blocks;    /* attn_backward's fused plan: query blocks per head; 0 else */
    int q_direct;            /* F32 queries read in place (q_stride: the tensor's) */
    int acc_ws;              /* accumulators in pb->acc_workspace, a block's
                                per task (forward.c, plan_dense) */
    int64_t gather_keys;     /* top-k: key rows gathered per kernel call; 0 else */
    int64_t gather_floats;
    int64_t topk_window;     /* keys per window of the top-k selection bitmaps */
    int64_t stage_keys;      /* key rows decoded to f32 per kernel call; 0 else */
    int64_t stage_stride;    /* floats per staged row */
    /* segments read in place (forward.c, "Rows in segments"); 0: none */
    int k_segs, v_segs;
    /* groups read by qk_grp / pv_grp; 0: none */
    int k_grp, v_grp;
    /* attn_forward_sources: the second source's top-k tiles, planned into
       the scratch past the accumulators (topk.c); x_rows 0: one source */
    int64_t x_rows, x_block_k, x_gather_keys, x_gather_floats, x_window;
    size_t tasks;
} task_plan;

/* The split-KV workspace: per task a counter electing the merging task,
   then per row and chunk the online state and the unnormalised output. */
typedef struct attn_split_layout {
    size_t counters_at, states_at, acc_at, bytes;
    int64_t acc_stride;
} attn_split_layout;
/* 0 when the sizes overflow size_t. */
int attn_split_layout_of(int64_t batch, int64_t q_heads, int64_t q_len, int64_t v_dim,
                         int64_t splits, attn_split_layout *l);

typedef struct task_ctx {
    const attn_dsp *dsp;
    const attn_problem *pb;
    task_plan plan;
} task_ctx;

/*
 * One query row: i its tensor row, [lo, hi) the keys it sees, [col_lo,
 * col_hi) its sequence's score columns (the only ones written), aligned
 * the key position masks and ALiBi measure from. shift: nonzero only over a
 * shared prefix, whose keys are the first sequence's; the row's own
 * position is p + shift.
 */
typedef struct row_ref {
    int64_t b, h, i, lo, hi, col_lo, col_hi;
    int64_t aligned;
    int64_t shift;
    int is_query;
    int extra; /* keys outside [lo, hi) fold into its state too: the other
                  source's of attn_forward_sources */
} row_ref;

/* Whether the row sees any key, of [lo, hi) or of the other source: it
   then has an accumulator (else at most a sink). */
static inline int attn_row_sees_keys(const row_ref *row)
{
    return row->lo < row->hi || row->extra;
}

static inline int64_t attn_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t attn_max64(int64_t a, int64_t b) { return a > b ? a : b; }

static inline void attn_fill(float *x, int64_t n, float value)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = value;
}

static inline const void *attn_row_ptr(const attn_tensor *t, int64_t b, int64_t h, int64_t r)
{
    int64_t off = b * t->batch_stride + h * t->head_stride + r * t->row_stride;
    return (const char *)t->data + off * (int64_t)attn_dtype_size(t->dtype);
}

static inline float *attn_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r)
{
    return (float *)attn_row_ptr(t, b, h, r);
}

/* The one place a rounded output (attn_op.rounds_out) is written: each
   value rounded once to nearest even. No operation converts on its own. */
void attn_store_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r, const float *x,
                        int64_t n);
void attn_fill_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r, float value,
                       int64_t n);

int64_t attn_block_rows_for(const attn_dsp *dsp, int64_t per_row_floats);
int64_t attn_block_rows_within(const attn_dsp *dsp, int64_t per_row_floats, int64_t floats);
/* Sets p's stage where K or V rows are decoded to f32; returns its floats. */
int64_t attn_plan_stage(const attn_problem *pb, task_plan *p, int64_t max_keys);
task_plan attn_plan_common(const attn_dsp *dsp, const attn_problem *pb, int64_t heads_per_group);
/* i counts from the sequence's start */
row_ref attn_make_row(const attn_problem *pb, int64_t b, int64_t h, int64_t i);
/* 0: the block lies past its sequence's end */
int64_t attn_task_rows(const attn_problem *pb, const task_plan *p, size_t index, row_ref *rows,
                       int64_t *kv_head);

void attn_convert_queries(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                          const row_ref *rows, int64_t n, float *qbuf);
/* lo >= hi when no row sees any key */
void attn_visible_union(const row_ref *rows, int64_t n, int64_t *lo, int64_t *hi);
/* Advances *r to the next row that sees [kb, ke); returns the end of its
   run (*r == n: none left). */
int64_t attn_next_run(const row_ref *rows, int64_t n, int64_t *r, int64_t kb, int64_t ke);

void attn_score_epilogue(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                         float *s, int64_t k0, int64_t n);
/* A new score term goes here, so that the backward sees it too. */
void attn_score_epilogue_after_softcap(const attn_dsp *dsp, const attn_problem *pb,
                                       const row_ref *row, float *s, int64_t k0, int64_t n);
/* Without the top-k selection, which gathered tiles apply themselves. */
void attn_score_terms(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row, float *s,
                      int64_t k0, int64_t n);
static inline int attn_has_score_terms(const attn_problem *pb)
{
    return pb->bias.data || pb->alibi.data || pb->mask.data || pb->opt.tree_parents ||
           pb->opt.k_positions;
}
static inline const int32_t *attn_topk_list(const attn_problem *pb, const row_ref *row)
{
    return pb->opt.topk_indices + (row->b * pb->q_len + row->i) * pb->opt.topk;
}

/* sink (-inf: none) is one more entry without a slot in x. A NaN or +inf
   score or sink makes the whole row NaN, so every ISA agrees on it. */
void attn_softmax_segment(const attn_dsp *dsp, float *x, int64_t n, float sink, float *lse,
                          float *max_score, float *entropy, int want_entropy);

float attn_row_sink(const attn_problem *pb, const row_ref *row);

void attn_write_stats(const attn_problem *pb, const row_ref *row, float lse, float max_score,
                      float entropy);

/* The runner knows no operation. parallel_for NULL: in order, this thread. */
void attn_run_tasks(attn_parallel_for_fn parallel_for, void *parallel_ctx, attn_task_fn task,
                    void *ctx, size_t count);
void attn_run(const attn_dsp *dsp, const attn_problem *pb);
/* A plan depends on shape, dtypes, strides and options, never on pointers. */
void attn_run_planned(const attn_dsp *dsp, const attn_problem *pb, const task_plan *tp);
/* Only for tasks that need no preparation and no other task. */
void attn_run_planned_range(const attn_dsp *dsp, const attn_problem *pb, const task_plan *tp,
                            size_t lo, size_t hi);

extern const attn_op attn_forward_op;

/* attn_scores' and attn_weights' plan and first pass, q.k written into the
   caller's table (scores.c says why ATTN_SCORES_BLOCK_Q rows). */
#define ATTN_SCORES_BLOCK_Q ATTN_MAX_QK_ROWS
task_plan attn_plan_scores(const attn_dsp *dsp, const attn_problem *pb);
int64_t attn_score_tiles(const task_ctx *ctx, size_t index, row_ref *rows, float **out0);

#endif /* ATTN_DRIVER_H */

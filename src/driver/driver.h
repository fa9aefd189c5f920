/* SPDX-License-Identifier: MIT */
/*
 * What the operations' modules share. Each public operation is one file of
 * this folder, its module: its entry points (attn_<op> and attn_<op>_with),
 * the checks specific to it, its plan (the task count included) and its
 * task: scores.c, mask_apply.c, weights.c, forward.c, backward.c, merge.c,
 * softmax.c, softmax_backward.c, quantize.c (the forward's paths in files of
 * their own: split.c, prefix.c, topk.c, behind forward.h). Shared here: the
 * geometry of a row (which keys it may see), the task plan (how the shape
 * is cut into tasks), the score epilogue, the row softmax and the stats
 * (common.c), the runner (run.c, which knows no operation), and where a key
 * or value row lives in memory (kv.h, the only file that knows about
 * layouts). The shared checks are src/validate.h's.
 *
 * Work is cut into tasks by the shape alone (never by the thread count):
 * a task is one block of query rows of one batch entry and one head group.
 * For the fused forward a head group is all query heads sharing a KV head
 * (GQA), stacked position-major, so each K/V block is read once for all of
 * them; that is what makes decode run at memory speed. For the score
 * operations a group is one head, so output rows have a uniform stride and
 * the tile kernels write straight into the caller's table.
 */
#ifndef ATTN_DRIVER_H
#define ATTN_DRIVER_H

#include <math.h>
#include <stdint.h>

#include "problem.h"

/*
 * The score and weighted-sum kernels of a call's precision (attn.h,
 * attn_precision): the mode's dot-product kernel where the table has one
 * (src/kernel_list.h, dot file), else the default kernel, which is within
 * every mode's bound. The default mode takes the bf16 dot kernel for BF16 q
 * and k: exact products (attn.h states what its flushing adds).
 */
/* Key rows the driver decodes to f32 before the kernels (kv.h,
   attn_kv_stage): an FP8 cache with scale groups (1.8), rows with a tail
   of another dtype (1.9). */
static inline int attn_k_staged(const attn_problem *pb)
{
    return pb->k_group || pb->k_tail_dim;
}

/* Values of a key row that k holds: head_dim less the tail's (1.9). */
static inline int64_t attn_k_cols(const attn_problem *pb)
{
    return pb->head_dim - pb->k_tail_dim;
}

/* The dtype the kernels read K (V) as: F32 for staged rows. */
static inline int32_t attn_k_kernel_dtype(const attn_problem *pb)
{
    return attn_k_staged(pb) ? ATTN_DTYPE_F32 : pb->k.dtype;
}
static inline int32_t attn_v_kernel_dtype(const attn_problem *pb)
{
    return pb->v_group ? ATTN_DTYPE_F32 : pb->v.dtype;
}

/* The Q.K^T kernel for keys read as dt under pb's precision mode. */
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

/* The P.V kernel for values read as dt under pb's precision mode (also the
   backward's dQ = dS K, with dt K's dtype). */
static inline attn_pv_tile_fn *attn_pv_kernel_for(const attn_dsp *dsp, const attn_problem *pb,
                                                  int32_t dt)
{
    attn_pv_tile_fn *f = pb->opt.precision == ATTN_PRECISION_BF16 ? dsp->pv_bf16[dt] : NULL;
    return f ? f : dsp->pv_tile[dt];
}

static inline attn_pv_tile_fn *attn_pv_kernel(const attn_dsp *dsp, const attn_problem *pb)
{
    return attn_pv_kernel_for(dsp, pb, attn_v_kernel_dtype(pb));
}

/* Task scratch (query block, score tile, accumulator): 64 KiB of stack. */
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
    int64_t kv_blocks;       /* attn_backward: key blocks per (batch, KV head),
                                each one more task after the query blocks; 0 else */
    int64_t fused_blocks;    /* attn_backward's fused plan: query blocks per head
                                (its tasks are one per (batch, KV head)); 0 else */
    int q_direct;            /* forward: the kernels read F32 queries where they lie
                                (q_stride is then the tensor's row stride), no copy */
    int64_t gather_keys;     /* forward with top-k lists: key rows copied per kernel
                                call into the gather buffer, which follows the
                                accumulator in the task scratch; 0 else */
    int64_t gather_floats;   /* that buffer's size in floats */
    int64_t topk_window;     /* keys per window of the top-k selection bitmaps */
    int64_t stage_keys;      /* FP8 caches with scale groups: key rows decoded
                                per kernel call into the stage, which follows
                                the accumulator (or the query block of the score
                                operations) in the task scratch; 0 else */
    int64_t stage_stride;    /* floats per staged row */
    /* forward over dense keys: FP8 rows with scale groups (attn.h 1.8), key
       rows with a tail (1.9) read in place by the kernels of their dtypes,
       segment by segment (a group, the tail; k_segs of them), the partial
       scores and the weights per V group summed in f32 (forward.c, "Rows
       in segments"); 0: decoded into the stage, or neither */
    int k_segs, v_segs;
    /* forward over dense keys, few rows: FP8 rows with scale groups of
       ATTN_GRP_STEP multiples read by the qk_grp / pv_grp kernels, each
       value times its scale where it is loaded (the stage's values), one
       call per run of keys; 0: segments, the stage, or neither */
    int k_grp, v_grp;
    size_t tasks;            /* the task count, which the operation's plan sets */
} task_plan;

/*
 * The split-KV workspace, from a 64-byte aligned base: one int per task
 * (chunks finished, to elect the merging task), then per query row and
 * chunk the online state {m, l, t, poisoned} and the unnormalised output
 * (acc_stride floats). Rows are numbered (b * q_heads + h) * q_len + i.
 */
typedef struct attn_split_layout {
    size_t counters_at, states_at, acc_at, bytes; /* offsets from the base */
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
 * One query row of a block: i is its row in the tensors (the sequence's
 * q_offset added), [lo, hi) the key positions it sees (kv_offset added;
 * lo == hi when none), [col_lo, col_hi) the columns of a score row that
 * belong to its sequence (the only ones written). aligned is the key
 * position (kv_offset added) of the query's bottom-right aligned place,
 * i + (Lk_b - Lq_b) within the sequence, that the masks and ALiBi measure
 * from; is_query: i < Lq_b (a padded row has no sink either). shift is 0
 * except in the forward's pass over a shared prefix (attn.h, "Shared
 * prefixes"), which reads the keys of the group's first sequence: lo and hi
 * are then positions of that sequence, and position p is the row's own
 * position p + shift, where its masks, bias and ALiBi look.
 */
typedef struct row_ref {
    int64_t b, h, i, lo, hi, col_lo, col_hi;
    int64_t aligned;
    int64_t shift;
    int is_query;
} row_ref;

static inline int64_t attn_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t attn_max64(int64_t a, int64_t b) { return a > b ? a : b; }

static inline void attn_fill(float *x, int64_t n, float value)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = value;
}

/* Row r of (b, h) of a tensor whose rows are addressed by index (q, out,
   mask, bias). */
static inline const void *attn_row_ptr(const attn_tensor *t, int64_t b, int64_t h, int64_t r)
{
    int64_t off = b * t->batch_stride + h * t->head_stride + r * t->row_stride;
    return (const char *)t->data + off * (int64_t)attn_dtype_size(t->dtype);
}

/* Row (b, h, r) of an F32 output (scores, weights, mask_apply's table). */
static inline float *attn_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r)
{
    return (float *)attn_row_ptr(t, b, h, r);
}

/*
 * Row (b, h, r) of an output its operation may round (attn_op.rounds_out:
 * the forward's and attn_merge's out): the n f32 values of x, stored as they
 * are for F32, each rounded once to nearest even for F16 and BF16 (src/half.h's
 * encoders); attn_fill_out_row stores n copies of one value so. The one
 * place a rounded output is written: no operation converts on its own.
 */
void attn_store_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r, const float *x,
                        int64_t n);
void attn_fill_out_row(const attn_tensor *t, int64_t b, int64_t h, int64_t r, float value,
                       int64_t n);

/* Tiles the block rows so that per_row_floats of scratch fit per row. */
int64_t attn_block_rows_for(const attn_dsp *dsp, int64_t per_row_floats);
/* The same within `floats` of the scratch (the rest holds a stage). */
int64_t attn_block_rows_within(const attn_dsp *dsp, int64_t per_row_floats, int64_t floats);
/* FP8 scale groups (attn.h 1.8): sets p's stage (stage_keys rows of
   stage_stride floats, within half the task scratch) when the call decodes
   K or V rows to f32 (those p does not read in segments); returns the
   floats it takes (0 without groups). */
int64_t attn_plan_stage(const attn_problem *pb, task_plan *p, int64_t max_keys);
/* The plan fields every operation shares (groups, rows, strides). */
task_plan attn_plan_common(const attn_dsp *dsp, const attn_problem *pb, int64_t heads_per_group);
/* Row i (counted from its sequence's start) of sequence b and head h. */
row_ref attn_make_row(const attn_problem *pb, int64_t b, int64_t h, int64_t i);
/* Rows of task `index`: fills rows[] and returns their count (0: nothing to
   do, the block lies past its sequence's end). */
int64_t attn_task_rows(const attn_problem *pb, const task_plan *p, size_t index, row_ref *rows,
                       int64_t *kv_head);

/* Converts the query rows that see any key into qbuf (row stride p->q_stride). */
void attn_convert_queries(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                          const row_ref *rows, int64_t n, float *qbuf);
/* [lo, hi) covering every row's visible keys; lo >= hi when none sees any. */
void attn_visible_union(const row_ref *rows, int64_t n, int64_t *lo, int64_t *hi);
/*
 * Advances *r to the next row that sees keys [kb, ke) and returns the end of
 * the run of consecutive rows that do; returns *r == n when none is left.
 */
int64_t attn_next_run(const row_ref *rows, int64_t n, int64_t *r, int64_t kb, int64_t ke);

/* softcap, bias, ALiBi, then the BOOL mask on scores of keys [k0, k0 + n). */
void attn_score_epilogue(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                         float *s, int64_t k0, int64_t n);
/* The epilogue's terms after the softcap (the backward applies the softcap
   itself to keep the capped scores for its derivative). A new score term
   goes here, so that the backward sees it too. */
void attn_score_epilogue_after_softcap(const attn_dsp *dsp, const attn_problem *pb,
                                       const row_ref *row, float *s, int64_t k0, int64_t n);
/* Those terms but the top-k selection (bias, ALiBi, the BOOL mask, the
   draft tree): the forward's gathered tiles apply the selection themselves. */
void attn_score_terms(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row, float *s,
                      int64_t k0, int64_t n);
/* Whether a problem's score terms need the keys' positions (else a gathered
   tile of scattered keys needs none of them). */
static inline int attn_has_score_terms(const attn_problem *pb)
{
    return pb->bias.data || pb->alibi.data || pb->mask.data || pb->opt.tree_parents ||
           pb->opt.k_positions;
}
/* The top-k list of a query row (attn.h, attn_options.topk_indices). */
static inline const int32_t *attn_topk_list(const attn_problem *pb, const row_ref *row)
{
    return pb->opt.topk_indices + (row->b * pb->q_len + row->i) * pb->opt.topk;
}

/*
 * Softmax of one segment in place, with `sink` (-inf: none) as one more
 * entry that has no slot in x; the stats follow attn.h: an empty or all
 * -inf segment without a sink gives zeros and (-inf, -inf, 0); a NaN or
 * +inf score or sink makes the whole row NaN (so every ISA agrees on such
 * rows).
 */
void attn_softmax_segment(const attn_dsp *dsp, float *x, int64_t n, float sink, float *lse,
                          float *max_score, float *entropy, int want_entropy);

/* The sink logit of a row: -inf without sinks and for padded rows. */
float attn_row_sink(const attn_problem *pb, const row_ref *row);

void attn_write_stats(const attn_problem *pb, const row_ref *row, float lse, float max_score,
                      float entropy);

/*
 * The runner. attn_run_tasks runs `count` tasks on the caller's parallel_for
 * (NULL: in order on this thread); attn_run runs a validated problem: its
 * op's plan, preparation and tasks. Neither knows an operation.
 */
void attn_run_tasks(attn_parallel_for_fn parallel_for, void *parallel_ctx, attn_task_fn task,
                    void *ctx, size_t count);
void attn_run(const attn_dsp *dsp, const attn_problem *pb);
/* attn_run with the op's task plan computed before (a plan's: it depends on
   the shape, dtypes, strides and options only, never on data pointers). */
void attn_run_planned(const attn_dsp *dsp, const attn_problem *pb, const task_plan *tp);
/* Tasks [lo, hi) of a plan whose tasks need no preparation and no other
   task (attn_plan_run_share), in order on this thread. */
void attn_run_planned_range(const attn_dsp *dsp, const attn_problem *pb, const task_plan *tp,
                            size_t lo, size_t hi);

/* The forward's attn_op (src/driver/forward.c), which a plan
   (src/driver/plan_forward.c) validates with and runs. */
extern const attn_op attn_forward_op;

/*
 * The query rows of one task of attn_scores and attn_weights, at most
 * ATTN_SCORES_BLOCK_Q (scores.c says why that many): the plan of both and
 * their common first pass, the scaled products q.k written straight into
 * the caller's table (*out0: the first row's). Returns the row count (0: the
 * block lies past its sequence's end); each operation finishes the rows.
 */
#define ATTN_SCORES_BLOCK_Q ATTN_MAX_QK_ROWS
task_plan attn_plan_scores(const attn_dsp *dsp, const attn_problem *pb);
int64_t attn_score_tiles(const task_ctx *ctx, size_t index, row_ref *rows, float **out0);

#endif /* ATTN_DRIVER_H */

/* SPDX-License-Identifier: MIT */
/*
 * A validated attention problem: what the entry points hand the drivers,
 * and the attn_op that says what its operation checks and runs. Everything
 * in it has been checked (attn_validate, src/validate.h), so the drivers
 * never fail.
 */
#ifndef ATTN_PROBLEM_H
#define ATTN_PROBLEM_H

#include "attn.h"
#include "dsp.h"

struct task_plan;

/* Bytes [begin, end) a tensor view or array touches (src/validate.h). */
typedef struct attn_byte_range {
    uintptr_t begin, end;
} attn_byte_range;
struct task_ctx;
struct attn_range_set;
typedef struct attn_problem attn_problem;

/* The columns of an operation's output rows. */
typedef enum attn_out_cols {
    ATTN_OUT_KV_LEN,   /* a score row: scores, weights, mask_apply's table */
    ATTN_OUT_V_DIM,    /* the forward's output */
    ATTN_OUT_HEAD_DIM  /* the backward's dq */
} attn_out_cols;

/*
 * An operation on an attn_problem as its module (src/driver/<op>.c) describes
 * it: what attn_validate (src/validate.c) checks of its arguments, and the
 * plan and task attn_run (src/driver/run.c) runs. Neither of those files
 * names an operation: what differs between operations is this data and the
 * module's code.
 */
typedef struct attn_op {
    int reads_qk;           /* q and k, and with them the paging fields */
    int reads_v;            /* v */
    attn_out_cols out_cols; /* the columns of `out` */
    int rounds_out;         /* `out` may also have a dtype whose line of
                               src/dtype_list.h says ROUNDED (F16, BF16): the
                               module writes its f32 rows through
                               attn_store_out_row (src/driver/driver.h) */
    int writes_stats;       /* the attn_row_stats argument (else ignored) */
    /* NULL, or the outputs the operation sizes itself after `out` is checked
       and before the stats are (the forward: the split-KV workspace when the
       call splits): sets pb->splits and workspace (1 and NULL before) and
       adds what it writes to the output ranges. */
    attn_status (*scratch)(attn_problem *pb, const attn_options *o, struct attn_range_set *set);
    /* the task geometry and count (src/driver/driver.h) */
    struct task_plan (*plan)(const attn_dsp *dsp, const attn_problem *pb);
    attn_task_fn task;
    /* NULL, or what runs on the calling thread before the tasks */
    void (*prepare)(const struct task_ctx *ctx);
} attn_op;

struct attn_problem {
    const attn_op *op;
    int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
    int64_t group; /* q_heads / kv_heads */

    /* The options as read (attn_read_options: defaults past the caller's
       struct_size) and validated. The driver reads the plain values
       (flags, softcap, window, window_right, ...) from here, so a new
       value option needs no field of its own; what validation resolves or
       derives is below. */
    attn_options opt;

    float scale; /* opt.scale, or 1/sqrt(head_dim) for 0 */
    const int32_t *q_lens, *kv_lens;
    attn_tensor mask, bias; /* data == NULL when absent */
    attn_parallel_for_fn parallel_for;
    void *parallel_ctx;
    attn_tensor sinks, alibi; /* F32 [b][q_head]; data == NULL when absent */
    const int64_t *q_pos, *k_pos; /* NULL: the defaults of attn.h */

    /* split-KV (forward only): splits == 1 means unsplit; else the task
       grid's chunks per block (attn_split_grid), each sequence taking its
       own attn_split_plan of them */
    int64_t splits;
    void *workspace;       /* >= attn_split_bytes(...) bytes when splits > 1 */
    /* shared prefixes (forward only): the most key chunks a group's prefix
       takes (attn_prefix_parts), and where their states go, when the call
       attends each group's prefix once; 0 and NULL when it does not */
    int64_t prefix_parts;
    void *prefix_workspace;

    /* offset batches and paged K/V (attn.h); NULL / 0 when absent */
    const int32_t *q_offsets, *kv_offsets;
    const int32_t *block_table;
    int64_t block_table_stride, block_size, num_blocks;
    /* query positions the tasks cover: q_len, or the longest sequence when
       q_offsets is given (rows past a sequence's end are then not written) */
    int64_t q_extent;

    /* tensors, copied once validated (out: scores, weights or the forward
       output; q/k/v zeroed where the operation has none) */
    attn_tensor q, k, v, out;
    attn_row_stats stats; /* members may be NULL */

    /* attn_backward (out above is dq): the forward's output and lse, dout,
       and the other gradients (dbias.data NULL when not asked for) */
    attn_tensor o, dout, dk, dv, dbias;
    const float *lse;
    float *dsinks; /* NULL when not asked for */
    /* The bytes attn_validate found q, k, v, out and the operation's scratch
       (the split-KV workspace) to span, in that order ({0, 0} for those the
       call has not): a plan (src/driver/plan_forward.c) checks new data
       pointers with their lengths. */
    attn_byte_range span[5];
    /* What qk_tile multiplies dot(q, k) by: scale, times k_scale for an
       FP8 k (validated finite and nonzero); 1 with k_scales, whose keys
       multiply their own scores by fl(scale * k_scales_j). What the output
       row is multiplied by besides 1/l: v_scale for an FP8 v, else 1. */
    float qk_scale, v_scale;
    /* FP8 scales per key row (attn.h 1.6), laid out like k and v with one
       column; data == NULL when absent (or not read by the operation) */
    attn_tensor k_scales, v_scales;
    /* 1.8: channels per scale of k_scales (v_scales), whose rows then hold
       head_dim / k_group (v_dim / v_group) scales; 0: one per row. A
       grouped cache is decoded to f32 rows for the F32 kernels
       (attn_kv_stage, src/driver/kv.h), qk_scale then being scale. */
    int64_t k_group, v_group;
    /* 1.9: the last k_tail_dim values of each key row, laid out like k
       (data == NULL: none); k then holds head_dim - k_tail_dim. Such rows
       are decoded to f32 (both parts) for the F32 kernels, as groups are. */
    attn_tensor k_tail;
    int64_t k_tail_dim;
};

/* The properties of an attn_dtype (ATTN_DTYPE_GET, src/dtype_list.h). */
/* ATTN_DTYPE_KIND_* of a dtype; -1 for an unknown value. */
static inline int attn_dtype_kind_of(int32_t dtype) { ATTN_DTYPE_GET(dtype, kind, -1) }

/* Bytes per stride unit (an element, or a block for Q8_0/Q4_0); 0 for an
   unknown value. */
static inline size_t attn_dtype_size(int32_t dtype) { ATTN_DTYPE_GET(dtype, bytes, 0) }

/* The dtype's name ("q8_0", as the CLI and Python spell it), for messages. */
static inline const char *attn_dtype_name(int32_t dtype) { ATTN_DTYPE_GET(dtype, name, "?") }

/* Values per stride unit: ATTN_QBLOCK for the block formats, else 1. */
static inline int64_t attn_dtype_block(int32_t dtype) { ATTN_DTYPE_GET(dtype, block, 1) }

/* F32, F16 or BF16: the dtypes of q, and of the backward's float inputs. */
static inline int attn_dtype_is_float_input(int32_t dtype) { ATTN_DTYPE_GET(dtype, float, 0) }

/* Q8_0, Q4_0, FP8_E4M3, FP8_E5M2: what attn_quantize writes. */
static inline int attn_dtype_is_quantized(int32_t dtype) { ATTN_DTYPE_GET(dtype, quant, 0) }

/* FP8_E4M3, FP8_E5M2: one byte per value, times k_scale / v_scale. */
static inline int attn_dtype_is_fp8(int32_t dtype)
{
    return attn_dtype_kind_of(dtype) == ATTN_DTYPE_KIND_FP8;
}

/* Scales per row of an FP8 scale view (attn_options.k_scales, v_scales)
   with `group` channels per scale (attn.h 1.8) over rows of `dim`. */
static inline int64_t attn_scale_cols(int64_t group, int64_t dim)
{
    return group > 0 && dim % group == 0 ? dim / group : 1;
}

/* A valid dtype of q; of k and v (attn.h, "Quantized K/V caches"). */
static inline int attn_dtype_is_q(int32_t dtype) { ATTN_DTYPE_GET(dtype, q, 0) }
static inline int attn_dtype_is_kv(int32_t dtype) { ATTN_DTYPE_GET(dtype, kv, 0) }
/* Where a dtype may be an output (ATTN_DTYPE_OUT_*, the list's `out`). */
static inline attn_dtype_out attn_dtype_output(int32_t dtype)
{
    ATTN_DTYPE_GET(dtype, out, ATTN_DTYPE_OUT_NONE)
}
/* A valid dtype of every output (scores, weights, dq, attn_merge's parts);
   with `rounded`, of an output an operation rounds its f32 rows into (the
   forward's and attn_merge's out: F16, BF16 too). */
static inline int attn_dtype_is_output(int32_t dtype, int rounded)
{
    const attn_dtype_out where = attn_dtype_output(dtype);
    return where == ATTN_DTYPE_OUT_ANY || (rounded && where == ATTN_DTYPE_OUT_ROUNDED);
}

/*
 * Query row 0's position minus key row 0's, for sequence b (lq, lk its valid
 * lengths): the caller's q_pos/k_pos (attn.h, "Masks"), else the
 * bottom-right alignment lk - lq. |result| <= ATTN_MAX_POSITION.
 */
static inline int64_t attn_seq_rel(const attn_problem *pb, int64_t b, int64_t lq, int64_t lk)
{
    if (!pb->q_pos)
        return lk - lq;
    return pb->q_pos[b] - (pb->k_pos ? pb->k_pos[b] : 0);
}

/* Query i of sequence b's position beside k_positions (attn.h, "Positions
   per key slot"): q_pos[b] + i, else the bottom-right Lk_b - Lq_b + i. */
static inline int64_t attn_query_pos(const attn_problem *pb, int64_t b, int64_t i, int64_t lq,
                                     int64_t lk)
{
    return (pb->q_pos ? pb->q_pos[b] : lk - lq) + i;
}

/* Sequence b's own query rows and keys (attn.h: Lq_b, Lk_b). */
static inline int64_t attn_seq_q_len(const attn_problem *pb, int64_t b)
{
    return pb->q_lens ? pb->q_lens[b] : pb->q_len;
}

static inline int64_t attn_seq_kv_len(const attn_problem *pb, int64_t b)
{
    return pb->kv_lens ? pb->kv_lens[b] : pb->kv_len;
}

/* Keys sequence b shares with sequence b - 1 (attn.h, "Shared prefixes"). */
static inline int64_t attn_seq_shared(const attn_problem *pb, int64_t b)
{
    return pb->opt.shared_prefix ? pb->opt.shared_prefix[b] : 0;
}

/*
 * The group of sequence b (attn.h, "Shared prefixes"): its sequences
 * [*b0, *b1] and the keys *p of *b0 every one of them reads (0 for a group
 * of one). Takes the entries as validated.
 */
static inline void attn_prefix_group(const int32_t *shared, int64_t batch, int64_t b,
                                     int64_t *b0, int64_t *b1, int64_t *p)
{
    *b0 = *b1 = b;
    *p = 0;
    if (!shared)
        return;
    while (*b0 > 0 && shared[*b0] > 0)
        --*b0;
    while (*b1 + 1 < batch && shared[*b1 + 1] > 0)
        ++*b1;
    if (*b1 == *b0)
        return;
    *p = INT64_MAX;
    for (int64_t c = *b0 + 1; c <= *b1; c++)
        *p = shared[c] < *p ? shared[c] : *p;
}

/*
 * The keys query i (counted from its sequence's start) of sequence b may see
 * by padding, causal and window, as [*lo, *hi) counted from the sequence's
 * first key; *lo >= *hi when none. The one statement of attn.h's mask rules
 * that both validation (which block-table entries are read) and the drivers
 * use. With k_positions the visible keys are no interval: every valid key,
 * the positional rules masking them one by one (attn_score_terms).
 */
static inline void attn_seq_keys(const attn_problem *pb, int64_t b, int64_t i, int64_t *lo,
                                 int64_t *hi)
{
    const int64_t lq = attn_seq_q_len(pb, b);
    const int64_t lk = attn_seq_kv_len(pb, b);
    *lo = 0;
    *hi = i < lq ? lk : 0;
    if (*hi == 0 || pb->opt.k_positions)
        return;
    const int64_t aligned = i + attn_seq_rel(pb, b, lq, lk);
    if ((pb->opt.flags & ATTN_CAUSAL) && aligned + 1 < *hi)
        *hi = aligned + 1;
    if (pb->opt.window > 0 && aligned >= pb->opt.window)
        *lo = aligned - pb->opt.window + 1;
    /* the right edge: R >= lk - aligned (= lq - i > 0) hides nothing, and
       aligned + R could overflow for such R */
    if (pb->opt.window_right > 0 && pb->opt.window_right < lk - aligned && aligned + pb->opt.window_right < *hi)
        *hi = aligned + pb->opt.window_right;
    if (*hi < *lo)
        *hi = *lo;
}

/*
 * The split-KV plan of attn.h. Each sequence splits as it would called
 * alone: from its own query rows and keys, the head counts and kv_splits
 * only (never the rest of the batch, the ISA or the thread count), so its
 * results do not depend on what else the call holds. attn_split_plan
 * gives one sequence's chunks (splits == 1: unsplit; chunks of `chunk`
 * keys, a multiple of ATTN_SPLIT_ALIGN, the last may be shorter);
 * attn_split_grid the most chunks a sequence of the call takes (its task
 * grid and workspace).
 */
#define ATTN_SPLIT_ALIGN 256      /* every ISA's block_k divides it */
#define ATTN_SPLIT_MIN_CHUNK 1024 /* automatic chunks are at least this long */
#define ATTN_SPLIT_TARGET 64      /* automatic: aim for this many tasks per sequence */
/* A shared prefix (attn.h, "Shared prefixes") is attended in chunks of this
   many keys: tasks for the threads, the same chunks on every ISA and thread
   count (a multiple of ATTN_SPLIT_ALIGN). */
#define ATTN_PREFIX_CHUNK 1024
/* topk: the keys a query row selects at most (attn_options.topk; 0: all):
   an automatic split keeps ATTN_SPLIT_MIN_CHUNK selected keys per chunk. */
void attn_split_plan(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                     int64_t topk, int32_t kv_splits, int64_t *splits, int64_t *chunk);
int64_t attn_split_grid(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len,
                        int64_t kv_len, int64_t topk, const int32_t *q_lens,
                        const int32_t *kv_lens, int32_t kv_splits);
/* The most chunks attn_split_grid can give for any lengths within the
   shape (lens_given: q_lens or kv_lens is given, whatever they hold). */
int64_t attn_split_grid_bound(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                              int64_t topk, int lens_given, int32_t kv_splits);
/* Workspace bytes of a split forward; 0 when it overflows size_t. */
size_t attn_split_bytes(int64_t batch, int64_t q_heads, int64_t q_len, int64_t v_dim,
                        int64_t splits);

#endif /* ATTN_PROBLEM_H */

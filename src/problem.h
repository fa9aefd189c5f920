/* SPDX-License-Identifier: MIT */
/* A validated attention problem (attn_validate, src/validate.h): the drivers
   never fail. */
#ifndef ATTN_PROBLEM_H
#define ATTN_PROBLEM_H

#include "attn.h"
#include "dsp.h"

struct task_plan;

typedef struct attn_byte_range {
    uintptr_t begin, end;
} attn_byte_range;
struct task_ctx;
struct attn_range_set;
typedef struct attn_problem attn_problem;

typedef enum attn_out_cols {
    ATTN_OUT_KV_LEN,   /* a score row: scores, weights, mask_apply's table */
    ATTN_OUT_V_DIM,    /* the forward's output */
    ATTN_OUT_HEAD_DIM  /* the backward's dq */
} attn_out_cols;

/* What differs between operations for src/validate.c and src/driver/run.c,
   which name none. */
typedef struct attn_op {
    int reads_qk;           /* and with them the paging fields */
    int reads_v;
    attn_out_cols out_cols;
    int rounds_out;         /* out may be ROUNDED (src/dtype_list.h): written
                               through attn_store_out_row only */
    int writes_stats;
    /* NULL, or sizes the operation's own outputs (the split-KV workspace)
       and adds them to the output ranges */
    attn_status (*scratch)(attn_problem *pb, const attn_options *o, struct attn_range_set *set);
    struct task_plan (*plan)(const attn_dsp *dsp, const attn_problem *pb);
    attn_task_fn task;
    /* NULL, or runs on the calling thread before the tasks */
    void (*prepare)(const struct task_ctx *ctx);
    /* what the scratch hook needs besides the options: attn_forward_sources'
       second source (src/driver/forward_sources.c); NULL otherwise */
    const void *ctx;
} attn_op;

struct attn_problem {
    const attn_op *op;
    int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
    int64_t group; /* q_heads / kv_heads */

    /* validated, defaults past the caller's struct_size: a new value option
       needs no field of its own */
    attn_options opt;

    float scale; /* opt.scale, or 1/sqrt(head_dim) for 0 */
    const int32_t *q_lens, *kv_lens;
    attn_tensor mask, bias; /* data == NULL when absent */
    attn_parallel_for_fn parallel_for;
    void *parallel_ctx;
    attn_tensor sinks, alibi; /* data == NULL when absent */
    const int64_t *q_pos, *k_pos; /* NULL: the defaults of attn.h */

    /* forward: the grid's chunks per block (1: unsplit) */
    int64_t splits;
    void *workspace;
    /* forward: 0 and NULL unless each group's prefix is attended once */
    int64_t prefix_parts;
    void *prefix_workspace;
    /* forward: NULL, or the wide rows' accumulators (forward.c, acc_ws) */
    float *acc_workspace;

    const int32_t *q_offsets, *kv_offsets;
    const int32_t *block_table;
    int64_t block_table_stride, block_size, num_blocks;
    /* q_len, or with q_offsets the longest sequence */
    int64_t q_extent;

    /* zeroed where the operation has none */
    attn_tensor q, k, v, out;
    attn_row_stats stats; /* members may be NULL */

    /* attn_backward (out is dq) */
    attn_tensor o, dout, dk, dv, dbias;
    const float *lse;
    float *dsinks;
    /* q, k, v, out and scratch as validated: a plan
       (src/driver/plan_forward.c) checks new pointers against them */
    attn_byte_range span[5];
    /* qk_scale: scale times an FP8 k_scale; 1 with k_scales, applied per
       key as fl(scale * k_scales_j). v_scale multiplies out after 1/l. */
    float qk_scale, v_scale;
    attn_tensor k_scales, v_scales;
    int64_t k_group, v_group; /* channels per scale; 0: one per row */
    /* the last k_tail_dim values of each key row (data == NULL: none) */
    attn_tensor k_tail;
    int64_t k_tail_dim;
    /* attn_forward_sources: the second source as a top-k problem over the
       same rows (src/driver/forward_sources.c); NULL otherwise */
    const attn_problem *kv2;
};

/* An unknown dtype gets the last argument. */
static inline int attn_dtype_kind_of(int32_t dtype) { ATTN_DTYPE_GET(dtype, kind, -1) }

/* Bytes per stride unit (an element, or a block). */
static inline size_t attn_dtype_size(int32_t dtype) { ATTN_DTYPE_GET(dtype, bytes, 0) }

static inline const char *attn_dtype_name(int32_t dtype) { ATTN_DTYPE_GET(dtype, name, "?") }

static inline int64_t attn_dtype_block(int32_t dtype) { ATTN_DTYPE_GET(dtype, block, 1) }

static inline int attn_dtype_is_float_input(int32_t dtype) { ATTN_DTYPE_GET(dtype, float, 0) }

static inline int attn_dtype_is_quantized(int32_t dtype) { ATTN_DTYPE_GET(dtype, quant, 0) }

static inline int attn_dtype_is_fp8(int32_t dtype)
{
    return attn_dtype_kind_of(dtype) == ATTN_DTYPE_KIND_FP8;
}

static inline int attn_dtype_is_asym(int32_t dtype)
{
    return attn_dtype_kind_of(dtype) == ATTN_DTYPE_KIND_ASYM;
}

/* An ASYM row's group: `group`, 0 meaning the whole row of cols values. */
static inline int64_t attn_asym_group(int64_t group, int64_t cols)
{
    return group > 0 ? group : cols;
}

/* Stride units of a K/V row of cols values (whole blocks, group dividing
   cols): an ASYM row's codes and a header per group (attn.h). */
static inline int64_t attn_kv_row_units(int32_t dtype, int64_t cols, int64_t group)
{
    const int64_t units = cols / attn_dtype_block(dtype);
    if (!attn_dtype_is_asym(dtype) || cols == 0)
        return units;
    return units + cols / attn_asym_group(group, cols) * ATTN_ASYM_HEADER;
}

static inline int64_t attn_scale_cols(int64_t group, int64_t dim)
{
    return group > 0 && dim % group == 0 ? dim / group : 1;
}

static inline int attn_dtype_is_q(int32_t dtype) { ATTN_DTYPE_GET(dtype, q, 0) }
static inline int attn_dtype_is_kv(int32_t dtype) { ATTN_DTYPE_GET(dtype, kv, 0) }
static inline attn_dtype_out attn_dtype_output(int32_t dtype)
{
    ATTN_DTYPE_GET(dtype, out, ATTN_DTYPE_OUT_NONE)
}
/* rounded: an output the operation rounds its f32 rows into */
static inline int attn_dtype_is_output(int32_t dtype, int rounded)
{
    const attn_dtype_out where = attn_dtype_output(dtype);
    return where == ATTN_DTYPE_OUT_ANY || (rounded && where == ATTN_DTYPE_OUT_ROUNDED);
}

/* Query row 0's position minus key row 0's (attn.h, "Masks");
   |result| <= ATTN_MAX_POSITION. */
static inline int64_t attn_seq_rel(const attn_problem *pb, int64_t b, int64_t lq, int64_t lk)
{
    if (!pb->q_pos)
        return lk - lq;
    return pb->q_pos[b] - (pb->k_pos ? pb->k_pos[b] : 0);
}

static inline int64_t attn_query_pos(const attn_problem *pb, int64_t b, int64_t i, int64_t lq,
                                     int64_t lk)
{
    return (pb->q_pos ? pb->q_pos[b] : lk - lq) + i;
}

static inline int64_t attn_seq_q_len(const attn_problem *pb, int64_t b)
{
    return pb->q_lens ? pb->q_lens[b] : pb->q_len;
}

static inline int64_t attn_seq_kv_len(const attn_problem *pb, int64_t b)
{
    return pb->kv_lens ? pb->kv_lens[b] : pb->kv_len;
}

static inline int64_t attn_seq_shared(const attn_problem *pb, int64_t b)
{
    return pb->opt.shared_prefix ? pb->opt.shared_prefix[b] : 0;
}

/* Sequences [*b0, *b1] sharing b's prefix, and the keys *p of *b0 all of
   them read (0 for a group of one). Trusts validation. */
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
 * The one statement of attn.h's interval mask rules (padding, causal,
 * window), used by validation and the drivers alike; *lo >= *hi when none.
 * With k_positions the visible keys are no interval: every valid key, masked
 * one by one (attn_score_terms).
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
 * The split-KV plan of attn.h. Each sequence splits as it would alone, from
 * its own lengths, the head counts and kv_splits only (never the batch, ISA
 * or thread count), so its results do not depend on the rest of the call.
 */
#define ATTN_SPLIT_ALIGN 256      /* every ISA's block_k divides it */
#define ATTN_SPLIT_MIN_CHUNK 1024
#define ATTN_SPLIT_TARGET 64      /* tasks per sequence */
/* the same chunks on every ISA and thread count */
#define ATTN_PREFIX_CHUNK 1024
/* topk (0: all): an automatic split keeps ATTN_SPLIT_MIN_CHUNK selected keys
   per chunk. */
void attn_split_plan(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                     int64_t topk, int32_t kv_splits, int64_t *splits, int64_t *chunk);
int64_t attn_split_grid(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len,
                        int64_t kv_len, int64_t topk, const int32_t *q_lens,
                        const int32_t *kv_lens, int32_t kv_splits);
/* The most attn_split_grid can give for any lengths within the shape. */
int64_t attn_split_grid_bound(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                              int64_t topk, int lens_given, int32_t kv_splits);
/* 0 when it overflows size_t */
size_t attn_split_bytes(int64_t batch, int64_t q_heads, int64_t q_len, int64_t v_dim,
                        int64_t splits);

#endif /* ATTN_PROBLEM_H */

/* SPDX-License-Identifier: MIT */
/*
 * The argument checks every operation's module (src/driver/) shares, in
 * src/validate.c: the options, the shape, tensors and arrays as byte ranges
 * and their disjointness, the row arguments of the row operations, and the
 * whole check of an operation on an attn_problem, which reads what differs
 * per operation from its attn_op (src/problem.h). docs/DESIGN.md §3 is the
 * contract: everything is checked before anything is written.
 */
#ifndef ATTN_VALIDATE_H
#define ATTN_VALIDATE_H

#include <stdint.h>

#include "option_list.h"
#include "problem.h"

/* Returns the status of `expr` from the enclosing function unless ATTN_OK. */
#define ATTN_TRY(expr)                   \
    do {                                 \
        attn_status status_ = (expr);    \
        if (status_ != ATTN_OK)          \
            return status_;              \
    } while (0)

/* Copies the fields of the caller's attn_options that its struct_size covers
   into *o, the defaults elsewhere (NULL: all defaults). */
attn_status attn_read_options(attn_options *o, const attn_options *user);

/* A caller's struct of `size` bytes of which this library knows `known`:
   1 when the bytes past `known` are all zero (a newer attn.h's fields left
   unset) and size is at most ATTN_STRUCT_SIZE_MAX, as attn.h promises. */
#define ATTN_STRUCT_SIZE_MAX 4096
int attn_struct_tail_zero(const void *user, size_t known, uint32_t size);

/* The shape, as every operation on an attn_shape checks it (merge too). */
attn_status attn_check_shape(const attn_shape *shape);

/* The checks of every attention operation that need no tensor: options
   (read into *o), shape and scalar arguments. */
attn_status attn_check_shape_options(const attn_shape *shape, const attn_options *opt,
                                     attn_options *o);

/* Per-row FP8 scales (attn.h 1.6) given for cache `which` ("k" or "v") of
   `dtype`: only beside an FP8 cache, whose per-call scale `per_call` is then
   0 (ATTN_ERR_ARG otherwise). */
attn_status attn_check_row_scales(int32_t dtype, float per_call, const char *which);
/* k_scale and v_scale: each 0 or a positive normal float (ATTN_ERR_ARG). */
attn_status attn_check_kv_scales(const attn_options *o);
/* A K or V tensor of `dtype` with rows of `cols` values and its scale (k_scale
   or v_scale): a K/V dtype, a scale other than 0 or 1 only for FP8
   (ATTN_ERR_ARG), whole blocks of a block format (ATTN_ERR_SHAPE). */
attn_status attn_check_kv(int32_t dtype, int64_t cols, float scale);
/* The arrays that describe the batch: q_lens/kv_lens in [0, q_len]/[0, kv_len],
   each offset range inside them, and with `paging` (an operation that reads
   K/V) the paging description's scalars: none without a block table, else
   block_size and num_blocks >= 1 (ATTN_ERR_ARG), block_table_stride >= 0
   (ATTN_ERR_STRIDE). */
attn_status attn_check_batch_arrays(const attn_options *o, const attn_shape *s, int paging);

/* attn_byte_range: src/problem.h. */

static inline int attn_ranges_meet(attn_byte_range a, attn_byte_range b)
{
    return a.begin < b.end && b.begin < a.end;
}

/*
 * The byte ranges of one call: its inputs and its outputs. The capacity is
 * counted, not guessed: the operations' own tensors (the backward has the
 * most: q, k, v, out, dout, lse in; dq, dk, dv, dbias, dsinks out) plus
 * every pointer option of src/option_list.h, plus the three row statistics
 * and the split-KV workspace. A full set is a bug of the caller: adding to
 * it is ATTN_ERR_ARG rather than a write past it.
 */
enum {
    ATTN_MAX_INPUT_RANGES = 6 + ATTN_OPTION_INPUT_RANGES,
    ATTN_MAX_OUTPUT_RANGES = 5 + 3 + 1
};
typedef struct attn_range_set {
    attn_byte_range in[ATTN_MAX_INPUT_RANGES], out[ATTN_MAX_OUTPUT_RANGES];
    int n_in, n_out;
} attn_range_set;

/*
 * The view [nb][nh][nr][nc] of t: addressable without overflow and, for an
 * output, no two elements at one address (nested layouts only); its bytes
 * in *range.
 */
attn_status attn_check_tensor(const attn_tensor *t, int64_t nb, int64_t nh, int64_t nr,
                              int64_t nc, int is_output, attn_byte_range *range);
/* attn_check_tensor, recording the range in set (as an input or an output). */
attn_status attn_add_tensor(attn_range_set *set, const attn_tensor *t, int64_t nb, int64_t nh,
                            int64_t nr, int64_t nc, int is_output);
/* The n elements of `size` bytes at p as a range of set (n >= 1, no wrap). */
attn_status attn_add_array(attn_range_set *set, const void *p, int64_t n, size_t size,
                           int is_output);
/* q, k and v (v NULL: not read) as input ranges of set, in that order: q
   [batch][q_heads][q_len][head_dim]; k (its own head_dim - k_tail_dim
   columns) and v (v_dim) dense, or with `paged` the pool
   [num_blocks][kv_heads][block_size]. */
attn_status attn_add_qkv(attn_range_set *set, const attn_shape *s, const attn_options *o,
                         int paged, const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *v);
/* Every I32, I64 and TENSOR option that is given, as an input range of set
   over the extent its line of src/option_list.h names. */
attn_status attn_add_option_ranges(attn_range_set *set, const attn_options *o,
                                   const attn_shape *s);
/* The block table's entries a call may read: ceil(kv_len / block_size) per
   sequence, rows block_table_stride apart (the paging scalars already
   checked: attn_check_batch_arrays); -1 when that overflows. */
int64_t attn_block_table_entries(const attn_options *o, const attn_shape *s);
/* Those entries as an input range of set (ATTN_ERR_SHAPE on overflow). */
/* Every entry of sequence b's own table row whose page holds one of its
   keys [lo, hi) (counted from its first key) lies in the pool, else
   ATTN_ERR_ARG with a message naming the entry and `why` it is read. */
attn_status attn_check_own_pages(const attn_problem *pb, int64_t b, int64_t lo, int64_t hi,
                                 const char *why);
attn_status attn_add_block_table(attn_range_set *set, const attn_options *o,
                                 const attn_shape *s);
/* No output may share a byte with an input or another output. */
attn_status attn_check_disjoint(const attn_range_set *set);
/* 1 when the sequences' row ranges [offsets[b], + lens[b], or len without
   lens) are in order and disjoint, empty ones aside: a packed output's
   sequences (batch_stride 0) then share no row. */
int attn_seqs_in_order(const int32_t *offsets, const int32_t *lens, int64_t len, int64_t batch);

/* The arguments of a row operation (attn_softmax, attn_softmax_backward). */
attn_status attn_validate_rows(int64_t rows, int64_t cols, int64_t row_stride);
/* 1 when the float rows a and b (validated sizes) share any address. */
int attn_rows_overlap(const float *a, int64_t a_rows, int64_t a_cols, int64_t a_stride,
                      const float *b, int64_t b_rows, int64_t b_cols, int64_t b_stride);

/* The problem's shape, options as read (o: checked), lengths, offsets,
   positions, threads and, with `paged`, the paging description; everything
   else of *pb zero. attn_validate and the operations on other arguments
   (attn_cache_append) start from it. */
void attn_problem_geometry(attn_problem *pb, const attn_shape *shape, const attn_options *o,
                           int paged);
/* The arrays that describe the batch (lengths, offsets, positions) of *pb
   read from o's: attn_problem_geometry's, and a plan's copies. */
void attn_problem_arrays(attn_problem *pb, const attn_options *o);

/*
 * Checks everything of operation `op` on these arguments and fills `pb`;
 * writes nothing else. What the operation reads and writes comes from op
 * (q and k, v, the output's columns, the stats, its scratch outputs).
 */
attn_status attn_validate(attn_problem *pb, const attn_op *op, const attn_shape *shape,
                          const attn_options *opt, const attn_tensor *q,
                          const attn_tensor *k, const attn_tensor *v,
                          const attn_tensor *out, const attn_row_stats *stats);

#endif /* ATTN_VALIDATE_H */

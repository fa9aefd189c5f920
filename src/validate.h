/* SPDX-License-Identifier: MIT */
/* The argument checks the operations share. The contract (docs/DESIGN.md
   §3): everything is checked before anything is written. */
#ifndef ATTN_VALIDATE_H
#define ATTN_VALIDATE_H

#include <stdint.h>

#include "option_list.h"
#include "problem.h"

#define ATTN_TRY(expr)                   \
    do {                                 \
        attn_status status_ = (expr);    \
        if (status_ != ATTN_OK)          \
            return status_;              \
    } while (0)

/* Fields past the caller's struct_size get their defaults. */
attn_status attn_read_options(attn_options *o, const attn_options *user);

/* 1 when a newer caller's fields past `known` are all zero and size is at
   most ATTN_STRUCT_SIZE_MAX, as attn.h promises. */
#define ATTN_STRUCT_SIZE_MAX 4096
int attn_struct_tail_zero(const void *user, size_t known, uint32_t size);

attn_status attn_check_shape(const attn_shape *shape);

/* The checks that need no tensor. */
attn_status attn_check_shape_options(const attn_shape *shape, const attn_options *opt,
                                     attn_options *o);

attn_status attn_check_row_scales(int32_t dtype, float per_call, const char *which);
attn_status attn_check_kv_scales(const attn_options *o);
attn_status attn_check_kv(int32_t dtype, int64_t cols, float scale);
/* paging: the call reads K/V, so the paging scalars are checked too */
attn_status attn_check_batch_arrays(const attn_options *o, const attn_shape *s, int paging);

static inline int attn_ranges_meet(attn_byte_range a, attn_byte_range b)
{
    return a.begin < b.end && b.begin < a.end;
}

/* Counted, not guessed: the backward's own tensors (the most), every pointer
   option, the row statistics and the workspace. A full set is a bug: adding
   to it is ATTN_ERR_ARG rather than a write past it. */
enum {
    ATTN_MAX_INPUT_RANGES = 6 + ATTN_OPTION_INPUT_RANGES,
    ATTN_MAX_OUTPUT_RANGES = 5 + 3 + 1
};
typedef struct attn_range_set {
    attn_byte_range in[ATTN_MAX_INPUT_RANGES], out[ATTN_MAX_OUTPUT_RANGES];
    int n_in, n_out;
} attn_range_set;

/* Addressable without overflow and, for an output, no two elements at one
   address (nested layouts only). */
attn_status attn_check_tensor(const attn_tensor *t, int64_t nb, int64_t nh, int64_t nr,
                              int64_t nc, int is_output, attn_byte_range *range);
attn_status attn_add_tensor(attn_range_set *set, const attn_tensor *t, int64_t nb, int64_t nh,
                            int64_t nr, int64_t nc, int is_output);
/* n >= 1, no wrap */
attn_status attn_add_array(attn_range_set *set, const void *p, int64_t n, size_t size,
                           int is_output);
/* A scale group's counterpart: scales for an FP8 (any non-ASYM) cache, none
   and whole records for an ASYM one (attn.h); which: "k" or "v". */
attn_status attn_check_scale_group(int32_t dtype, const attn_tensor *scales, int64_t group,
                                   int64_t cols, const char *which);
/* The cols to range a K/V view of rows of cols values by (attn_check_tensor
   divides by the dtype's block): an ASYM row's records with their headers. */
int64_t attn_kv_range_cols(int32_t dtype, int64_t cols, int64_t group);
/* In that order (pb->span relies on it); v NULL: not read. */
attn_status attn_add_qkv(attn_range_set *set, const attn_shape *s, const attn_options *o,
                         int paged, const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *v);
attn_status attn_add_option_ranges(attn_range_set *set, const attn_options *o,
                                   const attn_shape *s);
/* -1 on overflow; the paging scalars must be checked first. */
int64_t attn_block_table_entries(const attn_options *o, const attn_shape *s);
/* why: named in the message of an entry outside the pool */
attn_status attn_check_own_pages(const attn_problem *pb, int64_t b, int64_t lo, int64_t hi,
                                 const char *why);
attn_status attn_add_block_table(attn_range_set *set, const attn_options *o,
                                 const attn_shape *s);
attn_status attn_check_disjoint(const attn_range_set *set);
/* Then a packed output's sequences (batch_stride 0) share no row. */
int attn_seqs_in_order(const int32_t *offsets, const int32_t *lens, int64_t len, int64_t batch);

attn_status attn_validate_rows(int64_t rows, int64_t cols, int64_t row_stride);
int attn_rows_overlap(const float *a, int64_t a_rows, int64_t a_cols, int64_t a_stride,
                      const float *b, int64_t b_rows, int64_t b_cols, int64_t b_stride);

/* Everything of *pb but the geometry zero. */
void attn_problem_geometry(attn_problem *pb, const attn_shape *shape, const attn_options *o,
                           int paged);
void attn_problem_arrays(attn_problem *pb, const attn_options *o);

/* Fills pb; writes nothing else. */
attn_status attn_validate(attn_problem *pb, const attn_op *op, const attn_shape *shape,
                          const attn_options *opt, const attn_tensor *q,
                          const attn_tensor *k, const attn_tensor *v,
                          const attn_tensor *out, const attn_row_stats *stats);

#endif /* ATTN_VALIDATE_H */

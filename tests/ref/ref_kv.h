/* SPDX-License-Identifier: MIT */
/*
 * The float64 reference for offset, packed and paged K/V (attn.h 1.1),
 * written from the contract alone: each sequence is copied out of the
 * caller's layout into a dense, right-padded problem that ref_attn_compute
 * reads as in 1.0. Query i of sequence b is row q_offsets[b] + i; its key j is
 * position p = kv_offsets[b] + j, which with a block table is slot
 * p % block_size of pool block block_table[b * stride + p / block_size].
 * Only positions inside a sequence's valid ranges are copied (and, paged,
 * only those some query may see: the table holds anything elsewhere).
 */
#ifndef ATTN_TEST_REF_KV_H
#define ATTN_TEST_REF_KV_H

#include <stdint.h>

#include "attn.h"

typedef struct ref_dense {
    attn_shape shape;      /* batch and heads as given; q_len/kv_len: the longest sequence */
    attn_options opt;      /* q_lens/kv_lens always set, no offsets, no paging */
    attn_tensor q, k, v;   /* [b][h][i][d] contiguous, dtypes as given */
    attn_tensor mask, bias;
    attn_tensor scores;    /* F32, filled by ref_dense_scores */
    int32_t *q_lens, *kv_lens;
    int32_t *tree;         /* tree_parents re-indexed by the dense rows, or NULL */
    int32_t *topk;         /* topk_indices re-indexed likewise, or NULL */
    int64_t *kpos;         /* k_positions re-indexed by the dense keys, or NULL */
    void *mem[6];
} ref_dense;

/* Dense copies of q, k, v (v may be NULL; q and k NULL for mask_apply). */
void ref_dense_make(ref_dense *d, const attn_shape *shape, const attn_options *opt,
                    const attn_tensor *q, const attn_tensor *k, const attn_tensor *v);
/* attn_mask_apply's input: the caller's score table, copied densely. */
void ref_dense_scores(ref_dense *d, const attn_options *opt, const attn_tensor *scores);
void ref_dense_free(ref_dense *d);

/* Key position p of sequence b in a K/V tensor (paged or not), as an element pointer. */
const void *ref_kv_at(const attn_tensor *t, const attn_options *opt, int64_t b, int64_t kv_head,
                      int64_t p);

#endif /* ATTN_TEST_REF_KV_H */

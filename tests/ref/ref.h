/* SPDX-License-Identifier: MIT */
/*
 * A plain float64 reference of attention, written from the contract
 * (docs/DESIGN.md §3, include/attn.h) and sharing no code with src/: its own
 * F16/BF16 decoding, its own masks, a two-pass softmax in double.
 *
 * Next to each result it computes the error bound an f32 implementation may
 * have against it (tests/tolerance.h explains each bound).
 */
#ifndef ATTN_TEST_REF_H
#define ATTN_TEST_REF_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

/* Exact decoding of the 16-bit formats, and round-to-nearest-even encoding
 * (used to build half-precision inputs). */
double ref_f16_to_double(uint16_t h);
double ref_bf16_to_double(uint16_t h);
uint16_t ref_f32_to_f16(float f);
uint16_t ref_f32_to_bf16(float f);

/* Element (b, h, r, c) of a tensor of F32/F16/BF16, as a double. */
double ref_tensor_get(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c);
/* Pointer to element (b, h, r, c) for any dtype (element size from dtype). */
void *ref_tensor_at(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c);
/* Bytes and values per stride unit (src/dtype_list.h): an element, or a
   block of Q8_0/Q4_0. */
size_t ref_dtype_size(int32_t dtype);
int64_t ref_dtype_block(int32_t dtype);
const char *ref_dtype_name(int32_t dtype);

/* The bf16 mode's constants (attn.h, attn_precision): B = 2b + b^2 bounds
   a product of two factors rounded to bfloat16 (b = 2^-8, its unit
   roundoff), and REF_FLUSH = 2^-126, below which vdpbf16ps and BFDOT
   flush a factor to 0. */
#define REF_BF16_B (2.0 * 0x1p-8 + 0x1p-16)
#define REF_FLUSH 0x1p-126

/* The bound of y = cap tanh(x / cap) in f32 when x carries the error e0
   (tolerance.h, "softcap"), x finite. */
double ref_softcap_error(double x, double e0, double cap);

/* The positions of query i and key j of sequence b (attn.h, "Masks" and
   "Positions per key slot"): q_pos/k_pos or the bottom-right alignment, or
   the key's slot's entry of k_positions (negative: an empty slot). */
void ref_positions(const attn_shape *shape, const attn_options *opt, int64_t b, int64_t i,
                   int64_t j, int64_t *qpos, int64_t *kpos);
/* 1 when query i of (b, h) may see key j (padding, causal, window, mask). */
int ref_visible(const attn_shape *shape, const attn_options *opt, int64_t b, int64_t h,
                int64_t i, int64_t j);

/*
 * Everything one attention problem yields, dense, in float64. Rows are
 * (b, h, i) in that order (row = (b*q_heads + h)*q_len + i).
 * *_err: the error bound of a correct f32 implementation.
 */
typedef struct ref_attn {
    int64_t rows, kv_len, v_dim;
    double *s, *s_err;     /* [rows][kv_len] final scores, -inf where masked */
    double *p, *p_err;     /* [rows][kv_len] weights */
    double *o, *o_err;     /* [rows][v_dim] output (when v was given) */
    double *lse, *lse_err; /* [rows] */
    double *max, *max_err;
    double *ent, *ent_err;
    uint8_t *row_nan; /* [rows] a NaN reaches this row's visible scores */
} ref_attn;

/*
 * Computes scores from q and k (and the output when v != NULL) for the
 * problem. `rescales` is R of tolerance.h (0 for attn_weights). opt may be
 * NULL; the reference reads every field of opt regardless of struct_size.
 */
void ref_attn_compute(ref_attn *r, const attn_shape *shape, const attn_options *opt,
                      const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                      int64_t rescales);
/* The same for a call whose k and v the library reads as kdt and vdt
   (q, k, v here: their exactly decoded values), so that the bounds of the
   options' precision mode (attn.h, attn_precision) for those dtypes apply;
   ref_attn_compute passes k's and v's own dtypes. */
void ref_attn_compute_as(ref_attn *r, const attn_shape *shape, const attn_options *opt,
                         const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                         int64_t rescales, int32_t kdt, int32_t vdt);
/* attn_mask_apply's reference: the pre-scores are the given f32 table. */
void ref_attn_from_scores(ref_attn *r, const attn_shape *shape, const attn_options *opt,
                          const attn_tensor *scores);
void ref_attn_free(ref_attn *r);

/*
 * Softmax of one row of n scores s (with per-score error bounds s_err, may
 * be NULL = exact inputs): p, p_err as above; stats and their bounds (each
 * pointer may be NULL). A row without a finite score is "fully masked":
 * p = 0, lse = max = -inf, entropy 0 (bounds 0). A NaN score makes every
 * result of the row NaN.
 */
typedef struct ref_row_stats {
    double lse, lse_err, max, max_err, ent, ent_err;
} ref_row_stats;
void ref_softmax_row(const double *s, const double *s_err, size_t n, int64_t rescales,
                     double *p, double *p_err, ref_row_stats *st);

/*
 * attn_merge of one row: n partials with log-sum-exp lse[i] (error bound
 * lse_err[i], NULL = exact) and outputs o[i][0..dv) (bounds o_err[i], NULL =
 * exact). out = the exact merge in double, out_err its bound for an f32
 * merge (tolerance.h, "merge"); L, L_err likewise. NaN or +inf in lse gives
 * NaN; all -inf gives 0 and -inf.
 */
void ref_merge_row(size_t n, const double *lse, const double *lse_err,
                   const double *const *o, const double *const *o_err, size_t dv, double *out,
                   double *out_err, double *L, double *L_err);

/* ds = p * (dp - sum p dp), with the bound of each element. */
void ref_softmax_bwd_row(const float *p, const float *dp, size_t n, double *ds, double *ds_err);

#endif /* ATTN_TEST_REF_H */

/* SPDX-License-Identifier: MIT */
/*
 * A float64 reference of attention's gradients, written from the formulas
 * of include/attn.h (attn_backward) on dense double copies of the inputs,
 * sharing no code with src/. Next to each gradient it computes the bound a
 * correct f32 implementation stays within (tolerance.h, "backward").
 *
 * The reference itself is checked against central finite differences of
 * its own float64 forward (tests/ops/test_backward.c), so a wrong formula here
 * cannot hide a wrong formula in the library.
 */
#ifndef ATTN_TEST_REF_BACKWARD_H
#define ATTN_TEST_REF_BACKWARD_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

/* Dense double copies: q [B][Hq][Lq][d], k [B][Hkv][Lk][d], v [B][Hkv][Lk][dv],
 * dout [B][Hq][Lq][dv], bias [B][Hq][Lq][Lk] (NULL without a bias). Masks,
 * lengths, scale and softcap are read from opt (every field, as ref.c). */
typedef struct ref_bwd_in {
    attn_shape shape; /* v_dim resolved */
    const attn_options *opt;
    double *q, *k, *v, *dout, *bias;
    double *sinks; /* [B][Hq] (NULL without sinks): read instead of opt->sinks */
} ref_bwd_in;

void ref_bwd_load(ref_bwd_in *in, const attn_shape *shape, const attn_options *opt,
                  const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                  const attn_tensor *dout);
void ref_bwd_free(ref_bwd_in *in);

/* The float64 forward: o [rows][dv], lse [rows] (-inf for a row without a
 * visible key); either may be NULL. Returns sum(dout * o), the loss whose
 * gradients ref_bwd_grads computes. */
double ref_bwd_forward(const ref_bwd_in *in, double *o, double *lse);

/* Gradients in the layouts of ref_bwd_in, and their bounds. */
typedef struct ref_grads {
    double *dq, *dq_err, *dk, *dk_err, *dv, *dv_err;
    double *ds, *ds_err; /* [B][Hq][Lq][Lk]: d loss / d final score (= dbias) */
    double *dsinks, *dsinks_err; /* [B][Hq], zero without sinks */
} ref_grads;

/*
 * Exact gradients of in, and the error bound of an f32 attn_backward given
 * the f32 forward results it is handed: lse_f32 [rows] and o_f32 [rows][dv]
 * (dense). Their actual distance to the float64 forward is part of the
 * bound; both may be NULL (bounds then left 0).
 */
void ref_bwd_grads(ref_grads *g, const ref_bwd_in *in, const float *lse_f32,
                   const float *o_f32);
void ref_grads_free(ref_grads *g);

/* The backward plan's query blocks (attn_bwd_plan_blocks,
 * src/internal.h): dk's and dv's bound counts the pt_tile calls that add
 * to each element from them (tolerance.h, "backward", step 9). */
typedef struct ref_bwd_blocks {
    int64_t block_rows; /* the most rows one call sums */
    int fused;          /* blocks cut each query head's rows; else the GQA
                           group's rows, position by position */
} ref_bwd_blocks;

/* ref_bwd_grads with the bound of dk and dv for the blocks of `blocks`;
 * ref_bwd_grads is this with NULL: the bound of one chain of every row,
 * which holds for any blocks. */
void ref_bwd_grads_blocks(ref_grads *g, const ref_bwd_in *in, const float *lse_f32,
                          const float *o_f32, const ref_bwd_blocks *blocks);

#endif /* ATTN_TEST_REF_BACKWARD_H */

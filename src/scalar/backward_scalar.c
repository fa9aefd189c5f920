/* SPDX-License-Identifier: MIT */
/* The oracle of pt_tile and score_grad, -ffp-contract=off. */
#include "scalar/tile_scalar_tmpl.h"

/* acc += P^T X: the tile body's P.V loop with P's two strides swapped (the
   bf16 mode's pt_bf16 runs the same loop, dot_scalar.c); each acc element
   sums the rows of x in order from zero and adds that sum to itself once
   (pv_rows' fresh), so that dK and dV, summed over many calls, lose little
   more with each call (attn.h, attn_backward). */
static void attn_pt_tile_f32_scalar(const float *p, ptrdiff_t p_stride, const float *x,
                                    ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                    float *acc, ptrdiff_t acc_stride)
{
    pv_rows(ATTN_KV_F32, 0, 1, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride, NULL);
}

static void attn_score_grad_f32_scalar(const float *p, float *dp, float d, size_t n)
{
    for (size_t j = 0; j < n; j++)
        dp[j] = p[j] * (dp[j] - d);
}

ATTN_KERNEL_FILE(backward, scalar, scalar)

/* SPDX-License-Identifier: MIT */
/*
 * Scalar kernels of the attention backward (the oracle of pt_tile and
 * score_grad). Built with the other scalar kernels, -ffp-contract=off.
 */
#include "dsp.h"

static void attn_pt_tile_f32_scalar(const float *p, ptrdiff_t p_stride, const float *x,
                                    ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                    float *acc, ptrdiff_t acc_stride)
{
    for (size_t c = 0; c < nk; c++) {
        float *ac = acc + (ptrdiff_t)c * acc_stride;
        for (size_t r = 0; r < nq; r++) {
            const float w = p[(ptrdiff_t)r * p_stride + (ptrdiff_t)c];
            const float *xr = x + (ptrdiff_t)r * x_stride;
            for (size_t t = 0; t < dim; t++)
                ac[t] += w * xr[t];
        }
    }
}

static void attn_score_grad_f32_scalar(const float *p, float *dp, float d, size_t n)
{
    for (size_t j = 0; j < n; j++)
        dp[j] = p[j] * (dp[j] - d);
}

ATTN_KERNEL_FILE(backward, scalar, scalar)

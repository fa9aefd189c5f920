/* SPDX-License-Identifier: MIT */
/*
 * NEON kernels of the attention backward: pt_tile (acc += P^T X) and
 * score_grad (dS = P * (dP - D)).
 */
#include "arm/neon.h"

/* CN (1..4) accumulator rows c0.. by 8 columns t.. (two vectors, the tail
   read and written lane by lane): each element sums the rows of x in order
   from zero and adds that sum to acc once, the scalar oracle's order
   (src/scalar/backward_scalar.c), so that dK and dV lose little more with
   each call (attn.h, attn_backward). */
static ALWAYS_INLINE void pt_block(const float *p, ptrdiff_t p_stride, const float *x,
                                   ptrdiff_t x_stride, size_t nq, size_t c0, int cn, size_t t,
                                   size_t dim, float *acc, ptrdiff_t acc_stride)
{
    const size_t left = dim - t;
    const size_t n0 = left < 4 ? left : 4, n1 = left <= 4 ? 0 : left - 4 < 4 ? left - 4 : 4;
    float32x4_t a0[4], a1[4];
    for (int c = 0; c < cn; c++)
        a0[c] = a1[c] = vdupq_n_f32(0.0f);
    for (size_t r = 0; r < nq; r++) {
        const float *xr = x + (ptrdiff_t)r * x_stride + (ptrdiff_t)t;
        const float *pr = p + (ptrdiff_t)r * p_stride + (ptrdiff_t)c0;
        const float32x4_t x0 = n0 == 4 ? vld1q_f32(xr) : load_part(xr, n0, 0.0f);
        const float32x4_t x1 =
            n1 == 4 ? vld1q_f32(xr + 4) : n1 ? load_part(xr + 4, n1, 0.0f) : vdupq_n_f32(0.0f);
        for (int c = 0; c < cn; c++) {
            a0[c] = vfmaq_n_f32(a0[c], x0, pr[c]);
            a1[c] = vfmaq_n_f32(a1[c], x1, pr[c]);
        }
    }
    for (int c = 0; c < cn; c++) {
        float *ar = acc + (ptrdiff_t)(c0 + (size_t)c) * acc_stride + (ptrdiff_t)t;
        if (n0 == 4)
            vst1q_f32(ar, vaddq_f32(vld1q_f32(ar), a0[c]));
        else
            store_part(ar, vaddq_f32(load_part(ar, n0, 0.0f), a0[c]), n0);
        if (n1 == 4)
            vst1q_f32(ar + 4, vaddq_f32(vld1q_f32(ar + 4), a1[c]));
        else if (n1)
            store_part(ar + 4, vaddq_f32(load_part(ar + 4, n1, 0.0f), a1[c]), n1);
    }
}

static void attn_pt_tile_f32_neon(const float *p, ptrdiff_t p_stride, const float *x,
                                  ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                  float *acc, ptrdiff_t acc_stride)
{
    size_t c0 = 0;
    for (; c0 + 4 <= nk; c0 += 4)
        for (size_t t = 0; t < dim; t += 8)
            pt_block(p, p_stride, x, x_stride, nq, c0, 4, t, dim, acc, acc_stride);
    for (; c0 < nk; c0++)
        for (size_t t = 0; t < dim; t += 8)
            pt_block(p, p_stride, x, x_stride, nq, c0, 1, t, dim, acc, acc_stride);
}

/* Subtract, then multiply: equal to the scalar bit for bit. */
static void attn_score_grad_f32_neon(const float *p, float *dp, float d, size_t n)
{
    const float32x4_t dv = vdupq_n_f32(d);
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        vst1q_f32(dp + j, vmulq_f32(vld1q_f32(p + j), vsubq_f32(vld1q_f32(dp + j), dv)));
    for (; j < n; j++)
        dp[j] = p[j] * (dp[j] - d);
}

ATTN_KERNEL_FILE(backward, neon, neon)

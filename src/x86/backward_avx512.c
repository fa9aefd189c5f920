/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 kernels of the attention backward: pt_tile (acc += P^T X) and
 * score_grad (dS = P * (dP - D)). Built twice like every AVX-512 file
 * (simd_avx512.h): natively, and against SIMDe for the emulated test row.
 */
#include "x86/avx512.h"

/* CN (1..4) accumulator rows c0.. by 32 columns t.. (two masked vectors). */
ATTN_AVX512_INLINE void pt_block(const float *p, ptrdiff_t p_stride, const float *x,
                                 ptrdiff_t x_stride, size_t nq, size_t c0, int cn, size_t t,
                                 size_t dim, float *acc, ptrdiff_t acc_stride)
{
    const size_t left = dim - t;
    const __mmask16 m0 = attn_mask16(left < 16 ? left : 16);
    const __mmask16 m1 = attn_mask16(left <= 16 ? 0 : left - 16 < 16 ? left - 16 : 16);
    __m512 a0[4], a1[4];
    for (int c = 0; c < cn; c++) {
        float *ar = acc + (ptrdiff_t)(c0 + (size_t)c) * acc_stride + (ptrdiff_t)t;
        a0[c] = _mm512_maskz_loadu_ps(m0, ar);
        a1[c] = _mm512_maskz_loadu_ps(m1, ar + 16);
    }
    for (size_t r = 0; r < nq; r++) {
        const float *xr = x + (ptrdiff_t)r * x_stride + (ptrdiff_t)t;
        const float *pr = p + (ptrdiff_t)r * p_stride + (ptrdiff_t)c0;
        const __m512 x0 = _mm512_maskz_loadu_ps(m0, xr);
        const __m512 x1 = _mm512_maskz_loadu_ps(m1, xr + 16);
        for (int c = 0; c < cn; c++) {
            const __m512 w = _mm512_set1_ps(pr[c]);
            a0[c] = _mm512_fmadd_ps(w, x0, a0[c]);
            a1[c] = _mm512_fmadd_ps(w, x1, a1[c]);
        }
    }
    for (int c = 0; c < cn; c++) {
        float *ar = acc + (ptrdiff_t)(c0 + (size_t)c) * acc_stride + (ptrdiff_t)t;
        _mm512_mask_storeu_ps(ar, m0, a0[c]);
        _mm512_mask_storeu_ps(ar + 16, m1, a1[c]);
    }
}

static void attn_pt_tile_f32_avx512(const float *p, ptrdiff_t p_stride, const float *x,
                                    ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                    float *acc, ptrdiff_t acc_stride)
{
    size_t c0 = 0;
    for (; c0 + 4 <= nk; c0 += 4)
        for (size_t t = 0; t < dim; t += 32)
            pt_block(p, p_stride, x, x_stride, nq, c0, 4, t, dim, acc, acc_stride);
    for (; c0 < nk; c0++)
        for (size_t t = 0; t < dim; t += 32)
            pt_block(p, p_stride, x, x_stride, nq, c0, 1, t, dim, acc, acc_stride);
}

/* Subtract, then multiply: equal to the scalar bit for bit. */
static void attn_score_grad_f32_avx512(const float *p, float *dp, float d, size_t n)
{
    const __m512 dv = _mm512_set1_ps(d);
    for (size_t j = 0; j < n; j += 16) {
        const __mmask16 m = attn_mask16(n - j < 16 ? n - j : 16);
        const __m512 pv = _mm512_maskz_loadu_ps(m, p + j);
        const __m512 g = _mm512_maskz_loadu_ps(m, dp + j);
        _mm512_mask_storeu_ps(dp + j, m, _mm512_mul_ps(pv, _mm512_sub_ps(g, dv)));
    }
}

ATTN_KERNEL_FILE(backward, avx512, ATTN_AVX512_EXT)

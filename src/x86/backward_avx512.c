/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 kernels of the attention backward: pt_tile (acc += P^T X) and
 * score_grad (dS = P * (dP - D)). Built twice like every AVX-512 file
 * (simd_avx512.h): natively, and against SIMDe for the emulated test row.
 */
#include "x86/tile_avx512_tmpl.h"

/* acc += P^T X is P.V with the weights of a key (here a row of x) p_stride
   apart and those of an output row (here a key) adjacent: the tile family's
   P.V kernel with the two strides swapped, so its register blocking (4 x 4
   vectors for f32) and every later tuning serve both. Each acc element
   still sums the rows of x in order, from zero, and adds that sum to acc
   once (fresh), as the scalar kernel does. */
static void attn_pt_tile_f32_avx512(const float *p, ptrdiff_t p_stride, const float *x,
                                    ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                    float *acc, ptrdiff_t acc_stride)
{
    pv_tile_at(ATTN_KV_F32, 1, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride, NULL);
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

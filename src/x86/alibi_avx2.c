/* SPDX-License-Identifier: MIT */
/*
 * AVX2 alibi kernel: the distances count down by 8 per vector in int32
 * lanes (exact: |pos - j| < 2^31), become f32 by vcvtdq2ps (the same
 * rounding as the scalar (float) conversion) and are subtracted with one
 * fused multiply-add (the scalar oracle rounds the product first; the
 * difference is covered by tests/tolerance.h, "alibi").
 */
#include <immintrin.h>

#include "dsp.h"

static void attn_alibi_f32_avx2(float *x, size_t n, float slope, int64_t pos)
{
    const __m256 vs = _mm256_set1_ps(slope);
    const __m256i step = _mm256_set1_epi32(8);
    /* lanes past n may wrap around; they are neither loaded nor stored */
    __m256i d = _mm256_sub_epi32(_mm256_set1_epi32((int32_t)pos),
                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 dist = _mm256_cvtepi32_ps(_mm256_abs_epi32(d));
        _mm256_storeu_ps(x + j, _mm256_fnmadd_ps(vs, dist, _mm256_loadu_ps(x + j)));
        d = _mm256_sub_epi32(d, step);
    }
    if (j < n) {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(n - j)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 dist = _mm256_cvtepi32_ps(_mm256_abs_epi32(d));
        _mm256_maskstore_ps(x + j, m, _mm256_fnmadd_ps(vs, dist, _mm256_maskload_ps(x + j, m)));
    }
}

ATTN_KERNEL_FILE(alibi, avx2, avx2)

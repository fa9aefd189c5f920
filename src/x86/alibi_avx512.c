/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 alibi kernel (also built against SIMDe for the avx512-emu test
 * row): 16 int32 distances per vector, converted and subtracted with one
 * fused multiply-add, masked tail (see alibi_avx2.c for the numerics).
 */
#include "x86/avx512.h"
#include "dsp.h"

static void attn_alibi_f32_avx512(float *x, size_t n, float slope, int64_t pos)
{
    const __m512 vs = _mm512_set1_ps(slope);
    const __m512i step = _mm512_set1_epi32(16);
    /* lanes past n may wrap around; the mask keeps them out of memory */
    __m512i d = _mm512_sub_epi32(_mm512_set1_epi32((int32_t)pos),
                                 _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3,
                                                  2, 1, 0));
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 dist = _mm512_cvtepi32_ps(_mm512_abs_epi32(d));
        _mm512_storeu_ps(x + j, _mm512_fnmadd_ps(vs, dist, _mm512_loadu_ps(x + j)));
        d = _mm512_sub_epi32(d, step);
    }
    if (j < n) {
        const __mmask16 m = attn_mask16(n - j);
        const __m512 dist = _mm512_cvtepi32_ps(_mm512_abs_epi32(d));
        _mm512_mask_storeu_ps(x + j, m,
                              _mm512_fnmadd_ps(vs, dist, _mm512_maskz_loadu_ps(m, x + j)));
    }
}

ATTN_KERNEL_FILE(alibi, avx512, ATTN_AVX512_EXT)

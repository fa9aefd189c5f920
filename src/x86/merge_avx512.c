/* SPDX-License-Identifier: MIT */
/*
 * The AVX-512 merge kernel: y += sum_p w[p] x[p], one FMA per part and
 * element. Four vectors of y at a time, each its own chain over the parts, so
 * the FMAs overlap; every part is read once, y loaded and stored once.
 */
#include "x86/avx512.h"

static void attn_wsum_f32_avx512(float *y, const float *const *x, const float *w, size_t parts,
                                 size_t n)
{
    size_t j = 0;
    for (; j + 64 <= n; j += 64) {
        __m512 a0 = _mm512_loadu_ps(y + j), a1 = _mm512_loadu_ps(y + j + 16);
        __m512 a2 = _mm512_loadu_ps(y + j + 32), a3 = _mm512_loadu_ps(y + j + 48);
        for (size_t p = 0; p < parts; p++) {
            const __m512 vw = _mm512_set1_ps(w[p]);
            const float *xp = x[p] + j;
            a0 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(xp), a0);
            a1 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(xp + 16), a1);
            a2 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(xp + 32), a2);
            a3 = _mm512_fmadd_ps(vw, _mm512_loadu_ps(xp + 48), a3);
        }
        _mm512_storeu_ps(y + j, a0);
        _mm512_storeu_ps(y + j + 16, a1);
        _mm512_storeu_ps(y + j + 32, a2);
        _mm512_storeu_ps(y + j + 48, a3);
    }
    for (; j < n; j += 16) {
        const __mmask16 m = attn_mask16(n - j < 16 ? n - j : 16);
        __m512 a = _mm512_maskz_loadu_ps(m, y + j);
        for (size_t p = 0; p < parts; p++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[p]), _mm512_maskz_loadu_ps(m, x[p] + j), a);
        _mm512_mask_storeu_ps(y + j, m, a);
    }
}

ATTN_KERNEL_FILE(merge, avx512, ATTN_AVX512_EXT)

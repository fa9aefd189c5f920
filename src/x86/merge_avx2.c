/* SPDX-License-Identifier: MIT */
/*
 * The AVX2 merge kernel: y += sum_p w[p] x[p], one FMA per part and element.
 * Four vectors of y at a time, each its own chain over the parts, so the
 * FMAs overlap; every part is read once and y is loaded and stored once.
 */
#include <immintrin.h>

#include "dsp.h"
#include "x86/avx2.h"

static void attn_wsum_f32_avx2(float *y, const float *const *x, const float *w, size_t parts,
                               size_t n)
{
    size_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m256 a0 = _mm256_loadu_ps(y + j), a1 = _mm256_loadu_ps(y + j + 8);
        __m256 a2 = _mm256_loadu_ps(y + j + 16), a3 = _mm256_loadu_ps(y + j + 24);
        for (size_t p = 0; p < parts; p++) {
            const __m256 vw = _mm256_set1_ps(w[p]);
            const float *xp = x[p] + j;
            a0 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(xp), a0);
            a1 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(xp + 8), a1);
            a2 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(xp + 16), a2);
            a3 = _mm256_fmadd_ps(vw, _mm256_loadu_ps(xp + 24), a3);
        }
        _mm256_storeu_ps(y + j, a0);
        _mm256_storeu_ps(y + j + 8, a1);
        _mm256_storeu_ps(y + j + 16, a2);
        _mm256_storeu_ps(y + j + 24, a3);
    }
    for (; j < n; j += 8) {
        const __m256i m = first_lanes(n - j < 8 ? n - j : 8);
        __m256 a = _mm256_maskload_ps(y + j, m);
        for (size_t p = 0; p < parts; p++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(w[p]), _mm256_maskload_ps(x[p] + j, m), a);
        _mm256_maskstore_ps(y + j, m, a);
    }
}

ATTN_KERNEL_FILE(merge, avx2, avx2)

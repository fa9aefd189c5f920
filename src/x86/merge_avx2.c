/* SPDX-License-Identifier: MIT */
/* The AVX2 merge kernel: src/merge_tmpl.h on 8-lane vectors, the tail with
   masked loads and stores. */
#include <immintrin.h>

#include "dsp.h"
#include "x86/avx2.h"

typedef __m256 mg_vf;
#define MG_KERNEL attn_wsum_f32_avx2
#define MG_LANES 8
#define mg_load(p) _mm256_loadu_ps(p)
#define mg_store(p, a) _mm256_storeu_ps(p, a)
#define mg_set1(x) _mm256_set1_ps(x)
#define mg_fma(a, b, c) _mm256_fmadd_ps(a, b, c)

static inline void mg_tail(float *y, const float *const *x, const float *w, size_t parts,
                           size_t n, size_t j)
{
    for (; j < n; j += 8) {
        const __m256i m = first_lanes(n - j < 8 ? n - j : 8);
        __m256 a = _mm256_maskload_ps(y + j, m);
        for (size_t p = 0; p < parts; p++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(w[p]), _mm256_maskload_ps(x[p] + j, m), a);
        _mm256_maskstore_ps(y + j, m, a);
    }
}

#include "merge_tmpl.h"

ATTN_KERNEL_FILE(merge, avx2, avx2)

/* SPDX-License-Identifier: MIT */
/* The AVX-512 merge kernel: src/merge_tmpl.h on 16-lane vectors, the tail
   with masked loads and stores. */
#include "x86/avx512.h"

typedef __m512 mg_vf;
#define MG_KERNEL attn_wsum_f32_avx512
#define MG_LANES 16
#define mg_load(p) _mm512_loadu_ps(p)
#define mg_store(p, a) _mm512_storeu_ps(p, a)
#define mg_set1(x) _mm512_set1_ps(x)
#define mg_fma(a, b, c) _mm512_fmadd_ps(a, b, c)

ATTN_AVX512_INLINE void mg_tail(float *y, const float *const *x, const float *w, size_t parts,
                                size_t n, size_t j)
{
    for (; j < n; j += 16) {
        const __mmask16 m = attn_mask16(n - j < 16 ? n - j : 16);
        __m512 a = _mm512_maskz_loadu_ps(m, y + j);
        for (size_t p = 0; p < parts; p++)
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[p]), _mm512_maskz_loadu_ps(m, x[p] + j), a);
        _mm512_mask_storeu_ps(y + j, m, a);
    }
}

#include "merge_tmpl.h"

ATTN_KERNEL_FILE(merge, avx512, ATTN_AVX512_EXT)

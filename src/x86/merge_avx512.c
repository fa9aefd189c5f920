/* The AVX-512 merge kernel: y += a * x, one FMA per element, masked tail. */
#include "simd_avx512.h"

static void attn_axpy_f32_avx512(float *y, const float *x, size_t n, float a)
{
    const __m512 va = _mm512_set1_ps(a);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
        _mm512_storeu_ps(y + i + 16, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i + 16),
                                                     _mm512_loadu_ps(y + i + 16)));
    }
    for (; i < n; i += 16) {
        const __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i),
                                                        _mm512_maskz_loadu_ps(m, y + i)));
    }
}

void attn_dsp_init_merge_avx512(attn_dsp *t)
{
    t->axpy = attn_axpy_f32_avx512;
}

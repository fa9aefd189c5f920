/* The AVX2 merge kernel: y += a * x, one FMA per element, masked tail. */
#include <immintrin.h>

#include "dsp.h"
#include "x86/x86.h"

static const int32_t tail_mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                            0,  0,  0,  0,  0,  0,  0,  0};

static void attn_axpy_f32_avx2(float *y, const float *x, size_t n, float a)
{
    const __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(y + i + 8, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8),
                                                    _mm256_loadu_ps(y + i + 8)));
    }
    for (; i < n; i += 8) {
        const size_t left = n - i < 8 ? n - i : 8;
        const __m256i m = _mm256_loadu_si256((const __m256i *)(tail_mask_table + 8 - left));
        _mm256_maskstore_ps(y + i, m, _mm256_fmadd_ps(va, _mm256_maskload_ps(x + i, m),
                                                      _mm256_maskload_ps(y + i, m)));
    }
}

void attn_dsp_init_merge_avx2(attn_dsp *t)
{
    t->axpy = attn_axpy_f32_avx2;
}

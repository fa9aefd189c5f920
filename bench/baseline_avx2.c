/* SPDX-License-Identifier: MIT */
/* The baselines of baseline.h, with AVX2+FMA flags and SLEEF's AVX2 exp. */
#include <immintrin.h>
#include <math.h>
#include <sleef.h>

#include "baseline.h"

static float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void bench_softmax_sleef_avx2(float *x, size_t rows, size_t cols, size_t row_stride)
{
    for (size_t r = 0; r < rows; r++) {
        float *xr = x + r * row_stride;
        size_t n8 = cols / 8 * 8, j;
        __m256 vm = _mm256_set1_ps(-__builtin_inff());
        for (j = 0; j < n8; j += 8)
            vm = _mm256_max_ps(vm, _mm256_loadu_ps(xr + j));
        float m = hmax8(vm);
        for (; j < cols; j++)
            m = xr[j] > m ? xr[j] : m;
        __m256 vmax = _mm256_set1_ps(m), vs = _mm256_setzero_ps();
        for (j = 0; j < n8; j += 8) {
            __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vmax));
            _mm256_storeu_ps(xr + j, e);
            vs = _mm256_add_ps(vs, e);
        }
        float s = hsum8(vs);
        for (; j < cols; j++) {
            xr[j] = expf(xr[j] - m);
            s += xr[j];
        }
        __m256 inv = _mm256_set1_ps(1.0f / s);
        for (j = 0; j < n8; j += 8)
            _mm256_storeu_ps(xr + j, _mm256_mul_ps(_mm256_loadu_ps(xr + j), inv));
        for (; j < cols; j++)
            xr[j] *= 1.0f / s;
    }
}

float bench_exp_sum_sleef_avx2(float *x, size_t n, float max)
{
    __m256 vmax = _mm256_set1_ps(max), vs = _mm256_setzero_ps();
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmax));
        _mm256_storeu_ps(x + j, e);
        vs = _mm256_add_ps(vs, e);
    }
    float s = hsum8(vs);
    for (; j < n; j++) {
        x[j] = expf(x[j] - max);
        s += x[j];
    }
    return s;
}

float bench_read_sum_avx2(const float *x, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
    }
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        s += x[i];
    return s;
}

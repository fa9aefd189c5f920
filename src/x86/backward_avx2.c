/* SPDX-License-Identifier: MIT */
/*
 * AVX2+FMA kernels of the attention backward: pt_tile (acc += P^T X) and
 * score_grad (dS = P * (dP - D)).
 */
#include "x86/avx2.h"

/* The first n of 8 lanes, n clamped to 0..8. */
static ALWAYS_INLINE __m256i lanes(int64_t n)
{
    return first_lanes((size_t)(n < 0 ? 0 : n > 8 ? 8 : n));
}

/*
 * CN (1..4) accumulator rows c0.. by 16 columns t.. (two vectors each, the
 * tail masked): the rows of p stream through, one broadcast per (r, c) and
 * two FMAs, so the CN x 2 accumulators stay in registers over all nq rows.
 */
static ALWAYS_INLINE void pt_block(const float *p, ptrdiff_t p_stride, const float *x,
                                   ptrdiff_t x_stride, size_t nq, size_t c0, int cn, size_t t,
                                   size_t dim, float *acc, ptrdiff_t acc_stride)
{
    const __m256i m0 = lanes((int64_t)dim - (int64_t)t);
    const __m256i m1 = lanes((int64_t)dim - (int64_t)t - 8);
    __m256 a0[4], a1[4];
    for (int c = 0; c < cn; c++) {
        float *ar = acc + (ptrdiff_t)(c0 + (size_t)c) * acc_stride + (ptrdiff_t)t;
        a0[c] = _mm256_maskload_ps(ar, m0);
        a1[c] = _mm256_maskload_ps(ar + 8, m1);
    }
    for (size_t r = 0; r < nq; r++) {
        const float *xr = x + (ptrdiff_t)r * x_stride + (ptrdiff_t)t;
        const float *pr = p + (ptrdiff_t)r * p_stride + (ptrdiff_t)c0;
        const __m256 x0 = _mm256_maskload_ps(xr, m0);
        const __m256 x1 = _mm256_maskload_ps(xr + 8, m1);
        for (int c = 0; c < cn; c++) {
            const __m256 w = _mm256_broadcast_ss(pr + c);
            a0[c] = _mm256_fmadd_ps(w, x0, a0[c]);
            a1[c] = _mm256_fmadd_ps(w, x1, a1[c]);
        }
    }
    for (int c = 0; c < cn; c++) {
        float *ar = acc + (ptrdiff_t)(c0 + (size_t)c) * acc_stride + (ptrdiff_t)t;
        _mm256_maskstore_ps(ar, m0, a0[c]);
        _mm256_maskstore_ps(ar + 8, m1, a1[c]);
    }
}

static void attn_pt_tile_f32_avx2(const float *p, ptrdiff_t p_stride, const float *x,
                                  ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                  float *acc, ptrdiff_t acc_stride)
{
    size_t c0 = 0;
    for (; c0 + 4 <= nk; c0 += 4)
        for (size_t t = 0; t < dim; t += 16)
            pt_block(p, p_stride, x, x_stride, nq, c0, 4, t, dim, acc, acc_stride);
    for (; c0 < nk; c0++)
        for (size_t t = 0; t < dim; t += 16)
            pt_block(p, p_stride, x, x_stride, nq, c0, 1, t, dim, acc, acc_stride);
}

/* Subtract, then multiply: two IEEE operations, so equal to the scalar bit for bit. */
static void attn_score_grad_f32_avx2(const float *p, float *dp, float d, size_t n)
{
    const __m256 dv = _mm256_set1_ps(d);
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dp + j, _mm256_mul_ps(_mm256_loadu_ps(p + j),
                                               _mm256_sub_ps(_mm256_loadu_ps(dp + j), dv)));
    if (j < n) {
        const __m256i m = lanes((int64_t)(n - j));
        const __m256 pv = _mm256_maskload_ps(p + j, m);
        const __m256 g = _mm256_maskload_ps(dp + j, m);
        _mm256_maskstore_ps(dp + j, m, _mm256_mul_ps(pv, _mm256_sub_ps(g, dv)));
    }
}

ATTN_KERNEL_FILE(backward, avx2, avx2)

/* SPDX-License-Identifier: MIT */
/*
 * AVX2+FMA kernels of the attention backward: pt_tile (acc += P^T X) and
 * score_grad (dS = P * (dP - D)).
 */
#include "x86/tile_avx2_tmpl.h"

/* The first n of 8 lanes, n clamped to 0..8. */
static ALWAYS_INLINE __m256i lanes(int64_t n)
{
    return first_lanes((size_t)(n < 0 ? 0 : n > 8 ? 8 : n));
}

/* acc += P^T X is P.V with the weights of a key (here a row of x) p_stride
   apart and those of an output row (here a key) adjacent: the tile family's
   P.V kernel with the two strides swapped, so its register blocking (4 x 3
   vectors) and every later tuning serve both. Each acc element still sums
   the rows of x in order, from zero in one pass, and adds that sum to acc
   once (fresh), as the scalar kernel does. */
static void attn_pt_tile_f32_avx2(const float *p, ptrdiff_t p_stride, const float *x,
                                  ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                  float *acc, ptrdiff_t acc_stride)
{
    pv_tile_at(ATTN_KV_F32, 1, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride, NULL);
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

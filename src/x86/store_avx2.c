/* SPDX-License-Identifier: MIT */
/*
 * AVX2 + F16C store kernels: the scalar oracle's bytes (checked bitwise by
 * tests/kernels/checkasm.c). The AVX-512 table keeps these: a row of new
 * tokens is small, and 256-bit loops already run at memory speed. Built
 * with -ffp-contract=off: Q4_0's x * id + 8.5 must stay two roundings, as
 * in ggml's reference and the oracle.
 */
#include <immintrin.h>
#include <string.h>

#include "dsp.h"
#include "half.h"
#include "quant.h"

static int attn_from_f32_f32_avx2(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    memcpy(dst, src, n * sizeof(float));
    return 1;
}

/* vcvtps2ph with round-to-nearest-even is attn_f32_to_f16: overflow to
   +-inf, subnormal halves, NaN quiet with its sign and top payload bits. */
static int attn_from_f32_f16_avx2(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    uint16_t *y = dst;
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + j),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < n; j++)
        y[j] = attn_f32_to_f16(src[j]);
    return 1;
}

/* attn_f32_to_bf16 on integers (vcvtneps2bf16 would flush subnormal inputs). */
static int attn_from_f32_bf16_avx2(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    uint16_t *y = dst;
    const __m256i one = _mm256_set1_epi32(1), round = _mm256_set1_epi32(0x7fff),
                  abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000),
                  quiet = _mm256_set1_epi32(0x40);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(src + j));
        const __m256i hi = _mm256_srli_epi32(u, 16);
        const __m256i rne =
            _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), _mm256_and_si256(hi, one)), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        const __m256i r = _mm256_blendv_epi8(rne, _mm256_or_si256(hi, quiet), nan);
        _mm_storeu_si128((__m128i *)(void *)(y + j),
                         _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
    }
    for (; j < n; j++)
        y[j] = attn_f32_to_bf16(src[j]);
    return 1;
}

/* max |x| on the bits: they order as the values, a NaN's above an
   infinity's, so the result is finite exactly when the block is. */
static float block_amax(const float *x)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
#define ABS_BITS(i) _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(x + 8 * (i))), abs_mask)
    const __m256i m = _mm256_max_epi32(_mm256_max_epi32(ABS_BITS(0), ABS_BITS(1)),
                                       _mm256_max_epi32(ABS_BITS(2), ABS_BITS(3)));
#undef ABS_BITS
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtss_f32(_mm_castsi128_ps(h));
}

/* 32 int32 lanes (in order across the four vectors) as 32 int8, saturated */
static __m256i pack_i8(const __m256i q[4])
{
    const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* one vector division for eight blocks' d, not a dependent scalar chain */
#define GROUP 8

/* The block formats' shared loop: IEEE divisions, the oracle's bits.
   Returns 0 (dst unspecified) on a block the format cannot store. */
static int encode_blocks(const float *src, unsigned char *out, size_t n, int q4)
{
    const size_t nb = n / ATTN_QBLOCK, bytes = q4 ? ATTN_Q4_0_BYTES : ATTN_Q8_0_BYTES;
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f),
                 half = _mm256_set1_ps(0.5f), bias = _mm256_set1_ps(8.5f);
    const __m256i fifteen = _mm256_set1_epi32(15);
    for (size_t g = 0; g < nb; g += GROUP) {
        const size_t cnt = nb - g < GROUP ? nb - g : GROUP;
        const float *x0 = src + g * ATTN_QBLOCK;
        unsigned char *o0 = out + g * bytes;
        float num[GROUP] = {0}, ids[GROUP];
        for (size_t k = 0; k < cnt; k++) {
            const float *x = x0 + k * ATTN_QBLOCK;
            const float amax = block_amax(x);
            if (!(amax <= 3.4028235e38f))
                return 0; /* inf or NaN */
            num[k] = amax;
            if (q4 && amax != 0.0f) { /* m = 0 (the oracle's start) when all are 0 */
                const __m256 va = _mm256_set1_ps(amax);
                uint32_t mask = 0;
                for (int i = 0; i < 4; i++)
                    mask |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(
                                _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), va, _CMP_EQ_OQ))
                            << (8 * i);
                num[k] = x[__builtin_ctz(mask)];
            }
        }
        const __m256 d = _mm256_div_ps(_mm256_loadu_ps(num), _mm256_set1_ps(q4 ? -8.0f : 127.0f));
        /* every d of the group below 65520 in magnitude (unused lanes: 0) */
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, d), _mm256_set1_ps(65520.0f),
                                             _CMP_LT_OQ)) != 0xff)
            return 0;
        _mm256_storeu_ps(ids, _mm256_and_ps(_mm256_div_ps(one, d),
                                            _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_OQ)));
        uint16_t dh[GROUP];
        _mm_storeu_si128((__m128i *)(void *)dh, _mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
        for (size_t k = 0; k < cnt; k++) {
            const float *x = x0 + k * ATTN_QBLOCK;
            unsigned char *o = o0 + k * bytes;
            memcpy(o, &dh[k], sizeof dh[k]);
            const __m256 vid = _mm256_set1_ps(ids[k]);
            __m256i q[4];
            if (!q4) {
                /* roundf(x * id): the truncation, one step further where the
                   dropped part is at least 1/2 */
                for (int i = 0; i < 4; i++) {
                    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vid);
                    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
                    const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)),
                                                    half, _CMP_GE_OQ);
                    const __m256 step = _mm256_and_ps(up, _mm256_or_ps(one, _mm256_and_ps(sign, v)));
                    q[i] = _mm256_cvtps_epi32(_mm256_add_ps(t, step)); /* integral: exact */
                }
                _mm256_storeu_si256((__m256i *)(void *)(o + 2), pack_i8(q));
                continue;
            }
            /* min(15, trunc(x * id + 8.5)); byte j: value j in the low
               nibble, value j + 16 in the high one */
            for (int i = 0; i < 4; i++)
                q[i] = _mm256_min_epi32(
                    _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vid),
                                                      bias)),
                    fifteen);
            const __m256i lo = _mm256_or_si256(q[0], _mm256_slli_epi32(q[2], 4));
            const __m256i hi = _mm256_or_si256(q[1], _mm256_slli_epi32(q[3], 4));
            const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xd8);
            _mm_storeu_si128((__m128i *)(void *)(o + 2),
                             _mm_packus_epi16(_mm256_castsi256_si128(w),
                                              _mm256_extracti128_si256(w, 1)));
        }
    }
    return 1;
}

static int attn_from_f32_q8_0_avx2(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    return encode_blocks(src, dst, n, 0);
}

static int attn_from_f32_q4_0_avx2(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    return encode_blocks(src, dst, n, 1);
}

/* FP8: the oracle's encoders (no faster path measured yet). */
static int attn_from_f32_fp8_avx2(const float *src, void *dst, size_t n, float scale)
{
    attn_quantize_row(ATTN_DTYPE_FP8_E4M3, src, (int64_t)n, dst, scale);
    return 1;
}

static int attn_from_f32_e5m2_avx2(const float *src, void *dst, size_t n, float scale)
{
    attn_quantize_row(ATTN_DTYPE_FP8_E5M2, src, (int64_t)n, dst, scale);
    return 1;
}

ATTN_KERNEL_FILE(store, avx2, avx2)

/* SPDX-License-Identifier: MIT */
/*
 * The store kernels of attn_cache_append, one per K/V dtype: an f32 row
 * into the cache's dtype with src/half.h's and src/quant.h's scalar
 * encoders, the same ones attn_quantize and the rounded outputs use. Every
 * table starts from these (src/kernel_list.h): an ISA's store file, where
 * it has one, must give the same bytes (tests/kernels/checkasm.c checks it bitwise).
 */
#include <string.h>

#include "half.h"
#include "dsp.h"
#include "quant.h"

static int attn_from_f32_f32_scalar(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    memcpy(dst, src, n * sizeof(float));
    return 1;
}

static int attn_from_f32_f16_scalar(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    uint16_t *y = dst;
    for (size_t j = 0; j < n; j++)
        y[j] = attn_f32_to_f16(src[j]);
    return 1;
}

static int attn_from_f32_bf16_scalar(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    uint16_t *y = dst;
    for (size_t j = 0; j < n; j++)
        y[j] = attn_f32_to_bf16(src[j]);
    return 1;
}

static int attn_from_f32_q8_0_scalar(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    if (!attn_quantize_row_ok(ATTN_DTYPE_Q8_0, src, (int64_t)n))
        return 0;
    attn_quantize_row(ATTN_DTYPE_Q8_0, src, (int64_t)n, dst, 0.0f);
    return 1;
}

static int attn_from_f32_q4_0_scalar(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    if (!attn_quantize_row_ok(ATTN_DTYPE_Q4_0, src, (int64_t)n))
        return 0;
    attn_quantize_row(ATTN_DTYPE_Q4_0, src, (int64_t)n, dst, 0.0f);
    return 1;
}

static int attn_from_f32_fp8_scalar(const float *src, void *dst, size_t n, float scale)
{
    attn_quantize_row(ATTN_DTYPE_FP8_E4M3, src, (int64_t)n, dst, scale);
    return 1;
}

static int attn_from_f32_e5m2_scalar(const float *src, void *dst, size_t n, float scale)
{
    attn_quantize_row(ATTN_DTYPE_FP8_E5M2, src, (int64_t)n, dst, scale);
    return 1;
}

ATTN_KERNEL_FILE(store, scalar, scalar)

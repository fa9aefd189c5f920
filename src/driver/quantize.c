/* SPDX-License-Identifier: MIT */
/*
 * attn_quantize: f32 rows to the quantized K/V formats (attn.h), with the
 * scalar encoders of src/quant.h. Every row is checked before any is
 * written; the plan is trivial: one task on the calling thread (the call
 * takes no options, so no pool) encodes the rows in order.
 */
#include <math.h>
#include <stdint.h>

#include "driver.h"
#include "internal.h"
#include "quant.h"

typedef struct quantize_ctx {
    int32_t dtype;
    const float *src;
    int64_t rows, cols, src_stride;
    unsigned char *dst;
    int64_t dst_stride;
    float scale;
} quantize_ctx;

/* Bytes a strided set of rows spans, or 0 when it overflows. */
static uintptr_t span_bytes(int64_t rows, int64_t units, int64_t stride, size_t unit_bytes)
{
    int64_t last;
    if (__builtin_mul_overflow(rows - 1, stride, &last) ||
        __builtin_add_overflow(last, units, &last) ||
        last > (int64_t)(PTRDIFF_MAX / (ptrdiff_t)unit_bytes))
        return 0;
    return (uintptr_t)last * unit_bytes;
}

/* Everything checked before anything is written; *scale resolved (FP8: 0
   means 1). */
static attn_status validate_quantize(int32_t dtype, const float *src, int64_t rows,
                                     int64_t cols, int64_t src_stride, void *dst,
                                     int64_t dst_stride, float *scale)
{
    if (!src || !dst)
        return ATTN_ERR_NULL;
    if (!attn_dtype_is_quantized(dtype))
        return ATTN_ERR_ARG;
    const int64_t block = attn_dtype_block(dtype);
    if (rows <= 0 || cols <= 0 || cols % block != 0)
        return ATTN_ERR_SHAPE;
    const int64_t units = cols / block; /* stride units per destination row */
    if (src_stride < cols || dst_stride < units)
        return ATTN_ERR_STRIDE;
    const uintptr_t src_bytes = span_bytes(rows, cols, src_stride, sizeof(float));
    const uintptr_t dst_bytes = span_bytes(rows, units, dst_stride, attn_dtype_size(dtype));
    if (!src_bytes || !dst_bytes || (uintptr_t)src > UINTPTR_MAX - src_bytes ||
        (uintptr_t)dst > UINTPTR_MAX - dst_bytes)
        return ATTN_ERR_SHAPE;
    if (attn_dtype_is_fp8(dtype)) {
        if (!isfinite(*scale) || *scale < 0.0f)
            return ATTN_ERR_ARG;
        if (*scale == 0.0f)
            *scale = 1.0f;
    } else if (*scale != 0.0f) {
        return ATTN_ERR_ARG;
    }
    const uintptr_t s0 = (uintptr_t)src, d0 = (uintptr_t)dst;
    if (s0 < d0 + dst_bytes && d0 < s0 + src_bytes)
        return ATTN_ERR_STRIDE;
    for (int64_t r = 0; r < rows; r++)
        if (!attn_quantize_row_ok(dtype, src + r * src_stride, cols))
            return ATTN_ERR_ARG;
    return ATTN_OK;
}

static void task_quantize(void *vctx, size_t index)
{
    const quantize_ctx *c = vctx;
    (void)index; /* the one task */
    for (int64_t r = 0; r < c->rows; r++)
        attn_quantize_row(c->dtype, c->src + r * c->src_stride, c->cols,
                          c->dst + (size_t)(r * c->dst_stride) * attn_dtype_size(c->dtype),
                          c->scale);
}

static attn_status checked_quantize(int32_t dtype, const float *src, int64_t rows, int64_t cols,
                                    int64_t src_stride, void *dst, int64_t dst_stride, float scale)
{
    attn_status status =
        validate_quantize(dtype, src, rows, cols, src_stride, dst, dst_stride, &scale);
    if (status == ATTN_OK) {
        quantize_ctx ctx = {dtype, src, rows, cols, src_stride, dst, dst_stride, scale};
        attn_run_tasks(NULL, NULL, task_quantize, &ctx, 1);
    }
    return status;
}

attn_status attn_quantize(int32_t dtype, const float *src, int64_t rows, int64_t cols,
                          int64_t src_stride, void *dst, int64_t dst_stride, float scale)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_quantize", mark, checked_quantize(dtype, src, rows, cols, src_stride, dst, dst_stride, scale));
}

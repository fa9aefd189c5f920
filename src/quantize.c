/* attn_quantize: f32 rows to the quantized K/V formats (attn.h). */
#include <math.h>
#include <stdint.h>

#include "problem.h"
#include "quant.h"

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

attn_status attn_quantize(int32_t dtype, const float *src, int64_t rows, int64_t cols,
                          int64_t src_stride, void *dst, int64_t dst_stride, float scale)
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
    if (dtype == ATTN_DTYPE_FP8_E4M3) {
        if (!isfinite(scale) || scale < 0.0f)
            return ATTN_ERR_ARG;
        if (scale == 0.0f)
            scale = 1.0f;
    } else if (scale != 0.0f) {
        return ATTN_ERR_ARG;
    }
    const uintptr_t s0 = (uintptr_t)src, d0 = (uintptr_t)dst;
    if (s0 < d0 + dst_bytes && d0 < s0 + src_bytes)
        return ATTN_ERR_STRIDE;
    for (int64_t r = 0; r < rows; r++) /* everything checked before anything is written */
        if (!attn_quantize_row_ok(dtype, src + r * src_stride, cols))
            return ATTN_ERR_ARG;
    unsigned char *out = dst;
    for (int64_t r = 0; r < rows; r++)
        attn_quantize_row(dtype, src + r * src_stride, cols,
                          out + (size_t)(r * dst_stride) * attn_dtype_size(dtype), scale);
    return ATTN_OK;
}

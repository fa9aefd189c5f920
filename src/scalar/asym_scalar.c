/* SPDX-License-Identifier: MIT */
/*
 * The asymmetric record formats (U8_ASYM, U4_ASYM; attn.h): rows decoded
 * into f32 before the F32 kernels (src/driver/kv.h, attn_kv_stage), and one
 * record encoded per call (attn_cache_append). A value is
 * fl(fl(code - zp) * scale): two roundings, no fused multiply-add (this
 * file is built with -ffp-contract=off like every scalar file), which the
 * SIMD decoders repeat bit for bit (tests/kernels/checkasm.c).
 */
#include <string.h>

#include "dsp.h"
#include "quant.h"

/* The code of value t of a record's codes. */
static inline unsigned asym_code(const unsigned char *codes, size_t t, int bits)
{
    if (bits == 8)
        return codes[t];
    return t % 2 ? codes[t / 2] & 15u : (unsigned)codes[t / 2] >> 4;
}

/* rows of n values, n / group records each at src_stride bytes; the
   scales are the records' (scales, scale_stride unused) */
static inline void asym_decode(const void *src, ptrdiff_t src_stride, size_t rows, size_t n,
                               size_t group, float *dst, ptrdiff_t dst_stride, int bits)
{
    const size_t rec = ATTN_ASYM_HEADER + group * (size_t)bits / 8;
    for (size_t r = 0; r < rows; r++) {
        const unsigned char *row = (const unsigned char *)src + (ptrdiff_t)r * src_stride;
        float *y = dst + (ptrdiff_t)r * dst_stride;
        for (size_t c = 0; c < n / group; c++, row += rec) {
            float s, zp;
            memcpy(&s, row, sizeof s);
            memcpy(&zp, row + 4, sizeof zp);
            for (size_t t = 0; t < group; t++) {
                const float v = (float)asym_code(row + ATTN_ASYM_HEADER, t, bits) - zp;
                y[c * group + t] = v * s;
            }
        }
    }
}

static void attn_to_f32_scaled_u8_scalar(const void *src, ptrdiff_t src_stride, size_t rows,
                                         size_t n, const float *scales, ptrdiff_t scale_stride,
                                         size_t group, float *dst, ptrdiff_t dst_stride)
{
    (void)scales;
    (void)scale_stride;
    asym_decode(src, src_stride, rows, n, group, dst, dst_stride, 8);
}

static void attn_to_f32_scaled_u4_scalar(const void *src, ptrdiff_t src_stride, size_t rows,
                                         size_t n, const float *scales, ptrdiff_t scale_stride,
                                         size_t group, float *dst, ptrdiff_t dst_stride)
{
    (void)scales;
    (void)scale_stride;
    asym_decode(src, src_stride, rows, n, group, dst, dst_stride, 4);
}

static int attn_from_f32_u8_scalar(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    if (!attn_quantize_row_ok(ATTN_DTYPE_U8_ASYM, src, (int64_t)n))
        return 0;
    attn_quantize_row(ATTN_DTYPE_U8_ASYM, src, (int64_t)n, dst, 0.0f);
    return 1;
}

static int attn_from_f32_u4_scalar(const float *src, void *dst, size_t n, float scale)
{
    (void)scale;
    if (!attn_quantize_row_ok(ATTN_DTYPE_U4_ASYM, src, (int64_t)n))
        return 0;
    attn_quantize_row(ATTN_DTYPE_U4_ASYM, src, (int64_t)n, dst, 0.0f);
    return 1;
}

ATTN_KERNEL_FILE(asym, scalar, scalar)

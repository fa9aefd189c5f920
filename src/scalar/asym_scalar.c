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

#include "asym.h"
#include "dsp.h"
#include "quant.h"

/* g codes at p (one byte each, or two per byte with the even value in
   the high nibble) into y */
static inline void decode_u8(const unsigned char *p, size_t g, float zp, float s, float *y)
{
    for (size_t t = 0; t < g; t++) {
        const float v = (float)p[t] - zp;
        y[t] = v * s;
    }
}

static inline void decode_u4(const unsigned char *p, size_t g, float zp, float s, float *y)
{
    for (size_t t = 0; t < g; t++) {
        const unsigned c = t % 2 ? p[t / 2] & 15u : (unsigned)p[t / 2] >> 4;
        const float v = (float)c - zp;
        y[t] = v * s;
    }
}

/* one record of n values: src/quant.h's encoder, which attn_quantize uses */
static inline int asym_encode(const float *x, unsigned char *dst, size_t n, int bits)
{
    const int32_t dt = bits == 8 ? ATTN_DTYPE_U8_ASYM : ATTN_DTYPE_U4_ASYM;
    if (!attn_quantize_row_ok(dt, x, (int64_t)n))
        return 0;
    attn_quantize_row(dt, x, (int64_t)n, dst, 0.0f);
    return 1;
}

ATTN_ASYM_FILE(scalar, scalar)

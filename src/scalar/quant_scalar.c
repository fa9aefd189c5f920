/* SPDX-License-Identifier: MIT */
/*
 * Scalar kernels of the quantized K/V dtypes (the oracle of the SIMD ones:
 * the scalar tile body, src/scalar/tile_scalar_tmpl.h, at Q8_0, Q4_0 and
 * FP8), the E4M3 decoder and the row quantizers behind attn_quantize. Built
 * with -ffp-contract=off like every scalar file: the quantizers' x * id and
 * x * id + 8.5 stay two roundings each, as in ggml's reference code (a
 * fused multiply-add would change some nibbles).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "half.h"
#include "problem.h"
#include "quant.h"
#include "scalar/tile_scalar_tmpl.h"

float attn_e4m3_to_f32(uint8_t x)
{
    const int e = (x >> 3) & 15, m = x & 7;
    float v;
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9); /* subnormal: m/8 * 2^-6 */
    else
        v = ldexpf((float)(8 + m), e - 10); /* (1 + m/8) * 2^(e-7) */
    return x & 0x80 ? -v : v;
}

float attn_e5m2_to_f32(uint8_t x)
{
    return attn_f16_to_f32((uint16_t)(x << 8));
}

ATTN_TILE_FILE(quant, scalar, scalar)

/* ------------------------------------------------------------------------ */
/* quantizers                                                                */
/* ------------------------------------------------------------------------ */

uint8_t attn_f32_to_e4m3(float x)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return (uint8_t)(sign | 0x7f);
    const float a = fabsf(x);
    if (a > ATTN_FP8_E4M3_MAX) /* saturate (infinities included) */
        return (uint8_t)(sign | 0x7e);
    if (a < 0x1p-6f) /* subnormal: m * 2^-9, m in 0..8 (8 is the least normal) */
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 0x1p9f));
    int e;
    frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1): the E4M3 exponent is e - 1 */
    e -= 1;
    int r = (int)nearbyintf(ldexpf(a, 3 - e)); /* 8..16, exact scaling */
    if (r == 16) {
        r = 8;
        e++;
    }
    /* a <= 448 keeps e <= 8 and (e, r) <= (8, 14): never the NaN code */
    return (uint8_t)(sign | ((e + 7) << 3) | (r - 8));
}

uint8_t attn_f32_to_e5m2(float x)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return (uint8_t)(sign | 0x7f);
    const float a = fabsf(x);
    if (a > ATTN_FP8_E5M2_MAX) /* saturate (infinities included) */
        return (uint8_t)(sign | 0x7b);
    if (a < 0x1p-14f) /* subnormal: m * 2^-16, m in 0..4 (4 is the least normal) */
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 0x1p16f));
    int e;
    frexpf(a, &e); /* a = f * 2^e, f in [0.5, 1): the E5M2 exponent is e - 1 */
    e -= 1;
    int r = (int)nearbyintf(ldexpf(a, 2 - e)); /* 4..8, exact scaling */
    if (r == 8) {
        r = 4;
        e++;
    }
    /* a <= 57344 keeps e <= 15 and (e, r) <= (15, 7): never inf or NaN */
    return (uint8_t)(sign | ((e + 15) << 2) | (r - 4));
}

/* d = amax / 127 as ggml computes it; amax over a block. */
static float q8_0_scale(const float *x)
{
    float amax = 0.0f;
    for (int j = 0; j < ATTN_QBLOCK; j++) {
        const float v = fabsf(x[j]);
        amax = amax > v ? amax : v;
    }
    return amax / 127.0f;
}

/* d = (the first value of largest magnitude) / -8, as ggml computes it. */
static float q4_0_scale(const float *x)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < ATTN_QBLOCK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max / -8.0f;
}

/*
 * One pass per block: every value finite (on the bits, so the loop
 * vectorizes at the baseline ISA), and |d| < 65520, the least magnitude
 * binary16 rounds to infinity (src/half.h). |d| is Q8_0's amax / 127, and
 * Q4_0's |m| / 8 = amax / 8 (m is a value of largest magnitude).
 */
/* An ASYM record's scale and zero point (attn.h, attn_quantize), or 0 when
   it has none: a non-finite value, a range or zero point that overflows.
   A scale below FLT_MIN (a range under 255 * 2^-126) is taken as OpenVINO
   takes a zero range, 0.0001f: its reciprocal would overflow. */
int attn_asym_params(int32_t dtype, const float *x, int64_t n, float *scale, float *zp)
{
    float lo = x[0], hi = x[0];
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return 0;
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    const float range = hi - lo;
    if (!isfinite(range))
        return 0;
    float s = range / (dtype == ATTN_DTYPE_U8_ASYM ? 255.0f : 15.0f);
    if (!(s >= FLT_MIN))
        s = 0.0001f;
    *scale = s;
    *zp = -lo / s;
    return isfinite(*zp);
}

/* One record: header, then code = rne(fma(x, 1/s, zp)) clamped (attn.h). */
static void asym_record(int32_t dtype, const float *x, int64_t n, unsigned char *out)
{
    float s, zp;
    (void)attn_asym_params(dtype, x, n, &s, &zp); /* checked by attn_quantize_row_ok */
    memcpy(out, &s, sizeof s);
    memcpy(out + 4, &zp, sizeof zp);
    out += ATTN_ASYM_HEADER;
    const float inv = 1.0f / s, top = dtype == ATTN_DTYPE_U8_ASYM ? 255.0f : 15.0f;
    for (int64_t i = 0; i < n; i++) {
        /* (x - lo) / s in [0, top] up to rounding: finite */
        float c = nearbyintf(fmaf(x[i], inv, zp));
        c = c < 0.0f ? 0.0f : c > top ? top : c;
        if (dtype == ATTN_DTYPE_U8_ASYM)
            out[i] = (unsigned char)c;
        else if (i % 2 == 0)
            out[i / 2] = (unsigned char)((int)c << 4);
        else
            out[i / 2] = (unsigned char)(out[i / 2] | (int)c);
    }
}

int attn_quantize_row_ok(int32_t dtype, const float *x, int64_t n)
{
    if (attn_dtype_is_fp8(dtype))
        return 1;
    if (attn_dtype_is_asym(dtype)) {
        float s, zp;
        return attn_asym_params(dtype, x, n, &s, &zp);
    }
    for (int64_t b = 0; b < n; b += ATTN_QBLOCK) {
        uint32_t amax = 0, bad = 0;
        for (int j = 0; j < ATTN_QBLOCK; j++) {
            uint32_t u;
            memcpy(&u, x + b + j, sizeof u);
            u &= 0x7fffffffu;
            bad |= u >= 0x7f800000u;   /* inf or NaN */
            amax = amax > u ? amax : u; /* finite magnitudes order as their bits */
        }
        float a;
        memcpy(&a, &amax, sizeof a);
        if (bad || (dtype == ATTN_DTYPE_Q8_0 ? a / 127.0f : a / 8.0f) >= 65520.0f)
            return 0;
    }
    return 1;
}

/* roundf (half away from zero) for |v| < 2^31, without a libm call: the
   truncation, one step further where the dropped part is at least 1/2
   (v - t is exact). */
static int round_half_away(float v)
{
    const int t = (int)v;
    const float f = v - (float)t;
    return t + (f >= 0.5f) - (f <= -0.5f);
}

void attn_quantize_row(int32_t dtype, const float *x, int64_t n, void *dst, float scale)
{
    unsigned char *out = dst;
    if (attn_dtype_is_asym(dtype)) {
        asym_record(dtype, x, n, out);
        return;
    }
    if (dtype == ATTN_DTYPE_FP8_E4M3) {
        for (int64_t i = 0; i < n; i++)
            out[i] = attn_f32_to_e4m3(scale == 1.0f ? x[i] : x[i] / scale);
        return;
    }
    if (dtype == ATTN_DTYPE_FP8_E5M2) {
        for (int64_t i = 0; i < n; i++)
            out[i] = attn_f32_to_e5m2(scale == 1.0f ? x[i] : x[i] / scale);
        return;
    }
    for (int64_t b = 0; b < n; b += ATTN_QBLOCK, x += ATTN_QBLOCK) {
        const float d = dtype == ATTN_DTYPE_Q8_0 ? q8_0_scale(x) : q4_0_scale(x);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = attn_f32_to_f16(d);
        memcpy(out, &dh, sizeof dh);
        if (dtype == ATTN_DTYPE_Q8_0) {
            for (int j = 0; j < ATTN_QBLOCK; j++)
                out[2 + j] = (uint8_t)(int8_t)round_half_away(x[j] * id); /* |x * id| <= 127.5 */
            out += ATTN_Q8_0_BYTES;
        } else {
            for (int j = 0; j < 16; j++) {
                const float x0 = x[j] * id, x1 = x[16 + j] * id;
                /* x * id in [-8, 8] (up to rounding): + 8.5 truncates to 0..16 */
                int q0 = (int)(int8_t)(x0 + 8.5f), q1 = (int)(int8_t)(x1 + 8.5f);
                q0 = q0 < 15 ? q0 : 15;
                q1 = q1 < 15 ? q1 : 15;
                out[2 + j] = (uint8_t)(q0 | (q1 << 4));
            }
            out += ATTN_Q4_0_BYTES;
        }
    }
}

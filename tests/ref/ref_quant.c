/* SPDX-License-Identifier: MIT */
/* Reference decoding and quantization of the K/V formats (ref_quant.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "ref.h"
#include "ref_quant.h"

/* From src/dtype_list.h (data, not src/ code); the decoders below are this
   file's own, on purpose. */
size_t ref_quant_unit_bytes(int dtype)
{
    return ref_dtype_size(dtype);
}

double ref_e4m3_to_double(uint8_t x)
{
    const int exponent = (x >> 3) & 15, mantissa = x & 7;
    double v;
    if (exponent == 15 && mantissa == 7)
        v = NAN;
    else if (exponent == 0)
        v = ldexp((double)mantissa, -9); /* 0.mmm * 2^(1-7) */
    else
        v = ldexp(1.0 + mantissa / 8.0, exponent - 7);
    return (x & 0x80) ? -v : v;
}

/* E5M2 from its fields (sign, 5 exponent bits biased by 15, 2 mantissa
   bits), not through a binary16 decoder. */
double ref_e5m2_to_double(uint8_t x)
{
    const int exponent = (x >> 2) & 31, mantissa = x & 3;
    double v;
    if (exponent == 31)
        v = mantissa ? NAN : INFINITY;
    else if (exponent == 0)
        v = ldexp((double)mantissa, -16); /* 0.mm * 2^(1-15) */
    else
        v = ldexp(1.0 + mantissa / 4.0, exponent - 15);
    return (x & 0x80) ? -v : v;
}

static double block_d(const unsigned char *blk)
{
    return ref_f16_to_double((uint16_t)(blk[0] | blk[1] << 8)); /* little-endian f16 */
}

/* A dtype these decoders do not know: the float ones are not quantized,
   and one the list gained needs its decoder here. */
static void not_quantized(int dtype)
{
    fprintf(stderr, "ref_quant: dtype %d (%s) has no decoder here\n", dtype,
            ref_dtype_name(dtype));
    abort();
}

/* The switches cover every attn_dtype (-Wswitch made an error): a dtype
   added to include/attn.h does not compile here until it has its case. */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
/* An asymmetric record's value (attn.h): f32 scale and zero point in
   native byte order, then the codes; fl32(fl32(code - zp) * scale). */
static double asym_value(int bits, const unsigned char *row, size_t t, size_t group)
{
    const size_t rec = 8 + group * (size_t)bits / 8;
    const unsigned char *r = row + t / group * rec;
    const size_t i = t % group;
    float scale, zp;
    memcpy(&scale, r, 4);
    memcpy(&zp, r + 4, 4);
    const unsigned char *codes = r + 8;
    const unsigned code = bits == 8 ? codes[i] : i % 2 ? codes[i / 2] & 15u : codes[i / 2] >> 4u;
    const float centred = (float)code - zp;
    return (double)(float)(centred * scale);
}

double ref_quant_value(int dtype, const unsigned char *row, size_t t)
{
    return ref_quant_value_g(dtype, row, t, 0);
}

double ref_quant_value_g(int dtype, const unsigned char *row, size_t t, size_t group)
{
    const size_t j = t % 32;
    const unsigned char *blk;
    switch ((attn_dtype)dtype) {
    case ATTN_DTYPE_U8_ASYM:
        return asym_value(8, row, t, group ? group : t + 1);
    case ATTN_DTYPE_U4_ASYM:
        return asym_value(4, row, t, group ? group : t + 2);
    case ATTN_DTYPE_FP8_E4M3:
        return ref_e4m3_to_double(row[t]);
    case ATTN_DTYPE_FP8_E5M2:
        return ref_e5m2_to_double(row[t]);
    case ATTN_DTYPE_Q8_0:
        blk = row + t / 32 * 34;
        return (double)(int8_t)blk[2 + j] * block_d(blk);
    case ATTN_DTYPE_Q4_0: {
        blk = row + t / 32 * 18;
        const int nibble = j < 16 ? (blk[2 + j] & 15) : (blk[2 + j - 16] >> 4);
        return (double)(nibble - 8) * block_d(blk);
    }
    case ATTN_DTYPE_F32:
    case ATTN_DTYPE_F16:
    case ATTN_DTYPE_BF16:
    case ATTN_DTYPE_BOOL:
        break;
    }
    not_quantized(dtype);
    return NAN;
}

void ref_quant_poison(int dtype, unsigned char *row, size_t t)
{
    unsigned char *blk;
    switch ((attn_dtype)dtype) {
    case ATTN_DTYPE_FP8_E4M3:
    case ATTN_DTYPE_FP8_E5M2:
        row[t] = (row[t] & 0x80) | 0x7f; /* NaN in both formats */
        return;
    case ATTN_DTYPE_Q8_0:
    case ATTN_DTYPE_Q4_0:
        blk = row + t / 32 * ref_quant_unit_bytes(dtype);
        blk[0] = 0x00; /* f16 0x7e00: a quiet NaN scale */
        blk[1] = 0x7e;
        return;
    case ATTN_DTYPE_U8_ASYM:
    case ATTN_DTYPE_U4_ASYM: { /* a one-record row: a NaN scale */
        const float nan = NAN;
        memcpy(row, &nan, 4);
        return;
    }
    case ATTN_DTYPE_F32:
    case ATTN_DTYPE_F16:
    case ATTN_DTYPE_BF16:
    case ATTN_DTYPE_BOOL:
        break;
    }
    not_quantized(dtype);
}
#pragma GCC diagnostic pop

static void put_f16(unsigned char *p, float d)
{
    const uint16_t h = ref_f32_to_f16(d);
    p[0] = (unsigned char)(h & 0xff);
    p[1] = (unsigned char)(h >> 8);
}

/*
 * ggml's rounding, from its documented formulas: amax = max |x|,
 * d = amax / 127 (f32 division), id = d ? 1 / d : 0, q = round half away
 * from zero of the f32 product x * id; the block stores f16(d).
 */
void ref_quantize_q8_0_block(const float *x, unsigned char *out)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (int j = 0; j < 32; j++) {
        const float y = x[j] * id;
        /* half away from zero, by hand; the + 0.5 in double is exact */
        const double r = floor(fabs((double)y) + 0.5);
        out[2 + j] = (unsigned char)(int8_t)(y < 0.0f ? -r : r);
    }
}

/*
 * max = the first x of largest |x| (strictly larger replaces), d = max / -8,
 * id = d ? 1 / d : 0, nibble = min(15, (int)(x * id + 8.5f)) with the sum
 * rounded to f32 before the truncation; value j low, j + 16 high.
 */
void ref_quantize_q4_0_block(const float *x, unsigned char *out)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (int j = 0; j < 16; j++) {
        int n[2];
        for (int h = 0; h < 2; h++) {
            const float y = x[j + 16 * h] * id;
            const float z = y + 8.5f;
            const int tr = (int)z; /* z >= 0 here: truncation = floor */
            n[h] = tr > 15 ? 15 : tr;
        }
        out[2 + j] = (unsigned char)(n[0] | n[1] << 4);
    }
}

/* The sign of x and the code in 0..top nearest |x| (ties to the even code);
   NaN is 0x7f, and magnitudes above max (infinities too) saturate to top. */
static uint8_t nearest_fp8(float x, double max, int top, double (*decode)(uint8_t))
{
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return sign | 0x7f;
    const double a = fabs((double)x);
    if (a > max)
        return (uint8_t)(sign | top);
    int best = 0;
    double best_err = INFINITY;
    for (int c = 0; c <= top; c++) {
        const double err = fabs(decode((uint8_t)c) - a);
        if (err < best_err || (err == best_err && (c & 1) == 0)) {
            best = c;
            best_err = err;
        }
    }
    return (uint8_t)(sign | best);
}

/* Nearest E4M3 by search over the 126 finite magnitudes, ties to the even
   code: independent of any bit trick. */
uint8_t ref_f32_to_e4m3(float x)
{
    return nearest_fp8(x, 448.0, 0x7e, ref_e4m3_to_double);
}

/* Nearest E5M2 by search over the 123 finite magnitudes, ties to the even
   code (a tie falls between two codes, one of them even); above 57344 and
   infinities saturate, as attn.h says attn_quantize does. */
uint8_t ref_f32_to_e5m2(float x)
{
    return nearest_fp8(x, 57344.0, 0x7b, ref_e5m2_to_double);
}

/*
 * OpenVINO's u8/u4 codec as attn.h states it, written from that statement:
 * lo, hi over the record; s = (hi - lo) / 255 (15) in f32, 0.0001f for a
 * scale below the least normal float (0 included); zp = -lo / s; each code
 * the fused x * (1 / s) + zp rounded to nearest even, clamped.
 */
int ref_quantize_asym(int dtype, const float *x, size_t n, unsigned char *out)
{
    const int u8 = dtype == ATTN_DTYPE_U8_ASYM;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return 0;
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    const float range = hi - lo;
    if (isinf(range))
        return 0;
    float s = range / (u8 ? 255.0f : 15.0f);
    if (s < 0x1p-126f)
        s = 0.0001f;
    const float zp = -lo / s;
    if (isinf(zp))
        return 0;
    memcpy(out, &s, 4);
    memcpy(out + 4, &zp, 4);
    const float inv = 1.0f / s;
    const double top = u8 ? 255.0 : 15.0;
    for (size_t i = 0; i < n; i++) {
        /* fmaf is the one rounding; rint rounds half to even in the default mode */
        double c = rint((double)fmaf(x[i], inv, zp));
        c = c < 0.0 ? 0.0 : c > top ? top : c;
        if (u8)
            out[8 + i] = (unsigned char)c;
        else if (i % 2 == 0)
            out[8 + i / 2] = (unsigned char)((unsigned)c << 4);
        else
            out[8 + i / 2] |= (unsigned char)c;
    }
    return 1;
}

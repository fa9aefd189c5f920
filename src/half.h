/* SPDX-License-Identifier: MIT */
/*
 * IEEE binary16 and bfloat16 <-> binary32, portable C: the exact decoders,
 * and the one encoder of each format (round to nearest, ties to even) that
 * every operation writing a 16-bit value uses (the forward's and
 * attn_merge's output rows, src/driver/common.c; the Q8_0/Q4_0 block scales,
 * src/scalar/quant_scalar.c). Integer arithmetic only: no rounding mode, no
 * FTZ/DAZ and no floating-point contraction can change a result.
 */
#ifndef ATTN_HALF_H
#define ATTN_HALF_H

#include <stdint.h>
#include <string.h>

static inline float attn_f32_from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t attn_f32_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static inline float attn_bf16_to_f32(uint16_t h)
{
    return attn_f32_from_bits((uint32_t)h << 16);
}

static inline float attn_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) /* inf / NaN: keep the payload */
        return attn_f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp != 0)
        return attn_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0)
        return attn_f32_from_bits(sign);
    /* subnormal half: normalise (man * 2^-24 is exact in f32) */
    exp = 113u;
    while (!(man & 0x400u)) {
        man <<= 1;
        exp--;
    }
    return attn_f32_from_bits(sign | (exp << 23) | ((man & 0x3ffu) << 13));
}

/* x >> shift (1 <= shift <= 31) rounded to nearest, ties to even. */
static inline uint32_t attn_shift_rne(uint32_t x, unsigned shift)
{
    const uint32_t q = x >> shift, rest = x & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return q + (rest > half || (rest == half && (q & 1u)));
}

/*
 * IEEE binary16, round to nearest even: a magnitude that rounds to 2^16 or
 * more (>= 65520) becomes +-inf, one below 2^-14 a subnormal half (a
 * multiple of 2^-24; below 2^-25, or equal to it, +-0), NaN a quiet NaN
 * with its sign and the top 9 bits of its payload.
 */
static inline uint16_t attn_f32_to_f16(float f)
{
    const uint32_t u = attn_f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) /* rounds to >= 2^16: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        /* abs = mant * 2^(e - 150) with e >= 1 (an f32 subnormal: e = 1, no
           implicit bit); in units of 2^-24 that is mant >> (126 - e) */
        const uint32_t e = abs >> 23;
        const uint32_t mant = e ? (abs & 0x7fffffu) | 0x800000u : abs;
        const unsigned shift = 126u - (e ? e : 1u); /* >= 14 */
        /* mant < 2^24: from shift 25 on the value is below half a unit */
        return (uint16_t)(sign | (shift >= 25u ? 0u : attn_shift_rne(mant, shift)));
    }
    /* normal: drop 13 mantissa bits, rounding to nearest even; a carry into
       the exponent is the right result (up to 2^16 was excluded above) */
    return (uint16_t)(sign | (attn_shift_rne(abs, 13) - (112u << 10)));
}

/*
 * bfloat16, round to nearest even on the 16 dropped bits: a magnitude that
 * rounds past FLT_MAX's bfloat16 neighbour becomes +-inf, subnormals round
 * like any other value, NaN a quiet NaN with its sign and the top 6 bits of
 * its payload (a NaN never rounds to an infinity).
 */
static inline uint16_t attn_f32_to_bf16(float f)
{
    const uint32_t u = attn_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif /* ATTN_HALF_H */

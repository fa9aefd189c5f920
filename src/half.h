/* Exact conversions of IEEE binary16 and bfloat16 to binary32, portable C. */
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

#endif /* ATTN_HALF_H */

/* SPDX-License-Identifier: MIT */
/*
 * NEON kernels of the asymmetric record formats (U8_ASYM, U4_ASYM): the
 * oracle's bits (src/scalar/asym_scalar.c; checked bitwise by
 * tests/kernels/checkasm.c). The decoder widens the codes to uint32 and
 * converts them (exact), then fl(fl(c - zp) * s) as FSUB and FMUL, never
 * one FMLA. The encoder takes its min and max in vectors and its scale and
 * zero point as the oracle does (src/asym.h), its codes by one FMLA each,
 * rounded to nearest even (FRINTN) and clamped. Tails: scalar (decoder),
 * a padded copy (encoder).
 */
#include <string.h>

#include "arm/neon.h"
#include "asym.h"
#include "dsp.h"

/* ------------------------------------------------------------ decoding */

/* fl(fl(c - zp) * s) of 8 codes, stored at y */
static ALWAYS_INLINE void put8(float *y, uint16x8_t c, float32x4_t zp, float32x4_t s)
{
    const float32x4_t a = vcvtq_f32_u32(vmovl_u16(vget_low_u16(c)));
    const float32x4_t b = vcvtq_f32_u32(vmovl_high_u16(c));
    vst1q_f32(y, vmulq_f32(vsubq_f32(a, zp), s));
    vst1q_f32(y + 4, vmulq_f32(vsubq_f32(b, zp), s));
}

/* 16 codes (bytes, in order) decoded to y */
static ALWAYS_INLINE void put16(float *y, uint8x16_t c, float32x4_t zp, float32x4_t s)
{
    put8(y, vmovl_u8(vget_low_u8(c)), zp, s);
    put8(y + 8, vmovl_high_u8(c), zp, s);
}

static ALWAYS_INLINE void decode_u8(const unsigned char *p, size_t g, float zpf, float sf, float *y)
{
    const float32x4_t zp = vdupq_n_f32(zpf), s = vdupq_n_f32(sf);
    size_t t = 0;
    for (; t + 32 <= g; t += 32) {
        put16(y + t, vld1q_u8(p + t), zp, s);
        put16(y + t + 16, vld1q_u8(p + t + 16), zp, s);
    }
    for (; t + 8 <= g; t += 8)
        put8(y + t, vmovl_u8(vld1_u8(p + t)), zp, s);
    for (; t < g; t++) {
        const float v = (float)p[t] - zpf;
        y[t] = v * sf;
    }
}

static ALWAYS_INLINE void decode_u4(const unsigned char *p, size_t g, float zpf, float sf, float *y)
{
    const float32x4_t zp = vdupq_n_f32(zpf), s = vdupq_n_f32(sf);
    size_t t = 0;
    /* each byte's high nibble first: zip (b >> 4, b & 15) */
    for (; t + 32 <= g; t += 32) {
        const uint8x16_t b = vld1q_u8(p + t / 2);
        const uint8x16_t hi = vshrq_n_u8(b, 4), lo = vandq_u8(b, vdupq_n_u8(15));
        put16(y + t, vzip1q_u8(hi, lo), zp, s);
        put16(y + t + 16, vzip2q_u8(hi, lo), zp, s);
    }
    for (; t + 16 <= g; t += 16) {
        const uint8x8_t b = vld1_u8(p + t / 2);
        const uint8x8_t hi = vshr_n_u8(b, 4), lo = vand_u8(b, vdup_n_u8(15));
        put16(y + t, vcombine_u8(vzip1_u8(hi, lo), vzip2_u8(hi, lo)), zp, s);
    }
    for (; t < g; t += 2) { /* g is even */
        const float hi = (float)(p[t / 2] >> 4) - zpf, lo = (float)(p[t / 2] & 15) - zpf;
        y[t] = hi * sf;
        y[t + 1] = lo * sf;
    }
}

/* ------------------------------------------------------------ encoding */

/* The codes of 8 values at x into out: 8 bytes (u8) or 4 (u4, pairs
   (even << 4) | odd), `bytes` of them stored. rne(fma(x, inv, zp))
   clamped to [0, top]: clamping first is the same (0 and top are
   integers), and the conversion of an integer is exact. */
static ALWAYS_INLINE void put_codes8(unsigned char *out, const float *x, float32x4_t inv,
                                     float32x4_t zp, float32x4_t top, int bits, size_t bytes)
{
    uint32x4_t c[2];
    for (int h = 0; h < 2; h++) {
        float32x4_t v = vfmaq_f32(zp, vld1q_f32(x + 4 * h), inv);
        v = vminq_f32(vmaxq_f32(v, vdupq_n_f32(0.0f)), top);
        c[h] = vcvtq_u32_f32(vrndnq_f32(v));
    }
    const uint16x8_t w = vcombine_u16(vmovn_u32(c[0]), vmovn_u32(c[1])); /* in order */
    uint8x8_t b;
    if (bits == 8) {
        b = vmovn_u16(w);
    } else {
        const uint32x4_t pr = vreinterpretq_u32_u16(w); /* even | odd << 16 */
        const uint32x4_t q = vorrq_u32(vshlq_n_u32(vandq_u32(pr, vdupq_n_u32(0xffff)), 4),
                                       vshrq_n_u32(pr, 16));
        b = vmovn_u16(vcombine_u16(vmovn_u32(q), vdup_n_u16(0)));
    }
    if (bytes == 8) {
        vst1_u8(out, b);
    } else {
        unsigned char tmp[8];
        vst1_u8(tmp, b);
        memcpy(out, tmp, bytes);
    }
}

/* One record of n values (n even for u4), or 0 as the oracle refuses. */
static ALWAYS_INLINE int asym_encode(const float *x, unsigned char *dst, size_t n, int bits)
{
    /* min, max and whether any |x| is inf or NaN (on the bits) */
    const uint32x4_t max_fin = vdupq_n_u32(0x7f7fffff);
    float32x4_t vlo = vdupq_n_f32(x[0]), vhi = vlo;
    uint32x4_t bad = vdupq_n_u32(0);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float32x4_t v = vld1q_f32(x + j);
        vlo = vminq_f32(vlo, v);
        vhi = vmaxq_f32(vhi, v);
        bad = vorrq_u32(bad, vcgtq_u32(vandq_u32(vreinterpretq_u32_f32(v), vdupq_n_u32(0x7fffffff)),
                                       max_fin));
    }
    if (vmaxvq_u32(bad))
        return 0;
    float lo = vminvq_f32(vlo), hi = vmaxvq_f32(vhi);
    for (; j < n; j++) {
        if (!isfinite(x[j]))
            return 0;
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    float s, zp;
    if (!attn_asym_scale(bits, attn_asym_lo(x, n, lo), hi, &s, &zp))
        return 0;
    attn_asym_header(dst, s, zp);
    unsigned char *out = dst + ATTN_ASYM_HEADER;
    const float32x4_t vinv = vdupq_n_f32(1.0f / s), vzp = vdupq_n_f32(zp),
                      top = vdupq_n_f32(ATTN_ASYM_TOP(bits));
    for (j = 0; j + 8 <= n; j += 8)
        put_codes8(out + j * (size_t)bits / 8, x + j, vinv, vzp, top, bits, (size_t)bits);
    if (j < n) { /* the tail padded with its first value: only its codes are stored */
        float pad[8];
        for (size_t k = 0; k < 8; k++)
            pad[k] = x[j + (j + k < n ? k : 0)];
        put_codes8(out + j * (size_t)bits / 8, pad, vinv, vzp, top, bits,
                   (n - j) * (size_t)bits / 8);
    }
    return 1;
}

ATTN_ASYM_FILE(neon, neon)

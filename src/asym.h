/* SPDX-License-Identifier: MIT */
/*
 * What every ISA's asym file shares (src/scalar/asym_scalar.c, src/x86/asym_*.c,
 * src/arm/asym_neon.c): the SIMD encoders' scalar steps, a record's scale
 * and zero point from its vector min and max as attn_asym_params
 * (src/scalar/quant_scalar.c) takes them from its scan, so that headers
 * and codes are the oracle's bytes (tests/kernels/checkasm.c); and the
 * record walk with the slots' entry points (ATTN_ASYM_FILE).
 */
#ifndef ATTN_ASYM_H
#define ATTN_ASYM_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "dtype_list.h" /* ATTN_ASYM_HEADER */

/* The largest code: 255 (u8), 15 (u4). */
#define ATTN_ASYM_TOP(bits) ((bits) == 8 ? 255.0f : 15.0f)

/*
 * The oracle's lo is the first value of the row equal to the minimum (it
 * moves only on a strict <). Values that compare equal have the same bits
 * but for the zeros, so a vector min is its value except for the sign of a
 * zero, which -lo / s carries into the zero point: there, the first zero's.
 * (hi's sign never matters: hi - lo is the same either way.)
 */
static inline float attn_asym_lo(const float *x, size_t n, float lo)
{
    if (lo != 0.0f)
        return lo;
    for (size_t i = 0; i < n; i++)
        if (x[i] == 0.0f)
            return x[i];
    return lo;
}

/* attn_asym_params from lo and hi of finite values: 0 when the range or
   the zero point overflows. Plain f32 arithmetic, each step rounded once
   (nothing here can contract). */
static inline int attn_asym_scale(int bits, float lo, float hi, float *scale, float *zp)
{
    const float range = hi - lo;
    if (!isfinite(range))
        return 0;
    float s = range / ATTN_ASYM_TOP(bits);
    if (!(s >= FLT_MIN))
        s = 0.0001f;
    *scale = s;
    *zp = -lo / s;
    return isfinite(*zp);
}

/* The record's header: scale, then zero point, native byte order. */
static inline void attn_asym_header(unsigned char *dst, float s, float zp)
{
    memcpy(dst, &s, sizeof s);
    memcpy(dst + 4, &zp, sizeof zp);
}

/*
 * The end of an ISA's asym file, after its decode_u8 and decode_u4 (the g
 * codes at p into y, fl(fl(c - zp) * s) each) and asym_encode (one record
 * of n values, 0 where the oracle refuses it): the walk over rows of
 * records, the four slots (src/kernel_list.h, ATTN_SLOTS_ASYM; the scales
 * arguments unused: the records hold theirs) and the file's init. One walk
 * for every ISA, so a change to the records' layout reaches all of them.
 */
#define ATTN_ASYM_FILE(isa, ext)                                                            \
    static inline __attribute__((always_inline)) void asym_decode(                          \
        const void *src, ptrdiff_t src_stride, size_t rows, size_t n, size_t group,         \
        float *dst, ptrdiff_t dst_stride, int bits)                                         \
    {                                                                                       \
        const size_t rec = ATTN_ASYM_HEADER + group * (size_t)bits / 8;                    \
        for (size_t r = 0; r < rows; r++) {                                                 \
            const unsigned char *row = (const unsigned char *)src + (ptrdiff_t)r * src_stride; \
            float *y = dst + (ptrdiff_t)r * dst_stride;                                     \
            for (size_t c = 0; c < n; c += group, row += rec) {                             \
                float s, zp;                                                                \
                memcpy(&s, row, sizeof s);                                                  \
                memcpy(&zp, row + 4, sizeof zp);                                            \
                if (bits == 8)                                                              \
                    decode_u8(row + ATTN_ASYM_HEADER, group, zp, s, y + c);                 \
                else                                                                        \
                    decode_u4(row + ATTN_ASYM_HEADER, group, zp, s, y + c);                 \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    ATTN_ASYM_SLOTS(isa, u8, 8)                                                             \
    ATTN_ASYM_SLOTS(isa, u4, 4)                                                             \
    ATTN_KERNEL_FILE(asym, isa, ext)

#define ATTN_ASYM_SLOTS(isa, dt, bits)                                                      \
    static void attn_to_f32_scaled_##dt##_##isa(const void *src, ptrdiff_t src_stride,      \
                                                size_t rows, size_t n, const float *scales, \
                                                ptrdiff_t scale_stride, size_t group,       \
                                                float *dst, ptrdiff_t dst_stride)           \
    {                                                                                       \
        (void)scales;                                                                       \
        (void)scale_stride;                                                                 \
        asym_decode(src, src_stride, rows, n, group, dst, dst_stride, bits);                \
    }                                                                                       \
    static int attn_from_f32_##dt##_##isa(const float *src, void *dst, size_t n, float scale) \
    {                                                                                       \
        (void)scale;                                                                        \
        return asym_encode(src, dst, n, bits);                                              \
    }

#endif /* ATTN_ASYM_H */

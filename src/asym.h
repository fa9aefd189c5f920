/* SPDX-License-Identifier: MIT */
/*
 * The SIMD ASYM encoders' scalar steps (src/x86/asym_*.c, src/arm/asym_neon.c):
 * a record's scale and zero point from its vector min and max, as
 * attn_asym_params (src/scalar/quant_scalar.c) takes them from its scan, so
 * that the headers and codes are the oracle's bytes (tests/kernels/checkasm.c).
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

#endif /* ATTN_ASYM_H */

/* SPDX-License-Identifier: MIT */
/*
 * The helpers of the SVE kernels. They exist only where SVE code may be
 * generated (__ARM_FEATURE_SVE: the SVE files, compiled with
 * -march=armv8.2-a+sve). The kernels and their inits come from
 * src/kernel_list.h; the registry declares the table's init.
 *
 * Everything is vector-length-agnostic: a vector holds svcntw() floats
 * (4 to 64), loops step by it and every load and store is predicated by
 * svwhilelt, so tails need no scalar code and nothing past the last element
 * is touched. Sizeless SVE types cannot live in arrays, so there are no
 * VL-sized buffers anywhere.
 */
#ifndef ATTN_SVE_H
#define ATTN_SVE_H

#include <stddef.h>
#include <stdint.h>

#include "dsp.h"

#ifdef __ARM_FEATURE_SVE
#include <arm_sve.h>

#ifndef ALWAYS_INLINE
#define ALWAYS_INLINE inline __attribute__((always_inline))
#endif

/* Lanes i..n-1 of the vector starting at element i (all of them when
   n - i >= svcntw(), none when i >= n). */
static ALWAYS_INLINE svbool_t sve_lanes(size_t i, size_t n)
{
    return svwhilelt_b32_u64((uint64_t)i, (uint64_t)n);
}

/*
 * The elements base[i + lane] of a K/V array of `dtype`, as f32, for the
 * active lanes of pg; inactive lanes read nothing and hold +0.0.
 * 16-bit elements are loaded zero-extended into 32-bit lanes: an F16 value
 * then sits in the low (even) half of its lane, where fcvt reads it; a BF16
 * value is the high half of the f32 with the same value, so a shift by 16
 * is the whole conversion.
 */
static ALWAYS_INLINE svfloat32_t sve_load_kv(int dtype, svbool_t pg, const void *base,
                                             ptrdiff_t i)
{
    if (dtype == ATTN_KV_F32)
        return svld1_f32(pg, (const float *)base + i);
    const svuint32_t h = svld1uh_u32(pg, (const uint16_t *)base + i);
    if (dtype == ATTN_KV_F16)
        /* zeroing form: inactive lanes are +0.0, not left undefined */
        return svcvt_f32_f16_z(pg, svreinterpret_f16_u32(h));
    return svreinterpret_f32_u32(svlsl_n_u32_z(pg, h, 16));
}

#endif /* __ARM_FEATURE_SVE */

#endif /* ATTN_SVE_H */

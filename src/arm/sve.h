/* SPDX-License-Identifier: MIT */
/* The SVE kernels' helpers, only where SVE code may be generated. Loads and
   stores are predicated by svwhilelt: nothing past the last element is
   touched. */
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

/* Lanes i..n-1 of the vector starting at element i. */
static ALWAYS_INLINE svbool_t sve_lanes(size_t i, size_t n)
{
    return svwhilelt_b32_u64((uint64_t)i, (uint64_t)n);
}

/* Inactive lanes read nothing and hold +0.0. 16-bit elements load
   zero-extended: F16 in the low half, where fcvt reads it; BF16 needs only
   a shift by 16. */
static ALWAYS_INLINE svfloat32_t sve_load_kv(int dtype, svbool_t pg, const void *base,
                                             ptrdiff_t i)
{
    if (dtype == ATTN_KV_F32)
        return svld1_f32(pg, (const float *)base + i);
    const svuint32_t h = svld1uh_u32(pg, (const uint16_t *)base + i);
    if (dtype == ATTN_KV_F16)
        /* zeroing form: inactive lanes +0.0, not undefined */
        return svcvt_f32_f16_z(pg, svreinterpret_f16_u32(h));
    return svreinterpret_f32_u32(svlsl_n_u32_z(pg, h, 16));
}

/* Rows x, y (y NULL: zeros) to BFMMLA/SMMLA's 2 x 2 blocks, lanes (x c0,
   x c1, y c0, y c1) per 128-bit segment, and back. */
static ALWAYS_INLINE void sve_rows_to_blocks(const float *x, const float *y, size_t n,
                                             svfloat32_t *b0, svfloat32_t *b1, svfloat32_t *b2,
                                             svfloat32_t *b3)
{
    const size_t vl = svcntw();
    const svbool_t p0 = sve_lanes(0, n), p1 = sve_lanes(vl, n);
    const svuint64_t x0 = svreinterpret_u64_f32(svld1_f32(p0, x));
    const svuint64_t x1 = svreinterpret_u64_f32(svld1_f32(p1, x + vl));
    const svuint64_t y0 = y ? svreinterpret_u64_f32(svld1_f32(p0, y)) : svdup_n_u64(0);
    const svuint64_t y1 = y ? svreinterpret_u64_f32(svld1_f32(p1, y + vl)) : svdup_n_u64(0);
    *b0 = svreinterpret_f32_u64(svzip1_u64(x0, y0));
    *b1 = svreinterpret_f32_u64(svzip2_u64(x0, y0));
    *b2 = svreinterpret_f32_u64(svzip1_u64(x1, y1));
    *b3 = svreinterpret_f32_u64(svzip2_u64(x1, y1));
}

static ALWAYS_INLINE void sve_store_row_part(svbool_t pg, float *p, svfloat32_t v, int add,
                                             int scaled, float scale)
{
    svst1_f32(pg, p, add ? svadd_f32_x(pg, svld1_f32(pg, p), v)
                         : scaled ? svmul_n_f32_x(pg, v, scale) : v);
}

/* The inverse of sve_rows_to_blocks: rows x and y (y NULL: not stored). */
static ALWAYS_INLINE void sve_blocks_to_rows(float *x, float *y, size_t n, svfloat32_t b0,
                                             svfloat32_t b1, svfloat32_t b2, svfloat32_t b3,
                                             int add, int scaled, float scale)
{
    const size_t vl = svcntw();
    const svbool_t p0 = sve_lanes(0, n), p1 = sve_lanes(vl, n);
    const svuint64_t u0 = svreinterpret_u64_f32(b0), u1 = svreinterpret_u64_f32(b1);
    const svuint64_t u2 = svreinterpret_u64_f32(b2), u3 = svreinterpret_u64_f32(b3);
    sve_store_row_part(p0, x, svreinterpret_f32_u64(svuzp1_u64(u0, u1)), add, scaled, scale);
    sve_store_row_part(p1, x + vl, svreinterpret_f32_u64(svuzp1_u64(u2, u3)), add, scaled, scale);
    if (y) {
        sve_store_row_part(p0, y, svreinterpret_f32_u64(svuzp2_u64(u0, u1)), add, scaled, scale);
        sve_store_row_part(p1, y + vl, svreinterpret_f32_u64(svuzp2_u64(u2, u3)), add, scaled,
                           scale);
    }
}

#endif /* __ARM_FEATURE_SVE */

#endif /* ATTN_SVE_H */

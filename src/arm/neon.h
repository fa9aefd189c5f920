/* SPDX-License-Identifier: MIT */
/*
 * The NEON module's helpers, for AArch64 builds (NEON is part of the
 * armv8-a baseline). Its kernels and their inits come from
 * src/kernel_list.h; the registry declares the table's init.
 */
#ifndef ATTN_ARM_NEON_H
#define ATTN_ARM_NEON_H

#include <stddef.h>

#include "dsp.h"

#if defined(__ARM_NEON) && defined(__aarch64__) && !defined(__cplusplus)
#include <arm_neon.h>

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The first n (1..3) floats at p, `fill` in the other lanes: tails never
   read past the row. */
static ALWAYS_INLINE float32x4_t load_part(const float *p, size_t n, float fill)
{
    float32x4_t v = vld1q_lane_f32(p, vdupq_n_f32(fill), 0);
    if (n > 1)
        v = vld1q_lane_f32(p + 1, v, 1);
    if (n > 2)
        v = vld1q_lane_f32(p + 2, v, 2);
    return v;
}

/* Stores the first n (1..3) lanes of v at p. */
static ALWAYS_INLINE void store_part(float *p, float32x4_t v, size_t n)
{
    vst1q_lane_f32(p, v, 0);
    if (n > 1)
        vst1q_lane_f32(p + 1, v, 1);
    if (n > 2)
        vst1q_lane_f32(p + 2, v, 2);
}

/* Columns of a 4 x 4 matrix of 32-bit lanes, in place (the int8 dot file's
   panel transposes). */
static ALWAYS_INLINE void transpose4(uint32x4_t *r)
{
    const uint64x2_t t0 = vreinterpretq_u64_u32(vtrn1q_u32(r[0], r[1]));
    const uint64x2_t t1 = vreinterpretq_u64_u32(vtrn2q_u32(r[0], r[1]));
    const uint64x2_t t2 = vreinterpretq_u64_u32(vtrn1q_u32(r[2], r[3]));
    const uint64x2_t t3 = vreinterpretq_u64_u32(vtrn2q_u32(r[2], r[3]));
    r[0] = vreinterpretq_u32_u64(vtrn1q_u64(t0, t2));
    r[1] = vreinterpretq_u32_u64(vtrn1q_u64(t1, t3));
    r[2] = vreinterpretq_u32_u64(vtrn2q_u64(t0, t2));
    r[3] = vreinterpretq_u32_u64(vtrn2q_u64(t1, t3));
}

#endif /* helpers */

#endif /* ATTN_ARM_NEON_H */

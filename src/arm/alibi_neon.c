/* SPDX-License-Identifier: MIT */
/*
 * NEON alibi kernel: 4 int32 distances per vector, converted and subtracted
 * with one fused multiply-subtract; the tail runs the scalar formula with
 * fmaf so that every element rounds the same way.
 */
#include <arm_neon.h>
#include <math.h>

#include "dsp.h"

static void attn_alibi_f32_neon(float *x, size_t n, float slope, int64_t pos)
{
    static const int32_t iota[4] = {0, 1, 2, 3};
    const float32x4_t vs = vdupq_n_f32(slope);
    const int32x4_t step = vdupq_n_s32(4);
    int32x4_t d = vsubq_s32(vdupq_n_s32((int32_t)pos), vld1q_s32(iota));
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float32x4_t dist = vcvtq_f32_s32(vabsq_s32(d));
        vst1q_f32(x + j, vfmsq_f32(vld1q_f32(x + j), dist, vs));
        d = vsubq_s32(d, step);
    }
    for (; j < n; j++) {
        const int64_t dj = pos - (int64_t)j;
        x[j] = fmaf(-slope, (float)(dj < 0 ? -dj : dj), x[j]);
    }
}

ATTN_KERNEL_FILE(alibi, neon, neon)

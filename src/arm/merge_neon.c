/* SPDX-License-Identifier: MIT */
/*
 * The NEON merge kernel: y += sum_p w[p] x[p], one FMA per part and element
 * (the tail too, with fmaf), four vectors of y at a time.
 */
#include <arm_neon.h>
#include <math.h>

#include "arm/neon.h"
#include "dsp.h"

static void attn_wsum_f32_neon(float *y, const float *const *x, const float *w, size_t parts,
                               size_t n)
{
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        float32x4_t a0 = vld1q_f32(y + j), a1 = vld1q_f32(y + j + 4);
        float32x4_t a2 = vld1q_f32(y + j + 8), a3 = vld1q_f32(y + j + 12);
        for (size_t p = 0; p < parts; p++) {
            const float32x4_t vw = vdupq_n_f32(w[p]);
            const float *xp = x[p] + j;
            a0 = vfmaq_f32(a0, vw, vld1q_f32(xp));
            a1 = vfmaq_f32(a1, vw, vld1q_f32(xp + 4));
            a2 = vfmaq_f32(a2, vw, vld1q_f32(xp + 8));
            a3 = vfmaq_f32(a3, vw, vld1q_f32(xp + 12));
        }
        vst1q_f32(y + j, a0);
        vst1q_f32(y + j + 4, a1);
        vst1q_f32(y + j + 8, a2);
        vst1q_f32(y + j + 12, a3);
    }
    for (; j + 4 <= n; j += 4) {
        float32x4_t a = vld1q_f32(y + j);
        for (size_t p = 0; p < parts; p++)
            a = vfmaq_f32(a, vdupq_n_f32(w[p]), vld1q_f32(x[p] + j));
        vst1q_f32(y + j, a);
    }
    for (; j < n; j++) {
        float a = y[j];
        for (size_t p = 0; p < parts; p++)
            a = fmaf(w[p], x[p][j], a);
        y[j] = a;
    }
}

ATTN_KERNEL_FILE(merge, neon, neon)

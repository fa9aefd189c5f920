/* The NEON merge kernel: y += a * x, one FMA per element, scalar tail. */
#include <arm_neon.h>
#include <math.h>

#include "arm/arm.h"
#include "dsp.h"

static void attn_axpy_f32_neon(float *y, const float *x, size_t n, float a)
{
    const float32x4_t va = vdupq_n_f32(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
        vst1q_f32(y + i + 4, vfmaq_f32(vld1q_f32(y + i + 4), va, vld1q_f32(x + i + 4)));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
    for (; i < n; i++) /* fused like the vector lanes */
        y[i] = fmaf(a, x[i], y[i]);
}

void attn_dsp_init_merge_neon(attn_dsp *t)
{
    t->axpy = attn_axpy_f32_neon;
}

/* SPDX-License-Identifier: MIT */
/* The NEON merge kernel: src/merge_tmpl.h on 4-lane vectors; the tail a
   vector, then an element, at a time (fmaf: one FMA per part there too). */
#include <arm_neon.h>
#include <math.h>

#include "arm/neon.h"
#include "dsp.h"

typedef float32x4_t mg_vf;
#define MG_KERNEL attn_wsum_f32_neon
#define MG_LANES 4
#define mg_load(p) vld1q_f32(p)
#define mg_store(p, a) vst1q_f32(p, a)
#define mg_set1(x) vdupq_n_f32(x)
#define mg_fma(a, b, c) vfmaq_f32(c, a, b)

static inline void mg_tail(float *y, const float *const *x, const float *w, size_t parts,
                           size_t n, size_t j)
{
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

#include "merge_tmpl.h"

ATTN_KERNEL_FILE(merge, neon, neon)

/* SPDX-License-Identifier: MIT */
/*
 * The SVE merge kernel: y += sum_p w[p] x[p], one fused multiply-add per
 * part and element, vector-length-agnostic: predicated loads and stores, so
 * the tail needs no scalar code and nothing past n is touched.
 */
#include <arm_sve.h>

#include "arm/sve.h"
#include "dsp.h"

static void attn_wsum_f32_sve(float *y, const float *const *x, const float *w, size_t parts,
                              size_t n)
{
    const size_t vl = svcntw();
    for (size_t j = 0; j < n; j += vl) {
        const svbool_t pg = sve_lanes(j, n);
        svfloat32_t acc = svld1_f32(pg, y + j);
        for (size_t p = 0; p < parts; p++)
            acc = svmla_n_f32_m(pg, acc, svld1_f32(pg, x[p] + j), w[p]);
        svst1_f32(pg, y + j, acc);
    }
}

ATTN_KERNEL_FILE(merge, sve, sve)

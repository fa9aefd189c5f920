/* SPDX-License-Identifier: MIT */
/*
 * SVE alibi kernel, vector-length-agnostic: svcntw() int32 distances per
 * vector (index pos, pos - 1, ...), converted and subtracted with one fused
 * multiply-subtract; every load and store is predicated by svwhilelt, so
 * the tail needs no scalar code and nothing past element n is touched.
 */
#include <arm_sve.h>

#include "dsp.h"

static void attn_alibi_f32_sve(float *x, size_t n, float slope, int64_t pos)
{
    const svfloat32_t vs = svdup_n_f32(slope);
    const int32_t vl = (int32_t)svcntw();
    /* lanes past n may wrap around; the predicate keeps them out of memory */
    svint32_t d = svindex_s32((int32_t)pos, -1);
    for (size_t j = 0; j < n; j += (size_t)vl) {
        const svbool_t pg = svwhilelt_b32_u64((uint64_t)j, (uint64_t)n);
        const svfloat32_t dist = svcvt_f32_s32_x(pg, svabs_s32_x(pg, d));
        svst1_f32(pg, x + j, svmls_f32_x(pg, svld1_f32(pg, x + j), dist, vs));
        d = svsub_n_s32_x(svptrue_b32(), d, vl);
    }
}

ATTN_KERNEL_FILE(alibi, sve, sve)

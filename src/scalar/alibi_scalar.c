/* SPDX-License-Identifier: MIT */
/* The oracle of the alibi slot: the distance in integers, then one multiply
   and one subtraction (no contraction: this file builds with
   -ffp-contract=off like every scalar kernel). */
#include "dsp.h"

static void attn_alibi_f32_scalar(float *x, size_t n, float slope, int64_t pos)
{
    for (size_t j = 0; j < n; j++) {
        const int64_t d = pos - (int64_t)j;
        x[j] -= slope * (float)(d < 0 ? -d : d);
    }
}

ATTN_KERNEL_FILE(alibi, scalar, scalar)

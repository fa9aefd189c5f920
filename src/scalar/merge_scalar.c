/* SPDX-License-Identifier: MIT */
/*
 * The scalar merge kernel (the oracle of the wsum slot). Built with
 * -ffp-contract=off like the other scalar kernels: per part a multiply then
 * an add, two roundings, the same in every build.
 */
#include "dsp.h"
#include "dsp.h"

static void attn_wsum_f32_scalar(float *y, const float *const *x, const float *w, size_t parts,
                                 size_t n)
{
    for (size_t j = 0; j < n; j++) {
        float acc = y[j];
        for (size_t p = 0; p < parts; p++)
            acc += w[p] * x[p][j];
        y[j] = acc;
    }
}

ATTN_KERNEL_FILE(merge, scalar, scalar)

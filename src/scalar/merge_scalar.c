/*
 * The scalar merge kernel (the oracle of the axpy slot). Built with
 * -ffp-contract=off like the other scalar kernels: a multiply then an add,
 * two roundings, the same in every build.
 */
#include "dsp.h"

static void attn_axpy_f32_scalar(float *y, const float *x, size_t n, float a)
{
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

void attn_dsp_init_merge_scalar(attn_dsp *t)
{
    t->axpy = attn_axpy_f32_scalar;
}

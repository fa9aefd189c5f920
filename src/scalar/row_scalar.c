/* SPDX-License-Identifier: MIT */
/*
 * Scalar row kernels and the scalar table's init: the fallback on every CPU
 * and the oracle every SIMD kernel is tested against. Built with
 * -ffp-contract=off so the compiler cannot fuse multiply-adds differently
 * from one build to the next; exp/log/tanh come from libm, so the oracle
 * shares no math code with the SIMD kernels (SLEEF).
 */
#include <math.h>

#include "dsp.h"

static float attn_row_max_f32_scalar(const float *x, size_t n)
{
    float m = x[0];
    int any_nan = 0;
    for (size_t i = 0; i < n; i++) {
        m = x[i] > m ? x[i] : m;
        any_nan |= isnan(x[i]);
    }
    return any_nan ? NAN : m;
}

static float attn_exp_sum_f32_scalar(float *x, size_t n, float max, float *weighted)
{
    float sum = 0.0f, wsum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float shifted = x[i] - max;
        float e = expf(shifted);
        x[i] = e;
        sum += e;
        if (e != 0.0f) /* -inf entries (e == 0) must not give 0 * -inf */
            wsum += e * shifted;
    }
    if (weighted)
        *weighted = wsum;
    return sum;
}

static void attn_row_scale_f32_scalar(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

static void attn_softcap_f32_scalar(float *x, size_t n, float cap)
{
    float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++)
        x[i] = cap * tanhf(x[i] * inv);
}

static void attn_add_bias_f32_scalar(float *x, const float *bias, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += bias[i];
}

static void attn_mask_bool_f32_scalar(float *x, const uint8_t *mask, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!mask[i])
            x[i] = -INFINITY;
}

static void attn_softmax_bwd_f32_scalar(const float *p, const float *dp, float *ds, size_t n)
{
    float dot = 0.0f;
    for (size_t i = 0; i < n; i++)
        dot += p[i] * dp[i];
    for (size_t i = 0; i < n; i++)
        ds[i] = p[i] * (dp[i] - dot);
}

ATTN_KERNEL_FILE(row, scalar, scalar)
ATTN_ISA_INIT(scalar, scalar)

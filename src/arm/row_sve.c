/* SPDX-License-Identifier: MIT */
/*
 * SVE row kernels and the SVE table's init. Loops are predicated by
 * svwhilelt: nothing past element n is read or written, and inactive lanes
 * never enter a sum or a maximum (merging _m forms).
 *
 * exp: the NEON exp4's operations in its order (src/arm/row_neon.c). Not
 * FEXPA: it gives only 2^(i/64), and the polynomial around it would be a new
 * one, unvalidated against tests/tolerance.h's 1-ulp bound. tanh is SLEEF's.
 */
#include <arm_sve.h>
#include <math.h>
#include <sleef.h>

#include "dsp.h"
#include "arm/sve.h"
#include "exp_constants.h"

/* ------------------------------------------------------------------ exp */

/* exp(x) for the active lanes of pg. */
static ALWAYS_INLINE svfloat32_t exp_sve(svbool_t pg, svfloat32_t x)
{
    const svfloat32_t magic = svdup_n_f32(ATTN_EXP_ROUND_MAGIC);
    x = svmin_n_f32_x(pg, svmax_n_f32_x(pg, x, -104.0f), 89.0f);
    const svfloat32_t k = svmla_n_f32_x(pg, magic, x, ATTN_EXP_LOG2E);
    const svfloat32_t n = svsub_f32_x(pg, k, magic);
    svfloat32_t r = svmla_n_f32_x(pg, x, n, -0x1.62e43p-1f); /* ln2 hi */
    r = svmla_n_f32_x(pg, r, n, 0x1.05c61p-29f);              /* -(ln2 lo) */
    svfloat32_t p = svdup_n_f32(ATTN_EXP_C6);
    p = svmla_f32_x(pg, svdup_n_f32(ATTN_EXP_C5), p, r);
    p = svmla_f32_x(pg, svdup_n_f32(ATTN_EXP_C4), p, r);
    p = svmla_f32_x(pg, svdup_n_f32(ATTN_EXP_C3), p, r);
    p = svmla_f32_x(pg, svdup_n_f32(ATTN_EXP_C2), p, r);
    const svfloat32_t r2 = svmul_f32_x(pg, r, r);
    const svfloat32_t y = svadd_n_f32_x(pg, svmla_f32_x(pg, r, p, r2), 1.0f);
    /* n in [-150, 128]: split as n1 + n2, both exponents of normal floats */
    const svint32_t ni =
        svsub_s32_x(pg, svreinterpret_s32_f32(k), svreinterpret_s32_f32(magic));
    const svint32_t n1 = svasr_n_s32_x(pg, ni, 1);
    const svint32_t n2 = svsub_s32_x(pg, ni, n1);
    const svfloat32_t s1 = svreinterpret_f32_s32(svlsl_n_s32_x(pg, svadd_n_s32_x(pg, n1, 127), 23));
    const svfloat32_t s2 = svreinterpret_f32_s32(svlsl_n_s32_x(pg, svadd_n_s32_x(pg, n2, 127), 23));
    return svmul_f32_x(pg, svmul_f32_x(pg, y, s1), s2);
}

/* ------------------------------------------------------------------ row kernels */

static float attn_row_max_f32_sve(const float *x, size_t n)
{
    /* FMAX and FMAXV return NaN when an operand is NaN, as dsp.h requires */
    const size_t vl = svcntw();
    svfloat32_t m0 = svdup_n_f32(-INFINITY), m1 = m0;
    size_t i = 0;
    for (; i < n; i += 2 * vl) {
        const svbool_t p0 = sve_lanes(i, n), p1 = sve_lanes(i + vl, n);
        m0 = svmax_f32_m(p0, m0, svld1_f32(p0, x + i));
        m1 = svmax_f32_m(p1, m1, svld1_f32(p1, x + i + vl));
    }
    return svmaxv_f32(svptrue_b32(), svmax_f32_x(svptrue_b32(), m0, m1));
}

/* sum += e; when weighted, wsum += e * d except where e == 0 (d = -inf). */
static ALWAYS_INLINE void exp_accumulate(svbool_t pg, svfloat32_t e, svfloat32_t d,
                                         int weighted, svfloat32_t *sum, svfloat32_t *wsum)
{
    *sum = svadd_f32_m(pg, *sum, e);
    if (weighted) {
        const svbool_t nonzero = svcmpne_n_f32(pg, e, 0.0f);
        *wsum = svadd_f32_m(nonzero, *wsum, svmul_f32_x(nonzero, e, d));
    }
}

/* independent exp chains keep the FMA pipes busy */
static ALWAYS_INLINE float exp_sum_body(float *x, size_t n, float max, float *weighted)
{
    const int want_weighted = weighted != NULL;
    const size_t vl = svcntw();
    const svfloat32_t zero = svdup_n_f32(0.0f);
    svfloat32_t s0 = zero, s1 = zero, w0 = zero, w1 = zero;
    for (size_t i = 0; i < n; i += 2 * vl) {
        const svbool_t p0 = sve_lanes(i, n), p1 = sve_lanes(i + vl, n);
        const svfloat32_t d0 = svsub_n_f32_x(p0, svld1_f32(p0, x + i), max);
        const svfloat32_t d1 = svsub_n_f32_x(p1, svld1_f32(p1, x + i + vl), max);
        const svfloat32_t e0 = exp_sve(p0, d0), e1 = exp_sve(p1, d1);
        svst1_f32(p0, x + i, e0);
        svst1_f32(p1, x + i + vl, e1);
        exp_accumulate(p0, e0, d0, want_weighted, &s0, &w0);
        exp_accumulate(p1, e1, d1, want_weighted, &s1, &w1);
    }
    const svbool_t all = svptrue_b32();
    if (want_weighted)
        *weighted = svaddv_f32(all, svadd_f32_x(all, w0, w1));
    return svaddv_f32(all, svadd_f32_x(all, s0, s1));
}

static float attn_exp_sum_f32_sve(float *x, size_t n, float max, float *weighted)
{
    /* two instances so that the common path carries no weighted work */
    if (weighted)
        return exp_sum_body(x, n, max, weighted);
    return exp_sum_body(x, n, max, NULL);
}

static void attn_row_scale_f32_sve(float *x, size_t n, float s)
{
    const size_t vl = svcntw();
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = sve_lanes(i, n);
        svst1_f32(pg, x + i, svmul_n_f32_x(pg, svld1_f32(pg, x + i), s));
    }
}

static void attn_softcap_f32_sve(float *x, size_t n, float cap)
{
    /* the scalar kernel's operations; inactive lanes hold +0.0, never stored */
    const float inv = 1.0f / cap;
    const size_t vl = svcntw();
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = sve_lanes(i, n);
        const svfloat32_t t = Sleef_tanhfx_u10sve(svmul_n_f32_z(pg, svld1_f32(pg, x + i), inv));
        svst1_f32(pg, x + i, svmul_n_f32_x(pg, t, cap));
    }
}

static void attn_add_bias_f32_sve(float *x, const float *bias, size_t n)
{
    const size_t vl = svcntw();
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = sve_lanes(i, n);
        svst1_f32(pg, x + i, svadd_f32_x(pg, svld1_f32(pg, x + i), svld1_f32(pg, bias + i)));
    }
}

static void attn_mask_bool_f32_sve(float *x, const uint8_t *mask, size_t n)
{
    /* visible elements are not even rewritten */
    const svfloat32_t ninf = svdup_n_f32(-INFINITY);
    const size_t vl = svcntw();
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = sve_lanes(i, n);
        const svbool_t hidden = svcmpeq_n_u32(pg, svld1ub_u32(pg, mask + i), 0);
        svst1_f32(hidden, x + i, ninf);
    }
}

static void attn_softmax_bwd_f32_sve(const float *p, const float *dp, float *ds, size_t n)
{
    const size_t vl = svcntw();
    svfloat32_t a0 = svdup_n_f32(0.0f), a1 = a0;
    for (size_t i = 0; i < n; i += 2 * vl) {
        const svbool_t p0 = sve_lanes(i, n), p1 = sve_lanes(i + vl, n);
        a0 = svmla_f32_m(p0, a0, svld1_f32(p0, p + i), svld1_f32(p0, dp + i));
        a1 = svmla_f32_m(p1, a1, svld1_f32(p1, p + i + vl), svld1_f32(p1, dp + i + vl));
    }
    const svbool_t all = svptrue_b32();
    const float dot = svaddv_f32(all, svadd_f32_x(all, a0, a1));
    /* element-wise: ds may alias p or dp */
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = sve_lanes(i, n);
        const svfloat32_t pv = svld1_f32(pg, p + i);
        const svfloat32_t dpv = svld1_f32(pg, dp + i);
        svst1_f32(pg, ds + i, svmul_f32_x(pg, pv, svsub_n_f32_x(pg, dpv, dot)));
    }
}

ATTN_KERNEL_FILE(row, sve, sve)
ATTN_ISA_INIT(sve, sve)

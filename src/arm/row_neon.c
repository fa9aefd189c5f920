/* SPDX-License-Identifier: MIT */
/*
 * NEON row kernels and the NEON table's init. Tails go lane by lane:
 * nothing past element n is touched.
 *
 * exp is an inline polynomial, not SLEEF: SLEEF's out-of-line call clobbers
 * every vector register but the low halves of v8-v15 (AAPCS64), spilling
 * the loop's sums and constants per 4 floats. It shares src/exp_constants.h's
 * polynomial but splits ln2 its own way, so it is not bit-identical to
 * AVX2's; tests/tolerance.h's 1-ulp exp bound holds (bench/exp_accuracy.c,
 * under qemu at a stride: docs/CROSS_TESTING.md §3). tanh (softcap only)
 * is SLEEF's.
 */
#include <arm_neon.h>
#include <math.h>
#include <sleef.h>

#include "dsp.h"
#include "arm/neon.h"
#include "exp_constants.h"

/* ------------------------------------------------------------------ exp */

/*
 * As the AVX2 full path (src/x86/row_avx2.c): x clamped to [-104, 89]
 * (exp(-104) rounds to +0, exp(89) overflows; fmax/fmin pass a NaN), 2^n as
 * two factors 2^(n/2) so that subnormal results round once, like libm's.
 */
static ALWAYS_INLINE float32x4_t exp4(float32x4_t x)
{
    const float32x4_t magic = vdupq_n_f32(ATTN_EXP_ROUND_MAGIC);
    x = vminq_f32(vdupq_n_f32(89.0f), vmaxq_f32(vdupq_n_f32(-104.0f), x));
    float32x4_t k = vfmaq_f32(magic, x, vdupq_n_f32(ATTN_EXP_LOG2E));
    float32x4_t n = vsubq_f32(k, magic);
    float32x4_t r = vfmaq_f32(x, n, vdupq_n_f32(-0x1.62e43p-1f));   /* ln2 hi */
    r = vfmaq_f32(r, n, vdupq_n_f32(0x1.05c61p-29f));                /* -(ln2 lo) */
    float32x4_t p = vdupq_n_f32(ATTN_EXP_C6);
    p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C5), p, r);
    p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C4), p, r);
    p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C3), p, r);
    p = vfmaq_f32(vdupq_n_f32(ATTN_EXP_C2), p, r);
    float32x4_t r2 = vmulq_f32(r, r);
    float32x4_t y = vaddq_f32(vfmaq_f32(r, p, r2), vdupq_n_f32(1.0f));
    /* n in [-150, 128]: split as n1 + n2, both exponents of normal floats */
    int32x4_t ni = vsubq_s32(vreinterpretq_s32_f32(k), vreinterpretq_s32_f32(magic));
    int32x4_t n1 = vshrq_n_s32(ni, 1);
    int32x4_t n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(y, s1), s2);
}

/* ------------------------------------------------------------------ row kernels */

static float attn_row_max_f32_neon(const float *x, size_t n)
{
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    float32x4_t m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = vmaxq_f32(m0, vld1q_f32(x + i));
        m1 = vmaxq_f32(m1, vld1q_f32(x + i + 4));
        m2 = vmaxq_f32(m2, vld1q_f32(x + i + 8));
        m3 = vmaxq_f32(m3, vld1q_f32(x + i + 12));
    }
    for (; i + 4 <= n; i += 4)
        m0 = vmaxq_f32(m0, vld1q_f32(x + i));
    if (i < n)
        m1 = vmaxq_f32(m1, load_part(x + i, n - i, -INFINITY));
    return vmaxvq_f32(vmaxq_f32(vmaxq_f32(m0, m1), vmaxq_f32(m2, m3)));
}

/* sum += e; and when weighted, wsum += e * d except where e == 0 (d = -inf). */
static ALWAYS_INLINE void exp_accumulate(float32x4_t e, float32x4_t d, int weighted,
                                         float32x4_t *sum, float32x4_t *wsum)
{
    *sum = vaddq_f32(*sum, e);
    if (weighted) {
        uint32x4_t zero_e = vceqq_f32(e, vdupq_n_f32(0.0f));
        float32x4_t ed = vmulq_f32(e, d);
        *wsum = vaddq_f32(*wsum, vreinterpretq_f32_u32(
                                     vbicq_u32(vreinterpretq_u32_f32(ed), zero_e)));
    }
}

/* four independent exp chains keep the FMA pipes busy */
static ALWAYS_INLINE float exp_sum_body(float *x, size_t n, float max, float *weighted)
{
    const int want_weighted = weighted != NULL;
    const float32x4_t vmax = vdupq_n_f32(max);
    const float32x4_t zero = vdupq_n_f32(0.0f);
    float32x4_t s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    float32x4_t w0 = zero, w1 = zero, w2 = zero, w3 = zero;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t d0 = vsubq_f32(vld1q_f32(x + i), vmax);
        float32x4_t d1 = vsubq_f32(vld1q_f32(x + i + 4), vmax);
        float32x4_t d2 = vsubq_f32(vld1q_f32(x + i + 8), vmax);
        float32x4_t d3 = vsubq_f32(vld1q_f32(x + i + 12), vmax);
        float32x4_t e0 = exp4(d0), e1 = exp4(d1), e2 = exp4(d2), e3 = exp4(d3);
        vst1q_f32(x + i, e0);
        vst1q_f32(x + i + 4, e1);
        vst1q_f32(x + i + 8, e2);
        vst1q_f32(x + i + 12, e3);
        exp_accumulate(e0, d0, want_weighted, &s0, &w0);
        exp_accumulate(e1, d1, want_weighted, &s1, &w1);
        exp_accumulate(e2, d2, want_weighted, &s2, &w2);
        exp_accumulate(e3, d3, want_weighted, &s3, &w3);
    }
    for (; i + 4 <= n; i += 4) {
        float32x4_t d = vsubq_f32(vld1q_f32(x + i), vmax);
        float32x4_t e = exp4(d);
        vst1q_f32(x + i, e);
        exp_accumulate(e, d, want_weighted, &s0, &w0);
    }
    if (i < n) {
        /* -inf in the missing lanes: exp gives 0, which adds nothing */
        float32x4_t d = vsubq_f32(load_part(x + i, n - i, -INFINITY), vmax);
        float32x4_t e = exp4(d);
        store_part(x + i, e, n - i);
        exp_accumulate(e, d, want_weighted, &s1, &w1);
    }
    if (want_weighted)
        *weighted = vaddvq_f32(vaddq_f32(vaddq_f32(w0, w1), vaddq_f32(w2, w3)));
    return vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
}

static float attn_exp_sum_f32_neon(float *x, size_t n, float max, float *weighted)
{
    /* two instances so that the common path carries no weighted work */
    if (weighted)
        return exp_sum_body(x, n, max, weighted);
    return exp_sum_body(x, n, max, NULL);
}

static void attn_row_scale_f32_neon(float *x, size_t n, float s)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
        vst1q_f32(x + i + 4, vmulq_n_f32(vld1q_f32(x + i + 4), s));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
    if (i < n)
        store_part(x + i, vmulq_n_f32(load_part(x + i, n - i, 0.0f), s), n - i);
}

static void attn_softcap_f32_neon(float *x, size_t n, float cap)
{
    /* the scalar kernel's operations: cap * tanh(x * (1 / cap)) */
    const float32x4_t vinv = vdupq_n_f32(1.0f / cap);
    const float32x4_t vcap = vdupq_n_f32(cap);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t t = Sleef_tanhf4_u10advsimd(vmulq_f32(vld1q_f32(x + i), vinv));
        vst1q_f32(x + i, vmulq_f32(vcap, t));
    }
    if (i < n) {
        float32x4_t t = Sleef_tanhf4_u10advsimd(vmulq_f32(load_part(x + i, n - i, 0.0f), vinv));
        store_part(x + i, vmulq_f32(vcap, t), n - i);
    }
}

static void attn_add_bias_f32_neon(float *x, const float *bias, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(x + i, vaddq_f32(vld1q_f32(x + i), vld1q_f32(bias + i)));
        vst1q_f32(x + i + 4, vaddq_f32(vld1q_f32(x + i + 4), vld1q_f32(bias + i + 4)));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(x + i, vaddq_f32(vld1q_f32(x + i), vld1q_f32(bias + i)));
    if (i < n)
        store_part(x + i,
                   vaddq_f32(load_part(x + i, n - i, 0.0f), load_part(bias + i, n - i, 0.0f)),
                   n - i);
}

static void attn_mask_bool_f32_neon(float *x, const uint8_t *mask, size_t n)
{
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        /* 0xff per hidden byte, sign-extended to 32-bit lane masks */
        int16x8_t hidden = vmovl_s8(vreinterpret_s8_u8(vceqz_u8(vld1_u8(mask + i))));
        uint32x4_t lo = vreinterpretq_u32_s32(vmovl_s16(vget_low_s16(hidden)));
        uint32x4_t hi = vreinterpretq_u32_s32(vmovl_high_s16(hidden));
        vst1q_f32(x + i, vbslq_f32(lo, ninf, vld1q_f32(x + i)));
        vst1q_f32(x + i + 4, vbslq_f32(hi, ninf, vld1q_f32(x + i + 4)));
    }
    for (; i < n; i++)
        if (!mask[i])
            x[i] = -INFINITY;
}

static void attn_softmax_bwd_f32_neon(const float *p, const float *dp, float *ds, size_t n)
{
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 = vfmaq_f32(a0, vld1q_f32(p + i), vld1q_f32(dp + i));
        a1 = vfmaq_f32(a1, vld1q_f32(p + i + 4), vld1q_f32(dp + i + 4));
    }
    for (; i + 4 <= n; i += 4)
        a0 = vfmaq_f32(a0, vld1q_f32(p + i), vld1q_f32(dp + i));
    if (i < n)
        a1 = vfmaq_f32(a1, load_part(p + i, n - i, 0.0f), load_part(dp + i, n - i, 0.0f));
    const float32x4_t dot = vdupq_n_f32(vaddvq_f32(vaddq_f32(a0, a1)));
    /* element-wise: ds may alias p or dp */
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(ds + i, vmulq_f32(vld1q_f32(p + i), vsubq_f32(vld1q_f32(dp + i), dot)));
    if (i < n) {
        float32x4_t pv = load_part(p + i, n - i, 0.0f);
        float32x4_t dpv = load_part(dp + i, n - i, 0.0f);
        store_part(ds + i, vmulq_f32(pv, vsubq_f32(dpv, dot)), n - i);
    }
}

ATTN_KERNEL_FILE(row, neon, neon)
ATTN_ISA_INIT(neon, neon)

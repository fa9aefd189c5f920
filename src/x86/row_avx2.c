/* SPDX-License-Identifier: MIT */
/*
 * AVX2+FMA row kernels and the AVX2 table's init.
 *
 * exp is an inline polynomial, not SLEEF: Debian's SLEEF ships no inline
 * headers, and an out-of-line call per 8 floats clobbers every ymm register
 * (SysV ABI) (docs/PERFORMANCE.md). tanh (softcap only) stays SLEEF.
 */
#include <math.h>
#include <sleef.h>

#include "exp_constants.h"
#include "x86/avx2.h"

static ALWAYS_INLINE float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static ALWAYS_INLINE float hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* ------------------------------------------------------------------ exp */

/*
 * The reduction and polynomial: src/exp_constants.h (1 ulp on both paths).
 * Fast path, every lane in [EXP_FAST_LO, EXP_FAST_HI]: n in [-126, 127] is
 * added to the exponent field directly; k = x log2(e) + 1.5*2^23 holds n in
 * its low bits and the constant's bits are 0 below bit 9, so k << 23 ==
 * n << 23. Full path: x clamped to [-104, 89] (max/min return their second
 * operand for a NaN, so a NaN passes), and 2^n applied as two factors
 * 2^(n/2) so that subnormal results round once, as libm's do.
 */
#define EXP_FAST_LO -87.0f
#define EXP_FAST_HI 88.0f

static ALWAYS_INLINE __m256 exp_poly(__m256 x, __m256 *k_out)
{
    const __m256 magic = _mm256_set1_ps(ATTN_EXP_ROUND_MAGIC);
    __m256 k = _mm256_fmadd_ps(x, _mm256_set1_ps(ATTN_EXP_LOG2E), magic);
    __m256 n = _mm256_sub_ps(k, magic);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ATTN_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ATTN_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(ATTN_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    *k_out = k;
    return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

static ALWAYS_INLINE __m256 exp8_fast(__m256 x)
{
    __m256 k;
    __m256 y = exp_poly(x, &k);
    __m256i scale = _mm256_slli_epi32(_mm256_castps_si256(k), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y), scale));
}

static ALWAYS_INLINE __m256 exp8_full(__m256 x)
{
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    __m256 k;
    __m256 y = exp_poly(x, &k);
    /* n in [-150, 128]: n = n1 + n2, each a normal float's exponent */
    __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_set1_epi32(0x4b400000));
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
}

static ALWAYS_INLINE int exp_needs_full(__m256 x)
{
    __m256 in = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(EXP_FAST_LO), _CMP_GE_OQ),
                              _mm256_cmp_ps(x, _mm256_set1_ps(EXP_FAST_HI), _CMP_LE_OQ));
    return _mm256_movemask_ps(in) != 0xff;
}

static ALWAYS_INLINE __m256 exp8(__m256 x)
{
    return exp_needs_full(x) ? exp8_full(x) : exp8_fast(x);
}

/* ------------------------------------------------------------------ row kernels */

/* vmaxps alone would drop a NaN, and a NaN row would look fully masked. */
static float attn_row_max_f32_avx2(const float *x, size_t n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf, nan = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        __m256 c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
        m0 = _mm256_max_ps(m0, a);
        m1 = _mm256_max_ps(m1, b);
        m2 = _mm256_max_ps(m2, c);
        m3 = _mm256_max_ps(m3, d);
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q),
                                             _mm256_cmp_ps(c, d, _CMP_UNORD_Q)));
    }
    for (; i < n; i += 8) {
        __m256i m = first_lanes(n - i < 8 ? n - i : 8);
        __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m));
        m0 = _mm256_max_ps(m0, v);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan))
        return NAN;
    return hmax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
}

/* Out of line, so that the fast loop keeps its constants and accumulators
   in registers. */
static __attribute__((noinline)) __m256 exp8_full_outlined(__m256 x) { return exp8_full(x); }

/* e * d with the e == 0 lanes (from d = -inf) giving 0, not 0 * -inf = NaN. */
static ALWAYS_INLINE __m256 weighted_term(__m256 e, __m256 d)
{
    return _mm256_and_ps(_mm256_mul_ps(e, d), _mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NEQ_UQ));
}

/* Two vectors per iteration into one accumulator: one add per iteration on
   the loop-carried chain. */
static ALWAYS_INLINE float exp_sum_body(float *x, size_t n, float max, float *weighted)
{
    const __m256 vmax = _mm256_set1_ps(max);
    const __m256 fast_lo = _mm256_set1_ps(EXP_FAST_LO);
    __m256 sum = _mm256_setzero_ps(), wsum = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmax);
        __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmax);
        /* d <= 0 unless NaN: one lower-bound compare per vector */
        __m256 slow = _mm256_or_ps(_mm256_cmp_ps(d0, fast_lo, _CMP_NGE_UQ),
                                   _mm256_cmp_ps(d1, fast_lo, _CMP_NGE_UQ));
        __m256 e0, e1;
        if (__builtin_expect(_mm256_movemask_ps(slow) != 0, 0)) {
            e0 = exp8_full_outlined(d0);
            e1 = exp8_full_outlined(d1);
            if (weighted)
                wsum = _mm256_add_ps(wsum, _mm256_add_ps(weighted_term(e0, d0),
                                                         weighted_term(e1, d1)));
        } else {
            e0 = exp8_fast(d0);
            e1 = exp8_fast(d1);
            if (weighted) /* every d is finite here */
                wsum = _mm256_add_ps(wsum, _mm256_fmadd_ps(e0, d0, _mm256_mul_ps(e1, d1)));
        }
        _mm256_storeu_ps(x + i, e0);
        _mm256_storeu_ps(x + i + 8, e1);
        sum = _mm256_add_ps(sum, _mm256_add_ps(e0, e1));
    }
    for (; i < n; i += 8) {
        __m256i m = first_lanes(n - i < 8 ? n - i : 8);
        __m256 d = _mm256_sub_ps(_mm256_maskload_ps(x + i, m), vmax);
        __m256 e = _mm256_and_ps(exp8(d), _mm256_castsi256_ps(m));
        _mm256_maskstore_ps(x + i, m, e);
        sum = _mm256_add_ps(sum, e);
        if (weighted)
            wsum = _mm256_add_ps(wsum, weighted_term(e, d));
    }
    if (weighted)
        *weighted = hsum(wsum);
    return hsum(sum);
}

static float attn_exp_sum_f32_avx2(float *x, size_t n, float max, float *weighted)
{
    /* two instances so that the common path carries no weighted work */
    if (weighted)
        return exp_sum_body(x, n, max, weighted);
    return exp_sum_body(x, n, max, NULL);
}

static void attn_row_scale_f32_avx2(float *x, size_t n, float s)
{
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
        _mm256_storeu_ps(x + i + 8, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vs));
    }
    for (; i < n; i += 8) {
        __m256i m = first_lanes(n - i < 8 ? n - i : 8);
        _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vs));
    }
}

static void attn_softcap_f32_avx2(float *x, size_t n, float cap)
{
    /* the scalar kernel's operations: cap * tanh(x * (1 / cap)) */
    const __m256 vinv = _mm256_set1_ps(1.0f / cap);
    const __m256 vcap = _mm256_set1_ps(cap);
    for (size_t i = 0; i < n; i += 8) {
        __m256i m = first_lanes(n - i < 8 ? n - i : 8);
        __m256 t = Sleef_tanhf8_u10avx2(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), vinv));
        _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(vcap, t));
    }
}

static void attn_add_bias_f32_avx2(float *x, const float *bias, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(bias + i)));
    if (i < n) {
        __m256i m = first_lanes(n - i);
        _mm256_maskstore_ps(x + i, m, _mm256_add_ps(_mm256_maskload_ps(x + i, m),
                                                    _mm256_maskload_ps(bias + i, m)));
    }
}

static void attn_mask_bool_f32_avx2(float *x, const uint8_t *mask, size_t n)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i mb = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(mask + i)));
        __m256 hidden = _mm256_castsi256_ps(_mm256_cmpeq_epi32(mb, _mm256_setzero_si256()));
        _mm256_storeu_ps(x + i, _mm256_blendv_ps(_mm256_loadu_ps(x + i), ninf, hidden));
    }
    for (; i < n; i++)
        if (!mask[i])
            x[i] = -INFINITY;
}

static void attn_softmax_bwd_f32_avx2(const float *p, const float *dp, float *ds, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(p + i), _mm256_loadu_ps(dp + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(p + i + 8), _mm256_loadu_ps(dp + i + 8), a1);
    }
    for (; i < n; i += 8) {
        __m256i m = first_lanes(n - i < 8 ? n - i : 8);
        a0 = _mm256_fmadd_ps(_mm256_maskload_ps(p + i, m), _mm256_maskload_ps(dp + i, m), a0);
    }
    const __m256 dot = _mm256_set1_ps(hsum(_mm256_add_ps(a0, a1)));
    /* element-wise: ds may alias p or dp */
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 dpv = _mm256_loadu_ps(dp + i);
        _mm256_storeu_ps(ds + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), _mm256_sub_ps(dpv, dot)));
    }
    if (i < n) {
        __m256i m = first_lanes(n - i);
        __m256 pv = _mm256_maskload_ps(p + i, m);
        __m256 dpv = _mm256_maskload_ps(dp + i, m);
        _mm256_maskstore_ps(ds + i, m, _mm256_mul_ps(pv, _mm256_sub_ps(dpv, dot)));
    }
}

ATTN_KERNEL_FILE(row, avx2, avx2)
ATTN_ISA_INIT(avx2, avx2)

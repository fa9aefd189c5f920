/* SPDX-License-Identifier: MIT */
/* AVX-512 row kernels and the AVX-512 table's init. Masked final vectors:
   nothing past n is read or written. */
#include <math.h>

#include "x86/avx512.h"

/* vmaxps alone would keep or drop a NaN by its position, and a row of -inf
   plus one NaN would look fully masked instead of poisoned. */
static float attn_row_max_f32_avx512(const float *x, size_t n)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    __mmask16 nan = 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
        __m512 x2 = _mm512_loadu_ps(x + i + 32), x3 = _mm512_loadu_ps(x + i + 48);
        m0 = _mm512_max_ps(m0, x0);
        m1 = _mm512_max_ps(m1, x1);
        m2 = _mm512_max_ps(m2, x2);
        m3 = _mm512_max_ps(m3, x3);
        /* an unordered compare of two vectors flags a NaN in either */
        nan |= _mm512_cmp_ps_mask(x0, x1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(x2, x3, _CMP_UNORD_Q);
    }
    for (; i < n; i += 16) {
        __m512 xi = _mm512_mask_loadu_ps(ninf, attn_mask16(n - i < 16 ? n - i : 16), x + i);
        m0 = _mm512_max_ps(m0, xi);
        nan |= _mm512_cmp_ps_mask(xi, xi, _CMP_UNORD_Q);
    }
    float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    return nan ? NAN : m;
}

/*
 * weighted += e * shifted where e != 0: a -inf score gives e = 0 and must
 * not contribute 0 * -inf. NEQ_UQ keeps NaN lanes, as the scalar kernel does.
 */
ATTN_AVX512_INLINE __m512 add_weighted(__m512 w, __m512 e, __m512 shifted)
{
    __mmask16 live = _mm512_cmp_ps_mask(e, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    return _mm512_mask_add_ps(w, live, w, _mm512_mul_ps(e, shifted));
}

ATTN_AVX512_INLINE float exp_sum(float *x, size_t n, float max, float *weighted, int want_weighted)
{
    const __m512 vmax = _mm512_set1_ps(max);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 w0 = _mm512_setzero_ps(), w1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), vmax);
        __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vmax);
        __m512 e0 = attn_exp16(d0);
        __m512 e1 = attn_exp16(d1);
        _mm512_storeu_ps(x + i, e0);
        _mm512_storeu_ps(x + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
        if (want_weighted) {
            w0 = add_weighted(w0, e0, d0);
            w1 = add_weighted(w1, e1, d1);
        }
    }
    for (; i < n; i += 16) {
        /* masked-off lanes load -inf: exp gives 0, adding nothing (max is finite) */
        __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        __m512 d = _mm512_sub_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, x + i), vmax);
        __m512 e = attn_exp16(d);
        _mm512_mask_storeu_ps(x + i, m, e);
        s0 = _mm512_add_ps(s0, e);
        if (want_weighted)
            w0 = add_weighted(w0, e, d);
    }
    if (want_weighted)
        *weighted = _mm512_reduce_add_ps(_mm512_add_ps(w0, w1));
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static float attn_exp_sum_f32_avx512(float *x, size_t n, float max, float *weighted)
{
    if (weighted)
        return exp_sum(x, n, max, weighted, 1);
    return exp_sum(x, n, max, NULL, 0);
}

static void attn_row_scale_f32_avx512(float *x, size_t n, float s)
{
    const __m512 vs = _mm512_set1_ps(s);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
        _mm512_storeu_ps(x + i + 16, _mm512_mul_ps(_mm512_loadu_ps(x + i + 16), vs));
    }
    for (; i < n; i += 16) {
        __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
    }
}

static void attn_softcap_f32_avx512(float *x, size_t n, float cap)
{
    /* x * (1/cap), not x / cap: the same rounding as the scalar kernel */
    const __m512 vinv = _mm512_set1_ps(1.0f / cap);
    const __m512 vcap = _mm512_set1_ps(cap);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        __m512 t = attn_tanh16(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(vcap, t));
    }
}

static void attn_add_bias_f32_avx512(float *x, const float *bias, size_t n)
{
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(x + i, _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(bias + i)));
        _mm512_storeu_ps(x + i + 16, _mm512_add_ps(_mm512_loadu_ps(x + i + 16),
                                                   _mm512_loadu_ps(bias + i + 16)));
    }
    for (; i < n; i += 16) {
        __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        _mm512_mask_storeu_ps(x + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i),
                                                      _mm512_maskz_loadu_ps(m, bias + i)));
    }
}

static void attn_mask_bool_f32_avx512(float *x, const uint8_t *mask, size_t n)
{
    /* Only the hidden positions are written; x is never read. */
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        __m128i b = _mm_maskz_loadu_epi8(m, mask + i);
        __mmask16 hidden = (__mmask16)(_mm_testn_epi8_mask(b, b) & m);
        _mm512_mask_storeu_ps(x + i, hidden, ninf);
    }
}

static void attn_softmax_bwd_f32_avx512(const float *p, const float *dp, float *ds, size_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(p + i), _mm512_loadu_ps(dp + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + i + 16), _mm512_loadu_ps(dp + i + 16), a1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + i), _mm512_maskz_loadu_ps(m, dp + i), a0);
    }
    /* All of p and dp is read before ds is written, so ds may alias either. */
    const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_add_ps(a0, a1)));
    for (i = 0; i < n; i += 16) {
        __mmask16 m = attn_mask16(n - i < 16 ? n - i : 16);
        __m512 pv = _mm512_maskz_loadu_ps(m, p + i);
        __m512 dpv = _mm512_maskz_loadu_ps(m, dp + i);
        _mm512_mask_storeu_ps(ds + i, m, _mm512_mul_ps(pv, _mm512_sub_ps(dpv, dot)));
    }
}

ATTN_KERNEL_FILE(row, avx512, ATTN_AVX512_EXT)
ATTN_ISA_INIT(avx512, ATTN_AVX512_EXT)

/* SPDX-License-Identifier: MIT */
/*
 * The AVX-512 module: its inits (declared for src/isa_list.h) and, for its
 * own files alone (tile_avx512.c, row_avx512.c, alibi_avx512.c,
 * merge_avx512.c, backward_avx512.c, quant_avx512.c), the intrinsics
 * header, the one exp and the one tanh entry point and the horizontal sums
 * (the K/V loads of every dtype are the tile family's:
 * src/x86/tile_avx512_tmpl.h).
 *
 * The same sources build twice:
 *  - normally, with -mavx512f -mavx512bw -mavx512dq -mavx512vl: real EVEX
 *    code, linked into the library and picked by dispatch on AVX-512 CPUs;
 *  - with -DATTN_SIMDE_EMU -mavx2 -mfma -mf16c, against SIMDe: every
 *    _mm512_* becomes AVX2 code, so the kernels' logic (tails, masks,
 *    reductions, numerics) runs in tests on machines without AVX-512. The
 *    emulated objects only go into a test binary, next to the real ones, so
 *    every external name of these files gets an _emu suffix below.
 */
#ifndef ATTN_X86_AVX512_H
#define ATTN_X86_AVX512_H

#include <stddef.h>
#include <stdint.h>

#include "dsp.h"

/* The suffix of the module's external names (its inits; the kernels are
   static): avx512, or avx512_emu in the emulated build (see above). */
#ifdef ATTN_SIMDE_EMU
#define ATTN_AVX512_EXT avx512_emu
#else
#define ATTN_AVX512_EXT avx512
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The same table built against SIMDe (tests/emu only: the harness's
   "avx512-emu" row), from ATTN_ISA_INIT in row_avx512.c. The registry's
   inits are declared by src/isa_list.h. */
void attn_dsp_init_avx512_emu(attn_dsp *t);

#ifdef __cplusplus
}
#endif

/* Helpers: only in the module's own files (AVX-512 flags, or the SIMDe build). */
#if (defined(__AVX512F__) || defined(ATTN_SIMDE_EMU)) && !defined(__cplusplus)
#ifdef ATTN_SIMDE_EMU
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <sleef.h>
#include "simde_compat_avx512.h"
#else
#include <immintrin.h>
#include <sleef.h>
#endif

#include "exp_constants.h"
#include "prefetch.h"

#define ATTN_AVX512_INLINE static inline __attribute__((always_inline))

/* Lanes 0..n-1 set, for n in 0..16. */
ATTN_AVX512_INLINE __mmask16 attn_mask16(size_t n)
{
    return (__mmask16)(0xffffu >> (16 - n));
}

/*
 * exp of 16 lanes, inline: SLEEF 3.5.1 (Debian 12) has no inline headers,
 * and its out-of-line call per vector made exp_sum slower than the AVX2 one
 * (docs/PERFORMANCE.md); this is ~15 instructions per 16 lanes.
 *
 * The algorithm and constants are those of the AVX2 kernels' exp
 * (row_avx2.c): exp(x) = 2^n exp(r), n = round(x log2 e), r = x - n ln2 by
 * a two-constant Cody-Waite step, exp(r) by a degree-6 polynomial. Here 2^n
 * is applied with vscalefps, which rounds once, so the results equal the
 * AVX2 exp's bit for bit, subnormals included: bench/exp_accuracy.c
 * (--same avx2,avx512) fails on any difference over every input exp_sum can
 * receive, and checks both against libm within 1 ulp. x is clamped
 * to [-104, 89] first (exp(-104) rounds to +0, exp(89) to +inf); min/max
 * return their second operand for a NaN, so a NaN passes through.
 */
ATTN_AVX512_INLINE __m512 attn_exp16(__m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 magic = _mm512_set1_ps(ATTN_EXP_ROUND_MAGIC); /* adding it rounds to integer */
    __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(ATTN_EXP_LOG2E), magic), magic);
    /* ln2_hi has 15 significant bits: n ln2_hi and x - n ln2_hi are exact */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_LO), r); /* ln2 - ln2_hi */
    __m512 p = _mm512_set1_ps(ATTN_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/*
 * tanh of 16 lanes (softcap only), SLEEF u10 (<= 1 ulp). The only place the
 * kernels name SLEEF: the emulated build has no EVEX, so it runs the AVX2
 * routine on each half instead.
 */
ATTN_AVX512_INLINE __m512 attn_tanh16(__m512 x)
{
#ifdef ATTN_SIMDE_EMU
    simde__m512_private p = simde__m512_to_private(x);
    p.m256[0] = Sleef_tanhf8_u10avx2(p.m256[0]);
    p.m256[1] = Sleef_tanhf8_u10avx2(p.m256[1]);
    return simde__m512_from_private(p);
#else
    return Sleef_tanhf16_u10avx512f(x);
#endif
}

/* [sum a, sum b, sum c, sum d]: four horizontal sums sharing their shuffles. */
ATTN_AVX512_INLINE __m128 attn_hsum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
    /* per 128-bit chunk: [a0+a2, b0+b2, a1+a3, b1+b3] */
    __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    /* per chunk: [a, b, c, d] partial sums of that chunk */
    __m512 abcd = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm512_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 half = _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm512_extractf32x8_ps(abcd, 1));
    return _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
}

#endif /* helpers */

#endif /* ATTN_X86_AVX512_H */

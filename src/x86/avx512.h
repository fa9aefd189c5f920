/* SPDX-License-Identifier: MIT */
/*
 * The AVX-512 and AMX modules' inits and, for their own files alone, their
 * helpers (the AMX module is AVX-512 code with tile products).
 * The same sources also build with -DATTN_SIMDE_EMU against SIMDe on AVX2,
 * so the kernels' logic runs in tests without AVX-512; those objects sit
 * next to the real ones in a test binary, so every external name gets an
 * _emu suffix.
 */
#ifndef ATTN_X86_AVX512_H
#define ATTN_X86_AVX512_H

#include <stddef.h>
#include <stdint.h>

#include "dsp.h"

/* the kernels are static: only the inits need it */
#ifdef ATTN_SIMDE_EMU
#define ATTN_AVX512_EXT avx512_emu
#define ATTN_AMX_EXT amx_emu
#else
#define ATTN_AVX512_EXT avx512
#define ATTN_AMX_EXT amx
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The SIMDe builds' tables (tests/emu only); the AMX one on
   src/x86/amx_emu.h. */
void attn_dsp_init_avx512_emu(attn_dsp *t);
void attn_dsp_init_amx_emu(attn_dsp *t);

#ifdef __cplusplus
}
#endif

/* Helpers: only in the module's own files. */
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

/* n in 0..16 */
ATTN_AVX512_INLINE __mmask16 attn_mask16(size_t n)
{
    return (__mmask16)(0xffffu >> (16 - n));
}

/*
 * exp inline, not SLEEF, as on AVX2 (src/x86/row_avx2.c), with its
 * constants (src/exp_constants.h) and clamp. 2^n by vscalefps, which rounds
 * once, so the results equal the AVX2 exp's bit for bit, subnormals
 * included (bench/exp_accuracy.c --same avx2,avx512 checks every input).
 */
ATTN_AVX512_INLINE __m512 attn_exp16(__m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 magic = _mm512_set1_ps(ATTN_EXP_ROUND_MAGIC);
    __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(ATTN_EXP_LOG2E), magic), magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ATTN_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(ATTN_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* SLEEF u10 (<= 1 ulp); the emulated build runs the AVX2 routine on each
   half. */
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

/* [sum a, sum b, sum c, sum d], sharing their shuffles */
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

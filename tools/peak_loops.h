/* SPDX-License-Identifier: MIT */
/*
 * The register-only peak loops: the FMA (AVX-512, AVX2+FMA, NEON, scalar)
 * and the dot products of the precision modes (AVX512_BF16 vdpbf16ps,
 * AVX512_VNNI and AVX-VNNI vpdpbusd), one copy for both of their users:
 * `attn run`'s peaks (tools/peak.c, on the pool's threads) and the bench's
 * reference rows (bench/peak.c). Intrinsics in target-attributed
 * functions, not inline asm or build flags, so plain gcc/clang builds them
 * for any x86-64 baseline; call one only where the CPU has its
 * instructions (__builtin_cpu_supports).
 */
#ifndef ATTN_TOOLS_PEAK_LOOPS_H
#define ATTN_TOOLS_PEAK_LOOPS_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PEAK_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define PEAK_NEON 1
#endif

/*
 * Chains: independent accumulators per thread. A chain issues one FMA per
 * latency (4 cycles on Zen 4/5, Sapphire Rapids, Neoverse), so two FMA pipes
 * need 8 in flight and four (Neoverse V1/V2's 128-bit pipes) need 16; 12 is
 * all AVX2's 16 ymm registers allow beside the two operands.
 */
#define CHAINS_WIDE 16 /* 32 vector registers: AVX-512, NEON */
#define CHAINS_AVX2 12

/* `rounds` rounds of `chains` FMAs of `lanes` floats; returns the sum of the
   accumulators, which the caller stores in a volatile so nothing is removed.
   m and a come from the caller (not constants the compiler could fold);
   acc = acc*m + a with m < 1 converges and stays finite and normal. */
typedef float (*fma_loop_fn)(int64_t rounds, float m, float a);

#define REPEAT_16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
                     X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define REPEAT_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* The loop every kind shares, from the INIT(i), STEP(i) and SUM(i) its
   function defines: REPEAT chains started by INIT, `rounds` rounds of STEP,
   then the chains summed by SUM into `s` (type T, from zero). */
#define PEAK_CHAINS(REPEAT, T, zero)                                                        \
    REPEAT(INIT)                                                                            \
    for (int64_t r = 0; r < rounds; r++) {                                                  \
        REPEAT(STEP)                                                                        \
    }                                                                                       \
    T s = zero;                                                                             \
    REPEAT(SUM)

#ifdef PEAK_X86
__attribute__((target("avx512f"))) static inline float fma_loop_avx512(int64_t rounds, float m, float a)
{
    const __m512 vm = _mm512_set1_ps(m), va = _mm512_set1_ps(a);
#define INIT(i) __m512 c##i = _mm512_set1_ps((float)(i) * 0.01f);
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, vm, va);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    PEAK_CHAINS(REPEAT_16, __m512, _mm512_setzero_ps())
#undef INIT
#undef STEP
#undef SUM
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static inline float fma_loop_avx2(int64_t rounds, float m, float a)
{
    const __m256 vm = _mm256_set1_ps(m), va = _mm256_set1_ps(a);
#define INIT(i) __m256 c##i = _mm256_set1_ps((float)(i) * 0.01f);
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, vm, va);
#define SUM(i) s = _mm256_add_ps(s, c##i);
    PEAK_CHAINS(REPEAT_12, __m256, _mm256_setzero_ps())
#undef INIT
#undef STEP
#undef SUM
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

/* vdpbf16ps: per lane two bf16 products added to an f32 (4 flops); x, y
   from the caller, so nothing folds. 16 chains as for the FMA. */
__attribute__((target("avx512f,avx512bf16"))) static inline float bf16_loop_avx512(int64_t rounds,
                                                                             float m, float a)
{
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(a), _mm512_set1_ps(a));
    const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(m), _mm512_set1_ps(m));
#define INIT(i) __m512 c##i = _mm512_set1_ps((float)(i) * 0.01f);
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, x, y);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    PEAK_CHAINS(REPEAT_16, __m512, _mm512_setzero_ps())
#undef INIT
#undef STEP
#undef SUM
    return _mm512_reduce_add_ps(s);
}

/* vpdpbusd: per lane four u8 x s8 products added to an int32 (8 ops). */
__attribute__((target("avx512f,avx512vnni"))) static inline float int8_loop_avx512(int64_t rounds,
                                                                             float m, float a)
{
    const __m512i x = _mm512_set1_epi8((char)(int)(m * 100.0f));
    const __m512i y = _mm512_set1_epi8((char)(int)(a * 1000.0f));
#define INIT(i) __m512i c##i = _mm512_set1_epi32(i);
#define STEP(i) c##i = _mm512_dpbusd_epi32(c##i, x, y);
#define SUM(i) s = _mm512_add_epi32(s, c##i);
    PEAK_CHAINS(REPEAT_16, __m512i, _mm512_setzero_si512())
#undef INIT
#undef STEP
#undef SUM
    return (float)_mm512_reduce_add_epi32(s);
}

/* AVX-VNNI's VEX vpdpbusd (AVX2-class CPUs: Alder Lake; also Sapphire
   Rapids and Zen 5, where the AVX-512 one above is measured instead). */
__attribute__((target("avx2,avxvnni"))) static inline float int8_loop_avxvnni(int64_t rounds, float m,
                                                                       float a)
{
    const __m256i x = _mm256_set1_epi8((char)(int)(m * 100.0f));
    const __m256i y = _mm256_set1_epi8((char)(int)(a * 1000.0f));
#define INIT(i) __m256i c##i = _mm256_set1_epi32(i);
#define STEP(i) c##i = _mm256_dpbusd_avx_epi32(c##i, x, y);
#define SUM(i) s = _mm256_add_epi32(s, c##i);
    PEAK_CHAINS(REPEAT_12, __m256i, _mm256_setzero_si256())
#undef INIT
#undef STEP
#undef SUM
    int32_t lanes[8];
    _mm256_storeu_si256((__m256i *)(void *)lanes, s);
    return (float)(lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] +
                   lanes[7]);
}

#include "../src/x86/amx_cfg.h" /* LDTILECFG's operand */

/*
 * The AMX tile unit: 4 accumulator tiles (16 x 16 lanes each) fed by 2 A
 * and 2 B tiles, one tile product per accumulator and round: per lane 32
 * bf16 products (64 flops, tdpbf16ps) or 64 int8 ones (128 ops, tdpbssd).
 * Raw instructions rather than GCC 12's intrinsics, whose LDTILECFG names
 * 8 of the 64 bytes it reads (src/x86/amx_cfg.h). Call only where the
 * library's AMX table is available: it has asked Linux for the tile state.
 */
#define AMX_TILE_LOOP(NAME, INSN, ELEM)                                                     \
    static inline float NAME(int64_t rounds, float m, float a)                              \
    {                                                                                       \
        attn_amx_cfg cfg = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64},                    \
                            {16, 16, 16, 16, 16, 16, 16, 16}};                              \
        _Alignas(64) ELEM x[16][64 / sizeof(ELEM)], y[16][64 / sizeof(ELEM)];             \
        _Alignas(64) float c[16][16];                                                       \
        for (int i = 0; i < 16; i++)                                                        \
            for (size_t j = 0; j < 64 / sizeof(ELEM); j++)                                  \
                x[i][j] = (ELEM)(m * 100.0f), y[i][j] = (ELEM)(a * 100.0f);                 \
        __asm__ volatile("ldtilecfg %0\n\t"                                                 \
                         "tileloadd (%1,%3,1), %%tmm4\n\t"                                  \
                         "tileloadd (%1,%3,1), %%tmm5\n\t"                                  \
                         "tileloadd (%2,%3,1), %%tmm6\n\t"                                  \
                         "tileloadd (%2,%3,1), %%tmm7\n\t"                                  \
                         "tilezero %%tmm0\n\ttilezero %%tmm1\n\t"                           \
                         "tilezero %%tmm2\n\ttilezero %%tmm3"                                 \
                         :                                                                  \
                         : "m"(cfg), "r"(x), "r"(y), "r"((long)64)                          \
                         : "memory");                                                       \
        for (int64_t r = 0; r < rounds; r++)                                                \
            __asm__ volatile(INSN " %%tmm6, %%tmm4, %%tmm0\n\t" INSN " %%tmm7, %%tmm4, %%tmm1\n\t" \
                             INSN " %%tmm6, %%tmm5, %%tmm2\n\t" INSN " %%tmm7, %%tmm5, %%tmm3" :: \
                                 : "memory");                                               \
        __asm__ volatile("tilestored %%tmm0, (%0,%1,1)\n\ttilerelease"                       \
                         :                                                                  \
                         : "r"(c), "r"((long)64)                                            \
                         : "memory");                                                       \
        return c[0][0];                                                                     \
    }
/* the operands' values do not change the tile unit's rate: m and a only
   fill them, as the other loops' */
AMX_TILE_LOOP(amx_bf16_loop, "tdpbf16ps", uint16_t)
AMX_TILE_LOOP(amx_int8_loop, "tdpbssd", int8_t)
#undef AMX_TILE_LOOP
#endif

#ifdef PEAK_NEON
static inline float fma_loop_neon(int64_t rounds, float m, float a)
{
    const float32x4_t vm = vdupq_n_f32(m), va = vdupq_n_f32(a);
#define INIT(i) float32x4_t c##i = vdupq_n_f32((float)(i) * 0.01f);
#define STEP(i) c##i = vfmaq_f32(va, c##i, vm);
#define SUM(i) s = vaddq_f32(s, c##i);
    PEAK_CHAINS(REPEAT_16, float32x4_t, vdupq_n_f32(0.0f))
#undef INIT
#undef STEP
#undef SUM
    return vaddvq_f32(s);
}
#endif

/* No SIMD loop for this CPU: a multiply and an add (2 flops, maybe not
   fused), so the figure is a lower bound of what the library's kernels see. */
static inline float fma_loop_scalar(int64_t rounds, float m, float a)
{
#define INIT(i) float c##i = (float)(i) * 0.01f;
#define STEP(i) c##i = c##i * m + a;
#define SUM(i) s += c##i;
    PEAK_CHAINS(REPEAT_12, float, 0.0f)
#undef INIT
#undef STEP
#undef SUM
    return s;
}

#endif /* ATTN_TOOLS_PEAK_LOOPS_H */

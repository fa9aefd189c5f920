/* SPDX-License-Identifier: MIT */
/*
 * The AVX-512 intrinsics the AVX-512 kernels use that SIMDe 0.7.4 (Debian
 * 12) does not emulate, for the ATTN_SIMDE_EMU build only. Without these,
 * SIMDe's native aliases leave the names to GCC's real intrinsics, which
 * fail to inline without -mavx512f ("target specific option mismatch").
 *
 * Each is a plain, lane-by-lane definition of the instruction, written for
 * obviousness rather than speed. Masked loads read only the selected lanes
 * and masked stores write only those, like the hardware, so the emulated
 * kernels keep the real kernels' memory footprint and an over-read still
 * shows up in tests.
 */
#ifndef ATTN_X86_SIMDE_COMPAT_AVX512_H
#define ATTN_X86_SIMDE_COMPAT_AVX512_H

#ifndef ATTN_SIMDE_EMU
#error "simde_compat_avx512.h is for the SIMDe emulation build only"
#endif

#include <math.h>
#include <stdint.h>

#include <simde/x86/f16c.h>

#define ATTN_EMU_INLINE static inline __attribute__((always_inline))

ATTN_EMU_INLINE int attn_emu_lane(simde__mmask16 k, int i)
{
    return (k >> i) & 1;
}

ATTN_EMU_INLINE simde__m512 attn_emu_mm512_mask_loadu_ps(simde__m512 src, simde__mmask16 k,
                                                         const void *p)
{
    simde__m512_private r = simde__m512_to_private(src);
    const float *f = (const float *)p;
    for (int i = 0; i < 16; i++)
        if (attn_emu_lane(k, i))
            r.f32[i] = f[i];
    return simde__m512_from_private(r);
}

ATTN_EMU_INLINE simde__m512 attn_emu_mm512_maskz_loadu_ps(simde__mmask16 k, const void *p)
{
    return attn_emu_mm512_mask_loadu_ps(simde_mm512_setzero_ps(), k, p);
}

ATTN_EMU_INLINE void attn_emu_mm512_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a)
{
    simde__m512_private v = simde__m512_to_private(a);
    float *f = (float *)p;
    for (int i = 0; i < 16; i++)
        if (attn_emu_lane(k, i))
            f[i] = v.f32[i];
}

/* Pairwise tree, the order GCC's own _mm512_reduce_add_ps uses. */
ATTN_EMU_INLINE float attn_emu_mm512_reduce_add_ps(simde__m512 a)
{
    simde__m512_private v = simde__m512_to_private(a);
    float t[8];
    for (int i = 0; i < 8; i++)
        t[i] = v.f32[i] + v.f32[i + 8];
    for (int i = 0; i < 4; i++)
        t[i] = t[i] + t[i + 4];
    return (t[0] + t[2]) + (t[1] + t[3]);
}

/* Same result as vmaxps for the non-NaN inputs the kernels promise. */
ATTN_EMU_INLINE float attn_emu_mm512_reduce_max_ps(simde__m512 a)
{
    simde__m512_private v = simde__m512_to_private(a);
    float m = v.f32[0];
    for (int i = 1; i < 16; i++)
        m = v.f32[i] > m ? v.f32[i] : m;
    return m;
}

ATTN_EMU_INLINE simde__m512 attn_emu_mm512_shuffle_f32x4(simde__m512 a, simde__m512 b, int imm)
{
    simde__m512_private a_ = simde__m512_to_private(a), b_ = simde__m512_to_private(b), r;
    r.m128[0] = a_.m128[imm & 3];
    r.m128[1] = a_.m128[(imm >> 2) & 3];
    r.m128[2] = b_.m128[(imm >> 4) & 3];
    r.m128[3] = b_.m128[(imm >> 6) & 3];
    return simde__m512_from_private(r);
}

ATTN_EMU_INLINE simde__m256 attn_emu_mm512_extractf32x8_ps(simde__m512 a, int imm)
{
    return simde__m512_to_private(a).m256[imm & 1];
}

/* F16C (native in this build: -mf16c) on each half; exact, like vcvtph2ps. */
ATTN_EMU_INLINE simde__m512 attn_emu_mm512_cvtph_ps(simde__m256i h)
{
    simde__m256i_private h_ = simde__m256i_to_private(h);
    simde__m512_private r;
    r.m256[0] = simde_mm256_cvtph_ps(h_.m128i[0]);
    r.m256[1] = simde_mm256_cvtph_ps(h_.m128i[1]);
    return simde__m512_from_private(r);
}

ATTN_EMU_INLINE simde__m512i attn_emu_mm512_cvtepu16_epi32(simde__m256i a)
{
    simde__m256i_private a_ = simde__m256i_to_private(a);
    simde__m512i_private r;
    for (int i = 0; i < 16; i++)
        r.u32[i] = a_.u16[i];
    return simde__m512i_from_private(r);
}

ATTN_EMU_INLINE simde__m256i attn_emu_mm256_maskz_loadu_epi16(simde__mmask16 k, const void *p)
{
    simde__m256i_private r;
    const uint16_t *h = (const uint16_t *)p;
    for (int i = 0; i < 16; i++)
        r.u16[i] = attn_emu_lane(k, i) ? h[i] : 0;
    return simde__m256i_from_private(r);
}

ATTN_EMU_INLINE simde__m128i attn_emu_mm_maskz_loadu_epi8(simde__mmask16 k, const void *p)
{
    simde__m128i_private r;
    const uint8_t *b = (const uint8_t *)p;
    for (int i = 0; i < 16; i++)
        r.u8[i] = attn_emu_lane(k, i) ? b[i] : 0;
    return simde__m128i_from_private(r);
}

ATTN_EMU_INLINE simde__m512i attn_emu_mm512_maskz_loadu_epi8(simde__mmask64 k, const void *p)
{
    simde__m512i_private r;
    const uint8_t *b = (const uint8_t *)p;
    for (int i = 0; i < 64; i++)
        r.u8[i] = (k >> i) & 1 ? b[i] : 0;
    return simde__m512i_from_private(r);
}

/* Lane i set when (a & b) byte i is zero. */
ATTN_EMU_INLINE simde__mmask16 attn_emu_mm_testn_epi8_mask(simde__m128i a, simde__m128i b)
{
    simde__m128i_private a_ = simde__m128i_to_private(a), b_ = simde__m128i_to_private(b);
    unsigned k = 0;
    for (int i = 0; i < 16; i++)
        k |= (unsigned)((a_.u8[i] & b_.u8[i]) == 0) << i;
    return (simde__mmask16)k;
}

/*
 * SIMDe has _mm512_scalef_ps, but as a * exp2(floor(b)) in float: 2^n
 * underflows to 0 below 2^-149 and subnormal results round twice. ldexpf
 * rounds once, as vscalefps does; attn_exp16 relies on that. (The infinite
 * exponents, which the kernels never pass, follow the instruction too.)
 */
ATTN_EMU_INLINE simde__m512 attn_emu_mm512_scalef_ps(simde__m512 a, simde__m512 b)
{
    simde__m512_private a_ = simde__m512_to_private(a), b_ = simde__m512_to_private(b), r;
    for (int i = 0; i < 16; i++) {
        float x = a_.f32[i], e = b_.f32[i];
        if (isnan(x) || isnan(e))
            r.f32[i] = x + e;
        else if (isinf(e))
            r.f32[i] = e > 0 ? x * e : x * 0.0f; /* 0 * +inf is NaN, as in hardware */
        else
            r.f32[i] = ldexpf(x, (int)fminf(fmaxf(floorf(e), -400.0f), 400.0f));
    }
    return simde__m512_from_private(r);
}

/*
 * Conversions SIMDe 0.7.4 does not emulate: on two 256-bit halves with
 * AVX2 (the emulated rows are the long pole of CI: these run in every
 * emulated tile and decoder), each the instruction's result.
 */
ATTN_EMU_INLINE simde__m512i attn_emu_mm512_cvtepi8_epi32(simde__m128i a)
{
    simde__m512i_private r;
    r.m256i[0] = _mm256_cvtepi8_epi32(a);
    r.m256i[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(a, 8));
    return simde__m512i_from_private(r);
}

ATTN_EMU_INLINE simde__m512i attn_emu_mm512_cvtepu8_epi32(simde__m128i a)
{
    simde__m512i_private r;
    r.m256i[0] = _mm256_cvtepu8_epi32(a);
    r.m256i[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(a, 8));
    return simde__m512i_from_private(r);
}

/* round to nearest, as vcvtdq2ps */
ATTN_EMU_INLINE simde__m512 attn_emu_mm512_cvtepi32_ps(simde__m512i a)
{
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m512_private r;
    r.m256[0] = _mm256_cvtepi32_ps(x.m256i[0]);
    r.m256[1] = _mm256_cvtepi32_ps(x.m256i[1]);
    return simde__m512_from_private(r);
}

ATTN_EMU_INLINE simde__m512i attn_emu_mm512_cvttps_epi32(simde__m512 a)
{
    simde__m512_private x = simde__m512_to_private(a);
    simde__m512i_private r;
    r.m256i[0] = _mm256_cvttps_epi32(x.m256[0]);
    r.m256i[1] = _mm256_cvttps_epi32(x.m256[1]);
    return simde__m512i_from_private(r);
}

/* vpmovdb: the low byte of each lane */
ATTN_EMU_INLINE simde__m128i attn_emu_mm512_cvtepi32_epi8(simde__m512i a)
{
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m128i_private r;
    for (int i = 0; i < 16; i++)
        r.i8[i] = (int8_t)x.i32[i];
    return simde__m128i_from_private(r);
}

#undef _mm512_scalef_ps
#undef _mm512_mask_loadu_ps
#undef _mm512_maskz_loadu_ps
#undef _mm512_mask_storeu_ps
#undef _mm512_reduce_add_ps
#undef _mm512_reduce_max_ps
#undef _mm512_shuffle_f32x4
#undef _mm512_extractf32x8_ps
#undef _mm512_cvtph_ps
#undef _mm512_cvtepu16_epi32
#undef _mm256_maskz_loadu_epi16
#undef _mm_maskz_loadu_epi8
#undef _mm512_maskz_loadu_epi8
#undef _mm_testn_epi8_mask
#undef _mm512_cvtepi8_epi32
#undef _mm512_cvtepu8_epi32
#undef _mm512_cvtepi32_ps
#undef _mm512_cvttps_epi32
#undef _mm512_cvtepi32_epi8
#define _mm512_scalef_ps(a, b) attn_emu_mm512_scalef_ps(a, b)
#define _mm512_mask_loadu_ps(src, k, p) attn_emu_mm512_mask_loadu_ps(src, k, p)
#define _mm512_maskz_loadu_ps(k, p) attn_emu_mm512_maskz_loadu_ps(k, p)
#define _mm512_mask_storeu_ps(p, k, a) attn_emu_mm512_mask_storeu_ps(p, k, a)
#define _mm512_reduce_add_ps(a) attn_emu_mm512_reduce_add_ps(a)
#define _mm512_reduce_max_ps(a) attn_emu_mm512_reduce_max_ps(a)
#define _mm512_shuffle_f32x4(a, b, imm) attn_emu_mm512_shuffle_f32x4(a, b, imm)
#define _mm512_extractf32x8_ps(a, imm) attn_emu_mm512_extractf32x8_ps(a, imm)
#define _mm512_cvtph_ps(h) attn_emu_mm512_cvtph_ps(h)
#define _mm512_cvtepu16_epi32(a) attn_emu_mm512_cvtepu16_epi32(a)
#define _mm256_maskz_loadu_epi16(k, p) attn_emu_mm256_maskz_loadu_epi16(k, p)
#define _mm_maskz_loadu_epi8(k, p) attn_emu_mm_maskz_loadu_epi8(k, p)
#define _mm512_maskz_loadu_epi8(k, p) attn_emu_mm512_maskz_loadu_epi8(k, p)
#define _mm_testn_epi8_mask(a, b) attn_emu_mm_testn_epi8_mask(a, b)
#define _mm512_cvtepi8_epi32(a) attn_emu_mm512_cvtepi8_epi32(a)
#define _mm512_cvtepu8_epi32(a) attn_emu_mm512_cvtepu8_epi32(a)
#define _mm512_cvtepi32_ps(a) attn_emu_mm512_cvtepi32_ps(a)
#define _mm512_cvttps_epi32(a) attn_emu_mm512_cvttps_epi32(a)
#define _mm512_cvtepi32_epi8(a) attn_emu_mm512_cvtepi32_epi8(a)

#endif /* ATTN_X86_SIMDE_COMPAT_AVX512_H */

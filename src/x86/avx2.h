/* SPDX-License-Identifier: MIT */
/*
 * The AVX2 (+FMA+F16C) module's helpers, for its files (compiled with the
 * AVX2 flags: src/x86/meson.build). Its kernels and their inits come from
 * src/kernel_list.h; the registry declares the table's init.
 */
#ifndef ATTN_X86_AVX2_H
#define ATTN_X86_AVX2_H

#include "dsp.h"

#ifdef __cplusplus
extern "C" {
#endif
/* dot_i8_avx2.c built against SIMDe (tests/emu only: the "avx2-emu" row). */
void attn_dsp_init_dot_i8_avx2_emu(attn_dsp *t);
#ifdef __cplusplus
}
#endif

/* Helpers: only where the compiler targets AVX2 (the module's own files). */
#if defined(__AVX2__) && !defined(__cplusplus)
#include <immintrin.h>

#include "prefetch.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* lane_mask_table + 8 - n as an int32 mask selects the first n of 8 lanes. */
static const int32_t attn_avx2_lane_mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                       0,  0,  0,  0,  0,  0,  0,  0};

/* Selects the first n (0..8) of 8 lanes. */
static ALWAYS_INLINE __m256i first_lanes(size_t n)
{
    return _mm256_loadu_si256((const __m256i *)(attn_avx2_lane_mask_table + 8 - n));
}
#endif

#endif /* ATTN_X86_AVX2_H */

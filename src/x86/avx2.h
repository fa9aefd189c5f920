/*
 * The AVX2 (+FMA+F16C) module: its inits and, for its files compiled with
 * the AVX2 flags (tile_avx2.c, row_avx2.c, merge_avx2.c, backward_avx2.c,
 * quant_avx2.c; alibi_avx2.c needs none of them), the helpers they share.
 */
#ifndef ATTN_X86_AVX2_H
#define ATTN_X86_AVX2_H

#include "dsp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The AVX2 table (row_avx2.c): block sizes and row slots, and the other
   slots through the inits below. */
void attn_dsp_init_avx2(attn_dsp *t);
/* The tile slots (qk_tile, pv_tile, to_f32) only (tile_avx2.c). */
void attn_dsp_init_tiles_avx2(attn_dsp *t);
/* The merge slot (wsum) only (merge_avx2.c). */
void attn_dsp_init_merge_avx2(attn_dsp *t);
/* The backward slots (pt_tile, score_grad) only (backward_avx2.c). */
void attn_dsp_init_backward_avx2(attn_dsp *t);
/* The Q8_0, Q4_0 and FP8 tile slots (quant_avx2.c). */
void attn_dsp_init_quant_avx2(attn_dsp *t);

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

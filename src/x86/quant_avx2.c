/* SPDX-License-Identifier: MIT */
/*
 * AVX2+FMA+F16C tile kernels for the quantized K/V dtypes (Q8_0, Q4_0, FP8
 * E4M3): the tile family's one body (src/x86/tile_avx2_tmpl.h, shared with
 * tile_avx2.c) instantiated per dtype, dequantizing inside its loads
 * (dsp.h). The decoded values are exact in f32, so after the load every
 * kernel is the float kernels' f32 FMA arithmetic, paths, prefetch and
 * bounds.
 */
#include "tile_variants.h"
#include "x86/tile_avx2_tmpl.h"

ATTN_TILE_FILE(quant, avx2, avx2)

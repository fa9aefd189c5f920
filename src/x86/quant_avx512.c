/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 tile kernels for the quantized K/V dtypes (Q8_0, Q4_0, FP8
 * E4M3): the tile family's one body (src/x86/tile_avx512_tmpl.h, shared
 * with tile_avx512.c) instantiated per dtype, dequantizing inside its loads
 * (dsp.h). The decoded values are exact in f32, so after the load every
 * kernel is the float kernels' f32 arithmetic, paths, prefetch and bounds.
 */
#include "tile_variants.h"
#include "x86/tile_avx512_tmpl.h"

ATTN_TILE_FILE(quant, avx512, ATTN_AVX512_EXT)

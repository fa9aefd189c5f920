/* SPDX-License-Identifier: MIT */
/*
 * NEON (AArch64 AdvSIMD) tile kernels for the quantized K/V dtypes (Q8_0,
 * Q4_0, FP8 E4M3), which the SVE table keeps as well: the tile family's one
 * body (src/arm/tile_neon_tmpl.h, shared with tile_neon.c) instantiated per
 * dtype, dequantizing inside its loads (dsp.h). The decoded values are
 * exact in f32, so after the load every kernel is the float kernels' f32
 * FMA arithmetic, paths, prefetch and bounds.
 */
#include "tile_variants.h"
#include "arm/tile_neon_tmpl.h"

ATTN_TILE_FILE(quant, neon, neon)

/* SPDX-License-Identifier: MIT */
/*
 * NEON (AArch64 AdvSIMD) tile kernels for the float K/V dtypes (F32, F16,
 * BF16): the family's one body (src/arm/tile_neon_tmpl.h, shared with
 * quant_neon.c) instantiated per dtype.
 */
#include "tile_variants.h"
#include "arm/tile_neon_tmpl.h"

ATTN_TILE_FILE(tile, neon, neon)

/* SPDX-License-Identifier: MIT */
/*
 * AVX2+FMA+F16C tile kernels for the float K/V dtypes (F32, F16, BF16):
 * the family's one body (src/x86/tile_avx2_tmpl.h, shared with
 * quant_avx2.c) instantiated per dtype.
 */
#include "tile_variants.h"
#include "x86/tile_avx2_tmpl.h"

ATTN_TILE_FILE(tile, avx2, avx2)

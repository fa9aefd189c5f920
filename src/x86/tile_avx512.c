/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 tile kernels for the float K/V dtypes (F32, F16, BF16): the
 * family's one body (src/x86/tile_avx512_tmpl.h, shared with
 * quant_avx512.c) instantiated per dtype.
 */
#include "tile_variants.h"
#include "x86/tile_avx512_tmpl.h"

ATTN_TILE_FILE(tile, avx512, ATTN_AVX512_EXT)

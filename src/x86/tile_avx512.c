/* SPDX-License-Identifier: MIT */
/* The float K/V dtypes on src/x86/tile_avx512_tmpl.h. */
#include "tile_variants.h"
#include "x86/tile_avx512_tmpl.h"

ATTN_TILE_FILE(tile, avx512, ATTN_AVX512_EXT)

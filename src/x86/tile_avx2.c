/* SPDX-License-Identifier: MIT */
/* The float K/V dtypes on src/x86/tile_avx2_tmpl.h. */
#include "tile_variants.h"
#include "x86/tile_avx2_tmpl.h"

ATTN_TILE_FILE(tile, avx2, avx2)

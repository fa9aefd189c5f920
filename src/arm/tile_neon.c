/* SPDX-License-Identifier: MIT */
/* The float K/V dtypes on src/arm/tile_neon_tmpl.h. */
#include "tile_variants.h"
#include "arm/tile_neon_tmpl.h"

ATTN_TILE_FILE(tile, neon, neon)

/* SPDX-License-Identifier: MIT */
/* The quantized K/V dtypes on src/arm/tile_neon_tmpl.h (the SVE table keeps
   them): decoded exactly in the loads, then the float kernels' arithmetic. */
#include "tile_variants.h"
#include "arm/tile_neon_tmpl.h"

ATTN_TILE_FILE(quant, neon, neon)

/* SPDX-License-Identifier: MIT */
/* The quantized K/V dtypes on src/x86/tile_avx2_tmpl.h: decoded exactly in
   the loads, then the float kernels' arithmetic and bounds. */
#include "tile_variants.h"
#include "x86/tile_avx2_tmpl.h"

ATTN_TILE_FILE(quant, avx2, avx2)

/* SPDX-License-Identifier: MIT */
/* The float K/V dtypes on src/scalar/tile_scalar_tmpl.h. */
#include "scalar/tile_scalar_tmpl.h"

ATTN_TILE_FILE(tile, scalar, scalar)

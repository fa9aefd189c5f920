/* SPDX-License-Identifier: MIT */
/* The NEON table's int8 kernel on FEAT_DotProd's SDOT (the dot_i8 file of
   src/kernel_list.h): src/arm/dot_i8_neon_tmpl.h. */
#include "arm/dot_i8_neon_tmpl.h"

ATTN_TILE_FILE(dot_i8, neon, neon)

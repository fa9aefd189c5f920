/* SPDX-License-Identifier: MIT */
/* The int8 kernel on SDOT: src/arm/dot_i8_neon_tmpl.h. */
#include "arm/dot_i8_neon_tmpl.h"

ATTN_TILE_FILE(dot_i8, neon, neon)

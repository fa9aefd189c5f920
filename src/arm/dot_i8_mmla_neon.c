/* SPDX-License-Identifier: MIT */
/* src/arm/dot_i8_neon_tmpl.h on SMMLA: SDOT's bits. */
#define ATTN_DOT_I8_MMLA 1
#include "arm/dot_i8_neon_tmpl.h"

ATTN_TILE_FILE(dot_i8_mmla, neon, neon)

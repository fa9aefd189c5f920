/* SPDX-License-Identifier: MIT */
/* src/arm/dot_i8_neon_tmpl.h on SVE's SMMLA: the NEON kernels' bits at every
   vector length. */
#define ATTN_DOT_I8_SVE 1
#include "arm/dot_i8_neon_tmpl.h"

ATTN_TILE_FILE(dot_i8, sve, sve)

/* SPDX-License-Identifier: MIT */
/* src/arm/dot_neon_tmpl.h on Z registers: the NEON kernels' bits at every
   vector length. */
#define ATTN_DOT_SVE 1
#include "arm/dot_neon_tmpl.h"

ATTN_TILE_FILE(dot, sve, sve)
ATTN_TILE_FILE(dot_qv, sve, sve)

/* SPDX-License-Identifier: MIT */
/* The bf16-mode kernels: src/arm/dot_neon_tmpl.h (its error bound there). */
#include "arm/dot_neon_tmpl.h"

ATTN_TILE_FILE(dot, neon, neon)
ATTN_TILE_FILE(dot_qv, neon, neon)

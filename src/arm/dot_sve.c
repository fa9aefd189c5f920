/* SPDX-License-Identifier: MIT */
/* The SVE table's bf16-mode kernels (the dot file of the SVE table,
   src/kernel_list.h): src/arm/dot_neon_tmpl.h with BFMMLA on whole Z
   registers, a 2 x 2 block per 128-bit segment; packing, chains and so the
   bits are the NEON kernels' at every vector length. */
#define ATTN_DOT_SVE 1
#include "arm/dot_neon_tmpl.h"

ATTN_TILE_FILE(dot, sve, sve)

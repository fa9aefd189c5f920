/* SPDX-License-Identifier: MIT */
/* The NEON table's bf16-mode kernels on FEAT_BF16 (the dot file of
   src/kernel_list.h): src/arm/dot_neon_tmpl.h. */
#include "arm/dot_neon_tmpl.h"

ATTN_TILE_FILE(dot, neon, neon)

/* SPDX-License-Identifier: MIT */
/* The NEON table's int8 kernel on FEAT_I8MM's SMMLA (the dot_i8_mmla file
   of src/kernel_list.h): src/arm/dot_i8_neon_tmpl.h; the same quantization,
   block sums and f32 steps as SDOT's, so the same bits. */
#define ATTN_DOT_I8_MMLA 1
#include "arm/dot_i8_neon_tmpl.h"

ATTN_TILE_FILE(dot_i8_mmla, neon, neon)

/* SPDX-License-Identifier: MIT */
/* The SVE table's int8 kernel on SVE's SMMLA (the dot_i8 file of the SVE
   table, src/kernel_list.h): src/arm/dot_i8_neon_tmpl.h on whole vectors, a
   pair of rows by a pair of keys per 128-bit segment; the same bits as the
   NEON kernels at every vector length. */
#define ATTN_DOT_I8_SVE 1
#include "arm/dot_i8_neon_tmpl.h"

ATTN_TILE_FILE(dot_i8, sve, sve)

/* SPDX-License-Identifier: MIT */
/* The AVX2 table's int8 kernel on AVX-VNNI's VEX vpdpbusd (the dot_i8 file
   of src/kernel_list.h): src/x86/dot_i8_avx2_tmpl.h. */
#include "x86/dot_i8_avx2_tmpl.h"

ATTN_TILE_FILE(dot_i8, avx2, ATTN_DOT_I8_AVX2_EXT)

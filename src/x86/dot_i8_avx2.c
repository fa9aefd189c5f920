/* SPDX-License-Identifier: MIT */
/* The int8 kernel on AVX-VNNI: src/x86/dot_i8_avx2_tmpl.h. */
#include "x86/dot_i8_avx2_tmpl.h"

ATTN_TILE_FILE(dot_i8, avx2, ATTN_DOT_I8_AVX2_EXT)

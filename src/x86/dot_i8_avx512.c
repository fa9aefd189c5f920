/* SPDX-License-Identifier: MIT */
/* The int8 mode's Q.K^T on AVX512_VNNI: src/x86/dot_i8_avx512_tmpl.h. */
#include "x86/dot_i8_avx512_tmpl.h"

ATTN_TILE_FILE(dot_i8, avx512, ATTN_AVX512_EXT)

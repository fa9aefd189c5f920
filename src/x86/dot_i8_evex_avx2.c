/* SPDX-License-Identifier: MIT */
/* src/x86/dot_i8_avx2_tmpl.h on the EVEX vpdpbusd, for CPUs with only that
   form: the same int32 sums, so the same bits. */
#define ATTN_DOT_I8_EVEX 1
#include "x86/dot_i8_avx2_tmpl.h"

ATTN_TILE_FILE(dot_i8_evex, avx2, ATTN_DOT_I8_AVX2_EXT)

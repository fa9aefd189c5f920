/* SPDX-License-Identifier: MIT */
/* The AVX2 table's int8 kernel on the EVEX vpdpbusd at 256 bits (the
   dot_i8_evex file of src/kernel_list.h, for Zen 4, which has only that
   form): src/x86/dot_i8_avx2_tmpl.h; the same int32 sums, so the same bits. */
#define ATTN_DOT_I8_EVEX 1
#include "x86/dot_i8_avx2_tmpl.h"

ATTN_TILE_FILE(dot_i8_evex, avx2, ATTN_DOT_I8_AVX2_EXT)

/* SPDX-License-Identifier: MIT */
/* The int8 mode's Q.K^T on AMX tiles (tdpbsud): src/x86/dot_i8_avx512_tmpl.h. */
#define ATTN_DOT_I8_AMX 1
#include "x86/dot_i8_avx512_tmpl.h"

ATTN_TILE_FILE(dot_i8, amx, ATTN_AMX_EXT)

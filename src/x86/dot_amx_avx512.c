/* SPDX-License-Identifier: MIT */
/* The bf16 mode's Q.K^T on AMX tiles: src/x86/dot_avx512_tmpl.h. */
#define ATTN_DOT_AMX 1
#include "x86/dot_avx512_tmpl.h"

ATTN_TILE_FILE(dot_amx, avx512, ATTN_AVX512_EXT)

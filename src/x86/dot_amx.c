/* SPDX-License-Identifier: MIT */
/*
 * The AMX table's bf16 file: src/x86/dot_avx512_tmpl.h with Q.K^T and P.V
 * on tdpbf16ps (its pt_bf16 is the AVX-512 one). The table's init lives
 * here: the AMX module has no row file.
 */
#define ATTN_DOT_AMX 1
#include "x86/dot_avx512_tmpl.h"

ATTN_TILE_FILE(dot, amx, ATTN_AMX_EXT)
ATTN_TILE_FILE(dot_qv, amx, ATTN_AMX_EXT)
ATTN_ISA_INIT(amx, ATTN_AMX_EXT)

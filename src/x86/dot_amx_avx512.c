/* SPDX-License-Identifier: MIT */
/* The bf16 mode's Q.K^T on AMX tiles (the dot_amx file of src/kernel_list.h,
   stored over the dot file's qk_bf16 where the CPU has AMX-BF16 and the OS
   grants the tile state): src/x86/dot_avx512_tmpl.h with ATTN_DOT_AMX. */
#define ATTN_DOT_AMX 1
#include "x86/dot_avx512_tmpl.h"

ATTN_TILE_FILE(dot_amx, avx512, ATTN_AVX512_EXT)

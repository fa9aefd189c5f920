/* SPDX-License-Identifier: MIT */
/* The AVX-512 table's bf16-mode kernels on AVX512_BF16 (the dot file of
   src/kernel_list.h): src/x86/dot_avx512_tmpl.h. */
#include "x86/dot_avx512_tmpl.h"

ATTN_TILE_FILE(dot, avx512, ATTN_AVX512_EXT)

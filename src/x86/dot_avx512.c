/* SPDX-License-Identifier: MIT */
/* The bf16-mode kernels: src/x86/dot_avx512_tmpl.h. */
#include "x86/dot_avx512_tmpl.h"

ATTN_TILE_FILE(dot, avx512, ATTN_AVX512_EXT)
ATTN_TILE_FILE(dot_qv, avx512, ATTN_AVX512_EXT)

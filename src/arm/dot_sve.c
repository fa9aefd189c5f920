/* SPDX-License-Identifier: MIT */
/*
 * The SVE table's bf16-mode kernels: src/arm/dot_neon.c compiled again with
 * ATTN_DOT_SVE, the dot file of the SVE table (src/kernel_list.h), stored
 * where the CPU reports SVE's BF16 instructions (HWCAP2_SVEBF16, src/cpu.c).
 * Its BFMMLA works on whole vectors, a 2 x 2 block per 128-bit segment, so a
 * panel holds 8 keys per 128 bits of vector and one instruction does that
 * many products; packing, chains and the exact path below 8 rows are the
 * NEON kernels', and so are the bits at every vector length. Built with the
 * flags of its entry in src/arm/meson.build.
 */
#define ATTN_DOT_SVE 1
#include "dot_neon.c"

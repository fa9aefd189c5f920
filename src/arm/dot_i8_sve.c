/* SPDX-License-Identifier: MIT */
/*
 * The SVE table's int8-mode kernel: src/arm/dot_i8_neon.c compiled again
 * with ATTN_DOT_I8_SVE, the dot_i8 file of the SVE table
 * (src/kernel_list.h), stored where the CPU reports SVE's I8MM
 * (HWCAP2_SVEI8MM, src/cpu.c). Its SMMLA works on whole vectors, a pair of
 * rows by a pair of keys per 128-bit segment, so a group holds 8 keys per
 * 128 bits of vector; quantization, packing order, block sums and f32
 * steps are the NEON kernels', and so are the bits at every vector length.
 * Built with the flags of its entry in src/arm/meson.build.
 */
#define ATTN_DOT_I8_SVE 1
#include "dot_i8_neon.c"

/* SPDX-License-Identifier: MIT */
/*
 * The NEON table's int8 kernel on FEAT_I8MM's SMMLA (Neoverse V1, N2, V2):
 * src/arm/dot_i8_neon.c compiled again, the dot_i8_mmla file of
 * src/kernel_list.h, stored over the SDOT one where the CPU reports
 * HWCAP2_I8MM (src/cpu.c). Built with the flags of its entry in
 * src/arm/meson.build.
 */
#define ATTN_DOT_I8_MMLA 1
#include "dot_i8_neon.c"

/* SPDX-License-Identifier: MIT */
/*
 * The AVX2 table's int8 kernel on the EVEX vpdpbusd (AVX512_VNNI with
 * AVX512VL, 256-bit vectors): src/x86/dot_i8_avx2.c compiled again, the
 * dot_i8_evex file of src/kernel_list.h, for CPUs that have that form and
 * not AVX-VNNI's (Zen 4, whose default table is AVX2's; Ice Lake and
 * Cascade Lake under ATTN_ISA=avx2). Built with the flags of its entry in
 * src/x86/meson.build.
 */
#define ATTN_DOT_I8_EVEX 1
#include "dot_i8_avx2.c"

/*
 * x86 kernel tables. Each init overwrites, in a table already filled by the
 * tiers below it (scalar, then AVX2), the slots its ISA implements.
 */
#ifndef ATTN_X86_H
#define ATTN_X86_H

#include "dsp.h"

#ifdef __cplusplus
extern "C" {
#endif

void attn_dsp_init_avx2(attn_dsp *t);   /* src/x86/..._avx2.c, AVX2+FMA+F16C flags */
void attn_dsp_init_avx512(attn_dsp *t); /* src/x86/..._avx512.c, AVX-512 flags */

/* The backward slots (backward_<isa>.c), called by the inits above. */
#ifdef ATTN_SIMDE_EMU /* the emulated AVX-512 build's name (simd_avx512.h) */
#define attn_dsp_init_backward_avx512 attn_dsp_init_backward_avx512_emu
#endif
void attn_dsp_init_backward_avx2(attn_dsp *t);
void attn_dsp_init_backward_avx512(attn_dsp *t);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_X86_H */

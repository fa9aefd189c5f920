/*
 * The alibi slot's kernels (attn_alibi_fn in dsp.h), one file per ISA:
 * src/scalar/alibi_scalar.c, src/x86/alibi_avx2.c, src/x86/alibi_avx512.c,
 * src/arm/alibi_neon.c, src/arm/alibi_sve.c. Each ISA's init stores its own
 * in its table.
 */
#ifndef ATTN_ALIBI_H
#define ATTN_ALIBI_H

#include <stddef.h>
#include <stdint.h>

void attn_alibi_f32_scalar(float *x, size_t n, float slope, int64_t pos);
void attn_alibi_f32_avx2(float *x, size_t n, float slope, int64_t pos);
void attn_alibi_f32_avx512(float *x, size_t n, float slope, int64_t pos);
void attn_alibi_f32_neon(float *x, size_t n, float slope, int64_t pos);
void attn_alibi_f32_sve(float *x, size_t n, float slope, int64_t pos);

#endif /* ATTN_ALIBI_H */

/* SPDX-License-Identifier: MIT */
/*
 * The quantized K/V formats' scalar helpers (src/scalar/quant_scalar.c):
 * the E4M3 and E5M2 decoders and encoders and the row quantizers behind attn_quantize
 * (src/driver/quantize.c). The binary16 encoder of the block scales is
 * src/half.h's, shared with the 16-bit outputs.
 */
#ifndef ATTN_QUANT_H
#define ATTN_QUANT_H

#include <stdint.h>


/* The largest finite values of the FP8 formats. */
#define ATTN_FP8_E4M3_MAX 448.0f
#define ATTN_FP8_E5M2_MAX 57344.0f

/* Exact decoding of one E4M3 "fn" byte (S.1111.111 is NaN). */
float attn_e4m3_to_f32(uint8_t x);
/* Round to nearest even; above 448 (and +-inf) saturates to +-448. */
uint8_t attn_f32_to_e4m3(float x);

/* Exact decoding of one E5M2 byte: the upper half of a binary16. */
float attn_e5m2_to_f32(uint8_t x);
/* Round to nearest even; above 57344 (and +-inf) saturates to +-57344. */
uint8_t attn_f32_to_e5m2(float x);

/* An ASYM record's scale and zero point for its n values; 0 when it has
   none (attn_quantize_row_ok). */
int attn_asym_params(int32_t dtype, const float *x, int64_t n, float *scale, float *zp);

/* 1 when a row of n values (a multiple of 32 for the block formats) can be
   quantized to dtype: finite, and every block's scale fits binary16; for
   the ASYM formats the row is one record (attn_asym_params). */
int attn_quantize_row_ok(int32_t dtype, const float *x, int64_t n);
/* One row into dst (FP8: x / scale; ASYM: one record). Arguments already
   validated. */
void attn_quantize_row(int32_t dtype, const float *x, int64_t n, void *dst, float scale);

#endif /* ATTN_QUANT_H */

/* SPDX-License-Identifier: MIT */
/*
 * The quantized K/V formats from their descriptions alone (attn.h, ggml's
 * block_q8_0/block_q4_0, the OCP E4M3 "fn" encoding), sharing no code with
 * src/: exact decoding into double, and reference quantizers written from
 * the documented formulas (ggml's quantize_row_q8_0_ref / _q4_0_ref
 * rounding, round-to-nearest-even E4M3 with saturation) for the
 * bit-for-bit checks of attn_quantize.
 */
#ifndef ATTN_TEST_REF_QUANT_H
#define ATTN_TEST_REF_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes per stride unit of ATTN_DTYPE_Q8_0 / Q4_0 / FP8_E4M3 / FP8_E5M2. */
size_t ref_quant_unit_bytes(int dtype);
/* Exact value of an E4M3 byte (NaN for S.1111.111). */
double ref_e4m3_to_double(uint8_t x);
/* Exact value of an E5M2 byte (+-inf for S.11111.00, NaN for the other
   S.11111.xx). */
double ref_e5m2_to_double(uint8_t x);
/* Value t of a quantized row (row: its first byte), exactly; an ASYM row
   as one record (group 0: the whole row). */
double ref_quant_value(int dtype, const unsigned char *row, size_t t);
/* The same for an ASYM row of records of `group` values (0: one record). */
double ref_quant_value_g(int dtype, const unsigned char *row, size_t t, size_t group);
/* Makes value t of the row decode to NaN (FP8: a NaN byte; the block
   formats: a NaN block scale, so the whole block is NaN; an ASYM row of
   one record: its scale, the whole row NaN). */
void ref_quant_poison(int dtype, unsigned char *row, size_t t);

/* Reference encoder of one ASYM record of n values (attn.h, attn_quantize:
   OpenVINO's AVX-512 rule); 0 when attn_quantize refuses the values. */
int ref_quantize_asym(int dtype, const float *x, size_t n, unsigned char *out);

/* Reference quantizers of one block of 32 (Q8_0: 34 bytes, Q4_0: 18). */
void ref_quantize_q8_0_block(const float *x, unsigned char *out);
void ref_quantize_q4_0_block(const float *x, unsigned char *out);
/* E4M3 of x: nearest, ties to even, |x| > 448 and inf saturate. */
uint8_t ref_f32_to_e4m3(float x);
/* E5M2 of x: nearest, ties to even, |x| > 57344 and inf saturate. */
uint8_t ref_f32_to_e5m2(float x);

#endif /* ATTN_TEST_REF_QUANT_H */

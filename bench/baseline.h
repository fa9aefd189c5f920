/* SPDX-License-Identifier: MIT */
/*
 * What a C user writes today without libattn, for the baselines: a SLEEF
 * softmax loop, and the reference loops (a read of K and V, the FMA peak).
 * Built with AVX2+FMA flags (baseline_avx2.c); call only where AVX2 runs.
 */
#ifndef ATTN_BENCH_BASELINE_H
#define ATTN_BENCH_BASELINE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per row: max, x = exp(x - max) with Sleef_expf8_u10avx2 and the sum, x /= sum. */
void bench_softmax_sleef_avx2(float *x, size_t rows, size_t cols, size_t row_stride);
/* x = exp(x - max) with Sleef_expf8_u10avx2, returns the sum (the exp_sum role). */
float bench_exp_sum_sleef_avx2(float *x, size_t n, float max);
/* Sum of x[0..n): one read of the bytes. */
float bench_read_sum_avx2(const float *x, size_t n);
/* The peak loops of tools/peak_loops.h (bench/peak.c): iters rounds of 12
   independent 8-wide FMAs (192 flops per round); of 16 independent 16-wide
   FMAs (512 flops per round), only where AVX-512 F runs. */
void bench_fma_peak_avx2(long iters);
void bench_fma_peak_avx512(long iters);
/* The bf16 and int8 dot-product peaks, 16 chains of 16 lanes (4, resp. 8
   operations a lane): only where the CPU has AVX512_BF16, resp. AVX512_VNNI. */
void bench_bf16dot_peak_avx512(long iters);
void bench_int8dot_peak_avx512(long iters);
/* The tile unit's peaks, 4 accumulator tiles (65536 flops, resp. 131072
   ops a round): only where the library's AMX table is available. */
void bench_bf16tile_peak_amx(long iters);
void bench_int8tile_peak_amx(long iters);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_BENCH_BASELINE_H */

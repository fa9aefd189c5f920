/* SPDX-License-Identifier: MIT */
/*
 * The peak loops of baseline.h: tools/peak_loops.h's (the ones `attn run`
 * measures with), run on the calling thread. Their target attributes let
 * this build with the baselines' AVX2 flags while the AVX-512 loops run
 * only where the CPU has them (the caller checks).
 */
#include "baseline.h"

#include "../tools/peak_loops.h"

/* m < 1 and a from a volatile, so nothing folds; the sums go to one too */
static volatile float fma_sink, fma_m = 0.9999f, fma_a = 0.001f;

void bench_fma_peak_avx2(long iters)
{
    fma_sink = fma_loop_avx2(iters, fma_m, fma_a);
}

void bench_fma_peak_avx512(long iters)
{
    fma_sink = fma_loop_avx512(iters, fma_m, fma_a);
}

void bench_bf16dot_peak_avx512(long iters)
{
    fma_sink = bf16_loop_avx512(iters, fma_m, fma_a);
}

void bench_int8dot_peak_avx512(long iters)
{
    fma_sink = int8_loop_avx512(iters, fma_m, fma_a);
}

/* only where the library's AMX table is available: it asked for the tiles */
void bench_bf16tile_peak_amx(long iters)
{
    fma_sink = amx_bf16_loop(iters, fma_m, fma_a);
}

void bench_int8tile_peak_amx(long iters)
{
    fma_sink = amx_int8_loop(iters, fma_m, fma_a);
}

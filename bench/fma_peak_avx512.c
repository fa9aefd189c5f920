/*
 * The AVX-512 FMA peak loop of baseline.h. Its own file with a target
 * attribute rather than build flags: the baselines are built with AVX2 flags
 * only (baseline_avx2.c), and this must build with plain gcc/clang on any
 * x86-64 while running only where the CPU has AVX-512 F.
 */
#include <immintrin.h>

#include "baseline.h"

static volatile float fma_sink, fma_m = 0.9999f, fma_a = 0.001f;

__attribute__((target("avx512f"))) void bench_fma_peak_avx512(long iters)
{
    /* 16 chains: a 4-cycle latency on two 512-bit FMA pipes needs 8 in
       flight; 16 leaves margin and uses half of the 32 zmm registers.
       acc = acc*m + a with m < 1 stays finite and normal; m and a are read
       from a volatile so the compiler cannot fold the loop. */
    const __m512 m = _mm512_set1_ps(fma_m), a = _mm512_set1_ps(fma_a);
#define INIT(i) __m512 c##i = _mm512_set1_ps((float)(i) * 0.01f);
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, m, a);
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
                X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
    EACH(INIT)
    for (long r = 0; r < iters; r++) {
        EACH(STEP)
    }
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, c##i);
    EACH(SUM)
#undef INIT
#undef STEP
#undef SUM
#undef EACH
    fma_sink = _mm512_reduce_add_ps(s);
}

/* The dot-product peaks of the precision modes (attn.h), the same way: 16
   independent chains of vdpbf16ps (4 flops a lane) and of vpdpbusd (8 ops
   a lane); call only where the CPU has AVX512_BF16, resp. AVX512_VNNI. */
__attribute__((target("avx512f,avx512bf16"))) void bench_bf16dot_peak_avx512(long iters)
{
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(fma_a), _mm512_set1_ps(fma_a));
    const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(fma_m), _mm512_set1_ps(fma_m));
#define INIT(i) __m512 c##i = _mm512_set1_ps((float)(i) * 0.01f);
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, x, y);
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) \
                X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
    EACH(INIT)
    for (long r = 0; r < iters; r++) {
        EACH(STEP)
    }
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, c##i);
    EACH(SUM)
#undef INIT
#undef STEP
#undef SUM
    fma_sink = _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512vnni"))) void bench_int8dot_peak_avx512(long iters)
{
    const __m512i x = _mm512_set1_epi8((char)(int)(fma_m * 100.0f));
    const __m512i y = _mm512_set1_epi8((char)(int)(fma_a * 1000.0f));
#define INIT(i) __m512i c##i = _mm512_set1_epi32(i);
#define STEP(i) c##i = _mm512_dpbusd_epi32(c##i, x, y);
    EACH(INIT)
    for (long r = 0; r < iters; r++) {
        EACH(STEP)
    }
    __m512i s = _mm512_setzero_si512();
#define SUM(i) s = _mm512_add_epi32(s, c##i);
    EACH(SUM)
#undef INIT
#undef STEP
#undef SUM
#undef EACH
    fma_sink = (float)_mm512_reduce_add_epi32(s);
}

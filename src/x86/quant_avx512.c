/*
 * AVX-512 tile kernels for the quantized K/V dtypes (Q8_0, Q4_0, FP8
 * E4M3): the tile family's one body (src/x86/tile_avx512_body.h, shared
 * with tile_avx512.c) instantiated per dtype, dequantizing inside its loads
 * (dsp.h). The decoded values are exact in f32, so after the load every
 * kernel is the float kernels' f32 arithmetic, paths, prefetch and bounds.
 */
#include "tile_variants.h"
#include "x86/tile_avx512_body.h"

ATTN_TILE_VARIANT(q8_0, Q8_0, avx512)
ATTN_TILE_VARIANT(q4_0, Q4_0, avx512)
ATTN_TILE_VARIANT(fp8, FP8, avx512)

void attn_dsp_init_quant_avx512(attn_dsp *t)
{
    ATTN_TILE_SLOTS(t, q8_0, Q8_0, avx512);
    ATTN_TILE_SLOTS(t, q4_0, Q4_0, avx512);
    ATTN_TILE_SLOTS(t, fp8, FP8, avx512);
}

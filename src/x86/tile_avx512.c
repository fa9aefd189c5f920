/*
 * AVX-512 tile kernels for the float K/V dtypes (F32, F16, BF16): the
 * family's one body (src/x86/tile_avx512_body.h, shared with
 * quant_avx512.c) instantiated per dtype.
 */
#include "tile_variants.h"
#include "x86/tile_avx512_body.h"

ATTN_TILE_VARIANT(f32, F32, avx512)
ATTN_TILE_VARIANT(f16, F16, avx512)
ATTN_TILE_VARIANT(bf16, BF16, avx512)

void attn_dsp_init_tiles_avx512(attn_dsp *t)
{
    ATTN_TILE_SLOTS(t, f32, F32, avx512);
    ATTN_TILE_SLOTS(t, f16, F16, avx512);
    ATTN_TILE_SLOTS(t, bf16, BF16, avx512);
}

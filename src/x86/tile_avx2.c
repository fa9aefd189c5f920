/*
 * AVX2+FMA+F16C tile kernels for the float K/V dtypes (F32, F16, BF16):
 * the family's one body (src/x86/tile_avx2_body.h, shared with
 * quant_avx2.c) instantiated per dtype.
 */
#include "tile_variants.h"
#include "x86/tile_avx2_body.h"

ATTN_TILE_VARIANT(f32, F32, avx2)
ATTN_TILE_VARIANT(f16, F16, avx2)
ATTN_TILE_VARIANT(bf16, BF16, avx2)

void attn_dsp_init_tiles_avx2(attn_dsp *t)
{
    ATTN_TILE_SLOTS(t, f32, F32, avx2);
    ATTN_TILE_SLOTS(t, f16, F16, avx2);
    ATTN_TILE_SLOTS(t, bf16, BF16, avx2);
}

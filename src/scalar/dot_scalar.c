/* SPDX-License-Identifier: MIT */
/*
 * The oracle of the low-precision modes (attn_precision, include/attn.h;
 * the slots of src/kernel_list.h's dot file): the modes' roundings of
 * src/lowp.h, then exact f32 products summed one by one in index order,
 * like the scalar tile body (-ffp-contract=off). Every dot-product kernel
 * is checked against these (tests/kernels/checkasm.c); a table without its own
 * keeps none of them (src/dispatch.c).
 */
#include "scalar/tile_scalar_tmpl.h"

/* bf16 mode: the tile body's loops (src/scalar/tile_scalar_tmpl.h) on
   factors rounded to bf16; a product of two bf16 values is exact in f32. */
ATTN_SCALAR_INLINE void qk_bf16(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                float *s, ptrdiff_t s_stride)
{
    qk_rows(dt, 1, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, NULL);
}

ATTN_SCALAR_INLINE void pv_bf16(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                ptrdiff_t acc_stride)
{
    pv_rows(dt, 1, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride, NULL);
}

/* bf16 mode, the backward's P^T X: the f32 oracle's loop (pv_rows with
   P's strides swapped, backward_scalar.c) on factors rounded to bf16. */
ATTN_SCALAR_INLINE void pt_bf16(const float *p, ptrdiff_t p_stride, const float *x,
                                ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim, float *acc,
                                ptrdiff_t acc_stride)
{
    pv_rows(ATTN_KV_F32, 1, 1, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride, NULL);
}

/* The integers of block b of a Q8_0 / Q4_0 row (the value is n * scale). */
ATTN_SCALAR_INLINE int block_int(int dt, const unsigned char *row, size_t b, size_t i)
{
    const unsigned char *blk = row + b * attn_kv_unit_bytes(dt);
    if (dt == ATTN_KV_Q8_0)
        return (int8_t)blk[2 + i];
    return (i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4) - 8;
}

/* int8 mode: per 32-block, the exact integer dot of q's quantized block
   with k's, times fl(dk * dq), summed over the blocks in order. */
ATTN_SCALAR_INLINE void qk_i8(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                              ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                              float *s, ptrdiff_t s_stride)
{
    const uintptr_t step = (uintptr_t)k_stride * attn_kv_unit_bytes(dt);
    const size_t nb = d / ATTN_QBLOCK; /* k rows are whole blocks */
    attn_q8_block qb[ATTN_MAX_HEAD_DIM / ATTN_QBLOCK];
    for (size_t r = 0; r < nq; r++) {
        const float *qr = q + (ptrdiff_t)r * q_stride;
        for (size_t b = 0; b < nb; b++)
            attn_q8_quantize(qr + b * ATTN_QBLOCK, &qb[b]);
        for (size_t c = 0; c < nk; c++) {
            const unsigned char *row = attn_kv_row(k, c, step);
            float dot = 0.0f;
            for (size_t b = 0; b < nb; b++) {
                int32_t isum = 0;
                for (size_t i = 0; i < ATTN_QBLOCK; i++)
                    isum += qb[b].n[i] * block_int(dt, row, b, i);
                dot += (float)isum * (block_scale(row + b * attn_kv_unit_bytes(dt)) * qb[b].dq);
            }
            s[(ptrdiff_t)r * s_stride + (ptrdiff_t)c] = dot * scale;
        }
    }
}

/* the dot files of the list (bf16, int8, bf16 P.V of quantized v): the
   oracle needs no instructions */
ATTN_TILE_FILE(dot, scalar, scalar)
ATTN_TILE_FILE(dot_i8, scalar, scalar)
ATTN_TILE_FILE(dot_qv, scalar, scalar)

/* SPDX-License-Identifier: MIT */
/*
 * The scalar tile family's one body, for every K/V dtype: qk_tile, pv_tile
 * and to_f32 as always-inline functions of an ATTN_KV_* dtype, which
 * enters only through load_kv (value t of a row) and the row step
 * (src/tile_variants.h). tile_scalar.c (the float dtypes) and
 * quant_scalar.c (the quantized ones) instantiate it (ATTN_TILE_FILE);
 * the bf16 mode's oracle (src/scalar/dot_scalar.c) runs the same loops,
 * qk_rows and pv_rows, on factors rounded to bf16.
 *
 * It is the oracle: one product and one add per value, in index order
 * (the scalar files are compiled with -ffp-contract=off, src/meson.build),
 * which is what the bounds of tests/tolerance.h assume of it. Every
 * decoded value is exact in f32.
 */
#ifndef ATTN_TILE_SCALAR_TMPL_H
#define ATTN_TILE_SCALAR_TMPL_H

#include <string.h>

#include "half.h"
#include "lowp.h"
#include "quant.h"
#include "tile_variants.h"

#define ATTN_SCALAR_INLINE static inline __attribute__((always_inline))

/* No NaN scan (tile_variants.h): every E4M3 value is decoded with its check. */
#define ATTN_E4M3_FINITE(base, stride, rows, n) 0

ATTN_SCALAR_INLINE float block_scale(const unsigned char *blk)
{
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return attn_f16_to_f32(h);
}

/* Value t of a K/V row of dtype dt (row: the row's first byte). */
ATTN_SCALAR_INLINE float load_kv(int dt, const unsigned char *row, size_t t)
{
    switch (dt) {
    case ATTN_KV_F32: return ((const float *)row)[t];
    case ATTN_KV_F16: return attn_f16_to_f32(((const uint16_t *)row)[t]);
    case ATTN_KV_BF16: return attn_bf16_to_f32(((const uint16_t *)row)[t]);
    case ATTN_KV_Q8_0: {
        const unsigned char *blk = row + t / ATTN_QBLOCK * ATTN_Q8_0_BYTES;
        return (float)(int8_t)blk[2 + t % ATTN_QBLOCK] * block_scale(blk);
    }
    case ATTN_KV_Q4_0: {
        const unsigned char *blk = row + t / ATTN_QBLOCK * ATTN_Q4_0_BYTES;
        const size_t i = t % ATTN_QBLOCK;
        const int nibble = i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4;
        return (float)(nibble - 8) * block_scale(blk);
    }
    case ATTN_KV_FP8_E5M2: return attn_e5m2_to_f32(row[t]); /* the bare E5M2 value */
    default: return attn_e4m3_to_f32(row[t]); /* FP8: the bare E4M3 value */
    }
}

/* Value t of key row c with its scale group's factor (gs: src/dsp.h,
   qk_grp), or without (gs NULL): one f32 product, to_f32_scaled's value. */
ATTN_SCALAR_INLINE float load_kv_at(int dt, const attn_grp *gs, const unsigned char *row,
                                    size_t c, size_t t)
{
    const float x = load_kv(dt, row, t);
    return gs ? x * attn_grp_row(gs, c)[t / gs->g] : x;
}

/* A factor of a product as the oracle multiplies it: as given, or (bf16:
   the bf16 mode's oracle, src/scalar/dot_scalar.c) rounded to bf16 by
   src/lowp.h's rule. bf16 is a constant of each instantiation. */
ATTN_SCALAR_INLINE float factor(int bf16, float x)
{
    return bf16 ? attn_bf16_round(x) : x;
}

/* s = scale * q . k per row and key, one product and one add per value
   in index order; with bf16 set, the factors rounded first; with gs, each
   k value times its group's scale (load_kv_at). */
ATTN_SCALAR_INLINE void qk_rows(int dt, int bf16, const float *q, ptrdiff_t q_stride,
                                const void *k, ptrdiff_t k_stride, size_t nq, size_t nk,
                                size_t d, float scale, float *s, ptrdiff_t s_stride,
                                const attn_grp *gs)
{
    const uintptr_t step = (uintptr_t)k_stride * attn_kv_unit_bytes(dt);
    for (size_t r = 0; r < nq; r++) {
        const float *qr = q + (ptrdiff_t)r * q_stride;
        for (size_t c = 0; c < nk; c++) {
            const unsigned char *row = attn_kv_row(k, c, step);
            float dot = 0.0f;
            for (size_t t = 0; t < d; t++)
                dot += factor(bf16, qr[t]) * factor(bf16, load_kv_at(dt, gs, row, c, t));
            s[(ptrdiff_t)r * s_stride + (ptrdiff_t)c] = dot * scale;
        }
    }
}

/* Columns of the running sums of a fresh pv_rows (256 bytes of stack). */
#define PV_FRESH_COLS 64

/* acc += p . v, key by key, key c's weight of row r at p[r * p_stride + c *
   p_step] (p_step 1 for P's rows; the backward's P^T X passes P's row
   stride, backward_scalar.c); with bf16 set, the factors rounded first;
   with gs, as qk_rows. Without fresh each product is added onto acc in
   turn (the forward's P.V); with fresh (the backward's P^T X: a constant
   of each caller) each element sums the call's products from zero, in
   order, and adds that sum to acc once: a block of the blocked sum whose
   error grows with the rows of a block plus the blocks (tests/tolerance.h,
   "backward"). */
ATTN_SCALAR_INLINE void pv_rows(int dt, int bf16, int fresh, const float *p, ptrdiff_t p_stride,
                                ptrdiff_t p_step, const void *v, ptrdiff_t v_stride, size_t nq,
                                size_t nk, size_t dv, float *acc, ptrdiff_t acc_stride,
                                const attn_grp *gs)
{
    const uintptr_t step = (uintptr_t)v_stride * attn_kv_unit_bytes(dt);
    for (size_t r = 0; r < nq; r++) {
        float *ar = acc + (ptrdiff_t)r * acc_stride;
        const float *pr = p + (ptrdiff_t)r * p_stride;
        for (size_t t0 = 0; fresh && t0 < dv; t0 += PV_FRESH_COLS) {
            const size_t w = dv - t0 < PV_FRESH_COLS ? dv - t0 : PV_FRESH_COLS;
            float sum[PV_FRESH_COLS] = {0.0f};
            for (size_t c = 0; c < nk; c++) {
                const unsigned char *row = attn_kv_row(v, c, step);
                const float wc = factor(bf16, pr[(ptrdiff_t)c * p_step]);
                for (size_t t = 0; t < w; t++)
                    sum[t] += wc * factor(bf16, load_kv_at(dt, gs, row, c, t0 + t));
            }
            for (size_t t = 0; t < w; t++)
                ar[t0 + t] += sum[t];
        }
        for (size_t c = 0; !fresh && c < nk; c++) {
            const unsigned char *row = attn_kv_row(v, c, step);
            const float w = factor(bf16, pr[(ptrdiff_t)c * p_step]);
            for (size_t t = 0; t < dv; t++)
                ar[t] += w * factor(bf16, load_kv_at(dt, gs, row, c, t));
        }
    }
}

ATTN_SCALAR_INLINE void qk_tile(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                float *s, ptrdiff_t s_stride)
{
    qk_rows(dt, 0, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, NULL);
}

/* one sum order for every tile shape */
ATTN_QK_DIAG_BY_TILE(ATTN_SCALAR_INLINE)

ATTN_SCALAR_INLINE void pv_tile(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                ptrdiff_t acc_stride)
{
    pv_rows(dt, 0, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride, NULL);
}

ATTN_SCALAR_INLINE void qk_grp(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                               ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                               float *s, ptrdiff_t s_stride, const attn_grp *gs)
{
    qk_rows(dt, 0, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, gs);
}

ATTN_SCALAR_INLINE void pv_grp(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                               ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                               ptrdiff_t acc_stride, const attn_grp *gs)
{
    pv_rows(dt, 0, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride, gs);
}

ATTN_SCALAR_INLINE void to_f32(int dt, const void *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = load_kv(dt, (const unsigned char *)src, i);
}

#endif /* ATTN_TILE_SCALAR_TMPL_H */

/*
 * The per-dtype entry points of a SIMD module's tile family, written once
 * for every ISA: each tile_<isa>.c and quant_<isa>.c includes its ISA's
 * body (src/x86/tile_<isa>_body.h, src/arm/tile_<isa>_body.h), which defines
 * qk_tile, pv_tile and to_f32 as always-inline functions whose first
 * argument is an ATTN_KV_* dtype, and instantiates them here, one set of
 * table entries per K/V dtype (the kernel names of docs/DESIGN.md §2.2).
 *
 *   ATTN_TILE_VARIANT(dt, ID, isa)  defines attn_qk_tile_<dt>_<isa>,
 *                                   attn_pv_tile_<dt>_<isa> and
 *                                   attn_to_f32_<dt>_<isa> for ATTN_KV_<ID>
 *   ATTN_TILE_SLOTS(t, dt, ID, isa) fills those three slots of table t
 */
#ifndef ATTN_TILE_VARIANTS_H
#define ATTN_TILE_VARIANTS_H

#include "dsp.h"

#define ATTN_TILE_VARIANT(dt, ID, isa)                                                       \
    static void attn_qk_tile_##dt##_##isa(const float *q, ptrdiff_t q_stride, const void *k, \
                                          ptrdiff_t k_stride, size_t nq, size_t nk,          \
                                          size_t d, float scale, float *s,                   \
                                          ptrdiff_t s_stride)                                \
    {                                                                                        \
        qk_tile(ATTN_KV_##ID, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);      \
    }                                                                                        \
    static void attn_pv_tile_##dt##_##isa(const float *p, ptrdiff_t p_stride, const void *v, \
                                          ptrdiff_t v_stride, size_t nq, size_t nk,          \
                                          size_t dv, float *acc, ptrdiff_t acc_stride)       \
    {                                                                                        \
        pv_tile(ATTN_KV_##ID, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);        \
    }                                                                                        \
    static void attn_to_f32_##dt##_##isa(const void *src, float *dst, size_t n)              \
    {                                                                                        \
        to_f32(ATTN_KV_##ID, src, dst, n);                                                   \
    }

#define ATTN_TILE_SLOTS(t, dt, ID, isa)                                                      \
    do {                                                                                     \
        (t)->qk_tile[ATTN_KV_##ID] = attn_qk_tile_##dt##_##isa;                              \
        (t)->pv_tile[ATTN_KV_##ID] = attn_pv_tile_##dt##_##isa;                              \
        (t)->to_f32[ATTN_KV_##ID] = attn_to_f32_##dt##_##isa;                                \
    } while (0)

#endif /* ATTN_TILE_VARIANTS_H */

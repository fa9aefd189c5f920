/* SPDX-License-Identifier: MIT */
/*
 * The per-dtype entry points of every ISA's tile family. Contract: a body
 * defines qk_tile, qk_diag, pv_tile and to_f32 (and, per file, the slots
 * src/kernel_list.h names) as always-inline functions whose first argument
 * is an ATTN_KV_* dtype, and ATTN_E4M3_FINITE (below); the file then ends
 * with ATTN_TILE_FILE(file, isa, ext), one kernel per row of the list and
 * the file's init.
 *
 * Row addresses are unsigned arithmetic from the stride in units
 * (src/prefetch.h says why: a dimension of extent 1 may carry any stride).
 */
#ifndef ATTN_TILE_VARIANTS_H
#define ATTN_TILE_VARIANTS_H

#include <stddef.h>
#include <stdint.h>

#include "dsp.h"

/*
 * The NaN fix-up of S.1111.111 costs a third of an E4M3 load, and a cache
 * rarely holds one: a body whose ATTN_E4M3_FINITE(base, stride, rows, n)
 * finds no NaN byte (the scan leaves the rows in L1) runs the tile at
 * ATTN_KV_E4M3_FINITE, whose loads skip it; the values are the same. A body
 * without a scan defines it as 0 and never sees that dtype.
 */
#define ATTN_KV_DT_MASK 0xff
#define ATTN_KV_E4M3_FINITE (ATTN_KV_FP8_E4M3 | 0x100)
#define ATTN_E4M3_SCANNED(dt, base, stride, rows, n, call)                                   \
    do {                                                                                     \
        if ((dt) == ATTN_KV_FP8_E4M3 && ATTN_E4M3_FINITE(base, stride, rows, n))             \
            call(ATTN_KV_E4M3_FINITE);                                                       \
        else                                                                                 \
            call(dt);                                                                        \
    } while (0)

/*
 * CALL(n) for the rest < max left by a loop in steps of max, n a constant so
 * that the micro-kernel unrolls for it. rest >= max is a caller's bug the
 * compiler may assume away; cases past max call CALL(1), so no out-of-range
 * shape is compiled.
 */
#define ATTN_TAIL_MAX 8
#define ATTN_TAIL_N(n, max) ((n) < (max) ? (n) : 1)
#define ATTN_TAIL(rest, max, CALL)                                                           \
    do {                                                                                     \
        _Static_assert((max) >= 1 && (max) <= ATTN_TAIL_MAX, "ATTN_TAIL: max out of range"); \
        const size_t attn_tail_rest = (rest);                                                \
        if (attn_tail_rest >= (size_t)(max))                                                 \
            __builtin_unreachable();                                                         \
        switch (attn_tail_rest) {                                                            \
        case 7: CALL(ATTN_TAIL_N(7, max)); break;                                            \
        case 6: CALL(ATTN_TAIL_N(6, max)); break;                                            \
        case 5: CALL(ATTN_TAIL_N(5, max)); break;                                            \
        case 4: CALL(ATTN_TAIL_N(4, max)); break;                                            \
        case 3: CALL(ATTN_TAIL_N(3, max)); break;                                            \
        case 2: CALL(ATTN_TAIL_N(2, max)); break;                                            \
        case 1: CALL(1); break;                                                              \
        default: break;                                                                      \
        }                                                                                    \
    } while (0)

#define ATTN_TILE_KERNEL(slot, dt, kind, isa) ATTN_TILE_KERNEL_##slot(dt, isa)
#define ATTN_TILE_KERNEL_qk_tile(dt, isa)                                                    \
    static void attn_qk_tile_##dt##_##isa(const float *q, ptrdiff_t q_stride, const void *k, \
                                          ptrdiff_t k_stride, size_t nq, size_t nk,          \
                                          size_t d, float scale, float *s,                   \
                                          ptrdiff_t s_stride)                                \
    {                                                                                        \
        qk_tile(ATTN_KV_IDX(dt), q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);   \
    }
#define ATTN_TILE_KERNEL_pv_tile(dt, isa)                                                    \
    static void attn_pv_tile_##dt##_##isa(const float *p, ptrdiff_t p_stride, const void *v, \
                                          ptrdiff_t v_stride, size_t nq, size_t nk,          \
                                          size_t dv, float *acc, ptrdiff_t acc_stride)       \
    {                                                                                        \
        pv_tile(ATTN_KV_IDX(dt), p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);     \
    }
#define ATTN_TILE_KERNEL_qk_diag(dt, isa)                                                    \
    static void attn_qk_diag_##dt##_##isa(const float *q, ptrdiff_t q_stride,                \
                                          const void *const *rows, size_t nq, size_t d,      \
                                          float scale, float *s)                             \
    {                                                                                        \
        qk_diag(ATTN_KV_IDX(dt), q, q_stride, rows, nq, d, scale, s);                        \
    }
/* Only for a body whose qk_tile sums every score in one order whatever the
   tile's shape: each row as a 1 x 1 tile. */
#define ATTN_QK_DIAG_BY_TILE(attrs)                                                          \
    attrs void qk_diag(int dt, const float *q, ptrdiff_t q_stride, const void *const *rows,  \
                       size_t nq, size_t d, float scale, float *s)                           \
    {                                                                                        \
        for (size_t r = 0; r < nq; r++)                                                      \
            qk_tile(dt, q + (ptrdiff_t)r * q_stride, q_stride, rows[r], 0, 1, 1, d, scale,   \
                    s + r, 1);                                                               \
    }
#define ATTN_TILE_KERNEL_to_f32(dt, isa)                                                     \
    static void attn_to_f32_##dt##_##isa(const void *src, float *dst, size_t n)              \
    {                                                                                        \
        ATTN_E4M3_SCANNED((int)ATTN_KV_IDX(dt), src, 0, 1, n, ATTN_TO_F32_CALL);             \
    }
#define ATTN_TO_F32_CALL(t) to_f32(t, src, dst, n)
/* The scaling loop is vectorised by the compiler for the file's ISA. */
#define ATTN_TO_F32_ROW(t) to_f32(t, x, y, n)
#define ATTN_TILE_KERNEL_to_f32_scaled(dt, isa)                                              \
    static void attn_to_f32_scaled_##dt##_##isa(                                             \
        const void *src, ptrdiff_t src_stride, size_t rows, size_t n, const float *scales,   \
        ptrdiff_t scale_stride, size_t group, float *dst, ptrdiff_t dst_stride)              \
    {                                                                                        \
        for (size_t r = 0; r < rows; r++) {                                                  \
            float *y = dst + (ptrdiff_t)r * dst_stride;                                      \
            const float *sc = scales + (ptrdiff_t)r * scale_stride;                          \
            const void *x = (const char *)src + (ptrdiff_t)r * src_stride;                   \
            ATTN_E4M3_SCANNED((int)ATTN_KV_IDX(dt), x, 0, 1, n, ATTN_TO_F32_ROW);            \
            for (size_t c = 0; c < n / group; c++) {                                         \
                const float f = sc[c];                                                       \
                float *yc = y + c * group;                                                   \
                for (size_t i = 0; i < group; i++)                                           \
                    yc[i] *= f;                                                              \
            }                                                                                \
        }                                                                                    \
    }

/* The bodies' shared loops take NULL for the plain kernels, a constant the
   compiler folds away. */
typedef struct attn_grp {
    const float *s;
    ptrdiff_t step;  /* floats between keys' scales */
    size_t g;        /* values per scale, a multiple of ATTN_GRP_STEP */
} attn_grp;

static inline __attribute__((always_inline)) const float *attn_grp_row(const attn_grp *gs, size_t c)
{
    return gs->s + (ptrdiff_t)c * gs->step;
}

/* For a loop over ascending t from 0: whether t starts the next group. */
static inline __attribute__((always_inline)) int attn_grp_next(const attn_grp *gs, size_t t,
                                                               size_t *gend, size_t *gi)
{
    if (t < *gend)
        return 0;
    *gi = t / gs->g;
    *gend = (*gi + 1) * gs->g;
    return 1;
}

#define ATTN_TILE_KERNEL_qk_grp(dt, isa)                                                     \
    static void attn_qk_grp_##dt##_##isa(const float *q, ptrdiff_t q_stride, const void *k,  \
                                         ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, \
                                         float scale, float *s, ptrdiff_t s_stride,          \
                                         const float *scales, ptrdiff_t scale_stride,        \
                                         size_t group)                                       \
    {                                                                                        \
        const attn_grp gs = {scales, scale_stride, group};                                   \
        qk_grp(ATTN_KV_IDX(dt), q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, &gs); \
    }
#define ATTN_TILE_KERNEL_pv_grp(dt, isa)                                                     \
    static void attn_pv_grp_##dt##_##isa(const float *p, ptrdiff_t p_stride, const void *v,  \
                                         ptrdiff_t v_stride, size_t nq, size_t nk,           \
                                         size_t dv, float *acc, ptrdiff_t acc_stride,        \
                                         const float *scales, ptrdiff_t scale_stride,        \
                                         size_t group)                                       \
    {                                                                                        \
        const attn_grp gs = {scales, scale_stride, group};                                   \
        pv_grp(ATTN_KV_IDX(dt), p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride, &gs); \
    }

#define ATTN_TILE_KERNEL_qk_bf16(dt, isa) ATTN_TILE_KERNEL_QK(qk_bf16, dt, isa)
#define ATTN_TILE_KERNEL_qk_i8(dt, isa) ATTN_TILE_KERNEL_QK(qk_i8, dt, isa)
#define ATTN_TILE_KERNEL_QK(fn, dt, isa)                                                     \
    static void attn_##fn##_##dt##_##isa(const float *q, ptrdiff_t q_stride, const void *k,  \
                                         ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, \
                                         float scale, float *s, ptrdiff_t s_stride)          \
    {                                                                                        \
        fn(ATTN_KV_IDX(dt), q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);        \
    }
#define ATTN_TILE_KERNEL_pv_bf16(dt, isa)                                                    \
    static void attn_pv_bf16_##dt##_##isa(const float *p, ptrdiff_t p_stride, const void *v, \
                                          ptrdiff_t v_stride, size_t nq, size_t nk,          \
                                          size_t dv, float *acc, ptrdiff_t acc_stride)       \
    {                                                                                        \
        pv_bf16(ATTN_KV_IDX(dt), p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);     \
    }

#define ATTN_TILE_KERNEL_pt_bf16(dt, isa)                                                    \
    static void attn_pt_bf16_##dt##_##isa(const float *p, ptrdiff_t p_stride, const float *x, \
                                          ptrdiff_t x_stride, size_t nq, size_t nk,          \
                                          size_t dim, float *acc, ptrdiff_t acc_stride)      \
    {                                                                                        \
        pt_bf16(p, p_stride, x, x_stride, nq, nk, dim, acc, acc_stride);                     \
    }

#define ATTN_TILE_FILE(file, isa, ext)                                                       \
    ATTN_FILE_##file(ATTN_TILE_KERNEL, isa)                                                  \
    ATTN_KERNEL_FILE(file, isa, ext)

/* src/dtype_list.h's facts, folded for an instantiated body's constant dtype. */
static inline __attribute__((always_inline)) size_t attn_kv_unit_bytes(int dt)
{
    ATTN_DTYPE_GET(dt & ATTN_KV_DT_MASK, bytes, 1)
}

static inline __attribute__((always_inline)) int attn_kv_kind(int dt)
{
    ATTN_DTYPE_GET(dt & ATTN_KV_DT_MASK, kind, -1)
}

static inline __attribute__((always_inline)) int attn_kv_is_block(int dt)
{
    return attn_kv_kind(dt) == ATTN_DTYPE_KIND_QBLOCK;
}

/* The quantized dtypes: decoding costs more than widening. */
static inline __attribute__((always_inline)) int attn_kv_is_quant(int dt)
{
    return attn_kv_is_block(dt) || attn_kv_kind(dt) == ATTN_DTYPE_KIND_FP8;
}

static inline __attribute__((always_inline)) size_t attn_kv_row_bytes(int dt, size_t n)
{
    return n / (attn_kv_is_block(dt) ? ATTN_QBLOCK : 1) * attn_kv_unit_bytes(dt);
}

static inline __attribute__((always_inline)) const unsigned char *
attn_kv_row(const void *base, size_t c, uintptr_t step)
{
    return (const unsigned char *)((uintptr_t)base + (uintptr_t)c * step);
}

#endif /* ATTN_TILE_VARIANTS_H */

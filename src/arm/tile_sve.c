/* SPDX-License-Identifier: MIT */
/*
 * SVE tile kernels for the float dtypes, widened inside the loads. Loops
 * end under a svwhilelt predicate: any d or dv at any vector length, no
 * tail code. Register blocks are named variables (sizeless types form no
 * arrays); R, C and W are constants after inlining, so a smaller block
 * compiles the unused ones out.
 */
#include <arm_sve.h>

#include "dsp.h"
#include "arm/sve.h"
#include "prefetch.h"
#include "tile_variants.h"

/* Float dtypes only: no E4M3 tile, no NaN scan (tile_variants.h). */
#define ATTN_E4M3_FINITE(base, stride, rows, n) 0

/* ------------------------------------------------------------------ qk_tile */

/* As the NEON micro-kernel (up to 4 x 4 in 32 registers). The last step's
   inactive lanes leave the accumulators unchanged (merging FMA). */
#define QK_FMA(r, c)                                                                       \
    do {                                                                                   \
        if (R > (r) && C > (c))                                                            \
            a##r##c = svmla_f32_m(pg, a##r##c, x##r, y);                                   \
    } while (0)

#define QK_KEY(c)                                                                          \
    do {                                                                                   \
        if (C > (c)) {                                                                     \
            y = sve_load_kv(dtype, pg, k, (ptrdiff_t)(c) * k_stride + (ptrdiff_t)t);       \
            QK_FMA(0, c);                                                                  \
            QK_FMA(1, c);                                                                  \
            QK_FMA(2, c);                                                                  \
            QK_FMA(3, c);                                                                  \
        }                                                                                  \
    } while (0)

#define QK_STORE(r, c)                                                                     \
    do {                                                                                   \
        if (R > (r) && C > (c))                                                            \
            s[(ptrdiff_t)(r) * s_stride + (c)] = svaddv_f32(all, a##r##c) * scale;          \
    } while (0)

#define QK_STORE_ROW(r)                                                                    \
    do {                                                                                   \
        QK_STORE(r, 0);                                                                    \
        QK_STORE(r, 1);                                                                    \
        QK_STORE(r, 2);                                                                    \
        QK_STORE(r, 3);                                                                    \
    } while (0)

static ALWAYS_INLINE void qk_micro(int dtype, size_t R, size_t C, const float *q,
                                   ptrdiff_t q_stride, const void *k, ptrdiff_t k_stride,
                                   size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    const svbool_t all = svptrue_b32();
    const svfloat32_t zero = svdup_n_f32(0.0f);
    svfloat32_t a00 = zero, a01 = zero, a02 = zero, a03 = zero;
    svfloat32_t a10 = zero, a11 = zero, a12 = zero, a13 = zero;
    svfloat32_t a20 = zero, a21 = zero, a22 = zero, a23 = zero;
    svfloat32_t a30 = zero, a31 = zero, a32 = zero, a33 = zero;
    const size_t vl = svcntw();
    for (size_t t = 0; t < d; t += vl) {
        const svbool_t pg = sve_lanes(t, d);
        svfloat32_t x0 = svld1_f32(pg, q + t), x1 = zero, x2 = zero, x3 = zero, y;
        if (R > 1)
            x1 = svld1_f32(pg, q + q_stride + (ptrdiff_t)t);
        if (R > 2)
            x2 = svld1_f32(pg, q + 2 * q_stride + (ptrdiff_t)t);
        if (R > 3)
            x3 = svld1_f32(pg, q + 3 * q_stride + (ptrdiff_t)t);
        QK_KEY(0);
        QK_KEY(1);
        QK_KEY(2);
        QK_KEY(3);
    }
    /* the scalar kernel's order too: the dot product, then one multiply */
    QK_STORE_ROW(0);
    QK_STORE_ROW(1);
    QK_STORE_ROW(2);
    QK_STORE_ROW(3);
}

#undef QK_FMA
#undef QK_KEY
#undef QK_STORE
#undef QK_STORE_ROW

#define QK_ROWS 4
#define QK_KEYS 4

static ALWAYS_INLINE void qk_rows(int dtype, size_t C, const float *q, ptrdiff_t q_stride,
                                  const void *k, ptrdiff_t k_stride, size_t nq, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    size_t r = 0;
    for (; r + QK_ROWS <= nq; r += QK_ROWS)
        qk_micro(dtype, QK_ROWS, C, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, d,
                 scale, s + (ptrdiff_t)r * s_stride, s_stride);
    const float *qr = q + (ptrdiff_t)r * q_stride;
    float *sr = s + (ptrdiff_t)r * s_stride;
    switch (nq - r) {
    case 3:
        qk_micro(dtype, 3, C, qr, q_stride, k, k_stride, d, scale, sr, s_stride);
        break;
    case 2:
        qk_micro(dtype, 2, C, qr, q_stride, k, k_stride, d, scale, sr, s_stride);
        break;
    case 1:
        qk_micro(dtype, 1, C, qr, q_stride, k, k_stride, d, scale, sr, s_stride);
        break;
    default:
        break;
    }
}

/* Fewer rows make a tile a stream of K and V: prefetch, one V pass. */
#define FEW_ROWS 16

/* Keys outermost: a group of k rows stays in L1 while every query row
   passes over it. */
static ALWAYS_INLINE void qk_tile(int dtype, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    const size_t esize = attn_kv_unit_bytes(dtype);
    const uintptr_t step = (uintptr_t)k_stride * esize;
    const size_t ahead = nq < FEW_ROWS ? attn_prefetch_rows_ahead(d * esize) : 0;
    size_t c = 0;
    for (; c + QK_KEYS <= nk; c += QK_KEYS) {
        if (ahead)
            attn_prefetch_rows(k, c + ahead, k_stride, esize, QK_KEYS, d * esize);
        qk_rows(dtype, QK_KEYS, q, q_stride, attn_kv_row(k, c, step), k_stride, nq, d, scale,
                s + c, s_stride);
    }
    const void *kc = attn_kv_row(k, c, step);
    switch (nk - c) {
    case 3:
        qk_rows(dtype, 3, q, q_stride, kc, k_stride, nq, d, scale, s + c, s_stride);
        break;
    case 2:
        qk_rows(dtype, 2, q, q_stride, kc, k_stride, nq, d, scale, s + c, s_stride);
        break;
    case 1:
        qk_rows(dtype, 1, q, q_stride, kc, k_stride, nq, d, scale, s + c, s_stride);
        break;
    default:
        break;
    }
}

/* one sum order for every tile shape */
ATTN_QK_DIAG_BY_TILE(static ALWAYS_INLINE)

/* ------------------------------------------------------------------ pv_tile */

/* R x W accumulators in registers while the keys stream by; each vector has
   its own predicate, so the last may be partial. */
#define PV_ACC_LOAD(r, w)                                                                  \
    do {                                                                                   \
        if (R > (r) && W > (w))                                                            \
            a##r##w = svld1_f32(p##w, acc + (ptrdiff_t)(r) * acc_stride + (ptrdiff_t)(w * vl)); \
    } while (0)

#define PV_ACC_STORE(r, w)                                                                 \
    do {                                                                                   \
        if (R > (r) && W > (w))                                                            \
            svst1_f32(p##w, acc + (ptrdiff_t)(r) * acc_stride + (ptrdiff_t)(w * vl), a##r##w); \
    } while (0)

#define PV_FMA(r, w)                                                                       \
    do {                                                                                   \
        if (R > (r) && W > (w))                                                            \
            a##r##w = svmla_n_f32_m(p##w, a##r##w, v##w, p_row##r[c]);                     \
    } while (0)

#define PV_ALL(M, w)                                                                       \
    do {                                                                                   \
        M(0, w);                                                                           \
        M(1, w);                                                                           \
        M(2, w);                                                                           \
        M(3, w);                                                                           \
    } while (0)

#define PV_EVERY(M)                                                                        \
    do {                                                                                   \
        PV_ALL(M, 0);                                                                      \
        PV_ALL(M, 1);                                                                      \
        PV_ALL(M, 2);                                                                      \
        PV_ALL(M, 3);                                                                      \
    } while (0)

static ALWAYS_INLINE void pv_micro(int dtype, size_t R, size_t W, const float *p,
                                   ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride,
                                   size_t nk, float *acc, ptrdiff_t acc_stride, size_t cols,
                                   size_t pf)
{
    const size_t vl = svcntw();
    const size_t v_esize = attn_kv_unit_bytes(dtype);
    const size_t ahead = pf ? attn_prefetch_rows_ahead(pf) : 0;
    const svbool_t p0 = sve_lanes(0, cols), p1 = sve_lanes(vl, cols);
    const svbool_t p2 = sve_lanes(2 * vl, cols), p3 = sve_lanes(3 * vl, cols);
    const svfloat32_t zero = svdup_n_f32(0.0f);
    svfloat32_t a00 = zero, a01 = zero, a02 = zero, a03 = zero;
    svfloat32_t a10 = zero, a11 = zero, a12 = zero, a13 = zero;
    svfloat32_t a20 = zero, a21 = zero, a22 = zero, a23 = zero;
    svfloat32_t a30 = zero, a31 = zero, a32 = zero, a33 = zero;
    /* rows past R are never read: their pointers only keep the macros uniform */
    const float *p_row0 = p, *p_row1 = p, *p_row2 = p, *p_row3 = p;
    if (R > 1)
        p_row1 = p + p_stride;
    if (R > 2)
        p_row2 = p + 2 * p_stride;
    if (R > 3)
        p_row3 = p + 3 * p_stride;
    PV_EVERY(PV_ACC_LOAD);
    for (size_t c = 0; c < nk; c++) {
        const ptrdiff_t row = (ptrdiff_t)c * v_stride;
        if (pf)
            attn_prefetch_rows(v, c + ahead, v_stride, v_esize, 1, pf);
        svfloat32_t v0 = sve_load_kv(dtype, p0, v, row), v1 = zero, v2 = zero, v3 = zero;
        if (W > 1)
            v1 = sve_load_kv(dtype, p1, v, row + (ptrdiff_t)vl);
        if (W > 2)
            v2 = sve_load_kv(dtype, p2, v, row + (ptrdiff_t)(2 * vl));
        if (W > 3)
            v3 = sve_load_kv(dtype, p3, v, row + (ptrdiff_t)(3 * vl));
        PV_EVERY(PV_FMA);
    }
    PV_EVERY(PV_ACC_STORE);
}

#undef PV_ACC_LOAD
#undef PV_ACC_STORE
#undef PV_FMA
#undef PV_ALL
#undef PV_EVERY

#define PV_ROWS 4
#define PV_VECS 4
/* Keys per pass with many rows: these v rows stay in L1 across chunks. */
#define PV_KEY_CHUNK 32

static ALWAYS_INLINE void pv_cols(int dtype, size_t R, const float *p, ptrdiff_t p_stride,
                                  const void *v, ptrdiff_t v_stride, size_t nk, size_t dv,
                                  size_t pf, float *acc, ptrdiff_t acc_stride)
{
    const size_t esize = attn_kv_unit_bytes(dtype);
    const size_t vl = svcntw(), chunk = PV_VECS * vl;
    size_t j = 0;
    for (; j + chunk <= dv; j += chunk)
        pv_micro(dtype, R, PV_VECS, p, p_stride, (const char *)v + j * esize, v_stride, nk,
                 acc + j, acc_stride, chunk, j == 0 ? pf : 0);
    if (j)
        pf = 0;
    const size_t rest = dv - j;
    const void *vj = (const char *)v + j * esize;
    switch ((rest + vl - 1) / vl) {
    case 4: /* only the last vector is partial */
        pv_micro(dtype, R, 4, p, p_stride, vj, v_stride, nk, acc + j, acc_stride, rest, pf);
        break;
    case 3:
        pv_micro(dtype, R, 3, p, p_stride, vj, v_stride, nk, acc + j, acc_stride, rest, pf);
        break;
    case 2:
        pv_micro(dtype, R, 2, p, p_stride, vj, v_stride, nk, acc + j, acc_stride, rest, pf);
        break;
    case 1:
        pv_micro(dtype, R, 1, p, p_stride, vj, v_stride, nk, acc + j, acc_stride, rest, pf);
        break;
    default: /* 0 */
        break;
    }
}

static ALWAYS_INLINE void pv_tile(int dtype, const float *p, ptrdiff_t p_stride, const void *v,
                                  ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,
                                  float *acc, ptrdiff_t acc_stride)
{
    const size_t esize = attn_kv_unit_bytes(dtype);
    const uintptr_t step = (uintptr_t)v_stride * esize;
    /* few rows: one pass over the tile, prefetching V
       (src/x86/tile_avx2_tmpl.h says why) */
    const int few = nq < FEW_ROWS;
    const size_t chunk = few ? nk : PV_KEY_CHUNK, pf = few ? dv * esize : 0;
    for (size_t c0 = 0; c0 < nk; c0 += chunk) {
        const size_t n = nk - c0 < chunk ? nk - c0 : chunk;
        const void *vc = attn_kv_row(v, c0, step);
        const float *pc = p + c0;
        size_t r = 0;
        for (; r + PV_ROWS <= nq; r += PV_ROWS)
            pv_cols(dtype, PV_ROWS, pc + (ptrdiff_t)r * p_stride, p_stride, vc, v_stride, n, dv,
                    r == 0 ? pf : 0, acc + (ptrdiff_t)r * acc_stride, acc_stride);
        const float *pr = pc + (ptrdiff_t)r * p_stride;
        float *ar = acc + (ptrdiff_t)r * acc_stride;
        switch (nq - r) {
        case 3:
            pv_cols(dtype, 3, pr, p_stride, vc, v_stride, n, dv, r == 0 ? pf : 0, ar, acc_stride);
            break;
        case 2:
            pv_cols(dtype, 2, pr, p_stride, vc, v_stride, n, dv, r == 0 ? pf : 0, ar, acc_stride);
            break;
        case 1:
            pv_cols(dtype, 1, pr, p_stride, vc, v_stride, n, dv, r == 0 ? pf : 0, ar, acc_stride);
            break;
        default:
            break;
        }
    }
}

/* ------------------------------------------------------------------ to_f32 */

static ALWAYS_INLINE void to_f32(int dtype, const void *src, float *dst, size_t n)
{
    const size_t vl = svcntw();
    for (size_t i = 0; i < n; i += vl) {
        const svbool_t pg = sve_lanes(i, n);
        svst1_f32(pg, dst + i, sve_load_kv(dtype, pg, src, (ptrdiff_t)i));
    }
}

/* ------------------------------------------------------------------ variants */

ATTN_TILE_FILE(tile, sve, sve)

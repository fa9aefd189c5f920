/* SPDX-License-Identifier: MIT */
/*
 * The NEON tile family (qk_tile, pv_tile, to_f32), written once for every
 * K/V dtype and instantiated through src/tile_variants.h; a dtype enters only
 * through its loads (load4, load4_part). The blocking mirrors the AVX2
 * kernels (src/x86/tile_avx2_tmpl.h) with 4-lane vectors and 32 registers.
 * Tails go lane by lane: no kernel reads or writes past what it is given.
 * Row addresses are unsigned arithmetic (src/prefetch.h says why).
 */
#ifndef ATTN_ARM_TILE_NEON_TMPL_H
#define ATTN_ARM_TILE_NEON_TMPL_H

#include <arm_neon.h>
#include <string.h>

#include "dsp.h"
#include "arm/neon.h"
#include "prefetch.h"
#include "tile_variants.h"

/* Keeps the accumulator arrays in registers: -O2 (distribution builds) would
   not unroll these loops by itself. */
#define UNROLL _Pragma("GCC unroll 4")

/* ------------------------------------------------------------------ dtypes */

#define unit_bytes attn_kv_unit_bytes
#define is_block attn_kv_is_block
#define is_quant attn_kv_is_quant
#define row_bytes attn_kv_row_bytes
#define row_at attn_kv_row

static ALWAYS_INLINE float32x4_t widen_f16(uint16x4_t h)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

static ALWAYS_INLINE float32x4_t widen_bf16(uint16x4_t h)
{
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* The binary16 scale at the head of a block (unaligned). */
static ALWAYS_INLINE float block_scale(const unsigned char *blk)
{
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* 4 E4M3 values to f32, exactly: normals rebiased (+120); subnormals as
   2^-6 (1 + m/8) - 2^-6 = m 2^-9, so no f32 subnormal is formed and FPCR.FZ
   cannot change a value. S.1111.111 becomes NaN. */
static ALWAYS_INLINE float32x4_t fp8_4(int dt, int32x4_t w)
{
    const uint32x4_t mag = vandq_u32(vreinterpretq_u32_s32(vshlq_n_s32(w, 20)),
                                     vdupq_n_u32(0x07F00000u));
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_s32(vshlq_n_s32(w, 24)),
                                      vdupq_n_u32(0x80000000u));
    const float32x4_t normal = vreinterpretq_f32_u32(vaddq_u32(mag, vdupq_n_u32(120u << 23)));
    const float32x4_t sub = vsubq_f32(vreinterpretq_f32_u32(vaddq_u32(mag, vdupq_n_u32(121u << 23))),
                                      vdupq_n_f32(0x1p-6f));
    const uint32x4_t is_sub = vceqq_u32(vandq_u32(mag, vdupq_n_u32(0x07800000u)), vdupq_n_u32(0));
    const uint32x4_t is_nan = vceqq_u32(mag, vdupq_n_u32(0x07F00000u));
    float32x4_t v = vbslq_f32(is_sub, sub, normal);
    v = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(v), sign));
    if (dt == ATTN_KV_E4M3_FINITE)
        return v;
    return vbslq_f32(is_nan, vdupq_n_f32(__builtin_nanf("")), v);
}

/* No NaN byte in the rows: every low-seven-bits value is below 0x7f. */
static ALWAYS_INLINE int e4m3_finite(const void *base, ptrdiff_t stride, size_t rows, size_t n)
{
    const uint8x16_t low7 = vdupq_n_u8(0x7f);
    uint8x16_t mx = vdupq_n_u8(0);
    unsigned last = 0;
    for (size_t r = 0; r < rows; r++) {
        const unsigned char *row = attn_kv_row(base, r, (uintptr_t)stride);
        size_t t = 0;
        for (; t + 16 <= n; t += 16)
            mx = vmaxq_u8(mx, vandq_u8(vld1q_u8(row + t), low7));
        for (; t < n; t++)
            last |= (row[t] & 0x7fu) == 0x7fu;
    }
    return !last && vmaxvq_u8(mx) != 0x7f;
}
#define ATTN_E4M3_FINITE(base, stride, rows, n) e4m3_finite(base, stride, rows, n)

static ALWAYS_INLINE float32x4_t load4(int dt, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_F32)
        return vld1q_f32((const float *)row + t);
    if (dt == ATTN_KV_F16 || dt == ATTN_KV_BF16) {
        uint16x4_t h = vld1_u16((const uint16_t *)row + t);
        return dt == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
    }
    if ((dt & ATTN_KV_DT_MASK) == ATTN_KV_FP8_E4M3) {
        uint32_t b;
        memcpy(&b, row + t, sizeof b);
        const int8x8_t x = vreinterpret_s8_u32(vdup_n_u32(b));
        return fp8_4(dt, vmovl_s16(vget_low_s16(vmovl_s8(x))));
    }
    if (dt == ATTN_KV_FP8_E5M2) { /* the upper halves of binary16 values */
        uint32_t b;
        memcpy(&b, row + t, sizeof b);
        const uint8x8_t x = vreinterpret_u8_u32(vdup_n_u32(b));
        return widen_f16(vget_low_u16(vshll_n_u8(x, 8)));
    }
    const unsigned char *blk = row + t / ATTN_QBLOCK * unit_bytes(dt);
    const size_t i = t % ATTN_QBLOCK;
    uint32_t b;
    int32x4_t iv;
    if (dt == ATTN_KV_Q8_0) {
        memcpy(&b, blk + 2 + i, sizeof b);
        iv = vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(b)))));
    } else { /* Q4_0: values 16..31 in the high nibbles */
        memcpy(&b, blk + 2 + (i & 15), sizeof b);
        uint8x8_t x = vreinterpret_u8_u32(vdup_n_u32(b));
        x = i & 16 ? vshr_n_u8(x, 4) : vand_u8(x, vdup_n_u8(0x0f));
        iv = vsubq_s32(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(x)))),
                       vdupq_n_s32(8));
    }
    return vmulq_n_f32(vcvtq_f32_s32(iv), block_scale(blk));
}


/* The first n (1..3) values, zeros elsewhere (no block format). */
static ALWAYS_INLINE float32x4_t load4_part(int dt, const unsigned char *row, size_t t, size_t n)
{
    if (dt == ATTN_KV_F32)
        return load_part((const float *)row + t, n, 0.0f);
    if ((dt & ATTN_KV_DT_MASK) == ATTN_KV_FP8_E4M3 || dt == ATTN_KV_FP8_E5M2) {
        unsigned char buf[8] = {0};
        memcpy(buf, row + t, n);
        return load4(dt, buf, 0);
    }
    const uint16_t *p = (const uint16_t *)row + t;
    uint16x4_t h = vld1_lane_u16(p, vdup_n_u16(0), 0);
    if (n > 1)
        h = vld1_lane_u16(p + 1, h, 1);
    if (n > 2)
        h = vld1_lane_u16(p + 2, h, 2);
    return dt == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
}

static ALWAYS_INLINE float32x4_t reduce4(float32x4_t a, float32x4_t b, float32x4_t c,
                                         float32x4_t d)
{
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

/* ------------------------------------------------------------------ qk_tile */

/* Fewer rows make a tile a stream of K and V: prefetch, one V pass. */
#define FEW_ROWS 16

/* As the AVX2 micro-kernel, up to 4 x 4: 16 accumulators and 8 operands fit
   the 32 registers (AVX2's 16 stop at 3 x 4). */
#define QK_ROWS 4
#define QK_KEYS 4

static ALWAYS_INLINE void qk_micro_at(int dtype, size_t R, size_t C, const float *q,
                                      ptrdiff_t q_stride, const unsigned char *k, uintptr_t kb,
                                      size_t d, float scale, float *s, ptrdiff_t s_stride,
                                      const attn_grp *gs, size_t kc)
{
    float32x4_t ksc[QK_KEYS];
    for (size_t c = 0; c < C; c++)
        ksc[c] = vdupq_n_f32(0.0f);
    size_t gend = 0, gi = 0;
    float32x4_t acc[QK_ROWS][QK_KEYS];
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t c = 0; c < QK_KEYS; c++)
            acc[r][c] = vdupq_n_f32(0.0f);

    size_t t = 0;
    for (; t + 4 <= d; t += 4) { /* gs: d is whole groups of 16k values */
        float32x4_t qv[QK_ROWS];
        UNROLL
        for (size_t r = 0; r < R; r++)
            qv[r] = vld1q_f32(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
        if (gs && attn_grp_next(gs, t, &gend, &gi))
            for (size_t c = 0; c < C; c++)
                ksc[c] = vdupq_n_f32(attn_grp_row(gs, kc + c)[gi]);
        UNROLL
        for (size_t c = 0; c < C; c++) {
            float32x4_t kv = load4(dtype, row_at(k, c, kb), t);
            if (gs)
                kv = vmulq_f32(kv, ksc[c]);
            UNROLL
            for (size_t r = 0; r < R; r++)
                acc[r][c] = vfmaq_f32(acc[r][c], qv[r], kv);
        }
    }
    if (t < d) {
        size_t n = d - t;
        float32x4_t qv[QK_ROWS];
        UNROLL
        for (size_t r = 0; r < R; r++)
            qv[r] = load_part(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t, n, 0.0f);
        UNROLL
        for (size_t c = 0; c < C; c++) {
            float32x4_t kv = load4_part(dtype, row_at(k, c, kb), t, n);
            UNROLL
            for (size_t r = 0; r < R; r++)
                acc[r][c] = vfmaq_f32(acc[r][c], qv[r], kv);
        }
    }

    const float32x4_t vscale = vdupq_n_f32(scale);
    UNROLL
    for (size_t r = 0; r < R; r++) {
        float32x4_t dots =
            vmulq_f32(reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]), vscale);
        float *sr = s + (ptrdiff_t)r * s_stride;
        if (C == 4)
            vst1q_f32(sr, dots);
        else
            store_part(sr, dots, C);
    }
}

/* few rows stream K from memory */
#define QK_PREFETCH_AHEAD(nq, bytes) ((nq) < FEW_ROWS ? attn_prefetch_rows_ahead(bytes) : 0)
#include "qk_dot_tmpl.h"

static ALWAYS_INLINE void qk_tile(int dtype, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    qk_tile_dot(dtype, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, NULL);
}

/* one sum order for every tile shape */
ATTN_QK_DIAG_BY_TILE(static ALWAYS_INLINE)

/* ------------------------------------------------------------------ pv_tile */

/* R x W accumulators in registers while a chunk's keys stream by, four at a
   time: one load takes four weights, used by element (fmla), so no weight
   is broadcast separately. */
#define PV_ROWS 4
#define PV_VECS 4
/* Keys per pass with many rows: these v rows stay in L1 across chunks. */
#define PV_KEY_CHUNK 32

static ALWAYS_INLINE void pv_load_v(int dtype, size_t W, size_t tail, const void *v,
                                    uintptr_t vb, size_t j0, size_t row, float32x4_t *vv,
                                    const attn_grp *gs, const size_t *grp)
{
    const unsigned char *base = row_at(v, row, vb);
    UNROLL
    for (size_t w = 0; w < W; w++) {
        vv[w] = (tail && w == W - 1) ? load4_part(dtype, base, j0 + 4 * w, tail)
                                     : load4(dtype, base, j0 + 4 * w);
        if (gs)
            vv[w] = vmulq_n_f32(vv[w], attn_grp_row(gs, row)[grp[w]]);
    }
}

/* lane must be a constant */
#define PV_FMA_LANE(lane)                                                                  \
    do {                                                                                   \
        pv_load_v(dtype, W, tail, v, vb, j0, c + (lane), vv, gs, grp);             \
        UNROLL                                                                             \
        for (size_t r = 0; r < R; r++)                                                     \
            UNROLL                                                                         \
            for (size_t w = 0; w < W; w++)                                                 \
                a[r][w] = vfmaq_laneq_f32(a[r][w], vv[w], pr[r], (lane));                  \
    } while (0)

static ALWAYS_INLINE void pv_micro(int dtype, size_t R, size_t W, size_t tail, const float *p,
                                   ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride,
                                   size_t j0, size_t nk, size_t pf, float *acc,
                                   ptrdiff_t acc_stride, const attn_grp *gs)
{
    size_t grp[PV_VECS];
    for (size_t w = 0; gs && w < W; w++)
        grp[w] = (j0 + 4 * w) / gs->g;
    const size_t v_unit = unit_bytes(dtype);
    const uintptr_t vb = (uintptr_t)v_stride * v_unit;
    const size_t ahead = pf ? attn_prefetch_rows_ahead(pf) : 0;
    float32x4_t a[PV_ROWS][PV_VECS];
    float32x4_t vv[PV_VECS];
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t w = 0; w < W; w++) {
            const float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(4 * w);
            a[r][w] = (tail && w == W - 1) ? load_part(ar, tail, 0.0f) : vld1q_f32(ar);
        }
    size_t c = 0;
    for (; c + 4 <= nk; c += 4) {
        float32x4_t pr[PV_ROWS];
        if (pf)
            attn_prefetch_rows(v, c + ahead, v_stride, v_unit, 4, pf);
        UNROLL
        for (size_t r = 0; r < R; r++)
            pr[r] = vld1q_f32(p + (ptrdiff_t)r * p_stride + (ptrdiff_t)c);
        PV_FMA_LANE(0);
        PV_FMA_LANE(1);
        PV_FMA_LANE(2);
        PV_FMA_LANE(3);
    }
    for (; c < nk; c++) {
        pv_load_v(dtype, W, tail, v, vb, j0, c, vv, gs, grp);
        UNROLL
        for (size_t r = 0; r < R; r++) {
            const float weight = p[(ptrdiff_t)r * p_stride + (ptrdiff_t)c];
            UNROLL
            for (size_t w = 0; w < W; w++)
                a[r][w] = vfmaq_n_f32(a[r][w], vv[w], weight);
        }
    }
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t w = 0; w < W; w++) {
            float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(4 * w);
            if (tail && w == W - 1)
                store_part(ar, a[r][w], tail);
            else
                vst1q_f32(ar, a[r][w]);
        }
}

#undef PV_FMA_LANE

static ALWAYS_INLINE void pv_cols(int dtype, size_t R, const float *p, ptrdiff_t p_stride,
                                  const void *v, ptrdiff_t v_stride, size_t nk, size_t dv,
                                  size_t pf, float *acc, ptrdiff_t acc_stride, const attn_grp *gs)
{
    size_t j = 0;
    for (; j + 4 * PV_VECS <= dv; j += 4 * PV_VECS)
        pv_micro(dtype, R, PV_VECS, 0, p, p_stride, v, v_stride, j, nk,
                 j == 0 ? pf : 0, acc + j, acc_stride, gs);
    if (j)
        pf = 0;
    const size_t rest = dv - j, tail = rest % 4;
#define PV_COLS_TAIL(n) pv_micro(dtype, R, n, tail, p, p_stride, v, v_stride, j, nk, pf, acc + j, \
                                 acc_stride, gs)
    ATTN_TAIL((rest + 3) / 4, PV_VECS + 1, PV_COLS_TAIL);
#undef PV_COLS_TAIL
}

static ALWAYS_INLINE void pv_tile_at(int dtype, const float *p, ptrdiff_t p_stride,
                                     const void *v, ptrdiff_t v_stride, size_t nq, size_t nk,
                                     size_t dv, float *acc, ptrdiff_t acc_stride,
                                     const attn_grp *gs)
{
    const uintptr_t vb = (uintptr_t)v_stride * unit_bytes(dtype);
    /* few rows: one pass, as the AVX2 kernel (src/x86/tile_avx2_tmpl.h
       says why) */
    const int few = nq < FEW_ROWS || gs; /* pv_grp: one pass, its keys from 0 */
    const size_t chunk = few ? nk : PV_KEY_CHUNK, pf = few ? row_bytes(dtype, dv) : 0;
    for (size_t c0 = 0; c0 < nk; c0 += chunk) {
        const size_t n = nk - c0 < chunk ? nk - c0 : chunk;
        const unsigned char *vc = row_at(v, c0, vb);
        const float *pc = p + c0;
        size_t r = 0;
        for (; r + PV_ROWS <= nq; r += PV_ROWS)
            pv_cols(dtype, PV_ROWS, pc + (ptrdiff_t)r * p_stride, p_stride, vc, v_stride, n, dv,
                    r == 0 ? pf : 0, acc + (ptrdiff_t)r * acc_stride, acc_stride, gs);
        const float *pr = pc + (ptrdiff_t)r * p_stride;
        float *ar = acc + (ptrdiff_t)r * acc_stride;
#define PV_ROWS_TAIL(rows) pv_cols(dtype, rows, pr, p_stride, vc, v_stride, n, dv, r == 0 ? pf : 0, \
                                   ar, acc_stride, gs)
        ATTN_TAIL(nq - r, PV_ROWS, PV_ROWS_TAIL);
#undef PV_ROWS_TAIL
    }
}

static ALWAYS_INLINE void pv_tile(int dtype, const float *p, ptrdiff_t p_stride, const void *v,
                                  ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,
                                  float *acc, ptrdiff_t acc_stride)
{
    pv_tile_at(dtype, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride, NULL);
}

/* FP8 scale groups (src/dsp.h); qk_grp is src/qk_dot_tmpl.h's. */
static ALWAYS_INLINE void pv_grp(int dtype, const float *p, ptrdiff_t p_stride, const void *v,
                                 ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                 ptrdiff_t acc_stride, const attn_grp *gs)
{
    pv_tile_at(dtype, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride, gs);
}

/* ------------------------------------------------------------------ to_f32 */

static ALWAYS_INLINE void to_f32(int dtype, const void *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(dst + i, load4(dtype, src, i));
        vst1q_f32(dst + i + 4, load4(dtype, src, i + 4));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, load4(dtype, src, i));
    if (i < n)
        store_part(dst + i, load4_part(dtype, src, i, n - i), n - i);
}

#endif /* ATTN_ARM_TILE_NEON_TMPL_H */

/* SPDX-License-Identifier: MIT */
/*
 * The int8 mode's kernel (attn_precision, include/attn.h) on SDOT; with
 * ATTN_DOT_I8_MMLA on SMMLA (src/arm/dot_i8_mmla_neon.c), with
 * ATTN_DOT_I8_SVE on SVE's SMMLA (src/arm/dot_i8_sve.c): all three give the
 * same bits. q is quantized as src/lowp.h says (the same IEEE operations,
 * so the same bits) and the integer products are summed exactly (signed
 * bytes: Q4_0's nibbles less 8, no offset to undo). The result differs from
 * the scalar oracle only in the order of the f32 additions of the block
 * sums, each added with one FMA by fl(dk * dq).
 */
#include "lowp.h"
#include "tile_variants.h"
#include "arm/tile_neon_tmpl.h"

#if defined(ATTN_DOT_I8_SVE)
#define ATTN_DOT_I8_MMLA 1 /* the pair layout of the NEON SMMLA */
#include <arm_sve.h>
#include "arm/sve.h"
#if !defined(__ARM_FEATURE_SVE_MATMUL_INT8)
#error "dot_i8_sve.c needs the sve+i8mm flags of src/arm/meson.build"
#endif
#elif defined(ATTN_DOT_I8_MMLA)
#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "dot_i8_mmla_neon.c needs the i8mm flags of src/arm/meson.build"
#endif
#elif !defined(__ARM_FEATURE_DOTPROD)
#error "dot_i8_neon.c needs the dotprod flags of src/arm/meson.build"
#endif

/* A 4 KiB panel, for ATTN_TASK_STACK_BYTES. Past a chunk the sums wait in
   s, so these sizes do not change the bits. */
#if defined(ATTN_DOT_I8_SVE)
#define I8_KEYS (2 * svcntw())
#define I8_BLOCKS (svcntw() <= 4 ? 16 : 64 / svcntw())
#define I8_KS_PER_KEY 2 /* a pair's scales twice: (dk0, dk1, dk0, dk1) */
#else
#define I8_KEYS 8
#define I8_BLOCKS 16
#define I8_KS_PER_KEY 1
#endif
#define I8_PANEL_WORDS 1024
#define I8_SCALE_WORDS (I8_PANEL_WORDS / 8 * I8_KS_PER_KEY)
#define I8_ALIGN 16
#define I8_INLINE static ALWAYS_INLINE
#define I8_ROWS 4

/* src/lowp.h's attn_q8_quantize with the same IEEE operations, so the same
   bits. b->sum is left 0: nothing here needs it. */
static ALWAYS_INLINE void i8_quantize(const float *x, attn_q8_block *b)
{
    float32x4_t v[8];
    uint32x4_t nan = vdupq_n_u32(0);
    float32x4_t m4 = vdupq_n_f32(0.0f);
    for (size_t i = 0; i < 8; i++) {
        v[i] = vld1q_f32(x + 4 * i);
        nan = vorrq_u32(nan, vmvnq_u32(vceqq_f32(v[i], v[i])));
        m4 = vmaxq_f32(m4, vabsq_f32(v[i]));
    }
    const float dq = vmaxvq_u32(nan) ? NAN : vmaxvq_f32(m4) / 127.0f;
    b->sum = 0;
    if (attn_q8_special(b, dq))
        return;
    const float id = 1.0f / dq;
    b->dq = dq;
    int16x8_t h[4];
    for (size_t i = 0; i < 4; i++) {
        int32x4_t n0 = vcvtnq_s32_f32(vmulq_n_f32(v[2 * i], id));
        int32x4_t n1 = vcvtnq_s32_f32(vmulq_n_f32(v[2 * i + 1], id));
        n0 = vmaxq_s32(vminq_s32(n0, vdupq_n_s32(127)), vdupq_n_s32(-127));
        n1 = vmaxq_s32(vminq_s32(n1, vdupq_n_s32(127)), vdupq_n_s32(-127));
        h[i] = vcombine_s16(vmovn_s32(n0), vmovn_s32(n1));
    }
    vst1q_s8(b->n, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
    vst1q_s8(b->n + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
}

static ALWAYS_INLINE void i8_block(int dt, const unsigned char *blk, int8x16_t *lo, int8x16_t *hi)
{
    if (dt == ATTN_KV_Q8_0) {
        *lo = vld1q_s8((const int8_t *)(blk + 2));
        *hi = vld1q_s8((const int8_t *)(blk + 18));
        return;
    }
    const uint8x16_t x = vld1q_u8(blk + 2);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(x, 4)), vdupq_n_s8(8));
}

static ALWAYS_INLINE void i8_load_row(const float *sr, size_t n0, size_t n1, int first,
                                      float32x4_t *y)
{
    y[0] = first ? vdupq_n_f32(0.0f) : n0 == 4 ? vld1q_f32(sr) : load_part(sr, n0, 0.0f);
    y[1] = first || !n1 ? vdupq_n_f32(0.0f)
                        : n1 == 4 ? vld1q_f32(sr + 4) : load_part(sr + 4, n1, 0.0f);
}

static ALWAYS_INLINE void i8_store_row(float *sr, const float32x4_t *y, size_t n0, size_t n1,
                                       int last, float scale)
{
    for (size_t h = 0; h < 2; h++) {
        const size_t n = h ? n1 : n0;
        const float32x4_t v = last ? vmulq_n_f32(y[h], scale) : y[h];
        if (n == 4)
            vst1q_f32(sr + 4 * h, v);
        else if (n)
            store_part(sr + 4 * h, v, n);
    }
}

#ifndef ATTN_DOT_I8_MMLA

/* kp[(b * 8 + w) * 8 + j] = dword w of block b of key j (zero past nkeys). */
static ALWAYS_INLINE void i8_pack(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys,
                                  size_t b0, size_t nb, uint32_t *kp, float *ks)
{
    const size_t unit = unit_bytes(dt);
    for (size_t b = 0; b < nb; b++)
        for (size_t g = 0; g < I8_KEYS; g += 4) {
            uint32x4_t lo[4], hi[4];
            for (size_t j = 0; j < 4; j++) {
                if (g + j < nkeys) {
                    const unsigned char *blk = row_at(k, g + j, kb) + (b0 + b) * unit;
                    int8x16_t l, h;
                    i8_block(dt, blk, &l, &h);
                    lo[j] = vreinterpretq_u32_s8(l);
                    hi[j] = vreinterpretq_u32_s8(h);
                    ks[b * I8_KEYS + g + j] = block_scale(blk);
                } else {
                    lo[j] = hi[j] = vdupq_n_u32(0);
                    ks[b * I8_KEYS + g + j] = 0.0f;
                }
            }
            transpose4(lo);
            transpose4(hi);
            for (size_t w = 0; w < 4; w++) {
                vst1q_u32(kp + (b * 8 + w) * I8_KEYS + g, lo[w]);
                vst1q_u32(kp + (b * 8 + w + 4) * I8_KEYS + g, hi[w]);
            }
        }
}

/* lane must be a constant */
#define I8_DOT(w, qv, lane)                                                                 \
    do {                                                                                    \
        const int8x16_t k0 = vreinterpretq_s8_u32(vld1q_u32(kp + (b * 8 + (w)) * I8_KEYS));  \
        const int8x16_t k1 =                                                                \
            vreinterpretq_s8_u32(vld1q_u32(kp + (b * 8 + (w)) * I8_KEYS + 4));              \
        UNROLL                                                                              \
        for (size_t r = 0; r < R; r++) {                                                    \
            is[r][0] = vdotq_laneq_s32(is[r][0], k0, qv[r], (lane));                        \
            is[r][1] = vdotq_laneq_s32(is[r][1], k1, qv[r], (lane));                        \
        }                                                                                   \
    } while (0)

static ALWAYS_INLINE void i8_rows(int dt, size_t R, const attn_q8_block *qb, size_t q_blocks,
                                  const uint32_t *kp, const float *ks, size_t nb, float *s,
                                  ptrdiff_t s_stride, size_t nkeys, int first, int last,
                                  float scale)
{
    (void)dt;
    const size_t n0 = nkeys < 4 ? nkeys : 4, n1 = nkeys > 4 ? nkeys - 4 : 0;
    float32x4_t acc[I8_ROWS][2];
    UNROLL
    for (size_t r = 0; r < R; r++)
        i8_load_row(s + (ptrdiff_t)r * s_stride, n0, n1, first, acc[r]);
    for (size_t b = 0; b < nb; b++) {
        int8x16_t qlo[I8_ROWS], qhi[I8_ROWS];
        int32x4_t is[I8_ROWS][2];
        UNROLL
        for (size_t r = 0; r < R; r++) {
            const attn_q8_block *x = &qb[r * q_blocks + b];
            qlo[r] = vld1q_s8(x->n);
            qhi[r] = vld1q_s8(x->n + 16);
            is[r][0] = is[r][1] = vdupq_n_s32(0);
        }
        I8_DOT(0, qlo, 0);
        I8_DOT(1, qlo, 1);
        I8_DOT(2, qlo, 2);
        I8_DOT(3, qlo, 3);
        I8_DOT(4, qhi, 0);
        I8_DOT(5, qhi, 1);
        I8_DOT(6, qhi, 2);
        I8_DOT(7, qhi, 3);
        const float32x4_t dk0 = vld1q_f32(ks + b * I8_KEYS), dk1 = vld1q_f32(ks + b * I8_KEYS + 4);
        UNROLL
        for (size_t r = 0; r < R; r++) {
            /* |integer block sum| < 2^24: converting is exact */
            const float dq = qb[r * q_blocks + b].dq;
            acc[r][0] = vfmaq_f32(acc[r][0], vcvtq_f32_s32(is[r][0]), vmulq_n_f32(dk0, dq));
            acc[r][1] = vfmaq_f32(acc[r][1], vcvtq_f32_s32(is[r][1]), vmulq_n_f32(dk1, dq));
        }
    }
    UNROLL
    for (size_t r = 0; r < R; r++)
        i8_store_row(s + (ptrdiff_t)r * s_stride, acc[r], n0, n1, last, scale);
}

#undef I8_DOT

#else /* ATTN_DOT_I8_MMLA */

/* For SMMLA: 16 bytes per key pair g and 8 values w, key 2g's then key
   2g + 1's; SVE's ks holds a pair's scales twice, as its sums' lanes. */
static ALWAYS_INLINE void i8_pack(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys,
                                  size_t b0, size_t nb, uint32_t *kp, float *ks)
{
    const size_t unit = unit_bytes(dt), G = I8_KEYS / 2;
    for (size_t b = 0; b < nb; b++)
        for (size_t g = 0; g < G; g++) {
            float dk[2];
            int64x2_t lo[2], hi[2];
            for (size_t x = 0; x < 2; x++) {
                const size_t j = 2 * g + x;
                if (j < nkeys) {
                    const unsigned char *blk = row_at(k, j, kb) + (b0 + b) * unit;
                    int8x16_t l, h;
                    i8_block(dt, blk, &l, &h);
                    lo[x] = vreinterpretq_s64_s8(l);
                    hi[x] = vreinterpretq_s64_s8(h);
                    dk[x] = block_scale(blk);
                } else {
                    lo[x] = hi[x] = vdupq_n_s64(0);
                    dk[x] = 0.0f;
                }
            }
#if defined(ATTN_DOT_I8_SVE)
            for (size_t x = 0; x < 4; x++)
                ks[(b * G + g) * 4 + x] = dk[x & 1];
#else
            ks[b * I8_KEYS + 2 * g] = dk[0];
            ks[b * I8_KEYS + 2 * g + 1] = dk[1];
#endif
            const int64x2_t w[4] = {vzip1q_s64(lo[0], lo[1]), vzip2q_s64(lo[0], lo[1]),
                                    vzip1q_s64(hi[0], hi[1]), vzip2q_s64(hi[0], hi[1])};
            for (size_t v = 0; v < 4; v++)
                vst1q_u32(kp + ((b * 4 + v) * G + g) * 4, vreinterpretq_u32_s64(w[v]));
        }
}

#if !defined(ATTN_DOT_I8_SVE)

/* As the SDOT i8_rows, per score the same block sums and f32 steps in the
   same order; an odd R's last pair has a zero row whose sums are dropped. */
static ALWAYS_INLINE void i8_rows(int dt, size_t R, const attn_q8_block *qb, size_t q_blocks,
                                  const uint32_t *kp, const float *ks, size_t nb, float *s,
                                  ptrdiff_t s_stride, size_t nkeys, int first, int last,
                                  float scale)
{
    (void)dt;
    const size_t n0 = nkeys < 4 ? nkeys : 4, n1 = nkeys > 4 ? nkeys - 4 : 0;
    const size_t P = (R + 1) / 2;
    float32x4_t acc[2][4];
    UNROLL
    for (size_t p = 0; p < P; p++) {
        float32x4_t ya[2], yb[2];
        i8_load_row(s + (ptrdiff_t)(2 * p) * s_stride, n0, n1, first, ya);
        if (2 * p + 1 < R)
            i8_load_row(s + (ptrdiff_t)(2 * p + 1) * s_stride, n0, n1, first, yb);
        else
            yb[0] = yb[1] = vdupq_n_f32(0.0f);
        UNROLL
        for (size_t h = 0; h < 2; h++) {
            acc[p][2 * h] = vcombine_f32(vget_low_f32(ya[h]), vget_low_f32(yb[h]));
            acc[p][2 * h + 1] = vcombine_f32(vget_high_f32(ya[h]), vget_high_f32(yb[h]));
        }
    }
    for (size_t b = 0; b < nb; b++) {
        int8x16_t a[2][4];
        float32x4_t dq[2];
        int32x4_t is[2][4];
        UNROLL
        for (size_t p = 0; p < P; p++) {
            const attn_q8_block *x0 = &qb[(2 * p) * q_blocks + b];
            const attn_q8_block *x1 = 2 * p + 1 < R ? &qb[(2 * p + 1) * q_blocks + b] : NULL;
            UNROLL
            for (size_t w = 0; w < 4; w++)
                a[p][w] = vcombine_s8(vld1_s8(x0->n + 8 * w),
                                      x1 ? vld1_s8(x1->n + 8 * w) : vdup_n_s8(0));
            dq[p] = vcombine_f32(vdup_n_f32(x0->dq), vdup_n_f32(x1 ? x1->dq : 0.0f));
            UNROLL
            for (size_t g = 0; g < 4; g++)
                is[p][g] = vdupq_n_s32(0);
        }
        /* every loop unrolled, so that a, is and acc stay in registers */
        UNROLL
        for (size_t w = 0; w < 4; w++)
            UNROLL
            for (size_t g = 0; g < 4; g++) {
                const int8x16_t kv = vreinterpretq_s8_u32(vld1q_u32(kp + ((b * 4 + w) * 4 + g) * 4));
                UNROLL
                for (size_t p = 0; p < P; p++)
                    is[p][g] = vmmlaq_s32(is[p][g], a[p][w], kv);
            }
        UNROLL
        for (size_t g = 0; g < 4; g++) {
            const float32x2_t dk = vld1_f32(ks + b * I8_KEYS + 2 * g);
            const float32x4_t dkk = vcombine_f32(dk, dk);
            UNROLL
            for (size_t p = 0; p < P; p++)
                acc[p][g] = vfmaq_f32(acc[p][g], vcvtq_f32_s32(is[p][g]), vmulq_f32(dkk, dq[p]));
        }
    }
    UNROLL
    for (size_t p = 0; p < P; p++)
        UNROLL
        for (size_t x = 0; x < 2; x++) {
            if (2 * p + x >= R)
                break;
            float32x4_t y[2];
            UNROLL
            for (size_t h = 0; h < 2; h++)
                y[h] = x ? vcombine_f32(vget_high_f32(acc[p][2 * h]),
                                        vget_high_f32(acc[p][2 * h + 1]))
                         : vcombine_f32(vget_low_f32(acc[p][2 * h]),
                                        vget_low_f32(acc[p][2 * h + 1]));
            i8_store_row(s + (ptrdiff_t)(2 * p + x) * s_stride, y, n0, n1, last, scale);
        }
}

#else /* ATTN_DOT_I8_SVE */

/* SVE: per 128-bit segment what the NEON SMMLA does, in its order. Named
   accumulators a<h><j>, i<h><j>: sizeless types form no arrays. */
#define SV_J(M, h) M(h, 0) M(h, 1) M(h, 2) M(h, 3)
#define SV_ALL(M) SV_J(M, 0) SV_J(M, 1)

static ALWAYS_INLINE void i8_rows(int dt, size_t R, const attn_q8_block *qb, size_t q_blocks,
                                  const uint32_t *kp, const float *ks, size_t nb, float *s,
                                  ptrdiff_t s_stride, size_t nkeys, int first, int last,
                                  float scale)
{
    (void)dt;
    const size_t vl = svcntw(), G = I8_KEYS / 2, H = (R + 1) / 2;
    const svbool_t all = svptrue_b32(), all8 = svptrue_b8();
    const svfloat32_t zero = svdup_n_f32(0.0f);
#define SV_DECL(h, j) svfloat32_t a##h##j = zero;
    SV_ALL(SV_DECL)
#undef SV_DECL
#define SV_FROM(h)                                                                          \
    if (!first && 2 * (h) < R)                                                              \
        sve_rows_to_blocks(s + (ptrdiff_t)(2 * (h)) * s_stride,                             \
                           2 * (h) + 1 < R ? s + (ptrdiff_t)(2 * (h) + 1) * s_stride : NULL, \
                           nkeys, &a##h##0, &a##h##1, &a##h##2, &a##h##3);
    SV_FROM(0)
    SV_FROM(1)
#undef SV_FROM
    for (size_t b = 0; b < nb; b++) {
        const attn_q8_block *x0 = &qb[b], *x1 = R > 1 ? &qb[q_blocks + b] : NULL;
        const attn_q8_block *x2 = R > 2 ? &qb[2 * q_blocks + b] : NULL;
        const attn_q8_block *x3 = R > 3 ? &qb[3 * q_blocks + b] : NULL;
        const svint32_t izero = svdup_n_s32(0);
#define SV_IDECL(h, j) svint32_t i##h##j = izero;
        SV_ALL(SV_IDECL)
#undef SV_IDECL
        for (size_t hh = 0; hh < 2; hh++) {
#define SV_Q(x) ((x) ? svreinterpret_u64_s8(svld1rq_s8(all8, (x)->n + 16 * hh)) : svdup_n_u64(0))
            const svuint64_t q0 = SV_Q(x0), q1 = SV_Q(x1), q2 = H > 1 ? SV_Q(x2) : svdup_n_u64(0);
            const svuint64_t q3 = H > 1 ? SV_Q(x3) : svdup_n_u64(0);
#undef SV_Q
            for (size_t e = 0; e < 2; e++) {
                const size_t w = 2 * hh + e;
                const svint8_t A0 = svreinterpret_s8_u64(e ? svtrn2_u64(q0, q1) : svtrn1_u64(q0, q1));
                const svint8_t A1 = svreinterpret_s8_u64(e ? svtrn2_u64(q2, q3) : svtrn1_u64(q2, q3));
                const uint32_t *kw = kp + (b * 4 + w) * G * 4;
#define SV_MM(h, j)                                                                         \
    if ((h) < H)                                                                            \
        i##h##j = svmmla_s32(i##h##j, A##h, b##j);
#define SV_B(j) const svint8_t b##j = svld1_s8(all8, (const int8_t *)(kw + (j) * vl));
                SV_B(0) SV_B(1) SV_B(2) SV_B(3)
                SV_ALL(SV_MM)
#undef SV_B
#undef SV_MM
            }
        }
        /* lanes (r0 k0, r0 k1, r1 k0, r1 k1) */
        const svfloat32_t dq0 = svdupq_n_f32(x0->dq, x0->dq, x1 ? x1->dq : 0.0f, x1 ? x1->dq : 0.0f);
        const svfloat32_t dq1 = H > 1 ? svdupq_n_f32(x2->dq, x2->dq, x3 ? x3->dq : 0.0f,
                                                     x3 ? x3->dq : 0.0f)
                                      : zero;
#define SV_F(h, j)                                                                          \
    if ((h) < H)                                                                            \
        a##h##j = svmla_f32_x(all, a##h##j, svcvt_f32_s32_x(all, i##h##j),                  \
                              svmul_f32_x(all, dk##j, dq##h));
#define SV_DK(j) const svfloat32_t dk##j = svld1_f32(all, ks + b * G * 4 + (j) * vl);
        SV_DK(0) SV_DK(1) SV_DK(2) SV_DK(3)
        SV_ALL(SV_F)
#undef SV_DK
#undef SV_F
    }
#define SV_OUT(h)                                                                           \
    if ((h) < H)                                                                            \
        sve_blocks_to_rows(s + (ptrdiff_t)(2 * (h)) * s_stride,                             \
                           2 * (h) + 1 < R ? s + (ptrdiff_t)(2 * (h) + 1) * s_stride : NULL, \
                           nkeys, a##h##0, a##h##1, a##h##2, a##h##3, 0, last, scale);
    SV_OUT(0)
    SV_OUT(1)
#undef SV_OUT
}

#undef SV_J
#undef SV_ALL

#endif /* ATTN_DOT_I8_SVE */

#endif /* ATTN_DOT_I8_MMLA */

#include "dot_i8_tmpl.h"

/* SPDX-License-Identifier: MIT */
/*
 * The bf16 mode's kernels (attn_precision, include/attn.h) on FEAT_BF16's
 * BFMMLA, with BFDOT and BFMLALB for a last pair and value; src/arm/dot_sve.c
 * builds them on Z registers (ATTN_DOT_SVE) with the same chains and bits.
 *
 * bf16 rounding is src/lowp.h's in integer operations, so it matches the
 * oracle whatever FPCR holds. BFDOT (and BFMMLA, the same per-lane steps)
 * differs from IEEE f32 in two ways that attn.h's bounds count:
 *  - subnormal inputs and results flush to zero (T per product or sum);
 *  - sums round to odd, within 2u: two roundings of u. A lane is one chain
 *    of BFDOTs from zero; products of bf16 values are exact, so a chain of
 *    m pairs rounds a product at most 2m = n times, what g(n) counts for a
 *    sequential f32 sum of n values. To keep that count, chains start from
 *    zero (P.V adds acc after its chain, one IEEE add) and an odd last value
 *    goes through BFMLALB (IEEE FMA) rather than BFDOT with a zero partner.
 * Below BF_MIN_ROWS rows the exact f32 tile path serves (within the bound).
 */
#include "lowp.h"
#include "tile_variants.h"
#include "arm/tile_neon_tmpl.h"

#if !defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#error "dot_neon.c needs the bf16 flags of src/arm/meson.build"
#endif
#if defined(ATTN_DOT_SVE)
#include <arm_sve.h>
#include "arm/sve.h"
/* gcc 12 does not define __ARM_FEATURE_SVE_BF16; SVE with BF16 is it */
#if !defined(__ARM_FEATURE_SVE) || !defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#error "dot_sve.c needs the sve+bf16 flags of src/arm/meson.build"
#endif
#endif

/* Rows per micro-kernel: 16 accumulators either way. */
#if defined(ATTN_DOT_SVE)
#define BF_R 8
#else
#define BF_R 4
#endif
/* each R its own loop */
#if BF_R > 4
#define BF_ROWS_WIDE(M) case 4: M(4); break; case 5: M(5); break; case 6: M(6); break; case 7: M(7); break;
#else
#define BF_ROWS_WIDE(M)
#endif
#define BF_ROWS_SWITCH(rn, M)                                                               \
    switch (rn) {                                                                           \
    case 1: M(1); break;                                                                    \
    case 2: M(2); break;                                                                    \
    case 3: M(3); break;                                                                    \
    BF_ROWS_WIDE(M)                                                                         \
    default: M(BF_R); break;                                                                \
    }

/* ---- bf16 rounding ---- */

/* src/half.h's attn_f32_to_bf16 per lane, in the low half. */
static ALWAYS_INLINE uint32x4_t bf16_bits(float32x4_t x)
{
    const uint32x4_t u = vreinterpretq_u32_f32(x);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rne = vshrq_n_u32(vaddq_u32(u, vaddq_u32(lsb, vdupq_n_u32(0x7fff))), 16);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
    return vbslq_u32(nan, vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40)), rne);
}

/* n <= 4 values, zeros beyond. */
static ALWAYS_INLINE float32x4_t f32_n(int dt, const unsigned char *row, size_t t, size_t n)
{
    if (n >= 4)
        return load4(dt, row, t);
    return n ? load4_part(dt, row, t, n) : vdupq_n_f32(0.0f);
}

/* n <= 8 values as bf16, zeros beyond: four 32-bit pairs. BF16 is its own
   rounding (a NaN keeps its payload; its products are NaN the same). */
static ALWAYS_INLINE uint16x8_t bits8(int dt, const unsigned char *row, size_t t, size_t n)
{
    if (dt == ATTN_KV_BF16) {
        if (n >= 8)
            return vld1q_u16((const uint16_t *)row + t);
        uint16_t buf[8] = {0};
        memcpy(buf, (const uint16_t *)row + t, n * sizeof(uint16_t));
        return vld1q_u16(buf);
    }
    const uint32x4_t a = bf16_bits(f32_n(dt, row, t, n < 4 ? n : 4));
    const uint32x4_t b = n > 4 ? bf16_bits(f32_n(dt, row, t + 4, n - 4)) : vdupq_n_u32(0);
    return vcombine_u16(vmovn_u32(a), vmovn_u32(b));
}

static ALWAYS_INLINE bfloat16x8_t as_bf(uint32x4_t x)
{
    return vreinterpretq_bf16_u32(x);
}

static ALWAYS_INLINE void store_n(float *p, float32x4_t v, size_t n)
{
    if (n >= 4)
        vst1q_f32(p, v);
    else if (n)
        store_part(p, v, n);
}

static ALWAYS_INLINE float32x4_t load_n(const float *p, size_t n)
{
    if (n >= 4)
        return vld1q_f32(p);
    return n ? load_part(p, n, 0.0f) : vdupq_n_f32(0.0f);
}

/* ---- the BFMMLA micro-kernel ---- */

/* BFMMLA's lanes each do one BFDotAdd per pair, in order (the Arm ARM's
   pseudocode): BFDOT's chain, so the bound at the top holds. */

#if defined(ATTN_DOT_SVE)

/*
 * SVE: one 2 x 2 block per 128-bit segment, the row pair replicated to
 * every segment. Sizeless types cannot form arrays, so the 16 accumulators
 * are named a<h><j> (row pair h, vector j); R is a constant after inlining
 * and compiles the unused ones out. Contract: the NEON bf_mmla's (below).
 */
#define SV_J(M, h) M(h, 0) M(h, 1) M(h, 2) M(h, 3)
#define SV_ALL(M) SV_J(M, 0) SV_J(M, 1) SV_J(M, 2) SV_J(M, 3)
#define SV_H(M) M(0) M(1) M(2) M(3)

/* Row r's pairs p .. p + 3 in every segment, zero for r >= R. */
static ALWAYS_INLINE svuint64_t sv_quad(size_t R, const uint32_t *rows, size_t rs, size_t r,
                                        size_t p)
{
    return r < R ? svreinterpret_u64_u32(svld1rq_u32(svptrue_b32(), rows + r * rs + p))
                 : svdup_n_u64(0);
}

/* (0, 2, 0, 2) per segment: one pair of each column. */
static ALWAYS_INLINE svuint32_t sv_pair_index(void)
{
    const svuint32_t i = svindex_u32(0, 1);
    return svorr_u32_x(svptrue_b32(), svand_n_u32_x(svptrue_b32(), i, ~3u),
                       svlsl_n_u32_x(svptrue_b32(), svand_n_u32_x(svptrue_b32(), i, 1u), 1));
}

static ALWAYS_INLINE void bf_mmla(size_t R, const uint32_t *rows, size_t rs, size_t np, int odd,
                                  const uint32_t *panel, size_t cs, float *out, ptrdiff_t os,
                                  size_t n, int add, int first, int last, float scale)
{
    const size_t vl = svcntw(), H = (R + 1) / 2;
    const svbool_t all = svptrue_b32();
    const svfloat32_t zero = svdup_n_f32(0.0f);
    const int from = !add && !first;
    /* fewer than 4 vectors only for P.V's panels at 1024 bits and more */
    const svbool_t pb0 = sve_lanes(0, cs), pb1 = sve_lanes(vl, cs);
    const svbool_t pb2 = sve_lanes(2 * vl, cs), pb3 = sve_lanes(3 * vl, cs);
#define SV_DECL(h, j) svfloat32_t a##h##j = zero;
    SV_ALL(SV_DECL)
#undef SV_DECL
#define SV_FROM(h)                                                                          \
    if (from && 2 * (h) < R)                                                                \
        sve_rows_to_blocks(out + (ptrdiff_t)(2 * (h)) * os,                                 \
                           2 * (h) + 1 < R ? out + (ptrdiff_t)(2 * (h) + 1) * os : NULL, n, \
                           &a##h##0, &a##h##1, &a##h##2, &a##h##3);
    SV_H(SV_FROM)
#undef SV_FROM
#define SV_MM(h, j)                                                                         \
    if ((h) < H)                                                                            \
        a##h##j = svbfmmla_f32(a##h##j, svreinterpret_bf16_u64(x##h), b##j);
#define SV_LOAD_B(j) const svbfloat16_t b##j = svreinterpret_bf16_u32(svld1_u32(pb##j, pc + (j) * vl));
#define SV_CHUNK(c)                                                                         \
    do {                                                                                    \
        const uint32_t *pc = panel + (c) * cs;                                              \
        SV_LOAD_B(0) SV_LOAD_B(1) SV_LOAD_B(2) SV_LOAD_B(3)                                 \
        SV_ALL(SV_MM)                                                                       \
    } while (0)
#define SV_QUAD(h)                                                                          \
    const svuint64_t q##h##0 = (h) < H ? sv_quad(R, rows, rs, 2 * (h), qp) : svdup_n_u64(0); \
    const svuint64_t q##h##1 = (h) < H ? sv_quad(R, rows, rs, 2 * (h) + 1, qp) : svdup_n_u64(0);
    const size_t full = np / 2;
    size_t c = 0;
    for (; c < full; c += 2) {
        const size_t qp = 2 * c;
        svuint64_t x0, x1, x2, x3;
        SV_H(SV_QUAD)
#define SV_X(h, op) x##h = op(q##h##0, q##h##1);
        SV_X(0, svtrn1_u64) SV_X(1, svtrn1_u64) SV_X(2, svtrn1_u64) SV_X(3, svtrn1_u64)
        SV_CHUNK(c);
        if (c + 1 < full) {
            SV_X(0, svtrn2_u64) SV_X(1, svtrn2_u64) SV_X(2, svtrn2_u64) SV_X(3, svtrn2_u64)
            SV_CHUNK(c + 1);
        }
    }
    c = full;
    if ((np & 1) || odd) {
        /* a pair left over and/or the odd value, lane by lane (as NEON) */
        const int pair = (int)(np & 1);
        const svuint32_t i02 = sv_pair_index(), i13 = svadd_n_u32_x(all, i02, 1);
        const size_t qp = 4 * (c / 2);
        svuint32_t x0, x1, x2, x3;
        SV_H(SV_QUAD)
#define SV_XT(h)                                                                            \
    x##h = svreinterpret_u32_u64(c & 1 ? svtrn2_u64(q##h##0, q##h##1) : svtrn1_u64(q##h##0, q##h##1));
        SV_H(SV_XT)
#undef SV_XT
        const uint32_t *pc = panel + c * cs;
#define SV_TAIL(h, j)                                                                       \
    if ((h) < H) {                                                                          \
        const svuint32_t b = svld1_u32(pb##j, pc + (j) * vl);                               \
        if (pair)                                                                           \
            a##h##j = svbfdot_f32(a##h##j, svreinterpret_bf16_u32(svtbl_u32(b, i02)),       \
                                  svreinterpret_bf16_u32(svtrn1_u32(x##h, x##h)));          \
        if (odd)                                                                            \
            a##h##j = svbfmlalb_f32(                                                        \
                a##h##j, svreinterpret_bf16_u32(svtbl_u32(b, pair ? i13 : i02)),            \
                svreinterpret_bf16_u32(pair ? svtrn2_u32(x##h, x##h) : svtrn1_u32(x##h, x##h))); \
    }
        SV_ALL(SV_TAIL)
#undef SV_TAIL
    }
#define SV_OUT(h)                                                                           \
    if ((h) < H)                                                                            \
        sve_blocks_to_rows(out + (ptrdiff_t)(2 * (h)) * os,                                 \
                           2 * (h) + 1 < R ? out + (ptrdiff_t)(2 * (h) + 1) * os : NULL, n, \
                           a##h##0, a##h##1, a##h##2, a##h##3, add, last, scale);
    SV_H(SV_OUT)
#undef SV_OUT
#undef SV_QUAD
#undef SV_MM
#undef SV_LOAD_B
#undef SV_CHUNK
#undef SV_X
}

#undef SV_J
#undef SV_ALL
#undef SV_H

#else /* NEON */
/* Rows 2h, 2h + 1 (zero past R) at pairs p, p + 1. */
static ALWAYS_INLINE bfloat16x8_t bf_row_pair(size_t R, const uint32_t *rows, size_t rs, size_t h,
                                              size_t p)
{
    const uint32x2_t lo = vld1_u32(rows + 2 * h * rs + p);
    const uint32x2_t hi = 2 * h + 1 < R ? vld1_u32(rows + (2 * h + 1) * rs + p) : vdup_n_u32(0);
    return as_bf(vcombine_u32(lo, hi));
}

/* Two rows of 4 columns to BFMMLA's 2 x 2 blocks, and back (an involution). */
static ALWAYS_INLINE void bf_swap_halves(float32x4_t x, float32x4_t y, float32x4_t *lo,
                                         float32x4_t *hi)
{
    const uint64x2_t a = vreinterpretq_u64_f32(x), b = vreinterpretq_u64_f32(y);
    *lo = vreinterpretq_f32_u64(vzip1q_u64(a, b));
    *hi = vreinterpretq_f32_u64(vzip2q_u64(a, b));
}

/* fully unrolled, so the accumulators stay in registers */
#define BF_PAIRS 8
#define UNROLL8 _Pragma("GCC unroll 8")

/*
 * R <= 4 rows x BF_PAIRS column pairs over np bf16 pairs and, when odd, one
 * value more; a chunk with a pair left over or the odd value goes lane by
 * lane (BFDOT, BFMLALB: see the top). add (P.V): chains from zero, added to
 * out; else chains from zero (first) or from out, times scale when last.
 */
static ALWAYS_INLINE void bf_mmla(size_t R, const uint32_t *rows, size_t rs, size_t np, int odd,
                                  const uint32_t *panel, size_t cs, float *out, ptrdiff_t os,
                                  size_t n, int add, int first, int last, float scale)
{
    const size_t H = (R + 1) / 2;
    float32x4_t acc[2][BF_PAIRS];
    UNROLL
    for (size_t h = 0; h < 2; h++)
        UNROLL
        for (size_t x = 0; x < BF_PAIRS / 2; x++) {
            const size_t nx = n > 4 * x ? n - 4 * x : 0;
            const float *o0 = out + (ptrdiff_t)(2 * h) * os + 4 * x;
            const int from = !add && !first;
            const float32x4_t y0 = from && 2 * h < R ? load_n(o0, nx) : vdupq_n_f32(0.0f);
            const float32x4_t y1 = from && 2 * h + 1 < R ? load_n(o0 + os, nx) : vdupq_n_f32(0.0f);
            bf_swap_halves(y0, y1, &acc[h][2 * x], &acc[h][2 * x + 1]);
        }
    size_t c = 0;
    for (; c < np / 2; c++) {
        bfloat16x8_t a[2];
        UNROLL
        for (size_t h = 0; h < H; h++)
            a[h] = bf_row_pair(R, rows, rs, h, 2 * c);
        UNROLL8
        for (size_t j = 0; j < BF_PAIRS; j++) {
            const bfloat16x8_t b = as_bf(vld1q_u32(panel + c * cs + 4 * j));
            UNROLL
            for (size_t h = 0; h < H; h++)
                acc[h][j] = vbfmmlaq_f32(acc[h][j], a[h], b);
        }
    }
    if ((np & 1) || odd) {
        const int pair = (int)(np & 1);
        uint32x4_t a[2];
        UNROLL
        for (size_t h = 0; h < H; h++)
            a[h] = vreinterpretq_u32_bf16(bf_row_pair(R, rows, rs, h, 2 * c));
        UNROLL8
        for (size_t j = 0; j < BF_PAIRS; j++) {
            const uint32x4_t b = vld1q_u32(panel + c * cs + 4 * j);
            UNROLL
            for (size_t h = 0; h < H; h++) {
                if (pair)
                    acc[h][j] = vbfdotq_f32(acc[h][j], as_bf(vuzp1q_u32(b, b)),
                                            as_bf(vtrn1q_u32(a[h], a[h])));
                if (odd)
                    acc[h][j] = vbfmlalbq_f32(acc[h][j],
                                              as_bf(pair ? vuzp2q_u32(b, b) : vuzp1q_u32(b, b)),
                                              as_bf(pair ? vtrn2q_u32(a[h], a[h])
                                                         : vtrn1q_u32(a[h], a[h])));
            }
        }
    }
    UNROLL
    for (size_t h = 0; h < H; h++)
        UNROLL
        for (size_t x = 0; x < BF_PAIRS / 2; x++) {
            const size_t nx = n > 4 * x ? n - 4 * x : 0;
            float32x4_t y[2];
            bf_swap_halves(acc[h][2 * x], acc[h][2 * x + 1], &y[0], &y[1]);
            UNROLL
            for (size_t i = 0; i < 2; i++)
                if (2 * h + i < R) {
                    float *o = out + (ptrdiff_t)(2 * h + i) * os + 4 * x;
                    store_n(o, add ? vaddq_f32(load_n(o, nx), y[i])
                                   : last ? vmulq_n_f32(y[i], scale) : y[i], nx);
                }
        }
}

#endif /* NEON */

/* ---- qk_bf16 ---- */

/* Sized for ATTN_TASK_STACK_BYTES: a 4 KiB panel, 8 KiB of rounded q.
   Partial sums wait in s between passes, continuing the chains, so the
   depth does not change the bits. */
#if defined(ATTN_DOT_SVE)
#define BF_KEYS (2 * svcntw())
static ALWAYS_INLINE size_t bf_depth(void)
{
    const size_t d = 1024 / svcntw(); /* at least 16 */
    return (d < 128 ? d : 128) & ~(size_t)7;
}
#define BF_DEPTH bf_depth()
#else
#define BF_KEYS 16
#define BF_DEPTH 128
#endif
#define BF_DEPTH_MAX 128
#define BF_PANEL_WORDS 1024 /* 4 KiB */
#define BF_ROWS 32
/* Below, the exact f32 path is as fast: it is bound by reading K and V,
   and packing would cost more than it saves. (The AVX-512 threshold, not
   measured on AArch64.) */
#define BF_MIN_ROWS 8

/* Per chunk of 4 dims, key pairs (2j, 2j + 1); keys past nkeys zero. */
static ALWAYS_INLINE void bf_pack_keys(int dt, const unsigned char *k, uintptr_t kb,
                                       size_t nkeys, size_t t0, size_t td, uint32_t *panel)
{
    const size_t keys = BF_KEYS;
    for (size_t j = 0; j < keys / 2; j++)
        for (size_t tb = 0; tb < td; tb += 8) {
            const size_t tn = td - tb < 8 ? td - tb : 8;
            const uint64x2_t k0 = 2 * j < nkeys
                                      ? vreinterpretq_u64_u16(bits8(dt, row_at(k, 2 * j, kb), t0 + tb, tn))
                                      : vdupq_n_u64(0);
            const uint64x2_t k1 = 2 * j + 1 < nkeys
                                      ? vreinterpretq_u64_u16(
                                            bits8(dt, row_at(k, 2 * j + 1, kb), t0 + tb, tn))
                                      : vdupq_n_u64(0);
            uint32_t *pc = panel + tb / 4 * (2 * keys) + 4 * j;
            vst1q_u32(pc, vreinterpretq_u32_u64(vzip1q_u64(k0, k1)));
            vst1q_u32(pc + 2 * keys, vreinterpretq_u32_u64(vzip2q_u64(k0, k1)));
        }
}

static ALWAYS_INLINE void qk_bf16(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                  float *s, ptrdiff_t s_stride)
{
    if (nq < BF_MIN_ROWS) {
        qk_tile(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);
        return;
    }
    _Alignas(16) uint32_t panel[BF_PANEL_WORDS];
    _Alignas(16) uint32_t qp[BF_ROWS * (BF_DEPTH_MAX / 2)];
    const uintptr_t kb = (uintptr_t)k_stride * unit_bytes(dt);
    const size_t depth = BF_DEPTH, keys = BF_KEYS;
    for (size_t r0 = 0; r0 < nq; r0 += BF_ROWS) {
        const size_t nr = nq - r0 < BF_ROWS ? nq - r0 : BF_ROWS;
        for (size_t t0 = 0; t0 < d; t0 += depth) {
            /* depth is even: only the last pass may end in an odd value */
            const size_t td = d - t0 < depth ? d - t0 : depth;
            const int first = t0 == 0, last = t0 + td == d, odd = (int)(td & 1);
            for (size_t r = 0; r < nr; r++) {
                const unsigned char *qr =
                    (const unsigned char *)(q + (ptrdiff_t)(r0 + r) * q_stride);
                for (size_t tb = 0; tb < td; tb += 8)
                    vst1q_u32(qp + r * (BF_DEPTH_MAX / 2) + tb / 2,
                              vreinterpretq_u32_u16(bits8(ATTN_KV_F32, qr, t0 + tb,
                                                          td - tb < 8 ? td - tb : 8)));
            }
            for (size_t c0 = 0; c0 < nk; c0 += keys) {
                const size_t nkeys = nk - c0 < keys ? nk - c0 : keys;
                bf_pack_keys(dt, row_at(k, c0, kb), kb, nkeys, t0, td, panel);
                float *sc = s + (ptrdiff_t)r0 * s_stride + (ptrdiff_t)c0;
                for (size_t r = 0; r < nr; r += BF_R) {
                    const uint32_t *qr = qp + r * (BF_DEPTH_MAX / 2);
                    float *sr = sc + (ptrdiff_t)r * s_stride;
#define BF_QK(R) bf_mmla(R, qr, BF_DEPTH_MAX / 2, td / 2, odd, panel, 2 * keys, sr, s_stride, nkeys, 0, first, last, scale)
                    BF_ROWS_SWITCH(nr - r < BF_R ? nr - r : BF_R, BF_QK)
#undef BF_QK
                }
            }
        }
    }
}

/* ---- pv_bf16 ---- */

#define BF_PV_KEYS 64
#define BF_PV_ROWS 64  /* 8 KiB of rounded weights */
/* columns per panel (8 KiB at most) and per micro-kernel */
#if defined(ATTN_DOT_SVE)
#define BF_PV_COLS (svcntw() < 32 ? 2 * svcntw() : 64)
#define BF_PV_SLICE BF_PV_COLS
#define BF_PV_COLS_MAX 64
#else
#define BF_PV_COLS 64
#define BF_PV_SLICE 16
#define BF_PV_COLS_MAX 64
#endif

/* Per chunk of 4 keys, column pairs; zeros past n keys and w columns up to
   a whole slice. */
static ALWAYS_INLINE void pv_pack_values(int dt, const void *v, uintptr_t vb, size_t n,
                                         size_t j0, size_t w, uint32_t *vp)
{
    const size_t slice = BF_PV_SLICE, cs = 2 * BF_PV_COLS;
    const size_t wp = (w + slice - 1) / slice * slice;
    for (size_t c = 0; 4 * c < n; c++) {
        const unsigned char *vr[4];
        for (size_t i = 0; i < 4; i++)
            vr[i] = 4 * c + i < n ? row_at(v, 4 * c + i, vb) : NULL;
        for (size_t x = 0; x < wp; x += 8) {
            const size_t cn = x < w ? (w - x < 8 ? w - x : 8) : 0;
            uint16x8_t l[4];
            for (size_t i = 0; i < 4; i++)
                l[i] = cn && vr[i] ? bits8(dt, vr[i], j0 + x, cn) : vdupq_n_u16(0);
            const uint32x4_t e0 = vreinterpretq_u32_u16(vzip1q_u16(l[0], l[1]));
            const uint32x4_t e1 = vreinterpretq_u32_u16(vzip2q_u16(l[0], l[1]));
            const uint32x4_t o0 = vreinterpretq_u32_u16(vzip1q_u16(l[2], l[3]));
            const uint32x4_t o1 = vreinterpretq_u32_u16(vzip2q_u16(l[2], l[3]));
            uint32_t *pc = vp + c * cs + 2 * x;
            vst1q_u32(pc, vzip1q_u32(e0, o0));
            vst1q_u32(pc + 4, vzip2q_u32(e0, o0));
            vst1q_u32(pc + 8, vzip1q_u32(e1, o1));
            vst1q_u32(pc + 12, vzip2q_u32(e1, o1));
        }
    }
}

/* pp[r * 32 + i] = (key 2i, key 2i + 1) of row r, zero past n keys; P^T
   (p_step > 1) by a 4 x 4 transpose of the pairs. */
static ALWAYS_INLINE void pv_pack_weights(const float *p, ptrdiff_t p_stride, ptrdiff_t p_step,
                                          size_t nr, size_t n, uint32_t *pp)
{
    if (p_step == 1) {
        for (size_t r = 0; r < nr; r++) {
            const unsigned char *pr = (const unsigned char *)(p + (ptrdiff_t)r * p_stride);
            for (size_t tb = 0; tb < n; tb += 8)
                vst1q_u32(pp + r * (BF_PV_KEYS / 2) + tb / 2,
                          vreinterpretq_u32_u16(bits8(ATTN_KV_F32, pr, tb, n - tb < 8 ? n - tb : 8)));
        }
        return;
    }
    for (size_t r = 0; r < nr; r += 4) {
        const size_t rn = nr - r < 4 ? nr - r : 4;
        for (size_t i = 0; i < (n + 1) / 2; i += 4) {
            uint32x4_t q[4];
            for (size_t x = 0; x < 4; x++) {
                const size_t key = 2 * (i + x);
                uint32x4_t lo = vdupq_n_u32(0), hi = vdupq_n_u32(0);
                if (key < n)
                    lo = bf16_bits(f32_n(ATTN_KV_F32,
                                         (const unsigned char *)(p + (ptrdiff_t)key * p_step +
                                                                 (ptrdiff_t)r),
                                         0, rn));
                if (key + 1 < n)
                    hi = bf16_bits(f32_n(ATTN_KV_F32,
                                         (const unsigned char *)(p + (ptrdiff_t)(key + 1) * p_step +
                                                                 (ptrdiff_t)r),
                                         0, rn));
                q[x] = vorrq_u32(lo, vshlq_n_u32(hi, 16));
            }
            const uint32x4x2_t a = vtrnq_u32(q[0], q[1]), b = vtrnq_u32(q[2], q[3]);
            const uint32x4_t t[4] = {
                vcombine_u32(vget_low_u32(a.val[0]), vget_low_u32(b.val[0])),
                vcombine_u32(vget_low_u32(a.val[1]), vget_low_u32(b.val[1])),
                vcombine_u32(vget_high_u32(a.val[0]), vget_high_u32(b.val[0])),
                vcombine_u32(vget_high_u32(a.val[1]), vget_high_u32(b.val[1])),
            };
            for (size_t x = 0; x < rn; x++)
                vst1q_u32(pp + (r + x) * (BF_PV_KEYS / 2) + i, t[x]);
        }
    }
}

/* p_step: 1 for P's rows, P's row stride for P^T (pt_bf16). */
static ALWAYS_INLINE void pv_bf16_at(int dt, const float *p, ptrdiff_t p_stride,
                                     ptrdiff_t p_step, const void *v, ptrdiff_t v_stride,
                                     size_t nq, size_t nk, size_t dv, float *acc,
                                     ptrdiff_t acc_stride)
{
    _Alignas(16) uint32_t vp[BF_PV_KEYS / 2 * BF_PV_COLS_MAX];
    _Alignas(16) uint32_t pp[BF_PV_ROWS * (BF_PV_KEYS / 2)];
    const uintptr_t vb = (uintptr_t)v_stride * unit_bytes(dt);
    const size_t cols = BF_PV_COLS, slice = BF_PV_SLICE;
    for (size_t r0 = 0; r0 < nq; r0 += BF_PV_ROWS) {
        const size_t nr = nq - r0 < BF_PV_ROWS ? nq - r0 : BF_PV_ROWS;
        for (size_t c0 = 0; c0 < nk; c0 += BF_PV_KEYS) {
            const size_t n = nk - c0 < BF_PV_KEYS ? nk - c0 : BF_PV_KEYS;
            const int odd = (int)(n & 1);
            pv_pack_weights(p + (ptrdiff_t)r0 * p_stride + (ptrdiff_t)c0 * p_step, p_stride,
                            p_step, nr, n, pp);
            for (size_t j0 = 0; j0 < dv; j0 += cols) {
                const size_t w = dv - j0 < cols ? dv - j0 : cols;
                pv_pack_values(dt, row_at(v, c0, vb), vb, n, j0, w, vp);
                for (size_t x0 = 0; x0 < w; x0 += slice) {
                    const size_t wx = w - x0 < slice ? w - x0 : slice;
                    float *ac = acc + (ptrdiff_t)r0 * acc_stride + (ptrdiff_t)(j0 + x0);
                    for (size_t r = 0; r < nr; r += BF_R) {
                        const uint32_t *pr = pp + r * (BF_PV_KEYS / 2);
                        float *ar = ac + (ptrdiff_t)r * acc_stride;
#define BF_PV(R) bf_mmla(R, pr, BF_PV_KEYS / 2, n / 2, odd, vp + 2 * x0, 2 * cols, ar, acc_stride, wx, 1, 1, 0, 1.0f)
                        BF_ROWS_SWITCH(nr - r < BF_R ? nr - r : BF_R, BF_PV)
#undef BF_PV
                    }
                }
            }
        }
    }
}

static ALWAYS_INLINE void pv_bf16(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                  ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                  ptrdiff_t acc_stride)
{
    if (nq < BF_MIN_ROWS) {
        pv_tile(dt, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);
        return;
    }
    pv_bf16_at(dt, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride);
}

/* acc += P^T X at every size (pv_tile has no strided weights). A call's
   rows fit one chunk, so each chain starts from zero and is added to acc
   once, the scalar oracle's order. */
_Static_assert(ATTN_MAX_BLOCK_Q <= BF_PV_KEYS, "pt_bf16 sums a call's rows in one chunk");
static ALWAYS_INLINE void pt_bf16(const float *p, ptrdiff_t p_stride, const float *x,
                                  ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                  float *acc, ptrdiff_t acc_stride)
{
    pv_bf16_at(ATTN_KV_F32, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride);
}

/* SPDX-License-Identifier: MIT */
/*
 * NEON kernels of the bf16 mode (attn_precision, include/attn.h; the dot
 * file of src/kernel_list.h, its int8 twin is src/arm/dot_i8_neon.c), on
 * FEAT_BF16's BFMMLA (with BFDOT and BFMLALB for a last pair and value).
 * Built with -march=armv8.2-a+bf16 (src/arm/meson.build) and installed
 * only where the kernel reports BF16 (HWCAP2_BF16, src/cpu.c: BFMMLA is
 * part of FEAT_BF16, so no other bit is needed).
 * src/arm/dot_sve.c includes it for the SVE table (ATTN_DOT_SVE: the
 * micro-kernel on Z registers, a 2 x 2 block per 128-bit segment, panels
 * as wide as the vector), where the CPU reports SVE's BF16
 * (HWCAP2_SVEBF16); the packing, the chains and so the bits are the NEON
 * kernels' at every vector length, and below 8 rows it takes the NEON
 * tile body's exact path too. Without SVE BF16 the SVE table keeps the
 * NEON kernels (it starts from NEON's, src/isa_list.h).
 *
 * The rounding to bf16 is src/lowp.h's, written with integer operations
 * (bf16_bits), so the rounded values are the oracle's bit for bit whatever
 * FPCR holds. BFDOT's arithmetic differs from IEEE f32 in two ways, and
 * attn.h's bounds count both (BFMMLA's arithmetic is BFDOT's, see
 * bf_mmla):
 *  - it flushes subnormal inputs and results to zero, as vdpbf16ps does
 *    (T per product with a subnormal factor and per flushed sum);
 *  - it rounds its sums to odd, not to nearest: within 2u relative, two
 *    roundings of u in the error model of g(n). Each output lane is one
 *    chain of BFDOTs over the pairs of its sum, the products of bf16
 *    values are exact, and a chain of m pairs starting from zero rounds a
 *    product at most m times (its pair's sum, then the m - 1
 *    accumulations after it): 2m = n roundings of u for n = 2m values,
 *    what a sequential f32 sum of n values counts (g(n) in attn.h).
 *    Two arrangements keep that count: the chains start from zero (the pv
 *    accumulator is added after its chain, with one IEEE add), and an odd
 *    last value is added with BFMLALB, an IEEE fused multiply-add (FPCR's
 *    rounding, no flushing), instead of BFDOT with a zero partner, whose
 *    accumulation would round once more.
 * So the results differ from the scalar oracle (src/scalar/dot_scalar.c)
 * within the pair bound checkasm applies, as the AVX-512 kernels' do.
 * A mode permits rounding: below BF_MIN_ROWS query rows (decode) the
 * kernels take the exact f32 path of the tile family
 * (src/arm/tile_neon_tmpl.h), which is within the mode's bound.
 *
 *   qk_bf16: q rows rounded to bf16 pairs once per call and depth chunk;
 *            keys packed in pairs of keys (4 dims of one, then the same 4
 *            of the next), then per 4 dims one BFMMLA per pair of rows and
 *            pair of keys (2 x 2 sums of 4 products: twice BFDOT's per
 *            instruction, and the same chains, bf_mmla below).
 *   pv_bf16: the weights of a key chunk rounded to bf16 pairs (keys 2i,
 *            2i + 1), V packed in pairs of columns (4 keys of one, then of
 *            the next); per 4 keys one BFMMLA per pair of rows and pair of
 *            columns.
 *   pt_bf16: the backward's P^T X on pv_bf16's kernel (weights strided).
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

/* Query (or weight) rows per micro-kernel, in pairs: 16 accumulators,
   two row pairs by 8 column pairs (NEON) or four by 4 vectors (SVE). */
#if defined(ATTN_DOT_SVE)
#define BF_R 8
#else
#define BF_R 4
#endif
/* a switch over a block's rows (1 .. BF_R), so that each R is its own loop */
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

/* ------------------------------------------------------------------------ */
/* bf16 rounding (src/lowp.h's attn_bf16_round, 4 lanes)                     */
/* ------------------------------------------------------------------------ */

/* The bf16 bits of x (src/half.h's attn_f32_to_bf16: round to nearest even
   by integer addition, NaN quieted and truncated) in the low half of each
   lane, the high half zero. */
static ALWAYS_INLINE uint32x4_t bf16_bits(float32x4_t x)
{
    const uint32x4_t u = vreinterpretq_u32_f32(x);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    const uint32x4_t rne = vshrq_n_u32(vaddq_u32(u, vaddq_u32(lsb, vdupq_n_u32(0x7fff))), 16);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
    return vbslq_u32(nan, vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40)), rne);
}

/* Values t .. t + n (n <= 4, zeros beyond) of a row of a float dtype, as f32. */
static ALWAYS_INLINE float32x4_t f32_n(int dt, const unsigned char *row, size_t t, size_t n)
{
    if (n >= 4)
        return load4(dt, row, t);
    return n ? load4_part(dt, row, t, n) : vdupq_n_f32(0.0f);
}

/* The bf16 bits of values t .. t + n (n <= 8, zeros beyond) of a row of dtype
   dt (F32, F16 or BF16), in order; as four 32-bit lanes, the pairs
   (t, t + 1), ..., (t + 6, t + 7). BF16 values are their own rounding (a
   NaN keeps its payload: its products are NaN all the same). */
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

/* The first n (0..4) lanes of v at p. */
static ALWAYS_INLINE void store_n(float *p, float32x4_t v, size_t n)
{
    if (n >= 4)
        vst1q_f32(p, v);
    else if (n)
        store_part(p, v, n);
}

/* n (0..4) floats at p, zeros beyond. */
static ALWAYS_INLINE float32x4_t load_n(const float *p, size_t n)
{
    if (n >= 4)
        return vld1q_f32(p);
    return n ? load_part(p, n, 0.0f) : vdupq_n_f32(0.0f);
}

/* ------------------------------------------------------------------------ */
/* the BFMMLA micro-kernel (qk_bf16 and pv_bf16)                             */
/* ------------------------------------------------------------------------ */

/* BFMMLA multiplies a 2 x 4 block of bf16 values by the transpose of
   another: lanes (r0 c0, r0 c1, r1 c0, r1 c1) of the result each add the
   products of two pairs, one BFDotAdd per pair in order (the Arm ARM's
   pseudocode), the step BFDOT makes per lane. So a lane's chain is BFDOT's,
   pair after pair, and the bound of the top holds as it is. */

#if defined(ATTN_DOT_SVE)

/*
 * The SVE micro-kernel: BFMMLA on whole vectors, one 2 x 2 block per
 * 128-bit segment, so a vector holds S = svcntw() / 4 column pairs. The
 * row pair's operand is replicated to every segment (LD1RQ, then TRN of
 * the two rows' quads), the panel's column pairs are contiguous, so vector
 * j of a chunk is its pairs jS .. jS + S - 1. Sizeless types cannot form
 * arrays: the 16 accumulators are named, a<h><j> for row pair h (rows 2h,
 * 2h + 1) and vector j, and a smaller block (R < 8) is the same code with
 * the unused ones compiled out (R is a constant after inlining). The
 * contract of bf_mmla is the NEON one's (below).
 */
#define SV_J(M, h) M(h, 0) M(h, 1) M(h, 2) M(h, 3)
#define SV_ALL(M) SV_J(M, 0) SV_J(M, 1) SV_J(M, 2) SV_J(M, 3)
#define SV_H(M) M(0) M(1) M(2) M(3)

/* Row r's pairs p .. p + 3 (p a multiple of 4: a group the row buffers
   hold whole) in every segment, zero for r >= R. TRN1 of two rows' quads,
   as 64-bit halves, is the row pair's operand for pairs p, p + 1, TRN2 for
   p + 2, p + 3. */
static ALWAYS_INLINE svuint64_t sv_quad(size_t R, const uint32_t *rows, size_t rs, size_t r,
                                        size_t p)
{
    return r < R ? svreinterpret_u64_u32(svld1rq_u32(svptrue_b32(), rows + r * rs + p))
                 : svdup_n_u64(0);
}

/* The lanes of column pair operands that hold one pair of each column:
   (0, 2, 0, 2) per segment, or (1, 3, 1, 3) with one added. */
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
    /* a chunk's vectors of column pairs: cs lanes, fewer than 4 vectors
       only for P.V's panels at 1024 bits and more */
    const svbool_t pb0 = sve_lanes(0, cs), pb1 = sve_lanes(vl, cs);
    const svbool_t pb2 = sve_lanes(2 * vl, cs), pb3 = sve_lanes(3 * vl, cs);
#define SV_DECL(h, j) svfloat32_t a##h##j = zero;
    SV_ALL(SV_DECL)
#undef SV_DECL
    /* the chains continue from out: its rows in the blocks' layout */
#define SV_FROM(h)                                                                          \
    if (from && 2 * (h) < R)                                                                \
        sve_rows_to_blocks(out + (ptrdiff_t)(2 * (h)) * os,                                 \
                           2 * (h) + 1 < R ? out + (ptrdiff_t)(2 * (h) + 1) * os : NULL, n, \
                           &a##h##0, &a##h##1, &a##h##2, &a##h##3);
    SV_H(SV_FROM)
#undef SV_FROM
    /* chunk c (4 values) with the row pairs' operands x<h> */
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
    /* the quads of row pair h's rows at pairs qp .. qp + 3 */
#define SV_QUAD(h)                                                                          \
    const svuint64_t q##h##0 = (h) < H ? sv_quad(R, rows, rs, 2 * (h), qp) : svdup_n_u64(0); \
    const svuint64_t q##h##1 = (h) < H ? sv_quad(R, rows, rs, 2 * (h) + 1, qp) : svdup_n_u64(0);
    const size_t full = np / 2; /* chunks of two whole pairs */
    size_t c = 0;
    for (; c < full; c += 2) {
        const size_t qp = 2 * c; /* chunks c, c + 1 */
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
        /* the chunk with a pair left over and/or the odd value, lane by
           lane (see the NEON kernel): its quad starts at pair 4 (c / 2) */
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
/* Rows 2h and 2h + 1 of R (the second zero past R) at pairs p, p + 1: the
   first operand of BFMMLA. Row r's pairs at rows + r * rs. */
static ALWAYS_INLINE bfloat16x8_t bf_row_pair(size_t R, const uint32_t *rows, size_t rs, size_t h,
                                              size_t p)
{
    const uint32x2_t lo = vld1_u32(rows + 2 * h * rs + p);
    const uint32x2_t hi = 2 * h + 1 < R ? vld1_u32(rows + (2 * h + 1) * rs + p) : vdup_n_u32(0);
    return as_bf(vcombine_u32(lo, hi));
}

/* [x0, x1, y0, y1], [x2, x3, y2, y3]: rows x and y of 4 columns as the 2 x 2
   blocks of their column pairs, and back (its own inverse). */
static ALWAYS_INLINE void bf_swap_halves(float32x4_t x, float32x4_t y, float32x4_t *lo,
                                         float32x4_t *hi)
{
    const uint64x2_t a = vreinterpretq_u64_f32(x), b = vreinterpretq_u64_f32(y);
    *lo = vreinterpretq_f32_u64(vzip1q_u64(a, b));
    *hi = vreinterpretq_f32_u64(vzip2q_u64(a, b));
}

/* the column pairs of a panel per BFMMLA pass: 8 x the row pairs (2)
   accumulators, fully unrolled so that they stay in registers */
#define BF_PAIRS 8
#define UNROLL8 _Pragma("GCC unroll 8")

/*
 * Rows (2h, 2h + 1) of R (R <= 4) times the BF_PAIRS column pairs of a
 * panel, as BFMMLA's 2 x 2 blocks, over np bf16 pairs of the rows (row r's
 * at rows + r * rs) and, when odd, the value after them alone. The panel
 * holds per chunk c of two pairs and column pair j the second operand of
 * BFMMLA, column 2j's 4 values then column 2j + 1's, at panel + c * cs +
 * 4 * j (zeros past the data). The chunk with a pair left over (np odd) or
 * the odd value is taken lane by lane: BFDOT for the pair, BFMLALB for the
 * value (see the top), on the lanes of the chunk that hold them (UZP: each
 * column's, TRN: each row's).
 * The sums go to the n (<= 16) columns of rows r < R of out (row stride
 * os): with `add` (P.V) added to what out holds, after chains from zero;
 * else (QK^T) chains from zero (`first`) or continuing from out, stored
 * times `scale` when `last`.
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
        const int pair = (int)(np & 1); /* a pair in the chunk's first half */
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

/* ------------------------------------------------------------------------ */
/* qk_bf16                                                                   */
/* ------------------------------------------------------------------------ */

/* Keys per panel (8 pairs on NEON, 4 vectors of pairs on SVE) and dims
   per pass: the panel (depth / 4 chunks of keys / 2 pairs, 16 bytes each)
   is at most 4 KiB, the query rows rounded per pass (up to 128 dims) 8 KiB,
   so that a task stays within ATTN_TASK_STACK_BYTES; past a pass's depth
   the partial sums wait in s between passes, continuing the chains (so
   the depth does not change the bits). */
#if defined(ATTN_DOT_SVE)
#define BF_KEYS (2 * svcntw())
static ALWAYS_INLINE size_t bf_depth(void)
{
    const size_t d = 1024 / svcntw(); /* svcntw() <= 64: at least 16 */
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
/* From this many rows on the packed kernels round; below, the exact f32
   path (tile family) is as fast: it is bound by reading K and V then
   (decode of a GQA group), where packing would cost more than it saves.
   The AVX-512 kernels' threshold, not measured on AArch64 hardware. */
#define BF_MIN_ROWS 8

/* The panel of bf_mmla: keys 2j and 2j + 1 (j < BF_KEYS / 2) at dims
   t0 + 4c .. t0 + 4c + 3, per chunk c of 2 BF_KEYS lanes; keys past nkeys
   zero. */
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
            uint32_t *pc = panel + tb / 4 * (2 * keys) + 4 * j; /* chunk tb / 4 */
            vst1q_u32(pc, vreinterpretq_u32_u64(vzip1q_u64(k0, k1)));
            vst1q_u32(pc + 2 * keys, vreinterpretq_u32_u64(vzip2q_u64(k0, k1)));
        }
}

static ALWAYS_INLINE void qk_bf16(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                  float *s, ptrdiff_t s_stride)
{
    if (nq < BF_MIN_ROWS) { /* few rows: exact (see the top) */
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

/* ------------------------------------------------------------------------ */
/* pv_bf16                                                                   */
/* ------------------------------------------------------------------------ */

#define BF_PV_KEYS 64  /* keys per chunk: 32 pairs */
#define BF_PV_ROWS 64  /* weight rows rounded per chunk (8 KiB) */
/* Output columns per packed panel (at most 64: 8 KiB) and per
   micro-kernel (a slice): NEON packs 64 for 16 a slice, SVE a slice of 4
   vectors of column pairs (8 columns per 128 bits), up to 64 (from 1024-bit
   vectors on, the vectors past the panel's pairs are zeros). */
#if defined(ATTN_DOT_SVE)
#define BF_PV_COLS (svcntw() < 32 ? 2 * svcntw() : 64)
#define BF_PV_SLICE BF_PV_COLS
#define BF_PV_COLS_MAX 64
#else
#define BF_PV_COLS 64
#define BF_PV_SLICE 16
#define BF_PV_COLS_MAX 64
#endif

/* The panel of bf_mmla for P.V: columns j0 + 2j, j0 + 2j + 1 at keys
   4c .. 4c + 3, per chunk c of 2 BF_PV_COLS lanes, for 4c < n, 2j < w
   rounded up to a slice (zeros past n keys and w columns). */
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
            /* key pairs (4c, 4c + 1) and (4c + 2, 4c + 3) of columns x .. x + 3
               (e: even pair) and x + 4 .. x + 7 */
            const uint32x4_t e0 = vreinterpretq_u32_u16(vzip1q_u16(l[0], l[1]));
            const uint32x4_t e1 = vreinterpretq_u32_u16(vzip2q_u16(l[0], l[1]));
            const uint32x4_t o0 = vreinterpretq_u32_u16(vzip1q_u16(l[2], l[3]));
            const uint32x4_t o1 = vreinterpretq_u32_u16(vzip2q_u16(l[2], l[3]));
            uint32_t *pc = vp + c * cs + 2 * x; /* column pair x / 2 */
            vst1q_u32(pc, vzip1q_u32(e0, o0));
            vst1q_u32(pc + 4, vzip2q_u32(e0, o0));
            vst1q_u32(pc + 8, vzip1q_u32(e1, o1));
            vst1q_u32(pc + 12, vzip2q_u32(e1, o1));
        }
    }
}

/*
 * The weights of rows r0 + [0, nr) for keys c0 + [0, n) as bf16 pairs,
 * pp[r * 32 + i] = (key 2i, key 2i + 1) of row r (zero past n keys): from
 * P's rows (p_step 1) a row's 8 keys per load, from P^T (the backward's
 * pt_bf16: p_stride 1, keys p_step apart) 4 rows' weights of a key per
 * load, put in rows by a 4 x 4 transpose of the pairs.
 */
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
            uint32x4_t q[4]; /* q[x]: pair i + x of rows r .. r + 3 */
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
            /* transpose: rows out, pairs i .. i + 3 in each */
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

/* p_step as in the tile body: 1 for P's rows (pv_bf16), P's row stride
   with p_stride 1 for the backward's P^T (pt_bf16). */
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
            /* BF_PV_KEYS is even: only the last chunk may end in an odd key */
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
    if (nq < BF_MIN_ROWS) { /* few rows: exact (see the top) */
        pv_tile(dt, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);
        return;
    }
    pv_bf16_at(dt, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride);
}

/* acc += P^T X (the backward's dV = P^T dO, dK = dS^T Q): P.V with the
   weight strides swapped, on BFDOT at every size (no exact fallback: the
   tile body's pv_tile has no strided weights). A call's rows (its keys
   here, at most ATTN_MAX_BLOCK_Q) are one chunk of BF_PV_KEYS, so each
   element's chain starts from zero and is added to acc once (bf_mmla's
   add), the order of the scalar oracle's pt kernels. */
_Static_assert(ATTN_MAX_BLOCK_Q <= BF_PV_KEYS, "pt_bf16 sums a call's rows in one chunk");
static ALWAYS_INLINE void pt_bf16(const float *p, ptrdiff_t p_stride, const float *x,
                                  ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                  float *acc, ptrdiff_t acc_stride)
{
    pv_bf16_at(ATTN_KV_F32, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride);
}

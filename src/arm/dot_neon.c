/* SPDX-License-Identifier: MIT */
/*
 * NEON kernels of the bf16 mode (attn_precision, include/attn.h; the dot
 * file of src/kernel_list.h, its int8 twin is src/arm/dot_i8_neon.c), on
 * FEAT_BF16's BFMMLA (with BFDOT and BFMLALB for a last pair and value).
 * Built with -march=armv8.2-a+bf16 (src/arm/meson.build) and installed
 * only where the kernel reports BF16 (HWCAP2_BF16, src/cpu.c: BFMMLA is
 * part of FEAT_BF16, so no other bit is needed).
 * The SVE table keeps them (it starts from NEON's, src/isa_list.h).
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
 * (src/arm/tile_neon_body.h), which is within the mode's bound.
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
#include "arm/tile_neon_body.h"

#if !defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#error "dot_neon.c needs the bf16 flags of src/arm/meson.build"
#endif

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

/* ------------------------------------------------------------------------ */
/* qk_bf16                                                                   */
/* ------------------------------------------------------------------------ */

#define BF_KEYS 16   /* keys per panel: eight pairs */
/* dims per pass (64 pairs: the panel is 4 KiB) and query rows rounded per
   pass (8 KiB), so that a task stays within ATTN_TASK_STACK_BYTES; past
   d 128 the partial sums wait in s between passes, continuing the chains */
#define BF_DEPTH 128
#define BF_ROWS 32
#define BF_QK_ROWS 4 /* query rows per micro-kernel: two pairs, 16 accumulators */
/* From this many rows on the packed kernels round; below, the exact f32
   path (tile family) is as fast: it is bound by reading K and V then
   (decode of a GQA group), where packing would cost more than it saves.
   The AVX-512 kernels' threshold, not measured on AArch64 hardware. */
#define BF_MIN_ROWS 8

/* The panel of bf_mmla: keys 2j and 2j + 1 (j < 8) at dims t0 + 4c ..
   t0 + 4c + 3, per chunk c of 32 lanes; keys nkeys..15 zero. */
static ALWAYS_INLINE void bf_pack_keys(int dt, const unsigned char *k, uintptr_t kb,
                                       size_t nkeys, size_t t0, size_t td, uint32_t *panel)
{
    for (size_t j = 0; j < BF_KEYS / 2; j++)
        for (size_t tb = 0; tb < td; tb += 8) {
            const size_t tn = td - tb < 8 ? td - tb : 8;
            const uint64x2_t k0 = 2 * j < nkeys
                                      ? vreinterpretq_u64_u16(bits8(dt, row_at(k, 2 * j, kb), t0 + tb, tn))
                                      : vdupq_n_u64(0);
            const uint64x2_t k1 = 2 * j + 1 < nkeys
                                      ? vreinterpretq_u64_u16(
                                            bits8(dt, row_at(k, 2 * j + 1, kb), t0 + tb, tn))
                                      : vdupq_n_u64(0);
            uint32_t *pc = panel + tb / 4 * (BF_KEYS * 2) + 4 * j; /* chunk tb / 4 */
            vst1q_u32(pc, vreinterpretq_u32_u64(vzip1q_u64(k0, k1)));
            vst1q_u32(pc + BF_KEYS * 2, vreinterpretq_u32_u64(vzip2q_u64(k0, k1)));
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
    _Alignas(16) uint32_t panel[BF_DEPTH / 2 * BF_KEYS];
    _Alignas(16) uint32_t qp[BF_ROWS * (BF_DEPTH / 2)];
    const uintptr_t kb = (uintptr_t)k_stride * unit_bytes(dt);
    for (size_t r0 = 0; r0 < nq; r0 += BF_ROWS) {
        const size_t nr = nq - r0 < BF_ROWS ? nq - r0 : BF_ROWS;
        for (size_t t0 = 0; t0 < d; t0 += BF_DEPTH) {
            /* BF_DEPTH is even: only the last pass may end in an odd value */
            const size_t td = d - t0 < BF_DEPTH ? d - t0 : BF_DEPTH;
            const int first = t0 == 0, last = t0 + td == d, odd = (int)(td & 1);
            for (size_t r = 0; r < nr; r++) {
                const unsigned char *qr =
                    (const unsigned char *)(q + (ptrdiff_t)(r0 + r) * q_stride);
                for (size_t tb = 0; tb < td; tb += 8)
                    vst1q_u32(qp + r * (BF_DEPTH / 2) + tb / 2,
                              vreinterpretq_u32_u16(bits8(ATTN_KV_F32, qr, t0 + tb,
                                                          td - tb < 8 ? td - tb : 8)));
            }
            for (size_t c0 = 0; c0 < nk; c0 += BF_KEYS) {
                const size_t nkeys = nk - c0 < BF_KEYS ? nk - c0 : BF_KEYS;
                bf_pack_keys(dt, row_at(k, c0, kb), kb, nkeys, t0, td, panel);
                float *sc = s + (ptrdiff_t)r0 * s_stride + (ptrdiff_t)c0;
                for (size_t r = 0; r < nr; r += BF_QK_ROWS) {
                    const uint32_t *qr = qp + r * (BF_DEPTH / 2);
                    float *sr = sc + (ptrdiff_t)r * s_stride;
                    /* a switch, so that each R is its own loop */
#define BF_QK(R) bf_mmla(R, qr, BF_DEPTH / 2, td / 2, odd, panel, BF_KEYS * 2, sr, s_stride, nkeys, 0, first, last, scale)
                    switch (nr - r < BF_QK_ROWS ? nr - r : BF_QK_ROWS) {
                    case 1: BF_QK(1); break;
                    case 2: BF_QK(2); break;
                    case 3: BF_QK(3); break;
                    default: BF_QK(4); break;
                    }
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
#define BF_PV_COLS 64  /* output columns per packed panel (8 KiB) */
#define BF_PV_ROWS 64  /* weight rows rounded per chunk (8 KiB) */
#define BF_PV_R 4      /* rows per micro-kernel, x 16 columns: 16 accumulators */

/* The panel of bf_mmla for P.V: columns j0 + 2j, j0 + 2j + 1 (j < 32) at
   keys 4c .. 4c + 3, per chunk c of 128 lanes, for 4c < n, j < w rounded
   up to 16 (zeros past n keys and w columns). */
static ALWAYS_INLINE void pv_pack_values(int dt, const void *v, uintptr_t vb, size_t n,
                                         size_t j0, size_t w, uint32_t *vp)
{
    const size_t wp = (w + 15) & ~(size_t)15;
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
            uint32_t *pc = vp + c * (BF_PV_COLS * 2) + 2 * x; /* column pair x / 2 */
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
    _Alignas(16) uint32_t vp[BF_PV_KEYS / 2 * BF_PV_COLS];
    _Alignas(16) uint32_t pp[BF_PV_ROWS * (BF_PV_KEYS / 2)];
    const uintptr_t vb = (uintptr_t)v_stride * unit_bytes(dt);
    for (size_t r0 = 0; r0 < nq; r0 += BF_PV_ROWS) {
        const size_t nr = nq - r0 < BF_PV_ROWS ? nq - r0 : BF_PV_ROWS;
        for (size_t c0 = 0; c0 < nk; c0 += BF_PV_KEYS) {
            /* BF_PV_KEYS is even: only the last chunk may end in an odd key */
            const size_t n = nk - c0 < BF_PV_KEYS ? nk - c0 : BF_PV_KEYS;
            const int odd = (int)(n & 1);
            pv_pack_weights(p + (ptrdiff_t)r0 * p_stride + (ptrdiff_t)c0 * p_step, p_stride,
                            p_step, nr, n, pp);
            for (size_t j0 = 0; j0 < dv; j0 += BF_PV_COLS) {
                const size_t w = dv - j0 < BF_PV_COLS ? dv - j0 : BF_PV_COLS;
                pv_pack_values(dt, row_at(v, c0, vb), vb, n, j0, w, vp);
                for (size_t x0 = 0; x0 < w; x0 += 16) {
                    const size_t wx = w - x0 < 16 ? w - x0 : 16;
                    float *ac = acc + (ptrdiff_t)r0 * acc_stride + (ptrdiff_t)(j0 + x0);
                    for (size_t r = 0; r < nr; r += BF_PV_R) {
                        const uint32_t *pr = pp + r * (BF_PV_KEYS / 2);
                        float *ar = ac + (ptrdiff_t)r * acc_stride;
#define BF_PV(R) bf_mmla(R, pr, BF_PV_KEYS / 2, n / 2, odd, vp + 2 * x0, BF_PV_COLS * 2, ar, acc_stride, wx, 1, 1, 0, 1.0f)
                        switch (nr - r < BF_PV_R ? nr - r : BF_PV_R) {
                        case 1: BF_PV(1); break;
                        case 2: BF_PV(2); break;
                        case 3: BF_PV(3); break;
                        default: BF_PV(4); break;
                        }
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
   tile body's pv_tile has no strided weights). */
static ALWAYS_INLINE void pt_bf16(const float *p, ptrdiff_t p_stride, const float *x,
                                  ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim,
                                  float *acc, ptrdiff_t acc_stride)
{
    pv_bf16_at(ATTN_KV_F32, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride);
}

ATTN_TILE_FILE(dot, neon, neon)

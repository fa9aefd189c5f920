/* SPDX-License-Identifier: MIT */
/*
 * NEON kernels of the bf16 mode (attn_precision, include/attn.h; the dot
 * file of src/kernel_list.h, its int8 twin is src/arm/dot_i8_neon.c), on
 * FEAT_BF16's BFDOT. Built with -march=armv8.2-a+bf16 (src/arm/meson.build)
 * and installed only where the kernel reports BF16 (HWCAP2_BF16, src/cpu.c).
 * The SVE table keeps them (it starts from NEON's, src/isa_list.h).
 *
 * The rounding to bf16 is src/lowp.h's, written with integer operations
 * (bf16_bits), so the rounded values are the oracle's bit for bit whatever
 * FPCR holds. BFDOT's arithmetic differs from IEEE f32 in two ways, and
 * attn.h's bounds count both:
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
 *            keys packed as a panel of bf16 pairs (dims 2i, 2i + 1 in one
 *            32-bit lane, 16 keys per pair), then per pair of dims one
 *            BFDOT by element (the row's pair as the lane) per 4 keys.
 *   pv_bf16: the weights of a key chunk rounded to bf16 pairs (keys 2i,
 *            2i + 1), V packed as lanes of (v[2i][col], v[2i + 1][col]);
 *            per key pair one BFDOT by element per 4 columns.
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
/* qk_bf16                                                                   */
/* ------------------------------------------------------------------------ */

#define BF_KEYS 16   /* keys per panel: four vectors */
/* dims per pass (64 pairs: the panel is 4 KiB) and query rows rounded per
   pass (8 KiB), so that a task stays within ATTN_TASK_STACK_BYTES; past
   d 128 the partial sums wait in s between passes, continuing the chains */
#define BF_DEPTH 128
#define BF_ROWS 32
#define BF_QK_ROWS 4 /* query rows per micro-kernel: 16 accumulators */
/* From this many rows on the packed kernels round; below, the exact f32
   path (tile family) is as fast: it is bound by reading K and V then
   (decode of a GQA group), where packing would cost more than it saves.
   The AVX-512 kernels' threshold, not measured on AArch64 hardware. */
#define BF_MIN_ROWS 8

/* panel[p * 16 + j] = bf16 pair p (dims t0 + 2p, + 1) of key j, j < 16;
   keys nkeys..15 zero. */
static ALWAYS_INLINE void bf_pack_keys(int dt, const unsigned char *k, uintptr_t kb,
                                       size_t nkeys, size_t t0, size_t td, uint32_t *panel)
{
    for (size_t g = 0; g < BF_KEYS; g += 4)
        for (size_t tb = 0; tb < td; tb += 8) {
            const size_t tn = td - tb < 8 ? td - tb : 8;
            uint32x4_t r[4];
            for (size_t j = 0; j < 4; j++)
                r[j] = g + j < nkeys
                           ? vreinterpretq_u32_u16(bits8(dt, row_at(k, g + j, kb), t0 + tb, tn))
                           : vdupq_n_u32(0);
            transpose4(r);
            for (size_t i = 0; i < 4; i++)
                vst1q_u32(panel + (tb / 2 + i) * BF_KEYS + g, r[i]);
        }
}

/* acc[r][x] += pair `lane` of row r's q vector times keys 4x .. 4x + 3 of
   panel pair p + lane; lane must be a constant. */
#define BF_QK_LANE(lane)                                                                    \
    do {                                                                                    \
        const uint32_t *kr = panel + (p + (lane)) * BF_KEYS;                                \
        const bfloat16x8_t k0 = as_bf(vld1q_u32(kr)), k1 = as_bf(vld1q_u32(kr + 4));        \
        const bfloat16x8_t k2 = as_bf(vld1q_u32(kr + 8)), k3 = as_bf(vld1q_u32(kr + 12));   \
        UNROLL                                                                              \
        for (size_t r = 0; r < R; r++) {                                                    \
            acc[r][0] = vbfdotq_laneq_f32(acc[r][0], k0, qv[r], (lane));                    \
            acc[r][1] = vbfdotq_laneq_f32(acc[r][1], k1, qv[r], (lane));                    \
            acc[r][2] = vbfdotq_laneq_f32(acc[r][2], k2, qv[r], (lane));                    \
            acc[r][3] = vbfdotq_laneq_f32(acc[r][3], k3, qv[r], (lane));                    \
        }                                                                                   \
    } while (0)

/*
 * R rows (R <= 4) x the 16 keys of a panel, over its np full pairs and,
 * when odd, the last value alone (pair np: (value, 0)); q pairs of row r
 * at qp + r * BF_DEPTH / 2. The first pass starts from zero, later ones
 * from the partial sums in s; the last one scales.
 */
static ALWAYS_INLINE void bf_qk_rows(size_t R, const uint32_t *qp, size_t np, int odd,
                                     const uint32_t *panel, size_t nkeys, int first, int last,
                                     float scale, float *s, ptrdiff_t s_stride)
{
    float32x4_t acc[BF_QK_ROWS][4];
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t x = 0; x < 4; x++) {
            const size_t n = nkeys > 4 * x ? nkeys - 4 * x : 0;
            acc[r][x] = first ? vdupq_n_f32(0.0f) : load_n(s + (ptrdiff_t)r * s_stride + 4 * x, n);
        }
    size_t p = 0;
    for (; p + 4 <= np; p += 4) {
        bfloat16x8_t qv[BF_QK_ROWS];
        UNROLL
        for (size_t r = 0; r < R; r++)
            qv[r] = as_bf(vld1q_u32(qp + r * (BF_DEPTH / 2) + p));
        BF_QK_LANE(0);
        BF_QK_LANE(1);
        BF_QK_LANE(2);
        BF_QK_LANE(3);
    }
    for (; p < np + (size_t)odd; p++) {
        const uint32_t *kr = panel + p * BF_KEYS;
        bfloat16x8_t kv[4];
        UNROLL
        for (size_t x = 0; x < 4; x++)
            kv[x] = as_bf(vld1q_u32(kr + 4 * x));
        UNROLL
        for (size_t r = 0; r < R; r++) {
            const bfloat16x8_t qb = as_bf(vdupq_n_u32(qp[r * (BF_DEPTH / 2) + p]));
            UNROLL
            for (size_t x = 0; x < 4; x++)
                acc[r][x] = p < np ? vbfdotq_f32(acc[r][x], kv[x], qb)
                                   : vbfmlalbq_f32(acc[r][x], kv[x], qb); /* the odd value */
        }
    }
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t x = 0; x < 4; x++) {
            const size_t n = nkeys > 4 * x ? nkeys - 4 * x : 0;
            store_n(s + (ptrdiff_t)r * s_stride + 4 * x,
                    last ? vmulq_n_f32(acc[r][x], scale) : acc[r][x], n);
        }
}

#undef BF_QK_LANE

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
                    switch (nr - r < BF_QK_ROWS ? nr - r : BF_QK_ROWS) {
                    case 1: bf_qk_rows(1, qr, td / 2, odd, panel, nkeys, first, last, scale, sr, s_stride); break;
                    case 2: bf_qk_rows(2, qr, td / 2, odd, panel, nkeys, first, last, scale, sr, s_stride); break;
                    case 3: bf_qk_rows(3, qr, td / 2, odd, panel, nkeys, first, last, scale, sr, s_stride); break;
                    default: bf_qk_rows(4, qr, td / 2, odd, panel, nkeys, first, last, scale, sr, s_stride); break;
                    }
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

/* vp[i * 64 + col] = (v[2i][j0 + col], v[2i + 1][j0 + col]) as bf16 pairs
   for i < (n + 1) / 2, col < w rounded up to 16 (zero beyond n keys and w
   columns). */
static ALWAYS_INLINE void pv_pack_values(int dt, const void *v, uintptr_t vb, size_t n,
                                         size_t j0, size_t w, uint32_t *vp)
{
    const size_t wp = (w + 15) & ~(size_t)15;
    for (size_t i = 0; i < (n + 1) / 2; i++) {
        const unsigned char *v0 = row_at(v, 2 * i, vb), *v1 = row_at(v, 2 * i + 1, vb);
        const int has1 = 2 * i + 1 < n;
        for (size_t x = 0; x < wp; x += 8) {
            const size_t cn = x < w ? (w - x < 8 ? w - x : 8) : 0;
            const uint16x8_t lo = cn ? bits8(dt, v0, j0 + x, cn) : vdupq_n_u16(0);
            const uint16x8_t hi = cn && has1 ? bits8(dt, v1, j0 + x, cn) : vdupq_n_u16(0);
            vst1q_u32(vp + i * BF_PV_COLS + x, vreinterpretq_u32_u16(vzip1q_u16(lo, hi)));
            vst1q_u32(vp + i * BF_PV_COLS + x + 4, vreinterpretq_u32_u16(vzip2q_u16(lo, hi)));
        }
    }
}

/* a[r][x] += weight pair `lane` of row r times the 16 columns of value pair
   i + lane; lane must be a constant. */
#define BF_PV_LANE(lane)                                                                    \
    do {                                                                                    \
        const uint32_t *vr = vp + (i + (lane)) * BF_PV_COLS;                                \
        const bfloat16x8_t v0 = as_bf(vld1q_u32(vr)), v1 = as_bf(vld1q_u32(vr + 4));        \
        const bfloat16x8_t v2 = as_bf(vld1q_u32(vr + 8)), v3 = as_bf(vld1q_u32(vr + 12));   \
        UNROLL                                                                              \
        for (size_t r = 0; r < R; r++) {                                                    \
            a[r][0] = vbfdotq_laneq_f32(a[r][0], v0, pv[r], (lane));                        \
            a[r][1] = vbfdotq_laneq_f32(a[r][1], v1, pv[r], (lane));                        \
            a[r][2] = vbfdotq_laneq_f32(a[r][2], v2, pv[r], (lane));                        \
            a[r][3] = vbfdotq_laneq_f32(a[r][3], v3, pv[r], (lane));                        \
        }                                                                                   \
    } while (0)

/*
 * R rows (R <= 4) x 16 columns of a panel (vp at the first), over the np
 * full key pairs and, when odd, the chunk's last key alone: the sums start
 * from zero (see the top) and are added to acc once, w (1..16) columns.
 */
static ALWAYS_INLINE void pv_bf_rows(size_t R, const uint32_t *pp, size_t np, int odd,
                                     const uint32_t *vp, size_t w, float *acc,
                                     ptrdiff_t acc_stride)
{
    float32x4_t a[BF_PV_R][4];
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t x = 0; x < 4; x++)
            a[r][x] = vdupq_n_f32(0.0f);
    size_t i = 0;
    for (; i + 4 <= np; i += 4) {
        bfloat16x8_t pv[BF_PV_R];
        UNROLL
        for (size_t r = 0; r < R; r++)
            pv[r] = as_bf(vld1q_u32(pp + r * (BF_PV_KEYS / 2) + i));
        BF_PV_LANE(0);
        BF_PV_LANE(1);
        BF_PV_LANE(2);
        BF_PV_LANE(3);
    }
    for (; i < np + (size_t)odd; i++) {
        const uint32_t *vr = vp + i * BF_PV_COLS;
        bfloat16x8_t vv[4];
        UNROLL
        for (size_t x = 0; x < 4; x++)
            vv[x] = as_bf(vld1q_u32(vr + 4 * x));
        UNROLL
        for (size_t r = 0; r < R; r++) {
            const bfloat16x8_t pb = as_bf(vdupq_n_u32(pp[r * (BF_PV_KEYS / 2) + i]));
            UNROLL
            for (size_t x = 0; x < 4; x++)
                a[r][x] = i < np ? vbfdotq_f32(a[r][x], vv[x], pb)
                                 : vbfmlalbq_f32(a[r][x], vv[x], pb); /* the odd key */
        }
    }
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t x = 0; x < 4; x++) {
            const size_t n = w > 4 * x ? w - 4 * x : 0;
            float *ar = acc + (ptrdiff_t)r * acc_stride + 4 * x;
            store_n(ar, vaddq_f32(load_n(ar, n), a[r][x]), n);
        }
}

#undef BF_PV_LANE

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
                        switch (nr - r < BF_PV_R ? nr - r : BF_PV_R) {
                        case 1: pv_bf_rows(1, pr, n / 2, odd, vp + x0, wx, ar, acc_stride); break;
                        case 2: pv_bf_rows(2, pr, n / 2, odd, vp + x0, wx, ar, acc_stride); break;
                        case 3: pv_bf_rows(3, pr, n / 2, odd, vp + x0, wx, ar, acc_stride); break;
                        default: pv_bf_rows(4, pr, n / 2, odd, vp + x0, wx, ar, acc_stride); break;
                        }
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

/*
 * NEON (AArch64 AdvSIMD) tile kernels: qk_tile, pv_tile and to_f32, one
 * variant per K/V dtype. F16 rows are widened with fcvtl (vcvt_f32_f16) and
 * BF16 rows with a 16-bit shift (shll) inside the loads, so the arithmetic is
 * the same f32 FMA code for every dtype. The blocking mirrors the AVX2 tile
 * kernels (tile_avx2.c) with 4-lane vectors and AArch64's 32 registers.
 * Tails (d, dv, nk, nq not multiples of the blocking) use lane-by-lane
 * partial loads and stores: no kernel reads or writes past what it is given.
 */
#include <arm_neon.h>

#include "dsp.h"
#include "arm/neon.h"
#include "prefetch.h"

/*
 * Fully unrolls a loop over the register block (trip count <= 4, known after
 * inlining), so the accumulator arrays live in registers. -O3 does this by
 * itself; -O2 (distribution builds, debugoptimized) does not, and would keep
 * the accumulators in memory.
 */
#define UNROLL _Pragma("GCC unroll 4")


static ALWAYS_INLINE float32x4_t widen_f16(uint16x4_t h)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

static ALWAYS_INLINE float32x4_t widen_bf16(uint16x4_t h)
{
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* Four elements of a K/V row starting at element i, as f32. */
static ALWAYS_INLINE float32x4_t load4(int dtype, const void *base, ptrdiff_t i)
{
    if (dtype == ATTN_KV_F32)
        return vld1q_f32((const float *)base + i);
    uint16x4_t h = vld1_u16((const uint16_t *)base + i);
    return dtype == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
}

/* The first n (1..3) elements from i, zeros in the other lanes. */
static ALWAYS_INLINE float32x4_t load4_part(int dtype, const void *base, ptrdiff_t i, size_t n)
{
    if (dtype == ATTN_KV_F32)
        return load_part((const float *)base + i, n, 0.0f);
    const uint16_t *p = (const uint16_t *)base + i;
    uint16x4_t h = vld1_lane_u16(p, vdup_n_u16(0), 0);
    if (n > 1)
        h = vld1_lane_u16(p + 1, h, 1);
    if (n > 2)
        h = vld1_lane_u16(p + 2, h, 2);
    return dtype == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
}

/* Sum of each of the four vectors, as the four lanes of the result. */
static ALWAYS_INLINE float32x4_t reduce4(float32x4_t a, float32x4_t b, float32x4_t c,
                                         float32x4_t d)
{
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

/* ------------------------------------------------------------------ qk_tile */

/* Fewer query rows than this make a tile a stream of K and V from memory
   (decode, small GQA groups, speculative decoding): prefetch, one V pass. */
#define FEW_ROWS 16

/*
 * Micro-kernel: an R x C block of dot products (R <= 4 query rows, C <= 4
 * keys). As in the AVX2 kernel the dot products run along d, where q and k
 * rows are both contiguous, so each (row, key) pair owns one accumulator,
 * reduced horizontally once at the end. Per 4 elements of d it loads R + C
 * vectors for R*C FMAs: 4 x 4 uses 16 accumulators + 8 operands of the 32
 * vector registers (AVX2, with 16 registers, stops at 3 x 4).
 */
#define QK_ROWS 4
#define QK_KEYS 4

static ALWAYS_INLINE void qk_micro(int dtype, size_t R, size_t C, const float *q,
                                   ptrdiff_t q_stride, const void *k, ptrdiff_t k_stride,
                                   size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    float32x4_t acc[QK_ROWS][QK_KEYS];
    UNROLL
    for (size_t r = 0; r < R; r++)
        UNROLL
        for (size_t c = 0; c < QK_KEYS; c++)
            acc[r][c] = vdupq_n_f32(0.0f);

    size_t t = 0;
    for (; t + 4 <= d; t += 4) {
        float32x4_t qv[QK_ROWS];
        UNROLL
        for (size_t r = 0; r < R; r++)
            qv[r] = vld1q_f32(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
        UNROLL
        for (size_t c = 0; c < C; c++) {
            float32x4_t kv = load4(dtype, k, (ptrdiff_t)c * k_stride + (ptrdiff_t)t);
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
            float32x4_t kv = load4_part(dtype, k, (ptrdiff_t)c * k_stride + (ptrdiff_t)t, n);
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

/* Rows in groups of QK_ROWS for keys c..c+C of the tile. */
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

/*
 * Keys outermost: a group of QK_KEYS k rows stays in L1 while every query
 * row of the block (kept in L1/L2 by the driver's block size) passes over it.
 * With few rows (decode) K streams from memory: rows ATTN_PREFETCH_BYTES
 * ahead are prefetched (prefetch.h), as on x86.
 */
static ALWAYS_INLINE void qk_tile(int dtype, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    const ptrdiff_t esize = dtype == ATTN_KV_F32 ? 4 : 2;
    const size_t ahead = nq < FEW_ROWS ? attn_prefetch_rows_ahead(d * (size_t)esize) : 0;
    size_t c = 0;
    for (; c + QK_KEYS <= nk; c += QK_KEYS) {
        if (ahead)
            attn_prefetch_rows(k, c + ahead, k_stride, (size_t)esize, QK_KEYS, d * (size_t)esize);
        qk_rows(dtype, QK_KEYS, q, q_stride, (const char *)k + (ptrdiff_t)c * k_stride * esize,
                k_stride, nq, d, scale, s + c, s_stride);
    }
    const void *kc = (const char *)k + (ptrdiff_t)c * k_stride * esize;
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

/* ------------------------------------------------------------------ pv_tile */

/*
 * Micro-kernel: acc rows r..r+R, columns j..j+4W stay in R*W registers while
 * the keys of the chunk stream by. Keys go four at a time: one vector load
 * takes four weights of a row, and each key's v row is multiplied by one of
 * its lanes (fmla by element), so no weight is broadcast separately.
 * `tail` (1..3, or 0) makes the last vector partial.
 */
#define PV_ROWS 4
#define PV_VECS 4
/* Keys per pass: this many v rows stay in L1 across the column chunks
   (many rows; few rows take the whole tile in one pass, see pv_tile). */
#define PV_KEY_CHUNK 32

/* The W vectors (the last one partial when tail != 0) of v row `row`. */
static ALWAYS_INLINE void pv_load_v(int dtype, size_t W, size_t tail, const void *v,
                                    ptrdiff_t v_stride, size_t row, float32x4_t *vv)
{
    const ptrdiff_t base = (ptrdiff_t)row * v_stride;
    UNROLL
    for (size_t w = 0; w < W; w++)
        vv[w] = (tail && w == W - 1) ? load4_part(dtype, v, base + (ptrdiff_t)(4 * w), tail)
                                     : load4(dtype, v, base + (ptrdiff_t)(4 * w));
}

/* a[r][w] += lane `lane` of pr[r] * vv[w]; lane must be a constant. */
#define PV_FMA_LANE(lane)                                                                  \
    do {                                                                                   \
        pv_load_v(dtype, W, tail, v, v_stride, c + (lane), vv);                            \
        UNROLL                                                                             \
        for (size_t r = 0; r < R; r++)                                                     \
            UNROLL                                                                         \
            for (size_t w = 0; w < W; w++)                                                 \
                a[r][w] = vfmaq_laneq_f32(a[r][w], vv[w], pr[r], (lane));                  \
    } while (0)

/* pf > 0: also prefetches v rows of pf bytes ahead (prefetch.h). */
static ALWAYS_INLINE void pv_micro(int dtype, size_t R, size_t W, size_t tail, const float *p,
                                   ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride,
                                   size_t nk, size_t pf, float *acc, ptrdiff_t acc_stride)
{
    const size_t v_esize = dtype == ATTN_KV_F32 ? 4 : 2;
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
            attn_prefetch_rows(v, c + ahead, v_stride, v_esize, 4, pf);
        UNROLL
        for (size_t r = 0; r < R; r++)
            pr[r] = vld1q_f32(p + (ptrdiff_t)r * p_stride + (ptrdiff_t)c);
        PV_FMA_LANE(0);
        PV_FMA_LANE(1);
        PV_FMA_LANE(2);
        PV_FMA_LANE(3);
    }
    for (; c < nk; c++) {
        pv_load_v(dtype, W, tail, v, v_stride, c, vv);
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

/* Every column chunk of R rows, for the keys of one pass; pf > 0: the first
   chunk prefetches whole v rows ahead. */
static ALWAYS_INLINE void pv_cols(int dtype, size_t R, const float *p, ptrdiff_t p_stride,
                                  const void *v, ptrdiff_t v_stride, size_t nk, size_t dv,
                                  size_t pf, float *acc, ptrdiff_t acc_stride)
{
    const size_t esize = dtype == ATTN_KV_F32 ? 4 : 2;
    size_t j = 0;
    for (; j + 4 * PV_VECS <= dv; j += 4 * PV_VECS)
        pv_micro(dtype, R, PV_VECS, 0, p, p_stride, (const char *)v + j * esize, v_stride, nk,
                 j == 0 ? pf : 0, acc + j, acc_stride);
    if (j)
        pf = 0;
    const size_t rest = dv - j, tail = rest % 4;
    const void *vj = (const char *)v + j * esize;
    switch ((rest + 3) / 4) { /* rest < 16: up to four vectors, the last partial */
    case 4:
        pv_micro(dtype, R, 4, tail, p, p_stride, vj, v_stride, nk, pf, acc + j, acc_stride);
        break;
    case 3:
        pv_micro(dtype, R, 3, tail, p, p_stride, vj, v_stride, nk, pf, acc + j, acc_stride);
        break;
    case 2:
        pv_micro(dtype, R, 2, tail, p, p_stride, vj, v_stride, nk, pf, acc + j, acc_stride);
        break;
    case 1:
        pv_micro(dtype, R, 1, tail, p, p_stride, vj, v_stride, nk, pf, acc + j, acc_stride);
        break;
    default:
        break;
    }
}

static ALWAYS_INLINE void pv_tile(int dtype, const float *p, ptrdiff_t p_stride, const void *v,
                                  ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,
                                  float *acc, ptrdiff_t acc_stride)
{
    const ptrdiff_t esize = dtype == ATTN_KV_F32 ? 4 : 2;
    /* Few rows (decode): V streams from memory; one pass over the whole
       tile, its first column chunk prefetching whole rows ahead, as the
       AVX2 kernel does (tile_avx2.c says what that was measured to gain). */
    const int few = nq < FEW_ROWS;
    const size_t chunk = few ? nk : PV_KEY_CHUNK, pf = few ? dv * (size_t)esize : 0;
    for (size_t c0 = 0; c0 < nk; c0 += chunk) {
        const size_t n = nk - c0 < chunk ? nk - c0 : chunk;
        const void *vc = (const char *)v + (ptrdiff_t)c0 * v_stride * esize;
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
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(dst + i, load4(dtype, src, (ptrdiff_t)i));
        vst1q_f32(dst + i + 4, load4(dtype, src, (ptrdiff_t)i + 4));
    }
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, load4(dtype, src, (ptrdiff_t)i));
    if (i < n)
        store_part(dst + i, load4_part(dtype, src, (ptrdiff_t)i, n - i), n - i);
}

/* ------------------------------------------------------------------ variants */

#define DEFINE_VARIANT(name, DTYPE)                                                        \
    static void attn_qk_tile_##name##_neon(const float *q, ptrdiff_t q_stride,             \
                                           const void *k, ptrdiff_t k_stride, size_t nq,   \
                                           size_t nk, size_t d, float scale, float *s,     \
                                           ptrdiff_t s_stride)                             \
    {                                                                                      \
        qk_tile(DTYPE, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);           \
    }                                                                                      \
    static void attn_pv_tile_##name##_neon(const float *p, ptrdiff_t p_stride,             \
                                           const void *v, ptrdiff_t v_stride, size_t nq,   \
                                           size_t nk, size_t dv, float *acc,               \
                                           ptrdiff_t acc_stride)                           \
    {                                                                                      \
        pv_tile(DTYPE, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);             \
    }                                                                                      \
    static void attn_to_f32_##name##_neon(const void *src, float *dst, size_t n)           \
    {                                                                                      \
        to_f32(DTYPE, src, dst, n);                                                        \
    }

DEFINE_VARIANT(f32, ATTN_KV_F32)
DEFINE_VARIANT(f16, ATTN_KV_F16)
DEFINE_VARIANT(bf16, ATTN_KV_BF16)

void attn_dsp_init_tiles_neon(attn_dsp *t)
{
    t->qk_tile[ATTN_KV_F32] = attn_qk_tile_f32_neon;
    t->qk_tile[ATTN_KV_F16] = attn_qk_tile_f16_neon;
    t->qk_tile[ATTN_KV_BF16] = attn_qk_tile_bf16_neon;
    t->pv_tile[ATTN_KV_F32] = attn_pv_tile_f32_neon;
    t->pv_tile[ATTN_KV_F16] = attn_pv_tile_f16_neon;
    t->pv_tile[ATTN_KV_BF16] = attn_pv_tile_bf16_neon;
    t->to_f32[ATTN_KV_F32] = attn_to_f32_f32_neon;
    t->to_f32[ATTN_KV_F16] = attn_to_f32_f16_neon;
    t->to_f32[ATTN_KV_BF16] = attn_to_f32_bf16_neon;
}

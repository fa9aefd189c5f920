/*
 * AVX2+FMA+F16C tile kernels: qk_tile, pv_tile and to_f32, one variant per
 * K/V dtype. F16 rows are widened with vcvtph2ps and BF16 rows with a 16-bit
 * shift inside the loads, so the arithmetic is the same f32 FMA code for
 * every dtype. Tails (d, dv, nk, nq not multiples of the blocking) use masked
 * or buffered partial loads: no kernel reads past the elements it is given.
 */
#include <immintrin.h>
#include <string.h>

#include "dsp.h"
#include "half.h"
#include "x86/x86.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Also declared in row_avx2.c, which builds the table. */
void attn_dsp_init_tile_avx2(attn_dsp *t);

/* lane_mask_table + 8 - n as an int32 mask selects the first n of 8 lanes. */
static const int32_t lane_mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                            0,  0,  0,  0,  0,  0,  0,  0};

static ALWAYS_INLINE __m256i first_lanes(size_t n)
{
    return _mm256_loadu_si256((const __m256i *)(lane_mask_table + 8 - n));
}

static ALWAYS_INLINE __m256 widen_f16(__m128i h) { return _mm256_cvtph_ps(h); }

static ALWAYS_INLINE __m256 widen_bf16(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Eight elements of a K/V row starting at element i, as f32. */
static ALWAYS_INLINE __m256 load8(int dtype, const void *base, ptrdiff_t i)
{
    if (dtype == ATTN_KV_F32)
        return _mm256_loadu_ps((const float *)base + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + i));
    return dtype == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
}

/* The first n (1..7) elements from i, zeros in the other lanes. */
static ALWAYS_INLINE __m256 load8_part(int dtype, const void *base, ptrdiff_t i, size_t n)
{
    if (dtype == ATTN_KV_F32)
        return _mm256_maskload_ps((const float *)base + i, first_lanes(n));
    uint16_t buf[8] = {0};
    memcpy(buf, (const uint16_t *)base + i, n * sizeof *buf);
    __m128i h = _mm_loadu_si128((const __m128i *)buf);
    return dtype == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
}

/* Sum of each of the four vectors, as the four lanes of the result. */
static ALWAYS_INLINE __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab = _mm256_hadd_ps(a, b);
    __m256 cd = _mm256_hadd_ps(c, d);
    __m256 abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* ------------------------------------------------------------------ qk_tile */

/*
 * Micro-kernel: an R x C block of dot products (R query rows, C <= 4 keys).
 * The dot products run along d, the direction both q and k rows are
 * contiguous in, so each (row, key) pair owns one ymm accumulator; the R*C
 * accumulators are reduced horizontally once at the end. Per 8 elements of d
 * it loads R + C vectors for R*C FMAs.
 */
#define QK_ROWS 3
#define QK_KEYS 4

static ALWAYS_INLINE void qk_micro(int dtype, size_t R, size_t C, const float *q,
                                   ptrdiff_t q_stride, const void *k, ptrdiff_t k_stride,
                                   size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    __m256 acc[QK_ROWS][QK_KEYS];
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < QK_KEYS; c++)
            acc[r][c] = _mm256_setzero_ps();

    size_t t = 0;
    for (; t + 8 <= d; t += 8) {
        __m256 qv[QK_ROWS];
        for (size_t r = 0; r < R; r++)
            qv[r] = _mm256_loadu_ps(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
        for (size_t c = 0; c < C; c++) {
            __m256 kv = load8(dtype, k, (ptrdiff_t)c * k_stride + (ptrdiff_t)t);
            for (size_t r = 0; r < R; r++)
                acc[r][c] = _mm256_fmadd_ps(qv[r], kv, acc[r][c]);
        }
    }
    if (t < d) {
        size_t n = d - t;
        __m256 qv[QK_ROWS];
        for (size_t r = 0; r < R; r++)
            qv[r] = _mm256_maskload_ps(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t, first_lanes(n));
        for (size_t c = 0; c < C; c++) {
            __m256 kv = load8_part(dtype, k, (ptrdiff_t)c * k_stride + (ptrdiff_t)t, n);
            for (size_t r = 0; r < R; r++)
                acc[r][c] = _mm256_fmadd_ps(qv[r], kv, acc[r][c]);
        }
    }

    __m128 vscale = _mm_set1_ps(scale);
    for (size_t r = 0; r < R; r++) {
        __m128 dots = _mm_mul_ps(reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]), vscale);
        float *sr = s + (ptrdiff_t)r * s_stride;
        if (C == 4)
            _mm_storeu_ps(sr, dots);
        else
            _mm_maskstore_ps(sr, _mm256_castsi256_si128(first_lanes(C)), dots);
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
    switch (nq - r) {
#if QK_ROWS > 2
    case 2:
        qk_micro(dtype, 2, C, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, d, scale,
                 s + (ptrdiff_t)r * s_stride, s_stride);
        break;
#endif
    case 1:
        qk_micro(dtype, 1, C, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, d, scale,
                 s + (ptrdiff_t)r * s_stride, s_stride);
        break;
    default:
        break;
    }
}

/*
 * Keys outermost: a group of QK_KEYS k rows stays in L1 while every query
 * row of the block (kept in L1/L2 by the driver's block size) passes over it.
 */
static ALWAYS_INLINE void qk_tile(int dtype, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    size_t esize = dtype == ATTN_KV_F32 ? 4 : 2;
    size_t c = 0;
    for (; c + QK_KEYS <= nk; c += QK_KEYS)
        qk_rows(dtype, QK_KEYS, q, q_stride,
                (const char *)k + (ptrdiff_t)c * k_stride * (ptrdiff_t)esize, k_stride, nq, d,
                scale, s + c, s_stride);
    const void *kc = (const char *)k + (ptrdiff_t)c * k_stride * (ptrdiff_t)esize;
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
 * Micro-kernel: acc rows r..r+R, columns j..j+8W stay in R*W ymm registers
 * while the keys c0..c1 of the chunk stream by; each key loads W vectors of
 * its v row and broadcasts R weights. `tail` (1..7, or 0) makes the last
 * vector partial.
 */
#define PV_ROWS 4
#define PV_VECS 2
/* Keys per pass: this many v rows stay in L1 across the column chunks. */
#define PV_KEY_CHUNK 32

static ALWAYS_INLINE void pv_micro(int dtype, size_t R, size_t W, size_t tail, const float *p,
                                   ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride,
                                   size_t nk, float *acc, ptrdiff_t acc_stride)
{
    __m256 a[PV_ROWS][PV_VECS];
    __m256i last = first_lanes(tail ? tail : 8);
    for (size_t r = 0; r < R; r++)
        for (size_t w = 0; w < W; w++) {
            float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(8 * w);
            a[r][w] = (tail && w == W - 1) ? _mm256_maskload_ps(ar, last) : _mm256_loadu_ps(ar);
        }
    for (size_t c = 0; c < nk; c++) {
        __m256 vv[PV_VECS];
        ptrdiff_t base = (ptrdiff_t)c * v_stride;
        for (size_t w = 0; w < W; w++)
            vv[w] = (tail && w == W - 1) ? load8_part(dtype, v, base + (ptrdiff_t)(8 * w), tail)
                                         : load8(dtype, v, base + (ptrdiff_t)(8 * w));
        for (size_t r = 0; r < R; r++) {
            __m256 pr = _mm256_broadcast_ss(p + (ptrdiff_t)r * p_stride + (ptrdiff_t)c);
            for (size_t w = 0; w < W; w++)
                a[r][w] = _mm256_fmadd_ps(pr, vv[w], a[r][w]);
        }
    }
    for (size_t r = 0; r < R; r++)
        for (size_t w = 0; w < W; w++) {
            float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(8 * w);
            if (tail && w == W - 1)
                _mm256_maskstore_ps(ar, last, a[r][w]);
            else
                _mm256_storeu_ps(ar, a[r][w]);
        }
}

/* Every column chunk of R rows, for the keys of one pass. */
static ALWAYS_INLINE void pv_cols(int dtype, size_t R, const float *p, ptrdiff_t p_stride,
                                  const void *v, ptrdiff_t v_stride, size_t nk, size_t dv,
                                  float *acc, ptrdiff_t acc_stride)
{
    size_t esize = dtype == ATTN_KV_F32 ? 4 : 2;
    size_t j = 0;
    for (; j + 8 * PV_VECS <= dv; j += 8 * PV_VECS)
        pv_micro(dtype, R, PV_VECS, 0, p, p_stride, (const char *)v + j * esize, v_stride, nk,
                 acc + j, acc_stride);
    size_t rest = dv - j;
    if (rest == 0)
        return;
    const void *vj = (const char *)v + j * esize;
    if (rest > 8)
        pv_micro(dtype, R, 2, rest % 8, p, p_stride, vj, v_stride, nk, acc + j, acc_stride);
    else
        pv_micro(dtype, R, 1, rest % 8, p, p_stride, vj, v_stride, nk, acc + j, acc_stride);
}

static ALWAYS_INLINE void pv_tile(int dtype, const float *p, ptrdiff_t p_stride, const void *v,
                                  ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,
                                  float *acc, ptrdiff_t acc_stride)
{
    size_t esize = dtype == ATTN_KV_F32 ? 4 : 2;
    for (size_t c0 = 0; c0 < nk; c0 += PV_KEY_CHUNK) {
        size_t n = nk - c0 < PV_KEY_CHUNK ? nk - c0 : PV_KEY_CHUNK;
        const void *vc = (const char *)v + (ptrdiff_t)c0 * v_stride * (ptrdiff_t)esize;
        const float *pc = p + c0;
        size_t r = 0;
        for (; r + PV_ROWS <= nq; r += PV_ROWS)
            pv_cols(dtype, PV_ROWS, pc + (ptrdiff_t)r * p_stride, p_stride, vc, v_stride, n, dv,
                    acc + (ptrdiff_t)r * acc_stride, acc_stride);
        const float *pr = pc + (ptrdiff_t)r * p_stride;
        float *ar = acc + (ptrdiff_t)r * acc_stride;
        switch (nq - r) {
        case 3:
            pv_cols(dtype, 3, pr, p_stride, vc, v_stride, n, dv, ar, acc_stride);
            break;
        case 2:
            pv_cols(dtype, 2, pr, p_stride, vc, v_stride, n, dv, ar, acc_stride);
            break;
        case 1:
            pv_cols(dtype, 1, pr, p_stride, vc, v_stride, n, dv, ar, acc_stride);
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
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, load8(dtype, src, (ptrdiff_t)i));
    if (i < n)
        _mm256_maskstore_ps(dst + i, first_lanes(n - i),
                            load8_part(dtype, src, (ptrdiff_t)i, n - i));
}

/* ------------------------------------------------------------------ variants */

#define DEFINE_VARIANT(name, DTYPE)                                                         \
    static void qk_tile_##name(const float *q, ptrdiff_t q_stride, const void *k,          \
                               ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,          \
                               float scale, float *s, ptrdiff_t s_stride)                   \
    {                                                                                       \
        qk_tile(DTYPE, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);            \
    }                                                                                       \
    static void pv_tile_##name(const float *p, ptrdiff_t p_stride, const void *v,          \
                               ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,         \
                               float *acc, ptrdiff_t acc_stride)                            \
    {                                                                                       \
        pv_tile(DTYPE, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);              \
    }                                                                                       \
    static void to_f32_##name(const void *src, float *dst, size_t n)                       \
    {                                                                                       \
        to_f32(DTYPE, src, dst, n);                                                         \
    }

DEFINE_VARIANT(f32, ATTN_KV_F32)
DEFINE_VARIANT(f16, ATTN_KV_F16)
DEFINE_VARIANT(bf16, ATTN_KV_BF16)

void attn_dsp_init_tile_avx2(attn_dsp *t)
{
    t->qk_tile[ATTN_KV_F32] = qk_tile_f32;
    t->qk_tile[ATTN_KV_F16] = qk_tile_f16;
    t->qk_tile[ATTN_KV_BF16] = qk_tile_bf16;
    t->pv_tile[ATTN_KV_F32] = pv_tile_f32;
    t->pv_tile[ATTN_KV_F16] = pv_tile_f16;
    t->pv_tile[ATTN_KV_BF16] = pv_tile_bf16;
    t->to_f32[ATTN_KV_F32] = to_f32_f32;
    t->to_f32[ATTN_KV_F16] = to_f32_f16;
    t->to_f32[ATTN_KV_BF16] = to_f32_bf16;
}

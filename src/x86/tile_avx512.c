/*
 * AVX-512 tile kernels: scores S = scale * Q·Kᵀ (qk_tile), the weighted sum
 * acc += P·V (pv_tile), and K/V row conversion (to_f32), each for K/V in
 * f32, f16 and bf16 (converted inside the loads, accumulated in f32).
 *
 * Tails use mask registers: masked loads read nothing outside [0, n) and
 * masked stores write nothing there, so no kernel touches memory beyond the
 * rows and lengths it was given (software prefetches, hints that read
 * nothing, may name rows beyond: src/prefetch.h).
 *
 * The register blocking below follows the port model of Skylake-SP, Ice Lake
 * and Sapphire Rapids (two 512-bit FMA pipes, two loads per cycle, one
 * shuffle pipe): every hot loop keeps 8-16 independent accumulators in
 * registers (checked in the generated code: no spills) and issues at most
 * one load per FMA.
 */
#include "x86/avx512.h"

/* ------------------------------------------------------------------------ */
/* qk_tile, few query rows (decode, small GQA groups): dot products along d  */
/* ------------------------------------------------------------------------ */

/*
 * R query rows x C keys (R in {1, 2, 4}, C in {1, 4, 8}): R*C accumulators
 * over d, one 16-lane chunk per step, then horizontal sums four at a time.
 * 4x4 loads 8 vectors per 16 FMAs; 1x8 keeps 8 independent FMA chains for the
 * single-row case.
 */
ATTN_AVX512_INLINE void qk_dot_block(int dt, size_t R, size_t C, const float *q, ptrdiff_t q_stride,
                                     const void *k, ptrdiff_t k_off, ptrdiff_t k_stride, size_t d,
                                     float scale, float *s, ptrdiff_t s_stride)
{
    __m512 acc[4][8];
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();

    size_t t = 0;
    for (; t + 16 <= d; t += 16) {
        __m512 kv[8];
        for (size_t c = 0; c < C; c++)
            kv[c] = attn_load16(dt, k, k_off + (ptrdiff_t)c * k_stride + (ptrdiff_t)t);
        for (size_t r = 0; r < R; r++) {
            __m512 qv = _mm512_loadu_ps(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
            for (size_t c = 0; c < C; c++)
                acc[r][c] = _mm512_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }
    if (t < d) {
        __mmask16 m = attn_mask16(d - t);
        __m512 kv[8];
        for (size_t c = 0; c < C; c++)
            kv[c] = attn_maskz_load16(dt, m, k, k_off + (ptrdiff_t)c * k_stride + (ptrdiff_t)t);
        for (size_t r = 0; r < R; r++) {
            __m512 qv = _mm512_maskz_loadu_ps(m, q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
            for (size_t c = 0; c < C; c++)
                acc[r][c] = _mm512_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }

    const __m128 vscale = _mm_set1_ps(scale);
    for (size_t r = 0; r < R; r++) {
        float *sr = s + (ptrdiff_t)r * s_stride;
        if (C == 1) {
            sr[0] = _mm512_reduce_add_ps(acc[r][0]) * scale;
            continue;
        }
        for (size_t c = 0; c < C; c += 4)
            _mm_storeu_ps(sr + c, _mm_mul_ps(attn_hsum4(acc[r][c], acc[r][c + 1], acc[r][c + 2],
                                                        acc[r][c + 3]),
                                             vscale));
    }
}

/* R rows against all nk keys; `pf`: prefetch the keys ahead (the first
   group of rows over these keys does, the others find them in cache). */
ATTN_AVX512_INLINE void qk_dot_rows(int dt, size_t R, int pf, const float *q, ptrdiff_t q_stride,
                                    const void *k, ptrdiff_t k_stride, size_t nk, size_t d,
                                    float scale, float *s, ptrdiff_t s_stride)
{
    size_t c = 0;
    const size_t row_bytes = d * attn_esize(dt);
    const size_t ahead = attn_prefetch_rows_ahead(row_bytes);
    if (R == 1)
        for (; c + 8 <= nk; c += 8) {
            if (pf)
                attn_prefetch_rows(k, c + ahead, k_stride, attn_esize(dt), 8, row_bytes);
            qk_dot_block(dt, 1, 8, q, q_stride, k, (ptrdiff_t)c * k_stride, k_stride, d, scale,
                         s + c, s_stride);
        }
    for (; c + 4 <= nk; c += 4) {
        if (pf)
            attn_prefetch_rows(k, c + ahead, k_stride, attn_esize(dt), 4, row_bytes);
        qk_dot_block(dt, R, 4, q, q_stride, k, (ptrdiff_t)c * k_stride, k_stride, d, scale, s + c,
                     s_stride);
    }
    for (; c < nk; c++)
        qk_dot_block(dt, R, 1, q, q_stride, k, (ptrdiff_t)c * k_stride, k_stride, d, scale, s + c,
                     s_stride);
}

ATTN_AVX512_INLINE void qk_tile_dot(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                    ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                    float *s, ptrdiff_t s_stride)
{
    size_t r = 0;
    for (; r + 4 <= nq; r += 4)
        qk_dot_rows(dt, 4, r == 0, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, nk, d,
                    scale, s + (ptrdiff_t)r * s_stride, s_stride);
    if (r + 2 <= nq) {
        qk_dot_rows(dt, 2, r == 0, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, nk, d,
                    scale, s + (ptrdiff_t)r * s_stride, s_stride);
        r += 2;
    }
    if (r < nq)
        qk_dot_rows(dt, 1, r == 0, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, nk, d,
                    scale, s + (ptrdiff_t)r * s_stride, s_stride);
}

/* ------------------------------------------------------------------------ */
/* qk_tile, many query rows (prefill): K panel packed transposed, GEMM-style */
/* ------------------------------------------------------------------------ */

/*
 * The horizontal sums above cost ~3 shuffle/add ops per score whatever the
 * row count. With many rows it is cheaper to transpose a panel of keys once
 * (16 shuffles per 16 keys x 16 dims) and reuse it for every row: then each
 * score row is a plain broadcast-FMA GEMM with no reductions, and f16/bf16
 * conversion also happens once per panel instead of once per row block.
 */
#define QK_PANEL_KEYS 32  /* two vectors of keys */
/* dims per panel: 128 x 32 floats = 16 KiB of stack. d <= 128 then takes one
   pass with the sums in registers; at 64 the partial sums went through the
   score table between passes, whose rows 8 KiB apart (L = 2048) share L1
   sets: scores at d 128 were 0.92x sgemm, now 1.0x (Zen 5). */
#define QK_PANEL_DEPTH 128
/* 16 rows (Lq = 4 speculative decoding of a GQA group of 4) stay on the dot
   path: in cache it is as fast as the packed one there (215 GFLOP/s on Zen 5),
   and it prefetches K, which the packed path does not (Lq = 4 decode 3.0x its
   roofline on the packed path, 2.1x on this one). */
#define QK_PACKED_MIN_ROWS 17

/* r[i] (row i, 16 lanes) becomes column i: r[i][j] = old r[j][i]. */
ATTN_AVX512_INLINE void transpose16x16(__m512 r[16])
{
    __m512 a[16], b[16];
    for (size_t i = 0; i < 16; i += 2) {
        /* per 128-bit chunk L: rows i, i+1 interleaved, columns 4L..4L+1 / 4L+2..4L+3 */
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (size_t i = 0; i < 16; i += 4) {
        /* b[i + j], chunk L: column 4L+j of rows i..i+3 */
        __m512d lo0 = _mm512_castps_pd(a[i]), hi0 = _mm512_castps_pd(a[i + 2]);
        __m512d lo1 = _mm512_castps_pd(a[i + 1]), hi1 = _mm512_castps_pd(a[i + 3]);
        b[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, hi0));
        b[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, hi0));
        b[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo1, hi1));
        b[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo1, hi1));
    }
    for (size_t j = 0; j < 4; j++) {
        /* 4x4 transpose of 128-bit chunks across b[j], b[4+j], b[8+j], b[12+j] */
        __m512 c0 = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x88);
        __m512 c1 = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xdd);
        __m512 c2 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x88);
        __m512 c3 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xdd);
        r[j] = _mm512_shuffle_f32x4(c0, c2, 0x88);
        r[4 + j] = _mm512_shuffle_f32x4(c1, c3, 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(c0, c2, 0xdd);
        r[12 + j] = _mm512_shuffle_f32x4(c1, c3, 0xdd);
    }
}

/*
 * panel[t*32 + j] = K[key j][t0 + t] as f32 for t < td, j < nkeys; keys
 * nkeys..31 are zero (their scores are never stored).
 */
ATTN_AVX512_INLINE void qk_pack_panel(int dt, const void *k, ptrdiff_t k_off, ptrdiff_t k_stride,
                                      size_t nkeys, size_t t0, size_t td, float *panel)
{
    for (size_t g = 0; g < QK_PANEL_KEYS; g += 16) {
        size_t kn = nkeys > g ? (nkeys - g < 16 ? nkeys - g : 16) : 0;
        for (size_t tb = 0; tb < td; tb += 16) {
            size_t tn = td - tb < 16 ? td - tb : 16;
            __mmask16 m = attn_mask16(tn);
            __m512 rows[16];
            for (size_t j = 0; j < 16; j++) {
                ptrdiff_t at = k_off + (ptrdiff_t)(g + j) * k_stride + (ptrdiff_t)(t0 + tb);
                if (j >= kn)
                    rows[j] = _mm512_setzero_ps();
                else if (tn == 16)
                    rows[j] = attn_load16(dt, k, at);
                else
                    rows[j] = attn_maskz_load16(dt, m, k, at);
            }
            transpose16x16(rows);
            for (size_t i = 0; i < tn; i++)
                _mm512_store_ps(panel + (tb + i) * QK_PANEL_KEYS + g, rows[i]);
        }
    }
}

/*
 * R rows (R in {1, 4, 8}) x the 32 keys of a panel, dims t0..t0+td: 2R
 * accumulators, per dim 2 panel loads + R broadcasts for 2R FMAs. The first
 * depth chunk starts from zero, later ones from the partial sums left in s;
 * the last one applies the scale.
 */
ATTN_AVX512_INLINE void qk_panel_rows(size_t R, const float *q, ptrdiff_t q_stride, size_t t0,
                                      size_t td, const float *panel, __mmask16 m0, __mmask16 m1,
                                      int first, int last, float scale, float *s,
                                      ptrdiff_t s_stride)
{
    __m512 acc[8][2];
    for (size_t r = 0; r < R; r++) {
        const float *sr = s + (ptrdiff_t)r * s_stride;
        acc[r][0] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, sr);
        acc[r][1] = first || !m1 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, sr + 16);
    }
    const float *qt = q + t0;
    for (size_t t = 0; t < td; t++) {
        __m512 k0 = _mm512_load_ps(panel + t * QK_PANEL_KEYS);
        __m512 k1 = _mm512_load_ps(panel + t * QK_PANEL_KEYS + 16);
        for (size_t r = 0; r < R; r++) {
            __m512 qb = _mm512_set1_ps(qt[(ptrdiff_t)r * q_stride + (ptrdiff_t)t]);
            acc[r][0] = _mm512_fmadd_ps(qb, k0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(qb, k1, acc[r][1]);
        }
    }
    const __m512 vscale = _mm512_set1_ps(scale);
    for (size_t r = 0; r < R; r++) {
        float *sr = s + (ptrdiff_t)r * s_stride;
        if (last) {
            acc[r][0] = _mm512_mul_ps(acc[r][0], vscale);
            acc[r][1] = _mm512_mul_ps(acc[r][1], vscale);
        }
        _mm512_mask_storeu_ps(sr, m0, acc[r][0]);
        if (m1)
            _mm512_mask_storeu_ps(sr + 16, m1, acc[r][1]);
    }
}

ATTN_AVX512_INLINE void qk_tile_packed(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                       ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                       float scale, float *s, ptrdiff_t s_stride)
{
    _Alignas(64) float panel[QK_PANEL_DEPTH * QK_PANEL_KEYS];
    for (size_t c0 = 0; c0 < nk; c0 += QK_PANEL_KEYS) {
        size_t nkeys = nk - c0 < QK_PANEL_KEYS ? nk - c0 : QK_PANEL_KEYS;
        __mmask16 m0 = attn_mask16(nkeys < 16 ? nkeys : 16);
        __mmask16 m1 = attn_mask16(nkeys > 16 ? nkeys - 16 : 0);
        for (size_t t0 = 0; t0 < d; t0 += QK_PANEL_DEPTH) {
            size_t td = d - t0 < QK_PANEL_DEPTH ? d - t0 : QK_PANEL_DEPTH;
            int first = t0 == 0, last = t0 + td == d;
            qk_pack_panel(dt, k, (ptrdiff_t)c0 * k_stride, k_stride, nkeys, t0, td, panel);
            size_t r = 0;
            for (; r + 8 <= nq; r += 8)
                qk_panel_rows(8, q + (ptrdiff_t)r * q_stride, q_stride, t0, td, panel, m0, m1,
                              first, last, scale, s + (ptrdiff_t)r * s_stride + c0, s_stride);
            for (; r + 4 <= nq; r += 4)
                qk_panel_rows(4, q + (ptrdiff_t)r * q_stride, q_stride, t0, td, panel, m0, m1,
                              first, last, scale, s + (ptrdiff_t)r * s_stride + c0, s_stride);
            for (; r < nq; r++)
                qk_panel_rows(1, q + (ptrdiff_t)r * q_stride, q_stride, t0, td, panel, m0, m1,
                              first, last, scale, s + (ptrdiff_t)r * s_stride + c0, s_stride);
        }
    }
}

ATTN_AVX512_INLINE void qk_tile(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                float *s, ptrdiff_t s_stride)
{
    if (nq >= QK_PACKED_MIN_ROWS)
        qk_tile_packed(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);
    else
        qk_tile_dot(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);
}

/* ------------------------------------------------------------------------ */
/* pv_tile                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * R rows (R in {1, 2, 4}) x NV vectors of output columns (NV in 1..4) from
 * column j0, over all nk keys: R*NV accumulators kept in registers for the
 * whole key loop, per key NV value loads + R broadcasts for R*NV FMAs. When
 * tail is set the last vector covers only the lanes in m. pf > 0: prefetch
 * V rows of pf bytes ahead (prefetch.h).
 */
ATTN_AVX512_INLINE void pv_block(int dt, size_t R, size_t NV, int tail, __mmask16 m, size_t pf,
                                 const float *p, ptrdiff_t p_stride, const void *v,
                                 ptrdiff_t v_stride, size_t nk, size_t j0, float *acc,
                                 ptrdiff_t acc_stride)
{
    const size_t nfull = tail ? NV - 1 : NV; /* vectors without a mask */
    __m512 a[4][4];
    for (size_t r = 0; r < R; r++) {
        const float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)j0;
        for (size_t i = 0; i < nfull; i++)
            a[r][i] = _mm512_loadu_ps(ar + 16 * i);
        if (tail)
            a[r][NV - 1] = _mm512_maskz_loadu_ps(m, ar + 16 * (NV - 1));
    }
    const size_t ahead = pf ? attn_prefetch_rows_ahead(pf) : 0;
    for (size_t c = 0; c < nk; c++) {
        ptrdiff_t at = (ptrdiff_t)c * v_stride + (ptrdiff_t)j0;
        if (pf)
            attn_prefetch_rows(v, c + ahead, v_stride, attn_esize(dt), 1, pf);
        __m512 vv[4];
        for (size_t i = 0; i < nfull; i++)
            vv[i] = attn_load16(dt, v, at + 16 * (ptrdiff_t)i);
        if (tail)
            vv[NV - 1] = attn_maskz_load16(dt, m, v, at + 16 * (ptrdiff_t)(NV - 1));
        for (size_t r = 0; r < R; r++) {
            __m512 pb = _mm512_set1_ps(p[(ptrdiff_t)r * p_stride + (ptrdiff_t)c]);
            for (size_t i = 0; i < NV; i++)
                a[r][i] = _mm512_fmadd_ps(pb, vv[i], a[r][i]);
        }
    }
    for (size_t r = 0; r < R; r++) {
        float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)j0;
        for (size_t i = 0; i < nfull; i++)
            _mm512_storeu_ps(ar + 16 * i, a[r][i]);
        if (tail)
            _mm512_mask_storeu_ps(ar + 16 * (NV - 1), m, a[r][NV - 1]);
    }
}

ATTN_AVX512_INLINE void pv_rows(int dt, size_t NV, int tail, __mmask16 m, size_t pf, const float *p,
                                ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride, size_t nq,
                                size_t nk, size_t j0, float *acc, ptrdiff_t acc_stride)
{
    size_t r = 0;
    for (; r + 4 <= nq; r += 4)
        pv_block(dt, 4, NV, tail, m, r == 0 ? pf : 0, p + (ptrdiff_t)r * p_stride, p_stride, v,
                 v_stride, nk, j0, acc + (ptrdiff_t)r * acc_stride, acc_stride);
    /* a loop, not an if: GCC then keeps the accumulators out of memory */
    for (; r + 2 <= nq; r += 2)
        pv_block(dt, 2, NV, tail, m, r == 0 ? pf : 0, p + (ptrdiff_t)r * p_stride, p_stride, v,
                 v_stride, nk, j0, acc + (ptrdiff_t)r * acc_stride, acc_stride);
    if (r < nq)
        pv_block(dt, 1, NV, tail, m, r == 0 ? pf : 0, p + (ptrdiff_t)r * p_stride, p_stride, v,
                 v_stride, nk, j0, acc + (ptrdiff_t)r * acc_stride, acc_stride);
}

ATTN_AVX512_INLINE void pv_tile(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                ptrdiff_t acc_stride)
{
    size_t j0 = 0;
    /* few rows: the first column pass prefetches whole V rows ahead */
    size_t pf = nq < QK_PACKED_MIN_ROWS ? dv * attn_esize(dt) : 0;
    for (; j0 + 64 <= dv; j0 += 64)
        pv_rows(dt, 4, 0, 0xffff, j0 == 0 ? pf : 0, p, p_stride, v, v_stride, nq, nk, j0, acc,
                acc_stride);
    size_t rest = dv - j0;
    if (rest == 0)
        return;
    /* 1..63 columns: ceil(rest / 16) vectors, the last one masked. */
    size_t nv = (rest + 15) / 16;
    __mmask16 m = attn_mask16(rest - 16 * (nv - 1));
    if (j0) /* the 64-column passes prefetched these rows already */
        pf = 0;
    switch (nv) {
    case 1: pv_rows(dt, 1, 1, m, pf, p, p_stride, v, v_stride, nq, nk, j0, acc, acc_stride); break;
    case 2: pv_rows(dt, 2, 1, m, pf, p, p_stride, v, v_stride, nq, nk, j0, acc, acc_stride); break;
    case 3: pv_rows(dt, 3, 1, m, pf, p, p_stride, v, v_stride, nq, nk, j0, acc, acc_stride); break;
    default: pv_rows(dt, 4, 1, m, pf, p, p_stride, v, v_stride, nq, nk, j0, acc, acc_stride); break;
    }
}

/* ------------------------------------------------------------------------ */
/* to_f32                                                                    */
/* ------------------------------------------------------------------------ */

ATTN_AVX512_INLINE void to_f32(int dt, const void *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 x0 = attn_load16(dt, src, (ptrdiff_t)i);
        __m512 x1 = attn_load16(dt, src, (ptrdiff_t)i + 16);
        __m512 x2 = attn_load16(dt, src, (ptrdiff_t)i + 32);
        __m512 x3 = attn_load16(dt, src, (ptrdiff_t)i + 48);
        _mm512_storeu_ps(dst + i, x0);
        _mm512_storeu_ps(dst + i + 16, x1);
        _mm512_storeu_ps(dst + i + 32, x2);
        _mm512_storeu_ps(dst + i + 48, x3);
    }
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, attn_load16(dt, src, (ptrdiff_t)i));
    if (i < n) {
        __mmask16 m = attn_mask16(n - i);
        _mm512_mask_storeu_ps(dst + i, m, attn_maskz_load16(dt, m, src, (ptrdiff_t)i));
    }
}

/* One set of table entries per K/V dtype, sharing the bodies above. */
#define DEFINE_TILES(name, dt)                                                                  \
    static void attn_qk_tile_##name##_avx512(const float *q, ptrdiff_t q_stride, const void *k,          \
                               ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale, \
                               float *s, ptrdiff_t s_stride)                                    \
    {                                                                                           \
        qk_tile(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);                   \
    }                                                                                           \
    static void attn_pv_tile_##name##_avx512(const float *p, ptrdiff_t p_stride, const void *v,          \
                               ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,             \
                               float *acc, ptrdiff_t acc_stride)                                \
    {                                                                                           \
        pv_tile(dt, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);                     \
    }                                                                                           \
    static void attn_to_f32_##name##_avx512(const void *src, float *dst, size_t n)                       \
    {                                                                                           \
        to_f32(dt, src, dst, n);                                                                \
    }

DEFINE_TILES(f32, ATTN_KV_F32)
DEFINE_TILES(f16, ATTN_KV_F16)
DEFINE_TILES(bf16, ATTN_KV_BF16)

void attn_dsp_init_tiles_avx512(attn_dsp *t)
{
    t->qk_tile[ATTN_KV_F32] = attn_qk_tile_f32_avx512;
    t->qk_tile[ATTN_KV_F16] = attn_qk_tile_f16_avx512;
    t->qk_tile[ATTN_KV_BF16] = attn_qk_tile_bf16_avx512;
    t->pv_tile[ATTN_KV_F32] = attn_pv_tile_f32_avx512;
    t->pv_tile[ATTN_KV_F16] = attn_pv_tile_f16_avx512;
    t->pv_tile[ATTN_KV_BF16] = attn_pv_tile_bf16_avx512;
    t->to_f32[ATTN_KV_F32] = attn_to_f32_f32_avx512;
    t->to_f32[ATTN_KV_F16] = attn_to_f32_f16_avx512;
    t->to_f32[ATTN_KV_BF16] = attn_to_f32_bf16_avx512;
}

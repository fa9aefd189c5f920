/* SPDX-License-Identifier: MIT */
/*
 * The AVX-512 tile family (qk_tile, pv_tile, to_f32), written once for every
 * K/V dtype and instantiated through src/tile_variants.h. A dtype enters only
 * through its loads (load16, maskz_load16, load32) and its stride unit; the
 * quantized dtypes decode exactly into f32 (src/dsp.h).
 *
 * Tails use mask registers, so no kernel touches memory beyond the rows and
 * lengths it was given (prefetches may: src/prefetch.h). Block formats have
 * no tails. Row addresses are unsigned arithmetic (src/prefetch.h says why).
 * Hot loops keep 8-16 independent accumulators and issue at most one load
 * per FMA (two FMA pipes, two loads per cycle).
 */
#ifndef ATTN_X86_TILE_AVX512_TMPL_H
#define ATTN_X86_TILE_AVX512_TMPL_H

#include <string.h>

#include "tile_variants.h"
#include "x86/avx512.h"

/* ---- the dtypes ---- */

#define unit_bytes attn_kv_unit_bytes
#define is_block attn_kv_is_block
#define is_quant attn_kv_is_quant
#define row_bytes attn_kv_row_bytes
#define row_at attn_kv_row

/* The binary16 scale at the head of a block (unaligned). */
ATTN_AVX512_INLINE __m512 block_scale(const unsigned char *blk)
{
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm512_set1_ps(_cvtsh_ss(h));
}

/*
 * 16 E4M3 bytes to f32, exactly: S.EEEE.MMM -> binary16 S.0EEEE.MMM0000000
 * is the value times 2^-8 (subnormals included), widened exactly and scaled
 * exactly by 2^8. No f32 subnormal occurs and vcvtph2ps ignores MXCSR.DAZ,
 * so DAZ/FTZ cannot change a value (quant_kernels::e4m3_every_byte).
 * S.1111.111, which maps to 480, is set to NaN.
 */
ATTN_AVX512_INLINE __m512 fp8_16(int dt, __m128i x)
{
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(x), 7),
                                       _mm256_set1_epi16((short)0xBF80));
    const __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    if (dt == ATTN_KV_E4M3_FINITE) /* scanned: no NaN byte (tile_variants.h) */
        return v;
    /* S.1111.111: the low seven bits flipped are all zero */
    const __m128i low7 = _mm_set1_epi8(0x7f);
    const __mmask16 is_nan = _mm_testn_epi8_mask(_mm_xor_si128(x, low7), low7);
    return _mm512_mask_mov_ps(v, is_nan, _mm512_set1_ps(__builtin_nanf("")));
}

/* Whether the rows rows of n E4M3 bytes at base, stride bytes apart, hold
   no NaN byte: the largest low-seven-bits value is below 0x7f. */
ATTN_AVX512_INLINE int e4m3_finite(const void *base, ptrdiff_t stride, size_t rows, size_t n)
{
    const __m512i low7 = _mm512_set1_epi8(0x7f);
    const __mmask64 tail = n % 64 ? (__mmask64)(~0ull >> (64 - n % 64)) : 0;
    __m512i mx = _mm512_setzero_si512();
    for (size_t r = 0; r < rows; r++) {
        const unsigned char *row = attn_kv_row(base, r, (uintptr_t)stride);
        size_t t = 0;
        for (; t + 64 <= n; t += 64)
            mx = _mm512_max_epu8(mx, _mm512_and_si512(_mm512_loadu_si512(row + t), low7));
        if (tail)
            mx = _mm512_max_epu8(mx, _mm512_and_si512(_mm512_maskz_loadu_epi8(tail, row + t), low7));
    }
    return _mm512_cmpeq_epi8_mask(mx, low7) == 0;
}
#define ATTN_E4M3_FINITE(base, stride, rows, n) e4m3_finite(base, stride, rows, n)

/* 16 E5M2 bytes to f32, exactly: each is the upper half of a binary16,
   widened whatever MXCSR.DAZ says (quant_kernels::e5m2_every_byte). */
ATTN_AVX512_INLINE __m512 e5m2_16(__m128i x)
{
    /* from memory, the broadcast folds into the load: one shuffle */
    const __m256i to_high = _mm256_setr_epi8(-1, 0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1,
                                             7, -1, 8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1,
                                             14, -1, 15);
    return _mm512_cvtph_ps(_mm256_shuffle_epi8(_mm256_broadcastsi128_si256(x), to_high));
}

/* Values t..t+15 (t a multiple of 16) of a row, as f32. */
ATTN_AVX512_INLINE __m512 load16(int dt, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_F32)
        return _mm512_loadu_ps((const float *)row + t);
    if (dt == ATTN_KV_F16 || dt == ATTN_KV_BF16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + t));
        if (dt == ATTN_KV_F16)
            return _mm512_cvtph_ps(h);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    if ((dt & ATTN_KV_DT_MASK) == ATTN_KV_FP8_E4M3)
        return fp8_16(dt, _mm_loadu_si128((const __m128i *)(row + t)));
    if (dt == ATTN_KV_FP8_E5M2)
        return e5m2_16(_mm_loadu_si128((const __m128i *)(row + t)));
    const unsigned char *blk = row + t / ATTN_QBLOCK * unit_bytes(dt);
    __m512i iv;
    if (dt == ATTN_KV_Q8_0) {
        iv = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2 + (t & 16))));
    } else { /* Q4_0: values 0..15 in the low nibbles, 16..31 in the high */
        __m128i x = _mm_loadu_si128((const __m128i *)(blk + 2));
        if (t & 16)
            x = _mm_srli_epi16(x, 4);
        x = _mm_and_si128(x, _mm_set1_epi8(0x0f));
        iv = _mm512_sub_epi32(_mm512_cvtepu8_epi32(x), _mm512_set1_epi32(8));
    }
    return _mm512_mul_ps(_mm512_cvtepi32_ps(iv), block_scale(blk));
}

/* The lanes in m only, the others 0 and unread (no block format). */
ATTN_AVX512_INLINE __m512 maskz_load16(int dt, __mmask16 m, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_F32)
        return _mm512_maskz_loadu_ps(m, (const float *)row + t);
    if ((dt & ATTN_KV_DT_MASK) == ATTN_KV_FP8_E4M3)
        return fp8_16(dt, _mm_maskz_loadu_epi8(m, row + t));
    if (dt == ATTN_KV_FP8_E5M2)
        return e5m2_16(_mm_maskz_loadu_epi8(m, row + t));
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)row + t);
    if (dt == ATTN_KV_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Block formats: one 32-value block, the same values as two load16.
   (n - 8) * d as one FMA n * d + (-8 d): exact, the result is representable. */
ATTN_AVX512_INLINE void load32(int dt, const unsigned char *row, size_t t, __m512 *lo,
                                __m512 *hi)
{
    const unsigned char *blk = row + t / ATTN_QBLOCK * unit_bytes(dt);
    const __m512 d = block_scale(blk);
    if (dt == ATTN_KV_Q8_0) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(blk + 2));
        *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(x))), d);
        *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(x, 1))),
                            d);
    } else {
        const __m128i x = _mm_loadu_si128((const __m128i *)(blk + 2));
        const __m128i nib = _mm_set1_epi8(0x0f);
        const __m512 m8d = _mm512_mul_ps(d, _mm512_set1_ps(-8.0f));
        *lo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(x, nib))), d,
                              m8d);
        *hi = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(x, 4), nib))), d,
            m8d);
    }
}

ATTN_AVX512_INLINE void to_f32(int dt, const void *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 x0 = load16(dt, src, i);
        __m512 x1 = load16(dt, src, i + 16);
        __m512 x2 = load16(dt, src, i + 32);
        __m512 x3 = load16(dt, src, i + 48);
        _mm512_storeu_ps(dst + i, x0);
        _mm512_storeu_ps(dst + i + 16, x1);
        _mm512_storeu_ps(dst + i + 32, x2);
        _mm512_storeu_ps(dst + i + 48, x3);
    }
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, load16(dt, src, i));
    if (i < n) {
        __mmask16 m = attn_mask16(n - i);
        _mm512_mask_storeu_ps(dst + i, m, maskz_load16(dt, m, src, i));
    }
}

/* ---- qk_tile, few query rows: dot products along d ---- */

ATTN_AVX512_INLINE void qk_dot_store(size_t R, size_t C, __m512 (*acc)[8], float scale, float *s,
                                     ptrdiff_t s_stride)
{
    const __m128 vscale = _mm_set1_ps(scale);
    if (C == 2) { /* each lane's sum tree as below */
        for (size_t r = 0; r < R; r += 2) {
            float h[4];
            _mm_storeu_ps(h, _mm_mul_ps(attn_hsum4(acc[r][0], acc[r][1], acc[r + 1][0],
                                                   acc[r + 1][1]),
                                        vscale));
            float *sr = s + (ptrdiff_t)r * s_stride;
            sr[0] = h[0];
            sr[1] = h[1];
            sr[s_stride] = h[2];
            sr[s_stride + 1] = h[3];
        }
        return;
    }
    for (size_t r = 0; r < R; r++) {
        float *sr = s + (ptrdiff_t)r * s_stride;
        if (C == 1) {
            /* the same sum tree as a lane of the C >= 4 blocks, so a score
               does not depend on where a run of keys (a K page) ends */
            const __m512 z = _mm512_setzero_ps();
            sr[0] = _mm_cvtss_f32(_mm_mul_ps(attn_hsum4(acc[r][0], z, z, z), vscale));
            continue;
        }
        for (size_t c = 0; c < C; c += 4)
            _mm_storeu_ps(sr + c, _mm_mul_ps(attn_hsum4(acc[r][c], acc[r][c + 1], acc[r][c + 2],
                                                        acc[r][c + 3]),
                                             vscale));
    }
}

/* R x C accumulators over d (1x8, 2x4, 4x4, 8x2 or R x 1), then
   horizontal sums; block formats give the same sums in the same order. */
ATTN_AVX512_INLINE void qk_dot_block_at(int dt, size_t R, size_t C, const float *q,
                                        ptrdiff_t q_stride, const unsigned char *k, uintptr_t kb,
                                        size_t d, float scale, float *s, ptrdiff_t s_stride,
                                        const attn_grp *gs, size_t kc)
{
    __m512 acc[8][8]; /* R x C <= 16 used */
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();

    size_t t = 0;
    if (is_block(dt))
        for (; t < d; t += 32) {
            __m512 klo[8], khi[8];
            for (size_t c = 0; c < C; c++)
                load32(dt, row_at(k, c, kb), t, &klo[c], &khi[c]);
            for (size_t r = 0; r < R; r++) {
                const float *qr = q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t;
                const __m512 qlo = _mm512_loadu_ps(qr), qhi = _mm512_loadu_ps(qr + 16);
                for (size_t c = 0; c < C; c++) {
                    acc[r][c] = _mm512_fmadd_ps(qlo, klo[c], acc[r][c]);
                    acc[r][c] = _mm512_fmadd_ps(qhi, khi[c], acc[r][c]);
                }
            }
        }
    __m512 ksc[8];
    for (size_t c = 0; c < C; c++)
        ksc[c] = _mm512_setzero_ps();
    size_t gend = 0, gi = 0;
    /* gs: d is whole groups of 16k values, so these steps cover it */
    for (; t + 16 <= d; t += 16) {
        __m512 kv[8];
        if (gs && attn_grp_next(gs, t, &gend, &gi))
            for (size_t c = 0; c < C; c++)
                ksc[c] = _mm512_set1_ps(attn_grp_row(gs, kc + c)[gi]);
        for (size_t c = 0; c < C; c++)
            kv[c] = gs ? _mm512_mul_ps(load16(dt, row_at(k, c, kb), t), ksc[c])
                       : load16(dt, row_at(k, c, kb), t);
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
            kv[c] = maskz_load16(dt, m, row_at(k, c, kb), t);
        for (size_t r = 0; r < R; r++) {
            __m512 qv = _mm512_maskz_loadu_ps(m, q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
            for (size_t c = 0; c < C; c++)
                acc[r][c] = _mm512_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }

    qk_dot_store(R, C, acc, scale, s, s_stride);
}

/* E4M3 keys: rows without a NaN byte skip the per-value fix-up
   (src/tile_variants.h). */
ATTN_AVX512_INLINE void qk_dot_block(int dt, size_t R, size_t C, const float *q, ptrdiff_t q_stride,
                                     const unsigned char *k, uintptr_t kb, size_t d, float scale,
                                     float *s, ptrdiff_t s_stride, const attn_grp *gs, size_t kc)
{
#define QK_DOT_BLOCK_AT(t)                                                                   \
    qk_dot_block_at(t, R, C, q, q_stride, k, kb, d, scale, s, s_stride, gs, kc)
    ATTN_E4M3_SCANNED(dt, k, (ptrdiff_t)kb, C, d, QK_DOT_BLOCK_AT);
#undef QK_DOT_BLOCK_AT
}

/* pf: prefetch keys ahead (only the first row group; the others hit cache). */
ATTN_AVX512_INLINE void qk_dot_rows(int dt, size_t R, int pf, const float *q, ptrdiff_t q_stride,
                                    const void *k, ptrdiff_t k_stride, size_t nk, size_t d,
                                    float scale, float *s, ptrdiff_t s_stride, const attn_grp *gs)
{
    size_t c = 0;
    const size_t unit = unit_bytes(dt), bytes = row_bytes(dt, d);
    const uintptr_t kb = (uintptr_t)k_stride * unit;
    const size_t ahead = attn_prefetch_rows_ahead(bytes);
    if (R == 1)
        for (; c + 8 <= nk; c += 8) {
            if (pf)
                attn_prefetch_rows(k, c + ahead, k_stride, unit, 8, bytes);
            qk_dot_block(dt, 1, 8, q, q_stride, row_at(k, c, kb), kb, d, scale, s + c, s_stride, gs, c);
        }
    if (R == 8)
        for (; c + 2 <= nk; c += 2) {
            if (pf)
                attn_prefetch_rows(k, c + ahead, k_stride, unit, 2, bytes);
            qk_dot_block(dt, 8, 2, q, q_stride, row_at(k, c, kb), kb, d, scale, s + c, s_stride, gs, c);
        }
    for (; R <= 4 && c + 4 <= nk; c += 4) {
        if (pf)
            attn_prefetch_rows(k, c + ahead, k_stride, unit, 4, bytes);
        qk_dot_block(dt, R, 4, q, q_stride, row_at(k, c, kb), kb, d, scale, s + c, s_stride, gs, c);
    }
    for (; c < nk; c++)
        qk_dot_block(dt, R, 1, q, q_stride, row_at(k, c, kb), kb, d, scale, s + c, s_stride, gs, c);
}

ATTN_AVX512_INLINE void qk_tile_dot(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                    ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                    float *s, ptrdiff_t s_stride, const attn_grp *gs)
{
    size_t r = 0;
    /* quantized keys: 8 x 2 decodes each K vector once per 8 rows */
    if (is_quant(dt))
        for (; r + 8 <= nq; r += 8)
            qk_dot_rows(dt, 8, r == 0, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, nk, d,
                        scale, s + (ptrdiff_t)r * s_stride, s_stride, gs);
    for (; r + 4 <= nq; r += 4)
        qk_dot_rows(dt, 4, r == 0, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, nk, d,
                    scale, s + (ptrdiff_t)r * s_stride, s_stride, gs);
    if (r + 2 <= nq) {
        qk_dot_rows(dt, 2, r == 0, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, nk, d,
                    scale, s + (ptrdiff_t)r * s_stride, s_stride, gs);
        r += 2;
    }
    if (r < nq)
        qk_dot_rows(dt, 1, r == 0, q + (ptrdiff_t)r * q_stride, q_stride, k, k_stride, nk, d,
                    scale, s + (ptrdiff_t)r * s_stride, s_stride, gs);
}

/* ---- qk_tile, many query rows: K panel packed transposed ---- */

/*
 * Horizontal sums cost ~3 ops per score whatever the row count; with many
 * rows a key panel transposed once makes each score row a broadcast-FMA GEMM
 * without reductions, and decodes K once per panel.
 */
#define QK_PANEL_KEYS 32
/* 16 KiB of stack; d <= 128 takes one pass with the sums in registers */
#define QK_PANEL_DEPTH 128
/* from 9 rows, index-order FMA chains: 9-16 on the Q panel, more on K panels */
#define QK_PACKED_MIN_ROWS 9
#define PV_PREFETCH_MAX_ROWS 16
/* d > QK_PANEL_DEPTH: partial sums pass through s between panels, so the
   dot path stays faster up to 32 rows */
#define QK_PACKED_MIN_ROWS_DEEP 33

/* qk_diag must choose as qk_tile does: it must sum the same way. */
ATTN_AVX512_INLINE int qk_index_order(size_t nq, size_t d)
{
    return nq >= (d > QK_PANEL_DEPTH ? QK_PACKED_MIN_ROWS_DEEP : QK_PACKED_MIN_ROWS);
}

/* r[i][j] = old r[j][i] */
ATTN_AVX512_INLINE void transpose16x16(__m512 r[16])
{
    __m512 a[16], b[16];
    for (size_t i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (size_t i = 0; i < 16; i += 4) {
        __m512d lo0 = _mm512_castps_pd(a[i]), hi0 = _mm512_castps_pd(a[i + 2]);
        __m512d lo1 = _mm512_castps_pd(a[i + 1]), hi1 = _mm512_castps_pd(a[i + 3]);
        b[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, hi0));
        b[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, hi0));
        b[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo1, hi1));
        b[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo1, hi1));
    }
    for (size_t j = 0; j < 4; j++) {
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

/* panel[t*32 + j] = K[j][t0 + t]; keys from nkeys on are zero (never stored). */
ATTN_AVX512_INLINE void qk_pack_panel(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys,
                                      size_t t0, size_t td, float *panel)
{
    for (size_t g = 0; g < QK_PANEL_KEYS; g += 16) {
        size_t kn = nkeys > g ? (nkeys - g < 16 ? nkeys - g : 16) : 0;
        for (size_t tb = 0; tb < td; tb += 16) {
            size_t tn = td - tb < 16 ? td - tb : 16;
            __mmask16 m = attn_mask16(tn);
            __m512 rows[16];
            for (size_t j = 0; j < 16; j++) {
                if (j >= kn)
                    rows[j] = _mm512_setzero_ps();
                else if (tn == 16)
                    rows[j] = load16(dt, row_at(k, g + j, kb), t0 + tb);
                else
                    rows[j] = maskz_load16(dt, m, row_at(k, g + j, kb), t0 + tb);
            }
            transpose16x16(rows);
            for (size_t i = 0; i < tn; i++)
                _mm512_store_ps(panel + (tb + i) * QK_PANEL_KEYS + g, rows[i]);
        }
    }
}

/* The first depth chunk starts from zero, later ones from the partial sums
   in s; the last applies the scale. */
ATTN_AVX512_INLINE void panel_acc_load(size_t R, __m512 (*acc)[2], int first, const float *s,
                                       ptrdiff_t s_stride, __mmask16 m0, __mmask16 m1)
{
    for (size_t r = 0; r < R; r++) {
        const float *sr = s + (ptrdiff_t)r * s_stride;
        acc[r][0] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, sr);
        acc[r][1] = first || !m1 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, sr + 16);
    }
}

ATTN_AVX512_INLINE void panel_acc_store(size_t R, __m512 (*acc)[2], int last, float scale,
                                        float *s, ptrdiff_t s_stride, __mmask16 m0, __mmask16 m1)
{
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

/* R rows x 32 keys: per dim 2 panel loads + R broadcasts for 2R FMAs. */
ATTN_AVX512_INLINE void qk_panel_rows(size_t R, const float *q, ptrdiff_t q_stride, size_t t0,
                                      size_t td, const float *panel, __mmask16 m0, __mmask16 m1,
                                      int first, int last, float scale, float *s,
                                      ptrdiff_t s_stride)
{
    __m512 acc[8][2];
    panel_acc_load(R, acc, first, s, s_stride, m0, m1);
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
    panel_acc_store(R, acc, last, scale, s, s_stride, m0, m1);
}

ATTN_AVX512_INLINE void qk_tile_packed(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                       ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                       float scale, float *s, ptrdiff_t s_stride, float *panel)
{
    const uintptr_t kb = (uintptr_t)k_stride * unit_bytes(dt);
    for (size_t c0 = 0; c0 < nk; c0 += QK_PANEL_KEYS) {
        size_t nkeys = nk - c0 < QK_PANEL_KEYS ? nk - c0 : QK_PANEL_KEYS;
        __mmask16 m0 = attn_mask16(nkeys < 16 ? nkeys : 16);
        __mmask16 m1 = attn_mask16(nkeys > 16 ? nkeys - 16 : 0);
        for (size_t t0 = 0; t0 < d; t0 += QK_PANEL_DEPTH) {
            size_t td = d - t0 < QK_PANEL_DEPTH ? d - t0 : QK_PANEL_DEPTH;
            int first = t0 == 0, last = t0 + td == d;
            qk_pack_panel(dt, row_at(k, c0, kb), kb, nkeys, t0, td, panel);
            size_t r = 0;
            for (; r + 8 <= nq; r += 8)
                qk_panel_rows(8, q + (ptrdiff_t)r * q_stride, q_stride, t0, td, panel, m0, m1,
                              first, last, scale, s + (ptrdiff_t)r * s_stride + c0, s_stride);
            for (; r + 4 <= nq; r += 4)
                qk_panel_rows(4, q + (ptrdiff_t)r * q_stride, q_stride, t0, td, panel, m0, m1,
                              first, last, scale, s + (ptrdiff_t)r * s_stride + c0, s_stride);
            for (; r + 2 <= nq; r += 2)
                qk_panel_rows(2, q + (ptrdiff_t)r * q_stride, q_stride, t0, td, panel, m0, m1,
                              first, last, scale, s + (ptrdiff_t)r * s_stride + c0, s_stride);
            for (; r < nq; r++)
                qk_panel_rows(1, q + (ptrdiff_t)r * q_stride, q_stride, t0, td, panel, m0, m1,
                              first, last, scale, s + (ptrdiff_t)r * s_stride + c0, s_stride);
        }
    }
}

/* ---- qk_tile, 9-16 query rows: Q transposed, a row per lane ---- */

#define QK_QPANEL_ROWS 16
#define QK_QPANEL_KEYS 16

/* acc[c] = sum_t qt[t] * k_c[t], one FMA chain per score in index order, as
   the packed path sums. kf: f32 key rows kf_bytes apart (F32 keys: the cache
   itself). pf: the first of 16 key rows to prefetch. */
ATTN_AVX512_INLINE void qk_qpanel_block(const float *qt, size_t d, const float *kf,
                                        uintptr_t kf_bytes, size_t nq, size_t nkeys, float scale,
                                        float *s, ptrdiff_t s_stride, uintptr_t pf, uintptr_t kb,
                                        size_t bytes)
{
    __m512 acc[QK_QPANEL_KEYS];
    for (size_t c = 0; c < QK_QPANEL_KEYS; c++)
        acc[c] = _mm512_setzero_ps();
    /* prefetches spread over the loop: issued at once they fill the miss
       buffers and stall */
    size_t pf_rows = QK_QPANEL_KEYS, pf_off = 0;
    for (size_t t = 0; t < d; t++) {
        const __m512 qv = _mm512_load_ps(qt + t * 16);
        for (size_t c = 0; c < QK_QPANEL_KEYS; c++)
            acc[c] = _mm512_fmadd_ps(
                qv, _mm512_set1_ps(((const float *)((uintptr_t)kf + c * kf_bytes))[t]), acc[c]);
        if (pf_rows) {
            __builtin_prefetch((const void *)(pf + pf_off), 0, 3);
            if ((pf_off += 64) >= bytes) {
                pf_off = 0;
                pf += kb;
                pf_rows--;
            }
        }
    }
    const __m512 vscale = _mm512_set1_ps(scale);
    for (size_t c = 0; c < QK_QPANEL_KEYS; c++)
        acc[c] = _mm512_mul_ps(acc[c], vscale);
    transpose16x16(acc);
    const __mmask16 m = attn_mask16(nkeys);
    for (size_t r = 0; r < nq; r++)
        _mm512_mask_storeu_ps(s + (ptrdiff_t)r * s_stride, m, acc[r]);
}

/* nq <= 16 rows, d <= QK_PANEL_DEPTH: no horizontal sums, and each key value
   decoded once for all rows (F32 keys read in place). */
ATTN_AVX512_INLINE void qk_tile_qpanel(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                       ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                       float scale, float *s, ptrdiff_t s_stride, float *scratch)
{
    float *qt = scratch, *kf = scratch + QK_PANEL_DEPTH * QK_QPANEL_ROWS;
    /* in the key block's unused place: ATTN_TASK_STACK_BYTES has no room
       for 1 KiB more */
    __m512 *rows = (__m512 *)(void *)kf;
    for (size_t t0 = 0; t0 < d; t0 += 16) {
        const size_t tn = d - t0 < 16 ? d - t0 : 16;
        const __mmask16 m = attn_mask16(tn);
        for (size_t r = 0; r < 16; r++)
            rows[r] = r < nq ? _mm512_maskz_loadu_ps(m, q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t0)
                             : _mm512_setzero_ps();
        transpose16x16(rows);
        for (size_t t = 0; t < tn; t++)
            _mm512_store_ps(qt + (t0 + t) * 16, rows[t]);
    }
    const size_t unit = unit_bytes(dt), bytes = row_bytes(dt, d);
    const uintptr_t kb = (uintptr_t)k_stride * unit;
    const size_t ahead = attn_prefetch_rows_ahead(bytes);
    for (size_t c0 = 0; c0 < nk; c0 += QK_QPANEL_KEYS) {
        const size_t nkeys = nk - c0 < QK_QPANEL_KEYS ? nk - c0 : QK_QPANEL_KEYS;
        const unsigned char *kc = row_at(k, c0, kb);
        const uintptr_t pf = (uintptr_t)k + (uintptr_t)(c0 + ahead) * kb;
        /* one call site: each inlined copy adds its spills to the frame */
        const int direct = dt == ATTN_KV_F32 && nkeys == QK_QPANEL_KEYS;
        for (size_t c = 0; !direct && c < QK_QPANEL_KEYS; c++)
            if (c < nkeys)
                to_f32(dt, row_at(kc, c, kb), kf + c * QK_PANEL_DEPTH, d);
            else
                memset(kf + c * QK_PANEL_DEPTH, 0, d * sizeof(float));
        qk_qpanel_block(qt, d, direct ? (const float *)kc : kf,
                        direct ? kb : QK_PANEL_DEPTH * sizeof(float), nq, nkeys, scale, s + c0,
                        s_stride, pf, kb, bytes);
    }
}

ATTN_AVX512_INLINE void qk_tile(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                float *s, ptrdiff_t s_stride)
{
    /* one scratch for both paths: two would pass ATTN_TASK_STACK_BYTES */
    _Alignas(64) float scratch[QK_PANEL_DEPTH * QK_PANEL_KEYS];
    _Static_assert(QK_PANEL_DEPTH * QK_PANEL_KEYS >=
                       QK_PANEL_DEPTH * (QK_QPANEL_ROWS + QK_QPANEL_KEYS),
                   "the Q-panel path's q and key blocks fit the scratch");
    if (!qk_index_order(nq, d))
        qk_tile_dot(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, NULL);
    else if (nq <= QK_QPANEL_ROWS)
        qk_tile_qpanel(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, scratch);
    else
        qk_tile_packed(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, scratch);
}

/* qk_diag (src/dsp.h): each score summed as qk_tile would sum it in an
   nq-row call: qk_dot_block at 1 x 1, or one index-order FMA chain. */
ATTN_AVX512_INLINE void qk_diag(int dt, const float *q, ptrdiff_t q_stride,
                                const void *const *rows, size_t nq, size_t d, float scale,
                                float *s)
{
    if (!qk_index_order(nq, d)) {
        for (size_t r = 0; r < nq; r++)
            qk_dot_block(dt, 1, 1, q + (ptrdiff_t)r * q_stride, 0, rows[r], 0, d, scale, s + r,
                         1, NULL, 0);
        return;
    }
    for (size_t r0 = 0; r0 < nq; r0 += 16) {
        const size_t nr = nq - r0 < 16 ? nq - r0 : 16;
        __m512 acc = _mm512_setzero_ps();
        for (size_t t0 = 0; t0 < d; t0 += 16) {
            const size_t tn = d - t0 < 16 ? d - t0 : 16;
            const __mmask16 m = attn_mask16(tn);
            __m512 qt[16], kt[16];
            for (size_t j = 0; j < 16; j++) {
                if (j >= nr) {
                    qt[j] = kt[j] = _mm512_setzero_ps();
                    continue;
                }
                const float *qr = q + (ptrdiff_t)(r0 + j) * q_stride + (ptrdiff_t)t0;
                const unsigned char *kr = rows[r0 + j];
                if (tn == 16) {
                    qt[j] = _mm512_loadu_ps(qr);
                    kt[j] = load16(dt, kr, t0);
                } else {
                    qt[j] = _mm512_maskz_loadu_ps(m, qr);
                    kt[j] = maskz_load16(dt, m, kr, t0);
                }
            }
            transpose16x16(qt);
            transpose16x16(kt);
            for (size_t t = 0; t < tn; t++)
                acc = _mm512_fmadd_ps(qt[t], kt[t], acc);
        }
        _mm512_mask_storeu_ps(s + r0, attn_mask16(nr), _mm512_mul_ps(acc, _mm512_set1_ps(scale)));
    }
}

/* ---- pv_tile ---- */

/*
 * R rows x NV vectors of columns from j0, in registers for the whole key
 * loop; key c's weight for row r is p[r * p_stride + c * p_step]. fresh:
 * start at zero and add to acc once at the end, the scalar oracle's order
 * (src/scalar/tile_scalar_tmpl.h, pv_rows); else start from acc.
 * Returns 0, having stored nothing, when E4M3_FINITE met a NaN byte.
 */
ATTN_AVX512_INLINE int pv_block_at(int dt, int fresh, size_t R, size_t NV, int tail, __mmask16 m,
                                   size_t pf, const float *p, ptrdiff_t p_stride, ptrdiff_t p_step,
                                   const void *v, ptrdiff_t v_stride, size_t nk, size_t j0,
                                   float *acc, ptrdiff_t acc_stride, const attn_grp *gs)
{
    const size_t nfull = tail ? NV - 1 : NV;
    const size_t unit = unit_bytes(dt);
    const uintptr_t vb = (uintptr_t)v_stride * unit;
    __m512 a[8][4]; /* R x NV <= 16 used */
    for (size_t r = 0; r < R; r++) {
        const float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)j0;
        for (size_t i = 0; i < nfull; i++)
            a[r][i] = fresh ? _mm512_setzero_ps() : _mm512_loadu_ps(ar + 16 * i);
        if (tail)
            a[r][NV - 1] =
                fresh ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, ar + 16 * (NV - 1));
    }
    const size_t ahead = pf ? attn_prefetch_rows_ahead(pf) : 0;
    /* E4M3_FINITE: NaN bytes checked before anything is stored */
    const __m512i low7 = _mm512_set1_epi8(0x7f);
    const __mmask64 bytes = (NV > 1 ? ~0ull >> (64 - 16 * (NV - 1)) : 0) |
                            (__mmask64)(tail ? m : 0xffff) << (16 * (NV - 1));
    __m512i mx = _mm512_setzero_si512();
    size_t grp[4];
    for (size_t i = 0; gs && i < NV; i++)
        grp[i] = (j0 + 16 * i) / gs->g;
    for (size_t c = 0; c < nk; c++) {
        const unsigned char *row = row_at(v, c, vb);
        if (pf)
            attn_prefetch_rows(v, c + ahead, v_stride, unit, 1, pf);
        if (dt == ATTN_KV_E4M3_FINITE)
            mx = _mm512_max_epu8(mx, _mm512_and_si512(_mm512_maskz_loadu_epi8(bytes, row + j0),
                                                      low7));
        __m512 vv[4];
        if (is_block(dt)) { /* whole blocks: NV even */
            size_t i = 0;
            for (; i + 1 < NV; i += 2)
                load32(dt, row, j0 + 16 * i, &vv[i], &vv[i + 1]);
            if (i < NV) /* never taken; keeps every vv defined */
                vv[i] = load16(dt, row, j0 + 16 * i);
        } else {
            for (size_t i = 0; i < nfull; i++)
                vv[i] = load16(dt, row, j0 + 16 * i);
            if (tail)
                vv[NV - 1] = maskz_load16(dt, m, row, j0 + 16 * (NV - 1));
        }
        for (size_t i = 0; gs && i < NV; i++)
            vv[i] = _mm512_mul_ps(vv[i], _mm512_set1_ps(attn_grp_row(gs, c)[grp[i]]));
        for (size_t r = 0; r < R; r++) {
            __m512 pb = _mm512_set1_ps(p[(ptrdiff_t)r * p_stride + (ptrdiff_t)c * p_step]);
            for (size_t i = 0; i < NV; i++)
                a[r][i] = _mm512_fmadd_ps(pb, vv[i], a[r][i]);
        }
    }
    if (dt == ATTN_KV_E4M3_FINITE && _mm512_cmpeq_epi8_mask(mx, low7))
        return 0;
    for (size_t r = 0; r < R; r++) {
        float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)j0;
        for (size_t i = 0; i < nfull; i++)
            _mm512_storeu_ps(ar + 16 * i, fresh ? _mm512_add_ps(_mm512_loadu_ps(ar + 16 * i),
                                                                a[r][i])
                                                : a[r][i]);
        if (tail)
            _mm512_mask_storeu_ps(
                ar + 16 * (NV - 1), m,
                fresh ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, ar + 16 * (NV - 1)), a[r][NV - 1])
                      : a[r][NV - 1]);
    }
    return 1;
}

/* E4M3: without the NaN fix-up, and again with it if a NaN byte showed. */
ATTN_AVX512_INLINE void pv_block(int dt, int fresh, size_t R, size_t NV, int tail, __mmask16 m,
                                 size_t pf, const float *p, ptrdiff_t p_stride, ptrdiff_t p_step,
                                 const void *v, ptrdiff_t v_stride, size_t nk, size_t j0,
                                 float *acc, ptrdiff_t acc_stride, const attn_grp *gs)
{
    if (dt == ATTN_KV_FP8_E4M3 &&
        pv_block_at(ATTN_KV_E4M3_FINITE, fresh, R, NV, tail, m, pf, p, p_stride, p_step, v,
                    v_stride, nk, j0, acc, acc_stride, gs))
        return;
    pv_block_at(dt, fresh, R, NV, tail, m, pf, p, p_stride, p_step, v, v_stride, nk, j0, acc,
                acc_stride, gs);
}

ATTN_AVX512_INLINE void pv_rows(int dt, int fresh, size_t NV, int tail, __mmask16 m, size_t pf,
                                const float *p, ptrdiff_t p_stride, ptrdiff_t p_step, const void *v,
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t j0, float *acc,
                                ptrdiff_t acc_stride, const attn_grp *gs)
{
    size_t r = 0;
    /* decoded dtypes: 8 x 2 decodes each V vector once per 8 rows (F32
       loses to the extra broadcasts) */
    if (NV == 4 && !tail && dt != ATTN_KV_F32)
        for (; r + 8 <= nq; r += 8)
            for (size_t h = 0; h < 2; h++)
                pv_block(dt, fresh, 8, 2, 0, m, r == 0 && h == 0 ? pf : 0,
                         p + (ptrdiff_t)r * p_stride, p_stride, p_step, v, v_stride, nk,
                         j0 + 32 * h, acc + (ptrdiff_t)r * acc_stride, acc_stride, gs);
    for (; r + 4 <= nq; r += 4)
        pv_block(dt, fresh, 4, NV, tail, m, r == 0 ? pf : 0, p + (ptrdiff_t)r * p_stride,
                 p_stride, p_step, v, v_stride, nk, j0, acc + (ptrdiff_t)r * acc_stride,
                 acc_stride, gs);
    /* a loop, not an if: GCC then keeps the accumulators out of memory */
    for (; r + 2 <= nq; r += 2)
        pv_block(dt, fresh, 2, NV, tail, m, r == 0 ? pf : 0, p + (ptrdiff_t)r * p_stride,
                 p_stride, p_step, v, v_stride, nk, j0, acc + (ptrdiff_t)r * acc_stride,
                 acc_stride, gs);
    if (r < nq)
        pv_block(dt, fresh, 1, NV, tail, m, r == 0 ? pf : 0, p + (ptrdiff_t)r * p_stride,
                 p_stride, p_step, v, v_stride, nk, j0, acc + (ptrdiff_t)r * acc_stride,
                 acc_stride, gs);
}

/* Columns j0..j0+w, w <= 64. */
ATTN_AVX512_INLINE void pv_cols(int dt, int fresh, size_t pf, const float *p, ptrdiff_t p_stride,
                                ptrdiff_t p_step, const void *v, ptrdiff_t v_stride, size_t nq,
                                size_t nk, size_t j0, size_t w, float *acc, ptrdiff_t acc_stride,
                                const attn_grp *gs)
{
    if (w == 64) {
        pv_rows(dt, fresh, 4, 0, 0xffff, pf, p, p_stride, p_step, v, v_stride, nq, nk, j0, acc,
                acc_stride, gs);
        return;
    }
    size_t nv = (w + 15) / 16;
    __mmask16 m = attn_mask16(w - 16 * (nv - 1));
    switch (nv) {
    case 1:
        pv_rows(dt, fresh, 1, 1, m, pf, p, p_stride, p_step, v, v_stride, nq, nk, j0, acc,
                acc_stride, gs);
        break;
    case 2:
        pv_rows(dt, fresh, 2, 1, m, pf, p, p_stride, p_step, v, v_stride, nq, nk, j0, acc,
                acc_stride, gs);
        break;
    case 3:
        pv_rows(dt, fresh, 3, 1, m, pf, p, p_stride, p_step, v, v_stride, nq, nk, j0, acc,
                acc_stride, gs);
        break;
    default:
        pv_rows(dt, fresh, 4, 1, m, pf, p, p_stride, p_step, v, v_stride, nq, nk, j0, acc,
                acc_stride, gs);
        break;
    }
}

#define PV_PANEL_KEYS 32 /* x 64 columns: 8 KiB of stack */

/* p_step: between consecutive keys' weights (pt_tile passes P's row stride,
   and fresh: see pv_block_at). */
ATTN_AVX512_INLINE void pv_tile_at(int dt, int fresh, const float *p, ptrdiff_t p_stride,
                                   ptrdiff_t p_step, const void *v, ptrdiff_t v_stride, size_t nq,
                                   size_t nk, size_t dv, float *acc, ptrdiff_t acc_stride,
                                   const attn_grp *gs)
{
    /* few rows use each V row for few FMAs: prefetch whole rows ahead */
    const int few = nq <= PV_PREFETCH_MAX_ROWS;
    const size_t pf = few ? row_bytes(dt, dv) : 0;
    const uintptr_t vb = (uintptr_t)v_stride * unit_bytes(dt);
    for (size_t j0 = 0; j0 < dv; j0 += 64) {
        const size_t w = dv - j0 < 64 ? dv - j0 : 64;
        if (few || !is_quant(dt) || gs || fresh) { /* pv_grp: the rows only */
            pv_cols(dt, fresh, j0 == 0 ? pf : 0, p, p_stride, p_step, v, v_stride, nq, nk, j0, w,
                    acc, acc_stride, gs);
            continue;
        }
        /* many rows, quantized V: decode 32 keys once for every row group;
           the same sums in the same order */
        _Alignas(64) float panel[PV_PANEL_KEYS * 64];
        for (size_t c0 = 0; c0 < nk; c0 += PV_PANEL_KEYS) {
            const size_t n = nk - c0 < PV_PANEL_KEYS ? nk - c0 : PV_PANEL_KEYS;
            for (size_t c = 0; c < n; c++) {
                const unsigned char *row = row_at(v, c0 + c, vb);
                for (size_t i = 0; i < w; i += 16)
                    _mm512_store_ps(panel + c * 64 + i,
                                    w - i >= 16 ? load16(dt, row, j0 + i)
                                                : maskz_load16(dt, attn_mask16(w - i), row, j0 + i));
            }
            pv_cols(ATTN_KV_F32, 0, 0, p + (ptrdiff_t)c0 * p_step, p_stride, p_step, panel, 64,
                    nq, n, 0, w, acc + j0, acc_stride, NULL);
        }
    }
}

ATTN_AVX512_INLINE void pv_tile(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                ptrdiff_t acc_stride)
{
    pv_tile_at(dt, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride, NULL);
}

/* FP8 scale groups (src/dsp.h): the few-row paths, scaled where loaded. */
ATTN_AVX512_INLINE void qk_grp(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                               ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                               float *s, ptrdiff_t s_stride, const attn_grp *gs)
{
    qk_tile_dot(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, gs);
}

ATTN_AVX512_INLINE void pv_grp(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                               ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                               ptrdiff_t acc_stride, const attn_grp *gs)
{
    pv_tile_at(dt, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride, gs);
}

#endif /* ATTN_X86_TILE_AVX512_TMPL_H */

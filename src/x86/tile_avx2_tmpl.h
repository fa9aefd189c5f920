/* SPDX-License-Identifier: MIT */
/*
 * The AVX2+FMA+F16C tile family (qk_tile, pv_tile, to_f32), written once for
 * every K/V dtype and instantiated through src/tile_variants.h; a dtype
 * enters only through its loads (load8, load8_part, load16). Tails use
 * masked or buffered loads: no kernel reads past what it is given
 * (prefetches may: src/prefetch.h). Row addresses are unsigned arithmetic
 * (src/prefetch.h says why). The QK_* / PV_* blocking macros may be
 * overridden with -D.
 */
#ifndef ATTN_X86_TILE_AVX2_TMPL_H
#define ATTN_X86_TILE_AVX2_TMPL_H

#include <string.h>

#include "tile_variants.h"
#include "x86/avx2.h"

/* ------------------------------------------------------------ the dtypes */

#define unit_bytes attn_kv_unit_bytes
#define is_block attn_kv_is_block
#define is_quant attn_kv_is_quant
#define row_bytes attn_kv_row_bytes
#define row_at attn_kv_row

static ALWAYS_INLINE __m256 widen_f16(__m128i h) { return _mm256_cvtph_ps(h); }

static ALWAYS_INLINE __m256 widen_bf16(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The binary16 scale at the head of a block (unaligned). */
static ALWAYS_INLINE __m256 block_scale(const unsigned char *blk)
{
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm256_set1_ps(_cvtsh_ss(h));
}

/* 8 E4M3 bytes (the low half of x) to f32, exactly, whatever DAZ/FTZ: the
   derivation is at fp8_16 in src/x86/tile_avx512_tmpl.h. */
static ALWAYS_INLINE __m256 fp8_8(int dt, __m128i x)
{
    const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(x), 7),
                                    _mm_set1_epi16((short)0xBF80));
    const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    if (dt == ATTN_KV_E4M3_FINITE) /* scanned: no NaN byte (tile_variants.h) */
        return v;
    const __m256 is_nan = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(
        _mm_cmpeq_epi8(_mm_and_si128(x, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f))));
    return _mm256_blendv_ps(v, _mm256_set1_ps(__builtin_nanf("")), is_nan);
}

/* No NaN byte in the rows: every low-seven-bits value is below 0x7f. */
static ALWAYS_INLINE int e4m3_finite(const void *base, ptrdiff_t stride, size_t rows, size_t n)
{
    const __m256i low7 = _mm256_set1_epi8(0x7f);
    __m256i mx = _mm256_setzero_si256();
    unsigned last = 0;
    for (size_t r = 0; r < rows; r++) {
        const unsigned char *row = attn_kv_row(base, r, (uintptr_t)stride);
        size_t t = 0;
        for (; t + 32 <= n; t += 32)
            mx = _mm256_max_epu8(
                mx, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(row + t)), low7));
        for (; t < n; t++)
            last |= (row[t] & 0x7fu) == 0x7fu;
    }
    return !last && _mm256_movemask_epi8(_mm256_cmpeq_epi8(mx, low7)) == 0;
}
#define ATTN_E4M3_FINITE(base, stride, rows, n) e4m3_finite(base, stride, rows, n)

/* 8 E5M2 bytes to f32, exactly: each is the upper half of a binary16. */
static ALWAYS_INLINE __m256 e5m2_8(__m128i x)
{
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(x), 8));
}

/* Values t..t+7 (t a multiple of 8) of a row, as f32. */
static ALWAYS_INLINE __m256 load8(int dt, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_F32)
        return _mm256_loadu_ps((const float *)row + t);
    if (dt == ATTN_KV_F16 || dt == ATTN_KV_BF16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + t));
        return dt == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
    }
    if ((dt & ATTN_KV_DT_MASK) == ATTN_KV_FP8_E4M3)
        return fp8_8(dt, _mm_loadl_epi64((const __m128i *)(row + t)));
    if (dt == ATTN_KV_FP8_E5M2)
        return e5m2_8(_mm_loadl_epi64((const __m128i *)(row + t)));
    const unsigned char *blk = row + t / ATTN_QBLOCK * unit_bytes(dt);
    __m256i iv;
    if (dt == ATTN_KV_Q8_0) {
        iv = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + (t & 31))));
    } else { /* Q4_0: values 0..15 in the low nibbles, 16..31 in the high */
        __m128i x = _mm_loadl_epi64((const __m128i *)(blk + 2 + (t & 15)));
        if (t & 16)
            x = _mm_srli_epi16(x, 4);
        x = _mm_and_si128(x, _mm_set1_epi8(0x0f));
        iv = _mm256_sub_epi32(_mm256_cvtepu8_epi32(x), _mm256_set1_epi32(8));
    }
    return _mm256_mul_ps(_mm256_cvtepi32_ps(iv), block_scale(blk));
}

/* The first n (1..7) values from t, zeros elsewhere (no block format). */
static ALWAYS_INLINE __m256 load8_part(int dt, const unsigned char *row, size_t t, size_t n)
{
    if (dt == ATTN_KV_F32)
        return _mm256_maskload_ps((const float *)row + t, first_lanes(n));
    if ((dt & ATTN_KV_DT_MASK) == ATTN_KV_FP8_E4M3 || dt == ATTN_KV_FP8_E5M2) {
        unsigned char buf[16] = {0};
        memcpy(buf, row + t, n);
        const __m128i x = _mm_loadl_epi64((const __m128i *)buf);
        return dt == ATTN_KV_FP8_E5M2 ? e5m2_8(x) : fp8_8(dt, x);
    }
    uint16_t buf[8] = {0};
    memcpy(buf, (const uint16_t *)row + t, n * sizeof *buf);
    __m128i h = _mm_loadu_si128((const __m128i *)buf);
    return dt == ATTN_KV_F16 ? widen_f16(h) : widen_bf16(h);
}

/* Quantized dtypes: 16 values, the same as two load8, with one load.
   Q4_0's (n - 8) * d as one FMA n * d + (-8 d): exact, the result is
   representable. */
static ALWAYS_INLINE void load16(int dt, const unsigned char *row, size_t t, __m256 *lo,
                                 __m256 *hi)
{
    if (dt == ATTN_KV_FP8_E5M2) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(row + t));
        *lo = e5m2_8(x);
        *hi = e5m2_8(_mm_srli_si128(x, 8));
        return;
    }
    if ((dt & ATTN_KV_DT_MASK) == ATTN_KV_FP8_E4M3) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(row + t));
        const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(x), 7),
                                           _mm256_set1_epi16((short)0xBF80));
        const __m256 two8 = _mm256_set1_ps(256.0f);
        *lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), two8);
        *hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), two8);
        if (dt == ATTN_KV_E4M3_FINITE)
            return;
        const __m128i nan = _mm_cmpeq_epi8(_mm_and_si128(x, _mm_set1_epi8(0x7f)),
                                           _mm_set1_epi8(0x7f));
        if (__builtin_expect(_mm_movemask_epi8(nan) != 0, 0)) {
            const __m256 qnan = _mm256_set1_ps(__builtin_nanf(""));
            *lo = _mm256_blendv_ps(*lo, qnan, _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nan)));
            *hi = _mm256_blendv_ps(
                *hi, qnan, _mm256_castsi256_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(nan, 8))));
        }
        return;
    }
    const unsigned char *blk = row + t / ATTN_QBLOCK * unit_bytes(dt);
    const __m256 d = block_scale(blk);
    if (dt == ATTN_KV_Q8_0) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(blk + 2 + (t & 16)));
        *lo = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x)), d);
        *hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(x, 8))), d);
        return;
    }
    __m128i x = _mm_loadu_si128((const __m128i *)(blk + 2));
    if (t & 16)
        x = _mm_srli_epi16(x, 4);
    x = _mm_and_si128(x, _mm_set1_epi8(0x0f));
    const __m256 m8d = _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));
    *lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x)), d, m8d);
    *hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(x, 8))), d, m8d);
}

/* Lane i: the sum of the i-th vector. */
static ALWAYS_INLINE __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab = _mm256_hadd_ps(a, b);
    __m256 cd = _mm256_hadd_ps(c, d);
    __m256 abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* ------------------------------------------------------------------ qk_tile */

/* Dot-product micro-kernel for few rows: one accumulator per (row, key),
   reduced once at the end; load16 adds the same products in the same order. */
#ifndef QK_ROWS
#define QK_ROWS 4
#endif
#ifndef QK_KEYS
#define QK_KEYS 3
#endif
_Static_assert(QK_KEYS >= 1 && QK_KEYS <= 4, "reduce4 sums up to four keys");
_Static_assert(QK_ROWS >= 1 && QK_ROWS <= 6, "qk_rows handles row tails of up to 5 rows");

static ALWAYS_INLINE void qk_micro_at(int dtype, size_t R, size_t C, const float *q,
                                      ptrdiff_t q_stride, const unsigned char *k, uintptr_t kb,
                                      size_t d, float scale, float *s, ptrdiff_t s_stride,
                                      const attn_grp *gs, size_t kc)
{
    __m256 ksc[QK_KEYS];
    for (size_t c = 0; c < C; c++)
        ksc[c] = _mm256_setzero_ps();
    size_t gend = 0, gi = 0;
    __m256 acc[QK_ROWS][4]; /* reduce4 takes four: unused ones stay 0 */
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < 4; c++)
            acc[r][c] = _mm256_setzero_ps();

    size_t t = 0;
    if (is_quant(dtype)) /* gs: d is whole groups of 16k values */
        for (; t + 16 <= d; t += 16) {
            __m256 klo[QK_KEYS], khi[QK_KEYS];
            if (gs && attn_grp_next(gs, t, &gend, &gi))
                for (size_t c = 0; c < C; c++)
                    ksc[c] = _mm256_set1_ps(attn_grp_row(gs, kc + c)[gi]);
            for (size_t c = 0; c < C; c++) {
                load16(dtype, row_at(k, c, kb), t, &klo[c], &khi[c]);
                if (gs) {
                    klo[c] = _mm256_mul_ps(klo[c], ksc[c]);
                    khi[c] = _mm256_mul_ps(khi[c], ksc[c]);
                }
            }
            for (size_t r = 0; r < R; r++) {
                const float *qr = q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t;
                const __m256 qlo = _mm256_loadu_ps(qr), qhi = _mm256_loadu_ps(qr + 8);
                for (size_t c = 0; c < C; c++) {
                    acc[r][c] = _mm256_fmadd_ps(qlo, klo[c], acc[r][c]);
                    acc[r][c] = _mm256_fmadd_ps(qhi, khi[c], acc[r][c]);
                }
            }
        }
    for (; t + 8 <= d; t += 8) {
        __m256 qv[QK_ROWS];
        for (size_t r = 0; r < R; r++)
            qv[r] = _mm256_loadu_ps(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
        for (size_t c = 0; c < C; c++) {
            __m256 kv = load8(dtype, row_at(k, c, kb), t);
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
            __m256 kv = load8_part(dtype, row_at(k, c, kb), t, n);
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

/* K streams from memory in every dot-path tile: prefetch ahead always. */
#define QK_PREFETCH_AHEAD(nq, bytes) attn_prefetch_rows_ahead(bytes)
#include "qk_dot_tmpl.h"

/* Many rows: 16 keys transposed once, then a 6 x 16 outer-product kernel per
   row group, no reductions. The transpose costs about one row group, so few
   rows keep the dot path. */
#define QK_PACK_KEYS 16
#define QK_PACK_ROWS 6
#define QK_PACK_MAX_D 256
#ifndef QK_PACK_MIN_ROWS
#define QK_PACK_MIN_ROWS 12
#endif

static ALWAYS_INLINE void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* kt[t * 16 + j] = k[j][t]; keys from nkp and t up to d rounded to 8 are 0. */
static ALWAYS_INLINE void qk_pack(int dtype, const unsigned char *k, uintptr_t kb, size_t nkp,
                                  size_t d, float *kt)
{
    for (size_t half = 0; half < 2; half++) {
        for (size_t t = 0; t < d; t += 8) {
            size_t n = d - t < 8 ? d - t : 8;
            if (dtype == ATTN_KV_F32 && n == 8 && nkp >= 8 * half + 8) {
                /* rows j and j+4 share a register: two in-lane 4x4
                   transposes, 16 shuffles instead of 24 */
                __m256 a[4], b[4];
                for (size_t j = 0; j < 4; j++) {
                    const float *lo = (const float *)row_at(k, 8 * half + j, kb) + t;
                    const float *hi = (const float *)row_at(k, 8 * half + j + 4, kb) + t;
                    a[j] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)),
                                                _mm_loadu_ps(hi), 1);
                    b[j] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo + 4)),
                                                _mm_loadu_ps(hi + 4), 1);
                }
                for (size_t g = 0; g < 2; g++) {
                    __m256 *x = g ? b : a;
                    __m256 t0 = _mm256_unpacklo_ps(x[0], x[1]), t1 = _mm256_unpackhi_ps(x[0], x[1]);
                    __m256 t2 = _mm256_unpacklo_ps(x[2], x[3]), t3 = _mm256_unpackhi_ps(x[2], x[3]);
                    float *out = kt + (t + 4 * g) * QK_PACK_KEYS + 8 * half;
                    _mm256_store_ps(out, _mm256_shuffle_ps(t0, t2, 0x44));
                    _mm256_store_ps(out + QK_PACK_KEYS, _mm256_shuffle_ps(t0, t2, 0xee));
                    _mm256_store_ps(out + 2 * QK_PACK_KEYS, _mm256_shuffle_ps(t1, t3, 0x44));
                    _mm256_store_ps(out + 3 * QK_PACK_KEYS, _mm256_shuffle_ps(t1, t3, 0xee));
                }
                continue;
            }
            __m256 r[8];
            for (size_t j = 0; j < 8; j++) {
                size_t key = 8 * half + j;
                r[j] = key >= nkp ? _mm256_setzero_ps()
                       : n == 8   ? load8(dtype, row_at(k, key, kb), t)
                                  : load8_part(dtype, row_at(k, key, kb), t, n);
            }
            transpose8(r);
            for (size_t j = 0; j < 8; j++)
                _mm256_store_ps(kt + (t + j) * QK_PACK_KEYS + 8 * half, r[j]);
        }
    }
}

static ALWAYS_INLINE void qk_packed_micro(size_t R, const float *q, ptrdiff_t q_stride,
                                          const float *kt, size_t d, size_t nkp, float scale,
                                          float *s, ptrdiff_t s_stride)
{
    __m256 acc[QK_PACK_ROWS][2];
    for (size_t r = 0; r < R; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (size_t t = 0; t < d; t++) {
        __m256 k0 = _mm256_load_ps(kt + t * QK_PACK_KEYS);
        __m256 k1 = _mm256_load_ps(kt + t * QK_PACK_KEYS + 8);
        for (size_t r = 0; r < R; r++) {
            __m256 qb = _mm256_broadcast_ss(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
            acc[r][0] = _mm256_fmadd_ps(qb, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(qb, k1, acc[r][1]);
        }
    }
    const __m256 vscale = _mm256_set1_ps(scale);
    for (size_t r = 0; r < R; r++) {
        float *sr = s + (ptrdiff_t)r * s_stride;
        __m256 lo = _mm256_mul_ps(acc[r][0], vscale), hi = _mm256_mul_ps(acc[r][1], vscale);
        if (nkp == QK_PACK_KEYS) {
            _mm256_storeu_ps(sr, lo);
            _mm256_storeu_ps(sr + 8, hi);
        } else if (nkp > 8) {
            _mm256_storeu_ps(sr, lo);
            _mm256_maskstore_ps(sr + 8, first_lanes(nkp - 8), hi);
        } else {
            _mm256_maskstore_ps(sr, first_lanes(nkp), lo);
        }
    }
}

static ALWAYS_INLINE void qk_tile_packed(int dtype, const float *q, ptrdiff_t q_stride,
                                         const unsigned char *k, uintptr_t kb, size_t nq,
                                         size_t nk, size_t d, float scale, float *s,
                                         ptrdiff_t s_stride)
{
    _Alignas(32) float kt[QK_PACK_MAX_D * QK_PACK_KEYS];
    for (size_t c = 0; c < nk; c += QK_PACK_KEYS) {
        size_t nkp = nk - c < QK_PACK_KEYS ? nk - c : QK_PACK_KEYS;
        qk_pack(dtype, row_at(k, c, kb), kb, nkp, d, kt);
        /* groups of 6; a remainder of 7 or 8 as two groups of 3-4, not 6 + 1-2 */
        size_t r = 0;
        for (; nq - r > QK_PACK_ROWS + 2; r += QK_PACK_ROWS)
            qk_packed_micro(QK_PACK_ROWS, q + (ptrdiff_t)r * q_stride, q_stride, kt, d, nkp,
                            scale, s + (ptrdiff_t)r * s_stride + c, s_stride);
        while (r < nq) {
            size_t rest = nq - r, g = rest > QK_PACK_ROWS ? rest / 2 : rest;
            const float *qr = q + (ptrdiff_t)r * q_stride;
            float *sr = s + (ptrdiff_t)r * s_stride + c;
#define QK_PACKED_ROWS(n) qk_packed_micro(n, qr, q_stride, kt, d, nkp, scale, sr, s_stride)
            ATTN_TAIL(g, QK_PACK_ROWS + 1, QK_PACKED_ROWS);
#undef QK_PACKED_ROWS
            r += g;
        }
    }
}

static ALWAYS_INLINE void qk_tile(int dtype, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    if (nq >= QK_PACK_MIN_ROWS && d <= QK_PACK_MAX_D)
        qk_tile_packed(dtype, q, q_stride, k, (uintptr_t)k_stride * unit_bytes(dtype), nq, nk, d,
                       scale, s, s_stride);
    else
        qk_tile_dot(dtype, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, NULL);
}

/* qk_diag (src/dsp.h): each score summed as qk_tile would sum it in an
   nq-row call: qk_micro at 1 x 1, or one index-order FMA chain. */
static ALWAYS_INLINE void qk_diag(int dtype, const float *q, ptrdiff_t q_stride,
                                  const void *const *rows, size_t nq, size_t d, float scale,
                                  float *s)
{
    if (nq < QK_PACK_MIN_ROWS || d > QK_PACK_MAX_D) {
        for (size_t r = 0; r < nq; r++)
            qk_micro(dtype, 1, 1, q + (ptrdiff_t)r * q_stride, 0, rows[r], 0, d, scale, s + r,
                     1, NULL, 0);
        return;
    }
    for (size_t r0 = 0; r0 < nq; r0 += 8) {
        const size_t nr = nq - r0 < 8 ? nq - r0 : 8;
        __m256 acc = _mm256_setzero_ps();
        for (size_t t0 = 0; t0 < d; t0 += 8) {
            const size_t tn = d - t0 < 8 ? d - t0 : 8;
            __m256 qt[8], kt[8];
            for (size_t j = 0; j < 8; j++) {
                if (j >= nr) {
                    qt[j] = kt[j] = _mm256_setzero_ps();
                    continue;
                }
                const float *qr = q + (ptrdiff_t)(r0 + j) * q_stride + (ptrdiff_t)t0;
                const unsigned char *kr = rows[r0 + j];
                if (tn == 8) {
                    qt[j] = _mm256_loadu_ps(qr);
                    kt[j] = load8(dtype, kr, t0);
                } else {
                    qt[j] = _mm256_maskload_ps(qr, first_lanes(tn));
                    kt[j] = load8_part(dtype, kr, t0, tn);
                }
            }
            transpose8(qt);
            transpose8(kt);
            for (size_t t = 0; t < tn; t++)
                acc = _mm256_fmadd_ps(qt[t], kt[t], acc);
        }
        acc = _mm256_mul_ps(acc, _mm256_set1_ps(scale));
        if (nr == 8)
            _mm256_storeu_ps(s + r0, acc);
        else
            _mm256_maskstore_ps(s + r0, first_lanes(nr), acc);
    }
}

/* ------------------------------------------------------------------ pv_tile */

/* R rows x W vectors of acc in registers while a chunk's keys stream by.
   fresh: as pv_block_at in src/x86/tile_avx512_tmpl.h. */
#ifndef PV_ROWS
#define PV_ROWS 4
#endif
#ifndef PV_VECS
#define PV_VECS 3
#endif
_Static_assert(PV_VECS >= 1 && PV_VECS <= 4, "pv_cols handles tails of up to 4 vectors");
_Static_assert(PV_ROWS >= 1 && PV_ROWS <= 6, "pv_tile handles row tails of up to 5 rows");
/* Keys per pass: these v rows stay in L1 across the column chunks. */
#ifndef PV_KEY_CHUNK
#define PV_KEY_CHUNK 32
#endif

static ALWAYS_INLINE void pv_micro(int dtype, int fresh, size_t R, size_t W, size_t tail,
                                   const float *p, ptrdiff_t p_stride, ptrdiff_t p_step,
                                   const unsigned char *v, ptrdiff_t v_stride, size_t j0, size_t nk,
                                   size_t pf, float *acc, ptrdiff_t acc_stride, const attn_grp *gs)
{
    size_t grp[PV_VECS];
    for (size_t w = 0; gs && w < W; w++)
        grp[w] = (j0 + 8 * w) / gs->g;
    __m256 a[PV_ROWS][PV_VECS];
    const size_t unit = unit_bytes(dtype);
    const uintptr_t vb = (uintptr_t)v_stride * unit;
    const size_t ahead = pf ? attn_prefetch_rows_ahead(pf) : 0;
    __m256i last = first_lanes(tail ? tail : 8);
    for (size_t r = 0; r < R; r++)
        for (size_t w = 0; w < W; w++) {
            float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(8 * w);
            a[r][w] = fresh                   ? _mm256_setzero_ps()
                      : (tail && w == W - 1) ? _mm256_maskload_ps(ar, last)
                                             : _mm256_loadu_ps(ar);
        }
    for (size_t c = 0; c < nk; c++) {
        __m256 vv[PV_VECS];
        const unsigned char *row = row_at(v, c, vb);
        if (pf)
            attn_prefetch_rows(v, c + ahead, v_stride, unit, 1, pf);
        for (size_t w = 0; w < W; w++)
            vv[w] = (tail && w == W - 1) ? load8_part(dtype, row, j0 + 8 * w, tail)
                                         : load8(dtype, row, j0 + 8 * w);
        for (size_t w = 0; gs && w < W; w++)
            vv[w] = _mm256_mul_ps(vv[w], _mm256_set1_ps(attn_grp_row(gs, c)[grp[w]]));
        for (size_t r = 0; r < R; r++) {
            __m256 pr = _mm256_broadcast_ss(p + (ptrdiff_t)r * p_stride + (ptrdiff_t)c * p_step);
            for (size_t w = 0; w < W; w++)
                a[r][w] = _mm256_fmadd_ps(pr, vv[w], a[r][w]);
        }
    }
    for (size_t r = 0; r < R; r++)
        for (size_t w = 0; w < W; w++) {
            float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(8 * w);
            if (tail && w == W - 1)
                _mm256_maskstore_ps(ar, last, fresh ? _mm256_add_ps(_mm256_maskload_ps(ar, last),
                                                                    a[r][w])
                                                    : a[r][w]);
            else
                _mm256_storeu_ps(ar, fresh ? _mm256_add_ps(_mm256_loadu_ps(ar), a[r][w])
                                           : a[r][w]);
        }
}

static ALWAYS_INLINE void pv_cols(int dtype, int fresh, size_t R, const float *p,
                                  ptrdiff_t p_stride, ptrdiff_t p_step, const unsigned char *v,
                                  ptrdiff_t v_stride, size_t nk, size_t dv, size_t pf, float *acc,
                                  ptrdiff_t acc_stride, const attn_grp *gs)
{
    /* a last chunk of one vector has too few chains to hide FMA latency:
       the last full chunk gives it one of its vectors */
    const size_t tail = dv % (8 * PV_VECS);
    const int shift = PV_VECS >= 3 && dv > 8 * PV_VECS && tail > 0 && tail <= 8;
    const size_t chunks = dv / (8 * PV_VECS) - (size_t)shift;
    size_t j = 0;
    for (size_t i = 0; i < chunks; i++, j += 8 * PV_VECS)
        pv_micro(dtype, fresh, R, PV_VECS, 0, p, p_stride, p_step, v, v_stride, j, nk,
                 j == 0 ? pf : 0, acc + j, acc_stride, gs);
    if (shift) {
        pv_micro(dtype, fresh, R, PV_VECS - 1, 0, p, p_stride, p_step, v, v_stride, j, nk,
                 j == 0 ? pf : 0, acc + j, acc_stride, gs);
        j += 8 * (PV_VECS - 1);
    }
    size_t rest = dv - j;
    if (rest == 0)
        return;
    const size_t prefetch_keys = j == 0 ? pf : 0;
#define PV_COLS_TAIL(n) pv_micro(dtype, fresh, R, n, rest % 8, p, p_stride, p_step, v, v_stride, \
                                 j, nk, prefetch_keys, acc + j, acc_stride, gs)
    ATTN_TAIL((rest + 7) / 8, PV_VECS + 1, PV_COLS_TAIL);
#undef PV_COLS_TAIL
}

static ALWAYS_INLINE void pv_rows(int dtype, int fresh, const float *p, ptrdiff_t p_stride,
                                  ptrdiff_t p_step, const unsigned char *v, ptrdiff_t v_stride,
                                  size_t nq, size_t nk, size_t dv, size_t next, float *acc,
                                  ptrdiff_t acc_stride, const attn_grp *gs)
{
    size_t r = 0;
    for (; r + PV_ROWS <= nq; r += PV_ROWS)
        pv_cols(dtype, fresh, PV_ROWS, p + (ptrdiff_t)r * p_stride, p_stride, p_step, v,
                v_stride, nk, dv, r == 0 ? next : 0, acc + (ptrdiff_t)r * acc_stride, acc_stride,
                gs);
    const float *pr = p + (ptrdiff_t)r * p_stride;
    float *ar = acc + (ptrdiff_t)r * acc_stride;
    size_t pf = r == 0 ? next : 0;
#define PV_ROWS_TAIL(n) pv_cols(dtype, fresh, n, pr, p_stride, p_step, v, v_stride, nk, dv, pf, \
                                ar, acc_stride, gs)
    ATTN_TAIL(nq - r, PV_ROWS, PV_ROWS_TAIL);
#undef PV_ROWS_TAIL
}

#define PV_PANEL_COLS (8 * PV_VECS)

/* p_step: between consecutive keys' weights (pt_tile passes P's row stride,
   and fresh: one pass, one chain). */
static ALWAYS_INLINE void pv_tile_at(int dtype, int fresh, const float *p, ptrdiff_t p_stride,
                                     ptrdiff_t p_step, const void *v, ptrdiff_t v_stride, size_t nq,
                                     size_t nk, size_t dv, float *acc, ptrdiff_t acc_stride,
                                     const attn_grp *gs)
{
    const uintptr_t vb = (uintptr_t)v_stride * unit_bytes(dtype);
    /* few rows: V streams from memory; one pass over every key, the first
       chunk prefetching whole rows, leaves the later chunks L2 hits */
    const int few = nq < QK_PACK_MIN_ROWS || gs; /* pv_grp: the row path only */
    const size_t chunk = few || fresh ? nk : PV_KEY_CHUNK, next = few ? row_bytes(dtype, dv) : 0;
    for (size_t c0 = 0; c0 < nk; c0 += chunk) {
        size_t n = nk - c0 < chunk ? nk - c0 : chunk;
        const unsigned char *vc = row_at(v, c0, vb);
        if (few || !is_quant(dtype) || fresh) {
            pv_rows(dtype, fresh, p + (ptrdiff_t)c0 * p_step, p_stride, p_step, vc, v_stride, nq,
                    n, dv, next, acc, acc_stride, gs);
            continue;
        }
        /* many rows, quantized V: each chunk decoded once for every row
           group; the same sums in the same order */
        _Alignas(32) float panel[PV_KEY_CHUNK * PV_PANEL_COLS];
        for (size_t j = 0; j < dv; j += PV_PANEL_COLS) {
            const size_t w = dv - j < PV_PANEL_COLS ? dv - j : PV_PANEL_COLS;
            for (size_t c = 0; c < n; c++) {
                const unsigned char *row = row_at(vc, c, vb);
                for (size_t i = 0; i < w; i += 8)
                    _mm256_storeu_ps(panel + c * PV_PANEL_COLS + i,
                                     w - i >= 8 ? load8(dtype, row, j + i)
                                                : load8_part(dtype, row, j + i, w - i));
            }
            pv_rows(ATTN_KV_F32, 0, p + (ptrdiff_t)c0 * p_step, p_stride, p_step,
                    (const unsigned char *)panel, PV_PANEL_COLS, nq, n, w, 0, acc + j,
                    acc_stride, NULL);
        }
    }
}

static ALWAYS_INLINE void pv_tile(int dtype, const float *p, ptrdiff_t p_stride, const void *v,
                                  ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                  ptrdiff_t acc_stride)
{
    pv_tile_at(dtype, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride, NULL);
}

/* FP8 scale groups (src/dsp.h); qk_grp is src/qk_dot_tmpl.h's. */
static ALWAYS_INLINE void pv_grp(int dtype, const float *p, ptrdiff_t p_stride, const void *v,
                                 ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                 ptrdiff_t acc_stride, const attn_grp *gs)
{
    pv_tile_at(dtype, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride, gs);
}

/* ------------------------------------------------------------------ to_f32 */

static ALWAYS_INLINE void to_f32(int dtype, const void *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, load8(dtype, src, i));
    if (i < n)
        _mm256_maskstore_ps(dst + i, first_lanes(n - i), load8_part(dtype, src, i, n - i));
}

#endif /* ATTN_X86_TILE_AVX2_TMPL_H */

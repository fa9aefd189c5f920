/*
 * AVX-512 tile kernels for the quantized K/V dtypes (Q8_0, Q4_0, FP8 E4M3):
 * qk_tile, pv_tile and to_f32, dequantizing inside the loads (dsp.h). The
 * decoded values are exact in f32, so after the load every kernel is the
 * f32 arithmetic of the float kernels: the same error bounds hold.
 *
 * Two paths per tile kernel, as in tile_avx512.c:
 *  - few query rows (decode: the query heads of one KV head): K and V are
 *    decoded straight into registers, once per key and used by every row;
 *  - many rows (prefill): a chunk of keys is decoded once into an f32
 *    scratch on the stack (8 KiB: a few keys, never the cache) and
 *    the same register kernels run on it for every group of rows, so the
 *    decoding is not repeated per row group.
 *
 * Block formats need no tails (rows are whole 32-value blocks); FP8 rows
 * end in a masked load that reads nothing past the row.
 */
#include <string.h>

#include "x86/avx512.h"

#ifdef ATTN_SIMDE_EMU
/*
 * Conversions SIMDe 0.7.4 does not emulate (see simde_compat_avx512.h for
 * why each missing one must be defined): the two 256-bit halves with AVX2.
 */
static inline __attribute__((always_inline)) simde__m512i attn_emu_cvtepi8_epi32(simde__m128i a)
{
    simde__m512i_private r;
    r.m256i[0] = _mm256_cvtepi8_epi32(a);
    r.m256i[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(a, 8));
    return simde__m512i_from_private(r);
}

static inline __attribute__((always_inline)) simde__m512i attn_emu_cvtepu8_epi32(simde__m128i a)
{
    simde__m512i_private r;
    r.m256i[0] = _mm256_cvtepu8_epi32(a);
    r.m256i[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(a, 8));
    return simde__m512i_from_private(r);
}

static inline __attribute__((always_inline)) simde__m512 attn_emu_cvtepi32_ps(simde__m512i a)
{
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m512_private r;
    r.m256[0] = _mm256_cvtepi32_ps(x.m256i[0]);
    r.m256[1] = _mm256_cvtepi32_ps(x.m256i[1]);
    return simde__m512_from_private(r);
}

#define _mm512_cvtepi8_epi32(a) attn_emu_cvtepi8_epi32(a)
#define _mm512_cvtepu8_epi32(a) attn_emu_cvtepu8_epi32(a)
#define _mm512_cvtepi32_ps(a) attn_emu_cvtepi32_ps(a)
#endif

/* Bytes per stride unit of a K/V dtype; ATTN_KV_F32 is the f32 scratch. */
ATTN_AVX512_INLINE size_t unit_bytes(int dt)
{
    return dt == ATTN_KV_Q8_0 ? ATTN_Q8_0_BYTES : dt == ATTN_KV_Q4_0 ? ATTN_Q4_0_BYTES
                                                 : dt == ATTN_KV_FP8  ? 1
                                                                      : sizeof(float);
}

/* The binary16 scale at the head of a block (no alignment assumed). */
ATTN_AVX512_INLINE __m512 block_scale(const unsigned char *blk)
{
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm512_set1_ps(_cvtsh_ss(h));
}

/*
 * 16 E4M3 bytes to f32, exactly. Each byte becomes the binary16 with the
 * same sign, exponent and mantissa bits (S.EEEE.MMM -> S.0EEEE.MMM0000000),
 * whose value is the E4M3 value times 2^-8 (biases 15 and 7), E4M3
 * subnormals landing on binary16 subnormals; vcvtph2ps widens it exactly and
 * the product with 2^8 is exact. No f32 subnormal is ever an input or a
 * result, and vcvtph2ps converts binary16 subnormals whatever MXCSR.DAZ
 * says, so a caller's DAZ/FTZ cannot change a value (quant::e4m3_every_byte
 * checks every byte with both set). S.1111.111 (480 so far) becomes NaN.
 */
ATTN_AVX512_INLINE __m512 fp8_16(__m128i x)
{
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(x), 7),
                                       _mm256_set1_epi16((short)0xBF80));
    const __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    const __mmask16 is_nan = (__mmask16)_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_and_si128(x, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f)));
    return _mm512_mask_mov_ps(v, is_nan, _mm512_set1_ps(__builtin_nanf("")));
}

/* Values t..t+15 (t a multiple of 16) of a row of dtype dt, as f32. */
ATTN_AVX512_INLINE __m512 qload16(int dt, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_F32)
        return _mm512_loadu_ps((const float *)row + t);
    if (dt == ATTN_KV_FP8)
        return fp8_16(_mm_loadu_si128((const __m128i *)(row + t)));
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

/* Block formats: values t..t+31 (t a multiple of 32), one block, decoded
   with one scale broadcast and (Q4_0) one load; (n - 8) * d as
   n * d + (-8 d), exact in one fused step since the result is representable. */
ATTN_AVX512_INLINE int is_block(int dt)
{
    return dt == ATTN_KV_Q8_0 || dt == ATTN_KV_Q4_0;
}

ATTN_AVX512_INLINE void qload32(int dt, const unsigned char *row, size_t t, __m512 *lo,
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

/* The lanes in m only (FP8 and f32 row tails; block rows have none). */
ATTN_AVX512_INLINE __m512 qload16_mask(int dt, __mmask16 m, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_F32)
        return _mm512_maskz_loadu_ps(m, (const float *)row + t);
    return fp8_16(_mm_maskz_loadu_epi8(m, row + t));
}

/* Rows that make the scratch paths worth their store and reload. */
#define QUANT_SCRATCH_MIN_ROWS 8
#define QUANT_SCRATCH_FLOATS 2048 /* 8 KiB of the task stack (attn.h) */

/* ------------------------------------------------------------------------ */
/* qk_tile                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * R query rows x C keys (R in {1, 2, 4}, C in {1, 4, 8}): R*C accumulators
 * over d, 16 lanes per step; the keys are decoded once per step for all R
 * rows; horizontal sums at the end, four at a time.
 */
ATTN_AVX512_INLINE void qk_block(int dt, size_t R, size_t C, const float *q, ptrdiff_t q_stride,
                                 const unsigned char *k, ptrdiff_t kb, size_t d, float scale,
                                 float *s, ptrdiff_t s_stride)
{
    __m512 acc[4][8];
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();
    size_t t = 0;
    if (is_block(dt)) /* d is whole blocks */
        for (; t < d; t += 32) {
            __m512 klo[8], khi[8];
            for (size_t c = 0; c < C; c++)
                qload32(dt, k + (ptrdiff_t)c * kb, t, &klo[c], &khi[c]);
            for (size_t r = 0; r < R; r++) {
                const float *qr = q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t;
                const __m512 qlo = _mm512_loadu_ps(qr), qhi = _mm512_loadu_ps(qr + 16);
                for (size_t c = 0; c < C; c++) {
                    acc[r][c] = _mm512_fmadd_ps(qlo, klo[c], acc[r][c]);
                    acc[r][c] = _mm512_fmadd_ps(qhi, khi[c], acc[r][c]);
                }
            }
        }
    for (; t + 16 <= d; t += 16) {
        __m512 kv[8];
        for (size_t c = 0; c < C; c++)
            kv[c] = qload16(dt, k + (ptrdiff_t)c * kb, t);
        for (size_t r = 0; r < R; r++) {
            __m512 qv = _mm512_loadu_ps(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
            for (size_t c = 0; c < C; c++)
                acc[r][c] = _mm512_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }
    if (t < d) {
        const __mmask16 m = attn_mask16(d - t);
        __m512 kv[8];
        for (size_t c = 0; c < C; c++)
            kv[c] = qload16_mask(dt, m, k + (ptrdiff_t)c * kb, t);
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

/* R rows against nk keys. */
ATTN_AVX512_INLINE void qk_rows(int dt, size_t R, const float *q, ptrdiff_t q_stride,
                                const unsigned char *k, ptrdiff_t kb, size_t nk, size_t d,
                                float scale, float *s, ptrdiff_t s_stride)
{
    size_t c = 0;
    if (R == 1)
        for (; c + 8 <= nk; c += 8)
            qk_block(dt, 1, 8, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride);
    for (; c + 4 <= nk; c += 4)
        qk_block(dt, R, 4, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride);
    for (; c < nk; c++)
        qk_block(dt, R, 1, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride);
}

ATTN_AVX512_INLINE void qk_all_rows(int dt, const float *q, ptrdiff_t q_stride,
                                    const unsigned char *k, ptrdiff_t kb, size_t nq, size_t nk,
                                    size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    size_t r = 0;
    for (; r + 4 <= nq; r += 4)
        qk_rows(dt, 4, q + (ptrdiff_t)r * q_stride, q_stride, k, kb, nk, d, scale,
                s + (ptrdiff_t)r * s_stride, s_stride);
    if (r + 2 <= nq) {
        qk_rows(dt, 2, q + (ptrdiff_t)r * q_stride, q_stride, k, kb, nk, d, scale,
                s + (ptrdiff_t)r * s_stride, s_stride);
        r += 2;
    }
    if (r < nq)
        qk_rows(dt, 1, q + (ptrdiff_t)r * q_stride, q_stride, k, kb, nk, d, scale,
                s + (ptrdiff_t)r * s_stride, s_stride);
}

/* Decodes keys [0, n) of d values each into f32 rows of d floats. */
ATTN_AVX512_INLINE void decode_rows(int dt, const unsigned char *src, ptrdiff_t sb, size_t n,
                                    size_t d, float *dst)
{
    for (size_t c = 0; c < n; c++) {
        const unsigned char *row = src + (ptrdiff_t)c * sb;
        float *out = dst + c * d;
        size_t t = 0;
        for (; t + 16 <= d; t += 16)
            _mm512_storeu_ps(out + t, qload16(dt, row, t));
        if (t < d) {
            const __mmask16 m = attn_mask16(d - t);
            _mm512_mask_storeu_ps(out + t, m, qload16_mask(dt, m, row, t));
        }
    }
}

/*
 * Many rows (prefill): the GEMM-style path of tile_avx512.c with decoding
 * loads. A panel of 32 keys x 64 dims is decoded and transposed once into
 * f32 on the stack (8 KiB) and every row then runs broadcast-FMAs over it:
 * no horizontal sums, and each key value is decoded once per tile.
 */
#define QK_PANEL_KEYS 32
#define QK_PANEL_DEPTH 64
#define QK_PACKED_MIN_ROWS 16

/* r[i] (row i, 16 lanes) becomes column i: r[i][j] = old r[j][i]. */
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

/* panel[t*32 + j] = value t0 + t of key j, for t < td, j < nkeys; keys
   nkeys..31 are zero (their scores are never stored). */
ATTN_AVX512_INLINE void qk_pack_panel(int dt, const unsigned char *k, ptrdiff_t kb,
                                      size_t nkeys, size_t t0, size_t td, float *panel)
{
    for (size_t g = 0; g < QK_PANEL_KEYS; g += 16) {
        const size_t kn = nkeys > g ? (nkeys - g < 16 ? nkeys - g : 16) : 0;
        for (size_t tb = 0; tb < td; tb += 16) {
            const size_t tn = td - tb < 16 ? td - tb : 16; /* < 16: FP8 only */
            const __mmask16 m = attn_mask16(tn);
            __m512 rows[16];
            for (size_t j = 0; j < 16; j++) {
                const unsigned char *row = k + (ptrdiff_t)(g + j) * kb;
                if (j >= kn)
                    rows[j] = _mm512_setzero_ps();
                else if (tn == 16)
                    rows[j] = qload16(dt, row, t0 + tb);
                else
                    rows[j] = qload16_mask(dt, m, row, t0 + tb);
            }
            transpose16x16(rows);
            for (size_t i = 0; i < tn; i++)
                _mm512_store_ps(panel + (tb + i) * QK_PANEL_KEYS + g, rows[i]);
        }
    }
}

/* R rows (R in {1, 4, 8}) x the 32 keys of a panel over dims t0..t0+td;
   partial sums carried in s between depth chunks, scaled on the last. */
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
        const __m512 k0 = _mm512_load_ps(panel + t * QK_PANEL_KEYS);
        const __m512 k1 = _mm512_load_ps(panel + t * QK_PANEL_KEYS + 16);
        for (size_t r = 0; r < R; r++) {
            const __m512 qb = _mm512_set1_ps(qt[(ptrdiff_t)r * q_stride + (ptrdiff_t)t]);
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

ATTN_AVX512_INLINE void qk_tile_packed(int dt, const float *q, ptrdiff_t q_stride,
                                       const unsigned char *k, ptrdiff_t kb, size_t nq, size_t nk,
                                       size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    _Alignas(64) float panel[QK_PANEL_DEPTH * QK_PANEL_KEYS];
    for (size_t c0 = 0; c0 < nk; c0 += QK_PANEL_KEYS) {
        const size_t nkeys = nk - c0 < QK_PANEL_KEYS ? nk - c0 : QK_PANEL_KEYS;
        const __mmask16 m0 = attn_mask16(nkeys < 16 ? nkeys : 16);
        const __mmask16 m1 = attn_mask16(nkeys > 16 ? nkeys - 16 : 0);
        for (size_t t0 = 0; t0 < d; t0 += QK_PANEL_DEPTH) {
            const size_t td = d - t0 < QK_PANEL_DEPTH ? d - t0 : QK_PANEL_DEPTH;
            const int first = t0 == 0, last = t0 + td == d;
            qk_pack_panel(dt, k + (ptrdiff_t)c0 * kb, kb, nkeys, t0, td, panel);
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
    const unsigned char *kp = k;
    const ptrdiff_t kb = k_stride * (ptrdiff_t)unit_bytes(dt);
    if (nq >= QK_PACKED_MIN_ROWS) {
        qk_tile_packed(dt, q, q_stride, kp, kb, nq, nk, d, scale, s, s_stride);
        return;
    }
    if (nq < QUANT_SCRATCH_MIN_ROWS || d > QUANT_SCRATCH_FLOATS) {
        qk_all_rows(dt, q, q_stride, kp, kb, nq, nk, d, scale, s, s_stride);
        return;
    }
    _Alignas(64) float scratch[QUANT_SCRATCH_FLOATS];
    const size_t chunk = QUANT_SCRATCH_FLOATS / d; /* keys decoded at once */
    for (size_t c0 = 0; c0 < nk; c0 += chunk) {
        const size_t n = nk - c0 < chunk ? nk - c0 : chunk;
        decode_rows(dt, kp + (ptrdiff_t)c0 * kb, kb, n, d, scratch);
        qk_all_rows(ATTN_KV_F32, q, q_stride, (const unsigned char *)scratch,
                    (ptrdiff_t)(d * sizeof(float)), nq, n, d, scale, s + c0, s_stride);
    }
}

/* ------------------------------------------------------------------------ */
/* pv_tile                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * R rows (R in {1, 2, 4}) x NV vectors of 16 columns from column j0 over nk
 * keys: R*NV accumulators in registers for the whole key loop, each value
 * vector decoded once per key for all R rows. With tail set, the last
 * vector covers the lanes in m only (FP8 and f32 rows).
 */
ATTN_AVX512_INLINE void pv_block(int dt, size_t R, size_t NV, int tail, __mmask16 m,
                                 const float *p, ptrdiff_t p_stride, const unsigned char *v,
                                 ptrdiff_t vb, size_t nk, size_t j0, float *acc,
                                 ptrdiff_t acc_stride)
{
    const size_t nfull = tail ? NV - 1 : NV;
    __m512 a[4][4];
    for (size_t r = 0; r < R; r++) {
        const float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)j0;
        for (size_t i = 0; i < NV; i++)
            a[r][i] = i < nfull ? _mm512_loadu_ps(ar + 16 * i) : _mm512_maskz_loadu_ps(m, ar + 16 * i);
    }
    for (size_t c = 0; c < nk; c++) {
        const unsigned char *row = v + (ptrdiff_t)c * vb;
        __m512 vv[4];
        if (is_block(dt)) { /* j0 and NV cover whole blocks: NV even, no tail */
            size_t i = 0;
            for (; i + 1 < NV; i += 2)
                qload32(dt, row, j0 + 16 * i, &vv[i], &vv[i + 1]);
            if (i < NV) /* never taken (NV is even here); keeps every vv defined */
                vv[i] = qload16(dt, row, j0 + 16 * i);
        } else
            for (size_t i = 0; i < NV; i++)
                vv[i] = i < nfull ? qload16(dt, row, j0 + 16 * i)
                                  : qload16_mask(dt, m, row, j0 + 16 * i);
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

ATTN_AVX512_INLINE void pv_rows(int dt, size_t NV, int tail, __mmask16 m, const float *p,
                                ptrdiff_t p_stride, const unsigned char *v, ptrdiff_t vb,
                                size_t nq, size_t nk, size_t j0, float *acc, ptrdiff_t acc_stride)
{
    size_t r = 0;
    for (; r + 4 <= nq; r += 4)
        pv_block(dt, 4, NV, tail, m, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
    for (; r + 2 <= nq; r += 2)
        pv_block(dt, 2, NV, tail, m, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
    if (r < nq)
        pv_block(dt, 1, NV, tail, m, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
}

/* Columns j0..j0+w (w <= 64) of every row: 1..4 vectors, the last masked. */
ATTN_AVX512_INLINE void pv_cols(int dt, const float *p, ptrdiff_t p_stride,
                                const unsigned char *v, ptrdiff_t vb, size_t nq, size_t nk,
                                size_t j0, size_t w, float *acc, ptrdiff_t acc_stride)
{
    const size_t nv = (w + 15) / 16;
    const size_t last = w - 16 * (nv - 1);
    const __mmask16 m = attn_mask16(last);
    const int tail = last < 16;
    switch (nv) {
    case 1: pv_rows(dt, 1, tail, m, p, p_stride, v, vb, nq, nk, j0, acc, acc_stride); break;
    case 2: pv_rows(dt, 2, tail, m, p, p_stride, v, vb, nq, nk, j0, acc, acc_stride); break;
    case 3: pv_rows(dt, 3, tail, m, p, p_stride, v, vb, nq, nk, j0, acc, acc_stride); break;
    default: pv_rows(dt, 4, tail, m, p, p_stride, v, vb, nq, nk, j0, acc, acc_stride); break;
    }
}

/* Decodes columns j0..j0+w of keys [0, n) into f32 rows of 64 floats. */
ATTN_AVX512_INLINE void decode_cols(int dt, const unsigned char *src, ptrdiff_t sb, size_t n,
                                    size_t j0, size_t w, float *dst)
{
    for (size_t c = 0; c < n; c++) {
        const unsigned char *row = src + (ptrdiff_t)c * sb;
        size_t i = 0;
        for (; i + 16 <= w; i += 16)
            _mm512_store_ps(dst + c * 64 + i, qload16(dt, row, j0 + i));
        if (i < w) {
            const __mmask16 m = attn_mask16(w - i);
            _mm512_store_ps(dst + c * 64 + i, qload16_mask(dt, m, row, j0 + i));
        }
    }
}

ATTN_AVX512_INLINE void pv_tile(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                ptrdiff_t acc_stride)
{
    const unsigned char *vp = v;
    const ptrdiff_t vb = v_stride * (ptrdiff_t)unit_bytes(dt);
    const int scratch_path = nq >= QUANT_SCRATCH_MIN_ROWS;
    _Alignas(64) float scratch[QUANT_SCRATCH_FLOATS];
    const size_t chunk = QUANT_SCRATCH_FLOATS / 64; /* keys per decoded chunk */
    for (size_t j0 = 0; j0 < dv; j0 += 64) {
        const size_t w = dv - j0 < 64 ? dv - j0 : 64;
        if (!scratch_path) {
            pv_cols(dt, p, p_stride, vp, vb, nq, nk, j0, w, acc, acc_stride);
            continue;
        }
        for (size_t c0 = 0; c0 < nk; c0 += chunk) {
            const size_t n = nk - c0 < chunk ? nk - c0 : chunk;
            decode_cols(dt, vp + (ptrdiff_t)c0 * vb, vb, n, j0, w, scratch);
            pv_cols(ATTN_KV_F32, p + c0, p_stride, (const unsigned char *)scratch,
                    64 * (ptrdiff_t)sizeof(float), nq, n, 0, w, acc + j0, acc_stride);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* to_f32 (n a multiple of 32 for the block formats)                         */
/* ------------------------------------------------------------------------ */

ATTN_AVX512_INLINE void to_f32(int dt, const void *src, float *dst, size_t n)
{
    decode_rows(dt, src, 0, 1, n, dst);
}

#define DEFINE_QUANT_TILES(name, dt)                                                            \
    static void attn_qk_tile_##name(const float *q, ptrdiff_t q_stride, const void *k,          \
                                    ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,         \
                                    float scale, float *s, ptrdiff_t s_stride)                  \
    {                                                                                           \
        qk_tile(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);                   \
    }                                                                                           \
    static void attn_pv_tile_##name(const float *p, ptrdiff_t p_stride, const void *v,          \
                                    ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,        \
                                    float *acc, ptrdiff_t acc_stride)                           \
    {                                                                                           \
        pv_tile(dt, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);                     \
    }                                                                                           \
    static void attn_to_f32_##name(const void *src, float *dst, size_t n)                       \
    {                                                                                           \
        to_f32(dt, src, dst, n);                                                                \
    }

DEFINE_QUANT_TILES(q8_0_avx512, ATTN_KV_Q8_0)
DEFINE_QUANT_TILES(q4_0_avx512, ATTN_KV_Q4_0)
DEFINE_QUANT_TILES(fp8_avx512, ATTN_KV_FP8)

void attn_dsp_init_quant_avx512(attn_dsp *t)
{
    t->qk_tile[ATTN_KV_Q8_0] = attn_qk_tile_q8_0_avx512;
    t->qk_tile[ATTN_KV_Q4_0] = attn_qk_tile_q4_0_avx512;
    t->qk_tile[ATTN_KV_FP8] = attn_qk_tile_fp8_avx512;
    t->pv_tile[ATTN_KV_Q8_0] = attn_pv_tile_q8_0_avx512;
    t->pv_tile[ATTN_KV_Q4_0] = attn_pv_tile_q4_0_avx512;
    t->pv_tile[ATTN_KV_FP8] = attn_pv_tile_fp8_avx512;
    t->to_f32[ATTN_KV_Q8_0] = attn_to_f32_q8_0_avx512;
    t->to_f32[ATTN_KV_Q4_0] = attn_to_f32_q4_0_avx512;
    t->to_f32[ATTN_KV_FP8] = attn_to_f32_fp8_avx512;
}

/*
 * AVX2+FMA+F16C tile kernels for the quantized K/V dtypes (Q8_0, Q4_0, FP8
 * E4M3): qk_tile, pv_tile and to_f32, dequantizing inside the loads
 * (dsp.h). The decoded values are exact in f32, so after the load every
 * kernel is plain f32 FMA arithmetic with the float kernels' error bounds.
 *
 * Two paths per tile kernel:
 *  - few query rows (decode): K and V are decoded into registers once per
 *    key and used by every row of the block;
 *  - many rows (prefill): a chunk of keys is decoded once into an f32
 *    scratch on the stack (8 KiB: a few keys, never the cache) and the same
 *    register kernels run on it for every group of rows.
 *
 * Block formats need no tails (rows are whole 32-value blocks); FP8 row
 * tails go through a small buffer filled with memcpy, so nothing past a row
 * is read.
 */
#include <immintrin.h>
#include <string.h>

#include "x86/avx2.h"

#define QI static inline __attribute__((always_inline))

/* Bytes per stride unit of a K/V dtype; ATTN_KV_F32 is the f32 scratch. */
QI size_t unit_bytes(int dt)
{
    return dt == ATTN_KV_Q8_0 ? ATTN_Q8_0_BYTES : dt == ATTN_KV_Q4_0 ? ATTN_Q4_0_BYTES
                                                 : dt == ATTN_KV_FP8  ? 1
                                                                      : sizeof(float);
}

/* The binary16 scale at the head of a block (no alignment assumed). */
QI __m256 block_scale(const unsigned char *blk)
{
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm256_set1_ps(_cvtsh_ss(h));
}

/*
 * 8 E4M3 bytes (the low half of x) to f32, exactly. Each byte becomes the
 * binary16 with the same sign, exponent and mantissa bits (S.EEEE.MMM ->
 * S.0EEEE.MMM0000000), whose value is the E4M3 value times 2^-8 (biases 15
 * and 7), E4M3 subnormals landing on binary16 subnormals; vcvtph2ps widens
 * it exactly and the product with 2^8 is exact. No f32 subnormal is ever an
 * input or a result, and vcvtph2ps converts binary16 subnormals whatever
 * MXCSR.DAZ says, so a caller's DAZ/FTZ cannot change a value
 * (quant::e4m3_every_byte checks every byte with both set). S.1111.111
 * (480 so far) becomes NaN.
 */
QI __m256 fp8_8(__m128i x)
{
    const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(x), 7),
                                    _mm_set1_epi16((short)0xBF80));
    const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    const __m256 is_nan = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(
        _mm_cmpeq_epi8(_mm_and_si128(x, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f))));
    return _mm256_blendv_ps(v, _mm256_set1_ps(__builtin_nanf("")), is_nan);
}

/* Values t..t+7 (t a multiple of 8) of a row of dtype dt, as f32. */
QI __m256 qload8(int dt, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_F32)
        return _mm256_loadu_ps((const float *)row + t);
    if (dt == ATTN_KV_FP8)
        return fp8_8(_mm_loadl_epi64((const __m128i *)(row + t)));
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

/*
 * Values t..t+15 (t a multiple of 16) of a Q8_0/Q4_0/FP8 row as two
 * vectors: one load and, for the block formats, one scale broadcast for
 * both; Q4_0's (n - 8) * d as n * d + (-8 d), exact in one fused step (the
 * result is representable). E4M3 as in fp8_8, with the NaN fix-up only
 * when a NaN byte is there.
 */
QI void qload16(int dt, const unsigned char *row, size_t t, __m256 *lo, __m256 *hi)
{
    if (dt == ATTN_KV_FP8) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(row + t));
        const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(x), 7),
                                           _mm256_set1_epi16((short)0xBF80));
        const __m256 two8 = _mm256_set1_ps(256.0f);
        *lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), two8);
        *hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), two8);
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

/* The first n (1..7) values from t, zeros elsewhere (FP8 and f32 tails). */
QI __m256 qload8_part(int dt, const unsigned char *row, size_t t, size_t n)
{
    if (dt == ATTN_KV_F32)
        return _mm256_maskload_ps((const float *)row + t, first_lanes(n));
    unsigned char buf[16] = {0};
    memcpy(buf, row + t, n);
    return fp8_8(_mm_loadl_epi64((const __m128i *)buf));
}

/* Sum of each of the four vectors, as the four lanes of the result. */
QI __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* Rows that make the scratch paths worth their store and reload. */
#define QUANT_SCRATCH_MIN_ROWS 8
#define QUANT_SCRATCH_FLOATS 2048 /* 8 KiB of the task stack (attn.h) */

/* ------------------------------------------------------------------------ */
/* qk_tile                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * R query rows x C keys (R*C <= 8, C <= 4): R*C accumulators over d, eight
 * lanes per step; each key vector is decoded once per step for all R rows.
 */
QI void qk_block(int dt, size_t R, size_t C, const float *q, ptrdiff_t q_stride,
                 const unsigned char *k, ptrdiff_t kb, size_t d, float scale, float *s,
                 ptrdiff_t s_stride)
{
    __m256 acc[4][4];
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < 4; c++)
            acc[r][c] = _mm256_setzero_ps();
    size_t t = 0;
    if (dt != ATTN_KV_F32)
        for (; t + 16 <= d; t += 16) {
            __m256 klo[4], khi[4];
            for (size_t c = 0; c < C; c++)
                qload16(dt, k + (ptrdiff_t)c * kb, t, &klo[c], &khi[c]);
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
        __m256 kv[4];
        for (size_t c = 0; c < C; c++)
            kv[c] = qload8(dt, k + (ptrdiff_t)c * kb, t);
        for (size_t r = 0; r < R; r++) {
            __m256 qv = _mm256_loadu_ps(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
            for (size_t c = 0; c < C; c++)
                acc[r][c] = _mm256_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }
    if (t < d) {
        const size_t n = d - t;
        __m256 kv[4];
        for (size_t c = 0; c < C; c++)
            kv[c] = qload8_part(dt, k + (ptrdiff_t)c * kb, t, n);
        for (size_t r = 0; r < R; r++) {
            __m256 qv = _mm256_maskload_ps(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t,
                                           first_lanes(n));
            for (size_t c = 0; c < C; c++)
                acc[r][c] = _mm256_fmadd_ps(qv, kv[c], acc[r][c]);
        }
    }
    const __m128 vscale = _mm_set1_ps(scale);
    for (size_t r = 0; r < R; r++) {
        float dots[4];
        _mm_storeu_ps(dots, _mm_mul_ps(reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]),
                                       vscale));
        for (size_t c = 0; c < C; c++)
            s[(ptrdiff_t)r * s_stride + (ptrdiff_t)c] = dots[c];
    }
}

/* R rows against nk keys: C keys per block (C = 4 for R <= 2, else 2). */
QI void qk_rows(int dt, size_t R, const float *q, ptrdiff_t q_stride, const unsigned char *k,
                ptrdiff_t kb, size_t nk, size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    const size_t C = R <= 2 ? 4 : 2;
    size_t c = 0;
    for (; c + C <= nk; c += C)
        qk_block(dt, R, C, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride);
    for (; c < nk; c++)
        qk_block(dt, R, 1, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride);
}

QI void qk_all_rows(int dt, const float *q, ptrdiff_t q_stride, const unsigned char *k,
                    ptrdiff_t kb, size_t nq, size_t nk, size_t d, float scale, float *s,
                    ptrdiff_t s_stride)
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

/* Decodes rows [0, n) of d values each into f32 rows of d floats. */
QI void decode_rows(int dt, const unsigned char *src, ptrdiff_t sb, size_t n, size_t d,
                    float *dst)
{
    for (size_t c = 0; c < n; c++) {
        const unsigned char *row = src + (ptrdiff_t)c * sb;
        float *out = dst + c * d;
        size_t t = 0;
        for (; t + 8 <= d; t += 8)
            _mm256_storeu_ps(out + t, qload8(dt, row, t));
        if (t < d)
            _mm256_maskstore_ps(out + t, first_lanes(d - t), qload8_part(dt, row, t, d - t));
    }
}

QI void qk_tile(int dt, const float *q, ptrdiff_t q_stride, const void *k, ptrdiff_t k_stride,
                size_t nq, size_t nk, size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    const unsigned char *kp = k;
    const ptrdiff_t kb = k_stride * (ptrdiff_t)unit_bytes(dt);
    if (nq < QUANT_SCRATCH_MIN_ROWS || d > QUANT_SCRATCH_FLOATS) {
        qk_all_rows(dt, q, q_stride, kp, kb, nq, nk, d, scale, s, s_stride);
        return;
    }
    _Alignas(32) float scratch[QUANT_SCRATCH_FLOATS];
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
 * R rows (R in {1, 2, 4}) x NV vectors of 8 columns from column j0 (NV <= 3)
 * over nk keys: R*NV accumulators in registers for the whole key loop, the
 * value vectors decoded once per key for all R rows. With tail > 0 the last
 * vector covers its first `tail` lanes only.
 */
QI void pv_block(int dt, size_t R, size_t NV, size_t tail, const float *p, ptrdiff_t p_stride,
                 const unsigned char *v, ptrdiff_t vb, size_t nk, size_t j0, float *acc,
                 ptrdiff_t acc_stride)
{
    const size_t nfull = tail ? NV - 1 : NV;
    const __m256i tmask = first_lanes(tail ? tail : 8);
    __m256 a[4][3];
    for (size_t r = 0; r < R; r++) {
        const float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)j0;
        for (size_t i = 0; i < NV; i++)
            a[r][i] = i < nfull ? _mm256_loadu_ps(ar + 8 * i) : _mm256_maskload_ps(ar + 8 * i, tmask);
    }
    for (size_t c = 0; c < nk; c++) {
        const unsigned char *row = v + (ptrdiff_t)c * vb;
        __m256 vv[3];
        if (dt != ATTN_KV_F32 && NV == 2 && !tail && (j0 & 15) == 0)
            qload16(dt, row, j0, &vv[0], &vv[1]);
        else
            for (size_t i = 0; i < NV; i++)
                vv[i] = i < nfull ? qload8(dt, row, j0 + 8 * i)
                                  : qload8_part(dt, row, j0 + 8 * i, tail);
        for (size_t r = 0; r < R; r++) {
            __m256 pb = _mm256_set1_ps(p[(ptrdiff_t)r * p_stride + (ptrdiff_t)c]);
            for (size_t i = 0; i < NV; i++)
                a[r][i] = _mm256_fmadd_ps(pb, vv[i], a[r][i]);
        }
    }
    for (size_t r = 0; r < R; r++) {
        float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)j0;
        for (size_t i = 0; i < nfull; i++)
            _mm256_storeu_ps(ar + 8 * i, a[r][i]);
        if (tail)
            _mm256_maskstore_ps(ar + 8 * (NV - 1), tmask, a[r][NV - 1]);
    }
}

QI void pv_rows(int dt, size_t NV, size_t tail, const float *p, ptrdiff_t p_stride,
                const unsigned char *v, ptrdiff_t vb, size_t nq, size_t nk, size_t j0,
                float *acc, ptrdiff_t acc_stride)
{
    size_t r = 0;
    for (; r + 4 <= nq; r += 4)
        pv_block(dt, 4, NV, tail, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
    for (; r + 2 <= nq; r += 2)
        pv_block(dt, 2, NV, tail, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
    if (r < nq)
        pv_block(dt, 1, NV, tail, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
}

/* Columns j0..j0+w (w <= PV_COLS) of every row: 1..2 vectors, the last partial. */
QI void pv_cols(int dt, const float *p, ptrdiff_t p_stride, const unsigned char *v,
                ptrdiff_t vb, size_t nq, size_t nk, size_t j0, size_t w, float *acc,
                ptrdiff_t acc_stride)
{
    const size_t nv = (w + 7) / 8;
    const size_t last = w - 8 * (nv - 1);
    const size_t tail = last < 8 ? last : 0;
    switch (nv) {
    case 1: pv_rows(dt, 1, tail, p, p_stride, v, vb, nq, nk, j0, acc, acc_stride); break;
    case 2: pv_rows(dt, 2, tail, p, p_stride, v, vb, nq, nk, j0, acc, acc_stride); break;
    default: pv_rows(dt, 3, tail, p, p_stride, v, vb, nq, nk, j0, acc, acc_stride); break;
    }
}

/* Columns per pass: 16, two vectors decoded by one qload16 per key (4 x 2
   accumulators); the f32 scratch rows have the same width. */
#define PV_COLS 16

/* Decodes columns j0..j0+w of rows [0, n) into f32 rows of PV_COLS floats. */
QI void decode_cols(int dt, const unsigned char *src, ptrdiff_t sb, size_t n, size_t j0,
                    size_t w, float *dst)
{
    for (size_t c = 0; c < n; c++) {
        const unsigned char *row = src + (ptrdiff_t)c * sb;
        size_t i = 0;
        for (; i + 8 <= w; i += 8)
            _mm256_storeu_ps(dst + c * PV_COLS + i, qload8(dt, row, j0 + i));
        if (i < w)
            _mm256_storeu_ps(dst + c * PV_COLS + i, qload8_part(dt, row, j0 + i, w - i));
    }
}

QI void pv_tile(int dt, const float *p, ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride,
                size_t nq, size_t nk, size_t dv, float *acc, ptrdiff_t acc_stride)
{
    const unsigned char *vp = v;
    const ptrdiff_t vb = v_stride * (ptrdiff_t)unit_bytes(dt);
    const int scratch_path = nq >= QUANT_SCRATCH_MIN_ROWS;
    _Alignas(32) float scratch[QUANT_SCRATCH_FLOATS];
    const size_t chunk = QUANT_SCRATCH_FLOATS / PV_COLS; /* keys per decoded chunk */
    for (size_t j0 = 0; j0 < dv; j0 += PV_COLS) {
        const size_t w = dv - j0 < PV_COLS ? dv - j0 : PV_COLS;
        if (!scratch_path) {
            pv_cols(dt, p, p_stride, vp, vb, nq, nk, j0, w, acc, acc_stride);
            continue;
        }
        for (size_t c0 = 0; c0 < nk; c0 += chunk) {
            const size_t n = nk - c0 < chunk ? nk - c0 : chunk;
            decode_cols(dt, vp + (ptrdiff_t)c0 * vb, vb, n, j0, w, scratch);
            pv_cols(ATTN_KV_F32, p + c0, p_stride, (const unsigned char *)scratch,
                    PV_COLS * (ptrdiff_t)sizeof(float), nq, n, 0, w, acc + j0, acc_stride);
        }
    }
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
        decode_rows(dt, src, 0, 1, n, dst);                                                     \
    }

DEFINE_QUANT_TILES(q8_0_avx2, ATTN_KV_Q8_0)
DEFINE_QUANT_TILES(q4_0_avx2, ATTN_KV_Q4_0)
DEFINE_QUANT_TILES(fp8_avx2, ATTN_KV_FP8)

void attn_dsp_init_quant_avx2(attn_dsp *t)
{
    t->qk_tile[ATTN_KV_Q8_0] = attn_qk_tile_q8_0_avx2;
    t->qk_tile[ATTN_KV_Q4_0] = attn_qk_tile_q4_0_avx2;
    t->qk_tile[ATTN_KV_FP8] = attn_qk_tile_fp8_avx2;
    t->pv_tile[ATTN_KV_Q8_0] = attn_pv_tile_q8_0_avx2;
    t->pv_tile[ATTN_KV_Q4_0] = attn_pv_tile_q4_0_avx2;
    t->pv_tile[ATTN_KV_FP8] = attn_pv_tile_fp8_avx2;
    t->to_f32[ATTN_KV_Q8_0] = attn_to_f32_q8_0_avx2;
    t->to_f32[ATTN_KV_Q4_0] = attn_to_f32_q4_0_avx2;
    t->to_f32[ATTN_KV_FP8] = attn_to_f32_fp8_avx2;
}

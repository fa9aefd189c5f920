/* SPDX-License-Identifier: MIT */
/*
 * AVX2 + FMA kernels of the asymmetric record formats (U8_ASYM, U4_ASYM):
 * the oracle's bits (src/scalar/asym_scalar.c; checked bitwise by
 * tests/kernels/checkasm.c). The decoder runs on every key and value row
 * a decode step reads: codes widened to int32 and converted (exact), then
 * fl(fl(c - zp) * s) as two instructions, never one FMA. The encoder
 * takes its min and max in vectors and its scale and zero point as the
 * oracle does (src/asym.h), its codes by one FMA each, rounded to nearest
 * even and clamped. Tails: scalar (decoder), a padded copy (encoder).
 */
#include <string.h>

#include "asym.h"
#include "dsp.h"
#include "x86/avx2.h"

/* ------------------------------------------------------------ decoding */

/* fl(fl(c - zp) * s) of 8 codes, stored at y */
static ALWAYS_INLINE void put8(float *y, __m256i c, __m256 zp, __m256 s)
{
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(c), zp), s));
}

/* 8 codes at p as int32 (one vpmovzxbd from memory) */
static ALWAYS_INLINE __m256i load_u8x8(const unsigned char *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
}

static ALWAYS_INLINE void decode_u8(const unsigned char *p, size_t g, float zpf, float sf, float *y)
{
    const __m256 zp = _mm256_set1_ps(zpf), s = _mm256_set1_ps(sf);
    size_t t = 0;
    for (; t + 32 <= g; t += 32) {
        put8(y + t, load_u8x8(p + t), zp, s);
        put8(y + t + 8, load_u8x8(p + t + 8), zp, s);
        put8(y + t + 16, load_u8x8(p + t + 16), zp, s);
        put8(y + t + 24, load_u8x8(p + t + 24), zp, s);
    }
    for (; t + 8 <= g; t += 8)
        put8(y + t, load_u8x8(p + t), zp, s);
    for (; t < g; t++) {
        const float v = (float)p[t] - zpf;
        y[t] = v * sf;
    }
}

/* 8 u4 codes as int32: ctl puts a byte in each lane, twice over; the even
   lane takes its high nibble (>> 4), the odd one its low (>> 0), & 15 */
static ALWAYS_INLINE __m256i nibbles8(__m256i v, __m256i ctl)
{
    const __m256i shift = _mm256_setr_epi32(4, 0, 4, 0, 4, 0, 4, 0);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(v, ctl), shift),
                            _mm256_set1_epi32(15));
}

/* The 16 u4 codes of the 8 bytes at p as int32, values 0..7 in *a and
   8..15 in *b (vpshufb on the qword in both halves: one shuffle per 8). */
static ALWAYS_INLINE void load_u4x16(const unsigned char *p, __m256i *a, __m256i *b)
{
    const __m256i v = _mm256_broadcastq_epi64(_mm_loadl_epi64((const __m128i *)(const void *)p));
    /* the byte's index in each lane's low byte, 0x80 (a zero) above it */
    const __m256i z = _mm256_set1_epi32((int)0x80808000u);
    *a = nibbles8(v, _mm256_or_si256(_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), z));
    *b = nibbles8(v, _mm256_or_si256(_mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7), z));
}

static ALWAYS_INLINE void decode_u4(const unsigned char *p, size_t g, float zpf, float sf, float *y)
{
    const __m256 zp = _mm256_set1_ps(zpf), s = _mm256_set1_ps(sf);
    size_t t = 0;
    for (; t + 16 <= g; t += 16) {
        __m256i a, b;
        load_u4x16(p + t / 2, &a, &b);
        put8(y + t, a, zp, s);
        put8(y + t + 8, b, zp, s);
    }
    for (; t < g; t += 2) { /* g is even */
        const float hi = (float)(p[t / 2] >> 4) - zpf, lo = (float)(p[t / 2] & 15) - zpf;
        y[t] = hi * sf;
        y[t + 1] = lo * sf;
    }
}

/* ------------------------------------------------------------ encoding */

static ALWAYS_INLINE float hmin8(__m256 v)
{
    __m128 h = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_min_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_min_ss(h, _mm_movehdup_ps(h)));
}

static ALWAYS_INLINE float hmax8(__m256 v)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

/* 8 codes as int32: rne(fma(x, inv, zp)) clamped to [0, top] (clamping
   first is the same: 0 and top are integers) */
static ALWAYS_INLINE __m256i codes8(__m256 x, __m256 inv, __m256 zp, __m256 top)
{
    __m256 c = _mm256_fmadd_ps(x, inv, zp);
    c = _mm256_min_ps(_mm256_max_ps(c, _mm256_setzero_ps()), top);
    return _mm256_cvttps_epi32(_mm256_round_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* The codes of 8 values at x into out: 8 bytes (u8) or 4 (u4), `bytes`
   of them stored. */
static ALWAYS_INLINE void put_codes8(unsigned char *out, const float *x, __m256 inv, __m256 zp,
                                     __m256 top, int bits, size_t bytes)
{
    const __m256i c = codes8(_mm256_loadu_ps(x), inv, zp, top);
    /* 8 uint16 in value order */
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    if (bits == 4) { /* each int32 lane a pair: (even << 4) | odd */
        const __m128i even = _mm_and_si128(w, _mm_set1_epi32(0xffff));
        w = _mm_packus_epi32(_mm_or_si128(_mm_slli_epi32(even, 4), _mm_srli_epi32(w, 16)),
                             _mm_setzero_si128());
    }
    const __m128i b = _mm_packus_epi16(w, w);
    if (bytes == 8) {
        _mm_storel_epi64((__m128i *)(void *)out, b);
    } else {
        unsigned char tmp[16];
        _mm_storeu_si128((__m128i *)(void *)tmp, b);
        memcpy(out, tmp, bytes);
    }
}

/* One record of n values (n even for u4), or 0 as the oracle refuses. */
static ALWAYS_INLINE int asym_encode(const float *x, unsigned char *dst, size_t n, int bits)
{
    /* min, max and whether any |x| is inf or NaN (on the bits) */
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i max_fin = _mm256_set1_epi32(0x7f7fffff);
    __m256 vlo = _mm256_set1_ps(x[0]), vhi = vlo;
    __m256i bad = _mm256_setzero_si256();
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_loadu_ps(x + j);
        vlo = _mm256_min_ps(vlo, v);
        vhi = _mm256_max_ps(vhi, v);
        const __m256i mag = _mm256_and_si256(_mm256_castps_si256(v), abs_mask);
        bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(mag, max_fin));
    }
    if (!_mm256_testz_si256(bad, bad))
        return 0;
    float lo = hmin8(vlo), hi = hmax8(vhi);
    for (; j < n; j++) {
        if (!isfinite(x[j]))
            return 0;
        lo = x[j] < lo ? x[j] : lo;
        hi = x[j] > hi ? x[j] : hi;
    }
    float s, zp;
    if (!attn_asym_scale(bits, attn_asym_lo(x, n, lo), hi, &s, &zp))
        return 0;
    attn_asym_header(dst, s, zp);
    unsigned char *out = dst + ATTN_ASYM_HEADER;
    const __m256 vinv = _mm256_set1_ps(1.0f / s), vzp = _mm256_set1_ps(zp),
                 top = _mm256_set1_ps(ATTN_ASYM_TOP(bits));
    const size_t step = (size_t)bits; /* bytes of 8 codes */
    for (j = 0; j + 8 <= n; j += 8)
        put_codes8(out + j * (size_t)bits / 8, x + j, vinv, vzp, top, bits, step);
    if (j < n) { /* the tail padded with its first value: only its codes are stored */
        float pad[8];
        for (size_t k = 0; k < 8; k++)
            pad[k] = x[j + (j + k < n ? k : 0)];
        put_codes8(out + j * (size_t)bits / 8, pad, vinv, vzp, top, bits,
                   (n - j) * (size_t)bits / 8);
    }
    return 1;
}

ATTN_ASYM_FILE(avx2, avx2)

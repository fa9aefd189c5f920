/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 kernels of the asymmetric record formats (U8_ASYM, U4_ASYM; also
 * built against SIMDe for the avx512-emu test row), the oracle's bits as
 * asym_avx2.c's (the numerics are there): 16 codes per vector, masked
 * tails, so a group of any size runs in vectors.
 */
#include <string.h>

#include "asym.h"
#include "dsp.h"
#include "x86/avx512.h"

/* ------------------------------------------------------------ decoding */

/* fl(fl(c - zp) * s) of 16 codes (as bytes, in order) */
ATTN_AVX512_INLINE __m512 dec16(__m128i c, __m512 zp, __m512 s)
{
    return _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c)), zp), s);
}

/* u4 codes of 8 bytes (the low half of b), or of the high half: 16 bytes
   in value order, each byte's high nibble first */
ATTN_AVX512_INLINE __m128i nibbles_lo(__m128i b, __m128i m)
{
    return _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

ATTN_AVX512_INLINE __m128i nibbles_hi(__m128i b, __m128i m)
{
    return _mm_unpackhi_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

ATTN_AVX512_INLINE __m128i load16(const unsigned char *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

ATTN_AVX512_INLINE void decode_u8(const unsigned char *p, size_t g, float zpf, float sf, float *y)
{
    const __m512 zp = _mm512_set1_ps(zpf), s = _mm512_set1_ps(sf);
    size_t t = 0;
    for (; t + 64 <= g; t += 64) {
        _mm512_storeu_ps(y + t, dec16(load16(p + t), zp, s));
        _mm512_storeu_ps(y + t + 16, dec16(load16(p + t + 16), zp, s));
        _mm512_storeu_ps(y + t + 32, dec16(load16(p + t + 32), zp, s));
        _mm512_storeu_ps(y + t + 48, dec16(load16(p + t + 48), zp, s));
    }
    for (; t + 16 <= g; t += 16)
        _mm512_storeu_ps(y + t, dec16(load16(p + t), zp, s));
    if (t < g) {
        const __mmask16 m = attn_mask16(g - t);
        _mm512_mask_storeu_ps(y + t, m, dec16(_mm_maskz_loadu_epi8(m, p + t), zp, s));
    }
}

ATTN_AVX512_INLINE void decode_u4(const unsigned char *p, size_t g, float zpf, float sf, float *y)
{
    const __m512 zp = _mm512_set1_ps(zpf), s = _mm512_set1_ps(sf);
    const __m128i m = _mm_set1_epi8(15);
    size_t t = 0;
    for (; t + 64 <= g; t += 64) {
        const __m128i a = load16(p + t / 2), b = load16(p + t / 2 + 16);
        _mm512_storeu_ps(y + t, dec16(nibbles_lo(a, m), zp, s));
        _mm512_storeu_ps(y + t + 16, dec16(nibbles_hi(a, m), zp, s));
        _mm512_storeu_ps(y + t + 32, dec16(nibbles_lo(b, m), zp, s));
        _mm512_storeu_ps(y + t + 48, dec16(nibbles_hi(b, m), zp, s));
    }
    for (; t + 16 <= g; t += 16) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(p + t / 2));
        _mm512_storeu_ps(y + t, dec16(nibbles_lo(b, m), zp, s));
    }
    if (t < g) { /* g is even: (g - t) / 2 bytes */
        const __m128i b = _mm_maskz_loadu_epi8(attn_mask16((g - t) / 2), p + t / 2);
        _mm512_mask_storeu_ps(y + t, attn_mask16(g - t), dec16(nibbles_lo(b, m), zp, s));
    }
}

/* ------------------------------------------------------------ encoding */

ATTN_AVX512_INLINE float hmin16(__m512 v)
{
    const __m256 a = _mm256_min_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 h = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_min_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_min_ss(h, _mm_movehdup_ps(h)));
}

ATTN_AVX512_INLINE float hmax16(__m512 v)
{
    const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

/* The codes of 16 values: rne(fma(x, inv, zp)) clamped to [0, top]
   (clamping first is the same: 0 and top are integers), one byte each in
   order; u4: the 8 bytes of pairs (even << 4) | odd in the low half. */
ATTN_AVX512_INLINE __m128i codes16(__m512 x, __m512 inv, __m512 zp, __m512 top, int bits)
{
    __m512 c = _mm512_fmadd_ps(x, inv, zp);
    c = _mm512_min_ps(_mm512_max_ps(c, _mm512_setzero_ps()), top);
    c = _mm512_roundscale_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i b = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(c));
    if (bits == 8)
        return b;
    const __m128i w = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0xff)), 4),
                                   _mm_srli_epi16(b, 8));
    return _mm_packus_epi16(w, w);
}

/* One record of n values (n even for u4), or 0 as the oracle refuses. */
ATTN_AVX512_INLINE int asym_encode(const float *x, unsigned char *dst, size_t n, int bits)
{
    /* min, max and whether any |x| is inf or NaN (on the bits); the tail's
       lanes past n hold x[0], which changes neither */
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512 first = _mm512_set1_ps(x[0]);
    __m512 vlo = first, vhi = first;
    __mmask16 bad = 0;
    for (size_t j = 0; j < n; j += 16) {
        const __m512 v = j + 16 <= n ? _mm512_loadu_ps(x + j)
                                     : _mm512_mask_loadu_ps(first, attn_mask16(n - j), x + j);
        vlo = _mm512_min_ps(vlo, v);
        vhi = _mm512_max_ps(vhi, v);
        bad |= _mm512_cmpge_epu32_mask(_mm512_and_si512(_mm512_castps_si512(v), abs_mask), inf);
    }
    float s, zp;
    if (bad || !attn_asym_scale(bits, attn_asym_lo(x, n, hmin16(vlo)), hmax16(vhi), &s, &zp))
        return 0;
    attn_asym_header(dst, s, zp);
    unsigned char *out = dst + ATTN_ASYM_HEADER;
    const __m512 vinv = _mm512_set1_ps(1.0f / s), vzp = _mm512_set1_ps(zp),
                 top = _mm512_set1_ps(ATTN_ASYM_TOP(bits));
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m128i b = codes16(_mm512_loadu_ps(x + j), vinv, vzp, top, bits);
        if (bits == 8)
            _mm_storeu_si128((__m128i *)(void *)(out + j), b);
        else
            _mm_storel_epi64((__m128i *)(void *)(out + j / 2), b);
    }
    if (j < n) { /* only the tail's own codes are stored */
        unsigned char tmp[16];
        _mm_storeu_si128((__m128i *)(void *)tmp,
                         codes16(_mm512_maskz_loadu_ps(attn_mask16(n - j), x + j), vinv, vzp, top,
                                 bits));
        memcpy(out + j * (size_t)bits / 8, tmp, (n - j) * (size_t)bits / 8);
    }
    return 1;
}

ATTN_ASYM_FILE(avx512, ATTN_AVX512_EXT)

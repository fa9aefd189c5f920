/* SPDX-License-Identifier: MIT */
/*
 * The int8 mode's qk_i8 (attn_precision, include/attn.h) on vpdpbusd, once
 * for both x86 widths. q is quantized as src/lowp.h says (the same IEEE
 * operations, so the same bits) and the integer products summed exactly:
 * vpdpbusd takes the keys as u8 (value + 128, or Q4_0's bare nibble), and
 * the offset times the block's q sum is subtracted exactly in int32. The
 * result differs from the scalar oracle only in the order of the f32
 * additions of the block sums.
 *
 * The including file defines, before including this one:
 *   I8_KEYS                      keys per group: the int32 lanes of a vector
 *   I8_INLINE                    its always-inline qualifier
 *   i8_vi, i8_vf, i8_mask        int32 vector, f32 vector, lane mask types
 *   i8_dpbusd(acc, u8, s8)       acc + per-lane sums of 4 u8 x s8 products
 *   i8_vi_load(p), i8_vi_set1(x), i8_vi_zero(), i8_vi_add(a, b)
 *   i8_vf_load(p), i8_vf_set1(x), i8_vf_zero(), i8_vf_cvt(vi),
 *   i8_vf_mul(a, b), i8_vf_fmadd(a, b, c)      (aligned loads)
 *   i8_lanes(n)                  the mask of lanes 0 .. n-1
 *   i8_vf_mload(m, p), i8_vf_mstore(p, m, x)   masked f32 load and store
 *   i8_key_order(x)              a vector of group lanes back in key order
 *                                (an involution: also key order to lanes)
 *   i8_pack(dt, k, kb, nkeys, b0, nb, kp, ks)
 *       packs blocks b0 .. b0 + nb of a group of nkeys (<= I8_KEYS) keys,
 *       the rest zero: kp[(b * 8 + w) * I8_KEYS + l] = dword w of block b
 *       (as u8, i8_block_u8) of the key in lane l, ks[b * I8_KEYS + l]
 *       that block's scale (0 for a missing key)
 * and includes its ISA's tile body (unit_bytes, row_at, the prefetch).
 */
#ifndef ATTN_X86_DOT_I8_VNNI_TMPL_H
#define ATTN_X86_DOT_I8_VNNI_TMPL_H

#include <math.h>
#include <string.h>

#include "lowp.h"

#define I8_BLOCKS 8     /* 2-4 KiB of panel */
#define I8_PANEL_WORDS (I8_BLOCKS * 8 * I8_KEYS)
#define I8_SCALE_WORDS (I8_BLOCKS * I8_KEYS)
#define I8_ALIGN 64
#define I8_ROWS 4

/* Exact: a max, and int32 sums that cannot overflow here. */
I8_INLINE float i8_hmax8(__m256 x)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

I8_INLINE int i8_hsum8(__m256i x)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* src/lowp.h's attn_q8_quantize with the same IEEE operations, so the same
   bits; 256-bit vectors for both widths. */
I8_INLINE void i8_quantize(const float *x, attn_q8_block *b)
{
    __m256 v[4];
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps(), unord = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(m, _mm256_and_ps(v[i], abs));
        unord = _mm256_or_ps(unord, _mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
    }
    const float dq = _mm256_movemask_ps(unord) ? NAN : i8_hmax8(m) / 127.0f;
    b->sum = 0;
    if (attn_q8_special(b, dq))
        return;
    const __m256 id = _mm256_set1_ps(1.0f / dq);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    __m256i n[4];
    for (int i = 0; i < 4; i++)
        n[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], id)), lo), hi);
    b->dq = dq;
    b->sum = i8_hsum8(_mm256_add_epi32(_mm256_add_epi32(n[0], n[1]), _mm256_add_epi32(n[2], n[3])));
    /* |n| <= 127: the saturating packs are exact; they interleave the
       vectors by 128-bit lane, the dword permutation restores the order */
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
    _mm256_storeu_si256((__m256i *)(void *)b->n,
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* As u8: value + 128 (Q8_0) or the nibble, value + 8 (Q4_0). */
I8_INLINE __m256i i8_block_u8(int dt, const unsigned char *blk)
{
    if (dt == ATTN_KV_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)),
                                _mm256_set1_epi8((char)0x80));
    const __m128i x = _mm_loadu_si128((const __m128i *)(blk + 2));
    const __m128i nib = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), nib), _mm_and_si128(x, nib));
}

I8_INLINE float i8_block_scale(int dt, const unsigned char *row, size_t b)
{
    uint16_t h;
    memcpy(&h, row + b * unit_bytes(dt), sizeof h);
    return _cvtsh_ss(h);
}

I8_INLINE i8_vi i8_qword(const attn_q8_block *x, size_t w)
{
    int32_t v;
    memcpy(&v, x->n + 4 * w, sizeof v);
    return i8_vi_set1(v);
}

#ifndef I8_GROUPED /* a grouped kernel (AMX) brings its own i8_rows */
/* Sums from zero (first chunk) or from the partial sums in s, stored back
   in key order, scaled after the last chunk. */
I8_INLINE void i8_rows(int dt, size_t R, const attn_q8_block *qb, size_t q_blocks,
                       const uint32_t *kp, const float *ks, size_t nb, float *s,
                       ptrdiff_t s_stride, size_t nkeys, int first, int last, float scale)
{
    const i8_mask m = i8_lanes(nkeys); /* in key order */
    const int off = dt == ATTN_KV_Q8_0 ? 128 : 8;
    i8_vf acc[I8_ROWS];
    for (size_t r = 0; r < R; r++)
        acc[r] = first ? i8_vf_zero() : i8_key_order(i8_vf_mload(m, s + (ptrdiff_t)r * s_stride));
    for (size_t b = 0; b < nb; b++) {
        i8_vi kv[8];
        for (size_t w = 0; w < 8; w++)
            kv[w] = i8_vi_load(kp + (b * 8 + w) * I8_KEYS);
        const i8_vf dk = i8_vf_load(ks + b * I8_KEYS);
        for (size_t r = 0; r < R; r++) {
            const attn_q8_block *x = &qb[r * q_blocks + b];
            /* four chains hide vpdpbusd's latency */
            i8_vi s0 = i8_vi_set1(-off * x->sum), s1 = i8_vi_zero();
            i8_vi s2 = i8_vi_zero(), s3 = i8_vi_zero();
            s0 = i8_dpbusd(s0, kv[0], i8_qword(x, 0));
            s1 = i8_dpbusd(s1, kv[1], i8_qword(x, 1));
            s2 = i8_dpbusd(s2, kv[2], i8_qword(x, 2));
            s3 = i8_dpbusd(s3, kv[3], i8_qword(x, 3));
            s0 = i8_dpbusd(s0, kv[4], i8_qword(x, 4));
            s1 = i8_dpbusd(s1, kv[5], i8_qword(x, 5));
            s2 = i8_dpbusd(s2, kv[6], i8_qword(x, 6));
            s3 = i8_dpbusd(s3, kv[7], i8_qword(x, 7));
            /* |integer block sum| < 2^24: converting is exact */
            const i8_vf isum = i8_vf_cvt(i8_vi_add(i8_vi_add(s0, s1), i8_vi_add(s2, s3)));
            acc[r] = i8_vf_fmadd(isum, i8_vf_mul(dk, i8_vf_set1(x->dq)), acc[r]);
        }
    }
    for (size_t r = 0; r < R; r++) {
        i8_vf x = i8_key_order(acc[r]);
        if (last)
            x = i8_vf_mul(x, i8_vf_set1(scale));
        i8_vf_mstore(s + (ptrdiff_t)r * s_stride, m, x);
    }
}
#endif

#include "dot_i8_tmpl.h"

#endif /* ATTN_X86_DOT_I8_VNNI_TMPL_H */

/* SPDX-License-Identifier: MIT */
/*
 * The int8 mode's qk_i8 (attn_precision, include/attn.h; the dot_i8 file of
 * src/kernel_list.h) for the AVX-512 table, on AVX512_VNNI (vpdpbusd):
 * src/x86/dot_i8_vnni_tmpl.h's kernel (shared with the AVX-VNNI one,
 * src/x86/dot_i8_avx2.c) with 16 keys a vector. With ATTN_DOT_I8_AMX
 * (src/x86/dot_i8_amx.c) the same packed keys and quantized rows meet on
 * AMX tiles (tdpbsud), up to 16 rows at a time; the integer sums are the
 * same, and so is every f32 operation after them: the same bits. Built
 * with the flags of its file (src/x86/meson.build), installed only on CPUs
 * that have them; against SIMDe (and src/x86/amx_emu.h) in tests/emu.
 */
#ifndef ATTN_X86_DOT_I8_AVX512_TMPL_H
#define ATTN_X86_DOT_I8_AVX512_TMPL_H

#include "tile_variants.h"
#include "x86/tile_avx512_tmpl.h"

#define I8_KEYS 16
#define I8_INLINE ATTN_AVX512_INLINE
typedef __m512i i8_vi;
typedef __m512 i8_vf;
typedef __mmask16 i8_mask;
#define i8_dpbusd(acc, u8, s8) _mm512_dpbusd_epi32(acc, u8, s8)
#define i8_vi_load(p) _mm512_load_si512(p)
#define i8_vi_set1(x) _mm512_set1_epi32(x)
#define i8_vi_zero() _mm512_setzero_si512()
#define i8_vi_add(a, b) _mm512_add_epi32(a, b)
#define i8_vf_load(p) _mm512_load_ps(p)
#define i8_vf_set1(x) _mm512_set1_ps(x)
#define i8_vf_zero() _mm512_setzero_ps()
#define i8_vf_cvt(x) _mm512_cvtepi32_ps(x)
#define i8_vf_mul(a, b) _mm512_mul_ps(a, b)
#define i8_vf_fmadd(a, b, c) _mm512_fmadd_ps(a, b, c)
#define i8_lanes(n) attn_mask16(n)
#define i8_vf_mload(m, p) _mm512_maskz_loadu_ps(m, p)
#define i8_vf_mstore(p, m, x) _mm512_mask_storeu_ps(p, m, x)
/* the pack below leaves key kperm[l] in lane l */
#define i8_key_order(x) _mm512_permutexvar_ps(_mm512_loadu_si512(kperm), x)
static const int32_t kperm[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

I8_INLINE void i8_pack(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys, size_t b0,
                       size_t nb, uint32_t *kp, float *ks);

#ifdef ATTN_DOT_I8_AMX
#define I8_GROUPED 1
#include "lowp.h"
I8_INLINE size_t i8_group(size_t rows_per_pass);
I8_INLINE void i8_begin(size_t group);
I8_INLINE void i8_end(void);
I8_INLINE void i8_rows(int dt, size_t R, const attn_q8_block *qb, size_t q_blocks,
                       const uint32_t *kp, const float *ks, size_t nb, float *s,
                       ptrdiff_t s_stride, size_t nkeys, int first, int last, float scale);
#endif
#include "x86/dot_i8_vnni_tmpl.h"

/*
 * Packs blocks b0 .. b0 + nb of the keys of a group (nkeys <= 16, the rest
 * zero): kp[(b * 8 + w) * 16 + l] = dword w (values 4w .. 4w + 3, as u8) of
 * block b of key kperm[l]; ks[b * 16 + l] = that block's scale.
 */
ATTN_AVX512_INLINE void i8_pack(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys,
                                size_t b0, size_t nb, uint32_t *kp, float *ks)
{
    const size_t unit = unit_bytes(dt);
    for (size_t b = 0; b < nb; b++) {
        __m512i r[8];
        for (size_t j = 0; j < 8; j++) {
            /* key j in the low half, key j + 8 in the high half */
            __m256i x0 = _mm256_setzero_si256(), x1 = _mm256_setzero_si256();
            if (j < nkeys)
                x0 = i8_block_u8(dt, row_at(k, j, kb) + (b0 + b) * unit);
            if (j + 8 < nkeys)
                x1 = i8_block_u8(dt, row_at(k, j + 8, kb) + (b0 + b) * unit);
            r[j] = _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
        }
        for (size_t l = 0; l < 16; l++) {
            const size_t j = (size_t)kperm[l];
            ks[b * 16 + l] = j < nkeys ? i8_block_scale(dt, row_at(k, j, kb), b0 + b) : 0.0f;
        }
        /* 8 x 8 dword transposes in each 256-bit half */
        __m512i t[8], u[8];
        for (size_t j = 0; j < 8; j += 2) {
            t[j] = _mm512_unpacklo_epi32(r[j], r[j + 1]);
            t[j + 1] = _mm512_unpackhi_epi32(r[j], r[j + 1]);
        }
        for (size_t j = 0; j < 8; j += 4) {
            u[j] = _mm512_unpacklo_epi64(t[j], t[j + 2]);
            u[j + 1] = _mm512_unpackhi_epi64(t[j], t[j + 2]);
            u[j + 2] = _mm512_unpacklo_epi64(t[j + 1], t[j + 3]);
            u[j + 3] = _mm512_unpackhi_epi64(t[j + 1], t[j + 3]);
        }
        /* u[i] (i < 4), 128-bit lanes: dword i of keys 0-3, dword i + 4 of
           keys 0-3, dword i of keys 8-11, dword i + 4 of keys 8-11; u[4 + i]
           the same for keys 4-7 and 12-15. */
        for (size_t i = 0; i < 4; i++) {
            _mm512_store_si512(kp + (b * 8 + i) * 16, _mm512_shuffle_i32x4(u[i], u[4 + i], 0x88));
            _mm512_store_si512(kp + (b * 8 + i + 4) * 16,
                               _mm512_shuffle_i32x4(u[i], u[4 + i], 0xdd));
        }
    }
}

#ifdef ATTN_DOT_I8_AMX
#include "x86/amx_cfg.h"
#ifdef ATTN_SIMDE_EMU
#include "x86/amx_emu.h"
#endif

/*
 * Tiles, set within each call on whatever thread runs it: 0-3 the int32
 * sums of `group` rows x 16 keys for four blocks; 4 one block of those
 * rows' quantized q (32 bytes a row); 5 one block of the packed keys, as
 * i8_pack leaves it (8 dword rows of 16 keys: the tile's B layout).
 */
I8_INLINE size_t i8_group(size_t rows_per_pass)
{
    return rows_per_pass < 16 ? rows_per_pass : 16;
}

I8_INLINE void i8_begin(size_t group)
{
    attn_amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 4; i++)
        cfg.rows[i] = (uint8_t)group, cfg.colsb[i] = 64;
    cfg.rows[4] = (uint8_t)group, cfg.colsb[4] = ATTN_QBLOCK;
    cfg.rows[5] = ATTN_QBLOCK / 4, cfg.colsb[5] = 64;
    _tile_loadconfig(&cfg);
}

I8_INLINE void i8_end(void)
{
    _tile_release();
}

/* C[j] += q of block j . keys of block j (tile numbers are immediates) */
#define I8_AMX_DOT(j, x, q_blocks, kp)                                                      \
    do {                                                                                    \
        _tile_zero(j);                                                                      \
        _tile_loadd(4, (x)[j].n, (q_blocks) * sizeof(attn_q8_block));                      \
        _tile_loadd(5, (kp) + (j) * 8 * 16, 64);                                            \
        _tile_dpbsud(j, 4, 5);                                                              \
    } while (0)

/* i8_rows of dot_i8_vnni_tmpl.h on tiles: the same integer block sums
   (q signed, keys as u8, the offset times the q sum taken off after),
   the same f32 operations in the same order. R rows of the group's. */
I8_INLINE void i8_rows(int dt, size_t R, const attn_q8_block *qb, size_t q_blocks,
                       const uint32_t *kp, const float *ks, size_t nb, float *s,
                       ptrdiff_t s_stride, size_t nkeys, int first, int last, float scale)
{
    /* one block's sums at a time: the task stack bound leaves no room for
       four (tests/api/test_threads.c) */
    _Alignas(64) int32_t c[16][16];
    const __mmask16 m = attn_mask16(nkeys);
    const int off = dt == ATTN_KV_Q8_0 ? 128 : 8;
    __m512 acc[16];
    for (size_t r = 0; r < R; r++)
        acc[r] = first ? _mm512_setzero_ps()
                       : i8_key_order(_mm512_maskz_loadu_ps(m, s + (ptrdiff_t)r * s_stride));
    for (size_t b0 = 0; b0 < nb; b0 += 4) {
        const size_t nj = nb - b0 < 4 ? nb - b0 : 4;
        const attn_q8_block *x = qb + b0;
        const uint32_t *kb = kp + b0 * 8 * 16;
        I8_AMX_DOT(0, x, q_blocks, kb);
        if (nj > 1)
            I8_AMX_DOT(1, x, q_blocks, kb);
        if (nj > 2)
            I8_AMX_DOT(2, x, q_blocks, kb);
        if (nj > 3)
            I8_AMX_DOT(3, x, q_blocks, kb);
        for (size_t j = 0; j < nj; j++) {
            switch (j) { /* tile numbers are immediates */
            case 0: _tile_stored(0, c, 64); break;
            case 1: _tile_stored(1, c, 64); break;
            case 2: _tile_stored(2, c, 64); break;
            default: _tile_stored(3, c, 64); break;
            }
            const __m512 dk = _mm512_load_ps(ks + (b0 + j) * 16);
            for (size_t r = 0; r < R; r++) {
                const attn_q8_block *xr = &x[r * q_blocks + j];
                const __m512i sum = _mm512_sub_epi32(_mm512_load_si512(c[r]),
                                                     _mm512_set1_epi32(off * xr->sum));
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                                         _mm512_mul_ps(dk, _mm512_set1_ps(xr->dq)), acc[r]);
            }
        }
    }
    for (size_t r = 0; r < R; r++) {
        __m512 y = i8_key_order(acc[r]);
        if (last)
            y = _mm512_mul_ps(y, _mm512_set1_ps(scale));
        _mm512_mask_storeu_ps(s + (ptrdiff_t)r * s_stride, m, y);
    }
}
#undef I8_AMX_DOT
#endif /* ATTN_DOT_I8_AMX */

#endif /* ATTN_X86_DOT_I8_AVX512_TMPL_H */

/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 kernel of the int8 mode (attn_precision, include/attn.h; the
 * dot_i8 file of src/kernel_list.h, its bf16 twin is src/x86/dot_avx512.c),
 * on AVX512_VNNI (vpdpbusd): src/x86/dot_i8_vnni_tmpl.h's qk_i8 (shared with
 * the AVX-VNNI kernel, src/x86/dot_i8_avx2.c) with 16 keys a vector. Built
 * with that flag on top of the ISA's (src/x86/meson.build) and installed
 * only on CPUs that have it (src/dispatch.c sets the table's cpu bits);
 * against SIMDe in tests/emu.
 */
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

ATTN_TILE_FILE(dot_i8, avx512, ATTN_AVX512_EXT)

/* SPDX-License-Identifier: MIT */
/*
 * The int8 mode's AVX2 kernel: src/x86/dot_i8_vnni_tmpl.h with 8 keys a
 * vector, on the VEX vpdpbusd or, with ATTN_DOT_I8_EVEX, the EVEX one at
 * 256 bits, for CPUs that have only that form and default to the AVX2
 * table (src/isa_list.h). Both give the same int32 sums, so the same bits.
 * tests/emu builds it against SIMDe to check it on CPUs without either.
 */
#include "tile_variants.h"
#include "x86/tile_avx2_tmpl.h"

#ifdef ATTN_SIMDE_EMU
#include <simde/x86/avx512/dpbusd.h>
#define i8_dpbusd(acc, u8, s8) simde_mm256_dpbusd_epi32(acc, u8, s8)
#define ATTN_DOT_I8_AVX2_EXT avx2_emu
#else
#define ATTN_DOT_I8_AVX2_EXT avx2
#ifdef ATTN_DOT_I8_EVEX
#define i8_dpbusd(acc, u8, s8) _mm256_dpbusd_epi32(acc, u8, s8)
#else
#define i8_dpbusd(acc, u8, s8) _mm256_dpbusd_avx_epi32(acc, u8, s8)
#endif
#endif

#define I8_KEYS 8
#define I8_INLINE static ALWAYS_INLINE
typedef __m256i i8_vi;
typedef __m256 i8_vf;
typedef __m256i i8_mask;
#define i8_vi_load(p) _mm256_load_si256((const __m256i *)(const void *)(p))
#define i8_vi_set1(x) _mm256_set1_epi32(x)
#define i8_vi_zero() _mm256_setzero_si256()
#define i8_vi_add(a, b) _mm256_add_epi32(a, b)
#define i8_vf_load(p) _mm256_load_ps(p)
#define i8_vf_set1(x) _mm256_set1_ps(x)
#define i8_vf_zero() _mm256_setzero_ps()
#define i8_vf_cvt(x) _mm256_cvtepi32_ps(x)
#define i8_vf_mul(a, b) _mm256_mul_ps(a, b)
#define i8_vf_fmadd(a, b, c) _mm256_fmadd_ps(a, b, c)
#define i8_lanes(n) first_lanes(n)
#define i8_vf_mload(m, p) _mm256_maskload_ps(p, m)
#define i8_vf_mstore(p, m, x) _mm256_maskstore_ps(p, m, x)
#define i8_key_order(x) (x) /* the pack keeps key l in lane l */

I8_INLINE void i8_pack(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys, size_t b0,
                       size_t nb, uint32_t *kp, float *ks);
#include "x86/dot_i8_vnni_tmpl.h"

/* The pack of src/x86/dot_i8_vnni_tmpl.h's contract, key l in lane l. */
I8_INLINE void i8_pack(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys, size_t b0,
                       size_t nb, uint32_t *kp, float *ks)
{
    const size_t unit = unit_bytes(dt);
    for (size_t b = 0; b < nb; b++) {
        __m256i r[8], t[8], u[8];
        for (size_t j = 0; j < 8; j++) {
            r[j] = j < nkeys ? i8_block_u8(dt, row_at(k, j, kb) + (b0 + b) * unit)
                             : _mm256_setzero_si256();
            ks[b * 8 + j] = j < nkeys ? i8_block_scale(dt, row_at(k, j, kb), b0 + b) : 0.0f;
        }
        /* an 8 x 8 dword transpose */
        for (size_t j = 0; j < 8; j += 2) {
            t[j] = _mm256_unpacklo_epi32(r[j], r[j + 1]);
            t[j + 1] = _mm256_unpackhi_epi32(r[j], r[j + 1]);
        }
        for (size_t j = 0; j < 8; j += 4) {
            u[j] = _mm256_unpacklo_epi64(t[j], t[j + 2]);
            u[j + 1] = _mm256_unpackhi_epi64(t[j], t[j + 2]);
            u[j + 2] = _mm256_unpacklo_epi64(t[j + 1], t[j + 3]);
            u[j + 3] = _mm256_unpackhi_epi64(t[j + 1], t[j + 3]);
        }
        /* u[i]: dwords i and i + 4 of keys 0-3; u[4 + i] of keys 4-7 */
        for (size_t i = 0; i < 4; i++) {
            _mm256_store_si256((__m256i *)(void *)(kp + (b * 8 + i) * 8),
                               _mm256_permute2x128_si256(u[i], u[4 + i], 0x20));
            _mm256_store_si256((__m256i *)(void *)(kp + (b * 8 + i + 4) * 8),
                               _mm256_permute2x128_si256(u[i], u[4 + i], 0x31));
        }
    }
}

/*
 * AVX-512 kernel of the int8 mode (attn_precision, include/attn.h; the
 * dot_i8 file of src/kernel_list.h, its bf16 twin is src/x86/dot_avx512.c),
 * on AVX512_VNNI (vpdpbusd). Built with that flag on top of the ISA's
 * (src/x86/meson.build) and installed only on CPUs that have it
 * (src/dispatch.c sets the table's cpu bits); against SIMDe in tests/emu.
 *
 * It quantizes q exactly as src/lowp.h says (the same IEEE operations, so
 * the same bits), sums the integer products exactly, and differs from the
 * scalar oracle (src/scalar/dot_scalar.c) only in the order of the f32
 * additions of the block sums.
 *
 *   qk_i8:   q quantized per 32-block once per call (src/lowp.h's rule);
 *            16 keys' integers transposed so that lane j holds key j's
 *            4 values of a dword, then 8 vpdpbusd per block sum the whole
 *            block of 16 keys at once (u8 operand: the key's value + 128
 *            for Q8_0, its nibble, value + 8, for Q4_0; the offset times
 *            the block's q sum is subtracted exactly in int32), one
 *            conversion and one multiply-add by fl(dk * dq) per block.
 */
#include "lowp.h"
#include "tile_variants.h"
#include "x86/tile_avx512_body.h"

#ifdef ATTN_SIMDE_EMU
/* What SIMDe 0.7.4 lacks here (emulation speed does not matter). */
static inline simde__m512i attn_emu_cvtps_epi32(simde__m512 a)
{
    simde__m512_private x = simde__m512_to_private(a);
    simde__m512i_private r;
    r.m256i[0] = _mm256_cvtps_epi32(x.m256[0]);
    r.m256i[1] = _mm256_cvtps_epi32(x.m256[1]);
    return simde__m512i_from_private(r);
}
#define _mm512_cvtps_epi32(a) attn_emu_cvtps_epi32(a)

static inline simde__m128i attn_emu_cvtepi32_epi8(simde__m512i a)
{
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m128i_private r;
    for (int i = 0; i < 16; i++)
        r.i8[i] = (int8_t)x.i32[i];
    return simde__m128i_from_private(r);
}
#define _mm512_cvtepi32_epi8(a) attn_emu_cvtepi32_epi8(a)

static inline int attn_emu_reduce_add_epi32(simde__m512i a)
{
    simde__m512i_private x = simde__m512i_to_private(a);
    int s = 0;
    for (int i = 0; i < 16; i++)
        s += x.i32[i];
    return s;
}
#undef _mm512_reduce_add_epi32
#define _mm512_reduce_add_epi32(a) attn_emu_reduce_add_epi32(a)
#endif

/* ------------------------------------------------------------------------ */
/* qk_i8                                                                     */
/* ------------------------------------------------------------------------ */

#define I8_KEYS 16      /* keys per group: one vector of lanes */
/* stack: 4 KiB of panel, 10 KiB of quantized query (ATTN_TASK_STACK_BYTES) */
#define I8_BLOCKS 8     /* blocks per packed chunk (d 256) */
#define I8_QBLOCKS 256  /* quantized query blocks kept per pass: 64 rows at d 128 */
#define I8_ROWS 4       /* query rows per micro-kernel */
_Static_assert(ATTN_MAX_HEAD_DIM / ATTN_QBLOCK <= I8_QBLOCKS, "a query row must fit one pass");

/* src/lowp.h's attn_q8_quantize on 32 values, vectorised: the same IEEE
   operations (max, one division for dq, one for 1/dq, one multiply and a
   round to nearest even per value), so the same bits. */
ATTN_AVX512_INLINE void i8_quantize(const float *x, attn_q8_block *b)
{
    const __m512 a = _mm512_loadu_ps(x), c = _mm512_loadu_ps(x + 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) |
                          _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(c)));
    const float dq = nan ? NAN : m / 127.0f;
    b->sum = 0;
    if (!(dq >= ATTN_Q8_TINY) || dq == INFINITY) {
        b->dq = dq >= 0.0f && dq < ATTN_Q8_TINY ? 0.0f : NAN;
        memset(b->n, 0, sizeof b->n);
        return;
    }
    const __m512 id = _mm512_set1_ps(1.0f / dq);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    const __m512i na = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a, id)), lo), hi);
    const __m512i nc = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(c, id)), lo), hi);
    b->dq = dq;
    b->sum = _mm512_reduce_add_epi32(_mm512_add_epi32(na, nc));
    _mm_storeu_si128((__m128i *)(void *)b->n, _mm512_cvtepi32_epi8(na));
    _mm_storeu_si128((__m128i *)(void *)(b->n + 16), _mm512_cvtepi32_epi8(nc));
}

/* The 32 integers of a block as unsigned bytes: value + 128 (Q8_0) or the
   nibble, value + 8 (Q4_0), in order. */
ATTN_AVX512_INLINE __m256i i8_block_u8(int dt, const unsigned char *blk)
{
    if (dt == ATTN_KV_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)),
                                _mm256_set1_epi8((char)0x80));
    const __m128i x = _mm_loadu_si128((const __m128i *)(blk + 2));
    const __m128i nib = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), nib), _mm_and_si128(x, nib));
}

/* Lane order of a packed group: the transpose below leaves key
   kperm[l] in lane l (an involution, so it also puts lanes back). */
static const int32_t kperm[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

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
            float d = 0.0f;
            if (j < nkeys) {
                uint16_t h;
                memcpy(&h, row_at(k, j, kb) + (b0 + b) * unit, sizeof h);
                d = _cvtsh_ss(h);
            }
            ks[b * 16 + l] = d;
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

/* A dword of a query block's integers, broadcast (one load). */
ATTN_AVX512_INLINE __m512i i8_qword(const attn_q8_block *x, size_t w)
{
    int32_t v;
    memcpy(&v, x->n + 4 * w, sizeof v);
    return _mm512_set1_epi32(v);
}

/*
 * R rows (R <= 4) x one packed group over the nb blocks of the chunk: the
 * f32 sums start from zero (first chunk) or from the partial sums left in
 * s, and are stored back in key order (scaled after the last chunk). The
 * accumulators stay in registers for the whole chunk.
 */
ATTN_AVX512_INLINE void i8_rows(int dt, size_t R, const attn_q8_block *qb, size_t q_blocks,
                                const uint32_t *kp, const float *ks, size_t nb, float *s,
                                ptrdiff_t s_stride, __mmask16 m, int first, int last,
                                float scale, __m512i perm)
{
    const int off = dt == ATTN_KV_Q8_0 ? 128 : 8;
    __m512 acc[I8_ROWS];
    for (size_t r = 0; r < R; r++)
        acc[r] = first ? _mm512_setzero_ps()
                       : _mm512_permutexvar_ps(perm, _mm512_maskz_loadu_ps(
                                                         m, s + (ptrdiff_t)r * s_stride));
    for (size_t b = 0; b < nb; b++) {
        __m512i kv[8];
        for (size_t w = 0; w < 8; w++)
            kv[w] = _mm512_load_si512(kp + (b * 8 + w) * 16);
        const __m512 dk = _mm512_load_ps(ks + b * 16);
        for (size_t r = 0; r < R; r++) {
            const attn_q8_block *x = &qb[r * q_blocks + b];
            /* four chains, so that eight dependent vpdpbusd do not wait on
               each other's latency; the offset times the q sum, exactly */
            __m512i s0 = _mm512_set1_epi32(-off * x->sum), s1 = _mm512_setzero_si512();
            __m512i s2 = _mm512_setzero_si512(), s3 = _mm512_setzero_si512();
            s0 = _mm512_dpbusd_epi32(s0, kv[0], i8_qword(x, 0));
            s1 = _mm512_dpbusd_epi32(s1, kv[1], i8_qword(x, 1));
            s2 = _mm512_dpbusd_epi32(s2, kv[2], i8_qword(x, 2));
            s3 = _mm512_dpbusd_epi32(s3, kv[3], i8_qword(x, 3));
            s0 = _mm512_dpbusd_epi32(s0, kv[4], i8_qword(x, 4));
            s1 = _mm512_dpbusd_epi32(s1, kv[5], i8_qword(x, 5));
            s2 = _mm512_dpbusd_epi32(s2, kv[6], i8_qword(x, 6));
            s3 = _mm512_dpbusd_epi32(s3, kv[7], i8_qword(x, 7));
            /* the exact integer block sum: |it| < 2^24, so converting is exact */
            const __m512 isum = _mm512_cvtepi32_ps(
                _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_add_epi32(s2, s3)));
            acc[r] = _mm512_fmadd_ps(isum, _mm512_mul_ps(dk, _mm512_set1_ps(x->dq)), acc[r]);
        }
    }
    for (size_t r = 0; r < R; r++) {
        __m512 x = _mm512_permutexvar_ps(perm, acc[r]);
        if (last)
            x = _mm512_mul_ps(x, _mm512_set1_ps(scale));
        _mm512_mask_storeu_ps(s + (ptrdiff_t)r * s_stride, m, x);
    }
}

ATTN_AVX512_INLINE void qk_i8(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                              ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                              float *s, ptrdiff_t s_stride)
{
    _Alignas(64) uint32_t kp[I8_BLOCKS * 8 * I8_KEYS];
    _Alignas(64) float ks[I8_BLOCKS * I8_KEYS];
    attn_q8_block qb[I8_QBLOCKS];
    const size_t nb = d / ATTN_QBLOCK; /* k rows are whole blocks */
    const size_t unit = unit_bytes(dt), bytes = row_bytes(dt, d);
    const uintptr_t kb = (uintptr_t)k_stride * unit;
    const size_t rows_per_pass = nb <= I8_QBLOCKS ? I8_QBLOCKS / nb : 1;
    const size_t ahead = attn_prefetch_rows_ahead(bytes);
    const __m512i perm = _mm512_loadu_si512(kperm);
    for (size_t r0 = 0; r0 < nq; r0 += rows_per_pass) {
        const size_t nr = nq - r0 < rows_per_pass ? nq - r0 : rows_per_pass;
        for (size_t r = 0; r < nr; r++)
            for (size_t b = 0; b < nb; b++)
                i8_quantize(q + (ptrdiff_t)(r0 + r) * q_stride + (ptrdiff_t)(b * ATTN_QBLOCK),
                            &qb[r * nb + b]);
        for (size_t c0 = 0; c0 < nk; c0 += I8_KEYS) {
            const size_t nkeys = nk - c0 < I8_KEYS ? nk - c0 : I8_KEYS;
            if (r0 == 0)
                attn_prefetch_rows(k, c0 + ahead, k_stride, unit, I8_KEYS, bytes);
            /* store lanes l < nkeys, back in key order */
            const __mmask16 m = attn_mask16(nkeys);
            for (size_t bc = 0; bc < nb; bc += I8_BLOCKS) {
                const size_t nbc = nb - bc < I8_BLOCKS ? nb - bc : I8_BLOCKS;
                const int first = bc == 0, last = bc + nbc == nb;
                i8_pack(dt, row_at(k, c0, kb), kb, nkeys, bc, nbc, kp, ks);
                for (size_t r = 0; r < nr; r += I8_ROWS) {
                    const size_t R = nr - r < I8_ROWS ? nr - r : I8_ROWS;
                    float *sr = s + (ptrdiff_t)(r0 + r) * s_stride + (ptrdiff_t)c0;
                    const attn_q8_block *x = qb + r * nb + bc;
                    /* a switch, so that each R is its own loop */
                    switch (R) {
                    case 4: i8_rows(dt, 4, x, nb, kp, ks, nbc, sr, s_stride, m, first, last, scale, perm); break;
                    case 3: i8_rows(dt, 3, x, nb, kp, ks, nbc, sr, s_stride, m, first, last, scale, perm); break;
                    case 2: i8_rows(dt, 2, x, nb, kp, ks, nbc, sr, s_stride, m, first, last, scale, perm); break;
                    default: i8_rows(dt, 1, x, nb, kp, ks, nbc, sr, s_stride, m, first, last, scale, perm); break;
                    }
                }
            }
        }
    }
}

ATTN_TILE_FILE(dot_i8, avx512, ATTN_AVX512_EXT)

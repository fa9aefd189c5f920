/* SPDX-License-Identifier: MIT */
/*
 * The bf16 mode's kernels (attn_precision, include/attn.h) on vdpbf16ps,
 * rounding as src/lowp.h says, bit for bit. They differ from the scalar
 * oracle only in the order of the f32 additions and in vdpbf16ps flushing
 * subnormal factors and sums; attn.h's bounds count both. Below BF_MIN_ROWS
 * rows the exact f32 tile path serves (within the bound). With ATTN_DOT_AMX
 * (src/x86/dot_amx.c) every kernel here multiplies the same rounded pairs
 * on AMX tiles.
 */
#include "lowp.h"
#include "tile_variants.h"
#include "x86/tile_avx512_tmpl.h"

#ifdef ATTN_SIMDE_EMU
/* What SIMDe lacks here (emulation speed does not matter). */
static inline simde__m512bh attn_emu_as_bh(simde__m512i x)
{
    simde__m512bh r;
    memcpy(&r, &x, sizeof r);
    return r;
}
#define as_bh(x) attn_emu_as_bh(x)

static inline simde__m256i attn_emu_cvtepi32_epi16(simde__m512i a)
{
    simde__m512i_private x = simde__m512i_to_private(a);
    simde__m256i_private r;
    for (int i = 0; i < 16; i++)
        r.i16[i] = (int16_t)x.i32[i];
    return simde__m256i_from_private(r);
}
#define _mm512_cvtepi32_epi16(a) attn_emu_cvtepi32_epi16(a)

static inline simde__m512i attn_emu_maskz_loadu_epi16(uint32_t m, const void *p)
{
    simde__m512i_private r;
    for (int i = 0; i < 32; i++) {
        int16_t v = 0;
        if (m >> i & 1)
            memcpy(&v, (const unsigned char *)p + 2 * i, 2);
        r.i16[i] = v;
    }
    return simde__m512i_from_private(r);
}
#undef _mm512_maskz_loadu_epi16
#define _mm512_maskz_loadu_epi16(m, p) attn_emu_maskz_loadu_epi16(m, p)

/* vcvtne2ps2bf16 and vfpclassps (subnormal class only), as the SDM's
   pseudo-code says: RNE, a NaN quieted, a subnormal read as zero */
static inline simde__m512i attn_emu_cvtne2ps_bits(simde__m512 b, simde__m512 a)
{
    simde__m512_private x[2] = {simde__m512_to_private(a), simde__m512_to_private(b)};
    simde__m512i_private r;
    for (int i = 0; i < 32; i++) {
        uint32_t u;
        memcpy(&u, &x[i / 16].f32[i % 16], 4);
        uint16_t h;
        if ((u & 0x7fffffffu) > 0x7f800000u)
            h = (uint16_t)(u >> 16 | 0x40);
        else if ((u & 0x7f800000u) == 0)
            h = (uint16_t)(u >> 16 & 0x8000);
        else
            h = (uint16_t)((u + 0x7fffu + (u >> 16 & 1)) >> 16);
        r.u16[i] = h;
    }
    return simde__m512i_from_private(r);
}
static inline uint16_t attn_emu_subnormal_mask(simde__m512 a)
{
    simde__m512_private x = simde__m512_to_private(a);
    uint16_t m = 0;
    for (int i = 0; i < 16; i++)
        m |= (uint16_t)(fpclassify(x.f32[i]) == FP_SUBNORMAL) << i;
    return m;
}
#define bf16_cvtne2ps_bits(b, a) attn_emu_cvtne2ps_bits(b, a)
#define bf16_subnormals(a) attn_emu_subnormal_mask(a)
#else
#define as_bh(x) ((__m512bh)(x))
#define bf16_cvtne2ps_bits(b, a) ((__m512i)_mm512_cvtne2ps_pbh(b, a))
#define bf16_subnormals(a) _mm512_fpclass_ps_mask(a, 0x20)
#endif

/* ---- bf16 rounding ---- */

/* src/half.h's attn_f32_to_bf16 per lane, in the low half. A NaN is
   truncated, not rounded: rounding could carry its payload into the
   exponent and sign (0x7fff8000 would become -0). */
ATTN_AVX512_INLINE __m512i bf16_bits(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rne = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    return _mm512_mask_or_epi32(rne, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

/* a's 16 values then b's as bf16, as bf16_bits rounds them. vcvtne2ps2bf16
   rounds the same but reads a subnormal as zero: it serves when neither
   holds one (one vfpclassps each), three times fewer instructions. */
ATTN_AVX512_INLINE __m512i bf16_bits32(__m512 a, __m512 b)
{
    if ((bf16_subnormals(a) | bf16_subnormals(b)) == 0)
        return bf16_cvtne2ps_bits(b, a);
    const __m256i lo = _mm512_cvtepi32_epi16(bf16_bits(a));
    const __m256i hi = _mm512_cvtepi32_epi16(bf16_bits(b));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* n <= 32 values as bf16, zeros beyond: lane i holds values 2i, 2i + 1. */
ATTN_AVX512_INLINE __m512i pairs32(int dt, const unsigned char *row, size_t t, size_t n)
{
    if (dt == ATTN_KV_BF16) {
        const __mmask32 m = n >= 32 ? 0xffffffffu : (((__mmask32)1 << n) - 1);
        return _mm512_maskz_loadu_epi16(m, (const uint16_t *)row + t);
    }
    const size_t n0 = n < 16 ? n : 16, n1 = n > 16 ? n - 16 : 0;
    const __m512 a = n0 == 16 ? load16(dt, row, t) : maskz_load16(dt, attn_mask16(n0), row, t);
    const __m512 b = n1 == 16   ? load16(dt, row, t + 16)
                     : n1 == 0  ? _mm512_setzero_ps()
                                : maskz_load16(dt, attn_mask16(n1), row, t + 16);
    return bf16_bits32(a, b);
}

/* ---- qk_bf16 ---- */

#define BF_PANEL_KEYS 32
/* sized for ATTN_TASK_STACK_BYTES; partial sums wait in s between passes */
#define BF_DEPTH 64
#define BF_ROWS 64
/* Below, the exact f32 path is as fast (bound by reading K and V). Not the
   f32 path's 17: MLA decode blocks hold 13 rows at d 576. */
#define BF_MIN_ROWS 8

/* panel[p * 32 + j] = pair p of key j; keys from nkeys on zero. */
ATTN_AVX512_INLINE void bf_pack_keys(int dt, const unsigned char *k, uintptr_t kb, size_t nkeys,
                                     size_t t0, size_t td, uint32_t *panel)
{
    for (size_t g = 0; g < BF_PANEL_KEYS; g += 16) {
        const size_t kn = nkeys > g ? (nkeys - g < 16 ? nkeys - g : 16) : 0;
        for (size_t tb = 0; tb < td; tb += 32) {
            const size_t tn = td - tb < 32 ? td - tb : 32;
            __m512 rows[16];
            for (size_t j = 0; j < 16; j++)
                rows[j] = j < kn ? _mm512_castsi512_ps(pairs32(dt, row_at(k, g + j, kb), t0 + tb, tn))
                                 : _mm512_setzero_ps();
            transpose16x16(rows);
            for (size_t i = 0; i < (tn + 1) / 2; i++)
                _mm512_store_ps((float *)panel + (tb / 2 + i) * BF_PANEL_KEYS + g, rows[i]);
        }
    }
}

/* qp[r * BF_DEPTH / 2 + i] = pair i of row r0 + r's dims t0 .. t0 + td. */
ATTN_AVX512_INLINE void bf_pack_queries(const float *q, ptrdiff_t q_stride, size_t r0, size_t nr,
                                        size_t t0, size_t td, uint32_t *qp)
{
    for (size_t r = 0; r < nr; r++) {
        const unsigned char *qr = (const unsigned char *)(q + (ptrdiff_t)(r0 + r) * q_stride);
        for (size_t tb = 0; tb < td; tb += 32)
            _mm512_store_si512(qp + r * (BF_DEPTH / 2) + tb / 2,
                               pairs32(ATTN_KV_F32, qr, t0 + tb, td - tb < 32 ? td - tb : 32));
    }
}

/* R <= 8 rows x 32 keys; first pass from zero, later ones from s. */
ATTN_AVX512_INLINE void bf_panel_rows(size_t R, const uint32_t *qp, size_t np,
                                      const uint32_t *panel, __mmask16 m0, __mmask16 m1,
                                      int first, int last, float scale, float *s,
                                      ptrdiff_t s_stride)
{
    __m512 acc[8][2];
    panel_acc_load(R, acc, first, s, s_stride, m0, m1);
    for (size_t p = 0; p < np; p++) {
        const __m512i k0 = _mm512_load_si512(panel + p * BF_PANEL_KEYS);
        const __m512i k1 = _mm512_load_si512(panel + p * BF_PANEL_KEYS + 16);
        for (size_t r = 0; r < R; r++) {
            const __m512i qb = _mm512_set1_epi32((int)qp[r * (BF_DEPTH / 2) + p]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], as_bh(qb), as_bh(k0));
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], as_bh(qb), as_bh(k1));
        }
    }
    panel_acc_store(R, acc, last, scale, s, s_stride, m0, m1);
}

#ifdef ATTN_DOT_AMX
#include "x86/amx_cfg.h"
#ifdef ATTN_SIMDE_EMU
#include "x86/amx_emu.h"
#endif

/* Every tile is 16 x 64 bytes, so one configuration serves both kernels;
   it is set and released within each call, on whatever thread runs it.
   qk_bf16: 0, 1 scores of keys 0-15, 16-31; 2 q pairs; 3, 4 key pairs.
   pv_bf16: 0-3 16 rows x 64 columns of acc; 4 weight pairs; 5-7 V pairs. */
ATTN_AVX512_INLINE void bf_amx_config(void)
{
    attn_amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++)
        cfg.rows[i] = 16, cfg.colsb[i] = 64;
    _tile_loadconfig(&cfg);
}

/* One tile of sums, C (an immediate), of a 16-row group's 16 keys at sg:
   loaded (or zeroed on the first pass) before, stored after. A whole
   tile moves between s and the tile directly; an edge one (fewer rows or
   keys) through c, masked. */
#define BF_AMX_C_IN(C, sg, sb, R, cols, first, c)                                          \
    do {                                                                                    \
        if (first)                                                                          \
            _tile_zero(C);                                                                  \
        else if ((R) == 16 && (cols) == 16)                                                 \
            _tile_loadd(C, sg, sb);                                                         \
        else {                                                                              \
            for (size_t r_ = 0; r_ < 16; r_++)                                              \
                _mm512_store_ps((c)[r_], r_ < (R) ? _mm512_maskz_loadu_ps(                  \
                                                        attn_mask16(cols),                  \
                                                        (const float *)((const char *)(sg) + \
                                                                        r_ * (sb)))         \
                                                  : _mm512_setzero_ps());                   \
            _tile_loadd(C, c, sizeof(c)[0]);                                                \
        }                                                                                   \
    } while (0)
#define BF_AMX_C_OUT(C, sg, sb, R, cols, c)                                                 \
    do {                                                                                    \
        if ((R) == 16 && (cols) == 16)                                                      \
            _tile_stored(C, sg, sb);                                                        \
        else {                                                                              \
            _tile_stored(C, c, sizeof(c)[0]);                                               \
            for (size_t r_ = 0; r_ < (R); r_++)                                             \
                _mm512_mask_storeu_ps((float *)((char *)(sg) + r_ * (sb)), attn_mask16(cols), \
                                      _mm512_load_ps((c)[r_]));                             \
        }                                                                                   \
    } while (0)

/* qk_bf16 on tiles: the sums go to s by tile stores, from the first
   depth pass to the last, and are scaled there once at the end. */
ATTN_AVX512_INLINE void qk_bf16_amx(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                    ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                    float scale, float *s, ptrdiff_t s_stride)
{
    _Alignas(64) uint32_t panel[BF_DEPTH / 2 * BF_PANEL_KEYS];
    _Alignas(64) uint32_t qp[BF_ROWS * (BF_DEPTH / 2)];
    _Alignas(64) float c[16][16];
    const uintptr_t kb = (uintptr_t)k_stride * unit_bytes(dt);
    const size_t sb = (size_t)s_stride * sizeof *s;
    bf_amx_config();
    /* a 16-row tile reads rows past nr: set once, so they are never
       uninitialised (their sums are not stored; a row of C depends only
       on its own row of A) */
    memset(qp, 0, sizeof qp);
    for (size_t r0 = 0; r0 < nq; r0 += BF_ROWS) {
        const size_t nr = nq - r0 < BF_ROWS ? nq - r0 : BF_ROWS;
        float *const sr = s + (ptrdiff_t)r0 * s_stride;
        for (size_t t0 = 0; t0 < d; t0 += BF_DEPTH) {
            const size_t td = d - t0 < BF_DEPTH ? d - t0 : BF_DEPTH, np = (td + 1) / 2;
            const size_t steps = (np + 15) / 16;
            const int first = t0 == 0;
            bf_pack_queries(q, q_stride, r0, nr, t0, td, qp);
            for (size_t c0 = 0; c0 < nk; c0 += BF_PANEL_KEYS) {
                const size_t nkeys = nk - c0 < BF_PANEL_KEYS ? nk - c0 : BF_PANEL_KEYS;
                bf_pack_keys(dt, row_at(k, c0, kb), kb, nkeys, t0, td, panel);
                /* the unpacked pairs up to a whole step add 0 * 0 */
                memset(panel + np * BF_PANEL_KEYS, 0,
                       (steps * 16 - np) * BF_PANEL_KEYS * sizeof *panel);
                const size_t k0 = nkeys < 16 ? nkeys : 16, k1 = nkeys - k0;
                for (size_t g = 0; g < nr; g += 16) {
                    const size_t R = nr - g < 16 ? nr - g : 16;
                    float *sg = sr + (ptrdiff_t)g * s_stride + (ptrdiff_t)c0;
                    BF_AMX_C_IN(0, sg, sb, R, k0, first, c);
                    if (k1)
                        BF_AMX_C_IN(1, sg + 16, sb, R, k1, first, c);
                    for (size_t st = 0; st < steps; st++) {
                        const uint32_t *pk = panel + st * 16 * BF_PANEL_KEYS;
                        _tile_loadd(2, qp + g * (BF_DEPTH / 2) + st * 16,
                                    BF_DEPTH / 2 * sizeof *qp);
                        _tile_loadd(3, pk, BF_PANEL_KEYS * sizeof *pk);
                        _tile_dpbf16ps(0, 2, 3);
                        if (k1) {
                            _tile_loadd(4, pk + 16, BF_PANEL_KEYS * sizeof *pk);
                            _tile_dpbf16ps(1, 2, 4);
                        }
                    }
                    BF_AMX_C_OUT(0, sg, sb, R, k0, c);
                    if (k1)
                        BF_AMX_C_OUT(1, sg + 16, sb, R, k1, c);
                }
            }
        }
        const __m512 vs = _mm512_set1_ps(scale);
        for (size_t r = 0; r < nr; r++)
            for (size_t j = 0; j < nk; j += 16) {
                const __mmask16 m = attn_mask16(nk - j < 16 ? nk - j : 16);
                float *x = sr + (ptrdiff_t)r * s_stride + (ptrdiff_t)j;
                _mm512_mask_storeu_ps(x, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x), vs));
            }
    }
    _tile_release();
}
#undef BF_AMX_C_IN
#undef BF_AMX_C_OUT
#endif /* ATTN_DOT_AMX */

ATTN_AVX512_INLINE void qk_bf16(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                float *s, ptrdiff_t s_stride)
{
    if (nq < BF_MIN_ROWS) {
        qk_tile(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);
        return;
    }
#ifdef ATTN_DOT_AMX
    qk_bf16_amx(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);
#else
    _Alignas(64) uint32_t panel[BF_DEPTH / 2 * BF_PANEL_KEYS];
    _Alignas(64) uint32_t qp[BF_ROWS * (BF_DEPTH / 2)];
    const uintptr_t kb = (uintptr_t)k_stride * unit_bytes(dt);
    for (size_t r0 = 0; r0 < nq; r0 += BF_ROWS) {
        const size_t nr = nq - r0 < BF_ROWS ? nq - r0 : BF_ROWS;
        for (size_t t0 = 0; t0 < d; t0 += BF_DEPTH) {
            const size_t td = d - t0 < BF_DEPTH ? d - t0 : BF_DEPTH, np = (td + 1) / 2;
            const int first = t0 == 0, last = t0 + td == d;
            bf_pack_queries(q, q_stride, r0, nr, t0, td, qp);
            for (size_t c0 = 0; c0 < nk; c0 += BF_PANEL_KEYS) {
                const size_t nkeys = nk - c0 < BF_PANEL_KEYS ? nk - c0 : BF_PANEL_KEYS;
                const __mmask16 m0 = attn_mask16(nkeys < 16 ? nkeys : 16);
                const __mmask16 m1 = attn_mask16(nkeys > 16 ? nkeys - 16 : 0);
                bf_pack_keys(dt, row_at(k, c0, kb), kb, nkeys, t0, td, panel);
                float *sc = s + (ptrdiff_t)r0 * s_stride + (ptrdiff_t)c0;
                /* each R its own loop, accumulators in registers */
                for (size_t r = 0; r < nr; r += 8) {
                    const uint32_t *qr = qp + r * (BF_DEPTH / 2);
                    float *sr = sc + (ptrdiff_t)r * s_stride;
#define BF_ROWS_CASE(R)                                                                     \
    case R: bf_panel_rows(R, qr, np, panel, m0, m1, first, last, scale, sr, s_stride); break;
                    switch (nr - r < 8 ? nr - r : 8) {
                        BF_ROWS_CASE(1) BF_ROWS_CASE(2) BF_ROWS_CASE(3) BF_ROWS_CASE(4)
                        BF_ROWS_CASE(5) BF_ROWS_CASE(6) BF_ROWS_CASE(7) default: BF_ROWS_CASE(8)
                    }
#undef BF_ROWS_CASE
                }
            }
        }
    }
#endif
}

/* ---- pv_bf16 ---- */

#define PV_KEYS 64
#define PV_COLS 64  /* 8 KiB panel */
#define PV_ROWS 64  /* 8 KiB of rounded weights */

/* vp[i * 64 + col] = (v[2i][j0 + col], v[2i + 1][j0 + col]), zero beyond n
   keys and w columns. */
ATTN_AVX512_INLINE void pv_pack_values(int dt, const void *v, uintptr_t vb, size_t n, size_t j0,
                                       size_t w, uint32_t *vp)
{
    for (size_t i = 0; i < (n + 1) / 2; i++) {
        const unsigned char *r0 = row_at(v, 2 * i, vb);
        const int has1 = 2 * i + 1 < n;
        for (size_t x = 0; x < PV_COLS; x += 16) {
            __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
            if (x < w) {
                const size_t cn = w - x < 16 ? w - x : 16;
                const __mmask16 m = attn_mask16(cn);
                const unsigned char *r1 = row_at(v, 2 * i + 1, vb);
                if (dt == ATTN_KV_BF16) {
                    lo = _mm512_cvtepu16_epi32(
                        _mm256_maskz_loadu_epi16(m, (const uint16_t *)r0 + j0 + x));
                    if (has1)
                        hi = _mm512_cvtepu16_epi32(
                            _mm256_maskz_loadu_epi16(m, (const uint16_t *)r1 + j0 + x));
                } else {
                    lo = bf16_bits(cn == 16 ? load16(dt, r0, j0 + x)
                                            : maskz_load16(dt, m, r0, j0 + x));
                    if (has1)
                        hi = bf16_bits(cn == 16 ? load16(dt, r1, j0 + x)
                                                : maskz_load16(dt, m, r1, j0 + x));
                }
            }
            _mm512_store_si512(vp + i * PV_COLS + x, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

/* Row r's pair i is pp[r * prs + i * pis]; fresh: as pv_block_at
   (src/x86/tile_avx512_tmpl.h). */
ATTN_AVX512_INLINE void pv_bf_rows(size_t R, int fresh, const uint32_t *pp, size_t prs,
                                   size_t pis, size_t np, const uint32_t *vp, size_t w, float *acc,
                                   ptrdiff_t acc_stride)
{
    const size_t nv = (w + 15) / 16;
    const __mmask16 mt = attn_mask16(w - 16 * (nv - 1));
    __m512 a[4][4];
    for (size_t r = 0; r < R; r++)
        for (size_t x = 0; x < 4; x++)
            a[r][x] = x < nv && !fresh
                          ? _mm512_maskz_loadu_ps(x + 1 < nv ? 0xffff : mt,
                                                  acc + (ptrdiff_t)r * acc_stride + 16 * x)
                          : _mm512_setzero_ps();
    for (size_t i = 0; i < np; i++) {
        __m512i vv[4];
        for (size_t x = 0; x < 4; x++)
            vv[x] = _mm512_load_si512(vp + i * PV_COLS + 16 * x);
        for (size_t r = 0; r < R; r++) {
            const __m512i pb = _mm512_set1_epi32((int)pp[r * prs + i * pis]);
            for (size_t x = 0; x < 4; x++)
                a[r][x] = _mm512_dpbf16_ps(a[r][x], as_bh(pb), as_bh(vv[x]));
        }
    }
    for (size_t r = 0; r < R; r++)
        for (size_t x = 0; x < nv; x++)
            _mm512_mask_storeu_ps(
                acc + (ptrdiff_t)r * acc_stride + 16 * x, x + 1 < nv ? 0xffff : mt,
                fresh ? _mm512_add_ps(_mm512_maskz_loadu_ps(x + 1 < nv ? 0xffff : mt,
                                                            acc + (ptrdiff_t)r * acc_stride +
                                                                16 * x),
                                      a[r][x])
                      : a[r][x]);
}

#ifdef ATTN_DOT_AMX
/* pv_bf_rows on tiles for the nr rows of pp, each row's pairs contiguous
   (rows past nr are read, not stored): per group of 16 rows the sums
   start from acc (fresh: from 0, added to acc after), pass through the
   tiles over the np key pairs of vp, and go back to acc's w columns. */
ATTN_AVX512_INLINE void pv_amx_rows(int fresh, const uint32_t *pp, size_t nr, size_t np,
                                    uint32_t *vp, size_t w, float *acc, ptrdiff_t acc_stride)
{
    _Alignas(64) float c[16][PV_COLS];
    const size_t steps = (np + 15) / 16;
    /* pairs np .. 16 * steps were not packed: zero, to add 0 * 0 */
    memset(vp + np * PV_COLS, 0, (steps * 16 - np) * PV_COLS * sizeof *vp);
    const size_t nv = (w + 15) / 16;
    const __mmask16 mt = attn_mask16(w - 16 * (nv - 1));
    const size_t ab = (size_t)acc_stride * sizeof *acc;
    for (size_t r0 = 0; r0 < nr; r0 += 16) {
        const size_t R = nr - r0 < 16 ? nr - r0 : 16;
        float *ar = acc + (ptrdiff_t)r0 * acc_stride;
        /* whole rows of whole tiles move between acc and the tiles
           directly, the rest through c */
        const int direct = R == 16 && w == PV_COLS && !fresh;
        if (direct) {
            _tile_loadd(0, ar, ab);
            _tile_loadd(1, ar + 16, ab);
            _tile_loadd(2, ar + 32, ab);
            _tile_loadd(3, ar + 48, ab);
        } else {
            for (size_t r = 0; r < 16; r++)
                for (size_t x = 0; x < 4; x++)
                    _mm512_store_ps(c[r] + 16 * x,
                                    r < R && x < nv && !fresh
                                        ? _mm512_maskz_loadu_ps(x + 1 < nv ? 0xffff : mt,
                                                                ar + (ptrdiff_t)r * acc_stride +
                                                                    16 * x)
                                        : _mm512_setzero_ps());
            /* tile numbers are instruction immediates: one line per tile */
            _tile_loadd(0, &c[0][0], sizeof c[0]);
            _tile_loadd(1, &c[0][16], sizeof c[0]);
            _tile_loadd(2, &c[0][32], sizeof c[0]);
            _tile_loadd(3, &c[0][48], sizeof c[0]);
        }
        for (size_t k = 0; k < steps; k++) {
            const uint32_t *b = vp + k * 16 * PV_COLS;
            _tile_loadd(4, pp + r0 * (PV_KEYS / 2) + k * 16, PV_KEYS / 2 * sizeof *pp);
            _tile_loadd(5, b, PV_COLS * sizeof *vp);
            _tile_dpbf16ps(0, 4, 5);
            if (nv > 1) {
                _tile_loadd(6, b + 16, PV_COLS * sizeof *vp);
                _tile_dpbf16ps(1, 4, 6);
            }
            if (nv > 2) {
                _tile_loadd(7, b + 32, PV_COLS * sizeof *vp);
                _tile_dpbf16ps(2, 4, 7);
            }
            if (nv > 3) {
                _tile_loadd(5, b + 48, PV_COLS * sizeof *vp);
                _tile_dpbf16ps(3, 4, 5);
            }
        }
        if (direct) {
            _tile_stored(0, ar, ab);
            _tile_stored(1, ar + 16, ab);
            _tile_stored(2, ar + 32, ab);
            _tile_stored(3, ar + 48, ab);
            continue;
        }
        _tile_stored(0, &c[0][0], sizeof c[0]);
        _tile_stored(1, &c[0][16], sizeof c[0]);
        _tile_stored(2, &c[0][32], sizeof c[0]);
        _tile_stored(3, &c[0][48], sizeof c[0]);
        for (size_t r = 0; r < R; r++)
            for (size_t x = 0; x < nv; x++) {
                const __mmask16 m = x + 1 < nv ? 0xffff : mt;
                float *a = ar + (ptrdiff_t)r * acc_stride + 16 * x;
                __m512 y = _mm512_load_ps(c[r] + 16 * x);
                if (fresh)
                    y = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a), y);
                _mm512_mask_storeu_ps(a, m, y);
            }
    }
}

/* P^T's pairs for the tiles, each row's contiguous as P's rows pack:
   pp[r * PV_KEYS / 2 + i] = (p[(c0 + 2i) * p_step + r0 + r], the same of
   key c0 + 2i + 1), 0 past n keys and nr rows; 16 x 16 blocks transposed
   in registers (transpose16x16, src/x86/tile_avx512_tmpl.h). */
ATTN_AVX512_INLINE void pt_amx_pack(const float *p, ptrdiff_t p_step, size_t c0, size_t r0,
                                    size_t n, size_t nr, uint32_t *pp)
{
    const size_t np = (n + 1) / 2;
    for (size_t i0 = 0; i0 < np; i0 += 16)
        for (size_t l0 = 0; l0 < nr; l0 += 16) {
            const __mmask16 m = attn_mask16(nr - l0 < 16 ? nr - l0 : 16);
            __m512 r[16];
            for (size_t x = 0; x < 16; x++) {
                const size_t i = i0 + x;
                const float *k0 = p + (ptrdiff_t)(c0 + 2 * i) * p_step + (ptrdiff_t)(r0 + l0);
                const __m512i lo = i < np ? bf16_bits(_mm512_maskz_loadu_ps(m, k0))
                                          : _mm512_setzero_si512();
                const __m512i hi = 2 * i + 1 < n
                                       ? bf16_bits(_mm512_maskz_loadu_ps(m, k0 + p_step))
                                       : _mm512_setzero_si512();
                r[x] = _mm512_castsi512_ps(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
            }
            transpose16x16(r); /* the pairs move as 32-bit lanes, untouched */
            for (size_t y = 0; y < 16; y++)
                _mm512_store_ps((float *)(pp + (l0 + y) * (PV_KEYS / 2) + i0), r[y]);
        }
}
#endif /* ATTN_DOT_AMX */

/* p_step and fresh as pv_tile_at's. A weight pair is (key 2i, key 2i + 1)
   of one row, packed row-major from P, pair-major from P^T. pt_bf16's keys
   fit one chunk: one chain, as the oracle's. */
_Static_assert(ATTN_MAX_BLOCK_Q <= PV_KEYS, "pt_bf16 sums a call's rows in one chunk");
ATTN_AVX512_INLINE void pv_bf16_at(int dt, int fresh, const float *p, ptrdiff_t p_stride,
                                   ptrdiff_t p_step, const void *v, ptrdiff_t v_stride, size_t nq,
                                   size_t nk, size_t dv, float *acc, ptrdiff_t acc_stride)
{
    if (nq < BF_MIN_ROWS) {
        pv_tile_at(dt, fresh, p, p_stride, p_step, v, v_stride, nq, nk, dv, acc, acc_stride, NULL);
        return;
    }
    _Alignas(64) uint32_t vp[PV_KEYS / 2 * PV_COLS];
    _Alignas(64) uint32_t pp[PV_ROWS * (PV_KEYS / 2)];
    const int rows_major = p_step == 1;
    const size_t prs = rows_major ? PV_KEYS / 2 : 1, pis = rows_major ? 1 : PV_ROWS;
    const uintptr_t vb = (uintptr_t)v_stride * unit_bytes(dt);
#ifdef ATTN_DOT_AMX
    /* the tiles read each row's pairs contiguous: P^T's are transposed
       into that layout as they are packed */
    bf_amx_config();
    memset(pp, 0, sizeof pp); /* as qk_bf16's qp: never uninitialised */
#endif
    for (size_t r0 = 0; r0 < nq; r0 += PV_ROWS) {
        const size_t nr = nq - r0 < PV_ROWS ? nq - r0 : PV_ROWS;
        for (size_t c0 = 0; c0 < nk; c0 += PV_KEYS) {
            const size_t n = nk - c0 < PV_KEYS ? nk - c0 : PV_KEYS, np = (n + 1) / 2;
            if (rows_major) {
                for (size_t r = 0; r < nr; r++) {
                    const unsigned char *pr = (const unsigned char *)(p + (ptrdiff_t)(r0 + r) *
                                                                              p_stride +
                                                                      (ptrdiff_t)c0);
                    for (size_t tb = 0; tb < n; tb += 32)
                        _mm512_store_si512(pp + r * (PV_KEYS / 2) + tb / 2,
                                           pairs32(ATTN_KV_F32, pr, tb, n - tb < 32 ? n - tb : 32));
                }
            } else {
#ifdef ATTN_DOT_AMX
                pt_amx_pack(p, p_step, c0, r0, n, nr, pp);
#else
                /* 16 rows' weights of a key in one vector */
                for (size_t i = 0; i < np; i++) {
                    const float *k0 = p + (ptrdiff_t)(c0 + 2 * i) * p_step + (ptrdiff_t)r0;
                    const int has1 = 2 * i + 1 < n;
                    for (size_t l = 0; l < nr; l += 16) {
                        const __mmask16 m = attn_mask16(nr - l < 16 ? nr - l : 16);
                        const __m512i lo = bf16_bits(_mm512_maskz_loadu_ps(m, k0 + l));
                        const __m512i hi =
                            has1 ? bf16_bits(_mm512_maskz_loadu_ps(m, k0 + p_step + l))
                                 : _mm512_setzero_si512();
                        _mm512_store_si512(pp + i * PV_ROWS + l,
                                           _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
                    }
                }
#endif
            }
            for (size_t j0 = 0; j0 < dv; j0 += PV_COLS) {
                const size_t w = dv - j0 < PV_COLS ? dv - j0 : PV_COLS;
                pv_pack_values(dt, row_at(v, c0, vb), vb, n, j0, w, vp);
                float *ac = acc + (ptrdiff_t)r0 * acc_stride + (ptrdiff_t)j0;
#ifdef ATTN_DOT_AMX
                pv_amx_rows(fresh, pp, nr, np, vp, w, ac, acc_stride);
                continue;
#endif
                for (size_t r = 0; r < nr; r += 4) {
                    const uint32_t *pr = pp + r * prs;
                    float *ar = ac + (ptrdiff_t)r * acc_stride;
                    switch (nr - r < 4 ? nr - r : 4) {
                    case 1: pv_bf_rows(1, fresh, pr, prs, pis, np, vp, w, ar, acc_stride); break;
                    case 2: pv_bf_rows(2, fresh, pr, prs, pis, np, vp, w, ar, acc_stride); break;
                    case 3: pv_bf_rows(3, fresh, pr, prs, pis, np, vp, w, ar, acc_stride); break;
                    default: pv_bf_rows(4, fresh, pr, prs, pis, np, vp, w, ar, acc_stride); break;
                    }
                }
            }
        }
    }
#ifdef ATTN_DOT_AMX
    _tile_release();
#endif
}

ATTN_AVX512_INLINE void pv_bf16(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv, float *acc,
                                ptrdiff_t acc_stride)
{
    pv_bf16_at(dt, 0, p, p_stride, 1, v, v_stride, nq, nk, dv, acc, acc_stride);
}

/* acc += P^T X, summed as pt_tile (src/dsp.h). */
ATTN_AVX512_INLINE void pt_bf16(const float *p, ptrdiff_t p_stride, const float *x,
                                ptrdiff_t x_stride, size_t nq, size_t nk, size_t dim, float *acc,
                                ptrdiff_t acc_stride)
{
    pv_bf16_at(ATTN_KV_F32, 1, p, 1, p_stride, x, x_stride, nk, nq, dim, acc, acc_stride);
}


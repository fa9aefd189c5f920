/* SPDX-License-Identifier: MIT */
/*
 * The dot-product Q.K^T path above a body's micro-kernel, once for every
 * vector width: each group one qk_micro_at at a constant R x C, so that the
 * micro-kernel unrolls for it.
 *
 * The including body defines first: ALWAYS_INLINE, QK_ROWS and QK_KEYS (at
 * most ATTN_TAIL_MAX), ATTN_E4M3_FINITE, unit_bytes, row_bytes, row_at,
 *   qk_micro_at(dtype, R, C, q, q_stride, k, kb, d, scale, s, s_stride, gs, kc)
 *       R x C scores of rows q.. against keys k.. (kb bytes apart); gs: the
 *       keys' scale groups (qk_grp), kc their first key's index, else NULL
 *   QK_PREFETCH_AHEAD(nq, bytes)
 *       how many key rows ahead to prefetch for an nq-row tile (0: none)
 */

static ALWAYS_INLINE void qk_micro(int dtype, size_t R, size_t C, const float *q,
                                   ptrdiff_t q_stride, const unsigned char *k, uintptr_t kb,
                                   size_t d, float scale, float *s, ptrdiff_t s_stride,
                                   const attn_grp *gs, size_t kc)
{
#define QK_MICRO_AT(t) qk_micro_at(t, R, C, q, q_stride, k, kb, d, scale, s, s_stride, gs, kc)
    ATTN_E4M3_SCANNED(dtype, k, (ptrdiff_t)kb, C, d, QK_MICRO_AT);
#undef QK_MICRO_AT
}

static ALWAYS_INLINE void qk_rows(int dtype, size_t C, const float *q, ptrdiff_t q_stride,
                                  const unsigned char *k, uintptr_t kb, size_t nq, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride, const attn_grp *gs,
                                  size_t kc)
{
    size_t r = 0;
    for (; r + QK_ROWS <= nq; r += QK_ROWS)
        qk_micro(dtype, QK_ROWS, C, q + (ptrdiff_t)r * q_stride, q_stride, k, kb, d, scale,
                 s + (ptrdiff_t)r * s_stride, s_stride, gs, kc);
    const float *qr = q + (ptrdiff_t)r * q_stride;
    float *sr = s + (ptrdiff_t)r * s_stride;
#define QK_ROWS_TAIL(n) qk_micro(dtype, n, C, qr, q_stride, k, kb, d, scale, sr, s_stride, gs, kc)
    ATTN_TAIL(nq - r, QK_ROWS, QK_ROWS_TAIL);
#undef QK_ROWS_TAIL
}

/* Keys outermost: a group of k rows stays in L1 while every query row
   passes over it. */
static ALWAYS_INLINE void qk_tile_dot(int dtype, const float *q, ptrdiff_t q_stride, const void *k,
                                      ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                      float scale, float *s, ptrdiff_t s_stride, const attn_grp *gs)
{
    const size_t unit = unit_bytes(dtype), bytes = row_bytes(dtype, d);
    const uintptr_t kb = (uintptr_t)k_stride * unit;
    const size_t ahead = QK_PREFETCH_AHEAD(nq, bytes);
    size_t c = 0;
    for (; c + QK_KEYS <= nk; c += QK_KEYS) {
        if (ahead)
            attn_prefetch_rows(k, c + ahead, k_stride, unit, QK_KEYS, bytes);
        qk_rows(dtype, QK_KEYS, q, q_stride, row_at(k, c, kb), kb, nq, d, scale, s + c,
                s_stride, gs, c);
    }
    const unsigned char *kc = row_at(k, c, kb);
#define QK_KEYS_TAIL(n) qk_rows(dtype, n, q, q_stride, kc, kb, nq, d, scale, s + c, s_stride, gs, c)
    ATTN_TAIL(nk - c, QK_KEYS, QK_KEYS_TAIL);
#undef QK_KEYS_TAIL
}

/* FP8 scale groups (src/dsp.h), scaled where loaded. */
static ALWAYS_INLINE void qk_grp(int dtype, const float *q, ptrdiff_t q_stride, const void *k,
                                 ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale,
                                 float *s, ptrdiff_t s_stride, const attn_grp *gs)
{
    qk_tile_dot(dtype, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride, gs);
}

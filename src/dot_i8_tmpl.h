/* SPDX-License-Identifier: MIT */
/*
 * The int8 mode's qk_i8 driver, once for every ISA's micro-kernel: q
 * quantized once per pass of rows, keys packed in chunks; partial sums wait
 * in s between chunks, so the chunking never changes the bits.
 *
 * The including file defines, and includes this after its micro-kernel:
 * I8_INLINE, I8_KEYS and I8_BLOCKS (SVE: expressions of the vector length),
 * I8_ROWS (at most ATTN_TAIL_MAX - 1), I8_PANEL_WORDS, I8_SCALE_WORDS,
 * I8_ALIGN, unit_bytes, row_bytes, row_at and
 *   i8_quantize(x, b)        32 values of q into one attn_q8_block
 *   i8_pack(dt, k, kb, nkeys, b0, nb, kp, ks)
 *                            blocks b0 .. b0 + nb of nkeys keys into the panel
 *   i8_rows(dt, R, x, q_blocks, kp, ks, nb, s, s_stride, nkeys, first, last, scale)
 *                            R rows' sums over the panel's nb blocks into s
 *                            (first: s starts at 0; last: times scale)
 * A kernel whose rows go in groups of a size known at run time (AMX tiles)
 * defines I8_GROUPED and
 *   i8_group(rows_per_pass)  the rows of a group, at most rows_per_pass; the
 *                            passes then hold whole groups and qb is zeroed
 *                            once, so a group's rows past nq are defined
 *   i8_begin(group), i8_end()   around the call
 * and i8_rows takes any R up to a group.
 */
#ifndef ATTN_DOT_I8_TMPL_H
#define ATTN_DOT_I8_TMPL_H

/* 10 KiB of quantized query, within ATTN_TASK_STACK_BYTES */
#define I8_QBLOCKS 256
_Static_assert(ATTN_MAX_HEAD_DIM / ATTN_QBLOCK <= I8_QBLOCKS, "a query row must fit one pass");

I8_INLINE void qk_i8(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                     ptrdiff_t k_stride, size_t nq, size_t nk, size_t d, float scale, float *s,
                     ptrdiff_t s_stride)
{
    _Alignas(I8_ALIGN) uint32_t kp[I8_PANEL_WORDS];
    _Alignas(I8_ALIGN) float ks[I8_SCALE_WORDS];
    attn_q8_block qb[I8_QBLOCKS];
    const size_t keys = I8_KEYS, blocks = I8_BLOCKS;
    const size_t nb = d / ATTN_QBLOCK;
    const size_t unit = unit_bytes(dt), bytes = row_bytes(dt, d);
    const uintptr_t kb = (uintptr_t)k_stride * unit;
    size_t rows_per_pass = nb <= I8_QBLOCKS ? I8_QBLOCKS / nb : 1;
#ifdef I8_GROUPED
    const size_t group = i8_group(rows_per_pass);
    rows_per_pass -= rows_per_pass % group;
    memset(qb, 0, sizeof qb);
    i8_begin(group);
#else
    const size_t group = I8_ROWS;
#endif
    const size_t ahead = attn_prefetch_rows_ahead(bytes);
    for (size_t r0 = 0; r0 < nq; r0 += rows_per_pass) {
        const size_t nr = nq - r0 < rows_per_pass ? nq - r0 : rows_per_pass;
        for (size_t r = 0; r < nr; r++)
            for (size_t b = 0; b < nb; b++)
                i8_quantize(q + (ptrdiff_t)(r0 + r) * q_stride + (ptrdiff_t)(b * ATTN_QBLOCK),
                            &qb[r * nb + b]);
        for (size_t c0 = 0; c0 < nk; c0 += keys) {
            const size_t nkeys = nk - c0 < keys ? nk - c0 : keys;
            if (r0 == 0)
                attn_prefetch_rows(k, c0 + ahead, k_stride, unit, keys, bytes);
            for (size_t bc = 0; bc < nb; bc += blocks) {
                const size_t nbc = nb - bc < blocks ? nb - bc : blocks;
                const int first = bc == 0, last = bc + nbc == nb;
                i8_pack(dt, row_at(k, c0, kb), kb, nkeys, bc, nbc, kp, ks);
                for (size_t r = 0; r < nr; r += group) {
                    float *sr = s + (ptrdiff_t)(r0 + r) * s_stride + (ptrdiff_t)c0;
                    const attn_q8_block *x = qb + r * nb + bc;
                    const size_t R = nr - r < group ? nr - r : group;
#define I8_ROWS_AT(n) i8_rows(dt, n, x, nb, kp, ks, nbc, sr, s_stride, nkeys, first, last, scale)
#ifdef I8_GROUPED
                    I8_ROWS_AT(R);
#else
                    ATTN_TAIL(R, I8_ROWS + 1, I8_ROWS_AT);
#endif
#undef I8_ROWS_AT
                }
            }
        }
    }
#ifdef I8_GROUPED
    i8_end();
#endif
}

#endif /* ATTN_DOT_I8_TMPL_H */

/* SPDX-License-Identifier: MIT */
/*
 * Software prefetch for the few-row tile paths (decode, small GQA groups,
 * speculative decoding): one place for the distance, shared by every ISA.
 *
 * Why: with few query rows a K or V row is used once and the arithmetic per
 * byte is small, so without help a core alternates between waiting for
 * memory and computing, and the hardware prefetchers alone leave it well
 * above the time of a plain read of the same bytes. Asking for the rows a
 * fixed number of bytes ahead keeps the memory system busy while the FMAs
 * run; 8 KiB was the best of 4, 8 and 16 KiB for f32 and f16 alike
 * (docs/PERFORMANCE.md).
 *
 * A prefetch is a hint: it never faults and architecturally reads nothing,
 * so asking beyond the last row a kernel was given (the next block, or past
 * the end of the cache) is harmless.
 */
#ifndef ATTN_PREFETCH_H
#define ATTN_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#define ATTN_PREFETCH_BYTES 8192

/* Rows to prefetch ahead for rows of `row_bytes` bytes (at least 1). */
static inline size_t attn_prefetch_rows_ahead(size_t row_bytes)
{
    return (ATTN_PREFETCH_BYTES + row_bytes - 1) / row_bytes;
}

/*
 * Prefetches `rows` rows of `row_bytes` bytes, from row `first` of an array
 * whose rows lie `stride` elements of `esize` bytes apart. The addresses are
 * formed in unsigned arithmetic: rows past the tensor's last one may lie
 * beyond ptrdiff_t (a dimension of extent 1 may carry any stride, attn.h),
 * and a wrapped address is as harmless to a hint as any other.
 */
static inline __attribute__((always_inline)) void
attn_prefetch_rows(const void *base, size_t first, ptrdiff_t stride, size_t esize, size_t rows,
                   size_t row_bytes)
{
    const uintptr_t step = (uintptr_t)stride * (uintptr_t)esize;
    uintptr_t p = (uintptr_t)base + (uintptr_t)first * step;
    for (size_t r = 0; r < rows; r++, p += step)
        for (size_t o = 0; o < row_bytes; o += 64)
            __builtin_prefetch((const void *)(p + o), 0, 3);
}

#endif /* ATTN_PREFETCH_H */

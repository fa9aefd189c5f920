/* SPDX-License-Identifier: MIT */
/*
 * Software prefetch for the few-row tile paths, one distance for every ISA.
 * With few rows each K or V row is used once for little arithmetic, and the
 * hardware prefetchers alone leave a core waiting on memory; asking a fixed
 * distance ahead keeps memory busy while the FMAs run (docs/PERFORMANCE.md
 * has the measured choice). A prefetch never faults and reads nothing, so
 * asking beyond the last row a kernel was given is harmless.
 */
#ifndef ATTN_PREFETCH_H
#define ATTN_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#define ATTN_PREFETCH_BYTES 8192

/* at least 1 */
static inline size_t attn_prefetch_rows_ahead(size_t row_bytes)
{
    return (ATTN_PREFETCH_BYTES + row_bytes - 1) / row_bytes;
}

/* Unsigned address arithmetic: rows past the tensor's last may lie beyond
   ptrdiff_t (a dimension of extent 1 may carry any stride, attn.h), and a
   wrapped address is as harmless to a hint as any other. */
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

/*
 * "Where is key j of sequence b": the one place the drivers ask it. A task
 * opens a kv_src for its (batch entry, KV head) and walks key ranges as runs
 * of rows that lie at one row stride, so masks, tiling and the online softmax
 * never learn how the cache is laid out. Today every layout is one strided
 * run per range; a layout that scatters keys (pages, say) returns shorter
 * runs here and nothing else changes.
 */
#ifndef ATTN_KV_H
#define ATTN_KV_H

#include "driver.h"

typedef struct kv_src {
    const char *base;   /* row 0 of this (batch entry, KV head) */
    ptrdiff_t stride;   /* stride units between consecutive rows of a run */
    size_t esize;       /* bytes per stride unit: an element, or a block of
                           32 values for Q8_0/Q4_0 (problem.h) */
} kv_src;

static inline kv_src attn_kv_open(const attn_tensor *t, int64_t b, int64_t kv_head)
{
    kv_src s;
    s.base = (const char *)attn_row_ptr(t, b, kv_head, 0);
    s.stride = (ptrdiff_t)t->row_stride;
    s.esize = attn_dtype_size(t->dtype);
    return s;
}

/* Rows j.. of the run starting at key j, with *n (>= 1, <= end - j) rows in it. */
static inline const void *attn_kv_run(const kv_src *s, int64_t j, int64_t end, int64_t *n)
{
    *n = end - j;
    return s->base + (ptrdiff_t)j * s->stride * (ptrdiff_t)s->esize;
}

#endif /* ATTN_KV_H */

/* SPDX-License-Identifier: MIT */
/*
 * "Where is key j of sequence b": the one place the drivers ask it. A task
 * opens a kv_src for its (batch entry, KV head) and walks key ranges as runs
 * of rows that lie at one row stride, so masks, tiling and the online softmax
 * never learn how the cache is laid out. A dense cache is one strided run per
 * range; a paged cache (attn.h, "Paged K/V") is one run per page, or per
 * stretch of pages whose pool blocks follow each other in memory.
 *
 * Positions j are those of row_ref (kv_offset included). The drivers only
 * ask for positions some row of the task may see, which validation checked
 * against the block table, so every table entry read here is in the pool.
 */
#ifndef ATTN_KV_H
#define ATTN_KV_H

#include "driver.h"

typedef struct kv_src {
    const char *base;      /* dense: position 0 of (batch entry, KV head);
                              paged: slot 0 of pool block 0 of the KV head */
    ptrdiff_t stride;      /* stride units between consecutive rows of a run */
    size_t esize;          /* bytes per stride unit: an element, or a block of
                              32 values for Q8_0/Q4_0 (problem.h) */
    const int32_t *table;  /* paged: the sequence's row of the block table; dense: NULL */
    int64_t block_size;    /* paged: positions per block */
    ptrdiff_t block_step;  /* paged: stride units between consecutive pool blocks */
    int blocks_adjoin;     /* paged: block n + 1 starts where block n ends */
    size_t row_bytes;      /* bytes of one row (cols values) */
    /* shared prefixes (attn.h): positions below own_from are another
       sequence's keys, found from these (own_from 0 without sharing) */
    int64_t own_from;
    const attn_problem *pb;
    const attn_tensor *t;
    int64_t b, kv_head, cols;
} kv_src;

/* `cols`: the row length of t (head_dim for K, v_dim for V). */
static inline kv_src attn_kv_open(const attn_problem *pb, const attn_tensor *t, int64_t b,
                                  int64_t kv_head, int64_t cols)
{
    kv_src s;
    s.row_bytes = (size_t)(cols / attn_dtype_block(t->dtype)) * attn_dtype_size(t->dtype);
    s.stride = (ptrdiff_t)t->row_stride;
    s.esize = attn_dtype_size(t->dtype);
    s.table = NULL;
    s.block_size = 0;
    s.block_step = 0;
    s.blocks_adjoin = 0;
    s.own_from = 0;
    s.pb = pb;
    s.t = t;
    s.b = b;
    s.kv_head = kv_head;
    s.cols = cols;
    if (pb->opt.shared_prefix)
        s.own_from = (pb->kv_offsets ? pb->kv_offsets[b] : 0) + pb->opt.shared_prefix[b];
    if (pb->block_table) {
        s.base = (const char *)t->data + kv_head * t->head_stride * (int64_t)s.esize;
        s.table = pb->block_table + b * pb->block_table_stride;
        s.block_size = pb->block_size;
        s.block_step = (ptrdiff_t)t->batch_stride;
        s.blocks_adjoin = t->batch_stride == pb->block_size * t->row_stride;
    } else {
        s.base = (const char *)attn_row_ptr(t, b, kv_head, 0);
    }
    return s;
}

static inline const void *attn_kv_run(const kv_src *s, int64_t j, int64_t end, int64_t *n);

/* Key j (a position of s's sequence) below own_from: the same key of the
   sequence before it, or of the one before that while it is shared too,
   as a run that stops where the key stops being shared. */
static inline const void *attn_kv_run_shared(const kv_src *s, int64_t j, int64_t end, int64_t *n)
{
    const attn_problem *pb = s->pb;
    const int32_t *shared = pb->opt.shared_prefix;
    const int64_t t = j - (pb->kv_offsets ? pb->kv_offsets[s->b] : 0);
    int64_t lim = attn_min64(end - j, shared[s->b] - t), c = s->b - 1;
    for (; t < shared[c]; c--) /* shared[0] is 0: the walk ends */
        lim = attn_min64(lim, shared[c] - t);
    const kv_src o = attn_kv_open(pb, s->t, c, s->kv_head, s->cols);
    const int64_t p = (pb->kv_offsets ? pb->kv_offsets[c] : 0) + t;
    return attn_kv_run(&o, p, p + lim, n);
}

/* Rows j.. of the run starting at key j, with *n (>= 1, <= end - j) rows in it. */
static inline const void *attn_kv_run(const kv_src *s, int64_t j, int64_t end, int64_t *n)
{
    if (j < s->own_from)
        return attn_kv_run_shared(s, j, end, n);
    if (!s->table) {
        *n = end - j;
        return s->base + (ptrdiff_t)j * s->stride * (ptrdiff_t)s->esize;
    }
    int64_t page = j / s->block_size;
    const int64_t slot = j - page * s->block_size;
    const int32_t block = s->table[page];
    int64_t len = attn_min64(end - j, s->block_size - slot);
    /* Pages whose blocks follow each other in the pool (a freshly allocated
       cache, block size 1 included) form one run: the kernels see long runs
       wherever the memory allows it. */
    if (s->blocks_adjoin)
        for (int64_t next = block; j + len < end && s->table[page + 1] == ++next; page++)
            len += attn_min64(end - j - len, s->block_size);
    *n = len;
    /* A shuffled table breaks the stride the hardware prefetchers follow:
       ask for the next page of this walk while the kernels use this one. */
    if (j + len < end) {
        const int32_t next = s->table[page + 1];
        const char *at = s->base + (ptrdiff_t)next * s->block_step * (ptrdiff_t)s->esize;
        const int64_t rows = attn_min64(end - j - len, s->block_size);
        for (int64_t r = 0; r < rows; r++, at += s->stride * (ptrdiff_t)s->esize)
            for (size_t c = 0; c < s->row_bytes; c += 64)
                __builtin_prefetch(at + c, 0, 3);
    }
    const ptrdiff_t row = (ptrdiff_t)block * s->block_step + (ptrdiff_t)slot * s->stride;
    return s->base + row * (ptrdiff_t)s->esize;
}

/* The tail of the key rows (attn.h 1.9), opened like k; k's own view when
   absent (never read then: attn_kv_rows takes NULL). */
static inline kv_src attn_kv_open_tail(const attn_problem *pb, int64_t b, int64_t kv_head)
{
    return attn_kv_open(pb, pb->k_tail.data ? &pb->k_tail : &pb->k, b, kv_head,
                        pb->k_tail_dim ? pb->k_tail_dim : attn_k_cols(pb));
}

/* The FP8 scale view of k or v (attn.h 1.6 and 1.8), opened like its cache
   with one column per row or one per group; k's own view when absent
   (never read then). */
static inline kv_src attn_kv_open_scales(const attn_problem *pb, const attn_tensor *t,
                                         int64_t group, int64_t dim, int64_t b, int64_t kv_head)
{
    return attn_kv_open(pb, t->data ? t : &pb->k, b, kv_head,
                        t->data ? attn_scale_cols(group, dim) : pb->head_dim);
}

/*
 * FP8 scales per key row (attn.h 1.6): fac[j - kb] = mul * the scale of key
 * j, for keys [kb, ke) (at most ATTN_MAX_BLOCK_K of them), read through sc,
 * the scale view opened like its cache (attn_kv_open with one column, or
 * one per channel group, 1.8: c picks the group), so offsets, pages and
 * shared prefixes find a key's scale where they find its row.
 */
static inline void attn_kv_scales(const kv_src *sc, int64_t kb, int64_t ke, int64_t c, float mul,
                                  float *fac)
{
    for (int64_t j = kb, len; j < ke; j += len) {
        const float *p = (const float *)attn_kv_run(sc, j, ke, &len) + c;
        for (int64_t i = 0; i < len; i++)
            fac[j - kb + i] = mul * p[i * sc->stride];
    }
}

/*
 * The rows of keys [j, j + n) of src decoded to f32 into dst (rows
 * dst_stride floats apart): with FP8 scales per group of channels (attn.h
 * 1.8, g > 0) channels [c g, c g + g) of each times scale c of its row,
 * read through sc, the scale view opened like its cache with src->cols / g
 * columns; with a tail (1.9, tail not NULL) the tail's tail->cols values
 * after src's src->cols. The F32 kernels then read dst as they read an F32
 * cache: one rounding per scaled value, fl32(fp8 * scale), every other
 * value exact, and the call is the F32 call on those values.
 */
static inline void attn_kv_stage(const attn_dsp *dsp, const kv_src *src, const kv_src *sc,
                                 int64_t g, const kv_src *tail, int64_t j, int64_t n, float *dst,
                                 ptrdiff_t dst_stride)
{
    attn_to_f32_scaled_fn *const decode = dsp->to_f32_scaled[src->t->dtype];
    attn_to_f32_fn *const plain = dsp->to_f32[src->t->dtype];
    const ptrdiff_t step = src->stride * (ptrdiff_t)src->esize;
    for (int64_t end = j + n, len, slen; j < end; j += len, dst += len * dst_stride) {
        /* the views' pages may adjoin differently: runs as long as all agree */
        const char *rows = attn_kv_run(src, j, end, &len);
        const float *sf = NULL;
        const char *tr = NULL;
        if (g) {
            sf = (const float *)attn_kv_run(sc, j, end, &slen);
            len = attn_min64(len, slen);
        }
        if (tail) {
            tr = (const char *)attn_kv_run(tail, j, end, &slen);
            len = attn_min64(len, slen);
        }
        if (g)
            decode(rows, step, (size_t)len, (size_t)src->cols, sf, sc->stride, (size_t)g, dst,
                   dst_stride);
        else
            for (int64_t r = 0; r < len; r++)
                plain(rows + r * step, dst + r * dst_stride, (size_t)src->cols);
        if (tail) {
            attn_to_f32_fn *const widen = dsp->to_f32[tail->t->dtype];
            const ptrdiff_t tstep = tail->stride * (ptrdiff_t)tail->esize;
            for (int64_t r = 0; r < len; r++)
                widen(tr + r * tstep, dst + r * dst_stride + src->cols, (size_t)tail->cols);
        }
    }
}

/* Rows j.. (before end) of K or V as the kernels read them: the cache's
   run (attn_kv_run), or for an FP8 cache with scale groups (g > 0) or key
   rows with a tail (not NULL) at most p->stage_keys of them decoded into
   the stage. *n: the rows, *stride: their stride in the kernels' units. */
static inline const void *attn_kv_rows(const attn_dsp *dsp, const kv_src *src, const kv_src *sc,
                                       int64_t g, const kv_src *tail, float *stage,
                                       const task_plan *p, int64_t j, int64_t end, int64_t *n,
                                       ptrdiff_t *stride)
{
    if (!g && !tail) {
        *stride = src->stride;
        return attn_kv_run(src, j, end, n);
    }
    *n = attn_min64(p->stage_keys, end - j);
    *stride = (ptrdiff_t)p->stage_stride;
    attn_kv_stage(dsp, src, sc, g, tail, j, *n, stage, *stride);
    return stage;
}

/* Columns [0, n) of rows [0, nr) of s (rows s_stride apart) times fac. */
static inline void attn_scale_columns(float *s, int64_t s_stride, int64_t nr, const float *fac,
                                      int64_t n)
{
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < n; c++)
            s[r * s_stride + c] *= fac[c];
}

#endif /* ATTN_KV_H */

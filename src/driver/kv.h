/* SPDX-License-Identifier: MIT */
/*
 * "Where is key j of sequence b": the one place the drivers ask it, as runs
 * of rows at one stride, so nothing else learns the cache's layout. The
 * drivers ask only for positions some row of the task may see, which
 * validation checked against the block table: every entry read here is in
 * the pool.
 */
#ifndef ATTN_KV_H
#define ATTN_KV_H

#include "driver.h"

typedef struct kv_src {
    const char *base;      /* paged: slot 0 of pool block 0 of the KV head */
    ptrdiff_t stride;      /* in stride units */
    size_t esize;          /* bytes per stride unit */
    const int32_t *table;  /* paged: the sequence's row of the block table; dense: NULL */
    int64_t block_size;
    ptrdiff_t block_step;  /* paged: stride units between consecutive pool blocks */
    int blocks_adjoin;     /* paged: block n + 1 starts where block n ends */
    size_t row_bytes;
    /* positions below own_from are a shared prefix's, another sequence's */
    int64_t own_from;
    const attn_problem *pb;
    const attn_tensor *t;
    int64_t b, kv_head, cols, group;
} kv_src;

/* cols: the row length of t; group: an ASYM t's (pb->k_group, v_group) */
static inline kv_src attn_kv_open(const attn_problem *pb, const attn_tensor *t, int64_t b,
                                  int64_t kv_head, int64_t cols, int64_t group)
{
    kv_src s;
    s.row_bytes = (size_t)attn_kv_row_units(t->dtype, cols, group) * attn_dtype_size(t->dtype);
    s.group = group;
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

/* Below own_from: the key of the sequence that owns it, as a run that stops
   where the key stops being shared. */
static inline const void *attn_kv_run_shared(const kv_src *s, int64_t j, int64_t end, int64_t *n)
{
    const attn_problem *pb = s->pb;
    const int32_t *shared = pb->opt.shared_prefix;
    const int64_t t = j - (pb->kv_offsets ? pb->kv_offsets[s->b] : 0);
    int64_t lim = attn_min64(end - j, shared[s->b] - t), c = s->b - 1;
    for (; t < shared[c]; c--) /* shared[0] is 0 */
        lim = attn_min64(lim, shared[c] - t);
    const kv_src o = attn_kv_open(pb, s->t, c, s->kv_head, s->cols, s->group);
    const int64_t p = (pb->kv_offsets ? pb->kv_offsets[c] : 0) + t;
    return attn_kv_run(&o, p, p + lim, n);
}

/* *n: rows in the run, >= 1, <= end - j */
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
    /* adjoining pool blocks form one run: long runs wherever memory allows */
    if (s->blocks_adjoin)
        for (int64_t next = block; j + len < end && s->table[page + 1] == ++next; page++)
            len += attn_min64(end - j - len, s->block_size);
    *n = len;
    /* a shuffled table breaks the hardware prefetchers' stride */
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

/* k's own view when absent (never read then). */
static inline kv_src attn_kv_open_tail(const attn_problem *pb, int64_t b, int64_t kv_head)
{
    return attn_kv_open(pb, pb->k_tail.data ? &pb->k_tail : &pb->k, b, kv_head,
                        pb->k_tail_dim ? pb->k_tail_dim : attn_k_cols(pb), 0);
}

/* Opened like its cache, so offsets, pages and shared prefixes find a key's
   scale where they find its row; k's own view when absent (never read). */
static inline kv_src attn_kv_open_scales(const attn_problem *pb, const attn_tensor *t,
                                         int64_t group, int64_t dim, int64_t b, int64_t kv_head)
{
    return attn_kv_open(pb, t->data ? t : &pb->k, b, kv_head,
                        t->data ? attn_scale_cols(group, dim) : attn_k_cols(pb), pb->k_group);
}

/* fac[j - kb] = mul * key j's scale (column c: the group), at most
   ATTN_MAX_BLOCK_K keys. */
static inline void attn_kv_scales(const kv_src *sc, int64_t kb, int64_t ke, int64_t c, float mul,
                                  float *fac)
{
    for (int64_t j = kb, len; j < ke; j += len) {
        const float *p = (const float *)attn_kv_run(sc, j, ke, &len) + c;
        for (int64_t i = 0; i < len; i++)
            fac[j - kb + i] = mul * p[i * sc->stride];
    }
}

/* Rows decoded to f32, scale groups applied (g > 0), the tail after src's
   columns: one rounding per scaled value, every other value exact, so the
   call is the F32 call on those values. */
static inline void attn_kv_stage(const attn_dsp *dsp, const kv_src *src, const kv_src *sc,
                                 int64_t g, const kv_src *tail, int64_t j, int64_t n, float *dst,
                                 ptrdiff_t dst_stride)
{
    attn_to_f32_scaled_fn *const decode = dsp->to_f32_scaled[src->t->dtype];
    attn_to_f32_fn *const plain = dsp->to_f32[src->t->dtype];
    const ptrdiff_t step = src->stride * (ptrdiff_t)src->esize;
    for (int64_t end = j + n, len, slen; j < end; j += len, dst += len * dst_stride) {
        /* the views' pages may adjoin differently */
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

/* The cache's run, or with scale groups or a tail at most p->stage_keys
   rows decoded into the stage; *stride in the kernels' units. */
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

static inline void attn_scale_columns(float *s, int64_t s_stride, int64_t nr, const float *fac,
                                      int64_t n)
{
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < n; c++)
            s[r * s_stride + c] *= fac[c];
}

#endif /* ATTN_KV_H */

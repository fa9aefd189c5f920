/* SPDX-License-Identifier: MIT */
/* Offset, packed and paged layouts copied into dense problems (ref_kv.h). */
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "ref_kv.h"

static void *zalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p)
        abort();
    return p;
}

static int64_t seq_len(const int32_t *lens, int64_t b, int64_t full)
{
    return lens ? lens[b] : full;
}

const void *ref_kv_at(const attn_tensor *t, const attn_options *opt, int64_t b, int64_t kv_head,
                      int64_t p)
{
    if (!opt->block_table)
        return ref_tensor_at(t, b, kv_head, p, 0);
    const int32_t block =
        opt->block_table[b * opt->block_table_stride + p / opt->block_size];
    return ref_tensor_at(t, block, kv_head, p % opt->block_size, 0);
}

/* A dense [batch][heads][rows][cols] tensor of `dtype`. */
static attn_tensor dense_tensor(void **mem, int32_t dtype, int64_t batch, int64_t heads,
                                int64_t rows, int64_t cols)
{
    *mem = zalloc((size_t)(batch * heads * rows * cols) * ref_dtype_size(dtype));
    attn_tensor t = {*mem, dtype, heads * rows * cols, rows * cols, cols};
    return t;
}

/* Is key j of sequence b seen by some query, by padding, causal and window? */
static int key_seen(const attn_shape *shape, const attn_options *opt, int64_t b, int64_t j)
{
    attn_options geometry = *opt;
    geometry.mask = NULL;
    const int64_t lq = seq_len(opt->q_lens, b, shape->q_len);
    for (int64_t i = 0; i < lq; i++)
        if (ref_visible(shape, &geometry, b, 0, i, j))
            return 1;
    return 0;
}

void ref_dense_make(ref_dense *d, const attn_shape *shape, const attn_options *opt,
                    const attn_tensor *q, const attn_tensor *k, const attn_tensor *v)
{
    memset(d, 0, sizeof *d);
    const int64_t B = shape->batch, dv = shape->v_dim ? shape->v_dim : shape->head_dim;
    d->q_lens = zalloc((size_t)B * sizeof(int32_t));
    d->kv_lens = zalloc((size_t)B * sizeof(int32_t));
    int64_t lq_max = 1, lk_max = 1;
    for (int64_t b = 0; b < B; b++) {
        d->q_lens[b] = (int32_t)seq_len(opt->q_lens, b, shape->q_len);
        d->kv_lens[b] = (int32_t)seq_len(opt->kv_lens, b, shape->kv_len);
        lq_max = d->q_lens[b] > lq_max ? d->q_lens[b] : lq_max;
        lk_max = d->kv_lens[b] > lk_max ? d->kv_lens[b] : lk_max;
    }
    d->shape = *shape;
    d->shape.q_len = lq_max;
    d->shape.kv_len = lk_max;
    d->opt = *opt;
    d->opt.struct_size = sizeof d->opt;
    d->opt.q_lens = d->q_lens;
    d->opt.kv_lens = d->kv_lens;
    d->opt.q_offsets = d->opt.kv_offsets = NULL;
    d->opt.block_table = NULL;
    d->opt.block_table_stride = d->opt.block_size = d->opt.num_blocks = 0;
    d->opt.flags &= ~ATTN_SHARED_BLOCK_TABLE; /* a paging flag too */
    d->opt.mask = d->opt.bias = NULL;
    d->opt.shared_prefix = NULL; /* the copies below resolve it */
    if (opt->tree_parents) { /* entry (b, row) of the dense problem: row = i */
        d->tree = zalloc((size_t)(B * lq_max) * sizeof(int32_t));
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < d->q_lens[b]; i++)
                d->tree[b * lq_max + i] =
                    opt->tree_parents[b * shape->q_len + (opt->q_offsets ? opt->q_offsets[b] : 0) + i];
        d->opt.tree_parents = d->tree;
    }
    if (opt->k_positions) { /* slot (b, j) of the dense problem: the sequence's key j */
        d->kpos = zalloc((size_t)(B * lk_max) * sizeof(int64_t));
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < d->kv_lens[b]; j++)
                d->kpos[b * lk_max + j] =
                    opt->k_positions[b * shape->kv_len + (opt->kv_offsets ? opt->kv_offsets[b] : 0) + j];
        d->opt.k_positions = d->kpos;
    }
    if (opt->topk_indices) { /* likewise: list (b, row) of the dense problem at row = i */
        const int64_t n = opt->topk;
        d->topk = zalloc((size_t)(B * lq_max * n) * sizeof(int32_t));
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < d->q_lens[b]; i++)
                memcpy(d->topk + (b * lq_max + i) * n,
                       opt->topk_indices +
                           (b * shape->q_len + (opt->q_offsets ? opt->q_offsets[b] : 0) + i) * n,
                       (size_t)n * sizeof(int32_t));
        d->opt.topk_indices = d->topk;
    }

    for (int64_t b = 0; b < B; b++) {
        const int64_t qo = opt->q_offsets ? opt->q_offsets[b] : 0;
        const int64_t ko = opt->kv_offsets ? opt->kv_offsets[b] : 0;
        if (b == 0) {
            if (q)
                d->q = dense_tensor(&d->mem[0], q->dtype, B, shape->q_heads, lq_max,
                                    shape->head_dim);
            if (k)
                d->k = dense_tensor(&d->mem[1], k->dtype, B, shape->kv_heads, lk_max,
                                    shape->head_dim);
            if (v)
                d->v = dense_tensor(&d->mem[2], v->dtype, B, shape->kv_heads, lk_max, dv);
            if (opt->mask)
                d->mask = dense_tensor(&d->mem[3], ATTN_DTYPE_BOOL, B, shape->q_heads, lq_max,
                                       lk_max);
            if (opt->bias)
                d->bias = dense_tensor(&d->mem[4], ATTN_DTYPE_F32, B, shape->q_heads, lq_max,
                                       lk_max);
        }
        for (int64_t h = 0; h < shape->q_heads; h++)
            for (int64_t i = 0; i < d->q_lens[b]; i++) {
                if (q)
                    memcpy(ref_tensor_at(&d->q, b, h, i, 0), ref_tensor_at(q, b, h, qo + i, 0),
                           (size_t)shape->head_dim * ref_dtype_size(q->dtype));
                for (int64_t j = 0; j < d->kv_lens[b]; j++) {
                    if (opt->mask)
                        memcpy(ref_tensor_at(&d->mask, b, h, i, j),
                               ref_tensor_at(opt->mask, b, h, qo + i, ko + j), 1);
                    if (opt->bias)
                        memcpy(ref_tensor_at(&d->bias, b, h, i, j),
                               ref_tensor_at(opt->bias, b, h, qo + i, ko + j), sizeof(float));
                }
            }
        for (int64_t j = 0; j < d->kv_lens[b]; j++) {
            /* a paged table need not describe keys nobody sees */
            if (opt->block_table && !key_seen(&d->shape, &d->opt, b, j))
                continue;
            /* a shared key is the same key of an earlier sequence, and
               lives there (attn.h, "Shared prefixes") */
            int64_t src = b;
            while (opt->shared_prefix && j < opt->shared_prefix[src])
                src--;
            const int64_t at = (opt->kv_offsets ? opt->kv_offsets[src] : 0) + j;
            for (int64_t h = 0; h < shape->kv_heads; h++) {
                if (k)
                    memcpy(ref_tensor_at(&d->k, b, h, j, 0), ref_kv_at(k, opt, src, h, at),
                           (size_t)shape->head_dim * ref_dtype_size(k->dtype));
                if (v)
                    memcpy(ref_tensor_at(&d->v, b, h, j, 0), ref_kv_at(v, opt, src, h, at),
                           (size_t)dv * ref_dtype_size(v->dtype));
            }
        }
    }
    if (opt->mask)
        d->opt.mask = &d->mask;
    if (opt->bias)
        d->opt.bias = &d->bias;
}

void ref_dense_scores(ref_dense *d, const attn_options *opt, const attn_tensor *scores)
{
    const attn_shape *s = &d->shape;
    d->scores = dense_tensor(&d->mem[5], ATTN_DTYPE_F32, s->batch, s->q_heads, s->q_len,
                             s->kv_len);
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t qo = opt->q_offsets ? opt->q_offsets[b] : 0;
        const int64_t ko = opt->kv_offsets ? opt->kv_offsets[b] : 0;
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < d->q_lens[b]; i++)
                memcpy(ref_tensor_at(&d->scores, b, h, i, 0),
                       ref_tensor_at(scores, b, h, qo + i, ko),
                       (size_t)d->kv_lens[b] * sizeof(float));
    }
}

void ref_dense_free(ref_dense *d)
{
    for (int i = 0; i < 6; i++)
        free(d->mem[i]);
    free(d->q_lens);
    free(d->kv_lens);
    free(d->tree);
    free(d->topk);
    free(d->kpos);
    memset(d, 0, sizeof *d);
}

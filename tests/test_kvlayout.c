/*
 * Offset, packed and paged K/V (attn.h 1.1) through the whole driver on every
 * ISA row, against the float64 reference of ref_kv.h (bounds of
 * tolerance.h) and, on SIMD rows, against the scalar table.
 *
 * Every problem also checks what must NOT happen: outside the valid ranges
 * the inputs hold NaN (a read would poison a result), block-table entries of
 * pages no query sees hold garbage (a read would fault or be out of range),
 * the table ends at an inaccessible page, and every output element outside a
 * sequence's rows and columns must keep its previous bits.
 *
 * The mods_* tests draw the score modifiers of 1.1 on top of every layout
 * (ALiBi slopes, sinks, window_right, q_pos/k_pos shards, q_offsets with a
 * paged cache), which read positions and rows the layouts shift: ALiBi's
 * distance, the sink of a row, the right window edge and the shard's
 * alignment are all defined on the sequence (attn.h, "Offset and packed
 * batches": i and j count from the sequence's first row). Every problem is
 * also run as the per-sequence dense call of the same table (ref_kv.c's
 * copy, no offsets, no pages): attn.h promises bitwise equality across
 * thread counts only, not across layouts (key blocks start at absolute
 * positions, so a kv_offset moves the online softmax's rescales), so the two
 * must agree within twice the float64 bound (TOL_PAIR), as two tables do.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops_list.h"
#include "ref.h"
#include "ref_kv.h"
#include "tolerance.h"

typedef enum kv_layout {
    KV_PACKED,        /* cu_seqlens: q, k, v, out one [T][H][D] tensor each */
    KV_LEFTPAD,       /* cache_leftpad: valid keys [pad_b, pad_b + len_b), padded queries */
    KV_PAGED,         /* vLLM pool [blocks][block_size][kv_heads][d], shuffled table */
    KV_PAGED_HEADS,   /* pool [blocks][kv_heads][block_size][d] */
    KV_PAGED_ADJOIN,  /* blocks mostly in order: runs merge across pages */
    KV_PAGED_LEFTPAD, /* paged with kv_offsets */
    KV_PAGED_SHARED   /* one table row for every sequence (stride 0) */
} kv_layout;

static const char *const layout_names[] = {"packed",        "leftpad",        "paged",
                                           "paged-heads",   "paged-adjoin",   "paged-leftpad",
                                           "paged-shared"};

/* The operations of ops_list.h that read K/V layouts (and mask_apply, which
   reads the offsets). */
static const op_kind layout_ops[] = {OP_SCORES, OP_WEIGHTS, OP_FORWARD, OP_MASK_APPLY};

typedef struct problem {
    kv_layout layout;
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, mask, bias, scores, out;
    int64_t dv, scores_n, out_n, stats_n;
    int32_t *q_lens, *kv_lens, *q_offsets, *kv_offsets;
    fence_buf table_mem;
    void *mem[7];
    float *stats_mem;
    attn_row_stats stats;
    /* score modifiers (mods_* tests): F32 [B][Hq] sinks and slopes, positions */
    attn_tensor sinks, alibi;
    float *sinks_mem, *alibi_mem;
    int64_t *q_pos, *k_pos;
    char desc[384];
} problem;

static const int64_t head_dims[] = {8, 16, 64, 72, 128};

static void store(int32_t dtype, void *at, float x)
{
    if (dtype == ATTN_DTYPE_F32) {
        memcpy(at, &x, 4);
    } else {
        uint16_t h = dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
        memcpy(at, &h, 2);
    }
}

/* The tensor's whole span filled with NaN: what is not overwritten with data
   below must never be read. */
static attn_tensor make_tensor(void **mem, int32_t dtype, int64_t nb, int64_t nh, int64_t nr,
                               int64_t nc, int rows_outer)
{
    const size_t n = (size_t)(nb * nh * nr * nc);
    *mem = xmalloc(n * ref_dtype_size(dtype) + 64);
    for (size_t i = 0; i < n; i++)
        store(dtype, (char *)*mem + i * ref_dtype_size(dtype), NAN);
    attn_tensor t = {*mem, dtype, nh * nr * nc, nr * nc, nc};
    if (rows_outer) { /* [nb][nr][nh][nc] */
        t.head_stride = nc;
        t.row_stride = nh * nc;
    }
    return t;
}

static void fill_row(rng *g, const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        store(t->dtype, ref_tensor_at(t, b, h, r, c), rng_float(g, -1.0f, 1.0f));
}

static int64_t pick_len(rng *g, int64_t full)
{
    switch (rng_int(g, 0, 5)) {
    case 0: return 0;
    case 1: return full;
    default: return rng_int(g, 0, full);
    }
}

/* Key j of sequence b is seen by some query (padding, causal, window). */
static int key_seen(const problem *p, int64_t b, int64_t j)
{
    attn_options geometry = p->opt;
    geometry.mask = NULL;
    geometry.q_offsets = geometry.kv_offsets = NULL;
    for (int64_t i = 0; i < p->q_lens[b]; i++)
        if (ref_visible(&p->shape, &geometry, b, 0, i, j))
            return 1;
    return 0;
}

/*
 * Builds the block table and the pool: pages holding a key some query sees
 * get pool blocks (shuffled, or in order with gaps), the others garbage
 * entries; the pool's data is random at the sequences' valid positions and
 * NaN elsewhere.
 */
static void make_pool(problem *p, rng *g, int64_t bs)
{
    const int64_t B = p->shape.batch, kvh = p->shape.kv_heads, d = p->shape.head_dim;
    const int64_t pages = (p->shape.kv_len + bs - 1) / bs;
    const int shared = p->layout == KV_PAGED_SHARED;
    const int64_t stride = shared ? 0 : pages + rng_int(g, 0, 3);
    const int64_t rows = shared ? 1 : B;
    const int64_t entries = (rows - 1) * stride + pages;
    int32_t *table = fence_alloc(&p->table_mem, (size_t)entries * 4, 0);
    static const int32_t garbage[] = {-1, INT32_MIN, INT32_MAX, 1 << 30};
    for (int64_t e = 0; e < entries; e++)
        table[e] = garbage[rng_int(g, 0, 3)];

    /* which pages need a block */
    uint8_t *need = xcalloc0((size_t)entries, 1);
    int64_t used = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t ko = p->kv_offsets ? p->kv_offsets[b] : 0;
        for (int64_t j = 0; j < p->kv_lens[b]; j++)
            if (key_seen(p, b, j)) {
                const int64_t e = (shared ? 0 : b * stride) + (ko + j) / bs;
                used += !need[e];
                need[e] = 1;
            }
    }
    /* in order, each used block may be followed by a gap */
    const int64_t spare = p->layout == KV_PAGED_ADJOIN ? used : rng_int(g, 0, 3);
    const int64_t nblocks = used + spare + 1;
    int32_t *order = xmalloc((size_t)nblocks * 4);
    for (int64_t i = 0; i < nblocks; i++)
        order[i] = (int32_t)i;
    if (p->layout != KV_PAGED_ADJOIN) {
        for (int64_t i = nblocks - 1; i > 0; i--) { /* Fisher-Yates */
            int64_t r = rng_int(g, 0, i);
            int32_t tmp = order[i];
            order[i] = order[r];
            order[r] = tmp;
        }
    }
    int64_t next = 0;
    for (int64_t e = 0; e < entries; e++)
        if (need[e]) {
            if (p->layout == KV_PAGED_ADJOIN && rng_int(g, 0, 3) == 0)
                next++; /* a gap: the run must break here */
            cr_assert(next < nblocks);
            table[e] = order[next++];
        }

    const int heads_inner = p->layout != KV_PAGED_HEADS;
    p->k = make_tensor(&p->mem[1], p->k.dtype, nblocks, kvh, bs, d, heads_inner);
    p->v = make_tensor(&p->mem[2], p->v.dtype, nblocks, kvh, bs, p->dv, heads_inner);
    for (int64_t b = 0; b < B; b++) {
        const int64_t ko = p->kv_offsets ? p->kv_offsets[b] : 0;
        for (int64_t j = 0; j < p->kv_lens[b]; j++) {
            const int64_t pos = ko + j, e = (shared ? 0 : b * stride) + pos / bs;
            if (!need[e])
                continue;
            for (int64_t h = 0; h < kvh; h++) {
                fill_row(g, &p->k, table[e], h, pos % bs, d);
                fill_row(g, &p->v, table[e], h, pos % bs, p->dv);
            }
        }
    }
    p->opt.block_table = table;
    p->opt.block_table_stride = stride;
    p->opt.block_size = bs;
    p->opt.num_blocks = nblocks;
    free(need);
    free(order);
}

/* F32 [B][Hq] of a sink or slope per (b, h), or per head only (batch_stride 0). */
static attn_tensor per_head(float **mem, rng *g, int64_t B, int64_t Hq)
{
    const int per_batch = rng_int(g, 0, 2) != 0;
    *mem = xmalloc((size_t)((per_batch ? B : 1) * Hq) * 4);
    attn_tensor t = {*mem, ATTN_DTYPE_F32, per_batch ? Hq : 0, 1, 0};
    return t;
}

/*
 * The score modifiers of the mods_* tests, drawn after the lengths (the
 * shard positions follow them): ALiBi slopes (the usual 2^(-8(h+1)/H),
 * scaled, now and then negative or steep), sinks (none, comparable to the
 * scores or dominant), window_right, and q_pos/k_pos (both, q_pos only or
 * k_pos only; queries a few positions before or after the bottom-right
 * alignment, near 0 or far out).
 */
static void draw_mods(problem *p, rng *g)
{
    const int64_t B = p->shape.batch, Hq = p->shape.q_heads;
    if (rng_int(g, 0, 3) != 0) {
        p->alibi = per_head(&p->alibi_mem, g, B, Hq);
        for (int64_t b = 0; b < (p->alibi.batch_stride ? B : 1); b++)
            for (int64_t h = 0; h < Hq; h++) {
                const float usual = exp2f(-8.0f * (float)(h + 1) / (float)Hq);
                const int64_t kind = rng_int(g, 0, 7);
                p->alibi_mem[b * Hq + h] = kind == 0   ? rng_float(g, -0.1f, 0.0f)
                                           : kind == 1 ? rng_float(g, 0.5f, 2.0f)
                                                       : usual * rng_float(g, 0.25f, 2.0f);
            }
        p->opt.alibi_slopes = &p->alibi;
    }
    if (rng_int(g, 0, 1)) {
        p->sinks = per_head(&p->sinks_mem, g, B, Hq);
        for (int64_t b = 0; b < (p->sinks.batch_stride ? B : 1); b++)
            for (int64_t h = 0; h < Hq; h++) {
                const int64_t kind = rng_int(g, 0, 7);
                p->sinks_mem[b * Hq + h] = kind == 0   ? -INFINITY
                                           : kind == 1 ? rng_float(g, 6.0f, 12.0f)
                                                       : rng_float(g, -3.0f, 3.0f);
            }
        p->opt.sinks = &p->sinks;
    }
    if (rng_int(g, 0, 1))
        p->opt.window_right = rng_int(g, 1, 30);
    if (rng_int(g, 0, 2) == 0) {
        const int64_t kind = rng_int(g, 0, 2); /* 0: both, 1: q_pos only, 2: k_pos only */
        const int64_t base = rng_int(g, 0, 3) == 0 ? (int64_t)1 << 40 : 0;
        p->q_pos = kind == 2 ? NULL : xmalloc((size_t)B * 8);
        p->k_pos = kind == 1 ? NULL : xmalloc((size_t)B * 8);
        for (int64_t b = 0; b < B; b++) {
            const int64_t kp = kind == 1 ? 0 : base + rng_int(g, 0, 3000);
            if (p->k_pos)
                p->k_pos[b] = kp;
            if (p->q_pos) { /* a few positions off the bottom-right alignment */
                const int64_t delta = rng_int(g, -6, 10);
                const int64_t qp = kp + p->kv_lens[b] - p->q_lens[b] + delta;
                p->q_pos[b] = qp < 0 ? 0 : qp;
            }
        }
        p->opt.q_pos = p->q_pos;
        p->opt.k_pos = p->k_pos;
    }
}

static void make_problem(problem *p, rng *g, kv_layout layout, int64_t bs, int mods)
{
    memset(p, 0, sizeof *p);
    attn_options init = ATTN_OPTIONS_INIT;
    p->opt = init;
    p->layout = layout;
    const int64_t B = rng_int(g, 1, 4), kvh = rng_int(g, 1, 2), group = 1 << rng_int(g, 0, 2);
    const int64_t d = rng_pick(g, head_dims, 5);
    p->dv = rng_int(g, 0, 3) ? d : rng_int(g, 1, 40);
    p->shape = (attn_shape){B, kvh * group, kvh, 0, 0, d, p->dv == d ? 0 : p->dv};
    const int32_t dtypes[] = {ATTN_DTYPE_F32, ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    const int32_t qt = dtypes[rng_int(g, 0, 2)], kt = dtypes[rng_int(g, 0, 2)],
                  vt = dtypes[rng_int(g, 0, 2)];
    p->q_lens = xcalloc0((size_t)B, 4);
    p->kv_lens = xcalloc0((size_t)B, 4);
    p->opt.q_lens = p->q_lens;
    p->opt.kv_lens = p->kv_lens;
    p->opt.flags = rng_int(g, 0, 1) ? ATTN_CAUSAL : 0;
    p->opt.window = rng_int(g, 0, 2) == 0 ? rng_int(g, 1, 40) : 0;
    p->opt.softcap = rng_int(g, 0, 3) == 0 ? 2.5f : 0.0f;
    p->opt.scale = rng_int(g, 0, 1) ? 0.0f : 0.3f;
    const int paged = layout >= KV_PAGED;

    /* lengths and offsets */
    int64_t q_len = 0, kv_len = 0;
    if (layout == KV_PACKED) {
        p->q_offsets = xcalloc0((size_t)B, 4);
        p->kv_offsets = xcalloc0((size_t)B, 4);
        for (int64_t b = 0; b < B; b++) {
            p->q_lens[b] = (int32_t)pick_len(g, 40);
            p->kv_lens[b] = p->q_lens[b] + (int32_t)(rng_int(g, 0, 1) ? 0 : rng_int(g, 0, 30));
            q_len += rng_int(g, 0, 2); /* rows between sequences nobody owns */
            kv_len += rng_int(g, 0, 2);
            p->q_offsets[b] = (int32_t)q_len;
            p->kv_offsets[b] = (int32_t)kv_len;
            q_len += p->q_lens[b];
            kv_len += p->kv_lens[b];
        }
        q_len = q_len ? q_len : 1;
        kv_len = kv_len ? kv_len : 1;
    } else {
        const int64_t kmax = layout == KV_LEFTPAD ? 90 : bs == 1 ? 70 : bs <= 16 ? 200 : 700;
        q_len = rng_int(g, 1, bs >= 256 ? 4 : 12);
        kv_len = rng_int(g, 1, kmax);
        /* with mods, paged caches get q_offsets too (a short-circuit: no
           draw otherwise, so the other tests' problems are unchanged) */
        const int offset_q = (layout == KV_LEFTPAD || (mods && paged)) && rng_int(g, 0, 1);
        const int offset_k = layout == KV_LEFTPAD || layout == KV_PAGED_LEFTPAD;
        if (offset_q)
            p->q_offsets = xcalloc0((size_t)B, 4);
        if (offset_k)
            p->kv_offsets = xcalloc0((size_t)B, 4);
        for (int64_t b = 0; b < B; b++) {
            p->q_lens[b] = (int32_t)pick_len(g, q_len);
            p->kv_lens[b] = (int32_t)pick_len(g, kv_len);
            if (offset_q)
                p->q_offsets[b] = (int32_t)rng_int(g, 0, q_len - p->q_lens[b]);
            if (offset_k)
                p->kv_offsets[b] = (int32_t)rng_int(g, 0, kv_len - p->kv_lens[b]);
        }
    }
    p->shape.q_len = q_len;
    p->shape.kv_len = kv_len;
    p->opt.q_offsets = p->q_offsets;
    p->opt.kv_offsets = p->kv_offsets;
    if (mods) /* before the pool: window_right and positions decide which pages are seen */
        draw_mods(p, g);

    /* q, and k/v when not paged; packed tensors are [T][H][D], batch_stride 0 */
    const int packed = layout == KV_PACKED;
    const int64_t tb = packed ? 1 : B, Hq = p->shape.q_heads;
    p->q = make_tensor(&p->mem[0], qt, tb, Hq, q_len, d, packed || rng_int(g, 0, 1));
    if (packed)
        p->q.batch_stride = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < p->q_lens[b]; i++)
                fill_row(g, &p->q, b, h, (p->q_offsets ? p->q_offsets[b] : 0) + i, d);
    if (paged) {
        p->k.dtype = kt;
        p->v.dtype = vt;
        make_pool(p, g, bs);
    } else {
        p->k = make_tensor(&p->mem[1], kt, tb, kvh, kv_len, d, 1);
        p->v = make_tensor(&p->mem[2], vt, tb, kvh, kv_len, p->dv, 1);
        if (packed)
            p->k.batch_stride = p->v.batch_stride = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < kvh; h++)
                for (int64_t j = 0; j < p->kv_lens[b]; j++) {
                    const int64_t pos = (p->kv_offsets ? p->kv_offsets[b] : 0) + j;
                    fill_row(g, &p->k, b, h, pos, d);
                    fill_row(g, &p->v, b, h, pos, p->dv);
                }
    }

    /* mask and bias at the sequences' positions (broadcast over batch when packed) */
    if (rng_int(g, 0, 3) == 0) {
        p->mask = make_tensor(&p->mem[3], ATTN_DTYPE_BOOL, tb, Hq, q_len, kv_len, 0);
        for (size_t i = 0; i < (size_t)(tb * Hq * q_len * kv_len); i++)
            ((uint8_t *)p->mask.data)[i] = rng_int(g, 0, 4) != 0;
        if (packed)
            p->mask.batch_stride = 0;
        p->opt.mask = &p->mask;
    }
    if (rng_int(g, 0, 3) == 0) {
        p->bias = make_tensor(&p->mem[4], ATTN_DTYPE_F32, tb, Hq, q_len, kv_len, 0);
        rng_fill(g, p->bias.data, (size_t)(tb * Hq * q_len * kv_len), -2.0f, 2.0f);
        if (packed)
            p->bias.batch_stride = 0;
        p->opt.bias = &p->bias;
    }

    /* outputs: one row space for every sequence when packed */
    p->scores_n = tb * Hq * q_len * kv_len;
    p->scores = make_tensor(&p->mem[5], ATTN_DTYPE_F32, tb, Hq, q_len, kv_len, 0);
    p->out_n = tb * Hq * q_len * p->dv;
    p->out = make_tensor(&p->mem[6], ATTN_DTYPE_F32, tb, Hq, q_len, p->dv, packed);
    if (packed)
        p->scores.batch_stride = p->out.batch_stride = 0;
    p->stats_n = B * Hq * q_len;
    p->stats_mem = xmalloc((size_t)p->stats_n * 3 * 4);
    p->stats = (attn_row_stats){p->stats_mem, p->stats_mem + p->stats_n,
                                p->stats_mem + 2 * p->stats_n};

    snprintf(p->desc, sizeof p->desc,
             "%s bs=%lld B=%lld Hq=%lld Hkv=%lld q_len=%lld kv_len=%lld d=%lld dv=%lld "
             "dtypes=%d/%d/%d causal=%u window=%lld softcap=%g mask=%d bias=%d q_offsets=%d "
             "alibi=%d sinks=%d (0: none, 1: per head, 2: per batch and head) "
             "window_right=%lld q_pos=%d k_pos=%d",
             layout_names[layout], (long long)bs, (long long)B, (long long)Hq, (long long)kvh,
             (long long)q_len, (long long)kv_len, (long long)d, (long long)p->dv, qt, kt, vt,
             p->opt.flags, (long long)p->opt.window, (double)p->opt.softcap,
             p->opt.mask != NULL, p->opt.bias != NULL, p->q_offsets != NULL,
             p->opt.alibi_slopes ? 1 + (p->alibi.batch_stride != 0) : 0,
             p->opt.sinks ? 1 + (p->sinks.batch_stride != 0) : 0,
             (long long)p->opt.window_right, p->q_pos != NULL, p->k_pos != NULL);
}

static void free_problem(problem *p)
{
    for (int i = 0; i < 7; i++)
        free(p->mem[i]);
    free(p->stats_mem);
    free(p->q_lens);
    free(p->kv_lens);
    free(p->q_offsets);
    free(p->kv_offsets);
    free(p->sinks_mem);
    free(p->alibi_mem);
    free(p->q_pos);
    free(p->k_pos);
    if (p->opt.block_table)
        fence_free(&p->table_mem);
}

static attn_status run_op(const attn_dsp *t, problem *p, op_kind op, const attn_options *opt)
{
    switch (op) {
    case OP_SCORES: return attn_scores_with(t, &p->shape, opt, &p->q, &p->k, &p->scores);
    case OP_WEIGHTS:
        return attn_weights_with(t, &p->shape, opt, &p->q, &p->k, &p->scores, &p->stats);
    case OP_FORWARD:
        return attn_forward_with(t, &p->shape, opt, &p->q, &p->k, &p->v, &p->out, &p->stats);
    case OP_MASK_APPLY: return attn_mask_apply_with(t, &p->shape, opt, &p->scores);
    /* no K/V layout: the row operations, merge and quantize read none, the
       backward refuses every one (tests/test_backward.c, op_tests[]) */
    case OP_SOFTMAX:
    case OP_SOFTMAX_BWD:
    case OP_MERGE:
    case OP_BACKWARD:
    case OP_QUANTIZE:
    case OP_COUNT: break;
    }
    CHECK(0, "%s reads no K/V layout", op < OP_COUNT ? op_names[op] : "?");
}

/* Output memory of an operation: the table, then the three stats arrays. */
static size_t output_floats(const problem *p, op_kind op)
{
    return (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n) + 3 * (size_t)p->stats_n;
}

static void output_save(const problem *p, op_kind op, float *dst)
{
    const size_t n = (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n);
    memcpy(dst, op == OP_FORWARD ? p->out.data : p->scores.data, n * 4);
    memcpy(dst + n, p->stats_mem, (size_t)p->stats_n * 3 * 4);
}

static void output_load(problem *p, op_kind op, const float *src)
{
    const size_t n = (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n);
    memcpy(op == OP_FORWARD ? p->out.data : p->scores.data, src, n * 4);
    memcpy(p->stats_mem, src + n, (size_t)p->stats_n * 3 * 4);
}

/* What a comparison collects: got, scalar's result, the dense call's, the
   reference and its bound. */
typedef struct cmp {
    float *got, *scalar, *dense;
    double *want, *err;
    size_t n;
} cmp;

static void cmp_add(cmp *c, const float *after, const float *scalar, size_t at, float dense,
                    double want, double err)
{
    c->got[c->n] = after[at];
    if (scalar)
        c->scalar[c->n] = scalar[at];
    c->dense[c->n] = dense;
    c->want[c->n] = want;
    c->err[c->n] = err;
    c->n++;
}

/* The per-sequence dense call's results: its table (or output) and stats. */
typedef struct dense_result {
    float *table, *stats; /* dn->shape's [B][Hq][q_len][cols]; 3 x [B][Hq][q_len] */
    int64_t rows;         /* B * Hq * dn->shape.q_len */
} dense_result;

/*
 * Walks every output element: those of a sequence's rows and columns go into
 * the comparison (the reference and the dense call from the dense problem;
 * outside its range a written element must be the masked value), all others
 * must have kept their bits.
 */
static void check_outputs(const problem *p, op_kind op, const ref_attn *r, const ref_dense *dn,
                          const float *before, const float *after, const float *scalar,
                          const dense_result *dr)
{
    const int64_t B = p->shape.batch, Hq = p->shape.q_heads, q_len = p->shape.q_len;
    const int fwd = op == OP_FORWARD;
    const int64_t cols = fwd ? p->dv : p->shape.kv_len;
    const attn_tensor *t = fwd ? &p->out : &p->scores;
    const size_t total = output_floats(p, op), table_n = (size_t)(fwd ? p->out_n : p->scores_n);
    uint8_t *owned = xcalloc0(total, 1);
    cmp c = {xmalloc(total * 4), xmalloc(total * 4), xmalloc(total * 4),
             xmalloc(total * 8), xmalloc(total * 8), 0};
    const double masked = op == OP_WEIGHTS ? 0.0 : -INFINITY;
    const int stats = op == OP_WEIGHTS || fwd;

    for (int64_t b = 0; b < B; b++) {
        const int64_t qo = p->q_offsets ? p->q_offsets[b] : 0;
        const int64_t ko = p->kv_offsets ? p->kv_offsets[b] : 0;
        const int64_t rows = p->q_offsets ? p->q_lens[b] : q_len;
        const int64_t c0 = fwd || !p->kv_offsets ? 0 : ko;
        const int64_t c1 = fwd || !p->kv_offsets ? cols : ko + p->kv_lens[b];
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < rows; i++) {
                const int in_ref = i < dn->shape.q_len;
                const int64_t rr = (b * Hq + h) * dn->shape.q_len + i; /* reference row */
                const size_t base =
                    (size_t)(((float *)ref_tensor_at(t, b, h, qo + i, 0)) - (float *)t->data);
                for (int64_t col = c0; col < c1; col++) {
                    const int64_t j = fwd ? col : col - ko; /* reference column */
                    double want = fwd ? 0.0 : masked, err = 0.0;
                    float dense = (float)want; /* the dense problem has no such element */
                    if (in_ref && j >= 0 && j < (fwd ? p->dv : dn->shape.kv_len)) {
                        const size_t at = (size_t)(rr * (fwd ? p->dv : dn->shape.kv_len) + j);
                        want = fwd ? r->o[at] : op == OP_WEIGHTS ? r->p[at] : r->s[at];
                        err = fwd ? r->o_err[at] : op == OP_WEIGHTS ? r->p_err[at] : r->s_err[at];
                        dense = dr->table[at];
                    }
                    owned[base + (size_t)col] = 1;
                    cmp_add(&c, after, scalar, base + (size_t)col, dense, want, err);
                }
                if (!stats)
                    continue;
                const size_t srow = (size_t)((b * Hq + h) * q_len + qo + i);
                const double sw[3] = {in_ref ? r->lse[rr] : -INFINITY,
                                      in_ref ? r->max[rr] : -INFINITY, in_ref ? r->ent[rr] : 0.0};
                const double se[3] = {in_ref ? r->lse_err[rr] : 0.0, in_ref ? r->max_err[rr] : 0.0,
                                      in_ref ? r->ent_err[rr] : 0.0};
                for (int s = 0; s < 3; s++) {
                    const size_t at = table_n + (size_t)s * (size_t)p->stats_n + srow;
                    owned[at] = 1;
                    cmp_add(&c, after, scalar, at,
                            in_ref ? dr->stats[s * dr->rows + rr] : (float)sw[s], sw[s], se[s]);
                }
            }
    }
    for (size_t i = 0; i < total; i++)
        if (!owned[i])
            CHECK(memcmp(&before[i], &after[i], 4) == 0,
                  "%s wrote element %zu outside every sequence", op_names[op], i);
    expect_near("vs float64", c.got, (ptrdiff_t)c.n, c.want, c.err, 1, c.n);
    for (size_t i = 0; i < c.n; i++)
        c.err[i] = TOL_PAIR(c.err[i]);
    if (scalar)
        expect_near_f("vs scalar", c.got, (ptrdiff_t)c.n, c.scalar, (ptrdiff_t)c.n, c.err, 1,
                      c.n);
    expect_near_f("vs the per-sequence dense call", c.got, (ptrdiff_t)c.n, c.dense,
                  (ptrdiff_t)c.n, c.err, 1, c.n);
    free(owned);
    free(c.got);
    free(c.scalar);
    free(c.dense);
    free(c.want);
    free(c.err);
}

static void reverse_parallel_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    (void)ctx;
    for (size_t i = count; i-- > 0;)
        task(task_ctx, i);
}

/*
 * The operation on ref_kv.c's per-sequence dense copy of the problem (each
 * sequence right-padded at row and key 0, no offsets, no pages; the same
 * options otherwise), with the same table.
 */
static dense_result run_dense(const attn_dsp *t, const ref_dense *dn, op_kind op)
{
    const attn_shape *s = &dn->shape;
    const int64_t dv = s->v_dim ? s->v_dim : s->head_dim;
    const int64_t cols = op == OP_FORWARD ? dv : s->kv_len;
    dense_result dr = {NULL, NULL, s->batch * s->q_heads * s->q_len};
    const size_t n = (size_t)(dr.rows * cols);
    dr.table = xmalloc(n * 4);
    dr.stats = xmalloc((size_t)dr.rows * 3 * 4);
    if (op == OP_MASK_APPLY)
        memcpy(dr.table, dn->scores.data, n * 4);
    const attn_tensor o = {dr.table, ATTN_DTYPE_F32, s->q_heads * s->q_len * cols,
                           s->q_len * cols, cols};
    const attn_row_stats st = {dr.stats, dr.stats + dr.rows, dr.stats + 2 * dr.rows};
    attn_status rc = ATTN_ERR_ARG;
    switch (op) {
    case OP_SCORES: rc = attn_scores_with(t, s, &dn->opt, &dn->q, &dn->k, &o); break;
    case OP_WEIGHTS: rc = attn_weights_with(t, s, &dn->opt, &dn->q, &dn->k, &o, &st); break;
    case OP_FORWARD:
        rc = attn_forward_with(t, s, &dn->opt, &dn->q, &dn->k, &dn->v, &o, &st);
        break;
    case OP_MASK_APPLY: rc = attn_mask_apply_with(t, s, &dn->opt, &o); break;
    case OP_SOFTMAX:
    case OP_SOFTMAX_BWD:
    case OP_MERGE:
    case OP_BACKWARD:
    case OP_QUANTIZE: /* no K/V layout: see run_op */
    case OP_COUNT: break;
    }
    CHECK(rc == ATTN_OK, "the dense call: status %d (%s)", rc, attn_strerror(rc));
    return dr;
}

static void check_problem(const attn_dsp *t, problem *p, op_kind op, rng *g)
{
    harness_context("%s on %s", op_names[op], p->desc);
    const attn_dsp *sc = harness_scalar();
    const size_t total = output_floats(p, op);
    float *before = xmalloc(total * 4), *after = xmalloc(total * 4), *scalar = NULL;

    /* prior contents: a canary NaN everywhere, random scores for mask_apply */
    float *fill = op == OP_FORWARD ? p->out.data : p->scores.data;
    const size_t table_n = (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n);
    const uint32_t canary = BUF_CANARY;
    for (size_t i = 0; i < table_n; i++)
        memcpy(&fill[i], &canary, 4);
    for (size_t i = 0; i < (size_t)p->stats_n * 3; i++)
        memcpy(&p->stats_mem[i], &canary, 4);
    if (op == OP_MASK_APPLY)
        rng_fill(g, fill, table_n, -10.0f, 10.0f);
    output_save(p, op, before);

    ref_dense dn;
    ref_attn r;
    if (op == OP_MASK_APPLY) {
        ref_dense_make(&dn, &p->shape, &p->opt, NULL, NULL, NULL);
        ref_dense_scores(&dn, &p->opt, &p->scores);
        ref_attn_from_scores(&r, &dn.shape, &dn.opt, &dn.scores);
    } else {
        /* tolerance.h R: one rescale per key block of the smaller block_k, plus one */
        const uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
        ref_dense_make(&dn, &p->shape, &p->opt, &p->q, &p->k, op == OP_FORWARD ? &p->v : NULL);
        ref_attn_compute(&r, &dn.shape, &dn.opt, &dn.q, &dn.k, op == OP_FORWARD ? &dn.v : NULL,
                         op == OP_FORWARD ? (p->shape.kv_len + bk - 1) / bk + 1 : 0);
    }

    attn_status st = run_op(t, p, op, &p->opt);
    CHECK(st == ATTN_OK, "status %d (%s)", st, attn_strerror(st));
    output_save(p, op, after);

    /* the same in reverse task order: bitwise the same (determinism) */
    attn_options rev = p->opt;
    rev.parallel_for = reverse_parallel_for;
    output_load(p, op, before);
    st = run_op(t, p, op, &rev);
    CHECK(st == ATTN_OK, "status %d in reverse order", st);
    float *again = xmalloc(total * 4);
    output_save(p, op, again);
    expect_bits("reverse task order", again, after, total);
    free(again);

    if (!harness_is_scalar(t)) {
        scalar = xmalloc(total * 4);
        output_load(p, op, before);
        st = run_op(sc, p, op, &p->opt);
        CHECK(st == ATTN_OK, "scalar status %d", st);
        output_save(p, op, scalar);
    }
    const dense_result dr = run_dense(t, &dn, op);
    check_outputs(p, op, &r, &dn, before, after, scalar, &dr);
    free(dr.table);
    free(dr.stats);
    ref_attn_free(&r);
    ref_dense_free(&dn);
    free(before);
    free(after);
    free(scalar);
}

static void run_layout(const isa_row *row, kv_layout layout, const int64_t *block_sizes,
                       size_t n_bs, int problems, int mods)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (size_t s = 0; s < n_bs; s++)
        for (int k = 0; k < problems; k++)
            for (size_t o = 0; o < sizeof layout_ops / sizeof layout_ops[0]; o++) {
                problem p;
                make_problem(&p, g, layout, block_sizes[s], mods);
                check_problem(t, &p, layout_ops[o], g);
                free_problem(&p);
            }
}

static const int64_t no_pages[] = {0};
static const int64_t pages[] = {1, 16, 256};
static const int64_t small_pages[] = {1, 3, 16};

HARNESS_ISA_PARAMS(kvlayout, packed)
ParameterizedTest(isa_row *row, kvlayout, packed, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PACKED, no_pages, 1, 12, 0);
}

HARNESS_ISA_PARAMS(kvlayout, leftpad)
ParameterizedTest(isa_row *row, kvlayout, leftpad, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_LEFTPAD, no_pages, 1, 12, 0);
}

HARNESS_ISA_PARAMS(kvlayout, paged)
ParameterizedTest(isa_row *row, kvlayout, paged, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED, pages, 3, 5, 0);
}

HARNESS_ISA_PARAMS(kvlayout, paged_heads)
ParameterizedTest(isa_row *row, kvlayout, paged_heads, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED_HEADS, pages, 3, 3, 0);
}

HARNESS_ISA_PARAMS(kvlayout, paged_adjoin)
ParameterizedTest(isa_row *row, kvlayout, paged_adjoin, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED_ADJOIN, small_pages, 3, 4, 0);
}

HARNESS_ISA_PARAMS(kvlayout, paged_leftpad)
ParameterizedTest(isa_row *row, kvlayout, paged_leftpad, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED_LEFTPAD, pages, 3, 4, 0);
}

HARNESS_ISA_PARAMS(kvlayout, paged_shared)
ParameterizedTest(isa_row *row, kvlayout, paged_shared, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED_SHARED, small_pages, 3, 3, 0);
}

/* ------------------------------------------------------------ layouts with score modifiers */

/* Packed batches (q_offsets, kv_offsets, batch_stride 0) with ALiBi, sinks,
   window_right and shard positions. */
HARNESS_ISA_PARAMS(kvlayout, mods_packed)
ParameterizedTest(isa_row *row, kvlayout, mods_packed, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PACKED, no_pages, 1, 10, 1);
}

/* Left-padded caches (kv_offsets; q_offsets on unpacked outputs half the time). */
HARNESS_ISA_PARAMS(kvlayout, mods_leftpad)
ParameterizedTest(isa_row *row, kvlayout, mods_leftpad, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_LEFTPAD, no_pages, 1, 10, 1);
}

/* Shuffled block tables, with q_offsets half the time. */
HARNESS_ISA_PARAMS(kvlayout, mods_paged)
ParameterizedTest(isa_row *row, kvlayout, mods_paged, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED, pages, 3, 3, 1);
}

/* Paged with kv_offsets, and the other pool layouts (heads outer, adjoining
   blocks, one table row for every sequence). */
HARNESS_ISA_PARAMS(kvlayout, mods_paged_more)
ParameterizedTest(isa_row *row, kvlayout, mods_paged_more, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED_LEFTPAD, pages, 3, 3, 1);
    run_layout(row, KV_PAGED_HEADS, small_pages, 3, 1, 1);
    run_layout(row, KV_PAGED_ADJOIN, small_pages, 3, 1, 1);
    run_layout(row, KV_PAGED_SHARED, small_pages, 3, 1, 1);
}

/*
 * A shard (q_pos) whose last query rows sit past every key, under a window,
 * with a paged cache. attn.h, "Paged K/V": only the entries of blocks holding
 * a key some query may see are read. Here key 3 (page 3 of 4) is the only
 * key seen (query 0 at position 3, window 1; queries 1 and 2 at 4 and 5 see
 * none), so entries 0..2 may hold anything and the table row is 4 entries
 * long, ending at an inaccessible page. src/validate.c's check_block_table
 * took the page range from the first row's keys to the last row's end,
 * which for an empty last row lies past the keys: it read entry 4, beyond
 * the table (a fault here), and with a longer buffer rejected the call when
 * that int was no block (ATTN_ERR_ARG). It now ends the range at the last
 * row that sees a key.
 */
Test(kvlayout, shard_past_keys_paged)
{
    harness_begin_plain("kvlayout/shard_past_keys_paged");
    const attn_shape s = {1, 1, 1, 3, 4, 4, 0};
    float q[12], k[8 * 4], v[8 * 4], out[12], lse[3];
    for (int i = 0; i < 12; i++)
        q[i] = 0.25f * (float)(i % 5) - 0.5f;
    for (int i = 0; i < 32; i++)
        k[i] = v[i] = 0.125f * (float)(i % 7) - 0.375f;
    fence_buf fb;
    int32_t *table = fence_alloc(&fb, 4 * sizeof(int32_t), 0);
    table[0] = table[1] = table[2] = -1; /* pages nobody sees */
    table[3] = 5;
    const int64_t q_pos = 3;
    attn_options o = ATTN_OPTIONS_INIT;
    o.window = 1;
    o.q_pos = &q_pos;
    o.block_table = table;
    o.block_table_stride = 4;
    o.block_size = 1;
    o.num_blocks = 8;
    const attn_tensor tq = {q, ATTN_DTYPE_F32, 12, 12, 4}, tk = {k, ATTN_DTYPE_F32, 4, 4, 4},
                      tv = {v, ATTN_DTYPE_F32, 4, 4, 4}, to = {out, ATTN_DTYPE_F32, 12, 12, 4};
    const attn_row_stats st = {lse, NULL, NULL};
    const attn_status rc = attn_forward(&s, &o, &tq, &tk, &tv, &to, &st);
    CHECK(rc == ATTN_OK, "status %d (%s)", rc, attn_strerror(rc));
    /* query 0 sees key 3 alone (block 5): out = v row 5, lse = its score */
    for (int c = 0; c < 4; c++)
        CHECK(out[c] == v[5 * 4 + c], "out[0][%d] = %g, want v[5][%d] = %g", c,
              (double)out[c], c, (double)v[5 * 4 + c]);
    for (int c = 4; c < 12; c++)
        CHECK(out[c] == 0.0f, "out[%d] = %g of a row without keys", c, (double)out[c]);
    CHECK(lse[1] == -INFINITY && lse[2] == -INFINITY, "lse of rows without keys");
    fence_free(&fb);
}

/* SPDX-License-Identifier: MIT */
/*
 * attn_cache_append: a step's new K/V rows into the cache the forward reads,
 * addressed through src/driver/kv.h as the readers address it: one statement
 * of where key j lives. A block-format cache refuses the rows attn_quantize
 * would, and every row is checked before anything is written, so validation
 * encodes them: into a stage the one task then copies when they all fit
 * (a decode step), else into a scratch row, the tasks encoding again in
 * place. Per-row FP8 scales are never staged (the stage holds no scales).
 */
#include <math.h>
#include <string.h>

#include "driver.h"
#include "internal.h"
#include "kv.h"
#include "quant.h"
#include "validate.h"

#define TRY ATTN_TRY

/* One cache and its new rows. */
typedef struct append_pair {
    attn_tensor src, dst; /* src.data == NULL: this pair is absent */
    int64_t cols;
    float scale; /* FP8's per-call scale, else 1 */
    attn_tensor rows; /* per-row scales written; data NULL: none */
    int64_t group;    /* with rows: channels per scale, 0 for the whole row;
                         ASYM dst: values per record, resolved */
    float top;        /* with rows: the format's largest finite value */
} append_pair;

#define APPEND_STAGE (32 * 1024)
size_t attn_append_stage_limit = APPEND_STAGE;

typedef struct append_problem {
    attn_problem pb; /* lengths, offsets and paging, as the forward's */
    append_pair pair[2];
    int staged; /* in (pair, sequence, head, token) order */
    unsigned char stage[APPEND_STAGE];
} append_problem;

typedef struct append_ctx {
    const attn_dsp *dsp;
    const append_problem *ap;
} append_ctx;

static int64_t new_first(const attn_problem *pb, int64_t b)
{
    return attn_seq_kv_len(pb, b) - attn_seq_q_len(pb, b);
}

static const void *new_row(const attn_problem *pb, const attn_tensor *src, int64_t b, int64_t h,
                           int64_t i)
{
    return attn_row_ptr(src, b, h, (pb->q_offsets ? pb->q_offsets[b] : 0) + i);
}

static char *cache_row(const attn_problem *pb, const kv_src *s, int64_t b, int64_t j)
{
    const int64_t p = (pb->kv_offsets ? pb->kv_offsets[b] : 0) + j;
    int64_t n;
    return (char *)attn_kv_run(s, p, p + 1, &n);
}

static const float *row_f32(const attn_dsp *dsp, const void *row, int32_t dtype, int64_t n,
                            float *buf)
{
    if (dtype == ATTN_DTYPE_F32)
        return row;
    dsp->to_f32[dtype](row, buf, (size_t)n);
    return buf;
}

/* max |x| / the format's largest finite value, or 1 when that is not a
   positive normal float: any scale encodes such a row, 1 keeps it exact
   where the format can. */
static float row_scale(const float *x, int64_t n, float top)
{
    float m = 0.0f;
    for (int64_t t = 0; t < n; t++)
        m = fabsf(x[t]) > m ? fabsf(x[t]) : m;
    const float s = m / top;
    return isnormal(s) ? s : 1.0f;
}

/* A row of the dst's dtype at row: an ASYM row one record per group. 0 where
   the format cannot store it (attn_from_f32_fn). */
static int store_row(attn_from_f32_fn *store, const append_pair *pr, const float *x,
                     unsigned char *row)
{
    if (!attn_dtype_is_asym(pr->dst.dtype))
        return store(x, row, (size_t)pr->cols, pr->scale);
    const int64_t g = pr->group;
    const size_t rec = (size_t)attn_kv_row_units(pr->dst.dtype, g, g);
    for (int64_t c = 0; c < pr->cols / g; c++)
        if (!store(x + c * g, row + (size_t)c * rec, (size_t)g, pr->scale))
            return 0;
    return 1;
}

/* The dtypes whose encoding can fail: validation encodes their rows. */
static int may_refuse(int32_t dtype)
{
    return attn_dtype_block(dtype) > 1 || attn_dtype_is_asym(dtype);
}

/* With scale groups, each group encoded with its own scale. */
static void put_row(const attn_problem *pb, const append_pair *pr, attn_from_f32_fn *store,
                    const float *x, void *row, const kv_src *sc, int64_t b, int64_t j)
{
    if (!pr->rows.data) {
        (void)store_row(store, pr, x, row);
        return;
    }
    float *const at = (float *)(void *)cache_row(pb, sc, b, j);
    const int64_t g = pr->group ? pr->group : pr->cols;
    for (int64_t c = 0; c < pr->cols / g; c++) {
        at[c] = row_scale(x + c * g, g, pr->top);
        (void)store(x + c * g, (unsigned char *)row + c * g, (size_t)g, at[c]);
    }
}

static size_t row_bytes(const append_pair *pr)
{
    return (size_t)attn_kv_row_units(pr->dst.dtype, pr->cols, pr->group) *
           attn_dtype_size(pr->dst.dtype);
}

/* ------------------------------------------------------------ validation */

/* The pool slot (paged), or the row of a cache all sequences share. */
static int64_t row_id(const attn_problem *pb, int64_t b, int64_t j)
{
    const int64_t p = (pb->kv_offsets ? pb->kv_offsets[b] : 0) + j;
    if (!pb->block_table)
        return p;
    const int64_t page = p / pb->block_size;
    return (int64_t)pb->block_table[b * pb->block_table_stride + page] * pb->block_size +
           (p - page * pb->block_size);
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

#define APPEND_SEEN 1024

/* Quadratic: only when a pass's hashes crowd its table. */
static int pass_distinct_slow(const attn_problem *pb, uint64_t passes, uint64_t pass,
                              int64_t where[3])
{
    for (int64_t b = 0; b < pb->batch; b++)
        for (int64_t j = new_first(pb, b); j < attn_seq_kv_len(pb, b); j++) {
            const int64_t id = row_id(pb, b, j);
            if (mix64((uint64_t)id) % passes != pass)
                continue;
            for (int64_t c = 0; c <= b; c++)
                for (int64_t l = new_first(pb, c); l < (c == b ? j : attn_seq_kv_len(pb, c)); l++)
                    if (row_id(pb, c, l) == id) {
                        where[0] = b, where[1] = j, where[2] = id;
                        return 0;
                    }
        }
    return 1;
}

/* 0 when two new rows land on one cache row, the second's place in where[].
   No heap: a stack hash set in passes, each taking one residue of the hash,
   so a pass fills at most about half the set. */
static int rows_distinct(const attn_problem *pb, int64_t where[3])
{
    int64_t n = 0;
    for (int64_t b = 0; b < pb->batch; b++)
        n += attn_seq_q_len(pb, b);
    if (n < 2)
        return 1;
    uint64_t cap = 4;
    while (cap < 2 * (uint64_t)n && cap < APPEND_SEEN)
        cap *= 2;
    const uint64_t passes = (2 * (uint64_t)n + cap - 1) / cap;
    int64_t set[APPEND_SEEN];
    for (uint64_t pass = 0; pass < passes; pass++) {
        memset(set, 0xff, cap * sizeof set[0]); /* -1: empty */
        uint64_t used = 0;
        int crowded = 0;
        for (int64_t b = 0; b < pb->batch && !crowded; b++)
            for (int64_t j = new_first(pb, b); j < attn_seq_kv_len(pb, b); j++) {
                const int64_t id = row_id(pb, b, j);
                const uint64_t h = mix64((uint64_t)id);
                if (h % passes != pass)
                    continue;
                if (++used > cap * 3 / 4) {
                    crowded = 1;
                    break;
                }
                uint64_t at = (h / passes) & (cap - 1);
                while (set[at] != -1 && set[at] != id)
                    at = (at + 1) & (cap - 1);
                if (set[at] == id) {
                    where[0] = b, where[1] = j, where[2] = id;
                    return 0;
                }
                set[at] = id;
            }
        if (crowded && !pass_distinct_slow(pb, passes, pass, where))
            return 0;
    }
    return 1;
}

static attn_status add_written(attn_range_set *set, const attn_problem *pb, const attn_shape *s,
                               const attn_tensor *t, int64_t cols)
{
    if (pb->block_table)
        return attn_add_tensor(set, t, pb->num_blocks, s->kv_heads, pb->block_size, cols, 1);
    const int shared = t->batch_stride == 0 && s->batch > 1;
    return attn_add_tensor(set, t, shared ? 1 : s->batch, s->kv_heads, s->kv_len, cols, 1);
}

static attn_status add_pair(attn_range_set *set, const attn_problem *pb, const attn_shape *s,
                            const append_pair *pr)
{
    TRY(attn_add_tensor(set, &pr->src, s->batch, s->kv_heads, s->q_len, pr->cols, 0));
    TRY(add_written(set, pb, s, &pr->dst, attn_kv_range_cols(pr->dst.dtype, pr->cols, pr->group)));
    return pr->rows.data
               ? add_written(set, pb, s, &pr->rows, attn_scale_cols(pr->group, pr->cols))
               : ATTN_OK;
}

/* 1. pointers: each pair whole or absent, one at least */
static attn_status check_pairs_given(const attn_tensor *const src[2],
                                     const attn_tensor *const dst[2])
{
    int present = 0;
    for (int p = 0; p < 2; p++) {
        if (!src[p] && !dst[p])
            continue;
        if (!src[p] || !dst[p] || !src[p]->data || !dst[p]->data)
            return attn_fail(ATTN_ERR_NULL, "%s: %s is NULL", p ? "v_new and v" : "k_new and k",
                             !src[p] ? (p ? "v_new" : "k_new") : !dst[p] ? (p ? "v" : "k")
                             : !src[p]->data ? (p ? "v_new->data" : "k_new->data")
                                             : (p ? "v->data" : "k->data"));
        present++;
    }
    if (!present)
        return attn_fail(ATTN_ERR_NULL, "neither k_new and k nor v_new and v given");
    return ATTN_OK;
}

static attn_status read_pairs(append_problem *ap, const attn_options *o, const attn_shape *s,
                              const attn_tensor *const src[2], const attn_tensor *const dst[2])
{
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    const int64_t cols[2] = {s->head_dim, v_dim};
    const float scale[2] = {o->k_scale, o->v_scale};
    const attn_tensor *const rows[2] = {o->k_scales, o->v_scales};
    const int64_t groups[2] = {o->k_scale_group, o->v_scale_group};
    for (int p = 0; p < 2; p++) {
        if (!src[p])
            continue;
        if (!attn_dtype_is_float_input(src[p]->dtype))
            return attn_fail(ATTN_ERR_ARG, "%s_new->dtype = %d: new rows are F32, F16 or BF16",
                             p ? "v" : "k", (int)src[p]->dtype);
        TRY(attn_check_kv(dst[p]->dtype, cols[p], scale[p]));
        append_pair *pr = &ap->pair[p];
        pr->src = *src[p];
        pr->dst = *dst[p];
        pr->cols = cols[p];
        pr->scale = attn_dtype_is_fp8(dst[p]->dtype) && scale[p] != 0.0f ? scale[p] : 1.0f;
        TRY(attn_check_scale_group(dst[p]->dtype, rows[p], groups[p], cols[p], p ? "v" : "k"));
        if (attn_dtype_is_asym(dst[p]->dtype)) {
            pr->group = attn_asym_group(groups[p], cols[p]);
            pr->scale = 0.0f; /* the records hold theirs */
        } else if (rows[p]) {
            TRY(attn_check_row_scales(dst[p]->dtype, scale[p], p ? "v" : "k"));
            pr->rows = *rows[p];
            pr->group = groups[p];
            pr->top = dst[p]->dtype == ATTN_DTYPE_FP8_E4M3 ? ATTN_FP8_E4M3_MAX
                                                           : ATTN_FP8_E5M2_MAX;
        }
    }
    return ATTN_OK;
}

/* None written inside a shared prefix. */
static attn_status check_new_keys(const attn_problem *pb)
{
    for (int64_t b = 0; b < pb->batch; b++)
        if (new_first(pb, b) < attn_seq_shared(pb, b))
            return new_first(pb, b) < 0
                       ? attn_fail(ATTN_ERR_ARG,
                                   "sequence %lld appends %lld new tokens but has %lld keys "
                                   "(kv_lens counts the keys after the append: at least "
                                   "q_lens)",
                                   (long long)b, (long long)attn_seq_q_len(pb, b),
                                   (long long)attn_seq_kv_len(pb, b))
                       : attn_fail(ATTN_ERR_ARG,
                                   "sequence %lld would write key %lld inside its shared prefix "
                                   "of %lld keys (another sequence's)",
                                   (long long)b, (long long)new_first(pb, b),
                                   (long long)attn_seq_shared(pb, b));
    return ATTN_OK;
}

/* 3. the block-table entries of every written page */
static attn_status add_written_pages(attn_range_set *set, const attn_problem *pb,
                                     const attn_options *o, const attn_shape *s)
{
    TRY(attn_add_block_table(set, o, s));
    for (int64_t b = 0; b < s->batch; b++)
        TRY(attn_check_own_pages(pb, b, new_first(pb, b), attn_seq_kv_len(pb, b),
                                 "which new keys are written to"));
    return ATTN_OK;
}

/* 4. byte ranges; the per-row scales are outputs here */
static attn_status check_ranges(attn_range_set *set, const append_problem *ap,
                                const attn_options *o, const attn_shape *s)
{
    for (int p = 0; p < 2; p++)
        if (ap->pair[p].src.data)
            TRY(add_pair(set, &ap->pb, s, &ap->pair[p]));
    attn_options ins = *o;
    ins.k_scales = ins.v_scales = NULL;
    TRY(attn_add_option_ranges(set, &ins, s));
    return attn_check_disjoint(set);
}

/* 5. no cache row written twice (only a pool or a shared cache can) */
static attn_status check_written_once(const append_problem *ap)
{
    const attn_problem *pb = &ap->pb;
    for (int p = 0; p < 2; p++) {
        const append_pair *pr = &ap->pair[p];
        if (!pr->src.data || !(pb->block_table || (pr->dst.batch_stride == 0 && pb->batch > 1)))
            continue;
        int64_t at[3];
        if (rows_distinct(pb, at))
            return ATTN_OK; /* the same positions for both pairs */
        if (pb->block_table)
            return attn_fail(ATTN_ERR_ARG,
                             "sequence %lld's new key %lld goes to pool block %lld, slot "
                             "%lld, which another new key of this call writes too",
                             (long long)at[0], (long long)at[1],
                             (long long)(at[2] / pb->block_size),
                             (long long)(at[2] % pb->block_size));
        return attn_fail(ATTN_ERR_ARG,
                         "sequence %lld's new key %lld goes to row %lld of a cache every "
                         "sequence shares (batch_stride 0), which another new key of "
                         "this call writes too",
                         (long long)at[0], (long long)at[1], (long long)at[2]);
    }
    return ATTN_OK;
}

/* 6. per-row scales: every such row finite */
static attn_status check_rows_finite(const attn_dsp *dsp, const append_problem *ap,
                                     int *per_row)
{
    const attn_problem *pb = &ap->pb;
    float buf[ATTN_MAX_HEAD_DIM];
    *per_row = 0;
    for (int p = 0; p < 2; p++) {
        const append_pair *pr = &ap->pair[p];
        if (!pr->src.data || !pr->rows.data)
            continue;
        *per_row = 1;
        for (int64_t b = 0; b < pb->batch; b++)
            for (int64_t h = 0; h < pb->kv_heads; h++)
                for (int64_t i = 0; i < attn_seq_q_len(pb, b); i++) {
                    const float *x = row_f32(dsp, new_row(pb, &pr->src, b, h, i),
                                             pr->src.dtype, pr->cols, buf);
                    for (int64_t t = 0; t < pr->cols; t++)
                        if (!isfinite(x[t]))
                            return attn_fail(ATTN_ERR_ARG, "%s_new: a non-finite value in "
                                             "row %lld of sequence %lld, head %lld: no per-row "
                                             "scale", p ? "v" : "k", (long long)i, (long long)b,
                                             (long long)h);
                }
    }
    return ATTN_OK;
}

/* 7. the rows encoded (see the top) */
static attn_status encode_rows(const attn_dsp *dsp, append_problem *ap, int per_row)
{
    const attn_problem *pb = &ap->pb;
    float buf[ATTN_MAX_HEAD_DIM];
    size_t total = 0;
    int blocks = 0;
    for (int p = 0; p < 2; p++) {
        const append_pair *pr = &ap->pair[p];
        if (!pr->src.data)
            continue;
        blocks |= may_refuse(pr->dst.dtype);
        for (int64_t b = 0; b < pb->batch; b++)
            total += (size_t)(attn_seq_q_len(pb, b) * pb->kv_heads) * row_bytes(pr);
    }
    if (!blocks)
        return ATTN_OK; /* nothing to check: the tasks encode in place */
    ap->staged = !per_row && total <= attn_append_stage_limit && total <= APPEND_STAGE;
    unsigned char *at = ap->stage;
    for (int p = 0; p < 2; p++) {
        const append_pair *pr = &ap->pair[p];
        if (!pr->src.data || (!ap->staged && !may_refuse(pr->dst.dtype)))
            continue;
        attn_from_f32_fn *const store = dsp->from_f32[pr->dst.dtype];
        for (int64_t b = 0; b < pb->batch; b++)
            for (int64_t h = 0; h < pb->kv_heads; h++)
                for (int64_t i = 0; i < attn_seq_q_len(pb, b); i++) {
                    const float *x = row_f32(dsp, new_row(pb, &pr->src, b, h, i),
                                             pr->src.dtype, pr->cols, buf);
                    if (!store_row(store, pr, x, at))
                        return attn_fail(ATTN_ERR_ARG,
                                         "%s_new: row %lld of sequence %lld, head %lld has no "
                                         "%s encoding (a non-finite value, or one out of the "
                                         "format's range)",
                                         p ? "v" : "k", (long long)i, (long long)b, (long long)h,
                                         attn_dtype_name(pr->dst.dtype));
                    if (ap->staged)
                        at += row_bytes(pr);
                }
    }
    return ATTN_OK;
}

static attn_status validate(const attn_dsp *dsp, append_problem *ap, const attn_shape *shape,
                            const attn_options *opt, const attn_tensor *k_new,
                            const attn_tensor *v_new, const attn_tensor *k,
                            const attn_tensor *v)
{
    if (!shape)
        return ATTN_ERR_NULL;
    const attn_tensor *const src[2] = {k_new, v_new}, *const dst[2] = {k, v};
    TRY(check_pairs_given(src, dst));

    /* 2. options, shape, dtypes, scales, the batch arrays */
    attn_options o;
    TRY(attn_check_shape_options(shape, opt, &o));
    if (o.k_tail) /* one call per part of a key row */
        return attn_fail(ATTN_ERR_UNSUPPORTED, "opt->k_tail: append each part of a key row "
                                               "with its own call");
    const attn_shape s = *shape;
    TRY(attn_check_kv_scales(&o));
    memset(ap, 0, offsetof(append_problem, stage)); /* not the stage: 32 KiB a call */
    TRY(read_pairs(ap, &o, &s, src, dst));
    TRY(attn_check_batch_arrays(&o, &s, 1));
    attn_problem *pb = &ap->pb;
    attn_problem_geometry(pb, &s, &o, o.block_table != NULL);
    TRY(check_new_keys(pb));

    attn_range_set set = {.n_in = 0};
    if (pb->block_table)
        TRY(add_written_pages(&set, pb, &o, &s));
    TRY(check_ranges(&set, ap, &o, &s));
    TRY(check_written_once(ap));
    int per_row;
    TRY(check_rows_finite(dsp, ap, &per_row));
    return encode_rows(dsp, ap, per_row);
}

/* ------------------------------------------------------------ tasks */

static void task_copy(void *vctx, size_t index)
{
    const append_ctx *c = vctx;
    const attn_problem *pb = &c->ap->pb;
    const unsigned char *at = c->ap->stage;
    (void)index;
    for (int p = 0; p < 2; p++) {
        const append_pair *pr = &c->ap->pair[p];
        if (!pr->src.data)
            continue;
        const size_t bytes = row_bytes(pr);
        for (int64_t b = 0; b < pb->batch; b++)
            for (int64_t h = 0; h < pb->kv_heads; h++) {
                const kv_src s = attn_kv_open(pb, &pr->dst, b, h, pr->cols, pr->group);
                for (int64_t i = 0; i < attn_seq_q_len(pb, b); i++, at += bytes)
                    memcpy(cache_row(pb, &s, b, new_first(pb, b) + i), at, bytes);
            }
    }
}

static void task_append(void *vctx, size_t index)
{
    const append_ctx *c = vctx;
    const attn_problem *pb = &c->ap->pb;
    const int64_t b = (int64_t)index, first = new_first(pb, b), n = attn_seq_q_len(pb, b);
    float buf[ATTN_MAX_HEAD_DIM];
    for (int p = 0; p < 2; p++) {
        const append_pair *pr = &c->ap->pair[p];
        if (!pr->src.data)
            continue;
        attn_from_f32_fn *const store = c->dsp->from_f32[pr->dst.dtype];
        for (int64_t h = 0; h < pb->kv_heads; h++) {
            const kv_src s = attn_kv_open(pb, &pr->dst, b, h, pr->cols, pr->group);
            const kv_src sc = pr->rows.data ? attn_kv_open(pb, &pr->rows, b, h,
                                                           attn_scale_cols(pr->group, pr->cols), 0)
                                            : s;
            for (int64_t i = 0; i < n; i++) {
                const float *x = row_f32(c->dsp, new_row(pb, &pr->src, b, h, i),
                                         pr->src.dtype, pr->cols, buf);
                put_row(pb, pr, store, x, cache_row(pb, &s, b, first + i), &sc, b, first + i);
            }
        }
    }
}

attn_status attn_cache_append_with(const attn_dsp *dsp, const attn_shape *shape,
                                   const attn_options *opt, const attn_tensor *k_new,
                                   const attn_tensor *v_new, const attn_tensor *k,
                                   const attn_tensor *v)
{
    append_problem ap;
    attn_status status = validate(dsp, &ap, shape, opt, k_new, v_new, k, v);
    if (status != ATTN_OK)
        return status;
    append_ctx ctx = {dsp, &ap};
    if (ap.staged)
        attn_run_tasks(NULL, NULL, task_copy, &ctx, 1); /* a few KiB: no pool */
    else
        attn_run_tasks(ap.pb.parallel_for, ap.pb.parallel_ctx, task_append, &ctx,
                       (size_t)ap.pb.batch);
    return ATTN_OK;
}

static attn_status checked_cache_append(const attn_shape *shape, const attn_options *opt,
                                        const attn_tensor *k_new, const attn_tensor *v_new,
                                        const attn_tensor *k, const attn_tensor *v)
{
    return attn_cache_append_with(attn_dsp_active(), shape, opt, k_new, v_new, k, v);
}

attn_status attn_cache_append(const attn_shape *shape, const attn_options *opt,
                              const attn_tensor *k_new, const attn_tensor *v_new,
                              const attn_tensor *k, const attn_tensor *v)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_cache_append", mark, checked_cache_append(shape, opt, k_new, v_new, k, v));
}

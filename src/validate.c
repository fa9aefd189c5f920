/* SPDX-License-Identifier: MIT */
/*
 * The argument checks the operations' modules share (src/validate.h). They
 * run before anything is written, so a rejected call leaves every output
 * untouched. No operation is named here: what differs per operation comes
 * from its attn_op (src/problem.h) or stays in its module (src/driver/).
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "internal.h" /* attn_fail */
#include "config.h"
#include "validate.h"

/* Every line of src/option_list.h but struct_size itself. */
int attn_struct_tail_zero(const void *user, size_t known, uint32_t size)
{
    if (size <= known)
        return 1;
    if (size > ATTN_STRUCT_SIZE_MAX)
        return 0;
    const unsigned char *tail = (const unsigned char *)user + known;
    for (size_t i = 0; i < size - known; i++)
        if (tail[i])
            return 0;
    return 1;
}

attn_status attn_read_options(attn_options *o, const attn_options *user)
{
    const attn_options defaults = ATTN_OPTIONS_INIT;
    *o = defaults;
    if (!user)
        return ATTN_OK;
    uint32_t size = user->struct_size;
    if (size < offsetof(attn_options, flags) + sizeof(user->flags))
        return attn_fail(ATTN_ERR_VERSION, "opt->struct_size = %u: at least %zu (ATTN_OPTIONS_INIT "
                         "sets it)", (unsigned)size, offsetof(attn_options, flags) + sizeof(user->flags));
    if (!attn_struct_tail_zero(user, sizeof(attn_options), size))
        return attn_fail(ATTN_ERR_VERSION,
                         "opt->struct_size = %u: this library (%s) knows %zu bytes of attn_options, "
                         "and a field past them is set (a newer attn.h's option), or the size is "
                         "above %d", (unsigned)size, ATTN_VERSION_STRING, sizeof(attn_options),
                         ATTN_STRUCT_SIZE_MAX);
#define COPY_IF_COVERED(f, kind, extent, dtype, off, since, rule)                                  \
    if (ATTN_OPT_KIND_##kind != ATTN_OPT_KIND_HEADER &&                                    \
        size >= offsetof(attn_options, f) + sizeof(user->f))                               \
        o->f = user->f;
    ATTN_OPTION_LIST(COPY_IF_COVERED)
#undef COPY_IF_COVERED
    return ATTN_OK;
}

static int64_t attn_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

/* A K/V row of `cols` values must be whole blocks of its dtype. */
static int splits_into_blocks(int32_t dtype, int64_t cols)
{
    return cols % attn_dtype_block(dtype) == 0;
}

/* k_scale / v_scale: 0 (meaning 1) or a positive normal float; a real
   scale only for an FP8 tensor. */
static int kv_scale_ok(float scale, int32_t dtype)
{
    if (!isfinite(scale) || scale < 0.0f)
        return 0;
    return attn_dtype_is_fp8(dtype) || scale == 0.0f || scale == 1.0f;
}

/* The next free slot of the inputs (is_output 0) or outputs (1). The
   capacity counts every range a call adds, so a full set is a bug of a
   caller: it is reported as ATTN_ERR_ARG rather than written past. */
static attn_byte_range *range_slot(attn_range_set *set, int is_output)
{
    if (is_output)
        return set->n_out < ATTN_MAX_OUTPUT_RANGES ? &set->out[set->n_out++] : NULL;
    return set->n_in < ATTN_MAX_INPUT_RANGES ? &set->in[set->n_in++] : NULL;
}

/* 6. no output may share a byte with an input or another output (the
   address ranges are compared, which is exact for separate buffers) */
attn_status attn_check_disjoint(const attn_range_set *set)
{
    for (int a = 0; a < set->n_out; a++) {
        for (int b = 0; b < set->n_in; b++)
            if (attn_ranges_meet(set->out[a], set->in[b]))
                return attn_fail(ATTN_ERR_STRIDE, "an output shares bytes with an input "
                                 "(output %d, input %d in the order attn.h lists them)", a, b);
        for (int b = a + 1; b < set->n_out; b++)
            if (attn_ranges_meet(set->out[a], set->out[b]))
                return attn_fail(ATTN_ERR_STRIDE, "two outputs share bytes (outputs %d and %d)",
                                 a, b);
    }
    return ATTN_OK;
}

/*
 * Non-overlap: the outer dimensions sorted by stride, each stride must step
 * over everything inside it, exact for every nested layout. A negative
 * stride is looked for before any size is computed, so the status does not
 * depend on which dimension has it.
 */
attn_status attn_check_tensor(const attn_tensor *t, int64_t nb, int64_t nh, int64_t nr,
                              int64_t nc, int is_output, attn_byte_range *range)
{
    const int64_t extent[3] = {nb, nh, nr};
    const int64_t stride[3] = {t->batch_stride, t->head_stride, t->row_stride};
    size_t esize = attn_dtype_size(t->dtype);
    nc /= attn_dtype_block(t->dtype); /* stride units per row (blocks: checked whole) */

    static const char *const which[3] = {"batch_stride", "head_stride", "row_stride"};
    for (int i = 0; i < 3; i++)
        if (stride[i] < 0)
            return attn_fail(ATTN_ERR_STRIDE, "a tensor's %s = %lld is negative", which[i],
                             (long long)stride[i]);
    if (nb == 0 || nh == 0 || nr == 0 || nc == 0) { /* an empty view: no byte */
        range->begin = range->end = (uintptr_t)t->data;
        return ATTN_OK;
    }
    int64_t last = nc - 1; /* offset of the last element, in elements */
    for (int i = 0; i < 3; i++) {
        int64_t step;
        if (__builtin_mul_overflow(extent[i] - 1, stride[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            return ATTN_ERR_SHAPE;
    }
    if (last >= (int64_t)(PTRDIFF_MAX / (ptrdiff_t)esize) - 1)
        return ATTN_ERR_SHAPE;
    if ((uintptr_t)t->data > UINTPTR_MAX - (uintptr_t)(last + 1) * esize)
        return ATTN_ERR_SHAPE;
    range->begin = (uintptr_t)t->data;
    range->end = range->begin + (uintptr_t)(last + 1) * esize;

    if (is_output) {
        int order[3] = {0, 1, 2};
        for (int a = 0; a < 3; a++) /* sort the three dims by stride */
            for (int b = a + 1; b < 3; b++)
                if (stride[order[b]] < stride[order[a]]) {
                    int tmp = order[a];
                    order[a] = order[b];
                    order[b] = tmp;
                }
        int64_t span = nc; /* elements covered by the dims inside */
        for (int a = 0; a < 3; a++) {
            int d = order[a];
            if (extent[d] == 1)
                continue;
            if (stride[d] < span)
                return attn_fail(ATTN_ERR_STRIDE,
                                 "an output's %s = %lld makes elements share an address "
                                 "(at least %lld needed: outputs are never broadcast)",
                                 which[d], (long long)stride[d], (long long)span);
            span = stride[d] * (extent[d] - 1) + span;
        }
    }
    return ATTN_OK;
}

attn_status attn_add_tensor(attn_range_set *set, const attn_tensor *t, int64_t nb, int64_t nh,
                            int64_t nr, int64_t nc, int is_output)
{
    attn_byte_range *r = range_slot(set, is_output);
    if (!r)
        return ATTN_ERR_ARG;
    return attn_check_tensor(t, nb, nh, nr, nc, is_output, r);
}

attn_status attn_add_array(attn_range_set *set, const void *p, int64_t n, size_t size,
                           int is_output)
{
    attn_byte_range *r = range_slot(set, is_output);
    if (!r)
        return ATTN_ERR_ARG;
    if ((uint64_t)n > (UINTPTR_MAX - (uintptr_t)p) / size)
        return ATTN_ERR_SHAPE;
    r->begin = (uintptr_t)p;
    r->end = r->begin + (uintptr_t)n * size;
    return ATTN_OK;
}

static attn_status check_lengths(const int32_t *lens, int64_t batch, int64_t limit,
                                 const char *name, const char *limit_name)
{
    if (!lens)
        return ATTN_OK;
    for (int64_t b = 0; b < batch; b++)
        if (lens[b] < 0 || lens[b] > limit)
            return attn_fail(ATTN_ERR_ARG, "opt->%s[%lld] = %d: must be in [0, %s = %lld]",
                             name, (long long)b, (int)lens[b], limit_name, (long long)limit);
    return ATTN_OK;
}

/* Positions are bounded so that position + index and their differences
   never overflow int64. */
static attn_status check_positions(const int64_t *pos, int64_t batch, const char *name)
{
    if (!pos)
        return ATTN_OK;
    for (int64_t b = 0; b < batch; b++)
        if (pos[b] < 0 || pos[b] > ATTN_MAX_POSITION)
            return attn_fail(ATTN_ERR_ARG, "opt->%s[%lld] = %lld is outside [0, 2^62]", name,
                             (long long)b, (long long)pos[b]);
    return ATTN_OK;
}

#define TRY ATTN_TRY

attn_status attn_check_shape(const attn_shape *shape)
{
    const attn_shape s = *shape;
    const struct {
        const char *name;
        int64_t value, least;
    } dims[] = {{"batch", s.batch, 0},   {"q_heads", s.q_heads, 1},   {"kv_heads", s.kv_heads, 1},
                {"q_len", s.q_len, 0},   {"kv_len", s.kv_len, 0},     {"head_dim", s.head_dim, 1},
                {"v_dim", s.v_dim, 0}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].value < dims[i].least)
            return attn_fail(ATTN_ERR_SHAPE, "shape->%s = %lld, must be >= %lld", dims[i].name,
                             (long long)dims[i].value, (long long)dims[i].least);
    if (s.q_len > INT32_MAX || s.kv_len > INT32_MAX) /* lengths are int32 in q_lens/kv_lens */
        return attn_fail(ATTN_ERR_SHAPE, "shape->q_len / kv_len above 2^31 - 1");
    const int64_t v_dim = s.v_dim ? s.v_dim : s.head_dim;
    if (s.head_dim > ATTN_MAX_HEAD_DIM || v_dim > ATTN_MAX_HEAD_DIM)
        return attn_fail(ATTN_ERR_UNSUPPORTED, "head_dim %lld / v_dim %lld: at most %d",
                         (long long)s.head_dim, (long long)v_dim, ATTN_MAX_HEAD_DIM);
    if (s.q_heads % s.kv_heads != 0)
        return attn_fail(ATTN_ERR_ARG, "shape->q_heads = %lld is not a multiple of kv_heads = %lld",
                         (long long)s.q_heads, (long long)s.kv_heads);
    return ATTN_OK;
}

/* ATTN_X_<what>_<kind>: a field is only ever used as its kind says. */
#define ATTN_X_NOTHING(f, e, t)

/* A tensor option that is given must have data ... */
#define ATTN_X_NULL(f, kind, extent, dtype, off, since, rule) ATTN_X_NULL_##kind(f, extent, dtype)
#define ATTN_X_NULL_TENSOR(f, e, t)                                                         \
    if (o->f && !o->f->data)                                                               \
        return attn_fail(ATTN_ERR_NULL, "opt->" #f "->data is NULL");
#define ATTN_X_NULL_HEADER ATTN_X_NOTHING
#define ATTN_X_NULL_VALUE ATTN_X_NOTHING
#define ATTN_X_NULL_HOOK ATTN_X_NOTHING
#define ATTN_X_NULL_I32 ATTN_X_NOTHING
#define ATTN_X_NULL_I64 ATTN_X_NOTHING
#define ATTN_X_NULL_PAGES ATTN_X_NOTHING
#define ATTN_X_NULL_SCRATCH ATTN_X_NOTHING
static attn_status check_option_pointers(const attn_options *o)
{
    ATTN_OPTION_LIST(ATTN_X_NULL)
    return ATTN_OK;
}

/* ... and the dtype its line names. */
#define ATTN_X_DTYPE(f, kind, extent, dtype, off, since, rule) ATTN_X_DTYPE_##kind(f, extent, dtype)
#define ATTN_X_DTYPE_TENSOR(f, e, t)                                                        \
    if (o->f && o->f->dtype != ATTN_DTYPE_##t &&                                           \
        !(ATTN_OPT_TAKES_HALF(e, t) && attn_dtype_is_float_input(o->f->dtype)))            \
        return attn_fail(ATTN_ERR_ARG, "opt->" #f "->dtype = %d, must be ATTN_DTYPE_" #t      \
                         "%s", (int)o->f->dtype, ATTN_OPT_TAKES_HALF(e, t) ? ", F16 or BF16" : "");
#define ATTN_X_DTYPE_HEADER ATTN_X_NOTHING
#define ATTN_X_DTYPE_VALUE ATTN_X_NOTHING
#define ATTN_X_DTYPE_HOOK ATTN_X_NOTHING
#define ATTN_X_DTYPE_I32 ATTN_X_NOTHING
#define ATTN_X_DTYPE_I64 ATTN_X_NOTHING
#define ATTN_X_DTYPE_PAGES ATTN_X_NOTHING
#define ATTN_X_DTYPE_SCRATCH ATTN_X_NOTHING
static attn_status check_option_dtypes(const attn_options *o)
{
    ATTN_OPTION_LIST(ATTN_X_DTYPE)
    return ATTN_OK;
}

/* PAGES and SCRATCH depend on the call: attn_validate adds the block table,
   the forward's attn_op the workspace. */
#define ATTN_X_RANGE(f, kind, extent, dtype, off, since, rule) ATTN_X_RANGE_##kind(f, extent, dtype)
#define ATTN_X_RANGE_I32(f, e, t)                                                           \
    if (o->f)                                                                              \
        TRY(add_entries(set, o->f, ext[ATTN_OPT_EXTENT_##e], sizeof *o->f));
#define ATTN_X_RANGE_I64 ATTN_X_RANGE_I32
#define ATTN_X_RANGE_TENSOR(f, e, t)                                                        \
    if (o->f)                                                                              \
        TRY(attn_add_tensor(set, o->f, ext[ATTN_OPT_EXTENT_##e][0], ext[ATTN_OPT_EXTENT_##e][1], \
                            ext[ATTN_OPT_EXTENT_##e][2], ext[ATTN_OPT_EXTENT_##e][3], 0));
#define ATTN_X_RANGE_HEADER ATTN_X_NOTHING
#define ATTN_X_RANGE_VALUE ATTN_X_NOTHING
#define ATTN_X_RANGE_HOOK ATTN_X_NOTHING
#define ATTN_X_RANGE_PAGES ATTN_X_NOTHING
#define ATTN_X_RANGE_SCRATCH ATTN_X_NOTHING
static attn_status add_entries(attn_range_set *set, const void *p, const int64_t ext[4],
                               size_t size)
{
    int64_t n;
    if (__builtin_mul_overflow(ext[0], ext[1], &n) || __builtin_mul_overflow(n, ext[2], &n))
        return ATTN_ERR_SHAPE;
    return attn_add_array(set, p, n, size, 0);
}

attn_status attn_add_option_ranges(attn_range_set *set, const attn_options *o,
                                   const attn_shape *s)
{
    /* with a nonsense paging description, ranged as dense: the call is
       refused anyway */
    const int pool = o->block_table && o->num_blocks > 0 && o->block_size > 0;
    const int64_t k_cols = s->head_dim - o->k_tail_dim; /* k's own part (1.9) */
    const int64_t ext[][4] = {
        [ATTN_OPT_EXTENT_NONE] = {1, 1, 1, 1},
        [ATTN_OPT_EXTENT_BATCH] = {s->batch, 1, 1, 1},
        [ATTN_OPT_EXTENT_SCORES] = {s->batch, s->q_heads, s->q_len, s->kv_len},
        [ATTN_OPT_EXTENT_HEADS] = {s->batch, s->q_heads, 1, 1},
        [ATTN_OPT_EXTENT_QROWS] = {s->batch, s->q_len, 1, 1},
        [ATTN_OPT_EXTENT_KSCALES] = {pool ? o->num_blocks : s->batch, s->kv_heads,
                                     pool ? o->block_size : s->kv_len,
                                     attn_scale_cols(o->k_scale_group, k_cols)},
        [ATTN_OPT_EXTENT_VSCALES] = {pool ? o->num_blocks : s->batch, s->kv_heads,
                                     pool ? o->block_size : s->kv_len,
                                     attn_scale_cols(o->v_scale_group,
                                                     s->v_dim ? s->v_dim : s->head_dim)},
        [ATTN_OPT_EXTENT_TOPK] = {s->batch, s->q_len, o->topk, 1},
        [ATTN_OPT_EXTENT_KTAIL] = {pool ? o->num_blocks : s->batch, s->kv_heads,
                                   pool ? o->block_size : s->kv_len, o->k_tail_dim},
        [ATTN_OPT_EXTENT_KSLOTS] = {s->batch, s->kv_len, 1, 1},
    };
    ATTN_OPTION_LIST(ATTN_X_RANGE)
    return ATTN_OK;
}

/* Each rule's check and message: the value, and what attn.h allows. */
#define CHECK_RULE_NONE(f)
#define CHECK_RULE_FLAGS(f)                                                                    \
    if (!ATTN_OPT_RULE_FLAGS(o->f))                                                            \
        return attn_fail(ATTN_ERR_ARG, "opt->" #f " = 0x%x has bits no ATTN_* flag defines (0x%x)", \
                         (unsigned)o->f, (unsigned)(o->f & ~(uint32_t)ATTN_OPT_FLAGS_ALL));
#define CHECK_RULE_FINITE(f)                                                                   \
    if (!ATTN_OPT_RULE_FINITE(o->f))                                                           \
        return attn_fail(ATTN_ERR_ARG, "opt->" #f " = %g: must be finite", (double)o->f);
#define CHECK_RULE_CAP(f)                                                                      \
    if (!ATTN_OPT_RULE_CAP(o->f))                                                              \
        return attn_fail(ATTN_ERR_ARG,                                                         \
                         "opt->" #f " = %g: 0 (off), or finite, positive and at least "        \
                         "1/FLT_MAX", (double)o->f);
#define CHECK_RULE_NONNEG(f)                                                                   \
    if (!ATTN_OPT_RULE_NONNEG(o->f))                                                           \
        return attn_fail(ATTN_ERR_ARG, "opt->" #f " = %lld: must be >= 0", (long long)o->f);
#define CHECK_RULE_SPLITS(f)                                                                   \
    if (!ATTN_OPT_RULE_SPLITS(o->f))                                                           \
        return attn_fail(ATTN_ERR_ARG, "opt->" #f " = %lld: must be in [0, %d]",               \
                         (long long)o->f, ATTN_MAX_KV_SPLITS);
#define CHECK_RULE_PRECISION(f)                                                                \
    if (!ATTN_OPT_RULE_PRECISION(o->f))                                                        \
        return attn_fail(ATTN_ERR_ARG, "opt->" #f " = %d: not an attn_precision value",        \
                         (int)o->f);

/* The options' values: each value's rule (src/option_list.h), then the
   positions q_pos and k_pos. */
static attn_status check_option_values(const attn_options *o, const attn_shape *s)
{
#define ATTN_X_RULE(f, kind, extent, dtype, off, since, rule) CHECK_RULE_##rule(f)
    ATTN_OPTION_LIST(ATTN_X_RULE)
#undef ATTN_X_RULE
    TRY(check_positions(o->q_pos, s->batch, "q_pos"));
    TRY(check_positions(o->k_pos, s->batch, "k_pos"));
    return ATTN_OK;
}

/* The options that go together: k_positions without k_pos, topk_indices
   with topk, k_tail with k_tail_dim, a scale group dividing its row (that
   it has scales, or an ASYM cache, needs the dtypes: check_qkv_dtypes). */
static attn_status check_option_pairs(const attn_options *o, const attn_shape *s)
{
    if (o->k_positions && o->k_pos)
        return attn_fail(ATTN_ERR_ARG, "opt->k_positions and opt->k_pos are both given: "
                                       "k_positions sets every key's position");
    if ((o->topk_indices != NULL) != (o->topk > 0))
        return attn_fail(ATTN_ERR_ARG, "opt->topk_indices and opt->topk = %lld: both or neither",
                         (long long)o->topk);
    /* a key row in two parts (1.9): the tail and its length come together
       and leave k some values of its own */
    if ((o->k_tail != NULL) != (o->k_tail_dim > 0))
        return attn_fail(ATTN_ERR_ARG, "opt->k_tail and opt->k_tail_dim = %lld: both or neither",
                         (long long)o->k_tail_dim);
    if (o->k_tail_dim >= s->head_dim)
        return attn_fail(ATTN_ERR_SHAPE, "opt->k_tail_dim = %lld leaves none of head_dim = %lld "
                         "to k", (long long)o->k_tail_dim, (long long)s->head_dim);
    /* FP8 scale groups (1.8): a group divides its row (the scale views'
       extents, attn_add_option_ranges, count whole groups) */
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    const int64_t group[2] = {o->k_scale_group, o->v_scale_group},
                  dim[2] = {s->head_dim - o->k_tail_dim, v_dim};
    for (int i = 0; i < 2; i++) {
        if (group[i] > 0 && dim[i] % group[i])
            return attn_fail(ATTN_ERR_SHAPE, "opt->%s_scale_group = %lld does not divide %s = %lld",
                             i ? "v" : "k", (long long)group[i],
                             i ? "v_dim" : o->k_tail_dim ? "head_dim - k_tail_dim" : "head_dim",
                             (long long)dim[i]);
    }
    return ATTN_OK;
}

attn_status attn_check_shape_options(const attn_shape *shape, const attn_options *opt,
                                     attn_options *o)
{
    TRY(attn_read_options(o, opt));
    TRY(check_option_pointers(o));
    TRY(attn_check_shape(shape));
    TRY(check_option_values(o, shape));
    return check_option_pairs(o, shape);
}

/* The draft tree (attn.h, attn_options.tree_parents): each sequence's
   queries fit among its keys, and each parent is an earlier query or -1.
   Called after the lengths and offsets are checked. */
static attn_status check_tree(const attn_options *o, const attn_shape *s)
{
    int64_t entries;
    if (!o->tree_parents)
        return ATTN_OK;
    if (__builtin_mul_overflow(s->batch, s->q_len, &entries))
        return ATTN_ERR_SHAPE; /* [batch][q_len] entries */
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t lq = o->q_lens ? o->q_lens[b] : s->q_len;
        const int64_t lk = o->kv_lens ? o->kv_lens[b] : s->kv_len;
        if (lq > lk)
            return attn_fail(ATTN_ERR_ARG,
                             "opt->tree_parents: sequence %lld has %lld queries but %lld keys "
                             "(a draft tree's queries are among its keys)",
                             (long long)b, (long long)lq, (long long)lk);
        const int32_t *par = o->tree_parents + b * s->q_len + (o->q_offsets ? o->q_offsets[b] : 0);
        for (int64_t i = 0; i < lq; i++)
            if (par[i] < -1 || par[i] >= i)
                return attn_fail(ATTN_ERR_ARG,
                                 "opt->tree_parents: query %lld of sequence %lld has parent %d "
                                 "(-1 or an earlier query)",
                                 (long long)i, (long long)b, (int)par[i]);
    }
    return ATTN_OK;
}

/* Top-k lists (attn.h, "Top-k sparse attention"): every entry of a valid
   query row's list is -1 or a key of its sequence. Called after the
   lengths and offsets are checked. */
static attn_status check_topk(const attn_options *o, const attn_shape *s)
{
    if (!o->topk_indices)
        return ATTN_OK;
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t lq = o->q_lens ? o->q_lens[b] : s->q_len;
        const int64_t lk = o->kv_lens ? o->kv_lens[b] : s->kv_len;
        const int64_t r0 = b * s->q_len + (o->q_offsets ? o->q_offsets[b] : 0);
        for (int64_t i = 0; i < lq; i++) {
            const int32_t *list = o->topk_indices + (r0 + i) * o->topk;
            for (int64_t t = 0; t < o->topk; t++)
                if (list[t] < -1 || list[t] >= lk)
                    return attn_fail(ATTN_ERR_ARG,
                                     "opt->topk_indices: entry %lld of query %lld of sequence "
                                     "%lld is %d, outside [-1, %lld)",
                                     (long long)t, (long long)i, (long long)b, (int)list[t],
                                     (long long)lk);
        }
    }
    return ATTN_OK;
}

/* Positions per key slot (attn.h): each slot of a sequence's keys at most
   ATTN_MAX_POSITION (negative: empty). Called after the lengths and
   offsets are checked; the other entries are never read. */
static attn_status check_k_positions(const attn_options *o, const attn_shape *s)
{
    if (!o->k_positions)
        return ATTN_OK;
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t lk = o->kv_lens ? o->kv_lens[b] : s->kv_len;
        const int64_t p0 = b * s->kv_len + (o->kv_offsets ? o->kv_offsets[b] : 0);
        for (int64_t j = 0; j < lk; j++)
            if (o->k_positions[p0 + j] > ATTN_MAX_POSITION)
                return attn_fail(ATTN_ERR_ARG,
                                 "opt->k_positions[%lld] = %lld (sequence %lld, key %lld): "
                                 "above 2^62",
                                 (long long)(p0 + j), (long long)o->k_positions[p0 + j],
                                 (long long)b, (long long)j);
    }
    return ATTN_OK;
}

/* ALiBi by the slots' positions (attn.h, "Positions per key slot"): every
   key within 2^31 - 1 of each query of its sequence (the alibi slot's int32
   distances). Called after the entries are checked. */
static attn_status check_slot_distances(const attn_options *o, const attn_shape *s)
{
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t lq = o->q_lens ? o->q_lens[b] : s->q_len;
        const int64_t lk = o->kv_lens ? o->kv_lens[b] : s->kv_len;
        const int64_t q0 = o->q_pos ? o->q_pos[b] : lk - lq, q1 = q0 + lq - 1;
        const int64_t p0 = b * s->kv_len + (o->kv_offsets ? o->kv_offsets[b] : 0);
        for (int64_t j = 0; j < lk && lq > 0; j++) {
            const int64_t p = o->k_positions[p0 + j];
            if (p >= 0 && (p - q0 > INT32_MAX || q1 - p > INT32_MAX))
                return attn_fail(ATTN_ERR_ARG,
                                 "opt->k_positions[%lld] = %lld (sequence %lld, key %lld): "
                                 "2^31 or more from the queries' positions [%lld, %lld] "
                                 "(alibi_slopes)",
                                 (long long)(p0 + j), (long long)p, (long long)b, (long long)j,
                                 (long long)q0, (long long)q1);
        }
    }
    return ATTN_OK;
}

/* Shared prefixes (attn.h): none for sequence 0, and each P_b within both
   sequences' keys. */
static attn_status check_shared(const attn_options *o, const attn_shape *s)
{
    const int32_t *p = o->shared_prefix;
    if (!p)
        return ATTN_OK;
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t lk = o->kv_lens ? o->kv_lens[b] : s->kv_len;
        const int64_t before = b ? (o->kv_lens ? o->kv_lens[b - 1] : s->kv_len) : 0;
        if (p[b] < 0 || p[b] > lk || p[b] > before)
            return attn_fail(ATTN_ERR_ARG,
                             "opt->shared_prefix[%lld] = %d: in [0, min(its keys %lld, the "
                             "previous sequence's %lld)]",
                             (long long)b, (int)p[b], (long long)lk, (long long)before);
    }
    return ATTN_OK;
}

/* Each sequence's range [offsets[b], offsets[b] + len_b) inside [0, limit). */
static attn_status check_offsets(const int32_t *offsets, const int32_t *lens, int64_t batch,
                                 int64_t limit, const char *name, const char *limit_name)
{
    if (!offsets)
        return ATTN_OK;
    for (int64_t b = 0; b < batch; b++) {
        const int64_t len = lens ? lens[b] : limit;
        if (offsets[b] < 0 || offsets[b] + len > limit)
            return attn_fail(ATTN_ERR_ARG,
                             "opt->%s[%lld] = %d with a length of %lld: the sequence must lie "
                             "inside [0, %s = %lld)",
                             name, (long long)b, (int)offsets[b], (long long)len, limit_name,
                             (long long)limit);
    }
    return ATTN_OK;
}

int64_t attn_block_table_entries(const attn_options *o, const attn_shape *s)
{
    const int64_t pages = (s->kv_len + o->block_size - 1) / o->block_size;
    int64_t entries;
    if (s->batch == 0 || pages == 0)
        return 0;
    if (__builtin_mul_overflow(s->batch - 1, o->block_table_stride, &entries) ||
        __builtin_add_overflow(entries, pages, &entries))
        return -1;
    return entries;
}

attn_status attn_add_block_table(attn_range_set *set, const attn_options *o,
                                 const attn_shape *s)
{
    const int64_t entries = attn_block_table_entries(o, s);
    if (entries < 0)
        return ATTN_ERR_SHAPE;
    return attn_add_array(set, o->block_table, entries, sizeof(int32_t), 0);
}

attn_status attn_check_own_pages(const attn_problem *pb, int64_t b, int64_t lo, int64_t hi,
                                 const char *why)
{
    const int64_t ko = pb->kv_offsets ? pb->kv_offsets[b] : 0;
    const int32_t *row = pb->block_table + b * pb->block_table_stride;
    for (int64_t page = (ko + lo) / pb->block_size; lo < hi && page <= (ko + hi - 1) / pb->block_size;
         page++)
        if (row[page] < 0 || row[page] >= pb->num_blocks)
            return attn_fail(ATTN_ERR_ARG,
                             "opt->block_table[%lld * %lld + %lld] = %d (sequence %lld, page "
                             "%lld, %s): outside the pool [0, num_blocks = %lld)",
                             (long long)b, (long long)pb->block_table_stride, (long long)page,
                             (int)row[page], (long long)b, (long long)page, why,
                             (long long)pb->num_blocks);
    return ATTN_OK;
}

/* Below a shared prefix, the sharing sequences' entries (kv.h reads there). */
static attn_status check_pages(const attn_problem *pb, int64_t b, int64_t lo, int64_t hi)
{
    for (; lo < hi; b--) {
        const int64_t shared = attn_seq_shared(pb, b);
        TRY(attn_check_own_pages(pb, b, attn_max_i64(lo, shared), hi,
                                 "holding keys some query sees"));
        hi = hi < shared ? hi : shared;
    }
    return ATTN_OK;
}

/* The keys a sequence's queries see form one interval (attn_seq_keys moves
   both ends forward with i); only its pages' entries are ever read. */
static attn_status check_block_table(const attn_problem *pb, const attn_shape *s,
                                     attn_range_set *set)
{
    TRY(attn_add_block_table(set, &pb->opt, s));

    for (int64_t b = 0; b < pb->batch; b++) {
        const int64_t lq = pb->q_lens ? pb->q_lens[b] : pb->q_len;
        int64_t i = 0, lo = 0, hi = 0, last_lo = 0, last_hi = 0;
        for (; i < lq; i++) {
            attn_seq_keys(pb, b, i, &lo, &hi);
            if (lo < hi)
                break;
        }
        if (i == lq)
            continue;
        /* later rows (a window moved past the keys) read no page */
        for (int64_t j = lq - 1; j >= i; j--) {
            attn_seq_keys(pb, b, j, &last_lo, &last_hi);
            if (last_lo < last_hi)
                break;
        }
        TRY(check_pages(pb, b, lo, last_hi));
    }
    return ATTN_OK;
}

attn_status attn_check_kv_scales(const attn_options *o)
{
    /* a subnormal scale would put the f32 products into the subnormal range,
       where they lose the relative accuracy the error bounds rest on */
    if (!(o->k_scale == 0.0f || (isnormal(o->k_scale) && o->k_scale > 0.0f)))
        return attn_fail(ATTN_ERR_ARG, "opt->k_scale = %g: 0 or a positive normal float",
                         (double)o->k_scale);
    if (!(o->v_scale == 0.0f || (isnormal(o->v_scale) && o->v_scale > 0.0f)))
        return attn_fail(ATTN_ERR_ARG, "opt->v_scale = %g: 0 or a positive normal float",
                         (double)o->v_scale);
    return ATTN_OK;
}

attn_status attn_check_kv(int32_t dtype, int64_t cols, float scale)
{
    if (!attn_dtype_is_kv(dtype))
        return attn_fail(ATTN_ERR_ARG, "a K/V tensor's dtype %d is not a K/V dtype", (int)dtype);
    if (!kv_scale_ok(scale, dtype))
        return attn_fail(ATTN_ERR_ARG, "a scale of %g with a K/V tensor of dtype %d (not FP8)",
                         (double)scale, (int)dtype);
    if (!splits_into_blocks(dtype, cols))
        return attn_fail(ATTN_ERR_SHAPE, "%lld values per K/V row are not whole blocks of %lld",
                         (long long)cols, (long long)attn_dtype_block(dtype));
    return ATTN_OK;
}

attn_status attn_check_batch_arrays(const attn_options *o, const attn_shape *s, int paging)
{
    TRY(check_lengths(o->q_lens, s->batch, s->q_len, "q_lens", "q_len"));
    TRY(check_lengths(o->kv_lens, s->batch, s->kv_len, "kv_lens", "kv_len"));
    TRY(check_offsets(o->q_offsets, o->q_lens, s->batch, s->q_len, "q_offsets", "q_len"));
    TRY(check_offsets(o->kv_offsets, o->kv_lens, s->batch, s->kv_len, "kv_offsets", "kv_len"));
    TRY(check_tree(o, s));
    TRY(check_topk(o, s));
    TRY(check_k_positions(o, s));
    if (paging)
        TRY(check_shared(o, s));
    /* paging fields without a table are a mistake, not a default */
    if (paging && !o->block_table &&
        (o->block_size != 0 || o->num_blocks != 0 || o->block_table_stride != 0))
        return attn_fail(ATTN_ERR_ARG, "block_size, num_blocks or block_table_stride set "
                                       "without a block_table");
    if (paging && !o->block_table && (o->flags & ATTN_SHARED_BLOCK_TABLE))
        return attn_fail(ATTN_ERR_ARG, "ATTN_SHARED_BLOCK_TABLE without a block_table");
    if (paging && o->block_table) {
        if (o->block_size < 1 || o->num_blocks < 1)
            return attn_fail(ATTN_ERR_ARG,
                             "a block_table needs block_size >= 1 and num_blocks >= 1 (%lld, %lld)",
                             (long long)o->block_size, (long long)o->num_blocks);
        if (o->block_table_stride < 0)
            return attn_fail(ATTN_ERR_STRIDE, "block_table_stride %lld is negative",
                             (long long)o->block_table_stride);
        /* a stride left at 0 would give every sequence row 0's pages */
        if (o->block_table_stride == 0 && s->batch > 1 && !(o->flags & ATTN_SHARED_BLOCK_TABLE))
            return attn_fail(ATTN_ERR_ARG,
                             "block_table_stride is 0 with batch %lld: set it to the entries "
                             "between table rows (%lld for a dense [batch][ceil(kv_len / "
                             "block_size)] table), or set ATTN_SHARED_BLOCK_TABLE for one row "
                             "that every sequence reads",
                             (long long)s->batch,
                             (long long)((s->kv_len + o->block_size - 1) / o->block_size));
        if ((o->flags & ATTN_SHARED_BLOCK_TABLE) && o->block_table_stride != 0)
            return attn_fail(ATTN_ERR_ARG,
                             "ATTN_SHARED_BLOCK_TABLE with block_table_stride %lld: every "
                             "sequence reads row 0, so the stride must be 0",
                             (long long)o->block_table_stride);
    }
    return ATTN_OK;
}

void attn_problem_arrays(attn_problem *pb, const attn_options *o)
{
    pb->q_lens = o->q_lens;
    pb->kv_lens = o->kv_lens;
    pb->q_offsets = o->q_offsets;
    pb->kv_offsets = o->kv_offsets;
    pb->q_pos = o->q_pos;
    pb->k_pos = o->k_pos;
}

void attn_problem_geometry(attn_problem *pb, const attn_shape *shape, const attn_options *o,
                           int paged)
{
    const attn_shape s = *shape;
    memset(pb, 0, sizeof *pb);
    pb->batch = s.batch;
    pb->q_heads = s.q_heads;
    pb->kv_heads = s.kv_heads;
    pb->q_len = s.q_len;
    pb->kv_len = s.kv_len;
    pb->head_dim = s.head_dim;
    pb->v_dim = s.v_dim ? s.v_dim : s.head_dim;
    pb->group = s.q_heads / s.kv_heads;
    pb->opt = *o;
    attn_problem_arrays(pb, o);
    pb->parallel_for = o->parallel_for;
    pb->parallel_ctx = o->parallel_ctx;
    if (paged) {
        pb->block_table = o->block_table;
        pb->block_table_stride = o->block_table_stride;
        pb->block_size = o->block_size;
        pb->num_blocks = o->num_blocks;
    }
    pb->q_extent = s.q_len;
    if (o->q_offsets) {
        pb->q_extent = 0;
        for (int64_t b = 0; b < s.batch; b++)
            pb->q_extent = attn_max_i64(pb->q_extent, o->q_lens ? o->q_lens[b] : s.q_len);
    }
}

int attn_seqs_in_order(const int32_t *offsets, const int32_t *lens, int64_t len, int64_t batch)
{
    int64_t end = 0;
    for (int64_t b = 0; b < batch; b++) {
        const int64_t n = lens ? lens[b] : len;
        if (n == 0)
            continue;
        if (offsets[b] < end)
            return 0;
        end = offsets[b] + n;
    }
    return 1;
}

attn_status attn_check_row_scales(int32_t dtype, float per_call, const char *which)
{
    if (!attn_dtype_is_fp8(dtype))
        return attn_fail(ATTN_ERR_ARG, "opt->%s_scales is given with %s->dtype = %d: "
                         "per-row scales are for an FP8 %s", which, which, (int)dtype, which);
    if (per_call != 0.0f)
        return attn_fail(ATTN_ERR_ARG, "opt->%s_scale = %g and opt->%s_scales are both given",
                         which, (double)per_call, which);
    return ATTN_OK;
}

attn_status attn_check_scale_group(int32_t dtype, const attn_tensor *scales, int64_t group,
                                   int64_t cols, const char *which)
{
    if (!attn_dtype_is_asym(dtype)) {
        if (group > 0 && !scales)
            return attn_fail(ATTN_ERR_ARG, "opt->%s_scale_group = %lld without opt->%s_scales",
                             which, (long long)group, which);
        return ATTN_OK;
    }
    if (scales)
        return attn_fail(ATTN_ERR_ARG, "opt->%s_scales with %s->dtype = %s: its records hold "
                         "their scales", which, which, attn_dtype_name(dtype));
    const int64_t g = attn_asym_group(group, cols);
    if (cols % g || g % attn_dtype_block(dtype))
        return attn_fail(ATTN_ERR_SHAPE, "%s->dtype = %s: a group of %lld values does not make "
                         "whole records of %lld values", which, attn_dtype_name(dtype),
                         (long long)g, (long long)cols);
    return ATTN_OK;
}

int64_t attn_kv_range_cols(int32_t dtype, int64_t cols, int64_t group)
{
    return attn_kv_row_units(dtype, cols, group) * attn_dtype_block(dtype);
}

attn_status attn_add_qkv(attn_range_set *set, const attn_shape *s, const attn_options *o,
                         int paged, const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *v)
{
    TRY(attn_add_tensor(set, q, s->batch, s->q_heads, s->q_len, s->head_dim, 0));
    /* paged: the pool, [num_blocks][kv_heads][block_size] rows */
    const int64_t kb = paged ? o->num_blocks : s->batch, kr = paged ? o->block_size : s->kv_len;
    TRY(attn_add_tensor(set, k, kb, s->kv_heads, kr,
                        attn_kv_range_cols(k->dtype, s->head_dim - o->k_tail_dim,
                                           o->k_scale_group), 0));
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    return v ? attn_add_tensor(set, v, kb, s->kv_heads, kr,
                               attn_kv_range_cols(v->dtype, v_dim, o->v_scale_group), 0)
             : ATTN_OK;
}

/* ------------------------------------------------------------ attn_validate's steps */

/* 1. pointers: shape and out, then q and k, v as the operation reads them */
static attn_status check_pointers(const attn_op *op, const attn_shape *shape,
                                  const attn_tensor *q, const attn_tensor *k,
                                  const attn_tensor *v, const attn_tensor *out)
{
    if (!shape || !out || !out->data)
        return attn_fail(ATTN_ERR_NULL, "%s is NULL", !shape ? "shape" : !out ? "out" : "out->data");
    if (op->reads_qk && (!q || !k || !q->data || !k->data))
        return attn_fail(ATTN_ERR_NULL, "%s is NULL", !q ? "q" : !k ? "k" : !q->data ? "q->data"
                                                                                  : "k->data");
    if (op->reads_v && (!v || !v->data))
        return attn_fail(ATTN_ERR_NULL, "%s is NULL", !v ? "v" : "v->data");
    return ATTN_OK;
}

/* The dtypes of the tensors the operation reads and their scales: q a
   float input, k (its own columns) and v K/V tensors with their per-call
   scales, an FP8 k beside a tail scaled by groups, the per-row scales. */
static attn_status check_qkv_dtypes(const attn_op *op, const attn_options *o,
                                    const attn_shape *s, const attn_tensor *q,
                                    const attn_tensor *k, const attn_tensor *v)
{
    const int needs_qk = op->reads_qk;
    const int needs_v = op->reads_v;
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    if (needs_qk && !attn_dtype_is_float_input(q->dtype))
        return attn_fail(ATTN_ERR_ARG, "q->dtype = %d: q is F32, F16 or BF16", (int)q->dtype);
    TRY(attn_check_kv_scales(o));
    const int64_t k_cols = s->head_dim - o->k_tail_dim; /* k's part of a key row (1.9) */
    if (needs_qk)
        TRY(attn_check_kv(k->dtype, k_cols, o->k_scale));
    /* a tail: k's values are decoded before the F32 kernels, an FP8 k's
       with its scale groups (its per-call or per-row scale would multiply
       the whole score, the tail's part too) */
    if (needs_qk && o->k_tail && attn_dtype_is_fp8(k->dtype) && o->k_scale_group == 0)
        return attn_fail(ATTN_ERR_ARG, "opt->k_tail with an FP8 k takes its scales as groups "
                         "(opt->k_scales with opt->k_scale_group > 0; one per row: the group "
                         "head_dim - k_tail_dim = %lld)", (long long)k_cols);
    if (needs_v)
        TRY(attn_check_kv(v->dtype, v_dim, o->v_scale));
    /* a scale group is an FP8 cache's with its scales, or an ASYM cache's
       records': checked by the operations that read that cache (scores
       take the forward's options, whatever v is) */
    if (needs_qk)
        TRY(attn_check_scale_group(k->dtype, o->k_scales, o->k_scale_group, k_cols, "k"));
    if (needs_v)
        TRY(attn_check_scale_group(v->dtype, o->v_scales, o->v_scale_group, v_dim, "v"));
    if (needs_qk && o->k_scales)
        TRY(attn_check_row_scales(k->dtype, o->k_scale, "k"));
    if (needs_v && o->v_scales)
        TRY(attn_check_row_scales(v->dtype, o->v_scale, "v"));
    return ATTN_OK;
}

/* The scale of the scores (opt->scale, else 1 / sqrt(head_dim)) and the
   one the Q.K^T kernels apply, qk_scale: 1 with per-row k scales, the
   product with an FP8 k's per-call scale, which must be a normal float. */
static attn_status score_scales(const attn_op *op, const attn_options *o, const attn_shape *s,
                                const attn_tensor *k, float *scale, float *qk_scale)
{
    *scale = o->scale != 0.0f ? o->scale : (float)(1.0 / sqrt((double)s->head_dim));
    *qk_scale = *scale;
    if (op->reads_qk && o->k_scales && o->k_scale_group == 0)
        *qk_scale = 1.0f; /* each key multiplies by fl(scale * k_scales_j) */
    if (op->reads_qk && attn_dtype_is_fp8(k->dtype) && o->k_scale != 0.0f) {
        *qk_scale = *scale * o->k_scale; /* the one rounding of the folded scale */
        if (!isnormal(*qk_scale))
            return attn_fail(ATTN_ERR_ARG, "scale * opt->k_scale = %g is not a normal float",
                             (double)*qk_scale);
    }
    return ATTN_OK;
}

/* ALiBi's distances |qpos - kpos| must stay below 2^31 (the alibi slot's
   contract): with q_pos given they are up to |q_pos - k_pos| + q_len + kv_len;
   with k_positions each key's own */
static attn_status check_alibi_reach(const attn_options *o, const attn_shape *s)
{
    if (o->alibi_slopes && o->q_pos && !o->k_positions)
        for (int64_t b = 0; b < s->batch; b++) {
            const int64_t rel = o->q_pos[b] - (o->k_pos ? o->k_pos[b] : 0);
            if ((rel < 0 ? -rel : rel) > INT32_MAX - s->q_len - s->kv_len)
                return ATTN_ERR_ARG;
        }
    if (o->alibi_slopes && o->k_positions)
        TRY(check_slot_distances(o, s));
    return ATTN_OK;
}

/* 5. byte ranges, kept in pb->span: the block table (paged), q, k, v, the
   options, out (a packed out's sequences in order), what the operation
   sizes itself (the split-KV workspace) and the row statistics it writes;
   then no output may meet another range */
static attn_status check_ranges(attn_problem *pb, const attn_op *op, const attn_shape *s,
                                const attn_options *o, int paged, const attn_tensor *q,
                                const attn_tensor *k, const attn_tensor *v,
                                const attn_tensor *out, const attn_row_stats *stats)
{
    attn_range_set set = {.n_in = 0};
    if (paged)
        TRY(check_block_table(pb, s, &set));
    if (op->reads_qk) {
        const int first = set.n_in;
        TRY(attn_add_qkv(&set, s, o, paged, q, k, op->reads_v ? v : NULL));
        for (int i = first; i < set.n_in; i++)
            pb->span[i - first] = set.in[i];
    }
    TRY(attn_add_option_ranges(&set, o, s));
    /* packed output: every sequence in one row space (batch_stride 0) */
    const int packed_out = o->q_offsets && out->batch_stride == 0 && s->batch > 1;
    if (packed_out && !attn_seqs_in_order(o->q_offsets, o->q_lens, s->q_len, s->batch))
        return ATTN_ERR_STRIDE;
    const int64_t out_cols[] = {[ATTN_OUT_KV_LEN] = s->kv_len,
                                [ATTN_OUT_V_DIM] = s->v_dim ? s->v_dim : s->head_dim,
                                [ATTN_OUT_HEAD_DIM] = s->head_dim};
    TRY(attn_add_tensor(&set, out, packed_out ? 1 : s->batch, s->q_heads, s->q_len,
                        out_cols[op->out_cols], 1));
    pb->span[3] = set.out[set.n_out - 1];

    pb->splits = 1;
    pb->workspace = NULL;
    const int outs = set.n_out;
    if (op->scratch)
        TRY(op->scratch(pb, o, &set));
    if (set.n_out > outs)
        pb->span[4] = set.out[outs];

    if (stats && op->writes_stats) {
        float *const st[3] = {stats->lse, stats->max_score, stats->entropy};
        for (int i = 0; i < 3; i++)
            if (st[i])
                TRY(attn_add_array(&set, st[i], s->batch * s->q_heads * s->q_len, sizeof(float),
                                   1));
    }
    return attn_check_disjoint(&set);
}

/* The checked views the tasks read, into pb. */
static void fill_views(attn_problem *pb, const attn_op *op, const attn_options *o,
                       const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                       const attn_tensor *out, const attn_row_stats *stats)
{
    const int needs_qk = op->reads_qk;
    const int needs_v = op->reads_v;
    if (o->mask)
        pb->mask = *o->mask;
    if (o->bias)
        pb->bias = *o->bias;
    if (o->sinks)
        pb->sinks = *o->sinks;
    if (o->alibi_slopes)
        pb->alibi = *o->alibi_slopes;
    if (needs_qk && o->k_scales) {
        pb->k_scales = *o->k_scales;
        pb->k_group = o->k_scale_group;
    }
    if (needs_v && o->v_scales) {
        pb->v_scales = *o->v_scales;
        pb->v_group = o->v_scale_group;
    }
    /* an ASYM cache is staged as FP8 groups are, its records' group the
       scale group (src/driver/kv.h); no scales view */
    if (needs_qk && attn_dtype_is_asym(k->dtype))
        pb->k_group = attn_asym_group(o->k_scale_group, pb->head_dim - o->k_tail_dim);
    if (needs_v && attn_dtype_is_asym(v->dtype))
        pb->v_group = attn_asym_group(o->v_scale_group, pb->v_dim);
    if (needs_qk && o->k_tail) {
        pb->k_tail = *o->k_tail;
        pb->k_tail_dim = o->k_tail_dim;
    }
    if (needs_qk) {
        pb->q = *q;
        pb->k = *k;
    }
    if (needs_v)
        pb->v = *v;
    pb->out = *out;
    if (stats && op->writes_stats)
        pb->stats = *stats;
}

attn_status attn_validate(attn_problem *pb, const attn_op *op, const attn_shape *shape,
                          const attn_options *opt, const attn_tensor *q,
                          const attn_tensor *k, const attn_tensor *v,
                          const attn_tensor *out, const attn_row_stats *stats)
{
    TRY(check_pointers(op, shape, q, k, v, out));

    /* 2.-4. options, shape, arguments */
    attn_options o;
    TRY(attn_check_shape_options(shape, opt, &o));
    const attn_shape s = *shape;
    TRY(check_qkv_dtypes(op, &o, &s, q, k, v));
    float scale, qk_scale;
    TRY(score_scales(op, &o, &s, k, &scale, &qk_scale));
    if (!attn_dtype_is_output(out->dtype, op->rounds_out))
        return attn_fail(ATTN_ERR_ARG, "out->dtype = %d is not an output dtype of this call",
                         (int)out->dtype);
    TRY(check_option_dtypes(&o));
    TRY(attn_check_batch_arrays(&o, &s, op->reads_qk));
    TRY(check_alibi_reach(&o, &s));

    /* an operation that reads no K: the paging fields do not concern it */
    const int paged = op->reads_qk && o.block_table;
    attn_problem_geometry(pb, &s, &o, paged); /* before check_block_table: the masks need it */
    pb->op = op;
    pb->scale = scale;
    pb->qk_scale = qk_scale;
    pb->v_scale = op->reads_v && attn_dtype_is_fp8(v->dtype) && o.v_scale != 0.0f ? o.v_scale
                                                                                    : 1.0f;
    TRY(check_ranges(pb, op, &s, &o, paged, q, k, v, out, stats));
    fill_views(pb, op, &o, q, k, v, out, stats);
    return ATTN_OK;
}

attn_status attn_validate_rows(int64_t rows, int64_t cols, int64_t row_stride)
{
    if (rows <= 0 || cols <= 0)
        return ATTN_ERR_SHAPE;
    if (row_stride < cols)
        return ATTN_ERR_STRIDE;
    int64_t last;
    if (__builtin_mul_overflow(rows - 1, row_stride, &last) ||
        __builtin_add_overflow(last, cols, &last) ||
        last > (int64_t)(PTRDIFF_MAX / (ptrdiff_t)sizeof(float)))
        return ATTN_ERR_SHAPE;
    return ATTN_OK;
}

int attn_rows_overlap(const float *a, int64_t a_rows, int64_t a_cols, int64_t a_stride,
                      const float *b, int64_t b_rows, int64_t b_cols, int64_t b_stride)
{
    /* sizes were validated: (rows - 1) * stride + cols fits */
    attn_byte_range ra = {(uintptr_t)a, (uintptr_t)(a + (a_rows - 1) * a_stride + a_cols)};
    attn_byte_range rb = {(uintptr_t)b, (uintptr_t)(b + (b_rows - 1) * b_stride + b_cols)};
    return attn_ranges_meet(ra, rb);
}

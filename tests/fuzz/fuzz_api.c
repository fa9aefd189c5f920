/* SPDX-License-Identifier: MIT */
/*
 * API fuzzer: every public entry point, with shapes, strides, lengths,
 * options, dtypes and pointers decoded from the input, on buffers exactly as
 * large as the arguments claim and each ending at (or starting after) an
 * inaccessible page.
 *
 * Next to the library it runs a model of the contract in include/attn.h that
 * says which calls must fail, and with which statuses. Then:
 *   - a call the model rejects must return one of those statuses and leave
 *     every byte of every buffer as it was;
 *   - a call the model accepts must return ATTN_OK, leave every input and
 *     every output byte outside the described view as it was, call the
 *     parallel_for hook exactly once, and give the same bits whatever order
 *     the hook runs the tasks in;
 *   - with finite, moderate inputs (NaN and inf allowed only where the
 *     contract says they are never read: padded rows and keys, and under
 *     masks), the results obey the contract: -inf scores exactly where a key
 *     is hidden, weights 0 there and rows summing to 1, fully hidden rows
 *     giving 0 and (-inf, -inf, 0) stats, outputs inside the convex hull of
 *     the visible values, and never a NaN.
 * The model reads only attn.h (and tests/ref/ref.c's visibility rule, which is
 * written from the same header); it shares no code with src/.
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "dtypes.h"
#include "fuzz_util.h"
#include "internal.h"
#include "ops_list.h"
#include "option_list.h"
#include "ref/ref.h"
#include "tolerance.h"

/* Largest buffer the fuzzer allocates; a valid call needing more is skipped. */
#define CAP_BYTES ((int64_t)4 << 20)
/* Largest multiply-add count of a call that is actually run. */
#define CAP_WORK ((int64_t)3 << 20)

#define BIT(s) (1u << (s))

/* The operations its corpus draws (OP_FUZZ_DRAWN of ops_list.h), then this
   fuzzer's own pseudo-operation: calls outside them (version, strerror, ISA
   names, thread pools). */
enum { OP_MISC = OP_FUZZ_DRAWN, FUZZ_OP_COUNT };

/* ------------------------------------------------------------ values */

typedef enum value_class {
    VALUES_TAME,     /* finite, |x| <= 2 */
    VALUES_POISONED, /* tame, but NaN/inf where the contract says nothing reads them */
    VALUES_WILD,     /* anything: NaN, inf, huge, subnormal */
} value_class;

static float special_value(fz_rng *g)
{
    static const float specials[] = {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1e30f,
                                     -1e30f, FLT_MIN, 1e-45f, -0.0f, 0.0f, 65504.0f};
    return specials[fz_rng_next(g) % (sizeof specials / sizeof specials[0])];
}

static float draw_value(fz_rng *g, value_class vc, float lo, float hi)
{
    if (vc == VALUES_WILD && fz_rng_next(g) % 4 == 0)
        return special_value(g);
    return fz_rng_float(g, lo, hi);
}

/* F16 or BF16: what the forward's out may be besides F32 (attn.h). */
/* F16 or BF16: the rounded outputs of src/dtype_list.h (tests/dtypes.h). */
static int out16(int32_t dtype)
{
    return test_dtype_is(dtype, DT_OUT_ROUNDED);
}

static uint16_t to_half_bits(float f, int32_t dtype)
{
    return dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(f) : ref_f32_to_bf16(f);
}

/* Bytes per element of the dtypes this model sizes: the float and bool
   kinds of src/dtype_list.h (through internal.h; the list is data, which
   the model may read, not src/ code). 0 for the others on purpose: the
   model does not size Q8_0, Q4_0 or FP8 tensors (fuzz_quant.c does; see the
   K/V dtypes in run_attention), nor unknown values. */
static size_t dtype_bytes(int32_t dtype)
{
    switch (dtype) {
#define MODEL_DTYPE_BYTES(ID, name, block, bytes, kind, q, kv, out)                  \
    case ATTN_DTYPE_##ID:                                                            \
        return ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_FLOAT ||                    \
                       ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_BOOL                \
                   ? (size_t)(bytes)                                                 \
                   : 0;
        ATTN_DTYPE_LIST(MODEL_DTYPE_BYTES)
#undef MODEL_DTYPE_BYTES
    default: return 0;
    }
}

/* ------------------------------------------------------------ tensors */

typedef struct tens {
    const char *name;
    int passed;         /* a non-NULL attn_tensor pointer is passed */
    int is_output;
    attn_tensor t;
    int64_t ext[4];     /* batch, head, row, col extents of the view */
    int64_t bytes;      /* exact extent in bytes, -1 when not addressable */
    int allocated;      /* data points at a buffer of exactly `bytes` */
    int fake;           /* data is an address near the top of memory, not a buffer */
    fz_buf buf;
} tens;

/* Products of hostile extents wrap (two's complement) instead of overflowing. */
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

/* Strides for a tensor of extents ext[4], decoded from the input. */
static void pick_strides(fz_reader *r, tens *T, int hostile)
{
    const int64_t nh = T->ext[1], nr = T->ext[2], nc = T->ext[3];
    int64_t *bs = &T->t.batch_stride, *hs = &T->t.head_stride, *rs = &T->t.row_stride;
    const int mode = fz_u8(r) % 10;
    const int64_t pad = mode == 1 ? fz_range(r, 1, 9) : 0;
    const int64_t small = nc > 0 && nc < ((int64_t)1 << 40) ? nc : 1;
    switch (mode) {
    case 0:
    case 1: /* [B][H][L][C], rows possibly padded */
        *rs = wadd(nc, pad);
        *hs = wadd(wmul(nr, *rs), pad);
        *bs = wadd(wmul(nh, *hs), pad);
        break;
    case 2: /* [B][L][H][C] */
        *hs = nc;
        *rs = wmul(nh, nc);
        *bs = wmul(nr, *rs);
        break;
    case 3: /* broadcast: some strides 0 */
        *rs = fz_chance(r, 128) ? 0 : nc;
        *hs = fz_chance(r, 128) ? 0 : wmul(nr, nc);
        *bs = fz_chance(r, 128) ? 0 : wmul(wmul(nh, nr), nc);
        break;
    case 4: /* anything small, overlapping or interleaved */
        *rs = fz_range(r, 0, 2 * small + 2);
        *hs = fz_range(r, 0, 3 * small + 2);
        *bs = fz_range(r, 0, 4 * small + 2);
        break;
    case 5: /* rows overlap */
        *rs = small > 1 ? small - fz_range(r, 1, small - 1) : 0;
        *hs = wmul(nr, nc);
        *bs = wmul(wmul(nh, nr), nc);
        break;
    default: /* dense */
        *rs = nc;
        *hs = wmul(nr, nc);
        *bs = wmul(wmul(nh, nr), nc);
        break;
    }
    if (hostile && fz_chance(r, 96)) {
        static const int64_t wild[] = {-1, -2, INT64_MIN, INT64_MAX, INT64_MAX / 2,
                                       INT64_MAX / 4 + 1, (int64_t)1 << 40, (int64_t)1 << 62,
                                       (int64_t)1 << 31, -((int64_t)1 << 40), INT32_MAX};
        int64_t w = wild[fz_u8(r) % (sizeof wild / sizeof wild[0])];
        int which = fz_u8(r) % 3;
        if (which == 0)
            *bs = w;
        else if (which == 1)
            *hs = w;
        else
            *rs = w;
    }
}

/*
 * Exact offset of the last element (in elements); -1 for a negative stride.
 * Each term is below 2^126, so three of them fit in 128 unsigned bits.
 */
static __int128 last_offset(const tens *T, unsigned __int128 *last)
{
    const int64_t s[3] = {T->t.batch_stride, T->t.head_stride, T->t.row_stride};
    *last = (unsigned __int128)(T->ext[3] - 1);
    for (int i = 0; i < 3; i++) {
        if (s[i] < 0)
            return -1;
        *last += (unsigned __int128)(T->ext[i] - 1) * (unsigned __int128)s[i];
    }
    return 0;
}

/*
 * Output views: 1 when two elements share an address. `nested` is set when
 * some order of the outer dimensions has each stride step over everything
 * inside it (the layouts the header calls valid; other non-overlapping
 * interleavings may be rejected).
 */
static int output_overlaps(const tens *T, int64_t last, int *nested)
{
    const int64_t ext[3] = {T->ext[0], T->ext[1], T->ext[2]};
    const int64_t s[3] = {T->t.batch_stride, T->t.head_stride, T->t.row_stride};
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    *nested = 0;
    for (int p = 0; p < 6 && !*nested; p++) {
        __int128 span = T->ext[3];
        int ok = 1;
        for (int a = 2; a >= 0; a--) { /* perms[p][2] innermost */
            int d = perms[p][a];
            if (ext[d] == 1)
                continue;
            if (s[d] < span) {
                ok = 0;
                break;
            }
            span += (__int128)s[d] * (ext[d] - 1);
        }
        *nested = ok;
    }
    uint8_t *seen = calloc((size_t)last + 1, 1);
    if (!seen)
        abort();
    int overlap = 0;
    for (int64_t b = 0; b < ext[0] && !overlap; b++)
        for (int64_t h = 0; h < ext[1] && !overlap; h++)
            for (int64_t i = 0; i < ext[2] && !overlap; i++)
                for (int64_t c = 0; c < T->ext[3]; c++) {
                    int64_t at = b * s[0] + h * s[1] + i * s[2] + c;
                    if (seen[at]) {
                        overlap = 1;
                        break;
                    }
                    seen[at] = 1;
                }
    free(seen);
    return overlap;
}

/* Statuses this tensor forces (must) or permits (may); extent into T->bytes. */
static void model_tensor(tens *T, unsigned *must, unsigned *may)
{
    T->bytes = -1;
    if (!T->passed || !T->t.data)
        return; /* the NULL rule covers it */
    const size_t esize = dtype_bytes(T->t.dtype);
    if (!esize)
        return; /* the dtype rule covers it */
    unsigned __int128 last;
    if (last_offset(T, &last) < 0) {
        *must |= BIT(ATTN_ERR_STRIDE);
        return;
    }
    if (last >= (unsigned __int128)PTRDIFF_MAX) {
        *must |= BIT(ATTN_ERR_SHAPE);
        return;
    }
    const __int128 bytes = ((__int128)last + 1) * (__int128)esize;
    if (bytes > (__int128)PTRDIFF_MAX ||
        (__int128)(uintptr_t)T->t.data + bytes > (__int128)UINTPTR_MAX) {
        *must |= BIT(ATTN_ERR_SHAPE);
        return;
    }
    if (bytes > CAP_BYTES) {
        /* too large to allocate: the call is only made when another rule
           rejects it, and then this tensor's own verdict is not checked */
        *may |= BIT(ATTN_ERR_SHAPE) | (T->is_output ? BIT(ATTN_ERR_STRIDE) : 0);
        return;
    }
    T->bytes = (int64_t)bytes;
    if (T->is_output) {
        int nested;
        if (output_overlaps(T, (int64_t)last, &nested))
            *must |= BIT(ATTN_ERR_STRIDE);
        else if (!nested)
            *may |= BIT(ATTN_ERR_STRIDE);
    }
}

/* Marks which bytes of T's buffer belong to the view (for the untouched check). */
static uint8_t *view_bytes(const tens *T)
{
    uint8_t *in = calloc((size_t)T->bytes + 1, 1);
    if (!in)
        abort();
    const size_t es = dtype_bytes(T->t.dtype);
    for (int64_t b = 0; b < T->ext[0]; b++)
        for (int64_t h = 0; h < T->ext[1]; h++)
            for (int64_t i = 0; i < T->ext[2]; i++) {
                int64_t at = b * T->t.batch_stride + h * T->t.head_stride + i * T->t.row_stride;
                memset(in + at * (int64_t)es, 1, (size_t)T->ext[3] * es);
            }
    return in;
}

/* ------------------------------------------------------------ the hook */

typedef struct hook_state {
    int calls;
    int order; /* 0 forward, 1 reverse, 2 odd indices first */
    size_t last_count;
} hook_state;

/* Used when the caller's attn_options ends before parallel_ctx (it is NULL then). */
static hook_state g_ctxless_hook;

static void permuting_parallel_for(void *pool_ctx, attn_task_fn task, void *task_ctx,
                                   size_t count)
{
    hook_state *hs = pool_ctx ? pool_ctx : &g_ctxless_hook;
    hs->calls++;
    hs->last_count = count;
    if (hs->order == 1) {
        for (size_t i = count; i-- > 0;)
            task(task_ctx, i);
    } else if (hs->order == 2) {
        for (size_t i = 1; i < count; i += 2)
            task(task_ctx, i);
        for (size_t i = 0; i < count; i += 2)
            task(task_ctx, i);
    } else {
        for (size_t i = 0; i < count; i++)
            task(task_ctx, i);
    }
}

/* ------------------------------------------------------------ snapshots */

/* Every buffer a call can reach, with its bytes before the call. */
#define MAX_REGIONS 16
typedef struct region {
    const char *name;
    unsigned char *data;
    size_t bytes;
    unsigned char *before;
    const uint8_t *writable; /* NULL: must stay untouched; else 1 where a valid call may write */
} region;

typedef struct snapshot {
    region r[MAX_REGIONS];
    int n;
} snapshot;

static void snap_add(snapshot *s, const char *name, void *data, size_t bytes,
                     const uint8_t *writable)
{
    if (!data || s->n == MAX_REGIONS)
        return;
    region *g = &s->r[s->n++];
    g->name = name;
    g->data = data;
    g->bytes = bytes;
    g->before = malloc(bytes + 1);
    if (!g->before)
        abort();
    memcpy(g->before, data, bytes);
    g->writable = writable;
}

/* Everything identical (honour_writable = 0) or identical outside writable bytes. */
static void snap_verify(const snapshot *s, int honour_writable, const char *op, int status)
{
    for (int k = 0; k < s->n; k++) {
        const region *g = &s->r[k];
        for (size_t i = 0; i < g->bytes; i++) {
            if (g->data[i] == g->before[i])
                continue;
            if (honour_writable && g->writable && g->writable[i])
                continue;
            FZ_CHECK(0, "%s (status %d): byte %zu of %s changed (%02x -> %02x)%s", op, status, i,
                     g->name, g->before[i], g->data[i],
                     honour_writable ? " outside what the call may write"
                                     : " although the call was rejected");
        }
    }
}

static void snap_restore(const snapshot *s)
{
    for (int k = 0; k < s->n; k++)
        memcpy(s->r[k].data, s->r[k].before, s->r[k].bytes);
}

static void snap_free(snapshot *s)
{
    for (int k = 0; k < s->n; k++)
        free(s->r[k].before);
    s->n = 0;
}

/* ------------------------------------------------------------ status checks */

static void check_status(const char *op, int status, unsigned must, unsigned may)
{
    if (must) {
        FZ_CHECK(status != ATTN_OK && ((must | may) & BIT(status)),
                 "%s: returned %d (%s); the model expects one of mask 0x%x", op, status,
                 attn_strerror((attn_status)status), must | may);
    } else {
        FZ_CHECK(status == ATTN_OK || (may & BIT(status)),
                 "%s: valid call returned %d (%s) (tolerated mask 0x%x)", op, status,
                 attn_strerror((attn_status)status), may);
    }
}

/* ------------------------------------------------------------ attention operations */

typedef struct problem {
    attn_shape shape;
    int shape_null;
    int empty; /* batch, q_len or kv_len 0: see run_attention */
    /* the options as the caller lays them out, and what the library must read */
    fz_buf opt_buf;
    attn_options *opt; /* NULL or inside opt_buf (struct_size bytes) */
    attn_options eff;  /* effective options (defaults where struct_size stops) */
    tens q, k, v, out, mask, bias, sinks, alibi; /* all[] order: see run_attention */
    fz_buf qlen_buf, kvlen_buf, kpos_buf;
    int32_t *q_lens, *kv_lens;
    int64_t *k_positions; /* [batch][kv_len] (1.11), or NULL */
    fz_buf stat_buf[3];
    attn_row_stats stats;
    int stats_passed;
    hook_state hook;
    value_class vc;
} problem;

static int64_t pick_dim(fz_reader *r, int hostile, int64_t lo, int64_t hi)
{
    if (hostile && fz_chance(r, 40)) {
        static const int64_t wild[] = {0,         -1,        INT64_MIN,          INT64_MAX,
                                       INT32_MAX, (int64_t)INT32_MAX + 1, ATTN_MAX_HEAD_DIM,
                                       ATTN_MAX_HEAD_DIM + 1, (int64_t)1 << 40, 255, 257};
        return wild[fz_u8(r) % (sizeof wild / sizeof wild[0])];
    }
    return fz_range(r, lo, hi);
}

static int32_t pick_dtype(fz_reader *r, int32_t usual, int hostile)
{
    if (usual == ATTN_DTYPE_F32 && fz_chance(r, 90))
        usual = (int32_t)fz_range(r, 0, ATTN_KV_FLOAT_DTYPES - 1); /* F32, F16 or BF16 inputs */
    if (hostile && fz_chance(r, 24)) {
        static const int32_t wild[] = {-1, 3, 4, 1000, INT32_MIN, ATTN_DTYPE_F16, ATTN_DTYPE_BOOL};
        return wild[fz_u8(r) % (sizeof wild / sizeof wild[0])];
    }
    return usual;
}

static void fill_tensor_values(tens *T, fz_rng *g, value_class vc, float lo, float hi)
{
    if (!T->allocated)
        return;
    const int32_t dt = T->t.dtype;
    const size_t es = dtype_bytes(dt);
    if (!es)
        return;
    const size_t n = (size_t)T->bytes / es;
    for (size_t i = 0; i < n; i++) {
        float x = draw_value(g, vc, lo, hi);
        if (dt == ATTN_DTYPE_F32) {
            memcpy(T->buf.data + 4 * i, &x, 4);
        } else if (dt == ATTN_DTYPE_BOOL) {
            uint8_t m = (uint8_t)fz_rng_next(g);
            T->buf.data[i] = (m & 3) == 0 ? 0 : m | 1; /* mostly visible, any nonzero */
        } else {
            uint16_t h = vc == VALUES_WILD && fz_rng_next(g) % 8 == 0
                             ? (uint16_t)fz_rng_next(g)
                             : to_half_bits(x, dt);
            memcpy(T->buf.data + 2 * i, &h, 2);
        }
    }
}

static void set_element(tens *T, int64_t b, int64_t h, int64_t i, int64_t c, float x)
{
    unsigned char *p = ref_tensor_at(&T->t, b, h, i, c);
    if (T->t.dtype == ATTN_DTYPE_F32) {
        memcpy(p, &x, 4);
    } else {
        uint16_t bits = to_half_bits(x, T->t.dtype);
        memcpy(p, &bits, 2);
    }
}

/* Whether the library must look at tensor w of all[] (see run_attention). */
static int tensor_used(const problem *P, int w, const tens *T)
{
    switch (w) {
    case 4: return P->eff.mask != NULL;
    case 5: return P->eff.bias != NULL;
    case 6: return P->eff.sinks != NULL;
    case 7: return P->eff.alibi_slopes != NULL;
    default: return T->passed;
    }
}

static int64_t valid_q(const problem *P, int64_t b)
{
    return P->eff.q_lens ? P->eff.q_lens[b] : P->shape.q_len;
}

static int64_t valid_kv(const problem *P, int64_t b)
{
    return P->eff.kv_lens ? P->eff.kv_lens[b] : P->shape.kv_len;
}

/* 1 when no two elements of the view share an address (brute force). */
static int views_disjoint(const tens *T)
{
    int nested;
    return T->bytes >= 0 && !output_overlaps(T, T->bytes / (int64_t)dtype_bytes(T->t.dtype) - 1,
                                             &nested);
}

/*
 * NaN and inf where the header promises they are never read for arithmetic:
 * query rows beyond q_lens, K/V rows beyond kv_lens, and bias entries (and
 * input scores) that a mask hides. Only tensors whose elements are all
 * distinct are poisoned, so no poisoned element is also a readable one.
 */
static void poison_unread(problem *P, int op, fz_rng *g)
{
    const attn_shape *s = &P->shape;
    if (P->q.allocated && views_disjoint(&P->q))
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = valid_q(P, b); i < s->q_len; i++)
                    for (int64_t t = 0; t < s->head_dim; t++)
                        set_element(&P->q, b, h, i, t, fz_rng_next(g) & 1 ? NAN : INFINITY);
    tens *kv[2] = {&P->k, op == OP_FORWARD ? &P->v : NULL};
    for (int w = 0; w < 2; w++) {
        tens *T = kv[w];
        if (!T || !T->allocated || !views_disjoint(T))
            continue;
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->kv_heads; h++)
                for (int64_t j = valid_kv(P, b); j < s->kv_len; j++)
                    for (int64_t t = 0; t < T->ext[3]; t++)
                        set_element(T, b, h, j, t, fz_rng_next(g) & 1 ? -INFINITY : NAN);
    }
    /* hidden bias entries (and hidden input scores for mask_apply) */
    tens *hb[2] = {P->eff.bias && P->bias.allocated && views_disjoint(&P->bias) ? &P->bias : NULL,
                   op == OP_MASK_APPLY ? &P->out : NULL};
    for (int w = 0; w < 2; w++) {
        tens *T = hb[w];
        if (!T)
            continue;
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = 0; i < s->q_len; i++)
                    for (int64_t j = 0; j < s->kv_len; j++) {
                        if (!ref_visible(s, &P->eff, b, h, i, j))
                            set_element(T, b, h, i, j, NAN);
                    }
    }
}

/* An output element, decoded by tests/ref/ref.c (F32, or the forward's F16/BF16). */
static float out_at(const tens *T, int64_t b, int64_t h, int64_t i, int64_t j)
{
    return (float)ref_tensor_get(&T->t, b, h, i, j);
}

static float scores_before(const snapshot *sn, const tens *T, int64_t b, int64_t h, int64_t i,
                           int64_t j)
{
    /* the out tensor is the first region recorded for mask_apply */
    const unsigned char *p = ref_tensor_at(&T->t, b, h, i, j);
    float x;
    memcpy(&x, sn->r[0].before + (p - sn->r[0].data), 4);
    return x;
}

/*
 * Bounds of the contract checks on one row of n visible keys whose scores
 * are whatever the table computed (so only the softmax's own roundings
 * count), from tests/tolerance.h's "softmax of a row" with exact inputs:
 *   a_j = u (m - s_j) + 2 TOL_EXP_ULP u, and sum_j p_j (m - s_j) = W / l
 *   = H - log l <= log n, so sum_j p_j a_j <= u log n + 2 TOL_EXP_ULP u;
 *   r_l = gamma(n) + sum_j p_j a_j + R c_R;
 *   sum_j p_j rel_j = sum_j p_j a_j + r_l + 2u + R c_R  ("rel" of a weight);
 *   the second-order factor (1 + rel_j) is at most 2: a rel_j above 1 needs
 *   m - s_j > 2^23, where p_j is 0 and only the TOL_TINY floor applies.
 * R: online rescales; at most one per key plus the split-KV merge (each key
 * block holds at least one key), so R = kv_len + 1 covers every table.
 */
typedef struct row_bounds {
    double sum;  /* |sum_j p_j - 1| (weights, R = 0) */
    double hull; /* forward: distance outside [min v, max v], per unit of max |v| */
    double hull_abs;
    double lse;  /* lse in [max - lse, max + log n + lse] */
    double ent;  /* entropy <= log n + ent */
} row_bounds;

static row_bounds contract_bounds(double n, double R, double abs_max)
{
    const double u = TOL_U, ln = log(n);
    const double pa = u * ln + 2.0 * TOL_EXP_ULP * u;
    const double r_l = tol_gamma(n) + pa + R * TOL_RESCALE;
    const double rel = pa + r_l + 2.0 * u + R * TOL_RESCALE;
    row_bounds b;
    /* sum of the weights' errors, plus n TOL_TINY floors and the double sum
       of n floats here (n * 2^-53) */
    b.sum = 2.0 * rel + n * (TOL_TINY + 0x1p-53);
    /* o = sum p_j v_j: weights (as above), the accumulation gamma(n) and the
       rescales, the final rounding u, all relative to sum p_j |v_j| <= max|v|;
       plus n TOL_TINY |v_j| and the products' underflow (tol_under_pv) */
    b.hull = 2.0 * rel + tol_gamma(n) + R * TOL_RESCALE + u + n * TOL_TINY;
    b.hull_abs = tol_under_pv(n, R);
    /* lse: the error of log l (r_l / (1 - r_l)), of logf (TOL_LOG_ULP ulp of
       log l <= log n) and of the final add (u |lse|) */
    b.lse = r_l / (1.0 - r_l) + 2.0 * TOL_LOG_ULP * u * ln + u * (abs_max + ln);
    /* H = log l + W / l with W / l <= log n: log l's error as for lse; W's
       relative error r_w = gamma(n + 1) + a_max + 2u + R c_R, with a_max over
       weights above FLT_MIN, i.e. m - s_j < 88 (e^-88 < FLT_MIN); the
       division's r_l + u; the rescales on both parts; the final add u H.
       Terms e_j (m - s_j) with e_j below FLT_MIN: a computed e_j is nonzero
       only for m - s_j < 104 (e^-104 < 2^-149), so each errs by at most
       TOL_TINY * 105 + eta */
    const double r_w = tol_gamma(n + 1.0) + 88.0 * u + 2.0 * TOL_EXP_ULP * u + 2.0 * u +
                       R * TOL_RESCALE;
    b.ent = r_l / (1.0 - r_l) + 2.0 * TOL_LOG_ULP * u * ln + ln * (r_w + r_l + u) +
            R * TOL_RESCALE * (1.0 + ln) + u * ln + n * (105.0 * TOL_TINY + TOL_ETA);
    return b;
}

/* Contract checks on the results of a valid call with tame inputs. */
static void check_results(problem *P, int op, const snapshot *sn)
{
    const attn_shape *s = &P->shape;
    const int64_t group = s->q_heads / s->kv_heads;
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    const char *name = op_names[op];
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++) {
                const size_t row = (size_t)((b * s->q_heads + h) * s->q_len + i);
                int64_t visible = 0;
                double sum = 0.0;
                /* a sink: one more softmax entry without a value (tame: finite) */
                const int has_sink = P->eff.sinks && i < valid_q(P, b);
                const double sink =
                    has_sink ? ref_tensor_get(P->eff.sinks, b, h, 0, 0) : -INFINITY;
                for (int64_t j = 0; j < s->kv_len; j++) {
                    const int vis = ref_visible(s, &P->eff, b, h, i, j);
                    visible += vis;
                    if (op == OP_FORWARD)
                        continue;
                    const float x = out_at(&P->out, b, h, i, j);
                    if (op == OP_WEIGHTS) {
                        FZ_CHECK(vis ? (x >= 0.0f && x <= 1.0f) : x == 0.0f,
                                 "%s: weight [%lld][%lld][%lld][%lld] = %g (%s)", name,
                                 (long long)b, (long long)h, (long long)i, (long long)j, x,
                                 vis ? "visible" : "hidden: must be 0");
                        sum += x;
                        continue;
                    }
                    FZ_CHECK(vis ? isfinite(x) : x == -INFINITY,
                             "%s: score [%lld][%lld][%lld][%lld] = %g (%s)", name, (long long)b,
                             (long long)h, (long long)i, (long long)j, x,
                             vis ? "visible: must be finite" : "hidden: must be -inf");
                    if (op == OP_MASK_APPLY && vis && P->eff.softcap == 0.0f &&
                        !P->eff.alibi_slopes) {
                        /* no softcap, no ALiBi (an FMA or not): the visible
                           score is exactly s (+ bias) */
                        float want = scores_before(sn, &P->out, b, h, i, j);
                        if (P->eff.bias)
                            want += (float)ref_tensor_get(P->eff.bias, b, h, i, j);
                        FZ_CHECK(memcmp(&want, &x, 4) == 0,
                                 "mask_apply: [%lld][%lld][%lld][%lld] = %a, want %a",
                                 (long long)b, (long long)h, (long long)i, (long long)j, x, want);
                    }
                }
                const double rescales = op == OP_FORWARD ? (double)s->kv_len + 1.0 : 0.0;
                const float *mx_row = P->stats_passed ? P->stats.max_score : NULL;
                row_bounds rb = contract_bounds(
                    (double)(visible ? visible + (has_sink ? 1 : 0) : 1), rescales,
                    mx_row && visible ? fabs((double)mx_row[row]) : 0.0);
                /* the bf16 mode rounds each weight and value (attn.h):
                   2^-7 + 2^-16 more per term of o, relative to max |v| */
                if (P->eff.precision == ATTN_PRECISION_BF16)
                    rb.hull += 0x1p-7 + 0x1p-16;
                if (op == OP_WEIGHTS && visible && !has_sink)
                    FZ_CHECK(fabs(sum - 1.0) <= rb.sum,
                             "weights: row [%lld][%lld][%lld] sums to %.9g over %lld keys "
                             "(bound %.3g)",
                             (long long)b, (long long)h, (long long)i, sum, (long long)visible,
                             rb.sum);
                if (op == OP_WEIGHTS && visible && has_sink) /* the sink keeps the rest */
                    FZ_CHECK(sum <= 1.0 + rb.sum,
                             "weights: row [%lld][%lld][%lld] with a sink sums to %.9g > 1 "
                             "(bound %.3g)",
                             (long long)b, (long long)h, (long long)i, sum, rb.sum);
                if (op == OP_FORWARD) {
                    for (int64_t t = 0; t < v_dim; t++) {
                        const float o = out_at(&P->out, b, h, i, t);
                        if (!visible) {
                            FZ_CHECK(o == 0.0f, "forward: fully hidden row [%lld][%lld][%lld] "
                                     "gives %g, want 0", (long long)b, (long long)h, (long long)i, o);
                            continue;
                        }
                        /* with a sink the weights sum to less than 1: 0 joins the hull */
                        double lo = has_sink ? 0.0 : INFINITY, hi = has_sink ? 0.0 : -INFINITY,
                               mag = 0.0;
                        for (int64_t j = 0; j < s->kv_len; j++) {
                            if (!ref_visible(s, &P->eff, b, h, i, j))
                                continue;
                            double vj = ref_tensor_get(&P->v.t, b, h / group, j, t);
                            lo = fmin(lo, vj);
                            hi = fmax(hi, vj);
                            mag = fmax(mag, fabs(vj));
                        }
                        double slack = rb.hull * mag + rb.hull_abs;
                        if (out16(P->out.t.dtype)) /* one more rounding (tolerance.h) */
                            slack += TOL_OUT16_U(P->out.t.dtype) * (mag + slack) +
                                     TOL_OUT16_ABS(P->out.t.dtype);
                        FZ_CHECK(isfinite(o) && o >= lo - slack && o <= hi + slack,
                                 "forward: out[%lld][%lld][%lld][%lld] = %.9g outside the hull "
                                 "[%.9g, %.9g] of %lld visible values", (long long)b,
                                 (long long)h, (long long)i, (long long)t, o, lo, hi,
                                 (long long)visible);
                    }
                }
                if ((op == OP_WEIGHTS || op == OP_FORWARD) && P->stats_passed) {
                    const float *lse = P->stats.lse, *mx = P->stats.max_score,
                                *ent = P->stats.entropy;
                    /* a hidden row's stats are its sink's (-inf without one) */
                    const float only = (float)sink;
                    if (!visible) {
                        FZ_CHECK((!lse || lse[row] == only) && (!mx || mx[row] == only) &&
                                     (!ent || ent[row] == 0.0f),
                                 "%s: stats of fully hidden row %zu: %g %g %g, want %g %g 0",
                                 name, row, lse ? lse[row] : 0.0, mx ? mx[row] : 0.0,
                                 ent ? ent[row] : 0.0, (double)only, (double)only);
                    } else {
                        /* n visible keys, plus the sink as one more entry */
                        const double log_n = log((double)(visible + has_sink));
                        FZ_CHECK(!lse || isfinite(lse[row]), "%s: lse[%zu] = %g", name, row,
                                 lse ? lse[row] : 0.0);
                        FZ_CHECK(!mx || isfinite(mx[row]), "%s: max_score[%zu] = %g", name, row,
                                 mx ? mx[row] : 0.0);
                        FZ_CHECK(!lse || !mx || (lse[row] >= mx[row] - rb.lse &&
                                                 lse[row] <= mx[row] + log_n + rb.lse),
                                 "%s: lse %g not in [max, max + log n] (max %g, n %lld)", name,
                                 lse ? lse[row] : 0.0, mx ? mx[row] : 0.0, (long long)visible);
                        FZ_CHECK(!ent || (ent[row] >= 0.0f && ent[row] <= log_n + rb.ent),
                                 "%s: entropy[%zu] = %g outside [0, log %lld]", name, row,
                                 ent ? ent[row] : 0.0, (long long)visible);
                    }
                }
            }
}

/* The public entry point of `op` with the arguments P describes. */
static int call_op(problem *P, int op)
{
    const attn_shape *shape = P->shape_null ? NULL : &P->shape;
    const attn_row_stats *stats = P->stats_passed ? &P->stats : NULL;
    const attn_tensor *q = P->q.passed ? &P->q.t : NULL, *k = P->k.passed ? &P->k.t : NULL,
                      *v = P->v.passed ? &P->v.t : NULL, *out = P->out.passed ? &P->out.t : NULL;
    P->hook.calls = 0;
    g_ctxless_hook = P->hook;
    int status;
    switch (op) {
    case OP_SCORES: status = attn_scores(shape, P->opt, q, k, out); break;
    case OP_MASK_APPLY: status = attn_mask_apply(shape, P->opt, out); break;
    case OP_WEIGHTS: status = attn_weights(shape, P->opt, q, k, out, stats); break;
    default: status = attn_forward(shape, P->opt, q, k, v, out, stats); break;
    }
    P->hook.calls += g_ctxless_hook.calls;
    return status;
}

/*
 * Snapshots every buffer the call can reach, makes it, and checks the status,
 * the bytes it changed, the hook, the contract on the values, and (sometimes)
 * that another task order gives the same bits.
 */
static void call_and_verify(problem *P, int op, unsigned must, unsigned may, int64_t stat_rows,
                            fz_reader *r)
{
    const char *name = op_names[op];
    snapshot sn = {.n = 0};
    uint8_t *out_view = P->out.allocated && !must ? view_bytes(&P->out) : NULL;
    snap_add(&sn, "out", P->out.buf.map ? P->out.buf.data : NULL, P->out.buf.bytes, out_view);
    uint8_t *stat_w = NULL;
    if (stat_rows) {
        stat_w = malloc((size_t)stat_rows * 4);
        if (!stat_w)
            abort();
        memset(stat_w, 1, (size_t)stat_rows * 4);
    }
    const char *stat_names[3] = {"stats.lse", "stats.max_score", "stats.entropy"};
    for (int w = 0; w < 3; w++)
        snap_add(&sn, stat_names[w], P->stat_buf[w].data, P->stat_buf[w].bytes, stat_w);
    tens *inputs[7] = {&P->q, &P->k, &P->v, &P->mask, &P->bias, &P->sinks, &P->alibi};
    for (int w = 0; w < 7; w++)
        if (inputs[w]->buf.map)
            snap_add(&sn, inputs[w]->name, inputs[w]->buf.data, inputs[w]->buf.bytes, NULL);
    snap_add(&sn, "q_lens", P->qlen_buf.map ? P->qlen_buf.data : NULL, P->qlen_buf.bytes, NULL);
    snap_add(&sn, "kv_lens", P->kvlen_buf.map ? P->kvlen_buf.data : NULL, P->kvlen_buf.bytes,
             NULL);
    snap_add(&sn, "k_positions", P->kpos_buf.map ? P->kpos_buf.data : NULL, P->kpos_buf.bytes,
             NULL);
    snap_add(&sn, "options", P->opt, P->opt_buf.bytes, NULL);
    snap_add(&sn, "shape", &P->shape, sizeof P->shape, NULL);

    int status = call_op(P, op);
    if (P->empty) {
        FZ_CHECK(status >= ATTN_OK && status <= ATTN_ERR_VERSION, "%s: status %d", name, status);
        goto done;
    }
    check_status(name, status, must, may);
    if (status != ATTN_OK) {
        FZ_CHECK(P->hook.calls == 0, "%s: rejected call ran parallel_for", name);
        snap_verify(&sn, 0, name, status);
        goto done;
    }
    snap_verify(&sn, 1, name, status);
    if (P->eff.parallel_for)
        FZ_CHECK(P->hook.calls == 1, "%s: parallel_for called %d times, want 1", name,
                 P->hook.calls);
    /* moderate scales keep every visible score finite */
    if (P->vc != VALUES_WILD && fabsf(P->eff.scale) <= 16.0f)
        check_results(P, op, &sn);

    if (P->eff.parallel_for && fz_chance(r, 100)) {
        /* determinism: the same call with another task order gives the same bits */
        snapshot first = {.n = 0};
        for (int k = 0; k < sn.n; k++)
            snap_add(&first, sn.r[k].name, sn.r[k].data, sn.r[k].bytes, NULL);
        snap_restore(&sn);
        const int order = P->hook.order;
        P->hook.order = (order + 1) % 3;
        status = call_op(P, op);
        FZ_CHECK(status == ATTN_OK, "%s: second run returned %d", name, status);
        for (int k = 0; k < first.n; k++)
            FZ_CHECK(memcmp(first.r[k].before, first.r[k].data, first.r[k].bytes) == 0,
                     "%s: %s differs between task orders %d and %d", name, first.r[k].name,
                     order, P->hook.order);
        snap_free(&first);
    }
done:
    snap_free(&sn);
    free(out_view);
    free(stat_w);
}

static void run_attention(fz_reader *r, int op)
{
    problem P;
    memset(&P, 0, sizeof P);
    const int hostile = fz_chance(r, 64);
    const int vcb = fz_u8(r) % 8;
    P.vc = vcb < 4 ? VALUES_TAME : vcb < 6 ? VALUES_POISONED : VALUES_WILD;
    fz_rng g = {fz_u64(r)};

    /* shape */
    attn_shape *s = &P.shape;
    const int big = fz_chance(r, 16);
    s->batch = pick_dim(r, hostile, 1, 3);
    s->kv_heads = pick_dim(r, hostile, 1, 3);
    s->q_heads = fz_chance(r, 200) && s->kv_heads > 0 && s->kv_heads < 4
                     ? s->kv_heads * fz_range(r, 1, 3)
                     : pick_dim(r, hostile, 1, 6);
    s->q_len = pick_dim(r, hostile, 1, big ? 140 : 40);
    s->kv_len = pick_dim(r, hostile, 1, big ? 300 : 40);
    s->head_dim = pick_dim(r, hostile, 1, big ? 160 : 70);
    s->v_dim = fz_chance(r, 128) ? 0 : pick_dim(r, hostile, 0, big ? 160 : 70);
    if (hostile && fz_chance(r, 20))
        s->v_dim = -fz_range(r, 1, 3);
    P.shape_null = hostile && fz_chance(r, 8);

    /* no key but some query rows: the call writes every row, which this
       model's one-element buffers cannot take; made an empty problem of no
       row (hostile-inputs checks the rows of kv_len 0) */
    if (s->kv_len == 0 && s->batch > 0 && s->q_len > 0 && s->q_heads > 0 && s->kv_heads > 0 &&
        s->head_dim > 0 && s->v_dim >= 0)
        s->q_len = 0;
    unsigned must = 0, may = 0;
    const int dims_ok = s->batch > 0 && s->q_heads > 0 && s->kv_heads > 0 && s->q_len > 0 &&
                        s->kv_len > 0 && s->head_dim > 0 && s->v_dim >= 0;
    /* an empty problem (batch, q_len or kv_len 0, attn.h 1.11): this model
       sizes no tensor for it, so it leaves the status open (any status, no
       crash, no sanitizer finding) and checks no value */
    const int empty = !dims_ok && s->batch >= 0 && s->q_heads > 0 && s->kv_heads > 0 &&
                      s->q_len >= 0 && s->kv_len >= 0 && s->head_dim > 0 && s->v_dim >= 0;
    P.empty = empty;
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    if (P.shape_null)
        must |= BIT(ATTN_ERR_NULL);
    if (!dims_ok)
        must |= BIT(ATTN_ERR_SHAPE);
    else if (s->head_dim > ATTN_MAX_HEAD_DIM || v_dim > ATTN_MAX_HEAD_DIM)
        must |= BIT(ATTN_ERR_UNSUPPORTED);
    if (dims_ok && (s->q_len > INT32_MAX || s->kv_len > INT32_MAX))
        may |= BIT(ATTN_ERR_SHAPE); /* lengths are int32 in q_lens/kv_lens */
    if (dims_ok && s->q_heads % s->kv_heads != 0)
        must |= BIT(ATTN_ERR_ARG);

    /* options: laid out in a buffer of exactly struct_size bytes */
    const attn_options defaults = ATTN_OPTIONS_INIT;
    P.eff = defaults;
    attn_options full = defaults;
    full.flags = fz_chance(r, 100) ? ATTN_CAUSAL : 0;
    if (hostile && fz_chance(r, 30))
        full.flags |= fz_u32(r);
    static const float wild_scalars[] = {NAN, INFINITY, -INFINITY, -1.0f, 1e-45f, 3e38f, -0.0f, 3e-39f};
    if (fz_chance(r, 100))
        full.scale = hostile && fz_chance(r, 80)
                         ? wild_scalars[fz_u8(r) % 8]
                         : (float)fz_range(r, -64, 64) / 16.0f;
    if (fz_chance(r, 80))
        full.softcap = hostile && fz_chance(r, 80) ? wild_scalars[fz_u8(r) % 8]
                                                   : (float)fz_range(r, 1, 400) / 8.0f;
    if (fz_chance(r, 80))
        full.window = hostile && fz_chance(r, 60) ? (fz_chance(r, 128) ? -fz_range(r, 1, 5) : INT64_MIN)
                                                  : fz_range(r, 1, 45);
    /* precision (1.2): the modes, or (hostile) a value no mode has */
    static const int64_t wild_precisions[] = {-1, 3, INT64_MIN, INT64_MAX, (int64_t)1 << 32};
    if (fz_chance(r, 60))
        full.precision = hostile && fz_chance(r, 80) ? wild_precisions[fz_u8(r) % 5]
                                                     : fz_range(r, 0, 2);
    if (fz_chance(r, 70))
        full.window_right = hostile && fz_chance(r, 60)
                                ? (fz_chance(r, 128) ? -fz_range(r, 1, 5) : INT64_MIN)
                                : fz_range(r, 1, 45);
    /* lengths only for a batch an array can hold (the caller promises batch entries) */
    const int with_lens = fz_chance(r, 90) && dims_ok && s->batch <= 4096;
    int kpos_covered = 0; /* k_positions (1.11), drawn last: see below */
    const int opt_mode = fz_u8(r) % 8;
    uint32_t struct_size = sizeof(attn_options);
    int tail_byte = -1; /* past sizeof(attn_options): the one set byte, or none */
    if (opt_mode == 0) {
        struct_size = 0; /* opt = NULL */
    } else if (hostile && opt_mode == 1) {
        static const uint32_t sizes[] = {0, 1, 4, 7, 8, 12, 16, 23, 24, 40, 48, 60, 64, 72, 73,
                                         80, 88, 4096, UINT32_MAX};
        struct_size = sizes[fz_u8(r) % (sizeof sizes / sizeof sizes[0])];
    } else if (opt_mode == 3 && fz_chance(r, 64)) {
        /* a newer attn.h's caller: a larger struct whose unknown tail is zero
           (accepted) or has a byte set (ATTN_ERR_VERSION), attn.h 1.11 */
        struct_size = (uint32_t)(sizeof(attn_options) + 8 * fz_range(r, 1, 4));
        tail_byte = fz_chance(r, 128) ? (int)fz_range(r, 0, struct_size - sizeof(attn_options) - 1)
                                      : -1;
    } else if (opt_mode == 2) {
        /* an older caller: the struct ends before some field (every line of
           src/option_list.h, so a new option is an older caller's end too;
           ends inside struct_size or flags are ATTN_ERR_VERSION) */
#define FZ_OPTION_END(f, kind, extent, dtype, off, since, rule) offsetof(attn_options, f),
        static const size_t ends[] = {ATTN_OPTION_LIST(FZ_OPTION_END)};
#undef FZ_OPTION_END
        struct_size = (uint32_t)ends[fz_u8(r) % (sizeof ends / sizeof ends[0])];
    }

    /* tensors: extents from the shape (when it is meaningful) */
    const int needs_qk = op != OP_MASK_APPLY, needs_v = op == OP_FORWARD;
    tens *all[8] = {&P.q, &P.k, &P.v, &P.out, &P.mask, &P.bias, &P.sinks, &P.alibi};
    const char *names[8] = {"q", "k", "v", "out", "mask", "bias", "sinks", "alibi_slopes"};
    const int64_t ext[8][4] = {
        {s->batch, s->q_heads, s->q_len, s->head_dim},
        {s->batch, s->kv_heads, s->kv_len, s->head_dim},
        {s->batch, s->kv_heads, s->kv_len, v_dim},
        {s->batch, s->q_heads, s->q_len, op == OP_FORWARD ? v_dim : s->kv_len},
        {s->batch, s->q_heads, s->q_len, s->kv_len},
        {s->batch, s->q_heads, s->q_len, s->kv_len},
        {s->batch, s->q_heads, 1, 1}, /* sinks: one float per (batch entry, head) */
        {s->batch, s->q_heads, 1, 1}, /* ALiBi slopes: likewise */
    };
    const int32_t usual[8] = {ATTN_DTYPE_F32, ATTN_DTYPE_F32,  ATTN_DTYPE_F32, ATTN_DTYPE_F32,
                              ATTN_DTYPE_BOOL, ATTN_DTYPE_F32, ATTN_DTYPE_F32, ATTN_DTYPE_F32};
    const int wanted[8] = {needs_qk,         needs_qk,         needs_v,          1,
                           fz_chance(r, 80), fz_chance(r, 60), fz_chance(r, 60), fz_chance(r, 60)};
    for (int w = 0; w < 8; w++) {
        tens *T = all[w];
        T->name = names[w];
        T->is_output = w == 3;
        T->bytes = -1; /* unknown until the model has looked at it */
        T->passed = wanted[w] && !(hostile && fz_chance(r, 6));
        if (!T->passed)
            continue;
        memcpy(T->ext, ext[w], sizeof T->ext);
        T->t.dtype = pick_dtype(r, usual[w], hostile);
        /* A quantized dtype (Q8_0, Q4_0: dim % 32 == 0 else ATTN_ERR_SHAPE, strides
           in blocks; FP8) is a valid K/V dtype since 1.1. This model does not
           size block-format tensors (fuzz_quant.c does): here a K or V slot
           gets BOOL instead, which the library must reject. */
        if ((w == 1 || w == 2) && test_dtype_is(T->t.dtype, DT_QUANT))
            T->t.dtype = ATTN_DTYPE_BOOL;
        /* out: F32; the forward's may also be F16 or BF16 (attn.h), its f32
           rows rounded once */
        if (w == 3 && !hostile && !(op == OP_FORWARD && out16(T->t.dtype)))
            T->t.dtype = ATTN_DTYPE_F32;
        if (w >= 4 && !hostile)
            T->t.dtype = usual[w];
        if (dims_ok)
            pick_strides(r, T, hostile);
        T->t.data = (void *)1; /* placeholder until allocated; never dereferenced */
    }
    if (needs_qk && (!P.q.passed || !P.k.passed))
        must |= BIT(ATTN_ERR_NULL);
    if (needs_v && !P.v.passed)
        must |= BIT(ATTN_ERR_NULL);
    if (!P.out.passed)
        must |= BIT(ATTN_ERR_NULL);

    /* options fields take effect only when struct_size covers them */
    if (opt_mode != 0) {
        if (struct_size < offsetof(attn_options, flags) + sizeof(uint32_t) ||
            struct_size > 4096 || tail_byte >= 0) {
            must |= BIT(ATTN_ERR_VERSION);
        } else {
#define COVERED(field) (struct_size >= offsetof(attn_options, field) + sizeof(full.field))
            if (COVERED(flags)) P.eff.flags = full.flags;
            if (COVERED(scale)) P.eff.scale = full.scale;
            if (COVERED(softcap)) P.eff.softcap = full.softcap;
            if (COVERED(window)) P.eff.window = full.window;
            P.eff.q_lens = COVERED(q_lens) && with_lens ? (const int32_t *)1 : NULL;
            P.eff.kv_lens = COVERED(kv_lens) && with_lens ? (const int32_t *)1 : NULL;
            P.eff.mask = COVERED(mask) && P.mask.passed ? &P.mask.t : NULL;
            P.eff.bias = COVERED(bias) && P.bias.passed ? &P.bias.t : NULL;
            if (COVERED(window_right)) P.eff.window_right = full.window_right;
            if (COVERED(precision)) P.eff.precision = full.precision;
            P.eff.sinks = COVERED(sinks) && P.sinks.passed ? &P.sinks.t : NULL;
            P.eff.alibi_slopes = COVERED(alibi_slopes) && P.alibi.passed ? &P.alibi.t : NULL;
            P.eff.parallel_for = COVERED(parallel_for) && fz_chance(r, 160) ? permuting_parallel_for
                                                                             : NULL;
            P.eff.parallel_ctx = COVERED(parallel_ctx) ? &P.hook : NULL;
            kpos_covered = COVERED(k_positions);
#undef COVERED
        }
    }
    P.hook.order = fz_u8(r) % 3;
    if (P.eff.flags & ~ATTN_CAUSAL)
        must |= BIT(ATTN_ERR_ARG);
    if (!isfinite(P.eff.scale) || !isfinite(P.eff.softcap) || P.eff.softcap < 0.0f ||
        P.eff.window < 0 || P.eff.window_right < 0 || P.eff.precision < 0 ||
        P.eff.precision > ATTN_PRECISION_INT8 ||
        (P.eff.softcap > 0.0f && !isfinite(1.0f / P.eff.softcap)))
        must |= BIT(ATTN_ERR_ARG);

    /* dtypes */
    for (int w = 0; w < 8; w++) {
        tens *T = all[w];
        const int used = tensor_used(&P, w, T);
        if (!used)
            continue;
        const int32_t dt = T->t.dtype;
        const int ok = w == 3 ? dt == ATTN_DTYPE_F32 || (op == OP_FORWARD && out16(dt))
                       : w == 4 ? dt == ATTN_DTYPE_BOOL
                       : w >= 6 ? dt == ATTN_DTYPE_F32 /* bias (5): any float, 1.11 */
                                : test_dtype_is(dt, DT_FLOAT);
        if (!ok)
            must |= BIT(ATTN_ERR_ARG);
    }

    /* NULL data pointers, and data pointers whose extent wraps the address space */
    for (int w = 0; w < 8; w++) {
        tens *T = all[w];
        if (!T->passed || !hostile)
            continue;
        const int used = w < 4 || tensor_used(&P, w, T);
        if (fz_chance(r, 8)) {
            T->t.data = NULL;
            if (used)
                must |= BIT(ATTN_ERR_NULL);
        } else if (fz_chance(r, 6)) {
            T->t.data = (void *)(UINTPTR_MAX - (uintptr_t)fz_range(r, 0, 64) * 64 - 63);
            T->fake = used;
        }
    }

    /* extents, overlap, overflow */
    if (dims_ok) {
        for (int w = 0; w < 8; w++) {
            tens *T = all[w];
            const int used = tensor_used(&P, w, T);
            if (!used || (w < 2 && !needs_qk) || (w == 2 && !needs_v))
                continue;
            if (T->t.data == (void *)1) { /* a real buffer will be given */
                T->t.data = (void *)(uintptr_t)4096; /* low address: no wrap in the model */
                model_tensor(T, &must, &may);
                T->t.data = (void *)1;
            } else {
                model_tensor(T, &must, &may);
            }
        }
    }

    /* lengths */
    if (with_lens) {
        const int32_t *lens_in[2] = {P.eff.q_lens, P.eff.kv_lens};
        fz_buf *lb[2] = {&P.qlen_buf, &P.kvlen_buf};
        int32_t **lp[2] = {&P.q_lens, &P.kv_lens};
        const int64_t lim[2] = {s->q_len, s->kv_len};
        for (int w = 0; w < 2; w++) {
            if (!with_lens)
                continue;
            int32_t *L = fz_buf_alloc(lb[w], (size_t)s->batch * 4, 0);
            for (int64_t b = 0; b < s->batch; b++) {
                int64_t x = fz_range(r, 0, lim[w] < INT32_MAX ? lim[w] : INT32_MAX);
                if (fz_chance(r, 40))
                    x = lim[w]; /* full length */
                if (hostile && fz_chance(r, 20)) {
                    static const int64_t wild[] = {-1, INT32_MIN, INT32_MAX, 0};
                    x = fz_chance(r, 128) && lim[w] < INT32_MAX ? lim[w] + 1 : wild[fz_u8(r) % 4];
                }
                L[b] = (int32_t)(x > INT32_MAX ? INT32_MAX : x);
                if (lens_in[w] && (L[b] < 0 || L[b] > lim[w]))
                    must |= BIT(ATTN_ERR_ARG);
            }
            *lp[w] = L;
        }
    }
    P.eff.q_lens = P.eff.q_lens ? P.q_lens : NULL;
    P.eff.kv_lens = P.eff.kv_lens ? P.kv_lens : NULL;

    /* A valid call too large for this harness is not made. */
    if (!must) {
        for (int w = 0; w < 8; w++) {
            tens *T = all[w];
            const int used = tensor_used(&P, w, T);
            if (used && !((w < 2 && !needs_qk) || (w == 2 && !needs_v)) &&
                (T->bytes < 0 || T->fake))
                goto out;
        }
        __int128 work = (__int128)s->batch * s->q_heads * s->q_len * s->kv_len *
                        (s->head_dim + (op == OP_FORWARD ? v_dim : 0));
        if (work > CAP_WORK || s->batch * s->q_heads * s->q_len > (1 << 16))
            goto out;
    }

    /* buffers: exact extents, guard page right after (or right before) */
    for (int w = 0; w < 8; w++) {
        tens *T = all[w];
        if (!T->passed || T->t.data != (void *)1)
            continue;
        const int guard_front = fz_chance(r, 40);
        if (T->bytes >= 0) {
            T->t.data = fz_buf_alloc(&T->buf, (size_t)T->bytes, guard_front);
            T->allocated = 1;
        } else {
            /* the model rejects the call: give a buffer of one element */
            T->t.data = fz_buf_alloc(&T->buf, dtype_bytes(T->t.dtype), guard_front);
        }
    }
    const int64_t stat_rows = dims_ok && !must ? s->batch * s->q_heads * s->q_len : 0;
    P.stats_passed = (op == OP_WEIGHTS || op == OP_FORWARD) && fz_chance(r, 140);
    if (P.stats_passed) {
        float **slot[3] = {&P.stats.lse, &P.stats.max_score, &P.stats.entropy};
        for (int w = 0; w < 3; w++)
            if (fz_chance(r, 200))
                *slot[w] = fz_buf_alloc(&P.stat_buf[w], (size_t)stat_rows * 4, 0);
    }

    /* positions per key slot (1.11), [batch][kv_len] when they fit: a
       shuffle of 0.., some empty (-1), now and then (hostile) an entry above
       2^62, an error where a valid key reads it. Drawn after the rest of
       the call, so that the corpora written before keep their problems,
       and before the values (the poison of hidden bias entries reads them).
       Zero bytes (an input that ran out) draw none, and no empty slot. */
    const int with_kpos = !fz_chance(r, 256 - 50) && dims_ok && s->batch <= 4096 &&
                          s->kv_len <= 4096 && s->batch * s->kv_len <= (1 << 16);
    if (with_kpos) {
        const int64_t n = s->batch * s->kv_len;
        int64_t *kp = fz_buf_alloc(&P.kpos_buf, (size_t)(n ? n : 1) * 8, fz_chance(r, 40));
        for (int64_t e = 0; e < n; e++)
            kp[e] = !fz_chance(r, 256 - 30) ? -fz_range(r, 1, 3) : e % s->kv_len;
        for (int64_t e = n - 1; e > 0; e--) {
            const int64_t x = fz_range(r, 0, e), t = kp[e];
            kp[e] = kp[x];
            kp[x] = t;
        }
        if (hostile && n > 0 && fz_chance(r, 60)) {
            const int64_t e = fz_range(r, 0, n - 1), b = e / s->kv_len, j = e % s->kv_len;
            kp[e] = fz_chance(r, 128) ? ATTN_MAX_POSITION + 1 : INT64_MAX;
            const int lens_ok =
                !P.eff.kv_lens || (P.kv_lens[b] >= 0 && P.kv_lens[b] <= s->kv_len);
            if (kpos_covered && lens_ok && j < valid_kv(&P, b))
                must |= BIT(ATTN_ERR_ARG);
        }
        P.k_positions = kp;
        P.eff.k_positions = kpos_covered ? kp : NULL;
    }

    /* values */
    fill_tensor_values(&P.q, &g, P.vc == VALUES_WILD ? VALUES_WILD : VALUES_TAME, -2.0f, 2.0f);
    fill_tensor_values(&P.k, &g, P.vc == VALUES_WILD ? VALUES_WILD : VALUES_TAME, -2.0f, 2.0f);
    fill_tensor_values(&P.v, &g, P.vc == VALUES_WILD ? VALUES_WILD : VALUES_TAME, -2.0f, 2.0f);
    fill_tensor_values(&P.mask, &g, VALUES_TAME, 0.0f, 1.0f);
    fill_tensor_values(&P.bias, &g, P.vc == VALUES_WILD ? VALUES_WILD : VALUES_TAME, -4.0f, 4.0f);
    fill_tensor_values(&P.sinks, &g, P.vc == VALUES_WILD ? VALUES_WILD : VALUES_TAME, -4.0f, 4.0f);
    fill_tensor_values(&P.alibi, &g, P.vc == VALUES_WILD ? VALUES_WILD : VALUES_TAME, 0.0f, 1.0f);
    if (op == OP_MASK_APPLY)
        fill_tensor_values(&P.out, &g, P.vc == VALUES_WILD ? VALUES_WILD : VALUES_TAME, -30.0f,
                           30.0f);
    else if (P.out.allocated)
        for (int64_t i = 0; i < P.out.bytes; i++)
            P.out.buf.data[i] = (unsigned char)fz_rng_next(&g);
    if (P.vc == VALUES_POISONED && !must)
        poison_unread(&P, op, &g);

    /* the options struct the caller passes: exactly struct_size bytes */
    full.q_lens = with_lens ? P.q_lens : NULL;
    full.kv_lens = with_lens ? P.kv_lens : NULL;
    full.k_positions = with_kpos ? P.k_positions : NULL;
    full.mask = P.mask.passed ? &P.mask.t : NULL;
    full.bias = P.bias.passed ? &P.bias.t : NULL;
    full.sinks = P.sinks.passed ? &P.sinks.t : NULL;
    full.alibi_slopes = P.alibi.passed ? &P.alibi.t : NULL;
    full.parallel_for = P.eff.parallel_for;
    full.parallel_ctx = &P.hook;
    full.struct_size = struct_size;
    if (opt_mode != 0) {
        /* a real caller's struct is 8-byte aligned: round the guarded extent
           up to that, and leave the bytes past struct_size zero */
        size_t bytes = struct_size < 4 ? 4 : struct_size > sizeof full ? sizeof full : struct_size;
        /* sizes up to 4096 are read whole (the zero-tail rule), larger ones not */
        const size_t span = struct_size > sizeof full && struct_size <= 4096 ? struct_size : bytes;
        P.opt = fz_buf_alloc(&P.opt_buf, (span + 7) & ~(size_t)7, 0);
        memset(P.opt, 0, span);
        memcpy(P.opt, &full, bytes);
        if (tail_byte >= 0)
            ((unsigned char *)P.opt)[sizeof full + (size_t)tail_byte] = 0x01;
    }

    call_and_verify(&P, op, must, may, stat_rows, r);

out:
    for (int w = 0; w < 8; w++)
        fz_buf_free(&all[w]->buf);
    for (int w = 0; w < 3; w++)
        fz_buf_free(&P.stat_buf[w]);
    fz_buf_free(&P.qlen_buf);
    fz_buf_free(&P.kvlen_buf);
    fz_buf_free(&P.kpos_buf);
    fz_buf_free(&P.opt_buf);
}

/* ------------------------------------------------------------ row operations */

static void run_rows(fz_reader *r, int op)
{
    const int hostile = fz_chance(r, 64);
    fz_rng g = {fz_u64(r)};
    const int vcb = fz_u8(r) % 4;
    const value_class vc = vcb < 3 ? VALUES_TAME : VALUES_WILD;
    int64_t rows = fz_range(r, 1, 40), cols = fz_range(r, 1, fz_chance(r, 30) ? 600 : 70);
    int64_t stride = cols + (fz_chance(r, 90) ? fz_range(r, 0, 9) : 0);
    if (hostile) {
        static const int64_t wild[] = {0, -1, INT64_MIN, INT64_MAX, (int64_t)1 << 61,
                                       (int64_t)1 << 62, INT32_MAX, (int64_t)1 << 40};
        if (fz_chance(r, 80))
            rows = wild[fz_u8(r) % 8];
        if (fz_chance(r, 80))
            cols = wild[fz_u8(r) % 8];
        if (fz_chance(r, 80))
            stride = fz_chance(r, 128) ? (cols > INT64_MIN ? cols - 1 : cols) : wild[fz_u8(r) % 8];
    }
    unsigned must = 0;
    __int128 elems = -1;
    if (rows <= 0 || cols <= 0) {
        must |= BIT(ATTN_ERR_SHAPE);
    } else if (stride < cols) {
        must |= BIT(ATTN_ERR_STRIDE);
    } else {
        elems = (__int128)(rows - 1) * stride + cols;
        if (elems > (__int128)(PTRDIFF_MAX / 4))
            must |= BIT(ATTN_ERR_SHAPE);
    }
    /* 1: x or p NULL; 2: dp NULL; 3: ds NULL (the last two: backward only) */
    const int null_arg =
        hostile && fz_chance(r, 20) ? (int)fz_range(r, 1, op == OP_SOFTMAX ? 1 : 3) : 0;
    if (null_arg)
        must |= BIT(ATTN_ERR_NULL);
    if (!must && (elems * 4 > CAP_BYTES || rows * cols > CAP_WORK))
        return;
    const size_t n = must ? 1 : (size_t)elems;

    fz_buf bx = {0}, bdp = {0}, bds = {0}, blse = {0};
    float *x = fz_buf_alloc(&bx, n * 4, fz_chance(r, 60));
    float *dp = op == OP_SOFTMAX_BWD ? fz_buf_alloc(&bdp, n * 4, fz_chance(r, 60)) : NULL;
    float *ds = op == OP_SOFTMAX_BWD ? fz_buf_alloc(&bds, n * 4, fz_chance(r, 60)) : NULL;
    float *lse = op == OP_SOFTMAX && fz_chance(r, 160)
                     ? fz_buf_alloc(&blse, (size_t)(must ? 0 : rows) * 4, 0)
                     : NULL;
    const int alias = op == OP_SOFTMAX_BWD ? fz_u8(r) % 3 : 0; /* 1: ds = p, 2: ds = dp */
    for (size_t i = 0; i < n; i++) {
        if (op == OP_SOFTMAX) {
            x[i] = draw_value(&g, vc, -40.0f, 40.0f);
            if (fz_rng_next(&g) % 8 == 0)
                x[i] = -INFINITY; /* masked entries */
        } else {
            x[i] = draw_value(&g, vc, 0.0f, 1.0f);
            dp[i] = draw_value(&g, vc, -3.0f, 3.0f);
            ds[i] = (float)fz_rng_next(&g);
        }
    }
    int64_t all_masked_row = op == OP_SOFTMAX && !must && fz_chance(r, 60) ? fz_range(r, 0, rows - 1)
                                                                          : -1;
    if (all_masked_row >= 0)
        for (int64_t j = 0; j < cols; j++)
            x[all_masked_row * stride + j] = -INFINITY;

    uint8_t *w = NULL;
    if (!must) {
        w = calloc(n, 4);
        for (int64_t i = 0; i < rows; i++)
            memset(w + (size_t)(i * stride) * 4, 1, (size_t)cols * 4);
    }
    uint8_t *lse_w = lse && !must ? memset(malloc((size_t)rows * 4 + 1), 1, (size_t)rows * 4 + 1) : NULL;

    float *p_arg = null_arg == 1 ? NULL : x;
    int status;
    snapshot sn = {.n = 0};
    if (op == OP_SOFTMAX) {
        snap_add(&sn, "x", x, n * 4, w);
        snap_add(&sn, "lse", lse, blse.bytes, lse_w);
        status = attn_softmax(p_arg, rows, cols, stride, lse);
    } else {
        float *ds_arg = alias == 1 ? x : alias == 2 ? dp : ds;
        snap_add(&sn, "p", x, n * 4, alias == 1 ? w : NULL);
        snap_add(&sn, "dp", dp, n * 4, alias == 2 ? w : NULL);
        snap_add(&sn, "ds", ds, n * 4, w);
        status = attn_softmax_backward(p_arg, null_arg == 2 ? NULL : dp,
                                       null_arg == 3 ? NULL : ds_arg, rows, cols, stride);
    }
    check_status(op_names[op], status, must, 0);
    snap_verify(&sn, status == ATTN_OK, op_names[op], status);

    if (status == ATTN_OK && vc == VALUES_TAME) {
        for (int64_t i = 0; i < rows; i++) {
            const float *row = (op == OP_SOFTMAX ? x : alias == 1 ? x : alias == 2 ? dp : ds) +
                               i * stride;
            const float *before = (const float *)sn.r[0].before + i * stride;
            if (op == OP_SOFTMAX) {
                double sum = 0.0;
                int finite = 0;
                for (int64_t j = 0; j < cols; j++) {
                    finite += before[j] != -INFINITY;
                    FZ_CHECK(row[j] >= 0.0f && row[j] <= 1.0f &&
                                 (before[j] != -INFINITY || row[j] == 0.0f),
                             "softmax: row %lld col %lld = %g (input %g)", (long long)i,
                             (long long)j, row[j], before[j]);
                    sum += row[j];
                }
                /* |sum p_j - 1| <= sum of the weights' bounds (tests/tolerance.h,
                   "softmax of a row", exact inputs) */
                double bound = 0.0;
                if (finite) {
                    double *sd = malloc((size_t)cols * sizeof(double));
                    double *pd = malloc((size_t)cols * 2 * sizeof(double));
                    if (!sd || !pd)
                        abort();
                    for (int64_t j = 0; j < cols; j++)
                        sd[j] = before[j];
                    ref_softmax_row(sd, NULL, (size_t)cols, 0, pd, pd + cols, NULL);
                    for (int64_t j = 0; j < cols; j++)
                        bound += pd[cols + j];
                    free(sd);
                    free(pd);
                }
                FZ_CHECK(finite ? fabs(sum - 1.0) <= bound : sum == 0.0,
                         "softmax: row %lld sums to %.9g, bound %.3g (%d finite inputs)",
                         (long long)i, sum, bound, finite);
                if (lse)
                    FZ_CHECK(finite ? isfinite(lse[i]) : lse[i] == -INFINITY,
                             "softmax: lse[%lld] = %g (%d finite inputs)", (long long)i, lse[i],
                             finite);
            } else {
                /* against float64 with the bound of tests/tolerance.h */
                const float *p0 = (const float *)sn.r[0].before + i * stride;
                const float *dp0 = (const float *)sn.r[1].before + i * stride;
                double *want = malloc((size_t)cols * sizeof(double));
                double *err = malloc((size_t)cols * sizeof(double));
                ref_softmax_bwd_row(p0, dp0, (size_t)cols, want, err);
                for (int64_t j = 0; j < cols; j++)
                    FZ_CHECK(fabs(row[j] - want[j]) <= err[j],
                             "softmax_backward (alias %d): [%lld][%lld] = %.9g, want %.9g +- %.3g",
                             alias, (long long)i, (long long)j, row[j], want[j], err[j]);
                free(want);
                free(err);
            }
        }
    }
    if (status == ATTN_OK && op == OP_SOFTMAX_BWD && alias) {
        /* in place must give the bits of the out-of-place call */
        fz_buf bref = {0};
        float *ref_out = fz_buf_alloc(&bref, n * 4, 0);
        const float *p0 = (const float *)sn.r[0].before, *dp0 = (const float *)sn.r[1].before;
        FZ_CHECK(attn_softmax_backward(p0, dp0, ref_out, rows, cols, stride) == ATTN_OK,
                 "softmax_backward: out-of-place rerun failed");
        const float *got = alias == 1 ? x : dp;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                const int64_t at = i * stride + j;
                FZ_CHECK(memcmp(got + at, ref_out + at, 4) == 0,
                         "softmax_backward: in place (ds = %s) gives %a at [%lld][%lld], out of "
                         "place %a (p %a, dp %a, %lld cols)", alias == 1 ? "p" : "dp", got[at],
                         (long long)i, (long long)j, ref_out[at], p0[at], dp0[at],
                         (long long)cols);
            }
        fz_buf_free(&bref);
    }
    snap_free(&sn);
    free(w);
    free(lse_w);
    fz_buf_free(&bx);
    fz_buf_free(&bdp);
    fz_buf_free(&bds);
    fz_buf_free(&blse);
}

/* ------------------------------------------------------------ everything else */

static void count_task(void *ctx, size_t index)
{
    size_t *seen = ctx;
    seen[0]++;
    seen[1] += index;
}

static void run_misc(fz_reader *r)
{
    const int32_t any = (int32_t)fz_u32(r);
    FZ_CHECK(attn_strerror((attn_status)any) && attn_strerror((attn_status)any)[0],
             "attn_strerror(%d) empty", any);
    FZ_CHECK(attn_isa_name((attn_isa)any) != NULL, "attn_isa_name(%d) NULL", any);
    FZ_CHECK(attn_version() == ATTN_VERSION, "attn_version %u", attn_version());
    FZ_CHECK(strcmp(attn_version_string(), "1.0.0") == 0 || attn_version_string()[0],
             "version string");
    const int32_t isa = (int32_t)fz_range(r, -2, 7);
    const int avail = attn_isa_available((attn_isa)isa);
    FZ_CHECK(avail == 0 || avail == 1, "attn_isa_available(%d) = %d", isa, avail);
    if (isa == ATTN_ISA_AUTO || isa == ATTN_ISA_SCALAR)
        FZ_CHECK(avail == 1, "attn_isa_available(%d) = 0", isa);

    /* the pool entry points on arguments a careless caller passes */
    attn_threadpool *const sentinel = (attn_threadpool *)&any, *pool = sentinel;
    FZ_CHECK(attn_threadpool_create(-1 - (int32_t)fz_u8(r), &pool) == ATTN_ERR_ARG &&
                 pool == sentinel,
             "pool: negative threads accepted or *pool written");
    FZ_CHECK(attn_threadpool_create(1, NULL) == ATTN_ERR_NULL, "pool: NULL out");
    FZ_CHECK(attn_threadpool_size(NULL) == 0, "pool: size(NULL)");
    attn_threadpool_destroy(NULL);
    size_t count = fz_range(r, 0, 300), seen[2] = {0, 0};
    attn_threadpool_parallel_for(NULL, count_task, seen, count);
    FZ_CHECK(seen[0] == count && seen[1] == count * (count ? count - 1 : 0) / 2,
             "parallel_for(NULL pool) ran %zu of %zu tasks", seen[0], count);
    attn_threadpool_parallel_for(NULL, NULL, seen, count); /* no task: nothing happens */
    if (attn_threadpool_create(1, &pool) == ATTN_OK) {
        FZ_CHECK(attn_threadpool_size(pool) == 1, "pool size");
        seen[0] = seen[1] = 0;
        attn_threadpool_parallel_for(pool, count_task, seen, count);
        FZ_CHECK(seen[0] == count, "pool(1) ran %zu of %zu tasks", seen[0], count);
        attn_threadpool_destroy(pool);
    }
}

/* ------------------------------------------------------------ entry */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size};
    /* the kernels every later call of this input uses (the public switch) */
    /* every registry value, "auto", and bad values on each side (the range
       decodes the committed corpus as before while the registry has 5 ISAs) */
    const int32_t isa = (int32_t)fz_range(&r, -1, ATTN_ISA_COUNT + 1);
    const int avail = attn_isa_available((attn_isa)isa);
    const attn_status st = attn_isa_select((attn_isa)isa);
    if (isa < ATTN_ISA_AUTO || isa >= ATTN_ISA_COUNT)
        FZ_CHECK(st == ATTN_ERR_ARG, "attn_isa_select(%d) = %d, want ATTN_ERR_ARG", isa, st);
    else
        FZ_CHECK(st == (avail ? ATTN_OK : ATTN_ERR_UNSUPPORTED),
                 "attn_isa_select(%d) = %d but available = %d", isa, st, avail);
    if (st == ATTN_OK && isa != ATTN_ISA_AUTO)
        FZ_CHECK((int32_t)attn_isa_active() == isa, "active %d after selecting %d", attn_isa_active(), isa);
    if (st != ATTN_OK)
        attn_isa_select(ATTN_ISA_AUTO);

    for (int calls = 0; calls < 3 && r.n > 0; calls++) {
        const int op = fz_u8(&r) % FUZZ_OP_COUNT;
        if (op <= OP_FORWARD)
            run_attention(&r, op);
        else if (op <= OP_SOFTMAX_BWD)
            run_rows(&r, op);
        else
            run_misc(&r);
    }
    return 0;
}

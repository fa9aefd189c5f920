/* SPDX-License-Identifier: MIT */
/*
 * Every error path of docs/DESIGN.md §3: the right status, and every output
 * (stats included) byte-for-byte untouched. Also attn_options with a
 * smaller struct_size: accepted, and the fields beyond it never read.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "dtypes.h"
#include "harness.h"
#include "option_list.h" /* ATTN_OPT_FLAGS_ALL */

/* A small valid problem: B=2, Hq=4, Hkv=2, Lq=5, Lk=6, D=8, Dv=8, [B,H,L,D]. */
enum { B = 2, HQ = 4, HKV = 2, LQ = 5, LK = 6, D = 8, DV = 8 };

typedef struct fixture {
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, scores, out, mask, bias;
    attn_row_stats stats;
    int32_t q_lens[B], kv_lens[B];
    float qd[B * HQ * LQ * D], kd[B * HKV * LK * D], vd[B * HKV * LK * DV];
    float sd[B * HQ * LQ * LK], od[B * HQ * LQ * DV];
    float lse[B * HQ * LQ], mx[B * HQ * LQ], ent[B * HQ * LQ];
    uint8_t md[LQ * LK];
    float bd[LK];
} fixture;

static fixture fx; /* reset by fixture_init for every case */

#define OUT_PATTERN 0xA5

static void fixture_init(void)
{
    memset(&fx, 0, sizeof fx);
    fx.shape = (attn_shape){B, HQ, HKV, LQ, LK, D, DV};
    attn_options o = ATTN_OPTIONS_INIT;
    fx.opt = o;
    rng *g = harness_rng();
    rng_fill(g, fx.qd, sizeof fx.qd / 4, -1.0f, 1.0f);
    rng_fill(g, fx.kd, sizeof fx.kd / 4, -1.0f, 1.0f);
    rng_fill(g, fx.vd, sizeof fx.vd / 4, -1.0f, 1.0f);
    rng_fill(g, fx.bd, LK, -1.0f, 1.0f);
    memset(fx.md, 1, sizeof fx.md);
    fx.q = (attn_tensor){fx.qd, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    fx.k = (attn_tensor){fx.kd, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
    fx.v = (attn_tensor){fx.vd, ATTN_DTYPE_F32, HKV * LK * DV, LK * DV, DV};
    fx.scores = (attn_tensor){fx.sd, ATTN_DTYPE_F32, HQ * LQ * LK, LQ * LK, LK};
    fx.out = (attn_tensor){fx.od, ATTN_DTYPE_F32, HQ * LQ * DV, LQ * DV, DV};
    fx.mask = (attn_tensor){fx.md, ATTN_DTYPE_BOOL, 0, 0, LK}; /* broadcast over b, h */
    fx.bias = (attn_tensor){fx.bd, ATTN_DTYPE_F32, 0, 0, 0};   /* one row for all */
    fx.stats = (attn_row_stats){fx.lse, fx.mx, fx.ent};
    fx.q_lens[0] = LQ;
    fx.q_lens[1] = 2;
    fx.kv_lens[0] = LK;
    fx.kv_lens[1] = 3;
}

static void fill_outputs(void)
{
    memset(fx.sd, OUT_PATTERN, sizeof fx.sd);
    memset(fx.od, OUT_PATTERN, sizeof fx.od);
    memset(fx.lse, OUT_PATTERN, sizeof fx.lse);
    memset(fx.mx, OUT_PATTERN, sizeof fx.mx);
    memset(fx.ent, OUT_PATTERN, sizeof fx.ent);
}

static void expect_outputs_untouched(const char *what)
{
    static unsigned char pattern[sizeof fx.od > sizeof fx.sd ? sizeof fx.od : sizeof fx.sd];
    memset(pattern, OUT_PATTERN, sizeof pattern);
    char name[160];
    snprintf(name, sizeof name, "%s: scores/weights", what);
    expect_bytes(name, fx.sd, pattern, sizeof fx.sd);
    snprintf(name, sizeof name, "%s: out", what);
    expect_bytes(name, fx.od, pattern, sizeof fx.od);
    snprintf(name, sizeof name, "%s: lse", what);
    expect_bytes(name, fx.lse, pattern, sizeof fx.lse);
    snprintf(name, sizeof name, "%s: max_score", what);
    expect_bytes(name, fx.mx, pattern, sizeof fx.mx);
    snprintf(name, sizeof name, "%s: entropy", what);
    expect_bytes(name, fx.ent, pattern, sizeof fx.ent);
}

enum { OPS_SCORES = 1, OPS_MASK_APPLY = 2, OPS_WEIGHTS = 4, OPS_FORWARD = 8, OPS_ALL = 15 };

/* The arguments of one call, possibly broken. */
typedef struct call_args {
    const attn_shape *shape;
    const attn_options *opt;
    const attn_tensor *q, *k, *v, *scores, *out;
    const attn_row_stats *stats;
} call_args;

static call_args valid_args(void)
{
    return (call_args){&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.v, &fx.scores, &fx.out, &fx.stats};
}

/* Runs the operations in `ops` with `a`; each must return `want` and leave
 * every output untouched. */
static void expect_status(const char *what, unsigned ops, const call_args *a, attn_status want)
{
    static const char *const names[] = {"attn_scores", "attn_mask_apply", "attn_weights",
                                        "attn_forward"};
    for (int op = 0; op < 4; op++) {
        if (!(ops & (1u << op)))
            continue;
        fill_outputs();
        attn_status got;
        switch (op) {
        case 0:
            got = attn_scores(a->shape, a->opt, a->q, a->k, a->scores);
            break;
        case 1:
            got = attn_mask_apply(a->shape, a->opt, a->scores);
            break;
        case 2:
            got = attn_weights(a->shape, a->opt, a->q, a->k, a->scores, a->stats);
            break;
        default:
            got = attn_forward(a->shape, a->opt, a->q, a->k, a->v, a->out, a->stats);
            break;
        }
        harness_context("%s: %s", names[op], what);
        CHECK(got == want, "returned %d (%s), expected %d (%s)", got, attn_strerror(got), want,
              attn_strerror(want));
        expect_outputs_untouched(what);
    }
}

Test(errors, valid_fixture_is_accepted)
{
    harness_begin_plain("errors");
    fixture_init();
    fx.opt.q_lens = fx.q_lens;
    fx.opt.kv_lens = fx.kv_lens;
    fx.opt.mask = &fx.mask;
    fx.opt.bias = &fx.bias;
    fx.opt.flags = ATTN_CAUSAL;
    call_args a = valid_args();
    cr_assert_eq(attn_scores(a.shape, a.opt, a.q, a.k, a.scores), ATTN_OK);
    cr_assert_eq(attn_mask_apply(a.shape, a.opt, a.scores), ATTN_OK);
    cr_assert_eq(attn_weights(a.shape, a.opt, a.q, a.k, a.scores, a.stats), ATTN_OK);
    cr_assert_eq(attn_forward(a.shape, a.opt, a.q, a.k, a.v, a.out, a.stats), ATTN_OK);
    cr_assert_eq(attn_forward(a.shape, NULL, a.q, a.k, a.v, a.out, NULL), ATTN_OK);
}

Test(errors, null_pointers)
{
    harness_begin_plain("errors");
    fixture_init();
    call_args a;
    attn_tensor t;

    a = valid_args(), a.shape = NULL;
    expect_status("shape NULL", OPS_ALL, &a, ATTN_ERR_NULL);
    a = valid_args(), a.q = NULL;
    expect_status("q NULL", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_NULL);
    a = valid_args(), a.k = NULL;
    expect_status("k NULL", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_NULL);
    a = valid_args(), a.v = NULL;
    expect_status("v NULL", OPS_FORWARD, &a, ATTN_ERR_NULL);
    a = valid_args(), a.scores = NULL;
    expect_status("scores NULL", OPS_SCORES | OPS_MASK_APPLY | OPS_WEIGHTS, &a, ATTN_ERR_NULL);
    a = valid_args(), a.out = NULL;
    expect_status("out NULL", OPS_FORWARD, &a, ATTN_ERR_NULL);

    a = valid_args(), t = fx.q, t.data = NULL, a.q = &t;
    expect_status("q->data NULL", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_NULL);
    a = valid_args(), t = fx.k, t.data = NULL, a.k = &t;
    expect_status("k->data NULL", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_NULL);
    a = valid_args(), t = fx.v, t.data = NULL, a.v = &t;
    expect_status("v->data NULL", OPS_FORWARD, &a, ATTN_ERR_NULL);
    a = valid_args(), t = fx.scores, t.data = NULL, a.scores = &t;
    expect_status("scores->data NULL", OPS_SCORES | OPS_MASK_APPLY | OPS_WEIGHTS, &a,
                  ATTN_ERR_NULL);
    a = valid_args(), t = fx.out, t.data = NULL, a.out = &t;
    expect_status("out->data NULL", OPS_FORWARD, &a, ATTN_ERR_NULL);

    attn_options o = fx.opt;
    a = valid_args(), t = fx.mask, t.data = NULL, o.mask = &t, a.opt = &o;
    expect_status("mask->data NULL", OPS_ALL, &a, ATTN_ERR_NULL);
    o = fx.opt;
    a = valid_args(), t = fx.bias, t.data = NULL, o.bias = &t, a.opt = &o;
    expect_status("bias->data NULL", OPS_ALL, &a, ATTN_ERR_NULL);
}

Test(errors, shapes)
{
    harness_begin_plain("errors");
    fixture_init();
    call_args a = valid_args();
    attn_shape s;
    a.shape = &s;
    int64_t *fields[] = {&s.batch, &s.q_heads, &s.kv_heads, &s.q_len, &s.kv_len, &s.head_dim};
    static const char *const names[] = {"batch", "q_heads", "kv_heads", "q_len", "kv_len",
                                        "head_dim"};
    for (int f = 0; f < 6; f++)
        for (int bad = 0; bad < 2; bad++) {
            if (!bad && (f == 0 || f == 3 || f == 4))
                continue; /* batch, q_len, kv_len 0: an empty problem (1.11) */
            s = fx.shape;
            *fields[f] = bad ? -1 : 0;
            char what[64];
            snprintf(what, sizeof what, "%s = %d", names[f], bad ? -1 : 0);
            expect_status(what, OPS_ALL, &a, ATTN_ERR_SHAPE);
        }
    s = fx.shape;
    s.v_dim = -1;
    expect_status("v_dim = -1", OPS_ALL, &a, ATTN_ERR_SHAPE);

    /* extents whose element count overflows int64, with the dense strides
     * such a tensor would have (computed modulo 2^64) */
    s = fx.shape;
    s.batch = (int64_t)1 << 40;
    s.q_len = (int64_t)1 << 20;
    s.q_heads = (int64_t)1 << 20;
    s.kv_heads = 1;
    attn_tensor q = fx.q, sc = fx.scores, out = fx.out;
    q.row_stride = D;
    q.head_stride = (int64_t)((uint64_t)D << 20);
    q.batch_stride = (int64_t)((uint64_t)D << 40);
    sc.row_stride = LK;
    sc.head_stride = (int64_t)((uint64_t)LK << 20);
    sc.batch_stride = (int64_t)((uint64_t)LK << 40);
    out.row_stride = DV;
    out.head_stride = (int64_t)((uint64_t)DV << 20);
    out.batch_stride = (int64_t)((uint64_t)DV << 40);
    a.q = &q;
    a.scores = &sc;
    a.out = &out;
    expect_status("int64 overflow of batch*heads*len*dim", OPS_ALL, &a, ATTN_ERR_SHAPE);

    /* one huge stride overflowing on its own */
    a = valid_args();
    s = fx.shape;
    a.shape = &s;
    q = fx.q;
    q.batch_stride = INT64_MAX / 2 + 1;
    a.q = &q;
    expect_status("(batch-1) * batch_stride overflows", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD,
                  &a, ATTN_ERR_SHAPE);
}

Test(errors, strides)
{
    harness_begin_plain("errors");
    fixture_init();
    call_args a;
    attn_tensor t;
    const unsigned score_ops = OPS_SCORES | OPS_MASK_APPLY | OPS_WEIGHTS;

    a = valid_args(), t = fx.q, t.row_stride = -D, a.q = &t;
    expect_status("negative q row stride", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a,
                  ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.k, t.head_stride = -1, a.k = &t;
    expect_status("negative k head stride", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a,
                  ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.v, t.batch_stride = -5, a.v = &t;
    expect_status("negative v batch stride", OPS_FORWARD, &a, ATTN_ERR_STRIDE);

    /* overlapping output rows */
    a = valid_args(), t = fx.scores, t.row_stride = LK - 1, a.scores = &t;
    expect_status("scores rows overlap", score_ops, &a, ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.out, t.row_stride = DV - 1, a.out = &t;
    expect_status("out rows overlap", OPS_FORWARD, &a, ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.scores, t.head_stride = LK, a.scores = &t;
    expect_status("scores heads overlap rows", score_ops, &a, ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.out, t.batch_stride = DV * LQ, a.out = &t;
    expect_status("out batches overlap heads", OPS_FORWARD, &a, ATTN_ERR_STRIDE);
    /* broadcast (stride 0) outputs */
    a = valid_args(), t = fx.scores, t.row_stride = 0, a.scores = &t;
    expect_status("scores row stride 0", score_ops, &a, ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.scores, t.head_stride = 0, a.scores = &t;
    expect_status("scores head stride 0", score_ops, &a, ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.out, t.batch_stride = 0, a.out = &t;
    expect_status("out batch stride 0", OPS_FORWARD, &a, ATTN_ERR_STRIDE);
    a = valid_args(), t = fx.out, t.head_stride = 0, a.out = &t;
    expect_status("out head stride 0", OPS_FORWARD, &a, ATTN_ERR_STRIDE);

    /* a negative stride is ATTN_ERR_STRIDE even when the other dimensions'
       extents times strides overflow: the negative one is found first
       (a finding of fuzz_api, regress-negative-stride-before-overflow) */
    {
        const attn_shape huge = {INT32_MAX, INT32_MAX, 1, 116, 136, 8, 8};
        const attn_tensor st = {fx.sd, ATTN_DTYPE_F32, 33878702015072, 15776, -2};
        call_args h = valid_args();
        h.shape = &huge, h.scores = &st;
        expect_status("negative row stride, overflowing batch stride", OPS_MASK_APPLY, &h,
                      ATTN_ERR_STRIDE);
        attn_tensor qt = fx.q;
        qt.batch_stride = INT64_MAX, qt.head_stride = -1;
        a = valid_args(), a.q = &qt;
        expect_status("negative q head stride, overflowing batch stride",
                      OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_STRIDE);
    }

    /* negative strides in mask and bias */
    attn_options o = fx.opt;
    a = valid_args(), t = fx.mask, t.row_stride = -1, o.mask = &t, a.opt = &o;
    expect_status("negative mask row stride", OPS_ALL, &a, ATTN_ERR_STRIDE);
    o = fx.opt;
    a = valid_args(), t = fx.bias, t.head_stride = -1, o.bias = &t, a.opt = &o;
    expect_status("negative bias head stride", OPS_ALL, &a, ATTN_ERR_STRIDE);
}

Test(errors, arguments)
{
    harness_begin_plain("errors");
    fixture_init();
    call_args a = valid_args();
    attn_options o;
    a.opt = &o;
    static const float bad_scale[] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        o = fx.opt;
        o.scale = bad_scale[i];
        expect_status("non-finite scale", OPS_ALL & ~OPS_MASK_APPLY, &a, ATTN_ERR_ARG);
        o = fx.opt;
        o.softcap = bad_scale[i];
        expect_status("non-finite softcap", OPS_ALL, &a, ATTN_ERR_ARG);
    }
    o = fx.opt;
    o.softcap = -1.0f;
    expect_status("negative softcap", OPS_ALL, &a, ATTN_ERR_ARG);
    for (uint32_t bit = 1; bit < 32; bit++) {
        if ((1u << bit) & ATTN_OPT_FLAGS_ALL) /* a flag attn.h defines */
            continue;
        o = fx.opt;
        o.flags = ATTN_CAUSAL | (1u << bit);
        expect_status("unknown flag bit", OPS_ALL, &a, ATTN_ERR_ARG);
    }
    /* one table row for every sequence: meaningless without a table */
    o = fx.opt;
    o.flags = ATTN_SHARED_BLOCK_TABLE;
    expect_status("ATTN_SHARED_BLOCK_TABLE without a block_table",
                  OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_ARG);
    o = fx.opt;
    o.window = -1;
    expect_status("negative window", OPS_ALL, &a, ATTN_ERR_ARG);

    int32_t lens[B];
    static const int32_t bad_q[] = {-1, LQ + 1}, bad_k[] = {-1, LK + 1};
    for (int i = 0; i < 2; i++) {
        o = fx.opt;
        lens[0] = LQ;
        lens[1] = bad_q[i];
        o.q_lens = lens;
        expect_status("q_lens out of [0, q_len]", OPS_ALL, &a, ATTN_ERR_ARG);
        o = fx.opt;
        lens[0] = bad_k[i];
        lens[1] = 0;
        o.kv_lens = lens;
        expect_status("kv_lens out of [0, kv_len]", OPS_ALL, &a, ATTN_ERR_ARG);
    }

    attn_shape s = fx.shape;
    a = valid_args();
    a.shape = &s;
    s.kv_heads = 3; /* 4 % 3 */
    expect_status("q_heads % kv_heads", OPS_ALL, &a, ATTN_ERR_ARG);
    s.kv_heads = 8; /* more KV heads than query heads */
    expect_status("kv_heads > q_heads", OPS_ALL, &a, ATTN_ERR_ARG);

    /* wrong dtype for a slot: the sets of src/dtype_list.h's columns
       (tests/dtypes.h), then values off the list */
    attn_tensor t;
    int32_t dts[ATTN_DTYPE_COUNT + 3];
    _Static_assert(77 > TEST_DTYPE_UNKNOWN, "77 must stay off the list");
    /* neither a query nor a K/V dtype (BOOL), the first value past the list */
    int n = test_dtypes_of(DT_NO_INPUT, dts);
    dts[n++] = TEST_DTYPE_UNKNOWN, dts[n++] = -1, dts[n++] = 77;
    for (int i = 0; i < n; i++) {
        a = valid_args(), t = fx.q, t.dtype = dts[i], a.q = &t;
        expect_status("q dtype", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_ARG);
        a = valid_args(), t = fx.k, t.dtype = dts[i], a.k = &t;
        expect_status("k dtype", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_ARG);
        a = valid_args(), t = fx.v, t.dtype = dts[i], a.v = &t;
        expect_status("v dtype", OPS_FORWARD, &a, ATTN_ERR_ARG);
    }
    /* the quantized dtypes are for k and v only */
    n = test_dtypes_of(DT_KV_ONLY, dts);
    for (int i = 0; i < n; i++) {
        a = valid_args(), t = fx.q, t.dtype = dts[i], a.q = &t;
        expect_status("q quantized", OPS_SCORES | OPS_WEIGHTS | OPS_FORWARD, &a, ATTN_ERR_ARG);
        a = valid_args(), t = fx.out, t.dtype = dts[i], a.out = &t;
        expect_status("out quantized", OPS_FORWARD, &a, ATTN_ERR_ARG);
    }
    /* not F32: the rounded outputs (F16, BF16), BOOL, a value off the list */
    n = test_dtypes_of(DT_OUT_ROUNDED, dts);
    n += test_dtypes_of(DT_NO_INPUT, dts + n);
    dts[n++] = TEST_DTYPE_UNKNOWN + 1;
    for (int i = 0; i < n; i++) {
        a = valid_args(), t = fx.scores, t.dtype = dts[i], a.scores = &t;
        expect_status("scores dtype", OPS_SCORES | OPS_MASK_APPLY | OPS_WEIGHTS, &a,
                      ATTN_ERR_ARG);
        if (!test_dtype_is(dts[i], DT_OUT_ROUNDED)) { /* the forward's out may be (below) */
            a = valid_args(), t = fx.out, t.dtype = dts[i], a.out = &t;
            expect_status("out dtype", OPS_FORWARD, &a, ATTN_ERR_ARG);
        }
        if (!test_dtype_is(dts[i], DT_FLOAT)) { /* the bias may be F16 or BF16 (since 1.11) */
            o = fx.opt;
            a = valid_args(), t = fx.bias, t.dtype = dts[i], o.bias = &t, a.opt = &o;
            expect_status("bias dtype", OPS_ALL, &a, ATTN_ERR_ARG);
        }
    }
    /* the rounded outputs (F16, BF16) are valid dtypes of the forward's
       out: accepted, the rows written (ops/out_dtype checks their values) */
    n = test_dtypes_of(DT_OUT_ROUNDED, dts);
    for (int i = 0; i < n; i++) {
        t = fx.out, t.dtype = dts[i];
        fill_outputs();
        const attn_status st = attn_forward(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.v, &t, &fx.stats);
        CHECK(st == ATTN_OK, "forward with a %s out: %d (%s)", test_dtype_name(dts[i]), st,
              attn_strerror(st));
    }
    /* not BOOL: the float dtypes, a value off the list */
    n = test_dtypes_of(DT_FLOAT, dts);
    dts[n++] = TEST_DTYPE_UNKNOWN + 4;
    for (int i = 0; i < n; i++) {
        o = fx.opt;
        a = valid_args(), t = fx.mask, t.dtype = dts[i], o.mask = &t, a.opt = &o;
        expect_status("mask dtype", OPS_ALL, &a, ATTN_ERR_ARG);
    }
}

Test(errors, unsupported)
{
    harness_begin_plain("errors");
    fixture_init();
    /* head_dim / v_dim above ATTN_MAX_HEAD_DIM, with tensors big enough */
    const int64_t big = ATTN_MAX_HEAD_DIM + 1;
    float *qk = xcalloc0((size_t)big * 2, 4);
    attn_shape s = {1, 1, 1, 1, 1, big, 0};
    attn_tensor q = {qk, ATTN_DTYPE_F32, big, big, big}, k = q, v = q;
    attn_tensor sc = fx.scores, out = {fx.od, ATTN_DTYPE_F32, big, big, big};
    sc.row_stride = 1;
    call_args a = {&s, &fx.opt, &q, &k, &v, &sc, &out, &fx.stats};
    float *od = xcalloc0((size_t)big, 4);
    out.data = od;
    /* out is not the fixture buffer here: check it separately */
    memset(od, OUT_PATTERN, (size_t)big * 4);
    expect_status("head_dim > ATTN_MAX_HEAD_DIM", OPS_ALL, &a, ATTN_ERR_UNSUPPORTED);
    s.head_dim = 4;
    s.v_dim = big;
    expect_status("v_dim > ATTN_MAX_HEAD_DIM", OPS_ALL, &a, ATTN_ERR_UNSUPPORTED);
    for (int64_t i = 0; i < big; i++) {
        unsigned char *p = (unsigned char *)&od[i];
        CHECK(p[0] == OUT_PATTERN && p[3] == OUT_PATTERN, "out[%lld] written", (long long)i);
    }
    /* the largest supported head_dim works */
    s.head_dim = ATTN_MAX_HEAD_DIM;
    s.v_dim = 0;
    CHECK(attn_forward(&s, NULL, &q, &k, &v, &out, NULL) == ATTN_OK, "head_dim at the maximum");
    free(qk);
    free(od);

    /* an ISA the build or CPU lacks */
    for (int isa = ATTN_ISA_SCALAR + 1; isa < ATTN_ISA_COUNT; isa++)
        if (!attn_isa_available((attn_isa)isa))
            cr_assert_eq(attn_isa_select((attn_isa)isa), ATTN_ERR_UNSUPPORTED, "%s",
                         attn_isa_name((attn_isa)isa));
}

/* A caller's struct of struct_size bytes: the options, then (a newer
   attn.h's fields) zero bytes, or one set byte at `set` past them. */
static union {
    attn_options o;
    unsigned char bytes[4096 + 64];
} newer;

Test(errors, struct_size_version)
{
    harness_begin_plain("errors");
    fixture_init();
    call_args a = valid_args();
    a.opt = &newer.o;
    static const uint32_t bad[] = {0, 4, offsetof(attn_options, flags) + 3, 4097, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&newer, 0, sizeof newer);
        newer.o = fx.opt;
        newer.o.struct_size = bad[i];
        char what[64];
        snprintf(what, sizeof what, "struct_size = %u", bad[i]);
        expect_status(what, OPS_ALL, &a, ATTN_ERR_VERSION);
    }
    /* larger than this library's: refused when a byte past its fields is set */
    static const uint32_t sizes[] = {sizeof(attn_options) + 1, sizeof(attn_options) + 8, 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const size_t set[] = {sizeof(attn_options), sizes[i] - 1};
        for (size_t j = 0; j < 2; j++) {
            memset(&newer, 0, sizeof newer);
            newer.o = fx.opt;
            newer.o.struct_size = sizes[i];
            newer.bytes[set[j]] = 1;
            char what[96];
            snprintf(what, sizeof what, "struct_size = %u, byte %zu set", sizes[i], set[j]);
            expect_status(what, OPS_ALL, &a, ATTN_ERR_VERSION);
        }
    }
}

/* A program built against a newer attn.h (a larger struct_size, its new
   fields zero) gets what the same call with this library's size gives;
   a byte past struct_size is never read (it is set here). */
Test(errors, struct_size_newer_zero_tail)
{
    harness_begin_plain("errors");
    fixture_init();
    call_args a = valid_args();
    fill_outputs();
    CHECK(attn_forward(a.shape, a.opt, a.q, a.k, a.v, a.out, a.stats) == ATTN_OK, "the fixture");
    static float want[sizeof fx.od / sizeof(float)];
    memcpy(want, fx.od, sizeof fx.od);
    static const uint32_t sizes[] = {sizeof(attn_options) + 8, sizeof(attn_options) + 64, 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        memset(&newer, 0, sizeof newer);
        newer.o = fx.opt;
        newer.o.struct_size = sizes[i];
        newer.bytes[sizes[i]] = 0xff; /* past the struct: not the caller's */
        a.opt = &newer.o;
        fill_outputs();
        const attn_status st = attn_forward(a.shape, a.opt, a.q, a.k, a.v, a.out, a.stats);
        CHECK(st == ATTN_OK, "struct_size %u with a zero tail: %s", sizes[i], attn_last_error());
        CHECK(memcmp(want, fx.od, sizeof fx.od) == 0, "struct_size %u: other bits", sizes[i]);
    }
}

/* attn_softmax and attn_softmax_backward */
Test(errors, row_operations)
{
    harness_begin_plain("errors");
    float x[32], lse[4], p[32], dp[32], ds[32];
    unsigned char px[sizeof x], plse[sizeof lse], pds[sizeof ds];
    rng_fill(harness_rng(), x, 32, -1.0f, 1.0f);
    memcpy(p, x, sizeof p);
    memcpy(dp, x, sizeof dp);
    memset(lse, OUT_PATTERN, sizeof lse);
    memset(ds, OUT_PATTERN, sizeof ds);
    memcpy(px, x, sizeof x);
    memcpy(plse, lse, sizeof lse);
    memcpy(pds, ds, sizeof ds);
    typedef struct {
        const char *what;
        int64_t rows, cols, stride;
        attn_status want;
    } row_case;
    static const row_case cases[] = {
        {"rows 0", 0, 8, 8, ATTN_ERR_SHAPE},
        {"rows -1", -1, 8, 8, ATTN_ERR_SHAPE},
        {"cols 0", 4, 0, 8, ATTN_ERR_SHAPE},
        {"cols -3", 4, -3, 8, ATTN_ERR_SHAPE},
        {"row_stride < cols", 4, 8, 7, ATTN_ERR_STRIDE},
        {"row_stride 0", 4, 8, 0, ATTN_ERR_STRIDE},
        {"rows * row_stride overflows", INT64_MAX / 4, 8, 8, ATTN_ERR_SHAPE},
        {"huge row_stride", 2, 8, INT64_MAX / 2, ATTN_ERR_SHAPE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const row_case *c = &cases[i];
        harness_context("%s", c->what);
        attn_status st = attn_softmax(x, c->rows, c->cols, c->stride, lse);
        CHECK(st == c->want, "attn_softmax returned %d, expected %d", st, c->want);
        expect_bytes("softmax x", x, px, sizeof x);
        expect_bytes("softmax lse", lse, plse, sizeof lse);
        st = attn_softmax_backward(p, dp, ds, c->rows, c->cols, c->stride);
        CHECK(st == c->want, "attn_softmax_backward returned %d, expected %d", st, c->want);
        expect_bytes("softmax_backward ds", ds, pds, sizeof ds);
    }
    harness_context("NULL pointers");
    CHECK(attn_softmax(NULL, 4, 8, 8, lse) == ATTN_ERR_NULL, "softmax x NULL");
    expect_bytes("softmax lse", lse, plse, sizeof lse);
    CHECK(attn_softmax_backward(NULL, dp, ds, 4, 8, 8) == ATTN_ERR_NULL, "p NULL");
    CHECK(attn_softmax_backward(p, NULL, ds, 4, 8, 8) == ATTN_ERR_NULL, "dp NULL");
    CHECK(attn_softmax_backward(p, dp, NULL, 4, 8, 8) == ATTN_ERR_NULL, "ds NULL");
    expect_bytes("softmax_backward ds", ds, pds, sizeof ds);
    /* lse is optional */
    CHECK(attn_softmax(x, 4, 8, 8, NULL) == ATTN_OK, "lse NULL is allowed");
}

Test(errors, threadpool_arguments)
{
    attn_threadpool *pool = (attn_threadpool *)&pool; /* must stay as is on error */
    attn_threadpool *const before = pool;
    cr_assert_eq(attn_threadpool_create(-1, &pool), ATTN_ERR_ARG);
    cr_assert_eq(pool, before, "pool written on error");
    cr_assert_eq(attn_threadpool_create(2, NULL), ATTN_ERR_NULL);
    attn_threadpool_destroy(NULL); /* no-op */
}

/*
 * A smaller struct_size (an older caller): accepted, and every field beyond
 * it is ignored. The fields beyond hold garbage that would crash or fail if
 * read (a wild pointer for q_lens/mask/bias/parallel_for, window -5).
 */
static void bomb_parallel_for(void *ctx, attn_task_fn task, void *task_ctx, size_t n)
{
    (void)ctx;
    (void)task;
    (void)task_ctx;
    (void)n;
    cr_assert_fail("parallel_for beyond struct_size was called");
}

Test(errors, smaller_struct_size_ignores_later_fields)
{
    harness_begin_plain("errors");
    fixture_init();
    static const struct {
        uint32_t size;
        const char *name;
    } sizes[] = {
        {offsetof(attn_options, flags) + sizeof(uint32_t), "struct_size..flags"},
        {offsetof(attn_options, window), "..softcap"},
        {offsetof(attn_options, q_lens), "..window"},
        {offsetof(attn_options, mask), "..kv_lens"},
        {offsetof(attn_options, parallel_for), "..bias"},
    };
    const int32_t lens[B] = {1, 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        /* the reference call: the covered fields as given, the rest default */
        attn_options full = ATTN_OPTIONS_INIT;
        full.flags = ATTN_CAUSAL;
        if (sizes[i].size > offsetof(attn_options, scale))
            full.scale = 0.25f, full.softcap = 3.0f;
        if (sizes[i].size > offsetof(attn_options, window))
            full.window = 2;
        if (sizes[i].size > offsetof(attn_options, q_lens))
            full.q_lens = lens, full.kv_lens = lens;
        if (sizes[i].size > offsetof(attn_options, mask))
            full.mask = &fx.mask, full.bias = &fx.bias;

        attn_options old = full;
        old.struct_size = sizes[i].size;
        unsigned char *const garbage = (unsigned char *)&old + sizes[i].size;
        memset(garbage, 0xEB, sizeof old - sizes[i].size); /* wild pointers, negative window */
        if (sizes[i].size <= offsetof(attn_options, parallel_for))
            old.parallel_for = bomb_parallel_for;

        harness_context("struct_size %u (%s)", sizes[i].size, sizes[i].name);
        float *want = xmalloc(sizeof fx.od), *want_w = xmalloc(sizeof fx.sd);
        float want_lse[B * HQ * LQ];
        CHECK(attn_forward(&fx.shape, &full, &fx.q, &fx.k, &fx.v, &fx.out, &fx.stats) == ATTN_OK,
              "full struct");
        memcpy(want, fx.od, sizeof fx.od);
        memcpy(want_lse, fx.lse, sizeof fx.lse);
        CHECK(attn_weights(&fx.shape, &full, &fx.q, &fx.k, &fx.scores, NULL) == ATTN_OK, "full");
        memcpy(want_w, fx.sd, sizeof fx.sd);

        fill_outputs();
        attn_status st = attn_forward(&fx.shape, &old, &fx.q, &fx.k, &fx.v, &fx.out, &fx.stats);
        CHECK(st == ATTN_OK, "forward with the short struct returned %d", st);
        expect_bits("forward output", fx.od, want, sizeof fx.od / 4);
        expect_bits("forward lse", fx.lse, want_lse, sizeof fx.lse / 4);
        fill_outputs();
        st = attn_weights(&fx.shape, &old, &fx.q, &fx.k, &fx.scores, NULL);
        CHECK(st == ATTN_OK, "weights with the short struct returned %d", st);
        expect_bits("weights", fx.sd, want_w, sizeof fx.sd / 4);
        st = attn_scores(&fx.shape, &old, &fx.q, &fx.k, &fx.scores);
        CHECK(st == ATTN_OK, "scores with the short struct returned %d", st);
        st = attn_mask_apply(&fx.shape, &old, &fx.scores);
        CHECK(st == ATTN_OK, "mask_apply with the short struct returned %d", st);
        free(want);
        free(want_w);
    }
}

/*
 * Option arrays are inputs: an output may share no byte with them. Each
 * array is put inside an output buffer holding valid values (so no other
 * check rejects the call first); the call must return ATTN_ERR_STRIDE and
 * leave that buffer as it was. q_pos and k_pos were not registered as input
 * ranges before src/option_list.h.
 */
Test(errors, option_arrays_inside_outputs)
{
    harness_begin_plain("errors");
    fixture_init();
    enum { WHERE_OUT, WHERE_SCORES, WHERE_LSE };
    static const struct {
        const char *what;
        int field; /* 0 q_pos, 1 k_pos, 2 q_lens, 3 kv_lens, 4 q_offsets */
        int where;
        unsigned ops;
    } cases[] = {
        {"q_pos inside out", 0, WHERE_OUT, OPS_FORWARD},
        {"k_pos inside out", 1, WHERE_OUT, OPS_FORWARD},
        {"q_pos inside scores", 0, WHERE_SCORES, OPS_SCORES | OPS_WEIGHTS | OPS_MASK_APPLY},
        {"k_pos inside lse", 1, WHERE_LSE, OPS_WEIGHTS | OPS_FORWARD},
        {"q_lens inside lse", 2, WHERE_LSE, OPS_WEIGHTS | OPS_FORWARD},
        {"kv_lens inside out", 3, WHERE_OUT, OPS_FORWARD},
        {"q_offsets inside scores", 4, WHERE_SCORES, OPS_SCORES | OPS_WEIGHTS},
    };
    static const char *const names[] = {"attn_scores", "attn_mask_apply", "attn_weights",
                                        "attn_forward"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int op = 0; op < 4; op++) {
            if (!(cases[c].ops & (1u << op)))
                continue;
            fill_outputs();
            unsigned char *dst = cases[c].where == WHERE_OUT      ? (unsigned char *)fx.od
                                 : cases[c].where == WHERE_SCORES ? (unsigned char *)fx.sd
                                                                  : (unsigned char *)fx.lse;
            const size_t bytes = cases[c].where == WHERE_OUT      ? sizeof fx.od
                                 : cases[c].where == WHERE_SCORES ? sizeof fx.sd
                                                                  : sizeof fx.lse;
            /* 8 bytes in: inside the buffer, 8-byte aligned (the buffers are) */
            const int64_t pos[B] = {0, 3};
            const int32_t lens[B] = {LQ, 2}, offs[B] = {0, 0};
            attn_options o = fx.opt;
            switch (cases[c].field) {
            case 0: memcpy(dst + 8, pos, sizeof pos), o.q_pos = (const int64_t *)(void *)(dst + 8); break;
            case 1: memcpy(dst + 8, pos, sizeof pos), o.k_pos = (const int64_t *)(void *)(dst + 8); break;
            case 2: memcpy(dst + 8, lens, sizeof lens), o.q_lens = (const int32_t *)(void *)(dst + 8); break;
            case 3: memcpy(dst + 8, lens, sizeof lens), o.kv_lens = (const int32_t *)(void *)(dst + 8); break;
            default: memcpy(dst + 8, offs, sizeof offs), o.q_offsets = (const int32_t *)(void *)(dst + 8); break;
            }
            unsigned char *before = malloc(bytes);
            cr_assert(before);
            memcpy(before, dst, bytes);
            attn_status got;
            switch (op) {
            case 0: got = attn_scores(&fx.shape, &o, &fx.q, &fx.k, &fx.scores); break;
            case 1: got = attn_mask_apply(&fx.shape, &o, &fx.scores); break;
            case 2: got = attn_weights(&fx.shape, &o, &fx.q, &fx.k, &fx.scores, &fx.stats); break;
            default: got = attn_forward(&fx.shape, &o, &fx.q, &fx.k, &fx.v, &fx.out, &fx.stats); break;
            }
            harness_context("%s: %s", names[op], cases[c].what);
            CHECK(got == ATTN_ERR_STRIDE, "returned %d (%s), expected ATTN_ERR_STRIDE", got,
                  attn_strerror(got));
            expect_bytes(cases[c].what, dst, before, bytes);
            free(before);
        }
}

/* ------------------------------------------------------------ attn_last_error */

enum { LE_B = 2, LE_H = 2, LE_L = 8, LE_D = 8 };

typedef struct le_case {
    const char *what, *want; /* the call's description, a part of the message */
} le_case;

/* One failing attn_forward on a valid problem changed by `change`, and the
   message attn_last_error gives for it. */
static const char *le_forward(int change)
{
    static float q[LE_B * LE_H * LE_L * LE_D], k[LE_B * LE_H * LE_L * LE_D],
        v[LE_B * LE_H * LE_L * LE_D], out[LE_B * LE_H * LE_L * LE_D];
    static uint16_t bias16[LE_L * LE_L];
    attn_shape s = {LE_B, LE_H, LE_H, LE_L, LE_L, LE_D, 0};
    attn_tensor tq = {q, ATTN_DTYPE_F32, LE_H * LE_L * LE_D, LE_L * LE_D, LE_D};
    attn_tensor tk = tq, tv = tq, to = tq;
    tk.data = k, tv.data = v, to.data = out;
    attn_options o = ATTN_OPTIONS_INIT;
    const int32_t lens[LE_B] = {3, 9}, offsets[LE_B] = {0, 2};
    const int32_t table[LE_B * 2] = {0, 1, 2, -1};
    const attn_tensor tb = {bias16, ATTN_DTYPE_BOOL, 0, 0, LE_L};
    const attn_tensor *pq = &tq;
    switch (change) {
    case 0: s.q_len = -1; break;
    case 1: o.kv_lens = lens; break;
    case 2: pq = NULL; break;
    case 3: to.batch_stride = 0; break;
    case 4: tk.row_stride = -1; break;
    case 5: o.struct_size = 3; break;
    case 6: o.bias = &tb; break;
    case 7: to.data = q; break;
    case 8: s.q_heads = 3; break;
    case 9: o.scale = NAN; break;
    case 10: o.window = -3; break;
    case 11: o.kv_offsets = offsets; break;
    case 12: /* a page no block of the pool holds */
        o.block_table = table, o.block_table_stride = 2, o.block_size = 4, o.num_blocks = 4;
        tk.batch_stride = tv.batch_stride = 4 * LE_D;
        tk.head_stride = tv.head_stride = 4 * 4 * LE_D;
        break;
    case 13: o.flags = 4; break;
    default: break;
    }
    const attn_status st = attn_forward(&s, &o, pq, &tk, &tv, &to, NULL);
    CHECK(st != ATTN_OK, "case %d was accepted", change);
    return attn_last_error();
}

Test(errors, last_error_names_the_argument)
{
    harness_begin_plain("errors.last_error");
    static const le_case cases[] = {
        {"q_len -1", "attn_forward: shape->q_len = -1, must be >= 0"},
        {"kv_lens above kv_len", "attn_forward: opt->kv_lens[1] = 9: must be in [0, kv_len = 8]"},
        {"q NULL", "attn_forward: q is NULL"},
        {"broadcast out", "an output's batch_stride = 0"},
        {"negative stride", "row_stride = -1 is negative"},
        {"struct_size", "opt->struct_size = 3"},
        {"bias dtype", "opt->bias->dtype = 3, must be ATTN_DTYPE_F32, F16 or BF16"},
        {"out over q", "an output shares bytes with an input"},
        {"q_heads", "shape->q_heads = 3 is not a multiple of kv_heads = 2"},
        {"scale NaN", "attn_forward: opt->scale = nan: must be finite"},
        {"window", "attn_forward: opt->window = -3: must be >= 0"},
        {"kv_offsets", "opt->kv_offsets[1] = 2 with a length of 8: the sequence must lie inside "
                       "[0, kv_len = 8)"},
        {"page", "opt->block_table[1 * 2 + 1] = -1 (sequence 1, page 1"},
        {"flags", "opt->flags = 0x4 has bits no ATTN_* flag defines (0x4)"},
    };
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        const char *got = le_forward(i);
        CHECK(strstr(got, cases[i].want) != NULL, "%s: attn_last_error() = \"%s\", expected \"%s\"",
              cases[i].what, got, cases[i].want);
    }
    /* a failure no check describes gets attn_strerror's sentence, never an
       earlier call's detail */
    CHECK(attn_isa_select((attn_isa)1000) != ATTN_OK, "isa 1000 accepted");
    char want[1024];
    snprintf(want, sizeof want, "attn_isa_select: %s", attn_strerror(attn_isa_select((attn_isa)1000)));
    CHECK(strcmp(attn_last_error(), want) == 0, "attn_last_error() = \"%s\", want \"%s\"",
          attn_last_error(), want);
    /* a success leaves it as it was */
    CHECK(attn_version() == ATTN_VERSION && attn_softmax(NULL, 1, 1, 1, NULL) != ATTN_OK,
          "softmax NULL accepted");
    const char *before = attn_last_error();
    CHECK(strstr(before, "attn_softmax: ") == before, "attn_last_error() = \"%s\"", before);
    float x[4] = {1, 2, 3, 4};
    CHECK(attn_softmax(x, 1, 4, 4, NULL) == ATTN_OK, "softmax failed");
    CHECK(strstr(attn_last_error(), "attn_softmax: ") == attn_last_error(),
          "a success changed it to \"%s\"", attn_last_error());
}

/* A detail longer than the buffer is cut at a word, with "..." (attn.h). */
Test(errors, last_error_long_detail_cut_at_word)
{
    harness_begin_plain("errors.last_error_long");
    char detail[3000];
    size_t n = 0;
    for (int w = 0; n + 16 < sizeof detail; w++)
        n += (size_t)snprintf(detail + n, sizeof detail - n, "word%d ", w);
    const unsigned mark = attn_error_mark();
    attn_error_done("attn_test", mark, attn_fail(ATTN_ERR_ARG, "%s", detail));
    const char *got = attn_last_error();
    const size_t len = strlen(got);
    CHECK(len < 1024 && len > 900, "%zu bytes", len);
    CHECK(strcmp(got + len - 3, "...") == 0, "ends \"%s\"", got + len - 8);
    /* what precedes "..." is the detail up to the end of a word */
    const char *kept = got + strlen("attn_test: ");
    const size_t k = (size_t)(got + len - 3 - kept);
    CHECK(strncmp(kept, detail, k) == 0 && detail[k] == ' ', "cut mid-word: \"...%.12s\"",
          got + len - 15);
}

static void *le_other_thread(void *arg)
{
    (void)arg;
    (void)le_forward(1); /* kv_lens: this thread's own message */
    return NULL;
}

Test(errors, last_error_is_per_thread)
{
    harness_begin_plain("errors.last_error_per_thread");
    (void)le_forward(0);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", attn_last_error());
    pthread_t t;
    CHECK(pthread_create(&t, NULL, le_other_thread, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(strcmp(attn_last_error(), mine) == 0, "another thread's failure changed it: \"%s\"",
          attn_last_error());
}

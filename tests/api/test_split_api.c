/* SPDX-License-Identifier: MIT */
/*
 * The public side of split-KV, attn_merge and global positions: argument
 * checks (the status, and nothing written by a rejected call), the
 * workspace-size query, the old-struct_size behaviour of the 1.1 fields,
 * and the documented semantics through the public entry points.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "harness.h"
#include "option_list.h" /* ATTN_OPT_FLAGS_ALL */
#include "workload.h"

#define CANARY_BYTE 0x5a

static int untouched(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != CANARY_BYTE)
            return 0;
    return 1;
}

/* A decode problem long enough for the automatic split. */
typedef struct decode {
    attn_shape shape;
    float *q, *k, *v, *out, *lse;
    attn_tensor tq, tk, tv, tout;
    size_t out_bytes;
} decode;

static void decode_make(decode *d, int64_t kv_len)
{
    d->shape = (attn_shape){1, 4, 1, 1, kv_len, 32, 32};
    rng *g = harness_rng();
    d->q = xmalloc(4 * 32 * 4);
    d->k = xmalloc((size_t)kv_len * 32 * 4);
    d->v = xmalloc((size_t)kv_len * 32 * 4);
    rng_fill(g, d->q, 4 * 32, -1.0f, 1.0f);
    rng_fill(g, d->k, (size_t)kv_len * 32, -1.0f, 1.0f);
    rng_fill(g, d->v, (size_t)kv_len * 32, -1.0f, 1.0f);
    d->out_bytes = 4 * 32 * 4;
    d->out = xmalloc(d->out_bytes);
    d->lse = xmalloc(4 * 4);
    d->tq = (attn_tensor){d->q, ATTN_DTYPE_F32, 4 * 32, 32, 32};
    d->tk = (attn_tensor){d->k, ATTN_DTYPE_F32, kv_len * 32, kv_len * 32, 32};
    d->tv = (attn_tensor){d->v, ATTN_DTYPE_F32, kv_len * 32, kv_len * 32, 32};
    d->tout = (attn_tensor){d->out, ATTN_DTYPE_F32, 4 * 32, 32, 32};
}

static void decode_free(decode *d)
{
    free(d->q), free(d->k), free(d->v), free(d->out), free(d->lse);
}

static attn_status decode_run(decode *d, const attn_options *o)
{
    memset(d->out, CANARY_BYTE, d->out_bytes);
    memset(d->lse, CANARY_BYTE, 16);
    attn_row_stats st = {d->lse, NULL, NULL};
    return attn_forward(&d->shape, o, &d->tq, &d->tk, &d->tv, &d->tout, &st);
}

Test(split_api, workspace_query)
{
    harness_begin_plain("split_api");
    decode d;
    decode_make(&d, 8192);
    attn_options o = ATTN_OPTIONS_INIT;
    size_t need = 1;
    cr_assert(attn_forward_workspace_size(&d.shape, &o, &need) == ATTN_OK);
    cr_assert(need > 0, "decode on 8192 keys, one KV head: expected an automatic split");
    size_t again = 0;
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) { /* not ISA dependent */
        if (attn_isa_select((attn_isa)isa) != ATTN_OK)
            continue;
        cr_assert(attn_forward_workspace_size(&d.shape, &o, &again) == ATTN_OK);
        cr_assert(again == need, "%s: %zu vs %zu", attn_isa_name((attn_isa)isa), again, need);
    }
    attn_isa_select(ATTN_ISA_AUTO);
    o.kv_splits = 1;
    cr_assert(attn_forward_workspace_size(&d.shape, &o, &again) == ATTN_OK && again == 0);
    /* many tasks: no split */
    attn_shape big = {8, 32, 8, 512, 4096, 128, 128};
    o.kv_splits = 0;
    cr_assert(attn_forward_workspace_size(&big, &o, &again) == ATTN_OK && again == 0);
    /* argument checks */
    cr_assert(attn_forward_workspace_size(NULL, &o, &again) == ATTN_ERR_NULL);
    cr_assert(attn_forward_workspace_size(&d.shape, &o, NULL) == ATTN_ERR_NULL);
    o.kv_splits = -1;
    cr_assert(attn_forward_workspace_size(&d.shape, &o, &again) == ATTN_ERR_ARG);
    o.kv_splits = ATTN_MAX_KV_SPLITS + 1;
    cr_assert(attn_forward_workspace_size(&d.shape, &o, &again) == ATTN_ERR_ARG);
    o.kv_splits = ATTN_MAX_KV_SPLITS;
    cr_assert(attn_forward_workspace_size(&d.shape, &o, &again) == ATTN_OK && again > need);
    attn_shape bad = d.shape;
    bad.kv_len = -1;
    o.kv_splits = 0;
    cr_assert(attn_forward_workspace_size(&bad, &o, &again) == ATTN_ERR_SHAPE);
    bad.kv_len = 0; /* an empty problem (1.11): nothing to split */
    cr_assert(attn_forward_workspace_size(&bad, &o, &again) == ATTN_OK && again == 0);
    decode_free(&d);
}

Test(split_api, forward_workspace_errors_write_nothing)
{
    harness_begin_plain("split_api");
    decode d;
    decode_make(&d, 3000);
    attn_options o = ATTN_OPTIONS_INIT;
    o.kv_splits = 3;
    size_t need = 0;
    cr_assert(attn_forward_workspace_size(&d.shape, &o, &need) == ATTN_OK && need > 0);
    unsigned char *ws = xmalloc(need);

    /* asked for a split, no or too little workspace: ATTN_ERR_ARG */
    cr_assert(decode_run(&d, &o) == ATTN_ERR_ARG);
    cr_assert(untouched(d.out, d.out_bytes) && untouched(d.lse, 16));
    o.workspace = ws;
    o.workspace_size = need - 1;
    cr_assert(decode_run(&d, &o) == ATTN_ERR_ARG);
    cr_assert(untouched(d.out, d.out_bytes) && untouched(d.lse, 16));

    /* a workspace over an input or an output: ATTN_ERR_STRIDE */
    float *big = xmalloc(need + d.out_bytes);
    attn_tensor saved = d.tout;
    d.tout.data = big;
    o.workspace = (char *)big + 64;
    o.workspace_size = need;
    memset(big, CANARY_BYTE, need + d.out_bytes);
    attn_row_stats st = {d.lse, NULL, NULL};
    cr_assert(attn_forward(&d.shape, &o, &d.tq, &d.tk, &d.tv, &d.tout, &st) == ATTN_ERR_STRIDE);
    cr_assert(untouched(big, need + d.out_bytes));
    d.tout = saved;
    o.workspace = d.k; /* an input */
    cr_assert(decode_run(&d, &o) == ATTN_ERR_STRIDE);
    cr_assert(untouched(d.out, d.out_bytes));
    o.workspace = d.lse; /* the stats */
    o.workspace_size = need;
    cr_assert(decode_run(&d, &o) == ATTN_ERR_STRIDE);
    cr_assert(untouched(d.out, d.out_bytes));

    /* enough: accepted, and the same bits whatever the workspace held */
    o.workspace = ws;
    memset(ws, 0xff, need); /* NaN patterns everywhere */
    cr_assert(decode_run(&d, &o) == ATTN_OK);
    float first[128];
    memcpy(first, d.out, sizeof first);
    memset(ws, 0, need);
    cr_assert(decode_run(&d, &o) == ATTN_OK);
    cr_assert(memcmp(first, d.out, sizeof first) == 0, "result depends on workspace contents");
    free(big);
    free(ws);
    decode_free(&d);
}

Test(split_api, positions_checked)
{
    harness_begin_plain("split_api");
    decode d;
    decode_make(&d, 300);
    attn_options o = ATTN_OPTIONS_INIT;
    int64_t pos = -1;
    o.q_pos = &pos;
    cr_assert(decode_run(&d, &o) == ATTN_ERR_ARG);
    cr_assert(untouched(d.out, d.out_bytes));
    pos = ATTN_MAX_POSITION + 1;
    cr_assert(decode_run(&d, &o) == ATTN_ERR_ARG);
    o.q_pos = NULL;
    o.k_pos = &pos;
    cr_assert(decode_run(&d, &o) == ATTN_ERR_ARG);
    pos = ATTN_MAX_POSITION; /* extremes are fine: nothing overflows */
    int64_t qp = 0;
    o.q_pos = &qp;
    o.flags = ATTN_CAUSAL;
    cr_assert(decode_run(&d, &o) == ATTN_OK);
    /* every key is in the query's future: a fully masked row */
    for (int c = 0; c < 4 * 32; c++)
        cr_assert(d.out[c] == 0.0f);
    for (int r = 0; r < 4; r++)
        cr_assert(d.lse[r] == -INFINITY);
    qp = ATTN_MAX_POSITION;
    pos = 0;
    o.window = INT64_MAX; /* huge window, huge distance */
    cr_assert(decode_run(&d, &o) == ATTN_OK);
    for (int r = 0; r < 4; r++)
        cr_assert(isfinite(d.lse[r]));
    decode_free(&d);
}

/* Positions are relative: shifting q_pos and k_pos together changes no bit,
   and the defaults equal the explicit bottom-right positions. */
Test(split_api, positions_relative)
{
    harness_begin_plain("split_api");
    for (int rep = 0; rep < 20; rep++) {
        workload w;
        wl_make(&w, WL_CAUSAL | WL_WINDOW | WL_LENS | (rep & 1 ? WL_Q_SHORT : WL_Q_LONG));
        harness_context("%s", wl_describe(&w));
        const size_t rows = (size_t)wl_rows(&w), n = rows * (size_t)w.dv;
        float *a = xmalloc(n * 4), *b = xmalloc(n * 4);
        wl_poison_outputs(&w);
        cr_assert(attn_forward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) == ATTN_OK);
        wl_gather(&w, &w.out, w.dv, a);
        int64_t qp[WL_MAX_BATCH], kp[WL_MAX_BATCH];
        const int64_t shift = rng_int(harness_rng(), 0, 1 << 20);
        for (int64_t i = 0; i < w.shape.batch; i++) {
            const int64_t lq = w.opt.q_lens ? w.opt.q_lens[i] : w.shape.q_len;
            const int64_t lk = w.opt.kv_lens ? w.opt.kv_lens[i] : w.shape.kv_len;
            qp[i] = shift + w.shape.q_len + lk - lq; /* >= 0 */
            kp[i] = shift + w.shape.q_len;
        }
        w.opt.q_pos = qp;
        w.opt.k_pos = kp;
        wl_poison_outputs(&w);
        cr_assert(attn_forward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) == ATTN_OK);
        wl_gather(&w, &w.out, w.dv, b);
        expect_bits("explicit positions vs defaults", b, a, n);
        free(a);
        free(b);
        wl_free(&w);
    }
}

/* The 1.1 fields beyond an older struct_size are never read. */
Test(split_api, old_struct_size_ignores_new_fields)
{
    harness_begin_plain("split_api");
    decode d;
    decode_make(&d, 5000);
    attn_options o = ATTN_OPTIONS_INIT;
    cr_assert(decode_run(&d, &o) == ATTN_OK);
    float want[128];
    memcpy(want, d.out, sizeof want);
    o.struct_size = (uint32_t)offsetof(attn_options, q_pos); /* a 1.0 caller */
    o.q_pos = (const int64_t *)(uintptr_t)8;                 /* wild: must not be read */
    o.k_pos = (const int64_t *)(uintptr_t)8;
    o.workspace = (void *)(uintptr_t)8;
    o.workspace_size = (size_t)-1;
    o.kv_splits = -7;
    cr_assert(decode_run(&d, &o) == ATTN_OK);
    cr_assert(memcmp(want, d.out, sizeof want) == 0);
    decode_free(&d);
}

static attn_status merge2(const attn_shape *s, attn_partial *parts, int64_t n,
                          const attn_tensor *out, float *lse)
{
    return attn_merge(s, NULL, parts, n, out, lse);
}

Test(split_api, merge_errors_write_nothing)
{
    harness_begin_plain("split_api");
    attn_shape s = {1, 2, 1, 3, 10, 8, 4};
    float o0[24], o1[24], l0[6], l1[6], out[24], lse[6];
    for (int i = 0; i < 24; i++)
        o0[i] = o1[i] = 1.0f;
    for (int i = 0; i < 6; i++)
        l0[i] = l1[i] = 0.0f;
    attn_partial parts[2] = {{{o0, ATTN_DTYPE_F32, 12, 12, 4}, l0},
                             {{o1, ATTN_DTYPE_F32, 12, 12, 4}, l1}};
    parts[0].out.head_stride = parts[1].out.head_stride = 12;
    parts[0].out.row_stride = parts[1].out.row_stride = 4;
    attn_tensor to = {out, ATTN_DTYPE_F32, 24, 12, 4};
#define EXPECT_MERGE(want, ...)                                                       \
    do {                                                                              \
        memset(out, CANARY_BYTE, sizeof out);                                         \
        memset(lse, CANARY_BYTE, sizeof lse);                                         \
        attn_status st_ = (__VA_ARGS__);                                              \
        cr_assert(st_ == (want), "%s: status %d, want %d", #__VA_ARGS__, st_, want);  \
        if ((want) != ATTN_OK)                                                        \
            cr_assert(untouched(out, sizeof out) && untouched(lse, sizeof lse));      \
    } while (0)
    EXPECT_MERGE(ATTN_OK, merge2(&s, parts, 2, &to, lse));
    for (int i = 0; i < 24; i++)
        cr_assert(out[i] == 1.0f);
    for (int i = 0; i < 6; i++)
        cr_assert(fabsf(lse[i] - logf(2.0f)) < 1e-6f);
    EXPECT_MERGE(ATTN_OK, merge2(&s, parts, 2, &to, NULL));
    EXPECT_MERGE(ATTN_ERR_NULL, merge2(NULL, parts, 2, &to, lse));
    EXPECT_MERGE(ATTN_ERR_NULL, merge2(&s, NULL, 2, &to, lse));
    EXPECT_MERGE(ATTN_ERR_NULL, merge2(&s, parts, 2, NULL, lse));
    EXPECT_MERGE(ATTN_ERR_SHAPE, merge2(&s, parts, 0, &to, lse));
    EXPECT_MERGE(ATTN_ERR_SHAPE, merge2(&s, parts, -1, &to, lse));
    parts[1].lse = NULL;
    EXPECT_MERGE(ATTN_ERR_NULL, merge2(&s, parts, 2, &to, lse));
    parts[1].lse = l1;
    parts[1].out.dtype = ATTN_DTYPE_BF16;
    EXPECT_MERGE(ATTN_ERR_ARG, merge2(&s, parts, 2, &to, lse));
    parts[1].out.dtype = ATTN_DTYPE_F16; /* parts are F32 only */
    EXPECT_MERGE(ATTN_ERR_ARG, merge2(&s, parts, 2, &to, lse));
    parts[1].out.dtype = ATTN_DTYPE_F32;
    /* out: F32, F16 or BF16; never BOOL, a quantized dtype (the list's
       outputs NONE, tests/dtypes.h) or a value off the list */
    int32_t bad_out[ATTN_DTYPE_COUNT + 2];
    int n_bad = test_dtypes_of(DT_OUT_NONE, bad_out);
    bad_out[n_bad++] = TEST_DTYPE_UNKNOWN, bad_out[n_bad++] = -1;
    for (int i = 0; i < n_bad; i++) {
        to.dtype = bad_out[i];
        EXPECT_MERGE(ATTN_ERR_ARG, merge2(&s, parts, 2, &to, lse));
    }
    int32_t half_out[ATTN_DTYPE_COUNT];
    const int n_half = test_dtypes_of(DT_OUT_ROUNDED, half_out);
    for (int i = 0; i < n_half; i++) { /* 1.0 and log 2, in 16 bits */
        /* 1.0's encoding: a rounded output dtype the list gains fails here
           until it has its own */
        const unsigned want_one = half_out[i] == ATTN_DTYPE_F16    ? 0x3c00u
                                  : half_out[i] == ATTN_DTYPE_BF16 ? 0x3f80u
                                                                   : 0x10000u;
        cr_assert(want_one <= 0xffffu, "no encoding of 1.0 here for dtype %s",
                  test_dtype_name(half_out[i]));
        to.dtype = half_out[i];
        EXPECT_MERGE(ATTN_OK, merge2(&s, parts, 2, &to, lse));
        uint16_t one;
        memcpy(&one, out, 2);
        cr_assert(one == want_one, "merged 1.0 as %s: 0x%04x", test_dtype_name(half_out[i]),
                  one);
        cr_assert(untouched((unsigned char *)out + 24 * 2, sizeof out - 24 * 2),
                  "a 16-bit merge wrote past its 24 elements");
    }
    to.dtype = ATTN_DTYPE_F32;
    parts[1].out.row_stride = -4;
    EXPECT_MERGE(ATTN_ERR_STRIDE, merge2(&s, parts, 2, &to, lse));
    parts[1].out.row_stride = 4;
    to.row_stride = 0; /* broadcast output */
    EXPECT_MERGE(ATTN_ERR_STRIDE, merge2(&s, parts, 2, &to, lse));
    to.row_stride = 4;
    s.v_dim = ATTN_MAX_HEAD_DIM + 1;
    EXPECT_MERGE(ATTN_ERR_UNSUPPORTED, merge2(&s, parts, 2, &to, lse));
    s.v_dim = 4;
    s.q_heads = 3; /* not a multiple of kv_heads */
    s.kv_heads = 2;
    EXPECT_MERGE(ATTN_ERR_ARG, merge2(&s, parts, 2, &to, lse));
    s.q_heads = 2;
    s.kv_heads = 1;
    /* outputs over inputs */
    attn_tensor over = to;
    over.data = o1;
    memset(out, CANARY_BYTE, sizeof out);
    cr_assert(attn_merge(&s, NULL, parts, 2, &over, lse) == ATTN_ERR_STRIDE);
    cr_assert(o1[0] == 1.0f && untouched(lse, sizeof lse));
    EXPECT_MERGE(ATTN_ERR_STRIDE, merge2(&s, parts, 2, &to, l0));
    EXPECT_MERGE(ATTN_ERR_STRIDE, merge2(&s, parts, 2, &to, out + 2));
    attn_options old = ATTN_OPTIONS_INIT;
    old.struct_size = 3;
    memset(out, CANARY_BYTE, sizeof out);
    cr_assert(attn_merge(&s, &old, parts, 2, &to, lse) == ATTN_ERR_VERSION);
    cr_assert(untouched(out, sizeof out));
    /* flags: ATTN_CAUSAL (the partials' own calls' options) is accepted,
       bits no version defines are ATTN_ERR_ARG as in every operation */
    attn_options fl = ATTN_OPTIONS_INIT;
    fl.flags = ATTN_CAUSAL;
    EXPECT_MERGE(ATTN_OK, attn_merge(&s, &fl, parts, 2, &to, lse));
    for (uint32_t bit = 1; bit < 32; bit++) {
        if ((1u << bit) & ATTN_OPT_FLAGS_ALL) /* a flag attn.h defines */
            continue;
        fl.flags = ATTN_CAUSAL | (1u << bit);
        EXPECT_MERGE(ATTN_ERR_ARG, attn_merge(&s, &fl, parts, 2, &to, lse));
    }
#undef EXPECT_MERGE
}

/* The rules of attn.h: -inf partials contribute nothing and are not read,
   all -inf gives 0 and -inf, NaN/+inf lse poisons, NaN in a used row
   propagates. */
Test(split_api, merge_rules)
{
    harness_begin_plain("split_api");
    attn_shape s = {1, 1, 1, 5, 1, 3, 3};
    float o0[15], o1[15], l0[5], l1[5], out[15], lse[5];
    for (int i = 0; i < 15; i++) {
        o0[i] = 2.0f;
        o1[i] = NAN; /* read only where l1 != -inf */
    }
    const float L0[5] = {0.0f, -INFINITY, 1.0f, 0.0f, 0.0f};
    const float L1[5] = {-INFINITY, -INFINITY, NAN, INFINITY, 5.0f};
    memcpy(l0, L0, sizeof l0);
    memcpy(l1, L1, sizeof l1);
    for (int c = 0; c < 3; c++)
        o1[12 + c] = 4.0f; /* row 4: both used */
    o1[12 + 1] = NAN;
    attn_partial parts[2] = {{{o0, ATTN_DTYPE_F32, 15, 15, 3}, l0},
                             {{o1, ATTN_DTYPE_F32, 15, 15, 3}, l1}};
    attn_tensor to = {out, ATTN_DTYPE_F32, 15, 15, 3};
    cr_assert(attn_merge(&s, NULL, parts, 2, &to, lse) == ATTN_OK);
    for (int c = 0; c < 3; c++) {
        cr_assert(out[c] == 2.0f, "row 0: the -inf partial's NaN leaked");
        cr_assert(out[3 + c] == 0.0f, "row 1: all -inf");
        cr_assert(isnan(out[6 + c]) && isnan(out[9 + c]), "rows 2, 3: poisoned");
    }
    cr_assert(lse[0] == 0.0f && lse[1] == -INFINITY && isnan(lse[2]) && isnan(lse[3]));
    cr_assert(isfinite(out[12]) && isnan(out[13]) && isfinite(out[14]));
    cr_assert(fabsf(lse[4] - (5.0f + log1pf(expf(-5.0f)))) < 1e-5f);
}

/* attn_forward_workspace_bound reads no array: for any lengths and shared
   prefixes within a shape, attn_forward_workspace_size is at most it, and a
   forward given the bound's bytes gives the bits of one given exactly the
   size (it splits and shares the same way: both have room). */
Test(split_api, workspace_bound_covers_every_length)
{
    harness_begin_plain("split_api/workspace_bound");
    rng *g = harness_rng();
    enum { B = 3 };
    for (int it = 0; it < 400; it++) {
        const int64_t kvh = rng_int(g, 1, 4), hq = kvh * rng_int(g, 1, 8);
        const attn_shape s = {B, hq, kvh, rng_int(g, 1, 300), rng_int(g, 0, 70000),
                              rng_int(g, 1, 8) * 16, 0};
        int32_t ql[B], kl[B], sp[B];
        attn_options o = ATTN_OPTIONS_INIT;
        o.kv_splits = (int32_t)(rng_int(g, 0, 3) == 0 ? rng_int(g, 0, 9) : 0);
        const int with_lens = rng_int(g, 0, 1), with_prefix = rng_int(g, 0, 2) == 0;
        for (int b = 0; b < B; b++) {
            ql[b] = (int32_t)rng_int(g, 0, s.q_len);
            kl[b] = (int32_t)rng_int(g, 0, s.kv_len);
        }
        for (int b = 0; b < B; b++) /* within its keys and the previous sequence's */
            sp[b] = b == 0 ? 0 : (int32_t)rng_int(g, 0, kl[b] < kl[b - 1] ? kl[b] : kl[b - 1]);
        o.q_lens = with_lens ? ql : NULL;
        o.kv_lens = with_lens ? kl : NULL;
        o.shared_prefix = with_prefix ? sp : NULL;
        if (!with_lens && with_prefix) /* every sequence has kv_len keys */
            for (int b = 1; b < B; b++)
                sp[b] = (int32_t)rng_int(g, 0, s.kv_len);
        size_t bound = 0, exact = 0;
        cr_assert_eq(attn_forward_workspace_bound(&s, &o, &bound), ATTN_OK, "%s",
                     attn_last_error());
        cr_assert_eq(attn_forward_workspace_size(&s, &o, &exact), ATTN_OK, "%s",
                     attn_last_error());
        cr_assert(exact <= bound,
                  "B %lld Hq %lld Hkv %lld Lq %lld Lk %lld splits %d lens %d prefix %d: size %zu "
                  "above the bound %zu",
                  (long long)s.batch, (long long)s.q_heads, (long long)s.kv_heads,
                  (long long)s.q_len, (long long)s.kv_len, (int)o.kv_splits, with_lens,
                  with_prefix, exact, bound);
        /* the arrays' contents are not read: garbage pointers are fine */
        attn_options blind = o;
        blind.q_lens = blind.kv_lens = with_lens ? (const int32_t *)(uintptr_t)8 : NULL;
        blind.shared_prefix = with_prefix ? (const int32_t *)(uintptr_t)8 : NULL;
        size_t again = 0;
        cr_assert_eq(attn_forward_workspace_bound(&s, &blind, &again), ATTN_OK);
        cr_assert_eq(again, bound);
    }
    /* a forward with the bound's bytes: the bits of one with the exact size */
    decode d;
    decode_make(&d, 8192);
    attn_options o = ATTN_OPTIONS_INIT;
    const int32_t ql[1] = {1}, kl[1] = {5000};
    o.q_lens = ql, o.kv_lens = kl;
    size_t bound = 0, exact = 0;
    cr_assert_eq(attn_forward_workspace_bound(&d.shape, &o, &bound), ATTN_OK);
    cr_assert_eq(attn_forward_workspace_size(&d.shape, &o, &exact), ATTN_OK);
    cr_assert(exact > 0 && bound >= exact, "exact %zu bound %zu", exact, bound);
    void *ws = xmalloc(bound);
    o.workspace = ws, o.workspace_size = exact;
    cr_assert_eq(decode_run(&d, &o), ATTN_OK);
    float *want = xmalloc(d.out_bytes);
    memcpy(want, d.out, d.out_bytes);
    o.workspace_size = bound;
    cr_assert_eq(decode_run(&d, &o), ATTN_OK);
    cr_assert(memcmp(want, d.out, d.out_bytes) == 0, "the bound's workspace changed the bits");
    free(want), free(ws);
    decode_free(&d);
}

/* SPDX-License-Identifier: MIT */
/*
 * Shared prefixes (attn.h, "Shared prefixes") on every ISA row.
 *
 *   long          groups whose prefixes span several ATTN_PREFIX_CHUNKs
 *                 (1024 keys), decode and draft-sized query counts, F32 and
 *                 F16 K/V, with and without the workspace (attended once,
 *                 or read through the chain per sequence), automatic and
 *                 forced split-KV: against the float64 reference
 *                 (tests/ref/ref_kv.c resolves the chain on its own), bitwise
 *                 in reverse task order. Every shared key of a later
 *                 sequence's own storage holds NaN: a read would poison
 *                 its rows.
 *   composition   a group's bits do not depend on the sequences outside
 *                 it: alone, and between others, bitwise the same.
 *   errors        P_0 != 0, a negative entry, P_b past either sequence's
 *                 keys: ATTN_ERR_ARG; attn_backward: ATTN_ERR_UNSUPPORTED;
 *                 attn_cache_append into a shared key: ATTN_ERR_ARG; every
 *                 output untouched.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "harness.h"
#include "ref/ref.h"
#include "ref/ref_kv.h"

/* A dense call: q [B][Hq][Lq][d] f32, k/v [B][Hkv][Lk][d] of kv_dtype, out
   [B][Hq][Lq][d] f32, lse [B][Hq][Lq]. */
typedef struct call {
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, out;
    int32_t *q_lens, *kv_lens, *shared;
    float *lse;
    attn_tensor sinks;
    float *sink_vals;
} call;

static void set_kv(const call *c, const attn_tensor *t, int64_t b, int64_t h, int64_t j,
                   int64_t col, float x)
{
    const int64_t at = b * t->batch_stride + h * t->head_stride + j * t->row_stride + col;
    if (t->dtype == ATTN_DTYPE_F32)
        ((float *)t->data)[at] = x;
    else
        ((uint16_t *)t->data)[at] = attn_f32_to_f16(x);
    (void)c;
}

/* B sequences of lq[b] queries and lk[b] keys, sharing shared[b] keys with
   the one before; random q, k, v; NaN in every shared key's own slot. */
static void call_make(call *c, rng *g, int64_t B, int64_t hq, int64_t hkv, int64_t d,
                      int32_t kv_dtype, const int64_t *lq, const int64_t *lk,
                      const int64_t *shared, int sinks)
{
    memset(c, 0, sizeof *c);
    int64_t Lq = 1, Lk = 1;
    for (int64_t b = 0; b < B; b++) {
        Lq = lq[b] > Lq ? lq[b] : Lq;
        Lk = lk[b] > Lk ? lk[b] : Lk;
    }
    c->shape = (attn_shape){B, hq, hkv, Lq, Lk, d, d};
    const attn_options init = ATTN_OPTIONS_INIT;
    c->opt = init;
    c->opt.flags = ATTN_CAUSAL;
    c->q_lens = xmalloc((size_t)B * 4);
    c->kv_lens = xmalloc((size_t)B * 4);
    c->shared = xmalloc((size_t)B * 4);
    for (int64_t b = 0; b < B; b++) {
        c->q_lens[b] = (int32_t)lq[b];
        c->kv_lens[b] = (int32_t)lk[b];
        c->shared[b] = (int32_t)shared[b];
    }
    c->opt.q_lens = c->q_lens;
    c->opt.kv_lens = c->kv_lens;
    c->opt.shared_prefix = c->shared;
    const size_t nq = (size_t)(B * hq * Lq * d), nk = (size_t)(B * hkv * Lk * d);
    const size_t kvb = kv_dtype == ATTN_DTYPE_F32 ? 4 : 2;
    c->q = (attn_tensor){xmalloc(nq * 4), ATTN_DTYPE_F32, hq * Lq * d, Lq * d, d};
    rng_fill(g, c->q.data, nq, -1.5f, 1.5f);
    c->out = (attn_tensor){xmalloc(nq * 4), ATTN_DTYPE_F32, hq * Lq * d, Lq * d, d};
    c->lse = xmalloc((size_t)(B * hq * Lq) * 4);
    const attn_tensor *kv[2] = {&c->k, &c->v};
    c->k = (attn_tensor){xmalloc(nk * kvb), kv_dtype, hkv * Lk * d, Lk * d, d};
    c->v = (attn_tensor){xmalloc(nk * kvb), kv_dtype, hkv * Lk * d, Lk * d, d};
    for (int t = 0; t < 2; t++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < hkv; h++)
                for (int64_t j = 0; j < Lk; j++)
                    for (int64_t col = 0; col < d; col++)
                        set_kv(c, kv[t], b, h, j, col,
                               j < shared[b] ? NAN : rng_float(g, -2.0f, 2.0f));
    if (sinks) {
        c->sink_vals = xmalloc((size_t)hq * 4);
        rng_fill(g, c->sink_vals, (size_t)hq, -1.0f, 3.0f);
        c->sinks = (attn_tensor){c->sink_vals, ATTN_DTYPE_F32, 0, 1, 1};
        c->opt.sinks = &c->sinks;
    }
}

static void call_free(call *c)
{
    free(c->q.data), free(c->k.data), free(c->v.data), free(c->out.data);
    free(c->q_lens), free(c->kv_lens), free(c->shared), free(c->lse), free(c->sink_vals);
}

/* Runs the forward into c->out and c->lse; with_ws: the workspace
   attn_forward_workspace_size asks for. */
static attn_status run(const attn_dsp *t, call *c, const attn_options *opt, int with_ws)
{
    attn_options o = *opt;
    void *ws = NULL;
    size_t bytes = 0;
    CHECK(attn_forward_workspace_size(&c->shape, &o, &bytes) == ATTN_OK, "workspace size");
    if (with_ws) {
        CHECK(bytes > 0, "a group shares keys: the workspace is not empty");
        ws = xmalloc(bytes);
        o.workspace = ws;
        o.workspace_size = bytes;
    }
    const attn_row_stats st = {c->lse, NULL, NULL};
    const attn_status s = attn_forward_with(t, &c->shape, &o, &c->q, &c->k, &c->v, &c->out, &st);
    free(ws);
    return s;
}

static void check_long(const attn_dsp *t, rng *g)
{
    /* groups {0, 1, 2} (P 2300 and 2100: the group shares 2100 keys, 1
       shares 200 more with 0 through the chain), {3}, {4, 5} */
    const int64_t B = 6;
    const int64_t lk[] = {2400, 2350, 2500, 900, 1800, 2600};
    const int64_t shared[] = {0, 2300, 2100, 0, 0, 1500};
    int64_t lq[6];
    const int64_t draft = rng_int(g, 0, 1) ? 1 : rng_int(g, 2, 5);
    for (int64_t b = 0; b < B; b++)
        lq[b] = rng_int(g, 1, draft);
    lq[3] = 0; /* a sequence with nothing to do */
    const int32_t kvdt = rng_int(g, 0, 1) ? ATTN_DTYPE_F16 : ATTN_DTYPE_F32;
    const int64_t hkv = rng_int(g, 1, 2), hq = hkv * rng_int(g, 1, 4);
    call c;
    call_make(&c, g, B, hq, hkv, 64, kvdt, lq, lk, shared, (int)rng_int(g, 0, 1));
    c.opt.kv_splits = (int32_t)rng_pick(g, (const int64_t[]){0, 1, 2, 3}, 4);
    if (rng_int(g, 0, 1))
        c.opt.softcap = 20.0f;
    if (rng_int(g, 0, 2) == 0)
        c.opt.window = rng_int(g, 500, 2500);
    harness_context("B %lld Hq %lld Hkv %lld draft %lld kv %s splits %d softcap %g window %lld "
                    "sinks %d",
                    (long long)B, (long long)hq, (long long)hkv, (long long)draft,
                    ref_dtype_name(kvdt), c.opt.kv_splits, (double)c.opt.softcap,
                    (long long)c.opt.window, c.opt.sinks != NULL);

    ref_dense dn;
    ref_attn r;
    const int64_t bk = t->block_k < harness_scalar()->block_k ? t->block_k
                                                              : harness_scalar()->block_k;
    ref_dense_make(&dn, &c.shape, &c.opt, &c.q, &c.k, &c.v);
    ref_attn_compute(&r, &dn.shape, &dn.opt, &dn.q, &dn.k, &dn.v,
                     (c.shape.kv_len + bk - 1) / bk + 1);
    const size_t rows = (size_t)(B * hq * c.shape.q_len), d = 64;
    float *first = xmalloc(rows * d * 4), *first_lse = xmalloc(rows * 4);
    for (int ws = 1; ws >= 0; ws--) {
        if (!ws && c.opt.kv_splits >= 2)
            continue; /* forced splits need the workspace */
        harness_context("B %lld Hq %lld Hkv %lld draft %lld kv %s splits %d softcap %g "
                        "window %lld sinks %d workspace %d",
                        (long long)B, (long long)hq, (long long)hkv, (long long)draft,
                        ref_dtype_name(kvdt), c.opt.kv_splits, (double)c.opt.softcap,
                        (long long)c.opt.window, c.opt.sinks != NULL, ws);
        CHECK(run(t, &c, &c.opt, ws) == ATTN_OK, "status");
        expect_near("out vs float64", c.out.data, (ptrdiff_t)d, r.o, r.o_err, rows, d);
        expect_near("lse vs float64", c.lse, 1, r.lse, r.lse_err, rows, 1);
        memcpy(first, c.out.data, rows * d * 4);
        memcpy(first_lse, c.lse, rows * 4);
        attn_options rev = c.opt;
        rev.parallel_for = harness_reverse_for;
        memset(c.out.data, 0x7f, rows * d * 4);
        CHECK(run(t, &c, &rev, ws) == ATTN_OK, "status in reverse order");
        expect_bits("out in reverse task order", c.out.data, first, rows * d);
        expect_bits("lse in reverse task order", c.lse, first_lse, rows);
    }
    free(first), free(first_lse);
    ref_attn_free(&r);
    ref_dense_free(&dn);
    call_free(&c);
}

HARNESS_ISA_PARAMS(shared_prefix, long)
ParameterizedTest(isa_row *row, shared_prefix, long, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int k = 0; k < 4; k++)
        check_long(t, g);
}

/*
 * A group {L, X} (X shares P keys with L) alone, and between an unrelated
 * sequence before it and a group of its own after it: the group's rows are
 * bitwise the same. (Inside a group, rows of several sequences share the
 * prefix's tiles, and the SIMD kernels' rounding may depend on where a row
 * falls in a tile: attn.h promises nothing across group compositions.)
 */
HARNESS_ISA_PARAMS(shared_prefix, composition)
ParameterizedTest(isa_row *row, shared_prefix, composition, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int k = 0; k < 3; k++) {
        const int64_t P = rng_int(g, 300, 2200), own = rng_int(g, 1, 400);
        const int64_t hkv = 2, hq = 2 * rng_int(g, 1, 4);
        const int32_t kvdt = rng_int(g, 0, 1) ? ATTN_DTYPE_F16 : ATTN_DTYPE_F32;
        const int64_t lk2[] = {P + rng_int(g, 0, 50), P + own}, sh2[] = {0, P};
        const int64_t lq2[] = {rng_int(g, 1, 4), rng_int(g, 1, 4)};
        call small;
        call_make(&small, g, 2, hq, hkv, 64, kvdt, lq2, lk2, sh2, 0);
        /* U, then L and X, then a group of two of its own */
        const int64_t lk4[] = {rng_int(g, 1, 3000), lk2[0], lk2[1], 900, 800};
        const int64_t sh4[] = {0, 0, P, 0, rng_int(g, 1, 800)};
        const int64_t lq4[] = {rng_int(g, 0, 4), lq2[0], lq2[1], 3, 2};
        call big;
        call_make(&big, g, 5, hq, hkv, 64, kvdt, lq4, lk4, sh4, 0);
        const size_t kvb = kvdt == ATTN_DTYPE_F32 ? 4 : 2;
        for (int64_t s = 0; s < 2; s++) {
            for (int64_t h = 0; h < hkv; h++) {
                const size_t n = (size_t)(lk2[s] * 64) * kvb;
                const size_t to = (size_t)((s + 1) * big.k.batch_stride + h * big.k.head_stride);
                const size_t from = (size_t)(s * small.k.batch_stride + h * small.k.head_stride);
                memcpy((char *)big.k.data + to * kvb, (char *)small.k.data + from * kvb, n);
                memcpy((char *)big.v.data + to * kvb, (char *)small.v.data + from * kvb, n);
            }
            for (int64_t h = 0; h < hq; h++)
                memcpy(ref_tensor_at(&big.q, s + 1, h, 0, 0), ref_tensor_at(&small.q, s, h, 0, 0),
                       (size_t)(lq2[s] * 64) * 4);
        }
        harness_context("P %lld own %lld Lq %lld,%lld Hq %lld kv %s", (long long)P,
                        (long long)own, (long long)lq2[0], (long long)lq2[1], (long long)hq,
                        ref_dtype_name(kvdt));
        CHECK(run(t, &small, &small.opt, 1) == ATTN_OK, "status, the group alone");
        CHECK(run(t, &big, &big.opt, 1) == ATTN_OK, "status, among others");
        for (int64_t s = 0; s < 2; s++)
            for (int64_t h = 0; h < hq; h++) {
                expect_bits("the group's out rows", ref_tensor_at(&big.out, s + 1, h, 0, 0),
                            ref_tensor_at(&small.out, s, h, 0, 0), (size_t)(lq2[s] * 64));
                expect_bits("the group's lse", big.lse + ((s + 1) * hq + h) * big.shape.q_len,
                            small.lse + (s * hq + h) * small.shape.q_len, (size_t)lq2[s]);
            }
        call_free(&small);
        call_free(&big);
    }
}

Test(shared_prefix, errors)
{
    harness_begin_plain("shared_prefix errors");
    rng *g = harness_rng();
    const int64_t lq[] = {1, 1, 1}, lk[] = {40, 30, 50}, ok[] = {0, 20, 25};
    call c;
    call_make(&c, g, 3, 4, 2, 64, ATTN_DTYPE_F32, lq, lk, ok, 0);
    const size_t rows = (size_t)(3 * 4 * c.shape.q_len);
    memset(c.out.data, 0x5a, rows * 64 * 4);
    memset(c.lse, 0x5a, rows * 4);
    float *out0 = xmalloc(rows * 64 * 4), *lse0 = xmalloc(rows * 4);
    memcpy(out0, c.out.data, rows * 64 * 4);
    memcpy(lse0, c.lse, rows * 4);
    /* entry 0 not 0; negative; past b's keys; past b - 1's keys */
    static const int32_t bad[][3] = {{1, 20, 25}, {0, -1, 25}, {0, 31, 25}, {0, 20, 31}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memcpy(c.shared, bad[k], sizeof bad[k]);
        harness_context("shared_prefix %d,%d,%d", bad[k][0], bad[k][1], bad[k][2]);
        CHECK(run(harness_scalar(), &c, &c.opt, 0) == ATTN_ERR_ARG, "forward");
        expect_bytes("out after an error", c.out.data, out0, rows * 64 * 4);
        expect_bytes("lse after an error", c.lse, lse0, rows * 4);
        float *scores = xmalloc(rows * 50 * 4);
        const attn_tensor st = {scores, ATTN_DTYPE_F32, 4 * 50, 50, 50};
        CHECK(attn_scores(&c.shape, &c.opt, &c.q, &c.k, &st) == ATTN_ERR_ARG, "attn_scores");
        free(scores);
    }
    memcpy(c.shared, (const int32_t[]){0, 20, 25}, 12);

    /* the backward: the gradient of a shared key would be two sequences' */
    {
        const attn_shape s = c.shape;
        float *mem = xcalloc0(rows * 64 * 8 + 3 * 2 * 50 * 64 * 2, 4);
        const attn_tensor dout = {mem, ATTN_DTYPE_F32, 4 * 64, 64, 64};
        const attn_tensor dq = {mem + rows * 64, ATTN_DTYPE_F32, 4 * 64, 64, 64};
        float *kv = mem + rows * 64 * 2;
        const attn_tensor dk = {kv, ATTN_DTYPE_F32, 2 * 50 * 64, 50 * 64, 64};
        const attn_tensor dv = {kv + 3 * 2 * 50 * 64, ATTN_DTYPE_F32, 2 * 50 * 64, 50 * 64, 64};
        const attn_grads gr = {sizeof gr, &dq, &dk, &dv, NULL, NULL};
        CHECK(attn_backward(&s, &c.opt, &c.q, &c.k, &c.v, &c.out, &dout, c.lse, &gr) ==
                  ATTN_ERR_UNSUPPORTED,
              "attn_backward with shared_prefix");
        free(mem);
    }

    /* cache append: sequence 1's new token would land on key 29 >= 20 (ok);
       with P_1 = 30 = Lk_1 it would land on a shared key */
    {
        float *knew = xcalloc0((size_t)(3 * 2 * 64), 4);
        const attn_tensor kn = {knew, ATTN_DTYPE_F32, 2 * 64, 64, 64};
        void *k0 = xmalloc((size_t)(3 * 2 * 50 * 64) * 4);
        memcpy(k0, c.k.data, (size_t)(3 * 2 * 50 * 64) * 4);
        const attn_shape s = c.shape; /* the new rows are [B][Hkv][Lq][d] */
        CHECK(attn_cache_append(&s, &c.opt, &kn, NULL, &c.k, NULL) == ATTN_OK, "append");
        memcpy(c.k.data, k0, (size_t)(3 * 2 * 50 * 64) * 4);
        memcpy(c.shared, (const int32_t[]){0, 30, 25}, 12);
        CHECK(attn_cache_append(&s, &c.opt, &kn, NULL, &c.k, NULL) == ATTN_ERR_ARG,
              "append onto a shared key");
        expect_bytes("the cache after an error", c.k.data, k0, (size_t)(3 * 2 * 50 * 64) * 4);
        free(knew), free(k0);
    }
    free(out0), free(lse0);
    call_free(&c);
}

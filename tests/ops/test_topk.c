/* SPDX-License-Identifier: MIT */
/*
 * Top-k sparse attention (attn.h, "Top-k sparse attention") on every ISA
 * row: what the float64 comparisons of test_ops.c and test_kvlayout.c (the
 * generator draws lists there, ref.c selects by them) cannot see.
 *
 *   set           a list is a set: shuffled, with repeats and -1 slots it
 *                 gives the bits of its sorted, repeat-free form (forward,
 *                 scores, weights, lse).
 *   never_read    the forward reads only selected keys: every K and V row
 *                 no query selects holds NaN, and the output is the bits of
 *                 the same call with those rows finite. Decode rows of a
 *                 GQA group and MLA-shaped rows (one latent head, d 576,
 *                 v 512, bf16, V a view of K's first columns, which the
 *                 forward reads from K's gathered rows: the bits of V as a
 *                 copy of its own), long enough for several gather windows
 *                 and split-KV.
 *   composition   a sequence's rows are the same bits alone and in a
 *                 padded batch between others (batch invariance).
 *   errors        an entry >= Lk_b or < -1, topk without a list, a list
 *                 with topk 0: ATTN_ERR_ARG, every output untouched;
 *                 entries of rows past Lq_b are not read.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "harness.h"
#include "internal.h"

/* A call: q [B][Hq][Lq][d] f32, k [B][Hkv][Lk][d], v [B][Hkv][Lk][dv] (F32
   or BF16; with mla, v is k's first dv columns), out [B][Hq][Lq][dv] f32,
   lse; top-k lists [B][Lq][topk]. */
typedef struct call {
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, out;
    int32_t *idx, *q_lens, *kv_lens;
    float *lse;
    int64_t dv;
} call;

/* n random values in [-mag, mag), F32 (es 4) or BF16 (es 2). */
static unsigned char *filled(rng *g, int64_t n, size_t es, float mag)
{
    unsigned char *x = xmalloc((size_t)n * es);
    for (int64_t e = 0; e < n; e++) {
        const float f = rng_float(g, -mag, mag);
        if (es == 4)
            memcpy(x + e * 4, &f, 4);
        else
            ((uint16_t *)(void *)x)[e] = attn_f32_to_bf16(f);
    }
    return x;
}

static void call_make(call *c, rng *g, int64_t B, int64_t hq, int64_t hkv, int64_t lq,
                      int64_t lk, int64_t d, int64_t dv, int32_t kv_dtype, int mla,
                      int64_t topk)
{
    memset(c, 0, sizeof *c);
    c->dv = dv;
    c->shape = (attn_shape){B, hq, hkv, lq, lk, d, dv == d ? 0 : dv};
    const attn_options init = ATTN_OPTIONS_INIT;
    c->opt = init;
    const size_t es = kv_dtype == ATTN_DTYPE_F32 ? 4 : 2;
    float *q = xmalloc((size_t)(B * hq * lq * d) * 4);
    rng_fill(g, q, (size_t)(B * hq * lq * d), -1.0f, 1.0f);
    c->q = (attn_tensor){q, ATTN_DTYPE_F32, hq * lq * d, lq * d, d};
    unsigned char *k = filled(g, B * hkv * lk * d, es, 1.0f);
    c->k = (attn_tensor){k, kv_dtype, hkv * lk * d, lk * d, d};
    if (mla) {
        c->v = (attn_tensor){k, kv_dtype, hkv * lk * d, lk * d, d};
    } else {
        unsigned char *v = filled(g, B * hkv * lk * dv, es, 4.0f);
        c->v = (attn_tensor){v, kv_dtype, hkv * lk * dv, lk * dv, dv};
    }
    c->out = (attn_tensor){xmalloc((size_t)(B * hq * lq * dv) * 4), ATTN_DTYPE_F32,
                           hq * lq * dv, lq * dv, dv};
    c->lse = xmalloc((size_t)(B * hq * lq) * 4);
    c->idx = xmalloc((size_t)(B * lq * topk) * 4);
    c->opt.topk_indices = c->idx;
    c->opt.topk = topk;
}

static void call_free(call *c)
{
    if (c->v.data != c->k.data)
        free(c->v.data);
    free(c->q.data), free(c->k.data), free(c->out.data), free(c->lse), free(c->idx);
    free(c->q_lens), free(c->kv_lens);
}

static void run_forward(const attn_dsp *t, const call *c, float *out, float *lse)
{
    attn_tensor o = c->out;
    o.data = out;
    attn_row_stats st = {lse, NULL, NULL};
    CHECK(attn_forward_with(t, &c->shape, &c->opt, &c->q, &c->k, &c->v, &o, &st) == ATTN_OK,
          "forward: %s", attn_last_error());
}

static size_t out_floats(const call *c)
{
    return (size_t)(c->shape.batch * c->shape.q_heads * c->shape.q_len * c->dv);
}

static size_t row_count(const call *c)
{
    return (size_t)(c->shape.batch * c->shape.q_heads * c->shape.q_len);
}

/* Fills each list with `pick` distinct keys of [0, lk) drawn at random,
   neighbouring rows sharing most of them; the rest -1. Returns the keys
   some row selects in sel (lk flags). */
static void draw_lists(call *c, rng *g, int64_t pick, unsigned char *sel)
{
    const int64_t B = c->shape.batch, lq = c->shape.q_len, lk = c->shape.kv_len;
    const int64_t k = c->opt.topk;
    unsigned char *mark = xmalloc((size_t)lk);
    if (sel)
        memset(sel, 0, (size_t)(B * lk));
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < lq; i++) {
            int32_t *list = c->idx + (b * lq + i) * k;
            memset(mark, 0, (size_t)lk);
            int64_t n = 0;
            /* keep 80 % of the row before's keys */
            for (int64_t t = 0; i > 0 && t < pick && n < pick; t++) {
                const int32_t j = list[t - k];
                if (j >= 0 && !mark[j] && rng_int(g, 0, 4) != 0)
                    mark[j] = 1, list[n++] = j;
            }
            while (n < pick) {
                const int32_t j = (int32_t)rng_int(g, 0, lk - 1);
                if (!mark[j])
                    mark[j] = 1, list[n++] = j;
            }
            for (int64_t t = n; t < k; t++)
                list[t] = -1;
            for (int64_t t = 0; sel && t < n; t++)
                sel[b * lk + list[t]] = 1;
        }
    free(mark);
}

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int bits_equal(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

HARNESS_ISA_PARAMS(topk, set)
ParameterizedTest(isa_row *row, topk, set, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 6; rep++) {
        const int64_t lk = rng_int(g, 1, 700), pick = rng_int(g, 1, lk < 300 ? lk : 300);
        const int64_t lq = rng_int(g, 1, 9), hkv = rng_int(g, 1, 2), grp = rng_int(g, 1, 4);
        call c;
        call_make(&c, g, 2, hkv * grp, hkv, lq, lk, 64, 64, ATTN_DTYPE_F32, 0, 2 * pick + 3);
        c.opt.flags = rep % 2 ? ATTN_CAUSAL : 0;
        c.opt.softcap = rep % 3 == 0 ? 4.0f : 0.0f;
        draw_lists(&c, g, pick, NULL);
        harness_context("set: lq %lld lk %lld pick %lld Hq %lld Hkv %lld", (long long)lq,
                        (long long)lk, (long long)pick, (long long)(hkv * grp), (long long)hkv);
        /* the sorted, repeat-free form: the picks first, sorted, then -1 */
        const int64_t k = c.opt.topk, rows = c.shape.batch * lq;
        int32_t *sorted = xmalloc((size_t)(rows * k) * 4);
        for (int64_t r = 0; r < rows; r++) { /* the draws sit in [0, pick): sort those */
            int32_t *l = sorted + r * k;
            memcpy(l, c.idx + r * k, (size_t)pick * 4);
            qsort(l, (size_t)pick, 4, cmp_i32);
            for (int64_t x = pick; x < k; x++)
                l[x] = -1;
        }
        /* the messy form: the picks, each again, shuffled, -1 between */
        for (int64_t r = 0; r < rows; r++) {
            int32_t *l = c.idx + r * k;
            for (int64_t x = 0; x < pick; x++)
                l[pick + x] = l[x];
            l[2 * pick] = l[2 * pick + 1] = l[2 * pick + 2] = -1;
            for (int64_t x = k - 1; x > 0; x--) {
                const int64_t y = rng_int(g, 0, x);
                const int32_t tmp = l[x];
                l[x] = l[y], l[y] = tmp;
            }
        }
        const size_t no = out_floats(&c), nr = row_count(&c);
        float *o1 = xmalloc(no * 4), *o2 = xmalloc(no * 4), *l1 = xmalloc(nr * 4),
              *l2 = xmalloc(nr * 4);
        run_forward(t, &c, o1, l1);
        const size_t ns = nr * (size_t)lk;
        float *s1 = xmalloc(ns * 4), *s2 = xmalloc(ns * 4);
        attn_tensor ts = {s1, ATTN_DTYPE_F32, c.shape.q_heads * lq * lk, lq * lk, lk};
        CHECK(attn_weights_with(t, &c.shape, &c.opt, &c.q, &c.k, &ts, NULL) == ATTN_OK,
              "weights");
        int32_t *messy = c.idx;
        c.idx = sorted;
        c.opt.topk_indices = sorted;
        run_forward(t, &c, o2, l2);
        CHECK(bits_equal(o1, o2, no) && bits_equal(l1, l2, nr),
              "the forward of a shuffled list with repeats differs from its sorted form");
        ts.data = s2;
        CHECK(attn_weights_with(t, &c.shape, &c.opt, &c.q, &c.k, &ts, NULL) == ATTN_OK,
              "weights");
        CHECK(bits_equal(s1, s2, ns), "weights differ between a list and its sorted form");
        c.idx = messy;
        c.opt.topk_indices = messy;
        free(sorted), free(o1), free(o2), free(l1), free(l2), free(s1), free(s2);
        call_free(&c);
    }
}

HARNESS_ISA_PARAMS(topk, never_read)
ParameterizedTest(isa_row *row, topk, never_read, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    static const struct {
        int64_t hq, hkv, lq, lk, d, dv, pick;
        int32_t dtype;
        int mla, splits;
    } shapes[] = {
        {8, 2, 1, 3000, 128, 128, 300, ATTN_DTYPE_F32, 0, 0},   /* GQA decode */
        {8, 2, 4, 1500, 64, 64, 200, ATTN_DTYPE_BF16, 0, 4},    /* spec decode, split-KV */
        {16, 1, 1, 2500, 576, 512, 256, ATTN_DTYPE_BF16, 1, 0}, /* MLA decode */
        {4, 4, 40, 900, 96, 80, 100, ATTN_DTYPE_F32, 0, 0},     /* prefill rows */
    };
    for (size_t x = 0; x < sizeof shapes / sizeof shapes[0]; x++) {
        call c;
        call_make(&c, g, 1, shapes[x].hq, shapes[x].hkv, shapes[x].lq, shapes[x].lk,
                  shapes[x].d, shapes[x].dv, shapes[x].dtype, shapes[x].mla, shapes[x].pick);
        c.opt.flags = ATTN_CAUSAL;
        harness_context("never read: shape %zu", x);
        unsigned char *sel = xmalloc((size_t)shapes[x].lk);
        draw_lists(&c, g, shapes[x].pick, sel);
        void *ws = NULL;
        if (shapes[x].splits) {
            size_t bytes = 0;
            c.opt.kv_splits = (int32_t)shapes[x].splits;
            CHECK(attn_forward_workspace_size(&c.shape, &c.opt, &bytes) == ATTN_OK && bytes,
                  "workspace");
            ws = xmalloc(bytes);
            c.opt.workspace = ws;
            c.opt.workspace_size = bytes;
        }
        const size_t no = out_floats(&c), nr = row_count(&c);
        float *o1 = xmalloc(no * 4), *o2 = xmalloc(no * 4), *l1 = xmalloc(nr * 4),
              *l2 = xmalloc(nr * 4);
        run_forward(t, &c, o1, l1);
        if (shapes[x].mla) { /* V read from K's gathered rows = V gathered itself */
            const size_t bytes = (size_t)(c.shape.kv_heads * c.shape.kv_len * c.shape.head_dim) * 2;
            attn_tensor own = c.v, aliased = c.v;
            own.data = xmalloc(bytes);
            memcpy(own.data, c.k.data, bytes);
            c.v = own;
            run_forward(t, &c, o2, l2);
            CHECK(bits_equal(o1, o2, no) && bits_equal(l1, l2, nr),
                  "MLA: V as K's own rows and V as a copy differ");
            free(own.data);
            c.v = aliased;
        }
        /* NaN in every row no query selects (k's and v's) */
        const size_t es = shapes[x].dtype == ATTN_DTYPE_F32 ? 4 : 2;
        for (int64_t h = 0; h < c.shape.kv_heads; h++)
            for (int64_t j = 0; j < c.shape.kv_len; j++) {
                if (sel[j])
                    continue;
                const attn_tensor *ts[2] = {&c.k, &c.v};
                for (int w = 0; w < 2; w++) {
                    unsigned char *at = (unsigned char *)ts[w]->data +
                                        (size_t)(h * ts[w]->head_stride + j * ts[w]->row_stride) * es;
                    memset(at, 0xff, (size_t)(w ? c.dv : c.shape.head_dim) * es); /* NaN */
                }
            }
        run_forward(t, &c, o2, l2);
        CHECK(bits_equal(o1, o2, no) && bits_equal(l1, l2, nr),
              "an unselected key's row changed the output: it was read");
        for (size_t e = 0; e < no; e++)
            CHECK(isfinite(o2[e]), "output %zu is %g", e, (double)o2[e]);
        free(ws), free(sel), free(o1), free(o2), free(l1), free(l2);
        call_free(&c);
    }
}

HARNESS_ISA_PARAMS(topk, composition)
ParameterizedTest(isa_row *row, topk, composition, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    /* three sequences, padded to the longest; sequence 1 alone is the same
       rows as sequence 1 of the batch */
    const int64_t lq[3] = {3, 7, 1}, lk[3] = {200, 650, 90}, pick = 60, topk = 64;
    call c, one;
    call_make(&c, g, 3, 4, 2, 7, 650, 64, 64, ATTN_DTYPE_F32, 0, topk);
    c.q_lens = xmalloc(3 * 4), c.kv_lens = xmalloc(3 * 4);
    for (int b = 0; b < 3; b++)
        c.q_lens[b] = (int32_t)lq[b], c.kv_lens[b] = (int32_t)lk[b];
    c.opt.q_lens = c.q_lens, c.opt.kv_lens = c.kv_lens;
    c.opt.flags = ATTN_CAUSAL;
    /* lists of keys each sequence has; rows past Lq_b hold garbage */
    for (int64_t b = 0; b < 3; b++)
        for (int64_t i = 0; i < 7; i++)
            for (int64_t x = 0; x < topk; x++)
                c.idx[(b * 7 + i) * topk + x] =
                    i >= lq[b] ? 999999 : x < pick ? (int32_t)rng_int(g, 0, lk[b] - 1) : -1;
    const size_t no = out_floats(&c), nr = row_count(&c);
    float *o = xmalloc(no * 4), *l = xmalloc(nr * 4);
    run_forward(t, &c, o, l);
    call_make(&one, g, 1, 4, 2, 7, 650, 64, 64, ATTN_DTYPE_F32, 0, topk);
    memcpy(one.q.data, (float *)c.q.data + c.q.batch_stride, (size_t)c.q.batch_stride * 4);
    memcpy(one.k.data, (float *)c.k.data + c.k.batch_stride, (size_t)c.k.batch_stride * 4);
    memcpy(one.v.data, (float *)c.v.data + c.v.batch_stride, (size_t)c.v.batch_stride * 4);
    memcpy(one.idx, c.idx + 7 * topk, (size_t)(7 * topk) * 4);
    one.opt.flags = ATTN_CAUSAL; /* sequence 1 is the longest: the same shape, B = 1 */
    float *o1 = xmalloc(no * 4), *l1 = xmalloc(nr * 4);
    run_forward(t, &one, o1, l1);
    for (int64_t h = 0; h < 4; h++)
        for (int64_t i = 0; i < lq[1]; i++) {
            const float *a = o + c.out.batch_stride + h * c.out.head_stride + i * 64;
            const float *z = o1 + h * one.out.head_stride + i * 64;
            CHECK(bits_equal(a, z, 64), "head %lld row %lld: alone and in a batch differ",
                  (long long)h, (long long)i);
            CHECK(memcmp(&l[(1 * 4 + h) * 7 + i], &l1[h * lq[1] + i], 4) == 0,
                  "head %lld row %lld: lse differs", (long long)h, (long long)i);
        }
    free(o), free(l), free(o1), free(l1);
    call_free(&c);
    call_free(&one);
}

Test(topk, errors, .timeout = ATTN_TEST_TIMEOUT)
{
    harness_begin_plain("topk/errors");
    rng *g = harness_rng();
    call c;
    call_make(&c, g, 2, 2, 1, 3, 40, 16, 16, ATTN_DTYPE_F32, 0, 4);
    c.q_lens = xmalloc(2 * 4), c.kv_lens = xmalloc(2 * 4);
    c.q_lens[0] = 3, c.q_lens[1] = 2, c.kv_lens[0] = 40, c.kv_lens[1] = 25;
    c.opt.q_lens = c.q_lens, c.opt.kv_lens = c.kv_lens;
    for (int e = 0; e < 2 * 3 * 4; e++)
        c.idx[e] = e % 4 == 3 ? -1 : e % 20;
    c.idx[(1 * 3 + 2) * 4 + 1] = 12345; /* row 2 of sequence 1 is past its Lq: not read */
    const size_t no = out_floats(&c), nr = row_count(&c);
    float *o = xmalloc(no * 4), *l = xmalloc(nr * 4);
    const attn_dsp *t = attn_dsp_active();
    run_forward(t, &c, o, l);
    const size_t ns = nr * 40;
    float *sc = xmalloc(ns * 4), *before = xmalloc(ns * 4);
    attn_tensor ts = {sc, ATTN_DTYPE_F32, 2 * 3 * 40, 3 * 40, 40};
    struct {
        const char *what;
        int32_t at, value;
        int64_t topk;
        int null_list;
    } bad[] = {
        {"an entry = Lk_b", (1 * 3 + 1) * 4, 25, 4, 0},
        {"an entry = kv_len", 0, 40, 4, 0},
        {"an entry of -2", 5, -2, 4, 0},
        {"INT32_MIN", 6, INT32_MIN, 4, 0},
        {"topk 0 with a list", 0, 0, 0, 0},
        {"topk without a list", 0, 0, 4, 1},
        {"topk < 0", 0, 0, -1, 0},
    };
    for (size_t x = 0; x < sizeof bad / sizeof bad[0]; x++) {
        harness_context("errors: %s", bad[x].what);
        const int32_t keep = c.idx[bad[x].at];
        if (bad[x].topk == 4 && !bad[x].null_list)
            c.idx[bad[x].at] = bad[x].value;
        c.opt.topk = bad[x].topk;
        c.opt.topk_indices = bad[x].null_list ? NULL : c.idx;
        for (size_t e = 0; e < no; e++)
            ((float *)c.out.data)[e] = 7.0f;
        for (size_t e = 0; e < ns; e++)
            sc[e] = before[e] = (float)e;
        attn_row_stats st = {c.lse, NULL, NULL};
        for (size_t e = 0; e < nr; e++)
            c.lse[e] = 3.0f;
        CHECK(attn_forward(&c.shape, &c.opt, &c.q, &c.k, &c.v, &c.out, &st) == ATTN_ERR_ARG,
              "forward accepted it");
        CHECK(attn_scores(&c.shape, &c.opt, &c.q, &c.k, &ts) == ATTN_ERR_ARG,
              "scores accepted it");
        CHECK(attn_weights(&c.shape, &c.opt, &c.q, &c.k, &ts, NULL) == ATTN_ERR_ARG,
              "weights accepted it");
        for (size_t e = 0; e < no; e++)
            CHECK(((float *)c.out.data)[e] == 7.0f, "out written");
        for (size_t e = 0; e < nr; e++)
            CHECK(c.lse[e] == 3.0f, "lse written");
        CHECK(memcmp(sc, before, ns * 4) == 0, "scores written");
        c.idx[bad[x].at] = keep;
        c.opt.topk = 4;
        c.opt.topk_indices = c.idx;
    }
    /* a 1.6 caller's struct_size ignores both fields */
    c.opt.topk = -5;
    c.opt.topk_indices = NULL;
    c.opt.struct_size = (uint32_t)offsetof(attn_options, topk_indices);
    attn_row_stats st = {c.lse, NULL, NULL};
    CHECK(attn_forward(&c.shape, &c.opt, &c.q, &c.k, &c.v, &c.out, &st) == ATTN_OK,
          "a 1.6 struct_size: %s", attn_last_error());
    free(o), free(l), free(sc), free(before);
    call_free(&c);
}

/* SPDX-License-Identifier: MIT */
/*
 * attn_forward_sources (attn.h, "Two K/V sources in one call") on every ISA
 * row.
 *
 *   float64       against tests/ref/ref.c on one cache holding both
 *                 sources' keys (the first's masks written out as a list
 *                 per row, the second's keys after them): every output and
 *                 row statistic within the forward's bound, the first source
 *                 dense or itself top-k, causal, windowed, padded, with sinks
 *                 and softcap; the second source F32, F16, BF16, Q8_0, U8 and
 *                 U4 asymmetric (decoded exactly for the reference), with its
 *                 own lengths; GQA, decode and MLA-shaped rows (one latent
 *                 head, d 576, v 512, V a view of K's first columns); the
 *                 bf16 mode on float caches; split into chunks of the
 *                 second source's keys (kv_splits 2 and 3, the workspace
 *                 attn_forward_sources_workspace_size asks for).
 *   deepseek      DeepSeek's rows as the second source, read in place: 656
 *                 bytes per token (512 E4M3 values, 4 f32 scales of 128
 *                 channels, 64 bf16 rope values as k's tail; v the 512 FP8
 *                 values with the same scales), beside a bf16 576/512
 *                 window cache: against float64 with the bound of scale
 *                 groups (tolerance.h, "FP8 scales per group").
 *   never_read    keys no list names (and the first source's hidden keys)
 *                 may hold NaN: the same bits as with them finite.
 *   composition   a sequence's rows are the same bits alone and in a padded
 *                 batch, and in reverse task order, split or not.
 *   errors        every documented refusal, with every output untouched and
 *                 the message naming the second source where it is at fault.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "ref/ref.h"
#include "ref/ref_quant.h"

/* One source's cache: bytes as the library reads them, and the values
   they decode to, f32 [B][Hkv][L][cols]. */
typedef struct cache {
    unsigned char *data;
    float *dec;
    int32_t dtype;
    int64_t units; /* stride units per row */
    attn_tensor t;
} cache;

static int64_t row_units(int32_t dt, int64_t cols)
{
    if (dt == ATTN_DTYPE_U8_ASYM || dt == ATTN_DTYPE_U4_ASYM) /* bytes: one record */
        return 8 + (dt == ATTN_DTYPE_U8_ASYM ? cols : cols / 2);
    return cols / ref_dtype_block(dt);
}

/* n rows of cols values in [-mag, mag), encoded as dt and decoded again. */
static void cache_make(cache *c, rng *g, int64_t B, int64_t H, int64_t L, int64_t cols,
                       int32_t dt, float mag)
{
    const int64_t rows = B * H * L;
    c->dtype = dt;
    c->units = row_units(dt, cols);
    const size_t row_bytes = (size_t)c->units * ref_dtype_size(dt);
    c->data = xmalloc((size_t)rows * row_bytes);
    c->dec = xmalloc((size_t)(rows * cols) * 4);
    float *x = xmalloc((size_t)cols * 4);
    for (int64_t r = 0; r < rows; r++) {
        rng_fill(g, x, (size_t)cols, -mag, mag);
        unsigned char *dst = c->data + (size_t)r * row_bytes;
        float *dec = c->dec + r * cols;
        if (dt == ATTN_DTYPE_F32) {
            memcpy(dst, x, (size_t)cols * 4);
            memcpy(dec, x, (size_t)cols * 4);
            continue;
        }
        if (dt == ATTN_DTYPE_F16 || dt == ATTN_DTYPE_BF16) {
            for (int64_t t = 0; t < cols; t++) {
                const uint16_t h =
                    dt == ATTN_DTYPE_F16 ? ref_f32_to_f16(x[t]) : ref_f32_to_bf16(x[t]);
                memcpy(dst + t * 2, &h, 2);
                dec[t] = (float)(dt == ATTN_DTYPE_F16 ? ref_f16_to_double(h)
                                                      : ref_bf16_to_double(h));
            }
            continue;
        }
        CHECK(attn_quantize(dt, x, 1, cols, cols, dst, c->units, 0.0f) == ATTN_OK,
              "quantize: %s", attn_last_error());
        for (int64_t t = 0; t < cols; t++)
            dec[t] = (float)ref_quant_value(dt, dst, (size_t)t);
    }
    free(x);
    c->t = (attn_tensor){c->data, dt, H * L * c->units, L * c->units, c->units};
}

static void cache_free(cache *c)
{
    free(c->data), free(c->dec);
}

/* A call: the first source k1/v1 (F32, or v1 as k1's first columns with
   mla), the second k2/v2; lists [B][Lq][T]. */
typedef struct call {
    attn_shape shape;
    attn_options opt;
    attn_kv_source x;
    attn_tensor q, k1, v1, k2t, v2t, out;
    cache c1k, c1v, c2k, c2v;
    int32_t *list1, *list2, *q_lens, *kv_lens, *kv_lens2;
    float *sinks;
    attn_tensor sinks_t;
    int64_t B, hq, hkv, lq, l1, l2, d, dv, T1, T2;
    int mla;
} call;

typedef struct spec {
    int64_t B, hq, hkv, lq, l1, l2, d, dv, T2;
    int32_t dt2;
    int mla, causal, window, lens, sinks, softcap, topk1, bf16;
} spec;

/* A list of T keys of [0, n), about one in seven -1, repeats allowed (a
   list is a set). */
static void draw_list(rng *g, int32_t *list, int64_t T, int64_t n)
{
    for (int64_t t = 0; t < T; t++) {
        if (n == 0 || rng_int(g, 0, 6) == 0) {
            list[t] = -1;
            continue;
        }
        list[t] = (int32_t)rng_int(g, 0, n - 1); /* repeats allowed: a set */
    }
}

static void call_make(call *c, rng *g, const spec *s)
{
    memset(c, 0, sizeof *c);
    c->B = s->B, c->hq = s->hq, c->hkv = s->hkv, c->lq = s->lq, c->l1 = s->l1, c->l2 = s->l2;
    c->d = s->d, c->dv = s->dv, c->T2 = s->T2, c->mla = s->mla;
    const int64_t B = s->B, lq = s->lq;
    c->shape = (attn_shape){B, s->hq, s->hkv, lq, s->l1, s->d, s->dv == s->d ? 0 : s->dv};
    const attn_options init = ATTN_OPTIONS_INIT;
    c->opt = init;
    float *q = xmalloc((size_t)(B * s->hq * lq * s->d) * 4);
    rng_fill(g, q, (size_t)(B * s->hq * lq * s->d), -1.0f, 1.0f);
    c->q = (attn_tensor){q, ATTN_DTYPE_F32, s->hq * lq * s->d, lq * s->d, s->d};
    cache_make(&c->c1k, g, B, s->hkv, s->l1, s->d, ATTN_DTYPE_F32, 1.0f);
    c->k1 = c->c1k.t;
    if (!s->mla)
        cache_make(&c->c1v, g, B, s->hkv, s->l1, s->dv, ATTN_DTYPE_F32, 4.0f);
    c->v1 = s->mla ? c->k1 : c->c1v.t;
    cache_make(&c->c2k, g, B, s->hkv, s->l2, s->d, s->dt2, 1.0f);
    c->k2t = c->c2k.t;
    if (!s->mla)
        cache_make(&c->c2v, g, B, s->hkv, s->l2, s->dv, s->dt2, 4.0f);
    c->v2t = s->mla ? c->k2t : c->c2v.t;
    c->out = (attn_tensor){xmalloc((size_t)(B * s->hq * lq * s->dv) * 4), ATTN_DTYPE_F32,
                           s->hq * lq * s->dv, lq * s->dv, s->dv};
    c->opt.flags = s->causal ? ATTN_CAUSAL : 0;
    c->opt.window = s->window ? 1 + rng_int(g, 0, s->l1) : 0;
    c->opt.softcap = s->softcap ? 6.0f : 0.0f;
    c->opt.precision = s->bf16 ? ATTN_PRECISION_BF16 : ATTN_PRECISION_DEFAULT;
    if (s->lens) {
        c->q_lens = xmalloc((size_t)B * 4), c->kv_lens = xmalloc((size_t)B * 4);
        c->kv_lens2 = xmalloc((size_t)B * 4);
        for (int64_t b = 0; b < B; b++) {
            c->kv_lens[b] = (int32_t)rng_int(g, 0, s->l1);
            c->q_lens[b] = (int32_t)rng_int(g, 0, lq);
            if (s->causal && c->q_lens[b] > c->kv_lens[b]) /* queries past no key */
                c->q_lens[b] = c->kv_lens[b];
            c->kv_lens2[b] = (int32_t)rng_int(g, 0, s->l2);
        }
        c->opt.q_lens = c->q_lens, c->opt.kv_lens = c->kv_lens;
    }
    if (s->sinks) {
        c->sinks = xmalloc((size_t)s->hq * 4);
        rng_fill(g, c->sinks, (size_t)s->hq, -2.0f, 2.0f);
        c->sinks_t = (attn_tensor){c->sinks, ATTN_DTYPE_F32, 0, 1, 0};
        c->opt.sinks = &c->sinks_t;
    }
    if (s->topk1) {
        c->T1 = 1 + rng_int(g, 0, s->l1);
        c->list1 = xmalloc((size_t)(B * lq * c->T1) * 4);
        for (int64_t b = 0; b < B; b++) {
            const int64_t n = c->kv_lens ? c->kv_lens[b] : s->l1;
            for (int64_t i = 0; i < lq; i++)
                draw_list(g, c->list1 + (b * lq + i) * c->T1, c->T1, n);
        }
        c->opt.topk_indices = c->list1, c->opt.topk = c->T1;
    }
    c->list2 = xmalloc((size_t)(B * lq * s->T2) * 4);
    for (int64_t b = 0; b < B; b++) {
        const int64_t n = c->kv_lens2 ? c->kv_lens2[b] : s->l2;
        for (int64_t i = 0; i < lq; i++)
            draw_list(g, c->list2 + (b * lq + i) * s->T2, s->T2, n);
    }
    c->x = (attn_kv_source){sizeof(attn_kv_source), 0, s->l2, &c->k2t, &c->v2t,
                            c->kv_lens2, c->list2, s->T2, NULL, NULL, 0, 0, NULL, 0};
}

static void call_free(call *c)
{
    cache_free(&c->c1k), cache_free(&c->c2k);
    if (!c->mla)
        cache_free(&c->c1v), cache_free(&c->c2v);
    free(c->q.data), free(c->out.data), free(c->list1), free(c->list2);
    free(c->q_lens), free(c->kv_lens), free(c->kv_lens2), free(c->sinks);
}

static size_t out_floats(const call *c) { return (size_t)(c->B * c->hq * c->lq * c->dv); }
static size_t row_count(const call *c) { return (size_t)(c->B * c->hq * c->lq); }

static attn_status run(const attn_dsp *t, const call *c, float *out, float *stats)
{
    attn_tensor o = c->out;
    o.data = out;
    const size_t nr = row_count(c);
    const attn_row_stats st = {stats, stats + nr, stats + 2 * nr};
    return attn_forward_sources_with(t, &c->shape, &c->opt, &c->q, &c->k1, &c->v1, &c->x, &o,
                                     &st);
}

/* The reference problem: one F32 cache of l1 + l2 keys per (b, KV head),
   each row's visible keys as one list (the first source's masks written
   out, the second's keys after them). */
static void reference(const call *c, int64_t rescales, ref_attn *r)
{
    const int64_t B = c->B, H = c->hkv, L = c->l1 + c->l2, d = c->d, dv = c->dv, lq = c->lq;
    float *k = xmalloc((size_t)(B * H * L * d) * 4), *v = xmalloc((size_t)(B * H * L * dv) * 4);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < L; j++) {
                const int first = j < c->l1;
                const int64_t jj = first ? j : j - c->l1, len = first ? c->l1 : c->l2;
                const float *kd = (first ? c->c1k.dec : c->c2k.dec) + ((b * H + h) * len + jj) * d;
                memcpy(k + ((b * H + h) * L + j) * d, kd, (size_t)d * 4);
                /* with mla, v is k's first dv columns */
                const float *vd = c->mla ? kd
                                         : (first ? c->c1v.dec : c->c2v.dec) +
                                               ((b * H + h) * len + jj) * dv;
                memcpy(v + ((b * H + h) * L + j) * dv, vd, (size_t)dv * 4);
            }
    const int64_t T = L;
    int32_t *lists = xmalloc((size_t)(B * lq * T) * 4);
    unsigned char *in1 = xmalloc((size_t)c->l1 + 1), *in2 = xmalloc((size_t)c->l2 + 1);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < lq; i++) {
            int32_t *out = lists + (b * lq + i) * T;
            int64_t n = 0;
            memset(in1, c->list1 ? 0 : 1, (size_t)c->l1);
            for (int64_t t = 0; c->list1 && t < c->T1; t++) {
                const int32_t j = c->list1[(b * lq + i) * c->T1 + t];
                if (j >= 0)
                    in1[j] = 1;
            }
            for (int64_t j = 0; j < c->l1; j++)
                if (in1[j] && ref_visible(&c->shape, &c->opt, b, 0, i, j))
                    out[n++] = (int32_t)j;
            const int64_t lq_b = c->q_lens ? c->q_lens[b] : lq;
            memset(in2, 0, (size_t)c->l2);
            for (int64_t t = 0; i < lq_b && t < c->T2; t++) {
                const int32_t j = c->list2[(b * lq + i) * c->T2 + t];
                if (j >= 0 && !in2[j])
                    in2[j] = 1, out[n++] = (int32_t)(c->l1 + j);
            }
            for (; n < T; n++)
                out[n] = -1;
        }
    free(in1), free(in2);
    const attn_shape s = {B, c->hq, H, lq, L, d, c->shape.v_dim};
    attn_options o = ATTN_OPTIONS_INIT;
    o.scale = c->opt.scale;
    o.softcap = c->opt.softcap;
    o.sinks = c->opt.sinks;
    o.q_lens = c->q_lens;
    o.precision = c->opt.precision;
    o.topk_indices = lists;
    o.topk = T;
    const attn_tensor q = c->q;
    const attn_tensor kt = {k, ATTN_DTYPE_F32, H * L * d, L * d, d};
    const attn_tensor vt = {v, ATTN_DTYPE_F32, H * L * dv, L * dv, dv};
    ref_attn_compute(r, &s, &o, &q, &kt, &vt, rescales);
    free(k), free(v), free(lists);
}

/* Online rescales (tolerance.h R): the first source's key blocks, and one
   per second-source tile, each holding at least one key a list names. */
static int64_t rescales(const attn_dsp *t, const call *c)
{
    const attn_dsp *sc = harness_scalar();
    const int64_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
    int64_t named = 0;
    unsigned char *seen = xcalloc0((size_t)c->l2 + 1, 1);
    for (int64_t b = 0; b < c->B; b++) {
        memset(seen, 0, (size_t)c->l2);
        int64_t n = 0;
        for (int64_t e = 0; e < c->lq * c->T2; e++) {
            const int32_t j = c->list2[b * c->lq * c->T2 + e];
            if (j >= 0 && !seen[j])
                seen[j] = 1, n++;
        }
        named = n > named ? n : named;
    }
    free(seen);
    return (c->l1 + bk - 1) / bk + 1 + named + 1;
}

static const int32_t dtypes2[] = {ATTN_DTYPE_F32, ATTN_DTYPE_F16, ATTN_DTYPE_BF16,
                                  ATTN_DTYPE_Q8_0, ATTN_DTYPE_U8_ASYM, ATTN_DTYPE_U4_ASYM};
#define N_DTYPES2 (sizeof dtypes2 / sizeof dtypes2[0])

HARNESS_ISA_PARAMS(sources, float64)
ParameterizedTest(isa_row *row, sources, float64, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 24; rep++) {
        spec s = {0};
        const int shape = rep % 4;
        s.B = 2;
        if (shape == 3) { /* MLA decode: one latent head, V a view of K */
            s.hq = 16, s.hkv = 1, s.lq = 1 + rng_int(g, 0, 3), s.d = 576, s.dv = 512, s.mla = 1;
        } else {
            s.hkv = 1 + rng_int(g, 0, 1);
            s.hq = s.hkv * (shape == 1 ? 4 : 1);
            s.lq = shape == 2 ? 1 : 1 + rng_int(g, 0, 12);
            s.d = 64, s.dv = shape == 1 ? 32 : 64;
        }
        s.l1 = 1 + rng_int(g, 0, 300), s.l2 = 1 + rng_int(g, 0, 700);
        s.T2 = 1 + rng_int(g, 0, 200);
        s.dt2 = s.mla ? ATTN_DTYPE_BF16 : dtypes2[rep % N_DTYPES2];
        s.causal = rep % 2, s.window = rep % 5 == 1, s.lens = rep % 3 != 0;
        s.sinks = rep % 4 == 1, s.softcap = rep % 7 == 3, s.topk1 = rep % 6 == 5;
        /* the bf16 mode rounds F32 caches' values; quantized ones are
           compared in the default mode (attn.h, attn_precision) */
        s.bf16 = rep % 8 == 2 && s.dt2 <= ATTN_DTYPE_BF16;
        call c;
        call_make(&c, g, &s);
        harness_context("float64 rep %d: B %lld Hq %lld Hkv %lld Lq %lld L1 %lld L2 %lld T2 %lld "
                        "d %lld/%lld second %s%s%s%s%s%s%s%s", rep, (long long)s.B,
                        (long long)s.hq, (long long)s.hkv, (long long)s.lq, (long long)s.l1,
                        (long long)s.l2, (long long)s.T2, (long long)s.d, (long long)s.dv,
                        ref_dtype_name(s.dt2), s.causal ? " causal" : "",
                        s.window ? " window" : "", s.lens ? " lens" : "",
                        s.sinks ? " sinks" : "", s.softcap ? " softcap" : "",
                        s.topk1 ? " topk1" : "", s.bf16 ? " bf16" : "");
        /* every third call split into chunks of the second source's keys */
        void *ws = NULL;
        if (rep % 3 == 1) {
            size_t bytes = 0;
            c.opt.kv_splits = 2 + rep % 2;
            CHECK(attn_forward_sources_workspace_size(&c.shape, &c.opt, &c.x, &bytes) == ATTN_OK,
                  "workspace size: %s", attn_last_error());
            ws = bytes ? xmalloc(bytes) : NULL;
            c.opt.workspace = ws;
            c.opt.workspace_size = bytes;
        }
        const size_t no = out_floats(&c), nr = row_count(&c);
        float *out = xmalloc(no * 4), *st = xmalloc(3 * nr * 4);
        CHECK(run(t, &c, out, st) == ATTN_OK, "forward_sources: %s", attn_last_error());
        ref_attn r;
        reference(&c, rescales(t, &c) + (ws != NULL), &r);
        expect_near("out", out, (ptrdiff_t)c.dv, r.o, r.o_err, nr, (size_t)c.dv);
        expect_near("lse", st, 1, r.lse, r.lse_err, nr, 1);
        expect_near("max_score", st + nr, 1, r.max, r.max_err, nr, 1);
        expect_near("entropy", st + 2 * nr, 1, r.ent, r.ent_err, nr, 1);
        ref_attn_free(&r);
        free(out), free(st), free(ws);
        call_free(&c);
    }
}

HARNESS_ISA_PARAMS(sources, never_read)
ParameterizedTest(isa_row *row, sources, never_read, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 4; rep++) {
        const spec s = {.B = 2, .hq = rep == 3 ? 16 : 8, .hkv = rep == 3 ? 1 : 2,
                        .lq = rep == 1 ? 4 : 1, .l1 = 200, .l2 = 1500,
                        .d = rep == 3 ? 576 : 128, .dv = rep == 3 ? 512 : 128, .T2 = 96,
                        .dt2 = rep == 2 ? ATTN_DTYPE_F32 : ATTN_DTYPE_BF16, .mla = rep == 3,
                        .causal = 1, .window = 1, .lens = 1};
        call c;
        call_make(&c, g, &s);
        harness_context("never read: rep %d", rep);
        const size_t no = out_floats(&c), nr = row_count(&c);
        float *o1 = xmalloc(no * 4), *o2 = xmalloc(no * 4), *s1 = xmalloc(3 * nr * 4),
              *s2 = xmalloc(3 * nr * 4);
        CHECK(run(t, &c, o1, s1) == ATTN_OK, "forward_sources: %s", attn_last_error());
        /* NaN into every second-source row no list names: its k and v bytes
           (with mla, v is in k) */
        unsigned char *named = xcalloc0((size_t)(c.B * c.l2), 1);
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t e = 0; e < c.lq * c.T2; e++) {
                const int32_t j = c.list2[b * c.lq * c.T2 + e];
                const int64_t lq_b = c.q_lens ? c.q_lens[b] : c.lq;
                if (j >= 0 && e / c.T2 < lq_b)
                    named[b * c.l2 + j] = 1;
            }
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t h = 0; h < c.hkv; h++)
                for (int64_t j = 0; j < c.l2; j++) {
                    if (named[b * c.l2 + j])
                        continue;
                    const int64_t r = (b * c.hkv + h) * c.l2 + j;
                    const uint16_t nan16 = 0x7fc0; /* a BF16 NaN */
                    const float nanf32 = NAN;
                    cache *ks[2] = {&c.c2k, c.mla ? NULL : &c.c2v};
                    for (int x = 0; x < 2; x++) {
                        if (!ks[x])
                            continue;
                        const size_t rb = (size_t)ks[x]->units * ref_dtype_size(ks[x]->dtype);
                        unsigned char *p = ks[x]->data + (size_t)r * rb;
                        for (size_t e = 0; e < rb; e += ref_dtype_size(ks[x]->dtype))
                            memcpy(p + e, ks[x]->dtype == ATTN_DTYPE_F32 ? (const void *)&nanf32
                                                                         : (const void *)&nan16,
                                   ref_dtype_size(ks[x]->dtype));
                    }
                }
        free(named);
        CHECK(run(t, &c, o2, s2) == ATTN_OK, "forward_sources: %s", attn_last_error());
        expect_bits("out", o2, o1, no);
        expect_bits("stats", s2, s1, 3 * nr);
        free(o1), free(o2), free(s1), free(s2);
        call_free(&c);
    }
}

/* DeepSeek's latent rows: 656 bytes, in place (attn.h, k_scale_group). */
enum { DS_D = 576, DS_DV = 512, DS_ROW = 656, DS_G = 128, DS_TAIL = 64 };

HARNESS_ISA_PARAMS(sources, deepseek)
ParameterizedTest(isa_row *row, sources, deepseek, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 4; rep++) {
        const int64_t B = 1 + rep % 2, hq = 16, lq = 1 + rng_int(g, 0, 3);
        const int64_t l1 = 1 + rng_int(g, 0, 160), l2 = 1 + rng_int(g, 0, 900);
        const int64_t T = 1 + rng_int(g, 0, 300), L = l1 + l2;
        harness_context("deepseek rep %d: B %lld Lq %lld L1 %lld L2 %lld T %lld", rep,
                        (long long)B, (long long)lq, (long long)l1, (long long)l2, (long long)T);
        /* q, the window's bf16 latent rows (v: their first 512 values) */
        float *q = xmalloc((size_t)(B * hq * lq * DS_D) * 4);
        rng_fill(g, q, (size_t)(B * hq * lq * DS_D), -1.0f, 1.0f);
        uint16_t *w = xmalloc((size_t)(B * l1 * DS_D) * 2);
        /* the reference's one cache: values as decoded (FP8 without its
           scale), per row 4 group scales (1 for the window's rows) */
        float *kc = xmalloc((size_t)(B * L * DS_D) * 4), *sc = xmalloc((size_t)(B * L * 4) * 4);
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < l1; j++)
                for (int64_t c = 0; c < DS_D; c++) {
                    const uint16_t h = ref_f32_to_bf16(rng_float(g, -1.0f, 1.0f));
                    w[(b * l1 + j) * DS_D + c] = h;
                    kc[(b * L + j) * DS_D + c] = (float)ref_bf16_to_double(h);
                    if (c < 4)
                        sc[(b * L + j) * 4 + c] = 1.0f;
                }
        unsigned char *x = xmalloc((size_t)(B * l2 * DS_ROW));
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < l2; j++) {
                unsigned char *r = x + (b * l2 + j) * DS_ROW;
                float *dst = kc + (b * L + l1 + j) * DS_D;
                for (int64_t c = 0; c < DS_DV; c++) {
                    r[c] = ref_f32_to_e4m3(rng_float(g, -400.0f, 400.0f));
                    dst[c] = (float)ref_e4m3_to_double(r[c]);
                }
                for (int64_t gi = 0; gi < DS_DV / DS_G; gi++) {
                    const float s = rng_float(g, 1.0f / 512.0f, 1.0f / 64.0f);
                    memcpy(r + DS_DV + 4 * gi, &s, 4);
                    sc[(b * L + l1 + j) * 4 + gi] = s;
                }
                for (int64_t c = 0; c < DS_TAIL; c++) {
                    const uint16_t h = ref_f32_to_bf16(rng_float(g, -1.0f, 1.0f));
                    memcpy(r + DS_DV + 16 + 2 * c, &h, 2);
                    dst[DS_DV + c] = (float)ref_bf16_to_double(h);
                }
            }
        int32_t *lists = xmalloc((size_t)(B * lq * T) * 4);
        for (int64_t e = 0; e < B * lq * T; e++)
            lists[e] = rng_int(g, 0, 6) == 0 ? -1 : (int32_t)rng_int(g, 0, l2 - 1);
        const attn_shape shape = {B, hq, 1, lq, l1, DS_D, DS_DV};
        attn_options o = ATTN_OPTIONS_INIT;
        o.flags = ATTN_CAUSAL;
        o.window = 128;
        const attn_tensor tq = {q, ATTN_DTYPE_F32, hq * lq * DS_D, lq * DS_D, DS_D};
        const attn_tensor tw = {w, ATTN_DTYPE_BF16, l1 * DS_D, DS_D, DS_D};
        const attn_tensor xk = {x, ATTN_DTYPE_FP8_E4M3, l2 * DS_ROW, DS_ROW, DS_ROW};
        const attn_tensor xs = {x + DS_DV, ATTN_DTYPE_F32, l2 * DS_ROW / 4, DS_ROW / 4,
                                DS_ROW / 4};
        const attn_tensor xt = {x + DS_DV + 16, ATTN_DTYPE_BF16, l2 * DS_ROW / 2, DS_ROW / 2,
                                DS_ROW / 2};
        const attn_kv_source src = {sizeof src, 0, l2, &xk, &xk, NULL, lists, T, &xs, &xs,
                                    DS_G, DS_G, &xt, DS_TAIL};
        const size_t nr = (size_t)(B * hq * lq);
        float *out = xmalloc(nr * DS_DV * 4), *st = xmalloc(3 * nr * 4);
        const attn_tensor to = {out, ATTN_DTYPE_F32, hq * lq * DS_DV, lq * DS_DV, DS_DV};
        const attn_row_stats rs = {st, st + nr, st + 2 * nr};
        CHECK(attn_forward_sources_with(t, &shape, &o, &tq, &tw, &tw, &src, &to, &rs) == ATTN_OK,
              "forward_sources: %s", attn_last_error());
        /* the reference: the window's visible keys, then the listed rows */
        int32_t *cl = xmalloc((size_t)(B * lq * L) * 4);
        unsigned char *seen = xmalloc((size_t)l2);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < lq; i++) {
                int32_t *out_l = cl + (b * lq + i) * L;
                int64_t n = 0;
                for (int64_t j = 0; j < l1; j++)
                    if (ref_visible(&shape, &o, b, 0, i, j))
                        out_l[n++] = (int32_t)j;
                memset(seen, 0, (size_t)l2);
                for (int64_t e = 0; e < T; e++) {
                    const int32_t j = lists[(b * lq + i) * T + e];
                    if (j >= 0 && !seen[j])
                        seen[j] = 1, out_l[n++] = (int32_t)(l1 + j);
                }
                for (; n < L; n++)
                    out_l[n] = -1;
            }
        free(seen);
        const attn_shape cs = {B, hq, 1, lq, L, DS_D, DS_DV};
        const attn_tensor ck = {kc, ATTN_DTYPE_F32, L * DS_D, DS_D, DS_D};
        const attn_tensor cscales = {sc, ATTN_DTYPE_F32, L * 4, 4, 4};
        attn_options co = ATTN_OPTIONS_INIT;
        co.topk_indices = cl;
        co.topk = L;
        co.k_scales = co.v_scales = &cscales;
        co.k_scale_group = co.v_scale_group = DS_G;
        co.k_tail = &ck; /* the reference takes the tail's values from k */
        co.k_tail_dim = DS_TAIL;
        int64_t named = 0;
        for (int64_t e = 0; e < B * lq * T; e++)
            named += lists[e] >= 0;
        const attn_dsp *sc_t = harness_scalar();
        const int64_t bk = t->block_k < sc_t->block_k ? t->block_k : sc_t->block_k;
        ref_attn r;
        ref_attn_compute_as(&r, &cs, &co, &tq, &ck, &ck, (l1 + bk - 1) / bk + 1 + named + 1,
                            ATTN_DTYPE_FP8_E4M3, ATTN_DTYPE_FP8_E4M3);
        expect_near("out", out, DS_DV, r.o, r.o_err, nr, DS_DV);
        expect_near("lse", st, 1, r.lse, r.lse_err, nr, 1);
        expect_near("max_score", st + nr, 1, r.max, r.max_err, nr, 1);
        expect_near("entropy", st + 2 * nr, 1, r.ent, r.ent_err, nr, 1);
        ref_attn_free(&r);
        free(q), free(w), free(kc), free(sc), free(x), free(lists), free(cl), free(out), free(st);
    }
}

HARNESS_ISA_PARAMS(sources, composition)
ParameterizedTest(isa_row *row, sources, composition, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    const spec s = {.B = 3, .hq = 8, .hkv = 2, .lq = 5, .l1 = 150, .l2 = 400, .d = 64,
                    .dv = 64, .T2 = 60, .dt2 = ATTN_DTYPE_F16, .causal = 1, .lens = 1,
                    .sinks = 1};
    call c;
    call_make(&c, g, &s);
    c.kv_lens[1] = (int32_t)c.l1, c.q_lens[1] = (int32_t)c.lq, c.kv_lens2[1] = (int32_t)c.l2;
    const size_t no = out_floats(&c), nr = row_count(&c);
    float *o1 = xmalloc(no * 4), *s1 = xmalloc(3 * nr * 4);
    CHECK(run(t, &c, o1, s1) == ATTN_OK, "forward_sources: %s", attn_last_error());
    /* in reverse task order: the same bits */
    float *o2 = xmalloc(no * 4), *s2 = xmalloc(3 * nr * 4);
    c.opt.parallel_for = harness_reverse_for;
    CHECK(run(t, &c, o2, s2) == ATTN_OK, "forward_sources: %s", attn_last_error());
    expect_bits("out, tasks reversed", o2, o1, no);
    expect_bits("stats, tasks reversed", s2, s1, 3 * nr);
    /* split into chunks of the second source: the same bits in either task
       order (another merge order than unsplit: not compared with it) */
    size_t bytes = 0;
    c.opt.kv_splits = 2;
    c.opt.parallel_for = NULL;
    CHECK(attn_forward_sources_workspace_size(&c.shape, &c.opt, &c.x, &bytes) == ATTN_OK && bytes,
          "workspace size: %s", attn_last_error());
    void *ws = xmalloc(bytes);
    c.opt.workspace = ws, c.opt.workspace_size = bytes;
    float *o4 = xmalloc(no * 4), *s4 = xmalloc(3 * nr * 4);
    CHECK(run(t, &c, o2, s2) == ATTN_OK, "split: %s", attn_last_error());
    c.opt.parallel_for = harness_reverse_for;
    CHECK(run(t, &c, o4, s4) == ATTN_OK, "split, reversed: %s", attn_last_error());
    expect_bits("out, split, tasks reversed", o4, o2, no);
    expect_bits("stats, split, tasks reversed", s4, s2, 3 * nr);
    free(o4), free(s4), free(ws);
    c.opt.kv_splits = 0, c.opt.workspace = NULL, c.opt.workspace_size = 0;
    c.opt.parallel_for = NULL;
    /* sequence 1 alone: a batch of one over its own rows of every array */
    call one = c;
    const int64_t hq = c.hq, lq = c.lq, dv = c.dv;
    one.shape.batch = 1;
    one.B = 1;
    one.q.data = (float *)c.q.data + c.q.batch_stride;
    one.k1.data = (float *)c.k1.data + c.k1.batch_stride;
    one.v1.data = (float *)c.v1.data + c.v1.batch_stride;
    one.k2t.data = (uint16_t *)c.k2t.data + c.k2t.batch_stride;
    one.v2t.data = (uint16_t *)c.v2t.data + c.v2t.batch_stride;
    one.opt.q_lens = c.q_lens + 1, one.opt.kv_lens = c.kv_lens + 1;
    one.x.k = &one.k2t, one.x.v = &one.v2t;
    one.x.kv_lens = c.kv_lens2 + 1;
    one.x.indices = c.list2 + c.lq * c.T2;
    const size_t n1 = (size_t)(hq * lq);
    float *o3 = xmalloc(n1 * (size_t)dv * 4), *s3 = xmalloc(3 * n1 * 4);
    CHECK(run(t, &one, o3, s3) == ATTN_OK, "alone: %s", attn_last_error());
    expect_bits("out, alone", o3, o1 + n1 * (size_t)dv, n1 * (size_t)dv);
    for (int x = 0; x < 3; x++)
        expect_bits("stats, alone", s3 + x * n1, s1 + x * nr + n1, n1);
    free(o1), free(o2), free(o3), free(s1), free(s2), free(s3);
    call_free(&c);
}

/* Each refusal leaves out and the stats as they were. */
static void expect_refused(const attn_dsp *t, const call *c, attn_status want, const char *why,
                           const char *names)
{
    const size_t no = out_floats(c), nr = row_count(c);
    float *o = xmalloc(no * 4), *st = xmalloc(3 * nr * 4);
    for (size_t i = 0; i < no; i++)
        o[i] = 123.0f;
    for (size_t i = 0; i < 3 * nr; i++)
        st[i] = -7.0f;
    attn_tensor ot = c->out;
    ot.data = o;
    const attn_row_stats rs = {st, st + nr, st + 2 * nr};
    (void)t;
    const attn_status got =
        attn_forward_sources(&c->shape, &c->opt, &c->q, &c->k1, &c->v1, &c->x, &ot, &rs);
    CHECK(got == want, "%s: status %d, want %d (%s)", why, got, want, attn_last_error());
    CHECK(!names || strstr(attn_last_error(), names), "%s: the message \"%s\" lacks \"%s\"", why,
          attn_last_error(), names);
    for (size_t i = 0; i < no; i++)
        CHECK(o[i] == 123.0f, "%s: out written", why);
    for (size_t i = 0; i < 3 * nr; i++)
        CHECK(st[i] == -7.0f, "%s: stats written", why);
    free(o), free(st);
}

HARNESS_ISA_PARAMS(sources, errors)
ParameterizedTest(isa_row *row, sources, errors, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    const spec s = {.B = 2, .hq = 4, .hkv = 2, .lq = 3, .l1 = 40, .l2 = 600, .d = 64, .dv = 64,
                    .T2 = 8, .dt2 = ATTN_DTYPE_F32, .lens = 1};
    call c;
    call_make(&c, g, &s);
    const char *second = "second source";
    const attn_kv_source keep = c.x;
    {
        call n = c;
        const size_t no = out_floats(&c);
        float *o = xmalloc(no * 4);
        attn_tensor ot = c.out;
        ot.data = o;
        CHECK(attn_forward_sources(&n.shape, &n.opt, &n.q, &n.k1, &n.v1, NULL, &ot, NULL) ==
                  ATTN_ERR_NULL, "extra NULL");
        free(o);
    }
    c.x.struct_size = 8;
    expect_refused(t, &c, ATTN_ERR_VERSION, "struct_size 8", second);
    c.x = keep, c.x.flags = 1;
    expect_refused(t, &c, ATTN_ERR_ARG, "flags 1", second);
    c.x = keep, c.x.indices = NULL;
    expect_refused(t, &c, ATTN_ERR_ARG, "indices NULL", second);
    c.x = keep, c.x.topk = 0;
    expect_refused(t, &c, ATTN_ERR_ARG, "topk 0", second);
    c.x = keep, c.x.kv_len = 0;
    expect_refused(t, &c, ATTN_ERR_ARG, "kv_len 0", second);
    c.x = keep;
    /* an entry at Lk2_b of a row below Lq_b */
    c.q_lens[0] = 2;
    c.kv_lens2[0] = 10;
    for (int64_t e = 0; e < c.lq * c.T2; e++)
        c.list2[e] = c.list2[e] < 0 ? -1 : c.list2[e] % 10;
    const int32_t saved = c.list2[1 * c.T2];
    c.list2[1 * c.T2] = 10;
    expect_refused(t, &c, ATTN_ERR_ARG, "entry at Lk2_b", second);
    c.list2[1 * c.T2] = -2;
    expect_refused(t, &c, ATTN_ERR_ARG, "entry -2", second);
    c.list2[1 * c.T2] = saved;
    /* rows past Lq_b: their lists are not read */
    c.list2[2 * c.T2] = 1000;
    {
        const size_t no = out_floats(&c), nr = row_count(&c);
        float *o = xmalloc(no * 4), *st = xmalloc(3 * nr * 4);
        CHECK(run(t, &c, o, st) == ATTN_OK, "a list past Lq_b was read: %s", attn_last_error());
        free(o), free(st);
    }
    c.list2[2 * c.T2] = saved;
    /* a split asked for without its workspace, and a workspace over either
       source's k (sequence 1 long enough for two chunks) */
    c.kv_lens2[1] = (int32_t)c.l2, c.q_lens[1] = (int32_t)c.lq;
    c.opt.kv_splits = 2;
    expect_refused(t, &c, ATTN_ERR_ARG, "kv_splits 2 without a workspace", NULL);
    size_t need = 0;
    CHECK(attn_forward_sources_workspace_size(&c.shape, &c.opt, &c.x, &need) == ATTN_OK && need,
          "workspace size: %s", attn_last_error());
    void *ws = xmalloc(need);
    c.opt.workspace = ws, c.opt.workspace_size = need - 1;
    expect_refused(t, &c, ATTN_ERR_ARG, "a workspace one byte short", NULL);
    c.opt.workspace = c.k2t.data, c.opt.workspace_size = need;
    expect_refused(t, &c, ATTN_ERR_STRIDE, "the workspace over the second k", second);
    c.opt.workspace = c.k1.data;
    expect_refused(t, &c, ATTN_ERR_STRIDE, "the workspace over the first k", NULL);
    c.opt.workspace = ws;
    {
        const size_t no = out_floats(&c), nr = row_count(&c);
        float *o = xmalloc(no * 4), *st = xmalloc(3 * nr * 4);
        CHECK(run(t, &c, o, st) == ATTN_OK, "split: %s", attn_last_error());
        free(o), free(st);
    }
    free(ws);
    c.opt.kv_splits = 0, c.opt.workspace = NULL, c.opt.workspace_size = 0;
    /* the second source's k of a dtype no cache has */
    attn_tensor bad = c.k2t;
    bad.dtype = ATTN_DTYPE_BOOL;
    c.x.k = &bad;
    expect_refused(t, &c, ATTN_ERR_ARG, "k BOOL", second);
    /* its v sharing bytes with out */
    attn_tensor aliased = c.v2t;
    aliased.data = c.out.data;
    c.x.k = &c.k2t, c.x.v = &aliased;
    {
        const size_t nr = row_count(&c);
        float *st = xmalloc(3 * nr * 4);
        for (size_t i = 0; i < 3 * nr; i++)
            st[i] = -7.0f;
        const attn_row_stats rs = {st, st + nr, st + 2 * nr};
        CHECK(attn_forward_sources(&c.shape, &c.opt, &c.q, &c.k1, &c.v1, &c.x, &c.out, &rs) ==
                  ATTN_ERR_STRIDE, "v aliasing out: %s", attn_last_error());
        for (size_t i = 0; i < 3 * nr; i++)
            CHECK(st[i] == -7.0f, "v aliasing out: stats written");
        free(st);
    }
    c.x = keep;
    call_free(&c);
}

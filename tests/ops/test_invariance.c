/* SPDX-License-Identifier: MIT */
/*
 * Batch invariance (attn.h, "Batch invariance"), on every ISA row: a sequence's
 * output rows and row statistics (lse, max_score, entropy) from
 * attn_forward are bitwise the same when it is called alone and when it is
 * one entry of a batch of random composition: other entries of random
 * lengths before and after it, padded (q_lens/kv_lens), packed
 * (q_offsets/kv_offsets, batch_stride 0), left-padded keys (kv_offsets)
 * or paged K/V (a shuffled pool, block sizes 1..33; in the bf16 mode even
 * ones, and none on NEON, SVE and AMX: attn.h says why), serially or on a
 * pool of 2 threads. Both calls get the workspace
 * attn_forward_workspace_size asks for, so a sequence that splits alone
 * splits in the batch too (its own lengths decide: src/driver/split.c).
 * The options (causal, window, softcap, sinks, the precision modes,
 * kv_splits 0, 1, 2, 3, 5, F32, F16 and BF16 K/V) are the call's, the
 * same in both.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "half.h"
#include "harness.h"

enum { LAYOUT_PADDED, LAYOUT_PACKED, LAYOUT_LEFTPAD, LAYOUT_PAGED, LAYOUTS };
static const char *const layout_names[] = {"padded", "packed", "left-padded", "paged"};

/* One sequence: q [lq][hq][d] (f32), k and v [lk][hkv][d] as stored (dtype
   kv_dtype, values exact in it). */
typedef struct seq {
    int64_t lq, lk;
    float *q;
    void *k, *v;
} seq;

typedef struct call_shape {
    int64_t hq, hkv, d;
    int32_t kv_dtype;
    size_t kv_bytes; /* per value */
} call_shape;

static void fill_kv(rng *g, const call_shape *c, void *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float x = rng_float(g, -2.0f, 2.0f);
        if (c->kv_dtype == ATTN_DTYPE_F32)
            ((float *)dst)[i] = x;
        else if (c->kv_dtype == ATTN_DTYPE_F16)
            ((uint16_t *)dst)[i] = attn_f32_to_f16(x);
        else
            ((uint16_t *)dst)[i] = attn_f32_to_bf16(x);
    }
}

static seq seq_new(rng *g, const call_shape *c, int64_t lq, int64_t lk)
{
    seq s = {lq, lk, NULL, NULL, NULL};
    const size_t nq = (size_t)(lq * c->hq * c->d), nk = (size_t)(lk * c->hkv * c->d);
    s.q = xmalloc(nq * 4 + 4);
    rng_fill(g, s.q, nq, -2.0f, 2.0f);
    s.k = xmalloc(nk * c->kv_bytes + 4);
    s.v = xmalloc(nk * c->kv_bytes + 4);
    fill_kv(g, c, s.k, nk);
    fill_kv(g, c, s.v, nk);
    return s;
}

static void seq_free(seq *s)
{
    free(s->q), free(s->k), free(s->v);
}

/* What a call leaves of sequence `which`: out [lq][hq][d], stats [hq][lq]. */
typedef struct result {
    float *out, *lse, *max, *ent;
} result;

static result result_new(const seq *s, const call_shape *c)
{
    const size_t rows = (size_t)(s->lq * c->hq);
    result r = {xmalloc(rows * (size_t)c->d * 4 + 4), xmalloc(rows * 4 + 4),
                xmalloc(rows * 4 + 4), xmalloc(rows * 4 + 4)};
    return r;
}

static void result_free(result *r)
{
    free(r->out), free(r->lse), free(r->max), free(r->ent);
}

/*
 * Runs attn_forward on the sequences in `layout` (n >= 1) and copies
 * sequence `which`'s rows and stats into *res. Tensors are [rows][heads][d]
 * per sequence (batch_stride between sequences, 0 when packed).
 */
static void run_call(const attn_dsp *t, const call_shape *c, const attn_options *base,
                     int layout, const seq *seqs, int64_t n, int64_t which,
                     attn_parallel_for_fn pf, void *pf_ctx, rng *g, result *res)
{
    const int64_t hq = c->hq, hkv = c->hkv, d = c->d;
    const size_t kvb = c->kv_bytes;
    int32_t *q_lens = xmalloc((size_t)n * 4), *kv_lens = xmalloc((size_t)n * 4);
    int32_t *q_off = xmalloc((size_t)n * 4), *kv_off = xmalloc((size_t)n * 4);
    int64_t q_len = 0, kv_len = 0, tq = 0, tk = 0;
    for (int64_t b = 0; b < n; b++) {
        q_lens[b] = (int32_t)seqs[b].lq;
        kv_lens[b] = (int32_t)seqs[b].lk;
        q_off[b] = (int32_t)tq;
        kv_off[b] = layout == LAYOUT_LEFTPAD ? (int32_t)rng_int(g, 0, 40) : (int32_t)tk;
        tq += seqs[b].lq;
        tk += seqs[b].lk;
        q_len = seqs[b].lq > q_len ? seqs[b].lq : q_len;
        const int64_t kend = (layout == LAYOUT_LEFTPAD ? kv_off[b] : 0) + seqs[b].lk;
        kv_len = kend > kv_len ? kend : kv_len;
    }
    const int packed = layout == LAYOUT_PACKED;
    const int64_t qrows = packed ? tq : q_len, krows = packed ? tk : kv_len;
    const int64_t qb = packed ? 0 : n, kb = packed ? 0 : n;
    const attn_shape s = {n, hq, hkv, packed ? tq : q_len, packed ? tk : kv_len, d, d};
    /* q and out: [B or 1][rows][hq][d]; k, v: [B or 1][keys][hkv][d] */
    const size_t q_elems = (size_t)((qb ? qb : 1) * qrows * hq * d);
    const size_t k_elems = (size_t)((kb ? kb : 1) * krows * hkv * d);
    float *q = xcalloc0(q_elems + 1, 4), *out = xmalloc(q_elems * 4 + 4);
    unsigned char *k = xcalloc0(k_elems + 1, kvb), *v = xcalloc0(k_elems + 1, kvb);
    const int64_t qbs = packed ? 0 : qrows * hq * d, kbs = packed ? 0 : krows * hkv * d;
    for (int64_t b = 0; b < n; b++) {
        const int64_t q0 = packed ? q_off[b] : 0;
        const int64_t k0 = layout == LAYOUT_PACKED || layout == LAYOUT_LEFTPAD ? kv_off[b] : 0;
        memcpy(q + b * qbs + q0 * hq * d, seqs[b].q, (size_t)(seqs[b].lq * hq * d) * 4);
        memcpy(k + (size_t)(b * kbs + k0 * hkv * d) * kvb, seqs[b].k,
               (size_t)(seqs[b].lk * hkv * d) * kvb);
        memcpy(v + (size_t)(b * kbs + k0 * hkv * d) * kvb, seqs[b].v,
               (size_t)(seqs[b].lk * hkv * d) * kvb);
    }
    attn_tensor tqt = {q, ATTN_DTYPE_F32, qbs, d, hq * d};
    attn_tensor tkt = {k, c->kv_dtype, kbs, d, hkv * d};
    attn_tensor tvt = {v, c->kv_dtype, kbs, d, hkv * d};
    attn_tensor tot = {out, ATTN_DTYPE_F32, qbs, d, hq * d};
    attn_options o = *base;
    const int lens = n > 1 || rng_int(g, 0, 1); /* alone: with or without arrays */
    o.q_lens = lens ? q_lens : NULL;
    o.kv_lens = lens ? kv_lens : NULL;
    if (packed) {
        o.q_offsets = q_off;
        o.kv_offsets = kv_off;
    } else if (layout == LAYOUT_LEFTPAD) {
        o.kv_offsets = kv_off;
    }
    /* paged: the padded K/V copied into a shuffled pool */
    unsigned char *pk = NULL, *pv = NULL;
    int32_t *table = NULL;
    if (layout == LAYOUT_PAGED) {
        /* the bf16 mode pairs consecutive keys for P.V (attn.h): its
           pages hold an even number of positions */
        const int64_t bs = base->precision == ATTN_PRECISION_BF16 ? 2 * rng_int(g, 1, 16)
                                                                  : rng_int(g, 1, 33);
        const int64_t per = (kv_len + bs - 1) / bs, blocks = n * per;
        table = xmalloc((size_t)blocks * 4);
        for (int64_t i = 0; i < blocks; i++)
            table[i] = (int32_t)i;
        for (int64_t i = blocks - 1; i > 0; i--) { /* shuffle */
            const int64_t j = rng_int(g, 0, i);
            const int32_t x = table[i];
            table[i] = table[j], table[j] = x;
        }
        const size_t slot = (size_t)(hkv * d) * kvb;
        pk = xcalloc0((size_t)(blocks * bs) + 1, slot);
        pv = xcalloc0((size_t)(blocks * bs) + 1, slot);
        for (int64_t b = 0; b < n; b++)
            for (int64_t p = 0; p < kv_len; p++) {
                const size_t to = (size_t)(table[b * per + p / bs] * bs + p % bs) * slot;
                memcpy(pk + to, k + (size_t)(b * kbs) * kvb + (size_t)p * slot, slot);
                memcpy(pv + to, v + (size_t)(b * kbs) * kvb + (size_t)p * slot, slot);
            }
        tkt = (attn_tensor){pk, c->kv_dtype, bs * hkv * d, d, hkv * d};
        tvt = (attn_tensor){pv, c->kv_dtype, bs * hkv * d, d, hkv * d};
        o.block_table = table;
        o.block_table_stride = per;
        o.block_size = bs;
        o.num_blocks = blocks;
    }
    const size_t srows = (size_t)(n * hq * s.q_len);
    float *lse = xmalloc(srows * 4 + 4), *mx = xmalloc(srows * 4 + 4), *ent = xmalloc(srows * 4 + 4);
    const attn_row_stats st = {lse, mx, ent};
    size_t ws = 0;
    CHECK(attn_forward_workspace_size(&s, &o, &ws) == ATTN_OK, "workspace size");
    void *w = ws ? xmalloc(ws) : NULL;
    o.workspace = w;
    o.workspace_size = ws;
    o.parallel_for = pf;
    o.parallel_ctx = pf_ctx;
    const attn_status rc = attn_forward_with(t, &s, &o, &tqt, &tkt, &tvt, &tot, &st);
    CHECK(rc == ATTN_OK, "%s batch of %lld: status %d (%s)", layout_names[layout], (long long)n,
          rc, attn_strerror(rc));
    /* sequence `which`: its rows and stats */
    const seq *x = &seqs[which];
    const int64_t q0 = packed ? q_off[which] : 0;
    for (int64_t i = 0; i < x->lq; i++) {
        memcpy(res->out + i * hq * d, out + which * qbs + (q0 + i) * hq * d, (size_t)(hq * d) * 4);
        for (int64_t h = 0; h < hq; h++) {
            const size_t at = (size_t)((which * hq + h) * s.q_len + q0 + i);
            res->lse[h * x->lq + i] = lse[at];
            res->max[h * x->lq + i] = mx[at];
            res->ent[h * x->lq + i] = ent[at];
        }
    }
    free(w), free(lse), free(mx), free(ent), free(pk), free(pv), free(table);
    free(q), free(out), free(k), free(v);
    free(q_lens), free(kv_lens), free(q_off), free(kv_off);
}

/* A sequence's length: short, or (1 in 8) long enough to split alone
   automatically (2 x 1024 keys); kv_splits >= 2 splits the short ones
   (over 256 keys), which keeps the test cheap under emulation. */
static int64_t draw_len(rng *g, int64_t lo, int64_t hi, int64_t longest)
{
    return rng_int(g, 0, 7) == 0 ? rng_int(g, 2048, longest) : rng_int(g, lo, hi);
}

HARNESS_ISA_PARAMS(invariance, batch)
ParameterizedTest(isa_row *row, invariance, batch, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    attn_threadpool *pool;
    CHECK(attn_threadpool_create(2, &pool) == ATTN_OK, "pool");
    static const int64_t heads[][2] = {{8, 2}, {4, 4}, {8, 1}, {6, 3}};
    static const int64_t dims[] = {32, 64, 72, 128};
    int32_t dtypes[ATTN_DTYPE_COUNT]; /* the float dtypes (tests/dtypes.h) */
    const int n_dtypes = test_dtypes_of(DT_FLOAT, dtypes);
    for (int rep = 0; rep < 8; rep++) {
        const int64_t hi = rng_int(g, 0, 3);
        const int32_t dt = dtypes[rng_int(g, 0, n_dtypes - 1)];
        const call_shape c = {heads[hi][0], heads[hi][1], dims[rng_int(g, 0, 3)], dt,
                              test_dtypes[dt].bytes};
        attn_options base = ATTN_OPTIONS_INIT;
        base.flags = rng_int(g, 0, 1) ? ATTN_CAUSAL : 0;
        base.window = rng_int(g, 0, 3) == 0 ? (int32_t)rng_int(g, 1, 600) : 0;
        base.softcap = rng_int(g, 0, 3) == 0 ? 20.0f : 0.0f;
        base.precision = rng_int(g, 0, 2) == 0 ? ATTN_PRECISION_BF16 : ATTN_PRECISION_DEFAULT;
        static const int32_t kv_splits[] = {0, 0, 1, 2, 3, 5};
        base.kv_splits = kv_splits[rng_int(g, 0, 5)];
        float sinks[8];
        for (int h = 0; h < 8; h++)
            sinks[h] = rng_float(g, -1.0f, 1.0f);
        attn_tensor tsinks = {sinks, ATTN_DTYPE_F32, 0, 1, 1};
        if (rng_int(g, 0, 3) == 0)
            base.sinks = &tsinks;
        /* the sequence: decode (1-4 rows), speculative (5-20) or prefill */
        const int64_t kind = rng_int(g, 0, 2);
        const int64_t lq = kind == 0 ? rng_int(g, 1, 4) : kind == 1 ? rng_int(g, 5, 20)
                                                                     : rng_int(g, 21, 90);
        /* long keys only with few rows: the scalar row's cost under qemu */
        const int64_t lk = lq + (kind == 2 ? rng_int(g, 0, 700) : draw_len(g, 0, 700, 2300));
        const int64_t n = rng_int(g, 2, 5), which = rng_int(g, 0, n - 1);
        seq *seqs = xmalloc((size_t)n * sizeof *seqs);
        for (int64_t b = 0; b < n; b++) {
            if (b == which) {
                seqs[b] = seq_new(g, &c, lq, lk);
                continue;
            }
            /* others: decode, prefill, or no query rows at all */
            const int64_t pick = rng_int(g, 0, 5);
            const int64_t lqb = pick == 0 ? 0 : pick == 1 ? rng_int(g, 1, 90) : rng_int(g, 1, 4);
            seqs[b] = seq_new(g, &c, lqb,
                              lqb + (pick == 1 ? rng_int(g, 0, 700) : draw_len(g, 0, 700, 2300)));
        }
        /* attn.h: the bf16 mode on NEON and SVE sums each run of keys in a
           chain of its own, and AMX sums 16 key pairs per tile product in
           an order of its own, so a page boundary changes their rounding */
        const int run_bf16 = base.precision == ATTN_PRECISION_BF16 &&
                             (t->isa == ATTN_ISA_NEON || t->isa == ATTN_ISA_SVE ||
                              t->isa == ATTN_ISA_AMX);
        const int layout = (int)rng_int(g, 0, run_bf16 ? LAYOUT_PAGED - 1 : LAYOUTS - 1);
        const int pooled = (int)rng_int(g, 0, 1);
        harness_context("rep %d: Hq %lld Hkv %lld d %lld %s K/V, flags %u window %d softcap %g "
                        "sinks %d precision %lld kv_splits %d; sequence %lld of %lld (Lq %lld, "
                        "Lk %lld), %s, %s",
                        rep, (long long)c.hq, (long long)c.hkv, (long long)c.d,
                        dt == ATTN_DTYPE_F32 ? "F32" : dt == ATTN_DTYPE_F16 ? "F16" : "BF16",
                        (unsigned)base.flags, (int)base.window, (double)base.softcap,
                        base.sinks != NULL, (long long)base.precision, (int)base.kv_splits,
                        (long long)which,
                        (long long)n, (long long)lq, (long long)lk, layout_names[layout],
                        pooled ? "2 threads" : "serial");
        result alone = result_new(&seqs[which], &c), inside = result_new(&seqs[which], &c);
        run_call(t, &c, &base, LAYOUT_PADDED, &seqs[which], 1, 0, NULL, NULL, g, &alone);
        run_call(t, &c, &base, layout, seqs, n, which, pooled ? attn_threadpool_parallel_for : NULL,
                 pooled ? pool : NULL, g, &inside);
        const size_t rows = (size_t)(lq * c.hq);
        expect_bits("out", inside.out, alone.out, rows * (size_t)c.d);
        expect_bits("lse", inside.lse, alone.lse, rows);
        expect_bits("max_score", inside.max, alone.max, rows);
        expect_bits("entropy", inside.ent, alone.ent, rows);
        result_free(&alone), result_free(&inside);
        for (int64_t b = 0; b < n; b++)
            seq_free(&seqs[b]);
        free(seqs);
    }
    attn_threadpool_destroy(pool);
}

/* SPDX-License-Identifier: MIT */
/*
 * Split-KV, attn_merge and global positions, for every ISA row (SIMDe
 * avx512-emu included), against the float64 reference (tests/ref/ref.c) with the
 * bounds of tests/tolerance.h ("Merging partial results"), and for SIMD rows
 * against the scalar table too:
 *   kernels/wsum          the merge slot, 1..32 parts, every length and
 *                         alignment, split calls bitwise equal, NaN
 *   split/merge           attn_merge of random partials: -inf partials
 *                         (their rows hold NaN and must not leak), all -inf
 *                         rows, NaN and +inf lse, NaN inside an output,
 *                         large and spread lse, 1..9 parts, thread order
 *   split/forward         attn_forward with kv_splits 2, 3, 5, 64 and
 *                         automatic, on long key ranges with every mask,
 *                         layout and dtype; the workspace is checked for
 *                         use and for writes past its size; MLA-wide rows
 *                         (accumulated in the workspace or the output)
 *   split/threads         a split forward is bitwise the same serially,
 *                         on a pool of 3 and in reverse task order
 *   split/shards          keys cut into 2..5 shards, each run with global
 *                         q_pos/k_pos (causal, window, lengths, bias,
 *                         mask sliced per shard), merged with attn_merge,
 *                         against the unsharded reference
 * split/merge, split/forward and split/shards also write F16 and BF16 outs:
 * bit for bit the F32 out of the same table rounded to nearest even, the
 * same lse bits, within tolerance.h's "16-bit outputs" bound of float64.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ref/ref.h"
#include "tolerance.h"
#include "workload.h"

/* ------------------------------------------------------------ wsum kernel */

static void run_wsum(const attn_dsp *t, size_t parts, size_t n, size_t offset, float lo, float hi,
                     float wlo, float whi)
{
    rng *g = harness_rng();
    buf by, bx[ATTN_WSUM_MAX_PARTS];
    const float *x[ATTN_WSUM_MAX_PARTS];
    float w[ATTN_WSUM_MAX_PARTS];
    float *y = buf_alloc(&by, n * 4, offset * 4);
    rng_fill(g, y, n, lo, hi);
    for (size_t p = 0; p < parts; p++) {
        float *xp = buf_alloc(&bx[p], n * 4, offset * 4);
        rng_fill(g, xp, n, lo, hi);
        x[p] = xp;
        w[p] = rng_float(g, wlo, whi);
    }
    float *y0 = xmalloc(n * 4 + 4), *y2 = xmalloc(n * 4 + 4);
    memcpy(y0, y, n * 4);
    memcpy(y2, y, n * 4);
    double *want = xmalloc((n + 1) * sizeof(double));
    double *bound = xmalloc((n + 1) * sizeof(double));
    for (size_t j = 0; j < n; j++) {
        double s = y[j], a = fabs(y[j]);
        for (size_t p = 0; p < parts; p++) {
            s += (double)w[p] * (double)x[p][j];
            a += fabs((double)w[p] * (double)x[p][j]);
        }
        want[j] = s;
        bound[j] = tol_wsum((double)parts, a);
    }
    harness_context("wsum of %zu parts, n=%zu offset=%zu, values [%g, %g), weights [%g, %g)",
                    parts, n, offset, (double)lo, (double)hi, (double)wlo, (double)whi);
    t->wsum(y, x, w, parts, n);
    expect_near("wsum", y, (ptrdiff_t)n, want, bound, 1, n);
    buf_check(&by, "wsum y");
    for (size_t p = 0; p < parts; p++)
        buf_check(&bx[p], "wsum x");
    /* the parts over two calls: the same bits (the accumulation order) */
    const size_t cut = parts / 2;
    if (cut)
        t->wsum(y2, x, w, cut, n);
    t->wsum(y2, x + cut, w + cut, parts - cut, n);
    expect_bits("wsum in two calls vs one", y2, y, n);
    free(y0), free(y2), free(want), free(bound);
    buf_free(&by);
    for (size_t p = 0; p < parts; p++)
        buf_free(&bx[p]);
}

HARNESS_ISA_PARAMS(kernels, wsum)
ParameterizedTest(isa_row *row, kernels, wsum)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (size_t n = 0; n <= 70; n++)
        for (size_t off = 0; off < 2; off++)
            run_wsum(t, (size_t)rng_int(g, 1, 9), n, off, -100.0f, 100.0f, -2.0f, 2.0f);
    static const size_t big[] = {127, 128, 129, 255, 1000, 4097};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        run_wsum(t, ATTN_WSUM_MAX_PARTS, big[i], 1, -1e4f, 1e4f, 0.0f, 1.0f);
        run_wsum(t, 1, big[i], 0, -1.0f, 1.0f, 1.0f, 1.0f);
        run_wsum(t, 3, big[i], 0, -1.0f, 1.0f, 0.0f, 0.0f);
        run_wsum(t, 5, big[i], 0, -1e-30f, 1e-30f, 1e-10f, 1e-9f); /* products below FLT_MIN */
    }

    /* NaN and inf in x or y reach y as IEEE arithmetic says */
    for (size_t n = 1; n <= 40; n++) {
        float *y = xmalloc(n * 4), *x0 = xmalloc(n * 4), *x1 = xmalloc(n * 4);
        rng_fill(g, y, n, -1.0f, 1.0f);
        rng_fill(g, x0, n, -1.0f, 1.0f);
        rng_fill(g, x1, n, -1.0f, 1.0f);
        const size_t at = (size_t)rng_int(g, 0, (int64_t)n - 1);
        x1[at] = NAN;
        const size_t at2 = (size_t)rng_int(g, 0, (int64_t)n - 1);
        if (at2 != at)
            y[at2] = INFINITY;
        harness_context("wsum NaN at %zu, inf at %zu of %zu", at, at2, n);
        const float *x[2] = {x0, x1};
        const float w[2] = {0.5f, 0.25f};
        t->wsum(y, x, w, 2, n);
        CHECK(isnan(y[at]), "NaN in x did not reach y");
        if (at2 != at)
            CHECK(y[at2] == INFINITY, "inf in y became %g", (double)y[at2]);
        free(y), free(x0), free(x1);
    }
}

/* ------------------------------------------------------------ attn_merge */

enum { ROW_NORMAL, ROW_SOME_EMPTY, ROW_ALL_EMPTY, ROW_NAN_LSE, ROW_INF_LSE, ROW_NAN_OUT, ROW_KINDS };

/*
 * attn_merge of the same parts into an F16 and a BF16 out ([B][H][Lq][dv]
 * dense, misaligned by one element): f32 (the F32 out of the same table,
 * dense) rounded to nearest even bit for bit, the same lse bits as lse32,
 * nothing written outside, and within tol_out16 of the float64 merge.
 */
static void merge16(const attn_dsp *t, const attn_shape *shape, const attn_partial *parts,
                    int64_t n_parts, const float *f32, const float *lse32, const double *want,
                    const double *err)
{
    const int64_t dv = shape->v_dim ? shape->v_dim : shape->head_dim;
    const int64_t rows = shape->batch * shape->q_heads * shape->q_len;
    const size_t n = (size_t)(rows * dv);
    static const int32_t dtypes[] = {ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        buf bo, bl;
        unsigned char *o = buf_alloc(&bo, n * 2, 2);
        float *lse = buf_alloc(&bl, (size_t)rows * 4, 0);
        const uint16_t canary = canary16(dtypes[d]);
        for (size_t i = 0; i < n; i++)
            memcpy(o + 2 * i, &canary, 2);
        const attn_tensor to = {o, dtypes[d], shape->q_heads * shape->q_len * dv,
                                shape->q_len * dv, dv};
        attn_options opt = ATTN_OPTIONS_INIT;
        const attn_status st = attn_merge_with(t, shape, &opt, parts, n_parts, &to, lse);
        CHECK(st == ATTN_OK, "%s merge: status %d", ref_dtype_name(dtypes[d]), st);
        buf_check(&bo, "16-bit merge out");
        buf_check(&bl, "16-bit merge lse");
        expect_rounded16("16-bit merge out vs f32 merge out rounded", o, dv, dtypes[d], f32, dv,
                         (size_t)rows, (size_t)dv);
        expect_bits("lse of a 16-bit merge vs of an f32 merge", lse, lse32, (size_t)rows);
        float *got = xmalloc(n * 4 + 4);
        double *bound = xmalloc(n * sizeof(double) + 8);
        decode16(o, dtypes[d], got, n);
        for (size_t i = 0; i < n; i++)
            bound[i] = isfinite(want[i]) ? tol_out16(dtypes[d], want[i], err[i]) : err[i];
        expect_near("16-bit merge out vs float64", got, dv, want, bound, (size_t)rows, (size_t)dv);
        free(got);
        free(bound);
        buf_free(&bo);
        buf_free(&bl);
    }
}

static void merge_case(const attn_dsp *t, int64_t n_parts, int64_t batch, int64_t heads,
                       int64_t q_len, int64_t dv, float lse_spread, float lse_center)
{
    rng *g = harness_rng();
    const attn_dsp *sc = harness_scalar();
    const int64_t rows = batch * heads * q_len;
    const int64_t pad = rng_int(g, 0, 3);
    const int64_t rs = dv + pad; /* part row stride */
    attn_shape shape = {batch, heads, 1, q_len, 7, 5, dv};

    buf *pb = xcalloc0((size_t)n_parts, sizeof(buf));
    buf *lb = xcalloc0((size_t)n_parts, sizeof(buf));
    attn_partial *parts = xcalloc0((size_t)n_parts, sizeof(attn_partial));
    int *kind = xmalloc((size_t)rows * sizeof(int));
    for (int64_t r = 0; r < rows; r++)
        kind[r] = rng_int(g, 0, 2) ? ROW_NORMAL : (int)rng_int(g, 0, ROW_KINDS - 1);
    for (int64_t p = 0; p < n_parts; p++) {
        float *o = buf_alloc(&pb[p], (size_t)(rows * rs) * 4, 0);
        float *l = buf_alloc(&lb[p], (size_t)rows * 4, 0);
        rng_fill(g, o, (size_t)(rows * rs), -10.0f, 10.0f);
        for (int64_t r = 0; r < rows; r++)
            l[r] = lse_center + rng_float(g, -lse_spread, lse_spread);
        parts[p].out = (attn_tensor){o, ATTN_DTYPE_F32, heads * q_len * rs, q_len * rs, rs};
        parts[p].lse = l;
    }
    /* the special rows */
    for (int64_t r = 0; r < rows; r++) {
        const int64_t victim = rng_int(g, 0, n_parts - 1);
        for (int64_t p = 0; p < n_parts; p++) {
            float *l = (float *)parts[p].lse, *o = (float *)parts[p].out.data + r * rs;
            switch (kind[r]) {
            case ROW_SOME_EMPTY:
                if (p != victim && rng_int(g, 0, 1)) {
                    l[r] = -INFINITY;
                    for (int64_t c = 0; c < dv; c++)
                        o[c] = NAN; /* never read */
                }
                break;
            case ROW_ALL_EMPTY:
                l[r] = -INFINITY;
                o[0] = NAN;
                break;
            case ROW_NAN_LSE:
                if (p == victim)
                    l[r] = NAN;
                break;
            case ROW_INF_LSE:
                if (p == victim)
                    l[r] = INFINITY;
                break;
            case ROW_NAN_OUT:
                if (p == victim)
                    o[rng_int(g, 0, dv - 1)] = NAN;
                break;
            }
        }
    }

    /* reference */
    double *want = xmalloc((size_t)(rows * dv) * sizeof(double));
    double *werr = xmalloc((size_t)(rows * dv) * sizeof(double));
    double *wl = xmalloc((size_t)rows * sizeof(double)), *wle = xmalloc((size_t)rows * sizeof(double));
    double *lse_d = xmalloc((size_t)n_parts * sizeof(double));
    double **od = xmalloc((size_t)n_parts * sizeof(double *));
    for (int64_t p = 0; p < n_parts; p++)
        od[p] = xmalloc((size_t)dv * sizeof(double));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t p = 0; p < n_parts; p++) {
            lse_d[p] = parts[p].lse[r];
            for (int64_t c = 0; c < dv; c++)
                od[p][c] = ((const float *)parts[p].out.data)[r * rs + c];
        }
        ref_merge_row((size_t)n_parts, lse_d, NULL, (const double *const *)od, NULL, (size_t)dv,
                      want + r * dv, werr + r * dv, &wl[r], &wle[r]);
    }

    harness_context("attn_merge of %lld parts, B=%lld H=%lld Lq=%lld dv=%lld lse %g +- %g",
                    (long long)n_parts, (long long)batch, (long long)heads, (long long)q_len,
                    (long long)dv, (double)lse_center, (double)lse_spread);
    buf bo, bl;
    float *out = buf_alloc(&bo, (size_t)(rows * dv) * 4, 4);
    float *lse = buf_alloc(&bl, (size_t)rows * 4, 0);
    attn_tensor to = {out, ATTN_DTYPE_F32, heads * q_len * dv, q_len * dv, dv};
    attn_options opt = ATTN_OPTIONS_INIT;
    attn_status st = attn_merge_with(t, &shape, &opt, parts, n_parts, &to, lse);
    CHECK(st == ATTN_OK, "status %d", st);
    buf_check(&bo, "merge out");
    buf_check(&bl, "merge lse");
    expect_near("merged out vs float64", out, dv, want, werr, (size_t)rows, (size_t)dv);
    expect_near("merged lse vs float64", lse, rows, wl, wle, 1, (size_t)rows);

    float *first = xmalloc((size_t)(rows * dv) * 4), *first_l = xmalloc((size_t)rows * 4);
    memcpy(first, out, (size_t)(rows * dv) * 4);
    memcpy(first_l, lse, (size_t)rows * 4);
    if (!harness_is_scalar(t)) {
        double *pair = xmalloc((size_t)(rows * dv) * sizeof(double));
        for (int64_t i = 0; i < rows * dv; i++)
            pair[i] = TOL_PAIR(werr[i]);
        CHECK(attn_merge_with(sc, &shape, &opt, parts, n_parts, &to, lse) == ATTN_OK, "scalar");
        expect_near_f("merged out vs scalar", first, dv, out, dv, pair, (size_t)rows, (size_t)dv);
        free(pair);
    }
    /* any task order: the same bits */
    opt.parallel_for = harness_reverse_for;
    CHECK(attn_merge_with(t, &shape, &opt, parts, n_parts, &to, lse) == ATTN_OK, "reversed");
    expect_bits("merge, reverse task order", out, first, (size_t)(rows * dv));
    expect_bits("merge lse, reverse task order", lse, first_l, (size_t)rows);
    opt.parallel_for = NULL;
    merge16(t, &shape, parts, n_parts, first, first_l, want, werr);

    for (int64_t p = 0; p < n_parts; p++) {
        buf_free(&pb[p]);
        buf_free(&lb[p]);
        free(od[p]);
    }
    buf_free(&bo);
    buf_free(&bl);
    free(pb), free(lb), free(parts), free(kind), free(want), free(werr), free(wl), free(wle);
    free(lse_d), free(od), free(first), free(first_l);
}

HARNESS_ISA_PARAMS(split, merge)
ParameterizedTest(isa_row *row, split, merge, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    static const int64_t dims[] = {1, 3, 8, 16, 17, 33, 64, 128, 129};
    for (int rep = 0; rep < 30; rep++) {
        const int64_t n = rng_int(g, 1, 9);
        const int64_t dv = rng_pick(g, dims, sizeof dims / sizeof dims[0]);
        const float spread = rep % 3 == 0 ? 0.5f : rep % 3 == 1 ? 20.0f : 200.0f;
        const float center = rep % 4 == 0 ? 0.0f : rep % 4 == 1 ? 80.0f : rep % 4 == 2 ? -60.0f
                                                                                        : 5000.0f;
        merge_case(t, n, rng_int(g, 1, 2), rng_int(g, 1, 3), rng_int(g, 1, 70), dv, spread, center);
    }
    /* more parts than one wsum call takes (ATTN_WSUM_MAX_PARTS) */
    merge_case(t, ATTN_WSUM_MAX_PARTS + 9, 1, 2, 7, 33, 20.0f, 0.0f);
}

/* ------------------------------------------------------------ split-KV forward */

/* Online-softmax rescales of a forward with this table (tolerance.h R),
   as in test_ops.c; the split merge is covered by the same R. */
static int64_t forward_rescales(const attn_dsp *t, const workload *w)
{
    const attn_dsp *sc = harness_scalar();
    uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
    return (w->shape.kv_len + bk - 1) / bk + 1;
}

typedef struct captured {
    float *out, *stats[3];
} captured;

static void capture(const workload *w, captured *c)
{
    const size_t rows = (size_t)wl_rows(w);
    c->out = xmalloc(rows * (size_t)w->dv * 4);
    wl_gather(w, &w->out, w->dv, c->out);
    const float *src[3] = {w->stats.lse, w->stats.max_score, w->stats.entropy};
    for (int i = 0; i < 3; i++) {
        c->stats[i] = xmalloc(rows * 4);
        memcpy(c->stats[i], src[i], rows * 4);
    }
}

static void release(captured *c)
{
    free(c->out);
    for (int i = 0; i < 3; i++)
        free(c->stats[i]);
}

/* Whether attn.h's rule splits some sequence of w: one with query rows and,
   for kv_splits >= 2, more than 256 keys (two chunks of the 256-key grid);
   automatic, at least 2 x 1024 keys and fewer than 64 blocks of 64 of its
   query rows per KV head. */
static int some_sequence_splits(const workload *w, int32_t splits)
{
    const attn_shape *s = &w->shape;
    if (splits == 1) /* never */
        return 0;
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t lq = w->opt.q_lens ? w->opt.q_lens[b] : s->q_len;
        const int64_t lk = w->opt.kv_lens ? w->opt.kv_lens[b] : s->kv_len;
        if (lq <= 0)
            continue;
        if (splits >= 2 ? lk > 256
                        : lk >= 2048 &&
                              s->kv_heads * ((lq * (s->q_heads / s->kv_heads) + 63) / 64) < 64)
            return 1;
    }
    return 0;
}

/* Runs a forward with kv_splits on t (and on scalar) into a fresh
   workspace of exactly the queried size; checks it was used and bounded
   where a sequence splits (attn.h: each as it would alone).
   out16: a 16-bit twin of w->out (wl_out16) to write instead (got->out is
   then not captured). */
static void split_forward(const attn_dsp *t, workload *w, int32_t splits,
                          const attn_tensor *out16, captured *got)
{
    size_t need = 0, unsplit = 0;
    w->opt.kv_splits = 1; /* what the call asks for beside the split (wide rows) */
    attn_status st = attn_forward_workspace_size(&w->shape, &w->opt, &unsplit);
    CHECK(st == ATTN_OK, "workspace query status %d", st);
    w->opt.kv_splits = splits;
    st = attn_forward_workspace_size(&w->shape, &w->opt, &need);
    CHECK(st == ATTN_OK, "workspace query status %d", st);
    const int splitting = some_sequence_splits(w, splits);
    CHECK((need > unsplit) == splitting, "kv_splits %d on Lk=%lld: %s split planned", splits,
          (long long)w->shape.kv_len, need > unsplit ? "a" : "no");
    buf ws;
    unsigned char *mem = buf_alloc(&ws, need, 4); /* not 64-byte aligned, on purpose */
    w->opt.workspace = mem;
    w->opt.workspace_size = need;
    wl_poison_outputs(w);
    st = attn_forward_with(t, &w->shape, &w->opt, &w->q, &w->k, &w->v, out16 ? out16 : &w->out,
                           &w->stats);
    CHECK(st == ATTN_OK, "split forward status %d (%s)", st, attn_strerror(st));
    wl_check_outputs(w, 0, !out16, 1);
    buf_check(&ws, "workspace");
    size_t used = 0;
    for (size_t i = 0; i + 4 <= need; i += 4) {
        uint32_t word;
        memcpy(&word, mem + i, 4);
        used += word != BUF_CANARY;
    }
    CHECK(used > 0 || need == unsplit, "the split forward did not use its workspace");
    if (out16) {
        const size_t rows = (size_t)wl_rows(w);
        const float *src[3] = {w->stats.lse, w->stats.max_score, w->stats.entropy};
        got->out = NULL;
        for (int i = 0; i < 3; i++) {
            got->stats[i] = xmalloc(rows * 4);
            memcpy(got->stats[i], src[i], rows * 4);
        }
    } else {
        capture(w, got);
    }
    w->opt.workspace = NULL;
    w->opt.workspace_size = 0;
    buf_free(&ws);
}

static void check_split(const attn_dsp *t, unsigned features, int32_t splits)
{
    const int is_scalar = harness_is_scalar(t);
    workload w;
    wl_make(&w, features);
    harness_context("split forward kv_splits=%d on %s", splits, wl_describe(&w));
    ref_attn r;
    ref_attn_compute(&r, &w.shape, &w.opt, &w.q, &w.k, &w.v, forward_rescales(t, &w));
    captured got, scalar;
    split_forward(t, &w, splits, NULL, &got);
    if (!is_scalar)
        split_forward(harness_scalar(), &w, splits, NULL, &scalar);
    const size_t rows = (size_t)wl_rows(&w);
    expect_near_and_scalar("split out", got.out, is_scalar ? NULL : scalar.out, r.o, r.o_err, rows,
                           (size_t)w.dv);
    expect_near_and_scalar("split lse", got.stats[0], is_scalar ? NULL : scalar.stats[0], r.lse,
                           r.lse_err, 1, rows);
    expect_near_and_scalar("split max_score", got.stats[1], is_scalar ? NULL : scalar.stats[1],
                           r.max, r.max_err, 1, rows);
    expect_near_and_scalar("split entropy", got.stats[2], is_scalar ? NULL : scalar.stats[2], r.ent,
                           r.ent_err, 1, rows);
    /* the same split into F16 and BF16 outs */
    static const int32_t dtypes[] = {ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        buf b16;
        const attn_tensor o16 = wl_out16(&w, dtypes[d], &b16);
        captured half;
        split_forward(t, &w, splits, &o16, &half);
        wl_check_out16(&w, &b16, &o16, got.out, r.o, r.o_err);
        for (int k = 0; k < 3; k++)
            expect_bits("split stats with a 16-bit out vs an f32 out", half.stats[k],
                        got.stats[k], rows);
        release(&half);
        buf_free(&b16);
    }
    release(&got);
    if (!is_scalar)
        release(&scalar);
    ref_attn_free(&r);
    wl_free(&w);
}

static const unsigned split_specs[] = {
    WL_LONG_KV,
    WL_LONG_KV | WL_CAUSAL,
    WL_LONG_KV | WL_DECODE | WL_MQA,
    WL_LONG_KV | WL_DECODE | WL_GQA | WL_CAUSAL | WL_LENS,
    WL_LONG_KV | WL_WINDOW | WL_CAUSAL | WL_LENS,
    WL_LONG_KV | WL_WINDOW,
    WL_LONG_KV | WL_GQA | WL_BIAS | WL_MASK | WL_SOFTCAP,
    WL_LONG_KV | WL_F16 | WL_BLHD | WL_PAD | WL_VDIM,
    WL_LONG_KV | WL_BF16 | WL_DECODE | WL_OFFSET,
    WL_LONG_KV | WL_BIG_HEAD | WL_CAUSAL | WL_VDIM0,
    WL_LONG_KV | WL_MQA | WL_LENS | WL_SCALE,
    WL_LONG_KV | WL_SINKS | WL_CAUSAL,
    WL_LONG_KV | WL_DECODE | WL_MQA | WL_SINKS | WL_ALIBI | WL_CAUSAL,
    WL_LONG_KV | WL_ALIBI | WL_WINDOW | WL_WINDOW_R | WL_LENS,
    /* the chunks accumulate in the workspace, the merge in the output */
    WL_LONG_KV | WL_DECODE | WL_WIDE,
    WL_LONG_KV | WL_DECODE | WL_WIDE | WL_CAUSAL | WL_LENS | WL_PAD | WL_SINKS,
};
#define N_SPLIT_SPECS (sizeof split_specs / sizeof split_specs[0])

HARNESS_ISA_PARAMS(split, forward)
ParameterizedTest(isa_row *row, split, forward, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    static const int32_t splits[] = {2, 3, 5, 64};
    for (size_t i = 0; i < N_SPLIT_SPECS; i++)
        for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++)
            check_split(t, split_specs[i], splits[s]);
    /* more chunks than one wsum call takes (ATTN_WSUM_MAX_PARTS): the merge
       goes in several calls */
    check_split(t, WL_LONG_KV | WL_DECODE | WL_MANY_CHUNKS | WL_MQA | WL_CAUSAL, 64);
    /* automatic: decode on >= 2048 keys of one KV head splits by itself */
    for (int rep = 0; rep < 3; rep++)
        check_split(t, WL_LONG_KV | WL_DECODE | WL_MQA | (rep ? WL_CAUSAL | WL_LENS : 0u), 0);
    /* unsplit, wide rows accumulate in the output rows */
    check_split(t, WL_LONG_KV | WL_DECODE | WL_WIDE | WL_PAD | WL_LENS, 1);
}

/* Without a workspace the automatic split falls back to the unsplit run:
   the same bits as kv_splits = 1. */
HARNESS_ISA_PARAMS(split, fallback)
ParameterizedTest(isa_row *row, split, fallback, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    for (int rep = 0; rep < 3; rep++) {
        workload w;
        wl_make(&w, WL_LONG_KV | WL_DECODE | WL_MQA | WL_CAUSAL);
        harness_context("split fallback on %s", wl_describe(&w));
        size_t need = 0;
        CHECK(attn_forward_workspace_size(&w.shape, &w.opt, &need) == ATTN_OK && need > 0,
              "automatic split not planned");
        captured a, b, c;
        w.opt.kv_splits = 1;
        wl_poison_outputs(&w);
        CHECK(attn_forward_with(t, &w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) ==
                  ATTN_OK, "unsplit");
        capture(&w, &a);
        w.opt.kv_splits = 0; /* no workspace */
        wl_poison_outputs(&w);
        CHECK(attn_forward_with(t, &w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) ==
                  ATTN_OK, "automatic without workspace");
        capture(&w, &b);
        unsigned char small[64];
        w.opt.workspace = small; /* too small */
        w.opt.workspace_size = sizeof small;
        wl_poison_outputs(&w);
        CHECK(attn_forward_with(t, &w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) ==
                  ATTN_OK, "automatic with a small workspace");
        capture(&w, &c);
        const size_t rows = (size_t)wl_rows(&w);
        expect_bits("no workspace vs kv_splits 1", b.out, a.out, rows * (size_t)w.dv);
        expect_bits("small workspace vs kv_splits 1", c.out, a.out, rows * (size_t)w.dv);
        for (int s = 0; s < 3; s++)
            expect_bits("stats, fallback", b.stats[s], a.stats[s], rows);
        release(&a);
        release(&b);
        release(&c);
        wl_free(&w);
    }
}

HARNESS_ISA_PARAMS(split, threads)
ParameterizedTest(isa_row *row, split, threads, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    static const unsigned which[] = {WL_LONG_KV | WL_DECODE | WL_MQA,
                                     WL_LONG_KV | WL_GQA | WL_CAUSAL | WL_LENS,
                                     WL_LONG_KV | WL_WINDOW | WL_F16 | WL_BLHD};
    attn_threadpool *pool;
    CHECK(attn_threadpool_create(3, &pool) == ATTN_OK, "pool");
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        workload w;
        wl_make(&w, which[i]);
        harness_context("split forward thread invariance on %s", wl_describe(&w));
        captured serial, pooled, reversed;
        split_forward(t, &w, 7, NULL, &serial);
        w.opt.parallel_for = attn_threadpool_parallel_for;
        w.opt.parallel_ctx = pool;
        split_forward(t, &w, 7, NULL, &pooled);
        w.opt.parallel_for = harness_reverse_for;
        split_forward(t, &w, 7, NULL, &reversed);
        const size_t rows = (size_t)wl_rows(&w);
        expect_bits("pool of 3 vs serial", pooled.out, serial.out, rows * (size_t)w.dv);
        expect_bits("reverse vs serial", reversed.out, serial.out, rows * (size_t)w.dv);
        for (int s = 0; s < 3; s++) {
            expect_bits("stats, pool of 3", pooled.stats[s], serial.stats[s], rows);
            expect_bits("stats, reverse", reversed.stats[s], serial.stats[s], rows);
        }
        release(&serial);
        release(&pooled);
        release(&reversed);
        wl_free(&w);
    }
    attn_threadpool_destroy(pool);
}

/* ------------------------------------------------------------ shards, global positions */

/* A view of columns [c0, ...) of a [b][h][q][k] tensor (bias, mask). */
static attn_tensor column_view(const attn_tensor *t, int64_t c0)
{
    attn_tensor v = *t;
    v.data = (char *)t->data + c0 * (int64_t)ref_dtype_size(t->dtype);
    return v;
}

/* A view of rows [r0, ...) of K or V. */
static attn_tensor row_view(const attn_tensor *t, int64_t r0)
{
    attn_tensor v = *t;
    v.data = (char *)t->data + r0 * t->row_stride * (int64_t)ref_dtype_size(t->dtype);
    return v;
}

static void check_shards(const attn_dsp *t, unsigned features)
{
    rng *g = harness_rng();
    workload w;
    wl_make(&w, features);
    const attn_shape full = w.shape;
    const int64_t rows = wl_rows(&w), dv = w.dv, lk = full.kv_len;
    harness_context("shards on %s", wl_describe(&w));
    ref_attn whole;
    ref_attn_compute(&whole, &full, &w.opt, &w.q, &w.k, &w.v, forward_rescales(t, &w));

    /* cut points */
    int64_t n = rng_int(g, 2, 5);
    if (n > lk)
        n = lk;
    int64_t cut[6];
    cut[0] = 0;
    cut[n] = lk;
    for (int64_t i = 1; i < n; i++) /* strictly increasing, every shard >= 1 key */
        cut[i] = cut[i - 1] + 1 + rng_int(g, 0, (lk - cut[i - 1]) - (n - i) - 1);

    /* global positions: the whole call's (bottom-right aligned) plus a
       common offset, which changes nothing */
    const int64_t base = rng_int(g, full.q_len, full.q_len + 1000);
    int64_t q_pos[WL_MAX_BATCH], k_pos[WL_MAX_BATCH];
    int32_t kv_lens[WL_MAX_BATCH];
    for (int64_t b = 0; b < full.batch; b++) {
        const int64_t lq = w.opt.q_lens ? w.opt.q_lens[b] : full.q_len;
        const int64_t lkb = w.opt.kv_lens ? w.opt.kv_lens[b] : lk;
        q_pos[b] = base + lkb - lq;
    }

    attn_partial parts[5];
    buf ob[5], lb[5];
    ref_attn sref[5];
    for (int64_t s = 0; s < n; s++) {
        attn_shape sh = full;
        sh.kv_len = cut[s + 1] - cut[s];
        attn_options o = w.opt;
        for (int64_t b = 0; b < full.batch; b++) {
            k_pos[b] = base + cut[s];
            if (w.opt.kv_lens) {
                int64_t v = w.opt.kv_lens[b] - cut[s];
                kv_lens[b] = (int32_t)(v < 0 ? 0 : v > sh.kv_len ? sh.kv_len : v);
            }
        }
        o.q_pos = q_pos;
        o.k_pos = k_pos;
        if (s > 0)
            o.sinks = NULL; /* one more entry of the whole row: one shard has it */
        if (w.opt.kv_lens)
            o.kv_lens = kv_lens;
        attn_tensor mask, bias;
        if (w.opt.mask) {
            mask = column_view(w.opt.mask, cut[s]);
            o.mask = &mask;
        }
        if (w.opt.bias) {
            bias = column_view(w.opt.bias, cut[s]);
            o.bias = &bias;
        }
        attn_tensor k = row_view(&w.k, cut[s]), v = row_view(&w.v, cut[s]);
        float *out = buf_alloc(&ob[s], (size_t)(rows * dv) * 4, 0);
        float *lse = buf_alloc(&lb[s], (size_t)rows * 4, 0);
        attn_tensor to = {out, ATTN_DTYPE_F32, full.q_heads * full.q_len * dv, full.q_len * dv,
                          dv};
        attn_row_stats st = {lse, NULL, NULL};
        attn_status status = attn_forward_with(t, &sh, &o, &w.q, &k, &v, &to, &st);
        CHECK(status == ATTN_OK, "shard %lld status %d", (long long)s, status);
        parts[s] = (attn_partial){to, lse};
        const int64_t sk_len = sh.kv_len;
        const uint32_t bk = t->block_k < harness_scalar()->block_k ? t->block_k
                                                                   : harness_scalar()->block_k;
        ref_attn_compute(&sref[s], &sh, &o, &w.q, &k, &v, (sk_len + bk - 1) / bk + 1);
    }

    buf bo, bl;
    float *out = buf_alloc(&bo, (size_t)(rows * dv) * 4, 0);
    float *lse = buf_alloc(&bl, (size_t)rows * 4, 0);
    attn_tensor to = {out, ATTN_DTYPE_F32, full.q_heads * full.q_len * dv, full.q_len * dv, dv};
    attn_options mo = ATTN_OPTIONS_INIT;
    attn_status status = attn_merge_with(t, &full, &mo, parts, n, &to, lse);
    CHECK(status == ATTN_OK, "merge status %d", status);

    /* bound: the merge of the shards' reference results with their bounds */
    double *bound = xmalloc((size_t)(rows * dv) * sizeof(double));
    double *lbound = xmalloc((size_t)rows * sizeof(double));
    double *merged = xmalloc((size_t)dv * sizeof(double));
    for (int64_t r = 0; r < rows; r++) {
        double ls[5], le[5], lm;
        const double *os[5], *oe[5];
        for (int64_t s = 0; s < n; s++) {
            ls[s] = sref[s].lse[r];
            le[s] = sref[s].lse_err[r];
            os[s] = sref[s].o + r * dv;
            oe[s] = sref[s].o_err + r * dv;
        }
        ref_merge_row((size_t)n, ls, le, os, oe, (size_t)dv, merged, bound + r * dv, &lm,
                      &lbound[r]);
    }
    expect_near("sharded + merged out vs unsharded float64", out, dv, whole.o, bound,
                (size_t)rows, (size_t)dv);
    expect_near("sharded + merged lse vs unsharded float64", lse, rows, whole.lse, lbound, 1,
                (size_t)rows);
    buf_check(&bo, "merged out");
    buf_check(&bl, "merged lse");
    merge16(t, &full, parts, n, out, lse, whole.o, bound);

    for (int64_t s = 0; s < n; s++) {
        buf_free(&ob[s]);
        buf_free(&lb[s]);
        ref_attn_free(&sref[s]);
    }
    buf_free(&bo);
    buf_free(&bl);
    free(bound);
    free(lbound);
    free(merged);
    ref_attn_free(&whole);
    wl_free(&w);
}

HARNESS_ISA_PARAMS(split, shards)
ParameterizedTest(isa_row *row, split, shards, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    static const unsigned which[] = {
        WL_CAUSAL,
        WL_CAUSAL | WL_LENS,
        WL_CAUSAL | WL_Q_SHORT,
        WL_CAUSAL | WL_Q_LONG,
        WL_WINDOW,
        WL_WINDOW | WL_CAUSAL,
        WL_WINDOW | WL_CAUSAL | WL_LENS | WL_Q_SHORT,
        WL_CAUSAL | WL_DECODE | WL_GQA,
        WL_LONG_KV | WL_CAUSAL | WL_WINDOW,
        WL_LONG_KV | WL_DECODE | WL_MQA | WL_CAUSAL | WL_LENS,
        WL_BIAS | WL_MASK | WL_CAUSAL | WL_SOFTCAP,
        WL_BLHD | WL_PAD | WL_F16 | WL_CAUSAL,
        WL_SINKS | WL_CAUSAL | WL_LENS,
        WL_ALIBI | WL_CAUSAL | WL_Q_SHORT,
        WL_ALIBI | WL_SINKS | WL_WINDOW | WL_WINDOW_R,
        WL_LONG_KV | WL_DECODE | WL_SINKS | WL_ALIBI | WL_CAUSAL,
        0,
    };
    for (int rep = 0; rep < 2; rep++)
        for (size_t i = 0; i < sizeof which / sizeof which[0]; i++)
            check_shards(t, which[i]);
}

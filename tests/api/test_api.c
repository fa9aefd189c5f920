/* SPDX-License-Identifier: MIT */
/*
 * Public API semantics on the active ISA (fully masked rows, decode, padded
 * rows, sliding windows), dispatch, attn_strerror and the version.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* ATTN_VERSION_STRING, HAVE_<ISA> */
#include "harness.h"
#include "isa_list.h"
#include "ref/ref.h"
#include "workload.h"

/* ------------------------------------------------------------ semantics */

/* Row r = (b, h, i) of the workload sees no key at all. */
static int row_fully_masked(const workload *w, int64_t row)
{
    const attn_shape *s = &w->shape;
    const int64_t i = row % s->q_len, h = row / s->q_len % s->q_heads,
                  b = row / s->q_len / s->q_heads;
    for (int64_t j = 0; j < s->kv_len; j++)
        if (ref_visible(s, &w->opt, b, h, i, j) &&
            !(w->opt.bias && isinf(ref_tensor_get(w->opt.bias, b, h, i, j))))
            return 0;
    return 1;
}

/*
 * Fully masked rows: weights 0, output 0, lse = max_score = -inf,
 * entropy 0, scores all -inf; and no NaN anywhere (finite inputs).
 */
Test(semantics, fully_masked_rows_never_nan)
{
    harness_begin_plain("semantics");
    rng *g = harness_rng();
    int seen = 0;
    for (int rep = 0; rep < 40; rep++) {
        unsigned f = WL_LENS | WL_MASK | (rep & 1 ? WL_CAUSAL : 0) | (rep & 2 ? WL_WINDOW : 0) |
                     (rep & 4 ? WL_Q_LONG : 0) | (rep & 8 ? WL_GQA : 0) | (rep & 16 ? WL_BIAS : 0);
        workload w;
        wl_make(&w, f);
        const attn_shape *s = &w.shape;
        /* make some mask rows all zero (the mask may be broadcast) */
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = 0; i < s->q_len; i++)
                    if (rng_int(g, 0, 5) == 0)
                        for (int64_t j = 0; j < s->kv_len; j++)
                            *(uint8_t *)wl_at(&w.mask, b, h, i, j) = 0;
        if (w.opt.bias) /* finite bias only: -inf bias rows have their own test */
            for (int64_t b = 0; b < s->batch; b++)
                for (int64_t h = 0; h < s->q_heads; h++)
                    for (int64_t i = 0; i < s->q_len; i++)
                        for (int64_t j = 0; j < s->kv_len; j++)
                            if (isinf(ref_tensor_get(&w.bias, b, h, i, j)))
                                wl_set(&w.bias, b, h, i, j, 1.0f);
        harness_context("%s", wl_describe(&w));
        const int64_t rows = wl_rows(&w), lk = s->kv_len, dv = w.dv;
        float *sc = xmalloc((size_t)(rows * lk) * 4), *wt = xmalloc((size_t)(rows * lk) * 4);
        float *out = xmalloc((size_t)(rows * dv) * 4);

        wl_poison_outputs(&w);
        CHECK(attn_scores(s, &w.opt, &w.q, &w.k, &w.scores) == ATTN_OK, "attn_scores failed");
        wl_gather(&w, &w.scores, lk, sc);
        wl_poison_outputs(&w);
        CHECK(attn_weights(s, &w.opt, &w.q, &w.k, &w.scores, &w.stats) == ATTN_OK,
              "attn_weights failed");
        wl_gather(&w, &w.scores, lk, wt);
        float *wstats = xmalloc((size_t)rows * 3 * 4);
        memcpy(wstats, w.stats.lse, (size_t)rows * 4);
        memcpy(wstats + rows, w.stats.max_score, (size_t)rows * 4);
        memcpy(wstats + 2 * rows, w.stats.entropy, (size_t)rows * 4);
        wl_poison_outputs(&w);
        CHECK(attn_forward(s, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) == ATTN_OK,
              "attn_forward failed");
        wl_gather(&w, &w.out, dv, out);

        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 0; j < lk; j++) {
                CHECK(!isnan(sc[r * lk + j]), "score [%lld][%lld] is NaN", (long long)r,
                      (long long)j);
                CHECK(!isnan(wt[r * lk + j]), "weight [%lld][%lld] is NaN", (long long)r,
                      (long long)j);
            }
            for (int64_t t = 0; t < dv; t++)
                CHECK(!isnan(out[r * dv + t]), "out [%lld][%lld] is NaN", (long long)r,
                      (long long)t);
            const float fst[3] = {wstats[r], wstats[rows + r], wstats[2 * rows + r]};
            const float ost[3] = {w.stats.lse[r], w.stats.max_score[r], w.stats.entropy[r]};
            for (int k = 0; k < 3; k++)
                CHECK(!isnan(fst[k]) && !isnan(ost[k]), "stat %d of row %lld is NaN", k,
                      (long long)r);
            if (!row_fully_masked(&w, r))
                continue;
            seen++;
            for (int64_t j = 0; j < lk; j++) {
                CHECK(sc[r * lk + j] == -INFINITY, "fully masked row %lld: score %g", (long long)r,
                      (double)sc[r * lk + j]);
                CHECK(wt[r * lk + j] == 0.0f, "fully masked row %lld: weight %g", (long long)r,
                      (double)wt[r * lk + j]);
            }
            for (int64_t t = 0; t < dv; t++)
                CHECK(out[r * dv + t] == 0.0f, "fully masked row %lld: out %g", (long long)r,
                      (double)out[r * dv + t]);
            for (int k = 0; k < 2; k++) {
                CHECK(fst[k] == -INFINITY, "weights: fully masked row %lld: stat %d = %g",
                      (long long)r, k, (double)fst[k]);
                CHECK(ost[k] == -INFINITY, "forward: fully masked row %lld: stat %d = %g",
                      (long long)r, k, (double)ost[k]);
            }
            CHECK(fst[2] == 0.0f && ost[2] == 0.0f, "fully masked row %lld: entropy %g / %g",
                  (long long)r, (double)fst[2], (double)ost[2]);
        }
        free(wstats);
        free(sc);
        free(wt);
        free(out);
        wl_free(&w);
    }
    CHECK(seen > 0, "no fully masked row was generated");
}

/* A row whose bias is all -inf (a float mask) behaves as fully masked. */
Test(semantics, minus_inf_bias_rows)
{
    harness_begin_plain("semantics");
    workload w;
    wl_make(&w, 0);
    attn_shape *s = &w.shape;
    /* a dense bias with row 0 of every head all -inf */
    static float bias_data[2 * 4 * 129 * 129];
    const int64_t lk = s->kv_len;
    attn_tensor bias = {bias_data, ATTN_DTYPE_F32, s->q_heads * s->q_len * lk, s->q_len * lk, lk};
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++)
                for (int64_t j = 0; j < lk; j++)
                    *(float *)ref_tensor_at(&bias, b, h, i, j) = i == 0 ? -INFINITY : 0.5f;
    w.opt.bias = &bias;
    harness_context("%s", wl_describe(&w));
    CHECK(attn_forward(s, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) == ATTN_OK, "forward");
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++) {
            const float *o = wl_at(&w.out, b, h, 0, 0);
            for (int64_t t = 0; t < w.dv; t++)
                CHECK(o[t] == 0.0f, "out[%lld] = %g", (long long)t, (double)o[t]);
            const int64_t r = (b * s->q_heads + h) * s->q_len;
            CHECK(w.stats.lse[r] == -INFINITY && w.stats.max_score[r] == -INFINITY &&
                      w.stats.entropy[r] == 0.0f,
                  "stats %g %g %g", (double)w.stats.lse[r], (double)w.stats.max_score[r],
                  (double)w.stats.entropy[r]);
        }
    CHECK(attn_weights(s, &w.opt, &w.q, &w.k, &w.scores, &w.stats) == ATTN_OK, "weights");
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++) {
            const float *p = wl_at(&w.scores, b, h, 0, 0);
            for (int64_t j = 0; j < lk; j++)
                CHECK(p[j] == 0.0f, "weight[%lld] = %g", (long long)j, (double)p[j]);
        }
    wl_free(&w);
}

/* Decode (q_len 1) with ATTN_CAUSAL sees every valid key: same as without. */
Test(semantics, decode_sees_every_key)
{
    harness_begin_plain("semantics");
    for (int rep = 0; rep < 10; rep++) {
        workload w;
        wl_make(&w, WL_DECODE | (rep & 1 ? WL_GQA : 0) | (rep & 2 ? WL_LENS : 0));
        harness_context("%s", wl_describe(&w));
        const int64_t rows = wl_rows(&w), lk = w.shape.kv_len;
        float *a = xmalloc((size_t)(rows * lk) * 4), *b = xmalloc((size_t)(rows * lk) * 4);
        float *oa = xmalloc((size_t)(rows * w.dv) * 4), *ob = xmalloc((size_t)(rows * w.dv) * 4);
        CHECK(attn_weights(&w.shape, &w.opt, &w.q, &w.k, &w.scores, NULL) == ATTN_OK, "weights");
        wl_gather(&w, &w.scores, lk, a);
        CHECK(attn_forward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, NULL) == ATTN_OK, "fwd");
        wl_gather(&w, &w.out, w.dv, oa);
        w.opt.flags |= ATTN_CAUSAL;
        CHECK(attn_weights(&w.shape, &w.opt, &w.q, &w.k, &w.scores, NULL) == ATTN_OK, "weights");
        wl_gather(&w, &w.scores, lk, b);
        CHECK(attn_forward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, NULL) == ATTN_OK, "fwd");
        wl_gather(&w, &w.out, w.dv, ob);
        expect_bits("causal decode weights vs non-causal", b, a, (size_t)(rows * lk));
        expect_bits("causal decode output vs non-causal", ob, oa, (size_t)(rows * w.dv));
        for (int64_t r = 0; r < rows; r++) {
            const int64_t bb = r / w.shape.q_heads;
            const int64_t valid = w.opt.kv_lens ? w.kv_lens[bb] : lk;
            const int64_t qvalid = w.opt.q_lens ? w.q_lens[bb] : 1;
            for (int64_t j = 0; j < lk; j++)
                CHECK((b[r * lk + j] > 0.0f) == (j < valid && qvalid > 0),
                      "decode row %lld key %lld: weight %g (valid keys %lld)", (long long)r,
                      (long long)j, (double)b[r * lk + j], (long long)valid);
        }
        free(a);
        free(b);
        free(oa);
        free(ob);
        wl_free(&w);
    }
}

/* Query rows beyond q_lens[b] give zeros and (-inf, -inf, 0). */
Test(semantics, padded_query_rows_are_zero)
{
    harness_begin_plain("semantics");
    for (int rep = 0; rep < 10; rep++) {
        workload w;
        wl_make(&w, WL_LENS | (rep & 1 ? WL_CAUSAL : 0));
        const attn_shape *s = &w.shape;
        harness_context("%s", wl_describe(&w));
        CHECK(attn_forward(s, &w.opt, &w.q, &w.k, &w.v, &w.out, &w.stats) == ATTN_OK, "fwd");
        float *o_stats = xmalloc((size_t)wl_rows(&w) * 3 * 4);
        for (int64_t r = 0; r < wl_rows(&w); r++) {
            o_stats[3 * r] = w.stats.lse[r];
            o_stats[3 * r + 1] = w.stats.max_score[r];
            o_stats[3 * r + 2] = w.stats.entropy[r];
        }
        CHECK(attn_weights(s, &w.opt, &w.q, &w.k, &w.scores, &w.stats) == ATTN_OK, "weights");
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = w.q_lens[b]; i < s->q_len; i++) {
                    const int64_t r = (b * s->q_heads + h) * s->q_len + i;
                    const float *o = wl_at(&w.out, b, h, i, 0), *p = wl_at(&w.scores, b, h, i, 0);
                    for (int64_t t = 0; t < w.dv; t++)
                        CHECK(o[t] == 0.0f, "padded row %lld out %g", (long long)i, (double)o[t]);
                    for (int64_t j = 0; j < s->kv_len; j++)
                        CHECK(p[j] == 0.0f, "padded row %lld weight %g", (long long)i,
                              (double)p[j]);
                    CHECK(o_stats[3 * r] == -INFINITY && o_stats[3 * r + 1] == -INFINITY &&
                              o_stats[3 * r + 2] == 0.0f,
                          "padded row %lld forward stats", (long long)i);
                    CHECK(w.stats.lse[r] == -INFINITY && w.stats.max_score[r] == -INFINITY &&
                              w.stats.entropy[r] == 0.0f,
                          "padded row %lld weights stats", (long long)i);
                }
        free(o_stats);
        wl_free(&w);
    }
}

/* window W with ATTN_CAUSAL: exactly the W keys up to the aligned position. */
Test(semantics, causal_window_is_sliding_window)
{
    harness_begin_plain("semantics");
    rng *g = harness_rng();
    for (int rep = 0; rep < 30; rep++) {
        const int64_t lk = rng_int(g, 1, 40), lq = rng_int(g, 1, 40), win = rng_int(g, 1, 12);
        float *q = xmalloc((size_t)(lq * 4) * 4), *k = xmalloc((size_t)(lk * 4) * 4);
        float *s = xmalloc((size_t)(lq * lk) * 4);
        rng_fill(g, q, (size_t)lq * 4, -1.0f, 1.0f);
        rng_fill(g, k, (size_t)lk * 4, -1.0f, 1.0f);
        attn_shape shape = {1, 1, 1, lq, lk, 4, 0};
        attn_tensor tq = {q, ATTN_DTYPE_F32, 0, 0, 4}, tk = {k, ATTN_DTYPE_F32, 0, 0, 4};
        attn_tensor ts = {s, ATTN_DTYPE_F32, lq * lk, lq * lk, lk};
        attn_options opt = ATTN_OPTIONS_INIT;
        opt.flags = ATTN_CAUSAL;
        opt.window = win;
        harness_context("Lq=%lld Lk=%lld W=%lld", (long long)lq, (long long)lk, (long long)win);
        CHECK(attn_scores(&shape, &opt, &tq, &tk, &ts) == ATTN_OK, "attn_scores");
        for (int64_t i = 0; i < lq; i++) {
            const int64_t pos = i + lk - lq; /* the query's aligned position */
            int64_t count = 0;
            for (int64_t j = 0; j < lk; j++) {
                const int want = j <= pos && j > pos - win;
                count += want;
                CHECK(isfinite(s[i * lk + j]) == want, "row %lld key %lld: score %g",
                      (long long)i, (long long)j, (double)s[i * lk + j]);
            }
            const int64_t expect = pos < 0 ? 0 : pos + 1 < win ? pos + 1 : win;
            CHECK(count == expect, "row %lld sees %lld keys, not %lld", (long long)i,
                  (long long)count, (long long)expect);
        }
        free(q);
        free(k);
        free(s);
    }
}

/* The public entry points run the active table: same bits as *_with. */
Test(semantics, public_api_uses_active_table)
{
    harness_begin_plain("semantics");
    workload w;
    wl_make(&w, WL_CAUSAL | WL_LENS | WL_GQA);
    harness_context("%s", wl_describe(&w));
    const int64_t rows = wl_rows(&w);
    float *a = xmalloc((size_t)(rows * w.dv) * 4), *b = xmalloc((size_t)(rows * w.dv) * 4);
    CHECK(attn_forward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, NULL) == ATTN_OK, "fwd");
    wl_gather(&w, &w.out, w.dv, a);
    CHECK(attn_forward_with(attn_dsp_for_isa(attn_isa_active()), &w.shape, &w.opt, &w.q, &w.k,
                            &w.v, &w.out, NULL) == ATTN_OK,
          "fwd_with");
    wl_gather(&w, &w.out, w.dv, b);
    expect_bits("attn_forward vs attn_forward_with(active)", a, b, (size_t)(rows * w.dv));
    free(a);
    free(b);
    wl_free(&w);
}

/* ------------------------------------------------------------ dispatch */

/* Every registry line gives its attn_isa value its name, and the names are
   distinct; "auto" and out-of-range values have their fixed names. */
Test(dispatch, isa_names)
{
#define NAME_CHECK(ID, nm, cpu, init, base, have)                                            \
    cr_assert_str_eq(attn_isa_name(ATTN_ISA_##ID), #nm);
    ATTN_ISA_LIST(NAME_CHECK)
#undef NAME_CHECK
    cr_assert_str_eq(attn_isa_name(ATTN_ISA_AUTO), "auto");
    for (int a = ATTN_ISA_SCALAR; a < ATTN_ISA_COUNT; a++)
        for (int b = ATTN_ISA_SCALAR; b < a; b++)
            cr_assert_str_neq(attn_isa_name((attn_isa)a), attn_isa_name((attn_isa)b));
    cr_assert_str_eq(attn_isa_name((attn_isa)ATTN_ISA_COUNT), "unknown");
    cr_assert_str_eq(attn_isa_name((attn_isa)-1), "unknown");
}

Test(dispatch, available_matches_tables)
{
    unsetenv("ATTN_ISA");
    cr_assert_eq(attn_isa_available(ATTN_ISA_SCALAR), 1);
    cr_assert_eq(attn_isa_available(ATTN_ISA_AUTO), 1);
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) {
        const attn_dsp *t = attn_dsp_for_isa((attn_isa)isa);
        cr_assert_eq(attn_isa_available((attn_isa)isa), t != NULL, "%s",
                     attn_isa_name((attn_isa)isa));
        /* available implies compiled in, and a table knows its own ISA */
        if (t) {
            cr_assert(attn_isa_built((attn_isa)isa), "%s", attn_isa_name((attn_isa)isa));
            cr_assert_eq(t->isa, (attn_isa)isa);
            cr_assert_str_eq(t->isa_name, attn_isa_name((attn_isa)isa));
        }
    }
    cr_assert_eq(attn_isa_available((attn_isa)ATTN_ISA_COUNT), 0);
    cr_assert_eq(attn_isa_available((attn_isa)42), 0);
    cr_assert(attn_isa_available(attn_isa_active()));
}

/* attn_isa_support's bits against attn_isa_built and attn_isa_available,
   and against the CPU bits they come from (src/cpu.c). */
Test(dispatch, support_bits)
{
    const unsigned all = ATTN_SUPPORT_BUILT | ATTN_SUPPORT_CPU | ATTN_SUPPORT_OS;
    cr_assert_eq(attn_isa_support(ATTN_ISA_AUTO), all);
    cr_assert_eq(attn_isa_support(ATTN_ISA_SCALAR), all);
    cr_assert_eq(attn_isa_support((attn_isa)ATTN_ISA_COUNT), 0u);
    cr_assert_eq(attn_isa_support((attn_isa)-1), 0u);
    const unsigned cpu = attn_cpu_detect();
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) {
        const unsigned b = attn_isa_support((attn_isa)isa);
        const char *name = attn_isa_name((attn_isa)isa);
        cr_assert_eq((b & ATTN_SUPPORT_BUILT) != 0, attn_isa_built((attn_isa)isa), "%s", name);
        if (b & ATTN_SUPPORT_OS)
            cr_assert(b & ATTN_SUPPORT_CPU, "%s: granted without the CPU", name);
        if (attn_isa_available((attn_isa)isa))
            cr_assert_eq(b, all, "%s", name);
    }
    /* AMX: CPU is the hardware bit, OS the grant */
    const unsigned amx = attn_isa_support(ATTN_ISA_AMX);
    cr_assert_eq((amx & ATTN_SUPPORT_CPU) != 0, (cpu & ATTN_CPU_AMX_HW) != 0);
    cr_assert_eq((amx & ATTN_SUPPORT_OS) != 0, (cpu & ATTN_CPU_AMX) != 0);
    if (cpu & ATTN_CPU_AMX_HW) /* the table's vector code needs them */
        cr_assert((cpu & ATTN_CPU_AVX512_BF16) && (cpu & ATTN_CPU_AVX512_VNNI));
}

/* attn_isa_built against the build's own config.h (HAVE_<ISA>), and
   attn_build_config naming exactly the built tables. */
Test(dispatch, built_matches_config)
{
    cr_assert_eq(attn_isa_built(ATTN_ISA_AUTO), 1);
    cr_assert_eq(attn_isa_built(ATTN_ISA_SCALAR), 1);
    cr_assert_eq(attn_isa_built((attn_isa)ATTN_ISA_COUNT), 0);
    cr_assert_eq(attn_isa_built((attn_isa)-2), 0);
    const char *config = attn_build_config();
    cr_assert(config && strstr(config, ATTN_VERSION_STRING), "%s", config ? config : "NULL");
#define EXPECT_BUILT(ID, name, bit, init, base, have)                                     \
    {                                                                                     \
        const int built = ATTN_IS_SET(have);                                              \
        cr_assert_eq(attn_isa_built(ATTN_ISA_##ID), built, "%s", #name);                  \
        char word[32];                                                                    \
        snprintf(word, sizeof word, " %s", #name);                                        \
        const char *isas = strstr(config, "ISAs:");                                       \
        const char *end = isas ? strchr(isas, ';') : NULL;                                \
        const char *at = isas ? strstr(isas, word) : NULL;                                \
        while (at && (at[strlen(word)] != ' ' && at[strlen(word)] != ';'))                \
            at = strstr(at + 1, word);                                                    \
        cr_assert_eq(at != NULL && at < end, built, "%s in \"%s\"", #name, config);      \
    }
    ATTN_ISA_LIST(EXPECT_BUILT)
#undef EXPECT_BUILT
}

/* The default table, restated from its rule (attn_isa_default in
   src/dispatch.c): the last available ISA in registry order that the
   registry does not exclude on this CPU (ATTN_ISA_NOT_DEFAULT_ON). */
static attn_isa expected_best(void)
{
    int excluded[ATTN_ISA_COUNT] = {0};
    const unsigned cpu = attn_cpu_detect();
#define X_EXCLUDED(ID, bit) excluded[ATTN_ISA_##ID] |= (cpu & (bit)) != 0;
    ATTN_ISA_NOT_DEFAULT_ON(X_EXCLUDED)
#undef X_EXCLUDED
    for (int isa = ATTN_ISA_COUNT - 1; isa > ATTN_ISA_SCALAR; isa--)
        if (attn_isa_available((attn_isa)isa) && !excluded[isa])
            return (attn_isa)isa;
    return ATTN_ISA_SCALAR;
}

/* Dispatch by speed: the registry's exclusions hold for any CPU bits, the
   default is always available, and the same bits give the same table. */
Test(dispatch, default_by_speed)
{
    int all[ATTN_ISA_COUNT] = {0};
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++)
        all[isa] = 1;
    const unsigned every_cpu = ~0u;
    /* With nothing excluded the widest listed table wins. */
    cr_assert_eq(attn_isa_default(all, 0), (attn_isa)(ATTN_ISA_COUNT - 1));
    int excluded[ATTN_ISA_COUNT] = {0};
#define X_EXCLUDE(ID, bit) excluded[ATTN_ISA_##ID] = 1;
    ATTN_ISA_NOT_DEFAULT_ON(X_EXCLUDE)
#undef X_EXCLUDE
    const attn_isa chosen = attn_isa_default(all, every_cpu);
    cr_assert(!excluded[chosen], "%s is excluded on this CPU but was chosen",
              attn_isa_name(chosen));
    for (int isa = chosen + 1; isa < ATTN_ISA_COUNT; isa++)
        cr_assert(excluded[isa], "%s is available, not excluded and after %s", attn_isa_name(isa),
                  attn_isa_name(chosen));
    /* Each exclusion alone: with the tables up to the excluded one available,
       the default is the excluded one without the bit and below it with it. */
#define X_ALONE(ID, bit)                                                                  \
    {                                                                                     \
        int upto[ATTN_ISA_COUNT] = {0};                                                   \
        for (int isa = ATTN_ISA_SCALAR; isa <= ATTN_ISA_##ID; isa++)                      \
            upto[isa] = 1;                                                                \
        cr_assert_eq(attn_isa_default(upto, 0), ATTN_ISA_##ID);                           \
        cr_assert_lt(attn_isa_default(upto, (bit)), ATTN_ISA_##ID);                       \
    }
    ATTN_ISA_NOT_DEFAULT_ON(X_ALONE)
#undef X_ALONE
    /* Only what is available is ever chosen. */
    int scalar_only[ATTN_ISA_COUNT] = {0};
    scalar_only[ATTN_ISA_SCALAR] = 1;
    cr_assert_eq(attn_isa_default(scalar_only, every_cpu), ATTN_ISA_SCALAR);
    /* The process's own default is the rule applied to its own CPU. */
    int avail[ATTN_ISA_COUNT] = {0};
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++)
        avail[isa] = attn_isa_available((attn_isa)isa);
    cr_assert_eq(attn_isa_select(ATTN_ISA_AUTO), ATTN_OK);
    cr_assert_eq(attn_isa_active(), attn_isa_default(avail, attn_cpu_detect()));
}

Test(dispatch, select_and_restore)
{
    unsetenv("ATTN_ISA");
    const attn_isa initial = attn_isa_active();
    cr_assert_eq(initial, expected_best(), "initial %s", attn_isa_name(initial));
    cr_assert_eq(attn_isa_select(ATTN_ISA_SCALAR), ATTN_OK);
    cr_assert_eq(attn_isa_active(), ATTN_ISA_SCALAR);
    cr_assert_eq(attn_dsp_active(), attn_dsp_for_isa(ATTN_ISA_SCALAR));
    for (int isa = ATTN_ISA_SCALAR + 1; isa < ATTN_ISA_COUNT; isa++) {
        if (attn_isa_available((attn_isa)isa))
            continue;
        cr_assert_eq(attn_isa_select((attn_isa)isa), ATTN_ERR_UNSUPPORTED, "%s",
                     attn_isa_name((attn_isa)isa));
        cr_assert_eq(attn_isa_active(), ATTN_ISA_SCALAR, "a failed select changed the ISA");
    }
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) {
        if (!attn_isa_available((attn_isa)isa))
            continue;
        cr_assert_eq(attn_isa_select((attn_isa)isa), ATTN_OK, "%s", attn_isa_name((attn_isa)isa));
        cr_assert_eq(attn_dsp_active(), attn_dsp_for_isa((attn_isa)isa));
    }
    cr_assert_eq(attn_isa_select((attn_isa)ATTN_ISA_COUNT), ATTN_ERR_ARG);
    cr_assert_eq(attn_isa_select((attn_isa)-3), ATTN_ERR_ARG);
    cr_assert_eq(attn_isa_select(ATTN_ISA_AUTO), ATTN_OK);
    cr_assert_eq(attn_isa_active(), initial);
}

/* Criterion runs each test in its own process: setenv before first use. */
typedef struct isa_param {
    int isa;
} isa_param;

static isa_param env_params[ATTN_ISA_COUNT];

ParameterizedTestParameters(dispatch, env_selects_or_falls_back)
{
    size_t n = 0;
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++)
        env_params[n++].isa = isa;
    return cr_make_param_array(isa_param, env_params, n);
}

/* ATTN_ISA=<name> selects that ISA when available, else the default; every
   registry ISA is tried, whether this build or CPU has it or not.
   Availability is asked after the first call, which fixed the choice. */
ParameterizedTest(isa_param *p, dispatch, env_selects_or_falls_back)
{
    const attn_isa want = (attn_isa)p->isa;
    setenv("ATTN_ISA", attn_isa_name(want), 1);
    const attn_isa got = attn_isa_active();
    cr_assert_eq(got, attn_isa_available(want) ? want : expected_best(), "ATTN_ISA=%s gave %s",
                 attn_isa_name(want), attn_isa_name(got));
}

Test(dispatch, env_unknown_name_falls_back)
{
    setenv("ATTN_ISA", "no-such-isa", 1);
    const attn_isa got = attn_isa_active();
    cr_assert_eq(got, expected_best(), "unknown name gave %s", attn_isa_name(got));
}

/* ------------------------------------------------------------ strerror, version */

Test(api, strerror_distinct_sentences)
{
    const char *seen[8];
    for (int st = ATTN_OK; st <= ATTN_ERR_VERSION; st++) {
        const char *msg = attn_strerror((attn_status)st);
        cr_assert(msg != NULL && strlen(msg) > 0, "status %d", st);
        for (int o = 0; o < st; o++)
            cr_assert(strcmp(msg, seen[o]) != 0, "status %d and %d share \"%s\"", st, o, msg);
        seen[st] = msg;
    }
    cr_assert(attn_strerror((attn_status)99) != NULL);
    cr_assert(attn_strerror((attn_status)-1) != NULL);
}

Test(api, version)
{
    cr_assert_eq(attn_version(), (uint32_t)ATTN_VERSION);
    cr_assert_eq(attn_version() >> 16, (uint32_t)ATTN_VERSION_MAJOR);
    cr_assert_eq((attn_version() >> 8) & 0xff, (uint32_t)ATTN_VERSION_MINOR);
    cr_assert_eq(attn_version() & 0xff, (uint32_t)ATTN_VERSION_PATCH);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ATTN_VERSION_MAJOR, ATTN_VERSION_MINOR,
             ATTN_VERSION_PATCH);
    cr_assert_str_eq(attn_version_string(), want);
}

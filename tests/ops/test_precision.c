/* SPDX-License-Identifier: MIT */
/*
 * The precision modes (attn.h, attn_precision), on every ISA row:
 *  - problems drawn by the generator (problems/: every option, packed, padded
 *    and paged layouts, float K/V dtypes) run with ATTN_PRECISION_BF16,
 *    and in the default mode with BF16 q and k (which may run on bf16 dot
 *    units), through scores, weights and forward, against float64
 *    (ref_attn_compute on the per-sequence dense copy) within exactly the
 *    bounds attn.h states for the mode (tests/ref/ref.c, qk_mode);
 *  - the int8 mode on Q8_0 / Q4_0 caches: tests/kernels/test_quant.c (its
 *    operation tests run every mode);
 *  - an unknown precision is ATTN_ERR_ARG with nothing written, and the
 *    backward refuses the rounding modes (ATTN_ERR_UNSUPPORTED).
 * With ATTN_TEST_REPORT set, each test prints the largest error it saw as
 * a fraction of its bound (what the README and notes quote).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "harness.h"
#include "ref/ref.h"
#include "ref/ref_kv.h"
#include "workload.h"

static void *plain_alloc(void *ctx, int role, size_t bytes, size_t elem, int misalign)
{
    (void)ctx, (void)role, (void)elem, (void)misalign;
    return xmalloc(bytes);
}

static void plain_release(void *ctx, int role, void *data, size_t bytes)
{
    (void)ctx, (void)role, (void)bytes;
    free(data);
}

/* Largest |got - want| / bound over a table (rows of `cols`, got with a
   stride); fails the test above 1. Masked and non-finite entries must match
   exactly (expect_near's rules), so they are left to it. */
static double worst(const char *what, const float *got, ptrdiff_t stride, const double *want,
                    const double *bound, size_t rows, size_t cols)
{
    expect_near(what, got, stride, want, bound, rows, cols);
    double w = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const double g = got[(ptrdiff_t)r * stride + (ptrdiff_t)c], x = want[r * cols + c];
            const double b = bound[r * cols + c];
            if (isfinite(g) && isfinite(x) && b > 0.0 && fabs(g - x) / b > w)
                w = fabs(g - x) / b;
        }
    return w;
}

enum { OPS_SCORES, OPS_WEIGHTS, OPS_FORWARD };

/* One drawn problem through the three operations; returns the worst
   error / bound seen. */
static double check_drawn(const attn_dsp *t, rng *g, const gen_profile *prof)
{
    gen_problem d;
    gen_src src = wl_gen_source(g);
    if (!gen_draw(&d, &src, prof))
        return 0.0;
    gen_bufs m;
    const gen_allocator a = {plain_alloc, plain_release, NULL};
    CHECK(gen_materialise(&m, &d, rng_next(g), GEN_M_OUT | GEN_M_SCORES | GEN_M_STATS, &a) == 0,
          "gen_materialise");
    char desc[896];
    const attn_shape *s = &m.shape;
    const attn_tensor *q = &m.t[GEN_Q], *k = &m.t[GEN_K], *v = &m.t[GEN_V];
    double w = 0.0;
    for (int op = OPS_SCORES; op <= OPS_FORWARD; op++) {
        harness_context("op %d, precision %lld: %s", op, (long long)m.opt.precision,
                        gen_describe(&d, desc, sizeof desc));
        const attn_dsp *sc = harness_scalar();
        const uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
        ref_dense dn;
        ref_attn r;
        ref_dense_make(&dn, s, &m.opt, q, k, op == OPS_FORWARD ? v : NULL);
        ref_attn_compute(&r, &dn.shape, &dn.opt, &dn.q, &dn.k, op == OPS_FORWARD ? &dn.v : NULL,
                         op == OPS_FORWARD ? (s->kv_len + bk - 1) / bk + 1 : 0);
        /* the call on the dense copy: same table, same rounding */
        const attn_shape *ds = &dn.shape;
        const int64_t dv = ds->v_dim ? ds->v_dim : ds->head_dim;
        const int64_t cols = op == OPS_FORWARD ? dv : ds->kv_len;
        const size_t rows = (size_t)(ds->batch * ds->q_heads * ds->q_len);
        float *table = xmalloc(rows * (size_t)cols * 4), *stats = xmalloc(rows * 3 * 4);
        const attn_tensor o = {table, ATTN_DTYPE_F32, ds->q_heads * ds->q_len * cols,
                               ds->q_len * cols, cols};
        const attn_row_stats st = {stats, stats + rows, stats + 2 * rows};
        attn_status rc;
        if (op == OPS_SCORES)
            rc = attn_scores_with(t, ds, &dn.opt, &dn.q, &dn.k, &o);
        else if (op == OPS_WEIGHTS)
            rc = attn_weights_with(t, ds, &dn.opt, &dn.q, &dn.k, &o, &st);
        else
            rc = attn_forward_with(t, ds, &dn.opt, &dn.q, &dn.k, &dn.v, &o, &st);
        CHECK(rc == ATTN_OK, "status %d (%s)", rc, attn_strerror(rc));
        const double *want = op == OPS_SCORES ? r.s : op == OPS_WEIGHTS ? r.p : r.o;
        const double *err = op == OPS_SCORES ? r.s_err : op == OPS_WEIGHTS ? r.p_err : r.o_err;
        double x = worst("result vs float64", table, cols, want, err, rows, (size_t)cols);
        w = x > w ? x : w;
        if (op != OPS_SCORES) {
            x = worst("lse vs float64", stats, (ptrdiff_t)rows, r.lse, r.lse_err, 1, rows);
            w = x > w ? x : w;
            x = worst("max_score vs float64", stats + rows, (ptrdiff_t)rows, r.max, r.max_err, 1,
                      rows);
            w = x > w ? x : w;
        }
        free(table);
        free(stats);
        ref_attn_free(&r);
        ref_dense_free(&dn);
    }
    gen_release(&m);
    gen_free(&d);
    return w;
}

static void report(const char *what, const attn_dsp *t, double w)
{
    if (getenv("ATTN_TEST_REPORT"))
        fprintf(stderr, "precision %-28s %-8s worst error / bound %.3f\n", what, t->isa_name, w);
}

/* Problems of the default profile, the precision pinned, a third of them
   with long rows so that the kernels' panel paths run. */
static void run_mode(const isa_row *row, int64_t precision, int bf16_inputs, const char *name)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    double w = 0.0;
    for (int rep = 0; rep < 12; rep++) {
        gen_profile p;
        gen_profile_init(&p);
        gen_pin(&p, GEN_C_OPT(precision), precision);
        /* finite inputs: a mode's rounding may turn inf * tiny into
           inf * 0 (attn.h), checked on its own below */
        gen_pin(&p, GEN_C_SPREAD, rep % 2 ? GEN_SPREAD_FLAT : GEN_SPREAD_PEAKED);
        if (bf16_inputs) {
            gen_pin(&p, GEN_C_Q_DTYPE, ATTN_DTYPE_BF16);
            gen_pin(&p, GEN_C_K_DTYPE, ATTN_DTYPE_BF16);
        }
        if (rep % 3 == 0) { /* at least the 17 rows of the packed paths */
            gen_range(&p, GEN_C_Q_LEN, 17, 70);
            gen_range(&p, GEN_C_KV_LEN, 20, 300);
        }
        const double x = check_drawn(t, g, &p);
        w = x > w ? x : w;
    }
    report(name, t, w);
}

HARNESS_ISA_PARAMS(precision, bf16)
ParameterizedTest(isa_row *row, precision, bf16, .timeout = ATTN_TEST_TIMEOUT)
{
    run_mode(row, ATTN_PRECISION_BF16, 0, "bf16");
}

HARNESS_ISA_PARAMS(precision, default_bf16_inputs)
ParameterizedTest(isa_row *row, precision, default_bf16_inputs, .timeout = ATTN_TEST_TIMEOUT)
{
    run_mode(row, ATTN_PRECISION_DEFAULT, 1, "default, bf16 q and k");
}

/* attn.h: the bf16 mode rounds a factor below the least bf16 subnormal
   to 0, so an infinite q against it gives NaN (inf * 0), where the
   default mode gives inf; either way the score is not finite. */
HARNESS_ISA_PARAMS(precision, bf16_infinities)
ParameterizedTest(isa_row *row, precision, bf16_infinities)
{
    const attn_dsp *t = harness_begin(row);
    const int64_t L = 20, D = 32;
    const attn_shape s = {1, 1, 1, L, L, D, D};
    float x[2 * 20 * 32], sc[20 * 20];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = 0.25f;
    x[0] = INFINITY;        /* q row 0, dim 0 */
    x[L * D] = 1e-45f;      /* k row 0, dim 0: rounds to 0 in bf16 */
    const attn_tensor q = {x, ATTN_DTYPE_F32, L * D, L * D, D},
                      k = {x + L * D, ATTN_DTYPE_F32, L * D, L * D, D},
                      o = {sc, ATTN_DTYPE_F32, L * L, L * L, L};
    attn_options opt = ATTN_OPTIONS_INIT;
    CHECK(attn_scores_with(t, &s, &opt, &q, &k, &o) == ATTN_OK, "default");
    CHECK(sc[0] == INFINITY, "default mode: inf * 1e-45 is inf, got %g", (double)sc[0]);
    opt.precision = ATTN_PRECISION_BF16;
    CHECK(attn_scores_with(t, &s, &opt, &q, &k, &o) == ATTN_OK, "bf16");
    CHECK(!isfinite(sc[0]), "bf16 mode: a score of inf * tiny must stay non-finite, got %g",
          (double)sc[0]);
    CHECK(isfinite(sc[L + 1]), "row 1 has no infinity");
}

/* The int8 mode on float caches is the default mode: the same bits. */
HARNESS_ISA_PARAMS(precision, int8_float_caches)
ParameterizedTest(isa_row *row, precision, int8_float_caches)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    const int64_t B = 1, H = 2, L = 40, D = 64;
    const attn_shape s = {B, H, H, L, L, D, D};
    const size_t n = (size_t)(B * H * L * D);
    float *x = xmalloc(n * 4 * 3), *o1 = xmalloc(n * 4), *o2 = xmalloc(n * 4);
    rng_fill(g, x, n * 3, -1.0f, 1.0f);
    const attn_tensor q = {x, ATTN_DTYPE_F32, H * L * D, L * D, D},
                      k = {x + n, ATTN_DTYPE_F32, H * L * D, L * D, D},
                      v = {x + 2 * n, ATTN_DTYPE_F32, H * L * D, L * D, D},
                      out1 = {o1, ATTN_DTYPE_F32, H * L * D, L * D, D},
                      out2 = {o2, ATTN_DTYPE_F32, H * L * D, L * D, D};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    CHECK(attn_forward_with(t, &s, &opt, &q, &k, &v, &out1, NULL) == ATTN_OK, "default");
    opt.precision = ATTN_PRECISION_INT8;
    CHECK(attn_forward_with(t, &s, &opt, &q, &k, &v, &out2, NULL) == ATTN_OK, "int8");
    expect_bits("int8 mode on F32 k", o2, o1, n);
    free(x), free(o1), free(o2);
}

Test(precision, errors)
{
    harness_begin_plain("precision/errors");
    const int64_t L = 8, D = 32;
    const attn_shape s = {1, 1, 1, L, L, D, D};
    float x[3 * 8 * 32], out[8 * 32], lse[8];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)(i % 7) * 0.125f;
    const attn_tensor q = {x, ATTN_DTYPE_F32, L * D, L * D, D},
                      k = {x + L * D, ATTN_DTYPE_F32, L * D, L * D, D},
                      v = {x + 2 * L * D, ATTN_DTYPE_F32, L * D, L * D, D},
                      o = {out, ATTN_DTYPE_F32, L * D, L * D, D};
    const int64_t bad[] = {-1, 3, 1ll << 40};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        attn_options opt = ATTN_OPTIONS_INIT;
        opt.precision = bad[i];
        for (size_t j = 0; j < L * D; j++)
            out[j] = -7.0f;
        CHECK(attn_forward(&s, &opt, &q, &k, &v, &o, NULL) == ATTN_ERR_ARG,
              "precision %lld accepted", (long long)bad[i]);
        CHECK(attn_scores(&s, &opt, &q, &k, &o) == ATTN_ERR_ARG, "scores took %lld",
              (long long)bad[i]);
        for (size_t j = 0; j < L * D; j++)
            CHECK(out[j] == -7.0f, "out written on a refused call");
    }
    /* the backward: the default and bf16 modes (the int8 mode's scores have
       no gradient here), tests/ops/test_backward.c checks bf16's against float64 */
    float dq[8 * 32], dk[8 * 32], dv[8 * 32];
    const attn_tensor tdq = {dq, ATTN_DTYPE_F32, L * D, L * D, D},
                      tdk = {dk, ATTN_DTYPE_F32, L * D, L * D, D},
                      tdv = {dv, ATTN_DTYPE_F32, L * D, L * D, D};
    attn_options opt = ATTN_OPTIONS_INIT;
    const attn_row_stats st = {lse, NULL, NULL};
    CHECK(attn_forward(&s, &opt, &q, &k, &v, &o, &st) == ATTN_OK, "forward");
    attn_grads grads = ATTN_GRADS_INIT;
    grads.dq = &tdq, grads.dk = &tdk, grads.dv = &tdv;
    for (size_t j = 0; j < L * D; j++)
        dq[j] = -7.0f;
    opt.precision = ATTN_PRECISION_INT8;
    CHECK(attn_backward(&s, &opt, &q, &k, &v, &o, &o, lse, &grads) == ATTN_ERR_UNSUPPORTED,
          "backward in the int8 mode");
    for (size_t j = 0; j < L * D; j++)
        CHECK(dq[j] == -7.0f, "dq written on a refused call");
    opt.precision = ATTN_PRECISION_BF16;
    CHECK(attn_backward(&s, &opt, &q, &k, &v, &o, &o, lse, &grads) == ATTN_OK,
          "backward in the bf16 mode");
    /* a 1.1 caller's struct (192 bytes, padding after v_scale): default */
    opt = (attn_options)ATTN_OPTIONS_INIT;
    opt.struct_size = 192;
    opt.precision = 99; /* not covered: never read */
    CHECK(attn_forward(&s, &opt, &q, &k, &v, &o, NULL) == ATTN_OK, "a 1.1 struct_size");
}

/* SPDX-License-Identifier: MIT */
/*
 * The backward's kernel slots, for every ISA row: pt_tile against the
 * scalar kernel (sum of both bounds) and, on the scalar row, against
 * float64; score_grad bitwise against the scalar kernel (two IEEE
 * operations per element) and the scalar one against float64.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "harness.h"
#include "tolerance.h"

static void run_pt(const attn_dsp *t, size_t nq, size_t nk, size_t dim, int offset)
{
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    const size_t ps = nk + (size_t)rng_int(g, 0, 3), xs = dim + (size_t)rng_int(g, 0, 3);
    const size_t as = dim + (size_t)rng_int(g, 0, 3);
    harness_context("pt_tile nq=%zu nk=%zu dim=%zu offset=%d", nq, nk, dim, offset);
    buf bp, bx, ba, bref;
    float *p = buf_alloc(&bp, nq * ps * 4, offset ? 4 : 0);
    float *x = buf_alloc(&bx, nq * xs * 4, offset ? 4 : 0);
    float *acc = buf_alloc(&ba, nk * as * 4, offset ? 4 : 0);
    float *ref = buf_alloc(&bref, nk * as * 4, 0);
    rng_fill(g, p, nq * ps, -1.0f, 1.0f);
    rng_fill(g, x, nq * xs, -4.0f, 4.0f);
    for (size_t c = 0; c < nk; c++)
        for (size_t i = 0; i < as; i++) {
            /* the row gaps hold the canary: a kernel writing there fails */
            uint32_t canary = BUF_CANARY;
            if (i < dim)
                acc[c * as + i] = rng_float(g, -2.0f, 2.0f);
            else
                memcpy(&acc[c * as + i], &canary, 4);
        }
    memcpy(ref, acc, nk * as * 4);

    double *want = xmalloc(nk * dim * sizeof(double)), *bound = xmalloc(nk * dim * sizeof(double));
    for (size_t c = 0; c < nk; c++)
        for (size_t i = 0; i < dim; i++) {
            double sum = acc[c * as + i], mag = fabs(sum);
            for (size_t r = 0; r < nq; r++) {
                sum += (double)p[r * ps + c] * x[r * xs + i];
                mag += fabs((double)p[r * ps + c] * x[r * xs + i]);
            }
            want[c * dim + i] = sum;
            bound[c * dim + i] = tol_gamma((double)nq + 1.0) * mag;
        }

    t->pt_tile(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc, (ptrdiff_t)as);
    buf_check(&ba, "acc");
    for (size_t c = 0; c < nk; c++)
        for (size_t i = dim; i < as; i++) {
            uint32_t v;
            memcpy(&v, &acc[c * as + i], 4);
            CHECK(v == BUF_CANARY, "pt_tile wrote into the row gap at [%zu][%zu]", c, i);
        }
    if (harness_is_scalar(t)) {
        /* acc rows have stride as, want rows dim */
        for (size_t c = 0; c < nk; c++)
            expect_near("pt_tile vs float64", acc + c * as, 0, want + c * dim, bound + c * dim, 1,
                         dim);
    } else {
        sc->pt_tile(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, ref, (ptrdiff_t)as);
        for (size_t i = 0; i < nk * dim; i++)
            bound[i] = TOL_PAIR(bound[i]);
        for (size_t c = 0; c < nk; c++)
            expect_near_f("pt_tile vs scalar", acc + c * as, 0, ref + c * as, 0, bound + c * dim,
                          1, dim);
    }
    free(want);
    free(bound);
    buf_free(&bp);
    buf_free(&bx);
    buf_free(&ba);
    buf_free(&bref);
}

HARNESS_ISA_PARAMS(backward_kernels, pt_tile)
ParameterizedTest(isa_row *row, backward_kernels, pt_tile, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    static const size_t dims[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129};
    static const size_t nks[] = {1, 2, 3, 4, 5, 7, 8, 13, 64, 65};
    static const size_t nqs[] = {1, 2, 5, 16, 33, 64};
    for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++)
        for (size_t b = 0; b < sizeof nks / sizeof nks[0]; b++)
            run_pt(t, nqs[(a + b) % 6], nks[b], dims[a], (int)((a + b) & 1));
}

HARNESS_ISA_PARAMS(backward_kernels, score_grad)
ParameterizedTest(isa_row *row, backward_kernels, score_grad, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    for (size_t n = 1; n <= 300; n += (n < 40 ? 1 : 37)) {
        harness_context("score_grad n=%zu", n);
        buf bp, bd;
        float *p = buf_alloc(&bp, n * 4, n & 1 ? 4 : 0);
        float *dp = buf_alloc(&bd, n * 4, n & 2 ? 4 : 0);
        float *ref = xmalloc(n * 4), *orig = xmalloc(n * 4);
        for (size_t j = 0; j < n; j++)
            p[j] = rng_int(g, 0, 7) ? rng_float(g, 0.0f, 1.0f) : 0.0f; /* masked keys: 0 */
        rng_fill(g, dp, n, -50.0f, 50.0f);
        const float d = rng_float(g, -20.0f, 20.0f);
        memcpy(orig, dp, n * 4);
        memcpy(ref, dp, n * 4);
        t->score_grad(p, dp, d, n);
        buf_check(&bd, "dp");
        if (harness_is_scalar(t)) {
            /* fl(p fl(dp - d)): two roundings, each <= u relative */
            for (size_t j = 0; j < n; j++) {
                const double want = (double)p[j] * ((double)orig[j] - d);
                const double bound = (2.0 * TOL_U + TOL_U * TOL_U) * fabs(want);
                CHECK(fabs(dp[j] - want) <= bound, "score_grad[%zu]: %.9g vs %.9g", j,
                      (double)dp[j], want);
            }
        } else {
            sc->score_grad(p, ref, d, n);
            expect_bits("score_grad vs scalar", dp, ref, n);
        }
        free(ref);
        free(orig);
        buf_free(&bp);
        buf_free(&bd);
    }
}

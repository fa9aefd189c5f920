/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the row family (row_<isa>.c): row_max, exp_sum and softmax_bwd,
 * and the slots that change a row in place (row_scale, add_bias, mask_bool,
 * softcap), which are cases of one check, check_row_case, as the alibi and
 * backward families' in-place slots are.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkasm.h"
#include "ref/ref.h"

void check_row_case(checkasm *c, const row_case *rc)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        row_args a = {0};
        a.x = xalloc(n * 4);
        a.aux = rc->aux ? xalloc(n * 4) : NULL;
        rc->draw(c, i, n, &a);
        float *x0 = xalloc(n * 4), *x_ref = xalloc(n * 4);
        memcpy(x0, a.x, n * 4);
        memcpy(x_ref, a.x, n * 4);
        row_args r = a;
        r.x = x_ref;
        rc->run(c->t, &a, n);
        rc->run(c->ref, &r, n);
        for (size_t j = 0; j < n; j++) {
            if (!rc->bound) {
                if (!same_bits(a.x[j], x_ref[j]))
                    fail(c, "n=%zu%s: x[%zu] = %.9g, scalar %.9g (bitwise)", n, a.what, j,
                         (double)a.x[j], (double)x_ref[j]);
                continue;
            }
            const double b = rc->bound(&a, x0[j], j);
            if (!near(a.x[j], x_ref[j], b))
                fail(c, "n=%zu%s: x[%zu] = %.9g, scalar %.9g, bound %.3g", n, a.what, j,
                     (double)a.x[j], (double)x_ref[j], b);
        }
        if (i == 0)
            CA_BENCH(c, "1024", 0, rc->run(c->t, &a, n), rc->run(c->ref, &r, n));
        free(a.x), free(a.aux), free(x0), free(x_ref);
    }
}

/* The in-place cases, bitwise but softcap's: how each draws its row and
   calls its slot. */
static void row_scale_draw(checkasm *c, int i, size_t n, row_args *a)
{
    random_row(c, a->x, n, -1e3f, 1e3f);
    a->f = uniform(c, -3.0f, 3.0f);
}

static void row_scale_run(const attn_dsp *t, const row_args *a, size_t n)
{
    t->row_scale(a->x, n, a->f);
}

static void add_bias_draw(checkasm *c, int i, size_t n, row_args *a)
{
    random_row(c, a->x, n, -50.0f, 50.0f);
    random_row(c, a->aux, n, -5.0f, 5.0f);
    if (n > 2)
        a->x[pick(c, 0, n - 1)] = -INFINITY;
}

static void add_bias_run(const attn_dsp *t, const row_args *a, size_t n)
{
    t->add_bias(a->x, a->aux, n);
}

static void mask_bool_draw(checkasm *c, int i, size_t n, row_args *a)
{
    uint8_t *m = a->aux;
    random_row(c, a->x, n, -50.0f, 50.0f);
    for (size_t j = 0; j < n; j++)
        m[j] = (uint8_t)(next(c) % 3 ? 1 + next(c) % 255 : 0); /* any nonzero byte keeps */
}

static void mask_bool_run(const attn_dsp *t, const row_args *a, size_t n)
{
    t->mask_bool(a->x, a->aux, n);
}

static void softcap_draw(checkasm *c, int i, size_t n, row_args *a)
{
    random_row(c, a->x, n, -150.0f, 150.0f);
    a->f = uniform(c, 1.0f, 50.0f);
    snprintf(a->what, sizeof a->what, " cap=%g", (double)a->f);
}

static void softcap_run(const attn_dsp *t, const row_args *a, size_t n)
{
    t->softcap(a->x, n, a->f);
}

static double softcap_bound(const row_args *a, float x0, size_t j)
{
    return TOL_PAIR(tol_softcap(a->f, x0, tanh((double)x0 / a->f)));
}

CA_ROW_CASE(row_scale, 0, NULL)
CA_ROW_CASE(add_bias, 1, NULL)
CA_ROW_CASE(mask_bool, 1, NULL)
CA_ROW_CASE(softcap, 0, softcap_bound)

void check_row_max(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4);
        random_row(c, x, n, -100.0f, 100.0f);
        if (i % 5 == 1)
            x[pick(c, 0, n - 1)] = NAN;
        else if (i % 5 == 2)
            for (size_t j = 0; j < n; j++)
                x[j] = -INFINITY;
        const float got = c->t->row_max(x, n), want = c->ref->row_max(x, n);
        if (!same_bits(got, want))
            fail(c, "n=%zu: %.9g, scalar %.9g (bitwise)", n, (double)got, (double)want);
        if (i == 0) {
            volatile float sink;
            CA_BENCH(c, "1024", 0, sink = c->t->row_max(x, n), sink = c->ref->row_max(x, n));
            (void)sink;
        }
        free(x);
    }
}

void check_exp_sum(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4), *x_ref = xalloc(n * 4), *x0 = xalloc(n * 4);
        random_row(c, x0, n, -60.0f, 20.0f);
        if (n > 3 && i % 2)
            x0[pick(c, 0, n - 1)] = -INFINITY; /* a masked score */
        float max = -INFINITY;
        for (size_t j = 0; j < n; j++)
            max = x0[j] > max ? x0[j] : max;
        if (max == -INFINITY)
            max = 0.0f;
        if (i % 3 == 2)
            max += uniform(c, 0.0f, 5.0f); /* a running max above the row's own */
        memcpy(x, x0, n * 4);
        memcpy(x_ref, x0, n * 4);
        float w = 0.0f, w_ref = 0.0f;
        const float sum = c->t->exp_sum(x, n, max, &w);
        const float sum_ref = c->ref->exp_sum(x_ref, n, max, &w_ref);
        double sum_bound = 0.0, w_bound = 0.0, total = 0.0, wmag = 0.0;
        size_t terms = 0;
        for (size_t j = 0; j < n; j++) {
            if (x0[j] == -INFINITY) {
                if (!same_bits(x[j], x_ref[j]))
                    fail(c, "n=%zu: x[%zu] = %.9g for -inf, scalar %.9g", n, j, (double)x[j],
                         (double)x_ref[j]);
                continue;
            }
            const double shifted = (double)(x0[j] - max), e = exp((double)x0[j] - max);
            const double b = tol_exp(shifted, e);
            if (!near(x[j], x_ref[j], TOL_PAIR(b)))
                fail(c, "n=%zu: x[%zu] = %.9g, scalar %.9g, bound %.3g", n, j, (double)x[j],
                     (double)x_ref[j], TOL_PAIR(b));
            total += e;
            sum_bound += b;
            wmag += fabs(e * ((double)x0[j] - max));
            w_bound += fabs(shifted) * b;
            terms++;
        }
        sum_bound += tol_gamma((double)terms) * total;
        w_bound += tol_gamma((double)terms + 1.0) * wmag;
        if (!near(sum, sum_ref, TOL_PAIR(sum_bound)))
            fail(c, "n=%zu: sum %.9g, scalar %.9g, bound %.3g", n, (double)sum, (double)sum_ref,
                 TOL_PAIR(sum_bound));
        if (!near(w, w_ref, TOL_PAIR(w_bound)))
            fail(c, "n=%zu: weighted %.9g, scalar %.9g, bound %.3g", n, (double)w, (double)w_ref,
                 TOL_PAIR(w_bound));
        if (i == 0) {
            volatile float sink;
            CA_BENCH(c, "1024, weighted", 0, sink = c->t->exp_sum(x, n, max, &w),
                     sink = c->ref->exp_sum(x_ref, n, max, &w_ref));
            (void)sink;
        }
        free(x), free(x_ref), free(x0);
    }
}


void check_softmax_bwd(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *p = xalloc(n * 4), *dp = xalloc(n * 4), *ds = xalloc(n * 4), *ds_ref = xalloc(n * 4);
        double total = 0.0;
        for (size_t j = 0; j < n; j++)
            total += p[j] = next(c) % 6 ? uniform(c, 0.0f, 1.0f) : 0.0f;
        for (size_t j = 0; j < n && total > 0.0; j++)
            p[j] = (float)(p[j] / total);
        random_row(c, dp, n, -10.0f, 10.0f);
        c->t->softmax_bwd(p, dp, ds, n);
        c->ref->softmax_bwd(p, dp, ds_ref, n);
        double *want = xalloc(n * sizeof(double)), *b = xalloc(n * sizeof(double));
        ref_softmax_bwd_row(p, dp, n, want, b); /* the bound of tolerance.h, softmax_bwd */
        for (size_t j = 0; j < n; j++)
            if (!near(ds[j], ds_ref[j], TOL_PAIR(b[j])))
                fail(c, "n=%zu: ds[%zu] = %.9g, scalar %.9g, bound %.3g", n, j, (double)ds[j],
                     (double)ds_ref[j], TOL_PAIR(b[j]));
        free(want), free(b);
        if (i == 0)
            CA_BENCH(c, "1024", 0, c->t->softmax_bwd(p, dp, ds, n),
                     c->ref->softmax_bwd(p, dp, ds_ref, n));
        free(p), free(dp), free(ds), free(ds_ref);
    }
}

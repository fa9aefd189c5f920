/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the alibi family (alibi_<isa>.c): alibi, an in-place row case
 * (check_row_case, checkasm_row.c) within tolerance.h's "alibi" bound.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "checkasm.h"

static void alibi_draw(checkasm *c, int i, size_t n, row_args *a)
{
    random_row(c, a->x, n, -20.0f, 20.0f);
    a->f = uniform(c, 0.0f, 1.0f) * (float)pow(2.0, -(double)pick(c, 0, 8));
    /* |pos - j| < 2^31 (the slot's contract), positions before, inside
       and past the row */
    a->pos = (int64_t)pick(c, 0, 2 * n + 4000) - 2000 - (int64_t)(i % 7 == 3) * 100000;
    snprintf(a->what, sizeof a->what, " pos=%lld", (long long)a->pos);
}

static void alibi_run(const attn_dsp *t, const row_args *a, size_t n)
{
    t->alibi(a->x, n, a->f, a->pos);
}

static double alibi_bound(const row_args *a, float x0, size_t j)
{
    const double d = (double)a->f * fabs((double)(a->pos - (int64_t)j));
    const double y = (double)x0 - d;
    return TOL_PAIR(TOL_ALIBI_A * TOL_U * d + TOL_U * fabs(y)); /* "alibi" */
}

CA_ROW_CASE(alibi, 0, alibi_bound)

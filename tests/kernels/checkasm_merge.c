/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the merge family (merge_<isa>.c): wsum.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkasm.h"

void check_wsum(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = i == 0 ? 128 : row_len(c, i);
        const size_t parts = i == 0 ? 8 : pick(c, 1, ATTN_WSUM_MAX_PARTS);
        float *y = xalloc(n * 4), *y_ref = xalloc(n * 4), *xs = xalloc(parts * n * 4);
        float w[ATTN_WSUM_MAX_PARTS];
        const float *xp[ATTN_WSUM_MAX_PARTS];
        random_row(c, y, n, -3.0f, 3.0f);
        memcpy(y_ref, y, n * 4);
        random_row(c, xs, parts * n, -3.0f, 3.0f);
        for (size_t k = 0; k < parts; k++) {
            w[k] = uniform(c, 0.0f, 1.0f);
            xp[k] = xs + k * n;
        }
        float *y0 = xalloc(n * 4);
        memcpy(y0, y, n * 4);
        c->t->wsum(y, xp, w, parts, n);
        c->ref->wsum(y_ref, xp, w, parts, n);
        for (size_t j = 0; j < n; j++) {
            double mag = fabs((double)y0[j]);
            for (size_t k = 0; k < parts; k++)
                mag += fabs((double)w[k] * xp[k][j]);
            const double b = TOL_PAIR(tol_wsum((double)parts, mag));
            if (!near(y[j], y_ref[j], b))
                fail(c, "n=%zu parts=%zu: y[%zu] = %.9g, scalar %.9g, bound %.3g", n, parts, j,
                     (double)y[j], (double)y_ref[j], b);
        }
        if (i == 0)
            CA_BENCH(c, "8 parts x 128", 0, c->t->wsum(y, xp, w, parts, n),
                     c->ref->wsum(y_ref, xp, w, parts, n));
        free(y), free(y_ref), free(y0), free(xs);
    }
}

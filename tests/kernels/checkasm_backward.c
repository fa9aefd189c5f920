/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the backward family (backward_<isa>.c): pt_tile, and the
 * transposed sum in a precision, which the dot family's pt_bf16 runs in
 * (checkasm_dot.c); score_grad, an in-place row case (check_row_case,
 * checkasm_row.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkasm.h"

/* pt_tile, or (bf16) pt_bf16 against its oracle with check_pv_mode's bf16
   bound, or within the f32 bound of the exact sums (a kernel that takes the
   exact path for a small tile); and, for the driver's calls (nq <=
   ATTN_MAX_BLOCK_Q), the order src/dsp.h gives every kernel: each element
   is acc0 plus, in one f32 addition, what the call gives on a zero
   accumulator, bit for bit (the blocked sum of dK and dV, tolerance.h). */
void check_pt_mode(checkasm *c, int mode, attn_pt_tile_fn *kernel, attn_pt_tile_fn *oracle)
{
    if (!kernel)
        return; /* a dot slot this table has no kernel for (src/kernel_list.h) */
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const tile_shape sh = tile_shape_of(c, i, ATTN_KV_F32);
        const size_t nq = sh.nq, nk = sh.nk, dim = sh.d;
        const size_t ps = nk + pick(c, 0, 3), xs = dim + pick(c, 0, 3), as = dim + pick(c, 0, 3);
        float *p = xalloc(nq * ps * 4), *x = xalloc(nq * xs * 4);
        float *acc = xalloc(nk * as * 4), *acc_ref = xalloc(nk * as * 4), *acc0 = xalloc(nk * as * 4);
        float *acc_exact = xalloc(nk * as * 4), *acc_zero = xalloc(nk * as * 4);
        random_row(c, p, nq * ps, -1.0f, 1.0f);
        random_row(c, x, nq * xs, -3.0f, 3.0f);
        random_row(c, acc0, nk * as, -2.0f, 2.0f);
        memcpy(acc, acc0, nk * as * 4);
        memcpy(acc_ref, acc0, nk * as * 4);
        memcpy(acc_exact, acc0, nk * as * 4);
        kernel(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc, (ptrdiff_t)as);
        oracle(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_ref, (ptrdiff_t)as);
        if (mode == CA_BF16)
            c->ref->pt_tile(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_exact,
                            (ptrdiff_t)as);
        memset(acc_zero, 0, nk * as * 4);
        kernel(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_zero, (ptrdiff_t)as);
        for (size_t col = 0; col < nk && nq <= ATTN_MAX_BLOCK_Q; col++)
            for (size_t t = 0; t < dim; t++) {
                const float a0 = acc0[col * as + t], want = a0 + acc_zero[col * as + t];
                if (a0 != 0.0f && !same_bits(acc[col * as + t], want))
                    fail(c, "nq=%zu nk=%zu dim=%zu: acc[%zu][%zu] = %.9g, not acc0 %.9g + the "
                            "sum from zero %.9g = %.9g",
                         nq, nk, dim, col, t, (double)acc[col * as + t], (double)a0,
                         (double)acc_zero[col * as + t], (double)want);
            }
        for (size_t col = 0; col < nk; col++)
            for (size_t t = 0; t < as; t++) {
                if (t >= dim) {
                    if (!same_bits(acc[col * as + t], acc0[col * as + t]))
                        fail(c, "nq=%zu nk=%zu dim=%zu: wrote into the row gap at [%zu][%zu]", nq,
                             nk, dim, col, t);
                    continue;
                }
                double b;
                const float got = acc[col * as + t];
                if (!pv_sum_ok(mode, got, acc_ref[col * as + t], acc_exact[col * as + t],
                               acc0[col * as + t], p + col, (ptrdiff_t)ps, x + t, (ptrdiff_t)xs,
                               nq, &b))
                    fail(c, "nq=%zu nk=%zu dim=%zu: acc[%zu][%zu] = %.9g, scalar %.9g, bound %.3g",
                         nq, nk, dim, col, t, (double)got, (double)acc_ref[col * as + t], b);
            }
        if (i < CA_BENCH_SHAPES)
            CA_BENCH(c, tile_bench_names[i], 2.0 * nq * nk * dim,
                     kernel(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc, (ptrdiff_t)as),
                     oracle(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_ref,
                            (ptrdiff_t)as));
        free(p), free(x), free(acc), free(acc_ref), free(acc0), free(acc_exact), free(acc_zero);
    }
}

void check_pt_tile(checkasm *c)
{
    check_pt_mode(c, CA_EXACT, c->t->pt_tile, c->ref->pt_tile);
}

/* Bitwise: one subtraction and one multiply in every table
   (tests/kernels/test_backward_kernels.c); p, the weights, rides as aux. */
static void score_grad_draw(checkasm *c, int i, size_t n, row_args *a)
{
    random_weights(c, a->aux, n); /* masked keys: 0 */
    random_row(c, a->x, n, -50.0f, 50.0f);
    a->f = uniform(c, -20.0f, 20.0f);
}

static void score_grad_run(const attn_dsp *t, const row_args *a, size_t n)
{
    t->score_grad(a->aux, a->x, a->f, n);
}

CA_ROW_CASE(score_grad, 1, NULL)

/* SPDX-License-Identifier: MIT */
/*
 * Plain-main smoke test of every public operation, run natively and under
 * `qemu-x86_64 -cpu Nehalem` (no AVX): there the dispatcher must choose the
 * scalar table and no code outside the ISA files may use AVX, or this traps.
 * (Criterion's suites re-exec themselves, which escapes qemu-user, hence a
 * separate program.) The reference is a naive float64 loop written here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

enum { B = 2, HQ = 4, HKV = 2, LQ = 19, LK = 45, D = 24 };

static float q[B * HQ * LQ * D], k[B * HKV * LK * D], v[B * HKV * LK * D];
static float out[B * HQ * LQ * D], weights[B * HQ * LQ * LK], lse[B * HQ * LQ];
static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("FAIL: %s\n", what);
        failures++;
    }
}

/* Visible iff bottom-right causal and inside the window and the lengths. */
static int visible(int i, int j, int lq, int lk, int window)
{
    int aligned = i + lk - lq;
    return i < lq && j < lk && j <= aligned && (window == 0 || j > aligned - window);
}

/*
 * Debian 12's aarch64-linux-gnu-gcc 12.2.0 (12.2.0-14) dies at -O3 with an
 * internal compiler error "in vect_transform_reduction, at
 * tree-vect-loop.cc:7457" on the fmax reduction of the weights check below
 * (reduced: e = fmax(e, fabs(p - w[j])) over j with p = l > 0 ?
 * exp(s[j] - m) / l : 0.0 alone still fails). Loop vectorisation is off for this one
 * function, for that compiler only; the library is not affected.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__aarch64__) && __GNUC__ == 12
__attribute__((optimize("no-tree-loop-vectorize")))
#endif
int main(void)
{
    unsigned seed = 12345;
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        q[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        k[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
        v[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 16384.0f - 1.0f;
    }
    const int32_t q_lens[B] = {LQ, 11}, kv_lens[B] = {LK, 30};
    const int window = 9;
    attn_shape shape = {B, HQ, HKV, LQ, LK, D, 0};
    attn_tensor tq = {q, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    attn_tensor tk = {k, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
    attn_tensor tv = {v, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
    attn_tensor to = {out, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    attn_tensor tw = {weights, ATTN_DTYPE_F32, HQ * LQ * LK, LQ * LK, LK};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    opt.window = window;
    opt.q_lens = q_lens;
    opt.kv_lens = kv_lens;
    attn_threadpool *pool = NULL;
    check(attn_threadpool_create(2, &pool) == ATTN_OK, "threadpool_create");
    opt.parallel_for = attn_threadpool_parallel_for;
    opt.parallel_ctx = pool;
    attn_row_stats stats = {lse, NULL, NULL};

    printf("active isa: %s\n", attn_isa_name(attn_isa_active()));
    check(attn_forward(&shape, &opt, &tq, &tk, &tv, &to, &stats) == ATTN_OK, "forward");
    check(attn_weights(&shape, &opt, &tq, &tk, &tw, NULL) == ATTN_OK, "weights");

    double max_err = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < LQ; i++) {
                const int kh = h / (HQ / HKV);
                double s[LK], m = -INFINITY, l = 0.0;
                for (int j = 0; j < LK; j++) {
                    s[j] = -INFINITY;
                    if (!visible(i, j, q_lens[b], kv_lens[b], window))
                        continue;
                    double dot = 0.0;
                    for (int t = 0; t < D; t++)
                        dot += (double)q[((b * HQ + h) * LQ + i) * D + t] *
                               k[((b * HKV + kh) * LK + j) * D + t];
                    s[j] = dot / sqrt((double)D);
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j < LK; j++)
                    l += m == -INFINITY ? 0.0 : exp(s[j] - m);
                for (int j = 0; j < LK; j++) {
                    double p = l > 0 ? exp(s[j] - m) / l : 0.0;
                    max_err = fmax(max_err, fabs(p - weights[((b * HQ + h) * LQ + i) * LK + j]));
                }
                for (int t = 0; t < D; t++) {
                    double o = 0.0;
                    for (int j = 0; j < LK; j++)
                        if (l > 0)
                            o += exp(s[j] - m) / l * v[((b * HKV + kh) * LK + j) * D + t];
                    max_err = fmax(max_err, fabs(o - out[((b * HQ + h) * LQ + i) * D + t]));
                }
                float row_lse = lse[(b * HQ + h) * LQ + i];
                if (l > 0)
                    max_err = fmax(max_err, fabs(m + log(l) - row_lse));
                else
                    check(row_lse == -INFINITY, "fully masked row lse");
            }
    printf("max abs error vs float64: %.3g\n", max_err);
    /* f32 dot products of 24 terms in [-1,1] and exp of scores |s| < 5: 1e-5 is ~80 ulp of 1. */
    check(max_err < 1e-5, "forward/weights match float64");

    float x[3 * 5] = {1, 2, 3, 4, 5, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                      0, 0, 0, 0, 0};
    float row_lse[3];
    check(attn_softmax(x, 3, 5, 5, row_lse) == ATTN_OK, "softmax");
    check(x[5] == 0.0f && row_lse[1] == -INFINITY, "softmax of a -inf row is 0");
    check(fabs(x[10] - 0.2) < 1e-7, "softmax of a constant row is uniform");
    float ds[5];
    check(attn_softmax_backward(x, x, ds, 1, 5, 5) == ATTN_OK, "softmax_backward");

    float before = out[0];
    shape.q_heads = 3; /* not a multiple of kv_heads */
    check(attn_forward(&shape, &opt, &tq, &tk, &tv, &to, NULL) == ATTN_ERR_ARG, "rejects GQA 3/2");
    check(out[0] == before, "rejected call leaves output untouched");

    attn_threadpool_destroy(pool);
    printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}

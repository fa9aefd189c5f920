/* SPDX-License-Identifier: MIT */
/*
 * A minimal libattn consumer: causal attention over two heads on the
 * built-in thread pool, checked against a naive double-precision loop.
 * Build it with the Makefile (pkg-config) or cmake/CMakeLists.txt
 * (find_package(attn)). Exits non-zero when the library disagrees.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <attn.h>

enum { HEADS = 2, LEN = 8, DIM = 16 };

static float q[HEADS][LEN][DIM], k[HEADS][LEN][DIM], v[HEADS][LEN][DIM];
static float out[HEADS][LEN][DIM];
static float entropy[HEADS][LEN];

/* Deterministic inputs in [-1, 1). */
static float pseudo_random(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1u << 23) - 1.0f;
}

/* Largest |out - reference| over the whole output, causal softmax in double. */
static double max_error(void)
{
    double worst = 0.0;
    for (int h = 0; h < HEADS; h++)
        for (int i = 0; i < LEN; i++) {
            double s[LEN], m = -INFINITY, sum = 0.0;
            for (int j = 0; j <= i; j++) {
                double dot = 0.0;
                for (int d = 0; d < DIM; d++)
                    dot += (double)q[h][i][d] * k[h][j][d];
                s[j] = dot / sqrt((double)DIM);
                m = s[j] > m ? s[j] : m;
            }
            for (int j = 0; j <= i; j++)
                sum += s[j] = exp(s[j] - m);
            for (int d = 0; d < DIM; d++) {
                double ref = 0.0;
                for (int j = 0; j <= i; j++)
                    ref += s[j] / sum * v[h][j][d];
                double err = fabs(ref - out[h][i][d]);
                worst = err > worst ? err : worst;
            }
        }
    return worst;
}

int main(void)
{
    unsigned state = 42;
    for (int h = 0; h < HEADS; h++)
        for (int i = 0; i < LEN; i++)
            for (int d = 0; d < DIM; d++) {
                q[h][i][d] = pseudo_random(&state);
                k[h][i][d] = pseudo_random(&state);
                v[h][i][d] = pseudo_random(&state);
            }

    printf("libattn %s (header %d.%d.%d), ISA %s\n", attn_version_string(),
           ATTN_VERSION_MAJOR, ATTN_VERSION_MINOR, ATTN_VERSION_PATCH,
           attn_isa_name(attn_isa_active()));
    if ((attn_version() >> 16) != ATTN_VERSION_MAJOR) {
        fprintf(stderr, "built against major %d, loaded %s\n", ATTN_VERSION_MAJOR,
                attn_version_string());
        return 1;
    }

    attn_threadpool *pool = NULL;
    attn_status st = attn_threadpool_create(2, &pool);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn_threadpool_create: %s\n", attn_strerror(st));
        return 1;
    }

    /* [batch=1][heads][len][dim], contiguous: strides in elements. */
    const attn_shape shape = {1, HEADS, HEADS, LEN, LEN, DIM, DIM};
    const attn_tensor tq = {q, ATTN_DTYPE_F32, HEADS * LEN * DIM, LEN * DIM, DIM};
    const attn_tensor tk = {k, ATTN_DTYPE_F32, HEADS * LEN * DIM, LEN * DIM, DIM};
    const attn_tensor tv = {v, ATTN_DTYPE_F32, HEADS * LEN * DIM, LEN * DIM, DIM};
    const attn_tensor to = {out, ATTN_DTYPE_F32, HEADS * LEN * DIM, LEN * DIM, DIM};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    opt.parallel_for = attn_threadpool_parallel_for;
    opt.parallel_ctx = pool;
    const attn_row_stats stats = {NULL, NULL, &entropy[0][0]};

    st = attn_forward(&shape, &opt, &tq, &tk, &tv, &to, &stats);
    attn_threadpool_destroy(pool);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn_forward: %s\n", attn_strerror(st));
        return 1;
    }

    printf("entropy of head 0 by query row (nats; row i sees i+1 keys):");
    for (int i = 0; i < LEN; i++)
        printf(" %.3f", entropy[0][i]);
    printf("\n");

    /* f32 dot products of 16 terms and a softmax of <= 8: errors ~1e-6. */
    double err = max_error();
    printf("max |out - reference| = %.3g\n", err);
    if (!(err < 1e-5)) {
        fprintf(stderr, "FAIL: libattn disagrees with the reference\n");
        return 1;
    }
    if (entropy[0][0] != 0.0f) { /* row 0 sees one key: its weight is 1, entropy 0 */
        fprintf(stderr, "FAIL: entropy of a one-key row is %g, not 0\n", entropy[0][0]);
        return 1;
    }
    return 0;
}

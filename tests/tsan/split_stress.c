/* SPDX-License-Identifier: MIT */
/*
 * Split-KV under concurrency, meant to run under ThreadSanitizer (run.sh)
 * and a correctness test in any build: CALLERS threads share one built-in
 * pool and run split-KV decode steps through it at the same time, each with
 * its own workspace (the chunks' partial states, the atomic count that
 * elects the merging task, the merge itself); every result must be bitwise
 * the serial result. Exit 0 when every check held.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

#define CALLERS 3
#define ROUNDS 6
#define HQ 4
#define LK 3000
#define D 32

static float q[HQ * D], k[LK * D], v[LK * D], want[HQ * D], want_lse[HQ];
static attn_threadpool *pool;
static const attn_shape shape = {1, HQ, 1, 1, LK, D, D};

static int run(attn_threadpool *p, void *ws, size_t bytes, float *out, float *lse)
{
    attn_options o = ATTN_OPTIONS_INIT;
    o.flags = ATTN_CAUSAL;
    o.kv_splits = 7;
    o.workspace = ws;
    o.workspace_size = bytes;
    if (p) {
        o.parallel_for = attn_threadpool_parallel_for;
        o.parallel_ctx = p;
    }
    const attn_tensor tq = {q, ATTN_DTYPE_F32, HQ * D, D, D};
    const attn_tensor tk = {k, ATTN_DTYPE_F32, LK * D, LK * D, D};
    const attn_tensor tv = {v, ATTN_DTYPE_F32, LK * D, LK * D, D};
    const attn_tensor to = {out, ATTN_DTYPE_F32, HQ * D, D, D};
    const attn_row_stats st = {lse, NULL, NULL};
    return attn_forward(&shape, &o, &tq, &tk, &tv, &to, &st) != ATTN_OK;
}

static size_t workspace_bytes(void)
{
    attn_options o = ATTN_OPTIONS_INIT;
    o.kv_splits = 7;
    size_t bytes = 0;
    if (attn_forward_workspace_size(&shape, &o, &bytes) != ATTN_OK || bytes == 0) {
        fprintf(stderr, "FAIL: no split planned\n");
        exit(1);
    }
    return bytes;
}

static void *caller(void *arg)
{
    (void)arg;
    const size_t bytes = workspace_bytes();
    void *ws = malloc(bytes);
    float out[HQ * D], lse[HQ];
    long bad = 0;
    for (int r = 0; r < ROUNDS && ws; r++) {
        attn_threadpool *own = NULL;
        if (r % 2 && attn_threadpool_create(2, &own) != ATTN_OK)
            abort();
        bad += run(own ? own : pool, ws, bytes, out, lse);
        bad += memcmp(out, want, sizeof out) != 0 || memcmp(lse, want_lse, sizeof lse) != 0;
        attn_threadpool_destroy(own);
    }
    free(ws);
    return (void *)bad;
}

int main(void)
{
    unsigned s = 12345;
    for (size_t i = 0; i < sizeof q / 4; i++)
        q[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;
    for (size_t i = 0; i < sizeof k / 4; i++) {
        k[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;
        v[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;
    }
    const size_t bytes = workspace_bytes();
    void *ws = malloc(bytes);
    if (!ws || run(NULL, ws, bytes, want, want_lse)) {
        fprintf(stderr, "FAIL: serial split forward\n");
        return 1;
    }
    free(ws);
    if (attn_threadpool_create(3, &pool) != ATTN_OK)
        return 1;
    pthread_t t[CALLERS];
    for (int i = 0; i < CALLERS; i++)
        pthread_create(&t[i], NULL, caller, NULL);
    long bad = 0;
    for (int i = 0; i < CALLERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (long)r;
    }
    attn_threadpool_destroy(pool);
    printf("split-KV stress: %d callers x %d rounds on shared and own pools: %s\n", CALLERS,
           ROUNDS, bad ? "FAIL" : "ok");
    return bad ? 1 : 0;
}

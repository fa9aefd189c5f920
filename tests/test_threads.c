/*
 * Thread-count invariance: attn_forward, attn_weights and attn_scores give
 * the same bits with parallel_for NULL, the built-in pool with 1, 2 and 7
 * threads, and a custom parallel_for that runs the tasks in reverse order.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "workload.h"

typedef struct reverse_pool {
    int calls;
    size_t tasks;
} reverse_pool;

static void reverse_parallel_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    reverse_pool *p = ctx;
    p->calls++;
    p->tasks += count;
    for (size_t i = count; i-- > 0;)
        task(task_ctx, i);
}

/* Everything one run writes, dense. */
typedef struct snapshot {
    float *scores, *weights, *out, *stats;
} snapshot;

static void run_all(workload *w, snapshot *s)
{
    const int64_t rows = wl_rows(w), lk = w->shape.kv_len;
    s->scores = xmalloc((size_t)(rows * lk) * 4);
    s->weights = xmalloc((size_t)(rows * lk) * 4);
    s->out = xmalloc((size_t)(rows * w->dv) * 4);
    s->stats = xmalloc((size_t)rows * 6 * 4);
    wl_poison_outputs(w);
    CHECK(attn_scores(&w->shape, &w->opt, &w->q, &w->k, &w->scores) == ATTN_OK, "scores");
    wl_gather(w, &w->scores, lk, s->scores);
    CHECK(attn_weights(&w->shape, &w->opt, &w->q, &w->k, &w->scores, &w->stats) == ATTN_OK,
          "weights");
    wl_gather(w, &w->scores, lk, s->weights);
    memcpy(s->stats, w->stats.lse, (size_t)rows * 4);
    memcpy(s->stats + rows, w->stats.max_score, (size_t)rows * 4);
    memcpy(s->stats + 2 * rows, w->stats.entropy, (size_t)rows * 4);
    CHECK(attn_forward(&w->shape, &w->opt, &w->q, &w->k, &w->v, &w->out, &w->stats) == ATTN_OK,
          "forward");
    wl_gather(w, &w->out, w->dv, s->out);
    memcpy(s->stats + 3 * rows, w->stats.lse, (size_t)rows * 4);
    memcpy(s->stats + 4 * rows, w->stats.max_score, (size_t)rows * 4);
    memcpy(s->stats + 5 * rows, w->stats.entropy, (size_t)rows * 4);
    wl_check_outputs(w, 1, 1, 1);
}

static void expect_same_snapshot(const workload *w, const snapshot *a, const snapshot *b,
                                 const char *how)
{
    const int64_t rows = wl_rows(w), lk = w->shape.kv_len;
    char name[96];
    snprintf(name, sizeof name, "scores, %s vs serial", how);
    expect_bits(name, b->scores, a->scores, (size_t)(rows * lk));
    snprintf(name, sizeof name, "weights, %s vs serial", how);
    expect_bits(name, b->weights, a->weights, (size_t)(rows * lk));
    snprintf(name, sizeof name, "out, %s vs serial", how);
    expect_bits(name, b->out, a->out, (size_t)(rows * w->dv));
    snprintf(name, sizeof name, "stats, %s vs serial", how);
    expect_bits(name, b->stats, a->stats, (size_t)rows * 6);
}

static void free_snapshot(snapshot *s)
{
    free(s->scores);
    free(s->weights);
    free(s->out);
    free(s->stats);
}

static void check_invariance(const attn_dsp *t, unsigned features)
{
    (void)t;
    workload w;
    wl_make(&w, features);
    harness_context("%s", wl_describe(&w));
    snapshot serial;
    run_all(&w, &serial);

    static const int32_t threads[] = {1, 2, 7};
    for (size_t i = 0; i < 3; i++) {
        attn_threadpool *pool = NULL;
        CHECK(attn_threadpool_create(threads[i], &pool) == ATTN_OK && pool, "pool of %d",
              threads[i]);
        CHECK(attn_threadpool_size(pool) == threads[i], "pool size %d, asked %d",
              attn_threadpool_size(pool), threads[i]);
        w.opt.parallel_for = attn_threadpool_parallel_for;
        w.opt.parallel_ctx = pool;
        snapshot pooled;
        run_all(&w, &pooled);
        char how[32];
        snprintf(how, sizeof how, "pool of %d", threads[i]);
        expect_same_snapshot(&w, &serial, &pooled, how);
        free_snapshot(&pooled);
        attn_threadpool_destroy(pool);
    }

    reverse_pool rp = {0, 0};
    w.opt.parallel_for = reverse_parallel_for;
    w.opt.parallel_ctx = &rp;
    snapshot reversed;
    run_all(&w, &reversed);
    expect_same_snapshot(&w, &serial, &reversed, "reverse-order parallel_for");
    CHECK(rp.calls == 3, "parallel_for called %d times for 3 operations", rp.calls);
    free_snapshot(&reversed);
    free_snapshot(&serial);
    wl_free(&w);
}

static const unsigned thread_specs[] = {
    0,
    WL_CAUSAL | WL_LENS,
    WL_DECODE | WL_GQA,
    WL_DECODE | WL_MQA | WL_LENS,
    WL_GQA | WL_CAUSAL | WL_WINDOW | WL_BLHD,
    WL_Q_LONG | WL_MASK | WL_BIAS | WL_SOFTCAP | WL_F16,
    WL_BIG_HEAD | WL_Q_SHORT | WL_BF16,
};

/* On the active ISA (the public API), for every table through *_with. */
Test(threads, results_independent_of_thread_count, .timeout = ATTN_TEST_TIMEOUT)
{
    harness_begin_plain("threads");
    for (int rep = 0; rep < 2; rep++)
        for (size_t i = 0; i < sizeof thread_specs / sizeof thread_specs[0]; i++)
            check_invariance(NULL, thread_specs[i]);
}

Test(threads, pool_size_defaults)
{
    attn_threadpool *pool = NULL;
    cr_assert_eq(attn_threadpool_create(0, &pool), ATTN_OK);
    cr_assert(attn_threadpool_size(pool) >= 1);
    attn_threadpool_destroy(pool);
    cr_assert_eq(attn_threadpool_create(1, &pool), ATTN_OK);
    cr_assert_eq(attn_threadpool_size(pool), 1);
    attn_threadpool_destroy(pool);
}

/* Tasks run on the pool really cover every index exactly once. */
typedef struct count_ctx {
    unsigned char *hit;
} count_ctx;

static void count_task(void *ctx, size_t i)
{
    __atomic_fetch_add(&((count_ctx *)ctx)->hit[i], 1, __ATOMIC_RELAXED);
}

Test(threads, pool_runs_every_task_once)
{
    for (int32_t n = 1; n <= 7; n += 3) {
        attn_threadpool *pool;
        cr_assert_eq(attn_threadpool_create(n, &pool), ATTN_OK);
        static const size_t counts[] = {0, 1, 2, 3, 7, 64, 1000};
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            count_ctx ctx = {xcalloc0(counts[c] + 1, 1)};
            attn_threadpool_parallel_for(pool, count_task, &ctx, counts[c]);
            for (size_t i = 0; i < counts[c]; i++)
                cr_assert_eq(ctx.hit[i], 1, "threads %d count %zu: task %zu ran %d times", n,
                             counts[c], i, ctx.hit[i]);
            free(ctx.hit);
        }
        attn_threadpool_destroy(pool);
    }
}

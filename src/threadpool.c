/* SPDX-License-Identifier: MIT */
/*
 * The built-in pool: N-1 workers plus the calling thread pull task indices
 * from one atomic counter. Which thread runs a task never changes a result
 * (the library's tasks write disjoint outputs), so the dynamic schedule is
 * free to balance uneven tasks such as causal rows.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "attn.h"
#include "internal.h"

#define MAX_THREADS 1024

struct attn_threadpool {
    int32_t size;
    int32_t workers_started;
    pthread_t *workers;

    pthread_mutex_t call_lock; /* one parallel_for at a time */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    uint64_t generation; /* bumped per job */
    int shutdown;
    int32_t busy; /* workers that have not finished the current job */

    attn_task_fn task;
    void *task_ctx;
    size_t count;
    atomic_size_t next;
};

static void run_available_tasks(attn_threadpool *pool)
{
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
        if (i >= pool->count)
            return;
        pool->task(pool->task_ctx, i);
    }
}

static void *worker_main(void *arg)
{
    attn_threadpool *pool = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->shutdown && pool->generation == seen)
            pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->shutdown)
            break;
        seen = pool->generation;
        pthread_mutex_unlock(&pool->lock);
        run_available_tasks(pool);
        pthread_mutex_lock(&pool->lock);
        if (--pool->busy == 0)
            pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

static void stop_workers(attn_threadpool *pool)
{
    pthread_mutex_lock(&pool->lock);
    pool->shutdown = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int32_t i = 0; i < pool->workers_started; i++)
        pthread_join(pool->workers[i], NULL);
}

static attn_status checked_threadpool_create(int32_t threads, attn_threadpool **out)
{
    if (!out)
        return ATTN_ERR_NULL;
    if (threads < 0)
        return ATTN_ERR_ARG;
    if (threads == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        threads = online > 0 ? (int32_t)(online < MAX_THREADS ? online : MAX_THREADS) : 1;
    }
    if (threads > MAX_THREADS)
        return ATTN_ERR_ARG;

    attn_threadpool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return ATTN_ERR_NOMEM;
    pool->size = threads;
    if (threads > 1) {
        pool->workers = calloc((size_t)(threads - 1), sizeof *pool->workers);
        if (!pool->workers) {
            free(pool);
            return ATTN_ERR_NOMEM;
        }
    }
    pthread_mutex_init(&pool->call_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->next, 0);

    for (int32_t i = 0; i < threads - 1; i++) {
        if (pthread_create(&pool->workers[i], NULL, worker_main, pool) != 0) {
            stop_workers(pool);
            attn_threadpool_destroy(pool);
            return ATTN_ERR_NOMEM;
        }
        pool->workers_started++;
    }
    *out = pool;
    return ATTN_OK;
}

attn_status attn_threadpool_create(int32_t threads, attn_threadpool **out)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_threadpool_create", mark, checked_threadpool_create(threads, out));
}

void attn_threadpool_destroy(attn_threadpool *pool)
{
    if (!pool)
        return;
    if (!pool->shutdown)
        stop_workers(pool);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->call_lock);
    free(pool->workers);
    free(pool);
}

int32_t attn_threadpool_size(const attn_threadpool *pool)
{
    return pool ? pool->size : 0;
}

void attn_threadpool_parallel_for(void *pool_ctx, attn_task_fn task, void *task_ctx,
                                  size_t count)
{
    attn_threadpool *pool = pool_ctx;
    if (count == 0 || !task)
        return;
    if (!pool || pool->workers_started == 0 || count == 1) {
        for (size_t i = 0; i < count; i++)
            task(task_ctx, i);
        return;
    }
    pthread_mutex_lock(&pool->call_lock);
    pthread_mutex_lock(&pool->lock);
    pool->task = task;
    pool->task_ctx = task_ctx;
    pool->count = count;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    pool->busy = pool->workers_started;
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    run_available_tasks(pool);

    pthread_mutex_lock(&pool->lock);
    while (pool->busy > 0)
        pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->call_lock);
}

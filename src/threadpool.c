/* SPDX-License-Identifier: MIT */
/*
 * The built-in pool: N-1 workers plus the calling thread pull task indices
 * from one atomic counter. Which thread runs a task never changes a result
 * (the library's tasks write disjoint outputs), so the dynamic schedule is
 * free to balance uneven tasks such as causal rows.
 *
 * fork() copies a pool but none of its workers: a child's first call would
 * wait forever for them. Every live pool is on a list that a pthread_atfork
 * child handler walks, resetting each pool's locks and marking its workers
 * gone; the pool's next call in the child starts them again (as OpenBLAS
 * and torch do).
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT_S */
#include <pthread.h>
#include <sched.h>
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
    uint64_t start_generation; /* the generation workers start from */
    int shutdown;
    int32_t busy; /* workers that have not finished the current job */

    attn_task_fn task;
    void *task_ctx;
    size_t count;
    atomic_size_t next;

    attn_threadpool *prev, *next_pool; /* the list of live pools */
};

/* Every live pool, for the fork handler; registry_lock is held across
   fork() so the child sees the list whole. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static attn_threadpool *registry;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
    pthread_mutex_lock(&registry_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&registry_lock);
}

/* The child runs only the forking thread: the workers are gone, and any
   pool lock another thread held stays held. Fresh locks, no workers; the
   worker handles of the parent are dropped, never joined. */
static void atfork_child(void)
{
    for (attn_threadpool *pool = registry; pool; pool = pool->next_pool) {
        pthread_mutex_init(&pool->call_lock, NULL);
        pthread_mutex_init(&pool->lock, NULL);
        pthread_cond_init(&pool->wake, NULL);
        pthread_cond_init(&pool->done, NULL);
        pool->workers_started = 0;
        pool->generation = 0;
        pool->busy = 0;
        pool->shutdown = 0;
    }
    pthread_mutex_unlock(&registry_lock);
}

static void register_atfork(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void registry_add(attn_threadpool *pool)
{
    pthread_mutex_lock(&registry_lock);
    pool->next_pool = registry;
    if (registry)
        registry->prev = pool;
    registry = pool;
    pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(attn_threadpool *pool)
{
    pthread_mutex_lock(&registry_lock);
    if (pool->prev)
        pool->prev->next_pool = pool->next_pool;
    else if (registry == pool)
        registry = pool->next_pool;
    if (pool->next_pool)
        pool->next_pool->prev = pool->prev;
    pthread_mutex_unlock(&registry_lock);
}

/* CPUs this thread may run on (taskset, cgroup cpusets), as nproc counts. */
static int32_t usable_cpus(void)
{
#ifdef __linux__
    for (size_t n = 1024; n <= 65536; n *= 4) {
        cpu_set_t *set = CPU_ALLOC(n);
        if (!set)
            break;
        const size_t bytes = CPU_ALLOC_SIZE(n);
        if (sched_getaffinity(0, bytes, set) == 0) {
            const int count = CPU_COUNT_S(bytes, set);
            CPU_FREE(set);
            if (count > 0)
                return count < MAX_THREADS ? count : MAX_THREADS;
            break;
        }
        CPU_FREE(set);
    }
#endif
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int32_t)(online < MAX_THREADS ? online : MAX_THREADS) : 1;
}

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
    pthread_mutex_lock(&pool->lock);
    uint64_t seen = pool->start_generation;
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

/* Starts the workers a pool lacks: all at creation, again in a forked
   child. Nonzero when one could not be started. */
static int start_workers(attn_threadpool *pool)
{
    /* No job is in flight here (creation, or under call_lock), and every
       worker started earlier has read start_generation: a job waits for
       all of them. */
    if (pool->workers_started >= pool->size - 1)
        return 0;
    pool->start_generation = pool->generation;
    while (pool->workers_started < pool->size - 1) {
        if (pthread_create(&pool->workers[pool->workers_started], NULL, worker_main, pool) != 0)
            return -1;
        pool->workers_started++;
    }
    return 0;
}

static attn_status checked_threadpool_create(int32_t threads, attn_threadpool **out)
{
    if (!out)
        return ATTN_ERR_NULL;
    if (threads < 0)
        return attn_fail(ATTN_ERR_ARG, "threads = %d: 0 (one per usable CPU) or more",
                         (int)threads);
    if (threads == 0)
        threads = usable_cpus();
    if (threads > MAX_THREADS)
        return attn_fail(ATTN_ERR_ARG, "threads = %d: at most %d", (int)threads, MAX_THREADS);

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

    if (start_workers(pool) != 0) {
        stop_workers(pool);
        attn_threadpool_destroy(pool);
        return ATTN_ERR_NOMEM;
    }
    pthread_once(&atfork_once, register_atfork);
    registry_add(pool);
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
    if (!pool->shutdown) {
        registry_remove(pool);
        stop_workers(pool);
    }
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
    if (!pool || pool->size == 1 || count == 1) {
        for (size_t i = 0; i < count; i++)
            task(task_ctx, i);
        return;
    }
    pthread_mutex_lock(&pool->call_lock);
    /* In a forked child the workers are started again here; the ones that
       cannot be (no threads left) leave their share to the others. */
    start_workers(pool);
    if (pool->workers_started == 0) {
        pthread_mutex_unlock(&pool->call_lock);
        for (size_t i = 0; i < count; i++)
            task(task_ctx, i);
        return;
    }
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

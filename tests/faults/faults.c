/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for the built-in thread pool, and proof that the
 * operations never allocate.
 *
 * The test is linked with -Wl,--wrap for malloc, calloc, realloc, free,
 * aligned_alloc, posix_memalign and pthread_create, so every call the
 * library's own code makes to them comes here first (calls made inside libc
 * or other shared libraries do not; those are not the library's).
 *
 *  - attn_threadpool_create(n) with the k-th allocation failing, for every k
 *    up to the number of allocations a successful create makes, and with the
 *    k-th pthread_create failing, for every k < n: ATTN_ERR_NOMEM, *pool
 *    untouched, every byte allocated so far freed, and every thread started
 *    so far joined (counted through pthread_join's wrapper).
 *  - After a successful create and a destroy, nothing is left allocated.
 *  - Every operation of tests/ops_list.h (those that take options with and
 *    without the built-in pool; attn_backward in both plans) makes no
 *    allocation at all, on every kernel table, including the first call
 *    that initialises dispatch.
 * LSan (an ASan build) or valgrind double-checks the leak accounting.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "expect.h"
#include "internal.h"
#include "ops_list.h"

/* ------------------------------------------------------------ the wrappers */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg);
int __real_pthread_join(pthread_t t, void **ret);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg);
int __wrap_pthread_join(pthread_t t, void **ret);

/* Counters are atomic: the pool's workers may call free/join concurrently. */
static atomic_long alloc_calls;   /* allocation calls seen */
static atomic_long live_blocks;   /* allocated and not yet freed */
static atomic_long fail_alloc_at; /* fail the n-th allocation (1-based); 0: never */
static atomic_long thread_calls, threads_live, fail_thread_at;

/* Decides whether this allocation call fails. */
static int alloc_should_fail(void)
{
    long n = atomic_fetch_add(&alloc_calls, 1) + 1;
    return atomic_load(&fail_alloc_at) == n;
}

void *__wrap_malloc(size_t n)
{
    if (alloc_should_fail())
        return NULL;
    void *p = __real_malloc(n);
    if (p)
        atomic_fetch_add(&live_blocks, 1);
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (alloc_should_fail())
        return NULL;
    void *p = __real_calloc(n, size);
    if (p)
        atomic_fetch_add(&live_blocks, 1);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    if (alloc_should_fail())
        return NULL;
    void *q = __real_realloc(p, n);
    if (q && !p)
        atomic_fetch_add(&live_blocks, 1);
    return q;
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    if (alloc_should_fail())
        return NULL;
    void *p = __real_aligned_alloc(align, n);
    if (p)
        atomic_fetch_add(&live_blocks, 1);
    return p;
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    if (alloc_should_fail())
        return ENOMEM;
    int r = __real_posix_memalign(p, align, n);
    if (r == 0)
        atomic_fetch_add(&live_blocks, 1);
    return r;
}

void __wrap_free(void *p)
{
    if (p)
        atomic_fetch_sub(&live_blocks, 1);
    __real_free(p);
}

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg)
{
    long n = atomic_fetch_add(&thread_calls, 1) + 1;
    if (atomic_load(&fail_thread_at) == n)
        return EAGAIN;
    int r = __real_pthread_create(t, attr, fn, arg);
    if (r == 0)
        atomic_fetch_add(&threads_live, 1);
    return r;
}

int __wrap_pthread_join(pthread_t t, void **ret)
{
    int r = __real_pthread_join(t, ret);
    if (r == 0)
        atomic_fetch_sub(&threads_live, 1);
    return r;
}

/* ------------------------------------------------------------ checks */

static void reset_counters(void)
{
    atomic_store(&alloc_calls, 0);
    atomic_store(&fail_alloc_at, 0);
    atomic_store(&thread_calls, 0);
    atomic_store(&fail_thread_at, 0);
}

/* attn_threadpool_create(threads) with the k-th of n allocations or thread
   starts (`what`, by its counter `fail_at`) failing: ATTN_ERR_NOMEM, *pool
   untouched, nothing leaked. */
static void create_failing(int32_t threads, atomic_long *fail_at, long k, long n,
                           const char *what, long live0, long threads0)
{
    attn_threadpool *pool;
    reset_counters();
    atomic_store(fail_at, k);
    attn_threadpool *const sentinel = (attn_threadpool *)&pool;
    pool = sentinel;
    const attn_status st = attn_threadpool_create(threads, &pool);
    atomic_store(fail_at, 0);
    EXPECT(st == ATTN_ERR_NOMEM, "create(%d) with %s %ld of %ld failing: %d", threads, what, k,
           n, st);
    EXPECT(pool == sentinel, "create(%d) wrote *pool although it failed", threads);
    EXPECT(atomic_load(&live_blocks) == live0, "create(%d) with %s %ld failing leaks %ld blocks",
           threads, what, k, atomic_load(&live_blocks) - live0);
    EXPECT(atomic_load(&threads_live) == threads0,
           "create(%d) with %s %ld failing leaves %ld threads running", threads, what, k,
           atomic_load(&threads_live) - threads0);
    if (st == ATTN_OK)
        attn_threadpool_destroy(pool);
}

/* attn_threadpool_create(threads) with every possible single failure. */
static void pool_faults(int32_t threads)
{
    attn_threadpool *pool = NULL;
    /* a clean run: how many allocations and threads does it take? */
    reset_counters();
    const long live0 = atomic_load(&live_blocks), threads0 = atomic_load(&threads_live);
    EXPECT(attn_threadpool_create(threads, &pool) == ATTN_OK, "create(%d)", threads);
    const long allocs = atomic_load(&alloc_calls), spawns = atomic_load(&thread_calls);
    attn_threadpool_destroy(pool);
    EXPECT(atomic_load(&live_blocks) == live0 && atomic_load(&threads_live) == threads0,
           "create(%d) + destroy leaves %ld blocks and %ld threads", threads,
           atomic_load(&live_blocks) - live0, atomic_load(&threads_live) - threads0);
    EXPECT(spawns == (threads == 0 ? spawns : threads - 1), "create(%d) started %ld threads",
           threads, spawns);

    for (long k = 1; k <= allocs; k++)
        create_failing(threads, &fail_alloc_at, k, allocs, "allocation", live0, threads0);
    for (long k = 1; k <= spawns; k++)
        create_failing(threads, &fail_thread_at, k, spawns, "thread", live0, threads0);
    printf("pool(%d): %ld allocations and %ld threads, each failure -> ATTN_ERR_NOMEM, no leak\n",
           threads, allocs, spawns);
}

/* ------------------------------------------------------------ operations allocate nothing */

#define B 2
#define HQ 4
#define HKV 2
#define LQ 37
#define LK 300
#define D 48
#define DV 40

static float qd[B * HQ * LQ * D], kd[B * HKV * LK * D], vd[B * HKV * LK * DV];
static float sd[B * HQ * LQ * LK], od[B * HQ * LQ * DV], bias[B * HQ * LQ * LK];
static float lse[B * HQ * LQ], mx[B * HQ * LQ], ent[B * HQ * LQ], dp[B * HQ * LQ * LK];
static uint8_t maskd[B * HQ * LQ * LK];
/* attn_backward's gradients (dbias broadcast-free, full shape) */
static float dqd[B * HQ * LQ * D], dkd[B * HKV * LK * D], dvd[B * HKV * LK * DV],
    dbd[B * HQ * LQ * LK];

/* attn_backward with dout = out, in both of its plans; the first failure's
   status. */
static attn_status run_backward(const attn_dsp *dsp, const attn_shape *shape,
                                const attn_options *opt, const attn_tensor *q,
                                const attn_tensor *k, const attn_tensor *v, const attn_tensor *o)
{
    const attn_tensor dq = {dqd, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    const attn_tensor dk = {dkd, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
    const attn_tensor dv = {dvd, ATTN_DTYPE_F32, HKV * LK * DV, LK * DV, DV};
    const attn_tensor db = {dbd, ATTN_DTYPE_F32, HQ * LQ * LK, LQ * LK, LK};
    attn_grads g = ATTN_GRADS_INIT;
    g.dq = &dq;
    g.dk = &dk;
    g.dv = &dv;
    g.dbias = &db;
    const int64_t plans[2] = {1, INT64_MAX}; /* fused, split (src/driver/backward.c) */
    const int64_t keep = attn_bwd_fused_min_tasks;
    attn_status r = ATTN_OK;
    for (int plan = 0; plan < 2 && r == ATTN_OK; plan++) {
        attn_bwd_fused_min_tasks = plans[plan];
        r = dsp ? attn_backward_with(dsp, shape, opt, q, k, v, o, o, lse, &g)
                : attn_backward(shape, opt, q, k, v, o, o, lse, &g);
    }
    attn_bwd_fused_min_tasks = keep;
    return r;
}

/* Runs every operation on `dsp` (NULL: the public entry points), in the
   order of tests/ops_list.h: the backward takes the forward's output and the
   lse the softmax left. */
static void run_all(const attn_dsp *dsp, attn_threadpool *pool)
{
    const attn_shape shape = {B, HQ, HKV, LQ, LK, D, DV};
    const attn_tensor q = {qd, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    const attn_tensor k = {kd, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
    const attn_tensor v = {vd, ATTN_DTYPE_F32, HKV * LK * DV, LK * DV, DV};
    const attn_tensor s = {sd, ATTN_DTYPE_F32, HQ * LQ * LK, LQ * LK, LK};
    const attn_tensor o = {od, ATTN_DTYPE_F32, HQ * LQ * DV, LQ * DV, DV};
    const attn_tensor m = {maskd, ATTN_DTYPE_BOOL, HQ * LQ * LK, LQ * LK, LK};
    const attn_tensor bt = {bias, ATTN_DTYPE_F32, 0, LQ * LK, LK}; /* broadcast over batch */
    const int32_t kv_lens[B] = {LK, 200};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    opt.softcap = 30.0f;
    opt.window = 64;
    opt.kv_lens = kv_lens;
    opt.mask = &m;
    opt.bias = &bt;
    if (pool) {
        opt.parallel_for = attn_threadpool_parallel_for;
        opt.parallel_ctx = pool;
    }
    const attn_row_stats st = {lse, mx, ent};
    for (int i = 0; i < OP_COUNT; i++) {
        attn_status r = ATTN_ERR_ARG;
        switch ((op_kind)i) {
        case OP_SCORES:
            r = dsp ? attn_scores_with(dsp, &shape, &opt, &q, &k, &s)
                    : attn_scores(&shape, &opt, &q, &k, &s);
            break;
        case OP_MASK_APPLY:
            r = dsp ? attn_mask_apply_with(dsp, &shape, &opt, &s) : attn_mask_apply(&shape, &opt, &s);
            break;
        case OP_WEIGHTS:
            r = dsp ? attn_weights_with(dsp, &shape, &opt, &q, &k, &s, &st)
                    : attn_weights(&shape, &opt, &q, &k, &s, &st);
            break;
        case OP_FORWARD:
            r = dsp ? attn_forward_with(dsp, &shape, &opt, &q, &k, &v, &o, &st)
                    : attn_forward(&shape, &opt, &q, &k, &v, &o, &st);
            break;
        case OP_SOFTMAX:
            r = dsp ? attn_softmax_with(dsp, sd, B * HQ * LQ, LK, LK, lse)
                    : attn_softmax(sd, B * HQ * LQ, LK, LK, lse);
            break;
        case OP_SOFTMAX_BWD:
            r = dsp ? attn_softmax_backward_with(dsp, sd, dp, dp, B * HQ * LQ, LK, LK)
                    : attn_softmax_backward(sd, dp, dp, B * HQ * LQ, LK, LK);
            break;
        case OP_MERGE: { /* two partials (the forward's output twice), into dq's memory */
            const attn_partial parts[2] = {{o, lse}, {o, lse}};
            const attn_tensor mo = {dqd, ATTN_DTYPE_F32, HQ * LQ * DV, LQ * DV, DV};
            r = dsp ? attn_merge_with(dsp, &shape, &opt, parts, 2, &mo, mx)
                    : attn_merge(&shape, &opt, parts, 2, &mo, mx);
            break;
        }
        case OP_BACKWARD:
            r = run_backward(dsp, &shape, &opt, &q, &k, &v, &o);
            break;
        case OP_QUANTIZE: /* no kernel table: the same call for every dsp */
            r = attn_quantize(ATTN_DTYPE_FP8_E4M3, qd, B * HQ * LQ, D, D, dbd, D, 0.0f);
            break;
        case OP_PLAN_FORWARD: { /* planned in static memory, run once */
            static unsigned char mem[16384];
            attn_plan *plan = NULL;
            r = dsp ? attn_plan_forward_with(dsp, mem, sizeof mem, &shape, &opt, &q, &k, &v, &o,
                                             &st, &plan)
                    : attn_plan_forward(mem, sizeof mem, &shape, &opt, &q, &k, &v, &o, &st, &plan);
            if (r == ATTN_OK)
                r = attn_plan_run(plan, qd, kd, vd, od, &st);
            break;
        }
        case OP_FORWARD_SOURCES: { /* k and v again as the second source, 16 keys a row */
            static int32_t lists[B * LQ * 16];
            for (int e = 0; e < B * LQ * 16; e++)
                lists[e] = (e * 37) % LK;
            const attn_kv_source x = {sizeof x, 0, LK, &k, &v, NULL, lists, 16,
                                      NULL, NULL, 0, 0, NULL, 0};
            r = dsp ? attn_forward_sources_with(dsp, &shape, &opt, &q, &k, &v, &x, &o, &st)
                    : attn_forward_sources(&shape, &opt, &q, &k, &v, &x, &o, &st);
            break;
        }
        case OP_CACHE_APPEND: { /* q's rows as the new tokens, into BF16 and FP8 caches */
            const attn_tensor kn = {qd, ATTN_DTYPE_F32, HKV * LQ * D, LQ * D, D};
            const attn_tensor kc = {dkd, ATTN_DTYPE_BF16, HKV * LK * D, LK * D, D};
            const attn_tensor vc = {dvd, ATTN_DTYPE_FP8_E4M3, HKV * LK * DV, LK * DV, DV};
            r = dsp ? attn_cache_append_with(dsp, &shape, &opt, &kn, &kn, &kc, &vc)
                    : attn_cache_append(&shape, &opt, &kn, &kn, &kc, &vc);
            break;
        }
        case OP_COUNT:
            break;
        }
        EXPECT(r == ATTN_OK, "%s on %s: status %d", op_names[i], dsp ? dsp->isa_name : "auto", r);
    }
}

static void operations_do_not_allocate(void)
{
    for (size_t i = 0; i < sizeof qd / 4; i++) qd[i] = (float)((i * 7919) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < sizeof kd / 4; i++) kd[i] = (float)((i * 104729) % 17) / 17.0f - 0.5f;
    for (size_t i = 0; i < sizeof vd / 4; i++) vd[i] = (float)((i * 31) % 11) / 11.0f - 0.5f;
    for (size_t i = 0; i < sizeof bias / 4; i++) bias[i] = (float)(i % 5) * 0.1f;
    for (size_t i = 0; i < sizeof maskd; i++) maskd[i] = i % 7 != 0;
    for (size_t i = 0; i < sizeof dp / 4; i++) dp[i] = (float)(i % 9) * 0.25f - 1.0f;

    /* the very first calls also set up dispatch: counted too */
    reset_counters();
    run_all(NULL, NULL);
    EXPECT(atomic_load(&alloc_calls) == 0, "the first calls (dispatch set-up) allocated %ld times",
           atomic_load(&alloc_calls));
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) {
        const attn_dsp *dsp = attn_dsp_for_isa((attn_isa)isa);
        if (!dsp)
            continue;
        reset_counters();
        run_all(dsp, NULL);
        EXPECT(atomic_load(&alloc_calls) == 0, "operations on %s allocated %ld times",
               dsp->isa_name, atomic_load(&alloc_calls));
        printf("operations on %s: %ld allocations\n", dsp->isa_name, atomic_load(&alloc_calls));
    }
    attn_threadpool *pool;
    if (attn_threadpool_create(3, &pool) != ATTN_OK) {
        EXPECT(0, "create(3)");
        return;
    }
    reset_counters();
    run_all(NULL, pool);
    EXPECT(atomic_load(&alloc_calls) == 0 && atomic_load(&thread_calls) == 0,
           "operations through the built-in pool allocated %ld times, started %ld threads",
           atomic_load(&alloc_calls), atomic_load(&thread_calls));
    printf("operations through the built-in pool: %ld allocations, %ld threads started\n",
           atomic_load(&alloc_calls), atomic_load(&thread_calls));
    attn_threadpool_destroy(pool);
}

int main(void)
{
    /* sanity: the wrappers are linked in (a failing allocation is seen) */
    /* through a volatile pointer, so the compiler cannot elide the call */
    void *(*volatile alloc_fn)(size_t) = malloc;
    reset_counters();
    atomic_store(&fail_alloc_at, 1);
    void *probe = alloc_fn(16);
    atomic_store(&fail_alloc_at, 0);
    if (probe != NULL || atomic_load(&alloc_calls) != 1) {
        fprintf(stderr, "FAIL: malloc is not wrapped (link with -Wl,--wrap=malloc)\n");
        return 1;
    }

    operations_do_not_allocate();
    const int32_t sizes[] = {1, 2, 3, 5, 8, 0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        pool_faults(sizes[i]);
    /* the argument checks come before any allocation */
    attn_threadpool *pool = NULL;
    reset_counters();
    EXPECT(attn_threadpool_create(-1, &pool) == ATTN_ERR_ARG && pool == NULL, "create(-1)");
    EXPECT(attn_threadpool_create(1025, &pool) == ATTN_ERR_ARG && pool == NULL, "create(1025)");
    EXPECT(attn_threadpool_create(2, NULL) == ATTN_ERR_NULL, "create(2, NULL)");
    EXPECT(atomic_load(&alloc_calls) == 0 && atomic_load(&thread_calls) == 0,
           "rejected creates allocated %ld times", atomic_load(&alloc_calls));
    EXPECT(atomic_load(&live_blocks) == 0, "%ld blocks the library allocated are still live",
           atomic_load(&live_blocks));
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

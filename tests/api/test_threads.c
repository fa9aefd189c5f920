/* SPDX-License-Identifier: MIT */
/*
 * Thread-count invariance: attn_forward, attn_weights and attn_scores give
 * the same bits with parallel_for NULL, the built-in pool with 1, 2 and 7
 * threads, and a custom parallel_for that runs the tasks in reverse order;
 * the built-in pool survives fork() and sizes itself by the CPU affinity.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
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

/* ------------------------------------------------------------------ fork */

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* A parallel_for on the pool that covers every index once (0 when it does). */
static int pool_covers(attn_threadpool *pool, size_t count)
{
    count_ctx ctx = {xcalloc0(count + 1, 1)};
    attn_threadpool_parallel_for(pool, count_task, &ctx, count);
    int bad = 0;
    for (size_t i = 0; i < count; i++)
        bad |= ctx.hit[i] != 1;
    free(ctx.hit);
    return bad;
}

typedef struct busy_ctx {
    attn_threadpool *pool;
    atomic_int stop, calls;
} busy_ctx;

/* Keeps the pool inside parallel_for, so fork() lands mid-call. */
static void *busy_caller(void *arg)
{
    busy_ctx *b = arg;
    while (!atomic_load(&b->stop)) {
        pool_covers(b->pool, 4096);
        atomic_fetch_add(&b->calls, 1);
    }
    return NULL;
}

/* In the child: the inherited pool runs every task once, and a forward on
   it gives the serial call's bits; the exit status says which failed. */
static int child_uses_pool(attn_threadpool *pool)
{
    if (pool_covers(pool, 1000) || pool_covers(pool, 3))
        return 1;
    workload w;
    wl_make(&w, WL_CAUSAL | WL_GQA | WL_LENS);
    const size_t n = (size_t)(wl_rows(&w) * w.dv);
    float *serial = xmalloc(n * 4), *pooled = xmalloc(n * 4);
    int bad = attn_forward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, NULL) != ATTN_OK;
    wl_gather(&w, &w.out, w.dv, serial);
    w.opt.parallel_for = attn_threadpool_parallel_for;
    w.opt.parallel_ctx = pool;
    bad |= attn_forward(&w.shape, &w.opt, &w.q, &w.k, &w.v, &w.out, NULL) != ATTN_OK;
    wl_gather(&w, &w.out, w.dv, pooled);
    bad |= memcmp(serial, pooled, n * 4) != 0;
    free(serial);
    free(pooled);
    wl_free(&w);
    if (bad)
        return 2;
    attn_threadpool_destroy(pool); /* joins only the child's own workers */
    return 0;
}

static void expect_child_ok(pid_t pid, const char *when)
{
    cr_assert(pid >= 0, "fork failed");
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s: the forked child %s %d (1: tasks lost, 2: forward wrong)", when,
              WIFEXITED(status) ? "exited" : "died of signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* A pool the parent used works in a forked child (it hung there before:
   the child has no workers). The test's timeout catches a hang. */
Test(threads, pool_survives_fork, .timeout = ATTN_TEST_TIMEOUT)
{
    attn_threadpool *pool;
    cr_assert_eq(attn_threadpool_create(3, &pool), ATTN_OK);
    cr_assert_eq(pool_covers(pool, 1000), 0);

    pid_t pid = fork();
    if (pid == 0)
        _exit(child_uses_pool(pool));
    expect_child_ok(pid, "fork between calls");

    /* fork while another thread is inside parallel_for: the child inherits
       the pool's locks held by a thread it does not have */
    busy_ctx b = {.pool = pool};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, busy_caller, &b), 0);
    while (atomic_load(&b.calls) < 3)
        sched_yield();
    for (int i = 0; i < 8; i++) {
        pid = fork();
        if (pid == 0)
            _exit(child_uses_pool(pool));
        expect_child_ok(pid, "fork during another thread's call");
    }
    atomic_store(&b.stop, 1);
    pthread_join(t, NULL);

    /* and the parent's pool is unharmed */
    cr_assert_eq(pool_covers(pool, 1000), 0);
    attn_threadpool_destroy(pool);
}

/* threads = 0 counts the CPUs the caller may run on, not those online. */
Test(threads, pool_default_follows_affinity)
{
    cpu_set_t all, one;
    cr_assert_eq(sched_getaffinity(0, sizeof all, &all), 0);
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
    attn_threadpool *pool;
    cr_assert_eq(attn_threadpool_create(0, &pool), ATTN_OK);
    const int32_t size = attn_threadpool_size(pool);
    attn_threadpool_destroy(pool);
    cr_assert_eq(sched_setaffinity(0, sizeof all, &all), 0);
    cr_assert_eq(size, 1, "a pool of %d threads on one allowed CPU", size);
    cr_assert_eq(attn_threadpool_create(0, &pool), ATTN_OK);
    cr_assert_eq(attn_threadpool_size(pool), CPU_COUNT(&all));
    attn_threadpool_destroy(pool);
}

/* ------------------------------------------------------------ task stack */

/*
 * attn.h promises that one task uses at most ATTN_TASK_STACK_BYTES of stack
 * (engines size their worker threads by it). Each task runs here on a thread
 * of its own whose stack was filled with a pattern; the lowest byte the task
 * changed, below the thread function's frame, is its use. Sanitizers grow
 * frames with redzones (or move them to a fake stack), and -O0 keeps the
 * locals of every always-inline kernel apart, so the bound (and this check)
 * is for optimized builds without sanitizers.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__OPTIMIZE__)
#define STACK_MEASURABLE 0 /* sanitizers, and -O0, which keeps every inlined
                              kernel's locals apart (attn.h: optimized builds) */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define STACK_MEASURABLE 0
#endif
#endif
#ifndef STACK_MEASURABLE
#define STACK_MEASURABLE 1
#endif

#define PROBE_STACK_BYTES ((size_t)1 << 20)
#define PROBE_PATTERN 0xa5

typedef struct stack_probe {
    attn_task_fn task;
    void *task_ctx;
    size_t index;
    uintptr_t entry; /* an address in the thread function's own frame */
} stack_probe;

static void *probe_thread(void *arg)
{
    stack_probe *p = arg;
    volatile char here = 0;
    p->entry = (uintptr_t)&here;
    p->task(p->task_ctx, p->index);
    return NULL;
}

typedef struct stack_pool {
    unsigned char *mem;
    size_t worst;
} stack_pool;

static void stack_parallel_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    stack_pool *sp = ctx;
    for (size_t i = 0; i < count; i++) {
        memset(sp->mem, PROBE_PATTERN, PROBE_STACK_BYTES);
        pthread_attr_t attr;
        cr_assert_eq(pthread_attr_init(&attr), 0);
        cr_assert_eq(pthread_attr_setstack(&attr, sp->mem, PROBE_STACK_BYTES), 0);
        stack_probe p = {task, task_ctx, i, 0};
        pthread_t t;
        cr_assert_eq(pthread_create(&t, &attr, probe_thread, &p), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        pthread_attr_destroy(&attr);
        size_t lowest = 0;
        while (lowest < PROBE_STACK_BYTES && sp->mem[lowest] == PROBE_PATTERN)
            lowest++;
        const uintptr_t low = (uintptr_t)sp->mem + lowest;
        if (p.entry > low && p.entry - low > sp->worst)
            sp->worst = p.entry - low;
    }
}

static attn_tensor dense(void *data, attn_dtype dt, int64_t heads, int64_t rows, int64_t cols)
{
    return (attn_tensor){data, dt, heads * rows * cols, rows * cols, cols};
}

static float *filled(size_t n)
{
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 2001u) / 1000.0f - 1.0f;
    return x;
}

/* The largest stack one task of the forward (one source and two), scores,
   weights, split-KV and backward used on shape s, through the public API on the active table, in
   a precision mode (attn.h; its dot-product kernels have buffers of their
   own; the backward runs in the default mode only). Q8_0 K/V reuse the
   float buffers' bytes: their values do not matter here. */
static size_t worst_task_stack(stack_pool *sp, attn_shape s, attn_dtype kv_dtype,
                               int64_t precision)
{
    const int64_t dv = s.v_dim ? s.v_dim : s.head_dim;
    const size_t nq = (size_t)(s.q_heads * s.q_len * s.head_dim);
    const size_t nk = (size_t)(s.kv_heads * s.kv_len * s.head_dim);
    const size_t nv = (size_t)(s.kv_heads * s.kv_len * dv);
    const size_t no = (size_t)(s.q_heads * s.q_len * dv);
    const size_t ns = (size_t)(s.q_heads * s.q_len * s.kv_len);
    float *q = filled(nq), *k = filled(nk), *v = filled(nv), *o = filled(no);
    float *sc = filled(ns), *lse = filled((size_t)(s.q_heads * s.q_len));
    float *dq = filled(nq), *dk = filled(nk), *dvv = filled(nv), *dout = filled(no);
    attn_tensor tq = dense(q, ATTN_DTYPE_F32, s.q_heads, s.q_len, s.head_dim);
    const int64_t per = kv_dtype == ATTN_DTYPE_Q8_0 ? 32 : 1; /* values per stride unit */
    attn_tensor tk = dense(k, kv_dtype, s.kv_heads, s.kv_len, s.head_dim / per);
    attn_tensor tv = dense(v, kv_dtype, s.kv_heads, s.kv_len, dv / per);
    attn_tensor to = dense(o, ATTN_DTYPE_F32, s.q_heads, s.q_len, dv);
    attn_tensor ts = dense(sc, ATTN_DTYPE_F32, s.q_heads, s.q_len, s.kv_len);
    attn_tensor tdq = dense(dq, ATTN_DTYPE_F32, s.q_heads, s.q_len, s.head_dim);
    attn_tensor tdk = dense(dk, ATTN_DTYPE_F32, s.kv_heads, s.kv_len, s.head_dim);
    attn_tensor tdv = dense(dvv, ATTN_DTYPE_F32, s.kv_heads, s.kv_len, dv);
    attn_tensor tdo = dense(dout, ATTN_DTYPE_F32, s.q_heads, s.q_len, dv);
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    opt.parallel_for = stack_parallel_for;
    opt.parallel_ctx = sp;
    opt.precision = precision;
    attn_row_stats stats = {lse, NULL, NULL};
    sp->worst = 0;
    cr_assert_eq(attn_forward(&s, &opt, &tq, &tk, &tv, &to, &stats), ATTN_OK);
    /* top-k lists (its gathering path): every key of the sequence, listed */
    int32_t *idx = xmalloc((size_t)(s.q_len * s.kv_len) * sizeof(int32_t));
    for (int64_t e = 0; e < s.q_len * s.kv_len; e++)
        idx[e] = (int32_t)(e % s.kv_len);
    opt.topk_indices = idx;
    opt.topk = s.kv_len;
    cr_assert_eq(attn_forward(&s, &opt, &tq, &tk, &tv, &to, &stats), ATTN_OK);
    opt.topk_indices = NULL;
    opt.topk = 0;
    /* two sources (their second pass beside the first's block): the same
       cache again, every key listed */
    const attn_kv_source x = {sizeof x, 0, s.kv_len, &tk, &tv, NULL, idx, s.kv_len,
                              NULL, NULL, 0, 0, NULL, 0};
    cr_assert_eq(attn_forward_sources(&s, &opt, &tq, &tk, &tv, &x, &to, &stats), ATTN_OK);
    free(idx);
    cr_assert_eq(attn_scores(&s, &opt, &tq, &tk, &ts), ATTN_OK);
    cr_assert_eq(attn_weights(&s, &opt, &tq, &tk, &ts, NULL), ATTN_OK);
    if (kv_dtype == ATTN_DTYPE_F32 && precision == ATTN_PRECISION_DEFAULT) {
        attn_grads g = ATTN_GRADS_INIT;
        g.dq = &tdq;
        g.dk = &tdk;
        g.dv = &tdv;
        cr_assert_eq(attn_backward(&s, &opt, &tq, &tk, &tv, &to, &tdo, lse, &g), ATTN_OK);
    }
    size_t ws = 0;
    opt.kv_splits = 4;
    if (attn_forward_workspace_size(&s, &opt, &ws) == ATTN_OK && ws) {
        opt.workspace = xmalloc(ws);
        opt.workspace_size = ws;
        cr_assert_eq(attn_forward(&s, &opt, &tq, &tk, &tv, &to, &stats), ATTN_OK);
        free(opt.workspace);
    }
    free(q), free(k), free(v), free(o), free(sc), free(lse);
    free(dq), free(dk), free(dvv), free(dout);
    return sp->worst;
}

Test(threads, task_stack_within_bound, .timeout = ATTN_TEST_TIMEOUT)
{
    if (!STACK_MEASURABLE)
        cr_skip_test("stack use is only bounded in optimized builds without sanitizers");
    stack_pool sp = {mmap(NULL, PROBE_STACK_BYTES, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
                     0};
    cr_assert(sp.mem != MAP_FAILED);
    /* small shapes that still fill each operation's largest blocks: 64-row
       blocks read in place (MHA) and 128-row score blocks, stacked GQA rows,
       d 256, the largest head_dim, one row and many keys (split-KV); F32 and
       F16 K/V */
    static const attn_shape shapes[] = {
        {1, 1, 1, 130, 130, 128, 0}, {1, 8, 2, 20, 20, 128, 0}, {1, 1, 1, 70, 70, 256, 0},
        {1, 1, 1, 2, 2, ATTN_MAX_HEAD_DIM, 0}, {1, 4, 1, 1, 600, 64, 0},
    };
    /* every table this build and CPU have: the names end at "unknown" */
    for (int isa = ATTN_ISA_SCALAR; strcmp(attn_isa_name((attn_isa)isa), "unknown") != 0; isa++) {
        if (attn_isa_select((attn_isa)isa) != ATTN_OK)
            continue;
        /* F32 and F16 K/V in the default and bf16 modes, Q8_0 in int8 */
        static const struct {
            attn_dtype dt;
            int64_t precision;
            const char *name;
        } kinds[] = {{ATTN_DTYPE_F32, ATTN_PRECISION_DEFAULT, "F32"},
                     {ATTN_DTYPE_F16, ATTN_PRECISION_DEFAULT, "F16"},
                     {ATTN_DTYPE_F32, ATTN_PRECISION_BF16, "F32, bf16 mode"},
                     {ATTN_DTYPE_F16, ATTN_PRECISION_BF16, "F16, bf16 mode"},
                     {ATTN_DTYPE_Q8_0, ATTN_PRECISION_INT8, "Q8_0, int8 mode"}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (size_t x = 0; x < sizeof kinds / sizeof kinds[0]; x++) {
                if (shapes[i].head_dim % 32 && kinds[x].dt == ATTN_DTYPE_Q8_0)
                    continue;
                const size_t used =
                    worst_task_stack(&sp, shapes[i], kinds[x].dt, kinds[x].precision);
                cr_expect(used <= ATTN_TASK_STACK_BYTES,
                          "%s, shape %zu, %s K/V: a task used %zu bytes of stack > "
                          "ATTN_TASK_STACK_BYTES (%d)",
                          attn_isa_name((attn_isa)isa), i, kinds[x].name, used,
                          (int)ATTN_TASK_STACK_BYTES);
                cr_log_info("%s shape %zu %s: %zu bytes", attn_isa_name((attn_isa)isa), i,
                            kinds[x].name, used);
            }
    }
    attn_isa_select(ATTN_ISA_AUTO);
    munmap(sp.mem, PROBE_STACK_BYTES);
}

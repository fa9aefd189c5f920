/* Execution: buffers, the progress line, timing, one measured problem. */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ------------------------------------------------------------------ progress */

/*
 * Progress without touching the library: the pool hook handed to
 * attn_forward wraps each task so completed tasks are counted, and a
 * monitor thread prints the count while a timed phase runs.
 */
typedef struct progress {
    bool enabled;
    const char *label;
    double start;
    atomic_uint_least64_t tasks_done;
    atomic_uint_least64_t tasks_total;
    atomic_int_least64_t calls_done;
    atomic_int_least64_t calls_total;
    atomic_bool stop;
    int shown_width; /* characters of the last progress line, 0: none shown */
    pthread_t thread;
    bool running;
} progress;

typedef struct pool_hook {
    attn_threadpool *pool;
    progress *progress;
} pool_hook;

typedef struct counted_tasks {
    attn_task_fn task;
    void *task_ctx;
    progress *progress;
} counted_tasks;

static void counted_task(void *ctx, size_t index)
{
    counted_tasks *c = ctx;
    c->task(c->task_ctx, index);
    atomic_fetch_add_explicit(&c->progress->tasks_done, 1, memory_order_relaxed);
}

static void counting_parallel_for(void *pool_ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    pool_hook *hook = pool_ctx;
    counted_tasks c = { task, task_ctx, hook->progress };
    atomic_store_explicit(&hook->progress->tasks_total, count, memory_order_relaxed);
    atomic_store_explicit(&hook->progress->tasks_done, 0, memory_order_relaxed);
    attn_threadpool_parallel_for(hook->pool, counted_task, &c, count);
}

static void *progress_main(void *arg)
{
    progress *pr = arg;
    const struct timespec tick = { 0, 100 * 1000 * 1000 };
    while (!atomic_load(&pr->stop)) {
        nanosleep(&tick, NULL);
        const double elapsed = now_seconds() - pr->start;
        if (elapsed < PROGRESS_AFTER_SECONDS || atomic_load(&pr->stop))
            continue;
        const uint64_t done = atomic_load_explicit(&pr->tasks_done, memory_order_relaxed);
        const uint64_t total = atomic_load_explicit(&pr->tasks_total, memory_order_relaxed);
        const int64_t calls = atomic_load_explicit(&pr->calls_done, memory_order_relaxed);
        const int64_t calls_total = atomic_load_explicit(&pr->calls_total, memory_order_relaxed);
        const int64_t current = calls < calls_total ? calls + 1 : calls_total;
        const int width = fprintf(stderr, "\r%s: call %" PRId64 "/%" PRId64
                                          ", %3.0f%% of its tasks, %.1f s ",
                                  pr->label, current, calls_total,
                                  total ? 100.0 * (double)done / (double)total : 0.0, elapsed);
        fflush(stderr);
        if (width > pr->shown_width)
            pr->shown_width = width;
    }
    return NULL;
}

static void progress_start(progress *pr, const char *label)
{
    atomic_store(&pr->stop, false);
    atomic_store(&pr->tasks_done, 0);
    atomic_store(&pr->tasks_total, 0);
    atomic_store(&pr->calls_done, 0);
    atomic_store(&pr->calls_total, 1);
    pr->label = label;
    pr->shown_width = 0;
    pr->start = now_seconds();
    pr->running = pr->enabled && pthread_create(&pr->thread, NULL, progress_main, pr) == 0;
}

static void progress_stop(progress *pr)
{
    if (!pr->running)
        return;
    atomic_store(&pr->stop, true);
    pthread_join(pr->thread, NULL);
    pr->running = false;
    if (pr->shown_width > 0) {
        fprintf(stderr, "\r%*s\r", pr->shown_width, "");
        fflush(stderr);
    }
}

/* ------------------------------------------------------------------ buffers and forward */

static void buffers_free(buffers *b)
{
    free(b->q);
    free(b->k);
    free(b->v);
    free(b->out);
    memset(b, 0, sizeof *b);
}

/* n elements of `size` bytes, 64-byte aligned; NULL on overflow or failure. */
void *alloc_elems(int64_t n, size_t size)
{
    if (n <= 0 || (uint64_t)n > (SIZE_MAX - 64) / size)
        return NULL;
    size_t bytes = ((size_t)n * size + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

/* a*b*c*d with overflow check (all >= 1); -1 on overflow. */
static int64_t mul4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    const int64_t f[4] = { a, b, c, d };
    int64_t r = 1;
    for (int i = 0; i < 4; i++) {
        if (f[i] <= 0 || r > INT64_MAX / f[i])
            return -1;
        r *= f[i];
    }
    return r;
}

attn_tensor make_tensor(void *data, attn_dtype t, int64_t heads, int64_t rows,
                               int64_t cols)
{
    attn_tensor x;
    x.data = data;
    x.dtype = (int32_t)t;
    const int64_t units = cols / dtype_block(t); /* strides count blocks for Q8_0/Q4_0 */
    x.row_stride = units;
    x.head_stride = rows * units;
    x.batch_stride = heads * rows * units;
    return x;
}

static int buffers_init(buffers *b, const problem *p, uint64_t seed)
{
    const attn_shape *s = &p->shape;
    const int64_t dv = v_dim_of(s);
    const int64_t nq = mul4(s->batch, s->q_heads, s->q_len, s->head_dim);
    const int64_t nk = mul4(s->batch, s->kv_heads, s->kv_len, s->head_dim);
    const int64_t nv = mul4(s->batch, s->kv_heads, s->kv_len, dv);
    const int64_t no = mul4(s->batch, s->q_heads, s->q_len, dv);
    memset(b, 0, sizeof *b);
    const int64_t block = dtype_block(p->kv_dtype);
    if (s->head_dim % block != 0 || dv % block != 0) {
        fprintf(stderr, "attn: --kv-dtype %s needs head_dim and v_dim to be multiples of %" PRId64
                        "\n", dtype_name(p->kv_dtype), block);
        return EXIT_USAGE;
    }
    b->q = alloc_elems(nq, sizeof(float));
    b->k = alloc_elems(nk / block, dtype_size(p->kv_dtype));
    b->v = alloc_elems(nv / block, dtype_size(p->kv_dtype));
    b->out = alloc_elems(no, sizeof(float));
    if (!b->q || !b->k || !b->v || !b->out) {
        fprintf(stderr, "attn: cannot allocate the tensors of this problem "
                        "(q %" PRId64 ", k %" PRId64 ", v %" PRId64 ", out %" PRId64
                        " elements)\n", nq, nk, nv, no);
        buffers_free(b);
        return EXIT_LIBRARY;
    }
    /* One stream per tensor, so a change of one dimension leaves the others' data alone. */
    uint64_t sq = seed ^ 0x5151515151515151u, sk = seed ^ 0x4b4b4b4b4b4b4b4bu,
             sv = seed ^ 0x5656565656565656u;
    fill_random(b->q, ATTN_DTYPE_F32, (size_t)nq, &sq);
    if (fill_random(b->k, p->kv_dtype, (size_t)nk, &sk) != 0 ||
        fill_random(b->v, p->kv_dtype, (size_t)nv, &sv) != 0) {
        fprintf(stderr, "attn: attn_quantize refused the generated K/V values\n");
        buffers_free(b);
        return EXIT_LIBRARY;
    }
    /* Poison the output so rows the library failed to write cannot pass. */
    for (int64_t i = 0; i < no; i++)
        b->out[i] = NAN;
    b->tq = make_tensor(b->q, ATTN_DTYPE_F32, s->q_heads, s->q_len, s->head_dim);
    b->tk = make_tensor(b->k, p->kv_dtype, s->kv_heads, s->kv_len, s->head_dim);
    b->tv = make_tensor(b->v, p->kv_dtype, s->kv_heads, s->kv_len, dv);
    b->tout = make_tensor(b->out, ATTN_DTYPE_F32, s->q_heads, s->q_len, dv);
    return EXIT_OK;
}

int library_error(const char *what, attn_status st)
{
    fprintf(stderr, "attn: %s failed: %s (status %d)\n", what, attn_strerror(st), (int)st);
    return EXIT_LIBRARY;
}

/* ------------------------------------------------------------------ timing */

static attn_status timed_call(const problem *p, const buffers *b, const attn_options *o,
                              double *seconds)
{
    const double t0 = now_seconds();
    attn_status st = attn_forward(&p->shape, o, &b->tq, &b->tk, &b->tv, &b->tout, NULL);
    *seconds = now_seconds() - t0;
    return st;
}

/*
 * iters > 0: one warm-up call, then `iters` timed calls.
 * iters == 0: the first call is timed; at >= SINGLE_CALL_SECONDS it is the
 * result, otherwise it was the warm-up and enough calls fill target_s.
 */
static attn_status time_forward(const problem *p, const buffers *b, pool_hook *hook,
                                int64_t iters, double target_s, timing *t)
{
    attn_options o = options_of(p);
    o.parallel_for = counting_parallel_for;
    o.parallel_ctx = hook;
    progress *pr = hook->progress;
    double first;
    attn_status st = timed_call(p, b, &o, &first);
    atomic_store(&pr->calls_done, 1);
    if (st != ATTN_OK)
        return st;
    if (iters == 0 && first >= SINGLE_CALL_SECONDS) {
        *t = (timing){ 1, first, first, true };
        return ATTN_OK;
    }
    int64_t n = iters;
    if (n == 0) {
        double want = target_s / (first > 1e-9 ? first : 1e-9);
        n = want < 1.0 ? 1 : want > 1e6 ? 1000000 : (int64_t)want;
    }
    atomic_store(&pr->calls_total, n + 1);
    double total = 0.0, best = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double sec;
        if ((st = timed_call(p, b, &o, &sec)) != ATTN_OK)
            return st;
        atomic_store(&pr->calls_done, i + 2);
        total += sec;
        if (sec < best)
            best = sec;
    }
    *t = (timing){ n, total / (double)n, best, false };
    return ATTN_OK;
}

int measure(const problem *p, const cli_settings *x, attn_threadpool *pool, double target_s,
            measurement *m)
{
    buffers b;
    int rc = buffers_init(&b, p, x->seed);
    if (rc)
        return rc;
    progress pr;
    memset(&pr, 0, sizeof pr);
    pr.enabled = x->progress && isatty(STDERR_FILENO);
    pool_hook hook = { pool, &pr };

    m->isa = attn_isa_active();
    m->threads = attn_threadpool_size(pool);
    char label[64];
    snprintf(label, sizeof label, "attn: %s [%s]", p->name, attn_isa_name(m->isa));
    progress_start(&pr, label);
    attn_status st = time_forward(p, &b, &hook, x->iters, target_s, &m->time);
    progress_stop(&pr);
    if (st != ATTN_OK) {
        buffers_free(&b);
        return library_error("attn_forward", st);
    }
    m->gflops = flops_per_call(p) / m->time.mean_s * 1e-9;
    m->kv_gbytes_s = kv_bytes_per_call(p) / m->time.mean_s * 1e-9;
    rc = verify(p, &b, x->verify_rows, &m->verify);
    buffers_free(&b);
    return rc;
}

int open_pool(const cli_settings *x, attn_threadpool **pool)
{
    if (x->isa_given) {
        attn_status st = attn_isa_select(x->isa);
        if (st != ATTN_OK) {
            fprintf(stderr, "attn: cannot use ISA '%s': %s\n", attn_isa_name(x->isa),
                    attn_strerror(st));
            return EXIT_LIBRARY;
        }
    }
    attn_status st = attn_threadpool_create((int32_t)x->threads, pool);
    if (st != ATTN_OK)
        return library_error("attn_threadpool_create", st);
    return EXIT_OK;
}

void format_ms(char *buf, size_t size, double seconds)
{
    const double ms = seconds * 1e3;
    snprintf(buf, size, ms >= 100.0 ? "%.1f" : ms >= 1.0 ? "%.3f" : "%.4f", ms);
}

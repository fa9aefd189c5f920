/* SPDX-License-Identifier: MIT */
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
 * monitor thread prints the count while a timed phase runs. The count's
 * total is the phase's from its start: --iters N is N + 1 calls; the
 * automatic count is known once the first call has taken its time, and
 * until then a line shows only when that call is the only one (it has run
 * for SINGLE_CALL_SECONDS).
 */
typedef struct progress {
    bool enabled;   /* the monitor thread */
    bool each_call; /* test hook: the line at the start of every call */
    const char *label;
    double start;
    atomic_uint_least64_t tasks_done;
    atomic_uint_least64_t tasks_total;
    atomic_int_least64_t calls_done;
    atomic_int_least64_t calls_total; /* 0: not known yet */
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

/* The line's text; false while the count's total is not known. */
static bool progress_text(progress *pr, char *buf, size_t size)
{
    const double elapsed = now_seconds() - pr->start;
    const uint64_t done = atomic_load_explicit(&pr->tasks_done, memory_order_relaxed);
    const uint64_t total = atomic_load_explicit(&pr->tasks_total, memory_order_relaxed);
    const int64_t calls = atomic_load_explicit(&pr->calls_done, memory_order_relaxed);
    int64_t calls_total = atomic_load_explicit(&pr->calls_total, memory_order_relaxed);
    if (calls_total == 0) {
        /* the first call of an automatic count: past SINGLE_CALL_SECONDS
           it is the result, the only call (time_forward) */
        if (elapsed < SINGLE_CALL_SECONDS)
            return false;
        calls_total = 1;
    }
    const int64_t current = calls < calls_total ? calls + 1 : calls_total;
    snprintf(buf, size, "%s: call %" PRId64 "/%" PRId64 ", %3.0f%% of its tasks, %.1f s ",
             pr->label, current, calls_total,
             total ? 100.0 * (double)done / (double)total : 0.0, elapsed);
    return true;
}

static void *progress_main(void *arg)
{
    progress *pr = arg;
    const struct timespec tick = { 0, 100 * 1000 * 1000 };
    char line[160];
    while (!atomic_load(&pr->stop)) {
        nanosleep(&tick, NULL);
        if (now_seconds() - pr->start < PROGRESS_AFTER_SECONDS || atomic_load(&pr->stop) ||
            !progress_text(pr, line, sizeof line))
            continue;
        const int width = fprintf(stderr, "\r%s", line);
        fflush(stderr);
        if (width > pr->shown_width)
            pr->shown_width = width;
    }
    return NULL;
}

/* Call `call` (from 1) starts: the test hook's line. */
static void progress_call(progress *pr, int64_t call)
{
    char line[160];
    if (pr->each_call && progress_text(pr, line, sizeof line)) {
        fprintf(stderr, "%s\n", line);
        fflush(stderr);
    }
}

/* A timed phase of `calls` calls (0: an automatic count, known later). */
static void progress_start(progress *pr, const char *label, int64_t calls)
{
    atomic_store(&pr->stop, false);
    atomic_store(&pr->tasks_done, 0);
    atomic_store(&pr->tasks_total, 0);
    atomic_store(&pr->calls_done, 0);
    atomic_store(&pr->calls_total, calls);
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

#define MAX_READ_CHUNKS 1024

void buffers_free(buffers *b)
{
    gen_release(&b->m);
    free(b->k);
    free(b->v);
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

/*
 * Bytes of the last-level cache one core shares (0 when unknown): sysfs
 * first, which describes the instance (glibc's sysconf reports 384 MiB, the
 * whole package, on a 32 MiB-per-CCD EPYC), then sysconf.
 */
static int64_t llc_bytes(void)
{
    int64_t best = 0;
    for (int index = 0; index < 8; index++) {
        char path[96];
        int level = 0;
        long long size = 0;
        char unit = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        const int got_level = fscanf(f, "%d", &level) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        if (!got_level || !(f = fopen(path, "r")))
            continue;
        const int got = fscanf(f, "%lld%c", &size, &unit);
        fclose(f);
        if (got >= 1 && level >= 2) {
            const int64_t bytes = (int64_t)size * (unit == 'K' ? 1024 : unit == 'M' ? 1 << 20 : 1);
            if (bytes > best)
                best = bytes;
        }
    }
    if (best > 0)
        return best;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0)
        return l3;
#endif
    return 0;
}

/*
 * Copies of K and V a decode-like problem rotates over, so that each call
 * reads a cache that is not in the last-level cache, as a real decode step
 * does: together at least ROTATE_LLC_FACTOR times the LLC (64 MiB assumed
 * when the OS does not say), at most ROTATE_MAX_BYTES.
 */
#define ROTATE_LLC_FACTOR 4
#define ROTATE_UNKNOWN_LLC ((int64_t)64 << 20)
#define ROTATE_MAX_BYTES ((int64_t)2 << 30)
#define ROTATE_MAX_COPIES 64
static int64_t kv_copies_for(const problem *p)
{
    if (!is_decode_like(p) || paged_block_of(p) > 0 || is_packed(p))
        return 1;
    const int64_t llc = llc_bytes() > 0 ? llc_bytes() : ROTATE_UNKNOWN_LLC;
    const double bytes = kv_cache_bytes(p); /* a copy holds every slot */
    int64_t copies = (int64_t)ceil((double)(ROTATE_LLC_FACTOR * llc) / bytes);
    /* even, so the forward and the floor read alternate copies (see measure) */
    copies = copies < 2 ? 2 : copies + (copies & 1);
    while (copies > 2 && ((double)copies * bytes > (double)ROTATE_MAX_BYTES ||
                          copies > ROTATE_MAX_COPIES))
        copies -= 2;
    return copies;
}

int buffers_init(buffers *b, const problem *p, uint64_t seed)
{
    const attn_shape *s = &p->shape;
    const int64_t dv = v_dim_of(s);
    memset(b, 0, sizeof *b);
    const int64_t nq = mul4(s->batch, s->q_heads, s->q_len, s->head_dim);
    const int64_t nk = mul4(s->batch, s->kv_heads, s->kv_len, s->head_dim);
    const int64_t nv = mul4(s->batch, s->kv_heads, s->kv_len, dv);
    const int64_t no = mul4(s->batch, s->q_heads, s->q_len, dv);
    if (nq < 0 || nk < 0 || nv < 0 || no < 0 ||
        gen_materialise(&b->m, &p->g, seed, GEN_M_OUT, NULL) != 0) {
        fprintf(stderr, "attn: cannot allocate the tensors of this problem "
                        "(q %" PRId64 ", k %" PRId64 ", v %" PRId64 ", out %" PRId64
                        " elements)\n", nq, nk, nv, no);
        return EXIT_LIBRARY;
    }
    /* Poison the output so rows the library failed to write cannot pass. */
    memset(b->m.data[GEN_OUT], 0xff, b->m.bytes[GEN_OUT]);
    /* identical K/V copies to rotate over (verification reads the problem's own) */
    const int64_t copies = kv_copies_for(p);
    b->copies = copies;
    if (copies > 1) {
        /* each copy starts on a 64-byte boundary */
        b->k_copy_bytes = (b->m.bytes[GEN_K] + 63) & ~(size_t)63;
        b->v_copy_bytes = (b->m.bytes[GEN_V] + 63) & ~(size_t)63;
        b->k = alloc_elems(copies, b->k_copy_bytes);
        b->v = alloc_elems(copies, b->v_copy_bytes);
        if (!b->k || !b->v) {
            fprintf(stderr, "attn: cannot allocate %" PRId64 " K/V copies of this problem\n",
                    copies);
            buffers_free(b);
            return EXIT_LIBRARY;
        }
        for (int64_t c = 0; c < copies; c++) {
            memcpy((char *)b->k + (size_t)c * b->k_copy_bytes, b->m.data[GEN_K],
                   b->m.bytes[GEN_K]);
            memcpy((char *)b->v + (size_t)c * b->v_copy_bytes, b->m.data[GEN_V],
                   b->m.bytes[GEN_V]);
        }
    }
    return EXIT_OK;
}

int library_error(const char *what, attn_status st)
{
    const char *line = attn_last_error();
    fprintf(stderr, "attn: %s\n  (%s failed with status %d)\n", line[0] ? line : attn_strerror(st),
            what, (int)st);
    return EXIT_LIBRARY;
}

/* ------------------------------------------------------------------ samples */

bool samples_init(samples *x, int64_t calls)
{
    const int64_t cap = calls < CLI_MAX_SAMPLES ? (calls > 0 ? calls : 1) : CLI_MAX_SAMPLES;
    *x = (samples){ malloc((size_t)cap * sizeof(double)), 0, cap, (calls + cap - 1) / cap, 0,
                    0.0, INFINITY };
    if (x->stride < 1)
        x->stride = 1;
    return x->s != NULL;
}

void samples_add(samples *x, double seconds)
{
    if (x->seen % x->stride == 0 && x->n < x->cap)
        x->s[x->n++] = seconds;
    x->seen++;
    x->total += seconds;
    x->best = seconds < x->best ? seconds : x->best;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

timing samples_timing(samples *x)
{
    timing t = { x->seen, 0.0, 0.0, 0.0, false };
    if (x->seen > 0) {
        qsort(x->s, (size_t)x->n, sizeof *x->s, by_value);
        t.mean_s = x->total / (double)x->seen;
        t.best_s = x->best;
        t.median_s = x->n % 2 ? x->s[x->n / 2] : 0.5 * (x->s[x->n / 2 - 1] + x->s[x->n / 2]);
    }
    free(x->s);
    x->s = NULL;
    return t;
}

/* ------------------------------------------------------------------ timing */

/* The K and V tensors of copy c (the problem's own without copies). */
static void copy_tensors(const buffers *b, int64_t c, attn_tensor *tk, attn_tensor *tv)
{
    *tk = b->m.t[GEN_K];
    *tv = b->m.t[GEN_V];
    if (b->copies > 1) {
        tk->data = (char *)b->k + (size_t)c * b->k_copy_bytes;
        tv->data = (char *)b->v + (size_t)c * b->v_copy_bytes;
    }
}

/* One call on copy `copy`: attn_forward, or attn_plan_run of `plan` with
   the copy's K and V (a plan takes new data pointers, the same layout). */
static attn_status timed_call(const buffers *b, const attn_options *o, const attn_plan *plan,
                              int64_t copy, double *seconds)
{
    attn_tensor tk, tv; /* one copy: as laid out (dense, pool, packed) */
    copy_tensors(b, copy, &tk, &tv);
    const double t0 = now_seconds();
    attn_status st =
        plan ? attn_plan_run(plan, b->m.t[GEN_Q].data, tk.data, tv.data, b->m.t[GEN_OUT].data,
                             NULL)
             : attn_forward(&b->m.shape, o, &b->m.t[GEN_Q], &tk, &tv, &b->m.t[GEN_OUT], NULL);
    *seconds = now_seconds() - t0;
    return st;
}

/*
 * The memory floor: a plain read of the bytes one call reads (K and V of
 * one copy), split over the same pool. Eight independent 64-bit sums, so
 * the loop vectorizes and is bound by the loads, not by the adds.
 */
typedef struct read_job {
    const unsigned char *k, *v;
    size_t k_bytes, v_bytes, chunk;
    size_t chunks_k, chunks;
    uint64_t sums[MAX_READ_CHUNKS];
} read_job;

static uint64_t read_bytes(const unsigned char *p, size_t n)
{
    uint64_t acc[8] = {0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8];
        memcpy(w, p + i, sizeof w);
        for (int l = 0; l < 8; l++)
            acc[l] += w[l];
    }
    uint64_t sum = 0;
    for (int l = 0; l < 8; l++)
        sum += acc[l];
    for (; i < n; i++)
        sum += p[i];
    return sum;
}

static void read_task(void *ctx, size_t index)
{
    read_job *j = ctx;
    const int is_k = index < j->chunks_k;
    const size_t at = (is_k ? index : index - j->chunks_k) * j->chunk;
    const size_t total = is_k ? j->k_bytes : j->v_bytes;
    const unsigned char *base = is_k ? j->k : j->v;
    const size_t n = at < total ? (total - at < j->chunk ? total - at : j->chunk) : 0;
    j->sums[index] = read_bytes(base + at, n);
}

static volatile uint64_t read_sink;

static double timed_read(const buffers *b, attn_threadpool *pool, int64_t copy)
{
    attn_tensor tk, tv;
    copy_tensors(b, copy, &tk, &tv);
    read_job j;
    j.k = tk.data;
    j.v = tv.data;
    j.k_bytes = b->m.bytes[GEN_K]; /* dense (copies need it): exactly the cache's bytes */
    j.v_bytes = b->m.bytes[GEN_V];
    /* chunks of whole cache lines, a few per thread */
    const size_t want = (size_t)attn_threadpool_size(pool) * 4;
    const size_t total = j.k_bytes + j.v_bytes;
    j.chunk = ((total / (want < MAX_READ_CHUNKS / 2 ? want : MAX_READ_CHUNKS / 2)) + 63) &
              ~(size_t)63;
    if (j.chunk == 0)
        j.chunk = 64;
    j.chunks_k = (j.k_bytes + j.chunk - 1) / j.chunk;
    j.chunks = j.chunks_k + (j.v_bytes + j.chunk - 1) / j.chunk;
    const double t0 = now_seconds();
    attn_threadpool_parallel_for(pool, read_task, &j, j.chunks);
    const double sec = now_seconds() - t0;
    uint64_t sum = 0;
    for (size_t i = 0; i < j.chunks; i++)
        sum += j.sums[i];
    read_sink = sum;
    return sec;
}

/*
 * iters > 0: one warm-up call, then `iters` timed calls.
 * iters == 0: the first call is timed; at >= SINGLE_CALL_SECONDS (by its
 * own clock or the progress line's) it is the result, otherwise it was the
 * warm-up and enough calls fill target_s.
 * Decode-like problems alternate K/V copies (even ones for the forward, odd
 * ones for the floor read that follows each call), so every call finds its
 * cache out of the last-level cache. EXIT_OK, or EXIT_LIBRARY with *st the
 * failing call's status (ATTN_OK: out of memory, said here).
 */
static int time_forward(const buffers *b, pool_hook *hook, const attn_options *base,
                        const attn_plan *plan, int64_t iters, double target_s, timing *t,
                        timing *floor_t, attn_status *st)
{
    attn_options o = *base;
    o.parallel_for = counting_parallel_for;
    o.parallel_ctx = hook;
    progress *pr = hook->progress;
    const int with_floor = b->copies >= 2;
    double first;
    progress_call(pr, 1);
    *st = timed_call(b, &o, plan, 0, &first);
    atomic_store(&pr->calls_done, 1);
    if (*st != ATTN_OK)
        return EXIT_LIBRARY;
    *floor_t = (timing){ 0, 0.0, 0.0, 0.0, false };
    /* the progress line's clock: past SINGLE_CALL_SECONDS on it, the line
       has shown this call as the only one */
    if (iters == 0 && (first >= SINGLE_CALL_SECONDS ||
                       now_seconds() - pr->start >= SINGLE_CALL_SECONDS)) {
        *t = (timing){ 1, first, first, first, true };
        return EXIT_OK;
    }
    int64_t n = iters;
    if (n == 0) {
        double want = target_s / (first > 1e-9 ? first : 1e-9);
        n = want < 1.0 ? 1 : want > 1e6 ? 1000000 : (int64_t)want;
        atomic_store(&pr->calls_total, n + 1);
    }
    samples calls, floors;
    if (!samples_init(&calls, n) || !samples_init(&floors, with_floor ? n : 1)) {
        free(calls.s);
        fprintf(stderr, "attn: out of memory for the times of %" PRId64 " calls\n", n);
        return EXIT_LIBRARY;
    }
    for (int64_t i = 0; i < n; i++) {
        double sec;
        const int64_t copy = with_floor ? (2 * (i + 1)) % b->copies : 0;
        progress_call(pr, i + 2);
        if ((*st = timed_call(b, &o, plan, copy, &sec)) != ATTN_OK)
            break;
        atomic_store(&pr->calls_done, i + 2);
        samples_add(&calls, sec);
        if (with_floor)
            samples_add(&floors, timed_read(b, hook->pool, copy + 1));
    }
    *t = samples_timing(&calls);
    const timing f = samples_timing(&floors);
    if (with_floor)
        *floor_t = f;
    return *st == ATTN_OK ? EXIT_OK : EXIT_LIBRARY;
}

int measure(const problem *p, const cli_settings *x, attn_threadpool *pool, double target_s,
            const buffers *b, measurement *m)
{
    progress pr;
    memset(&pr, 0, sizeof pr);
    pr.enabled = x->progress && isatty(STDERR_FILENO);
    pr.each_call = cli_test_hook("progress");
    pool_hook hook = { pool, &pr };

    m->isa = attn_isa_active();
    m->threads = attn_threadpool_size(pool);
    char label[64];
    snprintf(label, sizeof label, "attn: %s [%s]", p->name, attn_isa_name(m->isa));
    /* the problem's options (layout and modifiers: problems/gen.h), and split-KV:
       the workspace the library asks for, allocated before timing */
    attn_options o = b->m.opt;
    o.kv_splits = (int32_t)x->splits;
    size_t ws_bytes = 0;
    attn_status st = attn_forward_workspace_size(&b->m.shape, &o, &ws_bytes);
    if (st != ATTN_OK)
        return library_error("attn_forward_workspace_size", st);
    void *ws = ws_bytes ? alloc_elems((int64_t)ws_bytes, 1) : NULL;
    if (ws_bytes && !ws) {
        fprintf(stderr, "attn: out of memory for a %zu-byte workspace\n", ws_bytes);
        return EXIT_LIBRARY;
    }
    o.workspace = ws;
    o.workspace_size = ws_bytes;
    m->workspace = ws_bytes;
    /* whether it splits: more than the same call unsplit asks for */
    attn_options unsplit = o;
    unsplit.kv_splits = 1;
    size_t one = 0;
    m->split = attn_forward_workspace_size(&b->m.shape, &unsplit, &one) == ATTN_OK &&
               ws_bytes > one;
    /* --plan: validated and partitioned once, with the hooks the timed
       calls use (a plan keeps its options' parallel_for) */
    attn_plan *plan = NULL;
    void *plan_mem = NULL;
    if (x->plan) {
        attn_options po = o;
        po.parallel_for = counting_parallel_for;
        po.parallel_ctx = &hook;
        size_t bytes = 0;
        st = attn_plan_size(&b->m.shape, &po, &bytes);
        if (st == ATTN_OK && !(plan_mem = malloc(bytes)))
            st = ATTN_ERR_NOMEM;
        if (st == ATTN_OK)
            st = attn_plan_forward(plan_mem, bytes, &b->m.shape, &po, &b->m.t[GEN_Q],
                                   &b->m.t[GEN_K], &b->m.t[GEN_V], &b->m.t[GEN_OUT], NULL, &plan);
        if (st != ATTN_OK) {
            free(plan_mem);
            free(ws);
            return library_error("attn_plan_forward", st);
        }
    }
    progress_start(&pr, label, x->iters ? x->iters + 1 : 0);
    st = ATTN_OK;
    const int rc = time_forward(b, &hook, &o, plan, x->iters, target_s, &m->time, &m->floor, &st);
    progress_stop(&pr);
    free(plan_mem);
    free(ws);
    if (rc)
        return st != ATTN_OK ? library_error(plan ? "attn_plan_run" : "attn_forward", st) : rc;
    m->gflops = flops_per_call(p) / m->time.mean_s * 1e-9;
    m->kv_gbytes_s = kv_bytes_per_call(p) / m->time.mean_s * 1e-9;
    m->kv_copies = b->copies;
    /* the floor reads the whole copy (every slot of K and V); a call may
       need fewer bytes (padding, a shared prefix read once) */
    m->floor_gbytes_s = m->floor.calls ? (double)(b->m.bytes[GEN_K] + b->m.bytes[GEN_V]) /
                                             m->floor.mean_s * 1e-9
                                       : 0.0;
    m->floor_read_s = m->floor_gbytes_s > 0.0 ? kv_bytes_per_call(p) / (m->floor_gbytes_s * 1e9)
                                              : 0.0;
    /* The FMA peak on the same threads, after the timed calls so it cannot
       disturb them (measured once per pool: cached for the next problem).
       Every problem reports its share of it; a decode-like one with its
       floor also gets the roofline, T* = max(time to read its bytes at the
       floor's bandwidth, time for its FLOPs at the peak). */
    m->peak_gflops = cli_fma_peak_gflops(pool);
    m->peak_what = "FMA";
    const int64_t prec = p->g.opt.precision;
    if (prec != ATTN_PRECISION_DEFAULT && m->peak_gflops > 0.0) {
        /* QK on the mode's dot units where the table has them; PV on the
           bf16 ones for the bf16 mode's float v and both modes' Q8_0 and
           Q4_0 v (attn.h), which every table with bf16 dot products has */
        const int bf = prec == ATTN_PRECISION_BF16, dt = kv_dtype_of(p);
        const int qk_dot = attn_precision_native(prec, dt);
        const int bf_units = attn_precision_native(ATTN_PRECISION_BF16, ATTN_DTYPE_F32);
        const int qv = dt == ATTN_DTYPE_Q8_0 || dt == ATTN_DTYPE_Q4_0;
        const int pv_dot = qv ? bf_units : bf && qk_dot;
        const double fma = m->peak_gflops;
        const double bf_peak = pv_dot || (qk_dot && bf) ? cli_peak_gflops(pool, CLI_PEAK_BF16) : 0.0;
        const double qk_peak = !qk_dot ? fma : bf ? bf_peak : cli_peak_gflops(pool, CLI_PEAK_INT8);
        const double pv_peak = pv_dot ? bf_peak : fma;
        const double d = (double)p->shape.head_dim, dv = (double)v_dim_of(&p->shape);
        if ((qk_dot || pv_dot) && qk_peak > 0.0 && pv_peak > 0.0) {
            m->peak_gflops = (d + dv) / (d / qk_peak + dv / pv_peak);
            m->peak_what = qk_dot && pv_dot ? (bf ? "bf16 dot (QK, PV)" : "int8 dot (QK) + bf16 dot (PV)")
                           : qk_dot         ? "int8 dot (QK) + FMA (PV)"
                                            : "FMA (QK) + bf16 dot (PV)";
        }
    }
    m->t_star_s = 0.0;
    if (is_decode_like(p) && m->floor.calls && m->floor_gbytes_s > 0.0 && m->peak_gflops > 0.0) {
        const double read_s = kv_bytes_per_call(p) / (m->floor_gbytes_s * 1e9);
        const double fma_s = flops_per_call(p) / (m->peak_gflops * 1e9);
        m->t_star_s = read_s > fma_s ? read_s : fma_s;
    }
    return EXIT_OK;
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

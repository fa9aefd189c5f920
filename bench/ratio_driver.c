/* SPDX-License-Identifier: MIT */
/*
 * The parts every family of attn_ratios shares (bench/ratio_driver.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "ratio_driver.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tools/peak_loops.h"

/* ------------------------------------------------------------ families */

int ratio_opt_int(const ratio_args *a, int i, int dflt)
{
    const char *s = a->opt[i];
    if (!s)
        return dflt;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < -1000000000L || v > 1000000000L) {
        fprintf(stderr, "attn_ratios: not an integer: %s\n", s);
        exit(2);
    }
    return (int)v;
}

int ratio_calls(const ratio_args *a, int n) { return a->quick ? 1 : n; }

/* ------------------------------------------------------------ clocks, memory */

static double seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ratio_wall(void) { return seconds(CLOCK_MONOTONIC); }

double ratio_cpu(void) { return seconds(CLOCK_THREAD_CPUTIME_ID); }

void *ratio_alloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "attn_ratios: out of memory\n");
        exit(1);
    }
    return p;
}

void ratio_ok(attn_status st, const char *what)
{
    if (st != ATTN_OK) {
        fprintf(stderr, "%s: %s\n", what, attn_strerror(st));
        exit(1);
    }
}

void ratio_copies(void **copy, void *src, size_t bytes, int n)
{
    copy[0] = src;
    for (int i = 1; i < n; i++) {
        copy[i] = ratio_alloc(bytes);
        memcpy(copy[i], src, bytes);
    }
}

void ratio_copies_free(void **copy, int n)
{
    for (int i = 1; i < n; i++)
        free(copy[i]);
}

void ratio_fill(void *dst, int32_t dtype, int64_t n, float lo, float hi, uint64_t *stream)
{
    const gen_values uniform = {GEN_VAL_UNIFORM, lo, hi, 0, 0, 0, 0, 0, 0};
    gen_fill(dst, dtype, n, &uniform, stream);
}

float *ratio_filled(size_t n, float lo, float hi, uint64_t *stream)
{
    float *p = ratio_alloc(n * sizeof(float));
    ratio_fill(p, ATTN_DTYPE_F32, (int64_t)n, lo, hi, stream);
    return p;
}

attn_threadpool *ratio_pool(int threads)
{
    attn_threadpool *pool = NULL;
    if (threads != 1)
        ratio_ok(attn_threadpool_create(threads, &pool), "attn_threadpool_create");
    return pool;
}

int ratio_pool_size(const attn_threadpool *pool)
{
    return pool ? attn_threadpool_size(pool) : 1;
}

void ratio_use_pool(attn_options *o, attn_threadpool *pool)
{
    o->parallel_for = pool ? attn_threadpool_parallel_for : NULL;
    o->parallel_ctx = pool;
}

/* ------------------------------------------------------------ the repetitions */

/* The permutations of RATIO_SHUFFLE: one stream for the process, so two
   loops in a row get different orders. */
static uint64_t shuffle_state = 0x9e3779b97f4a7c15u;

static void sample(const ratio_loop *l, int v, int rep, double *wall, double *cpu)
{
    const int calls = l->calls ? l->calls[v] : l->each > 0 ? l->each : 1;
    const double w0 = ratio_wall(), c0 = ratio_cpu();
    for (int c = 0; c < calls; c++)
        l->call(l->ctx, v, rep, c);
    const double c1 = ratio_cpu(), w1 = ratio_wall();
    *wall = (w1 - w0) / calls;
    *cpu = (c1 - c0) / calls;
}

void ratio_interleave(const ratio_loop *l, ratio_times *t)
{
    const int n = l->variants, reps = l->reps;
    t->variants = n;
    t->reps = reps;
    t->wall = calloc((size_t)(n * reps), sizeof(double));
    t->cpu = calloc((size_t)(n * reps), sizeof(double));
    int *order = malloc((size_t)n * sizeof(int));
    if (!t->wall || !t->cpu || !order) {
        fprintf(stderr, "attn_ratios: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; i++)
        order[i] = i;
    double w, c;
    for (int v = 0; l->warmup && v < n; v++)
        if (l->only < 0 || v == l->only)
            sample(l, v, -1, &w, &c);
    for (int r = 0; r < reps; r++) {
        if (l->order == RATIO_SHUFFLE)
            for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
                shuffle_state = shuffle_state * 6364136223846793005u + 1442695040888963407u;
                const int j = (int)((shuffle_state >> 33) % (uint64_t)(i + 1));
                const int x = order[i];
                order[i] = order[j];
                order[j] = x;
            }
        for (int k = 0; k < n; k++) {
            const int v = l->order == RATIO_ROTATE ? (k + r) % n : order[k];
            if (l->only >= 0 && v != l->only)
                continue;
            sample(l, v, r, &t->wall[v * reps + r], &t->cpu[v * reps + r]);
        }
    }
    free(order);
}

void ratio_times_free(ratio_times *t)
{
    free(t->wall);
    free(t->cpu);
    t->wall = t->cpu = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

ratio_stat ratio_stats(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    ratio_stat s = {x[0], n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]), x[n - 1]};
    return s;
}

void ratio_measure(const ratio_loop *l, ratio_stat *wall, ratio_stat *cpu)
{
    ratio_times t;
    ratio_interleave(l, &t);
    for (int v = 0; v < t.variants; v++) {
        if (wall)
            wall[v] = ratio_stats(ratio_wall_of(&t, v), t.reps);
        if (cpu)
            cpu[v] = ratio_stats(ratio_cpu_of(&t, v), t.reps);
    }
    ratio_times_free(&t);
}

/* ------------------------------------------------------------ what is printed */

void ratio_header(const char *fmt, ...)
{
    printf("libattn %s, ISA %s, ", attn_version_string(), attn_isa_name(attn_isa_active()));
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

void ratio_print_ratio(int width, const char *what, const char *fmt, ...)
{
    printf("  ratio %-*s", width, what);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

void ratio_print_vs(int width, const char *name, ratio_stat s, ratio_stat base,
                    const char *base_name)
{
    printf("  %-*s median %9.3f ms (%.3fx %s)   min %9.3f ms (%.3fx %s)\n", width, name,
           1e3 * s.median, s.median / base.median, base_name, 1e3 * s.min, s.min / base.min,
           base_name);
}

/* ------------------------------------------------------------ limits in the process */

static volatile float peak_sink;

double ratio_fma_peak(void)
{
    static volatile float m = 0.9999f, a = 0.001f;
    double best = 0;
    for (int r = 0; r < 20; r++) {
        const int64_t rounds = 200000;
        double per_round; /* FLOPs: chains x lanes x 2 */
        const double t0 = ratio_wall();
#if defined(PEAK_X86)
        if (__builtin_cpu_supports("avx512f")) {
            per_round = 16.0 * 16 * 2;
            peak_sink = fma_loop_avx512(rounds, m, a);
        } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
            per_round = 12.0 * 8 * 2;
            peak_sink = fma_loop_avx2(rounds, m, a);
        } else {
            per_round = 12.0 * 2;
            peak_sink = fma_loop_scalar(rounds, m, a);
        }
#elif defined(PEAK_NEON)
        per_round = 16.0 * 4 * 2;
        peak_sink = fma_loop_neon(rounds, m, a);
#else
        per_round = 12.0 * 2;
        peak_sink = fma_loop_scalar(rounds, m, a);
#endif
        const double f = per_round * (double)rounds / (ratio_wall() - t0);
        best = f > best ? f : best;
    }
    return best;
}

static volatile uint64_t read_sink;

void ratio_read(const void *p, size_t bytes)
{
    const uint64_t *x = p;
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= bytes / 8; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += x[i + (size_t)k];
    read_sink = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

/* ------------------------------------------------------------ problems */

void ratio_profile(gen_profile *p, float lo, float hi)
{
    gen_profile_init(p);
    p->work_cap = 0;
    for (int c = 0; c < GEN_C_COUNT; c++)
        gen_never(p, c);
    for (int r = GEN_Q; r <= GEN_V; r++)
        p->val[r].lo = lo, p->val[r].hi = hi;
}

void ratio_profile_dims(gen_profile *p, float lo, float hi, ratio_dims dims)
{
    ratio_profile(p, lo, hi);
    const struct {
        int choice;
        int64_t v;
    } pin[] = {{GEN_C_BATCH, dims.batch},   {GEN_C_KV_HEADS, dims.kv_heads},
               {GEN_C_GROUP, dims.group},   {GEN_C_Q_LEN, dims.q_len},
               {GEN_C_KV_LEN, dims.kv_len}, {GEN_C_HEAD_DIM, dims.head_dim}};
    for (size_t i = 0; i < sizeof pin / sizeof pin[0]; i++)
        if (pin[i].v)
            gen_pin(p, pin[i].choice, pin[i].v);
}

void ratio_draw(gen_problem *d, const gen_profile *p, uint64_t draw_seed)
{
    uint64_t state = draw_seed;
    gen_src src = {draw_seed ? gen_splitmix_range : NULL, &state};
    if (!gen_draw(d, &src, p)) {
        fprintf(stderr, "attn_ratios: the problem exceeds the profile's work cap\n");
        exit(1);
    }
}

void ratio_materialise(gen_bufs *m, const gen_problem *d, uint64_t seed, unsigned flags)
{
    if (gen_materialise(m, d, seed, flags, NULL) != 0) {
        fprintf(stderr, "attn_ratios: out of memory, or attn_quantize refused a row\n");
        exit(1);
    }
}

void ratio_problem(gen_problem *d, gen_bufs *m, const gen_profile *p, uint64_t draw_seed,
                   uint64_t seed, unsigned flags)
{
    ratio_draw(d, p, draw_seed);
    ratio_materialise(m, d, seed, flags);
}

void ratio_problem_free(gen_problem *d, gen_bufs *m)
{
    gen_release(m);
    gen_free(d);
}

void ratio_forward(const gen_bufs *m, const attn_options *o, const char *what)
{
    ratio_ok(attn_forward(&m->shape, o, &m->t[GEN_Q], &m->t[GEN_K], &m->t[GEN_V],
                          &m->t[GEN_OUT], NULL),
             what);
}

void ratio_workspace(attn_options *o, const attn_shape *s, const attn_options *as)
{
    size_t bytes = 0;
    ratio_ok(attn_forward_workspace_size(s, as ? as : o, &bytes), "attn_forward_workspace_size");
    o->workspace = bytes ? ratio_alloc(bytes) : NULL;
    o->workspace_size = bytes;
}

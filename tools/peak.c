/* SPDX-License-Identifier: MIT */
/*
 * The machine's single-precision FMA peak on the pool's threads: the compute
 * half of the roofline T* (exec.c); and the peaks of the bf16 and int8 dot
 * products (vdpbf16ps, vpdpbusd) the precision modes run on, measured the
 * same way. Memory has its measured floor (a plain
 * read of the same bytes); compute needs a measured figure too, not a
 * datasheet number, because clocks under load, SMT siblings and a shared
 * VM decide what a call can reach.
 *
 * Each pool thread runs an independent register-only loop of FMAs on the
 * widest vectors the CPU has (AVX-512, AVX2+FMA, NEON; else scalar and the
 * kind says so): tools/peak_loops.h, shared with bench/.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np (Linux) */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "peak_loops.h"
#include "pin.h"

/*
 * Repetitions: about 1 ms each (long against the timer's resolution and the
 * pool's wake-up, short against a scheduler's time slice), 1 ms apart, the
 * best of them, about 40 ms in all. The peak is what the threads reach when
 * they all run: on a machine shared with other work a thread that has just
 * run for a while is the first to be time-sliced, so longer back-to-back
 * repetitions on 2 busy vCPUs often measured one core's peak for 2 threads;
 * the pause lets the other work run between repetitions instead of inside
 * them.
 */
#define REP_SECONDS 0.001
#define PAUSE_NS 1000000L
#define TOTAL_SECONDS 0.04
#define MIN_REPS 3
#define MAX_REPS 64
/* Threads wait this long at most for each other before a repetition (a
   thread the OS left unscheduled would otherwise hold the others). */
#define BARRIER_SECONDS 0.05

typedef struct fma_kind {
    fma_loop_fn loop;
    int lanes, chains;
    const char *name;
    int flops_per_lane; /* per instruction: 2 for an FMA, 4 bf16 dot, 8 int8 dot */
} fma_kind;

/* The widest FMA the CPU runs (x86: what cpuid and the OS's saved state
   allow; __builtin_cpu_supports checks both). */
static fma_kind widest_fma(void)
{
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return (fma_kind){ fma_loop_avx512, 16, CHAINS_WIDE, "AVX-512 FMA", 2 };
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (fma_kind){ fma_loop_avx2, 8, CHAINS_AVX2, "AVX2 FMA", 2 };
#elif defined(PEAK_NEON)
    return (fma_kind){ fma_loop_neon, 4, CHAINS_WIDE, "NEON FMA", 2 };
#endif
    return (fma_kind){ fma_loop_scalar, 1, 12,
                       "scalar multiply-add: this tool has no SIMD FMA loop for this CPU", 2 };
}

/* The loop of a peak kind; lanes 0 when the CPU lacks the instructions. */
static fma_kind kind_of(cli_peak_kind k)
{
    if (k == CLI_PEAK_FMA)
        return widest_fma();
#ifdef PEAK_X86
    __builtin_cpu_init();
    /* the AMX table runs the modes' products on tiles: their peak is the
       tile unit's (lanes: a tile's 16 x 16 sums; chains: 4 tiles) */
    if (k == CLI_PEAK_BF16 && attn_isa_active() == ATTN_ISA_AMX)
        return (fma_kind){ amx_bf16_loop, 256, 4, "AMX tdpbf16ps", 64 };
    if (k == CLI_PEAK_INT8 && attn_isa_active() == ATTN_ISA_AMX)
        return (fma_kind){ amx_int8_loop, 256, 4, "AMX tdpbssd", 128 };
    if (k == CLI_PEAK_BF16 && __builtin_cpu_supports("avx512bf16"))
        return (fma_kind){ bf16_loop_avx512, 16, CHAINS_WIDE, "AVX512_BF16 vdpbf16ps", 4 };
    if (k == CLI_PEAK_INT8 && __builtin_cpu_supports("avx512vnni"))
        return (fma_kind){ int8_loop_avx512, 16, CHAINS_WIDE, "AVX512_VNNI vpdpbusd", 8 };
    if (k == CLI_PEAK_INT8 && __builtin_cpu_supports("avxvnni"))
        return (fma_kind){ int8_loop_avxvnni, 8, CHAINS_AVX2, "AVX-VNNI vpdpbusd", 8 };
#endif
    return (fma_kind){ NULL, 0, 0, "none", 0 };
}

const char *cli_peak_kind_name(cli_peak_kind k)
{
    return kind_of(k).name;
}

const char *cli_fma_peak_kind(void)
{
    return widest_fma().name;
}

/*
 * One repetition on every pool thread at once. The pool hands out task
 * indices dynamically, so each task first waits until all have started: a
 * thread spinning here cannot take a second task, so every thread runs
 * exactly one. Each task times its own loop; the repetition lasts from the
 * first start to the last end (the pool's wake-up is not counted).
 *
 * With more than one thread, task i is pinned to the i-th CPU the thread
 * may run on for the repetition (its affinity restored after): Linux tends
 * to wake a pool worker on its waker's CPU, and two threads left on one CPU
 * ran one after the other (measured: a 2-thread peak of exactly one core's
 * in attn run and bench/, while the CPUs' peak was twice that).
 */
typedef struct peak_job {
    fma_kind kind;
    int64_t rounds;
    size_t threads;
    float m, a;
    atomic_size_t arrived;
    double *start, *end;
    float *sums;
} peak_job;

static void peak_task(void *ctx, size_t index)
{
    peak_job *j = ctx;
    attn_pin pin;
    if (j->threads > 1)
        attn_pin_to(&pin, index);
    else
        pin.pinned = 0;
    atomic_fetch_add(&j->arrived, 1);
    const double wait0 = now_seconds();
    while (atomic_load(&j->arrived) < j->threads && now_seconds() - wait0 < BARRIER_SECONDS)
        sched_yield(); /* more threads than CPUs: let the late ones run */
    j->start[index] = now_seconds();
    j->sums[index] = j->kind.loop(j->rounds, j->m, j->a);
    j->end[index] = now_seconds();
    attn_pin_restore(&pin);
}

static volatile float peak_sink;
static volatile float peak_m = 0.9999f, peak_a = 0.001f;

/* GFLOP/s of one repetition on all threads (pool NULL: the calling thread). */
static double peak_rep(peak_job *j, attn_threadpool *pool)
{
    atomic_store(&j->arrived, 0);
    if (pool)
        attn_threadpool_parallel_for(pool, peak_task, j, j->threads);
    else
        peak_task(j, 0);
    double first = j->start[0], last = j->end[0];
    float sum = 0.0f;
    for (size_t i = 0; i < j->threads; i++) {
        first = j->start[i] < first ? j->start[i] : first;
        last = j->end[i] > last ? j->end[i] : last;
        sum += j->sums[i];
    }
    peak_sink = sum;
    const double flops = (double)j->kind.flops_per_lane * (double)j->kind.lanes *
                         (double)j->kind.chains *
                         (double)j->rounds * (double)j->threads;
    return last > first ? flops / (last - first) * 1e-9 : 0.0;
}

/* The peak of kind k on the pool's threads (NULL: the calling thread alone). */
static double measure_peak(attn_threadpool *pool, cli_peak_kind k)
{
    peak_job j;
    j.kind = kind_of(k);
    if (!j.kind.loop)
        return 0.0;
    j.threads = (size_t)(pool && attn_threadpool_size(pool) > 0 ? attn_threadpool_size(pool) : 1);
    j.m = peak_m;
    j.a = peak_a;
    j.start = malloc(j.threads * sizeof *j.start);
    j.end = malloc(j.threads * sizeof *j.end);
    j.sums = malloc(j.threads * sizeof *j.sums);
    if (!j.start || !j.end || !j.sums) {
        free(j.start);
        free(j.end);
        free(j.sums);
        return 0.0;
    }
    /* Rounds for one repetition: double until a call on this thread takes a
       millisecond (this also wakes the vector units up), then scale. */
    int64_t rounds = 1024;
    double sec = 0.0;
    for (;;) {
        const double t0 = now_seconds();
        peak_sink = j.kind.loop(rounds, j.m, j.a);
        sec = now_seconds() - t0;
        if (sec >= 0.001 || rounds >= (INT64_C(1) << 40))
            break;
        rounds *= 2;
    }
    const double scaled = (double)rounds * REP_SECONDS / (sec > 1e-9 ? sec : 1e-9);
    j.rounds = scaled < 1.0 ? 1 : (int64_t)scaled;
    double best = 0.0;
    const double t0 = now_seconds();
    for (int rep = 0; rep < MAX_REPS; rep++) {
        if (rep > 0)
            nanosleep(&(struct timespec){ 0, PAUSE_NS }, NULL);
        const double g = peak_rep(&j, pool);
        best = g > best ? g : best;
        if (rep + 1 >= MIN_REPS && now_seconds() - t0 >= TOTAL_SECONDS)
            break;
    }
    free(j.start);
    free(j.end);
    free(j.sums);
    return best;
}

/* Once per process per pool and kind: the CLI makes one pool and asks per
   problem. Keyed by the thread count, which is all a figure depends on. */
static int32_t cached_threads[CLI_PEAK_KINDS];
static double cached_gflops[CLI_PEAK_KINDS];

double cli_peak_gflops(attn_threadpool *pool, cli_peak_kind k)
{
    const int32_t threads = attn_threadpool_size(pool);
    if (cached_gflops[k] <= 0.0 || cached_threads[k] != threads) {
        cached_gflops[k] = measure_peak(pool, k);
        cached_threads[k] = threads;
    }
    return cached_gflops[k];
}

double cli_fma_peak_gflops(attn_threadpool *pool)
{
    return cli_peak_gflops(pool, CLI_PEAK_FMA);
}

/* ------------------------------------------------------------ busy machine */

/* On a quiet machine the pool's figures agree, and each core reaches about
   one thread's figure (less what an all-core clock takes off); these leave
   room for that. */
#define BUSY_SPREAD 0.7   /* the least pool figure over the largest, at least */
#define BUSY_PER_CORE 0.5 /* the pool's peak over one thread's times its cores */

void cli_peak_check_begin(attn_threadpool *pool, peak_check *c)
{
    *c = (peak_check){0};
    c->threads = attn_threadpool_size(pool);
    c->cores = usable_cores(c->threads);
    c->single = measure_peak(NULL, CLI_PEAK_FMA);
    c->before = measure_peak(pool, CLI_PEAK_FMA);
}

void cli_peak_check_end(attn_threadpool *pool, peak_check *c)
{
    c->after = measure_peak(pool, CLI_PEAK_FMA);
    c->base = cli_fma_peak_gflops(pool);
    const double pool_figures[3] = {c->before, c->after, c->base};
    double lo = INFINITY, hi = 0.0;
    for (int i = 0; i < 3; i++)
        if (pool_figures[i] > 0.0) {
            lo = pool_figures[i] < lo ? pool_figures[i] : lo;
            hi = pool_figures[i] > hi ? pool_figures[i] : hi;
        }
    c->busy = false;
    c->why[0] = '\0';
    if (cli_test_hook("busy")) {
        c->busy = true;
        snprintf(c->why, sizeof c->why, "forced by the test hook ATTN_CLI_TEST=busy");
    } else if (hi > 0.0 && lo < BUSY_SPREAD * hi) {
        c->busy = true;
        snprintf(c->why, sizeof c->why,
                 "the FMA peak of %d thread%s measured %.1f GFLOP/s before the timed calls "
                 "and %.1f after, %.1f for the %% peak figures",
                 c->threads, c->threads == 1 ? "" : "s", c->before, c->after, c->base);
    } else if (c->cores > 0 && c->single > 0.0 && hi < BUSY_PER_CORE * c->single * c->cores) {
        c->busy = true;
        snprintf(c->why, sizeof c->why,
                 "the FMA peak of %d thread%s on %d core%s, %.1f GFLOP/s, is %.0f%% of one "
                 "thread's %.1f GFLOP/s per core",
                 c->threads, c->threads == 1 ? "" : "s", c->cores, c->cores == 1 ? "" : "s",
                 hi, 100.0 * hi / (c->single * c->cores), c->single);
    }
}

void cli_peak_warn(const char *cmd, const peak_check *c)
{
    if (c->busy)
        fprintf(stderr, "attn %s: warning: the machine looks busy (%s): the %% peak figures "
                        "are unreliable\n", cmd, c->why);
}

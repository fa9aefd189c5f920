/* SPDX-License-Identifier: MIT */
/*
 * What the families of attn_ratios (bench/attn_ratios.c) share, written
 * once in bench/ratio_driver.c: the family record and the options every
 * family reads, the interleaved repetition loop, min and median, the lines
 * bench/perf_page.py --add reads back, the limits measured in the process
 * (the FMA peak, a plain read), and problems from the problem generator.
 *
 * A family times the variants of its targets in one process, repetition
 * after repetition, so that a slow phase of a shared machine hits every
 * variant alike, and prints each one's minimum or median and their ratios.
 * Each family is one file, bench/ratios/<family>.c, defining one
 * `const ratio_family ratio_<family>` (RATIO_FAMILY); bench/meson.build
 * lists them.
 */
#ifndef ATTN_RATIO_DRIVER_H
#define ATTN_RATIO_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"
#include "gen.h"

/* ------------------------------------------------------------ families */

#define RATIO_MAX_OPTIONS 4

/* One option of a family's own: `name VALUE`. */
typedef struct ratio_option {
    const char *name;  /* "--kv" */
    const char *value; /* the value as the usage shows it: "f16|f32|bf16" */
    const char *help;
} ratio_option;

/* What the driver parsed for a family's run. */
typedef struct ratio_args {
    int reps;    /* --reps, else the family's default, 1 with --quick */
    int threads; /* --threads, else the family's default */
    /* --quick: one repetition and one call per sample, to check that the
       family runs; the shapes stay the targets' (the titles name them) */
    int quick;
    const char *opt[RATIO_MAX_OPTIONS]; /* the family's options, in its order (NULL: not given) */
} ratio_args;

/* ratio_family.threads of a family that runs on the calling thread only */
#define RATIO_ONE_THREAD (-1)

typedef struct ratio_family {
    const char *name;
    const char *help;    /* what it measures, one line (--list) */
    int reps;            /* --reps by default */
    int threads;         /* --threads by default, or RATIO_ONE_THREAD (--threads refused) */
    const char *threads_help; /* what --threads means to it */
    ratio_option opt[RATIO_MAX_OPTIONS];
    int (*run)(const ratio_args *a); /* 0, or the exit status */
} ratio_family;

/*
 * Defines family f's record, `const ratio_family ratio_<f>` named "<f>" (the
 * word bench/meson.build's list names it by) and run by `f_run`: then its
 * --reps and --threads by default, what --threads means to it (NULL with
 * RATIO_ONE_THREAD), its --list line, and its options (RATIO_NO_OPTIONS:
 * none).
 */
#define RATIO_FAMILY(f, reps_, threads_, threads_help_, help_, ...)                          \
    const ratio_family ratio_##f = {.name = #f, .help = help_, .reps = reps_,                \
                                    .threads = threads_, .threads_help = threads_help_,      \
                                    .opt = {__VA_ARGS__}, .run = f##_run}
#define RATIO_NO_OPTIONS {NULL, NULL, NULL}

/* The integer value of the family's option i, dflt when not given; exits
   with status 2 when the value is not an integer. */
int ratio_opt_int(const ratio_args *a, int i, int dflt);

/* Calls per sample: n, or 1 with --quick. */
int ratio_calls(const ratio_args *a, int n);

/* ------------------------------------------------------------ clocks, memory */

/* Wall time, and this thread's CPU time (which leaves out the time other
   processes had the core: single-threaded ratios on a shared machine). */
double ratio_wall(void);
double ratio_cpu(void);

/* 64-byte aligned memory (free() it); exits when there is none. */
void *ratio_alloc(size_t bytes);

/* Exits with the library's message when a call the family needs fails. */
void ratio_ok(attn_status st, const char *what);

/* copy[0] = src, copy[1 .. n - 1] copies of its `bytes` of their own, for
   calls that take them in turn (so that the caches come from memory, not
   from the last level of cache); ratio_copies_free frees the copies. */
void ratio_copies(void **copy, void *src, size_t bytes, int n);
void ratio_copies_free(void **copy, int n);

/* n values of dtype, uniform in [lo, hi), drawn from *stream
   (gen_fill); ratio_filled allocates n f32 ones. */
void ratio_fill(void *dst, int32_t dtype, int64_t n, float lo, float hi, uint64_t *stream);
float *ratio_filled(size_t n, float lo, float hi, uint64_t *stream);

/* The calls' threads: NULL for 1 (parallel_for NULL: the calling thread),
   else a pool of `threads` (0: one per CPU, attn.h); exits when it cannot
   be made. Destroy with attn_threadpool_destroy (NULL: nothing). */
attn_threadpool *ratio_pool(int threads);
int ratio_pool_size(const attn_threadpool *pool);
/* Points o's parallel_for at the pool (NULL: none). */
void ratio_use_pool(attn_options *o, attn_threadpool *pool);

/* ------------------------------------------------------------ the repetitions */

enum {
    RATIO_IN_TURN, /* every repetition: variant 0, 1, ... */
    RATIO_ROTATE,  /* repetition r starts at variant r mod n */
    RATIO_SHUFFLE, /* a new permutation every repetition */
};

/*
 * A sample is `calls[v]` calls of call(ctx, v, rep, c), c = 0 .. calls - 1,
 * timed together; its time per call is kept. rep is -1 in the untimed
 * warm-up round.
 */
typedef struct ratio_loop {
    int variants, reps;
    int warmup;       /* 1: one untimed round first (in turn) */
    int order;        /* RATIO_* */
    const int *calls; /* per variant; NULL: `each` for every variant */
    int each;         /* with calls NULL (0: 1) */
    int only;         /* >= 0: that variant alone (for a profiler), the others' times 0 */
    void (*call)(void *ctx, int variant, int rep, int c);
    void *ctx;
} ratio_loop;

/* Seconds per call of every sample, [variant][rep]: wall and this thread's
   CPU time. */
typedef struct ratio_times {
    int variants, reps;
    double *wall, *cpu;
} ratio_times;

void ratio_interleave(const ratio_loop *l, ratio_times *t);
void ratio_times_free(ratio_times *t);
/* Variant v's samples. */
static inline double *ratio_wall_of(const ratio_times *t, int v) { return t->wall + v * t->reps; }
static inline double *ratio_cpu_of(const ratio_times *t, int v) { return t->cpu + v * t->reps; }

/* Minimum, median (of an even count: the mean of the middle two) and
   maximum of n samples; sorts them. */
typedef struct ratio_stat {
    double min, median, max;
} ratio_stat;
ratio_stat ratio_stats(double *x, int n);
static inline double ratio_median(double *x, int n) { return ratio_stats(x, n).median; }

/* ratio_interleave, then each variant's stats of wall time into wall[v]
   and of this thread's CPU time into cpu[v] (either NULL: not wanted). */
void ratio_measure(const ratio_loop *l, ratio_stat *wall, ratio_stat *cpu);

/* ------------------------------------------------------------ what is printed */

/*
 * The lines bench/perf_page.py --add reads back from a family's output
 * (its from_text): the header "libattn <version>, ISA <isa>, " followed by
 * fmt (which names the threads: "%d thread(s)"), a title line that starts
 * in column 0, and under it indented
 *   "  ratio <what>  <number>..."     (ratio_print_ratio: what padded to width)
 *   "  <variant>  median <t> ms (<r>x <base>) ..."   (ratio_print_vs)
 */
void ratio_header(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ratio_print_ratio(int width, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ratio_print_vs(int width, const char *name, ratio_stat s, ratio_stat base,
                    const char *base_name);

/* ------------------------------------------------------------ limits in the process */

/* FLOP/s of the widest FMA loop this CPU runs (tools/peak_loops.h, the
   loops `attn run` measures with) on the calling thread, best of 20 runs
   of about 1 ms. */
double ratio_fma_peak(void);
/* One plain read of `bytes` bytes (eight independent sums, so the loads
   bound it, not the adds). */
void ratio_read(const void *p, size_t bytes);

/* ------------------------------------------------------------ problems */

/* A profile that draws nothing (every choice its pin or its default, from
   any source), without a work cap, the inputs' values uniform in [lo, hi). */
void ratio_profile(gen_profile *p, float lo, float hi);
/* The choices most problems pin: 0 leaves one to its default. */
typedef struct ratio_dims {
    int64_t batch, kv_heads, group, q_len, kv_len, head_dim;
} ratio_dims;
/* ratio_profile, then dims pinned. */
void ratio_profile_dims(gen_profile *p, float lo, float hi, ratio_dims dims);
/* Draws d from p: draw_seed 0 takes the fixed source (every choice its pin
   or default), another a splitmix source of that seed, for what the drawing
   leaves to chance once the choices are made (top-k lists). */
void ratio_draw(gen_problem *d, const gen_profile *p, uint64_t draw_seed);
/* Materialises d from `seed` with `flags` (GEN_M_*); exits when out of
   memory. */
void ratio_materialise(gen_bufs *m, const gen_problem *d, uint64_t seed, unsigned flags);
/* Both. */
void ratio_problem(gen_problem *d, gen_bufs *m, const gen_profile *p, uint64_t draw_seed,
                   uint64_t seed, unsigned flags);
void ratio_problem_free(gen_problem *d, gen_bufs *m);

/* attn_forward of m's problem with the options o; exits with `what` and
   the library's message when it fails. */
void ratio_forward(const gen_bufs *m, const attn_options *o, const char *what);
/* Gives o the workspace the library asks for shape s with the options
   `as` (NULL: o's own), none when it asks for none; free(o->workspace). */
void ratio_workspace(attn_options *o, const attn_shape *s, const attn_options *as);

#endif /* ATTN_RATIO_DRIVER_H */

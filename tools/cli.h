/* SPDX-License-Identifier: MIT */
/*
 * attn, the libattn command-line tool: what its files share.
 *
 *   main.c      commands and `attn --help`
 *   options.c   THE option table of run and bench, its parser and its help
 *   problem.c   presets, a problem's description from the flags (the
 *               problem generator, problems/gen.h) and its geometry (visible
 *               keys, FLOPs, bytes)
 *   numbers.c   clocks, CPUs, the test hooks (ATTN_CLI_TEST)
 *   exec.c      buffers (the generator's, plus K/V copies to rotate), the
 *               progress line, timing, one measured problem
 *   peak.c      the FMA peak of the pool's threads (the roofline's compute side)
 *   pin.h       pins a thread to one CPU for the peak (bench_attn.cc too)
 *   backward.c  run --backward: timing attn_backward, dq rows in float64
 *   verify.c    sampled rows against the scalar oracle (reads exec.c's
 *               buffers; exec.c does not call it)
 *   json.c      the --json writer
 *   cmd_run.c, cmd_bench.c, cmd_info.c, cmd_completion.c   the commands
 *
 * Uses the public API only (attn.h, src/dtype_list.h and src/option_list.h,
 * which are data on attn.h alone, and problems/, which uses nothing else);
 * cpu_features only describes the CPU in `attn info`, never makes decisions
 * the library makes itself. A new option is a row of the table in options.c:
 * parsing, --help and the completion come from the row (a parser that takes
 * names lists them in value_sets there). An execution option also needs a
 * field of cli_settings; a problem option pins its generator choice (for an
 * attn_options line, GEN_C_OPT(field)), and the description, the buffers
 * and the timed calls follow. What the verification's oracle does not get
 * from the description (verify.c: a one-row problem over the row's visible
 * keys, ALiBi as a bias row) is written by hand there.
 */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attn.h"
#include "gen.h"

/* Exit codes (documented in `attn --help`). */
enum {
    EXIT_OK = 0,
    EXIT_VERIFY_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_LIBRARY = 3,
};

/* The verification's unit roundoffs: f32's, and 2b + b^2 (b = 2^-8) for a
   product of two factors rounded to bfloat16 (attn.h, the bf16 mode). */
#define F32_UNIT_ROUNDOFF 0x1p-24
#define BF16_PRODUCT (0x1p-7 + 0x1p-16)

/* The bf16 mode's bound of one score before the scale (attn.h): terms =
   sum_t |q_t k_t|, folded = sum_t max(|q_t|, |k_t|) over d dims. */
static inline double bf16_score_bound(double terms, double folded, int64_t d)
{
    return BF16_PRODUCT * (1.0 + (double)(d + 1) * 2.0 * F32_UNIT_ROUNDOFF) * terms +
           0x1p-126 * (folded + (double)d);
}

/* Upper bounds the CLI accepts (the library has its own checks). */
#define MAX_THREADS 1024 /* attn_threadpool_create's limit (attn.h) */
#define MAX_VERIFY_ROWS 65536
#define MAX_ITERS 100000000
/* A single call at least this long is timed once (no warm-up, no repeat). */
#define SINGLE_CALL_SECONDS 1.0
/* Problems with at most this many query rows are decode-like (memory-bound). */
#define DECODE_LIKE_MAX_Q_LEN 16
/* The progress line appears once a timed phase has run this long. */
#define PROGRESS_AFTER_SECONDS 1.0

/* ------------------------------------------------------------ problems (problem.c) */

/* A problem: its description, drawn from the preset and the flags by the
   problem generator with every choice fixed (problems/gen.h). */
typedef struct problem {
    const char *name;
    attn_shape shape; /* as given: per sequence (--packed: the longest) */
    gen_problem g;    /* the call's (--packed: q_len, kv_len are the token counts) */
} problem;

typedef struct preset {
    const char *name;
    const char *about;
    attn_shape shape;
    bool causal;
    attn_dtype kv_dtype;
    int64_t shared_prefix; /* keys each sequence shares with the one before (0: none) */
} preset;

extern const preset cli_presets[];
extern const size_t cli_preset_count;
/* The order `attn bench` runs them in. */
extern const char *const cli_bench_order[];
extern const size_t cli_bench_count;

const preset *find_preset(const char *name);
/* The preset's problem, with the choices pinned in *flags (NULL: none). */
problem preset_problem(const preset *pre, const attn_shape *shape, const gen_profile *flags);
void problem_free(problem *p);
int64_t v_dim_of(const attn_shape *s);
float scale_of(const problem *p);
attn_dtype kv_dtype_of(const problem *p);
bool is_packed(const problem *p);
int64_t paged_block_of(const problem *p);
bool has_alibi(const problem *p);
bool has_sink(const problem *p);
float sink_of(const problem *p);
/* Bytes per stride unit: an element, or a block of dtype_block(t) values. */
size_t dtype_size(attn_dtype t);
int64_t dtype_block(attn_dtype t);
const char *dtype_name(attn_dtype t);
/* A valid K/V dtype (--kv-dtype). */
bool dtype_is_kv(attn_dtype t);
/* Query and key lengths of sequence b: q_len and kv_len, or with --packed
   q_len/20 .. q_len spread evenly over the batch (keys: kv_len - q_len more). */
void seq_lengths(const problem *p, int64_t b, int64_t *lq, int64_t *lk);
/* Keys [*lo, *hi) that query row i of sequence b may see (the masks of attn.h). */
void visible_keys(const problem *p, int64_t b, int64_t i, int64_t *lo, int64_t *hi);
/* Visible query-key pairs of one (batch, head), averaged over the batch. */
double visible_pairs(const problem *p);
double flops_per_call(const problem *p);
/* The K and V bytes a call must read: a shared prefix once (attn.h). */
double kv_bytes_per_call(const problem *p);
/* The bytes of a dense K and V cache of the shape (every slot). */
double kv_cache_bytes(const problem *p);
/* Keys sequence b shares with the one before it (0: none). */
int64_t shared_keys(const problem *p, int64_t b);
/* Few query rows (decode, speculative decoding): bound by reading K and V. */
bool is_decode_like(const problem *p);

/* ------------------------------------------------------------ numbers (numbers.c) */

double now_seconds(void);
int online_cpus(void);
/* CPUs this process may run on (sched_getaffinity; online_cpus elsewhere). */
int usable_cpus(void);
/* Distinct physical cores among the first n CPUs of the affinity mask (the
   CPUs the peak's threads are pinned to); 0 when the OS does not say. */
int usable_cores(int n);
/* Whether the comma-separated list in ATTN_CLI_TEST names `hook`: test
   hooks only ("progress": a progress line at every call, newline-ended,
   whatever stderr is; "busy": the busy verdict forced on). */
bool cli_test_hook(const char *hook);

/* ------------------------------------------------------------ options (options.c) */

/* What the command line sets; every field starts "not given". */
enum { D_BATCH, D_QH, D_KVH, D_QLEN, D_KVLEN, D_HDIM, D_VDIM, N_DIMS };
#define CLI_MAX_CHOSEN 64

typedef struct cli_settings {
    /* execution (run and bench) */
    int64_t threads;
    bool isa_given;
    attn_isa isa;
    int64_t iters;
    int64_t verify_rows;
    uint64_t seed;
    bool progress;
    int64_t splits; /* attn_options.kv_splits: 0 automatic, 1 never, N */
    bool backward; /* run: time attn_backward instead of attn_forward */
    bool plan;     /* run: time attn_plan_run on a plan made once */
    bool json;     /* one JSON document on stdout instead of the report */
    /* the problem (run): a preset, then overrides: dimensions (-1: not
       given) and the generator's choices the flags pin */
    const preset *preset;
    int64_t dims[N_DIMS];
    gen_profile pins;
    /* bench */
    const preset *chosen[CLI_MAX_CHOSEN];
    size_t n_chosen;
} cli_settings;

/* Which command an option belongs to (bits). */
enum { CLI_RUN = 1u, CLI_BENCH = 2u };

/* Fills *s with the defaults of `command` (CLI_RUN or CLI_BENCH). */
void cli_defaults(unsigned command, cli_settings *s);
/*
 * Parses argv[1..argc) of `cmd` ("run" or "bench") through the option table.
 * Returns EXIT_OK, EXIT_USAGE (message printed), or -1 when --help was
 * asked (the caller prints cli_print_help and exits 0).
 */
int cli_parse(unsigned command, const char *cmd, int argc, char **argv, cli_settings *s);
/* Prints intro, the option list of `command` (from the table), outro. */
void cli_print_help(unsigned command, const char *intro, const char *outro);
/* Whether any option changed the preset's problem. */
bool cli_problem_overridden(const cli_settings *s);
/* The preset's problem with the overrides applied. */
problem cli_problem(const cli_settings *s);
/*
 * Every combination of options the library (or this tool) would refuse,
 * checked once, before any library call: EXIT_OK, or EXIT_USAGE with a
 * message naming the options and what is allowed. p: run's problem (NULL
 * for bench, whose presets are valid).
 */
int cli_check(const char *cmd, const cli_settings *s, const problem *p);

/* An option as `attn completion` sees it: from the table the parser uses. */
#define CLI_MAX_VALUES 32
typedef struct cli_option_view {
    const char *name;
    unsigned commands;
    bool takes_value;
    bool list;       /* a comma-separated list of values */
    size_t n_values; /* 0: a free-form value (or a flag) */
    const char *values[CLI_MAX_VALUES];
} cli_option_view;
/* Option i of the table (false past its end). */
bool cli_option_at(size_t i, cli_option_view *v);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int usage_error(const char *cmd, const char *fmt, ...);

/* ------------------------------------------------------------ execution (exec.c) */

typedef struct timing {
    int64_t calls;    /* timed calls */
    double mean_s;
    double best_s;
    double median_s;
    bool single_cold; /* one call, no warm-up: it took >= SINGLE_CALL_SECONDS */
} timing;

/* The seconds of up to CLI_MAX_SAMPLES timed calls, evenly spread over
   them, for the median. */
#define CLI_MAX_SAMPLES (1 << 20)
typedef struct samples {
    double *s;
    int64_t n, cap, stride, seen; /* kept, room, every stride-th kept, added */
    double total, best;
} samples;
/* For `calls` calls; false when out of memory. */
bool samples_init(samples *x, int64_t calls);
void samples_add(samples *x, double seconds);
/* Calls, mean, best and median of what was added; frees x. */
timing samples_timing(samples *x);

typedef struct buffers {
    /* the problem's tensors, options and NaN-poisoned output, in its layout
       (problems/gen.h): what the timed calls use and verify reads */
    gen_bufs m;
    /* decode-like dense problems: `copies` identical copies of K (V), each
       k_copy_bytes (v_copy_bytes) long, rotated over by the timed calls */
    void *k, *v;
    int64_t copies;
    size_t k_copy_bytes, v_copy_bytes;
} buffers;

typedef struct verify_result {
    int64_t rows;
    double max_abs;
    double max_rel;
    double worst_ratio; /* max over rows of error / tolerance */
    bool pass;
    /* The worst row, for the failure message. */
    int64_t worst_b, worst_h, worst_i;
} verify_result;

typedef struct measurement {
    timing time;
    timing floor;          /* the plain read of the same bytes (calls 0: not measured) */
    double gflops;
    double kv_gbytes_s;
    double floor_gbytes_s; /* K+V bytes / the floor's mean time */
    double floor_read_s;   /* the floor's time for the bytes the call must read */
    int64_t kv_copies;     /* K/V copies rotated over (1: none) */
    /* The compute peak of the call's precision (0: none): the pool's FMA
       peak (cli_fma_peak_gflops), or, where a mode runs on dot products,
       FLOPs / (QK FLOPs / its units' peak + PV FLOPs / theirs). */
    double peak_gflops;
    const char *peak_what; /* which units peak_gflops is, for the report */
    /* The roofline of a decode-like call with its floor measured (else 0):
       max(K+V bytes / the floor's bandwidth, FLOPs / peak_gflops). */
    double t_star_s;
    attn_isa isa;
    int32_t threads;
    size_t workspace; /* workspace bytes given to attn_forward (attn_forward_workspace_size) */
    int split;        /* the call splits its keys (split-KV) */
    verify_result verify;
} measurement;

void *alloc_elems(int64_t n, size_t size);
/* Seeded q, k, v and a NaN-poisoned out for p (EXIT_LIBRARY when out of
   memory); cli_check has refused what the tool cannot lay out. */
int buffers_init(buffers *b, const problem *p, uint64_t seed);
void buffers_free(buffers *b);
attn_tensor make_tensor(void *data, attn_dtype t, int64_t heads, int64_t rows, int64_t cols);
/* The library's attn_last_error() line first, then which call and its status. */
int library_error(const char *what, attn_status st);
/* Times p on b (target_s of calls when iters is 0); m->verify is the
   caller's (verify.c). */
int measure(const problem *p, const cli_settings *x, attn_threadpool *pool, double target_s,
            const buffers *b, measurement *m);
/* Selects --isa if given and creates the pool of --threads. */
int open_pool(const cli_settings *x, attn_threadpool **pool);
void format_ms(char *buf, size_t size, double seconds);

/* ------------------------------------------------------------ FMA peak (peak.c) */

/* Single-precision FMA GFLOP/s of all of pool's threads at once (each an
   independent register-only loop on the widest FMA the CPU has, best of
   repetitions, about 40 ms); measured on the first call for a thread count,
   then cached. 0 if it could not be measured. */
double cli_fma_peak_gflops(attn_threadpool *pool);
/* What that loop runs, e.g. "AVX-512 FMA" (a scalar fallback says so). */
const char *cli_fma_peak_kind(void);
/*
 * Whether the machine looked busy while this run measured: the pool's FMA
 * peak is measured again just before and just after the timed calls, and
 * one thread alone. On a quiet machine the pool's figures agree, and each
 * core the pool's threads are pinned to reaches about the single thread's;
 * other work on the CPUs makes them differ, or fall far below.
 */
typedef struct peak_check {
    double before, after; /* the pool's FMA peak, GFLOP/s */
    double single;        /* one thread alone */
    double base;          /* cli_fma_peak_gflops, which the % peak figures use */
    int threads, cores;   /* the pool's threads; the distinct cores they ran on (0: unknown) */
    bool busy;
    char why[256];        /* when busy: the figures that say so */
} peak_check;
void cli_peak_check_begin(attn_threadpool *pool, peak_check *c);
void cli_peak_check_end(attn_threadpool *pool, peak_check *c);
/* The warning line of a busy check (stderr), prefixed "attn CMD: ". */
void cli_peak_warn(const char *cmd, const peak_check *c);
/* The same for the dot-product instructions of the precision modes:
   GFLOP/s (an int8 multiply-add counts 2 ops), 0 when the CPU lacks them. */
typedef enum cli_peak_kind { CLI_PEAK_FMA, CLI_PEAK_BF16, CLI_PEAK_INT8, CLI_PEAK_KINDS } cli_peak_kind;
double cli_peak_gflops(attn_threadpool *pool, cli_peak_kind k);
const char *cli_peak_kind_name(cli_peak_kind k);

/* ------------------------------------------------------------ backward (backward.c) */

/* Algorithmic FLOPs of one attn_backward (5 products per visible pair). */
double backward_flops_per_call(const problem *p);
/* measure() for attn_backward: a forward for out and lse, then the timed
   backward; verifies sampled dq rows in float64. */
int measure_backward(const problem *p, const cli_settings *x, attn_threadpool *pool,
                     double target_s, measurement *m);

/* ------------------------------------------------------------ verification (verify.c) */

/* Whether a draft tree (--tree) or a top-k list (--topk) hides key j of
   sequence b from its query i (the masks visible_keys does not apply). */
bool key_hidden(const problem *p, int64_t b, int64_t i, int64_t j);
/* Verifies `rows` sampled rows of b's output on the scalar ISA. */
int verify(const problem *p, const buffers *b, int64_t rows, verify_result *vr);
/* buffers_init, measure, verify, buffers_free: one problem of run or bench. */
int measure_verified(const problem *p, const cli_settings *x, attn_threadpool *pool,
                     double target_s, measurement *m);

/* ------------------------------------------------------------ commands */

int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_completion(int argc, char **argv);
/* The commands `attn --help` lists, in its order (main.c). */
extern const char *const cli_commands[];
extern const size_t cli_command_count;

/* ------------------------------------------------------------ JSON (json.c) */

/* A writer of one pretty-printed JSON document; keys are NULL inside arrays. */
#define JSON_MAX_DEPTH 8
typedef struct json_out {
    FILE *f;
    int depth;
    bool comma[JSON_MAX_DEPTH]; /* a value came before at this depth */
    char close[JSON_MAX_DEPTH]; /* '}' or ']' */
} json_out;
void json_begin(json_out *j, FILE *f);
void json_end(json_out *j);
void json_object(json_out *j, const char *key);
void json_array(json_out *j, const char *key);
void json_close(json_out *j);
void json_str(json_out *j, const char *key, const char *v); /* NULL: null */
void json_num(json_out *j, const char *key, double v);      /* not finite: null */
void json_int(json_out *j, const char *key, int64_t v);
void json_uint(json_out *j, const char *key, uint64_t v);
void json_bool(json_out *j, const char *key, bool v);
void json_null(json_out *j, const char *key);
/* The parts run and bench share: a timing in milliseconds {calls,
   single_cold, mean_ms, median_ms, min_ms}; "peak" {gflops, percent (when
   achieved is not NaN), units, kind, threads, before_gflops, after_gflops,
   single_thread_gflops, cores}, then "busy" and "busy_why"; "verify" {rows,
   against, max_abs, max_rel, worst_ratio, pass} (rows 0: not verified). */
void json_timing(json_out *j, const char *key, const timing *t);
void json_peak(json_out *j, double peak, double achieved, const char *units, const char *kind,
               int threads, const peak_check *pc);
void json_verify(json_out *j, const verify_result *vr, int64_t rows, const char *against);

/* The --precision name of an attn_precision value ("?" for none). */
const char *cli_precision_name(int64_t precision);

#endif /* ATTN_CLI_H */

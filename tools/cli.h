/*
 * attn, the libattn command-line tool: what its files share.
 *
 *   main.c      commands and `attn --help`
 *   options.c   THE option table of run and bench, its parser and its help
 *   problem.c   presets and a problem's geometry (visible keys, FLOPs, bytes)
 *   numbers.c   f16/bf16 conversion, the seeded input generator, clocks
 *   exec.c      buffers, the progress line, timing, one measured problem
 *   peak.c      the FMA peak of the pool's threads (the roofline's compute side)
 *   pin.h       pins a thread to one CPU for the peak (bench_attn.cc too)
 *   backward.c  run --backward: timing attn_backward, dq rows in float64
 *   verify.c    sampled rows against the scalar oracle
 *   cmd_run.c, cmd_bench.c, cmd_info.c   the commands
 *
 * Uses the public API only (attn.h, and src/dtype_list.h, which is data on
 * attn.h alone); cpu_features only describes the CPU in `attn info`, never
 * makes decisions the library makes itself. A new option is a row of the
 * table in options.c and a field of cli_settings: parsing and --help come
 * from the row. One that changes the problem also needs its "not given"
 * value in cli_defaults and its lines in cli_problem_overridden and
 * cli_problem (options.c), and a field of problem.
 */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn.h"

/* Exit codes (documented in `attn --help`). */
enum {
    EXIT_OK = 0,
    EXIT_VERIFY_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_LIBRARY = 3,
};

/* Upper bounds the CLI accepts (the library has its own checks). */
#define MAX_THREADS 4096
#define MAX_VERIFY_ROWS 65536
#define MAX_ITERS 100000000
/* A single call at least this long is timed once (no warm-up, no repeat). */
#define SINGLE_CALL_SECONDS 1.0
/* Problems with at most this many query rows are decode-like (memory-bound). */
#define DECODE_LIKE_MAX_Q_LEN 16
/* The progress line appears once a timed phase has run this long. */
#define PROGRESS_AFTER_SECONDS 1.0

/* ------------------------------------------------------------ problems (problem.c) */

typedef struct problem {
    const char *name;
    attn_shape shape;
    bool causal;
    int64_t window;
    float scale;
    float softcap;
    attn_dtype kv_dtype;
    /* score modifiers (attn.h 1.1) */
    int64_t window_right; /* 0: off */
    bool alibi;           /* ALiBi with alibi_slope(h, q_heads) */
    bool has_sink;
    float sink;           /* one sink logit for every query head */
    /* K/V in a paged pool [blocks][paged_block][kv_heads][d] read through a
       shuffled block table (0: one contiguous cache per batch entry) */
    int64_t paged_block;
    /* the batch as variable-length sequences (seq_lengths) packed into
       [tokens][heads][d] tensors with offsets, instead of padded */
    bool packed;
} problem;

typedef struct preset {
    const char *name;
    const char *about;
    problem problem;
} preset;

extern const preset cli_presets[];
extern const size_t cli_preset_count;
/* The order `attn bench` runs them in. */
extern const char *const cli_bench_order[];
extern const size_t cli_bench_count;

const preset *find_preset(const char *name);
int64_t v_dim_of(const attn_shape *s);
float scale_of(const problem *p);
/* Bytes per stride unit: an element, or a block of dtype_block(t) values. */
size_t dtype_size(attn_dtype t);
int64_t dtype_block(attn_dtype t);
const char *dtype_name(attn_dtype t);
/* Q8_0, Q4_0, FP8: values made by attn_quantize. */
bool dtype_is_quantized(attn_dtype t);
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
double kv_bytes_per_call(const problem *p);
/* Few query rows (decode, speculative decoding): bound by reading K and V. */
bool is_decode_like(const problem *p);
/* The options of p; sinks and ALiBi slopes point into b (see buffers). */
attn_options options_of(const problem *p);
/* ALiBi's standard slope of query head h of `heads` (the ALiBi paper's
   geometric sequence, extended as its reference code does for heads that
   are not a power of two). */
float alibi_slope(int64_t h, int64_t heads);

/* ------------------------------------------------------------ numbers (numbers.c) */

float load_elem(const void *base, attn_dtype t, size_t i);
/* Seeded bell-shaped values in [-1, 1), stored as dtype t (quantized by
   attn_quantize for Q8_0/Q4_0/FP8; n a multiple of 32 for the block
   formats). 0, or -1 when attn_quantize refused. */
int fill_random(void *dst, attn_dtype t, size_t n, uint64_t *state);
double now_seconds(void);
int online_cpus(void);

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
    /* the problem (run): a preset, then overrides; -1 / NaN: not given */
    const preset *preset;
    int64_t dims[N_DIMS];
    int causal;
    int64_t window;
    float scale, softcap;
    int kv_dtype;
    int64_t window_right; /* -1: not given */
    float sink;           /* NaN: not given */
    int alibi;            /* -1: not given */
    int64_t paged_block;
    bool packed;
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
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int usage_error(const char *cmd, const char *fmt, ...);

/* ------------------------------------------------------------ execution (exec.c) */

typedef struct timing {
    int64_t calls;    /* timed calls */
    double mean_s;
    double best_s;
    bool single_cold; /* one call, no warm-up: it took >= SINGLE_CALL_SECONDS */
} timing;

typedef struct buffers {
    float *q;
    void *k; /* `copies` identical copies of K, k_copy_bytes apart */
    void *v; /* likewise for V */
    float *out; /* dense [B][H][q_len][dv]: what verify reads */
    attn_tensor tq, tk, tv, tout; /* what the timed calls use; tk, tv: copy 0 */
    int64_t copies;
    size_t k_copy_bytes, v_copy_bytes;
    /* score modifiers: the sink (one value, broadcast over batch and heads)
       and the ALiBi slopes [q_heads] (NULL without ALiBi) */
    float sink;
    float *slopes;
    attn_tensor tsinks, tslopes;
    /* --paged-block, --packed: the layouts the timed calls use instead (one
       copy: a layout is never rotated) */
    void *pool_k, *pool_v;
    int32_t *table, *q_lens, *kv_lens, *q_offsets, *kv_offsets;
    float *packed_q, *packed_out;
    void *packed_k, *packed_v;
    attn_options layout; /* the layout fields of the timed calls' options */
    attn_shape shape;    /* the timed calls' shape (packed: q_len, kv_len = tokens) */
} buffers;

/* opt with p's sinks and ALiBi slopes from b (when p has them). */
void add_modifiers(attn_options *opt, const problem *p, const buffers *b);

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
    int64_t kv_copies;     /* K/V copies rotated over (1: none) */
    double peak_gflops;    /* the pool's measured FMA peak (cli_fma_peak_gflops; 0: none) */
    /* The roofline of a decode-like call with its floor measured (else 0):
       max(K+V bytes / the floor's bandwidth, FLOPs / peak_gflops). */
    double t_star_s;
    attn_isa isa;
    int32_t threads;
    size_t workspace; /* split-KV workspace bytes given to attn_forward (0: unsplit) */
    verify_result verify;
} measurement;

void *alloc_elems(int64_t n, size_t size);
/* Seeded q, k, v and a NaN-poisoned out for p (EXIT_LIBRARY when out of memory). */
int buffers_init(buffers *b, const problem *p, uint64_t seed);
void buffers_free(buffers *b);
attn_tensor make_tensor(void *data, attn_dtype t, int64_t heads, int64_t rows, int64_t cols);
int library_error(const char *what, attn_status st);
/* Times p (target_s of calls when iters is 0) and verifies sampled rows. */
int measure(const problem *p, const cli_settings *x, attn_threadpool *pool, double target_s,
            measurement *m);
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

/* ------------------------------------------------------------ backward (backward.c) */

/* Algorithmic FLOPs of one attn_backward (5 products per visible pair). */
double backward_flops_per_call(const problem *p);
/* measure() for attn_backward: a forward for out and lse, then the timed
   backward; verifies sampled dq rows in float64. */
int measure_backward(const problem *p, const cli_settings *x, attn_threadpool *pool,
                     double target_s, measurement *m);

/* ------------------------------------------------------------ verification (verify.c) */

/* Verifies `rows` sampled rows of b's output on the scalar ISA. */
int verify(const problem *p, const buffers *b, int64_t rows, verify_result *vr);

/* ------------------------------------------------------------ commands */

int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);

#endif /* ATTN_CLI_H */

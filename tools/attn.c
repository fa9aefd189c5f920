/*
 * attn: the libattn command-line tool.
 *
 *   attn info    library version, CPU, ISAs, threads
 *   attn run     time attn_forward on one problem and check sampled rows
 *                against the scalar oracle
 *   attn bench   every preset in turn, one table
 *
 * Uses the public API only (attn.h); cpu_features is used to describe the
 * CPU, never to make decisions the library makes itself.
 */
#define _DEFAULT_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn.h"

#include "cpu_features_macros.h"
#if defined(CPU_FEATURES_ARCH_X86)
#include "cpuinfo_x86.h"
#elif defined(CPU_FEATURES_ARCH_AARCH64)
#include "cpuinfo_aarch64.h"
#endif

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
/* The progress line appears once a timed phase has run this long. */
#define PROGRESS_AFTER_SECONDS 1.0

/* ------------------------------------------------------------------ usage */

static const char usage_main[] =
    "Usage: attn <command> [options]\n"
    "       attn --help | --version\n"
    "\n"
    "The libattn command-line tool.\n"
    "\n"
    "Commands:\n"
    "  info    library version, CPU (vendor, model, microarchitecture, SIMD\n"
    "          features), which instruction sets libattn can use and which is\n"
    "          active, and the number of online CPUs\n"
    "  run     time attn_forward on one problem (a preset, optionally with\n"
    "          overrides) and verify sampled rows against the scalar oracle\n"
    "  bench   run every preset with the active instruction set; one table\n"
    "  help    `attn help <command>` is `attn <command> --help`\n"
    "\n"
    "Environment:\n"
    "  ATTN_ISA=scalar|avx2|avx512|neon|sve  read by libattn at its first call:\n"
    "          the instruction set to use when available (--isa overrides it)\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  verification failed (run, bench)\n"
    "  2  bad command line\n"
    "  3  libattn returned an error (its attn_strerror message is printed),\n"
    "     or memory could not be allocated\n";

static const char usage_info[] =
    "Usage: attn info\n"
    "\n"
    "Prints:\n"
    "  - the version of the loaded libattn (attn_version_string) and of the\n"
    "    attn.h this tool was compiled against;\n"
    "  - the CPU as cpu_features sees it: brand, vendor, family/model/stepping,\n"
    "    microarchitecture and the SIMD features libattn cares about\n"
    "    (x86: sse4.2 avx avx2 fma3 f16c avx512f/bw/dq/vl; aarch64: asimd sve);\n"
    "  - for each instruction set: whether the CPU has it, whether libattn can\n"
    "    use it (attn_isa_available: compiled in AND supported by the CPU) and\n"
    "    which one is active (attn_isa_active). Whether an ISA is compiled in\n"
    "    is known only where the CPU has it: then built == available; where\n"
    "    the CPU lacks it, the public API cannot tell, and info says so;\n"
    "  - the number of online CPUs (the default thread count of run/bench).\n"
    "\n"
    "Exit status: 0, or 2 for unexpected arguments.\n";

static const char usage_run[] =
    "Usage: attn run [options]\n"
    "\n"
    "Times attn_forward (O = softmax(Q.K^T * scale) . V, fused) with the built-in\n"
    "thread pool, then verifies sampled output rows against the scalar oracle.\n"
    "Q, K and V are filled with seeded pseudo-random values in [-1, 1] (a sum of\n"
    "four uniforms: bell-shaped), layout [batch][head][row][dim], contiguous.\n"
    "\n"
    "Problem:\n"
    "  --preset NAME     prefill (default), decode, prefill-f16, decode-f16, small\n"
    "      prefill      Llama-3-8B-like prefill: batch 1, 32 query heads, 8 KV heads,\n"
    "                   head_dim 128, q_len = kv_len = 2048, causal, K/V f32\n"
    "      decode       one decode step: as prefill but q_len 1, kv_len 4096\n"
    "      prefill-f16  prefill with K and V stored as f16\n"
    "      decode-f16   decode with K and V stored as f16\n"
    "      small        batch 2, 8 query heads, 2 KV heads, head_dim 64,\n"
    "                   q_len = kv_len = 256, causal (a quick check)\n"
    "  --batch N --q-heads N --kv-heads N --q-len N --kv-len N --head-dim N\n"
    "  --v-dim N         override one dimension (v-dim 0: = head-dim);\n"
    "                    q-heads must be a multiple of kv-heads\n"
    "  --causal, --no-causal\n"
    "                    bottom-right aligned causal mask on / off\n"
    "  --window W        sliding window of W keys (0: off)\n"
    "  --scale S         score scale (0: 1/sqrt(head_dim))\n"
    "  --softcap C       score soft-capping C*tanh(s/C) (0: off)\n"
    "  --kv-dtype T      f32, f16 or bf16 storage of K and V\n"
    "  --seed S          seed of the input generator (default 1)\n"
    "\n"
    "Execution:\n"
    "  --threads N       threads of the built-in pool, caller included\n"
    "                    (0, the default: all online CPUs)\n"
    "  --isa NAME        scalar, avx2, avx512, neon, sve or auto: select it with\n"
    "                    attn_isa_select before timing (default: keep the\n"
    "                    library's choice, which honours ATTN_ISA)\n"
    "  --iters N         N timed calls after one warm-up call. 0 (default):\n"
    "                    automatic: the first call is timed; if it took at least\n"
    "                    1 s it is the result, otherwise it was the warm-up and\n"
    "                    enough calls follow to fill about 2 s\n"
    "  --verify-rows N   rows to verify (default 16, 0: none), spread evenly over\n"
    "                    all (batch, head, query) rows, first and last included\n"
    "  --no-progress     no progress line (it is shown on stderr, when stderr\n"
    "                    is a terminal, once a timed phase exceeds 1 s)\n"
    "\n"
    "Output:\n"
    "  time per call (mean and best), GFLOP/s counting 2*head_dim + 2*v_dim flops\n"
    "  (= 4*d when v_dim = d) per VISIBLE query-key pair (causal and window masks\n"
    "  are counted exactly), GB/s of K+V bytes read once per call (q_len 1), the\n"
    "  ISA used.\n"
    "\n"
    "Verification:\n"
    "  Each sampled row i of (batch b, head h) is recomputed on its own with the\n"
    "  scalar ISA (attn_isa_select(ATTN_ISA_SCALAR), restored afterwards) as a\n"
    "  mask-free one-query problem over exactly its visible keys [lo, hi): with\n"
    "  off = kv_len - q_len (bottom-right alignment), hi = i + off + 1 when causal\n"
    "  (else kv_len) and lo = i + off - W + 1 for a window W (else 0), clipped to\n"
    "  [0, kv_len]. Row pointers are passed through attn_tensor strides, so the\n"
    "  oracle sees the same data and checks the masks as well as the kernels. A\n"
    "  row with no visible key must be exactly 0.\n"
    "  Tolerance, per row: |o - o_ref| <= 8 * u * (2*sqrt(d)*A + sqrt(n) + 8) * V\n"
    "    u = 2^-24 (f32 unit roundoff), d = head_dim, n = visible keys,\n"
    "    A = |scale| * max_j sum_t |q_t k_jt| (largest magnitude a score's terms\n"
    "        reach), V = max |v| over the visible keys.\n"
    "  Why: both sides compute in f32 but add in different orders (tiles, SIMD\n"
    "  lanes, FMA, online-softmax rescaling) and use different exp routines\n"
    "  (<= 1 ulp each). A score's rounding error grows like sqrt(d)*u*A\n"
    "  (random-walk model of d roundings each <= u*A); a score perturbation ds\n"
    "  moves o by at most 2*max|ds|*V; the weighted sum over n keys adds about\n"
    "  sqrt(n)*u*V, and exp and rescaling a few u*V (the +8 term). The leading\n"
    "  8 is a safety factor over the model's constants (observed errors stay\n"
    "  under 1% of the bound). Real bugs cost more: dropping or adding one of n\n"
    "  keys moves o by about V/n (5x the bound at n = 4096, more for fewer keys).\n"
    "  Reported: max abs error, max relative error (per row, relative to the\n"
    "  row's largest |o_ref|), and the worst error/tolerance ratio.\n"
    "\n"
    "Exit status: 0 pass, 1 verification failed, 2 bad arguments, 3 library error\n"
    "or out of memory.\n";

static const char usage_bench[] =
    "Usage: attn bench [options]\n"
    "\n"
    "Runs the presets (small, prefill, prefill-f16, decode, decode-f16; see\n"
    "`attn run --help`) in turn with the active ISA and prints one table: preset,\n"
    "K/V dtype, ISA, threads, milliseconds per call, GFLOP/s (prefill-like\n"
    "presets) or GB/s of K+V read (decode presets), and the verification result.\n"
    "\n"
    "Options:\n"
    "  --presets LIST    comma-separated subset, in the order to run\n"
    "  --threads N       as for run (default 0: all online CPUs)\n"
    "  --isa NAME        as for run (default: the library's choice)\n"
    "  --iters N         as for run; 0 (default): automatic, about 1 s per preset\n"
    "  --verify-rows N   rows verified per preset as in run (default 4, 0: none)\n"
    "  --seed S          as for run\n"
    "  --no-progress     as for run\n"
    "\n"
    "Exit status: 0, 1 if a verification failed, 2 bad arguments, 3 library\n"
    "error or out of memory.\n";

/* ------------------------------------------------------------------ problems */

typedef struct problem {
    const char *name;
    attn_shape shape;
    bool causal;
    int64_t window;
    float scale;
    float softcap;
    attn_dtype kv_dtype;
} problem;

typedef struct preset {
    const char *name;
    const char *about;
    problem problem;
} preset;

#define LLAMA3_8B_HEADS 1, 32, 8
static const preset presets[] = {
    { "prefill", "Llama-3-8B-like prefill, 2048 tokens",
      { "prefill", { LLAMA3_8B_HEADS, 2048, 2048, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F32 } },
    { "decode", "one decode step over a 4096-token KV cache",
      { "decode", { LLAMA3_8B_HEADS, 1, 4096, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F32 } },
    { "prefill-f16", "prefill, K and V stored as f16",
      { "prefill-f16", { LLAMA3_8B_HEADS, 2048, 2048, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F16 } },
    { "decode-f16", "decode, K and V stored as f16",
      { "decode-f16", { LLAMA3_8B_HEADS, 1, 4096, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F16 } },
    { "small", "a quick check: 2 x 8 heads (GQA 4:1), 256 tokens, head_dim 64",
      { "small", { 2, 8, 2, 256, 256, 64, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F32 } },
};
#define N_PRESETS (sizeof(presets) / sizeof(presets[0]))
/* The order `attn bench` runs them in. */
static const char *const bench_order[] = { "small", "prefill", "prefill-f16", "decode", "decode-f16" };
#define N_BENCH (sizeof(bench_order) / sizeof(bench_order[0]))

static const preset *find_preset(const char *name)
{
    for (size_t i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, name))
            return &presets[i];
    return NULL;
}

static int64_t v_dim_of(const attn_shape *s)
{
    return s->v_dim ? s->v_dim : s->head_dim;
}

static float scale_of(const problem *p)
{
    return p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)p->shape.head_dim));
}

static size_t dtype_size(attn_dtype t)
{
    return t == ATTN_DTYPE_F32 ? 4 : 2;
}

static const char *dtype_name(attn_dtype t)
{
    switch (t) {
    case ATTN_DTYPE_F32: return "f32";
    case ATTN_DTYPE_F16: return "f16";
    case ATTN_DTYPE_BF16: return "bf16";
    case ATTN_DTYPE_BOOL: return "bool";
    }
    return "?";
}

/*
 * Keys [*lo, *hi) that query row i may see, by the masks of DESIGN/attn.h:
 * causal j <= i + off, window j > i + off - W, off = kv_len - q_len.
 */
static void visible_keys(const problem *p, int64_t i, int64_t *lo, int64_t *hi)
{
    const int64_t lq = p->shape.q_len, lk = p->shape.kv_len;
    const int64_t pos = i + (lk - lq); /* the query's aligned position */
    int64_t h = lk, l = 0;
    if (p->causal)
        h = pos + 1 < lk ? pos + 1 : lk;
    if (p->window > 0) {
        /* A window wider than lq + lk hides nothing; clamp to avoid overflow. */
        int64_t w = p->window < lq + lk ? p->window : lq + lk;
        l = pos - w + 1;
    }
    if (h < 0)
        h = 0;
    if (l < 0)
        l = 0;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* Visible query-key pairs of one (batch, head). */
static double visible_pairs(const problem *p)
{
    double pairs = 0.0;
    for (int64_t i = 0; i < p->shape.q_len; i++) {
        int64_t lo, hi;
        visible_keys(p, i, &lo, &hi);
        pairs += (double)(hi - lo);
    }
    return pairs;
}

static double flops_per_call(const problem *p)
{
    const attn_shape *s = &p->shape;
    return (double)s->batch * (double)s->q_heads * visible_pairs(p) *
           (2.0 * (double)s->head_dim + 2.0 * (double)v_dim_of(s));
}

static double kv_bytes_per_call(const problem *p)
{
    const attn_shape *s = &p->shape;
    return (double)s->batch * (double)s->kv_heads * (double)s->kv_len *
           (double)(s->head_dim + v_dim_of(s)) * (double)dtype_size(p->kv_dtype);
}

/* ------------------------------------------------------------------ numbers */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; NaN stays NaN, overflow gives inf. */
static uint16_t f32_to_f16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, NaN (quiet) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x0200u : 0u));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) /* below 2^-14: f16 subnormal; the scaling is exact */
        return (uint16_t)(sign | (uint16_t)nearbyintf(f32_from_bits(ax) * 16777216.0f));
    const uint32_t rounded = ax + 0x0fffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

static float f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        const float mag = (float)m * 0x1p-24f;
        return sign ? -mag : mag;
    }
    if (e == 31)
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

static uint16_t f32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float bf16_to_f32(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

static float load_elem(const void *base, attn_dtype t, size_t i)
{
    switch (t) {
    case ATTN_DTYPE_F16: return f16_to_f32(((const uint16_t *)base)[i]);
    case ATTN_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

/* splitmix64: small, seedable, good enough for test data. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Sum of four uniforms rescaled to [-1, 1): bell-shaped, bounded. */
static float rng_bell(uint64_t *state)
{
    const uint64_t r = rng_next(state);
    const uint32_t a = (uint32_t)(r & 0xffffu), b = (uint32_t)((r >> 16) & 0xffffu);
    const uint32_t c = (uint32_t)((r >> 32) & 0xffffu), d = (uint32_t)(r >> 48);
    return (float)(a + b + c + d) * (1.0f / 131072.0f) - 1.0f;
}

static void fill(void *dst, attn_dtype t, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        const float x = rng_bell(state);
        switch (t) {
        case ATTN_DTYPE_F16: ((uint16_t *)dst)[i] = f32_to_f16(x); break;
        case ATTN_DTYPE_BF16: ((uint16_t *)dst)[i] = f32_to_bf16(x); break;
        default: ((float *)dst)[i] = x; break;
        }
    }
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ------------------------------------------------------------------ argument parsing */

typedef struct arg_cursor {
    const char *cmd;
    int argc;
    char **argv;
    int i;
} arg_cursor;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "attn %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'attn %s --help'.\n", cmd);
    return EXIT_USAGE;
}

/*
 * Splits "--name=value" / "--name value". On return *name is the option
 * (without "=value") in `buf`; *value is its inline value or NULL.
 */
static void split_option(const char *arg, char *buf, size_t bufsize, const char **value)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (len >= bufsize)
        len = bufsize - 1;
    memcpy(buf, arg, len);
    buf[len] = '\0';
    *value = eq ? eq + 1 : NULL;
}

/* The value of option `name`: inline, or the next argument. */
static int take_value(arg_cursor *c, const char *name, const char *inline_value,
                      const char **value)
{
    if (inline_value) {
        *value = inline_value;
        return EXIT_OK;
    }
    if (c->i + 1 >= c->argc)
        return usage_error(c->cmd, "option %s needs a value", name);
    *value = c->argv[++c->i];
    return EXIT_OK;
}

static int parse_i64(const char *cmd, const char *name, const char *s, int64_t min,
                     int64_t max, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        char range[96];
        snprintf(range, sizeof range, "an integer in [%" PRId64 ", %" PRId64 "]", min, max);
        fprintf(stderr, "attn %s: %s expects %s, got '%s'\nTry 'attn %s --help'.\n", cmd,
                name, range, s, cmd);
        return EXIT_USAGE;
    }
    *out = (int64_t)v;
    return EXIT_OK;
}

static int parse_u64(const char *cmd, const char *name, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-' || *s == '+' || *s == ' ')
        return usage_error(cmd, "%s expects an unsigned integer, got '%s'", name, s);
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end)
        return usage_error(cmd, "%s expects an unsigned integer, got '%s'", name, s);
    *out = (uint64_t)v;
    return EXIT_OK;
}

static int parse_float(const char *cmd, const char *name, const char *s, float min, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < min) {
        char what[64];
        snprintf(what, sizeof what, min == -FLT_MAX ? "a finite number" : "a finite number >= %g",
                 (double)min);
        fprintf(stderr, "attn %s: %s expects %s, got '%s'\nTry 'attn %s --help'.\n", cmd, name,
                what, s, cmd);
        return EXIT_USAGE;
    }
    *out = v;
    return EXIT_OK;
}

static int parse_isa(const char *cmd, const char *s, attn_isa *out)
{
    static const struct { const char *name; attn_isa isa; } isas[] = {
        { "auto", ATTN_ISA_AUTO }, { "scalar", ATTN_ISA_SCALAR }, { "avx2", ATTN_ISA_AVX2 },
        { "avx512", ATTN_ISA_AVX512 }, { "neon", ATTN_ISA_NEON }, { "sve", ATTN_ISA_SVE },
    };
    for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++)
        if (!strcmp(isas[i].name, s)) {
            *out = isas[i].isa;
            return EXIT_OK;
        }
    return usage_error(cmd, "--isa expects scalar, avx2, avx512, neon, sve or auto, got '%s'", s);
}

static int parse_dtype(const char *cmd, const char *s, attn_dtype *out)
{
    if (!strcmp(s, "f32"))
        *out = ATTN_DTYPE_F32;
    else if (!strcmp(s, "f16"))
        *out = ATTN_DTYPE_F16;
    else if (!strcmp(s, "bf16"))
        *out = ATTN_DTYPE_BF16;
    else
        return usage_error(cmd, "--kv-dtype expects f32, f16 or bf16, got '%s'", s);
    return EXIT_OK;
}

/* Options shared by run and bench. */
typedef struct exec_options {
    int64_t threads;
    bool isa_given;
    attn_isa isa;
    int64_t iters;
    int64_t verify_rows;
    uint64_t seed;
    bool progress;
} exec_options;

/*
 * Parses `name` when it is one of the options run and bench share: sets
 * *consumed and returns EXIT_OK or EXIT_USAGE. Leaves *consumed false for
 * any other option.
 */
static int parse_exec_option(arg_cursor *c, const char *name, const char *inline_value,
                             exec_options *x, bool *consumed)
{
    const char *v = NULL;
    int rc;
    *consumed = false;
    if (!strcmp(name, "--no-progress")) {
        *consumed = true;
        if (inline_value)
            return usage_error(c->cmd, "option %s takes no value", name);
        x->progress = false;
        return EXIT_OK;
    }
    if (strcmp(name, "--threads") && strcmp(name, "--isa") && strcmp(name, "--iters") &&
        strcmp(name, "--verify-rows") && strcmp(name, "--seed"))
        return EXIT_OK;
    *consumed = true;
    if ((rc = take_value(c, name, inline_value, &v)))
        return rc;
    if (!strcmp(name, "--threads"))
        return parse_i64(c->cmd, name, v, 0, MAX_THREADS, &x->threads);
    if (!strcmp(name, "--iters"))
        return parse_i64(c->cmd, name, v, 0, MAX_ITERS, &x->iters);
    if (!strcmp(name, "--verify-rows"))
        return parse_i64(c->cmd, name, v, 0, MAX_VERIFY_ROWS, &x->verify_rows);
    if (!strcmp(name, "--seed"))
        return parse_u64(c->cmd, name, v, &x->seed);
    x->isa_given = true;
    return parse_isa(c->cmd, v, &x->isa);
}

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

typedef struct buffers {
    float *q;
    void *k;
    void *v;
    float *out;
    attn_tensor tq, tk, tv, tout;
} buffers;

static void buffers_free(buffers *b)
{
    free(b->q);
    free(b->k);
    free(b->v);
    free(b->out);
    memset(b, 0, sizeof *b);
}

/* n elements of `size` bytes, 64-byte aligned; NULL on overflow or failure. */
static void *alloc_elems(int64_t n, size_t size)
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

static attn_tensor make_tensor(void *data, attn_dtype t, int64_t heads, int64_t rows,
                               int64_t cols)
{
    attn_tensor x;
    x.data = data;
    x.dtype = (int32_t)t;
    x.row_stride = cols;
    x.head_stride = rows * cols;
    x.batch_stride = heads * rows * cols;
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
    b->q = alloc_elems(nq, sizeof(float));
    b->k = alloc_elems(nk, dtype_size(p->kv_dtype));
    b->v = alloc_elems(nv, dtype_size(p->kv_dtype));
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
    fill(b->q, ATTN_DTYPE_F32, (size_t)nq, &sq);
    fill(b->k, p->kv_dtype, (size_t)nk, &sk);
    fill(b->v, p->kv_dtype, (size_t)nv, &sv);
    /* Poison the output so rows the library failed to write cannot pass. */
    for (int64_t i = 0; i < no; i++)
        b->out[i] = NAN;
    b->tq = make_tensor(b->q, ATTN_DTYPE_F32, s->q_heads, s->q_len, s->head_dim);
    b->tk = make_tensor(b->k, p->kv_dtype, s->kv_heads, s->kv_len, s->head_dim);
    b->tv = make_tensor(b->v, p->kv_dtype, s->kv_heads, s->kv_len, dv);
    b->tout = make_tensor(b->out, ATTN_DTYPE_F32, s->q_heads, s->q_len, dv);
    return EXIT_OK;
}

static attn_options options_of(const problem *p)
{
    attn_options o = ATTN_OPTIONS_INIT;
    o.flags = p->causal ? ATTN_CAUSAL : 0u;
    o.window = p->window;
    o.scale = p->scale;
    o.softcap = p->softcap;
    return o;
}

static int library_error(const char *what, attn_status st)
{
    fprintf(stderr, "attn: %s failed: %s (status %d)\n", what, attn_strerror(st), (int)st);
    return EXIT_LIBRARY;
}

/* ------------------------------------------------------------------ timing */

typedef struct timing {
    int64_t calls;    /* timed calls */
    double mean_s;
    double best_s;
    bool single_cold; /* one call, no warm-up: it took >= SINGLE_CALL_SECONDS */
} timing;

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

/* ------------------------------------------------------------------ verification */

typedef struct verify_result {
    int64_t rows;
    double max_abs;
    double max_rel;
    double worst_ratio; /* max over rows of error / tolerance */
    bool pass;
    /* The worst row, for the failure message. */
    int64_t worst_b, worst_h, worst_i;
} verify_result;

#define F32_UNIT_ROUNDOFF 0x1p-24

static attn_status verify_one_row(const problem *p, const buffers *b, int64_t bi, int64_t h,
                                  int64_t i, float *ref, verify_result *vr)
{
    const attn_shape *s = &p->shape;
    const int64_t d = s->head_dim, dv = v_dim_of(s), lk = s->kv_len;
    const int64_t kvh = h / (s->q_heads / s->kv_heads);
    const size_t esize = dtype_size(p->kv_dtype);
    const size_t q_off = (size_t)(((bi * s->q_heads + h) * s->q_len + i) * d);
    const size_t kv_row0 = (size_t)((bi * s->kv_heads + kvh) * lk);
    const float *got = b->out + ((bi * s->q_heads + h) * s->q_len + i) * dv;
    int64_t lo, hi;
    visible_keys(p, i, &lo, &hi);
    const int64_t n = hi - lo;

    double tol = 0.0; /* a row with no visible key must be exactly 0 */
    if (n > 0) {
        /* The oracle: a one-query problem over exactly the visible keys, no masks. */
        const attn_shape one = { 1, 1, 1, 1, n, d, s->v_dim };
        attn_options o = ATTN_OPTIONS_INIT;
        o.scale = p->scale;
        o.softcap = p->softcap;
        attn_tensor tq = make_tensor(b->q + q_off, ATTN_DTYPE_F32, 1, 1, d);
        attn_tensor tk = make_tensor((char *)b->k + (kv_row0 + (size_t)lo) * (size_t)d * esize,
                                     p->kv_dtype, 1, lk, d);
        attn_tensor tv = make_tensor((char *)b->v + (kv_row0 + (size_t)lo) * (size_t)dv * esize,
                                     p->kv_dtype, 1, lk, dv);
        attn_tensor to = make_tensor(ref, ATTN_DTYPE_F32, 1, 1, dv);
        attn_status st = attn_forward(&one, &o, &tq, &tk, &tv, &to, NULL);
        if (st != ATTN_OK)
            return st;

        /* A and V of the tolerance (see `attn run --help`). */
        const float *qr = b->q + q_off;
        double a = 0.0, vmax = 0.0;
        for (int64_t j = lo; j < hi; j++) {
            const size_t krow = (kv_row0 + (size_t)j) * (size_t)d;
            const size_t vrow = (kv_row0 + (size_t)j) * (size_t)dv;
            double terms = 0.0;
            for (int64_t t = 0; t < d; t++)
                terms += fabs((double)qr[t] * (double)load_elem(b->k, p->kv_dtype, krow + (size_t)t));
            if (terms > a)
                a = terms;
            for (int64_t t = 0; t < dv; t++) {
                const double x = fabs((double)load_elem(b->v, p->kv_dtype, vrow + (size_t)t));
                if (x > vmax)
                    vmax = x;
            }
        }
        a *= fabs((double)scale_of(p));
        tol = 8.0 * F32_UNIT_ROUNDOFF * (2.0 * sqrt((double)d) * a + sqrt((double)n) + 8.0) * vmax;
    } else {
        for (int64_t t = 0; t < dv; t++)
            ref[t] = 0.0f;
    }

    double row_err = 0.0, row_ref = 0.0;
    for (int64_t t = 0; t < dv; t++) {
        double e = fabs((double)got[t] - (double)ref[t]);
        /* The inputs are finite: a NaN output (or an unwritten, NaN-poisoned one) is wrong. */
        if (isnan(e))
            e = INFINITY;
        if (e > row_err)
            row_err = e;
        if (fabs((double)ref[t]) > row_ref)
            row_ref = fabs((double)ref[t]);
    }
    const double rel = row_ref > 0.0 ? row_err / row_ref : (row_err > 0.0 ? INFINITY : 0.0);
    const double ratio = tol > 0.0 ? row_err / tol : (row_err > 0.0 ? INFINITY : 0.0);
    if (!(row_err <= tol))
        vr->pass = false;
    if (row_err > vr->max_abs)
        vr->max_abs = row_err;
    if (rel > vr->max_rel)
        vr->max_rel = rel;
    if (ratio > vr->worst_ratio || vr->rows == 0) {
        vr->worst_ratio = ratio;
        vr->worst_b = bi;
        vr->worst_h = h;
        vr->worst_i = i;
    }
    vr->rows++;
    return ATTN_OK;
}

/*
 * Verifies `rows` rows spread evenly over the flattened (batch, head, query)
 * index, first and last included, on the scalar ISA; restores the active ISA.
 */
static int verify(const problem *p, const buffers *b, int64_t rows, verify_result *vr)
{
    const attn_shape *s = &p->shape;
    const int64_t total = s->batch * s->q_heads * s->q_len;
    *vr = (verify_result){ 0, 0.0, 0.0, 0.0, true, 0, 0, 0 };
    if (rows <= 0)
        return EXIT_OK;
    if (rows > total)
        rows = total;
    float *ref = alloc_elems(v_dim_of(s), sizeof(float));
    if (!ref) {
        fprintf(stderr, "attn: out of memory\n");
        return EXIT_LIBRARY;
    }
    const attn_isa previous = attn_isa_active();
    attn_status st = attn_isa_select(ATTN_ISA_SCALAR);
    if (st != ATTN_OK) {
        free(ref);
        return library_error("attn_isa_select(scalar)", st);
    }
    for (int64_t r = 0; r < rows && st == ATTN_OK; r++) {
        int64_t flat = rows == 1 ? 0
                                 : (int64_t)floor((double)r * (double)(total - 1) /
                                                  (double)(rows - 1) + 0.5);
        if (flat > total - 1)
            flat = total - 1;
        const int64_t bi = flat / (s->q_heads * s->q_len);
        const int64_t h = (flat / s->q_len) % s->q_heads;
        const int64_t i = flat % s->q_len;
        st = verify_one_row(p, b, bi, h, i, ref, vr);
    }
    free(ref);
    attn_status restore = attn_isa_select(previous);
    if (st != ATTN_OK)
        return library_error("attn_forward (scalar oracle)", st);
    if (restore != ATTN_OK)
        return library_error("attn_isa_select (restoring the active ISA)", restore);
    return EXIT_OK;
}

/* ------------------------------------------------------------------ shared run logic */

typedef struct measurement {
    timing time;
    double gflops;
    double kv_gbytes_s;
    attn_isa isa;
    int32_t threads;
    verify_result verify;
} measurement;

static int measure(const problem *p, const exec_options *x, attn_threadpool *pool,
                   double target_s, measurement *m)
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

static int open_pool(const exec_options *x, attn_threadpool **pool)
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

static void format_ms(char *buf, size_t size, double seconds)
{
    const double ms = seconds * 1e3;
    snprintf(buf, size, ms >= 100.0 ? "%.1f" : ms >= 1.0 ? "%.3f" : "%.4f", ms);
}

/* ------------------------------------------------------------------ attn run */

static int cmd_run(int argc, char **argv)
{
    /* Dimension overrides, applied on top of the preset whatever their order. */
    enum { D_BATCH, D_QH, D_KVH, D_QLEN, D_KVLEN, D_HDIM, D_VDIM, N_DIMS };
    static const char *const dim_opts[N_DIMS] = { "--batch", "--q-heads", "--kv-heads",
                                                  "--q-len", "--kv-len", "--head-dim",
                                                  "--v-dim" };
    int64_t dims[N_DIMS];
    for (int d = 0; d < N_DIMS; d++)
        dims[d] = -1;
    int causal = -1;
    int64_t window = -1;
    float scale = NAN, softcap = NAN;
    int kv_dtype = -1;
    const preset *pre = &presets[0]; /* prefill */
    exec_options x = { 0, false, ATTN_ISA_AUTO, 0, 16, 1, true };

    arg_cursor c = { "run", argc, argv, 0 };
    for (c.i = 1; c.i < argc; c.i++) {
        const char *arg = argv[c.i];
        char name[64];
        const char *inl, *v;
        int rc;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage_run, stdout);
            return EXIT_OK;
        }
        if (strncmp(arg, "--", 2))
            return usage_error("run", "unexpected argument '%s'", arg);
        split_option(arg, name, sizeof name, &inl);
        bool consumed;
        if ((rc = parse_exec_option(&c, name, inl, &x, &consumed)))
            return rc;
        if (consumed)
            continue;
        if (!strcmp(name, "--causal") || !strcmp(name, "--no-causal")) {
            if (inl)
                return usage_error("run", "option %s takes no value", name);
            causal = !strcmp(name, "--causal");
            continue;
        }
        bool is_dim = false;
        for (int d = 0; d < N_DIMS; d++) {
            if (strcmp(name, dim_opts[d]))
                continue;
            is_dim = true;
            if ((rc = take_value(&c, name, inl, &v)) ||
                (rc = parse_i64("run", name, v, d == D_VDIM ? 0 : 1, INT32_MAX, &dims[d])))
                return rc;
        }
        if (is_dim)
            continue;
        if (!strcmp(name, "--preset")) {
            if ((rc = take_value(&c, name, inl, &v)))
                return rc;
            if (!(pre = find_preset(v)))
                return usage_error("run", "unknown preset '%s' (prefill, decode, prefill-f16, "
                                          "decode-f16, small)", v);
        } else if (!strcmp(name, "--window")) {
            if ((rc = take_value(&c, name, inl, &v)) ||
                (rc = parse_i64("run", name, v, 0, INT64_MAX, &window)))
                return rc;
        } else if (!strcmp(name, "--scale")) {
            if ((rc = take_value(&c, name, inl, &v)) ||
                (rc = parse_float("run", name, v, -FLT_MAX, &scale)))
                return rc;
        } else if (!strcmp(name, "--softcap")) {
            if ((rc = take_value(&c, name, inl, &v)) ||
                (rc = parse_float("run", name, v, 0.0f, &softcap)))
                return rc;
        } else if (!strcmp(name, "--kv-dtype")) {
            attn_dtype t = ATTN_DTYPE_F32;
            if ((rc = take_value(&c, name, inl, &v)) || (rc = parse_dtype("run", v, &t)))
                return rc;
            kv_dtype = (int)t;
        } else {
            return usage_error("run", "unknown option '%s'", arg);
        }
    }

    const bool overridden = causal >= 0 || window >= 0 || !isnan(scale) || !isnan(softcap) ||
                            kv_dtype >= 0 || dims[D_BATCH] >= 0 || dims[D_QH] >= 0 ||
                            dims[D_KVH] >= 0 || dims[D_QLEN] >= 0 || dims[D_KVLEN] >= 0 ||
                            dims[D_HDIM] >= 0 || dims[D_VDIM] >= 0;
    problem p = pre->problem;
    int64_t *fields[N_DIMS] = { &p.shape.batch, &p.shape.q_heads, &p.shape.kv_heads,
                                &p.shape.q_len, &p.shape.kv_len, &p.shape.head_dim,
                                &p.shape.v_dim };
    for (int d = 0; d < N_DIMS; d++)
        if (dims[d] >= 0)
            *fields[d] = dims[d];
    if (causal >= 0)
        p.causal = causal;
    if (window >= 0)
        p.window = window;
    if (!isnan(scale))
        p.scale = scale;
    if (!isnan(softcap))
        p.softcap = softcap;
    if (kv_dtype >= 0)
        p.kv_dtype = (attn_dtype)kv_dtype;
    if (p.shape.q_heads % p.shape.kv_heads) {
        fprintf(stderr, "attn run: q-heads (%" PRId64 ") must be a multiple of kv-heads (%" PRId64
                        ")\nTry 'attn run --help'.\n", p.shape.q_heads, p.shape.kv_heads);
        return EXIT_USAGE;
    }

    attn_threadpool *pool = NULL;
    int rc = open_pool(&x, &pool);
    if (rc)
        return rc;
    const attn_shape *s = &p.shape;
    const double pairs = visible_pairs(&p);
    if (overridden)
        printf("attn run: preset %s, changed by options\n", pre->name);
    else
        printf("attn run: preset %s (%s)\n", pre->name, pre->about);
    printf("  shape    batch %" PRId64 ", q_heads %" PRId64 ", kv_heads %" PRId64
           ", q_len %" PRId64 ", kv_len %" PRId64 ", head_dim %" PRId64 ", v_dim %" PRId64 "\n",
           s->batch, s->q_heads, s->kv_heads, s->q_len, s->kv_len, s->head_dim, v_dim_of(s));
    char window_text[32] = "off", softcap_text[32] = "off";
    if (p.window)
        snprintf(window_text, sizeof window_text, "%" PRId64, p.window);
    if (p.softcap != 0.0f)
        snprintf(softcap_text, sizeof softcap_text, "%g", (double)p.softcap);
    printf("  options  %s, window %s, scale %g%s, softcap %s, K/V %s, seed %" PRIu64 "\n",
           p.causal ? "causal" : "not causal", window_text, (double)scale_of(&p),
           p.scale == 0.0f ? " (1/sqrt(head_dim))" : "", softcap_text, dtype_name(p.kv_dtype),
           x.seed);
    fflush(stdout);

    measurement m;
    rc = measure(&p, &x, pool, 2.0, &m);
    attn_threadpool_destroy(pool);
    if (rc)
        return rc;
    char mean[32], best[32];
    format_ms(mean, sizeof mean, m.time.mean_s);
    format_ms(best, sizeof best, m.time.best_s);
    printf("  isa      %s, %d thread%s\n", attn_isa_name(m.isa), (int)m.threads,
           m.threads == 1 ? "" : "s");
    if (m.time.single_cold)
        printf("  time     %s ms/call (one call of >= 1 s, no warm-up)\n", mean);
    else
        printf("  time     %s ms/call (mean of %" PRId64 " call%s after a warm-up; best %s ms)\n",
               mean, m.time.calls, m.time.calls == 1 ? "" : "s", best);
    printf("  compute  %.2f GFLOP/s (%.3f GFLOP/call; %.1f%% of the %" PRId64 "x%" PRId64
           " query-key pairs visible)\n", m.gflops, flops_per_call(&p) * 1e-9,
           100.0 * pairs / ((double)s->q_len * (double)s->kv_len), s->q_len, s->kv_len);
    if (s->q_len == 1)
        printf("  memory   %.2f GB/s of K+V read (%.1f MB/call)\n", m.kv_gbytes_s,
               kv_bytes_per_call(&p) * 1e-6);
    if (x.verify_rows == 0) {
        printf("  verify   skipped (--verify-rows 0)\n");
        return EXIT_OK;
    }
    const verify_result *vr = &m.verify;
    printf("  verify   %" PRId64 " row%s vs the scalar oracle: max abs err %.3g, max rel err %.3g,"
           " worst err/tol %.3g: %s\n", vr->rows, vr->rows == 1 ? "" : "s", vr->max_abs,
           vr->max_rel, vr->worst_ratio, vr->pass ? "PASS" : "FAIL");
    if (!vr->pass) {
        fprintf(stderr, "attn run: verification FAILED; worst row: batch %" PRId64 ", head %" PRId64
                        ", query %" PRId64 " (err/tol %.3g)\n", vr->worst_b, vr->worst_h,
                vr->worst_i, vr->worst_ratio);
        return EXIT_VERIFY_FAILED;
    }
    return EXIT_OK;
}

/* ------------------------------------------------------------------ attn bench */

static int cmd_bench(int argc, char **argv)
{
    exec_options x = { 0, false, ATTN_ISA_AUTO, 0, 4, 1, true };
    const preset *chosen[N_PRESETS * 4];
    size_t n_chosen = 0;
    arg_cursor c = { "bench", argc, argv, 0 };
    for (c.i = 1; c.i < argc; c.i++) {
        const char *arg = argv[c.i];
        char name[64];
        const char *inl, *v;
        int rc;
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage_bench, stdout);
            return EXIT_OK;
        }
        if (strncmp(arg, "--", 2))
            return usage_error("bench", "unexpected argument '%s'", arg);
        split_option(arg, name, sizeof name, &inl);
        bool consumed;
        if ((rc = parse_exec_option(&c, name, inl, &x, &consumed)))
            return rc;
        if (consumed)
            continue;
        if (strcmp(name, "--presets"))
            return usage_error("bench", "unknown option '%s'", arg);
        if ((rc = take_value(&c, name, inl, &v)))
            return rc;
        n_chosen = 0;
        const char *at = v;
        while (*at) {
            const char *comma = strchr(at, ',');
            size_t len = comma ? (size_t)(comma - at) : strlen(at);
            char one[32];
            const preset *pp = NULL;
            if (len > 0 && len < sizeof one) {
                memcpy(one, at, len);
                one[len] = '\0';
                pp = find_preset(one);
            }
            if (!pp || n_chosen == sizeof chosen / sizeof chosen[0])
                return usage_error("bench", "bad preset list '%s' (names: small, prefill, "
                                            "prefill-f16, decode, decode-f16)", v);
            chosen[n_chosen++] = pp;
            at += len + (comma ? 1 : 0);
            if (comma && !*at)
                return usage_error("bench", "bad preset list '%s'", v);
        }
        if (n_chosen == 0)
            return usage_error("bench", "empty preset list");
    }
    if (n_chosen == 0)
        for (size_t i = 0; i < N_BENCH; i++)
            chosen[n_chosen++] = find_preset(bench_order[i]);

    attn_threadpool *pool = NULL;
    int rc = open_pool(&x, &pool);
    if (rc)
        return rc;
    printf("%-12s %-4s %-7s %7s %12s %10s %9s  %s\n", "preset", "K/V", "ISA", "threads",
           "ms/call", "GFLOP/s", "GB/s", "verify");
    int status = EXIT_OK;
    for (size_t i = 0; i < n_chosen; i++) {
        const problem *p = &chosen[i]->problem;
        measurement m;
        fflush(stdout);
        if ((rc = measure(p, &x, pool, 1.0, &m))) {
            status = rc;
            break;
        }
        char ms[32], gbs[32], ver[48];
        format_ms(ms, sizeof ms, m.time.mean_s);
        if (p->shape.q_len == 1)
            snprintf(gbs, sizeof gbs, "%.2f", m.kv_gbytes_s);
        else
            snprintf(gbs, sizeof gbs, "-");
        if (x.verify_rows == 0)
            snprintf(ver, sizeof ver, "skipped");
        else
            snprintf(ver, sizeof ver, "%s (err/tol %.2g)", m.verify.pass ? "PASS" : "FAIL",
                     m.verify.worst_ratio);
        printf("%-12s %-4s %-7s %7d %12s %10.2f %9s  %s\n", p->name, dtype_name(p->kv_dtype),
               attn_isa_name(m.isa), (int)m.threads, ms, m.gflops, gbs, ver);
        if (x.verify_rows && !m.verify.pass)
            status = EXIT_VERIFY_FAILED;
    }
    attn_threadpool_destroy(pool);
    return status;
}

/* ------------------------------------------------------------------ attn info */

static const char *yes_no(int b)
{
    return b ? "yes" : "no";
}

/* cpu_has[isa]: whether the CPU itself supports each attn_isa (cpu_features' view). */
static void print_cpu(int cpu_has[6])
{
#if defined(CPU_FEATURES_ARCH_X86)
    const X86Info info = GetX86Info();
    const X86Features *f = &info.features;
    printf("cpu\n");
    printf("  brand              %s\n", info.brand_string);
    printf("  vendor             %s, family %d, model %d, stepping %d\n", info.vendor,
           info.family, info.model, info.stepping);
    const X86Microarchitecture uarch = GetX86Microarchitecture(&info);
    printf("  microarchitecture  %s\n", uarch == X86_UNKNOWN
                                           ? "unknown to this cpu_features version"
                                           : GetX86MicroarchitectureName(uarch));
    printf("  features           sse4.2 %s, avx %s, avx2 %s, fma3 %s, f16c %s\n",
           yes_no(f->sse4_2), yes_no(f->avx), yes_no(f->avx2), yes_no(f->fma3), yes_no(f->f16c));
    printf("                     avx512f %s, avx512bw %s, avx512dq %s, avx512vl %s\n",
           yes_no(f->avx512f), yes_no(f->avx512bw), yes_no(f->avx512dq), yes_no(f->avx512vl));
    cpu_has[ATTN_ISA_AVX2] = f->avx2 && f->fma3 && f->f16c;
    cpu_has[ATTN_ISA_AVX512] = f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl;
#elif defined(CPU_FEATURES_ARCH_AARCH64)
    const Aarch64Info info = GetAarch64Info();
    printf("cpu\n");
    printf("  implementer        0x%02x, variant 0x%x, part 0x%03x, revision %d\n",
           info.implementer, info.variant, info.part, info.revision);
    printf("  features           asimd %s, sve %s\n", yes_no(info.features.asimd),
           yes_no(info.features.sve));
    cpu_has[ATTN_ISA_NEON] = info.features.asimd;
    cpu_has[ATTN_ISA_SVE] = info.features.sve;
#else
    printf("cpu\n  (cpu_features does not describe this architecture)\n");
#endif
}

static int cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_info, stdout);
            return EXIT_OK;
        }
        return usage_error("info", "unexpected argument '%s'", argv[i]);
    }
    const uint32_t v = attn_version();
    printf("libattn\n");
    printf("  library            %s (attn_version 0x%06" PRIx32 ": %u.%u.%u)\n",
           attn_version_string(), v, (unsigned)(v >> 16), (unsigned)((v >> 8) & 0xff),
           (unsigned)(v & 0xff));
    printf("  header             %d.%d.%d (attn.h this tool was built with)\n", ATTN_VERSION_MAJOR,
           ATTN_VERSION_MINOR, ATTN_VERSION_PATCH);
    if ((v >> 16) != ATTN_VERSION_MAJOR)
        printf("  WARNING            major versions differ: the ABI does not match\n");

    int cpu_has[6] = { 1, 1, 0, 0, 0, 0 };
    print_cpu(cpu_has);

    const attn_isa active = attn_isa_active();
    const char *env = getenv("ATTN_ISA");
    printf("instruction sets     (built: compiled into libattn; available: built and\n"
           "                     supported by this CPU, attn_isa_available)\n");
    printf("  %-8s %-5s %-24s %-9s %s\n", "isa", "cpu", "built", "available", "active");
    for (int isa = ATTN_ISA_SCALAR; isa <= ATTN_ISA_SVE; isa++) {
#if !defined(CPU_FEATURES_ARCH_X86)
        if (isa == ATTN_ISA_AVX2 || isa == ATTN_ISA_AVX512)
            continue;
#endif
#if !defined(CPU_FEATURES_ARCH_AARCH64)
        if (isa == ATTN_ISA_NEON || isa == ATTN_ISA_SVE)
            continue;
#endif
        const int avail = attn_isa_available((attn_isa)isa);
        /* Built is observable only where the CPU could run it. */
        const char *built = avail ? "yes" : cpu_has[isa] ? "no" : "unknown (CPU lacks it)";
        printf("  %-8s %-5s %-24s %-9s %s\n", attn_isa_name((attn_isa)isa), yes_no(cpu_has[isa]),
               built, yes_no(avail), active == (attn_isa)isa ? "*" : "");
    }
    printf("  active             %s%s%s%s\n", attn_isa_name(active), env ? " (ATTN_ISA=" : "",
           env ? env : "", env ? ")" : "");

    printf("threads\n");
    printf("  online CPUs        %d (the default --threads of run and bench)\n", online_cpus());
    attn_threadpool *pool = NULL;
    const attn_status st = attn_threadpool_create(0, &pool);
    if (st != ATTN_OK)
        return library_error("attn_threadpool_create", st);
    printf("  built-in pool      %d threads (attn_threadpool_create(0): caller included)\n",
           (int)attn_threadpool_size(pool));
    attn_threadpool_destroy(pool);
    return EXIT_OK;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_main, stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("attn (built with attn.h %d.%d.%d), libattn %s\n", ATTN_VERSION_MAJOR,
               ATTN_VERSION_MINOR, ATTN_VERSION_PATCH, attn_version_string());
        return EXIT_OK;
    }
    if (!strcmp(cmd, "help")) {
        if (argc < 3) {
            fputs(usage_main, stdout);
            return EXIT_OK;
        }
        const char *topic = argv[2];
        if (!strcmp(topic, "info"))
            fputs(usage_info, stdout);
        else if (!strcmp(topic, "run"))
            fputs(usage_run, stdout);
        else if (!strcmp(topic, "bench"))
            fputs(usage_bench, stdout);
        else {
            fprintf(stderr, "attn help: no command '%s'\nTry 'attn --help'.\n", topic);
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "attn: unknown command '%s'\nTry 'attn --help'.\n", cmd);
    return EXIT_USAGE;
}

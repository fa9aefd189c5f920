/* SPDX-License-Identifier: MIT */
/*
 * checkasm's shared pieces (as dav1d's checkasm.h): the state of a run, its
 * random inputs, the comparisons and the timing macros, and one
 * check_<slot> per slot of the kernel list, defined in the file of its
 * family (checkasm_<family>.c, as src/kernel_list.h groups the slots):
 *   tile      qk_tile, pv_tile, to_f32, qk_diag, to_f32_scaled
 *   quant     qk_grp, pv_grp (the FP8 scale groups of the quant files)
 *   store     from_f32
 *   row       row_max, exp_sum, row_scale, softcap, add_bias, mask_bool,
 *             softmax_bwd
 *   alibi     alibi
 *   merge     wsum
 *   backward  pt_tile, score_grad
 *   dot       qk_bf16, pv_bf16, pt_bf16 (dot files), qk_i8 (dot_i8 files)
 *   asym      to_f32_scaled and from_f32 of the ASYM dtypes (asym files):
 *             check_asym_<slot>, which the tile and store checks hand
 *             those dtypes' rows (records, not stride units)
 * checkasm.c walks the list and calls them.
 */
#ifndef ATTN_TEST_CHECKASM_H
#define ATTN_TEST_CHECKASM_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tolerance.h"

/* ------------------------------------------------------------ state */

typedef struct checkasm {
    int bench;
    const char *only_isa, *only_slot;
    uint64_t seed, rng;
    const attn_dsp *ref; /* the oracle */
    const attn_dsp *t;   /* the table under test */
    const char *isa, *slot, *dt_name;
    int dt;
    int failed_here;     /* failures of the current row */
    long checked, failures;
    /* rows of the table under test already run: a slot two files fill
       (dot_i8_evex, then dot_i8 over it) holds one kernel, checked once */
    const char *done_slot[128];
    int done_dt[128], n_done;
    /* a file alone (CA_ALONE): the ISA's own table, whose int8 kernel its
       int8 kernel must match bit for bit; NULL elsewhere */
    const attn_dsp *twin;
} checkasm;

/* One check per slot of the kernel list, declared from the list: a slot
   the list gains does not link until its family's file defines its check. */
#define CA_DECLARE(s_, dt, kind, a) void check_##s_(checkasm *c);
ATTN_SLOT_LIST(CA_DECLARE, _)
#undef CA_DECLARE

/* ------------------------------------------------------------ random inputs */

static inline uint64_t next(checkasm *c)
{
    /* xorshift64* */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 0x2545f4914f6cdd1dull;
}

/* Uniform in [lo, hi]. */
static inline size_t pick(checkasm *c, size_t lo, size_t hi)
{
    return lo + (size_t)(next(c) % (uint64_t)(hi - lo + 1));
}

static inline float uniform(checkasm *c, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(next(c) >> 40) / (double)(1u << 24));
}

static inline void random_row(checkasm *c, float *x, size_t n, float lo, float hi)
{
    for (size_t j = 0; j < n; j++)
        x[j] = uniform(c, lo, hi);
}

/* Softmax weights in [0, 1], one in eight exactly 0 (a masked key). */
static inline void random_weights(checkasm *c, float *p, size_t n)
{
    for (size_t j = 0; j < n; j++)
        p[j] = next(c) % 8 ? uniform(c, 0.0f, 1.0f) : 0.0f;
}

/* A score scale: 0.05 to 1 in magnitude, either sign. */
static inline float random_scale(checkasm *c)
{
    return uniform(c, 0.05f, 1.0f) * (next(c) & 1 ? 1.0f : -1.0f);
}

void *xalloc(size_t bytes);

/* Bytes of one stride unit of the K/V dtype dt, values per unit. */
static inline size_t unit_bytes(int dt) { ATTN_DTYPE_GET(dt, bytes, 0) }

static inline size_t unit_values(int dt) { ATTN_DTYPE_GET(dt, block, 1) }

static inline const char *dtype_name(int dt) { ATTN_DTYPE_GET(dt, name, "?") }

/* The dtype list's kind and kv columns of dt (src/dtype_list.h). */
static inline int dtype_kind(int dt) { ATTN_DTYPE_GET(dt, kind, -1) }

static inline int dtype_is_kv(int dt) { ATTN_DTYPE_GET(dt, kv, 0) }

/* `units` stride units of finite K/V values of dtype dt (checkasm.c). */
void fill_kv(checkasm *c, unsigned char *x, int dt, size_t units);

/* The record headers of an ASYM row of n values in groups of g, bits per
   code; special: some of other kinds (checkasm_asym.c). */
void fill_asym_headers(checkasm *c, unsigned char *row, size_t n, size_t g, int bits,
                       int special);

/* The ASYM dtypes' rows of to_f32_scaled and from_f32 (checkasm_asym.c). */
void check_asym_to_f32_scaled(checkasm *c);
void check_asym_from_f32(checkasm *c);

/* Row lengths the kernels see for dtype dt: whole blocks for Q8_0/Q4_0. */
static inline size_t dim_for(checkasm *c, int dt, size_t lo, size_t hi)
{
    const size_t per = unit_values(dt);
    size_t d = pick(c, lo, hi);
    return per > 1 ? (d + per - 1) / per * per : d;
}

/* The oracle's exact decoding of `units` units (to_f32 is bitwise in every
   table: checked by check_to_f32), for the magnitudes of the bounds. */
static inline void decode(checkasm *c, const void *x, int dt, size_t values, float *out)
{
    c->ref->to_f32[dt](x, out, values);
}

/* Row lengths of the row checks: 1..40, then across vector multiples; the
   first is the bench length. */
static inline size_t row_len(checkasm *c, int i)
{
    return i == 0 ? 1024 : i < 40 ? (size_t)i : pick(c, 41, 1100);
}
#define CA_ROWS 60

/* ------------------------------------------------------------ comparisons */

void fail(checkasm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* got vs want within bound (NaN matches NaN; an infinity must match). */
static inline int near(float got, float want, double bound)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs((double)got - (double)want) <= bound;
}

static inline int same_bits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y || (isnan(a) && isnan(b));
}

/* ------------------------------------------------------------ timing (--bench) */

double ca_now(void);

/* Best-of-7 time of one call of `body` in ns (each of the 7 a batch of
   calls running about 2 ms). */
#define CA_TIME(ns, body)                                                                   \
    do {                                                                                    \
        long reps_ = 1;                                                                     \
        for (;;) {                                                                          \
            const double t0_ = ca_now();                                                    \
            for (long i_ = 0; i_ < reps_; i_++) {                                           \
                body;                                                                       \
            }                                                                               \
            if (ca_now() - t0_ > 2e-3 || reps_ > (1l << 24))                               \
                break;                                                                      \
            reps_ *= 2;                                                                     \
        }                                                                                   \
        double best_ = 1e30;                                                                \
        for (int k_ = 0; k_ < 7; k_++) {                                                    \
            const double t0_ = ca_now();                                                    \
            for (long i_ = 0; i_ < reps_; i_++) {                                           \
                body;                                                                       \
            }                                                                               \
            const double e_ = (ca_now() - t0_) / (double)reps_;                             \
            best_ = e_ < best_ ? e_ : best_;                                                \
        }                                                                                   \
        (ns) = best_ * 1e9;                                                                 \
    } while (0)

/* bench_new: the kernel and the oracle on the same call; `what` names the
   shape, flops its floating-point operations (0: not a FLOP count worth
   printing). The kernel's inputs may be overwritten (in-place slots):
   timing does not care about values past the first call. */
#define CA_BENCH(c, what, flops, NEW_CALL, REF_CALL)                                         \
    do {                                                                                    \
        if ((c)->bench && (c)->t != (c)->ref) { /* the oracle against itself: no */    \
            double new_ns, ref_ns;                                                          \
            CA_TIME(new_ns, NEW_CALL);                                                      \
            CA_TIME(ref_ns, REF_CALL);                                                      \
            printf("%-12s %-5s %-10s %-16s %12.1f ns %7.2fx scalar", (c)->slot,             \
                   (c)->dt_name, (c)->isa, what, new_ns, ref_ns / new_ns);                  \
            if ((flops) > 0)                                                                \
                printf(" %8.1f GFLOP/s", (double)(flops) / new_ns);                         \
            printf("\n");                                                                   \
        }                                                                                   \
    } while (0)

/* ------------------------------------------------------------ shared by families */

/* Shapes of a tile check (checkasm_tile.c): the first CA_BENCH_SHAPES are
   the bench shapes, named by tile_bench_names. */
typedef struct tile_shape {
    size_t nq, nk, d;
} tile_shape;
#define CA_BENCH_SHAPES 3
#define CA_TILE_SHAPES 24
extern const char *const tile_bench_names[CA_BENCH_SHAPES];
tile_shape tile_shape_of(checkasm *c, int i, int dt);

/*
 * The precision a score or weighted-sum check runs in: how the inputs are
 * rounded before their exact products (src/lowp.h), and which table
 * members are the kernel and its oracles. A kernel of a rounding mode may
 * also compute exactly (the mode permits rounding, attn.h): it passes
 * within the pair bound of either oracle.
 */
enum { CA_EXACT, CA_BF16, CA_I8 };

/* The score and weighted-sum checks in a precision (checkasm_tile.c), the
   backward's transposed sum in one (checkasm_backward.c). */
void check_qk_mode(checkasm *c, int mode, attn_qk_tile_fn *kernel, attn_qk_tile_fn *oracle,
                   attn_qk_tile_fn *twin);
void check_pv_mode(checkasm *c, int mode, attn_pv_tile_fn *kernel, attn_pv_tile_fn *oracle);
void check_pt_mode(checkasm *c, int mode, attn_pt_tile_fn *kernel, attn_pt_tile_fn *oracle);
int pv_sum_ok(int mode, float got, float ref, float exact, float acc0, const float *w,
              ptrdiff_t ws, const float *x, ptrdiff_t xs, size_t n, double *bound);

/*
 * A slot that changes a row of n floats in place (checkasm_row.c): one
 * case per slot, run over CA_ROWS rows of row_len's lengths. draw fills
 * the row (and aux, and the parameters) for row i; run calls table t's
 * kernel on them; bound gives element j's pair bound from its input x0,
 * or, NULL, the slot must match the oracle bit for bit.
 */
typedef struct row_args {
    float *x;
    void *aux;    /* n floats or n bytes beside the row, when the case has them */
    float f;      /* the slot's float parameter */
    int64_t pos;  /* alibi's position */
    char what[48]; /* the parameters, for a failure's message */
} row_args;

typedef struct row_case {
    int aux;
    void (*draw)(checkasm *c, int i, size_t n, row_args *a);
    void (*run)(const attn_dsp *t, const row_args *a, size_t n);
    double (*bound)(const row_args *a, float x0, size_t j);
} row_case;

void check_row_case(checkasm *c, const row_case *rc);

/* check_<slot> as the case of <slot>_draw and <slot>_run; aux: 1 when the
   case has an aux row; bound: NULL for bitwise. */
#define CA_ROW_CASE(slot, aux, bound)                                                       \
    static const row_case slot##_case = {aux, slot##_draw, slot##_run, bound};              \
    void check_##slot(checkasm *c) { check_row_case(c, &slot##_case); }

#endif /* ATTN_TEST_CHECKASM_H */

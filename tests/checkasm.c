/* SPDX-License-Identifier: MIT */
/*
 * checkasm: every kernel of the kernel list (src/kernel_list.h), on every
 * table this build and CPU run, against the scalar oracle, and with --bench
 * timed against it on the same call (dav1d's checkasm: check_func, then
 * bench_new).
 *
 *   checkasm [--bench] [--isa NAME] [--slot NAME] [--seed N]
 *
 * It walks the registry (src/isa_list.h) and each ISA's rows, so a kernel
 * the list gains is checked and timed with no line here, and a slot the
 * list gains does not compile here until it has its check_<slot> below.
 * Each check prepares one call of its slot (random inputs for the row's
 * dtype, a shape), runs the oracle and the kernel on copies of the same
 * inputs and compares them within the pair bounds of tests/tolerance.h
 * (their derivations are there); shapes cover the tails of the table's
 * tiles. Bitwise slots (to_f32, row_max, row_scale, add_bias, mask_bool)
 * must match bit for bit, NaN for NaN. The deep sweeps (every tail, NaN
 * propagation, page fences, strides) are tests/test_kernels.c's and
 * tests/test_quant.c's; this program makes sure nothing in the list goes
 * unchecked or untimed.
 *
 * Also checked: every slot of every table holds a kernel (for the KV slots,
 * every K/V dtype), and each row's dtype token names the dtype of that
 * index in src/dtype_list.h.
 *
 * Without --bench it times nothing and is a test (suite kernels): random
 * inputs come from a seed it prints on failure (ATTN_TEST_SEED or --seed
 * replays it). Exit status: 0 all passed, 1 a check failed, 2 bad usage.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "lowp.h"
#include "quant.h"
#include "ref.h"
#include "test_rows.h"
#include "tolerance.h"
#include "emu_tables.h"

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

static uint64_t next(checkasm *c)
{
    /* xorshift64* */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 0x2545f4914f6cdd1dull;
}

/* Uniform in [lo, hi]. */
static size_t pick(checkasm *c, size_t lo, size_t hi)
{
    return lo + (size_t)(next(c) % (uint64_t)(hi - lo + 1));
}

static float uniform(checkasm *c, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(next(c) >> 40) / (double)(1u << 24));
}

static void *xalloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "checkasm: out of memory\n");
        exit(2);
    }
    return p;
}

static void fail(checkasm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(checkasm *c, const char *fmt, ...)
{
    c->failures++;
    if (c->failed_here++ >= 3) /* the first few of a row say enough */
        return;
    fprintf(stderr, "FAIL %s_%s_%s: ", c->slot, c->dt_name, c->isa);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (replay: ATTN_TEST_SEED=%llu)\n", (unsigned long long)c->seed);
}

/* got vs want within bound (NaN matches NaN; an infinity must match). */
static int near(float got, float want, double bound)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs((double)got - (double)want) <= bound;
}

static int same_bits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y || (isnan(a) && isnan(b));
}

/* ------------------------------------------------------------ inputs */

/* Bytes of one stride unit of the K/V dtype dt, values per unit. */
static size_t unit_bytes(int dt) { ATTN_DTYPE_GET(dt, bytes, 0) }

static size_t unit_values(int dt) { ATTN_DTYPE_GET(dt, block, 1) }

static const char *dtype_name(int dt) { ATTN_DTYPE_GET(dt, name, "?") }

/*
 * `units` stride units of K/V values of dtype dt, drawn as bit patterns of
 * finite values of moderate size: F16 and BF16 exponents within 2^+-6,
 * block scales within 2^-8..2^-1 (as attn_quantize makes them for values
 * of magnitude up to about 60), any int8 or nibble, any E4M3 byte but NaN,
 * E5M2 bytes from the subnormals to 2^5 (no infinity or NaN).
 */
static void fill_kv(checkasm *c, unsigned char *x, int dt, size_t units)
{
    const size_t ub = unit_bytes(dt);
    for (size_t u = 0; u < units; u++) {
        unsigned char *e = x + u * ub;
        for (size_t b = 0; b < ub; b++)
            e[b] = (unsigned char)next(c);
        uint16_t h;
        switch (dt) {
        case ATTN_KV_F32: {
            const float v = uniform(c, -4.0f, 4.0f);
            memcpy(e, &v, 4);
            break;
        }
        case ATTN_KV_F16: /* sign, exponent 9..21 (2^-6..2^6), any mantissa */
            h = (uint16_t)((next(c) & 0x8000u) | (pick(c, 9, 21) << 10) | (next(c) & 0x3ffu));
            memcpy(e, &h, 2);
            break;
        case ATTN_KV_BF16: /* sign, exponent 121..133, any mantissa */
            h = (uint16_t)((next(c) & 0x8000u) | (pick(c, 121, 133) << 7) | (next(c) & 0x7fu));
            memcpy(e, &h, 2);
            break;
        case ATTN_KV_Q8_0:
        case ATTN_KV_Q4_0: /* a positive f16 block scale 2^-8..2^-1 */
            h = (uint16_t)((pick(c, 7, 14) << 10) | (next(c) & 0x3ffu));
            memcpy(e, &h, 2);
            break;
        case ATTN_KV_FP8_E4M3:
            if ((e[0] & 0x7f) == 0x7f)
                e[0] &= 0xfe; /* S.1111.111 is NaN */
            break;
        case ATTN_KV_FP8_E5M2: /* sign, exponent 0..20 (subnormals to 2^5), any mantissa */
            e[0] = (uint8_t)((e[0] & 0x80u) | (pick(c, 0, 20) << 2) | (e[0] & 3u));
            break;
        }
    }
}

/* Row lengths the kernels see for dtype dt: whole blocks for Q8_0/Q4_0. */
static size_t dim_for(checkasm *c, int dt, size_t lo, size_t hi)
{
    const size_t per = unit_values(dt);
    size_t d = pick(c, lo, hi);
    return per > 1 ? (d + per - 1) / per * per : d;
}

/* The oracle's exact decoding of `units` units (to_f32 is bitwise in every
   table: checked by check_to_f32), for the magnitudes of the bounds. */
static void decode(checkasm *c, const void *x, int dt, size_t values, float *out)
{
    c->ref->to_f32[dt](x, out, values);
}

/* ------------------------------------------------------------ timing (--bench) */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best-of-7 time of one call of `body` in ns (each of the 7 a batch of
   calls running about 2 ms). */
#define CA_TIME(ns, body)                                                                   \
    do {                                                                                    \
        long reps_ = 1;                                                                     \
        for (;;) {                                                                          \
            const double t0_ = now();                                                       \
            for (long i_ = 0; i_ < reps_; i_++) {                                           \
                body;                                                                       \
            }                                                                               \
            if (now() - t0_ > 2e-3 || reps_ > (1l << 24))                                  \
                break;                                                                      \
            reps_ *= 2;                                                                     \
        }                                                                                   \
        double best_ = 1e30;                                                                \
        for (int k_ = 0; k_ < 7; k_++) {                                                    \
            const double t0_ = now();                                                       \
            for (long i_ = 0; i_ < reps_; i_++) {                                           \
                body;                                                                       \
            }                                                                               \
            const double e_ = (now() - t0_) / (double)reps_;                                \
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

/* ------------------------------------------------------------ the checks, one per slot */

typedef struct tile_shape {
    size_t nq, nk, d;
} tile_shape;

/* Shapes of a tile check: rows and keys past the table's block (tails of
   every path), head dims from 1 to 256. The first CA_BENCH_SHAPES are the
   bench shapes: a full block (prefill), and 4 and 16 rows over 256 keys
   (decode of a GQA group of 4; speculative decoding, Lq = 4 of it). */
static const char *const tile_bench_names[] = {"block, d 128", "4 x 256, d 128",
                                               "16 x 256, d 128"};
#define CA_BENCH_SHAPES 3
static tile_shape tile_shape_of(checkasm *c, int i, int dt)
{
    tile_shape s;
    if (i < CA_BENCH_SHAPES) {
        s.nq = i == 0 ? c->t->block_q : i == 1 ? 4 : 16;
        s.nk = i == 0 ? c->t->block_k : 256;
        s.d = 128;
        return s;
    }
    const size_t rows = c->t->block_q > ATTN_MAX_QK_ROWS ? c->t->block_q : ATTN_MAX_QK_ROWS;
    s.nq = i % 3 == 0 ? pick(c, 1, 4) : pick(c, 1, rows + 1);
    s.nk = pick(c, 1, c->t->block_k + 1);
    s.d = dim_for(c, dt, 1, i % 4 == 0 ? 256 : 140);
    return s;
}
#define CA_TILE_SHAPES 24

/*
 * The precision a score or weighted-sum check runs in: how the inputs are
 * rounded before their exact products (src/lowp.h), and which table
 * members are the kernel and its oracles. A kernel of a rounding mode may
 * also compute exactly (the mode permits rounding, attn.h): it passes
 * within the pair bound of either oracle.
 */
enum { CA_EXACT, CA_BF16, CA_I8 };

/* Dequantized int8-mode query row (src/lowp.h), d a multiple of 32. */
static void i8_query(const float *q, size_t d, float *out)
{
    for (size_t b = 0; b < d; b += ATTN_QBLOCK) {
        attn_q8_block x;
        attn_q8_quantize(q + b, &x);
        for (size_t t = 0; t < ATTN_QBLOCK; t++)
            out[b + t] = x.dq * (float)x.n[t];
    }
}

/* vdpbf16ps and BFDOT flush subnormal factors and sums (attn.h): what that
   may move a score by, beyond the f32 bound (T = 2^-126). */
static double tol_flush(double d, double abs_scale, double folded)
{
    return abs_scale * 0x1p-126 * (folded + d);
}

/* twin, unless NULL: a kernel that must give kernel's bits (one ISA's int8
   files: the same integer sums and f32 steps on another instruction). */
static void check_qk_mode(checkasm *c, int mode, attn_qk_tile_fn *kernel, attn_qk_tile_fn *oracle,
                          attn_qk_tile_fn *twin)
{
    const int dt = c->dt;
    if (!kernel)
        return; /* a dot slot this table has no kernel for (src/kernel_list.h) */
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const tile_shape sh = tile_shape_of(c, i, dt);
        const size_t nq = sh.nq, nk = sh.nk, d = sh.d;
        const size_t qs = d + pick(c, 0, 3), ks = d / unit_values(dt) + pick(c, 0, 2);
        const size_t ss = nk + pick(c, 0, 3);
        const float scale = uniform(c, 0.05f, 1.0f) * (next(c) & 1 ? 1.0f : -1.0f);
        float *q = xalloc(nq * qs * 4), *s = xalloc(nq * ss * 4), *s_ref = xalloc(nq * ss * 4);
        float *s_exact = xalloc(nq * ss * 4), *qr = xalloc(d * 4);
        unsigned char *k = xalloc(nk * ks * unit_bytes(dt));
        float *kd = xalloc(d * 4);
        for (size_t j = 0; j < nq * qs; j++)
            q[j] = uniform(c, -3.0f, 3.0f);
        fill_kv(c, k, dt, nk * ks);
        for (size_t j = 0; j < nq * ss; j++)
            s[j] = s_ref[j] = s_exact[j] = -7.0f; /* the row gaps must keep it */
        kernel(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s, (ptrdiff_t)ss);
        oracle(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_ref, (ptrdiff_t)ss);
        if (twin && twin != kernel) {
            twin(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_exact, (ptrdiff_t)ss);
            for (size_t j = 0; j < nq * ss; j++)
                if (memcmp(&s[j], &s_exact[j], sizeof s[j]) != 0) {
                    fail(c, "nq=%zu nk=%zu d=%zu: s[%zu][%zu] = %a, the own table's int8 "
                         "kernel %a: one ISA's int8 files give the same bits",
                         nq, nk, d, j / ss, j % ss, (double)s[j], (double)s_exact[j]);
                    break;
                }
        }
        if (mode == CA_BF16)
            c->ref->qk_tile[dt](q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_exact,
                                (ptrdiff_t)ss);
        for (size_t col = 0; col < nk; col++) {
            decode(c, k + col * ks * unit_bytes(dt), dt, d, kd);
            for (size_t r = 0; r < nq; r++) {
                const float *qrow = q + r * qs;
                if (mode == CA_I8) {
                    i8_query(qrow, d, qr);
                    qrow = qr;
                }
                double mag = 0.0, folded = 0.0, mag_e = 0.0, folded_e = 0.0;
                for (size_t t = 0; t < d; t++) {
                    const double qv = mode == CA_BF16 ? attn_bf16_round(qrow[t]) : qrow[t];
                    const double kv = mode == CA_BF16 ? attn_bf16_round(kd[t]) : kd[t];
                    mag += fabs(qv * kv);
                    folded += fmax(fabs(qv), fabs(kv));
                    mag_e += fabs((double)qrow[t] * kd[t]);
                    folded_e += fmax(fabs((double)qrow[t]), fabs((double)kd[t]));
                }
                const double as = fabs((double)scale);
                /* the int8 mode sums a converted partial per 4 values and
                   one scale product per block: d + 2 roundings at most */
                const double n = mode == CA_I8 ? (double)d + 2.0 : (double)d;
                double bound = TOL_PAIR(tol_qk(n, as, mag, folded));
                if (mode == CA_BF16)
                    bound += tol_flush((double)d, as, folded);
                const float got = s[r * ss + col];
                const int ok = near(got, s_ref[r * ss + col], bound) ||
                               (mode == CA_BF16 &&
                                near(got, s_exact[r * ss + col],
                                     TOL_PAIR(tol_qk((double)d, as, mag_e, folded_e))));
                if (!ok)
                    fail(c, "nq=%zu nk=%zu d=%zu: s[%zu][%zu] = %.9g, scalar %.9g, bound %.3g",
                         nq, nk, d, r, col, (double)got, (double)s_ref[r * ss + col], bound);
            }
        }
        for (size_t r = 0; r < nq; r++)
            for (size_t col = nk; col < ss; col++)
                if (s[r * ss + col] != -7.0f)
                    fail(c, "nq=%zu nk=%zu d=%zu: wrote into the row gap at [%zu][%zu]", nq, nk,
                         d, r, col);
        if (i < CA_BENCH_SHAPES)
            CA_BENCH(c, tile_bench_names[i], 2.0 * nq * nk * d,
                     kernel(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s, (ptrdiff_t)ss),
                     oracle(q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_ref,
                            (ptrdiff_t)ss));
        free(q), free(s), free(s_ref), free(s_exact), free(qr), free(k), free(kd);
    }
}

static void check_qk_tile(checkasm *c)
{
    check_qk_mode(c, CA_EXACT, c->t->qk_tile[c->dt], c->ref->qk_tile[c->dt], NULL);
}

static void check_qk_bf16(checkasm *c)
{
    check_qk_mode(c, CA_BF16, c->t->qk_bf16[c->dt], c->ref->qk_bf16[c->dt], NULL);
}

static void check_qk_i8(checkasm *c)
{
    check_qk_mode(c, CA_I8, c->t->qk_i8[c->dt], c->ref->qk_i8[c->dt],
                  c->twin ? c->twin->qk_i8[c->dt] : NULL);
}

/*
 * qk_diag against the same table's qk_tile (src/dsp.h): row r of q against
 * its own K row must give, bit for bit, the score qk_tile gives that pair
 * in a call with the same nq rows (the K rows as its keys). Its accuracy is
 * then qk_tile's, checked above against the scalar kernel and float64. The
 * rows are passed in reverse memory order: only the pointers locate them.
 */
static void check_qk_diag(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const tile_shape sh = tile_shape_of(c, i, dt);
        const size_t nq = sh.nq, d = sh.d;
        const size_t qs = d + pick(c, 0, 3), ks = d / unit_values(dt) + pick(c, 0, 2);
        const float scale = uniform(c, 0.05f, 1.0f) * (next(c) & 1 ? 1.0f : -1.0f);
        float *q = xalloc(nq * qs * 4), *s = xalloc(nq * nq * 4), *diag = xalloc((nq + 1) * 4);
        unsigned char *k = xalloc(nq * ks * unit_bytes(dt));
        const void **rows = xalloc(nq * sizeof *rows);
        for (size_t j = 0; j < nq * qs; j++)
            q[j] = uniform(c, -3.0f, 3.0f);
        fill_kv(c, k, dt, nq * ks);
        for (size_t r = 0; r < nq; r++) /* row r's K row is key nq - 1 - r */
            rows[r] = k + (nq - 1 - r) * ks * unit_bytes(dt);
        diag[nq] = -7.0f; /* past the end: must stay */
        c->t->qk_tile[dt](q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nq, d, scale, s, (ptrdiff_t)nq);
        c->t->qk_diag[dt](q, (ptrdiff_t)qs, rows, nq, d, scale, diag);
        for (size_t r = 0; r < nq; r++)
            if (!same_bits(diag[r], s[r * nq + (nq - 1 - r)]))
                fail(c, "nq=%zu d=%zu: row %zu = %.9g, qk_tile's score %.9g", nq, d, r,
                     (double)diag[r], (double)s[r * nq + (nq - 1 - r)]);
        if (!same_bits(diag[nq], -7.0f))
            fail(c, "nq=%zu d=%zu: wrote past s[nq - 1]", nq, d);
        /* and as qk_tile sums the same values in f32: the backward's D
           (o's dtype) meets dP (v's dtype) */
        float *kd = xalloc(nq * d * 4);
        for (size_t r = 0; r < nq; r++)
            decode(c, k + r * ks * unit_bytes(dt), dt, d, kd + r * d);
        c->t->qk_tile[ATTN_KV_F32](q, (ptrdiff_t)qs, kd, (ptrdiff_t)d, nq, nq, d, scale, s,
                                   (ptrdiff_t)nq);
        for (size_t r = 0; r < nq; r++)
            if (!same_bits(diag[r], s[r * nq + (nq - 1 - r)]))
                fail(c, "nq=%zu d=%zu: row %zu = %.9g, qk_tile's f32 score %.9g", nq, d, r,
                     (double)diag[r], (double)s[r * nq + (nq - 1 - r)]);
        free(q), free(s), free(diag), free(k), free(rows), free(kd);
    }
}

/* One element of a P.V-shaped sum (check_pv_mode, check_pt_mode): got =
   acc0 + sum_i w[i * ws] x[i * xs] over n terms, within the f32 pair bound
   of the oracle's `ref` (bf16: of the rounded factors' products, and the
   flush of a subnormal factor or sum, T each), or (bf16) of `exact`, the
   f32 oracle's, for a kernel that took the exact path. */
static int pv_sum_ok(int mode, float got, float ref, float exact, float acc0, const float *w,
                     ptrdiff_t ws, const float *x, ptrdiff_t xs, size_t n, double *bound)
{
    double mag = fabs((double)acc0), mag_e = mag;
    for (size_t i = 0; i < n; i++) {
        const double wv = w[(ptrdiff_t)i * ws], xv = x[(ptrdiff_t)i * xs];
        mag_e += fabs(wv * xv);
        mag += mode == CA_BF16
                   ? fabs((double)attn_bf16_round((float)wv) * attn_bf16_round((float)xv))
                   : fabs(wv * xv);
    }
    /* the bf16 units flush: T per product and per sum (attn.h) */
    *bound = TOL_PAIR(tol_pv((double)n, mag)) + (mode == CA_BF16 ? 2.0 * (double)n * 0x1p-126 : 0.0);
    return near(got, ref, *bound) ||
           (mode == CA_BF16 && near(got, exact, TOL_PAIR(tol_pv((double)n, mag_e))));
}

static void check_pv_mode(checkasm *c, int mode, attn_pv_tile_fn *kernel, attn_pv_tile_fn *oracle)
{
    const int dt = c->dt;
    if (!kernel)
        return; /* a dot slot this table has no kernel for (src/kernel_list.h) */
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const tile_shape sh = tile_shape_of(c, i, dt);
        const size_t nq = sh.nq, nk = sh.nk, dv = sh.d;
        const size_t ps = nk + pick(c, 0, 3), vs = dv / unit_values(dt) + pick(c, 0, 2);
        const size_t as = dv + pick(c, 0, 3);
        float *p = xalloc(nq * ps * 4), *acc = xalloc(nq * as * 4), *acc_ref = xalloc(nq * as * 4);
        float *acc_exact = xalloc(nq * as * 4);
        unsigned char *v = xalloc(nk * vs * unit_bytes(dt));
        float *vd = xalloc(nk * dv * 4);
        for (size_t j = 0; j < nq * ps; j++) /* softmax weights, some exactly 0 */
            p[j] = next(c) % 8 ? uniform(c, 0.0f, 1.0f) : 0.0f;
        fill_kv(c, v, dt, nk * vs);
        for (size_t j = 0; j < nq * as; j++)
            acc[j] = acc_ref[j] = acc_exact[j] = uniform(c, -2.0f, 2.0f);
        float *acc0 = xalloc(nq * as * 4);
        memcpy(acc0, acc, nq * as * 4);
        kernel(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc, (ptrdiff_t)as);
        oracle(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc_ref, (ptrdiff_t)as);
        if (mode == CA_BF16)
            c->ref->pv_tile[dt](p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc_exact,
                                (ptrdiff_t)as);
        for (size_t col = 0; col < nk; col++)
            decode(c, v + col * vs * unit_bytes(dt), dt, dv, vd + col * dv);
        for (size_t r = 0; r < nq; r++)
            for (size_t t = 0; t < as; t++) {
                if (t >= dv) {
                    if (!same_bits(acc[r * as + t], acc0[r * as + t]))
                        fail(c, "nq=%zu nk=%zu dv=%zu: wrote into the row gap at [%zu][%zu]",
                             nq, nk, dv, r, t);
                    continue;
                }
                double bound;
                const float got = acc[r * as + t];
                if (!pv_sum_ok(mode, got, acc_ref[r * as + t], acc_exact[r * as + t],
                               acc0[r * as + t], p + r * ps, 1, vd + t, (ptrdiff_t)dv, nk, &bound))
                    fail(c, "nq=%zu nk=%zu dv=%zu: acc[%zu][%zu] = %.9g, scalar %.9g, bound %.3g",
                         nq, nk, dv, r, t, (double)got, (double)acc_ref[r * as + t], bound);
            }
        if (i < CA_BENCH_SHAPES)
            CA_BENCH(c, tile_bench_names[i], 2.0 * nq * nk * dv,
                     kernel(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc, (ptrdiff_t)as),
                     oracle(p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc_ref,
                            (ptrdiff_t)as));
        free(p), free(acc), free(acc_ref), free(acc_exact), free(acc0), free(v), free(vd);
    }
}

static void check_pv_tile(checkasm *c)
{
    check_pv_mode(c, CA_EXACT, c->t->pv_tile[c->dt], c->ref->pv_tile[c->dt]);
}

static void check_pv_bf16(checkasm *c)
{
    check_pv_mode(c, CA_BF16, c->t->pv_bf16[c->dt], c->ref->pv_bf16[c->dt]);
}

static void check_to_f32(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const size_t n = i == 0 ? 4096 : dim_for(c, dt, 1, 300);
        const size_t units = n / unit_values(dt);
        unsigned char *x = xalloc(units * unit_bytes(dt));
        float *y = xalloc((n + 1) * 4), *y_ref = xalloc((n + 1) * 4);
        fill_kv(c, x, dt, units);
        y[n] = y_ref[n] = -7.0f;
        c->t->to_f32[dt](x, y, n);
        c->ref->to_f32[dt](x, y_ref, n);
        for (size_t j = 0; j <= n; j++)
            if (!same_bits(y[j], y_ref[j]))
                fail(c, "n=%zu: y[%zu] = %.9g, scalar %.9g (bitwise)", n, j, (double)y[j],
                     (double)y_ref[j]);
        if (i == 0)
            CA_BENCH(c, "4096 values", 0, c->t->to_f32[dt](x, y, n), c->ref->to_f32[dt](x, y_ref, n));
        free(x), free(y), free(y_ref);
    }
}

/* FP8 scale groups (attn.h 1.8): rows decoded and times their groups'
   scales, bit for bit as the oracle (one decode, one f32 product each);
   a group of 1, of a power of two, of the whole row; rows at a byte
   stride past the row, scales at a stride past the groups or 0. */
static void check_to_f32_scaled(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const size_t pv = unit_values(dt), rows = pick(c, 1, 9);
        const size_t n = i == 0 ? 512 : dim_for(c, dt, 1, 300);
        size_t g = i % 3 == 0 ? n : i % 3 == 1 ? 1 : (size_t)1 << pick(c, 0, 6);
        while (n % g)
            g /= 2; /* down to 1 at worst */
        const size_t units = n / pv, ub = unit_bytes(dt);
        const ptrdiff_t sstride = (ptrdiff_t)((units + pick(c, 0, 3)) * ub);
        const ptrdiff_t scstride = i % 4 == 3 ? 0 : (ptrdiff_t)(n / g + pick(c, 0, 2));
        const ptrdiff_t dstride = (ptrdiff_t)(n + pick(c, 0, 5));
        unsigned char *x = xalloc(rows * (size_t)sstride);
        float *sc = xalloc((rows * (size_t)(scstride ? scstride : 1) + n / g) * 4);
        float *y = xalloc((rows * (size_t)dstride + 1) * 4);
        float *y_ref = xalloc((rows * (size_t)dstride + 1) * 4);
        for (size_t r = 0; r < rows; r++)
            fill_kv(c, x + r * (size_t)sstride, dt, units);
        for (size_t k = 0; k < rows * (size_t)(scstride ? scstride : 1) + n / g; k++)
            sc[k] = uniform(c, 0.001f, 3.0f);
        for (size_t k = 0; k <= rows * (size_t)dstride; k++)
            y[k] = y_ref[k] = -7.0f; /* the gaps: never written */
        c->t->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y, dstride);
        c->ref->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y_ref, dstride);
        for (size_t k = 0; k <= rows * (size_t)dstride; k++)
            if (!same_bits(y[k], y_ref[k]))
                fail(c, "rows=%zu n=%zu group=%zu: y[%zu] = %.9g, scalar %.9g (bitwise)", rows,
                     n, g, k, (double)y[k], (double)y_ref[k]);
        if (i == 0)
            CA_BENCH(c, "rows of 512", 0,
                     c->t->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y, dstride),
                     c->ref->to_f32_scaled[dt](x, sstride, rows, n, sc, scstride, g, y_ref,
                                               dstride));
        free(x), free(sc), free(y), free(y_ref);
    }
}

/*
 * FP8 scale groups read in place (qk_grp, pv_grp; src/dsp.h): the kernels
 * on an FP8 cache with one scale per key and group of g channels (g a
 * multiple of ATTN_GRP_STEP, d a multiple of g, keys' scales a stride
 * apart, or the same for every key: stride 0) against
 *   - the oracle within the F32 pair bound of the staged values fl32(x s)
 *     (the oracle's to_f32_scaled: the values the kernels claim);
 *   - the table's own F32 kernel on those staged rows, bit for bit: the
 *     claim that each sums as its few-row qk_tile and its pv_tile do (for
 *     qk from 1 to 8 rows, where every table's F32 qk_tile takes its
 *     few-row path; pv_tile sums each element key by key for any rows).
 * The shapes: the bench shape (4 x 256, d 128 in groups of 64), then
 * random rows, keys and groups.
 */
typedef struct grp_case {
    size_t nq, nk, d, g;
    ptrdiff_t ks, ss; /* key row stride (units), scale stride (floats) */
    unsigned char *k;
    float *sc, *kf; /* scales [nk][ss]; staged rows [nk][d] */
} grp_case;

static grp_case grp_case_make(checkasm *c, int i)
{
    const int dt = c->dt;
    grp_case g;
    g.nq = i == 0 ? 4 : pick(c, 1, i % 2 ? 9 : 20);
    g.nk = i == 0 ? 256 : pick(c, 1, c->t->block_k + 1);
    g.g = i == 0 ? 64 : (size_t)ATTN_GRP_STEP << pick(c, 0, 3);
    g.d = i == 0 ? 128 : g.g * pick(c, 1, 256 / g.g);
    g.ks = (ptrdiff_t)(g.d + pick(c, 0, 2));
    g.ss = i % 5 == 4 ? 0 : (ptrdiff_t)(g.d / g.g + pick(c, 0, 3));
    const size_t nsc = g.nk * (size_t)g.ss + g.d / g.g;
    g.k = xalloc(g.nk * (size_t)g.ks * unit_bytes(dt));
    g.sc = xalloc(nsc * 4);
    g.kf = xalloc(g.nk * g.d * 4);
    fill_kv(c, g.k, dt, g.nk * (size_t)g.ks);
    for (size_t j = 0; j < nsc; j++) /* powers of two now and then: exact products */
        g.sc[j] = next(c) % 4 ? uniform(c, 0.001f, 3.0f) : ldexpf(1.0f, (int)pick(c, 0, 12) - 6);
    c->ref->to_f32_scaled[dt](g.k, g.ks * (ptrdiff_t)unit_bytes(dt), g.nk, g.d, g.sc, g.ss, g.g,
                              g.kf, (ptrdiff_t)g.d);
    return g;
}

static void grp_case_free(grp_case *g) { free(g->k), free(g->sc), free(g->kf); }

static void check_qk_grp(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        grp_case g = grp_case_make(c, i);
        const size_t nq = g.nq, nk = g.nk, d = g.d, qs = d + pick(c, 0, 3), ss = nk + pick(c, 0, 3);
        const float scale = uniform(c, 0.05f, 1.0f) * (next(c) & 1 ? 1.0f : -1.0f);
        float *q = xalloc(nq * qs * 4), *s = xalloc(nq * ss * 4), *s_ref = xalloc(nq * ss * 4);
        float *s_f32 = xalloc(nq * ss * 4);
        for (size_t j = 0; j < nq * qs; j++)
            q[j] = uniform(c, -3.0f, 3.0f);
        for (size_t j = 0; j < nq * ss; j++)
            s[j] = s_ref[j] = s_f32[j] = -7.0f; /* the row gaps must keep it */
        c->t->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s, (ptrdiff_t)ss, g.sc,
                         g.ss, g.g);
        c->ref->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s_ref, (ptrdiff_t)ss,
                           g.sc, g.ss, g.g);
        c->t->qk_tile[ATTN_KV_F32](q, (ptrdiff_t)qs, g.kf, (ptrdiff_t)d, nq, nk, d, scale, s_f32,
                                   (ptrdiff_t)ss);
        for (size_t col = 0; col < ss; col++)
            for (size_t r = 0; r < nq; r++) {
                const float got = s[r * ss + col];
                if (col >= nk) {
                    if (got != -7.0f)
                        fail(c, "nq=%zu nk=%zu d=%zu: wrote into the row gap at [%zu][%zu]", nq,
                             nk, d, r, col);
                    continue;
                }
                double mag = 0.0, folded = 0.0;
                for (size_t t = 0; t < d; t++) {
                    const double qv = q[r * qs + t], kv = g.kf[col * d + t];
                    mag += fabs(qv * kv);
                    folded += fmax(fabs(qv), fabs(kv));
                }
                const double bound = TOL_PAIR(tol_qk((double)d, fabs((double)scale), mag, folded));
                if (!near(got, s_ref[r * ss + col], bound))
                    fail(c, "nq=%zu nk=%zu d=%zu group=%zu: s[%zu][%zu] = %.9g, scalar %.9g, "
                         "bound %.3g", nq, nk, d, g.g, r, col, (double)got,
                         (double)s_ref[r * ss + col], bound);
                if (nq <= 8 && !same_bits(got, s_f32[r * ss + col]))
                    fail(c, "nq=%zu nk=%zu d=%zu group=%zu: s[%zu][%zu] = %a, the table's F32 "
                         "qk_tile on the staged rows %a (bitwise)", nq, nk, d, g.g, r, col,
                         (double)got, (double)s_f32[r * ss + col]);
            }
        if (i == 0)
            CA_BENCH(c, "4 x 256, d 128, groups of 64", 2.0 * nq * nk * d,
                     c->t->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s,
                                      (ptrdiff_t)ss, g.sc, g.ss, g.g),
                     c->ref->qk_grp[dt](q, (ptrdiff_t)qs, g.k, g.ks, nq, nk, d, scale, s_ref,
                                        (ptrdiff_t)ss, g.sc, g.ss, g.g));
        free(q), free(s), free(s_ref), free(s_f32);
        grp_case_free(&g);
    }
}

static void check_pv_grp(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        grp_case g = grp_case_make(c, i);
        const size_t nq = g.nq, nk = g.nk, dv = g.d, ps = nk + pick(c, 0, 3);
        const size_t as = dv + pick(c, 0, 3);
        float *p = xalloc(nq * ps * 4), *acc = xalloc(nq * as * 4), *acc_ref = xalloc(nq * as * 4);
        float *acc_f32 = xalloc(nq * as * 4), *acc0 = xalloc(nq * as * 4);
        for (size_t j = 0; j < nq * ps; j++) /* softmax weights, some exactly 0 */
            p[j] = next(c) % 8 ? uniform(c, 0.0f, 1.0f) : 0.0f;
        for (size_t j = 0; j < nq * as; j++)
            acc[j] = acc_ref[j] = acc_f32[j] = acc0[j] = uniform(c, -2.0f, 2.0f);
        c->t->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc, (ptrdiff_t)as, g.sc, g.ss,
                         g.g);
        c->ref->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc_ref, (ptrdiff_t)as, g.sc,
                           g.ss, g.g);
        c->t->pv_tile[ATTN_KV_F32](p, (ptrdiff_t)ps, g.kf, (ptrdiff_t)dv, nq, nk, dv, acc_f32,
                                   (ptrdiff_t)as);
        for (size_t r = 0; r < nq; r++)
            for (size_t t = 0; t < as; t++) {
                const float got = acc[r * as + t];
                if (t >= dv) {
                    if (!same_bits(got, acc0[r * as + t]))
                        fail(c, "nq=%zu nk=%zu dv=%zu: wrote into the row gap at [%zu][%zu]",
                             nq, nk, dv, r, t);
                    continue;
                }
                double bound;
                if (!pv_sum_ok(CA_EXACT, got, acc_ref[r * as + t], 0.0f, acc0[r * as + t],
                               p + r * ps, 1, g.kf + t, (ptrdiff_t)dv, nk, &bound))
                    fail(c, "nq=%zu nk=%zu dv=%zu group=%zu: acc[%zu][%zu] = %.9g, scalar %.9g, "
                         "bound %.3g", nq, nk, dv, g.g, r, t, (double)got,
                         (double)acc_ref[r * as + t], bound);
                if (!same_bits(got, acc_f32[r * as + t]))
                    fail(c, "nq=%zu nk=%zu dv=%zu group=%zu: acc[%zu][%zu] = %a, the table's F32 "
                         "pv_tile on the staged rows %a (bitwise)", nq, nk, dv, g.g, r, t,
                         (double)got, (double)acc_f32[r * as + t]);
            }
        if (i == 0)
            CA_BENCH(c, "4 x 256, d 128, groups of 64", 2.0 * nq * nk * dv,
                     c->t->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc, (ptrdiff_t)as,
                                      g.sc, g.ss, g.g),
                     c->ref->pv_grp[dt](p, (ptrdiff_t)ps, g.k, g.ks, nq, nk, dv, acc_ref,
                                        (ptrdiff_t)as, g.sc, g.ss, g.g));
        free(p), free(acc), free(acc_ref), free(acc_f32), free(acc0);
        grp_case_free(&g);
    }
}

/*
 * One f32 value for a store kernel of dtype dt: for the float dtypes any
 * bit pattern a third of the time (infinities, NaN, subnormals, values
 * that overflow F16 included), else moderate values; for the block formats
 * finite values at a per-row magnitude (the rows attn_quantize_row_ok
 * accepts), with exact zeros and ties of the rounding now and then.
 */
static float store_value(checkasm *c, int dt, float mag)
{
    const uint64_t r = next(c);
    if (unit_values(dt) > 1) {
        if (r % 16 == 0)
            return 0.0f;
        if (r % 16 == 1) /* k + 1/2 steps of a block whose amax is 127 * mag */
            return ((float)pick(c, 0, 126) + 0.5f) * mag * ((r >> 8) & 1 ? -1.0f : 1.0f);
        return uniform(c, -127.0f, 127.0f) * mag;
    }
    if (r % 3 == 0) {
        const uint32_t bits = (uint32_t)(r >> 16);
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    return uniform(c, -4.0f, 4.0f) * mag;
}

static void check_from_f32(checkasm *c)
{
    const int dt = c->dt;
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const size_t n = i == 0 ? 4096 : dim_for(c, dt, 1, 300);
        const size_t bytes = n / unit_values(dt) * unit_bytes(dt);
        float *x = xalloc(n * 4);
        unsigned char *y = xalloc(bytes + 1), *y_ref = xalloc(bytes + 1);
        /* block scales up to 127 * 2^10 / 8 (Q4_0's d), well inside binary16 */
        const float mag = ldexpf(1.0f, (int)pick(c, 0, unit_values(dt) > 1 ? 30 : 40) - 20);
        for (size_t j = 0; j < n; j++)
            x[j] = store_value(c, dt, mag);
        /* blocks whose largest |x| is 127 * mag exactly (mag a power of two:
           Q8_0's d = mag, so x * id = k + 1/2 is a tie of the rounding), now
           and then at two places with either sign (Q4_0 takes the first) */
        for (size_t b0 = 0; unit_values(dt) > 1 && b0 < n; b0 += 32)
            for (int twice = 0; twice < 2; twice++)
                if (next(c) % 2)
                    x[b0 + pick(c, 0, 31)] = (next(c) % 2 ? 127.0f : -127.0f) * mag;
        if (unit_values(dt) > 1 && !attn_quantize_row_ok(dt, x, (int64_t)n))
            fail(c, "n=%zu: a drawn row attn_quantize_row_ok refuses", n);
        /* every fourth row of a block format holds one value it cannot
           store: NaN, an infinity, or a block scale past binary16 */
        const int refused = unit_values(dt) > 1 && i % 4 == 3;
        if (refused) {
            static const float bad[] = {NAN, INFINITY, -INFINITY, 1e7f, -3e38f};
            x[pick(c, 0, n - 1)] = bad[pick(c, 0, 4)];
        }
        /* FP8's scale: 1, or a normal float around 1 */
        const float scale = i % 2 ? 1.0f : ldexpf(uniform(c, 1.0f, 2.0f), (int)pick(c, 0, 8) - 4);
        memset(y, 0xa5, bytes + 1);
        memset(y_ref, 0xa5, bytes + 1);
        const int ok = c->t->from_f32[dt](x, y, n, scale);
        const int ok_ref = c->ref->from_f32[dt](x, y_ref, n, scale);
        if (ok != ok_ref || ok == refused)
            fail(c, "n=%zu: returned %d, scalar %d, for a row it %s store", n, ok, ok_ref,
                 refused ? "cannot" : "can");
        if (!ok) {
            if (y[bytes] != 0xa5)
                fail(c, "n=%zu: a refused row written past its end", n);
            free(x), free(y), free(y_ref);
            continue;
        }
        for (size_t j = 0; j <= bytes; j++)
            if (y[j] != y_ref[j]) {
                fail(c, "n=%zu: byte %zu = 0x%02x, scalar 0x%02x (bitwise%s)", n, j, y[j],
                     y_ref[j], j == bytes ? "; written past the row" : "");
                break;
            }
        if (i == 0)
            CA_BENCH(c, "4096 values", 0, (void)c->t->from_f32[dt](x, y, n, scale),
                     (void)c->ref->from_f32[dt](x, y_ref, n, scale));
        free(x), free(y), free(y_ref);
    }
}

/* Row lengths of the row checks: 1..40, then across vector multiples; the
   first is the bench length. */
static size_t row_len(checkasm *c, int i)
{
    return i == 0 ? 1024 : i < 40 ? (size_t)i : pick(c, 41, 1100);
}
#define CA_ROWS 60

static void random_row(checkasm *c, float *x, size_t n, float lo, float hi)
{
    for (size_t j = 0; j < n; j++)
        x[j] = uniform(c, lo, hi);
}

static void check_row_max(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4);
        random_row(c, x, n, -100.0f, 100.0f);
        if (i % 5 == 1)
            x[pick(c, 0, n - 1)] = NAN;
        else if (i % 5 == 2)
            for (size_t j = 0; j < n; j++)
                x[j] = -INFINITY;
        const float got = c->t->row_max(x, n), want = c->ref->row_max(x, n);
        if (!same_bits(got, want))
            fail(c, "n=%zu: %.9g, scalar %.9g (bitwise)", n, (double)got, (double)want);
        if (i == 0) {
            volatile float sink;
            CA_BENCH(c, "1024", 0, sink = c->t->row_max(x, n), sink = c->ref->row_max(x, n));
            (void)sink;
        }
        free(x);
    }
}

static void check_exp_sum(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4), *x_ref = xalloc(n * 4), *x0 = xalloc(n * 4);
        random_row(c, x0, n, -60.0f, 20.0f);
        if (n > 3 && i % 2)
            x0[pick(c, 0, n - 1)] = -INFINITY; /* a masked score */
        float max = -INFINITY;
        for (size_t j = 0; j < n; j++)
            max = x0[j] > max ? x0[j] : max;
        if (max == -INFINITY)
            max = 0.0f;
        if (i % 3 == 2)
            max += uniform(c, 0.0f, 5.0f); /* a running max above the row's own */
        memcpy(x, x0, n * 4);
        memcpy(x_ref, x0, n * 4);
        float w = 0.0f, w_ref = 0.0f;
        const float sum = c->t->exp_sum(x, n, max, &w);
        const float sum_ref = c->ref->exp_sum(x_ref, n, max, &w_ref);
        double sum_bound = 0.0, w_bound = 0.0, total = 0.0, wmag = 0.0;
        size_t terms = 0;
        for (size_t j = 0; j < n; j++) {
            if (x0[j] == -INFINITY) {
                if (!same_bits(x[j], x_ref[j]))
                    fail(c, "n=%zu: x[%zu] = %.9g for -inf, scalar %.9g", n, j, (double)x[j],
                         (double)x_ref[j]);
                continue;
            }
            const double shifted = (double)(x0[j] - max), e = exp((double)x0[j] - max);
            const double b = tol_exp(shifted, e);
            if (!near(x[j], x_ref[j], TOL_PAIR(b)))
                fail(c, "n=%zu: x[%zu] = %.9g, scalar %.9g, bound %.3g", n, j, (double)x[j],
                     (double)x_ref[j], TOL_PAIR(b));
            total += e;
            sum_bound += b;
            wmag += fabs(e * ((double)x0[j] - max));
            w_bound += fabs(shifted) * b;
            terms++;
        }
        sum_bound += tol_gamma((double)terms) * total;
        w_bound += tol_gamma((double)terms + 1.0) * wmag;
        if (!near(sum, sum_ref, TOL_PAIR(sum_bound)))
            fail(c, "n=%zu: sum %.9g, scalar %.9g, bound %.3g", n, (double)sum, (double)sum_ref,
                 TOL_PAIR(sum_bound));
        if (!near(w, w_ref, TOL_PAIR(w_bound)))
            fail(c, "n=%zu: weighted %.9g, scalar %.9g, bound %.3g", n, (double)w, (double)w_ref,
                 TOL_PAIR(w_bound));
        if (i == 0) {
            volatile float sink;
            CA_BENCH(c, "1024, weighted", 0, sink = c->t->exp_sum(x, n, max, &w),
                     sink = c->ref->exp_sum(x_ref, n, max, &w_ref));
            (void)sink;
        }
        free(x), free(x_ref), free(x0);
    }
}

/* A slot that must match the oracle bit for bit, on x in place (and aux). */
#define CA_BITWISE_ROW(c, i, n, x, x_ref, CALL_NEW, CALL_REF, what)                          \
    do {                                                                                    \
        CALL_NEW;                                                                           \
        CALL_REF;                                                                           \
        for (size_t j_ = 0; j_ < (n); j_++)                                                 \
            if (!same_bits((x)[j_], (x_ref)[j_]))                                           \
                fail(c, "n=%zu: x[%zu] = %.9g, scalar %.9g (bitwise)", (n), j_,             \
                     (double)(x)[j_], (double)(x_ref)[j_]);                                 \
        if ((i) == 0)                                                                       \
            CA_BENCH(c, what, 0, CALL_NEW, CALL_REF);                                          \
    } while (0)

static void check_row_scale(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4), *x_ref = xalloc(n * 4);
        random_row(c, x, n, -1e3f, 1e3f);
        memcpy(x_ref, x, n * 4);
        const float s = uniform(c, -3.0f, 3.0f);
        CA_BITWISE_ROW(c, i, n, x, x_ref, c->t->row_scale(x, n, s), c->ref->row_scale(x_ref, n, s),
                       "1024");
        free(x), free(x_ref);
    }
}

static void check_add_bias(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4), *x_ref = xalloc(n * 4), *b = xalloc(n * 4);
        random_row(c, x, n, -50.0f, 50.0f);
        random_row(c, b, n, -5.0f, 5.0f);
        if (n > 2)
            x[pick(c, 0, n - 1)] = -INFINITY;
        memcpy(x_ref, x, n * 4);
        CA_BITWISE_ROW(c, i, n, x, x_ref, c->t->add_bias(x, b, n), c->ref->add_bias(x_ref, b, n),
                       "1024");
        free(x), free(x_ref), free(b);
    }
}

static void check_mask_bool(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4), *x_ref = xalloc(n * 4);
        uint8_t *m = xalloc(n);
        random_row(c, x, n, -50.0f, 50.0f);
        for (size_t j = 0; j < n; j++)
            m[j] = (uint8_t)(next(c) % 3 ? 1 + next(c) % 255 : 0); /* any nonzero byte keeps */
        memcpy(x_ref, x, n * 4);
        CA_BITWISE_ROW(c, i, n, x, x_ref, c->t->mask_bool(x, m, n),
                       c->ref->mask_bool(x_ref, m, n), "1024");
        free(x), free(x_ref), free(m);
    }
}

static void check_softcap(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4), *x_ref = xalloc(n * 4), *x0 = xalloc(n * 4);
        random_row(c, x0, n, -150.0f, 150.0f);
        memcpy(x, x0, n * 4);
        memcpy(x_ref, x0, n * 4);
        const float cap = uniform(c, 1.0f, 50.0f);
        c->t->softcap(x, n, cap);
        c->ref->softcap(x_ref, n, cap);
        for (size_t j = 0; j < n; j++) {
            const double b = TOL_PAIR(tol_softcap(cap, x0[j], tanh((double)x0[j] / cap)));
            if (!near(x[j], x_ref[j], b))
                fail(c, "n=%zu cap=%g: x[%zu] = %.9g, scalar %.9g, bound %.3g", n, (double)cap, j,
                     (double)x[j], (double)x_ref[j], b);
        }
        if (i == 0)
            CA_BENCH(c, "1024", 0, c->t->softcap(x, n, cap), c->ref->softcap(x_ref, n, cap));
        free(x), free(x_ref), free(x0);
    }
}

static void check_softmax_bwd(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *p = xalloc(n * 4), *dp = xalloc(n * 4), *ds = xalloc(n * 4), *ds_ref = xalloc(n * 4);
        double total = 0.0;
        for (size_t j = 0; j < n; j++)
            total += p[j] = next(c) % 6 ? uniform(c, 0.0f, 1.0f) : 0.0f;
        for (size_t j = 0; j < n && total > 0.0; j++)
            p[j] = (float)(p[j] / total);
        random_row(c, dp, n, -10.0f, 10.0f);
        c->t->softmax_bwd(p, dp, ds, n);
        c->ref->softmax_bwd(p, dp, ds_ref, n);
        double *want = xalloc(n * sizeof(double)), *b = xalloc(n * sizeof(double));
        ref_softmax_bwd_row(p, dp, n, want, b); /* the bound of tolerance.h, softmax_bwd */
        for (size_t j = 0; j < n; j++)
            if (!near(ds[j], ds_ref[j], TOL_PAIR(b[j])))
                fail(c, "n=%zu: ds[%zu] = %.9g, scalar %.9g, bound %.3g", n, j, (double)ds[j],
                     (double)ds_ref[j], TOL_PAIR(b[j]));
        free(want), free(b);
        if (i == 0)
            CA_BENCH(c, "1024", 0, c->t->softmax_bwd(p, dp, ds, n),
                     c->ref->softmax_bwd(p, dp, ds_ref, n));
        free(p), free(dp), free(ds), free(ds_ref);
    }
}

static void check_alibi(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *x = xalloc(n * 4), *x_ref = xalloc(n * 4), *x0 = xalloc(n * 4);
        random_row(c, x0, n, -20.0f, 20.0f);
        memcpy(x, x0, n * 4);
        memcpy(x_ref, x0, n * 4);
        const float slope = uniform(c, 0.0f, 1.0f) * (float)pow(2.0, -(double)pick(c, 0, 8));
        /* |pos - j| < 2^31 (the slot's contract), positions before, inside
           and past the row */
        const int64_t pos = (int64_t)pick(c, 0, 2 * n + 4000) - 2000 - (int64_t)(i % 7 == 3) * 100000;
        c->t->alibi(x, n, slope, pos);
        c->ref->alibi(x_ref, n, slope, pos);
        for (size_t j = 0; j < n; j++) {
            const double a = (double)slope * fabs((double)(pos - (int64_t)j));
            const double y = (double)x0[j] - a;
            const double b = TOL_PAIR(TOL_ALIBI_A * TOL_U * a + TOL_U * fabs(y)); /* "alibi" */
            if (!near(x[j], x_ref[j], b))
                fail(c, "n=%zu pos=%lld: x[%zu] = %.9g, scalar %.9g, bound %.3g", n,
                     (long long)pos, j, (double)x[j], (double)x_ref[j], b);
        }
        if (i == 0)
            CA_BENCH(c, "1024", 0, c->t->alibi(x, n, slope, pos), c->ref->alibi(x_ref, n, slope, pos));
        free(x), free(x_ref), free(x0);
    }
}

static void check_wsum(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = i == 0 ? 128 : row_len(c, i);
        const size_t parts = i == 0 ? 8 : pick(c, 1, ATTN_WSUM_MAX_PARTS);
        float *y = xalloc(n * 4), *y_ref = xalloc(n * 4), *xs = xalloc(parts * n * 4);
        float w[ATTN_WSUM_MAX_PARTS];
        const float *xp[ATTN_WSUM_MAX_PARTS];
        random_row(c, y, n, -3.0f, 3.0f);
        memcpy(y_ref, y, n * 4);
        random_row(c, xs, parts * n, -3.0f, 3.0f);
        for (size_t k = 0; k < parts; k++) {
            w[k] = uniform(c, 0.0f, 1.0f);
            xp[k] = xs + k * n;
        }
        float *y0 = xalloc(n * 4);
        memcpy(y0, y, n * 4);
        c->t->wsum(y, xp, w, parts, n);
        c->ref->wsum(y_ref, xp, w, parts, n);
        for (size_t j = 0; j < n; j++) {
            double mag = fabs((double)y0[j]);
            for (size_t k = 0; k < parts; k++)
                mag += fabs((double)w[k] * xp[k][j]);
            const double b = TOL_PAIR(tol_wsum((double)parts, mag));
            if (!near(y[j], y_ref[j], b))
                fail(c, "n=%zu parts=%zu: y[%zu] = %.9g, scalar %.9g, bound %.3g", n, parts, j,
                     (double)y[j], (double)y_ref[j], b);
        }
        if (i == 0)
            CA_BENCH(c, "8 parts x 128", 0, c->t->wsum(y, xp, w, parts, n),
                     c->ref->wsum(y_ref, xp, w, parts, n));
        free(y), free(y_ref), free(y0), free(xs);
    }
}

/* pt_tile, or (bf16) pt_bf16 against its oracle with check_pv_mode's bf16
   bound, or within the f32 bound of the exact sums (a kernel that takes the
   exact path for a small tile); and, for the driver's calls (nq <=
   ATTN_MAX_BLOCK_Q), the order src/dsp.h gives every kernel: each element
   is acc0 plus, in one f32 addition, what the call gives on a zero
   accumulator, bit for bit (the blocked sum of dK and dV, tolerance.h). */
static void check_pt_mode(checkasm *c, int mode, attn_pt_tile_fn *kernel, attn_pt_tile_fn *oracle)
{
    if (!kernel)
        return; /* a dot slot this table has no kernel for (src/kernel_list.h) */
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const tile_shape sh = tile_shape_of(c, i, ATTN_KV_F32);
        const size_t nq = sh.nq, nk = sh.nk, dim = sh.d;
        const size_t ps = nk + pick(c, 0, 3), xs = dim + pick(c, 0, 3), as = dim + pick(c, 0, 3);
        float *p = xalloc(nq * ps * 4), *x = xalloc(nq * xs * 4);
        float *acc = xalloc(nk * as * 4), *acc_ref = xalloc(nk * as * 4), *acc0 = xalloc(nk * as * 4);
        float *acc_exact = xalloc(nk * as * 4), *acc_zero = xalloc(nk * as * 4);
        random_row(c, p, nq * ps, -1.0f, 1.0f);
        random_row(c, x, nq * xs, -3.0f, 3.0f);
        random_row(c, acc0, nk * as, -2.0f, 2.0f);
        memcpy(acc, acc0, nk * as * 4);
        memcpy(acc_ref, acc0, nk * as * 4);
        memcpy(acc_exact, acc0, nk * as * 4);
        kernel(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc, (ptrdiff_t)as);
        oracle(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_ref, (ptrdiff_t)as);
        if (mode == CA_BF16)
            c->ref->pt_tile(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_exact,
                            (ptrdiff_t)as);
        memset(acc_zero, 0, nk * as * 4);
        kernel(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_zero, (ptrdiff_t)as);
        for (size_t col = 0; col < nk && nq <= ATTN_MAX_BLOCK_Q; col++)
            for (size_t t = 0; t < dim; t++) {
                const float a0 = acc0[col * as + t], want = a0 + acc_zero[col * as + t];
                if (a0 != 0.0f && !same_bits(acc[col * as + t], want))
                    fail(c, "nq=%zu nk=%zu dim=%zu: acc[%zu][%zu] = %.9g, not acc0 %.9g + the "
                            "sum from zero %.9g = %.9g",
                         nq, nk, dim, col, t, (double)acc[col * as + t], (double)a0,
                         (double)acc_zero[col * as + t], (double)want);
            }
        for (size_t col = 0; col < nk; col++)
            for (size_t t = 0; t < as; t++) {
                if (t >= dim) {
                    if (!same_bits(acc[col * as + t], acc0[col * as + t]))
                        fail(c, "nq=%zu nk=%zu dim=%zu: wrote into the row gap at [%zu][%zu]", nq,
                             nk, dim, col, t);
                    continue;
                }
                double b;
                const float got = acc[col * as + t];
                if (!pv_sum_ok(mode, got, acc_ref[col * as + t], acc_exact[col * as + t],
                               acc0[col * as + t], p + col, (ptrdiff_t)ps, x + t, (ptrdiff_t)xs,
                               nq, &b))
                    fail(c, "nq=%zu nk=%zu dim=%zu: acc[%zu][%zu] = %.9g, scalar %.9g, bound %.3g",
                         nq, nk, dim, col, t, (double)got, (double)acc_ref[col * as + t], b);
            }
        if (i < CA_BENCH_SHAPES)
            CA_BENCH(c, tile_bench_names[i], 2.0 * nq * nk * dim,
                     kernel(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc, (ptrdiff_t)as),
                     oracle(p, (ptrdiff_t)ps, x, (ptrdiff_t)xs, nq, nk, dim, acc_ref,
                            (ptrdiff_t)as));
        free(p), free(x), free(acc), free(acc_ref), free(acc0), free(acc_exact), free(acc_zero);
    }
}

static void check_pt_tile(checkasm *c)
{
    check_pt_mode(c, CA_EXACT, c->t->pt_tile, c->ref->pt_tile);
}

static void check_pt_bf16(checkasm *c)
{
    check_pt_mode(c, CA_BF16, c->t->pt_bf16, c->ref->pt_bf16);
}

/* Bitwise: one subtraction and one multiply in every table
   (tests/test_backward_kernels.c). */
static void check_score_grad(checkasm *c)
{
    for (int i = 0; i < CA_ROWS; i++) {
        const size_t n = row_len(c, i);
        float *p = xalloc(n * 4), *dp = xalloc(n * 4), *dp_ref = xalloc(n * 4);
        for (size_t j = 0; j < n; j++) /* masked keys: 0 */
            p[j] = next(c) % 8 ? uniform(c, 0.0f, 1.0f) : 0.0f;
        random_row(c, dp, n, -50.0f, 50.0f);
        memcpy(dp_ref, dp, n * 4);
        const float d = uniform(c, -20.0f, 20.0f);
        CA_BITWISE_ROW(c, i, n, dp, dp_ref, c->t->score_grad(p, dp, d, n),
                       c->ref->score_grad(p, dp_ref, d, n), "1024");
        free(p), free(dp), free(dp_ref);
    }
}

/* ------------------------------------------------------------ walking the list */

/* One row (slot, dtype) of the table under test. */
static void run_row(checkasm *c, const char *slot, const char *dt_name, int dt,
                    void (*check)(checkasm *))
{
    if (c->only_slot && strcmp(c->only_slot, slot) != 0)
        return;
    if (strcmp(dt_name, dtype_name(dt)) != 0) {
        c->slot = slot, c->dt_name = dt_name;
        fail(c, "the row's dtype token names ATTN_KV index %d, which src/dtype_list.h calls %s",
             dt, dtype_name(dt));
        return;
    }
    for (int i = 0; i < c->n_done; i++)
        if (c->done_dt[i] == dt && !strcmp(c->done_slot[i], slot))
            return;
    if (c->n_done < (int)(sizeof c->done_dt / sizeof c->done_dt[0])) {
        c->done_slot[c->n_done] = slot;
        c->done_dt[c->n_done++] = dt;
    }
    c->slot = slot;
    c->dt_name = dt_name;
    c->dt = dt;
    c->failed_here = 0;
    c->checked++;
    check(c);
}

/* The table under test from here on. */
static void use_table(checkasm *c, const attn_dsp *t, const char *name, uint64_t rng)
{
    c->t = t;
    c->isa = name;
    c->rng = rng;
    c->n_done = 0;
    c->twin = NULL;
}

/* Every slot of a table holds a kernel (for KV slots, every K/V dtype);
   the dot slots are checked where a table has them (check_dot). */
static void check_complete(checkasm *c, const attn_dsp *t)
{
    c->dt_name = "-";
#define CA_COMPLETE_KV(s_)                                                                  \
    for (int d_ = 0; d_ < ATTN_KV_DTYPES; d_++)                                             \
        if (d_ != ATTN_DTYPE_BOOL && !t->s_[d_]) {                                          \
            c->slot = #s_;                                                                  \
            fail(c, "no kernel for %s", dtype_name(d_));                                    \
        }
#define CA_COMPLETE_ONE(s_)                                                                 \
    if (!t->s_) {                                                                           \
        c->slot = #s_;                                                                      \
        fail(c, "no kernel");                                                               \
    }
#define CA_COMPLETE(s_, dt, kind, a) CA_COMPLETE_##kind(s_)
    ATTN_SLOT_LIST_FILLED(CA_COMPLETE, _)
#undef CA_COMPLETE
#undef CA_COMPLETE_ONE
#undef CA_COMPLETE_KV
}

/* Whether row `name` is asked for: --isa names it, or without --isa the
   harness's ATTN_TEST_ROWS list allows it (tests/test_rows.h). */
static int wanted(const checkasm *c, const char *name)
{
    return c->only_isa ? !strcmp(c->only_isa, name) : attn_test_row_wanted(name);
}

/* The table of an ISA row to test, or NULL (not built, not this CPU, or
   not asked for). */
static const attn_dsp *begin_isa(checkasm *c, attn_isa isa, const char *name)
{
    if (!wanted(c, name))
        return NULL;
    const attn_dsp *t = attn_dsp_for_isa(isa);
    if (!t) {
        printf("%-8s skipped: %s\n", name, attn_isa_built(isa) ? "this CPU lacks it" : "not built");
        return NULL;
    }
    use_table(c, t, name, c->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(isa + 1)));
    check_complete(c, t);
    return t;
}

#define CA_ROW(s_, dt, kind, c) run_row(c, #s_, #dt, ATTN_KV_IDX(dt), check_##s_);
#define CA_FILE(file, need, c) ATTN_FILE_##file(CA_ROW, c)

/*
 * A file that needs CPU bits beyond its ISA's, alone: the ISA's table as
 * dispatch builds it for a CPU with only the ISA's bit and the file's
 * (its base table, then the registry's init), so that no file listed
 * after it stores over its kernels. Where this CPU's own table holds
 * another file's kernel in one of its slots (AVX-VNNI's dot_i8 over
 * dot_i8_evex on Zen 5 or Sapphire Rapids), the row "<isa>+<file>" checks
 * the file's kernels on that table, which would otherwise go unchecked
 * here; where the table holds them, its row has. A slot still holding the
 * base table's kernel (or none) means the file's init did not run with the
 * bits the list names: a failure. The int8 kernels of one ISA (dot_i8 and
 * its builds on other instructions, src/kernel_list.h) must also give the
 * own table's bits (check_qk_mode's twin).
 */
typedef struct isa_row {
    attn_isa id, base;
    unsigned cpu;
    void (*init)(attn_dsp *);
    const char *name;
} isa_row;

static const attn_dsp *alone_table(const isa_row *isa, unsigned need)
{
    static attn_dsp t;
    const attn_dsp *base = attn_dsp_for_isa(isa->base);
    if (!base || !isa->init)
        return NULL;
    t = *base;
    t.cpu = isa->cpu | need;
    isa->init(&t);
    return &t;
}

/* "<isa>+<file>", the row's name while it runs. */
static const char *alone_name(const isa_row *isa, const char *file)
{
    static char name[64];
    snprintf(name, sizeof name, "%s+%s", isa->name, file);
    return name;
}

#define CA_SHADOWED(s_, dt, kind, t) shadowed |= ATTN_SLOT(t, s_, dt, kind) != ATTN_SLOT(own, s_, dt, kind);
#define CA_MISSING(s_, dt, kind, t) missing |= ATTN_SLOT(t, s_, dt, kind) == ATTN_SLOT(base_, s_, dt, kind);
#define CA_ALONE(file, need, isa)                                                           \
    if ((need) != 0 && (attn_cpu_detect() & (unsigned)(need)) == (unsigned)(need)) {        \
        const attn_dsp *own = attn_dsp_for_isa((isa)->id), *t_ = alone_table(isa, need);    \
        const attn_dsp *base_ = attn_dsp_for_isa((isa)->base);                              \
        const char *row_ = alone_name(isa, #file);                                          \
        int shadowed = 0, missing = 0;                                                      \
        if (own && t_) {                                                                    \
            ATTN_FILE_##file(CA_SHADOWED, t_) ATTN_FILE_##file(CA_MISSING, t_)              \
        }                                                                                   \
        if ((shadowed || missing) && wanted(c, row_)) {                                     \
            use_table(c, t_, row_, c->seed ^ 0x7f4a7c159e3779b9ull ^ (uint64_t)(need));     \
            c->twin = own;                                                                  \
            const long before_ = c->failures;                                                \
            if (missing) {                                                                  \
                c->slot = #file, c->dt_name = "-";                                          \
                fail(c, "the table built with the bits the list names lacks the file's kernels"); \
            } else {                                                                        \
                ATTN_FILE_##file(CA_ROW, c)                                                 \
            }                                                                               \
            if (!c->bench)                                                                  \
                printf("%-8s %s\n", row_, c->failures == before_ ? "ok" : "FAILED");         \
        }                                                                                   \
    }

#define CA_ISA(ID, name, cpu, init, base, have)                                             \
    if (begin_isa(c, ATTN_ISA_##ID, #name)) {                                               \
        const long before = c->failures;                                                    \
        ATTN_KERNELS_##name(CA_FILE, c)                                                     \
        if (!c->bench)                                                                      \
            printf("%-8s %s\n", #name, c->failures == before ? "ok" : "FAILED");           \
        const isa_row isa_ = {ATTN_ISA_##ID, ATTN_ISA_##base, cpu, ATTN_IF_SET(have, init), \
                              #name};                                                       \
        ATTN_KERNELS_##name(CA_ALONE, &isa_)                                                \
    }

static void walk(checkasm *c)
{
    ATTN_ISA_LIST(CA_ISA)
#ifdef ATTN_TEST_AVX512_EMU
    /* The kernels built against SIMDe (tests/emu_tables.h), each row over
       its ISA's kernel list as the real table is. */
#define CA_EMU(row, name, table)                                                            \
    if (wanted(c, row)) {                                                                   \
        const attn_dsp *t_ = table();                                                       \
        if (t_) {                                                                           \
            use_table(c, t_, row, c->seed ^ 0x5bd1e995ull ^ (uint64_t)t_->isa);              \
            check_complete(c, t_);                                                          \
            const long before = c->failures;                                                \
            ATTN_KERNELS_##name(CA_FILE, c)                                                 \
            if (!c->bench)                                                                  \
                printf("%-8s %s\n", row, c->failures == before ? "ok" : "FAILED");          \
        }                                                                                   \
    }
    CA_EMU("avx512-emu", avx512, emu_table_avx512)
    CA_EMU("avx2-emu", avx2, emu_table_avx2)
#undef CA_EMU
#endif
}

int main(int argc, char **argv)
{
    checkasm c = {0};
    const char *env = getenv("ATTN_TEST_SEED");
    c.seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bench"))
            c.bench = 1;
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc)
            c.only_isa = argv[++i];
        else if (!strcmp(argv[i], "--slot") && i + 1 < argc)
            c.only_slot = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            c.seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: checkasm [--bench] [--isa NAME] [--slot NAME] [--seed N]\n");
            return 2;
        }
    }
    if (c.seed == 0)
        c.seed = 1; /* xorshift's one fixed point */
    c.ref = attn_dsp_for_isa(ATTN_ISA_SCALAR);
    printf("checkasm: seed %llu%s\n", (unsigned long long)c.seed,
           c.bench ? " (timings: best of 7, one thread, ns per call)" : "");
    walk(&c);
    printf("checkasm: %ld kernels checked, %ld failures\n", c.checked, c.failures);
    return c.failures ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The checkasm-like core of the kernel tests: ISA rows, a seeded RNG,
 * guarded buffers and comparisons that report the seed on failure.
 *
 * ISA rows. Tests parameterized over ISA rows receive an `isa_row *` (plain
 * data: an index), and resolve the kernel table inside the test with
 * harness_begin(). There is one row per ISA of the registry
 * (src/isa_list.h) that this build compiled; harness_begin() skips
 * (cr_skip) a row whose ISA this CPU lacks.
 * Compiled with -DATTN_TEST_AVX512_EMU there are three more rows, the
 * kernels built against SIMDe (tests/emu_tables.h): "avx512-emu", the
 * AVX-512 module on top of scalar and AVX2; "avx2-emu", the AVX2 table with
 * its AVX-VNNI file (skipped where the CPU has AVX-VNNI: the avx2 row tests
 * it); and "amx-emu", avx512-emu with the AMX file on src/x86/amx_emu.h
 * (ATTN_TEST_ROWS=amx).
 *
 * Seeds. Every test draws from one xorshift generator seeded from
 * ATTN_TEST_SEED when set (decimal or 0x-hex), else from the clock and pid.
 * Every failure message carries the seed; rerun with ATTN_TEST_SEED=<seed>
 * to replay (set ATTN_CHECK_VERBOSE=1 to print it on success too).
 */
#ifndef ATTN_TEST_HARNESS_H
#define ATTN_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>

/* The Criterion timeout of every test that needs more than the default.
   One value for all: Criterion 2.4's runner leaks 48 bytes when one binary
   mixes timeouts, and LeakSanitizer then fails the whole ASan run. */
#define ATTN_TEST_TIMEOUT 300

#include "attn.h"
#include "dsp.h"
#include "internal.h"

/* ------------------------------------------------------------ ISA rows */

typedef struct isa_row {
    int index; /* into the harness's row table */
} isa_row;

/* The rows of every ISA of the registry (src/isa_list.h) this build
   compiled, plus the extra rows of this binary; returns their count. */
size_t harness_isa_rows(isa_row **rows);

/* Parameter generator body for a test over every ISA row. */
#define HARNESS_ISA_PARAMS(suite, name)                                                    \
    ParameterizedTestParameters(suite, name)                                               \
    {                                                                                      \
        isa_row *rows;                                                                     \
        size_t n = harness_isa_rows(&rows);                                                \
        return cr_make_param_array(isa_row, rows, n);                                      \
    }

const char *harness_row_name(const isa_row *row);
/* The row's table, or NULL when the build or the CPU lacks it. */
const attn_dsp *harness_row_table(const isa_row *row);
/* Starts a parameterized test: seeds the RNG, names the row in failure
 * messages, returns the row's table or skips the test (cr_skip). */
const attn_dsp *harness_begin(const isa_row *row);
/* The scalar table (the oracle). */
const attn_dsp *harness_scalar(void);
/* Starts a test that is not parameterized (seed, context). */
void harness_begin_plain(const char *name);
/* Nonzero when the row under test is the scalar row (compared with float64). */
int harness_is_scalar(const attn_dsp *t);

/* ------------------------------------------------------------ context and failure */

/* What is being checked, printed in failure messages (printf format). */
void harness_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A parallel_for that runs the tasks last to first (attn.h, "Determinism":
   the same bits in any order); ctx unused. */
void harness_reverse_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count);
/* Fails the test with the seed, row and context prepended. */
void harness_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define CHECK(cond, ...)                                     \
    do {                                                     \
        if (!(cond))                                         \
            harness_fail(__FILE__, __LINE__, __VA_ARGS__);   \
    } while (0)

uint64_t harness_seed(void);

/* ------------------------------------------------------------ random numbers */

typedef struct rng {
    uint64_t state;
} rng;

/* The test's generator (seeded by harness_begin*). */
rng *harness_rng(void);
uint64_t rng_next(rng *r);
/* Uniform in [lo, hi]. */
int64_t rng_int(rng *r, int64_t lo, int64_t hi);
/* Uniform float in [lo, hi). */
float rng_float(rng *r, float lo, float hi);
void rng_fill(rng *r, float *x, size_t n, float lo, float hi);
/* Element of an int64 list. */
int64_t rng_pick(rng *r, const int64_t *list, size_t n);

/* ------------------------------------------------------------ guarded buffers */

/*
 * 64-byte aligned data, plus `offset` bytes (tests use one element to get
 * unaligned data), between two canary zones filled with a NaN bit pattern.
 * buf_check() fails the test when a canary changed (an out-of-bounds write).
 */
typedef struct buf {
    unsigned char *base;
    size_t total;
    unsigned char *data;
    size_t bytes;
} buf;

#define BUF_GUARD_BYTES 256
/* The canary word: a signalling NaN, never produced by arithmetic. */
#define BUF_CANARY 0x7fa5dea5u

void *buf_alloc(buf *b, size_t bytes, size_t offset);
void buf_check(const buf *b, const char *what);
void buf_free(buf *b);

/*
 * Inputs that end exactly at an inaccessible (PROT_NONE) page, so that a
 * kernel reading past the end crashes (a failed test case, thanks to
 * Criterion's one process per test). With at_start, the data starts right
 * after an inaccessible page instead (reads before the start crash).
 */
typedef struct fence_buf {
    unsigned char *map;
    size_t map_bytes;
    void *data;
} fence_buf;

void *fence_alloc(fence_buf *f, size_t bytes, int at_start);
void fence_free(fence_buf *f);

/* ------------------------------------------------------------ comparisons */

/*
 * got[i] vs want[i] within bound[i] (tolerance.h). NaN must match NaN, an
 * infinity must match exactly, and got must be NaN-free where want is
 * finite; a bound of +inf accepts anything (unspecified elements). On the
 * first mismatch the test fails with the element's row and
 * column (cols: elements per row, for the message) and the count of
 * mismatches. got has a stride (elements) between rows of `cols`.
 */
void expect_near(const char *what, const float *got, ptrdiff_t got_stride, const double *want,
                 const double *bound, size_t rows, size_t cols);
/* The same against an f32 result (another ISA): want f32, bound in double. */
void expect_near_f(const char *what, const float *got, ptrdiff_t got_stride, const float *want,
                   ptrdiff_t want_stride, const double *bound, size_t rows, size_t cols);
/*
 * got vs float64 want within err ("<what> vs float64"), and, when scalar is
 * not NULL (a SIMD row), vs the scalar row's result within TOL_PAIR of err
 * ("<what> vs scalar"). got and scalar have a stride of cols between rows.
 */
void expect_near_and_scalar(const char *what, const float *got, const float *scalar,
                            const double *want, const double *err, size_t rows, size_t cols);
/* Bitwise equality of f32 arrays (NaN payloads included). */
void expect_bits(const char *what, const float *got, const float *want, size_t n);
/* Bitwise equality of bytes. */
void expect_bytes(const char *what, const void *got, const void *want, size_t n);

/*
 * 16-bit outputs (attn_forward's and attn_merge's out in F16 or BF16; the
 * bounds are tolerance.h's "16-bit outputs"). expect_rounded16: got (dtype
 * F16 or BF16, rows x cols, got_stride elements between rows) is want (f32)
 * rounded to nearest even, bit for bit, by tests/ref/ref.c's own encoders; a
 * NaN must be a NaN of the same sign (payloads are not specified).
 * decode16: n such values, exactly, as floats.
 */
void expect_rounded16(const char *what, const void *got, ptrdiff_t got_stride, int32_t dtype,
                      const float *want, ptrdiff_t want_stride, size_t rows, size_t cols);
void decode16(const void *src, int32_t dtype, float *dst, size_t n);
/* A signalling NaN of the dtype (F16 0x7d5a, BF16 0x7fa5): no encoder makes
   one, so an element that still holds it was not written. */
uint16_t canary16(int32_t dtype);

/* Plain heap arrays that abort on failure. */
void *xmalloc(size_t bytes);
void *xcalloc0(size_t n, size_t size);

#endif /* ATTN_TEST_HARNESS_H */

/* SPDX-License-Identifier: MIT */
/* The checkasm-like core of the kernel tests (see harness.h). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "test_rows.h"
#include "ref/ref.h"
#include "tolerance.h"
#include "emu_tables.h"

/* ------------------------------------------------------------ ISA rows */

typedef struct row_desc {
    const char *name;
    attn_isa isa; /* ATTN_ISA_AUTO for an emulated row */
    const attn_dsp *(*emu)(void); /* its table (tests/emu_tables.h) */
} row_desc;

/* One row per registry ISA, then the extra rows of this test binary. */
static const row_desc row_descs[] = {
#define ROW_DESC(ID, nm, cpu, init, base, have) {#nm, ATTN_ISA_##ID, NULL},
    ATTN_ISA_LIST(ROW_DESC)
#undef ROW_DESC
#ifdef ATTN_TEST_AVX512_EMU
    {"avx512-emu", ATTN_ISA_AUTO, emu_table_avx512},
    {"avx2-emu", ATTN_ISA_AUTO, emu_table_avx2},
    {"amx-emu", ATTN_ISA_AUTO, emu_table_amx},
#endif
};

#define ROW_COUNT (sizeof row_descs / sizeof row_descs[0])

static isa_row rows_built[ROW_COUNT];

/* The rows whose kernels this build compiled (a row the CPU lacks is then
   skipped by harness_begin; ISAs of another architecture are not rows). */
size_t harness_isa_rows(isa_row **rows)
{
    size_t n = 0;
    for (size_t i = 0; i < ROW_COUNT; i++)
        if (row_descs[i].isa == ATTN_ISA_AUTO || attn_isa_built(row_descs[i].isa))
            rows_built[n++].index = (int)i;
    *rows = rows_built;
    return n;
}

static const char *current_row = "-";
static const attn_dsp *current_table;
static char context[512];
static uint64_t seed;
static rng test_rng;

const char *harness_row_name(const isa_row *row)
{
    return row_descs[row->index].name;
}

const attn_dsp *harness_row_table(const isa_row *row)
{
    const row_desc *d = &row_descs[row->index];
#ifdef ATTN_TEST_AVX512_EMU
    /* NULL (skipped, like an ISA the CPU lacks) without AVX2+FMA+F16C */
    if (d->isa == ATTN_ISA_AUTO)
        return d->emu();
#endif
    return attn_dsp_for_isa(d->isa);
}

const attn_dsp *harness_scalar(void)
{
    const attn_dsp *t = attn_dsp_for_isa(ATTN_ISA_SCALAR);
    cr_assert(t != NULL, "attn_dsp_for_isa(ATTN_ISA_SCALAR) returned NULL");
    return t;
}

int harness_is_scalar(const attn_dsp *t)
{
    return t == harness_scalar();
}

uint64_t harness_seed(void)
{
    return seed;
}

static void seed_from_env(void)
{
    const char *env = getenv("ATTN_TEST_SEED");
    if (env && *env) {
        seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    }
    /* xorshift state must be nonzero; mix so nearby seeds diverge */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    test_rng.state = (z ^ (z >> 31)) | 1u;
    if (getenv("ATTN_CHECK_VERBOSE"))
        cr_log_info("row %s seed %llu", current_row, (unsigned long long)seed);
}

const attn_dsp *harness_begin(const isa_row *row)
{
    current_row = harness_row_name(row);
    context[0] = 0;
    seed_from_env();
    if (!attn_test_row_wanted(current_row))
        cr_skip("%s: not in ATTN_TEST_ROWS", current_row);
    current_table = harness_row_table(row);
    if (!current_table)
        cr_skip("%s kernels are not built or this CPU lacks them", current_row);
    return current_table;
}

void harness_begin_plain(const char *name)
{
    current_row = name;
    context[0] = 0;
    seed_from_env();
}

void harness_context(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
}

void harness_reverse_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    (void)ctx;
    for (size_t i = count; i-- > 0;)
        task(task_ctx, i);
}

void harness_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cr_assert_fail("%s:%d [%s] %s: %s (replay: ATTN_TEST_SEED=%llu)", file, line, current_row,
                   context, msg, (unsigned long long)seed);
    abort(); /* not reached: cr_assert_fail ends the test */
}

/* ------------------------------------------------------------ random numbers */

rng *harness_rng(void)
{
    return &test_rng;
}

uint64_t rng_next(rng *r)
{
    /* xorshift64* (Vigna) */
    uint64_t x = r->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->state = x;
    return x * 0x2545f4914f6cdd1dull;
}

int64_t rng_int(rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    return lo + (int64_t)(rng_next(r) % span);
}

float rng_float(rng *r, float lo, float hi)
{
    double unit = (double)(rng_next(r) >> 11) * 0x1.0p-53; /* [0, 1) */
    float v = (float)(lo + (hi - (double)lo) * unit);
    return v < hi ? v : lo;
}

void rng_fill(rng *r, float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rng_float(r, lo, hi);
}

int64_t rng_pick(rng *r, const int64_t *list, size_t n)
{
    return list[rng_int(r, 0, (int64_t)n - 1)];
}

/* ------------------------------------------------------------ buffers */

void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    cr_assert(p != NULL, "out of memory (%zu bytes)", bytes);
    return p;
}

void *xcalloc0(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    cr_assert(p != NULL, "out of memory");
    return p;
}

static void fill_canary(unsigned char *p, size_t n)
{
    const uint32_t word = BUF_CANARY;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(word >> (8 * (i % 4)));
}

/* The pattern's phase is `phase` bytes from the start of the fill, so a
   zone that starts at an offset not a multiple of 4 (odd-sized buffers)
   is compared with what fill_canary wrote there. */
static size_t canary_mismatch(const unsigned char *p, size_t n, size_t phase)
{
    const uint32_t word = BUF_CANARY;
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(word >> (8 * ((phase + i) % 4))))
            return i;
    return n;
}

void *buf_alloc(buf *b, size_t bytes, size_t offset)
{
    /* [guard][data: 64-aligned + offset, bytes][guard] */
    b->total = BUF_GUARD_BYTES + offset + bytes + BUF_GUARD_BYTES;
    b->base = aligned_alloc(64, (b->total + 63) & ~(size_t)63);
    cr_assert(b->base != NULL, "out of memory");
    b->data = b->base + BUF_GUARD_BYTES + offset;
    b->bytes = bytes;
    fill_canary(b->base, b->total);
    return b->data;
}

void buf_check(const buf *b, const char *what)
{
    const size_t before = (size_t)(b->data - b->base);
    size_t at = canary_mismatch(b->base, before, 0);
    CHECK(at == before, "%s: write %zu bytes before the start of the buffer", what, before - at);
    const unsigned char *tail = b->data + b->bytes;
    const size_t after = b->total - before - b->bytes;
    at = canary_mismatch(tail, after, before + b->bytes);
    CHECK(at == after, "%s: write %zu bytes past the end of the buffer (byte %zu of %zu)", what,
          at + 1, b->bytes + at, b->bytes);
}

void buf_free(buf *b)
{
    free(b->base);
    b->base = b->data = NULL;
}

void *fence_alloc(fence_buf *f, size_t bytes, int at_start)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t data_pages = (bytes + page - 1) / page;
    f->map_bytes = (data_pages + 2) * page;
    f->map = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(f->map != MAP_FAILED, "mmap failed");
    cr_assert(mprotect(f->map, page, PROT_NONE) == 0, "mprotect failed");
    cr_assert(mprotect(f->map + (data_pages + 1) * page, page, PROT_NONE) == 0,
              "mprotect failed");
    unsigned char *first = f->map + page, *end = f->map + (data_pages + 1) * page;
    f->data = at_start ? (void *)first : (void *)(end - bytes);
    return f->data;
}

void fence_free(fence_buf *f)
{
    munmap(f->map, f->map_bytes);
    f->map = NULL;
}

/* ------------------------------------------------------------ comparisons */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* 0 when got matches want within bound (NaN with NaN, inf exactly). */
static int mismatch(double got, double want, double bound)
{
    if (bound == INFINITY) /* "anything": e.g. masked entries of a NaN row */
        return 0;
    if (isnan(want))
        return !isnan(got);
    if (isnan(got))
        return 1;
    if (isinf(want) || isinf(got))
        return got != want;
    return !(fabs(got - want) <= bound);
}

/* ATTN_CHECK_VERBOSE: how much of its bound a comparison used (the worst
 * |diff| / bound), to see how tight each tolerance is. */
static void log_tightness(const char *what, double worst)
{
    if (getenv("ATTN_CHECK_VERBOSE"))
        cr_log_info("[%s] %s: worst |diff|/bound %.3g", current_row, what, worst);
}

static double ratio(double got, double want, double bound)
{
    if (!isfinite(got) || !isfinite(want) || !isfinite(bound))
        return 0.0;
    return bound > 0.0 ? fabs(got - want) / bound : 0.0;
}

void expect_near(const char *what, const float *got, ptrdiff_t got_stride, const double *want,
                 const double *bound, size_t rows, size_t cols)
{
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const size_t i = r * cols + c;
            const float g = got[(ptrdiff_t)r * got_stride + (ptrdiff_t)c];
            if (mismatch(g, want[i], bound[i]) && bad++ == 0)
                first = i;
            const double q = ratio(g, want[i], bound[i]);
            worst = q > worst ? q : worst;
        }
    log_tightness(what, worst);
    if (bad) {
        const size_t r = first / cols, c = first % cols;
        const double g = got[(ptrdiff_t)r * got_stride + (ptrdiff_t)c];
        CHECK(0, "%s: %zu of %zu elements off; first at [%zu][%zu]: got %.9g, float64 %.9g, "
                 "|diff| %.3g > bound %.3g",
              what, bad, rows * cols, r, c, g, want[first], fabs(g - want[first]), bound[first]);
    }
}

void expect_near_f(const char *what, const float *got, ptrdiff_t got_stride, const float *want,
                   ptrdiff_t want_stride, const double *bound, size_t rows, size_t cols)
{
    size_t bad = 0, first = 0;
    double worst = 0.0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const size_t i = r * cols + c;
            const float g = got[(ptrdiff_t)r * got_stride + (ptrdiff_t)c];
            const float w = want[(ptrdiff_t)r * want_stride + (ptrdiff_t)c];
            if (mismatch(g, w, bound[i]) && bad++ == 0)
                first = i;
            const double q = ratio(g, w, bound[i]);
            worst = q > worst ? q : worst;
        }
    log_tightness(what, worst);
    if (bad) {
        const size_t r = first / cols, c = first % cols;
        const double g = got[(ptrdiff_t)r * got_stride + (ptrdiff_t)c];
        const double w = want[(ptrdiff_t)r * want_stride + (ptrdiff_t)c];
        CHECK(0, "%s: %zu of %zu elements off; first at [%zu][%zu]: got %.9g, scalar %.9g, "
                 "|diff| %.3g > bound %.3g",
              what, bad, rows * cols, r, c, g, w, fabs(g - w), bound[first]);
    }
}

void expect_near_and_scalar(const char *what, const float *got, const float *scalar,
                            const double *want, const double *err, size_t rows, size_t cols)
{
    char name[128];
    snprintf(name, sizeof name, "%s vs float64", what);
    expect_near(name, got, (ptrdiff_t)cols, want, err, rows, cols);
    if (!scalar)
        return;
    double *pair = xmalloc(rows * cols * sizeof(double));
    for (size_t i = 0; i < rows * cols; i++)
        pair[i] = TOL_PAIR(err[i]);
    snprintf(name, sizeof name, "%s vs scalar", what);
    expect_near_f(name, got, (ptrdiff_t)cols, scalar, (ptrdiff_t)cols, pair, rows, cols);
    free(pair);
}

void expect_bits(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECK(f32_bits(got[i]) == f32_bits(want[i]),
              "%s: element %zu of %zu differs: got %.9g (0x%08x), want %.9g (0x%08x)", what, i, n,
              (double)got[i], f32_bits(got[i]), (double)want[i], f32_bits(want[i]));
}

void expect_rounded16(const char *what, const void *got, ptrdiff_t got_stride, int32_t dtype,
                      const float *want, ptrdiff_t want_stride, size_t rows, size_t cols)
{
    const unsigned char *g = got;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const float x = want[(ptrdiff_t)r * want_stride + (ptrdiff_t)c];
            uint16_t h;
            memcpy(&h, g + 2 * ((ptrdiff_t)r * got_stride + (ptrdiff_t)c), 2);
            const uint16_t rne = dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
            const uint16_t exp_mask = dtype == ATTN_DTYPE_F16 ? 0x7c00u : 0x7f80u;
            const int h_nan = (h & exp_mask) == exp_mask && (h & ~exp_mask & 0x7fffu);
            const int ok = isnan(x) ? h_nan && (h >> 15) == (f32_bits(x) >> 31) : h == rne;
            CHECK(ok, "%s: [%zu][%zu] is 0x%04x, want %s(%.9g = 0x%08x) = 0x%04x%s", what, r, c,
                  h, dtype == ATTN_DTYPE_F16 ? "f16" : "bf16", (double)x, f32_bits(x), rne,
                  isnan(x) ? " (any NaN of that sign)" : "");
        }
}

void decode16(const void *src, int32_t dtype, float *dst, size_t n)
{
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, s + 2 * i, 2);
        dst[i] = (float)(dtype == ATTN_DTYPE_F16 ? ref_f16_to_double(h) : ref_bf16_to_double(h));
    }
}

uint16_t canary16(int32_t dtype)
{
    return dtype == ATTN_DTYPE_F16 ? 0x7d5au : 0x7fa5u;
}

void expect_bytes(const char *what, const void *got, const void *want, size_t n)
{
    const unsigned char *g = got, *w = want;
    for (size_t i = 0; i < n; i++)
        CHECK(g[i] == w[i], "%s: byte %zu of %zu changed: 0x%02x, expected 0x%02x", what, i, n,
              g[i], w[i]);
}

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
 * list gains does not link until it has its check_<slot> (checkasm.h says
 * which family's file holds each). Each check prepares one call of its
 * slot (random inputs for the row's
 * dtype, a shape), runs the oracle and the kernel on copies of the same
 * inputs and compares them within the pair bounds of tests/tolerance.h
 * (their derivations are there); shapes cover the tails of the table's
 * tiles. Bitwise slots (to_f32, row_max, row_scale, add_bias, mask_bool)
 * must match bit for bit, NaN for NaN. The deep sweeps (every tail, NaN
 * propagation, page fences, strides) are tests/kernels/test_kernels.c's
 * and tests/kernels/test_quant.c's; this program makes sure nothing in the list goes
 * unchecked or untimed.
 *
 * Also checked: every slot of every table holds a kernel (for the KV slots,
 * every K/V dtype the list gives the slot: an ASYM dtype has only its
 * file's two), and each row's dtype token names the dtype of that index
 * in src/dtype_list.h.
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

#include "checkasm.h"
#include "emu_tables.h"
#include "test_rows.h"

/* ------------------------------------------------------------ state, inputs */

void *xalloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "checkasm: out of memory\n");
        exit(2);
    }
    return p;
}

void fail(checkasm *c, const char *fmt, ...)
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

/*
 * `units` stride units of K/V values of dtype dt, drawn as bit patterns of
 * finite values of moderate size: F16 and BF16 exponents within 2^+-6,
 * block scales within 2^-8..2^-1 (as attn_quantize makes them for values
 * of magnitude up to about 60), any int8 or nibble, any E4M3 byte but NaN,
 * E5M2 bytes from the subnormals to 2^5 (no infinity or NaN). The switch
 * covers every attn_dtype (-Wswitch made an error): a dtype added to
 * include/attn.h and src/dtype_list.h does not compile here until it has
 * its bit patterns.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
void fill_kv(checkasm *c, unsigned char *x, int dt, size_t units)
{
    const size_t ub = unit_bytes(dt);
    for (size_t u = 0; u < units; u++) {
        unsigned char *e = x + u * ub;
        for (size_t b = 0; b < ub; b++)
            e[b] = (unsigned char)next(c);
        uint16_t h;
        switch ((attn_dtype)dt) {
        case ATTN_DTYPE_F32: {
            const float v = uniform(c, -4.0f, 4.0f);
            memcpy(e, &v, 4);
            break;
        }
        case ATTN_DTYPE_F16: /* sign, exponent 9..21 (2^-6..2^6), any mantissa */
            h = (uint16_t)((next(c) & 0x8000u) | (pick(c, 9, 21) << 10) | (next(c) & 0x3ffu));
            memcpy(e, &h, 2);
            break;
        case ATTN_DTYPE_BF16: /* sign, exponent 121..133, any mantissa */
            h = (uint16_t)((next(c) & 0x8000u) | (pick(c, 121, 133) << 7) | (next(c) & 0x7fu));
            memcpy(e, &h, 2);
            break;
        case ATTN_DTYPE_Q8_0:
        case ATTN_DTYPE_Q4_0: /* a positive f16 block scale 2^-8..2^-1 */
            h = (uint16_t)((pick(c, 7, 14) << 10) | (next(c) & 0x3ffu));
            memcpy(e, &h, 2);
            break;
        case ATTN_DTYPE_FP8_E4M3:
            if ((e[0] & 0x7f) == 0x7f)
                e[0] &= 0xfe; /* S.1111.111 is NaN */
            break;
        case ATTN_DTYPE_FP8_E5M2: /* sign, exponent 0..20 (subnormals to 2^5), any mantissa */
            e[0] = (uint8_t)((e[0] & 0x80u) | (pick(c, 0, 20) << 2) | (e[0] & 3u));
            break;
        case ATTN_DTYPE_U8_ASYM: /* any code: the records' headers are the */
        case ATTN_DTYPE_U4_ASYM: /* caller's (fill_asym_headers) */
            break;
        case ATTN_DTYPE_BOOL: /* no K/V dtype */
            break;
        }
    }
}
#pragma GCC diagnostic pop

/* ------------------------------------------------------------ timing (--bench) */

double ca_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

/* Whether the kernel list names the row (slot, dt): the oracle's files are
   every file, so its rows are every (slot, dtype) that has kernels; a KV
   slot's dtypes are those its files list (an ASYM dtype has its file's two
   slots, BOOL none). */
static int listed(const char *slot, int dt)
{
#define CA_LISTED(s_, dt_, kind, a)                                                         \
    if (ATTN_KV_IDX(dt_) == dt && !strcmp(#s_, slot))                                      \
        return 1;
#define CA_LISTED_FILE(file, need, a) ATTN_FILE_##file(CA_LISTED, a)
    ATTN_KERNELS_scalar(CA_LISTED_FILE, _)
#undef CA_LISTED_FILE
#undef CA_LISTED
    return 0;
}

/* Every slot of a table holds a kernel (for KV slots, every K/V dtype the
   list gives the slot), and every K/V dtype of src/dtype_list.h has a slot
   filled in every table; the dot slots are checked where a table has them
   (check_dot). */
static void check_complete(checkasm *c, const attn_dsp *t)
{
    c->dt_name = "-";
    int has_slot[ATTN_KV_DTYPES] = {0};
#define CA_COMPLETE_KV(s_)                                                                  \
    for (int d_ = 0; d_ < ATTN_KV_DTYPES; d_++)                                             \
        if (listed(#s_, d_)) {                                                              \
            has_slot[d_] = 1;                                                               \
            if (!t->s_[d_]) {                                                               \
                c->slot = #s_;                                                              \
                fail(c, "no kernel for %s", dtype_name(d_));                                \
            }                                                                               \
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
    for (int d = 0; d < ATTN_KV_DTYPES; d++)
        if (dtype_is_kv(d) && !has_slot[d]) {
            c->slot = "-";
            fail(c, "K/V dtype %s has no row in the kernel list's filled slots", dtype_name(d));
        }
}

/* Whether row `name` is asked for: --isa names it, or without --isa the
   harness's ATTN_TEST_ROWS list allows it (tests/test_rows.h). */
static int wanted(const checkasm *c, const char *name)
{
    return c->only_isa ? !strcmp(c->only_isa, name) : attn_test_row_wanted(name);
}

/* A table's rows are done: whether they failed, unless timing. */
static void row_done(const checkasm *c, const char *name, long before)
{
    if (!c->bench)
        printf("%-8s %s\n", name, c->failures == before ? "ok" : "FAILED");
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
            row_done(c, row_, before_);                                                 \
        }                                                                                   \
    }

/* The table whose int8 bits t's must equal (ATTN_ISA_I8_AS_BASE), or NULL. */
static const attn_dsp *i8_twin(attn_isa id, const attn_dsp *base)
{
#define CA_I8_TWIN(ID)                                                                      \
    if (id == ATTN_ISA_##ID)                                                                \
        return base;
    ATTN_ISA_I8_AS_BASE(CA_I8_TWIN)
#undef CA_I8_TWIN
    return NULL;
}

#define CA_ISA(ID, name, cpu, init, base, have)                                             \
    if (begin_isa(c, ATTN_ISA_##ID, #name)) {                                               \
        const long before = c->failures;                                                    \
        c->twin = i8_twin(ATTN_ISA_##ID, attn_dsp_for_isa(ATTN_ISA_##base));                \
        ATTN_KERNELS_##name(CA_FILE, c)                                                     \
        row_done(c, #name, before);                                                     \
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
            c->twin = i8_twin(t_->isa, emu_table_avx512());                                 \
            check_complete(c, t_);                                                          \
            const long before = c->failures;                                                \
            ATTN_KERNELS_##name(CA_FILE, c)                                                 \
            row_done(c, row, before);                                                   \
        }                                                                                   \
    }
    CA_EMU("avx512-emu", avx512, emu_table_avx512)
    CA_EMU("avx2-emu", avx2, emu_table_avx2)
    CA_EMU("amx-emu", amx, emu_table_amx)
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

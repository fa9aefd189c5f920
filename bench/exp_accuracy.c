/* SPDX-License-Identifier: MIT */
/*
 * Accuracy of every ISA's exp, swept over every input it can receive.
 *
 * Each table's exp is reached through its exp_sum slot with max = 0, which
 * stores exp(x - 0) = exp(x) in place. By the slot's contract (src/dsp.h)
 * max is the row's maximum, so exp_sum only ever sees x <= 0, -inf and NaN:
 * the domain swept is every float bit pattern with the sign bit set (-0,
 * every negative number, -inf, negative NaNs), +0 and the positive NaNs,
 * 2^31 + 2^23 patterns. Positive inputs are out of contract and not swept.
 *
 * Every input goes through each table twice:
 *  - "plain": consecutive bit patterns, so each vector takes the path its
 *    own lanes select (AVX2 has a fast in-range path and a full one);
 *  - "mixed": every 8th element is -inf (not checked itself), so every
 *    vector of 8 or more lanes holds an out-of-range lane, as in a masked
 *    row, and the weighted instance of exp_sum runs (weighted != NULL).
 * Each result is compared with libm's double exp rounded to float (the
 * correctly rounded result in all but astronomically rare cases). Fails when
 * a finite result is more than EXP_MAX_ULP away, or when special values
 * disagree: NaN in -> NaN out, exp(-inf) = +0, underflow -> +0 or a
 * subnormal within the bound.
 *
 * The ISAs come from the registry (src/isa_list.h): every table this build
 * and CPU run whose exp_sum is its own (not the scalar oracle's, which is
 * libm's expf). It also counts, for each pair of swept ISAs, the inputs on
 * which their results differ in any bit; `--same A,B` makes any such
 * difference between A and B a failure (the claim of src/exp_constants.h).
 *
 * `--stride N` tests every N-th pattern of each range (plus the special
 * values below, always): under an emulator (qemu) the full sweep takes
 * about 25 minutes per ISA, so cross builds pass a stride
 * (bench/meson.build, docs/CROSS_TESTING.md §3). An odd stride
 * reaches both parities of the last mantissa bit and, since it is far below
 * 2^23, every exponent of the domain.
 *
 * Exit status: 0 pass, 1 failure, 77 (skipped) when no table has an exp of
 * its own on this CPU/build.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define EXP_MAX_ULP 1.0
#define CHUNK 4096
#define MIX_PERIOD 8 /* one -inf per MIX_PERIOD elements in the mixed layout */

/* ulp of the float at `ref` (the subnormal spacing below FLT_MIN). */
static double ulp_at(double ref)
{
    double a = fabs(ref);
    if (a < FLT_MIN)
        return ldexp(1.0, -149);
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 24);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

typedef struct swept {
    const attn_dsp *t;
    double worst;
    float worst_x;
    unsigned long long bad;
} swept;

static swept g_isas[ATTN_ISA_COUNT];
static int g_count;
static unsigned long long g_differ[ATTN_ISA_COUNT][ATTN_ISA_COUNT];
static int g_same_a = -1, g_same_b = -1;

/* One part of the sweep, with its own results and buffers: the parts run on
   threads, and their results are merged in the sweep's order (a worst
   error found twice keeps its first input, as in one pass). */
typedef struct part {
    uint64_t lo, hi, stride; /* a range of bit patterns (patterns == NULL) */
    const float *patterns;   /* or a list of inputs */
    size_t count;
    swept isas[ATTN_ISA_COUNT];
    unsigned long long differ[ATTN_ISA_COUNT][ATTN_ISA_COUNT];
    double ref[CHUNK];
    float x[CHUNK];
    float plain[ATTN_ISA_COUNT][CHUNK];
    float mixed[CHUNK + CHUNK / (MIX_PERIOD - 1) + 1];
} part;

/* 1 when `got` is an acceptable exp(x) (ref: libm's, in double). */
static int check_one(float x, float got, double ref, double *err)
{
    const float reff = (float)ref;
    *err = 0.0;
    if (isnan(x))
        return isnan(got);
    if (reff == 0.0f) /* below half the least subnormal: +0, or it within the bound */
        return got >= 0.0f && fabs(got - ref) <= EXP_MAX_ULP * ulp_at(ref);
    *err = fabs((double)got - ref) / ulp_at(ref);
    return isfinite(got) && *err <= EXP_MAX_ULP;
}

static void record(swept *s, const char *layout, float x, float got, double ref)
{
    double err;
    const int ok = check_one(x, got, ref, &err);
    if (err > s->worst) {
        s->worst = err;
        s->worst_x = x;
    }
    if (!ok && s->bad++ < 10)
        printf("%s, %s layout: exp(%a) = %a, libm %a\n", s->t->isa_name, layout, (double)x,
               (double)got, ref);
}

/* Runs the n inputs x[] through every swept table in both layouts. */
static void sweep_chunk(part *w, const float *x, size_t n)
{
    double *ref = w->ref;
    float *mixed = w->mixed;
    for (size_t i = 0; i < n; i++)
        ref[i] = exp((double)x[i]);
    for (int k = 0; k < g_count; k++) {
        swept *s = &w->isas[k];
        float *plain = w->plain[k];
        memcpy(plain, x, n * sizeof *x);
        (void)s->t->exp_sum(plain, n, 0.0f, NULL);
        for (size_t i = 0; i < n; i++)
            record(s, "plain", x[i], plain[i], ref[i]);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (m % MIX_PERIOD == MIX_PERIOD - 1)
                mixed[m++] = -INFINITY;
            mixed[m++] = x[i];
        }
        float weighted;
        (void)s->t->exp_sum(mixed, m, 0.0f, &weighted);
        for (size_t i = 0, j = 0; i < n; i++, j++) {
            if (j % MIX_PERIOD == MIX_PERIOD - 1) {
                if (mixed[j] != 0.0f && s->bad++ < 10)
                    printf("%s, mixed layout: exp(-inf) = %a\n", s->t->isa_name, (double)mixed[j]);
                j++;
            }
            record(s, "mixed", x[i], mixed[j], ref[i]);
        }
    }
    for (int a = 0; a < g_count; a++)
        for (int b = a + 1; b < g_count; b++)
            for (size_t i = 0; i < n; i++)
                w->differ[a][b] += to_bits(w->plain[a][i]) != to_bits(w->plain[b][i]);
}

/* A part's inputs (its list, or the patterns of [lo, hi] at its stride),
   in chunks. */
static void *sweep_part(void *arg)
{
    part *w = arg;
    for (int k = 0; k < g_count; k++)
        w->isas[k] = (swept){g_isas[k].t, 0.0, 0.0f, 0};
    if (w->patterns) {
        sweep_chunk(w, w->patterns, w->count);
        return NULL;
    }
    for (uint64_t u = w->lo; u <= w->hi;) {
        size_t n = 0;
        for (; n < CHUNK && u <= w->hi; n++, u += w->stride)
            w->x[n] = from_bits((uint32_t)u);
        sweep_chunk(w, w->x, n);
    }
    return NULL;
}

/* Adds a part's results to the totals (parts in the sweep's order). */
static void merge_part(const part *w)
{
    for (int k = 0; k < g_count; k++) {
        swept *s = &g_isas[k];
        const swept *p = &w->isas[k];
        if (p->worst > s->worst) {
            s->worst = p->worst;
            s->worst_x = p->worst_x;
        }
        s->bad += p->bad;
    }
    for (int a = 0; a < g_count; a++)
        for (int b = a + 1; b < g_count; b++)
            g_differ[a][b] += w->differ[a][b];
}

static int isa_index(const char *name)
{
    for (int k = 0; k < g_count; k++)
        if (strcmp(g_isas[k].t->isa_name, name) == 0)
            return k;
    return -1;
}

int main(int argc, char **argv)
{
    uint64_t stride = 1;
    const char *same = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--stride") == 0 && i + 1 < argc) {
            char *end;
            stride = strtoull(argv[++i], &end, 10);
            if (*end || stride == 0) {
                fprintf(stderr, "exp_accuracy: --stride wants a positive integer\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--same") == 0 && i + 1 < argc) {
            same = argv[++i];
        } else {
            fprintf(stderr, "usage: exp_accuracy [--stride N] [--same ISA,ISA]\n");
            return 2;
        }
    }

    const attn_dsp *scalar = attn_dsp_for_isa(ATTN_ISA_SCALAR);
    for (int isa = ATTN_ISA_SCALAR + 1; isa < ATTN_ISA_COUNT; isa++) {
        const attn_dsp *t = attn_dsp_for_isa((attn_isa)isa);
        if (t && t->exp_sum != scalar->exp_sum)
            g_isas[g_count++].t = t;
    }
    if (same) {
        /* both named ISAs must be swept here, else the claim is untested */
        char a[32], b[32];
        if (sscanf(same, "%31[^,],%31s", a, b) != 2) {
            fprintf(stderr, "exp_accuracy: --same wants ISA,ISA\n");
            return 2;
        }
        g_same_a = isa_index(a);
        g_same_b = isa_index(b);
        if (g_same_a < 0 || g_same_b < 0) {
            printf("exp_accuracy: --same %s: not both tables run here, pair not checked\n", same);
            g_same_a = g_same_b = -1;
        }
    }
    if (g_count == 0) {
        puts("exp_accuracy: no table with its own exp on this CPU/build, skipped");
        return 77;
    }
    printf("exp_accuracy: stride %llu over x <= 0, -inf and NaN; ISAs:",
           (unsigned long long)stride);
    for (int k = 0; k < g_count; k++)
        printf(" %s", g_isas[k].t->isa_name);
    printf("\n");

    /* The special values and thresholds, always (whatever the stride). */
    static const uint32_t specials[] = {
        0x80000000u, 0x00000000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
        0xffffffffu, 0x80000001u, 0x807fffffu, 0x80800000u, 0xbf800000u,
        0xc2aeac50u, /* -87.336: exp near FLT_MIN */
        0xc2ce8ed0u, /* -103.279: exp near the least subnormal */
        0xc2d00000u, /* -104: the clamp of the AVX-512 and NEON exps */
    };
    float sx[sizeof specials / sizeof specials[0]];
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        sx[i] = from_bits(specials[i]);

    /* The parts, in the sweep's order: the special values; the patterns
       with the sign bit set (-0, negatives, -inf, negative NaNs), split
       evenly at the stride over one thread per CPU; +0; the positive NaNs. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const int threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    const int nparts = threads + 3;
    part *parts = calloc((size_t)nparts, sizeof *parts);
    if (!parts) {
        fprintf(stderr, "exp_accuracy: out of memory\n");
        return 2;
    }
    parts[0].patterns = sx;
    parts[0].count = sizeof sx / sizeof sx[0];
    const uint64_t neg_lo = 0x80000000u, neg_n = (0xffffffffu - neg_lo) / stride + 1;
    for (int k = 0; k < threads; k++) {
        const uint64_t a = neg_n * (uint64_t)k / (uint64_t)threads,
                       z = neg_n * (uint64_t)(k + 1) / (uint64_t)threads;
        parts[1 + k] = (part){.lo = neg_lo + a * stride, .hi = neg_lo + z * stride - 1,
                              .stride = stride};
        if (z == a) /* an empty part: a range that ends before it starts */
            parts[1 + k].hi = 0, parts[1 + k].lo = 1;
    }
    parts[threads + 1] = (part){.lo = 0x00000000u, .hi = 0x00000000u, .stride = 1};
    parts[threads + 2] = (part){.lo = 0x7f800001u, .hi = 0x7fffffffu, .stride = stride};
    pthread_t tid[64];
    int started[64] = {0};
    for (int k = 0; k < threads; k++)
        started[k] = pthread_create(&tid[k], NULL, sweep_part, &parts[1 + k]) == 0;
    for (int k = 0; k < nparts; k++) /* the rest here, and any part whose thread failed */
        if (k < 1 || k > threads || !started[k - 1])
            sweep_part(&parts[k]);
    for (int k = 0; k < threads; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
    for (int k = 0; k < nparts; k++)
        merge_part(&parts[k]);
    free(parts);

    int failed = 0;
    for (int k = 0; k < g_count; k++) {
        const swept *s = &g_isas[k];
        printf("exp_accuracy: %s: max error %.3f ulp at x = %a, %llu failures\n",
               s->t->isa_name, s->worst, (double)s->worst_x, s->bad);
        failed |= s->bad != 0;
    }
    for (int a = 0; a < g_count; a++)
        for (int b = a + 1; b < g_count; b++) {
            printf("exp_accuracy: %s and %s differ in %llu results\n", g_isas[a].t->isa_name,
                   g_isas[b].t->isa_name, g_differ[a][b]);
            if (((a == g_same_a && b == g_same_b) || (a == g_same_b && b == g_same_a)) &&
                g_differ[a][b]) {
                printf("exp_accuracy: FAIL: %s and %s must agree bit for bit\n",
                       g_isas[a].t->isa_name, g_isas[b].t->isa_name);
                failed = 1;
            }
        }
    return failed;
}

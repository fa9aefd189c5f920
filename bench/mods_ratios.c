/*
 * The three ratios of the score-modifier targets, each measured in one
 * process with the variants interleaved (A B C A B C ...) and compared by
 * their medians, so that machine load drifts over all of them alike:
 *
 *   1. forward with ALiBi slopes / plain forward (target <= 1.05), and
 *      forward with the equivalent explicit bias tensor / ALiBi (> 1 wanted);
 *   2. forward with sinks / plain forward (target <= 1.02);
 *   3. non-causal two-sided window 512 + 512 (FlashAttention's (512, 512):
 *      window = window_right = 513) / causal window of 1024, L = 8192
 *      (target within 1.2: both see about 1024 keys per query).
 *
 * Single thread (parallel_for NULL), timed by the thread's CPU clock, the
 * active ISA (ATTN_ISA=... to pick one), f32 inputs, head_dim 128. Usage: attn_mods_ratios [repetitions]
 * (default 7). Prints one line per variant and the ratios.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"

/* CPU time of this thread: on a machine shared with other work, wall time
   mostly measures the scheduler; the forward runs on this thread only. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *alloc_filled(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        p[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

typedef struct variant {
    const char *name;
    attn_options opt;
} variant;

/* Runs the variants interleaved `reps` times (after one warm-up round) and
   stores each one's median seconds. */
static void measure(const attn_shape *s, const attn_tensor *q, const attn_tensor *k,
                    const attn_tensor *v, const attn_tensor *out, variant *vs, int nv, int reps,
                    double *med)
{
    double *t = calloc((size_t)(nv * reps), sizeof(double));
    for (int r = -1; r < reps; r++)
        for (int i = 0; i < nv; i++) {
            const double t0 = now();
            attn_status st = attn_forward(s, &vs[i].opt, q, k, v, out, NULL);
            const double dt = now() - t0;
            if (st != ATTN_OK) {
                fprintf(stderr, "%s: %s\n", vs[i].name, attn_strerror(st));
                exit(1);
            }
            if (r >= 0)
                t[i * reps + r] = dt;
        }
    for (int i = 0; i < nv; i++) {
        med[i] = median(t + i * reps, reps);
        printf("  %-44s median %8.2f ms CPU\n", vs[i].name, med[i] * 1e3);
    }
    free(t);
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1) {
        fprintf(stderr, "usage: %s [repetitions >= 1]\n", argv[0]);
        return 2;
    }
    printf("libattn %s, ISA %s, 1 thread, %d interleaved repetitions (medians)\n",
           attn_version_string(), attn_isa_name(attn_isa_active()), reps);

    /* ---- 1 and 2: causal prefill, H = 4, L = 2048, d = 128 */
    {
        const int64_t H = 4, L = 2048, D = 128;
        attn_shape s = {1, H, H, L, L, D, D};
        const size_t n = (size_t)(H * L * D);
        attn_tensor q = {alloc_filled(n, 1), ATTN_DTYPE_F32, H * L * D, L * D, D};
        attn_tensor k = {alloc_filled(n, 2), ATTN_DTYPE_F32, H * L * D, L * D, D};
        attn_tensor v = {alloc_filled(n, 3), ATTN_DTYPE_F32, H * L * D, L * D, D};
        attn_tensor o = {alloc_filled(n, 4), ATTN_DTYPE_F32, H * L * D, L * D, D};
        float slopes[4], sinks[4];
        for (int h = 0; h < 4; h++) {
            slopes[h] = powf(2.0f, -2.0f * (float)(h + 1)); /* ALiBi's 2^(-8i/H), H = 4 */
            sinks[h] = 0.5f * (float)h;
        }
        /* the explicit tensor a caller materialises without alibi_slopes */
        float *bias = malloc((size_t)(H * L * L) * sizeof(float));
        if (!bias)
            return 1;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++)
                for (int64_t j = 0; j < L; j++)
                    bias[(h * L + i) * L + j] = -slopes[h] * (float)llabs(i - j);
        attn_tensor ts = {slopes, ATTN_DTYPE_F32, 0, 1, 0};
        attn_tensor tz = {sinks, ATTN_DTYPE_F32, 0, 1, 0};
        attn_tensor tb = {bias, ATTN_DTYPE_F32, H * L * L, L * L, L};
        variant vs[4];
        for (int i = 0; i < 4; i++) {
            attn_options d = ATTN_OPTIONS_INIT;
            d.flags = ATTN_CAUSAL;
            vs[i].opt = d;
        }
        vs[0].name = "causal forward, plain";
        vs[1].name = "causal forward, alibi_slopes";
        vs[1].opt.alibi_slopes = &ts;
        vs[2].name = "causal forward, explicit bias tensor";
        vs[2].opt.bias = &tb;
        vs[3].name = "causal forward, sinks";
        vs[3].opt.sinks = &tz;
        double med[4];
        printf("forward B=1 H=%lld L=%lld d=%lld, causal:\n", (long long)H, (long long)L,
               (long long)D);
        measure(&s, &q, &k, &v, &o, vs, 4, reps, med);
        printf("  ratio alibi / plain          %.3f  (target <= 1.05)\n", med[1] / med[0]);
        printf("  ratio bias tensor / alibi    %.3f  (ALiBi faster by %.1f %%)\n",
               med[2] / med[1], 100.0 * (1.0 - med[1] / med[2]));
        printf("  ratio sinks / plain          %.3f  (target <= 1.02)\n", med[3] / med[0]);
        free(bias);
        free(q.data);
        free(k.data);
        free(v.data);
        free(o.data);
    }

    /* ---- 3: L = 8192, two-sided 512 + 512 vs causal window 1024 */
    {
        const int64_t H = 2, L = 8192, D = 128;
        attn_shape s = {1, H, H, L, L, D, D};
        const size_t n = (size_t)(H * L * D);
        attn_tensor q = {alloc_filled(n, 5), ATTN_DTYPE_F32, H * L * D, L * D, D};
        attn_tensor k = {alloc_filled(n, 6), ATTN_DTYPE_F32, H * L * D, L * D, D};
        attn_tensor v = {alloc_filled(n, 7), ATTN_DTYPE_F32, H * L * D, L * D, D};
        attn_tensor o = {alloc_filled(n, 8), ATTN_DTYPE_F32, H * L * D, L * D, D};
        variant vs[2];
        attn_options d = ATTN_OPTIONS_INIT;
        vs[0].name = "two-sided window 512 + 512 (513/513)";
        vs[0].opt = d;
        vs[0].opt.window = 513;
        vs[0].opt.window_right = 513;
        vs[1].name = "causal window 1024";
        vs[1].opt = d;
        vs[1].opt.flags = ATTN_CAUSAL;
        vs[1].opt.window = 1024;
        /* visible (query, key) pairs of each, for the per-pair comparison */
        double pairs[2] = {0, 0};
        for (int64_t i = 0; i < L; i++) {
            const int64_t lo0 = i - 512 < 0 ? 0 : i - 512, hi0 = i + 513 > L ? L : i + 513;
            const int64_t lo1 = i - 1023 < 0 ? 0 : i - 1023;
            pairs[0] += (double)(hi0 - lo0);
            pairs[1] += (double)(i + 1 - lo1);
        }
        double med[2];
        printf("forward B=1 H=%lld L=%lld d=%lld, local windows:\n", (long long)H, (long long)L,
               (long long)D);
        measure(&s, &q, &k, &v, &o, vs, 2, reps, med);
        printf("  ratio two-sided / causal window   %.3f  (visible pairs %.3f; target within "
               "1.2)\n",
               med[0] / med[1], pairs[0] / pairs[1]);
        printf("  per visible pair                  %.3f\n",
               (med[0] / pairs[0]) / (med[1] / pairs[1]));
        free(q.data);
        free(k.data);
        free(v.data);
        free(o.data);
    }
    return 0;
}

/* SPDX-License-Identifier: MIT */
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
 *      (target within 1.2: both see about 1024 keys per query);
 *   4. a speculative-decoding draft tree of 64 tokens on a 4096-token
 *      prefix (Hq 32, Hkv 8): tree_parents / the same call with no mask
 *      (target <= 1.1), and the equivalent dense BOOL mask [Lq][Lk] (heads
 *      broadcast) / no mask.
 *
 * Single thread (parallel_for NULL), timed by the thread's CPU clock, the
 * active ISA (ATTN_ISA=... to pick one), f32 inputs, head_dim 128, the
 * problems from the problem generator (gen/gen.h). Usage: attn_mods_ratios [repetitions]
 * (default 7). Prints one line per variant and the ratios.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "bench_util.h"
#include "gen.h"

/* CPU time of this thread: on a machine shared with other work, wall time
   mostly measures the scheduler; the forward runs on this thread only. */
/* A forward problem from the generator (gen/gen.h), every choice pinned or
   off: B = 1, H KV heads of `group` query heads each, Lq queries, Lk keys,
   d = 128, f32, values in [-1, 1); with ALiBi's standard slopes and sinks
   when asked. */
static void problem_of(gen_problem *d, gen_bufs *m, int64_t H, int64_t group, int64_t Lq,
                       int64_t Lk, int causal, int modifiers)
{
    gen_profile p;
    gen_profile_init(&p);
    p.work_cap = 0;
    gen_pin(&p, GEN_C_KV_HEADS, H);
    gen_pin(&p, GEN_C_GROUP, group);
    gen_pin(&p, GEN_C_Q_LEN, Lq);
    gen_pin(&p, GEN_C_KV_LEN, Lk);
    gen_pin(&p, GEN_C_HEAD_DIM, 128);
    gen_pin(&p, GEN_C_OPT(flags), causal ? ATTN_CAUSAL : 0);
    gen_pin(&p, GEN_C_OPT(alibi_slopes), modifiers);
    gen_pin(&p, GEN_C_OPT(sinks), modifiers);
    gen_pin(&p, GEN_C_BROADCAST_OPT, 1); /* per head */
    for (int r = GEN_Q; r <= GEN_V; r++)
        p.val[r].lo = -1.0f, p.val[r].hi = 1.0f;
    p.val[GEN_OPT(alibi_slopes)] = (gen_values){GEN_VAL_ALIBI, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0};
    gen_src fixed = {NULL, NULL};
    gen_draw(d, &fixed, &p);
    if (gen_materialise(m, d, 1, GEN_M_OUT, NULL) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
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
            const double t0 = bench_cpu();
            attn_status st = attn_forward(s, &vs[i].opt, q, k, v, out, NULL);
            const double dt = bench_cpu() - t0;
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
        gen_problem pd;
        gen_bufs m;
        problem_of(&pd, &m, H, 1, L, L, 1, 1);
        const attn_tensor *ts = &m.t[GEN_OPT(alibi_slopes)], *tz = &m.t[GEN_OPT(sinks)];
        for (int h = 0; h < H; h++) /* ALiBi's 2^(-8i/H), H = 4, and these sinks */
            *(float *)gen_at(tz, 0, h, 0, 0) = 0.5f * (float)h;
        /* the explicit tensor a caller materialises without alibi_slopes */
        float *bias = malloc((size_t)(H * L * L) * sizeof(float));
        if (!bias)
            return 1;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++)
                for (int64_t j = 0; j < L; j++)
                    bias[(h * L + i) * L + j] =
                        -*(const float *)gen_at(ts, 0, h, 0, 0) * (float)llabs(i - j);
        attn_tensor tb = {bias, ATTN_DTYPE_F32, H * L * L, L * L, L};
        variant vs[4];
        for (int i = 0; i < 4; i++) {
            vs[i].opt = m.opt;
            vs[i].opt.alibi_slopes = vs[i].opt.sinks = NULL;
        }
        vs[0].name = "causal forward, plain";
        vs[1].name = "causal forward, alibi_slopes";
        vs[1].opt.alibi_slopes = ts;
        vs[2].name = "causal forward, explicit bias tensor";
        vs[2].opt.bias = &tb;
        vs[3].name = "causal forward, sinks";
        vs[3].opt.sinks = tz;
        double med[4];
        printf("forward B=1 H=%lld L=%lld d=%lld, causal:\n", (long long)H, (long long)L,
               (long long)D);
        measure(&m.shape, &m.t[GEN_Q], &m.t[GEN_K], &m.t[GEN_V], &m.t[GEN_OUT], vs, 4, reps, med);
        printf("  ratio alibi / plain          %.3f  (target <= 1.05)\n", med[1] / med[0]);
        printf("  ratio bias tensor / alibi    %.3f  (ALiBi faster by %.1f %%)\n",
               med[2] / med[1], 100.0 * (1.0 - med[1] / med[2]));
        printf("  ratio sinks / plain          %.3f  (target <= 1.02)\n", med[3] / med[0]);
        free(bias);
        gen_release(&m);
        gen_free(&pd);
    }

    /* ---- 3: L = 8192, two-sided 512 + 512 vs causal window 1024 */
    {
        const int64_t H = 2, L = 8192, D = 128;
        gen_problem pd;
        gen_bufs m;
        problem_of(&pd, &m, H, 1, L, L, 0, 0);
        variant vs[2];
        vs[0].name = "two-sided window 512 + 512 (513/513)";
        vs[0].opt = m.opt;
        vs[0].opt.window = 513;
        vs[0].opt.window_right = 513;
        vs[1].name = "causal window 1024";
        vs[1].opt = m.opt;
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
        measure(&m.shape, &m.t[GEN_Q], &m.t[GEN_K], &m.t[GEN_V], &m.t[GEN_OUT], vs, 2, reps, med);
        printf("  ratio two-sided / causal window   %.3f  (visible pairs %.3f; target within "
               "1.2)\n",
               med[0] / med[1], pairs[0] / pairs[1]);
        printf("  per visible pair                  %.3f\n",
               (med[0] / pairs[0]) / (med[1] / pairs[1]));
        gen_release(&m);
        gen_free(&pd);
    }

    /* ---- 4: a draft tree of 64 tokens on a 4096-token prefix */
    {
        const int64_t Lq = 64, Lk = 4096 + 64;
        gen_problem pd;
        gen_bufs m;
        problem_of(&pd, &m, 8, 4, Lq, Lk, 0, 0);
        const int64_t Hq = m.shape.q_heads;
        /* a tree of branching draft tokens: parent of i drawn from the last
           few tokens (a tree as EAGLE builds it: depth ~ 8) */
        int32_t parents[64];
        uint64_t st = 0x9e3779b97f4a7c15u;
        for (int64_t i = 0; i < Lq; i++) {
            st = st * 6364136223846793005u + 1442695040888963407u;
            const int64_t back = (int64_t)((st >> 33) % 8) + 1;
            parents[i] = (int32_t)(i - back < 0 ? -1 : i - back);
        }
        /* the dense BOOL mask of the same tree, one [Lq][Lk] for every head */
        uint8_t *mask = malloc((size_t)(Lq * Lk));
        if (!mask)
            return 1;
        memset(mask, 1, (size_t)(Lq * Lk));
        for (int64_t i = 0; i < Lq; i++) {
            memset(mask + i * Lk + Lk - Lq, 0, (size_t)Lq);
            for (int64_t a = i; a >= 0; a = parents[a])
                mask[i * Lk + Lk - Lq + a] = 1;
        }
        attn_tensor tm = {mask, ATTN_DTYPE_BOOL, 0, 0, Lk};
        variant vs[3];
        for (int i = 0; i < 3; i++)
            vs[i].opt = m.opt;
        vs[0].name = "64 draft queries, no mask";
        vs[1].name = "64 draft queries, tree_parents";
        vs[1].opt.tree_parents = parents;
        vs[2].name = "64 draft queries, dense BOOL mask";
        vs[2].opt.mask = &tm;
        double med[3];
        printf("forward B=1 Hq=%lld Hkv=8 Lq=%lld Lk=%lld d=128, a draft tree:\n", (long long)Hq,
               (long long)Lq, (long long)Lk);
        measure(&m.shape, &m.t[GEN_Q], &m.t[GEN_K], &m.t[GEN_V], &m.t[GEN_OUT], vs, 3, reps, med);
        printf("  ratio tree_parents / no mask      %.3f  (target <= 1.1)\n", med[1] / med[0]);
        printf("  ratio dense BOOL mask / no mask   %.3f\n", med[2] / med[0]);
        free(mask);
        gen_release(&m);
        gen_free(&pd);
    }
    return 0;
}

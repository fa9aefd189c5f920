/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios mods: the ratios of the score-modifier targets, each measured
 * with the variants interleaved (A B C A B C ...) and compared by their
 * medians, so that machine load drifts over all of them alike:
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
 * Single thread (parallel_for NULL), timed by the thread's CPU clock (on a
 * machine shared with other work, wall time mostly measures the
 * scheduler), the active ISA, f32 inputs, head_dim 128, the problems from
 * the problem generator. Prints one line per variant and the ratios.
 *
 *   attn_ratios mods [--reps N]   (default 7)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

/* A forward problem from the generator, every choice pinned or off: B = 1,
   H KV heads of `group` query heads each, Lq queries, Lk keys, d = 128,
   f32, values in [-1, 1); with ALiBi's standard slopes and sinks when
   asked. */
static void problem_of(gen_problem *d, gen_bufs *m, int64_t H, int64_t group, int64_t Lq,
                       int64_t Lk, int causal, int modifiers)
{
    gen_profile p;
    ratio_profile_dims(&p, -1.0f, 1.0f,
                       (ratio_dims){.kv_heads = H, .group = group, .q_len = Lq, .kv_len = Lk,
                                    .head_dim = 128});
    gen_pin(&p, GEN_C_OPT(flags), causal ? ATTN_CAUSAL : 0);
    gen_pin(&p, GEN_C_OPT(alibi_slopes), modifiers);
    gen_pin(&p, GEN_C_OPT(sinks), modifiers);
    gen_pin(&p, GEN_C_BROADCAST_OPT, 1); /* per head */
    p.val[GEN_OPT(alibi_slopes)] = (gen_values){GEN_VAL_ALIBI, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0};
    ratio_problem(d, m, &p, 0, 1, GEN_M_OUT);
}

typedef struct variant {
    const char *name;
    attn_options opt;
} variant;

typedef struct problem {
    const gen_bufs *m;
    const variant *vs;
} problem;

static void forward(void *ctx, int v, int rep, int call)
{
    (void)rep, (void)call;
    const problem *p = ctx;
    ratio_forward(p->m, &p->vs[v].opt, p->vs[v].name);
}

/* Runs the variants interleaved `reps` times (after one warm-up round) and
   stores each one's median seconds of CPU time. */
static void measure(const gen_bufs *m, const variant *vs, int nv, int reps, double *med)
{
    problem p = {m, vs};
    const ratio_loop l = {.variants = nv, .reps = reps, .warmup = 1, .order = RATIO_IN_TURN,
                          .only = -1, .call = forward, .ctx = &p};
    ratio_stat s[4];
    ratio_measure(&l, NULL, s);
    for (int i = 0; i < nv; i++) {
        med[i] = s[i].median;
        printf("  %-44s median %8.2f ms CPU\n", vs[i].name, med[i] * 1e3);
    }
}

static int mods_run(const ratio_args *a)
{
    const int reps = a->reps;
    ratio_header("1 thread, %d interleaved repetitions (medians)\n", reps);

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
        float *bias = ratio_alloc((size_t)(H * L * L) * sizeof(float));
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
        measure(&m, vs, 4, reps, med);
        ratio_print_ratio(23, "alibi / plain", "%.3f  (target <= 1.05)\n", med[1] / med[0]);
        ratio_print_ratio(23, "bias tensor / alibi", "%.3f  (ALiBi faster by %.1f %%)\n",
                          med[2] / med[1], 100.0 * (1.0 - med[1] / med[2]));
        ratio_print_ratio(23, "sinks / plain", "%.3f  (target <= 1.02)\n", med[3] / med[0]);
        free(bias);
        ratio_problem_free(&pd, &m);
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
        measure(&m, vs, 2, reps, med);
        ratio_print_ratio(28, "two-sided / causal window",
                          "%.3f  (visible pairs %.3f; target within 1.2)\n", med[0] / med[1],
                          pairs[0] / pairs[1]);
        printf("  per visible pair                  %.3f\n",
               (med[0] / pairs[0]) / (med[1] / pairs[1]));
        ratio_problem_free(&pd, &m);
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
        uint8_t *mask = ratio_alloc((size_t)(Lq * Lk));
        memset(mask, 1, (size_t)(Lq * Lk));
        for (int64_t i = 0; i < Lq; i++) {
            memset(mask + i * Lk + Lk - Lq, 0, (size_t)Lq);
            for (int64_t x = i; x >= 0; x = parents[x])
                mask[i * Lk + Lk - Lq + x] = 1;
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
        measure(&m, vs, 3, reps, med);
        ratio_print_ratio(28, "tree_parents / no mask", "%.3f  (target <= 1.1)\n", med[1] / med[0]);
        ratio_print_ratio(28, "dense BOOL mask / no mask", "%.3f\n", med[2] / med[0]);
        free(mask);
        ratio_problem_free(&pd, &m);
    }
    return 0;
}

RATIO_FAMILY(mods, 7, RATIO_ONE_THREAD, NULL,
             "score modifiers: ALiBi, sinks, two-sided windows, draft trees vs plain calls",
             RATIO_NO_OPTIONS);

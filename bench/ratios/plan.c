/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios plan: the plan targets (attn.h, attn_plan_forward /
 * attn_plan_run) as times measured in one process, variants interleaved
 * per repetition:
 *   tiny     one decode call, B 1, H 8, Lq 1, Lk 64, d 64, f32:
 *            attn_forward vs attn_plan_run (plan made once);
 *   step     one decode step of 32 layers, B 4, Hq 32, Hkv 8, Lq 1, Lk 512,
 *            d 128, f32, a different K/V per layer: 32 attn_forward calls
 *            vs one attn_plan_forward and 32 attn_plan_run calls;
 *   checks   what those do besides computing: 32 attn_plan_forward calls
 *            (attn_forward's validation, plus the plan's copies), and 32
 *            attn_plan_run calls on a refused out (the run's own checks).
 * One thread (no parallel_for), the active ISA; median and minimum over
 * the repetitions. The two problems come from the problem generator, the
 * step's sequence lengths written into its description.
 *
 *   attn_ratios plan [--reps N]   (default 15)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

#define LAYERS 32

enum { V_TINY_FWD, V_TINY_PLAN, V_STEP_FWD, V_STEP_PLAN, V_CHECK_PLAN, V_CHECK_RUN, VARIANTS };
static const char *const names[] = {
    "tiny: attn_forward", "tiny: attn_plan_run", "step: 32 x attn_forward",
    "step: plan + 32 x attn_plan_run", "checks: 32 x attn_plan_forward",
    "checks: 32 x attn_plan_run, refused"};

typedef struct plans {
    gen_problem td, sd;
    gen_bufs tm, sm;  /* tiny, step (its K/V: layer 0's) */
    attn_plan *tplan; /* the tiny call's, made once */
    void *smem;       /* the step's plan memory */
    size_t sbytes;
    void *sk[LAYERS], *sv[LAYERS];
    attn_row_stats st; /* the step's lse */
} plans;

/* The step's plan, made in p->smem for K/V of the step's layout. */
static attn_plan *step_plan(plans *p, const attn_tensor *sk, const attn_tensor *sv)
{
    const gen_bufs *s = &p->sm;
    attn_plan *plan;
    ratio_ok(attn_plan_forward(p->smem, p->sbytes, &s->shape, &s->opt, &s->t[GEN_Q], sk, sv,
                               &s->t[GEN_OUT], &p->st, &plan),
             "plan");
    return plan;
}

static void call(void *ctx, int v, int rep, int c)
{
    (void)rep, (void)c;
    plans *p = ctx;
    const gen_bufs *t = &p->tm, *s = &p->sm;
    attn_tensor sk = s->t[GEN_K], sv = s->t[GEN_V];
    void *sq = s->t[GEN_Q].data, *so = s->t[GEN_OUT].data;
    attn_plan *plan;
    switch (v) {
    case V_TINY_FWD:
        ratio_forward(t, &t->opt, "forward");
        break;
    case V_TINY_PLAN:
        ratio_ok(attn_plan_run(p->tplan, t->t[GEN_Q].data, t->t[GEN_K].data, t->t[GEN_V].data,
                               t->t[GEN_OUT].data, NULL),
                 "run");
        break;
    case V_STEP_FWD:
        for (int l = 0; l < LAYERS; l++) {
            sk.data = p->sk[l], sv.data = p->sv[l];
            ratio_ok(attn_forward(&s->shape, &s->opt, &s->t[GEN_Q], &sk, &sv, &s->t[GEN_OUT],
                                  &p->st),
                     "forward");
        }
        break;
    case V_STEP_PLAN:
        plan = step_plan(p, &sk, &sv);
        for (int l = 0; l < LAYERS; l++)
            ratio_ok(attn_plan_run(plan, sq, p->sk[l], p->sv[l], so, &p->st), "run");
        break;
    case V_CHECK_PLAN:
        for (int l = 0; l < LAYERS; l++)
            step_plan(p, &sk, &sv);
        break;
    case V_CHECK_RUN:
        plan = step_plan(p, &sk, &sv);
        for (int l = 0; l < LAYERS; l++)
            if (attn_plan_run(plan, sq, p->sk[l], p->sv[l], sq, &p->st) != ATTN_ERR_STRIDE)
                exit(1); /* out on q: refused after every check */
        break;
    }
}

static int plan_run(const ratio_args *a)
{
    const int reps = a->reps;
    plans p;
    memset(&p, 0, sizeof p);
    gen_profile pr;

    /* tiny: B 1, H 8, Lq 1, Lk 64, d 64, f32 in [-1, 1), its plan made once */
    ratio_profile_dims(&pr, -1.0f, 1.0f, (ratio_dims){1, 8, 1, 1, 64, 64});
    ratio_problem(&p.td, &p.tm, &pr, 0, 1, GEN_M_OUT);
    const gen_bufs *t = &p.tm;
    size_t tbytes;
    ratio_ok(attn_plan_size(&t->shape, &t->opt, &tbytes), "attn_plan_size");
    void *tmem = ratio_alloc(tbytes);
    ratio_ok(attn_plan_forward(tmem, tbytes, &t->shape, &t->opt, &t->t[GEN_Q], &t->t[GEN_K],
                               &t->t[GEN_V], &t->t[GEN_OUT], NULL, &p.tplan),
             "attn_plan_forward");

    /* step: B 4, Hq 32, Hkv 8, Lk 512 (kv_lens 512, 500, 300, 100), d 128,
       the K/V of 32 layers */
    static const int64_t kv_lens[4] = {512, 500, 300, 100};
    ratio_profile_dims(&pr, -1.0f, 1.0f, (ratio_dims){4, 8, 4, 1, 512, 128});
    gen_pin(&pr, GEN_C_OPT(kv_lens), 1);
    ratio_draw(&p.sd, &pr, 0);
    for (int b = 0; b < 4; b++) /* the generator draws them full */
        p.sd.ints[ATTN_OPT_POS_kv_lens][b] = kv_lens[b];
    ratio_materialise(&p.sm, &p.sd, 1, GEN_M_OUT | GEN_M_STATS);
    p.st = (attn_row_stats){p.sm.stats.lse, NULL, NULL};
    ratio_copies(p.sk, p.sm.t[GEN_K].data, p.sm.bytes[GEN_K], LAYERS);
    ratio_copies(p.sv, p.sm.t[GEN_V].data, p.sm.bytes[GEN_V], LAYERS);
    ratio_ok(attn_plan_size(&p.sm.shape, &p.sm.opt, &p.sbytes), "attn_plan_size");
    p.smem = ratio_alloc(p.sbytes);

    int calls[VARIANTS];
    for (int v = 0; v < VARIANTS; v++)
        calls[v] = ratio_calls(a, v <= V_TINY_PLAN ? 2000 : 20);
    const ratio_loop l = {.variants = VARIANTS, .reps = reps, .warmup = 1, .order = RATIO_ROTATE,
                          .calls = calls, .only = -1, .call = call, .ctx = &p};
    ratio_stat s[VARIANTS];
    ratio_measure(&l, s, NULL);
    printf("plans, ISA %s, 1 thread; median / min of %d repetitions\n",
           attn_isa_name(attn_isa_active()), reps);
    double med[VARIANTS];
    for (int v = 0; v < VARIANTS; v++) {
        med[v] = s[v].median;
        printf("  %-38s %10.3f / %10.3f us\n", names[v], s[v].median * 1e6, s[v].min * 1e6);
    }
    printf("  tiny: attn_forward / attn_plan_run          %.2f\n", med[V_TINY_FWD] / med[V_TINY_PLAN]);
    printf("  step: 32 calls / plan + 32 runs             %.3f\n", med[V_STEP_FWD] / med[V_STEP_PLAN]);
    printf("  step: saved per step                        %.2f us\n",
           (med[V_STEP_FWD] - med[V_STEP_PLAN]) * 1e6);
    printf("  checks: 32 validations / (1 + 32 run checks) %.1f\n",
           med[V_CHECK_PLAN] / med[V_CHECK_RUN]);

    ratio_copies_free(p.sk, LAYERS);
    ratio_copies_free(p.sv, LAYERS);
    free(p.smem);
    free(tmem);
    ratio_problem_free(&p.td, &p.tm);
    ratio_problem_free(&p.sd, &p.sm);
    return 0;
}

RATIO_FAMILY(plan, 15, RATIO_ONE_THREAD, NULL,
             "attn_plan_run against attn_forward: a tiny decode, a 32-layer step, the checks",
             RATIO_NO_OPTIONS);

/* SPDX-License-Identifier: MIT */
/*
 * The plan targets (attn.h, attn_plan_forward / attn_plan_run) as times
 * measured in one process, variants interleaved per repetition:
 *   tiny     one decode call, B 1, H 8, Lq 1, Lk 64, d 64, f32:
 *            attn_forward vs attn_plan_run (plan made once);
 *   step     one decode step of 32 layers, B 4, Hq 32, Hkv 8, Lq 1, Lk 512,
 *            d 128, f32, a different K/V per layer: 32 attn_forward calls
 *            vs one attn_plan_forward and 32 attn_plan_run calls;
 *   checks   what those do besides computing: 32 attn_plan_forward calls
 *            (attn_forward's validation, plus the plan's copies), and 32
 *            attn_plan_run calls on a refused out (the run's own checks).
 * One thread (no parallel_for), the active ISA; median and minimum over
 * the repetitions.
 *
 *   attn_plan_ratio [--reps N]   (default 15)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "bench_util.h"

#define LAYERS 32

static float *filled(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
    return x;
}

enum { V_TINY_FWD, V_TINY_PLAN, V_STEP_FWD, V_STEP_PLAN, V_CHECK_PLAN, V_CHECK_RUN, VARIANTS };
static const char *const names[] = {
    "tiny: attn_forward", "tiny: attn_plan_run", "step: 32 x attn_forward",
    "step: plan + 32 x attn_plan_run", "checks: 32 x attn_plan_forward",
    "checks: 32 x attn_plan_run, refused"};
#define CALLS(v) ((v) <= V_TINY_PLAN ? 2000 : 20)

int main(int argc, char **argv)
{
    int reps = 15;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    /* tiny */
    const attn_shape ts = {1, 8, 8, 1, 64, 64, 0};
    float *tq = filled(8 * 64, 1), *tk = filled(8 * 64 * 64, 2), *tv = filled(8 * 64 * 64, 3);
    float *to = filled(8 * 64, 4);
    const attn_tensor tq_t = {tq, ATTN_DTYPE_F32, 8 * 64, 64, 64},
                      tk_t = {tk, ATTN_DTYPE_F32, 8 * 64 * 64, 64 * 64, 64},
                      tv_t = {tv, ATTN_DTYPE_F32, 8 * 64 * 64, 64 * 64, 64},
                      to_t = {to, ATTN_DTYPE_F32, 8 * 64, 64, 64};
    const attn_options none = ATTN_OPTIONS_INIT;
    size_t tbytes;
    bench_ok(attn_plan_size(&ts, &none, &tbytes), "attn_plan_size");
    void *tmem = malloc(tbytes);
    attn_plan *tplan;
    bench_ok(attn_plan_forward(tmem, tbytes, &ts, &none, &tq_t, &tk_t, &tv_t, &to_t, NULL, &tplan),
       "attn_plan_forward");

    /* step: B 4, Hq 32, Hkv 8, Lk 512 (kv_lens 512, 500, 300, 100), d 128 */
    const int64_t B = 4, HQ = 32, HKV = 8, LK = 512, D = 128;
    const attn_shape ss = {B, HQ, HKV, 1, LK, D, 0};
    const int32_t kv_lens[4] = {512, 500, 300, 100};
    attn_options so = ATTN_OPTIONS_INIT;
    so.kv_lens = kv_lens;
    float *sq = filled((size_t)(B * HQ * D), 5), *so_out = filled((size_t)(B * HQ * D), 6);
    float *lse = filled((size_t)(B * HQ), 7);
    float *sk[LAYERS], *sv[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        sk[l] = filled((size_t)(B * HKV * LK * D), 10 + (unsigned)l);
        sv[l] = filled((size_t)(B * HKV * LK * D), 50 + (unsigned)l);
    }
    const attn_tensor sq_t = {sq, ATTN_DTYPE_F32, HQ * D, D, D},
                      so_t = {so_out, ATTN_DTYPE_F32, HQ * D, D, D};
    attn_tensor sk_t = {sk[0], ATTN_DTYPE_F32, HKV * LK * D, LK * D, D}, sv_t = sk_t;
    sv_t.data = sv[0];
    const attn_row_stats st = {lse, NULL, NULL};
    size_t sbytes;
    bench_ok(attn_plan_size(&ss, &so, &sbytes), "attn_plan_size");
    void *smem = malloc(sbytes);

    double *t = calloc((size_t)(VARIANTS * reps), sizeof(double));
    for (int r = -1; r < reps; r++)
        for (int k = 0; k < VARIANTS; k++) {
            const int v = (k + (r < 0 ? 0 : r)) % VARIANTS;
            attn_plan *plan;
            const double t0 = bench_wall();
            for (int c = 0; c < CALLS(v); c++) {
                switch (v) {
                case V_TINY_FWD:
                    bench_ok(attn_forward(&ts, &none, &tq_t, &tk_t, &tv_t, &to_t, NULL), "forward");
                    break;
                case V_TINY_PLAN:
                    bench_ok(attn_plan_run(tplan, tq, tk, tv, to, NULL), "run");
                    break;
                case V_STEP_FWD:
                    for (int l = 0; l < LAYERS; l++) {
                        sk_t.data = sk[l], sv_t.data = sv[l];
                        bench_ok(attn_forward(&ss, &so, &sq_t, &sk_t, &sv_t, &so_t, &st), "forward");
                    }
                    break;
                case V_STEP_PLAN:
                    sk_t.data = sk[0], sv_t.data = sv[0];
                    bench_ok(attn_plan_forward(smem, sbytes, &ss, &so, &sq_t, &sk_t, &sv_t, &so_t, &st,
                                         &plan),
                       "plan");
                    for (int l = 0; l < LAYERS; l++)
                        bench_ok(attn_plan_run(plan, sq, sk[l], sv[l], so_out, &st), "run");
                    break;
                case V_CHECK_PLAN:
                    for (int l = 0; l < LAYERS; l++)
                        bench_ok(attn_plan_forward(smem, sbytes, &ss, &so, &sq_t, &sk_t, &sv_t, &so_t,
                                             &st, &plan),
                           "plan");
                    break;
                case V_CHECK_RUN:
                    bench_ok(attn_plan_forward(smem, sbytes, &ss, &so, &sq_t, &sk_t, &sv_t, &so_t, &st,
                                         &plan),
                       "plan");
                    for (int l = 0; l < LAYERS; l++)
                        if (attn_plan_run(plan, sq, sk[l], sv[l], sq, &st) != ATTN_ERR_STRIDE)
                            exit(1); /* out on q: refused after every check */
                    break;
                }
            }
            if (r >= 0)
                t[v * reps + r] = (bench_wall() - t0) / CALLS(v);
        }
    printf("plans, ISA %s, 1 thread; median / min of %d repetitions\n",
           attn_isa_name(attn_isa_active()), reps);
    double med[VARIANTS];
    for (int v = 0; v < VARIANTS; v++) {
        qsort(t + v * reps, (size_t)reps, sizeof(double), bench_cmp_double);
        med[v] = t[v * reps + reps / 2];
        printf("  %-38s %10.3f / %10.3f us\n", names[v], med[v] * 1e6, t[v * reps] * 1e6);
    }
    printf("  tiny: attn_forward / attn_plan_run          %.2f\n", med[V_TINY_FWD] / med[V_TINY_PLAN]);
    printf("  step: 32 calls / plan + 32 runs             %.3f\n", med[V_STEP_FWD] / med[V_STEP_PLAN]);
    printf("  step: saved per step                        %.2f us\n",
           (med[V_STEP_FWD] - med[V_STEP_PLAN]) * 1e6);
    printf("  checks: 32 validations / (1 + 32 run checks) %.1f\n",
           med[V_CHECK_PLAN] / med[V_CHECK_RUN]);
    return 0;
}

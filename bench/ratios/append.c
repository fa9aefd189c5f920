/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios append: the cache-append target as a ratio measured in one
 * process: one decode step's new K/V (one token per sequence) written into
 * 32 layers' paged caches, B=4 Hkv=8 d=128, pools of 16-slot blocks
 * (vLLM's [blocks][slots][heads][d]), shuffled block tables, 512 keys per
 * sequence, F32 new rows. Variants, each a whole 32-layer step:
 *   append     attn_cache_append into Q8_0 (and F16) pools;
 *   copy       memcpy of the bytes the Q8_0 append writes, row by row to
 *              the same slots, from rows encoded beforehand: the floor;
 *   quantize   what a caller does without the call: attn_quantize of each
 *              row into a buffer, then the same copy.
 * Each repetition times every variant once (STEPS steps each), in an order
 * that rotates per repetition; the report gives the median and minimum per
 * step over the repetitions and their ratios to `copy`.
 *
 * The pools and their block table are a paged decode problem of the problem
 * generator (every page its own block, shuffled), materialised once per
 * layer and dtype; the sequences' lengths are written into its description.
 *
 *   attn_ratios append [--reps N] [--only V]   (default 15 repetitions;
 *   --only: time variant V alone (0..3, in the order above), for a profiler)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/dtype_list.h"
#include "ratio_driver.h"

#define LAYERS 32
#define STEPS 50
#define B 4
#define HKV 8
#define D 128
#define LK 512
#define BS 16
#define Q8_UNITS (D / ATTN_QBLOCK)            /* blocks of a Q8_0 row */
#define Q8_ROW (Q8_UNITS * ATTN_Q8_0_BYTES) /* bytes of a Q8_0 row */

typedef struct layer {
    float *k_new, *v_new;         /* [B][HKV][1][D] */
    gen_bufs q8, f16;             /* the pools (k, v) and their table */
    unsigned char *k_enc, *v_enc; /* the new rows encoded beforehand (copy) */
} layer;

static const int32_t kv_lens[B] = {LK, LK - 7, LK - 100, 300};
static unsigned char scratch[B * HKV * Q8_ROW];

/* The decode problem whose K and V are the pools: Hq 32, Hkv 8, Lq 1, one
   query row and kv_lens keys per sequence, paged. */
static void describe(gen_problem *d, int32_t dtype)
{
    gen_profile p;
    ratio_profile_dims(&p, -1.0f, 1.0f, (ratio_dims){B, HKV, 4, 1, LK, D});
    gen_pin(&p, GEN_C_K_DTYPE, dtype);
    gen_pin(&p, GEN_C_OPT(q_lens), 1);
    gen_pin(&p, GEN_C_OPT(kv_lens), 1);
    gen_pin(&p, GEN_C_BLOCK_SIZE, BS);
    gen_pin(&p, GEN_C_POOL, GEN_POOL_SHUFFLED);
    ratio_draw(d, &p, 0);
    /* the generator draws full sequences; these are the target's (the pool
       holds every page of the longest either way) */
    for (int b = 0; b < B; b++)
        d->ints[ATTN_OPT_POS_kv_lens][b] = kv_lens[b];
}

static void step_append(layer *ls, int f16)
{
    for (int l = 0; l < LAYERS; l++) {
        const gen_bufs *m = f16 ? &ls[l].f16 : &ls[l].q8;
        const attn_tensor kn = {ls[l].k_new, ATTN_DTYPE_F32, HKV * D, D, D};
        const attn_tensor vn = {ls[l].v_new, ATTN_DTYPE_F32, HKV * D, D, D};
        ratio_ok(attn_cache_append(&m->shape, &m->opt, &kn, &vn, &m->t[GEN_K], &m->t[GEN_V]),
                 "attn_cache_append");
    }
}

static void step_copy(layer *ls, int quantize)
{
    for (int l = 0; l < LAYERS; l++)
        for (int c = 0; c < 2; c++) {
            const float *src = c ? ls[l].v_new : ls[l].k_new;
            const unsigned char *enc = c ? ls[l].v_enc : ls[l].k_enc;
            if (quantize) {
                ratio_ok(attn_quantize(ATTN_DTYPE_Q8_0, src, B * HKV, D, D, scratch, Q8_UNITS,
                                       0.0f),
                         "attn_quantize");
                enc = scratch;
            }
            for (int b = 0; b < B; b++)
                for (int h = 0; h < HKV; h++)
                    memcpy(gen_kv_row(&ls[l].q8, c ? GEN_V : GEN_K, b, h, kv_lens[b] - 1),
                           enc + (b * HKV + h) * Q8_ROW, Q8_ROW);
        }
}

enum { V_APPEND_Q8, V_APPEND_F16, V_COPY, V_QUANTIZE, VARIANTS };
static const char *const names[] = {"append Q8_0", "append F16", "copy (floor)",
                                    "quantize + copy"};

static void step(void *ctx, int v, int rep, int call)
{
    (void)rep, (void)call;
    if (v == V_APPEND_Q8 || v == V_APPEND_F16)
        step_append(ctx, v == V_APPEND_F16);
    else
        step_copy(ctx, v == V_QUANTIZE);
}

static int append_run(const ratio_args *a)
{
    const int reps = a->reps, only = ratio_opt_int(a, 0, -1);
    if (only < -1 || only >= VARIANTS) {
        fprintf(stderr, "attn_ratios append: --only 0..3\n");
        return 2;
    }
    gen_problem dq8, df16;
    describe(&dq8, ATTN_DTYPE_Q8_0);
    describe(&df16, ATTN_DTYPE_F16);
    uint64_t st = 0x9e3779b97f4a7c15u;
    layer *ls = calloc(LAYERS, sizeof(layer));
    if (!ls)
        return 1;
    for (int l = 0; l < LAYERS; l++) {
        ls[l].k_new = ratio_filled(B * HKV * D, -1.0f, 1.0f, &st);
        ls[l].v_new = ratio_filled(B * HKV * D, -1.0f, 1.0f, &st);
        ratio_materialise(&ls[l].q8, &dq8, 1, 0);
        ratio_materialise(&ls[l].f16, &df16, 1, 0);
        ls[l].k_enc = ratio_alloc(B * HKV * Q8_ROW);
        ls[l].v_enc = ratio_alloc(B * HKV * Q8_ROW);
        ratio_ok(attn_quantize(ATTN_DTYPE_Q8_0, ls[l].k_new, B * HKV, D, D, ls[l].k_enc, Q8_UNITS,
                               0.0f),
                 "attn_quantize");
        ratio_ok(attn_quantize(ATTN_DTYPE_Q8_0, ls[l].v_new, B * HKV, D, D, ls[l].v_enc, Q8_UNITS,
                               0.0f),
                 "attn_quantize");
    }
    /* the append writes what quantize + copy writes: checked once */
    step_append(ls, 0);
    for (int l = 0; l < LAYERS; l++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < HKV; h++)
                if (memcmp(gen_kv_row(&ls[l].q8, GEN_K, b, h, kv_lens[b] - 1),
                           ls[l].k_enc + (b * HKV + h) * Q8_ROW, Q8_ROW)) {
                    fprintf(stderr, "append and attn_quantize disagree\n");
                    return 1;
                }
    const ratio_loop lp = {.variants = VARIANTS, .reps = reps, .warmup = 0, .order = RATIO_ROTATE,
                           .each = ratio_calls(a, STEPS), .only = only, .call = step, .ctx = ls};
    ratio_stat s[VARIANTS];
    ratio_measure(&lp, s, NULL);
    const double bytes = (double)LAYERS * 2 * B * HKV * Q8_ROW;
    printf("cache append, one decode step of %d layers: B=%d Hkv=%d d=%d, one token per "
           "sequence, paged (block %d, shuffled), F32 new rows; %.0f bytes written (Q8_0)\n",
           LAYERS, B, HKV, D, BS, bytes);
    printf("%-16s %12s %12s %10s %10s\n", "variant", "median us", "min us", "med/copy",
           "min/copy");
    for (int v = 0; v < VARIANTS; v++)
        if (only < 0 || v == only)
            printf("%-16s %12.2f %12.2f %10.2f %10.2f\n", names[v], s[v].median * 1e6,
                   s[v].min * 1e6, s[v].median / s[V_COPY].median, s[v].min / s[V_COPY].min);
    for (int l = 0; l < LAYERS; l++) {
        free(ls[l].k_new), free(ls[l].v_new), free(ls[l].k_enc), free(ls[l].v_enc);
        gen_release(&ls[l].q8);
        gen_release(&ls[l].f16);
    }
    free(ls);
    gen_free(&dq8);
    gen_free(&df16);
    return 0;
}

RATIO_FAMILY(append, 15, RATIO_ONE_THREAD, NULL,
             "attn_cache_append of a 32-layer decode step into paged Q8_0/F16 pools vs a copy",
             {"--only", "V", "time variant V alone (0..3: append Q8_0, append F16, copy, "
                             "quantize + copy)"});

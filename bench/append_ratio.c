/* SPDX-License-Identifier: MIT */
/*
 * The cache-append target as a ratio measured in one process: one decode
 * step's new K/V (one token per sequence) written into 32 layers' paged
 * caches, B=4 Hkv=8 d=128, pools of 16-slot blocks (vLLM's
 * [blocks][slots][heads][d]), shuffled block tables, 512 keys per sequence,
 * F32 new rows. Variants, each a whole 32-layer step:
 *   append     attn_cache_append into Q8_0 (and F16) pools;
 *   copy       memcpy of the bytes the Q8_0 append writes, row by row to
 *              the same slots, from rows encoded beforehand: the floor;
 *   quantize   what a caller does without the call: attn_quantize of each
 *              row into a buffer, then the same copy.
 * Each repetition times every variant once (STEPS steps each), in an order
 * that rotates per repetition; the report gives the median and minimum per
 * step over the repetitions and their ratios to `copy`.
 *
 *   attn_append_ratio [--reps N] [--only V]   (default 15 repetitions; --only:
 *   time variant V alone (0..3, in the order above), for a profiler)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/dtype_list.h"
#include "attn.h"
#include "bench_util.h"

#define LAYERS 32
#define STEPS 50
#define B 4
#define HKV 8
#define D 128
#define LK 512
#define BS 16
#define PAGES (LK / BS)
#define NBLOCKS (B * PAGES)
#define Q8_UNITS (D / ATTN_QBLOCK)            /* blocks of a Q8_0 row */
#define Q8_ROW (Q8_UNITS * ATTN_Q8_0_BYTES) /* bytes of a Q8_0 row */

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

typedef struct layer {
    float *k_new, *v_new;               /* [B][HKV][1][D] */
    unsigned char *kq, *vq;             /* Q8_0 pools [NBLOCKS][BS][HKV] rows */
    unsigned short *kh, *vh;            /* F16 pools, same layout */
    unsigned char *k_enc, *v_enc;       /* the new rows encoded beforehand (copy) */
} layer;

static int32_t table[B * PAGES];
static int32_t q_lens[B] = {1, 1, 1, 1}, kv_lens[B] = {LK, LK - 7, LK - 100, 300};
static unsigned char scratch[B * HKV * Q8_ROW];

static attn_options options(void)
{
    attn_options o = ATTN_OPTIONS_INIT;
    o.q_lens = q_lens;
    o.kv_lens = kv_lens;
    o.block_table = table;
    o.block_table_stride = PAGES;
    o.block_size = BS;
    o.num_blocks = NBLOCKS;
    return o;
}

/* Where token position p of sequence b, head h lives in a pool of rows of
   `row` bytes. */
static unsigned char *slot(unsigned char *pool, int b, int h, int p, size_t row)
{
    const int64_t block = table[b * PAGES + p / BS];
    return pool + ((block * BS + p % BS) * HKV + h) * (int64_t)row;
}

static void step_append(layer *ls, int f16)
{
    const attn_shape s = {B, 4 * HKV, HKV, 1, LK, D, 0};
    const attn_options o = options();
    for (int l = 0; l < LAYERS; l++) {
        const attn_tensor kn = {ls[l].k_new, ATTN_DTYPE_F32, HKV * D, D, D};
        const attn_tensor vn = {ls[l].v_new, ATTN_DTYPE_F32, HKV * D, D, D};
        const int32_t dt = f16 ? ATTN_DTYPE_F16 : ATTN_DTYPE_Q8_0;
        const int64_t u = f16 ? D : Q8_UNITS; /* stride units per row */
        void *kp = f16 ? (void *)ls[l].kh : (void *)ls[l].kq;
        void *vp = f16 ? (void *)ls[l].vh : (void *)ls[l].vq;
        const attn_tensor kc = {kp, dt, BS * HKV * u, u, HKV * u};
        const attn_tensor vc = {vp, dt, BS * HKV * u, u, HKV * u};
        if (attn_cache_append(&s, &o, &kn, &vn, &kc, &vc) != ATTN_OK) {
            fprintf(stderr, "attn_cache_append failed\n");
            exit(1);
        }
    }
}

static void step_copy(layer *ls, int quantize)
{
    for (int l = 0; l < LAYERS; l++)
        for (int c = 0; c < 2; c++) {
            const float *src = c ? ls[l].v_new : ls[l].k_new;
            const unsigned char *enc = c ? ls[l].v_enc : ls[l].k_enc;
            unsigned char *pool = c ? ls[l].vq : ls[l].kq;
            if (quantize) {
                if (attn_quantize(ATTN_DTYPE_Q8_0, src, B * HKV, D, D, scratch, Q8_UNITS, 0.0f) !=
                    ATTN_OK)
                    exit(1);
                enc = scratch;
            }
            for (int b = 0; b < B; b++)
                for (int h = 0; h < HKV; h++)
                    memcpy(slot(pool, b, h, kv_lens[b] - 1, Q8_ROW),
                           enc + (b * HKV + h) * Q8_ROW, Q8_ROW);
        }
}

enum { V_APPEND_Q8, V_APPEND_F16, V_COPY, V_QUANTIZE, VARIANTS };
static const char *const names[] = {"append Q8_0", "append F16", "copy (floor)",
                                    "quantize + copy"};

int main(int argc, char **argv)
{
    int reps = 15, only = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--only V]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    uint64_t st = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < B * PAGES; i++)
        table[i] = i;
    for (int i = B * PAGES - 1; i > 0; i--) { /* shuffled blocks */
        st = st * 6364136223846793005u + 1442695040888963407u;
        const int r = (int)((st >> 33) % (uint64_t)(i + 1));
        const int32_t x = table[i];
        table[i] = table[r];
        table[r] = x;
    }
    layer *ls = xmalloc(sizeof(layer) * LAYERS);
    const size_t pool_rows = (size_t)NBLOCKS * BS * HKV;
    for (int l = 0; l < LAYERS; l++) {
        ls[l].k_new = xmalloc(B * HKV * D * 4);
        ls[l].v_new = xmalloc(B * HKV * D * 4);
        for (int i = 0; i < B * HKV * D; i++) {
            st = st * 6364136223846793005u + 1442695040888963407u;
            ls[l].k_new[i] = (float)((st >> 40) % 2001) / 1000.0f - 1.0f;
            ls[l].v_new[i] = (float)((st >> 20) % 2001) / 1000.0f - 1.0f;
        }
        ls[l].kq = xmalloc(pool_rows * Q8_ROW);
        ls[l].vq = xmalloc(pool_rows * Q8_ROW);
        ls[l].kh = xmalloc(pool_rows * D * 2);
        ls[l].vh = xmalloc(pool_rows * D * 2);
        ls[l].k_enc = xmalloc(B * HKV * Q8_ROW);
        ls[l].v_enc = xmalloc(B * HKV * Q8_ROW);
        attn_quantize(ATTN_DTYPE_Q8_0, ls[l].k_new, B * HKV, D, D, ls[l].k_enc, Q8_UNITS, 0.0f);
        attn_quantize(ATTN_DTYPE_Q8_0, ls[l].v_new, B * HKV, D, D, ls[l].v_enc, Q8_UNITS, 0.0f);
    }
    /* the append writes what quantize + copy writes: checked once */
    step_append(ls, 0);
    for (int l = 0; l < LAYERS; l++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < HKV; h++)
                if (memcmp(slot(ls[l].kq, b, h, kv_lens[b] - 1, Q8_ROW),
                           ls[l].k_enc + (b * HKV + h) * Q8_ROW, Q8_ROW)) {
                    fprintf(stderr, "append and attn_quantize disagree\n");
                    return 1;
                }
    double *t = xmalloc(sizeof(double) * VARIANTS * (size_t)reps);
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < VARIANTS; k++) {
            const int v = (k + r) % VARIANTS;
            if (only >= 0 && v != only) {
                t[v * reps + r] = 0.0;
                continue;
            }
            const double t0 = bench_wall();
            for (int s = 0; s < STEPS; s++) {
                if (v == V_APPEND_Q8 || v == V_APPEND_F16)
                    step_append(ls, v == V_APPEND_F16);
                else
                    step_copy(ls, v == V_QUANTIZE);
            }
            t[v * reps + r] = (bench_wall() - t0) / STEPS;
        }
    const double bytes = (double)LAYERS * 2 * B * HKV * Q8_ROW;
    printf("cache append, one decode step of %d layers: B=%d Hkv=%d d=%d, one token per "
           "sequence, paged (block %d, shuffled), F32 new rows; %.0f bytes written (Q8_0)\n",
           LAYERS, B, HKV, D, BS, bytes);
    printf("%-16s %12s %12s %10s %10s\n", "variant", "median us", "min us", "med/copy",
           "min/copy");
    double med[VARIANTS], mn[VARIANTS];
    for (int v = 0; v < VARIANTS; v++) {
        qsort(t + v * reps, (size_t)reps, sizeof(double), bench_cmp_double);
        med[v] = t[v * reps + reps / 2];
        mn[v] = t[v * reps];
    }
    for (int v = 0; v < VARIANTS; v++)
        if (only < 0 || v == only)
            printf("%-16s %12.2f %12.2f %10.2f %10.2f\n", names[v], med[v] * 1e6, mn[v] * 1e6,
                   med[v] / med[V_COPY], mn[v] / mn[V_COPY]);
    for (int l = 0; l < LAYERS; l++) {
        free(ls[l].k_new), free(ls[l].v_new), free(ls[l].kq), free(ls[l].vq);
        free(ls[l].kh), free(ls[l].vh), free(ls[l].k_enc), free(ls[l].v_enc);
    }
    free(ls);
    free(t);
    return 0;
}

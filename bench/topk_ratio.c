/* SPDX-License-Identifier: MIT */
/*
 * The top-k targets (attn.h, "Top-k sparse attention") as times measured
 * in one process, variants interleaved per repetition, one thread:
 *   decode   MLA-shaped (Hq 16, one latent KV head, d 576, v 512, BF16
 *            K = V's first 512 columns of the same rows), Lq 1: top-k 2048
 *            of 32768 keys vs the dense call over 2048 contiguous keys;
 *   prefill  256 query rows (Hq 8, Hkv 8, d 128, F32), top-k 512 of 8192,
 *            each row keeping 4 in 5 of the row before's keys: one call vs
 *            256 calls of one row each;
 *   fp8      the decode's top-k call on DeepSeek V3.2's FP8 rows read in
 *            place (656 bytes per token: 512 E4M3 with 4 f32 scales of 128
 *            channels, then the 64 rope values in bf16 as k's tail; attn.h
 *            1.8, 1.9) vs the same call on the bf16 latent (1152 bytes).
 * The caches are read from DRAM each call (the decode rotates copies past
 * the LLC). Median and minimum over the repetitions.
 *
 *   attn_topk_ratio [--reps N] [--splits N]   (defaults 9, 0: automatic)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "bench_util.h"

static void *alloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static uint64_t state = 88172645463325252ull;
static uint32_t next(void)
{
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return (uint32_t)(state >> 11);
}

static float *filled(size_t n)
{
    float *x = alloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(next() % 2001) / 1000.0f - 1.0f;
    return x;
}

static uint16_t *filled_bf16(size_t n)
{
    uint16_t *x = alloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        const float f = (float)(next() % 2001) / 1000.0f - 1.0f;
        uint32_t u;
        memcpy(&u, &f, 4);
        x[i] = (uint16_t)(u >> 16);
    }
    return x;
}

/* rows lists of k distinct keys of [0, lk), each keeping about `keep` in 5
   of the row before's. */
static int32_t *lists(int64_t rows, int64_t k, int64_t lk, unsigned keep)
{
    int32_t *l = alloc((size_t)(rows * k) * 4);
    unsigned char *seen = calloc((size_t)lk, 1);
    for (int64_t r = 0; r < rows; r++) {
        int32_t *row = l + r * k;
        int64_t n = 0;
        for (int64_t t = 0; r > 0 && t < k; t++)
            if (next() % 5 < keep && !seen[row[t - k]])
                seen[row[t - k]] = 1, row[n++] = row[t - k];
        while (n < k) {
            const int32_t j = (int32_t)(next() % (uint32_t)lk);
            if (!seen[j])
                seen[j] = 1, row[n++] = j;
        }
        for (int64_t t = 0; t < k; t++)
            seen[row[t]] = 0;
    }
    free(seen);
    return l;
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
    return x[n / 2];
}

int main(int argc, char **argv)
{
    int reps = 9, splits = 0, only = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--splits") && i + 1 < argc)
            splits = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) /* profiling: 0..4 */
            only = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--splits N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;

    /* decode: 6 copies of a 32768-key latent cache (226 MiB) rotate past the LLC */
    enum { COPIES = 6 };
    const int64_t D = 576, DV = 512, LK = 32768, TOPK = 2048, HQ = 16;
    uint16_t *cache[COPIES];
    for (int c = 0; c < COPIES; c++)
        cache[c] = filled_bf16((size_t)(LK * D));
    float *q = filled((size_t)(HQ * D)), *out = alloc((size_t)(HQ * DV) * 4);
    int32_t *idx = lists(1, TOPK, LK, 0);
    attn_tensor tq = {q, ATTN_DTYPE_F32, HQ * D, D, D};
    attn_tensor to = {out, ATTN_DTYPE_F32, HQ * DV, DV, DV};
    const attn_shape sparse = {1, HQ, 1, 1, LK, D, DV}, dense = {1, HQ, 1, 1, TOPK, D, DV};
    attn_options os = ATTN_OPTIONS_INIT, od = ATTN_OPTIONS_INIT;
    os.topk_indices = idx;
    os.topk = TOPK;
    os.kv_splits = od.kv_splits = splits;
    size_t ws_s = 0, ws_d = 0;
    bench_ok(attn_forward_workspace_size(&sparse, &os, &ws_s), "workspace");
    bench_ok(attn_forward_workspace_size(&dense, &od, &ws_d), "workspace");
    os.workspace = ws_s ? alloc(ws_s) : NULL, os.workspace_size = ws_s;
    od.workspace = ws_d ? alloc(ws_d) : NULL, od.workspace_size = ws_d;

    /* DeepSeek V3.2's FP8 rows: 656 bytes, in place (k, its scales and tail
       inside each row; v = k's 512 values) */
    enum { ROW = 656, G = 128 };
    unsigned char *rows8[COPIES];
    for (int c = 0; c < COPIES; c++) {
        unsigned char *x = alloc((size_t)(LK * ROW));
        for (int64_t j = 0; j < LK; j++) {
            unsigned char *r = x + j * ROW;
            for (int i = 0; i < DV; i++) {
                r[i] = (unsigned char)(next() & 0xff);
                if ((r[i] & 0x7f) == 0x7f) /* not NaN */
                    r[i] ^= 1;
            }
            for (int gi = 0; gi < DV / G; gi++) {
                const float s = (float)(1 + next() % 64) / 4096.0f;
                memcpy(r + DV + 4 * gi, &s, 4);
            }
            uint16_t *rope = filled_bf16(D - DV);
            memcpy(r + DV + 4 * (DV / G), rope, (size_t)(D - DV) * 2);
            free(rope);
        }
        rows8[c] = x;
    }
    attn_options o8 = os;
    o8.k_scale_group = o8.v_scale_group = G;
    o8.k_tail_dim = D - DV;

    /* prefill: 256 rows, top-k 512 of 8192 */
    const int64_t PL = 256, PK = 8192, PT = 512, PH = 8, PD = 128;
    float *pq = filled((size_t)(PH * PL * PD)), *pk = filled((size_t)(PH * PK * PD));
    float *pv = filled((size_t)(PH * PK * PD)), *po = alloc((size_t)(PH * PL * PD) * 4);
    int32_t *pidx = lists(PL, PT, PK, 4);
    const attn_shape pre = {1, PH, PH, PL, PK, PD, 0}, one = {1, PH, PH, 1, PK, PD, 0};
    attn_tensor pkt = {pk, ATTN_DTYPE_F32, PH * PK * PD, PK * PD, PD};
    attn_tensor pvt = {pv, ATTN_DTYPE_F32, PH * PK * PD, PK * PD, PD};
    attn_options op = ATTN_OPTIONS_INIT;
    op.topk_indices = pidx;
    op.topk = PT;

    double *t[5];
    for (int v = 0; v < 5; v++)
        t[v] = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) {
        for (int v = 0; v < 2; v++) { /* decode: 20 calls each, copies rotated */
            if (only >= 0 && only != v)
                continue;
            const double t0 = bench_wall();
            for (int c = 0; c < 20; c++) {
                const uint16_t *kv = cache[(c + r) % COPIES];
                /* the dense call's 2048 keys: a contiguous stretch of the cache */
                const uint16_t *at = v ? kv + (size_t)(c % 16) * (size_t)(TOPK * D) : kv;
                attn_tensor tk = {(void *)at, ATTN_DTYPE_BF16, LK * D, D, D};
                attn_tensor tv = {(void *)at, ATTN_DTYPE_BF16, LK * D, D, D};
                bench_ok(attn_forward(v ? &dense : &sparse, v ? &od : &os, &tq, &tk, &tv, &to,
                                      NULL),
                         "decode");
            }
            t[v][r] = (bench_wall() - t0) / 20.0;
        }
        if (only < 0 || only == 4) { /* the FP8 rows, copies rotated likewise */
            const double t0 = bench_wall();
            for (int c = 0; c < 20; c++) {
                unsigned char *x = rows8[(c + r) % COPIES];
                attn_tensor tk = {x, ATTN_DTYPE_FP8_E4M3, LK * ROW, ROW, ROW};
                attn_tensor ts = {x + DV, ATTN_DTYPE_F32, LK * ROW / 4, ROW / 4, ROW / 4};
                attn_tensor tt = {x + DV + 4 * (DV / G), ATTN_DTYPE_BF16, LK * ROW / 2, ROW / 2,
                                  ROW / 2};
                attn_options oc = o8;
                oc.k_scales = oc.v_scales = &ts;
                oc.k_tail = &tt;
                bench_ok(attn_forward(&sparse, &oc, &tq, &tk, &tk, &to, NULL), "fp8 rows");
            }
            t[4][r] = (bench_wall() - t0) / 20.0;
        }
        if (only < 0 || only == 2) {
            const double t0 = bench_wall();
            attn_tensor tpq = {pq, ATTN_DTYPE_F32, PH * PL * PD, PL * PD, PD};
            attn_tensor tpo = {po, ATTN_DTYPE_F32, PH * PL * PD, PL * PD, PD};
            bench_ok(attn_forward(&pre, &op, &tpq, &pkt, &pvt, &tpo, NULL), "prefill");
            t[2][r] = bench_wall() - t0;
        }
        if (only < 0 || only == 3) {
            const double t0 = bench_wall();
            for (int64_t i = 0; i < PL; i++) { /* row i alone: its q row, out row, list */
                attn_tensor tpq = {pq + i * PD, ATTN_DTYPE_F32, PH * PL * PD, PL * PD, PD};
                attn_tensor tpo = {po + i * PD, ATTN_DTYPE_F32, PH * PL * PD, PL * PD, PD};
                attn_options o1 = op;
                o1.topk_indices = pidx + i * PT;
                o1.flags = 0;
                bench_ok(attn_forward(&one, &o1, &tpq, &pkt, &pvt, &tpo, NULL), "row");
            }
            t[3][r] = bench_wall() - t0;
        }
    }
    double m[5], lo[5];
    for (int v = 0; v < 5; v++) {
        m[v] = median(t[v], reps);
        lo[v] = t[v][0];
    }
    printf("decode  MLA Hq 16, bf16 latent 576/512, top-k 2048 of 32768: %.3f ms (min %.3f)\n",
           m[0] * 1e3, lo[0] * 1e3);
    printf("decode  dense over 2048 contiguous keys of the same shape:     %.3f ms (min %.3f)\n",
           m[1] * 1e3, lo[1] * 1e3);
    printf("        ratio %.2f (median) %.2f (min)   target <= 1.3\n", m[0] / m[1],
           lo[0] / lo[1]);
    printf("prefill 256 rows, top-k 512 of 8192, 4/5 shared, one call:     %.2f ms (min %.2f)\n",
           m[2] * 1e3, lo[2] * 1e3);
    printf("prefill the same as 256 one-row calls:                         %.2f ms (min %.2f)\n",
           m[3] * 1e3, lo[3] * 1e3);
    printf("        speedup %.2f (median) %.2f (min)   target >= 2\n", m[3] / m[2], lo[3] / lo[2]);
    printf("fp8     the decode's top-k call on DeepSeek V3.2 FP8 rows:     %.3f ms (min %.3f)\n",
           m[4] * 1e3, lo[4] * 1e3);
    printf("        ratio to the bf16 latent %.2f (median) %.2f (min)   bytes %.2f\n",
           m[4] / m[0], lo[4] / lo[0], (double)ROW / (double)(2 * D));
    return 0;
}

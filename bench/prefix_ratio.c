/* SPDX-License-Identifier: MIT */
/*
 * The shared-prefix targets (attn.h, "Shared prefixes") as times measured
 * in one process, variants interleaved per repetition:
 *
 *   shared     16 sequences decoding (Lq 1, Hq 32, Hkv 8, d 128) against one
 *              4096-key prefix plus 256 keys each: shared_prefix with the
 *              workspace (the prefix attended once for the 16 x 4 rows of
 *              each KV head);
 *   chain      the same without the workspace (each sequence reads the
 *              prefix, from the first sequence's storage);
 *   unshared   16 independent decodes, each over its own copy of the
 *              prefix (no shared_prefix): what an engine pays today;
 *   floor      a plain read of the bytes the shared call must read (the
 *              prefix once, the suffixes once), from another copy.
 *
 * K and V are contiguous [B][Hkv][Lk][d] (F16 by default, --kv f32|bf16),
 * in COPIES copies that the calls take in turn, so every call reads from
 * DRAM as a decode step does. T* = max(shared bytes / floor bandwidth,
 * FLOPs / the FMA peak), the peak measured in this process with the loops
 * `attn run` uses (tools/peak_loops.h). Prints min and median per variant,
 * and the ratios the targets name: shared / T* (<= 1.3) and unshared /
 * shared (>= 6).
 *
 *   attn_prefix_ratio [--reps N] [--kv f16|f32|bf16] [--threads N]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "bench_util.h"
#include "../tools/peak_loops.h"

enum { B = 16, HQ = 32, HKV = 8, D = 128, PREFIX = 4096, OWN = 256, LK = PREFIX + OWN };
#define COPIES 4

static void *alloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Values in [-1, 1] as the dtype's bits (f16/bf16 from a float). */
static void fill(void *dst, int32_t dt, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        const float x = (float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
        if (dt == ATTN_DTYPE_F32) {
            ((float *)dst)[i] = x;
        } else {
            uint32_t u;
            memcpy(&u, &x, 4);
            ((uint16_t *)dst)[i] = dt == ATTN_DTYPE_BF16
                                       ? (uint16_t)(u >> 16)
                                       /* an f16 of the same magnitude class: exact enough */
                                       : (uint16_t)(((u >> 16) & 0x8000) |
                                                    (x == 0.0f ? 0 : ((((u >> 23) & 0xff) - 112) << 10) |
                                                                         ((u >> 13) & 0x3ff)));
        }
    }
}

static volatile uint64_t read_sink;
/* A plain read of n bytes (8 independent sums: bandwidth-bound). */
static void read_bytes(const void *p, size_t n)
{
    const uint64_t *x = p;
    uint64_t a[8] = {0};
    for (size_t i = 0; i + 8 <= n / 8; i += 8)
        for (int k = 0; k < 8; k++)
            a[k] += x[i + (size_t)k];
    read_sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

static volatile float peak_sink;
/* FLOP/s of the widest FMA loop on this thread (best of 20 x ~1 ms):
   AVX-512 or AVX2 on x86-64, NEON on AArch64, else the scalar loop. */
static double fma_peak(void)
{
    static volatile float m = 0.9999f, a = 0.001f;
    double best = 0;
    for (int r = 0; r < 20; r++) {
        const int64_t rounds = 200000;
        double per_round;
        const double t0 = bench_wall();
#if defined(PEAK_X86)
        const int wide = __builtin_cpu_supports("avx512f");
        per_round = wide ? 16.0 * 16 * 2 : 12.0 * 8 * 2;
        peak_sink = wide ? fma_loop_avx512(rounds, m, a) : fma_loop_avx2(rounds, m, a);
#elif defined(PEAK_NEON)
        per_round = 16.0 * 4 * 2;
        peak_sink = fma_loop_neon(rounds, m, a);
#else
        per_round = 12.0 * 2;
        peak_sink = fma_loop_scalar(rounds, m, a);
#endif
        const double f = per_round * (double)rounds / (bench_wall() - t0);
        best = f > best ? f : best;
    }
    return best;
}

enum { V_SHARED, V_CHAIN, V_UNSHARED, V_FLOOR, VARIANTS };
static const char *const names[] = {"shared (workspace: prefix once)",
                                    "chain (no workspace: prefix per sequence)",
                                    "unshared (16 prefix copies)", "floor (read the shared bytes)"};

int main(int argc, char **argv)
{
    int reps = 11, threads = 1;
    int32_t dt = ATTN_DTYPE_F16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kv") && i + 1 < argc) {
            ++i;
            dt = !strcmp(argv[i], "f32")    ? ATTN_DTYPE_F32
                 : !strcmp(argv[i], "bf16") ? ATTN_DTYPE_BF16
                                            : ATTN_DTYPE_F16;
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--kv f16|f32|bf16] [--threads N]\n", argv[0]);
            return 2;
        }
    }
    reps = reps < 1 ? 1 : reps;
    const size_t es = dt == ATTN_DTYPE_F32 ? 4 : 2;
    const size_t per_head = (size_t)LK * D, n = (size_t)B * HKV * per_head;
    const attn_shape shape = {B, HQ, HKV, 1, LK, D, 0};

    /* K/V copies; every sequence's prefix is the first sequence's, so the
       unshared call (its own copy per sequence) computes the same problem */
    void *k[COPIES], *v[COPIES];
    for (int c = 0; c < COPIES; c++) {
        k[c] = alloc(n * es);
        v[c] = alloc(n * es);
        fill(k[c], dt, n, 11u + (unsigned)c);
        fill(v[c], dt, n, 23u + (unsigned)c);
        for (int b = 1; b < B; b++)
            for (int h = 0; h < HKV; h++) {
                const size_t to = ((size_t)b * HKV + (size_t)h) * per_head * es;
                const size_t from = (size_t)h * per_head * es;
                memcpy((char *)k[c] + to, (char *)k[c] + from, (size_t)PREFIX * D * es);
                memcpy((char *)v[c] + to, (char *)v[c] + from, (size_t)PREFIX * D * es);
            }
    }
    /* the floor's buffers: the shared call's bytes, in copies of their own */
    const size_t shared_bytes = (size_t)2 * HKV * ((size_t)PREFIX + (size_t)B * OWN) * D * es;
    void *fl[COPIES];
    for (int c = 0; c < COPIES; c++) {
        fl[c] = alloc(shared_bytes);
        memset(fl[c], c + 1, shared_bytes);
    }
    float *q = alloc((size_t)B * HQ * D * 4), *out = alloc((size_t)B * HQ * D * 4);
    fill(q, ATTN_DTYPE_F32, (size_t)B * HQ * D, 5);
    const attn_tensor qt = {q, ATTN_DTYPE_F32, HQ * D, D, D}, ot = {out, ATTN_DTYPE_F32, HQ * D, D, D};

    int32_t shared[B];
    shared[0] = 0;
    for (int b = 1; b < B; b++)
        shared[b] = PREFIX;
    attn_threadpool *pool = NULL;
    attn_options base = ATTN_OPTIONS_INIT;
    base.flags = ATTN_CAUSAL;
    if (threads > 1) {
        bench_ok(attn_threadpool_create(threads, &pool), "attn_threadpool_create");
        base.parallel_for = attn_threadpool_parallel_for;
        base.parallel_ctx = pool;
    }
    attn_options opt[3] = {base, base, base};
    opt[V_SHARED].shared_prefix = shared;
    opt[V_CHAIN].shared_prefix = shared;
    size_t ws_bytes[3] = {0, 0, 0};
    void *ws[3] = {NULL, NULL, NULL};
    /* the workspace each call asks for (unshared and chain: what split-KV
       asks for, so they split as any decode would; chain: none of the
       prefix's, so it reads the prefix per sequence) */
    bench_ok(attn_forward_workspace_size(&shape, &opt[V_SHARED], &ws_bytes[V_SHARED]),
       "workspace size");
    bench_ok(attn_forward_workspace_size(&shape, &opt[V_UNSHARED], &ws_bytes[V_UNSHARED]),
       "workspace size");
    ws_bytes[V_CHAIN] = ws_bytes[V_UNSHARED];
    for (int x = 0; x < 3; x++)
        if (ws_bytes[x]) {
            ws[x] = alloc(ws_bytes[x]);
            opt[x].workspace = ws[x];
            opt[x].workspace_size = ws_bytes[x];
        }

    const double peak = fma_peak() * threads;
    double *t = calloc((size_t)(VARIANTS * reps), sizeof(double));
    int copy = 0;
    for (int r = -1; r < reps; r++)
        for (int x = 0; x < VARIANTS; x++) {
            copy = (copy + 1) % COPIES;
            const double t0 = bench_wall();
            if (x == V_FLOOR) {
                read_bytes(fl[copy], shared_bytes);
            } else {
                const attn_tensor kt = {k[copy], dt, HKV * (int64_t)per_head, (int64_t)per_head, D};
                attn_tensor vt = kt;
                vt.data = v[copy];
                bench_ok(attn_forward(&shape, &opt[x], &qt, &kt, &vt, &ot, NULL), names[x]);
            }
            if (r >= 0)
                t[x * reps + r] = bench_wall() - t0;
        }
    const double flops = 4.0 * B * HQ * (double)LK * D;
    double med[VARIANTS], min[VARIANTS];
    printf("shared prefix: B %d, Hq %d, Hkv %d, d %d, Lq 1, prefix %d + %d own keys each, %s K/V, "
           "%d thread(s), %d reps (min / median)\n",
           B, HQ, HKV, D, PREFIX, OWN, dt == ATTN_DTYPE_F32 ? "F32" : dt == ATTN_DTYPE_BF16 ? "BF16" : "F16",
           threads, reps);
    for (int x = 0; x < VARIANTS; x++) {
        qsort(t + x * reps, (size_t)reps, sizeof(double), bench_cmp_double);
        min[x] = t[x * reps];
        med[x] = t[x * reps + reps / 2];
        printf("  %-44s %9.3f ms  %9.3f ms\n", names[x], 1e3 * min[x], 1e3 * med[x]);
    }
    const double bw = (double)shared_bytes / med[V_FLOOR];
    const double t_bytes = (double)shared_bytes / bw, t_flops = peak > 0 ? flops / peak : 0;
    const double tstar = t_bytes > t_flops ? t_bytes : t_flops;
    printf("  shared bytes %.1f MiB at %.1f GB/s: %.3f ms; %.2f GFLOP at %.0f GFLOP/s peak: %.3f ms\n",
           (double)shared_bytes / 1048576.0, bw / 1e9, 1e3 * t_bytes, flops / 1e9, peak / 1e9,
           1e3 * t_flops);
    printf("  T* %.3f ms (%s-bound)\n", 1e3 * tstar, t_bytes > t_flops ? "memory" : "compute");
    printf("  ratio shared / T*          %.2f (median), %.2f (min)  (target <= 1.3)\n",
           med[V_SHARED] / tstar, min[V_SHARED] / tstar);
    printf("  ratio unshared / shared    %.2f (medians)  (target >= 6)\n",
           med[V_UNSHARED] / med[V_SHARED]);
    printf("  ratio chain / shared       %.2f (medians)\n", med[V_CHAIN] / med[V_SHARED]);
    attn_threadpool_destroy(pool);
    free(t);
    return 0;
}

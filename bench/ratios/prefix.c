/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios prefix: the shared-prefix targets (attn.h, "Shared prefixes")
 * as times measured in one process, variants interleaved per repetition:
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
 * the problem generator's, materialised in COPIES copies that the calls
 * take in turn, so every call reads from DRAM as a decode step does.
 * T* = max(shared bytes / floor bandwidth, FLOPs / the FMA peak), the peak
 * measured in this process. Prints min and median per variant, and the
 * ratios the targets name: shared / T* (<= 1.3) and unshared / shared
 * (>= 6).
 *
 *   attn_ratios prefix [--reps N] [--kv f16|f32|bf16] [--threads N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

enum { B = 16, HQ = 32, HKV = 8, D = 128, PREFIX = 4096, OWN = 256, LK = PREFIX + OWN };
#define COPIES 4

enum { V_SHARED, V_CHAIN, V_UNSHARED, V_FLOOR, VARIANTS };
static const char *const names[] = {"shared (workspace: prefix once)",
                                    "chain (no workspace: prefix per sequence)",
                                    "unshared (16 prefix copies)", "floor (read the shared bytes)"};

typedef struct prefix {
    gen_problem d;
    gen_bufs m[COPIES];
    void *floor[COPIES];
    size_t shared_bytes;
    attn_options opt[3];
    int copy; /* the copy the next sample reads */
} prefix;

static void call(void *ctx, int x, int rep, int c)
{
    (void)rep, (void)c;
    prefix *p = ctx;
    p->copy = (p->copy + 1) % COPIES;
    if (x == V_FLOOR) {
        ratio_read(p->floor[p->copy], p->shared_bytes);
        return;
    }
    const gen_bufs *m = &p->m[p->copy], *m0 = &p->m[0];
    ratio_ok(attn_forward(&m0->shape, &p->opt[x], &m0->t[GEN_Q], &m->t[GEN_K], &m->t[GEN_V],
                          &m0->t[GEN_OUT], NULL),
             names[x]);
}

static int prefix_run(const ratio_args *a)
{
    const int reps = a->reps, threads = a->threads;
    const char *kv = a->opt[0] ? a->opt[0] : "f16";
    const int32_t dt = !strcmp(kv, "f32")    ? ATTN_DTYPE_F32
                       : !strcmp(kv, "bf16") ? ATTN_DTYPE_BF16
                       : !strcmp(kv, "f16")  ? ATTN_DTYPE_F16
                                             : -1;
    if (dt < 0 || threads < 1) {
        fprintf(stderr, "attn_ratios prefix: --kv f16|f32|bf16, --threads N >= 1\n");
        return 2;
    }
    const size_t es = dt == ATTN_DTYPE_F32 ? 4 : 2;
    prefix p;
    memset(&p, 0, sizeof p);

    /* every sequence shares the first 4096 keys of the one before (all of
       them: the first sequence's) */
    gen_profile pr;
    ratio_profile_dims(&pr, -1.0f, 1.0f, (ratio_dims){B, HKV, HQ / HKV, 1, LK, D});
    gen_pin(&pr, GEN_C_K_DTYPE, dt);
    gen_pin(&pr, GEN_C_OPT(flags), ATTN_CAUSAL);
    gen_pin(&pr, GEN_C_OPT(shared_prefix), 1);
    gen_pin(&pr, GEN_C_SHARED, GEN_SHARED_ALL);
    gen_pin(&pr, GEN_C_SHARED_KEYS, PREFIX);
    ratio_draw(&p.d, &pr, 0);
    /* the copies; in each, every sequence's own prefix rows hold the first
       sequence's, so the unshared call computes the same problem */
    for (int c = 0; c < COPIES; c++) {
        gen_bufs *m = &p.m[c];
        ratio_materialise(m, &p.d, 1 + (uint64_t)c, GEN_M_OUT);
        for (int r = GEN_K; r <= GEN_V; r++)
            for (int b = 1; b < B; b++)
                for (int h = 0; h < HKV; h++)
                    memcpy(gen_at(&m->t[r], b, h, 0, 0), gen_at(&m->t[r], 0, h, 0, 0),
                           (size_t)PREFIX * D * es);
    }
    /* the floor's buffers: the shared call's bytes, in copies of their own */
    p.shared_bytes = (size_t)2 * HKV * ((size_t)PREFIX + (size_t)B * OWN) * D * es;
    for (int c = 0; c < COPIES; c++) {
        p.floor[c] = ratio_alloc(p.shared_bytes);
        memset(p.floor[c], c + 1, p.shared_bytes);
    }

    attn_threadpool *pool = ratio_pool(threads);
    attn_options base = p.m[0].opt;
    ratio_use_pool(&base, pool);
    for (int x = 0; x < 3; x++)
        p.opt[x] = base;
    p.opt[V_UNSHARED].shared_prefix = NULL;
    /* the workspace each call asks for (unshared and chain: what split-KV
       asks for, so they split as any decode would; chain: none of the
       prefix's, so it reads the prefix per sequence) */
    const attn_shape *shape = &p.m[0].shape;
    ratio_workspace(&p.opt[V_SHARED], shape, NULL);
    ratio_workspace(&p.opt[V_CHAIN], shape, &p.opt[V_UNSHARED]);
    ratio_workspace(&p.opt[V_UNSHARED], shape, NULL);

    const double peak = ratio_fma_peak() * threads;
    const ratio_loop l = {.variants = VARIANTS, .reps = reps, .warmup = 1, .order = RATIO_IN_TURN,
                          .only = -1, .call = call, .ctx = &p};
    ratio_stat s[VARIANTS];
    ratio_measure(&l, s, NULL);
    const double flops = 4.0 * B * HQ * (double)LK * D;
    printf("shared prefix: B %d, Hq %d, Hkv %d, d %d, Lq 1, prefix %d + %d own keys each, %s K/V, "
           "%d thread(s), %d reps (min / median)\n",
           B, HQ, HKV, D, PREFIX, OWN, dt == ATTN_DTYPE_F32 ? "F32" : dt == ATTN_DTYPE_BF16 ? "BF16" : "F16",
           threads, reps);
    for (int x = 0; x < VARIANTS; x++)
        printf("  %-44s %9.3f ms  %9.3f ms\n", names[x], 1e3 * s[x].min, 1e3 * s[x].median);
    const double bw = (double)p.shared_bytes / s[V_FLOOR].median;
    const double t_bytes = (double)p.shared_bytes / bw, t_flops = peak > 0 ? flops / peak : 0;
    const double tstar = t_bytes > t_flops ? t_bytes : t_flops;
    printf("  shared bytes %.1f MiB at %.1f GB/s: %.3f ms; %.2f GFLOP at %.0f GFLOP/s peak: %.3f ms\n",
           (double)p.shared_bytes / 1048576.0, bw / 1e9, 1e3 * t_bytes, flops / 1e9, peak / 1e9,
           1e3 * t_flops);
    printf("  T* %.3f ms (%s-bound)\n", 1e3 * tstar, t_bytes > t_flops ? "memory" : "compute");
    ratio_print_ratio(21, "shared / T*", "%.2f (median), %.2f (min)  (target <= 1.3)\n",
                      s[V_SHARED].median / tstar, s[V_SHARED].min / tstar);
    ratio_print_ratio(21, "unshared / shared", "%.2f (medians)  (target >= 6)\n",
                      s[V_UNSHARED].median / s[V_SHARED].median);
    ratio_print_ratio(21, "chain / shared", "%.2f (medians)\n",
                      s[V_CHAIN].median / s[V_SHARED].median);

    attn_threadpool_destroy(pool);
    for (int x = 0; x < 3; x++)
        free(p.opt[x].workspace);
    for (int c = 0; c < COPIES; c++) {
        free(p.floor[c]);
        gen_release(&p.m[c]);
    }
    gen_free(&p.d);
    return 0;
}

RATIO_FAMILY(prefix, 11, 1, "threads",
             "16 decodes on one 4096-key shared prefix vs per-sequence copies, and T*",
             {"--kv", "f16|f32|bf16", "the K/V dtype (default f16)"});

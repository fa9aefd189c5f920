/* SPDX-License-Identifier: MIT */
/*
 * The quantized K/V and precision-mode targets as ratios measured in one
 * process:
 *   decode  B=1 Lq=1 Lk=4096 Hq=32 Hkv=8 d=128: every quantized K/V
 *           dtype of src/dtype_list.h, the block formats (Q8_0, ...) each
 *           also in the int8 mode, the FP8 ones each also with one scale
 *           per token and head (".rows": attn_options.k_scales/v_scales,
 *           a scale array per layer) and per group of 64 channels of a
 *           token and head (".g64": k_scale_group/v_scale_group), vs F16
 *           K/V
 *   prefill B=1 Hq=Hkv=8 L=2048 d=128 causal:   Q8_0 (default and int8
 *           mode), F32 in the bf16 mode, BF16 q/k/v (default and bf16
 *           mode) vs F32
 * Each repetition times every variant once, in an order shuffled per
 * repetition (so drifting machine load hits all alike); the report gives,
 * per variant, the median and the minimum over the repetitions, and their
 * ratios to the reference variant. On a loaded machine the minimum is the
 * better estimate of the unloaded time (a call can only be slowed down by
 * preemption), the median shows how noisy the run was.
 *
 *   attn_quant_ratio [--reps N] [--threads N] [--isa NAME] [--decode-calls N]
 *   (defaults: 9 repetitions; decode: 1 call per repetition, 9 x LAYERS of them)
 *
 * The problems come from the problem generator (gen/gen.h); the caches are
 * quantized from the same f32 values with attn_quantize.
 * Decode cycles through LAYERS copies of each cache, as a model's decode
 * step reads one cache per layer: together they exceed the last-level
 * cache, so every call streams its K and V from memory as in an engine (a
 * single 9 MB Q8_0 cache called again and again would stay in a large L3
 * and flatter the small formats).
 */
#define LAYERS 12
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/dtype_list.h"
#include "attn.h"
#include "bench_util.h"
#include "gen.h"

#define MAX_VARIANTS 16 /* run()'s arrays */

/* The order of the variants in a repetition (a permutation per repetition). */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

typedef struct variant {
    const char *suffix; /* the name is the dtype's (src/dtype_list.h) and this */
    char name[32];
    int32_t dtype;
    int64_t precision; /* attn_options.precision (attn.h) */
    int32_t q_dtype;   /* 0: F32 */
    int rows;          /* FP8 scales per row (k_scales, v_scales), all 1 */
    int64_t group;     /* with rows: channels per scale (k_scale_group), 0: a row */
    gen_problem g; /* the problem, from the generator (gen/gen.h) */
    gen_bufs m;
    void *k[LAYERS], *v[LAYERS]; /* layer 0: m's own; prefill uses layer 0 only */
    float *ks[LAYERS], *vs[LAYERS]; /* rows: each layer's scales [Hkv][Lk][groups] */
    double *times;
} variant;

static int dtype_kind(int32_t t) { ATTN_DTYPE_GET(t, kind, -1) }

static int dtype_kv(int32_t t) { ATTN_DTYPE_GET(t, kv, 0) }

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/*
 * The variant's problem: the shape pinned, K and V of its dtype (the block
 * formats and FP8 quantized by attn_quantize from the f32 values every
 * variant draws alike: the same seed and stream), and `layers` copies of
 * its caches.
 */
static void make_variant(variant *v, const attn_shape *s, int causal, int layers)
{
    gen_profile p;
    gen_profile_init(&p);
    p.work_cap = 0;
    gen_pin(&p, GEN_C_BATCH, s->batch);
    gen_pin(&p, GEN_C_KV_HEADS, s->kv_heads);
    gen_pin(&p, GEN_C_GROUP, s->q_heads / s->kv_heads);
    gen_pin(&p, GEN_C_Q_LEN, s->q_len);
    gen_pin(&p, GEN_C_KV_LEN, s->kv_len);
    gen_pin(&p, GEN_C_HEAD_DIM, s->head_dim);
    gen_pin(&p, GEN_C_K_DTYPE, v->dtype);
    if (v->q_dtype)
        gen_pin(&p, GEN_C_Q_DTYPE, v->q_dtype);
    gen_pin(&p, GEN_C_OPT(flags), causal ? ATTN_CAUSAL : 0);
    for (int r = GEN_Q; r <= GEN_V; r++)
        p.val[r].lo = -1.0f, p.val[r].hi = 1.0f;
    gen_src fixed = {NULL, NULL};
    gen_draw(&v->g, &fixed, &p);
    if (gen_materialise(&v->m, &v->g, 1, GEN_M_OUT, NULL) != 0) {
        fprintf(stderr, "%s: out of memory, or attn_quantize failed\n", v->name);
        exit(1);
    }
    v->k[0] = v->m.data[GEN_K];
    v->v[0] = v->m.data[GEN_V];
    for (int l = 1; l < layers; l++) {
        v->k[l] = malloc(v->m.bytes[GEN_K]);
        v->v[l] = malloc(v->m.bytes[GEN_V]);
        if (!v->k[l] || !v->v[l]) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        memcpy(v->k[l], v->k[0], v->m.bytes[GEN_K]);
        memcpy(v->v[l], v->v[0], v->m.bytes[GEN_V]);
    }
    for (int l = 0; v->rows && l < layers; l++) {
        const size_t n = (size_t)(s->batch * s->kv_heads * s->kv_len *
                                  (v->group ? s->head_dim / v->group : 1));
        v->ks[l] = malloc(n * sizeof(float));
        v->vs[l] = malloc(n * sizeof(float));
        if (!v->ks[l] || !v->vs[l]) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < n; i++)
            v->ks[l][i] = v->vs[l][i] = 1.0f;
    }
}

/* The variant's options for a call on `layer`'s caches: its precision, and
   its per-row scales, viewed [b][h][row] (t holds the two views). */
static attn_options variant_options(const variant *v, const attn_options *opt,
                                    const attn_shape *s, int layer, attn_tensor t[2])
{
    attn_options o = *opt;
    o.precision = v->precision;
    if (v->rows) {
        const int64_t ng = v->group ? s->head_dim / v->group : 1;
        t[0] = (attn_tensor){v->ks[layer], ATTN_DTYPE_F32, s->kv_heads * s->kv_len * ng,
                             s->kv_len * ng, ng};
        t[1] = t[0];
        t[1].data = v->vs[layer];
        o.k_scales = &t[0];
        o.v_scales = &t[1];
        o.k_scale_group = o.v_scale_group = v->group;
    }
    return o;
}

static void free_variant(variant *v, int layers)
{
    for (int l = 1; l < layers; l++) {
        free(v->k[l]);
        free(v->v[l]);
    }
    for (int l = 0; v->rows && l < layers; l++) {
        free(v->ks[l]);
        free(v->vs[l]);
    }
    gen_release(&v->m);
    gen_free(&v->g);
}

/* Times `calls` forwards of every variant per repetition, shuffled order. */
static void run(const char *title, const attn_shape *s, int causal, variant *vs, int nv, int reps,
                int calls, int layers, attn_options *opt, int base)
{
    for (int i = 0; i < nv; i++) {
        snprintf(vs[i].name, sizeof vs[i].name, "%s%s", gen_dtype_name(vs[i].dtype),
                 vs[i].suffix ? vs[i].suffix : "");
        make_variant(&vs[i], s, causal, layers);
    }
    /* out: the first variant's; q each variant's own (the same values,
       in its dtype) */
    const attn_tensor ot = vs[0].m.t[GEN_OUT];
    opt->flags = causal ? ATTN_CAUSAL : 0u;
    int order[MAX_VARIANTS];
    for (int i = 0; i < nv; i++) {
        vs[i].times = malloc((size_t)reps * sizeof(double));
        order[i] = i;
    }
    for (int w = 0; w < nv; w++) { /* warm-up: one call each */
        const attn_tensor kt = vs[w].m.t[GEN_K], vt = vs[w].m.t[GEN_V], qt = vs[w].m.t[GEN_Q];
        attn_tensor views[2];
        const attn_options o = variant_options(&vs[w], opt, s, 0, views);
        if (attn_forward(s, &o, &qt, &kt, &vt, &ot, NULL) != ATTN_OK) {
            fprintf(stderr, "%s: attn_forward failed\n", vs[w].name);
            exit(1);
        }
    }
    for (int r = 0; r < reps; r++) {
        for (int i = nv - 1; i > 0; i--) { /* Fisher-Yates */
            const int j = (int)((rng_state = rng_state * 6364136223846793005u + 1442695040888963407u) >> 33) % (i + 1);
            const int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < nv; i++) {
            variant *v = &vs[order[i]];
            const int layer = r % layers;
            attn_tensor kt = v->m.t[GEN_K], vt = v->m.t[GEN_V];
            const attn_tensor qt = v->m.t[GEN_Q];
            kt.data = v->k[layer];
            vt.data = v->v[layer];
            attn_tensor views[2];
            const attn_options o = variant_options(v, opt, s, layer, views);
            const double t0 = bench_wall();
            for (int c = 0; c < calls; c++)
                attn_forward(s, &o, &qt, &kt, &vt, &ot, NULL);
            v->times[r] = (bench_wall() - t0) / calls;
        }
    }
    printf("%s (%d repetitions x %d calls)\n", title, reps, calls);
    double med[MAX_VARIANTS], best[MAX_VARIANTS];
    for (int i = 0; i < nv; i++) {
        med[i] = median(vs[i].times, reps); /* sorts */
        best[i] = vs[i].times[0];
    }
    for (int i = 0; i < nv; i++)
        printf("  %-12s median %9.3f ms (%.3fx %s)   min %9.3f ms (%.3fx %s)\n", vs[i].name,
               1e3 * med[i], med[i] / med[base], vs[base].name, 1e3 * best[i],
               best[i] / best[base], vs[base].name);
    for (int i = 0; i < nv; i++) {
        free(vs[i].times);
        free_variant(&vs[i], layers);
    }
}

int main(int argc, char **argv)
{
    int reps = 9, threads = 1, decode_calls = 1;
    const char *isa = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--isa"))
            isa = argv[i + 1];
        else if (!strcmp(argv[i], "--decode-calls"))
            decode_calls = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--reps N] [--threads N] [--isa NAME] [--decode-calls N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || threads < 0 || decode_calls < 1)
        return 2;
    if (isa) {
        static const attn_isa all[] = {ATTN_ISA_SCALAR, ATTN_ISA_AVX2, ATTN_ISA_AVX512,
                                       ATTN_ISA_NEON, ATTN_ISA_SVE};
        int found = 0;
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (!strcmp(isa, attn_isa_name(all[i])))
                found = attn_isa_select(all[i]) == ATTN_OK;
        if (!found) {
            fprintf(stderr, "ISA %s not available\n", isa);
            return 1;
        }
    }
    attn_threadpool *pool = NULL;
    attn_options opt = ATTN_OPTIONS_INIT;
    if (threads != 1) {
        if (attn_threadpool_create(threads, &pool) != ATTN_OK)
            return 1;
        opt.parallel_for = attn_threadpool_parallel_for;
        opt.parallel_ctx = pool;
    }
    printf("libattn %s, ISA %s, %d thread(s)\n", attn_version_string(),
           attn_isa_name(attn_isa_active()), pool ? attn_threadpool_size(pool) : 1);

    /* the precision modes (attn.h): ".int8" and ".bf16" variants */
    {
        const attn_shape s = {1, 32, 8, 1, 4096, 128, 128};
        variant vs[MAX_VARIANTS] = {{.dtype = ATTN_DTYPE_F16}};
        int nv = 1;
        /* every quantized K/V dtype of the list (attn_dtype values 0 .. count - 1):
           each block format, then in the int8 mode; then the FP8 ones with one
           scale per call, then per row, then per group */
        static const variant fp8_ways[] = {{.rows = 0},
                                           {.suffix = ".rows", .rows = 1},
                                           {.suffix = ".g64", .rows = 1, .group = 64}};
        for (int32_t t = 0; t < ATTN_DTYPE_COUNT && nv + 2 <= MAX_VARIANTS; t++)
            if (dtype_kv(t) && dtype_kind(t) == ATTN_DTYPE_KIND_QBLOCK) {
                vs[nv++] = (variant){.dtype = t};
                vs[nv++] = (variant){.dtype = t, .suffix = ".int8",
                                     .precision = ATTN_PRECISION_INT8};
            }
        for (size_t w = 0; w < sizeof fp8_ways / sizeof fp8_ways[0]; w++)
            for (int32_t t = 0; t < ATTN_DTYPE_COUNT && nv < MAX_VARIANTS; t++)
                if (dtype_kv(t) && dtype_kind(t) == ATTN_DTYPE_KIND_FP8) {
                    vs[nv] = fp8_ways[w];
                    vs[nv++].dtype = t;
                }
        run("decode B=1 Lq=1 Lk=4096 Hq=32 Hkv=8 d=128, 12 layers' caches in turn", &s, 0, vs,
            nv, reps * LAYERS, decode_calls, LAYERS, &opt, 0);
    }
    {
        const attn_shape s = {1, 8, 8, 2048, 2048, 128, 128};
        variant vs[6] = {{.dtype = ATTN_DTYPE_F32},
                         {.dtype = ATTN_DTYPE_Q8_0},
                         {.dtype = ATTN_DTYPE_Q8_0, .suffix = ".int8",
                          .precision = ATTN_PRECISION_INT8},
                         {.dtype = ATTN_DTYPE_F32, .suffix = ".bf16",
                          .precision = ATTN_PRECISION_BF16},
                         {.dtype = ATTN_DTYPE_BF16, .suffix = "qkv", .q_dtype = ATTN_DTYPE_BF16},
                         {.dtype = ATTN_DTYPE_BF16, .suffix = "qkv.bf16",
                          .q_dtype = ATTN_DTYPE_BF16, .precision = ATTN_PRECISION_BF16}};
        run("prefill B=1 Hq=Hkv=8 L=2048 d=128 causal", &s, 1, vs, 6, reps, 1, 1, &opt, 0);
    }
    attn_threadpool_destroy(pool);
    return 0;
}

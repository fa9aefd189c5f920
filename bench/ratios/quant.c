/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios quant: the quantized K/V and precision-mode targets as
 * ratios measured in one process:
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
 *   attn_ratios quant [--reps N] [--threads N] [--isa NAME] [--decode-calls N]
 *   (defaults: 9 repetitions; decode: 1 call per repetition, 9 x LAYERS of them)
 *
 * The problems come from the problem generator; the caches are
 * quantized from the same f32 values with attn_quantize.
 * Decode cycles through LAYERS copies of each cache, as a model's decode
 * step reads one cache per layer: together they exceed the last-level
 * cache, so every call streams its K and V from memory as in an engine (a
 * single 9 MB Q8_0 cache called again and again would stay in a large L3
 * and flatter the small formats).
 */
#define LAYERS 12
#include <stdio.h>
#include <stdlib.h>

#include "../../src/dtype_list.h"
#include "ratio_driver.h"

#define MAX_VARIANTS 16 /* run()'s arrays */

typedef struct variant {
    const char *suffix; /* the name is the dtype's (src/dtype_list.h) and this */
    char name[32];
    int32_t dtype;
    int64_t precision; /* attn_options.precision (attn.h) */
    int32_t q_dtype;   /* 0: F32 */
    int rows;          /* FP8 scales per row (k_scales, v_scales), all 1 */
    int64_t group;     /* with rows: channels per scale (k_scale_group), 0: a row */
    gen_problem g; /* the problem, from the generator */
    gen_bufs m;
    void *k[LAYERS], *v[LAYERS]; /* layer 0: m's own; prefill uses layer 0 only */
    float *ks[LAYERS], *vs[LAYERS]; /* rows: each layer's scales [Hkv][Lk][groups] */
} variant;

static int dtype_kind(int32_t t) { ATTN_DTYPE_GET(t, kind, -1) }

static int dtype_kv(int32_t t) { ATTN_DTYPE_GET(t, kv, 0) }

/*
 * The variant's problem: the shape pinned, K and V of its dtype (the block
 * formats and FP8 quantized by attn_quantize from the f32 values every
 * variant draws alike: the same seed and stream), and `layers` copies of
 * its caches.
 */
static void make_variant(variant *v, const attn_shape *s, int causal, int layers)
{
    gen_profile p;
    ratio_profile_dims(&p, -1.0f, 1.0f,
                       (ratio_dims){s->batch, s->kv_heads, s->q_heads / s->kv_heads, s->q_len,
                                    s->kv_len, s->head_dim});
    gen_pin(&p, GEN_C_K_DTYPE, v->dtype);
    if (v->q_dtype)
        gen_pin(&p, GEN_C_Q_DTYPE, v->q_dtype);
    gen_pin(&p, GEN_C_OPT(flags), causal ? ATTN_CAUSAL : 0);
    ratio_problem(&v->g, &v->m, &p, 0, 1, GEN_M_OUT);
    ratio_copies(v->k, v->m.data[GEN_K], v->m.bytes[GEN_K], layers);
    ratio_copies(v->v, v->m.data[GEN_V], v->m.bytes[GEN_V], layers);
    for (int l = 0; v->rows && l < layers; l++) {
        const size_t n = (size_t)(s->batch * s->kv_heads * s->kv_len *
                                  (v->group ? s->head_dim / v->group : 1));
        v->ks[l] = ratio_alloc(n * sizeof(float));
        v->vs[l] = ratio_alloc(n * sizeof(float));
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
    ratio_copies_free(v->k, layers);
    ratio_copies_free(v->v, layers);
    for (int l = 0; v->rows && l < layers; l++) {
        free(v->ks[l]);
        free(v->vs[l]);
    }
    ratio_problem_free(&v->g, &v->m);
}

/* The variants of one target, and how a repetition calls them. */
typedef struct target {
    const attn_shape *s;
    variant *vs;
    int layers;
    attn_options opt; /* the calls' options but each variant's own */
    attn_tensor out;  /* the first variant's; q each variant's own (the same
                         values, in its dtype) */
} target;

static void forward(void *ctx, int i, int rep, int call)
{
    (void)call;
    const target *t = ctx;
    const variant *v = &t->vs[i];
    const int layer = rep < 0 ? 0 : rep % t->layers;
    attn_tensor kt = v->m.t[GEN_K], vt = v->m.t[GEN_V];
    const attn_tensor qt = v->m.t[GEN_Q];
    kt.data = v->k[layer];
    vt.data = v->v[layer];
    attn_tensor views[2];
    const attn_options o = variant_options(v, &t->opt, t->s, layer, views);
    ratio_ok(attn_forward(t->s, &o, &qt, &kt, &vt, &t->out, NULL), v->name);
}

/* Times `calls` forwards of every variant per repetition, in an order
   shuffled per repetition, cycling through the layers' caches. */
static void run(const char *title, const attn_shape *s, int causal, variant *vs, int nv, int reps,
                int calls, int layers, const attn_options *opt, int base)
{
    for (int i = 0; i < nv; i++) {
        snprintf(vs[i].name, sizeof vs[i].name, "%s%s", gen_dtype_name(vs[i].dtype),
                 vs[i].suffix ? vs[i].suffix : "");
        make_variant(&vs[i], s, causal, layers);
    }
    target t = {s, vs, layers, *opt, vs[0].m.t[GEN_OUT]};
    t.opt.flags = causal ? ATTN_CAUSAL : 0u;
    const ratio_loop l = {.variants = nv, .reps = reps, .warmup = 1, .order = RATIO_SHUFFLE,
                          .each = calls, .only = -1, .call = forward, .ctx = &t};
    ratio_stat st[MAX_VARIANTS];
    ratio_measure(&l, st, NULL);
    printf("%s (%d repetitions x %d calls)\n", title, reps, calls);
    for (int i = 0; i < nv; i++)
        ratio_print_vs(12, vs[i].name, st[i], st[base], vs[base].name);
    for (int i = 0; i < nv; i++)
        free_variant(&vs[i], layers);
}

static int quant_run(const ratio_args *a)
{
    const int reps = a->reps, threads = a->threads;
    const int decode_calls = a->quick ? 1 : ratio_opt_int(a, 0, 1);
    if (threads < 0 || decode_calls < 1) {
        fprintf(stderr, "attn_ratios quant: --threads N >= 0, --decode-calls N >= 1\n");
        return 2;
    }
    attn_threadpool *pool = ratio_pool(threads);
    attn_options opt = ATTN_OPTIONS_INIT;
    ratio_use_pool(&opt, pool);
    ratio_header("%d thread(s)\n", ratio_pool_size(pool));

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

RATIO_FAMILY(quant, 9, 1, "threads",
             "quantized K/V (every dtype of the list) and the precision modes vs F16 / F32",
             {"--decode-calls", "N", "calls per decode sample (default 1)"});

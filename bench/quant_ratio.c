/*
 * The quantized K/V targets as ratios measured in one process:
 *   decode  B=1 Lq=1 Lk=4096 Hq=32 Hkv=8 d=128: Q8_0, Q4_0, FP8 vs F16 K/V
 *   prefill B=1 Hq=Hkv=8 L=2048 d=128 causal:   Q8_0 vs F32 K/V
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
 * The caches are quantized from the same f32 values with attn_quantize.
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

#include "attn.h"
#include "../src/dtype_list.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static float rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)(rng_state >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
}

static uint16_t to_f16(float f) /* round to nearest even, |f| small and normal here */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a < 0x38800000u)
        return (uint16_t)sign; /* flush: the values here are never that small */
    uint32_t h = (a >> 13) - (112u << 10);
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

typedef struct variant {
    const char *name;
    int32_t dtype;
    void *k[LAYERS], *v[LAYERS]; /* prefill uses layer 0 only */
    int64_t units; /* stride units per row */
    double *times;
} variant;

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void *make_kv(int32_t dtype, const float *src, int64_t rows, int64_t d, int64_t *units)
{
    switch (dtype) {
    case ATTN_DTYPE_F32: {
        float *p = malloc((size_t)(rows * d) * 4);
        memcpy(p, src, (size_t)(rows * d) * 4);
        *units = d;
        return p;
    }
    case ATTN_DTYPE_F16: {
        uint16_t *p = malloc((size_t)(rows * d) * 2);
        for (int64_t i = 0; i < rows * d; i++)
            p[i] = to_f16(src[i]);
        *units = d;
        return p;
    }
    default: {
        int64_t block = 1;
        size_t ub = 1;
        switch (dtype) { /* src/dtype_list.h: data on attn.h only */
#define UNIT_OF(ID, name, blk, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: block = blk, ub = bytes; break;
            ATTN_DTYPE_LIST(UNIT_OF)
#undef UNIT_OF
        }
        *units = d / block;
        void *p = malloc((size_t)(rows * *units) * ub);
        if (attn_quantize(dtype, src, rows, d, d, p, *units, 0.0f) != ATTN_OK) {
            fprintf(stderr, "attn_quantize failed\n");
            exit(1);
        }
        return p;
    }
    }
}

/* Times `calls` forwards of every variant per repetition, shuffled order. */
static void run(const char *title, const attn_shape *s, int causal, variant *vs, int nv, int reps,
                int calls, int layers, attn_options *opt, int base)
{
    const int64_t d = s->head_dim;
    const size_t nq = (size_t)(s->batch * s->q_heads * s->q_len * d);
    float *q = malloc(nq * 4), *out = malloc(nq * 4);
    for (size_t i = 0; i < nq; i++)
        q[i] = rnd();
    const attn_tensor qt = {q, ATTN_DTYPE_F32, s->q_heads * s->q_len * d, s->q_len * d, d};
    const attn_tensor ot = {out, ATTN_DTYPE_F32, s->q_heads * s->q_len * d, s->q_len * d, d};
    opt->flags = causal ? ATTN_CAUSAL : 0u;
    int order[8];
    for (int i = 0; i < nv; i++) {
        vs[i].times = malloc((size_t)reps * sizeof(double));
        order[i] = i;
    }
    for (int w = 0; w < nv; w++) { /* warm-up: one call each */
        const attn_tensor kt = {vs[w].k[0], vs[w].dtype, s->kv_heads * s->kv_len * vs[w].units,
                                s->kv_len * vs[w].units, vs[w].units};
        const attn_tensor vt = {vs[w].v[0], vs[w].dtype, kt.batch_stride, kt.head_stride,
                                kt.row_stride};
        if (attn_forward(s, opt, &qt, &kt, &vt, &ot, NULL) != ATTN_OK) {
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
            const attn_tensor kt = {v->k[layer], v->dtype, s->kv_heads * s->kv_len * v->units,
                                    s->kv_len * v->units, v->units};
            const attn_tensor vt = {v->v[layer], v->dtype, kt.batch_stride, kt.head_stride,
                                    kt.row_stride};
            const double t0 = now();
            for (int c = 0; c < calls; c++)
                attn_forward(s, opt, &qt, &kt, &vt, &ot, NULL);
            v->times[r] = (now() - t0) / calls;
        }
    }
    printf("%s (%d repetitions x %d calls)\n", title, reps, calls);
    double med[8], best[8];
    for (int i = 0; i < nv; i++) {
        med[i] = median(vs[i].times, reps); /* sorts */
        best[i] = vs[i].times[0];
    }
    for (int i = 0; i < nv; i++)
        printf("  %-5s median %9.3f ms (%.3fx %s)   min %9.3f ms (%.3fx %s)\n", vs[i].name,
               1e3 * med[i], med[i] / med[base], vs[base].name, 1e3 * best[i],
               best[i] / best[base], vs[base].name);
    for (int i = 0; i < nv; i++)
        free(vs[i].times);
    free(q);
    free(out);
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

    {
        const attn_shape s = {1, 32, 8, 1, 4096, 128, 128};
        const int64_t rows = s.batch * s.kv_heads * s.kv_len;
        float *kf = malloc((size_t)(rows * 128) * 4), *vf = malloc((size_t)(rows * 128) * 4);
        for (int64_t i = 0; i < rows * 128; i++) {
            kf[i] = rnd();
            vf[i] = rnd();
        }
        variant vs[4] = {{.name = "f16", .dtype = ATTN_DTYPE_F16},
                         {.name = "q8_0", .dtype = ATTN_DTYPE_Q8_0},
                         {.name = "q4_0", .dtype = ATTN_DTYPE_Q4_0},
                         {.name = "fp8", .dtype = ATTN_DTYPE_FP8_E4M3}};
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < LAYERS; l++) {
                vs[i].k[l] = make_kv(vs[i].dtype, kf, rows, 128, &vs[i].units);
                vs[i].v[l] = make_kv(vs[i].dtype, vf, rows, 128, &vs[i].units);
            }
        run("decode B=1 Lq=1 Lk=4096 Hq=32 Hkv=8 d=128, 12 layers' caches in turn", &s, 0, vs,
            4, reps * LAYERS, decode_calls, LAYERS, &opt, 0);
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < LAYERS; l++) {
                free(vs[i].k[l]);
                free(vs[i].v[l]);
            }
        free(kf);
        free(vf);
    }
    {
        const attn_shape s = {1, 8, 8, 2048, 2048, 128, 128};
        const int64_t rows = s.batch * s.kv_heads * s.kv_len;
        float *kf = malloc((size_t)(rows * 128) * 4), *vf = malloc((size_t)(rows * 128) * 4);
        for (int64_t i = 0; i < rows * 128; i++) {
            kf[i] = rnd();
            vf[i] = rnd();
        }
        variant vs[2] = {{.name = "f32", .dtype = ATTN_DTYPE_F32},
                         {.name = "q8_0", .dtype = ATTN_DTYPE_Q8_0}};
        for (int i = 0; i < 2; i++) {
            vs[i].k[0] = make_kv(vs[i].dtype, kf, rows, 128, &vs[i].units);
            vs[i].v[0] = make_kv(vs[i].dtype, vf, rows, 128, &vs[i].units);
        }
        run("prefill B=1 Hq=Hkv=8 L=2048 d=128 causal", &s, 1, vs, 2, reps, 1, 1, &opt, 0);
        for (int i = 0; i < 2; i++) {
            free(vs[i].k[0]);
            free(vs[i].v[0]);
        }
        free(kf);
        free(vf);
    }
    attn_threadpool_destroy(pool);
    return 0;
}

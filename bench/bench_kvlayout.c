/*
 * The targets of paged, packed and left-padded K/V (README, "KV caches as
 * engines keep them"), measured as ratios inside one process: every
 * configuration of a target runs in turn, repetition after repetition
 * (interleaved, so a slow phase of the machine hits all of them), and each
 * configuration's median over the repetitions is reported with its ratio to
 * the baseline. With one thread the clock is the thread's CPU time, which a
 * loaded machine disturbs far less than wall time. Public API only.
 *
 *   bench_kvlayout [threads=1] [repetitions=7] [decode|prefill]
 *
 * decode: Lq 1, Lk 4096, Hq 32, Hkv 8, d 128, f32 and f16 K/V: a contiguous
 *   cache ([B,H,L,D], and [B,L,H,D], whose rows are strided like a vLLM
 *   pool's) against paged pools [blocks][block_size][Hkv][d] with shuffled
 *   tables (block sizes 16 and 1), an in-order table (block size 16), and a
 *   head-major pool [blocks][Hkv][16][d] with a shuffled table.
 * prefill: 8 causal sequences of lengths 100..2000 (evenly spaced), Hq 32,
 *   Hkv 8, d 128: packed [T,H,D] with offsets against the padded batch of the
 *   same tokens ([8,H,2000,D] with q_lens/kv_lens).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"

/* With one thread every task runs on this thread, so its CPU time is the
   cost of a call without the time the scheduler gave to other processes
   (a loaded machine); with more threads, wall time. */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t next_u64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static float next_float(void) { return (float)(next_u64() >> 40) / 16777216.0f - 0.5f; }

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "bench_kvlayout: out of memory\n");
        exit(1);
    }
    return p;
}

/* binary16 bits of x in [-1, 1] (normal or zero), truncated: inputs only. */
static uint16_t to_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int32_t e = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    if (e <= 0)
        return (uint16_t)sign; /* below the f16 normals: 0 is close enough for a benchmark */
    return (uint16_t)(sign | (uint32_t)e << 10 | ((u >> 13) & 0x3ffu));
}

/* Values in [-0.5, 0.5), stored as f32 or f16. */
static void fill(void *dst, int32_t dtype, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float x = next_float();
        if (dtype == ATTN_DTYPE_F32) {
            ((float *)dst)[i] = x;
        } else {
            const uint16_t h = to_f16(x);
            memcpy((char *)dst + 2 * i, &h, 2);
        }
    }
}

typedef struct config {
    const char *name;
    const attn_shape *shape;
    attn_options opt;
    attn_tensor q, k, v, out;
    double *times;
} config;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs every config `reps` times, interleaved; each sample is the mean of
   enough calls to last about 0.2 s (the same count for every config).
   Prints medians and ratios to config 0. */
static void run(config *c, int n, int reps, attn_threadpool *pool)
{
    int calls = 1;
    for (int i = 0; i < n; i++) {
        c[i].opt.parallel_for = attn_threadpool_parallel_for;
        c[i].opt.parallel_ctx = pool;
        c[i].times = xalloc(sizeof(double) * (size_t)reps);
        attn_status st = attn_forward(c[i].shape, &c[i].opt, &c[i].q, &c[i].k, &c[i].v,
                                      &c[i].out, NULL); /* warm-up, and a check */
        if (st != ATTN_OK) {
            fprintf(stderr, "%s: %s\n", c[i].name, attn_strerror(st));
            exit(1);
        }
        if (i == 0) {
            const double t0 = now();
            attn_forward(c[0].shape, &c[0].opt, &c[0].q, &c[0].k, &c[0].v, &c[0].out, NULL);
            const double once = now() - t0;
            calls = once >= 0.2 ? 1 : (int)(0.2 / (once > 1e-6 ? once : 1e-6));
        }
    }
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            const double t0 = now();
            for (int k = 0; k < calls; k++)
                attn_forward(c[i].shape, &c[i].opt, &c[i].q, &c[i].k, &c[i].v, &c[i].out, NULL);
            c[i].times[r] = (now() - t0) / calls;
        }
    double base = 0.0;
    for (int i = 0; i < n; i++) {
        qsort(c[i].times, (size_t)reps, sizeof(double), cmp_double);
        const double med = c[i].times[reps / 2];
        if (i == 0)
            base = med;
        printf("  %-44s %9.3f ms  x%.3f  (min %.3f, max %.3f)\n", c[i].name, med * 1e3,
               med / base, c[i].times[0] * 1e3, c[i].times[reps - 1] * 1e3);
        free(c[i].times);
    }
}

/* A pool holding the dense cache [heads][lk][d] (batch 1) through `tab`, the
   block of each page: [blocks][bs][heads][d] (vLLM), or with heads_outer
   [blocks][heads][bs][d] (each page of a head contiguous). */
static attn_tensor make_pool(const void *dense, int32_t dtype, int64_t heads, int64_t lk,
                             int64_t d, int64_t bs, const int32_t *tab, int heads_outer,
                             void **pool)
{
    const size_t es = dtype == ATTN_DTYPE_F32 ? 4 : 2;
    const int64_t blocks = (lk + bs - 1) / bs;
    const attn_tensor t = {NULL, dtype, bs * heads * d, heads_outer ? bs * d : d,
                           heads_outer ? d : heads * d};
    char *p = xalloc((size_t)(blocks * bs * heads * d) * es);
    for (int64_t pos = 0; pos < lk; pos++)
        for (int64_t h = 0; h < heads; h++)
            memcpy(p + (size_t)(tab[pos / bs] * t.batch_stride + h * t.head_stride +
                                (pos % bs) * t.row_stride) * es,
                   (const char *)dense + (size_t)((h * lk + pos) * d) * es, (size_t)d * es);
    *pool = p;
    attn_tensor r = t;
    r.data = p;
    return r;
}

/* The block of each of `blocks` pages: 0, 1, ... or a random permutation. */
static int32_t *make_table(int64_t blocks, int shuffle)
{
    int32_t *tab = xalloc(sizeof(int32_t) * (size_t)blocks);
    for (int64_t i = 0; i < blocks; i++)
        tab[i] = (int32_t)i;
    for (int64_t i = blocks - 1; shuffle && i > 0; i--) {
        const int64_t j = (int64_t)(next_u64() % (uint64_t)(i + 1));
        const int32_t x = tab[i];
        tab[i] = tab[j];
        tab[j] = x;
    }
    return tab;
}

static void decode(int32_t dtype, int reps, attn_threadpool *pool)
{
    const int64_t hq = 32, hkv = 8, lk = 4096, d = 128;
    static attn_shape shape;
    shape = (attn_shape){1, hq, hkv, 1, lk, d, 0};
    const size_t es = dtype == ATTN_DTYPE_F32 ? 4 : 2;
    float *q = xalloc(sizeof(float) * (size_t)(hq * d)), *out = xalloc(sizeof(float) * (size_t)(hq * d));
    fill(q, ATTN_DTYPE_F32, (size_t)(hq * d));
    void *k = xalloc((size_t)(hkv * lk * d) * es), *v = xalloc((size_t)(hkv * lk * d) * es);
    fill(k, dtype, (size_t)(hkv * lk * d));
    fill(v, dtype, (size_t)(hkv * lk * d));
    /* the same cache as [B,L,H,D] */
    char *kl = xalloc((size_t)(hkv * lk * d) * es), *vl = xalloc((size_t)(hkv * lk * d) * es);
    for (int64_t h = 0; h < hkv; h++)
        for (int64_t j = 0; j < lk; j++) {
            memcpy(kl + (size_t)((j * hkv + h) * d) * es, (char *)k + (size_t)((h * lk + j) * d) * es,
                   (size_t)d * es);
            memcpy(vl + (size_t)((j * hkv + h) * d) * es, (char *)v + (size_t)((h * lk + j) * d) * es,
                   (size_t)d * es);
        }

    enum { N = 6 };
    config c[N];
    memset(c, 0, sizeof c);
    const attn_options init = ATTN_OPTIONS_INIT;
    const attn_tensor tq = {q, ATTN_DTYPE_F32, hq * d, d, d};
    const attn_tensor to = {out, ATTN_DTYPE_F32, hq * d, d, d};
    for (int i = 0; i < N; i++) {
        c[i].shape = &shape;
        c[i].opt = init;
        c[i].opt.flags = ATTN_CAUSAL;
        c[i].q = tq;
        c[i].out = to;
    }
    c[0].name = "contiguous [B,H,L,D]";
    c[0].k = (attn_tensor){k, dtype, hkv * lk * d, lk * d, d};
    c[0].v = (attn_tensor){v, dtype, hkv * lk * d, lk * d, d};
    c[1].name = "contiguous [B,L,H,D]";
    c[1].k = (attn_tensor){kl, dtype, hkv * lk * d, d, hkv * d};
    c[1].v = (attn_tensor){vl, dtype, hkv * lk * d, d, hkv * d};
    void *pools[2 * (N - 2)];
    int32_t *tables[N - 2];
    const struct { const char *name; int64_t bs; int shuffle, heads_outer; } paged[N - 2] = {
        {"paged, block 16, shuffled table", 16, 1, 0},
        {"paged, block 16, in-order table", 16, 0, 0},
        {"paged, block 1, shuffled table", 1, 1, 0},
        {"paged [blocks][Hkv][16][d], shuffled table", 16, 1, 1}};
    for (int i = 0; i < N - 2; i++) {
        const int64_t bs = paged[i].bs, blocks = (lk + bs - 1) / bs;
        tables[i] = make_table(blocks, paged[i].shuffle);
        c[2 + i].name = paged[i].name;
        c[2 + i].k = make_pool(k, dtype, hkv, lk, d, bs, tables[i], paged[i].heads_outer,
                               &pools[2 * i]);
        c[2 + i].v = make_pool(v, dtype, hkv, lk, d, bs, tables[i], paged[i].heads_outer,
                               &pools[2 * i + 1]);
        c[2 + i].opt.block_table = tables[i];
        c[2 + i].opt.block_table_stride = blocks;
        c[2 + i].opt.block_size = bs;
        c[2 + i].opt.num_blocks = blocks;
    }
    printf("decode, K/V %s (Lq 1, Lk 4096, Hq 32, Hkv 8, d 128), median of %d:\n",
           dtype == ATTN_DTYPE_F32 ? "f32" : "f16", reps);
    run(c, N, reps, pool);
    for (int i = 0; i < 2 * (N - 2); i++)
        free(pools[i]);
    for (int i = 0; i < N - 2; i++)
        free(tables[i]);
    free(q);
    free(out);
    free(k);
    free(v);
    free(kl);
    free(vl);
}

static void prefill(int reps, attn_threadpool *pool)
{
    enum { B = 8 };
    const int64_t hq = 32, hkv = 8, d = 128, lmax = 2000;
    int32_t lens[B], offs[B];
    int64_t total = 0;
    for (int b = 0; b < B; b++) {
        lens[b] = (int32_t)(100 + (lmax - 100) * b / (B - 1));
        offs[b] = (int32_t)total;
        total += lens[b];
    }
    /* padded [B,L,H,D] and packed [T,H,D]: the same tokens */
    const size_t row_q = (size_t)(hq * d), row_kv = (size_t)(hkv * d);
    float *pq = xalloc(4 * row_q * (size_t)(B * lmax)), *pk = xalloc(4 * row_kv * (size_t)(B * lmax));
    float *pv = xalloc(4 * row_kv * (size_t)(B * lmax)), *po = xalloc(4 * row_q * (size_t)(B * lmax));
    float *cq = xalloc(4 * row_q * (size_t)total), *ck = xalloc(4 * row_kv * (size_t)total);
    float *cv = xalloc(4 * row_kv * (size_t)total), *co = xalloc(4 * row_q * (size_t)total);
    fill(pq, ATTN_DTYPE_F32, row_q * (size_t)(B * lmax));
    fill(pk, ATTN_DTYPE_F32, row_kv * (size_t)(B * lmax));
    fill(pv, ATTN_DTYPE_F32, row_kv * (size_t)(B * lmax));
    for (int b = 0; b < B; b++) {
        memcpy(cq + row_q * (size_t)offs[b], pq + row_q * (size_t)(b * lmax), 4 * row_q * (size_t)lens[b]);
        memcpy(ck + row_kv * (size_t)offs[b], pk + row_kv * (size_t)(b * lmax), 4 * row_kv * (size_t)lens[b]);
        memcpy(cv + row_kv * (size_t)offs[b], pv + row_kv * (size_t)(b * lmax), 4 * row_kv * (size_t)lens[b]);
    }
    static attn_shape padded_shape, packed_shape;
    padded_shape = (attn_shape){B, hq, hkv, lmax, lmax, d, 0};
    packed_shape = (attn_shape){B, hq, hkv, total, total, d, 0};
    config c[2];
    memset(c, 0, sizeof c);
    const attn_options init = ATTN_OPTIONS_INIT;
    c[0].name = "padded [8,2000,H,D] with q_lens/kv_lens";
    c[0].shape = &padded_shape;
    c[0].opt = init;
    c[0].opt.q_lens = c[0].opt.kv_lens = lens;
    c[0].q = (attn_tensor){pq, ATTN_DTYPE_F32, lmax * hq * d, d, hq * d};
    c[0].k = (attn_tensor){pk, ATTN_DTYPE_F32, lmax * hkv * d, d, hkv * d};
    c[0].v = (attn_tensor){pv, ATTN_DTYPE_F32, lmax * hkv * d, d, hkv * d};
    c[0].out = (attn_tensor){po, ATTN_DTYPE_F32, lmax * hq * d, d, hq * d};
    c[1].name = "packed [T,H,D] with offsets (cu_seqlens)";
    c[1].shape = &packed_shape;
    c[1].opt = init;
    c[1].opt.q_lens = c[1].opt.kv_lens = lens;
    c[1].opt.q_offsets = c[1].opt.kv_offsets = offs;
    c[1].q = (attn_tensor){cq, ATTN_DTYPE_F32, 0, d, hq * d};
    c[1].k = (attn_tensor){ck, ATTN_DTYPE_F32, 0, d, hkv * d};
    c[1].v = (attn_tensor){cv, ATTN_DTYPE_F32, 0, d, hkv * d};
    c[1].out = (attn_tensor){co, ATTN_DTYPE_F32, 0, d, hq * d};
    c[0].opt.flags = c[1].opt.flags = ATTN_CAUSAL;
    printf("prefill, 8 causal sequences of 100..2000 tokens (%lld in all), Hq 32, Hkv 8, "
           "d 128, median of %d:\n", (long long)total, reps);
    run(c, 2, reps, pool);
    /* the same rows must come out of both */
    double worst = 0.0;
    for (int b = 0; b < B; b++)
        for (size_t e = 0; e < row_q * (size_t)lens[b]; e++) {
            const double x = co[row_q * (size_t)offs[b] + e], y = po[row_q * (size_t)(b * lmax) + e];
            worst = fabs(x - y) > worst ? fabs(x - y) : worst;
        }
    printf("  largest |packed - padded| over the outputs: %.3g\n", worst);
    free(pq), free(pk), free(pv), free(po), free(cq), free(ck), free(cv), free(co);
}

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    const int reps = argc > 2 ? atoi(argv[2]) : 7;
    attn_threadpool *pool;
    if (threads < 0 || reps < 1 || attn_threadpool_create(threads, &pool) != ATTN_OK) {
        fprintf(stderr, "usage: bench_kvlayout [threads=1] [repetitions=7] [decode|prefill]\n");
        return 2;
    }
    if (attn_threadpool_size(pool) == 1)
        bench_clock = CLOCK_THREAD_CPUTIME_ID;
    printf("libattn %s, ISA %s, %d thread(s), %s\n", attn_version_string(),
           attn_isa_name(attn_isa_active()), attn_threadpool_size(pool),
           attn_threadpool_size(pool) == 1 ? "CPU time of the calling thread" : "wall time");
    const char *only = argc > 3 ? argv[3] : "";
    if (strcmp(only, "prefill")) {
        decode(ATTN_DTYPE_F32, reps, pool);
        decode(ATTN_DTYPE_F16, reps, pool);
    }
    if (strcmp(only, "decode"))
        prefill(reps < 5 ? reps : 5, pool);
    attn_threadpool_destroy(pool);
    return 0;
}

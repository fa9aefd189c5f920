/* SPDX-License-Identifier: MIT */
/*
 * Concurrency stress test, meant to run under ThreadSanitizer (run.sh) but
 * also a correctness test in any build:
 *
 *  1. COMPUTE_THREADS threads wait on a barrier and then make their FIRST
 *     library call at the same moment, so the lazy dispatch initialisation
 *     (pthread_once) is raced; each thread's first call is a different entry
 *     point.
 *  2. They then run every operation of tests/ops_list.h again and again on
 *     shared read-only inputs and private outputs, while a selector thread
 *     flips the active ISA with attn_isa_select. Each result is hashed;
 *     afterwards every hash must be the hash of that operation on one of the
 *     kernel tables (computed through the internal attn_*_with; attn_quantize
 *     has no table and must give one hash), i.e. a call in flight finished
 *     with the one table it started with, and nothing else changed its
 *     output.
 *  3. POOL_CALLERS threads share one built-in pool (attn_threadpool_*) and
 *     call attn_forward and attn_backward through it concurrently; others
 *     create, use and destroy pools of their own at the same time. Results
 *     must be bitwise those of the calling-thread run on the same table.
 *
 * Exit status 0 when every check held; TSan reports make run.sh fail.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "internal.h"
#include "ops_list.h"

#define COMPUTE_THREADS 8
#define POOL_CALLERS 3
#define OWN_POOL_THREADS 2
#define ITERATIONS 12
#define MAX_TABLES ATTN_ISA_COUNT

/* ------------------------------------------------------------ the shared problem */

static const attn_shape shape = {2, 4, 2, 33, 70, 40, 24};
#define Q_ELEMS (2 * 4 * 33 * 40)
#define K_ELEMS (2 * 2 * 70 * 40)
#define V_ELEMS (2 * 2 * 70 * 24)
#define S_ELEMS (2 * 4 * 33 * 70)
#define O_ELEMS (2 * 4 * 33 * 24)
#define STAT_ROWS (2 * 4 * 33)
#define ROWS 20
#define COLS 77

static float q_data[Q_ELEMS], k_data[K_ELEMS], v_data[V_ELEMS], bias_data[S_ELEMS];
static float scores_input[S_ELEMS], rows_input[ROWS * COLS], dp_input[ROWS * COLS];
static uint8_t mask_data[S_ELEMS];
static const int32_t q_lens[2] = {33, 20}, kv_lens[2] = {70, 51};
static attn_tensor q_t, k_t, v_t, mask_t, bias_t;
static attn_options opts;
/* attn_forward_sources' lists: k and v again as its second source, 8 keys
   a row (written once, before the threads) */
static int32_t source_lists[2 * 33 * 8];

static void init_problem(void)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, (float)(s >> 40) / 16777216.0f)
    for (int i = 0; i < Q_ELEMS; i++) q_data[i] = NEXT() * 2.0f - 1.0f;
    for (int i = 0; i < K_ELEMS; i++) k_data[i] = NEXT() * 2.0f - 1.0f;
    for (int i = 0; i < V_ELEMS; i++) v_data[i] = NEXT() * 2.0f - 1.0f;
    for (int i = 0; i < S_ELEMS; i++) {
        bias_data[i] = NEXT() - 0.5f;
        scores_input[i] = NEXT() * 8.0f - 4.0f;
        mask_data[i] = NEXT() < 0.9f;
    }
    for (int e = 0; e < 2 * 33 * 8; e++)
        source_lists[e] = e % 9 == 0 ? -1 : (e * 37) % 70;
    for (int i = 0; i < ROWS * COLS; i++) {
        rows_input[i] = NEXT() * 10.0f - 5.0f;
        dp_input[i] = NEXT() * 2.0f - 1.0f;
    }
#undef NEXT
    q_t = (attn_tensor){q_data, ATTN_DTYPE_F32, 4 * 33 * 40, 33 * 40, 40};
    k_t = (attn_tensor){k_data, ATTN_DTYPE_F32, 2 * 70 * 40, 70 * 40, 40};
    v_t = (attn_tensor){v_data, ATTN_DTYPE_F32, 2 * 70 * 24, 70 * 24, 24};
    mask_t = (attn_tensor){mask_data, ATTN_DTYPE_BOOL, 4 * 33 * 70, 33 * 70, 70};
    bias_t = (attn_tensor){bias_data, ATTN_DTYPE_F32, 4 * 33 * 70, 33 * 70, 70};
    opts = (attn_options)ATTN_OPTIONS_INIT;
    opts.flags = ATTN_CAUSAL;
    opts.softcap = 20.0f;
    opts.window = 40;
    opts.q_lens = q_lens;
    opts.kv_lens = kv_lens;
    opts.mask = &mask_t;
    opts.bias = &bias_t;
}

/* ------------------------------------------------------------ one operation */

/* The scalar forward's output and lse, computed once: the backward's inputs
   (dout = out); and two partial results for attn_merge. */
static float bwd_out[O_ELEMS], bwd_lse[STAT_ROWS];
static float part_out[2][O_ELEMS], part_lse[2][STAT_ROWS];

static void init_backward_merge(void)
{
    const attn_tensor out = {bwd_out, ATTN_DTYPE_F32, 4 * 33 * 24, 33 * 24, 24};
    const attn_row_stats st = {bwd_lse, NULL, NULL};
    if (attn_forward_with(attn_dsp_for_isa(ATTN_ISA_SCALAR), &shape, &opts, &q_t, &k_t, &v_t,
                          &out, &st) != ATTN_OK)
        abort();
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < O_ELEMS; i++)
            part_out[p][i] = bwd_out[(i * (p + 3)) % O_ELEMS];
    for (int i = 0; i < STAT_ROWS; i++) {
        part_lse[0][i] = isfinite(bwd_lse[i]) ? bwd_lse[i] : 0.5f;
        part_lse[1][i] = i % 5 == 0 ? -INFINITY : 1.0f - 0.01f * (float)i;
    }
}

typedef struct result {
    /* large enough for every operation's outputs (the backward's dq, dk, dv
       and dbias, one after the other) */
    float out[Q_ELEMS + K_ELEMS + V_ELEMS + S_ELEMS];
    float stats[3][STAT_ROWS];
} result;

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/*
 * Runs `op` on `dsp` (NULL: the public entry point, whatever table is active)
 * with an optional pool; returns the hash of everything it wrote.
 */
static uint64_t run_op(int op, const attn_dsp *dsp, result *r, attn_threadpool *pool)
{
    attn_options o = opts;
    if (pool) {
        o.parallel_for = attn_threadpool_parallel_for;
        o.parallel_ctx = pool;
    }
    attn_row_stats st = {r->stats[0], r->stats[1], r->stats[2]};
    attn_tensor scores = {r->out, ATTN_DTYPE_F32, 4 * 33 * 70, 33 * 70, 70};
    attn_tensor out = {r->out, ATTN_DTYPE_F32, 4 * 33 * 24, 33 * 24, 24};
    attn_status status = ATTN_OK;
    size_t bytes = 0;
    memset(r, 0, sizeof *r);
    switch ((op_kind)op) {
    case OP_SCORES:
        status = dsp ? attn_scores_with(dsp, &shape, &o, &q_t, &k_t, &scores)
                     : attn_scores(&shape, &o, &q_t, &k_t, &scores);
        bytes = S_ELEMS * 4;
        break;
    case OP_MASK_APPLY:
        memcpy(r->out, scores_input, sizeof scores_input);
        status = dsp ? attn_mask_apply_with(dsp, &shape, &o, &scores)
                     : attn_mask_apply(&shape, &o, &scores);
        bytes = S_ELEMS * 4;
        break;
    case OP_WEIGHTS:
        status = dsp ? attn_weights_with(dsp, &shape, &o, &q_t, &k_t, &scores, &st)
                     : attn_weights(&shape, &o, &q_t, &k_t, &scores, &st);
        bytes = S_ELEMS * 4;
        break;
    case OP_FORWARD:
        status = dsp ? attn_forward_with(dsp, &shape, &o, &q_t, &k_t, &v_t, &out, &st)
                     : attn_forward(&shape, &o, &q_t, &k_t, &v_t, &out, &st);
        bytes = O_ELEMS * 4;
        break;
    case OP_SOFTMAX:
        memcpy(r->out, rows_input, sizeof rows_input);
        status = dsp ? attn_softmax_with(dsp, r->out, ROWS, COLS, COLS, r->stats[0])
                     : attn_softmax(r->out, ROWS, COLS, COLS, r->stats[0]);
        bytes = ROWS * COLS * 4;
        break;
    case OP_SOFTMAX_BWD:
        status = dsp ? attn_softmax_backward_with(dsp, rows_input, dp_input, r->out, ROWS, COLS,
                                                  COLS)
                     : attn_softmax_backward(rows_input, dp_input, r->out, ROWS, COLS, COLS);
        bytes = ROWS * COLS * 4;
        break;
    case OP_MERGE: {
        const attn_partial parts[2] = {
            {{part_out[0], ATTN_DTYPE_F32, 4 * 33 * 24, 33 * 24, 24}, part_lse[0]},
            {{part_out[1], ATTN_DTYPE_F32, 4 * 33 * 24, 33 * 24, 24}, part_lse[1]}};
        status = dsp ? attn_merge_with(dsp, &shape, &o, parts, 2, &out, r->stats[0])
                     : attn_merge(&shape, &o, parts, 2, &out, r->stats[0]);
        bytes = O_ELEMS * 4;
        break;
    }
    case OP_BACKWARD: {
        const attn_tensor fwd = {bwd_out, ATTN_DTYPE_F32, 4 * 33 * 24, 33 * 24, 24};
        float *const dqp = r->out, *const dkp = dqp + Q_ELEMS, *const dvp = dkp + K_ELEMS;
        const attn_tensor dq = {dqp, ATTN_DTYPE_F32, 4 * 33 * 40, 33 * 40, 40};
        const attn_tensor dk = {dkp, ATTN_DTYPE_F32, 2 * 70 * 40, 70 * 40, 40};
        const attn_tensor dv = {dvp, ATTN_DTYPE_F32, 2 * 70 * 24, 70 * 24, 24};
        const attn_tensor db = {dvp + V_ELEMS, ATTN_DTYPE_F32, 4 * 33 * 70, 33 * 70, 70};
        attn_grads gr = ATTN_GRADS_INIT;
        gr.dq = &dq;
        gr.dk = &dk;
        gr.dv = &dv;
        gr.dbias = &db;
        status = dsp ? attn_backward_with(dsp, &shape, &o, &q_t, &k_t, &v_t, &fwd, &fwd, bwd_lse,
                                          &gr)
                     : attn_backward(&shape, &o, &q_t, &k_t, &v_t, &fwd, &fwd, bwd_lse, &gr);
        bytes = sizeof r->out;
        break;
    }
    case OP_QUANTIZE: /* no kernel table: the same bytes from every caller */
        status = attn_quantize(ATTN_DTYPE_FP8_E4M3, rows_input, ROWS, COLS, COLS, r->out, COLS,
                               0.0f);
        bytes = ROWS * COLS;
        break;
    case OP_PLAN_FORWARD: { /* planned in the plan's own memory, run once */
        attn_tensor fo = out;
        size_t need = 0;
        unsigned char mem[8192];
        attn_plan *plan = NULL;
        status = attn_plan_size(&shape, &o, &need);
        if (status == ATTN_OK && need > sizeof mem)
            status = ATTN_ERR_ARG;
        if (status == ATTN_OK)
            status = dsp ? attn_plan_forward_with(dsp, mem, sizeof mem, &shape, &o, &q_t, &k_t,
                                                  &v_t, &fo, &st, &plan)
                         : attn_plan_forward(mem, sizeof mem, &shape, &o, &q_t, &k_t, &v_t, &fo,
                                             &st, &plan);
        if (status == ATTN_OK)
            status = attn_plan_run(plan, q_t.data, k_t.data, v_t.data, fo.data, &st);
        bytes = O_ELEMS * 4;
        break;
    }
    case OP_CACHE_APPEND: { /* q's rows as the new tokens, into an F16 k and an F32 v cache */
        const attn_tensor kn = {q_data, ATTN_DTYPE_F32, 2 * 33 * 40, 33 * 40, 40};
        const attn_tensor kc = {r->out, ATTN_DTYPE_F16, 2 * 70 * 40, 70 * 40, 40};
        const attn_tensor vc = {r->out + K_ELEMS / 2, ATTN_DTYPE_F32, 2 * 70 * 24, 70 * 24, 24};
        status = dsp ? attn_cache_append_with(dsp, &shape, &o, &kn, &kn, &kc, &vc)
                     : attn_cache_append(&shape, &o, &kn, &kn, &kc, &vc);
        bytes = K_ELEMS * 2 + V_ELEMS * 4;
        break;
    }
    case OP_FORWARD_SOURCES: { /* k and v again as the second source, 8 listed keys a row */
        const attn_kv_source x = {sizeof x, 0, 70, &k_t, &v_t, NULL, source_lists, 8,
                                  NULL, NULL, 0, 0, NULL, 0};
        status = dsp ? attn_forward_sources_with(dsp, &shape, &o, &q_t, &k_t, &v_t, &x, &out, &st)
                     : attn_forward_sources(&shape, &o, &q_t, &k_t, &v_t, &x, &out, &st);
        bytes = O_ELEMS * 4;
        break;
    }
    case OP_COUNT:
        abort();
    }
    if (status != ATTN_OK) {
        fprintf(stderr, "FAIL: %s returned %d\n", op_names[op], status);
        exit(1);
    }
    return hash_bytes(hash_bytes(0xcbf29ce484222325ull, r->out, bytes), r->stats, sizeof r->stats);
}

/* ------------------------------------------------------------ threads */

static pthread_barrier_t start_line;
static atomic_int computing;
static uint64_t seen[COMPUTE_THREADS][ITERATIONS + 1][OP_COUNT];
static int seen_valid[COMPUTE_THREADS][ITERATIONS + 1][OP_COUNT];

static void *compute_main(void *arg)
{
    const int id = (int)(intptr_t)arg;
    result *r = malloc(sizeof *r);
    if (!r)
        abort();
    pthread_barrier_wait(&start_line);
    /* the first library call of the process, different per thread */
    const int first = id % OP_COUNT;
    seen[id][0][first] = run_op(first, NULL, r, NULL);
    seen_valid[id][0][first] = 1;
    for (int it = 1; it <= ITERATIONS; it++)
        for (int k = 0; k < OP_COUNT; k++) {
            const int op = (k + id) % OP_COUNT;
            seen[id][it][op] = run_op(op, NULL, r, NULL);
            seen_valid[id][it][op] = 1;
        }
    atomic_fetch_sub(&computing, 1);
    free(r);
    return NULL;
}

static atomic_long selections;

static void *selector_main(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&start_line);
    /* every attn_isa value of the registry (AUTO = 0 first), then one unknown */
    for (long n = 0; atomic_load(&computing) > 0; n++) {
        const long pick = n % (ATTN_ISA_COUNT + 1);
        const attn_isa isa = pick == ATTN_ISA_COUNT ? (attn_isa)99 : (attn_isa)pick;
        const attn_status st = attn_isa_select(isa);
        const attn_status want = (int)isa == 99               ? ATTN_ERR_ARG
                                 : attn_isa_available(isa) ? ATTN_OK
                                                           : ATTN_ERR_UNSUPPORTED;
        if (st != want) {
            fprintf(stderr, "FAIL: attn_isa_select(%d) = %d, want %d\n", isa, st, want);
            exit(1);
        }
        (void)attn_isa_active();
        atomic_fetch_add(&selections, 1);
        sched_yield();
    }
    return NULL;
}

static attn_threadpool *shared_pool;
static uint64_t pool_hashes[POOL_CALLERS + OWN_POOL_THREADS][ITERATIONS];
static uint64_t pool_backward[POOL_CALLERS + OWN_POOL_THREADS][ITERATIONS];

static void *pool_caller_main(void *arg)
{
    const int id = (int)(intptr_t)arg;
    result *r = malloc(sizeof *r);
    if (!r)
        abort();
    const attn_dsp *scalar = attn_dsp_for_isa(ATTN_ISA_SCALAR);
    for (int it = 0; it < ITERATIONS; it++) {
        attn_threadpool *pool = shared_pool, *own = NULL;
        if (id >= POOL_CALLERS) { /* a pool of its own, created and destroyed while others run */
            if (attn_threadpool_create(1 + (id + it) % 4, &own) != ATTN_OK) {
                fprintf(stderr, "FAIL: attn_threadpool_create\n");
                exit(1);
            }
            pool = own;
        }
        pool_hashes[id][it] = run_op(OP_FORWARD, scalar, r, pool);
        pool_backward[id][it] = run_op(OP_BACKWARD, scalar, r, pool);
        attn_threadpool_destroy(own);
    }
    free(r);
    return NULL;
}

/* ------------------------------------------------------------ main */

int main(void)
{
    init_problem();
    init_backward_merge();
    pthread_t compute[COMPUTE_THREADS], selector, pool_threads[POOL_CALLERS + OWN_POOL_THREADS];
    atomic_store(&computing, COMPUTE_THREADS);
    if (pthread_barrier_init(&start_line, NULL, COMPUTE_THREADS + 1) != 0)
        return 1;
    for (int i = 0; i < COMPUTE_THREADS; i++)
        if (pthread_create(&compute[i], NULL, compute_main, (void *)(intptr_t)i) != 0)
            return 1;
    if (pthread_create(&selector, NULL, selector_main, NULL) != 0)
        return 1;
    for (int i = 0; i < COMPUTE_THREADS; i++)
        pthread_join(compute[i], NULL);
    pthread_join(selector, NULL);
    pthread_barrier_destroy(&start_line);

    /* every result is that of exactly one whole table */
    const attn_dsp *tables[MAX_TABLES];
    int ntables = 0;
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++)
        if (attn_dsp_for_isa((attn_isa)isa))
            tables[ntables++] = attn_dsp_for_isa((attn_isa)isa);
    result *r = malloc(sizeof *r);
    if (!r)
        return 1;
    uint64_t want[MAX_TABLES][OP_COUNT];
    for (int t = 0; t < ntables; t++)
        for (int op = 0; op < OP_COUNT; op++)
            want[t][op] = run_op(op, tables[t], r, NULL);
    int failures = 0;
    long calls = 0;
    for (int id = 0; id < COMPUTE_THREADS; id++)
        for (int it = 0; it <= ITERATIONS; it++)
            for (int op = 0; op < OP_COUNT; op++) {
                if (!seen_valid[id][it][op])
                    continue;
                calls++;
                int match = 0;
                for (int t = 0; t < ntables; t++)
                    match |= seen[id][it][op] == want[t][op];
                if (!match) {
                    fprintf(stderr, "FAIL: thread %d iteration %d: %s matches no table\n", id, it,
                            op_names[op]);
                    failures++;
                }
            }

    /* the built-in pool, shared by several callers and created alongside */
    if (attn_threadpool_create(4, &shared_pool) != ATTN_OK)
        return 1;
    for (int i = 0; i < POOL_CALLERS + OWN_POOL_THREADS; i++)
        if (pthread_create(&pool_threads[i], NULL, pool_caller_main, (void *)(intptr_t)i) != 0)
            return 1;
    for (int i = 0; i < POOL_CALLERS + OWN_POOL_THREADS; i++)
        pthread_join(pool_threads[i], NULL);
    attn_threadpool_destroy(shared_pool);
    const uint64_t serial = run_op(OP_FORWARD, attn_dsp_for_isa(ATTN_ISA_SCALAR), r, NULL);
    const uint64_t serial_backward = run_op(OP_BACKWARD, attn_dsp_for_isa(ATTN_ISA_SCALAR), r, NULL);
    for (int i = 0; i < POOL_CALLERS + OWN_POOL_THREADS; i++)
        for (int it = 0; it < ITERATIONS; it++) {
            if (pool_hashes[i][it] != serial) {
                fprintf(stderr, "FAIL: pool caller %d iteration %d differs from the serial run\n",
                        i, it);
                failures++;
            }
            if (pool_backward[i][it] != serial_backward) {
                fprintf(stderr, "FAIL: pool caller %d iteration %d: backward differs from the "
                                "serial run\n", i, it);
                failures++;
            }
        }
    free(r);
    printf("%ld concurrent calls over %d tables, %ld ISA switches, %d pool calls: %s\n", calls,
           ntables, atomic_load(&selections), (POOL_CALLERS + OWN_POOL_THREADS) * ITERATIONS,
           failures ? "FAILED" : "ok");
    return failures != 0;
}

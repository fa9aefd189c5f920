/* SPDX-License-Identifier: MIT */
/*
 * Plans (attn.h 1.3: attn_plan_size, attn_plan_forward, attn_plan_run) on
 * every ISA row. A plan made on one set of buffers and run on another (the
 * same views at other addresses, as a layer of an engine is) must give
 * exactly attn_forward's bytes on those buffers: the generator's problems
 * with every layout, option and modifier, split-KV with a workspace among
 * them; the arrays the plan copied may change afterwards without effect.
 * tests/ops/test_ops.c also runs every forward of its specs through a plan on
 * the same buffers; the errors test checks each refusal writes nothing.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "harness.h"
#include "internal.h"
#include "workload.h"

/* A copy of buffer `role` of m; *moved: the tensor at the same place in it. */
static void *clone_buf(const gen_bufs *m, int role, attn_tensor *moved)
{
    void *c = xmalloc(m->bytes[role]);
    memcpy(c, m->data[role], m->bytes[role]);
    *moved = m->t[role];
    moved->data = (char *)c + ((char *)m->t[role].data - (char *)m->data[role]);
    return c;
}

static void check_one(const attn_dsp *t, rng *g)
{
    gen_profile prof;
    gen_profile_init(&prof);
    prof.shrink = 1; /* large draws halve their lengths rather than fail */
    gen_chance(&prof, GEN_C_OPT(tree_parents), 64);
    gen_allow_topk(&prof, 64); /* top-k lists (1.7): copied by the plan too */
    gen_chance(&prof, GEN_C_OPT(workspace), 64);
    gen_range(&prof, GEN_C_OPT(shared_prefix), 1, 1);
    gen_chance(&prof, GEN_C_OPT(shared_prefix), 64);
    gen_range(&prof, GEN_C_OPT(kv_splits), 0, 5);
    gen_chance(&prof, GEN_C_OPT(kv_splits), 64);
    gen_problem d;
    gen_src src = wl_gen_source(g);
    CHECK(gen_draw(&d, &src, &prof), "gen_draw");
    gen_bufs m;
    CHECK(gen_materialise(&m, &d, rng_next(g), GEN_M_OUT | GEN_M_STATS, NULL) == 0,
          "gen_materialise");
    char desc[1024];
    harness_context("%s", gen_describe(&d, desc, sizeof desc));

    size_t bytes = 0;
    attn_status st = attn_plan_size(&m.shape, &m.opt, &bytes);
    attn_plan *plan = NULL;
    void *mem = xmalloc(bytes + 3);
    const attn_status direct = attn_forward_with(t, &m.shape, &m.opt, &m.t[GEN_Q], &m.t[GEN_K],
                                                 &m.t[GEN_V], &m.t[GEN_OUT], &m.stats);
    if (st == ATTN_OK) /* unaligned memory on purpose */
        st = attn_plan_forward_with(t, (char *)mem + 3, bytes, &m.shape, &m.opt, &m.t[GEN_Q],
                                    &m.t[GEN_K], &m.t[GEN_V], &m.t[GEN_OUT], &m.stats, &plan);
    CHECK(st == direct, "plan status %d, attn_forward %d", st, direct);
    if (st == ATTN_OK) {
        /* the plan's arrays are copies: the caller's may change now (and
           are put back for the direct call below) */
        const int roles[] = {GEN_OPT(q_lens), GEN_OPT(kv_lens), GEN_OPT(q_offsets),
                             GEN_OPT(kv_offsets), GEN_OPT(tree_parents), GEN_OPT(block_table),
                             GEN_OPT(topk_indices)};
        enum { N_ROLES = sizeof roles / sizeof roles[0] };
        void *saved[N_ROLES] = {NULL};
        for (int i = 0; i < N_ROLES; i++)
            if (m.data[roles[i]]) {
                saved[i] = xmalloc(m.bytes[roles[i]]);
                memcpy(saved[i], m.data[roles[i]], m.bytes[roles[i]]);
                memset(m.data[roles[i]], 0x7f, m.bytes[roles[i]]);
            }

        /* another layer: the same views elsewhere, and the direct call there
           (on copies of the original arrays: its own) */
        attn_tensor q2, k2, v2, o2;
        void *cq = clone_buf(&m, GEN_Q, &q2), *ck = clone_buf(&m, GEN_K, &k2), *cv = clone_buf(&m, GEN_V, &v2);
        void *co = clone_buf(&m, GEN_OUT, &o2);
        /* the first layer's inputs turn to NaN: a run that read them would show */
        for (int r = GEN_Q; r <= GEN_V; r++)
            memset(m.data[r], 0xff, m.bytes[r]);
        const size_t rows = (size_t)(m.shape.batch * m.shape.q_heads * m.shape.q_len);
        float *st_plan = xcalloc0(rows * 3, 4), *st_direct = xcalloc0(rows * 3, 4);
        attn_row_stats sp = {st_plan, st_plan + rows, st_plan + 2 * rows};
        CHECK(attn_plan_run(plan, q2.data, k2.data, v2.data, o2.data, &sp) == ATTN_OK,
              "attn_plan_run");
        void *plan_out = xmalloc(m.bytes[GEN_OUT]);
        memcpy(plan_out, co, m.bytes[GEN_OUT]);

        /* the same run in shares (attn_plan_run_share), last share first:
           the bits of attn_plan_run, or, for a plan whose tasks depend on
           one another, ATTN_ERR_UNSUPPORTED and nothing written */
        {
            static const int32_t counts[] = {1, 2, 3, 7, 64};
            const int32_t shares = counts[rng_int(g, 0, 4)];
            float *st_share = xcalloc0(rows * 3, 4);
            attn_row_stats ss = {st_share, st_share + rows, st_share + 2 * rows};
            memcpy(co, m.data[GEN_OUT], m.bytes[GEN_OUT]);
            const int dependent = m.opt.shared_prefix != NULL ||
                                  (m.opt.workspace != NULL && m.opt.kv_splits != 1);
            int refused = 0;
            for (int32_t sh = shares - 1; sh >= 0; sh--) {
                const attn_status r =
                    attn_plan_run_share(plan, q2.data, k2.data, v2.data, o2.data, &ss, sh, shares);
                CHECK(r == ATTN_OK || (r == ATTN_ERR_UNSUPPORTED && dependent),
                      "share %d of %d: %s", sh, shares, attn_last_error());
                refused |= r != ATTN_OK;
            }
            if (refused)
                expect_bytes("out after refused shares", co, m.data[GEN_OUT], m.bytes[GEN_OUT]);
            else {
                expect_bytes("out (shares vs attn_plan_run)", co, plan_out, m.bytes[GEN_OUT]);
                expect_bits("stats (shares vs attn_plan_run)", st_share, st_plan, rows * 3);
            }
            free(st_share);
        }

        /* the direct call on the second buffers, with the arrays put back */
        for (int i = 0; i < N_ROLES; i++)
            if (saved[i]) {
                memcpy(m.data[roles[i]], saved[i], m.bytes[roles[i]]);
                free(saved[i]);
            }
        attn_row_stats sd = {st_direct, st_direct + rows, st_direct + 2 * rows};
        memcpy(co, m.data[GEN_OUT], m.bytes[GEN_OUT]); /* the same prior bytes */
        CHECK(attn_forward_with(t, &m.shape, &m.opt, &q2, &k2, &v2, &o2, &sd) == ATTN_OK,
              "attn_forward on the second buffers");
        expect_bytes("out (plan vs attn_forward)", plan_out, co, m.bytes[GEN_OUT]);
        expect_bits("stats (plan vs attn_forward)", st_plan, st_direct, rows * 3);
        free(plan_out), free(st_plan), free(st_direct);
        free(cq), free(ck), free(cv), free(co);
    }
    free(mem);
    gen_release(&m);
    gen_free(&d);
}

HARNESS_ISA_PARAMS(plan, runs_like_forward)
ParameterizedTest(isa_row *row, plan, runs_like_forward, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int i = 0; i < 150; i++)
        check_one(t, g);
}

/* Shares run at once on threads of the caller's own (an engine's pool, as
   ggml runs an operator on every thread): the bits of attn_plan_run. */
enum { TS_B = 2, TS_HQ = 8, TS_HKV = 2, TS_L = 97, TS_D = 64, TS_THREADS = 5 };
typedef struct share_job {
    const attn_plan *plan;
    const float *q, *k, *v;
    float *out, *lse;
    int32_t share;
    attn_status status;
} share_job;

static void *run_share(void *arg)
{
    share_job *j = arg;
    attn_row_stats st = {j->lse, NULL, NULL};
    j->status = attn_plan_run_share(j->plan, j->q, j->k, j->v, j->out, &st, j->share, TS_THREADS);
    return NULL;
}

Test(plan, shares_on_threads, .timeout = ATTN_TEST_TIMEOUT)
{
    harness_begin_plain("plan/shares_on_threads");
    rng *g = harness_rng();
    static float q[TS_B * TS_HQ * TS_L * TS_D], k[TS_B * TS_HKV * TS_L * TS_D],
        v[TS_B * TS_HKV * TS_L * TS_D], out[2][TS_B * TS_HQ * TS_L * TS_D],
        lse[2][TS_B * TS_HQ * TS_L];
    static unsigned char mem[1 << 16];
    rng_fill(g, q, sizeof q / 4, -1.0f, 1.0f);
    rng_fill(g, k, sizeof k / 4, -1.0f, 1.0f);
    rng_fill(g, v, sizeof v / 4, -1.0f, 1.0f);
    const attn_shape s = {TS_B, TS_HQ, TS_HKV, TS_L, TS_L, TS_D, 0};
    const attn_tensor tq = {q, ATTN_DTYPE_F32, TS_HQ * TS_L * TS_D, TS_L * TS_D, TS_D};
    const attn_tensor tk = {k, ATTN_DTYPE_F32, TS_HKV * TS_L * TS_D, TS_L * TS_D, TS_D};
    const attn_tensor tv = {v, ATTN_DTYPE_F32, TS_HKV * TS_L * TS_D, TS_L * TS_D, TS_D};
    const attn_tensor to = {out[0], ATTN_DTYPE_F32, TS_HQ * TS_L * TS_D, TS_L * TS_D, TS_D};
    attn_options o = ATTN_OPTIONS_INIT;
    o.flags = ATTN_CAUSAL;
    const attn_row_stats st = {lse[0], NULL, NULL};
    attn_plan *plan = NULL;
    CHECK(attn_plan_forward(mem, sizeof mem, &s, &o, &tq, &tk, &tv, &to, &st, &plan) == ATTN_OK,
          "plan: %s", attn_last_error());
    CHECK(attn_plan_run(plan, q, k, v, out[0], &st) == ATTN_OK, "attn_plan_run");
    share_job jobs[TS_THREADS];
    pthread_t th[TS_THREADS];
    for (int i = 0; i < TS_THREADS; i++) {
        jobs[i] = (share_job){plan, q, k, v, out[1], lse[1], i, ATTN_ERR_ARG};
        CHECK(pthread_create(&th[i], NULL, run_share, &jobs[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < TS_THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].status == ATTN_OK, "share %d: %s", i, attn_strerror(jobs[i].status));
    }
    expect_bits("out (shares on threads vs attn_plan_run)", out[1], out[0], sizeof out[0] / 4);
    expect_bits("lse (shares on threads vs attn_plan_run)", lse[1], lse[0], sizeof lse[0] / 4);
}

/* The arguments of attn_plan_run_share, and a plan that splits its keys:
   refused, nothing written. */
Test(plan, share_errors)
{
    harness_begin_plain("plan/share_errors");
    enum { B = 1, H = 2, L = 5, LK = 4096, D = 16 };
    static float q[B * H * L * D], k[B * H * LK * D], v[B * H * LK * D], out[B * H * L * D];
    static unsigned char ws[1 << 20], mem[1 << 16];
    const attn_shape s = {B, H, H, 1, LK, D, 0};
    const attn_tensor tq = {q, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor tk = {k, ATTN_DTYPE_F32, H * LK * D, LK * D, D};
    const attn_tensor tv = {v, ATTN_DTYPE_F32, H * LK * D, LK * D, D};
    const attn_tensor to = {out, ATTN_DTYPE_F32, H * L * D, L * D, D};
    attn_options o = ATTN_OPTIONS_INIT;
    attn_plan *plan = NULL;
    CHECK(attn_plan_forward(mem, sizeof mem, &s, &o, &tq, &tk, &tv, &to, NULL, &plan) == ATTN_OK,
          "plan: %s", attn_last_error());
    memset(out, 0x5a, sizeof out);
    static const int32_t bad[][2] = {{0, 0}, {-1, 2}, {2, 2}, {0, -3}, {5, 4}};
    for (int i = 0; i < 5; i++) {
        CHECK(attn_plan_run_share(plan, q, k, v, out, NULL, bad[i][0], bad[i][1]) == ATTN_ERR_ARG,
              "share %d of %d accepted", bad[i][0], bad[i][1]);
        CHECK(strstr(attn_last_error(), "attn_plan_run_share: share") == attn_last_error(), "%s",
              attn_last_error());
    }
    CHECK(attn_plan_run_share(plan, NULL, k, v, out, NULL, 0, 1) == ATTN_ERR_NULL, "q NULL");
    /* decode over 4096 keys with a workspace: split-KV, tasks that meet */
    o.workspace = ws;
    o.workspace_size = sizeof ws;
    o.kv_splits = 4;
    CHECK(attn_plan_forward(mem, sizeof mem, &s, &o, &tq, &tk, &tv, &to, NULL, &plan) == ATTN_OK,
          "split plan: %s", attn_last_error());
    CHECK(attn_plan_run_share(plan, q, k, v, out, NULL, 0, 2) == ATTN_ERR_UNSUPPORTED,
          "a split plan run in shares");
    CHECK(strstr(attn_last_error(), "split-KV") != NULL, "%s", attn_last_error());
    unsigned char pattern[sizeof out];
    memset(pattern, 0x5a, sizeof pattern);
    expect_bytes("out after refused shares", out, pattern, sizeof out);
}

/* Each refusal: its status, and out, the stats and the plan's memory as they were. */
Test(plan, errors)
{
    harness_begin_plain("plan/errors");
    enum { B = 2, H = 2, L = 8, D = 16 };
    static float q[B * H * L * D], k[B * H * L * D], v[B * H * L * D], out[B * H * L * D],
        lse[B * H * L];
    for (size_t i = 0; i < sizeof q / 4; i++)
        q[i] = k[i] = v[i] = (float)(i % 13) / 13.0f - 0.5f;
    const attn_shape s = {B, H, H, L, L, D, 0};
    attn_tensor tq = {q, ATTN_DTYPE_F32, H * L * D, L * D, D}, tk = tq, tv = tq;
    tk.data = k, tv.data = v;
    attn_tensor to = tq;
    to.data = out;
    attn_options o = ATTN_OPTIONS_INIT;
    const int32_t kv_lens[B] = {8, 5};
    o.kv_lens = kv_lens;
    o.flags = ATTN_CAUSAL;
    const attn_row_stats st = {lse, NULL, NULL};
    size_t bytes = 0;
    CHECK(attn_plan_size(&s, &o, &bytes) == ATTN_OK, "attn_plan_size");
    unsigned char *mem = xmalloc(bytes), *mem0 = xmalloc(bytes);
    memset(mem, 0x5a, bytes);
    memcpy(mem0, mem, bytes);
    attn_plan *plan = NULL;

    CHECK(attn_plan_forward(NULL, bytes, &s, &o, &tq, &tk, &tv, &to, &st, &plan) ==
              ATTN_ERR_NULL, "mem NULL");
    CHECK(attn_plan_forward(mem, bytes - 1, &s, &o, &tq, &tk, &tv, &to, &st, &plan) ==
              ATTN_ERR_ARG, "one byte short");
    char want[128];
    snprintf(want, sizeof want, "attn_plan_forward: mem_size = %zu bytes, the plan needs %zu",
             bytes - 1, bytes);
    CHECK(strstr(attn_last_error(), want) == attn_last_error(), "attn_last_error() = \"%s\"",
          attn_last_error());
    attn_options bad = o;
    const int32_t too_long[B] = {9, 5};
    bad.kv_lens = too_long;
    CHECK(attn_plan_forward(mem, bytes, &s, &bad, &tq, &tk, &tv, &to, &st, &plan) ==
              ATTN_ERR_ARG, "kv_lens past kv_len: attn_forward's status");
    CHECK(attn_plan_forward(q, sizeof q, &s, &o, &tq, &tk, &tv, &to, &st, &plan) ==
              ATTN_ERR_STRIDE, "the plan's memory inside q");
    CHECK(attn_plan_forward(lse, bytes, &s, &o, &tq, &tk, &tv, &to, &st, &plan) ==
              ATTN_ERR_STRIDE, "the plan's memory on the lse array");
    int32_t lens_in_mem[B + 64] = {8, 5};
    attn_options o_in = o;
    o_in.kv_lens = lens_in_mem;
    CHECK(attn_plan_forward(lens_in_mem, bytes, &s, &o_in, &tq, &tk, &tv, &to, &st, &plan) ==
              ATTN_ERR_STRIDE, "the plan's memory on kv_lens (the array it copies)");
    expect_bytes("the plan's memory after refusals", mem, mem0, bytes);
    CHECK(plan == NULL, "*plan set by a refused call");

    CHECK(attn_plan_forward(mem, bytes, &s, &o, &tq, &tk, &tv, &to, &st, &plan) == ATTN_OK,
          "the valid plan");
    static float out0[sizeof out / 4], lse0[sizeof lse / 4];
    for (size_t i = 0; i < sizeof out / 4; i++)
        out[i] = out0[i] = -7.0f;
    for (size_t i = 0; i < sizeof lse / 4; i++)
        lse[i] = lse0[i] = -7.0f;
    const attn_row_stats lse_in_out = {out + 5, NULL, NULL};
    struct {
        const char *what;
        attn_status want;
        const attn_plan *p;
        const void *q;
        void *out;
        const attn_row_stats *st;
    } cases[] = {
        {"plan NULL", ATTN_ERR_NULL, NULL, q, out, &st},
        {"q NULL", ATTN_ERR_NULL, plan, NULL, out, &st},
        {"out NULL", ATTN_ERR_NULL, plan, q, NULL, &st},
        {"out inside q", ATTN_ERR_STRIDE, plan, q, q + 7, &st},
        {"out is q", ATTN_ERR_STRIDE, plan, out, out, &st},
        {"lse inside out", ATTN_ERR_STRIDE, plan, q, out, &lse_in_out},
        {"out inside the plan", ATTN_ERR_STRIDE, plan, q, mem, &st},
        {"not a plan", ATTN_ERR_ARG, (const attn_plan *)(const void *)mem0, q, out, &st},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_context("%s", cases[i].what);
        const attn_status got =
            attn_plan_run(cases[i].p, cases[i].q, k, v, cases[i].out, cases[i].st);
        CHECK(got == cases[i].want, "status %d, want %d", got, cases[i].want);
        expect_bits("out", out, out0, sizeof out / 4);
        expect_bits("lse", lse, lse0, sizeof lse / 4);
        expect_bytes("q", q, k, sizeof q); /* q, k, v hold the same values */
    }
    harness_context("a run with the planned buffers");
    CHECK(attn_plan_run(plan, q, k, v, out, &st) == ATTN_OK, "the valid run");
    free(mem), free(mem0);
}

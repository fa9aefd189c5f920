/* SPDX-License-Identifier: MIT */
/*
 * attn-fuzz-split: attn_forward with the 1.1 options (q_pos, k_pos,
 * kv_splits, workspace) on every kernel table, with hostile values.
 *
 * The input decodes into a small problem (up to 1500 keys, so several
 * 256-key chunks), causal/window masks, kv_lens, q_pos/k_pos absent or from
 * {0, small, ATTN_MAX_POSITION, ATTN_MAX_POSITION + 1, -1, INT64_MIN,
 * INT64_MAX}, kv_splits from {0, 1, 2, 3, 7, 1024, 1025, -1, INT32_MIN}, and
 * a workspace that is absent, exactly the queried size, one byte short,
 * larger, or over the output. The workspace ends at a PROT_NONE page and is
 * filled with random bytes first (it may hold anything).
 *
 * Fails on: a crash or sanitizer report; a status other than the one
 * attn.h's rules give (a position outside [0, ATTN_MAX_POSITION] or
 * kv_splits outside [0, ATTN_MAX_KV_SPLITS]: ATTN_ERR_ARG; kv_splits >= 2
 * with a split planned and too small a workspace: ATTN_ERR_ARG; a used
 * workspace over the output: ATTN_ERR_STRIDE; else ATTN_OK); a rejected call
 * that wrote the output; a workspace-size query that disagrees with
 * attn_forward about splitting; for accepted calls, a result outside
 * tests/tolerance.h's forward bound of the float64 reference (which applies
 * the positions itself), or a -inf/0 pattern different from it; different
 * bits from the same call run in reverse task order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "fuzz_util.h"
#include "internal.h"
#include "ref/ref.h"
#include "tolerance.h"

static void reversed_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    (void)ctx;
    for (size_t i = count; i-- > 0;)
        task(task_ctx, i);
}

static int64_t hostile_pos(fz_reader *r, int64_t small_max, int *bad)
{
    switch (fz_range(r, 0, 31)) {
    case 0: return 0;
    case 1: return ATTN_MAX_POSITION;
    case 2: *bad = 1; return ATTN_MAX_POSITION + 1;
    case 3: *bad = 1; return -1;
    case 4: *bad = 1; return INT64_MIN;
    case 5: *bad = 1; return INT64_MAX;
    default: return fz_range(r, 0, small_max);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader rd = {data, size};
    fz_reader *r = &rd;
    fz_rng g = {fz_u64(r) | 1};

    attn_shape s;
    s.batch = fz_range(r, 1, 2);
    s.kv_heads = fz_range(r, 1, 2);
    s.q_heads = s.kv_heads * fz_range(r, 1, 3);
    s.q_len = fz_range(r, 1, 4);
    s.kv_len = fz_chance(r, 128) ? fz_range(r, 1, 300) : fz_range(r, 257, 1500);
    s.head_dim = fz_range(r, 1, 16);
    s.v_dim = fz_range(r, 0, 12);
    const int64_t dv = s.v_dim ? s.v_dim : s.head_dim;
    const int64_t rows = s.batch * s.q_heads * s.q_len;

    attn_options opt = ATTN_OPTIONS_INIT;
    int bad_arg = 0;
    opt.flags = fz_chance(r, 160) ? ATTN_CAUSAL : 0;
    if (fz_chance(r, 80))
        opt.window = fz_range(r, 1, s.kv_len + 3);
    int32_t kv_lens[2];
    if (fz_chance(r, 80)) {
        for (int64_t b = 0; b < s.batch; b++)
            kv_lens[b] = (int32_t)fz_range(r, 0, s.kv_len);
        opt.kv_lens = kv_lens;
    }
    int64_t q_pos[2], k_pos[2];
    if (fz_chance(r, 170)) {
        for (int64_t b = 0; b < s.batch; b++)
            q_pos[b] = hostile_pos(r, 3000, &bad_arg);
        opt.q_pos = q_pos;
    }
    if (fz_chance(r, 170)) {
        for (int64_t b = 0; b < s.batch; b++)
            k_pos[b] = hostile_pos(r, 3000, &bad_arg);
        opt.k_pos = k_pos;
    }
    static const int32_t splits[] = {0, 1, 2, 3, 7, 1024, 1025, -1, INT32_MIN, 0, 2, 5};
    opt.kv_splits = splits[fz_range(r, 0, (int64_t)(sizeof splits / sizeof splits[0]) - 1)];
    if (opt.kv_splits < 0 || opt.kv_splits > ATTN_MAX_KV_SPLITS)
        bad_arg = 1;

    /* inputs */
    const size_t nq = (size_t)(rows * s.head_dim), nk = (size_t)(s.batch * s.kv_heads * s.kv_len);
    float *q = malloc(nq * 4), *k = malloc(nk * (size_t)s.head_dim * 4),
          *v = malloc(nk * (size_t)dv * 4);
    for (size_t i = 0; i < nq; i++)
        q[i] = fz_rng_float(&g, -2.0f, 2.0f);
    for (size_t i = 0; i < nk * (size_t)s.head_dim; i++)
        k[i] = fz_rng_float(&g, -2.0f, 2.0f);
    for (size_t i = 0; i < nk * (size_t)dv; i++)
        v[i] = fz_rng_float(&g, -5.0f, 5.0f);
    const attn_tensor tq = {q, ATTN_DTYPE_F32, s.q_heads * s.q_len * s.head_dim,
                            s.q_len * s.head_dim, s.head_dim};
    const attn_tensor tk = {k, ATTN_DTYPE_F32, s.kv_heads * s.kv_len * s.head_dim,
                            s.kv_len * s.head_dim, s.head_dim};
    const attn_tensor tv = {v, ATTN_DTYPE_F32, s.kv_heads * s.kv_len * dv, s.kv_len * dv, dv};

    /* the workspace, from the query */
    size_t need = 0;
    attn_status qs = attn_forward_workspace_size(&s, &opt, &need);
    FZ_CHECK(qs == (bad_arg ? ATTN_ERR_ARG : ATTN_OK), "workspace query: status %d", qs);
    /* the data-independent bound (1.11): the same status, never below */
    size_t bound = 0;
    const attn_status qb = attn_forward_workspace_bound(&s, &opt, &bound);
    FZ_CHECK(qb == qs, "workspace bound: status %d, the query's %d", qb, qs);
    FZ_CHECK(qb != ATTN_OK || bound >= need, "workspace bound %zu below the query's %zu", bound,
             need);
    fz_buf wsb = {0}, outb;
    const int ws_mode = (int)fz_range(r, 0, 4); /* none, exact, short, large, over out */
    size_t ws_size = 0;
    float *out = fz_buf_alloc(&outb, (size_t)(rows * dv) * 4 + 4096, 0);
    void *ws = NULL;
    if (ws_mode == 1 || ws_mode == 2 || ws_mode == 3) {
        ws_size = ws_mode == 1 ? need : ws_mode == 2 ? (need ? need - 1 : 0) : need + 100;
        ws = fz_buf_alloc(&wsb, ws_size, 0);
        for (size_t i = 0; i < ws_size; i++)
            ((unsigned char *)ws)[i] = (unsigned char)fz_rng_next(&g);
    } else if (ws_mode == 4) {
        ws = out; /* over the output (and past it: the buffer has 4 KiB more) */
        ws_size = need;
    }
    opt.workspace = ws;
    opt.workspace_size = ws_size;

    /* what attn.h says the call must return */
    attn_status want = ATTN_OK;
    if (bad_arg)
        want = ATTN_ERR_ARG;
    else if (need > 0 && ws_size >= need && ws_mode == 4)
        want = ATTN_ERR_STRIDE; /* a used workspace over the output */
    else if (need > 0 && opt.kv_splits >= 2 && (!ws || ws_size < need))
        want = ATTN_ERR_ARG;

    ref_attn ref;
    int have_ref = 0;
    float *lse = malloc((size_t)rows * 4), *first = malloc((size_t)(rows * dv) * 4 + 4);
    for (attn_isa isa = ATTN_ISA_SCALAR; isa < (attn_isa)ATTN_ISA_COUNT; isa++) {
        const attn_dsp *t = attn_dsp_for_isa(isa);
        if (!t)
            continue;
        const attn_tensor to = {out, ATTN_DTYPE_F32, s.q_heads * s.q_len * dv, s.q_len * dv, dv};
        attn_row_stats st = {lse, NULL, NULL};
        memset(out, 0x5a, (size_t)(rows * dv) * 4);
        opt.parallel_for = NULL;
        attn_status got = attn_forward_with(t, &s, &opt, &tq, &tk, &tv, &to, &st);
        FZ_CHECK(got == want, "%s: status %d, attn.h says %d (need %zu, workspace %zu, mode %d)",
                 attn_isa_name(isa), got, want, need, ws_size, ws_mode);
        if (got != ATTN_OK) {
            for (size_t i = 0; i < (size_t)(rows * dv) * 4; i++)
                FZ_CHECK(((unsigned char *)out)[i] == 0x5a, "rejected call wrote the output");
            continue;
        }
        if (!have_ref) {
            const int64_t rescales = (s.kv_len + 63) / 64 + 1; /* smallest block_k: scalar's */
            ref_attn_compute(&ref, &s, &opt, &tq, &tk, &tv, rescales);
            have_ref = 1;
        }
        for (int64_t row = 0; row < rows; row++)
            for (int64_t c = 0; c < dv; c++) {
                const double want_v = ref.o[row * dv + c], err = ref.o_err[row * dv + c];
                const float gv = out[row * dv + c];
                FZ_CHECK(fabs(gv - want_v) <= err, "%s: out[%lld][%lld] %.9g vs float64 %.9g "
                         "(bound %.3g; kv_splits %d, need %zu)", attn_isa_name(isa),
                         (long long)row, (long long)c, (double)gv, want_v, err,
                         opt.kv_splits, need);
            }
        for (int64_t row = 0; row < rows; row++)
            FZ_CHECK((lse[row] == -INFINITY) == (ref.lse[row] == -INFINITY) &&
                         (ref.lse[row] == -INFINITY || fabs(lse[row] - ref.lse[row]) <= ref.lse_err[row]),
                     "%s: lse[%lld] %.9g vs float64 %.9g", attn_isa_name(isa), (long long)row,
                     (double)lse[row], ref.lse[row]);
        memcpy(first, out, (size_t)(rows * dv) * 4);
        opt.parallel_for = reversed_for;
        FZ_CHECK(attn_forward_with(t, &s, &opt, &tq, &tk, &tv, &to, &st) == ATTN_OK, "rerun");
        FZ_CHECK(memcmp(first, out, (size_t)(rows * dv) * 4) == 0,
                 "%s: reverse task order changed the bits", attn_isa_name(isa));
    }
    if (have_ref)
        ref_attn_free(&ref);
    free(q), free(k), free(v), free(lse), free(first);
    fz_buf_free(&outb);
    fz_buf_free(&wsb);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Positions per key slot (attn.h, attn_options.k_positions, 1.11): a cache
 * whose slots hold its keys in a shuffled order, a few slots empty (-1),
 * against float64 on every ISA row (scores, mask_apply, weights, forward,
 * backward, a plan, split-KV, shards of alternate slots merged), and bit
 * for bit against its twin: the same
 * keys sorted into position order, described by k_pos.
 *
 * What is exactly comparable: a score, the gradient of one score (dbias)
 * and of one key (dk, dv rows) are made element by element, and no kernel's
 * result for a (row, key) pair depends on where the key lies in its call;
 * but it may depend on how many rows the call takes (AVX-512 sums a score
 * in another order from 9 rows on), and the twin hands a kernel only the
 * rows that see a tile, where the slots' call hands it every row. So the
 * twins agree bit for bit (after permuting columns or key rows; a hidden
 * score's gradient is 0 * (dP - D), a zero of either sign) where every row
 * of a task sees the same tiles in the twin: decode (one query position per
 * task) and calls without causal or windows (ALiBi and empty slots still
 * by position). What sums over a row's keys (the softmax's sum, out, lse,
 * dq) sums in the slots' order, and is held to float64 in every case, as
 * is everything in the cases with causal and windows.
 * Then the argument checks, with their messages.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "ref/ref.h"
#include "ref/ref_backward.h"
#include "tolerance.h"

enum { KP_B = 2 };

/* One problem and its twin: s (sorted: key j of sequence b at row j,
   position k_pos[b] + j) and p (permuted: slot t holds sorted key
   key_of[b][t], or nothing for -1). */
typedef struct kp_case {
    attn_shape s, p;
    int64_t n[KP_B], lk[KP_B]; /* keys (s), slots (p) per sequence */
    int64_t *key_of;           /* [KP_B][p.kv_len], -1: empty or past lk */
    float *q, *ks, *vs, *kp, *vp, *bias_s, *bias_p, *dout, slopes[8], sinks[8];
    int32_t q_lens[KP_B], lens_s[KP_B], lens_p[KP_B];
    int64_t k_pos[KP_B], qpos_s[KP_B], qpos_p[KP_B], *slot_pos;
    attn_tensor tq, tks, tvs, tkp, tvp, tbs, tbp, tsl, tsk, tdo;
    attn_options os, op;
    int64_t dv;
    int exact; /* every row of a task sees the same tiles in the twin */
} kp_case;

static float *alloc_fill(rng *g, size_t n, float lo, float hi)
{
    float *x = xmalloc((n ? n : 1) * sizeof(float));
    rng_fill(g, x, n, lo, hi);
    return x;
}

static void kp_make(kp_case *c, rng *g, int rep)
{
    memset(c, 0, sizeof *c);
    static const int64_t dims[] = {8, 32, 40, 64}, qlens[] = {1, 3, 9, 20},
                         kvmax[] = {7, 70, 300};
    const int64_t hkv = rng_int(g, 1, 2), group = rng_pick(g, (const int64_t[]){1, 2, 4}, 3);
    /* rep % 3: decode, no causal or window, anything */
    const int mode = rep % 3;
    const int64_t d = rng_pick(g, dims, 4), lq = mode == 0 ? 1 : rng_pick(g, qlens, 4);
    const int64_t most = rng_pick(g, kvmax, 3);
    c->dv = rng_int(g, 0, 1) ? d : 16;
    int64_t ns = 1, np = 1;
    for (int b = 0; b < KP_B; b++) {
        c->n[b] = rng_int(g, 1, most);
        c->lk[b] = c->n[b] + rng_int(g, 0, 5); /* empty slots among the keys */
        c->q_lens[b] = (int32_t)rng_int(g, 1, lq);
        ns = c->n[b] > ns ? c->n[b] : ns;
        np = c->lk[b] > np ? c->lk[b] : np;
    }
    np += rng_int(g, 0, 3); /* slots past every sequence */
    const attn_shape base = {KP_B, hkv * group, hkv, lq, 0, d, c->dv};
    c->s = c->p = base;
    c->s.kv_len = ns;
    c->p.kv_len = np;
    const int64_t hq = base.q_heads;

    /* positions: with q_pos, or (rep & 1) the bottom-right default of the
       slots, Lk_b - Lq_b, which the twin gives as its q_pos */
    const int with_qpos = (rep / 3) % 2 == 0;
    for (int b = 0; b < KP_B; b++) {
        c->k_pos[b] = with_qpos ? rng_int(g, 0, 500) : 0;
        const int64_t q0 = with_qpos ? c->k_pos[b] + c->n[b] - c->q_lens[b] + rng_int(g, -3, 6)
                                     : c->lk[b] - c->q_lens[b];
        c->qpos_p[b] = c->qpos_s[b] = q0 < 0 ? 0 : q0;
        c->lens_s[b] = (int32_t)c->n[b];
        c->lens_p[b] = (int32_t)c->lk[b];
    }
    if (!with_qpos) /* keep the default meaningful: Lk_b >= Lq_b */
        for (int b = 0; b < KP_B; b++)
            if (c->lk[b] < c->q_lens[b])
                c->q_lens[b] = (int32_t)c->lk[b], c->qpos_s[b] = c->qpos_p[b] = 0;

    /* the slots: a shuffle of the keys and the empty slots */
    c->key_of = xmalloc((size_t)(KP_B * np) * sizeof(int64_t));
    c->slot_pos = xmalloc((size_t)(KP_B * np) * sizeof(int64_t));
    for (int b = 0; b < KP_B; b++) {
        int64_t *row = c->key_of + b * np;
        for (int64_t t = 0; t < np; t++)
            row[t] = t < c->n[b] ? t : -1;
        for (int64_t t = c->lk[b] - 1; t > 0; t--) {
            const int64_t r = rng_int(g, 0, t), x = row[t];
            row[t] = row[r];
            row[r] = x;
        }
        for (int64_t t = 0; t < np; t++) /* past lk: never read, never valid */
            c->slot_pos[b * np + t] = t >= c->lk[b] ? INT64_MAX
                                      : row[t] < 0  ? -1
                                                    : c->k_pos[b] + row[t];
    }

    /* tensors: the twin's keys, values and bias columns are the same
       numbers, moved; empty slots get values of their own */
    const size_t nq = (size_t)(KP_B * hq * lq * d);
    c->q = alloc_fill(g, nq, -1.5f, 1.5f);
    c->ks = alloc_fill(g, (size_t)(KP_B * hkv * ns * d), -1.5f, 1.5f);
    c->vs = alloc_fill(g, (size_t)(KP_B * hkv * ns * c->dv), -4.0f, 4.0f);
    c->kp = alloc_fill(g, (size_t)(KP_B * hkv * np * d), -1.5f, 1.5f);
    c->vp = alloc_fill(g, (size_t)(KP_B * hkv * np * c->dv), -4.0f, 4.0f);
    c->bias_s = alloc_fill(g, (size_t)(KP_B * hq * lq * ns), -2.0f, 2.0f);
    c->bias_p = alloc_fill(g, (size_t)(KP_B * hq * lq * np), -2.0f, 2.0f);
    c->dout = alloc_fill(g, (size_t)(KP_B * hq * lq * c->dv), -2.0f, 2.0f);
    for (int b = 0; b < KP_B; b++)
        for (int64_t t = 0; t < np; t++) {
            const int64_t j = c->key_of[b * np + t];
            if (j < 0)
                continue;
            for (int64_t h = 0; h < hkv; h++) {
                memcpy(c->kp + ((b * hkv + h) * np + t) * d, c->ks + ((b * hkv + h) * ns + j) * d,
                       (size_t)d * 4);
                memcpy(c->vp + ((b * hkv + h) * np + t) * c->dv,
                       c->vs + ((b * hkv + h) * ns + j) * c->dv, (size_t)c->dv * 4);
            }
            for (int64_t h = 0; h < hq; h++)
                for (int64_t i = 0; i < lq; i++)
                    c->bias_p[((b * hq + h) * lq + i) * np + t] =
                        c->bias_s[((b * hq + h) * lq + i) * ns + j];
        }
    c->tq = (attn_tensor){c->q, ATTN_DTYPE_F32, hq * lq * d, lq * d, d};
    c->tks = (attn_tensor){c->ks, ATTN_DTYPE_F32, hkv * ns * d, ns * d, d};
    c->tvs = (attn_tensor){c->vs, ATTN_DTYPE_F32, hkv * ns * c->dv, ns * c->dv, c->dv};
    c->tkp = (attn_tensor){c->kp, ATTN_DTYPE_F32, hkv * np * d, np * d, d};
    c->tvp = (attn_tensor){c->vp, ATTN_DTYPE_F32, hkv * np * c->dv, np * c->dv, c->dv};
    c->tbs = (attn_tensor){c->bias_s, ATTN_DTYPE_F32, hq * lq * ns, lq * ns, ns};
    c->tbp = (attn_tensor){c->bias_p, ATTN_DTYPE_F32, hq * lq * np, lq * np, np};
    c->tdo = (attn_tensor){c->dout, ATTN_DTYPE_F32, hq * lq * c->dv, lq * c->dv, c->dv};
    rng_fill(g, c->slopes, 8, 0.0f, 0.5f);
    rng_fill(g, c->sinks, 8, -1.0f, 2.0f);
    c->tsl = (attn_tensor){c->slopes, ATTN_DTYPE_F32, 0, 1, 0};
    c->tsk = (attn_tensor){c->sinks, ATTN_DTYPE_F32, 0, 1, 0};

    /* the options: causal and both windows now and then, ALiBi mostly */
    attn_options o = ATTN_OPTIONS_INIT;
    if (mode != 1) {
        o.flags = rng_int(g, 0, 3) ? ATTN_CAUSAL : 0;
        o.window = rng_int(g, 0, 1) ? rng_int(g, 1, most) : 0;
        o.window_right = rng_int(g, 0, 2) ? 0 : rng_int(g, 1, most);
    }
    o.alibi_slopes = mode == 1 || rng_int(g, 0, 3) ? &c->tsl : NULL;
    c->exact = mode != 2;
    o.sinks = rng_int(g, 0, 2) ? NULL : &c->tsk;
    o.softcap = rng_int(g, 0, 3) ? 0.0f : 8.0f;
    o.q_lens = c->q_lens;
    c->os = c->op = o;
    c->os.kv_lens = c->lens_s;
    c->os.k_pos = c->k_pos;
    c->os.q_pos = c->qpos_s;
    c->op.kv_lens = c->lens_p;
    c->op.k_positions = c->slot_pos;
    c->op.q_pos = with_qpos ? c->qpos_p : NULL;
    if (rng_int(g, 0, 1)) {
        c->os.bias = &c->tbs;
        c->op.bias = &c->tbp;
    }
}

static void kp_free(kp_case *c)
{
    free(c->key_of);
    free(c->slot_pos);
    free(c->q);
    free(c->ks);
    free(c->vs);
    free(c->kp);
    free(c->vp);
    free(c->bias_s);
    free(c->bias_p);
    free(c->dout);
}

static const char *kp_describe(const kp_case *c)
{
    static char line[256];
    snprintf(line, sizeof line,
             "Hq=%lld Hkv=%lld Lq=%lld keys %lld,%lld slots %lld,%lld (kv_len %lld) d=%lld "
             "dv=%lld causal=%d W=%lld R=%lld alibi=%d sinks=%d softcap=%g bias=%d q_pos=%d",
             (long long)c->p.q_heads, (long long)c->p.kv_heads, (long long)c->p.q_len,
             (long long)c->n[0], (long long)c->n[1], (long long)c->lk[0], (long long)c->lk[1],
             (long long)c->p.kv_len, (long long)c->p.head_dim, (long long)c->dv,
             (int)(c->op.flags & ATTN_CAUSAL), (long long)c->op.window,
             (long long)c->op.window_right, c->op.alibi_slopes != NULL, c->op.sinks != NULL,
             (double)c->op.softcap, c->op.bias != NULL, c->op.q_pos != NULL);
    return line;
}

/* An [KP_B][H][Lq][kv_len] table of the twin's columns in the slots' order:
   the twin's column key_of[t] for a key, fill for an empty or padded slot
   (and every column of a padded row). */
static float *permute_columns(const kp_case *c, const float *sorted, float fill)
{
    const int64_t hq = c->p.q_heads, lq = c->p.q_len, ns = c->s.kv_len, np = c->p.kv_len;
    float *out = xmalloc((size_t)(KP_B * hq * lq * np) * 4);
    for (int b = 0; b < KP_B; b++)
        for (int64_t h = 0; h < hq; h++)
            for (int64_t i = 0; i < lq; i++)
                for (int64_t t = 0; t < np; t++) {
                    const int64_t j = c->key_of[b * np + t];
                    out[((b * hq + h) * lq + i) * np + t] =
                        j >= 0 && i < c->q_lens[b] ? sorted[((b * hq + h) * lq + i) * ns + j]
                                                   : fill;
                }
    return out;
}

/* -0 as +0: the gradient of a hidden score is 0 * (dP - D), whose sign
   depends on dP - D; the twin never computes it (its hidden keys are past
   the rows' visible ranges: 0 written) */
static void unsign_zeros(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (x[i] == 0.0f)
            x[i] = 0.0f;
}

/* Key rows [KP_B][Hkv][kv_len][cols] of the twin in the slots' order (0 for
   an empty or padded slot: no query sees it). */
/* A gradient against the sorted twin's, permuted into `want` (freed here):
   the same bits but for the sign of zeros (a hidden score's gradient). */
static void expect_twin(const char *what, const float *got_src, float *want, size_t n)
{
    float *got = xmalloc(n * 4);
    memcpy(got, got_src, n * 4);
    unsign_zeros(got, n);
    unsign_zeros(want, n);
    expect_bits(what, got, want, n);
    free(got);
    free(want);
}

static float *permute_keys(const kp_case *c, const float *sorted, int64_t cols)
{
    const int64_t hkv = c->p.kv_heads, ns = c->s.kv_len, np = c->p.kv_len;
    float *out = xcalloc0((size_t)(KP_B * hkv * np * cols), 4);
    for (int b = 0; b < KP_B; b++)
        for (int64_t h = 0; h < hkv; h++)
            for (int64_t t = 0; t < np; t++) {
                const int64_t j = c->key_of[b * np + t];
                if (j >= 0)
                    memcpy(out + ((b * hkv + h) * np + t) * cols,
                           sorted + ((b * hkv + h) * ns + j) * cols, (size_t)cols * 4);
            }
    return out;
}

/* Online-softmax rescales of a forward over kv_len keys (tolerance.h R). */
static int64_t rescales(const attn_dsp *t, int64_t kv_len)
{
    const attn_dsp *sc = harness_scalar();
    const int64_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
    return (kv_len + bk - 1) / bk + 1;
}

static void kp_case_run(const attn_dsp *t, kp_case *c)
{
    const int64_t hq = c->p.q_heads, hkv = c->p.kv_heads, lq = c->p.q_len, d = c->p.head_dim;
    const int64_t ns = c->s.kv_len, np = c->p.kv_len, dv = c->dv;
    const size_t rows = (size_t)(KP_B * hq * lq), nsc_s = rows * (size_t)ns,
                 nsc_p = rows * (size_t)np;
    float *sc_s = xmalloc(nsc_s * 4), *sc_p = xmalloc(nsc_p * 4);
    const attn_tensor ts_s = {sc_s, ATTN_DTYPE_F32, hq * lq * ns, lq * ns, ns};
    const attn_tensor ts_p = {sc_p, ATTN_DTYPE_F32, hq * lq * np, lq * np, np};

    /* scores: the twin's, column for column */
    harness_context("k_positions scores, %s", kp_describe(c));
    CHECK(attn_scores_with(t, &c->s, &c->os, &c->tq, &c->tks, &ts_s) == ATTN_OK, "sorted: %s",
          attn_last_error());
    CHECK(attn_scores_with(t, &c->p, &c->op, &c->tq, &c->tkp, &ts_p) == ATTN_OK, "slots: %s",
          attn_last_error());
    float *want = permute_columns(c, sc_s, -INFINITY);
    if (c->exact)
        expect_bits("scores vs the sorted twin's", sc_p, want, nsc_p);
    free(want);
    ref_attn r;
    ref_attn_compute(&r, &c->p, &c->op, &c->tq, &c->tkp, &c->tvp, rescales(t, np));
    expect_near("scores vs float64", sc_p, np, r.s, r.s_err, rows, (size_t)np);

    /* mask_apply on the twin's scores: the same terms, column for column */
    harness_context("k_positions mask_apply, %s", kp_describe(c));
    attn_options ms = c->os, mp = c->op;
    ms.scale = mp.scale = 0.0f;
    float *in_s = xmalloc(nsc_s * 4);
    rng_fill(harness_rng(), in_s, nsc_s, -3.0f, 3.0f);
    memcpy(sc_s, in_s, nsc_s * 4);
    float *in_p = permute_columns(c, in_s, 0.0f);
    memcpy(sc_p, in_p, nsc_p * 4);
    CHECK(attn_mask_apply_with(t, &c->s, &ms, &ts_s) == ATTN_OK, "sorted: %s", attn_last_error());
    CHECK(attn_mask_apply_with(t, &c->p, &mp, &ts_p) == ATTN_OK, "slots: %s", attn_last_error());
    want = permute_columns(c, sc_s, -INFINITY);
    expect_bits("mask_apply vs the sorted twin's", sc_p, want, nsc_p); /* no kernel of rows */
    free(want);
    free(in_s);
    free(in_p);

    /* weights and stats: float64 (the row sums run in the slots' order) */
    harness_context("k_positions weights, %s", kp_describe(c));
    float *lse_w = xmalloc(rows * 4), *mx_w = xmalloc(rows * 4), *ent_w = xmalloc(rows * 4);
    attn_row_stats st_w = {lse_w, mx_w, ent_w};
    CHECK(attn_weights_with(t, &c->p, &c->op, &c->tq, &c->tkp, &ts_p, &st_w) == ATTN_OK, "%s",
          attn_last_error());
    expect_near("weights vs float64", sc_p, np, r.p, r.p_err, rows, (size_t)np);
    expect_near("weights' lse vs float64", lse_w, 1, r.lse, r.lse_err, 1, rows);
    expect_near("max_score vs float64", mx_w, 1, r.max, r.max_err, 1, rows);
    expect_near("entropy vs float64", ent_w, 1, r.ent, r.ent_err, 1, rows);

    /* forward: float64; its twin's out and lse feed both backward calls */
    harness_context("k_positions forward, %s", kp_describe(c));
    const size_t no = rows * (size_t)dv;
    float *out_s = xmalloc(no * 4), *out_p = xmalloc(no * 4), *lse_s = xmalloc(rows * 4),
          *lse_p = xmalloc(rows * 4);
    const attn_tensor to_s = {out_s, ATTN_DTYPE_F32, hq * lq * dv, lq * dv, dv};
    const attn_tensor to_p = {out_p, ATTN_DTYPE_F32, hq * lq * dv, lq * dv, dv};
    attn_row_stats st_s = {lse_s, NULL, NULL}, st_p = {lse_p, NULL, NULL};
    CHECK(attn_forward_with(t, &c->s, &c->os, &c->tq, &c->tks, &c->tvs, &to_s, &st_s) == ATTN_OK,
          "sorted: %s", attn_last_error());
    CHECK(attn_forward_with(t, &c->p, &c->op, &c->tq, &c->tkp, &c->tvp, &to_p, &st_p) == ATTN_OK,
          "slots: %s", attn_last_error());
    expect_near("out vs float64", out_p, dv, r.o, r.o_err, rows, (size_t)dv);
    expect_near("lse vs float64", lse_p, 1, r.lse, r.lse_err, 1, rows);

    /* a plan copies k_positions: the caller's array may change after */
    harness_context("k_positions plan, %s", kp_describe(c));
    size_t plan_bytes = 0;
    CHECK(attn_plan_size(&c->p, &c->op, &plan_bytes) == ATTN_OK, "%s", attn_last_error());
    void *mem = xmalloc(plan_bytes);
    attn_plan *plan;
    CHECK(attn_plan_forward_with(t, mem, plan_bytes, &c->p, &c->op, &c->tq, &c->tkp, &c->tvp,
                                 &to_p, &st_p, &plan) == ATTN_OK,
          "%s", attn_last_error());
    int64_t *kept = xmalloc((size_t)(KP_B * np) * 8);
    memcpy(kept, c->slot_pos, (size_t)(KP_B * np) * 8);
    for (int64_t e = 0; e < KP_B * np; e++)
        c->slot_pos[e] = -1;
    float *out_plan = xmalloc(no * 4), *lse_plan = xmalloc(rows * 4);
    attn_row_stats st_plan = {lse_plan, NULL, NULL};
    CHECK(attn_plan_run(plan, c->q, c->kp, c->vp, out_plan, &st_plan) == ATTN_OK, "%s",
          attn_last_error());
    memcpy(c->slot_pos, kept, (size_t)(KP_B * np) * 8);
    expect_bits("a plan's out vs attn_forward's", out_plan, out_p, no);
    expect_bits("a plan's lse vs attn_forward's", lse_plan, lse_p, rows);
    free(kept);
    free(mem);
    free(out_plan);
    free(lse_plan);

    /* split-KV: every chunk masks its keys by their own positions */
    harness_context("k_positions split-KV, %s", kp_describe(c));
    attn_options sp = c->op;
    sp.kv_splits = 3;
    size_t ws = 0;
    CHECK(attn_forward_workspace_size(&c->p, &sp, &ws) == ATTN_OK, "%s", attn_last_error());
    void *wmem = xmalloc(ws ? ws : 1);
    sp.workspace = wmem;
    sp.workspace_size = ws;
    CHECK(attn_forward_with(t, &c->p, &sp, &c->tq, &c->tkp, &c->tvp, &to_p, &st_p) == ATTN_OK,
          "%s", attn_last_error());
    ref_attn rs;
    ref_attn_compute(&rs, &c->p, &c->op, &c->tq, &c->tkp, &c->tvp, rescales(t, np) + 3);
    expect_near("split out vs float64", out_p, dv, rs.o, rs.o_err, rows, (size_t)dv);
    expect_near("split lse vs float64", lse_p, 1, rs.lse, rs.lse_err, 1, rows);
    ref_attn_free(&rs);
    free(wmem);

    /* shards by slot parity (no interval of keys), each with its slots'
       positions, merged: the unsharded result (no bias: its columns would
       not be a view) within the merge of the shards' bounds */
    harness_context("k_positions shards by parity + attn_merge, %s", kp_describe(c));
    attn_partial parts[2];
    float *sh_out[2], *sh_lse[2];
    int64_t *sh_pos[2];
    ref_attn sref[2], whole;
    attn_options whole_o = c->op;
    whole_o.bias = NULL;
    ref_attn_compute(&whole, &c->p, &whole_o, &c->tq, &c->tkp, &c->tvp, rescales(t, np));
    for (int sh = 0; sh < 2; sh++) {
        attn_shape ss = c->p;
        ss.kv_len = (np - sh + 1) / 2;
        int32_t lens[KP_B];
        sh_pos[sh] = xmalloc((size_t)(KP_B * ss.kv_len) * 8 + 8);
        for (int b = 0; b < KP_B; b++) {
            lens[b] = (int32_t)((c->lk[b] - sh + 1) / 2);
            for (int64_t u = 0; u < ss.kv_len; u++)
                sh_pos[sh][b * ss.kv_len + u] = c->slot_pos[b * np + 2 * u + sh];
        }
        attn_options o = whole_o;
        o.kv_lens = lens;
        o.k_positions = sh_pos[sh];
        o.q_pos = c->qpos_p; /* the unsharded call's query positions */
        if (sh > 0)
            o.sinks = NULL; /* one more entry of the whole row: one shard has it */
        attn_tensor tk = c->tkp, tv = c->tvp;
        tk.data = c->kp + sh * d, tk.row_stride = 2 * d;
        tv.data = c->vp + sh * dv, tv.row_stride = 2 * dv;
        sh_out[sh] = xmalloc(no * 4);
        sh_lse[sh] = xmalloc(rows * 4);
        const attn_tensor to = {sh_out[sh], ATTN_DTYPE_F32, hq * lq * dv, lq * dv, dv};
        attn_row_stats st = {sh_lse[sh], NULL, NULL};
        CHECK(attn_forward_with(t, &ss, &o, &c->tq, &tk, &tv, &to, &st) == ATTN_OK,
              "shard %d: %s", sh, attn_last_error());
        parts[sh] = (attn_partial){to, sh_lse[sh]};
        ref_attn_compute(&sref[sh], &ss, &o, &c->tq, &tk, &tv, rescales(t, ss.kv_len));
    }
    attn_options mo = ATTN_OPTIONS_INIT;
    CHECK(attn_merge_with(t, &c->p, &mo, parts, 2, &to_p, lse_p) == ATTN_OK, "merge: %s",
          attn_last_error());
    double *bound = xmalloc(no * sizeof(double)), *lbound = xmalloc(rows * sizeof(double)),
           *merged = xmalloc((size_t)dv * sizeof(double));
    for (size_t rr = 0; rr < rows; rr++) {
        const double ls[2] = {sref[0].lse[rr], sref[1].lse[rr]},
                     le[2] = {sref[0].lse_err[rr], sref[1].lse_err[rr]};
        const double *os[2] = {sref[0].o + rr * dv, sref[1].o + rr * dv},
                     *oe[2] = {sref[0].o_err + rr * dv, sref[1].o_err + rr * dv};
        double lm;
        ref_merge_row(2, ls, le, os, oe, (size_t)dv, merged, bound + rr * dv, &lm, &lbound[rr]);
    }
    expect_near("sharded + merged out vs unsharded float64", out_p, dv, whole.o, bound, rows,
                (size_t)dv);
    expect_near("sharded + merged lse vs unsharded float64", lse_p, 1, whole.lse, lbound, 1,
                rows);
    for (int sh = 0; sh < 2; sh++) {
        ref_attn_free(&sref[sh]);
        free(sh_out[sh]);
        free(sh_lse[sh]);
        free(sh_pos[sh]);
    }
    ref_attn_free(&whole);
    free(bound);
    free(lbound);
    free(merged);

    /* backward, both from the twin's out and lse: dk, dv and dbias are per
       key (or score) and must be the twin's bits, moved; dq sums over the
       keys and is held to float64 */
    harness_context("k_positions backward, %s", kp_describe(c));
    float *dq_s = xmalloc(rows * (size_t)d * 4), *dq_p = xmalloc(rows * (size_t)d * 4);
    float *dk_s = xmalloc((size_t)(KP_B * hkv * ns * d) * 4),
          *dk_p = xmalloc((size_t)(KP_B * hkv * np * d) * 4);
    float *dv_s = xmalloc((size_t)(KP_B * hkv * ns * dv) * 4),
          *dv_p = xmalloc((size_t)(KP_B * hkv * np * dv) * 4);
    const attn_tensor tdq_s = {dq_s, ATTN_DTYPE_F32, hq * lq * d, lq * d, d};
    const attn_tensor tdq_p = {dq_p, ATTN_DTYPE_F32, hq * lq * d, lq * d, d};
    const attn_tensor tdk_s = {dk_s, ATTN_DTYPE_F32, hkv * ns * d, ns * d, d};
    const attn_tensor tdk_p = {dk_p, ATTN_DTYPE_F32, hkv * np * d, np * d, d};
    const attn_tensor tdv_s = {dv_s, ATTN_DTYPE_F32, hkv * ns * dv, ns * dv, dv};
    const attn_tensor tdv_p = {dv_p, ATTN_DTYPE_F32, hkv * np * dv, np * dv, dv};
    attn_grads g_s = ATTN_GRADS_INIT, g_p = ATTN_GRADS_INIT;
    g_s.dq = &tdq_s, g_s.dk = &tdk_s, g_s.dv = &tdv_s, g_s.dbias = &ts_s;
    g_p.dq = &tdq_p, g_p.dk = &tdk_p, g_p.dv = &tdv_p, g_p.dbias = &ts_p;
    CHECK(attn_backward_with(t, &c->s, &c->os, &c->tq, &c->tks, &c->tvs, &to_s, &c->tdo, lse_s,
                             &g_s) == ATTN_OK,
          "sorted: %s", attn_last_error());
    /* the twin's out, laid out alike (rows are the same in both) */
    CHECK(attn_backward_with(t, &c->p, &c->op, &c->tq, &c->tkp, &c->tvp, &to_s, &c->tdo, lse_s,
                             &g_p) == ATTN_OK,
          "slots: %s", attn_last_error());
    if (c->exact) {
        const size_t nkd = (size_t)(KP_B * hkv * np * d), nkv = (size_t)(KP_B * hkv * np * dv);
        expect_twin("dbias vs the sorted twin's (zeros unsigned)", sc_p,
                    permute_columns(c, sc_s, 0.0f), nsc_p);
        expect_twin("dk vs the sorted twin's (zeros unsigned)", dk_p, permute_keys(c, dk_s, d),
                    nkd);
        expect_twin("dv vs the sorted twin's (zeros unsigned)", dv_p, permute_keys(c, dv_s, dv),
                    nkv);
    }
    ref_bwd_in in;
    ref_bwd_load(&in, &c->p, &c->op, &c->tq, &c->tkp, &c->tvp, &c->tdo);
    ref_grads rg;
    ref_bwd_grads(&rg, &in, lse_s, out_s);
    expect_near("dq vs float64", dq_p, d, rg.dq, rg.dq_err, rows, (size_t)d);
    expect_near("dk vs float64", dk_p, d, rg.dk, rg.dk_err, (size_t)(KP_B * hkv * np), (size_t)d);
    expect_near("dv vs float64", dv_p, dv, rg.dv, rg.dv_err, (size_t)(KP_B * hkv * np),
                (size_t)dv);
    expect_near("dbias vs float64", sc_p, np, rg.ds, rg.ds_err, rows, (size_t)np);
    ref_grads_free(&rg);
    ref_bwd_free(&in);

    ref_attn_free(&r);
    free(dq_s);
    free(dq_p);
    free(dk_s);
    free(dk_p);
    free(dv_s);
    free(dv_p);
    free(out_s);
    free(out_p);
    free(lse_s);
    free(lse_p);
    free(lse_w);
    free(mx_w);
    free(ent_w);
    free(sc_s);
    free(sc_p);
}

HARNESS_ISA_PARAMS(kpos, shuffled_cache)
ParameterizedTest(isa_row *row, kpos, shuffled_cache, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 24; rep++) {
        kp_case c;
        kp_make(&c, g, rep);
        kp_case_run(t, &c);
        kp_free(&c);
    }
}

/* ------------------------------------------------------------ arguments */

/* One call of `op` (0 forward, 1 scores, 2 mask_apply, 3 backward) on a
   2 x 8 problem with opt; returns its status and the message. */
static attn_status kp_call(int op, const attn_options *opt, float *out)
{
    enum { B = 2, L = 8, D = 4 };
    static float q[B * L * D], k[B * L * D], v[B * L * D], sc[B * L * L], lse[B * L],
        dq[B * L * D], dk[B * L * D], dv[B * L * D];
    for (int i = 0; i < B * L * D; i++)
        q[i] = k[i] = v[i] = (float)(i % 7) * 0.25f;
    for (int i = 0; i < B * L; i++)
        lse[i] = 1.0f;
    const attn_shape s = {B, 1, 1, L, L, D, 0};
    const attn_tensor tq = {q, ATTN_DTYPE_F32, L * D, L * D, D}, tk = {k, ATTN_DTYPE_F32, L * D,
                                                                     L * D, D};
    const attn_tensor tv = {v, ATTN_DTYPE_F32, L * D, L * D, D};
    const attn_tensor to = {out, ATTN_DTYPE_F32, L * D, L * D, D};
    const attn_tensor ts = {out, ATTN_DTYPE_F32, L * L, L * L, L};
    const attn_tensor tdq = {dq, ATTN_DTYPE_F32, L * D, L * D, D},
                      tdk = {dk, ATTN_DTYPE_F32, L * D, L * D, D},
                      tdv = {dv, ATTN_DTYPE_F32, L * D, L * D, D};
    (void)sc;
    attn_grads gr = ATTN_GRADS_INIT;
    gr.dq = &tdq, gr.dk = &tdk, gr.dv = &tdv;
    switch (op) {
    case 0: return attn_forward(&s, opt, &tq, &tk, &tv, &to, NULL);
    case 1: return attn_scores(&s, opt, &tq, &tk, &ts);
    case 2: return attn_mask_apply(&s, opt, &ts);
    default: {
        const attn_tensor tdo = {v, ATTN_DTYPE_F32, L * D, L * D, D};
        return attn_backward(&s, opt, &tq, &tk, &tv, &tdo, &tdo, lse, &gr);
    }
    }
}

Test(kpos, argument_errors)
{
    harness_begin_plain("kpos/argument_errors");
    static float out[2 * 8 * 8], canary[2 * 8 * 8];
    int64_t pos[2 * 8], kp[2] = {0, 0}, far[2] = {(int64_t)1 << 40, (int64_t)1 << 40},
                        near[2] = {0, 0};
    const int32_t lens[2] = {8, 5}, offs[2] = {0, 2};
    float slope = 0.5f;
    const attn_tensor ts = {&slope, ATTN_DTYPE_F32, 0, 0, 0};
    static const char *const names[4] = {"attn_forward", "attn_scores", "attn_mask_apply",
                                          "attn_backward"};
    for (int op = 0; op < 4; op++) {
#define EXPECT(status, msg, ...)                                                              \
    do {                                                                                      \
        for (int e = 0; e < 16; e++)                                                          \
            pos[e] = (e * 5) % 16 - 2;                                                        \
        attn_options o = ATTN_OPTIONS_INIT;                                                   \
        o.k_positions = pos;                                                                  \
        __VA_ARGS__;                                                                          \
        for (int c_ = 0; c_ < 2 * 8 * 8; c_++)                                                \
            canary[c_] = out[c_] = -7.0f;                                                     \
        harness_context("%s, %s", names[op], #__VA_ARGS__);                                   \
        const attn_status got = kp_call(op, &o, out);                                         \
        CHECK(got == (status), "status %d, want %d (%s)", got, status, attn_last_error());    \
        if ((status) != ATTN_OK) {                                                            \
            char want_[512];                                                                  \
            snprintf(want_, sizeof want_, "%s: %s", names[op], (const char *)(msg));          \
            CHECK(strcmp(attn_last_error(), want_) == 0, "attn_last_error() = \"%s\", want "  \
                  "\"%s\"", attn_last_error(), want_);                                        \
            if (op < 3)                                                                       \
                expect_bits("outputs of a refused call", out, canary, 2 * 8 * 8);             \
        }                                                                                     \
    } while (0)

        EXPECT(ATTN_OK, "", (void)0);
        EXPECT(ATTN_ERR_ARG,
               "opt->k_positions and opt->k_pos are both given: k_positions sets every key's "
               "position",
               o.k_pos = kp);
        EXPECT(ATTN_ERR_ARG,
               "opt->k_positions[13] = 4611686018427387905 (sequence 1, key 5): above 2^62",
               pos[13] = ATTN_MAX_POSITION + 1);
        EXPECT(ATTN_ERR_ARG,
               "opt->k_positions[9] = 9223372036854775807 (sequence 1, key 1): above 2^62",
               pos[9] = INT64_MAX; o.kv_lens = lens);
        /* offsets: slot kv_offsets[b] + j of row b */
        EXPECT(ATTN_ERR_ARG,
               "opt->k_positions[11] = 9223372036854775807 (sequence 1, key 1): above 2^62",
               pos[11] = INT64_MAX; o.kv_lens = lens; o.kv_offsets = offs);
        /* slots no sequence has are never read; negative entries are empty */
        EXPECT(ATTN_OK, "", pos[15] = INT64_MAX; pos[8] = INT64_MAX; o.kv_lens = lens;
               o.kv_offsets = offs);
        EXPECT(ATTN_OK, "", pos[3] = INT64_MIN; pos[4] = -1);
        EXPECT(ATTN_OK, "", pos[3] = ATTN_MAX_POSITION; o.flags = ATTN_CAUSAL);
        /* ALiBi's 2^31 rule, per key: a slot far from its queries (empty
           ones are not), not the positions' size */
        EXPECT(ATTN_ERR_ARG,
               "opt->k_positions[1] = 3 (sequence 0, key 1): 2^31 or more from the queries' "
               "positions [1099511627776, 1099511627783] (alibi_slopes)",
               o.q_pos = far; o.alibi_slopes = &ts);
        EXPECT(ATTN_OK, "", o.q_pos = far; o.alibi_slopes = &ts;
               for (int e = 0; e < 16; e++) pos[e] = pos[e] < 0 ? pos[e] : far[0] + pos[e]);
        EXPECT(ATTN_OK, "", o.alibi_slopes = &ts; pos[5] = INT32_MAX; o.q_pos = near);
        EXPECT(ATTN_ERR_ARG,
               "opt->k_positions[5] = 2147483648 (sequence 0, key 5): 2^31 or more from the "
               "queries' positions [0, 7] (alibi_slopes)",
               o.alibi_slopes = &ts; pos[5] = (int64_t)INT32_MAX + 1; o.q_pos = near);
        /* a 1.10 caller's struct ends before the field: it is never read */
        EXPECT(ATTN_OK, "", o.struct_size = (uint32_t)offsetof(attn_options, k_positions);
               o.k_positions = (const int64_t *)(uintptr_t)8; o.k_pos = kp);
#undef EXPECT
        /* an input: no output may share its bytes */
        attn_options o = ATTN_OPTIONS_INIT;
        o.k_positions = (const int64_t *)(void *)(out + 4);
        for (int c_ = 0; c_ < 2 * 8 * 8; c_++) /* -7.0f pairs: empty slots */
            out[c_] = -7.0f;
        if (op < 3) {
            harness_context("%s, k_positions inside the output", names[op]);
            const attn_status st = kp_call(op, &o, out);
            CHECK(st == ATTN_ERR_STRIDE, "status %d (%s)", st, attn_last_error());
            CHECK(strstr(attn_last_error(), "an output shares bytes with an input") != NULL,
                  "attn_last_error() = \"%s\"", attn_last_error());
        }
    }
}

/* SPDX-License-Identifier: MIT */
/* Presets, a problem's description and its geometry: visible keys, FLOPs, bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../src/dtype_list.h"

#define LLAMA3_8B_HEADS 1, 32, 8
const preset cli_presets[] = {
    { "prefill", "Llama-3-8B-like prefill, 2048 tokens",
      { LLAMA3_8B_HEADS, 2048, 2048, 128, 0 }, true, ATTN_DTYPE_F32, 0 },
    { "decode", "one decode step over a 4096-token KV cache",
      { LLAMA3_8B_HEADS, 1, 4096, 128, 0 }, true, ATTN_DTYPE_F32, 0 },
    { "prefill-f16", "prefill, K and V stored as f16",
      { LLAMA3_8B_HEADS, 2048, 2048, 128, 0 }, true, ATTN_DTYPE_F16, 0 },
    { "decode-f16", "decode, K and V stored as f16",
      { LLAMA3_8B_HEADS, 1, 4096, 128, 0 }, true, ATTN_DTYPE_F16, 0 },
    { "small", "a quick check: 2 x 8 heads (GQA 4:1), 256 tokens, head_dim 64",
      { 2, 8, 2, 256, 256, 64, 0 }, true, ATTN_DTYPE_F32, 0 },
    { "spec-decode", "speculative decoding: 4 draft tokens per step (GQA 4:1: 16 rows per "
      "KV head), 4096-token f16 cache",
      { LLAMA3_8B_HEADS, 4, 4096, 128, 0 }, true, ATTN_DTYPE_F16, 0 },
    { "mla-decode", "DeepSeek-style MLA decode: 128 query heads on one bf16 latent head, "
      "head_dim 576, v_dim 512, 4096 tokens (V here a separate tensor; engines view the "
      "latent rows' first 512 columns)",
      { 1, 128, 1, 1, 4096, 576, 512 }, true, ATTN_DTYPE_BF16, 0 },
    { "shared-prefix", "parallel sampling: 16 sequences decode against one 4096-token f16 "
      "prefix (attended once) plus 256 tokens each",
      { 16, 32, 8, 1, 4096 + 256, 128, 0 }, true, ATTN_DTYPE_F16, 4096 },
};
const size_t cli_preset_count = sizeof(cli_presets) / sizeof(cli_presets[0]);
const char *const cli_bench_order[] = { "small", "prefill", "prefill-f16", "decode", "decode-f16" };
const size_t cli_bench_count = sizeof(cli_bench_order) / sizeof(cli_bench_order[0]);

const preset *find_preset(const char *name)
{
    for (size_t i = 0; i < cli_preset_count; i++)
        if (!strcmp(cli_presets[i].name, name))
            return &cli_presets[i];
    return NULL;
}

/*
 * The description: the generator with a fixed source, so every choice is
 * its pin or its default (off, dense, F32). The preset pins the shape,
 * causality and the K/V dtype; the flags' pins come after and win. Inputs
 * are bell-shaped in [-1, 1) (`attn run --help`); --sinks gives every
 * (batch entry, head) the same logit, --alibi the standard slopes.
 */
problem preset_problem(const preset *pre, const attn_shape *shape, const gen_profile *flags)
{
    problem p;
    memset(&p, 0, sizeof p);
    p.name = pre->name;
    p.shape = *shape;
    gen_profile prof;
    gen_profile_init(&prof);
    prof.work_cap = 0;
    gen_pin(&prof, GEN_C_BATCH, shape->batch);
    gen_pin(&prof, GEN_C_KV_HEADS, shape->kv_heads);
    gen_pin(&prof, GEN_C_GROUP, shape->kv_heads > 0 ? shape->q_heads / shape->kv_heads : 1);
    gen_pin(&prof, GEN_C_Q_LEN, shape->q_len);
    gen_pin(&prof, GEN_C_KV_LEN, shape->kv_len);
    gen_pin(&prof, GEN_C_HEAD_DIM, shape->head_dim);
    gen_pin(&prof, GEN_C_V_DIM, shape->v_dim);
    gen_pin(&prof, GEN_C_OPT(flags), pre->causal);
    gen_pin(&prof, GEN_C_K_DTYPE, pre->kv_dtype);
    gen_pin(&prof, GEN_C_V_DTYPE, pre->kv_dtype);
    if (pre->shared_prefix > 0) {
        gen_pin(&prof, GEN_C_OPT(shared_prefix), 1);
        gen_pin(&prof, GEN_C_SHARED, GEN_SHARED_ALL);
        gen_pin(&prof, GEN_C_SHARED_KEYS, pre->shared_prefix);
    }
    for (int r = GEN_Q; r <= GEN_V; r++)
        prof.val[r] = (gen_values){ GEN_VAL_BELL, -1.0f, 1.0f, 0, 0, 0, 0, 0, 0 };
    prof.val[GEN_OPT(alibi_slopes)] = (gen_values){ GEN_VAL_ALIBI, 1.0f, 1.0f, 0, 0, 0, 0, 0, 0 };
    if (flags) {
        for (int c = 0; c < GEN_C_COUNT; c++)
            if (flags->pinned[c]) {
                prof.pinned[c] = 1;
                prof.pin[c] = flags->pin[c];
                prof.pin_f[c] = flags->pin_f[c];
            }
        prof.val[GEN_OPT(sinks)] = flags->val[GEN_OPT(sinks)];
    }
    gen_src fixed = { NULL, NULL };
    gen_draw(&p.g, &fixed, &prof);
    return p;
}

void problem_free(problem *p)
{
    gen_free(&p->g);
}

int64_t v_dim_of(const attn_shape *s)
{
    return s->v_dim ? s->v_dim : s->head_dim;
}

float scale_of(const problem *p)
{
    return p->g.opt.scale != 0.0f ? p->g.opt.scale
                                  : (float)(1.0 / sqrt((double)p->shape.head_dim));
}

attn_dtype kv_dtype_of(const problem *p)
{
    return (attn_dtype)p->g.dtype[1];
}

bool is_packed(const problem *p)
{
    return p->g.q_packed;
}

int64_t paged_block_of(const problem *p)
{
    return p->g.block_size;
}

bool has_alibi(const problem *p)
{
    return p->g.present[ATTN_OPT_POS_alibi_slopes];
}

bool has_sink(const problem *p)
{
    return p->g.present[ATTN_OPT_POS_sinks];
}

float sink_of(const problem *p)
{
    return p->g.val[GEN_OPT(sinks)].lo;
}

size_t dtype_size(attn_dtype t)
{
    return gen_dtype_bytes((int32_t)t);
}

int64_t dtype_block(attn_dtype t)
{
    return gen_dtype_block((int32_t)t);
}

const char *dtype_name(attn_dtype t)
{
    return gen_dtype_name((int32_t)t);
}

/* Whether the library's one list of dtypes takes t for K/V: data that needs
   only attn.h, so the tool stays on the public API. */
bool dtype_is_kv(attn_dtype t) { ATTN_DTYPE_GET(t, kv, false) }

void seq_lengths(const problem *p, int64_t b, int64_t *lq, int64_t *lk)
{
    *lq = gen_seq_q(&p->g, b);
    *lk = gen_seq_kv(&p->g, b);
}

/*
 * Keys [*lo, *hi) that query row i of sequence b may see, by the masks of
 * attn.h: causal j <= i + off, window j > i + off - W, window_right
 * j < i + off + R, off = Lk_b - Lq_b (gen_row_keys).
 */
void visible_keys(const problem *p, int64_t b, int64_t i, int64_t *lo, int64_t *hi)
{
    gen_row_keys(&p->g, b, i, lo, hi);
}

/* With top-k lists (--topk): the different keys in [lo, hi) that query i of
   sequence b lists, marked in mark[] (kv_len flags, left set); else -1. */
static int64_t listed_keys(const problem *p, int64_t b, int64_t i, int64_t lo, int64_t hi,
                           uint8_t *mark)
{
    const int64_t *lists = p->g.ints[ATTN_OPT_POS_topk_indices];
    const int64_t k = p->g.opt.topk;
    if (!lists)
        return -1;
    const int64_t *list = lists + (b * p->shape.q_len + gen_q_offset(&p->g, b) + i) * k;
    int64_t n = 0;
    for (int64_t t = 0; t < k; t++)
        if (list[t] >= lo && list[t] < hi && !mark[list[t]])
            mark[list[t]] = 1, n++;
    return n;
}

double visible_pairs(const problem *p)
{
    const bool lists = p->g.ints[ATTN_OPT_POS_topk_indices] != NULL;
    const bool every = is_packed(p) || lists; /* sequences differ: average them */
    uint8_t *mark = lists ? calloc((size_t)p->shape.kv_len + 1, 1) : NULL;
    double pairs = 0.0;
    for (int64_t b = 0; b < (every ? p->shape.batch : 1); b++)
        for (int64_t i = 0; i < gen_seq_q(&p->g, b) && (!lists || mark); i++) {
            int64_t lo, hi;
            visible_keys(p, b, i, &lo, &hi);
            const int64_t n = lists ? listed_keys(p, b, i, lo, hi, mark) : hi - lo;
            pairs += (double)n;
            if (lists)
                memset(mark, 0, (size_t)p->shape.kv_len + 1);
        }
    free(mark);
    return every ? pairs / (double)p->shape.batch : pairs;
}

double flops_per_call(const problem *p)
{
    const attn_shape *s = &p->shape;
    return (double)s->batch * (double)s->q_heads * visible_pairs(p) *
           (2.0 * (double)s->head_dim + 2.0 * (double)v_dim_of(s));
}

/* Keys sequence b shares with the one before it (attn.h, "Shared prefixes"). */
int64_t shared_keys(const problem *p, int64_t b)
{
    const int64_t *shared = p->g.ints[ATTN_OPT_POS_shared_prefix];
    return shared ? shared[b] : 0;
}

/* Bytes of one key's K and V rows across the KV heads. */
static double kv_bytes_per_key(const problem *p)
{
    const attn_shape *s = &p->shape;
    const attn_dtype t = kv_dtype_of(p);
    double bytes = (double)s->kv_heads * (double)(s->head_dim + v_dim_of(s)) /
                   (double)dtype_block(t) * (double)dtype_size(t);
    /* an ASYM cache's record headers (attn.h: 8 bytes per group) */
    if (gen_dtype_asym(t))
        bytes += (double)s->kv_heads *
                 (double)(gen_row_units(t, s->head_dim, p->g.opt.k_scale_group) +
                          gen_row_units(t, v_dim_of(s), p->g.opt.v_scale_group) -
                          (s->head_dim + v_dim_of(s)) / dtype_block(t));
    /* a tail of the key rows (--k-tail): F32 values instead of k's */
    const int64_t tail = p->g.present[ATTN_OPT_POS_k_tail] ? p->g.opt.k_tail_dim : 0;
    if (tail > 0 && tail < s->head_dim)
        bytes += (double)s->kv_heads * (double)tail *
                 (4.0 - (double)dtype_size(t) / (double)dtype_block(t));
    /* FP8 scales beside the rows (--fp8-scales): 4 bytes per row or group */
    if (p->g.present[ATTN_OPT_POS_k_scales]) {
        const int64_t kg = p->g.opt.k_scale_group, vg = p->g.opt.v_scale_group;
        bytes += 4.0 * (double)s->kv_heads *
                 (double)((kg ? (s->head_dim - tail) / kg : 1) + (vg ? v_dim_of(s) / vg : 1));
    }
    return bytes;
}

/* The keys a call must read: each sequence's own, a shared prefix once. */
double kv_bytes_per_call(const problem *p)
{
    double keys = 0.0;
    const bool lists = p->g.ints[ATTN_OPT_POS_topk_indices] != NULL;
    uint8_t *mark = lists ? calloc((size_t)p->shape.kv_len + 1, 1) : NULL;
    for (int64_t b = 0; b < p->shape.batch; b++) {
        int64_t lq, lk;
        seq_lengths(p, b, &lq, &lk);
        if (!lists) {
            keys += (double)(lk - shared_keys(p, b));
            continue;
        }
        /* top-k: the keys some row lists (the forward reads those only) */
        for (int64_t i = 0; i < lq && mark; i++) {
            int64_t lo, hi;
            visible_keys(p, b, i, &lo, &hi);
            keys += (double)listed_keys(p, b, i, lo, hi, mark);
        }
        if (mark)
            memset(mark, 0, (size_t)p->shape.kv_len + 1);
    }
    free(mark);
    return keys * kv_bytes_per_key(p);
}

double kv_cache_bytes(const problem *p)
{
    return (double)p->shape.batch * (double)p->shape.kv_len * kv_bytes_per_key(p);
}

bool is_decode_like(const problem *p)
{
    return p->shape.q_len <= DECODE_LIKE_MAX_Q_LEN;
}

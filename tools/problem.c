/* Presets and the geometry of a problem: visible keys, FLOPs, bytes. */
#include <math.h>
#include <string.h>

#include "cli.h"
#include "../src/dtype_list.h"

#define LLAMA3_8B_HEADS 1, 32, 8
const preset cli_presets[] = {
    { "prefill", "Llama-3-8B-like prefill, 2048 tokens",
      { "prefill", { LLAMA3_8B_HEADS, 2048, 2048, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F32, 0, false, false, 0.0f, 0, false } },
    { "decode", "one decode step over a 4096-token KV cache",
      { "decode", { LLAMA3_8B_HEADS, 1, 4096, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F32, 0, false, false, 0.0f, 0, false } },
    { "prefill-f16", "prefill, K and V stored as f16",
      { "prefill-f16", { LLAMA3_8B_HEADS, 2048, 2048, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F16, 0, false, false, 0.0f, 0, false } },
    { "decode-f16", "decode, K and V stored as f16",
      { "decode-f16", { LLAMA3_8B_HEADS, 1, 4096, 128, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F16, 0, false, false, 0.0f, 0, false } },
    { "small", "a quick check: 2 x 8 heads (GQA 4:1), 256 tokens, head_dim 64",
      { "small", { 2, 8, 2, 256, 256, 64, 0 }, true, 0, 0.0f, 0.0f, ATTN_DTYPE_F32, 0, false, false, 0.0f, 0, false } },
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

int64_t v_dim_of(const attn_shape *s)
{
    return s->v_dim ? s->v_dim : s->head_dim;
}

float scale_of(const problem *p)
{
    return p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)p->shape.head_dim));
}

/* The dtypes' properties from the library's one list: data that needs
   only attn.h, so the tool stays on the public API. */
#define DT_CASE_SIZE(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return bytes;
#define DT_CASE_BLOCK(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return block;
#define DT_CASE_NAME(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return name;
#define DT_CASE_QUANT(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_QBLOCK || \
                                 ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_FP8;
#define DT_CASE_KV(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return kv;

size_t dtype_size(attn_dtype t)
{
    switch (t) { ATTN_DTYPE_LIST(DT_CASE_SIZE) }
    return 0;
}

int64_t dtype_block(attn_dtype t)
{
    switch (t) { ATTN_DTYPE_LIST(DT_CASE_BLOCK) }
    return 1;
}

const char *dtype_name(attn_dtype t)
{
    switch (t) { ATTN_DTYPE_LIST(DT_CASE_NAME) }
    return "?";
}

bool dtype_is_quantized(attn_dtype t)
{
    switch (t) { ATTN_DTYPE_LIST(DT_CASE_QUANT) }
    return false;
}

bool dtype_is_kv(attn_dtype t)
{
    switch (t) { ATTN_DTYPE_LIST(DT_CASE_KV) }
    return false;
}

void seq_lengths(const problem *p, int64_t b, int64_t *lq, int64_t *lk)
{
    const int64_t q_len = p->shape.q_len, kv_len = p->shape.kv_len, n = p->shape.batch;
    *lq = q_len;
    if (p->packed && n > 1) {
        const int64_t shortest = q_len / 20 > 1 ? q_len / 20 : 1;
        *lq = shortest + (q_len - shortest) * b / (n - 1);
    }
    *lk = *lq + (kv_len - q_len);
}

/*
 * Keys [*lo, *hi) that query row i of sequence b may see, by the masks of
 * attn.h: causal j <= i + off, window j > i + off - W, window_right
 * j < i + off + R, off = Lk_b - Lq_b.
 */
void visible_keys(const problem *p, int64_t b, int64_t i, int64_t *lo, int64_t *hi)
{
    int64_t lq, lk;
    seq_lengths(p, b, &lq, &lk);
    if (i >= lq) {
        *lo = *hi = 0;
        return;
    }
    const int64_t pos = i + (lk - lq); /* the query's aligned position */
    int64_t h = lk, l = 0;
    if (p->causal)
        h = pos + 1 < lk ? pos + 1 : lk;
    if (p->window > 0) {
        /* A window wider than lq + lk hides nothing; clamp to avoid overflow. */
        int64_t w = p->window < lq + lk ? p->window : lq + lk;
        l = pos - w + 1;
    }
    if (p->window_right > 0) {
        /* the same clamp: a right edge past lq + lk hides nothing */
        int64_t r = p->window_right < lq + lk ? p->window_right : lq + lk;
        if (pos + r < h)
            h = pos + r;
    }
    if (h < 0)
        h = 0;
    if (l < 0)
        l = 0;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

double visible_pairs(const problem *p)
{
    double pairs = 0.0;
    for (int64_t b = 0; b < (p->packed ? p->shape.batch : 1); b++)
        for (int64_t i = 0; i < p->shape.q_len; i++) {
            int64_t lo, hi;
            visible_keys(p, b, i, &lo, &hi);
            pairs += (double)(hi - lo);
        }
    return p->packed ? pairs / (double)p->shape.batch : pairs;
}

double flops_per_call(const problem *p)
{
    const attn_shape *s = &p->shape;
    return (double)s->batch * (double)s->q_heads * visible_pairs(p) *
           (2.0 * (double)s->head_dim + 2.0 * (double)v_dim_of(s));
}

double kv_bytes_per_call(const problem *p)
{
    const attn_shape *s = &p->shape;
    double keys = 0.0;
    for (int64_t b = 0; b < s->batch; b++) {
        int64_t lq, lk;
        seq_lengths(p, b, &lq, &lk);
        keys += (double)lk;
    }
    return keys * (double)s->kv_heads * (double)(s->head_dim + v_dim_of(s)) /
           (double)dtype_block(p->kv_dtype) * (double)dtype_size(p->kv_dtype);
}

bool is_decode_like(const problem *p)
{
    return p->shape.q_len <= DECODE_LIKE_MAX_Q_LEN;
}

attn_options options_of(const problem *p)
{
    attn_options o = ATTN_OPTIONS_INIT;
    o.flags = p->causal ? ATTN_CAUSAL : 0u;
    o.window = p->window;
    o.scale = p->scale;
    o.softcap = p->softcap;
    o.window_right = p->window_right;
    return o;
}

float alibi_slope(int64_t h, int64_t heads)
{
    /* powers of 2^(-8/n) for the largest power of two n <= heads, then the
       odd powers of 2^(-8/2n) for the heads beyond it */
    int64_t n = 1;
    while (n * 2 <= heads)
        n *= 2;
    if (h < n)
        return (float)pow(2.0, -8.0 * (double)(h + 1) / (double)n);
    return (float)pow(2.0, -8.0 * (double)(2 * (h - n) + 1) / (double)(2 * n));
}

/* Random attention problems for the operation-level tests (see workload.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "workload.h"

static const int64_t lengths[] = {1, 3, 17, 63, 65, 127, 129};
static const int64_t small_dims[] = {1, 3, 8, 16, 17, 31, 32, 33, 63, 64, 65, 80, 96};
static const int64_t big_dims[] = {127, 128, 129, 256};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void *wl_at(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c)
{
    return ref_tensor_at(t, b, h, r, c);
}

void wl_set(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c, float v)
{
    void *p = wl_at(t, b, h, r, c);
    uint16_t h16;
    switch (t->dtype) {
    case ATTN_DTYPE_F32:
        memcpy(p, &v, 4);
        break;
    case ATTN_DTYPE_F16:
        h16 = ref_f32_to_f16(v);
        memcpy(p, &h16, 2);
        break;
    case ATTN_DTYPE_BF16:
        h16 = ref_f32_to_bf16(v);
        memcpy(p, &h16, 2);
        break;
    default:
        *(uint8_t *)p = v != 0.0f;
    }
}

/* Elements spanned by a [nb][nh][nr][nc] view (strides >= 0). */
static size_t span(const attn_tensor *t, int64_t nb, int64_t nh, int64_t nr, int64_t nc)
{
    return (size_t)((nb - 1) * t->batch_stride + (nh - 1) * t->head_stride +
                    (nr - 1) * t->row_stride + nc);
}

/* Strides of a dense [B,H,L,C] (or [B,L,H,C]) tensor with row padding. */
static void layout(attn_tensor *t, int blhd, int64_t heads, int64_t len, int64_t cols, int64_t pad)
{
    const int64_t c = cols + pad;
    if (blhd) {
        t->head_stride = c;
        t->row_stride = heads * c;
        t->batch_stride = len * heads * c;
    } else {
        t->row_stride = c;
        t->head_stride = len * c;
        t->batch_stride = heads * len * c;
    }
}

static void alloc_tensor(buf *b, attn_tensor *t, int32_t dtype, int64_t nb, int64_t nh,
                         int64_t nr, int64_t nc, int offset)
{
    t->dtype = dtype;
    const size_t es = ref_dtype_size(dtype);
    t->data = buf_alloc(b, span(t, nb, nh, nr, nc) * es, offset ? es : 0);
}

static void fill_input(const attn_tensor *t, int64_t nb, int64_t nh, int64_t nr, int64_t nc,
                       float lo, float hi)
{
    rng *g = harness_rng();
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t r = 0; r < nr; r++)
                for (int64_t c = 0; c < nc; c++)
                    wl_set(t, b, h, r, c, rng_float(g, lo, hi));
}

/* Broadcast-or-full strides for a mask/bias view [B][Hq][Lq][Lk]. */
static void broadcast_layout(attn_tensor *t, const attn_shape *s, int pad)
{
    rng *g = harness_rng();
    const int64_t rs = rng_int(g, 0, 3) == 0 ? 0 : s->kv_len + (pad ? rng_int(g, 0, 3) : 0);
    const int64_t hs = rng_int(g, 0, 2) == 0 ? 0 : (rs ? rs * s->q_len : s->kv_len);
    const int64_t inner = hs ? hs * s->q_heads : rs ? rs * s->q_len : s->kv_len;
    const int64_t bs = rng_int(g, 0, 2) == 0 ? 0 : inner;
    t->row_stride = rs;
    t->head_stride = hs;
    t->batch_stride = bs;
}

/* An F32 [B][Hq] view (sinks, ALiBi slopes): per head (batch stride 0) or
   per batch entry and head, with a random head stride and row stride. */
static void per_head_tensor(buf *b, attn_tensor *t, const attn_shape *s, int offset)
{
    rng *g = harness_rng();
    t->row_stride = rng_int(g, 0, 3);
    t->head_stride = rng_int(g, 1, 3);
    t->batch_stride = rng_int(g, 0, 1) ? 0 : s->q_heads * t->head_stride + rng_int(g, 0, 2);
    alloc_tensor(b, t, ATTN_DTYPE_F32, s->batch, s->q_heads, 1, 1, offset);
}

static int64_t pick_len(rng *g, int64_t below)
{
    int64_t v;
    do
        v = rng_pick(g, lengths, COUNT(lengths));
    while (v >= below);
    return v;
}

void wl_make(workload *w, unsigned f)
{
    rng *g = harness_rng();
    memset(w, 0, sizeof *w);
    w->features = f;
    attn_shape *s = &w->shape;

    s->batch = rng_int(g, 1, (f & WL_LENS) ? WL_MAX_BATCH : 2);
    if (f & WL_GQA) {
        s->q_heads = 8;
        s->kv_heads = 2;
    } else if (f & WL_MQA) {
        s->kv_heads = 1;
        s->q_heads = rng_int(g, 2, 4);
    } else {
        s->kv_heads = rng_int(g, 1, 2);
        s->q_heads = s->kv_heads * rng_int(g, 1, 2);
    }
    s->kv_len = rng_pick(g, lengths, COUNT(lengths));
    s->q_len = rng_pick(g, lengths, COUNT(lengths));
    if (f & WL_DECODE) {
        s->q_len = 1;
        s->kv_len = rng_int(g, 0, 1) ? 129 : rng_int(g, 2, 300);
    } else if (f & WL_Q_SHORT) {
        s->kv_len = rng_pick(g, lengths + 1, COUNT(lengths) - 1);
        s->q_len = pick_len(g, s->kv_len);
    } else if (f & WL_Q_LONG) {
        s->q_len = rng_pick(g, lengths + 1, COUNT(lengths) - 1);
        s->kv_len = pick_len(g, s->q_len);
    }
    s->head_dim = (f & WL_BIG_HEAD) ? rng_pick(g, big_dims, COUNT(big_dims))
                                    : rng_pick(g, small_dims, COUNT(small_dims));
    /* keep each problem small: the float64 reference is naive */
    while (s->batch * s->q_heads * s->q_len * s->kv_len * (s->head_dim + 16) > 1500000 &&
           s->q_len > 1) {
        s->q_len = (s->q_len + 1) / 2;
        if (s->kv_len > 17)
            s->kv_len = (s->kv_len + 1) / 2;
    }
    if (f & WL_LONG_KV) { /* after the size cap: few query rows keep it cheap */
        s->q_len = (f & WL_DECODE) ? 1 : rng_int(g, 1, 6);
        s->kv_len = (f & WL_DECODE) ? rng_int(g, 2048, 4500) : rng_int(g, 257, 1400);
        if ((f & WL_DECODE) && (f & WL_MANY_CHUNKS))
            s->kv_len = rng_int(g, 8450, 9000); /* 34 to 36 chunks of 256 at kv_splits 64 */
    }
    w->dv = s->head_dim;
    s->v_dim = s->head_dim;
    if (f & WL_VDIM) {
        do
            w->dv = rng_pick(g, small_dims, COUNT(small_dims));
        while (w->dv == s->head_dim);
        s->v_dim = w->dv;
    } else if (f & WL_VDIM0) {
        s->v_dim = 0;
    }

    const int blhd = !!(f & WL_BLHD), offset = !!(f & WL_OFFSET);
    const int64_t pad = (f & WL_PAD) ? rng_int(g, 1, 5) : 0;
    const int32_t kv_type = (f & WL_F16)    ? ATTN_DTYPE_F16
                            : (f & WL_BF16) ? ATTN_DTYPE_BF16
                                            : ATTN_DTYPE_F32;
    int32_t q_type = rng_int(g, 0, 1) ? kv_type : ATTN_DTYPE_F32;
    layout(&w->q, blhd, s->q_heads, s->q_len, s->head_dim, pad);
    layout(&w->k, blhd, s->kv_heads, s->kv_len, s->head_dim, pad);
    layout(&w->v, blhd, s->kv_heads, s->kv_len, w->dv, pad);
    alloc_tensor(&w->qb, &w->q, q_type, s->batch, s->q_heads, s->q_len, s->head_dim, offset);
    alloc_tensor(&w->kb, &w->k, kv_type, s->batch, s->kv_heads, s->kv_len, s->head_dim, offset);
    alloc_tensor(&w->vb, &w->v, kv_type, s->batch, s->kv_heads, s->kv_len, w->dv, offset);
    fill_input(&w->q, s->batch, s->q_heads, s->q_len, s->head_dim, -1.5f, 1.5f);
    fill_input(&w->k, s->batch, s->kv_heads, s->kv_len, s->head_dim, -1.5f, 1.5f);
    fill_input(&w->v, s->batch, s->kv_heads, s->kv_len, w->dv, -10.0f, 10.0f);

    attn_options defaults = ATTN_OPTIONS_INIT;
    w->opt = defaults;
    if (f & WL_CAUSAL)
        w->opt.flags |= ATTN_CAUSAL;
    if (f & WL_SCALE)
        w->opt.scale = rng_float(g, -0.5f, 0.5f);
    if (f & WL_SOFTCAP)
        w->opt.softcap = rng_float(g, 2.0f, 30.0f);
    if (f & WL_WINDOW)
        w->opt.window = rng_int(g, 1, s->kv_len + 1);
    if (f & WL_LENS) {
        for (int64_t b = 0; b < s->batch; b++) {
            /* batch 0 full, the last empty (0), others random */
            int64_t kind = b == 0 ? 0 : b == s->batch - 1 ? 1 : 2;
            if (rng_int(g, 0, 3) == 0)
                kind = 2;
            w->q_lens[b] =
                (int32_t)(kind == 0 ? s->q_len : kind == 1 ? 0 : rng_int(g, 0, s->q_len));
            kind = rng_int(g, 0, 2);
            w->kv_lens[b] = (int32_t)(kind == 0            ? s->kv_len
                                      : kind == 1 && b > 0 ? 0
                                                           : rng_int(g, 1, s->kv_len));
        }
        w->opt.q_lens = w->q_lens;
        w->opt.kv_lens = w->kv_lens;
    }
    if (f & WL_MASK) {
        broadcast_layout(&w->mask, s, (int)pad);
        alloc_tensor(&w->mb, &w->mask, ATTN_DTYPE_BOOL, s->batch, s->q_heads, s->q_len, s->kv_len,
                     offset);
        memset(w->mb.data, 0, w->mb.bytes);
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = 0; i < s->q_len; i++)
                    for (int64_t j = 0; j < s->kv_len; j++)
                        *(uint8_t *)wl_at(&w->mask, b, h, i, j) =
                            rng_int(g, 0, 3) ? (uint8_t)rng_int(g, 1, 255) : 0;
        w->opt.mask = &w->mask;
    }
    if (f & WL_BIAS) {
        broadcast_layout(&w->bias, s, (int)pad);
        alloc_tensor(&w->bb, &w->bias, ATTN_DTYPE_F32, s->batch, s->q_heads, s->q_len, s->kv_len,
                     offset);
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++)
                for (int64_t i = 0; i < s->q_len; i++)
                    for (int64_t j = 0; j < s->kv_len; j++)
                        wl_set(&w->bias, b, h, i, j,
                               rng_int(g, 0, 15) ? rng_float(g, -3.0f, 3.0f) : -INFINITY);
        w->opt.bias = &w->bias;
    }

    if (f & WL_WINDOW_R)
        w->opt.window_right = rng_int(g, 1, s->kv_len + 1);
    if (f & WL_SINKS) {
        per_head_tensor(&w->snb, &w->sinks, s, offset);
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++) {
                /* mostly comparable to the scores, sometimes dominant, sometimes none */
                const int64_t kind = rng_int(g, 0, 7);
                wl_set(&w->sinks, b, h, 0, 0,
                       kind == 0   ? -INFINITY
                       : kind == 1 ? rng_float(g, 6.0f, 12.0f)
                                   : rng_float(g, -3.0f, 3.0f));
            }
        w->opt.sinks = &w->sinks;
    }
    if (f & WL_ALIBI) {
        per_head_tensor(&w->alb, &w->alibi, s, offset);
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->q_heads; h++)
                wl_set(&w->alibi, b, h, 0, 0, rng_int(g, 0, 7) ? rng_float(g, 0.0f, 0.5f)
                                                               : rng_float(g, -0.1f, 2.0f));
        w->opt.alibi_slopes = &w->alibi;
    }

    /* outputs, in the inputs' layout and padding */
    layout(&w->scores, blhd, s->q_heads, s->q_len, s->kv_len, pad);
    layout(&w->out, blhd, s->q_heads, s->q_len, w->dv, pad);
    alloc_tensor(&w->sb, &w->scores, ATTN_DTYPE_F32, s->batch, s->q_heads, s->q_len, s->kv_len,
                 offset);
    alloc_tensor(&w->ob, &w->out, ATTN_DTYPE_F32, s->batch, s->q_heads, s->q_len, w->dv, offset);
    const size_t rows = (size_t)wl_rows(w);
    w->stats.lse = buf_alloc(&w->lb, rows * 4, offset ? 4 : 0);
    w->stats.max_score = buf_alloc(&w->xb, rows * 4, 0);
    w->stats.entropy = buf_alloc(&w->eb, rows * 4, offset ? 4 : 0);
}

int64_t wl_rows(const workload *w)
{
    return w->shape.batch * w->shape.q_heads * w->shape.q_len;
}

const char *wl_describe(const workload *w)
{
    static char line[512];
    const attn_shape *s = &w->shape;
    snprintf(line, sizeof line,
             "B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld D=%lld Dv=%lld(v_dim=%lld) q/kv dtype=%d/%d "
             "flags=%u scale=%g softcap=%g window=%lld window_right=%lld lens=%s mask=%s bias=%s "
             "sinks=%s alibi=%s features=0x%x",
             (long long)s->batch, (long long)s->q_heads, (long long)s->kv_heads,
             (long long)s->q_len, (long long)s->kv_len, (long long)s->head_dim, (long long)w->dv,
             (long long)s->v_dim, w->q.dtype, w->k.dtype, w->opt.flags, (double)w->opt.scale,
             (double)w->opt.softcap, (long long)w->opt.window, (long long)w->opt.window_right,
             w->opt.q_lens ? "yes" : "no", w->opt.mask ? "yes" : "no",
             w->opt.bias ? "yes" : "no", w->opt.sinks ? "yes" : "no",
             w->opt.alibi_slopes ? "yes" : "no", w->features);
    return line;
}

static void poison(buf *b)
{
    const uint32_t word = BUF_CANARY;
    for (size_t i = 0; i < b->bytes; i++)
        b->data[i] = (unsigned char)(word >> (8 * (((size_t)(b->data - b->base) + i) % 4)));
}

void wl_poison_outputs(workload *w)
{
    poison(&w->sb);
    poison(&w->ob);
    poison(&w->lb);
    poison(&w->xb);
    poison(&w->eb);
}

void wl_gather(const workload *w, const attn_tensor *t, int64_t cols, float *dense)
{
    const attn_shape *s = &w->shape;
    size_t at = 0;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++)
                for (int64_t c = 0; c < cols; c++)
                    memcpy(&dense[at++], wl_at(t, b, h, i, c), 4);
}

/* Every float of the buffer outside the view must still hold the canary. */
static void check_view(const workload *w, const buf *b, const attn_tensor *t, int64_t cols,
                       const char *what)
{
    const attn_shape *s = &w->shape;
    buf_check(b, what);
    const size_t n = b->bytes / 4;
    unsigned char *inside = xcalloc0(n, 1);
    for (int64_t bb = 0; bb < s->batch; bb++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++)
                for (int64_t c = 0; c < cols; c++)
                    inside[((const char *)wl_at(t, bb, h, i, c) - (const char *)b->data) / 4] = 1;
    for (size_t i = 0; i < n; i++) {
        if (inside[i])
            continue;
        const unsigned char *p = b->data + i * 4;
        for (size_t k = 0; k < 4; k++)
            CHECK(p[k] == (unsigned char)(BUF_CANARY >> (8 * (((size_t)(p - b->base) + k) % 4))),
                  "%s: wrote into padding at element %zu", what, i);
    }
    free(inside);
}

void wl_check_outputs(const workload *w, int check_scores, int check_out, int check_stats)
{
    if (check_scores)
        check_view(w, &w->sb, &w->scores, w->shape.kv_len, "scores");
    if (check_out)
        check_view(w, &w->ob, &w->out, w->dv, "out");
    if (check_stats) {
        buf_check(&w->lb, "lse");
        buf_check(&w->xb, "max_score");
        buf_check(&w->eb, "entropy");
    }
}

void wl_fill_scores(workload *w, float lo, float hi)
{
    rng *g = harness_rng();
    const attn_shape *s = &w->shape;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++)
                for (int64_t j = 0; j < s->kv_len; j++)
                    wl_set(&w->scores, b, h, i, j, rng_float(g, lo, hi));
}

void wl_free(workload *w)
{
    buf *all[] = {&w->qb, &w->kb, &w->vb, &w->mb,  &w->bb, &w->sb,
                  &w->ob, &w->lb, &w->xb, &w->eb, &w->snb, &w->alb};
    for (size_t i = 0; i < COUNT(all); i++)
        if (all[i]->base)
            buf_free(all[i]);
}

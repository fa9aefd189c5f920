/* SPDX-License-Identifier: MIT */
/* Random attention problems for the operation-level tests (see workload.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"
#include "tolerance.h"
#include "workload.h"

static const int64_t lengths[] = {1, 3, 17, 63, 65, 127, 129};
static const int64_t decode_lengths[] = {129, 129, 129, 2, 3, 17, 64, 65, 100, 128, 200, 257, 300};
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

/* The generator's profile for a feature set: the features pin or allow
   choices, everything else stays off (problems/gen.h). */
static void profile_of(gen_profile *p, unsigned f)
{
    static const int64_t long_decode[] = {2048, 4500};
    gen_profile_init(p);
    p->flags = GEN_P_DENSE;
    /* keep each problem small: the float64 reference is naive */
    p->work_cap = (f & WL_LONG_KV) ? 0 : 3000000;
    p->shrink = 1;
    for (int c = 0; c < GEN_C_COUNT; c++)
        gen_never(p, c);

    gen_range(p, GEN_C_BATCH, 1, (f & WL_LENS) ? WL_MAX_BATCH : 2);
    if (f & WL_GQA) {
        gen_pin(p, GEN_C_KV_HEADS, 2);
        gen_pin(p, GEN_C_GROUP, 4);
    } else if (f & WL_MQA) {
        gen_pin(p, GEN_C_KV_HEADS, 1);
        gen_range(p, GEN_C_GROUP, 2, 4);
    } else {
        gen_range(p, GEN_C_KV_HEADS, 1, 2);
        gen_range(p, GEN_C_GROUP, 1, 2);
    }
    p->rule[GEN_C_Q_LEN] = (gen_rule){256, 0, 0, 0, 0, 0, 0.0, lengths, COUNT(lengths)};
    p->rule[GEN_C_KV_LEN] = p->rule[GEN_C_Q_LEN];
    if (f & WL_Q_SHORT) {
        p->flags |= GEN_P_Q_SHORTER;
    } else if (f & WL_Q_LONG) {
        p->flags |= GEN_P_Q_LONGER;
    }
    if (f & WL_DECODE) {
        gen_pin(p, GEN_C_Q_LEN, 1);
        p->rule[GEN_C_KV_LEN] = (gen_rule){256, 0, 0, 0, 0, 0, 0.0, decode_lengths,
                                           COUNT(decode_lengths)};
    }
    p->rule[GEN_C_HEAD_DIM] =
        (f & WL_BIG_HEAD) ? (gen_rule){256, 0, 0, 0, 0, 0, 0.0, big_dims, COUNT(big_dims)}
                          : (gen_rule){256, 0, 0, 0, 0, 0, 0.0, small_dims, COUNT(small_dims)};
    if (f & WL_LONG_KV) { /* few query rows keep it cheap */
        if (f & WL_DECODE)
            gen_range(p, GEN_C_KV_LEN, long_decode[0], long_decode[1]);
        else {
            gen_range(p, GEN_C_Q_LEN, 1, 6);
            gen_range(p, GEN_C_KV_LEN, 257, 1400);
        }
        if ((f & WL_DECODE) && (f & WL_MANY_CHUNKS)) /* 34 to 36 chunks of 256 at kv_splits 64 */
            gen_range(p, GEN_C_KV_LEN, 8450, 9000);
    }
    if (f & WL_VDIM)
        p->rule[GEN_C_V_DIM] = (gen_rule){256, 0, 0, 0, 0, 0, 0.0, small_dims, COUNT(small_dims)};
    if (f & WL_WIDE) {
        gen_pin(p, GEN_C_KV_HEADS, 1);
        gen_range(p, GEN_C_GROUP, 24, 40);
        gen_pin(p, GEN_C_HEAD_DIM, 576);
        gen_pin(p, GEN_C_V_DIM, 512);
    }
    const int64_t kv_type = (f & WL_F16) ? ATTN_DTYPE_F16 : (f & WL_BF16) ? ATTN_DTYPE_BF16
                                                                          : ATTN_DTYPE_F32;
    gen_pin(p, GEN_C_K_DTYPE, kv_type);
    gen_pin(p, GEN_C_V_DTYPE, kv_type);
    /* q: the K/V dtype or F32 */
    static const int64_t q_types[3][2] = {{ATTN_DTYPE_F32, ATTN_DTYPE_F32},
                                          {ATTN_DTYPE_F16, ATTN_DTYPE_F32},
                                          {ATTN_DTYPE_BF16, ATTN_DTYPE_F32}};
    p->rule[GEN_C_Q_DTYPE] = (gen_rule){256, 0, 0, 0, 0, 0, 0.0, q_types[kv_type], 2};

    /* layouts: the same for q, k, v and the outputs */
    if (f & WL_BLHD)
        gen_pin(p, GEN_C_ROWS_OUTER, 1);
    if (f & WL_PAD)
        gen_range(p, GEN_C_ROW_PAD, 1, 5);
    if (f & WL_OFFSET)
        gen_pin(p, GEN_C_MISALIGN, 1);
    gen_range(p, GEN_C_BROADCAST_OPT, 1, 7);
    gen_chance(p, GEN_C_BROADCAST_OPT, 170);

    gen_pin(p, GEN_C_OPT(flags), (f & WL_CAUSAL) != 0);
    if (f & WL_SCALE) {
        gen_range(p, GEN_C_OPT(scale), -4096, 4096);
        p->rule[GEN_C_OPT(scale)].unit = 1.0 / 8192.0;
    }
    if (f & WL_SOFTCAP) {
        gen_range(p, GEN_C_OPT(softcap), 16, 240);
        p->rule[GEN_C_OPT(softcap)].unit = 1.0 / 8.0;
    }
    if (f & WL_WINDOW) { /* 1 .. kv_len + 1 */
        gen_range(p, GEN_C_OPT(window), 1, 1);
        p->rule[GEN_C_OPT(window)].kv = 1;
    }
    if (f & WL_WINDOW_R) {
        gen_range(p, GEN_C_OPT(window_right), 1, 1);
        p->rule[GEN_C_OPT(window_right)].kv = 1;
    }
    if (f & WL_LENS) {
        static const int64_t q_kinds[] = {GEN_SEQ_FULL, GEN_SEQ_EMPTY, GEN_SEQ_RANDOM,
                                          GEN_SEQ_RANDOM};
        static const int64_t kv_kinds[] = {GEN_SEQ_FULL, GEN_SEQ_EMPTY, GEN_SEQ_RANDOM};
        gen_pin(p, GEN_C_OPT(q_lens), 1);
        gen_pin(p, GEN_C_OPT(kv_lens), 1);
        p->rule[GEN_C_SEQ_Q] = (gen_rule){256, 0, 0, 0, 0, 0, 0.0, q_kinds, COUNT(q_kinds)};
        p->rule[GEN_C_SEQ_KV] = (gen_rule){256, 0, 0, 0, 0, 0, 0.0, kv_kinds, COUNT(kv_kinds)};
    }
    gen_pin(p, GEN_C_OPT(mask), (f & WL_MASK) != 0);
    gen_pin(p, GEN_C_OPT(bias), (f & WL_BIAS) != 0);
    gen_pin(p, GEN_C_OPT(sinks), (f & WL_SINKS) != 0);
    gen_pin(p, GEN_C_OPT(alibi_slopes), (f & WL_ALIBI) != 0);
    gen_pin(p, GEN_C_OPT(tree_parents), (f & WL_TREE) != 0);
    if (f & WL_TOPK)
        gen_allow_topk(p, 256);
    if (f & WL_KPOS) { /* positions per key slot, beside q_pos or not */
        gen_pin(p, GEN_C_OPT(k_positions), 1);
        gen_range(p, GEN_C_KPOS, GEN_KPOS_ORDER, GEN_KPOS_RANDOM);
        gen_range(p, GEN_C_OPT(q_pos), 1, 1);
        gen_chance(p, GEN_C_OPT(q_pos), 128);
        gen_range(p, GEN_C_POS_KIND, 0, 1);
        gen_range(p, GEN_C_POS_BASE, 1, 1);
        gen_chance(p, GEN_C_POS_BASE, 64);
        gen_range(p, GEN_C_POS_K, 0, 3000);
        gen_range(p, GEN_C_POS_DELTA, -6, 10);
    }

    p->val[GEN_Q].lo = p->val[GEN_K].lo = -1.5f;
    p->val[GEN_Q].hi = p->val[GEN_K].hi = 1.5f;
    p->val[GEN_V].lo = -10.0f;
    p->val[GEN_V].hi = 10.0f;
    /* ALiBi slopes: mostly in [0, 0.5), now and then negative or steep */
    p->val[GEN_OPT(alibi_slopes)] =
        (gen_values){GEN_VAL_UNIFORM, 0.0f, 0.5f, 32, -0.1f, 2.0f, 0, 0, 0};
}

static int64_t harness_range(void *ctx, int64_t lo, int64_t hi)
{
    return rng_int(ctx, lo, hi);
}

gen_src wl_gen_source(rng *g)
{
    const gen_src src = {harness_range, g};
    return src;
}

/* Guarded buffers (harness.h) for the generator's roles. */
static buf *role_buf(workload *w, int role)
{
    switch (role) {
    case GEN_Q: return &w->qb;
    case GEN_K: return &w->kb;
    case GEN_V: return &w->vb;
    case GEN_OUT: return &w->ob;
    case GEN_SCORES: return &w->sb;
    case GEN_LSE: return &w->lb;
    case GEN_MAX: return &w->xb;
    case GEN_ENT: return &w->eb;
    case GEN_OPT(mask): return &w->mb;
    case GEN_OPT(bias): return &w->bb;
    case GEN_OPT(sinks): return &w->snb;
    case GEN_OPT(alibi_slopes): return &w->alb;
    default: return &w->other[role];
    }
}

static void *wl_alloc(void *ctx, int role, size_t bytes, size_t elem, int misalign)
{
    return buf_alloc(role_buf(ctx, role), bytes, misalign ? elem : 0);
}

static void wl_release(void *ctx, int role, void *data, size_t bytes)
{
    (void)data, (void)bytes;
    buf_free(role_buf(ctx, role));
}

void wl_make(workload *w, unsigned f)
{
    rng *g = harness_rng();
    memset(w, 0, sizeof *w);
    w->features = f;
    gen_profile p;
    profile_of(&p, f);
    gen_src src = wl_gen_source(g);
    for (int tries = 0;; tries++) {
        CHECK(gen_draw(&w->gen, &src, &p), "gen_draw gave up (features 0x%x)", f);
        if (!(f & WL_VDIM) || w->gen.dv != w->gen.shape.head_dim || tries == 100)
            break;
        gen_free(&w->gen); /* WL_VDIM: v_dim != head_dim */
    }
    CHECK(!(f & WL_VDIM) || w->gen.dv != w->gen.shape.head_dim, "no v_dim != head_dim drawn");
    /* v_dim 0 means head_dim: only WL_VDIM0 asks for it, the others say it */
    if (!(f & WL_VDIM0))
        w->gen.shape.v_dim = w->gen.dv;
    const gen_allocator a = {wl_alloc, wl_release, w};
    CHECK(gen_materialise(&w->gm, &w->gen, rng_next(g), GEN_M_OUT | GEN_M_SCORES | GEN_M_STATS,
                          &a) == 0,
          "gen_materialise failed");
    const gen_bufs *m = &w->gm;
    w->shape = m->shape;
    w->opt = m->opt;
    w->dv = w->gen.dv;
    w->q = m->t[GEN_Q];
    w->k = m->t[GEN_K];
    w->v = m->t[GEN_V];
    w->scores = m->t[GEN_SCORES];
    w->out = m->t[GEN_OUT];
    w->stats = m->stats;
    /* the option pointers point at these copies, which tests may change */
    w->mask = m->t[GEN_OPT(mask)];
    w->bias = m->t[GEN_OPT(bias)];
    w->sinks = m->t[GEN_OPT(sinks)];
    w->alibi = m->t[GEN_OPT(alibi_slopes)];
    w->opt.mask = w->gen.present[ATTN_OPT_POS_mask] ? &w->mask : NULL;
    w->opt.bias = w->gen.present[ATTN_OPT_POS_bias] ? &w->bias : NULL;
    w->opt.sinks = w->gen.present[ATTN_OPT_POS_sinks] ? &w->sinks : NULL;
    w->opt.alibi_slopes = w->gen.present[ATTN_OPT_POS_alibi_slopes] ? &w->alibi : NULL;
    for (int64_t b = 0; b < w->shape.batch && b < WL_MAX_BATCH; b++) {
        w->q_lens[b] = (int32_t)gen_seq_q(&w->gen, b);
        w->kv_lens[b] = (int32_t)gen_seq_kv(&w->gen, b);
    }
    if (w->opt.q_lens)
        w->opt.q_lens = w->q_lens;
    if (w->opt.kv_lens)
        w->opt.kv_lens = w->kv_lens;
}

int64_t wl_rows(const workload *w)
{
    return w->shape.batch * w->shape.q_heads * w->shape.q_len;
}

const char *wl_describe(const workload *w)
{
    static char line[1024];
    char d[896];
    snprintf(line, sizeof line, "%s features=0x%x", gen_describe(&w->gen, d, sizeof d),
             w->features);
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

attn_tensor wl_out16(const workload *w, int32_t dtype, buf *b)
{
    const size_t n = w->ob.bytes / 4; /* elements of the F32 out's buffer */
    const size_t misalign = (size_t)((uintptr_t)w->out.data & 63u) / 2;
    unsigned char *data = buf_alloc(b, n * 2, misalign);
    const uint16_t c = canary16(dtype);
    for (size_t i = 0; i < n; i++)
        memcpy(data + 2 * i, &c, 2);
    attn_tensor t = w->out;
    t.data = data;
    t.dtype = dtype;
    return t;
}

void wl_check_out16(const workload *w, const buf *b, const attn_tensor *t, const float *f32,
                    const double *want, const double *err)
{
    const attn_shape *s = &w->shape;
    const size_t rows = (size_t)wl_rows(w), cols = (size_t)w->dv, n = b->bytes / 2;
    char name[64];
    snprintf(name, sizeof name, "%s out vs f32 out rounded", ref_dtype_name(t->dtype));
    /* the view, dense */
    unsigned char *dense = xmalloc(rows * cols * 2 + 2);
    unsigned char *inside = xcalloc0(n, 1);
    size_t at = 0;
    for (int64_t bb = 0; bb < s->batch; bb++)
        for (int64_t h = 0; h < s->q_heads; h++)
            for (int64_t i = 0; i < s->q_len; i++)
                for (int64_t c = 0; c < (int64_t)cols; c++) {
                    const unsigned char *p = wl_at(t, bb, h, i, c);
                    memcpy(dense + 2 * at++, p, 2);
                    inside[(size_t)(p - b->data) / 2] = 1;
                }
    expect_rounded16(name, dense, (ptrdiff_t)cols, t->dtype, f32, (ptrdiff_t)cols, rows, cols);
    buf_check(b, name);
    const uint16_t canary = canary16(t->dtype);
    for (size_t i = 0; i < n; i++) {
        uint16_t v;
        memcpy(&v, b->data + 2 * i, 2);
        CHECK(inside[i] || v == canary, "%s: wrote into padding at element %zu", name, i);
    }
    if (want) {
        float *got = xmalloc(rows * cols * 4 + 4);
        double *bound = xmalloc(rows * cols * sizeof(double) + 8);
        decode16(dense, t->dtype, got, rows * cols);
        for (size_t i = 0; i < rows * cols; i++)
            bound[i] = isfinite(want[i]) ? tol_out16(t->dtype, want[i], err[i]) : err[i];
        snprintf(name, sizeof name, "%s out vs float64", ref_dtype_name(t->dtype));
        expect_near(name, got, (ptrdiff_t)cols, want, bound, rows, cols);
        free(got);
        free(bound);
    }
    free(dense);
    free(inside);
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
    gen_release(&w->gm);
    gen_free(&w->gen);
}

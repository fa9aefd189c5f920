/* SPDX-License-Identifier: MIT */
/*
 * FP8 scales per key row (attn_options.k_scales / v_scales, attn.h 1.6), on
 * every ISA row:
 *  - powers of two: an FP8 cache with per-row scales 2^e must give the
 *    bits of an F32 cache holding each decoded value times its scale (the
 *    products and sums are the same real numbers: a power of two moves no
 *    rounding, and f32_twin_table runs both in one kernel family's sum
 *    order), for scores, weights and the forward with its statistics,
 *    in dense (two orders), left-padded and paged layouts (shuffled pool),
 *    with per-token, per-head and per-token-and-head views, causal masks,
 *    windows, sinks, softcap and split-KV; a plan of the forward gives
 *    attn_forward's bits. V's scales are >= 1 there, so
 *    no weight times its scale can round (a weight is <= 1 and any
 *    subnormal one stays exact when doubled).
 *  - equal scales: k_scales all s (not a power of two) gives the bits of
 *    k_scale = s (attn.h: the score is (q . fp8) * fl32(scale * s) either
 *    way).
 *  - refusals: k_scales with a k that is not FP8, with k_scale, v_scales
 *    likewise: the status, nothing written;
 *  - attn_cache_append writing them (each row's scale and bytes, against
 *    the tests' own encoders) in dense and paged layouts, and its refusals.
 * The decoded values come from tests/ref/ref_quant.c (shares no code with
 * src/).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "harness.h"
#include "internal.h"
#include "ref/ref.h"
#include "ref/ref_quant.h"

enum { MAX_B = 3 };

typedef struct scaled_case {
    attn_shape s;
    int kdt, vdt;      /* FP8 dtypes of k and v */
    int paged, blhd;   /* layout: a paged pool, or dense in [b][l][h][d] order */
    int view;          /* scales: 0 per token and head, 1 per head, 2 per token */
    int32_t kv_lens[MAX_B], kv_offsets[MAX_B];
    int use_lens, use_offsets;
    int64_t lk_alloc;  /* dense: rows per sequence in the tensors */
    int32_t *table;
    int64_t bs, nb, pages;
} scaled_case;

/* A finite FP8 byte of magnitude <= mag. */
static uint8_t fp8_byte(rng *g, int dt, double mag)
{
    for (;;) {
        const uint8_t x = (uint8_t)rng_int(g, 0, 255);
        const double v = dt == ATTN_KV_FP8_E4M3 ? ref_e4m3_to_double(x) : ref_e5m2_to_double(x);
        if (isfinite(v) && fabs(v) <= mag)
            return x;
    }
}

/* The stride of the rows of one cache tensor (elements or bytes), laid out
   as the case says: dense [b][h][l][cols] or [b][l][h][cols], or the pool
   [nb][bs][h][cols]. */
static attn_tensor cache_layout(const scaled_case *c, int64_t cols)
{
    const int64_t h = c->s.kv_heads;
    attn_tensor t = {0};
    if (c->paged)
        return (attn_tensor){NULL, 0, c->bs * h * cols, cols, h * cols};
    if (c->blhd)
        t = (attn_tensor){NULL, 0, c->lk_alloc * h * cols, cols, h * cols};
    else
        t = (attn_tensor){NULL, 0, h * c->lk_alloc * cols, c->lk_alloc * cols, cols};
    return t;
}

static int64_t outer_rows(const scaled_case *c)
{
    return c->paged ? c->nb : c->s.batch;
}

static int64_t inner_rows(const scaled_case *c)
{
    return c->paged ? c->bs : c->lk_alloc;
}

/* The scale view of the case's kind over the same row space, `cols`
   scales per row (1, or one per group of channels: attn.h 1.8). */
static attn_tensor scale_layout_cols(const scaled_case *c, int64_t cols)
{
    attn_tensor t = cache_layout(c, cols);
    if (c->view == 1) { /* per KV head: every row of a head the same */
        t.batch_stride = 0;
        t.row_stride = 0;
    } else if (c->view == 2) { /* per token: every head of a row the same */
        t.head_stride = 0;
    }
    t.dtype = ATTN_DTYPE_F32;
    return t;
}

static attn_tensor scale_layout(const scaled_case *c)
{
    return scale_layout_cols(c, 1);
}

static size_t span(const attn_tensor *t, int64_t outer, int64_t heads, int64_t rows, int64_t cols)
{
    return (size_t)((outer - 1) * t->batch_stride + (heads - 1) * t->head_stride +
                    (rows - 1) * t->row_stride + cols);
}

/* The FP8 dtypes of src/dtype_list.h (tests/dtypes.h): how many, and the
   i-th in list order. */
static int fp8_dtypes(int32_t *out)
{
    return test_dtypes_of(DT_FP8, out);
}

/* One FP8 dtype, drawn from the last (as seeds drew them when the list
   was typed here). */
static int draw_fp8(rng *g)
{
    int32_t fp8[ATTN_DTYPE_COUNT];
    const int n = fp8_dtypes(fp8);
    return fp8[n - 1 - rng_int(g, 0, n - 1)];
}

static void draw_case(scaled_case *c, rng *g)
{
    memset(c, 0, sizeof *c);
    static const int64_t groups[] = {1, 2, 4};
    attn_shape *s = &c->s;
    s->batch = rng_int(g, 1, MAX_B);
    s->kv_heads = rng_int(g, 1, 2);
    s->q_heads = s->kv_heads * rng_pick(g, groups, 3);
    s->kv_len = rng_int(g, 1, 150);
    s->q_len = rng_int(g, 0, 2) ? rng_int(g, 1, 3) : rng_int(g, 1, 40);
    s->head_dim = rng_int(g, 0, 1) ? 16 * rng_int(g, 1, 8) : rng_int(g, 1, 130);
    s->v_dim = rng_int(g, 0, 1) ? 16 * rng_int(g, 1, 8) : rng_int(g, 1, 130);
    c->kdt = draw_fp8(g);
    c->vdt = draw_fp8(g);
    c->view = (int)rng_int(g, 0, 2);
    c->paged = rng_int(g, 0, 2) == 0;
    c->blhd = (int)rng_int(g, 0, 1);
    c->use_lens = (int)rng_int(g, 0, 1);
    c->use_offsets = !c->paged && rng_int(g, 0, 2) == 0;
    if (c->use_offsets) /* left-padded: the lengths say where each sequence ends */
        c->use_lens = 1;
    for (int64_t b = 0; b < s->batch; b++) {
        c->kv_offsets[b] = c->use_offsets ? (int32_t)rng_int(g, 0, s->kv_len < 9 ? s->kv_len : 9)
                                          : 0;
        c->kv_lens[b] = c->use_lens ? (int32_t)rng_int(g, 0, s->kv_len - c->kv_offsets[b])
                                    : (int32_t)s->kv_len;
    }
    c->lk_alloc = s->kv_len;
    if (c->paged) {
        c->bs = rng_int(g, 1, 17);
        c->pages = (s->kv_len + c->bs - 1) / c->bs;
        c->nb = s->batch * c->pages + rng_int(g, 0, 3);
        int32_t *perm = xmalloc((size_t)c->nb * sizeof *perm);
        for (int64_t i = 0; i < c->nb; i++)
            perm[i] = (int32_t)i;
        for (int64_t i = c->nb - 1; i > 0; i--) {
            const int64_t j = rng_int(g, 0, i);
            const int32_t x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        c->table = xmalloc((size_t)(s->batch * c->pages) * sizeof *c->table);
        memcpy(c->table, perm, (size_t)(s->batch * c->pages) * sizeof *c->table);
        free(perm);
    }
}

/* The options both calls share (layout, masks, modifiers). */
static attn_options case_options(const scaled_case *c, rng *g, float *sinks)
{
    attn_options o = ATTN_OPTIONS_INIT;
    o.scale = rng_float(g, 0.02f, 0.3f);
    if (rng_int(g, 0, 1))
        o.flags |= ATTN_CAUSAL;
    if (rng_int(g, 0, 3) == 0)
        o.window = rng_int(g, 1, 40);
    if (rng_int(g, 0, 3) == 0)
        o.softcap = rng_float(g, 5.0f, 50.0f);
    if (c->use_lens)
        o.kv_lens = c->kv_lens;
    if (c->use_offsets)
        o.kv_offsets = c->kv_offsets;
    if (c->paged) {
        o.block_table = c->table;
        o.block_table_stride = c->pages;
        o.block_size = c->bs;
        o.num_blocks = c->nb;
    }
    if (sinks && rng_int(g, 0, 2) == 0) {
        static attn_tensor st;
        for (int64_t h = 0; h < c->s.q_heads; h++)
            sinks[h] = rng_float(g, -3.0f, 3.0f);
        st = (attn_tensor){sinks, ATTN_DTYPE_F32, 0, 1, 0};
        o.sinks = &st;
    }
    return o;
}

typedef struct cache_pair {
    attn_tensor q8, f, scales; /* FP8 cache, the F32 twin, the scales */
    buf b8, bf, bs;
} cache_pair;

/* The float64 reference's options for a call `o8` on grouped caches whose
   F32 twins hold their decoded values unscaled: o with the group scales
   of k (v) where that cache is grouped (tests/ref/ref.c's group_score). */
static attn_options ref_groups(const attn_options *o, const attn_options *o8, int k_grouped,
                               int v_grouped)
{
    attn_options r = *o;
    if (k_grouped) {
        r.k_scales = o8->k_scales;
        r.k_scale_group = o8->k_scale_group;
    }
    if (v_grouped) {
        r.v_scales = o8->v_scales;
        r.v_scale_group = o8->v_scale_group;
    }
    return r;
}

/* One FP8 cache with power-of-two scales (2^lo .. 2^hi) and the F32 cache
   of its decoded values times their scales, in the same layout. */
static void make_pair(cache_pair *p, const scaled_case *c, rng *g, int dt, int64_t cols, int lo,
                      int hi)
{
    const int64_t outer = outer_rows(c), heads = c->s.kv_heads, rows = inner_rows(c);
    p->q8 = cache_layout(c, cols);
    p->f = p->q8;
    p->scales = scale_layout(c);
    p->q8.dtype = dt;
    p->f.dtype = ATTN_DTYPE_F32;
    const size_t n = span(&p->q8, outer, heads, rows, cols);
    const size_t ns = span(&p->scales, outer, heads, rows, 1);
    uint8_t *x = buf_alloc(&p->b8, n, 1);
    float *f = buf_alloc(&p->bf, n * 4, 0);
    float *sc = buf_alloc(&p->bs, ns * 4, 0);
    for (size_t i = 0; i < ns; i++)
        sc[i] = ldexpf(1.0f, (int)rng_int(g, lo, hi));
    for (size_t i = 0; i < n; i++) { /* the gaps between rows too: never read */
        x[i] = 0x7f;                 /* NaN in E4M3, +inf-less NaN in E5M2 */
        f[i] = NAN;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t r = 0; r < rows; r++) {
                const size_t at = (size_t)(o * p->q8.batch_stride + h * p->q8.head_stride +
                                           r * p->q8.row_stride);
                const float s = sc[o * p->scales.batch_stride + h * p->scales.head_stride +
                                   r * p->scales.row_stride];
                for (int64_t t = 0; t < cols; t++) {
                    x[at + (size_t)t] = fp8_byte(g, dt, 240.0);
                    const double v = ref_quant_value(dt, x + at, (size_t)t);
                    f[at + (size_t)t] = (float)(v * s); /* exact: a power of two */
                }
            }
    p->q8.data = x;
    p->f.data = f;
    p->scales.data = sc;
}

static void free_pair(cache_pair *p)
{
    buf_free(&p->b8);
    buf_free(&p->bf);
    buf_free(&p->bs);
}

/* One FP8 cache with scales per group of g channels (attn.h 1.8), any
   positive floats in [2^-6, 2^2), values of magnitude <= 64 (scores of a
   size the bf16 mode's bound still says something about), and the F32
   cache of the decoded values, unscaled (exact in f32): the reference
   applies the scales (ref_groups). */
static void make_grouped(cache_pair *p, const scaled_case *c, rng *g, int dt, int64_t cols,
                         int64_t group)
{
    const int64_t outer = outer_rows(c), heads = c->s.kv_heads, rows = inner_rows(c);
    const int64_t ng = cols / group;
    p->q8 = cache_layout(c, cols);
    p->f = p->q8;
    p->scales = scale_layout_cols(c, ng);
    p->q8.dtype = dt;
    p->f.dtype = ATTN_DTYPE_F32;
    const size_t n = span(&p->q8, outer, heads, rows, cols);
    const size_t ns = span(&p->scales, outer, heads, rows, ng);
    uint8_t *x = buf_alloc(&p->b8, n, 1);
    float *f = buf_alloc(&p->bf, n * 4, 0);
    float *sc = buf_alloc(&p->bs, ns * 4, 0);
    for (size_t i = 0; i < ns; i++)
        sc[i] = ldexpf(rng_float(g, 1.0f, 2.0f), (int)rng_int(g, -6, 1));
    for (size_t i = 0; i < n; i++) { /* the gaps between rows too: never read */
        x[i] = 0x7f;
        f[i] = NAN;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t r = 0; r < rows; r++) {
                const size_t at = (size_t)(o * p->q8.batch_stride + h * p->q8.head_stride +
                                           r * p->q8.row_stride);
                const float *s = sc + o * p->scales.batch_stride + h * p->scales.head_stride +
                                 r * p->scales.row_stride;
                for (int64_t t = 0; t < cols; t++) {
                    x[at + (size_t)t] = fp8_byte(g, dt, 64.0);
                    (void)s;
                    f[at + (size_t)t] = (float)ref_quant_value(dt, x + at, (size_t)t);
                }
            }
    p->q8.data = x;
    p->f.data = f;
    p->scales.data = sc;
}

/* A group size that divides n: 1, a power of two, or n itself; often
   16, 32, 64 or 128, which the forward reads in place with few query rows
   (qk_grp, pv_grp) when a row has two groups or more. */
static int64_t draw_group(rng *g, int64_t n)
{
    for (;;) {
        const int64_t r = rng_int(g, 0, 3);
        const int64_t x = r == 0   ? n
                          : r == 1 ? (int64_t)16 << rng_int(g, 0, 3)
                                   : (int64_t)1 << rng_int(g, 0, 7);
        if (n % x == 0)
            return x;
    }
}

/* Random top-k lists [B][Lq][k]: keys of each sequence (kv_lens[b] of
   them, or kv_len without lens), or -1. */
static int32_t *random_topk(rng *g, const attn_shape *s, const int32_t *kv_lens, int64_t k)
{
    int32_t *l = xmalloc((size_t)(s->batch * s->q_len * k) * sizeof *l);
    for (int64_t i = 0; i < s->batch * s->q_len * k; i++) {
        const int64_t lk = kv_lens ? kv_lens[i / (s->q_len * k)] : s->kv_len;
        l[i] = lk == 0 || rng_int(g, 0, 5) == 0 ? -1 : (int32_t)rng_int(g, 0, lk - 1);
    }
    return l;
}

/* Random q [b][h][l][d] in [-1, 1), contiguous, and its view. */
static float *random_q(rng *g, const attn_shape *s, attn_tensor *t)
{
    const size_t n = (size_t)(s->batch * s->q_heads * s->q_len * s->head_dim);
    float *q = xmalloc(n * 4);
    rng_fill(g, q, n, -1.0f, 1.0f);
    *t = (attn_tensor){q, ATTN_DTYPE_F32, s->q_heads * s->q_len * s->head_dim,
                       s->q_len * s->head_dim, s->head_dim};
    return q;
}

/* Runs op (0 scores, 1 weights, 2 forward) into out (+ stats). */
static attn_status run_op(const attn_dsp *t, int op, const attn_shape *s, const attn_options *o,
                          const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                          const attn_tensor *out, const attn_row_stats *st)
{
    if (op == 0)
        return attn_scores_with(t, s, o, q, k, out);
    if (op == 1)
        return attn_weights_with(t, s, o, q, k, out, st);
    return attn_forward_with(t, s, o, q, k, v, out, st);
}

/*
 * The table the F32 twin of a call on FP8 caches (dtypes kdt, vdt) runs
 * with: t, with the F32 tile kernels of the table that defined t's FP8 tile
 * kernels. Both calls then sum in one kernel family's order: SVE's table
 * keeps NEON's FP8 kernels (four lanes), and its own F32 kernels sum over
 * svcntw() lanes, the same order only at 128 bits. The defining table is
 * the first in ISA order holding the same kernel (a table starts as a copy
 * of its base's, listed before it).
 */
static attn_dsp f32_twin_table(const attn_dsp *t, int kdt, int vdt)
{
    attn_dsp m = *t;
    int k_done = 0, v_done = 0;
    for (int i = 0; i < ATTN_ISA_COUNT && !(k_done && v_done); i++) {
        const attn_dsp *o = attn_dsp_for_isa((attn_isa)i);
        if (!o)
            continue;
        if (!k_done && o->qk_tile[kdt] == t->qk_tile[kdt]) {
            m.qk_tile[ATTN_KV_F32] = o->qk_tile[ATTN_KV_F32];
            m.qk_diag[ATTN_KV_F32] = o->qk_diag[ATTN_KV_F32];
            k_done = 1;
        }
        if (!v_done && o->pv_tile[vdt] == t->pv_tile[vdt]) {
            m.pv_tile[ATTN_KV_F32] = o->pv_tile[ATTN_KV_F32];
            v_done = 1;
        }
    }
    return m;
}

HARNESS_ISA_PARAMS(fp8_scales, pow2_equals_f32)
ParameterizedTest(isa_row *row, fp8_scales, pow2_equals_f32, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 60; rep++) {
        scaled_case c;
        draw_case(&c, g);
        const attn_shape *s = &c.s;
        float sinks[8];
        attn_options o = case_options(&c, g, sinks);
        harness_context("rep %d B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld d=%lld dv=%lld k=%d v=%d "
                        "view=%d paged=%d (bs %lld) blhd=%d lens=%d offsets=%d causal=%u "
                        "window=%lld softcap=%g sinks=%d",
                        rep, (long long)s->batch, (long long)s->q_heads, (long long)s->kv_heads,
                        (long long)s->q_len, (long long)s->kv_len, (long long)s->head_dim,
                        (long long)s->v_dim, c.kdt, c.vdt, c.view, c.paged, (long long)c.bs,
                        c.blhd, c.use_lens, c.use_offsets, o.flags, (long long)o.window,
                        (double)o.softcap, o.sinks != NULL);
        cache_pair kp, vp;
        make_pair(&kp, &c, g, c.kdt, s->head_dim, -6, 6);
        make_pair(&vp, &c, g, c.vdt, s->v_dim, 0, 6); /* >= 1: see the file's comment */
        attn_tensor tq;
        float *q = random_q(g, s, &tq);
        const size_t rows = (size_t)(s->batch * s->q_heads * s->q_len);
        attn_options o8 = o;
        o8.k_scales = &kp.scales;
        o8.v_scales = &vp.scales;
        for (int op = 0; op < 3; op++) {
            const int64_t cols = op == 2 ? s->v_dim : s->kv_len;
            float *a = xcalloc0(rows * (size_t)cols, 4), *b = xcalloc0(rows * (size_t)cols, 4);
            float *sa = xcalloc0(3 * rows, 4), *sb = xcalloc0(3 * rows, 4);
            const attn_row_stats sta = {sa, sa + rows, sa + 2 * rows};
            const attn_row_stats stb = {sb, sb + rows, sb + 2 * rows};
            const attn_tensor ta = {a, ATTN_DTYPE_F32, s->q_heads * s->q_len * cols,
                                    s->q_len * cols, cols};
            attn_tensor tb = ta;
            tb.data = b;
            attn_options of = o, oq = o8;
            void *ws = NULL;
            if (op == 2 && rng_int(g, 0, 2) == 0) { /* split-KV: the chunks' keys too */
                of.kv_splits = oq.kv_splits = (int32_t)rng_int(g, 2, 5);
                size_t bytes = 0;
                CHECK(attn_forward_workspace_size(s, &oq, &bytes) == ATTN_OK, "workspace size");
                ws = xmalloc(bytes ? bytes : 1);
                of.workspace = oq.workspace = ws;
                of.workspace_size = oq.workspace_size = bytes;
            }
            const attn_dsp twin = f32_twin_table(t, c.kdt, c.vdt);
            const attn_status sf = run_op(&twin, op, s, &of, &tq, &kp.f, &vp.f, &ta, &sta);
            const attn_status s8 = run_op(t, op, s, &oq, &tq, &kp.q8, &vp.q8, &tb, &stb);
            CHECK(sf == ATTN_OK && s8 == ATTN_OK, "op %d: status %d (f32) / %d (fp8, scales)", op,
                  sf, s8);
            expect_bits(op == 0 ? "scores" : op == 1 ? "weights" : "out", b, a,
                        rows * (size_t)cols);
            if (op > 0)
                expect_bits("lse, max_score, entropy", sb, sa, 3 * rows);
            if (op == 2) { /* a plan of the call (the active table): attn_forward's bits */
                size_t bytes = 0;
                CHECK(attn_plan_size(s, &oq, &bytes) == ATTN_OK, "plan size");
                void *mem = xmalloc(bytes ? bytes : 1);
                attn_plan *plan = NULL;
                CHECK(attn_plan_forward(mem, bytes, s, &oq, &tq, &kp.q8, &vp.q8, &ta, NULL,
                                        &plan) == ATTN_OK, "plan");
                CHECK(attn_forward(s, &oq, &tq, &kp.q8, &vp.q8, &ta, NULL) == ATTN_OK, "forward");
                CHECK(attn_plan_run(plan, q, kp.q8.data, vp.q8.data, b, NULL) == ATTN_OK, "run");
                expect_bits("planned out", b, a, rows * (size_t)cols);
                free(mem);
            }
            free(ws);
            free(a);
            free(b);
            free(sa);
            free(sb);
        }
        free(q);
        free_pair(&kp);
        free_pair(&vp);
        free(c.table);
    }
}

/* Rescales an online softmax over kv_len keys may do (tests/tolerance.h):
   one per tile of the forward, at most one per key with top-k lists. */
static int64_t rescales_of(const attn_dsp *t, const attn_shape *s, const attn_options *o)
{
    const attn_dsp *sc = harness_scalar();
    const uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
    return o->topk_indices ? s->kv_len + 1 : (s->kv_len + bk - 1) / bk + 1;
}

/* Runs op on the grouped FP8 caches under `o8` and checks it against the
   float64 reference of the F32 caches of their values (kp.f, vp.f) under
   `o` (with the scales of the grouped ones: ref_groups). */
static void check_grouped(const attn_dsp *t, int op, const attn_shape *s, const attn_options *o,
                          const attn_options *o8, const attn_tensor *tq, const cache_pair *kp,
                          const cache_pair *vp)
{
    static const char *const ops[] = {"scores", "weights", "out"};
    const size_t rows = (size_t)(s->batch * s->q_heads * s->q_len);
    const int64_t cols = op == 2 ? s->v_dim : s->kv_len;
    float *a = xcalloc0(rows * (size_t)cols, 4), *st = xcalloc0(3 * rows, 4);
    const attn_row_stats sta = {st, st + rows, st + 2 * rows};
    const attn_tensor ta = {a, ATTN_DTYPE_F32, s->q_heads * s->q_len * cols, s->q_len * cols,
                            cols};
    attn_options oq = *o8;
    void *ws = NULL;
    if (op == 2 && rng_int(harness_rng(), 0, 2) == 0) { /* split-KV */
        oq.kv_splits = (int32_t)rng_int(harness_rng(), 2, 5);
        size_t bytes = 0;
        CHECK(attn_forward_workspace_size(s, &oq, &bytes) == ATTN_OK, "workspace size");
        ws = xmalloc(bytes ? bytes : 1);
        oq.workspace = ws;
        oq.workspace_size = bytes;
    }
    const attn_status st8 = run_op(t, op, s, &oq, tq, &kp->q8, &vp->q8, &ta, &sta);
    CHECK(st8 == ATTN_OK, "%s: status %d", ops[op], st8);
    ref_attn r;
    ref_attn_compute(&r, s, o, tq, &kp->f, op == 2 ? &vp->f : NULL, op == 2 ? rescales_of(t, s, o) : 0);
    if (op == 0)
        expect_near("scores vs float64", a, cols, r.s, r.s_err, rows, (size_t)cols);
    else if (op == 1)
        expect_near("weights vs float64", a, cols, r.p, r.p_err, rows, (size_t)cols);
    else
        expect_near("out vs float64", a, cols, r.o, r.o_err, rows, (size_t)cols);
    if (op > 0) {
        expect_near("lse vs float64", st, (ptrdiff_t)rows, r.lse, r.lse_err, 1, rows);
        expect_near("max_score vs float64", st + rows, (ptrdiff_t)rows, r.max, r.max_err, 1,
                    rows);
        expect_near("entropy vs float64", st + 2 * rows, (ptrdiff_t)rows, r.ent, r.ent_err, 1,
                    rows);
    }
    ref_attn_free(&r);
    free(ws);
    free(a);
    free(st);
}

/*
 * FP8 scales per group of channels (attn.h 1.8): with k_scale_group and
 * v_scale_group a call is attention over the values fp8 * its group's
 * scale, within the bound of groups (tolerance.h): scores, weights and the
 * forward with its stats against the float64 reference of the decoded
 * values and their scales, in the dense layouts of draw_case (per token and head, per
 * head (per channel with group 1), per token; lengths), with
 * split-KV, top-k lists, the bf16 mode; the other cache may keep one
 * scale per row (powers of two, as in pow2_equals_f32). The paged pool is
 * groups_paged_same_bits'.
 */
HARNESS_ISA_PARAMS(fp8_scales, groups_within_f32_bound)
ParameterizedTest(isa_row *row, fp8_scales, groups_within_f32_bound,
                  .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 40; rep++) {
        scaled_case c;
        draw_case(&c, g);
        free(c.table);
        c.table = NULL;
        c.paged = 0; /* the reference reads dense tensors, and writes every */
        c.use_offsets = 0; /* score column (a call with offsets only its own) */
        const attn_shape *s = &c.s;
        float sinks[8];
        attn_options o = case_options(&c, g, sinks);
        const int kind = (int)rng_int(g, 0, 2); /* 0 both grouped, 1 k only, 2 v only */
        const int64_t kg = kind != 2 ? draw_group(g, s->head_dim) : 0;
        const int64_t vg = kind != 1 ? draw_group(g, s->v_dim) : 0;
        const int topk = rng_int(g, 0, 3) == 0, bf16 = rng_int(g, 0, 3) == 0;
        cache_pair kp, vp;
        if (kind == 2) /* one scale per row, powers of two (pow2_equals_f32) */
            make_pair(&kp, &c, g, c.kdt, s->head_dim, -6, 6);
        else
            make_grouped(&kp, &c, g, c.kdt, s->head_dim, kg);
        if (kind == 1)
            make_pair(&vp, &c, g, c.vdt, s->v_dim, 0, 6);
        else
            make_grouped(&vp, &c, g, c.vdt, s->v_dim, vg);
        attn_tensor tq;
        float *q = random_q(g, s, &tq);
        int32_t *list = NULL;
        if (topk) {
            o.topk = rng_int(g, 1, 40);
            list = random_topk(g, s, o.kv_lens, o.topk);
            o.topk_indices = list;
        }
        if (bf16 && kind == 0) /* an FP8 cache with row scales has no bf16 kernels */
            o.precision = ATTN_PRECISION_BF16;
        attn_options o8 = o;
        o8.k_scales = &kp.scales;
        o8.v_scales = &vp.scales;
        o8.k_scale_group = kg;
        o8.v_scale_group = vg;
        for (int op = 0; op < 3; op++) {
            harness_context("rep %d op %d B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld d=%lld dv=%lld "
                            "k=%d v=%d groups %lld/%lld view=%d blhd=%d lens=%d offsets=%d "
                            "causal=%u window=%lld softcap=%g topk=%lld precision=%lld",
                            rep, op, (long long)s->batch, (long long)s->q_heads,
                            (long long)s->kv_heads, (long long)s->q_len, (long long)s->kv_len,
                            (long long)s->head_dim, (long long)s->v_dim, c.kdt, c.vdt,
                            (long long)kg, (long long)vg, c.view, c.blhd, c.use_lens,
                            c.use_offsets, o.flags, (long long)o.window, (double)o.softcap,
                            (long long)o.topk, (long long)o.precision);
            const attn_options oref = ref_groups(&o, &o8, kind != 2, kind != 1);
            check_grouped(t, op, s, &oref, &o8, &tq, &kp, &vp);
        }
        free(list);
        free(q);
        free_pair(&kp);
        free_pair(&vp);
    }
}

/* Rows of a dense [b][h][l][cols] view copied into the case's shuffled pool
   view (cols values of elem bytes per row). */
static void to_pool(const scaled_case *c, const attn_tensor *dense, const attn_tensor *pool,
                    int64_t cols, size_t elem)
{
    for (int64_t b = 0; b < c->s.batch; b++)
        for (int64_t h = 0; h < c->s.kv_heads; h++)
            for (int64_t j = 0; j < c->s.kv_len; j++) {
                const int64_t blk = c->table[b * c->pages + j / c->bs], slot = j % c->bs;
                memcpy((char *)pool->data + (size_t)(blk * pool->batch_stride +
                                                     h * pool->head_stride +
                                                     slot * pool->row_stride) * elem,
                       (const char *)dense->data + (size_t)(b * dense->batch_stride +
                                                            h * dense->head_stride +
                                                            j * dense->row_stride) * elem,
                       (size_t)cols * elem);
            }
}

/*
 * The same grouped caches dense and in a shuffled paged pool (their scale
 * views too): the same bits, for scores, weights and the forward with its
 * stats, top-k lists sometimes (a grouped row is decoded wherever it lies).
 */
HARNESS_ISA_PARAMS(fp8_scales, groups_paged_same_bits)
ParameterizedTest(isa_row *row, fp8_scales, groups_paged_same_bits,
                  .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 30; rep++) {
        scaled_case c = {.table = NULL};
        do {
            free(c.table);
            draw_case(&c, g);
        } while (!c.paged);
        scaled_case d = c; /* the same case, dense */
        d.paged = 0;
        d.table = NULL;
        const attn_shape *s = &c.s;
        const attn_options o = case_options(&c, g, NULL);
        attn_options od = o;
        od.block_table = NULL;
        od.block_table_stride = od.block_size = od.num_blocks = 0;
        od.flags &= ~ATTN_SHARED_BLOCK_TABLE;
        const int64_t kg = draw_group(g, s->head_dim), vg = draw_group(g, s->v_dim);
        cache_pair kd, vd;
        make_grouped(&kd, &d, g, c.kdt, s->head_dim, kg);
        make_grouped(&vd, &d, g, c.vdt, s->v_dim, vg);
        /* the pool: the dense rows and scales copied to their slots */
        buf bk, bv, bks, bvs;
        attn_tensor kpool = cache_layout(&c, s->head_dim), vpool = cache_layout(&c, s->v_dim);
        attn_tensor kspool = scale_layout_cols(&c, s->head_dim / kg),
                    vspool = scale_layout_cols(&c, s->v_dim / vg);
        kpool.dtype = c.kdt;
        vpool.dtype = c.vdt;
        kpool.data = buf_alloc(&bk, span(&kpool, c.nb, s->kv_heads, c.bs, s->head_dim), 1);
        vpool.data = buf_alloc(&bv, span(&vpool, c.nb, s->kv_heads, c.bs, s->v_dim), 1);
        kspool.data = buf_alloc(&bks, span(&kspool, c.nb, s->kv_heads, c.bs, s->head_dim / kg) * 4, 0);
        vspool.data = buf_alloc(&bvs, span(&vspool, c.nb, s->kv_heads, c.bs, s->v_dim / vg) * 4, 0);
        to_pool(&c, &kd.q8, &kpool, s->head_dim, 1);
        to_pool(&c, &vd.q8, &vpool, s->v_dim, 1);
        to_pool(&c, &kd.scales, &kspool, s->head_dim / kg, 4);
        to_pool(&c, &vd.scales, &vspool, s->v_dim / vg, 4);
        attn_tensor tq;
        float *q = random_q(g, s, &tq);
        attn_options a8 = od, p8 = o;
        a8.k_scales = &kd.scales;
        a8.v_scales = &vd.scales;
        p8.k_scales = &kspool;
        p8.v_scales = &vspool;
        a8.k_scale_group = p8.k_scale_group = kg;
        a8.v_scale_group = p8.v_scale_group = vg;
        int32_t *list = NULL;
        if (rng_int(g, 0, 2) == 0) {
            a8.topk = p8.topk = rng_int(g, 1, 40);
            list = random_topk(g, s, o.kv_lens, a8.topk);
            a8.topk_indices = p8.topk_indices = list;
        }
        const size_t rows = (size_t)(s->batch * s->q_heads * s->q_len);
        for (int op = 0; op < 3; op++) {
            harness_context("rep %d op %d B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld d=%lld dv=%lld "
                            "groups %lld/%lld view=%d bs=%lld topk=%lld",
                            rep, op, (long long)s->batch, (long long)s->q_heads,
                            (long long)s->kv_heads, (long long)s->q_len, (long long)s->kv_len,
                            (long long)s->head_dim, (long long)s->v_dim, (long long)kg,
                            (long long)vg, c.view, (long long)c.bs, (long long)a8.topk);
            const int64_t cols = op == 2 ? s->v_dim : s->kv_len;
            float *a = xcalloc0(rows * (size_t)cols, 4), *b = xcalloc0(rows * (size_t)cols, 4);
            float *sa = xcalloc0(3 * rows, 4), *sb = xcalloc0(3 * rows, 4);
            const attn_row_stats sta = {sa, sa + rows, sa + 2 * rows};
            const attn_row_stats stb = {sb, sb + rows, sb + 2 * rows};
            const attn_tensor ta = {a, ATTN_DTYPE_F32, s->q_heads * s->q_len * cols,
                                    s->q_len * cols, cols};
            attn_tensor tb = ta;
            tb.data = b;
            CHECK(run_op(t, op, s, &a8, &tq, &kd.q8, &vd.q8, &ta, &sta) == ATTN_OK, "dense");
            CHECK(run_op(t, op, s, &p8, &tq, &kpool, &vpool, &tb, &stb) == ATTN_OK, "paged");
            expect_bits(op == 0 ? "scores" : op == 1 ? "weights" : "out", b, a,
                        rows * (size_t)cols);
            if (op > 0)
                expect_bits("lse, max_score, entropy", sb, sa, 3 * rows);
            free(a);
            free(b);
            free(sa);
            free(sb);
        }
        free(list);
        free(q);
        free_pair(&kd);
        free_pair(&vd);
        buf_free(&bk);
        buf_free(&bv);
        buf_free(&bks);
        buf_free(&bvs);
        free(c.table);
    }
}

/* The F32 twin of a grouped cache times its scales, value by value:
   fl32(fp8 * s), the values the forward's grouped kernels compute with. */
static void scale_twin(cache_pair *p, const scaled_case *c, int64_t cols, int64_t group)
{
    float *f = p->f.data;
    const float *sc = p->scales.data;
    for (int64_t o = 0; o < outer_rows(c); o++)
        for (int64_t h = 0; h < c->s.kv_heads; h++)
            for (int64_t r = 0; r < inner_rows(c); r++) {
                float *x = f + o * p->f.batch_stride + h * p->f.head_stride + r * p->f.row_stride;
                const float *s = sc + o * p->scales.batch_stride + h * p->scales.head_stride +
                                 r * p->scales.row_stride;
                for (int64_t t = 0; t < cols; t++)
                    x[t] *= s[t / group];
            }
}

/* A group of 16, 32 or 64 channels with two or more in n (n a multiple of
   16 from 32 on). */
static int64_t draw_decode_group(rng *g, int64_t n)
{
    for (;;) {
        const int64_t x = (int64_t)16 << rng_int(g, 0, 2);
        if (n % x == 0 && n / x >= 2)
            return x;
    }
}

/*
 * Decode on rows of two scale groups or more of 16k channels (attn.h
 * 1.10.6: q_len * q_heads / kv_heads <= 8): attn_forward reads them with
 * kernels that scale each value as they load it, so its output and row
 * statistics are the bits of the same call on F32 caches holding
 * fl32(fp8 * s), in every layout, with the masks and modifiers drawn.
 */
HARNESS_ISA_PARAMS(fp8_scales, groups_decode_staged_bits)
ParameterizedTest(isa_row *row, fp8_scales, groups_decode_staged_bits,
                  .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 30; rep++) {
        scaled_case c;
        for (;;) { /* few rows, both row lengths 16k from 32 on */
            draw_case(&c, g);
            const attn_shape *d = &c.s;
            if (d->q_len * (d->q_heads / d->kv_heads) <= 8 && d->head_dim % 16 == 0 &&
                d->head_dim >= 32 && d->v_dim % 16 == 0 && d->v_dim >= 32)
                break;
            free(c.table);
        }
        const attn_shape *s = &c.s;
        float sinks[8];
        const attn_options o = case_options(&c, g, sinks);
        const int64_t kg = draw_decode_group(g, s->head_dim), vg = draw_decode_group(g, s->v_dim);
        harness_context("rep %d B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld d=%lld dv=%lld k=%d v=%d "
                        "groups %lld/%lld view=%d paged=%d blhd=%d lens=%d offsets=%d",
                        rep, (long long)s->batch, (long long)s->q_heads, (long long)s->kv_heads,
                        (long long)s->q_len, (long long)s->kv_len, (long long)s->head_dim,
                        (long long)s->v_dim, c.kdt, c.vdt, (long long)kg, (long long)vg, c.view,
                        c.paged, c.blhd, c.use_lens, c.use_offsets);
        cache_pair kp, vp;
        make_grouped(&kp, &c, g, c.kdt, s->head_dim, kg);
        make_grouped(&vp, &c, g, c.vdt, s->v_dim, vg);
        scale_twin(&kp, &c, s->head_dim, kg);
        scale_twin(&vp, &c, s->v_dim, vg);
        attn_tensor tq;
        float *q = random_q(g, s, &tq);
        attn_options o8 = o;
        o8.k_scales = &kp.scales;
        o8.v_scales = &vp.scales;
        o8.k_scale_group = kg;
        o8.v_scale_group = vg;
        const size_t rows = (size_t)(s->batch * s->q_heads * s->q_len);
        const int64_t cols = s->v_dim;
        float *a = xcalloc0(rows * (size_t)cols, 4), *b = xcalloc0(rows * (size_t)cols, 4);
        float *sa = xcalloc0(3 * rows, 4), *sb = xcalloc0(3 * rows, 4);
        const attn_row_stats sta = {sa, sa + rows, sa + 2 * rows};
        const attn_row_stats stb = {sb, sb + rows, sb + 2 * rows};
        const attn_tensor ta = {a, ATTN_DTYPE_F32, s->q_heads * s->q_len * cols, s->q_len * cols,
                                cols};
        attn_tensor tb = ta;
        tb.data = b;
        const attn_dsp twin = f32_twin_table(t, c.kdt, c.vdt);
        const attn_status sf = run_op(&twin, 2, s, &o, &tq, &kp.f, &vp.f, &ta, &sta);
        const attn_status s8 = run_op(t, 2, s, &o8, &tq, &kp.q8, &vp.q8, &tb, &stb);
        CHECK(sf == ATTN_OK && s8 == ATTN_OK, "status %d (f32) / %d (fp8, groups)", sf, s8);
        expect_bits("out", b, a, rows * (size_t)cols);
        expect_bits("lse, max_score, entropy", sb, sa, 3 * rows);
        free(a);
        free(b);
        free(sa);
        free(sb);
        free(q);
        free_pair(&kp);
        free_pair(&vp);
        free(c.table);
    }
}

/*
 * DeepSeek V3.2's FP8 latent rows, read in place (attn.h 1.8, 1.9): 656
 * bytes per token, 512 E4M3 values, their 4 f32 scales (128 channels
 * each), 64 bf16 rope values; k the 512 values, v the same bytes (MLA: V
 * is K's latent), k_scales = v_scales the in-row floats (row stride 164
 * floats), and in every other repetition the rope values as k's tail
 * (head_dim 576, k_tail the row's bf16 at byte 528, row stride 328).
 * Within the F32 bound of the decoded values, dense and with top-k lists.
 */
HARNESS_ISA_PARAMS(fp8_scales, deepseek_latent_rows)
ParameterizedTest(isa_row *row, fp8_scales, deepseek_latent_rows, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    enum { ROW = 656, D = 512, G = 128, ROPE = 64, HQ = 16 };
    for (int rep = 0; rep < 8; rep++) {
        const int tail = rep & 2;
        const int64_t lk = rng_int(g, 1, 300), lq = rng_int(g, 1, 2), dk = tail ? D + ROPE : D;
        const attn_shape s = {1, HQ, 1, lq, lk, dk, D};
        unsigned char *c = xmalloc((size_t)(lk * ROW));
        float *f = xmalloc((size_t)(lk * dk) * 4);
        for (int64_t j = 0; j < lk; j++) {
            unsigned char *r = c + j * ROW;
            float sc[D / G];
            for (int k = 0; k < D / G; k++)
                sc[k] = ldexpf(rng_float(g, 1.0f, 2.0f), (int)rng_int(g, -8, 0));
            memcpy(r + D, sc, sizeof sc);
            for (int64_t i = 0; i < D; i++) {
                r[i] = fp8_byte(g, ATTN_KV_FP8_E4M3, 448.0);
                f[j * dk + i] = (float)ref_quant_value(ATTN_KV_FP8_E4M3, r, (size_t)i);
            }
            for (int64_t i = 0; i < ROPE; i++) { /* the rope values, bf16 */
                const uint16_t h = ref_f32_to_bf16(rng_float(g, -4.0f, 4.0f));
                memcpy(r + D + sizeof sc + 2 * i, &h, 2);
                if (tail)
                    f[j * dk + D + i] = (float)ref_bf16_to_double(h);
            }
        }
        const attn_tensor k8 = {c, ATTN_DTYPE_FP8_E4M3, 0, 0, ROW};
        const attn_tensor kf = {f, ATTN_DTYPE_F32, 0, 0, dk};
        const attn_tensor sv = {c + D, ATTN_DTYPE_F32, 0, 0, ROW / 4};
        const attn_tensor rope = {c + D + 16, ATTN_DTYPE_BF16, 0, 0, ROW / 2};
        attn_tensor tq;
        float *q = random_q(g, &s, &tq);
        attn_options o = ATTN_OPTIONS_INIT;
        o.scale = 0.04f;
        int32_t *list = NULL;
        if (rep & 1) {
            o.topk = rng_int(g, 1, 64);
            list = random_topk(g, &s, NULL, o.topk);
            o.topk_indices = list;
        }
        harness_context("rep %d Lq %lld Lk %lld topk %lld tail %d", rep, (long long)lq,
                        (long long)lk, (long long)o.topk, tail);
        attn_options o8 = o;
        o8.k_scales = o8.v_scales = &sv;
        o8.k_scale_group = o8.v_scale_group = G;
        if (tail) {
            o8.k_tail = &rope;
            o8.k_tail_dim = ROPE;
        }
        const cache_pair kp = {.q8 = k8, .f = kf}, vp = kp; /* v: kf's first 512 columns */
        attn_options oref = ref_groups(&o, &o8, 1, 1);
        oref.k_tail = o8.k_tail; /* its columns: kf's last 64 */
        oref.k_tail_dim = o8.k_tail_dim;
        check_grouped(t, 2, &s, &oref, &o8, &tq, &kp, &vp);
        if (tail) {
            check_grouped(t, 0, &s, &oref, &o8, &tq, &kp, &vp);
            check_grouped(t, 1, &s, &oref, &o8, &tq, &kp, &vp);
        }
        free(list);
        free(q);
        free(c);
        free(f);
    }
}

HARNESS_ISA_PARAMS(fp8_scales, equal_scales_are_k_scale)
ParameterizedTest(isa_row *row, fp8_scales, equal_scales_are_k_scale,
                  .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int rep = 0; rep < 30; rep++) {
        scaled_case c;
        draw_case(&c, g);
        const attn_shape *s = &c.s;
        attn_options o = case_options(&c, g, NULL);
        cache_pair kp, vp;
        make_pair(&kp, &c, g, c.kdt, s->head_dim, 0, 0);
        make_pair(&vp, &c, g, c.vdt, s->v_dim, 0, 0);
        const float ks = rng_float(g, 0.001f, 0.05f); /* not a power of two */
        float *sc = kp.scales.data;
        const size_t ns = span(&kp.scales, outer_rows(&c), s->kv_heads, inner_rows(&c), 1);
        for (size_t i = 0; i < ns; i++)
            sc[i] = ks;
        harness_context("rep %d k_scale %g view %d paged %d", rep, (double)ks, c.view, c.paged);
        attn_tensor tq;
        float *q = random_q(g, s, &tq);
        const size_t rows = (size_t)(s->batch * s->q_heads * s->q_len);
        attn_options one = o, per = o;
        one.k_scale = ks;
        per.k_scales = &kp.scales;
        for (int op = 0; op < 3; op++) {
            const int64_t cols = op == 2 ? s->v_dim : s->kv_len;
            float *a = xcalloc0(rows * (size_t)cols, 4), *b = xcalloc0(rows * (size_t)cols, 4);
            const attn_tensor ta = {a, ATTN_DTYPE_F32, s->q_heads * s->q_len * cols,
                                    s->q_len * cols, cols};
            attn_tensor tb = ta;
            tb.data = b;
            CHECK(run_op(t, op, s, &one, &tq, &kp.q8, &vp.q8, &ta, NULL) == ATTN_OK, "k_scale");
            CHECK(run_op(t, op, s, &per, &tq, &kp.q8, &vp.q8, &tb, NULL) == ATTN_OK, "k_scales");
            expect_bits("k_scales all k_scale vs k_scale", b, a, rows * (size_t)cols);
            free(a);
            free(b);
        }
        free(q);
        free_pair(&kp);
        free_pair(&vp);
        free(c.table);
    }
}

/* Each refusal: its status, and not a byte of out written. */
Test(fp8_scales, refusals)
{
    harness_begin_plain("fp8_scales/refusals");
    enum { B = 1, H = 2, L = 4, D = 32 };
    const attn_shape s = {B, H, H, L, L, D, D};
    float q[B * H * L * D], kf[B * H * L * D], out[B * H * L * D], sc[B * H * L];
    uint8_t k8[B * H * L * D];
    memset(q, 0, sizeof q);
    memset(kf, 0, sizeof kf);
    memset(k8, 0x38, sizeof k8); /* 1.0 in E4M3 */
    for (int i = 0; i < B * H * L; i++)
        sc[i] = 1.0f;
    const attn_tensor tq = {q, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor tkf = {kf, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor tk8 = {k8, ATTN_DTYPE_FP8_E4M3, H * L * D, L * D, D};
    const attn_tensor to = {out, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor ts = {sc, ATTN_DTYPE_F32, H * L, L, 1};
    const attn_tensor tsf16 = {sc, ATTN_DTYPE_F16, H * L, L, 1};
    struct {
        const char *what;
        const attn_tensor *k, *v;
        int k_rows, v_rows, both, f16;
        int64_t kg, vg; /* scale groups (1.8) */
        attn_status want;
    } cases[] = {
        {"k_scales with an F32 k", &tkf, &tk8, 1, 0, 0, 0, 0, 0, ATTN_ERR_ARG},
        {"v_scales with an F32 v", &tk8, &tkf, 0, 1, 0, 0, 0, 0, ATTN_ERR_ARG},
        {"k_scales and k_scale", &tk8, &tk8, 1, 0, 1, 0, 0, 0, ATTN_ERR_ARG},
        {"v_scales and v_scale", &tk8, &tk8, 0, 1, 1, 0, 0, 0, ATTN_ERR_ARG},
        {"k_scales of dtype F16", &tk8, &tk8, 1, 0, 0, 1, 0, 0, ATTN_ERR_ARG},
        {"k_scale_group without k_scales", &tk8, &tk8, 0, 0, 0, 0, 8, 0, ATTN_ERR_ARG},
        {"v_scale_group without v_scales", &tk8, &tk8, 1, 0, 0, 0, 0, 8, ATTN_ERR_ARG},
        {"k_scale_group 12 of head_dim 32", &tk8, &tk8, 1, 0, 0, 0, 12, 0, ATTN_ERR_SHAPE},
        {"v_scale_group 64 of v_dim 32", &tk8, &tk8, 0, 1, 0, 0, 0, 64, ATTN_ERR_SHAPE},
        {"k_scale_group with an F32 k", &tkf, &tk8, 1, 0, 0, 0, 1, 0, ATTN_ERR_ARG},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_context("%s", cases[i].what);
        attn_options o = ATTN_OPTIONS_INIT;
        const attn_tensor *view = cases[i].f16 ? &tsf16 : &ts;
        if (cases[i].k_rows)
            o.k_scales = view;
        if (cases[i].v_rows)
            o.v_scales = view;
        o.k_scale_group = cases[i].kg;
        o.v_scale_group = cases[i].vg;
        if (cases[i].both) {
            o.k_scale = cases[i].k_rows ? 2.0f : 0.0f;
            o.v_scale = cases[i].v_rows ? 2.0f : 0.0f;
        }
        memset(out, 0x5a, sizeof out);
        const attn_status st = attn_forward(&s, &o, &tq, cases[i].k, cases[i].v, &to, NULL);
        CHECK(st == cases[i].want, "status %d, want %d", st, cases[i].want);
        for (size_t j = 0; j < sizeof out; j++)
            CHECK(((unsigned char *)out)[j] == 0x5a, "out written at byte %zu", j);
    }
}

/* The scale attn_cache_append gives a new row (attn.h 1.6), computed here. */
static float expected_scale(const float *x, int64_t n, float top)
{
    float m = 0.0f;
    for (int64_t t = 0; t < n; t++)
        m = fabsf(x[t]) > m ? fabsf(x[t]) : m;
    const float sc = m / top;
    return isnormal(sc) ? sc : 1.0f;
}

/*
 * attn_cache_append with per-row scales: each new row's scale (its largest
 * magnitude over 448 / 57344, 1 for a zero row) lands in the view at the
 * row's slot and its bytes are the tests' own encoding of x / scale (with
 * scale groups, 1.8: each group's, over the group's largest magnitude); every
 * other byte of the caches and views is unchanged. Dense and paged
 * (shuffled pool) layouts; then the refusals: a non-finite new value
 * (ATTN_ERR_ARG), a broadcast view (ATTN_ERR_STRIDE), nothing written.
 */
HARNESS_ISA_PARAMS(fp8_scales, append_writes_row_scales)
ParameterizedTest(isa_row *row, fp8_scales, append_writes_row_scales,
                  .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    enum { B = 2, H = 2, LK = 20, T = 3, D = 24, BS = 4, NB = 12, MAXG = 4 };
    for (int rep = 0; rep < 16; rep++) {
        const int paged = rep & 1;
        /* from rep 8 on, scales per group (1.8): k 3 groups of 8, v 4 of 6 */
        const int64_t grp[2] = {rep & 8 ? 8 : 0, rep & 8 ? 6 : 0};
        const int64_t ng[2] = {grp[0] ? D / grp[0] : 1, grp[1] ? D / grp[1] : 1};
        /* k's and v's FP8 dtypes from rep (every pair, while there are two) */
        int32_t fp8[ATTN_DTYPE_COUNT];
        const int n_fp8 = fp8_dtypes(fp8);
        const int dts[2] = {fp8[(rep >> 1) % n_fp8], fp8[n_fp8 - 1 - (rep >> 2) % n_fp8]};
        harness_context("rep %d paged %d k %d v %d groups %lld/%lld", rep, paged, dts[0], dts[1],
                        (long long)grp[0], (long long)grp[1]);
        int32_t kv_lens[B] = {LK, (int32_t)rng_int(g, T, LK)}, table[B * (LK / BS)];
        for (int i = 0; i < NB; i++) /* a shuffled pool: entries past B * pages unused */
            if (i < B * (LK / BS))
                table[i] = (int32_t)((i * 7 + 3) % NB);
        const int64_t outer = paged ? NB : B, rows = paged ? BS : LK;
        /* caches [outer][h][rows][D] bytes, views [outer][h][rows] */
        const size_t nbytes = (size_t)(outer * H * rows * D);
        const size_t nsc[2] = {(size_t)(outer * H * rows * ng[0]), (size_t)(outer * H * rows * ng[1])};
        uint8_t cache[2][NB * H * BS * D > B * H * LK * D ? NB * H * BS * D : B * H * LK * D];
        uint8_t want[2][sizeof cache[0]];
        float sc[2][(NB * H * BS > B * H * LK ? NB * H * BS : B * H * LK) * MAXG];
        float scw[2][sizeof sc[0] / 4];
        float x[2][B * H * T * D];
        for (int p = 0; p < 2; p++) {
            memset(cache[p], 0x5a, sizeof cache[p]);
            for (size_t i = 0; i < sizeof sc[p] / 4; i++)
                sc[p][i] = -7.0f;
            rng_fill(g, x[p], B * H * T * D, -30.0f, 30.0f);
            if (rep == 3) /* a zero row: scale 1 */
                memset(x[p], 0, D * sizeof(float));
        }
        const attn_shape s = {B, H, H, T, LK, D, D};
        attn_tensor kv[2], views[2];
        for (int p = 0; p < 2; p++) {
            kv[p] = (attn_tensor){cache[p], dts[p], H * rows * D, rows * D, D};
            views[p] = (attn_tensor){sc[p], ATTN_DTYPE_F32, H * rows * ng[p], rows * ng[p], ng[p]};
        }
        const attn_tensor xs[2] = {{x[0], ATTN_DTYPE_F32, H * T * D, T * D, D},
                                   {x[1], ATTN_DTYPE_F32, H * T * D, T * D, D}};
        attn_options o = ATTN_OPTIONS_INIT;
        o.kv_lens = kv_lens;
        o.k_scales = &views[0];
        o.v_scales = &views[1];
        o.k_scale_group = grp[0];
        o.v_scale_group = grp[1];
        if (paged) {
            o.block_table = table;
            o.block_table_stride = LK / BS;
            o.block_size = BS;
            o.num_blocks = NB;
        }
        /* the expected bytes: every new row at its slot */
        memcpy(want, cache, sizeof want);
        memcpy(scw, sc, sizeof scw);
        for (int p = 0; p < 2; p++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t i = 0; i < T; i++) {
                        const int64_t j = kv_lens[b] - T + i;
                        const int64_t o_ = paged ? table[b * (LK / BS) + j / BS] : b,
                                      r = paged ? j % BS : j;
                        const float *xr = x[p] + ((b * H + h) * T + i) * D;
                        const float top = dts[p] == ATTN_KV_FP8_E4M3 ? 448.0f : 57344.0f;
                        const int64_t w = D / ng[p]; /* channels per scale */
                        for (int64_t u = 0; u < ng[p]; u++) {
                            const float e = expected_scale(xr + u * w, w, top);
                            scw[p][((o_ * H + h) * rows + r) * ng[p] + u] = e;
                            for (int64_t c = u * w; c < u * w + w; c++)
                                want[p][((o_ * H + h) * rows + r) * D + c] =
                                    dts[p] == ATTN_KV_FP8_E4M3 ? ref_f32_to_e4m3(xr[c] / e)
                                                                : ref_f32_to_e5m2(xr[c] / e);
                        }
                    }
        attn_status st = attn_cache_append_with(t, &s, &o, &xs[0], &xs[1], &kv[0], &kv[1]);
        CHECK(st == ATTN_OK, "status %d", st);
        for (int p = 0; p < 2; p++) {
            expect_bytes(p ? "v cache" : "k cache", cache[p], want[p], nbytes);
            expect_bytes(p ? "v scales" : "k scales", sc[p], scw[p], nsc[p] * 4);
        }

        /* refusals: nothing written */
        uint8_t before[2][sizeof cache[0]];
        float sbefore[2][sizeof sc[0] / 4];
        memcpy(before, cache, sizeof before);
        memcpy(sbefore, sc, sizeof sbefore);
        x[1][(int)rng_int(g, 0, B * H * T * D - 1)] = rep & 2 ? INFINITY : NAN;
        st = attn_cache_append_with(t, &s, &o, &xs[0], &xs[1], &kv[0], &kv[1]);
        CHECK(st == ATTN_ERR_ARG, "a non-finite new value: status %d", st);
        attn_tensor per_head = views[0];
        per_head.row_stride = per_head.batch_stride = 0; /* one scale per head: not per row */
        o.k_scales = &per_head;
        st = attn_cache_append_with(t, &s, &o, &xs[0], NULL, &kv[0], NULL);
        CHECK(st == ATTN_ERR_STRIDE, "a broadcast view written: status %d", st);
        for (int p = 0; p < 2; p++) {
            expect_bytes("cache after a refusal", cache[p], before[p], nbytes);
            expect_bytes("scales after a refusal", sc[p], sbefore[p], nsc[p] * 4);
        }
    }
}

/* ------------------------------------------------------------ key tails */

/* Unit offset of key row (b, h, j) of a cache in the case's layout (no
   kv_offsets: the tail tests keep each sequence at position 0). */
static int64_t case_row(const scaled_case *c, const attn_tensor *t, int64_t b, int64_t h,
                        int64_t j)
{
    if (c->paged)
        return (int64_t)c->table[b * c->pages + j / c->bs] * t->batch_stride +
               h * t->head_stride + (j % c->bs) * t->row_stride;
    return b * t->batch_stride + h * t->head_stride + j * t->row_stride;
}

/* One float K/V row of n values of dtype dt at dst; their exact values. */
static void float_row(rng *g, int dt, void *dst, int64_t n, float mag, double *val)
{
    for (int64_t i = 0; i < n; i++) {
        const float x = rng_float(g, -mag, mag);
        if (dt == ATTN_DTYPE_F32) {
            memcpy((char *)dst + 4 * i, &x, 4);
            val[i] = x;
        } else {
            const uint16_t h = dt == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
            memcpy((char *)dst + 2 * i, &h, 2);
            val[i] = dt == ATTN_DTYPE_F16 ? ref_f16_to_double(h) : ref_bf16_to_double(h);
        }
    }
}

/*
 * Key rows in two parts (attn.h 1.9): k of F32, F16, BF16, Q8_0 or E4M3
 * with group scales holds the first head_dim - n values, k_tail (F32, F16,
 * BF16) the last n, each in the case's layout (dense, or the paged pool
 * through a shuffled block table); V in F32 alike. Scores, weights and the
 * forward with its stats are within the F32 bound of the float64 reference
 * on an F32 k holding each row's decoded values then its tail's.
 */
HARNESS_ISA_PARAMS(fp8_scales, k_tail_rows)
ParameterizedTest(isa_row *row, fp8_scales, k_tail_rows, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    static const int mains[] = {ATTN_DTYPE_F32, ATTN_DTYPE_F16, ATTN_DTYPE_BF16, ATTN_DTYPE_Q8_0,
                                ATTN_DTYPE_FP8_E4M3};
    int32_t tails[ATTN_DTYPE_COUNT]; /* a key tail's dtypes: the float ones (attn.h) */
    const int n_tails = test_dtypes_of(DT_FLOAT, tails);
    for (int rep = 0; rep < 30; rep++) {
        scaled_case c;
        draw_case(&c, g);
        c.use_offsets = 0; /* the reference writes every score column */
        attn_shape *s = &c.s;
        const int mdt = mains[rng_int(g, 0, 4)], tdt = tails[rng_int(g, 0, n_tails - 1)];
        const int64_t n = rng_int(g, 1, 70);
        const int64_t main = mdt == ATTN_DTYPE_Q8_0 ? 32 * rng_int(g, 1, 4) : rng_int(g, 1, 100);
        const int64_t grp = mdt == ATTN_DTYPE_FP8_E4M3 ? draw_group(g, main) : 0;
        s->head_dim = main + n;
        const int64_t D = s->head_dim, dv = s->v_dim, B = s->batch, H = s->kv_heads;
        const int64_t lk = s->kv_len, outer = outer_rows(&c), inner = inner_rows(&c);
        float sinks[8];
        attn_options o = case_options(&c, g, sinks);
        harness_context("rep %d B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld k %s (%lld, group %lld)"
                        " tail %s (%lld) dv=%lld paged=%d blhd=%d lens=%d causal=%u",
                        rep, (long long)B, (long long)s->q_heads, (long long)H,
                        (long long)s->q_len, (long long)lk, ref_dtype_name(mdt), (long long)main,
                        (long long)grp, ref_dtype_name(tdt), (long long)n, (long long)dv, c.paged,
                        c.blhd, c.use_lens, o.flags);
        /* the library's caches, in the case's layout */
        const int64_t units = main / ref_dtype_block(mdt), ng = grp ? main / grp : 1;
        attn_tensor k = cache_layout(&c, units), tl = cache_layout(&c, n), v = cache_layout(&c, dv);
        attn_tensor sc = scale_layout_cols(&c, ng);
        sc.head_stride = ng, sc.row_stride = H * ng, sc.batch_stride = inner * H * ng;
        if (!c.paged && !c.blhd)
            sc.head_stride = inner * ng, sc.row_stride = ng, sc.batch_stride = H * inner * ng;
        k.dtype = mdt, tl.dtype = tdt, v.dtype = ATTN_DTYPE_F32;
        buf bk, bt, bv, bs;
        /* byte-misaligned where the format's unit is a byte or a block (the
           float dtypes are read as their elements: naturally aligned) */
        const size_t kmis = mdt == ATTN_DTYPE_FP8_E4M3 || mdt == ATTN_DTYPE_Q8_0;
        unsigned char *kd =
            buf_alloc(&bk, span(&k, outer, H, inner, units) * ref_dtype_size(mdt), kmis);
        unsigned char *td = buf_alloc(&bt, span(&tl, outer, H, inner, n) * ref_dtype_size(tdt), 0);
        float *vd = buf_alloc(&bv, span(&v, outer, H, inner, dv) * 4, 0);
        float *sd = buf_alloc(&bs, span(&sc, outer, H, inner, ng) * 4, 0);
        k.data = kd, tl.data = td, v.data = vd, sc.data = sd;
        /* the reference's: dense F32 [B][Hkv][Lk][D] and [..][dv] */
        float *kf = xmalloc((size_t)(B * H * lk * D) * 4), *vf = xmalloc((size_t)(B * H * lk * dv) * 4);
        const attn_tensor tkf = {kf, ATTN_DTYPE_F32, H * lk * D, lk * D, D};
        /* and the scales, dense [B][Hkv][Lk][groups] */
        float *sf = xmalloc((size_t)(B * H * lk * ng) * 4);
        const attn_tensor tsf = {sf, ATTN_DTYPE_F32, H * lk * ng, lk * ng, ng};
        const attn_tensor tvf = {vf, ATTN_DTYPE_F32, H * lk * dv, lk * dv, dv};
        double *val = xmalloc((size_t)(D + dv + 32) * sizeof(double));
        float *x = xmalloc((size_t)main * 4);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t j = 0; j < lk; j++) {
                    float *fr = kf + ((b * H + h) * lk + j) * D;
                    unsigned char *kr = kd + case_row(&c, &k, b, h, j) * (int64_t)ref_dtype_size(mdt);
                    if (mdt == ATTN_DTYPE_Q8_0) {
                        for (int64_t i = 0; i < main; i++)
                            x[i] = rng_float(g, -1.0f, 1.0f);
                        CHECK(attn_quantize(ATTN_DTYPE_Q8_0, x, 1, main, main, kr, units, 0.0f) ==
                                  ATTN_OK, "quantize");
                        for (int64_t i = 0; i < main; i++)
                            fr[i] = (float)ref_quant_value(ATTN_KV_Q8_0, kr, (size_t)i);
                    } else if (mdt == ATTN_DTYPE_FP8_E4M3) {
                        float *s8 = sd + case_row(&c, &sc, b, h, j);
                        for (int64_t q = 0; q < ng; q++)
                            s8[q] = sf[((b * H + h) * lk + j) * ng + q] =
                                ldexpf(rng_float(g, 1.0f, 2.0f), (int)rng_int(g, -6, 1));
                        for (int64_t i = 0; i < main; i++) { /* unscaled: ref_groups */
                            kr[i] = fp8_byte(g, ATTN_KV_FP8_E4M3, 64.0);
                            fr[i] = (float)ref_quant_value(ATTN_KV_FP8_E4M3, kr, (size_t)i);
                        }
                    } else {
                        float_row(g, mdt, kr, main, 1.0f, val);
                        for (int64_t i = 0; i < main; i++)
                            fr[i] = (float)val[i];
                    }
                    float_row(g, tdt, td + case_row(&c, &tl, b, h, j) * (int64_t)ref_dtype_size(tdt),
                              n, 2.0f, val);
                    for (int64_t i = 0; i < n; i++)
                        fr[main + i] = (float)val[i];
                    float_row(g, ATTN_DTYPE_F32, vd + case_row(&c, &v, b, h, j), dv, 1.0f, val);
                    for (int64_t i = 0; i < dv; i++)
                        vf[((b * H + h) * lk + j) * dv + i] = (float)val[i];
                }
        attn_tensor tq;
        float *q = random_q(g, s, &tq);
        attn_options oref = o; /* dense tensors: no pool */
        oref.block_table = NULL;
        oref.block_table_stride = oref.block_size = oref.num_blocks = 0;
        oref.flags &= ~ATTN_SHARED_BLOCK_TABLE;
        attn_options ot = o;
        ot.k_tail = &tl;
        ot.k_tail_dim = n;
        if (grp) {
            ot.k_scales = &sc;
            ot.k_scale_group = grp;
            oref.k_scales = &tsf;
            oref.k_scale_group = grp;
            oref.k_tail = &tl; /* its columns: tkf's last n */
            oref.k_tail_dim = n;
        }
        const cache_pair kp = {.q8 = k, .f = tkf}, vp = {.q8 = v, .f = tvf};
        for (int op = 0; op < 3; op++)
            check_grouped(t, op, s, &oref, &ot, &tq, &kp, &vp);
        /* a plan (the active table) gives attn_forward's bits, with the
           option views the plan was made from overwritten before the run
           (the plan keeps its own copies of the tensor structs) */
        {
            const size_t orows = (size_t)(B * s->q_heads * s->q_len);
            float *a = xcalloc0(orows * (size_t)dv, 4), *b = xcalloc0(orows * (size_t)dv, 4);
            const attn_tensor ta = {a, ATTN_DTYPE_F32, s->q_heads * s->q_len * dv,
                                    s->q_len * dv, dv};
            attn_tensor tl2 = tl, sc2 = sc;
            attn_options op = ot;
            op.k_tail = &tl2;
            op.k_scales = grp ? &sc2 : NULL;
            size_t bytes = 0;
            CHECK(attn_plan_size(s, &op, &bytes) == ATTN_OK, "plan size");
            void *mem = xmalloc(bytes ? bytes : 1);
            attn_plan *plan = NULL;
            CHECK(attn_plan_forward(mem, bytes, s, &op, &tq, &k, &v, &ta, NULL, &plan) == ATTN_OK,
                  "plan");
            memset(&tl2, 0, sizeof tl2);
            memset(&sc2, 0, sizeof sc2);
            CHECK(attn_forward(s, &ot, &tq, &k, &v, &ta, NULL) == ATTN_OK, "forward");
            CHECK(attn_plan_run(plan, q, k.data, v.data, b, NULL) == ATTN_OK, "run");
            expect_bits("planned out", b, a, orows * (size_t)dv);
            free(mem);
            free(a);
            free(b);
        }
        free(q);
        free(x);
        free(val);
        free(kf);
        free(sf);
        free(vf);
        buf_free(&bk);
        buf_free(&bt);
        buf_free(&bv);
        buf_free(&bs);
        free(c.table);
    }
}

/* A tail's refusals: the status, and not a byte of out written. */
Test(fp8_scales, k_tail_refusals)
{
    harness_begin_plain("fp8_scales/k_tail_refusals");
    enum { B = 1, H = 2, L = 4, D = 32, N = 8 };
    const attn_shape s = {B, H, H, L, L, D, D};
    float q[B * H * L * D], kf[B * H * L * D], out[B * H * L * D], vf[B * H * L * D];
    float tail[B * H * L * N], sc[B * H * L];
    uint8_t k8[B * H * L * D];
    memset(q, 0, sizeof q);
    memset(kf, 0, sizeof kf);
    memset(vf, 0, sizeof vf);
    memset(tail, 0, sizeof tail);
    memset(k8, 0x38, sizeof k8);
    for (int i = 0; i < B * H * L; i++)
        sc[i] = 1.0f;
    const attn_tensor tq = {q, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor tk = {kf, ATTN_DTYPE_F32, H * L * D, L * D, D}; /* D - N used */
    const attn_tensor tk8 = {k8, ATTN_DTYPE_FP8_E4M3, H * L * D, L * D, D};
    const attn_tensor tv = {vf, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor to = {out, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor tt = {tail, ATTN_DTYPE_F32, H * L * N, L * N, N};
    const attn_tensor tt8 = {k8, ATTN_DTYPE_Q8_0, H * L * N, L * N, N};
    const attn_tensor tover = {out, ATTN_DTYPE_F32, H * L * N, L * N, N}; /* out's bytes */
    const attn_tensor ts = {sc, ATTN_DTYPE_F32, H * L, L, 1};
    struct {
        const char *what;
        const attn_tensor *k, *tail;
        int64_t n, group;
        attn_status want;
    } cases[] = {
        {"k_tail without k_tail_dim", &tk, &tt, 0, 0, ATTN_ERR_ARG},
        {"k_tail_dim without k_tail", &tk, NULL, N, 0, ATTN_ERR_ARG},
        {"k_tail_dim = head_dim", &tk, &tt, D, 0, ATTN_ERR_SHAPE},
        {"k_tail of dtype Q8_0", &tk, &tt8, N, 0, ATTN_ERR_ARG},
        {"FP8 k with a tail and one scale per call", &tk8, &tt, N, 0, ATTN_ERR_ARG},
        {"a tail sharing out's bytes", &tk, &tover, N, 0, ATTN_ERR_STRIDE},
        {"FP8 groups that do not divide head_dim - k_tail_dim", &tk8, &tt, N, 16, ATTN_ERR_SHAPE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_context("%s", cases[i].what);
        attn_options o = ATTN_OPTIONS_INIT;
        o.k_tail = cases[i].tail;
        o.k_tail_dim = cases[i].n;
        if (cases[i].group) {
            o.k_scales = &ts;
            o.k_scale_group = cases[i].group;
        }
        memset(out, 0x5a, sizeof out);
        const attn_status st = attn_forward(&s, &o, &tq, cases[i].k, &tv, &to, NULL);
        CHECK(st == cases[i].want, "status %d, want %d", st, cases[i].want);
        for (size_t j = 0; j < sizeof out; j++)
            CHECK(((unsigned char *)out)[j] == 0x5a, "out written at byte %zu", j);
    }
    /* the operations that take no tail: the backward, the append */
    attn_options o = ATTN_OPTIONS_INIT;
    o.k_tail = &tt;
    o.k_tail_dim = N;
    float dq[B * H * L * D], dk[B * H * L * D], dv[B * H * L * D];
    memset(dq, 0x5a, sizeof dq);
    const attn_tensor tdq = {dq, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor tdk = {dk, ATTN_DTYPE_F32, H * L * D, L * D, D};
    const attn_tensor tdv = {dv, ATTN_DTYPE_F32, H * L * D, L * D, D};
    attn_grads gr = {sizeof gr, &tdq, &tdk, &tdv, NULL, NULL};
    harness_context("attn_backward with a tail");
    float lse[B * H * L] = {0};
    CHECK(attn_backward(&s, &o, &tq, &tk, &tv, &tv, &tq, lse, &gr) == ATTN_ERR_UNSUPPORTED,
          "backward");
    for (size_t j = 0; j < sizeof dq; j++)
        CHECK(((unsigned char *)dq)[j] == 0x5a, "dq written at byte %zu", j);
    harness_context("attn_cache_append with a tail");
    memset(kf, 0x5a, sizeof kf);
    const attn_shape as = {B, H, H, 1, L, D, D};
    const attn_tensor tnew = {q, ATTN_DTYPE_F32, H * D, D, D};
    CHECK(attn_cache_append(&as, &o, &tnew, &tnew, &tk, &tv) == ATTN_ERR_UNSUPPORTED, "append");
    for (size_t j = 0; j < sizeof kf; j++)
        CHECK(((unsigned char *)kf)[j] == 0x5a, "k written at byte %zu", j);
}

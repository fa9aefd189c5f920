/* SPDX-License-Identifier: MIT */
/*
 * FP8 scales per key row (attn_options.k_scales / v_scales, attn.h 1.6), on
 * every ISA row:
 *  - powers of two: an FP8 cache with per-row scales 2^e must give the
 *    bits of an F32 cache holding each decoded value times its scale (the
 *    products and sums are the same real numbers: a power of two moves no
 *    rounding), for scores, weights and the forward with its statistics,
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
 * The decoded values come from tests/ref_quant.c (shares no code with
 * src/).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "ref_quant.h"

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

/* The scale view of the case's kind over the same row space. */
static attn_tensor scale_layout(const scaled_case *c)
{
    attn_tensor t = cache_layout(c, 1);
    if (c->view == 1) { /* per KV head: every row of a head the same */
        t.batch_stride = 0;
        t.row_stride = 0;
    } else if (c->view == 2) { /* per token: every head of a row the same */
        t.head_stride = 0;
    }
    t.dtype = ATTN_DTYPE_F32;
    return t;
}

static size_t span(const attn_tensor *t, int64_t outer, int64_t heads, int64_t rows, int64_t cols)
{
    return (size_t)((outer - 1) * t->batch_stride + (heads - 1) * t->head_stride +
                    (rows - 1) * t->row_stride + cols);
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
    s->v_dim = rng_int(g, 1, 130);
    c->kdt = rng_int(g, 0, 1) ? ATTN_KV_FP8_E4M3 : ATTN_KV_FP8_E5M2;
    c->vdt = rng_int(g, 0, 1) ? ATTN_KV_FP8_E4M3 : ATTN_KV_FP8_E5M2;
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
            const attn_status sf = run_op(t, op, s, &of, &tq, &kp.f, &vp.f, &ta, &sta);
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
        attn_status want;
    } cases[] = {
        {"k_scales with an F32 k", &tkf, &tk8, 1, 0, 0, 0, ATTN_ERR_ARG},
        {"v_scales with an F32 v", &tk8, &tkf, 0, 1, 0, 0, ATTN_ERR_ARG},
        {"k_scales and k_scale", &tk8, &tk8, 1, 0, 1, 0, ATTN_ERR_ARG},
        {"v_scales and v_scale", &tk8, &tk8, 0, 1, 1, 0, ATTN_ERR_ARG},
        {"k_scales of dtype F16", &tk8, &tk8, 1, 0, 0, 1, ATTN_ERR_ARG},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_context("%s", cases[i].what);
        attn_options o = ATTN_OPTIONS_INIT;
        const attn_tensor *view = cases[i].f16 ? &tsf16 : &ts;
        if (cases[i].k_rows)
            o.k_scales = view;
        if (cases[i].v_rows)
            o.v_scales = view;
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
 * row's slot and its bytes are the tests' own encoding of x / scale; every
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
    enum { B = 2, H = 2, LK = 20, T = 3, D = 24, BS = 4, NB = 12 };
    for (int rep = 0; rep < 8; rep++) {
        const int paged = rep & 1;
        const int dts[2] = {rep & 2 ? ATTN_KV_FP8_E5M2 : ATTN_KV_FP8_E4M3,
                            rep & 4 ? ATTN_KV_FP8_E4M3 : ATTN_KV_FP8_E5M2};
        harness_context("rep %d paged %d k %d v %d", rep, paged, dts[0], dts[1]);
        int32_t kv_lens[B] = {LK, (int32_t)rng_int(g, T, LK)}, table[B * (LK / BS)];
        for (int i = 0; i < NB; i++) /* a shuffled pool: entries past B * pages unused */
            if (i < B * (LK / BS))
                table[i] = (int32_t)((i * 7 + 3) % NB);
        const int64_t outer = paged ? NB : B, rows = paged ? BS : LK;
        /* caches [outer][h][rows][D] bytes, views [outer][h][rows] */
        const size_t nbytes = (size_t)(outer * H * rows * D), nsc = (size_t)(outer * H * rows);
        uint8_t cache[2][NB * H * BS * D > B * H * LK * D ? NB * H * BS * D : B * H * LK * D];
        uint8_t want[2][sizeof cache[0]];
        float sc[2][NB * H * BS > B * H * LK ? NB * H * BS : B * H * LK], scw[2][sizeof sc[0] / 4];
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
            views[p] = (attn_tensor){sc[p], ATTN_DTYPE_F32, H * rows, rows, 1};
        }
        const attn_tensor xs[2] = {{x[0], ATTN_DTYPE_F32, H * T * D, T * D, D},
                                   {x[1], ATTN_DTYPE_F32, H * T * D, T * D, D}};
        attn_options o = ATTN_OPTIONS_INIT;
        o.kv_lens = kv_lens;
        o.k_scales = &views[0];
        o.v_scales = &views[1];
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
                        const float e = expected_scale(xr, D, top);
                        scw[p][(o_ * H + h) * rows + r] = e;
                        for (int64_t c = 0; c < D; c++)
                            want[p][((o_ * H + h) * rows + r) * D + c] =
                                dts[p] == ATTN_KV_FP8_E4M3 ? ref_f32_to_e4m3(xr[c] / e)
                                                            : ref_f32_to_e5m2(xr[c] / e);
                    }
        attn_status st = attn_cache_append_with(t, &s, &o, &xs[0], &xs[1], &kv[0], &kv[1]);
        CHECK(st == ATTN_OK, "status %d", st);
        for (int p = 0; p < 2; p++) {
            expect_bytes(p ? "v cache" : "k cache", cache[p], want[p], nbytes);
            expect_bytes(p ? "v scales" : "k scales", sc[p], scw[p], nsc * 4);
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
            expect_bytes("scales after a refusal", sc[p], sbefore[p], nsc * 4);
        }
    }
}

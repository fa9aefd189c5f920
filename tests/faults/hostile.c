/* SPDX-License-Identifier: MIT */
/*
 * Hostile inputs, one deterministic case per class (docs/RELIABILITY.md
 * lists them with the behaviour each case checks). Every case checks the
 * status the header documents and that a rejected call wrote nothing; the
 * non-finite cases check that NaN/inf stays in the rows it reaches.
 *
 * Classes the header leaves undefined are run for
 * memory safety only and their current result is printed, not judged.
 * Run under ASan/UBSan (tests/faults/run.sh) for the memory-safety half.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "expect.h"

/* A small valid problem: B=2, Hq=2, Hkv=1, Lq=5, Lk=7, d=4, dv=3. */
enum { B = 2, HQ = 2, HKV = 1, LQ = 5, LK = 7, D = 4, DV = 3 };
static float q[B * HQ * LQ * D], k[B * HKV * LK * D], v[B * HKV * LK * DV];
static float out[B * HQ * LQ * LK], bias[B * HQ * LQ * LK];
static float lse[B * HQ * LQ], mx[B * HQ * LQ], ent[B * HQ * LQ];

static attn_shape shape;
static attn_tensor qt, kt, vt, st_scores, st_out, bt;
/* room past the struct: a newer caller's struct_size is read up to 4096
   bytes (attn.h 1.11, the zero-tail rule), and the tail here stays zero */
static union {
    attn_options o;
    unsigned char bytes[4096 + 8];
} optbuf;
#define opt optbuf.o
static attn_row_stats stats;

static void reset(void)
{
    for (int i = 0; i < (int)(sizeof q / 4); i++) q[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < (int)(sizeof k / 4); i++) k[i] = (float)((i * 53) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < (int)(sizeof v / 4); i++) v[i] = (float)((i * 29) % 7) / 7.0f - 0.5f;
    for (int i = 0; i < (int)(sizeof bias / 4); i++) bias[i] = 0.0f;
    memset(out, 0x5a, sizeof out); /* a recognisable pattern */
    memset(lse, 0x5a, sizeof lse);
    memset(mx, 0x5a, sizeof mx);
    memset(ent, 0x5a, sizeof ent);
    shape = (attn_shape){B, HQ, HKV, LQ, LK, D, DV};
    qt = (attn_tensor){q, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    kt = (attn_tensor){k, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
    vt = (attn_tensor){v, ATTN_DTYPE_F32, HKV * LK * DV, LK * DV, DV};
    st_scores = (attn_tensor){out, ATTN_DTYPE_F32, HQ * LQ * LK, LQ * LK, LK};
    st_out = (attn_tensor){out, ATTN_DTYPE_F32, HQ * LQ * DV, LQ * DV, DV};
    bt = (attn_tensor){bias, ATTN_DTYPE_F32, HQ * LQ * LK, LQ * LK, LK};
    opt = (attn_options)ATTN_OPTIONS_INIT;
    stats = (attn_row_stats){lse, mx, ent};
}

static int untouched(void)
{
    const unsigned char *p = (const unsigned char *)out;
    for (size_t i = 0; i < sizeof out; i++)
        if (p[i] != 0x5a)
            return 0;
    const unsigned char *s[3] = {(const void *)lse, (const void *)mx, (const void *)ent};
    for (int w = 0; w < 3; w++)
        for (size_t i = 0; i < sizeof lse; i++)
            if (s[w][i] != 0x5a)
                return 0;
    return 1;
}

/*
 * Runs forward, weights and scores; each must return `want` (or `alt`, when
 * several rules reject the input and the header does not rank them) and, on
 * an error, write nothing.
 */
static void expect_either(const char *what, attn_status want, attn_status alt)
{
    attn_status got[3];
    memset(out, 0x5a, sizeof out);
    memset(lse, 0x5a, sizeof lse);
    memset(mx, 0x5a, sizeof mx);
    memset(ent, 0x5a, sizeof ent);
    got[0] = attn_forward(&shape, &opt, &qt, &kt, &vt, &st_out, &stats);
    int clean0 = untouched();
    memset(out, 0x5a, sizeof out);
    memset(lse, 0x5a, sizeof lse);
    got[1] = attn_weights(&shape, &opt, &qt, &kt, &st_scores, &stats);
    int clean1 = untouched();
    memset(out, 0x5a, sizeof out);
    got[2] = attn_scores(&shape, &opt, &qt, &kt, &st_scores);
    int clean2 = untouched();
    for (int i = 0; i < 3; i++)
        EXPECT(got[i] == want || got[i] == alt, "%s: operation %d returned %d (%s), want %d",
               what, i, got[i], attn_strerror(got[i]), want);
    if (want != ATTN_OK)
        EXPECT(clean0 && clean1 && clean2, "%s: a rejected call wrote its outputs", what);
    printf("  %-58s -> %s\n", what, attn_strerror(got[0]));
}

static void expect_all(const char *what, attn_status want)
{
    expect_either(what, want, want);
}

static void dims_and_strides(void)
{
    puts("dims, strides and pointers that overflow:");
    const int64_t huge[] = {0, -1, INT64_MIN, INT64_MAX};
    const char *fields[] = {"batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"};
    for (int f = 0; f < 6; f++)
        for (int h = 0; h < 4; h++) {
            if (huge[h] == 0 && (f == 0 || f == 3 || f == 4))
                continue; /* an empty problem: valid since 1.11 (below) */
            reset();
            int64_t *field = &shape.batch + f;
            *field = huge[h];
            char what[96];
            snprintf(what, sizeof what, "shape.%s = %lld", fields[f], (long long)huge[h]);
            /* INT64_MAX is positive: rejected by the size/overflow rules
               (or kv_heads: q_heads % kv_heads) */
            attn_status alt = ATTN_ERR_SHAPE;
            if (huge[h] == INT64_MAX && f == 5)
                alt = ATTN_ERR_UNSUPPORTED; /* head_dim above ATTN_MAX_HEAD_DIM */
            if (huge[h] == INT64_MAX && f == 2)
                alt = ATTN_ERR_ARG; /* q_heads % kv_heads != 0 */
            expect_either(what, ATTN_ERR_SHAPE, alt);
        }
    /* empty problems (attn.h 1.11): no query row writes nothing; no key
       gives every row the fully masked result */
    for (int f = 0; f < 3; f++) {
        reset();
        int64_t *field = f == 0 ? &shape.batch : f == 1 ? &shape.q_len : &shape.kv_len;
        *field = 0;
        memset(out, 0x5a, sizeof out), memset(lse, 0x5a, sizeof lse);
        memset(mx, 0x5a, sizeof mx), memset(ent, 0x5a, sizeof ent);
        const attn_status st = attn_forward(&shape, &opt, &qt, &kt, &vt, &st_out, &stats);
        int right = st == ATTN_OK;
        if (f < 2)
            right &= untouched();
        for (int i = 0; f == 2 && i < B * HQ * LQ * DV; i++)
            right &= out[i] == 0.0f;
        for (int r = 0; f == 2 && r < B * HQ * LQ; r++)
            right &= lse[r] == -INFINITY && mx[r] == -INFINITY && ent[r] == 0.0f;
        const char *name = f == 0 ? "batch" : f == 1 ? "q_len" : "kv_len";
        EXPECT(right, "shape.%s = 0: status %d, %s", name, st,
               f < 2 ? "nothing written" : "rows 0, stats (-inf, -inf, 0)");
        printf("  shape.%s = 0 %*s-> ok: %s\n", name, (int)(45 - strlen(name)), "",
               f < 2 ? "nothing written" : "rows 0, stats (-inf, -inf, 0)");
    }

    reset();
    shape.v_dim = -1;
    expect_all("shape.v_dim = -1", ATTN_ERR_SHAPE);
    reset();
    shape.head_dim = ATTN_MAX_HEAD_DIM + 1;
    expect_all("shape.head_dim = ATTN_MAX_HEAD_DIM + 1", ATTN_ERR_UNSUPPORTED);
    reset();
    shape.q_len = (int64_t)INT32_MAX + 1; /* lengths are int32 in q_lens */
    expect_all("shape.q_len = 2^31 (all strides valid)", ATTN_ERR_SHAPE);

    const struct { int64_t *stride; const char *name; } strides[] = {
        {&qt.row_stride, "q.row_stride"}, {&kt.row_stride, "k.row_stride"},
        {&vt.batch_stride, "v.batch_stride"}};
    const int64_t bad[] = {INT64_MAX, INT64_MAX / 2, (int64_t)1 << 62};
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < 3; b++) {
            reset();
            *strides[s].stride = bad[b];
            char what[96];
            snprintf(what, sizeof what, "%s = %lld (offset overflows)", strides[s].name,
                     (long long)bad[b]);
            /* expect_all's scores/weights have no v: only forward sees v */
            attn_status got = attn_forward(&shape, &opt, &qt, &kt, &vt, &st_out, &stats);
            EXPECT(got == ATTN_ERR_SHAPE && untouched(), "%s: %d", what, got);
            printf("  %-58s -> %s\n", what, attn_strerror(got));
        }
    reset();
    qt.row_stride = -D;
    expect_all("q.row_stride negative", ATTN_ERR_STRIDE);
    reset();
    kt.data = (void *)(UINTPTR_MAX - 64);
    expect_all("k.data 64 bytes below the top of the address space", ATTN_ERR_SHAPE);
    reset();
    stats.max_score = (float *)(UINTPTR_MAX - 7); /* its B*HQ*LQ floats would wrap */
    {
        memset(out, 0x5a, sizeof out);
        memset(lse, 0x5a, sizeof lse);
        memset(mx, 0x5a, sizeof mx);
        memset(ent, 0x5a, sizeof ent);
        attn_status f = attn_forward(&shape, &opt, &qt, &kt, &vt, &st_out, &stats);
        attn_status w = attn_weights(&shape, &opt, &qt, &kt, &st_scores, &stats);
        EXPECT(f == ATTN_ERR_SHAPE && w == ATTN_ERR_SHAPE && untouched(),
               "stats.max_score wrapping the address space: forward %d, weights %d", f, w);
        printf("  %-58s -> %s\n", "stats.max_score 8 bytes below the top", attn_strerror(f));
    }
    reset();
    qt.data = NULL;
    expect_all("q.data = NULL", ATTN_ERR_NULL);
    reset();
    st_scores.row_stride = LK - 1;
    st_out.row_stride = DV - 1;
    expect_all("output rows overlap (row_stride < cols)", ATTN_ERR_STRIDE);
    reset();
    st_scores.head_stride = 0;
    st_out.head_stride = 0;
    expect_all("output broadcast (head_stride 0)", ATTN_ERR_STRIDE);
    reset();
    qt.dtype = 7;
    expect_all("q.dtype = 7", ATTN_ERR_ARG);
    /* no output is BOOL or quantized (the forward's out may be F16/BF16,
       scores and weights may not) */
    reset();
    st_scores.dtype = ATTN_DTYPE_BOOL;
    st_out.dtype = ATTN_DTYPE_BOOL;
    expect_all("output dtype BOOL", ATTN_ERR_ARG);
    reset();
    st_scores.dtype = ATTN_DTYPE_Q8_0;
    st_out.dtype = ATTN_DTYPE_Q8_0;
    expect_all("output dtype Q8_0", ATTN_ERR_ARG);
    reset();
    st_scores.dtype = ATTN_DTYPE_F16;
    {
        memset(out, 0x5a, sizeof out);
        memset(lse, 0x5a, sizeof lse);
        memset(mx, 0x5a, sizeof mx);
        memset(ent, 0x5a, sizeof ent);
        attn_status w = attn_weights(&shape, &opt, &qt, &kt, &st_scores, &stats);
        attn_status s = attn_scores(&shape, &opt, &qt, &kt, &st_scores);
        EXPECT(w == ATTN_ERR_ARG && s == ATTN_ERR_ARG && untouched(),
               "scores/weights dtype F16: weights %d, scores %d", w, s);
        printf("  %-58s -> %s\n", "scores/weights dtype F16", attn_strerror(w));
    }
    {
        float x[4] = {1, 2, 3, 4};
        EXPECT(attn_softmax(x, INT64_MAX, 4, INT64_MAX, NULL) == ATTN_ERR_SHAPE &&
                   x[0] == 1.0f,
               "attn_softmax(rows = row_stride = INT64_MAX)");
        EXPECT(attn_softmax(x, 2, 4, 3, NULL) == ATTN_ERR_STRIDE, "softmax row_stride < cols");
        EXPECT(attn_softmax_backward(x, x, x, 1, -4, 4) == ATTN_ERR_SHAPE, "softmax_bwd cols < 0");
        puts("  attn_softmax(rows = row_stride = INT64_MAX)                 -> rejected, nothing written");
    }
}

static void lengths_and_window(void)
{
    puts("lengths and window:");
    int32_t ql[B] = {LQ, LQ}, kl[B] = {LK, LK};
    const int32_t bad[] = {LQ + 1, -1, INT32_MIN, INT32_MAX};
    for (int i = 0; i < 4; i++) {
        reset();
        ql[1] = bad[i];
        opt.q_lens = ql;
        char what[96];
        snprintf(what, sizeof what, "q_lens[1] = %d", bad[i]);
        expect_all(what, ATTN_ERR_ARG);
        ql[1] = LQ;
        reset();
        kl[0] = bad[i] == LQ + 1 ? LK + 1 : bad[i];
        opt.kv_lens = kl;
        snprintf(what, sizeof what, "kv_lens[0] = %d", kl[0]);
        expect_all(what, ATTN_ERR_ARG);
        kl[0] = LK;
    }
    /* zero lengths: every row of batch 1 fully hidden */
    reset();
    kl[1] = 0;
    opt.kv_lens = kl;
    attn_status s = attn_forward(&shape, &opt, &qt, &kt, &vt, &st_out, &stats);
    int zero_rows = 1;
    for (int i = HQ * LQ * DV; i < B * HQ * LQ * DV; i++)
        zero_rows &= out[i] == 0.0f;
    for (int r = HQ * LQ; r < B * HQ * LQ; r++)
        zero_rows &= lse[r] == -INFINITY && mx[r] == -INFINITY && ent[r] == 0.0f;
    EXPECT(s == ATTN_OK && zero_rows, "kv_lens[1] = 0: status %d, rows zero/-inf: %d", s, zero_rows);
    puts("  kv_lens[1] = 0                                             -> ok: rows 0, stats (-inf, -inf, 0)");
    kl[1] = LK;

    reset();
    opt.window = -1;
    expect_all("window = -1", ATTN_ERR_ARG);
    reset();
    opt.window = INT64_MIN;
    expect_all("window = INT64_MIN", ATTN_ERR_ARG);
    reset();
    opt.window = INT64_MAX;
    opt.flags = ATTN_CAUSAL;
    expect_all("window = INT64_MAX with ATTN_CAUSAL (no effect)", ATTN_OK);
    reset();
    opt.flags = 2;
    expect_all("flags = 2 (unknown bit)", ATTN_ERR_ARG);
}

static void scalars(void)
{
    puts("scale and softcap:");
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const char *names[] = {"NaN", "+inf", "-inf"};
    for (int i = 0; i < 3; i++) {
        char what[64];
        reset();
        opt.scale = bad[i];
        snprintf(what, sizeof what, "scale = %s", names[i]);
        expect_all(what, ATTN_ERR_ARG);
        reset();
        opt.softcap = bad[i];
        snprintf(what, sizeof what, "softcap = %s", names[i]);
        expect_all(what, ATTN_ERR_ARG);
    }
    reset();
    opt.softcap = -1.0f;
    expect_all("softcap = -1", ATTN_ERR_ARG);
    reset();
    opt.softcap = -0.0f;
    expect_all("softcap = -0.0 (off)", ATTN_OK);
    reset();
    opt.scale = -1.0f;
    expect_all("scale = -1 (allowed: finite)", ATTN_OK);
    reset();
    opt.scale = 3e38f; /* finite: accepted; a score beyond FLT_MAX is +inf and poisons its row */
    for (int t = 0; t < D; t++)
        q[t] = k[t] = 2.0f; /* b0 h0 i0 . key 0 = 16 * 3e38 */
    EXPECT(attn_weights(&shape, &opt, &qt, &kt, &st_scores, &stats) == ATTN_OK && isnan(out[0]) &&
               isnan(lse[0]),
           "scale = 3e38: row 0 should be NaN (+inf score)");
    puts("  scale = 3e38, a score overflowing to +inf                  -> ok, that row NaN");
    reset();
    opt.softcap = 1e-45f; /* 1/cap overflows: rejected, not NaN scores */
    expect_all("softcap = 1e-45 (subnormal, reciprocal overflows)", ATTN_ERR_ARG);
    reset();
    opt.softcap = 3e-39f; /* subnormal with a finite reciprocal */
    expect_all("softcap = 3e-39 (subnormal, 1/cap finite)", ATTN_OK);
    int finite = 1;
    for (int i = 0; i < B * HQ * LQ * LK; i++)
        finite &= isfinite(out[i]);
    EXPECT(finite, "softcap = 3e-39 gives non-finite scores");
}

/* Rows (b, h, i) of the weights containing NaN, as a bit set over the B*HQ*LQ rows. */
static uint64_t nan_rows_weights(void)
{
    uint64_t rows = 0;
    EXPECT(attn_weights(&shape, &opt, &qt, &kt, &st_scores, &stats) == ATTN_OK, "weights");
    for (int r = 0; r < B * HQ * LQ; r++)
        for (int j = 0; j < LK; j++)
            if (isnan(out[r * LK + j]))
                rows |= 1ull << r;
    return rows;
}

static uint64_t nan_rows_forward(void)
{
    uint64_t rows = 0;
    EXPECT(attn_forward(&shape, &opt, &qt, &kt, &vt, &st_out, &stats) == ATTN_OK, "forward");
    for (int r = 0; r < B * HQ * LQ; r++)
        for (int t = 0; t < DV; t++)
            if (!isfinite(out[r * DV + t]))
                rows |= 1ull << r;
    return rows;
}

static void non_finite(void)
{
    puts("NaN and infinities in the tensors (row = (b*HQ + h)*LQ + i):");
    /* q: one query row */
    reset();
    q[(1 * HQ + 0) * LQ * D + 2 * D + 1] = NAN; /* b=1 h=0 i=2 */
    uint64_t rows = nan_rows_weights();
    EXPECT(rows == 1ull << ((1 * HQ + 0) * LQ + 2), "NaN in q: NaN rows %#llx", (unsigned long long)rows);
    printf("  %-58s -> NaN rows %#llx (only b1 h0 i2)\n", "q[b1][h0][i2] = NaN", (unsigned long long)rows);

    /* k: one key, seen by every row of batch 0 without masks, by rows i >= j with causal */
    reset();
    k[0 * LK * D + 3 * D] = INFINITY; /* b=0 key 3 */
    opt.flags = ATTN_CAUSAL;
    rows = nan_rows_weights();
    uint64_t want = 0;
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < LQ; i++)
            if (3 <= i + (LK - LQ)) /* the rows whose causal range includes key 3 */
                want |= 1ull << (h * LQ + i);
    /* +inf key entry gives +/-inf scores, and +inf or NaN scores poison the row */
    printf("  %-58s -> NaN rows %#llx (rows seeing key 3: %#llx)\n", "k[b0][key3] = +inf, causal",
           (unsigned long long)rows, (unsigned long long)want);
    EXPECT((rows & ~want) == 0, "inf in k reached rows that do not see it: %#llx",
           (unsigned long long)(rows & ~want));

    /* bias: NaN at a visible entry poisons the row; at a masked entry nothing */
    reset();
    opt.bias = &bt;
    opt.flags = ATTN_CAUSAL;
    bias[(0 * HQ + 1) * LQ * LK + 0 * LK + 6] = NAN; /* b0 h1 i0 key 6: hidden (causal: j <= 2) */
    bias[(1 * HQ + 1) * LQ * LK + 4 * LK + 1] = NAN; /* b1 h1 i4 key 1: visible */
    rows = nan_rows_weights();
    EXPECT(rows == 1ull << ((1 * HQ + 1) * LQ + 4), "NaN bias: NaN rows %#llx", (unsigned long long)rows);
    printf("  %-58s -> NaN rows %#llx\n", "bias NaN at a visible (b1 h1 i4) and a hidden entry",
           (unsigned long long)rows);
    reset();
    opt.bias = &bt;
    bias[0] = -INFINITY; /* acts as a mask */
    bias[1] = INFINITY;  /* +inf score: the row is NaN (header: rows it reaches) */
    for (int j = 0; j < LK; j++)
        bias[(0 * HQ + 1) * LQ * LK + j] = -INFINITY; /* b0 h1 i0: fully masked by bias */
    rows = nan_rows_weights();
    int zero_row = 1;
    for (int j = 0; j < LK; j++)
        zero_row &= out[(0 * HQ + 1) * LQ * LK + j] == 0.0f;
    EXPECT(rows == 1ull && zero_row, "inf bias: NaN rows %#llx, fully -inf row zero %d",
           (unsigned long long)rows, zero_row);
    printf("  %-58s -> NaN rows %#llx, all -inf bias row -> 0\n", "bias +inf (row 0), -inf entries",
           (unsigned long long)rows);

    /* v: inf beyond kv_lens never read; inf at a causal-hidden key inside the
       valid length: the header allows NaN (0 * inf); print what happens */
    reset();
    int32_t kl[B] = {LK - 2, LK};
    opt.kv_lens = kl;
    for (int t = 0; t < DV; t++)
        v[(LK - 1) * DV + t] = NAN; /* b0, key 6 >= kv_lens[0] */
    rows = nan_rows_forward();
    EXPECT(rows == 0, "NaN in v beyond kv_lens reached rows %#llx", (unsigned long long)rows);
    printf("  %-58s -> non-finite rows %#llx\n", "v[b0][key6] = NaN beyond kv_lens[0] = 5",
           (unsigned long long)rows);
    reset();
    opt.flags = ATTN_CAUSAL;
    for (int t = 0; t < DV; t++)
        v[6 * DV + t] = INFINITY; /* b0 key 6: visible to row i=4 only (causal) */
    rows = nan_rows_forward();
    printf("  %-58s -> non-finite rows %#llx (seeing it: %#llx)\n",
           "v[b0][key6] = +inf, causal", (unsigned long long)rows,
           (unsigned long long)((1ull << 4) | (1ull << (LQ + 4))));
}

static void aliasing_and_versions(void)
{
    puts("outputs sharing memory with inputs or other outputs (ATTN_ERR_STRIDE):");
    reset();
    /* forward writing over its own q (same extents: q has D=4 > DV=3 per row) */
    float q_before[sizeof q / sizeof q[0]];
    memcpy(q_before, q, sizeof q);
    attn_tensor oq = {q, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, DV};
    attn_status s = attn_forward(&shape, &opt, &qt, &kt, &vt, &oq, NULL);
    EXPECT(s == ATTN_ERR_STRIDE && memcmp(q, q_before, sizeof q) == 0,
           "forward with out over q: %s", attn_strerror(s));
    printf("  %-58s -> %s\n", "forward: out aliases q", attn_strerror(s));
    reset();
    /* scores written into the bias it reads (mask_apply reads scores as input by design) */
    opt.bias = &bt;
    s = attn_scores(&shape, &opt, &qt, &kt, &bt);
    EXPECT(s == ATTN_ERR_STRIDE, "scores over opt.bias: %s", attn_strerror(s));
    printf("  %-58s -> %s\n", "scores: output aliases opt.bias", attn_strerror(s));
    /* stats are outputs too (attn_scores has none, so only forward/weights) */
    for (int c = 0; c < 2; c++) {
        reset();
        if (c == 0)
            stats.max_score = stats.lse; /* two stats outputs in one array */
        else
            stats.lse = out; /* a stats array inside the output */
        memset(out, 0x5a, sizeof out);
        attn_status f = attn_forward(&shape, &opt, &qt, &kt, &vt, &st_out, &stats);
        attn_status w = attn_weights(&shape, &opt, &qt, &kt, &st_scores, &stats);
        const char *what = c == 0 ? "stats: max_score == lse" : "stats: lse inside out";
        EXPECT(f == ATTN_ERR_STRIDE && w == ATTN_ERR_STRIDE, "%s: forward %d, weights %d", what,
               f, w);
        printf("  %-58s -> %s\n", what, attn_strerror(f));
    }
    {
        float p[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.1f, 0.2f, 0.3f, 0.4f}, dp[8] = {1, 2, 3, 4, 1, 2, 3, 4};
        float p2[8], ds[8];
        memcpy(p2, p, sizeof p);
        attn_softmax_backward(p, dp, ds, 2, 4, 4);
        attn_softmax_backward(p2, dp, p2, 2, 4, 4);
        EXPECT(memcmp(ds, p2, sizeof ds) == 0, "softmax_backward in place (ds = p) differs");
        /* partial overlaps are rejected before anything is written */
        float shifted[9] = {0};
        memcpy(shifted, p, sizeof p);
        EXPECT(attn_softmax_backward(shifted, dp, shifted + 1, 2, 4, 4) == ATTN_ERR_STRIDE,
               "softmax_backward with ds one element after p");
        EXPECT(attn_softmax(p, 2, 4, 4, p + 7) == ATTN_ERR_STRIDE && p[7] == 0.4f,
               "softmax with lse inside x");
        puts("  softmax lse inside x, softmax_backward ds = p + 1           -> ATTN_ERR_STRIDE");
        puts("  softmax_backward ds = p (documented as allowed)             -> same bits as out of place");
    }

    puts("attn_options.struct_size:");
    const uint32_t sizes[] = {0, 4, 7, 8, (uint32_t)sizeof(attn_options) + 1, 4096, UINT32_MAX};
    for (int i = 0; i < 7; i++) {
        reset();
        opt.struct_size = sizes[i];
        char what[64];
        snprintf(what, sizeof what, "struct_size = %u", sizes[i]);
        expect_all(what, sizes[i] == 8 || (sizes[i] > sizeof(attn_options) && sizes[i] <= 4096)
                             ? ATTN_OK
                             : ATTN_ERR_VERSION);
    }
    reset();
    opt.struct_size = (uint32_t)offsetof(attn_options, window);
    opt.window = -5; /* beyond struct_size: must not be read */
    expect_all("struct_size = offsetof(window), window = -5 beyond it", ATTN_OK);

    puts("thread pool arguments:");
    attn_threadpool *pool = NULL;
    EXPECT(attn_threadpool_create(-1, &pool) == ATTN_ERR_ARG && !pool, "pool -1");
    EXPECT(attn_threadpool_create(1 << 20, &pool) == ATTN_ERR_ARG && !pool, "pool 2^20");
    EXPECT(attn_isa_select((attn_isa)-1) == ATTN_ERR_ARG, "isa -1");
    int past = 0; /* the first value attn_isa does not name */
    while (strcmp(attn_isa_name((attn_isa)past), "unknown") != 0)
        past++;
    EXPECT(attn_isa_select((attn_isa)past) == ATTN_ERR_ARG, "isa past the last");
    puts("  threads -1 or 2^20, attn_isa_select(-1 or past the last)     -> ATTN_ERR_ARG");
}

int main(void)
{
    dims_and_strides();
    lengths_and_window();
    scalars();
    non_finite();
    aliasing_and_versions();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * attn_quantize: values derived by hand from the documented formulas,
 * bit-for-bit agreement with the reference quantizers of ref_quant.c (ggml's
 * rounding written from its formulas; E4M3 by exhaustive nearest search),
 * E4M3 saturation/NaN/ties/subnormals, strides, and errors that write
 * nothing.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "attn.h"
#include "dtypes.h"
#include "harness.h"
#include "ref/ref.h"
#include "ref/ref_quant.h"
#include "tolerance.h"

static void expect_block(const char *what, const unsigned char *got, const unsigned char *want,
                         size_t n)
{
    for (size_t i = 0; i < n; i++)
        CHECK(got[i] == want[i], "%s: byte %zu is 0x%02x, want 0x%02x", what, i, got[i], want[i]);
}

Test(quantize, q8_0_by_hand)
{
    harness_begin_plain("quantize.q8_0_by_hand");
    /* amax = 63.5: d = 63.5 / 127 = 0.5 and id = 2 exactly, so q = round(2x)
       with ties away from zero (not to even): 0.25 -> 1, -0.25 -> -1,
       0.75 -> 2, 1.25 -> 3 (2.5 away from zero), -1.25 -> -3. */
    float x[32] = {63.5f, 0.25f, -0.25f, 0.75f, 1.25f, -1.25f, 0.0f, -63.5f, 10.0f};
    unsigned char want[34] = {0x00, 0x38, /* f16(0.5) */
                              127, 1, (unsigned char)-1, 2, 3, (unsigned char)-3, 0,
                              (unsigned char)-127, 20};
    unsigned char got[34];
    cr_assert_eq(attn_quantize(ATTN_DTYPE_Q8_0, x, 1, 32, 32, got, 1, 0.0f), ATTN_OK);
    expect_block("q8_0", got, want, 34);
    /* all zero: d = 0, id = 0, every q = 0 */
    memset(x, 0, sizeof x);
    memset(want, 0, sizeof want);
    cr_assert_eq(attn_quantize(ATTN_DTYPE_Q8_0, x, 1, 32, 32, got, 1, 0.0f), ATTN_OK);
    expect_block("q8_0 zeros", got, want, 34);
}

Test(quantize, q4_0_by_hand)
{
    harness_begin_plain("quantize.q4_0_by_hand");
    /* max = -8 (the FIRST value of largest magnitude: the later 8 does not
       replace it), d = -8 / -8 = 1, id = 1, nibble = min(15, trunc(x + 8.5)):
       -8 -> 0, 8 -> 15 (16 clamped), 3 -> 11, -3 -> 5, 0.5 -> 9, -0.5 -> 8,
       0 -> 8; value j in the low nibble of byte j, j + 16 in the high one. */
    float x[32] = {-8.0f, 8.0f, 3.0f, -3.0f, 0.5f, -0.5f};
    x[16] = 3.0f;
    x[17] = -8.0f;
    unsigned char want[18] = {0x00, 0x3c}; /* f16(1) */
    const int lo[16] = {0, 15, 11, 5, 9, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
    int hi[16];
    for (int j = 0; j < 16; j++)
        hi[j] = 8;
    hi[0] = 11;
    hi[1] = 0;
    for (int j = 0; j < 16; j++)
        want[2 + j] = (unsigned char)(lo[j] | hi[j] << 4);
    unsigned char got[18];
    cr_assert_eq(attn_quantize(ATTN_DTYPE_Q4_0, x, 1, 32, 32, got, 1, 0.0f), ATTN_OK);
    expect_block("q4_0", got, want, 18);

    /* max = +8 first: d = -1, id = -1: 8 -> trunc(0.5) = 0, -8 -> 15,
       the zeros at 16 and 17 -> 8 in the high nibbles */
    float y[32] = {8.0f, -8.0f};
    cr_assert_eq(attn_quantize(ATTN_DTYPE_Q4_0, y, 1, 32, 32, got, 1, 0.0f), ATTN_OK);
    cr_assert_eq(got[0], 0x00);
    cr_assert_eq(got[1], 0xbc); /* f16(-1) */
    cr_assert_eq(got[2], 0x80);
    cr_assert_eq(got[3], 0x8f);
}

Test(quantize, fp8_by_hand)
{
    harness_begin_plain("quantize.fp8_by_hand");
    const struct {
        float x;
        uint8_t code;
    } cases[] = {
        {1.0f, 0x38},            /* 2^0: exponent 7, mantissa 0 */
        {448.0f, 0x7e},          /* largest finite */
        {464.0f, 0x7e},          /* halfway to 480 (the NaN code): saturates */
        {500.0f, 0x7e},          {1e30f, 0x7e},
        {INFINITY, 0x7e},        {-INFINITY, 0xfe},
        {240.0f, 0x77},          /* 1.875 * 2^7 */
        {0x1p-9f, 0x01},         /* smallest subnormal */
        {0x1p-10f, 0x00},        /* halfway 0 / 2^-9: even is 0 */
        {0x3p-10f, 0x02},        /* halfway 1 / 2 (x 2^-9): even is 2 */
        {0x1p-6f, 0x08},         /* smallest normal */
        {0x0.fp-6f, 0x08},       /* 7.5 * 2^-9 rounds up into the normals */
        {1.0625f, 0x38},         /* halfway 1 / 1.125: even mantissa 0 */
        {1.1875f, 0x3a},         /* halfway 1.125 / 1.25: even mantissa 2 */
        {-0.0f, 0x80},           {0.0f, 0x00},
        {-3.0f, 0xc4},           /* -1.5 * 2^1 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t got = 0xaa;
        cr_assert_eq(attn_quantize(ATTN_DTYPE_FP8_E4M3, &cases[i].x, 1, 1, 1, &got, 1, 0.0f),
                     ATTN_OK);
        CHECK(got == cases[i].code, "e4m3(%a) = 0x%02x, want 0x%02x", (double)cases[i].x, got,
              cases[i].code);
    }
    /* NaN stays NaN (either sign: S.1111.111) */
    const float nan = NAN;
    uint8_t got;
    cr_assert_eq(attn_quantize(ATTN_DTYPE_FP8_E4M3, &nan, 1, 1, 1, &got, 1, 0.0f), ATTN_OK);
    cr_assert_eq(got & 0x7f, 0x7f);
    /* the scale divides first: 6 / 2 = 3 -> 0x44 */
    const float six = 6.0f;
    cr_assert_eq(attn_quantize(ATTN_DTYPE_FP8_E4M3, &six, 1, 1, 1, &got, 1, 2.0f), ATTN_OK);
    cr_assert_eq(got, 0x44);
}

/* Random blocks, including exact ties of x * id and repeated maxima. */
static void random_block(rng *g, float *x, int kind)
{
    const float amax = kind == 0 ? rng_float(g, 0.001f, 100.0f) : 127.0f;
    for (int j = 0; j < 32; j++) {
        switch (kind) {
        case 0: x[j] = rng_float(g, -amax, amax); break;
        case 1: x[j] = 0.5f * (float)rng_int(g, -254, 254); break; /* halves: ties of q8_0 */
        case 2: x[j] = (float)rng_int(g, -8, 8); break;              /* repeated +-max */
        default: x[j] = rng_float(g, -1.0f, 1.0f) * 0x1p-20f; break; /* tiny: f16 subnormal d */
        }
    }
    if (kind == 1)
        x[rng_int(g, 0, 31)] = 127.0f;
}

Test(quantize, blocks_match_reference)
{
    harness_begin_plain("quantize.blocks_match_reference");
    rng *g = harness_rng();
    for (int rep = 0; rep < 4000; rep++) {
        const int kind = rep % 4;
        float x[64];
        random_block(g, x, kind);
        random_block(g, x + 32, (kind + 1) % 4);
        harness_context("block kind %d, rep %d", kind, rep);
        unsigned char got8[68], want8[68], got4[36], want4[36];
        cr_assert_eq(attn_quantize(ATTN_DTYPE_Q8_0, x, 1, 64, 64, got8, 2, 0.0f), ATTN_OK);
        cr_assert_eq(attn_quantize(ATTN_DTYPE_Q4_0, x, 1, 64, 64, got4, 2, 0.0f), ATTN_OK);
        for (int b = 0; b < 2; b++) {
            ref_quantize_q8_0_block(x + 32 * b, want8 + 34 * b);
            ref_quantize_q4_0_block(x + 32 * b, want4 + 18 * b);
        }
        expect_block("q8_0 vs reference", got8, want8, 68);
        expect_block("q4_0 vs reference", got4, want4, 36);
    }
}

/*
 * attn_quantize into an FP8 format (name: "e4m3", "e5m2") against the
 * reference's nearest search (encode): a sweep of f32 bit patterns below
 * bits_end, both signs, then every midpoint between adjacent codes below top
 * and its two neighbours (towards 0 and towards `up`); then every finite code
 * (those with (c & nonfinite) != nonfinite) round-trips.
 */
static void check_nearest_search(int32_t dtype, const char *name, uint32_t bits_end, int top,
                                 float up, int nonfinite, uint8_t (*encode)(float),
                                 double (*decode)(uint8_t))
{
    enum { N = 4096 };
    float x[N];
    uint8_t got[N];
    size_t n = 0;
    for (uint32_t bits = 0; bits < bits_end; bits += 0x1003u) {
        float f;
        memcpy(&f, &bits, 4);
        x[n++] = (bits & 0x2000u) ? -f : f;
        if (n == N) {
            cr_assert_eq(attn_quantize(dtype, x, 1, N, N, got, N, 0.0f), ATTN_OK);
            for (size_t i = 0; i < n; i++)
                CHECK(got[i] == encode(x[i]), "%s(%a) = 0x%02x, want 0x%02x", name,
                      (double)x[i], got[i], encode(x[i]));
            n = 0;
        }
    }
    n = 0;
    for (int c = 0; c < top; c++) {
        const float mid = (float)((decode((uint8_t)c) + decode((uint8_t)(c + 1))) / 2.0);
        x[n++] = mid;
        x[n++] = nextafterf(mid, 0.0f);
        x[n++] = nextafterf(mid, up);
        x[n++] = -mid;
    }
    cr_assert_eq(attn_quantize(dtype, x, 1, (int64_t)n, (int64_t)n, got, (int64_t)n, 0.0f),
                 ATTN_OK);
    for (size_t i = 0; i < n; i++)
        CHECK(got[i] == encode(x[i]), "%s(%a) = 0x%02x, want 0x%02x", name, (double)x[i],
              got[i], encode(x[i]));
    /* every finite code round-trips */
    for (int c = 0; c < 256; c++) {
        if ((c & nonfinite) == nonfinite)
            continue;
        const float v = (float)decode((uint8_t)c);
        uint8_t back;
        cr_assert_eq(attn_quantize(dtype, &v, 1, 1, 1, &back, 1, 0.0f), ATTN_OK);
        CHECK(back == c, "code 0x%02x -> %a -> 0x%02x", c, (double)v, back);
    }
}

Test(quantize, fp8_matches_nearest_search)
{
    harness_begin_plain("quantize.fp8_matches_nearest_search");
    /* bit patterns over [0, ~1000]; 0x7f and 0xff are the NaNs */
    check_nearest_search(ATTN_DTYPE_FP8_E4M3, "e4m3", 0x447a0000u, 0x7e, 1000.0f, 0x7f,
                         ref_f32_to_e4m3, ref_e4m3_to_double);
}

Test(quantize, e5m2_by_hand)
{
    harness_begin_plain("quantize.e5m2_by_hand");
    const struct {
        float x;
        uint8_t code;
    } cases[] = {
        {1.0f, 0x3c},            /* binary16 0x3c00 */
        {2.0f, 0x40},            {-1.5f, 0xbe},
        {57344.0f, 0x7b},        /* largest finite: 1.75 * 2^15 */
        {61440.0f, 0x7b},        /* halfway to 65536 (inf): saturates */
        {1e30f, 0x7b},           {INFINITY, 0x7b}, {-INFINITY, 0xfb},
        {0x1p-16f, 0x01},        /* smallest subnormal */
        {0x1p-17f, 0x00},        /* halfway 0 / 2^-16: even is 0 */
        {0x3p-17f, 0x02},        /* halfway 1 / 2 (x 2^-16): even is 2 */
        {0x1p-14f, 0x04},        /* smallest normal */
        {0x7p-17f, 0x04},        /* 3.5 * 2^-16 rounds up into the normals */
        {1.125f, 0x3c},          /* halfway 1 / 1.25: even mantissa 0 */
        {1.375f, 0x3e},          /* halfway 1.25 / 1.5: even mantissa 2 */
        {-0.0f, 0x80},           {0.0f, 0x00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t got = 0xaa;
        cr_assert_eq(attn_quantize(ATTN_DTYPE_FP8_E5M2, &cases[i].x, 1, 1, 1, &got, 1, 0.0f),
                     ATTN_OK);
        CHECK(got == cases[i].code, "e5m2(%a) = 0x%02x, want 0x%02x", (double)cases[i].x, got,
              cases[i].code);
        CHECK(got == ref_f32_to_e5m2(cases[i].x), "e5m2(%a): the reference says 0x%02x",
              (double)cases[i].x, ref_f32_to_e5m2(cases[i].x));
    }
    const float nan = NAN, six = 6.0f;
    uint8_t got;
    cr_assert_eq(attn_quantize(ATTN_DTYPE_FP8_E5M2, &nan, 1, 1, 1, &got, 1, 0.0f), ATTN_OK);
    CHECK((got & 0x7c) == 0x7c && (got & 3) != 0, "NaN -> 0x%02x, not a NaN code", got);
    cr_assert_eq(attn_quantize(ATTN_DTYPE_FP8_E5M2, &six, 1, 1, 1, &got, 1, 2.0f), ATTN_OK);
    CHECK(got == 0x42, "6 / 2 -> 0x%02x, want 0x42", got); /* 3 = 1.5 * 2^1 */
}

Test(quantize, e5m2_matches_nearest_search)
{
    harness_begin_plain("quantize.e5m2_matches_nearest_search");
    /* bit patterns over [0, ~70000]; exponent 31 is inf and NaN */
    check_nearest_search(ATTN_DTYPE_FP8_E5M2, "e5m2", 0x47890000u, 0x7b, 1e6f, 0x7c,
                         ref_f32_to_e5m2, ref_e5m2_to_double);
}

/* Rows at strides: gaps between destination rows stay untouched. */
Test(quantize, strides)
{
    harness_begin_plain("quantize.strides");
    rng *g = harness_rng();
    float src[3 * 70];
    rng_fill(g, src, 3 * 70, -3.0f, 3.0f);
    unsigned char dst[3 * 3 * 34];
    memset(dst, 0xcd, sizeof dst);
    cr_assert_eq(attn_quantize(ATTN_DTYPE_Q8_0, src, 3, 64, 70, dst, 3, 0.0f), ATTN_OK);
    for (int r = 0; r < 3; r++) {
        unsigned char want[68];
        ref_quantize_q8_0_block(src + 70 * r, want);
        ref_quantize_q8_0_block(src + 70 * r + 32, want + 34);
        expect_block("row", dst + 3 * 34 * r, want, 68);
        for (int i = 68; i < 102; i++)
            CHECK(dst[3 * 34 * r + i] == 0xcd, "gap byte %d of row %d written", i, r);
    }
}

Test(quantize, errors_write_nothing)
{
    harness_begin_plain("quantize.errors_write_nothing");
    float x[64] = {1.0f, 2.0f};
    unsigned char dst[256], clean[256];
    memset(dst, 0xcd, sizeof dst);
    memcpy(clean, dst, sizeof dst);
    const struct {
        int32_t dtype;
        const float *src;
        int64_t rows, cols, ss;
        void *dst;
        int64_t ds;
        float scale;
        attn_status want;
    } cases[] = {
        {ATTN_DTYPE_Q8_0, NULL, 1, 32, 32, dst, 1, 0.0f, ATTN_ERR_NULL},
        {ATTN_DTYPE_Q8_0, x, 1, 32, 32, NULL, 1, 0.0f, ATTN_ERR_NULL},
        {ATTN_DTYPE_F32, x, 1, 32, 32, dst, 32, 0.0f, ATTN_ERR_ARG},
        {ATTN_DTYPE_F16, x, 1, 32, 32, dst, 32, 0.0f, ATTN_ERR_ARG},
        {ATTN_DTYPE_BOOL, x, 1, 32, 32, dst, 32, 0.0f, ATTN_ERR_ARG},
        {99, x, 1, 32, 32, dst, 32, 0.0f, ATTN_ERR_ARG},
        {ATTN_DTYPE_Q8_0, x, 1, 33, 33, dst, 2, 0.0f, ATTN_ERR_SHAPE},
        {ATTN_DTYPE_Q4_0, x, 1, 16, 16, dst, 1, 0.0f, ATTN_ERR_SHAPE},
        {ATTN_DTYPE_Q8_0, x, 0, 32, 32, dst, 1, 0.0f, ATTN_ERR_SHAPE},
        {ATTN_DTYPE_FP8_E4M3, x, 1, 0, 1, dst, 1, 0.0f, ATTN_ERR_SHAPE},
        {ATTN_DTYPE_Q8_0, x, 2, 32, 31, dst, 1, 0.0f, ATTN_ERR_STRIDE},
        {ATTN_DTYPE_Q8_0, x, 2, 32, 32, dst, 0, 0.0f, ATTN_ERR_STRIDE},
        {ATTN_DTYPE_FP8_E4M3, x, 1, 8, 8, dst, 7, 0.0f, ATTN_ERR_STRIDE},
        {ATTN_DTYPE_FP8_E4M3, x, INT64_MAX, 8, 8, dst, 8, 0.0f, ATTN_ERR_SHAPE},
        {ATTN_DTYPE_Q8_0, x, 1, 32, 32, dst, 1, 1.0f, ATTN_ERR_ARG},
        {ATTN_DTYPE_FP8_E4M3, x, 1, 8, 8, dst, 8, -1.0f, ATTN_ERR_ARG},
        {ATTN_DTYPE_FP8_E4M3, x, 1, 8, 8, dst, 8, NAN, ATTN_ERR_ARG},
        {ATTN_DTYPE_FP8_E4M3, x, 1, 8, 8, dst, 8, INFINITY, ATTN_ERR_ARG},
        /* src and dst overlapping */
        {ATTN_DTYPE_FP8_E4M3, x, 1, 8, 8, (unsigned char *)x + 4, 8, 0.0f, ATTN_ERR_STRIDE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_status st = attn_quantize(cases[i].dtype, cases[i].src, cases[i].rows,
                                       cases[i].cols, cases[i].ss, cases[i].dst, cases[i].ds,
                                       cases[i].scale);
        CHECK(st == cases[i].want, "case %zu: status %d, want %d", i, st, cases[i].want);
        expect_block("dst after an error", dst, clean, sizeof dst);
    }
    /* contents the block formats cannot hold: checked before any row is
       written, so an earlier valid row stays unwritten too */
    const float bad[] = {NAN, INFINITY, -INFINITY, 1e7f /* d = 1e7 / 127 > 65504 */};
    int32_t blocks[ATTN_DTYPE_COUNT]; /* the block formats (tests/dtypes.h) */
    const int n_blocks = test_dtypes_of(DT_QBLOCK, blocks);
    for (int b = 0; b < n_blocks; b++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            const int32_t dt = blocks[b];
            float rows[64] = {1.0f};
            rows[32 + 5] = bad[i];
            CHECK(attn_quantize(dt, rows, 2, 32, 32, dst, 1, 0.0f) == ATTN_ERR_ARG,
                  "dtype %d, value %g accepted", dt, (double)bad[i]);
            expect_block("dst after a refused value", dst, clean, sizeof dst);
        }
    /* Q4_0's d = max / -8 overflows binary16 above 8 * 65504 (rounding):
       6e5 is refused, 5e5 (d = 62500) is fine */
    float big[32] = {6e5f};
    CHECK(attn_quantize(ATTN_DTYPE_Q4_0, big, 1, 32, 32, dst, 1, 0.0f) == ATTN_ERR_ARG,
          "q4_0 6e5 accepted");
    big[0] = 5e5f;
    CHECK(attn_quantize(ATTN_DTYPE_Q4_0, big, 1, 32, 32, dst, 1, 0.0f) == ATTN_OK,
          "q4_0 5e5 refused");
}

/* ------------------------------------------------------------ quantized caches: errors */

Test(quantize, cache_argument_errors)
{
    harness_begin_plain("quantize.cache_argument_errors");
    enum { HD = 64, LKV = 4 };
    float q[HD], out[HD], clean[HD];
    unsigned char k8[LKV * 2 * 34], fp8[LKV * HD];
    memset(k8, 0, sizeof k8);
    memset(fp8, 0x38, sizeof fp8); /* 1.0 */
    for (int i = 0; i < HD; i++)
        q[i] = 0.5f;
    for (int i = 0; i < HD; i++)
        out[i] = clean[i] = 777.0f;
    attn_shape s = {1, 1, 1, 1, LKV, HD, HD};
    const attn_tensor tq = {q, ATTN_DTYPE_F32, HD, HD, HD};
    const attn_tensor to = {out, ATTN_DTYPE_F32, HD, HD, HD};
    attn_tensor tk = {k8, ATTN_DTYPE_Q8_0, LKV * 2, LKV * 2, 2}; /* strides in blocks */
    attn_tensor tf = {fp8, ATTN_DTYPE_FP8_E4M3, LKV * HD, LKV * HD, HD};
    attn_options o = ATTN_OPTIONS_INIT;
    cr_assert_eq(attn_forward(&s, &o, &tq, &tk, &tk, &to, NULL), ATTN_OK);
    for (int i = 0; i < HD; i++)
        out[i] = 777.0f;

#define EXPECT(what, call, want)                                                       \
    do {                                                                               \
        attn_status st_ = (call);                                                      \
        CHECK(st_ == (want), "%s: status %d, want %d", what, st_, want);              \
        expect_block(what, (const unsigned char *)out, (const unsigned char *)clean,  \
                     sizeof out);                                                      \
    } while (0)

    attn_shape bad = s;
    bad.head_dim = 48; /* not whole blocks; q and v views still fit */
    bad.v_dim = 64;
    EXPECT("head_dim % 32", attn_forward(&bad, &o, &tq, &tk, &tk, &to, NULL), ATTN_ERR_SHAPE);
    EXPECT("head_dim % 32 (scores)", attn_scores(&bad, &o, &tq, &tk, &to), ATTN_ERR_SHAPE);
    bad = s;
    bad.v_dim = 40;
    EXPECT("v_dim % 32", attn_forward(&bad, &o, &tq, &tf, &tk, &to, NULL), ATTN_ERR_SHAPE);
    /* FP8 rows need no whole blocks */
    bad = s;
    bad.head_dim = 40;
    bad.v_dim = 40;
    const attn_tensor to40 = {out, ATTN_DTYPE_F32, 40, 40, 40};
    cr_assert_eq(attn_forward(&bad, &o, &tq, &tf, &tf, &to40, NULL), ATTN_OK);
    for (int i = 0; i < HD; i++)
        out[i] = 777.0f;

    o.k_scale = 2.0f; /* a real scale on a Q8_0 k */
    EXPECT("k_scale with q8_0", attn_forward(&s, &o, &tq, &tk, &tk, &to, NULL), ATTN_ERR_ARG);
    o = (attn_options)ATTN_OPTIONS_INIT;
    o.k_scale = 1.0f; /* 1 means no scale: allowed */
    cr_assert_eq(attn_forward(&s, &o, &tq, &tk, &tk, &to, NULL), ATTN_OK);
    for (int i = 0; i < HD; i++)
        out[i] = 777.0f;
    const float bad_scales[] = {-1.0f, NAN, INFINITY, -INFINITY, 1e-45f /* subnormal */};
    for (int i = 0; i < 5; i++) {
        o = (attn_options)ATTN_OPTIONS_INIT;
        o.k_scale = bad_scales[i];
        EXPECT("bad k_scale", attn_forward(&s, &o, &tq, &tf, &tf, &to, NULL), ATTN_ERR_ARG);
        o = (attn_options)ATTN_OPTIONS_INIT;
        o.v_scale = bad_scales[i];
        EXPECT("bad v_scale", attn_forward(&s, &o, &tq, &tf, &tf, &to, NULL), ATTN_ERR_ARG);
        /* checked by every operation, also one that reads no v */
        EXPECT("bad v_scale (scores)", attn_scores(&s, &o, &tq, &tf, &to), ATTN_ERR_ARG);
    }
    /* the folded score scale must be a finite nonzero float */
    o = (attn_options)ATTN_OPTIONS_INIT;
    o.scale = 1e30f;
    o.k_scale = 1e30f;
    EXPECT("scale * k_scale overflows", attn_forward(&s, &o, &tq, &tf, &tf, &to, NULL),
           ATTN_ERR_ARG);
    o.scale = 1e-30f;
    o.k_scale = 1e-30f;
    EXPECT("scale * k_scale underflows", attn_forward(&s, &o, &tq, &tf, &tf, &to, NULL),
           ATTN_ERR_ARG);
    /* a 1.0 caller (struct_size without k_scale/v_scale) gets the defaults */
    o = (attn_options)ATTN_OPTIONS_INIT;
    o.k_scale = NAN;
    o.struct_size = (uint32_t)offsetof(attn_options, k_scale);
    cr_assert_eq(attn_forward(&s, &o, &tq, &tf, &tf, &to, NULL), ATTN_OK);
    for (int i = 0; i < HD; i++)
        out[i] = 777.0f;

    /* q and out may not be quantized */
    attn_tensor q8 = tk;
    o = (attn_options)ATTN_OPTIONS_INIT;
    EXPECT("q8_0 q", attn_forward(&s, &o, &q8, &tk, &tk, &to, NULL), ATTN_ERR_ARG);
    /* an output overlapping a quantized input: the byte span counts 34-byte blocks */
    attn_tensor over = {k8 + 34 * 7, ATTN_DTYPE_F32, HD, HD, HD};
    CHECK(attn_forward(&s, &o, &tq, &tk, &tk, &over, NULL) == ATTN_ERR_STRIDE,
          "output inside the last block of k accepted");
    /* strides in blocks whose byte span overflows */
    attn_tensor huge = tk;
    huge.row_stride = INT64_MAX / 40;
    EXPECT("block span overflows", attn_forward(&s, &o, &tq, &huge, &tk, &to, NULL),
           ATTN_ERR_SHAPE);
#undef EXPECT
}

/* k_scale and v_scale act as documented: s = (q . e4m3) * fl(scale * k_scale), out * v_scale. */
Test(quantize, fp8_scales_apply)
{
    harness_begin_plain("quantize.fp8_scales_apply");
    enum { HD = 8, LKV = 3 };
    float q[HD] = {1, 0, 0, 0, 0, 0, 0, 0}, out[HD], sc[LKV];
    /* keys e4m3 1.0, 2.0, 0.5 in dim 0; values rows of 1.0, 2.0, 4.0 */
    unsigned char k[LKV * HD] = {0}, v[LKV * HD];
    k[0] = 0x38;
    k[HD] = 0x40;
    k[2 * HD] = 0x30;
    for (int i = 0; i < HD; i++) {
        v[i] = 0x38;
        v[HD + i] = 0x40;
        v[2 * HD + i] = 0x48;
    }
    const attn_shape s = {1, 1, 1, 1, LKV, HD, HD};
    const attn_tensor tq = {q, ATTN_DTYPE_F32, HD, HD, HD};
    const attn_tensor tk = {k, ATTN_DTYPE_FP8_E4M3, LKV * HD, LKV * HD, HD};
    const attn_tensor tv = {v, ATTN_DTYPE_FP8_E4M3, LKV * HD, LKV * HD, HD};
    const attn_tensor ts = {sc, ATTN_DTYPE_F32, LKV, LKV, LKV};
    const attn_tensor to = {out, ATTN_DTYPE_F32, HD, HD, HD};
    attn_options o = ATTN_OPTIONS_INIT;
    o.scale = 0.5f;
    o.k_scale = 0.25f;
    o.v_scale = 3.0f;
    cr_assert_eq(attn_scores(&s, &o, &tq, &tk, &ts), ATTN_OK);
    /* every product is exact here: scale * k_scale = 0.125 */
    cr_assert_eq(sc[0], 0.125f);
    cr_assert_eq(sc[1], 0.25f);
    cr_assert_eq(sc[2], 0.0625f);
    cr_assert_eq(attn_forward(&s, &o, &tq, &tk, &tv, &to, NULL), ATTN_OK);
    /* the float64 reference on the decoded values with the folded scale,
       its output times v_scale (with its bound: tolerance.h) */
    float kf[LKV * HD] = {0}, vf[LKV * HD];
    kf[0] = 1.0f;
    kf[HD] = 2.0f;
    kf[2 * HD] = 0.5f;
    for (int i = 0; i < HD; i++) {
        vf[i] = 1.0f;
        vf[HD + i] = 2.0f;
        vf[2 * HD + i] = 4.0f;
    }
    const attn_tensor tkf = {kf, ATTN_DTYPE_F32, LKV * HD, LKV * HD, HD};
    const attn_tensor tvf = {vf, ATTN_DTYPE_F32, LKV * HD, LKV * HD, HD};
    attn_options ro = ATTN_OPTIONS_INIT;
    ro.scale = 0.125f;
    ref_attn r;
    ref_attn_compute(&r, &s, &ro, &tq, &tkf, &tvf, 2);
    for (int i = 0; i < HD; i++) { /* v_scale: tolerance.h */
        r.o[i] *= 3.0;
        r.o_err[i] = r.o_err[i] * 3.0 + TOL_VSCALE_REL * TOL_U * fabs(r.o[i]) + TOL_VSCALE_ABS;
    }
    expect_near("out vs float64", out, HD, r.o, r.o_err, 1, HD);
    ref_attn_free(&r);
}

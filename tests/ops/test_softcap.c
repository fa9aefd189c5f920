/* SPDX-License-Identifier: MIT */
/*
 * Tiny softcaps on every ISA row (issue: a subnormal softcap gave NaN for a
 * score of exactly 0, since every table computes cap * tanh(s * (1 / cap))
 * and 1/cap overflowed). Softcaps from the smallest subnormal up to FLT_MIN
 * meet scores of exactly +-0, +-tiny, +-1, +-huge and +-inf: a softcap whose
 * reciprocal overflows is ATTN_ERR_ARG with nothing written; any other gives
 * scores within tests/ref/ref.c's bound of cap * tanh(s / cap) (never NaN), and
 * finite weights within theirs.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ref/ref.h"
#include "tolerance.h"

/* The dot products q . k_j (q = 1, scale 1: each is exactly k_j). */
static const float dots[] = {
    0.0f,    -0.0f,   0x1p-149f, -0x1p-149f, 1e-40f,   -1e-40f,  FLT_MIN,  -FLT_MIN,
    1e-30f,  -1e-30f, 1.0f,      -1.0f,      1e30f,    -1e30f,   FLT_MAX,  -FLT_MAX,
    INFINITY, -INFINITY,
};
enum { LK = sizeof dots / sizeof dots[0] };

/* 1/cap overflows exactly when cap < 1/FLT_MAX: the boundary in floats. */
static float smallest_accepted(void)
{
    float c = 1.0f / FLT_MAX; /* rounded: on either side of the boundary */
    while (!isfinite(1.0f / c))
        c = nextafterf(c, 1.0f);
    while (isfinite(1.0f / nextafterf(c, 0.0f)))
        c = nextafterf(c, 0.0f);
    return c;
}

static void run_cap(const attn_dsp *t, float cap)
{
    attn_shape shape = {1, 1, 1, 1, LK, 1, 0};
    float q = 1.0f, k[LK], scores[LK], weights[LK];
    memcpy(k, dots, sizeof k);
    attn_tensor tq = {&q, ATTN_DTYPE_F32, 1, 1, 1};
    attn_tensor tk = {k, ATTN_DTYPE_F32, LK, LK, 1};
    attn_tensor ts = {scores, ATTN_DTYPE_F32, LK, LK, LK};
    attn_tensor tw = {weights, ATTN_DTYPE_F32, LK, LK, LK};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.scale = 1.0f;
    opt.softcap = cap;
    for (int j = 0; j < LK; j++)
        scores[j] = weights[j] = 1234.5f; /* "not written" marker */

    const int accepted = isfinite(1.0f / cap);
    const attn_status st = attn_scores_with(t, &shape, &opt, &tq, &tk, &ts);
    const attn_status sw = attn_weights_with(t, &shape, &opt, &tq, &tk, &tw, NULL);
    if (!accepted) {
        CHECK(st == ATTN_ERR_ARG && sw == ATTN_ERR_ARG,
              "softcap %a (1/cap overflows): scores %d, weights %d, want ATTN_ERR_ARG", cap, st,
              sw);
        for (int j = 0; j < LK; j++)
            CHECK(scores[j] == 1234.5f && weights[j] == 1234.5f,
                  "softcap %a rejected but element %d written", cap, j);
        return;
    }
    CHECK(st == ATTN_OK && sw == ATTN_OK, "softcap %a: scores %d, weights %d", cap, st, sw);

    ref_attn r;
    ref_attn_compute(&r, &shape, &opt, &tq, &tk, NULL, 0);
    for (int j = 0; j < LK; j++) {
        CHECK(isfinite(scores[j]) && fabsf(scores[j]) <= cap,
              "softcap %a, q.k = %a: score %a (must be finite, |s| <= cap)", cap, dots[j],
              scores[j]);
        CHECK(fabs(scores[j] - r.s[j]) <= r.s_err[j],
              "softcap %a, q.k = %a: score %a vs float64 %a differ by %.3g > bound %.3g", cap,
              dots[j], scores[j], r.s[j], fabs(scores[j] - r.s[j]), r.s_err[j]);
        CHECK(isfinite(weights[j]) && fabs(weights[j] - r.p[j]) <= r.p_err[j],
              "softcap %a, q.k = %a: weight %a vs float64 %a (bound %.3g)", cap, dots[j],
              weights[j], r.p[j], r.p_err[j]);
    }
    ref_attn_free(&r);
}

HARNESS_ISA_PARAMS(softcap, tiny_caps)
ParameterizedTest(isa_row *row, softcap, tiny_caps)
{
    const attn_dsp *t = harness_begin(row);
    const float boundary = smallest_accepted();
    const float caps[] = {
        0x1p-149f,                       /* smallest subnormal */
        1e-45f, 1e-40f, 0x1p-128f,       /* subnormal, 1/cap overflows */
        nextafterf(boundary, 0.0f),      /* the largest rejected */
        boundary,                        /* the smallest accepted (subnormal) */
        nextafterf(boundary, 1.0f), 3e-39f, 1e-38f,
        nextafterf(FLT_MIN, 0.0f),       /* largest subnormal */
        FLT_MIN,
    };
    CHECK(!isfinite(1.0f / nextafterf(boundary, 0.0f)) && boundary < FLT_MIN,
          "boundary %a misplaced", boundary);
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        harness_context("softcap %a", caps[c]);
        run_cap(t, caps[c]);
    }
}

/*
 * Accuracy of the AVX2 kernels' exp (src/x86/row_avx2.c) over every float:
 * each of the 2^32 bit patterns goes through attn_exp_f32_avx2, on both of
 * its paths (the fast in-range one as chosen per vector, and the full-range
 * one forced on every input), and is
 * compared with libm's double-precision exp rounded to float (the correctly
 * rounded result in all but astronomically rare cases). Fails when any
 * finite result is more than EXP_MAX_ULP (1.0) ulp away, or when the special
 * values disagree: NaN in -> NaN out, exp(-inf) = +0, exp(+inf) = +inf,
 * overflow -> +inf, underflow -> +0 or the subnormal within the bound.
 * Pass an argument N to test only every N-th pattern (quick runs).
 * Skips (exit 77) when the CPU cannot run the AVX2 table.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void attn_exp_f32_avx2(const float *x, float *y, size_t n, int full_path);

#define EXP_MAX_ULP 1.0

/* ulp of the float at `ref` (the subnormal spacing below FLT_MIN). */
static double ulp_at(double ref)
{
    double a = fabs(ref);
    if (a < FLT_MIN)
        return ldexp(1.0, -149);
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    return ldexp(1.0, e - 24);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int main(int argc, char **argv)
{
    if (!attn_dsp_for_isa(ATTN_ISA_AVX2)) {
        puts("exp_accuracy: AVX2 table not available on this CPU/build, skipped");
        return 77;
    }
    uint64_t step = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
    if (step == 0)
        step = 1;
    enum { CHUNK = 4096 };
    static float x[CHUNK], y[2][CHUNK];
    double worst = 0.0;
    float worst_x = 0.0f;
    uint64_t bad = 0, tested = 0;
    for (uint64_t base = 0; base < (1ull << 32);) {
        size_t n = 0;
        for (; n < CHUNK && base < (1ull << 32); n++, base += step)
            x[n] = from_bits((uint32_t)base);
        attn_exp_f32_avx2(x, y[0], n, 0);
        attn_exp_f32_avx2(x, y[1], n, 1);
        for (size_t i = 0; i < n; i++) {
            double ref = exp((double)x[i]);
            float reff = (float)ref;
            for (int path = 0; path < 2; path++) {
                float got = y[path][i];
                int ok;
                double err = 0.0;
                if (isnan(x[i]))
                    ok = isnan(got);
                else if (isinf(reff))
                    ok = isinf(got) && got > 0; /* overflow */
                else if (reff == 0.0f)
                    /* below half the least subnormal: +0, or the least
                     * subnormal when that is within the bound */
                    ok = got >= 0.0f && fabs(got - ref) <= EXP_MAX_ULP * ulp_at(ref);
                else {
                    err = fabs((double)got - ref) / ulp_at(ref);
                    ok = isfinite(got) && err <= EXP_MAX_ULP;
                }
                if (err > worst) {
                    worst = err;
                    worst_x = x[i];
                }
                if (!ok && bad++ < 10)
                    printf("%s path: exp(%a) = %a, libm %a\n", path ? "full" : "fast",
                           (double)x[i], (double)got, ref);
            }
        }
        tested += n;
    }
    printf("exp_accuracy: %llu inputs, max error %.3f ulp at x = %a, %llu failures\n",
           (unsigned long long)tested, worst, (double)worst_x, (unsigned long long)bad);
    return bad ? 1 : 0;
}

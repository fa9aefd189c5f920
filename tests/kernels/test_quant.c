/* SPDX-License-Identifier: MIT */
/*
 * The quantized K/V dtypes (Q8_0, Q4_0, FP8 E4M3 and E5M2), for every ISA row:
 *  - kernels: qk_tile, pv_tile, to_f32 of each quant dtype against float64
 *    computed from the exactly decoded values (decoded here, from the
 *    format descriptions of attn.h, sharing no code with src/), with the
 *    SAME bounds as the f32 kernels (tolerance.h: decoding is exact, so
 *    after the load the arithmetic is the f32 arithmetic); block-boundary,
 *    stride, unaligned, row-tail and page-fence cases; NaN reach;
 *  - every E4M3 and E5M2 byte decodes exactly, also with the FPU flushing
 *    subnormals (x86 DAZ/FTZ);
 *  - operations (scores, weights, forward) on quantized caches against
 *    ref_attn_compute on the decoded F32 tensors, with its bounds, in each
 *    precision mode (the int8 mode's rounding of Q8_0 / Q4_0 scores has
 *    its own bound: attn.h, tests/ref/ref.c).
 * The SIMD rows are compared with float64 directly (not with the scalar
 * row), so each meets the one-implementation bound itself.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "dtypes.h"
#include "harness.h"
#include "ref/ref.h"
#include "ref/ref_quant.h"
#include "tolerance.h"

/* The quantized K/V dtypes, src/dtype_list.h's kinds QBLOCK, FP8 and ASYM
   (tests/dtypes.h): how many, and the i-th in list order. */
static int n_quant_dts(void)
{
    int32_t dts[ATTN_DTYPE_COUNT];
    return test_dtypes_of(DT_QUANT, dts);
}

static int quant_dt(int i)
{
    int32_t dts[ATTN_DTYPE_COUNT];
    test_dtypes_of(DT_QUANT, dts);
    return dts[i];
}

/* Those with tile kernels of their own (all but ASYM, see is_asym). */
static int n_tile_dts(void)
{
    int32_t dts[ATTN_DTYPE_COUNT];
    return test_dtypes_of(DT_QUANT, dts) - test_dtypes_of(DT_ASYM, dts);
}

static int tile_dt(int i)
{
    int32_t dts[ATTN_DTYPE_COUNT];
    const int n = test_dtypes_of(DT_QUANT, dts);
    for (int j = 0; j < n; j++)
        if (!test_dtype_is(dts[j], DT_ASYM) && i-- == 0)
            return dts[j];
    return -1;
}

/* FP8 (E4M3, E5M2): one byte per value, scaled by k_scale / v_scale. */
static int is_fp8(int dt)
{
    return test_dtype_is(dt, DT_FP8);
}

/* OpenVINO's records (U8_ASYM, U4_ASYM): decoded into f32 rows before the
   F32 kernels, so they have no tile kernels of their own (checkasm checks
   their decoders); the operations' tests below read them. */
static int is_asym(int dt)
{
    return test_dtype_is(dt, DT_ASYM);
}

/* The reference's exact value of one FP8 byte of dtype dt. */
static double fp8_value(int dt, uint8_t x)
{
    return ref_quant_value(dt, &x, 0);
}

static const char *qname(int dt)
{
    return ref_dtype_name(dt);
}

/* Row lengths: whole blocks for Q8_0/Q4_0 (1..8 blocks, 4096), any for FP8. */
static size_t pick_dim(rng *g, int dt)
{
    static const int64_t block_dims[] = {32, 64, 96, 128, 160, 192, 256};
    static const int64_t fp8_dims[] = {1, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                       100, 127, 128, 129, 256};
    if (is_fp8(dt))
        return (size_t)rng_pick(g, fp8_dims, sizeof fp8_dims / sizeof fp8_dims[0]);
    return (size_t)rng_pick(g, block_dims, sizeof block_dims / sizeof block_dims[0]);
}

/*
 * A random quantized row of n values, magnitudes up to about mag: block
 * scales are random binary16 values (subnormal ones included), quants cover
 * their whole range (Q8_0's -128 too); FP8 bytes are random codes of
 * magnitude <= mag (never NaN).
 */
static void random_row(rng *g, int dt, unsigned char *row, size_t n, double mag)
{
    if (is_fp8(dt)) {
        for (size_t t = 0; t < n; t++) {
            uint8_t x;
            do
                x = (uint8_t)rng_int(g, 0, 255);
            while (!isfinite(fp8_value(dt, x)) || fabs(fp8_value(dt, x)) > mag);
            row[t] = x;
        }
        return;
    }
    const size_t ub = ref_quant_unit_bytes(dt);
    for (size_t b = 0; b < n / 32; b++) {
        unsigned char *blk = row + b * ub;
        const double top = dt == ATTN_KV_Q8_0 ? 128.0 : 8.0;
        float d = (float)(mag / top) * rng_float(g, 0.0f, 1.0f);
        if (rng_int(g, 0, 15) == 0)
            d = 0x1p-20f * (float)rng_int(g, 0, 15); /* a subnormal or zero f16 scale */
        const uint16_t h = ref_f32_to_f16(rng_int(g, 0, 1) ? d : -d);
        blk[0] = (unsigned char)(h & 0xff);
        blk[1] = (unsigned char)(h >> 8);
        for (size_t j = 2; j < ub; j++)
            blk[j] = (unsigned char)rng_int(g, 0, 255);
    }
}

/* Stride units per row of n values (an ASYM row: records of `group`
   values, 0 the row, each with its 8-byte header). */
static size_t units_of_g(int dt, size_t n, size_t group)
{
    const size_t units = n / (size_t)ref_dtype_block(dt);
    return is_asym(dt) ? units + n / (group ? group : n) * 8 : units;
}

static size_t units_of(int dt, size_t n)
{
    return units_of_g(dt, n, 0);
}

/* A random ASYM row: per record a positive scale and a zero point in
   [0, top] (so |value| <= about mag), now and then OpenVINO's 0.0001 scale
   of a constant record, and any codes. */
static void random_asym_row(rng *g, int dt, unsigned char *row, size_t n, size_t group,
                            double mag)
{
    const int u8 = dt == ATTN_DTYPE_U8_ASYM;
    const float top = u8 ? 255.0f : 15.0f;
    const size_t gr = group ? group : n, rec = 8 + (u8 ? gr : gr / 2);
    for (size_t c = 0; c < n / gr; c++, row += rec) {
        float sc = (float)(mag / top) * rng_float(g, 0.01f, 1.0f);
        if (rng_int(g, 0, 15) == 0)
            sc = 0.0001f;
        const float zp = rng_float(g, 0.0f, top);
        memcpy(row, &sc, 4);
        memcpy(row + 4, &zp, 4);
        for (size_t j = 8; j < rec; j++)
            row[j] = (unsigned char)rng_int(g, 0, 255);
    }
}

/* Random rows of `units` used units each at a stride (units); decoded values
   into dec[row * n + t] (n values per row). mag: the largest |value| wanted.
   group: an ASYM row's records (0: one). */
static void fill_rows_g(rng *g, int dt, unsigned char *base, size_t rows, size_t stride_units,
                        size_t n, size_t group, double mag, double *dec)
{
    const size_t ub = ref_quant_unit_bytes(dt);
    for (size_t r = 0; r < rows; r++) {
        unsigned char *row = base + r * stride_units * ub;
        if (is_asym(dt))
            random_asym_row(g, dt, row, n, group, mag);
        else
            random_row(g, dt, row, n, mag);
        for (size_t t = 0; t < n; t++)
            dec[r * n + t] = ref_quant_value_g(dt, row, t, group);
    }
}

static void fill_rows(rng *g, int dt, unsigned char *base, size_t rows, size_t stride_units,
                      size_t n, double mag, double *dec)
{
    fill_rows_g(g, dt, base, rows, stride_units, n, 0, mag, dec);
}

/* ------------------------------------------------------------ qk_tile */

static void run_qk(const attn_dsp *t, int dt, size_t nq, size_t nk, size_t d, int offset,
                   int nan_case)
{
    rng *g = harness_rng();
    const size_t ub = ref_quant_unit_bytes(dt);
    const size_t qs = d + (size_t)rng_int(g, 0, 3);
    const size_t ks = units_of(dt, d) + (size_t)rng_int(g, 0, 2); /* stride units */
    const size_t ss = nk + (size_t)rng_int(g, 0, 3);
    const float scale = rng_float(g, 0.05f, 1.0f) * (rng_int(g, 0, 3) ? 1.0f : -1.0f);
    harness_context("qk_tile[%s] nq=%zu nk=%zu d=%zu k_stride=%zu units offset=%d nan=%d",
                    qname(dt), nq, nk, d, ks, offset, nan_case);

    buf bq, bk, bs;
    float *q = buf_alloc(&bq, nq * qs * 4, offset ? 4 : 0);
    /* an odd byte offset leaves the block scales and int8 runs unaligned */
    unsigned char *k = buf_alloc(&bk, nk * ks * ub, offset ? 1 : 0);
    float *s = buf_alloc(&bs, nq * ss * 4, offset ? 4 : 0);
    double *qd = xmalloc(nq * d * sizeof(double)), *kd = xmalloc(nk * d * sizeof(double));
    for (size_t r = 0; r < nq; r++)
        for (size_t i = 0; i < d; i++)
            qd[r * d + i] = q[r * qs + i] = rng_float(g, -2.0f, 2.0f);
    fill_rows(g, dt, k, nk, ks, d, 4.0, kd);
    size_t nan_col = nk;
    if (nan_case) { /* a NaN decoded value (NaN byte or NaN block scale) in one key */
        nan_col = (size_t)rng_int(g, 0, (int64_t)nk - 1);
        const size_t i = (size_t)rng_int(g, 0, (int64_t)d - 1);
        ref_quant_poison(dt, k + nan_col * ks * ub, i);
        for (size_t x = 0; x < d; x++)
            kd[nan_col * d + x] = ref_quant_value(dt, k + nan_col * ks * ub, x);
    }
    for (size_t r = 0; r < nq; r++)
        for (size_t c = nk; c < ss; c++)
            s[r * ss + c] = 12345.0f; /* row gaps must stay */

    t->qk_tile[dt](q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s, (ptrdiff_t)ss);
    buf_check(&bs, "s");
    buf_check(&bk, "k");

    double *want = xmalloc(nq * nk * sizeof(double)), *bound = xmalloc(nq * nk * sizeof(double));
    for (size_t r = 0; r < nq; r++)
        for (size_t c = 0; c < nk; c++) {
            double dot = 0.0, mag = 0.0;
            for (size_t i = 0; i < d; i++) {
                dot += qd[r * d + i] * kd[c * d + i];
                mag += fabs(qd[r * d + i] * kd[c * d + i]);
            }
            want[r * nk + c] = dot * scale;
            /* the f32 qk_tile bound of tolerance.h, unchanged */
            bound[r * nk + c] = tol_gamma((double)d + 1.0) * fabs((double)scale) * mag;
        }
    expect_near("qk_tile vs float64", s, (ptrdiff_t)ss, want, bound, nq, nk);
    for (size_t r = 0; r < nq; r++)
        for (size_t c = nk; c < ss; c++)
            CHECK(s[r * ss + c] == 12345.0f, "wrote into the row gap at [%zu][%zu]", r, c);
    if (nan_case)
        for (size_t r = 0; r < nq; r++)
            for (size_t c = 0; c < nk; c++)
                CHECK(!!isnan(s[r * ss + c]) == (c == nan_col), "NaN at [%zu][%zu] (NaN key %zu)",
                      r, c, nan_col);
    free(want);
    free(bound);
    free(qd);
    free(kd);
    buf_free(&bq);
    buf_free(&bk);
    buf_free(&bs);
}

/* Row counts on both sides of the kernels' decode/scratch switch (8). */
static const int64_t row_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 64};
static const int64_t key_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 130};

HARNESS_ISA_PARAMS(quant_kernels, qk_tile)
ParameterizedTest(isa_row *row, quant_kernels, qk_tile, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int i = 0; i < n_tile_dts(); i++)
        for (int rep = 0; rep < 40; rep++) {
            const int dt = tile_dt(i);
            const size_t nq = (size_t)rng_pick(g, row_counts, 12);
            const size_t nk = (size_t)rng_pick(g, key_counts, 16);
            run_qk(t, dt, nq, nk, pick_dim(g, dt), rep & 1, 0);
        }
}

HARNESS_ISA_PARAMS(quant_kernels, qk_tile_nan)
ParameterizedTest(isa_row *row, quant_kernels, qk_tile_nan)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int i = 0; i < n_tile_dts(); i++)
        for (int rep = 0; rep < 10; rep++) {
            const int dt = tile_dt(i);
            run_qk(t, dt, (size_t)rng_pick(g, row_counts, 12), (size_t)rng_pick(g, key_counts, 16),
                   pick_dim(g, dt), rep & 1, 1);
        }
}

/* ------------------------------------------------------------ pv_tile */

static void run_pv(const attn_dsp *t, int dt, size_t nq, size_t nk, size_t dv, int offset,
                   int nan_case)
{
    rng *g = harness_rng();
    const size_t ub = ref_quant_unit_bytes(dt);
    const size_t ps = nk + (size_t)rng_int(g, 0, 3);
    const size_t vs = units_of(dt, dv) + (size_t)rng_int(g, 0, 2);
    const size_t as = dv + (size_t)rng_int(g, 0, 3);
    harness_context("pv_tile[%s] nq=%zu nk=%zu dv=%zu v_stride=%zu units offset=%d nan=%d",
                    qname(dt), nq, nk, dv, vs, offset, nan_case);

    buf bp, bv, ba;
    float *p = buf_alloc(&bp, nq * ps * 4, offset ? 4 : 0);
    unsigned char *v = buf_alloc(&bv, nk * vs * ub, offset ? 1 : 0);
    float *acc = buf_alloc(&ba, nq * as * 4, offset ? 4 : 0);
    double *vd = xmalloc(nk * dv * sizeof(double));
    double *want = xmalloc(nq * dv * sizeof(double)), *bound = xmalloc(nq * dv * sizeof(double));
    for (size_t r = 0; r < nq; r++)
        for (size_t c = 0; c < nk; c++)
            p[r * ps + c] = rng_float(g, 0.0f, 1.0f);
    fill_rows(g, dt, v, nk, vs, dv, 4.0, vd);
    size_t nan_key = nk, nan_at = dv;
    if (nan_case) { /* a NaN decoded value (NaN byte or NaN block scale) in one row */
        nan_key = (size_t)rng_int(g, 0, (int64_t)nk - 1);
        nan_at = (size_t)rng_int(g, 0, (int64_t)dv - 1);
        ref_quant_poison(dt, v + nan_key * vs * ub, nan_at);
        for (size_t x = 0; x < dv; x++)
            vd[nan_key * dv + x] = ref_quant_value(dt, v + nan_key * vs * ub, x);
    }
    for (size_t r = 0; r < nq; r++) {
        for (size_t j = 0; j < dv; j++)
            acc[r * as + j] = rng_float(g, -1.0f, 1.0f);
        for (size_t j = dv; j < as; j++)
            acc[r * as + j] = 12345.0f;
    }
    for (size_t r = 0; r < nq; r++)
        for (size_t j = 0; j < dv; j++) {
            double sum = acc[r * as + j], mag = fabs(sum);
            for (size_t c = 0; c < nk; c++) {
                sum += (double)p[r * ps + c] * vd[c * dv + j];
                mag += fabs((double)p[r * ps + c] * vd[c * dv + j]);
            }
            want[r * dv + j] = sum;
            bound[r * dv + j] = tol_gamma((double)nk + 1.0) * mag; /* f32 pv_tile bound */
        }

    t->pv_tile[dt](p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc, (ptrdiff_t)as);
    buf_check(&ba, "acc");
    buf_check(&bv, "v");
    expect_near("pv_tile vs float64", acc, (ptrdiff_t)as, want, bound, nq, dv);
    for (size_t r = 0; r < nq; r++)
        for (size_t j = dv; j < as; j++)
            CHECK(acc[r * as + j] == 12345.0f, "wrote into the row gap at [%zu][%zu]", r, j);
    if (nan_case) /* the poisoned row's NaN columns, times any weight (0 too), and no other */
        for (size_t r = 0; r < nq; r++)
            for (size_t j = 0; j < dv; j++)
                CHECK(!!isnan(acc[r * as + j]) == !!isnan(vd[nan_key * dv + j]),
                      "NaN at [%zu][%zu] (NaN value at key %zu, column %zu)", r, j, nan_key,
                      nan_at);
    free(vd);
    free(want);
    free(bound);
    buf_free(&bp);
    buf_free(&bv);
    buf_free(&ba);
}

HARNESS_ISA_PARAMS(quant_kernels, pv_tile)
ParameterizedTest(isa_row *row, quant_kernels, pv_tile, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int i = 0; i < n_tile_dts(); i++)
        for (int rep = 0; rep < 40; rep++) {
            const int dt = tile_dt(i);
            run_pv(t, dt, (size_t)rng_pick(g, row_counts, 12), (size_t)rng_pick(g, key_counts, 16),
                   pick_dim(g, dt), rep & 1, 0);
        }
}

/* One NaN value in V: E4M3 tiles are decoded without the per-value NaN
   check and again with it when their bytes hold a NaN (tile_variants.h). */
HARNESS_ISA_PARAMS(quant_kernels, pv_tile_nan)
ParameterizedTest(isa_row *row, quant_kernels, pv_tile_nan)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int i = 0; i < n_tile_dts(); i++)
        for (int rep = 0; rep < 10; rep++) {
            const int dt = tile_dt(i);
            run_pv(t, dt, (size_t)rng_pick(g, row_counts, 12), (size_t)rng_pick(g, key_counts, 16),
                   pick_dim(g, dt), rep & 1, 1);
        }
}

/* ------------------------------------------------------------ to_f32 and FP8 */

HARNESS_ISA_PARAMS(quant_kernels, to_f32)
ParameterizedTest(isa_row *row, quant_kernels, to_f32)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int i = 0; i < n_tile_dts(); i++)
        for (int rep = 0; rep < 30; rep++) {
            const int dt = tile_dt(i);
            const size_t n = pick_dim(g, dt);
            harness_context("to_f32[%s] n=%zu", qname(dt), n);
            buf bs, bd;
            unsigned char *src = buf_alloc(&bs, units_of(dt, n) * ref_quant_unit_bytes(dt), 1);
            float *dst = buf_alloc(&bd, n * 4, 0);
            double *dec = xmalloc(n * sizeof(double));
            fill_rows(g, dt, src, 1, units_of(dt, n), n, 100.0, dec);
            t->to_f32[dt](src, dst, n);
            buf_check(&bd, "dst");
            for (size_t x = 0; x < n; x++)
                CHECK((double)dst[x] == dec[x], "value %zu: got %.9g, want %.17g", x,
                      (double)dst[x], dec[x]);
            free(dec);
            buf_free(&bs);
            buf_free(&bd);
        }
}

/* Every byte of an FP8 dtype, in every position of a 16-lane vector, also
   with the FPU flushing subnormal inputs and results (the kernels must not
   form f32 subnormals from FP8 subnormals, nor let DAZ flush binary16 ones). */
static void check_all_fp8(const attn_dsp *t, int dt)
{
    unsigned char bytes[256 + 7];
    float out[256 + 7];
    for (int shift = 0; shift < 16; shift++) {
        /* shifts 8..15: the NaN bytes as zeros, a row the E4M3 decoders
           take without their per-value NaN check (tile_variants.h) */
        for (int i = 0; i < 256 + 7; i++) {
            bytes[i] = (unsigned char)(i - shift % 8);
            if (shift >= 8 && isnan(fp8_value(dt, bytes[i])))
                bytes[i] = 0;
        }
        t->to_f32[dt](bytes, out, 256 + 7);
        for (int i = 0; i < 256 + 7; i++) {
            const double want = fp8_value(dt, bytes[i]);
            if (isnan(want))
                CHECK(isnan(out[i]), "byte 0x%02x: got %.9g, want NaN", bytes[i], (double)out[i]);
            else
                CHECK((double)out[i] == want && !!signbit(out[i]) == !!signbit(want),
                      "byte 0x%02x: got %.9g, want %.17g", bytes[i], (double)out[i], want);
        }
    }
}

static void check_every_byte(const attn_dsp *t, int dt, const char *name)
{
    harness_context("every %s byte", name);
    check_all_fp8(t, dt);
#if defined(__x86_64__)
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u); /* FTZ | DAZ */
    harness_context("every %s byte, DAZ/FTZ on", name);
    check_all_fp8(t, dt);
    _mm_setcsr(csr);
#endif
}

HARNESS_ISA_PARAMS(quant_kernels, e4m3_every_byte)
ParameterizedTest(isa_row *row, quant_kernels, e4m3_every_byte)
{
    check_every_byte(harness_begin(row), ATTN_KV_FP8_E4M3, "E4M3");
}

HARNESS_ISA_PARAMS(quant_kernels, e5m2_every_byte)
ParameterizedTest(isa_row *row, quant_kernels, e5m2_every_byte)
{
    check_every_byte(harness_begin(row), ATTN_KV_FP8_E5M2, "E5M2");
}

/* Rows ending at (or starting right after) an inaccessible page. */
HARNESS_ISA_PARAMS(quant_kernels, tiles_page_fence)
ParameterizedTest(isa_row *row, quant_kernels, tiles_page_fence)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int i = 0; i < n_tile_dts(); i++)
        for (int at_start = 0; at_start < 2; at_start++)
            for (int rep = 0; rep < 6; rep++) {
                const int dt = tile_dt(i);
                const size_t d = pick_dim(g, dt), nk = (size_t)rng_pick(g, key_counts, 16);
                const size_t nq = (size_t)rng_pick(g, row_counts, 12);
                const size_t units = units_of(dt, d), ub = ref_quant_unit_bytes(dt);
                harness_context("fence[%s] d=%zu nq=%zu nk=%zu at_start=%d", qname(dt), d, nq, nk,
                                at_start);
                fence_buf fk;
                unsigned char *k = fence_alloc(&fk, nk * units * ub, at_start);
                double *kd = xmalloc(nk * d * sizeof(double));
                fill_rows(g, dt, k, nk, units, d, 1.0, kd);
                float *q = xcalloc0(nq * d, 4), *s = xcalloc0(nq * nk, 4);
                float *acc = xcalloc0(nq * d, 4), *p = xcalloc0(nq * nk, 4), *row1 = xmalloc(d * 4);
                t->qk_tile[dt](q, (ptrdiff_t)d, k, (ptrdiff_t)units, nq, nk, d, 1.0f, s,
                               (ptrdiff_t)nk);
                t->pv_tile[dt](p, (ptrdiff_t)nk, k, (ptrdiff_t)units, nq, nk, d, acc, (ptrdiff_t)d);
                t->to_f32[dt](at_start ? k : k + (nk - 1) * units * ub, row1, d);
                free(q);
                free(s);
                free(acc);
                free(p);
                free(row1);
                free(kd);
                fence_free(&fk);
            }
}

/* ------------------------------------------------------------ operations */

typedef struct qproblem {
    attn_shape shape;
    attn_options opt;
    int kdt, vdt; /* ATTN_KV_* (= attn_dtype) */
    attn_tensor q, k, v, out, scores;
    attn_tensor kf, vf; /* decoded F32 copies for the reference (FP8: unscaled) */
    attn_tensor ks, vs; /* FP8 scales per row (attn.h 1.6), when drawn */
    buf qb, kb, vb, ob, sb, ksb, vsb;
    float *kfd, *vfd;
    float lse[4096], mx[4096], ent[4096];
    int32_t kv_lens[4];
} qproblem;

static void layout(attn_tensor *t, int blhd, int64_t heads, int64_t len, int64_t units,
                   int64_t pad)
{
    if (blhd) {
        t->row_stride = heads * units + pad;
        t->head_stride = units;
        t->batch_stride = len * t->row_stride;
    } else {
        t->row_stride = units + pad;
        t->head_stride = len * t->row_stride;
        t->batch_stride = heads * t->head_stride;
    }
}

static size_t span_units(const attn_tensor *t, const attn_shape *s, int64_t heads, int64_t len,
                         int64_t units)
{
    (void)s;
    return (size_t)((heads - 1) * t->head_stride + (len - 1) * t->row_stride + units) +
           (size_t)((s->batch - 1) * t->batch_stride);
}

/* A random problem with quantized k and v (random raw blocks/bytes). */
static void make_qproblem(qproblem *P, rng *g, int kdt, int vdt, int decode)
{
    memset(P, 0, sizeof *P);
    attn_shape *s = &P->shape;
    static const int64_t kv_heads[] = {1, 2};
    static const int64_t groups[] = {1, 2, 4};
    s->batch = rng_int(g, 1, 2);
    s->kv_heads = rng_pick(g, kv_heads, 2);
    s->q_heads = s->kv_heads * rng_pick(g, groups, 3);
    s->kv_len = rng_int(g, 1, 300);
    s->q_len = decode ? 1 : rng_int(g, 1, 80);
    s->head_dim = 32 * rng_int(g, 1, 4);
    /* one-byte formats take any row length */
    if ((is_fp8(kdt) || kdt == ATTN_DTYPE_U8_ASYM) && rng_int(g, 0, 1))
        s->head_dim = rng_int(g, 1, 130);
    s->v_dim = is_fp8(vdt) || (vdt == ATTN_DTYPE_U8_ASYM && rng_int(g, 0, 1))
                   ? rng_int(g, 1, 130)
                   : 32 * rng_int(g, 1, 4);
    P->kdt = kdt;
    P->vdt = vdt;
    P->opt = (attn_options)ATTN_OPTIONS_INIT;
    P->opt.scale = rng_float(g, 0.02f, 0.2f);
    if (rng_int(g, 0, 1))
        P->opt.flags |= ATTN_CAUSAL;
    if (rng_int(g, 0, 3) == 0)
        P->opt.window = rng_int(g, 1, 64);
    if (rng_int(g, 0, 3) == 0) {
        for (int64_t b = 0; b < s->batch; b++)
            P->kv_lens[b] = (int32_t)rng_int(g, 0, s->kv_len);
        P->opt.kv_lens = P->kv_lens;
    }
    const int blhd = (int)rng_int(g, 0, 1);
    const int64_t pad = rng_int(g, 0, 2);
    /* FP8: one scale per call, or per row (1.6) in the cache's own order,
       per token and head, per head (row and batch strides 0) or per token
       (head stride 0); never a power of two */
    const int dtsc[2] = {kdt, vdt};
    attn_tensor *view[2] = {&P->ks, &P->vs};
    buf *vbuf[2] = {&P->ksb, &P->vsb};
    float *per_call[2] = {&P->opt.k_scale, &P->opt.v_scale};
    for (int x = 0; x < 2; x++) {
        if (!is_fp8(dtsc[x]))
            continue;
        if (rng_int(g, 0, 1)) {
            *per_call[x] = rng_float(g, 0.001f, 0.05f);
            continue;
        }
        attn_tensor *t = view[x];
        layout(t, blhd, s->kv_heads, s->kv_len, 1, 0);
        t->dtype = ATTN_DTYPE_F32;
        const int kind = (int)rng_int(g, 0, 2);
        if (kind == 1)
            t->batch_stride = t->row_stride = 0;
        else if (kind == 2)
            t->head_stride = 0;
        const size_t n = span_units(t, s, s->kv_heads, s->kv_len, 1);
        float *sc = buf_alloc(vbuf[x], n * 4, 0);
        for (size_t i = 0; i < n; i++)
            sc[i] = rng_float(g, 0.001f, 0.05f);
        t->data = sc;
        if (x == 0)
            P->opt.k_scales = t;
        else
            P->opt.v_scales = t;
    }
    P->q.dtype = ATTN_DTYPE_F32;
    layout(&P->q, blhd, s->q_heads, s->q_len, s->head_dim, pad);
    const size_t qn = span_units(&P->q, s, s->q_heads, s->q_len, s->head_dim);
    float *q = buf_alloc(&P->qb, qn * 4, 0);
    for (size_t i = 0; i < qn; i++)
        q[i] = rng_float(g, -1.0f, 1.0f);
    P->q.data = q;

    const int dts[2] = {kdt, vdt};
    const int64_t cols[2] = {s->head_dim, s->v_dim};
    attn_tensor *qt[2] = {&P->k, &P->v}, *ft[2] = {&P->kf, &P->vf};
    buf *bufs[2] = {&P->kb, &P->vb};
    float **dense[2] = {&P->kfd, &P->vfd};
    /* an ASYM cache's records: the whole row (OpenVINO's default) or groups */
    static const int64_t asym_groups[] = {0, 0, 8, 16, 32};
    int64_t *grp[2] = {&P->opt.k_scale_group, &P->opt.v_scale_group};
    for (int x = 0; x < 2; x++)
        if (is_asym(dts[x])) {
            *grp[x] = rng_pick(g, asym_groups, 5);
            if (cols[x] % (*grp[x] ? *grp[x] : 1))
                *grp[x] = 0;
        }
    for (int x = 0; x < 2; x++) {
        const int64_t units = (int64_t)units_of_g(dts[x], (size_t)cols[x], (size_t)*grp[x]);
        qt[x]->dtype = dts[x];
        layout(qt[x], blhd, s->kv_heads, s->kv_len, units, pad);
        const size_t n = span_units(qt[x], s, s->kv_heads, s->kv_len, units);
        unsigned char *data = buf_alloc(bufs[x], n * ref_quant_unit_bytes(dts[x]), 1);
        qt[x]->data = data;
        /* dense decoded copy [b][h][row][col] */
        const size_t rows = (size_t)(s->batch * s->kv_heads * s->kv_len);
        *dense[x] = xmalloc(rows * (size_t)cols[x] * 4);
        double *dec = xmalloc((size_t)cols[x] * sizeof(double));
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->kv_heads; h++)
                for (int64_t r = 0; r < s->kv_len; r++) {
                    unsigned char *rowp = data + (size_t)(b * qt[x]->batch_stride +
                                                          h * qt[x]->head_stride +
                                                          r * qt[x]->row_stride) *
                                                     ref_quant_unit_bytes(dts[x]);
                    /* magnitudes ~1 for the block formats; FP8 spans its range */
                    fill_rows_g(g, dts[x], rowp, 1, (size_t)units, (size_t)cols[x],
                                (size_t)*grp[x], is_fp8(dts[x]) ? 448.0 : 2.0, dec);
                    const size_t at = (size_t)(((b * s->kv_heads + h) * s->kv_len + r) * cols[x]);
                    for (int64_t c = 0; c < cols[x]; c++)
                        (*dense[x])[at + (size_t)c] = (float)dec[c]; /* exact */
                }
        free(dec);
        *ft[x] = (attn_tensor){*dense[x], ATTN_DTYPE_F32, s->kv_heads * s->kv_len * cols[x],
                               s->kv_len * cols[x], cols[x]};
    }

    const size_t rows = (size_t)(s->batch * s->q_heads * s->q_len);
    float *out = buf_alloc(&P->ob, rows * (size_t)s->v_dim * 4, 0);
    float *sc = buf_alloc(&P->sb, rows * (size_t)s->kv_len * 4, 0);
    P->out = (attn_tensor){out, ATTN_DTYPE_F32, s->q_heads * s->q_len * s->v_dim,
                           s->q_len * s->v_dim, s->v_dim};
    P->scores = (attn_tensor){sc, ATTN_DTYPE_F32, s->q_heads * s->q_len * s->kv_len,
                              s->q_len * s->kv_len, s->kv_len};
}

static void free_qproblem(qproblem *P)
{
    buf_free(&P->qb);
    buf_free(&P->kb);
    buf_free(&P->vb);
    buf_free(&P->ob);
    buf_free(&P->sb);
    buf_free(&P->ksb);
    buf_free(&P->vsb);
    free(P->kfd);
    free(P->vfd);
}

/* The options the reference runs with on the decoded F32 tensors: the scale
   the library multiplies dot(q, e4m3) by is fl32(scale * k_scale) (attn.h);
   v_scale is applied to the reference output afterwards. */
static attn_options ref_options(const qproblem *P)
{
    attn_options o = P->opt;
    if (is_fp8(P->kdt) && P->opt.k_scale != 0.0f)
        o.scale = P->opt.scale * P->opt.k_scale;
    o.k_scale = o.v_scale = 0.0f;
    /* per-row scales (1.6) stay: the reference applies them (tests/ref/ref.c) */
    return o;
}

/* The float64 reference of op on P: scores and weights share one (no V,
   no rescale), the forward has its own. */
static void qproblem_ref(const attn_dsp *t, const qproblem *P, int op, ref_attn *r)
{
    const attn_shape *s = &P->shape;
    const attn_options ro = ref_options(P);
    const attn_dsp *sc = harness_scalar();
    const uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
    ref_attn_compute_as(r, s, &ro, &P->q, &P->kf, op == 2 ? &P->vf : NULL,
                        op == 2 ? (s->kv_len + bk - 1) / bk + 1 : 0, P->kdt, P->vdt);
}

/* Runs op on P and checks it against r, its qproblem_ref (the forward
   scales r's output in place). */
static void check_qproblem(const attn_dsp *t, qproblem *P, int op, ref_attn *rp)
{
    static const char *const ops[] = {"scores", "weights", "forward"};
    const attn_shape *s = &P->shape;
    harness_context("%s precision=%lld k=%s v=%s B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld "
                    "d=%lld dv=%lld causal=%u window=%lld lens=%d k_scale=%g v_scale=%g "
                    "k_scales=%d v_scales=%d groups=%lld,%lld",
                    ops[op], (long long)P->opt.precision, qname(P->kdt), qname(P->vdt), (long long)s->batch,
                    (long long)s->q_heads, (long long)s->kv_heads, (long long)s->q_len,
                    (long long)s->kv_len, (long long)s->head_dim, (long long)s->v_dim,
                    P->opt.flags, (long long)P->opt.window, P->opt.kv_lens != NULL,
                    (double)P->opt.k_scale, (double)P->opt.v_scale, P->opt.k_scales != NULL,
                    P->opt.v_scales != NULL, (long long)P->opt.k_scale_group,
                    (long long)P->opt.v_scale_group);
    const ref_attn r = *rp; /* shares rp's arrays */
    const size_t rows = (size_t)(s->batch * s->q_heads * s->q_len);
    attn_row_stats st = {P->lse, P->mx, P->ent};
    attn_status status;
    if (op == 0)
        status = attn_scores_with(t, s, &P->opt, &P->q, &P->k, &P->scores);
    else if (op == 1)
        status = attn_weights_with(t, s, &P->opt, &P->q, &P->k, &P->scores, &st);
    else
        status = attn_forward_with(t, s, &P->opt, &P->q, &P->k, &P->v, &P->out, &st);
    CHECK(status == ATTN_OK, "status %d (%s)", status, attn_strerror(status));
    if (op == 0) {
        expect_near("scores vs float64", P->scores.data, s->kv_len, r.s, r.s_err, rows,
                    (size_t)s->kv_len);
    } else if (op == 1) {
        expect_near("weights vs float64", P->scores.data, s->kv_len, r.p, r.p_err, rows,
                    (size_t)s->kv_len);
    } else {
        const int per_call = is_fp8(P->vdt) && P->opt.v_scale != 0.0f;
        const double vs = per_call ? (double)P->opt.v_scale : 1.0;
        for (size_t i = 0; i < rows * (size_t)s->v_dim; i++) {
            r.o[i] *= vs; /* v_scale is linear; this double rounding (2^-53) is far below the bound */
            r.o_err[i] *= vs;
            if (per_call) /* the extra rounding of the v_scale multiply */
                r.o_err[i] += TOL_VSCALE_REL * TOL_U * fabs(r.o[i]) + TOL_VSCALE_ABS;
        }
        expect_near("out vs float64", P->out.data, s->v_dim, r.o, r.o_err, rows,
                    (size_t)s->v_dim);
    }
    if (op > 0) {
        expect_near("lse vs float64", P->lse, (ptrdiff_t)rows, r.lse, r.lse_err, 1, rows);
        expect_near("max_score vs float64", P->mx, (ptrdiff_t)rows, r.max, r.max_err, 1, rows);
        expect_near("entropy vs float64", P->ent, (ptrdiff_t)rows, r.ent, r.ent_err, 1, rows);
    }
    buf_check(&P->ob, "out");
    buf_check(&P->sb, "scores");
}

static void run_ops(const isa_row *row, int decode)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int ki = 0; ki < n_quant_dts(); ki++)
        for (int vi = 0; vi < n_quant_dts(); vi++)
            for (int rep = 0; rep < 3; rep++) {
                const int kdt = quant_dt(ki), vdt = quant_dt((vi + rep) % n_quant_dts());
                /* the ASYM pairs take one precision mode each, in turn: they
                   share the staged path, and every pair of the older kinds
                   takes all three (CI's time, the emulated rows above all) */
                if ((is_asym(kdt) || is_asym(vdt)) && (ki + vi + rep) % 3)
                    continue;
                qproblem *P = xmalloc(sizeof *P);
                make_qproblem(P, g, kdt, vdt, decode);
                /* each precision mode once (attn.h): int8 rounds Q8_0 and
                   Q4_0 scores; bf16 reads quantized caches exactly */
                P->opt.precision = rep;
                if ((size_t)(P->shape.batch * P->shape.q_heads * P->shape.q_len) <= 4096) {
                    ref_attn r;
                    qproblem_ref(t, P, 0, &r);
                    check_qproblem(t, P, 0, &r);
                    check_qproblem(t, P, 1, &r);
                    ref_attn_free(&r);
                    qproblem_ref(t, P, 2, &r);
                    check_qproblem(t, P, 2, &r);
                    ref_attn_free(&r);
                }
                free_qproblem(P);
                free(P);
            }
}

HARNESS_ISA_PARAMS(quant, ops)
ParameterizedTest(isa_row *row, quant, ops, .timeout = ATTN_TEST_TIMEOUT)
{
    run_ops(row, 0);
}

HARNESS_ISA_PARAMS(quant, ops_decode)
ParameterizedTest(isa_row *row, quant, ops_decode, .timeout = ATTN_TEST_TIMEOUT)
{
    run_ops(row, 1);
}

/* n distinct pool blocks of nb, in random order: a block table */
static void shuffled_table(rng *g, int32_t *table, int n, int nb)
{
    int32_t perm[64];
    for (int i = 0; i < nb; i++)
        perm[i] = i;
    for (int i = nb - 1; i > 0; i--) {
        const int j = (int)rng_int(g, 0, i);
        const int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    memcpy(table, perm, (size_t)n * sizeof *table);
}

/*
 * A paged pool (attn.h, "Paged K/V") of quantized rows: K Q8_0 or Q4_0, V
 * FP8 with a v_scale, pool [num_blocks][block_size][kv_heads][row], strides
 * in stride units (blocks for K), a shuffled block table; the result must
 * be within the F32 bounds of the float64 reference on the dense decoded
 * tensors gathered through the table.
 */
HARNESS_ISA_PARAMS(quant, paged_cache)
ParameterizedTest(isa_row *row, quant, paged_cache, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    enum { B = 2, HQ = 4, HKV = 2, LQ = 3, LK = 70, D = 64, DV = 40, BS = 16, NB = 12 };
    const int pages = (LK + BS - 1) / BS;
    for (int rep = 0; rep < 4; rep++) {
        const int kdt = rep & 1 ? ATTN_KV_Q4_0 : ATTN_KV_Q8_0;
        harness_context("paged pool: k %s, v fp8, rep %d", qname(kdt), rep);
        int32_t table[B * 5];
        shuffled_table(g, table, B * pages, NB);
        const int64_t ku = D / 32, vu = DV; /* stride units per row */
        const size_t kub = ref_quant_unit_bytes(kdt);
        buf kb, vb;
        unsigned char *kp = buf_alloc(&kb, (size_t)(NB * BS * HKV * ku) * kub, 1);
        unsigned char *vp = buf_alloc(&vb, (size_t)(NB * BS * HKV * vu), 0);
        double dec[DV > D ? DV : D];
        for (int r = 0; r < NB * BS * HKV; r++) {
            random_row(g, kdt, kp + (size_t)(r * ku) * kub, D, 2.0);
            random_row(g, ATTN_KV_FP8_E4M3, vp + (size_t)(r * vu), DV, 448.0);
        }
        const attn_tensor tk = {kp, kdt, BS * HKV * ku, ku, HKV * ku};
        const attn_tensor tv = {vp, ATTN_KV_FP8_E4M3, BS * HKV * vu, vu, HKV * vu};
        float *kf = xmalloc((size_t)(B * HKV * LK * D) * 4), *vf = xmalloc((size_t)(B * HKV * LK * DV) * 4);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < HKV; h++)
                for (int j = 0; j < LK; j++) {
                    const int64_t blk = table[b * pages + j / BS], slot = j % BS;
                    const size_t at = (size_t)((blk * BS + slot) * HKV + h);
                    for (int c = 0; c < D; c++)
                        dec[c] = ref_quant_value(kdt, kp + at * (size_t)ku * kub, (size_t)c);
                    for (int c = 0; c < D; c++)
                        kf[((b * HKV + h) * LK + j) * D + c] = (float)dec[c];
                    for (int c = 0; c < DV; c++)
                        vf[((b * HKV + h) * LK + j) * DV + c] =
                            (float)ref_quant_value(ATTN_KV_FP8_E4M3, vp + at * (size_t)vu, (size_t)c);
                }
        float q[B * HQ * LQ * D], out[B * HQ * LQ * DV];
        rng_fill(g, q, B * HQ * LQ * D, -1.0f, 1.0f);
        const attn_shape s = {B, HQ, HKV, LQ, LK, D, DV};
        const attn_tensor tq = {q, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
        const attn_tensor to = {out, ATTN_DTYPE_F32, HQ * LQ * DV, LQ * DV, DV};
        int32_t kv_lens[B] = {LK, (int32_t)rng_int(g, 1, LK)};
        attn_options o = ATTN_OPTIONS_INIT;
        o.scale = 0.1f;
        o.flags = rep & 2 ? ATTN_CAUSAL : 0u;
        o.kv_lens = kv_lens;
        o.block_table = table;
        o.block_table_stride = pages;
        o.block_size = BS;
        o.num_blocks = NB;
        o.v_scale = 0.01f;
        attn_status st = attn_forward_with(t, &s, &o, &tq, &tk, &tv, &to, NULL);
        CHECK(st == ATTN_OK, "status %d", st);
        attn_options ro = ATTN_OPTIONS_INIT;
        ro.scale = o.scale;
        ro.flags = o.flags;
        ro.kv_lens = kv_lens;
        const attn_tensor tkf = {kf, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
        const attn_tensor tvf = {vf, ATTN_DTYPE_F32, HKV * LK * DV, LK * DV, DV};
        const attn_dsp *sc = harness_scalar();
        const uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
        ref_attn r;
        /* a paged walk may split a key block into runs: no extra rescale
           (the online softmax rescales per key block, not per run) */
        ref_attn_compute(&r, &s, &ro, &tq, &tkf, &tvf, (LK + bk - 1) / bk + 1);
        for (int i = 0; i < B * HQ * LQ * DV; i++) { /* v_scale: tolerance.h */
            r.o[i] *= 0.01f;
            r.o_err[i] = r.o_err[i] * 0.01f + TOL_VSCALE_REL * TOL_U * fabs(r.o[i]) +
                         TOL_VSCALE_ABS;
        }
        expect_near("paged out vs float64", out, DV, r.o, r.o_err, B * HQ * LQ, DV);
        ref_attn_free(&r);
        free(kf);
        free(vf);
        buf_free(&kb);
        buf_free(&vb);
    }
}

/*
 * ASYM caches (U8_ASYM / U4_ASYM, attn.h) in a shuffled paged pool and
 * dense: K and V of either format with their own groups, GQA, causal or
 * not, kv_lens. The dense call must be within the F32 bounds of the float64
 * reference on the decoded values; the paged call, reading the same
 * records through the table, must give the dense call's bits (both decode
 * the same rows into the same stage); top-k lists and a shared prefix on
 * the dense cache are within the bounds of float64 on the same keys.
 */
HARNESS_ISA_PARAMS(quant, asym_layouts)
ParameterizedTest(isa_row *row, quant, asym_layouts, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    enum { B = 2, HQ = 4, HKV = 2, LQ = 3, LK = 70, D = 64, DV = 40, BS = 16, NB = 12 };
    const int pages = (LK + BS - 1) / BS;
    static const int64_t kgroups[] = {0, 16, 32}, vgroups[] = {0, 8, 20};
    for (int rep = 0; rep < 8; rep++) {
        const int kdt = rep & 1 ? ATTN_DTYPE_U4_ASYM : ATTN_DTYPE_U8_ASYM;
        const int vdt = rep & 2 ? ATTN_DTYPE_U4_ASYM : ATTN_DTYPE_U8_ASYM;
        const int64_t kg = rng_pick(g, kgroups, 3), vg = rng_pick(g, vgroups, 3);
        harness_context("asym layouts: k %s group %lld, v %s group %lld, rep %d", qname(kdt),
                        (long long)kg, qname(vdt), (long long)vg, rep);
        int32_t table[B * 5];
        shuffled_table(g, table, B * pages, NB);
        const int64_t ku = (int64_t)units_of_g(kdt, D, (size_t)kg),
                      vu = (int64_t)units_of_g(vdt, DV, (size_t)vg); /* bytes per row */
        buf kb, vb, dkb, dvb;
        unsigned char *kp = buf_alloc(&kb, (size_t)(NB * BS * HKV * ku), 1);
        unsigned char *vp = buf_alloc(&vb, (size_t)(NB * BS * HKV * vu), 0);
        unsigned char *dk = buf_alloc(&dkb, (size_t)(B * HKV * LK * ku), 0);
        unsigned char *dvp = buf_alloc(&dvb, (size_t)(B * HKV * LK * vu), 1);
        for (int r = 0; r < NB * BS * HKV; r++) {
            random_asym_row(g, kdt, kp + (size_t)(r * ku), D, (size_t)kg, 2.0);
            random_asym_row(g, vdt, vp + (size_t)(r * vu), DV, (size_t)vg, 2.0);
        }
        /* the dense copy [b][h][j] and the decoded values, gathered through the table */
        float *kf = xmalloc((size_t)(B * HKV * LK * D) * 4), *vf = xmalloc((size_t)(B * HKV * LK * DV) * 4);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < HKV; h++)
                for (int j = 0; j < LK; j++) {
                    const int64_t blk = table[b * pages + j / BS], slot = j % BS;
                    const size_t at = (size_t)((blk * BS + slot) * HKV + h), to = (size_t)((b * HKV + h) * LK + j);
                    memcpy(dk + to * (size_t)ku, kp + at * (size_t)ku, (size_t)ku);
                    memcpy(dvp + to * (size_t)vu, vp + at * (size_t)vu, (size_t)vu);
                    for (int c = 0; c < D; c++)
                        kf[to * D + (size_t)c] =
                            (float)ref_quant_value_g(kdt, kp + at * (size_t)ku, (size_t)c, (size_t)kg);
                    for (int c = 0; c < DV; c++)
                        vf[to * DV + (size_t)c] =
                            (float)ref_quant_value_g(vdt, vp + at * (size_t)vu, (size_t)c, (size_t)vg);
                }
        float q[B * HQ * LQ * D], out[B * HQ * LQ * DV], dense_out[B * HQ * LQ * DV];
        rng_fill(g, q, B * HQ * LQ * D, -1.0f, 1.0f);
        const attn_shape s = {B, HQ, HKV, LQ, LK, D, DV};
        const attn_tensor tq = {q, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
        const attn_tensor to = {out, ATTN_DTYPE_F32, HQ * LQ * DV, LQ * DV, DV};
        const attn_tensor tdo = {dense_out, ATTN_DTYPE_F32, HQ * LQ * DV, LQ * DV, DV};
        int32_t kv_lens[B] = {LK, (int32_t)rng_int(g, 1, LK)};
        attn_options o = ATTN_OPTIONS_INIT;
        o.scale = 0.1f;
        o.flags = rep & 4 ? ATTN_CAUSAL : 0u;
        o.kv_lens = kv_lens;
        o.k_scale_group = kg;
        o.v_scale_group = vg;
        const attn_tensor tdk = {dk, kdt, HKV * LK * ku, LK * ku, ku};
        const attn_tensor tdv = {dvp, vdt, HKV * LK * vu, LK * vu, vu};
        attn_status st = attn_forward_with(t, &s, &o, &tq, &tdk, &tdv, &tdo, NULL);
        CHECK(st == ATTN_OK, "dense: status %d (%s)", st, attn_last_error());
        attn_options ro = ATTN_OPTIONS_INIT;
        ro.scale = o.scale;
        ro.flags = o.flags;
        ro.kv_lens = kv_lens;
        const attn_tensor tkf = {kf, ATTN_DTYPE_F32, HKV * LK * D, LK * D, D};
        const attn_tensor tvf = {vf, ATTN_DTYPE_F32, HKV * LK * DV, LK * DV, DV};
        const attn_dsp *sc = harness_scalar();
        const uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
        ref_attn r;
        ref_attn_compute(&r, &s, &ro, &tq, &tkf, &tvf, (LK + bk - 1) / bk + 1);
        expect_near("dense asym out vs float64", dense_out, DV, r.o, r.o_err, B * HQ * LQ, DV);
        ref_attn_free(&r);
        /* the pool [num_blocks][block_size][kv_heads][row], strides in bytes */
        o.block_table = table;
        o.block_table_stride = pages;
        o.block_size = BS;
        o.num_blocks = NB;
        const attn_tensor tk = {kp, kdt, BS * HKV * ku, ku, HKV * ku};
        const attn_tensor tv = {vp, vdt, BS * HKV * vu, vu, HKV * vu};
        st = attn_forward_with(t, &s, &o, &tq, &tk, &tv, &to, NULL);
        CHECK(st == ATTN_OK, "paged: status %d (%s)", st, attn_last_error());
        expect_bits("paged asym out vs dense", out, dense_out, (size_t)(B * HQ * LQ * DV));
        o.block_table = NULL;
        o.block_table_stride = o.block_size = o.num_blocks = 0;

        /* top-k lists over the dense cache (the gathered rows are staged
           once for every query row): against float64 with the same lists */
        enum { TOPK = 24 };
        int32_t lists[B * LQ * TOPK];
        for (int b = 0; b < B; b++)
            for (int i = 0; i < LQ * TOPK; i++)
                lists[b * LQ * TOPK + i] = (int32_t)rng_int(g, -1, kv_lens[b] - 1);
        o.topk_indices = ro.topk_indices = lists;
        o.topk = ro.topk = TOPK;
        st = attn_forward_with(t, &s, &o, &tq, &tdk, &tdv, &to, NULL);
        CHECK(st == ATTN_OK, "top-k: status %d (%s)", st, attn_last_error());
        ref_attn_compute(&r, &s, &ro, &tq, &tkf, &tvf, (LK + bk - 1) / bk + 1);
        expect_near("top-k asym out vs float64", out, DV, r.o, r.o_err, B * HQ * LQ, DV);
        ref_attn_free(&r);
        o.topk_indices = ro.topk_indices = NULL;
        o.topk = ro.topk = 0;

        /* a shared prefix: sequence 1 reads its first P keys from sequence
           0's rows; the reference's sequence 1 holds copies of them */
        const int32_t P = (int32_t)rng_int(g, 1, kv_lens[1]), shared[B] = {0, P};
        o.shared_prefix = shared;
        for (int h = 0; h < HKV; h++)
            for (int j = 0; j < P; j++) {
                const size_t from = (size_t)(h * LK + j), to1 = (size_t)((HKV + h) * LK + j);
                memcpy(kf + to1 * D, kf + from * D, D * sizeof(float));
                memcpy(vf + to1 * DV, vf + from * DV, DV * sizeof(float));
            }
        st = attn_forward_with(t, &s, &o, &tq, &tdk, &tdv, &to, NULL);
        CHECK(st == ATTN_OK, "shared prefix: status %d (%s)", st, attn_last_error());
        /* the forward's R holds (tests/tolerance.h, "shared prefix") */
        ref_attn_compute(&r, &s, &ro, &tq, &tkf, &tvf, (LK + bk - 1) / bk + 1);
        expect_near("shared-prefix asym out vs float64", out, DV, r.o, r.o_err, B * HQ * LQ, DV);
        ref_attn_free(&r);
        free(kf);
        free(vf);
        buf_free(&kb);
        buf_free(&vb);
        buf_free(&dkb);
        buf_free(&dvb);
    }
}

/* SPDX-License-Identifier: MIT */
/*
 * Kernel-level tests: every role of attn_dsp, for every ISA row, against the
 * scalar table's kernel (and, for the scalar row, against float64), on tail
 * sweeps, odd strides, unaligned data, extreme ranges, -inf and NaN.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "half.h"
#include "harness.h"
#include "ref/ref.h"
#include "tolerance.h"

/* 200 and 255 end in a partial vector after three full ones even at SVE's
   largest vector length (64 floats), the deepest tail of its 4-vector pv
   blocks; the first 14 are the small dims drawn by the tail sweeps. */
static const int64_t head_dims[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                                    80, 96, 127, 128, 129, 200, 255, 256};
#define N_HEAD_DIMS (sizeof head_dims / sizeof head_dims[0])

typedef struct value_range {
    float lo, hi;
} value_range;
/* ordinary values; values where exp overflows unless the max is subtracted;
 * a wide spread reaching far into exp's underflow */
static const value_range ranges[] = {{-10.0f, 10.0f}, {90.0f, 100.0f}, {-150.0f, 190.0f}};
#define N_RANGES 3

/* Row lengths of the row-kernel sweeps: 1..129, then 255, 256, 257, 1000. */
static size_t sweep_len(int i)
{
    static const size_t extra[] = {255, 256, 257, 1000};
    return i < 129 ? (size_t)i + 1 : extra[i - 129];
}
#define N_SWEEP (129 + 4)

static const char *const dtype_names[] = {"f32", "f16", "bf16"};

/* Stores value v as element i of an array of dtype dt (rounding to it), and
 * returns the value actually stored. */
static double store_as(void *base, int dt, size_t i, float v)
{
    if (dt == ATTN_KV_F32) {
        ((float *)base)[i] = v;
        return v;
    }
    uint16_t h = dt == ATTN_KV_F16 ? ref_f32_to_f16(v) : ref_f32_to_bf16(v);
    ((uint16_t *)base)[i] = h;
    return dt == ATTN_KV_F16 ? ref_f16_to_double(h) : ref_bf16_to_double(h);
}

/* Element i of an array of dtype dt, exactly. */
static double load_as(const void *base, int dt, size_t i)
{
    if (dt == ATTN_KV_F32)
        return ((const float *)base)[i];
    const uint16_t h = ((const uint16_t *)base)[i];
    return dt == ATTN_KV_F16 ? ref_f16_to_double(h) : ref_bf16_to_double(h);
}

static size_t dt_size(int dt)
{
    return ref_dtype_size(dt);
}

/* NaN matches NaN, everything else bitwise. */
static void expect_same(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i]) && isnan(got[i]))
            continue;
        uint32_t g, w;
        memcpy(&g, &got[i], 4);
        memcpy(&w, &want[i], 4);
        CHECK(g == w, "%s: element %zu of %zu: got %.9g, want %.9g", what, i, n, (double)got[i],
              (double)want[i]);
    }
}

/* Canary pattern inside an output's row gaps, checked after the call. */
static void fill_gaps(float *s, size_t rows, size_t cols, size_t stride)
{
    const uint32_t canary = BUF_CANARY;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = cols; c < stride; c++)
            memcpy(&s[r * stride + c], &canary, 4);
}

static void check_gaps(const char *what, const float *s, size_t rows, size_t cols, size_t stride)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = cols; c < stride; c++) {
            uint32_t v;
            memcpy(&v, &s[r * stride + c], 4);
            CHECK(v == BUF_CANARY, "%s: wrote into the row gap at [%zu][%zu]", what, r, c);
        }
}

/* ------------------------------------------------------------ qk_tile */

static void run_qk(const attn_dsp *t, int dt, size_t nq, size_t nk, size_t d, value_range vr,
                   int offset, int nan_case)
{
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    const size_t qs = d + (size_t)rng_int(g, 0, 3), ks = d + (size_t)rng_int(g, 0, 3);
    const size_t ss = nk + (size_t)rng_int(g, 0, 3);
    const float scale = rng_float(g, 0.05f, 1.0f) * (rng_int(g, 0, 3) ? 1.0f : -1.0f);
    harness_context("qk_tile[%s] nq=%zu nk=%zu d=%zu range=[%g,%g] offset=%d nan=%d",
                    dtype_names[dt], nq, nk, d, (double)vr.lo, (double)vr.hi, offset, nan_case);

    buf bq, bk, bs, bs_ref;
    float *q = buf_alloc(&bq, nq * qs * 4, offset ? 4 : 0);
    void *k = buf_alloc(&bk, nk * ks * dt_size(dt), offset ? dt_size(dt) : 0);
    float *s = buf_alloc(&bs, nq * ss * 4, offset ? 4 : 0);
    float *s_ref = buf_alloc(&bs_ref, nq * ss * 4, 0);
    double *qd = xmalloc(nq * d * sizeof(double)), *kd = xmalloc(nk * d * sizeof(double));
    for (size_t r = 0; r < nq; r++)
        for (size_t i = 0; i < d; i++)
            qd[r * d + i] = q[r * qs + i] = rng_float(g, vr.lo, vr.hi);
    for (size_t c = 0; c < nk; c++)
        for (size_t i = 0; i < d; i++)
            kd[c * d + i] = store_as(k, dt, c * ks + i, rng_float(g, vr.lo, vr.hi));
    size_t nan_row = nq, nan_col = nk;
    if (nan_case == 1) { /* a NaN in one query row reaches only that row */
        nan_row = (size_t)rng_int(g, 0, (int64_t)nq - 1);
        size_t i = (size_t)rng_int(g, 0, (int64_t)d - 1);
        qd[nan_row * d + i] = q[nan_row * qs + i] = NAN;
    } else if (nan_case == 2) { /* a NaN in one key reaches only that column */
        nan_col = (size_t)rng_int(g, 0, (int64_t)nk - 1);
        size_t i = (size_t)rng_int(g, 0, (int64_t)d - 1);
        kd[nan_col * d + i] = store_as(k, dt, nan_col * ks + i, NAN);
    }
    fill_gaps(s, nq, nk, ss);

    t->qk_tile[dt](q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s, (ptrdiff_t)ss);
    buf_check(&bs, "s");
    check_gaps("s", s, nq, nk, ss);

    double *want = xmalloc(nq * nk * sizeof(double)), *bound = xmalloc(nq * nk * sizeof(double));
    for (size_t r = 0; r < nq; r++)
        for (size_t c = 0; c < nk; c++) {
            double dot = 0.0, mag = 0.0, folded = 0.0;
            for (size_t i = 0; i < d; i++) {
                dot += qd[r * d + i] * kd[c * d + i];
                mag += fabs(qd[r * d + i] * kd[c * d + i]);
                folded += fmax(fabs(qd[r * d + i]), fabs(kd[c * d + i]));
            }
            want[r * nk + c] = dot * scale;
            bound[r * nk + c] = tol_qk((double)d, fabs((double)scale), mag, folded);
        }
    if (harness_is_scalar(t)) {
        expect_near("qk_tile vs float64", s, (ptrdiff_t)ss, want, bound, nq, nk);
    } else {
        sc->qk_tile[dt](q, (ptrdiff_t)qs, k, (ptrdiff_t)ks, nq, nk, d, scale, s_ref,
                        (ptrdiff_t)ss);
        for (size_t i = 0; i < nq * nk; i++)
            bound[i] = TOL_PAIR(bound[i]);
        expect_near_f("qk_tile vs scalar", s, (ptrdiff_t)ss, s_ref, (ptrdiff_t)ss, bound, nq, nk);
    }
    if (nan_case) /* the NaN reached exactly its row or column */
        for (size_t r = 0; r < nq; r++)
            for (size_t c = 0; c < nk; c++)
                CHECK(!!isnan(s[r * ss + c]) == (r == nan_row || c == nan_col),
                      "NaN at [%zu][%zu] (NaN row %zu col %zu)", r, c, nan_row, nan_col);
    free(want);
    free(bound);
    free(qd);
    free(kd);
    buf_free(&bq);
    buf_free(&bk);
    buf_free(&bs);
    buf_free(&bs_ref);
}

HARNESS_ISA_PARAMS(kernels, qk_tile)
ParameterizedTest(isa_row *row, kernels, qk_tile, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    /* attn_scores passes up to ATTN_MAX_QK_ROWS rows, the others block_q */
    const int64_t bq = (t->block_q > ATTN_MAX_QK_ROWS ? t->block_q : ATTN_MAX_QK_ROWS) + 1;
    const int64_t bk = t->block_k + 1;
    for (int dt = 0; dt < ATTN_KV_FLOAT_DTYPES; dt++) {
        for (int64_t nk = 1; nk <= bk; nk++) /* key tails */
            run_qk(t, dt, (size_t)rng_int(g, 1, 4), (size_t)nk,
                   (size_t)rng_pick(g, head_dims, 14), ranges[nk % N_RANGES], (int)(nk & 1), 0);
        for (int64_t nq = 1; nq <= bq; nq++) /* query tails */
            run_qk(t, dt, (size_t)nq, (size_t)rng_int(g, 1, 9),
                   (size_t)rng_pick(g, head_dims, N_HEAD_DIMS), ranges[nq % N_RANGES],
                   (int)(nq & 1), 0);
        for (size_t i = 0; i < N_HEAD_DIMS; i++) /* head_dim tails, full tiles */
            for (int rg = 0; rg < N_RANGES; rg++)
                run_qk(t, dt, (size_t)rng_int(g, 1, bq), (size_t)rng_int(g, 1, bk),
                       (size_t)head_dims[i], ranges[rg], rg & 1, 0);
    }
}

HARNESS_ISA_PARAMS(kernels, qk_tile_nan)
ParameterizedTest(isa_row *row, kernels, qk_tile_nan)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int dt = 0; dt < ATTN_KV_FLOAT_DTYPES; dt++)
        for (int i = 0; i < 40; i++)
            run_qk(t, dt, (size_t)rng_int(g, 1, t->block_q + 1),
                   (size_t)rng_int(g, 1, t->block_k + 1),
                   (size_t)rng_pick(g, head_dims, N_HEAD_DIMS), ranges[0], i & 1, 1 + (i & 1));
}

/* ------------------------------------------------------------ pv_tile */

static void run_pv(const attn_dsp *t, int dt, size_t nq, size_t nk, size_t dv, value_range vr,
                   int offset, int nan_case)
{
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    const size_t ps = nk + (size_t)rng_int(g, 0, 3), vs = dv + (size_t)rng_int(g, 0, 3);
    const size_t as = dv + (size_t)rng_int(g, 0, 3);
    harness_context("pv_tile[%s] nq=%zu nk=%zu dv=%zu range=[%g,%g] offset=%d nan=%d",
                    dtype_names[dt], nq, nk, dv, (double)vr.lo, (double)vr.hi, offset, nan_case);

    buf bp, bv, ba, ba_ref;
    float *p = buf_alloc(&bp, nq * ps * 4, offset ? 4 : 0);
    void *v = buf_alloc(&bv, nk * vs * dt_size(dt), offset ? dt_size(dt) : 0);
    float *acc = buf_alloc(&ba, nq * as * 4, offset ? 4 : 0);
    float *acc_ref = buf_alloc(&ba_ref, nq * as * 4, 0);
    double *vd = xmalloc(nk * dv * sizeof(double));
    for (size_t r = 0; r < nq; r++)
        for (size_t c = 0; c < nk; c++) /* softmax weights, sometimes exactly 0 */
            p[r * ps + c] = rng_int(g, 0, 7) ? rng_float(g, 0.0f, 1.0f) : 0.0f;
    for (size_t c = 0; c < nk; c++)
        for (size_t i = 0; i < dv; i++)
            vd[c * dv + i] = store_as(v, dt, c * vs + i, rng_float(g, vr.lo, vr.hi));
    fill_gaps(acc, nq, dv, as);
    for (size_t r = 0; r < nq; r++)
        for (size_t i = 0; i < dv; i++)
            acc[r * as + i] = rng_float(g, vr.lo, vr.hi);
    size_t nan_row = nq, nan_colv = dv;
    if (nan_case == 1) {
        nan_row = (size_t)rng_int(g, 0, (int64_t)nq - 1);
        p[nan_row * ps + (size_t)rng_int(g, 0, (int64_t)nk - 1)] = NAN;
    } else if (nan_case == 2) { /* a NaN in v reaches its column of every row */
        nan_colv = (size_t)rng_int(g, 0, (int64_t)dv - 1);
        size_t c = (size_t)rng_int(g, 0, (int64_t)nk - 1);
        vd[c * dv + nan_colv] = store_as(v, dt, c * vs + nan_colv, NAN);
    }
    memcpy(acc_ref, acc, nq * as * 4);
    double *want = xmalloc(nq * dv * sizeof(double)), *bound = xmalloc(nq * dv * sizeof(double));
    for (size_t r = 0; r < nq; r++)
        for (size_t i = 0; i < dv; i++) {
            double sum = acc[r * as + i], mag = fabs(sum);
            for (size_t c = 0; c < nk; c++) {
                sum += (double)p[r * ps + c] * vd[c * dv + i];
                mag += fabs((double)p[r * ps + c] * vd[c * dv + i]);
            }
            want[r * dv + i] = sum;
            bound[r * dv + i] = tol_pv((double)nk, mag);
        }

    t->pv_tile[dt](p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc, (ptrdiff_t)as);
    buf_check(&ba, "acc");
    check_gaps("acc", acc, nq, dv, as);
    if (harness_is_scalar(t)) {
        expect_near("pv_tile vs float64", acc, (ptrdiff_t)as, want, bound, nq, dv);
    } else {
        sc->pv_tile[dt](p, (ptrdiff_t)ps, v, (ptrdiff_t)vs, nq, nk, dv, acc_ref, (ptrdiff_t)as);
        for (size_t i = 0; i < nq * dv; i++)
            bound[i] = TOL_PAIR(bound[i]);
        expect_near_f("pv_tile vs scalar", acc, (ptrdiff_t)as, acc_ref, (ptrdiff_t)as, bound, nq,
                      dv);
    }
    if (nan_case)
        for (size_t r = 0; r < nq; r++)
            for (size_t i = 0; i < dv; i++)
                CHECK(!!isnan(acc[r * as + i]) == (r == nan_row || i == nan_colv),
                      "NaN at [%zu][%zu] (NaN row %zu col %zu)", r, i, nan_row, nan_colv);
    free(want);
    free(bound);
    free(vd);
    buf_free(&bp);
    buf_free(&bv);
    buf_free(&ba);
    buf_free(&ba_ref);
}

HARNESS_ISA_PARAMS(kernels, pv_tile)
ParameterizedTest(isa_row *row, kernels, pv_tile, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    const int64_t bq = t->block_q + 1, bk = t->block_k + 1;
    for (int dt = 0; dt < ATTN_KV_FLOAT_DTYPES; dt++) {
        for (int64_t nk = 1; nk <= bk; nk++)
            run_pv(t, dt, (size_t)rng_int(g, 1, 4), (size_t)nk,
                   (size_t)rng_pick(g, head_dims, 14), ranges[nk % N_RANGES], (int)(nk & 1), 0);
        for (int64_t nq = 1; nq <= bq; nq++)
            run_pv(t, dt, (size_t)nq, (size_t)rng_int(g, 1, 9),
                   (size_t)rng_pick(g, head_dims, N_HEAD_DIMS), ranges[nq % N_RANGES],
                   (int)(nq & 1), 0);
        for (size_t i = 0; i < N_HEAD_DIMS; i++)
            for (int rg = 0; rg < N_RANGES; rg++)
                run_pv(t, dt, (size_t)rng_int(g, 1, bq), (size_t)rng_int(g, 1, bk),
                       (size_t)head_dims[i], ranges[rg], rg & 1, 0);
    }
}

HARNESS_ISA_PARAMS(kernels, pv_tile_nan)
ParameterizedTest(isa_row *row, kernels, pv_tile_nan)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int dt = 0; dt < ATTN_KV_FLOAT_DTYPES; dt++)
        for (int i = 0; i < 40; i++)
            run_pv(t, dt, (size_t)rng_int(g, 1, t->block_q + 1),
                   (size_t)rng_int(g, 1, t->block_k + 1),
                   (size_t)rng_pick(g, head_dims, N_HEAD_DIMS), ranges[0], i & 1, 1 + (i & 1));
}

/*
 * Inputs that end (or start) exactly at an inaccessible page: any read past
 * the last key / value row or before the first one crashes this test case.
 * Rows are contiguous (stride = d) so the last element is the page's last.
 */
HARNESS_ISA_PARAMS(kernels, tiles_page_fence)
ParameterizedTest(isa_row *row, kernels, tiles_page_fence)
{
    const attn_dsp *t = harness_begin(row);
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    for (int dt = 0; dt < ATTN_KV_FLOAT_DTYPES; dt++)
        for (int at_start = 0; at_start < 2; at_start++)
            for (size_t di = 0; di < N_HEAD_DIMS; di++) {
                const size_t d = (size_t)head_dims[di];
                const size_t nq = (size_t)rng_int(g, 1, t->block_q + 1);
                const size_t nk = (size_t)rng_int(g, 1, t->block_k + 1);
                harness_context("tiles at a page fence: %s d=%zu nq=%zu nk=%zu at_start=%d",
                                dtype_names[dt], d, nq, nk, at_start);
                fence_buf fq, fk, fp;
                float *q = fence_alloc(&fq, nq * d * 4, at_start);
                void *k = fence_alloc(&fk, nk * d * dt_size(dt), at_start);
                float *p = fence_alloc(&fp, nq * nk * 4, at_start);
                for (size_t i = 0; i < nq * d; i++)
                    q[i] = rng_float(g, -10.0f, 10.0f);
                for (size_t i = 0; i < nk * d; i++)
                    store_as(k, dt, i, rng_float(g, -10.0f, 10.0f));
                float *s = xmalloc(nq * nk * 4), *s_ref = xmalloc(nq * nk * 4);
                t->qk_tile[dt](q, (ptrdiff_t)d, k, (ptrdiff_t)d, nq, nk, d, 0.125f, s,
                               (ptrdiff_t)nk);
                sc->qk_tile[dt](q, (ptrdiff_t)d, k, (ptrdiff_t)d, nq, nk, d, 0.125f, s_ref,
                                (ptrdiff_t)nk);
                double *bound = xmalloc(nq * nk * sizeof(double));
                for (size_t r = 0; r < nq; r++)
                    for (size_t c = 0; c < nk; c++) {
                        double mag = 0.0, folded = 0.0;
                        for (size_t i = 0; i < d; i++) {
                            mag += fabs(q[r * d + i] * load_as(k, dt, c * d + i));
                            folded += fmax(fabs(q[r * d + i]), fabs(load_as(k, dt, c * d + i)));
                        }
                        bound[r * nk + c] = TOL_PAIR(tol_qk((double)d, 0.125, mag, folded));
                    }
                expect_near_f("qk_tile at fence", s, (ptrdiff_t)nk, s_ref, (ptrdiff_t)nk, bound,
                              nq, nk);
                /* pv_tile reads p [nq][nk] and v [nk][d] (k's buffer as v) */
                for (size_t i = 0; i < nq * nk; i++)
                    p[i] = rng_float(g, 0.0f, 1.0f);
                float *acc = xcalloc0(nq * d, 4), *acc_ref = xcalloc0(nq * d, 4);
                t->pv_tile[dt](p, (ptrdiff_t)nk, k, (ptrdiff_t)d, nq, nk, d, acc, (ptrdiff_t)d);
                sc->pv_tile[dt](p, (ptrdiff_t)nk, k, (ptrdiff_t)d, nq, nk, d, acc_ref,
                                (ptrdiff_t)d);
                double *vb = xmalloc(nq * d * sizeof(double));
                for (size_t r = 0; r < nq; r++)
                    for (size_t i = 0; i < d; i++) {
                        double mag = 0.0;
                        for (size_t c = 0; c < nk; c++)
                            mag += fabs(p[r * nk + c] * load_as(k, dt, c * d + i));
                        vb[r * d + i] = TOL_PAIR(tol_pv((double)nk, mag));
                    }
                expect_near_f("pv_tile at fence", acc, (ptrdiff_t)d, acc_ref, (ptrdiff_t)d, vb,
                              nq, d);
                /* to_f32 over the fenced array */
                float *conv = xmalloc(nk * d * 4), *conv_ref = xmalloc(nk * d * 4);
                t->to_f32[dt](k, conv, nk * d);
                sc->to_f32[dt](k, conv_ref, nk * d);
                expect_same("to_f32 at fence", conv, conv_ref, nk * d);
                free(conv);
                free(conv_ref);
                free(vb);
                free(acc);
                free(acc_ref);
                free(bound);
                free(s);
                free(s_ref);
                fence_free(&fq);
                fence_free(&fk);
                fence_free(&fp);
            }
}

/* ------------------------------------------------------------ to_f32 */

HARNESS_ISA_PARAMS(kernels, to_f32)
ParameterizedTest(isa_row *row, kernels, to_f32)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int dt = 0; dt < ATTN_KV_FLOAT_DTYPES; dt++)
        for (int si = 0; si < N_SWEEP; si++)
            for (int offset = 0; offset < 2; offset++) {
                const size_t n = sweep_len(si);
                harness_context("to_f32[%s] n=%zu offset=%d", dtype_names[dt], n, offset);
                buf bsrc, bdst;
                void *src = buf_alloc(&bsrc, n * dt_size(dt), offset ? dt_size(dt) : 0);
                float *dst = buf_alloc(&bdst, n * 4, offset ? 4 : 0);
                float *want = xmalloc(n * 4);
                for (size_t i = 0; i < n; i++) {
                    /* every bit pattern: normals, subnormals, zeros, inf, NaN */
                    uint32_t bits = (uint32_t)rng_next(g);
                    if (dt == ATTN_KV_F32) {
                        memcpy(&((float *)src)[i], &bits, 4);
                        memcpy(&want[i], &bits, 4);
                    } else {
                        uint16_t h = (uint16_t)bits;
                        ((uint16_t *)src)[i] = h;
                        want[i] = (float)(dt == ATTN_KV_F16 ? ref_f16_to_double(h)
                                                            : ref_bf16_to_double(h));
                    }
                }
                t->to_f32[dt](src, dst, n);
                buf_check(&bdst, "dst");
                expect_same("to_f32 vs exact decoding", dst, want, n);
                free(want);
                buf_free(&bsrc);
                buf_free(&bdst);
            }
}

/* ------------------------------------------------------------ 16-bit encoders */

/*
 * src/half.h's encoders (the 16-bit outputs' rounding and the Q8_0/Q4_0
 * scales) against tests/ref/ref.c's own: for every upper 16 bits of an f32, the
 * lower bits that decide a rounding (ties of BF16's 16 and of F16's 13
 * dropped bits, one below and above each) and random ones; so every
 * exponent (subnormal and overflow ranges of both formats included), ties
 * to even and away, infinities and NaN. A NaN must stay a quiet NaN of the
 * same sign (the reference keeps no payload).
 */
static void check_encoded(const char *what, uint16_t got, uint16_t want, uint32_t bits, int f16)
{
    const uint16_t exp_mask = f16 ? 0x7c00u : 0x7f80u, quiet = f16 ? 0x0200u : 0x0040u;
    float x;
    memcpy(&x, &bits, 4);
    const int ok = isnan(x) ? (got & exp_mask) == exp_mask && (got & quiet) &&
                                  (got >> 15) == (bits >> 31)
                            : got == want;
    CHECK(ok, "%s(%a = 0x%08x) = 0x%04x, want 0x%04x", what, (double)x, bits, got, want);
}

Test(kernels, half_encoders)
{
    harness_begin_plain("kernels/half_encoders");
    rng *g = harness_rng();
    static const uint32_t low[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x0fff,
                                   0x1000, 0x1001, 0x2fff, 0x3000, 0x3001, 0x5000, 0x7000,
                                   0x9000, 0xb000, 0xd000, 0xf000};
    for (uint32_t hi = 0; hi < 0x10000u; hi++)
        for (size_t k = 0; k < sizeof low / sizeof low[0] + 2; k++) {
            const uint32_t lo = k < sizeof low / sizeof low[0] ? low[k] : (uint32_t)rng_next(g);
            const uint32_t bits = hi << 16 | (lo & 0xffffu);
            float x;
            memcpy(&x, &bits, 4);
            check_encoded("attn_f32_to_f16", attn_f32_to_f16(x), ref_f32_to_f16(x), bits, 1);
            check_encoded("attn_f32_to_bf16", attn_f32_to_bf16(x), ref_f32_to_bf16(x), bits, 0);
        }
}

/* ------------------------------------------------------------ row kernels */

/* Random row of n values in vr; with_inf: about a fifth are -inf (never all). */
static void random_row(float *x, size_t n, value_range vr, int with_inf)
{
    rng *g = harness_rng();
    rng_fill(g, x, n, vr.lo, vr.hi);
    if (with_inf)
        for (size_t i = 0; i < n; i++)
            if (rng_int(g, 0, 4) == 0)
                x[i] = -INFINITY;
    if (with_inf && n > 1 && x[n - 1] == -INFINITY && rng_int(g, 0, 1))
        x[0] = vr.lo;
    int any = 0;
    for (size_t i = 0; i < n; i++)
        any |= x[i] != -INFINITY;
    if (!any)
        x[rng_int(g, 0, (int64_t)n - 1)] = vr.hi;
}

HARNESS_ISA_PARAMS(kernels, row_max)
ParameterizedTest(isa_row *row, kernels, row_max)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int si = 0; si < N_SWEEP; si++)
        for (int rg = 0; rg < N_RANGES; rg++)
            for (int variant = 0; variant < 4; variant++) {
                const size_t n = sweep_len(si);
                harness_context("row_max n=%zu range=[%g,%g] variant=%d", n,
                                (double)ranges[rg].lo, (double)ranges[rg].hi, variant);
                buf bx;
                float *x = buf_alloc(&bx, n * 4, (size_t)(variant & 1) * 4);
                random_row(x, n, ranges[rg], variant >= 2);
                if (variant == 1) /* the maximum in the tail */
                    x[n - 1] = ranges[rg].hi + 1.0f;
                if (variant == 3 && rng_int(g, 0, 1)) /* a row of only -inf */
                    for (size_t i = 0; i < n; i++)
                        x[i] = -INFINITY;
                float want = -INFINITY;
                for (size_t i = 0; i < n; i++)
                    want = x[i] > want ? x[i] : want;
                float got = t->row_max(x, n);
                CHECK(got == want, "got %.9g, want %.9g", (double)got, (double)want);

                /* dsp.h: NaN when any element is NaN, wherever it is (the
                 * driver relies on it: a NaN row must not look masked) */
                const size_t at[] = {0, n - 1, (size_t)rng_int(g, 0, (int64_t)n - 1)};
                for (int k = 0; k < 3; k++) {
                    const float keep = x[at[k]];
                    x[at[k]] = NAN;
                    got = t->row_max(x, n);
                    CHECK(isnan(got), "NaN at %zu of %zu: got %.9g", at[k], n, (double)got);
                    x[at[k]] = keep;
                }
                for (size_t i = 0; i < n; i++)
                    x[i] = NAN;
                got = t->row_max(x, n);
                CHECK(isnan(got), "row of NaN: got %.9g", (double)got);
                buf_free(&bx);
            }
}

/* exp_sum on one row; returns nothing, checks everything. */
static void run_exp_sum(const attn_dsp *t, size_t n, value_range vr, int with_inf, int offset,
                        int weighted, int nan_at_random, int fence)
{
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    harness_context("exp_sum n=%zu range=[%g,%g] -inf=%d offset=%d weighted=%d nan=%d fence=%d",
                    n, (double)vr.lo, (double)vr.hi, with_inf, offset, weighted, nan_at_random,
                    fence);
    buf bx;
    fence_buf fx;
    float *x = fence ? fence_alloc(&fx, n * 4, fence - 1) : buf_alloc(&bx, n * 4, offset ? 4 : 0);
    random_row(x, n, vr, with_inf);
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        max = x[i] > max ? x[i] : max;
    if (rng_int(g, 0, 3) == 0) /* a running max above the row's own */
        max += rng_float(g, 0.0f, 5.0f);
    size_t nan_at = n;
    if (nan_at_random) {
        nan_at = (size_t)rng_int(g, 0, (int64_t)n - 1);
        x[nan_at] = NAN;
    }
    float *x0 = xmalloc(n * 4), *x_ref = xmalloc(n * 4);
    memcpy(x0, x, n * 4);
    memcpy(x_ref, x, n * 4);

    double *want = xmalloc(n * sizeof(double)), *bound = xmalloc(n * sizeof(double));
    double sum = 0.0, sum_bound = 0.0, wsum = 0.0, wmag = 0.0, wbound = 0.0;
    size_t terms = 0;
    for (size_t i = 0; i < n; i++) {
        const double shifted = (double)(x0[i] - max); /* the kernel's f32 subtraction */
        const double e = exp((double)x0[i] - max);
        want[i] = e;
        bound[i] = x0[i] == -INFINITY ? 0.0 : tol_exp(shifted, e);
        sum += e;
        sum_bound += bound[i];
        if (e > 0.0) {
            wsum += e * ((double)x0[i] - max);
            wmag += fabs(e * ((double)x0[i] - max));
            wbound += fabs(shifted) * bound[i];
        }
        terms += x0[i] != -INFINITY;
    }
    sum_bound += tol_gamma((double)terms) * sum;
    wbound += tol_gamma((double)terms + 1.0) * wmag;

    float w = 12345.0f, w_ref = 12345.0f;
    float got = t->exp_sum(x, n, max, weighted ? &w : NULL);
    if (!fence)
        buf_check(&bx, "x");
    CHECK(weighted || w == 12345.0f, "wrote *weighted although it is NULL");
    if (nan_at_random) {
        CHECK(isnan(got), "sum %.9g is not NaN with a NaN input", (double)got);
        CHECK(isnan(x[nan_at]), "x[%zu] is %.9g, not NaN", nan_at, (double)x[nan_at]);
        want[nan_at] = NAN;
    }
    if (harness_is_scalar(t)) {
        expect_near("exp_sum x vs float64", x, 0, want, bound, 1, n);
        if (!nan_at_random) {
            CHECK(fabs(got - sum) <= sum_bound, "sum %.9g, float64 %.9g, bound %.3g", (double)got,
                  sum, sum_bound);
            if (weighted)
                CHECK(fabs(w - wsum) <= wbound, "weighted %.9g, float64 %.9g, bound %.3g",
                      (double)w, wsum, wbound);
        }
    } else {
        float got_ref = sc->exp_sum(x_ref, n, max, weighted ? &w_ref : NULL);
        for (size_t i = 0; i < n; i++)
            bound[i] = TOL_PAIR(bound[i]);
        expect_near_f("exp_sum x vs scalar", x, 0, x_ref, 0, bound, 1, n);
        if (!nan_at_random) {
            CHECK(fabs(got - got_ref) <= TOL_PAIR(sum_bound), "sum %.9g, scalar %.9g, bound %.3g",
                  (double)got, (double)got_ref, TOL_PAIR(sum_bound));
            if (weighted)
                CHECK(fabs(w - w_ref) <= TOL_PAIR(wbound),
                      "weighted %.9g, scalar %.9g, bound %.3g", (double)w, (double)w_ref,
                      TOL_PAIR(wbound));
        }
    }
    if (weighted && !nan_at_random)
        CHECK(isfinite(w), "weighted sum %.9g is not finite (-inf entries must add 0)", (double)w);
    free(want);
    free(bound);
    free(x0);
    free(x_ref);
    if (fence)
        fence_free(&fx);
    else
        buf_free(&bx);
}

HARNESS_ISA_PARAMS(kernels, exp_sum)
ParameterizedTest(isa_row *row, kernels, exp_sum)
{
    const attn_dsp *t = harness_begin(row);
    for (int si = 0; si < N_SWEEP; si++)
        for (int rg = 0; rg < N_RANGES; rg++)
            for (int variant = 0; variant < 4; variant++)
                run_exp_sum(t, sweep_len(si), ranges[rg], variant >> 1, variant & 1,
                            (si + variant) & 1, 0, 0);
}

HARNESS_ISA_PARAMS(kernels, exp_sum_nan_and_fence)
ParameterizedTest(isa_row *row, kernels, exp_sum_nan_and_fence)
{
    const attn_dsp *t = harness_begin(row);
    for (int si = 0; si < N_SWEEP; si++) {
        run_exp_sum(t, sweep_len(si), ranges[si % N_RANGES], si & 1, 0, 1, 1, 0);
        run_exp_sum(t, sweep_len(si), ranges[si % N_RANGES], si & 1, 0, si & 1, 0, 1 + (si & 1));
    }
}

/* Element-wise kernels whose result is one IEEE operation: exact. */
HARNESS_ISA_PARAMS(kernels, row_scale_add_bias)
ParameterizedTest(isa_row *row, kernels, row_scale_add_bias)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int si = 0; si < N_SWEEP; si++)
        for (int rg = 0; rg < N_RANGES; rg++)
            for (int offset = 0; offset < 2; offset++) {
                const size_t n = sweep_len(si);
                harness_context("row_scale/add_bias n=%zu range=%d offset=%d", n, rg, offset);
                buf bx;
                float *x = buf_alloc(&bx, n * 4, (size_t)offset * 4);
                float *bias = (float *)xmalloc(n * 4 + 4) + offset, *want = xmalloc(n * 4);
                random_row(x, n, ranges[rg], rg == 2);
                if (n > 2)
                    x[rng_int(g, 0, (int64_t)n - 1)] = NAN;
                const float s = rng_float(g, -2.0f, 2.0f);
                for (size_t i = 0; i < n; i++)
                    want[i] = x[i] * s;
                t->row_scale(x, n, s);
                buf_check(&bx, "row_scale x");
                expect_same("row_scale", x, want, n);

                random_row(x, n, ranges[rg], rg == 2);
                rng_fill(g, bias, n, ranges[rg].lo, ranges[rg].hi);
                if (n > 3)
                    bias[rng_int(g, 0, (int64_t)n - 1)] = -INFINITY;
                for (size_t i = 0; i < n; i++)
                    want[i] = x[i] + bias[i];
                t->add_bias(x, bias, n);
                buf_check(&bx, "add_bias x");
                expect_same("add_bias", x, want, n);
                free(bias - offset);
                free(want);
                buf_free(&bx);
            }
}

HARNESS_ISA_PARAMS(kernels, mask_bool)
ParameterizedTest(isa_row *row, kernels, mask_bool)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (int si = 0; si < N_SWEEP; si++)
        for (int offset = 0; offset < 2; offset++) {
            const size_t n = sweep_len(si);
            harness_context("mask_bool n=%zu offset=%d", n, offset);
            buf bx;
            fence_buf fm;
            float *x = buf_alloc(&bx, n * 4, (size_t)offset * 4);
            uint8_t *mask = fence_alloc(&fm, n, offset);
            float *want = xmalloc(n * 4);
            for (size_t i = 0; i < n; i++) {
                uint32_t bits = (uint32_t)rng_next(g); /* any bits, NaN payloads included */
                memcpy(&x[i], &bits, 4);
                /* nonzero = visible, whatever the byte */
                mask[i] = rng_int(g, 0, 2) == 0 ? 0 : (uint8_t)rng_int(g, 1, 255);
                want[i] = mask[i] ? x[i] : -INFINITY;
            }
            t->mask_bool(x, mask, n);
            buf_check(&bx, "x");
            expect_bits("mask_bool", x, want, n);
            free(want);
            buf_free(&bx);
            fence_free(&fm);
        }
}

HARNESS_ISA_PARAMS(kernels, softcap)
ParameterizedTest(isa_row *row, kernels, softcap)
{
    const attn_dsp *t = harness_begin(row);
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    for (int si = 0; si < N_SWEEP; si++)
        for (int rg = 0; rg < N_RANGES; rg++)
            for (int offset = 0; offset < 2; offset++) {
                const size_t n = sweep_len(si);
                const float cap = rng_float(g, 1.0f, 50.0f);
                harness_context("softcap n=%zu range=%d offset=%d cap=%g", n, rg, offset,
                                (double)cap);
                buf bx;
                float *x = buf_alloc(&bx, n * 4, (size_t)offset * 4);
                random_row(x, n, ranges[rg], 0);
                if (n > 4) { /* infinities saturate to +-cap, NaN stays NaN */
                    x[rng_int(g, 0, (int64_t)n - 1)] = INFINITY;
                    x[rng_int(g, 0, (int64_t)n - 1)] = -INFINITY;
                    x[rng_int(g, 0, (int64_t)n - 1)] = NAN;
                }
                float *x0 = xmalloc(n * 4), *x_ref = xmalloc(n * 4);
                memcpy(x0, x, n * 4);
                memcpy(x_ref, x, n * 4);
                double *want = xmalloc(n * sizeof(double)), *bound = xmalloc(n * sizeof(double));
                for (size_t i = 0; i < n; i++) {
                    const double tt = tanh((double)x0[i] / cap), y = cap * tt;
                    want[i] = isnan(x0[i]) ? NAN : y;
                    bound[i] = isfinite(x0[i]) ? tol_softcap(cap, (double)x0[i], tt) : 0.0;
                    if (isinf(x0[i]))
                        bound[i] = TOL_U * cap; /* tanh(+-inf) = +-1 exactly: one rounding */
                }
                t->softcap(x, n, cap);
                buf_check(&bx, "x");
                if (harness_is_scalar(t)) {
                    expect_near("softcap vs float64", x, 0, want, bound, 1, n);
                } else {
                    sc->softcap(x_ref, n, cap);
                    for (size_t i = 0; i < n; i++)
                        bound[i] = TOL_PAIR(bound[i]);
                    expect_near_f("softcap vs scalar", x, 0, x_ref, 0, bound, 1, n);
                }
                for (size_t i = 0; i < n; i++)
                    CHECK(isnan(x0[i]) || fabsf(x[i]) <= cap, "|softcap(%.9g)| = %.9g > cap",
                          (double)x0[i], (double)x[i]);
                free(x0);
                free(x_ref);
                free(want);
                free(bound);
                buf_free(&bx);
            }
}

HARNESS_ISA_PARAMS(kernels, softmax_bwd)
ParameterizedTest(isa_row *row, kernels, softmax_bwd)
{
    const attn_dsp *t = harness_begin(row);
    const attn_dsp *sc = harness_scalar();
    rng *g = harness_rng();
    for (int si = 0; si < N_SWEEP; si++)
        for (int rg = 0; rg < N_RANGES; rg++)
            for (int variant = 0; variant < 2; variant++) {
                const size_t n = sweep_len(si);
                harness_context("softmax_bwd n=%zu range=%d variant=%d", n, rg, variant);
                buf bp, bdp, bds;
                float *p = buf_alloc(&bp, n * 4, (size_t)variant * 4);
                float *dp = buf_alloc(&bdp, n * 4, (size_t)variant * 4);
                float *ds = buf_alloc(&bds, n * 4, (size_t)variant * 4);
                /* p: a probability row (some exact zeros); dp: gradients */
                double total = 0.0;
                for (size_t i = 0; i < n; i++)
                    total += p[i] = rng_int(g, 0, 5) ? rng_float(g, 0.0f, 1.0f) : 0.0f;
                for (size_t i = 0; i < n && total > 0.0; i++)
                    p[i] = (float)(p[i] / total);
                rng_fill(g, dp, n, ranges[rg].lo, ranges[rg].hi);
                double *want = xmalloc(n * sizeof(double)), *bound = xmalloc(n * sizeof(double));
                ref_softmax_bwd_row(p, dp, n, want, bound);
                t->softmax_bwd(p, dp, ds, n);
                buf_check(&bds, "ds");
                float *ds_ref = xmalloc(n * 4);
                if (harness_is_scalar(t)) {
                    expect_near("softmax_bwd vs float64", ds, 0, want, bound, 1, n);
                } else {
                    sc->softmax_bwd(p, dp, ds_ref, n);
                    for (size_t i = 0; i < n; i++)
                        bound[i] = TOL_PAIR(bound[i]);
                    expect_near_f("softmax_bwd vs scalar", ds, 0, ds_ref, 0, bound, 1, n);
                }
                /* in place: ds == dp, then ds == p, must give the same bits */
                float *keep_p = xmalloc(n * 4);
                memcpy(keep_p, p, n * 4);
                memcpy(ds_ref, ds, n * 4);
                float *dp_copy = xmalloc(n * 4);
                memcpy(dp_copy, dp, n * 4);
                t->softmax_bwd(p, dp_copy, dp_copy, n);
                expect_bits("softmax_bwd in place on dp", dp_copy, ds_ref, n);
                t->softmax_bwd(p, dp, p, n);
                expect_bits("softmax_bwd in place on p", p, ds_ref, n);
                /* a NaN in dp reaches the whole row through the dot product */
                memcpy(p, keep_p, n * 4);
                dp[rng_int(g, 0, (int64_t)n - 1)] = NAN;
                t->softmax_bwd(p, dp, ds, n);
                for (size_t i = 0; i < n; i++)
                    CHECK(isnan(ds[i]), "ds[%zu] = %.9g is not NaN with a NaN in dp", i,
                          (double)ds[i]);
                free(keep_p);
                free(dp_copy);
                free(ds_ref);
                free(want);
                free(bound);
                buf_free(&bp);
                buf_free(&bdp);
                buf_free(&bds);
            }
}

/* ------------------------------------------------------------ bf16 rounding of the dot kernels */

/*
 * The x86 bf16-mode kernels (src/x86/dot_avx512_tmpl.h, on vdpbf16ps or
 * AMX tiles) round f32 q and k to bf16 on vcvtne2ps2bf16 where a vector
 * holds no subnormal and bit by bit otherwise: either way the rounding of
 * tests/ref/ref.c. One product per score (d 2: (x, 0) . (1, 0)) shows the
 * rounded value itself, for random patterns and the edges: subnormals
 * (0x007fffff rounds up to FLT_MIN), ties, overflow to infinity, NaN. The
 * dot units flush a bf16 subnormal factor, so there 0 is also right.
 */
HARNESS_ISA_PARAMS(kernels, bf16_operand_rounding)
ParameterizedTest(isa_row *row, kernels, bf16_operand_rounding)
{
    const attn_dsp *t = harness_begin(row);
    if ((t->isa != ATTN_ISA_AVX512 && t->isa != ATTN_ISA_AMX) || !t->qk_bf16[ATTN_KV_F32])
        cr_skip_test("no x86 bf16 dot kernel in this table");
    rng *g = harness_rng();
    enum { N = 64 };
    static const uint32_t edges[] = {0x007fffffu, 0x00800000u, 0x007f8000u, 0x007f7fffu,
                                     0x80000001u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu,
                                     0xff7fffffu, 0x7f800000u, 0x7fc00001u, 0xffbfffffu,
                                     0x00000000u, 0x80000000u, 0x3effffffu, 0x00018000u};
    for (int rep = 0; rep < 64; rep++)
        for (int side = 0; side < 2; side++) {
            float x[N][2], one[N][2], s[8 * N];
            for (int i = 0; i < N; i++) {
                uint32_t bits = (uint32_t)rng_next(g);
                if (rep == 0 && i < (int)(sizeof edges / sizeof edges[0]))
                    bits = edges[i];
                else if (i % 4 == 1) /* near FLT_MIN: exponent 0 or 1 */
                    bits = (bits & 0x807fffffu) | ((bits >> 8 & 1u) << 23);
                else if (i % 4 == 2) /* a tie */
                    bits = (bits & 0xffff0000u) | 0x8000u;
                memcpy(&x[i][0], &bits, 4);
                x[i][1] = 0.0f;
                one[i][0] = 1.0f, one[i][1] = 0.0f;
            }
            harness_context("rep %d, x in %s", rep, side ? "k" : "q");
            /* side 0: N query rows x one key; side 1: one row x N keys, so
               that the kernel keeps its bf16 path (8 rows or more) */
            if (side == 0)
                t->qk_bf16[ATTN_KV_F32](&x[0][0], 2, &one[0][0], 2, N, 1, 2, 1.0f, s, 1);
            for (int i = 0; i < N && side == 1; i++) /* 8 equal rows, key i */
                t->qk_bf16[ATTN_KV_F32](&one[0][0], 2, &x[i][0], 2, 8, 1, 2, 1.0f, &s[i], N);
            for (int i = 0; i < N; i++) {
                const uint16_t h = ref_f32_to_bf16(x[i][0]);
                const double want = ref_bf16_to_double(h);
                const int sub = (h & 0x7f80) == 0;
                const int ok = isnan(want) ? isnan(s[i])
                                           : (double)s[i] == want || (sub && s[i] == 0.0f);
                uint32_t xb;
                memcpy(&xb, &x[i][0], 4);
                CHECK(ok, "x 0x%08x: got %a, want %a (bf16 0x%04x)", xb, (double)s[i], want, h);
            }
        }
}

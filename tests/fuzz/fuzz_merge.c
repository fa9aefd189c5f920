/* SPDX-License-Identifier: MIT */
/*
 * attn-fuzz-merge: attn_merge with hostile lse values and shapes, on every
 * kernel table this build and CPU offer.
 *
 * The input decodes into a shape (batch, heads, q_len small; v_dim 0..40,
 * sometimes invalid: 0/negative sizes, n_parts <= 0), 1..8 partials with
 * padded, [B,L,H,D]-like or broadcast (stride 0) layouts, lse values drawn
 * from {-inf, +inf, NaN, +-FLT_MAX, +-1e30, subnormals, 0, any bit pattern,
 * moderate values}, outputs moderate with the odd NaN/inf, and an output
 * that may overlap a part or the lse array. Every buffer ends at a
 * PROT_NONE page.
 *
 * Fails on: a crash or sanitizer report; a rejected call that wrote a byte;
 * an accepted call that violates attn.h's merge rules per row (any NaN or
 * +inf lse: all NaN and lse NaN; all -inf: zeros and -inf; else an lse that
 * is finite and >= the largest lse); for rows whose contributing partial
 * outputs are finite, a value outside tests/tolerance.h's merge bound of
 * the float64 merge (ref_merge_row); different bits for reversed task order
 * or between runs. A last byte draws the out dtype of one more call per
 * table: F16 or BF16 must give the F32 out rounded to nearest even bit for
 * bit (tests/ref/ref.c's encoders) and the same lse bits; BOOL or Q8_0 must be
 * ATTN_ERR_ARG with nothing written.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "fuzz_util.h"
#include "internal.h"
#include "ref/ref.h"
#include "tolerance.h"

#define MAX_PARTS 8

static float hostile_lse(fz_reader *r, fz_rng *g)
{
    switch (fz_range(r, 0, 15)) {
    case 0: return -INFINITY;
    case 1: return INFINITY;
    case 2: return NAN;
    case 3: return FLT_MAX;
    case 4: return -FLT_MAX;
    case 5: return 1e30f;
    case 6: return -1e30f;
    case 7: return FLT_TRUE_MIN;
    case 8: return 0.0f;
    case 9: {
        uint32_t bits = fz_u32(r);
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case 10: return -INFINITY;
    default: return fz_rng_float(g, -90.0f, 90.0f);
    }
}

static int is_float_bits_equal(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/*
 * One more merge of the accepted call on table t into a fresh out of
 * `dtype` (dense [B][H][Lq][dv], its own lse array): F16/BF16 must be f32
 * (the F32 call's dense out) rounded to nearest even and lse32's bits;
 * any other dtype ATTN_ERR_ARG with out and lse untouched.
 */
static void merge16(const attn_dsp *t, const attn_shape *shape, const attn_partial *parts,
                    int64_t n_parts, int32_t dtype, int with_lse, const float *f32,
                    const float *lse32, int64_t rows, int64_t dv)
{
    const size_t n = (size_t)(rows * dv);
    const size_t esize = dtype == ATTN_DTYPE_Q8_0 ? 34 : dtype == ATTN_DTYPE_BOOL ? 1 : 2;
    fz_buf ob, lb;
    unsigned char *o = fz_buf_alloc(&ob, n * esize, 0);
    float *lse = fz_buf_alloc(&lb, (size_t)rows * 4, 0);
    memset(o, 0xa5, n * esize);
    memset(lse, 0xa5, (size_t)rows * 4);
    const attn_tensor to = {o, dtype, shape->q_heads * shape->q_len * dv, shape->q_len * dv, dv};
    attn_options opt = ATTN_OPTIONS_INIT;
    const attn_status st = attn_merge_with(t, shape, &opt, parts, n_parts, &to,
                                           with_lse ? lse : NULL);
    if (dtype != ATTN_DTYPE_F16 && dtype != ATTN_DTYPE_BF16) {
        FZ_CHECK(st == ATTN_ERR_ARG, "%s: merge into a %s out: status %d", t->isa_name,
                 ref_dtype_name(dtype), st);
        for (size_t i = 0; i < n * esize; i++)
            FZ_CHECK(o[i] == 0xa5, "a rejected merge wrote its out");
    } else {
        FZ_CHECK(st == ATTN_OK, "%s: merge into a %s out: status %d", t->isa_name,
                 ref_dtype_name(dtype), st);
        const uint16_t exp_mask = dtype == ATTN_DTYPE_F16 ? 0x7c00u : 0x7f80u;
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            uint32_t bits;
            memcpy(&h, o + 2 * i, 2);
            memcpy(&bits, &f32[i], 4);
            const uint16_t want = dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(f32[i])
                                                          : ref_f32_to_bf16(f32[i]);
            const int ok = isnan(f32[i]) ? (h & exp_mask) == exp_mask &&
                                               (h & ~exp_mask & 0x7fffu) &&
                                               (h >> 15) == (bits >> 31)
                                         : h == want;
            FZ_CHECK(ok, "%s: %s merge out[%zu] = 0x%04x, want rne(%.9g) = 0x%04x", t->isa_name,
                     ref_dtype_name(dtype), i, h, (double)f32[i], want);
        }
        if (with_lse)
            FZ_CHECK(is_float_bits_equal(lse, lse32, (size_t)rows),
                     "%s: lse of a %s merge differs from the f32 merge's", t->isa_name,
                     ref_dtype_name(dtype));
    }
    fz_buf_free(&ob);
    fz_buf_free(&lb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader rd = {data, size};
    fz_reader *r = &rd;
    fz_rng g = {fz_u64(r) | 1};

    attn_shape shape;
    shape.batch = fz_range(r, 1, 2);
    shape.kv_heads = 1;
    shape.q_heads = fz_range(r, 1, 3);
    shape.q_len = fz_range(r, 1, 9);
    shape.kv_len = fz_range(r, 1, 4);
    shape.head_dim = fz_range(r, 1, 40);
    shape.v_dim = fz_range(r, 0, 40);
    int64_t n_parts = fz_range(r, 1, MAX_PARTS);
    const int invalid = fz_chance(r, 20);
    if (invalid) {
        switch (fz_range(r, 0, 3)) {
        case 0: n_parts = -fz_range(r, 0, 2); break;
        case 1: shape.q_len = -1; break;
        case 2: shape.v_dim = -1; break;
        default: shape.kv_heads = 2; shape.q_heads = 3; break;
        }
    }
    const int64_t dv = shape.v_dim > 0 ? shape.v_dim : shape.head_dim;
    const int64_t bsz = shape.batch > 0 ? shape.batch : 1;
    const int64_t hsz = shape.q_heads > 0 ? shape.q_heads : 1;
    const int64_t qsz = shape.q_len > 0 ? shape.q_len : 1;
    const int64_t rows = bsz * hsz * qsz;

    /* partials */
    fz_buf ob[MAX_PARTS], lb[MAX_PARTS];
    attn_partial parts[MAX_PARTS];
    int finite_out[MAX_PARTS];
    const int64_t np = n_parts > 0 ? n_parts : 1;
    for (int64_t p = 0; p < np; p++) {
        const int layout = (int)fz_range(r, 0, 3);
        const int64_t pad = fz_range(r, 0, 2);
        attn_tensor t = {NULL, ATTN_DTYPE_F32, 0, 0, 0};
        int64_t elems;
        if (layout == 0) { /* [B][H][L][D] padded */
            t.row_stride = dv + pad;
            t.head_stride = qsz * t.row_stride;
            t.batch_stride = hsz * t.head_stride;
            elems = bsz * t.batch_stride;
        } else if (layout == 1) { /* [B][L][H][D] */
            t.head_stride = dv + pad;
            t.row_stride = hsz * t.head_stride;
            t.batch_stride = qsz * t.row_stride;
            elems = bsz * t.batch_stride;
        } else if (layout == 2) { /* broadcast over batch and heads */
            t.row_stride = dv;
            elems = qsz * dv;
        } else { /* one row for everything */
            elems = dv;
        }
        float *o = fz_buf_alloc(&ob[p], (size_t)elems * 4, 0);
        finite_out[p] = !fz_chance(r, 30);
        for (int64_t i = 0; i < elems; i++)
            o[i] = fz_rng_float(&g, -50.0f, 50.0f);
        if (!finite_out[p] && elems > 0)
            o[fz_range(r, 0, elems - 1)] = fz_chance(r, 128) ? NAN : -INFINITY;
        t.data = o;
        float *l = fz_buf_alloc(&lb[p], (size_t)rows * 4, fz_chance(r, 128));
        for (int64_t i = 0; i < rows; i++)
            l[i] = hostile_lse(r, &g);
        parts[p].out = t;
        parts[p].lse = l;
        if (fz_chance(r, 4))
            parts[p].out.dtype = ATTN_DTYPE_F16; /* rejected */
    }

    /* output: its own buffer, or (rarely) over part 0 or the lse array */
    fz_buf outb, lseb;
    float *out = fz_buf_alloc(&outb, (size_t)(rows * dv) * 4, fz_chance(r, 128));
    float *lse = fz_buf_alloc(&lseb, (size_t)rows * 4, 0);
    attn_tensor to = {out, ATTN_DTYPE_F32, hsz * qsz * dv, qsz * dv, dv};
    const int overlap = fz_range(r, 0, 31);
    float *lse_arg = fz_chance(r, 32) ? NULL : lse;
    /* one more call's out dtype: none (0..3, and no byte left), F16, BF16,
       then two it must refuse */
    static const int32_t out16_kinds[] = {ATTN_DTYPE_F16, ATTN_DTYPE_BF16, ATTN_DTYPE_BOOL,
                                          ATTN_DTYPE_Q8_0};
    const unsigned out_kind = fz_u8(r) % 8u;
    if (overlap == 0 && n_parts > 0 && parts[0].out.row_stride == dv &&
        parts[0].out.head_stride == qsz * dv)
        to.data = parts[0].out.data;
    else if (overlap == 1 && lse_arg)
        lse_arg = (float *)parts[0].lse;
    memset(out, 0x5a, (size_t)(rows * dv) * 4);
    memset(lse, 0x5a, (size_t)rows * 4);
    unsigned char *out_before = malloc((size_t)(rows * dv) * 4 + 1);
    memcpy(out_before, out, (size_t)(rows * dv) * 4);

    attn_options opt = ATTN_OPTIONS_INIT;
    for (attn_isa isa = ATTN_ISA_SCALAR; isa < (attn_isa)ATTN_ISA_COUNT; isa++) { /* the registry */
        const attn_dsp *t = attn_dsp_for_isa(isa);
        if (!t)
            continue;
        opt.parallel_for = NULL;
        attn_status st = attn_merge_with(t, &shape, &opt, parts, n_parts, &to, lse_arg);
        int dtype_bad = 0;
        for (int64_t p = 0; p < np; p++)
            dtype_bad |= parts[p].out.dtype != ATTN_DTYPE_F32;
        const int must_fail = invalid || dtype_bad || to.data != out ||
                              (lse_arg && lse_arg != lse);
        if (st != ATTN_OK) {
            FZ_CHECK(must_fail, "%s: valid merge rejected: %d", attn_isa_name(isa), st);
            FZ_CHECK(memcmp(out, out_before, (size_t)(rows * dv) * 4) == 0,
                     "rejected merge wrote the output");
            continue;
        }
        FZ_CHECK(!must_fail, "%s: invalid merge accepted", attn_isa_name(isa));

        /* contract, per row, and the float64 bound where inputs are finite */
        double lse_d[MAX_PARTS], want[64], bound[64], L, Le;
        double *od[MAX_PARTS];
        for (int64_t p = 0; p < n_parts; p++)
            od[p] = malloc((size_t)dv * sizeof(double));
        for (int64_t b = 0; b < shape.batch; b++)
            for (int64_t h = 0; h < shape.q_heads; h++)
                for (int64_t i = 0; i < shape.q_len; i++) {
                    const int64_t row = (b * shape.q_heads + h) * shape.q_len + i;
                    const float *got = out + b * to.batch_stride + h * to.head_stride +
                                       i * to.row_stride;
                    int all_finite = 1, poisoned = 0, any = 0;
                    double m = -INFINITY;
                    for (int64_t p = 0; p < n_parts; p++) {
                        const float l = parts[p].lse[row];
                        lse_d[p] = l;
                        poisoned |= isnan(l) || l == INFINITY;
                        if (l != -INFINITY && !isnan(l)) {
                            any = 1;
                            m = l > m ? l : m;
                        }
                        const attn_tensor *pt = &parts[p].out;
                        const float *src = (const float *)pt->data + b * pt->batch_stride +
                                           h * pt->head_stride + i * pt->row_stride;
                        for (int64_t c = 0; c < dv; c++) {
                            od[p][c] = src[c];
                            if (l != -INFINITY && !isfinite(src[c]))
                                all_finite = 0;
                        }
                    }
                    const float gl = lse_arg ? lse[row] : 0.0f;
                    if (poisoned) {
                        for (int64_t c = 0; c < dv; c++)
                            FZ_CHECK(isnan(got[c]), "poisoned row: out not NaN");
                        FZ_CHECK(!lse_arg || isnan(gl), "poisoned row: lse not NaN");
                        continue;
                    }
                    if (!any) {
                        for (int64_t c = 0; c < dv; c++)
                            FZ_CHECK(got[c] == 0.0f, "all -inf row: out %g", (double)got[c]);
                        FZ_CHECK(!lse_arg || gl == -INFINITY, "all -inf row: lse %g", (double)gl);
                        continue;
                    }
                    FZ_CHECK(!lse_arg || (isfinite(gl) && gl >= (float)m),
                             "merged lse %g below the largest part lse %g", (double)gl, m);
                    if (!all_finite)
                        continue;
                    ref_merge_row((size_t)n_parts, lse_d, NULL, (const double *const *)od, NULL,
                                  (size_t)dv, want, bound, &L, &Le);
                    for (int64_t c = 0; c < dv; c++)
                        FZ_CHECK(fabs(got[c] - want[c]) <= bound[c],
                                 "%s: out[%lld] %.9g vs float64 %.9g, bound %.3g",
                                 attn_isa_name(isa), (long long)c, (double)got[c], want[c],
                                 bound[c]);
                    FZ_CHECK(!lse_arg || fabs(gl - L) <= Le, "lse %.9g vs float64 %.9g",
                             (double)gl, L);
                }
        for (int64_t p = 0; p < n_parts; p++)
            free(od[p]);

        /* the same bits in reverse task order */
        float *first = malloc((size_t)(rows * dv) * 4 + 4);
        float *first_l = malloc((size_t)rows * 4);
        memcpy(first, out, (size_t)(rows * dv) * 4);
        memcpy(first_l, lse, (size_t)rows * 4);
        opt.parallel_for = fz_reversed_for;
        FZ_CHECK(attn_merge_with(t, &shape, &opt, parts, n_parts, &to, lse_arg) == ATTN_OK,
                 "second run rejected");
        FZ_CHECK(is_float_bits_equal(first, out, (size_t)(rows * dv)), "bits differ, reversed");
        FZ_CHECK(is_float_bits_equal(first_l, lse, (size_t)rows), "lse bits differ, reversed");
        if (out_kind >= 4)
            merge16(t, &shape, parts, n_parts, out16_kinds[out_kind - 4], lse_arg != NULL, first,
                    first_l, rows, dv);
        free(first);
        free(first_l);
    }

    free(out_before);
    for (int64_t p = 0; p < np; p++) {
        fz_buf_free(&ob[p]);
        fz_buf_free(&lb[p]);
    }
    fz_buf_free(&outb);
    fz_buf_free(&lseb);
    return 0;
}

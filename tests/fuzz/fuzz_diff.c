/* SPDX-License-Identifier: MIT */
/*
 * Differential fuzzer: small random problems through every kernel table this
 * build and CPU offer (attn_dsp_for_isa), each compared with the scalar table
 * (the oracle) and with tests/ref/ref.c's float64 reference.
 *
 * Tolerances are tests/tolerance.h's, computed per element by ref.c: every
 * implementation must be within the bound of the exact result, so two of
 * them within twice that of each other (TOL_PAIR). Masks are exact: -inf
 * scores and 0 weights exactly where a key is hidden, NaN exactly where a
 * NaN or +inf score reaches a row, in every table.
 *
 * Problems: the problem generator's (problems/gen.h) with dense layouts (padded,
 * [B,L,H,D], broadcast strides; fuzz_kvlayout.c draws offsets, packing and
 * pages) and every option it draws, decoded from the input. Values of
 * several spreads, plus NaN/inf sprinkled into q, k, bias and sinks, and NaN
 * in every element nothing may read (rows past the lengths). v is finite:
 * the header lets a non-finite v row hidden only by a mask turn an output
 * NaN or not depending on tiling (0 * inf), which differs between tables by
 * design.
 *
 * A forward is now and then (a byte after the problem's) run again on every
 * table into an F16 or BF16 out: it must be that table's F32 out rounded to
 * nearest even, bit for bit (tests/ref/ref.c's encoders, not the library's),
 * with the same stats bits.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "internal.h"
#include "ops_list.h"
#include "ref/ref.h"
#include "tolerance.h"

#define CAP_WORK ((int64_t)2 << 20)

/* Every registry ISA but scalar (src/isa_list.h) can be compared. */
#define OTHER_ISAS (ATTN_ISA_COUNT - 1 - ATTN_ISA_SCALAR)
/* tests/emu's build of this replay adds the SIMDe and AMX-emulator tables
   (tests/emu_tables.h) */
#ifdef ATTN_TEST_AVX512_EMU
#include "emu_tables.h"
#define EMU_TABLES 2
#else
#define EMU_TABLES 0
#endif
#define MAX_TABLES (1 + OTHER_ISAS + EMU_TABLES)

/* ------------------------------------------------------------ values */

typedef struct gen {
    fz_rng rng;
    float lo, hi;
    int specials; /* 1 in `specials` values is NaN/inf/-0/subnormal (0: none) */
} gen;

static float gen_value(gen *g, int allow_special)
{
    if (allow_special && g->specials && fz_rng_next(&g->rng) % (uint64_t)g->specials == 0) {
        static const float sp[] = {NAN, -0.0f, 1e-45f, FLT_MIN, INFINITY, -INFINITY};
        return sp[fz_rng_next(&g->rng) % 6];
    }
    return fz_rng_float(&g->rng, g->lo, g->hi);
}

/* The generator's problems, dense layouts (fuzz_kvlayout.c draws the
   others): every option, padded, [B,L,H,D] and broadcast strides. */
static void profile_of(gen_profile *p)
{
    gen_profile_init(p);
    p->flags = GEN_P_DENSE;
    gen_chance(p, GEN_C_BROADCAST_QKV, 64); /* stride-0 q, k, v as often as padding */
    p->work_cap = CAP_WORK;
    for (int r = GEN_Q; r <= GEN_V; r++)
        p->val[r].lo = -3.0f, p->val[r].hi = 3.0f;
    /* the precision modes (attn.h): ref.c widens the bounds by the mode's
       terms (ref_attn_compute reads opt.precision) */
    gen_chance(p, GEN_C_OPT(precision), 64);
    gen_range(p, GEN_C_OPT(precision), ATTN_PRECISION_DEFAULT, ATTN_PRECISION_INT8);
    /* draft trees (1.3; drawn last by gen.c, where every sequence fits) */
    gen_chance(p, GEN_C_OPT(tree_parents), 64);
    /* top-k lists (1.7; drawn after the trees) */
    gen_allow_topk(p, 48);
}

/* ------------------------------------------------------------ comparisons */

/*
 * got (table `isa`) and scal (scalar) against the float64 value want with
 * bound err: NaN exactly where want is NaN, infinities exact, else within
 * TOL_PAIR(err) of each other and within err of want.
 */
static void compare(const char *op, const char *what, const char *isa, long long index,
                    float got, float scal, double want, double err)
{
    if (isnan(want)) {
        FZ_CHECK(isnan(got) && isnan(scal), "%s %s[%lld]: want NaN, %s %g, scalar %g", op, what,
                 index, isa, got, scal);
        return;
    }
    if (isinf(want)) {
        FZ_CHECK(got == want && scal == want, "%s %s[%lld]: want %g, %s %g, scalar %g", op, what,
                 index, want, isa, got, scal);
        return;
    }
    FZ_CHECK(isfinite(got) && isfinite(scal), "%s %s[%lld]: want %.9g, %s %g, scalar %g", op,
             what, index, want, isa, got, scal);
    FZ_CHECK(fabs((double)got - (double)scal) <= TOL_PAIR(err),
             "%s %s[%lld]: %s %.9g vs scalar %.9g differ by %.3g > %.3g (float64 %.9g)", op, what,
             index, isa, got, scal, fabs((double)got - scal), TOL_PAIR(err), want);
    FZ_CHECK(fabs((double)got - want) <= err,
             "%s %s[%lld]: %s %.9g vs float64 %.9g differ by %.3g > bound %.3g", op, what, index,
             isa, got, want, fabs((double)got - want), err);
    FZ_CHECK(fabs((double)scal - want) <= err,
             "%s %s[%lld]: scalar %.9g vs float64 %.9g differ by %.3g > bound %.3g", op, what,
             index, scal, want, fabs((double)scal - want), err);
}

/* ------------------------------------------------------------ attention */

typedef struct outputs {
    attn_tensor out;
    float *lse, *max, *ent;
} outputs;

/*
 * The forward on every table into a dense out of `dtype` (F16 or BF16): each
 * element must be the same table's F32 out (res[t]) rounded to nearest even,
 * by tests/ref/ref.c's encoders (a NaN: a NaN of the same sign), and the stats
 * the same bits.
 */
static void forward16(int32_t dtype, const attn_dsp *const *tables, int ntables,
                      const attn_shape *s, const attn_options *opt, const attn_tensor *q,
                      const attn_tensor *k, const attn_tensor *v, int64_t v_dim,
                      const outputs *res)
{
    const int64_t rows = s->batch * s->q_heads * s->q_len;
    const size_t n = (size_t)(rows * v_dim);
    uint16_t *o = malloc(n * 2 + 2);
    float *st = malloc((size_t)rows * 3 * 4 + 4);
    if (!o || !st)
        abort();
    const attn_tensor out = {o, dtype, s->q_heads * s->q_len * v_dim, s->q_len * v_dim, v_dim};
    const attn_row_stats stats = {st, st + rows, st + 2 * rows};
    const uint16_t exp_mask = dtype == ATTN_DTYPE_F16 ? 0x7c00u : 0x7f80u;
    for (int t = 0; t < ntables; t++) {
        const char *isa = tables[t]->isa_name;
        memset(o, 0xa5, n * 2);
        const attn_status status = attn_forward_with(tables[t], s, opt, q, k, v, &out, &stats);
        FZ_CHECK(status == ATTN_OK, "forward, %s out, on %s: status %d", ref_dtype_name(dtype),
                 isa, status);
        const float *f32 = res[t].out.data;
        for (size_t i = 0; i < n; i++) {
            const uint16_t want = dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(f32[i])
                                                          : ref_f32_to_bf16(f32[i]);
            uint32_t bits;
            memcpy(&bits, &f32[i], 4);
            const int ok = isnan(f32[i]) ? (o[i] & exp_mask) == exp_mask &&
                                               (o[i] & ~exp_mask & 0x7fffu) &&
                                               (o[i] >> 15) == (bits >> 31)
                                         : o[i] == want;
            FZ_CHECK(ok, "forward, %s out, on %s: out[%zu] = 0x%04x, want rne(%.9g) = 0x%04x",
                     ref_dtype_name(dtype), isa, i, o[i], f32[i], want);
        }
        const float *want_st[3] = {res[t].lse, res[t].max, res[t].ent};
        for (int w = 0; w < 3; w++)
            FZ_CHECK(memcmp(st + w * rows, want_st[w], (size_t)rows * 4) == 0,
                     "forward, %s out, on %s: stats %d differ from the f32 out's",
                     ref_dtype_name(dtype), isa, w);
    }
    free(o);
    free(st);
}

static void run_attention(fz_reader *r, int op, const attn_dsp *const *tables, int ntables)
{
    gen_profile prof;
    profile_of(&prof);
    gen_src src = fz_gen_source(r);
    gen_problem d;
    if (!gen_draw(&d, &src, &prof))
        return;
    /* NaN wherever nothing may be read (rows past the lengths, row gaps);
       v otherwise finite: the header lets a non-finite v row hidden only by
       a mask turn an output NaN or not depending on tiling (0 * inf) */
    gen_bufs m;
    FZ_CHECK(gen_materialise(&m, &d, fz_u64(r), GEN_M_POISON | (op == OP_FORWARD ? 0 : GEN_M_NO_V),
                             NULL) == 0,
             "gen_materialise");
    char text[896];
    fz_context("%s %s", op_names[op], gen_describe(&d, text, sizeof text));
    const attn_shape s = m.shape;
    attn_options opt = m.opt;
    /* a rounding mode may turn inf * tiny into inf * 0 = NaN where the
       exact product is inf (attn.h; tests/ops/test_precision.c checks that
       case): with non-finite q or k drawn, the default mode */
    if (d.val[GEN_Q].special || d.val[GEN_K].special)
        opt.precision = ATTN_PRECISION_DEFAULT;
    const int64_t v_dim = d.dv;
    const attn_tensor q = m.t[GEN_Q], k = m.t[GEN_K], v = m.t[GEN_V];

    /* attn_mask_apply's input table: scores of the drawn spread */
    attn_tensor scores_in = {0};
    if (op == OP_MASK_APPLY) {
        gen g = {{fz_u64(r)}, 4.0f * d.val[GEN_Q].lo, 4.0f * d.val[GEN_Q].hi, d.val[GEN_Q].special};
        const int64_t n = s.batch * s.q_heads * s.q_len * s.kv_len;
        scores_in = (attn_tensor){malloc((size_t)n * 4), ATTN_DTYPE_F32,
                                  s.q_heads * s.q_len * s.kv_len, s.q_len * s.kv_len, s.kv_len};
        if (!scores_in.data)
            abort();
        for (int64_t i = 0; i < n; i++)
            ((float *)scores_in.data)[i] = gen_value(&g, 1);
    }

    /* float64 reference and bounds */
    ref_attn ref;
    int64_t rescales = 0;
    if (op == OP_FORWARD) {
        uint32_t min_block = tables[0]->block_k;
        for (int t = 1; t < ntables; t++)
            if (tables[t]->block_k < min_block)
                min_block = tables[t]->block_k;
        rescales = (s.kv_len + (int64_t)min_block - 1) / (int64_t)min_block + 1;
    }
    if (op == OP_MASK_APPLY)
        ref_attn_from_scores(&ref, &s, &opt, &scores_in);
    else
        ref_attn_compute(&ref, &s, &opt, &q, &k, op == OP_FORWARD ? &v : NULL, rescales);

    const int64_t rows = s.batch * s.q_heads * s.q_len;
    const int64_t cols = op == OP_FORWARD ? v_dim : s.kv_len;
    outputs res[MAX_TABLES];
    for (int t = 0; t < ntables; t++) {
        outputs *o = &res[t];
        o->out = (attn_tensor){calloc((size_t)(rows * cols), 4), ATTN_DTYPE_F32,
                               s.q_heads * s.q_len * cols, s.q_len * cols, cols};
        o->lse = calloc((size_t)rows, 4);
        o->max = calloc((size_t)rows, 4);
        o->ent = calloc((size_t)rows, 4);
        attn_row_stats st = {o->lse, o->max, o->ent};
        attn_status status;
        switch (op) {
        case OP_SCORES: status = attn_scores_with(tables[t], &s, &opt, &q, &k, &o->out); break;
        case OP_MASK_APPLY:
            for (int64_t b = 0; b < s.batch; b++)
                for (int64_t h = 0; h < s.q_heads; h++)
                    for (int64_t i = 0; i < s.q_len; i++)
                        memcpy(ref_tensor_at(&o->out, b, h, i, 0),
                               ref_tensor_at(&scores_in, b, h, i, 0), (size_t)s.kv_len * 4);
            status = attn_mask_apply_with(tables[t], &s, &opt, &o->out);
            break;
        case OP_WEIGHTS:
            status = attn_weights_with(tables[t], &s, &opt, &q, &k, &o->out, &st);
            break;
        default:
            status = attn_forward_with(tables[t], &s, &opt, &q, &k, &v, &o->out, &st);
            break;
        }
        FZ_CHECK(status == ATTN_OK, "%s on %s: status %d", op_names[op], tables[t]->isa_name,
                 status);
    }

    const double *want = op == OP_FORWARD ? ref.o : op == OP_WEIGHTS ? ref.p : ref.s;
    const double *err = op == OP_FORWARD ? ref.o_err : op == OP_WEIGHTS ? ref.p_err : ref.s_err;
    const float *scal = res[0].out.data;
    for (int t = 1; t < ntables; t++) {
        const float *got = res[t].out.data;
        const char *isa = tables[t]->isa_name;
        for (int64_t row = 0; row < rows; row++) {
            for (int64_t c = 0; c < cols; c++) {
                const int64_t at = row * cols + c;
                if (op == OP_WEIGHTS && ref.row_nan[row] && ref.s[at] == -INFINITY) {
                    /* hidden entries of a NaN row are unspecified, but the
                       same in every table (the driver decides them) */
                    FZ_CHECK(memcmp(&got[at], &scal[at], 4) == 0,
                             "weights[%lld]: hidden entry of a NaN row: %s %g, scalar %g",
                             (long long)at, isa, got[at], scal[at]);
                    continue;
                }
                compare(op_names[op], "out", isa, (long long)at, got[at], scal[at], want[at],
                        err[at]);
            }
            if (op == OP_WEIGHTS || op == OP_FORWARD) {
                compare(op_names[op], "lse", isa, (long long)row, res[t].lse[row], res[0].lse[row],
                        ref.lse[row], ref.lse_err[row]);
                compare(op_names[op], "max_score", isa, (long long)row, res[t].max[row],
                        res[0].max[row], ref.max[row], ref.max_err[row]);
                compare(op_names[op], "entropy", isa, (long long)row, res[t].ent[row],
                        res[0].ent[row], ref.ent[row], ref.ent_err[row]);
            }
        }
    }
    /* the forward into a 16-bit out: byte 0 (or none left) F32 only */
    const unsigned out_kind = op == OP_FORWARD ? fz_u8(r) % 3u : 0u;
    if (out_kind)
        forward16(out_kind == 1 ? ATTN_DTYPE_F16 : ATTN_DTYPE_BF16, tables, ntables, &s, &opt,
                  &q, &k, &v, v_dim, res);
    for (int t = 0; t < ntables; t++) {
        free(res[t].out.data);
        free(res[t].lse);
        free(res[t].max);
        free(res[t].ent);
    }
    ref_attn_free(&ref);
    free(scores_in.data);
    gen_release(&m);
    gen_free(&d);
}

/* ------------------------------------------------------------ row operations */

static void run_rows(fz_reader *r, int op, const attn_dsp *const *tables, int ntables)
{
    const int64_t rows = fz_range(r, 1, 12);
    const int64_t cols = fz_range(r, 1, fz_chance(r, 60) ? 700 : 80);
    const int64_t stride = cols + (fz_chance(r, 80) ? fz_range(r, 1, 9) : 0);
    const size_t n = (size_t)((rows - 1) * stride + cols);
    gen g = {{fz_u64(r)}, -3.0f, 3.0f, 0};
    const int spread = fz_u8(r) % 4;
    if (spread == 1) { g.lo = -0.05f; g.hi = 0.05f; }
    if (spread == 2) { g.lo = -40.0f; g.hi = 40.0f; }
    if (spread == 3) g.specials = (int)fz_range(r, 3, 200);
    const unsigned masked = fz_u8(r); /* share of -inf entries, out of 512 */

    float *x = calloc(n, 4), *dp = calloc(n, 4);
    if (!x || !dp)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (op == OP_SOFTMAX) {
            x[i] = fz_rng_next(&g.rng) % 512 < masked ? -INFINITY : gen_value(&g, 1);
        } else {
            x[i] = fabsf(gen_value(&g, 1)) / 3.0f;
            dp[i] = gen_value(&g, 1);
        }
    }
    if (op == OP_SOFTMAX && fz_chance(r, 60)) /* one row with nothing visible */
        for (int64_t j = 0; j < cols; j++)
            x[fz_range(r, 0, rows - 1) * stride + j] = -INFINITY;

    float *res[MAX_TABLES], *lse[MAX_TABLES];
    for (int t = 0; t < ntables; t++) {
        res[t] = malloc(n * 4);
        lse[t] = malloc((size_t)rows * 4);
        attn_status status;
        if (op == OP_SOFTMAX) {
            memcpy(res[t], x, n * 4);
            status = attn_softmax_with(tables[t], res[t], rows, cols, stride, lse[t]);
        } else {
            memset(res[t], 0, n * 4);
            status = attn_softmax_backward_with(tables[t], x, dp, res[t], rows, cols, stride);
        }
        FZ_CHECK(status == ATTN_OK, "%s on %s: status %d", op_names[op], tables[t]->isa_name,
                 status);
    }
    double *s = malloc((size_t)cols * sizeof(double)), *want = malloc((size_t)cols * sizeof(double)),
           *err = malloc((size_t)cols * sizeof(double));
    for (int64_t i = 0; i < rows; i++) {
        const float *xr = x + i * stride;
        ref_row_stats st = {0};
        if (op == OP_SOFTMAX) {
            for (int64_t j = 0; j < cols; j++)
                s[j] = xr[j];
            ref_softmax_row(s, NULL, (size_t)cols, 0, want, err, &st);
        } else {
            ref_softmax_bwd_row(xr, dp + i * stride, (size_t)cols, want, err);
        }
        for (int t = 1; t < ntables; t++) {
            for (int64_t j = 0; j < cols; j++) {
                const int64_t at = i * stride + j;
                if (op == OP_SOFTMAX && isnan(st.lse) && xr[j] == -INFINITY) {
                    FZ_CHECK(memcmp(&res[t][at], &res[0][at], 4) == 0,
                             "softmax: masked entry of a NaN row: %s %g, scalar %g",
                             tables[t]->isa_name, res[t][at], res[0][at]);
                    continue;
                }
                compare(op_names[op], "x", tables[t]->isa_name, (long long)at, res[t][at],
                        res[0][at], want[j], err[j]);
            }
            if (op == OP_SOFTMAX)
                compare(op_names[op], "lse", tables[t]->isa_name, (long long)i, lse[t][i],
                        lse[0][i], st.lse, st.lse_err);
        }
    }
    /* bytes between rows are not the operation's */
    for (int t = 0; t < ntables; t++)
        for (int64_t i = 0; i + 1 < rows; i++)
            for (int64_t j = cols; j < stride; j++) {
                const int64_t at = i * stride + j;
                const float before = op == OP_SOFTMAX ? x[at] : 0.0f;
                FZ_CHECK(memcmp(&res[t][at], &before, 4) == 0,
                         "%s on %s wrote the gap between rows at %lld", op_names[op],
                         tables[t]->isa_name, (long long)at);
            }
    for (int t = 0; t < ntables; t++) {
        free(res[t]);
        free(lse[t]);
    }
    free(s);
    free(want);
    free(err);
    free(x);
    free(dp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const attn_dsp *tables[MAX_TABLES];
    int ntables = 0;
    tables[ntables++] = attn_dsp_for_isa(ATTN_ISA_SCALAR);
    for (int isa = ATTN_ISA_SCALAR + 1; isa < ATTN_ISA_COUNT; isa++)
        if (attn_dsp_for_isa((attn_isa)isa))
            tables[ntables++] = attn_dsp_for_isa((attn_isa)isa);
#ifdef ATTN_TEST_AVX512_EMU
    const attn_dsp *const emu[EMU_TABLES] = {emu_table_avx512(), emu_table_amx()};
    for (int i = 0; i < EMU_TABLES; i++)
        if (emu[i])
            tables[ntables++] = emu[i];
#endif
    FZ_CHECK(tables[0] != NULL, "no scalar table");
    if (ntables == 1)
        return 0; /* nothing to compare on this CPU/build */

    fz_reader r = {data, size};
    const int op = fz_u8(&r) % OP_FUZZ_DRAWN; /* the operations of its corpus */
    if (op <= OP_FORWARD)
        run_attention(&r, op, tables, ntables);
    else
        run_rows(&r, op, tables, ntables);
    return 0;
}

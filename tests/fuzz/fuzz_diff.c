/*
 * Differential fuzzer: small random problems through every kernel table this
 * build and CPU offer (attn_dsp_for_isa), each compared with the scalar table
 * (the oracle) and with tests/ref.c's float64 reference.
 *
 * Tolerances are tests/tolerance.h's, computed per element by ref.c: every
 * implementation must be within the bound of the exact result, so two of
 * them within twice that of each other (TOL_PAIR). Masks are exact: -inf
 * scores and 0 weights exactly where a key is hidden, NaN exactly where a
 * NaN or +inf score reaches a row, in every table.
 *
 * Inputs: finite values of several spreads, plus NaN/inf sprinkled into q, k
 * and bias (and into the rows beyond kv_lens of v). v is otherwise finite:
 * the header lets a non-finite v row hidden only by a mask turn an output
 * NaN or not depending on tiling (0 * inf), which differs between tables by
 * design.
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
#include "ref.h"
#include "tolerance.h"

#define CAP_WORK ((int64_t)2 << 20)

/* Every registry ISA but scalar (src/isa_list.h) can be compared. */
#define OTHER_ISAS (ATTN_ISA_COUNT - 1 - ATTN_ISA_SCALAR)

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

/* Bytes per element: src/dtype_list.h's, through ref.c. */
static size_t esize(int32_t dt)
{
    return ref_dtype_size(dt);
}

/* A dense-or-padded [B][H][L][C] (or [B][L][H][C]) tensor on the heap. */
static void make_tensor(attn_tensor *t, fz_reader *r, int32_t dtype, int64_t nb, int64_t nh,
                        int64_t nl, int64_t nc, int allow_broadcast)
{
    const int mode = fz_u8(r) % 4;
    const int64_t pad = mode == 1 ? fz_range(r, 1, 7) : 0;
    t->dtype = dtype;
    if (mode == 2) { /* [B][L][H][C] */
        t->head_stride = nc;
        t->row_stride = nh * nc;
        t->batch_stride = nl * nh * nc;
    } else {
        t->row_stride = nc + pad;
        t->head_stride = nl * t->row_stride + pad;
        t->batch_stride = nh * t->head_stride;
    }
    if (mode == 3 && allow_broadcast) {
        if (fz_chance(r, 128)) t->batch_stride = 0;
        if (fz_chance(r, 128)) t->head_stride = 0;
        if (fz_chance(r, 64)) t->row_stride = 0;
    }
    const int64_t last = (nb - 1) * t->batch_stride + (nh - 1) * t->head_stride +
                         (nl - 1) * t->row_stride + nc;
    t->data = calloc((size_t)last, esize(dtype));
    if (!t->data)
        abort();
}

static void store(const attn_tensor *t, int64_t b, int64_t h, int64_t i, int64_t c, float x)
{
    void *p = ref_tensor_at(t, b, h, i, c);
    if (t->dtype == ATTN_DTYPE_F32) {
        memcpy(p, &x, 4);
    } else {
        uint16_t bits = t->dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
        memcpy(p, &bits, 2);
    }
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

static void run_attention(fz_reader *r, int op, const attn_dsp *const *tables, int ntables)
{
    attn_shape s = {0};
    s.batch = fz_range(r, 1, 2);
    s.kv_heads = fz_range(r, 1, 2);
    s.q_heads = s.kv_heads * fz_range(r, 1, 3);
    const int big = fz_chance(r, 40);
    s.q_len = fz_range(r, 1, big ? 70 : 20);
    s.kv_len = fz_range(r, 1, big ? 300 : 40);
    s.head_dim = fz_range(r, 1, fz_chance(r, 30) ? 200 : 72);
    s.v_dim = fz_chance(r, 128) ? 0 : fz_range(r, 1, 72);
    const int64_t v_dim = s.v_dim ? s.v_dim : s.head_dim;
    if (s.batch * s.q_heads * s.q_len * s.kv_len * (s.head_dim + v_dim) > CAP_WORK)
        return;

    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = fz_chance(r, 110) ? ATTN_CAUSAL : 0;
    if (fz_chance(r, 90))
        opt.scale = (float)fz_range(r, -40, 40) / 8.0f;
    if (fz_chance(r, 60))
        opt.softcap = (float)fz_range(r, 1, 400) / 8.0f;
    if (fz_chance(r, 70))
        opt.window = fz_range(r, 1, s.kv_len + 2);
    int32_t q_lens[2] = {0, 0}, kv_lens[2] = {0, 0};
    if (fz_chance(r, 80)) {
        for (int64_t b = 0; b < s.batch; b++) {
            q_lens[b] = (int32_t)fz_range(r, 0, s.q_len);
            kv_lens[b] = (int32_t)fz_range(r, 0, s.kv_len);
        }
        opt.q_lens = fz_chance(r, 128) ? q_lens : NULL;
        opt.kv_lens = kv_lens;
    }

    gen g = {{fz_u64(r)}, -3.0f, 3.0f, 0};
    const int spread = fz_u8(r) % 4;
    if (spread == 1) { g.lo = -0.05f; g.hi = 0.05f; }    /* flat rows */
    if (spread == 2) { g.lo = -12.0f; g.hi = 12.0f; }    /* peaked rows, exp underflow */
    if (spread == 3) g.specials = (int)fz_range(r, 3, 200);

    const int32_t dts[3] = {(int32_t)fz_range(r, 0, 2), (int32_t)fz_range(r, 0, 2),
                            (int32_t)fz_range(r, 0, 2)};
    attn_tensor q = {0}, k = {0}, v = {0}, mask = {0}, bias = {0}, scores_in = {0};
    const int needs_qk = op != OP_MASK_APPLY;
    if (needs_qk) {
        make_tensor(&q, r, dts[0], s.batch, s.q_heads, s.q_len, s.head_dim, 1);
        make_tensor(&k, r, dts[1], s.batch, s.kv_heads, s.kv_len, s.head_dim, 1);
    }
    if (op == OP_FORWARD)
        make_tensor(&v, r, dts[2], s.batch, s.kv_heads, s.kv_len, v_dim, 1);
    if (op == OP_MASK_APPLY)
        make_tensor(&scores_in, r, ATTN_DTYPE_F32, s.batch, s.q_heads, s.q_len, s.kv_len, 0);
    if (fz_chance(r, 90)) {
        make_tensor(&mask, r, ATTN_DTYPE_BOOL, s.batch, s.q_heads, s.q_len, s.kv_len, 1);
        opt.mask = &mask;
    }
    if (fz_chance(r, 90)) {
        make_tensor(&bias, r, ATTN_DTYPE_F32, s.batch, s.q_heads, s.q_len, s.kv_len, 1);
        opt.bias = &bias;
    }
    /* score modifiers: right window edge, sinks, ALiBi slopes ([B][Hq] views) */
    attn_tensor sinks = {0}, slopes = {0};
    if (fz_chance(r, 60))
        opt.window_right = fz_range(r, 1, s.kv_len + 2);
    if (fz_chance(r, 60)) {
        make_tensor(&sinks, r, ATTN_DTYPE_F32, s.batch, s.q_heads, 1, 1, 1);
        opt.sinks = &sinks;
    }
    if (fz_chance(r, 60)) {
        make_tensor(&slopes, r, ATTN_DTYPE_F32, s.batch, s.q_heads, 1, 1, 1);
        opt.alibi_slopes = &slopes;
    }

    /* values, written through the views (broadcast elements written last win) */
    const unsigned mask_density = fz_u8(r);
    for (int64_t b = 0; b < s.batch; b++)
        for (int64_t h = 0; h < s.q_heads; h++) {
            /* a sink may be special (NaN/inf poison the row, -inf is none);
               slopes stay finite: an infinite slope makes 0 * inf at the
               query's own position, a case the bounds do not model */
            if (opt.sinks)
                store(&sinks, b, h, 0, 0, gen_value(&g, 1));
            if (opt.alibi_slopes)
                store(&slopes, b, h, 0, 0, gen_value(&g, 0) / 4.0f);
        }
    for (int64_t b = 0; b < s.batch; b++) {
        for (int64_t h = 0; h < s.q_heads; h++)
            for (int64_t i = 0; i < s.q_len; i++) {
                /* query rows past q_lens are never read either */
                const int padded_q = opt.q_lens && i >= q_lens[b] && q.row_stride != 0 &&
                                     (q.batch_stride != 0 || s.batch == 1);
                if (needs_qk)
                    for (int64_t t = 0; t < s.head_dim; t++)
                        store(&q, b, h, i, t, padded_q ? NAN : gen_value(&g, 1));
                for (int64_t j = 0; j < s.kv_len; j++) {
                    if (opt.mask)
                        *(uint8_t *)ref_tensor_at(&mask, b, h, i, j) =
                            (uint8_t)((fz_rng_next(&g.rng) & 255) >= mask_density / 2 ? 1 + j % 3 : 0);
                    if (opt.bias)
                        store(&bias, b, h, i, j, gen_value(&g, 1));
                    if (op == OP_MASK_APPLY)
                        store(&scores_in, b, h, i, j, gen_value(&g, 1) * 4.0f);
                }
            }
        const int64_t lk = kv_lens[b];
        /* rows past kv_lens are never read: anything goes there, unless a
           broadcast stride shares them with rows that are read */
        const int k_private = k.row_stride != 0 && (k.batch_stride != 0 || s.batch == 1);
        const int v_private = v.row_stride != 0 && (v.batch_stride != 0 || s.batch == 1);
        for (int64_t h = 0; h < s.kv_heads; h++)
            for (int64_t j = 0; j < s.kv_len; j++) {
                const int padded = opt.kv_lens && j >= lk;
                if (needs_qk)
                    for (int64_t t = 0; t < s.head_dim; t++)
                        store(&k, b, h, j, t, padded && k_private ? NAN : gen_value(&g, 1));
                if (op == OP_FORWARD)
                    for (int64_t t = 0; t < v_dim; t++)
                        store(&v, b, h, j, t, padded && v_private ? INFINITY : gen_value(&g, 0));
            }
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
    outputs res[1 + OTHER_ISAS];
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
    for (int t = 0; t < ntables; t++) {
        free(res[t].out.data);
        free(res[t].lse);
        free(res[t].max);
        free(res[t].ent);
    }
    ref_attn_free(&ref);
    free(q.data);
    free(k.data);
    free(v.data);
    free(mask.data);
    free(bias.data);
    free(sinks.data);
    free(slopes.data);
    free(scores_in.data);
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

    float *res[1 + OTHER_ISAS], *lse[1 + OTHER_ISAS];
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
    const attn_dsp *tables[1 + OTHER_ISAS];
    int ntables = 0;
    tables[ntables++] = attn_dsp_for_isa(ATTN_ISA_SCALAR);
    for (int isa = ATTN_ISA_SCALAR + 1; isa < ATTN_ISA_COUNT; isa++)
        if (attn_dsp_for_isa((attn_isa)isa))
            tables[ntables++] = attn_dsp_for_isa((attn_isa)isa);
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

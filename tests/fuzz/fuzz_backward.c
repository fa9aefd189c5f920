/*
 * Differential fuzzer of attn_backward: small random problems (every option
 * of the forward, sinks, ALiBi and two-sided windows included, F32/F16/BF16 inputs, padded and [B,L,H,D] layouts, GQA)
 * through every kernel table this build and CPU offer. Each table runs its
 * own forward, then the backward on that forward's output and lse; every
 * gradient (and dbias) must be within tests/ref_backward.c's bound of the
 * float64 gradient (tolerance.h, "backward"), and each table within the sum
 * of its bound and the scalar table's of the scalar result. Fully masked rows and keys nobody sees
 * must get exactly 0. Both plans of the driver (fused and split) are drawn.
 *
 * Values are finite (a bias may hold -inf): non-finite inputs only test
 * where NaN spreads, which the forward's fuzzer covers; here the point is
 * the arithmetic of the gradients.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "internal.h"
#include "ref.h"
#include "ref_backward.h"
#include "tolerance.h"

#define CAP_WORK ((int64_t)1 << 19)


/* Bytes per element: src/dtype_list.h's, through ref.c. */
static size_t esize(int32_t dt)
{
    return ref_dtype_size(dt);
}

/* [B][H][L][C], padded rows or [B][L][H][C]; broadcast strides when asked. */
static void make_tensor(attn_tensor *t, fz_reader *r, int32_t dtype, int64_t nb, int64_t nh,
                        int64_t nl, int64_t nc, int allow_broadcast)
{
    const int mode = fz_u8(r) % 4;
    const int64_t pad = mode == 1 ? fz_range(r, 1, 5) : 0;
    t->dtype = dtype;
    if (mode == 2) {
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

static void fill(const attn_tensor *t, fz_rng *g, float lo, float hi, int64_t nb, int64_t nh,
                 int64_t nl, int64_t nc)
{
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < nl; i++)
                for (int64_t c = 0; c < nc; c++) {
                    const float x = fz_rng_float(g, lo, hi);
                    void *p = ref_tensor_at(t, b, h, i, c);
                    if (t->dtype == ATTN_DTYPE_F32) {
                        memcpy(p, &x, 4);
                    } else {
                        uint16_t bits =
                            t->dtype == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
                        memcpy(p, &bits, 2);
                    }
                }
}

/* Dense f32 [n][cols] tensor description. */
static attn_tensor dense(float *data, int64_t nh, int64_t nl, int64_t nc)
{
    attn_tensor t = {data, ATTN_DTYPE_F32, nh * nl * nc, nl * nc, nc};
    return t;
}

/* |got - want| <= err, the bound of tests/ref_backward.c (gradual underflow
   included, tolerance.h). */
/* err: this table's bound; scal_err: the scalar table's (each table ran its
   own forward, so their lse and output, hence their bounds, differ). */
static void compare(const char *what, const char *isa, size_t at, float got, float scal,
                    double want, double err, double scal_err)
{
    FZ_CHECK(isfinite(got), "%s[%zu]: %s gives %g, float64 %.9g", what, at, isa, got, want);
    if (err == 0.0 && want == 0.0) {
        FZ_CHECK(got == 0.0f, "%s[%zu]: %s %g where the gradient is exactly 0", what, at, isa,
                 got);
        return;
    }
    FZ_CHECK(fabs((double)got - want) <= err,
             "%s[%zu]: %s %.9g vs float64 %.9g differ by %.3g > bound %.3g", what, at, isa, got,
             want, fabs((double)got - want), err);
    FZ_CHECK(fabs((double)got - scal) <= err + scal_err,
             "%s[%zu]: %s %.9g vs scalar %.9g differ by %.3g > %.3g", what, at, isa, got, scal,
             fabs((double)got - scal), err + scal_err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader rd = {data, size}, *r = &rd;
    attn_shape s = {0};
    s.batch = fz_range(r, 1, 2);
    s.kv_heads = fz_range(r, 1, 2);
    s.q_heads = s.kv_heads * fz_range(r, 1, 3);
    s.q_len = fz_range(r, 1, fz_chance(r, 40) ? 70 : 20);
    s.kv_len = fz_range(r, 1, fz_chance(r, 40) ? 150 : 40);
    s.head_dim = fz_range(r, 1, fz_chance(r, 30) ? 130 : 40);
    s.v_dim = fz_chance(r, 128) ? 0 : fz_range(r, 1, 40);
    const int64_t dv = s.v_dim ? s.v_dim : s.head_dim;
    if (s.batch * s.q_heads * s.q_len * s.kv_len * (s.head_dim + dv) > CAP_WORK)
        return 0;

    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = fz_chance(r, 110) ? ATTN_CAUSAL : 0;
    if (fz_chance(r, 90))
        opt.scale = (float)fz_range(r, -24, 24) / 8.0f;
    if (fz_chance(r, 70))
        opt.softcap = (float)fz_range(r, 4, 240) / 8.0f;
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
    /* either plan of the driver, whatever the shape (backward.c) */
    attn_bwd_fused_min_tasks = fz_chance(r, 128) ? 1 : INT64_MAX;
    static const int32_t dtypes[] = {ATTN_DTYPE_F32, ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    const int32_t qt = dtypes[fz_u8(r) % 3], kt = dtypes[fz_u8(r) % 3];
    float lo = -2.0f, hi = 2.0f;
    const int spread = fz_u8(r) % 3;
    if (spread == 1) { lo = -0.05f; hi = 0.05f; } /* flat rows */
    if (spread == 2) { lo = -6.0f; hi = 6.0f; }   /* peaked rows, exp underflow */
    fz_rng g = {fz_u64(r) | 1};

    attn_tensor q, k, v, mask = {0}, bias = {0};
    make_tensor(&q, r, qt, s.batch, s.q_heads, s.q_len, s.head_dim, 1);
    make_tensor(&k, r, kt, s.batch, s.kv_heads, s.kv_len, s.head_dim, 1);
    make_tensor(&v, r, kt, s.batch, s.kv_heads, s.kv_len, dv, 1);
    fill(&q, &g, lo, hi, s.batch, s.q_heads, s.q_len, s.head_dim);
    fill(&k, &g, lo, hi, s.batch, s.kv_heads, s.kv_len, s.head_dim);
    fill(&v, &g, -4.0f, 4.0f, s.batch, s.kv_heads, s.kv_len, dv);
    if (fz_chance(r, 70)) {
        make_tensor(&mask, r, ATTN_DTYPE_BOOL, s.batch, s.q_heads, s.q_len, s.kv_len, 1);
        const unsigned hidden = fz_u8(r);
        for (int64_t b = 0; b < s.batch; b++)
            for (int64_t h = 0; h < s.q_heads; h++)
                for (int64_t i = 0; i < s.q_len; i++)
                    for (int64_t j = 0; j < s.kv_len; j++)
                        *(uint8_t *)ref_tensor_at(&mask, b, h, i, j) =
                            fz_rng_next(&g) % 256 >= hidden;
        opt.mask = &mask;
    }
    if (fz_chance(r, 70)) {
        make_tensor(&bias, r, ATTN_DTYPE_F32, s.batch, s.q_heads, s.q_len, s.kv_len, 1);
        for (int64_t b = 0; b < s.batch; b++)
            for (int64_t h = 0; h < s.q_heads; h++)
                for (int64_t i = 0; i < s.q_len; i++)
                    for (int64_t j = 0; j < s.kv_len; j++) {
                        float x = fz_rng_next(&g) % 16 ? fz_rng_float(&g, -3.0f, 3.0f)
                                                       : -INFINITY;
                        memcpy(ref_tensor_at(&bias, b, h, i, j), &x, 4);
                    }
        opt.bias = &bias;
    }
    const int64_t rows = s.batch * s.q_heads * s.q_len;
    /* dout in any input dtype (read last: older corpus inputs keep their meaning) */
    const int32_t dout_type = dtypes[fz_u8(r) % 3];
    void *dout = malloc((size_t)(rows * dv) * esize(dout_type));
    if (!dout)
        abort();
    attn_tensor dt = dense(dout, s.q_heads, s.q_len, dv);
    dt.dtype = dout_type;
    fill(&dt, &g, -2.0f, 2.0f, s.batch, s.q_heads, s.q_len, dv);
    /* score modifiers, read after everything above: right window edge,
       sinks and ALiBi slopes ([B][Hq] views, broadcast strides allowed) */
    attn_tensor sinks = {0}, slopes = {0};
    if (fz_chance(r, 60))
        opt.window_right = fz_range(r, 1, s.kv_len + 2);
    if (fz_chance(r, 60)) {
        make_tensor(&sinks, r, ATTN_DTYPE_F32, s.batch, s.q_heads, 1, 1, 1);
        fill(&sinks, &g, -3.0f, 3.0f, s.batch, s.q_heads, 1, 1);
        opt.sinks = &sinks;
    }
    if (fz_chance(r, 60)) {
        make_tensor(&slopes, r, ATTN_DTYPE_F32, s.batch, s.q_heads, 1, 1, 1);
        fill(&slopes, &g, 0.0f, 0.5f, s.batch, s.q_heads, 1, 1);
        opt.alibi_slopes = &slopes;
    }

    ref_bwd_in in;
    ref_bwd_load(&in, &s, &opt, &q, &k, &v, &dt);
    const size_t nq = (size_t)(rows * s.head_dim),
                 nk = (size_t)(s.batch * s.kv_heads * s.kv_len), nb = (size_t)(rows * s.kv_len);
    float *scalar[5] = {0};
    ref_grads sref = {0}; /* the scalar table's gradients' bounds */
    /* every registry ISA (src/isa_list.h) this build and CPU run, scalar first */
    for (int t = ATTN_ISA_SCALAR; t < ATTN_ISA_COUNT; t++) {
        const attn_dsp *tab = attn_dsp_for_isa((attn_isa)t);
        if (!tab)
            continue;
        float *out = malloc((size_t)(rows * dv) * 4), *lse = malloc((size_t)rows * 4);
        float *gq = malloc(nq * 4), *gk = malloc(nk * (size_t)s.head_dim * 4),
              *gv = malloc(nk * (size_t)dv * 4), *gb = malloc(nb * 4);
        float *gs = malloc((size_t)(s.batch * s.q_heads) * 4);
        if (!out || !lse || !gq || !gk || !gv || !gb || !gs)
            abort();
        const attn_tensor ot = dense(out, s.q_heads, s.q_len, dv);
        const attn_row_stats st = {lse, NULL, NULL};
        FZ_CHECK(attn_forward_with(tab, &s, &opt, &q, &k, &v, &ot, &st) == ATTN_OK,
                 "forward on %s", tab->isa_name);
        const attn_tensor tq = dense(gq, s.q_heads, s.q_len, s.head_dim);
        const attn_tensor tk = dense(gk, s.kv_heads, s.kv_len, s.head_dim);
        const attn_tensor tv = dense(gv, s.kv_heads, s.kv_len, dv);
        const attn_tensor tb = dense(gb, s.q_heads, s.q_len, s.kv_len);
        attn_grads gr = ATTN_GRADS_INIT;
        gr.dq = &tq;
        gr.dk = &tk;
        gr.dv = &tv;
        gr.dbias = &tb;
        gr.dsinks = opt.sinks ? gs : NULL;
        FZ_CHECK(attn_backward_with(tab, &s, &opt, &q, &k, &v, &ot, &dt, lse, &gr) == ATTN_OK,
                 "backward on %s", tab->isa_name);

        ref_grads ref;
        ref_bwd_grads(&ref, &in, lse, out);
        if (t == ATTN_ISA_SCALAR) {
            scalar[0] = gq;
            scalar[1] = gk;
            scalar[2] = gv;
            scalar[3] = gb;
            scalar[4] = gs;
            ref_bwd_grads(&sref, &in, lse, out);
        }
        const char *isa = tab->isa_name;
        for (size_t i = 0; i < nq; i++)
            compare("dq", isa, i, gq[i], scalar[0][i], ref.dq[i], ref.dq_err[i], sref.dq_err[i]);
        for (size_t i = 0; i < nk * (size_t)s.head_dim; i++)
            compare("dk", isa, i, gk[i], scalar[1][i], ref.dk[i], ref.dk_err[i], sref.dk_err[i]);
        for (size_t i = 0; i < nk * (size_t)dv; i++)
            compare("dv", isa, i, gv[i], scalar[2][i], ref.dv[i], ref.dv_err[i], sref.dv_err[i]);
        for (size_t i = 0; i < nb; i++)
            compare("dbias", isa, i, gb[i], scalar[3][i], ref.ds[i], ref.ds_err[i],
                    sref.ds_err[i]);
        if (opt.sinks)
            for (size_t i = 0; i < (size_t)(s.batch * s.q_heads); i++)
                compare("dsinks", isa, i, gs[i], scalar[4][i], ref.dsinks[i], ref.dsinks_err[i],
                        sref.dsinks_err[i]);
        ref_grads_free(&ref);
        free(out);
        free(lse);
        if (t != ATTN_ISA_SCALAR) {
            free(gq);
            free(gk);
            free(gv);
            free(gb);
            free(gs);
        }
    }
    for (int i = 0; i < 5; i++)
        free(scalar[i]);
    ref_grads_free(&sref);
    ref_bwd_free(&in);
    free(dout);
    free(q.data);
    free(k.data);
    free(v.data);
    free(mask.data);
    free(bias.data);
    free(sinks.data);
    free(slopes.data);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Differential fuzzer of attn_backward: small random problems from the
 * problem generator (problems/gen.h; every option of the forward the backward
 * takes, sinks, ALiBi, two-sided windows and global positions included,
 * F32/F16/BF16 inputs,
 * padded, [B,L,H,D] and broadcast layouts, GQA)
 * through every kernel table this build and CPU offer. Each table runs its
 * own forward, then the backward on that forward's output and lse; every
 * gradient (and dbias) must be within tests/ref/ref_backward.c's bound of the
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

#include "dtypes.h"
#include "fuzz_util.h"
#include "internal.h"
#include "ref/ref.h"
#include "ref/ref_backward.h"
#include "tolerance.h"

#define CAP_WORK ((int64_t)1 << 19)


/* Bytes per element: src/dtype_list.h's, through ref.c. */
static size_t esize(int32_t dt)
{
    return ref_dtype_size(dt);
}

static void fill(const attn_tensor *t, fz_rng *g, float lo, float hi, int64_t nb, int64_t nh,
                 int64_t nl, int64_t nc)
{
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < nl; i++)
                for (int64_t c = 0; c < nc; c++)
                    gen_store(ref_tensor_at(t, b, h, i, c), t->dtype, fz_rng_float(g, lo, hi));
}

/* Dense problems with every option attn_backward takes, global positions
   (q_pos/k_pos) included; the packed and left-padded layouts are checked
   bit for bit against dense calls by tests/ops/test_backward.c (layouts_match_
   dense), pages and quantized K/V are not the backward's. */
static void profile_of(gen_profile *p)
{
    gen_profile_init(p);
    p->flags = GEN_P_DENSE;
    p->work_cap = CAP_WORK;
    gen_range(p, GEN_C_BATCH, 1, 2);
    p->rule[GEN_C_KV_LEN].wide_hi = 150;
    gen_range(p, GEN_C_HEAD_DIM, 1, 40);
    /* now and then past the AVX-512 K panel's 128 dims (src/x86/tile_avx512_tmpl.h) */
    p->rule[GEN_C_HEAD_DIM].wide = 30, p->rule[GEN_C_HEAD_DIM].wide_hi = 160;
    gen_range(p, GEN_C_V_DIM, 1, 40);
    gen_chance(p, GEN_C_V_DIM, 128);
    gen_chance(p, GEN_C_BROADCAST_QKV, 64); /* stride-0 q, k, v as often as padding */
    gen_never(p, GEN_C_SPECIALS);
    /* values finite: non-finite inputs only test where NaN spreads, which
       the forward's fuzzer covers; a bias may hold -inf */
    static const int64_t spreads[] = {GEN_SPREAD_FLAT, GEN_SPREAD_PEAKED};
    p->rule[GEN_C_SPREAD] = (gen_rule){170, 0, 0, 0, 0, 0, 0.0, spreads, 2};
    p->val[GEN_V].lo = -4.0f, p->val[GEN_V].hi = 4.0f;
    p->val[GEN_OPT(sinks)] = (gen_values){GEN_VAL_UNIFORM, -3.0f, 3.0f, 0, 0, 0, 0, 0, 0};
    p->val[GEN_OPT(alibi_slopes)] = (gen_values){GEN_VAL_UNIFORM, 0.0f, 0.5f, 0, 0, 0, 0, 0, 0};
    /* the bf16 mode (attn.h 1.10) now and then, forward and backward: the
       reference widens the score bound by the mode's terms (ref_backward.c) */
    gen_range(p, GEN_C_OPT(precision), ATTN_PRECISION_BF16, ATTN_PRECISION_BF16);
    gen_chance(p, GEN_C_OPT(precision), 64);
}

/* Dense f32 [n][cols] tensor description. */
static attn_tensor dense(float *data, int64_t nh, int64_t nl, int64_t nc)
{
    attn_tensor t = {data, ATTN_DTYPE_F32, nh * nl * nc, nl * nc, nc};
    return t;
}

/* |got - want| <= err, the bound of tests/ref/ref_backward.c (gradual underflow
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
    gen_profile prof;
    profile_of(&prof);
    gen_src src = fz_gen_source(r);
    gen_problem d;
    if (!gen_draw(&d, &src, &prof))
        return 0;
    /* either plan of the driver, whatever the shape (backward.c) */
    attn_bwd_fused_min_tasks = fz_chance(r, 128) ? 1 : INT64_MAX;
    gen_bufs m;
    FZ_CHECK(gen_materialise(&m, &d, fz_u64(r), 0, NULL) == 0, "gen_materialise");
    char text[896];
    fz_context("%s", gen_describe(&d, text, sizeof text));
    const attn_shape s = m.shape;
    const attn_options opt = m.opt;
    const attn_tensor q = m.t[GEN_Q], k = m.t[GEN_K], v = m.t[GEN_V];
    const int64_t dv = d.dv;
    fz_rng g = {fz_u64(r) | 1};

    const int64_t rows = s.batch * s.q_heads * s.q_len;
    /* dout in any input dtype */
    int32_t dtypes[ATTN_DTYPE_COUNT]; /* the float dtypes (tests/dtypes.h) */
    const int n_dtypes = test_dtypes_of(DT_FLOAT, dtypes);
    const int32_t dout_type = dtypes[fz_u8(r) % n_dtypes];
    void *dout = malloc((size_t)(rows * dv) * esize(dout_type));
    if (!dout)
        abort();
    attn_tensor dt = dense(dout, s.q_heads, s.q_len, dv);
    dt.dtype = dout_type;
    fill(&dt, &g, -2.0f, 2.0f, s.batch, s.q_heads, s.q_len, dv);

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
    gen_release(&m);
    gen_free(&d);
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Quantized K/V fuzzer. Two kinds of input, chosen by the first byte:
 *
 *  - attention on a quantized cache: a small problem (GQA, causal, window,
 *    kv_lens, [B,H,L,D] or [B,L,H,D] with padded strides counted in blocks)
 *    whose K and V caches (Q8_0, Q4_0, FP8 E4M3 or E5M2, each its own) are the
 *    fuzzer's raw bytes, in buffers that end at a PROT_NONE page; k_scale /
 *    v_scale sometimes hostile, or (read last, so older inputs keep their
 *    meaning) scales per row, k_scales / v_scales (attn.h 1.6: per token
 *    and head, per head or per token, values sometimes hostile, given
 *    with any dtype and beside a k_scale), and after them (likewise) a
 *    tail of the key rows (attn.h 1.9: k_tail, F32/F16/BF16 raw bytes in
 *    a buffer of its own; an FP8 k then needs scale groups, else
 *    ATTN_ERR_ARG), and after it scale groups (attn.h 1.8: a drawn per-row
 *    scale tensor of an FP8 cache becomes cols / g scales per row, g a
 *    divisor of the row's own columns). Every kernel table (attn_dsp_for_isa) runs
 *    scores and forward. The status must be what attn.h says for those
 *    arguments; on success, and when every decoded value is finite, each
 *    result must be within tests/tolerance.h's bound (ref.c, on the decoded
 *    F32 tensors) of the float64 reference; with NaN/inf decoded values it
 *    must simply not crash or read outside the cache;
 *
 *  - attn_quantize on rows of raw float bit patterns: the status must match
 *    (non-finite or scale-overflowing Q8_0/Q4_0 rows refused, nothing
 *    written), and accepted rows must equal tests/ref/ref_quant.c's reference
 *    quantizers byte for byte.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "fuzz_util.h"
#include "internal.h"
#include "isa_list.h"
#include "ref/ref.h"
#include "ref/ref_quant.h"
#include "tolerance.h"

/* every registry table (src/isa_list.h) */
static const attn_isa isas[] = {
#define ISA_ENTRY(ID, name, cpu, init, base, have) ATTN_ISA_##ID,
    ATTN_ISA_LIST(ISA_ENTRY)
#undef ISA_ENTRY
};
#define N_ISAS (sizeof isas / sizeof isas[0])

/* The quantized dtypes, src/dtype_list.h's kinds QBLOCK, FP8 and ASYM
   (tests/dtypes.h), a byte picking one by index. The committed corpus was
   written for N_QUANT of them: a dtype the list gains stops every input
   (quant_dtype) until it is drawn here, which changes what the corpus's
   bytes mean (refresh it: tests/fuzz/README.md), or this says why not. */
#define N_QUANT 6

static int32_t quant_dtype(int64_t i)
{
    int32_t dts[ATTN_DTYPE_COUNT];
    if (test_dtypes_of(DT_QUANT, dts) != N_QUANT) {
        fprintf(stderr, "fuzz_quant: src/dtype_list.h has a quantized dtype this fuzzer "
                        "does not draw (N_QUANT)\n");
        abort();
    }
    return dts[i];
}

/* FP8 (E4M3, E5M2): one byte per value, any row length, k_scale / v_scale. */
static int is_fp8(int32_t dt)
{
    return test_dtype_is(dt, DT_FP8);
}

/* OpenVINO's records (U8_ASYM, U4_ASYM): a header per group of values. */
static int is_asym(int32_t dt)
{
    return test_dtype_is(dt, DT_ASYM);
}

/* Stride units of one row of n values (an ASYM row: records of `group`
   values, 0 the row). */
static int64_t units_of_g(int32_t dt, int64_t n, int64_t group)
{
    const int64_t units = n / ref_dtype_block(dt);
    return is_asym(dt) && n > 0 ? units + n / (group ? group : n) * 8 : units;
}

static int64_t units_of(int32_t dt, int64_t n)
{
    return units_of_g(dt, n, 0);
}

/* An ASYM cache's group for rows of cols values, read only for one: the
   whole row now and then, else a divisor of cols that makes whole records
   (U4: even), or 0 where there is none. */
static int64_t pick_group(fz_reader *r, int32_t dt, int64_t cols)
{
    if (!is_asym(dt) || fz_chance(r, 80))
        return 0;
    int64_t divs[80], nd = 0;
    for (int64_t d = 1; d <= cols && nd < 80; d++)
        if (cols % d == 0 && d % ref_dtype_block(dt) == 0)
            divs[nd++] = d;
    return nd ? divs[fz_range(r, 0, nd - 1)] : 0;
}

typedef struct cache {
    attn_tensor t;
    fz_buf buf;
    float *dense; /* decoded [b][h][row][col], for the reference */
    int finite;
} cache;

/* A cache of raw fuzzer bytes with the given layout; its decoded copy. */
static void make_cache(cache *c, fz_reader *r, int32_t dt, const attn_shape *s, int64_t cols,
                       int64_t group, int blhd, int64_t pad)
{
    const int64_t units = units_of_g(dt, cols, group);
    c->t.dtype = dt;
    if (blhd) {
        c->t.row_stride = s->kv_heads * units + pad;
        c->t.head_stride = units;
        c->t.batch_stride = s->kv_len * c->t.row_stride;
    } else {
        c->t.row_stride = units + pad;
        c->t.head_stride = s->kv_len * c->t.row_stride;
        c->t.batch_stride = s->kv_heads * c->t.head_stride;
    }
    const int64_t span = (s->batch - 1) * c->t.batch_stride + (s->kv_heads - 1) * c->t.head_stride +
                         (s->kv_len - 1) * c->t.row_stride + units;
    const size_t ub = ref_quant_unit_bytes(dt);
    unsigned char *data = fz_buf_alloc(&c->buf, (size_t)span * ub, fz_chance(r, 64));
    fz_rng g = {fz_u64(r)};
    const int mostly_sane = !fz_chance(r, 40);
    for (size_t i = 0; i < (size_t)span * ub; i++)
        data[i] = (unsigned char)fz_rng_next(&g);
    c->t.data = data;
    c->dense = malloc((size_t)(s->batch * s->kv_heads * s->kv_len * cols) * sizeof(float));
    c->finite = 1;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t h = 0; h < s->kv_heads; h++)
            for (int64_t j = 0; j < s->kv_len; j++) {
                unsigned char *row = data + (size_t)(b * c->t.batch_stride + h * c->t.head_stride +
                                                     j * c->t.row_stride) * ub;
                if (mostly_sane && is_asym(dt)) {
                    /* modest finite scales and zero points; any codes */
                    const int64_t gr = group ? group : cols, rec = units_of_g(dt, gr, gr);
                    for (int64_t at = 0; at + rec <= units; at += rec) {
                        const float sc = (float)(1 + row[at] % 200) / 1024.0f,
                                    zp = (float)(row[at + 4] % 255) - 20.0f + row[at + 5] / 256.0f;
                        memcpy(row + at, &sc, 4);
                        memcpy(row + at + 4, &zp, 4);
                    }
                } else if (mostly_sane && !is_fp8(dt))
                    for (int64_t blk = 0; blk < units; blk++) {
                        /* a modest finite scale: byte 1 of the f16 in 0x10..0x2f */
                        row[blk * (int64_t)ub + 1] = (unsigned char)(0x10 + row[blk * (int64_t)ub + 1] % 0x20);
                    }
                if (mostly_sane && dt == ATTN_DTYPE_FP8_E4M3)
                    for (int64_t t = 0; t < cols; t++)
                        if ((row[t] & 0x7f) == 0x7f)
                            row[t] ^= 0x01; /* not NaN */
                if (mostly_sane && dt == ATTN_DTYPE_FP8_E5M2)
                    for (int64_t t = 0; t < cols; t++)
                        if ((row[t] & 0x7c) == 0x7c)
                            row[t] ^= 0x40; /* exponent 01111..: finite, not inf or NaN */
                for (int64_t t = 0; t < cols; t++) {
                    const double x = ref_quant_value_g(dt, row, (size_t)t, (size_t)group);
                    c->finite &= isfinite(x);
                    c->dense[((b * s->kv_heads + h) * s->kv_len + j) * cols + t] = (float)x;
                }
            }
}

static void free_cache(cache *c)
{
    fz_buf_free(&c->buf);
    free(c->dense);
}

static float pick_scale(fz_reader *r, int *ok)
{
    static const float hostile[] = {-1.0f, NAN, INFINITY, -0.0f, 1e-45f, 3e38f};
    if (fz_chance(r, 30)) {
        const float v = hostile[fz_range(r, 0, 5)];
        *ok = v == 0.0f || (isnormal(v) && v > 0.0f); /* 0 or a positive normal float */
        return v;
    }
    *ok = 1;
    return fz_chance(r, 60) ? 0.0f : (float)fz_range(r, 1, 1000) / 997.0f;
}

static void check_close(const char *what, const char *isa, const float *got, const double *want,
                        const double *err, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i]) || isinf(want[i])) {
            FZ_CHECK((isnan(want[i]) && isnan(got[i])) || (double)got[i] == want[i],
                     "%s[%zu] on %s: got %.9g, want %.17g", what, i, isa, (double)got[i], want[i]);
            continue;
        }
        /* a value that may lie beyond the f32 range (a huge v_scale) is
           correctly rounded to an infinity of its sign */
        if (fabs(want[i]) + err[i] >= (double)FLT_MAX && isinf(got[i]) &&
            !!signbit(got[i]) == !!signbit(want[i]))
            continue;
        FZ_CHECK(fabs((double)got[i] - want[i]) <= err[i],
                 "%s[%zu] on %s: got %.9g, want %.17g, error %.3g > bound %.3g", what, i, isa,
                 (double)got[i], want[i], fabs((double)got[i] - want[i]), err[i]);
    }
}

static void fuzz_attention(fz_reader *r)
{
    attn_shape s;
    s.batch = fz_range(r, 1, 2);
    s.kv_heads = fz_range(r, 1, 2);
    s.q_heads = s.kv_heads * fz_range(r, 1, 3);
    s.q_len = fz_range(r, 1, 9);
    s.kv_len = fz_range(r, 1, 40);
    const int32_t kdt = quant_dtype(fz_range(r, 0, N_QUANT - 1)),
                  vdt = quant_dtype(fz_range(r, 0, N_QUANT - 1));
    /* one byte per value: any row length */
    s.head_dim = is_fp8(kdt) || kdt == ATTN_DTYPE_U8_ASYM ? fz_range(r, 1, 70) : 32 * fz_range(r, 1, 3);
    s.v_dim = is_fp8(vdt) || vdt == ATTN_DTYPE_U8_ASYM ? fz_range(r, 1, 70) : 32 * fz_range(r, 1, 3);
    int shape_ok = 1;
    if (fz_chance(r, 20)) { /* a row that is not whole blocks */
        s.head_dim += fz_range(r, 1, 31);
        shape_ok = is_fp8(kdt) || kdt == ATTN_DTYPE_U8_ASYM ||
                   (kdt == ATTN_DTYPE_U4_ASYM && s.head_dim % 2 == 0);
    }
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.scale = (float)fz_range(r, 1, 64) / 128.0f;
    if (fz_chance(r, 128))
        opt.flags |= ATTN_CAUSAL;
    if (fz_chance(r, 60))
        opt.window = fz_range(r, 1, 20);
    int32_t kv_lens[2];
    if (fz_chance(r, 60)) {
        for (int64_t b = 0; b < s.batch; b++)
            kv_lens[b] = (int32_t)fz_range(r, 0, s.kv_len);
        opt.kv_lens = kv_lens;
    }
    int ks_ok, vs_ok;
    opt.k_scale = pick_scale(r, &ks_ok);
    opt.v_scale = pick_scale(r, &vs_ok);
    const int vs_finite = vs_ok; /* every operation checks both scales' range */
    /* a scale other than 0/1 is for FP8 only; the folded score scale must stay finite, nonzero */
    if (!is_fp8(kdt) && opt.k_scale != 0.0f && opt.k_scale != 1.0f)
        ks_ok = 0;
    if (!is_fp8(vdt) && opt.v_scale != 0.0f && opt.v_scale != 1.0f)
        vs_ok = 0;
    float qk_scale = opt.scale;
    if (ks_ok && is_fp8(kdt) && opt.k_scale != 0.0f) {
        qk_scale = opt.scale * opt.k_scale;
        if (!isnormal(qk_scale))
            ks_ok = 0;
    }
    const int blhd = fz_chance(r, 100);
    const int64_t pad = fz_range(r, 0, 2);

    cache kc, vc;
    /* a row that is not whole blocks: the cache holds the whole blocks */
    const int64_t kc_cols = s.head_dim - (shape_ok ? 0 : s.head_dim % 32);
    /* an ASYM cache's records (read only for one, as the group of a
       shape the call refuses is never used) */
    opt.k_scale_group = shape_ok ? pick_group(r, kdt, kc_cols) : 0;
    opt.v_scale_group = pick_group(r, vdt, s.v_dim);
    make_cache(&kc, r, kdt, &s, kc_cols, opt.k_scale_group, blhd, pad);
    make_cache(&vc, r, vdt, &s, s.v_dim, opt.v_scale_group, blhd, pad);

    fz_rng g = {fz_u64(r)};
    int compare = shape_ok && ks_ok && vs_ok && kc.finite && vc.finite;
    const size_t qn = (size_t)(s.batch * s.q_heads * s.q_len * s.head_dim);
    float *q = malloc(qn * sizeof(float));
    for (size_t i = 0; i < qn; i++)
        q[i] = fz_rng_float(&g, -1.0f, 1.0f);
    attn_tensor qt = {q, ATTN_DTYPE_F32, s.q_heads * s.q_len * s.head_dim, s.q_len * s.head_dim,
                      s.head_dim};
    const size_t rows = (size_t)(s.batch * s.q_heads * s.q_len);
    float *out = malloc(rows * (size_t)s.v_dim * sizeof(float));
    float *sc = malloc(rows * (size_t)s.kv_len * sizeof(float));
    const attn_tensor ot = {out, ATTN_DTYPE_F32, s.q_heads * s.q_len * s.v_dim, s.q_len * s.v_dim,
                            s.v_dim};
    const attn_tensor st = {sc, ATTN_DTYPE_F32, s.q_heads * s.q_len * s.kv_len,
                            s.q_len * s.kv_len, s.kv_len};

    /* scales per row (1.6), drawn last: an input that ends before them
       (every corpus entry older than them) draws none */
    attn_tensor rows_t[2];
    float *rows_data[2] = {NULL, NULL};
    int rows_tame = 1; /* every scale finite and far from over/underflow */
    int rows_bad_k = 0, rows_bad_v = 0;
    for (int x = 0; x < 2; x++) {
        if (fz_u8(r) < 170)
            continue;
        const int kind = (int)fz_range(r, 0, 2);
        attn_tensor *t = &rows_t[x];
        if (blhd)
            *t = (attn_tensor){NULL, ATTN_DTYPE_F32, s.kv_len * s.kv_heads, 1, s.kv_heads};
        else
            *t = (attn_tensor){NULL, ATTN_DTYPE_F32, s.kv_heads * s.kv_len, s.kv_len, 1};
        if (kind == 1) /* per head */
            t->batch_stride = t->row_stride = 0;
        else if (kind == 2) /* per token */
            t->head_stride = 0;
        /* beside an ASYM cache with records of g values the options
           describe cols / g scales per row (attn.h, k_scale_group): a view
           that wide, refused as the ASYM cache's, but valid memory for the
           operations that do not read that cache (and range it so) */
        const int64_t xg = x ? opt.v_scale_group : opt.k_scale_group,
                      xcols = x ? s.v_dim : kc_cols, G = xg > 0 ? xcols / xg : 1;
        t->batch_stride *= G;
        t->head_stride *= G;
        t->row_stride *= G;
        const size_t n = (size_t)(s.batch * s.kv_heads * s.kv_len * G);
        rows_data[x] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            static const float hostile[] = {-1.0f, NAN, INFINITY, -0.0f, 1e-45f, 3e38f};
            const float v = fz_chance(r, 8) ? hostile[fz_range(r, 0, 5)]
                                            : (float)fz_range(r, 1, 1000) / 997.0f;
            rows_tame &= isfinite(v) && fabsf(v) < 1e30f && (v == 0.0f || fabsf(v) > 1e-30f);
            rows_data[x][i] = v;
        }
        t->data = rows_data[x];
        if (x == 0) {
            opt.k_scales = t;
            rows_bad_k = !is_fp8(kdt) || opt.k_scale != 0.0f;
        } else {
            opt.v_scales = t;
            rows_bad_v = !is_fp8(vdt) || opt.v_scale != 0.0f;
        }
    }
    if (opt.k_scales && is_fp8(kdt))
        qk_scale = opt.scale; /* each key's own fl(scale * k_scales_j): ref.c */
    if (!rows_tame || rows_bad_k || rows_bad_v)
        compare = 0;

    /* a tail of n values per key row (1.9), drawn after the scales: the
       call's head_dim grows by n, q is drawn again at that width, and the
       reference's K rows are the decoded cache rows then the tail's */
    int32_t tail_dtypes[ATTN_DTYPE_COUNT]; /* the float dtypes (tests/dtypes.h) */
    const int n_tails = test_dtypes_of(DT_FLOAT, tail_dtypes);
    attn_tensor tail_t = {0};
    fz_buf tail_buf = {0};
    float *kdense = kc.dense;
    int tail_bad = 0;
    const int64_t k_cols = s.head_dim;
    if (fz_u8(r) >= 200) {
        const int64_t n = fz_range(r, 1, 24), H = s.kv_heads, L = s.kv_len;
        const int32_t tdt = tail_dtypes[fz_range(r, 0, n_tails - 1)];
        const size_t eb = tdt == ATTN_DTYPE_F32 ? 4 : 2;
        tail_t = (attn_tensor){NULL, tdt, H * L * n, L * n, n};
        unsigned char *td = fz_buf_alloc(&tail_buf, (size_t)(s.batch * H * L * n) * eb,
                                         fz_chance(r, 64));
        const int sane = !fz_chance(r, 40);
        fz_rng tg = {fz_u64(r)};
        s.head_dim += n;
        kdense = malloc((size_t)(s.batch * H * L * s.head_dim) * sizeof(float));
        for (int64_t row = 0; row < s.batch * H * L; row++) {
            /* the decoded rows (without a whole-block row, garbage past it:
               such a call is refused, never compared) */
            memset(kdense + row * s.head_dim, 0, (size_t)k_cols * 4);
            memcpy(kdense + row * s.head_dim, kc.dense + row * kc_cols, (size_t)kc_cols * 4);
            for (int64_t i = 0; i < n; i++) {
                unsigned char *at = td + (size_t)(row * n + i) * eb;
                double x;
                if (eb == 4) {
                    const float f = sane ? fz_rng_float(&tg, -2.0f, 2.0f) : 0.0f;
                    uint32_t bits = (uint32_t)fz_rng_next(&tg);
                    if (sane)
                        memcpy(&bits, &f, 4);
                    memcpy(at, &bits, 4);
                    float v;
                    memcpy(&v, &bits, 4);
                    x = v;
                } else {
                    uint16_t h = (uint16_t)fz_rng_next(&tg);
                    if (sane) /* a modest finite value */
                        h = tdt == ATTN_DTYPE_F16 ? ref_f32_to_f16(fz_rng_float(&tg, -2.0f, 2.0f))
                                                  : ref_f32_to_bf16(fz_rng_float(&tg, -2.0f, 2.0f));
                    memcpy(at, &h, 2);
                    x = tdt == ATTN_DTYPE_F16 ? ref_f16_to_double(h) : ref_bf16_to_double(h);
                }
                if (!isfinite(x) || fabs(x) > 1e30)
                    compare = 0;
                kdense[row * s.head_dim + k_cols + i] = (float)x;
            }
        }
        tail_t.data = td;
        opt.k_tail = &tail_t;
        opt.k_tail_dim = n;
        tail_bad = is_fp8(kdt); /* FP8 k with a tail takes group scales only */
        const size_t qn2 = (size_t)(s.batch * s.q_heads * s.q_len * s.head_dim);
        free(q);
        q = malloc(qn2 * sizeof(float));
        for (size_t i = 0; i < qn2; i++)
            q[i] = fz_rng_float(&g, -1.0f, 1.0f);
        qt = (attn_tensor){q, ATTN_DTYPE_F32, s.q_heads * s.q_len * s.head_dim,
                           s.q_len * s.head_dim, s.head_dim};
    }

    /* scale groups (1.8), drawn after the tail: where a valid per-row
       scale tensor was drawn for an FP8 cache, now and then G = cols / g
       scales per row replace it, for a divisor g of the row's own columns
       (k's part before a tail), with the same strides times G; the
       reference applies them to the decoded values (ref.c, group_score
       and finish_rows). An FP8 k with a tail then is valid. */
    attn_tensor grp_t[2];
    float *grp_data[2] = {NULL, NULL};
    for (int x = 0; x < 2; x++) {
        const attn_tensor *rt = x ? opt.v_scales : opt.k_scales;
        if (!rt || (x ? rows_bad_v : rows_bad_k) || fz_u8(r) < 128)
            continue;
        const int64_t cols = x ? s.v_dim : k_cols;
        int64_t divs[80], nd = 0;
        for (int64_t d = 1; d <= cols && nd < 80; d++)
            if (cols % d == 0)
                divs[nd++] = d;
        const int64_t gsz = divs[fz_range(r, 0, nd - 1)], G = cols / gsz;
        grp_t[x] = *rt;
        grp_t[x].batch_stride *= G;
        grp_t[x].head_stride *= G;
        grp_t[x].row_stride *= G;
        const size_t n = (size_t)(s.batch * s.kv_heads * s.kv_len * G);
        grp_data[x] = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            grp_data[x][i] = (float)fz_range(r, 1, 1000) / 997.0f;
        grp_t[x].data = grp_data[x];
        if (x == 0) {
            opt.k_scales = &grp_t[0];
            opt.k_scale_group = gsz;
            tail_bad = 0;
        } else {
            opt.v_scales = &grp_t[1];
            opt.v_scale_group = gsz;
        }
    }
    if (tail_bad)
        compare = 0;

    /* the reference on the decoded tensors; FP8 scales as the library applies them */
    /* R of tolerance.h: one rescale per key block of the table with the
       smallest blocks, plus one */
    uint32_t min_bk = UINT32_MAX;
    for (size_t i = 0; i < N_ISAS; i++) {
        const attn_dsp *t = attn_dsp_for_isa(isas[i]);
        if (t && t->block_k < min_bk)
            min_bk = t->block_k;
    }
    ref_attn ref_s, ref_o;
    if (compare) {
        attn_options ro = opt;
        ro.scale = qk_scale;
        ro.k_scale = ro.v_scale = 0.0f;
        const attn_tensor kf = {kdense, ATTN_DTYPE_F32, s.kv_heads * s.kv_len * s.head_dim,
                                s.kv_len * s.head_dim, s.head_dim};
        const attn_tensor vf = {vc.dense, ATTN_DTYPE_F32, s.kv_heads * s.kv_len * s.v_dim,
                                s.kv_len * s.v_dim, s.v_dim};
        ref_attn_compute(&ref_s, &s, &ro, &qt, &kf, NULL, 0);
        /* A score beyond the f32 range (a huge k_scale) is +-inf in f32 by
           IEEE overflow, and an infinite score makes its row NaN (attn.h):
           the float64 reference has no such limit, so such problems are
           only run, not compared. */
        for (size_t i = 0; i < rows * (size_t)s.kv_len && compare; i++)
            if (isfinite(ref_s.s[i]) && fabs(ref_s.s[i]) + ref_s.s_err[i] >= (double)FLT_MAX)
                compare = 0;
        if (!compare) {
            ref_attn_free(&ref_s);
        } else {
            ref_attn_compute(&ref_o, &s, &ro, &qt, &kf, &vf,
                             (s.kv_len + min_bk - 1) / min_bk + 1);
            const int per_call = is_fp8(vdt) && opt.v_scale != 0.0f;
            const double vs = per_call ? opt.v_scale : 1.0;
            for (size_t i = 0; i < rows * (size_t)s.v_dim; i++) {
                ref_o.o[i] *= vs;
                ref_o.o_err[i] *= vs;
                if (per_call) /* the v_scale multiply: tolerance.h */
                    ref_o.o_err[i] += TOL_VSCALE_REL * TOL_U * fabs(ref_o.o[i]) + TOL_VSCALE_ABS;
            }
            /* scores so large that their rounding errors reach the exponent
               (|s| near FLT_MAX) leave ref.c's bounds non-finite: nothing
               is promised there, so such problems are only run */
            for (size_t i = 0; i < rows * (size_t)s.v_dim && compare; i++)
                if (isnan(ref_o.o_err[i]) || isinf(ref_o.o_err[i]))
                    compare = 0;
            if (!compare) {
                ref_attn_free(&ref_s);
                ref_attn_free(&ref_o);
            }
        }
    }

    for (size_t i = 0; i < N_ISAS; i++) {
        const attn_dsp *t = attn_dsp_for_isa(isas[i]);
        if (!t)
            continue;
        /* the per-row scales are checked after the dtypes and shapes */
        attn_status want_s = !ks_ok || !vs_finite ? ATTN_ERR_ARG
                             : !shape_ok          ? ATTN_ERR_SHAPE
                             : rows_bad_k || tail_bad ? ATTN_ERR_ARG
                                                  : ATTN_OK;
        /* through attn_error_done, as the public entry points: a status
           comes with its line */
        unsigned mark = attn_error_mark();
        attn_status got = attn_error_done("attn_scores", mark,
                                          attn_scores_with(t, &s, &opt, &qt, &kc.t, &st));
        FZ_CHECK(got == want_s, "scores on %s: status %d, want %d (%s)", t->isa_name, got, want_s,
                 got != ATTN_OK ? attn_last_error() : "");
        if (got == ATTN_OK && compare)
            check_close("scores", t->isa_name, sc, ref_s.s, ref_s.s_err, rows * (size_t)s.kv_len);
        const int all_ok = shape_ok && ks_ok && vs_ok && !rows_bad_k && !rows_bad_v && !tail_bad;
        mark = attn_error_mark();
        got = attn_error_done("attn_forward", mark,
                              attn_forward_with(t, &s, &opt, &qt, &kc.t, &vc.t, &ot, NULL));
        FZ_CHECK((got == ATTN_OK) == all_ok, "forward on %s: status %d with arguments %s (%s)",
                 t->isa_name, got, all_ok ? "valid" : "invalid",
                 got != ATTN_OK ? attn_last_error() : "");
        if (got == ATTN_OK && compare)
            check_close("out", t->isa_name, out, ref_o.o, ref_o.o_err, rows * (size_t)s.v_dim);
    }
    if (compare) {
        ref_attn_free(&ref_s);
        ref_attn_free(&ref_o);
    }
    free(q);
    free(out);
    free(sc);
    free(rows_data[0]);
    free(rows_data[1]);
    free(grp_data[0]);
    free(grp_data[1]);
    if (kdense != kc.dense)
        free(kdense);
    if (tail_t.data)
        fz_buf_free(&tail_buf);
    free_cache(&kc);
    free_cache(&vc);
}

static void fuzz_quantize(fz_reader *r)
{
    const int32_t dt = quant_dtype(fz_range(r, 0, N_QUANT - 1));
    const int64_t rows = fz_range(r, 1, 3);
    /* an ASYM row is one record: any length (U4: even) */
    const int64_t cols = is_fp8(dt) || dt == ATTN_DTYPE_U8_ASYM ? fz_range(r, 1, 40)
                         : dt == ATTN_DTYPE_U4_ASYM         ? 2 * fz_range(r, 1, 20)
                                                            : 32 * fz_range(r, 1, 2);
    const int64_t units = units_of(dt, cols);
    const size_t ub = ref_quant_unit_bytes(dt);
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    const int raw_bits = fz_chance(r, 60);
    fz_rng g = {fz_u64(r)};
    const float mag = (float)ldexp(1.0, (int)fz_range(r, -30, 25));
    for (int64_t i = 0; i < rows * cols; i++) {
        if (raw_bits) {
            const uint32_t bits = (uint32_t)fz_rng_next(&g);
            memcpy(&x[i], &bits, 4);
        } else {
            x[i] = fz_rng_float(&g, -mag, mag);
        }
    }
    float scale = 0.0f;
    if (is_fp8(dt) && fz_chance(r, 100))
        scale = (float)fz_range(r, 1, 4000) / 512.0f;
    fz_buf out;
    unsigned char *dst = fz_buf_alloc(&out, (size_t)(rows * units) * ub, 0);
    memset(dst, 0xcd, (size_t)(rows * units) * ub);
    const attn_status st = attn_quantize(dt, x, rows, cols, cols, dst, units, scale);

    /* the model: Q8_0/Q4_0 refuse non-finite values and blocks whose f16 d
       overflows, ASYM what its reference encoder refuses */
    int ok = 1;
    unsigned char asym_want[3 * (40 + 8)];
    if (is_asym(dt))
        for (int64_t rr = 0; rr < rows; rr++)
            ok &= ref_quantize_asym(dt, x + rr * cols, (size_t)cols, asym_want + rr * units);
    else if (!is_fp8(dt))
        for (int64_t b = 0; b < rows * cols; b += 32) {
            unsigned char blk[34];
            for (int j = 0; j < 32; j++)
                ok &= isfinite(x[b + j]);
            if (!ok)
                break;
            if (dt == ATTN_DTYPE_Q8_0)
                ref_quantize_q8_0_block(x + b, blk);
            else
                ref_quantize_q4_0_block(x + b, blk);
            ok &= (blk[1] & 0x7c) != 0x7c; /* f16 exponent all ones: inf or NaN */
        }
    FZ_CHECK((st == ATTN_OK) == ok, "attn_quantize(%d): status %d, model says %s", dt, st,
             ok ? "valid" : "invalid");
    for (int64_t i = 0; i < rows * units * (int64_t)ub; i++) {
        if (st != ATTN_OK) {
            FZ_CHECK(dst[i] == 0xcd, "attn_quantize refused but wrote byte %lld", (long long)i);
            continue;
        }
    }
    if (st == ATTN_OK && is_asym(dt))
        for (int64_t i = 0; i < rows * units; i++)
            FZ_CHECK(dst[i] == asym_want[i], "attn_quantize(%d) byte %lld: 0x%02x, reference "
                     "0x%02x", dt, (long long)i, dst[i], asym_want[i]);
    if (st == ATTN_OK && !is_asym(dt))
        for (int64_t rr = 0; rr < rows; rr++)
            for (int64_t u = 0; u < units; u++) {
                unsigned char want[34];
                const unsigned char *got = dst + (size_t)(rr * units + u) * ub;
                if (dt == ATTN_DTYPE_Q8_0)
                    ref_quantize_q8_0_block(x + rr * cols + u * 32, want);
                else if (dt == ATTN_DTYPE_Q4_0)
                    ref_quantize_q4_0_block(x + rr * cols + u * 32, want);
                else
                    want[0] = (dt == ATTN_DTYPE_FP8_E4M3 ? ref_f32_to_e4m3 : ref_f32_to_e5m2)(
                        scale != 0.0f ? x[rr * cols + u] / scale : x[rr * cols + u]);
                for (size_t j = 0; j < ub; j++)
                    FZ_CHECK(got[j] == want[j], "attn_quantize(%d) row %lld unit %lld byte %zu: "
                             "0x%02x, reference 0x%02x", dt, (long long)rr, (long long)u, j,
                             got[j], want[j]);
            }
    fz_buf_free(&out);
    free(x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size};
    if (fz_u8(&r) & 1)
        fuzz_quantize(&r);
    else
        fuzz_attention(&r);
    return 0;
}

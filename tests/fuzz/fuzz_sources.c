/* SPDX-License-Identifier: MIT */
/*
 * attn-fuzz-sources: attn_forward_sources (attn.h 1.13: two K/V caches in
 * one call, one softmax) on every kernel table.
 *
 * The input decodes into a small problem: batch 1..3, GQA (1..16 query
 * heads per KV head), q_len 1..9, head and value dims from 1 up to a few
 * dozen (now and then 64..4096 with a tiny key count: the scratch-bound
 * plans of wide rows), q F32/F16/BF16. The first source is an F32 cache
 * ([B,H,L,D], [B,L,H,D] or padded; V now and then a view of K's first
 * columns, as MLA's latent cache) with the forward's options: causal,
 * window, window_right, kv_lens, q_lens, sinks, softcap, scale, the
 * precision modes, kv_splits 0 or 1, and now and then its own top-k lists.
 * The second source has its own kv_len, kv_lens and lists (entries -1,
 * repeats, runs, clusters; lists of rows past Lq_b hold garbage, as the
 * header lets them), K and V each F32, F16, BF16, Q8_0, Q4_0, FP8 E4M3/E5M2
 * or U8/U4_ASYM (records of the whole row or of a drawn divisor), encoded
 * with attn_quantize or ref.c's encoders; laid out [B,H,L,D], [B,L,H,D],
 * padded, or as one pool shared by every sequence (batch_stride 0); V now
 * and then a view of K's first columns; or the second source is a view of
 * the first source's own buffers. Now and then one hostile change the
 * fuzzer models: extra NULL, kv_splits negative or above the cap, kv_splits
 * 2..1024 (a split of the second source's keys: the workspace
 * attn_forward_sources_workspace_size asks for, checked against the rule
 * "some sequence with query rows has Lk2_b > 256", given, absent or one
 * byte short), struct_size too
 * small or too large (a zero or nonzero tail; above 4096, the size rule of
 * attn_options and attn_grads), flags, kv_len < 1, indices NULL, topk < 1,
 * an entry out of range (in a row that is read or not), a kv_lens entry
 * out of range, a bad K or V dtype, a NULL K or V view, a negative stride,
 * a bad record group, k_tail without k_tail_dim or the reverse, the second
 * source's K or V sharing bytes with out or a row statistic.
 * Every buffer (the attn_kv_source itself: struct_size bytes) ends at, or
 * starts after, a PROT_NONE page.
 *
 * Fails on: a crash or sanitizer report; a status other than attn.h's
 * rules give (attn_forward_sources, "Errors"); a rejected call that wrote
 * out or a row statistic; for accepted calls, an output or row statistic
 * outside tests/tolerance.h's forward bound of the float64 reference
 * (tests/ref/ref.c on one cache holding both sources' decoded keys, as
 * tests/ops/test_sources.c builds it, each row's visible keys as a mask; R
 * = the first source's key blocks + 1 + the named second-source keys + 1,
 * and 1 more for a split's merge),
 * or further than twice the bound from the scalar table; NaN, infinities
 * or -inf not exactly where the reference has them; different bits in
 * reverse task order; different bits once NaN is planted into every
 * second-source row no read list names, every first-source key row past
 * Lk_b and every query row past Lq_b (attn.h: never read); the public
 * entry point disagreeing with its table.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "fuzz_util.h"
#include "internal.h"
#include "ref/ref.h"
#include "ref/ref_quant.h"
#include "tolerance.h"

/* rows x keys of each source x (head_dim + v_dim + 32: what a score costs
   beside its products, the reference's mostly) */
#define CAP_WORK ((int64_t)1 << 18)
#define MAX_B 3
#define MAX_TABLES ATTN_ISA_COUNT

/* 1 with probability about num/256, 0 for a zero byte (an input that ran
   out of bytes: the plain call). */
static int rarely(fz_reader *r, unsigned num)
{
    return fz_u8(r) >= 256 - num;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

/* ------------------------------------------------------------ dtypes */

/* The second source's dtypes, a byte picking one by index (keep the order:
   the committed corpus's bytes mean these). */
static const int32_t dtypes2[] = {ATTN_DTYPE_F32,     ATTN_DTYPE_F16,      ATTN_DTYPE_BF16,
                                  ATTN_DTYPE_Q8_0,    ATTN_DTYPE_U8_ASYM,  ATTN_DTYPE_U4_ASYM,
                                  ATTN_DTYPE_Q4_0,    ATTN_DTYPE_FP8_E4M3, ATTN_DTYPE_FP8_E5M2};
#define N_DTYPES2 ((int64_t)(sizeof dtypes2 / sizeof dtypes2[0]))

static int is_asym(int32_t dt)
{
    return dt == ATTN_DTYPE_U8_ASYM || dt == ATTN_DTYPE_U4_ASYM;
}

static int is_block(int32_t dt)
{
    return dt == ATTN_DTYPE_Q8_0 || dt == ATTN_DTYPE_Q4_0;
}

/* What a row length must be a multiple of. */
static int64_t dim_unit(int32_t dt)
{
    return is_block(dt) ? 32 : dt == ATTN_DTYPE_U4_ASYM ? 2 : 1;
}

/* Stride units of a row of n values (an ASYM row: records of `group`, 0 the
   whole row). */
static int64_t row_units(int32_t dt, int64_t n, int64_t group)
{
    if (is_asym(dt)) {
        const int64_t g = group ? group : n;
        return n / g * (8 + (dt == ATTN_DTYPE_U8_ASYM ? g : g / 2));
    }
    return n / ref_dtype_block(dt);
}

/* An ASYM cache's records: the whole row now and then, else a divisor of
   cols and of `also` (a view's columns; U4: even), 0 where there is none. */
static int64_t pick_group(fz_reader *r, int32_t dt, int64_t cols, int64_t also)
{
    if (!is_asym(dt) || fz_chance(r, 100))
        return 0;
    int64_t divs[64], nd = 0;
    for (int64_t d = 1; d <= cols && nd < 64; d++)
        if (cols % d == 0 && also % d == 0 && d % dim_unit(dt) == 0)
            divs[nd++] = d;
    return nd ? divs[fz_range(r, 0, nd - 1)] : 0;
}

static int64_t draw_dim(fz_reader *r, int big, int64_t unit)
{
    static const int64_t wide[] = {64, 96, 128, 192, 256, 512, 576, 1024, 2048, 4096};
    if (big)
        return wide[fz_range(r, 0, (int64_t)(sizeof wide / sizeof wide[0]) - 1)];
    if (unit == 32)
        return 32 * fz_range(r, 1, 2);
    return unit * fz_range(r, 1, 24 / unit);
}

/* ------------------------------------------------------------ caches */

typedef struct cache {
    fz_buf buf;
    attn_tensor t;
    int64_t cols, group, units, nb; /* nb: batch entries stored (1: a pool) */
    size_t ub, bytes;
} cache;

static unsigned char *row_at(const attn_tensor *t, int64_t b, int64_t h, int64_t j)
{
    return (unsigned char *)t->data +
           (b * t->batch_stride + h * t->head_stride + j * t->row_stride) *
               (int64_t)ref_dtype_size(t->dtype);
}

/*
 * A cache of [B][H][L][cols] values of dtype dt in a guarded buffer (layout
 * 0: [B,H,L,D], 1: [B,L,H,D], 2: [B,H,L,D] with rows padded by pad units,
 * 3: one pool [L][H][D] shared by every sequence, batch_stride 0); every
 * byte random first (gaps and the rows need[b][j] leaves 0 hold garbage),
 * then each needed row uniform in [-mag, mag) (now and then constant)
 * encoded. need NULL: every row.
 */
static void cache_make(cache *c, fz_rng *g, int32_t dt, int64_t B, int64_t H, int64_t L,
                       int64_t cols, int64_t group, int layout, int64_t pad, float mag,
                       const unsigned char *need)
{
    memset(c, 0, sizeof *c);
    c->cols = cols;
    c->group = group;
    c->units = row_units(dt, cols, group);
    c->ub = ref_dtype_size(dt);
    c->nb = layout == 3 ? 1 : B;
    attn_tensor *t = &c->t;
    t->dtype = dt;
    if (layout == 0 || layout == 2) {
        t->row_stride = c->units + (layout == 2 ? pad : 0);
        t->head_stride = L * t->row_stride;
        t->batch_stride = H * t->head_stride;
    } else {
        t->head_stride = c->units;
        t->row_stride = H * c->units + (layout == 3 ? pad : 0);
        t->batch_stride = layout == 3 ? 0 : L * t->row_stride;
    }
    const int64_t span = (c->nb - 1) * t->batch_stride + (H - 1) * t->head_stride +
                         (L - 1) * t->row_stride + c->units;
    c->bytes = (size_t)span * c->ub;
    unsigned char *d = fz_buf_alloc(&c->buf, c->bytes, (int)(fz_rng_next(g) & 1));
    for (size_t i = 0; i < c->bytes; i += 8) {
        const uint64_t w = fz_rng_next(g);
        memcpy(d + i, &w, c->bytes - i < 8 ? c->bytes - i : 8);
    }
    t->data = d;
    float *x = xmalloc((size_t)cols * 4);
    for (int64_t b = 0; b < c->nb; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < L; j++) {
                if (need && !need[b * L + j])
                    continue;
                for (int64_t i = 0; i < cols; i++)
                    x[i] = fz_rng_float(g, -mag, mag);
                if (fz_rng_next(g) % 16 == 0) /* a constant row now and then */
                    for (int64_t i = 1; i < cols; i++)
                        x[i] = x[0];
                unsigned char *row = row_at(t, b, h, j);
                if (dt == ATTN_DTYPE_F32) {
                    memcpy(row, x, (size_t)cols * 4);
                } else if (dt == ATTN_DTYPE_F16 || dt == ATTN_DTYPE_BF16) {
                    for (int64_t i = 0; i < cols; i++) {
                        const uint16_t hv = dt == ATTN_DTYPE_F16 ? ref_f32_to_f16(x[i])
                                                                 : ref_f32_to_bf16(x[i]);
                        memcpy(row + i * 2, &hv, 2);
                    }
                } else if (is_asym(dt)) {
                    const int64_t gr = group ? group : cols;
                    const attn_status st = attn_quantize(dt, x, cols / gr, gr, gr, row,
                                                         row_units(dt, gr, gr), 0.0f);
                    FZ_CHECK(st == ATTN_OK, "attn_quantize(%d, %lld values): status %d", dt,
                             (long long)gr, st);
                } else {
                    const attn_status st = attn_quantize(dt, x, 1, cols, cols, row, c->units,
                                                         0.0f);
                    FZ_CHECK(st == ATTN_OK, "attn_quantize(%d, %lld values): status %d", dt,
                             (long long)cols, st);
                }
            }
    free(x);
}

/* Values [0, n) of row (b, h, j) of a view t (a cache or a view of its
   first columns) of rows of records of `group` values, as attn.h decodes
   them. */
static void view_row(const attn_tensor *t, int64_t group, int64_t b, int64_t h, int64_t j,
                     int64_t n, float *dst)
{
    const unsigned char *row = row_at(t, b, h, j);
    if (t->dtype == ATTN_DTYPE_F32) {
        memcpy(dst, row, (size_t)n * 4);
        return;
    }
    for (int64_t c = 0; c < n; c++) {
        uint16_t hv;
        if (t->dtype == ATTN_DTYPE_F16 || t->dtype == ATTN_DTYPE_BF16) {
            memcpy(&hv, row + c * 2, 2);
            dst[c] = (float)(t->dtype == ATTN_DTYPE_F16 ? ref_f16_to_double(hv)
                                                        : ref_bf16_to_double(hv));
        } else {
            dst[c] = (float)ref_quant_value_g(t->dtype, row, (size_t)c, (size_t)group);
        }
    }
}

/* ------------------------------------------------------------ lists */

/*
 * Lists [B][Lq][T] of keys of [0, n_b): mode 0 uniform with about one -1 in
 * seven, 1 clusters (repeats), 2 runs of consecutive keys, 3 all -1, 4
 * uniform without -1. Lists of rows past Lq_b: garbage now and then.
 */
static void draw_lists(fz_rng *g, int mode, int32_t *lists, int64_t B, int64_t Lq, int64_t T,
                       const int32_t *lens, int64_t L, const int32_t *q_lens)
{
    for (int64_t b = 0; b < B; b++) {
        const int64_t n = lens ? lens[b] : L, lq = q_lens ? q_lens[b] : Lq;
        for (int64_t i = 0; i < Lq; i++) {
            int32_t *list = lists + (b * Lq + i) * T;
            const int garbage = i >= lq && fz_rng_next(g) % 2;
            const int64_t c = n ? (int64_t)(fz_rng_next(g) % (uint64_t)n) : 0;
            const int64_t w = 1 + (int64_t)(fz_rng_next(g) % 5);
            for (int64_t t = 0; t < T; t++) {
                const uint64_t x = fz_rng_next(g);
                int64_t e;
                if (garbage) {
                    e = (int32_t)(uint32_t)x;
                } else if (n == 0 || mode == 3) {
                    e = -1;
                } else if (mode == 1) {
                    e = c + (int64_t)(x % (uint64_t)w);
                    e = e < n ? e : -1;
                } else if (mode == 2) {
                    e = c + t < n ? c + t : -1;
                } else if (mode == 0 && x % 7 == 0) {
                    e = -1;
                } else {
                    e = (int64_t)((x >> 8) % (uint64_t)n);
                }
                list[t] = (int32_t)e;
            }
        }
    }
}

/* ------------------------------------------------------------ comparisons */

static void compare(const char *what, const char *isa, long long index, float got, float scal,
                    double want, double err)
{
    if (isnan(want)) {
        FZ_CHECK(isnan(got) && isnan(scal), "%s[%lld]: want NaN, %s %g, scalar %g", what, index,
                 isa, got, scal);
        return;
    }
    if (isinf(want)) {
        FZ_CHECK(got == want && scal == want, "%s[%lld]: want %g, %s %g, scalar %g", what, index,
                 want, isa, got, scal);
        return;
    }
    FZ_CHECK(isfinite(got) && isfinite(scal), "%s[%lld]: want %.9g, %s %g, scalar %g", what,
             index, want, isa, got, scal);
    FZ_CHECK(fabs((double)got - want) <= err,
             "%s[%lld]: %s %.9g vs float64 %.9g differ by %.3g > bound %.3g", what, index, isa,
             got, want, fabs((double)got - want), err);
    FZ_CHECK(fabs((double)got - (double)scal) <= TOL_PAIR(err),
             "%s[%lld]: %s %.9g vs scalar %.9g differ by %.3g > %.3g (float64 %.9g)", what, index,
             isa, got, scal, fabs((double)got - scal), TOL_PAIR(err), want);
}

/* ------------------------------------------------------------ the call */

typedef struct results {
    float *out, *st; /* st: lse, max, entropy, rows each */
} results;

/* The call once more (tasks through `pf`): whether out and the given row
   statistics hold the same bits as r. */
static int rerun_same(const attn_dsp *t, attn_parallel_for_fn pf, const attn_shape *s,
                      attn_options *opt, const attn_tensor *q, const attn_tensor *k,
                      const attn_tensor *v, const attn_kv_source *x, const attn_tensor *out,
                      const attn_row_stats *stats, const results *r, int64_t rows, int64_t dv)
{
    const size_t out_bytes = (size_t)(rows * dv) * 4, st_bytes = (size_t)rows * 4;
    memset(out->data, 0x5a, out_bytes);
    opt->parallel_for = pf;
    const attn_status st = attn_forward_sources_with(t, s, opt, q, k, v, x, out, stats);
    opt->parallel_for = NULL;
    FZ_CHECK(st == ATTN_OK, "%s: the rerun's status %d", t->isa_name, st);
    int same = memcmp(out->data, r->out, out_bytes) == 0;
    const float *const got[3] = {stats->lse, stats->max_score, stats->entropy};
    for (int w = 0; w < 3; w++)
        same &= !got[w] || memcmp(got[w], r->st + w * rows, st_bytes) == 0;
    return same;
}

enum hostile {
    H_EXTRA_NULL,
    H_SPLITS,
    H_SIZE_SMALL,
    H_SIZE_LARGE,
    H_FLAGS,
    H_KV_LEN,
    H_INDICES_NULL,
    H_TOPK,
    H_ENTRY,
    H_KV_LENS,
    H_DTYPE,
    H_VIEW_NULL,
    H_ALIAS,
    H_SPLITS_NEGATIVE,
    H_GROUP,
    H_STRIDE,
    H_TAIL,
    H_COUNT
};

static void guarded_copy(fz_buf *b, fz_rng *g, const void *src, size_t bytes, void **dst)
{
    *dst = fz_buf_alloc(b, bytes, (int)(fz_rng_next(g) & 1));
    if (bytes)
        memcpy(*dst, src, bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const attn_dsp *tables[MAX_TABLES];
    int ntables = 0;
    tables[ntables++] = attn_dsp_for_isa(ATTN_ISA_SCALAR);
    for (int isa = ATTN_ISA_SCALAR + 1; isa < ATTN_ISA_COUNT; isa++)
        if (attn_dsp_for_isa((attn_isa)isa))
            tables[ntables++] = attn_dsp_for_isa((attn_isa)isa);
    FZ_CHECK(tables[0] != NULL, "no scalar table");
    int64_t bk = INT64_MAX; /* the smallest key block of any table: R */
    for (int i = 0; i < ntables; i++)
        bk = (int64_t)tables[i]->block_k < bk ? (int64_t)tables[i]->block_k : bk;

    fz_reader rd = {data, size};
    fz_reader *r = &rd;
    fz_rng g = {fz_u64(r)};

    /* ---- the shape */
    const int big = rarely(r, 16);
    attn_shape s;
    s.batch = big ? 1 : fz_range(r, 1, MAX_B);
    s.kv_heads = fz_range(r, 1, 2);
    static const int64_t groups[] = {1, 2, 3, 4, 8, 16, 1, 6, 12};
    int64_t grp = groups[fz_range(r, 0, 8)];
    if (s.kv_heads * grp > 16)
        s.kv_heads = 1;
    s.q_heads = s.kv_heads * grp;
    s.q_len = big ? fz_range(r, 1, 3) : fz_chance(r, 180) ? fz_range(r, 1, 4) : fz_range(r, 1, 9);
    int32_t dtk = dtypes2[fz_range(r, 0, N_DTYPES2 - 1)];
    int32_t dtv = fz_chance(r, 180) ? dtk : dtypes2[fz_range(r, 0, N_DTYPES2 - 1)];
    int v_in_k2 = rarely(r, 40);
    const int v_in_k1_want = rarely(r, 40);
    const int64_t d = draw_dim(r, big, dim_unit(dtk));
    int64_t dv;
    if (v_in_k2 && d > dim_unit(dtk)) { /* V as K's first columns: MLA's latent cache */
        dtv = dtk;
        dv = dim_unit(dtk) * fz_range(r, 1, d / dim_unit(dtk) - 1);
    } else {
        v_in_k2 = 0;
        dv = fz_chance(r, 128) && d % dim_unit(dtv) == 0 ? d : draw_dim(r, big, dim_unit(dtv));
    }
    s.head_dim = d;
    s.v_dim = dv == d ? 0 : dv;
    const int64_t gk = pick_group(r, dtk, d, v_in_k2 ? dv : d);
    const int64_t gv = v_in_k2 ? gk : pick_group(r, dtv, dv, dv);
    const int v_in_k1 = v_in_k1_want && dv < d;
    const int64_t rows = s.batch * s.q_heads * s.q_len;
    const int64_t per_key = rows * (d + dv + 32);
    const int64_t lmax = CAP_WORK / per_key > 2 ? CAP_WORK / per_key : 2;
    const int64_t L1 = fz_range(r, 1, min64(lmax, fz_chance(r, 200) ? 48 : 320));
    s.kv_len = L1;
    const int shared = dtk == ATTN_DTYPE_F32 && dtv == ATTN_DTYPE_F32 && gk == 0 &&
                       v_in_k2 == v_in_k1 && rarely(r, 20);
    const int64_t L2 = shared ? fz_range(r, 1, L1)
                              : fz_range(r, 1, min64(lmax, fz_chance(r, 180) ? 64 : 700));
    const int lay1 = (int)fz_range(r, 0, 2), lay2 = (int)fz_range(r, 0, 3);
    const int64_t pad1 = fz_range(r, 1, 3), pad2 = fz_range(r, 0, 3);
    const int32_t qdt = rarely(r, 40) ? (int32_t)fz_range(r, 1, 2) : ATTN_DTYPE_F32;
    const int q_blhd = rarely(r, 60);

    /* ---- the first source's options */
    attn_options opt = ATTN_OPTIONS_INIT;
    int32_t q_lens[MAX_B], kv_lens[MAX_B], kv_lens2[MAX_B];
    if (rarely(r, 110))
        opt.flags |= ATTN_CAUSAL;
    if (rarely(r, 60))
        opt.window = fz_range(r, 1, L1 + 2);
    if (rarely(r, 25))
        opt.window_right = fz_range(r, 1, L1 + 2);
    const int have_kv_lens = rarely(r, 110), have_q_lens = rarely(r, 110);
    for (int64_t b = 0; b < s.batch; b++) {
        kv_lens[b] = (int32_t)fz_range(r, 0, L1);
        q_lens[b] = (int32_t)fz_range(r, 0, s.q_len);
    }
    const int have_sinks = rarely(r, 60);
    if (rarely(r, 40))
        opt.softcap = (float)fz_range(r, 1, 100) / 2.0f;
    if (rarely(r, 80))
        opt.scale = (float)fz_range(r, 1, 96) / 64.0f;
    if (rarely(r, 60))
        opt.precision = fz_range(r, 1, 2);
    opt.kv_splits = rarely(r, 128) ? 1 : 0;
    const int have_topk1 = rarely(r, 50);
    const int64_t T1 = have_topk1 ? fz_range(r, 1, fz_chance(r, 128) ? 8 : L1 + 3) : 0;
    const int mode1 = (int)fz_range(r, 0, 4);

    /* ---- the second source's */
    const int have_kv_lens2 = rarely(r, 110);
    for (int64_t b = 0; b < s.batch; b++)
        kv_lens2[b] = (int32_t)fz_range(r, 0, L2);
    const int64_t T2 = fz_chance(r, 200) ? fz_range(r, 1, 16) : fz_range(r, 1, L2 + 8);
    const int mode2 = (int)fz_range(r, 0, 4);
    const unsigned stats_mask = fz_u8(r);
    static const float qmags[] = {0.5f, 1.0f, 3.0f, 8.0f};
    const float qmag = qmags[fz_range(r, 0, 3)], kmag = fz_chance(r, 128) ? 1.0f : 2.0f;
    const int hostile = rarely(r, 48) ? (int)fz_range(r, 0, H_COUNT - 1) : -1;
    const int64_t hp0 = fz_range(r, 0, 255), hp1 = fz_range(r, 0, 255), hp2 = fz_range(r, 0, 255);

    if (have_kv_lens)
        opt.kv_lens = kv_lens;
    if (have_q_lens)
        opt.q_lens = q_lens;

    fz_context("B %lld Hq %lld Hkv %lld Lq %lld d %lld dv %lld | first: L %lld layout %d%s%s "
               "window %lld/%lld%s%s%s softcap %g scale %g precision %lld topk %lld | second: "
               "L %lld T %lld k %s v %s groups %lld/%lld layout %d pad %lld%s%s%s mode %d | q %s%s "
               "| hostile %d (%lld %lld %lld)",
               (long long)s.batch, (long long)s.q_heads, (long long)s.kv_heads,
               (long long)s.q_len, (long long)d, (long long)dv, (long long)L1, lay1,
               v_in_k1 ? " v-in-k" : "", opt.flags & ATTN_CAUSAL ? " causal" : "",
               (long long)opt.window, (long long)opt.window_right,
               have_kv_lens ? " kv_lens" : "", have_q_lens ? " q_lens" : "",
               have_sinks ? " sinks" : "", (double)opt.softcap, (double)opt.scale,
               (long long)opt.precision, (long long)T1, (long long)L2, (long long)T2,
               ref_dtype_name(dtk), ref_dtype_name(dtv), (long long)gk, (long long)gv, lay2,
               (long long)pad2, v_in_k2 ? " v-in-k" : "", shared ? " shared" : "",
               have_kv_lens2 ? " kv_lens" : "", mode2, ref_dtype_name(qdt),
               q_blhd ? " blhd" : "", hostile, (long long)hp0, (long long)hp1, (long long)hp2);

    /* ---- the lists (first the first source's, then the second's) and
       the second-source rows some read list names (of a pool: any
       sequence's), the only ones encoded: the others hold garbage */
    fz_buf qb, ob, stb[3], sinkb = {0}, l1b = {0}, l2b = {0}, klb = {0}, xb, wsb = {0};
    int32_t *list1 = NULL;
    if (have_topk1) {
        const size_t n = (size_t)(s.batch * s.q_len * T1);
        int32_t *tmp = xmalloc(n * 4);
        draw_lists(&g, mode1, tmp, s.batch, s.q_len, T1, opt.kv_lens, L1, opt.q_lens);
        guarded_copy(&l1b, &g, tmp, n * 4, (void **)&list1);
        free(tmp);
        opt.topk_indices = list1;
        opt.topk = T1;
    }
    const int64_t lq_of[MAX_B] = {have_q_lens ? q_lens[0] : s.q_len,
                                  s.batch > 1 && have_q_lens ? q_lens[1] : s.q_len,
                                  s.batch > 2 && have_q_lens ? q_lens[2] : s.q_len};
    const size_t n2 = (size_t)(s.batch * s.q_len * T2);
    int32_t *list2 = xmalloc(n2 * 4);
    draw_lists(&g, mode2, list2, s.batch, s.q_len, T2, have_kv_lens2 ? kv_lens2 : NULL, L2,
               opt.q_lens);
    int64_t lk2_of[MAX_B];
    for (int64_t b = 0; b < s.batch; b++)
        lk2_of[b] = have_kv_lens2 ? kv_lens2[b] : L2;
    unsigned char *named = calloc((size_t)(s.batch * L2), 1), *pool_named = calloc((size_t)L2, 1);
    int64_t most_named = 0;
    for (int64_t b = 0; b < s.batch; b++) {
        int64_t n = 0;
        for (int64_t i = 0; i < lq_of[b]; i++)
            for (int64_t t = 0; t < T2; t++) {
                const int32_t j = list2[(b * s.q_len + i) * T2 + t];
                if (j >= 0 && j < lk2_of[b] && !named[b * L2 + j])
                    named[b * L2 + j] = pool_named[j] = 1, n++;
            }
        most_named = n > most_named ? n : most_named;
    }

    /* ---- tensors */
    const size_t qes = qdt == ATTN_DTYPE_F32 ? 4 : 2;
    attn_tensor qt;
    if (q_blhd)
        qt = (attn_tensor){NULL, qdt, s.q_len * s.q_heads * d, d, s.q_heads * d};
    else
        qt = (attn_tensor){NULL, qdt, s.q_heads * s.q_len * d, s.q_len * d, d};
    unsigned char *q = fz_buf_alloc(&qb, (size_t)(rows * d) * qes, (int)(fz_rng_next(&g) & 1));
    for (int64_t i = 0; i < rows * d; i++) {
        const float x = fz_rng_float(&g, -qmag, qmag);
        if (qdt == ATTN_DTYPE_F32) {
            memcpy(q + i * 4, &x, 4);
        } else {
            const uint16_t h = qdt == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
            memcpy(q + i * 2, &h, 2);
        }
    }
    qt.data = q;

    cache k1, v1, k2, v2;
    cache_make(&k1, &g, ATTN_DTYPE_F32, s.batch, s.kv_heads, L1, d, 0, lay1, pad1, kmag, NULL);
    attn_tensor v1t;
    if (v_in_k1) {
        memset(&v1, 0, sizeof v1);
        v1t = k1.t;
    } else {
        cache_make(&v1, &g, ATTN_DTYPE_F32, s.batch, s.kv_heads, L1, dv, 0, lay1, pad1, 4.0f,
                   NULL);
        v1t = v1.t;
    }
    attn_tensor k2t, v2t;
    memset(&k2, 0, sizeof k2);
    memset(&v2, 0, sizeof v2);
    if (shared) {
        k2t = k1.t;
        v2t = v1t;
    } else {
        cache_make(&k2, &g, dtk, s.batch, s.kv_heads, L2, d, gk, lay2, pad2, kmag,
                   lay2 == 3 ? pool_named : named);
        k2t = k2.t;
        if (v_in_k2) {
            v2t = k2.t; /* the same rows, its first dv columns */
        } else {
            cache_make(&v2, &g, dtv, s.batch, s.kv_heads, L2, dv, gv, lay2, pad2, 4.0f,
                       lay2 == 3 ? pool_named : named);
            v2t = v2.t;
        }
    }

    /* out and the row statistics, each in its own guarded buffer */
    const attn_tensor ot0 = {NULL, ATTN_DTYPE_F32, s.q_heads * s.q_len * dv, s.q_len * dv, dv};
    attn_tensor ot = ot0;
    const size_t out_bytes = (size_t)(rows * dv) * 4, st_bytes = (size_t)rows * 4;
    ot.data = fz_buf_alloc(&ob, out_bytes, (int)(fz_rng_next(&g) & 1));
    attn_row_stats stats = {NULL, NULL, NULL};
    float *st_ptr[3];
    for (int i = 0; i < 3; i++) {
        st_ptr[i] = fz_buf_alloc(&stb[i], st_bytes, (int)(fz_rng_next(&g) & 1));
        if (stats_mask >> i & 1) {
            if (i == 0)
                stats.lse = st_ptr[i];
            else if (i == 1)
                stats.max_score = st_ptr[i];
            else
                stats.entropy = st_ptr[i];
        }
    }

    float sink_vals[16];
    attn_tensor sinks_t = {NULL, ATTN_DTYPE_F32, 0, 1, 0};
    if (have_sinks) {
        for (int64_t h = 0; h < s.q_heads; h++)
            sink_vals[h] = fz_rng_next(&g) % 8 == 0 ? -INFINITY : fz_rng_float(&g, -3.0f, 3.0f);
        guarded_copy(&sinkb, &g, sink_vals, (size_t)s.q_heads * 4, &sinks_t.data);
        opt.sinks = &sinks_t;
    }
    attn_kv_source x = {sizeof(attn_kv_source), 0, L2, &k2t, &v2t, NULL, NULL, T2,
                        NULL, NULL, is_asym(dtk) ? gk : 0, is_asym(dtv) ? gv : 0, NULL, 0};
    attn_status want = ATTN_OK;
    int want_alt = -1; /* a second status attn.h allows, or -1 */
    int split_call = 0; /* accepted, split: one more rescale, the merge */
    uint32_t struct_size = sizeof(attn_kv_source);
    size_t struct_tail_byte = 0; /* a nonzero byte past the struct (its index + 1) */
    int extra_null = 0, kv_lens2_given = have_kv_lens2;
    attn_tensor bad_view;
    switch (hostile) {
    case H_EXTRA_NULL:
        extra_null = 1;
        want = ATTN_ERR_NULL;
        break;
    case H_SPLITS: {
        /* split-KV over the second source's keys (attn.h): kv_splits >= 2
           cuts a sequence's Lk2_b keys into chunks of multiples of 256, so
           a call splits iff a sequence with query rows has Lk2_b > 256; the
           workspace attn_forward_sources_workspace_size asks for then, or
           ATTN_ERR_ARG (absent or one byte short) */
        static const int32_t sp[] = {2, 3, 5, 1024, 1025};
        opt.kv_splits = sp[hp0 % 5];
        if (opt.kv_splits > ATTN_MAX_KV_SPLITS) { /* outside attn_forward's range */
            want = ATTN_ERR_ARG;
            break;
        }
        int splits = 0;
        for (int64_t b = 0; b < s.batch; b++)
            splits |= lq_of[b] > 0 && lk2_of[b] > 256;
        size_t need = 0;
        x.indices = list2; /* the size reads no list: any pointer */
        x.kv_lens = have_kv_lens2 ? kv_lens2 : NULL;
        const attn_status ws_st = attn_forward_sources_workspace_size(&s, &opt, &x, &need);
        x.indices = NULL, x.kv_lens = NULL;
        FZ_CHECK(ws_st == ATTN_OK, "attn_forward_sources_workspace_size: status %d (%s)", ws_st,
                 attn_last_error());
        FZ_CHECK((need > 0) == splits, "attn_forward_sources_workspace_size: %zu bytes, but the "
                 "call %s split", need, splits ? "does" : "does not");
        if (!splits)
            break;
        const int short_by = hp1 % 4 == 3, absent = hp1 % 4 == 0;
        if (!absent) {
            opt.workspace = fz_buf_alloc(&wsb, need, (int)(hp2 & 1));
            memset(opt.workspace, (int)(hp2 >> 1 & 0xff), need);
            opt.workspace_size = need - (size_t)short_by;
        }
        want = absent || short_by ? ATTN_ERR_ARG : ATTN_OK;
        split_call = want == ATTN_OK;
        break;
    }
    case H_SPLITS_NEGATIVE:
        opt.kv_splits = hp0 % 2 ? -1 : INT32_MIN;
        want = ATTN_ERR_ARG;
        break;
    case H_SIZE_SMALL: {
        static const uint32_t sz[] = {0, 4, 8, 16, 24};
        struct_size = hp0 % 6 == 5 ? (uint32_t)sizeof(attn_kv_source) - 8 : sz[hp0 % 6 % 5];
        want = ATTN_ERR_VERSION;
        break;
    }
    case H_SIZE_LARGE:
        if (hp0 % 8 == 7) {
            struct_size = 4097; /* past every size attn.h takes (4096) */
            want = ATTN_ERR_VERSION;
        } else {
            struct_size = (uint32_t)(sizeof(attn_kv_source) + 1 + (size_t)hp1 % 64);
            if (hp0 % 2) {
                struct_tail_byte = 1 + (size_t)hp2 % (struct_size - sizeof(attn_kv_source));
                want = ATTN_ERR_VERSION;
            }
        }
        break;
    case H_FLAGS:
        x.flags = hp0 % 2 ? 1u : (uint32_t)1 << (hp1 % 32);
        want = ATTN_ERR_ARG;
        break;
    case H_KV_LEN:
        x.kv_len = hp0 % 3 == 0 ? 0 : hp0 % 3 == 1 ? -1 : INT64_MIN;
        want = ATTN_ERR_ARG;
        break;
    case H_INDICES_NULL:
        want = ATTN_ERR_ARG;
        break;
    case H_TOPK:
        x.topk = hp0 % 3 == 0 ? 0 : hp0 % 3 == 1 ? -1 : INT64_MIN;
        want = ATTN_ERR_ARG;
        break;
    case H_ENTRY: {
        const int64_t b = hp0 % s.batch, i = hp1 % s.q_len, t = hp2 % T2;
        static const int32_t far[] = {-2, INT32_MIN, INT32_MAX};
        const int64_t k = (hp0 + hp1) % 6;
        list2[(b * s.q_len + i) * T2 + t] =
            k < 3 ? (int32_t)(lk2_of[b] + k) : far[k - 3];
        want = i < lq_of[b] ? ATTN_ERR_ARG : ATTN_OK; /* lists past Lq_b are not read */
        break;
    }
    case H_KV_LENS: {
        const int32_t bad[] = {-1, INT32_MIN, INT32_MAX, (int32_t)(L2 + 1)};
        if (!kv_lens2_given)
            for (int64_t b = 0; b < s.batch; b++)
                kv_lens2[b] = (int32_t)L2;
        kv_lens2_given = 1;
        kv_lens2[hp0 % s.batch] = bad[hp1 % 4];
        want = ATTN_ERR_ARG;
        break;
    }
    case H_DTYPE: {
        static const int32_t bad[] = {ATTN_DTYPE_BOOL, -1, ATTN_DTYPE_COUNT, 1000, INT32_MIN};
        bad_view = hp0 % 2 ? v2t : k2t;
        bad_view.dtype = bad[hp1 % 5];
        if (hp0 % 2)
            x.v = &bad_view;
        else
            x.k = &bad_view;
        want = ATTN_ERR_ARG;
        break;
    }
    case H_VIEW_NULL:
        bad_view = hp0 % 2 ? v2t : k2t;
        bad_view.data = NULL;
        if (hp1 % 2)
            *(hp0 % 2 ? &x.v : &x.k) = &bad_view;
        else
            *(hp0 % 2 ? &x.v : &x.k) = NULL;
        want = ATTN_ERR_NULL;
        break;
    case H_ALIAS: {
        /* the second source's K or V starting inside out or a row
           statistic: shares bytes with an output (attn.h: ATTN_ERR_STRIDE) */
        bad_view = hp0 % 2 ? v2t : k2t;
        float *const outs[4] = {ot.data, stats.lse, stats.max_score, stats.entropy};
        float *at = outs[hp1 % 4] ? outs[hp1 % 4] : ot.data;
        const size_t room = at == ot.data ? out_bytes : st_bytes;
        bad_view.data = (unsigned char *)at + (size_t)hp2 % room;
        if (hp0 % 2)
            x.v = &bad_view;
        else
            x.k = &bad_view;
        want = ATTN_ERR_STRIDE;
        break;
    }
    case H_GROUP: {
        /* a record or scale group: negative (ARG), not dividing the row
           (SHAPE), on a cache without records or scales (ARG), not whole
           U4 codes (SHAPE) */
        const int on_v = (int)(hp0 % 2);
        const int32_t dt = (on_v ? x.v : x.k)->dtype;
        const int64_t cols = on_v ? dv : d;
        int64_t *grp_field = on_v ? &x.v_scale_group : &x.k_scale_group;
        if (hp1 % 3 == 0) {
            *grp_field = -1;
            want = ATTN_ERR_ARG;
        } else if (hp1 % 3 == 1 || dt == ATTN_DTYPE_U8_ASYM) {
            *grp_field = cols + 1;
            want = ATTN_ERR_SHAPE;
        } else {
            *grp_field = 1;
            want = dt == ATTN_DTYPE_U4_ASYM ? ATTN_ERR_SHAPE : ATTN_ERR_ARG;
        }
        break;
    }
    case H_STRIDE: {
        bad_view = hp0 % 2 ? v2t : k2t;
        int64_t *const f[3] = {&bad_view.batch_stride, &bad_view.head_stride,
                               &bad_view.row_stride};
        *f[hp1 % 3] = hp2 % 2 ? -1 : INT64_MIN;
        if (hp0 % 2)
            x.v = &bad_view;
        else
            x.k = &bad_view;
        want = ATTN_ERR_STRIDE;
        break;
    }
    case H_TAIL:
        /* k_tail and k_tail_dim: both or neither (ARG) */
        if (hp0 % 2)
            x.k_tail = &k1.t;
        else
            x.k_tail_dim = 1 + hp1 % 4;
        want = ATTN_ERR_ARG;
        break;
    default:
        break;
    }
    int32_t *list2g = NULL, *kl2g = NULL;
    guarded_copy(&l2b, &g, list2, n2 * 4, (void **)&list2g);
    if (hostile != H_INDICES_NULL)
        x.indices = list2g;
    if (kv_lens2_given) {
        guarded_copy(&klb, &g, kv_lens2, (size_t)s.batch * 4, (void **)&kl2g);
        x.kv_lens = kl2g;
    }
    /* the struct itself: struct_size bytes (at least its first field),
       rounded up to its 8-byte alignment as a caller's struct is; sizes up
       to 4096 are read whole (the zero-tail rule), larger ones not */
    x.struct_size = struct_size;
    const size_t xcopy = struct_size < 4 ? 4 : struct_size > sizeof x ? sizeof x : struct_size;
    const size_t xspan = struct_size > sizeof x && struct_size <= 4096 ? struct_size : xcopy;
    unsigned char *xmem = fz_buf_alloc(&xb, (xspan + 7) & ~(size_t)7, 0);
    memset(xmem, 0, xspan);
    memcpy(xmem, &x, xcopy);
    if (struct_tail_byte)
        xmem[sizeof x + struct_tail_byte - 1] = (unsigned char)(1 + hp1 % 255);
    const attn_kv_source *xp = extra_null ? NULL : (const attn_kv_source *)(void *)xmem;

    /* ---- the float64 reference: one cache of L1 + L2 keys per (b, KV
       head), each row's visible keys as a BOOL mask (the first source's
       rules written out, then the keys its list names) */
    const int64_t L = L1 + L2;
    ref_attn ref;
    int have_ref = 0;
    if (want == ATTN_OK || want_alt == ATTN_OK) {
        float *K = xmalloc((size_t)(s.batch * s.kv_heads * L * d) * 4);
        float *V = xmalloc((size_t)(s.batch * s.kv_heads * L * dv) * 4);
        for (int64_t b = 0; b < s.batch; b++)
            for (int64_t h = 0; h < s.kv_heads; h++)
                for (int64_t j = 0; j < L; j++) {
                    float *kr = K + ((b * s.kv_heads + h) * L + j) * d;
                    float *vr = V + ((b * s.kv_heads + h) * L + j) * dv;
                    const int first = j < L1;
                    const int64_t jj = first ? j : j - L1;
                    /* second-source rows no read list of b names: 0
                       (masked; a pool's rows are decoded from its one
                       batch entry) */
                    if (!first && !named[b * L2 + jj]) {
                        memset(kr, 0, (size_t)d * 4);
                        memset(vr, 0, (size_t)dv * 4);
                        continue;
                    }
                    const attn_tensor *kt = first ? &k1.t : &k2t, *vt = first ? &v1t : &v2t;
                    view_row(kt, first ? 0 : x.k_scale_group, b, h, jj, d, kr);
                    view_row(vt, first ? 0 : x.v_scale_group, b, h, jj, dv, vr);
                }
        unsigned char *mask = calloc((size_t)(s.batch * s.q_len * L), 1);
        unsigned char *in1 = xmalloc((size_t)L1);
        attn_options o1 = opt; /* ref_visible without the list: in1 */
        o1.topk_indices = NULL;
        o1.topk = 0;
        for (int64_t b = 0; b < s.batch; b++)
            for (int64_t i = 0; i < s.q_len; i++) {
                unsigned char *mrow = mask + (b * s.q_len + i) * L;
                memset(in1, have_topk1 ? 0 : 1, (size_t)L1);
                for (int64_t t = 0; have_topk1 && i < lq_of[b] && t < T1; t++) {
                    const int32_t j = list1[(b * s.q_len + i) * T1 + t];
                    if (j >= 0 && j < L1)
                        in1[j] = 1;
                }
                for (int64_t j = 0; j < L1; j++)
                    mrow[j] = in1[j] && ref_visible(&s, &o1, b, 0, i, j);
                for (int64_t t = 0; i < lq_of[b] && t < T2; t++) {
                    const int32_t j = list2[(b * s.q_len + i) * T2 + t];
                    if (j >= 0 && j < lk2_of[b])
                        mrow[L1 + j] = 1;
                }
            }
        free(in1);
        const attn_shape cs = {s.batch, s.q_heads, s.kv_heads, s.q_len, L, d, s.v_dim};
        attn_options co = ATTN_OPTIONS_INIT;
        co.scale = opt.scale;
        co.softcap = opt.softcap;
        co.sinks = opt.sinks;
        co.q_lens = opt.q_lens;
        co.precision = opt.precision;
        const attn_tensor mt = {mask, ATTN_DTYPE_BOOL, s.q_len * L, 0, L};
        co.mask = &mt;
        const attn_tensor Kt = {K, ATTN_DTYPE_F32, s.kv_heads * L * d, L * d, d};
        const attn_tensor Vt = {V, ATTN_DTYPE_F32, s.kv_heads * L * dv, L * dv, dv};
        /* the dtypes whose modes bound both sources' keys (attn.h,
           attn_precision): the int8 mode's Q8_0/Q4_0, BF16 q and k's bf16
           products; else F32's, which every other reading is within */
        const int32_t kdt = opt.precision == ATTN_PRECISION_INT8 && is_block(k2t.dtype) ? k2t.dtype
                            : qdt == ATTN_DTYPE_BF16 && k2t.dtype == ATTN_DTYPE_BF16
                                ? ATTN_DTYPE_BF16
                                : ATTN_DTYPE_F32;
        const int32_t vdt = opt.precision == ATTN_PRECISION_INT8 && is_block(v2t.dtype)
                                ? v2t.dtype
                                : ATTN_DTYPE_F32;
        const int64_t R = (L1 + bk - 1) / bk + 1 + most_named + 1 + split_call;
        ref_attn_compute_as(&ref, &cs, &co, &qt, &Kt, &Vt, R, kdt, vdt);
        have_ref = 1;
        free(K), free(V), free(mask);
    }

    /* ---- every table */
    results res[MAX_TABLES];
    memset(res, 0, sizeof res);
    float *const want_st[3] = {stats.lse, stats.max_score, stats.entropy};
    int ran = 0;
    for (int ti = 0; ti < ntables; ti++) {
        const attn_dsp *t = tables[ti];
        const char *isa = t->isa_name;
        memset(ot.data, 0x5a, out_bytes);
        for (int i = 0; i < 3; i++)
            memset(st_ptr[i], 0xa5, st_bytes);
        opt.parallel_for = NULL;
        const attn_status got =
            attn_forward_sources_with(t, &s, &opt, &qt, &k1.t, &v1t, xp, &ot, &stats);
        FZ_CHECK(got == want || (int)got == want_alt, "%s: status %d, attn.h says %d", isa, got, want);
        if (got != ATTN_OK) {
            for (size_t i = 0; i < out_bytes; i++)
                FZ_CHECK(((unsigned char *)ot.data)[i] == 0x5a, "%s: rejected call (%d) wrote "
                         "out byte %zu", isa, got, i);
            for (int w = 0; w < 3; w++)
                for (size_t i = 0; i < st_bytes; i++)
                    FZ_CHECK(((unsigned char *)st_ptr[w])[i] == 0xa5, "%s: rejected call (%d) "
                             "wrote row statistic %d byte %zu", isa, got, w, i);
            continue;
        }
        FZ_CHECK(have_ref, "accepted call without a reference");
        res[ti].out = xmalloc(out_bytes);
        res[ti].st = xmalloc(3 * st_bytes);
        memcpy(res[ti].out, ot.data, out_bytes);
        for (int w = 0; w < 3; w++)
            memcpy(res[ti].st + w * rows, st_ptr[w], st_bytes);
        ran++;
        const results *sc = &res[0];
        for (int64_t row = 0; row < rows; row++) {
            for (int64_t c = 0; c < dv; c++)
                compare("out", isa, (long long)(row * dv + c), res[ti].out[row * dv + c],
                        sc->out[row * dv + c], ref.o[row * dv + c], ref.o_err[row * dv + c]);
            const double *rw[3] = {ref.lse, ref.max, ref.ent},
                         *re[3] = {ref.lse_err, ref.max_err, ref.ent_err};
            static const char *names[3] = {"lse", "max_score", "entropy"};
            for (int w = 0; w < 3; w++)
                if (want_st[w])
                    compare(names[w], isa, (long long)row, res[ti].st[w * rows + row],
                            sc->st[w * rows + row], rw[w][row], re[w][row]);
        }
    }

    /* ---- the public entry point: the active table's status and bits */
    {
        const attn_dsp *active = attn_dsp_active();
        int ai = -1;
        for (int i = 0; i < ntables; i++)
            if (tables[i] == active)
                ai = i;
        memset(ot.data, 0x5a, out_bytes);
        const attn_status got =
            attn_forward_sources(&s, &opt, &qt, &k1.t, &v1t, xp, &ot, &stats);
        FZ_CHECK(got == want || (int)got == want_alt, "attn_forward_sources: status %d, attn.h says "
                 "%d (%s)", got, want, attn_last_error());
        if (got == ATTN_OK && ai >= 0)
            FZ_CHECK(memcmp(ot.data, res[ai].out, out_bytes) == 0,
                     "attn_forward_sources: other bits than attn_forward_sources_with(%s)",
                     tables[ai]->isa_name);
        for (size_t i = 0; got != ATTN_OK && i < out_bytes; i++)
            FZ_CHECK(((unsigned char *)ot.data)[i] == 0x5a, "attn_forward_sources: rejected "
                     "call (%d) wrote out byte %zu", got, i);
    }

    /* ---- NaN where attn.h says nothing is read: the same bits */
    if (ran) {
        for (int64_t b = 0; b < s.batch; b++) {
            /* query rows past Lq_b */
            for (int64_t h = 0; h < s.q_heads; h++)
                for (int64_t i = lq_of[b]; i < s.q_len; i++)
                    memset(row_at(&qt, b, h, i), 0xff, (size_t)d * qes);
            /* first-source keys past Lk_b (a shared second source reads them) */
            for (int64_t h = 0; have_kv_lens && !shared && h < s.kv_heads; h++)
                for (int64_t j = kv_lens[b]; j < L1; j++) {
                    memset(row_at(&k1.t, b, h, j), 0xff, (size_t)d * 4);
                    if (!v_in_k1)
                        memset(row_at(&v1t, b, h, j), 0xff, (size_t)dv * 4);
                }
        }
        /* second-source rows no read list names (of a pool: no sequence) */
        for (int64_t b = 0; !shared && b < k2.nb; b++)
            for (int64_t h = 0; h < s.kv_heads; h++)
                for (int64_t j = 0; j < L2; j++) {
                    int used = 0;
                    for (int64_t bb = 0; bb < s.batch; bb++)
                        if ((k2.nb == 1 || bb == b) && named[bb * L2 + j])
                            used = 1;
                    if (used)
                        continue;
                    memset(row_at(&k2t, b, h, j), 0xff, (size_t)k2.units * k2.ub);
                    if (!v_in_k2)
                        memset(row_at(&v2t, b, h, j), 0xff, (size_t)v2.units * v2.ub);
                }
        /* rerun in reverse task order: the same bits (attn.h,
           "Determinism"); on a difference, once more in order tells which
           promise broke */
        for (int ti = 0; ti < ntables; ti++) {
            if (!res[ti].out)
                continue;
            const char *isa = tables[ti]->isa_name;
            if (rerun_same(tables[ti], fz_reversed_for, &s, &opt, &qt, &k1.t, &v1t, xp, &ot, &stats,
                           &res[ti], rows, dv))
                continue;
            FZ_CHECK(!rerun_same(tables[ti], NULL, &s, &opt, &qt, &k1.t, &v1t, xp, &ot, &stats,
                                 &res[ti], rows, dv),
                     "%s: reverse task order changed the bits (with NaN in rows nothing reads; "
                     "in order they are the same)", isa);
            for (int64_t i = 0; i < rows * dv; i++)
                FZ_CHECK(memcmp(&((float *)ot.data)[i], &res[ti].out[i], 4) == 0,
                         "%s: NaN in rows nothing reads changed out[%lld]: %g, was %g", isa,
                         (long long)i, ((float *)ot.data)[i], res[ti].out[i]);
            FZ_CHECK(0, "%s: NaN in rows nothing reads changed a row statistic", isa);
        }
    }

    for (int ti = 0; ti < ntables; ti++)
        free(res[ti].out), free(res[ti].st);
    if (have_ref)
        ref_attn_free(&ref);
    free(named), free(pool_named);
    free(list2);
    fz_buf_free(&qb), fz_buf_free(&ob), fz_buf_free(&sinkb), fz_buf_free(&l1b);
    fz_buf_free(&l2b), fz_buf_free(&klb), fz_buf_free(&xb), fz_buf_free(&wsb);
    for (int i = 0; i < 3; i++)
        fz_buf_free(&stb[i]);
    fz_buf_free(&k1.buf), fz_buf_free(&v1.buf), fz_buf_free(&k2.buf), fz_buf_free(&v2.buf);
    return 0;
}

/*
 * Fuzzer of offset, packed and paged K/V (attn.h 1.1): API checks and
 * differential checks in one target, so that the layouts are decoded once.
 *
 * The input decodes a small problem and a layout description: q/kv offsets
 * and lengths (mostly valid, sometimes out of range), a paged pool with a
 * block table (shuffled, in order, shared; entries of unseen pages garbage;
 * now and then a seen page outside the pool), packed outputs with
 * batch_stride 0 (sometimes overlapping sequences), and ALiBi slopes and
 * sinks (per batch entry and head, or per head), whose positions and rows
 * the layouts shift. Every buffer (q, the K/V pools, the table, the four
 * int32 arrays, the slopes and sinks, outputs, stats) is exactly as large as
 * the description says and ends at, or starts after, a PROT_NONE page, so a
 * read of an entry or a slot nobody may use faults.
 *
 * Fails when: a crash or sanitizer report; a status outside those the
 * header allows for the description (a model written from attn.h below);
 * an output byte changed by a rejected call; an input byte changed; an
 * output element outside every sequence's rows and columns changed by an
 * accepted call; a result of any kernel table off the float64 reference
 * (tests/ref_kv.c + ref.c) by more than tests/tolerance.h's bound, or off
 * the scalar table by more than twice it; a NaN anywhere (the valid ranges
 * hold finite values and everything outside them NaN, which must never be
 * read).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "internal.h"
#include "ops_list.h"
#include "ref.h"
#include "ref_kv.h"
#include "tolerance.h"

/* The operations of ops_list.h that take a K/V layout or offsets; a byte
   picks one by index (append, never reorder: the corpus depends on it). */
static const op_kind layout_ops[] = {OP_SCORES, OP_WEIGHTS, OP_FORWARD, OP_MASK_APPLY};

typedef struct prob {
    op_kind op;
    int paged, packed_out;
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, out, alibi, sinks;
    int64_t dv, out_floats, stats_floats;
    fz_buf bq, bk, bv, bout, bstats, btable, barr[4], balibi, bsinks;
    int32_t *arr[4]; /* q_lens, kv_lens, q_offsets, kv_offsets (NULL: absent) */
    attn_row_stats stats;
    unsigned expect; /* bit s: status s allowed */
} prob;

static void store(int32_t dt, void *at, float x)
{
    if (dt == ATTN_DTYPE_F32) {
        memcpy(at, &x, 4);
    } else {
        uint16_t h = dt == ATTN_DTYPE_F16 ? ref_f32_to_f16(x) : ref_f32_to_bf16(x);
        memcpy(at, &h, 2);
    }
}

static void *alloc_nan(fz_buf *b, fz_reader *r, int32_t dt, size_t n)
{
    void *p = fz_buf_alloc(b, n * ref_dtype_size(dt), fz_chance(r, 128));
    for (size_t i = 0; i < n; i++)
        store(dt, (char *)p + i * ref_dtype_size(dt), NAN);
    return p;
}

static int64_t seq(const int32_t *lens, int64_t b, int64_t full) { return lens ? lens[b] : full; }

/* The header's rule for one sequence: keys some query sees, as [lo, hi). */
static void seen_keys(const prob *p, int64_t b, int64_t *lo, int64_t *hi)
{
    const int64_t lq = seq(p->opt.q_lens, b, p->shape.q_len),
                  lk = seq(p->opt.kv_lens, b, p->shape.kv_len);
    *lo = INT64_MAX;
    *hi = 0;
    for (int64_t i = 0; i < lq; i++)
        for (int64_t j = 0; j < lk; j++) {
            const int64_t a = i + lk - lq;
            if ((p->opt.flags & ATTN_CAUSAL) && j > a)
                continue;
            if (p->opt.window > 0 && j <= a - p->opt.window)
                continue;
            *lo = j < *lo ? j : *lo;
            *hi = j + 1 > *hi ? j + 1 : *hi;
        }
}

/* Decodes a problem; returns 0 when the decoded sizes are not worth a run. */
static int decode(prob *p, fz_reader *r, fz_rng *g)
{
    memset(p, 0, sizeof *p);
    attn_options init = ATTN_OPTIONS_INIT;
    p->opt = init;
    p->op = layout_ops[fz_range(r, 0, 3)];
    const int64_t B = fz_range(r, 1, 3), kvh = fz_range(r, 1, 2), grp = fz_range(r, 1, 2);
    const int64_t d = fz_range(r, 1, 24);
    p->dv = fz_chance(r, 64) ? fz_range(r, 1, 24) : d;
    const int64_t q_len = fz_range(r, 1, 10), kv_len = fz_range(r, 1, 40);
    p->shape = (attn_shape){B, kvh * grp, kvh, q_len, kv_len, d, p->dv == d ? 0 : p->dv};
    p->opt.flags = fz_chance(r, 128) ? ATTN_CAUSAL : 0;
    p->opt.window = fz_chance(r, 64) ? fz_range(r, 1, 12) : 0;
    p->opt.softcap = fz_chance(r, 40) ? 3.0f : 0.0f;
    const int32_t dts[] = {ATTN_DTYPE_F32, ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    const int32_t qt = dts[fz_range(r, 0, 2)], kt = dts[fz_range(r, 0, 2)],
                  vt = dts[fz_range(r, 0, 2)];
    unsigned bad_arg = 0, bad_stride = 0;

    /* lengths and offsets: each array present or not, mostly in range */
    const int64_t limit[4] = {q_len, kv_len, q_len, kv_len};
    for (int a = 0; a < 4; a++) {
        if (!fz_chance(r, 150))
            continue;
        p->arr[a] = fz_buf_alloc(&p->barr[a], (size_t)B * 4, fz_chance(r, 128));
        for (int64_t b = 0; b < B; b++)
            p->arr[a][b] = (int32_t)(fz_chance(r, 8) ? fz_range(r, -3, limit[a] + 3)
                                                     : fz_range(r, 0, limit[a]));
    }
    /* offsets that fit their sequence, most of the time */
    for (int a = 2; a < 4; a++)
        if (p->arr[a])
            for (int64_t b = 0; b < B; b++) {
                const int64_t len = p->arr[a - 2] ? p->arr[a - 2][b] : limit[a];
                if (!fz_chance(r, 8) && len >= 0 && len <= limit[a])
                    p->arr[a][b] = (int32_t)fz_range(r, 0, limit[a] - len);
            }
    p->opt.q_lens = p->arr[0];
    p->opt.kv_lens = p->arr[1];
    p->opt.q_offsets = p->arr[2];
    p->opt.kv_offsets = p->arr[3];
    int lens_ok = 1;
    for (int a = 0; a < 2; a++)
        for (int64_t b = 0; p->arr[a] && b < B; b++)
            if (p->arr[a][b] < 0 || p->arr[a][b] > limit[a])
                lens_ok = 0;
    for (int a = 2; a < 4 && lens_ok; a++)
        for (int64_t b = 0; p->arr[a] && b < B; b++)
            if (p->arr[a][b] < 0 || p->arr[a][b] + seq(p->arr[a - 2], b, limit[a]) > limit[a])
                bad_arg = 1;
    bad_arg |= !lens_ok;

    /* q */
    const int rows_outer = fz_chance(r, 128);
    p->q = (attn_tensor){alloc_nan(&p->bq, r, qt, (size_t)(B * p->shape.q_heads * q_len * d)),
                         qt, p->shape.q_heads * q_len * d, q_len * d, d};
    if (rows_outer) {
        p->q.head_stride = d;
        p->q.row_stride = p->shape.q_heads * d;
    }

    /* K/V: dense, or a pool with a table */
    p->paged = p->op != OP_MASK_APPLY && fz_chance(r, 160);
    int64_t nb = B, slots = kv_len;
    if (p->paged) {
        const int64_t bs = fz_chance(r, 64) ? 1 : fz_range(r, 1, kv_len + 2);
        const int64_t pages = (kv_len + bs - 1) / bs;
        const int shared = fz_chance(r, 30);
        const int64_t stride = shared ? 0 : pages + fz_range(r, 0, 2);
        const int64_t entries = (B - 1) * stride + pages;
        nb = pages * B + fz_range(r, 0, 2);
        slots = bs;
        int32_t *t = fz_buf_alloc(&p->btable, (size_t)entries * 4, fz_chance(r, 128));
        const int in_order = fz_chance(r, 80);
        for (int64_t e = 0; e < entries; e++)
            t[e] = (int32_t)(in_order ? e % nb : (int64_t)(fz_rng_next(g) % (uint64_t)nb));
        p->opt.block_table = t;
        p->opt.block_table_stride = stride;
        p->opt.block_size = bs;
        p->opt.num_blocks = nb;
        if (fz_chance(r, 10))
            p->opt.block_size = fz_range(r, -1, 0), bad_arg = 1;
        if (fz_chance(r, 10))
            p->opt.num_blocks = 0, bad_arg = 1;
        if (!bad_arg) { /* garbage where nobody looks, and now and then where someone does */
            const int poison_seen = fz_chance(r, 12);
            for (int64_t b = 0; b < B; b++) {
                int64_t lo, hi;
                seen_keys(p, b, &lo, &hi);
                const int64_t ko = seq(p->arr[3], b, 0);
                for (int64_t pg = 0; pg < pages; pg++) {
                    const int seen = lo < hi && pg >= (ko + lo) / bs && pg <= (ko + hi - 1) / bs;
                    int32_t *e = &t[(shared ? 0 : b * stride) + pg];
                    if (!seen && !shared)
                        *e = fz_chance(r, 128) ? -1 : INT32_MAX;
                    if (seen && poison_seen && fz_chance(r, 60)) {
                        *e = fz_chance(r, 128) ? (int32_t)nb : -5;
                        bad_arg = 1;
                    }
                }
            }
        }
    } else if (p->op != OP_MASK_APPLY && fz_chance(r, 10)) {
        p->opt.block_size = 16; /* paging fields without a table */
        bad_arg = 1;
    }
    p->k = (attn_tensor){alloc_nan(&p->bk, r, kt, (size_t)(nb * kvh * slots * d)), kt,
                         slots * kvh * d, d, kvh * d}; /* [blocks][slots][heads][d] */
    p->v = (attn_tensor){alloc_nan(&p->bv, r, vt, (size_t)(nb * kvh * slots * p->dv)), vt,
                         slots * kvh * p->dv, p->dv, kvh * p->dv};

    /* outputs; packed: batch_stride 0 (needs in-order disjoint sequences) */
    const int64_t cols = p->op == OP_FORWARD ? p->dv : kv_len;
    p->packed_out = p->arr[2] && fz_chance(r, 100);
    const int64_t ob = p->packed_out ? 1 : B;
    p->out_floats = ob * p->shape.q_heads * q_len * cols;
    p->out = (attn_tensor){fz_buf_alloc(&p->bout, (size_t)p->out_floats * 4, fz_chance(r, 128)),
                           ATTN_DTYPE_F32, p->packed_out ? 0 : p->shape.q_heads * q_len * cols,
                           q_len * cols, cols};
    if (p->packed_out && B > 1 && !bad_arg) {
        int64_t end = 0;
        for (int64_t b = 0; b < B; b++) {
            const int64_t len = seq(p->arr[0], b, q_len);
            if (len && p->arr[2][b] < end)
                bad_stride = 1;
            if (len)
                end = p->arr[2][b] + len;
        }
    }
    p->stats_floats = B * p->shape.q_heads * q_len;
    float *st = fz_buf_alloc(&p->bstats, (size_t)p->stats_floats * 12, fz_chance(r, 128));
    p->stats = (attn_row_stats){st, st + p->stats_floats, st + 2 * p->stats_floats};

    /* valid data where a sequence may be read; NaN stays everywhere else */
    const int64_t Hq = p->shape.q_heads;
    if (!bad_arg)
        for (int64_t b = 0; b < B; b++) {
            const int64_t qo = seq(p->arr[2], b, 0), ko = seq(p->arr[3], b, 0);
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < seq(p->arr[0], b, q_len); i++)
                    for (int64_t c = 0; c < d; c++)
                        store(qt, ref_tensor_at(&p->q, b, h, qo + i, c),
                              fz_rng_float(g, -2.0f, 2.0f));
            for (int64_t j = 0; j < seq(p->arr[1], b, kv_len); j++)
                for (int64_t h = 0; h < kvh; h++) {
                    const void *kp = ref_kv_at(&p->k, &p->opt, b, h, ko + j);
                    const void *vp = ref_kv_at(&p->v, &p->opt, b, h, ko + j);
                    if (p->paged) { /* pages nobody sees may be garbage entries */
                        const int32_t e = p->opt.block_table[b * p->opt.block_table_stride +
                                                             (ko + j) / p->opt.block_size];
                        if (e < 0 || e >= nb)
                            continue;
                    }
                    for (int64_t c = 0; c < d; c++)
                        store(kt, (char *)kp + c * (int64_t)ref_dtype_size(kt),
                              fz_rng_float(g, -2.0f, 2.0f));
                    for (int64_t c = 0; c < p->dv; c++)
                        store(vt, (char *)vp + c * (int64_t)ref_dtype_size(vt),
                              fz_rng_float(g, -2.0f, 2.0f));
                }
        }

    /* Score modifiers, decoded last so that every byte before keeps its
       meaning (the committed corpus decodes the same problems, with slopes
       and sinks where its inputs end: running out of bytes reads as 0,
       "present, usual value"). F32 [B][Hq] or [Hq] (batch_stride 0). */
    if (fz_chance(r, 170)) { /* ALiBi: 2^(-8(h+1)/H) scaled, now and then steep or negative */
        const int per_batch = fz_chance(r, 170);
        float *a = fz_buf_alloc(&p->balibi, (size_t)((per_batch ? B : 1) * Hq) * 4,
                                fz_chance(r, 128));
        for (int64_t i = 0; i < (per_batch ? B : 1) * Hq; i++) {
            const int kind = fz_u8(r) % 8;
            a[i] = kind == 6   ? fz_rng_float(g, 0.5f, 2.0f)
                   : kind == 7 ? fz_rng_float(g, -0.1f, 0.0f)
                               : exp2f(-8.0f * (float)(i % Hq + 1) / (float)Hq) *
                                     fz_rng_float(g, 0.25f, 2.0f);
        }
        p->alibi = (attn_tensor){a, ATTN_DTYPE_F32, per_batch ? Hq : 0, 1, 0};
        p->opt.alibi_slopes = &p->alibi;
    }
    if (fz_chance(r, 150)) { /* sinks: comparable to the scores, dominant, or none (-inf) */
        const int per_batch = fz_chance(r, 170);
        float *z = fz_buf_alloc(&p->bsinks, (size_t)((per_batch ? B : 1) * Hq) * 4,
                                fz_chance(r, 128));
        for (int64_t i = 0; i < (per_batch ? B : 1) * Hq; i++) {
            const int kind = fz_u8(r) % 8;
            z[i] = kind == 6   ? fz_rng_float(g, 6.0f, 12.0f)
                   : kind == 7 ? -INFINITY
                               : fz_rng_float(g, -3.0f, 3.0f);
        }
        p->sinks = (attn_tensor){z, ATTN_DTYPE_F32, per_batch ? Hq : 0, 1, 0};
        p->opt.sinks = &p->sinks;
    }
    p->expect = bad_arg || bad_stride ? (bad_arg << ATTN_ERR_ARG) | (bad_stride << ATTN_ERR_STRIDE)
                                      : 1u << ATTN_OK;
    return 1;
}

static void release(prob *p)
{
    fz_buf *bufs[] = {&p->bq, &p->bk, &p->bv, &p->bout, &p->bstats, &p->btable,
                      &p->barr[0], &p->barr[1], &p->barr[2], &p->barr[3], &p->balibi,
                      &p->bsinks};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->map)
            fz_buf_free(bufs[i]);
}

static attn_status run(const attn_dsp *t, prob *p)
{
    switch (p->op) {
    case OP_SCORES: return attn_scores_with(t, &p->shape, &p->opt, &p->q, &p->k, &p->out);
    case OP_WEIGHTS:
        return attn_weights_with(t, &p->shape, &p->opt, &p->q, &p->k, &p->out, &p->stats);
    case OP_FORWARD:
        return attn_forward_with(t, &p->shape, &p->opt, &p->q, &p->k, &p->v, &p->out,
                                 &p->stats);
    case OP_MASK_APPLY: return attn_mask_apply_with(t, &p->shape, &p->opt, &p->out);
    case OP_SOFTMAX:
    case OP_SOFTMAX_BWD:
    case OP_MERGE:
    case OP_BACKWARD:
    case OP_QUANTIZE: /* no K/V layout: not drawn (layout_ops) */
    case OP_COUNT: break;
    }
    FZ_CHECK(0, "%s reads no K/V layout", op_names[p->op]);
}

/* Checks one accepted run's outputs (got) against the reference and scalar. */
static void check_results(const prob *p, const ref_attn *ra, const ref_dense *dn,
                          const float *before, const float *got, const float *scalar,
                          const char *isa)
{
    const int fwd = p->op == OP_FORWARD, stats = p->op == OP_WEIGHTS || fwd;
    const int64_t Hq = p->shape.q_heads, q_len = p->shape.q_len;
    const int64_t cols = fwd ? p->dv : p->shape.kv_len, rcols = fwd ? p->dv : dn->shape.kv_len;
    const size_t total = (size_t)(p->out_floats + 3 * p->stats_floats);
    uint8_t *owned = calloc(total, 1);
    FZ_CHECK(owned, "out of memory");
    for (int64_t b = 0; b < p->shape.batch; b++) {
        const int64_t qo = seq(p->arr[2], b, 0), ko = seq(p->arr[3], b, 0);
        const int64_t rows = p->arr[2] ? seq(p->arr[0], b, q_len) : q_len;
        const int64_t c0 = fwd || !p->arr[3] ? 0 : ko;
        const int64_t c1 = fwd || !p->arr[3] ? cols : ko + seq(p->arr[1], b, p->shape.kv_len);
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < rows; i++) {
                const int in_ref = i < dn->shape.q_len;
                const int64_t rr = (b * Hq + h) * dn->shape.q_len + i;
                const size_t base =
                    (size_t)((float *)ref_tensor_at(&p->out, b, h, qo + i, 0) - (float *)p->out.data);
                for (int64_t c = c0; c < c1; c++) {
                    const int64_t j = fwd ? c : c - ko;
                    double want = fwd || p->op == OP_WEIGHTS ? 0.0 : -INFINITY, err = 0.0;
                    if (in_ref && j < rcols) {
                        const size_t at = (size_t)(rr * rcols + j);
                        want = fwd ? ra->o[at] : p->op == OP_WEIGHTS ? ra->p[at] : ra->s[at];
                        err = fwd ? ra->o_err[at] : p->op == OP_WEIGHTS ? ra->p_err[at] : ra->s_err[at];
                    }
                    const float x = got[base + (size_t)c];
                    owned[base + (size_t)c] = 1;
                    FZ_CHECK(!isnan(x), "%s %s: NaN at %zu (something outside a sequence was read)",
                             isa, op_names[p->op], base + (size_t)c);
                    FZ_CHECK(isinf(want) ? x == want : fabs(x - want) <= err,
                             "%s %s: element %zu = %.9g, float64 %.9g, bound %.3g", isa,
                             op_names[p->op], base + (size_t)c, (double)x, want, err);
                    if (scalar) {
                        const float y = scalar[base + (size_t)c];
                        FZ_CHECK(isinf(y) || isinf(x) ? x == y : fabs(x - y) <= TOL_PAIR(err),
                                 "%s %s: element %zu = %.9g, scalar %.9g", isa, op_names[p->op],
                                 base + (size_t)c, (double)x, (double)y);
                    }
                }
                if (!stats)
                    continue;
                const size_t srow = (size_t)((b * Hq + h) * q_len + qo + i);
                const double sw[3] = {in_ref ? ra->lse[rr] : -INFINITY,
                                      in_ref ? ra->max[rr] : -INFINITY, in_ref ? ra->ent[rr] : 0};
                const double se[3] = {in_ref ? ra->lse_err[rr] : 0, in_ref ? ra->max_err[rr] : 0,
                                      in_ref ? ra->ent_err[rr] : 0};
                for (int s = 0; s < 3; s++) {
                    const size_t at = (size_t)p->out_floats + (size_t)s * (size_t)p->stats_floats + srow;
                    owned[at] = 1;
                    FZ_CHECK(isinf(sw[s]) ? got[at] == sw[s] : fabs(got[at] - sw[s]) <= se[s],
                             "%s %s: stat %d of row %zu = %.9g, float64 %.9g", isa,
                             op_names[p->op], s, srow, (double)got[at], sw[s]);
                }
            }
    }
    for (size_t i = 0; i < total; i++)
        FZ_CHECK(owned[i] || memcmp(&got[i], &before[i], 4) == 0,
                 "%s %s: wrote element %zu outside every sequence", isa, op_names[p->op], i);
    free(owned);
}

static void save(const prob *p, float *dst)
{
    memcpy(dst, p->out.data, (size_t)p->out_floats * 4);
    memcpy(dst + p->out_floats, p->stats.lse, (size_t)p->stats_floats * 12);
}

static void load(prob *p, const float *src)
{
    memcpy(p->out.data, src, (size_t)p->out_floats * 4);
    memcpy(p->stats.lse, src + p->out_floats, (size_t)p->stats_floats * 12);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size};
    fz_rng g = {fz_u64(&r) | 1};
    prob p;
    if (!decode(&p, &r, &g)) {
        release(&p);
        return 0;
    }
    const size_t total = (size_t)(p.out_floats + 3 * p.stats_floats);
    float *before = malloc(total * 4), *got = malloc(total * 4), *scalar = malloc(total * 4);
    FZ_CHECK(before && got && scalar, "out of memory");
    for (size_t i = 0; i < total; i++)
        before[i] = p.op == OP_MASK_APPLY && i < (size_t)p.out_floats
                        ? fz_rng_float(&g, -8.0f, 8.0f)
                        : (float)(int64_t)(fz_rng_next(&g) % 1000) - 500.5f;
    /* inputs, compared bitwise after every call */
    const size_t q_bytes = p.bq.bytes, k_bytes = p.bk.bytes, v_bytes = p.bv.bytes;
    const size_t mod_bytes = p.balibi.bytes + p.bsinks.bytes;
    unsigned char *q0 = malloc(q_bytes + 1), *k0 = malloc(k_bytes + 1), *v0 = malloc(v_bytes + 1),
                  *mods0 = malloc(mod_bytes + 1);
    FZ_CHECK(q0 && k0 && v0 && mods0, "out of memory");
    memcpy(q0, p.bq.data, q_bytes);
    memcpy(k0, p.bk.data, k_bytes);
    memcpy(v0, p.bv.data, v_bytes);
    if (p.balibi.bytes)
        memcpy(mods0, p.balibi.data, p.balibi.bytes);
    if (p.bsinks.bytes)
        memcpy(mods0 + p.balibi.bytes, p.bsinks.data, p.bsinks.bytes);

    ref_dense dn;
    ref_attn ra;
    int have_ref = 0;
    /* every registry table this build and CPU run, the scalar oracle first */
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) {
        const attn_dsp *table = attn_dsp_for_isa((attn_isa)isa);
        const int t = isa == ATTN_ISA_SCALAR ? 0 : 1;
        if (!table)
            continue;
        load(&p, before);
        const attn_status st = run(table, &p);
        FZ_CHECK(p.expect >> st & 1, "%s %s: status %d, allowed mask 0x%x",
                 attn_isa_name((attn_isa)isa), op_names[p.op], st, p.expect);
        save(&p, got);
        FZ_CHECK(memcmp(p.bq.data, q0, q_bytes) == 0 && memcmp(p.bk.data, k0, k_bytes) == 0 &&
                     memcmp(p.bv.data, v0, v_bytes) == 0 &&
                     (!p.balibi.bytes || memcmp(p.balibi.data, mods0, p.balibi.bytes) == 0) &&
                     (!p.bsinks.bytes ||
                      memcmp(p.bsinks.data, mods0 + p.balibi.bytes, p.bsinks.bytes) == 0),
                 "an input changed");
        if (st != ATTN_OK) {
            FZ_CHECK(memcmp(got, before, total * 4) == 0, "a rejected call wrote an output");
            continue;
        }
        if (!have_ref) {
            load(&p, before);
            if (p.op == OP_MASK_APPLY) {
                ref_dense_make(&dn, &p.shape, &p.opt, NULL, NULL, NULL);
                ref_dense_scores(&dn, &p.opt, &p.out);
                ref_attn_from_scores(&ra, &dn.shape, &dn.opt, &dn.scores);
            } else {
                /* tolerance.h R: one rescale per key block of the smallest block_k */
                uint32_t bk = UINT32_MAX;
                for (int u = ATTN_ISA_SCALAR; u < ATTN_ISA_COUNT; u++)
                    if (attn_dsp_for_isa((attn_isa)u) && attn_dsp_for_isa((attn_isa)u)->block_k < bk)
                        bk = attn_dsp_for_isa((attn_isa)u)->block_k;
                ref_dense_make(&dn, &p.shape, &p.opt, &p.q, &p.k,
                               p.op == OP_FORWARD ? &p.v : NULL);
                ref_attn_compute(&ra, &dn.shape, &dn.opt, &dn.q, &dn.k,
                                 p.op == OP_FORWARD ? &dn.v : NULL,
                                 p.op == OP_FORWARD ? (p.shape.kv_len + bk - 1) / bk + 1 : 0);
            }
            have_ref = 1;
        }
        check_results(&p, &ra, &dn, before, got, t == 0 ? NULL : scalar,
                      attn_isa_name((attn_isa)isa));
        if (t == 0)
            memcpy(scalar, got, total * 4);
    }
    if (have_ref) {
        ref_attn_free(&ra);
        ref_dense_free(&dn);
    }
    free(before);
    free(got);
    free(scalar);
    free(q0);
    free(k0);
    free(v0);
    free(mods0);
    release(&p);
    return 0;
}

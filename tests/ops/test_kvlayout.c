/* SPDX-License-Identifier: MIT */
/*
 * Offset, packed and paged K/V (attn.h 1.1) through the whole driver on every
 * ISA row, against the float64 reference of ref_kv.h (bounds of
 * tolerance.h) and, on SIMD rows, against the scalar table.
 *
 * The problems are the problem generator's (problems/gen.h), one profile per
 * layout. Every problem also checks what must NOT happen: outside the valid ranges
 * the inputs hold NaN (a read would poison a result), block-table entries of
 * pages no query sees hold garbage (a read would fault or be out of range),
 * the table ends at an inaccessible page, and every output element outside a
 * sequence's rows and columns must keep its previous bits.
 *
 * The mods_* tests draw the score modifiers of 1.1 on top of every layout
 * (ALiBi slopes, sinks, window_right, q_pos/k_pos shards, q_offsets with a
 * paged cache), 1.3's draft trees (tree_parents, indexed by the shifted
 * query rows) and 1.7's top-k lists (topk_indices, likewise), which read positions and rows the layouts shift: ALiBi's
 * distance, the sink of a row, the right window edge and the shard's
 * alignment are all defined on the sequence (attn.h, "Offset and packed
 * batches": i and j count from the sequence's first row). Every problem is
 * also run as the per-sequence dense call of the same table (ref_kv.c's
 * copy, no offsets, no pages): attn.h promises bitwise equality across
 * thread counts only, not across layouts (key blocks start at absolute
 * positions, so a kv_offset moves the online softmax's rescales), so the two
 * must agree within twice the float64 bound (TOL_PAIR), as two tables do.
 * The forward also writes F16 and BF16 outs in the same layout: each the F32
 * out of the same table rounded to nearest even, bit for bit, and nothing
 * outside the sequences.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "harness.h"
#include "ops_list.h"
#include "ref/ref.h"
#include "ref/ref_kv.h"
#include "tolerance.h"
#include "workload.h"

typedef enum kv_layout {
    KV_PACKED,        /* cu_seqlens: q, k, v, out one [T][H][D] tensor each */
    KV_LEFTPAD,       /* cache_leftpad: valid keys [pad_b, pad_b + len_b), padded queries */
    KV_PAGED,         /* vLLM pool [blocks][block_size][kv_heads][d], shuffled table */
    KV_PAGED_HEADS,   /* pool [blocks][kv_heads][block_size][d] */
    KV_PAGED_ADJOIN,  /* blocks mostly in order: runs merge across pages */
    KV_PAGED_LEFTPAD, /* paged with kv_offsets */
    KV_PAGED_SHARED   /* one table row for every sequence (stride 0) */
} kv_layout;

static const char *const layout_names[] = {"packed",        "leftpad",        "paged",
                                           "paged-heads",   "paged-adjoin",   "paged-leftpad",
                                           "paged-shared"};

/* The operations of ops_list.h that read K/V layouts (and mask_apply, which
   reads the offsets). */
static const op_kind layout_ops[] = {OP_SCORES, OP_WEIGHTS, OP_FORWARD, OP_MASK_APPLY};

typedef struct problem {
    kv_layout layout;
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, scores, out;
    int64_t dv, scores_n, out_n, stats_n;
    const int32_t *q_lens, *kv_lens, *q_offsets, *kv_offsets;
    attn_row_stats stats;
    gen_problem d; /* drawn and materialised by the problem generator (problems/gen.h) */
    gen_bufs m;
    fence_buf table_mem;
    char desc[1024];
} problem;

static const int64_t head_dims[] = {8, 16, 64, 72, 128};

/* The block table ends at an inaccessible page; the rest is heap memory. */
static void *problem_alloc(void *ctx, int role, size_t bytes, size_t elem, int misalign)
{
    (void)elem, (void)misalign;
    if (role == GEN_OPT(block_table))
        return fence_alloc(&((problem *)ctx)->table_mem, bytes, 0);
    return xmalloc(bytes);
}

static void problem_release(void *ctx, int role, void *data, size_t bytes)
{
    (void)bytes;
    if (role == GEN_OPT(block_table))
        fence_free(&((problem *)ctx)->table_mem);
    else
        free(data);
}

static void set_menu(gen_profile *p, int c, unsigned chance, const int64_t *menu, size_t n)
{
    p->rule[c] = (gen_rule){(uint16_t)chance, 0, 0, 0, 0, 0, 0.0, menu, n};
}

/*
 * The profile of a layout: every sequence with its lengths, some empty,
 * causal or not, a window, softcap, scale, BOOL mask and bias now and then;
 * with mods the score modifiers of 1.1 on top (ALiBi slopes, sinks,
 * window_right, q_pos/k_pos shards, q_offsets with paged caches), which read
 * positions and rows the layouts shift.
 */
static void profile_of(gen_profile *p, kv_layout layout, int64_t bs, int mods)
{
    static const int64_t groups[] = {1, 2, 4}, dtypes[] = {ATTN_DTYPE_F32, ATTN_DTYPE_F16,
                                                           ATTN_DTYPE_BF16};
    static const int64_t lens[] = {GEN_SEQ_EMPTY, GEN_SEQ_FULL, GEN_SEQ_RANDOM, GEN_SEQ_RANDOM,
                                   GEN_SEQ_RANDOM, GEN_SEQ_RANDOM};
    static const int64_t random_offset[] = {GEN_OFFSET_RANDOM}, softcap[] = {20}, scale[] = {3},
                         per_head[] = {1}, pools[] = {GEN_POOL_SHUFFLED, GEN_POOL_ADJOIN,
                                                      GEN_POOL_SHARED};
    gen_profile_init(p);
    p->work_cap = 0;
    for (int c = 0; c < GEN_C_COUNT; c++)
        gen_never(p, c);
    gen_range(p, GEN_C_BATCH, 1, 4);
    gen_range(p, GEN_C_KV_HEADS, 1, 2);
    set_menu(p, GEN_C_GROUP, 256, groups, 3);
    set_menu(p, GEN_C_HEAD_DIM, 256, head_dims, 5);
    gen_range(p, GEN_C_V_DIM, 1, 40);
    gen_chance(p, GEN_C_V_DIM, 64);
    for (int c = GEN_C_Q_DTYPE; c <= GEN_C_V_DTYPE; c++)
        set_menu(p, c, 256, dtypes, 3);
    gen_pin(p, GEN_C_OPT(q_lens), 1);
    gen_pin(p, GEN_C_OPT(kv_lens), 1);
    set_menu(p, GEN_C_SEQ_Q, 256, lens, 6);
    set_menu(p, GEN_C_SEQ_KV, 256, lens, 6);
    set_menu(p, GEN_C_OFFSET, 256, random_offset, 1);
    gen_range(p, GEN_C_OPT(flags), 1, 1); /* causal half the time */
    gen_chance(p, GEN_C_OPT(flags), 128);
    gen_range(p, GEN_C_OPT(window), 1, 40);
    gen_chance(p, GEN_C_OPT(window), 85);
    set_menu(p, GEN_C_OPT(softcap), 64, softcap, 1);
    p->rule[GEN_C_OPT(softcap)].unit = 1.0 / 8.0; /* 2.5 */
    set_menu(p, GEN_C_OPT(scale), 128, scale, 1);
    p->rule[GEN_C_OPT(scale)].unit = 0.1; /* 0.3 */
    gen_range(p, GEN_C_ROWS_OUTER, 1, 1);
    gen_chance(p, GEN_C_ROWS_OUTER, 128);
    gen_range(p, GEN_C_OPT(mask), 1, 1);
    gen_chance(p, GEN_C_OPT(mask), 64);
    gen_range(p, GEN_C_OPT(bias), 1, 1);
    gen_chance(p, GEN_C_OPT(bias), 64);
    p->val[GEN_OPT(mask)].hidden = 51;
    p->val[GEN_OPT(bias)].minus_inf = 0;
    p->val[GEN_OPT(bias)].lo = -2.0f, p->val[GEN_OPT(bias)].hi = 2.0f;
    for (int r = GEN_Q; r <= GEN_V; r++)
        p->val[r].lo = -1.0f, p->val[r].hi = 1.0f;

    const int paged = layout >= KV_PAGED;
    if (layout == KV_PACKED) {
        gen_pin(p, GEN_C_Q_PACKED, 1);
        gen_pin(p, GEN_C_KV_PACKED, 1);
        gen_range(p, GEN_C_Q_LEN, 40, 40);
        gen_range(p, GEN_C_KV_LEN, 70, 70);
        gen_range(p, GEN_C_GAP, 1, 2); /* rows between sequences nobody owns */
        gen_chance(p, GEN_C_GAP, 170);
    } else {
        gen_range(p, GEN_C_Q_LEN, 1, bs >= 256 ? 4 : 12);
        gen_range(p, GEN_C_KV_LEN, 1,
                  layout == KV_LEFTPAD ? 90 : bs == 1 ? 70 : bs <= 16 ? 200 : 700);
        if (layout == KV_LEFTPAD || (mods && paged)) {
            gen_range(p, GEN_C_OPT(q_offsets), 1, 1);
            gen_chance(p, GEN_C_OPT(q_offsets), 128);
        }
        if (layout == KV_LEFTPAD || layout == KV_PAGED_LEFTPAD)
            gen_pin(p, GEN_C_OPT(kv_offsets), 1);
    }
    if (paged) {
        gen_pin(p, GEN_C_BLOCK_SIZE, bs);
        gen_pin(p, GEN_C_POOL, layout == KV_PAGED_ADJOIN   ? pools[1]
                              : layout == KV_PAGED_SHARED ? pools[2]
                                                          : pools[0]);
        gen_pin(p, GEN_C_POOL_HEADS_OUTER, layout == KV_PAGED_HEADS);
        gen_range(p, GEN_C_POOL_SPARE, 0, layout == KV_PAGED_ADJOIN ? 12 : 3);
        gen_range(p, GEN_C_TABLE_PAD, 0, 3);
    }
    /* shared prefixes (1.4): without a workspace every sequence reads its
       prefix where the sequence before it keeps it (src/driver/kv.h) */
    gen_range(p, GEN_C_OPT(shared_prefix), 1, 1);
    gen_chance(p, GEN_C_OPT(shared_prefix), mods ? 128 : 64);
    if (mods) {
        /* with one, the forward attends each group's prefix once, alone or
           with split-KV on the sequences' own keys */
        gen_pin(p, GEN_C_OPT(workspace), 1);
        gen_range(p, GEN_C_OPT(kv_splits), 0, 3);
        gen_chance(p, GEN_C_OPT(kv_splits), 96);
        /* a draft tree over the queries (1.3), where every sequence fits */
        gen_range(p, GEN_C_OPT(tree_parents), 1, 1);
        gen_chance(p, GEN_C_OPT(tree_parents), 128);
        /* top-k lists (1.7): keys of the sequence, by the shifted rows */
        gen_allow_topk(p, 96);
        gen_range(p, GEN_C_OPT(alibi_slopes), 1, 1);
        gen_chance(p, GEN_C_OPT(alibi_slopes), 192);
        gen_range(p, GEN_C_OPT(sinks), 1, 1);
        gen_chance(p, GEN_C_OPT(sinks), 128);
        set_menu(p, GEN_C_BROADCAST_OPT, 85, per_head, 1); /* [Hq] or [B][Hq] */
        gen_range(p, GEN_C_OPT(window_right), 1, 30);
        gen_chance(p, GEN_C_OPT(window_right), 128);
        /* q_pos/k_pos: both, q_pos only or k_pos only; queries a few
           positions off the bottom-right alignment, near 0 or far out */
        gen_range(p, GEN_C_OPT(q_pos), 1, 1);
        gen_chance(p, GEN_C_OPT(q_pos), 85);
        gen_profile dflt;
        gen_profile_init(&dflt);
        for (int c = GEN_C_POS_KIND; c <= GEN_C_POS_DELTA; c++)
            p->rule[c] = dflt.rule[c];
    }
}

/*
 * A problem of the layout: random data at the sequences' valid positions
 * and NaN everywhere else (nothing else may be read); block-table entries of
 * pages no query sees hold garbage, and the table ends at an inaccessible
 * page.
 */
static void make_problem(problem *p, rng *g, kv_layout layout, int64_t bs, int mods)
{
    memset(p, 0, sizeof *p);
    p->layout = layout;
    gen_profile prof;
    profile_of(&prof, layout, bs, mods);
    gen_src src = wl_gen_source(g);
    CHECK(gen_draw(&p->d, &src, &prof), "gen_draw");
    const gen_allocator a = {problem_alloc, problem_release, p};
    CHECK(gen_materialise(&p->m, &p->d, rng_next(g),
                          GEN_M_OUT | GEN_M_SCORES | GEN_M_STATS | GEN_M_POISON | GEN_M_GARBAGE,
                          &a) == 0,
          "gen_materialise");
    const gen_bufs *m = &p->m;
    p->shape = m->shape;
    p->opt = m->opt;
    p->q = m->t[GEN_Q];
    p->k = m->t[GEN_K];
    p->v = m->t[GEN_V];
    p->scores = m->t[GEN_SCORES];
    p->out = m->t[GEN_OUT];
    p->stats = m->stats;
    p->dv = p->d.dv;
    p->scores_n = (int64_t)(m->bytes[GEN_SCORES] / 4);
    p->out_n = (int64_t)(m->bytes[GEN_OUT] / 4);
    p->stats_n = p->shape.batch * p->shape.q_heads * p->shape.q_len;
    p->q_lens = p->opt.q_lens;
    p->kv_lens = p->opt.kv_lens;
    p->q_offsets = p->opt.q_offsets;
    p->kv_offsets = p->opt.kv_offsets;
    char d[896];
    snprintf(p->desc, sizeof p->desc, "%s: %s", layout_names[layout],
             gen_describe(&p->d, d, sizeof d));
}

static void free_problem(problem *p)
{
    gen_release(&p->m);
    gen_free(&p->d);
}

static attn_status run_op(const attn_dsp *t, problem *p, op_kind op, const attn_options *opt)
{
    switch (op) {
    case OP_SCORES: return attn_scores_with(t, &p->shape, opt, &p->q, &p->k, &p->scores);
    case OP_WEIGHTS:
        return attn_weights_with(t, &p->shape, opt, &p->q, &p->k, &p->scores, &p->stats);
    case OP_FORWARD:
        return attn_forward_with(t, &p->shape, opt, &p->q, &p->k, &p->v, &p->out, &p->stats);
    case OP_MASK_APPLY: return attn_mask_apply_with(t, &p->shape, opt, &p->scores);
    /* no K/V layout: the row operations, merge and quantize read none, the
       backward refuses every one (tests/ops/test_backward.c, op_tests[]);
       cache_append writes them (tests/ops/test_cache_append.c, on these
       layouts' generator) */
    case OP_SOFTMAX:
    case OP_SOFTMAX_BWD:
    case OP_MERGE:
    case OP_BACKWARD:
    case OP_QUANTIZE:
    case OP_CACHE_APPEND:
    case OP_PLAN_FORWARD: /* tests/ops/test_plan.c, on these layouts' generator */
    case OP_FORWARD_SOURCES: /* tests/ops/test_sources.c: the first source on every layout */
    case OP_COUNT: break;
    }
    CHECK(0, "%s reads no K/V layout", op < OP_COUNT ? op_names[op] : "?");
}

/* Output memory of an operation: the table, then the three stats arrays. */
static size_t output_floats(const problem *p, op_kind op)
{
    return (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n) + 3 * (size_t)p->stats_n;
}

static void output_save(const problem *p, op_kind op, float *dst)
{
    const size_t n = (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n);
    memcpy(dst, op == OP_FORWARD ? p->out.data : p->scores.data, n * 4);
    float *const stats[3] = {p->stats.lse, p->stats.max_score, p->stats.entropy};
    for (int s = 0; s < 3; s++)
        memcpy(dst + n + (size_t)s * (size_t)p->stats_n, stats[s], (size_t)p->stats_n * 4);
}

static void output_load(problem *p, op_kind op, const float *src)
{
    const size_t n = (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n);
    memcpy(op == OP_FORWARD ? p->out.data : p->scores.data, src, n * 4);
    float *const stats[3] = {p->stats.lse, p->stats.max_score, p->stats.entropy};
    for (int s = 0; s < 3; s++)
        memcpy(stats[s], src + n + (size_t)s * (size_t)p->stats_n, (size_t)p->stats_n * 4);
}

/* What a comparison collects: got, scalar's result, the dense call's, the
   reference and its bound. */
typedef struct cmp {
    float *got, *scalar, *dense;
    double *want, *err;
    size_t n;
} cmp;

static void cmp_add(cmp *c, const float *after, const float *scalar, size_t at, float dense,
                    double want, double err)
{
    c->got[c->n] = after[at];
    if (scalar)
        c->scalar[c->n] = scalar[at];
    c->dense[c->n] = dense;
    c->want[c->n] = want;
    c->err[c->n] = err;
    c->n++;
}

/* The per-sequence dense call's results: its table (or output) and stats. */
typedef struct dense_result {
    float *table, *stats; /* dn->shape's [B][Hq][q_len][cols]; 3 x [B][Hq][q_len] */
    int64_t rows;         /* B * Hq * dn->shape.q_len */
} dense_result;

/*
 * Walks every output element: those of a sequence's rows and columns go into
 * the comparison (the reference and the dense call from the dense problem;
 * outside its range a written element must be the masked value), all others
 * must have kept their bits.
 */
static void check_outputs(const problem *p, op_kind op, const ref_attn *r, const ref_dense *dn,
                          const float *before, const float *after, const float *scalar,
                          const dense_result *dr)
{
    const int64_t B = p->shape.batch, Hq = p->shape.q_heads, q_len = p->shape.q_len;
    const int fwd = op == OP_FORWARD;
    const int64_t cols = fwd ? p->dv : p->shape.kv_len;
    const attn_tensor *t = fwd ? &p->out : &p->scores;
    const size_t total = output_floats(p, op), table_n = (size_t)(fwd ? p->out_n : p->scores_n);
    uint8_t *owned = xcalloc0(total, 1);
    cmp c = {xmalloc(total * 4), xmalloc(total * 4), xmalloc(total * 4),
             xmalloc(total * 8), xmalloc(total * 8), 0};
    const double masked = op == OP_WEIGHTS ? 0.0 : -INFINITY;
    const int stats = op == OP_WEIGHTS || fwd;

    for (int64_t b = 0; b < B; b++) {
        const int64_t qo = p->q_offsets ? p->q_offsets[b] : 0;
        const int64_t ko = p->kv_offsets ? p->kv_offsets[b] : 0;
        const int64_t rows = p->q_offsets ? p->q_lens[b] : q_len;
        const int64_t c0 = fwd || !p->kv_offsets ? 0 : ko;
        const int64_t c1 = fwd || !p->kv_offsets ? cols : ko + p->kv_lens[b];
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < rows; i++) {
                const int in_ref = i < dn->shape.q_len;
                const int64_t rr = (b * Hq + h) * dn->shape.q_len + i; /* reference row */
                const size_t base =
                    (size_t)(((float *)ref_tensor_at(t, b, h, qo + i, 0)) - (float *)t->data);
                for (int64_t col = c0; col < c1; col++) {
                    const int64_t j = fwd ? col : col - ko; /* reference column */
                    double want = fwd ? 0.0 : masked, err = 0.0;
                    float dense = (float)want; /* the dense problem has no such element */
                    if (in_ref && j >= 0 && j < (fwd ? p->dv : dn->shape.kv_len)) {
                        const size_t at = (size_t)(rr * (fwd ? p->dv : dn->shape.kv_len) + j);
                        want = fwd ? r->o[at] : op == OP_WEIGHTS ? r->p[at] : r->s[at];
                        err = fwd ? r->o_err[at] : op == OP_WEIGHTS ? r->p_err[at] : r->s_err[at];
                        dense = dr->table[at];
                    }
                    owned[base + (size_t)col] = 1;
                    cmp_add(&c, after, scalar, base + (size_t)col, dense, want, err);
                }
                if (!stats)
                    continue;
                const size_t srow = (size_t)((b * Hq + h) * q_len + qo + i);
                const double sw[3] = {in_ref ? r->lse[rr] : -INFINITY,
                                      in_ref ? r->max[rr] : -INFINITY, in_ref ? r->ent[rr] : 0.0};
                const double se[3] = {in_ref ? r->lse_err[rr] : 0.0, in_ref ? r->max_err[rr] : 0.0,
                                      in_ref ? r->ent_err[rr] : 0.0};
                for (int s = 0; s < 3; s++) {
                    const size_t at = table_n + (size_t)s * (size_t)p->stats_n + srow;
                    owned[at] = 1;
                    cmp_add(&c, after, scalar, at,
                            in_ref ? dr->stats[s * dr->rows + rr] : (float)sw[s], sw[s], se[s]);
                }
            }
    }
    for (size_t i = 0; i < total; i++)
        if (!owned[i])
            CHECK(memcmp(&before[i], &after[i], 4) == 0,
                  "%s wrote element %zu outside every sequence", op_names[op], i);
    expect_near("vs float64", c.got, (ptrdiff_t)c.n, c.want, c.err, 1, c.n);
    for (size_t i = 0; i < c.n; i++)
        c.err[i] = TOL_PAIR(c.err[i]);
    if (scalar)
        expect_near_f("vs scalar", c.got, (ptrdiff_t)c.n, c.scalar, (ptrdiff_t)c.n, c.err, 1,
                      c.n);
    expect_near_f("vs the per-sequence dense call", c.got, (ptrdiff_t)c.n, c.dense,
                  (ptrdiff_t)c.n, c.err, 1, c.n);
    free(owned);
    free(c.got);
    free(c.scalar);
    free(c.dense);
    free(c.want);
    free(c.err);
}

/*
 * The operation on ref_kv.c's per-sequence dense copy of the problem (each
 * sequence right-padded at row and key 0, no offsets, no pages; the same
 * options otherwise), with the same table.
 */
static dense_result run_dense(const attn_dsp *t, const ref_dense *dn, op_kind op)
{
    const attn_shape *s = &dn->shape;
    const int64_t dv = s->v_dim ? s->v_dim : s->head_dim;
    const int64_t cols = op == OP_FORWARD ? dv : s->kv_len;
    dense_result dr = {NULL, NULL, s->batch * s->q_heads * s->q_len};
    const size_t n = (size_t)(dr.rows * cols);
    dr.table = xmalloc(n * 4);
    dr.stats = xmalloc((size_t)dr.rows * 3 * 4);
    if (op == OP_MASK_APPLY)
        memcpy(dr.table, dn->scores.data, n * 4);
    const attn_tensor o = {dr.table, ATTN_DTYPE_F32, s->q_heads * s->q_len * cols,
                           s->q_len * cols, cols};
    const attn_row_stats st = {dr.stats, dr.stats + dr.rows, dr.stats + 2 * dr.rows};
    attn_status rc = ATTN_ERR_ARG;
    switch (op) {
    case OP_SCORES: rc = attn_scores_with(t, s, &dn->opt, &dn->q, &dn->k, &o); break;
    case OP_WEIGHTS: rc = attn_weights_with(t, s, &dn->opt, &dn->q, &dn->k, &o, &st); break;
    case OP_FORWARD:
        rc = attn_forward_with(t, s, &dn->opt, &dn->q, &dn->k, &dn->v, &o, &st);
        break;
    case OP_MASK_APPLY: rc = attn_mask_apply_with(t, s, &dn->opt, &o); break;
    case OP_SOFTMAX:
    case OP_SOFTMAX_BWD:
    case OP_MERGE:
    case OP_BACKWARD:
    case OP_QUANTIZE: /* no K/V layout: see run_op */
    case OP_CACHE_APPEND:
    case OP_PLAN_FORWARD:
    case OP_FORWARD_SOURCES:
    case OP_COUNT: break;
    }
    CHECK(rc == ATTN_OK, "the dense call: status %d (%s)", rc, attn_strerror(rc));
    return dr;
}

/*
 * The forward into F16 and BF16 twins of p->out (the same strides in
 * elements): every element the F32 call wrote (after differs from before,
 * the canary) is its value rounded to nearest even, bit for bit; every
 * other element keeps its canary; the stats are the F32 call's bits.
 */
static void check_out16(const attn_dsp *t, problem *p, const float *before, const float *after)
{
    static const int32_t dtypes[] = {ATTN_DTYPE_F16, ATTN_DTYPE_BF16};
    const size_t n = (size_t)p->out_n;
    const attn_tensor out32 = p->out;
    for (int d = 0; d < 2; d++) {
        unsigned char *o = xmalloc(n * 2);
        const uint16_t canary = canary16(dtypes[d]);
        for (size_t i = 0; i < n; i++)
            memcpy(o + 2 * i, &canary, 2);
        output_load(p, OP_FORWARD, before); /* the stats' canaries */
        p->out.data = o;
        p->out.dtype = dtypes[d];
        const attn_status st = run_op(t, p, OP_FORWARD, &p->opt);
        p->out = out32;
        CHECK(st == ATTN_OK, "%s out: status %d (%s)", ref_dtype_name(dtypes[d]), st,
              attn_strerror(st));
        for (size_t i = 0; i < n; i++) {
            if (memcmp(&before[i], &after[i], 4) != 0) {
                expect_rounded16("16-bit out vs f32 out rounded", o + 2 * i, 1, dtypes[d],
                                 &after[i], 1, 1, 1);
            } else {
                uint16_t v;
                memcpy(&v, o + 2 * i, 2);
                CHECK(v == canary, "a %s out: element %zu written outside every sequence",
                      ref_dtype_name(dtypes[d]), i);
            }
        }
        float *const stats[3] = {p->stats.lse, p->stats.max_score, p->stats.entropy};
        for (int k = 0; k < 3; k++)
            expect_bits("stats with a 16-bit out vs an f32 out", stats[k],
                        after + n + (size_t)k * (size_t)p->stats_n, (size_t)p->stats_n);
        free(o);
    }
}

static void check_problem(const attn_dsp *t, problem *p, op_kind op, rng *g)
{
    harness_context("%s on %s", op_names[op], p->desc);
    const attn_dsp *sc = harness_scalar();
    const size_t total = output_floats(p, op);
    float *before = xmalloc(total * 4), *after = xmalloc(total * 4), *scalar = NULL;

    /* prior contents: a canary NaN everywhere, random scores for mask_apply */
    float *fill = op == OP_FORWARD ? p->out.data : p->scores.data;
    const size_t table_n = (size_t)(op == OP_FORWARD ? p->out_n : p->scores_n);
    const uint32_t canary = BUF_CANARY;
    for (size_t i = 0; i < table_n; i++)
        memcpy(&fill[i], &canary, 4);
    float *const stats[3] = {p->stats.lse, p->stats.max_score, p->stats.entropy};
    for (int s = 0; s < 3; s++)
        for (size_t i = 0; i < (size_t)p->stats_n; i++)
            memcpy(&stats[s][i], &canary, 4);
    if (op == OP_MASK_APPLY)
        rng_fill(g, fill, table_n, -10.0f, 10.0f);
    output_save(p, op, before);

    ref_dense dn;
    ref_attn r;
    if (op == OP_MASK_APPLY) {
        ref_dense_make(&dn, &p->shape, &p->opt, NULL, NULL, NULL);
        ref_dense_scores(&dn, &p->opt, &p->scores);
        ref_attn_from_scores(&r, &dn.shape, &dn.opt, &dn.scores);
    } else {
        /* tolerance.h R: one rescale per key block of the smaller block_k, plus one */
        const uint32_t bk = t->block_k < sc->block_k ? t->block_k : sc->block_k;
        ref_dense_make(&dn, &p->shape, &p->opt, &p->q, &p->k, op == OP_FORWARD ? &p->v : NULL);
        ref_attn_compute(&r, &dn.shape, &dn.opt, &dn.q, &dn.k, op == OP_FORWARD ? &dn.v : NULL,
                         op == OP_FORWARD ? (p->shape.kv_len + bk - 1) / bk + 1 : 0);
    }

    attn_status st = run_op(t, p, op, &p->opt);
    CHECK(st == ATTN_OK, "status %d (%s)", st, attn_strerror(st));
    output_save(p, op, after);

    /* the same in reverse task order: bitwise the same (determinism) */
    attn_options rev = p->opt;
    rev.parallel_for = harness_reverse_for;
    output_load(p, op, before);
    st = run_op(t, p, op, &rev);
    CHECK(st == ATTN_OK, "status %d in reverse order", st);
    float *again = xmalloc(total * 4);
    output_save(p, op, again);
    expect_bits("reverse task order", again, after, total);
    free(again);

    if (!harness_is_scalar(t)) {
        scalar = xmalloc(total * 4);
        output_load(p, op, before);
        st = run_op(sc, p, op, &p->opt);
        CHECK(st == ATTN_OK, "scalar status %d", st);
        output_save(p, op, scalar);
    }
    const dense_result dr = run_dense(t, &dn, op);
    check_outputs(p, op, &r, &dn, before, after, scalar, &dr);
    if (op == OP_FORWARD)
        check_out16(t, p, before, after);
    free(dr.table);
    free(dr.stats);
    ref_attn_free(&r);
    ref_dense_free(&dn);
    free(before);
    free(after);
    free(scalar);
}

static void run_layout(const isa_row *row, kv_layout layout, const int64_t *block_sizes,
                       size_t n_bs, int problems, int mods)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    for (size_t s = 0; s < n_bs; s++)
        for (int k = 0; k < problems; k++)
            for (size_t o = 0; o < sizeof layout_ops / sizeof layout_ops[0]; o++) {
                problem p;
                make_problem(&p, g, layout, block_sizes[s], mods);
                check_problem(t, &p, layout_ops[o], g);
                free_problem(&p);
            }
}

static const int64_t no_pages[] = {0};
static const int64_t pages[] = {1, 16, 256};
static const int64_t small_pages[] = {1, 3, 16};

/* A test of run_layout(row, ...) on every ISA row. */
#define LAYOUT_TEST(name, layout, sizes, n_sizes, problems, mods)                           \
    HARNESS_ISA_PARAMS(kvlayout, name)                                                     \
    ParameterizedTest(isa_row *row, kvlayout, name, .timeout = ATTN_TEST_TIMEOUT)          \
    {                                                                                      \
        run_layout(row, layout, sizes, n_sizes, problems, mods);                           \
    }

LAYOUT_TEST(packed, KV_PACKED, no_pages, 1, 12, 0)
LAYOUT_TEST(leftpad, KV_LEFTPAD, no_pages, 1, 12, 0)
LAYOUT_TEST(paged, KV_PAGED, pages, 3, 5, 0)
LAYOUT_TEST(paged_heads, KV_PAGED_HEADS, pages, 3, 3, 0)
LAYOUT_TEST(paged_adjoin, KV_PAGED_ADJOIN, small_pages, 3, 4, 0)
LAYOUT_TEST(paged_leftpad, KV_PAGED_LEFTPAD, pages, 3, 4, 0)
LAYOUT_TEST(paged_shared, KV_PAGED_SHARED, small_pages, 3, 3, 0)

/* ------------------------------------------------------------ layouts with score modifiers */

/* Packed batches (q_offsets, kv_offsets, batch_stride 0) with ALiBi, sinks,
   window_right and shard positions. */
LAYOUT_TEST(mods_packed, KV_PACKED, no_pages, 1, 10, 1)

/* Left-padded caches (kv_offsets; q_offsets on unpacked outputs half the time). */
LAYOUT_TEST(mods_leftpad, KV_LEFTPAD, no_pages, 1, 10, 1)

/* Shuffled block tables, with q_offsets half the time. */
LAYOUT_TEST(mods_paged, KV_PAGED, pages, 3, 3, 1)

/* Paged with kv_offsets, and the other pool layouts (heads outer, adjoining
   blocks, one table row for every sequence). */
HARNESS_ISA_PARAMS(kvlayout, mods_paged_more)
ParameterizedTest(isa_row *row, kvlayout, mods_paged_more, .timeout = ATTN_TEST_TIMEOUT)
{
    run_layout(row, KV_PAGED_LEFTPAD, pages, 3, 3, 1);
    run_layout(row, KV_PAGED_HEADS, small_pages, 3, 1, 1);
    run_layout(row, KV_PAGED_ADJOIN, small_pages, 3, 1, 1);
    run_layout(row, KV_PAGED_SHARED, small_pages, 3, 1, 1);
}

/*
 * A shard (q_pos) whose last query rows sit past every key, under a window,
 * with a paged cache. attn.h, "Paged K/V": only the entries of blocks holding
 * a key some query may see are read. Here key 3 (page 3 of 4) is the only
 * key seen (query 0 at position 3, window 1; queries 1 and 2 at 4 and 5 see
 * none), so entries 0..2 may hold anything and the table row is 4 entries
 * long, ending at an inaccessible page. src/validate.c's check_block_table
 * took the page range from the first row's keys to the last row's end,
 * which for an empty last row lies past the keys: it read entry 4, beyond
 * the table (a fault here), and with a longer buffer rejected the call when
 * that int was no block (ATTN_ERR_ARG). It now ends the range at the last
 * row that sees a key.
 */
Test(kvlayout, shard_past_keys_paged)
{
    harness_begin_plain("kvlayout/shard_past_keys_paged");
    const attn_shape s = {1, 1, 1, 3, 4, 4, 0};
    float q[12], k[8 * 4], v[8 * 4], out[12], lse[3];
    for (int i = 0; i < 12; i++)
        q[i] = 0.25f * (float)(i % 5) - 0.5f;
    for (int i = 0; i < 32; i++)
        k[i] = v[i] = 0.125f * (float)(i % 7) - 0.375f;
    fence_buf fb;
    int32_t *table = fence_alloc(&fb, 4 * sizeof(int32_t), 0);
    table[0] = table[1] = table[2] = -1; /* pages nobody sees */
    table[3] = 5;
    const int64_t q_pos = 3;
    attn_options o = ATTN_OPTIONS_INIT;
    o.window = 1;
    o.q_pos = &q_pos;
    o.block_table = table;
    o.block_table_stride = 4;
    o.block_size = 1;
    o.num_blocks = 8;
    const attn_tensor tq = {q, ATTN_DTYPE_F32, 12, 12, 4}, tk = {k, ATTN_DTYPE_F32, 4, 4, 4},
                      tv = {v, ATTN_DTYPE_F32, 4, 4, 4}, to = {out, ATTN_DTYPE_F32, 12, 12, 4};
    const attn_row_stats st = {lse, NULL, NULL};
    const attn_status rc = attn_forward(&s, &o, &tq, &tk, &tv, &to, &st);
    CHECK(rc == ATTN_OK, "status %d (%s)", rc, attn_strerror(rc));
    /* query 0 sees key 3 alone (block 5): out = v row 5, lse = its score */
    for (int c = 0; c < 4; c++)
        CHECK(out[c] == v[5 * 4 + c], "out[0][%d] = %g, want v[5][%d] = %g", c,
              (double)out[c], c, (double)v[5 * 4 + c]);
    for (int c = 4; c < 12; c++)
        CHECK(out[c] == 0.0f, "out[%d] = %g of a row without keys", c, (double)out[c]);
    CHECK(lse[1] == -INFINITY && lse[2] == -INFINITY, "lse of rows without keys");
    fence_free(&fb);
}

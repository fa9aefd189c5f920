/* SPDX-License-Identifier: MIT */
/*
 * attn_cache_append (attn.h 1.3) on every ISA row, against references that
 * share no code with src/: the problem generator's layouts (dense, packed,
 * left-padded, paged with shuffled, adjoining, shared and random pools) put
 * the cache where the forward's tests read it, gen_kv_row says where key
 * position p of a sequence lives, and each written row must be its new
 * values encoded by tests/ref/ref.c's F16/BF16 rounding or tests/ref/ref_quant.c's
 * quantizers, bit for bit. Every other byte of both caches keeps its value;
 * a call the contract refuses (more new tokens than keys, two new rows on
 * one cache row: a pool shared or drawn with repeats) writes nothing.
 * The errors test corrupts one argument of a valid call at a time.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "gen.h"
#include "harness.h"
#include "internal.h"
#include "ref/ref_quant.h"
#include "workload.h"

enum {
    AP_DENSE,
    AP_PACKED,
    AP_LEFTPAD,
    AP_PAGED, /* shuffled pool, either pool layout */
    AP_PAGED_ADJOIN,
    AP_PAGED_SHARED, /* one table row for all: refused when two sequences write */
    AP_PAGED_RANDOM, /* repeats allowed: refused when two new rows meet */
    AP_LAYOUTS
};
static const char *const ap_names[] = {"dense",         "packed",        "leftpad", "paged",
                                       "paged-adjoin", "paged-shared", "paged-random"};

static void set_menu(gen_profile *p, int c, const int64_t *menu, size_t n)
{
    p->rule[c] = (gen_rule){256, 0, 0, 0, 0, 0, 0.0, menu, n};
}

static void profile_of(gen_profile *p, int layout, int64_t bs)
{
    static const int64_t groups[] = {1, 2}, dims[] = {8, 32, 72, 128},
                         lens[] = {GEN_SEQ_EMPTY, GEN_SEQ_FULL, GEN_SEQ_FULL, GEN_SEQ_RANDOM},
                         offset[] = {GEN_OFFSET_RANDOM};
    /* every K/V dtype of src/dtype_list.h (the menu must outlive the call) */
    static int64_t kv_dtypes[ATTN_DTYPE_COUNT];
    int32_t kv[ATTN_DTYPE_COUNT];
    const int n_kv = test_dtypes_of(DT_KV, kv);
    for (int i = 0; i < n_kv; i++)
        kv_dtypes[i] = kv[i];
    gen_profile_init(p);
    p->work_cap = 0;
    p->flags = GEN_P_Q_SHORTER; /* most sequences then have room for their new tokens */
    for (int c = 0; c < GEN_C_COUNT; c++)
        gen_never(p, c);
    gen_range(p, GEN_C_BATCH, 1, 5);
    gen_range(p, GEN_C_KV_HEADS, 1, 3);
    set_menu(p, GEN_C_GROUP, groups, 2);
    set_menu(p, GEN_C_HEAD_DIM, dims, 4);
    gen_range(p, GEN_C_V_DIM, 1, 70);
    gen_chance(p, GEN_C_V_DIM, 64);
    set_menu(p, GEN_C_K_DTYPE, kv_dtypes, (size_t)n_kv);
    set_menu(p, GEN_C_V_DTYPE, kv_dtypes, (size_t)n_kv);
    gen_range(p, GEN_C_OPT(k_scale), 1, 48); /* FP8 only (gen.c); x 1/16 */
    gen_chance(p, GEN_C_OPT(k_scale), 128);
    gen_range(p, GEN_C_OPT(v_scale), 1, 48);
    gen_chance(p, GEN_C_OPT(v_scale), 128);
    p->rule[GEN_C_OPT(k_scale)].unit = p->rule[GEN_C_OPT(v_scale)].unit = 1.0 / 16.0;
    static const int64_t asym_groups[] = {8, 16, 32};
    set_menu(p, GEN_C_ASYM_GROUP, asym_groups, 3); /* an ASYM cache's records */
    gen_chance(p, GEN_C_ASYM_GROUP, 160);
    gen_pin(p, GEN_C_OPT(q_lens), 1);
    gen_pin(p, GEN_C_OPT(kv_lens), 1);
    set_menu(p, GEN_C_SEQ_Q, lens, 4);
    set_menu(p, GEN_C_SEQ_KV, lens, 4);
    set_menu(p, GEN_C_OFFSET, offset, 1);
    gen_range(p, GEN_C_ROWS_OUTER, 1, 1);
    gen_chance(p, GEN_C_ROWS_OUTER, 128);
    gen_range(p, GEN_C_ROW_PAD, 1, 3);
    gen_chance(p, GEN_C_ROW_PAD, 64);
    if (layout == AP_PACKED) {
        gen_pin(p, GEN_C_Q_PACKED, 1);
        gen_pin(p, GEN_C_KV_PACKED, 1);
        gen_range(p, GEN_C_Q_LEN, 12, 12);
        gen_range(p, GEN_C_KV_LEN, 60, 60);
        gen_range(p, GEN_C_GAP, 1, 2);
        gen_chance(p, GEN_C_GAP, 128);
    } else {
        gen_range(p, GEN_C_Q_LEN, 1, 12);
        gen_range(p, GEN_C_KV_LEN, 1, bs >= 16 ? 120 : 50);
    }
    if (layout == AP_LEFTPAD) {
        gen_pin(p, GEN_C_OPT(kv_offsets), 1);
        gen_range(p, GEN_C_OPT(q_offsets), 1, 1);
        gen_chance(p, GEN_C_OPT(q_offsets), 128);
    }
    if (layout >= AP_PAGED) {
        static const int64_t pools[] = {GEN_POOL_SHUFFLED, GEN_POOL_ADJOIN, GEN_POOL_SHARED,
                                        GEN_POOL_RANDOM};
        gen_pin(p, GEN_C_BLOCK_SIZE, bs);
        gen_pin(p, GEN_C_POOL, pools[layout - AP_PAGED]);
        gen_range(p, GEN_C_POOL_HEADS_OUTER, 0, 1);
        gen_range(p, GEN_C_POOL_SPARE, 0, 3);
        gen_range(p, GEN_C_TABLE_PAD, 0, 2);
        gen_range(p, GEN_C_OPT(kv_offsets), 1, 1);
        gen_chance(p, GEN_C_OPT(kv_offsets), 64);
    }
}

/* A new-token tensor [B][Hkv][q_len][cols] of dtype dt, laid out as q is
   (batch_stride 0 when q is packed). */
typedef struct new_rows {
    attn_tensor t;
    void *mem;
} new_rows;

/* One new value: moderate, now and then 0 or a tiny one; with `specials`
   (float caches) also values F16 cannot hold, infinities and NaN (a block
   format refuses them, as attn_quantize does). */
static float new_value(rng *g, int specials)
{
    const int64_t r = rng_int(g, 0, 63);
    if (specials && r == 0)
        return rng_int(g, 0, 1) ? INFINITY : -INFINITY;
    if (specials && r == 1)
        return NAN;
    if (specials && r == 2)
        return rng_float(g, -1.0f, 1.0f) * 1e5f; /* F16: +-inf, BF16: rounded */
    if (r == 3)
        return rng_float(g, -1.0f, 1.0f) * 1e-38f; /* F16: 0, BF16: subnormal */
    if (r == 4)
        return 0.0f;
    return rng_float(g, -3.0f, 3.0f);
}

static void make_new(new_rows *n, rng *g, const gen_problem *d, int64_t cols, int32_t dt,
                     int specials)
{
    const attn_shape *s = &d->shape;
    const size_t es = gen_dtype_bytes(dt);
    const int64_t per_head = s->q_len * cols, per_batch = s->kv_heads * per_head;
    const int64_t batches = d->q_packed ? 1 : s->batch;
    n->mem = xmalloc((size_t)(batches * per_batch) * es);
    n->t = (attn_tensor){n->mem, dt, d->q_packed ? 0 : per_batch, per_head, cols};
    for (int64_t e = 0; e < batches * per_batch; e++)
        gen_store((char *)n->mem + e * (int64_t)es, dt, new_value(g, specials));
}

/* Token i of sequence b, head h, as f32 (exactly what the tensor holds). */
static void new_row_f32(const new_rows *n, const gen_problem *d, int64_t b, int64_t h, int64_t i,
                        int64_t cols, float *x)
{
    const void *row = gen_at(&n->t, b, h, gen_q_offset(d, b) + i, 0);
    for (int64_t c = 0; c < cols; c++)
        x[c] = gen_load(row, n->t.dtype, c, 0.0f);
}

/* The bytes a row of `cols` values of dtype dt takes in a cache (group: an
   ASYM cache's records). */
static size_t row_bytes(int32_t dt, int64_t cols, int64_t group)
{
    return (size_t)gen_row_units(dt, cols, group) * gen_dtype_bytes(dt);
}

/* The expected bytes of one cache row, from the tests' own encoders. */
static void check_row(const void *got, int32_t dt, const float *x, int64_t cols, float scale,
                      int64_t group, const char *what)
{
    unsigned char want[ATTN_MAX_HEAD_DIM * 8];
    switch (dt) {
    case ATTN_DTYPE_U8_ASYM:
    case ATTN_DTYPE_U4_ASYM: { /* one record per group */
        const int64_t g = gen_kv_group(dt, group, cols), rec = gen_row_units(dt, g, g);
        for (int64_t c = 0; c < cols / g; c++)
            CHECK(ref_quantize_asym(dt, x + c * g, (size_t)g, want + c * rec),
                  "%s: the reference encoder refuses group %lld", what, (long long)c);
        break;
    }
    case ATTN_DTYPE_F32:
        expect_bits(what, got, x, (size_t)cols);
        return;
    case ATTN_DTYPE_F16:
    case ATTN_DTYPE_BF16:
        expect_rounded16(what, got, 0, dt, x, 0, 1, (size_t)cols);
        return;
    case ATTN_DTYPE_Q8_0:
    case ATTN_DTYPE_Q4_0:
        for (int64_t blk = 0; blk < cols / 32; blk++)
            (dt == ATTN_DTYPE_Q8_0 ? ref_quantize_q8_0_block
                                   : ref_quantize_q4_0_block)(x + 32 * blk,
                                                              want + blk * (int64_t)ref_quant_unit_bytes(dt));
        break;
    case ATTN_DTYPE_FP8_E5M2: /* x / scale rounded to f32, then to E5M2 */
        for (int64_t c = 0; c < cols; c++)
            want[c] = ref_f32_to_e5m2(scale == 0.0f ? x[c] : x[c] / scale);
        break;
    case ATTN_DTYPE_FP8_E4M3: /* x / scale rounded to f32, then to E4M3 */
        for (int64_t c = 0; c < cols; c++)
            want[c] = ref_f32_to_e4m3(scale == 0.0f ? x[c] : x[c] / scale);
        break;
    default: /* a K/V dtype the list gained: its encoder belongs here */
        CHECK(0, "%s: no encoder here for dtype %s", what, test_dtype_name(dt));
        return;
    }
    expect_bytes(what, got, want, row_bytes(dt, cols, group));
}

/* Draws one problem of the layout, appends, checks. */
static void check_one(const attn_dsp *t, rng *g, int layout, int64_t bs)
{
    gen_profile prof;
    profile_of(&prof, layout, bs);
    gen_problem d;
    gen_src src = wl_gen_source(g);
    CHECK(gen_draw(&d, &src, &prof), "gen_draw");
    gen_bufs m;
    CHECK(gen_materialise(&m, &d, rng_next(g), GEN_M_POISON | GEN_M_GARBAGE, NULL) == 0,
          "gen_materialise");
    char desc[1024];
    harness_context("%s: %s", ap_names[layout], gen_describe(&d, desc, sizeof desc));
    const attn_shape *s = &m.shape;
    const int64_t cols[2] = {s->head_dim, d.dv};
    const float scale[2] = {m.opt.k_scale, m.opt.v_scale};
    const int64_t group[2] = {m.opt.k_scale_group, m.opt.v_scale_group};
    const int roles[2] = {GEN_K, GEN_V};
    const int keys_only = rng_int(g, 0, 7) == 0;

    /* new tokens, in a float dtype; values a block format can hold for those */
    int32_t src_dtypes[ATTN_DTYPE_COUNT];
    const int n_src = test_dtypes_of(DT_FLOAT, src_dtypes);
    new_rows nr[2];
    for (int p = 0; p < 2; p++) {
        const int32_t cdt = m.t[roles[p]].dtype;
        make_new(&nr[p], g, &d, cols[p], src_dtypes[rng_int(g, 0, n_src - 1)],
                 gen_dtype_block(cdt) == 1 && !test_dtype_is(cdt, DT_ASYM));
    }

    /* what the contract expects: refused when a sequence has more new tokens
       than keys or two new rows land on one cache row */
    int ok = 1;
    for (int64_t b = 0; b < s->batch; b++)
        if (gen_seq_q(&d, b) > gen_seq_kv(&d, b))
            ok = 0;
    for (int64_t b = 0; b < s->batch && ok; b++)
        for (int64_t i = 0; i < gen_seq_q(&d, b) && ok; i++) {
            const int64_t p = gen_kv_offset(&d, b) + gen_seq_kv(&d, b) - gen_seq_q(&d, b) + i;
            const void *at = gen_kv_row(&m, GEN_K, b, 0, p);
            for (int64_t c = 0; c <= b && ok; c++)
                for (int64_t l = 0; l < (c == b ? i : gen_seq_q(&d, c)); l++) {
                    const int64_t q = gen_kv_offset(&d, c) + gen_seq_kv(&d, c) - gen_seq_q(&d, c) + l;
                    if (gen_kv_row(&m, GEN_K, c, 0, q) == at) {
                        ok = 0;
                        break;
                    }
                }
        }

    unsigned char *before[2];
    for (int p = 0; p < 2; p++) {
        before[p] = xmalloc(m.bytes[roles[p]]);
        memcpy(before[p], m.data[roles[p]], m.bytes[roles[p]]);
    }
    attn_options o = m.opt;
    if (rng_int(g, 0, 1))
        o.parallel_for = harness_reverse_for;
    const size_t stage = attn_append_stage_limit;
    if (rng_int(g, 0, 1))
        attn_append_stage_limit = 0; /* encode in place, one task per sequence */
    const attn_status st =
        attn_cache_append_with(t, s, &o, &nr[0].t, keys_only ? NULL : &nr[1].t, &m.t[GEN_K],
                               keys_only ? NULL : &m.t[GEN_V]);
    attn_append_stage_limit = stage;
    CHECK(st == (ok ? ATTN_OK : ATTN_ERR_ARG), "status %d (%s), expected %s", st,
          attn_strerror(st), ok ? "ATTN_OK" : "ATTN_ERR_ARG");

    /* each written row is its encoding; copied into `before`, which must
       then equal the whole cache */
    for (int p = 0; p < (keys_only ? 1 : 2) && ok; p++) {
        const attn_tensor *c = &m.t[roles[p]];
        float x[ATTN_MAX_HEAD_DIM];
        for (int64_t b = 0; b < s->batch; b++)
            for (int64_t h = 0; h < s->kv_heads; h++)
                for (int64_t i = 0; i < gen_seq_q(&d, b); i++) {
                    const int64_t pos =
                        gen_kv_offset(&d, b) + gen_seq_kv(&d, b) - gen_seq_q(&d, b) + i;
                    unsigned char *at = gen_kv_row(&m, roles[p], b, h, pos);
                    char what[96];
                    snprintf(what, sizeof what, "%s row of b %lld h %lld token %lld",
                             p ? "v" : "k", (long long)b, (long long)h, (long long)i);
                    new_row_f32(&nr[p], &d, b, h, i, cols[p], x);
                    check_row(at, c->dtype, x, cols[p], scale[p], group[p], what);
                    const size_t off = (size_t)(at - (unsigned char *)m.data[roles[p]]);
                    memcpy(before[p] + off, at, row_bytes(c->dtype, cols[p], group[p]));
                }
    }
    for (int p = 0; p < 2; p++) {
        expect_bytes(p ? "v cache outside the new rows" : "k cache outside the new rows",
                     m.data[roles[p]], before[p], m.bytes[roles[p]]);
        free(before[p]);
        free(nr[p].mem);
    }
    gen_release(&m);
    gen_free(&d);
}

HARNESS_ISA_PARAMS(cache_append, layouts)
ParameterizedTest(isa_row *row, cache_append, layouts, .timeout = ATTN_TEST_TIMEOUT)
{
    const attn_dsp *t = harness_begin(row);
    rng *g = harness_rng();
    static const int64_t block_sizes[] = {1, 3, 16};
    for (int layout = 0; layout < AP_LAYOUTS; layout++)
        for (int k = 0; k < 24; k++)
            check_one(t, g, layout, layout >= AP_PAGED ? block_sizes[k % 3] : 0);
}

/* ------------------------------------------------------------ errors */

/*
 * A valid call (2 sequences, 2 KV heads, d 64, paged Q8_0 k and F16 v pools
 * of 6 blocks of 4 slots, 3 new tokens each) and one corruption at a time:
 * each must return its status and leave both pools as they were.
 */
enum { E_B = 2, E_H = 2, E_D = 64, E_LQ = 3, E_LK = 10, E_BS = 4, E_NB = 6 };
typedef struct err_call {
    attn_shape shape;
    attn_options opt;
    attn_tensor k_new, v_new, k, v;
    const attn_tensor *pk_new, *pv_new, *pk, *pv;
    int32_t q_lens[E_B], kv_lens[E_B], table[E_B * 3];
} err_call;

static float e_new[E_B * E_H * E_LQ * E_D];
static unsigned char e_k[E_NB * E_BS * E_H * (E_D / 32) * 34];
static uint16_t e_v[E_NB * E_BS * E_H * E_D];

static void err_base(err_call *c)
{
    memset(c, 0, sizeof *c);
    c->shape = (attn_shape){E_B, 2 * E_H, E_H, E_LQ, E_LK, E_D, 0};
    c->opt = (attn_options)ATTN_OPTIONS_INIT;
    c->q_lens[0] = 3, c->q_lens[1] = 1;
    c->kv_lens[0] = 10, c->kv_lens[1] = 5;
    const int32_t table[E_B * 3] = {4, 0, 2, 5, 1, 3}; /* distinct blocks */
    memcpy(c->table, table, sizeof table);
    c->opt.q_lens = c->q_lens;
    c->opt.kv_lens = c->kv_lens;
    c->opt.block_table = c->table;
    c->opt.block_table_stride = 3;
    c->opt.block_size = E_BS;
    c->opt.num_blocks = E_NB;
    c->k_new = (attn_tensor){e_new, ATTN_DTYPE_F32, E_H * E_LQ * E_D, E_LQ * E_D, E_D};
    c->v_new = c->k_new; /* inputs may overlap */
    /* vLLM's pool: [blocks][slots][heads][d] */
    c->k = (attn_tensor){e_k, ATTN_DTYPE_Q8_0, E_BS * E_H * (E_D / 32), E_D / 32,
                         E_H * (E_D / 32)};
    c->v = (attn_tensor){e_v, ATTN_DTYPE_F16, E_BS * E_H * E_D, E_D, E_H * E_D};
    c->pk_new = &c->k_new, c->pv_new = &c->v_new, c->pk = &c->k, c->pv = &c->v;
}

static attn_status err_run(const err_call *c)
{
    return attn_cache_append(&c->shape, &c->opt, c->pk_new, c->pv_new, c->pk, c->pv);
}

static void expect_refused(const char *what, err_call *c, attn_status want)
{
    unsigned char k0[sizeof e_k], v0[sizeof e_v];
    memcpy(k0, e_k, sizeof e_k);
    memcpy(v0, e_v, sizeof e_v);
    harness_context("%s", what);
    const attn_status st = err_run(c);
    CHECK(st == want, "status %d (%s), expected %d", st, attn_strerror(st), want);
    expect_bytes("k pool", e_k, k0, sizeof e_k);
    expect_bytes("v pool", e_v, v0, sizeof e_v);
}

/* Refused as expect_refused checks, and attn_last_error names the cause. */
static void expect_refused_saying(const char *what, err_call *c, attn_status want,
                                  const char *says)
{
    expect_refused(what, c, want);
    CHECK(strstr(attn_last_error(), says) != NULL, "%s: attn_last_error() = \"%s\", expected "
          "\"%s\"", what, attn_last_error(), says);
}

Test(cache_append, errors)
{
    harness_begin_plain("cache_append/errors");
    for (size_t i = 0; i < sizeof e_new / 4; i++)
        e_new[i] = (float)((int)(i * 37 % 23) - 11) / 8.0f;
    memset(e_k, 0x5a, sizeof e_k);
    memset(e_v, 0x5a, sizeof e_v);
    err_call c;
    static float big_k[E_NB * E_BS * E_H * E_D];

    err_base(&c), c.pk = NULL;
    expect_refused("k_new without k", &c, ATTN_ERR_NULL);
    err_base(&c), c.pv_new = NULL;
    expect_refused("v without v_new", &c, ATTN_ERR_NULL);
    err_base(&c), c.pk_new = c.pk = c.pv_new = c.pv = NULL;
    expect_refused("no pair", &c, ATTN_ERR_NULL);
    err_base(&c), c.k_new.data = NULL;
    expect_refused("k_new.data NULL", &c, ATTN_ERR_NULL);
    err_base(&c), c.opt.struct_size = 4;
    expect_refused("struct_size 4", &c, ATTN_ERR_VERSION);
    err_base(&c), c.k_new.dtype = ATTN_DTYPE_Q8_0;
    expect_refused("k_new Q8_0", &c, ATTN_ERR_ARG);
    err_base(&c), c.v.dtype = ATTN_DTYPE_BOOL;
    expect_refused("v cache BOOL", &c, ATTN_ERR_ARG);
    err_base(&c), c.shape.head_dim = 48, c.k.head_stride = 1;
    expect_refused("Q8_0 cache, head_dim 48", &c, ATTN_ERR_SHAPE);
    err_base(&c), c.opt.k_scale = 2.0f;
    expect_refused("k_scale 2 for a Q8_0 cache", &c, ATTN_ERR_ARG);
    err_base(&c), c.q_lens[1] = 3, c.kv_lens[1] = 2;
    expect_refused_saying("3 new tokens, 2 keys", &c, ATTN_ERR_ARG,
                          "attn_cache_append: sequence 1 appends 3 new tokens but has 2 keys");
    err_base(&c), c.kv_lens[1] = 11;
    expect_refused("kv_lens above kv_len", &c, ATTN_ERR_ARG);
    /* sequence 0 writes keys 7..9 (pages 1, 2: blocks 0, 2), sequence 1
       key 4 (page 1: block 1) */
    err_base(&c), c.table[4] = E_NB;
    expect_refused_saying("a written page outside the pool", &c, ATTN_ERR_ARG,
                          "opt->block_table[1 * 3 + 1] = 6 (sequence 1, page 1, which new keys "
                          "are written to): outside the pool [0, num_blocks = 6)");
    err_base(&c), c.table[1] = -1;
    expect_refused("a written page at block -1", &c, ATTN_ERR_ARG);
    err_base(&c), c.table[5] = 2; /* both sequences write key 8: slot 0 of block 2 */
    c.kv_lens[1] = 9, c.q_lens[1] = 2;
    expect_refused_saying("two sequences on one block slot", &c, ATTN_ERR_ARG,
                          "new key 8 goes to pool block 2, slot 0, which another new key of "
                          "this call writes too");
    err_base(&c), c.opt.block_size = 0;
    expect_refused("block_size 0", &c, ATTN_ERR_ARG);
    err_base(&c), c.opt.block_table = NULL;
    expect_refused("paging fields without a table", &c, ATTN_ERR_ARG);
    /* values: checked whether the call stages its rows or not */
    const size_t stage = attn_append_stage_limit;
    for (int staged = 0; staged < 2; staged++) {
        attn_append_stage_limit = staged ? stage : 0;
        err_base(&c), e_new[5] = NAN;
        expect_refused_saying("NaN into a Q8_0 cache", &c, ATTN_ERR_ARG,
                              "k_new: row 0 of sequence 0, head 0 has no q8_0 encoding");
        err_base(&c), e_new[E_H * E_LQ * E_D + 7] = -INFINITY; /* sequence 1 */
        expect_refused("-inf into a Q8_0 cache", &c, ATTN_ERR_ARG);
        e_new[E_H * E_LQ * E_D + 7] = 0.5f;
        err_base(&c), e_new[5] = 1e10f;
        expect_refused("a block scale past binary16", &c, ATTN_ERR_ARG);
        e_new[5] = 0.25f;
    }
    attn_append_stage_limit = stage;
    err_base(&c), c.v.data = e_k, c.v.dtype = ATTN_DTYPE_FP8_E4M3;
    expect_refused("k and v caches in one buffer", &c, ATTN_ERR_STRIDE);
    err_base(&c), c.k_new.data = e_v;
    c.k_new.dtype = ATTN_DTYPE_F16;
    expect_refused("k_new inside the v pool", &c, ATTN_ERR_STRIDE);
    err_base(&c), memcpy(e_v, c.kv_lens, sizeof c.kv_lens);
    c.opt.kv_lens = (const int32_t *)(void *)e_v;
    expect_refused("kv_lens inside the v pool", &c, ATTN_ERR_STRIDE);
    err_base(&c), c.v.row_stride = E_D / 2;
    expect_refused("v pool rows overlapping", &c, ATTN_ERR_STRIDE);
    /* dense caches that every sequence shares (batch_stride 0) */
    err_base(&c), c.opt.block_table = NULL, c.opt.block_size = c.opt.num_blocks = 0;
    c.opt.block_table_stride = 0;
    c.pk_new = c.pk = NULL;
    c.v = (attn_tensor){big_k, ATTN_DTYPE_F32, 0, E_LK * E_D, E_D};
    c.kv_lens[1] = 9;
    expect_refused("a shared dense cache, both at key 8", &c, ATTN_ERR_ARG);

    /* and the base call is accepted: what it writes is the layouts test's */
    err_base(&c);
    harness_context("the valid call");
    CHECK(err_run(&c) == ATTN_OK, "the valid call was refused");
}

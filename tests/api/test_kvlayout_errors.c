/* SPDX-License-Identifier: MIT */
/*
 * Argument checks of offset, packed and paged K/V (attn.h 1.1): each bad
 * description gives its status with every output byte untouched; the
 * entries and slots nobody may see are accepted whatever they hold; callers
 * built against 1.0 (a shorter attn_options) never have the new fields read.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "harness.h"

/* B=2 sequences, 2 query heads on 1 KV head, 3 query rows, a logical key
   extent of 8 in a pool of 4 blocks of 4 slots ([blocks][slots][1][D]). */
enum { B = 2, HQ = 2, HKV = 1, LQ = 3, LK = 8, D = 8, BS = 4, NB = 4, PAGES = LK / BS };

static struct {
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, scores, out;
    attn_row_stats stats;
    int32_t table[B * PAGES], q_lens[B], kv_lens[B], q_offsets[B], kv_offsets[B];
    float qd[B * HQ * LQ * D], pool_k[NB * BS * D], pool_v[NB * BS * D];
    float sd[B * HQ * LQ * LK], od[B * HQ * LQ * D], st[3][B * HQ * LQ];
} fx;

#define PATTERN 0x5A

static void setup(void)
{
    memset(&fx, 0, sizeof fx);
    harness_begin_plain("kvlayout_errors");
    rng *g = harness_rng();
    rng_fill(g, fx.qd, sizeof fx.qd / 4, -1.0f, 1.0f);
    rng_fill(g, fx.pool_k, sizeof fx.pool_k / 4, -1.0f, 1.0f);
    rng_fill(g, fx.pool_v, sizeof fx.pool_v / 4, -1.0f, 1.0f);
    fx.shape = (attn_shape){B, HQ, HKV, LQ, LK, D, 0};
    attn_options o = ATTN_OPTIONS_INIT;
    fx.opt = o;
    const int32_t table[B * PAGES] = {2, 0, 3, 1};
    memcpy(fx.table, table, sizeof table);
    fx.opt.block_table = fx.table;
    fx.opt.block_table_stride = PAGES;
    fx.opt.block_size = BS;
    fx.opt.num_blocks = NB;
    fx.q = (attn_tensor){fx.qd, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    fx.k = (attn_tensor){fx.pool_k, ATTN_DTYPE_F32, BS * D, D, D};
    fx.v = (attn_tensor){fx.pool_v, ATTN_DTYPE_F32, BS * D, D, D};
    fx.scores = (attn_tensor){fx.sd, ATTN_DTYPE_F32, HQ * LQ * LK, LQ * LK, LK};
    fx.out = (attn_tensor){fx.od, ATTN_DTYPE_F32, HQ * LQ * D, LQ * D, D};
    fx.stats = (attn_row_stats){fx.st[0], fx.st[1], fx.st[2]};
}

/* Runs scores, weights and forward; each must give `want` and, when it is an
   error, leave every output byte as it was. */
static void expect_all(attn_status want, const char *what)
{
    for (int op = 0; op < 3; op++) {
        memset(fx.sd, PATTERN, sizeof fx.sd);
        memset(fx.od, PATTERN, sizeof fx.od);
        memset(fx.st, PATTERN, sizeof fx.st);
        attn_status got =
            op == 0 ? attn_scores(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.scores)
            : op == 1 ? attn_weights(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.scores, &fx.stats)
                      : attn_forward(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.v, &fx.out,
                                     &fx.stats);
        cr_assert_eq(got, want, "%s (op %d): status %d, want %d", what, op, got, want);
        if (want == ATTN_OK)
            continue;
        unsigned char pattern[sizeof fx.sd];
        memset(pattern, PATTERN, sizeof pattern);
        expect_bytes(what, fx.sd, pattern, sizeof fx.sd);
        expect_bytes(what, fx.od, pattern, sizeof fx.od);
        expect_bytes(what, fx.st, pattern, sizeof fx.st);
    }
}

Test(kvlayout_errors, valid_fixture)
{
    setup();
    expect_all(ATTN_OK, "the fixture");
}

Test(kvlayout_errors, block_outside_pool)
{
    static const int32_t bad[] = {NB, -1, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int e = 0; e < B * PAGES; e++) {
            setup();
            fx.table[e] = bad[i];
            expect_all(ATTN_ERR_ARG, "a visible page's block outside the pool");
        }
}

Test(kvlayout_errors, unseen_pages_and_slots_not_read)
{
    /* sequence 1 has 3 keys: its second page holds none, so its entry may
       be anything; sequence 0 sees only its last 2 keys through a window,
       so its first page is not needed either. The pool slots those entries
       would name are NaN: reading them would poison the results. */
    setup();
    fx.kv_lens[0] = LK;
    fx.kv_lens[1] = 3;
    fx.q_lens[0] = 1;
    fx.q_lens[1] = LQ;
    fx.opt.q_lens = fx.q_lens;
    fx.opt.kv_lens = fx.kv_lens;
    fx.opt.window = 2;
    fx.table[0] = -7;         /* sequence 0, page 0: keys 0-3, outside the window */
    fx.table[1] = 0;          /* sequence 0, page 1: keys 4-7 */
    fx.table[2] = 3;          /* sequence 1, page 0: keys 0-2 and one slot past them */
    fx.table[3] = NB + 100;   /* sequence 1, page 1: no key */
    for (int s = 0; s < D; s++) { /* keys 4 and 5 of sequence 0: before the window */
        fx.pool_k[s] = fx.pool_v[s] = NAN;
        fx.pool_k[D + s] = fx.pool_v[D + s] = NAN;
    }
    for (int s = 3 * D; s < BS * D; s++) /* slot 3 of block 3 */
        fx.pool_k[3 * BS * D + s] = fx.pool_v[3 * BS * D + s] = NAN;
    expect_all(ATTN_OK, "garbage where nobody looks");
    for (size_t i = 0; i < sizeof fx.od / 4; i++) {
        const int64_t b = (int64_t)i / (HQ * LQ * D), row = (int64_t)i / D % LQ;
        if (row < fx.q_lens[b])
            cr_assert(fx.od[i] == fx.od[i], "NaN at out[%zu]: an unseen slot was read", i);
    }
}

Test(kvlayout_errors, paging_description)
{
    setup();
    fx.opt.block_size = 0;
    expect_all(ATTN_ERR_ARG, "block_size 0 with a table");
    setup();
    fx.opt.num_blocks = 0;
    expect_all(ATTN_ERR_ARG, "num_blocks 0 with a table");
    setup();
    fx.opt.block_table_stride = -1;
    expect_all(ATTN_ERR_STRIDE, "negative table stride");
    setup();
    fx.opt.block_table = NULL;
    expect_all(ATTN_ERR_ARG, "paging fields without a table");
    setup();
    fx.opt.num_blocks = INT64_MAX / 2; /* blocks * batch_stride overflows */
    expect_all(ATTN_ERR_SHAPE, "a pool too large to address");
    setup();
    fx.opt.block_table_stride = 0; /* left unset: row 0 for every sequence */
    expect_all(ATTN_ERR_ARG, "a table stride of 0 with batch 2");
    cr_assert(strstr(attn_last_error(), "block_table_stride is 0 with batch 2"),
              "the message names the stride: %s", attn_last_error());
    fx.opt.flags |= ATTN_SHARED_BLOCK_TABLE; /* every sequence shares row 0: valid */
    expect_all(ATTN_OK, "a shared table row");
    setup();
    fx.opt.flags |= ATTN_SHARED_BLOCK_TABLE;
    expect_all(ATTN_ERR_ARG, "a shared table row with a stride");
    setup();
    fx.opt.block_table = NULL, fx.opt.block_size = fx.opt.num_blocks = 0;
    fx.opt.block_table_stride = 0;
    fx.opt.flags |= ATTN_SHARED_BLOCK_TABLE;
    expect_all(ATTN_ERR_ARG, "a shared table row without a table");
}

Test(kvlayout_errors, offsets_out_of_range)
{
    setup();
    fx.opt.kv_offsets = fx.kv_offsets;
    fx.opt.kv_lens = fx.kv_lens;
    fx.kv_lens[0] = fx.kv_lens[1] = 5;
    fx.kv_offsets[1] = 4; /* 4 + 5 > 8 */
    expect_all(ATTN_ERR_ARG, "kv_offsets + kv_lens past kv_len");
    fx.kv_offsets[1] = -1;
    expect_all(ATTN_ERR_ARG, "negative kv_offsets");
    fx.kv_offsets[1] = 3;
    expect_all(ATTN_OK, "kv range ending at kv_len");

    setup();
    fx.opt.q_offsets = fx.q_offsets;
    fx.q_offsets[0] = 1; /* no q_lens: every sequence has q_len rows */
    expect_all(ATTN_ERR_ARG, "q_offsets without room for q_len rows");
    fx.opt.q_lens = fx.q_lens;
    fx.q_lens[0] = 2;
    fx.q_lens[1] = 0;
    fx.q_offsets[1] = LQ; /* an empty sequence may start at the end */
    expect_all(ATTN_OK, "q ranges inside q_len");
    fx.q_offsets[1] = LQ + 1;
    expect_all(ATTN_ERR_ARG, "an empty sequence past the end");
}

Test(kvlayout_errors, packed_output_rows)
{
    /* one [LQ] row space for both sequences: batch_stride 0 on the outputs */
    setup();
    fx.opt.q_offsets = fx.q_offsets;
    fx.opt.q_lens = fx.q_lens;
    fx.scores.batch_stride = fx.out.batch_stride = 0;
    fx.q_lens[0] = 2;
    fx.q_lens[1] = 1;
    fx.q_offsets[0] = 0;
    fx.q_offsets[1] = 2;
    expect_all(ATTN_OK, "disjoint in-order sequences");
    fx.q_offsets[1] = 1;
    expect_all(ATTN_ERR_STRIDE, "sequences sharing a row");
    fx.q_offsets[0] = 1;
    fx.q_offsets[1] = 0;
    expect_all(ATTN_ERR_STRIDE, "sequences out of order");
    fx.q_lens[1] = 0; /* an empty sequence owns no row */
    expect_all(ATTN_OK, "an empty sequence anywhere");
    setup();
    fx.scores.batch_stride = fx.out.batch_stride = 0;
    expect_all(ATTN_ERR_STRIDE, "batch_stride 0 without q_offsets");
}

Test(kvlayout_errors, outputs_overlapping_descriptions)
{
    /* the table and the offsets are inputs: no output may share a byte */
    static float big[B * HQ * LQ * LK + 64];
    setup();
    fx.opt.block_table = (const int32_t *)(void *)(big + 5);
    memcpy(big + 5, fx.table, sizeof fx.table);
    fx.scores.data = big;
    fx.out.data = big;
    memset(fx.sd, 0, sizeof fx.sd);
    cr_assert_eq(attn_scores(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.scores), ATTN_ERR_STRIDE);
    cr_assert_eq(attn_forward(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.v, &fx.out, NULL),
                 ATTN_ERR_STRIDE);
    setup();
    fx.opt.kv_offsets = (const int32_t *)(void *)fx.st[0];
    memset(fx.st[0], 0, sizeof fx.st[0]);
    cr_assert_eq(attn_forward(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.v, &fx.out, &fx.stats),
                 ATTN_ERR_STRIDE, "kv_offsets inside the lse array");
    setup();
    fx.out.data = fx.pool_v + D; /* inside the pool */
    fx.out.batch_stride = fx.out.head_stride = 0;
    fx.out.row_stride = D;
    fx.shape.batch = 1;
    fx.shape.q_heads = 1;
    cr_assert_eq(attn_forward(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.v, &fx.out, NULL),
                 ATTN_ERR_STRIDE, "out inside the pool");
}

Test(kvlayout_errors, older_callers_never_read_new_fields)
{
    /* A 1.0 caller's struct ends before q_offsets: whatever lies there is not
       read. With the table {0, 1}, {2, 3} the pool holds each sequence's keys
       in order, so the dense view of it must give the very same bits (pages
       of adjoining blocks form one run, as the dense cache does). */
    setup();
    const int32_t in_order[B * PAGES] = {0, 1, 2, 3};
    memcpy(fx.table, in_order, sizeof in_order);
    static float want[sizeof fx.od / 4];
    attn_tensor k = {fx.pool_k, ATTN_DTYPE_F32, LK * D, LK * D, D};
    attn_tensor v = {fx.pool_v, ATTN_DTYPE_F32, LK * D, LK * D, D};
    attn_options old = fx.opt;
    old.struct_size = (uint32_t)offsetof(attn_options, q_offsets);
    old.q_offsets = (const int32_t *)(uintptr_t)8; /* would crash if read */
    old.block_size = -3;                            /* would be ATTN_ERR_ARG */
    cr_assert_eq(attn_forward(&fx.shape, &old, &fx.q, &k, &v, &fx.out, NULL), ATTN_OK);
    memcpy(want, fx.od, sizeof want);
    cr_assert_eq(attn_forward(&fx.shape, &fx.opt, &fx.q, &fx.k, &fx.v, &fx.out, NULL), ATTN_OK);
    expect_bits("paged in order vs dense", fx.od, want, sizeof want / 4);
}

Test(kvlayout_errors, mask_apply_ignores_paging)
{
    setup();
    fx.opt.block_table = NULL; /* the rest of the description is left set */
    memset(fx.sd, 0, sizeof fx.sd);
    cr_assert_eq(attn_mask_apply(&fx.shape, &fx.opt, &fx.scores), ATTN_OK);
}

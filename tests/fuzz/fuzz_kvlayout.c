/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer of offset, packed and paged K/V (attn.h 1.1): API checks and
 * differential checks in one target, so that the layouts are decoded once.
 *
 * The input decodes a small problem through the problem generator
 * (problems/gen.h): lengths, q/kv offsets (left-padded or packed), a paged pool
 * with its block table (shuffled, in order with gaps, one row shared by
 * every sequence, any block for any entry; garbage entries where no query
 * looks), packed outputs with batch_stride 0, and with them the score
 * modifiers whose positions and rows the layouts shift: ALiBi slopes, sinks,
 * window and window_right, softcap, bias, BOOL mask, q_pos/k_pos shards.
 * Then, now and then, one hostile change this fuzzer models itself: a length
 * or offset out of range, a seen page outside the pool, a bad block size or
 * pool size, paging fields without a table, packed outputs whose sequences
 * overlap. Every buffer (q, the K/V pools, the table, the int arrays, every
 * tensor option, outputs, stats) is exactly as large as the description
 * says and ends at, or starts after, a PROT_NONE page, so a read of an entry
 * or a slot nobody may use faults.
 *
 * Fails when: a crash or sanitizer report; a status outside those the
 * header allows for the description (a model written from attn.h below);
 * an output byte changed by a rejected call; an input byte changed; an
 * output element outside every sequence's rows and columns changed by an
 * accepted call; a result of any kernel table off the float64 reference
 * (tests/ref/ref_kv.c + ref.c) by more than tests/tolerance.h's bound, or off
 * the scalar table by more than twice it; a NaN anywhere (the valid ranges
 * hold finite values and everything outside them NaN, which must never be
 * read).
 *
 * Then the same description, as the forward's, takes a step's new tokens
 * through attn_cache_append (after the layout operation, from the input's
 * remaining bytes, so the corpus keeps its meaning): new rows of a float
 * dtype, keys only now and then, a NaN planted into a block-format cache
 * now and then. Fails when the status is not the model's (the lengths and
 * offsets above, more new tokens than keys, a written page outside the
 * pool, two new rows on one cache row, a value a block format refuses), a
 * refused call changed a pool byte, an accepted one changed a byte outside
 * the new rows, or two kernel tables wrote different bytes. The encoding of
 * each row is tests/ops/test_cache_append.c's to check, bit for bit.
 * Every accepted forward also runs through a plan (attn_plan_forward,
 * attn_plan_run), which must give its bytes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtypes.h"
#include "fuzz_util.h"
#include "internal.h"
#include "ops_list.h"
#include "ref/ref.h"
#include "ref/ref_kv.h"
#include "tolerance.h"

/* The operations of ops_list.h that take a K/V layout or offsets; a byte
   picks one by index (append, never reorder: the corpus depends on it). */
static const op_kind layout_ops[] = {OP_SCORES, OP_WEIGHTS, OP_FORWARD, OP_MASK_APPLY};

typedef struct prob {
    op_kind op;
    gen_problem d;
    gen_bufs m;
    fz_gen_mem mem;
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, out;
    int64_t dv, out_floats, stats_floats;
    int32_t *arr[4]; /* q_lens, kv_lens, q_offsets, kv_offsets (NULL: absent) */
    attn_row_stats stats;
    unsigned expect; /* bit s: status s allowed */
} prob;

static int64_t seq(const int32_t *lens, int64_t b, int64_t full) { return lens ? lens[b] : full; }

/* Small problems, every layout and modifier often. */
static void profile_of(gen_profile *p)
{
    gen_profile_init(p);
    gen_chance(p, GEN_C_OPT(tree_parents), 48); /* draft trees over packed rows too */
    gen_allow_topk(p, 48);                       /* top-k lists (1.7) in every layout */
    /* shared prefixes (1.4), attended once with the workspace when given */
    gen_chance(p, GEN_C_OPT(shared_prefix), 64);
    gen_chance(p, GEN_C_OPT(workspace), 128);
    gen_range(p, GEN_C_KV_HEADS, 1, 2);
    gen_range(p, GEN_C_GROUP, 1, 2);
    gen_range(p, GEN_C_HEAD_DIM, 1, 24);
    gen_range(p, GEN_C_V_DIM, 1, 24);
    gen_chance(p, GEN_C_V_DIM, 64);
    gen_range(p, GEN_C_Q_LEN, 1, 10);
    gen_range(p, GEN_C_KV_LEN, 1, 40);
    gen_chance(p, GEN_C_OPT(q_lens), 150);
    gen_chance(p, GEN_C_OPT(kv_lens), 150);
    gen_chance(p, GEN_C_OPT(q_offsets), 120);
    gen_chance(p, GEN_C_OPT(kv_offsets), 120);
    gen_chance(p, GEN_C_Q_PACKED, 64);
    gen_chance(p, GEN_C_KV_PACKED, 48);
    gen_chance(p, GEN_C_BLOCK_SIZE, 160);
    gen_chance(p, GEN_C_OPT(q_pos), 64);
    gen_chance(p, GEN_C_OPT(alibi_slopes), 170);
    gen_chance(p, GEN_C_OPT(sinks), 150);
    gen_chance(p, GEN_C_OPT(mask), 48);
    gen_chance(p, GEN_C_OPT(bias), 48);
    gen_never(p, GEN_C_SPREAD); /* finite values: a NaN in a result is a read outside */
}

/* Keys sequence b shares with sequence b - 1 (attn.h, "Shared prefixes"). */
static int64_t shared_of(const prob *p, int64_t b)
{
    return p->opt.shared_prefix ? p->opt.shared_prefix[b] : 0;
}

/*
 * Which block-table entries a call reads, by attn.h's rules: for each
 * sequence, the pages of the keys some of its queries see, each key in the
 * storage of the sequence it lives in (a shared key: down the chain of
 * shared prefixes). read[b * pages + page] = 1; those entries must hold a
 * block of the pool. The caller frees the array.
 */
static uint8_t *read_pages(const prob *p, int64_t *pages)
{
    const int64_t B = p->shape.batch, bs = p->opt.block_size;
    *pages = (p->shape.kv_len + bs - 1) / bs;
    uint8_t *read = calloc((size_t)(B * *pages) + 1, 1);
    FZ_CHECK(read, "out of memory");
    for (int64_t b = 0; b < B; b++) {
        int64_t lo = INT64_MAX, hi = 0;
        for (int64_t i = 0; i < gen_seq_q(&p->d, b); i++) {
            int64_t l, h;
            gen_row_keys(&p->d, b, i, &l, &h);
            if (l < h) {
                lo = l < lo ? l : lo;
                hi = h > hi ? h : hi;
            }
        }
        for (int64_t c = b; lo < hi && c >= 0; c--) {
            const int64_t own = lo > shared_of(p, c) ? lo : shared_of(p, c);
            const int64_t ko = gen_kv_offset(&p->d, c);
            for (int64_t k = own; k < hi; k++)
                read[c * *pages + (ko + k) / bs] = 1;
            hi = hi < shared_of(p, c) ? hi : shared_of(p, c);
        }
    }
    return read;
}

/* One hostile change of a valid problem; each makes the call invalid. */
static void corrupt(prob *p, fz_reader *r)
{
    const int64_t B = p->shape.batch;
    const int64_t limit[4] = {p->shape.q_len, p->shape.kv_len, p->shape.q_len, p->shape.kv_len};
    const int paged = p->opt.block_table != NULL, apply = p->op == OP_MASK_APPLY;
    switch (fz_range(r, 0, 8)) {
    case 1: case 2: { /* a length or an offset out of range */
        const int a = (int)fz_range(r, 0, 3);
        if (!p->arr[a])
            break;
        const int64_t b = fz_range(r, 0, B - 1), len = seq(p->arr[a & 1], b, limit[a]);
        p->arr[a][b] = (int32_t)(fz_chance(r, 128) ? -fz_range(r, 1, 3)
                                                   : (a < 2 ? limit[a] : limit[a] - len) +
                                                         fz_range(r, 1, 3));
        break;
    }
    case 3: /* a bad block size or pool size */
        if (paged && !apply) {
            if (fz_chance(r, 128))
                p->opt.block_size = fz_range(r, -1, 0);
            else
                p->opt.num_blocks = 0;
        }
        break;
    case 4: /* paging fields without a table */
        if (!paged && !apply)
            p->opt.block_size = 16;
        break;
    case 5: { /* a page some query reads outside the pool */
        if (!paged || apply)
            break;
        const int64_t b = fz_range(r, 0, B - 1);
        int64_t pages;
        uint8_t *read = read_pages(p, &pages);
        const int64_t pg = fz_range(r, 0, pages - 1);
        if (read[b * pages + pg]) {
            int32_t *t = (int32_t *)p->opt.block_table;
            t[b * p->opt.block_table_stride + pg] =
                fz_chance(r, 128) ? (int32_t)p->opt.num_blocks : -5;
        }
        free(read);
        break;
    }
    case 7: { /* a shared prefix longer than a sequence, or sequence 0's */
        if (!p->opt.shared_prefix || apply)
            break;
        const int64_t b = fz_range(r, 0, B - 1);
        int32_t *sp = (int32_t *)p->opt.shared_prefix;
        sp[b] = b == 0 || fz_chance(r, 64)
                    ? (int32_t)fz_range(r, b == 0 ? 1 : -2, b == 0 ? 3 : -1)
                    : (int32_t)(seq(p->arr[1], b, limit[1]) + fz_range(r, 1, 2));
        break;
    }
    case 8: /* the table stride left at 0 with batch > 1, or the shared-row
               flag with a stride (attn.h, ATTN_SHARED_BLOCK_TABLE) */
        if (paged && !apply && B > 1) {
            if (p->opt.flags & ATTN_SHARED_BLOCK_TABLE)
                p->opt.flags &= ~ATTN_SHARED_BLOCK_TABLE;
            else if (fz_chance(r, 128))
                p->opt.block_table_stride = 0;
            else
                p->opt.flags |= ATTN_SHARED_BLOCK_TABLE;
        }
        break;
    case 6: { /* packed outputs: a sequence starting inside the one before */
        if (!p->d.q_packed || B < 2)
            break;
        const int64_t b = fz_range(r, 1, B - 1);
        p->arr[2][b] = p->arr[2][b - 1];
        break;
    }
    default: break;
    }
}

/* 1 when a length or offset is out of range (attn.h, "Offset and packed
   batches"), or, with `paging`, the paging description's scalars are
   inconsistent: what every operation on K/V refuses first. */
static int arrays_bad(const prob *p, int paging)
{
    const int64_t B = p->shape.batch;
    const int64_t limit[4] = {p->shape.q_len, p->shape.kv_len, p->shape.q_len, p->shape.kv_len};
    int bad = 0;
    for (int a = 0; a < 2; a++)
        for (int64_t b = 0; p->arr[a] && b < B; b++)
            bad |= p->arr[a][b] < 0 || p->arr[a][b] > limit[a];
    for (int a = 2; a < 4 && !bad; a++)
        for (int64_t b = 0; p->arr[a] && b < B; b++)
            bad |= p->arr[a][b] < 0 || p->arr[a][b] + seq(p->arr[a - 2], b, limit[a]) > limit[a];
    /* shared prefixes: none for sequence 0, within both sequences' keys */
    for (int64_t b = 0; paging && p->opt.shared_prefix && b < B && !bad; b++) {
        const int64_t room = b ? seq(p->arr[1], b - 1, limit[1]) : 0;
        bad |= shared_of(p, b) < 0 || shared_of(p, b) > seq(p->arr[1], b, limit[1]) ||
               shared_of(p, b) > room;
    }
    if (paging && !p->opt.block_table && (p->opt.block_size || p->opt.num_blocks))
        bad = 1;
    if (paging && p->opt.block_table && (p->opt.block_size <= 0 || p->opt.num_blocks <= 0))
        bad = 1;
    /* one table row for all: only with the flag, and the flag only so */
    const int shared_row = (p->opt.flags & ATTN_SHARED_BLOCK_TABLE) != 0;
    if (paging && !p->opt.block_table && shared_row)
        bad = 1;
    if (paging && p->opt.block_table &&
        (p->opt.block_table_stride == 0 ? B > 1 && !shared_row : shared_row))
        bad = 1;
    return bad;
}

/* The statuses attn.h gives for the (possibly corrupted) description. */
static unsigned expected(const prob *p)
{
    const int64_t B = p->shape.batch;
    unsigned bad_stride = 0;
    unsigned bad_arg = (unsigned)arrays_bad(p, p->op != OP_MASK_APPLY);
    if (p->op != OP_MASK_APPLY) {
        if (p->opt.block_table && !bad_arg) {
            int64_t pages;
            uint8_t *read = read_pages(p, &pages);
            for (int64_t b = 0; b < B; b++)
                for (int64_t pg = 0; pg < pages; pg++)
                    if (read[b * pages + pg]) {
                        const int32_t e = p->opt.block_table[b * p->opt.block_table_stride + pg];
                        bad_arg |= e < 0 || e >= p->opt.num_blocks;
                    }
            free(read);
        }
    }
    if (p->d.q_packed && B > 1 && !bad_arg) { /* in order and disjoint (attn.h) */
        int64_t end = 0;
        for (int64_t b = 0; b < B; b++) {
            const int64_t len = seq(p->arr[0], b, p->shape.q_len);
            if (len && p->arr[2][b] < end)
                bad_stride = 1;
            if (len)
                end = p->arr[2][b] + len;
        }
    }
    return bad_arg || bad_stride ? (bad_arg << ATTN_ERR_ARG) | (bad_stride << ATTN_ERR_STRIDE)
                                 : 1u << ATTN_OK;
}

/* ------------------------------------------------------------ cache append */

/* Key position of new token i of sequence b (from the cache's row 0 of it). */
static int64_t append_pos(const prob *p, int64_t b, int64_t i)
{
    return gen_kv_offset(&p->d, b) + seq(p->arr[1], b, p->shape.kv_len) -
           seq(p->arr[0], b, p->shape.q_len) + i;
}

/* Which cache row a new token lands on: its pool slot, or its row in a
   cache every sequence shares (`shared`: batch_stride 0); -1: each
   sequence its own. */
static int64_t append_row_id(const prob *p, int shared, int64_t b, int64_t i)
{
    const int64_t pos = append_pos(p, b, i);
    if (p->opt.block_table) {
        const int64_t bs = p->opt.block_size;
        return (int64_t)p->opt.block_table[b * p->opt.block_table_stride + pos / bs] * bs + pos % bs;
    }
    return shared ? pos : -1;
}

/* attn.h's statuses for the append of this (possibly corrupted) description
   into k (and v unless keys_only). */
static unsigned append_expected(const prob *p, int keys_only, int bad_value)
{
    const int64_t B = p->shape.batch;
    /* a dense cache broadcast over heads or rows is no output layout */
    unsigned stride = 0;
    int shared = 0;
    for (int c = 0; c < (keys_only ? 1 : 2); c++) {
        const attn_tensor *t = c ? &p->v : &p->k;
        if (!p->opt.block_table && ((p->shape.kv_heads > 1 && t->head_stride == 0) ||
                                    (p->shape.kv_len > 1 && t->row_stride == 0)))
            stride = 1u << ATTN_ERR_STRIDE;
        shared |= t->batch_stride == 0 && B > 1;
    }
    const int64_t limit[2] = {p->shape.q_len, p->shape.kv_len};
    int bad = arrays_bad(p, 1);
    for (int64_t b = 0; b < B && !bad; b++) /* a new key below a shared prefix too */
        bad |= seq(p->arr[0], b, limit[0]) > seq(p->arr[1], b, limit[1]) - shared_of(p, b);
    for (int64_t b = 0; b < B && !bad && p->opt.block_table; b++)
        for (int64_t i = 0; i < seq(p->arr[0], b, limit[0]); i++) {
            const int32_t e = p->opt.block_table[b * p->opt.block_table_stride +
                                                 append_pos(p, b, i) / p->opt.block_size];
            bad |= e < 0 || e >= p->opt.num_blocks;
        }
    for (int64_t b = 0; b < B && !bad; b++)
        for (int64_t i = 0; i < seq(p->arr[0], b, limit[0]) && !bad; i++) {
            const int64_t id = append_row_id(p, shared, b, i);
            for (int64_t c = 0; c <= b && id >= 0 && !bad; c++)
                for (int64_t l = 0; l < (c == b ? i : seq(p->arr[0], c, limit[0])); l++)
                    if (append_row_id(p, shared, c, l) == id) {
                        bad = 1;
                        break;
                    }
        }
    if (stride) /* reported before or after the others */
        return stride | (bad || bad_value ? 1u << ATTN_ERR_ARG : 0u);
    return bad || bad_value ? 1u << ATTN_ERR_ARG : 1u << ATTN_OK;
}

/* The append of p's description on every table (see the header). */
static void check_append(prob *p, fz_reader *r, fz_rng *g)
{
    const attn_shape *s = &p->shape;
    int32_t dts[ATTN_DTYPE_COUNT]; /* the float dtypes (tests/dtypes.h) */
    const int n_dts = test_dtypes_of(DT_FLOAT, dts);
    const int32_t dt = dts[fz_range(r, 0, n_dts - 1)];
    const int keys_only = fz_chance(r, 40);
    const int64_t cols[2] = {s->head_dim, p->dv};
    const size_t es = test_dtypes[dt].bytes;
    attn_tensor nt[2];
    void *mem[2];
    for (int c = 0; c < 2; c++) {
        const int64_t per_head = s->q_len * cols[c], n = s->batch * s->kv_heads * per_head;
        mem[c] = malloc((size_t)n * es);
        FZ_CHECK(mem[c], "out of memory");
        for (int64_t e = 0; e < n; e++)
            gen_store((char *)mem[c] + e * (int64_t)es, dt, fz_rng_float(g, -2.0f, 2.0f));
        nt[c] = (attn_tensor){mem[c], dt, s->kv_heads * per_head, per_head, cols[c]};
    }
    /* a NaN where a block-format cache must refuse it */
    int bad_value = 0;
    const attn_tensor *cache[2] = {&p->k, &p->v};
    for (int c = 0; c < (keys_only ? 1 : 2); c++)
        if (gen_dtype_block(cache[c]->dtype) > 1 && fz_chance(r, 30)) {
            const int64_t b = fz_range(r, 0, s->batch - 1);
            const int64_t n = seq(p->arr[0], b, s->q_len);
            if (n > 0 && (!p->arr[2] || p->arr[2][b] >= 0)) {
                const int64_t row = gen_q_offset(&p->d, b) + fz_range(r, 0, n - 1);
                if (row < s->q_len) {
                    gen_store(gen_at(&nt[c], b, fz_range(r, 0, s->kv_heads - 1), row,
                                     fz_range(r, 0, cols[c] - 1)),
                              dt, NAN);
                    bad_value = 1;
                }
            }
        }
    const unsigned expect = append_expected(p, keys_only, bad_value);
    const int roles[2] = {GEN_K, GEN_V};
    unsigned char *before[2], *first[2] = {NULL, NULL};
    for (int c = 0; c < 2; c++) {
        before[c] = malloc(p->m.bytes[roles[c]]);
        FZ_CHECK(before[c], "out of memory");
        memcpy(before[c], p->m.data[roles[c]], p->m.bytes[roles[c]]);
    }
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) {
        const attn_dsp *table = attn_dsp_for_isa((attn_isa)isa);
        if (!table)
            continue;
        for (int c = 0; c < 2; c++)
            memcpy(p->m.data[roles[c]], before[c], p->m.bytes[roles[c]]);
        const attn_status st =
            attn_cache_append_with(table, s, &p->opt, &nt[0], keys_only ? NULL : &nt[1], &p->k,
                                   keys_only ? NULL : &p->v);
        FZ_CHECK(expect >> st & 1, "%s cache_append: status %d, allowed mask 0x%x",
                 attn_isa_name((attn_isa)isa), st, expect);
        if (st != ATTN_OK) {
            for (int c = 0; c < 2; c++)
                FZ_CHECK(!memcmp(p->m.data[roles[c]], before[c], p->m.bytes[roles[c]]),
                         "a refused cache_append wrote the %s pool", c ? "v" : "k");
            continue;
        }
        /* the bytes outside the new rows: as before */
        for (int c = 0; c < (keys_only ? 1 : 2); c++) {
            unsigned char *want = malloc(p->m.bytes[roles[c]]);
            FZ_CHECK(want, "out of memory");
            memcpy(want, before[c], p->m.bytes[roles[c]]);
            const int32_t cdt = cache[c]->dtype;
            const size_t rb = (size_t)(cols[c] / gen_dtype_block(cdt)) * gen_dtype_bytes(cdt);
            for (int64_t b = 0; b < s->batch; b++)
                for (int64_t h = 0; h < s->kv_heads; h++)
                    for (int64_t i = 0; i < seq(p->arr[0], b, s->q_len); i++) {
                        const unsigned char *at = gen_kv_row(&p->m, roles[c], b, h, append_pos(p, b, i));
                        const size_t off = (size_t)(at - (unsigned char *)p->m.data[roles[c]]);
                        memcpy(want + off, at, rb);
                    }
            FZ_CHECK(!memcmp(want, p->m.data[roles[c]], p->m.bytes[roles[c]]),
                     "%s cache_append wrote the %s pool outside the new rows",
                     attn_isa_name((attn_isa)isa), c ? "v" : "k");
            free(want);
        }
        if (keys_only)
            FZ_CHECK(!memcmp(p->m.data[GEN_V], before[1], p->m.bytes[GEN_V]),
                     "a keys-only cache_append wrote the v pool");
        for (int c = 0; c < 2; c++) {
            if (!first[c]) {
                first[c] = malloc(p->m.bytes[roles[c]]);
                FZ_CHECK(first[c], "out of memory");
                memcpy(first[c], p->m.data[roles[c]], p->m.bytes[roles[c]]);
            } else {
                FZ_CHECK(!memcmp(first[c], p->m.data[roles[c]], p->m.bytes[roles[c]]),
                         "%s cache_append: the %s pool differs from the scalar table's",
                         attn_isa_name((attn_isa)isa), c ? "v" : "k");
            }
        }
    }
    for (int c = 0; c < 2; c++) {
        memcpy(p->m.data[roles[c]], before[c], p->m.bytes[roles[c]]);
        free(before[c]);
        free(first[c]);
        free(mem[c]);
    }
}

/* Decodes a problem; returns 0 when the decoded sizes are not worth a run. */
static int decode(prob *p, fz_reader *r)
{
    memset(p, 0, sizeof *p);
    p->op = layout_ops[fz_range(r, 0, 3)];
    gen_profile prof;
    profile_of(&prof);
    gen_src src = fz_gen_source(r);
    if (!gen_draw(&p->d, &src, &prof))
        return 0;
    const uint64_t seed = fz_u64(r);
    p->mem.r = r;
    const gen_allocator a = fz_gen_allocator(&p->mem);
    const unsigned out = p->op == OP_FORWARD ? GEN_M_OUT : GEN_M_SCORES;
    FZ_CHECK(gen_materialise(&p->m, &p->d, seed, out | GEN_M_STATS | GEN_M_POISON | GEN_M_GARBAGE,
                             &a) == 0,
             "gen_materialise");
    p->shape = p->m.shape;
    p->opt = p->m.opt;
    p->dv = p->d.dv;
    p->q = p->m.t[GEN_Q];
    p->k = p->m.t[GEN_K];
    p->v = p->m.t[GEN_V];
    p->out = p->m.t[p->op == OP_FORWARD ? GEN_OUT : GEN_SCORES];
    p->stats = p->m.stats;
    p->out_floats = (int64_t)(p->m.bytes[p->op == OP_FORWARD ? GEN_OUT : GEN_SCORES] / 4);
    p->stats_floats = p->shape.batch * p->shape.q_heads * p->shape.q_len;
    p->arr[0] = (int32_t *)p->opt.q_lens;
    p->arr[1] = (int32_t *)p->opt.kv_lens;
    p->arr[2] = (int32_t *)p->opt.q_offsets;
    p->arr[3] = (int32_t *)p->opt.kv_offsets;
    if (fz_chance(r, 40)) {
        /* a change the model finds valid is undone: the data were written
           for the drawn description (everything else holds NaN) */
        int32_t keep[4][8], *table = (int32_t *)p->opt.block_table;
        const attn_options opt = p->opt;
        const size_t table_bytes = table ? p->m.bytes[GEN_OPT(block_table)] : 0;
        int32_t *table0 = table ? malloc(table_bytes) : NULL;
        FZ_CHECK(p->shape.batch <= 8 && (!table || table0), "batch %lld",
                 (long long)p->shape.batch);
        int32_t keep_shared[8], *shared = (int32_t *)p->opt.shared_prefix;
        for (int i = 0; i < 4; i++)
            if (p->arr[i])
                memcpy(keep[i], p->arr[i], (size_t)p->shape.batch * 4);
        if (shared)
            memcpy(keep_shared, shared, (size_t)p->shape.batch * 4);
        if (table)
            memcpy(table0, table, table_bytes);
        corrupt(p, r);
        if (expected(p) == 1u << ATTN_OK) {
            for (int i = 0; i < 4; i++)
                if (p->arr[i])
                    memcpy(p->arr[i], keep[i], (size_t)p->shape.batch * 4);
            if (shared)
                memcpy(shared, keep_shared, (size_t)p->shape.batch * 4);
            if (table)
                memcpy(table, table0, table_bytes);
            p->opt = opt;
        }
        free(table0);
    }
    p->expect = expected(p);
    char text[896];
    fz_context("%s %s", op_names[p->op], gen_describe(&p->d, text, sizeof text));
    return 1;
}

static void release(prob *p)
{
    gen_release(&p->m);
    gen_free(&p->d);
}

/* Roles whose bytes are the call's inputs: every buffer but the outputs. */
static int is_input(int role)
{
    return role != GEN_OUT && role != GEN_SCORES && role != GEN_LSE && role != GEN_MAX &&
           role != GEN_ENT && role != GEN_OPT(workspace);
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
    case OP_CACHE_APPEND: /* writes K/V: not in layout_ops */
    case OP_PLAN_FORWARD: /* beside each forward: check_plan */
    case OP_FORWARD_SOURCES: /* its own fuzzer: fuzz_sources.c */
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
    float *const stats[3] = {p->stats.lse, p->stats.max_score, p->stats.entropy};
    for (int s = 0; s < 3; s++)
        memcpy(dst + p->out_floats + s * p->stats_floats, stats[s], (size_t)p->stats_floats * 4);
}

static void load(prob *p, const float *src)
{
    memcpy(p->out.data, src, (size_t)p->out_floats * 4);
    float *const stats[3] = {p->stats.lse, p->stats.max_score, p->stats.entropy};
    for (int s = 0; s < 3; s++)
        memcpy(stats[s], src + p->out_floats + s * p->stats_floats, (size_t)p->stats_floats * 4);
}

/* An accepted forward again through a plan on the same table (attn.h,
   attn_plan_forward, attn_plan_run): the same bytes as `got`. */
static void check_plan(const attn_dsp *t, prob *p, const float *before, const float *got,
                       size_t total)
{
    size_t bytes = 0;
    FZ_CHECK(attn_plan_size(&p->shape, &p->opt, &bytes) == ATTN_OK, "attn_plan_size");
    void *mem = malloc(bytes);
    float *again = malloc(total * 4);
    FZ_CHECK(mem && again, "out of memory");
    attn_plan *plan = NULL;
    attn_status st = attn_plan_forward_with(t, mem, bytes, &p->shape, &p->opt, &p->q, &p->k,
                                            &p->v, &p->out, &p->stats, &plan);
    FZ_CHECK(st == ATTN_OK, "attn_plan_forward: status %d for an accepted forward", st);
    load(p, before);
    st = attn_plan_run(plan, p->q.data, p->k.data, p->v.data, p->out.data, &p->stats);
    FZ_CHECK(st == ATTN_OK, "attn_plan_run: status %d", st);
    save(p, again);
    FZ_CHECK(memcmp(again, got, total * 4) == 0, "the plan's results differ from attn_forward's");
    /* and in shares, last first (attn_plan_run_share, 1.11): the same bytes,
       or, for tasks that depend on one another, refused with nothing written */
    const int32_t shares = (int32_t)(1 + total % 7);
    const int dependent = p->opt.shared_prefix != NULL || p->opt.workspace != NULL;
    load(p, before);
    int refused = 0;
    for (int32_t sh = shares - 1; sh >= 0; sh--) {
        st = attn_plan_run_share(plan, p->q.data, p->k.data, p->v.data, p->out.data, &p->stats,
                                 sh, shares);
        FZ_CHECK(st == ATTN_OK || (st == ATTN_ERR_UNSUPPORTED && dependent),
                 "attn_plan_run_share %d of %d: status %d", (int)sh, (int)shares, st);
        refused |= st != ATTN_OK;
    }
    save(p, again);
    FZ_CHECK(memcmp(again, refused ? before : got, total * 4) == 0,
             refused ? "refused shares wrote" : "the shares' results differ from attn_forward's");
    free(mem);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_reader r = {data, size};
    fz_rng g = {fz_u64(&r) | 1};
    prob p;
    if (!decode(&p, &r)) {
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
    unsigned char *inputs[GEN_ROLE_COUNT] = {0};
    for (int role = 0; role < GEN_ROLE_COUNT; role++)
        if (p.m.data[role] && is_input(role)) {
            inputs[role] = malloc(p.m.bytes[role]);
            FZ_CHECK(inputs[role], "out of memory");
            memcpy(inputs[role], p.m.data[role], p.m.bytes[role]);
        }

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
        for (int role = 0; role < GEN_ROLE_COUNT; role++)
            FZ_CHECK(!inputs[role] || memcmp(p.m.data[role], inputs[role], p.m.bytes[role]) == 0,
                     "an input changed (role %d)", role);
        if (st != ATTN_OK) {
            FZ_CHECK(memcmp(got, before, total * 4) == 0, "a rejected call wrote an output");
            continue;
        }
        if (p.op == OP_FORWARD)
            check_plan(table, &p, before, got, total);
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
    check_append(&p, &r, &g);
    free(before);
    free(got);
    free(scalar);
    for (int role = 0; role < GEN_ROLE_COUNT; role++)
        free(inputs[role]);
    release(&p);
    return 0;
}

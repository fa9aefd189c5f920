/* SPDX-License-Identifier: MIT */
/* The problem generator (gen.h): drawing, materialising, the layouts' geometry. */
#include "gen.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/dtype_list.h"

#define POS(f) ATTN_OPT_POS_##f
#define KIND(f) ATTN_OPT_KIND_##f

/* ------------------------------------------------------------ dtypes */

size_t gen_dtype_bytes(int32_t dtype) { ATTN_DTYPE_GET(dtype, bytes, 4) }

int64_t gen_dtype_block(int32_t dtype) { ATTN_DTYPE_GET(dtype, block, 1) }

const char *gen_dtype_name(int32_t dtype) { ATTN_DTYPE_GET(dtype, name, "?") }

static int dtype_kind(int32_t dtype) { ATTN_DTYPE_GET(dtype, kind, ATTN_DTYPE_KIND_FLOAT) }

/* ------------------------------------------------------------ numbers */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; NaN stays NaN, overflow gives inf. */
static uint16_t f32_to_f16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, NaN (quiet) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x0200u : 0u));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) /* below 2^-14: f16 subnormal; the scaling is exact */
        return (uint16_t)(sign | (uint16_t)nearbyintf(f32_from_bits(ax) * 16777216.0f));
    const uint32_t rounded = ax + 0x0fffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

static float f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        const float mag = (float)m * 0x1p-24f;
        return sign ? -mag : mag;
    }
    if (e == 31)
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

static uint16_t f32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void gen_store(void *at, int32_t dtype, float x)
{
    uint16_t h;
    switch (dtype) {
    case ATTN_DTYPE_F16:
        h = f32_to_f16(x);
        memcpy(at, &h, 2);
        break;
    case ATTN_DTYPE_BF16:
        h = f32_to_bf16(x);
        memcpy(at, &h, 2);
        break;
    default:
        memcpy(at, &x, 4);
    }
}

int gen_dtype_asym(int32_t dtype)
{
    return dtype_kind(dtype) == ATTN_DTYPE_KIND_ASYM;
}

int64_t gen_kv_group(int32_t dtype, int64_t group, int64_t cols)
{
    return dtype_kind(dtype) == ATTN_DTYPE_KIND_ASYM && group <= 0 ? cols : group;
}

int64_t gen_row_units(int32_t dtype, int64_t cols, int64_t group)
{
    const int64_t units = cols / gen_dtype_block(dtype);
    if (dtype_kind(dtype) != ATTN_DTYPE_KIND_ASYM || cols == 0)
        return units;
    return units + cols / gen_kv_group(dtype, group, cols) * 8; /* a header per record */
}

float gen_load(const void *row, int32_t dtype, int64_t i, float scale)
{
    return gen_load_g(row, dtype, i, scale, 0);
}

float gen_load_g(const void *row, int32_t dtype, int64_t i, float scale, int64_t group)
{
    const unsigned char *p = row;
    uint16_t h;
    switch (dtype_kind(dtype)) {
    case ATTN_DTYPE_KIND_ASYM: { /* records: f32 scale, f32 zero point, codes */
        const int u8 = gen_dtype_block(dtype) == 1;
        const int64_t g = group > 0 ? group : i + 2, at = i % g;
        const unsigned char *rec = p + (size_t)(i / g) * (size_t)(8 + (u8 ? g : g / 2));
        float sc, zp;
        memcpy(&sc, rec, 4);
        memcpy(&zp, rec + 4, 4);
        const unsigned code = u8 ? rec[8 + at] : at % 2 ? rec[8 + at / 2] & 15u : rec[8 + at / 2] >> 4;
        const float centred = (float)code - zp;
        return centred * sc;
    }
    case ATTN_DTYPE_KIND_FP8: {
        if (dtype == ATTN_DTYPE_FP8_E5M2) /* the upper half of a binary16 */
            return f16_to_f32((uint16_t)(p[i] << 8)) * (scale != 0.0f ? scale : 1.0f);
        /* OCP E4M3 "fn": no inf, S.1111.111 NaN */
        const unsigned x = p[i], e = (x >> 3) & 15u, m = x & 7u;
        const float mag = e == 15u && m == 7u ? NAN
                          : e == 0u           ? ldexpf((float)m, -9)
                                              : ldexpf((float)(8u + m), (int)e - 10);
        return (x & 0x80u ? -mag : mag) * (scale != 0.0f ? scale : 1.0f);
    }
    case ATTN_DTYPE_KIND_QBLOCK: {
        const int64_t block = gen_dtype_block(dtype), j = i % block;
        const unsigned char *blk = p + (size_t)(i / block) * gen_dtype_bytes(dtype);
        memcpy(&h, blk, 2);
        const float d = f16_to_f32(h);
        if (dtype == ATTN_DTYPE_Q8_0)
            return (float)(int8_t)blk[2 + j] * d;
        const int nibble = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
        return (float)(nibble - 8) * d;
    }
    case ATTN_DTYPE_KIND_BOOL: return p[i] != 0;
    default: break;
    }
    if (dtype == ATTN_DTYPE_F16 || dtype == ATTN_DTYPE_BF16) {
        memcpy(&h, p + 2 * i, 2);
        return dtype == ATTN_DTYPE_F16 ? f16_to_f32(h) : f32_from_bits((uint32_t)h << 16);
    }
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
}

uint64_t gen_splitmix(uint64_t *state)
{
    /* splitmix64: any seed, 0 included, gives a full-period stream */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t gen_splitmix_range(void *state, int64_t lo, int64_t hi)
{
    const uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
    const uint64_t x = gen_splitmix(state);
    return span == 0 ? (int64_t)x : (int64_t)((uint64_t)lo + x % span);
}

/* Uniform in [0, 1) from 24 bits. */
static float unit24(uint64_t *st)
{
    return (float)(gen_splitmix(st) >> 40) * (1.0f / 16777216.0f);
}

float gen_alibi_slope(int64_t h, int64_t heads)
{
    /* powers of 2^(-8/n) for the largest power of two n <= heads, then the
       odd powers of 2^(-8/2n) for the heads beyond it */
    int64_t n = 1;
    while (n * 2 <= heads)
        n *= 2;
    if (h < n)
        return (float)pow(2.0, -8.0 * (double)(h + 1) / (double)n);
    return (float)pow(2.0, -8.0 * (double)(2 * (h - n) + 1) / (double)(2 * n));
}

static float draw_float(const gen_values *v, uint64_t *st, int64_t h, int64_t heads)
{
    if (v->special && gen_splitmix(st) % v->special == 0) {
        static const float sp[] = {NAN, -0.0f, 1e-45f, FLT_MIN, INFINITY, -INFINITY};
        return sp[gen_splitmix(st) % 6];
    }
    if (v->minus_inf && (gen_splitmix(st) & 255) < v->minus_inf)
        return -INFINITY;
    if (v->alt && (gen_splitmix(st) & 255) < v->alt)
        return v->alt_lo + (v->alt_hi - v->alt_lo) * unit24(st);
    switch (v->kind) {
    case GEN_VAL_BELL: {
        /* a sum of four 16-bit uniforms: bell-shaped, bounded */
        const uint64_t r = gen_splitmix(st);
        const uint32_t s = (uint32_t)(r & 0xffffu) + (uint32_t)((r >> 16) & 0xffffu) +
                           (uint32_t)((r >> 32) & 0xffffu) + (uint32_t)(r >> 48);
        return v->lo + (v->hi - v->lo) * ((float)s * (1.0f / 262144.0f));
    }
    case GEN_VAL_ALIBI:
        return gen_alibi_slope(h, heads) * (v->lo + (v->hi - v->lo) * unit24(st));
    default: return v->lo + (v->hi - v->lo) * unit24(st);
    }
}

/* ------------------------------------------------------------ profiles */

#define GEN_C_NAME(name) #name,
static const char *const choice_names[] = {GEN_CHOICE_LIST(GEN_C_NAME)};
#undef GEN_C_NAME
#define OPT_NAME(f, kind, extent, dtype, off, since, rule) #f,
static const char *const option_names[] = {ATTN_OPTION_LIST(OPT_NAME)};
#undef OPT_NAME
static const attn_opt_kind option_kinds[] = {
#define OPT_KIND(f, kind, extent, dtype, off, since, rule) ATTN_OPT_KIND_##kind,
    ATTN_OPTION_LIST(OPT_KIND)
#undef OPT_KIND
};
static const attn_opt_extent option_extents[] = {
#define OPT_EXTENT(f, kind, extent, dtype, off, since, rule) ATTN_OPT_EXTENT_##extent,
    ATTN_OPTION_LIST(OPT_EXTENT)
#undef OPT_EXTENT
};
static const int32_t option_dtypes[] = {
#define OPT_DTYPE(f, kind, extent, dtype, off, since, rule) ATTN_DTYPE_##dtype,
    ATTN_OPTION_LIST(OPT_DTYPE)
#undef OPT_DTYPE
};
static const size_t option_offsets[] = {
#define OPT_OFFSET(f, kind, extent, dtype, off, since, rule) offsetof(attn_options, f),
    ATTN_OPTION_LIST(OPT_OFFSET)
#undef OPT_OFFSET
};
static const size_t option_sizes[] = {
#define OPT_SIZE(f, kind, extent, dtype, off, since, rule) sizeof(((attn_options *)0)->f),
    ATTN_OPTION_LIST(OPT_SIZE)
#undef OPT_SIZE
};
/* A VALUE field of a float type. */
#define IS_FLOAT(x) _Generic((x), float: 1, double: 1, default: 0)
static const uint8_t option_float[] = {
#define OPT_FLOAT(f, kind, extent, dtype, off, since, rule) IS_FLOAT(((attn_options *)0)->f),
    ATTN_OPTION_LIST(OPT_FLOAT)
#undef OPT_FLOAT
};

const char *gen_choice_name(int choice)
{
    if (choice >= 0 && choice < ATTN_OPTION_COUNT)
        return option_names[choice];
    if (choice > GEN_C_FIRST && choice < GEN_C_COUNT)
        return choice_names[choice - GEN_C_FIRST - 1];
    return "?";
}

static void rule(gen_profile *p, int c, unsigned chance, int64_t lo, int64_t hi)
{
    p->rule[c] = (gen_rule){(uint16_t)chance, lo, hi, 0, 0, 0, 0.0, NULL, 0};
}

static void menu(gen_profile *p, int c, unsigned chance, const int64_t *m, size_t n)
{
    p->rule[c] = (gen_rule){(uint16_t)chance, 0, 0, 0, 0, 0, 0.0, m, n};
}

void gen_pin(gen_profile *p, int c, int64_t v)
{
    p->pinned[c] = 1;
    p->pin[c] = v;
    p->pin_f[c] = (double)v;
}

void gen_pin_f(gen_profile *p, int c, double v)
{
    p->pinned[c] = 1;
    p->pin_f[c] = v;
    p->pin[c] = (int64_t)v;
}

void gen_never(gen_profile *p, int c)
{
    p->rule[c].chance = 0;
}

void gen_range(gen_profile *p, int c, int64_t lo, int64_t hi)
{
    p->rule[c].chance = 256;
    p->rule[c].lo = lo;
    p->rule[c].hi = hi;
    p->rule[c].kv = 0;
    p->rule[c].wide = 0;
    p->rule[c].menu = NULL;
    p->rule[c].n_menu = 0;
}

void gen_chance(gen_profile *p, int c, unsigned chance)
{
    p->rule[c].chance = (uint16_t)chance;
}

static void topk_rules(gen_profile *p)
{
    rule(p, GEN_C_OPT(topk_indices), 0, 1, 1);
    /* up to two more entries than keys, so -1 slots and repeats are common */
    rule(p, GEN_C_OPT(topk), 256, 1, 2);
    p->rule[GEN_C_OPT(topk)].kv = 1;
    rule(p, GEN_C_TOPK_SHARED, 128, 1, 1);
}

void gen_allow_topk(gen_profile *p, unsigned chance)
{
    topk_rules(p);
    p->rule[GEN_C_OPT(topk_indices)].chance = (uint16_t)chance;
}

/* The float dtypes of the list, in its order: the default draw of q, k and v
   (a new kind says here whether it is one). */
#define FLOAT_ONLY_FLOAT(x) x,
#define FLOAT_ONLY_QBLOCK(x)
#define FLOAT_ONLY_FP8(x)
#define FLOAT_ONLY_BOOL(x)
#define FLOAT_ONLY_ASYM(x)
#define FLOAT_ID(ID, name, block, bytes, kind, q, kv, out) FLOAT_ONLY_##kind(ATTN_DTYPE_##ID)
static const int64_t float_dtypes[] = {ATTN_DTYPE_LIST(FLOAT_ID)};
#undef FLOAT_ID
#define N_FLOAT_DTYPES (sizeof float_dtypes / sizeof float_dtypes[0])
static const int64_t seq_kinds[] = {GEN_SEQ_FULL, GEN_SEQ_EMPTY, GEN_SEQ_RANDOM, GEN_SEQ_RANDOM,
                                    GEN_SEQ_RANDOM};
static const int64_t offset_kinds[] = {GEN_OFFSET_ZERO, GEN_OFFSET_END, GEN_OFFSET_RANDOM,
                                       GEN_OFFSET_RANDOM};
static const int64_t pools[] = {GEN_POOL_SHUFFLED, GEN_POOL_ADJOIN, GEN_POOL_SHARED,
                                GEN_POOL_RANDOM};
static const int64_t pos_kinds[] = {0, 1, 2};
static const int64_t spreads[] = {GEN_SPREAD_FLAT, GEN_SPREAD_PEAKED, GEN_SPREAD_SPECIAL};
static const int64_t fp8_scales[] = {1, 4, 16, 64}; /* times 1/16 */
/* an ASYM cache's group, or 0 (the row) where it does not divide the row */
static const int64_t asym_groups[] = {8, 16, 32, 64};

void gen_profile_init(gen_profile *p)
{
    memset(p, 0, sizeof *p);
    /* shapes: small, now and then wider */
    rule(p, GEN_C_BATCH, 256, 1, 3);
    rule(p, GEN_C_KV_HEADS, 256, 1, 2);
    rule(p, GEN_C_GROUP, 256, 1, 3);
    rule(p, GEN_C_Q_LEN, 256, 1, 20);
    p->rule[GEN_C_Q_LEN].wide = 40, p->rule[GEN_C_Q_LEN].wide_hi = 70;
    rule(p, GEN_C_KV_LEN, 256, 1, 40);
    p->rule[GEN_C_KV_LEN].wide = 40, p->rule[GEN_C_KV_LEN].wide_hi = 300;
    rule(p, GEN_C_HEAD_DIM, 256, 1, 72);
    p->rule[GEN_C_HEAD_DIM].wide = 30, p->rule[GEN_C_HEAD_DIM].wide_hi = 200;
    rule(p, GEN_C_V_DIM, 128, 1, 72);
    menu(p, GEN_C_Q_DTYPE, 170, float_dtypes, N_FLOAT_DTYPES);
    menu(p, GEN_C_K_DTYPE, 170, float_dtypes, N_FLOAT_DTYPES);
    menu(p, GEN_C_V_DTYPE, 100, float_dtypes, N_FLOAT_DTYPES);
    /* lengths and layouts */
    menu(p, GEN_C_SEQ_Q, 256, seq_kinds, 5);
    menu(p, GEN_C_SEQ_KV, 256, seq_kinds, 5);
    rule(p, GEN_C_SPREAD_LENS, 0, 1, 1);
    rule(p, GEN_C_Q_PACKED, 40, 1, 1);
    rule(p, GEN_C_KV_PACKED, 40, 1, 1);
    rule(p, GEN_C_GAP, 64, 1, 2);
    menu(p, GEN_C_OFFSET, 256, offset_kinds, 4);
    rule(p, GEN_C_BLOCK_SIZE, 60, 1, 2);
    p->rule[GEN_C_BLOCK_SIZE].kv = 1;
    menu(p, GEN_C_POOL, 256, pools, 4);
    rule(p, GEN_C_POOL_HEADS_OUTER, 48, 1, 1);
    rule(p, GEN_C_POOL_SPARE, 96, 1, 3);
    rule(p, GEN_C_TABLE_PAD, 64, 1, 2);
    rule(p, GEN_C_ROWS_OUTER, 64, 1, 1);
    rule(p, GEN_C_ROW_PAD, 64, 1, 7);
    rule(p, GEN_C_MISALIGN, 32, 1, 1);
    rule(p, GEN_C_BROADCAST_QKV, 24, 1, 7);
    rule(p, GEN_C_BROADCAST_OPT, 96, 1, 7);
    menu(p, GEN_C_POS_KIND, 256, pos_kinds, 3);
    rule(p, GEN_C_POS_BASE, 64, 1, 1);
    rule(p, GEN_C_POS_K, 256, 0, 3000);
    rule(p, GEN_C_POS_DELTA, 256, -6, 10);
    menu(p, GEN_C_SPREAD, 96, spreads, 3);
    rule(p, GEN_C_SPECIALS, 256, 3, 200);

    /* options: a line without a rule below gets its kind's default (gen.h) */
    for (int i = 0; i < ATTN_OPTION_COUNT; i++) {
        if (option_kinds[i] == ATTN_OPT_KIND_VALUE) {
            rule(p, GEN_C_OPT0 + i, 32, 1, 2);
            p->rule[GEN_C_OPT0 + i].kv = !option_float[i];
            p->rule[GEN_C_OPT0 + i].hi = option_float[i] ? 16 : 2;
            p->rule[GEN_C_OPT0 + i].unit = option_float[i] ? 0.25 : 0.0;
        } else if (option_kinds[i] == ATTN_OPT_KIND_TENSOR) {
            rule(p, GEN_C_OPT0 + i, 64, 1, 1);
        } else {
            rule(p, GEN_C_OPT0 + i, 0, 1, 1);
        }
    }
    rule(p, GEN_C_OPT(flags), 110, 1, 1); /* ATTN_CAUSAL */
    rule(p, GEN_C_OPT(scale), 90, -40, 40);
    p->rule[GEN_C_OPT(scale)].unit = 1.0 / 8.0;
    rule(p, GEN_C_OPT(softcap), 60, 1, 400);
    p->rule[GEN_C_OPT(softcap)].unit = 1.0 / 8.0;
    rule(p, GEN_C_OPT(window), 70, 1, 2);
    p->rule[GEN_C_OPT(window)].kv = 1;
    rule(p, GEN_C_OPT(window_right), 60, 1, 2);
    p->rule[GEN_C_OPT(window_right)].kv = 1;
    rule(p, GEN_C_OPT(q_lens), 64, 1, 1);
    rule(p, GEN_C_OPT(kv_lens), 80, 1, 1);
    rule(p, GEN_C_OPT(q_offsets), 40, 1, 1);
    rule(p, GEN_C_OPT(kv_offsets), 40, 1, 1);
    rule(p, GEN_C_OPT(mask), 90, 1, 1);
    rule(p, GEN_C_OPT(bias), 90, 1, 1);
    rule(p, GEN_C_OPT(sinks), 60, 1, 1);
    rule(p, GEN_C_OPT(alibi_slopes), 60, 1, 1);
    rule(p, GEN_C_OPT(q_pos), 48, 1, 1); /* positions at all (GEN_C_POS_KIND: which) */
    rule(p, GEN_C_OPT(k_pos), 0, 1, 1);
    rule(p, GEN_C_OPT(kv_splits), 0, 0, 0);
    menu(p, GEN_C_ASYM_GROUP, 192, asym_groups, 4);
    menu(p, GEN_C_OPT(k_scale), 64, fp8_scales, 4);
    p->rule[GEN_C_OPT(k_scale)].unit = 1.0 / 16.0;
    menu(p, GEN_C_OPT(v_scale), 64, fp8_scales, 4);
    p->rule[GEN_C_OPT(v_scale)].unit = 1.0 / 16.0;
    rule(p, GEN_C_OPT(workspace), 0, 1, 1);
    /* the modes that round have bounds of their own: drawn only by the
       consumers that check them (tests/ops/test_precision.c) */
    rule(p, GEN_C_OPT(precision), 0, 0, 0);
    /* draft trees: drawn only by the consumers that ask (their chance), with
       a shape of GEN_TREE_* */
    rule(p, GEN_C_OPT(tree_parents), 0, 1, 1);
    rule(p, GEN_C_TREE, 256, GEN_TREE_CHAIN, GEN_TREE_RANDOM);
    /* FP8 scales per key row (1.6): drawn only by the consumers that pin
       them (their references do not apply per-row scales); laid out like
       k (v) with one column, in k's pool when paged.
       tests/ops/test_fp8_scales.c checks the library's use of them */
    rule(p, GEN_C_OPT(k_scales), 0, 1, 1);
    rule(p, GEN_C_OPT(v_scales), 0, 1, 1);
    /* their groups (1.8): one scale per row unless a consumer pins them */
    rule(p, GEN_C_OPT(k_scale_group), 0, 0, 0);
    rule(p, GEN_C_OPT(v_scale_group), 0, 0, 0);
    /* a tail of the key rows (1.9): likewise, drawn only by the consumers
       that pin it (with k_tail_dim); laid out like k with k_tail_dim
       columns. tests/ops/test_fp8_scales.c checks the library's use of it */
    rule(p, GEN_C_OPT(k_tail), 0, 1, 1);
    rule(p, GEN_C_OPT(k_tail_dim), 0, 0, 0);
    /* shared prefixes: likewise, drawn only by the consumers that ask */
    rule(p, GEN_C_OPT(shared_prefix), 0, 1, 1);
    rule(p, GEN_C_SHARED, 256, GEN_SHARED_ALL, GEN_SHARED_RANDOM);
    rule(p, GEN_C_SHARED_KEYS, 0, 0, 0);
    /* top-k lists (1.7): likewise (gen_allow_topk) */
    topk_rules(p);
    /* positions per key slot (1.11), in place of k_pos: every kind */
    rule(p, GEN_C_OPT(k_positions), 40, 1, 1);
    rule(p, GEN_C_KPOS, 256, GEN_KPOS_ORDER, GEN_KPOS_RANDOM);

    p->work_cap = (int64_t)2 << 20;
    /* values: every tensor in [-2, 2), option tensors by their dtype */
    for (int r = 0; r < GEN_ROLE_COUNT; r++)
        p->val[r] = (gen_values){GEN_VAL_UNIFORM, -2.0f, 2.0f, 0, 0, 0, 0, 0, 64};
    p->val[GEN_OPT(bias)] = (gen_values){GEN_VAL_UNIFORM, -3.0f, 3.0f, 0, 0, 0, 16, 0, 0};
    /* sinks: comparable to the scores, now and then dominant or none (-inf) */
    p->val[GEN_OPT(sinks)] = (gen_values){GEN_VAL_UNIFORM, -3.0f, 3.0f, 32, 6.0f, 12.0f, 32, 0, 0};
    /* ALiBi: the usual slopes scaled, now and then steep or negative */
    p->val[GEN_OPT(alibi_slopes)] =
        (gen_values){GEN_VAL_ALIBI, 0.25f, 2.0f, 64, -0.1f, 2.0f, 0, 0, 0};
}

/* ------------------------------------------------------------ drawing */

typedef struct drawer {
    gen_src *src;
    const gen_profile *p;
    int64_t keys; /* keys of the longest sequence, for rules that grow with them */
} drawer;

static int64_t raw(drawer *w, int64_t lo, int64_t hi, int64_t dflt)
{
    if (!w->src->range)
        return dflt;
    return lo >= hi ? lo : w->src->range(w->src->ctx, lo, hi);
}

/* The choice's integer: its pin, its default, or a draw by its rule. */
static int64_t choose(drawer *w, int c, int64_t dflt)
{
    const gen_rule *r = &w->p->rule[c];
    if (w->p->pinned[c])
        return w->p->pin[c];
    if (!w->src->range || r->chance == 0)
        return dflt;
    if (r->chance < 256 && w->src->range(w->src->ctx, 0, 255) >= r->chance)
        return dflt;
    if (r->menu)
        return r->menu[raw(w, 0, (int64_t)r->n_menu - 1, 0)];
    int64_t hi = r->hi + (r->kv ? w->keys : 0);
    if (r->wide && raw(w, 0, 255, 255) < r->wide)
        hi = r->wide_hi;
    return raw(w, r->lo, hi < r->lo ? r->lo : hi, r->lo);
}

static double choose_f(drawer *w, int c, double dflt)
{
    const gen_rule *r = &w->p->rule[c];
    if (w->p->pinned[c])
        return w->p->pin_f[c];
    const int64_t NONE = INT64_MIN;
    const int64_t v = choose(w, c, NONE);
    if (v == NONE)
        return dflt;
    return (double)v * (r->unit != 0.0 ? r->unit : 1.0);
}

static int64_t *batch_array(int64_t batch)
{
    int64_t *a = calloc((size_t)batch, sizeof *a);
    if (!a)
        abort();
    return a;
}

static int64_t clamp(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* The value of a VALUE line (the layout's own lines are set elsewhere). */
static double draw_value(drawer *w, gen_problem *d, int pos)
{
    const int c = GEN_C_OPT0 + pos;
    switch (pos) {
    case POS(flags): return choose(w, c, 0) ? ATTN_CAUSAL : 0u;
    case POS(k_scale):
    case POS(v_scale):
        /* 0 or 1 unless that tensor is FP8 (attn.h) */
        if (dtype_kind(d->dtype[pos == POS(k_scale) ? 1 : 2]) != ATTN_DTYPE_KIND_FP8)
            return 0.0;
        return choose_f(w, c, 0.0);
    case POS(k_scale_group):
    case POS(v_scale_group): {
        /* an ASYM cache's records (their own choice, so sources drawn
           before these dtypes keep their meaning): a group that makes no
           whole records of the row falls back to one record per row */
        const int is_v = pos == POS(v_scale_group);
        const int32_t dt = d->dtype[is_v ? 2 : 1];
        if (dtype_kind(dt) != ATTN_DTYPE_KIND_ASYM)
            return (double)choose(w, c, 0);
        const int64_t g = choose(w, GEN_C_ASYM_GROUP, 0), cols = is_v ? d->dv : d->shape.head_dim;
        return g <= 0 || cols % g || g % gen_dtype_block(dt) ? 0.0 : (double)g;
    }
    default:
        return option_float[pos] ? choose_f(w, c, 0.0) : (double)choose(w, c, 0);
    }
}

static void set_value(void *field, int pos, double v)
{
    /* the field's own type: the list says float or not, attn.h the width */
    if (option_float[pos]) {
        const float f = (float)v;
        memcpy(field, &f, sizeof f);
        return;
    }
    /* integer VALUE fields: uint32 flags, int32 kv_splits, int64 the others */
    if (option_sizes[pos] == 8) {
        const int64_t i = (int64_t)v;
        memcpy(field, &i, 8);
    } else {
        const int32_t i = (int32_t)(int64_t)v;
        memcpy(field, &i, 4);
    }
}

/* Lines whose values the layout decides (the pool) or the materialiser. */
static int layout_value(int pos)
{
    return pos == POS(block_table_stride) || pos == POS(block_size) || pos == POS(num_blocks) ||
           pos == POS(workspace_size) || pos == POS(topk);
}

static int64_t seq_len(drawer *w, int c, int64_t full)
{
    switch (choose(w, c, GEN_SEQ_FULL)) {
    case GEN_SEQ_EMPTY: return 0;
    case GEN_SEQ_RANDOM: return raw(w, 0, full, full);
    default: return full;
    }
}

/* Lengths and offsets of the sequences: present[], ints[] and the extents. */
static void draw_sequences(drawer *w, gen_problem *d, int dense)
{
    const int64_t B = d->shape.batch, Lq = d->q_len, Lk = d->kv_len;
    if (!dense) {
        d->block_size = choose(w, GEN_C_BLOCK_SIZE, 0);
        d->q_packed = (uint8_t)choose(w, GEN_C_Q_PACKED, 0);
        d->kv_packed = d->block_size > 0 ? 0 : (uint8_t)choose(w, GEN_C_KV_PACKED, 0);
    }
    const int spread = choose(w, GEN_C_SPREAD_LENS, 0) != 0;
    d->present[POS(q_lens)] = d->q_packed || spread || choose(w, GEN_C_OPT(q_lens), 0);
    d->present[POS(kv_lens)] = d->kv_packed || spread || choose(w, GEN_C_OPT(kv_lens), 0);
    d->present[POS(q_offsets)] = d->q_packed || (!dense && choose(w, GEN_C_OPT(q_offsets), 0));
    d->present[POS(kv_offsets)] = d->kv_packed || (!dense && choose(w, GEN_C_OPT(kv_offsets), 0));
    int64_t *lq = batch_array(B), *lk = batch_array(B);
    for (int64_t b = 0; b < B; b++) {
        if (spread) {
            /* the CLI's --packed: q_len/20 .. q_len queries, kv_len - q_len more keys */
            const int64_t shortest = Lq / 20 > 1 ? Lq / 20 : 1;
            lq[b] = B > 1 ? shortest + (Lq - shortest) * b / (B - 1) : Lq;
            lk[b] = clamp(lq[b] + (Lk - Lq), 0, Lk);
            continue;
        }
        lq[b] = d->present[POS(q_lens)] ? seq_len(w, GEN_C_SEQ_Q, Lq) : Lq;
        lk[b] = d->present[POS(kv_lens)] ? seq_len(w, GEN_C_SEQ_KV, Lk) : Lk;
    }
    int64_t *off[2] = {NULL, NULL};
    int64_t extent[2] = {Lq, Lk};
    for (int s = 0; s < 2; s++) {
        const int packed = s ? d->kv_packed : d->q_packed;
        const int64_t *len = s ? lk : lq;
        if (!d->present[s ? POS(kv_offsets) : POS(q_offsets)])
            continue;
        off[s] = batch_array(B);
        int64_t rows = 0;
        for (int64_t b = 0; b < B; b++) {
            if (packed) { /* in order, now and then rows nobody owns between */
                rows += choose(w, GEN_C_GAP, 0);
                off[s][b] = rows;
                rows += len[b];
                continue;
            }
            const int64_t room = extent[s] - len[b];
            switch (choose(w, GEN_C_OFFSET, GEN_OFFSET_ZERO)) {
            case GEN_OFFSET_END: off[s][b] = room; break;
            case GEN_OFFSET_RANDOM: off[s][b] = raw(w, 0, room, 0); break;
            default: off[s][b] = 0;
            }
        }
        if (packed)
            extent[s] = rows > 0 ? rows : 1;
    }
    d->ints[POS(q_lens)] = d->present[POS(q_lens)] ? lq : (free(lq), NULL);
    d->ints[POS(kv_lens)] = d->present[POS(kv_lens)] ? lk : (free(lk), NULL);
    d->ints[POS(q_offsets)] = off[0];
    d->ints[POS(kv_offsets)] = off[1];
    d->shape.q_len = extent[0];
    d->shape.kv_len = extent[1];
    if (d->block_size > 0) {
        d->present[POS(block_table)] = 1;
        d->pool = (uint8_t)choose(w, GEN_C_POOL, GEN_POOL_SHUFFLED);
        d->pool_heads_outer = (uint8_t)choose(w, GEN_C_POOL_HEADS_OUTER, 0);
        d->pool_spare = choose(w, GEN_C_POOL_SPARE, 0);
        d->table_pad = d->pool == GEN_POOL_SHARED ? 0 : choose(w, GEN_C_TABLE_PAD, 0);
        const int64_t pages = (d->shape.kv_len + d->block_size - 1) / d->block_size;
        d->opt.block_size = d->block_size;
        d->opt.block_table_stride = d->pool == GEN_POOL_SHARED ? 0 : pages + d->table_pad;
    }
}

/*
 * tree_parents (attn.h): a draft tree over each sequence's queries, a chain
 * (the causal mask), every token off the prefix, or random parents; only
 * where every sequence has no more queries than keys (else the call would
 * be invalid). Entry (b, r) for the query at tensor row r, -1 elsewhere.
 */
static void draw_tree(drawer *w, gen_problem *d)
{
    if (!choose(w, GEN_C_OPT(tree_parents), 0))
        return;
    const int64_t B = d->shape.batch, Lq = d->shape.q_len;
    for (int64_t b = 0; b < B; b++)
        if (gen_seq_q(d, b) > gen_seq_kv(d, b))
            return;
    const int64_t shape = choose(w, GEN_C_TREE, GEN_TREE_RANDOM);
    int64_t *par = batch_array(B * Lq);
    for (int64_t e = 0; e < B * Lq; e++)
        par[e] = -1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < gen_seq_q(d, b); i++)
            par[b * Lq + gen_q_offset(d, b) + i] =
                shape == GEN_TREE_CHAIN ? i - 1 : shape == GEN_TREE_FLAT ? -1 : raw(w, -1, i - 1, -1);
    d->ints[POS(tree_parents)] = par;
    d->present[POS(tree_parents)] = 1;
}

/*
 * shared_prefix (attn.h): sequence b shares P_b keys with sequence b - 1,
 * at most what both have: all of it in one group (GEN_SHARED_ALL, or
 * GEN_C_SHARED_KEYS keys), or random lengths, 0 (a new group) now and then.
 */
static void draw_shared(drawer *w, gen_problem *d)
{
    const int64_t B = d->shape.batch;
    if (!choose(w, GEN_C_OPT(shared_prefix), 0))
        return;
    const int64_t kind = choose(w, GEN_C_SHARED, GEN_SHARED_ALL);
    const int64_t most = choose(w, GEN_C_SHARED_KEYS, 0);
    int64_t *p = batch_array(B);
    for (int64_t b = 1; b < B; b++) {
        const int64_t kb = gen_seq_kv(d, b), kp = gen_seq_kv(d, b - 1);
        int64_t room = kb < kp ? kb : kp;
        if (kind == GEN_SHARED_ALL)
            p[b] = most > 0 && most < room ? most : room;
        else
            p[b] = raw(w, 0, 3, 0) ? raw(w, 0, room, room) : 0;
    }
    d->ints[POS(shared_prefix)] = p;
    d->present[POS(shared_prefix)] = 1;
}

/*
 * topk_indices (attn.h, "Top-k sparse attention"): GEN_C_OPT(topk) entries
 * per query row, random keys of its sequence (repeats included), now and
 * then -1; with GEN_C_TOPK_SHARED most of a row's entries repeat the row
 * before's (an indexer's selections drift slowly along a sequence, and the
 * forward gathers a block's union once). Rows no query owns hold -1.
 */
static void draw_topk(drawer *w, gen_problem *d)
{
    if (!choose(w, GEN_C_OPT(topk_indices), 0))
        return;
    const int64_t B = d->shape.batch, Lq = d->shape.q_len;
    const int64_t k = clamp(choose(w, GEN_C_OPT(topk), 1), 1, INT32_MAX);
    const int shared = choose(w, GEN_C_TOPK_SHARED, 0) != 0;
    const int distinct = choose(w, GEN_C_TOPK_DISTINCT, 0) != 0;
    int64_t *list = batch_array(B * Lq * k);
    for (int64_t e = 0; e < B * Lq * k; e++)
        list[e] = -1;
    for (int64_t b = 0; b < B; b++) {
        const int64_t lk = gen_seq_kv(d, b), r0 = b * Lq + gen_q_offset(d, b);
        if (distinct) { /* an indexer's top-k: min(k, lk) different keys */
            uint8_t *seen = calloc((size_t)(lk > 0 ? lk : 1), 1);
            if (!seen)
                abort();
            for (int64_t i = 0; i < gen_seq_q(d, b); i++) {
                int64_t *row = &list[(r0 + i) * k], n = 0;
                const int64_t want = k < lk ? k : lk;
                for (int64_t t = 0; shared && i > 0 && t < want; t++) /* keep 4 in 5 */
                    if (row[t - k] >= 0 && raw(w, 0, 4, 1) != 0)
                        seen[row[t - k]] = 1, row[n++] = row[t - k];
                while (n < want) {
                    const int64_t j = raw(w, 0, lk - 1, n);
                    if (!seen[j])
                        seen[j] = 1, row[n++] = j;
                    else if (!w->src->range) /* a fixed source: the first free key */
                        for (int64_t x = 0; x < lk && n < want; x++)
                            if (!seen[x])
                                seen[x] = 1, row[n++] = x;
                }
                for (int64_t t = 0; t < n; t++)
                    seen[row[t]] = 0;
            }
            free(seen);
            continue;
        }
        for (int64_t i = 0; i < gen_seq_q(d, b); i++)
            for (int64_t t = 0; t < k; t++) {
                int64_t *e = &list[(r0 + i) * k + t];
                if (lk == 0 || raw(w, 0, 7, 1) == 0)
                    *e = -1;
                else if (shared && i > 0 && raw(w, 0, 4, 1) != 0)
                    *e = e[-k];
                else
                    *e = raw(w, 0, lk - 1, 0);
            }
    }
    d->ints[POS(topk_indices)] = list;
    d->present[POS(topk_indices)] = 1;
    d->opt.topk = k;
}

/* q_pos/k_pos: shards a few positions off the bottom-right alignment. */
static void draw_positions(drawer *w, gen_problem *d)
{
    if (!choose(w, GEN_C_OPT(q_pos), 0))
        return;
    const int64_t B = d->shape.batch;
    const int64_t kind = choose(w, GEN_C_POS_KIND, 0); /* 0 both, 1 q_pos only, 2 k_pos only */
    const int64_t base = choose(w, GEN_C_POS_BASE, 0) ? (int64_t)1 << 40 : 0;
    int64_t *qp = kind == 2 ? NULL : batch_array(B), *kp = kind == 1 ? NULL : batch_array(B);
    for (int64_t b = 0; b < B; b++) {
        const int64_t k0 = kind == 1 ? 0 : base + choose(w, GEN_C_POS_K, 0);
        if (kp)
            kp[b] = k0;
        if (qp) {
            const int64_t q0 = k0 + gen_seq_kv(d, b) - gen_seq_q(d, b) +
                               choose(w, GEN_C_POS_DELTA, 0);
            qp[b] = q0 < 0 ? 0 : q0;
        }
    }
    d->ints[POS(q_pos)] = qp;
    d->ints[POS(k_pos)] = kp;
    d->present[POS(q_pos)] = qp != NULL;
    d->present[POS(k_pos)] = kp != NULL;
}

/*
 * k_positions (attn.h, "Positions per key slot"): the position of each
 * slot of each sequence's keys, from the sequence's k_pos beside q_pos
 * (k_pos is then dropped: the two do not go together) or 0, laid out
 * [batch][kv_len] by the slots of the key extent. Slots outside every
 * sequence hold values a read would trip over (above 2^62, or far off).
 */
static void draw_slot_positions(drawer *w, gen_problem *d)
{
    /* presence as 255 - byte < chance: an input whose bytes ran out (zeros)
       draws none, so the fuzz corpora written before keep their problems */
    const unsigned chance = w->p->rule[GEN_C_OPT(k_positions)].chance;
    const int given = w->p->pinned[GEN_C_OPT(k_positions)]
                          ? w->p->pin[GEN_C_OPT(k_positions)] != 0
                          : chance > 0 && w->src->range && 255 - raw(w, 0, 255, 0) < chance;
    if (!given)
        return;
    const int64_t B = d->shape.batch, Lk = d->shape.kv_len;
    const int64_t kind = choose(w, GEN_C_KPOS, GEN_KPOS_SHUFFLED);
    static const int64_t garbage[] = {INT64_MAX, INT64_MIN, ((int64_t)1 << 62) + 1, -1};
    int64_t *pos = batch_array(B * (Lk > 0 ? Lk : 1));
    for (int64_t e = 0; e < B * Lk; e++)
        pos[e] = garbage[e % 4];
    for (int64_t b = 0; b < B; b++) {
        const int64_t lk = gen_seq_kv(d, b);
        /* from k_pos only beside q_pos: the default query positions are
           Lk_b - Lq_b + i, where k_positions puts no offset */
        const int64_t k0 = d->ints[POS(k_pos)] && d->ints[POS(q_pos)] ? d->ints[POS(k_pos)][b] : 0;
        int64_t *row = pos + b * Lk + gen_kv_offset(d, b);
        for (int64_t j = 0; j < lk; j++)
            row[j] = kind == GEN_KPOS_RANDOM ? (raw(w, 0, 7, 1) ? k0 + raw(w, 0, lk + 2, j) : -1)
                                             : k0 + j;
        if (kind == GEN_KPOS_SHUFFLED || kind == GEN_KPOS_HOLES)
            for (int64_t j = lk - 1; j > 0; j--) { /* Fisher-Yates */
                const int64_t r = raw(w, 0, j, j), x = row[j];
                row[j] = row[r];
                row[r] = x;
            }
        for (int64_t j = 0; kind == GEN_KPOS_HOLES && j < lk; j++)
            if (raw(w, 0, 5, 1) == 0)
                row[j] = -1;
    }
    free(d->ints[POS(k_pos)]);
    d->ints[POS(k_pos)] = NULL;
    d->present[POS(k_pos)] = 0;
    d->ints[POS(k_positions)] = pos;
    d->present[POS(k_positions)] = 1;
}

static void draw_tlayout(drawer *w, gen_problem *d, int role, int broadcast_choice,
                         int rows_outer)
{
    gen_tlayout *t = &d->tl[role];
    t->rows_outer = (uint8_t)(rows_outer || choose(w, GEN_C_ROWS_OUTER, 0));
    t->pad = choose(w, GEN_C_ROW_PAD, 0);
    t->misalign = (uint8_t)choose(w, GEN_C_MISALIGN, 0);
    t->broadcast = broadcast_choice >= 0 ? (uint8_t)(choose(w, broadcast_choice, 0) & 7) : 0;
}

int gen_draw(gen_problem *d, gen_src *src, const gen_profile *p)
{
    drawer w = {src, p, 0};
    memset(d, 0, sizeof *d);
    const attn_options init = ATTN_OPTIONS_INIT;
    d->opt = init;
    const int dense = (p->flags & GEN_P_DENSE) != 0;

    /* shape */
    attn_shape *s = &d->shape;
    s->batch = choose(&w, GEN_C_BATCH, 1);
    s->kv_heads = choose(&w, GEN_C_KV_HEADS, 1);
    s->q_heads = s->kv_heads * choose(&w, GEN_C_GROUP, 1);
    d->dtype[0] = (int32_t)choose(&w, GEN_C_Q_DTYPE, ATTN_DTYPE_F32);
    d->dtype[1] = (int32_t)choose(&w, GEN_C_K_DTYPE, ATTN_DTYPE_F32);
    d->dtype[2] = (int32_t)choose(&w, GEN_C_V_DTYPE, d->dtype[1]);
    int64_t lq = 1, lk = 1;
    for (int tries = 0; tries < 16; tries++) {
        lk = choose(&w, GEN_C_KV_LEN, 1);
        w.keys = lk;
        lq = choose(&w, GEN_C_Q_LEN, 1);
        if ((!(p->flags & GEN_P_Q_SHORTER) || lq < lk) && (!(p->flags & GEN_P_Q_LONGER) || lq > lk))
            break;
    }
    if ((p->flags & GEN_P_Q_SHORTER) && lq >= lk) /* the source ran dry: any valid pair */
        lq = lk > 1 ? lk - 1 : 1, lk = lq + 1;
    if ((p->flags & GEN_P_Q_LONGER) && lq <= lk)
        lk = lq > 1 ? lq - 1 : 1, lq = lk + 1;
    int64_t hd = choose(&w, GEN_C_HEAD_DIM, 64), vd = choose(&w, GEN_C_V_DIM, 0);
    /* the block formats store whole blocks of 32 values per row */
    const int64_t kb = gen_dtype_block(d->dtype[1]), vb = gen_dtype_block(d->dtype[2]);
    if (kb > 1 || (vb > 1 && vd == 0))
        hd = (hd + 31) / 32 * 32;
    if (vb > 1 && vd != 0)
        vd = (vd + 31) / 32 * 32;
    s->head_dim = hd;
    s->v_dim = vd == hd ? 0 : vd;
    d->dv = vd ? vd : hd;
    for (;;) {
        const double work = (double)s->batch * (double)s->q_heads * (double)lq * (double)lk *
                            (double)(hd + d->dv);
        if (p->work_cap <= 0 || work <= (double)p->work_cap)
            break;
        if (!p->shrink || lq == 1) {
            if (!p->shrink)
                return 0;
            break;
        }
        /* keep each problem small: the float64 reference is naive */
        lq = (lq + 1) / 2;
        if (lk > 17)
            lk = (lk + 1) / 2;
    }
    d->q_len = lq;
    d->kv_len = lk;
    w.keys = lk;

    /* layout, lengths, positions */
    draw_sequences(&w, d, dense);
    const int paged = d->block_size > 0;
    /* packed: [T][H][D] tensors with batch_stride 0 (attn.h, "Offset and packed batches") */
    draw_tlayout(&w, d, GEN_Q, d->q_packed ? -1 : GEN_C_BROADCAST_QKV, d->q_packed);
    draw_tlayout(&w, d, GEN_K, d->kv_packed || paged ? -1 : GEN_C_BROADCAST_QKV, d->kv_packed);
    draw_tlayout(&w, d, GEN_V, d->kv_packed || paged ? -1 : GEN_C_BROADCAST_QKV, d->kv_packed);
    draw_tlayout(&w, d, GEN_OUT, -1, d->q_packed);
    draw_tlayout(&w, d, GEN_SCORES, -1, 0);
    const int q_side[] = {GEN_Q, GEN_OUT, GEN_SCORES}, kv_side[] = {GEN_K, GEN_V};
    for (int i = 0; i < 3 && d->q_packed; i++)
        d->tl[q_side[i]].broadcast = 1;
    for (int i = 0; i < 2 && d->kv_packed; i++)
        d->tl[kv_side[i]].broadcast = 1;

    /* options, by their lines: values, then the tensors */
    for (int pos = 0; pos < ATTN_OPTION_COUNT; pos++) {
        void *field = (char *)&d->opt + option_offsets[pos];
        const int role = GEN_OPT0 + pos;
        switch (option_kinds[pos]) {
        case ATTN_OPT_KIND_VALUE:
            if (!layout_value(pos))
                set_value(field, pos, draw_value(&w, d, pos));
            break;
        case ATTN_OPT_KIND_TENSOR:
            d->present[pos] = (uint8_t)(choose(&w, GEN_C_OPT0 + pos, 0) != 0);
            if (d->present[pos]) {
                const int scores = option_extents[pos] == ATTN_OPT_EXTENT_SCORES;
                draw_tlayout(&w, d, role, GEN_C_BROADCAST_OPT, 0);
                if (scores && d->q_packed) /* one row space: every sequence's rows */
                    d->tl[role].broadcast |= 1;
                if (!scores) /* a [B][H][1][1] view: rows do not matter */
                    d->tl[role].rows_outer = 0;
            }
            break;
        case ATTN_OPT_KIND_SCRATCH:
            d->present[pos] = (uint8_t)(choose(&w, GEN_C_OPT0 + pos, 0) != 0);
            break;
        default: /* lengths, offsets, the table: draw_sequences; positions below */
            break;
        }
    }
    draw_positions(&w, d);
    if (d->pool == GEN_POOL_SHARED && paged) /* stride 0: asked for (attn.h) */
        d->opt.flags |= ATTN_SHARED_BLOCK_TABLE;

    /* values */
    memcpy(d->val, p->val, sizeof d->val);
    const int spread = (int)choose(&w, GEN_C_SPREAD, GEN_SPREAD_TAME);
    const int specials = spread == GEN_SPREAD_SPECIAL ? (int)choose(&w, GEN_C_SPECIALS, 50) : 0;
    const int scored[] = {GEN_Q, GEN_K, GEN_OPT(bias)};
    for (size_t i = 0; i < sizeof scored / sizeof scored[0]; i++) {
        gen_values *v = &d->val[scored[i]];
        if (spread == GEN_SPREAD_FLAT)
            v->lo = -0.05f, v->hi = 0.05f; /* flat rows */
        if (spread == GEN_SPREAD_PEAKED)
            v->lo = -12.0f, v->hi = 12.0f; /* peaked rows, exp underflow */
    }
    if (specials) { /* NaN, inf, -0, subnormals reach scores; v stays finite (gen.h) */
        d->val[GEN_Q].special = d->val[GEN_K].special = (uint16_t)specials;
        d->val[GEN_OPT(bias)].special = d->val[GEN_OPT(sinks)].special = (uint16_t)specials;
    }
    /* attn_quantize stores no non-finite Q8_0/Q4_0 value */
    for (int t = 1; t < 3; t++)
        if (dtype_kind(d->dtype[t]) != ATTN_DTYPE_KIND_FLOAT)
            d->val[t].special = 0;
    /* last: a source that never draws a tree reads no byte for it, so the
       fuzz corpora written before the line keep their meaning */
    draw_tree(&w, d);
    draw_shared(&w, d);
    draw_topk(&w, d);
    draw_slot_positions(&w, d);
    return 1;
}

void gen_free(gen_problem *d)
{
    for (int i = 0; i < ATTN_OPTION_COUNT; i++) {
        free(d->ints[i]);
        d->ints[i] = NULL;
    }
}

int64_t gen_seq_q(const gen_problem *d, int64_t b)
{
    return d->ints[POS(q_lens)] ? d->ints[POS(q_lens)][b] : d->shape.q_len;
}

int64_t gen_seq_kv(const gen_problem *d, int64_t b)
{
    return d->ints[POS(kv_lens)] ? d->ints[POS(kv_lens)][b] : d->shape.kv_len;
}

int64_t gen_q_offset(const gen_problem *d, int64_t b)
{
    return d->ints[POS(q_offsets)] ? d->ints[POS(q_offsets)][b] : 0;
}

int64_t gen_kv_offset(const gen_problem *d, int64_t b)
{
    return d->ints[POS(kv_offsets)] ? d->ints[POS(kv_offsets)][b] : 0;
}

void gen_row_keys(const gen_problem *d, int64_t b, int64_t i, int64_t *lo, int64_t *hi)
{
    const int64_t lq = gen_seq_q(d, b), lk = gen_seq_kv(d, b);
    *lo = *hi = 0;
    if (i >= lq || lk <= 0)
        return;
    if (d->ints[POS(k_positions)]) { /* no interval: all, masked key by key */
        *hi = lk;
        return;
    }
    /* a: the query's position in the sequence's key indices (attn.h, "Masks") */
    const int64_t K = d->ints[POS(k_pos)] ? d->ints[POS(k_pos)][b] : 0;
    const int64_t Q = d->ints[POS(q_pos)] ? d->ints[POS(q_pos)][b] : K + lk - lq;
    const int64_t a = Q - K + i, W = d->opt.window, R = d->opt.window_right;
    int64_t l = 0, h = lk;
    if ((d->opt.flags & ATTN_CAUSAL) && a + 1 < h)
        h = a + 1;
    if (W > 0 && W - 1 <= a) /* else a - W + 1 < 0 hides nothing */
        l = a - W + 1;
    if (R > 0 && R < lk - a) /* else a + R >= lk hides nothing */
        h = a + R < h ? a + R : h;
    if (h < 0)
        h = 0;
    *lo = l < h ? l : h;
    *hi = h;
}

const char *gen_describe(const gen_problem *d, char *buf, size_t size)
{
    const attn_shape *s = &d->shape;
    size_t at = 0;
#define PUT(...)                                                          \
    do {                                                                  \
        const int n_ = snprintf(buf + at, at < size ? size - at : 0, __VA_ARGS__); \
        at += n_ > 0 ? (size_t)n_ : 0;                                    \
    } while (0)
    PUT("B=%lld Hq=%lld Hkv=%lld q_len=%lld kv_len=%lld (longest %lld/%lld) d=%lld dv=%lld "
        "q/k/v=%s/%s/%s", (long long)s->batch, (long long)s->q_heads, (long long)s->kv_heads,
        (long long)s->q_len, (long long)s->kv_len, (long long)d->q_len, (long long)d->kv_len,
        (long long)s->head_dim, (long long)d->dv, gen_dtype_name(d->dtype[0]),
        gen_dtype_name(d->dtype[1]), gen_dtype_name(d->dtype[2]));
    if (d->q_packed || d->kv_packed)
        PUT(" packed=%s%s", d->q_packed ? "q" : "", d->kv_packed ? "kv" : "");
    if (d->block_size)
        PUT(" paged(bs=%lld pool=%d heads_outer=%d spare=%lld pad=%lld)",
            (long long)d->block_size, d->pool, d->pool_heads_outer, (long long)d->pool_spare,
            (long long)d->table_pad);
    PUT(" layouts");
    for (int r = GEN_Q; r <= GEN_SCORES; r++)
        PUT("%s%d%d%d/%lld", r == GEN_Q ? "=" : ",", d->tl[r].rows_outer, d->tl[r].broadcast,
            d->tl[r].misalign, (long long)d->tl[r].pad);
    /* every option of the list that differs from ATTN_OPTIONS_INIT, or is given */
    const attn_options init = ATTN_OPTIONS_INIT;
    for (int pos = 0; pos < ATTN_OPTION_COUNT; pos++) {
        const void *f = (const char *)&d->opt + option_offsets[pos];
        const void *f0 = (const char *)&init + option_offsets[pos];
        if (option_kinds[pos] == ATTN_OPT_KIND_VALUE) {
            float x;
            int64_t i = 0;
            int32_t i32;
            if (option_float[pos]) {
                memcpy(&x, f, 4);
                if (memcmp(f, f0, 4))
                    PUT(" %s=%g", option_names[pos], (double)x);
                continue;
            }
            if (option_sizes[pos] == 8) {
                memcpy(&i, f, 8);
                if (memcmp(f, f0, 8))
                    PUT(" %s=%lld", option_names[pos], (long long)i);
            } else {
                memcpy(&i32, f, 4);
                if (memcmp(f, f0, 4))
                    PUT(" %s=%d", option_names[pos], i32);
            }
        } else if (d->present[pos]) {
            PUT(" %s", option_names[pos]);
            if (d->ints[pos]) {
                for (int64_t b = 0; b < s->batch && b < 8; b++)
                    PUT("%s%lld", b ? "," : "=", (long long)d->ints[pos][b]);
            } else if (option_kinds[pos] == ATTN_OPT_KIND_TENSOR) {
                const gen_tlayout *t = &d->tl[GEN_OPT0 + pos];
                PUT("(%d%d%d/%lld)", t->rows_outer, t->broadcast, t->misalign, (long long)t->pad);
            }
        }
    }
#undef PUT
    return buf;
}

/* ------------------------------------------------------------ materialising */

static void *heap_alloc(void *ctx, int role, size_t bytes, size_t elem, int misalign)
{
    (void)ctx, (void)role;
    /* the block's start is kept just before the aligned data */
    const size_t lead = misalign ? elem : 0;
    unsigned char *base = malloc(bytes + lead + 128);
    if (!base)
        return NULL;
    uintptr_t at = ((uintptr_t)base + sizeof(void *) + 63) & ~(uintptr_t)63;
    memcpy((void *)(at - sizeof(void *)), &base, sizeof base);
    return (unsigned char *)at + lead;
}

static void heap_release(void *ctx, int role, void *data, size_t bytes)
{
    (void)ctx, (void)role, (void)bytes;
    /* data is less than 64 bytes past the aligned address; the base is before it */
    uintptr_t at = (uintptr_t)data & ~(uintptr_t)63;
    void *base;
    memcpy(&base, (void *)(at - sizeof(void *)), sizeof base);
    free(base);
}

static void *get(gen_bufs *m, int role, size_t bytes, size_t elem, int misalign)
{
    if (bytes == 0)
        bytes = 1;
    void *p = m->alloc.alloc(m->alloc.ctx, role, bytes, elem, misalign);
    m->data[role] = p;
    m->bytes[role] = p ? bytes : 0;
    return p;
}

void *gen_at(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c)
{
    return (char *)t->data + (size_t)(b * t->batch_stride + h * t->head_stride +
                                      r * t->row_stride + c) *
                                 gen_dtype_bytes(t->dtype);
}

/* A dense [nb][nh][nl][cols] tensor in the layout tl (strides in units;
   group: an ASYM tensor's records). */
static int dense_tensor(gen_bufs *m, int role, int32_t dtype, int64_t nb, int64_t nh,
                        int64_t nl, int64_t cols, int64_t group, const gen_tlayout *tl)
{
    attn_tensor *t = &m->t[role];
    const int64_t units = gen_row_units(dtype, cols, group), c = units + tl->pad;
    t->dtype = dtype;
    if (tl->rows_outer) {
        t->head_stride = c;
        t->row_stride = nh * c;
        t->batch_stride = nl * nh * c;
    } else {
        t->row_stride = c;
        t->head_stride = nl * c + tl->pad;
        t->batch_stride = nh * t->head_stride;
    }
    if (tl->broadcast & 1)
        t->batch_stride = 0;
    if (tl->broadcast & 2)
        t->head_stride = 0;
    if (tl->broadcast & 4)
        t->row_stride = 0;
    const int64_t span = (nb - 1) * t->batch_stride + (nh - 1) * t->head_stride +
                         (nl - 1) * t->row_stride + units;
    t->data = get(m, role, (size_t)span * gen_dtype_bytes(dtype), gen_dtype_bytes(dtype),
                  tl->misalign);
    return t->data ? 0 : -1;
}

/* One row of `cols` values of v's distribution, stored as dtype. */
static int fill_row(void *dst, int32_t dtype, int64_t cols, int64_t group, const gen_values *v,
                    uint64_t *st, int64_t h, int64_t heads, float scale, float *row)
{
    if (dtype_kind(dtype) == ATTN_DTYPE_KIND_BOOL) {
        for (int64_t c = 0; c < cols; c++) {
            const uint64_t x = gen_splitmix(st);
            ((uint8_t *)dst)[c] = (x & 255) < v->hidden ? 0 : (uint8_t)(1 + (x >> 8) % 255);
        }
        return 0;
    }
    for (int64_t c = 0; c < cols; c++)
        row[c] = draw_float(v, st, h, heads);
    if (dtype_kind(dtype) == ATTN_DTYPE_KIND_FLOAT) {
        for (int64_t c = 0; c < cols; c++)
            gen_store((char *)dst + (size_t)c * gen_dtype_bytes(dtype), dtype, row[c]);
        return 0;
    }
    /* quantized by the library, as a cache would be: an ASYM row one call
       per record (attn.h, attn_quantize) */
    if (dtype_kind(dtype) == ATTN_DTYPE_KIND_ASYM) {
        const int64_t g = gen_kv_group(dtype, group, cols), rec = gen_row_units(dtype, g, g);
        for (int64_t c = 0; c < cols / g; c++)
            if (attn_quantize(dtype, row + c * g, 1, g, g, (char *)dst + c * rec, rec, 0.0f) !=
                ATTN_OK)
                return -1;
        return 0;
    }
    const int64_t units = cols / gen_dtype_block(dtype);
    return attn_quantize(dtype, row, 1, cols, cols, dst, units,
                         dtype_kind(dtype) == ATTN_DTYPE_KIND_FP8 ? scale : 0.0f) == ATTN_OK
               ? 0
               : -1;
}

void gen_fill(void *dst, int32_t dtype, int64_t n, const gen_values *v, uint64_t *stream)
{
    for (int64_t i = 0; i < n; i++)
        gen_store((char *)dst + (size_t)i * gen_dtype_bytes(dtype), dtype,
                  draw_float(v, stream, 0, 1));
}

static uint64_t stream_of(uint64_t seed, int role)
{
    return seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(role + 1));
}

/*
 * The keys of each sequence's own storage that some query reads, [lo, hi)
 * at [2b], [2b + 1] (lo >= hi: none): those its queries see, less a shared
 * prefix, plus those of later sequences that share them (attn.h, "Shared
 * prefixes"; the hull, so a few more may be listed). NULL when out of memory.
 */
static int64_t *seen_keys(const gen_problem *d)
{
    const int64_t B = d->shape.batch;
    const int64_t *shared = d->ints[POS(shared_prefix)];
    int64_t *k = malloc((size_t)(2 * B) * sizeof *k);
    if (!k)
        return NULL;
    for (int64_t b = 0; b < B; b++) {
        int64_t lo = INT64_MAX, hi = 0;
        for (int64_t i = 0; i < gen_seq_q(d, b); i++) {
            int64_t l, h;
            gen_row_keys(d, b, i, &l, &h);
            if (l < h) {
                lo = l < lo ? l : lo;
                hi = h > hi ? h : hi;
            }
        }
        k[2 * b] = lo;
        k[2 * b + 1] = hi;
    }
    for (int64_t b = B - 1; shared && b > 0; b--) {
        int64_t *lo = &k[2 * b], *hi = &k[2 * b + 1];
        if (*lo >= *hi || *lo >= shared[b])
            continue;
        const int64_t top = *hi < shared[b] ? *hi : shared[b];
        k[2 * b - 2] = *lo < k[2 * b - 2] ? *lo : k[2 * b - 2];
        k[2 * b - 1] = top > k[2 * b - 1] ? top : k[2 * b - 1];
        *lo = shared[b];
    }
    return k;
}

/* The block table and the pool (K and V tensors). */
static int make_pool(gen_bufs *m, const gen_problem *d, uint64_t seed, unsigned flags)
{
    const int64_t B = d->shape.batch, bs = d->block_size;
    const int64_t pages = (d->shape.kv_len + bs - 1) / bs;
    const int shared = d->pool == GEN_POOL_SHARED;
    const int64_t stride = d->opt.block_table_stride, rows = shared ? 1 : B;
    const int64_t entries = (rows - 1) * stride + pages;
    uint64_t st = stream_of(seed, GEN_OPT(block_table));
    int32_t *table = get(m, GEN_OPT(block_table), (size_t)entries * 4, 4, 0);
    uint8_t *need = calloc((size_t)entries, 1);
    if (!table || !need) {
        free(need);
        return -1;
    }
    static const int32_t garbage[] = {-1, INT32_MIN, INT32_MAX, 1 << 30};
    for (int64_t e = 0; e < entries; e++)
        table[e] = garbage[gen_splitmix(&st) % 4];
    int64_t used = 0;
    int64_t *seen = NULL;
    if ((flags & GEN_M_GARBAGE) && !(seen = seen_keys(d))) {
        free(need);
        return -1;
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t p0 = 0, p1 = pages;
        if (seen && seen[2 * b] < seen[2 * b + 1]) {
            const int64_t ko = gen_kv_offset(d, b);
            p0 = (ko + seen[2 * b]) / bs;
            p1 = (ko + seen[2 * b + 1] - 1) / bs + 1;
        } else if (seen) {
            p0 = p1 = 0;
        }
        for (int64_t pg = p0; pg < p1; pg++) {
            const int64_t e = (shared ? 0 : b * stride) + pg;
            used += !need[e];
            need[e] = 1;
        }
    }
    const int64_t nblocks = used + d->pool_spare > 0 ? used + d->pool_spare : 1;
    int32_t *order = malloc((size_t)nblocks * 4);
    if (!order) {
        free(need);
        return -1;
    }
    for (int64_t i = 0; i < nblocks; i++)
        order[i] = (int32_t)i;
    if (d->pool != GEN_POOL_ADJOIN)
        for (int64_t i = nblocks - 1; i > 0; i--) { /* Fisher-Yates */
            const int64_t r = (int64_t)(gen_splitmix(&st) % (uint64_t)(i + 1));
            const int32_t x = order[i];
            order[i] = order[r];
            order[r] = x;
        }
    free(seen);
    int64_t next = 0, gaps = nblocks - used;
    for (int64_t e = 0; e < entries; e++) {
        if (!need[e])
            continue;
        if (d->pool == GEN_POOL_RANDOM) {
            table[e] = (int32_t)(gen_splitmix(&st) % (uint64_t)nblocks);
            continue;
        }
        if (d->pool == GEN_POOL_ADJOIN && gaps > 0 && gen_splitmix(&st) % 4 == 0)
            next++, gaps--; /* a gap: a run of pages must break here */
        table[e] = order[next++];
    }
    free(order);
    free(need);
    m->table = table;
    m->opt.block_table = table;
    m->opt.num_blocks = nblocks;

    const int64_t kvh = d->shape.kv_heads;
    for (int r = GEN_K; r <= GEN_V; r++) {
        if (r == GEN_V && (flags & GEN_M_NO_V))
            break;
        const int32_t dt = d->dtype[r];
        const int64_t units = gen_row_units(dt, r == GEN_K ? d->shape.head_dim : d->dv,
                                            r == GEN_K ? d->opt.k_scale_group
                                                       : d->opt.v_scale_group);
        attn_tensor *t = &m->t[r];
        t->dtype = dt;
        t->batch_stride = bs * kvh * units;
        t->head_stride = d->pool_heads_outer ? bs * units : units;
        t->row_stride = d->pool_heads_outer ? units : kvh * units;
        t->data = get(m, r, (size_t)(nblocks * bs * kvh * units) * gen_dtype_bytes(dt),
                      gen_dtype_bytes(dt), d->tl[r].misalign);
        if (!t->data)
            return -1;
    }
    return 0;
}

/* An array option's values as the option's integer type: [batch] entries,
   [batch][q_len] for a QROWS line, [batch][kv_len] for KSLOTS,
   [batch][q_len][topk] for TOPK. */
static int make_array(gen_bufs *m, const gen_problem *d, int pos)
{
    const attn_opt_extent e = option_extents[pos];
    const int64_t B = d->shape.batch * (e == ATTN_OPT_EXTENT_QROWS    ? d->shape.q_len
                                        : e == ATTN_OPT_EXTENT_KSLOTS ? d->shape.kv_len
                                        : e == ATTN_OPT_EXTENT_TOPK ? d->shape.q_len * d->opt.topk
                                                                    : 1);
    const int is64 = option_kinds[pos] == ATTN_OPT_KIND_I64;
    void *a = get(m, GEN_OPT0 + pos, (size_t)B * (is64 ? 8 : 4), is64 ? 8 : 4, 0);
    if (!a)
        return -1;
    for (int64_t b = 0; b < B; b++) {
        if (is64) {
            memcpy((char *)a + b * 8, &d->ints[pos][b], 8);
        } else {
            const int32_t x = (int32_t)d->ints[pos][b];
            memcpy((char *)a + b * 4, &x, 4);
        }
    }
    memcpy((char *)&m->opt + option_offsets[pos], &a, sizeof a);
    return 0;
}

/* Values of every element of t's [nb][nh][nl][cols] view (collapsing
   broadcast dimensions), or with poison of the rows of the sequences only. */
static int fill_all(const attn_tensor *t, int64_t nb, int64_t nh, int64_t nl, int64_t cols,
                    int64_t group, const gen_values *v, uint64_t *st, int64_t heads, float scale,
                    float *row)
{
    const int64_t eb = t->batch_stride ? nb : 1, eh = t->head_stride ? nh : 1,
                  el = t->row_stride ? nl : 1;
    for (int64_t b = 0; b < eb; b++)
        for (int64_t h = 0; h < eh; h++)
            for (int64_t r = 0; r < el; r++)
                if (fill_row(gen_at(t, b, h, r, 0), t->dtype, cols, group, v, st, h, heads, scale,
                             row))
                    return -1;
    return 0;
}

int gen_materialise(gen_bufs *m, const gen_problem *d, uint64_t seed, unsigned flags,
                    const gen_allocator *a)
{
    memset(m, 0, sizeof *m);
    m->alloc = a ? *a : (gen_allocator){heap_alloc, heap_release, NULL};
    m->shape = d->shape;
    m->opt = d->opt;
    const attn_shape *s = &d->shape;
    const int64_t B = s->batch, Hq = s->q_heads, Hkv = s->kv_heads, Lq = s->q_len,
                  Lk = s->kv_len, hd = s->head_dim, dv = d->dv;
    const int64_t qb = d->q_packed ? 1 : B, kb = d->kv_packed ? 1 : B;
    const int poison = (flags & GEN_M_POISON) != 0;
    int64_t widest = hd > dv ? hd : dv;
    if (Lk > widest)
        widest = Lk;
    float *row = malloc((size_t)widest * sizeof(float));
    if (!row)
        return -1;
    int rc = 0;

    /* arrays: lengths, offsets, positions (the options' I32/I64 lines) */
    for (int pos = 0; pos < ATTN_OPTION_COUNT && !rc; pos++)
        if (d->ints[pos] && (option_kinds[pos] == ATTN_OPT_KIND_I32 ||
                             option_kinds[pos] == ATTN_OPT_KIND_I64))
            rc = make_array(m, d, pos);

    /* q, k, v */
    if (!rc)
        rc = dense_tensor(m, GEN_Q, d->dtype[0], qb, Hq, Lq, hd, 0, &d->tl[GEN_Q]);
    if (!rc && d->block_size > 0) {
        rc = make_pool(m, d, seed, flags);
    } else if (!rc) {
        rc = dense_tensor(m, GEN_K, d->dtype[1], kb, Hkv, Lk, hd, d->opt.k_scale_group,
                          &d->tl[GEN_K]);
        if (!rc && !(flags & GEN_M_NO_V))
            rc = dense_tensor(m, GEN_V, d->dtype[2], kb, Hkv, Lk, dv, d->opt.v_scale_group,
                              &d->tl[GEN_V]);
    }
    for (int r = GEN_Q; r <= GEN_V && !rc; r++) {
        if (!m->data[r])
            continue;
        const gen_values *v = &d->val[r];
        uint64_t st = stream_of(seed, r);
        const int64_t cols = r == GEN_V ? dv : hd, heads = r == GEN_Q ? Hq : Hkv;
        const float scale = r == GEN_K ? d->opt.k_scale : r == GEN_V ? d->opt.v_scale : 0.0f;
        const int64_t group = r == GEN_K ? d->opt.k_scale_group : r == GEN_V ? d->opt.v_scale_group : 0;
        /* every byte written, so a seed gives the same bytes: NaN (every
           dtype's all-ones bytes are a NaN) between rows, and with poison
           everywhere but the rows of the sequences (nothing else may be read) */
        memset(m->data[r], 0xff, m->bytes[r]);
        if (!poison) {
            if (r != GEN_Q && m->table) { /* every slot of every block */
                for (int64_t blk = 0; blk < m->opt.num_blocks && !rc; blk++)
                    for (int64_t h = 0; h < heads && !rc; h++)
                        for (int64_t j = 0; j < d->block_size && !rc; j++)
                            rc = fill_row(gen_at(&m->t[r], blk, h, j, 0), m->t[r].dtype, cols,
                                          group, v, &st, h, heads, scale, row);
            } else {
                rc = fill_all(&m->t[r], r == GEN_Q ? qb : kb, heads, r == GEN_Q ? Lq : Lk, cols,
                              group, v, &st, heads, scale, row);
            }
            continue;
        }
        for (int64_t b = 0; b < B && !rc; b++) {
            const int64_t n = r == GEN_Q ? gen_seq_q(d, b) : gen_seq_kv(d, b);
            const int64_t off = r == GEN_Q ? gen_q_offset(d, b) : gen_kv_offset(d, b);
            for (int64_t h = 0; h < heads && !rc; h++)
                for (int64_t i = 0; i < n && !rc; i++) {
                    void *at;
                    if (r == GEN_Q) {
                        at = gen_at(&m->t[r], b, h, off + i, 0);
                    } else if (m->table) {
                        const int64_t pos = off + i;
                        const int32_t e = m->table[(d->pool == GEN_POOL_SHARED
                                                        ? 0
                                                        : b * m->opt.block_table_stride) +
                                                   pos / d->block_size];
                        if (e < 0 || e >= m->opt.num_blocks)
                            continue; /* a page no query sees */
                        at = gen_at(&m->t[r], e, h, pos % d->block_size, 0);
                    } else {
                        at = gen_at(&m->t[r], b, h, off + i, 0);
                    }
                    rc = fill_row(at, m->t[r].dtype, cols, group, v, &st, h, heads, scale, row);
                }
        }
    }

    /* tensor options, by their lines */
    for (int pos = 0; pos < ATTN_OPTION_COUNT && !rc; pos++) {
        if (option_kinds[pos] != ATTN_OPT_KIND_TENSOR || !d->present[pos])
            continue;
        const int role = GEN_OPT0 + pos, scores = option_extents[pos] == ATTN_OPT_EXTENT_SCORES;
        const int64_t nl = scores ? Lq : 1, cols = scores ? Lk : 1;
        if (option_extents[pos] == ATTN_OPT_EXTENT_KSCALES ||
            option_extents[pos] == ATTN_OPT_EXTENT_VSCALES) { /* laid out like k */
            const int is_v = option_extents[pos] == ATTN_OPT_EXTENT_VSCALES;
            const int64_t g = is_v ? d->opt.v_scale_group : d->opt.k_scale_group;
            const int64_t dim = is_v ? dv : d->shape.head_dim;
            const int64_t outer = m->table ? m->opt.num_blocks : kb,
                          rows = m->table ? d->block_size : Lk,
                          ncol = g > 0 && dim % g == 0 ? dim / g : 1; /* per row, or group */
            rc = dense_tensor(m, role, option_dtypes[pos], outer, Hkv, rows, ncol, 0, &d->tl[role]);
            if (rc)
                break;
            uint64_t st = stream_of(seed, role);
            memset(m->data[role], 0xff, m->bytes[role]);
            rc = fill_all(&m->t[role], outer, Hkv, rows, ncol, 0, &d->val[role], &st, Hkv, 0.0f,
                          row);
            const attn_tensor *tp = &m->t[role];
            memcpy((char *)&m->opt + option_offsets[pos], &tp, sizeof tp);
            continue;
        }
        if (option_extents[pos] == ATTN_OPT_EXTENT_KTAIL) { /* laid out like k */
            const int64_t n = d->opt.k_tail_dim, outer = m->table ? m->opt.num_blocks : kb,
                          rows = m->table ? d->block_size : Lk,
                          ncol = n > 0 && n < d->shape.head_dim ? n : 1;
            rc = dense_tensor(m, role, option_dtypes[pos], outer, Hkv, rows, ncol, 0, &d->tl[role]);
            if (rc)
                break;
            uint64_t st = stream_of(seed, role);
            memset(m->data[role], 0xff, m->bytes[role]);
            rc = fill_all(&m->t[role], outer, Hkv, rows, ncol, 0, &d->val[GEN_K], &st, Hkv, 0.0f,
                          row);
            const attn_tensor *tp = &m->t[role];
            memcpy((char *)&m->opt + option_offsets[pos], &tp, sizeof tp);
            continue;
        }
        rc = dense_tensor(m, role, option_dtypes[pos], B, Hq, nl, cols, 0, &d->tl[role]);
        if (rc)
            break;
        uint64_t st = stream_of(seed, role);
        memset(m->data[role], option_dtypes[pos] == ATTN_DTYPE_BOOL ? 0 : 0xff, m->bytes[role]);
        rc = fill_all(&m->t[role], B, Hq, nl, cols, 0, &d->val[role], &st, Hq, 0.0f, row);
        const attn_tensor *tp = &m->t[role];
        memcpy((char *)&m->opt + option_offsets[pos], &tp, sizeof tp);
    }

    /* outputs: allocated, not written */
    if (!rc && (flags & GEN_M_OUT))
        rc = dense_tensor(m, GEN_OUT, ATTN_DTYPE_F32, qb, Hq, Lq, dv, 0, &d->tl[GEN_OUT]);
    if (!rc && (flags & GEN_M_SCORES))
        rc = dense_tensor(m, GEN_SCORES, ATTN_DTYPE_F32, qb, Hq, Lq, Lk, 0, &d->tl[GEN_SCORES]);
    if (!rc && (flags & GEN_M_STATS)) {
        float **at[3] = {&m->stats.lse, &m->stats.max_score, &m->stats.entropy};
        for (int i = 0; i < 3 && !rc; i++) {
            *at[i] = get(m, GEN_LSE + i, (size_t)(B * Hq * Lq) * 4, 4, d->tl[GEN_OUT].misalign);
            rc = *at[i] ? 0 : -1;
        }
    }
    /* the split-KV workspace attn_forward asks for */
    if (!rc && d->present[POS(workspace)]) {
        size_t ws = 0;
        if (attn_forward_workspace_size(&m->shape, &m->opt, &ws) == ATTN_OK && ws > 0) {
            m->opt.workspace = get(m, GEN_OPT(workspace), ws, 1, 0);
            m->opt.workspace_size = ws;
            rc = m->opt.workspace ? 0 : -1;
        }
    }
    free(row);
    if (rc)
        gen_release(m);
    return rc;
}

void gen_release(gen_bufs *m)
{
    for (int r = 0; r < GEN_ROLE_COUNT; r++)
        if (m->data[r])
            m->alloc.release(m->alloc.ctx, r, m->data[r], m->bytes[r]);
    const gen_allocator keep = m->alloc;
    memset(m, 0, sizeof *m);
    m->alloc = keep;
}

void *gen_kv_row(const gen_bufs *m, int role, int64_t b, int64_t h, int64_t p)
{
    const attn_options *o = &m->opt;
    if (!o->block_table)
        return gen_at(&m->t[role], b, h, p, 0);
    const int32_t e = o->block_table[b * o->block_table_stride + p / o->block_size];
    return gen_at(&m->t[role], e, h, p % o->block_size, 0);
}

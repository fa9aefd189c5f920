/* SPDX-License-Identifier: MIT */
/*
 * The one problem generator of the tests, the fuzzers, the CLI and the
 * benchmarks (docs/DESIGN.md, section 6).
 *
 * A problem is drawn in two steps:
 *
 *   1. gen_draw fills a description (gen_problem): the shape, the layout
 *      (dense, packed with offsets, left-padded, paged through a block
 *      table), the dtypes of q, k and v, every attn_options value, which
 *      array and tensor options are present and the value distribution of
 *      every tensor. Each decision is one named choice (GEN_C_*, and for the
 *      options their line of src/option_list.h), asked of a choice source:
 *      a seeded RNG (tests), the fuzzer's bytes, or nothing at all, when
 *      every choice takes its pinned value or its default (the CLI's flags,
 *      the benchmarks' presets). A profile holds the distribution of each
 *      choice and the pins, so a consumer narrows the draw without code.
 *      The layout and the score modifiers (ALiBi, sinks, window and
 *      window_right, softcap, bias, mask, q_pos/k_pos) are drawn together:
 *      combined they reach code that neither alone does.
 *
 *   2. gen_materialise allocates and fills the tensors, arrays and outputs
 *      of a description from a seed (one value stream per tensor), through
 *      an allocator the consumer may replace (the tests' canary-guarded
 *      buffers, the fuzzers' guard pages).
 *
 * The option part walks src/option_list.h: a line without a rule in gen.c gets
 * its kind's default draw (a VALUE: mostly its ATTN_OPTIONS_INIT value,
 * else a small positive number; a TENSOR: absent or present with random
 * contents of its dtype and view; an array: absent), and the materialiser
 * allocates, fills and points at any TENSOR, I32 or I64 option by its
 * line. Every problem drawn is valid (attn.h) when the pins are: consumers
 * that test errors corrupt a materialised problem themselves.
 *
 * Public API only: attn.h and the lists src/option_list.h and
 * src/dtype_list.h (data on attn.h), so tools/ and bench/ may link it.
 * Compiled with -ffp-contract=off like the tests' oracle side
 * (docs/STYLE.md), so a seed gives the same values in every build.
 */
#ifndef ATTN_GEN_H
#define ATTN_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"
#include "../src/option_list.h"

/* ------------------------------------------------------------ choices */

/*
 * Choices besides the options. Option f's own choice is GEN_C_OPT(f): its
 * value for a VALUE line, its presence (0/1) for I32, I64, TENSOR and
 * SCRATCH lines (the block table's presence is GEN_C_BLOCK_SIZE > 0).
 */
#define GEN_CHOICE_LIST(X)                                                                   \
    X(BATCH)          /* batch entries */                                                    \
    X(KV_HEADS)       /* KV heads */                                                         \
    X(GROUP)          /* query heads per KV head */                                          \
    X(Q_LEN)          /* query rows of the longest sequence */                               \
    X(KV_LEN)         /* keys of the longest sequence */                                     \
    X(HEAD_DIM)                                                                              \
    X(V_DIM)          /* v/out row length; the default, 0, is head_dim */                    \
    X(Q_DTYPE)                                                                               \
    X(K_DTYPE)                                                                               \
    X(V_DTYPE)        /* the default is K's */                                               \
    X(SEQ_Q)          /* a sequence's query rows: GEN_SEQ_* (with q_lens) */                 \
    X(SEQ_KV)         /* a sequence's keys: GEN_SEQ_* (with kv_lens) */                      \
    X(SPREAD_LENS)    /* 1: sequence b has q_len/20 + (q_len - q_len/20) b / (B - 1)     \
                         queries and kv_len - q_len more keys (the CLI's --packed) */        \
    X(Q_PACKED)       /* q, out, scores, mask, bias: one row space, batch_stride 0 */        \
    X(KV_PACKED)      /* k, v: one row space, batch_stride 0 (not paged) */                 \
    X(GAP)            /* rows nobody owns before a packed sequence */                        \
    X(OFFSET)         /* a left-padded sequence's first row, 0..room (GEN_OFFSET_*) */      \
    X(BLOCK_SIZE)     /* > 0: K/V in a pool of blocks of this many keys */                   \
    X(POOL)           /* GEN_POOL_*: how the table maps pages to blocks */                   \
    X(POOL_HEADS_OUTER) /* the pool is [blocks][kv_heads][block_size][d] */                  \
    X(POOL_SPARE)     /* blocks no page uses */                                              \
    X(TABLE_PAD)      /* entries after each table row */                                     \
    X(ROWS_OUTER)     /* a dense tensor is [B][L][H][C] (per tensor) */                     \
    X(ROW_PAD)        /* elements after each row (per tensor) */                             \
    X(MISALIGN)       /* data one element past an aligned address (per tensor) */           \
    X(BROADCAST_QKV)  /* q, k, v: bits 1 batch, 2 head, 4 row strides 0 */                  \
    X(BROADCAST_OPT)  /* tensor options: the same bits */                                    \
    X(POS_KIND)       /* with q_pos/k_pos: 0 both, 1 q_pos only, 2 k_pos only */             \
    X(POS_BASE)       /* 1: positions near 2^40 */                                           \
    X(POS_K)          /* a sequence's first key position (from the base) */                  \
    X(POS_DELTA)      /* q_pos off the bottom-right alignment by this many positions */      \
    X(SPREAD)         /* values: GEN_SPREAD_* */                                             \
    X(SPECIALS)       /* with GEN_SPREAD_SPECIAL: 1 in this many values is special */ \
    X(TREE)           /* with tree_parents: GEN_TREE_* */                                   \
    X(SHARED)         /* with shared_prefix: GEN_SHARED_* */                                 \
    X(SHARED_KEYS)    /* GEN_SHARED_ALL: at most this many keys shared (0: all it can) */ \
    X(TOPK_SHARED)    /* with topk_indices: rows repeat most of the row before's keys */ \
    X(TOPK_DISTINCT)  /* 1: each list holds min(topk, Lk_b) distinct keys, then -1 */ \
    X(KPOS)           /* with k_positions: GEN_KPOS_* */                                 \
    X(ASYM_GROUP)     /* an ASYM k or v: values per record (0: the row), in place of \
                         its k_scale_group / v_scale_group choice */

#define GEN_C_ENUM(name) GEN_C_##name,
enum gen_choice {
    GEN_C_OPT0 = 0, /* GEN_C_OPT(f) = the line's position in src/option_list.h */
    GEN_C_FIRST = ATTN_OPTION_COUNT - 1, /* the next one is GEN_C_BATCH */
    GEN_CHOICE_LIST(GEN_C_ENUM) GEN_C_COUNT
};
#undef GEN_C_ENUM
#define GEN_C_OPT(f) (GEN_C_OPT0 + ATTN_OPT_POS_##f)

enum { GEN_SEQ_FULL, GEN_SEQ_EMPTY, GEN_SEQ_RANDOM };
enum { GEN_OFFSET_ZERO, GEN_OFFSET_END, GEN_OFFSET_RANDOM };
enum {
    GEN_POOL_SHUFFLED, /* the pages some query sees, each its own block, shuffled */
    GEN_POOL_ADJOIN,   /* the same blocks in order, now and then a gap (runs of pages) */
    GEN_POOL_SHARED,   /* one table row for every sequence (block_table_stride 0) */
    GEN_POOL_RANDOM,   /* any block for any entry, repeats allowed */
    GEN_POOL_COUNT
};
enum { GEN_SPREAD_TAME, GEN_SPREAD_FLAT, GEN_SPREAD_PEAKED, GEN_SPREAD_SPECIAL };
enum { GEN_TREE_CHAIN, GEN_TREE_FLAT, GEN_TREE_RANDOM };
/* shared_prefix: one group sharing what it can (or GEN_C_SHARED_KEYS), or
   random groups and lengths */
enum { GEN_SHARED_ALL, GEN_SHARED_RANDOM };
/* k_positions: the slots' positions K_b + j in order (k_pos's problem),
   shuffled, shuffled with empty slots (-1, their positions gone), or drawn
   each on its own (repeats, gaps and empty slots) */
enum { GEN_KPOS_ORDER, GEN_KPOS_SHUFFLED, GEN_KPOS_HOLES, GEN_KPOS_RANDOM };

/*
 * How one choice is drawn by a random source: with probability chance/256
 * a value, else the default (which the drawing code decides: off, the
 * longest length, K's dtype, ...). The value is menu[i] for a random i when
 * the menu is given, else an integer of [lo, hi + kv * (keys of the longest
 * sequence)]; a float choice is that integer times `unit`.
 */
typedef struct gen_rule {
    uint16_t chance;      /* 0..256 */
    int64_t lo, hi;
    uint8_t kv;           /* hi grows with the keys */
    uint16_t wide;        /* out of 256: wide_hi instead of hi (now and then larger) */
    int64_t wide_hi;
    double unit;          /* float choices (0: 1) */
    const int64_t *menu;
    size_t n_menu;
} gen_rule;

/* Tensors and arrays of a problem, by role (and buffer): q, k, v, the
   outputs, then one role per attn_options line (its data). */
enum gen_role {
    GEN_Q, GEN_K, GEN_V,
    GEN_OUT,    /* F32 [B][Hq][q_len][v_dim] */
    GEN_SCORES, /* F32 [B][Hq][q_len][kv_len] (scores, weights, mask_apply's table) */
    GEN_LSE, GEN_MAX, GEN_ENT, /* float[B][Hq][q_len] each */
    GEN_OPT0
};
#define GEN_OPT(f) (GEN_OPT0 + ATTN_OPT_POS_##f)
#define GEN_ROLE_COUNT (GEN_OPT0 + ATTN_OPTION_COUNT)

/* How a tensor is laid out (dense tensors; a pool has its own layout). */
typedef struct gen_tlayout {
    uint8_t rows_outer; /* [B][L][H][C] */
    uint8_t broadcast;  /* bits: 1 batch, 2 head, 4 row stride 0 (inputs only) */
    uint8_t misalign;   /* data at one element past an aligned address */
    int64_t pad;        /* elements after each row (and each head's rows) */
} gen_tlayout;

/* How a tensor's values are drawn. */
enum {
    GEN_VAL_UNIFORM, /* [lo, hi) */
    GEN_VAL_BELL,    /* lo + (hi - lo) * a sum of four uniforms / 4: bell-shaped */
    GEN_VAL_ALIBI,   /* ALiBi's standard slope of the head, times a factor of [lo, hi) */
};
typedef struct gen_values {
    uint8_t kind;
    float lo, hi;
    uint16_t alt;       /* out of 256: from [alt_lo, alt_hi) instead */
    float alt_lo, alt_hi;
    uint16_t minus_inf; /* out of 256: -inf instead */
    uint16_t special;   /* 1 in `special` values is NaN, +-inf, -0 or subnormal (0: none) */
    uint16_t hidden;    /* BOOL: out of 256 entries are 0 (the others 1..255) */
} gen_values;

/*
 * A consumer's distribution of every choice and its pinned values. A pinned
 * choice takes its pin whatever the source (a float choice its pin_f).
 */
typedef struct gen_profile {
    gen_rule rule[GEN_C_COUNT];
    uint8_t pinned[GEN_C_COUNT];
    int64_t pin[GEN_C_COUNT];
    double pin_f[GEN_C_COUNT];
    /* B * q_heads * q_len * kv_len * (head_dim + v_dim) at most: above,
       gen_draw halves the lengths (shrink) or gives up (returns 0) */
    int64_t work_cap;
    int shrink;
    unsigned flags; /* GEN_P_* */
    /* value distributions of the tensors, before GEN_C_SPREAD changes them */
    gen_values val[GEN_ROLE_COUNT];
} gen_profile;

enum {
    GEN_P_Q_SHORTER = 1u << 0, /* q_len < kv_len */
    GEN_P_Q_LONGER = 1u << 1,  /* q_len > kv_len */
    GEN_P_DENSE = 1u << 2,     /* no offsets, no packing, no pool (attn_backward) */
};

/*
 * The broad distribution: small shapes of every kind, every layout, every
 * option now and then (what the fuzzers start from). Consumers change rules
 * with the helpers below.
 */
void gen_profile_init(gen_profile *p);
/* A choice that always takes v (v_f for float choices). */
void gen_pin(gen_profile *p, int choice, int64_t v);
void gen_pin_f(gen_profile *p, int choice, double v);
/* A choice that is never drawn (always its default). */
void gen_never(gen_profile *p, int choice);
/* A choice drawn always (chance 256) from [lo, hi] (kv: hi grows with the keys). */
void gen_range(gen_profile *p, int choice, int64_t lo, int64_t hi);
/* Only the chance of a drawn value changes. */
void gen_chance(gen_profile *p, int choice, unsigned chance);
/* Draws top-k lists (topk_indices) with this chance, their length and
   sharing by the default profile's rules (a profile that said gen_never
   to every choice gets them back). */
void gen_allow_topk(gen_profile *p, unsigned chance);
const char *gen_choice_name(int choice);

/*
 * Where choices come from: range(ctx, lo, hi) returns an integer of [lo, hi]
 * (a seeded RNG, the fuzzer's bytes). range NULL: a fixed source, every
 * choice its pin or its default.
 */
typedef struct gen_src {
    int64_t (*range)(void *ctx, int64_t lo, int64_t hi);
    void *ctx;
} gen_src;

/* A splitmix64 source for tools and benchmarks (state: any seed). */
int64_t gen_splitmix_range(void *state, int64_t lo, int64_t hi);
uint64_t gen_splitmix(uint64_t *state);

/* ------------------------------------------------------------ the description */

typedef struct gen_problem {
    attn_shape shape;      /* the call's shape (packed: q_len/kv_len are the row spaces) */
    int64_t q_len, kv_len; /* the longest sequence (the shape's, unless packed) */
    int64_t dv;            /* v_dim resolved */
    int32_t dtype[3];      /* of q, k, v */
    /* Every VALUE of attn_options (the pointers stay NULL: present[] says
       which are given, gen_materialise points them at their data). */
    attn_options opt;
    uint8_t present[ATTN_OPTION_COUNT];
    /* I32 and I64 options' values by their extents, [batch] ... (NULL: absent) */
    int64_t *ints[ATTN_OPTION_COUNT];
    /* layout */
    uint8_t q_packed, kv_packed;
    int64_t block_size;    /* 0: K/V dense */
    uint8_t pool, pool_heads_outer;
    int64_t pool_spare, table_pad;
    gen_tlayout tl[GEN_ROLE_COUNT];
    gen_values val[GEN_ROLE_COUNT];
} gen_problem;

/*
 * Draws a problem. Returns 1, or 0 when its work exceeds the profile's cap
 * and the profile does not shrink (d is freed then). Free with gen_free.
 */
int gen_draw(gen_problem *d, gen_src *src, const gen_profile *p);
void gen_free(gen_problem *d);

/* Query rows, keys and first rows of sequence b (lengths: the option, or
   the longest sequence; offsets: the option, or 0). */
int64_t gen_seq_q(const gen_problem *d, int64_t b);
int64_t gen_seq_kv(const gen_problem *d, int64_t b);
int64_t gen_q_offset(const gen_problem *d, int64_t b);
int64_t gen_kv_offset(const gen_problem *d, int64_t b);
/* Keys [*lo, *hi) query row i of sequence b may see by lengths, causal,
   window, window_right and positions (attn.h, "Masks"; not the BOOL mask).
   With k_positions, every valid key: the library's hull, the per-slot
   positions hiding keys inside it. */
void gen_row_keys(const gen_problem *d, int64_t b, int64_t i, int64_t *lo, int64_t *hi);
/* A line for failure messages and the CLI: shape, layout, dtypes, options. */
const char *gen_describe(const gen_problem *d, char *buf, size_t size);

/* ------------------------------------------------------------ materialising */

/*
 * Memory for buffer `role` of `bytes` bytes (never 0): misalign is 1 when
 * the data should start one element (elem bytes) past an aligned address.
 * NULL: out of memory. release(ctx, role, data, bytes) frees it.
 */
typedef struct gen_allocator {
    void *(*alloc)(void *ctx, int role, size_t bytes, size_t elem, int misalign);
    void (*release)(void *ctx, int role, void *data, size_t bytes);
    void *ctx;
} gen_allocator;

enum {
    GEN_M_OUT = 1u << 0,     /* allocate out */
    GEN_M_SCORES = 1u << 1,  /* allocate scores */
    GEN_M_STATS = 1u << 2,   /* allocate the three stats arrays */
    GEN_M_POISON = 1u << 3,  /* NaN in every input element outside the sequences */
    GEN_M_GARBAGE = 1u << 4, /* pages no query sees get garbage table entries, no block */
    GEN_M_NO_V = 1u << 5,    /* no v (operations without values) */
};

typedef struct gen_bufs {
    attn_shape shape;
    attn_options opt;              /* the description's, pointing into the buffers */
    attn_tensor t[GEN_ROLE_COUNT]; /* q, k, v, out, scores and the tensor options */
    attn_row_stats stats;          /* lse, max_score, entropy (GEN_M_STATS) */
    void *data[GEN_ROLE_COUNT];    /* every buffer (NULL: none) */
    size_t bytes[GEN_ROLE_COUNT];
    int32_t *table;                /* the block table (role GEN_OPT(block_table)) */
    gen_allocator alloc;
} gen_bufs;

/*
 * Allocates and fills what d describes. Inputs get values from seed (one
 * stream per tensor, so a change to one tensor leaves the others' values
 * alone); outputs are allocated, not written. a may be NULL (64-byte
 * aligned heap memory). Returns 0, or -1 when out of memory or when
 * attn_quantize refused a quantized row (m released).
 */
int gen_materialise(gen_bufs *m, const gen_problem *d, uint64_t seed, unsigned flags,
                    const gen_allocator *a);
void gen_release(gen_bufs *m);

/* Element (b, h, r, c) of a tensor, c in stride units (blocks for Q8_0/Q4_0). */
void *gen_at(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c);
/* Row of key position p (a sequence's key j is at kv_offset + j) of
   sequence b's KV head h in k or v, through the block table when paged. */
void *gen_kv_row(const gen_bufs *m, int role, int64_t b, int64_t h, int64_t p);
/* Bytes per stride unit and values per unit of a dtype (src/dtype_list.h). */
size_t gen_dtype_bytes(int32_t dtype);
int64_t gen_dtype_block(int32_t dtype);
const char *gen_dtype_name(int32_t dtype);
/* Value i of a row of a tensor of any dtype of src/dtype_list.h, decoded
   (an FP8 one times scale, 0: 1). */
float gen_load(const void *row, int32_t dtype, int64_t i, float scale);
/* The same for an ASYM row of records of `group` values (0: the row is one
   record); group is ignored for the other dtypes. */
float gen_load_g(const void *row, int32_t dtype, int64_t i, float scale, int64_t group);
/* 1 for the ASYM formats (records of a group with their scale and zero
   point, attn.h), else 0. */
int gen_dtype_asym(int32_t dtype);
/* An ASYM dtype's group for a row of cols values (0: the whole row); the
   group as given for another dtype. */
int64_t gen_kv_group(int32_t dtype, int64_t group, int64_t cols);
/* Stride units of a K/V row of cols values (an ASYM row's records with
   their headers; group as attn_options' k_scale_group). */
int64_t gen_row_units(int32_t dtype, int64_t cols, int64_t group);
/* n values of v's distribution from *stream, stored as F32, F16 or BF16
   (a tensor the consumer owns: the backward's dout). */
void gen_fill(void *dst, int32_t dtype, int64_t n, const gen_values *v, uint64_t *stream);
/* Stores x as an F32, F16 or BF16 element (round to nearest even). */
void gen_store(void *at, int32_t dtype, float x);
/* ALiBi's standard slope of query head h of `heads` (the paper's geometric
   sequence, extended as its code does when heads is not a power of two). */
float gen_alibi_slope(int64_t h, int64_t heads);

#endif /* ATTN_GEN_H */

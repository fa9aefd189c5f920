/* SPDX-License-Identifier: MIT */
/*
 * The one list of dtypes (modelled on ggml's type_traits[]): every
 * property of an attn_dtype that code needs beside its bits' meaning is one
 * X(...) line here. src/problem.h's attn_dtype_size/_block/_is_* read it,
 * and so do the CLI (tools/problem.c), the tests' reference (tests/ref/ref.c,
 * tests/ref/ref_quant.c), the fuzzers, the benchmarks and, through a table
 * meson generates (python/gen_dtypes.c), the Python binding.
 *
 * It is data, not code: it needs only include/attn.h, so the CLI and the
 * benchmarks (public API only) and the fuzzers' models (which share no
 * code with src/) include it as well. Decoding a dtype's values is not
 * here: the kernels, the float64 reference and the tools decode on their
 * own on purpose.
 *
 * X(ID, name, block, bytes, kind, q, kv, out)
 *   ID     the attn_dtype value is ATTN_DTYPE_##ID (include/attn.h)
 *   name   as the CLI (--kv-dtype) and Python spell it
 *   block  values per stride unit: 1, or ATTN_QBLOCK for the block formats
 *          (a K/V row is then whole blocks, strides count blocks)
 *   bytes  bytes per stride unit (one value, or one block)
 *   kind   ATTN_DTYPE_KIND_##kind: FLOAT (f32 and the half floats),
 *          QBLOCK (ggml's block formats), FP8, BOOL
 *   q      1: a valid query dtype (attn.h)
 *   kv     1: a valid K/V dtype
 *   out    where it is a valid output dtype (ATTN_DTYPE_OUT_##out):
 *          ANY: every operation's output (scores, weights, mask_apply's
 *          table, the forward's and attn_merge's out, the backward's
 *          gradients); ROUNDED: only the out of attn_forward and attn_merge,
 *          the f32 row rounded once to it (src/half.h; an attn_op says
 *          whether its out takes these, src/problem.h); NONE: no output
 *
 * Lines are in attn_dtype order and cover every value (checked below at
 * compile time); the float kinds come first (src/dsp.h relies on it).
 * Adding a dtype: its attn_dtype value (include/attn.h and
 * tests/abi/layout_test.c), one line here, its kernels, its decoder in the
 * tests' reference; the Python table follows by itself.
 */
#ifndef ATTN_DTYPE_LIST_H
#define ATTN_DTYPE_LIST_H

#include "attn.h"

/* Layout of the block formats (ggml's block_q8_0 and block_q4_0). */
#define ATTN_QBLOCK 32     /* values per block */
#define ATTN_Q8_0_BYTES 34 /* f16 d, then 32 int8 */
#define ATTN_Q4_0_BYTES 18 /* f16 d, then 16 bytes of nibble pairs */

/* The `out` column. */
typedef enum attn_dtype_out {
    ATTN_DTYPE_OUT_NONE,
    ATTN_DTYPE_OUT_ROUNDED,
    ATTN_DTYPE_OUT_ANY
} attn_dtype_out;

typedef enum attn_dtype_kind {
    ATTN_DTYPE_KIND_FLOAT,
    ATTN_DTYPE_KIND_QBLOCK,
    ATTN_DTYPE_KIND_FP8,
    ATTN_DTYPE_KIND_BOOL
} attn_dtype_kind;

/* clang-format off */
#define ATTN_DTYPE_LIST(X)                                                   \
    X(F32,      "f32",  1,           4,               FLOAT,  1, 1, ANY)     \
    X(F16,      "f16",  1,           2,               FLOAT,  1, 1, ROUNDED) \
    X(BF16,     "bf16", 1,           2,               FLOAT,  1, 1, ROUNDED) \
    X(BOOL,     "bool", 1,           1,               BOOL,   0, 0, NONE)    \
    X(Q8_0,     "q8_0", ATTN_QBLOCK, ATTN_Q8_0_BYTES, QBLOCK, 0, 1, NONE)    \
    X(Q4_0,     "q4_0", ATTN_QBLOCK, ATTN_Q4_0_BYTES, QBLOCK, 0, 1, NONE)    \
    X(FP8_E4M3, "fp8",  1,           1,               FP8,    0, 1, NONE)    \
    X(FP8_E5M2, "e5m2", 1,           1,               FP8,    0, 1, NONE)
/* clang-format on */

/* ATTN_DTYPE_COUNT: the number of lines, so every value in [0, count) is a
   known dtype. */
#define ATTN_DTYPE_X_POS(ID, name, block, bytes, kind, q, kv, out) ATTN_DTYPE_X_POS_##ID,
enum { ATTN_DTYPE_LIST(ATTN_DTYPE_X_POS) ATTN_DTYPE_COUNT };
#undef ATTN_DTYPE_X_POS

#ifdef __cplusplus
#define ATTN_DTYPE_STATIC_ASSERT static_assert
#else
#define ATTN_DTYPE_STATIC_ASSERT _Static_assert
#endif

/* Each line's ID is its position: the lines are in attn_dtype order. */
#define ATTN_DTYPE_X_ORDER(ID, name, block, bytes, kind, q, kv, out)                    \
    ATTN_DTYPE_STATIC_ASSERT((int)ATTN_DTYPE_##ID == (int)ATTN_DTYPE_X_POS_##ID,       \
                             #ID ": line out of attn_dtype order");                   \
    ATTN_DTYPE_STATIC_ASSERT((block) >= 1 && (bytes) >= 1, #ID ": empty stride unit");
ATTN_DTYPE_LIST(ATTN_DTYPE_X_ORDER)
#undef ATTN_DTYPE_X_ORDER

/* Every attn_dtype value has a line: a switch over the enum without a
   default names the missing one (-Wswitch, made an error here). */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
static inline int attn_dtype_list_covers(attn_dtype dtype)
{
    switch (dtype) {
#define ATTN_DTYPE_X_CASE(ID, name, block, bytes, kind, q, kv, out) case ATTN_DTYPE_##ID:
        ATTN_DTYPE_LIST(ATTN_DTYPE_X_CASE)
#undef ATTN_DTYPE_X_CASE
        return 1;
    }
    return 0;
}
#pragma GCC diagnostic pop

/*
 * ATTN_DTYPE_GET(dtype, field, none): a function body returning the list's
 * `field` of an attn_dtype value, `none` for a value outside the list:
 * bytes, block, name, kind (ATTN_DTYPE_KIND_*), float (a float kind),
 * quant (QBLOCK or FP8), q, kv, out (ATTN_DTYPE_OUT_*). A switch over the
 * lines, so it compiles to what a hand-written switch did. The one reader of
 * the list's columns for src/, the tools, the generator and the tests.
 */
#define ATTN_DTYPE_GET(dtype, field, none)                                    \
    switch (dtype) {                                                          \
        ATTN_DTYPE_LIST(ATTN_DTYPE_X_GET_##field)                             \
    default: return none;                                                     \
    }
#define ATTN_DTYPE_X_GET_bytes(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return bytes;
#define ATTN_DTYPE_X_GET_block(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return block;
#define ATTN_DTYPE_X_GET_name(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return name;
#define ATTN_DTYPE_X_GET_kind(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return ATTN_DTYPE_KIND_##kind;
#define ATTN_DTYPE_X_GET_float(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_FLOAT;
#define ATTN_DTYPE_X_GET_quant(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_QBLOCK || \
                                 ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_FP8;
#define ATTN_DTYPE_X_GET_q(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return q;
#define ATTN_DTYPE_X_GET_kv(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return kv;
#define ATTN_DTYPE_X_GET_out(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return ATTN_DTYPE_OUT_##out;

#endif /* ATTN_DTYPE_LIST_H */

/* SPDX-License-Identifier: MIT */
/*
 * The one list of dtypes (after ggml's type_traits[]): every property of an
 * attn_dtype code needs beside its bits' meaning. It needs only
 * include/attn.h, so code sharing nothing with src/ includes it too.
 * Decoding is not here: the kernels, the float64 reference and the tools
 * decode on their own on purpose.
 *
 * X(ID, name, block, bytes, kind, q, kv, out)
 *   block  values per stride unit: ATTN_QBLOCK for the block formats (rows
 *          are whole blocks, strides count blocks), 2 for U4_ASYM's code
 *          bytes, else 1
 *   bytes  bytes per stride unit; an ASYM row also holds ATTN_ASYM_HEADER
 *          bytes per group (attn_kv_row_bytes, src/problem.h)
 *   out    ANY: every operation's output; ROUNDED: only an out its
 *          operation rounds into (attn_op.rounds_out); NONE
 *
 * Lines are in attn_dtype order and cover every value (checked below); the
 * float kinds come first (src/dsp.h relies on it). Adding a dtype: its
 * value (include/attn.h, tests/abi/layout_test.c), a line here, its kernels
 * and its decoder in the tests' reference.
 */
#ifndef ATTN_DTYPE_LIST_H
#define ATTN_DTYPE_LIST_H

#include "attn.h"

/* ggml's block_q8_0 and block_q4_0 */
#define ATTN_QBLOCK 32     /* values per block */
#define ATTN_Q8_0_BYTES 34 /* f16 d, then 32 int8 */
#define ATTN_Q4_0_BYTES 18 /* f16 d, then 16 bytes of nibble pairs */
/* OpenVINO's asymmetric records: f32 scale, f32 zero point, then the codes */
#define ATTN_ASYM_HEADER 8

typedef enum attn_dtype_out {
    ATTN_DTYPE_OUT_NONE,
    ATTN_DTYPE_OUT_ROUNDED,
    ATTN_DTYPE_OUT_ANY
} attn_dtype_out;

typedef enum attn_dtype_kind {
    ATTN_DTYPE_KIND_FLOAT,
    ATTN_DTYPE_KIND_QBLOCK,
    ATTN_DTYPE_KIND_FP8,
    ATTN_DTYPE_KIND_BOOL,
    ATTN_DTYPE_KIND_ASYM /* records of a group: scale, zero point, codes */
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
    X(FP8_E5M2, "e5m2", 1,           1,               FP8,    0, 1, NONE)    \
    X(U8_ASYM,  "u8",   1,           1,               ASYM,   0, 1, NONE)    \
    X(U4_ASYM,  "u4",   2,           1,               ASYM,   0, 1, NONE)
/* clang-format on */

/* every value in [0, ATTN_DTYPE_COUNT) is a known dtype */
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

/* A switch without a default names a missing line (-Wswitch, an error). */
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

/* A function body returning a column of the list (float: a float kind,
   quant: QBLOCK, FP8 or ASYM), `none` outside it; the one reader of the
   columns. */
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
                                 ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_FP8 ||    \
                                 ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_ASYM;
#define ATTN_DTYPE_X_GET_q(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return q;
#define ATTN_DTYPE_X_GET_kv(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return kv;
#define ATTN_DTYPE_X_GET_out(ID, name, block, bytes, kind, q, kv, out) \
    case ATTN_DTYPE_##ID: return ATTN_DTYPE_OUT_##out;

#endif /* ATTN_DTYPE_LIST_H */

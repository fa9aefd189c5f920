/* SPDX-License-Identifier: MIT */
/*
 * The one list of attn_options fields, one X(...) line per field in the
 * struct's order. Validation, the ABI and option-mirror tests, the fuzzer,
 * the Python bindings and the problem generator all read it (docs/DESIGN.md
 * §3). It needs only include/attn.h, so code sharing nothing with src/ can
 * include it.
 *
 * X(field, kind, extent, dtype, offset, since, rule)
 *   kind    HEADER (struct_size), VALUE, HOOK (never dereferenced), I32 and
 *           I64 arrays, TENSOR (data non-NULL, of `dtype`), PAGES (sized
 *           with the pages a call reads), SCRATCH (an output, sized per call)
 *   extent  the view a pointer covers; KSCALES, VSCALES and KTAIL are laid
 *           out like their cache (or the block_table's pool), KSLOTS counts
 *           a sequence's key slots, never the pool's
 *   dtype   a TENSOR's (or F16, BF16 too: ATTN_OPT_TAKES_HALF); else unused
 *   offset  frozen in LP64/LLP64: changing one breaks compiled callers
 *   since   the minor version of 1.x that appended it
 *   rule    what a VALUE must be (ATTN_ERR_ARG otherwise), checked before
 *           anything else of the options; NONE: checked with others or not
 *           a value. CAP: cap * tanh(s * (1/cap)) needs a finite 1/cap, or
 *           a score of 0 would become 0 * inf.
 *
 * Adding an option: its member at the end of attn_options, documented in
 * include/attn.h, one line here, its use in the driver (pb->opt.<field>),
 * its float64 reference and test; the rest follows from the line (a
 * pointer option's Python keyword is a row of python/libattn/_keywords.py).
 */
#ifndef ATTN_OPTION_LIST_H
#define ATTN_OPTION_LIST_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attn.h"

typedef enum attn_opt_kind {
    ATTN_OPT_KIND_HEADER,
    ATTN_OPT_KIND_VALUE,
    ATTN_OPT_KIND_HOOK,
    ATTN_OPT_KIND_I32,
    ATTN_OPT_KIND_I64,
    ATTN_OPT_KIND_TENSOR,
    ATTN_OPT_KIND_PAGES,
    ATTN_OPT_KIND_SCRATCH
} attn_opt_kind;

typedef enum attn_opt_extent {
    ATTN_OPT_EXTENT_NONE,
    ATTN_OPT_EXTENT_BATCH,
    ATTN_OPT_EXTENT_SCORES,
    ATTN_OPT_EXTENT_HEADS,
    ATTN_OPT_EXTENT_QROWS,
    ATTN_OPT_EXTENT_KSCALES,
    ATTN_OPT_EXTENT_VSCALES,
    ATTN_OPT_EXTENT_TOPK,
    ATTN_OPT_EXTENT_KTAIL,
    ATTN_OPT_EXTENT_KSLOTS
} attn_opt_extent;

/* clang-format off */
#define ATTN_OPTION_LIST(X)                                                  \
    X(struct_size,        HEADER,  NONE,   F32,  0,   0, NONE)               \
    X(flags,              VALUE,   NONE,   F32,  4,   0, FLAGS)              \
    X(scale,              VALUE,   NONE,   F32,  8,   0, FINITE)             \
    X(softcap,            VALUE,   NONE,   F32,  12,  0, CAP)                \
    X(window,             VALUE,   NONE,   F32,  16,  0, NONNEG)             \
    X(q_lens,             I32,     BATCH,  F32,  24,  0, NONE)               \
    X(kv_lens,            I32,     BATCH,  F32,  32,  0, NONE)               \
    X(mask,               TENSOR,  SCORES, BOOL, 40,  0, NONE)               \
    X(bias,               TENSOR,  SCORES, F32,  48,  0, NONE)               \
    X(parallel_for,       HOOK,    NONE,   F32,  56,  0, NONE)               \
    X(parallel_ctx,       HOOK,    NONE,   F32,  64,  0, NONE)               \
    X(window_right,       VALUE,   NONE,   F32,  72,  1, NONNEG)             \
    X(sinks,              TENSOR,  HEADS,  F32,  80,  1, NONE)               \
    X(alibi_slopes,       TENSOR,  HEADS,  F32,  88,  1, NONE)               \
    X(q_offsets,          I32,     BATCH,  F32,  96,  1, NONE)               \
    X(kv_offsets,         I32,     BATCH,  F32,  104, 1, NONE)               \
    X(block_table,        PAGES,   NONE,   F32,  112, 1, NONE)               \
    X(block_table_stride, VALUE,   NONE,   F32,  120, 1, NONE)               \
    X(block_size,         VALUE,   NONE,   F32,  128, 1, NONE)               \
    X(num_blocks,         VALUE,   NONE,   F32,  136, 1, NONE)               \
    X(q_pos,              I64,     BATCH,  F32,  144, 1, NONE)               \
    X(k_pos,              I64,     BATCH,  F32,  152, 1, NONE)               \
    X(workspace,          SCRATCH, NONE,   F32,  160, 1, NONE)               \
    X(workspace_size,     VALUE,   NONE,   F32,  168, 1, NONE)               \
    X(kv_splits,          VALUE,   NONE,   F32,  176, 1, SPLITS)             \
    X(k_scale,            VALUE,   NONE,   F32,  180, 1, NONE)               \
    X(v_scale,            VALUE,   NONE,   F32,  184, 1, NONE)               \
    X(precision,          VALUE,   NONE,   F32,  192, 2, PRECISION)         \
    X(tree_parents,       I32,     QROWS,  F32,  200, 3, NONE)               \
    X(shared_prefix,      I32,     BATCH,  F32,  208, 4, NONE)               \
    X(k_scales,           TENSOR,  KSCALES, F32, 216, 6, NONE)               \
    X(v_scales,           TENSOR,  VSCALES, F32, 224, 6, NONE)               \
    X(topk_indices,       I32,     TOPK,   F32,  232, 7, NONE)               \
    X(topk,               VALUE,   NONE,   F32,  240, 7, NONNEG)             \
    X(k_scale_group,      VALUE,   NONE,   F32,  248, 8, NONNEG)             \
    X(v_scale_group,      VALUE,   NONE,   F32,  256, 8, NONNEG)             \
    X(k_tail,             TENSOR,  KTAIL,  F32,  264, 9, NONE)               \
    X(k_tail_dim,         VALUE,   NONE,   F32,  272, 9, NONNEG)             \
    X(k_positions,        I64,     KSLOTS, F32,  280, 11, NONE)
/* clang-format on */

#define ATTN_OPT_RULE_NONE(v) ((void)(v), 1)
#define ATTN_OPT_FLAGS_ALL (ATTN_CAUSAL | ATTN_SHARED_BLOCK_TABLE) /* every ATTN_* flag */
#define ATTN_OPT_RULE_FLAGS(v) (((v) & ~(uint32_t)ATTN_OPT_FLAGS_ALL) == 0)
#define ATTN_OPT_RULE_FINITE(v) isfinite(v)
#define ATTN_OPT_RULE_CAP(v) (isfinite(v) && (v) >= 0.0f && ((v) == 0.0f || isfinite(1.0f / (v))))
#define ATTN_OPT_RULE_NONNEG(v) ((v) >= 0)
#define ATTN_OPT_RULE_SPLITS(v) ((v) >= 0 && (v) <= ATTN_MAX_KV_SPLITS)
#define ATTN_OPT_RULE_PRECISION(v) ((v) >= ATTN_PRECISION_DEFAULT && (v) <= ATTN_PRECISION_INT8)

/* Also takes F16 and BF16, read in place and widened exactly. */
#define ATTN_OPT_TAKES_HALF(extent, dtype)                                                     \
    (ATTN_OPT_EXTENT_##extent == ATTN_OPT_EXTENT_KTAIL ||                                      \
     (ATTN_OPT_EXTENT_##extent == ATTN_OPT_EXTENT_SCORES && ATTN_DTYPE_##dtype == ATTN_DTYPE_F32))

#define ATTN_OPT_X_POS(f, kind, extent, dtype, off, since, rule) ATTN_OPT_POS_##f,
enum { ATTN_OPTION_LIST(ATTN_OPT_X_POS) ATTN_OPTION_COUNT };
#undef ATTN_OPT_X_POS

/* Sizes src/validate.h's range sets, so a new pointer option can never
   overflow them. */
#define ATTN_OPT_X_IS_RANGE(f, kind, extent, dtype, off, since, rule)                        \
    +(ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_I32 || ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_I64 || \
      ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_TENSOR || ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_PAGES)
enum { ATTN_OPTION_INPUT_RANGES = 0 ATTN_OPTION_LIST(ATTN_OPT_X_IS_RANGE) };
#undef ATTN_OPT_X_IS_RANGE

/* A struct built from the lines must have attn_options' layout: the lines
   name fields in order and miss none but one that fits in padding, which
   tests/check_options.py catches. */
#ifndef __cplusplus
#define ATTN_OPT_X_MEMBER(f, kind, extent, dtype, off, since, rule) __typeof__(((attn_options *)0)->f) f;
struct attn_options_from_list {
    ATTN_OPTION_LIST(ATTN_OPT_X_MEMBER)
};
#undef ATTN_OPT_X_MEMBER
#define ATTN_OPT_X_PLACE(f, kind, extent, dtype, off, since, rule)                                   \
    _Static_assert(offsetof(struct attn_options_from_list, f) == offsetof(attn_options, f),  \
                   #f ": line out of attn_options order, or a field before it is missing");
ATTN_OPTION_LIST(ATTN_OPT_X_PLACE)
#undef ATTN_OPT_X_PLACE
_Static_assert(sizeof(struct attn_options_from_list) == sizeof(attn_options),
               "attn_options has a field after the list's last line");
#endif

#endif /* ATTN_OPTION_LIST_H */

/* SPDX-License-Identifier: MIT */
/*
 * The one list of attn_options fields: one X(...) line per field, in the
 * struct's order. What the library does with a field because of what it is
 * (copy it when struct_size covers it, check its pointer, register the bytes
 * it points at as an input, freeze its offset) is read from here:
 *   src/validate.c          attn_read_options, the NULL checks of tensor options,
 *                           their dtypes, every pointer option as an input
 *                           byte range
 *   tests/abi/layout_test.c the frozen offsets (LP64 and LLP64)
 *   python/gen_options.c    the Python option table (python/libattn/_options.py,
 *                           generated; its committed copy checked by test
 *                           python-options), from which _capi.Options and
 *                           struct_size follow; python/tests/test_options.py
 *                           fails until _keywords.py has the field's keyword
 *   tests/abi/option_layout.c + tests/check_options.py
 *                           the Python ctypes mirror (python/libattn/_capi.py)
 *                           and include/attn.h's struct against this list
 *   tests/fuzz/fuzz_api.c   the struct_size model (which fields an older
 *                           caller's struct covers)
 *   problems/gen.c               the problem generator's draw of every option (a
 *                           line without a rule there gets its kind's default
 *                           draw) and the materialiser of pointer options
 *
 * It is data, not code: it needs only include/attn.h, so the ABI tests and
 * the fuzzers' models (which share no code with src/) include it as well.
 *
 * X(field, kind, extent, dtype, offset, since, rule)
 *   field   the attn_options member
 *   kind    ATTN_OPT_KIND_##kind, what the field is:
 *             HEADER  struct_size (read before anything else)
 *             VALUE   a number the operations read
 *             HOOK    the parallel_for hook and its context (never dereferenced)
 *             I32     const int32_t *, extent elements
 *             I64     const int64_t *, extent elements
 *             TENSOR  const attn_tensor *, of the view `extent`, its data
 *                     non-NULL and of `dtype`
 *             PAGES   the block table (its extent is the paging description's,
 *                     checked in validate.c with the pages a call reads)
 *             SCRATCH the split-KV workspace (an output, sized per call)
 *   extent  ATTN_OPT_EXTENT_##extent, the view a pointer option covers:
 *             NONE    not a pointer, or sized elsewhere (PAGES, SCRATCH)
 *             BATCH   [batch]
 *             SCORES  [batch][q_heads][q_len][kv_len]
 *             HEADS   [batch][q_heads][1][1]
 *             QROWS   [batch][q_len] (one entry per query row, as the stats)
 *             KSCALES one value per K row, laid out like k: [batch][kv_heads]
 *                     [kv_len], or with a block_table the pool [num_blocks]
 *                     [kv_heads][block_size]; head_dim / k_scale_group
 *                     consecutive values per row with k_scale_group > 0
 *             VSCALES the same per V row (v_dim / v_scale_group)
 *             TOPK    [batch][q_len][topk] (a list of topk entries per query
 *                     row, indexed as QROWS)
 *             KTAIL   the last k_tail_dim values of every K row, laid out
 *                     like k ([batch][kv_heads][kv_len], or the pool with a
 *                     block_table); of dtype F32, F16 or BF16 (the dtype
 *                     column names the one the generator and Python use)
 *             KSLOTS  [batch][kv_len] (one entry per key slot of each
 *                     sequence, as the key extent counts them: never the
 *                     pool's)
 *   dtype   the attn_dtype a TENSOR must have (ATTN_DTYPE_##dtype; KTAIL:
 *           see there); F32 for the others (unused)
 *   offset  the field's offset in the LP64/LLP64 ABIs: frozen, a different
 *           offset breaks compiled callers (tests/abi/layout_test.c)
 *   since   the minor version of 1.x that appended it
 *   rule    ATTN_OPT_RULE_##rule(v): what a VALUE must be, checked by
 *           validate.c for every operation before anything else of the
 *           options (ATTN_ERR_ARG otherwise):
 *             NONE    no rule of its own (not a value, or checked with
 *                     others: the paging description, the FP8 scales
 *                     against the K/V dtypes, the workspace per call)
 *             FLAGS   no bit but the ATTN_* flags attn.h defines
 *             FINITE  a finite float
 *             CAP     0, or a finite positive float whose reciprocal is
 *                     finite (every table computes cap * tanh(s * (1/cap)):
 *                     below 1/FLT_MAX a score of 0 would become 0 * inf)
 *             NONNEG  an integer >= 0
 *             SPLITS  0 .. ATTN_MAX_KV_SPLITS
 *             PRECISION  an attn_precision value
 *
 * Adding an option: its member at the end of attn_options (include/attn.h,
 * documented there, ATTN_OPTIONS_INIT), one line here, its use in the
 * driver (which reads a value as pb->opt.<field>, src/problem.h), its
 * float64 reference and test. Its reading, its value rule or its pointer and
 * dtype checks, byte range, frozen offset, the ctypes mirror and the
 * fuzzer's struct_size model follow from the line, and so does a value's
 * Python keyword (python/libattn/_keywords.py gives a value no row names a
 * keyword of its name, checked by its rule; regenerate _options.py, the
 * tests say how). A pointer option's keyword is a row of _keywords.py.
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

/* The rules (see above). */
#define ATTN_OPT_RULE_NONE(v) ((void)(v), 1)
#define ATTN_OPT_FLAGS_ALL (ATTN_CAUSAL | ATTN_SHARED_BLOCK_TABLE) /* every ATTN_* flag */
#define ATTN_OPT_RULE_FLAGS(v) (((v) & ~(uint32_t)ATTN_OPT_FLAGS_ALL) == 0)
#define ATTN_OPT_RULE_FINITE(v) isfinite(v)
#define ATTN_OPT_RULE_CAP(v) (isfinite(v) && (v) >= 0.0f && ((v) == 0.0f || isfinite(1.0f / (v))))
#define ATTN_OPT_RULE_NONNEG(v) ((v) >= 0)
#define ATTN_OPT_RULE_SPLITS(v) ((v) >= 0 && (v) <= ATTN_MAX_KV_SPLITS)
#define ATTN_OPT_RULE_PRECISION(v) ((v) >= ATTN_PRECISION_DEFAULT && (v) <= ATTN_PRECISION_INT8)

/* A TENSOR of this extent and dtype column also takes F16 and BF16: a key
   row's tail, and a float table the shape of the scores (the bias, 1.11),
   read in place and widened exactly. */
#define ATTN_OPT_TAKES_HALF(extent, dtype)                                                     \
    (ATTN_OPT_EXTENT_##extent == ATTN_OPT_EXTENT_KTAIL ||                                      \
     (ATTN_OPT_EXTENT_##extent == ATTN_OPT_EXTENT_SCORES && ATTN_DTYPE_##dtype == ATTN_DTYPE_F32))

/* ATTN_OPTION_COUNT: the number of lines. */
#define ATTN_OPT_X_POS(f, kind, extent, dtype, off, since, rule) ATTN_OPT_POS_##f,
enum { ATTN_OPTION_LIST(ATTN_OPT_X_POS) ATTN_OPTION_COUNT };
#undef ATTN_OPT_X_POS

/* Pointer options whose bytes are an input of every call that reads them:
   an upper bound of the input ranges options add (src/validate.h sizes its
   range sets with it, so a new pointer option can never overflow them). */
#define ATTN_OPT_X_IS_RANGE(f, kind, extent, dtype, off, since, rule)                        \
    +(ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_I32 || ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_I64 || \
      ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_TENSOR || ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_PAGES)
enum { ATTN_OPTION_INPUT_RANGES = 0 ATTN_OPTION_LIST(ATTN_OPT_X_IS_RANGE) };
#undef ATTN_OPT_X_IS_RANGE

/*
 * Compile-time checks of the lines against include/attn.h (C only): a
 * struct built from the lines, each member of its field's type, must have
 * every member at its field's offset and the size of attn_options. So each
 * line names a field, the lines are in the struct's order, and none is
 * missing unless it would fit in padding; that case, and the names, are
 * what tests/check_options.py catches by comparing the list with the
 * header's text. The frozen offsets are checked by tests/abi/layout_test.c.
 */
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

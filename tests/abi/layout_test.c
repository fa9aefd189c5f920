/* SPDX-License-Identifier: MIT */
/*
 * ABI facts abidiff cannot see, frozen at compile time.
 *
 * abidw records the types reachable from exported functions, so it misses
 * attn_dtype (attn_tensor.dtype is an int32_t), the flag bits and the
 * ATTN_OPTIONS_INIT initialiser, all of which compiled callers bake into
 * their binaries. Changing any value below breaks those binaries: it needs
 * a new major version, not an edit of this file. The offsets are those of
 * the LP64 and LLP64 ABIs (x86-64, AArch64); other data models check the
 * enumerators only.
 */
#include <stddef.h>

#include "attn.h"
#include "dtype_list.h"
#include "option_list.h"

#define FROZEN(expr) _Static_assert(expr, #expr)

FROZEN(ATTN_OK == 0);
FROZEN(ATTN_ERR_NULL == 1);
FROZEN(ATTN_ERR_SHAPE == 2);
FROZEN(ATTN_ERR_STRIDE == 3);
FROZEN(ATTN_ERR_ARG == 4);
FROZEN(ATTN_ERR_UNSUPPORTED == 5);
FROZEN(ATTN_ERR_NOMEM == 6);
FROZEN(ATTN_ERR_VERSION == 7);

FROZEN(ATTN_DTYPE_F32 == 0);
FROZEN(ATTN_DTYPE_F16 == 1);
FROZEN(ATTN_DTYPE_BF16 == 2);
FROZEN(ATTN_DTYPE_BOOL == 3);
FROZEN(ATTN_DTYPE_Q8_0 == 4);
FROZEN(ATTN_DTYPE_Q4_0 == 5);
FROZEN(ATTN_DTYPE_FP8_E4M3 == 6);
FROZEN(ATTN_DTYPE_FP8_E5M2 == 7);
FROZEN(ATTN_DTYPE_U8_ASYM == 8);
FROZEN(ATTN_DTYPE_U4_ASYM == 9);
/* every value of src/dtype_list.h frozen above: a dtype appended there
   stops this file until its value is frozen here and the count moves */
FROZEN(ATTN_DTYPE_COUNT == 10);

FROZEN(ATTN_ISA_AUTO == 0);
FROZEN(ATTN_ISA_SCALAR == 1);
FROZEN(ATTN_ISA_AVX2 == 2);
FROZEN(ATTN_ISA_AVX512 == 3);
FROZEN(ATTN_ISA_NEON == 4);
FROZEN(ATTN_ISA_SVE == 5);
FROZEN(ATTN_ISA_AMX == 6);

FROZEN(ATTN_SUPPORT_BUILT == 1u);
FROZEN(ATTN_SUPPORT_CPU == 2u);
FROZEN(ATTN_SUPPORT_OS == 4u);

FROZEN(ATTN_CAUSAL == 1u);
FROZEN(ATTN_SHARED_BLOCK_TABLE == 2u);
FROZEN(ATTN_PRECISION_DEFAULT == 0);
FROZEN(ATTN_PRECISION_BF16 == 1);
FROZEN(ATTN_PRECISION_INT8 == 2);
FROZEN(ATTN_VERSION == ((ATTN_VERSION_MAJOR << 16) | (ATTN_VERSION_MINOR << 8) | ATTN_VERSION_PATCH));
/* This file describes the ABI of major version 1 (libattn.so.1). */
FROZEN(ATTN_VERSION_MAJOR == 1);

#if UINTPTR_MAX == 0xffffffffffffffffu
FROZEN(sizeof(attn_shape) == 56);
FROZEN(offsetof(attn_shape, batch) == 0);
FROZEN(offsetof(attn_shape, q_heads) == 8);
FROZEN(offsetof(attn_shape, kv_heads) == 16);
FROZEN(offsetof(attn_shape, q_len) == 24);
FROZEN(offsetof(attn_shape, kv_len) == 32);
FROZEN(offsetof(attn_shape, head_dim) == 40);
FROZEN(offsetof(attn_shape, v_dim) == 48);

FROZEN(sizeof(attn_tensor) == 40);
FROZEN(offsetof(attn_tensor, data) == 0);
FROZEN(offsetof(attn_tensor, dtype) == 8);
FROZEN(offsetof(attn_tensor, batch_stride) == 16);
FROZEN(offsetof(attn_tensor, head_stride) == 24);
FROZEN(offsetof(attn_tensor, row_stride) == 32);

/* attn_options may grow at the end (struct_size versioning), never change before. */
FROZEN(sizeof(attn_options) >= 72);
/* every field at the offset its line of src/option_list.h records (the
   record is frozen: a line's offset never changes within a major version) */
#define FROZEN_OPTION(f, kind, extent, dtype, off, since, rule) \
    FROZEN(offsetof(attn_options, f) == (off));
ATTN_OPTION_LIST(FROZEN_OPTION)
#undef FROZEN_OPTION
/* 1.1's size was 192, with 4 bytes of tail padding a 1.1 caller's
   struct_size covers: 1.2 appended precision at 192, not 188, so that no
   field is ever read from an older caller's padding. */
/* 1.2's size was 200; 1.3 appended tree_parents at 200, 1.4 shared_prefix at 208,
   1.6 k_scales at 216 and v_scales at 224 (1.5 appended no field), 1.7
   topk_indices at 232 and topk at 240, 1.8 k_scale_group at 248 and
   v_scale_group at 256 (size 264), 1.9 k_tail at 264 and k_tail_dim at 272
   (size 280), 1.11 k_positions at 280 */
FROZEN(sizeof(attn_options) == 288); /* 1.11's size: a later minor appends and says so here */

/* attn_partial (1.1, attn_merge's input) */
FROZEN(offsetof(attn_partial, out) == 0);
FROZEN(offsetof(attn_partial, lse) == 40);
FROZEN(sizeof(attn_partial) == 48);

FROZEN(sizeof(attn_row_stats) == 24);
FROZEN(offsetof(attn_row_stats, lse) == 0);
FROZEN(offsetof(attn_row_stats, max_score) == 8);
FROZEN(offsetof(attn_row_stats, entropy) == 16);

/* attn_grads (1.1) grows at the end like attn_options. */
FROZEN(sizeof(attn_grads) >= 40);
FROZEN(offsetof(attn_grads, struct_size) == 0);
FROZEN(offsetof(attn_grads, dq) == 8);
FROZEN(offsetof(attn_grads, dk) == 16);
FROZEN(offsetof(attn_grads, dv) == 24);
FROZEN(offsetof(attn_grads, dbias) == 32);
FROZEN(offsetof(attn_grads, dsinks) == 40);

/* attn_kv_source (1.13, attn_forward_sources' second source) grows at the
   end like attn_options. */
FROZEN(offsetof(attn_kv_source, struct_size) == 0);
FROZEN(offsetof(attn_kv_source, flags) == 4);
FROZEN(offsetof(attn_kv_source, kv_len) == 8);
FROZEN(offsetof(attn_kv_source, k) == 16);
FROZEN(offsetof(attn_kv_source, v) == 24);
FROZEN(offsetof(attn_kv_source, kv_lens) == 32);
FROZEN(offsetof(attn_kv_source, indices) == 40);
FROZEN(offsetof(attn_kv_source, topk) == 48);
FROZEN(offsetof(attn_kv_source, k_scales) == 56);
FROZEN(offsetof(attn_kv_source, v_scales) == 64);
FROZEN(offsetof(attn_kv_source, k_scale_group) == 72);
FROZEN(offsetof(attn_kv_source, v_scale_group) == 80);
FROZEN(offsetof(attn_kv_source, k_tail) == 88);
FROZEN(offsetof(attn_kv_source, k_tail_dim) == 96);
FROZEN(sizeof(attn_kv_source) == 104); /* 1.13's size */
#endif

int main(void)
{
    /* ATTN_OPTIONS_INIT: struct_size first, every other field its default. */
    const attn_options opt = ATTN_OPTIONS_INIT;
    int bad = 0;
    bad |= opt.struct_size != sizeof(attn_options);
#define DEFAULT_IS_ZERO(f, kind, extent, dtype, off, since, rule) \
    bad |= ATTN_OPT_KIND_##kind != ATTN_OPT_KIND_HEADER && opt.f != 0;
    ATTN_OPTION_LIST(DEFAULT_IS_ZERO)
#undef DEFAULT_IS_ZERO
    const attn_grads grads = ATTN_GRADS_INIT;
    bad |= grads.struct_size != sizeof(attn_grads);
    bad |= grads.dq != NULL || grads.dk != NULL || grads.dv != NULL || grads.dbias != NULL;
    bad |= grads.dsinks != NULL;
    return bad;
}

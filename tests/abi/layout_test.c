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

FROZEN(ATTN_ISA_AUTO == 0);
FROZEN(ATTN_ISA_SCALAR == 1);
FROZEN(ATTN_ISA_AVX2 == 2);
FROZEN(ATTN_ISA_AVX512 == 3);
FROZEN(ATTN_ISA_NEON == 4);
FROZEN(ATTN_ISA_SVE == 5);

FROZEN(ATTN_CAUSAL == 1u);
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
FROZEN(offsetof(attn_options, struct_size) == 0);
FROZEN(offsetof(attn_options, flags) == 4);
FROZEN(offsetof(attn_options, scale) == 8);
FROZEN(offsetof(attn_options, softcap) == 12);
FROZEN(offsetof(attn_options, window) == 16);
FROZEN(offsetof(attn_options, q_lens) == 24);
FROZEN(offsetof(attn_options, kv_lens) == 32);
FROZEN(offsetof(attn_options, mask) == 40);
FROZEN(offsetof(attn_options, bias) == 48);
FROZEN(offsetof(attn_options, parallel_for) == 56);
FROZEN(offsetof(attn_options, parallel_ctx) == 64);
/* 1.1: score modifiers */
FROZEN(offsetof(attn_options, window_right) == 72);
FROZEN(offsetof(attn_options, sinks) == 80);
FROZEN(offsetof(attn_options, alibi_slopes) == 88);
/* 1.1: offset, packed and paged K/V */
FROZEN(offsetof(attn_options, q_offsets) == 96);
FROZEN(offsetof(attn_options, kv_offsets) == 104);
FROZEN(offsetof(attn_options, block_table) == 112);
FROZEN(offsetof(attn_options, block_table_stride) == 120);
FROZEN(offsetof(attn_options, block_size) == 128);
FROZEN(offsetof(attn_options, num_blocks) == 136);
/* 1.1: shards and split-KV */
FROZEN(offsetof(attn_options, q_pos) == 144);
FROZEN(offsetof(attn_options, k_pos) == 152);
FROZEN(offsetof(attn_options, workspace) == 160);
FROZEN(offsetof(attn_options, workspace_size) == 168);
FROZEN(offsetof(attn_options, kv_splits) == 176);
/* 1.1: FP8 K/V scales */
FROZEN(offsetof(attn_options, k_scale) == 180);
FROZEN(offsetof(attn_options, v_scale) == 184);
FROZEN(sizeof(attn_options) == 192); /* 1.1's size: a later minor appends and says so here */

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
#endif

int main(void)
{
    /* ATTN_OPTIONS_INIT: struct_size first, every other field its default. */
    const attn_options opt = ATTN_OPTIONS_INIT;
    int bad = 0;
    bad |= opt.struct_size != sizeof(attn_options);
    bad |= opt.flags != 0u || opt.scale != 0.0f || opt.softcap != 0.0f || opt.window != 0;
    bad |= opt.q_lens != NULL || opt.kv_lens != NULL || opt.mask != NULL || opt.bias != NULL;
    bad |= opt.parallel_for != NULL || opt.parallel_ctx != NULL;
    const attn_grads grads = ATTN_GRADS_INIT;
    bad |= grads.struct_size != sizeof(attn_grads);
    bad |= grads.dq != NULL || grads.dk != NULL || grads.dv != NULL || grads.dbias != NULL;
    bad |= grads.dsinks != NULL;
    return bad;
}

/* SPDX-License-Identifier: MIT */
/*
 * The one list of kernels: which (slot, dtype) kernels each ISA implements,
 * in which file, and its block sizes. The table's slots (src/dsp.h) and
 * every init are generated from it, and tests/kernels/checkasm.c walks it
 * (docs/DESIGN.md §2.2). A file's init does not compile while a listed
 * kernel is missing; -Wunused-function names an unlisted one.
 *
 * R(slot, dtype, kind, a): kind KV is one kernel per K/V dtype (the slot an
 * array indexed by ATTN_KV_*), ONE a single f32 kernel; a is passed through.
 */
#ifndef ATTN_KERNEL_LIST_H
#define ATTN_KERNEL_LIST_H

#define ATTN_SLOTS_TILE(R, dt, a)                                                           \
    R(qk_tile, dt, KV, a) R(pv_tile, dt, KV, a) R(to_f32, dt, KV, a) R(qk_diag, dt, KV, a) \
    R(to_f32_scaled, dt, KV, a)
#define ATTN_SLOTS_STORE(R, dt, a) R(from_f32, dt, KV, a)
#define ATTN_SLOTS_ROW(R, dt, a)                                                            \
    R(row_max, dt, ONE, a) R(exp_sum, dt, ONE, a) R(row_scale, dt, ONE, a)                  \
    R(softcap, dt, ONE, a) R(add_bias, dt, ONE, a) R(mask_bool, dt, ONE, a)                 \
    R(softmax_bwd, dt, ONE, a)
#define ATTN_SLOTS_ALIBI(R, dt, a) R(alibi, dt, ONE, a)
#define ATTN_SLOTS_MERGE(R, dt, a) R(wsum, dt, ONE, a)
#define ATTN_SLOTS_BACKWARD(R, dt, a) R(pt_tile, dt, ONE, a) R(score_grad, dt, ONE, a)
/*
 * The low-precision modes' slots (attn_precision, include/attn.h; rounding:
 * src/lowp.h). A slot still holding the scalar oracle after a table's init
 * is cleared by dispatch (src/dispatch.c), and the driver then computes as
 * the default mode does (attn_qk_kernel, src/driver/driver.h). The FP8 group
 * slots are NULL for the other dtypes.
 */
#define ATTN_SLOTS_GRP(R, dt, a) R(qk_grp, dt, KV, a) R(pv_grp, dt, KV, a)
#define ATTN_SLOTS_DOT_BF16(R, dt, a) R(qk_bf16, dt, KV, a) R(pv_bf16, dt, KV, a)
#define ATTN_SLOTS_DOT_BWD(R, dt, a) R(pt_bf16, dt, ONE, a)
#define ATTN_SLOTS_DOT_I8(R, dt, a) R(qk_i8, dt, KV, a)
/* P.V of the block formats' decoded v rounded to bf16: both low-precision
   modes (src/driver/driver.h, attn_pv_kernel) */
#define ATTN_SLOTS_DOT_QV(R, dt, a) R(pv_bf16, dt, KV, a)

/* The asymmetric record formats (kind ASYM): rows decoded into f32 before
   the F32 kernels (src/driver/kv.h), with their records' scales (the
   scales arguments unused); from_f32 encodes ONE record of n values. */
#define ATTN_SLOTS_ASYM(R, dt, a) R(to_f32_scaled, dt, KV, a) R(from_f32, dt, KV, a)

/* Every slot once, in the table's order: those every table fills first. */
#define ATTN_SLOT_LIST_FILLED(R, a)                                                         \
    ATTN_SLOTS_TILE(R, f32, a) ATTN_SLOTS_STORE(R, f32, a)                                  \
    ATTN_SLOTS_ROW(R, f32, a) ATTN_SLOTS_ALIBI(R, f32, a) ATTN_SLOTS_MERGE(R, f32, a)       \
    ATTN_SLOTS_BACKWARD(R, f32, a)
#define ATTN_SLOT_LIST(R, a)                                                                \
    ATTN_SLOT_LIST_FILLED(R, a) ATTN_SLOTS_GRP(R, fp8, a) ATTN_SLOTS_DOT_BF16(R, f32, a)   \
    ATTN_SLOTS_DOT_BWD(R, f32, a) ATTN_SLOTS_DOT_I8(R, f32, a)

/* The kernels of each kind of module file. */
#define ATTN_FILE_tile(R, a)                                                                \
    ATTN_SLOTS_TILE(R, f32, a) ATTN_SLOTS_TILE(R, f16, a) ATTN_SLOTS_TILE(R, bf16, a)
#define ATTN_FILE_quant(R, a)                                                               \
    ATTN_SLOTS_TILE(R, q8_0, a) ATTN_SLOTS_TILE(R, q4_0, a) ATTN_SLOTS_TILE(R, fp8, a)      \
    ATTN_SLOTS_TILE(R, e5m2, a) ATTN_SLOTS_GRP(R, fp8, a) ATTN_SLOTS_GRP(R, e5m2, a)
#define ATTN_FILE_store(R, a)                                                               \
    ATTN_SLOTS_STORE(R, f32, a) ATTN_SLOTS_STORE(R, f16, a) ATTN_SLOTS_STORE(R, bf16, a)    \
    ATTN_SLOTS_STORE(R, q8_0, a) ATTN_SLOTS_STORE(R, q4_0, a) ATTN_SLOTS_STORE(R, fp8, a)    \
    ATTN_SLOTS_STORE(R, e5m2, a)
#define ATTN_FILE_asym(R, a) ATTN_SLOTS_ASYM(R, u8, a) ATTN_SLOTS_ASYM(R, u4, a)
#define ATTN_FILE_row(R, a) ATTN_SLOTS_ROW(R, f32, a)
#define ATTN_FILE_alibi(R, a) ATTN_SLOTS_ALIBI(R, f32, a)
#define ATTN_FILE_merge(R, a) ATTN_SLOTS_MERGE(R, f32, a)
#define ATTN_FILE_backward(R, a) ATTN_SLOTS_BACKWARD(R, f32, a)
/* Two dot files: a CPU may have the int8 instructions without the bf16
   ones, so each has its own `need` bits. */
#define ATTN_FILE_dot(R, a)                                                                 \
    ATTN_SLOTS_DOT_BF16(R, f32, a) ATTN_SLOTS_DOT_BF16(R, f16, a)                            \
    ATTN_SLOTS_DOT_BF16(R, bf16, a) ATTN_SLOTS_DOT_BWD(R, f32, a)
#define ATTN_FILE_dot_i8(R, a) ATTN_SLOTS_DOT_I8(R, q8_0, a) ATTN_SLOTS_DOT_I8(R, q4_0, a)
/* the bf16 P.V of quantized v, built with its ISA's dot file (the same
   body: dot_<isa>.c holds both) */
#define ATTN_FILE_dot_qv(R, a) ATTN_SLOTS_DOT_QV(R, q8_0, a) ATTN_SLOTS_DOT_QV(R, q4_0, a)
/* dot_i8's kernels on another instruction, with dot_i8's bits: the list
   order decides which one a CPU with both keeps (a later file overwrites). */
#define ATTN_FILE_dot_i8_evex(R, a) ATTN_FILE_dot_i8(R, a)
#define ATTN_FILE_dot_i8_mmla(R, a) ATTN_FILE_dot_i8(R, a)

/*
 * Per ISA of src/isa_list.h: ATTN_BLOCKS_<isa> (block_q, block_k <=
 * ATTN_MAX_BLOCK_*) and ATTN_KERNELS_<isa>, F(file, need, a) per file,
 * installed when the CPU has the ATTN_CPU_* bits `need` (0: always). A slot
 * no file names keeps its base table's kernel.
 */

/* The oracle only has to be right. */
#define ATTN_BLOCKS_scalar 16, 64
#define ATTN_KERNELS_scalar(F, a)                                                           \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot, 0, a) F(dot_i8, 0, a) F(dot_qv, 0, a) F(store, 0, a)          \
    F(asym, 0, a)

/* 48 rows: whole 6-row groups of the packed qk_tile, and a 128-dim query
   block stays in L1. 256 keys amortise the per-block row work and give
   decode longer K/V runs. */
#define ATTN_BLOCKS_avx2 48, 256
/* dot_i8_evex serves CPUs with AVX512_VNNI but no AVX-VNNI. No bf16 file:
   no bf16 dot product outside AVX-512. The AVX-512 table uses this store. */
#define ATTN_KERNELS_avx2(F, a)                                                             \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot_i8_evex, ATTN_CPU_AVX512_VNNI, a)                               \
    F(dot_i8, ATTN_CPU_AVX_VNNI, a) F(store, 0, a) F(asym, 0, a)

/* 64 rows amortise the packed key panel; 128 keys keep the score tile and
   a 128-dim K or V block within L2. */
#define ATTN_BLOCKS_avx512 64, 128
#define ATTN_KERNELS_avx512(F, a)                                                           \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot, ATTN_CPU_AVX512_BF16, a) F(dot_i8, ATTN_CPU_AVX512_VNNI, a)     \
    F(dot_qv, ATTN_CPU_AVX512_BF16, a) F(asym, 0, a)

/* The AVX-512 table with the low-precision modes' products on AMX tiles
   (src/x86/dot_amx.c, src/x86/dot_i8_amx.c): the same blocks. */
#define ATTN_BLOCKS_amx ATTN_BLOCKS_avx512
#define ATTN_KERNELS_amx(F, a) F(dot, 0, a) F(dot_i8, 0, a) F(dot_qv, 0, a)

/* not tuned on AArch64 hardware */
#define ATTN_BLOCKS_neon 32, 128
#define ATTN_KERNELS_neon(F, a)                                                             \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot, ATTN_CPU_NEON_BF16, a) F(dot_i8, ATTN_CPU_NEON_DOTPROD, a)     \
    F(dot_i8_mmla, ATTN_CPU_NEON_I8MM, a) F(dot_qv, ATTN_CPU_NEON_BF16, a)                  \
    F(asym, 0, a)

/* 256 keys are still four vectors at 2048 bits; the 32 KiB score block
   stays in L1/L2. Files it lacks keep NEON's kernels. */
#define ATTN_BLOCKS_sve 32, 256
#define ATTN_KERNELS_sve(F, a)                                                              \
    F(tile, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a) F(dot, ATTN_CPU_SVE_BF16, a)   \
    F(dot_i8, ATTN_CPU_SVE_I8MM, a) F(dot_qv, ATTN_CPU_SVE_BF16, a)

/* ------------------------------------------------------------ generators */

#define ATTN_KL_CAT_(a, b) a##b
#define ATTN_KL_CAT(a, b) ATTN_KL_CAT_(a, b)

/* tests/kernels/test_kernels.c checks these tokens against src/dtype_list.h. */
#define ATTN_KV_IDX(dt) ATTN_KV_IDX_##dt
enum {
    ATTN_KV_IDX_f32 = ATTN_KV_F32,
    ATTN_KV_IDX_f16 = ATTN_KV_F16,
    ATTN_KV_IDX_bf16 = ATTN_KV_BF16,
    ATTN_KV_IDX_q8_0 = ATTN_KV_Q8_0,
    ATTN_KV_IDX_q4_0 = ATTN_KV_Q4_0,
    ATTN_KV_IDX_fp8 = ATTN_KV_FP8_E4M3,
    ATTN_KV_IDX_e5m2 = ATTN_KV_FP8_E5M2,
    ATTN_KV_IDX_u8 = ATTN_KV_U8_ASYM,
    ATTN_KV_IDX_u4 = ATTN_KV_U4_ASYM
};

#define ATTN_SLOT_KV(t, slot, dt) (t)->slot[ATTN_KV_IDX(dt)]
#define ATTN_SLOT_ONE(t, slot, dt) (t)->slot
#define ATTN_SLOT(t, slot, dt, kind) ATTN_SLOT_##kind(t, slot, dt)

/* At the end of a module file: its init. isa (the kernels' suffix) and ext
   (the init's) differ only under SIMDe (src/x86/avx512.h). */
#define ATTN_KERNEL_FILE(file, isa, ext)                                                    \
    void ATTN_KL_CAT(attn_dsp_init_##file##_, ext)(attn_dsp * t);                           \
    void ATTN_KL_CAT(attn_dsp_init_##file##_, ext)(attn_dsp * t)                            \
    {                                                                                       \
        ATTN_FILE_##file(ATTN_KL_STORE, isa)                                                \
    }
#define ATTN_KL_STORE(slot, dt, kind, isa) ATTN_SLOT(t, slot, dt, kind) = attn_##slot##_##dt##_##isa;

/* Once per ISA, in its row_<isa>.c (a module without one: its first file):
   the registry's init. */
#define ATTN_ISA_INIT(isa, ext)                                                             \
    ATTN_KERNELS_##isa(ATTN_KL_DECLARE, ext)                                                \
    void ATTN_KL_CAT(attn_dsp_init_, ext)(attn_dsp * t);                                    \
    void ATTN_KL_CAT(attn_dsp_init_, ext)(attn_dsp * t)                                     \
    {                                                                                       \
        ATTN_KL_BLOCKS(t, ATTN_BLOCKS_##isa);                                               \
        ATTN_KERNELS_##isa(ATTN_KL_CALL, ext)                                               \
    }
#define ATTN_KL_DECLARE(file, need, ext) void ATTN_KL_CAT(attn_dsp_init_##file##_, ext)(attn_dsp * t);
#define ATTN_KL_CALL(file, need, ext)                                                       \
    if ((t->cpu & (need)) == (unsigned)(need))                                              \
        ATTN_KL_CAT(attn_dsp_init_##file##_, ext)(t);
#define ATTN_KL_BLOCKS(t, ...) ATTN_KL_BLOCKS_(t, __VA_ARGS__)
#define ATTN_KL_BLOCKS_(t, q, k) ((t)->block_q = (q), (t)->block_k = (k))

#endif /* ATTN_KERNEL_LIST_H */

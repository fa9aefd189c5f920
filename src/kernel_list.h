/* SPDX-License-Identifier: MIT */
/*
 * The one list of kernels: which (slot, dtype) kernels each ISA's module
 * implements, in which of its files, and the ISA's block sizes. From it:
 *   - the slots of the kernel table (struct attn_dsp, src/dsp.h),
 *   - each module file's init, which stores that file's kernels in the
 *     table (ATTN_KERNEL_FILE below: one line at the end of the file),
 *   - each ISA's init (ATTN_ISA_INIT, in row_<isa>.c), which states the
 *     block sizes and calls the inits of the files the list names,
 *   - tests/kernels/checkasm.c, which walks every ISA's rows: each kernel against
 *     the scalar oracle, and with --bench timed against it on the same call.
 * A kernel is named attn_<slot>_<dtype>_<isa> (docs/DESIGN.md §2.2); a
 * file's init does not compile while a kernel the list names for it is
 * missing, and -Wunused-function (an error with -Dwerror=true) names a
 * kernel the list leaves out.
 *
 * Slots, by the module file that implements them: R(slot, dtype, kind, a)
 *   kind  KV:  one kernel per K/V dtype; the slot is an array indexed by
 *              ATTN_KV_* (src/dsp.h); dtype is the row's K/V dtype
 *         ONE: one kernel, f32 (dtype is f32)
 *   a     passed through, for the generators
 * A slot's signature is its function type attn_<slot>_fn in src/dsp.h.
 */
#ifndef ATTN_KERNEL_LIST_H
#define ATTN_KERNEL_LIST_H

/* tile_<isa>.c, quant_<isa>.c: the tile family, one variant per K/V dtype */
#define ATTN_SLOTS_TILE(R, dt, a)                                                           \
    R(qk_tile, dt, KV, a) R(pv_tile, dt, KV, a) R(to_f32, dt, KV, a) R(qk_diag, dt, KV, a) \
    R(to_f32_scaled, dt, KV, a)
/* store_<isa>.c: f32 rows into a cache of the variant's dtype (attn_cache_append) */
#define ATTN_SLOTS_STORE(R, dt, a) R(from_f32, dt, KV, a)
/* row_<isa>.c */
#define ATTN_SLOTS_ROW(R, dt, a)                                                            \
    R(row_max, dt, ONE, a) R(exp_sum, dt, ONE, a) R(row_scale, dt, ONE, a)                  \
    R(softcap, dt, ONE, a) R(add_bias, dt, ONE, a) R(mask_bool, dt, ONE, a)                 \
    R(softmax_bwd, dt, ONE, a)
/* alibi_<isa>.c */
#define ATTN_SLOTS_ALIBI(R, dt, a) R(alibi, dt, ONE, a)
/* merge_<isa>.c */
#define ATTN_SLOTS_MERGE(R, dt, a) R(wsum, dt, ONE, a)
/* backward_<isa>.c */
#define ATTN_SLOTS_BACKWARD(R, dt, a) R(pt_tile, dt, ONE, a) R(score_grad, dt, ONE, a)
/*
 * dot_<isa>.c (bf16) and dot_i8_<isa>.c (int8): the low-precision modes
 * (attn_precision, include/attn.h), on dot-product instructions. Signatures
 * are qk_tile's and pv_tile's; what they round is src/lowp.h's. The scalar
 * file (both kinds in src/scalar/dot_scalar.c) is their oracle; a table
 * whose slot still holds the oracle after its init has none, and dispatch
 * clears the slot (src/dispatch.c): the driver then computes as the
 * default mode does (src/driver/driver.h, attn_qk_kernel).
 *   qk_bf16, pv_bf16  the float K/V dtypes (bf16 mode; qk_bf16 also serves
 *                     the default mode when q and k are both BF16)
 *   pt_bf16           the backward's pt_tile in the bf16 mode (one, f32)
 *   qk_i8             the block formats (int8 mode)
 */
/* quant_<isa>.c, the FP8 dtypes only: their scale groups read in place
   (qk_grp, pv_grp: src/dsp.h); the other dtypes' entries stay NULL */
#define ATTN_SLOTS_GRP(R, dt, a) R(qk_grp, dt, KV, a) R(pv_grp, dt, KV, a)
#define ATTN_SLOTS_DOT_BF16(R, dt, a) R(qk_bf16, dt, KV, a) R(pv_bf16, dt, KV, a)
#define ATTN_SLOTS_DOT_BWD(R, dt, a) R(pt_bf16, dt, ONE, a)
#define ATTN_SLOTS_DOT_I8(R, dt, a) R(qk_i8, dt, KV, a)

/* Every slot once, in the table's order: those every table fills, then the
   FP8 group slots (NULL but for the FP8 dtypes), then the dot slots, which
   a table without dot-product kernels leaves NULL. */
#define ATTN_SLOT_LIST_FILLED(R, a)                                                         \
    ATTN_SLOTS_TILE(R, f32, a) ATTN_SLOTS_STORE(R, f32, a)                                  \
    ATTN_SLOTS_ROW(R, f32, a) ATTN_SLOTS_ALIBI(R, f32, a) ATTN_SLOTS_MERGE(R, f32, a)       \
    ATTN_SLOTS_BACKWARD(R, f32, a)
#define ATTN_SLOT_LIST(R, a)                                                                \
    ATTN_SLOT_LIST_FILLED(R, a) ATTN_SLOTS_GRP(R, fp8, a) ATTN_SLOTS_DOT_BF16(R, f32, a)   \
    ATTN_SLOTS_DOT_BWD(R, f32, a) ATTN_SLOTS_DOT_I8(R, f32, a)

/*
 * The rows of each kind of module file: R(slot, dtype, kind, a) per kernel
 * (a: passed through). The float K/V dtypes are the tile files', the
 * quantized ones the quant files' (one tile body per ISA serves both:
 * src/tile_variants.h).
 */
#define ATTN_FILE_tile(R, a)                                                                \
    ATTN_SLOTS_TILE(R, f32, a) ATTN_SLOTS_TILE(R, f16, a) ATTN_SLOTS_TILE(R, bf16, a)
#define ATTN_FILE_quant(R, a)                                                               \
    ATTN_SLOTS_TILE(R, q8_0, a) ATTN_SLOTS_TILE(R, q4_0, a) ATTN_SLOTS_TILE(R, fp8, a)      \
    ATTN_SLOTS_TILE(R, e5m2, a) ATTN_SLOTS_GRP(R, fp8, a) ATTN_SLOTS_GRP(R, e5m2, a)
#define ATTN_FILE_store(R, a)                                                               \
    ATTN_SLOTS_STORE(R, f32, a) ATTN_SLOTS_STORE(R, f16, a) ATTN_SLOTS_STORE(R, bf16, a)    \
    ATTN_SLOTS_STORE(R, q8_0, a) ATTN_SLOTS_STORE(R, q4_0, a) ATTN_SLOTS_STORE(R, fp8, a)    \
    ATTN_SLOTS_STORE(R, e5m2, a)
#define ATTN_FILE_row(R, a) ATTN_SLOTS_ROW(R, f32, a)
#define ATTN_FILE_alibi(R, a) ATTN_SLOTS_ALIBI(R, f32, a)
#define ATTN_FILE_merge(R, a) ATTN_SLOTS_MERGE(R, f32, a)
#define ATTN_FILE_backward(R, a) ATTN_SLOTS_BACKWARD(R, f32, a)
/* The two dot files need different instructions (a CPU may have the int8
   ones without the bf16 ones: Ice Lake, Neoverse N1), so each has its own
   `need` bits in the list below: dot_<isa>.c the bf16 slots, dot_i8_<isa>.c
   the int8 one. */
#define ATTN_FILE_dot(R, a)                                                                 \
    ATTN_SLOTS_DOT_BF16(R, f32, a) ATTN_SLOTS_DOT_BF16(R, f16, a)                            \
    ATTN_SLOTS_DOT_BF16(R, bf16, a) ATTN_SLOTS_DOT_BWD(R, f32, a)
#define ATTN_FILE_dot_i8(R, a) ATTN_SLOTS_DOT_I8(R, q8_0, a) ATTN_SLOTS_DOT_I8(R, q4_0, a)
/* dot_amx: the bf16 mode's Q.K^T and P.V on AMX tiles
   (src/x86/dot_amx_avx512.c), listed after dot, whose kernels it stores
   over where the CPU has AMX and the OS grants it (ATTN_CPU_AMX_BF16) */
#define ATTN_FILE_dot_amx(R, a)                                                             \
    ATTN_SLOTS_DOT_BF16(R, f32, a) ATTN_SLOTS_DOT_BF16(R, f16, a)                            \
    ATTN_SLOTS_DOT_BF16(R, bf16, a)
/* dot_i8's kernels from the same source on another instruction: the AVX2
   table's EVEX vpdpbusd (src/x86/dot_i8_evex_avx2.c), listed before dot_i8,
   whose init then stores over it where the CPU has both; NEON's SMMLA
   (src/arm/dot_i8_mmla_neon.c), listed after dot_i8, over which it
   stores. Each gives dot_i8's bits (checkasm compares them where a CPU
   runs both). */
#define ATTN_FILE_dot_i8_evex(R, a) ATTN_FILE_dot_i8(R, a)
#define ATTN_FILE_dot_i8_mmla(R, a) ATTN_FILE_dot_i8(R, a)

/*
 * The kernel list: per ISA of the registry (src/isa_list.h, by its name),
 *   ATTN_BLOCKS_<isa>        block_q, block_k: the driver's tile (query
 *                            rows and keys per block, <= ATTN_MAX_BLOCK_*)
 *   ATTN_KERNELS_<isa>(F, a) F(file, need, a) per module file it has,
 *                            whose kernels are the rows of ATTN_FILE_<file>,
 *                            installed when the CPU has the ATTN_CPU_* bits
 *                            `need` (src/dsp.h) beyond the ISA's own (0:
 *                            always). A slot no file of it names keeps its
 *                            base table's kernel (src/isa_list.h).
 * Expanded, one row (slot, dtype, ISA) per kernel.
 */

/* The oracle: small tiles, it only has to be right. */
#define ATTN_BLOCKS_scalar 16, 64
#define ATTN_KERNELS_scalar(F, a)                                                           \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot, 0, a) F(dot_i8, 0, a) F(store, 0, a)

/*
 * 48 query rows: eight full 6-row groups of the packed qk_tile (32 left
 * two 4-row groups: scores went from 70 % to 76 % of FMA peak at d 128),
 * and at head_dim 128 the f32 query block (24 KiB) stays in L1 while the
 * key panels pass over it. The fused forward is capped by the driver's
 * 64 KiB scratch (q + a rows x 256 score tile + accumulator) to 32 rows at
 * d 128, a multiple of pv_tile's 4 rows. 256 keys: the per-block row work
 * (max, rescale) is amortised over more keys, and decode streams K and V
 * in longer runs.
 */
#define ATTN_BLOCKS_avx2 48, 256
/* dot_i8: AVX-VNNI (VEX vpdpbusd: Alder Lake, Sapphire Rapids, Zen 5);
   dot_i8_evex, the same kernel on AVX512_VNNI's EVEX vpdpbusd at 256 bits,
   where AVX-VNNI is missing (Zen 4, whose default table this is; Ice Lake
   and Cascade Lake under ATTN_ISA=avx2). No bf16 file: AVX2-class CPUs
   have no bf16 dot product outside AVX-512 (AVX-NE-CONVERT only converts).
   store: also the AVX-512 table's (it has no store file of its own). */
#define ATTN_KERNELS_avx2(F, a)                                                             \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot_i8_evex, ATTN_CPU_AVX512_VNNI, a)                               \
    F(dot_i8, ATTN_CPU_AVX_VNNI, a) F(store, 0, a)

/*
 * 64 query rows amortise qk_tile's packed key panel
 * (src/x86/tile_avx512_tmpl.h); 128 keys keep the 32 KiB score tile and a
 * 128-dim f32 K or V block (64 KiB) within L2 while leaving the per-row
 * kernels 8 vectors a row.
 */
#define ATTN_BLOCKS_avx512 64, 128
/* dot: AVX512_BF16 (vdpbf16ps: Cooper Lake, Sapphire Rapids and later, Zen 4
   and later); dot_i8: AVX512_VNNI (vpdpbusd: also Cascade Lake, Ice Lake) */
#define ATTN_KERNELS_avx512(F, a)                                                           \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot, ATTN_CPU_AVX512_BF16, a) F(dot_i8, ATTN_CPU_AVX512_VNNI, a)     \
    F(dot_amx, ATTN_CPU_AVX512_BF16 | ATTN_CPU_AMX_BF16, a)

/* 32 x 128: the AVX2 table's sizes when this table was written (AVX2 has
   since moved to 48 x 256); not measured on AArch64 hardware. */
#define ATTN_BLOCKS_neon 32, 128
/* dot: FEAT_BF16 (BFMMLA: Neoverse V1, N2, V2 and later); dot_i8:
   FEAT_DotProd (SDOT: also Neoverse N1, Cortex-A55, A76 and later);
   dot_i8_mmla: FEAT_I8MM (SMMLA: Neoverse V1, N2, V2) */
#define ATTN_KERNELS_neon(F, a)                                                             \
    F(tile, 0, a) F(quant, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a)                 \
    F(backward, 0, a) F(dot, ATTN_CPU_NEON_BF16, a) F(dot_i8, ATTN_CPU_NEON_DOTPROD, a)     \
    F(dot_i8_mmla, ATTN_CPU_NEON_I8MM, a)

/*
 * block_k = 256: at 128-bit vectors a 256-key row is 64 vectors, and at
 * 2048 bits still four; block_q = 32 is a multiple of the 4-row qk/pv
 * micro-kernels and keeps the score block (32 x 256 floats, 32 KiB) in
 * L1/L2 beside the K/V rows. No quant_ or backward_ files: SVE keeps
 * NEON's kernels there.
 */
#define ATTN_BLOCKS_sve 32, 256
/* dot: SVE's BFMMLA (HWCAP2_SVEBF16: Neoverse V1, N2, V2), the NEON dot
   file built again on Z registers (src/arm/dot_sve.c); dot_i8: SVE's
   SMMLA (HWCAP2_SVEI8MM), the NEON int8 file built again
   (src/arm/dot_i8_sve.c); without them the table keeps NEON's */
#define ATTN_KERNELS_sve(F, a)                                                              \
    F(tile, 0, a) F(row, 0, a) F(alibi, 0, a) F(merge, 0, a) F(dot, ATTN_CPU_SVE_BF16, a)   \
    F(dot_i8, ATTN_CPU_SVE_I8MM, a)

/* ------------------------------------------------------------ generators */

#define ATTN_KL_CAT_(a, b) a##b
#define ATTN_KL_CAT(a, b) ATTN_KL_CAT_(a, b)

/* The ATTN_KV_* index of a kernel row's dtype token (f32 for ONE slots);
   tests/kernels/test_kernels.c checks each token against src/dtype_list.h's names. */
#define ATTN_KV_IDX(dt) ATTN_KV_IDX_##dt
enum {
    ATTN_KV_IDX_f32 = ATTN_KV_F32,
    ATTN_KV_IDX_f16 = ATTN_KV_F16,
    ATTN_KV_IDX_bf16 = ATTN_KV_BF16,
    ATTN_KV_IDX_q8_0 = ATTN_KV_Q8_0,
    ATTN_KV_IDX_q4_0 = ATTN_KV_Q4_0,
    ATTN_KV_IDX_fp8 = ATTN_KV_FP8_E4M3,
    ATTN_KV_IDX_e5m2 = ATTN_KV_FP8_E5M2
};

/* The table member a row fills: an element of a KV slot's array, or the
   ONE slot itself. */
#define ATTN_SLOT_KV(t, slot, dt) (t)->slot[ATTN_KV_IDX(dt)]
#define ATTN_SLOT_ONE(t, slot, dt) (t)->slot
#define ATTN_SLOT(t, slot, dt, kind) ATTN_SLOT_##kind(t, slot, dt)

/*
 * At the end of a module file: attn_dsp_init_<file>_<ext>, which stores
 * the kernels the list names for that file (file: tile, quant, row, alibi,
 * merge, backward, dot, dot_i8) in the table. isa is the kernels' suffix, ext the
 * init's: they differ only for the AVX-512 files built against SIMDe
 * (src/x86/avx512.h).
 */
#define ATTN_KERNEL_FILE(file, isa, ext)                                                    \
    void ATTN_KL_CAT(attn_dsp_init_##file##_, ext)(attn_dsp * t);                           \
    void ATTN_KL_CAT(attn_dsp_init_##file##_, ext)(attn_dsp * t)                            \
    {                                                                                       \
        ATTN_FILE_##file(ATTN_KL_STORE, isa)                                                \
    }
#define ATTN_KL_STORE(slot, dt, kind, isa) ATTN_SLOT(t, slot, dt, kind) = attn_##slot##_##dt##_##isa;

/* Once per ISA, in its row_<isa>.c: the registry's init attn_dsp_init_<ext>,
   which states the block sizes and runs the inits of the ISA's files. */
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

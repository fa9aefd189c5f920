/* SPDX-License-Identifier: MIT */
/*
 * The kernel table: one struct of function pointers per ISA.
 *
 * Kernels are small and alike: they work on one row or one tile, never loop
 * over batch or heads, never validate, never allocate, never read globals.
 * Everything else (masks, tiling, online softmax, stats, threading) is the
 * driver's job (src/driver/), written once for every ISA.
 *
 * All arithmetic is f32 (the dot file's kernels: on rounded inputs). K and V may be F32, F16, BF16, Q8_0, Q4_0 or
 * FP8_E4M3: the tile kernels come in one variant per dtype and convert
 * (dequantize) inside their loads.
 * Strides are in elements of the array they describe; for the block formats
 * (Q8_0, Q4_0) an element is one 32-value block (34 or 18 bytes), and the
 * row lengths d, dv, n given to their kernels are multiples of 32. The FP8
 * variants decode the bare E4M3 value and the driver applies the scales:
 * k_scale folded into qk_tile's scale, v_scale by one more row_scale of the
 * normalised output row (not folded into 1/l, which could go subnormal:
 * src/driver/forward.c).
 */
#ifndef ATTN_DSP_H
#define ATTN_DSP_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"
#include "dtype_list.h" /* ATTN_QBLOCK, ATTN_Q8_0_BYTES, ATTN_Q4_0_BYTES */

#ifdef __cplusplus
extern "C" {
#endif

/* Index of the K/V dtype variants in the table: ATTN_KV_<ID> is the
   attn_dtype value, one per line of src/dtype_list.h (the BOOL index is no
   K/V dtype: its slots stay NULL). The float dtypes come first (counted and
   checked below), so the query conversion (to_f32 of q, which is
   F32/F16/BF16) and the float-only loops use [0, ATTN_KV_FLOAT_DTYPES). */
#define ATTN_KV_X_INDEX(ID, name, block, bytes, kind, q, kv, out) ATTN_KV_##ID = ATTN_DTYPE_##ID,
#define ATTN_KV_X_FLOAT(ID, name, block, bytes, kind, q, kv, out) \
    +(ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_FLOAT)
enum {
    ATTN_DTYPE_LIST(ATTN_KV_X_INDEX)
    ATTN_KV_FLOAT_DTYPES = 0 ATTN_DTYPE_LIST(ATTN_KV_X_FLOAT),
    ATTN_KV_DTYPES = ATTN_DTYPE_COUNT
};
#undef ATTN_KV_X_INDEX
#undef ATTN_KV_X_FLOAT
#define ATTN_KV_X_FLOAT_FIRST(ID, name, block, bytes, kind, q, kv, out)              \
    ATTN_DTYPE_STATIC_ASSERT(((int)ATTN_DTYPE_##ID < (int)ATTN_KV_FLOAT_DTYPES) ==        \
                                 (ATTN_DTYPE_KIND_##kind == ATTN_DTYPE_KIND_FLOAT),   \
                             #ID ": the float dtypes must be [0, ATTN_KV_FLOAT_DTYPES)");
ATTN_DTYPE_LIST(ATTN_KV_X_FLOAT_FIRST)
#undef ATTN_KV_X_FLOAT_FIRST

/* Upper bounds of the driver's tiles (the per-ISA sizes are <= these). */
#define ATTN_MAX_BLOCK_Q 64
#define ATTN_MAX_BLOCK_K 256
/* Query rows of one qk_tile call at most: attn_scores passes more than a
   block_q (src/driver/scores.c), the other operations a block_q at most. */
#define ATTN_MAX_QK_ROWS 128

/*
 * s[r*s_stride + c] = scale * dot(q[r*q_stride + 0..d), k[c*k_stride + 0..d))
 * for r < nq, c < nk. q is f32; k is the variant's dtype.
 */
typedef void attn_qk_tile_fn(const float *q, ptrdiff_t q_stride,
                                const void *k, ptrdiff_t k_stride,
                                size_t nq, size_t nk, size_t d, float scale,
                                float *s, ptrdiff_t s_stride);

/*
 * s[r] = scale * dot(q[r*q_stride + 0..d), rows[r][0..d)) for r < nq, each
 * summed bit for bit as the table's qk_tile, of any K/V dtype, sums a score
 * of a call with nq query rows and the same d (its keys do not matter):
 * where rows[r] holds a key's values, s[r] is that key's score. The
 * backward's D = dO . O comes from here, so that a row whose output is a
 * key's V (one visible key) gets dP - D = 0 exactly. rows[r] are in the
 * variant's dtype (tests/kernels/checkasm.c checks both claims).
 */
typedef void attn_qk_diag_fn(const float *q, ptrdiff_t q_stride, const void *const *rows,
                             size_t nq, size_t d, float scale, float *s);

/*
 * acc[r*acc_stride + 0..dv) += sum_{c<nk} p[r*p_stride + c] * v[c*v_stride + 0..dv)
 * for r < nq. v is the variant's dtype.
 */
typedef void attn_pv_tile_fn(const float *p, ptrdiff_t p_stride,
                                const void *v, ptrdiff_t v_stride,
                                size_t nq, size_t nk, size_t dv,
                                float *acc, ptrdiff_t acc_stride);

/* dst[0..n) = (float)src[0..n) for the variant's dtype (FP8: the bare
   E4M3 value, no scale). */
typedef void attn_to_f32_fn(const void *src, float *dst, size_t n);

/* FP8 scales per group of channels (attn.h 1.8): `rows` rows of n values
   of the variant's dtype, src_stride BYTES apart, decoded as to_f32 does
   into rows dst_stride floats apart, value i of row r times (one f32
   rounding) scales[r * scale_stride + i / group]; n % group == 0. */
typedef void attn_to_f32_scaled_fn(const void *src, ptrdiff_t src_stride, size_t rows, size_t n,
                                   const float *scales, ptrdiff_t scale_stride, size_t group,
                                   float *dst, ptrdiff_t dst_stride);

/*
 * FP8 scale groups read in place (attn.h 1.8): qk_tile and pv_tile on the
 * values fl32(x_ci * scales[c * scale_stride + i / group]), x_ci value i of
 * key row c decoded as to_f32 does: the values attn_kv_stage's
 * to_f32_scaled would write, multiplied where they are loaded (one f32
 * rounding each, so the call is the F32 call on the staged rows; each
 * kernel sums as its few-row qk_tile / pv_tile does). scale_stride is in
 * floats; group is a multiple of ATTN_GRP_STEP (no vector of a kernel then
 * spans two groups) and divides d (dv). Only the FP8 dtypes have them.
 */
#define ATTN_GRP_STEP 16
typedef void attn_qk_grp_fn(const float *q, ptrdiff_t q_stride, const void *k, ptrdiff_t k_stride,
                            size_t nq, size_t nk, size_t d, float scale, float *s,
                            ptrdiff_t s_stride, const float *scales, ptrdiff_t scale_stride,
                            size_t group);
typedef void attn_pv_grp_fn(const float *p, ptrdiff_t p_stride, const void *v, ptrdiff_t v_stride,
                            size_t nq, size_t nk, size_t dv, float *acc, ptrdiff_t acc_stride,
                            const float *scales, ptrdiff_t scale_stride, size_t group);

/*
 * dst = the n values of src in the variant's dtype, each rounded once as
 * attn_cache_append documents (attn.h): F32 as is, F16 and BF16 to nearest
 * even, Q8_0, Q4_0 and FP8 bit for bit as attn_quantize (FP8: src / scale,
 * scale > 0; Q8_0, Q4_0: n a multiple of 32). Returns 1 when the row can be
 * stored, which for Q8_0 and Q4_0 means what attn_quantize_row_ok
 * (src/quant.h) says (every value finite, every block scale finite in
 * binary16), and is always so for the others; on 0 the bytes of dst are
 * unspecified (none past the row's).
 */
typedef int attn_from_f32_fn(const float *src, void *dst, size_t n, float scale);

/* max of x[0..n), n >= 1; -inf for a row of -inf; NaN when any x[j] is NaN
   (the driver relies on it: a NaN row must never look fully masked). */
typedef float attn_row_max_fn(const float *x, size_t n);

/*
 * x[j] = exp(x[j] - max) in place and returns sum_j x[j]; max is finite.
 * When weighted != NULL also stores sum_j exp(x_j - max) * (x_j - max),
 * where -inf entries contribute exactly 0 (for the entropy).
 */
typedef float attn_exp_sum_fn(float *x, size_t n, float max, float *weighted);

/* x[0..n) *= s */
typedef void attn_row_scale_fn(float *x, size_t n, float s);

/* x = cap * tanh(x / cap), cap > 0 */
typedef void attn_softcap_fn(float *x, size_t n, float cap);

/* x[j] += bias[j] */
typedef void attn_add_bias_fn(float *x, const float *bias, size_t n);

/* x[j] = mask[j] ? x[j] : -inf */
typedef void attn_mask_bool_fn(float *x, const uint8_t *mask, size_t n);

/* ds[j] = p[j] * (dp[j] - sum_i p[i] dp[i]); ds may equal p or dp. */
typedef void attn_softmax_bwd_fn(const float *p, const float *dp, float *ds, size_t n);

/*
 * The transposed tile of the attention backward (dV = P^T.dO, dK = dS^T.Q):
 * acc[c*acc_stride + 0..dim) += sum_{r<nq} p[r*p_stride + c] * x[r*x_stride + 0..dim)
 * for c < nk. Everything f32 (the driver converts x first). Each element's
 * sum runs over the rows from zero, one chain in row order, and is then
 * added to acc with one addition (the scalar oracle's order, every
 * kernel's for the driver's calls, nq <= ATTN_MAX_BLOCK_Q): the driver's
 * many calls onto one dk or dv row are then a two-level sum
 * (tests/tolerance.h, "backward").
 */
typedef void attn_pt_tile_fn(const float *p, ptrdiff_t p_stride,
                                const float *x, ptrdiff_t x_stride,
                                size_t nq, size_t nk, size_t dim,
                                float *acc, ptrdiff_t acc_stride);

/* dp[j] = p[j] * (dp[j] - d) in place (the softmax backward of a row whose
   sum_j p_j dp_j is known: d = rowsum(dO * O)). */
typedef void attn_score_grad_fn(const float *p, float *dp, float d, size_t n);

/*
 * x[j] -= slope * |pos - j| for j < n: ALiBi's distance penalty, pos being
 * the query's aligned key position relative to x[0]. The caller guarantees
 * |pos - j| < 2^31 for every j < n.
 */
typedef void attn_alibi_fn(float *x, size_t n, float slope, int64_t pos);

/*
 * y[j] += sum_{p < parts} w[p] * x[p][j] for j < n, accumulated in the order
 * p = 0, 1, ...: y[j] + w[0] x[0][j], then + w[1] x[1][j], ..., one multiply-
 * add (fused or not) per part. So splitting the parts over several calls
 * gives the same bits, and so does any vector width. parts >= 1; y overlaps
 * no x[p]. The merge of partial results (split-KV and attn_merge) is this.
 */
typedef void attn_wsum_fn(float *y, const float *const *x, const float *w, size_t parts,
                             size_t n);
/* The low-precision modes' kernels (src/kernel_list.h, dot file): the
   signatures of qk_tile, pv_tile and pt_tile, products rounded as
   src/lowp.h says. */
typedef attn_qk_tile_fn attn_qk_bf16_fn;
typedef attn_pv_tile_fn attn_pv_bf16_fn;
typedef attn_pt_tile_fn attn_pt_bf16_fn;
typedef attn_qk_tile_fn attn_qk_i8_fn;

/* Parts the driver passes to one wsum call at most. */
#define ATTN_WSUM_MAX_PARTS 32

/* CPU capability bits (attn_cpu_detect, src/cpu.c): what an ISA of the
   registry needs (src/isa_list.h), and what a module file needs beyond its
   ISA (src/kernel_list.h). */
#define ATTN_CPU_AVX2 (1u << 0)   /* AVX2 + FMA3 + F16C */
#define ATTN_CPU_AVX512 (1u << 1) /* AVX-512 F + BW + DQ + VL */
#define ATTN_CPU_NEON (1u << 2)
#define ATTN_CPU_SVE (1u << 3)
/* The CPU runs 512-bit vectors on 256-bit units (AMD Zen 4): set with
   ATTN_CPU_AVX512 when known, never alone. */
#define ATTN_CPU_NARROW512 (1u << 4)
/* With ATTN_CPU_AVX512 only: vdpbf16ps, and vpdpbusd on 512-bit vectors. */
#define ATTN_CPU_AVX512_BF16 (1u << 5)
#define ATTN_CPU_AVX512_VNNI (1u << 6)
/* With ATTN_CPU_NEON only: the AdvSIMD dot products, FEAT_DotProd (SDOT,
   UDOT) and FEAT_BF16 (BFDOT, BFMMLA, BFMLALB/T, BFCVT). */
#define ATTN_CPU_NEON_DOTPROD (1u << 7)
#define ATTN_CPU_NEON_BF16 (1u << 8)
/* With ATTN_CPU_AVX2 only: AVX-VNNI, vpdpbusd in its VEX form on 256-bit
   vectors (Alder Lake, Sapphire Rapids, Zen 5). */
#define ATTN_CPU_AVX_VNNI (1u << 9)
/* With ATTN_CPU_NEON only: FEAT_I8MM, SMMLA (Neoverse V1, N2, V2). */
#define ATTN_CPU_NEON_I8MM (1u << 10)
/* With ATTN_CPU_SVE only: SVE's forms of FEAT_BF16 (BFMMLA, BFDOT,
   BFMLALB on Z registers) and FEAT_I8MM (SMMLA), which Linux reports apart
   from the AdvSIMD ones (HWCAP2_SVEBF16, HWCAP2_SVEI8MM). */
#define ATTN_CPU_SVE_BF16 (1u << 11)
#define ATTN_CPU_SVE_I8MM (1u << 12)
/* With ATTN_CPU_AVX512_BF16 only: AMX-TILE and AMX-BF16 (tdpbf16ps), and
   the OS granted this process the tile data state (src/cpu.c). */
#define ATTN_CPU_AMX_BF16 (1u << 13)

#include "kernel_list.h" /* after the ATTN_KV_* values: it names them */

/* One member per slot of src/kernel_list.h (a KV slot is an array over the
   K/V dtypes); a table starts as a copy of its base's, so every ISA's
   table has a kernel in every slot (tests/kernels/test_kernels.c, "list"). */
#define ATTN_DSP_MEMBER_KV(slot) attn_##slot##_fn *slot[ATTN_KV_DTYPES];
#define ATTN_DSP_MEMBER_ONE(slot) attn_##slot##_fn *slot;
#define ATTN_DSP_MEMBER(slot, dt, kind, a) ATTN_DSP_MEMBER_##kind(slot)

typedef struct attn_dsp {
    attn_isa isa;
    const char *isa_name;
    /* The ATTN_CPU_* bits the table was built for: its init installs a
       file whose extra bits are missing here (src/kernel_list.h) not at all. */
    unsigned cpu;
    /* Driver tile: query rows and keys per block (<= ATTN_MAX_BLOCK_*). */
    uint32_t block_q, block_k;

    ATTN_SLOT_LIST(ATTN_DSP_MEMBER, _)
} attn_dsp;

#ifdef __cplusplus
}
#endif

#endif /* ATTN_DSP_H */

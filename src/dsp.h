/* SPDX-License-Identifier: MIT */
/*
 * The kernel table: one struct of function pointers per ISA. Kernels work
 * on one row or tile and never loop over batch or heads, validate, allocate
 * or read globals; the rest is the driver's (src/driver/), written once.
 *
 * Arithmetic is f32. Tile kernels have one variant per K/V dtype
 * (src/dtype_list.h) and decode inside their loads. Strides are in elements;
 * for the block formats an element is one 32-value block and d, dv, n are
 * multiples of 32. FP8 variants decode the bare value; the driver applies
 * the scales (src/driver/forward.c says where).
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

/* ATTN_KV_<ID> is the attn_dtype value (BOOL's slots stay NULL). The float
   dtypes must come first: q's conversion and the float-only loops use
   [0, ATTN_KV_FLOAT_DTYPES). */
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

#define ATTN_MAX_BLOCK_Q 64
#define ATTN_MAX_BLOCK_K 256
/* attn_scores passes more than a block_q to qk_tile (src/driver/scores.c) */
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
 * s[r] = scale * dot(q[r*q_stride + 0..d), rows[r][0..d)), each summed bit
 * for bit as qk_tile sums a score in a call of nq rows and the same d. The
 * backward's D = dO . O comes from here, so that one visible key gives
 * dP - D = 0 exactly (tests/kernels/checkasm.c checks this).
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

/* to_f32 of `rows` rows (src_stride in BYTES), value i of row r times
   scales[r * scale_stride + i / group] in one f32 rounding; n % group == 0. */
typedef void attn_to_f32_scaled_fn(const void *src, ptrdiff_t src_stride, size_t rows, size_t n,
                                   const float *scales, ptrdiff_t scale_stride, size_t group,
                                   float *dst, ptrdiff_t dst_stride);

/*
 * FP8 scale groups read in place: qk_tile and pv_tile on the values
 * to_f32_scaled would stage, scaled where loaded, so the result is the F32
 * call's on the staged rows. group is a multiple of ATTN_GRP_STEP (no
 * vector spans two groups) and divides d (dv). FP8 dtypes only.
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
 * dst = src in the variant's dtype, rounded once as attn_cache_append
 * documents (attn.h), quantized bit for bit as attn_quantize. Returns 0 when
 * a block format cannot store the row (attn_quantize_row_ok, src/quant.h);
 * dst's bytes are then unspecified, none past the row written.
 */
typedef int attn_from_f32_fn(const float *src, void *dst, size_t n, float scale);

/* n >= 1; NaN when any x[j] is NaN: a NaN row must never look fully masked. */
typedef float attn_row_max_fn(const float *x, size_t n);

/* x[j] = exp(x[j] - max), returns the sum; max is finite. weighted: also
   sum_j exp(x_j - max) (x_j - max), -inf entries adding exactly 0. */
typedef float attn_exp_sum_fn(float *x, size_t n, float max, float *weighted);

typedef void attn_row_scale_fn(float *x, size_t n, float s);

/* x = cap * tanh(x / cap), cap > 0 */
typedef void attn_softcap_fn(float *x, size_t n, float cap);

typedef void attn_add_bias_fn(float *x, const float *bias, size_t n);

/* x[j] = mask[j] ? x[j] : -inf */
typedef void attn_mask_bool_fn(float *x, const uint8_t *mask, size_t n);

/* ds[j] = p[j] * (dp[j] - sum_i p[i] dp[i]); ds may equal p or dp. */
typedef void attn_softmax_bwd_fn(const float *p, const float *dp, float *ds, size_t n);

/*
 * acc[c*acc_stride + 0..dim) += sum_{r<nq} p[r*p_stride + c] * x[r*x_stride + 0..dim)
 * (dV = P^T.dO, dK = dS^T.Q), all f32. Each sum is one chain from zero in
 * row order, added to acc once, for nq <= ATTN_MAX_BLOCK_Q: the driver's
 * calls are then a two-level sum (tests/tolerance.h, "backward").
 */
typedef void attn_pt_tile_fn(const float *p, ptrdiff_t p_stride,
                                const float *x, ptrdiff_t x_stride,
                                size_t nq, size_t nk, size_t dim,
                                float *acc, ptrdiff_t acc_stride);

/* dp[j] = p[j] * (dp[j] - d), d = rowsum(dO * O) */
typedef void attn_score_grad_fn(const float *p, float *dp, float d, size_t n);

/* x[j] -= slope * |pos - j|; the caller guarantees |pos - j| < 2^31. */
typedef void attn_alibi_fn(float *x, size_t n, float slope, int64_t pos);

/*
 * y[j] += sum_p w[p] * x[p][j], one multiply-add per part in order p = 0,
 * 1, ..., so splitting the parts over calls or changing the vector width
 * gives the same bits. parts >= 1; y overlaps no x[p].
 */
typedef void attn_wsum_fn(float *y, const float *const *x, const float *w, size_t parts,
                             size_t n);
/* The low-precision modes' kernels; rounding: src/lowp.h. */
typedef attn_qk_tile_fn attn_qk_bf16_fn;
typedef attn_pv_tile_fn attn_pv_bf16_fn;
typedef attn_pt_tile_fn attn_pt_bf16_fn;
typedef attn_qk_tile_fn attn_qk_i8_fn;

#define ATTN_WSUM_MAX_PARTS 32

/* CPU bits (src/cpu.c): an ISA's needs (src/isa_list.h) and a file's
   beyond it (src/kernel_list.h). */
#define ATTN_CPU_AVX2 (1u << 0)   /* AVX2 + FMA3 + F16C */
#define ATTN_CPU_AVX512 (1u << 1) /* AVX-512 F + BW + DQ + VL */
#define ATTN_CPU_NEON (1u << 2)
#define ATTN_CPU_SVE (1u << 3)
/* 512-bit vectors on 256-bit units; set with ATTN_CPU_AVX512 only. */
#define ATTN_CPU_NARROW512 (1u << 4)
/* Each bit below only with its base ISA's. */
#define ATTN_CPU_AVX512_BF16 (1u << 5)
#define ATTN_CPU_AVX512_VNNI (1u << 6)
#define ATTN_CPU_NEON_DOTPROD (1u << 7)
#define ATTN_CPU_NEON_BF16 (1u << 8)
#define ATTN_CPU_AVX_VNNI (1u << 9)
#define ATTN_CPU_NEON_I8MM (1u << 10)
/* Linux reports SVE's BF16 and I8MM apart from the AdvSIMD ones. */
#define ATTN_CPU_SVE_BF16 (1u << 11)
#define ATTN_CPU_SVE_I8MM (1u << 12)
/* AMX-TILE, -BF16 and -INT8 beside AVX512_BF16 and AVX512_VNNI, and the
   OS granted this process the tile data state (src/cpu.c); AMX_HW: the CPU
   has them, granted or not. */
#define ATTN_CPU_AMX (1u << 13)
#define ATTN_CPU_AMX_HW (1u << 14)

#include "kernel_list.h" /* after the ATTN_KV_* values: it names them */

/* A table starts as a copy of its base's, so every filled slot has a
   kernel (tests/kernels/checkasm.c checks). */
#define ATTN_DSP_MEMBER_KV(slot) attn_##slot##_fn *slot[ATTN_KV_DTYPES];
#define ATTN_DSP_MEMBER_ONE(slot) attn_##slot##_fn *slot;
#define ATTN_DSP_MEMBER(slot, dt, kind, a) ATTN_DSP_MEMBER_##kind(slot)

typedef struct attn_dsp {
    attn_isa isa;
    const char *isa_name;
    unsigned cpu; /* the ATTN_CPU_* bits the table was built for */
    uint32_t block_q, block_k;

    ATTN_SLOT_LIST(ATTN_DSP_MEMBER, _)
} attn_dsp;

#ifdef __cplusplus
}
#endif

#endif /* ATTN_DSP_H */

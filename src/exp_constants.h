/* SPDX-License-Identifier: MIT */
/*
 * The kernels' exp: x = n ln2 + r with a two-part ln2 (ln2_hi has 15
 * significant bits, so n ln2_hi and x - n ln2_hi are exact), exp(r) =
 * 1 + r + r^2 P(r) by a minimax P of degree 4, then 2^n. AVX2 and AVX-512
 * agree bit for bit on every input exp_sum can receive (x <= 0, -inf, NaN),
 * within 1 ulp of libm: bench/exp_accuracy.c checks it exhaustively. NEON
 * splits ln2 its own way (src/arm/row_neon.c).
 */
#ifndef ATTN_EXP_CONSTANTS_H
#define ATTN_EXP_CONSTANTS_H

#define ATTN_EXP_ROUND_MAGIC 0x1.8p23f /* x + magic rounds x to an integer */
#define ATTN_EXP_LOG2E 0x1.715476p+0f
#define ATTN_EXP_LN2_HI 0x1.62e4p-1f
#define ATTN_EXP_LN2_LO 0x1.7f7d1cp-20f /* ln2 - ln2_hi */
#define ATTN_EXP_C6 0x1.6a245p-10f
#define ATTN_EXP_C5 0x1.1239d4p-7f
#define ATTN_EXP_C4 0x1.5558f2p-5f
#define ATTN_EXP_C3 0x1.555492p-3f
#define ATTN_EXP_C2 0x1.fffffcp-2f

#endif /* ATTN_EXP_CONSTANTS_H */

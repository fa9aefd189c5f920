/* SPDX-License-Identifier: MIT */
/*
 * The constants of the kernels' exp: x = n ln2 + r with a two-part ln2 (the
 * high part has 15 significant bits, so n ln2_hi and x - n ln2_hi are exact),
 * exp(r) by a degree-6 minimax polynomial, then 2^n. AVX2 and AVX-512 use all
 * of them and agree bit for bit on every input exp_sum can receive (x <= 0,
 * -inf, NaN; max 0.882 ulp against libm), which bench/exp_accuracy.c checks
 * exhaustively (--same avx2,avx512). NEON shares the rounding constant,
 * log2(e) and the polynomial but splits ln2 its own way (src/arm/row_neon.c).
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

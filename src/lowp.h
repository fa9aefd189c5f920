/* SPDX-License-Identifier: MIT */
/*
 * The rounding rules of the low-precision modes (attn_precision, attn.h),
 * in portable C: the scalar oracle (src/scalar/dot_scalar.c) computes with
 * them, and every dot-product kernel must produce the same rounded values
 * (its vector code is checked against these by tests/kernels/checkasm.c).
 */
#ifndef ATTN_LOWP_H
#define ATTN_LOWP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype_list.h" /* ATTN_QBLOCK */
#include "half.h"

/* x rounded to bfloat16 (src/half.h's encoder: round to nearest even, NaN
   quieted, overflow to infinity, subnormals rounded like any value), as
   the f32 it is exactly. */
static inline float attn_bf16_round(float x)
{
    return attn_bf16_to_f32(attn_f32_to_bf16(x));
}

/* The int8 mode's query blocks: 32 values as dq * n[t]. */
typedef struct attn_q8_block {
    float dq;     /* 0 for a block that counts as 0; NaN for a non-finite value */
    int32_t sum;  /* sum_t n[t] */
    int8_t n[ATTN_QBLOCK];
} attn_q8_block;

/* Least normal f32: a block whose dq would be below it counts as 0 (1/dq
   would overflow). */
#define ATTN_Q8_TINY 0x1p-126f

/* A block whose dq is NaN or inf (a value is: the row's scores become NaN)
   or below ATTN_Q8_TINY (it counts as 0) is stored whole here: returns 1.
   Every quantizer's one rule for them. */
static inline int attn_q8_special(attn_q8_block *b, float dq)
{
    if (dq >= ATTN_Q8_TINY && dq != INFINITY)
        return 0;
    b->dq = dq >= 0.0f && dq < ATTN_Q8_TINY ? 0.0f : NAN;
    memset(b->n, 0, sizeof b->n);
    return 1;
}

/*
 * x[0..32) as one int8-mode block: m = max |x_t| (NaN if any x_t is NaN),
 * dq = fl(m / 127), n_t = rne(fl(x_t * fl(1 / dq))), clamped to [-127, 127]
 * (fl(x_t / dq) can exceed 127 by a rounding). A vector quantizer must
 * perform these same IEEE operations, so its bits are equal.
 */
static inline void attn_q8_quantize(const float *x, attn_q8_block *b)
{
    float m = 0.0f;
    for (int t = 0; t < ATTN_QBLOCK; t++) {
        const float a = fabsf(x[t]);
        m = (a > m || a != a) && m == m ? a : m; /* NaN sticks */
    }
    b->sum = 0;
    const float dq = m / 127.0f;
    if (attn_q8_special(b, dq))
        return;
    const float id = 1.0f / dq;
    b->dq = dq;
    for (int t = 0; t < ATTN_QBLOCK; t++) {
        float y = nearbyintf(x[t] * id);
        y = y > 127.0f ? 127.0f : y < -127.0f ? -127.0f : y;
        b->n[t] = (int8_t)y;
        b->sum += b->n[t];
    }
}

#endif /* ATTN_LOWP_H */

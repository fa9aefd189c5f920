/* AArch64 kernel tables (NEON is baseline there). */
#ifndef ATTN_ARM_H
#define ATTN_ARM_H

#include "dsp.h"

#ifdef __cplusplus
extern "C" {
#endif

void attn_dsp_init_neon(attn_dsp *t); /* src/arm/..._neon.c */
void attn_dsp_init_backward_neon(attn_dsp *t); /* backward_neon.c, called by the above */

#ifdef __cplusplus
}
#endif

#endif /* ATTN_ARM_H */

/* The scalar table (the oracle): src/scalar/kernels_scalar.c. */
#ifndef ATTN_SCALAR_H
#define ATTN_SCALAR_H

#include "dsp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills every slot with the scalar kernels and states the scalar block sizes. */
void attn_dsp_init_scalar(attn_dsp *t);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_SCALAR_H */

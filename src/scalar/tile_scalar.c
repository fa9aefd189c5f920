/* SPDX-License-Identifier: MIT */
/*
 * Scalar tile kernels for the float K/V dtypes (F32, F16, BF16): the
 * family's one body (src/scalar/tile_scalar_tmpl.h, shared with
 * quant_scalar.c) instantiated per dtype.
 */
#include "scalar/tile_scalar_tmpl.h"

ATTN_TILE_FILE(tile, scalar, scalar)

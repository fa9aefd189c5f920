/* SPDX-License-Identifier: MIT */
/* The one C/C++ seam of the benchmarks: the library's C headers. */
#ifndef ATTN_BENCH_SHIM_H
#define ATTN_BENCH_SHIM_H

extern "C" {
#include "attn.h"
#include "dsp.h"
#include "internal.h"
}

#endif /* ATTN_BENCH_SHIM_H */

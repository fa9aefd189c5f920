/* SPDX-License-Identifier: MIT */
/*
 * The one registry of instruction sets; who walks it and how to add an ISA:
 * docs/DESIGN.md §2.1, §2.3.
 *
 * X(ID, name, cpu_bit, init, base, have)
 *   name     attn_isa_name(), ATTN_ISA=<name>, the meson option and the
 *            kernel suffix
 *   cpu_bit  set by attn_cpu_detect() when the CPU and OS run it
 *   base     the table it starts from, so a slot it lacks keeps a kernel;
 *            available only when its base is
 *   have     config.h's macro, 1 when compiled in; while undefined `init` is
 *            never referenced, and the ISA still has a name and reports
 *            "not available"
 * Lines are in attn_isa order, each base before the ISAs built on it
 * (src/dispatch.c checks both at compile time).
 */
#ifndef ATTN_ISA_LIST_H
#define ATTN_ISA_LIST_H

#include "config.h"
#include "dsp.h"

#define ATTN_ISA_LIST(X)                                                       \
    X(SCALAR, scalar, 0, attn_dsp_init_scalar, SCALAR, ATTN_ALWAYS)            \
    X(AVX2, avx2, ATTN_CPU_AVX2, attn_dsp_init_avx2, SCALAR, HAVE_AVX2)        \
    X(AVX512, avx512, ATTN_CPU_AVX512, attn_dsp_init_avx512, AVX2, HAVE_AVX512) \
    X(NEON, neon, ATTN_CPU_NEON, attn_dsp_init_neon, SCALAR, HAVE_NEON)       \
    X(SVE, sve, ATTN_CPU_SVE, attn_dsp_init_sve, NEON, HAVE_SVE)               \
    X(AMX, amx, ATTN_CPU_AMX, attn_dsp_init_amx, AVX512, HAVE_AMX)

/* Dispatch by speed, not width: ATTN_ISA_##ID is not the default on a CPU
   with cpu_bit, where a table before it was measured faster
   (docs/PERFORMANCE.md). ATTN_ISA and attn_isa_select can still choose it. */
#define ATTN_ISA_NOT_DEFAULT_ON(X) X(AVX512, ATTN_CPU_NARROW512)

/* ISAs whose cpu_bit also says the OS granted this process their register
   state, with the bit that says the CPU has them (attn_isa_support). */
#define ATTN_ISA_OS_GRANTED(X) X(AMX, ATTN_CPU_AMX_HW)

/* ISAs whose int8-mode scores equal their base table's bit for bit, as
   attn.h promises (tests/kernels/checkasm.c holds them to it). */
#define ATTN_ISA_I8_AS_BASE(X) X(AMX)

/* ATTN_IS_SET(M): 1 when M is defined as 1, else 0, without #if. When M
   expands to 1, ATTN_PLACEHOLDER_1 inserts a comma that shifts the 1 in. */
#define ATTN_ALWAYS 1
#define ATTN_PLACEHOLDER_1 0,
#define ATTN_IS_SET(M) ATTN_IS_SET_(M)
#define ATTN_IS_SET_(v) ATTN_IS_SET__(ATTN_PLACEHOLDER_##v)
#define ATTN_IS_SET__(arg) ATTN_SECOND_(arg 1, 0, 0)
#define ATTN_SECOND_(ignored, val, ...) val

/* f when M is 1, else NULL: no reference to an ISA not compiled in. */
#define ATTN_IF_SET(M, f) ATTN_IF_SET_(ATTN_IS_SET(M), f)
#define ATTN_IF_SET_(b, f) ATTN_IF_SET__(b, f)
#define ATTN_IF_SET__(b, f) ATTN_IF_SET_##b(f)
#define ATTN_IF_SET_1(f) f
#define ATTN_IF_SET_0(f) NULL

#define ATTN_ISA_X_DECLARE(ID, name, cpu, init, base, have) void init(attn_dsp *t);
ATTN_ISA_LIST(ATTN_ISA_X_DECLARE)
#undef ATTN_ISA_X_DECLARE

/* ATTN_ISA_AUTO included */
#define ATTN_ISA_X_COUNT(ID, name, cpu, init, base, have) +1
enum { ATTN_ISA_COUNT = 1 ATTN_ISA_LIST(ATTN_ISA_X_COUNT) };

#endif /* ATTN_ISA_LIST_H */

/*
 * The one registry of instruction sets. The code that enumerates ISAs
 * walks ATTN_ISA_LIST (dispatch, the harness's test rows, test_api.c,
 * bench_attn.cc) or counts attn_isa values up to the ATTN_ISA_COUNT it
 * defines (the fuzzers, the TSan stress, the fault tests, the exp sweep;
 * fuzz_quant.c alone still lists them by hand); the CLI and the Python
 * binding walk attn_isa_name() through the public API until "unknown".
 * Adding an ISA is one X(...) line and the #include of its header here,
 * its module in its architecture's folder (<isa>.h and row_<isa>.c with
 * the init, and a file per slot group it implements: tile_, alibi_,
 * merge_, backward_, quant_<isa>.c; a slot it leaves alone keeps its
 * base's kernel), its entry in that folder's meson.build and its meson
 * option (docs/DESIGN.md §2.3).
 *
 * X(ID, name, cpu_bit, init, base, have)
 *   ID       the attn_isa value is ATTN_ISA_##ID (include/attn.h)
 *   name     attn_isa_name(), ATTN_ISA=<name>, the meson option (scalar,
 *            always built, has none), and the kernel suffix:
 *            attn_<slot>_<dtype>_<name>
 *   cpu_bit  the ATTN_CPU_* bit attn_cpu_detect() sets when the CPU (and
 *            OS) runs it; 0 for scalar, which always runs
 *   init     attn_dsp_init_<name>: overwrites the slots it implements and
 *            states its block sizes
 *   base     the ID of the tier whose table it starts from, so a slot it
 *            lacks keeps a kernel; it is only available when its base is.
 *            A base is listed before the ISAs built on it.
 *   have     the config.h macro meson defines to 1 when the kernels are
 *            compiled in (undefined otherwise; see ATTN_IS_SET). While it
 *            is undefined `init` is never referenced, so an ISA that is not
 *            compiled in (the other architecture's, or one configured off)
 *            still has a name and reports "not available".
 *
 * Lines are in attn_isa order, each base before the ISAs built on it
 * (src/dispatch.c checks both at compile time). Among the available tables
 * the default is chosen by attn_isa_default() in src/dispatch.c, and only
 * there: the last one listed that ATTN_ISA_NOT_DEFAULT_ON (below) does not
 * exclude on this CPU.
 */
#ifndef ATTN_ISA_LIST_H
#define ATTN_ISA_LIST_H

/* Every ISA's header, on every architecture: each keeps its helpers under
   its compiler macro, so here they only declare the init functions. */
#include "config.h"
#include "dsp.h"
#include "scalar/scalar.h"
#include "x86/avx2.h"
#include "x86/avx512.h"
#include "arm/neon.h"
#include "arm/sve.h"

/* CPU capability bits (attn_cpu_detect, src/cpu.c). */
#define ATTN_CPU_AVX2 (1u << 0)   /* AVX2 + FMA3 + F16C */
#define ATTN_CPU_AVX512 (1u << 1) /* AVX-512 F + BW + DQ + VL */
#define ATTN_CPU_NEON (1u << 2)
#define ATTN_CPU_SVE (1u << 3)
/* The CPU runs 512-bit vectors on 256-bit units (AMD Zen 4): set with
   ATTN_CPU_AVX512 when known, never alone. */
#define ATTN_CPU_NARROW512 (1u << 4)

#define ATTN_ISA_LIST(X)                                                       \
    X(SCALAR, scalar, 0, attn_dsp_init_scalar, SCALAR, ATTN_ALWAYS)            \
    X(AVX2, avx2, ATTN_CPU_AVX2, attn_dsp_init_avx2, SCALAR, HAVE_AVX2)        \
    X(AVX512, avx512, ATTN_CPU_AVX512, attn_dsp_init_avx512, AVX2, HAVE_AVX512) \
    X(NEON, neon, ATTN_CPU_NEON, attn_dsp_init_neon, SCALAR, HAVE_NEON)       \
    X(SVE, sve, ATTN_CPU_SVE, attn_dsp_init_sve, NEON, HAVE_SVE)

/*
 * Dispatch by speed, not width: X(ID, cpu_bit) says that ATTN_ISA_##ID is
 * not the default on a CPU with cpu_bit, because a table below it was
 * measured faster there (attn_isa_default() then takes the last available
 * table not excluded; ATTN_ISA and attn_isa_select can still choose it).
 *   AVX512 on Zen 4 (ATTN_CPU_NARROW512): measured on a Zen 4 EPYC, 1 thread,
 *   AVX-512 vs AVX2: scores L 2048, d 128 12.3 vs 10.9 ms, decode Lk 4096
 *   3.43 vs 3.11 ms, causal prefill 96 vs 99 ms (the one 3 % win), so the
 *   AVX2 table is the faster one on every benchmark shape but one.
 */
#define ATTN_ISA_NOT_DEFAULT_ON(X) X(AVX512, ATTN_CPU_NARROW512)

/*
 * ATTN_IS_SET(M): 1 when macro M is defined as 1, else 0, usable in C
 * expressions and without #if, so that an ISA whose macro config.h leaves
 * undefined costs no #if anywhere. (The placeholder trick: when M expands
 * to 1, ATTN_PLACEHOLDER_1 inserts a comma that shifts the 1 into place.)
 */
#define ATTN_ALWAYS 1
#define ATTN_PLACEHOLDER_1 0,
#define ATTN_IS_SET(M) ATTN_IS_SET_(M)
#define ATTN_IS_SET_(v) ATTN_IS_SET__(ATTN_PLACEHOLDER_##v)
#define ATTN_IS_SET__(arg) ATTN_SECOND_(arg 1, 0, 0)
#define ATTN_SECOND_(ignored, val, ...) val

/* ATTN_IF_SET(M, f): f when M is 1, else NULL, so that an ISA not compiled
   in leaves no reference to its init function. */
#define ATTN_IF_SET(M, f) ATTN_IF_SET_(ATTN_IS_SET(M), f)
#define ATTN_IF_SET_(b, f) ATTN_IF_SET__(b, f)
#define ATTN_IF_SET__(b, f) ATTN_IF_SET_##b(f)
#define ATTN_IF_SET_1(f) f
#define ATTN_IF_SET_0(f) NULL

/* Number of attn_isa values the registry knows, ATTN_ISA_AUTO included. */
#define ATTN_ISA_X_COUNT(ID, name, cpu, init, base, have) +1
enum { ATTN_ISA_COUNT = 1 ATTN_ISA_LIST(ATTN_ISA_X_COUNT) };

#endif /* ATTN_ISA_LIST_H */

/* SPDX-License-Identifier: MIT */
/* CPU capabilities through cpu_features, reduced to what the tables need. */
#define _DEFAULT_SOURCE 1 /* syscall(2) under -std=c11 */
#include "internal.h"

#include <string.h>

#include <cpu_features_macros.h>
#if defined(CPU_FEATURES_ARCH_X86)
#include <cpuid.h>
#include <cpuinfo_x86.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(CPU_FEATURES_ARCH_AARCH64) && defined(__linux__)
#include <sys/auxv.h>
/* from <asm/hwcap.h>, for headers older than the features */
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1ul << 20)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1ul << 22)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1ul << 14)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1ul << 13)
#endif
#ifndef HWCAP2_SVEBF16
#define HWCAP2_SVEBF16 (1ul << 12)
#endif
#ifndef HWCAP2_SVEI8MM
#define HWCAP2_SVEI8MM (1ul << 9)
#endif
#elif defined(CPU_FEATURES_ARCH_AARCH64)
#include <cpuinfo_aarch64.h>
#endif

#if defined(CPU_FEATURES_ARCH_X86)
/* Linux grants the AMX tile data state to a process only on request
   (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); before it, the
   first tile instruction faults. The request is process-wide and
   idempotent, so asking at every detection is safe from any thread; a
   refusal (an old kernel, a seccomp policy) leaves the AMX kernels out. */
static int amx_granted(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                   18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}
#endif

unsigned attn_cpu_detect(void)
{
    unsigned flags = 0;
#if defined(CPU_FEATURES_ARCH_X86)
    /* cpu_features clears AVX/AVX-512 bits the OS does not save (XCR0). The
       feature fields are signed 1-bit bitfields: test != 0. */
    const X86Features f = GetX86Info().features;
    if (f.avx2 != 0 && f.fma3 != 0 && f.f16c != 0)
        flags |= ATTN_CPU_AVX2;
    if ((flags & ATTN_CPU_AVX2) && f.avx512f != 0 && f.avx512bw != 0 && f.avx512dq != 0 &&
        f.avx512vl != 0)
        flags |= ATTN_CPU_AVX512;
    /* Zen 4 (AMD family 19h; its AVX-512 parts) splits each 512-bit
       operation into two 256-bit halves. Zen 5 (1Ah) server and desktop
       parts have full 512-bit units and keep the AVX-512 default. */
    if ((flags & ATTN_CPU_AVX512) && f.avx512_bf16 != 0)
        flags |= ATTN_CPU_AVX512_BF16;
    if ((flags & ATTN_CPU_AVX512) && f.avx512vnni != 0)
        flags |= ATTN_CPU_AVX512_VNNI;
    /* AVX-VNNI: CPUID.(EAX=7,ECX=1):EAX bit 4, which cpu_features 0.7 does
       not report; its YMM state is AVX2's, already checked above. */
    unsigned a = 0, b = 0, c = 0, d = 0;
    if ((flags & ATTN_CPU_AVX2) && __get_cpuid_count(7, 0, &a, &b, &c, &d) && a >= 1 &&
        __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)))
        flags |= ATTN_CPU_AVX_VNNI;
    /* every AMX CPU has AVX512_BF16 and VNNI: the AMX table's vector code
       uses them */
    if ((flags & ATTN_CPU_AVX512_BF16) && (flags & ATTN_CPU_AVX512_VNNI) && f.amx_tile != 0 &&
        f.amx_bf16 != 0 && f.amx_int8 != 0) {
        flags |= ATTN_CPU_AMX_HW;
        if (amx_granted())
            flags |= ATTN_CPU_AMX;
    }
    const X86Info info = GetX86Info();
    if ((flags & ATTN_CPU_AVX512) && strcmp(info.vendor, "AuthenticAMD") == 0 && info.family == 0x19)
        flags |= ATTN_CPU_NARROW512;
#elif defined(CPU_FEATURES_ARCH_AARCH64) && defined(__linux__)
    /* Read HWCAP directly: Debian's cpu_features prints a debug line to
       stderr on every ARMv8.0 core (AT_HWCAP2 == 0), and a library must
       print nothing. */
    flags |= ATTN_CPU_NEON; /* baseline on AArch64 */
    const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
    if (hwcap & HWCAP_SVE)
        flags |= ATTN_CPU_SVE;
    /* the dot files' extra instructions (src/kernel_list.h): SDOT and
       BFDOT come separately (Neoverse N1 has the first only), SMMLA with
       FEAT_I8MM */
    if (hwcap & HWCAP_ASIMDDP)
        flags |= ATTN_CPU_NEON_DOTPROD;
    if (hwcap2 & HWCAP2_BF16)
        flags |= ATTN_CPU_NEON_BF16;
    if (hwcap2 & HWCAP2_I8MM)
        flags |= ATTN_CPU_NEON_I8MM;
    if ((flags & ATTN_CPU_SVE) && (hwcap2 & HWCAP2_SVEBF16))
        flags |= ATTN_CPU_SVE_BF16;
    if ((flags & ATTN_CPU_SVE) && (hwcap2 & HWCAP2_SVEI8MM))
        flags |= ATTN_CPU_SVE_I8MM;
#elif defined(CPU_FEATURES_ARCH_AARCH64)
    const Aarch64Features f = GetAarch64Info().features;
    flags |= ATTN_CPU_NEON; /* baseline on AArch64 */
    if (f.sve != 0)
        flags |= ATTN_CPU_SVE;
    if (f.asimddp != 0)
        flags |= ATTN_CPU_NEON_DOTPROD;
    if (f.bf16 != 0)
        flags |= ATTN_CPU_NEON_BF16;
    if (f.i8mm != 0)
        flags |= ATTN_CPU_NEON_I8MM;
    if ((flags & ATTN_CPU_SVE) && f.svebf16 != 0)
        flags |= ATTN_CPU_SVE_BF16;
    if ((flags & ATTN_CPU_SVE) && f.svei8mm != 0)
        flags |= ATTN_CPU_SVE_I8MM;
#endif
    return flags;
}

/* CPU capabilities through cpu_features, reduced to what the tables need. */
#include "internal.h"

#include <string.h>

#include <cpu_features_macros.h>
#if defined(CPU_FEATURES_ARCH_X86)
#include <cpuinfo_x86.h>
#elif defined(CPU_FEATURES_ARCH_AARCH64) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_SVE
#define HWCAP_SVE (1ul << 22) /* from <asm/hwcap.h> */
#endif
#elif defined(CPU_FEATURES_ARCH_AARCH64)
#include <cpuinfo_aarch64.h>
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
    const X86Info info = GetX86Info();
    if ((flags & ATTN_CPU_AVX512) && strcmp(info.vendor, "AuthenticAMD") == 0 && info.family == 0x19)
        flags |= ATTN_CPU_NARROW512;
#elif defined(CPU_FEATURES_ARCH_AARCH64) && defined(__linux__)
    /* Read HWCAP directly: Debian's cpu_features prints a debug line to
       stderr on every ARMv8.0 core (AT_HWCAP2 == 0), and a library must
       print nothing. */
    flags |= ATTN_CPU_NEON; /* baseline on AArch64 */
    if (getauxval(AT_HWCAP) & HWCAP_SVE)
        flags |= ATTN_CPU_SVE;
#elif defined(CPU_FEATURES_ARCH_AARCH64)
    const Aarch64Features f = GetAarch64Info().features;
    flags |= ATTN_CPU_NEON; /* baseline on AArch64 */
    if (f.sve != 0)
        flags |= ATTN_CPU_SVE;
#endif
    return flags;
}

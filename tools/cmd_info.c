/* SPDX-License-Identifier: MIT */
/* attn info: library version, CPU, instruction sets, threads. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#include "cpu_features_macros.h"
#if defined(CPU_FEATURES_ARCH_X86)
#include "cpuinfo_x86.h"
#elif defined(CPU_FEATURES_ARCH_AARCH64)
#include "cpuinfo_aarch64.h"
#endif

const char usage_info[] =
    "Usage: attn info\n"
    "\n"
    "Prints:\n"
    "  - the version of the loaded libattn (attn_version_string) and of the\n"
    "    attn.h this tool was compiled against;\n"
    "  - the CPU as cpu_features sees it: brand, vendor, family/model/stepping,\n"
    "    microarchitecture and the SIMD features libattn cares about\n"
    "    (x86: sse4.2 avx avx2 fma3 f16c avx512f/bw/dq/vl avx512_bf16 avx512vnni\n"
    "    amx_tile/bf16/int8; aarch64: asimd sve);\n"
    "  - how the library was built (attn_build_config);\n"
    "  - for each instruction set: whether the CPU has it, whether its kernels\n"
    "    are compiled in (attn_isa_built), whether the OS lets this process\n"
    "    use it (attn_isa_support: AMX needs Linux's grant of the tile state),\n"
    "    whether libattn can use it (attn_isa_available: all of these) and\n"
    "    which one is active (attn_isa_active);\n"
    "  - the CPUs this process may run on (its affinity mask: the default\n"
    "    thread count of run/bench) and the online CPUs.\n"
    "\n"
    "Exit status: 0, or 2 for unexpected arguments.\n";


static const char *yes_no(int b)
{
    return b ? "yes" : "no";
}

/* What cpu_features says of the instruction sets it can describe, by libattn's ISA names. */
typedef struct cpu_isa {
    const char *name;
    int has;
} cpu_isa;
#define MAX_CPU_ISAS 8

static void print_cpu(cpu_isa *isas, int *n)
{
#if defined(CPU_FEATURES_ARCH_X86)
    const X86Info info = GetX86Info();
    const X86Features *f = &info.features;
    printf("cpu\n");
    printf("  brand              %s\n", info.brand_string);
    printf("  vendor             %s, family %d, model %d, stepping %d\n", info.vendor,
           info.family, info.model, info.stepping);
    const X86Microarchitecture uarch = GetX86Microarchitecture(&info);
    printf("  microarchitecture  %s\n", uarch == X86_UNKNOWN
                                           ? "unknown to this cpu_features version"
                                           : GetX86MicroarchitectureName(uarch));
    printf("  features           sse4.2 %s, avx %s, avx2 %s, fma3 %s, f16c %s\n",
           yes_no(f->sse4_2), yes_no(f->avx), yes_no(f->avx2), yes_no(f->fma3), yes_no(f->f16c));
    printf("                     avx512f %s, avx512bw %s, avx512dq %s, avx512vl %s\n",
           yes_no(f->avx512f), yes_no(f->avx512bw), yes_no(f->avx512dq), yes_no(f->avx512vl));
    isas[(*n)++] = (cpu_isa){"avx2", f->avx2 && f->fma3 && f->f16c};
    isas[(*n)++] = (cpu_isa){"avx512", f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl};
    printf("                     avx512_bf16 %s, avx512vnni %s, amx_tile %s, amx_bf16 %s, "
           "amx_int8 %s\n",
           yes_no(f->avx512_bf16), yes_no(f->avx512vnni), yes_no(f->amx_tile),
           yes_no(f->amx_bf16), yes_no(f->amx_int8));
    isas[(*n)++] = (cpu_isa){"amx", f->avx512_bf16 && f->avx512vnni && f->amx_tile &&
                                        f->amx_bf16 && f->amx_int8};
#elif defined(CPU_FEATURES_ARCH_AARCH64)
    const Aarch64Info info = GetAarch64Info();
    printf("cpu\n");
    printf("  implementer        0x%02x, variant 0x%x, part 0x%03x, revision %d\n",
           info.implementer, info.variant, info.part, info.revision);
    printf("  features           asimd %s, sve %s\n", yes_no(info.features.asimd),
           yes_no(info.features.sve));
    isas[(*n)++] = (cpu_isa){"neon", info.features.asimd};
    isas[(*n)++] = (cpu_isa){"sve", info.features.sve};
#else
    printf("cpu\n  (cpu_features does not describe this architecture)\n");
#endif
}

int cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_info, stdout);
            return EXIT_OK;
        }
        return usage_error("info", "unexpected argument '%s'", argv[i]);
    }
    const uint32_t v = attn_version();
    printf("libattn\n");
    printf("  library            %s (attn_version 0x%06" PRIx32 ": %u.%u.%u)\n",
           attn_version_string(), v, (unsigned)(v >> 16), (unsigned)((v >> 8) & 0xff),
           (unsigned)(v & 0xff));
    printf("  header             %d.%d.%d (attn.h this tool was built with)\n", ATTN_VERSION_MAJOR,
           ATTN_VERSION_MINOR, ATTN_VERSION_PATCH);
    if ((v >> 16) != ATTN_VERSION_MAJOR)
        printf("  WARNING            major versions differ: the ABI does not match\n");
    /* attn_build_config, attn_isa_built and attn_isa_support came with 1.11 */
    const int has_built = v >= ((1u << 16) | (11u << 8));
    if (has_built)
        printf("  build              %s\n", attn_build_config());

    cpu_isa isas[MAX_CPU_ISAS] = {{"scalar", 1}};
    int n_isas = 1;
    print_cpu(isas, &n_isas);

    const attn_isa active = attn_isa_active();
    const char *env = getenv("ATTN_ISA");
    printf("instruction sets     (built: compiled into libattn; os: the OS grants its\n"
           "                     state; available: built, on this CPU and granted)\n");
    printf("  %-8s %-5s %-24s %-4s %-9s %s\n", "isa", "cpu", "built", "os", "available", "active");
    /* Every ISA the library names (attn_isa_name up to "unknown"); one the CPU
       description does not know (another architecture's, or one newer than
       this tool) is listed when the library can use it. */
    for (int isa = ATTN_ISA_SCALAR; strcmp(attn_isa_name((attn_isa)isa), "unknown"); isa++) {
        const char *name = attn_isa_name((attn_isa)isa);
        const int avail = attn_isa_available((attn_isa)isa);
        int cpu = -1;
        for (int i = 0; i < n_isas; i++)
            if (!strcmp(isas[i].name, name))
                cpu = isas[i].has;
        if (cpu < 0 && !avail && !(has_built && attn_isa_built((attn_isa)isa)))
            continue;
        const char *built = has_built ? yes_no(attn_isa_built((attn_isa)isa))
                            : avail   ? "yes"
                            : cpu     ? "no"
                                      : "unknown (library < 1.11)";
        const char *os = has_built ? yes_no(attn_isa_support((attn_isa)isa) & ATTN_SUPPORT_OS) : "?";
        printf("  %-8s %-5s %-24s %-4s %-9s %s\n", name, cpu < 0 ? "?" : yes_no(cpu), built, os,
               yes_no(avail), active == (attn_isa)isa ? "*" : "");
    }
    printf("  active             %s%s%s%s\n", attn_isa_name(active), env ? " (ATTN_ISA=" : "",
           env ? env : "", env ? ")" : "");

    printf("threads\n");
    printf("  usable CPUs        %d (this process's affinity mask: the default --threads "
           "of run and bench)\n",
           usable_cpus());
    printf("  online CPUs        %d\n", online_cpus());
    attn_threadpool *pool = NULL;
    const attn_status st = attn_threadpool_create(0, &pool);
    if (st != ATTN_OK)
        return library_error("attn_threadpool_create", st);
    printf("  built-in pool      %d threads (attn_threadpool_create(0): caller included)\n",
           (int)attn_threadpool_size(pool));
    attn_threadpool_destroy(pool);
    return EXIT_OK;
}

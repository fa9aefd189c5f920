/*
 * Kernel-table selection. All tables are built once, on first use, under
 * pthread_once (no global constructor, so a setenv("ATTN_ISA") before the
 * first call still counts). The active table is an atomic pointer: each
 * operation loads it once, so attn_isa_select from another thread never
 * changes the kernels of a call in flight.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "internal.h"
#if HAVE_AVX2 || HAVE_AVX512
#include "x86/x86.h"
#endif
#if HAVE_NEON
#include "arm/arm.h"
#endif
#if HAVE_SVE
#include "arm/sve.h"
#endif

#define ISA_COUNT 6 /* attn_isa values AUTO..SVE */

static attn_dsp g_tables[ISA_COUNT];
static int g_available[ISA_COUNT];
static attn_isa g_best = ATTN_ISA_SCALAR;
static _Atomic(const attn_dsp *) g_active;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static attn_isa isa_from_name(const char *name)
{
    for (int isa = ATTN_ISA_SCALAR; isa < ISA_COUNT; isa++)
        if (strcmp(name, attn_isa_name((attn_isa)isa)) == 0)
            return (attn_isa)isa;
    return ATTN_ISA_AUTO;
}

static void build_tables(void)
{
    const unsigned cpu = attn_cpu_detect();
    attn_dsp_init_scalar(&g_tables[ATTN_ISA_SCALAR]);
    g_available[ATTN_ISA_SCALAR] = 1;
    /* Each tier starts from the one below, so a slot it lacks keeps a kernel. */
#if HAVE_AVX2
    if (cpu & ATTN_CPU_AVX2) {
        g_tables[ATTN_ISA_AVX2] = g_tables[ATTN_ISA_SCALAR];
        attn_dsp_init_avx2(&g_tables[ATTN_ISA_AVX2]);
        g_available[ATTN_ISA_AVX2] = 1;
        g_best = ATTN_ISA_AVX2;
    }
#endif
#if HAVE_AVX512
    if ((cpu & ATTN_CPU_AVX512) && g_available[ATTN_ISA_AVX2]) {
        g_tables[ATTN_ISA_AVX512] = g_tables[ATTN_ISA_AVX2];
        attn_dsp_init_avx512(&g_tables[ATTN_ISA_AVX512]);
        g_available[ATTN_ISA_AVX512] = 1;
        g_best = ATTN_ISA_AVX512;
    }
#endif
#if HAVE_NEON
    if (cpu & ATTN_CPU_NEON) {
        g_tables[ATTN_ISA_NEON] = g_tables[ATTN_ISA_SCALAR];
        attn_dsp_init_neon(&g_tables[ATTN_ISA_NEON]);
        g_available[ATTN_ISA_NEON] = 1;
        g_best = ATTN_ISA_NEON;
    }
#endif
#if HAVE_SVE
    if ((cpu & ATTN_CPU_SVE) && g_available[ATTN_ISA_NEON]) {
        g_tables[ATTN_ISA_SVE] = g_tables[ATTN_ISA_NEON];
        attn_dsp_init_sve(&g_tables[ATTN_ISA_SVE]);
        g_available[ATTN_ISA_SVE] = 1;
        g_best = ATTN_ISA_SVE;
    }
#endif
    (void)cpu;

    attn_isa chosen = g_best;
    const char *env = getenv("ATTN_ISA");
    if (env) {
        attn_isa wanted = isa_from_name(env);
        if (wanted != ATTN_ISA_AUTO && g_available[wanted])
            chosen = wanted;
    }
    atomic_store_explicit(&g_active, &g_tables[chosen], memory_order_release);
}

static void ensure_tables(void)
{
    pthread_once(&g_once, build_tables);
}

const attn_dsp *attn_dsp_active(void)
{
    ensure_tables();
    return atomic_load_explicit(&g_active, memory_order_acquire);
}

const attn_dsp *attn_dsp_for_isa(attn_isa isa)
{
    ensure_tables();
    if ((int)isa <= ATTN_ISA_AUTO || (int)isa >= ISA_COUNT || !g_available[isa])
        return NULL;
    return &g_tables[isa];
}

attn_isa attn_isa_active(void)
{
    return attn_dsp_active()->isa;
}

int attn_isa_available(attn_isa isa)
{
    if (isa == ATTN_ISA_AUTO)
        return 1;
    return attn_dsp_for_isa(isa) != NULL;
}

attn_status attn_isa_select(attn_isa isa)
{
    if ((int)isa < ATTN_ISA_AUTO || (int)isa >= ISA_COUNT)
        return ATTN_ERR_ARG;
    ensure_tables();
    if (isa == ATTN_ISA_AUTO)
        isa = g_best;
    if (!g_available[isa])
        return ATTN_ERR_UNSUPPORTED;
    atomic_store_explicit(&g_active, &g_tables[isa], memory_order_release);
    return ATTN_OK;
}

const char *attn_isa_name(attn_isa isa)
{
    switch (isa) {
    case ATTN_ISA_AUTO: return "auto";
    case ATTN_ISA_SCALAR: return "scalar";
    case ATTN_ISA_AVX2: return "avx2";
    case ATTN_ISA_AVX512: return "avx512";
    case ATTN_ISA_NEON: return "neon";
    case ATTN_ISA_SVE: return "sve";
    }
    return "unknown";
}

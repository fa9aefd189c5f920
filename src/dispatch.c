/* SPDX-License-Identifier: MIT */
/*
 * Kernel-table selection. All tables are built once, on first use, under
 * pthread_once (no global constructor, so a setenv("ATTN_ISA") before the
 * first call still counts). The active table is an atomic pointer: each
 * operation loads it once, so attn_isa_select from another thread never
 * changes the kernels of a call in flight.
 *
 * Which ISAs exist, how each is detected, built and layered comes from the
 * registry (isa_list.h); nothing below names an ISA.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "internal.h"
#include "isa_list.h"

typedef struct isa_entry {
    const char *name;
    unsigned cpu_bit;
    void (*init)(attn_dsp *); /* NULL when not compiled in */
    attn_isa base;
} isa_entry;

/* Indexed by attn_isa; [ATTN_ISA_AUTO] is unused. */
static const isa_entry g_registry[ATTN_ISA_COUNT] = {
#define ATTN_X_ENTRY(ID, nm, cpu, init_fn, base_id, have)                                     \
    [ATTN_ISA_##ID] = {#nm, cpu, ATTN_IF_SET(have, init_fn), ATTN_ISA_##base_id},
    ATTN_ISA_LIST(ATTN_X_ENTRY)
#undef ATTN_X_ENTRY
};

/* The registry's order is the attn_isa order (AUTO = 0, then each line),
   so ATTN_ISA_COUNT bounds every value it knows; each base comes first. */
#define ATTN_X_POS(ID, nm, cpu, init_fn, base_id, have) ATTN_X_POS_##ID,
enum { ATTN_X_POS_AUTO, ATTN_ISA_LIST(ATTN_X_POS) };
#undef ATTN_X_POS
#define ATTN_X_ORDER(ID, nm, cpu, init_fn, base_id, have)                                     \
    _Static_assert(ATTN_X_POS_##ID == (int)ATTN_ISA_##ID, #nm ": line out of attn_isa order"); \
    _Static_assert(ATTN_ISA_##base_id <= ATTN_ISA_##ID, #nm ": its base must be listed first");
ATTN_ISA_LIST(ATTN_X_ORDER)
#undef ATTN_X_ORDER

static attn_dsp g_tables[ATTN_ISA_COUNT];
static int g_available[ATTN_ISA_COUNT];
static attn_isa g_default = ATTN_ISA_SCALAR;
static unsigned g_cpu; /* attn_cpu_detect() as the tables were built */
static _Atomic(const attn_dsp *) g_active;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/*
 * The one place that decides which available table ATTN_ISA_AUTO means:
 * the last available one in registry order (the widest of its family),
 * unless the registry says a narrower table is faster on this CPU
 * (ATTN_ISA_NOT_DEFAULT_ON). It depends on the CPU's identity alone, so the
 * same CPU always gets the same table.
 */
attn_isa attn_isa_default(const int *available, unsigned cpu)
{
    int excluded[ATTN_ISA_COUNT] = {0};
#define ATTN_X_EXCLUDE(ID, bit) excluded[ATTN_ISA_##ID] |= (cpu & (bit)) != 0;
    ATTN_ISA_NOT_DEFAULT_ON(ATTN_X_EXCLUDE)
#undef ATTN_X_EXCLUDE
    attn_isa best = ATTN_ISA_SCALAR;
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++)
        if (available[isa] && !excluded[isa])
            best = (attn_isa)isa;
    return best;
}

static attn_isa isa_from_name(const char *name)
{
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++)
        if (strcmp(name, g_registry[isa].name) == 0)
            return (attn_isa)isa;
    return ATTN_ISA_AUTO;
}

/*
 * The dot slots hold the scalar oracle of each low-precision mode; a table
 * still holding it after its init has no dot-product kernel there (none
 * written, or the CPU lacks the instructions), so the slot is cleared: the
 * driver computes such calls as the default mode does, at the table's own
 * speed, instead of running the oracle (src/kernel_list.h).
 */
static void drop_oracle_dots(attn_dsp *t, const attn_dsp *scalar)
{
#define ATTN_X_DROP_KV(slot)                                                                  \
    for (int i = 0; i < ATTN_KV_DTYPES; i++)                                                 \
        if (t->slot[i] == scalar->slot[i])                                                    \
            t->slot[i] = NULL;
#define ATTN_X_DROP_ONE(slot)                                                                 \
    if (t->slot == scalar->slot)                                                              \
        t->slot = NULL;
#define ATTN_X_DROP(slot, dt, kind, a) ATTN_X_DROP_##kind(slot)
    ATTN_SLOTS_DOT_BF16(ATTN_X_DROP, f32, _) ATTN_SLOTS_DOT_BWD(ATTN_X_DROP, f32, _)
    ATTN_SLOTS_DOT_I8(ATTN_X_DROP, f32, _)
#undef ATTN_X_DROP
#undef ATTN_X_DROP_ONE
#undef ATTN_X_DROP_KV
}

static void build_tables(void)
{
    const unsigned cpu = attn_cpu_detect();
    g_cpu = cpu;
    for (int isa = ATTN_ISA_SCALAR; isa < ATTN_ISA_COUNT; isa++) {
        const isa_entry *e = &g_registry[isa];
        if (!e->init || (e->cpu_bit && !(cpu & e->cpu_bit)))
            continue;
        /* Each tier starts from its base, so a slot it lacks keeps a kernel;
           without its base (not built, or the CPU lacks it) it is skipped. */
        if (isa != ATTN_ISA_SCALAR) {
            if (!g_available[e->base])
                continue;
            g_tables[isa] = g_tables[e->base];
        }
        g_tables[isa].cpu = cpu;
        e->init(&g_tables[isa]);
        if (isa != ATTN_ISA_SCALAR)
            drop_oracle_dots(&g_tables[isa], &g_tables[ATTN_ISA_SCALAR]);
        g_tables[isa].isa = (attn_isa)isa;
        g_tables[isa].isa_name = e->name;
        g_available[isa] = 1;
    }
    g_default = attn_isa_default(g_available, cpu);

    attn_isa chosen = g_default;
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
    if ((int)isa <= ATTN_ISA_AUTO || (int)isa >= ATTN_ISA_COUNT || !g_available[isa])
        return NULL;
    return &g_tables[isa];
}

int attn_precision_native(int64_t precision, int32_t k_dtype)
{
    const attn_dsp *t = attn_dsp_active();
    if (t->isa == ATTN_ISA_SCALAR || k_dtype < 0 || k_dtype >= ATTN_KV_DTYPES)
        return 0; /* the scalar table's are the oracles, no faster path */
    if (precision == ATTN_PRECISION_BF16)
        return t->qk_bf16[k_dtype] != NULL;
    if (precision == ATTN_PRECISION_INT8)
        return t->qk_i8[k_dtype] != NULL;
    return 0;
}

int attn_isa_built(attn_isa isa)
{
    if (isa == ATTN_ISA_AUTO)
        return 1;
    return (int)isa > ATTN_ISA_AUTO && (int)isa < ATTN_ISA_COUNT && g_registry[isa].init != NULL;
}

unsigned attn_isa_support(attn_isa isa)
{
    const unsigned all = ATTN_SUPPORT_BUILT | ATTN_SUPPORT_CPU | ATTN_SUPPORT_OS;
    if (isa == ATTN_ISA_AUTO || isa == ATTN_ISA_SCALAR)
        return all;
    if ((int)isa < ATTN_ISA_AUTO || (int)isa >= ATTN_ISA_COUNT)
        return 0;
    ensure_tables(); /* the bits dispatch decided by, not a new syscall */
    const unsigned cpu = g_cpu, bit = g_registry[isa].cpu_bit;
    unsigned hw = bit;
#define ATTN_X_HW(ID, hw_bit)                                                                 \
    if (isa == ATTN_ISA_##ID)                                                                 \
        hw = hw_bit;
    ATTN_ISA_OS_GRANTED(ATTN_X_HW)
#undef ATTN_X_HW
    return (attn_isa_built(isa) ? ATTN_SUPPORT_BUILT : 0u) | ((cpu & hw) ? ATTN_SUPPORT_CPU : 0u) |
           ((cpu & bit) ? ATTN_SUPPORT_OS : 0u);
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

const char *attn_build_config(void)
{
    return ATTN_BUILD_CONFIG;
}

static attn_status checked_isa_select(attn_isa isa)
{
    if ((int)isa < ATTN_ISA_AUTO || (int)isa >= ATTN_ISA_COUNT)
        return ATTN_ERR_ARG;
    ensure_tables();
    if (isa == ATTN_ISA_AUTO)
        isa = g_default;
    if (!g_available[isa])
        return ATTN_ERR_UNSUPPORTED;
    atomic_store_explicit(&g_active, &g_tables[isa], memory_order_release);
    return ATTN_OK;
}

attn_status attn_isa_select(attn_isa isa)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_isa_select", mark, checked_isa_select(isa));
}

const char *attn_isa_name(attn_isa isa)
{
    if (isa == ATTN_ISA_AUTO)
        return "auto";
    if ((int)isa > ATTN_ISA_AUTO && (int)isa < ATTN_ISA_COUNT)
        return g_registry[isa].name;
    return "unknown";
}

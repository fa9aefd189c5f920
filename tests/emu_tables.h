/* SPDX-License-Identifier: MIT */
/*
 * The tables whose extra kernels are built a second time against SIMDe
 * (tests/emu, -DATTN_TEST_AVX512_EMU), for the harness's rows and
 * checkasm: each is the real table below it with the emulated files'
 * kernels stored over it, as dispatch would on a CPU that has them.
 *   avx512-emu  the AVX-512 module, over the AVX2 table
 *   amx-emu     the AMX module on src/x86/amx_emu.h, over avx512-emu: the
 *               bf16 and int8 modes' products on emulated tiles
 *   avx2-emu    the AVX2 table with its AVX-VNNI file (dot_i8); NULL where
 *               the CPU has AVX-VNNI, whose real kernel the avx2 row tests
 * NULL where the CPU lacks AVX2+FMA+F16C, which SIMDe lowers them to.
 */
#ifndef ATTN_TEST_EMU_TABLES_H
#define ATTN_TEST_EMU_TABLES_H

#ifdef ATTN_TEST_AVX512_EMU
#include "internal.h"
#include "x86/avx2.h"   /* attn_dsp_init_dot_i8_avx2_emu */
#include "x86/avx512.h" /* attn_dsp_init_avx512_emu */

static inline const attn_dsp *emu_base_table(attn_dsp *t)
{
    if (!(attn_cpu_detect() & ATTN_CPU_AVX2))
        return NULL;
    const attn_dsp *below = attn_dsp_for_isa(ATTN_ISA_AVX2);
    *t = below ? *below : *attn_dsp_for_isa(ATTN_ISA_SCALAR);
    t->cpu = ~0u; /* SIMDe emulates vdpbf16ps and vpdpbusd too */
    return t;
}

static inline const attn_dsp *emu_table_avx512(void)
{
    static attn_dsp t;
    if (!emu_base_table(&t))
        return NULL;
    attn_dsp_init_avx512_emu(&t);
    t.isa = ATTN_ISA_AVX512;
    t.isa_name = "avx512";
    return &t;
}

static inline const attn_dsp *emu_table_amx(void)
{
    static attn_dsp t;
    const attn_dsp *below = emu_table_avx512();
    if (!below)
        return NULL;
    t = *below;
    attn_dsp_init_amx_emu(&t);
    t.isa = ATTN_ISA_AMX;
    t.isa_name = "amx";
    return &t;
}

static inline const attn_dsp *emu_table_avx2(void)
{
    static attn_dsp t;
    if (attn_cpu_detect() & ATTN_CPU_AVX_VNNI || !emu_base_table(&t))
        return NULL;
    attn_dsp_init_dot_i8_avx2_emu(&t);
    return &t;
}
#endif

#endif /* ATTN_TEST_EMU_TABLES_H */

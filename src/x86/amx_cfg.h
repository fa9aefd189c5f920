/* SPDX-License-Identifier: MIT */
/* LDTILECFG's operand, for the AMX kernels and src/x86/amx_emu.h. */
#ifndef ATTN_X86_AMX_CFG_H
#define ATTN_X86_AMX_CFG_H

#include <stdint.h>

/* The 64-byte configuration of LDTILECFG (palette 1). */
typedef struct attn_amx_cfg {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} attn_amx_cfg;
_Static_assert(sizeof(attn_amx_cfg) == 64, "LDTILECFG reads 64 bytes");

#if defined(__AMX_TILE__) && !defined(ATTN_SIMDE_EMU)
#include <immintrin.h>
/* GCC 12's amxtileintrin.h tells the compiler that LDTILECFG reads 8 of
   its 64 bytes and that TILELOADD reads no memory at all, so stores they
   depend on may be dropped or sunk past them: on a Xeon with AMX
   the rows and colsb stores vanished and the first TILEZERO raised #UD.
   These name what each instruction reads. */
#undef _tile_loadconfig
#define _tile_loadconfig(cfg) __asm__ volatile("ldtilecfg %0" ::"m"(*(const attn_amx_cfg *)(cfg)))
#undef _tile_loadd
#define _tile_loadd(t, base, stride)                                                       \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"((const void *)(base)),          \
                     "r"((long)(stride))                                                   \
                     : "memory")
#endif

#endif /* ATTN_X86_AMX_CFG_H */

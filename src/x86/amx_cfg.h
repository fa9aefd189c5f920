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

#endif /* ATTN_X86_AMX_CFG_H */

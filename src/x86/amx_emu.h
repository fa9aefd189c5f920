/* SPDX-License-Identifier: MIT */
/*
 * The AMX intrinsics the kernels use, in portable C, so that the AMX kernel
 * source also builds a table that runs on any x86 machine (no AMX emulator
 * is packaged). Semantics: the Intel SDM's pseudo-code (volume 2), per
 * thread, as the hardware's tile state is:
 *  - a tile used outside its configuration, or mismatched shapes, is #UD on
 *    the hardware and an abort here; a load zeroes the rest of the tile;
 *  - TDPBF16PS: per C element, the pairs k ascending, each product exact,
 *    each addition one f32 rounding to nearest even; denormal inputs and C
 *    values read as zero, denormal results written as zero; MXCSR unread.
 *    A Xeon's tile unit rounds otherwise (4 in 10 sums of random tiles
 *    differ from this chain in the last bit; no simple order matched):
 *    the bf16 kernels are checked within the mode's bound, never against
 *    these bits;
 *  - TDPB[SU][SU]D: int32 sums modulo 2^32.
 * The state is also per translation unit (a static here): a kernel
 * configures, loads, computes and stores in one file.
 */
#ifndef ATTN_X86_AMX_EMU_H
#define ATTN_X86_AMX_EMU_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "x86/amx_cfg.h"

typedef struct attn_amx_emu_tiles {
    unsigned char t[8][16][64];
    uint16_t colsb[8];
    uint8_t rows[8];
    uint8_t palette;
} attn_amx_emu_tiles;

static _Thread_local attn_amx_emu_tiles attn_amx_emu;

static inline void attn_amx_emu_ud(void)
{
    abort(); /* #UD on the hardware */
}

static inline void attn_amx_emu_loadconfig(const void *p)
{
    attn_amx_cfg c;
    memcpy(&c, p, sizeof c);
    attn_amx_emu_tiles *s = &attn_amx_emu;
    memset(s, 0, sizeof *s);
    if (c.palette == 0)
        return;
    if (c.palette != 1)
        attn_amx_emu_ud();
    for (int i = 0; i < 8; i++) {
        if (c.rows[i] > 16 || c.colsb[i] > 64 || (c.rows[i] == 0) != (c.colsb[i] == 0))
            attn_amx_emu_ud();
        s->rows[i] = c.rows[i];
        s->colsb[i] = c.colsb[i];
    }
    s->palette = 1;
}

static inline void attn_amx_emu_release(void)
{
    memset(&attn_amx_emu, 0, sizeof attn_amx_emu);
}

static inline attn_amx_emu_tiles *attn_amx_emu_tile(int t)
{
    attn_amx_emu_tiles *s = &attn_amx_emu;
    if (t < 0 || t > 7 || !s->palette || !s->rows[t])
        attn_amx_emu_ud();
    return s;
}

static inline void attn_amx_emu_zero(int t)
{
    memset(attn_amx_emu_tile(t)->t[t], 0, sizeof attn_amx_emu.t[t]);
}

static inline void attn_amx_emu_load(int t, const void *base, long stride)
{
    attn_amx_emu_tiles *s = attn_amx_emu_tile(t);
    memset(s->t[t], 0, sizeof s->t[t]);
    for (int r = 0; r < s->rows[t]; r++)
        memcpy(s->t[t][r], (const unsigned char *)base + (long)r * stride, s->colsb[t]);
}

static inline void attn_amx_emu_store(int t, void *base, long stride)
{
    attn_amx_emu_tiles *s = attn_amx_emu_tile(t);
    for (int r = 0; r < s->rows[t]; r++)
        memcpy((unsigned char *)base + (long)r * stride, s->t[t][r], s->colsb[t]);
}

/* K: dwords per row of A */
static inline int attn_amx_emu_shapes(int c, int a, int b)
{
    attn_amx_emu_tiles *s = attn_amx_emu_tile(c);
    attn_amx_emu_tile(a);
    attn_amx_emu_tile(b);
    if (c == a || c == b || a == b || s->rows[a] != s->rows[c] || s->colsb[b] != s->colsb[c] ||
        s->colsb[a] / 4 != s->rows[b] || s->colsb[a] % 4 || s->colsb[c] % 4)
        attn_amx_emu_ud();
    return s->colsb[a] / 4;
}

static inline float attn_amx_emu_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float attn_amx_emu_flush(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0)
        u &= 0x80000000u;
    return attn_amx_emu_f32(u);
}

static inline float attn_amx_emu_bf16(const unsigned char *p)
{
    const uint32_t u = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 24;
    return attn_amx_emu_flush(attn_amx_emu_f32(u));
}

static inline void attn_amx_emu_dpbf16ps(int c, int a, int b)
{
    const int kd = attn_amx_emu_shapes(c, a, b);
    attn_amx_emu_tiles *s = &attn_amx_emu;
    const int rows = s->rows[c], n4 = s->colsb[c] / 4;
    for (int m = 0; m < rows; m++)
        for (int n = 0; n < n4; n++) {
            float acc;
            memcpy(&acc, &s->t[c][m][4 * n], sizeof acc);
            acc = attn_amx_emu_flush(acc);
            for (int k = 0; k < kd; k++)
                for (int i = 0; i < 2; i++) {
                    /* an exact product, then one rounding; volatile keeps
                       the compiler from fusing the two (-ffp-contract) */
                    volatile float prod = attn_amx_emu_bf16(&s->t[a][m][4 * k + 2 * i]) *
                                          attn_amx_emu_bf16(&s->t[b][k][4 * n + 2 * i]);
                    acc = attn_amx_emu_flush(acc + prod);
                }
            memcpy(&s->t[c][m][4 * n], &acc, sizeof acc);
        }
    for (int m = 0; m < rows; m++) /* bytes past colsb are written as zero */
        memset(&s->t[c][m][s->colsb[c]], 0, 64 - s->colsb[c]);
}

/* sa, sb: whether A's and B's bytes are signed. */
static inline void attn_amx_emu_dpb(int c, int a, int b, int sa, int sb)
{
    const int kd = attn_amx_emu_shapes(c, a, b);
    attn_amx_emu_tiles *s = &attn_amx_emu;
    const int rows = s->rows[c], n4 = s->colsb[c] / 4;
    for (int m = 0; m < rows; m++)
        for (int n = 0; n < n4; n++) {
            uint32_t acc;
            memcpy(&acc, &s->t[c][m][4 * n], sizeof acc);
            for (int k = 0; k < kd; k++)
                for (int i = 0; i < 4; i++) {
                    const unsigned char x = s->t[a][m][4 * k + i], y = s->t[b][k][4 * n + i];
                    const int32_t xv = sa ? (int32_t)(int8_t)x : (int32_t)x;
                    const int32_t yv = sb ? (int32_t)(int8_t)y : (int32_t)y;
                    acc += (uint32_t)(xv * yv); /* modulo 2^32, as the hardware */
                }
            memcpy(&s->t[c][m][4 * n], &acc, sizeof acc);
        }
    for (int m = 0; m < rows; m++)
        memset(&s->t[c][m][s->colsb[c]], 0, 64 - s->colsb[c]);
}

/* <immintrin.h>'s macros give way; its inline functions are hidden. */
#undef _tile_loadconfig
#undef _tile_release
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_dpbf16ps
#undef _tile_dpbssd
#undef _tile_dpbsud
#undef _tile_dpbusd
#undef _tile_dpbuud
#define _tile_loadconfig(p) attn_amx_emu_loadconfig(p)
#define _tile_release() attn_amx_emu_release()
#define _tile_zero(t) attn_amx_emu_zero(t)
#define _tile_loadd(t, base, stride) attn_amx_emu_load(t, base, (long)(stride))
#define _tile_stream_loadd(t, base, stride) attn_amx_emu_load(t, base, (long)(stride))
#define _tile_stored(t, base, stride) attn_amx_emu_store(t, base, (long)(stride))
#define _tile_dpbf16ps(c, a, b) attn_amx_emu_dpbf16ps(c, a, b)
#define _tile_dpbssd(c, a, b) attn_amx_emu_dpb(c, a, b, 1, 1)
#define _tile_dpbsud(c, a, b) attn_amx_emu_dpb(c, a, b, 1, 0)
#define _tile_dpbusd(c, a, b) attn_amx_emu_dpb(c, a, b, 0, 1)
#define _tile_dpbuud(c, a, b) attn_amx_emu_dpb(c, a, b, 0, 0)

#endif /* ATTN_X86_AMX_EMU_H */

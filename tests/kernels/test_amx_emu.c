/* SPDX-License-Identifier: MIT */
/*
 * The AMX emulator (src/x86/amx_emu.h) against tiles worked by hand: the
 * layout of TDPBF16PS and TDPB[SU][SU]D (pairs and quads of one row of A
 * against one column of B's pairs/quads), the order and rounding of the
 * bf16 sums, DAZ and FTZ, signedness and int32 wrap-around, loads and stores
 * with strides, and the zeroing of what a load or a product leaves. Exit 0:
 * all hold; 1: a failure (printed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "x86/amx_emu.h"

static int failures;

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                      \
            printf(__VA_ARGS__);                                                             \
            printf("\n");                                                                    \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static uint16_t bf(float x) /* exact for the values used here */
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (uint16_t)(u >> 16);
}

static void config(int rows0, int colsb0, int rows1, int colsb1, int rows2, int colsb2)
{
    attn_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = (uint8_t)rows0, c.colsb[0] = (uint16_t)colsb0;
    c.rows[1] = (uint8_t)rows1, c.colsb[1] = (uint16_t)colsb1;
    c.rows[2] = (uint8_t)rows2, c.colsb[2] = (uint16_t)colsb2;
    _tile_loadconfig(&c);
}

/* C (2 x 2 f32) += A (2 rows x 2 pairs) . B (2 pair-rows x 2 columns). */
static void bf16_layout(void)
{
    config(2, 8, 2, 8, 2, 8); /* tile 0: C, 1: A, 2: B */
    /* A row m = (a[m][0], a[m][1] | a[m][2], a[m][3]): dims 0..3 */
    const float a[2][4] = {{1, 2, 3, 4}, {-1, 0.5f, 8, -2}};
    /* B row k holds dims 2k, 2k+1 of each column n: (b[2k][n], b[2k+1][n]) */
    const float bm[4][2] = {{1, 10}, {2, 20}, {3, 30}, {4, 40}}; /* [dim][n] */
    uint16_t ta[2][4], tb[2][4];
    for (int m = 0; m < 2; m++)
        for (int t = 0; t < 4; t++)
            ta[m][t] = bf(a[m][t]);
    for (int k = 0; k < 2; k++)
        for (int n = 0; n < 2; n++) {
            tb[k][2 * n] = bf(bm[2 * k][n]);
            tb[k][2 * n + 1] = bf(bm[2 * k + 1][n]);
        }
    float c[2][2] = {{100, 0}, {0, -1}};
    _tile_loadd(0, c, sizeof c[0]);
    _tile_loadd(1, ta, sizeof ta[0]);
    _tile_loadd(2, tb, sizeof tb[0]);
    _tile_dpbf16ps(0, 1, 2);
    float out[2][2];
    _tile_stored(0, out, sizeof out[0]);
    /* by hand: c + sum_t a[m][t] * bm[t][n] */
    const float want[2][2] = {{100 + 1 + 4 + 9 + 16, 10 + 40 + 90 + 160},
                              {-1 + 1 + 24 - 8, -10 + 10 + 240 - 80 - 1}};
    for (int m = 0; m < 2; m++)
        for (int n = 0; n < 2; n++)
            CHECK(out[m][n] == want[m][n], "bf16 layout C[%d][%d] = %g, want %g", m, n,
                  (double)out[m][n], (double)want[m][n]);
    _tile_release();
}

/* One f32 rounding per product, in order: 1 + 2^-24 + 2^-24 stays 1 (each
   addition a tie to even), where one rounding of the exact sum gives
   1 + 2^-23. */
static void bf16_order_and_rounding(void)
{
    config(1, 4, 1, 8, 2, 4); /* C 1 x 1, A 1 row x 2 pairs, B 2 rows x 1 pair */
    const float c0 = 1.0f;
    const uint16_t ta[4] = {bf(0x1p-12f), bf(0x1p-12f), 0, 0};
    const uint16_t tb[2][2] = {{bf(0x1p-12f), bf(0x1p-12f)}, {0, 0}};
    _tile_loadd(0, &c0, 4);
    _tile_loadd(1, ta, 8);
    _tile_loadd(2, tb, 4);
    _tile_dpbf16ps(0, 1, 2);
    float out;
    _tile_stored(0, &out, 4);
    CHECK(out == 1.0f, "sequential RNE: %a, want 0x1p+0", (double)out);
    /* k ascending: 1 + 1 + 2^24 is 2^24 + 2; from the large value first
       each 1 would be a tie rounded away, giving 2^24 */
    const float big = 0x1p24f;
    const uint16_t ta2[4] = {bf(1), bf(1), bf(0x1p24f), 0};
    const uint16_t tb2[2][2] = {{bf(1), bf(1)}, {bf(1), 0}};
    const float zero = 0;
    _tile_loadd(0, &zero, 4);
    _tile_loadd(1, ta2, 8);
    _tile_loadd(2, tb2, 4);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, &out, 4);
    CHECK(out == big + 2.0f, "2 + 2^24: %a", (double)out);
    _tile_release();
}

/* DAZ on bf16 inputs and on C, FTZ on the result. */
static void bf16_denormals(void)
{
    config(1, 4, 1, 4, 1, 4);
    const uint16_t den = 0x0001; /* the least bf16 denormal */
    const uint16_t ta[2] = {den, bf(1)}, tb[2] = {bf(1), 0};
    const float c0 = 0;
    _tile_loadd(0, &c0, 4);
    _tile_loadd(1, ta, 4);
    _tile_loadd(2, tb, 4);
    _tile_dpbf16ps(0, 1, 2);
    float out;
    _tile_stored(0, &out, 4);
    CHECK(out == 0.0f, "DAZ input: %a", (double)out);
    /* a denormal C reads as zero: -0 + +0 is +0, where -2^-140 + 0 would
       flush to -0 */
    const float cden = -0x1p-140f;
    const uint16_t ta2[2] = {bf(1), 0}, tb2[2] = {0, 0};
    _tile_loadd(0, &cden, 4);
    _tile_loadd(1, ta2, 4);
    _tile_loadd(2, tb2, 4);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, &out, 4);
    CHECK(out == 0.0f && !signbit(out), "DAZ on C: %a", (double)out);
    /* a denormal result is written as zero: 2^-63 * 2^-64 = 2^-127 */
    const uint16_t ta3[2] = {bf(0x1p-63f), 0}, tb3[2] = {bf(0x1p-64f), 0};
    _tile_loadd(0, &c0, 4);
    _tile_loadd(1, ta3, 4);
    _tile_loadd(2, tb3, 4);
    _tile_dpbf16ps(0, 1, 2);
    _tile_stored(0, &out, 4);
    CHECK(out == 0.0f && !signbit(out), "FTZ: %a", (double)out);
    _tile_release();
}

/* Quads of bytes, signedness per operand, and int32 wrap-around. */
static void int8_products(void)
{
    config(1, 8, 1, 4, 1, 8); /* C 1 x 2, A 1 row x 1 quad, B 1 quad-row x 2 */
    const uint8_t ta[4] = {0xff, 2, 0x80, 1};           /* s: -1, 2, -128, 1; u: 255, 2, 128, 1 */
    const uint8_t tb[8] = {1, 1, 1, 1, 0xff, 3, 2, 0x7f}; /* column 0: 1,1,1,1; 1: ff,3,2,7f */
    const int32_t c0[2] = {10, 0};
    struct {
        int sa, sb;
        int32_t want[2];
    } cases[4] = {
        {1, 1, {10 + (-1 + 2 - 128 + 1), (-1) * (-1) + 2 * 3 + (-128) * 2 + 1 * 127}},
        {1, 0, {10 + (-1 + 2 - 128 + 1), (-1) * 255 + 2 * 3 + (-128) * 2 + 127}},
        {0, 1, {10 + (255 + 2 + 128 + 1), 255 * (-1) + 6 + 256 + 127}},
        {0, 0, {10 + (255 + 2 + 128 + 1), 255 * 255 + 6 + 256 + 127}},
    };
    for (int i = 0; i < 4; i++) {
        _tile_loadd(0, c0, 8);
        _tile_loadd(1, ta, 4);
        _tile_loadd(2, tb, 8);
        if (cases[i].sa && cases[i].sb)
            _tile_dpbssd(0, 1, 2);
        else if (cases[i].sa)
            _tile_dpbsud(0, 1, 2);
        else if (cases[i].sb)
            _tile_dpbusd(0, 1, 2);
        else
            _tile_dpbuud(0, 1, 2);
        int32_t out[2];
        _tile_stored(0, out, 8);
        for (int n = 0; n < 2; n++)
            CHECK(out[n] == cases[i].want[n], "dpb%c%cd C[%d] = %d, want %d",
                  cases[i].sa ? 's' : 'u', cases[i].sb ? 's' : 'u', n, out[n], cases[i].want[n]);
    }
    /* wrap-around: INT32_MAX + 255 * 255 modulo 2^32 */
    const int32_t cmax[2] = {INT32_MAX, 0};
    const uint8_t tu[4] = {0xff, 0, 0, 0}, tv[8] = {0xff, 0, 0, 0, 0, 0, 0, 0};
    _tile_loadd(0, cmax, 8);
    _tile_loadd(1, tu, 4);
    _tile_loadd(2, tv, 8);
    _tile_dpbuud(0, 1, 2);
    int32_t out[2];
    _tile_stored(0, out, 8);
    CHECK(out[0] == (int32_t)((uint32_t)INT32_MAX + 65025u), "wrap: %d", out[0]);
    _tile_release();
}

/* Strided loads and stores, and what a load or a product leaves zero. */
static void loads_and_stores(void)
{
    config(3, 12, 2, 8, 0, 0);
    int32_t src[3][5];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++)
            src[r][c] = 10 * r + c;
    _tile_loadd(0, src, sizeof src[0]);
    int32_t dst[3][5];
    memset(dst, 0x55, sizeof dst);
    _tile_stored(0, dst, sizeof dst[0]);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++) {
            const int32_t want = c < 3 ? 10 * r + c : 0x55555555;
            CHECK(dst[r][c] == want, "store [%d][%d] = %d, want %d", r, c, dst[r][c], want);
        }
    _tile_zero(0);
    _tile_stored(0, dst, sizeof dst[0]);
    CHECK(dst[2][2] == 0 && dst[0][0] == 0, "tilezero");
    _tile_loadd(1, src, sizeof src[0]);
    CHECK(attn_amx_emu.t[1][0][8] == 0 && attn_amx_emu.t[1][2][0] == 0,
          "a load zeroes past colsb and rows");
    _tile_release();
}

int main(void)
{
    bf16_layout();
    bf16_order_and_rounding();
    bf16_denormals();
    int8_products();
    loads_and_stores();
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("amx emulator: all hand-worked tiles hold\n");
    return 0;
}

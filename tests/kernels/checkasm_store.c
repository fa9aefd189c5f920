/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the store family (store_<isa>.c): from_f32 for every K/V dtype,
 * bit for bit.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkasm.h"
#include "quant.h"

/*
 * One f32 value for a store kernel of dtype dt: for the float dtypes any
 * bit pattern a third of the time (infinities, NaN, subnormals, values
 * that overflow F16 included), else moderate values; for the block formats
 * finite values at a per-row magnitude (the rows attn_quantize_row_ok
 * accepts), with exact zeros and ties of the rounding now and then.
 */
static float store_value(checkasm *c, int dt, float mag)
{
    const uint64_t r = next(c);
    if (unit_values(dt) > 1) {
        if (r % 16 == 0)
            return 0.0f;
        if (r % 16 == 1) /* k + 1/2 steps of a block whose amax is 127 * mag */
            return ((float)pick(c, 0, 126) + 0.5f) * mag * ((r >> 8) & 1 ? -1.0f : 1.0f);
        return uniform(c, -127.0f, 127.0f) * mag;
    }
    if (r % 3 == 0) {
        const uint32_t bits = (uint32_t)(r >> 16);
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    return uniform(c, -4.0f, 4.0f) * mag;
}

void check_from_f32(checkasm *c)
{
    const int dt = c->dt;
    if (dtype_kind(dt) == ATTN_DTYPE_KIND_ASYM) { /* one record per call */
        check_asym_from_f32(c);
        return;
    }
    for (int i = 0; i < CA_TILE_SHAPES; i++) {
        const size_t n = i == 0 ? 4096 : dim_for(c, dt, 1, 300);
        const size_t bytes = n / unit_values(dt) * unit_bytes(dt);
        float *x = xalloc(n * 4);
        unsigned char *y = xalloc(bytes + 1), *y_ref = xalloc(bytes + 1);
        /* block scales up to 127 * 2^10 / 8 (Q4_0's d), well inside binary16 */
        const float mag = ldexpf(1.0f, (int)pick(c, 0, unit_values(dt) > 1 ? 30 : 40) - 20);
        for (size_t j = 0; j < n; j++)
            x[j] = store_value(c, dt, mag);
        /* blocks whose largest |x| is 127 * mag exactly (mag a power of two:
           Q8_0's d = mag, so x * id = k + 1/2 is a tie of the rounding), now
           and then at two places with either sign (Q4_0 takes the first) */
        for (size_t b0 = 0; unit_values(dt) > 1 && b0 < n; b0 += 32)
            for (int twice = 0; twice < 2; twice++)
                if (next(c) % 2)
                    x[b0 + pick(c, 0, 31)] = (next(c) % 2 ? 127.0f : -127.0f) * mag;
        if (unit_values(dt) > 1 && !attn_quantize_row_ok(dt, x, (int64_t)n))
            fail(c, "n=%zu: a drawn row attn_quantize_row_ok refuses", n);
        /* every fourth row of a block format holds one value it cannot
           store: NaN, an infinity, or a block scale past binary16 */
        const int refused = unit_values(dt) > 1 && i % 4 == 3;
        if (refused) {
            static const float bad[] = {NAN, INFINITY, -INFINITY, 1e7f, -3e38f};
            x[pick(c, 0, n - 1)] = bad[pick(c, 0, 4)];
        }
        /* FP8's scale: 1, or a normal float around 1 */
        const float scale = i % 2 ? 1.0f : ldexpf(uniform(c, 1.0f, 2.0f), (int)pick(c, 0, 8) - 4);
        memset(y, 0xa5, bytes + 1);
        memset(y_ref, 0xa5, bytes + 1);
        const int ok = c->t->from_f32[dt](x, y, n, scale);
        const int ok_ref = c->ref->from_f32[dt](x, y_ref, n, scale);
        if (ok != ok_ref || ok == refused)
            fail(c, "n=%zu: returned %d, scalar %d, for a row it %s store", n, ok, ok_ref,
                 refused ? "cannot" : "can");
        if (!ok) {
            if (y[bytes] != 0xa5)
                fail(c, "n=%zu: a refused row written past its end", n);
            free(x), free(y), free(y_ref);
            continue;
        }
        for (size_t j = 0; j <= bytes; j++)
            if (y[j] != y_ref[j]) {
                fail(c, "n=%zu: byte %zu = 0x%02x, scalar 0x%02x (bitwise%s)", n, j, y[j],
                     y_ref[j], j == bytes ? "; written past the row" : "");
                break;
            }
        if (i == 0)
            CA_BENCH(c, "4096 values", 0, (void)c->t->from_f32[dt](x, y, n, scale),
                     (void)c->ref->from_f32[dt](x, y_ref, n, scale));
        free(x), free(y), free(y_ref);
    }
}

/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the asym family (asym_<isa>.c): to_f32_scaled and from_f32 of
 * the asymmetric record formats (U8_ASYM, U4_ASYM), bit for bit. Their rows
 * are records (f32 scale, f32 zero point, codes; attn.h), not the stride
 * units the tile and store checks draw, so check_to_f32_scaled and
 * check_from_f32 hand an ASYM dtype's rows to these.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkasm.h"

/* 8 (u8) or 4 (u4): bits per code; the record's bytes of g codes */
static int asym_bits(int dt) { return unit_values(dt) == 2 ? 4 : 8; }

static size_t record_bytes(int bits, size_t g) { return ATTN_ASYM_HEADER + g * (size_t)bits / 8; }

/* ------------------------------------------------------------ decoding */

/*
 * The headers of a row of n values in records of g (fill_kv drew the codes):
 * scales positive normal 2^-10..2^4 with any mantissa, zero points in
 * [-300, 300] (fractional; integers; a code exactly, so that c - zp is 0;
 * either zero). special: one record in four gets a scale or zero point of
 * another kind (zero, subnormal, negative, infinite, NaN, huge), whose
 * results both sides round alike (a NaN matches any NaN).
 */
void fill_asym_headers(checkasm *c, unsigned char *row, size_t n, size_t g, int bits, int special)
{
    const float top = bits == 8 ? 255.0f : 15.0f;
    for (size_t k = 0; k < n / g; k++, row += record_bytes(bits, g)) {
        float s = ldexpf(uniform(c, 1.0f, 2.0f), (int)pick(c, 0, 13) - 10), zp;
        switch (next(c) % 6) {
        case 0: zp = (float)(int)pick(c, 0, 600) - 300.0f; break;
        case 1: zp = (float)pick(c, 0, (size_t)top); break;
        case 2: zp = next(c) % 2 ? 0.0f : -0.0f; break;
        case 3: zp = uniform(c, 0.0f, top); break;
        default: zp = uniform(c, -300.0f, 300.0f); break;
        }
        if (special && next(c) % 4 == 0) {
            static const float odd_s[] = {0.0f, -0.0f, 1e-40f, -0.5f, INFINITY, NAN, 3e38f};
            static const float odd_zp[] = {INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 1e-40f};
            if (next(c) % 2)
                s = odd_s[pick(c, 0, sizeof odd_s / sizeof odd_s[0] - 1)];
            else
                zp = odd_zp[pick(c, 0, sizeof odd_zp / sizeof odd_zp[0] - 1)];
        }
        memcpy(row, &s, 4);
        memcpy(row + 4, &zp, 4);
    }
}

/*
 * Shape i of the decode check (n, group): the groups OpenVINO uses (16, 32,
 * 64, 128) over rows of up to 576, g = n, and groups that are no multiple
 * of any vector (1, 3, 18, ...: every tail path); u4 groups even. Case 0 is
 * the bench shape: decode's 128-dim head, the whole row one record.
 */
static void asym_shape(checkasm *c, int i, int bits, size_t *n, size_t *g)
{
    static const size_t vec[] = {16, 32, 64, 128};
    switch (i % 5) {
    case 0: *g = i == 0 ? 128 : vec[pick(c, 0, 3)]; break;
    case 1: *g = pick(c, 1, 576); break;
    case 2: *g = pick(c, 1, 40); break;
    case 3: *g = pick(c, 1, 200); break;
    default: *g = vec[pick(c, 0, 3)]; break;
    }
    if (bits == 4)
        *g += *g % 2;
    const size_t most = 576 / *g;
    *n = i == 0 || i % 5 == 1 ? *g : i % 5 == 4 ? *g * most : *g * pick(c, 1, most);
}

#define CA_ASYM_CASES 40

void check_asym_to_f32_scaled(checkasm *c)
{
    const int dt = c->dt, bits = asym_bits(dt);
    unsigned char seen[256] = {0};
    for (int i = 0; i < CA_ASYM_CASES; i++) {
        size_t n, g;
        asym_shape(c, i, bits, &n, &g);
        const size_t rows = i == 0 ? 256 : pick(c, 1, 9), rb = n / g * record_bytes(bits, g);
        /* rows a few bytes apart and the first at an odd address now and
           then: records start anywhere; the last row ends the buffer */
        const ptrdiff_t sstride = (ptrdiff_t)(rb + (i == 0 ? 0 : pick(c, 0, 7)));
        const size_t off = i == 0 ? 0 : pick(c, 0, 7);
        const ptrdiff_t dstride = (ptrdiff_t)(n + (i == 0 ? 0 : pick(c, 0, 5)));
        const size_t dlen = (rows - 1) * (size_t)dstride + n + 1;
        unsigned char *buf = xalloc(off + (rows - 1) * (size_t)sstride + rb), *x = buf + off;
        float *y = xalloc(dlen * 4), *y_ref = xalloc(dlen * 4);
        /* the codes: random bytes, or every other case a sequence through
           every byte value (167 is odd: 256 consecutive codes take each) */
        const int pattern = i % 2 == 0;
        size_t k = pick(c, 0, 255);
        for (size_t r = 0; r < rows; r++) {
            unsigned char *row = x + r * (size_t)sstride;
            fill_kv(c, row, dt, rb);
            for (size_t rec = 0; rec < n / g; rec++) {
                unsigned char *codes = row + rec * record_bytes(bits, g) + ATTN_ASYM_HEADER;
                for (size_t b = 0; b < g * (size_t)bits / 8; b++, k++) {
                    if (pattern)
                        codes[b] = (unsigned char)(k * 167u);
                    seen[codes[b]] = 1;
                }
            }
            fill_asym_headers(c, row, n, g, bits, i % 7 == 6);
        }
        for (size_t j = 0; j < dlen; j++)
            y[j] = y_ref[j] = -7.0f; /* the gaps: never written */
        c->t->to_f32_scaled[dt](x, sstride, rows, n, NULL, 0, g, y, dstride);
        c->ref->to_f32_scaled[dt](x, sstride, rows, n, NULL, 0, g, y_ref, dstride);
        for (size_t j = 0; j < dlen; j++) {
            const int gap = j % (size_t)dstride >= n || j == dlen - 1;
            if (!same_bits(y[j], y_ref[j]) || (gap && y[j] != -7.0f)) {
                const size_t r = j / (size_t)dstride, t = j % (size_t)dstride;
                fail(c, "rows=%zu n=%zu group=%zu: y[%zu][%zu] = %a, scalar %a (bitwise%s)", rows,
                     n, g, r, t, (double)y[j], (double)y_ref[j], gap ? "; a gap" : "");
                break;
            }
        }
        if (i == 0)
            CA_BENCH(c, "256 x 128, group 128", 2.0 * (double)(rows * n),
                     c->t->to_f32_scaled[dt](x, sstride, rows, n, NULL, 0, g, y, dstride),
                     c->ref->to_f32_scaled[dt](x, sstride, rows, n, NULL, 0, g, y_ref, dstride));
        free(buf), free(y), free(y_ref);
    }
    /* the checks' own coverage: each code byte (u4: each nibble pair) drawn */
    for (int b = 0; b < 256; b++)
        if (!seen[b]) {
            fail(c, "checkasm patterns (every byte value): code byte 0x%02x never drawn", b);
            break;
        }
}

/* ------------------------------------------------------------ encoding */

/*
 * The kinds of record the encode check draws (row i: kind i % CA_ASYM_KINDS),
 * and whether the oracle stores it. The refused ones: a NaN or infinite
 * value, hi - lo overflowing, -lo / s overflowing (s 0.0001 for a
 * constant row of 1e35).
 */
enum {
    K_RANDOM,    /* uniform over a random magnitude 2^-20..2^20 */
    K_CONSTANT,  /* one value (range 0: s = 0.0001) */
    K_TWO,       /* two distinct values */
    K_TINY,      /* a range below 255 FLT_MIN (s subnormal: 0.0001) */
    K_HUGE,      /* magnitudes near FLT_MAX / 2 */
    K_NEGATIVE,  /* all below zero */
    K_TIES,      /* s a power of two, integer zp: x / s + zp = m + 1/2 */
    K_ZEROS,     /* lo = 0 with +0 and -0 mixed: the first zero's sign */
    K_SUBNORMAL, /* subnormal values among small normal ones */
    K_NONFINITE, /* refused: one NaN or infinity */
    K_OVERFLOW,  /* refused: hi - lo = inf */
    K_ZP_INF,    /* refused: -lo / 0.0001 = -inf */
    CA_ASYM_KINDS
};
static const char *const kind_name[CA_ASYM_KINDS] = {
    "random", "constant", "two values", "tiny range", "huge", "negative", "ties",
    "signed zeros", "subnormal", "non-finite", "range overflow", "zero point overflow"};

/* a and b at two places of x (n >= 2) */
static void two_places(checkasm *c, float *x, size_t n, float a, float b)
{
    const size_t i = pick(c, 0, n - 1);
    x[i] = a;
    x[(i + pick(c, 1, n - 1)) % n] = b;
}

static void asym_record_draw(checkasm *c, int kind, int bits, float *x, size_t n)
{
    const float top = bits == 8 ? 255.0f : 15.0f;
    const float mag = ldexpf(1.0f, (int)pick(c, 0, 40) - 20);
    switch (kind) {
    case K_RANDOM:
        random_row(c, x, n, -mag, mag * uniform(c, 0.0f, 2.0f));
        break;
    case K_CONSTANT: {
        static const float v[] = {0.0f, -0.0f, 1.0f, -3.5f, 1e-30f, 65504.0f};
        const float a = next(c) % 2 ? v[pick(c, 0, 5)] : uniform(c, -mag, mag);
        for (size_t j = 0; j < n; j++)
            x[j] = a;
        break;
    }
    case K_TWO: {
        const float a = uniform(c, -mag, mag), b = next(c) % 4 ? uniform(c, -mag, mag)
                                                                : nextafterf(a, INFINITY);
        for (size_t j = 0; j < n; j++)
            x[j] = next(c) % 2 ? a : b;
        break;
    }
    case K_TINY: /* multiples of 2^-149 below 255 * 2^-126, around 0 or a normal */
        for (size_t j = 0; j < n; j++)
            x[j] = ldexpf((float)pick(c, 0, 1u << 20), -149) - (next(c) % 2 ? 0.0f : 0x1p-128f);
        if (next(c) % 2)
            for (size_t j = 0; j < n; j++)
                x[j] += 0x1p-120f; /* around a normal value: rounded, still as tiny a range */
        break;
    case K_HUGE: /* hi - lo < FLT_MAX: finite (one value alone: -x / 0.0001 overflows) */
        random_row(c, x, n, -FLT_MAX / 2 * 0.999f, FLT_MAX / 2 * 0.999f);
        if (n == 1)
            x[0] = uniform(c, -1.0f, 1.0f);
        break;
    case K_NEGATIVE:
        random_row(c, x, n, -mag * 2.0f, -mag);
        break;
    case K_TIES: {
        /* lo = -L 2^e and hi = (top - L) 2^e: s = 2^e, zp = L, both exact;
           x = (m - L + 1/2) 2^e puts fma(x, 1/s, zp) on m + 1/2 exactly */
        const int e = (int)pick(c, 0, 30) - 15;
        const float L = (float)pick(c, 0, (size_t)top);
        for (size_t j = 0; j < n; j++)
            x[j] = ldexpf((float)pick(c, 0, (size_t)top - 1) - L + 0.5f, e);
        if (n > 1)
            two_places(c, x, n, ldexpf(-L, e), ldexpf(top - L, e));
        break;
    }
    case K_ZEROS:
        random_row(c, x, n, 0.0f, mag);
        for (size_t j = 0; j < n; j++)
            if (next(c) % 3 == 0)
                x[j] = next(c) % 2 ? 0.0f : -0.0f;
        break;
    case K_SUBNORMAL:
        for (size_t j = 0; j < n; j++)
            x[j] = next(c) % 2 ? ldexpf(uniform(c, -1.0f, 1.0f), -127)
                               : ldexpf(uniform(c, -1.0f, 1.0f), -110);
        break;
    case K_NONFINITE: {
        static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
        random_row(c, x, n, -mag, mag);
        x[pick(c, 0, n - 1)] = bad[pick(c, 0, 3)];
        break;
    }
    case K_OVERFLOW: /* -3e38 and 3e38 (one value has no range to overflow: NaN) */
        random_row(c, x, n, -1e38f, 1e38f);
        if (n == 1)
            x[0] = NAN;
        else
            two_places(c, x, n, -3e38f, 3e38f);
        break;
    case K_ZP_INF:
        for (size_t j = 0; j < n; j++)
            x[j] = 1e35f;
        break;
    }
}

/* Record lengths: 1..40 (tails of every vector), the groups OpenVINO uses,
   random up to 600; u4 even. Row 0, the bench row: 128. */
static size_t asym_record_len(checkasm *c, int i, int bits)
{
    static const size_t vec[] = {16, 32, 64, 128, 576};
    size_t n = i == 0 ? 128 : i < 80 ? (size_t)(i % 40) + 1 : i % 3 ? pick(c, 1, 600)
                                                                    : vec[pick(c, 0, 4)];
    return n + (bits == 4 ? n % 2 : 0);
}

void check_asym_from_f32(checkasm *c)
{
    const int dt = c->dt, bits = asym_bits(dt);
    for (int i = 0; i < 10 * CA_ASYM_KINDS + 40; i++) {
        const int kind = i % CA_ASYM_KINDS;
        const size_t n = asym_record_len(c, i, bits), bytes = record_bytes(bits, n);
        /* the values at any float's address, the record at any byte's */
        const size_t xo = pick(c, 0, 3), yo = pick(c, 0, 7);
        float *xb = xalloc((xo + n) * 4), *x = xb + xo;
        unsigned char *yb = xalloc(yo + bytes + 1), *y = yb + yo, *y_ref = xalloc(bytes + 1);
        asym_record_draw(c, kind, bits, x, n);
        const int refused = kind >= K_NONFINITE;
        memset(y, 0xa5, bytes + 1);
        memset(y_ref, 0xa5, bytes + 1);
        const int ok = c->t->from_f32[dt](x, y, n, 0.0f);
        const int ok_ref = c->ref->from_f32[dt](x, y_ref, n, 0.0f);
        if (ok != ok_ref || ok == refused)
            fail(c, "n=%zu (%s): returned %d, scalar %d, for a record it %s store", n,
                 kind_name[kind], ok, ok_ref, refused ? "cannot" : "can");
        if (y[bytes] != 0xa5)
            fail(c, "n=%zu (%s): written past the record", n, kind_name[kind]);
        for (size_t j = 0; ok && ok_ref && j < bytes; j++)
            if (y[j] != y_ref[j]) {
                fail(c, "n=%zu (%s): byte %zu (%s) = 0x%02x, scalar 0x%02x (bitwise)", n,
                     kind_name[kind], j, j < 4 ? "scale" : j < 8 ? "zero point" : "codes", y[j],
                     y_ref[j]);
                break;
            }
        if (i == 0)
            CA_BENCH(c, "a record of 128", 0, (void)c->t->from_f32[dt](x, y, n, 0.0f),
                     (void)c->ref->from_f32[dt](x, y_ref, n, 0.0f));
        free(xb), free(yb), free(y_ref);
    }
}

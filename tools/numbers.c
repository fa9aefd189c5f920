/* Numbers: f16/bf16 conversion, the seeded input generator, clocks. */
#define _DEFAULT_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; NaN stays NaN, overflow gives inf. */
static uint16_t f32_to_f16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, NaN (quiet) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x0200u : 0u));
    if (ax >= 0x477ff000u) /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) /* below 2^-14: f16 subnormal; the scaling is exact */
        return (uint16_t)(sign | (uint16_t)nearbyintf(f32_from_bits(ax) * 16777216.0f));
    const uint32_t rounded = ax + 0x0fffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

static float f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        const float mag = (float)m * 0x1p-24f;
        return sign ? -mag : mag;
    }
    if (e == 31)
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

static uint16_t f32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float bf16_to_f32(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

/* Value i of contiguous quantized rows, decoded from the formats of attn.h. */
static float load_quant(const unsigned char *base, attn_dtype t, size_t i)
{
    if (t == ATTN_DTYPE_FP8_E4M3) {
        const unsigned x = base[i], e = (x >> 3) & 15u, m = x & 7u;
        const float mag = e == 15u && m == 7u ? NAN
                          : e == 0u           ? ldexpf((float)m, -9)
                                              : ldexpf((float)(8u + m), (int)e - 10);
        return x & 0x80u ? -mag : mag;
    }
    const size_t block = (size_t)dtype_block(t), j = i % block;
    const unsigned char *blk = base + i / block * dtype_size(t);
    uint16_t dh;
    memcpy(&dh, blk, sizeof dh);
    const float d = f16_to_f32(dh);
    if (t == ATTN_DTYPE_Q8_0)
        return (float)(int8_t)blk[2 + j] * d;
    const int nibble = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
    return (float)(nibble - 8) * d;
}

float load_elem(const void *base, attn_dtype t, size_t i)
{
    switch (t) {
    case ATTN_DTYPE_Q8_0:
    case ATTN_DTYPE_Q4_0:
    case ATTN_DTYPE_FP8_E4M3: return load_quant(base, t, i);
    case ATTN_DTYPE_F16: return f16_to_f32(((const uint16_t *)base)[i]);
    case ATTN_DTYPE_BF16: return bf16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

/* splitmix64: small, seedable, good enough for test data. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Sum of four uniforms rescaled to [-1, 1): bell-shaped, bounded. */
static float rng_bell(uint64_t *state)
{
    const uint64_t r = rng_next(state);
    const uint32_t a = (uint32_t)(r & 0xffffu), b = (uint32_t)((r >> 16) & 0xffffu);
    const uint32_t c = (uint32_t)((r >> 32) & 0xffffu), d = (uint32_t)(r >> 48);
    return (float)(a + b + c + d) * (1.0f / 131072.0f) - 1.0f;
}

int fill_random(void *dst, attn_dtype t, size_t n, uint64_t *state)
{
    if (dtype_is_quantized(t)) {
        /* f32 values quantized by the library, one 32-value block row at a time */
        const size_t cols = t == ATTN_DTYPE_FP8_E4M3 && n % 32 != 0 ? 1 : 32;
        float row[32];
        unsigned char *out = dst;
        const size_t unit = dtype_size(t);
        for (size_t i = 0; i < n; i += cols) {
            for (size_t j = 0; j < cols; j++)
                row[j] = rng_bell(state);
            const attn_status st = attn_quantize((int32_t)t, row, 1, (int64_t)cols,
                                                 (int64_t)cols, out + i / cols * unit,
                                                 (int64_t)cols / dtype_block(t), 0.0f);
            if (st != ATTN_OK)
                return -1;
        }
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const float x = rng_bell(state);
        switch (t) {
        case ATTN_DTYPE_F16: ((uint16_t *)dst)[i] = f32_to_f16(x); break;
        case ATTN_DTYPE_BF16: ((uint16_t *)dst)[i] = f32_to_bf16(x); break;
        default: ((float *)dst)[i] = x; break;
        }
    }
    return 0;
}

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

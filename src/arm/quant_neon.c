/*
 * NEON (AArch64 AdvSIMD) tile kernels for the quantized K/V dtypes (Q8_0,
 * Q4_0, FP8 E4M3): qk_tile, pv_tile and to_f32, dequantizing inside the
 * loads (dsp.h). The decoded values are exact in f32, so after the load
 * every kernel is plain f32 FMA arithmetic with the float kernels' bounds.
 *
 * One path per kernel: K and V are decoded into registers once per key and
 * used by every query row of the register block (up to 4 rows), the way
 * decode runs. Block formats need no tails (rows are whole 32-value
 * blocks); FP8 row tails load lane by lane, so nothing past a row is read.
 */
#include <arm_neon.h>
#include <string.h>

#include "dsp.h"
#include "arm/neon.h"

#define UNROLL _Pragma("GCC unroll 4")

static ALWAYS_INLINE size_t unit_bytes(int dt)
{
    return dt == ATTN_KV_Q8_0 ? ATTN_Q8_0_BYTES : dt == ATTN_KV_Q4_0 ? ATTN_Q4_0_BYTES : 1;
}

/* The binary16 scale at the head of a block (no alignment assumed). */
static ALWAYS_INLINE float block_scale(const unsigned char *blk)
{
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/*
 * 4 E4M3 values (sign-extended to int32) to f32, exactly: exponent and
 * mantissa moved into an f32's and rebiased (+120) for normal values;
 * subnormals as 2^-6 * (1 + m/8) - 2^-6 = m * 2^-9, so no f32 subnormal is
 * formed and a flush-to-zero mode (FPCR.FZ) cannot change a value.
 * S.1111.111 becomes NaN.
 */
static ALWAYS_INLINE float32x4_t fp8_4(int32x4_t w)
{
    const uint32x4_t mag = vandq_u32(vreinterpretq_u32_s32(vshlq_n_s32(w, 20)),
                                     vdupq_n_u32(0x07F00000u));
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_s32(vshlq_n_s32(w, 24)),
                                      vdupq_n_u32(0x80000000u));
    const float32x4_t normal = vreinterpretq_f32_u32(vaddq_u32(mag, vdupq_n_u32(120u << 23)));
    const float32x4_t sub = vsubq_f32(vreinterpretq_f32_u32(vaddq_u32(mag, vdupq_n_u32(121u << 23))),
                                      vdupq_n_f32(0x1p-6f));
    const uint32x4_t is_sub = vceqq_u32(vandq_u32(mag, vdupq_n_u32(0x07800000u)), vdupq_n_u32(0));
    const uint32x4_t is_nan = vceqq_u32(mag, vdupq_n_u32(0x07F00000u));
    float32x4_t v = vbslq_f32(is_sub, sub, normal);
    v = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(v), sign));
    return vbslq_f32(is_nan, vdupq_n_f32(__builtin_nanf("")), v);
}

/* Values t..t+3 (t a multiple of 4) of a row of dtype dt, as f32. */
static ALWAYS_INLINE float32x4_t qload4(int dt, const unsigned char *row, size_t t)
{
    if (dt == ATTN_KV_FP8) {
        uint32_t b;
        memcpy(&b, row + t, sizeof b);
        const int8x8_t x = vreinterpret_s8_u32(vdup_n_u32(b));
        return fp8_4(vmovl_s16(vget_low_s16(vmovl_s8(x))));
    }
    const unsigned char *blk = row + t / ATTN_QBLOCK * unit_bytes(dt);
    const size_t i = t % ATTN_QBLOCK;
    uint32_t b;
    int32x4_t iv;
    if (dt == ATTN_KV_Q8_0) {
        memcpy(&b, blk + 2 + i, sizeof b);
        iv = vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(vdup_n_u32(b)))));
    } else { /* Q4_0: values 0..15 in the low nibbles, 16..31 in the high */
        memcpy(&b, blk + 2 + (i & 15), sizeof b);
        uint8x8_t x = vreinterpret_u8_u32(vdup_n_u32(b));
        x = i & 16 ? vshr_n_u8(x, 4) : vand_u8(x, vdup_n_u8(0x0f));
        iv = vsubq_s32(vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(x)))),
                       vdupq_n_s32(8));
    }
    return vmulq_n_f32(vcvtq_f32_s32(iv), block_scale(blk));
}

/* The first n (1..3) FP8 values from t, zeros elsewhere. */
static ALWAYS_INLINE float32x4_t qload4_part(const unsigned char *row, size_t t, size_t n)
{
    unsigned char buf[8] = {0};
    memcpy(buf, row + t, n);
    return qload4(ATTN_KV_FP8, buf, 0);
}

/* Sum of each of the four vectors, as the four lanes of the result. */
static ALWAYS_INLINE float32x4_t reduce4(float32x4_t a, float32x4_t b, float32x4_t c,
                                         float32x4_t d)
{
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

/* R query rows x C keys (R, C <= 4): R*C accumulators over d. */
static ALWAYS_INLINE void qk_block(int dt, size_t R, size_t C, const float *q,
                                   ptrdiff_t q_stride, const unsigned char *k, ptrdiff_t kb,
                                   size_t d, float scale, float *s, ptrdiff_t s_stride)
{
    float32x4_t acc[4][4];
    UNROLL for (size_t r = 0; r < 4; r++)
        UNROLL for (size_t c = 0; c < 4; c++)
            acc[r][c] = vdupq_n_f32(0.0f);
    size_t t = 0;
    for (; t + 4 <= d; t += 4) {
        float32x4_t kv[4];
        UNROLL for (size_t c = 0; c < C; c++)
            kv[c] = qload4(dt, k + (ptrdiff_t)c * kb, t);
        UNROLL for (size_t r = 0; r < R; r++) {
            const float32x4_t qv = vld1q_f32(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t);
            UNROLL for (size_t c = 0; c < C; c++)
                acc[r][c] = vfmaq_f32(acc[r][c], qv, kv[c]);
        }
    }
    if (t < d) { /* FP8 only */
        const size_t n = d - t;
        float32x4_t kv[4];
        UNROLL for (size_t c = 0; c < C; c++)
            kv[c] = qload4_part(k + (ptrdiff_t)c * kb, t, n);
        UNROLL for (size_t r = 0; r < R; r++) {
            const float32x4_t qv = load_part(q + (ptrdiff_t)r * q_stride + (ptrdiff_t)t, n, 0.0f);
            UNROLL for (size_t c = 0; c < C; c++)
                acc[r][c] = vfmaq_f32(acc[r][c], qv, kv[c]);
        }
    }
    UNROLL for (size_t r = 0; r < R; r++) {
        const float32x4_t dots =
            vmulq_n_f32(reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]), scale);
        float *sr = s + (ptrdiff_t)r * s_stride;
        if (C == 4)
            vst1q_f32(sr, dots);
        else
            store_part(sr, dots, C);
    }
}

static ALWAYS_INLINE void qk_rows(int dt, size_t R, const float *q, ptrdiff_t q_stride,
                                  const unsigned char *k, ptrdiff_t kb, size_t nk, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    size_t c = 0;
    for (; c + 4 <= nk; c += 4)
        qk_block(dt, R, 4, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride);
    switch (nk - c) {
    case 3: qk_block(dt, R, 3, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride); break;
    case 2: qk_block(dt, R, 2, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride); break;
    case 1: qk_block(dt, R, 1, q, q_stride, k + (ptrdiff_t)c * kb, kb, d, scale, s + c, s_stride); break;
    default: break;
    }
}

static ALWAYS_INLINE void qk_tile(int dt, const float *q, ptrdiff_t q_stride, const void *k,
                                  ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,
                                  float scale, float *s, ptrdiff_t s_stride)
{
    const unsigned char *kp = k;
    const ptrdiff_t kb = k_stride * (ptrdiff_t)unit_bytes(dt);
    size_t r = 0;
    for (; r + 4 <= nq; r += 4)
        qk_rows(dt, 4, q + (ptrdiff_t)r * q_stride, q_stride, kp, kb, nk, d, scale,
                s + (ptrdiff_t)r * s_stride, s_stride);
    switch (nq - r) {
    case 3: qk_rows(dt, 3, q + (ptrdiff_t)r * q_stride, q_stride, kp, kb, nk, d, scale, s + (ptrdiff_t)r * s_stride, s_stride); break;
    case 2: qk_rows(dt, 2, q + (ptrdiff_t)r * q_stride, q_stride, kp, kb, nk, d, scale, s + (ptrdiff_t)r * s_stride, s_stride); break;
    case 1: qk_rows(dt, 1, q + (ptrdiff_t)r * q_stride, q_stride, kp, kb, nk, d, scale, s + (ptrdiff_t)r * s_stride, s_stride); break;
    default: break;
    }
}

/*
 * R rows (R <= 4) x W vectors of 4 columns from j0 (W <= 4) over nk keys,
 * the accumulators in registers for the whole key loop; with tail > 0 the
 * last vector covers its first `tail` columns only (FP8).
 */
static ALWAYS_INLINE void pv_block(int dt, size_t R, size_t W, size_t tail, const float *p,
                                   ptrdiff_t p_stride, const unsigned char *v, ptrdiff_t vb,
                                   size_t nk, size_t j0, float *acc, ptrdiff_t acc_stride)
{
    float32x4_t a[4][4];
    UNROLL for (size_t r = 0; r < R; r++)
        UNROLL for (size_t i = 0; i < W; i++) {
            const float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(j0 + 4 * i);
            a[r][i] = tail && i == W - 1 ? load_part(ar, tail, 0.0f) : vld1q_f32(ar);
        }
    for (size_t c = 0; c < nk; c++) {
        const unsigned char *row = v + (ptrdiff_t)c * vb;
        float32x4_t vv[4];
        UNROLL for (size_t i = 0; i < W; i++)
            vv[i] = tail && i == W - 1 ? qload4_part(row, j0 + 4 * i, tail)
                                       : qload4(dt, row, j0 + 4 * i);
        UNROLL for (size_t r = 0; r < R; r++) {
            const float w = p[(ptrdiff_t)r * p_stride + (ptrdiff_t)c];
            UNROLL for (size_t i = 0; i < W; i++)
                a[r][i] = vfmaq_n_f32(a[r][i], vv[i], w);
        }
    }
    UNROLL for (size_t r = 0; r < R; r++)
        UNROLL for (size_t i = 0; i < W; i++) {
            float *ar = acc + (ptrdiff_t)r * acc_stride + (ptrdiff_t)(j0 + 4 * i);
            if (tail && i == W - 1)
                store_part(ar, a[r][i], tail);
            else
                vst1q_f32(ar, a[r][i]);
        }
}

static ALWAYS_INLINE void pv_rows(int dt, size_t W, size_t tail, const float *p,
                                  ptrdiff_t p_stride, const unsigned char *v, ptrdiff_t vb,
                                  size_t nq, size_t nk, size_t j0, float *acc,
                                  ptrdiff_t acc_stride)
{
    size_t r = 0;
    for (; r + 4 <= nq; r += 4)
        pv_block(dt, 4, W, tail, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
    for (; r < nq; r++)
        pv_block(dt, 1, W, tail, p + (ptrdiff_t)r * p_stride, p_stride, v, vb, nk, j0,
                 acc + (ptrdiff_t)r * acc_stride, acc_stride);
}

static ALWAYS_INLINE void pv_tile(int dt, const float *p, ptrdiff_t p_stride, const void *v,
                                  ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,
                                  float *acc, ptrdiff_t acc_stride)
{
    const unsigned char *vp = v;
    const ptrdiff_t vb = v_stride * (ptrdiff_t)unit_bytes(dt);
    size_t j0 = 0;
    for (; j0 + 16 <= dv; j0 += 16)
        pv_rows(dt, 4, 0, p, p_stride, vp, vb, nq, nk, j0, acc, acc_stride);
    const size_t rest = dv - j0; /* 0..15: FP8 only unless a multiple of 4 */
    if (rest == 0)
        return;
    const size_t w = (rest + 3) / 4, tail = rest % 4;
    switch (w) {
    case 1: pv_rows(dt, 1, tail, p, p_stride, vp, vb, nq, nk, j0, acc, acc_stride); break;
    case 2: pv_rows(dt, 2, tail, p, p_stride, vp, vb, nq, nk, j0, acc, acc_stride); break;
    case 3: pv_rows(dt, 3, tail, p, p_stride, vp, vb, nq, nk, j0, acc, acc_stride); break;
    default: pv_rows(dt, 4, tail, p, p_stride, vp, vb, nq, nk, j0, acc, acc_stride); break;
    }
}

static ALWAYS_INLINE void to_f32(int dt, const void *src, float *dst, size_t n)
{
    const unsigned char *row = src;
    size_t t = 0;
    for (; t + 4 <= n; t += 4)
        vst1q_f32(dst + t, qload4(dt, row, t));
    if (t < n)
        store_part(dst + t, qload4_part(row, t, n - t), n - t);
}

#define DEFINE_QUANT_TILES(name, dt)                                                            \
    static void attn_qk_tile_##name(const float *q, ptrdiff_t q_stride, const void *k,          \
                                    ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,         \
                                    float scale, float *s, ptrdiff_t s_stride)                  \
    {                                                                                           \
        qk_tile(dt, q, q_stride, k, k_stride, nq, nk, d, scale, s, s_stride);                   \
    }                                                                                           \
    static void attn_pv_tile_##name(const float *p, ptrdiff_t p_stride, const void *v,          \
                                    ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,        \
                                    float *acc, ptrdiff_t acc_stride)                           \
    {                                                                                           \
        pv_tile(dt, p, p_stride, v, v_stride, nq, nk, dv, acc, acc_stride);                     \
    }                                                                                           \
    static void attn_to_f32_##name(const void *src, float *dst, size_t n)                       \
    {                                                                                           \
        to_f32(dt, src, dst, n);                                                                \
    }

DEFINE_QUANT_TILES(q8_0_neon, ATTN_KV_Q8_0)
DEFINE_QUANT_TILES(q4_0_neon, ATTN_KV_Q4_0)
DEFINE_QUANT_TILES(fp8_neon, ATTN_KV_FP8)

void attn_dsp_init_quant_neon(attn_dsp *t)
{
    t->qk_tile[ATTN_KV_Q8_0] = attn_qk_tile_q8_0_neon;
    t->qk_tile[ATTN_KV_Q4_0] = attn_qk_tile_q4_0_neon;
    t->qk_tile[ATTN_KV_FP8] = attn_qk_tile_fp8_neon;
    t->pv_tile[ATTN_KV_Q8_0] = attn_pv_tile_q8_0_neon;
    t->pv_tile[ATTN_KV_Q4_0] = attn_pv_tile_q4_0_neon;
    t->pv_tile[ATTN_KV_FP8] = attn_pv_tile_fp8_neon;
    t->to_f32[ATTN_KV_Q8_0] = attn_to_f32_q8_0_neon;
    t->to_f32[ATTN_KV_Q4_0] = attn_to_f32_q4_0_neon;
    t->to_f32[ATTN_KV_FP8] = attn_to_f32_fp8_neon;
}

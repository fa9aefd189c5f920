/*
 * Scalar kernels: the fallback on every CPU and the oracle every SIMD kernel
 * is tested against. Built with -ffp-contract=off so the compiler cannot fuse
 * multiply-adds differently from one build to the next; exp/log/tanh come
 * from libm, so the oracle shares no math code with the SIMD kernels (SLEEF).
 */
#include <math.h>

#include "alibi.h"
#include "half.h"
#include "quant.h"
#include "scalar/scalar.h"

static inline float load_f32(const void *p, ptrdiff_t i) { return ((const float *)p)[i]; }
static inline float load_f16(const void *p, ptrdiff_t i) { return attn_f16_to_f32(((const uint16_t *)p)[i]); }
static inline float load_bf16(const void *p, ptrdiff_t i) { return attn_bf16_to_f32(((const uint16_t *)p)[i]); }

/* One variant of each tile kernel per K/V dtype, sharing one body. */
#define DEFINE_TILES(dtype)                                                              \
    static void attn_qk_tile_##dtype##_scalar(const float *q, ptrdiff_t q_stride, const void *k,      \
                                ptrdiff_t k_stride, size_t nq, size_t nk, size_t d,      \
                                float scale, float *s, ptrdiff_t s_stride)               \
    {                                                                                    \
        for (size_t r = 0; r < nq; r++) {                                                \
            const float *qr = q + (ptrdiff_t)r * q_stride;                               \
            for (size_t c = 0; c < nk; c++) {                                            \
                ptrdiff_t base = (ptrdiff_t)c * k_stride;                                \
                float dot = 0.0f;                                                        \
                for (size_t t = 0; t < d; t++)                                           \
                    dot += qr[t] * load_##dtype(k, base + (ptrdiff_t)t);                 \
                s[(ptrdiff_t)r * s_stride + (ptrdiff_t)c] = dot * scale;                 \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    static void attn_pv_tile_##dtype##_scalar(const float *p, ptrdiff_t p_stride, const void *v,      \
                                ptrdiff_t v_stride, size_t nq, size_t nk, size_t dv,     \
                                float *acc, ptrdiff_t acc_stride)                        \
    {                                                                                    \
        for (size_t r = 0; r < nq; r++) {                                                \
            float *ar = acc + (ptrdiff_t)r * acc_stride;                                 \
            const float *pr = p + (ptrdiff_t)r * p_stride;                               \
            for (size_t c = 0; c < nk; c++) {                                            \
                ptrdiff_t base = (ptrdiff_t)c * v_stride;                                \
                float w = pr[c];                                                         \
                for (size_t t = 0; t < dv; t++)                                          \
                    ar[t] += w * load_##dtype(v, base + (ptrdiff_t)t);                   \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
    static void attn_to_f32_##dtype##_scalar(const void *src, float *dst, size_t n)                    \
    {                                                                                    \
        for (size_t i = 0; i < n; i++)                                                   \
            dst[i] = load_##dtype(src, (ptrdiff_t)i);                                    \
    }

DEFINE_TILES(f32)
DEFINE_TILES(f16)
DEFINE_TILES(bf16)

static float attn_row_max_f32_scalar(const float *x, size_t n)
{
    float m = x[0];
    int any_nan = 0;
    for (size_t i = 0; i < n; i++) {
        m = x[i] > m ? x[i] : m;
        any_nan |= isnan(x[i]);
    }
    return any_nan ? NAN : m;
}

static float attn_exp_sum_f32_scalar(float *x, size_t n, float max, float *weighted)
{
    float sum = 0.0f, wsum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float shifted = x[i] - max;
        float e = expf(shifted);
        x[i] = e;
        sum += e;
        if (e != 0.0f) /* -inf entries (e == 0) must not give 0 * -inf */
            wsum += e * shifted;
    }
    if (weighted)
        *weighted = wsum;
    return sum;
}

static void attn_row_scale_f32_scalar(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

static void attn_softcap_f32_scalar(float *x, size_t n, float cap)
{
    float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++)
        x[i] = cap * tanhf(x[i] * inv);
}

static void attn_add_bias_f32_scalar(float *x, const float *bias, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += bias[i];
}

static void attn_mask_bool_f32_scalar(float *x, const uint8_t *mask, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!mask[i])
            x[i] = -INFINITY;
}

static void attn_softmax_bwd_f32_scalar(const float *p, const float *dp, float *ds, size_t n)
{
    float dot = 0.0f;
    for (size_t i = 0; i < n; i++)
        dot += p[i] * dp[i];
    for (size_t i = 0; i < n; i++)
        ds[i] = p[i] * (dp[i] - dot);
}

void attn_dsp_init_scalar(attn_dsp *t)
{
    t->isa = ATTN_ISA_SCALAR;
    t->isa_name = "scalar";
    t->block_q = 16;
    t->block_k = 64;
    t->qk_tile[ATTN_KV_F32] = attn_qk_tile_f32_scalar;
    t->qk_tile[ATTN_KV_F16] = attn_qk_tile_f16_scalar;
    t->qk_tile[ATTN_KV_BF16] = attn_qk_tile_bf16_scalar;
    t->pv_tile[ATTN_KV_F32] = attn_pv_tile_f32_scalar;
    t->pv_tile[ATTN_KV_F16] = attn_pv_tile_f16_scalar;
    t->pv_tile[ATTN_KV_BF16] = attn_pv_tile_bf16_scalar;
    t->to_f32[ATTN_KV_F32] = attn_to_f32_f32_scalar;
    t->to_f32[ATTN_KV_F16] = attn_to_f32_f16_scalar;
    t->to_f32[ATTN_KV_BF16] = attn_to_f32_bf16_scalar;
    t->row_max = attn_row_max_f32_scalar;
    t->exp_sum = attn_exp_sum_f32_scalar;
    t->row_scale = attn_row_scale_f32_scalar;
    t->softcap = attn_softcap_f32_scalar;
    t->add_bias = attn_add_bias_f32_scalar;
    t->mask_bool = attn_mask_bool_f32_scalar;
    t->softmax_bwd = attn_softmax_bwd_f32_scalar;
    attn_dsp_init_backward_scalar(t);
    t->alibi = attn_alibi_f32_scalar;
    attn_dsp_init_merge_scalar(t);
    attn_dsp_init_quant_scalar(t);
}

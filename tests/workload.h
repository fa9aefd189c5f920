/* SPDX-License-Identifier: MIT */
/*
 * Random attention problems for the operation-level tests: shapes, layouts,
 * dtypes, masks and options chosen from a feature set, with guarded output
 * buffers whose padding must stay untouched. The features narrow the
 * problem generator's profile (problems/gen.h), drawn from the harness's seeded
 * RNG and materialised in canary-guarded buffers.
 */
#ifndef ATTN_TEST_WORKLOAD_H
#define ATTN_TEST_WORKLOAD_H

#include "gen.h"
#include "harness.h"

enum wl_feature {
    WL_CAUSAL = 1u << 0,
    WL_LENS = 1u << 1,       /* q_lens and kv_lens, including 0 and full */
    WL_WINDOW = 1u << 2,
    WL_SOFTCAP = 1u << 3,
    WL_BIAS = 1u << 4,       /* F32 bias with random broadcast strides */
    WL_MASK = 1u << 5,       /* BOOL mask with random broadcast strides */
    WL_GQA = 1u << 6,        /* q_heads = 8, kv_heads = 2 */
    WL_MQA = 1u << 7,        /* kv_heads = 1 */
    WL_BLHD = 1u << 8,       /* [B,L,H,D] layouts */
    WL_PAD = 1u << 9,        /* padded row strides */
    WL_F16 = 1u << 10,       /* F16 k, v (and sometimes q) */
    WL_BF16 = 1u << 11,
    WL_VDIM = 1u << 12,      /* v_dim != head_dim */
    WL_VDIM0 = 1u << 13,     /* v_dim = 0, meaning head_dim */
    WL_DECODE = 1u << 14,    /* q_len = 1 */
    WL_Q_SHORT = 1u << 15,   /* q_len < kv_len */
    WL_Q_LONG = 1u << 16,    /* q_len > kv_len */
    WL_SCALE = 1u << 17,     /* an explicit scale */
    WL_OFFSET = 1u << 18,    /* inputs and outputs at +1 element */
    WL_BIG_HEAD = 1u << 19,  /* head_dim up to 256 */
    /* score modifiers (1.1) */
    WL_SINKS = 1u << 20,     /* sink logits, per head or per batch and head */
    WL_ALIBI = 1u << 21,     /* ALiBi slopes, per head or per batch and head */
    WL_WINDOW_R = 1u << 22,  /* window_right (two-sided with WL_WINDOW) */
    WL_LONG_KV = 1u << 23,   /* kv_len 257..1400 (2048..4500 with WL_DECODE), q_len <= 6:
                                several 256-key chunks for split-KV */
    WL_MANY_CHUNKS = 1u << 24, /* with WL_LONG_KV | WL_DECODE: kv_len 8450..9000, more
                                  256-key chunks than one wsum call merges (32) */
    WL_TREE = 1u << 25,      /* a draft tree (tree_parents) where every sequence fits */
    WL_TOPK = 1u << 26,      /* top-k lists (topk_indices): repeats, -1 slots, shared rows */
    WL_KPOS = 1u << 27,      /* k_positions (every GEN_KPOS_* kind), q_pos now and then */
    WL_WIDE = 1u << 28,      /* MLA-like: one KV head, 24..40 query heads, head_dim
                                576, v_dim 512: more rows than the scratch holds
                                beside their accumulators (forward.c, acc_direct) */
};

#define WL_MAX_BATCH 3

typedef struct workload {
    attn_shape shape;
    attn_options opt;
    attn_tensor q, k, v, mask, bias;
    int32_t q_lens[WL_MAX_BATCH], kv_lens[WL_MAX_BATCH];
    int64_t dv; /* v_dim resolved */
    buf qb, kb, vb, mb, bb;
    /* outputs: scores/weights [B][Hq][Lq][Lk] and out [B][Hq][Lq][dv], both
     * in the workload's layout, plus three stats arrays */
    attn_tensor scores, out;
    buf sb, ob, lb, xb, eb;
    attn_row_stats stats;
    unsigned features;
    /* score modifiers: F32 [B][Hq] views */
    attn_tensor sinks, alibi;
    buf snb, alb;
    /* the generator's description and buffers (the views above are theirs);
       other roles' guarded buffers */
    gen_problem gen;
    gen_bufs gm;
    buf other[GEN_ROLE_COUNT];
} workload;

/* A random problem with the given features (inputs filled, outputs allocated). */
void wl_make(workload *w, unsigned features);
/* The harness's RNG g as the problem generator's choice source (gen.h). */
gen_src wl_gen_source(rng *g);
/* One line describing the problem, for failure messages. */
const char *wl_describe(const workload *w);
/* Refills every output byte (data, padding, guards) with the canary. */
void wl_poison_outputs(workload *w);
/* Dense copies [rows][cols] of the strided outputs. */
void wl_gather(const workload *w, const attn_tensor *t, int64_t cols, float *dense);
/* Fails when an output element outside the logical view (row padding,
 * guard zones) changed. */
void wl_check_outputs(const workload *w, int check_scores, int check_out, int check_stats);
/* Fills the score table with random values in [lo, hi) (for mask_apply). */
void wl_fill_scores(workload *w, float lo, float hi);
int64_t wl_rows(const workload *w);
void wl_free(workload *w);

/*
 * The forward's out in F16 or BF16: wl_out16 returns a twin of w->out in
 * `dtype` (the same strides in elements, its own guarded buffer b at the
 * same misalignment, every element canary16(dtype)). wl_check_out16 checks
 * it after a call whose F32 twin gave the dense rows f32 ([rows][dv], from
 * wl_gather): every element of the view is f32's rounded to nearest even,
 * bit for bit (expect_rounded16), everything else of b kept its canary, and
 * (want != NULL) the values are within tol_out16 of the float64 reference
 * want, err (ref_attn's o, o_err).
 */
attn_tensor wl_out16(const workload *w, int32_t dtype, buf *b);
void wl_check_out16(const workload *w, const buf *b, const attn_tensor *t, const float *f32,
                    const double *want, const double *err);

/* Element pointer for a tensor (any dtype). */
void *wl_at(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c);
/* Sets an input element to v (converted to the tensor's dtype). */
void wl_set(const attn_tensor *t, int64_t b, int64_t h, int64_t r, int64_t c, float v);

#endif /* ATTN_TEST_WORKLOAD_H */

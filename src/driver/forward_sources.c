/* SPDX-License-Identifier: MIT */
/*
 * attn_forward_sources (attn.h, "Two K/V sources in one call"). The second
 * source is validated as a top-k forward problem of its own over the same
 * q, out and stats: its options keep only what concerns its keys (scale,
 * softcap, the precision mode, the per-call FP8 scales) and the query side
 * (q_lens, q_offsets), so every check of attn_forward's k, v, scales, tail
 * and lists applies to it unchanged. The forward's tasks then fold its
 * selected keys into each row's state after the first source's keys
 * (src/driver/topk.c, attn_forward_extra): one softmax, one pass over q.
 */
#include <stddef.h>

#include "forward.h"
#include "internal.h"
#include "validate.h"

/* Its 1.13 size: every field of that version. */
#define SOURCE_SIZE_1_13 (offsetof(attn_kv_source, k_tail_dim) + sizeof(int64_t))

static attn_status read_source(attn_kv_source *x, const attn_kv_source *user)
{
    const uint32_t size = user->struct_size;
    if (size < SOURCE_SIZE_1_13 || !attn_struct_tail_zero(user, sizeof *user, size))
        return attn_fail(ATTN_ERR_VERSION,
                         "extra->struct_size = %u: this library (%s) takes %zu bytes of "
                         "attn_kv_source, with any bytes past them zero (at most %d)",
                         (unsigned)size, ATTN_VERSION_STRING, sizeof *user,
                         ATTN_STRUCT_SIZE_MAX);
    *x = *user;
    if (x->flags != 0)
        return attn_fail(ATTN_ERR_ARG, "extra->flags = %u: no flag is defined", x->flags);
    if (x->kv_len < 1)
        return attn_fail(ATTN_ERR_ARG, "extra->kv_len = %lld: at least 1", (long long)x->kv_len);
    if (!x->indices || x->topk < 1)
        return attn_fail(ATTN_ERR_ARG, "extra->%s: the second source's keys are those its lists "
                         "name (indices with topk >= 1)", !x->indices ? "indices is NULL" : "topk < 1");
    return ATTN_OK;
}

/* The second source's problem: its own keys, the first's query side. */
static attn_options source_options(const attn_options *o, const attn_kv_source *x)
{
    attn_options s = ATTN_OPTIONS_INIT;
    s.scale = o->scale;
    s.softcap = o->softcap;
    s.q_lens = o->q_lens;
    s.q_offsets = o->q_offsets;
    s.parallel_for = o->parallel_for;
    s.parallel_ctx = o->parallel_ctx;
    s.k_scale = o->k_scale;
    s.v_scale = o->v_scale;
    s.precision = o->precision;
    s.kv_splits = 1;
    s.kv_lens = x->kv_lens;
    s.topk_indices = x->indices;
    s.topk = x->topk;
    s.k_scales = x->k_scales;
    s.v_scales = x->v_scales;
    s.k_scale_group = x->k_scale_group;
    s.v_scale_group = x->v_scale_group;
    s.k_tail = x->k_tail;
    s.k_tail_dim = x->k_tail_dim;
    return s;
}

/* *second: whether a failure is the second source's. */
static attn_status checked_sources(const attn_dsp *dsp, const attn_shape *shape,
                                   const attn_options *opt, const attn_tensor *q,
                                   const attn_tensor *k, const attn_tensor *v,
                                   const attn_kv_source *extra, const attn_tensor *out,
                                   const attn_row_stats *stats, int *second)
{
    *second = 0;
    if (!extra)
        return attn_fail(ATTN_ERR_NULL, "extra is NULL");
    attn_options o;
    ATTN_TRY(attn_read_options(&o, opt));
    if (o.kv_splits >= 2)
        return attn_fail(ATTN_ERR_UNSUPPORTED, "kv_splits = %d: a call with two sources runs "
                         "unsplit (0 or 1)", (int)o.kv_splits);
    /* unsplit, no shared-prefix pass, no wide accumulators: nothing of the
       workspace is used */
    o.workspace = NULL;
    o.workspace_size = 0;
    o.kv_splits = 1;
    attn_problem pb, px;
    ATTN_TRY(attn_validate(&pb, &attn_forward_op, shape, &o, q, k, v, out, stats));
    *second = 1;
    attn_kv_source x = {0};
    ATTN_TRY(read_source(&x, extra));
    const attn_options xo = source_options(&o, &x);
    attn_shape xs = *shape;
    xs.kv_len = x.kv_len;
    ATTN_TRY(attn_validate(&px, &attn_forward_op, &xs, &xo, q, x.k, x.v, out, stats));
    *second = 0;
    pb.kv2 = &px;
    attn_run(dsp, &pb);
    return ATTN_OK;
}

attn_status attn_forward_sources_with(const attn_dsp *dsp, const attn_shape *shape,
                                      const attn_options *opt, const attn_tensor *q,
                                      const attn_tensor *k, const attn_tensor *v,
                                      const attn_kv_source *extra, const attn_tensor *out,
                                      const attn_row_stats *stats)
{
    int second;
    return checked_sources(dsp, shape, opt, q, k, v, extra, out, stats, &second);
}

attn_status attn_forward_sources(const attn_shape *shape, const attn_options *opt,
                                 const attn_tensor *q, const attn_tensor *k,
                                 const attn_tensor *v, const attn_kv_source *extra,
                                 const attn_tensor *out, const attn_row_stats *stats)
{
    const unsigned mark = attn_error_mark();
    int second;
    const attn_status s =
        checked_sources(attn_dsp_active(), shape, opt, q, k, v, extra, out, stats, &second);
    return attn_error_done(second ? "attn_forward_sources, second source" : "attn_forward_sources",
                           mark, s);
}

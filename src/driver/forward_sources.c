/* SPDX-License-Identifier: MIT */
/*
 * attn_forward_sources (attn.h, "Two K/V sources in one call"). The second
 * source is validated as a top-k forward problem of its own over the same
 * q, out and stats: its options keep only what concerns its keys (scale,
 * softcap, the precision mode, the per-call FP8 scales) and the query side
 * (q_lens, q_offsets), so every check of attn_forward's k, v, scales, tail
 * and lists applies to it unchanged. The forward's tasks then fold its
 * selected keys into each row's state after the first source's keys
 * (src/driver/topk.c, attn_forward_extra): one softmax, one pass over q. A
 * split cuts the second source's keys into chunks (the first source's keys
 * go with chunk 0), its workspace sized from the second source.
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
    /* its chunks follow the caller's kv_splits (attn_split_seq reads it) */
    s.kv_splits = o->kv_splits;
    s.workspace = o->workspace; /* the scratch hook sizes it from the source */
    s.workspace_size = o->workspace_size;
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

/* The split of the second source's keys, as attn_forward splits its own
   (attn.h, "Split-KV"): its lengths and lists; 0: unsplit, or the size
   overflows. */
static size_t sources_need(const attn_shape *s, const attn_options *o, const attn_kv_source *x,
                           int64_t *splits)
{
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    *splits = attn_split_grid(s->batch, s->q_heads, s->kv_heads, s->q_len, x->kv_len, x->topk,
                              o->q_lens, x->kv_lens, o->kv_splits);
    return *splits > 1 ? attn_split_bytes(s->batch, s->q_heads, s->q_len, v_dim, *splits) : 0;
}

/* The forward's scratch hook for both problems: the workspace, sized from
   the second source, among the outputs of each validation, so it shares no
   byte with either source's inputs. */
static attn_status sources_scratch(attn_problem *pb, const attn_options *o, attn_range_set *set)
{
    const attn_kv_source *x = pb->op->ctx;
    const attn_shape s = {pb->batch, pb->q_heads, pb->kv_heads, pb->q_len,
                          pb->kv_len, pb->head_dim, pb->v_dim};
    int64_t splits;
    const size_t need = sources_need(&s, o, x, &splits);
    const size_t have = o->workspace ? o->workspace_size : 0;
    if (splits > 1 && need == 0 && o->kv_splits >= 2)
        return attn_fail(ATTN_ERR_SHAPE, "the split workspace would not fit size_t");
    if (splits > 1 && (need == 0 || have < need)) {
        if (o->kv_splits >= 2) /* asked for, impossible: say so */
            return attn_fail(ATTN_ERR_ARG, "kv_splits = %d needs %zu bytes of workspace "
                             "(attn_forward_sources_workspace_size), %zu given",
                             (int)o->kv_splits, need, have);
        splits = 1; /* automatic: the documented unsplit fallback */
    }
    if (splits > 1)
        ATTN_TRY(attn_add_array(set, o->workspace, (int64_t)need, 1, 1));
    pb->splits = splits;
    pb->workspace = splits > 1 ? o->workspace : NULL;
    return ATTN_OK;
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
    attn_kv_source x = {0};
    *second = 1;
    ATTN_TRY(read_source(&x, extra));
    *second = 0;
    /* the forward's operation with the workspace sized from the second
       source: no shared-prefix pass, no wide accumulators */
    attn_op op = attn_forward_op;
    op.scratch = sources_scratch;
    op.ctx = &x;
    attn_problem pb, px;
    ATTN_TRY(attn_validate(&pb, &op, shape, &o, q, k, v, out, stats));
    *second = 1;
    const attn_options xo = source_options(&o, &x);
    attn_shape xs = *shape;
    xs.kv_len = x.kv_len;
    ATTN_TRY(attn_validate(&px, &op, &xs, &xo, q, x.k, x.v, out, stats));
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

static attn_status checked_workspace_size(const attn_shape *shape, const attn_options *opt,
                                          const attn_kv_source *extra, size_t *bytes)
{
    if (!shape || !extra || !bytes)
        return ATTN_ERR_NULL;
    attn_options o;
    ATTN_TRY(attn_check_shape_options(shape, opt, &o));
    attn_kv_source x = {0};
    ATTN_TRY(read_source(&x, extra));
    int64_t splits;
    const size_t need = sources_need(shape, &o, &x, &splits);
    if (splits > 1 && need == 0)
        return attn_fail(ATTN_ERR_SHAPE, "the workspace would not fit size_t");
    *bytes = need;
    return ATTN_OK;
}

attn_status attn_forward_sources_workspace_size(const attn_shape *shape, const attn_options *opt,
                                                const attn_kv_source *extra, size_t *bytes)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_forward_sources_workspace_size", mark,
                           checked_workspace_size(shape, opt, extra, bytes));
}

/* Public entry points: validate, pick the active kernel table, run the driver. */
#include "config.h"
#include "internal.h"
#include "problem.h"

const char *attn_strerror(attn_status status)
{
    switch (status) {
    case ATTN_OK: return "Success.";
    case ATTN_ERR_NULL: return "A required pointer or a tensor's data pointer is NULL.";
    case ATTN_ERR_SHAPE: return "A dimension is not positive, or the sizes overflow.";
    case ATTN_ERR_STRIDE:
        return "A stride is negative, or an output is broadcast, not nested, or shares "
               "memory with an input or another output.";
    case ATTN_ERR_ARG:
        return "An argument is invalid: non-finite scale, softcap negative, non-finite or "
               "below 1/FLT_MAX, q_heads not a multiple of kv_heads, unknown flags, wrong "
               "dtype, a length, offset or block index out of range, or an inconsistent "
               "paging description.";
    case ATTN_ERR_UNSUPPORTED:
        return "Not supported by this library or CPU (ISA unavailable, or head_dim/v_dim "
               "above ATTN_MAX_HEAD_DIM).";
    case ATTN_ERR_NOMEM: return "Out of memory.";
    case ATTN_ERR_VERSION: return "attn_options.struct_size is not one this library knows.";
    }
    return "Unknown attn_status value.";
}

uint32_t attn_version(void)
{
    return ATTN_VERSION;
}

const char *attn_version_string(void)
{
    return ATTN_VERSION_STRING;
}

attn_status attn_scores_with(const attn_dsp *dsp, const attn_shape *shape,
                             const attn_options *opt, const attn_tensor *q,
                             const attn_tensor *k, const attn_tensor *scores)
{
    attn_problem pb;
    attn_status status = attn_validate(&pb, ATTN_OP_SCORES, shape, opt, q, k, NULL, scores, NULL);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

attn_status attn_mask_apply_with(const attn_dsp *dsp, const attn_shape *shape,
                                 const attn_options *opt, const attn_tensor *scores)
{
    attn_problem pb;
    attn_status status =
        attn_validate(&pb, ATTN_OP_MASK_APPLY, shape, opt, NULL, NULL, NULL, scores, NULL);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

attn_status attn_weights_with(const attn_dsp *dsp, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *weights,
                              const attn_row_stats *stats)
{
    attn_problem pb;
    attn_status status =
        attn_validate(&pb, ATTN_OP_WEIGHTS, shape, opt, q, k, NULL, weights, stats);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

attn_status attn_forward_with(const attn_dsp *dsp, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *v,
                              const attn_tensor *out, const attn_row_stats *stats)
{
    attn_problem pb;
    attn_status status = attn_validate(&pb, ATTN_OP_FORWARD, shape, opt, q, k, v, out, stats);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

attn_status attn_softmax_with(const attn_dsp *dsp, float *x, int64_t rows, int64_t cols,
                              int64_t row_stride, float *lse)
{
    if (!x)
        return ATTN_ERR_NULL;
    attn_status status = attn_validate_rows(rows, cols, row_stride);
    if (status == ATTN_OK && lse && attn_rows_overlap(lse, rows, 1, 1, x, rows, cols, row_stride))
        status = ATTN_ERR_STRIDE;
    if (status == ATTN_OK)
        attn_run_softmax(dsp, x, rows, cols, row_stride, lse);
    return status;
}

attn_status attn_softmax_backward_with(const attn_dsp *dsp, const float *p,
                                       const float *dp, float *ds, int64_t rows,
                                       int64_t cols, int64_t row_stride)
{
    if (!p || !dp || !ds)
        return ATTN_ERR_NULL;
    attn_status status = attn_validate_rows(rows, cols, row_stride);
    /* ds may be p or dp exactly (element-wise in place), nothing in between */
    if (status == ATTN_OK &&
        ((ds != p && attn_rows_overlap(ds, rows, cols, row_stride, p, rows, cols, row_stride)) ||
         (ds != dp && attn_rows_overlap(ds, rows, cols, row_stride, dp, rows, cols, row_stride))))
        status = ATTN_ERR_STRIDE;
    if (status == ATTN_OK)
        attn_run_softmax_backward(dsp, p, dp, ds, rows, cols, row_stride);
    return status;
}

attn_status attn_scores(const attn_shape *shape, const attn_options *opt,
                        const attn_tensor *q, const attn_tensor *k, const attn_tensor *scores)
{
    return attn_scores_with(attn_dsp_active(), shape, opt, q, k, scores);
}

attn_status attn_mask_apply(const attn_shape *shape, const attn_options *opt,
                            const attn_tensor *scores)
{
    return attn_mask_apply_with(attn_dsp_active(), shape, opt, scores);
}

attn_status attn_softmax(float *x, int64_t rows, int64_t cols, int64_t row_stride, float *lse)
{
    return attn_softmax_with(attn_dsp_active(), x, rows, cols, row_stride, lse);
}

attn_status attn_weights(const attn_shape *shape, const attn_options *opt,
                         const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *weights, const attn_row_stats *stats)
{
    return attn_weights_with(attn_dsp_active(), shape, opt, q, k, weights, stats);
}

attn_status attn_forward(const attn_shape *shape, const attn_options *opt,
                         const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                         const attn_tensor *out, const attn_row_stats *stats)
{
    return attn_forward_with(attn_dsp_active(), shape, opt, q, k, v, out, stats);
}

attn_status attn_softmax_backward(const float *p, const float *dp, float *ds, int64_t rows,
                                  int64_t cols, int64_t row_stride)
{
    return attn_softmax_backward_with(attn_dsp_active(), p, dp, ds, rows, cols, row_stride);
}

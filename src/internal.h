/* SPDX-License-Identifier: MIT */
/* Never exported: the operations on an explicit kernel table, so tests and
   benchmarks run every ISA's table through the one driver; dispatch. */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include "attn.h"
#include "dsp.h"
#include "isa_list.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ATTN_CPU_* bits of what this CPU and OS run */
unsigned attn_cpu_detect(void);

/* initialises dispatch on first use */
const attn_dsp *attn_dsp_active(void);
/* NULL unless built and run by this CPU */
const attn_dsp *attn_dsp_for_isa(attn_isa isa);
/* What ATTN_ISA_AUTO means, given the available tables and the CPU bits. */
attn_isa attn_isa_default(const int *available, unsigned cpu);

/* Validated exactly as the public ones. */
attn_status attn_scores_with(const attn_dsp *dsp, const attn_shape *shape,
                             const attn_options *opt, const attn_tensor *q,
                             const attn_tensor *k, const attn_tensor *scores);
attn_status attn_mask_apply_with(const attn_dsp *dsp, const attn_shape *shape,
                                 const attn_options *opt, const attn_tensor *scores);
attn_status attn_softmax_with(const attn_dsp *dsp, float *x, int64_t rows, int64_t cols,
                              int64_t row_stride, float *lse);
attn_status attn_weights_with(const attn_dsp *dsp, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *weights,
                              const attn_row_stats *stats);
attn_status attn_forward_with(const attn_dsp *dsp, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *v,
                              const attn_tensor *out, const attn_row_stats *stats);
attn_status attn_forward_sources_with(const attn_dsp *dsp, const attn_shape *shape,
                                      const attn_options *opt, const attn_tensor *q,
                                      const attn_tensor *k, const attn_tensor *v,
                                      const attn_kv_source *extra, const attn_tensor *out,
                                      const attn_row_stats *stats);
attn_status attn_merge_with(const attn_dsp *dsp, const attn_shape *shape,
                            const attn_options *opt, const attn_partial *parts,
                            int64_t n_parts, const attn_tensor *out, float *lse);
attn_status attn_backward_with(const attn_dsp *dsp, const attn_shape *shape,
                               const attn_options *opt, const attn_tensor *q,
                               const attn_tensor *k, const attn_tensor *v,
                               const attn_tensor *out, const attn_tensor *dout,
                               const float *lse, const attn_grads *grads);
attn_status attn_softmax_backward_with(const attn_dsp *dsp, const float *p,
                                       const float *dp, float *ds, int64_t rows,
                                       int64_t cols, int64_t row_stride);
attn_status attn_plan_forward_with(const attn_dsp *dsp, void *mem, size_t mem_size,
                                   const attn_shape *shape, const attn_options *opt,
                                   const attn_tensor *q, const attn_tensor *k,
                                   const attn_tensor *v, const attn_tensor *out,
                                   const attn_row_stats *stats, attn_plan **plan);
attn_status attn_cache_append_with(const attn_dsp *dsp, const attn_shape *shape,
                                   const attn_options *opt, const attn_tensor *k_new,
                                   const attn_tensor *v_new, const attn_tensor *k,
                                   const attn_tensor *v);

/* Variables so the tests can run both paths (src/driver/cache_append.c,
   src/driver/backward.c). */
extern size_t attn_append_stage_limit;
extern int64_t attn_bwd_fused_min_tasks;
/* For tests/ref/ref_backward.c, which counts dk's and dv's blocks from the
   plan for their bound (tests/tolerance.h). */
attn_status attn_bwd_plan_blocks(const attn_dsp *dsp, const attn_shape *shape,
                                 const attn_options *opt, const attn_tensor *q,
                                 const attn_tensor *k, const attn_tensor *v,
                                 const attn_tensor *out, const attn_tensor *dout,
                                 const float *lse, const attn_grads *grads,
                                 int64_t *block_rows, int *fused);

/*
 * attn_last_error (attn.h): each public function takes a mark on entry and
 * passes its status through attn_error_done, which on failure sets
 * "attn_<name>: <detail>" (attn_fail's detail, else attn_strerror's), so no
 * failure leaves an earlier call's message. attn_fail returns its status.
 */
attn_status attn_fail(attn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
unsigned attn_error_mark(void);
attn_status attn_error_done(const char *function, unsigned mark, attn_status status);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_INTERNAL_H */

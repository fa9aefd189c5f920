/* SPDX-License-Identifier: MIT */
/*
 * Internal entry points (never exported): the public operations with an
 * explicit kernel table, so tests and benchmarks can run every ISA's table
 * through the one driver, and the dispatch internals.
 */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include "attn.h"
#include "dsp.h"
#include "isa_list.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ATTN_CPU_* bits (isa_list.h) of what this CPU and OS run. */
unsigned attn_cpu_detect(void);

/* The table operations use now (initialises dispatch on first use). */
const attn_dsp *attn_dsp_active(void);
/* The table of `isa` when it is built and this CPU runs it, else NULL. */
const attn_dsp *attn_dsp_for_isa(attn_isa isa);
/* The table ATTN_ISA_AUTO means, given which are available (indexed by
   attn_isa, ATTN_ISA_COUNT entries) and the attn_cpu_detect() bits. */
attn_isa attn_isa_default(const int *available, unsigned cpu);

/* Each public operation, validated exactly like it, on the table `dsp`. */
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

/* attn_cache_append stages a call's encoded rows when they take at most this
   many bytes (and at most its stage's size; src/driver/cache_append.c); the
   tests set it to 0 to run the other path. */
extern size_t attn_append_stage_limit;

/* attn_backward uses its fused plan from this many (batch entry, KV head)
   pairs on (src/driver/backward.c); the tests set it to run both plans. */
extern int64_t attn_bwd_fused_min_tasks;
/* What attn_backward_with would plan for these arguments (validated as it
   validates them): the rows of its query blocks, the most a pt kernel call
   sums, and whether the plan is the fused one (its blocks cut each query
   head's rows; the split plan's cut the group's rows position by
   position, its heads interleaved). tests/ref/ref_backward.c counts dk's and
   dv's blocks from them for their bound (tests/tolerance.h). */
attn_status attn_bwd_plan_blocks(const attn_dsp *dsp, const attn_shape *shape,
                                 const attn_options *opt, const attn_tensor *q,
                                 const attn_tensor *k, const attn_tensor *v,
                                 const attn_tensor *out, const attn_tensor *dout,
                                 const float *lse, const attn_grads *grads,
                                 int64_t *block_rows, int *fused);

/*
 * attn_last_error (attn.h): each public function that returns an
 * attn_status takes a mark on entry and passes its result through
 * attn_error_done, which, on a failure, makes the thread's message
 * "attn_<name>: <detail>": the detail a check set with attn_fail during the
 * call, else attn_strerror's sentence. So no failure leaves an earlier
 * call's message in place. attn_fail formats the detail (printf-style,
 * truncated to the buffer) and returns its status, for `return attn_fail(
 * ATTN_ERR_ARG, "...", ...)` at a check.
 */
attn_status attn_fail(attn_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
unsigned attn_error_mark(void);
attn_status attn_error_done(const char *function, unsigned mark, attn_status status);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_INTERNAL_H */

/* SPDX-License-Identifier: MIT */
/*
 * Plans (attn.h, since 1.3): attn_forward validated once (attn_validate
 * with the forward's attn_op), its problem kept in the caller's memory
 * with copies of the arrays that describe the batch, and run on new data
 * pointers. A run rebuilds only the byte ranges that can move (q, k, v,
 * out, stats, from the lengths validation found) and checks them against
 * the fixed ones kept at planning (option tensors, workspace, the plan).
 */
#include <string.h>

#include "driver.h"
#include "internal.h"
#include "validate.h"

#define TRY ATTN_TRY
#define PLAN_MAGIC 0x6174746e706c616eull /* "attnplan" */

struct attn_plan {
    uint64_t magic;
    const attn_dsp *dsp;
    attn_problem pb;   /* data pointers of q, k, v, out and stats replaced per run */
    task_plan tasks;   /* the forward's task partition */
    attn_shape shape;
    attn_byte_range fixed[ATTN_MAX_INPUT_RANGES]; /* option tensors, the plan's arrays */
    int n_fixed;
    uintptr_t mem_end; /* the plan is [this, mem_end) */
    /* then the copied arrays, 8-byte aligned */
};

/* Entries of an array option's line: [batch], [batch][q_len] (QROWS),
   [batch][kv_len] (KSLOTS), or [batch][q_len][topk] (TOPK; validation
   checked that it fits). */
static int64_t entries_of(attn_opt_extent e, const attn_shape *s, const attn_options *o)
{
    if (e == ATTN_OPT_EXTENT_TOPK)
        return s->batch * s->q_len * o->topk;
    if (e == ATTN_OPT_EXTENT_KSLOTS)
        return s->batch * s->kv_len;
    return e == ATTN_OPT_EXTENT_QROWS ? s->batch * s->q_len : s->batch;
}

static size_t round8(size_t n) { return (n + 7) & ~(size_t)7; }

/* What the plan does with an option line, by kind: the I32 and I64 arrays
   are copied (their entries by the line's extent), nothing else. */
#define PLAN_NOTHING(f, e)
#define PLAN_SIZE_I32(f, e)                                                                 \
    if (o->f)                                                                              \
        n += round8((size_t)entries_of(ATTN_OPT_EXTENT_##e, s, o) * sizeof *o->f);
#define PLAN_SIZE_I64 PLAN_SIZE_I32
#define PLAN_SIZE_HEADER PLAN_NOTHING
#define PLAN_SIZE_VALUE PLAN_NOTHING
#define PLAN_SIZE_HOOK PLAN_NOTHING
#define PLAN_SIZE_TENSOR PLAN_NOTHING
#define PLAN_SIZE_PAGES PLAN_NOTHING
#define PLAN_SIZE_SCRATCH PLAN_NOTHING
#define PLAN_COPY_I32(f, e)                                                                 \
    if (o->f)                                                                              \
        o->f = copy_to(&at, o->f, (size_t)entries_of(ATTN_OPT_EXTENT_##e, shape, o) * sizeof *o->f);
#define PLAN_COPY_I64 PLAN_COPY_I32
#define PLAN_COPY_HEADER PLAN_NOTHING
#define PLAN_COPY_VALUE PLAN_NOTHING
#define PLAN_COPY_HOOK PLAN_NOTHING
#define PLAN_COPY_TENSOR PLAN_NOTHING
#define PLAN_COPY_PAGES PLAN_NOTHING
#define PLAN_COPY_SCRATCH PLAN_NOTHING

/* The plan's bytes for checked shape and options: the header (8 bytes of
   slack for aligning the caller's memory) and each array copied; 0 when
   the block table's extent overflows. */
static size_t plan_bytes(const attn_shape *s, const attn_options *o)
{
    size_t n = round8(sizeof(struct attn_plan)) + 8;
#define PLAN_X_SIZE(f, kind, extent, dtype, off, since, rule) PLAN_SIZE_##kind(f, extent)
    ATTN_OPTION_LIST(PLAN_X_SIZE)
#undef PLAN_X_SIZE
    if (o->block_table) {
        const int64_t entries = attn_block_table_entries(o, s);
        if (entries < 0)
            return 0;
        n += round8((size_t)entries * sizeof(int32_t));
    }
    return n;
}

static attn_status checked_plan_size(const attn_shape *shape, const attn_options *opt, size_t *bytes)
{
    if (!shape || !bytes)
        return ATTN_ERR_NULL;
    attn_options o;
    TRY(attn_check_shape_options(shape, opt, &o));
    TRY(attn_check_batch_arrays(&o, shape, 1));
    const size_t n = plan_bytes(shape, &o);
    if (!n)
        return ATTN_ERR_SHAPE; /* the block table's extent overflows */
    *bytes = n;
    return ATTN_OK;
}

attn_status attn_plan_size(const attn_shape *shape, const attn_options *opt, size_t *bytes)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_plan_size", mark, checked_plan_size(shape, opt, bytes));
}

/* Copies n bytes of src to *at (advanced, 8-byte aligned) and returns the copy. */
static void *copy_to(unsigned char **at, const void *src, size_t n)
{
    void *dst = *at;
    memcpy(dst, src, n);
    *at += round8(n);
    return dst;
}

/* The plan's memory [mem, mem + need) is an output of the call: it may meet
   no tensor, statistics array, option (copied from below) or block table. */
static attn_status check_plan_memory(const attn_problem *pb, const attn_shape *shape,
                                     const attn_row_stats *stats, void *mem, size_t need)
{
    const attn_byte_range whole = {(uintptr_t)mem, (uintptr_t)mem + need};
    static const char *const span_names[5] = {"q", "k", "v", "out", "the workspace"};
    for (int t = 0; t < 5; t++)
        if (attn_ranges_meet(whole, pb->span[t]))
            return attn_fail(ATTN_ERR_STRIDE, "the plan's memory overlaps %s", span_names[t]);
    attn_range_set given = {.n_in = 0};
    TRY(attn_add_option_ranges(&given, &pb->opt, shape));
    if (pb->opt.block_table)
        TRY(attn_add_block_table(&given, &pb->opt, shape));
    for (int i = 0; i < given.n_in; i++)
        if (attn_ranges_meet(whole, given.in[i]))
            return attn_fail(ATTN_ERR_STRIDE, "the plan's memory overlaps an array or tensor of "
                                              "the options (copied into it)");
    if (stats) {
        float *const st[3] = {stats->lse, stats->max_score, stats->entropy};
        const uintptr_t n = (uintptr_t)(pb->batch * pb->q_heads * pb->q_len) * sizeof(float);
        for (int i = 0; i < 3; i++)
            if (st[i] && attn_ranges_meet(whole, (attn_byte_range){(uintptr_t)st[i],
                                                                  (uintptr_t)st[i] + n}))
                return attn_fail(ATTN_ERR_STRIDE, "the plan's memory overlaps the row "
                                                  "statistics");
    }
    return ATTN_OK;
}

/* Writes the plan of the checked problem pb into mem: the problem, reading
   its arrays from copies in the plan and its option tensors from its own
   structs, the ranges no run moves, and the forward's task plan. */
static attn_status write_plan(const attn_dsp *dsp, void *mem, const attn_shape *shape,
                              attn_problem *pb, attn_plan **plan)
{
    struct attn_plan *p = (struct attn_plan *)(void *)round8((uintptr_t)mem);
    unsigned char *at = (unsigned char *)p + round8(sizeof *p);
    memset(p, 0, sizeof *p);
    p->magic = PLAN_MAGIC;
    p->dsp = dsp;
    p->shape = *shape;
    attn_options *o = &pb->opt;
#define PLAN_X_COPY(f, kind, extent, dtype, off, since, rule) PLAN_COPY_##kind(f, extent)
    ATTN_OPTION_LIST(PLAN_X_COPY)
#undef PLAN_X_COPY
    if (o->block_table)
        o->block_table = copy_to(&at, o->block_table,
                                 (size_t)attn_block_table_entries(o, shape) * sizeof(int32_t));
    p->mem_end = (uintptr_t)at;
    /* the problem reads its arrays from the copies (the paging fields only
       where validation kept them: an operation that reads K) */
    attn_problem_arrays(pb, o);
    if (pb->block_table)
        pb->block_table = o->block_table;
    p->pb = *pb;
    /* the option tensors as the plan's own structs (the caller's may go) */
    attn_options *po = &p->pb.opt;
    po->mask = o->mask ? &p->pb.mask : NULL;
    po->bias = o->bias ? &p->pb.bias : NULL;
    po->sinks = o->sinks ? &p->pb.sinks : NULL;
    po->alibi_slopes = o->alibi_slopes ? &p->pb.alibi : NULL;
    po->k_scales = o->k_scales ? &p->pb.k_scales : NULL;
    po->v_scales = o->v_scales ? &p->pb.v_scales : NULL;
    po->k_tail = o->k_tail ? &p->pb.k_tail : NULL;
    /* the ranges no run moves: the option tensors and arrays (copies, inside
       the plan), the plan itself */
    attn_range_set fixed = {.n_in = 0};
    TRY(attn_add_option_ranges(&fixed, po, shape));
    memcpy(p->fixed, fixed.in, (size_t)fixed.n_in * sizeof fixed.in[0]);
    p->n_fixed = fixed.n_in;
    p->tasks = attn_forward_op.plan(dsp, &p->pb);
    *plan = p;
    return ATTN_OK;
}

attn_status attn_plan_forward_with(const attn_dsp *dsp, void *mem, size_t mem_size,
                                   const attn_shape *shape, const attn_options *opt,
                                   const attn_tensor *q, const attn_tensor *k,
                                   const attn_tensor *v, const attn_tensor *out,
                                   const attn_row_stats *stats, attn_plan **plan)
{
    if (!mem || !plan)
        return ATTN_ERR_NULL;
    attn_problem pb;
    TRY(attn_validate(&pb, &attn_forward_op, shape, opt, q, k, v, out, stats));
    const size_t need = plan_bytes(shape, &pb.opt);
    if (mem_size < need)
        return attn_fail(ATTN_ERR_ARG,
                         "mem_size = %zu bytes, the plan needs %zu (attn_plan_size with the "
                         "same shape and options)",
                         mem_size, need);
    TRY(check_plan_memory(&pb, shape, stats, mem, need));
    /* everything checked: write the plan */
    return write_plan(dsp, mem, shape, &pb, plan);
}

/* One moved view: its validated length at the new base, or ATTN_ERR_SHAPE
   when that wraps the address space. */
static attn_status moved(attn_range_set *set, attn_byte_range planned, const void *data,
                         int is_output)
{
    const uintptr_t len = planned.end - planned.begin;
    if ((uintptr_t)data > UINTPTR_MAX - len)
        return ATTN_ERR_SHAPE;
    attn_byte_range *r = is_output ? &set->out[set->n_out++] : &set->in[set->n_in++];
    r->begin = (uintptr_t)data;
    r->end = (uintptr_t)data + len;
    return ATTN_OK;
}

/* The planned problem on new data pointers, checked as attn_plan_run says. */
static attn_status plan_bind(const attn_plan *plan, const void *q, const void *k, const void *v,
                             void *out, const attn_row_stats *stats, attn_problem *pb)
{
    if (!plan || !q || !k || !v || !out)
        return ATTN_ERR_NULL;
    if (plan->magic != PLAN_MAGIC)
        return attn_fail(ATTN_ERR_ARG, "plan was not made by attn_plan_forward (or its memory "
                                       "was overwritten or moved)");
    /* the ranges: fixed ones, then what moved (the set's capacity counts
       every option range and the operation's tensors and stats) */
    attn_range_set set;
    memcpy(set.in, plan->fixed, (size_t)plan->n_fixed * sizeof set.in[0]);
    set.n_in = plan->n_fixed;
    set.n_out = 0;
    set.in[set.n_in++] = (attn_byte_range){(uintptr_t)plan, plan->mem_end};
    const attn_problem *pp = &plan->pb;
    TRY(moved(&set, pp->span[0], q, 0));
    TRY(moved(&set, pp->span[1], k, 0));
    TRY(moved(&set, pp->span[2], v, 0));
    TRY(moved(&set, pp->span[3], out, 1));
    if (pp->workspace)
        set.out[set.n_out++] = pp->span[4];
    attn_row_stats st = {NULL, NULL, NULL};
    if (stats) {
        st = *stats;
        float *const arr[3] = {st.lse, st.max_score, st.entropy};
        const uintptr_t n = (uintptr_t)(pp->batch * pp->q_heads * pp->q_len) * sizeof(float);
        for (int i = 0; i < 3; i++)
            if (arr[i])
                TRY(moved(&set, (attn_byte_range){0, n}, arr[i], 1));
    }
    TRY(attn_check_disjoint(&set));

    *pb = *pp;
    pb->q.data = (void *)(uintptr_t)q;
    pb->k.data = (void *)(uintptr_t)k;
    pb->v.data = (void *)(uintptr_t)v;
    pb->out.data = out;
    pb->stats = st;
    return ATTN_OK;
}

static attn_status checked_plan_run(const attn_plan *plan, const void *q, const void *k,
                                    const void *v, void *out, const attn_row_stats *stats)
{
    attn_problem pb;
    TRY(plan_bind(plan, q, k, v, out, stats, &pb));
    attn_run_planned(plan->dsp, &pb, &plan->tasks);
    return ATTN_OK;
}

static attn_status checked_plan_run_share(const attn_plan *plan, const void *q, const void *k,
                                          const void *v, void *out,
                                          const attn_row_stats *stats, int32_t share,
                                          int32_t shares)
{
    if (shares < 1 || share < 0 || share >= shares)
        return attn_fail(ATTN_ERR_ARG, "share %d of %d: shares >= 1 and share in [0, shares)",
                         (int)share, (int)shares);
    attn_problem pb;
    TRY(plan_bind(plan, q, k, v, out, stats, &pb));
    /* tasks that wait for no other and need nothing prepared: a split's
       chunks meet in the workspace, a shared prefix is a round of its own */
    if (pb.splits > 1 || pb.prefix_parts)
        return attn_fail(ATTN_ERR_UNSUPPORTED,
                         "this plan %s: its tasks depend on one another, so it runs only as a "
                         "whole (attn_plan_run); plan with kv_splits = 1 and no shared_prefix "
                         "to run it in shares",
                         pb.splits > 1 ? "splits the keys (split-KV)"
                                       : "attends a shared prefix once per group");
    const size_t n = plan->tasks.tasks;
    const size_t lo = (size_t)((unsigned __int128)n * (unsigned)share / (unsigned)shares);
    const size_t hi = (size_t)((unsigned __int128)n * ((unsigned)share + 1) / (unsigned)shares);
    attn_run_planned_range(plan->dsp, &pb, &plan->tasks, lo, hi);
    return ATTN_OK;
}

attn_status attn_plan_run_share(const attn_plan *plan, const void *q, const void *k,
                                const void *v, void *out, const attn_row_stats *stats,
                                int32_t share, int32_t shares)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_plan_run_share", mark,
                           checked_plan_run_share(plan, q, k, v, out, stats, share, shares));
}

attn_status attn_plan_run(const attn_plan *plan, const void *q, const void *k, const void *v,
                          void *out, const attn_row_stats *stats)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_plan_run", mark, checked_plan_run(plan, q, k, v, out, stats));
}

static attn_status checked_plan_forward(void *mem, size_t mem_size, const attn_shape *shape,
                                        const attn_options *opt, const attn_tensor *q,
                                        const attn_tensor *k, const attn_tensor *v,
                                        const attn_tensor *out, const attn_row_stats *stats,
                                        attn_plan **plan)
{
    return attn_plan_forward_with(attn_dsp_active(), mem, mem_size, shape, opt, q, k, v, out,
                                  stats, plan);
}

attn_status attn_plan_forward(void *mem, size_t mem_size, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *v,
                              const attn_tensor *out, const attn_row_stats *stats,
                              attn_plan **plan)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_plan_forward", mark, checked_plan_forward(mem, mem_size, shape, opt, q, k, v, out, stats, plan));
}

/* SPDX-License-Identifier: MIT */
/*
 * The dtypes as the tests enumerate them: the lines of src/dtype_list.h
 * with their columns, and the sets the suites and fuzzers loop over, drawn
 * from those columns. A dtype the list gains joins every set its line puts
 * it in with no line of a test; a suite never types a list of dtypes
 * (docs/STYLE.md, "Tests"). What the list does not say (how a dtype's bits
 * decode, a value's encoding) stays in the tests' switches, which fail on
 * a dtype they do not know.
 *
 * Data on include/attn.h only, like the list: the fuzzers include it too.
 */
#ifndef ATTN_TEST_DTYPES_H
#define ATTN_TEST_DTYPES_H

#include <stddef.h>
#include <stdint.h>

#include "dtype_list.h"

typedef struct test_dtype {
    int32_t id; /* the attn_dtype value */
    const char *name;
    int64_t block; /* values per stride unit */
    size_t bytes;  /* bytes per stride unit */
    attn_dtype_kind kind;
    int q, kv;
    attn_dtype_out out;
} test_dtype;

#define TEST_DTYPE_ROW(ID, name, block, bytes, kind, q, kv, out) \
    {ATTN_DTYPE_##ID, name, block, bytes, ATTN_DTYPE_KIND_##kind, q, kv, ATTN_DTYPE_OUT_##out},
static const test_dtype test_dtypes[ATTN_DTYPE_COUNT] = {ATTN_DTYPE_LIST(TEST_DTYPE_ROW)};
#undef TEST_DTYPE_ROW

/* No dtype: the first value past the list (every value below it is one). */
#define TEST_DTYPE_UNKNOWN ATTN_DTYPE_COUNT

/* The sets, each from the list's columns. */
typedef enum test_dtype_set {
    DT_FLOAT,       /* kind FLOAT: F32, F16, BF16 */
    DT_KV,          /* kv: a valid K/V dtype */
    DT_KV_ONLY,     /* kv, not q: the quantized dtypes, K/V only */
    DT_QUANT,       /* kind QBLOCK, FP8 or ASYM */
    DT_QBLOCK,      /* kind QBLOCK: ggml's block formats */
    DT_FP8,         /* kind FP8 */
    DT_ASYM,        /* kind ASYM: OpenVINO's records of a group */
    DT_NO_INPUT,    /* neither q nor kv: BOOL */
    DT_OUT_ROUNDED, /* out ROUNDED: the forward's and merge's out only */
    DT_OUT_NONE     /* out NONE: never an output */
} test_dtype_set;

static inline int test_dtype_in(const test_dtype *d, test_dtype_set set)
{
    switch (set) {
    case DT_FLOAT: return d->kind == ATTN_DTYPE_KIND_FLOAT;
    case DT_KV: return d->kv;
    case DT_KV_ONLY: return d->kv && !d->q;
    case DT_QUANT:
        return d->kind == ATTN_DTYPE_KIND_QBLOCK || d->kind == ATTN_DTYPE_KIND_FP8 ||
               d->kind == ATTN_DTYPE_KIND_ASYM;
    case DT_ASYM: return d->kind == ATTN_DTYPE_KIND_ASYM;
    case DT_QBLOCK: return d->kind == ATTN_DTYPE_KIND_QBLOCK;
    case DT_FP8: return d->kind == ATTN_DTYPE_KIND_FP8;
    case DT_NO_INPUT: return !d->q && !d->kv;
    case DT_OUT_ROUNDED: return d->out == ATTN_DTYPE_OUT_ROUNDED;
    case DT_OUT_NONE: return d->out == ATTN_DTYPE_OUT_NONE;
    }
    return 0;
}

/* Whether attn_dtype value dt is in the set (0 for a value off the list). */
static inline int test_dtype_is(int32_t dt, test_dtype_set set)
{
    return dt >= 0 && dt < ATTN_DTYPE_COUNT && test_dtype_in(&test_dtypes[dt], set);
}

/* The set's dtypes in list order into out (room for ATTN_DTYPE_COUNT);
   returns how many. */
static inline int test_dtypes_of(test_dtype_set set, int32_t *out)
{
    int n = 0;
    for (int i = 0; i < ATTN_DTYPE_COUNT; i++)
        if (test_dtype_in(&test_dtypes[i], set))
            out[n++] = test_dtypes[i].id;
    return n;
}

/* The list's name of dt, "?" off the list. */
static inline const char *test_dtype_name(int32_t dt)
{
    return dt >= 0 && dt < ATTN_DTYPE_COUNT ? test_dtypes[dt].name : "?";
}

#endif /* ATTN_TEST_DTYPES_H */

/* SPDX-License-Identifier: MIT */
/*
 * The one list of library operations on the test side: every public
 * operation, each with the suite that tests it first and most (its
 * dedicated test file). The operation suites (tests/ops/test_ops.c,
 * tests/ops/test_kvlayout.c), the API, differential and K/V layout
 * fuzzers, the TSan stress and the fault tests enumerate operations from
 * it. Adding an operation is one X(...) line here plus its case in each
 * suite's switch (the compiler's -Wswitch names every switch that lacks
 * one); a suite that does not run it says so in its case. The order is
 * part of the fuzz corpora's meaning (a byte picks an operation by index):
 * append, never reorder; a fuzzer draws only the operations its corpus was
 * written for (its own count, checked against this list).
 *
 * X(ID, name, test): op_kind value OP_##ID, op_names[] entry "name" (the
 * public function is attn_<name>, its module src/driver/<name>.c), and
 * op_tests[] entry `test`, its dedicated test file. tests/check_text.py
 * (suite text) checks each line: the module defines attn_<name>_with, the
 * test file exists and calls attn_<name>, and every module of src/driver/
 * that defines an attn_<x>_with has a line.
 */
#ifndef ATTN_TEST_OPS_LIST_H
#define ATTN_TEST_OPS_LIST_H

#define ATTN_OP_LIST(X)                                                                    \
    X(SCORES, scores, "tests/ops/test_ops.c")                                              \
    X(MASK_APPLY, mask_apply, "tests/ops/test_ops.c")                                      \
    X(WEIGHTS, weights, "tests/ops/test_ops.c")                                            \
    X(FORWARD, forward, "tests/ops/test_ops.c")                                            \
    X(SOFTMAX, softmax, "tests/ops/test_ops.c")                                            \
    X(SOFTMAX_BWD, softmax_backward, "tests/ops/test_ops.c")                               \
    X(MERGE, merge, "tests/ops/test_split.c")                                              \
    X(BACKWARD, backward, "tests/ops/test_backward.c")                                     \
    X(QUANTIZE, quantize, "tests/api/test_quantize.c")                                     \
    X(CACHE_APPEND, cache_append, "tests/ops/test_cache_append.c")                         \
    X(PLAN_FORWARD, plan_forward, "tests/ops/test_plan.c")                                 \
    X(FORWARD_SOURCES, forward_sources, "tests/ops/test_sources.c")

#define ATTN_OP_ENUM(ID, name, test) OP_##ID,
typedef enum op_kind { ATTN_OP_LIST(ATTN_OP_ENUM) OP_COUNT } op_kind;
#undef ATTN_OP_ENUM

#define ATTN_OP_NAME(ID, name, test) #name,
static const char *const op_names[OP_COUNT] = {ATTN_OP_LIST(ATTN_OP_NAME)};
#undef ATTN_OP_NAME

#define ATTN_OP_TEST(ID, name, test) test,
static const char *const op_tests[OP_COUNT] = {ATTN_OP_LIST(ATTN_OP_TEST)};
#undef ATTN_OP_TEST

/*
 * The operations the committed corpora of the API and differential fuzzers
 * (tests/fuzz/fuzz_api.c, fuzz_diff.c) draw, a byte modulo this count
 * picking one: the list's first six, in this order. Those fuzzers draw only
 * these, so a line appended here changes no committed input's meaning;
 * merge, backward and quantize have fuzzers of their own (fuzz_merge.c,
 * fuzz_backward.c, fuzz_quant.c), cache_append is drawn by the K/V layout
 * fuzzer (fuzz_kvlayout.c).
 */
#define OP_FUZZ_DRAWN 6
_Static_assert(OP_SCORES == 0 && OP_MASK_APPLY == 1 && OP_WEIGHTS == 2 && OP_FORWARD == 3 &&
                   OP_SOFTMAX == 4 && OP_SOFTMAX_BWD == 5 && OP_COUNT >= OP_FUZZ_DRAWN,
               "the fuzz corpora pick these six operations by these indices: append only");

#endif /* ATTN_TEST_OPS_LIST_H */

/*
 * The one list of library operations on the test side: the kernel-level
 * suites (test_ops.c, test_kvlayout.c), the API, differential and K/V
 * layout fuzzers, the TSan stress and the fault tests enumerate operations
 * from it. Adding an operation is one X(...) line here plus its
 * case in each suite's switch (the compiler's -Wswitch names every switch
 * that lacks one). The order is part of the fuzz corpora's meaning (a byte
 * picks an operation by index): append, never reorder.
 *
 * X(ID, name): op_kind value OP_##ID, op_names[] entry "name" (the public
 * function is attn_<name>).
 */
#ifndef ATTN_TEST_OPS_LIST_H
#define ATTN_TEST_OPS_LIST_H

#define ATTN_OP_LIST(X)                                                                    \
    X(SCORES, scores)                                                                      \
    X(MASK_APPLY, mask_apply)                                                              \
    X(WEIGHTS, weights)                                                                    \
    X(FORWARD, forward)                                                                    \
    X(SOFTMAX, softmax)                                                                    \
    X(SOFTMAX_BWD, softmax_backward)

#define ATTN_OP_ENUM(ID, name) OP_##ID,
typedef enum op_kind { ATTN_OP_LIST(ATTN_OP_ENUM) OP_COUNT } op_kind;
#undef ATTN_OP_ENUM

#define ATTN_OP_NAME(ID, name) #name,
static const char *const op_names[OP_COUNT] = {ATTN_OP_LIST(ATTN_OP_NAME)};
#undef ATTN_OP_NAME

#endif /* ATTN_TEST_OPS_LIST_H */

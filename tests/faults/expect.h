/* SPDX-License-Identifier: MIT */
/*
 * The checks of the programs in tests/faults (no Criterion there): a failed
 * EXPECT prints its place and message and counts in `failures`, and the run
 * goes on; main returns failures != 0.
 */
#ifndef ATTN_TESTS_FAULTS_EXPECT_H
#define ATTN_TESTS_FAULTS_EXPECT_H

#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)                                        \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
            failures++;                                          \
        }                                                        \
    } while (0)

#endif

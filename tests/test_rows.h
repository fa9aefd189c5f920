/* SPDX-License-Identifier: MIT */
/*
 * ATTN_TEST_ROWS: the tables a test run covers, a comma-separated list of
 * ISA names read by the test harness and checkasm. CI uses it to run each
 * table where it adds coverage (the scalar oracle's own rows natively, the
 * SIMD rows under emulators and sanitizers, one length's rows per SVE
 * length, docs/CROSS_TESTING.md): a row left out is skipped, never passed.
 */
#ifndef ATTN_TEST_ROWS_H
#define ATTN_TEST_ROWS_H

#include <stdlib.h>
#include <string.h>

/* 1 when ATTN_TEST_ROWS is unset or names row `name`'s ISA: the name up to
   a '+', '/' or '-' ("avx512-emu" and "avx512+dot" are avx512's). */
static inline int attn_test_row_wanted(const char *name)
{
    const char *list = getenv("ATTN_TEST_ROWS");
    if (!list || !*list)
        return 1;
    const size_t n = strcspn(name, "+/-");
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

#endif /* ATTN_TEST_ROWS_H */

/* SPDX-License-Identifier: MIT */
/*
 * What the plain-C benchmarks of bench/ share: their clocks, the order of
 * their samples (min and median come from a sorted copy) and the check of
 * a library status. Header-only; each includer defines _POSIX_C_SOURCE
 * (clock_gettime) before its first include.
 */
#ifndef ATTN_BENCH_UTIL_H
#define ATTN_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "attn.h"

/* Seconds on `clock`. */
static inline double bench_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wall time, and this thread's CPU time (which leaves out the time other
   processes had the core: single-threaded ratios on a shared machine). */
static inline double bench_wall(void) { return bench_seconds(CLOCK_MONOTONIC); }
static inline double bench_cpu(void) { return bench_seconds(CLOCK_THREAD_CPUTIME_ID); }

/* qsort's comparison of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Exits with the library's message when a call the benchmark needs fails. */
static inline void bench_ok(attn_status st, const char *what)
{
    if (st != ATTN_OK) {
        fprintf(stderr, "%s: %s\n", what, attn_strerror(st));
        exit(1);
    }
}

#endif /* ATTN_BENCH_UTIL_H */

/* SPDX-License-Identifier: MIT */
/* Clocks and CPUs (the inputs are the problem generator's: gen/gen.h). */
#define _DEFAULT_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#define _POSIX_C_SOURCE 200809L

#include <time.h>
#include <unistd.h>

#include "cli.h"

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* SPDX-License-Identifier: MIT */
/* Clocks and CPUs (the inputs are the problem generator's: gen/gen.h). */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN), sched_getaffinity */

#include <sched.h>
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

int usable_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    return online_cpus();
}

/* SPDX-License-Identifier: MIT */
/* Clocks, CPUs and the test hooks (the inputs are the problem generator's:
   problems/gen.h). */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN), sched_getaffinity */

#include <sched.h>
#include <stdlib.h>
#include <string.h>
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

#ifdef __linux__
/* A topology number of a CPU from sysfs; -1 when absent. */
static long cpu_topology(int cpu, const char *what)
{
    char path[96];
    long x = -1;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld", &x) != 1)
        x = -1;
    fclose(f);
    return x;
}
#endif

int usable_cores(int n)
{
#ifdef __linux__
    cpu_set_t set;
    if (n <= 0 || sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    long seen[2 * CPU_SETSIZE];
    int cores = 0, taken = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && taken < n; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        taken++;
        const long core = cpu_topology(cpu, "core_id"),
                   pkg = cpu_topology(cpu, "physical_package_id");
        if (core < 0 || pkg < 0)
            return 0;
        int known = 0;
        for (int i = 0; i < cores && !known; i++)
            known = seen[2 * i] == pkg && seen[2 * i + 1] == core;
        if (!known) {
            seen[2 * cores] = pkg;
            seen[2 * cores + 1] = core;
            cores++;
        }
    }
    return cores;
#else
    (void)n;
    return 0;
#endif
}

bool cli_test_hook(const char *hook)
{
    const char *list = getenv("ATTN_CLI_TEST");
    const size_t len = strlen(hook);
    for (const char *at = list; at && *at;) {
        const char *comma = strchr(at, ',');
        const size_t n = comma ? (size_t)(comma - at) : strlen(at);
        if (n == len && !strncmp(at, hook, n))
            return true;
        at += n + (comma ? 1 : 0);
    }
    return false;
}

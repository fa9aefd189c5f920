/* SPDX-License-Identifier: MIT */
/*
 * Pins the calling thread to one CPU of its affinity mask for a measurement
 * (the FMA peak: tools/peak.c and bench/bench_attn.cc), so the loops of a
 * pool's threads run on different CPUs at once. Linux only; elsewhere a
 * no-op. C and C++ (the benchmarks include it too).
 */
#ifndef ATTN_TOOLS_PIN_H
#define ATTN_TOOLS_PIN_H

#include <stddef.h>
#ifdef __linux__
#include <pthread.h> /* the includer defines _GNU_SOURCE first */
#include <sched.h>
#endif

typedef struct attn_pin {
#ifdef __linux__
    cpu_set_t saved;
#endif
    int pinned;
} attn_pin;

/* The index-th CPU (modulo their count) of the thread's mask; the mask to
   restore is kept in *p. */
static inline void attn_pin_to(attn_pin *p, size_t index)
{
    p->pinned = 0;
#ifdef __linux__
    if (pthread_getaffinity_np(pthread_self(), sizeof p->saved, &p->saved) != 0 ||
        CPU_COUNT(&p->saved) <= 0)
        return;
    size_t nth = index % (size_t)CPU_COUNT(&p->saved);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &p->saved) || nth-- > 0)
            continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        p->pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
        break;
    }
#else
    (void)index;
#endif
}

static inline void attn_pin_restore(const attn_pin *p)
{
#ifdef __linux__
    if (p->pinned)
        pthread_setaffinity_np(pthread_self(), sizeof p->saved, &p->saved);
#else
    (void)p;
#endif
}

#endif /* ATTN_TOOLS_PIN_H */

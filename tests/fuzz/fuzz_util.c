/* SPDX-License-Identifier: MIT */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "fuzz_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint8_t fz_u8(fz_reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

uint32_t fz_u32(fz_reader *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fz_u8(r) << (8 * i);
    return v;
}

uint64_t fz_u64(fz_reader *r)
{
    uint64_t lo = fz_u32(r);
    return lo | (uint64_t)fz_u32(r) << 32;
}

int64_t fz_range(fz_reader *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo;
    uint64_t v = span < 256 ? fz_u8(r) : span < 65536 ? (uint64_t)fz_u8(r) | (uint64_t)fz_u8(r) << 8
                                                       : fz_u64(r);
    return span == UINT64_MAX ? (int64_t)v : (int64_t)((uint64_t)lo + v % (span + 1));
}

int fz_chance(fz_reader *r, unsigned num)
{
    return fz_u8(r) < num;
}

uint64_t fz_rng_next(fz_rng *g)
{
    /* splitmix64: any seed, including 0, gives a full-period stream */
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float fz_rng_float(fz_rng *g, float lo, float hi)
{
    float unit = (float)(fz_rng_next(g) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * unit;
}

static size_t page_size(void)
{
    static size_t cached;
    if (!cached)
        cached = (size_t)sysconf(_SC_PAGESIZE);
    return cached;
}

void *fz_buf_alloc(fz_buf *b, size_t bytes, int guard_front)
{
    const size_t page = page_size();
    const size_t data_pages = (bytes + page - 1) / page;
    b->map_bytes = (data_pages + 1) * page;
    b->map = mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->map == MAP_FAILED) {
        perror("fuzz: mmap");
        abort();
    }
    if (guard_front) {
        if (mprotect(b->map, page, PROT_NONE) != 0)
            abort();
        b->data = b->map + page;
    } else {
        if (mprotect(b->map + data_pages * page, page, PROT_NONE) != 0)
            abort();
        b->data = b->map + data_pages * page - bytes;
    }
    b->bytes = bytes;
    return b->data;
}

void fz_buf_free(fz_buf *b)
{
    if (b->map)
        munmap(b->map, b->map_bytes);
    memset(b, 0, sizeof *b);
}

static int64_t source_range(void *ctx, int64_t lo, int64_t hi)
{
    return fz_range(ctx, lo, hi);
}

void fz_reversed_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count)
{
    (void)ctx;
    for (size_t i = count; i-- > 0;)
        task(task_ctx, i);
}

gen_src fz_gen_source(fz_reader *r)
{
    return (gen_src){source_range, r};
}

static void *guarded_alloc(void *ctx, int role, size_t bytes, size_t elem, int misalign)
{
    fz_gen_mem *m = ctx;
    (void)elem, (void)misalign; /* a page's end leaves any alignment */
    return fz_buf_alloc(&m->b[role], bytes, m->r ? fz_chance(m->r, 128) : 0);
}

static void guarded_release(void *ctx, int role, void *data, size_t bytes)
{
    (void)data, (void)bytes;
    fz_buf_free(&((fz_gen_mem *)ctx)->b[role]);
}

gen_allocator fz_gen_allocator(fz_gen_mem *mem)
{
    return (gen_allocator){guarded_alloc, guarded_release, mem};
}

static char context[1024];

void fz_context(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
}

void fz_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\n%s:%d: FUZZ CHECK FAILED: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (context[0])
        fprintf(stderr, "problem: %s\n", context);
    fflush(stderr);
    abort();
}

/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the libattn fuzzers: a reader that turns the fuzzer's
 * bytes into decisions (running out of bytes yields zeros, so every input is
 * a valid program), guard-paged buffers, and failure reporting.
 */
#ifndef ATTN_FUZZ_UTIL_H
#define ATTN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "gen.h"

/* libFuzzer's entry point (defined by each fuzzer). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------------ input bytes */

typedef struct fz_reader {
    const uint8_t *p;
    size_t n;
} fz_reader;

uint8_t fz_u8(fz_reader *r);
uint32_t fz_u32(fz_reader *r);
uint64_t fz_u64(fz_reader *r);
/* Uniform-ish in [lo, hi] (lo <= hi). */
int64_t fz_range(fz_reader *r, int64_t lo, int64_t hi);
/* 1 with probability about num/256. */
int fz_chance(fz_reader *r, unsigned num);

/* A small deterministic generator for bulk data, seeded from the input. */
typedef struct fz_rng {
    uint64_t s;
} fz_rng;

uint64_t fz_rng_next(fz_rng *g);
/* Uniform float in [lo, hi). */
float fz_rng_float(fz_rng *g, float lo, float hi);

/* ------------------------------------------------------------ guarded buffers */

/*
 * `bytes` bytes whose last byte is immediately followed by an inaccessible
 * page (or, with guard_front, whose first byte immediately follows one), so
 * any access outside the buffer faults at once instead of corrupting memory.
 * bytes may be 0: data then points at the guard itself.
 */
typedef struct fz_buf {
    unsigned char *map;
    size_t map_bytes;
    unsigned char *data;
    size_t bytes;
} fz_buf;

void *fz_buf_alloc(fz_buf *b, size_t bytes, int guard_front);
void fz_buf_free(fz_buf *b);

/* A parallel_for that runs the tasks last to first (attn.h: the same bits
   in any order); ctx unused. */
void fz_reversed_for(void *ctx, attn_task_fn task, void *task_ctx, size_t count);

/* ------------------------------------------------------------ the problem generator */

/* The generator's choices (problems/gen.h) read from the input: fz_range. */
gen_src fz_gen_source(fz_reader *r);

/* Every buffer of a materialised problem ends at (or, when the input's next
   byte says so, starts after) an inaccessible page. */
typedef struct fz_gen_mem {
    fz_buf b[GEN_ROLE_COUNT];
    fz_reader *r; /* NULL: every buffer ends at the page */
} fz_gen_mem;
gen_allocator fz_gen_allocator(fz_gen_mem *mem);

/* ------------------------------------------------------------ failures */

/* What the input decoded to, printed with a failure (printf format; the
   next call replaces it). */
void fz_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the message and aborts (libFuzzer then keeps the input as a crash). */
void fz_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define FZ_CHECK(cond, ...)                                 \
    do {                                                    \
        if (!(cond))                                        \
            fz_fail(__FILE__, __LINE__, __VA_ARGS__);       \
    } while (0)

#endif /* ATTN_FUZZ_UTIL_H */

/* SPDX-License-Identifier: MIT */
/*
 * The split-KV plan (attn.h, "Split-KV") and the workspace it needs. A
 * sequence's own lengths, the head counts and kv_splits decide its chunks
 * (src/problem.h), so a sequence splits the same way alone or in any
 * batch, on every ISA and thread count; forward.c sizes the workspace
 * with the grid (in its validation and in attn_forward_workspace_size) and
 * runs each sequence's plan.
 */
#include "driver.h"

/* The chunks a sequence of q_len query rows and kv_len keys aims for (before
   rounding chunks to ATTN_SPLIT_ALIGN), or 1 when it stays whole. */
static int64_t split_want(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                          int64_t topk, int32_t kv_splits)
{
    if (kv_splits == 1 || kv_len <= 0)
        return 1;
    if (kv_splits >= 2)
        return attn_min64(kv_splits, (kv_len + ATTN_SPLIT_ALIGN - 1) / ATTN_SPLIT_ALIGN);
    /* Tasks the sequence has unsplit, counted in blocks of 64 query rows of
       one KV head (every ISA's block is at most that): a sequence with
       enough of them keeps every core busy without splitting. */
    const int64_t group_rows = attn_max64(q_len, 1) * (q_heads / kv_heads);
    const int64_t units = kv_heads * ((group_rows + 63) / 64);
    if (units >= ATTN_SPLIT_TARGET)
        return 1;
    const int64_t keys = topk > 0 ? attn_min64(kv_len, topk) : kv_len; /* a row's at most */
    return attn_min64((ATTN_SPLIT_TARGET + units - 1) / units, keys / ATTN_SPLIT_MIN_CHUNK);
}

void attn_split_plan(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                     int64_t topk, int32_t kv_splits, int64_t *splits, int64_t *chunk)
{
    *splits = 1;
    *chunk = kv_len;
    const int64_t want = split_want(q_heads, kv_heads, q_len, kv_len, topk, kv_splits);
    if (want < 2)
        return;
    const int64_t per = (kv_len + want - 1) / want;
    const int64_t c = (per + ATTN_SPLIT_ALIGN - 1) / ATTN_SPLIT_ALIGN * ATTN_SPLIT_ALIGN;
    const int64_t s = (kv_len + c - 1) / c;
    if (s < 2)
        return;
    *splits = s;
    *chunk = c;
}

/* A sequence's splits are at most its `want` (chunks of at least
   Lk_b / want keys): the grid is the largest want of the call's sequences
   (one without query rows has no task). */
int64_t attn_split_grid(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len,
                        int64_t kv_len, int64_t topk, const int32_t *q_lens,
                        const int32_t *kv_lens, int32_t kv_splits)
{
    int64_t grid = 1;
    for (int64_t b = 0; b < batch; b++) {
        /* clamped: attn_forward_workspace_size reads the lengths unchecked
           (a call with lengths out of range is refused anyway) */
        const int64_t lq = q_lens ? attn_min64(q_lens[b], q_len) : q_len;
        const int64_t lk = kv_lens ? attn_max64(0, attn_min64(kv_lens[b], kv_len)) : kv_len;
        if (lq > 0)
            grid = attn_max64(grid, split_want(q_heads, kv_heads, lq, lk, topk, kv_splits));
        if (!q_lens && !kv_lens)
            break; /* every sequence alike */
    }
    return grid;
}

int64_t attn_split_grid_bound(int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                              int64_t topk, int lens_given, int32_t kv_splits)
{
    /* split_want grows as a sequence's query rows fall (fewer tasks
       unsplit) and as its keys grow: one row and every key bound it */
    return split_want(q_heads, kv_heads, lens_given ? attn_min64(q_len, 1) : q_len, kv_len, topk,
                      kv_splits);
}

static int add_rounded(size_t *total, size_t bytes)
{
    size_t r;
    if (__builtin_add_overflow(bytes, (size_t)63, &r))
        return 0;
    r &= ~(size_t)63;
    return !__builtin_add_overflow(*total, r, total);
}

size_t attn_split_bytes(int64_t batch, int64_t q_heads, int64_t q_len, int64_t v_dim,
                        int64_t splits)
{
    attn_split_layout l;
    if (!attn_split_layout_of(batch, q_heads, q_len, v_dim, splits, &l))
        return 0;
    return l.bytes;
}

int attn_split_layout_of(int64_t batch, int64_t q_heads, int64_t q_len, int64_t v_dim,
                         int64_t splits, attn_split_layout *l)
{
    /* The sizes were validated to fit int64 as tensors; products of them
       may still exceed size_t, hence the checked arithmetic. */
    size_t rows, parts, acc_floats, b;
    const size_t acc_stride = (size_t)((v_dim + 15) & ~(int64_t)15);
    if (__builtin_mul_overflow((size_t)batch, (size_t)q_heads, &rows) ||
        __builtin_mul_overflow(rows, (size_t)q_len, &rows) ||
        __builtin_mul_overflow(rows, (size_t)splits, &parts) ||
        __builtin_mul_overflow(parts, acc_stride, &acc_floats))
        return 0;
    size_t total = 64; /* slack to align the caller's pointer to 64 bytes */
    l->counters_at = 0;
    if (__builtin_mul_overflow(rows, sizeof(int), &b) || !add_rounded(&total, b))
        return 0;
    l->states_at = total - 64;
    if (__builtin_mul_overflow(parts, 4 * sizeof(float), &b) || !add_rounded(&total, b))
        return 0;
    l->acc_at = total - 64;
    if (__builtin_mul_overflow(acc_floats, sizeof(float), &b) ||
        __builtin_add_overflow(total, b, &total))
        return 0;
    l->acc_stride = (int64_t)acc_stride;
    l->bytes = total;
    return 1;
}

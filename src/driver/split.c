/*
 * The split-KV plan (attn.h, "Split-KV") and the workspace it needs. Only
 * the shape and kv_splits decide it, so the same call splits the same way
 * on every ISA and thread count; forward.c sizes the workspace with it (in
 * its validation and in attn_forward_workspace_size) and runs it.
 */
#include "driver.h"

void attn_split_plan(int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len,
                     int64_t kv_len, int32_t kv_splits, int64_t *splits, int64_t *chunk)
{
    *splits = 1;
    *chunk = kv_len;
    if (kv_splits == 1)
        return;
    int64_t want;
    int64_t most = (kv_len + ATTN_SPLIT_ALIGN - 1) / ATTN_SPLIT_ALIGN;
    if (kv_splits >= 2) {
        want = kv_splits;
    } else {
        /* Tasks the unsplit forward has, counted in blocks of 64 query rows
           of one KV head (every ISA's block is at most that): a shape with
           enough of them keeps every core busy without splitting. */
        const int64_t group_rows = q_len * (q_heads / kv_heads);
        const int64_t units = batch * kv_heads * ((group_rows + 63) / 64);
        if (units >= ATTN_SPLIT_TARGET)
            return;
        want = (ATTN_SPLIT_TARGET + units - 1) / units;
        most = kv_len / ATTN_SPLIT_MIN_CHUNK;
    }
    want = attn_min64(want, most);
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

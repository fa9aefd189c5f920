/* SPDX-License-Identifier: MIT */
/*
 * What the library says about itself: status strings, the last error's
 * detail and the version. Each operation's entry points are in its module
 * (src/driver/driver.h lists them).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "internal.h"

const char *attn_strerror(attn_status status)
{
    switch (status) {
    case ATTN_OK: return "Success.";
    case ATTN_ERR_NULL: return "A required pointer or a tensor's data pointer is NULL.";
    case ATTN_ERR_SHAPE: return "A dimension is not positive, or the sizes overflow.";
    case ATTN_ERR_STRIDE:
        return "A stride is negative, or an output is broadcast, not nested, or shares "
               "memory with an input or another output.";
    case ATTN_ERR_ARG:
        return "An argument is invalid: non-finite scale, softcap negative, non-finite or "
               "below 1/FLT_MAX, q_heads not a multiple of kv_heads, unknown flags, wrong "
               "dtype, a length, offset or block index out of range, or an inconsistent "
               "paging description.";
    case ATTN_ERR_UNSUPPORTED:
        return "Not supported by this library or CPU (ISA unavailable, or head_dim/v_dim "
               "above ATTN_MAX_HEAD_DIM).";
    case ATTN_ERR_NOMEM: return "Out of memory.";
    case ATTN_ERR_VERSION: return "attn_options.struct_size is not one this library knows.";
    }
    return "Unknown attn_status value.";
}

uint32_t attn_version(void)
{
    return ATTN_VERSION;
}

const char *attn_version_string(void)
{
    return ATTN_VERSION_STRING;
}

/* ------------------------------------------------------------ last error */

/* Per thread, so no lock and no race: the detail a check set during the
   current call (and a count of such settings), and the message. */
static _Thread_local char error_detail[1000];
static _Thread_local unsigned error_count;
static _Thread_local char error_message[1024];

/* A detail longer than the buffer ends at a word, with "..." (attn.h). */
static void cut_at_word(char *s, size_t size)
{
    size_t end = size - 4;
    while (end > 0 && s[end] != ' ')
        end--;
    if (end == 0)
        end = size - 4;
    memcpy(s + end, "...", 4);
}

attn_status attn_fail(attn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(error_detail, sizeof error_detail, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof error_detail)
        cut_at_word(error_detail, sizeof error_detail);
    error_count++;
    return status;
}

unsigned attn_error_mark(void)
{
    return error_count;
}

attn_status attn_error_done(const char *function, unsigned mark, attn_status status)
{
    if (status != ATTN_OK)
        snprintf(error_message, sizeof error_message, "%s: %s", function,
                 error_count != mark ? error_detail : attn_strerror(status));
    return status;
}

const char *attn_last_error(void)
{
    return error_message;
}

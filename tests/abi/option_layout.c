/* SPDX-License-Identifier: MIT */
/*
 * Prints src/option_list.h as the compiler lays it out, one line per field:
 *   name kind offset size since
 * then "sizeof N". tests/check_options.py compares it with include/attn.h's
 * text and with the Python ctypes mirror (python/libattn/_capi.py).
 */
#include <stddef.h>
#include <stdio.h>

#include "attn.h"
#include "option_list.h"

int main(void)
{
#define ATTN_X_PRINT(f, kind, extent, dtype, off, since, rule)                                  \
    printf("%s %s %zu %zu %d\n", #f, #kind, offsetof(attn_options, f),                    \
           sizeof(((attn_options *)0)->f), since);
    ATTN_OPTION_LIST(ATTN_X_PRINT)
#undef ATTN_X_PRINT
    printf("sizeof %zu\n", sizeof(attn_options));
    return 0;
}

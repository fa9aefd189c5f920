/* SPDX-License-Identifier: MIT */
/*
 * attn.h must compile on its own, before any other header, as strict C99
 * (built with -std=c99 -pedantic -Werror -Wall -Wextra): the installed
 * header may not depend on internal headers or on C11.
 */
#include "attn.h"

int main(void)
{
    /* The initialiser macro and the types must be usable as documented. */
    attn_options opt = ATTN_OPTIONS_INIT;
    attn_shape shape = { 1, 1, 1, 1, 1, 1, 0 };
    attn_tensor t = { 0, ATTN_DTYPE_F32, 0, 0, 1 };
    attn_row_stats stats = { 0, 0, 0 };
    opt.flags = ATTN_CAUSAL;
    (void)shape;
    (void)t;
    (void)stats;
    return opt.struct_size == (uint32_t)sizeof(attn_options) ? 0 : 1;
}

// attn.h must compile on its own as C++11 (-std=c++11 -pedantic -Werror):
// extern "C" linkage, no C-only constructs in the declarations or macros.
#include "attn.h"

// The functions keep C linkage (a pointer to one has a C function type).
static attn_status (*const forward_fn)(const attn_shape *, const attn_options *,
                                        const attn_tensor *, const attn_tensor *,
                                        const attn_tensor *, const attn_tensor *,
                                        const attn_row_stats *) = &attn_forward;

int main()
{
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = ATTN_CAUSAL;
    attn_shape shape = { 1, 1, 1, 1, 1, 1, 0 };
    (void)shape;
    (void)forward_fn;
    return opt.struct_size == static_cast<uint32_t>(sizeof(attn_options)) ? 0 : 1;
}

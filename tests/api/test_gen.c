/* SPDX-License-Identifier: MIT */
/*
 * The problem generator (problems/gen.h) itself: what its consumers rely on
 * without checking it each time.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "gen.h"
#include "harness.h"
#include "ref/ref.h"
#include "workload.h"

/* The same description and seed give the same input bytes (padding
   included): each tensor from its own stream, the pool's table too.
   Outputs are allocated, not written. */
Test(gen, same_seed_same_bytes)
{
    harness_begin_plain("problems/same_seed_same_bytes");
    for (int rep = 0; rep < 40; rep++) {
        gen_profile p;
        gen_profile_init(&p);
        gen_src src = wl_gen_source(harness_rng());
        gen_problem d;
        if (!gen_draw(&d, &src, &p))
            continue;
        const uint64_t seed = rng_next(harness_rng());
        gen_bufs a, b;
        CHECK(gen_materialise(&a, &d, seed, GEN_M_POISON | GEN_M_GARBAGE, NULL) == 0, "a");
        CHECK(gen_materialise(&b, &d, seed, GEN_M_POISON | GEN_M_GARBAGE, NULL) == 0, "b");
        for (int r = 0; r < GEN_ROLE_COUNT; r++) {
            CHECK(a.bytes[r] == b.bytes[r], "role %d: %zu vs %zu bytes", r, a.bytes[r], b.bytes[r]);
            harness_context("role %d of %s", r, gen_describe(&d, (char[768]){0}, 768));
            if (a.data[r] && !(r >= GEN_OUT && r <= GEN_ENT))
                expect_bytes("an input's bytes", a.data[r], b.data[r], a.bytes[r]);
        }
        gen_release(&a);
        gen_release(&b);
        gen_free(&d);
    }
}

/* gen_row_keys (which decides the pages a query sees, and the CLI's
   verified keys) is the float64 reference's visibility without a mask;
   with k_positions, every valid key (the hull the library reads). */
Test(gen, row_keys_are_the_reference_masks)
{
    harness_begin_plain("problems/row_keys_are_the_reference_masks");
    for (int rep = 0; rep < 300; rep++) {
        gen_profile p;
        gen_profile_init(&p);
        gen_never(&p, GEN_C_OPT(mask));
        gen_chance(&p, GEN_C_OPT(q_pos), 128);
        gen_chance(&p, GEN_C_OPT(k_positions), 64);
        gen_src src = wl_gen_source(harness_rng());
        gen_problem d;
        if (!gen_draw(&d, &src, &p))
            continue;
        gen_bufs m;
        CHECK(gen_materialise(&m, &d, 1, 0, NULL) == 0, "materialise");
        /* the reference counts rows and keys from the sequence's first */
        attn_options o = m.opt;
        o.q_offsets = o.kv_offsets = NULL;
        for (int64_t b = 0; b < d.shape.batch; b++)
            for (int64_t i = 0; i < gen_seq_q(&d, b); i++) {
                int64_t lo, hi;
                gen_row_keys(&d, b, i, &lo, &hi);
                /* with k_positions: every valid key, the reference hiding some */
                const int hull = d.ints[ATTN_OPT_POS_k_positions] != NULL;
                for (int64_t j = 0; j < gen_seq_kv(&d, b); j++)
                    CHECK(hull ? j >= lo && j < hi
                               : ref_visible(&m.shape, &o, b, 0, i, j) == (j >= lo && j < hi),
                          "batch %lld row %lld key %lld: gen [%lld, %lld) (%s)", (long long)b,
                          (long long)i, (long long)j, (long long)lo, (long long)hi,
                          gen_describe(&d, (char[768]){0}, 768));
            }
        gen_release(&m);
        gen_free(&d);
    }
}

/* Every TENSOR and array line of src/option_list.h asked for is given, at
   its dtype, by the walk over the list alone. */
Test(gen, every_option_line_is_materialised)
{
    harness_begin_plain("problems/every_option_line_is_materialised");
    gen_profile p;
    gen_profile_init(&p);
#define PIN_PRESENT(f, kind, extent, dtype, off, since, rule)                                  \
    if (ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_TENSOR)                                  \
        gen_pin(&p, GEN_C_OPT(f), 1);
    ATTN_OPTION_LIST(PIN_PRESENT)
#undef PIN_PRESENT
    gen_pin(&p, GEN_C_OPT(q_pos), 1);
    gen_pin(&p, GEN_C_POS_KIND, 0);
    gen_pin(&p, GEN_C_OPT(q_lens), 1);
    gen_pin(&p, GEN_C_OPT(kv_lens), 1);
    gen_pin(&p, GEN_C_OPT(q_offsets), 1);
    gen_pin(&p, GEN_C_OPT(kv_offsets), 1);
    gen_pin(&p, GEN_C_BLOCK_SIZE, 4);
    gen_pin(&p, GEN_C_OPT(tree_parents), 1);
    gen_pin(&p, GEN_C_OPT(shared_prefix), 1);
    gen_pin(&p, GEN_C_OPT(topk_indices), 1);
    /* k_positions replaces k_pos (the two do not go together): one draw
       with each */
    for (int slots = 0; slots < 2; slots++) {
        gen_pin(&p, GEN_C_OPT(k_positions), slots);
        const size_t apart =
            slots ? offsetof(attn_options, k_pos) : offsetof(attn_options, k_positions);
        gen_src fixed = {NULL, NULL};
        gen_problem d;
        CHECK(gen_draw(&d, &fixed, &p), "draw");
        gen_bufs m;
        CHECK(gen_materialise(&m, &d, 1, 0, NULL) == 0, "materialise");
#define CHECK_GIVEN(f, kind, extent, dt, off, since, rule)                                    \
        if (offsetof(attn_options, f) == apart) {                                         \
            const void *a_;                                                               \
            memcpy(&a_, (const char *)&m.opt + offsetof(attn_options, f), sizeof a_);     \
            CHECK(a_ == NULL, #f " given beside its alternative");                        \
        } else if (ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_TENSOR) {                        \
            const attn_tensor *t_;                                                        \
            memcpy(&t_, (const char *)&m.opt + offsetof(attn_options, f), sizeof t_);     \
            CHECK(t_ && t_->data && t_->dtype == ATTN_DTYPE_##dt, #f " not given");       \
        } else if (ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_I32 ||                           \
                   ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_I64 ||                           \
                   ATTN_OPT_KIND_##kind == ATTN_OPT_KIND_PAGES) {                         \
            const void *a_;                                                               \
            memcpy(&a_, (const char *)&m.opt + offsetof(attn_options, f), sizeof a_);     \
            CHECK(a_ != NULL, #f " not given");                                           \
        }
        ATTN_OPTION_LIST(CHECK_GIVEN)
#undef CHECK_GIVEN
        gen_release(&m);
        gen_free(&d);
    }
}

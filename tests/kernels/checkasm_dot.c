/* SPDX-License-Identifier: MIT */
/*
 * checkasm, the dot family: the low-precision modes' slots, each the tile
 * or backward check in its precision (check_qk_mode and check_pv_mode,
 * checkasm_tile.c; check_pt_mode, checkasm_backward.c) against the scalar
 * dot file. dot_<isa>.c: qk_bf16, pv_bf16, pt_bf16; dot_i8_<isa>.c (and its
 * builds on other instructions): qk_i8, which must also give the ISA's own
 * table's bits (the twin of a file checked alone).
 */
#include "checkasm.h"

void check_qk_bf16(checkasm *c)
{
    check_qk_mode(c, CA_BF16, c->t->qk_bf16[c->dt], c->ref->qk_bf16[c->dt], NULL);
}

void check_pv_bf16(checkasm *c)
{
    check_pv_mode(c, CA_BF16, c->t->pv_bf16[c->dt], c->ref->pv_bf16[c->dt]);
}

void check_pt_bf16(checkasm *c)
{
    check_pt_mode(c, CA_BF16, c->t->pt_bf16, c->ref->pt_bf16);
}

void check_qk_i8(checkasm *c)
{
    check_qk_mode(c, CA_I8, c->t->qk_i8[c->dt], c->ref->qk_i8[c->dt],
                  c->twin ? c->twin->qk_i8[c->dt] : NULL);
}

/* SPDX-License-Identifier: MIT */
/* Sequence parallelism over MPI with attn_forward + attn_merge, and its
   backward with attn_backward (seqpar.h). */
#include "seqpar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_ATTN(call)                                                          \
    do {                                                                          \
        attn_status st_ = (call);                                                 \
        if (st_ != ATTN_OK) {                                                     \
            fprintf(stderr, "%s: %s\n", #call, attn_strerror(st_));               \
            goto fail;                                                            \
        }                                                                         \
    } while (0)
#define CHECK_MPI(call)                                                           \
    do {                                                                          \
        if ((call) != MPI_SUCCESS) {                                              \
            fprintf(stderr, "%s failed\n", #call);                                \
            goto fail;                                                            \
        }                                                                         \
    } while (0)

/* A [L][H][D] tensor of batch 1. */
static attn_tensor lhd(const float *data, int64_t heads, int64_t dim)
{
    attn_tensor t = {(void *)data, ATTN_DTYPE_F32, 0, dim, heads * dim};
    return t;
}

/*
 * Partial attention of q (q_len rows at positions q_pos..) over one shard
 * of keys (positions k_pos..): out [q_len][q_heads][head_dim] and lse
 * [q_heads][q_len]. With few tasks (decode) attn_forward splits the shard's
 * keys further across the pool when it gets a workspace.
 */
static int shard_forward(const seqpar_dims *d, int64_t q_len, int64_t q_pos, const float *q,
                         int64_t shard_len, int64_t k_pos, const float *k, const float *v,
                         float *out, float *lse)
{
    const attn_shape shape = {1, d->q_heads, d->kv_heads, q_len, shard_len, d->head_dim, 0};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = d->flags;
    opt.window = d->window;
    opt.q_pos = &q_pos; /* global positions: masks as in the whole sequence */
    opt.k_pos = &k_pos;
    size_t ws_bytes = 0;
    void *ws = NULL;
    int rc = 1;
    CHECK_ATTN(attn_forward_workspace_size(&shape, &opt, &ws_bytes));
    if (ws_bytes) {
        ws = malloc(ws_bytes);
        opt.workspace = ws;
        opt.workspace_size = ws ? ws_bytes : 0; /* no memory: the unsplit fallback */
    }
    const attn_tensor tq = lhd(q, d->q_heads, d->head_dim);
    const attn_tensor tk = lhd(k, d->kv_heads, d->head_dim);
    const attn_tensor tv = lhd(v, d->kv_heads, d->head_dim);
    const attn_tensor to = lhd(out, d->q_heads, d->head_dim);
    const attn_row_stats stats = {lse, NULL, NULL};
    CHECK_ATTN(attn_forward(&shape, &opt, &tq, &tk, &tv, &to, &stats));
    rc = 0;
fail:
    free(ws);
    return rc;
}

/* Merges P partials laid out one after the other in `parts`, each
   [rows][q_heads][head_dim] then lse [q_heads][rows]. */
static int merge_blocks(const seqpar_dims *d, int P, int64_t rows, const float *parts,
                        float *out, float *lse)
{
    const int64_t out_floats = rows * d->q_heads * d->head_dim;
    const int64_t blk = out_floats + rows * d->q_heads;
    attn_partial *p = malloc((size_t)P * sizeof *p);
    int rc = 1;
    if (!p)
        return 1;
    for (int i = 0; i < P; i++) {
        p[i].out = lhd(parts + i * blk, d->q_heads, d->head_dim);
        p[i].lse = parts + i * blk + out_floats;
    }
    const attn_shape shape = {1, d->q_heads, d->kv_heads, rows, 1, d->head_dim, 0};
    const attn_tensor to = lhd(out, d->q_heads, d->head_dim);
    CHECK_ATTN(attn_merge(&shape, NULL, p, P, &to, lse));
    rc = 0;
fail:
    free(p);
    return rc;
}

int seqpar_replicated_queries(MPI_Comm comm, const seqpar_dims *d, int64_t q_len,
                              int64_t q_pos, const float *q, int64_t shard_len, int64_t k_pos,
                              const float *k, const float *v, float *out, float *lse)
{
    int P, rc = 1;
    MPI_Comm_size(comm, &P);
    const int64_t out_floats = q_len * d->q_heads * d->head_dim;
    const int64_t blk = out_floats + q_len * d->q_heads;
    float *mine = malloc((size_t)blk * sizeof(float));
    float *all = malloc((size_t)(blk * P) * sizeof(float));
    if (!mine || !all)
        goto fail;
    if (shard_forward(d, q_len, q_pos, q, shard_len, k_pos, k, v, mine, mine + out_floats))
        goto fail;
    /* the only traffic: every rank's partial output and lse */
    CHECK_MPI(MPI_Allgather(mine, (int)blk, MPI_FLOAT, all, (int)blk, MPI_FLOAT, comm));
    rc = merge_blocks(d, P, q_len, all, out, lse);
fail:
    free(mine);
    free(all);
    return rc;
}

int seqpar_sharded_prefill(MPI_Comm comm, const seqpar_dims *d, int64_t shard_len,
                           const float *q_local, const float *k, const float *v, float *out,
                           float *lse)
{
    int P, r, rc = 1;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &r);
    const int64_t S = shard_len, H = d->q_heads, D = d->head_dim, L = S * P;
    const int64_t blk_out = S * H * D, blk = blk_out + S * H;
    float *q_all = malloc((size_t)(L * H * D) * sizeof(float));
    float *part = malloc((size_t)(L * H * D) * sizeof(float));
    float *part_lse = malloc((size_t)(H * L) * sizeof(float));
    float *send = malloc((size_t)(blk * P) * sizeof(float));
    float *recv = malloc((size_t)(blk * P) * sizeof(float));
    if (!q_all || !part || !part_lse || !send || !recv)
        goto fail;

    /* 1. every rank gets every query block (S * H * D floats from each) */
    CHECK_MPI(MPI_Allgather(q_local, (int)(S * H * D), MPI_FLOAT, q_all, (int)(S * H * D),
                            MPI_FLOAT, comm));
    /* 2. all queries (positions 0..L) over this rank's keys (r*S..) */
    if (shard_forward(d, L, 0, q_all, S, (int64_t)r * S, k, v, part, part_lse))
        goto fail;
    /* 3. the rows of block j go to rank j: output rows, then lse [H][S] */
    for (int j = 0; j < P; j++) {
        memcpy(send + j * blk, part + (int64_t)j * S * H * D, (size_t)blk_out * sizeof(float));
        for (int64_t h = 0; h < H; h++)
            memcpy(send + j * blk + blk_out + h * S, part_lse + h * L + (int64_t)j * S,
                   (size_t)S * sizeof(float));
    }
    CHECK_MPI(MPI_Alltoall(send, (int)blk, MPI_FLOAT, recv, (int)blk, MPI_FLOAT, comm));
    /* 4. this block's P partials, merged in rank order */
    rc = merge_blocks(d, P, S, recv, out, lse);
fail:
    free(q_all);
    free(part);
    free(part_lse);
    free(send);
    free(recv);
    return rc;
}

int seqpar_sharded_backward(MPI_Comm comm, const seqpar_dims *d, int64_t shard_len,
                            const float *q_local, const float *k, const float *v,
                            const float *out_local, const float *lse_local,
                            const float *dout_local, float *dq_local, float *dk, float *dv)
{
    int P, r, rc = 1;
    MPI_Comm_size(comm, &P);
    MPI_Comm_rank(comm, &r);
    const int64_t S = shard_len, H = d->q_heads, D = d->head_dim, L = S * P;
    const int64_t rows = S * H * D;
    float *q_all = malloc((size_t)(L * H * D) * sizeof(float));
    float *o_all = malloc((size_t)(L * H * D) * sizeof(float));
    float *do_all = malloc((size_t)(L * H * D) * sizeof(float));
    float *lse_blocks = malloc((size_t)(H * L) * sizeof(float));
    float *lse_all = malloc((size_t)(H * L) * sizeof(float));
    float *dq_part = malloc((size_t)(L * H * D) * sizeof(float));
    if (!q_all || !o_all || !do_all || !lse_blocks || !lse_all || !dq_part)
        goto fail;

    /* 1. every block of the queries, the merged output, dout and lse */
    CHECK_MPI(MPI_Allgather(q_local, (int)rows, MPI_FLOAT, q_all, (int)rows, MPI_FLOAT, comm));
    CHECK_MPI(MPI_Allgather(out_local, (int)rows, MPI_FLOAT, o_all, (int)rows, MPI_FLOAT, comm));
    CHECK_MPI(MPI_Allgather(dout_local, (int)rows, MPI_FLOAT, do_all, (int)rows, MPI_FLOAT, comm));
    CHECK_MPI(MPI_Allgather(lse_local, (int)(S * H), MPI_FLOAT, lse_blocks, (int)(S * H),
                            MPI_FLOAT, comm));
    for (int j = 0; j < P; j++) /* blocks of [H][S] into attn_backward's [H][L] */
        for (int64_t h = 0; h < H; h++)
            memcpy(lse_all + h * L + (int64_t)j * S, lse_blocks + ((int64_t)j * H + h) * S,
                   (size_t)S * sizeof(float));

    /* 2. all queries (positions 0..L) over this rank's keys (r*S..) */
    const attn_shape shape = {1, H, d->kv_heads, L, S, D, 0};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = d->flags;
    opt.window = d->window;
    int64_t q_pos = 0, k_pos = (int64_t)r * S;
    opt.q_pos = &q_pos;
    opt.k_pos = &k_pos;
    const attn_tensor tq = lhd(q_all, H, D), tk = lhd(k, d->kv_heads, D),
                      tv = lhd(v, d->kv_heads, D), to = lhd(o_all, H, D),
                      tdo = lhd(do_all, H, D), tdq = lhd(dq_part, H, D),
                      tdk = lhd(dk, d->kv_heads, D), tdv = lhd(dv, d->kv_heads, D);
    attn_grads g = ATTN_GRADS_INIT;
    g.dq = &tdq;
    g.dk = &tdk;
    g.dv = &tdv;
    CHECK_ATTN(attn_backward(&shape, &opt, &tq, &tk, &tv, &to, &tdo, lse_all, &g));

    /* 3. each query block's dq: the sum of every rank's share */
    CHECK_MPI(MPI_Reduce_scatter_block(dq_part, dq_local, (int)rows, MPI_FLOAT, MPI_SUM, comm));
    rc = 0;
fail:
    free(q_all), free(o_all), free(do_all), free(lse_blocks), free(lse_all), free(dq_part);
    return rc;
}

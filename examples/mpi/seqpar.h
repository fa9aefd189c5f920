/* SPDX-License-Identifier: MIT */
/*
 * Sequence parallelism with libattn over MPI: the keys and values of one
 * long sequence are cut into contiguous shards, one per rank, and never
 * move. Each rank computes partial attention of the queries over its shard
 * (attn_forward with global positions and the lse statistic); the partials
 * travel instead and attn_merge combines them into the exact result.
 *
 * Layouts (batch 1, [L,H,D] so that a range of positions is contiguous):
 *   q      [q_len][q_heads][head_dim]
 *   k, v   [shard_len][kv_heads][head_dim]   this rank's shard
 *   out    [q_len][q_heads][head_dim]
 * F32 throughout.
 */
#ifndef SEQPAR_H
#define SEQPAR_H

#include <mpi.h>
#include <stdint.h>

#include <attn.h>

typedef struct seqpar_dims {
    int64_t q_heads, kv_heads, head_dim;
    uint32_t flags;  /* ATTN_CAUSAL or 0 */
    int64_t window;  /* 0: off */
} seqpar_dims;

/*
 * Decode (or any query block every rank holds): the same q_len queries at
 * positions q_pos.. on every rank, this rank's keys at k_pos..; every rank
 * ends with the whole result. Crosses the network: each rank's partial
 * output and lse (MPI_Allgather), q_len * q_heads * (head_dim + 1) floats.
 */
int seqpar_replicated_queries(MPI_Comm comm, const seqpar_dims *d, int64_t q_len,
                              int64_t q_pos, const float *q, int64_t shard_len, int64_t k_pos,
                              const float *k, const float *v, float *out, float *lse);

/*
 * Prefill: rank r owns the queries AND the keys of positions
 * [r * shard_len, (r + 1) * shard_len) (every rank the same shard_len).
 * The query blocks are gathered (MPI_Allgather), each rank computes the
 * partials of all queries over its keys (causal: the shards after a block
 * give empty partials), and each rank receives, for its own block, the P
 * partials (MPI_Alltoall) and merges them. out and lse: this rank's block.
 */
int seqpar_sharded_prefill(MPI_Comm comm, const seqpar_dims *d, int64_t shard_len,
                           const float *q_local, const float *k, const float *v, float *out,
                           float *lse);

/*
 * Training's backward of seqpar_sharded_prefill, the same sharding: rank r
 * holds query, output, dout and key blocks of positions [r*S, (r+1)*S), and
 * out_local / lse_local ([H][S]) are the merged forward's. The query,
 * output and dout blocks and the lse are gathered (MPI_Allgather), each
 * rank runs attn_backward of all queries over its keys with the global
 * positions and the global lse and output (so its P and D are the whole
 * sequence's), which gives its keys' dk and dv whole, and its share of
 * every query's dq; the shares are summed onto the block owners
 * (MPI_Reduce_scatter_block). Per rank, sent: 3 S H D + S H floats to each
 * of the P - 1 others (gathers) and (P - 1) S H D floats of dq shares.
 */
int seqpar_sharded_backward(MPI_Comm comm, const seqpar_dims *d, int64_t shard_len,
                            const float *q_local, const float *k, const float *v,
                            const float *out_local, const float *lse_local,
                            const float *dout_local, float *dq_local, float *dk, float *dv);

#endif /* SEQPAR_H */

/* SPDX-License-Identifier: MIT */
/*
 * attn-seqpar: sequence-parallel attention over MPI ranks (seqpar.c), run
 * by the test command as
 *     mpirun --allow-run-as-root --oversubscribe -np 4 attn-seqpar
 * It runs five cases on P ranks, each rank holding one key shard:
 *   prefill   causal, queries and keys sharded by position (allgather of
 *             the queries, alltoall of the partials, attn_merge);
 *   decode    one query at the end of the sequence, causal (allgather of
 *             the partials; each rank's shard is long enough that
 *             attn_forward also splits it across keys with a workspace);
 *   window    decode with a sliding window shorter than a shard (the
 *             shards outside it give empty partials, lse = -inf);
 *   training  the prefill, then its backward (seqpar_sharded_backward:
 *             gathers, attn_backward with the global lse and output, a
 *             reduce-scatter of dq), causal and with a window of 100.
 * Rank 0 gathers the merged result and compares it with attn_forward of the
 * whole sequence in one process: both must lie within their derived error
 * bounds of tests/ref/ref.c's float64 reference (the merged one: the shards'
 * bounds carried through the merge, tests/tolerance.h "Merging partial
 * results"), so they differ by at most the sum. Exit 0 when every case
 * passes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "ref_backward.h"
#include "seqpar.h"

/* The smallest block_k of any kernel table (scalar: 64) gives the largest
   rescale count R of tests/tolerance.h, so the bound holds for every ISA. */
#define SMALLEST_BLOCK_K 64

/* Input element i of tensor `which`, the same on every rank. */
static float input(unsigned which, int64_t i, float scale)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + which * 0xD1B54A32D192ED03ull + 1;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return scale * ((float)(x >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
}

static float *make(unsigned which, int64_t n, float scale)
{
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int64_t i = 0; i < n; i++)
        p[i] = input(which, i, scale);
    return p;
}

static attn_tensor lhd(const float *data, int64_t len, int64_t heads, int64_t dim)
{
    attn_tensor t = {(void *)data, ATTN_DTYPE_F32, len * heads * dim, dim, heads * dim};
    return t;
}

/*
 * Compares merged (the MPI result, [Lq][H][D]) and single (attn_forward of
 * the whole sequence) for queries at q_pos.. over keys 0..N cut into P
 * shards of S. Returns 0 when both are within their bounds.
 */
static int check(const char *name, const seqpar_dims *d, int64_t lq, int64_t q_pos, int P,
                 int64_t S, const float *q, const float *k, const float *v, const float *merged,
                 const float *merged_lse)
{
    const int64_t N = (int64_t)P * S, H = d->q_heads, D = d->head_dim;
    const attn_shape whole = {1, H, d->kv_heads, lq, N, D, 0};
    attn_options opt = ATTN_OPTIONS_INIT;
    opt.flags = d->flags;
    opt.window = d->window;
    int64_t qp = q_pos, kp = 0;
    opt.q_pos = &qp;
    opt.k_pos = &kp;
    const attn_tensor tq = lhd(q, lq, H, D), tk = lhd(k, N, d->kv_heads, D),
                      tv = lhd(v, N, d->kv_heads, D);
    float *single = malloc((size_t)(lq * H * D) * sizeof(float));
    float *single_lse = malloc((size_t)(lq * H) * sizeof(float));
    const attn_tensor ts = lhd(single, lq, H, D);
    const attn_row_stats st = {single_lse, NULL, NULL};
    if (attn_forward(&whole, &opt, &tq, &tk, &tv, &ts, &st) != ATTN_OK) {
        fprintf(stderr, "%s: single-process attn_forward failed\n", name);
        return 1;
    }

    ref_attn full, *shard = malloc((size_t)P * sizeof(ref_attn));
    ref_attn_compute(&full, &whole, &opt, &tq, &tk, &tv, (N + SMALLEST_BLOCK_K - 1) / SMALLEST_BLOCK_K + 1);
    for (int s = 0; s < P; s++) {
        attn_shape sh = whole;
        sh.kv_len = S;
        int64_t skp = (int64_t)s * S;
        attn_options so = opt;
        so.k_pos = &skp;
        attn_tensor sk = tk, sv = tv;
        sk.data = (float *)k + skp * d->kv_heads * D;
        sv.data = (float *)v + skp * d->kv_heads * D;
        ref_attn_compute(&shard[s], &sh, &so, &tq, &sk, &sv,
                         (S + SMALLEST_BLOCK_K - 1) / SMALLEST_BLOCK_K + 1);
    }

    double worst_merged = 0.0, worst_single = 0.0, worst_pair = 0.0;
    int bad = 0;
    double *ls = malloc((size_t)P * sizeof(double)), *le = malloc((size_t)P * sizeof(double));
    const double **os = malloc((size_t)P * sizeof(double *)), **oe = malloc((size_t)P * sizeof(double *));
    double *want = malloc((size_t)D * sizeof(double)), *bound = malloc((size_t)D * sizeof(double));
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < lq; i++) {
            const int64_t row = h * lq + i; /* ref rows: (b, h, i) */
            for (int s = 0; s < P; s++) {
                ls[s] = shard[s].lse[row];
                le[s] = shard[s].lse_err[row];
                os[s] = shard[s].o + row * D;
                oe[s] = shard[s].o_err + row * D;
            }
            double L, Le;
            ref_merge_row((size_t)P, ls, le, os, oe, (size_t)D, want, bound, &L, &Le);
            for (int64_t c = 0; c < D; c++) {
                const double exact = full.o[row * D + c];
                const double m = merged[(i * H + h) * D + c], s1 = single[(i * H + h) * D + c];
                const double em = fabs(m - exact), es = fabs(s1 - exact);
                const double bm = bound[c], bs = full.o_err[row * D + c];
                if (!(em <= bm) || !(es <= bs) || !(fabs(m - s1) <= bm + bs))
                    bad++;
                if (bm > 0)
                    worst_merged = fmax(worst_merged, em / bm);
                if (bs > 0)
                    worst_single = fmax(worst_single, es / bs);
                if (bm + bs > 0)
                    worst_pair = fmax(worst_pair, fabs(m - s1) / (bm + bs));
            }
            const double gl = merged_lse[h * lq + i];
            if (!(fabs(gl - full.lse[row]) <= Le) && !(gl == full.lse[row]))
                bad++;
        }
    printf("%s: P=%d shards of %lld keys, %lld queries: merged/bound %.3f, single/bound %.3f, "
           "|merged - single|/(sum of bounds) %.3f: %s\n",
           name, P, (long long)S, (long long)lq, worst_merged, worst_single, worst_pair,
           bad ? "FAIL" : "ok");
    for (int s = 0; s < P; s++)
        ref_attn_free(&shard[s]);
    ref_attn_free(&full);
    free(shard), free(ls), free(le), free(os), free(oe), free(want), free(bound);
    free(single), free(single_lse);
    return bad != 0;
}

static int prefill_case(MPI_Comm comm, int rank, int P)
{
    const seqpar_dims d = {4, 2, 32, ATTN_CAUSAL, 0};
    const int64_t S = 256, N = S * P, H = d.q_heads, D = d.head_dim;
    float *q = make(1, N * H * D, 1.0f), *k = make(2, N * d.kv_heads * D, 1.0f),
          *v = make(3, N * d.kv_heads * D, 3.0f);
    float *out = malloc((size_t)(S * H * D) * sizeof(float)),
          *lse = malloc((size_t)(S * H) * sizeof(float));
    const int64_t mine = (int64_t)rank * S;
    int rc = seqpar_sharded_prefill(comm, &d, S, q + mine * H * D, k + mine * d.kv_heads * D,
                                    v + mine * d.kv_heads * D, out, lse);
    /* rank 0 collects every block: [N][H][D] and lse [H][N] */
    float *all = rank == 0 ? malloc((size_t)(N * H * D) * sizeof(float)) : NULL;
    float *all_lse_blocks = rank == 0 ? malloc((size_t)(N * H) * sizeof(float)) : NULL;
    MPI_Gather(out, (int)(S * H * D), MPI_FLOAT, all, (int)(S * H * D), MPI_FLOAT, 0, comm);
    MPI_Gather(lse, (int)(S * H), MPI_FLOAT, all_lse_blocks, (int)(S * H), MPI_FLOAT, 0, comm);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, comm);
    if (rank == 0 && rc == 0) {
        float *all_lse = malloc((size_t)(N * H) * sizeof(float));
        for (int p = 0; p < P; p++) /* blocks of [H][S] into [H][N] */
            for (int64_t h = 0; h < H; h++)
                memcpy(all_lse + h * N + p * S, all_lse_blocks + (p * H + h) * S,
                       (size_t)S * sizeof(float));
        rc = check("prefill, causal", &d, N, 0, P, S, q, k, v, all, all_lse);
        free(all_lse);
    }
    free(q), free(k), free(v), free(out), free(lse), free(all), free(all_lse_blocks);
    return rc;
}

static int decode_case(MPI_Comm comm, int rank, int P, int64_t window, const char *name)
{
    const seqpar_dims d = {8, 1, 64, ATTN_CAUSAL, window};
    const int64_t S = 3000, N = S * P, H = d.q_heads, D = d.head_dim;
    float *q = make(4, H * D, 1.0f), *k = make(5, N * D, 1.0f), *v = make(6, N * D, 3.0f);
    float *out = malloc((size_t)(H * D) * sizeof(float)), *lse = malloc((size_t)H * sizeof(float));
    const int64_t mine = (int64_t)rank * S;
    /* the new token sits at position N - 1, its own key included */
    int rc = seqpar_replicated_queries(comm, &d, 1, N - 1, q, S, mine, k + mine * D, v + mine * D,
                                       out, lse);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, comm);
    if (rank == 0 && rc == 0)
        rc = check(name, &d, 1, N - 1, P, S, q, k, v, out, lse);
    free(q), free(k), free(v), free(out), free(lse);
    return rc;
}

/* [L][H][D] (the MPI layout) to the reference's dense [H][L][D]. */
static void to_hld(const float *lhd_rows, int64_t L, int64_t H, int64_t D, float *hld)
{
    for (int64_t i = 0; i < L; i++)
        for (int64_t h = 0; h < H; h++)
            memcpy(hld + (h * L + i) * D, lhd_rows + (i * H + h) * D, (size_t)D * sizeof(float));
}

/*
 * One gradient, MPI (m) and single-process (s) results in [L][H][D], the
 * float64 gradient in [H][L][D] with the bounds of each run (each handed
 * its own forward's lse and out). Returns the count of violations and
 * raises the worst ratios.
 */
static int grad_check(int64_t L, int64_t H, int64_t D, const float *m, const float *s,
                      const double *exact, const double *bm, const double *bs, double worst[3])
{
    int bad = 0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < L; i++)
            for (int64_t c = 0; c < D; c++) {
                const size_t at = (size_t)((i * H + h) * D + c), r = (size_t)((h * L + i) * D + c);
                const double em = fabs(m[at] - exact[r]), es = fabs(s[at] - exact[r]);
                const double pair = fabs((double)m[at] - (double)s[at]);
                if (!(em <= bm[r]) || !(es <= bs[r]) || !(pair <= bm[r] + bs[r]))
                    bad++;
                if (bm[r] > 0)
                    worst[0] = fmax(worst[0], em / bm[r]);
                if (bs[r] > 0)
                    worst[1] = fmax(worst[1], es / bs[r]);
                if (bm[r] + bs[r] > 0)
                    worst[2] = fmax(worst[2], pair / (bm[r] + bs[r]));
            }
    return bad;
}

/*
 * Training: the sharded prefill's forward, then seqpar_sharded_backward;
 * rank 0 gathers dq, dk, dv and compares them with attn_backward of the
 * whole sequence in one process, both against tests/ref/ref_backward.c's
 * float64 gradients within their bounds (tests/tolerance.h "backward",
 * each with the lse and output its own forward produced: a sharded dq is
 * the sum of P partial sums, one order of the same terms, within the same
 * bound), so they differ by at most the sum.
 */
static int train_case(MPI_Comm comm, int rank, int P, int64_t window, const char *name)
{
    const seqpar_dims d = {4, 2, 32, ATTN_CAUSAL, window};
    const int64_t S = 160, N = S * P, H = d.q_heads, HK = d.kv_heads, D = d.head_dim;
    float *q = make(11, N * H * D, 1.0f), *k = make(12, N * HK * D, 1.0f),
          *v = make(13, N * HK * D, 3.0f), *dout = make(14, N * H * D, 1.0f);
    float *out = malloc((size_t)(S * H * D) * sizeof(float)),
          *lse = malloc((size_t)(S * H) * sizeof(float));
    float *dq = malloc((size_t)(S * H * D) * sizeof(float)),
          *dk = malloc((size_t)(S * HK * D) * sizeof(float)),
          *dv = malloc((size_t)(S * HK * D) * sizeof(float));
    const int64_t mine = (int64_t)rank * S;
    int rc = seqpar_sharded_prefill(comm, &d, S, q + mine * H * D, k + mine * HK * D,
                                    v + mine * HK * D, out, lse);
    if (rc == 0)
        rc = seqpar_sharded_backward(comm, &d, S, q + mine * H * D, k + mine * HK * D,
                                     v + mine * HK * D, out, lse, dout + mine * H * D, dq, dk, dv);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, comm);
    /* rank 0 collects every block: out, dq [N][H][D], dk, dv [N][HK][D], lse blocks */
    float *g_out = NULL, *g_lse = NULL, *g_dq = NULL, *g_dk = NULL, *g_dv = NULL;
    if (rank == 0) {
        g_out = malloc((size_t)(N * H * D) * sizeof(float));
        g_lse = malloc((size_t)(N * H) * sizeof(float));
        g_dq = malloc((size_t)(N * H * D) * sizeof(float));
        g_dk = malloc((size_t)(N * HK * D) * sizeof(float));
        g_dv = malloc((size_t)(N * HK * D) * sizeof(float));
    }
    MPI_Gather(out, (int)(S * H * D), MPI_FLOAT, g_out, (int)(S * H * D), MPI_FLOAT, 0, comm);
    MPI_Gather(lse, (int)(S * H), MPI_FLOAT, g_lse, (int)(S * H), MPI_FLOAT, 0, comm);
    MPI_Gather(dq, (int)(S * H * D), MPI_FLOAT, g_dq, (int)(S * H * D), MPI_FLOAT, 0, comm);
    MPI_Gather(dk, (int)(S * HK * D), MPI_FLOAT, g_dk, (int)(S * HK * D), MPI_FLOAT, 0, comm);
    MPI_Gather(dv, (int)(S * HK * D), MPI_FLOAT, g_dv, (int)(S * HK * D), MPI_FLOAT, 0, comm);
    if (rank == 0 && rc == 0) {
        const attn_shape whole = {1, H, HK, N, N, D, 0};
        attn_options opt = ATTN_OPTIONS_INIT;
        opt.flags = d.flags;
        opt.window = d.window;
        const attn_tensor tq = lhd(q, N, H, D), tk = lhd(k, N, HK, D), tv = lhd(v, N, HK, D),
                          tdo = lhd(dout, N, H, D);
        /* the single process: its own forward, then the backward */
        float *s_out = malloc((size_t)(N * H * D) * sizeof(float)),
              *s_lse = malloc((size_t)(N * H) * sizeof(float)),
              *s_dq = malloc((size_t)(N * H * D) * sizeof(float)),
              *s_dk = malloc((size_t)(N * HK * D) * sizeof(float)),
              *s_dv = malloc((size_t)(N * HK * D) * sizeof(float));
        const attn_tensor to = lhd(s_out, N, H, D), tdq = lhd(s_dq, N, H, D),
                          tdk = lhd(s_dk, N, HK, D), tdv = lhd(s_dv, N, HK, D);
        const attn_row_stats st = {s_lse, NULL, NULL};
        attn_grads g = ATTN_GRADS_INIT;
        g.dq = &tdq;
        g.dk = &tdk;
        g.dv = &tdv;
        if (attn_forward(&whole, &opt, &tq, &tk, &tv, &to, &st) != ATTN_OK ||
            attn_backward(&whole, &opt, &tq, &tk, &tv, &to, &tdo, s_lse, &g) != ATTN_OK) {
            fprintf(stderr, "%s: single-process forward/backward failed\n", name);
            rc = 1;
        } else {
            /* the merged lse in [H][N] and both outputs in [H][N][D] for the reference */
            float *m_lse = malloc((size_t)(N * H) * sizeof(float));
            for (int p = 0; p < P; p++)
                for (int64_t h = 0; h < H; h++)
                    memcpy(m_lse + h * N + p * S, g_lse + (p * H + h) * S,
                           (size_t)S * sizeof(float));
            float *m_o = malloc((size_t)(N * H * D) * sizeof(float)),
                  *s_o = malloc((size_t)(N * H * D) * sizeof(float));
            to_hld(g_out, N, H, D, m_o);
            to_hld(s_out, N, H, D, s_o);
            ref_bwd_in in;
            ref_bwd_load(&in, &whole, &opt, &tq, &tk, &tv, &tdo);
            ref_grads rm, rs;
            ref_bwd_grads(&rm, &in, m_lse, m_o);
            ref_bwd_grads(&rs, &in, s_lse, s_o);
            double wq[3] = {0}, wk[3] = {0}, wv[3] = {0};
            int bad = grad_check(N, H, D, g_dq, s_dq, rm.dq, rm.dq_err, rs.dq_err, wq);
            bad += grad_check(N, HK, D, g_dk, s_dk, rm.dk, rm.dk_err, rs.dk_err, wk);
            bad += grad_check(N, HK, D, g_dv, s_dv, rm.dv, rm.dv_err, rs.dv_err, wv);
            printf("%s: P=%d shards of %lld positions: error/bound MPI dq %.3f dk %.3f dv %.3f, "
                   "single dq %.3f dk %.3f dv %.3f, |MPI - single|/(sum of bounds) %.3f: %s\n",
                   name, P, (long long)S, wq[0], wk[0], wv[0], wq[1], wk[1], wv[1],
                   fmax(wq[2], fmax(wk[2], wv[2])), bad ? "FAIL" : "ok");
            rc = bad != 0;
            ref_grads_free(&rm);
            ref_grads_free(&rs);
            ref_bwd_free(&in);
            free(m_lse), free(m_o), free(s_o);
        }
        free(s_out), free(s_lse), free(s_dq), free(s_dk), free(s_dv);
    }
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    free(g_out), free(g_lse), free(g_dq), free(g_dk), free(g_dv);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    int rc = prefill_case(MPI_COMM_WORLD, rank, P);
    rc |= decode_case(MPI_COMM_WORLD, rank, P, 0, "decode, causal");
    rc |= decode_case(MPI_COMM_WORLD, rank, P, 1000, "decode, window 1000");
    rc |= train_case(MPI_COMM_WORLD, rank, P, 0, "training (forward + backward), causal");
    rc |= train_case(MPI_COMM_WORLD, rank, P, 100, "training, causal window 100");
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("attn-seqpar on %d ranks: %s\n", P, rc ? "FAIL" : "ok");
    MPI_Finalize();
    return rc ? 1 : 0;
}

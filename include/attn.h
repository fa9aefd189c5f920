/* SPDX-License-Identifier: MIT */
/*
 * libattn — transformer attention on CPUs.
 *
 * The whole public API. C99/C11 and C++ compatible; includes nothing but
 * <stddef.h> and <stdint.h>.
 *
 * Conventions used throughout
 * ---------------------------
 * Tensors are 4-dimensional [batch][head][row][col] views described by an
 * attn_tensor: strides are in ELEMENTS of the tensor's dtype (BLOCKS for the
 * block formats Q8_0 and Q4_0, see "Quantized K/V caches"), the innermost
 * (col) dimension is always contiguous, strides must be >= 0. A stride of 0
 * broadcasts that dimension; this is allowed for inputs and rejected for
 * outputs (ATTN_ERR_STRIDE). [B,H,L,D] and [B,L,H,D] layouts are both just
 * stride choices.
 *
 * Shapes (attn_shape: q_heads, kv_heads and head_dim > 0, v_dim >= 0 (0:
 * head_dim); batch, q_len and kv_len >= 0 since 1.11, > 0 before). An empty
 * problem is valid and checked like any other: with batch or q_len 0 there
 * is no query row and nothing is written; with kv_len 0 every query row
 * sees no key (out 0, lse and max_score -inf, entropy 0, gradients 0, as
 * for a row whose keys are all masked) and scores or weights have rows of
 * no columns. The row operations (attn_softmax, attn_softmax_backward,
 * attn_quantize) keep rows and cols > 0.
 *   q      [batch][q_heads ][q_len ][head_dim]   F32, F16 or BF16
 *   k      [batch][kv_heads][kv_len][head_dim]   F32, F16, BF16, Q8_0, Q4_0, FP8_E4M3, FP8_E5M2
 *   v      [batch][kv_heads][kv_len][v_dim]      the same as k (its own dtype)
 *   out    [batch][q_heads ][q_len ][v_dim]      F32, F16 or BF16 (see attn_forward)
 *   scores [batch][q_heads ][q_len ][kv_len]     F32 (also weights)
 *   mask   [batch][q_heads ][q_len ][kv_len]     BOOL (1 byte), strides may be 0
 *   bias   [batch][q_heads ][q_len ][kv_len]     F32, F16 or BF16 (1.11), strides may be 0
 * Grouped-query attention: q_heads % kv_heads == 0, and query head h reads
 * KV head h / (q_heads / kv_heads). kv_heads == 1 is multi-query attention.
 *
 * How one score is formed (the order is part of the contract):
 *   s = (q . k) * scale               scale 0 means 1/sqrt(head_dim)
 *   s = softcap * tanh(s / softcap)   only when softcap != 0
 *     (computed as softcap * tanh(s * (1 / softcap)), so a softcap whose
 *     reciprocal overflows, below 1/FLT_MAX ~ 2.94e-39, is ATTN_ERR_ARG)
 *   s = s + bias[b][h][i][j]          only when a bias tensor is given
 *   s = s - slope * |i + (Lk_b - Lq_b) - j|
 *                                     only with alibi_slopes (slope of (b, h),
 *                                     distance from the query's aligned
 *                                     position: for causal rows
 *                                     -slope * (i + Lk_b - Lq_b - j))
 *   s = -inf                          when ANY mask hides key j from query i
 * and the softmax of a row is p_j = exp(s_j - lse), lse = m + log sum exp(s_j - m),
 * m = max_j s_j.
 *
 * Sinks. With opt->sinks, every query row i < Lq_b of (b, h) has one more
 * softmax entry, the sink logit z = sinks[b][h], that holds probability but
 * no value: m = max(z, max_j s_j), lse = m + log(exp(z - m) + sum_j exp(s_j - m)),
 * p_j = exp(s_j - lse) (so the weights of a row sum to 1 - exp(z - lse)),
 * out = sum_j p_j v_j. lse, max_score and entropy are those of the n + 1
 * entries (entropy in [0, log(n + 1)]). A row whose only visible entry is
 * its sink (every key masked) has weights 0, output 0, lse = max_score = z
 * and entropy 0. A sink of -inf is no sink; NaN or +inf makes the row NaN
 * like such a score. Sinks are not scores: attn_scores and attn_mask_apply
 * do not use them. Padded rows (i >= Lq_b) have no sink.
 *
 * Masks. With valid lengths Lq_b = q_lens[b] (or q_len) and
 * Lk_b = kv_lens[b] (or kv_len), query i may see key j only if all hold:
 *   - i < Lq_b and j < Lk_b                         (padding)
 *   - ATTN_CAUSAL: j <= i + (Lk_b - Lq_b)           (bottom-right aligned:
 *     for Lq == Lk the usual lower triangle; for decode, Lq_b == 1, the
 *     query sees every valid key)
 *   - window W > 0: j > i + (Lk_b - Lq_b) - W       (with ATTN_CAUSAL: the
 *     last W keys up to and including the query's own aligned position)
 *   - window_right R > 0: j < i + (Lk_b - Lq_b) + R (the mirror image: the R
 *     keys from the query's aligned position on). W and R together give a
 *     two-sided local window of W + R - 1 keys around the aligned
 *     position; FlashAttention's window_size = (left, right) is W = left + 1,
 *     R = right + 1 (its -1, unbounded, is 0 here).
 *   - mask given: mask[b][h][i][j] != 0             (SDPA convention)
 *   - tree_parents given (since 1.3), a draft tree: the last Lq_b keys of
 *     the sequence are the queries' own tokens (key Lk_b - Lq_b + t is
 *     query t's), and query i sees draft key t only when t is i or one of
 *     its ancestors, following tree_parents from i; every key before the
 *     draft stays visible (see attn_options.tree_parents)
 * The causal and window rules (and ALiBi's distance) compare positions:
 * key j is at position K_b + j and query i at Q_b + i, with K_b = k_pos[b]
 * (or 0) and Q_b = q_pos[b] (or K_b + Lk_b - Lq_b, the bottom-right
 * alignment above); j and i count from the sequence's first key and query
 * row (also with kv_offsets/q_offsets). Causal is kpos <= qpos, the window
 * kpos > qpos - W, window_right kpos < qpos + R, ALiBi's distance
 * |qpos - kpos|; with alibi_slopes, |q_pos[b] - k_pos[b]| + q_len + kv_len
 * must stay below 2^31 (ATTN_ERR_ARG). Giving q_pos and k_pos
 * (attn_options) lets a call see a shard of a longer sequence: keys at
 * positions k_pos[b].. and queries at q_pos[b].., masked as in the whole
 * sequence, so shards merged with attn_merge give the unsharded result.
 *
 * Positions per key slot (since 1.11). With attn_options.k_positions, key
 * j of sequence b is at position P = k_positions[b * kv_len + p], p its
 * slot in the key extent (p = j, or kv_offsets[b] + j: the row k is
 * addressed at, before a block table maps it), instead of K_b + j: a cache
 * whose slots are not in position order (llama.cpp's KV cells after
 * eviction or defragmentation). Query i is at Q_b + i as above (q_pos[b],
 * or Lk_b - Lq_b without it). The causal, window, window_right and ALiBi
 * rules use P in place of K_b + j, key by key, and a negative P marks an
 * empty slot, hidden from every query (ggml's -1). The other rules keep
 * their slot indices: padding (j < Lk_b), the BOOL mask and bias columns,
 * a draft tree's keys (its last Lq_b slots), top-k lists. Entries of
 * slots j < Lk_b of every sequence are read (the others may hold
 * anything), each must be at most ATTN_MAX_POSITION, and with
 * alibi_slopes each that is not empty less than 2^31 from every position
 * of its sequence's queries, else ATTN_ERR_ARG (the rule q_pos and k_pos
 * have, per key); k_positions with k_pos is ATTN_ERR_ARG. An empty slot
 * is a hidden key like any: its k and v rows are read (see Non-finite
 * inputs). The keys a row may see are no longer one interval, so every
 * operation computes a row over all its Lk_b keys
 * and masks the hidden ones (the cost of a dense call: a window no longer
 * skips tiles, nor does a paged call skip the table entries of hidden
 * keys: every valid slot's page must be in the pool). Every operation on
 * an attention problem reads it (attn_backward too); attn_cache_append
 * does not (the caller writes the new slots' positions). With a shared
 * prefix, the positions of sequence b's keys are b's own entries, its
 * shared keys' included (like its bias columns). Shards merged with
 * attn_merge may be any partition of the slots, each call given its own
 * slots' positions.
 *
 * Fully masked rows. A query row with no visible key (including padded
 * rows i >= Lq_b) produces weights 0, output 0, lse = max_score = -inf and
 * entropy = 0 (with a finite sink, a valid row's lse = max_score = its sink,
 * see Sinks). Never NaN. In attn_scores such a row is all -inf.
 *
 * Non-finite inputs. NaN or +-inf in q, k, v, bias, sinks, alibi_slopes or
 * scores affect only the rows whose visible keys they reach; nothing
 * crashes. Keys beyond Lk_b and query rows beyond Lq_b are never read for
 * arithmetic, so padded cache slots may hold anything. Inside the valid
 * length, a key hidden from a row only by the causal/window/BOOL mask still
 * enters the P.V product with weight 0, so an inf or NaN in its v row can
 * turn into NaN (0 * inf) the output of any query row computed in the same
 * tile (up to block_q rows x block_k keys, which differ between ISAs), as in
 * a dense matrix product. Keep v finite inside the valid lengths.
 *
 * Errors. Every operation validates all arguments before it writes
 * anything: a call that returns an error leaves every output untouched.
 *
 * Determinism. Results are bitwise identical for any thread count and any
 * parallel_for: work is cut into tasks by the shape only, and each output
 * element is produced by exactly one task in a fixed order. Results may
 * differ (within rounding) between ISAs, and between a split-KV forward and
 * an unsplit one (see attn_forward_workspace_size).
 *
 * Memory. No operation allocates heap memory; scratch beyond the stack is
 * the caller's (attn_options.workspace). Each task uses at most
 * ATTN_TASK_STACK_BYTES of stack (scratch for the query block, the score
 * tile and the output accumulator) in an optimized build (meson's default
 * release, or debugoptimized; an -O0 build of the library needs up to about
 * 1.5 times that); engines that run tasks on their own threads must give
 * them at least that much stack above their own use.
 * head_dim and v_dim are limited to ATTN_MAX_HEAD_DIM for the same reason.
 *
 * Aliasing. An output (including the attn_row_stats arrays) may share no
 * byte with an input or with another output: the address ranges the views
 * span are compared and any intersection is ATTN_ERR_STRIDE, so an output
 * interleaved with an input inside one buffer is rejected as well. Output
 * layouts must be nested: sorted by stride, each outer stride is at least
 * the span of the dimensions inside it ([B,H,L,D], [B,L,H,D] and padded
 * rows all are); other non-overlapping layouts are ATTN_ERR_STRIDE too.
 * Inputs may overlap each other freely (e.g. q, k, v in one fused buffer).
 *
 * Thread safety. Every function is thread-safe; concurrent calls on
 * distinct outputs are independent.
 *
 * Offset and packed batches (since 1.1). With attn_options.q_offsets, the
 * Lq_b queries of sequence b are rows q_offsets[b] .. q_offsets[b] + Lq_b - 1
 * of batch entry b; with kv_offsets, its Lk_b keys are rows (key positions)
 * kv_offsets[b] .. kv_offsets[b] + Lk_b - 1. An offset must be >= 0 and the
 * range must end within q_len (kv_len), else ATTN_ERR_ARG. Masks, causal and
 * window alignment are defined on the valid range exactly as above, with i
 * and j counted from the sequence's first row; the tensors are addressed at
 * the shifted positions, in every tensor indexed by query row (q, out,
 * scores, mask, bias, the stats arrays) or key position (k, v, the columns
 * of scores, mask and bias). So:
 *   - packed variable-length batch (FlashAttention's cu_seqlens): q, k, v,
 *     out one [T][H][D] tensor each with batch_stride 0, q_offsets[b] =
 *     kv_offsets[b] = cu_seqlens[b], lens[b] = cu_seqlens[b+1] - cu_seqlens[b];
 *   - left-padded cache (cache_leftpad): kv_offsets[b] = pad_b, kv_lens[b] =
 *     valid keys, the K/V tensors as usual.
 * With q_offsets, only the rows of a sequence are written (out, scores,
 * weights, stats): rows outside every sequence are never read or written,
 * and an output may have batch_stride 0 provided the sequences' query ranges
 * are in order and disjoint (q_offsets[b] + Lq_b <= q_offsets[b'] for
 * b < b' with Lq_b' > 0), else ATTN_ERR_STRIDE. With kv_offsets, only the
 * columns [kv_offsets[b], kv_offsets[b] + Lk_b) of a row of scores, weights
 * or attn_mask_apply's table are written (-inf or 0 where masked inside);
 * without it, every column of the row is, as in 1.0. Stats stay
 * float[batch][q_heads][q_len], indexed by the shifted row.
 *
 * Paged K/V (since 1.1). With attn_options.block_table, the keys and values
 * of every sequence live in a pool of num_blocks blocks of block_size
 * consecutive positions: key position p of sequence b (p = j, or
 * kv_offsets[b] + j) is slot p % block_size of pool block
 *   block_table[b * block_table_stride + p / block_size].
 * k and v then describe the pool, with batch_stride = elements between
 * consecutive pool blocks, row_stride = between consecutive slots of a block,
 * head_stride = between KV heads; vLLM's [num_blocks][block_size][kv_heads]
 * [head_dim] pool and FlashAttention's paged k_cache are batch_stride =
 * block_size * kv_heads * head_dim, row_stride = kv_heads * head_dim,
 * head_stride = head_dim (Q8_0/Q4_0 pools count blocks, as all their
 * strides do: head_stride = head_dim / 32). kv_len is still the logical key
 * extent of every sequence (the width of scores, mask and bias; kv_lens and
 * kv_offsets are bounded by it), and each row of block_table covers it:
 * ceil(kv_len / block_size) entries, so a dense [batch][pages] table has
 * block_table_stride = ceil(kv_len / block_size). The stride has no default:
 * 0 with batch > 1 is ATTN_ERR_ARG unless flags has ATTN_SHARED_BLOCK_TABLE,
 * which gives every sequence row 0 (since 1.11; before, 0 meant that
 * silently). Only the entries of blocks holding a
 * key some query may see (by padding, causal and window) are read, each must
 * be in [0, num_blocks) or the call is ATTN_ERR_ARG before anything is
 * written; slots and blocks no query may see are never read. Blocks may be
 * shared between sequences and listed in any order. attn_mask_apply has no
 * K and ignores the paging fields.
 *
 * Shared prefixes (since 1.4). With attn_options.shared_prefix, entry
 * P_b >= 0 says that the first P_b keys of sequence b are the first P_b keys
 * of sequence b - 1: every operation reads key (and value) j < P_b of
 * sequence b where key j of sequence b - 1 lies (and so on down a chain of
 * such sequences), never from b's own storage, which may hold anything
 * there (paged: the table entries of b's pages below P_b are not read).
 * Masks, ALiBi, bias and the scores' columns stay those of sequence b: the
 * keys are shared, not the queries. P_0 must be 0 and P_b <= min(Lk_b,
 * Lk_(b-1)), else ATTN_ERR_ARG. The sequences of a run b0 < b0 + 1 < ... < b1
 * with P_b > 0 for every b in (b0, b1] and P_b0 = 0 form a group that shares
 * the keys [0, P) of b0, P the least P_b of the run. Given the workspace
 * attn_forward_workspace_size asks for, attn_forward attends those P keys
 * once for the query rows of every sequence of the group (parallel sampling,
 * beam search, a common system prompt: decode reads the prefix from memory
 * once, not once per sequence) and continues each row's online softmax
 * over the sequence's own keys, which is the LSE merge of attn_merge; without
 * it, each sequence reads the prefix itself. Both are deterministic and
 * within the forward's bound, and differ in rounding from each other and
 * from an unshared call (the keys are summed in another order). A group's
 * rows depend on the group (its sequences share the prefix's key tiles, and
 * SIMD kernels may round a row by where it falls in a tile), never on the
 * sequences outside it: batch invariance holds for whole groups. The
 * prefix's chunks are counted from key 0, so the forward's bound holds
 * unchanged (tests/tolerance.h). attn_backward does not take shared_prefix
 * (ATTN_ERR_UNSUPPORTED: the gradient of a shared key belongs to every
 * sequence that reads it); attn_cache_append writes new rows into b's own
 * storage and refuses (ATTN_ERR_ARG) a new row at a key below P_b.
 *
 * Top-k sparse attention (since 1.7). With attn_options.topk_indices, each
 * query row sees only the keys its list selects (an indexer's top-k, as in
 * DeepSeek V3.2): entry t of the list of query i of sequence b is a key
 * index j of that sequence, 0 <= j < Lk_b, counted from the sequence's first
 * key whatever its layout (kv_offsets, a block table and shared prefixes
 * find key j as they do without a list), or -1 for an unused slot. The list
 * is a set: its order does not matter and a key listed twice is seen once.
 * It is the same for every head of the row (GQA, MQA and MLA's one latent
 * head read it once per query position). Selection is one more mask rule:
 * a selected key that padding, causal, window, the BOOL mask or a draft
 * tree hides stays hidden, and a row with no visible selected key is fully
 * masked (zeros, lse -inf; a sink still counts). Sinks, ALiBi (by the key's
 * position), bias, softcap, every K/V dtype and per-row FP8 scales apply to
 * the selected keys as to any. An entry < -1 or >= Lk_b is ATTN_ERR_ARG
 * before anything is written; lists of rows past Lq_b are not read.
 * topk_indices without topk >= 1, or topk without topk_indices, is
 * ATTN_ERR_ARG. Every operation on an attention problem reads it (scores,
 * weights, mask_apply, forward, backward). attn_forward reads only the keys
 * some row of a task selects: per block of query rows it gathers the union
 * of their selections into a tile, in key order, so a key that several
 * rows (or all heads of a GQA group) select is loaded once for all of them,
 * and keys no row selects are never read (the block-table entries are
 * checked as without a list). A block is at most 8 query positions (all
 * heads of each), or the heads of one position: rows that share most of
 * their selections share the loads, and every row is multiplied with the
 * whole union (the cost of rows that share few keys). The error bound is the
 * dense forward's, with R counting the union's tiles (at most
 * ceil(Lk_b / block_k) + 1, block_k the ISA's key block, unless the head
 * dims leave the tile narrower: MLA's 576/512). With shared_prefix, each
 * sequence reads its prefix itself (no once-per-group pass). The other
 * operations (attn_backward included) compute each row over its visible
 * range and mask the unselected keys: their cost is that of the dense
 * call. Example: 2048 keys of 32768 for each of 4 decode rows of one
 * sequence, int32_t idx[4][2048] (fill unused entries with -1):
 * o.topk_indices = &idx[0][0], o.topk = 2048, q_len = 4.
 */
#ifndef ATTN_H
#define ATTN_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(ATTN_BUILDING_DLL)
#define ATTN_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define ATTN_API __attribute__((visibility("default")))
#else
#define ATTN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_VERSION_MAJOR 1
#define ATTN_VERSION_MINOR 13
#define ATTN_VERSION_PATCH 1
#define ATTN_VERSION \
    ((ATTN_VERSION_MAJOR << 16) | (ATTN_VERSION_MINOR << 8) | ATTN_VERSION_PATCH)

/* Largest head_dim and v_dim any operation accepts (ATTN_ERR_UNSUPPORTED above). */
#define ATTN_MAX_HEAD_DIM 4096
/* Upper bound of the stack one task (or one attn_softmax call) uses. */
#define ATTN_TASK_STACK_BYTES (96 * 1024)
/* Largest value of attn_options.q_pos / k_pos (ATTN_ERR_ARG above or below 0). */
#define ATTN_MAX_POSITION ((int64_t)1 << 62)
/* Largest attn_options.kv_splits (ATTN_ERR_ARG above). */
#define ATTN_MAX_KV_SPLITS 1024

/* ---------------------------------------------------------------- status */

typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_ERR_NULL = 1,        /* a required pointer (or a tensor's data) is NULL */
    ATTN_ERR_SHAPE = 2,       /* a dimension out of range (see Shapes), or sizes overflow */
    ATTN_ERR_STRIDE = 3,      /* negative stride (whatever the other dimensions'
                                 sizes), broadcast or non-nested output, an output
                                 sharing memory with an input, an option's array
                                 or another output */
    ATTN_ERR_ARG = 4,         /* non-finite/negative scale-like value, q_heads % kv_heads,
                                 unknown flag bits, wrong dtype for a slot, a length
                                 outside [0, q_len] / [0, kv_len], negative window
                                 or window_right, an offset range or block index
                                 out of bounds, an inconsistent paging description,
                                 a position outside [0, ATTN_MAX_POSITION] (or with
                                 alibi_slopes, positions 2^31 or more apart), a
                                 k_positions entry above ATTN_MAX_POSITION,
                                 kv_splits outside [0, ATTN_MAX_KV_SPLITS] or >= 2
                                 with too small a workspace */
    ATTN_ERR_UNSUPPORTED = 5, /* ISA not built or not on this CPU; dims above
                                 ATTN_MAX_HEAD_DIM; an option attn_backward does
                                 not support yet */
    ATTN_ERR_NOMEM = 6,       /* allocation failed (thread pool only) */
    ATTN_ERR_VERSION = 7      /* attn_options.struct_size unknown to this library */
} attn_status;

/* A static English sentence describing `status` (never NULL). */
ATTN_API const char *attn_strerror(attn_status status);

/*
 * (since 1.5) What the calling thread's last failing call found, in one
 * English line naming the function and, where a check knows it, the
 * argument and its values: "attn_forward: opt->kv_lens[1] = 9: must be in
 * [0, kv_len = 8]". Every function that returns an attn_status other than
 * ATTN_OK sets it (to attn_strerror's sentence where no check said more); a
 * successful call leaves it as it was, so read it right after the failure.
 * "" before any failure. At most 1023 bytes (since 1.11; 255 before): a
 * longer line is cut at a word and ends with "...". Thread-local: a call
 * on another thread never changes it. The string stays valid until this
 * thread's next failing call.
 */
ATTN_API const char *attn_last_error(void);

/* (major << 16) | (minor << 8) | patch of the library actually loaded. */
ATTN_API uint32_t attn_version(void);
/* The version of the library actually loaded as a string, e.g. "1.11.0". */
ATTN_API const char *attn_version_string(void);

/* ---------------------------------------------------------------- dtypes */

typedef enum attn_dtype {
    ATTN_DTYPE_F32 = 0,
    ATTN_DTYPE_F16 = 1,  /* IEEE binary16 */
    ATTN_DTYPE_BF16 = 2, /* bfloat16: the upper half of a binary32 */
    ATTN_DTYPE_BOOL = 3, /* 1 byte, nonzero = true (masks only) */
    /* K/V caches only; see "Quantized K/V caches" below. */
    ATTN_DTYPE_Q8_0 = 4,    /* ggml block_q8_0: f16 d, 32 x int8 q; x = q*d */
    ATTN_DTYPE_Q4_0 = 5,    /* ggml block_q4_0: f16 d, 16 bytes; x = (nibble-8)*d */
    ATTN_DTYPE_FP8_E4M3 = 6, /* OCP E4M3 "fn" (no inf, S.1111.111 NaN, max 448) x scale */
    /* since 1.5 */
    ATTN_DTYPE_FP8_E5M2 = 7, /* OCP E5M2 (binary16's top byte: inf, NaN, max 57344) x scale */
    /* since 1.12: OpenVINO's asymmetric caches, records of a group of values
       each: f32 scale, f32 zero point, the codes; x = (code - zp) * scale */
    ATTN_DTYPE_U8_ASYM = 8, /* one byte per code */
    ATTN_DTYPE_U4_ASYM = 9  /* two codes per byte */
} attn_dtype;

/*
 * Quantized K/V caches
 * --------------------
 * k and v (never q, out, mask or bias) may also be stored as:
 *
 *   ATTN_DTYPE_Q8_0   blocks of 32 consecutive values along the row (head_dim
 *                     for k, v_dim for v), 34 bytes each, as llama.cpp stores
 *                     them: an IEEE binary16 scale d, then 32 int8 q;
 *                     value t of the block is q[t] * d.
 *   ATTN_DTYPE_Q4_0   blocks of 32, 18 bytes: binary16 d, then 16 bytes; byte
 *                     j holds value j in its low nibble and value j + 16 in
 *                     its high nibble; value = (nibble - 8) * d.
 *   ATTN_DTYPE_FP8_E4M3  one byte per value, E4M3 "fn" (bias 7, no
 *                     infinities, S.1111.111 is NaN, largest finite 448, as
 *                     vLLM's fp8 KV cache); value = e4m3 * k_scale for k,
 *                     e4m3 * v_scale for v (attn_options, one scale per
 *                     call for all heads), or since 1.6 times a scale per
 *                     row (attn_options.k_scales / v_scales), since 1.8
 *                     per group of channels in a row (k_scale_group).
 *   ATTN_DTYPE_FP8_E5M2  (since 1.5) one byte per value, OCP E5M2 (bias 15,
 *                     2 mantissa bits, subnormals, S.11111.00 is +-inf,
 *                     S.11111.xx with xx != 0 is NaN, largest finite 57344):
 *                     the byte is the upper half of an IEEE binary16, so
 *                     0x3C is 1.0, 0x40 is 2.0 (vLLM's and SGLang's
 *                     fp8_e5m2 caches); scaled like E4M3.
 *
 *   ATTN_DTYPE_U8_ASYM (since 1.12) asymmetric codes with a scale and a zero
 *                     point per row and group of g channels, as OpenVINO's
 *                     CPU plugin stores its u8 K/V caches: a row of n values
 *                     is n / g records, each an IEEE binary32 scale, a
 *                     binary32 zero point zp (native byte order), then g
 *                     bytes of codes c in [0, 255]; value t of the record is
 *                     fl32(fl32(c[t] - zp) * scale). g is k_scale_group
 *                     for k and v_scale_group for v (attn_options), 0
 *                     meaning the whole row (OpenVINO's default group); it
 *                     must divide the row, else ATTN_ERR_SHAPE. The scales
 *                     live in the records: k_scales / v_scales must be NULL
 *                     and k_scale / v_scale 0 or 1, else ATTN_ERR_ARG.
 *   ATTN_DTYPE_U4_ASYM (since 1.12) the same records with 4-bit codes, two
 *                     per byte: value 2i in the HIGH nibble of byte i, value
 *                     2i + 1 in its low nibble (OpenVINO's u4 order); a
 *                     record is 8 + g / 2 bytes, g even.
 *
 * For Q8_0 and Q4_0 the unit of every stride of that tensor (batch, head,
 * row) is ONE BLOCK (34 resp. 18 bytes): a row holds head_dim / 32 blocks,
 * a cache of [kv_len][kv_heads][head_dim] rows has row_stride
 * kv_heads * head_dim / 32 blocks. head_dim (for k) and v_dim (for v) must
 * then be multiples of 32, else ATTN_ERR_SHAPE. For FP8 the unit is the
 * element (one byte), as for every other dtype. For U8_ASYM and U4_ASYM the
 * unit is the BYTE: a row of n values spans n / g * (8 + g) bytes (U4:
 * n / g * (8 + g / 2)), so OpenVINO's paged cache [num_blocks][kv_heads]
 * [block_size][n / g * (8 + g)] has row_stride n / g * (8 + g), head_stride
 * block_size times that. No alignment is required.
 *
 * The values are decoded inside the kernels' loads, never copied out, and
 * all arithmetic stays f32. Q8_0 and Q4_0 decode exactly (the products
 * q*d have at most 19 significant bits); an E4M3 or E5M2 value is exact in f32 and
 * its scale is applied once: k_scale is folded into the score scale
 * (s = (q . fp8) * fl32(scale * k_scale), which must be a normal float:
 * ATTN_ERR_ARG otherwise), v_scale multiplies the normalised output row
 * (one more rounding than for other dtypes). NaN and infinite decoded values (a NaN E4M3 byte, an f16 scale that
 * is inf or NaN, an E5M2 inf or NaN byte) propagate as described under "Non-finite inputs".
 * The asymmetric formats' values are decoded into f32 before the kernels
 * (two roundings each, as stated above; a NaN or infinite scale or zero
 * point propagates like a non-finite value): the call is the F32 call on
 * those values, within the F32 bound. attn_backward takes none of them.
 * attn_quantize() below writes every format.
 */

/* ---------------------------------------------------------------- dispatch */

typedef enum attn_isa {
    ATTN_ISA_AUTO = 0,
    ATTN_ISA_SCALAR = 1,
    ATTN_ISA_AVX2 = 2,   /* AVX2 + FMA + F16C */
    ATTN_ISA_AVX512 = 3, /* AVX-512 F + BW + DQ + VL */
    ATTN_ISA_NEON = 4,
    ATTN_ISA_SVE = 5,
    ATTN_ISA_AMX = 6 /* since 1.11: AVX-512 with AMX-TILE, -BF16, -INT8 tiles for
                        the bf16 and int8 modes (see attn_precision), where the
                        OS grants the tile state (attn_isa_support) */
} attn_isa;

/*
 * The kernels are chosen once, at the first call that needs them: the best
 * ISA this build and CPU support, or the one named by the environment
 * variable ATTN_ISA (scalar|avx2|avx512|amx|neon|sve) when it is available (an
 * unavailable or unknown name falls back to the best available). "Best" is
 * by measured speed, not width: the widest available table, except where a
 * narrower one was measured faster on that CPU family (AVX-512 is not the
 * default on AMD Zen 4, which runs 512-bit vectors on 256-bit units: AVX2
 * is). The choice depends on the CPU's identity only.
 */
/* The ISA operations use now. */
ATTN_API attn_isa attn_isa_active(void);
/* 1 when `isa` is compiled into this library and supported by this CPU
 * (ATTN_ISA_AUTO and ATTN_ISA_SCALAR: always 1), else 0. */
ATTN_API int attn_isa_available(attn_isa isa);
/* Since 1.11: 1 when `isa`'s kernels are compiled into this library,
 * whether or not this CPU runs them (ATTN_ISA_AUTO and ATTN_ISA_SCALAR:
 * always 1; another architecture's ISA, one configured off, or a value
 * outside attn_isa: 0). */
ATTN_API int attn_isa_built(attn_isa isa);
/* attn_isa_support's bits. */
#define ATTN_SUPPORT_BUILT 1u /* its kernels are compiled in (attn_isa_built) */
#define ATTN_SUPPORT_CPU 2u   /* this CPU has its instructions */
#define ATTN_SUPPORT_OS 4u    /* the OS lets this process use their register state */
/* Since 1.11: what stands between `isa` and this process, as ATTN_SUPPORT_*
 * bits (ATTN_ISA_AUTO and ATTN_ISA_SCALAR: all three; an unknown value: 0).
 * attn_isa_available is 1 when all three are set, and those of the ISA it
 * builds on (AMX's is AVX-512). OS is set wherever CPU is, except for AMX:
 * Linux grants a process the tile data state only on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which the library makes once,
 * at its first call; a refusal (an old kernel, a seccomp policy) leaves
 * CPU without OS, and the AVX-512 table serves. */
ATTN_API unsigned attn_isa_support(attn_isa isa);
/* Since 1.11: how this library was built, one line for bug reports (as
 * openblas_get_config): its version, the ISA tables compiled in, the
 * compiler and meson's buildtype. A static string, never NULL. */
ATTN_API const char *attn_build_config(void);
/* Make `isa` (ATTN_ISA_AUTO: the best available) the active ISA for every
 * later call in the process. ATTN_ERR_UNSUPPORTED when it is not available,
 * ATTN_ERR_ARG for an unknown value; the active ISA is then unchanged. Safe
 * while other threads compute: a call in flight finishes with the kernels it
 * started with. */
ATTN_API attn_status attn_isa_select(attn_isa isa);
/* "auto", "scalar", "avx2", "avx512", "neon", "sve", "amx"; "unknown" otherwise. */
ATTN_API const char *attn_isa_name(attn_isa isa);
/* Since 1.2: 1 when the active ISA has dot-product kernels for `precision`
 * (attn_precision, see attn_options) with k of dtype `k_dtype`, so that the
 * mode runs faster than the default there; 0 when such a call computes as
 * in ATTN_PRECISION_DEFAULT (or for an unknown precision or dtype). */
ATTN_API int attn_precision_native(int64_t precision, int32_t k_dtype);

/* ---------------------------------------------------------------- types */

typedef struct attn_shape {
    int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
} attn_shape;

typedef struct attn_tensor {
    void *data;
    int32_t dtype;                                 /* attn_dtype */
    int64_t batch_stride, head_stride, row_stride; /* elements */
} attn_tensor;

/*
 * Thread-pool hook. When attn_options.parallel_for is set, an operation calls
 * it exactly once with `count` independent tasks and returns after it
 * returns; it must run task(task_ctx, i) once for every i in [0, count), on
 * any threads, in any order, and return only when all have finished. Tasks
 * never call back into the pool.
 */
typedef void (*attn_task_fn)(void *task_ctx, size_t index);
typedef void (*attn_parallel_for_fn)(void *pool_ctx, attn_task_fn task,
                                     void *task_ctx, size_t count);

#define ATTN_CAUSAL 1u
/* Since 1.11: every sequence reads row 0 of block_table (block_table_stride
   must then be 0). Without it, a block_table_stride of 0 with batch > 1 is
   ATTN_ERR_ARG: a stride left unset would give every sequence the pages of
   sequence 0 (see "Paged K/V"). */
#define ATTN_SHARED_BLOCK_TABLE 2u

/*
 * Arithmetic precision (attn_options.precision, since 1.2): what the
 * products of Q.K^T and P.V may be rounded to. A mode permits rounding; it
 * does not require it: where this CPU has no dot-product kernel for a mode
 * (see attn_precision_native) the call computes as in ATTN_PRECISION_DEFAULT,
 * which is within every mode's bound. Read by attn_forward, attn_scores,
 * attn_weights and attn_backward (which takes the default and, since 1.10,
 * the bf16 mode; ATTN_PRECISION_INT8 is ATTN_ERR_UNSUPPORTED there); the
 * other operations multiply no Q by K and ignore it. Any other value is
 * ATTN_ERR_ARG. Notation: d = head_dim,
 * u = 2^-24 (f32), g(n) = n u / (1 - n u), |.| element-wise absolute values,
 * T = 2^-126 (the least normal f32); s is a score before softcap, bias, ALiBi
 * and masks, s* its exact value from the inputs as given.
 *
 *  ATTN_PRECISION_DEFAULT (0): f32 products of the inputs as given, f32
 *    accumulation: |s - s*| <= g(d + 1) |scale| sum_t |q_t k_t| (+ gradual
 *    underflow, below 2^-140 relative). One exception, exact in its products:
 *    when q and k are both BF16, QK^T may run on bf16 dot-product units
 *    (AVX512_BF16, AArch64 BF16), which flush subnormal inputs and results
 *    to zero; the bound then gains |scale| T (sum_t max(|q_t|, |k_t|) + d):
 *    a product with a subnormal factor (|x| < T) counts as 0. (AArch64's
 *    BFDOT and BFMMLA also round their sums to odd, within 2u instead of
 *    u; the kernels chain them so that no product is rounded more often
 *    than g(d + 1) counts: src/arm/dot_neon.c.)
 *  ATTN_PRECISION_BF16 (1): q, k, the softmax weights p (exp(s - m), before
 *    normalisation) and v are rounded to bfloat16 (round to nearest even;
 *    BF16 inputs as given), their products summed in f32; softmax
 *    statistics, normalisation and the output stay f32. attn_backward
 *    rounds q and k of the scores it recomputes (the score bound below),
 *    dS and k of dQ = scale dS K, dS and q of dK = scale dS^T Q, and P and
 *    dO of dV = P^T dO (since 1.10.1): each gradient is within its
 *    default-mode bound with that score error in place of the f32 one,
 *    and gains its products' rounding: dq_t |scale| sum_j (B |dS_ij k_jt|
 *    + T (|dS_ij| + |k_jt| + 1)), dk_jt |scale| sum_i (B |dS_ij q_it| + T
 *    (|dS_ij| + |q_it| + 1)), dv_jt sum_i (B |P_ij dO_it| + T (|P_ij| +
 *    |dO_it| + 1)) (dS and P rounded, a product with a subnormal factor
 *    counting as 0, a subnormal sum flushed to 0; tests/tolerance.h,
 *    "backward"). dP and D take f32 products.
 *    Where out came from a bf16-mode forward, O = sum_j p_j
 *    v_j / l already holds the rounding below, and D = rowsum(dO * O)
 *    with it: a row with one visible key, whose dP - D is 0 from a
 *    default-mode out, is then off by up to b sum_t |dO_t v_t| (v's
 *    rounding) and the f32 sums'. With b = 2^-8 and
 *    B = 2b + b^2 (two rounded factors):
 *      |s - s*| <= |scale| ((B + g(d + 1)(1 + B)) sum_t |q_t k_t| + T (sum_t max(|q_t|, |k_t|) + d))
 *    and the output row o = sum_j p_j v_j / l gains B sum_j p_j |v_j| / l
 *    (<= B max_j |v_j|) beyond what the score error does through the
 *    softmax. Q8_0 and Q4_0 v are decoded, then rounded as v is (since
 *    1.11; on tables with bf16 dot products, AVX-512 BF16, AMX, NEON and
 *    SVE with BF16, the others read them exactly); Q8_0, Q4_0 and FP8 k,
 *    and FP8 v, are read as in the default mode. U8_ASYM and U4_ASYM k
 *    and v (1.12) are decoded into f32 first, then rounded as F32 k and v
 *    are; the int8 mode computes them as the default mode does.
 *    Matrix engine (since 1.11): on the AMX table (ATTN_ISA_AMX: x86 CPUs
 *    with AMX whose OS grants the process the tile data state, which the
 *    library requests itself at its first call, attn_isa_support; where it
 *    is refused, the AVX-512 table serves), Q.K^T of 8 or more query rows
 *    per block (every operation that computes scores, the backward's
 *    recomputed ones included), the forward's P.V for F32, F16 and BF16 v
 *    and the backward's dQ, dK and dV products run on AMX tiles
 *    (tdpbf16ps): the same rounded operands, the f32 additions in another
 *    order, subnormal inputs and sums flushed to zero, all within the
 *    bound above; so does the default mode's exception for BF16 q and k
 *    (exact products). The tile configuration is set and released within
 *    each kernel call, on whatever thread runs it.
 *  ATTN_PRECISION_INT8 (2): for Q8_0 and Q4_0 k, each 32-value block of a
 *    query row is quantized on the fly: m = max |q_t| over the block,
 *    dq = fl(m / 127), q_t = dq n_t with n_t = rne(fl(q_t fl(1 / dq))) in
 *    [-127, 127] (ggml's q8_0 rule with round-to-nearest-even); the integer
 *    dot of n with the block's integers is exact (int32); the block scales
 *    are applied in f32. A block with dq < T counts as 0; a non-finite q
 *    value makes its row's scores NaN. With q^_t = dq n_t:
 *      |s - s*| <= |scale| (sum_blocks (dq / 2)(1 + 2^-15) sum_t |k_t| + g(d + 3) sum_t |q^_t k_t| + 127 T sum_t |k_t|)
 *    (dq / 2 <= max |q_t| / 254: half a quantization step per value).
 *    On the AMX table the integer dots run on AMX tiles (tdpbsud, since
 *    1.11): the same integers, then the same f32 operations in the same
 *    order, so the scores equal the AVX-512 table's bit for bit.
 *    Other k dtypes are computed as in the default mode. P.V of Q8_0 and
 *    Q4_0 v is the bf16 mode's (since 1.11): p and the decoded v rounded to
 *    bfloat16, products summed in f32 on the bf16 dot units (AVX-512 BF16,
 *    AMX, NEON and SVE BF16), so the output row gains B sum_j p_j |v_j| / l
 *    as stated there; tables without them compute it as in the default
 *    mode, and so are other v dtypes.
 * Row statistics (lse, max_score, entropy) are those of the scores the
 * mode computed. Non-finite inputs stay non-finite, but a rounded mode may
 * turn an infinity times a tiny value into NaN (bf16 rounds |x| <= 2^-134
 * to 0, and vdpbf16ps and BFDOT flush bf16 subnormals; inf * 0 is NaN)
 * where the default mode gives the infinity; bfloat16 overflows for
 * |x| >= 2^128 - 2^119, which f32 holds: such a q, k, p or v becomes an
 * infinity.
 */
typedef enum attn_precision {
    ATTN_PRECISION_DEFAULT = 0,
    ATTN_PRECISION_BF16 = 1,
    ATTN_PRECISION_INT8 = 2
} attn_precision;

typedef struct attn_options {
    uint32_t struct_size;              /* sizeof(attn_options) the caller was built with */
    uint32_t flags;                    /* ATTN_CAUSAL, ATTN_SHARED_BLOCK_TABLE; other
                                          bits: ATTN_ERR_ARG */
    float scale;                       /* 0: 1/sqrt(head_dim); must be finite */
    float softcap;                     /* 0: off; else finite, 1/softcap finite */
    int64_t window;                    /* 0: off; else > 0 (see masks above) */
    const int32_t *q_lens;             /* [batch] valid query lengths in [0, q_len], or NULL */
    const int32_t *kv_lens;            /* [batch] valid key lengths in [0, kv_len], or NULL */
    const attn_tensor *mask;           /* BOOL [b][q_head][q][k], or NULL */
    const attn_tensor *bias;           /* F32 [b][q_head][q][k], or NULL; since 1.11
                                          also F16 or BF16 (an engine's additive mask of
                                          0 and -inf in the model's dtype), read in place
                                          and widened exactly: the bits of an F32 bias
                                          holding the same values */
    attn_parallel_for_fn parallel_for; /* NULL: run on the calling thread */
    void *parallel_ctx;                /* first argument of parallel_for */
    /* since 1.1 */
    int64_t window_right;              /* 0: off; else > 0 (see masks above) */
    const attn_tensor *sinks;          /* F32 [b][q_head]: sink logit per row (see
                                          Sinks); batch_stride 0: per head only;
                                          row_stride unused; or NULL */
    const attn_tensor *alibi_slopes;   /* F32 [b][q_head]: ALiBi slope (see how one
                                          score is formed), laid out like sinks;
                                          or NULL */
    /* since 1.1 (see "Offset and packed batches" and "Paged K/V" above) */
    const int32_t *q_offsets;          /* [batch] first query row of each sequence, or NULL */
    const int32_t *kv_offsets;         /* [batch] first key position of each sequence, or NULL */
    const int32_t *block_table;        /* pool block of each page of each sequence, or NULL */
    int64_t block_table_stride;        /* int32 entries between rows of block_table,
                                          >= 1 with batch > 1 (0: ATTN_SHARED_BLOCK_TABLE) */
    int64_t block_size;                /* positions per pool block: >= 1 with a block_table,
                                          0 without one */
    int64_t num_blocks;                /* blocks in the pool: >= 1 with a block_table, 0
                                          without one */
    /* 1.1: shards and split-KV */
    const int64_t *q_pos;              /* [batch] position of query row 0, in [0,
                                          ATTN_MAX_POSITION], or NULL (see masks above) */
    const int64_t *k_pos;              /* [batch] position of key row 0, likewise */
    void *workspace;                   /* attn_forward's split-KV scratch, or NULL */
    size_t workspace_size;             /* bytes at workspace */
    int32_t kv_splits;                 /* attn_forward: 0 automatic, 1 never split,
                                          N >= 2 about N key chunks (see
                                          attn_forward_workspace_size) */
    /* since 1.1: dequantisation scales of FP8 (E4M3, E5M2) k and v (0: 1). Every
       operation requires each to be 0 or a positive normal float
       (ATTN_ERR_ARG); a value other than 0 or 1 with a k (v) of another
       dtype is ATTN_ERR_ARG too, checked by the operations that read k (v). */
    float k_scale, v_scale;
    /* since 1.2. Bytes 188..191 stay padding for ever: a 1.1 caller's
       struct_size (192) covers them, uninitialised. */
    int64_t precision;                 /* attn_precision (see above); 0: default */
    /* since 1.3: the draft-tree mask of speculative decoding (EAGLE, Medusa).
       int32 [batch][q_len], indexed like the row statistics (the query at
       tensor row r of sequence b, r = q_offsets[b] + i or i, is entry
       b * q_len + r): query i's parent, a query index of its sequence in
       [-1, i - 1]; -1 hangs the token off the prefix. Query i sees every key
       before the draft, its own key and its ancestors' (see Masks), combined
       with every other mask rule, sinks, ALiBi and softcap; the other draft
       keys are masked like any hidden key. Needs Lq_b <= Lk_b for every b,
       else (or for a parent outside [-1, i - 1]) ATTN_ERR_ARG; entries of
       rows past Lq_b are not read. A chain (parent i - 1) is the causal
       mask over the draft. Read by every operation on an attention problem
       (the backward too); NULL: no tree. */
    const int32_t *tree_parents;
    /* since 1.4: int32 [batch] keys each sequence shares with the one
       before it (see "Shared prefixes"), or NULL. */
    const int32_t *shared_prefix;
    /* since 1.6: FP8 scales per key row (per token, per KV head, or both),
       beside an FP8 (E4M3, E5M2) k (v) cache, or NULL. An F32 view laid out
       like k (v) with one value per row: the scale of key j of sequence b,
       KV head h, is read where that key's row of k (v) is read, through the
       same layout (kv_offsets, packed, shared prefixes; with a block_table
       the view covers the pool, [num_blocks][kv_heads][block_size], and the
       table maps key j to its slot as for k). Strides are in elements and
       may be 0: row_stride 0 (and batch_stride 0) is one scale per KV head,
       head_stride 0 one per token for every head. Its effect: key j's score
       is (q . fp8_j) * fl32(scale * k_scales_j) (so equal scales give the
       result of k_scale bit for bit), and value row j enters the output as
       fl32(p_j * v_scales_j) * fp8_j, before the division by the row's sum
       of weights (the weights, lse and entropy are those of the scores).
       The scales are data, not checked: a NaN or infinite scale makes its
       rows' results NaN or infinite as such a value in the cache would.
       Requires an FP8 k (v) and k_scale (v_scale) 0, else ATTN_ERR_ARG,
       checked by the operations that read k (v): scores, weights and
       attn_forward read k_scales, attn_forward v_scales. attn_cache_append
       writes them: each new row's scale is its largest magnitude over the
       format's largest finite value (448 for E4M3, 57344 for E5M2), or 1
       when that quotient is not a positive normal float (a row of zeros),
       stored in the view at the row's slot, and the row is encoded as
       with that k_scale; a non-finite new value is ATTN_ERR_ARG (nothing
       written), and the view is an output there (no stride 0 where it has
       more than one row: ATTN_ERR_STRIDE). attn_backward takes no FP8
       cache at all. Example: a vLLM-style
       paged E4M3 cache [num_blocks][block_size][kv_heads][d] with one f32
       scale per token and head beside it, float ks[num_blocks][block_size]
       [kv_heads]: k_scales = {ks, ATTN_DTYPE_F32, block_size * kv_heads,
       1, kv_heads} (batch_stride = one pool block, head_stride, row_stride
       = one slot); one scale per KV head, float kh[kv_heads]: {kh,
       ATTN_DTYPE_F32, 0, 1, 0}. */
    const attn_tensor *k_scales;
    const attn_tensor *v_scales;
    /* since 1.7: top-k sparse attention (DeepSeek V3.2's selected keys; see
       "Top-k sparse attention" below). topk_indices: int32
       [batch][q_len][topk], the list of the query at tensor row r of
       sequence b (r = q_offsets[b] + i, or i) at (b * q_len + r) * topk:
       the keys it may see, as key indices of its sequence in [0, Lk_b),
       or -1 for an unused slot. topk: entries per list, >= 0. NULL and 0:
       dense attention. */
    const int32_t *topk_indices;
    int64_t topk;
    /* since 1.8: FP8 scales per group of channels inside a row (DeepSeek
       V3.2's 128-channel groups; ONNX Runtime's per-channel scales are group 1
       with row_stride 0), or 0: one scale per row (1.6). With k_scale_group =
       g > 0, k_scales (required, else ATTN_ERR_ARG) holds head_dim / g
       consecutive f32 per key row where the 1.6 layout holds one (same
       strides, same paging): the scale of channels [c g, c g + g) of key j is
       that row's position + c. head_dim % g != 0 is ATTN_ERR_SHAPE. The call
       is attention over the values fp8_ji * s_j(i/g) (scale as given,
       k_scale 0): key j's score is within gamma(head_dim + 4) * sum_i |f_i
       q_i k_ji| of sum_i f_i q_i k_ji, k_ji the decoded value, f_i =
       fl32(scale * s_j(i/g)), gamma(n) = n u / (1 - n u), u = 2^-24 (the F32
       bound's gamma(head_dim + 1) with three more roundings), plus terms
       below the normal range (tests/tolerance.h); the weighted sum's term
       of each value gains one relative u (its weight, or the value, times
       its scale rounded once). (1.8 stated the F32 bound of the values
       fl32(fp8 * s), each within u of fp8 * s; since 1.9.1 attn_forward
       reads groups of 64 channels or more in place, 8 groups per row at
       most: one kernel call per group and the partial scores summed, each
       byte read once; since 1.10.6, where q_len (with q_offsets: the
       longest sequence's) times q_heads / kv_heads is at most 8 (decode),
       rows of two groups or more of a multiple of 16 channels
       are read by kernels that multiply each value by its scale as they
       load it, the bits of the decoded values' call; smaller groups, top-k
       lists, the bf16 and int8 modes, attn_scores and attn_weights decode
       the rows into scratch first.) The
       same bits for every layout of the same cache (dense, paged, packed).
       v_scale_group: the same for v (v_scales, v_dim). The scales may lie inside the cache's
       own rows: DeepSeek V3.2's 656-byte latent rows (512 E4M3, 4 f32 scales,
       64 bf16 rope dims), uint8_t *c, row t at c + 656 t: k = {c, FP8_E4M3,
       .., row_stride 656} with head_dim 512 and k_scales = {(float *)(c +
       512), F32, .., row_stride 164} (656 / 4), k_scale_group 128. (The bf16
       rope dims join such a k as its k_tail, 1.9.)
       attn_cache_append writes group scales as it writes row scales, each over
       its group's largest magnitude, into a view of their own (scales inside
       the cache's rows share its byte range: ATTN_ERR_STRIDE; attn_quantize,
       one call per group, encodes those rows). Every other operation that
       reads k (v) honours them; attn_backward takes no FP8 cache. */
    int64_t k_scale_group;
    int64_t v_scale_group;
    /* since 1.9: a key row in two parts of different dtypes (DeepSeek V3.2's
       FP8 latent with its 64 bf16 rope dims; an MLA cache whose rope part
       k_pe lies in a tensor of its own). With k_tail_dim = n > 0, k holds
       the first head_dim - n values of every key row and k_tail the last n:
       an F32, F16 or BF16 view laid out like k (the same batch entries,
       heads and positions, through the same kv_offsets, shared prefixes and
       block table: with one it covers the pool, [num_blocks][kv_heads]
       [block_size] rows), n values per row. q rows still have head_dim
       values; k's row rules (whole Q8_0/Q4_0 blocks, FP8 scale groups,
       its byte range) apply to its head_dim - n. The call is the call on an
       F32 k holding each key's head_dim values (k's decoded as its dtype
       says, then the tail's): within the F32 bound of those values (an FP8
       k's: the bound of scale groups above, the tail's columns with f_i =
       scale), not always its bits (attn_forward reads the two parts in
       place with the kernels of their dtypes and sums the partial scores,
       the other operations decode the rows into scratch). An FP8 k then takes its scales as groups (k_scales with
       k_scale_group > 0; one scale per row is the group head_dim - n), else
       ATTN_ERR_ARG. n >= head_dim is ATTN_ERR_SHAPE; k_tail without n > 0,
       or n > 0 without k_tail, is ATTN_ERR_ARG; v is not affected (MLA's v
       is k's latent: v = k's view with v_dim <= head_dim - n). Read by
       attn_forward, attn_scores and attn_weights; attn_backward and
       attn_cache_append refuse a tail (ATTN_ERR_UNSUPPORTED: append the two
       parts as two caches, the tail with head_dim n). DeepSeek V3.2's
       656-byte rows (see k_scale_group): head_dim 576, k = {c, FP8_E4M3,
       .., row_stride 656}, k_scales as there with k_scale_group 128, k_tail
       = {(uint16_t *)(c + 528), BF16, .., row_stride 328}, k_tail_dim 64,
       v = {c, FP8_E4M3, .., row_stride 656} with v_dim 512 and v_scales =
       k_scales, v_scale_group 128. */
    const attn_tensor *k_tail;
    int64_t k_tail_dim;
    /* since 1.11: [batch][kv_len] position of each key slot, or NULL (see
       "Positions per key slot" under Masks): entry b * kv_len + p for slot
       p of sequence b (p = j, or kv_offsets[b] + j), negative for an empty
       slot; not with k_pos. */
    const int64_t *k_positions;
} attn_options;

/*
 * Initialiser with every default:  attn_options o = ATTN_OPTIONS_INIT;
 * The library reads only the fields the caller's struct_size covers (the
 * rest take their defaults), so binaries built against an older, shorter
 * attn_options keep working when fields are appended. A struct_size smaller
 * than the first two fields is ATTN_ERR_VERSION. Since 1.11 a struct_size
 * larger than this library's sizeof(attn_options) (a program built against
 * a newer attn.h) is accepted when every byte past this library's fields is
 * zero, i.e. the newer fields are left at their defaults, and is at most
 * 4096; otherwise it is ATTN_ERR_VERSION (before 1.11, any larger size was).
 * attn_grads follows the same rule.
 */
#define ATTN_OPTIONS_INIT \
    { (uint32_t)sizeof(attn_options), 0u, 0.0f, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/*
 * Optional per-row outputs, each float[batch][q_heads][q_len] contiguous,
 * each may be NULL: lse = log sum exp of the row's final scores,
 * max_score = the largest final score, entropy = -sum p log p in nats
 * (in [0, log n] for n visible keys). Fully masked rows: -inf, -inf, 0.
 * With sinks the sink is one more entry of all three (see Sinks).
 */
typedef struct attn_row_stats {
    float *lse, *max_score, *entropy;
} attn_row_stats;

/* ---------------------------------------------------------------- operations */

/*
 * Final scores: scores[b][h][i][j] = s as defined above, -inf where masked.
 * `opt` may be NULL (all defaults). scores must be F32.
 */
ATTN_API attn_status attn_scores(const attn_shape *shape, const attn_options *opt,
                                 const attn_tensor *q, const attn_tensor *k,
                                 const attn_tensor *scores);

/*
 * Apply opt's softcap, bias, ALiBi and masks, in that order, in place to a score
 * table the caller computed (already scaled: opt->scale is not used).
 * shape->head_dim and v_dim are not used but must be valid. This is the
 * only operation that reads `scores` as input.
 */
ATTN_API attn_status attn_mask_apply(const attn_shape *shape, const attn_options *opt,
                                     const attn_tensor *scores);

/*
 * In-place log-sum-exp softmax of `rows` rows of `cols` floats, row i at
 * x + i * row_stride (row_stride >= cols). A row of only -inf becomes all
 * zeros. lse, when not NULL, receives float[rows]: each row's log-sum-exp
 * (-inf for such rows); it must not overlap x. A row holding NaN or +inf
 * becomes all NaN (lse NaN). Runs on the calling thread.
 */
ATTN_API attn_status attn_softmax(float *x, int64_t rows, int64_t cols,
                                  int64_t row_stride, float *lse);

/* Attention weights: the row softmax of attn_scores (with sinks, the sink is
   one more entry of it: see Sinks), plus optional stats. */
ATTN_API attn_status attn_weights(const attn_shape *shape, const attn_options *opt,
                                  const attn_tensor *q, const attn_tensor *k,
                                  const attn_tensor *weights, const attn_row_stats *stats);

/*
 * out = softmax(S) . V, fused: tiled with an online softmax, the score
 * table is never materialised.
 *
 * out is F32, F16 or BF16 (the model's dtype, written directly; any other
 * dtype is ATTN_ERR_ARG, nothing written). Accumulation, normalisation and
 * the row statistics (lse, max_score, entropy) are f32 whatever out's
 * dtype: each row is computed as an F32 out would hold it, bit for bit on
 * the same ISA, and each element is then rounded once, to nearest (ties to
 * even), into the out dtype; the stats are the F32 call's bits. An F16 or
 * BF16 element is therefore within the F32 result's error bound E plus one
 * rounding: |h - o| <= E + u |o| (exactly, (1 + u) E + u |o|; o the exact
 * value), u = 2^-11 for F16 and 2^-8 for BF16. Below the format's normal
 * range (2^-14 for F16, 2^-126 for BF16) the rounding is absolute instead,
 * at most half the subnormal spacing (2^-25, 2^-134): subnormals are kept,
 * never flushed. F16 overflows as IEEE says: an element whose magnitude
 * rounds to 2^16 or more (f32 value >= 65520 in magnitude) is +-inf (BF16
 * has f32's range). NaN stays NaN (quiet, sign kept), +-inf stays +-inf,
 * and rows without a visible key are +0.
 */
ATTN_API attn_status attn_forward(const attn_shape *shape, const attn_options *opt,
                                  const attn_tensor *q, const attn_tensor *k,
                                  const attn_tensor *v, const attn_tensor *out,
                                  const attn_row_stats *stats);

/*
 * Split-KV and its workspace. When a sequence gives attn_forward few
 * tasks (decode, MQA, short query tails:
 * kv_heads * ceil(Lq_b * q_heads / kv_heads / 64) < 64,
 * counting blocks of 64 query rows of one KV head), it can cut the keys of
 * each of its tasks into chunks that run as separate tasks, each leaving
 * a partial result (unnormalised output, running max and sum) in the
 * caller's workspace; the last chunk of a task to finish merges them in
 * chunk order, with the same rescaling as the online softmax. A sequence's
 * chunks depend on its own Lq_b and Lk_b, the head counts and kv_splits
 * only (multiples of 256 keys counted from its first key, at least 1024
 * per chunk when automatic, or with top-k lists at most topk / 1024 chunks;
 * kv_splits >= 2 cuts each sequence's Lk_b keys into about that many), so results stay bitwise identical for any thread
 * count and parallel_for; they may differ in rounding from the unsplit call
 * (same error bound: the merge is one more rescale).
 *
 * Batch invariance. A sequence's output rows and row statistics are
 * bitwise the same whatever else the call holds: alone or in a batch of
 * any size and composition, padded (q_lens, kv_lens), packed or
 * left-padded (q_offsets, kv_offsets) or with paged K/V, on any thread
 * count, provided the calls agree on the options and each gets the
 * workspace attn_forward_workspace_size asks for (or none gets one). Its
 * keys are visited in blocks counted from its first key, and no kernel's
 * arithmetic on a key depends on where a page boundary cuts a run of keys.
 * The bf16 mode's P.V (ATTN_PRECISION_BF16, 8 or more query rows per KV
 * head) works on runs of keys: on AVX-512 it pairs keys 2m, 2m + 1 of the
 * sequence, so paged K/V gives the contiguous bits when pages start at even
 * keys (an even block_size and even kv_offsets); on NEON and SVE it sums
 * each run in a chain of its own (to keep BFDOT's rounding within the
 * bound), and on AMX each tdpbf16ps sums 16 key pairs of a run with a
 * rounding of its own (on a Xeon, 4 in 10 sums differ in the last bit
 * from the SDM's chain of f32 additions), so paged and contiguous K/V may
 * differ in rounding there. The
 * precision mode, the ISA, the dtypes and kv_splits are options: results
 * differ between them.
 *
 * attn_forward_workspace_size sets *bytes to the workspace attn_forward with
 * this shape and options needs to split, to attend each group's shared
 * prefix once (see "Shared prefixes": the prefix states follow the split's
 * bytes) and to keep wide rows' accumulators (below), or 0 when no
 * sequence would split, no group shares keys and the rows are not wide;
 * it validates the shape and the options as attn_forward does (not the
 * tensors). The size depends on the shape, kv_splits, the lengths
 * (q_lens, kv_lens: the most chunks one sequence takes) and shared_prefix,
 * not on the ISA.
 * Wide rows (since 1.11): where head_dim + v_dim, each rounded up to a
 * multiple of 16, exceed 256 (MLA's 576/512, head_dim 256) and no top-k
 * lists are given, the task stack holds fewer query rows beside their
 * output accumulators than a block takes; the workspace then holds the
 * accumulators (about batch * q_heads * q_len * v_dim * 4 bytes, times the
 * chunks of a split), so a block has the ISA's full height and K and V are
 * read fewer times (MLA decode: 2 blocks of 64 heads instead of 6 of 25).
 * Rows are grouped into blocks differently with and without that space,
 * which may change their rounding (never their bound): the same
 * workspace gives the same bits for every out dtype and batch.
 * attn_forward then splits when opt->workspace_size >= that size;
 * with kv_splits = 0 and no or too small a workspace it runs unsplit (the
 * documented fallback); with kv_splits >= 2 and too small a workspace it is
 * ATTN_ERR_ARG before anything is written. The workspace may hold anything
 * before the call (it is not read before being written), must share no byte
 * with an input or output (ATTN_ERR_STRIDE), needs no alignment, and serves
 * one call at a time.
 */
ATTN_API attn_status attn_forward_workspace_size(const attn_shape *shape,
                                                 const attn_options *opt, size_t *bytes);

/*
 * Since 1.11: the most workspace attn_forward can use with this shape and
 * these options, whatever q_lens, kv_lens, q_offsets, kv_offsets,
 * shared_prefix, the block table, tree_parents and topk_indices hold: it
 * reads none of those arrays, only whether q_lens, kv_lens and
 * shared_prefix are given, so an engine can size its scratch before the
 * step's data exists. *bytes >= what attn_forward_workspace_size gives for
 * any contents of them (a workspace of that size lets every such call
 * split, attend shared prefixes once and keep wide rows' accumulators); 0
 * when no call of this shape can split and its rows are not wide. Checks
 * the shape and the option values as attn_forward does.
 */
ATTN_API attn_status attn_forward_workspace_bound(const attn_shape *shape,
                                                  const attn_options *opt, size_t *bytes);

/* The second source of attn_forward_sources (since 1.13; see there). */
typedef struct attn_kv_source {
    uint32_t struct_size;         /* sizeof(attn_kv_source) the caller was built with */
    uint32_t flags;               /* 0 */
    int64_t kv_len;               /* rows per sequence, >= 1 */
    const attn_tensor *k;         /* [batch][kv_heads][kv_len][head_dim] */
    const attn_tensor *v;         /* [batch][kv_heads][kv_len][v_dim] */
    const int32_t *kv_lens;       /* [batch] valid rows in [0, kv_len], or NULL */
    const int32_t *indices;       /* [batch][q_len][topk] */
    int64_t topk;                 /* entries per list, >= 1 */
    const attn_tensor *k_scales;  /* as attn_options' fields, for this k and v */
    const attn_tensor *v_scales;
    int64_t k_scale_group;
    int64_t v_scale_group;
    const attn_tensor *k_tail;
    int64_t k_tail_dim;
} attn_kv_source;

/*
 * attn_forward_sources computes attention over the keys of two K/V sources
 * in one call (since 1.13). DeepSeek V4 attends, per query, a sliding
 * window over its latest keys and the rows an indexer selected from a
 * compressed cache: keys of two caches, one softmax (SGLang's
 * extra_k_cache and extra_indices). It is attn_forward over k and v (the first source, with every option as attn_forward takes
 * it) together with the keys of a second source, attn_kv_source, that each
 * query row's list names: one softmax over both sources' visible keys, the
 * sink (attn_options.sinks) counted once, lse, max_score and entropy over
 * both, q read once. The result is the call on one cache holding both
 * sources' keys, the first's masks applying to the first's keys, each row
 * seeing of the second's exactly what its list names.
 *
 * The second source. k and v: views like attn_forward's k and v with the
 * shape's batch, kv_heads, head_dim and v_dim and kv_len rows per sequence
 * (any dtype attn_forward reads; they may differ from the first's); a
 * paged pool whose slots lie at one stride (a [num_blocks][block_size]
 * [kv_heads][dim] pool) is read as one long sequence shared by every batch
 * entry: batch_stride 0, kv_len the pool's slots, the lists naming slots.
 * kv_lens: [batch] valid rows in [0, kv_len], or NULL (all kv_len).
 * indices: int32 [batch][q_len][topk], laid out and read as
 * attn_options.topk_indices: entry t of the list of the query at tensor row
 * r of sequence b (r = q_offsets[b] + i, or i) at (b * q_len + r) * topk,
 * a row index j of b in [0, Lk2_b) (Lk2_b: kv_lens[b], or kv_len) or -1 for
 * an unused slot; a set (order and repeats do not matter); the same for
 * every head of the row; lists of rows past Lq_b are not read. k_scales,
 * v_scales, k_scale_group, v_scale_group, k_tail and k_tail_dim: the
 * attn_options fields of those names, for this source's k and v (FP8
 * scales, U8_ASYM/U4_ASYM record groups, a rope tail). The per-call FP8
 * scales (attn_options.k_scale, v_scale) and the precision mode are the
 * options' and apply to both sources' k and v alike.
 *
 * Masks. The options' mask rules and score terms (kv_lens, causal, the
 * windows, mask, bias, ALiBi, tree_parents, q_pos/k_pos, k_positions) and
 * their layout fields (kv_offsets, the block table, shared_prefix,
 * topk_indices) concern the first source; the second source's keys take
 * the score scale and softcap only: a listed key is visible to every head
 * of its row (a row past Lq_b sees nothing). A row that sees no key of
 * either source is fully masked as in attn_forward (zeros, lse -inf; a
 * sink still counts).
 *
 * Split-KV: the second source's keys are cut into chunks as attn_forward
 * cuts its own (see "Split-KV and its workspace": from Lq_b, Lk2_b, the head
 * counts, topk and kv_splits), each a task of its own, the first source's
 * keys going with chunk 0; the workspace that needs is
 * attn_forward_sources_workspace_size's (attn_forward_workspace_size does
 * not know the second source), with attn_forward's fallback and errors
 * (kv_splits >= 2 with too small a workspace: ATTN_ERR_ARG). The workspace
 * holds nothing else: a shared prefix is read by each sequence, wide rows
 * keep their accumulators in the task scratch. Per block of query rows the
 * first source is read as attn_forward reads it, then the union of the
 * block's second-source selections, gathered into tiles as top-k lists are
 * (see "Top-k sparse attention"). The error bound is the forward's over the
 * union of the visible keys, R counting both sources' online steps (the
 * second's: one per tile of gathered keys, at most one per key it reads)
 * and, split, one more for the merge. Deterministic and batch invariant as
 * attn_forward; a split call may differ from an unsplit one in rounding.
 * Errors, before anything is written: extra NULL (ATTN_ERR_NULL);
 * struct_size below the 1.13 size, or above this library's with a nonzero
 * tail (ATTN_ERR_VERSION); flags other than 0, indices NULL, topk < 1 or
 * kv_len < 1 (ATTN_ERR_ARG); an entry < -1 or >= Lk2_b (ATTN_ERR_ARG); the
 * second source's views checked as attn_forward checks k, v and their
 * options' views (dtype, strides, byte ranges, no byte shared with an output
 * or the workspace). The other operations take no second source: attend it
 * with attn_forward and its topk_indices, and attn_merge the two parts (the
 * same result within the bound, each part reading q).
 */

ATTN_API attn_status attn_forward_sources(const attn_shape *shape, const attn_options *opt,
                                          const attn_tensor *q, const attn_tensor *k,
                                          const attn_tensor *v, const attn_kv_source *extra,
                                          const attn_tensor *out, const attn_row_stats *stats);

/*
 * attn_forward_sources_workspace_size sets *bytes to the workspace
 * attn_forward_sources with this shape, options and second source needs to
 * split its keys (since 1.13), or 0 when no sequence would split; it
 * validates the shape, the options and the source's own fields as
 * attn_forward_sources does (not the tensors or lists). The size depends on
 * the shape, kv_splits, q_lens, the source's kv_len, kv_lens and topk, not
 * on the ISA.
 */
ATTN_API attn_status attn_forward_sources_workspace_size(const attn_shape *shape,
                                                         const attn_options *opt,
                                                         const attn_kv_source *extra,
                                                         size_t *bytes);

/*
 * One partial result of attention over a subset of the keys (a shard or a
 * chunk): its output and its per-row log-sum-exp, as attn_forward writes
 * them (out, and attn_row_stats.lse).
 */
typedef struct attn_partial {
    attn_tensor out;  /* F32 [batch][q_heads][q_len][v_dim]; strides may be 0 */
    const float *lse; /* float[batch][q_heads][q_len] contiguous */
} attn_partial;

/*
 * Merges n_parts >= 1 partial results of the same queries over disjoint key
 * sets into the result over their union:
 *   L = log sum_i exp(lse_i),   out = sum_i exp(lse_i - L) * out_i
 * per row, in the order i = 0, 1, ... (bitwise reproducible). The weights and
 * L are computed in double; out accumulates in f32. Per row:
 *   - a partial with lse_i = -inf (no visible key there) contributes nothing
 *     and its out_i row is not read (it may hold anything);
 *   - every lse_i = -inf: out row 0, L = -inf (never NaN);
 *   - any lse_i NaN or +inf (a poisoned partial, see "Non-finite inputs"):
 *     out row NaN, L NaN; a NaN or inf inside a contributing out_i row
 *     reaches out as arithmetic carries it (NaN stays NaN).
 * Sinks (opt->sinks) are one more entry of a row's whole softmax: when the
 * partials are shards of one call, give the sinks to one shard's call only.
 * shape is the shape of the calls that produced the partials (kv_len and
 * head_dim are not used but must be valid); only batch, q_heads, q_len and
 * v_dim size the tensors. Of opt only struct_size, flags (ATTN_CAUSAL is
 * accepted and has no effect; other bits are ATTN_ERR_ARG, as everywhere),
 * parallel_for and parallel_ctx are read. out must share no byte with any part
 * (ATTN_ERR_STRIDE); lse may be NULL, else float[batch][q_heads][q_len] and
 * separate from everything else. The result equals the call over the union
 * of the keys within the sum of the partials' error and the merge's own
 * rounding (tests/tolerance.h, "merge").
 * out is F32, F16 or BF16 (the parts' out F32 only; any other dtype is
 * ATTN_ERR_ARG, nothing written): the merged row is accumulated in f32 as
 * for an F32 out (the same bits) and each element rounded once, to nearest
 * even, into the out dtype, as attn_forward does and with the same bound:
 * the F32 bound E plus one rounding, |h - o| <= (1 + u) E + u |o|, u = 2^-11
 * (F16) or 2^-8 (BF16), subnormals kept (half their spacing absolutely),
 * F16 overflow to +-inf, NaN kept. lse stays f32 (the F32 call's bits).
 */
ATTN_API attn_status attn_merge(const attn_shape *shape, const attn_options *opt,
                                const attn_partial *parts, int64_t n_parts,
                                const attn_tensor *out, float *lse);

/*
 * Softmax backward for rows laid out as in attn_softmax:
 *   ds = p * (dp - sum_j p_j dp_j)   per row.
 * ds may be the same buffer as dp or p (element-wise in place); other
 * overlaps are not allowed. Runs on the calling thread.
 */
ATTN_API attn_status attn_softmax_backward(const float *p, const float *dp, float *ds,
                                           int64_t rows, int64_t cols,
                                           int64_t row_stride);

/*
 * The gradients attn_backward writes. Versioned like attn_options: the
 * library reads only the fields struct_size covers, so fields appended later
 * (e.g. the gradient of a new option) leave older callers working.
 */
typedef struct attn_grads {
    uint32_t struct_size;     /* sizeof(attn_grads) the caller was built with */
    const attn_tensor *dq;    /* F32 [b][q_head ][q][head_dim], required */
    const attn_tensor *dk;    /* F32 [b][kv_head][k][head_dim], required */
    const attn_tensor *dv;    /* F32 [b][kv_head][k][v_dim],    required */
    const attn_tensor *dbias; /* F32 [b][q_head ][q][k] or NULL: d loss / d s for
                                 every final score s, i.e. the gradient of the
                                 additive bias at full shape (0 where masked);
                                 sum it over any dimension the bias broadcasts */
    float *dsinks;            /* float[batch][q_heads] or NULL: d loss / d sink logit
                                 of each (batch entry, query head), i.e.
                                 -sum_i exp(sink - lse_i) D_i over its rows; needs
                                 opt->sinks (else ATTN_ERR_ARG); sum it over batch
                                 when the sinks broadcast over it */
} attn_grads;

#define ATTN_GRADS_INIT { (uint32_t)sizeof(attn_grads), 0, 0, 0, 0, 0 }

/*
 * Attention backward: given the forward's inputs (q, k, v, the same shape
 * and options), its output `out` and its per-row lse (float[batch][q_heads]
 * [q_len], as attn_row_stats.lse), and dout = d loss / d out, writes
 * dq, dk, dv (and dbias when asked):
 *   P  = exp(S - lse)                   recomputed in tiles, never stored
 *   dV = P^T dO          dP = dO V^T    D_i = sum_t dO_it O_it
 *   dS = P * (dP - D)                   (dbias = dS)
 *   dS'= dS * (1 - tanh^2(s/cap))       the softcap's derivative, when on
 *   dQ = scale dS' K     dK = scale dS'^T Q
 * With GQA/MQA dk and dv are summed over the query heads of each group.
 * dk and dv sum over group * q_len rows in two levels (since 1.11): each
 * block of R <= 64 rows from zero, then the blocks' sums in order, so
 * their rounding error grows like (R + group * q_len / R) u, not
 * group * q_len u as one f32 chain's would.
 * out and dout are [b][q_head][q][v_dim] of F32, F16 or BF16 (out as the
 * forward wrote it); q, k, v as in attn_forward.
 *
 * Every option of opt holds as in the forward (masks, lengths, windows on
 * both sides, softcap, bias, ALiBi slopes, sinks: a sink is part of the
 * lse, so the weights P are right, and dsinks gives their own gradient).
 * Padded query rows, rows without a visible key and keys no row sees get
 * exactly zero gradients. A row whose lse is NaN or +inf (the forward's result for a
 * row a NaN reached) gets NaN gradients, which reach dk and dv of the keys
 * it sees. As in the forward, a non-finite v or dout element inside the
 * valid lengths may turn gradients of its tile into NaN.
 *
 * Deterministic like every operation, without atomics: each gradient
 * element has one owner task (with at least 8 (batch, KV head) pairs, one
 * task per pair owns all of its gradients; with fewer, tasks of key blocks
 * own dk/dv and tasks of query blocks dq/dbias, both recomputing P); no
 * workspace, no heap. `grads` may not be NULL; its tensors may share no
 * byte with an input or with each other.
 *
 * Layouts (since 1.5): q_offsets and kv_offsets (packed variable-length
 * batches, left-padded caches) and q_pos/k_pos (a shard of a longer
 * sequence) as in the forward. The gradients are laid out like what they
 * differentiate (dq and dbias like q's rows and bias, dk and dv like k and
 * v) and, as the forward's out, only a sequence's own rows are written:
 * with q_offsets its rows of dq and dbias, with kv_offsets its key rows
 * [kv_offsets[b], + Lk_b) of dk and dv and those columns of dbias; dk or dv
 * (and dq, dbias) may then have batch_stride 0 provided the sequences'
 * ranges are in order and disjoint, else ATTN_ERR_STRIDE. A sequence's
 * gradients are bit for bit those of the same sequence alone in a dense
 * call with the same plan. With q_pos/k_pos the masks and ALiBi use the
 * global positions; the lse and out handed in are the merged ones (after
 * attn_merge), so each shard's dq, dk, dv are its part of the whole
 * sequence's gradients (sum dk, dv over the shards that read a key).
 *
 * The bf16 mode (since 1.10, attn_precision): the scores are recomputed as
 * attn_forward computes them in that mode, so P = exp(s - lse) agrees with
 * a bf16-mode forward's lse; dQ = scale dS K, dK = scale dS^T Q and
 * dV = P^T dO round their factors to bfloat16 (dK and dV since 1.10.1);
 * dP and D stay f32 (see attn_precision for the bound).
 *
 * Not supported (ATTN_ERR_UNSUPPORTED, nothing written): a block_table
 * (paged K/V), shared_prefix, quantized K or V, the int8 mode: training
 * reads none of them. kv_splits and the workspace are ignored (the
 * backward has its own task plan).
 */
ATTN_API attn_status attn_backward(const attn_shape *shape, const attn_options *opt,
                                   const attn_tensor *q, const attn_tensor *k,
                                   const attn_tensor *v, const attn_tensor *out,
                                   const attn_tensor *dout, const float *lse,
                                   const attn_grads *grads);

/*
 * Quantizes `rows` rows of `cols` f32 values (row i at src + i * src_stride)
 * into `dtype` (Q8_0, Q4_0, FP8_E4M3, FP8_E5M2, U8_ASYM or U4_ASYM), row i at
 * dst + i * dst_stride in that dtype's stride unit (blocks for Q8_0/Q4_0,
 * bytes for the others). Rows are
 * quantized independently; the result is what attn_forward reads with
 * k_scale/v_scale = `scale`.
 *   Q8_0: per block of 32, amax = max |x|, d = amax / 127, id = d ? 1/d : 0
 *         (f32), q = round-half-away(x * id), the block stores binary16(d)
 *         (round to nearest even): bit for bit what ggml's
 *         quantize_row_q8_0_ref writes.
 *   Q4_0: per block, m = the first value of largest |x|, d = m / -8,
 *         id = d ? 1/d : 0, nibble = min(15, trunc(x * id + 8.5)): bit for
 *         bit ggml's quantize_row_q4_0_ref.
 *   FP8_E4M3: e4m3(x / scale) with x / scale rounded to f32 first, then to
 *         E4M3 to nearest even; magnitudes above 448 and infinities saturate
 *         to +-448, NaN stays NaN (S.1111.111).
 *   FP8_E5M2: likewise to E5M2 to nearest even (subnormals down to 2^-16);
 *         magnitudes above 57344 and infinities saturate to +-57344 (as
 *         E4M3 does: a cache holds no infinity attn_quantize made), NaN
 *         stays NaN (S.11111.11).
 *   U8_ASYM, U4_ASYM (since 1.12): each row is ONE record of cols values
 *         (the group; a row of several groups takes one call per group,
 *         dst at the group's record), as OpenVINO's AVX-512 codec writes it:
 *         lo, hi = the least and largest value (lo: the first of equal
 *         ones, which decides the sign of a zero zp), s = fl32((hi - lo) /
 *         255) (/ 15 for U4), 0.0001f where that is below FLT_MIN (0
 *         included: its reciprocal would overflow), zp = fl32(-lo / s),
 *         code = fl32(x * fl32(1 / s) + zp) in one fused rounding, rounded
 *         to nearest even and clamped to [0, 255] ([0, 15]). cols must be
 *         even for U4; a non-finite value, hi - lo overflowing, or zp
 *         overflowing (a constant record beyond about 3.4e34) is
 *         ATTN_ERR_ARG.
 * `scale` is used by FP8 only: 0 means 1, else finite and > 0; it must be 0
 * for the others. Errors (nothing written): ATTN_ERR_NULL for a NULL pointer;
 * ATTN_ERR_SHAPE for rows or cols <= 0, cols not a multiple of 32 for a
 * block format, or sizes that overflow; ATTN_ERR_STRIDE for src_stride < cols,
 * dst_stride below a row's size or src and dst overlapping; ATTN_ERR_ARG for
 * another dtype, a bad scale, or, for Q8_0/Q4_0, a non-finite input or a
 * block whose scale d overflows binary16 (|x| above about 8.3e6 for Q8_0,
 * 5.2e5 for Q4_0): llama.cpp would store an infinite d there.
 */
ATTN_API attn_status attn_quantize(int32_t dtype, const float *src, int64_t rows, int64_t cols,
                                   int64_t src_stride, void *dst, int64_t dst_stride,
                                   float scale);

/*
 * Cache append (since 1.3): writes the K and V rows of a step's new tokens
 * into the cache the next attn_forward reads, in that cache's layout and
 * dtype. shape and opt are the forward's own: a call of shape S and options
 * O writes what the forward with S and O reads as its last keys.
 *   Sequence b has n_b = Lq_b new tokens (q_lens[b], or q_len) and, after the
 *   append, Lk_b keys (kv_lens[b], or kv_len); new token i (0 <= i < n_b) is
 *   written at key position j = Lk_b - n_b + i: where the forward reads key j
 *   of sequence b (kv_offsets, block_table: "Offset and packed batches",
 *   "Paged K/V" above). n_b > Lk_b is ATTN_ERR_ARG.
 *   k_new is [batch][kv_heads][q_len][head_dim], v_new [..][v_dim], laid out
 *   as q is (token i of sequence b is row q_offsets[b] + i with q_offsets;
 *   batch_stride 0 for a packed batch); F32, F16 or BF16.
 *   k and v are the caches, of any K/V dtype, described as for the forward
 *   (paged: the pool). Each value is converted once: F32 stored as is, F16
 *   and BF16 rounded to nearest even (src/half.h's rules: overflow to
 *   +-inf, NaN kept quiet), Q8_0, Q4_0 and FP8_E4M3 quantized row by row
 *   exactly as attn_quantize writes them (FP8: x / k_scale, x / v_scale,
 *   0 meaning 1; with k_scales / v_scales (1.6) x / the row's own scale,
 *   written beside it, see attn_options). An F16 or BF16 input is widened exactly first, so the
 *   result depends on the values only.
 *   Either pair may be absent (v_new and v both NULL: keys only, e.g. a
 *   latent cache whose values are a view of the keys); one of a pair without
 *   the other is ATTN_ERR_NULL, both pairs absent too.
 * Of opt only struct_size, q_lens, kv_lens, q_offsets, kv_offsets, the paging
 * fields, shared_prefix (n_b > Lk_b - P_b, a new row on a shared key, is
 * ATTN_ERR_ARG), k_scale, v_scale, k_scales, v_scales (written), parallel_for
 * and parallel_ctx are read (every
 * field is still validated as everywhere, so the forward's struct can be
 * passed as it is). A call with a Q8_0/Q4_0 cache whose new rows fit 32 KiB
 * once encoded (a decode step) encodes them while validating and copies
 * them into place on the calling thread; every other call runs one task per
 * sequence on parallel_for. The bytes written do not depend on the thread
 * count or the ISA.
 * Errors, nothing written: those of attn_forward for the shared arguments;
 * ATTN_ERR_ARG for a k_new/v_new dtype other than F32, F16, BF16, n_b > Lk_b,
 * a block-table entry of a written page outside [0, num_blocks), two new
 * rows of the call landing on one cache row (a block shared by two
 * sequences' new positions, or sequences of a batch_stride-0 cache whose new
 * positions meet), and for Q8_0/Q4_0 caches a non-finite new value or a
 * block whose scale would overflow binary16 (as attn_quantize);
 * ATTN_ERR_STRIDE where the k and v caches share a byte (a pool holding K
 * and V interleaved takes one call per cache), a cache shares a byte with
 * k_new, v_new or an option's array, or a cache's layout is not nested.
 * Only rows of new tokens are written; every other byte of the caches,
 * padding and pool blocks included, is left as it was.
 */
ATTN_API attn_status attn_cache_append(const attn_shape *shape, const attn_options *opt,
                                       const attn_tensor *k_new, const attn_tensor *v_new,
                                       const attn_tensor *k, const attn_tensor *v);

/*
 * Plans (since 1.3): a forward validated once and run many times. An engine
 * calls attention once per layer with the same shapes, options and layout
 * metadata, only the data changing; a plan holds the validated problem and
 * its task partition, so each run checks only what can change: the new
 * data pointers.
 *
 *   size_t n;  attn_plan_size(&shape, &opt, &n);
 *   attn_plan *plan;
 *   attn_plan_forward(buffer_of_n_bytes, n, &shape, &opt, &q, &k, &v, &out,
 *                     &stats, &plan);               validates as attn_forward
 *   for each layer:
 *       attn_plan_run(plan, q_l, k_l, v_l, out_l, &stats_l);
 *
 * attn_plan_size: the bytes a plan of this shape and these options takes
 * (ATTN_ERR_* as attn_forward for the shape and options). attn_plan_forward
 * checks every argument exactly as attn_forward does (the same statuses,
 * the tensors' data included) and writes the plan into mem (mem_size of
 * at least attn_plan_size's bytes, else ATTN_ERR_ARG; any alignment; it may
 * share no byte with a tensor, a stats array, an option's array or tensor
 * or the block table: ATTN_ERR_STRIDE); *plan then points into mem. Nothing else is written, nothing is computed, nothing allocated.
 * The plan copies what describes the batch: q_lens, kv_lens, q_offsets,
 * kv_offsets, q_pos, k_pos, k_positions, tree_parents and the block
 * table, so changing those arrays afterwards does not change the plan (make a new plan per
 * step). It keeps, as pointers, the option tensors (mask, bias, sinks,
 * alibi_slopes, k_scales, v_scales, k_tail), the split-KV workspace and
 * parallel_for: the caller keeps them valid while the plan is used (their
 * contents may change between runs: they are read by each run). A run
 * moves only q, k, v and out: scales or a tail inside the cache's own rows
 * (DeepSeek V3.2's, see k_scale_group and k_tail) stay where they were
 * planned, so such caches take one plan per layer. The plan uses the kernel table active
 * when it was made (attn_isa_select afterwards does not change it).
 * attn_plan_run runs the planned forward on new data pointers for q, k, v
 * (the tensors' dtypes and strides as planned: the same views, elsewhere)
 * and out, and the stats arrays given (each may be NULL, whatever the plan
 * was made with). It checks that no pointer is NULL (ATTN_ERR_NULL), that
 * no view wraps the address space (ATTN_ERR_SHAPE), and that out and the
 * stats share no byte with each other or with q, k, v, the option tensors,
 * the workspace and the plan (ATTN_ERR_STRIDE); then it computes exactly
 * what attn_forward computes for those arguments, bit for bit. The plan
 * itself is never written by a run: runs of one plan may go on at once in
 * several threads, except with a split-KV workspace (one run at a time).
 * A plan is plain memory: free it as the caller's buffer; no destroy call.
 */
typedef struct attn_plan attn_plan;

ATTN_API attn_status attn_plan_size(const attn_shape *shape, const attn_options *opt,
                                    size_t *bytes);
ATTN_API attn_status attn_plan_forward(void *mem, size_t mem_size, const attn_shape *shape,
                                       const attn_options *opt, const attn_tensor *q,
                                       const attn_tensor *k, const attn_tensor *v,
                                       const attn_tensor *out, const attn_row_stats *stats,
                                       attn_plan **plan);
ATTN_API attn_status attn_plan_run(const attn_plan *plan, const void *q, const void *k,
                                   const void *v, void *out, const attn_row_stats *stats);

/*
 * Since 1.11: one share of a planned run, on the calling thread, for
 * engines that run an operator on every thread of their own pool (ggml's
 * ith/nth, an OpenMP parallel region, ONNX Runtime's per-thread work):
 * each of `shares` threads calls attn_plan_run_share with the same
 * arguments and its own share in [0, shares); once every share has
 * returned, out and the stats hold exactly what attn_plan_run writes (any
 * shares, on any threads, in any order, bit for bit). A share waits for no
 * other, so no barrier is needed, and the plan's parallel_for is not used.
 * Each share checks the arguments as attn_plan_run does (a failing share
 * writes nothing, but the others may have written their part: check
 * every share's status). shares < 1 or share outside [0, shares):
 * ATTN_ERR_ARG. A plan whose tasks depend on one another cannot be run in
 * shares: one that splits the keys (a workspace and kv_splits != 1) or has
 * a shared_prefix is ATTN_ERR_UNSUPPORTED, nothing written.
 */
ATTN_API attn_status attn_plan_run_share(const attn_plan *plan, const void *q, const void *k,
                                         const void *v, void *out, const attn_row_stats *stats,
                                         int32_t share, int32_t shares);

/* ---------------------------------------------------------------- thread pool */

/*
 * A small built-in pool for callers without one (Python, the CLI):
 *   attn_threadpool *pool;
 *   attn_threadpool_create(4, &pool);
 *   opt.parallel_for = attn_threadpool_parallel_for; opt.parallel_ctx = pool;
 * threads counts the calling thread, which also runs tasks; 0 means the
 * number of CPUs the calling thread may run on (its affinity mask, as
 * nproc counts: taskset and cpusets lower it, at most 1024); negative or
 * above 1024 is ATTN_ERR_ARG.
 * Calls from several threads on one pool are serialised. Do not call it
 * from inside a task.
 *
 * Pools survive fork() (since 1.11): the child's first call on a pool its
 * parent used starts the pool's workers again (the size is kept), so
 * multiprocessing, DataLoader workers and pre-forking servers may go on
 * using it; do not fork from inside a task.
 */
typedef struct attn_threadpool attn_threadpool;

ATTN_API attn_status attn_threadpool_create(int32_t threads, attn_threadpool **pool);
ATTN_API void attn_threadpool_destroy(attn_threadpool *pool); /* NULL: no-op */
/* Threads the pool runs tasks on (the caller included). */
ATTN_API int32_t attn_threadpool_size(const attn_threadpool *pool);
/* Matches attn_parallel_for_fn; pool_ctx is an attn_threadpool *. */
ATTN_API void attn_threadpool_parallel_for(void *pool_ctx, attn_task_fn task,
                                           void *task_ctx, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_H */

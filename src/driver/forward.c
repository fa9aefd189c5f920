/* SPDX-License-Identifier: MIT */
/*
 * attn_forward, the fused forward: out = softmax(S) . V with an online
 * softmax, one task per block of query rows of a head group. Per task, keys are visited in
 * blocks of block_k over the union of the rows' visible ranges; a block no
 * row sees is skipped, and keys beyond kv_lens are never touched. Within a
 * block, runs of consecutive rows that see it go through qk_tile / pv_tile
 * together.
 *
 * Split-KV (pb->splits > 1): each block of rows becomes `splits` tasks, one
 * per chunk of keys, that leave their online state and unnormalised output
 * in the workspace; the task that finishes a block's last chunk (an atomic
 * count elects it) merges the chunks in chunk order, as one more rescale of
 * the online softmax, and writes the rows. Which task merges varies, what it
 * computes does not.
 *
 * Shared prefixes (attn.h; pb->prefix_parts > 0): before the tasks, one
 * round of prefix tasks attends each group's shared keys once for the
 * query rows of all its sequences, in chunks of ATTN_PREFIX_CHUNK keys, and
 * leaves each chunk's online state in the workspace; each sequence's tasks
 * then start their rows from those states (merged in chunk order, the
 * rescale split-KV uses) and fold in the sequence's own keys only.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "kv.h"
#include "validate.h"

typedef struct online_row {
    float m, l, t; /* running max, sum of exp(s - m), sum of exp(s - m) * (s - m) */
    int poisoned;  /* a NaN or +inf score was seen: the row's result is NaN */
} online_row;

/*
 * A top-k task's working memory lies in its scratch after the gather buffer,
 * not on the stack (attn.h bounds a task's stack): per query position the
 * bitmap of its selected keys in the current window of sel_window keys and
 * its {list, lo, hi} (SEL_ROW_FLOATS), then the window's union bitmap,
 * two tiles' keys (this one and the next) and the per-key scale factors
 * (SEL_FIXED_FLOATS of a tile of g keys). Each list is scanned once per window: the plan makes the window
 * as wide as the scratch allows.
 */
#define SEL_MIN_WINDOW 512
#define SEL_MAX_WINDOW 65536 /* a tile's keys are uint16 offsets in their window */
#define SEL_ROW_FLOATS(w) ((w) / 32 + 6)
#define SEL_FIXED_FLOATS(w, g) ((w) / 32 + (g) + 2 * (g) + 16)
/* Query positions one task gathers for: the union of their selections grows
   with each (neighbouring rows share most keys, not all), and every row is
   multiplied with all of it. */
#define SEL_MAX_POSITIONS 8

typedef struct sel_pos {
    const int32_t *list; /* NULL: the position sees no key */
    int64_t lo, hi;      /* its visible keys, within the task's range */
} sel_pos;

/* V laid out as the first v_dim columns of K's rows (MLA's latent cache):
   what a plan may assume; the data pointers say per call whether V is K. */
static int v_as_k_columns(const attn_problem *pb)
{
    return pb->v.dtype == pb->k.dtype && pb->v_dim < pb->head_dim && pb->v_dim <= attn_k_cols(pb) &&
           pb->v.row_stride == pb->k.row_stride && pb->v.head_stride == pb->k.head_stride &&
           pb->v.batch_stride == pb->k.batch_stride;
}

/* Bytes of one row of K or V, whichever is longer (a gathered row). */
static int64_t gathered_row_bytes(const attn_problem *pb)
{
    /* FP8 with scale groups, rows with a tail: gathered decoded, as f32
       (attn_kv_stage) */
    const int64_t kb = attn_k_staged(pb) ? pb->head_dim * 4
                                         : pb->head_dim / attn_dtype_block(pb->k.dtype) *
                                               (int64_t)attn_dtype_size(pb->k.dtype);
    const int64_t vb = pb->v_group ? pb->v_dim * 4
                                   : pb->v_dim / attn_dtype_block(pb->v.dtype) *
                                         (int64_t)attn_dtype_size(pb->v.dtype);
    return attn_max64(kb, vb);
}

/*
 * The plan of a call with top-k lists: the task scratch holds the converted
 * queries, a score tile of block_k columns (the keys of one online-softmax
 * step), the accumulator, a gather buffer of gather_keys key rows (the keys
 * of one kernel call) and the selection's memory. Of the widths that fit,
 * the widest whose block holds 8 rows (the bf16 dot kernels' least), a
 * gather of 32 keys preferred (one bf16 key panel). A block holds whole
 * query positions (all heads of a GQA group), at most SEL_MAX_POSITIONS,
 * or an even share of one position's heads; the window then takes what is
 * left. Nothing depends on the lengths: a sequence's tiles are the same
 * alone and in any batch (attn.h, "Batch invariance").
 */
static void plan_selected(const attn_dsp *dsp, const attn_problem *pb, task_plan *p)
{
    static const int64_t widths[] = {256, 128, 64, 32, 16, 8, 4, 2, 1};
    const size_t n_widths = sizeof widths / sizeof widths[0];
    const int64_t row_floats = (gathered_row_bytes(pb) + 63) / 64 * 16;
    const int64_t hpg = p->heads_per_group, bk = (int64_t)dsp->block_k;
    /* rows wanted per block: 8, or a whole GQA group (each task gathers
       its keys: one task per position gathers them once) */
    const int64_t want = attn_max64(8, attn_min64(hpg, (int64_t)dsp->block_q));
    /* F32 queries read where they lie when a block's rows are at one
       stride: consecutive positions (no GQA stacking), or heads of one
       position (a group of at least 8 heads: MLA's 16 to 128) */
    const int direct = pb->q.dtype == ATTN_DTYPE_F32 && (hpg == 1 || hpg >= 8);
    const int64_t qs = direct ? 0 : p->q_stride;
    /* V laid out as K's first columns (MLA's latent cache) may be V itself:
       a tile of one gather then serves P.V from K's copy (forward_selected
       checks the pointers; a plan never looks at them) */
    const int latent = v_as_k_columns(pb);
    int64_t best_c = 1, best_g = 1, best_rows = 0;
    for (size_t ci = 0; ci < n_widths && best_rows < want; ci++) {
        const int64_t c = widths[ci];
        if (c > 32 || c > bk)
            continue;
        for (size_t gi = 0; gi <= ci && best_rows < want; gi++) { /* widest first */
            const int64_t g = widths[gi];
            const int64_t room =
                ATTN_SCRATCH_FLOATS - c * row_floats - SEL_FIXED_FLOATS(SEL_MIN_WINDOW, g);
            if (g > bk || g % c || room <= 0 || (latent && g != c))
                continue;
            const int64_t per_row = qs + g + p->acc_stride + SEL_ROW_FLOATS(SEL_MIN_WINDOW);
            const int64_t fit = attn_min64(room / per_row, (int64_t)dsp->block_q);
            if (fit > best_rows || fit >= want)
                best_c = c, best_g = g, best_rows = fit;
        }
    }
    int64_t rows = attn_max64(1, attn_min64(best_rows, SEL_MAX_POSITIONS * hpg));
    if (direct && hpg > 1) { /* within one position: a divisor of the group */
        rows = attn_min64(rows, hpg);
        while (hpg % rows)
            rows--;
    } else if (rows >= hpg) {
        rows -= rows % hpg;
    } else {
        const int64_t parts = (hpg + rows - 1) / rows;
        rows = (hpg + parts - 1) / parts;
    }
    p->q_direct = direct;
    const int64_t used = best_c * row_floats + rows * (qs + best_g + p->acc_stride);
    int64_t w = SEL_MIN_WINDOW;
    while (w < SEL_MAX_WINDOW && used + rows * SEL_ROW_FLOATS(2 * w) +
                                         SEL_FIXED_FLOATS(2 * w, best_g) <= ATTN_SCRATCH_FLOATS)
        w *= 2;
    p->gather_keys = best_c;
    p->gather_floats = best_c * row_floats; /* then the selection's memory */
    p->sel_window = w;
    p->block_k = best_g;
    p->block_rows = rows;
}

/*
 * Rows in segments. FP8 rows with scale groups and key rows with a tail
 * (attn.h 1.8, 1.9) are read in place where the kernels can: Q.K^T runs the
 * kernel of each segment's dtype (a scale group of k, the tail) on its
 * columns with scale 1 (an unscaled k, or the tail: with the call's
 * qk_scale), and the scores are sum_i fl(scale * s_ji) dot_i, summed in
 * f32; P.V runs per V group on the weights times that group's scales. Each
 * value is then read once, as its own dtype (FP8 decode on a Zen 5 with
 * d 128 in one group: 0.77 ms against 1.25 ms through the f32 stage, whose
 * rows were written and read again). One bound covers both ways (attn.h
 * at k_scale_group, tests/tolerance.h): the stage rounds each value,
 * fl32(fp8 * s), the segments each factor, fl32(p s) or fl32(scale s),
 * and sum the partial scores. Groups of fewer than SEG_MIN_COLS
 * channels (ONNX Runtime's per channel: a kernel call per value) and more
 * than SEG_MAX_GROUPS per row stay staged, as do the modes whose kernels
 * round the staged f32 values (bf16, int8), and top-k lists: their
 * gathered rows are decoded once for every row of the task, and MLA's V,
 * the latent, is then read from K's decoded copy (segments on the gathered
 * bytes decoded each value twice, once per product: DeepSeek V3.2's FP8
 * rows, top-k 2048 of 32768, Hq 16, took 1.22 ms against 1.07 staged).
 */
#define SEG_MIN_COLS 64
#define SEG_MAX_GROUPS 8

/*
 * With few rows per task (decode: a GQA group's heads at one position)
 * rows of two groups or more, each a multiple of ATTN_GRP_STEP channels,
 * go to the qk_grp and pv_grp kernels instead (src/dsp.h): each value
 * times its scale where it is loaded, one call per run of keys, no
 * partial rows to sum. Those are the stage's values, so the bits are the
 * stage's (checkasm checks the kernels against the F32 ones on staged
 * rows). Decode Hq 32 Hkv 8 Lk 4096 d 128 on Zen 5, 1 thread, E4M3 in
 * groups of 64: 0.96 -> 0.84 ms, of 32: 1.35 -> 0.85 (segments), of 16:
 * 1.54 -> 0.88 (staged); E5M2 groups of 64 1.03 -> 0.83. One group per
 * row stays a segment (a factor per score: the kernel's product per value
 * measured 1-2 % slower), and more rows too, whose packed Q.K^T path sums
 * no score across lanes.
 */
#define GRP_MAX_ROWS 8

static void plan_segments(const attn_dsp *dsp, const attn_problem *pb, task_plan *p)
{
    if (pb->opt.precision != ATTN_PRECISION_DEFAULT || pb->opt.topk_indices)
        return;
    const int few = p->rows <= GRP_MAX_ROWS;
    if (few && pb->k_group > 0 && pb->k_group % ATTN_GRP_STEP == 0 &&
        pb->k_group < attn_k_cols(pb) && !pb->k_tail_dim && dsp->qk_grp[pb->k.dtype])
        p->k_grp = 1;
    else if (attn_k_staged(pb)) {
        const int64_t g = pb->k_group ? pb->k_group : attn_k_cols(pb);
        if (g >= SEG_MIN_COLS && attn_k_cols(pb) / g <= SEG_MAX_GROUPS)
            p->k_segs = (int)(attn_k_cols(pb) / g + (pb->k_tail_dim > 0));
    }
    if (few && pb->v_group > 0 && pb->v_group % ATTN_GRP_STEP == 0 && pb->v_group < pb->v_dim &&
        dsp->pv_grp[pb->v.dtype])
        p->v_grp = 1;
    else if (pb->v_group >= SEG_MIN_COLS && pb->v_dim / pb->v_group <= SEG_MAX_GROUPS)
        p->v_segs = (int)(pb->v_dim / pb->v_group);
}

/* Scratch floats per query row of a dense forward task: its query (unless
   read in place), score row, accumulator and (segments) partial row. */
static int64_t forward_row_floats(const task_plan *p)
{
    return (p->q_direct ? 0 : p->q_stride) + p->block_k * (1 + (p->k_segs || p->v_segs)) +
           p->acc_stride;
}

static task_plan plan_forward(const attn_dsp *dsp, const attn_problem *pb)
{
    task_plan p = attn_plan_common(dsp, pb, pb->group);
    if (pb->opt.topk_indices) {
        plan_selected(dsp, pb, &p);
        p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
        p.splits = pb->splits;
        p.tasks = (size_t)(pb->batch * (p.groups * p.blocks * p.splits));
        return p;
    }
    /* Without GQA stacking a block's rows are consecutive positions of one
       head, at one stride, and with one query position (decode) they are
       consecutive heads of it, one head stride apart: F32 queries are then
       read where they lie, and the scratch their copy would take holds more
       rows (d 128: 64 instead of 42, which made prefill 7 % of the FMA peak
       faster on Zen 5: fewer passes over K and V, each K panel packed for
       more rows; MLA decode at d 576: 25 instead of 13). */
    p.q_direct = pb->q.dtype == ATTN_DTYPE_F32 && (p.heads_per_group == 1 || pb->q_extent == 1);
    plan_segments(dsp, pb, &p);
    const int64_t staged = attn_plan_stage(pb, &p, p.block_k); /* after the accumulator */
    p.block_rows = attn_block_rows_within(dsp, forward_row_floats(&p), ATTN_SCRATCH_FLOATS - staged);
    p.blocks = (p.rows + p.block_rows - 1) / p.block_rows;
    p.splits = pb->splits;
    p.tasks = (size_t)(pb->batch * (p.groups * p.blocks * p.splits));
    return p;
}

/* Folds the final scores s[a, z) of a tile of nk keys into a row's online
   state; leaves in s the weights exp(s - m) to multiply V by (0 outside
   [a, z) and where the row sees nothing). */
static void online_fold(const attn_dsp *dsp, const attn_problem *pb, online_row *o, float *s,
                        int64_t nk, int64_t a, int64_t z, float *acc, int want_entropy)
{
    float bm = o->poisoned ? -INFINITY : dsp->row_max(s + a, (size_t)(z - a));
    if (isnan(bm) || bm == INFINITY)
        o->poisoned = 1;
    if (o->poisoned || bm == -INFINITY) {
        attn_fill(s, nk, 0.0f); /* nothing visible here: weight 0 */
        return;
    }
    const float m_new = bm > o->m ? bm : o->m;
    if (o->m != -INFINITY && m_new != o->m) { /* rescale what we have */
        const float alpha = expf(o->m - m_new);
        dsp->row_scale(acc, (size_t)pb->v_dim, alpha);
        o->t = alpha * (o->t + o->l * (o->m - m_new));
        o->l *= alpha;
    }
    float weighted = 0.0f;
    float sum = dsp->exp_sum(s + a, (size_t)(z - a), m_new, want_entropy ? &weighted : NULL);
    if (isnan(sum)) {
        o->poisoned = 1;
        attn_fill(s, nk, 0.0f);
        return;
    }
    o->m = m_new;
    o->l += sum;
    o->t += weighted;
    attn_fill(s, a, 0.0f);
    attn_fill(s + z, nk - z, 0.0f);
}

/* Folds one row's scores of keys [kb, kb + nk) into its online state, after
   the epilogue on the keys it sees (online_fold's weights). */
static void online_update(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                          online_row *o, float *s, int64_t kb, int64_t nk, float *acc,
                          int want_entropy)
{
    const int64_t a = attn_max64(row->lo, kb) - kb, z = attn_min64(row->hi, kb + nk) - kb;
    attn_score_epilogue(dsp, pb, row, s + a, kb + a + row->shift, z - a);
    online_fold(dsp, pb, o, s, nk, a, z, acc, want_entropy);
}

/* Writes one row's output and stats from its online state. The output row
   is the normalised f32 row, rounded once into an F16/BF16 out (the stats
   stay f32). */
static void finish_row(const attn_dsp *dsp, const attn_problem *pb, const row_ref *row,
                       const online_row *o, float *acc)
{
    const attn_tensor *out = &pb->out;
    if (o->poisoned) {
        attn_fill_out_row(out, row->b, row->h, row->i, NAN, pb->v_dim);
        attn_write_stats(pb, row, NAN, NAN, NAN);
    } else if (o->m == -INFINITY) { /* no visible key, no sink */
        attn_fill_out_row(out, row->b, row->h, row->i, 0.0f, pb->v_dim);
        attn_write_stats(pb, row, -INFINITY, -INFINITY, 0.0f);
    } else if (row->lo >= row->hi) { /* only the sink: acc was never started */
        attn_fill_out_row(out, row->b, row->h, row->i, 0.0f, pb->v_dim);
        attn_write_stats(pb, row, o->m, o->m, 0.0f);
    } else {
        dsp->row_scale(acc, (size_t)pb->v_dim, 1.0f / o->l);
        /* FP8 v: its scale after the normaliser (not folded into it: v_scale / l
           could fall into the subnormal range and lose precision) */
        if (pb->v_scale != 1.0f)
            dsp->row_scale(acc, (size_t)pb->v_dim, pb->v_scale);
        attn_store_out_row(out, row->b, row->h, row->i, acc, pb->v_dim);
        const float log_l = logf(o->l);
        attn_write_stats(pb, row, o->m + log_l, o->m, fmaxf(0.0f, log_l - o->t / o->l));
    }
}

/* ------------------------------------------------------------ top-k */


/* Copies the rows of keys w0 + pos[0, n) into dst, one after another. */
static void gather_rows(const kv_src *src, int64_t w0, const uint16_t *pos, int64_t n,
                        unsigned char *dst)
{
    for (int64_t t = 0; t < n; t++) {
        int64_t len;
        const void *row = attn_kv_run(src, w0 + pos[t], w0 + pos[t] + 1, &len);
        memcpy(dst + (size_t)t * src->row_bytes, row, src->row_bytes);
    }
}

/* The same decoded to f32 with their scale groups and tail (attn_kv_stage),
   rows `width` floats apart. */
static void stage_rows(const attn_dsp *dsp, const kv_src *src, const kv_src *sc, int64_t g,
                       const kv_src *tail, int64_t width, int64_t w0, const uint16_t *pos,
                       int64_t n, float *dst)
{
    for (int64_t t = 0; t < n; t++)
        attn_kv_stage(dsp, src, sc, g, tail, w0 + pos[t], 1, dst + t * width, width);
}

/* Takes the next (at most) n set bits of the union bitmap uni from word
   *word on, as key offsets in key order, clearing them; returns how many. */
static int64_t take_keys(uint64_t *uni, int64_t words, int64_t *word, int64_t n,
                         uint16_t *pos)
{
    int64_t k = 0;
    while (k < n && *word < words) {
        if (!uni[*word]) {
            (*word)++;
            continue;
        }
        pos[k++] = (uint16_t)(*word * 64 + __builtin_ctzll(uni[*word]));
        uni[*word] &= uni[*word] - 1;
    }
    return k;
}

/* Asks for the rows of keys w0 + pos[0, n) ahead of their gather. */
static void prefetch_rows(const kv_src *src, int64_t w0, const uint16_t *pos, int64_t n)
{
    for (int64_t t = 0; t < n; t++) {
        int64_t len;
        const char *row = attn_kv_run(src, w0 + pos[t], w0 + pos[t] + 1, &len);
        for (size_t c = 0; c < src->row_bytes; c += 64)
            __builtin_prefetch(row + c, 0, 3);
    }
}

/*
 * forward_keys for a call with top-k lists (attn.h, "Top-k sparse
 * attention"): per window of SEL_WINDOW key positions, each query position
 * of the task marks the keys its list selects and it sees; their union, in
 * key order, is cut into tiles of block_k keys, each an online-softmax
 * step for the rows that see any of its keys. K and V rows are copied
 * gather_keys at a time into the gather buffer `gbuf` for the kernels (so
 * each selected key is read once per task, for every row and head of it);
 * a row's unselected keys of a tile get -inf after the epilogue, as the
 * dense operations' selection does. The tiles depend on the task's rows
 * only, so batch invariance and determinism hold as for dense calls.
 */
static __attribute__((noinline)) void
forward_selected(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                 const row_ref *rows, int64_t n, int64_t kv_head, int64_t base, int64_t klo,
                 int64_t khi, online_row *st, const float *q, int64_t q_stride, float *sbuf,
                 float *acc, float *gbuf)
{
    const int want_entropy = pb->stats.entropy != NULL;
    attn_qk_tile_fn *const qk = attn_qk_kernel(dsp, pb);
    attn_pv_tile_fn *const pv = attn_pv_kernel(dsp, pb);
    const int64_t b = rows[0].b, G = p->block_k, C = p->gather_keys;
    const kv_src ks = attn_kv_open(pb, &pb->k, b, kv_head, attn_k_cols(pb));
    const kv_src vs = attn_kv_open(pb, &pb->v, b, kv_head, pb->v_dim);
    const kv_src kts = attn_kv_open_tail(pb, b, kv_head);
    const kv_src *const tail = pb->k_tail_dim ? &kts : NULL;
    /* gathered rows lie back to back; staged ones (scale groups, a tail)
       decoded to f32 */
    const int k_staged = attn_k_staged(pb);
    const ptrdiff_t k_units = k_staged ? pb->head_dim : (ptrdiff_t)(ks.row_bytes / ks.esize);
    const ptrdiff_t v_units = pb->v_group ? pb->v_dim : (ptrdiff_t)(vs.row_bytes / vs.esize);
    const kv_src kss =
        attn_kv_open_scales(pb, &pb->k_scales, pb->k_group, attn_k_cols(pb), b, kv_head);
    const kv_src vss =
        attn_kv_open_scales(pb, &pb->v_scales, pb->v_group, pb->v_dim, b, kv_head);
    const int k_rows = pb->k_scales.data && !pb->k_group;
    const int v_rows = pb->v_scales.data && !pb->v_group;
    const int terms = attn_has_score_terms(pb);
    /* V rows inside K's (MLA's latent cache): K's gather brought them in,
       decoded alike where both are staged with the same scale groups, or
       neither is */
    const int same_decode = k_staged == (pb->v_group != 0) && pb->k_group == pb->v_group &&
                            (!pb->k_group || !memcmp(&pb->k_scales, &pb->v_scales,
                                                     sizeof pb->k_scales));
    const int v_in_k = v_as_k_columns(pb) && pb->v.data == pb->k.data && same_decode;
    const int reuse = v_in_k && C == G;
    /* the scratch after the gather buffer (SEL_ROW_FLOATS, SEL_FIXED_FLOATS) */
    const int64_t W = p->sel_window, words = W / 64;
    uint64_t *const bits = (uint64_t *)(void *)(gbuf + p->gather_floats);
    uint64_t *const uni = bits + p->block_rows * words;
    sel_pos *const pos = (sel_pos *)(void *)(uni + words);
    float *const kfac = (float *)(void *)(pos + p->block_rows), *const vfac = kfac + G;
    uint16_t *const upos = (uint16_t *)(void *)(vfac + G);

    /* the task's query positions (rows stack the heads of one position
       together; rows[r].i - rows[0].i is row r's position slot) */
    int64_t npos = 0;
    for (int64_t r = 0; r < n; r++)
        if (r == 0 || rows[r].i != rows[r - 1].i) {
            const int sees = rows[r].is_query && rows[r].lo < rows[r].hi;
            pos[npos++] = (sel_pos){sees ? attn_topk_list(pb, &rows[r]) : NULL,
                                    attn_max64(rows[r].lo, klo), attn_min64(rows[r].hi, khi)};
        }
    int64_t ulo, uhi;
    attn_visible_union(rows, n, &ulo, &uhi);
    ulo = attn_max64(ulo, klo);
    uhi = attn_min64(uhi, khi);
    for (int64_t w0 = ulo; w0 < uhi; w0 += W) {
        const int64_t w1 = attn_min64(w0 + W, uhi);
        memset(uni, 0, (size_t)words * sizeof *uni);
        for (int64_t u = 0; u < npos; u++) {
            uint64_t *bu = bits + u * words;
            memset(bu, 0, (size_t)words * sizeof *bu);
            const int64_t lo = attn_max64(pos[u].lo, w0) - w0, hi = attn_min64(pos[u].hi, w1) - w0;
            if (!pos[u].list || lo >= hi)
                continue;
            for (int64_t t = 0; t < pb->opt.topk; t++) {
                const int64_t x = base + pos[u].list[t] - w0; /* -1 entries: below lo */
                if (x >= lo && x < hi)
                    bu[x >> 6] |= (uint64_t)1 << (x & 63);
            }
            for (int64_t w = 0; w < words; w++)
                uni[w] |= bu[w];
        }
        /* the union in key order, G keys per tile, the next tile drawn
           (and its first rows prefetched) before this one is computed */
        uint16_t *tp = upos, *next = upos + G;
        int64_t word = 0, n_next = take_keys(uni, words, &word, G, next);
        for (int first = 1; n_next > 0; first = 0) {
            uint16_t *const swap = tp;
            tp = next, next = swap;
            const int64_t nk = n_next;
            n_next = take_keys(uni, words, &word, G, next);
            if (first)
                prefetch_rows(&ks, w0, tp, attn_min64(2 * C, nk));
            if (n_next > 0)
                prefetch_rows(&ks, w0, next, attn_min64(2 * C, n_next));
            const int64_t kb = w0 + tp[0], ke = w0 + tp[nk - 1] + 1;
            /* K: gathered gather_keys rows at a time, for each run of rows
               that sees some key of the tile (the runs are found again for
               each pass: they cost nothing next to the products) */
            for (int64_t c = 0; c < nk; c += C) {
                const int64_t cn = attn_min64(C, nk - c);
                if (c + 2 * C < nk) /* two chunks ahead */
                    prefetch_rows(&ks, w0, tp + c + 2 * C, attn_min64(C, nk - c - 2 * C));
                if (k_staged)
                    stage_rows(dsp, &ks, &kss, pb->k_group, tail, pb->head_dim, w0, tp + c, cn,
                               gbuf);
                else
                    gather_rows(&ks, w0, tp + c, cn, (unsigned char *)gbuf);
                if (!v_in_k)
                    prefetch_rows(&vs, w0, tp + c, cn);
                for (int64_t r = 0, e; (e = attn_next_run(rows, n, &r, kb, ke)) > r; r = e)
                    qk(q + r * q_stride, q_stride, gbuf, k_units, (size_t)(e - r), (size_t)cn,
                       (size_t)pb->head_dim, pb->qk_scale, sbuf + r * G + c, G);
            }
            if (k_rows) {
                for (int64_t t = 0; t < nk; t++)
                    attn_kv_scales(&kss, w0 + tp[t], w0 + tp[t] + 1, 0, pb->scale, kfac + t);
                for (int64_t r = 0, e; (e = attn_next_run(rows, n, &r, kb, ke)) > r; r = e)
                    attn_scale_columns(sbuf + r * G, G, e - r, kfac, nk);
            }
            for (int64_t r = 0, e; (e = attn_next_run(rows, n, &r, kb, ke)) > r; r = e)
                for (; r < e; r++) {
                    float *s = sbuf + r * G;
                    if (pb->opt.softcap > 0.0f)
                        dsp->softcap(s, (size_t)nk, pb->opt.softcap);
                    /* the other terms by position, over runs of consecutive keys */
                    for (int64_t a = 0, z; terms && a < nk; a = z) {
                        for (z = a + 1; z < nk && tp[z] == tp[z - 1] + 1; z++)
                            ;
                        attn_score_terms(dsp, pb, &rows[r], s + a, w0 + tp[a], z - a);
                    }
                    /* -inf where the row's list does not name the key, without
                       a branch (they fall at random), NaN scores included; one
                       position's list names every key of the union */
                    const uint64_t *sel = bits + (rows[r].i - rows[0].i) * words;
                    for (int64_t t = 0; t < nk && npos > 1; t++) {
                        const uint32_t keep = 0u - (uint32_t)(sel[tp[t] >> 6] >> (tp[t] & 63) & 1);
                        uint32_t x;
                        memcpy(&x, &s[t], sizeof x);
                        x = (x & keep) | (~keep & 0xff800000u);
                        memcpy(&s[t], &x, sizeof x);
                    }
                    online_fold(dsp, pb, &st[r], s, nk, 0, nk, acc + r * p->acc_stride,
                                want_entropy);
                }
            if (v_rows) {
                for (int64_t t = 0; t < nk; t++)
                    attn_kv_scales(&vss, w0 + tp[t], w0 + tp[t] + 1, 0, 1.0f, vfac + t);
                for (int64_t r = 0, e; (e = attn_next_run(rows, n, &r, kb, ke)) > r; r = e)
                    attn_scale_columns(sbuf + r * G, G, e - r, vfac, nk);
            }
            for (int64_t c = 0; c < nk; c += C) {
                const int64_t cn = attn_min64(C, nk - c);
                if (!reuse && pb->v_group)
                    stage_rows(dsp, &vs, &vss, pb->v_group, NULL, pb->v_dim, w0, tp + c, cn,
                               gbuf);
                else if (!reuse)
                    gather_rows(&vs, w0, tp + c, cn, (unsigned char *)gbuf);
                for (int64_t r = 0, e; (e = attn_next_run(rows, n, &r, kb, ke)) > r; r = e)
                    pv(sbuf + r * G + c, G, gbuf, reuse ? k_units : v_units, (size_t)(e - r),
                       (size_t)cn, (size_t)pb->v_dim, acc + r * p->acc_stride, p->acc_stride);
            }
        }
    }
}

/* Scores of rows [0, nr) (q, rows q_stride apart) for keys [kb, ke) into s
   (rows block_k apart) from p->k_segs segments of the key rows (above);
   part: a tile of the same shape for the partial scores. */
static void segment_scores(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                           const kv_src *ks, const kv_src *kss, const kv_src *tail,
                           const float *q, int64_t q_stride, size_t nr, int64_t kb, int64_t ke,
                           float *s, float *part)
{
    const int64_t nk = ke - kb, B = p->block_k;
    const int64_t g = pb->k_group ? pb->k_group : attn_k_cols(pb);
    float fac[ATTN_MAX_BLOCK_K];
    for (int i = 0; i < p->k_segs; i++) {
        const int is_tail = tail && i == p->k_segs - 1, scaled = pb->k_group && !is_tail;
        const kv_src *src = is_tail ? tail : ks;
        const int64_t col = i * g, cols = is_tail ? pb->k_tail_dim : g;
        /* bytes into the row: a group of an FP8 row (one byte a value); the
           tail and an unscaled k start their rows */
        const size_t at = is_tail ? 0 : (size_t)col;
        attn_qk_tile_fn *const qk = attn_qk_kernel_for(dsp, pb, src->t->dtype);
        for (int64_t j = kb, len; j < ke; j += len) {
            const char *kp = (const char *)attn_kv_run(src, j, ke, &len) + at;
            qk(q + col, q_stride, kp, src->stride, nr, (size_t)len, (size_t)cols,
               scaled ? 1.0f : pb->qk_scale, (i == 0 ? s : part) + (j - kb), B);
        }
        if (scaled) /* each key's factor fl(scale * s_ji): one rounding */
            attn_kv_scales(kss, kb, ke, i, pb->scale, fac);
        /* the first segment's scores times their factors, then each next
           one's added (unscaled: the kernel applied the call's scale) */
        for (size_t r = 0; r < nr; r++) {
            float *sr = s + (int64_t)r * B;
            const float *pr = part + (int64_t)r * B;
            if (i == 0 && scaled)
                for (int64_t c = 0; c < nk; c++)
                    sr[c] *= fac[c];
            else if (i > 0 && scaled)
                for (int64_t c = 0; c < nk; c++)
                    sr[c] += fac[c] * pr[c];
            else if (i > 0)
                for (int64_t c = 0; c < nk; c++)
                    sr[c] += pr[c];
        }
    }
}

/* Scores of rows [0, nr) for keys [kb, ke) into s (rows block_k apart)
   by qk_grp, and their P.V into acc by pv_grp (p->k_grp, p->v_grp: the
   scale groups read where they lie), a call per run of keys whose rows and
   scales both lie at one stride (their views' pages may adjoin
   differently). */
static void grp_scores(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const kv_src *ks, const kv_src *kss, const float *q, int64_t q_stride,
                       size_t nr, int64_t kb, int64_t ke, float *s)
{
    attn_qk_grp_fn *const qk = dsp->qk_grp[pb->k.dtype];
    for (int64_t j = kb, len, slen; j < ke; j += len) {
        const void *kp = attn_kv_run(ks, j, ke, &len);
        const float *sp = (const float *)attn_kv_run(kss, j, j + len, &slen);
        len = slen;
        qk(q, q_stride, kp, ks->stride, nr, (size_t)len, (size_t)pb->head_dim, pb->qk_scale,
           s + (j - kb), p->block_k, sp, kss->stride, (size_t)pb->k_group);
    }
}

static void grp_values(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                       const kv_src *vs, const kv_src *vss, size_t nr, int64_t kb, int64_t ke,
                       const float *s, float *acc)
{
    attn_pv_grp_fn *const pv = dsp->pv_grp[pb->v.dtype];
    for (int64_t j = kb, len, slen; j < ke; j += len) {
        const void *vp = attn_kv_run(vs, j, ke, &len);
        const float *sp = (const float *)attn_kv_run(vss, j, j + len, &slen);
        len = slen;
        pv(s + (j - kb), p->block_k, vp, vs->stride, nr, (size_t)len, (size_t)pb->v_dim, acc,
           p->acc_stride, sp, vss->stride, (size_t)pb->v_group);
    }
}

/* P.V of rows [0, nr) for keys [kb, ke) into acc (rows acc_stride apart)
   from the weights s (rows block_k apart), one V scale group at a time:
   its weights fl(p_j s_jg) in part, then the kernel of V's dtype on the
   group's columns. */
static void segment_values(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                           const kv_src *vs, const kv_src *vss, size_t nr, int64_t kb, int64_t ke,
                           const float *s, float *part, float *acc)
{
    const int64_t nk = ke - kb, B = p->block_k, g = pb->v_group;
    attn_pv_tile_fn *const pv = dsp->pv_tile[pb->v.dtype];
    float fac[ATTN_MAX_BLOCK_K];
    for (int i = 0; i < p->v_segs; i++) {
        attn_kv_scales(vss, kb, ke, i, 1.0f, fac);
        for (size_t r = 0; r < nr; r++)
            for (int64_t c = 0; c < nk; c++)
                part[(int64_t)r * B + c] = s[(int64_t)r * B + c] * fac[c];
        for (int64_t j = kb, len; j < ke; j += len) {
            const char *vp = (const char *)attn_kv_run(vs, j, ke, &len) + i * g;
            pv(part + (j - kb), B, vp, vs->stride, nr, (size_t)len, (size_t)g, acc + i * g,
               p->acc_stride);
        }
    }
}

/* Folds keys [klo, khi) of the visible ranges into the rows' states, in
   blocks of block_k keys counted from the sequence's first key `base` (its
   kv_offsets entry): where its blocks start must not depend on where the
   sequence lies in the tensor, or its online softmax would group its keys
   differently alone and in a packed batch. */
static void forward_keys(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                         const row_ref *rows, int64_t n, int64_t kv_seq, int64_t kv_head,
                         int64_t base, int64_t klo, int64_t khi, online_row *st,
                         const float *q, int64_t q_stride, float *sbuf, float *acc)
{
    if (pb->opt.topk_indices) { /* the gather buffer follows the accumulator */
        forward_selected(dsp, pb, p, rows, n, kv_head, base, klo, khi, st, q, q_stride, sbuf,
                         acc, acc + p->block_rows * p->acc_stride);
        return;
    }
    const int want_entropy = pb->stats.entropy != NULL;
    attn_qk_tile_fn *const qk = attn_qk_kernel(dsp, pb);
    attn_pv_tile_fn *const pv = attn_pv_kernel(dsp, pb);
    const int pairs = pv != dsp->pv_tile[attn_v_kernel_dtype(pb)]; /* pv_bf16 */
    const kv_src ks = attn_kv_open(pb, &pb->k, kv_seq, kv_head, attn_k_cols(pb));
    const kv_src vs = attn_kv_open(pb, &pb->v, kv_seq, kv_head, pb->v_dim);
    const kv_src kts = attn_kv_open_tail(pb, kv_seq, kv_head);
    const kv_src *const tail = pb->k_tail_dim ? &kts : NULL;
    /* FP8 scales per key row (attn.h 1.6), or per group of channels (1.8,
       the rows then decoded into the stage after the accumulator): their
       views, opened like k, v */
    const kv_src kss =
        attn_kv_open_scales(pb, &pb->k_scales, pb->k_group, attn_k_cols(pb), kv_seq, kv_head);
    const kv_src vss =
        attn_kv_open_scales(pb, &pb->v_scales, pb->v_group, pb->v_dim, kv_seq, kv_head);
    const int k_rows = pb->k_scales.data && !pb->k_group;
    const int v_rows = pb->v_scales.data && !pb->v_group;
    float *const stage = acc + p->block_rows * p->acc_stride;
    /* segments (above): the partial scores, then the weights of a V group */
    float *const part = stage + p->stage_keys * p->stage_stride;
    float kfac[ATTN_MAX_BLOCK_K], vfac[ATTN_MAX_BLOCK_K];
    int64_t ulo, uhi;
    attn_visible_union(rows, n, &ulo, &uhi);
    ulo = attn_max64(ulo, klo);
    uhi = attn_min64(uhi, khi);
    for (int64_t k0 = ulo < uhi ? base + (ulo - base) / p->block_k * p->block_k : uhi; k0 < uhi;
         k0 += p->block_k) {
        const int64_t kb = attn_max64(k0, ulo), ke = attn_min64(k0 + p->block_k, uhi);
        const int64_t nk = ke - kb;
        if (k_rows)
            attn_kv_scales(&kss, kb, ke, 0, pb->scale, kfac);
        if (v_rows)
            attn_kv_scales(&vss, kb, ke, 0, 1.0f, vfac);
        for (int64_t r = 0, run_end; (run_end = attn_next_run(rows, n, &r, kb, ke)) > r;
             r = run_end) {
            const size_t nr = (size_t)(run_end - r);
            float *s = sbuf + r * p->block_k;
            if (p->k_segs)
                segment_scores(dsp, pb, p, &ks, &kss, tail, q + r * q_stride, q_stride, nr, kb,
                               ke, s, part + r * p->block_k);
            else if (p->k_grp)
                grp_scores(dsp, pb, p, &ks, &kss, q + r * q_stride, q_stride, nr, kb, ke, s);
            for (int64_t j = kb, len; j < ke && !p->k_segs && !p->k_grp; j += len) {
                ptrdiff_t kstride;
                const void *kp =
                    attn_kv_rows(dsp, &ks, &kss, pb->k_group, tail, stage, p, j, ke, &len, &kstride);
                qk(q + r * q_stride, q_stride, kp, kstride,
                                          nr, (size_t)len, (size_t)pb->head_dim, pb->qk_scale,
                                          s + (j - kb), p->block_k);
            }
            if (k_rows) /* qk_scale is 1: each score times fl(scale * its key's scale) */
                attn_scale_columns(s, p->block_k, (int64_t)nr, kfac, nk);
            for (int64_t rr = r; rr < run_end; rr++)
                online_update(dsp, pb, &rows[rr], &st[rr], sbuf + rr * p->block_k, kb, nk,
                              acc + rr * p->acc_stride, want_entropy);
            /* the weights' sum (and entropy) are taken: each weight times
               its value row's scale before P.V */
            if (v_rows)
                attn_scale_columns(s, p->block_k, (int64_t)nr, vfac, nk);
            if (p->v_segs)
                segment_values(dsp, pb, p, &vs, &vss, nr, kb, ke, s, part + r * p->block_k,
                               acc + r * p->acc_stride);
            else if (p->v_grp)
                grp_values(dsp, pb, p, &vs, &vss, nr, kb, ke, s, acc + r * p->acc_stride);
            for (int64_t j = kb, len; j < ke && !p->v_segs && !p->v_grp; j += len) {
                /* the bf16 P.V pairs keys 2m, 2m + 1 of a call: a run
                   that starts at an odd key of the sequence gives that key
                   a call of its own, so that the pairs are the same keys
                   whether a page boundary (or a stage) cuts the run or not */
                const int64_t end = pairs && (j - base) % 2 ? j + 1 : ke;
                ptrdiff_t vstride;
                const void *vp =
                    attn_kv_rows(dsp, &vs, &vss, pb->v_group, NULL, stage, p, j, end, &len, &vstride);
                pv(s + (j - kb), p->block_k, vp, vstride, nr,
                                          (size_t)len, (size_t)pb->v_dim,
                                          acc + r * p->acc_stride, p->acc_stride);
            }
        }
    }
}

/* ------------------------------------------------------------ split-KV */

/* The split-KV workspace, or the shared prefixes' (the same layout, with
   the prefix chunks as parts; its counters unused). */
typedef struct split_ws {
    atomic_int *done; /* per task block: chunks finished */
    float *states;    /* per (row, part): m, l, t, poisoned */
    float *acc;       /* per (row, part): acc_stride floats */
    int64_t acc_stride;
    int64_t parts;    /* per row */
} split_ws;

static split_ws ws_open(const attn_problem *pb, void *mem, int64_t parts)
{
    attn_split_layout l;
    attn_split_layout_of(pb->batch, pb->q_heads, pb->q_len, pb->v_dim, parts, &l);
    char *base = (char *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    return (split_ws){(atomic_int *)(void *)(base + l.counters_at),
                      (float *)(void *)(base + l.states_at), (float *)(void *)(base + l.acc_at),
                      l.acc_stride, parts};
}

static split_ws split_open(const attn_problem *pb)
{
    return ws_open(pb, pb->workspace, pb->splits);
}

static int64_t row_index(const attn_problem *pb, const row_ref *row)
{
    return (row->b * pb->q_heads + row->h) * pb->q_len + row->i;
}

/* Stores the rows' states of chunk `c` in the workspace. */
static void split_store(const attn_problem *pb, const split_ws *ws, const task_plan *p,
                        const row_ref *rows, int64_t n, int64_t c, const online_row *st,
                        const float *acc)
{
    for (int64_t r = 0; r < n; r++) {
        const int64_t at = row_index(pb, &rows[r]) * ws->parts + c;
        float *state = ws->states + at * 4;
        state[0] = st[r].m;
        state[1] = st[r].l;
        state[2] = st[r].t;
        state[3] = (float)st[r].poisoned;
        /* a row that sees no key at all has no accumulator (only a sink) */
        if (!st[r].poisoned && st[r].m != -INFINITY && rows[r].lo < rows[r].hi)
            memcpy(ws->acc + at * ws->acc_stride, acc + r * p->acc_stride,
                   (size_t)pb->v_dim * sizeof(float));
    }
}

/*
 * Merges the first `parts` stored parts of a row in order into acc and the
 * state *o, which holds at most a sink (no accumulator): acc = sum_c
 * exp(m_c - M) acc_c, l and t likewise (the online softmax's rescale, once
 * per part), M the largest m.
 */
static void merge_parts(const attn_dsp *dsp, const attn_problem *pb, const split_ws *ws,
                        const row_ref *row, int64_t parts, online_row *o, float *acc)
{
    const int64_t first = row_index(pb, row) * ws->parts;
    const online_row in = *o;
    if (in.poisoned)
        return;
    for (int64_t c = 0; c < parts; c++) {
        const float *state = ws->states + (first + c) * 4;
        if (state[3] != 0.0f)
            o->poisoned = 1;
        else if (state[0] > o->m)
            o->m = state[0];
    }
    if (o->poisoned || o->m == -INFINITY)
        return;
    o->l = o->t = 0.0f;
    if (in.m != -INFINITY) { /* the sink's entry */
        const float alpha = expf(in.m - o->m);
        o->l += alpha * in.l;
        o->t += alpha * (in.t + in.l * (in.m - o->m));
    }
    const int has_acc = row->lo < row->hi; /* else only a sink: finish_row needs none */
    const float *x[ATTN_WSUM_MAX_PARTS];
    float w[ATTN_WSUM_MAX_PARTS];
    size_t k = 0;
    if (has_acc)
        attn_fill(acc, pb->v_dim, 0.0f);
    for (int64_t c = 0; c < parts; c++) {
        const float *state = ws->states + (first + c) * 4;
        if (state[0] == -INFINITY)
            continue; /* no visible key in this chunk: its acc was not written */
        const float alpha = expf(state[0] - o->m);
        o->l += alpha * state[1];
        o->t += alpha * (state[2] + state[1] * (state[0] - o->m));
        if (!has_acc)
            continue;
        w[k] = alpha;
        x[k++] = ws->acc + (first + c) * ws->acc_stride;
        if (k == ATTN_WSUM_MAX_PARTS) {
            dsp->wsum(acc, x, w, k, (size_t)pb->v_dim);
            k = 0;
        }
    }
    if (k)
        dsp->wsum(acc, x, w, k, (size_t)pb->v_dim);
}

/* ------------------------------------------------------------ shared prefixes */

/* The groups of a call, and the prefix tasks of one: its query rows
   (sequence-major, then position, then head, as a head group stacks them)
   per KV head, in blocks of block_rows, for each chunk of its keys. */
typedef struct prefix_group {
    int64_t b0, b1, keys;          /* sequences [b0, b1], keys [0, keys) of b0 */
    int64_t rows, blocks, chunks;  /* per KV head */
    int64_t block_rows;            /* rows per block: the fewest blocks, evened out */
} prefix_group;

/* The chunks a shared prefix of `keys` keys is attended in: the prefix
   tasks' count, the parts a sequence's task merges and the workspace's. */
static int64_t prefix_chunks(int64_t keys)
{
    return (keys + ATTN_PREFIX_CHUNK - 1) / ATTN_PREFIX_CHUNK;
}

/* The group that starts at sequence b, and the sequence after it. */
static int64_t next_group(const attn_problem *pb, int64_t block_rows, int64_t b,
                          prefix_group *g)
{
    attn_prefix_group(pb->opt.shared_prefix, pb->batch, b, &g->b0, &g->b1, &g->keys);
    g->rows = 0;
    for (int64_t c = g->b0; c <= g->b1; c++)
        g->rows += attn_seq_q_len(pb, c) * pb->group;
    g->blocks = (g->rows + block_rows - 1) / block_rows;
    /* 64 rows in blocks of 42 would leave 22 for a second pass at a lower
       rate: two of 32 read the same keys as often, each at the full rate */
    g->block_rows = g->blocks ? (g->rows + g->blocks - 1) / g->blocks : 0;
    g->chunks = prefix_chunks(g->keys);
    return g->b1 + 1;
}

static size_t group_tasks(const attn_problem *pb, const prefix_group *g)
{
    return (size_t)(pb->kv_heads * g->blocks * g->chunks);
}

typedef struct prefix_ctx {
    const attn_dsp *dsp;
    const attn_problem *pb;
    task_plan plan; /* the forward's geometry, block_rows for converted queries */
} prefix_ctx;

/* Row r of a group's rows of KV head kv_head, in the first sequence's key
   positions (row_ref.shift), seeing only the shared keys. */
static row_ref group_row(const attn_problem *pb, const prefix_group *g, int64_t kv_head,
                         int64_t r)
{
    int64_t b = g->b0;
    for (; r >= attn_seq_q_len(pb, b) * pb->group; b++)
        r -= attn_seq_q_len(pb, b) * pb->group;
    row_ref row = attn_make_row(pb, b, kv_head * pb->group + r % pb->group, r / pb->group);
    const int64_t ko = pb->kv_offsets ? pb->kv_offsets[b] : 0;
    row.shift = ko - (pb->kv_offsets ? pb->kv_offsets[g->b0] : 0);
    row.hi = attn_min64(row.hi, ko + g->keys) - row.shift;
    row.lo -= row.shift;
    if (row.hi <= row.lo)
        row.lo = row.hi = ko - row.shift;
    return row;
}

static void task_prefix(void *vctx, size_t index)
{
    const prefix_ctx *ctx = vctx;
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;
    prefix_group g = {0};
    for (int64_t b = 0; b < pb->batch;) {
        b = next_group(pb, p->block_rows, b, &g);
        if (g.keys > 0 && index < group_tasks(pb, &g))
            break;
        if (g.keys > 0)
            index -= group_tasks(pb, &g);
    }
    const int64_t blk = (int64_t)index % g.blocks;
    const int64_t chunk = (int64_t)index / g.blocks % g.chunks;
    const int64_t kv_head = (int64_t)index / g.blocks / g.chunks;

    _Alignas(64) float scratch[ATTN_SCRATCH_FLOATS];
    row_ref rows[ATTN_MAX_BLOCK_Q];
    online_row st[ATTN_MAX_BLOCK_Q];
    const int64_t r0 = blk * g.block_rows, n = attn_min64(g.block_rows, g.rows - r0);
    float *qbuf = scratch, *sbuf = qbuf + p->block_rows * p->q_stride;
    float *acc = sbuf + p->block_rows * p->block_k;
    for (int64_t r = 0; r < n; r++) {
        rows[r] = group_row(pb, &g, kv_head, r0 + r);
        st[r] = (online_row){-INFINITY, 0.0f, 0.0f, 0};
        if (rows[r].lo < rows[r].hi)
            attn_fill(acc + r * p->acc_stride, pb->v_dim, 0.0f);
    }
    attn_convert_queries(dsp, pb, p, rows, n, qbuf);
    const int64_t base = pb->kv_offsets ? pb->kv_offsets[g.b0] : 0;
    const int64_t klo = base + chunk * ATTN_PREFIX_CHUNK;
    forward_keys(dsp, pb, p, rows, n, g.b0, kv_head, base, klo,
                 attn_min64(klo + ATTN_PREFIX_CHUNK, base + g.keys), st, qbuf, p->q_stride, sbuf,
                 acc);
    const split_ws ws = ws_open(pb, pb->prefix_workspace, pb->prefix_parts);
    split_store(pb, &ws, p, rows, n, chunk, st, acc);
}

/* Before the tasks, on the calling thread: the merge counters of a split,
   and the round of prefix tasks. */
static void prepare_forward(const task_ctx *ctx)
{
    const attn_problem *pb = ctx->pb;
    if (ctx->plan.splits > 1) {
        const split_ws ws = split_open(pb);
        for (size_t u = 0; u < ctx->plan.tasks / (size_t)ctx->plan.splits; u++)
            atomic_init(&ws.done[u], 0);
    }
    if (!pb->prefix_parts)
        return;
    prefix_ctx pc = {ctx->dsp, pb, ctx->plan};
    pc.plan.q_direct = 0; /* rows of several sequences: always converted */
    pc.plan.block_rows = attn_block_rows_within(
        ctx->dsp, forward_row_floats(&pc.plan),
        ATTN_SCRATCH_FLOATS - pc.plan.stage_keys * pc.plan.stage_stride);
    size_t tasks = 0;
    prefix_group g;
    for (int64_t b = 0; b < pb->batch;) {
        b = next_group(pb, pc.plan.block_rows, b, &g);
        if (g.keys > 0)
            tasks += group_tasks(pb, &g);
    }
    attn_run_tasks(pb->parallel_for, pb->parallel_ctx, task_prefix, &pc, tasks);
}

/* ------------------------------------------------------------ tasks */

static void task_forward(void *vctx, size_t index)
{
    const task_ctx *ctx = vctx;
    const attn_dsp *dsp = ctx->dsp;
    const attn_problem *pb = ctx->pb;
    const task_plan *p = &ctx->plan;

    _Alignas(64) float scratch[ATTN_SCRATCH_FLOATS];
    row_ref rows[ATTN_MAX_BLOCK_Q];
    online_row st[ATTN_MAX_BLOCK_Q];
    const size_t block = index / (size_t)p->splits;
    const int64_t chunk = (int64_t)(index % (size_t)p->splits);
    int64_t kv_head;
    int64_t n = attn_task_rows(pb, p, block, rows, &kv_head);
    if (n == 0)
        return; /* nothing of this block exists; a split counts it as done
                   nowhere, so no chunk of it waits for a merge either */
    const int64_t b = rows[0].b;
    /* keys [0, start) of this sequence: its group's shared prefix, which
       the prefix tasks attended */
    int64_t start = 0, parts = 0;
    if (pb->prefix_parts) {
        int64_t b0, b1;
        attn_prefix_group(pb->opt.shared_prefix, pb->batch, b, &b0, &b1, &start);
        parts = prefix_chunks(start);
    }

    float *qbuf = scratch;
    float *sbuf = qbuf + (p->q_direct ? 0 : p->block_rows * p->q_stride);
    float *acc = sbuf + p->block_rows * p->block_k;
    const float *q = qbuf;
    int64_t q_stride = p->q_stride;
    if (p->q_direct) {
        q = attn_row_ptr(&pb->q, rows[0].b, rows[0].h, rows[0].i);
        /* a block's rows: positions, or the heads of one position (top-k) */
        q_stride = p->heads_per_group > 1 ? pb->q.head_stride : pb->q.row_stride;
    } else {
        attn_convert_queries(dsp, pb, p, rows, n, qbuf);
    }
    const split_ws pws = parts ? ws_open(pb, pb->prefix_workspace, pb->prefix_parts)
                               : (split_ws){0};
    for (int64_t r = 0; r < n; r++) {
        /* A sink starts the row as its first entry: max z, sum exp(z - z) = 1,
           no value (the accumulator stays 0 for it). Split-KV counts it once,
           in chunk 0, and so the shared prefix's states. */
        const float sink = chunk == 0 ? attn_row_sink(pb, &rows[r]) : -INFINITY;
        st[r] = (online_row){-INFINITY, 0.0f, 0.0f, 0};
        if (isnan(sink) || sink == INFINITY)
            st[r].poisoned = 1;
        else if (sink != -INFINITY)
            st[r] = (online_row){sink, 1.0f, 0.0f, 0};
        if (rows[r].lo < rows[r].hi)
            attn_fill(acc + r * p->acc_stride, pb->v_dim, 0.0f);
        if (parts && chunk == 0 && rows[r].is_query)
            merge_parts(dsp, pb, &pws, &rows[r], parts, &st[r], acc + r * p->acc_stride);
    }
    /* this sequence's own chunks (src/driver/split.c): the grid's tasks
       past them have nothing to do. A sequence without query rows (its
       padded rows are written as fully masked) stays whole: the grid does
       not count it. */
    int64_t splits = 1, chunk_keys = 0;
    const int64_t seq_rows = attn_seq_q_len(pb, b);
    if (p->splits > 1 && seq_rows > 0)
        attn_split_plan(pb->q_heads, pb->kv_heads, seq_rows, attn_seq_kv_len(pb, b) - start,
                        pb->opt.topk_indices ? pb->opt.topk : 0, pb->opt.kv_splits, &splits,
                        &chunk_keys);
    if (chunk >= splits)
        return;
    const int64_t base = pb->kv_offsets ? pb->kv_offsets[b] : 0;
    if (splits == 1) {
        forward_keys(dsp, pb, p, rows, n, b, kv_head, base, base + start, INT64_MAX, st, q,
                     q_stride, sbuf, acc);
        for (int64_t r = 0; r < n; r++)
            finish_row(dsp, pb, &rows[r], &st[r], acc + r * p->acc_stride);
        return;
    }

    const split_ws ws = split_open(pb);
    /* chunks counted from the sequence's first own key, like the blocks */
    const int64_t klo = base + start + chunk * chunk_keys;
    forward_keys(dsp, pb, p, rows, n, b, kv_head, base, klo, klo + chunk_keys, st, q, q_stride,
                 sbuf, acc);
    split_store(pb, &ws, p, rows, n, chunk, st, acc);
    /* acq_rel: the last task sees every chunk's stores of this block */
    if (atomic_fetch_add_explicit(&ws.done[block], 1, memory_order_acq_rel) != splits - 1)
        return;
    for (int64_t r = 0; r < n; r++) {
        online_row merged = {-INFINITY, 0.0f, 0.0f, 0};
        merge_parts(dsp, pb, &ws, &rows[r], splits, &merged, acc + r * p->acc_stride);
        finish_row(dsp, pb, &rows[r], &merged, acc + r * p->acc_stride);
    }
}

/* ------------------------------------------------------------ entry points */

/* The workspace bytes a forward of this shape and these lengths needs to
   split (0: unsplit), for the most chunks one of its sequences takes. */
static size_t split_need(const attn_shape *s, const attn_options *o, int64_t *splits)
{
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    *splits = attn_split_grid(s->batch, s->q_heads, s->kv_heads, s->q_len, s->kv_len,
                              o->topk_indices ? o->topk : 0, o->q_lens,
                              o->kv_lens, o->kv_splits);
    if (*splits <= 1)
        return 0;
    return attn_split_bytes(s->batch, s->q_heads, s->q_len, v_dim, *splits);
}

/* The most chunks a group's shared prefix takes (0: no group shares). The
   entries are clamped: attn_forward_workspace_size reads them unchecked. */
static int64_t prefix_parts_of(const attn_shape *s, const attn_options *o)
{
    int64_t most = 0;
    for (int64_t b = 0, b0, b1, keys; o->shared_prefix && b < s->batch; b = b1 + 1) {
        attn_prefix_group(o->shared_prefix, s->batch, b, &b0, &b1, &keys);
        keys = attn_min64(keys, s->kv_len);
        most = attn_max64(most, prefix_chunks(keys));
    }
    return most;
}

/* The workspace of the prefix states (0: none, or it overflows size_t). */
static size_t prefix_need(const attn_shape *s, const attn_options *o, int64_t *parts)
{
    *parts = prefix_parts_of(s, o);
    const int64_t v_dim = s->v_dim ? s->v_dim : s->head_dim;
    return *parts ? attn_split_bytes(s->batch, s->q_heads, s->q_len, v_dim, *parts) : 0;
}

/* attn_op.scratch: whether this call splits and attends shared prefixes
   once, and its workspace (the split's, then the prefixes') as an output. */
static attn_status forward_scratch(attn_problem *pb, const attn_options *o, attn_range_set *set)
{
    const attn_shape s = {pb->batch, pb->q_heads, pb->kv_heads, pb->q_len,
                          pb->kv_len, pb->head_dim, pb->v_dim};
    int64_t splits, parts;
    size_t need = split_need(&s, o, &splits);
    const size_t pneed = prefix_need(&s, o, &parts);
    const size_t have = o->workspace ? o->workspace_size : 0;
    if (splits > 1 && need == 0 && o->kv_splits >= 2)
        return ATTN_ERR_SHAPE; /* its workspace would not fit size_t */
    if (splits > 1 && (need == 0 || have < need)) {
        if (o->kv_splits >= 2)
            return ATTN_ERR_ARG; /* asked for, impossible: say so */
        splits = 1;              /* automatic: the documented unsplit fallback */
        need = 0;
    }
    /* without room for the prefix states each sequence reads its prefix */
    /* (a sequence with top-k lists reads its prefix itself: its rows'
       selections decide which prefix keys are read at all) */
    const int shared = pneed > 0 && have >= need && have - need >= pneed && !o->topk_indices;
    if (splits > 1 || shared)
        ATTN_TRY(attn_add_array(set, o->workspace, (int64_t)(need + (shared ? pneed : 0)), 1, 1));
    pb->splits = splits;
    pb->workspace = splits > 1 ? o->workspace : NULL;
    pb->prefix_parts = shared ? parts : 0;
    pb->prefix_workspace = shared ? (char *)o->workspace + need : NULL;
    return ATTN_OK;
}

const attn_op attn_forward_op = {
    .reads_qk = 1,
    .reads_v = 1,
    .out_cols = ATTN_OUT_V_DIM,
    .rounds_out = 1, /* F32, F16 or BF16 out */
    .writes_stats = 1,
    .scratch = forward_scratch,
    .plan = plan_forward,
    .task = task_forward,
    .prepare = prepare_forward,
};

attn_status attn_forward_with(const attn_dsp *dsp, const attn_shape *shape,
                              const attn_options *opt, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *v,
                              const attn_tensor *out, const attn_row_stats *stats)
{
    attn_problem pb;
    attn_status status = attn_validate(&pb, &attn_forward_op, shape, opt, q, k, v, out, stats);
    if (status == ATTN_OK)
        attn_run(dsp, &pb);
    return status;
}

static attn_status checked_forward(const attn_shape *shape, const attn_options *opt,
                                   const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                                   const attn_tensor *out, const attn_row_stats *stats)
{
    return attn_forward_with(attn_dsp_active(), shape, opt, q, k, v, out, stats);
}

attn_status attn_forward(const attn_shape *shape, const attn_options *opt,
                         const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                         const attn_tensor *out, const attn_row_stats *stats)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_forward", mark, checked_forward(shape, opt, q, k, v, out, stats));
}

static attn_status checked_forward_workspace_size(const attn_shape *shape, const attn_options *opt,
                                                  size_t *bytes)
{
    if (!shape || !bytes)
        return ATTN_ERR_NULL;
    attn_options o;
    ATTN_TRY(attn_check_shape_options(shape, opt, &o));
    int64_t splits, parts;
    size_t need = split_need(shape, &o, &splits);
    const size_t pneed = prefix_need(shape, &o, &parts);
    if ((splits > 1 && need == 0) || (parts > 0 && pneed == 0) ||
        __builtin_add_overflow(need, pneed, &need))
        return ATTN_ERR_SHAPE; /* does not fit size_t */
    *bytes = need;
    return ATTN_OK;
}

/* The most any contents of q_lens, kv_lens and shared_prefix can need:
   the split of one query row over every key, and (with shared_prefix) a
   prefix of every key. */
static attn_status checked_forward_workspace_bound(const attn_shape *shape,
                                                   const attn_options *opt, size_t *bytes)
{
    if (!shape || !bytes)
        return ATTN_ERR_NULL;
    attn_options o = ATTN_OPTIONS_INIT;
    ATTN_TRY(attn_read_options(&o, opt));
    /* the arrays' contents are not read: only whether they are given */
    const int lens = o.q_lens || o.kv_lens, prefix = o.shared_prefix != NULL;
    o.q_lens = o.kv_lens = o.q_offsets = o.kv_offsets = o.shared_prefix = NULL;
    o.tree_parents = o.topk_indices = NULL;
    o.block_table = NULL;
    o.block_table_stride = o.block_size = o.num_blocks = 0;
    o.flags &= ~ATTN_SHARED_BLOCK_TABLE;
    const int64_t topk = o.topk;
    o.topk = 0;
    attn_options checked;
    ATTN_TRY(attn_check_shape_options(shape, &o, &checked));
    const attn_shape s = *shape;
    const int64_t v_dim = s.v_dim ? s.v_dim : s.head_dim;
    const int64_t splits = attn_split_grid_bound(s.q_heads, s.kv_heads, s.q_len, s.kv_len, topk,
                                                 lens, o.kv_splits);
    size_t need = splits > 1 ? attn_split_bytes(s.batch, s.q_heads, s.q_len, v_dim, splits) : 0;
    const int64_t parts = prefix && !topk ? prefix_chunks(s.kv_len) : 0;
    const size_t pneed = parts ? attn_split_bytes(s.batch, s.q_heads, s.q_len, v_dim, parts) : 0;
    if ((splits > 1 && need == 0) || (parts > 0 && pneed == 0) ||
        __builtin_add_overflow(need, pneed, &need))
        return attn_fail(ATTN_ERR_SHAPE, "the workspace would not fit size_t");
    *bytes = need;
    return ATTN_OK;
}

attn_status attn_forward_workspace_bound(const attn_shape *shape, const attn_options *opt,
                                         size_t *bytes)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_forward_workspace_bound", mark,
                           checked_forward_workspace_bound(shape, opt, bytes));
}

attn_status attn_forward_workspace_size(const attn_shape *shape, const attn_options *opt,
                                        size_t *bytes)
{
    const unsigned mark = attn_error_mark();
    return attn_error_done("attn_forward_workspace_size", mark, checked_forward_workspace_size(shape, opt, bytes));
}

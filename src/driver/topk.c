/* SPDX-License-Identifier: MIT */
/*
 * The forward's top-k path (attn.h, "Top-k sparse attention"). Per window of
 * key positions, the union of the task's rows' selections is cut, in key
 * order, into tiles of block_k keys, each an online-softmax step; K and V
 * rows are gathered for the kernels, so each selected key is read once per
 * task. A row's unselected keys get -inf after the epilogue. The tiles
 * depend on the task's rows only: batch invariance and determinism hold as
 * for dense calls.
 */
#include <stdint.h>
#include <string.h>

#include "forward.h"

/*
 * The selection's memory lies in the task scratch after the gather buffer,
 * not on the stack (attn.h bounds a task's stack): per position a window
 * bitmap and its topk_pos, then the union bitmap, two tiles' keys and the
 * scale factors. Each list is scanned once per window, so the plan makes
 * the window as wide as the scratch allows.
 */
#define TOPK_MIN_WINDOW 512
#define TOPK_MAX_WINDOW 65536 /* a tile's keys are uint16 offsets in their window */
#define TOPK_ROW_FLOATS(w) ((w) / 32 + 6)
#define TOPK_FIXED_FLOATS(w, g) ((w) / 32 + (g) + 2 * (g) + 16)
/* The union grows with each position, and every row multiplies all of it. */
#define TOPK_MAX_POSITIONS 8
/* floats to a 64-byte boundary, at most: the bitmaps are uint64 */
#define TOPK_ALIGN 16

typedef struct topk_pos {
    const int32_t *list; /* NULL: the position sees no key */
    int64_t lo, hi;
} topk_pos;

/* V laid out as K's first columns (MLA's latent cache); whether V is K is
   the pointers' to say, per call (a plan never reads them). */
static int v_as_k_columns(const attn_problem *pb)
{
    return pb->v.dtype == pb->k.dtype && pb->v_dim < pb->head_dim && pb->v_dim <= attn_k_cols(pb) &&
           pb->v.row_stride == pb->k.row_stride && pb->v.head_stride == pb->k.head_stride &&
           pb->v.batch_stride == pb->k.batch_stride;
}

/* The longer of a K and a V row, staged rows as f32. */
static int64_t gathered_row_bytes(const attn_problem *pb)
{
    const int64_t kb = attn_k_staged(pb) ? pb->head_dim * 4
                                         : pb->head_dim / attn_dtype_block(pb->k.dtype) *
                                               (int64_t)attn_dtype_size(pb->k.dtype);
    const int64_t vb = pb->v_group ? pb->v_dim * 4
                                   : pb->v_dim / attn_dtype_block(pb->v.dtype) *
                                         (int64_t)attn_dtype_size(pb->v.dtype);
    return attn_max64(kb, vb);
}

/* A tile plan: c keys gathered per kernel call, g keys per online step,
   rows query rows. */
typedef struct topk_fit {
    int64_t c, g, rows;
} topk_fit;

/*
 * Of the widths that fit `floats` of scratch, the widest whose block holds
 * `want` rows (8: the bf16 kernels' least), a gather of 32 keys preferred
 * (one bf16 key panel); own: floats of each row's besides its scores and
 * bitmaps (its query copy and accumulator, where they share the scratch).
 * rows 0: nothing fits. Nothing depends on the lengths (attn.h, "Batch
 * invariance").
 */
static topk_fit topk_search(const attn_dsp *dsp, const attn_problem *pb, int64_t want,
                            int64_t own, int64_t floats)
{
    static const int64_t widths[] = {256, 128, 64, 32, 16, 8, 4, 2, 1};
    const size_t n_widths = sizeof widths / sizeof widths[0];
    const int64_t row_floats = (gathered_row_bytes(pb) + 63) / 64 * 16;
    const int64_t bk = (int64_t)dsp->block_k;
    /* a tile of one gather may then serve P.V from K's copy */
    const int latent = v_as_k_columns(pb);
    topk_fit best = {1, 1, 0};
    for (size_t ci = 0; ci < n_widths && best.rows < want; ci++) {
        const int64_t c = widths[ci];
        if (c > 32 || c > bk)
            continue;
        for (size_t gi = 0; gi <= ci && best.rows < want; gi++) {
            const int64_t g = widths[gi];
            const int64_t room = floats - c * row_floats - TOPK_FIXED_FLOATS(TOPK_MIN_WINDOW, g);
            if (g > bk || g % c || room <= 0 || (latent && g != c))
                continue;
            const int64_t per_row = own + g + TOPK_ROW_FLOATS(TOPK_MIN_WINDOW);
            const int64_t fit = attn_min64(room / per_row, (int64_t)dsp->block_q);
            if (fit > best.rows || fit >= want)
                best = (topk_fit){c, g, fit};
        }
    }
    return best;
}

/* The window takes what the tiles leave, rows of own floats each. */
static void topk_place(const attn_problem *pb, const topk_fit *f, int64_t own, int64_t floats,
                       int64_t *gather_floats, int64_t *window)
{
    const int64_t row_floats = (gathered_row_bytes(pb) + 63) / 64 * 16;
    const int64_t used = f->c * row_floats + f->rows * (own + f->g);
    int64_t w = TOPK_MIN_WINDOW;
    while (w < TOPK_MAX_WINDOW && used + f->rows * TOPK_ROW_FLOATS(2 * w) +
                                          TOPK_FIXED_FLOATS(2 * w, f->g) <= floats)
        w *= 2;
    *gather_floats = f->c * row_floats;
    *window = w;
}

/* At most rows rows that hold whole query positions or an even share of
   one position's heads: a position's heads share its list. */
static int64_t whole_positions(int64_t rows, int64_t hpg)
{
    if (rows >= hpg)
        return rows - rows % hpg;
    const int64_t parts = (hpg + rows - 1) / rows;
    return (hpg + parts - 1) / parts;
}

void attn_plan_topk(const attn_dsp *dsp, const attn_problem *pb, task_plan *p)
{
    const int64_t hpg = p->heads_per_group;
    /* a whole GQA group: one task per position gathers its keys once */
    const int64_t want = attn_max64(8, attn_min64(hpg, (int64_t)dsp->block_q));
    /* F32 queries in place where a block's rows share one stride */
    const int direct = pb->q.dtype == ATTN_DTYPE_F32 && (hpg == 1 || hpg >= 8);
    const int64_t own = (direct ? 0 : p->q_stride) + p->acc_stride;
    /* the scores of rows x g may end on any float: the rest starts at the
       next 64 bytes (attn_forward_keys), TOPK_ALIGN floats of slack */
    const int64_t floats = ATTN_SCRATCH_FLOATS - TOPK_ALIGN;
    topk_fit f = topk_search(dsp, pb, want, own, floats);
    int64_t rows = attn_max64(1, attn_min64(f.rows, TOPK_MAX_POSITIONS * hpg));
    if (direct && hpg > 1) { /* one stride: a divisor of the group */
        rows = attn_min64(rows, hpg);
        while (hpg % rows)
            rows--;
    } else {
        rows = whole_positions(rows, hpg);
    }
    f.rows = rows;
    p->q_direct = direct;
    topk_place(pb, &f, own, floats, &p->gather_floats, &p->topk_window);
    p->gather_keys = f.c;
    p->block_k = f.g;
    p->block_rows = rows;
}

/* The scratch a block's query copies, scores and accumulators take: the
   second source's tiles go past it (attn_forward_extra). */
static int64_t block_floats(const task_plan *p)
{
    return p->block_rows * ((p->q_direct ? 0 : p->q_stride) + p->block_k +
                            (p->acc_ws ? 0 : p->acc_stride));
}

/* What is left for the second source's tiles: their scores start 64-byte
   aligned and end rounded up to 16 floats, so the bitmaps and gathered
   rows after them stay aligned (TOPK_ALIGN floats of slack each). */
static int64_t extra_room(const task_plan *p)
{
    return ATTN_SCRATCH_FLOATS - block_floats(p) - 2 * TOPK_ALIGN;
}

/*
 * attn_forward_sources: the second source's tiles in the scratch the first
 * source's block leaves, in sub-blocks of its rows. The block shrinks until
 * they are the tiles the second source would get alone (as wide, as many
 * rows), or to 8 rows: narrow tiles multiply the online steps, each an exp
 * pass over every row. Both blocks hold whole positions (or shares of one):
 * a sub-block across two positions gathers both lists for few rows. A
 * one-row block leaves room for one: its query copy and accumulator, a
 * gathered row (at most ATTN_MAX_HEAD_DIM floats each), a key block and the
 * smallest window's bitmaps take under 3 x 4096 + 1024 of the 16384 floats.
 * divisors: the block's rows must divide the group (queries in place).
 */
static topk_fit fit_extra(const attn_dsp *dsp, const attn_problem *x, const task_plan *alone,
                          task_plan *p, int divisors)
{
    const int64_t hpg = p->heads_per_group;
    const int64_t want = attn_max64(8, attn_min64(hpg, (int64_t)dsp->block_q));
    const int64_t floor = attn_min64(8, p->block_rows);
    topk_fit f;
    for (;;) {
        f = topk_search(dsp, x, want, 0, extra_room(p));
        f.rows = attn_min64(f.rows, p->block_rows);
        const int as_alone = f.c >= alone->gather_keys && f.g >= alone->block_k &&
                             f.rows >= attn_min64(alone->block_rows, p->block_rows);
        if (p->block_rows == 1 || (f.rows >= 1 && (as_alone || p->block_rows <= floor)))
            break;
        p->block_rows--;
        while (divisors && hpg % p->block_rows)
            p->block_rows--;
    }
    p->block_rows = whole_positions(p->block_rows, hpg);
    f = topk_search(dsp, x, want, 0, extra_room(p));
    f.rows = whole_positions(attn_max64(1, attn_min64(f.rows, p->block_rows)), hpg);
    return f;
}

void attn_plan_extra(const attn_dsp *dsp, const attn_problem *pb, task_plan *p,
                     int64_t direct_rows)
{
    const attn_problem *x = pb->kv2;
    const int64_t hpg = p->heads_per_group;
    task_plan alone = *p;
    attn_plan_topk(dsp, x, &alone);
    p->block_rows = attn_min64(p->block_rows, p->rows); /* rows past them: room for nothing */
    task_plan best = *p;
    /* a topk block of one stride keeps to divisors of the group */
    topk_fit f = fit_extra(dsp, x, &alone, &best, pb->opt.topk_indices && p->q_direct && hpg > 1);
    /* F32 queries read in place by blocks within one position: the copy's
       room goes to taller sub-blocks (MLA's MTP rows), where that gives
       more rows to each gather */
    if (!p->q_direct && direct_rows > 0 && hpg > 1) {
        task_plan d = *p;
        d.q_direct = 1;
        d.block_rows = attn_min64(attn_min64(direct_rows, p->rows), hpg);
        while (hpg % d.block_rows)
            d.block_rows--;
        const topk_fit fd = fit_extra(dsp, x, &alone, &d, 1);
        if (fd.rows > f.rows || (fd.rows == f.rows && d.block_rows > best.block_rows))
            best = d, f = fd;
    }
    *p = best;
    topk_place(x, &f, 0, extra_room(p), &p->x_gather_floats,
               &p->x_window);
    p->x_rows = f.rows;
    p->x_block_k = f.g;
    p->x_gather_keys = f.c;
}

/* ------------------------------------------------------------ gathering */

static void gather_rows(const kv_src *src, int64_t w0, const uint16_t *pos, int64_t n,
                        unsigned char *dst)
{
    for (int64_t t = 0; t < n; t++) {
        int64_t len;
        const void *row = attn_kv_run(src, w0 + pos[t], w0 + pos[t] + 1, &len);
        memcpy(dst + (size_t)t * src->row_bytes, row, src->row_bytes);
    }
}

static void stage_rows(const attn_dsp *dsp, const kv_src *src, const kv_src *sc, int64_t g,
                       const kv_src *tail, int64_t width, int64_t w0, const uint16_t *pos,
                       int64_t n, float *dst)
{
    for (int64_t t = 0; t < n; t++)
        attn_kv_stage(dsp, src, sc, g, tail, w0 + pos[t], 1, dst + t * width, width);
}

/* Takes and clears the next (at most) n keys of the union, in key order. */
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

static void prefetch_rows(const kv_src *src, int64_t w0, const uint16_t *pos, int64_t n)
{
    for (int64_t t = 0; t < n; t++) {
        int64_t len;
        const char *row = attn_kv_run(src, w0 + pos[t], w0 + pos[t] + 1, &len);
        for (size_t c = 0; c < src->row_bytes; c += 64)
            __builtin_prefetch(row + c, 0, 3);
    }
}

/* ------------------------------------------------------------ a task's keys */

typedef struct topk_task {
    const attn_dsp *dsp;
    const attn_problem *pb;
    const task_plan *p;
    const row_ref *rows;
    int64_t n;
    online_row *st;
    const float *q;
    int64_t q_stride;
    float *sbuf, *acc, *gbuf;
    attn_qk_tile_fn *qk;
    attn_pv_tile_fn *pv;
    kv_views kv;
    int want_entropy, k_staged, k_rows, v_rows, terms, v_in_k, reuse;
    ptrdiff_t k_units, v_units;
    int64_t G, C, W, words;     /* block_k, gather_keys, topk_window, W / 64 */
    uint64_t *bits, *uni;
    topk_pos *pos;
    int64_t npos;
    float *kfac, *vfac;
    uint16_t *upos;             /* offsets in their window */
} topk_task;

static void topk_open(topk_task *t, int64_t kv_head, int64_t klo, int64_t khi)
{
    const attn_problem *pb = t->pb;
    const task_plan *p = t->p;
    t->want_entropy = pb->stats.entropy != NULL;
    t->qk = attn_qk_kernel(t->dsp, pb);
    t->pv = attn_pv_kernel(t->dsp, pb);
    t->G = p->block_k;
    t->C = p->gather_keys;
    t->kv = attn_kv_views_open(pb, t->rows[0].b, kv_head);
    t->k_staged = attn_k_staged(pb);
    t->k_units = t->k_staged ? pb->head_dim : (ptrdiff_t)(t->kv.k.row_bytes / t->kv.k.esize);
    t->v_units = pb->v_group ? pb->v_dim : (ptrdiff_t)(t->kv.v.row_bytes / t->kv.v.esize);
    t->k_rows = pb->k_scales.data && !pb->k_group;
    t->v_rows = pb->v_scales.data && !pb->v_group;
    t->terms = attn_has_score_terms(pb);
    /* K's gather brought V's rows in, if both decode alike */
    const int same_decode = t->k_staged == (pb->v_group != 0) && pb->k_group == pb->v_group &&
                            (!pb->k_group || !memcmp(&pb->k_scales, &pb->v_scales,
                                                     sizeof pb->k_scales));
    t->v_in_k = v_as_k_columns(pb) && pb->v.data == pb->k.data && same_decode;
    t->reuse = t->v_in_k && t->C == t->G;
    t->W = p->topk_window;
    t->words = t->W / 64;
    t->bits = (uint64_t *)(void *)(t->gbuf + p->gather_floats);
    t->uni = t->bits + p->block_rows * t->words;
    t->pos = (topk_pos *)(void *)(t->uni + t->words);
    t->kfac = (float *)(void *)(t->pos + p->block_rows);
    t->vfac = t->kfac + t->G;
    t->upos = (uint16_t *)(void *)(t->vfac + t->G);
    /* rows stack one position's heads: rows[r].i - rows[0].i is its slot */
    const row_ref *rows = t->rows;
    t->npos = 0;
    for (int64_t r = 0; r < t->n; r++)
        if (r == 0 || rows[r].i != rows[r - 1].i) {
            const int sees = rows[r].is_query && rows[r].lo < rows[r].hi;
            t->pos[t->npos++] = (topk_pos){sees ? attn_topk_list(pb, &rows[r]) : NULL,
                                           attn_max64(rows[r].lo, klo),
                                           attn_min64(rows[r].hi, khi)};
        }
}

static void mark_window(const topk_task *t, int64_t base, int64_t w0, int64_t w1)
{
    const int64_t words = t->words;
    memset(t->uni, 0, (size_t)words * sizeof *t->uni);
    for (int64_t u = 0; u < t->npos; u++) {
        uint64_t *bu = t->bits + u * words;
        memset(bu, 0, (size_t)words * sizeof *bu);
        const topk_pos *pu = &t->pos[u];
        const int64_t lo = attn_max64(pu->lo, w0) - w0, hi = attn_min64(pu->hi, w1) - w0;
        if (!pu->list || lo >= hi)
            continue;
        for (int64_t i = 0; i < t->pb->opt.topk; i++) {
            const int64_t x = base + pu->list[i] - w0; /* -1 entries: below lo */
            if (x >= lo && x < hi)
                bu[x >> 6] |= (uint64_t)1 << (x & 63);
        }
        for (int64_t w = 0; w < words; w++)
            t->uni[w] |= bu[w];
    }
}

static void tile_scores(const topk_task *t, int64_t w0, const uint16_t *tp, int64_t nk,
                        int64_t kb, int64_t ke)
{
    const attn_problem *pb = t->pb;
    const int64_t G = t->G, C = t->C;
    const kv_src *const tail = pb->k_tail_dim ? &t->kv.k_tail : NULL;
    for (int64_t c = 0; c < nk; c += C) {
        const int64_t cn = attn_min64(C, nk - c);
        if (c + 2 * C < nk)
            prefetch_rows(&t->kv.k, w0, tp + c + 2 * C, attn_min64(C, nk - c - 2 * C));
        if (t->k_staged)
            stage_rows(t->dsp, &t->kv.k, &t->kv.k_scales, pb->k_group, tail, pb->head_dim, w0,
                       tp + c, cn, t->gbuf);
        else
            gather_rows(&t->kv.k, w0, tp + c, cn, (unsigned char *)t->gbuf);
        if (!t->v_in_k)
            prefetch_rows(&t->kv.v, w0, tp + c, cn);
        for (int64_t r = 0, e; (e = attn_next_run(t->rows, t->n, &r, kb, ke)) > r; r = e)
            t->qk(t->q + r * t->q_stride, t->q_stride, t->gbuf, t->k_units, (size_t)(e - r),
                  (size_t)cn, (size_t)pb->head_dim, pb->qk_scale, t->sbuf + r * G + c, G);
    }
    if (t->k_rows) {
        for (int64_t i = 0; i < nk; i++)
            attn_kv_scales(&t->kv.k_scales, w0 + tp[i], w0 + tp[i] + 1, 0, pb->scale,
                           t->kfac + i);
        for (int64_t r = 0, e; (e = attn_next_run(t->rows, t->n, &r, kb, ke)) > r; r = e)
            attn_scale_columns(t->sbuf + r * G, G, e - r, t->kfac, nk);
    }
}

static void tile_fold(const topk_task *t, int64_t w0, const uint16_t *tp, int64_t nk,
                      int64_t kb, int64_t ke)
{
    const attn_dsp *dsp = t->dsp;
    const attn_problem *pb = t->pb;
    const row_ref *rows = t->rows;
    for (int64_t r = 0, e; (e = attn_next_run(rows, t->n, &r, kb, ke)) > r; r = e)
        for (; r < e; r++) {
            float *s = t->sbuf + r * t->G;
            if (pb->opt.softcap > 0.0f)
                dsp->softcap(s, (size_t)nk, pb->opt.softcap);
            for (int64_t a = 0, z; t->terms && a < nk; a = z) {
                for (z = a + 1; z < nk && tp[z] == tp[z - 1] + 1; z++)
                    ;
                attn_score_terms(dsp, pb, &rows[r], s + a, w0 + tp[a], z - a);
            }
            /* unselected keys to -inf without a branch (they fall at
               random), NaN scores included; with one position all are
               selected */
            const uint64_t *sel = t->bits + (rows[r].i - rows[0].i) * t->words;
            for (int64_t i = 0; i < nk && t->npos > 1; i++) {
                const uint32_t keep = 0u - (uint32_t)(sel[tp[i] >> 6] >> (tp[i] & 63) & 1);
                uint32_t x;
                memcpy(&x, &s[i], sizeof x);
                x = (x & keep) | (~keep & 0xff800000u);
                memcpy(&s[i], &x, sizeof x);
            }
            attn_online_fold(dsp, pb, &t->st[r], s, nk, 0, nk, t->acc + r * t->p->acc_stride,
                             t->want_entropy);
        }
}

static void tile_values(const topk_task *t, int64_t w0, const uint16_t *tp, int64_t nk,
                        int64_t kb, int64_t ke)
{
    const attn_problem *pb = t->pb;
    const task_plan *p = t->p;
    const int64_t G = t->G, C = t->C;
    if (t->v_rows) {
        for (int64_t i = 0; i < nk; i++)
            attn_kv_scales(&t->kv.v_scales, w0 + tp[i], w0 + tp[i] + 1, 0, 1.0f, t->vfac + i);
        for (int64_t r = 0, e; (e = attn_next_run(t->rows, t->n, &r, kb, ke)) > r; r = e)
            attn_scale_columns(t->sbuf + r * G, G, e - r, t->vfac, nk);
    }
    for (int64_t c = 0; c < nk; c += C) {
        const int64_t cn = attn_min64(C, nk - c);
        if (!t->reuse && pb->v_group)
            stage_rows(t->dsp, &t->kv.v, &t->kv.v_scales, pb->v_group, NULL, pb->v_dim, w0,
                       tp + c, cn, t->gbuf);
        else if (!t->reuse)
            gather_rows(&t->kv.v, w0, tp + c, cn, (unsigned char *)t->gbuf);
        for (int64_t r = 0, e; (e = attn_next_run(t->rows, t->n, &r, kb, ke)) > r; r = e)
            t->pv(t->sbuf + r * G + c, G, t->gbuf, t->reuse ? t->k_units : t->v_units,
                  (size_t)(e - r), (size_t)cn, (size_t)pb->v_dim, t->acc + r * p->acc_stride,
                  p->acc_stride);
    }
}

/* Never inlined into attn_forward_keys: the two paths' locals would share
   one frame. */
__attribute__((noinline)) void
attn_forward_topk(const attn_dsp *dsp, const attn_problem *pb, const task_plan *p,
                  const row_ref *rows, int64_t n, int64_t kv_head, int64_t base, int64_t klo,
                  int64_t khi, online_row *st, const float *q, int64_t q_stride, float *sbuf,
                  float *acc, float *gbuf)
{
    topk_task t = {.dsp = dsp, .pb = pb, .p = p, .rows = rows, .n = n, .st = st, .q = q,
                   .q_stride = q_stride, .sbuf = sbuf, .acc = acc, .gbuf = gbuf};
    topk_open(&t, kv_head, klo, khi);
    int64_t ulo, uhi;
    attn_visible_union(rows, n, &ulo, &uhi);
    ulo = attn_max64(ulo, klo);
    uhi = attn_min64(uhi, khi);
    for (int64_t w0 = ulo; w0 < uhi; w0 += t.W) {
        mark_window(&t, base, w0, attn_min64(w0 + t.W, uhi));
        /* the next tile drawn and prefetched before this one is computed */
        uint16_t *tp = t.upos, *next = t.upos + t.G;
        int64_t word = 0, n_next = take_keys(t.uni, t.words, &word, t.G, next);
        for (int first = 1; n_next > 0; first = 0) {
            uint16_t *const swap = tp;
            tp = next, next = swap;
            const int64_t nk = n_next;
            n_next = take_keys(t.uni, t.words, &word, t.G, next);
            if (first)
                prefetch_rows(&t.kv.k, w0, tp, attn_min64(2 * t.C, nk));
            if (n_next > 0)
                prefetch_rows(&t.kv.k, w0, next, attn_min64(2 * t.C, n_next));
            const int64_t kb = w0 + tp[0], ke = w0 + tp[nk - 1] + 1;
            tile_scores(&t, w0, tp, nk, kb, ke);
            tile_fold(&t, w0, tp, nk, kb, ke);
            tile_values(&t, w0, tp, nk, kb, ke);
        }
    }
}

/*
 * The second source of attn_forward_sources, after the first's keys: the
 * rows' states go on with the keys of [klo, khi) each row's list names
 * (a chunk of a split), in sub-blocks of
 * x_rows rows whose tiles lie past the block's accumulators. The rows
 * become pb->kv2's (no mask but the list) in place: a copy would pass the
 * task stack's bound.
 */
__attribute__((noinline)) void attn_forward_extra(const attn_dsp *dsp, const attn_problem *pb,
                                                  const task_plan *p, row_ref *rows,
                                                  int64_t n, int64_t kv_head, int64_t klo,
                                                  int64_t khi, online_row *st, const float *q,
                                                  int64_t q_stride, float *sbuf, float *acc)
{
    const attn_problem *x = pb->kv2;
    task_plan xp = *p;
    xp.block_rows = p->x_rows;
    xp.block_k = p->x_block_k;
    xp.gather_keys = p->x_gather_keys;
    xp.gather_floats = p->x_gather_floats;
    xp.topk_window = p->x_window;
    float *const rest = p->acc_ws ? sbuf + p->block_rows * p->block_k
                                  : acc + p->block_rows * p->acc_stride;
    float *const xs = (float *)(((uintptr_t)rest + 63) & ~(uintptr_t)63);
    float *const gbuf =
        xs + (p->x_rows * p->x_block_k + TOPK_ALIGN - 1) / TOPK_ALIGN * TOPK_ALIGN;
    for (int64_t r0 = 0; r0 < n; r0 += p->x_rows) {
        const int64_t m = attn_min64(p->x_rows, n - r0);
        int any = 0;
        for (int64_t r = r0; r < r0 + m; r++) {
            any |= rows[r].extra;
            const int first = rows[r].lo < rows[r].hi;
            rows[r] = attn_extra_row(pb, &rows[r]);
            rows[r].extra = first; /* now the first source's keys lie outside */
        }
        if (any)
            attn_forward_topk(dsp, x, &xp, rows + r0, m, kv_head, 0, klo, khi, st + r0,
                              q + r0 * q_stride, q_stride, xs, acc + r0 * p->acc_stride, gbuf);
    }
}

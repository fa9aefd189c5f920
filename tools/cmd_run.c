/* SPDX-License-Identifier: MIT */
/* attn run: time attn_forward on one problem and verify sampled rows. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char run_intro[] =
    "Usage: attn run [options]\n"
    "\n"
    "Times attn_forward (O = softmax(Q.K^T * scale) . V, fused) with the built-in\n"
    "thread pool, then verifies sampled output rows against the scalar oracle.\n"
    "Q, K and V are filled with seeded pseudo-random values in [-1, 1] (a sum of\n"
    "four uniforms: bell-shaped), layout [batch][head][row][dim], contiguous (see\n"
    "--paged-block and --packed for the layouts serving engines use).\n"
    "\n"
;

static const char run_outro[] =
    "Output:\n"
    "  time per call (mean, median and best), GFLOP/s counting 2*head_dim +\n"
    "  2*v_dim flops (= 4*d when v_dim = d) per VISIBLE query-key pair (causal and\n"
    "  window masks are counted exactly) and their share of the FMA peak measured\n"
    "  in the same run on the same threads (each runs a register-only loop of the\n"
    "  widest FMA the CPU has, best of 1 ms repetitions, about 40 ms), the ISA\n"
    "  used. Decode-like forward problems (q_len <= 16) also get: GB/s of\n"
    "  K+V bytes read once per call and, where K/V are contiguous (not\n"
    "  --paged-block or --packed), read from copies rotated out of the\n"
    "  last-level cache: the floor, a plain read of the same bytes on the same\n"
    "  threads after each call, and the call's time in floor times; the roofline\n"
    "  T* = max(the floor's read time, FLOPs / the FMA peak) and the call's time\n"
    "  in T*s (1.00x: at the roofline). With --precision bf16 or int8 where the\n"
    "  CPU runs them on dot-product units, the peak is that of those units,\n"
    "  measured the same way (vdpbf16ps; vpdpbusd for QK with the FMA for PV in\n"
    "  the int8 mode: FLOPs / (QK FLOPs / its peak + PV FLOPs / the FMA peak);\n"
    "  on the amx table the tile unit's, tdpbf16ps and tdpbssd).\n"
    "  The FMA peak is measured again just before and just after the timed calls,\n"
    "  and on one thread alone: when those differ a lot, or the pool's peak is\n"
    "  far below one thread's times the cores its threads run on, the machine\n"
    "  looks busy, and a warning on stderr says that the % peak figures are\n"
    "  unreliable.\n"
    "\n"
    "Verification:\n"
    "  Each sampled row i of (batch b, head h) is recomputed on its own with the\n"
    "  scalar ISA (attn_isa_select(ATTN_ISA_SCALAR), restored afterwards) as a\n"
    "  mask-free one-query problem over exactly its visible keys [lo, hi): with\n"
    "  off = kv_len - q_len (bottom-right alignment), hi = i + off + 1 when causal\n"
    "  (else kv_len) and lo = i + off - W + 1 for a window W (else 0), hi also at\n"
    "  most i + off + R for --window-right R, clipped to [0, kv_len]. Row pointers\n"
    "  are passed through attn_tensor strides, so the oracle sees the same data\n"
    "  and checks the masks as well as the kernels. It gets the same sink; ALiBi\n"
    "  reaches it as an explicit bias row -slope*|i + off - j| (its own alignment\n"
    "  would measure from hi - 1). A row with no visible key must be exactly 0.\n"
    "  Tolerance, per row: |o - o_ref| <= 8 * u * (2*sqrt(d)*A + sqrt(n) + 8) * V\n"
    "    u = 2^-24 (f32 unit roundoff), d = head_dim, n = visible keys,\n"
    "    A = |scale| * max_j sum_t |q_t k_jt| (largest magnitude a score's terms\n"
    "        reach), V = max |v| over the visible keys.\n"
    "  Why: both sides compute in f32 but add in different orders (tiles, SIMD\n"
    "  lanes, FMA, online-softmax rescaling) and use different exp routines\n"
    "  (<= 1 ulp each). A score's rounding error grows like sqrt(d)*u*A\n"
    "  (random-walk model of d roundings each <= u*A); a score perturbation ds\n"
    "  moves o by at most 2*max|ds|*V; the weighted sum over n keys adds about\n"
    "  sqrt(n)*u*V, and exp and rescaling a few u*V (the +8 term). The leading\n"
    "  8 is a safety factor over the model's constants (observed errors stay\n"
    "  under 1% of the bound). Real bugs cost more: dropping or adding one of n\n"
    "  keys moves o by about V/n (5x the bound at n = 4096, more for fewer keys).\n"
    "  Reported: max abs error, max relative error (per row, relative to the\n"
    "  row's largest |o_ref|), and the worst error/tolerance ratio.\n"
    "  With --precision bf16 or int8 the oracle runs in the default mode, and the\n"
    "  tolerance adds the mode's derived bound (attn.h): a score error E (the\n"
    "  largest over the row's keys of the mode's per-score bound) moves o by at\n"
    "  most expm1(2E) * V; bf16 also rounds the weights and v: + B * V, B = 2^-7 + 2^-16.\n"
  "  With --alibi the tolerance adds 12 * u * B * V, B = the largest |ALiBi\n"
    "  bias| of the row's keys: the library may fuse the bias into one FMA where\n"
    "  the oracle rounds twice (each within 3u|bias| of exact).\n"
    "\n"
    "Backward (--backward):\n"
    "  Times attn_backward on the same inputs, a seeded dout, and the out and lse\n"
    "  of one attn_forward; GFLOP/s count (6*head_dim + 4*v_dim) flops per visible\n"
    "  pair (S, dP, dV, dK, dQ). Sampled dq rows are recomputed in float64 from\n"
    "  the formulas of attn.h; tolerance per row, a model like the forward's:\n"
    "    8 * |scale| * max|k| * (e_s * sum_j p_j |dP_j - D| + e_a + sqrt(n) u sum_j |dS_j|)\n"
    "  e_s = u (2 sqrt(d) A + sqrt(n) + 8), the relative error of a recomputed\n"
    "  weight; e_a = 2 sqrt(dv) u W + sum_t |dout_t| e_s V, the error of dP_j - D\n"
    "  (W = max_j sum_t |dout_t v_jt|). dk and dv are not sampled here (every\n"
    "  key sums over all rows): the test suite checks them on every ISA.\n"
    "\n"
    "JSON (--json):\n"
    "  One object: command, libattn, preset, about, changed_by_options, op\n"
    "  (attn_forward, attn_plan_run or attn_backward); shape {batch, q_heads,\n"
    "  kv_heads, q_len, kv_len, head_dim, v_dim}; options {causal, window,\n"
    "  window_right, scale, softcap, kv_dtype, k_tail, fp8_scales, sinks, alibi,\n"
    "  packed, paged_block, shared_prefix, topk, tree, precision,\n"
    "  precision_native, splits, seed}; isa, threads, split_workspace_bytes;\n"
    "  time {calls, single_cold, mean_ms, median_ms, min_ms}; gflop_per_call,\n"
    "  gflops, visible_pairs_percent; peak {gflops, percent, units, kind,\n"
    "  threads, before_gflops, after_gflops, single_thread_gflops, cores};\n"
    "  busy; busy_why; memory (decode-like forward problems, else null)\n"
    "  {kv_gb_s, kv_mb_per_call, copies, floor_gb_s, x_floor, t_star_ms,\n"
    "  x_t_star}, a figure not measured being null; verify {rows, against,\n"
    "  max_abs, max_rel, worst_ratio, pass} (rows 0: skipped). Times in\n"
    "  milliseconds; busy is true when the FMA peak measured before and after\n"
    "  the timed calls differ a lot, or the pool's peak is far below one\n"
    "  thread's times its cores: the machine looked busy and the percentages\n"
    "  of the peak are unreliable (a warning on stderr says so too).\n"
    "\n"
    "Exit status: 0 pass, 1 verification failed, 2 bad arguments (options the\n"
    "library would refuse together included, checked before any call), 3 library\n"
    "error (its attn_last_error line first) or out of memory.\n";

typedef struct report {
    const cli_settings *x;
    const preset *pre;
    bool overridden;
    const problem *p;
    const measurement *m;
    const peak_check *pc;
} report;

/* The problem, before it runs. */
static void print_header(const report *r)
{
    const problem *p = r->p;
    const attn_shape *s = &p->shape;
    if (r->overridden)
        printf("attn run: preset %s, changed by options\n", r->pre->name);
    else
        printf("attn run: preset %s (%s)\n", r->pre->name, r->pre->about);
    printf("  shape    batch %" PRId64 ", q_heads %" PRId64 ", kv_heads %" PRId64
           ", q_len %" PRId64 ", kv_len %" PRId64 ", head_dim %" PRId64 ", v_dim %" PRId64 "\n",
           s->batch, s->q_heads, s->kv_heads, s->q_len, s->kv_len, s->head_dim, v_dim_of(s));
    const attn_options *o = &p->g.opt;
    char window_text[32] = "off", softcap_text[32] = "off";
    if (o->window)
        snprintf(window_text, sizeof window_text, "%" PRId64, o->window);
    if (o->softcap != 0.0f)
        snprintf(softcap_text, sizeof softcap_text, "%g", (double)o->softcap);
    char tail_text[48] = "";
    if (p->g.present[ATTN_OPT_POS_k_tail] && o->k_tail_dim > 0)
        snprintf(tail_text, sizeof tail_text, " (K's last %" PRId64 " in f32)", o->k_tail_dim);
    printf("  options  %s, window %s, scale %g%s, softcap %s, K/V %s%s, seed %" PRIu64 "\n",
           (o->flags & ATTN_CAUSAL) ? "causal" : "not causal", window_text, (double)scale_of(p),
           o->scale == 0.0f ? " (1/sqrt(head_dim))" : "", softcap_text,
           dtype_name(kv_dtype_of(p)), tail_text, r->x->seed);
    if (o->window_right || has_sink(p) || has_alibi(p)) {
        char right_text[32] = "off", sink_text[32] = "off";
        if (o->window_right)
            snprintf(right_text, sizeof right_text, "%" PRId64, o->window_right);
        if (has_sink(p))
            snprintf(sink_text, sizeof sink_text, "%g", (double)sink_of(p));
        printf("  modifiers window_right %s, sinks %s, ALiBi %s\n", right_text, sink_text,
               has_alibi(p) ? "on (standard slopes)" : "off");
    }
    if (is_packed(p)) {
        int64_t first_q, first_k, last_q, last_k;
        seq_lengths(p, 0, &first_q, &first_k);
        seq_lengths(p, s->batch - 1, &last_q, &last_k);
        printf("  layout   packed: %" PRId64 " sequences of %" PRId64 "..%" PRId64
               " queries, [tokens][heads][dim] with offsets\n", s->batch, first_q, last_q);
    }
    if (paged_block_of(p) > 0)
        printf("  layout   K/V paged: blocks of %" PRId64 " keys, shuffled block table\n",
               paged_block_of(p));
    if (r->x->backward)
        printf("  op       attn_backward (dq, dk, dv), after one attn_forward for out and lse\n");
    else if (r->x->plan)
        printf("  op       attn_plan_run on a plan made once (attn_plan_forward)\n");
    fflush(stdout);
}

static const char *peak_kind_of(const report *r)
{
    const measurement *m = r->m;
    if (!strcmp(m->peak_what, "FMA"))
        return cli_fma_peak_kind();
    return cli_peak_kind_name(r->p->g.opt.precision == ATTN_PRECISION_BF16 ? CLI_PEAK_BF16
                                                                           : CLI_PEAK_INT8);
}

static double call_flops(const report *r)
{
    return r->x->backward ? backward_flops_per_call(r->p) : flops_per_call(r->p);
}

/* Visible query-key pairs, % of all. */
static double visible_percent(const problem *p)
{
    return 100.0 * visible_pairs(p) / ((double)p->shape.q_len * (double)p->shape.kv_len);
}

/* The measurement, after the header. */
static void print_result(const report *r)
{
    const cli_settings *x = r->x;
    const problem *p = r->p;
    const measurement *m = r->m;
    const attn_shape *s = &p->shape;
    char mean[32], best[32], median[32];
    format_ms(mean, sizeof mean, m->time.mean_s);
    format_ms(best, sizeof best, m->time.best_s);
    format_ms(median, sizeof median, m->time.median_s);
    printf("  isa      %s, %d thread%s\n", attn_isa_name(m->isa), (int)m->threads,
           m->threads == 1 ? "" : "s");
    if (p->g.opt.precision != ATTN_PRECISION_DEFAULT)
        printf("  precision %s (%s)\n", cli_precision_name(p->g.opt.precision),
               attn_precision_native(p->g.opt.precision, kv_dtype_of(p))
                   ? "dot-product kernels"
                   : "no dot-product kernel here: computed as the default mode");
    if (m->split)
        printf("  split    keys in chunks (--splits %" PRId64 "%s)\n", x->splits,
               x->splits ? "" : ": automatic");
    else if (!x->backward)
        printf("  split    none (--splits %" PRId64 "%s)\n", x->splits,
               x->splits == 1 ? "" : ": every sequence has enough tasks");
    if (m->workspace) /* split chunks, shared prefixes, wide rows' accumulators */
        printf("  workspace %.1f KiB (attn_forward_workspace_size)\n",
               (double)m->workspace / 1024.0);
    if (m->time.single_cold)
        printf("  time     %s ms/call (one call of >= 1 s, no warm-up)\n", mean);
    else
        printf("  time     %s ms/call (mean of %" PRId64 " call%s after a warm-up; median %s,"
               " best %s ms)\n", mean, m->time.calls, m->time.calls == 1 ? "" : "s", median,
               best);
    printf("  compute  %.2f GFLOP/s (%.3f GFLOP/call; %.1f%% of the %" PRId64 "x%" PRId64
           " query-key pairs visible)\n", m->gflops, call_flops(r) * 1e-9, visible_percent(p),
           s->q_len, s->kv_len);
    if (m->peak_gflops > 0.0)
        printf("           %.1f%% of the measured %s peak, %.1f GFLOP/s (%s, %d thread%s)%s\n",
               100.0 * m->gflops / m->peak_gflops, m->peak_what, m->peak_gflops,
               peak_kind_of(r), (int)m->threads, m->threads == 1 ? "" : "s",
               r->pc->busy ? ": unreliable, the machine looks busy" : "");
    if (is_decode_like(p) && !x->backward) {
        printf("  memory   %.2f GB/s of K+V read (%.1f MB/call", m->kv_gbytes_s,
               kv_bytes_per_call(p) * 1e-6);
        if (m->floor.calls)
            printf("; %" PRId64 " copies rotated, %.0f MB, so each call reads from DRAM)\n"
                   "  floor    %.2f GB/s: a plain read of the cache's bytes, same threads and "
                   "rotation;\n           this call takes %.2fx the floor's time for its bytes\n",
                   m->kv_copies, (double)m->kv_copies * kv_cache_bytes(p) * 1e-6,
                   m->floor_gbytes_s, m->time.mean_s / m->floor_read_s);
        else
            printf(")\n");
        if (m->t_star_s > 0.0) {
            /* the two terms of T* (measure): the floor's read, the FLOPs at the peak */
            char read_ms[32], fma_ms[32], t_star_ms[32];
            format_ms(read_ms, sizeof read_ms, kv_bytes_per_call(p) / (m->floor_gbytes_s * 1e9));
            format_ms(fma_ms, sizeof fma_ms, flops_per_call(p) / (m->peak_gflops * 1e9));
            format_ms(t_star_ms, sizeof t_star_ms, m->t_star_s);
            printf("  roofline T* = max(%s ms read, %s ms at %.1f GFLOP/s %s peak) = %s ms;\n"
                   "           this call takes %.2fx T*\n", read_ms, fma_ms, m->peak_gflops,
                   m->peak_what, t_star_ms, m->time.mean_s / m->t_star_s);
        }
    }
    if (x->verify_rows == 0) {
        printf("  verify   skipped (--verify-rows 0)\n");
        return;
    }
    const verify_result *vr = &m->verify;
    printf("  verify   %" PRId64 " %srow%s vs %s: max abs err %.3g, max rel err %.3g,"
           " worst err/tol %.3g: %s\n", vr->rows, x->backward ? "dq " : "", vr->rows == 1 ? "" : "s",
           x->backward ? "float64" : "the scalar oracle", vr->max_abs,
           vr->max_rel, vr->worst_ratio, vr->pass ? "PASS" : "FAIL");
}

static void print_json(const report *r)
{
    const cli_settings *x = r->x;
    const problem *p = r->p;
    const measurement *m = r->m;
    const attn_shape *s = &p->shape;
    const attn_options *o = &p->g.opt;
    json_out j;
    json_begin(&j, stdout);
    json_str(&j, "command", "run");
    json_str(&j, "libattn", attn_version_string());
    json_str(&j, "preset", r->pre->name);
    json_str(&j, "about", r->pre->about);
    json_bool(&j, "changed_by_options", r->overridden);
    json_str(&j, "op", x->backward ? "attn_backward" : x->plan ? "attn_plan_run" : "attn_forward");
    json_object(&j, "shape");
    json_int(&j, "batch", s->batch);
    json_int(&j, "q_heads", s->q_heads);
    json_int(&j, "kv_heads", s->kv_heads);
    json_int(&j, "q_len", s->q_len);
    json_int(&j, "kv_len", s->kv_len);
    json_int(&j, "head_dim", s->head_dim);
    json_int(&j, "v_dim", v_dim_of(s));
    json_close(&j);
    json_object(&j, "options");
    json_bool(&j, "causal", (o->flags & ATTN_CAUSAL) != 0);
    json_int(&j, "window", o->window);
    json_int(&j, "window_right", o->window_right);
    json_num(&j, "scale", scale_of(p));
    json_num(&j, "softcap", o->softcap);
    json_str(&j, "kv_dtype", dtype_name(kv_dtype_of(p)));
    json_int(&j, "k_tail", p->g.present[ATTN_OPT_POS_k_tail] ? o->k_tail_dim : 0);
    if (!p->g.present[ATTN_OPT_POS_k_scales])
        json_null(&j, "fp8_scales");
    else if (o->k_scale_group == 0)
        json_str(&j, "fp8_scales", "row");
    else
        json_int(&j, "fp8_scales", o->k_scale_group);
    json_num(&j, "sinks", has_sink(p) ? sink_of(p) : NAN);
    json_bool(&j, "alibi", has_alibi(p));
    json_bool(&j, "packed", is_packed(p));
    json_int(&j, "paged_block", paged_block_of(p));
    json_int(&j, "shared_prefix", s->batch > 1 ? shared_keys(p, 1) : 0);
    json_int(&j, "topk", p->g.present[ATTN_OPT_POS_topk_indices] ? o->topk : 0);
    if (p->g.present[ATTN_OPT_POS_tree_parents])
        json_str(&j, "tree", x->pins.pin[GEN_C_TREE] == GEN_TREE_FLAT ? "flat" : "chain");
    else
        json_null(&j, "tree");
    json_str(&j, "precision", cli_precision_name(o->precision));
    json_bool(&j, "precision_native",
              attn_precision_native(o->precision, kv_dtype_of(p)) != 0);
    json_int(&j, "splits", x->splits);
    json_uint(&j, "seed", x->seed);
    json_close(&j);
    json_str(&j, "isa", attn_isa_name(m->isa));
    json_int(&j, "threads", m->threads);
    json_int(&j, "split_workspace_bytes", (int64_t)m->workspace);
    json_timing(&j, "time", &m->time);
    json_num(&j, "gflop_per_call", call_flops(r) * 1e-9);
    json_num(&j, "gflops", m->gflops);
    json_num(&j, "visible_pairs_percent", visible_percent(p));
    json_peak(&j, m->peak_gflops, m->gflops, m->peak_what, peak_kind_of(r), m->threads, r->pc);
    if (is_decode_like(p) && !x->backward) {
        json_object(&j, "memory");
        json_num(&j, "kv_gb_s", m->kv_gbytes_s);
        json_num(&j, "kv_mb_per_call", kv_bytes_per_call(p) * 1e-6);
        json_int(&j, "copies", m->kv_copies);
        json_num(&j, "floor_gb_s", m->floor.calls ? m->floor_gbytes_s : NAN);
        json_num(&j, "x_floor", m->floor.calls ? m->time.mean_s / m->floor_read_s : NAN);
        json_num(&j, "t_star_ms", m->t_star_s > 0.0 ? m->t_star_s * 1e3 : NAN);
        json_num(&j, "x_t_star", m->t_star_s > 0.0 ? m->time.mean_s / m->t_star_s : NAN);
        json_close(&j);
    } else {
        json_null(&j, "memory");
    }
    json_verify(&j, &m->verify, x->verify_rows, x->backward ? "float64" : "scalar oracle");
    json_end(&j);
}

/* Runs p (checked by cli_check) and reports it. */
static int run(const cli_settings *x, const problem *p)
{
    attn_threadpool *pool = NULL;
    int rc = open_pool(x, &pool);
    if (rc)
        return rc;
    const report r0 = { x, x->preset, cli_problem_overridden(x), p, NULL, NULL };
    if (!x->json)
        print_header(&r0);
    measurement m;
    memset(&m, 0, sizeof m);
    peak_check pc;
    cli_peak_check_begin(pool, &pc);
    rc = x->backward ? measure_backward(p, x, pool, 2.0, &m)
                     : measure_verified(p, x, pool, 2.0, &m);
    if (!rc)
        cli_peak_check_end(pool, &pc);
    attn_threadpool_destroy(pool);
    if (rc)
        return rc;
    const report r = { x, x->preset, r0.overridden, p, &m, &pc };
    if (x->json)
        print_json(&r);
    else
        print_result(&r);
    cli_peak_warn("run", &pc);
    if (x->verify_rows && !m.verify.pass) {
        const verify_result *vr = &m.verify;
        fprintf(stderr, "attn run: verification FAILED; worst row: batch %" PRId64 ", head %" PRId64
                        ", query %" PRId64 " (err/tol %.3g)\n", vr->worst_b, vr->worst_h,
                vr->worst_i, vr->worst_ratio);
        return EXIT_VERIFY_FAILED;
    }
    return EXIT_OK;
}

int cmd_run(int argc, char **argv)
{
    cli_settings x;
    cli_defaults(CLI_RUN, &x);
    int rc = cli_parse(CLI_RUN, "run", argc, argv, &x);
    if (rc < 0) {
        cli_print_help(CLI_RUN, run_intro, run_outro);
        return EXIT_OK;
    }
    if (rc)
        return rc;
    problem p = cli_problem(&x);
    rc = cli_check("run", &x, &p);
    if (!rc)
        rc = run(&x, &p);
    problem_free(&p);
    return rc;
}

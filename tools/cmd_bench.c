/* SPDX-License-Identifier: MIT */
/* attn bench: every preset in turn, one table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char bench_intro[] =
    "Usage: attn bench [options]\n"
    "\n"
    "Runs the presets (small, prefill, prefill-f16, decode, decode-f16; see\n"
    "`attn run --help`) in turn with the active ISA and prints one table: preset,\n"
    "K/V dtype, ISA, threads, milliseconds per call, GFLOP/s and their share of\n"
    "the FMA peak measured in the same run on the same threads (% peak), GB/s\n"
    "of K+V read (decode presets), the call's time over the memory floor's (a\n"
    "plain read of the same bytes: x floor) and over the roofline\n"
    "T* = max(the floor's time, FLOPs / the FMA peak) (x T*), both for decode\n"
    "presets, and the verification result. A last line gives the peak, and a\n"
    "warning on stderr says when the machine looks busy (as `attn run --help`\n"
    "says): its % peak figures are unreliable then.\n"
    "\n";

static const char bench_outro[] =
    "JSON (--json):\n"
    "  One object: command, libattn, isa, threads; peak {gflops, units, kind,\n"
    "  threads, before_gflops, after_gflops, single_thread_gflops, cores}, busy,\n"
    "  busy_why (as `attn run --help` says); presets, a list of {preset,\n"
    "  kv_dtype, isa, threads, time {calls, single_cold, mean_ms, median_ms,\n"
    "  min_ms}, gflops, peak_percent, kv_gb_s, x_floor, x_t_star, verify {rows,\n"
    "  against, max_abs, max_rel, worst_ratio, pass}}, a figure the table shows\n"
    "  as - being null. The presets that ran are listed when one fails.\n"
    "\n"
    "Exit status: 0, 1 if a verification failed, 2 bad arguments, 3 library\n"
    "error (its attn_last_error line first) or out of memory.\n";

/* One preset's row, for the table and the JSON document. */
typedef struct row {
    const preset *pre;
    measurement m;
    bool decode_like;
} row;

static void print_row(const cli_settings *x, const row *r)
{
    const measurement *m = &r->m;
    char ms[32], gbs[32], ver[48], vs_floor[32] = "-", of_peak[32] = "-", vs_t_star[32] = "-";
    format_ms(ms, sizeof ms, m->time.mean_s);
    if (r->decode_like)
        snprintf(gbs, sizeof gbs, "%.2f", m->kv_gbytes_s);
    else
        snprintf(gbs, sizeof gbs, "-");
    if (m->floor.calls)
        snprintf(vs_floor, sizeof vs_floor, "%.2f", m->time.mean_s / m->floor_read_s);
    if (m->peak_gflops > 0.0)
        snprintf(of_peak, sizeof of_peak, "%.1f", 100.0 * m->gflops / m->peak_gflops);
    if (m->t_star_s > 0.0)
        snprintf(vs_t_star, sizeof vs_t_star, "%.2f", m->time.mean_s / m->t_star_s);
    if (x->verify_rows == 0)
        snprintf(ver, sizeof ver, "skipped");
    else
        snprintf(ver, sizeof ver, "%s (err/tol %.2g)", m->verify.pass ? "PASS" : "FAIL",
                 m->verify.worst_ratio);
    printf("%-12s %-4s %-7s %7d %12s %10.2f %7s %9s %9s %7s  %s\n", r->pre->name,
           dtype_name(r->pre->kv_dtype), attn_isa_name(m->isa), (int)m->threads, ms, m->gflops,
           of_peak, gbs, vs_floor, vs_t_star, ver);
    fflush(stdout);
}

static void print_json(const cli_settings *x, attn_threadpool *pool, const row *rows, size_t n,
                       double peak, const peak_check *pc)
{
    json_out j;
    json_begin(&j, stdout);
    json_str(&j, "command", "bench");
    json_str(&j, "libattn", attn_version_string());
    json_str(&j, "isa", attn_isa_name(attn_isa_active()));
    json_int(&j, "threads", attn_threadpool_size(pool));
    json_peak(&j, peak, NAN, "FMA", cli_fma_peak_kind(), attn_threadpool_size(pool), pc);
    json_array(&j, "presets");
    for (size_t i = 0; i < n; i++) {
        const measurement *m = &rows[i].m;
        json_object(&j, NULL);
        json_str(&j, "preset", rows[i].pre->name);
        json_str(&j, "kv_dtype", dtype_name(rows[i].pre->kv_dtype));
        json_str(&j, "isa", attn_isa_name(m->isa));
        json_int(&j, "threads", m->threads);
        json_timing(&j, "time", &m->time);
        json_num(&j, "gflops", m->gflops);
        json_num(&j, "peak_percent",
                 m->peak_gflops > 0.0 ? 100.0 * m->gflops / m->peak_gflops : NAN);
        json_num(&j, "kv_gb_s", rows[i].decode_like ? m->kv_gbytes_s : NAN);
        json_num(&j, "x_floor", m->floor.calls ? m->time.mean_s / m->floor_read_s : NAN);
        json_num(&j, "x_t_star", m->t_star_s > 0.0 ? m->time.mean_s / m->t_star_s : NAN);
        json_verify(&j, &m->verify, x->verify_rows, "scalar oracle");
        json_close(&j);
    }
    json_close(&j);
    json_end(&j);
}

int cmd_bench(int argc, char **argv)
{
    cli_settings x;
    cli_defaults(CLI_BENCH, &x);
    int rc = cli_parse(CLI_BENCH, "bench", argc, argv, &x);
    if (rc < 0) {
        cli_print_help(CLI_BENCH, bench_intro, bench_outro);
        return EXIT_OK;
    }
    if (rc || (rc = cli_check("bench", &x, NULL)))
        return rc;
    if (x.n_chosen == 0)
        for (size_t i = 0; i < cli_bench_count; i++)
            x.chosen[x.n_chosen++] = find_preset(cli_bench_order[i]);

    attn_threadpool *pool = NULL;
    rc = open_pool(&x, &pool);
    if (rc)
        return rc;
    if (!x.json)
        printf("%-12s %-4s %-7s %7s %12s %10s %7s %9s %9s %7s  %s\n", "preset", "K/V", "ISA",
               "threads", "ms/call", "GFLOP/s", "% peak", "GB/s", "x floor", "x T*", "verify");
    static row rows[CLI_MAX_CHOSEN];
    size_t n = 0;
    double peak = 0.0;
    int status = EXIT_OK;
    peak_check pc;
    cli_peak_check_begin(pool, &pc);
    for (size_t i = 0; i < x.n_chosen; i++) {
        problem pb = preset_problem(x.chosen[i], &x.chosen[i]->shape, NULL);
        row *r = &rows[n];
        memset(r, 0, sizeof *r);
        r->pre = x.chosen[i];
        r->decode_like = is_decode_like(&pb);
        rc = measure_verified(&pb, &x, pool, 1.0, &r->m);
        problem_free(&pb);
        if (rc) {
            status = rc;
            break;
        }
        n++;
        if (!x.json)
            print_row(&x, r);
        peak = r->m.peak_gflops; /* the same for every preset: measured once per pool */
        if (x.verify_rows && !r->m.verify.pass)
            status = EXIT_VERIFY_FAILED;
    }
    cli_peak_check_end(pool, &pc);
    if (x.json)
        print_json(&x, pool, rows, n, peak, &pc);
    else if (peak > 0.0)
        printf("FMA peak: %.1f GFLOP/s (%s, %d thread%s, measured in this run)%s\n", peak,
               cli_fma_peak_kind(), (int)attn_threadpool_size(pool),
               attn_threadpool_size(pool) == 1 ? "" : "s",
               pc.busy ? ": unreliable, the machine looks busy" : "");
    cli_peak_warn("bench", &pc);
    attn_threadpool_destroy(pool);
    return status;
}

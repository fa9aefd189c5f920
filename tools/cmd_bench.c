/* SPDX-License-Identifier: MIT */
/* attn bench: every preset in turn, one table. */
#include <stdio.h>

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
    "presets, and the verification result. A last line gives the peak.\n"
    "\n";

static const char bench_outro[] =
    "Exit status: 0, 1 if a verification failed, 2 bad arguments, 3 library\n"
    "error or out of memory.\n";

int cmd_bench(int argc, char **argv)
{
    cli_settings x;
    cli_defaults(CLI_BENCH, &x);
    int rc = cli_parse(CLI_BENCH, "bench", argc, argv, &x);
    if (rc < 0) {
        cli_print_help(CLI_BENCH, bench_intro, bench_outro);
        return EXIT_OK;
    }
    if (rc)
        return rc;
    if (x.n_chosen == 0)
        for (size_t i = 0; i < cli_bench_count; i++)
            x.chosen[x.n_chosen++] = find_preset(cli_bench_order[i]);

    attn_threadpool *pool = NULL;
    rc = open_pool(&x, &pool);
    if (rc)
        return rc;
    printf("%-12s %-4s %-7s %7s %12s %10s %7s %9s %9s %7s  %s\n", "preset", "K/V", "ISA",
           "threads", "ms/call", "GFLOP/s", "% peak", "GB/s", "x floor", "x T*", "verify");
    double peak = 0.0;
    int status = EXIT_OK;
    for (size_t i = 0; i < x.n_chosen; i++) {
        problem pb = preset_problem(x.chosen[i], &x.chosen[i]->shape, NULL);
        const problem *p = &pb;
        measurement m;
        fflush(stdout);
        rc = measure_verified(p, &x, pool, 1.0, &m);
        const bool decode_like = is_decode_like(p);
        problem_free(&pb);
        if (rc) {
            status = rc;
            break;
        }
        char ms[32], gbs[32], ver[48], vs_floor[32] = "-", of_peak[32] = "-", vs_t_star[32] = "-";
        format_ms(ms, sizeof ms, m.time.mean_s);
        if (decode_like)
            snprintf(gbs, sizeof gbs, "%.2f", m.kv_gbytes_s);
        else
            snprintf(gbs, sizeof gbs, "-");
        if (m.floor.calls)
            snprintf(vs_floor, sizeof vs_floor, "%.2f", m.time.mean_s / m.floor_read_s);
        if (m.peak_gflops > 0.0)
            snprintf(of_peak, sizeof of_peak, "%.1f", 100.0 * m.gflops / m.peak_gflops);
        if (m.t_star_s > 0.0)
            snprintf(vs_t_star, sizeof vs_t_star, "%.2f", m.time.mean_s / m.t_star_s);
        peak = m.peak_gflops; /* the same for every preset: measured once per pool */
        if (x.verify_rows == 0)
            snprintf(ver, sizeof ver, "skipped");
        else
            snprintf(ver, sizeof ver, "%s (err/tol %.2g)", m.verify.pass ? "PASS" : "FAIL",
                     m.verify.worst_ratio);
        printf("%-12s %-4s %-7s %7d %12s %10.2f %7s %9s %9s %7s  %s\n", x.chosen[i]->name,
               dtype_name(x.chosen[i]->kv_dtype), attn_isa_name(m.isa), (int)m.threads, ms, m.gflops,
               of_peak, gbs, vs_floor, vs_t_star, ver);
        if (x.verify_rows && !m.verify.pass)
            status = EXIT_VERIFY_FAILED;
    }
    if (peak > 0.0)
        printf("FMA peak: %.1f GFLOP/s (%s, %d thread%s, measured in this run)\n", peak,
               cli_fma_peak_kind(), (int)attn_threadpool_size(pool),
               attn_threadpool_size(pool) == 1 ? "" : "s");
    attn_threadpool_destroy(pool);
    return status;
}

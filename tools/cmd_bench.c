/* attn bench: every preset in turn, one table. */
#include <stdio.h>

#include "cli.h"

static const char bench_intro[] =
    "Usage: attn bench [options]\n"
    "\n"
    "Runs the presets (small, prefill, prefill-f16, decode, decode-f16; see\n"
    "`attn run --help`) in turn with the active ISA and prints one table: preset,\n"
    "K/V dtype, ISA, threads, milliseconds per call, GFLOP/s (prefill-like\n"
    "presets) or GB/s of K+V read (decode presets), and the verification result.\n"
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
    printf("%-12s %-4s %-7s %7s %12s %10s %9s %9s  %s\n", "preset", "K/V", "ISA", "threads",
           "ms/call", "GFLOP/s", "GB/s", "x floor", "verify");
    int status = EXIT_OK;
    for (size_t i = 0; i < x.n_chosen; i++) {
        const problem *p = &x.chosen[i]->problem;
        measurement m;
        fflush(stdout);
        if ((rc = measure(p, &x, pool, 1.0, &m))) {
            status = rc;
            break;
        }
        char ms[32], gbs[32], ver[48], vs_floor[32] = "-";
        format_ms(ms, sizeof ms, m.time.mean_s);
        if (is_decode_like(p))
            snprintf(gbs, sizeof gbs, "%.2f", m.kv_gbytes_s);
        else
            snprintf(gbs, sizeof gbs, "-");
        if (m.floor.calls)
            snprintf(vs_floor, sizeof vs_floor, "%.2f", m.time.mean_s / m.floor.mean_s);
        if (x.verify_rows == 0)
            snprintf(ver, sizeof ver, "skipped");
        else
            snprintf(ver, sizeof ver, "%s (err/tol %.2g)", m.verify.pass ? "PASS" : "FAIL",
                     m.verify.worst_ratio);
        printf("%-12s %-4s %-7s %7d %12s %10.2f %9s %9s  %s\n", p->name, dtype_name(p->kv_dtype),
               attn_isa_name(m.isa), (int)m.threads, ms, m.gflops, gbs, vs_floor, ver);
        if (x.verify_rows && !m.verify.pass)
            status = EXIT_VERIFY_FAILED;
    }
    attn_threadpool_destroy(pool);
    return status;
}

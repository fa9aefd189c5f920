/* SPDX-License-Identifier: MIT */
/*
 * attn: the libattn command-line tool.
 *
 *   attn info    library version, CPU, ISAs, threads
 *   attn run     time attn_forward on one problem and check sampled rows
 *                against the scalar oracle
 *   attn bench   every preset in turn, one table
 *   attn completion   the bash completion script
 *
 * cli.h says which file holds what.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

extern const char usage_info[];
extern const char usage_completion[];

/* As `attn --help` lists them. */
const char *const cli_commands[] = {"info", "run", "bench", "completion", "help"};
const size_t cli_command_count = sizeof cli_commands / sizeof cli_commands[0];

static const char usage_main[] =
    "Usage: attn <command> [options]\n"
    "       attn --help | --version\n"
    "\n"
    "The libattn command-line tool.\n"
    "\n"
    "Commands:\n"
    "  info    library version, CPU (vendor, model, microarchitecture, SIMD\n"
    "          features), which instruction sets libattn can use and which is\n"
    "          active, and the number of online CPUs\n"
    "  run     time attn_forward on one problem (a preset, optionally with\n"
    "          overrides) and verify sampled rows against the scalar oracle\n"
    "  bench   run every preset with the active instruction set; one table\n"
    "  completion  print the bash completion script (from the option table)\n"
    "  help    `attn help <command>` is `attn <command> --help`\n"
    "\n"
    "Environment:\n"
    "  ATTN_ISA=scalar|avx2|avx512|amx|neon|sve  read by libattn at its first call:\n"
    "          the instruction set to use when available (--isa overrides it)\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  verification failed (run, bench)\n"
    "  2  bad command line, options the library would refuse together included\n"
    "     (checked before any library call)\n"
    "  3  libattn returned an error (its attn_last_error line is printed first, then\n"
    "     the call and its status), or memory could not be allocated\n";


int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_main, stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("attn (built with attn.h %d.%d.%d), libattn %s\n", ATTN_VERSION_MAJOR,
               ATTN_VERSION_MINOR, ATTN_VERSION_PATCH, attn_version_string());
        return EXIT_OK;
    }
    if (!strcmp(cmd, "help")) {
        if (argc < 3) {
            fputs(usage_main, stdout);
            return EXIT_OK;
        }
        const char *topic = argv[2];
        if (!strcmp(topic, "info"))
            fputs(usage_info, stdout);
        else if (!strcmp(topic, "run"))
            return cmd_run(2, (char *[]){"run", "--help", NULL});
        else if (!strcmp(topic, "bench"))
            return cmd_bench(2, (char *[]){"bench", "--help", NULL});
        else if (!strcmp(topic, "completion"))
            fputs(usage_completion, stdout);
        else {
            fprintf(stderr, "attn help: no command '%s'\nTry 'attn --help'.\n", topic);
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    if (!strcmp(cmd, "info"))
        return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "completion"))
        return cmd_completion(argc - 1, argv + 1);
    fprintf(stderr, "attn: unknown command '%s'\nTry 'attn --help'.\n", cmd);
    return EXIT_USAGE;
}


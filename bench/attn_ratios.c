/* SPDX-License-Identifier: MIT */
/*
 * attn_ratios: the targets of single features, each measured as ratios in
 * one process, one family of cases per feature (bench/ratios/<family>.c,
 * what they share: bench/ratio_driver.h).
 *
 *   attn_ratios --list                       the families, one line each
 *   attn_ratios <family> [options]           one family
 *   attn_ratios all [options]                every family, in the list's order
 *   attn_ratios <family> --help              its options and defaults
 *
 * Options every family reads: --reps N, --quick (one repetition, one call
 * per sample: a check that it runs), --isa NAME (the ISA table, as ATTN_ISA),
 * and --threads N where the family runs on more than one thread. With
 * `all`, only these, and --threads goes to the families that take it.
 *
 * The list is bench/meson.build's ratio_families, compiled in as
 * RATIO_FAMILIES: X(kvlayout) X(mods) ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratio_driver.h"

#ifndef RATIO_FAMILIES
#error "bench/meson.build defines RATIO_FAMILIES, its list of families"
#endif

#define X(f) extern const ratio_family ratio_##f;
RATIO_FAMILIES
#undef X
#define X(f) &ratio_##f,
static const ratio_family *const families[] = {RATIO_FAMILIES};
#undef X
#define NFAMILIES ((int)(sizeof families / sizeof families[0]))

static void usage(FILE *to)
{
    fprintf(to,
            "usage: attn_ratios --list\n"
            "       attn_ratios <family>|all [--reps N] [--threads N] [--isa NAME] [--quick]"
            " [the family's options]\n"
            "       attn_ratios <family> --help\n");
}

static void list(FILE *to)
{
    for (int i = 0; i < NFAMILIES; i++)
        fprintf(to, "  %-16s %s\n", families[i]->name, families[i]->help);
}

static void family_usage(FILE *to, const ratio_family *f)
{
    fprintf(to, "attn_ratios %s: %s\n", f->name, f->help);
    fprintf(to, "  --reps N         repetitions (default %d)\n", f->reps);
    fprintf(to, "  --quick          one repetition, one call per sample\n");
    fprintf(to, "  --isa NAME       the ISA table (default: the library's choice)\n");
    if (f->threads != RATIO_ONE_THREAD)
        fprintf(to, "  --threads N      %s (default %d)\n", f->threads_help, f->threads);
    for (int j = 0; j < RATIO_MAX_OPTIONS && f->opt[j].name; j++) {
        char head[64];
        snprintf(head, sizeof head, "%s %s", f->opt[j].name, f->opt[j].value);
        fprintf(to, "  %-16s %s\n", head, f->opt[j].help);
    }
}

static int parse_int(const char *s, int *v)
{
    char *end;
    const long x = strtol(s, &end, 10);
    if (end == s || *end || x < -1000000 || x > 1000000)
        return 0;
    *v = (int)x;
    return 1;
}

/* Makes the ISA named `name` (attn_isa_name's) the active one. */
static int select_isa(const char *name)
{
    for (int i = 0; strcmp(attn_isa_name((attn_isa)i), "unknown"); i++)
        if (!strcmp(attn_isa_name((attn_isa)i), name)) {
            if (attn_isa_select((attn_isa)i) == ATTN_OK)
                return 1;
            fprintf(stderr, "attn_ratios: ISA %s is not available here\n", name);
            return 0;
        }
    fprintf(stderr, "attn_ratios: no ISA named %s\n", name);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--list")) {
        list(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        printf("families:\n");
        list(stdout);
        return 0;
    }
    const ratio_family *one = NULL;
    const int all = !strcmp(argv[1], "all");
    for (int i = 0; i < NFAMILIES && !all; i++)
        if (!strcmp(argv[1], families[i]->name))
            one = families[i];
    if (!one && !all) {
        fprintf(stderr, "attn_ratios: no family %s; the families:\n", argv[1]);
        list(stderr);
        return 2;
    }

    int reps = 0, threads = 0, threads_given = 0, quick = 0;
    const char *isa = NULL;
    ratio_args a;
    memset(&a, 0, sizeof a);
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int known = 1;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            if (one)
                family_usage(stdout, one);
            else
                usage(stdout);
            return 0;
        } else if (!strcmp(o, "--quick")) {
            quick = 1;
            continue;
        } else if (!strcmp(o, "--reps")) {
            known = v && parse_int(v, &reps) && reps >= 1;
        } else if (!strcmp(o, "--threads")) {
            if (one && one->threads == RATIO_ONE_THREAD) {
                fprintf(stderr, "attn_ratios %s: runs on the calling thread only\n", one->name);
                return 2;
            }
            known = v && parse_int(v, &threads);
            threads_given = 1;
        } else if (!strcmp(o, "--isa")) {
            known = v != NULL;
            isa = v;
        } else {
            known = 0;
            for (int j = 0; one && v && j < RATIO_MAX_OPTIONS && one->opt[j].name; j++)
                if (!strcmp(o, one->opt[j].name)) {
                    a.opt[j] = v;
                    known = 1;
                }
        }
        if (!known) {
            fprintf(stderr, "attn_ratios %s: %s%s%s: not understood\n", argv[1], o, v ? " " : "",
                    v ? v : "");
            if (one)
                family_usage(stderr, one);
            else
                usage(stderr);
            return 2;
        }
        i++; /* the value */
    }
    if (isa && !select_isa(isa))
        return 1;

    for (int i = 0; i < NFAMILIES; i++) {
        const ratio_family *f = families[i];
        if (one && f != one)
            continue;
        ratio_args fa = a;
        fa.quick = quick;
        fa.reps = reps ? reps : quick ? 1 : f->reps;
        fa.threads = threads_given && f->threads != RATIO_ONE_THREAD ? threads : f->threads;
        if (all)
            printf("== attn_ratios %s ==\n", f->name);
        fflush(stdout);
        const int rc = f->run(&fa);
        fflush(stdout);
        if (rc)
            return rc;
    }
    return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * The --check mode of the binding's generators (gen_dtypes.c, gen_options.c):
 * the committed copy of a generated module must be exactly what the
 * generator writes, so that a source checkout, which imports the committed
 * copy without a build, sees the list the library was built from.
 */
#ifndef ATTN_GEN_CHECK_H
#define ATTN_GEN_CHECK_H

#include <stdio.h>

/* 0 when the file at `path` is exactly what write_module() writes; else 1,
   with the first differing line and the command that regenerates it. */
static int gen_check(void (*write_module)(FILE *), const char *argv0, const char *path,
                     const char *list)
{
    FILE *want = tmpfile(), *got = fopen(path, "rb");
    if (!want || !got) {
        fprintf(stderr, "%s: cannot open %s\n", argv0, got ? "a temporary file" : path);
        return 1;
    }
    write_module(want);
    rewind(want);
    int a, b;
    long line = 1;
    do {
        a = fgetc(want);
        b = fgetc(got);
        line += a == b && a == '\n';
    } while (a == b && a != EOF);
    fclose(want);
    fclose(got);
    if (a == b)
        return 0;
    fprintf(stderr,
            "%s differs from %s's table from line %ld on;\n"
            "regenerate it: %s > %s\n",
            path, list, line, argv0, path);
    return 1;
}

#endif /* ATTN_GEN_CHECK_H */

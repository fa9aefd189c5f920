/* SPDX-License-Identifier: MIT */
/*
 * A main() for builds without libFuzzer (gcc, or clang without the fuzzer
 * runtime): runs LLVMFuzzerTestOneInput once on every file named on the
 * command line, descending into directories. This is how the committed
 * corpus, regression inputs included, runs in every test build.
 */
#define _DEFAULT_SOURCE /* DT_DIR */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(size > 0 ? (size_t)size : 1);
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "%s: read failed\n", path);
        fclose(f);
        free(data);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)size);
    free(data);
    return 0;
}

static int run_path(const char *path, size_t *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (*count)++;
        return run_file(path);
    }
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort); /* a fixed order: reproducible */
    if (n < 0) {
        perror(path);
        return 1;
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            size_t len = strlen(path) + strlen(names[i]->d_name) + 2;
            char *child = malloc(len);
            snprintf(child, len, "%s/%s", path, names[i]->d_name);
            failed |= run_path(child, count);
            free(child);
        }
        free(names[i]);
    }
    free(names);
    return failed;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int failed = 0;
    for (int i = 1; i < argc; i++)
        failed |= run_path(argv[i], &count);
    printf("replayed %zu inputs\n", count);
    return failed || count == 0;
}

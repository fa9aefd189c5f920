/* SPDX-License-Identifier: MIT */
/* The --json writer: one pretty-printed document, strings escaped, numbers
   that are not finite written as null. */
#include <inttypes.h>
#include <math.h>

#include "cli.h"

static void indent(json_out *j)
{
    fprintf(j->f, "\n%*s", 2 * j->depth, "");
}

static void string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", f);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* The separator and key before a value at the current depth. */
static void key(json_out *j, const char *k)
{
    if (j->comma[j->depth])
        fputc(',', j->f);
    j->comma[j->depth] = true;
    indent(j);
    if (k) {
        string(j->f, k);
        fputs(": ", j->f);
    }
}

static void nest(json_out *j, const char *k, char open, char close)
{
    key(j, k);
    fputc(open, j->f);
    if (j->depth + 1 < JSON_MAX_DEPTH) {
        j->depth++;
        j->comma[j->depth] = false;
        j->close[j->depth] = close;
    }
}

void json_begin(json_out *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    fputc('{', f);
    j->depth = 1;
    j->comma[1] = false;
    j->close[1] = '}';
}

void json_end(json_out *j)
{
    while (j->depth > 0)
        json_close(j);
    fputc('\n', j->f);
    fflush(j->f);
}

void json_object(json_out *j, const char *k)
{
    nest(j, k, '{', '}');
}

void json_array(json_out *j, const char *k)
{
    nest(j, k, '[', ']');
}

void json_close(json_out *j)
{
    if (j->depth <= 0)
        return;
    const bool any = j->comma[j->depth];
    const char c = j->close[j->depth];
    j->depth--;
    if (any)
        indent(j);
    fputc(c, j->f);
}

void json_str(json_out *j, const char *k, const char *v)
{
    key(j, k);
    if (v)
        string(j->f, v);
    else
        fputs("null", j->f);
}

void json_num(json_out *j, const char *k, double v)
{
    key(j, k);
    if (isfinite(v))
        fprintf(j->f, "%.9g", v);
    else
        fputs("null", j->f);
}

void json_int(json_out *j, const char *k, int64_t v)
{
    key(j, k);
    fprintf(j->f, "%" PRId64, v);
}

void json_uint(json_out *j, const char *k, uint64_t v)
{
    key(j, k);
    fprintf(j->f, "%" PRIu64, v);
}

void json_bool(json_out *j, const char *k, bool v)
{
    key(j, k);
    fputs(v ? "true" : "false", j->f);
}

void json_null(json_out *j, const char *k)
{
    key(j, k);
    fputs("null", j->f);
}

/* ------------------------------------------------------------ the CLI's parts */

void json_timing(json_out *j, const char *k, const timing *t)
{
    json_object(j, k);
    json_int(j, "calls", t->calls);
    json_bool(j, "single_cold", t->single_cold);
    json_num(j, "mean_ms", t->mean_s * 1e3);
    json_num(j, "median_ms", t->median_s * 1e3);
    json_num(j, "min_ms", t->best_s * 1e3);
    json_close(j);
}

void json_peak(json_out *j, double peak, double achieved, const char *units, const char *kind,
               int threads, const peak_check *pc)
{
    const bool has = peak > 0.0;
    json_object(j, "peak");
    json_num(j, "gflops", has ? peak : NAN);
    if (!isnan(achieved))
        json_num(j, "percent", has ? 100.0 * achieved / peak : NAN);
    json_str(j, "units", has ? units : NULL);
    json_str(j, "kind", has ? kind : NULL);
    json_int(j, "threads", threads);
    json_num(j, "before_gflops", pc->before > 0.0 ? pc->before : NAN);
    json_num(j, "after_gflops", pc->after > 0.0 ? pc->after : NAN);
    json_num(j, "single_thread_gflops", pc->single > 0.0 ? pc->single : NAN);
    json_int(j, "cores", pc->cores);
    json_close(j);
    json_bool(j, "busy", pc->busy);
    json_str(j, "busy_why", pc->busy ? pc->why : NULL);
}

void json_verify(json_out *j, const verify_result *vr, int64_t rows, const char *against)
{
    json_object(j, "verify");
    json_int(j, "rows", rows ? vr->rows : 0);
    json_str(j, "against", rows ? against : NULL);
    json_num(j, "max_abs", rows ? vr->max_abs : NAN);
    json_num(j, "max_rel", rows ? vr->max_rel : NAN);
    json_num(j, "worst_ratio", rows ? vr->worst_ratio : NAN);
    if (rows)
        json_bool(j, "pass", vr->pass);
    else
        json_null(j, "pass");
    json_close(j);
}

/* SPDX-License-Identifier: MIT */
/*
 * The one option table of `attn run` and `attn bench`: each row names an
 * option, the commands that take it, the help section it is listed under,
 * its parser and the cli_settings field it sets. Parsing, the option part
 * of both commands' --help and `attn completion` come from this table
 * alone; the values an option takes are its parser's (value_sets). The
 * combinations the library would refuse are cli_check's, at the end.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../src/dtype_list.h"

typedef struct cli_option cli_option;
typedef int (*parse_fn)(const cli_option *o, const char *cmd, const char *value,
                        cli_settings *s);

struct cli_option {
    const char *name;    /* "--threads" */
    const char *metavar; /* NULL: a flag, which takes no value */
    unsigned commands;   /* CLI_RUN | CLI_BENCH */
    const char *section; /* help section */
    parse_fn parse;
    size_t field;        /* offsetof(cli_settings, ...) the generic parsers set; for
                            the pin_* parsers, the generator's choice (problems/gen.h) */
    int64_t min, max;    /* integer range; for flags the value stored */
    const char *help;    /* lines after the first are indented under it; "{kv}" and
                            "{fp8}" name dtypes of the list (help_text) */
};

/* ------------------------------------------------------------ the values of options */

/* Fills out[] with the names an option's value may be; returns how many. */
typedef size_t (*values_fn)(const char **out);

/* "a, b or c" (after a value that ends in a comma, "a, x, b or c") */
static void join_values(const char *const *v, size_t n, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *sep = i == 0                                 ? ""
                          : i + 1 == n                             ? " or "
                          : v[i - 1][strlen(v[i - 1]) - 1] == ',' ? " "
                                                                   : ", ";
        if (strlen(buf) + strlen(sep) + strlen(v[i]) + 1 > size)
            break;
        strcat(buf, sep);
        strcat(buf, v[i]);
    }
}

/* every dtype of the library's list; the K/V ones are values */
#define DTYPE_ID(ID, name, block, bytes, kind, q, kv, out) ATTN_DTYPE_##ID,
static const attn_dtype all_dtypes[] = {ATTN_DTYPE_LIST(DTYPE_ID)};
#undef DTYPE_ID
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])
_Static_assert(N_DTYPES <= CLI_MAX_VALUES, "the dtypes fit a value list");

static size_t kv_dtype_values(const char **out)
{
    size_t n = 0;
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtype_is_kv(all_dtypes[i]))
            out[n++] = dtype_name(all_dtypes[i]);
    return n;
}

static attn_dtype_kind dtype_kind(attn_dtype t) { ATTN_DTYPE_GET(t, kind, ATTN_DTYPE_KIND_BOOL) }

static bool is_fp8(attn_dtype t)
{
    return dtype_kind(t) == ATTN_DTYPE_KIND_FP8;
}

/* What the help and the messages say of a dtype beside its name, which the
   list does not hold: `help` in --kv-dtype's help, `aside` where the FP8
   dtypes are offered. A dtype without a row is named alone. */
static const struct {
    attn_dtype dtype;
    const char *help, *aside;
} dtype_notes[] = {
    {ATTN_DTYPE_FP8_E4M3, "E4M3", "which is E4M3"},
    {ATTN_DTYPE_FP8_E5M2, "FP8 E5M2; scale 1", NULL},
    {ATTN_DTYPE_U8_ASYM, "OpenVINO's asymmetric u8", NULL},
    {ATTN_DTYPE_U4_ASYM, "asymmetric u4", NULL},
};

/* "a, b (note) or c": the K/V dtypes of `kind` (all kinds: -1), each with
   its note (help: 1) or its aside (0), as join_values lists them. */
static void kv_dtype_list(int kind, int help, char *buf, size_t size)
{
    char spelled[CLI_MAX_VALUES][48];
    const char *names[CLI_MAX_VALUES];
    size_t n = 0;
    for (size_t i = 0; i < N_DTYPES; i++) {
        const attn_dtype t = all_dtypes[i];
        if (!dtype_is_kv(t) || (kind >= 0 && (int)dtype_kind(t) != kind))
            continue;
        const char *note = NULL;
        for (size_t k = 0; k < sizeof dtype_notes / sizeof dtype_notes[0]; k++)
            if (dtype_notes[k].dtype == t)
                note = help ? dtype_notes[k].help : dtype_notes[k].aside;
        if (!note)
            snprintf(spelled[n], sizeof spelled[n], "%s", dtype_name(t));
        else if (help)
            snprintf(spelled[n], sizeof spelled[n], "%s (%s)", dtype_name(t), note);
        else /* an aside closes with a comma, unless it ends the list (below) */
            snprintf(spelled[n], sizeof spelled[n], "%s, %s,", dtype_name(t), note);
        names[n] = spelled[n];
        n++;
    }
    if (n && !help && names[n - 1][strlen(names[n - 1]) - 1] == ',')
        spelled[n - 1][strlen(spelled[n - 1]) - 1] = '\0';
    join_values(names, n, buf, size);
}

/* The K/V dtypes of one kind as "a/b". */
static void kind_names(attn_dtype_kind kind, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtype_is_kv(all_dtypes[i]) && dtype_kind(all_dtypes[i]) == kind &&
            strlen(buf) + strlen(dtype_name(all_dtypes[i])) + 2 <= size) {
            strcat(buf, buf[0] ? "/" : "");
            strcat(buf, dtype_name(all_dtypes[i]));
        }
}

/*
 * An option's help as printed: "{kv}" becomes every K/V dtype of the list
 * with its note ("a, b (note) or c"), "{fp8}" the FP8 ones as "a/b",
 * "{asym}" the ASYM ones. So a new dtype is offered in the help, as it is
 * parsed and completed, without an edit here.
 */
static const char *help_text(const char *help, char *buf, size_t size)
{
    char kv[200], fp8[100], asym[100];
    kv_dtype_list(-1, 1, kv, sizeof kv);
    kind_names(ATTN_DTYPE_KIND_FP8, fp8, sizeof fp8);
    kind_names(ATTN_DTYPE_KIND_ASYM, asym, sizeof asym);
    const struct {
        const char *tag, *with;
    } subst[] = {{"{kv}", kv}, {"{fp8}", fp8}, {"{asym}", asym}};
    size_t n = 0;
    while (*help && n + 1 < size) {
        size_t k = 0;
        while (k < sizeof subst / sizeof subst[0] &&
               strncmp(help, subst[k].tag, strlen(subst[k].tag)))
            k++;
        if (k == sizeof subst / sizeof subst[0]) {
            buf[n++] = *help++;
            continue;
        }
        n += (size_t)snprintf(buf + n, size - n, "%s", subst[k].with);
        n = n < size ? n : size - 1;
        help += strlen(subst[k].tag);
    }
    buf[n] = '\0';
    return buf;
}

static size_t preset_values(const char **out)
{
    size_t n = 0;
    for (; n < cli_preset_count && n < CLI_MAX_VALUES; n++)
        out[n] = cli_presets[n].name;
    return n;
}

/* attn_precision's values by name (include/attn.h), in enum order. */
static const char *const precision_names[] = {"default", "bf16", "int8"};
_Static_assert(sizeof precision_names / sizeof precision_names[0] == ATTN_PRECISION_INT8 + 1,
               "a name per attn_precision value");

static size_t precision_values(const char **out)
{
    for (size_t i = 0; i <= ATTN_PRECISION_INT8; i++)
        out[i] = precision_names[i];
    return ATTN_PRECISION_INT8 + 1;
}

/* ISA names come from the library (attn_isa_name), so a new ISA needs no
   edit here; the values are those compiled into it (attn_isa_built). */
static size_t isa_values(const char **out)
{
    size_t n = 0;
    for (int i = ATTN_ISA_AUTO; n < CLI_MAX_VALUES; i++) {
        const char *name = attn_isa_name((attn_isa)i);
        if (!strcmp(name, "unknown"))
            break;
        if (attn_isa_built((attn_isa)i))
            out[n++] = name;
    }
    return n;
}

static const char *const tree_names[] = {"chain", "flat"};
static const int64_t tree_kinds[] = {GEN_TREE_CHAIN, GEN_TREE_FLAT};

static size_t tree_values(const char **out)
{
    out[0] = tree_names[0];
    out[1] = tree_names[1];
    return 2;
}

/* --fp8-scales: row, or a group size (free) */
static size_t fp8_scale_values(const char **out)
{
    out[0] = "row";
    return 1;
}

int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "attn %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'attn %s --help'.\n", cmd);
    return EXIT_USAGE;
}

#define FIELD(s, o, type) ((type *)(void *)((char *)(s) + (o)->field))

/* The integer in [o->min, o->max] that v spells, into *x (a usage error
   otherwise). */
static int read_i64(const cli_option *o, const char *cmd, const char *v, int64_t *x)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < o->min || n > o->max)
        return usage_error(cmd, "%s expects an integer in [%" PRId64 ", %" PRId64 "], got '%s'",
                           o->name, o->min, o->max, v);
    *x = (int64_t)n;
    return EXIT_OK;
}

static int parse_i64(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    return read_i64(o, cmd, v, FIELD(s, o, int64_t));
}

static int parse_u64(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    char *end;
    errno = 0;
    if (*v == '-' || *v == '+' || *v == ' ')
        return usage_error(cmd, "%s expects an unsigned integer, got '%s'", o->name, v);
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || end == v || *end)
        return usage_error(cmd, "%s expects an unsigned integer, got '%s'", o->name, v);
    *FIELD(s, o, uint64_t) = (uint64_t)x;
    return EXIT_OK;
}

/* Problem options pin a choice of the generator (problems/gen.h): an integer
   in [min, max], a finite float (min 0: >= 0), or the row's min. */
static int pin_i64(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    int64_t x = 0; /* set when rc is EXIT_OK; gcc -O3 cannot see it */
    int rc = read_i64(o, cmd, v, &x);
    if (rc == EXIT_OK)
        gen_pin(&s->pins, (int)o->field, x);
    return rc;
}

static int pin_float(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    const int nonneg = o->min == 0;
    if (errno || end == v || *end || !isfinite(x) || (nonneg && x < 0.0f))
        return usage_error(cmd, "%s expects %s%s, got '%s'", o->name,
                           nonneg ? "a finite number >= 0" : "a finite number",
                           errno == ERANGE ? " in float's normal range (or 0)" : "", v);
    gen_pin_f(&s->pins, (int)o->field, (double)x);
    return EXIT_OK;
}

static int pin_flag(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    (void)cmd, (void)v;
    gen_pin(&s->pins, (int)o->field, o->min);
    return EXIT_OK;
}

/* --sinks Z: sinks present, every (batch entry, head) the logit Z. */
static int pin_sink(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    int rc = pin_float(o, cmd, v, s);
    if (rc)
        return rc;
    const float z = (float)s->pins.pin_f[o->field];
    gen_pin(&s->pins, (int)o->field, 1);
    s->pins.val[GEN_OPT(sinks)] = (gen_values){ GEN_VAL_UNIFORM, z, z, 0, 0, 0, 0, 0, 0 };
    return EXIT_OK;
}

/* --packed: both sides packed, the sequences' lengths spread (seq_lengths). */
static int pin_packed(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    (void)o, (void)cmd, (void)v;
    gen_pin(&s->pins, GEN_C_Q_PACKED, 1);
    gen_pin(&s->pins, GEN_C_KV_PACKED, 1);
    gen_pin(&s->pins, GEN_C_SPREAD_LENS, 1);
    return EXIT_OK;
}

/* --topk N: each query row sees N keys of its sequence (0: off), an
   indexer's selection: distinct keys, 4 in 5 of them the row before's. */
static int pin_topk(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    int rc = pin_i64(o, cmd, v, s);
    if (rc)
        return rc;
    const int64_t n = s->pins.pin[o->field];
    gen_pin(&s->pins, GEN_C_OPT(topk_indices), n > 0);
    gen_pin(&s->pins, GEN_C_TOPK_SHARED, 1);
    gen_pin(&s->pins, GEN_C_TOPK_DISTINCT, 1);
    return EXIT_OK;
}

/* --fp8-scales row|G: FP8 K and V with a scale per row (attn.h 1.6) or per
   group of G channels of a row (1.8) beside them, each in [1/64, 1/4),
   instead of one scale per call. */
static int parse_fp8_scales(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    int64_t g = 0;
    if (strcmp(v, "row")) {
        char *end;
        errno = 0;
        const long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < 1 || x > ATTN_MAX_HEAD_DIM)
            return usage_error(cmd, "%s expects row or a group size in [1, %d], got '%s'",
                               o->name, ATTN_MAX_HEAD_DIM, v);
        g = x;
    }
    gen_pin(&s->pins, GEN_C_OPT(k_scales), 1);
    gen_pin(&s->pins, GEN_C_OPT(v_scales), 1);
    gen_pin(&s->pins, GEN_C_OPT(k_scale_group), g);
    gen_pin(&s->pins, GEN_C_OPT(v_scale_group), g);
    gen_pin_f(&s->pins, GEN_C_OPT(k_scale), 0.0); /* not with per-row scales */
    gen_pin_f(&s->pins, GEN_C_OPT(v_scale), 0.0);
    const gen_values u = {GEN_VAL_UNIFORM, 1.0f / 64.0f, 0.25f, 0, 0, 0, 0, 0, 0};
    s->pins.val[GEN_OPT(k_scales)] = u;
    s->pins.val[GEN_OPT(v_scales)] = u;
    return EXIT_OK;
}

/* --kv-group G: an ASYM cache's records of G values (attn.h 1.12: the
   scale group's option; 0, one per row, OpenVINO's default). */
static int parse_kv_group(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    char *end;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > ATTN_MAX_HEAD_DIM)
        return usage_error(cmd, "%s expects a group size in [0, %d], got '%s'", o->name,
                           ATTN_MAX_HEAD_DIM, v);
    gen_pin(&s->pins, GEN_C_ASYM_GROUP, x);
    return EXIT_OK;
}

/* --k-tail N: the last N values of every key row in a tensor of their own
   (attn.h 1.9, k_tail: F32, laid out like k), k holding the rest. */
static int parse_k_tail(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    char *end;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x >= ATTN_MAX_HEAD_DIM)
        return usage_error(cmd, "%s expects a value count in [0, %d), got '%s'", o->name,
                           ATTN_MAX_HEAD_DIM, v);
    gen_pin(&s->pins, GEN_C_OPT(k_tail), x > 0);
    gen_pin(&s->pins, GEN_C_OPT(k_tail_dim), x);
    return EXIT_OK;
}

/* --tree chain|flat: a draft tree over every sequence's queries. */
static int parse_tree(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    const char *names[CLI_MAX_VALUES];
    const size_t n = tree_values(names);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v, names[i])) {
            gen_pin(&s->pins, GEN_C_OPT(tree_parents), 1);
            gen_pin(&s->pins, GEN_C_TREE, tree_kinds[i]);
            return EXIT_OK;
        }
    char list[64];
    join_values(names, n, list, sizeof list);
    return usage_error(cmd, "%s expects %s, got '%s'", o->name, list, v);
}

/* --shared-prefix N: one group, each sequence sharing N keys (or what both
   sequences have) with the one before it; 0 turns a preset's off. */
static int pin_shared(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    int rc = pin_i64(o, cmd, v, s);
    if (rc)
        return rc;
    const int64_t n = s->pins.pin[o->field];
    gen_pin(&s->pins, GEN_C_OPT(shared_prefix), n > 0);
    gen_pin(&s->pins, GEN_C_SHARED, GEN_SHARED_ALL);
    gen_pin(&s->pins, GEN_C_SHARED_KEYS, n);
    return EXIT_OK;
}

static int set_bool(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    (void)cmd, (void)v;
    *FIELD(s, o, bool) = o->min != 0;
    return EXIT_OK;
}

/* Any ISA the library names; cli_check refuses one not built or not on this CPU. */
static int parse_isa(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    for (int i = ATTN_ISA_AUTO;; i++) {
        const char *name = attn_isa_name((attn_isa)i);
        if (!strcmp(name, "unknown"))
            break;
        if (!strcmp(name, v)) {
            s->isa_given = true;
            s->isa = (attn_isa)i;
            return EXIT_OK;
        }
    }
    const char *names[CLI_MAX_VALUES];
    char list[160];
    join_values(names, isa_values(names), list, sizeof list);
    return usage_error(cmd, "%s expects %s, got '%s'", o->name, list, v);
}

static int parse_kv_dtype(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtype_is_kv(all_dtypes[i]) && !strcmp(v, dtype_name(all_dtypes[i]))) {
            gen_pin(&s->pins, GEN_C_K_DTYPE, all_dtypes[i]);
            gen_pin(&s->pins, GEN_C_V_DTYPE, all_dtypes[i]);
            return EXIT_OK;
        }
    const char *names[CLI_MAX_VALUES];
    char list[160];
    join_values(names, kv_dtype_values(names), list, sizeof list);
    return usage_error(cmd, "%s expects %s, got '%s'", o->name, list, v);
}

static void preset_names(char *buf, size_t size)
{
    const char *names[CLI_MAX_VALUES];
    join_values(names, preset_values(names), buf, size);
}

static int parse_precision(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    const char *names[CLI_MAX_VALUES];
    const size_t n = precision_values(names);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v, names[i])) {
            gen_pin(&s->pins, GEN_C_OPT(precision), (int64_t)i);
            return EXIT_OK;
        }
    char list[64];
    join_values(names, n, list, sizeof list);
    return usage_error(cmd, "%s expects %s, got '%s'", o->name, list, v);
}

const char *cli_precision_name(int64_t precision)
{
    return precision >= 0 && precision <= ATTN_PRECISION_INT8 ? precision_names[precision] : "?";
}

static int parse_preset(const cli_option *o, const char *cmd, const char *v, cli_settings *s)
{
    char names[256];
    if ((s->preset = find_preset(v)))
        return EXIT_OK;
    preset_names(names, sizeof names);
    return usage_error(cmd, "unknown %s '%s' (%s)", o->name + 2, v, names);
}

static int parse_preset_list(const cli_option *o, const char *cmd, const char *v,
                             cli_settings *s)
{
    char names[256];
    preset_names(names, sizeof names);
    s->n_chosen = 0;
    for (const char *at = v; *at;) {
        const char *comma = strchr(at, ',');
        size_t len = comma ? (size_t)(comma - at) : strlen(at);
        char one[32];
        const preset *pp = NULL;
        if (len > 0 && len < sizeof one) {
            memcpy(one, at, len);
            one[len] = '\0';
            pp = find_preset(one);
        }
        if (!pp || s->n_chosen == CLI_MAX_CHOSEN)
            return usage_error(cmd, "bad %s list '%s' (names: %s)", o->name + 2, v, names);
        s->chosen[s->n_chosen++] = pp;
        at += len + (comma ? 1 : 0);
        if (comma && !*at)
            return usage_error(cmd, "bad %s list '%s'", o->name + 2, v);
    }
    if (s->n_chosen == 0)
        return usage_error(cmd, "empty %s list", o->name + 2);
    return EXIT_OK;
}

#define AT(f) offsetof(cli_settings, f)
#define DIM(d) (offsetof(cli_settings, dims) + (d) * sizeof(int64_t))
#define P "Problem"
#define E "Execution"
#define RB (CLI_RUN | CLI_BENCH)

static const cli_option options[] = {
    {"--preset", "NAME", CLI_RUN, P, parse_preset, 0, 0, 0,
     "prefill (default), decode, prefill-f16, decode-f16, small,\n"
     "spec-decode, mla-decode, shared-prefix\n"
     "prefill: Llama-3-8B-like prefill: batch 1, 32 query heads,\n"
     "  8 KV heads, head_dim 128, q_len = kv_len = 2048, causal, f32\n"
     "decode: one decode step: as prefill but q_len 1, kv_len 4096\n"
     "prefill-f16, decode-f16: the same with K and V stored as f16\n"
     "small: batch 2, 8 query heads, 2 KV heads, head_dim 64,\n"
     "  q_len = kv_len = 256, causal (a quick check)\n"
     "spec-decode: as decode-f16 with q_len 4 (4 draft tokens)\n"
     "mla-decode: DeepSeek-style MLA: 128 query heads, 1 KV head,\n"
     "  head_dim 576, v_dim 512, kv_len 4096, bf16 K and V\n"
     "shared-prefix: parallel sampling: batch 16, as decode-f16 with\n"
     "  kv_len 4352 of which 4096 are one prefix every sequence shares"},
    {"--presets", "LIST", CLI_BENCH, P, parse_preset_list, 0, 0, 0,
     "comma-separated presets, in the order to run (default: small,\n"
     "prefill, prefill-f16, decode, decode-f16)"},
    {"--batch", "N", CLI_RUN, P, parse_i64, DIM(D_BATCH), 1, INT32_MAX, "batch entries"},
    {"--q-heads", "N", CLI_RUN, P, parse_i64, DIM(D_QH), 1, INT32_MAX,
     "query heads (a multiple of --kv-heads)"},
    {"--kv-heads", "N", CLI_RUN, P, parse_i64, DIM(D_KVH), 1, INT32_MAX, "key/value heads"},
    {"--q-len", "N", CLI_RUN, P, parse_i64, DIM(D_QLEN), 1, INT32_MAX, "query rows"},
    {"--kv-len", "N", CLI_RUN, P, parse_i64, DIM(D_KVLEN), 1, INT32_MAX, "keys"},
    {"--head-dim", "N", CLI_RUN, P, parse_i64, DIM(D_HDIM), 1, ATTN_MAX_HEAD_DIM,
     "q/k row length (at most ATTN_MAX_HEAD_DIM, 4096)"},
    {"--v-dim", "N", CLI_RUN, P, parse_i64, DIM(D_VDIM), 0, ATTN_MAX_HEAD_DIM,
     "v/out row length (0: = head-dim)"},
    {"--causal", NULL, CLI_RUN, P, pin_flag, GEN_C_OPT(flags), ATTN_CAUSAL, 0,
     "bottom-right aligned causal mask on"},
    {"--no-causal", NULL, CLI_RUN, P, pin_flag, GEN_C_OPT(flags), 0, 0, "causal mask off"},
    {"--window", "W", CLI_RUN, P, pin_i64, GEN_C_OPT(window), 0, ATTN_MAX_POSITION,
     "sliding window of W keys (0: off)"},
    {"--scale", "S", CLI_RUN, P, pin_float, GEN_C_OPT(scale), -1, 0,
     "score scale (0: 1/sqrt(head_dim))"},
    {"--softcap", "C", CLI_RUN, P, pin_float, GEN_C_OPT(softcap), 0, 0,
     "score soft-capping C*tanh(s/C) (0: off)"},
    {"--kv-dtype", "T", CLI_RUN, P, parse_kv_dtype, 0, 0, 0, "{kv} storage of K and V"},
    {"--fp8-scales", "S", CLI_RUN, P, parse_fp8_scales, 0, 0, 0,
     "with an {fp8} --kv-dtype: row (a scale per K and V row,\n"
     "per token and head, as vLLM and SGLang keep them) or G (one per\n"
     "group of G channels of a row, DeepSeek V3.2's G = 128), beside\n"
     "the cache (attn_options.k_scales, k_scale_group), instead of one\n"
     "scale per call"},
    {"--kv-group", "G", CLI_RUN, P, parse_kv_group, 0, 0, 0,
     "with an {asym} --kv-dtype: records of G values, each with its\n"
     "scale and zero point (attn_options.k_scale_group and\n"
     "v_scale_group; 0: one record per row, OpenVINO's default)"},
    {"--k-tail", "N", CLI_RUN, P, parse_k_tail, 0, 0, 0,
     "the last N values of every key row in an F32 tensor of their own\n"
     "(attn_options.k_tail, k_tail_dim; N < head-dim; 0: off), as\n"
     "DeepSeek's rope dims beside its latent; an {fp8} --kv-dtype\n"
     "then needs --fp8-scales G over head-dim - N"},
    {"--precision", "P", CLI_RUN, P, parse_precision, 0, 0, 0,
     "default, bf16 or int8 (attn_options.precision): bf16 rounds q,\n"
     "k, the weights and v to bfloat16 for the bf16 dot units; int8\n"
     "quantizes q per 32-block against q8_0/q4_0 keys (attn.h gives\n"
     "each mode's bound, which verification adds)"},
    {"--window-right", "R", CLI_RUN, P, pin_i64, GEN_C_OPT(window_right), 0, ATTN_MAX_POSITION,
     "right edge of a local window: keys j < i + off + R (0: off);\n"
     "with --window and --no-causal a two-sided window of W + R - 1\n"
     "keys (FlashAttention's window_size (l, r) is W = l+1, R = r+1)"},
    {"--sinks", "Z", CLI_RUN, P, pin_sink, GEN_C_OPT(sinks), -1, 0,
     "an attention-sink logit Z for every query head (gpt-oss):\n"
     "one more softmax entry per row, without a value"},
    {"--alibi", NULL, CLI_RUN, P, pin_flag, GEN_C_OPT(alibi_slopes), 1, 0,
     "ALiBi: add -slope_h * |i + off - j| with the standard slopes\n"
     "2^(-8 (h+1) / H) of the query heads"},
    {"--no-alibi", NULL, CLI_RUN, P, pin_flag, GEN_C_OPT(alibi_slopes), 0, 0, "ALiBi off"},
    {"--paged-block", "N", CLI_RUN, P, pin_i64, GEN_C_BLOCK_SIZE, 0, INT32_MAX,
     "K and V in a paged pool [blocks][N][kv_heads][head_dim] read\n"
     "through a shuffled block table (vLLM's layout; 0: off)"},
    {"--packed", NULL, CLI_RUN, P, pin_packed, 0, 1, 0,
     "the batch as sequences of q_len/20 .. q_len queries (keys:\n"
     "kv_len - q_len more), packed into [tokens][heads][dim] with\n"
     "offsets (FlashAttention's cu_seqlens) instead of padded"},
    {"--shared-prefix", "N", CLI_RUN, P, pin_shared, GEN_C_SHARED_KEYS, 0, INT32_MAX,
     "every sequence after the first shares its first N keys with\n"
     "the one before it (attn_options.shared_prefix; at most what both\n"
     "have; 0: off): decode reads and attends them once"},
    {"--topk", "N", CLI_RUN, P, pin_topk, GEN_C_OPT(topk), 0, INT32_MAX,
     "top-k sparse attention (attn_options.topk_indices, DeepSeek\n"
     "V3.2): each query row sees N distinct keys of its sequence, 4 in\n"
     "5 of them the row before's (0: off); the forward reads only\n"
     "those"},
    {"--tree", "SHAPE", CLI_RUN, P, parse_tree, 0, 0, 0,
     "a draft tree over each sequence's q_len queries\n"
     "(attn_options.tree_parents, speculative decoding): chain (each\n"
     "token's parent the one before: the causal mask) or flat (every\n"
     "token hangs off the prefix)"},
    {"--seed", "S", RB, P, parse_u64, AT(seed), 0, 0,
     "seed of the input generator (default 1)"},
    {"--threads", "N", RB, E, parse_i64, AT(threads), 0, MAX_THREADS,
     "threads of the built-in pool, caller included\n"
     "(0, the default: the CPUs this process may run on, its\n"
     "affinity mask, as `attn info` shows)"},
    {"--isa", "NAME", RB, E, parse_isa, 0, 0, 0,
     "an instruction set `attn info` lists, or auto: select it with\n"
     "attn_isa_select before timing (default: keep the library's\n"
     "choice, which honours ATTN_ISA)"},
    {"--iters", "N", RB, E, parse_i64, AT(iters), 0, MAX_ITERS,
     "N timed calls after one warm-up call. 0 (default): automatic:\n"
     "the first call is timed; if it took at least 1 s it is the\n"
     "result, otherwise it was the warm-up and enough calls follow to\n"
     "fill about 2 s (run) or 1 s per preset (bench)"},
    {"--verify-rows", "N", RB, E, parse_i64, AT(verify_rows), 0, MAX_VERIFY_ROWS,
     "rows to verify (run: default 16, bench: 4 per preset; 0: none),\n"
     "spread evenly over all (batch, head, query) rows, first and\n"
     "last included"},
    {"--splits", "N", RB, E, parse_i64, AT(splits), 0, ATTN_MAX_KV_SPLITS,
     "split-KV: cut each task's keys into about N chunks run as\n"
     "separate tasks and merged (attn_options.kv_splits; the CLI\n"
     "provides the workspace). 0 (default): automatic, when the\n"
     "shape gives few tasks (decode, MQA); 1: never"},
    {"--backward", NULL, CLI_RUN, E, set_bool, AT(backward), 1, 0,
     "time attn_backward (dq, dk, dv) after one forward for its\n"
     "output and lse, and verify sampled dq rows in float64"},
    {"--plan", NULL, CLI_RUN, E, set_bool, AT(plan), 1, 0,
     "time attn_plan_run on a plan made once (attn_plan_forward:\n"
     "validation and partition done before timing) instead of\n"
     "attn_forward, as an engine does for every layer of a step"},
    {"--no-progress", NULL, RB, E, set_bool, AT(progress), 0, 0,
     "no progress line (it is shown on stderr, when stderr is a\n"
     "terminal, once a timed phase exceeds 1 s)"},
    {"--json", NULL, RB, E, set_bool, AT(json), 1, 0,
     "one JSON document on stdout instead of the report, nothing\n"
     "else there (the keys: see JSON below); progress and warnings\n"
     "stay on stderr"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

/* The values of the options whose parser takes names: its own list. */
static const struct {
    parse_fn parse;
    values_fn values;
    bool list;
} value_sets[] = {
    {parse_preset, preset_values, false},   {parse_preset_list, preset_values, true},
    {parse_kv_dtype, kv_dtype_values, false}, {parse_precision, precision_values, false},
    {parse_isa, isa_values, false},         {parse_tree, tree_values, false},
    {parse_fp8_scales, fp8_scale_values, false},
};

bool cli_option_at(size_t i, cli_option_view *v)
{
    if (i >= N_OPTIONS)
        return false;
    const cli_option *o = &options[i];
    memset(v, 0, sizeof *v);
    v->name = o->name;
    v->commands = o->commands;
    v->takes_value = o->metavar != NULL;
    for (size_t k = 0; k < sizeof value_sets / sizeof value_sets[0]; k++)
        if (value_sets[k].parse == o->parse) {
            v->n_values = value_sets[k].values(v->values);
            v->list = value_sets[k].list;
        }
    return true;
}

void cli_defaults(unsigned command, cli_settings *s)
{
    memset(s, 0, sizeof *s);
    s->isa = ATTN_ISA_AUTO;
    s->verify_rows = command == CLI_BENCH ? 4 : 16;
    s->seed = 1;
    s->progress = true;
    s->preset = &cli_presets[0]; /* prefill */
    for (int d = 0; d < N_DIMS; d++)
        s->dims[d] = -1;
    gen_profile_init(&s->pins); /* no choice pinned */
}

/* The option part of a command's --help, from the table. */
static void print_options(unsigned command)
{
    static const char *const sections[] = {P, E};
    for (size_t k = 0; k < sizeof sections / sizeof sections[0]; k++) {
        printf("%s:\n", sections[k]);
        for (size_t i = 0; i < N_OPTIONS; i++) {
            const cli_option *o = &options[i];
            if (!(o->commands & command) || strcmp(o->section, sections[k]))
                continue;
            char head[48];
            snprintf(head, sizeof head, "%s%s%s", o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
            printf("  %-18s", head);
            if (strlen(head) > 18)
                printf("\n  %-18s", "");
            char text[1024];
            const char *help = help_text(o->help, text, sizeof text);
            for (const char *line = help; *line;) {
                const char *nl = strchr(line, '\n');
                int len = nl ? (int)(nl - line) : (int)strlen(line);
                printf("%s%.*s\n", line == help ? "" : "                    ", len, line);
                line += len + (nl ? 1 : 0);
            }
        }
        printf("\n");
    }
}

void cli_print_help(unsigned command, const char *intro, const char *outro)
{
    fputs(intro, stdout);
    print_options(command);
    fputs(outro, stdout);
}

int cli_parse(unsigned command, const char *cmd, int argc, char **argv, cli_settings *s)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h"))
            return -1;
        if (strncmp(arg, "--", 2))
            return usage_error(cmd, "unexpected argument '%s'", arg);
        const char *eq = strchr(arg, '=');
        const size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const cli_option *o = NULL;
        for (size_t k = 0; k < N_OPTIONS && !o; k++)
            if ((options[k].commands & command) && strlen(options[k].name) == len &&
                !strncmp(options[k].name, arg, len))
                o = &options[k];
        if (!o)
            return usage_error(cmd, "unknown option '%s'", arg);
        const char *value = eq ? eq + 1 : NULL;
        if (!o->metavar && value)
            return usage_error(cmd, "option %s takes no value", o->name);
        if (o->metavar && !value) {
            if (i + 1 >= argc)
                return usage_error(cmd, "option %s needs a value", o->name);
            value = argv[++i];
        }
        int rc = o->parse(o, cmd, value, s);
        if (rc)
            return rc;
    }
    return EXIT_OK;
}

bool cli_problem_overridden(const cli_settings *s)
{
    bool any = false;
    for (int c = 0; c < GEN_C_COUNT; c++)
        any = any || s->pins.pinned[c];
    for (int d = 0; d < N_DIMS; d++)
        any = any || s->dims[d] >= 0;
    return any;
}

problem cli_problem(const cli_settings *s)
{
    attn_shape shape = s->preset->shape;
    int64_t *fields[N_DIMS] = {&shape.batch,  &shape.q_heads,  &shape.kv_heads,
                               &shape.q_len,  &shape.kv_len,   &shape.head_dim,
                               &shape.v_dim};
    for (int d = 0; d < N_DIMS; d++)
        if (s->dims[d] >= 0)
            *fields[d] = s->dims[d];
    return preset_problem(s->preset, &shape, &s->pins);
}

/* ------------------------------------------------------------ combinations */

/* The instruction set: compiled into the library, and run by this CPU. */
static int check_isa(const char *cmd, const cli_settings *s)
{
    if (!s->isa_given || attn_isa_available(s->isa))
        return EXIT_OK;
    const char *names[CLI_MAX_VALUES];
    char list[160];
    size_t n = 0;
    if (!attn_isa_built(s->isa)) {
        join_values(names, isa_values(names), list, sizeof list);
        return usage_error(cmd, "--isa %s: this libattn was built without it (built: %s)",
                           attn_isa_name(s->isa), list);
    }
    for (int i = ATTN_ISA_AUTO; n < CLI_MAX_VALUES; i++) {
        const char *name = attn_isa_name((attn_isa)i);
        if (!strcmp(name, "unknown"))
            break;
        if (attn_isa_available((attn_isa)i))
            names[n++] = name;
    }
    join_values(names, n, list, sizeof list);
    return usage_error(cmd, "--isa %s: this CPU does not run it (available here: %s)",
                       attn_isa_name(s->isa), list);
}

int cli_check(const char *cmd, const cli_settings *s, const problem *p)
{
    int rc = check_isa(cmd, s);
    if (rc || !p)
        return rc;
    const attn_shape *sh = &p->shape;
    const attn_options *o = &p->g.opt;
    const int64_t d = sh->head_dim, dv = v_dim_of(sh);
    const attn_dtype kt = kv_dtype_of(p);
    const char *kn = dtype_name(kt);
    const int64_t block = dtype_block(kt); /* values per stored unit */
    const int64_t tail = p->g.present[ATTN_OPT_POS_k_tail] ? o->k_tail_dim : 0;
    const bool scales = p->g.present[ATTN_OPT_POS_k_scales];
    const int64_t group = scales ? o->k_scale_group : 0;
    const bool packed = is_packed(p), paged = paged_block_of(p) > 0;
    const bool tree = s->pins.pinned[GEN_C_OPT(tree_parents)] && s->pins.pin[GEN_C_OPT(tree_parents)];

    if (sh->q_heads % sh->kv_heads)
        return usage_error(cmd, "--q-heads (%" PRId64 ") must be a multiple of --kv-heads (%" PRId64
                           ")", sh->q_heads, sh->kv_heads);
    if (packed && sh->kv_len < sh->q_len)
        return usage_error(cmd, "--packed needs --kv-len (%" PRId64 ") >= --q-len (%" PRId64 "): "
                           "each sequence has kv_len - q_len keys more than queries",
                           sh->kv_len, sh->q_len);
    if (tree && sh->q_len > sh->kv_len)
        return usage_error(cmd, "--tree needs --q-len (%" PRId64 ") <= --kv-len (%" PRId64 "): a "
                           "draft's tokens are the last keys of their sequence",
                           sh->q_len, sh->kv_len);
    if (has_alibi(p) && sh->q_len + sh->kv_len >= ((int64_t)1 << 31))
        return usage_error(cmd, "--alibi needs q_len + kv_len below 2^31 (the distances are "
                           "int32), got %" PRId64, sh->q_len + sh->kv_len);

    /* K/V storage: the key row's own part (less a tail), blocks, scales */
    if (tail >= d)
        return usage_error(cmd, "--k-tail %" PRId64 " leaves no value of head_dim %" PRId64
                           " to k: at most head_dim - 1 (or %d less for block formats)",
                           tail, d, 32);
    if ((d - tail) % block)
        return tail ? usage_error(cmd, "--kv-dtype %s stores rows in blocks of %" PRId64
                                  " values: head_dim %" PRId64 " less --k-tail %" PRId64
                                  " leaves %" PRId64 " to k, not a multiple of %" PRId64,
                                  kn, block, d, tail, d - tail, block)
                    : usage_error(cmd, "--kv-dtype %s stores rows in blocks of %" PRId64
                                  " values: head_dim %" PRId64 " is not a multiple of %" PRId64,
                                  kn, block, d, block);
    if (dv % block)
        return usage_error(cmd, "--kv-dtype %s stores rows in blocks of %" PRId64 " values: "
                           "v_dim %" PRId64 " is not a multiple of %" PRId64, kn, block, dv, block);
    const bool asym = dtype_kind(kt) == ATTN_DTYPE_KIND_ASYM;
    const int64_t rec = s->pins.pinned[GEN_C_ASYM_GROUP] ? s->pins.pin[GEN_C_ASYM_GROUP] : 0;
    if (rec && !asym) {
        char names[100];
        kind_names(ATTN_DTYPE_KIND_ASYM, names, sizeof names);
        return usage_error(cmd, "--kv-group needs an asymmetric --kv-dtype (%s), not %s", names,
                           kn);
    }
    if (rec && ((d - tail) % rec || dv % rec || rec % block))
        return usage_error(cmd, "--kv-group %" PRId64 " must divide head_dim%s (%" PRId64
                           ") and v_dim (%" PRId64 ")%s: K and V rows are whole records",
                           rec, tail ? " less --k-tail" : "", d - tail, dv,
                           block > 1 ? " and be even" : "");
    if (block > 1 && !asym && (paged || packed))
        return usage_error(cmd, "--kv-dtype %s with %s is not supported by this tool (the "
                           "library takes such caches)", kn, paged ? "--paged-block" : "--packed");
    if (tail && packed)
        return usage_error(cmd, "--k-tail with --packed is not supported by this tool yet (its "
                           "problem generator lays the tail out per batch entry)");
    if (scales && !is_fp8(kt)) {
        char fp8[160];
        kv_dtype_list(ATTN_DTYPE_KIND_FP8, 0, fp8, sizeof fp8);
        return usage_error(cmd, "--fp8-scales needs an FP8 --kv-dtype (%s), not %s", fp8, kn);
    }
    if (tail && is_fp8(kt) && group == 0)
        return usage_error(cmd, "--k-tail %" PRId64 " with --kv-dtype %s needs --fp8-scales G "
                           "(group scales; G divides head_dim - N = %" PRId64 " and v_dim %"
                           PRId64 "): the library takes no per-call or per-row scales there",
                           tail, kn, d - tail, dv);
    if (group > 0 && ((d - tail) % group || dv % group))
        return usage_error(cmd, "--fp8-scales %" PRId64 " must divide head_dim%s (%" PRId64
                           ") and v_dim (%" PRId64 "): it cuts K and V rows into groups",
                           group, tail ? " less --k-tail" : "", d - tail, dv);

    /* what attn_backward takes (attn.h), and what this tool times of it */
    if (s->backward) {
        if (s->plan)
            return usage_error(cmd, "--plan times the forward (attn_plan_run); it does not "
                               "take --backward");
        if (packed || paged)
            return usage_error(cmd, "--backward times dense tensors only in this tool (not %s)",
                               packed ? "--packed" : "--paged-block");
        if (dtype_kind(kt) != ATTN_DTYPE_KIND_FLOAT) {
            char floats[100];
            kv_dtype_list(ATTN_DTYPE_KIND_FLOAT, 0, floats, sizeof floats);
            return usage_error(cmd, "--backward needs --kv-dtype %s, not %s: attn_backward "
                               "takes no quantized K/V", floats, kn);
        }
        if (o->precision == ATTN_PRECISION_INT8)
            return usage_error(cmd, "--backward takes --precision default or bf16: "
                               "attn_backward has no int8 mode");
        if (tail)
            return usage_error(cmd, "--backward does not take --k-tail (attn_backward reads "
                               "key rows in one part)");
        if (p->g.present[ATTN_OPT_POS_shared_prefix])
            return usage_error(cmd, "--backward does not take a shared prefix (--shared-prefix"
                               ", or the preset's: --shared-prefix 0 turns it off)");
        if (s->splits)
            return usage_error(cmd, "--splits is the forward's split-KV; attn_backward has "
                               "its own task plan");
    }
    return EXIT_OK;
}

/* SPDX-License-Identifier: MIT */
/* attn completion: the bash completion script, from the option table. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char usage_completion[] =
    "Usage: attn completion [bash]\n"
    "\n"
    "Prints the bash completion script of attn (the one installed as\n"
    "share/bash-completion/completions/attn), made from the option table run\n"
    "and bench parse their options with: after the command, its options; after\n"
    "an option that takes a name (--preset, --presets, --kv-dtype, --precision,\n"
    "--isa, --tree, --fp8-scales), the names its parser accepts (--isa: the\n"
    "instruction sets compiled into this libattn); after one that takes a\n"
    "number, nothing (bash offers file names). To use it without installing:\n"
    "  source <(attn completion bash)\n"
    "\n"
    "Exit status: 0, or 2 for an unknown shell.\n";

/* The case arms of one command: each option's values, then its options. */
static void command_case(unsigned command, const char *name)
{
    cli_option_view v;
    printf("    %s)\n        case $prev in\n", name);
    /* a free-form value (a number): nothing offered, bash falls back to files */
    int free_form = 0;
    for (size_t i = 0; cli_option_at(i, &v); i++)
        if ((v.commands & command) && v.takes_value && !v.n_values)
            printf("%s%s", free_form++ ? "|" : "        ", v.name);
    if (free_form)
        printf(")\n            return 0 ;;\n");
    for (size_t i = 0; cli_option_at(i, &v); i++) {
        if (!(v.commands & command) || !v.takes_value || !v.n_values)
            continue;
        printf("        %s)\n            words=\"", v.name);
        for (size_t k = 0; k < v.n_values; k++)
            printf("%s%s", k ? " " : "", v.values[k]);
        printf("\"\n");
        if (v.list) /* name,name,...: complete the last one */
            printf("            mapfile -t COMPREPLY < <(compgen -P \"${cur%%\"${cur##*,}\"}\""
                   " -W \"$words\" -- \"${cur##*,}\")\n            return 0 ;;\n");
        else
            printf("            ;;\n");
    }
    printf("        *)\n            words=\"");
    for (size_t i = 0; cli_option_at(i, &v); i++)
        if (v.commands & command)
            printf("%s ", v.name);
    printf("--help\" ;;\n        esac ;;\n");
}

static void bash_script(void)
{
    printf("# bash completion for attn (libattn's tool): `attn completion bash`, from the\n"
           "# option table the tool parses its options with.\n"
           "_attn() {\n"
           "    local cur=${COMP_WORDS[COMP_CWORD]} prev= words=\n"
           "    COMPREPLY=()\n"
           "    [ \"$COMP_CWORD\" -ge 1 ] && prev=${COMP_WORDS[COMP_CWORD-1]}\n"
           "    # --option=value: bash splits the word at '=' (COMP_WORDBREAKS)\n"
           "    if [ \"$cur\" = \"=\" ]; then\n"
           "        cur=\n"
           "    elif [ \"$prev\" = \"=\" ] && [ \"$COMP_CWORD\" -ge 2 ]; then\n"
           "        prev=${COMP_WORDS[COMP_CWORD-2]}\n"
           "    fi\n"
           "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
           "        words=\"");
    for (size_t i = 0; i < cli_command_count; i++)
        printf("%s ", cli_commands[i]);
    printf("--help --version\"\n"
           "    else\n"
           "    case ${COMP_WORDS[1]} in\n");
    command_case(CLI_RUN, "run");
    command_case(CLI_BENCH, "bench");
    printf("    help)\n        words=\"");
    for (size_t i = 0, first = 1; i < cli_command_count; i++)
        if (strcmp(cli_commands[i], "help")) {
            printf("%s%s", first ? "" : " ", cli_commands[i]);
            first = 0;
        }
    printf("\" ;;\n"
           "    completion)\n        words=\"bash --help\" ;;\n"
           "    *)\n        words=\"--help\" ;;\n"
           "    esac\n"
           "    fi\n"
           "    mapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n"
           "}\n"
           "complete -o default -F _attn attn\n");
}

int cmd_completion(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_completion, stdout);
        return EXIT_OK;
    }
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "bash"))) {
        fprintf(stderr, "attn completion: %s '%s' (bash is the one)\nTry 'attn completion "
                        "--help'.\n", argc > 2 ? "unexpected argument" : "no completion for",
                argc > 2 ? argv[2] : argv[1]);
        return EXIT_USAGE;
    }
    bash_script();
    return EXIT_OK;
}

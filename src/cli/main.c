/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice: the command-line tool. Each subcommand lives in its own cmd_*.c as one descriptor
 * (cli/commands.h); this file only dispatches through their table and prints the overview.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

#ifndef SLUICE_VERSION /* set by CMake: VERSION, plus `git describe` in a checkout */
#define SLUICE_VERSION "unknown"
#endif

static const sl_cli_command *const commands[] = {
    &sl_cmd_check, &sl_cmd_health, &sl_cmd_attempt, &sl_cmd_status, &sl_cmd_quota,
    &sl_cmd_killswitch, &sl_cmd_top, &sl_cmd_sim, &sl_cmd_bench,
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\n'sluice <command> --help' describes a command's options; 'sluice --version' the version.\n"
               "Every command takes --json (one JSON object on stdout).\n"
               "--addr defaults to $SLUICE_ADDR, --admin-addr to $SLUICE_ADMIN_ADDR (flags win).\n\n");
    fputs(SL_CLI_EXIT_TABLE, f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("sluice %s\n", SLUICE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i]->name))
            return sl_cli_command_run(commands[i], argc - 1, argv + 1);
    fprintf(stderr, "sluice: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

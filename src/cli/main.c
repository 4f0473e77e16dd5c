/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice: the command-line tool. Each subcommand lives in its own cmd_*.c; this file only
 * dispatches and prints the overview.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

#ifndef SLUICE_VERSION /* set by CMake: VERSION, plus `git describe` in a checkout */
#define SLUICE_VERSION "unknown"
#endif

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} sl_cli_command;

static const sl_cli_command commands[] = {
    {"check", sl_cmd_check, "ask a sluiced for a rate-limit decision over gRPC"},
    {"health", sl_cmd_health, "show a sluiced's health (gRPC HealthCheck)"},
    {"attempt", sl_cmd_attempt, "Levee-style POST /attempt for a resource"},
    {"quota", sl_cmd_quota, "read and write Levee quotas and group sizes in etcd"},
    {"killswitch", sl_cmd_killswitch, "turn a limiter off, into shadow mode, or back on"},
    {"top", sl_cmd_top, "who a node's limits reject, would reject (shadow) or shed, top keys"},
    {"sim", sl_cmd_sim, "measure algorithms against a perfect sliding window (virtual clock)"},
    {"bench", sl_cmd_bench, "in-process benchmarks: sluice bench engine ..."},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: sluice <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'sluice <command> --help' describes a command's options; 'sluice --version' the version.\n");
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
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "sluice: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

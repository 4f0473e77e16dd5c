/* Subcommands of the `sluice` CLI: each takes the arguments after its own name and returns the
 * process exit code. */
#ifndef SLUICE_CLI_COMMANDS_H
#define SLUICE_CLI_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include "config/opt.h"

int sl_cmd_bench(int argc, char **argv);     /* cmd_bench.c:  sluice bench engine ... */
int sl_cmd_sim(int argc, char **argv);       /* cmd_sim.c:    sluice sim ... */
int sl_cmd_check(int argc, char **argv);     /* cmd_client.c: sluice check ... */
int sl_cmd_health(int argc, char **argv);    /* cmd_client.c: sluice health ... */
int sl_cmd_attempt(int argc, char **argv);   /* cmd_client.c: sluice attempt ... */
int sl_cmd_quota(int argc, char **argv);     /* cmd_quota.c:  sluice quota set|get|list|rm ... */
int sl_cmd_killswitch(int argc, char **argv); /* cmd_killswitch.c: sluice killswitch on|off ... */

/* cliopts.c: fill target from defaults and argv[1..argc) by the command's table (flags_only),
 * collecting up to maxpos positional arguments. True to go on (sl_opt_free(t, target) when done);
 * false when the command must end now with *code: 0 after printing --help, 2 after a usage error
 * (the engine's message on stderr, prefixed with the table's program name). */
bool sl_cli_parse(const sl_opt_table *t, void *target, int argc, char **argv, const char **pos,
                  size_t maxpos, size_t *npos, int *code);

#endif

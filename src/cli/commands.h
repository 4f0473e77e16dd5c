/* Subcommands of the `sluice` CLI: each takes the arguments after its own name and returns the
 * process exit code. */
#ifndef SLUICE_CLI_COMMANDS_H
#define SLUICE_CLI_COMMANDS_H

int sl_cmd_bench(int argc, char **argv);     /* cmd_bench.c:  sluice bench engine ... */
int sl_cmd_sim(int argc, char **argv);       /* cmd_sim.c:    sluice sim ... */
int sl_cmd_check(int argc, char **argv);     /* cmd_client.c: sluice check ... */
int sl_cmd_health(int argc, char **argv);    /* cmd_client.c: sluice health ... */
int sl_cmd_attempt(int argc, char **argv);   /* cmd_client.c: sluice attempt ... */
int sl_cmd_quota(int argc, char **argv);     /* cmd_quota.c:  sluice quota set|get|list|rm ... */
int sl_cmd_killswitch(int argc, char **argv); /* cmd_killswitch.c: sluice killswitch on|off ... */

#endif

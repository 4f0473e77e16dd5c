/* SPDX-License-Identifier: Apache-2.0 */
/* Subcommands of the `sluice` CLI: each takes the arguments after its own name and returns the
 * process exit code. */
#ifndef SLUICE_CLI_COMMANDS_H
#define SLUICE_CLI_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctlplane/etcd.h"
#include "config/opt.h"

int sl_cmd_bench(int argc, char **argv);     /* cmd_bench.c:  sluice bench engine ... */
int sl_cmd_sim(int argc, char **argv);       /* cmd_sim.c:    sluice sim ... */
int sl_cmd_check(int argc, char **argv);     /* cmd_client.c: sluice check ... */
int sl_cmd_health(int argc, char **argv);    /* cmd_client.c: sluice health ... */
int sl_cmd_attempt(int argc, char **argv);   /* cmd_client.c: sluice attempt ... */
int sl_cmd_quota(int argc, char **argv);     /* cmd_quota.c:  sluice quota set|get|list|rm ... */
int sl_cmd_killswitch(int argc, char **argv); /* cmd_killswitch.c: sluice killswitch on|off ... */
int sl_cmd_top(int argc, char **argv);       /* cmd_top.c:    sluice top ... */

/* cliopts.c: fill target from defaults and argv[1..argc) by the command's table (flags_only),
 * collecting up to maxpos positional arguments. True to go on (sl_opt_free(t, target) when done);
 * false when the command must end now with *code: 0 after printing --help, 2 after a usage error
 * (the engine's message on stderr, prefixed with the table's program name). */
bool sl_cli_parse(const sl_opt_table *t, void *target, int argc, char **argv, const char **pos,
                  size_t maxpos, size_t *npos, int *code);

/* The etcd options sluice quota and sluice killswitch share (a member `storage` of their option
 * structs; SL_CLI_STORAGE_OPTS(T) in their tables). NULL: not given. */
typedef struct sl_cli_storage {
    char *addrs;
    char *prefix;
    int64_t timeout_ns;
} sl_cli_storage;

#define SL_CLI_STORAGE_OPTS(T)                                                                    \
    {.name = "storage-addrs", .type = SL_OPT_STRING, .offset = offsetof(T, storage.addrs),       \
     .nullable = true, .metavar = "URL[,URL...]",                                                 \
     .def_doc = "$SLUICE_STORAGE_ADDRS, else http://127.0.0.1:2379", .help = "etcd endpoints"},   \
    {.name = "storage-prefix", .type = SL_OPT_STRING, .offset = offsetof(T, storage.prefix),     \
     .nullable = true, .metavar = "ROOT",                                                         \
     .def_doc = "$SLUICE_STORAGE_PREFIX, else /sluice, as sluiced", .help = "root of the tree"},  \
    {.name = "timeout", .type = SL_OPT_DURATION, .offset = offsetof(T, storage.timeout_ns),      \
     .def = "5s", .min = 1000000, .max = INT64_C(3600000000000), .help = "per-request timeout"}

/* An etcd client for the storage options (their defaults from sl_etcd_cli_defaults) and the root
 * in *root: 0, or the exit code after a message prefixed with `program` (2: bad --storage-addrs,
 * 1: no client). */
int sl_cli_etcd(const char *program, const sl_cli_storage *s, sl_etcd **e, const char **root);

#endif

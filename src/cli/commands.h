/* SPDX-License-Identifier: Apache-2.0 */
/* Subcommands of the `sluice` CLI: each is one descriptor, run by one driver
 * (sl_cli_command_run), so that every command parses, helps and exits the same way. */
#ifndef SLUICE_CLI_COMMANDS_H
#define SLUICE_CLI_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/bearer.h"
#include "base/strbuf.h"
#include "ctlplane/etcd.h"
#include "config/opt.h"

/* The exit codes of every command (sluice --help and man/sluice.1 show the table). */
#define SL_CLI_EXIT_OK 0          /* allowed, healthy, done */
#define SL_CLI_EXIT_LIMITED 1     /* limited, unhealthy, or refused (an item error, a 4xx, absent) */
#define SL_CLI_EXIT_USAGE 2       /* bad arguments or options */
#define SL_CLI_EXIT_UNREACHABLE 3 /* no usable answer: unreachable, timeout, 5xx, a broken answer */
/* The table, as the overview and the man page print it. */
#define SL_CLI_EXIT_TABLE                                                                         \
    "exit status (every command):\n"                                                              \
    "    0  allowed / healthy / done\n"                                                             \
    "    1  limited (over the limit, rejected, unhealthy) or refused (an item error, an HTTP 4xx,\n" \
    "       a value that is not set)\n"                                                             \
    "    2  usage error\n"                                                                          \
    "    3  unreachable or broken: no answer, a timeout, an HTTP 5xx or gRPC error, an answer\n"    \
    "       that cannot be read\n"

/* Most positional arguments a command may take. */
#define SL_CLI_MAX_POS 4

/* The positional arguments a command was given (after its options were read). */
typedef struct sl_cli_args {
    const char *const *pos;
    size_t npos;
} sl_cli_args;

/*
 * One subcommand. The driver fills a zeroed options struct of opts_size bytes from the table's
 * defaults and argv (flags, then up to maxpos positional arguments): --help prints the table's
 * help on stdout and exits 0; a usage error prints the engine's message (prefixed with the
 * table's program name, then usage_hint when set) on stderr and exits 2; fewer than minpos
 * positional arguments print the help on stderr and exit 2. Otherwise the exit code is run's,
 * and the options are freed after it. A command that routes its own arguments (sluice bench:
 * one benchmark by name, each an sl_cli_command of its own) sets main instead of table and run.
 */
typedef struct sl_cli_command {
    const char *name;    /* its word after `sluice` */
    const char *summary; /* its line in `sluice --help` */
    const sl_opt_table *table;
    size_t opts_size;
    size_t minpos, maxpos; /* maxpos at most SL_CLI_MAX_POS */
    const char *usage_hint;
    int (*run)(void *opts, const sl_cli_args *args);
    int (*main)(int argc, char **argv); /* argv[0] is the command's name */
} sl_cli_command;

/* Run c on the arguments from its name on (argv[0] is the name); the process exit code. */
int sl_cli_command_run(const sl_cli_command *c, int argc, char **argv);

/* The commands, in `sluice --help`'s order (main.c's table). */
extern const sl_cli_command sl_cmd_check;      /* cmd_client.c */
extern const sl_cli_command sl_cmd_health;     /* cmd_client.c */
extern const sl_cli_command sl_cmd_attempt;    /* cmd_client.c */
extern const sl_cli_command sl_cmd_quota;      /* cmd_quota.c: set|get|list|rm ... */
extern const sl_cli_command sl_cmd_killswitch; /* cmd_killswitch.c: on|off|shadow|status */
extern const sl_cli_command sl_cmd_top;        /* cmd_top.c */
extern const sl_cli_command sl_cmd_sim;        /* cmd_sim.c */
extern const sl_cli_command sl_cmd_bench;      /* cmd_bench.c: engine ... */

extern const sl_cli_command sl_cmd_status;     /* cmd_status.c */

/* Print o as one compact JSON line on stdout and release it (NULL: prints nothing). */
struct json_t;
void sl_cli_print_json(struct json_t *o);

/* The exit code of an HTTP status from an admin call: 0 for 2xx, 1 for other statuses below 500,
 * 3 for 5xx. */
int sl_cli_http_exit(long status);

/* The bearer token of an admin listener's --admin-token-file into token (NUL-terminated), for
 * sluice killswitch and sluice top: 0, or -1 after a message prefixed with `program`. */
int sl_cli_read_token(const char *program, const char *path, char token[SL_BEARER_MAX_LEN + 1]);

/* Where a command reaches one node's admin API: its Unix socket (the default: --admin-socket, or
 * sluiced's default path, sl_config_admin_socket) or, with --admin-addr HOST:PORT (else
 * $SLUICE_ADMIN_ADDR when no --admin-socket is given), its TCP admin
 * listener (https off loopback or with --admin-ca, verified against it or the system's CAs; else
 * http), with
 * the bearer token of --admin-token-file. Members of the command's option struct
 * (SL_CLI_ADMIN_OPTS(T, member) in its table). NULL: not given. */
typedef struct sl_cli_admin {
    char *socket;
    char *addr;
    char *token_file;
    char *ca_file;
} sl_cli_admin;

#define SL_CLI_ADMIN_OPTS(T, m)                                                                   \
    {.name = "admin-socket", .type = SL_OPT_STRING, .offset = offsetof(T, m.socket),             \
     .nullable = true, .metavar = "PATH",                                                         \
     .def_doc = "sluiced's default: $RUNTIME_DIRECTORY/admin.sock, else "                        \
                "$XDG_RUNTIME_DIR/sluice/admin.sock, else /run/sluice/admin.sock",               \
     .help = "the node's admin socket (sluiced --admin-socket)"},                                 \
    {.name = "admin-addr", .type = SL_OPT_STRING, .offset = offsetof(T, m.addr),                 \
     .nullable = true, .metavar = "HOST:PORT", .def_doc = "$SLUICE_ADMIN_ADDR, else the socket",  \
     .help = "the node's TCP admin listener instead (sluiced --admin-addr; the port is "          \
             "required); needs --admin-token-file"},                                              \
    {.name = "admin-token-file", .type = SL_OPT_STRING, .offset = offsetof(T, m.token_file),     \
     .nullable = true, .metavar = "FILE",                                                         \
     .help = "file holding the node's admin bearer token (sluiced --admin-token-file)"},          \
    {.name = "admin-ca", .type = SL_OPT_STRING, .offset = offsetof(T, m.ca_file),                \
     .nullable = true, .metavar = "FILE",                                                         \
     .help = "CA bundle verifying the --admin-addr listener's certificate (https; off "          \
             "loopback https is used anyway, verified against the system's CAs without it)"}

/* GET (json NULL) or POST json (Content-Type: application/json) to path ("/v1/admin/...",
 * query included) on the admin API a names. 0 with the HTTP status in *status and the body in
 * out; else the exit code after a message prefixed with `program`: 2 for a usage error (an
 * --admin-addr without a port, a bad token file), 3 when the node could not be reached. */
int sl_cli_admin_call(const char *program, const sl_cli_admin *a, const char *path,
                      const char *json, long timeout_ms, sl_strbuf *out, long *status);
/* What a names, for messages: the socket's path or the address. */
const char *sl_cli_admin_where(const sl_cli_admin *a, char *buf, size_t buflen);

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
 * 3: no client). */
int sl_cli_etcd(const char *program, const sl_cli_storage *s, sl_etcd **e, const char **root);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice killswitch: turn a limiter off (it then admits everything), put it in shadow mode (it
 * decides and counts but admits), or back on, by name - for every node at once through etcd
 * (<root>/killswitch/<NAME>, watched by every sluiced: obeyed within a second), or for one node
 * through its admin API (POST /v1/admin/killswitch on sluiced's admin socket with --admin-socket,
 * or on its --admin-addr with the bearer token of --admin-token-file). docs/protection.md lists
 * the names.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "auth/bearer.h"
#include "cli/commands.h"
#include "ctlplane/etcd.h"
#include "config/killswitch.h"

typedef struct ks_opts {
    sl_cli_admin admin; /* socket and addr NULL: etcd */
    bool node;          /* --node: one node, through its default admin socket */
    bool json;
    sl_cli_storage storage;
} ks_opts;

static const sl_opt ks_opts_table[] = {
    {.name = "node", .type = SL_OPT_BOOL, .offset = offsetof(ks_opts, node), .def = "false",
     .help = "one node only, through its admin API (the default admin socket unless "
             "--admin-socket or --admin-addr says where), instead of every node through etcd; "
             "until etcd next writes NAME"},
    {.name = "json", .type = SL_OPT_BOOL, .offset = offsetof(ks_opts, json), .def = "false",
     .help = "print one JSON object (the node's answer with --node)"},
    SL_CLI_ADMIN_OPTS(ks_opts, admin),
    {.name = "addr", .type = SL_OPT_STRING, .offset = offsetof(ks_opts, admin.addr),
     .nullable = true, .metavar = "HOST:PORT", .help = "the same as --admin-addr (its former name)"},
    SL_CLI_STORAGE_OPTS(ks_opts),
};

static const sl_opt_table ks_table = {
    .program = "sluice killswitch",
    .flags_only = true,
    .usage = "[options] on|off|shadow NAME\n"
             "       sluice killswitch [options] status",
    .about = "  on NAME       switch the limiter NAME off: it admits everything and says so\n"
             "                (NAME \"*\": every limiter)\n"
             "  shadow NAME   dark launch: NAME decides and counts, but admits what it would "
             "reject\n"
             "  off NAME      NAME enforces again\n"
             "  status        the switches that are set\n"
             "\n"
             "NAME is a Gubernator limit name, or for POST /attempt: \"levee\" (every rate "
             "quota),\n"
             "a quota's name, \"concurrency\", \"fleet\"; \"shed\" is sluiced's worker shedder.\n",
    .epilog = "exit: 0 done, 1 refused (an HTTP 4xx), 2 usage, 3 unreachable (no etcd, no node, 5xx)\n",
    .opts = ks_opts_table,
    .nopts = sizeof ks_opts_table / sizeof ks_opts_table[0],
};

/* ---------------------------------------------------------------- admin endpoint */

/* The switches of a node's GET answer, one line each. */
static void print_admin_status(const char *where, const char *text, size_t len)
{
    json_t *j = json_loadb(text, len, 0, NULL);
    json_t *sw = j ? json_object_get(j, "switches") : NULL;
    size_t i;
    json_t *e;
    json_array_foreach(sw, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *mode = json_string_value(json_object_get(e, "mode"));
        const char *origin = json_string_value(json_object_get(e, "origin"));
        printf("%s %s%s%s%s\n", name ? name : "?", mode ? mode : "?", origin ? " (" : "",
               origin ? origin : "", origin ? ")" : "");
    }
    if (!json_array_size(sw))
        printf("no switch is set on %s\n", where);
    json_decref(j);
}

static int via_admin(const sl_cli_admin *a, const char *cmd, const char *name, int mode,
                     long timeout, bool json)
{
    static const char *const prog = "sluice killswitch";
    char *body = NULL;
    if (strcmp(cmd, "status") != 0) {
        json_t *j = json_pack("{s:s,s:s}", "name", name, "mode",
                              mode == SL_KILLSWITCH_KILLED   ? "on"
                              : mode == SL_KILLSWITCH_SHADOW ? "shadow"
                                                             : "off");
        body = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!body)
            return SL_CLI_EXIT_UNREACHABLE;
    }
    sl_strbuf b;
    sl_strbuf_init(&b, 65536);
    long st = 0;
    int ret = sl_cli_admin_call(prog, a, "/v1/admin/killswitch", body, timeout, &b, &st);
    free(body);
    char where[300];
    sl_cli_admin_where(a, where, sizeof where);
    if (!ret && st != 200) {
        fprintf(stderr, "%s: %s: HTTP error %ld: %.*s\n", prog, where, st,
                (int)sl_strbuf_len(&b), sl_strbuf_str(&b));
        ret = sl_cli_http_exit(st);
    } else if (!ret && json) {
        printf("%.*s\n", (int)sl_strbuf_len(&b), sl_strbuf_str(&b));
    } else if (!ret && !strcmp(cmd, "status")) {
        print_admin_status(where, sl_strbuf_str(&b), sl_strbuf_len(&b));
    } else if (!ret) {
        printf("%s %s on %s (this node only)\n", name, sl_killswitch_mode_name(mode), where);
    }
    sl_strbuf_free(&b);
    return ret;
}

/* ---------------------------------------------------------------- etcd */

static int via_etcd(const sl_cli_storage *storage, const char *cmd, const char *name, int mode,
                    bool json)
{
    sl_etcd *e = NULL;
    const char *root;
    int erc = sl_cli_etcd("sluice killswitch", storage, &e, &root);
    if (erc)
        return erc;
    size_t rl = strlen(root);
    while (rl && root[rl - 1] == '/')
        rl--;
    char key[SL_KILLSWITCH_MAX_NAME + 600];
    int kl = snprintf(key, sizeof key, "%.*s/killswitch/%s", (int)rl, root,
                      name ? name : "");
    int ret = 0;
    char err[256];
    if (kl < 0 || (size_t)kl >= sizeof key) {
        fprintf(stderr, "sluice killswitch: name or root too long\n");
        ret = SL_CLI_EXIT_USAGE;
    } else if (!strcmp(cmd, "status")) {
        sl_etcd_kvs r;
        if (sl_etcd_range(e, key, (size_t)kl, true, 0, false, &r)) {
            fprintf(stderr, "sluice killswitch: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = SL_CLI_EXIT_UNREACHABLE;
        } else {
            size_t pl = (size_t)kl;
            json_t *sw = json ? json_array() : NULL;
            for (size_t i = 0; i < r.n; i++) {
                int m = sl_killswitch_parse_mode(r.kvs[i].value, r.kvs[i].value_len);
                const char *mn =
                    m < 0 ? "invalid" : sl_killswitch_mode_name((sl_killswitch_mode)m);
                if (json)
                    json_array_append_new(sw, json_pack("{s:s%,s:s,s:s}", "name",
                                                        r.kvs[i].key + pl,
                                                        r.kvs[i].key_len - pl, "mode", mn,
                                                        "origin", "etcd"));
                else
                    printf("%.*s %s\n", (int)(r.kvs[i].key_len - pl), r.kvs[i].key + pl, mn);
            }
            if (json)
                sl_cli_print_json(json_pack("{s:s,s:s%,s:o}", "source", "etcd", "prefix", key,
                                            pl, "switches", sw));
            else if (r.n == 0)
                printf("no switch is set under %.*s\n", (int)pl, key);
            sl_etcd_kvs_free(&r);
        }
    } else if (mode == SL_KILLSWITCH_ENFORCE) {
        /* off: no entry is the default, and leaves nothing behind */
        if (sl_etcd_delete(e, key, (size_t)kl, false, NULL, NULL)) {
            fprintf(stderr, "sluice killswitch: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = SL_CLI_EXIT_UNREACHABLE;
        } else if (json) {
            sl_cli_print_json(json_pack("{s:s,s:s,s:s,s:s}", "name", name, "mode", "enforce",
                                        "origin", "etcd", "key", key));
        } else {
            printf("%s enforce (%s deleted)\n", name, key);
        }
    } else {
        const char *val = mode == SL_KILLSWITCH_KILLED ? "on" : "shadow";
        int64_t rev = 0;
        if (sl_etcd_put(e, key, (size_t)kl, val, strlen(val), 0, &rev)) {
            fprintf(stderr, "sluice killswitch: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = SL_CLI_EXIT_UNREACHABLE;
        } else if (json) {
            sl_cli_print_json(json_pack("{s:s,s:s,s:s,s:s,s:I}", "name", name, "mode",
                                        sl_killswitch_mode_name((sl_killswitch_mode)mode),
                                        "origin", "etcd", "key", key, "revision",
                                        (json_int_t)rev));
        } else {
            printf("%s %s (%s = %s, revision %lld)\n", name,
                   sl_killswitch_mode_name((sl_killswitch_mode)mode), key, val, (long long)rev);
        }
    }
    sl_etcd_free(e);
    return ret;
}

static int run(void *opts, const sl_cli_args *args)
{
    const ks_opts *o = opts;
    const char *cmd = args->pos[0], *name = args->npos > 1 ? args->pos[1] : NULL;
    int mode;
    if (!strcmp(cmd, "on"))
        mode = SL_KILLSWITCH_KILLED;
    else if (!strcmp(cmd, "off"))
        mode = SL_KILLSWITCH_ENFORCE;
    else if (!strcmp(cmd, "shadow"))
        mode = SL_KILLSWITCH_SHADOW;
    else if (!strcmp(cmd, "status") || !strcmp(cmd, "list"))
        cmd = "status", mode = -1;
    else {
        fprintf(stderr, "sluice killswitch: unknown command '%s'\n", cmd);
        sl_opt_help(&ks_table, stderr);
        return SL_CLI_EXIT_USAGE;
    }
    if (mode >= 0 && (!name || !name[0] || strlen(name) > SL_KILLSWITCH_MAX_NAME)) {
        fprintf(stderr, "sluice killswitch: %s needs a NAME (1..%d bytes; \"*\" for all)\n", cmd,
                SL_KILLSWITCH_MAX_NAME);
        return 2;
    }
    if (mode < 0 && name) {
        fprintf(stderr, "sluice killswitch: status takes no NAME\n");
        return 2;
    }
    if (o->node || o->admin.addr || o->admin.socket)
        return via_admin(&o->admin, cmd, name, mode, (long)(o->storage.timeout_ns / 1000000),
                         o->json);
    if (o->admin.token_file || o->admin.ca_file) {
        fprintf(stderr, "sluice killswitch: --admin-token-file and --admin-ca go with "
                "--admin-addr\n");
        return 2;
    }
    return via_etcd(&o->storage, cmd, name, mode, o->json);
}

const sl_cli_command sl_cmd_killswitch = {
    .name = "killswitch", .summary = "turn a limiter off, into shadow mode, or back on",
    .table = &ks_table, .opts_size = sizeof(ks_opts), .minpos = 1, .maxpos = 2, .run = run};

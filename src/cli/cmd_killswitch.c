/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice killswitch: turn a limiter off (it then admits everything), put it in shadow mode (it
 * decides and counts but admits), or back on, by name - for every node at once through etcd
 * (<root>/killswitch/<NAME>, watched by every sluiced: obeyed within a second), or for one node
 * through its admin listener (POST /v1/admin/killswitch on sluiced's --admin-addr, with the
 * bearer token of --admin-token-file when it has one). docs/protection.md lists the names.
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
    char *addr; /* NULL: etcd */
    char *token_file; /* NULL: no token */
    sl_cli_storage storage;
} ks_opts;

static const sl_opt ks_opts_table[] = {
    {.name = "admin-addr", .type = SL_OPT_STRING, .offset = offsetof(ks_opts, addr),
     .nullable = true, .metavar = "HOST:PORT",
     .help = "one node only, through its admin listener (sluiced --admin-addr; port 5455 if "
             "none is given); until etcd next writes NAME"},
    {.name = "addr", .type = SL_OPT_STRING, .offset = offsetof(ks_opts, addr), .nullable = true,
     .metavar = "HOST:PORT", .help = "the same as --admin-addr (its former name)"},
    {.name = "admin-token-file", .type = SL_OPT_STRING, .offset = offsetof(ks_opts, token_file),
     .nullable = true, .metavar = "FILE",
     .help = "file holding the node's admin bearer token (sluiced --admin-token-file)"},
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
    .opts = ks_opts_table,
    .nopts = sizeof ks_opts_table / sizeof ks_opts_table[0],
};

/* ---------------------------------------------------------------- admin endpoint */

typedef struct body_buf {
    char data[65536];
    size_t len;
} body_buf;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    body_buf *b = ud;
    size_t len = size * n, room = sizeof b->data - 1 - b->len;
    size_t take = len < room ? len : room;
    memcpy(b->data + b->len, p, take);
    b->len += take;
    b->data[b->len] = 0;
    return len;
}

/* GET (json NULL) or POST json to http://addr/v1/admin/killswitch, with "Authorization: Bearer
 * <token>" when token is not NULL. The HTTP status, or -1. */
static long admin_call(const char *addr, const char *token, const char *json, long timeout,
                       body_buf *out)
{
    const char *host = strncmp(addr, "http://", 7) == 0 ? addr + 7 : addr;
    char url[600];
    int n = snprintf(url, sizeof url, "http://%s%s/v1/admin/killswitch", host,
                     strchr(host, ':') ? "" : ":5455");
    if (n < 0 || (size_t)n >= sizeof url)
        return -1;
    CURL *h = curl_easy_init();
    if (!h)
        return -1;
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    char auth[SL_BEARER_MAX_LEN + 32];
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    out->len = 0;
    out->data[0] = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (json) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sluice-cli");
    CURLcode cc = curl_easy_perform(h);
    long status = -1;
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    else
        snprintf(out->data, sizeof out->data, "%s", curl_easy_strerror(cc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (token)
        memset(auth, 0, sizeof auth);
    return status;
}

static int via_admin(const char *addr, const char *token, const char *cmd, const char *name, int mode, long timeout)
{
    body_buf *b = malloc(sizeof *b);
    if (!b)
        return 1;
    int ret = 0;
    if (!strcmp(cmd, "status")) {
        long st = admin_call(addr, token, NULL, timeout, b);
        if (st != 200) {
            fprintf(stderr, "sluice killswitch: %s: %s%s\n", addr,
                    st < 0 ? "" : "HTTP error ", b->data);
            ret = 1;
        } else {
            printf("%s\n", b->data);
        }
        free(b);
        return ret;
    }
    json_t *j = json_pack("{s:s,s:s}", "name", name, "mode",
                          mode == SL_KILLSWITCH_KILLED   ? "on"
                          : mode == SL_KILLSWITCH_SHADOW ? "shadow"
                                                         : "off");
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body) {
        free(b);
        return 1;
    }
    long st = admin_call(addr, token, body, timeout, b);
    free(body);
    if (st != 200) {
        fprintf(stderr, "sluice killswitch: %s: %s%s\n", addr, st < 0 ? "" : "HTTP error ",
                b->data);
        ret = 1;
    } else {
        printf("%s %s on %s (this node only)\n", name, sl_killswitch_mode_name(mode), addr);
    }
    free(b);
    return ret;
}

/* ---------------------------------------------------------------- etcd */

static int via_etcd(const sl_cli_storage *storage, const char *cmd, const char *name, int mode)
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
        ret = 2;
    } else if (!strcmp(cmd, "status")) {
        sl_etcd_kvs r;
        if (sl_etcd_range(e, key, (size_t)kl, true, 0, false, &r)) {
            fprintf(stderr, "sluice killswitch: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = 1;
        } else {
            size_t pl = (size_t)kl;
            for (size_t i = 0; i < r.n; i++) {
                int m = sl_killswitch_parse_mode(r.kvs[i].value, r.kvs[i].value_len);
                printf("%.*s %s\n", (int)(r.kvs[i].key_len - pl), r.kvs[i].key + pl,
                       m < 0 ? "invalid" : sl_killswitch_mode_name((sl_killswitch_mode)m));
            }
            if (r.n == 0)
                printf("no switch is set under %.*s\n", (int)pl, key);
            sl_etcd_kvs_free(&r);
        }
    } else if (mode == SL_KILLSWITCH_ENFORCE) {
        /* off: no entry is the default, and leaves nothing behind */
        if (sl_etcd_delete(e, key, (size_t)kl, false, NULL, NULL)) {
            fprintf(stderr, "sluice killswitch: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = 1;
        } else {
            printf("%s enforce (%s deleted)\n", name, key);
        }
    } else {
        const char *val = mode == SL_KILLSWITCH_KILLED ? "on" : "shadow";
        int64_t rev = 0;
        if (sl_etcd_put(e, key, (size_t)kl, val, strlen(val), 0, &rev)) {
            fprintf(stderr, "sluice killswitch: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = 1;
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
        return 2;
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
    if (o->addr) {
        char token[SL_BEARER_MAX_LEN + 1];
        if (o->token_file && sl_cli_read_token("sluice killswitch", o->token_file, token))
            return 2;
        int ret = via_admin(o->addr, o->token_file ? token : NULL, cmd, name, mode,
                            (long)(o->storage.timeout_ns / 1000000));
        memset(token, 0, sizeof token);
        return ret;
    }
    if (o->token_file) {
        fprintf(stderr, "sluice killswitch: --admin-token-file goes with --admin-addr\n");
        return 2;
    }
    return via_etcd(&o->storage, cmd, name, mode);
}

const sl_cli_command sl_cmd_killswitch = {
    .name = "killswitch", .summary = "turn a limiter off, into shadow mode, or back on",
    .table = &ks_table, .opts_size = sizeof(ks_opts), .minpos = 1, .maxpos = 2, .run = run};

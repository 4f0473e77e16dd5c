/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one skeleton of a sluice subcommand (sl_cli_command_run): its table of options through the
 * option engine (config/opt.h), the same machinery and value syntax as sluiced's, with --help
 * generated from the table and every usage error worded by the engine, then its body and its exit
 * code; and what several commands share: the etcd client of the commands that write the tree, the
 * token file of the commands that call an admin listener.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/addr.h"
#include "auth/secret.h"
#include "base/file.h"
#include "cli/commands.h"
#include "config/config.h"
#include "ctlplane/etcd.h"

/* Largest admin answer the CLI reads (sluice top's JSON is the largest). */
#define SL_CLI_ADMIN_MAX_ANSWER (4u << 20)

/* Fill target from defaults and argv[1..argc) by the table (flags_only), collecting up to maxpos
 * positional arguments. True to go on (sl_opt_free(t, target) when done); false when the command
 * must end now with *code: 0 after printing --help, 2 after a usage error (the engine's message
 * on stderr, prefixed with the table's program name). */
static bool parse(const sl_opt_table *t, void *target, int argc, char **argv, const char **pos,
                  size_t maxpos, size_t *npos, int *code)
{
    char err[512];
    int rc = sl_opt_defaults(t, target, err, sizeof err);
    if (rc == 0)
        rc = sl_opt_parse_args(t, target, argc, argv, pos, maxpos, npos, err, sizeof err);
    if (rc == 0)
        return true;
    if (rc == SL_OPT_HELP) {
        sl_opt_help(t, stdout);
        *code = 0;
    } else {
        fprintf(stderr, "%s: %s\n", t->program, err);
        *code = 2;
    }
    sl_opt_free(t, target);
    return false;
}

int sl_cli_etcd(const char *program, const sl_cli_storage *s, sl_etcd **e, const char **root)
{
    const char *addrs;
    sl_etcd_cli_defaults(&addrs, root);
    if (s->addrs)
        addrs = s->addrs;
    if (s->prefix)
        *root = s->prefix;
    int rc = sl_etcd_new_from_list(addrs, (long)(s->timeout_ns / 1000000), e);
    if (rc == 0)
        return 0;
    if (rc == -EINVAL)
        fprintf(stderr, "%s: bad --storage-addrs '%s'\n", program, addrs);
    else
        fprintf(stderr, "%s: cannot create the etcd client\n", program);
    return rc == -EINVAL ? SL_CLI_EXIT_USAGE : SL_CLI_EXIT_UNREACHABLE;
}

void sl_cli_print_json(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(o);
}

int sl_cli_http_exit(long status)
{
    return status / 100 == 2 ? SL_CLI_EXIT_OK
           : status >= 500 || status < 100 ? SL_CLI_EXIT_UNREACHABLE
                                           : SL_CLI_EXIT_LIMITED;
}

/* The TCP admin address a names: --admin-addr, else $SLUICE_ADMIN_ADDR unless --admin-socket was
 * given; NULL: the socket. */
static const char *admin_addr(const sl_cli_admin *a)
{
    if (a->addr)
        return a->addr;
    const char *env = a->socket ? NULL : getenv("SLUICE_ADMIN_ADDR");
    return env && env[0] ? env : NULL;
}

int sl_cli_command_run(const sl_cli_command *c, int argc, char **argv)
{
    if (c->main)
        return c->main(argc, argv);
    void *opts = calloc(1, c->opts_size ? c->opts_size : 1);
    if (!opts) {
        fprintf(stderr, "%s: out of memory\n", c->table->program);
        return SL_CLI_EXIT_UNREACHABLE;
    }
    const char *pos[SL_CLI_MAX_POS];
    sl_cli_args args = {.pos = pos};
    size_t maxpos = c->maxpos < SL_CLI_MAX_POS ? c->maxpos : SL_CLI_MAX_POS;
    int code;
    if (!parse(c->table, opts, argc, argv, pos, maxpos, &args.npos, &code)) {
        if (code == 2 && c->usage_hint)
            fputs(c->usage_hint, stderr);
    } else {
        if (args.npos < c->minpos) {
            sl_opt_help(c->table, stderr);
            code = 2;
        } else {
            code = c->run(opts, &args);
        }
        sl_opt_free(c->table, opts);
    }
    free(opts);
    return code;
}

int sl_cli_read_token(const char *program, const char *path, char token[SL_BEARER_MAX_LEN + 1])
{
    char *buf = NULL, err[300];
    size_t len = 0, tl = 0;
    const char *tok, *why = "";
    int rc = sl_secret_read(path, 4096, &buf, &len, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", program, err);
        return -1;
    }
    rc = sl_bearer_parse_secret(buf, len, &tok, &tl, &why);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", program, path, why);
    } else {
        memcpy(token, tok, tl);
        token[tl] = '\0';
    }
    sl_secret_free(buf, len); /* the secret does not outlive its use */
    return rc ? -1 : 0;
}

const char *sl_cli_admin_where(const sl_cli_admin *a, char *buf, size_t buflen)
{
    if (admin_addr(a))
        return admin_addr(a);
    if (sl_config_admin_socket(a->socket, buf, buflen, NULL, 0))
        return a->socket ? a->socket : "?";
    return buf;
}

static size_t admin_body(char *p, size_t size, size_t n, void *ud)
{
    sl_strbuf *b = ud;
    size_t len = size * n;
    if (sl_strbuf_len(b) + len > SL_CLI_ADMIN_MAX_ANSWER)
        return 0; /* too large: curl fails the transfer */
    sl_strbuf_append(b, p, len);
    return len;
}

int sl_cli_admin_call(const char *program, const sl_cli_admin *a, const char *path,
                      const char *json, long timeout_ms, sl_strbuf *out, long *status)
{
    char sock[256], url[1200], host[128];
    unsigned short port;
    bool tls = false;
    const char *addr = admin_addr(a);
    if (addr) {
        const char *hp = strncmp(addr, "http://", 7) == 0 ? addr + 7 : addr;
        if (sl_addr_split(hp, host, sizeof host, &port) || port == 0) {
            fprintf(stderr, "%s: %s '%s' is not HOST:PORT (sluiced has no default "
                    "admin port: give the one of its --admin-addr, or use --admin-socket)\n",
                    program, a->addr ? "--admin-addr" : "SLUICE_ADMIN_ADDR", addr);
            return SL_CLI_EXIT_USAGE;
        }
        tls = !sl_addr_is_loopback(hp) || a->ca_file; /* a CA: the listener speaks TLS */
        snprintf(url, sizeof url, "%s://%s%s", tls ? "https" : "http", hp, path);
    } else {
        if (sl_config_admin_socket(a->socket, sock, sizeof sock, NULL, 0)) {
            fprintf(stderr, "%s: --admin-socket: path too long\n", program);
            return SL_CLI_EXIT_USAGE;
        }
        snprintf(url, sizeof url, "http://localhost%s", path);
    }
    char token[SL_BEARER_MAX_LEN + 1];
    if (a->token_file && sl_cli_read_token(program, a->token_file, token))
        return SL_CLI_EXIT_USAGE;
    CURL *h = curl_easy_init();
    if (!h) {
        sl_secret_wipe(token, sizeof token);
        fprintf(stderr, "%s: cannot create the HTTP client\n", program);
        return SL_CLI_EXIT_UNREACHABLE;
    }
    struct curl_slist *hdrs = NULL;
    if (json)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    char auth[SL_BEARER_MAX_LEN + 32];
    if (a->token_file) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    sl_strbuf_reset(out);
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (!addr)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock);
    if (tls && a->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, a->ca_file);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (json) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, admin_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sluice-cli");
    CURLcode cc = curl_easy_perform(h);
    int code = 0;
    if (cc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    } else {
        char where[300];
        fprintf(stderr, "%s: %s: %s\n", program, sl_cli_admin_where(a, where, sizeof where),
                curl_easy_strerror(cc));
        code = SL_CLI_EXIT_UNREACHABLE;
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    sl_secret_wipe(auth, sizeof auth);
    sl_secret_wipe(token, sizeof token);
    return code;
}

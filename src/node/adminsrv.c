/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin listener (see adminsrv.h): browser checks, token check, then routing by path.
 *
 *   exchange -> Host / Origin / Content-Type (auth/webguard: 403 forbidden)
 *            -> / | /status (the status page: no data, so no token)
 *            -> token (TCP) -> /v1/admin/killswitch | /v1/admin/top
 *                            | /v1/admin/status | /metrics | 404
 *
 * Refused calls are counted (sluice_admin_requests_total{outcome="unauthorized"|"forbidden"}),
 * never logged one by one: an attacker cannot fill the log through this port.
 */
#include "node/adminsrv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/addr.h"
#include "auth/bearer.h"
#include "auth/secret.h"
#include "auth/webguard.h"
#include "base/file.h"
#include "net/server.h"
#include "protect/admin.h"
#include "sluice/clock.h"

enum { O_OK, O_UNAUTHORIZED, O_FORBIDDEN, O_NOT_FOUND, O_ERROR, O_COUNT };
static const char *const outcome_names[O_COUNT] = {"ok", "unauthorized", "forbidden",
                                                   "not_found", "error"};

struct sl_adminsrv {
    sl_adminsrv_config cfg;
    char *token;      /* NULL: none */
    size_t token_len;
    sl_server *server;
    sl_metrics_counter *outcomes[O_COUNT];
    char bound[80];   /* TCP: "ip:port" / "[v6]:port" as bound (the port read back); "": Unix */
    char sock[108];   /* the Unix socket's path (cfg.socket_path points here); "": TCP */
    bool tls;
};

static void respond_text(sl_exchange *ex, int status, const char *msg)
{
    sl_exchange_respond_simple(ex, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

static bool authorized(const sl_adminsrv *a, const sl_http_request *rq)
{
    if (!a->token)
        return true;
    const sl_http_header *h = sl_http_header_find(rq, "authorization");
    const char *tok;
    size_t len;
    if (!h || sl_bearer_from_header(h->value, h->value_len, &tok, &len))
        return false;
    return sl_bearer_equal(tok, len, a->token, a->token_len);
}

static bool get_or_head(sl_exchange *ex, const sl_http_request *rq)
{
    if (!strcmp(rq->method, "GET") || !strcmp(rq->method, "HEAD"))
        return true;
    respond_text(ex, 405, "method not allowed: use GET\n");
    return false;
}

static int metrics(sl_adminsrv *a, sl_exchange *ex, const sl_http_request *rq)
{
    if (!get_or_head(ex, rq))
        return O_ERROR;
    char *txt = NULL;
    size_t len = 0;
    if (!a->cfg.metrics || sl_metrics_render_prometheus(a->cfg.metrics, &txt, &len)) {
        respond_text(ex, 500, "metrics unavailable\n");
        return O_ERROR;
    }
    sl_exchange_respond_simple(ex, 200, SL_METRICS_PROMETHEUS_CONTENT_TYPE, txt, len);
    free(txt);
    return O_OK;
}

static int killswitch(sl_adminsrv *a, sl_exchange *ex, const sl_http_request *rq)
{
    if (!a->cfg.protect) {
        respond_text(ex, 503, "no switchboard on this node\n");
        return O_ERROR;
    }
    sl_admin_response r;
    sl_admin_handle(a->cfg.protect, rq->method, rq->body, rq->body_len, &r);
    if (!r.body) {
        respond_text(ex, 500, "out of memory\n");
        return O_ERROR;
    }
    sl_exchange_respond_simple(ex, r.status, r.content_type, r.body, r.body_len);
    free(r.body);
    return r.status == 200 ? O_OK : O_ERROR;
}

/* One query parameter's raw value ("name=value" between '?'/'&'); false when absent. */
static bool query_param(const char *path, size_t len, const char *name, const char **v, size_t *n)
{
    const char *q = memchr(path, '?', len);
    if (!q)
        return false;
    const char *end = path + len;
    size_t nl = strlen(name);
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *e = amp ? amp : end;
        if ((size_t)(e - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == '=') {
            *v = p + nl + 1;
            *n = (size_t)(e - *v);
            return true;
        }
        if (!amp)
            break;
        p = amp + 1;
    }
    return false;
}

int sl_adminsrv_top_query(const char *path, size_t len, char *limit, size_t limit_size,
                          bool *filter, size_t *want, const char **why)
{
    const char *v;
    size_t n;
    limit[0] = 0;
    *want = 10;
    *filter = query_param(path, len, "limit", &v, &n);
    if (*filter) {
        if (n > SL_WHO_NAME_MAX || n >= limit_size) {
            *why = "limit: too long\n";
            return -EINVAL;
        }
        memcpy(limit, v, n);
        limit[n] = 0;
    }
    if (query_param(path, len, "n", &v, &n)) {
        char num[8];
        char *endp;
        *why = "n: 1..1000\n";
        if (n == 0 || n >= sizeof num)
            return -EINVAL;
        memcpy(num, v, n);
        num[n] = 0;
        long k = strtol(num, &endp, 10);
        if (*endp || k < 1 || k > SL_WHO_MAX_K)
            return -EINVAL;
        *want = (size_t)k;
    }
    return 0;
}

/* GET /v1/admin/top[?limit=NAME][&n=N]: who is limited (protect/who.h), as JSON. */
static int top(sl_adminsrv *a, sl_exchange *ex, const sl_http_request *rq)
{
    if (!get_or_head(ex, rq))
        return O_ERROR;
    if (!a->cfg.protect) {
        respond_text(ex, 503, "no protection on this node\n");
        return O_ERROR;
    }
    char limit[SL_WHO_NAME_MAX + 1];
    bool filter;
    size_t want;
    const char *why;
    if (sl_adminsrv_top_query(rq->path, rq->path_len, limit, sizeof limit, &filter, &want,
                              &why)) {
        respond_text(ex, 400, why);
        return O_ERROR;
    }
    char *body;
    size_t len;
    if (sl_who_top_json(sl_protect_who(a->cfg.protect), filter ? limit : NULL, want,
                        sl_wall_ms(), &body, &len)) {
        respond_text(ex, 500, "out of memory\n");
        return O_ERROR;
    }
    sl_exchange_respond_simple(ex, 200, "application/json", body, len);
    free(body);
    return O_OK;
}

/* 200 with these headers and a malloc'd body, which is freed. */
static int respond_taken(sl_exchange *ex, const sl_http_header *h, size_t nh, char *body,
                         size_t len)
{
    sl_http_response resp = {.status = 200, .headers = h, .nheaders = nh, .body = body,
                             .body_len = len};
    sl_exchange_respond(ex, &resp);
    free(body);
    return O_OK;
}

/* GET /status or /: the page (node/statuspage.h) under a CSP naming this response's nonce. */
static int status_page(sl_adminsrv *a, sl_exchange *ex, const sl_http_request *rq)
{
    if (!get_or_head(ex, rq))
        return O_ERROR;
    char nonce[SL_STATUSPAGE_NONCE_LEN + 1], csp[512];
    char *body;
    size_t len;
    if (sl_statuspage_nonce(nonce) || sl_statuspage_html(nonce, a->token != NULL, &body, &len)) {
        respond_text(ex, 500, "status page unavailable\n");
        return O_ERROR;
    }
    sl_statuspage_csp(nonce, csp, sizeof csp);
    const sl_http_header h[] = {
        SL_HTTP_HEADER("content-type", "text/html; charset=utf-8"),
        {"content-security-policy", 23, csp, strlen(csp)},
        SL_HTTP_HEADER("x-content-type-options", "nosniff"),
        SL_HTTP_HEADER("referrer-policy", "no-referrer"),
        SL_HTTP_HEADER("cache-control", "no-store"),
    };
    return respond_taken(ex, h, sizeof h / sizeof *h, body, len);
}

/* GET /v1/admin/status: what the page shows, as JSON. */
static int status_json(sl_adminsrv *a, sl_exchange *ex, const sl_http_request *rq)
{
    if (!get_or_head(ex, rq))
        return O_ERROR;
    char *body;
    size_t len;
    if (sl_statuspage_json(&a->cfg.status, sl_wall_ms(), &body, &len)) {
        respond_text(ex, 500, "out of memory\n");
        return O_ERROR;
    }
    static const sl_http_header h[] = {
        SL_HTTP_HEADER("content-type", "application/json"),
        SL_HTTP_HEADER("cache-control", "no-store"),
        SL_HTTP_HEADER("x-content-type-options", "nosniff"),
    };
    return respond_taken(ex, h, sizeof h / sizeof *h, body, len);
}

static sl_webguard_value header_value(const sl_http_request *rq, const char *name)
{
    const sl_http_header *h = sl_http_header_find(rq, name);
    return h ? (sl_webguard_value){h->value, h->value_len} : (sl_webguard_value){NULL, 0};
}

/* The browser checks (auth/webguard.h) of an admin listener: true to go on, else answered 403. */
static bool web_allowed(const sl_adminsrv *a, sl_exchange *ex, const sl_http_request *rq)
{
    if (!a->cfg.admin)
        return true; /* the read-only /metrics listener: nothing a page could change */
    sl_webguard_listener l = {.addr = a->bound[0] ? a->bound : NULL, .tls = a->tls};
    const char *why;
    if (sl_webguard_check(&l, rq->method, header_value(rq, "host"), header_value(rq, "origin"),
                          header_value(rq, "content-type"), &why) == SL_WEBGUARD_OK)
        return true;
    char msg[160];
    snprintf(msg, sizeof msg, "forbidden: %s\n", why);
    respond_text(ex, 403, msg);
    return false;
}

static void handle(void *ud, sl_exchange *ex)
{
    sl_adminsrv *a = ud;
    const sl_http_request *rq = sl_exchange_request(ex);
    int o;
    bool page = a->cfg.admin && a->cfg.status.engine;
    if (!web_allowed(a, ex, rq)) {
        o = O_FORBIDDEN;
    } else if (page && (sl_http_path_is(rq, SL_STATUSPAGE_PATH) || sl_http_path_is(rq, "/"))) {
        o = status_page(a, ex, rq);
    } else if (!authorized(a, rq)) {
        static const sl_http_header h[] = {{"www-authenticate", 16, "Bearer", 6},
                                           {"content-type", 12, "text/plain; charset=utf-8", 25}};
        static const char body[] = "unauthorized: send Authorization: Bearer <admin token>\n";
        sl_http_response resp = {.status = 401, .headers = h, .nheaders = 2, .body = body,
                                 .body_len = sizeof body - 1};
        sl_exchange_respond(ex, &resp);
        o = O_UNAUTHORIZED;
    } else if (sl_http_path_is(rq, "/metrics")) {
        o = metrics(a, ex, rq);
    } else if (a->cfg.admin && sl_http_path_is(rq, SL_ADMIN_PATH)) {
        o = killswitch(a, ex, rq);
    } else if (a->cfg.admin && sl_http_path_is(rq, SL_ADMINSRV_TOP_PATH)) {
        o = top(a, ex, rq);
    } else if (page && sl_http_path_is(rq, SL_STATUSPAGE_JSON_PATH)) {
        o = status_json(a, ex, rq);
    } else {
        respond_text(ex, 404, "not found\n");
        o = O_NOT_FOUND;
    }
    sl_metrics_counter_inc(a->outcomes[o]);
}

/* Read a token file: 0 with a copy of the token in *out (NUL-terminated, the caller wipes and
 * frees it), or a negative errno with the reason in err (never the token). */
static int read_token(const char *path, char **out, size_t *out_len, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    char ferr[1024];
    int rc = sl_file_read(path, SL_ADMINSRV_MAX_TOKEN_FILE, SL_FILE_REGULAR | SL_FILE_SECRET,
                          &buf, &len, ferr, sizeof ferr);
    if (rc) {
        snprintf(err, errlen, "admin-token-file %s", ferr);
        return rc;
    }
    const char *tok, *why = "";
    size_t tl;
    rc = sl_bearer_parse_secret(buf, len, &tok, &tl, &why);
    if (!rc) {
        *out = malloc(tl + 1);
        if (!*out)
            rc = -ENOMEM;
        else {
            memcpy(*out, tok, tl);
            (*out)[tl] = '\0';
            *out_len = tl;
        }
    }
    sl_secret_free(buf, len); /* the secret does not linger in freed memory */
    if (rc)
        snprintf(err, errlen, "admin-token-file %s: %s", path,
                 rc == -ENOMEM ? "out of memory" : why);
    return rc;
}

static void wipe_token(char *tok, size_t len)
{
    sl_secret_free(tok, len);
}

int sl_adminsrv_check_token_file(const char *path, char *err, size_t errlen)
{
    char *tok = NULL;
    size_t len = 0;
    int rc = read_token(path, &tok, &len, err, errlen);
    wipe_token(tok, len);
    return rc;
}

/* A new token on its way to the listener's one worker thread, which alone reads a->token. */
typedef struct token_swap {
    sl_adminsrv *a;
    char *token;
    size_t len;
} token_swap;

static void swap_token(void *ud)
{
    token_swap *t = ud;
    wipe_token(t->a->token, t->a->token_len);
    t->a->token = t->token;
    t->a->token_len = t->len;
    free(t);
}

int sl_adminsrv_reload_token(sl_adminsrv *a, char *err, size_t errlen)
{
    if (!a || !a->token || !a->cfg.token_file || !a->cfg.token_file[0])
        return 1;
    token_swap *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    t->a = a;
    int rc = read_token(a->cfg.token_file, &t->token, &t->len, err, errlen);
    if (!rc && (rc = sl_server_post(a->server, 0, swap_token, t)) != 0)
        snprintf(err, errlen, "the admin listener is not running");
    if (rc) {
        wipe_token(t->token, t->len);
        free(t);
    }
    return rc;
}

static int register_metrics(sl_adminsrv *a)
{
    if (a->cfg.counts_with) {
        memcpy(a->outcomes, a->cfg.counts_with->outcomes, sizeof a->outcomes);
        return 0;
    }
    if (!a->cfg.metrics || !a->cfg.admin)
        return 0;
    sl_metrics_family *f;
    int rc = sl_metrics_counter_family(a->cfg.metrics, "sluice_admin_requests_total",
                                       "Requests to the admin listeners (--admin-socket, "
                                       "--admin-addr) by outcome (ok, unauthorized, forbidden: "
                                       "a foreign Host or Origin or a state change that is not "
                                       "JSON, not_found, error).",
                                       "outcome", &f);
    if (rc)
        return rc;
    for (int i = 0; i < O_COUNT; i++) {
        const char *v[1] = {outcome_names[i]};
        a->outcomes[i] = sl_metrics_counter_get(f, v, 1);
    }
    return 0;
}

int sl_adminsrv_start(const sl_adminsrv_config *cfg, sl_adminsrv **out, char *err, size_t errlen)
{
    const char *what = cfg->admin ? "admin-addr" : "metrics-addr";
    bool on_unix = cfg->admin && cfg->socket_path && cfg->socket_path[0];
    char host[128] = "";
    unsigned short port = 0;
    if (!on_unix && sl_addr_split(cfg->addr, host, sizeof host, &port)) {
        snprintf(err, errlen, "%s '%s' is not ip:port", what, cfg->addr);
        return -EINVAL;
    }
    bool has_token = cfg->admin && cfg->token_file && cfg->token_file[0];
    if (cfg->admin && !on_unix && !has_token) {
        snprintf(err, errlen, "admin-addr %s: an admin listener on TCP needs --admin-token-file "
                 "(every call over TCP carries the token); without --admin-addr the admin API is "
                 "on the Unix socket --admin-socket", cfg->addr);
        return -EINVAL;
    }
    if (cfg->admin && !on_unix && !cfg->tls && !sl_addr_is_loopback(cfg->addr)) {
        snprintf(err, errlen, "admin-addr %s is not loopback: it needs TLS (--tls-cert and "
                 "--tls-key, whose certificate the admin listener shares)", cfg->addr);
        return -EINVAL;
    }
    sl_adminsrv *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->cfg = *cfg;
    a->cfg.tls = NULL; /* the server takes its own reference */
    if (on_unix) { /* the caller's path may not outlive the call */
        snprintf(a->sock, sizeof a->sock, "%s", cfg->socket_path);
        a->cfg.socket_path = a->sock;
    }
    a->tls = !on_unix && cfg->admin && cfg->tls;
    int rc = has_token ? read_token(cfg->token_file, &a->token, &a->token_len, err, errlen) : 0;
    if (!rc && (rc = register_metrics(a)))
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
    if (!rc) {
        sl_server_config sv;
        sl_server_config_defaults(&sv);
        sv.host = host;
        sv.port = port;
        sv.unix_path = on_unix ? cfg->socket_path : NULL;
        sv.exclusive = true; /* no SO_REUSEPORT: no other socket may join the port */
        sv.workers = 1;
        sv.max_conns = 64;
        sv.read_timeout_ms = 10000;
        sv.idle_timeout_ms = 30000;
        sv.limits.max_body_bytes = cfg->max_body_bytes ? cfg->max_body_bytes : 65536;
        sv.tls = a->tls ? cfg->tls : NULL;
        sv.handler = handle;
        sv.handler_ud = a;
        rc = sl_server_start(&a->server, &sv);
        if (rc && on_unix)
            snprintf(err, errlen, "admin-socket %s: %s", cfg->socket_path,
                     rc == -EADDRINUSE ? "another sluiced is listening there"
                     : rc == -EEXIST   ? "a file that is not a socket is in the way"
                                       : strerror(-rc));
        else if (rc)
            snprintf(err, errlen, "listen on %s %s: %s", what, cfg->addr, strerror(-rc));
    }
    if (!rc && !on_unix)
        snprintf(a->bound, sizeof a->bound, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
                 (unsigned)sl_server_port(a->server));
    if (rc) {
        sl_adminsrv_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

int sl_adminsrv_set_tls(sl_adminsrv *a, sl_tls_ctx *ctx)
{
    if (!a || !a->tls)
        return -EINVAL;
    return sl_server_set_tls(a->server, ctx);
}

const char *sl_adminsrv_socket(const sl_adminsrv *a)
{
    return a && a->sock[0] ? a->sock : NULL;
}

uint16_t sl_adminsrv_port(const sl_adminsrv *a)
{
    return sl_server_port(a->server);
}

void sl_adminsrv_shutdown(sl_adminsrv *a, uint32_t grace_ms)
{
    if (a && a->server)
        sl_server_shutdown(a->server, grace_ms);
}

void sl_adminsrv_free(sl_adminsrv *a)
{
    if (!a)
        return;
    if (a->server) {
        sl_server_shutdown(a->server, 0);
        sl_server_wait(a->server);
        sl_server_free(a->server);
    }
    wipe_token(a->token, a->token_len);
    free(a);
}

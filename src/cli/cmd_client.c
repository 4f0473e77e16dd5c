/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `sluice check`, `sluice health`, `sluice attempt`: one request to a running sluiced, printed for
 * a person (or as one JSON object with --json), with an exit code a script can branch on:
 *
 *   0  under the limit / healthy / accepted (or released)
 *   1  over the limit (or the server refused the item with an error) / unhealthy / rejected
 *      (or, for --release, an unknown lease)
 *   2  usage error
 *   3  no usable answer: connect failure, timeout, reset, a gRPC error status, HTTP 500/400
 *
 * check and health speak gRPC over HTTP/2 through the client library; attempt speaks HTTP/1.1
 * through libcurl by default (what most Levee callers use), or HTTP/2 through the library with
 * --http2. Every command speaks TLS with --tls (or any --tls-ca/--tls-cert/--tls-key/
 * --tls-server-name): the library's TLS for gRPC and --http2 (ALPN h2), libcurl's HTTPS otherwise;
 * the server's certificate is verified either way (--tls-ca, else the system's trust store).
 * The CLI never fails open: a failure the library would have answered "allowed" is reported as
 * such and exits 3.
 */
#define _GNU_SOURCE /* strcasestr */
#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/commands.h"
#include "sluice/client.h"
#include "sluice/engine.h"
#include "sluice/clock.h"

#define EXIT_UNDER SL_CLI_EXIT_OK
#define EXIT_OVER SL_CLI_EXIT_LIMITED
#define EXIT_USAGE SL_CLI_EXIT_USAGE
#define EXIT_TRANSPORT SL_CLI_EXIT_UNREACHABLE
#define DEFAULT_ADDR "127.0.0.1:5454"
#define DEFAULT_TIMEOUT "1s"
#define MAX_METADATA 16

/* ------------------------------------------------------------------ options */

/* The options check, health and attempt share (a member `co` of each command's struct). */
typedef struct cli_common {
    char *addr; /* NULL: $SLUICE_ADDR, else DEFAULT_ADDR (addr_of) */
    int64_t timeout_ns;
    bool json;
    bool tls;
    char *tls_ca, *tls_cert, *tls_key, *tls_server_name; /* NULL: unset */
} cli_common;

#define COMMON_OPTS(T)                                                                            \
    {.name = "addr", .type = SL_OPT_STRING, .offset = offsetof(T, co.addr), .nullable = true,    \
     .def_doc = "$SLUICE_ADDR, else " DEFAULT_ADDR, .metavar = "HOST:PORT",                       \
     .help = "server address"},                                                                   \
    {.name = "timeout", .type = SL_OPT_DURATION, .offset = offsetof(T, co.timeout_ns),           \
     .def = DEFAULT_TIMEOUT, .min = 1000000, .max = INT64_C(3600000000000),                       \
     .help = "give up after this long"},                                                         \
    {.name = "json", .type = SL_OPT_BOOL, .offset = offsetof(T, co.json),                         \
     .help = "print one JSON object"},                                                           \
    {.name = "tls", .type = SL_OPT_BOOL, .offset = offsetof(T, co.tls),                           \
     .help = "speak TLS (sluiced --tls-cert); implied by the other --tls-* options"},            \
    {.name = "tls-ca", .type = SL_OPT_STRING, .offset = offsetof(T, co.tls_ca), .nullable = true, \
     .metavar = "FILE", .def_doc = "the system's trust store",                                    \
     .help = "CA bundle the server's certificate must chain to"},                               \
    {.name = "tls-cert", .type = SL_OPT_STRING, .offset = offsetof(T, co.tls_cert),             \
     .nullable = true, .metavar = "FILE",                                                         \
     .help = "client certificate (PEM), for sluiced --tls-client-auth"},                         \
    {.name = "tls-key", .type = SL_OPT_STRING, .offset = offsetof(T, co.tls_key),               \
     .nullable = true, .metavar = "FILE", .help = "private key of --tls-cert"},                   \
    {.name = "tls-server-name", .type = SL_OPT_STRING, .offset = offsetof(T, co.tls_server_name), \
     .nullable = true, .metavar = "NAME", .def_doc = "the host of --addr",                        \
     .help = "the name the server's certificate must carry (and SNI)"}

/* The server address: --addr, else $SLUICE_ADDR, else the default. */
static const char *addr_of(const cli_common *c)
{
    const char *env = getenv("SLUICE_ADDR");
    return c->addr ? c->addr : env && env[0] ? env : DEFAULT_ADDR;
}

static bool want_tls(const cli_common *c)
{
    return c->tls || c->tls_ca || c->tls_cert || c->tls_key || c->tls_server_name;
}

static int timeout_ms(const cli_common *c)
{
    return (int)(c->timeout_ns / 1000000);
}

/* A --duration in whole milliseconds: the engine's duration syntax (a bare number is ms). */
static bool parse_duration_ms(const char *s, int64_t *out)
{
    int64_t ns;
    if (sl_opt_parse_duration(s, &ns) || ns < 0 || ns % 1000000 != 0)
        return false;
    *out = ns / 1000000;
    return true;
}

static int gregorian_from_name(const char *s)
{
    static const char *const names[] = {"minutes", "hours", "days", "weeks", "months", "years"};
    for (int i = 0; i < 6; i++)
        if (!strcasecmp(s, names[i]))
            return i;
    return -1;
}

static bool parse_behavior(const char *s, int32_t *out)
{
    static const struct {
        const char *name;
        int32_t bit;
    } names[] = {
        {"batching", SL_BATCHING}, {"no_batching", SL_NO_BATCHING}, {"global", SL_GLOBAL},
        {"duration_is_gregorian", SL_DURATION_IS_GREGORIAN},
        {"reset_remaining", SL_RESET_REMAINING}, {"multi_region", SL_MULTI_REGION},
        {"drain_over_limit", SL_DRAIN_OVER_LIMIT},
    };
    int32_t b = 0;
    const char *p = s;
    while (*p) {
        size_t n = strcspn(p, ",|");
        int64_t num;
        char tok[32];
        if (n == 0 || n >= sizeof tok)
            return false;
        memcpy(tok, p, n);
        tok[n] = 0;
        bool found = false;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (!strcasecmp(tok, names[i].name)) {
                b |= names[i].bit;
                found = true;
            }
        }
        if (!found) {
            if (sl_opt_parse_int(tok, &num) || num < 0 || num > 0xffff)
                return false;
            b |= (int32_t)num;
        }
        p += n;
        if (*p)
            p++;
    }
    *out = b;
    return true;
}

static void iso_time(int64_t epoch_ms, char *buf, size_t cap)
{
    time_t secs = (time_t)(epoch_ms / 1000);
    struct tm tm;
    if (epoch_ms <= 0 || !gmtime_r(&secs, &tm)) {
        snprintf(buf, cap, "-");
        return;
    }
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", base, (int)(epoch_ms % 1000));
}

static void print_json(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(o);
}

static const char *err_text(int err)
{
    return err == -EPROTO         ? "bad or unexpected answer"
           : err == -EKEYREJECTED ? "TLS handshake failed"
                                  : strerror(-err);
}

/* Why a call of client c failed, with OpenSSL's reason when TLS did (into buf). */
static const char *fail_text(int err, sl_client *c, char *buf, size_t n)
{
    if (err != -EKEYREJECTED)
        return err_text(err);
    snprintf(buf, n, "TLS handshake failed: %s", sl_client_tls_error(c));
    return buf;
}

static sl_client *open_client(const cli_common *co, int timeout_ms)
{
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = timeout_ms;
    o.connect_timeout_ms = timeout_ms;
    o.reconnect_backoff_ms = 0;
    o.max_sync_conns = 1;
    o.tls = want_tls(co);
    o.tls_ca_file = co->tls_ca;
    o.tls_cert_file = co->tls_cert;
    o.tls_key_file = co->tls_key;
    o.tls_server_name = co->tls_server_name;
    sl_client *c = NULL;
    const char *addr = addr_of(co);
    int rc = sl_client_new(addr, &o, &c);
    if (rc < 0 && o.tls && rc != -EHOSTUNREACH) {
        fprintf(stderr, "sluice: cannot use address '%s' with these TLS files: %s\n", addr,
                rc == -EINVAL ? "malformed address, a file that does not load, or a certificate "
                                "without its key"
                              : strerror(-rc));
        return NULL;
    }
    if (rc < 0) {
        fprintf(stderr, "sluice: cannot use address '%s': %s\n", addr,
                rc == -EHOSTUNREACH ? "name does not resolve" : strerror(-rc));
        return NULL;
    }
    return c;
}

/* ------------------------------------------------------------------ sluice check */

typedef struct check_opts {
    cli_common co;
    char *name, *key, *duration; /* required */
    int64_t hits, limit, burst, sub_windows, created_at;
    char *algorithm, *behavior;
    sl_opt_list metadata;
} check_opts;

static const sl_opt check_opts_table[] = {
    COMMON_OPTS(check_opts),
    {.name = "name", .type = SL_OPT_STRING, .offset = offsetof(check_opts, name),
     .nullable = true, .def_doc = "required", .metavar = "N", .help = "limit name"},
    {.name = "key", .type = SL_OPT_STRING, .offset = offsetof(check_opts, key), .nullable = true,
     .def_doc = "required", .metavar = "K", .help = "unique key, e.g. account:42"},
    {.name = "hits", .type = SL_OPT_INT, .offset = offsetof(check_opts, hits), .def = "1",
     .metavar = "H", .help = "hits to take (0 only looks; negative gives back)"},
    {.name = "limit", .type = SL_OPT_INT, .offset = offsetof(check_opts, limit), .def = "-1",
     .def_doc = "required", .min = -1, .max = INT64_MAX, .metavar = "L", .help = "the limit"},
    {.name = "duration", .type = SL_OPT_STRING, .offset = offsetof(check_opts, duration),
     .nullable = true, .def_doc = "required", .metavar = "D",
     .help = "window: 1500 (ms), 1500ms, 2s, 5m, 1h; with --behavior duration_is_gregorian: "
             "minutes, hours, days, months or years"},
    {.name = "algorithm", .type = SL_OPT_STRING, .offset = offsetof(check_opts, algorithm),
     .def = "token_bucket", .metavar = "A",
     .help = "token_bucket, leaky_bucket, gcra, fixed_window, sliding_window, sliding_log, "
             "concurrency"},
    {.name = "behavior", .type = SL_OPT_STRING, .offset = offsetof(check_opts, behavior),
     .metavar = "B",
     .help = "comma-separated: batching, no_batching, global, duration_is_gregorian, "
             "reset_remaining, multi_region, drain_over_limit (or a number)"},
    {.name = "burst", .type = SL_OPT_INT, .offset = offsetof(check_opts, burst), .def = "0",
     .min = 0, .max = INT64_MAX, .metavar = "B",
     .help = "leaky_bucket: bucket size (0 = limit); gcra: requests admitted at once beyond one"},
    {.name = "sub-windows", .type = SL_OPT_INT, .offset = offsetof(check_opts, sub_windows),
     .def = "0", .min = 0, .max = 1000000, .metavar = "N",
     .help = "sliding_window sub-windows (sent as metadata sub_windows)"},
    {.name = "metadata", .type = SL_OPT_LIST, .offset = offsetof(check_opts, metadata),
     .repeat = true, .metavar = "K=V",
     .help = "request metadata entry, repeatable (e.g. priority=critical)"},
    {.name = "created-at", .type = SL_OPT_INT, .offset = offsetof(check_opts, created_at),
     .def = "0", .def_doc = "when the server receives it", .min = 0, .max = INT64_MAX,
     .metavar = "MS", .help = "request time, epoch ms"},
};

static const sl_opt_table check_table = {
    .program = "sluice check",
    .flags_only = true,
    .usage = "--name N --key K --limit L --duration D [options]",
    .about = "Ask a sluiced (or any Gubernator v2 server) for one rate-limit decision over gRPC\n"
             "(/pb.gubernator.V1/GetRateLimits) and print the answer.\n",
    .epilog = "exit: 0 under limit, 1 over limit or the item refused (an error in the request), 2\n"
              "usage, 3 no answer (connect failure, timeout, gRPC error status) or the server could\n"
              "not decide the item (a peer or Redis failed)\n",
    .opts = check_opts_table,
    .nopts = sizeof check_opts_table / sizeof check_opts_table[0],
};

/* The request the options describe, its metadata in md (MAX_METADATA entries). 0, or EXIT_USAGE
 * after a message. */
static int check_item(check_opts *o, sl_client_item *it, sl_client_kv *md)
{
    const char *name = o->name, *key = o->key, *duration = o->duration;
    int32_t behavior = 0;
    size_t nmd = 0;
    int algorithm = sl_algorithm_from_name(o->algorithm, strlen(o->algorithm));
    if (algorithm < 0) {
        fprintf(stderr, "sluice check: bad value for --algorithm: '%s'\n", o->algorithm);
        return EXIT_USAGE;
    }
    if (o->behavior[0] && !parse_behavior(o->behavior, &behavior)) {
        fprintf(stderr, "sluice check: bad value for --behavior: '%s'\n", o->behavior);
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < o->metadata.n; i++) {
        char *kv = o->metadata.items[i], *eq = strchr(kv, '=');
        if (!eq || eq == kv || nmd == MAX_METADATA) {
            fprintf(stderr, "sluice check: bad value for --metadata: '%s'%s\n", kv,
                    nmd == MAX_METADATA ? " (too many)" : "");
            return EXIT_USAGE;
        }
        *eq = 0;
        md[nmd].key = kv;
        md[nmd].value = eq + 1;
        nmd++;
    }
    if (!name || !key || o->limit < 0 || !duration) {
        fprintf(stderr, "sluice check: --name, --key, --limit and --duration are required "
                        "(see --help)\n");
        return EXIT_USAGE;
    }
    int64_t dur;
    int g = behavior & SL_DURATION_IS_GREGORIAN ? gregorian_from_name(duration) : -1;
    if (g >= 0) {
        dur = g;
    } else if (behavior & SL_DURATION_IS_GREGORIAN ? sl_opt_parse_int(duration, &dur) != 0
                                                   : !parse_duration_ms(duration, &dur)) {
        fprintf(stderr, "sluice check: bad --duration '%s'\n", duration);
        return EXIT_USAGE;
    }
    memset(it, 0, sizeof *it);
    it->req = (sl_client_request){.name = name, .name_len = strlen(name), .unique_key = key,
                           .unique_key_len = strlen(key), .hits = o->hits, .limit = o->limit,
                           .duration = dur, .burst = o->burst, .created_at = o->created_at,
                           .algorithm = algorithm, .behavior = behavior,
                           .sub_windows = (int32_t)o->sub_windows};
    it->metadata = md;
    it->metadata_count = nmd;
    return 0;
}

/* No usable answer (connect failure, timeout, a gRPC error status). */
static void print_check_failure(const check_opts *o, const sl_client_check_reply *r,
                                const char *why_err)
{
    const char *why = r->grpc_message ? r->grpc_message : why_err;
    if (o->co.json) {
        json_t *j = json_object();
        json_object_set_new(j, "error", json_string(why));
        json_object_set_new(j, "errno", json_integer(r->err));
        if (r->grpc_status >= 0)
            json_object_set_new(j, "grpc_status", json_integer(r->grpc_status));
        if (r->http_status)
            json_object_set_new(j, "http_status", json_integer(r->http_status));
        print_json(j);
    } else {
        fprintf(stderr, "sluice check: no answer from %s: %s", addr_of(&o->co), why);
        if (r->grpc_status > 0)
            fprintf(stderr, " (grpc-status %d)", r->grpc_status);
        fprintf(stderr, "\n");
    }
}

/* Whether an item error says the server could not decide (a peer, Redis or memory failed: 3)
 * rather than that it refused the request (1). */
static bool item_error_is_failure(const char *e)
{
    static const char *const words[] = {"from peer", "peer ",   "redis",     "unavailable",
                                        "timed out", "timeout", "out of memory", "not ready"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcasestr(e, words[i]))
            return true;
    return false;
}

/* An item the server answered with an error: no decision, so no status. */
static int print_item_error(const check_opts *o, const sl_client_result *x)
{
    bool failure = item_error_is_failure(x->resp.error);
    if (o->co.json) {
        json_t *j = json_object();
        json_object_set_new(j, "error", json_string(x->resp.error));
        json_object_set_new(j, "error_kind", json_string(failure ? "failed" : "refused"));
        json_t *m = json_object();
        for (size_t i = 0; i < x->metadata_count; i++)
            json_object_set_new(m, x->metadata[i].key, json_string(x->metadata[i].value));
        json_object_set_new(j, "metadata", m);
        print_json(j);
    } else {
        fprintf(stderr, "sluice check: %s: %s\n",
                failure ? "the server could not decide the item" : "the server refused the item",
                x->resp.error);
    }
    return failure ? EXIT_TRANSPORT : EXIT_OVER;
}

/* The decision, for a person or as JSON; its exit code. */
static int print_check_result(const check_opts *o, const sl_client_result *x)
{
    if (x->resp.error && x->resp.error[0])
        return print_item_error(o, x);
    bool over = x->resp.status == SL_OVER_LIMIT;
    char iso[48];
    iso_time(x->resp.reset_time, iso, sizeof iso);
    int64_t now = sl_wall_ms();
    if (o->co.json) {
        json_t *j = json_object();
        json_object_set_new(j, "status", json_string(over ? "OVER_LIMIT" : "UNDER_LIMIT"));
        json_object_set_new(j, "limit", json_integer(x->resp.limit));
        json_object_set_new(j, "remaining", json_integer(x->resp.remaining));
        json_object_set_new(j, "reset_time", json_integer(x->resp.reset_time));
        json_object_set_new(j, "reset_time_iso", json_string(iso));
        json_object_set_new(j, "error", json_string("")); /* a decision: no item error */
        json_t *m = json_object();
        for (size_t i = 0; i < x->metadata_count; i++)
            json_object_set_new(m, x->metadata[i].key, json_string(x->metadata[i].value));
        json_object_set_new(j, "metadata", m);
        print_json(j);
    } else {
        printf("status:     %s\n", over ? "OVER_LIMIT" : "UNDER_LIMIT");
        printf("limit:      %lld\n", (long long)x->resp.limit);
        printf("remaining:  %lld\n", (long long)x->resp.remaining);
        if (x->resp.reset_time > 0)
            printf("reset_time: %s (%lld ms, in %lld ms)\n", iso, (long long)x->resp.reset_time,
                   (long long)(x->resp.reset_time > now ? x->resp.reset_time - now : 0));
        else
            printf("reset_time: - (0)\n");
        for (size_t i = 0; i < x->metadata_count; i++)
            printf("%-11s %s=%s\n", i ? "" : "metadata:", x->metadata[i].key,
                   x->metadata[i].value);
    }
    return over ? EXIT_OVER : EXIT_UNDER;
}

static int check_run(void *opts, const sl_cli_args *args)
{
    check_opts *o = opts;
    (void)args;
    sl_client_kv md[MAX_METADATA];
    sl_client_item it;
    int rc = check_item(o, &it, md);
    if (rc)
        return rc;
    sl_client *c = open_client(&o->co, timeout_ms(&o->co));
    if (!c)
        return EXIT_USAGE;
    sl_client_check_reply r;
    int crc = sl_client_check(c, &it, 1, timeout_ms(&o->co), &r);
    char wbuf[256];
    const char *why = fail_text(r.err, c, wbuf, sizeof wbuf);
    sl_client_free(c);
    if (crc < 0 && !r.items) {
        fprintf(stderr, "sluice check: %s\n", strerror(-crc));
        return EXIT_USAGE;
    }
    if (r.err) {
        print_check_failure(o, &r, why);
        rc = EXIT_TRANSPORT;
    } else {
        rc = print_check_result(o, &r.items[0]);
    }
    sl_client_check_reply_free(&r);
    return rc;
}

const sl_cli_command sl_cmd_check = {
    .name = "check", .summary = "ask a sluiced for a rate-limit decision over gRPC",
    .table = &check_table, .opts_size = sizeof(check_opts), .run = check_run};

/* ------------------------------------------------------------------ sluice health */

typedef struct health_opts {
    cli_common co;
} health_opts;

static const sl_opt health_opts_table[] = {COMMON_OPTS(health_opts)};

static const sl_opt_table health_table = {
    .program = "sluice health",
    .flags_only = true,
    .about = "Ask a sluiced for its health (gRPC /pb.gubernator.V1/HealthCheck).\n",
    .epilog = "exit: 0 healthy, 1 unhealthy, 2 usage, 3 no answer\n",
    .opts = health_opts_table,
    .nopts = sizeof health_opts_table / sizeof health_opts_table[0],
};

static int health_run(void *opts, const sl_cli_args *args)
{
    const health_opts *o = opts;
    (void)args;
    const char *addr = addr_of(&o->co);
    int timeout = timeout_ms(&o->co);
    bool json = o->co.json;
    sl_client *c = open_client(&o->co, timeout);
    if (!c)
        return EXIT_USAGE;
    sl_health_reply h;
    int rc = sl_client_health(c, timeout, &h);
    char wbuf[256];
    const char *why = fail_text(rc, c, wbuf, sizeof wbuf);
    sl_client_free(c);
    if (rc < 0) {
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "error", json_string(why));
            json_object_set_new(o, "errno", json_integer(rc));
            print_json(o);
        } else {
            fprintf(stderr, "sluice health: no answer from %s: %s\n", addr, why);
        }
        return EXIT_TRANSPORT;
    }
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "status", json_string(h.status));
        json_object_set_new(o, "message", json_string(h.message));
        json_object_set_new(o, "peer_count", json_integer(h.peer_count));
        json_object_set_new(o, "advertise_address", json_string(h.advertise_address));
        if (h.grpc_status > 0)
            json_object_set_new(o, "grpc_status", json_integer(h.grpc_status));
        print_json(o);
    } else {
        printf("status:     %s\n", h.status[0] ? h.status : "-");
        if (h.message[0])
            printf("message:    %s\n", h.message);
        printf("peer_count: %d\n", (int)h.peer_count);
        if (h.advertise_address[0])
            printf("advertise:  %s\n", h.advertise_address);
        if (h.grpc_status > 0)
            printf("grpc:       status %d\n", h.grpc_status);
    }
    return h.healthy ? EXIT_UNDER : EXIT_OVER;
}

const sl_cli_command sl_cmd_health = {
    .name = "health", .summary = "show a sluiced's health (gRPC HealthCheck)",
    .table = &health_table, .opts_size = sizeof(health_opts), .run = health_run};

/* ------------------------------------------------------------------ sluice attempt */

typedef struct attempt_opts {
    cli_common co;
    char *resource, *prefix, *method, *req_id, *priority; /* NULL: header not sent */
    bool acquire, http2;
    char *release;                                        /* NULL: an attempt */
} attempt_opts;

#define A_HEADER(f, n, mv, h)                                                                     \
    {.name = n, .type = SL_OPT_STRING, .offset = offsetof(attempt_opts, f), .nullable = true,    \
     .metavar = mv, .help = h}

static const sl_opt attempt_opts_table[] = {
    COMMON_OPTS(attempt_opts),
    A_HEADER(resource, "resource", "R", "X-Resource: the resource key (required for an attempt)"),
    A_HEADER(prefix, "prefix", "P", "X-Prefix: path within the resource"),
    A_HEADER(method, "method", "M", "X-Method: sub-resource, e.g. the HTTP method"),
    A_HEADER(req_id, "req-id", "ID", "X-Req-Id: trace id, echoed by the server"),
    A_HEADER(priority, "priority", "P", "X-Priority: critical, post, get or test"),
    {.name = "acquire", .type = SL_OPT_BOOL, .offset = offsetof(attempt_opts, acquire),
     .help = "take a concurrency lease (X-Concurrency: acquire); prints its id"},
    A_HEADER(release, "release", "LEASE", "give a lease back (POST /release with X-Lease-Id)"),
    {.name = "http2", .type = SL_OPT_BOOL, .offset = offsetof(attempt_opts, http2),
     .help = "HTTP/2 through libsluice's client (h2c, or h2 over TLS) instead of HTTP/1.1 "
             "(libcurl)"},
};

static const sl_opt_table attempt_table = {
    .program = "sluice attempt",
    .flags_only = true,
    .usage = "--resource R [options]\n"
             "       sluice attempt --release LEASE [options]",
    .about = "Levee's POST /attempt against a sluiced: may this request for the resource go ahead?\n",
    .epilog = "exit: 0 accepted (or released), 1 rejected (429, or 503 shedding; or, releasing, an\n"
              "unknown lease),\n"
              "2 usage, 3 failed (500, 400) or no answer\n",
    .opts = attempt_opts_table,
    .nopts = sizeof attempt_opts_table / sizeof attempt_opts_table[0],
};

typedef struct curl_ctx {
    sl_attempt_reply *r;
    char body[256];
    size_t blen;
} curl_ctx;

static size_t curl_on_header(char *buf, size_t size, size_t n, void *ud)
{
    curl_ctx *cx = ud;
    size_t len = size * n;
    char *colon = memchr(buf, ':', len);
    if (colon && colon != buf) {
        size_t nl = (size_t)(colon - buf);
        sl_attempt_reply_header(cx->r, buf, nl, colon + 1, len - nl - 1);
    }
    return len;
}

static size_t curl_on_body(char *buf, size_t size, size_t n, void *ud)
{
    curl_ctx *cx = ud;
    size_t len = size * n, room = sizeof cx->body - 1 - cx->blen;
    size_t take = len < room ? len : room;
    memcpy(cx->body + cx->blen, buf, take);
    cx->blen += take;
    return len;
}

static bool add_curl_header(struct curl_slist **l, const char *name, const char *value)
{
    if (!value || !value[0])
        return true;
    char line[4200];
    if ((size_t)snprintf(line, sizeof line, "%s: %s", name, value) >= sizeof line)
        return false;
    struct curl_slist *n = curl_slist_append(*l, line);
    if (!n)
        return false;
    *l = n;
    return true;
}

/* Header values must not carry CR/LF (HTTP/1.1 header injection) or other control bytes. */
static bool value_ok(const char *v)
{
    if (!v)
        return true;
    if (strlen(v) > 4096)
        return false;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            return false;
    return true;
}

/* The attempt (or acquire / release) over HTTP/1.1 with libcurl. 0 when the server answered (the
 * reply says what), else the negative errno with r->err set. */
static int attempt_http1(const char *addr, const sl_attempt *a, bool acquire, const char *lease,
                         int timeout_ms, const cli_common *tls, sl_attempt_reply *r)
{
    sl_attempt_reply_init(r);
    const char *host = strncmp(addr, "http://", 7) == 0    ? addr + 7
                       : strncmp(addr, "https://", 8) == 0 ? addr + 8
                                                           : addr;
    size_t hl = strcspn(host, "/");
    bool has_port;
    if (host[0] == '[') {
        const char *end = memchr(host, ']', hl);
        has_port = end && end + 1 < host + hl && end[1] == ':';
    } else {
        has_port = memchr(host, ':', hl) != NULL;
    }
    char url[600], connect_to[600];
    bool https = want_tls(tls) || strncmp(addr, "https://", 8) == 0;
    int n = snprintf(url, sizeof url, "%s://%.*s%s%s", https ? "https" : "http", (int)hl, host,
                     has_port ? "" : ":5454", lease ? "/release" : "/attempt");
    if (hl == 0 || n < 0 || (size_t)n >= sizeof url)
        return r->err = -EINVAL;
    struct curl_slist *to = NULL;
    if (https && tls->tls_server_name) {
        /* the URL names the server as its certificate must; the connection goes to --addr */
        const char *port = "5454";
        if (has_port)
            port = host[0] == '[' ? (const char *)memchr(host, ']', hl) + 2
                                  : (const char *)memchr(host, ':', hl) + 1;
        int pl = has_port ? (int)(host + hl - port) : 4;
        int hn = has_port ? (int)(port - 1 - host) : (int)hl;
        bool v6name = strchr(tls->tls_server_name, ':') != NULL;
        n = snprintf(url, sizeof url, "https://%s%s%s:%.*s%s", v6name ? "[" : "",
                     tls->tls_server_name, v6name ? "]" : "", pl, port,
                     lease ? "/release" : "/attempt");
        int m = snprintf(connect_to, sizeof connect_to, "::%.*s:%.*s", hn, host, pl, port);
        if (n < 0 || (size_t)n >= sizeof url || m < 0 || (size_t)m >= sizeof connect_to ||
            !(to = curl_slist_append(NULL, connect_to)))
            return r->err = -EINVAL;
    }

    CURL *h = curl_easy_init();
    if (!h)
        return r->err = -ENOMEM;
    struct curl_slist *hdrs = NULL;
    bool ok = add_curl_header(&hdrs, "X-Resource", a->resource) &&
              add_curl_header(&hdrs, "X-Prefix", a->prefix) &&
              add_curl_header(&hdrs, "X-Method", a->method) &&
              add_curl_header(&hdrs, "X-Req-Id", a->req_id) &&
              add_curl_header(&hdrs, "X-Priority", a->priority) &&
              add_curl_header(&hdrs, "X-Concurrency", acquire ? "acquire" : NULL) &&
              add_curl_header(&hdrs, "X-Lease-Id", lease);
    /* no body: drop curl's form content-type and Expect */
    struct curl_slist *t1 = ok ? curl_slist_append(hdrs, "Content-Type:") : NULL;
    if (t1)
        hdrs = t1;
    struct curl_slist *t2 = t1 ? curl_slist_append(hdrs, "Expect:") : NULL;
    if (t2)
        hdrs = t2;
    if (!ok || !t1 || !t2) {
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        return r->err = -ENOMEM;
    }
    curl_ctx cx = {.r = r};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, curl_on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &cx);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, curl_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &cx);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sluice-cli");
    if (tls->tls_ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, tls->tls_ca);
    if (tls->tls_cert)
        curl_easy_setopt(h, CURLOPT_SSLCERT, tls->tls_cert);
    if (tls->tls_key)
        curl_easy_setopt(h, CURLOPT_SSLKEY, tls->tls_key);
    if (to)
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, to);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_slist_free_all(to);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK) {
        r->err = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                 : cc == CURLE_COULDNT_CONNECT  ? -ECONNREFUSED
                                                : -EIO;
        snprintf(r->message, sizeof r->message, "%s", curl_easy_strerror(cc));
        return r->err;
    }
    r->http_status = (int)status;
    if (status == 200 || (lease && status / 100 == 2)) {
        r->outcome = SL_ATTEMPT_ACCEPTED;
        r->allowed = true;
    } else {
        if ((status == 429 || (status == 503 && r->ratelimit[0])) && !lease)
            r->outcome = SL_ATTEMPT_REJECTED; /* the body is the server's reason */
        else
            r->err = lease && status == 404 ? -ENOENT : -EPROTO;
        while (cx.blen && (cx.body[cx.blen - 1] == '\n' || cx.body[cx.blen - 1] == '\r'))
            cx.blen--;
        cx.body[cx.blen] = 0;
        snprintf(r->message, sizeof r->message, "%s", cx.body);
    }
    return 0;
}

/* The same through libsluice over HTTP/2 (h2c, or h2 over TLS). */
static int attempt_http2(const cli_common *co, const sl_attempt *a, bool acquire,
                         const char *lease, int timeout_ms, sl_attempt_reply *r)
{
    sl_attempt_reply_init(r);
    sl_client *c = open_client(co, timeout_ms);
    if (!c)
        return r->err = -EINVAL;
    int rc;
    if (lease)
        rc = sl_client_release(c, a, lease, timeout_ms, r);
    else if (acquire)
        rc = sl_client_acquire(c, a, timeout_ms, r);
    else
        rc = sl_client_attempt(c, a, timeout_ms, r);
    if (r->err == -EKEYREJECTED && r->http_status == 0)
        fail_text(r->err, c, r->message, sizeof r->message);
    sl_client_free(c);
    if (rc == -EINVAL)
        return rc;
    /* the library failed open; for the CLI no answer is no answer */
    return r->http_status == 0 && r->err ? r->err : 0;
}

static const char *outcome_name(const sl_attempt_reply *r, bool release)
{
    if (release)
        return r->outcome == SL_ATTEMPT_ACCEPTED ? "released"
               : r->err == -ENOENT              ? "unknown lease"
                                                 : "failed";
    switch (r->outcome) {
    case SL_ATTEMPT_ACCEPTED: return "accepted";
    case SL_ATTEMPT_REJECTED: return "rejected";
    default: return "failed";
    }
}

static void json_int_opt(json_t *o, const char *k, int64_t v)
{
    if (v >= 0)
        json_object_set_new(o, k, json_integer(v));
}

/* One quota of a RateLimit / RateLimit-Policy list (draft 8+: "name";r=0;t=1 and
 * "name";q=5;w=1;sluice-burst=0); -1: the parameter is absent. */
typedef struct rl_item {
    char name[208];
    int64_t r, t, q, w, burst;
} rl_item;

/* The next item of the Structured Field list at *p (advanced past it): false at the end. */
static bool rl_next(const char **p, rl_item *it)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == ',')
        s++;
    if (!*s)
        return false;
    memset(it, 0, sizeof *it);
    it->r = it->t = it->q = it->w = it->burst = -1;
    size_t n = 0;
    if (*s == '"') {
        for (s++; *s && *s != '"'; s++) {
            if (*s == '\\' && s[1])
                s++;
            if (n + 1 < sizeof it->name)
                it->name[n++] = *s;
        }
        if (*s == '"')
            s++;
    } else {
        for (; *s && *s != ';' && *s != ','; s++)
            if (n + 1 < sizeof it->name)
                it->name[n++] = *s;
    }
    it->name[n] = 0;
    while (*s == ';') {
        s++;
        size_t kl = strcspn(s, "=;,");
        const char *k = s;
        s += kl;
        int64_t v = -1;
        if (*s == '=') {
            char *end;
            long long x = strtoll(s + 1, &end, 10);
            v = end > s + 1 && x >= 0 ? (int64_t)x : -1;
            s += 1 + strcspn(s + 1, ";,");
        }
        if (kl == 1 && *k == 'r')
            it->r = v;
        else if (kl == 1 && *k == 't')
            it->t = v;
        else if (kl == 1 && *k == 'q')
            it->q = v;
        else if (kl == 1 && *k == 'w')
            it->w = v;
        else if (kl == 12 && !strncmp(k, "sluice-burst", 12))
            it->burst = v;
    }
    while (*s && *s != ',')
        s++;
    *p = s;
    return true;
}

/* The quota that rejected: the RateLimit item with no request left (the least left when none is
 * at 0), with its RateLimit-Policy parameters. False when the answer names none. */
static bool rejecting_quota(const sl_attempt_reply *r, rl_item *out)
{
    const char *p = r->ratelimit;
    rl_item it;
    bool found = false;
    while (rl_next(&p, &it))
        if (it.r >= 0 && (!found || it.r < out->r)) {
            *out = it;
            found = true;
        }
    if (!found)
        return false;
    p = r->ratelimit_policy;
    while (rl_next(&p, &it))
        if (!strcmp(it.name, out->name)) {
            out->q = it.q;
            out->w = it.w;
            out->burst = it.burst;
            break;
        }
    return true;
}

static int attempt_run(void *opts, const sl_cli_args *args)
{
    const attempt_opts *o = opts;
    (void)args;
    sl_attempt a = {.resource = o->resource, .prefix = o->prefix, .method = o->method,
                    .req_id = o->req_id, .priority = o->priority};
    const char *lease = o->release, *addr = addr_of(&o->co);
    bool acquire = o->acquire, http2 = o->http2, json = o->co.json;
    int tmo = timeout_ms(&o->co);
    if (lease && (acquire || !lease[0])) {
        fprintf(stderr, "sluice attempt: --release takes a lease id and excludes --acquire\n");
        return EXIT_USAGE;
    }
    if (!lease && (!a.resource || !a.resource[0])) {
        fprintf(stderr, "sluice attempt: --resource is required (see --help)\n");
        return EXIT_USAGE;
    }
    if (!value_ok(a.resource) || !value_ok(a.prefix) || !value_ok(a.method) ||
        !value_ok(a.req_id) || !value_ok(a.priority) || !value_ok(lease)) {
        fprintf(stderr, "sluice attempt: header values must not contain control characters\n");
        return EXIT_USAGE;
    }

    sl_attempt_reply r;
    int rc;
    if (http2) {
        rc = attempt_http2(&o->co, &a, acquire, lease, tmo, &r);
    } else {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        rc = attempt_http1(addr, &a, acquire, lease, tmo, &o->co, &r);
        curl_global_cleanup();
    }
    if (rc == -EINVAL)
        return EXIT_USAGE;
    if (rc < 0) {
        const char *why = r.message[0] ? r.message : err_text(rc);
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "outcome", json_string("failed"));
            json_object_set_new(o, "error", json_string(why));
            json_object_set_new(o, "errno", json_integer(rc));
            print_json(o);
        } else {
            fprintf(stderr, "sluice attempt: no answer from %s: %s\n", addr, why);
        }
        return EXIT_TRANSPORT;
    }

    bool release = lease != NULL;
    const char *outcome = outcome_name(&r, release);
    rl_item rq;
    bool has_rq = r.outcome == SL_ATTEMPT_REJECTED && rejecting_quota(&r, &rq);
    if (has_rq) { /* limit / remaining / reset / window: the quota that rejected, not the first */
        r.rl_limit = rq.q;
        r.rl_remaining = rq.r;
        r.rl_reset_s = rq.t;
        r.rl_window_s = rq.w;
    }
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "outcome", json_string(outcome));
        json_object_set_new(o, "http_status", json_integer(r.http_status));
        json_int_opt(o, "retry_after_ms", r.retry_after_ms);
        if (r.ratelimit[0])
            json_object_set_new(o, "ratelimit", json_string(r.ratelimit));
        if (r.ratelimit_policy[0])
            json_object_set_new(o, "ratelimit_policy", json_string(r.ratelimit_policy));
        json_int_opt(o, "limit", r.rl_limit);
        json_int_opt(o, "remaining", r.rl_remaining);
        json_int_opt(o, "reset_s", r.rl_reset_s);
        json_int_opt(o, "window_s", r.rl_window_s);
        if (r.lease_id[0])
            json_object_set_new(o, "lease_id", json_string(r.lease_id));
        if (has_rq) {
            json_t *q = json_pack("{s:s}", "name", rq.name);
            json_int_opt(q, "remaining", rq.r);
            json_int_opt(q, "reset_s", rq.t);
            json_int_opt(q, "quota", rq.q);
            json_int_opt(q, "window_s", rq.w);
            json_int_opt(q, "burst", rq.burst);
            json_object_set_new(o, "rejected_by", q);
        }
        if (r.message[0])
            json_object_set_new(o, "message", json_string(r.message));
        if (r.outcome == SL_ATTEMPT_REJECTED && r.message[0])
            json_object_set_new(o, "reason", json_string(r.message));
        print_json(o);
    } else {
        printf("outcome:     %s (%d)\n", outcome, r.http_status);
        if (has_rq) {
            printf("rejected by: \"%s\"", rq.name);
            if (rq.q >= 0 && rq.w > 0)
                printf(", %lld per %lld s", (long long)rq.q, (long long)rq.w);
            if (rq.burst >= 0)
                printf(", burst %lld", (long long)rq.burst);
            printf(", remaining %lld", (long long)rq.r);
            if (rq.t >= 0)
                printf(", full again in %lld s", (long long)rq.t);
            printf("\n");
        }
        if (r.outcome == SL_ATTEMPT_REJECTED && r.message[0])
            printf("reason:      %s\n", r.message);
        if (r.lease_id[0])
            printf("lease_id:    %s\n", r.lease_id);
        if (r.retry_after_ms >= 0)
            printf("retry_after: %lld ms\n", (long long)r.retry_after_ms);
        if (r.ratelimit[0])
            printf("ratelimit:   %s\n", r.ratelimit);
        if (r.ratelimit_policy[0])
            printf("policy:      %s\n", r.ratelimit_policy);
        if (!has_rq && (r.rl_limit >= 0 || r.rl_remaining >= 0))
            printf("parsed:      limit %lld, remaining %lld, reset %lld s, window %lld s\n",
                   (long long)r.rl_limit, (long long)r.rl_remaining, (long long)r.rl_reset_s,
                   (long long)r.rl_window_s);
        if (r.message[0] && r.outcome != SL_ATTEMPT_REJECTED)
            printf("message:     %s\n", r.message);
    }
    if (r.outcome == SL_ATTEMPT_ACCEPTED)
        return EXIT_UNDER;
    if (r.outcome == SL_ATTEMPT_REJECTED || (release && r.err == -ENOENT))
        return EXIT_OVER;
    return EXIT_TRANSPORT;
}

const sl_cli_command sl_cmd_attempt = {
    .name = "attempt", .summary = "Levee-style POST /attempt for a resource",
    .table = &attempt_table, .opts_size = sizeof(attempt_opts), .run = attempt_run};

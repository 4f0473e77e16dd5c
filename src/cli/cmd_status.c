/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice status: what a node's status page shows, in the terminal - the verdict (healthy or not,
 * and why), version, listeners, peers, quotas, switches, decisions and the recent history - read
 * from its admin API (GET /v1/admin/status on sluiced's admin socket, or on its --admin-addr with
 * the bearer token of --admin-token-file), or the node's JSON as it is (--json).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/strbuf.h"
#include "cli/commands.h"

/* Most history samples printed (the newest). */
#define STATUS_HISTORY_ROWS 10

typedef struct status_opts {
    sl_cli_admin admin;
    bool json;
    int64_t timeout_ns;
} status_opts;

static const sl_opt status_opts_table[] = {
    SL_CLI_ADMIN_OPTS(status_opts, admin),
    {.name = "json", .type = SL_OPT_BOOL, .offset = offsetof(status_opts, json), .def = "false",
     .help = "print the node's JSON (GET /v1/admin/status) as it is"},
    {.name = "timeout", .type = SL_OPT_DURATION, .offset = offsetof(status_opts, timeout_ns),
     .def = "5s", .min = 1000000, .max = INT64_C(3600000000000), .help = "request timeout"},
};

static const sl_opt_table status_table = {
    .program = "sluice status",
    .flags_only = true,
    .usage = "[options]",
    .about = "A node's status, as its status page shows it: verdict, version, listeners, peers,\n"
             "quotas, switches, decisions and the last samples of its history.\n",
    .epilog = "exit: 0 healthy, 1 unhealthy (or refused: an HTTP 4xx), 2 usage, 3 unreachable or\n"
              "an answer that cannot be read\n",
    .opts = status_opts_table,
    .nopts = sizeof status_opts_table / sizeof status_opts_table[0],
};

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s && s[0] ? s : "-";
}

static long long num(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

static const char *yes(json_t *o, const char *k)
{
    return json_is_true(json_object_get(o, k)) ? "yes" : "no";
}

/* An epoch-ms time in UTC, as the page shows it. */
static void utc(long long ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm))
        snprintf(buf, cap, "-");
    else
        strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void print_status(json_t *j)
{
    json_t *node = json_object_get(j, "node"), *health = json_object_get(j, "health");
    json_t *cfg = json_object_get(j, "config");
    bool healthy = json_is_true(json_object_get(health, "healthy"));
    const char *reason = str(health, "reason");
    printf("verdict:    %s%s%s\n", healthy ? "healthy" : "UNHEALTHY",
           strcmp(reason, "-") ? ": " : "", strcmp(reason, "-") ? reason : "");
    printf("version:    %s (%s)\n", str(node, "version"), str(node, "commit"));
    printf("instance:   %s, %lld workers, up %lld s\n", str(node, "instance"),
           num(node, "workers"), num(node, "uptime_ms") / 1000);
    printf("listen:     %s (advertise %s)\n", str(node, "listen"), str(node, "advertise"));
    if (cfg)
        printf("config:     role %s, store %s, quotas %s, cluster %s, tls %s, gossip %s\n",
               str(cfg, "role"), str(cfg, "store"), str(cfg, "quotas"), yes(cfg, "cluster"),
               yes(cfg, "tls"), yes(cfg, "gossip"));

    json_t *peers = json_object_get(j, "peers"), *p;
    size_t i;
    printf("peers:      %lld listed, peer_count %lld (HealthCheck's)\n", num(j, "peers_total"),
           num(health, "peer_count"));
    json_array_foreach(peers, i, p) {
        const char *err = str(p, "error");
        printf("  %-30s %s%s%s%s\n", str(p, "addr"),
               json_is_true(json_object_get(p, "healthy")) ? "healthy" : "down",
               json_is_true(json_object_get(p, "self")) ? " (self)" : "",
               strcmp(err, "-") ? ": " : "", strcmp(err, "-") ? err : "");
    }

    json_t *q = json_object_get(j, "quotas");
    if (q) {
        printf("quotas:     %s", str(q, "mode"));
        if (json_object_get(q, "loaded"))
            printf(", loaded %s, %lld entries, revision %lld", yes(q, "loaded"),
                   num(q, "entries"), num(q, "revision"));
        const char *le = str(q, "last_error");
        printf("%s%s\n", strcmp(le, "-") ? ", last error: " : "", strcmp(le, "-") ? le : "");
    }
    json_t *sb = json_object_get(j, "switchboard");
    json_t *sw = json_object_get(sb, "switches"), *s;
    printf("switches:   %zu set", json_array_size(sw));
    json_array_foreach(sw, i, s)
        printf("%s %s=%s", i ? "," : ":", str(s, "name"), str(s, "mode"));
    printf("\n");
    json_t *d = json_object_get(j, "decisions");
    if (d)
        printf("decisions:  %lld under, %lld over, %lld errors, %lld keys, %lld forwarded, "
               "%lld fail-open\n",
               num(d, "under_limit"), num(d, "over_limit"), num(d, "errors"), num(d, "keys"),
               num(d, "forwarded"), num(d, "fail_open"));

    json_t *h = json_object_get(j, "history"), *e;
    size_t n = json_array_size(h), from = n > STATUS_HISTORY_ROWS ? n - STATUS_HISTORY_ROWS : 0;
    printf("history:    %zu samples (per second; the last %zu, UTC)\n", n, n - from);
    json_array_foreach(h, i, e) {
        if (i < from)
            continue;
        char t[32];
        utc(num(e, "t_ms"), t, sizeof t);
        printf("  %s  under %10.1f  over %10.1f\n", t,
               json_number_value(json_object_get(e, "under")),
               json_number_value(json_object_get(e, "over")));
    }
}

static int run(void *opts, const sl_cli_args *args)
{
    const status_opts *o = opts;
    (void)args;
    sl_strbuf b;
    sl_strbuf_init(&b, 4096);
    long st = 0;
    int code = sl_cli_admin_call("sluice status", &o->admin, "/v1/admin/status", NULL,
                                 (long)(o->timeout_ns / 1000000), &b, &st);
    char where[300];
    sl_cli_admin_where(&o->admin, where, sizeof where);
    if (!code && st != 200) {
        fprintf(stderr, "sluice status: %s: HTTP error %ld: %.*s\n", where, st,
                (int)sl_strbuf_len(&b), sl_strbuf_str(&b));
        code = sl_cli_http_exit(st);
    } else if (!code) {
        json_t *j = json_loadb(sl_strbuf_str(&b), sl_strbuf_len(&b), 0, NULL);
        if (!json_is_object(j)) {
            fprintf(stderr, "sluice status: %s: unexpected answer: %.200s\n", where,
                    sl_strbuf_str(&b));
            code = SL_CLI_EXIT_UNREACHABLE;
        } else {
            bool healthy = json_is_true(json_object_get(json_object_get(j, "health"), "healthy"));
            if (o->json)
                printf("%.*s\n", (int)sl_strbuf_len(&b), sl_strbuf_str(&b));
            else
                print_status(j);
            code = healthy ? SL_CLI_EXIT_OK : SL_CLI_EXIT_LIMITED;
        }
        json_decref(j);
    }
    sl_strbuf_free(&b);
    return code;
}

const sl_cli_command sl_cmd_status = {
    .name = "status", .summary = "show a node's status page in the terminal (verdict, peers, ...)",
    .table = &status_table, .opts_size = sizeof(status_opts), .run = run};

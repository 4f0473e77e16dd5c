/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice top: who is limited on one node - the keys each limit rejected, would reject (a limiter
 * in shadow mode: a dark launch) or shed, the most frequent first, read from the node's admin
 * API (GET /v1/admin/top on sluiced's admin socket, or on its --admin-addr with the bearer token
 * of --admin-token-file) and printed as a table, or as the node's JSON (--json).
 * The counts are space-saving estimates that halve every --top-half-life (docs/protection.md).
 */
#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "auth/bearer.h"
#include "base/strbuf.h"
#include "cli/commands.h"

typedef struct top_opts {
    sl_cli_admin admin;
    char *limit;
    int64_t n;
    bool json;
    int64_t timeout_ns;
} top_opts;

static const sl_opt top_opts_table[] = {
    SL_CLI_ADMIN_OPTS(top_opts, admin),
    {.name = "limit", .type = SL_OPT_STRING, .offset = offsetof(top_opts, limit), .nullable = true,
     .metavar = "NAME", .help = "one limit only (a Gubernator name, a quota, fleet, shed, other)"},
    {.name = "n", .type = SL_OPT_INT, .offset = offsetof(top_opts, n), .def = "10", .min = 1,
     .max = 1000, .metavar = "N", .help = "keys shown per limit and event"},
    {.name = "json", .type = SL_OPT_BOOL, .offset = offsetof(top_opts, json), .def = "false",
     .help = "print the node's JSON as it is"},
    {.name = "timeout", .type = SL_OPT_DURATION, .offset = offsetof(top_opts, timeout_ns),
     .def = "5s", .min = 1000000, .max = INT64_C(3600000000000), .help = "request timeout"},
};

static const sl_opt_table top_table = {
    .program = "sluice top",
    .flags_only = true,
    .usage = "[options]",
    .about = "The keys each limit rejected, would reject (shadow mode) or shed on one node,\n"
             "the most frequent first (estimates: count is at most error above the truth).\n",
    .epilog = "exit: 0 shown, 1 refused (an HTTP 4xx: a bad token), 2 usage, 3 unreachable\n",
    .opts = top_opts_table,
    .nopts = sizeof top_opts_table / sizeof top_opts_table[0],
};

/* LIMIT EVENT TOTAL KEY COUNT ERROR, one row per key (a limit with no key: one row, key "-"). */
static int print_table(const char *text, size_t len)
{
    json_error_t jerr;
    json_t *j = json_loadb(text, len, 0, &jerr);
    json_t *limits = j ? json_object_get(j, "limits") : NULL;
    if (!json_is_array(limits)) {
        fprintf(stderr, "sluice top: unexpected answer: %.200s\n", text);
        json_decref(j);
        return SL_CLI_EXIT_UNREACHABLE;
    }
    printf("%-24s %-13s %10s  %-32s %10s %8s\n", "LIMIT", "EVENT", "TOTAL", "KEY", "COUNT",
           "ERROR");
    size_t i, k;
    json_t *l, *key;
    json_array_foreach(limits, i, l) {
        const char *name = json_string_value(json_object_get(l, "limit"));
        const char *ev = json_string_value(json_object_get(l, "event"));
        long long total = (long long)json_integer_value(json_object_get(l, "total"));
        json_t *keys = json_object_get(l, "keys");
        if (!json_array_size(keys))
            printf("%-24s %-13s %10lld  %-32s %10s %8s\n", name ? name : "?", ev ? ev : "?", total,
                   "-", "-", "-");
        json_array_foreach(keys, k, key) {
            const char *ks = json_string_value(json_object_get(key, "key"));
            printf("%-24s %-13s %10lld  %-32s %10lld %8lld\n", name ? name : "?", ev ? ev : "?",
                   total, ks ? ks : "?",
                   (long long)json_integer_value(json_object_get(key, "count")),
                   (long long)json_integer_value(json_object_get(key, "error")));
        }
    }
    if (!json_array_size(limits))
        printf("(nothing rejected, would-rejected or shed recently)\n");
    json_decref(j);
    return 0;
}

static int run(void *opts, const sl_cli_args *args)
{
    const top_opts *o = opts;
    (void)args;
    char path[600];
    char *lim = NULL;
    if (o->limit) {
        CURL *h = curl_easy_init();
        lim = h ? curl_easy_escape(h, o->limit, 0) : NULL;
        curl_easy_cleanup(h);
        if (!lim) {
            fprintf(stderr, "sluice top: out of memory\n");
            return SL_CLI_EXIT_UNREACHABLE;
        }
    }
    int n = snprintf(path, sizeof path, "/v1/admin/top?n=%lld%s%s", (long long)o->n,
                     lim ? "&limit=" : "", lim ? lim : "");
    curl_free(lim);
    if (n < 0 || (size_t)n >= sizeof path) {
        fprintf(stderr, "sluice top: --limit too long\n");
        return 2;
    }
    sl_strbuf b;
    sl_strbuf_init(&b, 4096);
    long st = 0;
    int code = sl_cli_admin_call("sluice top", &o->admin, path, NULL,
                                 (long)(o->timeout_ns / 1000000), &b, &st);
    if (!code && st != 200) {
        char where[300];
        fprintf(stderr, "sluice top: %s: HTTP error %ld: %.*s\n",
                sl_cli_admin_where(&o->admin, where, sizeof where), st, (int)sl_strbuf_len(&b),
                sl_strbuf_str(&b));
        code = sl_cli_http_exit(st);
    } else if (!code && o->json) {
        printf("%.*s\n", (int)sl_strbuf_len(&b), sl_strbuf_str(&b));
    } else if (!code) {
        code = print_table(sl_strbuf_str(&b), sl_strbuf_len(&b));
    }
    sl_strbuf_free(&b);
    return code;
}

const sl_cli_command sl_cmd_top = {
    .name = "top", .summary = "who a node's limits reject, would reject (shadow) or shed, top keys",
    .table = &top_table, .opts_size = sizeof(top_opts), .run = run};

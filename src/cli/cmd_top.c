/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice top: who is limited on one node - the keys each limit rejected, would reject (a limiter
 * in shadow mode: a dark launch) or shed, the most frequent first, read from the node's admin
 * listener (GET /v1/admin/top on sluiced's --admin-addr, with the bearer token of
 * --admin-token-file when it has one) and printed as a table, or as the node's JSON (--json).
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
    char *addr;
    char *token_file;
    char *limit;
    int64_t n;
    bool json;
    int64_t timeout_ns;
} top_opts;

static const sl_opt top_opts_table[] = {
    {.name = "admin-addr", .type = SL_OPT_STRING, .offset = offsetof(top_opts, addr),
     .def = "127.0.0.1:5455", .metavar = "HOST:PORT",
     .help = "the node's admin listener (sluiced --admin-addr)"},
    {.name = "admin-token-file", .type = SL_OPT_STRING, .offset = offsetof(top_opts, token_file),
     .nullable = true, .metavar = "FILE",
     .help = "file holding the node's admin bearer token (sluiced --admin-token-file)"},
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
    .opts = top_opts_table,
    .nopts = sizeof top_opts_table / sizeof top_opts_table[0],
};

#define MAX_ANSWER (4u << 20)

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    sl_strbuf *b = ud;
    size_t len = size * n;
    if (sl_strbuf_len(b) + len > MAX_ANSWER)
        return 0; /* too large: curl fails the transfer */
    sl_strbuf_append(b, p, len);
    return len;
}

/* GET the top; the HTTP status or -1 (curl's reason in out). */
static long fetch_top(const top_opts *o, const char *token, sl_strbuf *out)
{
    const char *host = strncmp(o->addr, "http://", 7) == 0 ? o->addr + 7 : o->addr;
    CURL *h = curl_easy_init();
    if (!h)
        return -1;
    char *lim = o->limit ? curl_easy_escape(h, o->limit, 0) : NULL;
    char url[1024];
    int n = snprintf(url, sizeof url, "http://%s/v1/admin/top?n=%lld%s%s", host,
                     (long long)o->n, lim ? "&limit=" : "", lim ? lim : "");
    curl_free(lim);
    if (n < 0 || (size_t)n >= sizeof url) {
        curl_easy_cleanup(h);
        return -1;
    }
    struct curl_slist *hdrs = NULL;
    char auth[SL_BEARER_MAX_LEN + 32];
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(o->timeout_ns / 1000000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sluice-cli");
    CURLcode cc = curl_easy_perform(h);
    long status = -1;
    if (cc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    } else {
        sl_strbuf_reset(out);
        sl_strbuf_puts(out, curl_easy_strerror(cc));
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (token)
        memset(auth, 0, sizeof auth);
    return status;
}

/* LIMIT EVENT TOTAL KEY COUNT ERROR, one row per key (a limit with no key: one row, key "-"). */
static int print_table(const char *text, size_t len)
{
    json_error_t jerr;
    json_t *j = json_loadb(text, len, 0, &jerr);
    json_t *limits = j ? json_object_get(j, "limits") : NULL;
    if (!json_is_array(limits)) {
        fprintf(stderr, "sluice top: unexpected answer: %.200s\n", text);
        json_decref(j);
        return 1;
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
    top_opts o = *(const top_opts *)opts; /* (a copy: the body was written against a value) */
    (void)args;
    char token[SL_BEARER_MAX_LEN + 1];
    int code = 0;
    if (o.token_file && sl_cli_read_token("sluice top", o.token_file, token)) {
        code = 2;
    } else {
        sl_strbuf b;
        sl_strbuf_init(&b, 4096);
        long st = fetch_top(&o, o.token_file ? token : NULL, &b);
        if (st != 200) {
            fprintf(stderr, "sluice top: %s: %s%.*s\n", o.addr, st < 0 ? "" : "HTTP error: ",
                    (int)sl_strbuf_len(&b), sl_strbuf_str(&b) ? sl_strbuf_str(&b) : "");
            code = 1;
        } else if (o.json) {
            printf("%.*s\n", (int)sl_strbuf_len(&b), sl_strbuf_str(&b));
        } else {
            code = print_table(sl_strbuf_str(&b), sl_strbuf_len(&b));
        }
        sl_strbuf_free(&b);
    }
    memset(token, 0, sizeof token);
    return code;
}

const sl_cli_command sl_cmd_top = {
    .name = "top", .summary = "who a node's limits reject, would reject (shadow) or shed, top keys",
    .table = &top_table, .opts_size = sizeof(top_opts), .run = run};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin status page (see statuspage.h): the JSON document the page polls, gathered from the
 * parts the node hands in, and the page itself with a fresh nonce in its script and style tags.
 *
 * The document reuses what the other admin endpoints already render (the switchboard of
 * protect/admin.c, the top keys of protect/who.c) rather than a second rendering of each, and
 * trims the top to the busiest (limit, event) rows so that its size stays bounded whatever the
 * number of limit names. Decisions are cumulative counters: the page turns two polls into rates.
 */
#include "node/statuspage.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/hex.h"
#include "runtime/buildinfo.h"
#include "protect/admin.h"
#include "protect/who.h"

static json_t *node_json(const sl_statuspage_config *c, int64_t now_ms)
{
    return json_pack("{s:s,s:s,s:s?,s:i,s:I,s:I,s:s,s:s}", "instance",
                     c->instance ? c->instance : "", "listen",
                     c->listen_addr ? c->listen_addr : "", "advertise",
                     c->advertise_addr && c->advertise_addr[0] ? c->advertise_addr : NULL,
                     "workers", c->workers, "now_ms", (json_int_t)now_ms, "uptime_ms",
                     (json_int_t)(c->started_ms ? now_ms - c->started_ms : 0), "version",
                     sl_buildinfo_version, "commit", sl_buildinfo_commit);
}

/* ---- the chart's past ---- */

void sl_statuspage_history_init(sl_statuspage_history *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
}

void sl_statuspage_history_destroy(sl_statuspage_history *h)
{
    pthread_mutex_destroy(&h->mu);
}

void sl_statuspage_history_sample(sl_statuspage_history *h, sl_engine *e, int64_t now_ms)
{
    sl_engine_stats es;
    sl_engine_stats_get(e, &es);
    uint64_t st[2] = {0, 0};
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++)
        for (int s = 0; s < 2; s++)
            st[s] += es.decisions[a][s];
    pthread_mutex_lock(&h->mu);
    size_t cap = SL_STATUSPAGE_HISTORY + 1;
    size_t i = (h->head + h->n) % cap;
    if (h->n == cap)
        h->head = (h->head + 1) % cap;
    else
        h->n++;
    h->t_ms[i] = now_ms;
    h->under[i] = st[SL_UNDER_LIMIT];
    h->over[i] = st[SL_OVER_LIMIT];
    pthread_mutex_unlock(&h->mu);
}

/* Rates a second between consecutive samples, oldest first. */
static json_t *history_json(sl_statuspage_history *h)
{
    json_t *arr = json_array();
    if (!arr || !h)
        return arr;
    size_t cap = SL_STATUSPAGE_HISTORY + 1;
    pthread_mutex_lock(&h->mu);
    for (size_t k = 1; k < h->n; k++) {
        size_t a = (h->head + k - 1) % cap, b = (h->head + k) % cap;
        double dt = (double)(h->t_ms[b] - h->t_ms[a]) / 1000.0;
        if (dt <= 0)
            continue;
        double under = (double)(h->under[b] - h->under[a]) / dt;
        double over = (double)(h->over[b] - h->over[a]) / dt;
        json_array_append_new(arr, json_pack("{s:I,s:f,s:f}", "t_ms", (json_int_t)h->t_ms[b],
                                             "under", under, "over", over));
    }
    pthread_mutex_unlock(&h->mu);
    return arr;
}

/* What the node runs with, in a few words (the options that shape it; no secret). */
static json_t *config_json(const sl_options *o)
{
    if (!o)
        return json_null();
    static const char *const roles[] = {"limiter", "observer", "proxy"};
    static const char *const stores[] = {"memory", "redis"};
    const char *quotas = o->quota_file && o->quota_file[0] ? "file"
                         : o->storage_addrs.n                ? "etcd"
                                                             : "none";
    return json_pack("{s:s,s:s,s:b,s:b,s:s,s:s,s:b,s:I,s:I}", "role",
                     o->role >= 0 && o->role < 3 ? roles[o->role] : "?", "store",
                     o->store >= 0 && o->store < 2 ? stores[o->store] : "?", "cluster",
                     o->discovery != SL_DISCOVERY_NONE, "tls", o->tls_cert && o->tls_cert[0],
                     "quotas", quotas, "rls_config_dir",
                     o->rls_config_dir ? o->rls_config_dir : "", "gossip",
                     o->gossip_addr && o->gossip_addr[0], "max_keys",
                     (json_int_t)o->gc_max_keys, "max_body_bytes",
                     (json_int_t)o->max_body_bytes);
}

/* health and peers (the router's view; a standalone node is healthy and has none) */
static int add_cluster(json_t *doc, const sl_statuspage_config *c)
{
    bool healthy = true;
    int32_t count = 1;
    char why[512] = "";
    sl_router_peer peers[SL_STATUSPAGE_MAX_PEERS];
    size_t n = 0;
    if (c->service) /* HealthCheck's own verdict: membership, then the quotas loaded */
        healthy = sl_service_verdict(c->service, why, sizeof why, &count);
    else if (c->router)
        sl_router_health(c->router, &healthy, &count, why, sizeof why);
    if (c->router)
        n = sl_router_peers(c->router, peers, SL_STATUSPAGE_MAX_PEERS);
    json_t *arr = json_array();
    if (!arr)
        return -ENOMEM;
    for (size_t i = 0; i < n && i < SL_STATUSPAGE_MAX_PEERS; i++) {
        const sl_router_peer *p = &peers[i];
        json_array_append_new(arr, json_pack("{s:s,s:b,s:b,s:s,s:I}", "addr", p->addr, "self",
                                             p->self, "healthy", p->err == 0, "error",
                                             p->err ? strerror(-p->err) : "", "failed_at_ms",
                                             (json_int_t)(p->err ? p->failed_at : 0)));
    }
    json_object_set_new(doc, "health", json_pack("{s:b,s:i,s:s}", "healthy", healthy,
                                                  "peer_count", (int)count, "reason", why));
    json_object_set_new(doc, "peers", arr);
    json_object_set_new(doc, "peers_total", json_integer((json_int_t)n));
    return 0;
}

static json_t *decisions_json(const sl_statuspage_config *c)
{
    sl_engine_stats es;
    sl_engine_stats_get(c->engine, &es);
    uint64_t st[2] = {0, 0};
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++)
        for (int s = 0; s < 2; s++)
            st[s] += es.decisions[a][s];
    sl_router_stats rs = {0};
    if (c->router)
        sl_router_stats_get(c->router, &rs);
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "under_limit",
                     (json_int_t)st[SL_UNDER_LIMIT], "over_limit", (json_int_t)st[SL_OVER_LIMIT],
                     "errors", (json_int_t)es.errors, "keys", (json_int_t)es.keys, "forwarded",
                     (json_int_t)rs.forwarded, "fail_open", (json_int_t)rs.fail_open,
                     "peer_errors", (json_int_t)rs.peer_errors, "global_local",
                     (json_int_t)rs.global_local);
}

static json_t *quotas_json(const sl_statuspage_config *c)
{
    if (!c->quotas)
        return json_pack("{s:s}", "mode", "none");
    sl_quotasrc_status st;
    sl_quotasrc_status_get(c->quotas, &st);
    return json_pack("{s:s,s:b,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:s}", "mode",
                     sl_quotasrc_mode_name(st.mode), "loaded", st.loaded, "connected",
                     st.connected, "revision", (json_int_t)st.revision, "entries",
                     (json_int_t)st.entries, "generation", (json_int_t)st.generation, "loads",
                     (json_int_t)st.loads, "load_errors", (json_int_t)st.load_errors,
                     "reconnects", (json_int_t)st.reconnects, "last_change_ms",
                     (json_int_t)st.last_change_ms, "endpoint", st.endpoint, "last_error",
                     st.last_error);
}

/* The switchboard as GET /v1/admin/killswitch gives it; null without one. */
static json_t *switchboard_json(const sl_statuspage_config *c)
{
    if (!c->protect || !sl_protect_cfg(c->protect)->switches)
        return json_null();
    sl_admin_response r;
    sl_admin_handle(c->protect, "GET", NULL, 0, &r);
    json_t *j = r.body && r.status == 200 ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    free(r.body);
    return j;
}

static int by_total(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "total"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "total"));
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The top keys as GET /v1/admin/top gives them, the busiest SL_STATUSPAGE_MAX_LIMITS (limit,
 * event) rows only (largest total first), with "limits_total" saying how many there were. */
static json_t *top_json(const sl_statuspage_config *c, int64_t now_ms)
{
    if (!c->protect)
        return json_null();
    char *txt;
    size_t len;
    if (sl_who_top_json(sl_protect_who(c->protect), NULL, SL_STATUSPAGE_TOP_KEYS, now_ms, &txt,
                        &len))
        return NULL;
    json_t *j = json_loadb(txt, len, 0, NULL);
    free(txt);
    json_t *rows = j ? json_object_get(j, "limits") : NULL;
    if (!json_is_array(rows)) {
        json_decref(j);
        return NULL;
    }
    size_t n = json_array_size(rows);
    json_t **v = n ? malloc(n * sizeof *v) : NULL;
    json_t *kept = json_array();
    if ((n && !v) || !kept) {
        free(v);
        json_decref(kept);
        json_decref(j);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(rows, i);
    if (n)
        qsort(v, n, sizeof *v, by_total);
    for (size_t i = 0; i < n && i < SL_STATUSPAGE_MAX_LIMITS; i++)
        json_array_append(kept, v[i]);
    free(v);
    json_object_set_new(j, "limits", kept);
    json_object_set_new(j, "limits_total", json_integer((json_int_t)n));
    return j;
}

int sl_statuspage_json(const sl_statuspage_config *c, int64_t now_ms, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    json_t *doc = json_object();
    if (!doc)
        return -ENOMEM;
    json_t *parts[] = {node_json(c, now_ms), decisions_json(c),   quotas_json(c),
                       switchboard_json(c),  top_json(c, now_ms), history_json(c->history),
                       config_json(c->opts)};
    static const char *const names[] = {"node", "decisions", "quotas", "switchboard",
                                        "top",  "history",   "config"};
    int rc = add_cluster(doc, c);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        if (!parts[i])
            rc = -ENOMEM;
        else if (!rc)
            rc = json_object_set_new(doc, names[i], parts[i]) ? -ENOMEM : 0;
        else
            json_decref(parts[i]);
    }
    if (!rc && !(*out = json_dumps(doc, JSON_COMPACT)))
        rc = -ENOMEM;
    json_decref(doc);
    if (!rc)
        *len = strlen(*out);
    return rc;
}

static bool nonce_ok(const char *nonce)
{
    size_t i = 0;
    for (; nonce[i] && i <= SL_STATUSPAGE_NONCE_LEN; i++)
        if (!((nonce[i] >= '0' && nonce[i] <= '9') || (nonce[i] >= 'a' && nonce[i] <= 'f')))
            return false;
    return i == SL_STATUSPAGE_NONCE_LEN;
}

/* Copy src[0..n) into w (NULL: only count), each mark replaced by its value; the length. */
static size_t substitute(const char *src, size_t n, const char *const marks[][2], size_t nm,
                         char *w)
{
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        size_t m = 0;
        while (m < nm && !(src[i] == '@' && strncmp(src + i, marks[m][0], strlen(marks[m][0])) == 0))
            m++;
        const char *from = m < nm ? marks[m][1] : src + i;
        size_t k = m < nm ? strlen(marks[m][1]) : 1;
        if (w)
            memcpy(w + len, from, k);
        len += k;
        i += m < nm ? strlen(marks[m][0]) : 1;
    }
    return len;
}

int sl_statuspage_html(const char *nonce, bool token, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (!nonce_ok(nonce))
        return -EINVAL;
    const char *const marks[][2] = {{"@NONCE@", nonce}, {"@AUTH@", token ? "token" : "open"}};
    const char *src = (const char *)sl_statuspage_src;
    size_t n = substitute(src, sl_statuspage_src_len, marks, 2, NULL);
    char *buf = malloc(n + 1);
    if (!buf)
        return -ENOMEM;
    substitute(src, sl_statuspage_src_len, marks, 2, buf);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

void sl_statuspage_csp(const char *nonce, char *buf, size_t cap)
{
    /* default-src 'self' for anything unlisted; the page's one script and one style by nonce;
     * its data from this origin only; no plugins, no <base>, no form posts, no framing */
    snprintf(buf, cap,
             "default-src 'self'; script-src 'nonce-%s'; style-src 'nonce-%s'; "
             "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
             "form-action 'none'; frame-ancestors 'none'",
             nonce, nonce);
}

int sl_statuspage_nonce(char *out)
{
    uint8_t raw[SL_STATUSPAGE_NONCE_LEN / 2];
    ssize_t got = getrandom(raw, sizeof raw, 0);
    if (got != (ssize_t)sizeof raw)
        return got < 0 ? -errno : -EIO;
    for (size_t i = 0; i < sizeof raw; i++)
        sl_hex_put(out + 2 * i, raw[i], false);
    out[SL_STATUSPAGE_NONCE_LEN] = '\0';
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store's connections and control (see rstore.h; its state in rstore_int.h): per worker
 * loop, one Redis connection on that loop (redis/rconn.h; TLS with --redis-tls) - with --redis-cluster one
 * per master, the topology read by CLUSTER SLOTS into a redis/rslots.h table - made with AUTH
 * and the scripts loaded ahead of any call, kept healthy (connect and reply deadlines,
 * reconnection with backoff over the address list, a server that cannot take writes left), the
 * topology refreshed and the connections kept, made or retired to match it; then worker start
 * and stop, construction from the options, and the counters. The calls that go over these
 * connections are redis/rstore.c's.
 *
 * Deadlines. sl_rconn has no timeouts of its own, so one timer per worker ticks
 * a few times per --redis-timeout: a connection still not up, or with commands in flight and no
 * answer, for longer than the timeout is freed, which answers every command in flight with no
 * reply (error or fail-open) - replies come in order, so a connection whose oldest command is
 * stuck is stuck for all of them. The same tick makes the connection again when its backoff is
 * over.
 *
 * Ownership of the sl_rconn: it frees itself after a failed connect (on_connect with an error)
 * or a lost connection (on_disconnect); sluice frees it for a deadline or at worker stop, never
 * from inside one of its callbacks. conn->ac is cleared first in every case, so a callback run by
 * the freeing sees a conn without a connection. A cluster master's connection
 * that leaves the topology (maybe while one of its own callbacks runs) is retired: put on a list
 * that the next tick frees.
 */
#include "redis/rstore.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include <hiredis/hiredis.h>

#include "base/file.h"
#include "redis/rscript.h"
#include "redis/rslots.h"
#include "redis/rstore_int.h"

#define DEFAULT_TIMEOUT_MS 1000
#define DEFAULT_MARGIN_MS 60000
#define DEFAULT_BATCH_ITEMS 100
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define TICK_MIN_MS 10
#define TICK_MAX_MS 250
#define DEFAULT_REFRESH_MS 100 /* least time between two topology refreshes */
#define PASSWORD_MAX 4096

static void try_connect(conn *cn);
static bool ask_master(wk *w);
static void drop(conn *cn, const char *why);
static int parse_addr(const char *s, raddr *a);

#define SENTINEL_POLL_MS 1000 /* the master's address asked again this often */

/* ---- the connections ------------------------------------------------------------------------ */

/* A command whose answer only counts as progress (AUTH, SCRIPT LOAD, ASKING). */
void sl_rstorewk_on_aux(sl_rconn *ac, void *reply, void *priv)
{
    conn *cn = sl_rconn_data(ac);
    redisReply *rp = reply;
    if (cn && cn->inflight)
        cn->inflight--;
    if (cn && rp)
        cn->progress_ms = mono_ms();
    if (rp && rp->type == REDIS_REPLY_ERROR && priv && cn && cn->w->r->cfg.log)
        sl_log_error(cn->w->r->cfg.log, "redis store: %s: %.200s", (const char *)priv, rp->str);
}

static void schedule_retry(conn *cn)
{
    wk *w = cn->w;
    cn->next_try_ms = mono_ms() + cn->backoff_ms;
    cn->backoff_ms = cn->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : cn->backoff_ms * 2;
    /* the standalone server, the seed and the sentinel move along the address list; a master
     * stays itself, and under --redis-sentinel the sentinels say where the server is */
    if (cn == &w->main && w->r->sentinel_master) {
        w->need_master = true;
        return;
    }
    if ((cn == &w->main || cn == w->seed || cn == &w->sentinel) && w->r->n_addrs > 1) {
        w->addr = (w->addr + 1) % w->r->n_addrs;
        cn->a = w->r->addrs[w->addr];
    }
}

static void lost(conn *cn, const char *why)
{
    wk *w = cn->w;
    cn->ac = NULL;
    cn->inflight = 0;
    if (cn->connected)
        cinc(&w->disconnects);
    cn->connected = false;
    sl_rstore *r = w->r;
    if (r->cfg.cluster && !cn->retired) {
        w->need_refresh = true; /* a master lost: maybe a failover */
        if (cn->slots_asked)
            w->refreshing = false;
    }
    cn->slots_asked = false;
    if (cn == &w->sentinel)
        w->master_asking = false; /* its answer will not come */
    if (!w->stopping && !cn->retired) {
        if (r->cfg.log && sl_log_budget_take(r->cfg.log, &w->conn_budget, SL_LOG_WARN))
            sl_log_write(r->cfg.log, SL_LOG_WARN, "redis store: %s:%d: %s (worker %d)",
                         cn->a.host, cn->a.port, why, w->idx);
        schedule_retry(cn);
    }
}

static void on_connect(sl_rconn *ac, int status)
{
    conn *cn = sl_rconn_data(ac);
    if (!cn || cn->ac != ac)
        return;
    if (status != 0) {
        lost(cn, sl_rconn_error(ac)[0] ? sl_rconn_error(ac) : "connect failed"); /* ac frees itself */
        return;
    }
    cn->connected = true;
    cn->backoff_ms = BACKOFF_MIN_MS;
    cn->progress_ms = mono_ms();
    cinc(&cn->w->connects);
    if (cn->w->r->cfg.log)
        sl_log_info(cn->w->r->cfg.log, "redis store: connected to %s:%d (worker %d)", cn->a.host,
                    cn->a.port, cn->w->idx);
}

static void on_disconnect(sl_rconn *ac, int status)
{
    conn *cn = sl_rconn_data(ac);
    if (!cn || cn->ac != ac)
        return;
    (void)status;
    lost(cn, sl_rconn_error(ac)[0] ? sl_rconn_error(ac) : "connection closed");
}

static void on_slots(sl_rconn *ac, void *reply, void *priv);

/* Ask cn for the cluster's topology (CLUSTER SLOTS). */
static bool ask_slots(conn *cn)
{
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    size_t len[2] = {7, 5};
    if (!cn->ac || sl_rconn_command(cn->ac, on_slots, NULL, 2, argv, len) != 0)
        return false;
    if (cn->inflight++ == 0)
        cn->progress_ms = mono_ms();
    cn->slots_asked = true;
    cn->w->refreshing = true;
    cn->w->refresh_start_ms = mono_ms();
    return true;
}

static void try_connect(conn *cn)
{
    wk *w = cn->w;
    sl_rstore *r = w->r;
    const raddr *a = &cn->a;
    sl_rconn_config rc = {.loop = w->loop, .host = a->host, .port = a->port, .tls_slot = r->tls,
                          .server_name = r->tls_server_name, .out_max = r->cfg.max_queued_bytes,
                          .in_max = r->cfg.max_reply_bytes, .on_connect = on_connect,
                          .on_disconnect = on_disconnect, .data = cn, .stats = &w->rstats};
    sl_rconn *ac;
    int err = sl_rconn_new(&rc, &ac);
    if (err) {
        if (r->cfg.log && sl_log_budget_take(r->cfg.log, &w->conn_budget, SL_LOG_WARN))
            sl_log_write(r->cfg.log, SL_LOG_WARN, "redis store: %s:%d: %s", a->host, a->port,
                         err == -EINVAL ? "not an IP address" : strerror(-err));
        schedule_retry(cn);
        return;
    }
    cn->ac = ac;
    cn->connected = false;
    cn->wrong_server = false;
    cn->slots_asked = false;
    cn->conn_start_ms = mono_ms();
    /* queued before the connect completes; they go out first */
    if (r->password && cn != &w->sentinel) { /* the data nodes' credential, not a sentinel's */
        const char *argv[3] = {"AUTH", r->user ? r->user : r->password, r->password};
        size_t len[3] = {4, strlen(argv[1]), strlen(r->password)};
        if (sl_rconn_command(ac, sl_rstorewk_on_aux, "AUTH", r->user ? 3 : 2, argv, len) == 0)
            cn->inflight++;
    }
    if (cn == w->seed) { /* the seed only answers CLUSTER SLOTS */
        ask_slots(cn);
        return;
    }
    if (cn == &w->sentinel) { /* a sentinel only says where the master is */
        ask_master(w);
        return;
    }
    for (int alg = 0; alg < SL_ALGORITHM_COUNT; alg++) {
        const sl_rscript *s = sl_rscript_of(alg);
        if (!s)
            continue;
        const char *argv[3] = {"SCRIPT", "LOAD", s->src};
        size_t len[3] = {6, 4, s->len};
        if (sl_rconn_command(ac, sl_rstorewk_on_aux, "SCRIPT LOAD", 3, argv, len) == 0)
            cn->inflight++;
    }
    if (cn->inflight)
        cn->progress_ms = mono_ms();
}

/* ---- Redis Sentinel -------------------------------------------------------------------------- */

/* A sentinel's answer to SENTINEL get-master-addr-by-name: [ip, port], or nil for a name it does
 * not monitor. A new address moves the worker's connection there at once. */
static void on_master(sl_rconn *ac, void *reply, void *priv)
{
    (void)priv;
    conn *cn = sl_rconn_data(ac);
    redisReply *rp = reply;
    if (!cn)
        return;
    wk *w = cn->w;
    sl_rstore *r = w->r;
    if (cn->inflight)
        cn->inflight--;
    w->master_asking = false;
    if (!rp)
        return;
    cn->progress_ms = mono_ms();
    raddr a;
    char buf[ADDR_MAX + 16];
    if (rp->type != REDIS_REPLY_ARRAY || rp->elements != 2 ||
        rp->element[0]->type != REDIS_REPLY_STRING || rp->element[1]->type != REDIS_REPLY_STRING ||
        rp->element[0]->len >= ADDR_MAX ||
        snprintf(buf, sizeof buf, strchr(rp->element[0]->str, ':') ? "[%s]:%s" : "%s:%s",
                 rp->element[0]->str, rp->element[1]->str) >= (int)sizeof buf ||
        parse_addr(buf, &a)) {
        w->need_master = true; /* asked again at the next tick */
        if (r->cfg.log && sl_log_budget_take(r->cfg.log, &w->conn_budget, SL_LOG_WARN))
            sl_log_write(r->cfg.log, SL_LOG_WARN,
                         "redis store: sentinel %s:%d does not name a master '%s'%s", cn->a.host,
                         cn->a.port, r->sentinel_master,
                         rp->type == REDIS_REPLY_ERROR ? " (an error)" : "");
        return;
    }
    w->need_master = false;
    bool same = !strcmp(a.host, w->main.a.host) && a.port == w->main.a.port;
    if (same && (w->main.ac || w->main.next_try_ms < INT64_MAX))
        return; /* connected there, or reconnecting there */
    if (r->cfg.log)
        sl_log_info(r->cfg.log, "redis store: sentinel %s:%d: master '%s' is %s:%d (worker %d)",
                    cn->a.host, cn->a.port, r->sentinel_master, a.host, a.port, w->idx);
    if (w->main.ac)
        drop(&w->main, "the sentinels name another master");
    w->main.a = a;
    w->main.backoff_ms = BACKOFF_MIN_MS;
    try_connect(&w->main);
}

static bool ask_master(wk *w)
{
    conn *cn = &w->sentinel;
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", w->r->sentinel_master};
    size_t len[3] = {8, 23, strlen(w->r->sentinel_master)};
    if (!cn->ac || w->master_asking ||
        sl_rconn_command(cn->ac, on_master, NULL, 3, argv, len) != 0)
        return false;
    if (cn->inflight++ == 0)
        cn->progress_ms = mono_ms();
    w->master_asking = true;
    w->master_asked_ms = mono_ms();
    return true;
}

/* Free cn's connection from outside its callbacks: commands in flight are answered without a
 * reply, and no callback of this connection sees it as cn's any more. */
static void drop(conn *cn, const char *why)
{
    sl_rconn *ac = cn->ac;
    lost(cn, why);
    if (ac) {
        sl_rconn_set_data(ac, NULL); /* the replies' callbacks: not ours any more */
        sl_rconn_free(ac);
    }
}

conn *sl_rstorewk_conn_new(wk *w, const char *host, int port)
{
    conn *cn = calloc(1, sizeof *cn);
    if (!cn)
        return NULL;
    cn->w = w;
    cn->id = ++w->conn_ids ? w->conn_ids : ++w->conn_ids;
    snprintf(cn->a.host, sizeof cn->a.host, "%s", host);
    cn->a.port = port;
    cn->backoff_ms = BACKOFF_MIN_MS;
    try_connect(cn);
    return cn;
}

/* cn leaves the topology: freed at the next tick (maybe from inside one of its callbacks now). */
static void retire(wk *w, conn *cn)
{
    if (!cn)
        return;
    cn->retired = true;
    cn->next_old = w->old;
    w->old = cn;
}

static void free_retired(wk *w)
{
    while (w->old) {
        conn *cn = w->old;
        w->old = cn->next_old;
        if (cn->ac)
            drop(cn, "left the cluster's topology");
        free(cn);
    }
}

/* A CLUSTER SLOTS answer: the table is replaced, connections kept for the masters still in it,
 * made for new ones and closed for the others. */
static void on_slots(sl_rconn *ac, void *reply, void *priv)
{
    (void)priv;
    conn *cn = sl_rconn_data(ac);
    redisReply *rp = reply;
    if (!cn)
        return;
    wk *w = cn->w;
    if (cn->inflight)
        cn->inflight--;
    cn->slots_asked = false;
    w->refreshing = false;
    if (!rp)
        return;
    cn->progress_ms = mono_ms();
    sl_rslots *nt = w->next;
    if (!nt) { /* no memory for a second table: asked again later */
        w->need_refresh = true;
        return;
    }
    if (w->tbl) {
        nt->refresh_every_ms = w->tbl->refresh_every_ms;
        nt->last_refresh_ms = w->tbl->last_refresh_ms;
    }
    int rc = sl_rslots_from_reply(nt, rp, cn->a.host);
    if (rc || nt->n_nodes == 0) {
        if (w->r->cfg.log && sl_log_budget_take(w->r->cfg.log, &w->conn_budget, SL_LOG_WARN))
            sl_log_write(w->r->cfg.log, SL_LOG_WARN,
                         "redis store: %s:%d: no cluster topology in its CLUSTER SLOTS answer%s%.200s",
                         cn->a.host, cn->a.port, rp->type == REDIS_REPLY_ERROR ? ": " : "",
                         rp->type == REDIS_REPLY_ERROR ? rp->str : "");
        w->need_refresh = true;
        return;
    }
    cinc(&w->refreshes);
    conn *keep[SL_RSLOTS_NODES_MAX] = {0};
    for (size_t i = 0; i < nt->n_nodes; i++) {
        for (size_t j = 0; w->tbl && j < w->tbl->n_nodes; j++) {
            conn *o = w->node[j];
            if (o && o->a.port == nt->node[i].port && !strcmp(o->a.host, nt->node[i].host)) {
                keep[i] = o;
                w->node[j] = NULL;
                break;
            }
        }
    }
    for (size_t j = 0; w->tbl && j < w->tbl->n_nodes; j++)
        if (w->node[j]) {
            retire(w, w->node[j]);
            w->node[j] = NULL;
        }
    sl_rslots *old = w->tbl;
    w->tbl = nt;
    w->next = old ? old : malloc(sizeof *w->next); /* NULL: refresh() tries again */
    for (size_t i = 0; i < nt->n_nodes; i++)
        w->node[i] =
            keep[i] ? keep[i] : sl_rstorewk_conn_new(w, nt->node[i].host, nt->node[i].port);
    if (w->seed) {
        retire(w, w->seed);
        w->seed = NULL;
    }
    w->need_refresh = false;
    sl_rstorewk_sweep_parked(w, true, false);
}

/* Ask for the topology: on a connected master, or else on a seed address. */
static void refresh(wk *w)
{
    if (!w->next)
        w->next = malloc(sizeof *w->next);
    if (!w->next)
        return;
    if (!w->tbl)
        sl_rslots_init(w->next, w->r->cfg.cluster_refresh_ms);
    for (size_t i = 0; w->tbl && i < w->tbl->n_nodes; i++) {
        size_t k = (w->addr + i) % w->tbl->n_nodes;
        conn *cn = w->node[k];
        if (cn && cn->connected && ask_slots(cn)) {
            w->addr = k + 1;
            return;
        }
    }
    if (w->seed) {
        if (w->seed->ac && !w->seed->slots_asked)
            ask_slots(w->seed);
        return; /* asked, or connecting (its connect asks) */
    }
    const raddr *a = &w->r->addrs[w->addr % w->r->n_addrs];
    w->seed = calloc(1, sizeof *w->seed);
    if (!w->seed)
        return;
    w->seed->w = w;
    w->seed->id = ++w->conn_ids ? w->conn_ids : ++w->conn_ids;
    w->seed->a = *a;
    w->seed->backoff_ms = BACKOFF_MIN_MS;
    try_connect(w->seed);
}

/* The deadlines of one connection, and its reconnection. */
static void conn_tick(conn *cn, int64_t now)
{
    int64_t limit = cn->w->r->cfg.timeout_ms;
    if (!cn->ac) {
        if (now >= cn->next_try_ms)
            try_connect(cn);
        return;
    }
    if (!cn->connected && now - cn->conn_start_ms > limit)
        drop(cn, "connect timed out");
    else if (cn->connected && cn->inflight && now - cn->progress_ms > limit)
        drop(cn, "no answer within --redis-timeout");
    else if (cn->wrong_server)
        drop(cn, "this server cannot take writes (a replica, or loading): trying the next address");
}

static void tick(uv_timer_t *t)
{
    wk *w = t->data;
    int64_t now = mono_ms();
    if (!w->r->cfg.cluster) {
        conn_tick(&w->main, now);
        if (w->r->sentinel_master) {
            conn_tick(&w->sentinel, now);
            if (w->sentinel.connected && (w->need_master || now - w->master_asked_ms >= SENTINEL_POLL_MS))
                ask_master(w);
        }
        return;
    }
    free_retired(w);
    if (w->parked)
        sl_rstorewk_sweep_parked(w, false, false);
    for (size_t i = 0; w->tbl && i < w->tbl->n_nodes; i++)
        if (w->node[i])
            conn_tick(w->node[i], now);
    if (w->seed)
        conn_tick(w->seed, now);
    if (w->refreshing && now - w->refresh_start_ms > w->r->cfg.timeout_ms)
        w->refreshing = false;
    if (!w->refreshing && (w->need_refresh || !w->tbl) &&
        (!w->tbl || sl_rslots_refresh_due(w->tbl, now)))
        refresh(w);
}

void sl_rstore_worker_start(sl_rstore *r, int worker, uv_loop_t *loop)
{
    if (worker < 0 || worker >= r->nworkers)
        return;
    wk *w = &r->wk[worker];
    w->loop = loop;
    w->started = true;
    w->stopping = false;
    w->addr = 0; /* the list is an order of preference (failover), not a set of equals */
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    int64_t every = r->cfg.timeout_ms / 4;
    every = every < TICK_MIN_MS ? TICK_MIN_MS : every > TICK_MAX_MS ? TICK_MAX_MS : every;
    uv_timer_start(&w->timer, tick, (uint64_t)every, (uint64_t)every);
    sl_rstorewk_open_start(w);
    if (r->cfg.cluster) {
        refresh(w);
        return;
    }
    w->main.w = w;
    w->main.backoff_ms = BACKOFF_MIN_MS;
    if (r->sentinel_master) { /* the server's address comes from a sentinel */
        w->main.next_try_ms = INT64_MAX;
        w->sentinel.w = w;
        w->sentinel.a = r->addrs[0];
        w->sentinel.backoff_ms = BACKOFF_MIN_MS;
        w->master_asking = false;
        try_connect(&w->sentinel);
        return;
    }
    w->main.a = r->addrs[0];
    try_connect(&w->main);
}

void sl_rstore_worker_stop(sl_rstore *r, int worker)
{
    if (worker < 0 || worker >= r->nworkers)
        return;
    wk *w = &r->wk[worker];
    if (!w->started)
        return;
    w->stopping = true;
    sl_rstorewk_open_stop(w);
    sl_rstorewk_sweep_parked(w, false, true);
    if (w->main.ac)
        drop(&w->main, "worker stopping");
    if (w->sentinel.ac)
        drop(&w->sentinel, "worker stopping");
    for (size_t i = 0; i < SL_RSLOTS_NODES_MAX; i++)
        if (w->node[i]) {
            retire(w, w->node[i]);
            w->node[i] = NULL;
        }
    if (w->seed) {
        retire(w, w->seed);
        w->seed = NULL;
    }
    free_retired(w);
    free(w->tbl);
    free(w->next);
    w->tbl = w->next = NULL;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, NULL);
    w->started = false;
}

/* ---- construction, stats ------------------------------------------------------------------- */

static int parse_addr(const char *s, raddr *a)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1])
        return -EINVAL;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']')
        h++, hl -= 2;
    if (hl == 0 || hl >= sizeof a->host)
        return -EINVAL;
    char ip[sizeof a->host];
    unsigned char bin[sizeof(struct in6_addr)];
    memcpy(ip, h, hl);
    ip[hl] = '\0';
    if (inet_pton(AF_INET, ip, bin) != 1 && inet_pton(AF_INET6, ip, bin) != 1)
        return -EINVAL; /* sl_rconn connects to IP addresses only */
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return -EINVAL;
    memcpy(a->host, h, hl);
    a->host[hl] = '\0';
    a->port = (int)port;
    return 0;
}

static void collect(void *arg, sl_metrics_sink *sink, size_t off)
{
    sl_rstore *r = arg;
    uint64_t sum = 0;
    for (int i = 0; i < r->nworkers; i++)
        sum += atomic_load_explicit((_Atomic uint64_t *)((char *)&r->wk[i] + off),
                                    memory_order_relaxed);
    sl_metrics_sink_emit(sink, NULL, 0, (double)sum);
}

#define COLLECTOR(field)                                                                           \
    static void collect_##field(void *arg, sl_metrics_sink *sink)                                  \
    {                                                                                              \
        collect(arg, sink, offsetof(wk, field));                                                   \
    }
COLLECTOR(items)
COLLECTOR(errors)
COLLECTOR(fail_open)
COLLECTOR(reloads)
COLLECTOR(disconnects)
COLLECTOR(redirects)
COLLECTOR(refreshes)
COLLECTOR(over_hits)

static void collect_oversized(void *arg, sl_metrics_sink *sink)
{
    collect(arg, sink, offsetof(wk, rstats.oversized));
}

static void collect_tls_failed(void *arg, sl_metrics_sink *sink)
{
    collect(arg, sink, offsetof(wk, rstats.tls_failed));
}

static void register_metrics(sl_rstore *r, sl_metrics *m)
{
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_items_total",
                         "Requests sent to the Redis store", NULL, collect_items, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_errors_total",
                         "Requests answered with an error because Redis failed them", NULL,
                         collect_errors, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_fail_open_total",
                         "Requests decided locally because Redis failed them (--fail-open)", NULL,
                         collect_fail_open, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_over_limit_cached_total",
                         "Requests answered OVER_LIMIT from the over-limit cache, not sent to Redis",
                         NULL, collect_over_hits, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_script_reloads_total",
                         "Scripts sent again after a NOSCRIPT answer", NULL, collect_reloads, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_disconnects_total",
                         "Connections to Redis lost or closed for a timeout", NULL,
                         collect_disconnects, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_oversized_replies_total",
                         "Connections to Redis closed for a reply longer than --redis-max-reply",
                         NULL, collect_oversized, r);
    if (r->tls)
        sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_tls_failures_total",
                             "TLS handshakes or sessions to Redis that failed (certificate, "
                             "protocol)", NULL, collect_tls_failed, r);
    if (!r->cfg.cluster)
        return;
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_redirects_total",
                         "MOVED / ASK answers of Redis Cluster followed", NULL, collect_redirects,
                         r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_topology_refreshes_total",
                         "Redis Cluster topologies read (CLUSTER SLOTS), the first included", NULL,
                         collect_refreshes, r);
}

/* --redis-tls: the client context, from r's files (the system's trust store without a CA
 * bundle). */
static int read_tls(const sl_rstore *r, sl_tls_ctx **out, char *err, size_t errlen)
{
    sl_tls_config tc = {.cert_file = r->tls_cert, .key_file = r->tls_key, .ca_file = r->tls_ca,
                        .system_ca = true, .alpn = "none"};
    char why[256];
    int rc = sl_tls_ctx_new(out, &tc, why, sizeof why);
    if (rc)
        snprintf(err, errlen, "redis store: TLS: %s", why);
    return rc;
}

/* A copy of an optional string: 0 (*out NULL for NULL or "") or -ENOMEM. */
static int dup_opt(char **out, const char *s)
{
    *out = NULL;
    if (s && s[0] && !(*out = strdup(s)))
        return -ENOMEM;
    return 0;
}

static int load_tls(sl_rstore *r, const sl_rstore_config *cfg, char *err, size_t errlen)
{
    if ((cfg->tls_cert && cfg->tls_cert[0]) != (cfg->tls_key && cfg->tls_key[0])) {
        snprintf(err, errlen, "redis store: --redis-tls-cert and --redis-tls-key go together");
        return -EINVAL;
    }
    if (dup_opt(&r->tls_ca, cfg->tls_ca) || dup_opt(&r->tls_cert, cfg->tls_cert) ||
        dup_opt(&r->tls_key, cfg->tls_key) || dup_opt(&r->tls_server_name, cfg->tls_server_name))
        return -ENOMEM;
    sl_tls_ctx *ctx;
    int rc = read_tls(r, &ctx, err, errlen);
    if (rc)
        return rc;
    r->tls = sl_tls_slot_new(ctx);
    sl_tls_ctx_unref(ctx);
    return r->tls ? 0 : -ENOMEM;
}

int sl_rstore_reload_tls(sl_rstore *r, char *err, size_t errlen)
{
    if (!r->tls)
        return 1;
    sl_tls_ctx *ctx;
    int rc = read_tls(r, &ctx, err, errlen);
    if (rc)
        return rc;
    sl_tls_slot_set(r->tls, ctx);
    sl_tls_ctx_unref(ctx);
    return 0;
}

int sl_rstore_new(const sl_rstore_config *cfg, sl_rstore **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg || cfg->n_addrs == 0 || cfg->workers < 1) {
        snprintf(err, errlen, "redis store: no address (--redis-addrs)");
        return -EINVAL;
    }
    sl_rstore *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->cfg = *cfg;
    if (r->cfg.timeout_ms <= 0)
        r->cfg.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (r->cfg.cluster_refresh_ms <= 0)
        r->cfg.cluster_refresh_ms = DEFAULT_REFRESH_MS;
    if (r->cfg.key_margin_ms <= 0)
        r->cfg.key_margin_ms = DEFAULT_MARGIN_MS;
    if (cfg->engine_cfg)
        r->ecfg = *cfg->engine_cfg;
    else
        sl_engine_config_default(&r->ecfg);
    r->batch_items = cfg->batch_items > 0 ? (uint32_t)cfg->batch_items : DEFAULT_BATCH_ITEMS;
    r->nworkers = cfg->workers;
    r->addrs = calloc(cfg->n_addrs, sizeof *r->addrs);
    r->wk = calloc((size_t)cfg->workers, sizeof *r->wk);
    int rc = -ENOMEM;
    if (!r->addrs || !r->wk)
        goto fail;
    r->n_addrs = cfg->n_addrs;
    for (size_t i = 0; i < cfg->n_addrs; i++)
        if (parse_addr(cfg->addrs[i], &r->addrs[i])) {
            snprintf(err, errlen,
                     "redis store: address '%s' is not host:port (an IP address and a port)",
                     cfg->addrs[i]);
            rc = -EINVAL;
            goto fail;
        }
    if (cfg->password_file && cfg->password_file[0]) {
        size_t len;
        rc = sl_file_read(cfg->password_file, PASSWORD_MAX, SL_FILE_REGULAR | SL_FILE_SECRET,
                          &r->password, &len,
                          err, errlen);
        if (rc)
            goto fail;
        while (len && (r->password[len - 1] == '\n' || r->password[len - 1] == '\r'))
            r->password[--len] = '\0';
        if (cfg->user && cfg->user[0] && !(r->user = strdup(cfg->user))) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    if (cfg->tls && (rc = load_tls(r, cfg, err, errlen)))
        goto fail;
    if (cfg->sentinel_master && cfg->sentinel_master[0]) {
        if (cfg->cluster) {
            snprintf(err, errlen, "redis store: a sentinel's master or a Redis Cluster, not both");
            rc = -EINVAL;
            goto fail;
        }
        if (!(r->sentinel_master = strdup(cfg->sentinel_master))) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    r->cfg.sentinel_master = NULL;
    r->cfg.user = NULL;
    r->cfg.password_file = NULL;
    r->cfg.addrs = NULL;
    r->cfg.tls_ca = r->cfg.tls_cert = r->cfg.tls_key = r->cfg.tls_server_name = NULL;
    if (sl_overcache_shared_new(cfg->over_limit_cache, 0, &r->over)) {
        rc = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < r->nworkers; i++) {
        r->wk[i].r = r;
        r->wk[i].idx = i;
        if (sl_overcache_init(&r->wk[i].over, r->over)) {
            rc = -ENOMEM;
            goto fail;
        }
        r->wk[i].log_budget.per_second = 1;
        r->wk[i].conn_budget.per_second = 1;
    }
    if (cfg->metrics)
        register_metrics(r, cfg->metrics);
    *out = r;
    return 0;
fail:
    sl_rstore_free(r);
    return rc;
}

void sl_rstore_free(sl_rstore *r)
{
    if (!r)
        return;
    free(r->addrs);
    for (int i = 0; r->wk && i < r->nworkers; i++) {
        sl_rscript_cmd_free(&r->wk[i].cmd);
        sl_rstorewk_free_spare(&r->wk[i]);
        sl_overcache_free(&r->wk[i].over);
    }
    free(r->wk);
    free(r->user);
    sl_tls_slot_free(r->tls);
    free(r->tls_ca);
    free(r->tls_cert);
    free(r->tls_key);
    sl_overcache_shared_free(r->over);
    free(r->tls_server_name);
    free(r->sentinel_master);
    if (r->password) {
        explicit_bzero(r->password, strlen(r->password));
        free(r->password);
    }
    free(r);
}

void sl_rstore_stats_get(sl_rstore *r, sl_rstore_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < r->nworkers; i++) {
        wk *w = &r->wk[i];
        out->items += atomic_load_explicit(&w->items, memory_order_relaxed);
        out->errors += atomic_load_explicit(&w->errors, memory_order_relaxed);
        out->fail_open += atomic_load_explicit(&w->fail_open, memory_order_relaxed);
        out->reloads += atomic_load_explicit(&w->reloads, memory_order_relaxed);
        out->connects += atomic_load_explicit(&w->connects, memory_order_relaxed);
        out->disconnects += atomic_load_explicit(&w->disconnects, memory_order_relaxed);
        out->redirects += atomic_load_explicit(&w->redirects, memory_order_relaxed);
        out->refreshes += atomic_load_explicit(&w->refreshes, memory_order_relaxed);
        out->oversized += atomic_load_explicit(&w->rstats.oversized, memory_order_relaxed);
        out->tls_failures += atomic_load_explicit(&w->rstats.tls_failed, memory_order_relaxed);
        out->over_limit_cached += atomic_load_explicit(&w->over_hits, memory_order_relaxed);
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router, control half (see router.h; the forwarding half is router.c, the state they share
 * router_int.h): the configuration from sluiced's options and the router's construction, publishing
 * a new peer list (a view, cluster/view.h, built off the loops and posted to every worker, which
 * swaps it in on its own thread), the workers' start and stop, membership start and stop, the
 * peer identity checks over a worker's current and previous views, the hand-off glue (worker 0
 * sends TransferKeys over its peer connections; a graceful leave forwards everything and waits
 * for the walk), and health and counters. Nothing here runs per request.
 */
#include "cluster/router_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "auth/addr.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

/* ---- configuration -------------------------------------------------------------------------- */

void sl_router_config_from_options(sl_router_config *c, const sl_options *o)
{
    c->discovery = o->discovery;
    c->advertise_addr = o->advertise_addr;
    c->peers = (const char *const *)o->peers.items;
    c->n_peers = o->peers.n;
    c->dns_name = o->dns_name;
    c->dns_period_ns = o->dns_period_ns;
    c->etcd_endpoints = (const char *const *)o->storage_addrs.items;
    c->n_etcd_endpoints = o->storage_addrs.n;
    c->storage_prefix = o->storage_prefix;
    c->peer_lease_ttl_ns = o->peer_lease_ttl_ns;
    c->etcd_timeout_ns = o->storage_timeout_ns;
    c->etcd_tls = (sl_etcd_tls){o->storage_tls_ca, o->storage_tls_cert, o->storage_tls_key};
    c->k8s = (sl_k8s_config){.api = o->k8s_api, .ns = o->k8s_namespace,
                             .service = o->k8s_service, .selector = o->k8s_selector,
                             .port_name = o->k8s_port_name, .port = (int)o->k8s_port,
                             .token_file = o->k8s_token_file, .ca_file = o->k8s_ca_file,
                             .max_bytes = (size_t)o->k8s_max_bytes,
                             .watch_timeout_s = o->k8s_watch_timeout_ns / 1000000000};
    c->picker = o->peer_picker;
    c->replicas = (unsigned)o->replicas;
    c->batch_wait_ns = o->batch_wait_ns;
    c->batch_limit = (size_t)o->batch_limit;
    c->batch_timeout_ns = o->batch_timeout_ns;
    c->global_sync_wait_ns = o->global_sync_wait_ns;
    c->global_batch_limit = (size_t)o->global_batch_limit;
    c->fail_open = o->fail_open;
    c->global_max_keys = o->gc_max_keys > 0 ? (size_t)o->gc_max_keys : 0;
}

static char *dup_opt(const char *s)
{
    return s ? strdup(s) : NULL;
}

static char **dup_list(const char *const *v, size_t n)
{
    char **o = calloc(n ? n : 1, sizeof *o);
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (!(o[i] = strdup(v[i] ? v[i] : ""))) {
            for (size_t k = 0; k < i; k++)
                free(o[k]);
            free(o);
            return NULL;
        }
    return o;
}

static void free_list(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}


static sl_view *view_build(sl_router *r, const char *const *addrs, size_t n, bool resolve)
{
    return sl_view_new(r->cfg.picker, r->cfg.replicas, r->advertise, addrs, n, resolve);
}

int sl_router_new(const sl_router_config *cfg, sl_router **out)
{
    sl_router *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->engine = cfg->engine;
    r->cfg = *cfg;
    r->cluster = cfg->discovery != SL_DISCOVERY_NONE;
    pthread_mutex_init(&r->vmu, NULL);
    *out = r;
    if (!r->cluster)
        return 0;

    sl_router_config *c = &r->cfg;
    if (cfg->engine_cfg) {
        r->ecfg = *cfg->engine_cfg;
        r->has_ecfg = true;
    }
    c->engine_cfg = NULL;
    if (c->workers < 1)
        c->workers = 1;
    if (!c->replicas)
        c->replicas = 512;
    if (!c->batch_wait_ns)
        c->batch_wait_ns = 500000;
    if (c->batch_wait_ns < 0)
        c->batch_wait_ns = 0;
    if (!c->batch_limit)
        c->batch_limit = 1000;
    if (!c->batch_timeout_ns)
        c->batch_timeout_ns = 500000000;
    if (!c->global_sync_wait_ns)
        c->global_sync_wait_ns = 100000000;
    if (!c->global_batch_limit)
        c->global_batch_limit = 1000;
    if (!c->max_msg)
        c->max_msg = SL_GRPC_DEFAULT_MAX_MSG;
    if (!c->dns_period_ns)
        c->dns_period_ns = 5000000000LL;
    r->log = c->log;
    /* an owner refuses more than 1000 requests in one call (Gubernator's limit) */
    r->batch_limit = c->batch_limit < SL_BATCH_MAX_ITEMS ? c->batch_limit : SL_BATCH_MAX_ITEMS;
    if (c->global_batch_limit > SL_BATCH_MAX_ITEMS)
        c->global_batch_limit = SL_BATCH_MAX_ITEMS;
    r->batch_timeout_ms = c->batch_timeout_ns / 1000000;
    if (r->batch_timeout_ms < 1)
        r->batch_timeout_ms = 1;
    r->nworkers = c->workers;

    int rc = -ENOMEM;
    r->advertise = dup_opt(c->advertise_addr ? c->advertise_addr : "");
    if (r->advertise && !sl_addr_host(r->advertise, r->source_ip, sizeof r->source_ip) &&
        (!strcmp(r->source_ip, "0.0.0.0") || !strcmp(r->source_ip, "::")))
        r->source_ip[0] = '\0'; /* unspecified: the kernel picks */
    r->dns_name = dup_opt(c->dns_name);
    r->dns_server = dup_opt(c->dns_server);
    r->prefix = dup_opt(c->storage_prefix ? c->storage_prefix : "/sluice");
    r->peers = dup_list(c->peers, c->n_peers);
    r->etcd_eps = dup_list(c->etcd_endpoints, c->n_etcd_endpoints);
    r->wk = calloc((size_t)r->nworkers, sizeof *r->wk);
    if (!r->advertise || !r->prefix || !r->peers || !r->etcd_eps || !r->wk ||
        (c->dns_name && !r->dns_name) || (c->dns_server && !r->dns_server))
        goto fail;
    if (c->picker != SL_PICKER_RING && c->picker != SL_PICKER_HRW) {
        rc = -EINVAL;
        goto fail;
    }
    sl_global_config gc = {.max_keys = c->global_max_keys, .batch_limit = c->global_batch_limit};
    if ((rc = sl_global_new(&gc, &r->global)))
        goto fail;
    sl_peermetrics_register(&r->pm, c->metrics);
    for (int i = 0; i < r->nworkers; i++) {
        wk *w = &r->wk[i];
        w->r = r;
        w->id = i;
        w->tfd = -1;
        w->tfd_armed = INT64_MAX;
        sl_globalsync_config sc = {
            .engine = r->engine,
            .global = r->global,
            .sync_wait_ns = c->global_sync_wait_ns,
            .batch_limit = c->global_batch_limit,
            .call_timeout_ms = r->batch_timeout_ms,
            .max_msg = c->max_msg,
            .expire = i == 0,
            .log = r->log,
            .m_local_answers = r->pm.global_local,
            .m_updates = r->pm.updates,
            .ops = &sl_routerwk_gsync_ops,
            .ud = w,
        };
        if ((rc = sl_globalsync_new(&sc, &w->gsync)))
            goto fail;
    }
    /* a static list is known now: workers start with it */
    if (c->discovery == SL_DISCOVERY_STATIC) {
        r->latest = view_build(r, (const char *const *)r->peers, c->n_peers, true);
        if (!r->latest) {
            rc = -EINVAL;
            goto fail;
        }
        r->latest->version = ++r->next_version;
        sl_metrics_gauge_set(r->pm.peers, (double)r->latest->n);
    }
    return 0;
fail:
    *out = NULL;
    sl_router_free(r);
    return rc;
}

void sl_router_free(sl_router *r)
{
    if (!r)
        return;
    sl_router_stop(r);
    if (r->wk)
        for (int i = 0; i < r->nworkers; i++) {
            sl_view_unref(r->wk[i].v);
            sl_view_unref(r->wk[i].prev);
            sl_globalsync_free(r->wk[i].gsync);
        }
    sl_view_unref(r->latest);
    sl_global_free(r->global);
    free(r->wk);
    free(r->advertise);
    free(r->dns_name);
    free(r->dns_server);
    free(r->prefix);
    free_list(r->peers, r->cfg.n_peers);
    free_list(r->etcd_eps, r->cfg.n_etcd_endpoints);
    pthread_mutex_destroy(&r->vmu);
    free(r);
}

/* ---- publishing peer lists ----------------------------------------------------------------- */

static sl_view *latest_ref(sl_router *r)
{
    pthread_mutex_lock(&r->vmu);
    sl_view *v = r->latest;
    if (v)
        sl_view_ref(v);
    pthread_mutex_unlock(&r->vmu);
    return v;
}

static void on_view_posted(void *ud)
{
    wk *w = ud;
    if (!w->started || w->stopping)
        return;
    sl_view *v = latest_ref(w->r);
    if (!v || v == w->v) {
        sl_view_unref(v);
        return;
    }
    sl_routerwk_apply_view(w, v);
}

void sl_router_set_peers(sl_router *r, const char *const *addrs, size_t n)
{
    if (!r->cluster)
        return;
    sl_view *v = view_build(r, addrs, n, true);
    if (!v) {
        sl_log_error(r->log, "cannot build a picker over %zu peers", n);
        return;
    }
    pthread_mutex_lock(&r->vmu);
    v->version = ++r->next_version;
    sl_view *old = r->latest;
    r->latest = v;
    sl_server *srv = r->server;
    pthread_mutex_unlock(&r->vmu);
    sl_view_unref(old);
    sl_metrics_gauge_set(r->pm.peers, (double)v->n);
    sl_metrics_counter_inc(r->pm.views);
    if (v->self < 0 && v->n > 0)
        sl_log_warn(r->log, "this node (%s) is not in the peer list", r->advertise);
    if (srv)
        for (int i = 0; i < r->nworkers; i++)
            sl_server_post(srv, i, on_view_posted, &r->wk[i]);
}

/* ---- peer identity (cluster/view.h) ---------------------------------------------------------- */

bool sl_router_is_peer(sl_router *r, int worker, const struct sockaddr *sa)
{
    if (!r->cluster || worker < 0 || worker >= r->nworkers)
        return false;
    return sl_view_has_ip(r->wk[worker].v, sa);
}

bool sl_router_was_peer(sl_router *r, int worker, const struct sockaddr *sa)
{
    if (!r->cluster || worker < 0 || worker >= r->nworkers)
        return false;
    return sl_view_has_ip(r->wk[worker].v, sa) || sl_view_has_ip(r->wk[worker].prev, sa);
}

bool sl_router_names_peer(sl_router *r, int worker, const char *names, bool former)
{
    if (!r->cluster || !names || worker < 0 || worker >= r->nworkers)
        return false;
    return sl_view_names(r->wk[worker].v, names) ||
           (former && sl_view_names(r->wk[worker].prev, names));
}

bool sl_router_has_member(sl_router *r, int worker, const char *addr, bool former)
{
    if (!r->cluster || !addr || worker < 0 || worker >= r->nworkers)
        return false;
    return (r->wk[worker].v && sl_picker_find(r->wk[worker].v->picker, addr) >= 0) ||
           (former && r->wk[worker].prev && sl_picker_find(r->wk[worker].prev->picker, addr) >= 0);
}

static void on_members(void *ud, const char *const *addrs, size_t n)
{
    sl_router_set_peers(ud, addrs, n);
}

/* ---- hand-off glue (worker 0) ---------------------------------------------------------------- */

typedef struct hcall {
    sl_handoff_sent_cb cb;
    void *ud;
} hcall;

static void on_transfer_done(void *ud, const sl_peer_result *res)
{
    hcall *c = ud;
    int err = res->err ? res->err : res->grpc_status != SL_GRPC_OK ? -EPROTO : 0;
    c->cb(c->ud, err);
    free(c);
}

/* A hand-off batch's deadline: a batch is up to 256 KiB, so more than a forwarding call's. */
static int64_t handoff_timeout_ms(const sl_router *r)
{
    int64_t t = 10 * r->batch_timeout_ms;
    return t < 2000 ? 2000 : t;
}

static int handoff_send(void *ud, size_t peer, sl_buf *framed, sl_handoff_sent_cb cb, void *cb_ud)
{
    wk *w = ud;
    if (peer >= w->npeers || !w->peers[peer])
        return -ENOTCONN;
    hcall *c = malloc(sizeof *c);
    if (!c)
        return -ENOMEM;
    c->cb = cb;
    c->ud = cb_ud;
    int rc = sl_peer_call(w->peers[peer]->conn, SL_PEERWIRE_PATH_TRANSFER_KEYS, framed,
                          handoff_timeout_ms(w->r), on_transfer_done, c);
    if (rc)
        free(c);
    return rc;
}

static void handoff_release(void *ud, void *token)
{
    (void)ud;
    sl_view_unref(token);
}

static void handoff_done(void *ud, void *token)
{
    wk *w = ud;
    sl_view *v = token;
    if (v->self < 0 && atomic_load(&w->r->leaving))
        atomic_store(&w->r->leave_done, true);
}

int64_t sl_router_transfer_keys(sl_router *r, const uint8_t *records, size_t len, int64_t now_ms,
                                size_t max_keys, size_t *bad_at)
{
    sl_alg_config alg = {0};
    if (r->has_ecfg) {
        alg.max_log_limit = r->ecfg.max_log_limit;
        alg.max_sub_windows = r->ecfg.max_sub_windows;
        alg.max_concurrency_limit = r->ecfg.max_concurrency_limit;
    }
    int rc = sl_handoff_check(&alg, records, len, now_ms, max_keys, bad_at);
    if (rc)
        return rc;
    return (int64_t)sl_handoff_receive(r->engine, &alg, records, len, now_ms, NULL);
}

int sl_router_leave(sl_router *r, int64_t timeout_ms)
{
    if (!r->cluster || !r->server)
        return 0;
    sl_view *v = latest_ref(r);
    if (!v)
        return 0;
    if (v->self < 0 || v->n <= 1) {
        sl_view_unref(v);
        return 0;
    }
    const char **rest = calloc(v->n, sizeof *rest);
    if (!rest) {
        sl_view_unref(v);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++)
        if ((long)i != v->self)
            rest[k++] = sl_picker_addr(v->picker, i);
    atomic_store(&r->leave_done, false);
    atomic_store(&r->leaving, true);
    sl_router_set_peers(r, rest, k); /* every worker forwards everything; worker 0 pushes */
    free(rest);
    sl_view_unref(v);
    int64_t deadline = sl_mono_ns() + timeout_ms * 1000000;
    while (!atomic_load(&r->leave_done) && sl_mono_ns() < deadline) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&r->leave_done) ? 0 : -ETIMEDOUT;
}

/* ---- lifecycle on workers ------------------------------------------------------------------- */

void sl_router_worker_start(sl_router *r, int worker, uv_loop_t *loop)
{
    /* started already: the node starts the router as its membership and, in a cluster, again as
     * its decider (node/node.c) */
    if (!r->cluster || worker < 0 || worker >= r->nworkers || r->wk[worker].started)
        return;
    wk *w = &r->wk[worker];
    w->loop = loop;
    sl_batch_init(&w->scratch, 0);
    w->take = calloc(r->batch_limit, sizeof *w->take);
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->tfd >= 0) {
        uv_poll_init(loop, &w->tpoll, w->tfd);
        w->tpoll.data = w;
        uv_poll_start(&w->tpoll, UV_READABLE, sl_routerwk_on_timer);
    } else {
        sl_log_error(r->log, "timerfd: %s: batches go at once", strerror(errno));
    }
    sl_globalsync_start(w->gsync, loop);
    if (worker == 0) {
        sl_handoff_config hc = {.engine = r->engine, .loop = loop, .log = r->log,
                                .m_sent = r->pm.handoff_sent, .m_failed = r->pm.handoff_failed,
                                .m_bytes = r->pm.handoff_bytes, .send = handoff_send,
                                .release = handoff_release, .done = handoff_done, .ud = w};
        if (sl_handoff_new(&hc, &r->handoff))
            sl_log_error(r->log, "hand-off: out of memory: keys will not move on list changes");
    }
    w->started = true;
    sl_view *v = latest_ref(r);
    if (!v) {
        /* no list yet (DNS, etcd): alone until one arrives */
        const char *self = r->advertise;
        v = view_build(r, &self, r->advertise[0] ? 1 : 0, false);
        if (v)
            v->version = 0;
    }
    if (v)
        sl_routerwk_apply_view(w, v);
}

static void on_tfd_closed(uv_handle_t *h)
{
    wk *w = h->data;
    if (w->tfd >= 0)
        close(w->tfd);
    w->tfd = -1;
}

void sl_router_worker_stop(sl_router *r, int worker)
{
    if (!r->cluster || worker < 0 || worker >= r->nworkers)
        return;
    wk *w = &r->wk[worker];
    if (!w->started || w->stopping)
        return;
    /* the server has drained: no call waits for an answer any more. GLOBAL hits not sent yet
     * are dropped (the owner's state is at most one sync interval behind). */
    w->stopping = true;
    if (worker == 0 && r->handoff) {
        sl_handoff_close(r->handoff); /* before the peers: their cancelled calls find it closed */
        r->handoff = NULL;
    }
    sl_globalsync_stop(w->gsync);
    for (size_t i = 0; i < w->npeers; i++)
        if (w->peers[i])
            sl_routerwk_retire_peer(w, w->peers[i]);
    free(w->peers);
    w->peers = NULL;
    w->npeers = 0;
    if (w->tfd >= 0) {
        uv_poll_stop(&w->tpoll);
        uv_close((uv_handle_t *)&w->tpoll, on_tfd_closed);
    }
    while (w->free_pends) {
        pend *p = w->free_pends;
        w->free_pends = p->next;
        free(p);
    }
    sl_batch_free(&w->scratch);
    free(w->idx);
    w->idx = NULL;
    free(w->take);
    w->take = NULL;
}

int sl_router_start(sl_router *r, sl_server *srv)
{
    if (!r->cluster)
        return 0;
    pthread_mutex_lock(&r->vmu);
    r->server = srv;
    pthread_mutex_unlock(&r->vmu);
    /* workers that started before the server was known may have missed a list */
    for (int i = 0; i < r->nworkers; i++)
        sl_server_post(srv, i, on_view_posted, &r->wk[i]);
    if (r->cfg.discovery == SL_DISCOVERY_STATIC)
        return 0;
    sl_members_config mc = {
        .kind = r->cfg.discovery,
        .advertise_addr = r->advertise,
        .dns_name = r->dns_name,
        .dns_server = r->dns_server,
        .dns_period_ms = r->cfg.dns_period_ns / 1000000,
        .etcd_endpoints = (const char *const *)r->etcd_eps,
        .n_etcd_endpoints = r->cfg.n_etcd_endpoints,
        .prefix = r->prefix,
        .lease_ttl_ms = r->cfg.peer_lease_ttl_ns / 1000000,
        .etcd_timeout_ms = r->cfg.etcd_timeout_ns / 1000000,
        .etcd_tls = r->cfg.etcd_tls,
        .k8s = &r->cfg.k8s,
        .gossip = r->cfg.gossip,
        .log = r->log,
        .on_change = on_members,
        .ud = r,
    };
    return sl_members_start(&mc, &r->members);
}

void sl_router_stop(sl_router *r)
{
    if (r && r->members) {
        sl_members_stop(r->members);
        r->members = NULL;
    }
}

/* ---- health and counters ------------------------------------------------------------------ */

void sl_router_health(sl_router *r, bool *healthy, int32_t *peer_count, char *why, size_t why_len)
{
    *healthy = true;
    *peer_count = 1;
    if (why_len)
        why[0] = '\0';
    if (!r->cluster)
        return;
    sl_view *v = latest_ref(r);
    if (!v)
        return;
    *peer_count = (int32_t)v->n;
    size_t off = 0;
    for (size_t i = 0; i < v->n; i++) {
        int err = atomic_load(&v->health[i].err);
        if (!err)
            continue;
        *healthy = false;
        if (off < why_len)
            off += (size_t)snprintf(why + off, why_len - off, "%serror from peer %s: %s",
                                    off ? "|" : "", sl_picker_addr(v->picker, i),
                                    strerror(-err));
    }
    if (v->self < 0 && v->n > 0) {
        *healthy = false;
        if (off < why_len)
            snprintf(why + off, why_len - off, "%sthis instance is not found in the peer list",
                     off ? "|" : "");
    }
    sl_view_unref(v);
}

size_t sl_router_peers(sl_router *r, sl_router_peer *out, size_t cap)
{
    sl_view *v = r->cluster ? latest_ref(r) : NULL;
    if (!v)
        return 0;
    size_t n = v->n;
    for (size_t i = 0; i < n && i < cap; i++) {
        snprintf(out[i].addr, sizeof out[i].addr, "%s", sl_picker_addr(v->picker, i));
        out[i].self = (long)i == v->self;
        out[i].err = atomic_load(&v->health[i].err);
        out[i].failed_at = atomic_load(&v->health[i].failed_at);
    }
    sl_view_unref(v);
    return n;
}

int sl_router_peer_count(const sl_router *r)
{
    if (!r->cluster)
        return 1;
    sl_view *v = latest_ref((sl_router *)r);
    int n = v ? (int)v->n : 1;
    sl_view_unref(v);
    return n ? n : 1;
}

void sl_router_stats_get(sl_router *r, sl_router_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!r->cluster)
        return;
    for (int i = 0; i < r->nworkers; i++) {
        wk *w = &r->wk[i];
        out->local += atomic_load(&w->c_local);
        out->forwarded += atomic_load(&w->c_forwarded);
        out->peer_calls += atomic_load(&w->c_calls);
        out->peer_errors += atomic_load(&w->c_errors);
        out->retries += atomic_load(&w->c_retries);
        out->fail_open += atomic_load(&w->c_fail_open);
        sl_globalsync_stats gs;
        sl_globalsync_stats_get(w->gsync, &gs);
        out->global_local += gs.local_answers;
        out->global_sends += gs.sends;
        out->broadcasts += gs.broadcasts;
        out->updates += gs.updates;
        out->views += atomic_load(&w->c_views);
    }
}

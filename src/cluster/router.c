/*
 * Router (see router.h and docs/cluster.md).
 *
 * Standalone (discovery none): every item is decided by the local engine, in request order, with
 * the engine's batch entry point when no item was pre-answered. Nothing else runs.
 *
 * Cluster. A "view" (cluster/view.c) is one peer list turned into a picker, shared read-only by
 * the workers and reference-counted; a new list makes a new view, published under a mutex and
 * posted to every worker loop, which swaps it in on its own thread - so each worker routes a whole
 * batch with one consistent view and no lock. Per worker and per remote peer there is a persistent HTTP/2
 * connection (peer.c) and a batcher; one timerfd per worker (libuv timers have millisecond
 * resolution, --batch-wait is 500 us) fires when the earliest batch is due.
 *
 * An item's journey:
 *   owner == self                 engine now; GLOBAL: noted for broadcast
 *   GLOBAL, owner elsewhere       answered from the local copy now (global.c), hits queued
                                   for the GLOBAL sync (globalsync.c)
 *   otherwise                     queued on the owner's batcher -> one GetPeerRateLimits call
 *                                 for up to batch-limit items -> answers copied back, "owner" set
 * A call that fails retries its items on the new owner if the view changed since they were sent
 * (at most MAX_ATTEMPTS times); otherwise each item gets an error - or, with --fail-open, a local
 * decision marked in its metadata. Deadlines are --batch-timeout: nothing waits forever.
 *
 * A submit's record ("pend") counts the items still out; the last answer runs `done`.
 *
 * The GLOBAL sync's sender lives in globalsync.c, one per worker; it asks this file for owners
 * and peers (the view and connections stay here) and reports its calls' outcomes here, so peer
 * health, the peer-call metrics and error counts cover every call.
 */
#include "cluster/router.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "auth/addr.h"
#include "cluster/batcher.h"
#include "cluster/global.h"
#include "cluster/globalsync.h"
#include "cluster/handoff.h"
#include "cluster/members.h"
#include "cluster/peer.h"
#include "cluster/peermetrics.h"
#include "cluster/picker.h"
#include "cluster/view.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

#define MAX_ATTEMPTS 3
#define META_OWNER "owner"
#define META_FAIL_OPEN "fail_open"

/* ---- per-worker state ----------------------------------------------------------------------- */

typedef struct wk wk;

typedef struct wpeer {
    char *addr;
    sl_peer *conn;
    sl_batcher q;
    bool urgent;                /* a NO_BATCHING item waits: send at the end of this submit */
    struct wpeer *next_urgent;
    size_t vidx;                /* index in the worker's sl_view */
} wpeer;

typedef struct pend {
    struct pend *next;
    wk *w;
    sl_batch *b;
    sl_router_done_cb done;
    void *ud;
    size_t outstanding;
} pend;

/* A forwarding call in flight. */
typedef struct pcall {
    wk *w;
    wpeer *wp;                  /* alive until every call on its connection ended */
    uint64_t version;
    size_t vidx;
    int64_t t0;
    size_t n;
    sl_batcher_item items[];
} pcall;

struct wk {
    sl_router *r;
    int id;
    uv_loop_t *loop;
    bool started, stopping;
    sl_view *v;
    sl_view *prev;                 /* the list before v: its members may still hand keys over */
    wpeer **peers;              /* by view index; NULL at self */
    size_t npeers;
    wpeer *urgent;
    int tfd;
    uv_poll_t tpoll;
    int64_t tfd_armed;
    sl_globalsync *gsync;
    pend *free_pends;
    size_t nfree_pends;
    sl_batch scratch;           /* decoding peers' answers */
    size_t *idx;
    size_t idxcap;
    sl_batcher_item *take;
    /* counters, written by this worker only */
    _Atomic uint64_t c_local, c_forwarded, c_calls, c_errors, c_retries, c_fail_open;
    _Atomic uint64_t c_views;
    char pad[64];
};

struct sl_router {
    sl_engine *engine;
    bool cluster;
    sl_router_config cfg;
    char *advertise;
    char source_ip[64];         /* advertise's IP when numeric and specified: peer calls come
                                   from it (peers judge PeersV1 callers by source IP) */
    char **peers;               /* static list copy */
    char *dns_name, *dns_server, *prefix;
    char **etcd_eps;
    sl_engine_config ecfg;
    bool has_ecfg;
    sl_logger *log;
    sl_global *global;
    wk *wk;
    int nworkers;
    sl_server *server;
    sl_members *members;
    pthread_mutex_t vmu;
    sl_view *latest;
    uint64_t next_version;
    int64_t batch_timeout_ms;
    size_t batch_limit;
    /* metrics (NULL when no registry) */
    sl_peermetrics pm;
    /* hand-off (cluster/handoff.h), on worker 0 */
    sl_handoff *handoff;
    _Atomic bool leaving, leave_done;
};

static const sl_globalsync_ops gsync_ops;

static inline void cinc(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

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
    if (!c->gub.max_msg)
        sl_gub_config_default(&c->gub);
    if (!c->dns_period_ns)
        c->dns_period_ns = 5000000000LL;
    r->log = c->log;
    /* an owner refuses more than 1000 requests in one call (Gubernator's limit) */
    r->batch_limit = c->batch_limit < SL_GUB_MAX_ITEMS ? c->batch_limit : SL_GUB_MAX_ITEMS;
    if (c->global_batch_limit > SL_GUB_MAX_ITEMS)
        c->global_batch_limit = SL_GUB_MAX_ITEMS;
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
            .gub = &c->gub,
            .expire = i == 0,
            .log = r->log,
            .m_local_answers = r->pm.global_local,
            .m_updates = r->pm.updates,
            .ops = &gsync_ops,
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

/* ---- small helpers -------------------------------------------------------------------------- */

static void set_owner(sl_batch *b, size_t i, const char *addr, bool copy)
{
    if (copy)
        sl_batch_meta_set(b, &b->resp_meta[i], META_OWNER, addr);
    else
        sl_batch_meta_add_ref(b, &b->resp_meta[i], META_OWNER, addr);
}

static pend *pend_get(wk *w, sl_batch *b, sl_router_done_cb done, void *ud)
{
    pend *p = w->free_pends;
    if (p) {
        w->free_pends = p->next;
        w->nfree_pends--;
    } else if (!(p = malloc(sizeof *p))) {
        return NULL;
    }
    p->next = NULL;
    p->w = w;
    p->b = b;
    p->done = done;
    p->ud = ud;
    p->outstanding = 1; /* the submit itself, until it has routed every item */
    return p;
}

static void pend_item_done(pend *p)
{
    if (--p->outstanding)
        return;
    wk *w = p->w;
    sl_router_done_cb done = p->done;
    void *ud = p->ud;
    sl_batch *b = p->b;
    if (w->nfree_pends < 256) {
        p->next = w->free_pends;
        w->free_pends = p;
        w->nfree_pends++;
    } else {
        free(p);
    }
    done(ud, b);
}

static const char *fmt_error(sl_batch *b, size_t i, const char *addr, const char *why)
{
    const sl_request *q = &b->reqs[i];
    char buf[512];
    snprintf(buf, sizeof buf, "while fetching rate limit '%.*s_%.*s' from peer %s: %s",
             (int)(q->name_len > 128 ? 128 : q->name_len), q->name,
             (int)(q->unique_key_len > 128 ? 128 : q->unique_key_len), q->unique_key, addr, why);
    const char *s = sl_batch_strndup(b, buf, strlen(buf));
    return s ? s : "error while fetching rate limit from peer";
}

static void note_peer(sl_view *v, size_t vidx, uint64_t version, int err)
{
    if (!v || v->version != version || vidx >= v->n)
        return;
    atomic_store(&v->health[vidx].err, err);
    if (err)
        atomic_store(&v->health[vidx].failed_at, sl_wall_ms());
}

/* ---- batch timer (timerfd: libuv timers tick in milliseconds) -------------------------------- */

static void flush_peer(wk *w, wpeer *wp);

static void arm_batch_timer(wk *w, int64_t deadline_ns)
{
    if (w->tfd < 0 || deadline_ns >= w->tfd_armed)
        return;
    w->tfd_armed = deadline_ns;
    if (deadline_ns < 1)
        deadline_ns = 1; /* an absolute time of zero would disarm it */
    struct itimerspec its = {0};
    its.it_value.tv_sec = deadline_ns / 1000000000;
    its.it_value.tv_nsec = deadline_ns % 1000000000;
    timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_batch_timer(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    wk *w = h->data;
    uint64_t ticks;
    while (read(w->tfd, &ticks, sizeof ticks) > 0) {
    }
    w->tfd_armed = INT64_MAX;
    int64_t now = sl_mono_ns();
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < w->npeers; i++) {
        wpeer *wp = w->peers[i];
        if (!wp)
            continue;
        if (sl_batcher_due(&wp->q, now))
            flush_peer(w, wp);
        int64_t d = sl_batcher_deadline(&wp->q);
        if (d < next)
            next = d;
    }
    if (next != INT64_MAX)
        arm_batch_timer(w, next);
}

/* ---- routing -------------------------------------------------------------------------------- */

static void decide_here(wk *w, sl_batch *b, size_t i, uint64_t h, int64_t now)
{
    sl_router *r = w->r;
    sl_request *q = &b->reqs[i];
    sl_engine_decide(r->engine, q, &b->resps[i], now);
    set_owner(b, i, r->advertise, false);
    cinc(&w->c_local, 1);
    if ((q->behavior & SL_GLOBAL) && q->hits != 0 && !b->resps[i].error && w->v && w->v->n > 1)
        sl_globalsync_decided(w->gsync, h, q, now);
}

static void route(wk *w, pend *p, size_t i, uint32_t attempts, int64_t now, int64_t mono)
{
    sl_router *r = w->r;
    sl_view *v = w->v;
    sl_batch *b = p->b;
    sl_request *q = &b->reqs[i];
    uint64_t h = sl_picker_key_hash(q->name, q->name_len, q->unique_key, q->unique_key_len);
    size_t o = sl_picker_owner(v->picker, h);
    if (o == SIZE_MAX || (long)o == v->self || !w->peers[o]) {
        decide_here(w, b, i, h, now);
        return;
    }
    const char *owner_addr = sl_picker_addr(v->picker, o);
    if (q->behavior & SL_GLOBAL) {
        const char *err = sl_request_validate(q, r->has_ecfg ? &r->ecfg : NULL);
        if (err) {
            memset(&b->resps[i], 0, sizeof b->resps[i]);
            b->resps[i].error = err;
            return;
        }
        int rc = sl_globalsync_hit(w->gsync, h, q, now, &b->resps[i]);
        if (rc == 0 || rc == -ENOMEM) {
            set_owner(b, i, owner_addr, true);
            return;
        }
        /* -ENOSPC: the table is full; forward it like any other request */
    }
    if (q->created_at == 0)
        q->created_at = now; /* the owner decides at the time the request arrived here */
    wpeer *wp = w->peers[o];
    sl_batcher_item it = {.owner = p, .idx = (uint32_t)i, .attempts = attempts};
    int rc = sl_batcher_add(&wp->q, &it, mono);
    if (rc < 0) {
        memset(&b->resps[i], 0, sizeof b->resps[i]);
        b->resps[i].error = "out of memory";
        return;
    }
    p->outstanding++;
    if (rc == 1) {
        flush_peer(w, wp);
    } else if (q->behavior & SL_NO_BATCHING) {
        if (!wp->urgent) {
            wp->urgent = true;
            wp->next_urgent = w->urgent;
            w->urgent = wp;
        }
    } else {
        arm_batch_timer(w, sl_batcher_deadline(&wp->q));
    }
}

static void flush_urgent(wk *w)
{
    while (w->urgent) {
        wpeer *wp = w->urgent;
        w->urgent = wp->next_urgent;
        wp->urgent = false;
        wp->next_urgent = NULL;
        flush_peer(w, wp);
    }
}

/* Item failed at its peer (or could not be sent): retry, fail open, or answer the error. */
static void item_failed(wk *w, const sl_batcher_item *it, uint64_t version, const char *addr,
                        const char *why)
{
    sl_router *r = w->r;
    pend *p = it->owner;
    sl_batch *b = p->b;
    size_t i = it->idx;
    int64_t now = sl_wall_ms();
    if (!w->stopping && w->v && w->v->version != version && it->attempts + 1 < MAX_ATTEMPTS) {
        /* the owner may have moved: route it again with the current list */
        cinc(&w->c_retries, 1);
        sl_metrics_counter_inc(r->pm.retries);
        route(w, p, i, it->attempts + 1, now, sl_mono_ns());
    } else if (r->cfg.fail_open && !w->stopping) {
        sl_request *q = &b->reqs[i];
        sl_engine_decide(r->engine, q, &b->resps[i], now);
        set_owner(b, i, addr, true);
        sl_batch_meta_set(b, &b->resp_meta[i], META_FAIL_OPEN, why);
        cinc(&w->c_fail_open, 1);
        sl_metrics_counter_inc(r->pm.fail_open);
    } else {
        memset(&b->resps[i], 0, sizeof b->resps[i]);
        b->resps[i].error = fmt_error(b, i, addr, why);
    }
    pend_item_done(p);
}

static void copy_answer(wk *w, const sl_batcher_item *it, size_t k, const char *addr,
                        int64_t now)
{
    pend *p = it->owner;
    sl_batch *b = p->b;
    size_t i = it->idx;
    const sl_response *src = &w->scratch.resps[k];
    sl_response *dst = &b->resps[i];
    *dst = *src;
    if (src->error) {
        dst->error = sl_batch_strndup(b, src->error, strlen(src->error));
        if (!dst->error)
            dst->error = "out of memory";
    } else if (dst->status == SL_OVER_LIMIT && dst->reset_time > now) {
        /* PeersV1 carries no retry_after: the reset time is the safe answer */
        dst->retry_after = dst->reset_time - now;
    }
    const sl_meta *m = &w->scratch.resp_meta[k];
    for (uint32_t j = 0; j < m->n; j++)
        sl_batch_meta_set(b, &b->resp_meta[i], m->kv[j].key, m->kv[j].val);
    set_owner(b, i, addr, true);
    pend_item_done(p);
}

static void observe_call(sl_router *r, int kind, bool ok, int64_t t0)
{
    sl_metrics_counter_inc(ok ? r->pm.calls_ok[kind] : r->pm.calls_err[kind]);
    sl_metrics_histogram_observe(r->pm.call_seconds, sl_mono_ns() - t0);
}

static void on_forward_done(void *ud, const sl_peer_result *res)
{
    pcall *c = ud;
    wk *w = c->w;
    sl_router *r = w->r;
    wpeer *wp = c->wp;
    int64_t now = sl_wall_ms();
    if (res->err == 0 && res->grpc_status == SL_GRPC_OK) {
        sl_gub_status st;
        sl_batch_reset(&w->scratch);
        int rc = sl_batch_alloc_items(&w->scratch, c->n);
        if (!rc)
            rc = sl_gub_decode_peer_resp_pb(&r->cfg.gub, res->msg, res->len, &w->scratch, NULL,
                                            c->n, &st);
        if (rc == 0) {
            observe_call(r, SL_PEERMETRICS_FORWARD, true, c->t0);
            note_peer(w->v, c->vidx, c->version, 0);
            for (size_t k = 0; k < c->n; k++)
                copy_answer(w, &c->items[k], k, wp->addr, now);
        } else {
            observe_call(r, SL_PEERMETRICS_FORWARD, false, c->t0);
            cinc(&w->c_errors, 1);
            note_peer(w->v, c->vidx, c->version, -EPROTO);
            const char *why = rc == -ENOMEM ? "out of memory" : "bad answer from peer";
            for (size_t k = 0; k < c->n; k++) {
                sl_batcher_item it = c->items[k];
                it.attempts = MAX_ATTEMPTS; /* the peer answered: do not send it again */
                item_failed(w, &it, c->version, wp->addr, why);
            }
        }
    } else {
        observe_call(r, SL_PEERMETRICS_FORWARD, false, c->t0);
        cinc(&w->c_errors, 1);
        note_peer(w->v, c->vidx, c->version, res->err ? res->err : -EIO);
        char why[300];
        if (res->err)
            snprintf(why, sizeof why, "%s", res->message);
        else
            snprintf(why, sizeof why, "%s: %s", sl_grpc_code_name(res->grpc_status)
                     ? sl_grpc_code_name(res->grpc_status) : "UNKNOWN", res->message);
        for (size_t k = 0; k < c->n; k++)
            item_failed(w, &c->items[k], c->version, wp->addr, why);
    }
    free(c);
    flush_urgent(w);
}

static int ensure_idx(wk *w, size_t n)
{
    if (w->idxcap < n) {
        size_t *p = realloc(w->idx, n * sizeof *p);
        if (!p)
            return -ENOMEM;
        w->idx = p;
        w->idxcap = n;
    }
    return 0;
}

/* Encode items[0..n) (runs of one pend each) as one framed GetPeerRateLimitsReq. */
static int encode_forward(wk *w, const sl_batcher_item *items, size_t n, sl_buf *out)
{
    if (ensure_idx(w, n))
        return -ENOMEM;
    size_t mark;
    int rc = sl_grpc_frame_begin(out, &mark);
    /* a repeated field's entries may be written in several pieces: concatenating the encodings
     * of each pend's subset is one valid message */
    for (size_t s = 0; !rc && s < n;) {
        pend *p = items[s].owner;
        size_t e = s;
        while (e < n && items[e].owner == p) {
            w->idx[e - s] = items[e].idx;
            e++;
        }
        rc = sl_gub_encode_peer_req_pb(p->b, w->idx, e - s, out);
        s = e;
    }
    if (!rc)
        rc = sl_grpc_frame_end(out, mark);
    return rc;
}

static void send_forward(wk *w, wpeer *wp, const sl_batcher_item *items, size_t n)
{
    sl_router *r = w->r;
    pcall *c = malloc(sizeof *c + n * sizeof *items);
    if (!c) {
        for (size_t k = 0; k < n; k++) {
            sl_batcher_item it = items[k];
            it.attempts = MAX_ATTEMPTS;
            item_failed(w, &it, w->v->version, wp->addr, "out of memory");
        }
        return;
    }
    memset(c, 0, sizeof *c);
    c->w = w;
    c->wp = wp;
    c->version = w->v->version;
    c->vidx = wp->vidx;
    c->n = n;
    c->t0 = sl_mono_ns();
    memcpy(c->items, items, n * sizeof *items);
    sl_buf out;
    sl_buf_init(&out, 0);
    int rc = encode_forward(w, items, n, &out);
    const char *why = "out of memory";
    if (!rc) {
        rc = sl_peer_call(wp->conn, SL_GUB_PATH_GET_PEER_RATE_LIMITS, &out, r->batch_timeout_ms,
                          on_forward_done, c);
        if (rc)
            why = rc == -ECONNREFUSED ? "connection refused"
                  : rc == -ETIMEDOUT  ? "connect timed out"
                                      : "peer unreachable";
    }
    sl_buf_free(&out);
    cinc(&w->c_forwarded, n);
    sl_metrics_counter_add(r->pm.items, n);
    cinc(&w->c_calls, 1);
    if (rc) {
        observe_call(r, SL_PEERMETRICS_FORWARD, false, c->t0);
        cinc(&w->c_errors, 1);
        note_peer(w->v, c->vidx, c->version, rc);
        for (size_t k = 0; k < n; k++)
            item_failed(w, &c->items[k], c->version, wp->addr, why);
        free(c);
    }
}

static void flush_peer(wk *w, wpeer *wp)
{
    while (sl_batcher_len(&wp->q)) {
        size_t n = sl_batcher_take(&wp->q, w->take, w->r->batch_limit);
        send_forward(w, wp, w->take, n);
    }
}

/* ---- what the GLOBAL sync asks of the view --------------------------------------------------- */

static void gs_peer(const wk *w, const wpeer *wp, sl_globalsync_peer *out)
{
    out->conn = wp->conn;
    out->addr = wp->addr;
    out->vidx = wp->vidx;
    out->version = w->v->version;
}

static bool gs_has_view(void *ud)
{
    const wk *w = ud;
    return w->v != NULL;
}

static bool gs_owner(void *ud, uint64_t h, sl_globalsync_peer *out)
{
    const wk *w = ud;
    sl_view *v = w->v;
    size_t o = sl_picker_owner(v->picker, h);
    if (o == SIZE_MAX || (long)o == v->self || !w->peers[o])
        return false;
    gs_peer(w, w->peers[o], out);
    return true;
}

static size_t gs_slots(void *ud)
{
    const wk *w = ud;
    return w->npeers;
}

static bool gs_peer_at(void *ud, size_t i, sl_globalsync_peer *out)
{
    const wk *w = ud;
    if (i >= w->npeers || !w->peers[i])
        return false;
    gs_peer(w, w->peers[i], out);
    return true;
}

static void gs_call_done(void *ud, int method, const sl_globalsync_peer *p, int64_t t0, int err)
{
    wk *w = ud;
    int kind = method == SL_GLOBALSYNC_HITS ? SL_PEERMETRICS_GHITS : SL_PEERMETRICS_BCAST;
    observe_call(w->r, kind, err == 0, t0);
    note_peer(w->v, p->vidx, p->version, err);
    if (err)
        cinc(&w->c_errors, 1);
}

static const sl_globalsync_ops gsync_ops = {
    .has_view = gs_has_view,
    .owner = gs_owner,
    .slots = gs_slots,
    .peer = gs_peer_at,
    .call_done = gs_call_done,
};

/* ---- views on workers ----------------------------------------------------------------------- */

static wpeer *wpeer_new(wk *w, const char *addr)
{
    sl_router *r = w->r;
    wpeer *wp = calloc(1, sizeof *wp);
    if (!wp)
        return NULL;
    wp->addr = strdup(addr);
    sl_peer_config pc = {
        .loop = w->loop,
        .addr = addr,
        .connect_timeout_ms = r->batch_timeout_ms < 1000 ? r->batch_timeout_ms : 1000,
        .max_msg = r->cfg.gub.max_msg,
        .tls = r->cfg.peer_tls,
        .source_ip = r->source_ip,
    };
    if (!wp->addr || sl_peer_new(&pc, &wp->conn)) {
        free(wp->addr);
        free(wp);
        return NULL;
    }
    sl_batcher_init(&wp->q, r->batch_limit, r->cfg.batch_wait_ns);
    return wp;
}

/* Retire a peer that left the list: its queued items go to their new owners, its calls in
 * flight fail (and retry on the new view), then it is freed. */
static void wpeer_retire(wk *w, wpeer *wp)
{
    sl_batcher_item it;
    int64_t now = sl_wall_ms();
    while (sl_batcher_len(&wp->q)) {
        sl_batcher_take(&wp->q, &it, 1);
        pend *p = it.owner;
        if (w->stopping) {
            sl_batch *b = p->b;
            memset(&b->resps[it.idx], 0, sizeof b->resps[it.idx]);
            b->resps[it.idx].error = "shutting down";
        } else {
            route(w, p, it.idx, it.attempts + 1, now, sl_mono_ns());
        }
        pend_item_done(p);
    }
    if (wp->urgent) {
        for (wpeer **pp = &w->urgent; *pp; pp = &(*pp)->next_urgent)
            if (*pp == wp) {
                *pp = wp->next_urgent;
                break;
            }
    }
    sl_peer_close(wp->conn); /* runs the failed calls' callbacks now */
    sl_batcher_free(&wp->q);
    free(wp->addr);
    free(wp);
}

static void apply_view(wk *w, sl_view *nv)
{
    sl_router *r = w->r;
    sl_view *old = w->v;
    wpeer **oldp = w->peers;
    size_t oldn = w->npeers;
    wpeer **np = calloc(nv->n ? nv->n : 1, sizeof *np);
    if (!np) {
        sl_view_unref(nv);
        return; /* keep the old list; the next change tries again */
    }
    for (size_t i = 0; i < nv->n; i++) {
        if ((long)i == nv->self)
            continue;
        const char *a = sl_picker_addr(nv->picker, i);
        for (size_t k = 0; k < oldn; k++)
            if (oldp[k] && strcmp(oldp[k]->addr, a) == 0) {
                np[i] = oldp[k];
                oldp[k] = NULL;
                break;
            }
        if (!np[i] && !(np[i] = wpeer_new(w, a)))
            sl_log_error(r->log, "cannot create a client for peer %s", a);
        if (np[i])
            np[i]->vidx = i;
    }
    w->v = nv;
    w->peers = np;
    w->npeers = nv->n;
    cinc(&w->c_views, 1);
    for (size_t k = 0; k < oldn; k++)
        if (oldp[k])
            wpeer_retire(w, oldp[k]);
    free(oldp);
    sl_view_unref(w->prev);
    w->prev = old; /* a node that just left may still push its keys here (TransferKeys) */
    flush_urgent(w);
    /* Hand-off: keys held here that another node owns now go to it (a leaving node: all keys). */
    if (w->id == 0 && r->handoff && old && nv->n > 0 &&
        (nv->self >= 0 || atomic_load(&r->leaving))) {
        sl_view_ref(nv);
        sl_handoff_begin(r->handoff, nv->picker, nv->self, nv);
    }
}

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
    apply_view(w, v);
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

static void on_members(void *ud, const char *const *addrs, size_t n)
{
    sl_router_set_peers(ud, addrs, n);
}

/* ---- hand-off glue (worker 0) ----------------------------------------------------------------- */

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
    int rc = sl_peer_call(w->peers[peer]->conn, SL_GUB_PATH_TRANSFER_KEYS, framed,
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

int64_t sl_router_transfer_keys(sl_router *r, const uint8_t *records, size_t len, int64_t now_ms)
{
    sl_alg_config alg = {0};
    if (r->has_ecfg) {
        alg.max_log_limit = r->ecfg.max_log_limit;
        alg.max_sub_windows = r->ecfg.max_sub_windows;
        alg.max_concurrency_limit = r->ecfg.max_concurrency_limit;
    }
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
    if (!r->cluster || worker < 0 || worker >= r->nworkers)
        return;
    wk *w = &r->wk[worker];
    w->loop = loop;
    sl_batch_init(&w->scratch, 0);
    w->take = calloc(r->batch_limit, sizeof *w->take);
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->tfd >= 0) {
        uv_poll_init(loop, &w->tpoll, w->tfd);
        w->tpoll.data = w;
        uv_poll_start(&w->tpoll, UV_READABLE, on_batch_timer);
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
        apply_view(w, v);
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
            wpeer_retire(w, w->peers[i]);
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

/* ---- API ------------------------------------------------------------------------------------ */

static void decide_local(sl_router *r, sl_batch *b, int64_t now_ms)
{
    if (b->n_answered == 0) {
        sl_engine_decide_batch(r->engine, b->reqs, b->resps, b->n, now_ms);
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        if (!b->answered[i])
            sl_engine_decide(r->engine, &b->reqs[i], &b->resps[i], now_ms);
}

void sl_router_submit(sl_router *r, int worker, sl_batch *b, int64_t now_ms, sl_router_done_cb done,
                      void *ud)
{
    if (!r->cluster) {
        decide_local(r, b, now_ms);
        done(ud, b);
        return;
    }
    wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
    sl_view *v = w->v;
    if (!v || v->n == 0 || (v->n == 1 && v->self == 0) || w->stopping) {
        /* alone: the standalone path, plus the owner's name */
        decide_local(r, b, now_ms);
        for (size_t i = 0; i < b->n; i++)
            if (!b->answered[i])
                set_owner(b, i, r->advertise, false);
        cinc(&w->c_local, b->n - b->n_answered);
        done(ud, b);
        return;
    }
    pend *p = pend_get(w, b, done, ud);
    if (!p) {
        for (size_t i = 0; i < b->n; i++)
            if (!b->answered[i]) {
                memset(&b->resps[i], 0, sizeof b->resps[i]);
                b->resps[i].error = "out of memory";
            }
        done(ud, b);
        return;
    }
    int64_t mono = sl_mono_ns(); /* one clock read per call, not per item */
    for (size_t i = 0; i < b->n; i++)
        if (!b->answered[i])
            route(w, p, i, 0, now_ms, mono);
    flush_urgent(w);
    pend_item_done(p);
}

void sl_router_peer_rate_limits(sl_router *r, int worker, sl_batch *b, int64_t now_ms,
                                sl_router_done_cb done, void *ud)
{
    decide_local(r, b, now_ms);
    if (r->cluster) {
        wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
        cinc(&w->c_local, b->n - b->n_answered);
        sl_globalsync_peer_batch(w->gsync, b, now_ms);
    }
    done(ud, b);
}

void sl_router_update_globals(sl_router *r, int worker, const sl_gub_global *g, size_t n,
                              int64_t now_ms)
{
    if (!r->cluster)
        return;
    wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
    sl_globalsync_update(w->gsync, g, n, now_ms);
}

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

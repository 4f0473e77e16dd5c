/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The observer role (see observer.h): the overlay's member table as a gRPC server stream, and
 * the etcd registration that lets limiters and proxies find this observer.
 */
#include "levee/observer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gossip/gossipseeds.h"
#include "gossip/swimmeta.h"
#include "wire/topowire.h"

#define MAX_MEMBERS 1024          /* the table we stream; past it new names are not shown */
#define DEFAULT_JOURNAL 1024

typedef struct watcher watcher;
typedef struct wk wk;

struct watcher {
    watcher *next, *prev;
    wk *w;
    sl_exchange *ex;
    uint64_t sent;   /* version the client's view is at */
    bool primed;     /* the full view went out */
};

struct wk {
    sl_observer *o;
    int idx;
    uv_timer_t hb;
    bool started;
    watcher *head;
    _Atomic bool posted;
};

typedef struct jentry {
    uint64_t version;
    sl_topowire_member m;
} jentry;

struct sl_observer {
    sl_observer_config cfg;
    sl_etcd_config etcd_cfg;     /* cfg.etcd points here */
    sl_server *srv;
    wk *wks;
    pthread_mutex_t mu;          /* table, journal, version */
    uint64_t version;
    sl_topowire_member *table;
    size_t n;
    jentry *journal;             /* ring: the last `jn` changes end at version */
    size_t jcap, jn, jhead;      /* jhead: index of the next slot */
    bool subscribed;
    _Atomic bool stopping;
    _Atomic int64_t watchers;
    sl_metrics_counter *m_events, *m_slow;
    sl_metrics_gauge *m_watchers, *m_version;
    /* registration */
    sl_etcd *etcd;
    char *key, *value;
    pthread_t reg_thread;
    bool reg_running;
    pthread_mutex_t reg_mu;
    pthread_cond_t reg_cv;
    bool reg_stop;
};

/* ---- the table (gossip thread) ---- */

static void wake_workers(sl_observer *o);

static void on_member(void *ud, const sl_swim_member *sm, int old_status)
{
    (void)old_status;
    sl_observer *o = ud;
    sl_topowire_member m;
    memset(&m, 0, sizeof m);
    snprintf(m.mb.name, sizeof m.mb.name, "%s", sm->name);
    snprintf(m.gossip, sizeof m.gossip, "%s", sm->addr);
    sl_swimmeta_get(sm->meta, sm->meta_len, "service", m.mb.service, sizeof m.mb.service);
    sl_swimmeta_get(sm->meta, sm->meta_len, "role", m.mb.role, sizeof m.mb.role);
    m.mb.status = sm->status;
    m.incarnation = sm->incarnation;
    pthread_mutex_lock(&o->mu);
    size_t i = 0;
    while (i < o->n && strcmp(o->table[i].mb.name, m.mb.name))
        i++;
    if (i == o->n) {
        if (o->n == MAX_MEMBERS) {
            pthread_mutex_unlock(&o->mu);
            return;
        }
        o->n++;
    } else if (!memcmp(&o->table[i], &m, sizeof m)) {
        pthread_mutex_unlock(&o->mu);
        return;
    }
    o->table[i] = m;
    o->version++;
    o->journal[o->jhead] = (jentry){o->version, m};
    o->jhead = (o->jhead + 1) % o->jcap;
    if (o->jn < o->jcap)
        o->jn++;
    if (o->m_version)
        sl_metrics_gauge_set(o->m_version, (double)o->version);
    pthread_mutex_unlock(&o->mu);
    wake_workers(o);
}

/* ---- watchers (worker threads) ---- */

static const sl_http_header grpc_head[] = {SL_HTTP_HEADER("content-type", "application/grpc")};

static void end_watcher(watcher *x, const char *code, const char *msg)
{
    wk *w = x->w;
    if (x->prev)
        x->prev->next = x->next;
    else
        w->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    atomic_fetch_sub(&w->o->watchers, 1);
    if (w->o->m_watchers)
        sl_metrics_gauge_add(w->o->m_watchers, -1);
    sl_http_header t[2] = {{"grpc-status", 11, code, strlen(code)},
                           {"grpc-message", 12, msg, strlen(msg)}};
    sl_exchange_set_cancel(x->ex, NULL, NULL);
    sl_exchange_stream_close(x->ex, t, 2);
    free(x);
}

/* Encode what x has not seen into out (under the mutex): the full view, or the journal's tail. */
static int catch_up(sl_observer *o, watcher *x, sl_buf *out, size_t *events)
{
    int rc = 0;
    pthread_mutex_lock(&o->mu);
    uint64_t oldest = o->version - o->jn + 1;
    if (x->primed && x->sent == o->version) {
        /* up to date */
    } else if (!x->primed || x->sent + 1 < oldest) {
        rc = sl_topowire_encode(out, o->version, true, o->table, o->n);
        *events += 1;
    } else {
        for (uint64_t v = x->sent + 1; v <= o->version && !rc; v++) {
            const jentry *e = &o->journal[(o->jhead + o->jcap - (o->version - v + 1)) % o->jcap];
            rc = sl_topowire_encode(out, e->version, false, &e->m, 1);
            *events += 1;
        }
    }
    if (!rc) {
        x->sent = o->version;
        x->primed = true;
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

/* Push bytes to x; false when x was closed (slow consumer, gone). */
static bool push(watcher *x, const sl_buf *b)
{
    sl_observer *o = x->w->o;
    int rc = sl_exchange_stream_push(x->ex, b->data, b->len, o->cfg.max_queue_bytes);
    if (rc == -ENOBUFS) {
        if (o->m_slow)
            sl_metrics_counter_inc(o->m_slow);
        end_watcher(x, "8", "slow consumer");
        return false;
    }
    if (rc) {
        end_watcher(x, "14", "stream failed");
        return false;
    }
    return true;
}

static void flush_watcher(watcher *x, bool heartbeat)
{
    sl_observer *o = x->w->o;
    sl_buf b;
    sl_buf_init(&b, 0);
    size_t events = 0;
    int rc = catch_up(o, x, &b, &events);
    if (!rc && !b.len && heartbeat)
        rc = sl_topowire_encode(&b, x->sent, false, NULL, 0);
    if (rc)
        end_watcher(x, "13", "encoding failed");
    else if (b.len && push(x, &b) && events && o->m_events)
        sl_metrics_counter_add(o->m_events, events);
    sl_buf_free(&b);
}

static void flush_all(wk *w, bool heartbeat)
{
    for (watcher *x = w->head, *next; x; x = next) {
        next = x->next;
        flush_watcher(x, heartbeat);
    }
}

static void on_wake(void *ud)
{
    wk *w = ud;
    atomic_store(&w->posted, false);
    flush_all(w, false);
}

static void wake_workers(sl_observer *o)
{
    if (!o->srv)
        return;
    for (int i = 0; i < o->cfg.workers; i++) {
        wk *w = &o->wks[i];
        if (!atomic_exchange(&w->posted, true) && sl_server_post(o->srv, i, on_wake, w))
            atomic_store(&w->posted, false);
    }
}

static void on_heartbeat(uv_timer_t *t)
{
    flush_all(t->data, true);
}

static void on_cancel(void *ud, sl_exchange *ex)
{
    (void)ex;
    end_watcher(ud, "1", "cancelled");
}

void sl_observer_handle(void *ud, sl_exchange *ex)
{
    sl_observer *o = ud;
    const sl_http_request *rq = sl_exchange_request(ex);
    if (!sl_http_path_is(rq, SL_OBSERVER_WATCH_PATH)) {
        o->cfg.fallback(o->cfg.fallback_ud, ex);
        return;
    }
    if (!rq->grpc) {
        sl_exchange_respond_simple(ex, 415, "text/plain", "gRPC over HTTP/2 only\n", 22);
        return;
    }
    int wi = sl_exchange_worker(ex);
    if (atomic_load(&o->stopping) || wi < 0 || wi >= o->cfg.workers) {
        sl_exchange_respond_grpc_status(ex, 14, "observer stopping");
        return;
    }
    if (atomic_fetch_add(&o->watchers, 1) >= (int64_t)o->cfg.max_watchers) {
        atomic_fetch_sub(&o->watchers, 1);
        sl_exchange_respond_grpc_status(ex, 8, "too many watchers");
        return;
    }
    watcher *x = calloc(1, sizeof *x);
    sl_http_response head = {.status = 200, .headers = grpc_head, .nheaders = 1};
    int rc = x ? sl_exchange_stream_open(ex, &head) : -ENOMEM;
    if (rc) {
        atomic_fetch_sub(&o->watchers, 1);
        free(x);
        if (rc != -ENOTCONN)
            sl_exchange_respond_grpc_status(ex, rc == -ENOTSUP ? 12 : 13, "cannot stream");
        else
            sl_exchange_respond_grpc_status(ex, 1, "gone"); /* a no-op that releases */
        return;
    }
    if (o->m_watchers)
        sl_metrics_gauge_add(o->m_watchers, 1);
    wk *w = &o->wks[wi];
    x->w = w;
    x->ex = ex;
    x->next = w->head;
    if (w->head)
        w->head->prev = x;
    w->head = x;
    sl_exchange_set_cancel(ex, on_cancel, x);
    flush_watcher(x, false);
}

static void close_all(void *ud)
{
    wk *w = ud;
    while (w->head)
        end_watcher(w->head, "14", "observer stopping");
}

void sl_observer_worker_start(sl_observer *o, int worker, uv_loop_t *loop)
{
    if (!o || worker < 0 || worker >= o->cfg.workers)
        return;
    wk *w = &o->wks[worker];
    uv_timer_init(loop, &w->hb);
    w->hb.data = w;
    uv_timer_start(&w->hb, on_heartbeat, (uint64_t)o->cfg.heartbeat_ms,
                   (uint64_t)o->cfg.heartbeat_ms);
    w->started = true;
}

void sl_observer_worker_stop(sl_observer *o, int worker)
{
    if (!o || worker < 0 || worker >= o->cfg.workers)
        return;
    wk *w = &o->wks[worker];
    close_all(w);
    if (w->started) {
        uv_timer_stop(&w->hb);
        uv_close((uv_handle_t *)&w->hb, NULL);
        w->started = false;
    }
}

/* ---- registration in etcd (its own thread: etcd calls block) ---- */

int sl_observer_registration(const char *gossip_addr, const char *service_addr, char *out,
                             size_t outlen)
{
    for (const char *p = gossip_addr; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            return -EINVAL;
    for (const char *p = service_addr; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            return -EINVAL;
    int n = snprintf(out, outlen, "{\"gossip\": \"%s\", \"service\": \"%s\"}", gossip_addr,
                     service_addr);
    return n < 0 || (size_t)n >= outlen ? -ENOSPC : n;
}

/* Sleep ms or until stopped: true when stopped. */
static bool reg_wait(sl_observer *o, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&o->reg_mu);
    while (!o->reg_stop && pthread_cond_timedwait(&o->reg_cv, &o->reg_mu, &ts) == 0)
        ;
    bool stop = o->reg_stop;
    pthread_mutex_unlock(&o->reg_mu);
    return stop;
}

static int reg_put(sl_observer *o, int64_t *lease)
{
    int64_t id = 0, ttl = 0;
    int rc = sl_etcd_lease_grant(o->etcd, o->cfg.lease_ttl_s, 0, &id, &ttl);
    if (rc)
        return rc;
    rc = sl_etcd_put(o->etcd, o->key, strlen(o->key), o->value, strlen(o->value), id, NULL);
    if (rc) {
        sl_etcd_lease_revoke(o->etcd, id);
        return rc;
    }
    *lease = id;
    if (o->cfg.log)
        sl_log_info(o->cfg.log, "observer: registered key=%s lease=%lld ttl=%llds", o->key,
                    (long long)id, (long long)ttl);
    return 0;
}

/* A registration the operator wrote (no lease: Levee's way, read by sl_observer_addrs_from_etcd)
 * stays theirs: we neither replace nor delete it. */
static bool operator_managed(sl_observer *o)
{
    sl_etcd_kvs kvs = {0};
    bool managed = !sl_etcd_range(o->etcd, o->key, strlen(o->key), false, 1, false, &kvs) &&
                   kvs.n == 1 && kvs.kvs[0].lease == 0;
    sl_etcd_kvs_free(&kvs);
    return managed;
}

static void *reg_thread(void *arg)
{
    sl_observer *o = arg;
    int64_t lease = 0, every = o->cfg.lease_ttl_s * 1000 / 3;
    if (operator_managed(o)) {
        if (o->cfg.log)
            sl_log_info(o->cfg.log, "observer: %s is registered in etcd without a lease; "
                        "leaving it as it is", o->key);
        return NULL;
    }
    do {
        int rc;
        if (!lease) {
            rc = reg_put(o, &lease);
        } else {
            int64_t ttl;
            rc = sl_etcd_lease_keepalive(o->etcd, lease, &ttl);
            if (rc == -ENOENT) { /* etcd lost the lease (away longer than the TTL): again */
                lease = 0;
                rc = reg_put(o, &lease);
            }
        }
        if (rc && o->cfg.log)
            sl_log_warn(o->cfg.log, "observer: registration in etcd failed: %s", strerror(-rc));
    } while (!reg_wait(o, lease ? every : 500));
    if (lease)
        sl_etcd_lease_revoke(o->etcd, lease); /* the key goes with it */
    return NULL;
}

static int start_registration(sl_observer *o)
{
    const sl_observer_config *c = &o->cfg;
    if (!c->etcd || !c->name || !c->name[0])
        return 0;
    char val[512];
    int n = sl_observer_registration(c->gossip_addr, c->service_addr, val, sizeof val);
    if (n < 0)
        return n;
    size_t klen = strlen(c->prefix) + strlen(c->name) + 16;
    o->key = malloc(klen);
    o->value = strdup(val);
    if (!o->key || !o->value)
        return -ENOMEM;
    snprintf(o->key, klen, "%s/observer/%s", c->prefix, c->name); /* as gossip/gossipseeds reads */
    int rc = sl_etcd_new(c->etcd, &o->etcd);
    if (rc)
        return rc;
    if ((rc = -pthread_create(&o->reg_thread, NULL, reg_thread, o)))
        return rc;
    o->reg_running = true;
    return 0;
}

/* ---- life ---- */

int sl_observer_new(const sl_observer_config *cfg, sl_observer **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg->gossip || cfg->workers < 1 || !cfg->fallback || cfg->heartbeat_ms < 1) {
        snprintf(err, errlen, "observer: needs the gossip overlay (--gossip-addr)");
        return -EINVAL;
    }
    sl_observer *o = calloc(1, sizeof *o);
    if (!o)
        return -ENOMEM;
    o->cfg = *cfg;
    if (cfg->etcd) {
        o->etcd_cfg = *cfg->etcd;
        o->cfg.etcd = &o->etcd_cfg;
    }
    o->jcap = cfg->journal ? cfg->journal : DEFAULT_JOURNAL;
    o->wks = calloc((size_t)cfg->workers, sizeof *o->wks);
    o->table = calloc(MAX_MEMBERS, sizeof *o->table);
    o->journal = calloc(o->jcap, sizeof *o->journal);
    pthread_mutex_init(&o->mu, NULL);
    pthread_mutex_init(&o->reg_mu, NULL);
    pthread_cond_init(&o->reg_cv, NULL);
    if (!o->wks || !o->table || !o->journal) {
        sl_observer_free(o);
        return -ENOMEM;
    }
    for (int i = 0; i < cfg->workers; i++)
        o->wks[i] = (wk){.o = o, .idx = i};
    if (cfg->metrics &&
        (sl_metrics_gauge_new(cfg->metrics, "sluice_observer_watchers",
                              "Topology streams open", &o->m_watchers) ||
         sl_metrics_counter_new(cfg->metrics, "sluice_observer_events_total",
                                "Topology updates sent to watchers (full views and changes)",
                                &o->m_events) ||
         sl_metrics_counter_new(cfg->metrics, "sluice_observer_slow_closed_total",
                                "Watchers closed for holding too many unsent bytes",
                                &o->m_slow) ||
         sl_metrics_gauge_new(cfg->metrics, "sluice_observer_version",
                              "Version of the topology the observer streams", &o->m_version))) {
        snprintf(err, errlen, "observer: metrics");
        sl_observer_free(o);
        return -ENOMEM;
    }
    *out = o;
    return 0;
}

int sl_observer_start(sl_observer *o, sl_server *srv)
{
    o->srv = srv;
    int rc = sl_gossipnode_subscribe(o->cfg.gossip, on_member, o);
    if (rc)
        return rc;
    o->subscribed = true;
    wake_workers(o);
    return start_registration(o);
}

void sl_observer_stop(sl_observer *o)
{
    if (!o || atomic_exchange(&o->stopping, true))
        return;
    if (o->subscribed) {
        sl_gossipnode_unsubscribe(o->cfg.gossip, on_member, o);
        o->subscribed = false;
    }
    for (int i = 0; o->srv && i < o->cfg.workers; i++)
        sl_server_post(o->srv, i, close_all, &o->wks[i]);
    if (o->reg_running) {
        pthread_mutex_lock(&o->reg_mu);
        o->reg_stop = true;
        pthread_cond_signal(&o->reg_cv);
        pthread_mutex_unlock(&o->reg_mu);
        pthread_join(o->reg_thread, NULL);
        o->reg_running = false;
    }
}

void sl_observer_free(sl_observer *o)
{
    if (!o)
        return;
    sl_observer_stop(o);
    sl_etcd_free(o->etcd);
    free(o->key);
    free(o->value);
    free(o->wks);
    free(o->table);
    free(o->journal);
    pthread_mutex_destroy(&o->mu);
    pthread_mutex_destroy(&o->reg_mu);
    pthread_cond_destroy(&o->reg_cv);
    free(o);
}

int sl_observer_new_options(const sl_options *o, sl_gossipnode *g, sl_metrics *m, sl_logger *log,
                            sl_http_handler fallback, void *fallback_ud, sl_observer **out,
                            char *err, size_t errlen)
{
    sl_etcd_config ec;
    sl_gossipseeds_etcd_config(o, &ec);
    sl_observer_config c = {
        .gossip = g,
        .workers = (int)o->workers,
        .heartbeat_ms = o->observer_heartbeat_ns / 1000000,
        .max_watchers = (uint32_t)o->observer_max_watchers,
        .max_queue_bytes = (size_t)o->observer_max_queue_bytes,
        .metrics = m,
        .log = log,
        .fallback = fallback,
        .fallback_ud = fallback_ud,
        .etcd = o->storage_addrs.n && o->observer_name[0] ? &ec : NULL,
        .prefix = o->storage_prefix,
        .name = o->observer_name,
        .gossip_addr = o->gossip_addr,
        .service_addr = o->advertise_addr,
        .lease_ttl_s = o->observer_lease_ttl_ns / 1000000000,
    };
    char val[512];
    if (c.etcd && sl_observer_registration(c.gossip_addr, c.service_addr, val, sizeof val) < 0) {
        snprintf(err, errlen, "observer: gossip-addr/advertise-addr cannot be registered");
        return -EINVAL;
    }
    return sl_observer_new(&c, out, err, errlen);
}

/* Read <prefix>/observer/<name>'s member `field` into out. */
static int read_registration(const sl_options *o, const char *field, char *out, size_t outlen,
                             bool *found)
{
    sl_etcd_config ec;
    sl_gossipseeds_etcd_config(o, &ec);
    char key[512];
    int kl = snprintf(key, sizeof key, "%s/observer/%s", o->storage_prefix, o->observer_name);
    if (kl < 0 || (size_t)kl >= sizeof key)
        return -EINVAL;
    sl_etcd *e;
    int rc = sl_etcd_new(&ec, &e);
    if (rc)
        return rc;
    sl_etcd_kvs kvs = {0};
    rc = sl_etcd_range(e, key, (size_t)kl, false, 1, false, &kvs);
    sl_etcd_free(e);
    *found = !rc && kvs.n == 1;
    if (*found)
        rc = sl_gossipseeds_parse_field(kvs.kvs[0].value, kvs.kvs[0].value_len, field, out,
                                        outlen);
    sl_etcd_kvs_free(&kvs);
    return rc;
}

static int set_str(char **dst, const char *v)
{
    char *c = strdup(v);
    if (!c)
        return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

int sl_observer_addrs_from_etcd(sl_options *o, char *err, size_t errlen)
{
    if (o->role != SL_ROLE_OBSERVER || o->gossip_addr[0])
        return 0;
    if (!o->storage_addrs.n || !o->observer_name[0]) {
        snprintf(err, errlen, "role observer: needs gossip-addr, or observer-name and "
                 "storage-addrs with its registration in etcd");
        return -EINVAL;
    }
    char gossip[SL_TOPOWIRE_MAX_ADDR], service[SL_TOPOWIRE_MAX_ADDR];
    bool found = false;
    int rc = read_registration(o, "gossip", gossip, sizeof gossip, &found);
    if (!rc && found)
        rc = read_registration(o, "service", service, sizeof service, &found);
    if (rc || !found) {
        snprintf(err, errlen, "role observer: no gossip-addr, and %s/observer/%s in etcd %s",
                 o->storage_prefix, o->observer_name,
                 !found ? "is missing" : "is not {\"gossip\": ip:port, \"service\": ip:port}");
        return rc ? rc : -ENOENT;
    }
    /* the service address is where proxies reach us: listen there unless told otherwise */
    bool default_listen = !strcmp(o->listen_addr, SL_OBSERVER_DEFAULT_LISTEN);
    if ((rc = set_str(&o->gossip_addr, gossip)) || (rc = set_str(&o->advertise_addr, service)) ||
        (default_listen && (rc = set_str(&o->listen_addr, service))))
        snprintf(err, errlen, "out of memory");
    return rc;
}

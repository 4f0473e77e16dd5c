/*
 * A sluice node (include/sluice/node.h): builds the parts from sl_options and owns their lives.
 *
 *   options -> logger, metrics, engine, router, service, server (worker loops)
 *
 * Worker 0's loop also runs the engine's active expiry (bounded work per tick) and, every
 * gc-period, a collection of information-free keys idle for gc-collect-free (and of any key idle
 * for gc-collect, when set): one pass over the store in slices of gc-max-work slots, GC_SLICE_MS
 * apart, so that no slice holds the loop long. Once a second it logs evictions of keys at their
 * limit, if any (one line with their count). What SIGHUP reads again (TLS files, client
 * identities, a static peer list) is node/reload.c; sl_node_reload here adds the admin token,
 * the switchboard and the quota file. The node's own metrics (keys held, decisions,
 * connections) are collectors that read the engine's and the server's counters at render time
 * (node/collectors.c), so the hot paths keep no extra counters for them. With --graphite-addr a
 * bridge thread pushes the same registry to Graphite (node/graphite.h).
 */
#include "sluice/node.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/addr.h"
#include "auth/idents.h"
#include "node/alive.h"
#include "protect/protect.h"
#include "cluster/gossipnode.h"
#include "cluster/router.h"
#include "config/config.h"
#include "config/killswitch.h"
#include "config/quotasrc.h"
#include "config/watched.h"
#include "core/log.h"
#include "core/metrics.h"
#include "net/server.h"
#include "node/adminsrv.h"
#include "node/collectors.h"
#include "node/graphite.h"
#include "node/reload.h"
#include "node/statedir.h"
#include "node/observer.h"
#include "proxy/feed.h"
#include "proxy/proxy.h"
#include "proxy/topology.h"
#include "core/snapshot.h"
#include "node/service.h"
#include "sluice/clock.h"

/* How often worker 0 runs active expiry; each run examines at most gc-max-work slots. */
#define EXPIRY_TICK_MS 100
/* Between two slices of an idle-key collection: the loop serves requests in between. */
#define GC_SLICE_MS 1

struct sl_node {
    sl_collectors collectors; /* the node's own metrics' arguments (node/collectors.h) */
    sl_options opts;
    sl_logger log;
    sl_metrics *metrics;
    sl_engine *engine;
    sl_router *router;
    sl_rstore *rstore;     /* --store redis, else NULL */
    sl_service *service;
    sl_server *server;
    sl_watched_source *storage; /* the one etcd watch feeding quotas and switches, or NULL */
    sl_quotasrc *quotas;   /* Levee quotas (file or etcd); NULL when neither is configured */
    sl_tls_slot *peer_tls; /* client context of peer calls over TLS (reloaded on SIGHUP), or NULL */
    sl_killswitch *switches; /* kill switches, shadow mode, concurrency and fleet settings */
    sl_protect *protect;     /* leases, shedders, switches on the request path */
    sl_rlssrc *rls;          /* --rls-config-dir for Envoy's ShouldRateLimit; NULL without */
    uv_timer_t expiry_timer;
    bool expiry_started;
    int64_t gc_next_ms;    /* monotonic ms: when the next idle-key collection starts */
    bool gc_running;       /* a collection pass is in progress (worker 0 only) */
    int64_t limited_check_ms; /* monotonic ms: next look at evictions of limited keys */
    uint64_t limited_logged;  /* evictions of limited keys already logged */
    sl_graphite *graphite; /* NULL without --graphite-addr */
    sl_gossipnode *gossip; /* the SWIM overlay; NULL without --gossip-addr */
    sl_adminsrv *admin;    /* the admin listener (--admin-addr); NULL with --admin-api=false */
    sl_adminsrv *metrics_srv; /* the read-only /metrics listener; NULL without --metrics-addr */
    sl_idents *idents;     /* client identities; NULL without --client-tokens-file */
    sl_statedir_timer snapshot_timer; /* --snapshot-period writer (node/statedir.h) */
    bool snapshot_written;            /* the shutdown snapshot is done (sl_node_wait) */
    unsigned snapshot_flags;          /* SL_SNAPSHOT_CLUSTER_KEYS when clustered */
    sl_topology topology;             /* role proxy: the limiters (--proxy-limiters) */
    sl_proxy *proxy;                  /* role proxy: relays /attempt; NULL in other roles */
    sl_feed *feed;                    /* role proxy without --proxy-limiters: the observer feed */
    sl_observer *observer;            /* role observer: the topology stream */
    _Atomic bool failed;              /* a role gave up (no observer answers): exit non-zero */
    int argc;                         /* the options, kept to read them again on reload */
    char **argv;
    sl_alive *alive; /* worker-loop liveness for a watchdog; made by the first sl_node_alive */
};

/* ---- Graphite ------------------------------------------------------------------------------ */

/* --graphite-addr: start the bridge (nothing with an empty address) and its two metrics. */
static int start_graphite(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    const char *tags[] = {"instance", o->instance_id, NULL};
    sl_graphite_config gc = {
        .addr = o->graphite_addr,
        .period_ms = o->graphite_period_ns / 1000000,
        .prefix = o->graphite_prefix,
        .tags = tags,
        .metrics = n->metrics,
        .log = &n->log,
    };
    int rc = sl_graphite_start(&gc, &n->graphite);
    if (rc) {
        snprintf(err, errlen, "graphite-addr '%s': %s", o->graphite_addr,
                 rc == -EINVAL ? "not host:port[/udp|/tcp]" : strerror(-rc));
        return rc;
    }
    if (!n->graphite)
        return 0;
    rc = sl_collectors_graphite(&n->collectors, n->metrics, n->graphite);
    if (rc)
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
    return rc;
}

/* ---- TLS ----------------------------------------------------------------------------------- */

static int start_peer_tls(sl_node *n, char *err, size_t errlen)
{
    const sl_options *o = &n->opts;
    if (!o->tls_cert[0] || o->discovery == SL_DISCOVERY_NONE)
        return 0;
    if (!o->peer_tls_ca[0])
        sl_log_warn(&n->log, "peer TLS without --peer-tls-ca or --tls-ca: peers' certificates "
                             "are not verified");
    sl_tls_ctx *ctx;
    int rc = sl_reload_read_peer_tls(&n->opts, &ctx, err, errlen);
    if (rc)
        return rc;
    n->peer_tls = sl_tls_slot_new(ctx);
    sl_tls_ctx_unref(ctx);
    return n->peer_tls ? 0 : -ENOMEM;
}

/* ---- Levee quotas -------------------------------------------------------------------------- */

/* HealthCheck: unhealthy until the quotas have been read once; once loaded, a lost etcd only
 * degrades (the node keeps deciding on the last known quotas), which the message says. */
static bool quota_health(void *ud, char *why, size_t why_len)
{
    sl_quotasrc_status st;
    sl_quotasrc_status_get(ud, &st);
    if (!st.loaded) {
        snprintf(why, why_len, "quotas not loaded from %s%s%s", st.endpoint,
                 st.last_error[0] ? ": " : "", st.last_error);
        return false;
    }
    if (st.mode == SL_QUOTASRC_ETCD && !st.connected)
        snprintf(why, why_len, "etcd disconnected, serving the last known quotas (revision %lld)",
                 (long long)st.revision);
    return true;
}

/* With etcd, quotas and switches live under the same root: one source, one thread and one watch
 * stream feed both. It starts once both have attached (start_storage_watch). */
static int start_storage(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    if (o->storage_addrs.n == 0)
        return 0;
    const char *eps[64];
    size_t neps = o->storage_addrs.n < 64 ? o->storage_addrs.n : 64;
    for (size_t i = 0; i < neps; i++)
        eps[i] = o->storage_addrs.items[i];
    sl_watched_source_config sc = {
        .etcd_endpoints = eps,
        .n_endpoints = neps,
        .prefix = o->storage_prefix,
        .request_timeout_ms = o->storage_timeout_ns / 1000000,
        .etcd_tls = {o->storage_tls_ca, o->storage_tls_cert, o->storage_tls_key},
        .log = &n->log,
    };
    int rc = sl_watched_source_new(&sc, &n->storage);
    if (rc)
        snprintf(err, errlen, "storage: %s", strerror(-rc));
    return rc;
}

static int start_storage_watch(sl_node *n, char *err, size_t errlen)
{
    if (!n->storage)
        return 0;
    int rc = sl_watched_source_start(n->storage);
    if (rc) {
        snprintf(err, errlen, "storage: %s", strerror(-rc));
        return rc;
    }
    if (n->quotas && sl_quotasrc_wait_loaded(n->quotas, 2000) == -ETIMEDOUT)
        sl_log_warn(&n->log, "etcd not reached yet; /attempt answers 500 until quotas load");
    if (n->switches && sl_killswitch_wait_loaded(n->switches, 2000) == -ETIMEDOUT)
        sl_log_warn(&n->log, "etcd not reached yet; no kill switch is set until it is");
    return 0;
}

static int start_quotas(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    if (o->storage_addrs.n == 0 && !(o->quota_file && o->quota_file[0]))
        return 0;
    sl_quotasrc_config qc = {
        .source = n->storage, /* etcd; NULL: the quota file or nothing */
        .quota_file = o->quota_file,
        .request_timeout_ms = o->storage_timeout_ns / 1000000,
        .log = &n->log,
    };
    int rc = sl_quotasrc_new(&qc, &n->quotas);
    if (rc) {
        snprintf(err, errlen, "quotas: %s", strerror(-rc));
        return rc;
    }
    return sl_quotasrc_register_metrics(n->quotas, n->metrics);
}

/* ---- protection (kill switches, shadow mode, leases, shedders) ------------------------------ */

static int start_protection(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    sl_killswitch_config kc = {
        .source = n->storage, /* etcd; NULL: the quota file or nothing */
        .file = o->quota_file,
        .max_entries = (size_t)o->max_switches,
        .request_timeout_ms = o->storage_timeout_ns / 1000000,
        .log = &n->log,
    };
    int rc = sl_killswitch_new(&kc, &n->switches);
    if (rc) {
        snprintf(err, errlen, "switchboard: %s", strerror(-rc));
        return rc;
    }
    if ((rc = sl_killswitch_register_metrics(n->switches, n->metrics))) {
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
        return rc;
    }
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = n->engine;
    pc.switches = n->switches;
    pc.metrics = n->metrics;
    pc.log = &n->log;
    pc.workers = (int)o->workers;
    pc.shed = o->shed;
    pc.shed_opts.target = (double)o->shed_target / 100.0;
    pc.shed_opts.low = (double)o->shed_low / 100.0;
    pc.shed_opts.raise_after_ms = o->shed_raise_after_ns / 1000000;
    pc.shed_opts.lower_after_ms = o->shed_lower_after_ns / 1000000;
    pc.shed_opts.raise_step = (double)o->shed_raise_step / 100.0;
    pc.shed_opts.lower_step = (double)o->shed_lower_step / 100.0;
    pc.shed_opts.smoothing = (double)o->shed_smoothing / 100.0;
    pc.shed_interval_ms = o->shed_interval_ns / 1000000;
    pc.default_priority = (sl_priority)o->default_priority;
    pc.who.max_names = (uint32_t)o->metrics_max_names;
    pc.who.k = (uint32_t)o->top_keys;
    pc.who.half_life_ms = o->top_half_life_ns / 1000000;
    if ((rc = sl_protect_new(&pc, &n->protect))) {
        snprintf(err, errlen, "protection: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

/* ---- worker hooks -------------------------------------------------------------------------- */

/* A key at its limit was evicted (the store was full of keys at their limit): say so, at most
 * once a second, with how many since the last line. */
static void log_limited_evictions(sl_node *n, int64_t mono)
{
    n->limited_check_ms = mono + 1000;
    sl_engine_stats st;
    sl_engine_stats_get(n->engine, &st);
    if (st.evictions_limited > n->limited_logged)
        sl_log_warn(&n->log,
                    "store full of keys at their limit: evicted %llu of them (limits reset); "
                    "raise --gc-max-keys",
                    (unsigned long long)(st.evictions_limited - n->limited_logged));
    n->limited_logged = st.evictions_limited;
}

static void expiry_tick(uv_timer_t *t)
{
    sl_node *n = t->data;
    int64_t now = sl_wall_ms(), mono = sl_mono_ns() / 1000000;
    size_t work = (size_t)n->opts.gc_max_work;
    if (mono >= n->limited_check_ms)
        log_limited_evictions(n, mono);
    /* gc-collect and gc-collect-free both 0 = no idle collection: keys leave when they expire or
     * are evicted at gc-max-keys */
    if (!n->gc_running && (n->opts.gc_collect_ns > 0 || n->opts.gc_collect_free_ns > 0) &&
        mono >= n->gc_next_ms) {
        n->gc_running = true;
        n->gc_next_ms = mono + n->opts.gc_period_ns / 1000000;
    }
    if (!n->gc_running) {
        sl_engine_expire(n->engine, now, work);
        return;
    }
    /* A collection removes expired keys too, so it replaces the expiry slice while it runs. */
    bool done = false;
    sl_engine_collect(n->engine, now, n->opts.gc_collect_ns / 1000000,
                      n->opts.gc_collect_free_ns / 1000000, work, &done);
    if (done) {
        n->gc_running = false;
        uv_timer_start(t, expiry_tick, EXPIRY_TICK_MS, EXPIRY_TICK_MS);
    } else {
        uv_timer_start(t, expiry_tick, GC_SLICE_MS, GC_SLICE_MS);
    }
}

static void on_worker_start(void *ud, int worker, uv_loop_t *loop)
{
    sl_node *n = ud;
    sl_metrics_bind_thread((unsigned)worker);
    sl_router_worker_start(n->router, worker, loop);
    if (n->rstore)
        sl_rstore_worker_start(n->rstore, worker, loop);
    sl_service_worker_start(n->service, worker, loop);
    sl_proxy_worker_start(n->proxy, worker, loop);
    sl_observer_worker_start(n->observer, worker, loop);
    if (worker == 0) {
        uv_timer_init(loop, &n->expiry_timer);
        n->expiry_timer.data = n;
        n->gc_next_ms = sl_mono_ns() / 1000000 + n->opts.gc_period_ns / 1000000;
        uv_timer_start(&n->expiry_timer, expiry_tick, EXPIRY_TICK_MS, EXPIRY_TICK_MS);
        n->expiry_started = true;
    }
}

static void on_worker_stop(void *ud, int worker, uv_loop_t *loop)
{
    sl_node *n = ud;
    (void)loop;
    sl_observer_worker_stop(n->observer, worker);
    sl_proxy_worker_stop(n->proxy, worker);
    sl_service_worker_stop(n->service, worker);
    sl_protect_worker_stop(n->protect, worker);
    if (n->rstore)
        sl_rstore_worker_stop(n->rstore, worker);
    sl_router_worker_stop(n->router, worker);
    if (worker == 0 && n->expiry_started) {
        uv_timer_stop(&n->expiry_timer);
        uv_close((uv_handle_t *)&n->expiry_timer, NULL);
    }
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* The admin listener (--admin-addr, unless --admin-api=false) and the read-only /metrics one
 * (--metrics-addr): listeners of their own, so the client port serves neither admin call. */
static int start_admin(sl_node *n, char *err, size_t errlen)
{
    const sl_options *o = &n->opts;
    /* The default: loopback, the client port + 1; if that is taken, any free loopback port (the
     * log says which). An address given explicitly must be had. */
    char dflt[32];
    const char *colon = strrchr(o->listen_addr, ':');
    long cport = colon ? strtol(colon + 1, NULL, 10) : 0;
    snprintf(dflt, sizeof dflt, "127.0.0.1:%ld", cport > 0 && cport < 65535 ? cport + 1 : 0);
    bool is_default = !o->admin_addr[0];
    sl_adminsrv_config ac = {.addr = is_default ? dflt : o->admin_addr,
                             .token_file = o->admin_token_file, .admin = true,
                             .protect = n->protect, .metrics = n->metrics,
                             .max_body_bytes = 65536, .any_port_if_taken = is_default,
                             .status = {.instance = o->instance_id, .listen_addr = o->listen_addr,
                                        .advertise_addr = o->discovery != SL_DISCOVERY_NONE
                                                              ? o->advertise_addr : NULL,
                                        .workers = (int)o->workers, .started_ms = sl_wall_ms(),
                                        .engine = n->engine, .router = n->router,
                                        .protect = n->protect, .quotas = n->quotas}};
    int rc;
    if (o->admin_api) {
        if ((rc = sl_adminsrv_start(&ac, &n->admin, err, errlen)))
            return rc;
        if (is_default && cport > 0 && sl_adminsrv_port(n->admin) != cport + 1)
            sl_log_warn(&n->log, "admin port %s is taken: the admin listener took a free port",
                        dflt);
        sl_log_info(&n->log, "admin listening addr=%s port=%u token=%s", ac.addr,
                    sl_adminsrv_port(n->admin), o->admin_token_file[0] ? "yes" : "no");
    }
    if (o->metrics_addr[0]) {
        ac.addr = o->metrics_addr;
        ac.token_file = NULL;
        ac.admin = false;
        ac.any_port_if_taken = false;
        if ((rc = sl_adminsrv_start(&ac, &n->metrics_srv, err, errlen)))
            return rc;
    }
    return 0;
}

/* --client-tokens-file at start (SIGHUP reads it again: node/reload.h). */
static int load_idents(sl_node *n, char *err, size_t errlen)
{
    const char *path = n->opts.client_tokens_file;
    if (!path[0])
        return 0;
    int rc = sl_reload_read_idents(path, &n->idents, err, errlen);
    if (!rc)
        sl_log_info(&n->log, "client identities loaded count=%zu", sl_idents_count(n->idents));
    return rc;
}

/* The metrics registry, the engine (with a --state-dir snapshot loaded into it) and the snapshot
 * timer. Fills *ecp: the router validates GLOBAL answers against the engine's limits. */
static int start_engine(sl_node *n, sl_engine_config *ecp, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    sl_metrics_config mc;
    sl_metrics_config_default(&mc);
    while (mc.shards < (unsigned)o->workers + 1)
        mc.shards *= 2;
    int rc = sl_metrics_new(&mc, &n->metrics);
    if (rc) {
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
        return rc;
    }

    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.max_keys = (size_t)o->gc_max_keys;
    ec.max_memory = o->max_memory;
    ec.shards = (unsigned)o->shards;
    ec.max_log_limit = o->max_log_limit;
    ec.max_sub_windows = (int32_t)o->max_sub_windows;
    ec.max_concurrency_limit = o->max_concurrency_limit;
    ec.max_count = o->max_count;
    ec.max_duration_ms = o->max_duration_ns / 1000000;
    ec.max_clock_skew_ms = o->max_clock_skew_ns / 1000000;
    /* --state-dir: a valid snapshot's keys were hashed with its seed, so the engine takes it. */
    sl_alg_config acfg = {.max_log_limit = ec.max_log_limit, .max_sub_windows = ec.max_sub_windows,
                          .max_concurrency_limit = ec.max_concurrency_limit};
    /* In a cluster, store hashes are permuted key ids (hand-off finds owners from them). */
    ec.cluster_keys = o->discovery != SL_DISCOVERY_NONE;
    n->snapshot_flags = ec.cluster_keys ? SL_SNAPSHOT_CLUSTER_KEYS : 0;
    if (o->state_dir && !o->state_dir[0]) { /* an unset string option reads "" */
        free(o->state_dir);
        o->state_dir = NULL;
    }
    sl_statedir_snap snap = {0};
    if (o->state_dir && sl_statedir_read(o->state_dir, &acfg, &n->log, &snap)) {
        if (snap.flags != n->snapshot_flags) {
            sl_log_warn(&n->log, "snapshot skipped, starting empty: written by a %s node",
                        snap.flags ? "clustered" : "standalone");
            sl_statedir_load(&snap, NULL, &acfg, 0, &n->log); /* unmaps only */
        } else {
            ec.hash_seed = snap.seed;
        }
    }
    rc = sl_engine_new(&ec, &n->engine);
    if (rc) {
        sl_statedir_load(&snap, NULL, &acfg, 0, &n->log); /* unmaps only */
        snprintf(err, errlen, "engine: %s", strerror(-rc));
        return rc;
    }
    if (snap.map)
        sl_statedir_load(&snap, n->engine, &acfg, sl_wall_ms(), &n->log);
    if (o->state_dir &&
        (rc = sl_statedir_timer_start(&n->snapshot_timer, o->state_dir, n->engine,
                                      n->snapshot_flags, o->snapshot_period_ns / 1000000,
                                      &n->log))) {
        snprintf(err, errlen, "snapshot timer: %s", strerror(-rc));
        return rc;
    }
    if ((rc = sl_collectors_engine(&n->collectors, n->metrics, n->engine))) {
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
        return rc;
    }

    *ecp = ec;
    return 0;
}

/* --gossip-addr: join the SWIM overlay (cluster/gossipnode.h), and its metrics. */
static int start_gossip(sl_node *n, char *err, size_t errlen)
{
    int rc = sl_gossipnode_start_options(&n->opts, &n->log, &n->gossip, err, errlen);
    if (!rc && n->gossip && (rc = sl_collectors_gossip(&n->collectors, n->metrics, n->gossip)))
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
    return rc;
}

static int start_router(sl_node *n, const sl_engine_config *ec, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    int rc;
    sl_router_config rcfg = {.engine = n->engine, .engine_cfg = ec, .workers = (int)o->workers,
                             .log = &n->log, .metrics = n->metrics};
    sl_router_config_from_options(&rcfg, o);
    rcfg.dns_server = o->dns_server;
    if ((rc = start_peer_tls(n, err, errlen)))
        return rc;
    rcfg.peer_tls = n->peer_tls;
    rcfg.gossip = n->gossip;
    if ((rc = sl_router_new(&rcfg, &n->router))) {
        snprintf(err, errlen, "router: %s", strerror(-rc));
        return rc;
    }
    if (o->store == SL_STORE_REDIS) {
        sl_rstore_config sc = {
            .engine = n->engine, .engine_cfg = ec,
            .addrs = (const char *const *)o->redis_addrs.items, .n_addrs = o->redis_addrs.n,
            .user = o->redis_user, .password_file = o->redis_password_file,
            .timeout_ms = o->redis_timeout_ns / 1000000, .batch_items = o->redis_batch_items,
            .fail_open = o->fail_open, .cluster = o->redis_cluster,
            .cluster_refresh_ms = o->redis_cluster_refresh_ns / 1000000,
            .workers = (int)o->workers, .log = &n->log, .metrics = n->metrics};
        if ((rc = sl_rstore_new(&sc, &n->rstore, err, errlen)))
            return rc;
    }

    return 0;
}

/* --role proxy: the limiter set behind the topology interface, and the handler that relays
 * /attempt to it (everything else still goes to the service). */
static void feed_failed(void *ud, const char *why)
{
    sl_node *n = ud;
    sl_log_error(&n->log, "role proxy: giving up: %s", why);
    atomic_store(&n->failed, true);
}

static int start_proxy(sl_node *n, char *err, size_t errlen)
{
    const sl_options *o = &n->opts;
    const char *bad;
    int rc;
    if (!o->proxy_limiters.n) { /* the limiters come from an observer's topology stream */
        if ((rc = sl_feed_start_options(o, &n->topology, n->metrics, &n->log, feed_failed, n,
                                          &n->feed))) {
            snprintf(err, errlen, "proxy: following observers: %s", strerror(-rc));
            return rc;
        }
    } else if ((rc = sl_topology_parse(&n->topology, o->proxy_limiters.items,
                                       o->proxy_limiters.n, &bad))) {
        snprintf(err, errlen, "proxy-limiters: '%s' is not name=host:port (or the name repeats)",
                 bad);
        return rc;
    }
    sl_proxy_config pc = {
        .topology = &n->topology,
        .quotas = n->quotas,
        .metrics = n->metrics,
        .log = &n->log,
        .workers = (int)o->workers,
        .timeout_ms = o->proxy_timeout_ns / 1000000,
        .probe_interval_ms = o->proxy_probe_interval_ns / 1000000,
        .max_inflight = (uint32_t)o->proxy_max_inflight,
        .fallback = sl_service_handle,
        .fallback_ud = n->service,
    };
    if ((rc = sl_proxy_new(&pc, &n->proxy))) {
        snprintf(err, errlen, "proxy: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

/* Envoy RLS rules: --rls-config-dir, else <root>/rls/ in etcd with --storage-addrs (a feed of
 * the shared source: attached before it starts), else none. */
static int start_rls(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    bool dir = o->rls_config_dir && o->rls_config_dir[0];
    if (!dir && !n->storage)
        return 0;
    sl_rlssrc_config rc_cfg = {.source = dir ? NULL : n->storage,
                               .dir = dir ? o->rls_config_dir : NULL,
                               .poll_ms = o->rls_poll_period_ns / 1000000, .log = &n->log};
    int rc = sl_rlssrc_new(&rc_cfg, &n->rls, err, errlen);
    if (rc)
        return rc;
    if ((rc = sl_rlssrc_register_metrics(n->rls, n->metrics)))
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
    return rc;
}

/* The request handler every dialect goes through (client identities first: it holds them). */
static int start_service(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    int rc;
    if ((rc = load_idents(n, err, errlen)))
        return rc;
    sl_service_config scfg = {
        .engine = n->engine,
        .router = n->router,
        .rstore = n->rstore,
        .metrics = n->metrics,
        .log = &n->log,
        .workers = (int)o->workers,
        .advertise_addr = o->advertise_addr,
        .quotas = n->quotas,
        .protect = n->protect,
        .peers_any = o->peer_auth == 1,
        .peers_mtls = n->peer_tls && o->peer_tls_ca[0],
        .idents = n->idents,
    };
    if (n->quotas) {
        scfg.health = quota_health;
        scfg.health_ud = n->quotas;
    }
    sl_levee_config_default(&scfg.levee);
    scfg.levee.no_quota = (sl_levee_no_quota)o->no_quota;
    scfg.levee.headers_on_accept = o->attempt_headers == 1;
    scfg.levee.max_delay_ms = o->attempt_max_delay_ns / 1000000;
    scfg.max_held = (uint32_t)o->attempt_max_held;
    scfg.levee.log = &n->log;
    sl_gub_config_default(&scfg.gub);
    scfg.gub.max_msg = (size_t)o->max_body_bytes;
    scfg.gub.json.max_body = (size_t)o->max_body_bytes;
    scfg.gub.max_items = (size_t)o->max_batch;
    scfg.rls_cfg = (sl_rls_config){.max_descriptors = (size_t)o->rls_max_descriptors,
                                   .max_entries = (size_t)o->rls_max_entries,
                                   .headers = o->rls_response_headers,
                                   .max_names = (uint32_t)o->metrics_max_names};
    scfg.rls = n->rls;
    if ((rc = sl_service_new(&scfg, &n->service))) {
        snprintf(err, errlen, "service: %s", strerror(-rc));
        return rc;
    }
    if (o->role == SL_ROLE_OBSERVER)
        return sl_observer_new_options(o, n->gossip, n->metrics, &n->log, sl_service_handle,
                                       n->service, &n->observer, err, errlen);
    return o->role == SL_ROLE_PROXY ? start_proxy(n, err, errlen) : 0;
}

/* The client port: its limits, TLS and worker hooks. */
static int start_server(sl_node *n, const char *host, unsigned short port, char *err,
                        size_t errlen)
{
    sl_options *o = &n->opts;
    int rc;
    sl_server_config sv;
    sl_server_config_defaults(&sv);
    sv.host = host;
    sv.port = port;
    sv.workers = (int)o->workers;
    sv.max_conns = (uint32_t)o->max_conns;
    sv.idle_timeout_ms = (uint32_t)(o->idle_timeout_ns / 1000000);
    sv.read_timeout_ms = (uint32_t)(o->read_timeout_ns / 1000000);
    sv.write_timeout_ms = (uint32_t)(o->write_timeout_ns / 1000000);
    sv.limits.conn_buffer_bytes = (size_t)o->max_conn_body_bytes;
    sv.limits.conn_unsent_bytes = (size_t)o->max_conn_unsent_bytes;
    sv.limits.unsent_bytes = (size_t)o->max_unsent_bytes;
    sv.limits.max_conn_errors = (uint32_t)o->max_conn_errors;
    sv.limits.max_header_bytes = (size_t)o->max_header_bytes;
    sv.limits.max_body_bytes = (size_t)o->max_body_bytes + 64; /* gRPC framing and slack */
    sv.limits.h2_max_streams = (uint32_t)o->max_streams;
    sv.handler = n->proxy ? sl_proxy_handle : n->observer ? sl_observer_handle : sl_service_handle;
    sv.handler_ud = n->proxy      ? (void *)n->proxy
                    : n->observer ? (void *)n->observer
                                  : (void *)n->service;
    sv.on_worker_start = on_worker_start;
    sv.on_worker_stop = on_worker_stop;
    sv.hooks_ud = n;
    sv.tls_handshake_timeout_ms = (uint32_t)(o->tls_handshake_timeout_ns / 1000000);
    if (o->tls_cert[0] && (rc = sl_reload_read_server_tls(o, &sv.tls, err, errlen)))
        return rc;
    rc = sl_server_start(&n->server, &sv);
    sl_tls_ctx_unref(sv.tls); /* the server holds its own reference */
    if (rc) {
        snprintf(err, errlen, "listen on %s: %s", o->listen_addr, strerror(-rc));
        return rc;
    }
    return 0;
}

static int build(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    sl_log_init(&n->log, NULL, sl_log_level_for_verbose(o->verbose), o->instance_id);
    sl_log_set_request_rate(&n->log, (uint32_t)o->log_request_lines);

    char host[128];
    unsigned short port;
    int rc;
    if ((rc = sl_observer_addrs_from_etcd(o, err, errlen))) /* Levee's observer file */
        return rc;
    if (sl_addr_split(o->listen_addr, host, sizeof host, &port)) {
        snprintf(err, errlen, "listen-addr '%s' is not host:port", o->listen_addr);
        return -EINVAL;
    }
    sl_engine_config ec;
    if ((rc = start_engine(n, &ec, err, errlen)) || (rc = start_gossip(n, err, errlen)) ||
        (rc = start_router(n, &ec, err, errlen)))
        return rc;
    if ((rc = start_storage(n, err, errlen)))
        return rc;
    if ((rc = start_quotas(n, err, errlen)))
        return rc;
    if ((rc = start_protection(n, err, errlen)))
        return rc;
    if ((rc = start_rls(n, err, errlen)))
        return rc;
    if ((rc = start_storage_watch(n, err, errlen)))
        return rc;
    if ((rc = start_service(n, err, errlen)))
        return rc;
    /* Before the client port: once that answers, the admin port does too. */
    if ((rc = start_admin(n, err, errlen)))
        return rc;
    if ((rc = start_server(n, host, port, err, errlen)))
        return rc;
    if ((rc = sl_router_start(n->router, n->server))) {
        snprintf(err, errlen, "cluster membership: %s", strerror(-rc));
        return rc;
    }
    if (n->observer && (rc = sl_observer_start(n->observer, n->server))) {
        snprintf(err, errlen, "observer: %s", strerror(-rc));
        return rc;
    }
    bool tls = n->opts.tls_cert[0] != 0;
    if ((rc = sl_collectors_server(&n->collectors, n->metrics, n->server, tls))) {
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
        return rc;
    }
    /* Last: every collector it renders exists, and sl_node_free() stops it first. */
    if ((rc = start_graphite(n, err, errlen)))
        return rc;
    sl_log_info(&n->log, "listening addr=%s:%u workers=%d max-keys=%lld", host,
                sl_server_port(n->server), (int)o->workers, (long long)o->gc_max_keys);
    return 0;
}

static int node_start_options(sl_node *n, char *err, size_t errlen)
{
    int rc = build(n, err, errlen);
    if (rc) {
        if (n->server) {
            sl_server_shutdown(n->server, 0);
            sl_server_wait(n->server);
        }
    }
    return rc;
}

/* A copy of the options (argv[0] included) for sl_reload_peers(). 0 or -ENOMEM. */
static int keep_args(sl_node *n, int argc, char *const *argv)
{
    n->argv = calloc((size_t)argc + 1, sizeof *n->argv);
    if (!n->argv)
        return -ENOMEM;
    n->argc = argc;
    for (int i = 0; i < argc; i++)
        if (!(n->argv[i] = strdup(argv[i])))
            return -ENOMEM;
    return 0;
}

int sl_node_start(int argc, char *const *args, sl_node **out, char *err, size_t errlen)
{
    sl_node *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    sl_topology_init(&n->topology);
    /* sl_config_parse wants argv[0]. */
    char **argv = calloc((size_t)argc + 2, sizeof *argv);
    if (!argv) {
        free(n);
        return -ENOMEM;
    }
    argv[0] = "sluice-node";
    for (int i = 0; i < argc; i++)
        argv[i + 1] = args[i];
    int rc = sl_config_parse(&n->opts, argc + 1, argv, NULL, err, errlen);
    if (rc == 0)
        rc = keep_args(n, argc + 1, argv);
    free(argv);
    if (rc == 0)
        rc = node_start_options(n, err, errlen);
    else if (rc > 0) {
        snprintf(err, errlen, "--help and --version are not node options");
        rc = -EINVAL;
    }
    if (rc) {
        sl_node_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

uint16_t sl_node_port(const sl_node *n)
{
    return sl_server_port(n->server);
}

sl_engine *sl_node_engine(sl_node *n)
{
    return n->engine;
}

/* sl_node_decide: a closure run on worker 0, and the caller waiting for it. */
typedef struct {
    sl_node *node;
    const sl_request *reqs;
    sl_response *resps;
    size_t count;
    sl_batch batch;
    int rc;
    bool done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} decide_call;

static void decide_done(void *ud, sl_batch *b)
{
    decide_call *c = ud;
    memcpy(c->resps, b->resps, c->count * sizeof *c->resps);
    sl_batch_free(&c->batch);
    pthread_mutex_lock(&c->mu);
    c->done = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void decide_on_loop(void *ud)
{
    decide_call *c = ud;
    sl_batch_init(&c->batch, 0);
    if (sl_batch_alloc_items(&c->batch, c->count)) {
        c->rc = -ENOMEM;
        sl_batch_free(&c->batch);
        pthread_mutex_lock(&c->mu);
        c->done = true;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    memcpy(c->batch.reqs, c->reqs, c->count * sizeof *c->reqs);
    if (c->node->rstore) /* --store redis: the answer a client gets (service.c) */
        sl_rstore_submit(c->node->rstore, 0, &c->batch, sl_wall_ms(), decide_done, c);
    else
        sl_router_submit(c->node->router, 0, &c->batch, sl_wall_ms(), decide_done, c);
}

int sl_node_decide(sl_node *n, const sl_request *reqs, sl_response *resps, size_t count)
{
    if (count == 0)
        return 0;
    decide_call c = {.node = n, .reqs = reqs, .resps = resps, .count = count};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    int rc = sl_server_post(n->server, 0, decide_on_loop, &c);
    if (rc == 0) {
        pthread_mutex_lock(&c.mu);
        while (!c.done)
            pthread_cond_wait(&c.cv, &c.mu);
        pthread_mutex_unlock(&c.mu);
        rc = c.rc;
    }
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
    return rc;
}

/* Role proxy: --proxy-limiters read again (file, environment, flags) into the topology; the
 * workers follow at their next request. */
static void reload_proxy_limiters(sl_node *n)
{
    sl_options o;
    memset(&o, 0, sizeof o);
    char err[256];
    const char *bad = NULL;
    bool changed = false;
    int rc = sl_config_parse(&o, n->argc, n->argv, NULL, err, sizeof err);
    if (rc == 0 && (rc = sl_topology_sync(&n->topology, o.proxy_limiters.items,
                                          o.proxy_limiters.n, &bad, &changed)))
        snprintf(err, sizeof err, "proxy-limiters: '%s' is not name=host:port (or repeats)",
                 bad ? bad : "?");
    if (rc)
        sl_log_error(&n->log, "reload: keeping the limiter list: %s",
                     rc > 0 ? "unexpected --help or --version" : err);
    else
        sl_log_info(&n->log, "reload: limiter list %s: %zu limiters",
                    changed ? "read again" : "unchanged", o.proxy_limiters.n);
    sl_config_free(&o);
}

void sl_node_reload(sl_node *n)
{
    if (n->proxy)
        reload_proxy_limiters(n);
    sl_reload_tls(&n->opts, n->server, n->peer_tls, &n->log);
    sl_reload_peers(&n->opts, n->argc, n->argv, n->router, &n->log);
    sl_reload_idents(&n->opts, &n->idents, n->service, n->server, &n->log);
    if (n->gossip) {
        char gerr[256];
        if (sl_gossipnode_reload_keyring(n->gossip, gerr, sizeof gerr))
            sl_log_error(&n->log, "reload of the gossip key ring failed, keeping the current "
                         "one: %s", gerr);
    }
    char aerr[512];
    int arc = sl_adminsrv_reload_token(n->admin, aerr, sizeof aerr);
    if (arc < 0)
        sl_log_error(&n->log, "reload of the admin token failed, keeping the current one: %s",
                     aerr);
    else if (arc == 0)
        sl_log_info(&n->log, "reload: admin token read again");
    if (n->switches) {
        char kerr[256];
        int krc = sl_killswitch_reload(n->switches, kerr, sizeof kerr);
        if (krc && krc != -EOPNOTSUPP)
            sl_log_error(&n->log, "reload of the switchboard failed, keeping the current "
                         "switches: %s", kerr);
    }
    if (n->rls) {
        char rerr[512];
        sl_rlssrc_reload(n->rls, rerr, sizeof rerr); /* logs its outcome */
    }
    if (!n->quotas) {
        sl_log_info(&n->log, "reload: nothing to reload (no quota file)");
        return;
    }
    char err[256];
    int rc = sl_quotasrc_reload(n->quotas, err, sizeof err);
    if (rc == -EOPNOTSUPP)
        sl_log_info(&n->log, "reload: quotas come from etcd and reload by themselves");
    else if (rc)
        sl_log_error(&n->log, "reload failed, keeping the previous quotas: %s", err);
    else
        sl_log_info(&n->log, "reload: quota file read again");
}

int sl_node_alive(sl_node *n)
{
    if (!n->alive) {
        int rc = sl_alive_new(n->server, &n->alive);
        if (rc)
            return rc;
    }
    return sl_alive_check(n->alive);
}

void sl_node_shutdown(sl_node *n, uint32_t grace_ms)
{
    if (grace_ms == 0)
        grace_ms = (uint32_t)(n->opts.shutdown_timeout_ns / 1000000);
    sl_log_info(&n->log, "shutting down grace_ms=%u", grace_ms);
    int64_t t0 = sl_mono_ns();
    sl_observer_stop(n->observer); /* close the topology streams: proxies move to another */
    sl_router_stop(n->router); /* leave the cluster first: peers stop sending here */
    sl_gossipnode_stop(n->gossip); /* announce LEFT in the overlay (at most ~1 s) */
    if (n->gossip && n->opts.role == SL_ROLE_LIMITER) { /* proxies hear LEFT, stop sending */
        int64_t drain = n->opts.leave_drain_ns / 1000000, used = (sl_mono_ns() - t0) / 1000000;
        if (drain > (int64_t)grace_ms - used)
            drain = (int64_t)grace_ms - used;
        if (drain > 0)
            usleep((useconds_t)drain * 1000);
    }
    /* then hand every key to its next owner (cluster only), then drain: all within grace_ms */
    int rc = sl_router_leave(n->router, grace_ms);
    if (rc)
        sl_log_warn(&n->log, "leave: keys not all handed off: %s", strerror(-rc));
    int64_t spent = (sl_mono_ns() - t0) / 1000000;
    uint32_t left = spent < grace_ms ? grace_ms - (uint32_t)spent : 1;
    sl_server_shutdown(n->server, left);
    sl_adminsrv_shutdown(n->admin, left);
    sl_adminsrv_shutdown(n->metrics_srv, left);
}

bool sl_node_failed(sl_node *n)
{
    return atomic_load(&n->failed);
}

int sl_node_wait(sl_node *n)
{
    int rc = sl_server_wait(n->server);
    /* Drained: the store holds its final state. */
    sl_statedir_timer_stop(&n->snapshot_timer);
    if (n->opts.state_dir && !n->snapshot_written) {
        sl_statedir_write(n->opts.state_dir, n->engine, n->snapshot_flags, sl_wall_ms(), &n->log);
        n->snapshot_written = true;
    }
    sl_log_info(&n->log, "stopped");
    return rc;
}

void sl_node_free(sl_node *n)
{
    if (!n)
        return;
    sl_graphite_stop(n->graphite); /* before what its render reads (engine, server, quotas) */
    sl_statedir_timer_stop(&n->snapshot_timer);
    sl_adminsrv_free(n->admin);       /* before the switchboard and metrics it serves */
    sl_adminsrv_free(n->metrics_srv);
    sl_feed_free(n->feed);
    sl_observer_stop(n->observer); /* before the server goes: it posts to its workers */
    sl_server_free(n->server);
    sl_observer_free(n->observer);
    sl_alive_free(n->alive); /* after the server: its last posted steps have run */
    sl_proxy_free(n->proxy);
    sl_service_free(n->service);
    sl_rlssrc_free(n->rls); /* after the service: its workers' readers are released */
    sl_idents_free(n->idents);
    sl_protect_free(n->protect);
    sl_killswitch_free(n->switches);
    sl_quotasrc_free(n->quotas);
    sl_watched_source_free(n->storage); /* the feeds above have left it: stops the thread */
    sl_router_stop(n->router);     /* its gossip subscription first, then the overlay */
    sl_gossipnode_free(n->gossip);
    sl_rstore_free(n->rstore);
    sl_router_free(n->router);
    sl_tls_slot_free(n->peer_tls); /* after the router: its peers' connections hold their own */
    sl_engine_free(n->engine);
    sl_metrics_free(n->metrics);
    sl_config_free(&n->opts);
    sl_topology_destroy(&n->topology);
    for (int i = 0; n->argv && i < n->argc; i++)
        free(n->argv[i]);
    free(n->argv);
    free(n);
}

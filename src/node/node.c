/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sluice node (include/sluice/node.h): builds the parts from sl_options and owns their lives.
 *
 *   options -> logger, metrics, engine, router, service, server (worker loops)
 *
 * Each part is built in node/nodeparts.c (struct sl_node and their prototypes: node/node_int.h);
 * here are the order they are built in, the client port, the worker hooks, reload, shutdown and
 * the embedding calls.
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

#include "node/node_int.h"
#include "net/listener.h"
#include "node/startcheck.h"

#include "runtime/buildinfo.h"

/* How often worker 0 runs active expiry; each run examines at most gc-max-work slots. */
#define EXPIRY_TICK_MS 100
/* Between two slices of an idle-key collection: the loop serves requests in between. */
#define GC_SLICE_MS 1

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
    if (mono >= n->history_next_ms) { /* the status page's chart: one sample a second */
        n->history_next_ms = mono + 1000;
        sl_statuspage_history_sample(&n->history, n->engine, now);
    }
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
    /* the router first, whatever decides: membership, health and PeersV1 are its (a router
     * that is also the decider ignores the second start) */
    sl_router_worker_start(n->router, worker, loop);
    sl_decider_worker_start(&n->decider, worker, loop);
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
    sl_decider_worker_stop(&n->decider, worker); /* (a router stopped here ignores the next) */
    sl_router_worker_stop(n->router, worker);
    if (worker == 0 && n->expiry_started) {
        uv_timer_stop(&n->expiry_timer);
        uv_close((uv_handle_t *)&n->expiry_timer, NULL);
    }
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

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
    sv.unix_extra = (const char *const *)o->listen_unix.items;
    sv.n_unix_extra = o->listen_unix.n;
    sv.unix_extra_mode = (unsigned)strtoul(o->listen_unix_mode, NULL, 8);
    sv.idle_timeout_ms = (uint32_t)(o->idle_timeout_ns / 1000000);
    sv.read_timeout_ms = (uint32_t)(o->read_timeout_ns / 1000000);
    sv.write_timeout_ms = (uint32_t)(o->write_timeout_ns / 1000000);
    sv.limits.conn_buffer_bytes = (size_t)o->max_conn_body_bytes;
    sv.limits.conn_unsent_bytes = (size_t)o->max_conn_unsent_bytes;
    sv.limits.unsent_bytes = (size_t)o->max_unsent_bytes;
    sv.limits.max_conn_errors = (uint32_t)o->max_conn_errors;
    sv.max_request_memory = o->max_request_memory ? o->max_request_memory
                                                  : sl_reqmem_default(0);
    sv.limits.max_header_bytes = (size_t)o->max_header_bytes;
    sv.limits.max_body_bytes = (size_t)o->max_body_bytes + 64; /* gRPC framing and slack */
    sv.limits.h2_max_streams = (uint32_t)o->max_streams;
    sv.handler = n->proxy ? sl_proxy_handle : n->observer ? sl_observer_handle : sl_service_handle;
    sv.handler_ud = n->proxy      ? (void *)n->proxy
                    : n->observer ? (void *)n->observer
                                  : (void *)n->service;
    /* unknown methods at their headers, reflection's streams as they come */
    sv.early = n->proxy || n->observer ? NULL : sl_service_early;
    sv.on_worker_start = on_worker_start;
    sv.on_worker_stop = on_worker_stop;
    sv.hooks_ud = n;
    sv.tls_handshake_timeout_ms = (uint32_t)(o->tls_handshake_timeout_ns / 1000000);
    if (o->tls_cert[0] && (rc = sl_reload_read_server_tls(o, &sv.tls, err, errlen)))
        return rc;
    rc = sl_server_start(&n->server, &sv);
    sl_tls_ctx_unref(sv.tls); /* the server holds its own reference */
    if (rc) {
        if (o->listen_unix.n && (rc == -EADDRINUSE || rc == -EEXIST || rc == -ENAMETOOLONG))
            snprintf(err, errlen, "option 'listen-unix': %s (another sluiced answers there, a "
                     "file that is not a socket is in the way, or a path over 107 bytes)",
                     strerror(-rc));
        else
            snprintf(err, errlen, "listen on %s: %s", o->listen_addr, strerror(-rc));
        return rc;
    }
    return 0;
}

/* Whether the client port can be bound (port 0 always can): 0 or a negative errno. The server
 * probes it again when it binds; this one is before anything else is started. */
static int client_port_free(const char *host, unsigned short port)
{
    struct sockaddr_storage ss;
    socklen_t slen;
    if (!port)
        return 0;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) == 0)
        slen = sizeof(struct sockaddr_in);
    else if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) == 0)
        slen = sizeof(struct sockaddr_in6);
    else
        return 0; /* not an IP: the start-up check said so */
    return sl_listener_probe_free((struct sockaddr *)&ss, slen);
}

/* The first line: what runs (version, commit, role) and where it listens: the client port, the
 * admin socket, the TCP admin listener's port (--admin-addr's host) and --metrics-addr. */
static void start_line(sl_node *n, const char *host)
{
    const sl_options *o = &n->opts;
    bool v6 = strchr(host, ':') != NULL; /* addr=[::1]:5454, as an address is written */
    char more[1280] = "";
    int k = 0;
    if (n->admin)
        k = snprintf(more, sizeof more, " admin_socket=%s", sl_adminsrv_socket(n->admin));
    if (n->admin_tcp && k >= 0 && (size_t)k < sizeof more)
        k += snprintf(more + k, sizeof more - (size_t)k, " admin_port=%u",
                      sl_adminsrv_port(n->admin_tcp));
    if (o->metrics_addr[0] && k >= 0 && (size_t)k < sizeof more)
        k += snprintf(more + k, sizeof more - (size_t)k, " metrics_addr=%s", o->metrics_addr);
    for (size_t u = 0; u < o->listen_unix.n && k >= 0 && (size_t)k < sizeof more; u++)
        k += snprintf(more + k, sizeof more - (size_t)k, " unix=%s", o->listen_unix.items[u]);
    sl_log_write_now(&n->log, SL_LOG_INFO,
                     "sluiced started version=%s commit=%s role=%s addr=%s%s%s:%u%s workers=%d "
                     "max-keys=%lld tls=%s",
                     sl_buildinfo_version, sl_buildinfo_commit,
                     n->proxy ? "proxy" : n->observer ? "observer" : "limiter", v6 ? "[" : "",
                     host, v6 ? "]" : "", sl_server_port(n->server), more, (int)o->workers,
                     (long long)o->gc_max_keys, o->tls_cert[0] ? "on" : "off");
    sl_log_release(&n->log);
}

static int build(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    sl_log_init(&n->log, NULL, o->verbose ? SL_LOG_DEBUG : (sl_log_level)o->log_level,
                o->instance_id);
    sl_log_set_request_rate(&n->log, (uint32_t)o->log_request_lines);
    sl_log_set_format(&n->log, (sl_log_format)o->log_format);
    sl_log_set_journal(&n->log, sl_log_journal_fd(2)); /* started by systemd: its priorities */
    /* until the line with the version and the listeners, which goes first */
    sl_log_hold(&n->log);

    char host[128];
    unsigned short port;
    int rc;
    if ((rc = sl_observer_addrs_from_etcd(o, err, errlen))) /* Levee's observer file */
        return rc;
    if (sl_addr_split(o->listen_addr, host, sizeof host, &port)) {
        snprintf(err, errlen, "listen-addr '%s' is not host:port", o->listen_addr);
        return -EINVAL;
    }
    if ((rc = client_port_free(host, port))) {
        /* Before any part is built, so that nothing was logged as listening (the admin port). */
        snprintf(err, errlen, "option 'listen-addr': %s: %s", o->listen_addr,
                 rc == -EADDRINUSE ? "the port is in use (another process listens there): stop "
                                     "it, or choose another port"
                                   : strerror(-rc));
        return rc;
    }
    sl_engine_config ec;
    if ((rc = sl_nodeparts_engine(n, &ec, err, errlen)) ||
        (rc = sl_nodeparts_gossip(n, err, errlen)) ||
        (rc = sl_nodeparts_router(n, &ec, err, errlen)))
        return rc;
    if ((rc = sl_nodeparts_storage(n, err, errlen)))
        return rc;
    if ((rc = sl_nodeparts_quotas(n, err, errlen)))
        return rc;
    if ((rc = sl_nodeparts_protection(n, err, errlen)))
        return rc;
    if ((rc = sl_nodeparts_rls(n, err, errlen)))
        return rc;
    if ((rc = sl_nodeparts_storage_watch(n, err, errlen)))
        return rc;
    if ((rc = sl_nodeparts_service(n, err, errlen)))
        return rc;
    /* Before the client port: once that answers, the admin port does too. */
    if ((rc = sl_nodeparts_admin(n, err, errlen)))
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
    if ((rc = sl_nodeparts_graphite(n, err, errlen)))
        return rc;
    start_line(n, host);
    return 0;
}

static int node_start_options(sl_node *n, char *err, size_t errlen)
{
    int rc = build(n, err, errlen);
    sl_log_release(&n->log); /* a start that failed: what it logged, now */
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
    sl_statuspage_history_init(&n->history);
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
    if (rc == 0) {
        /* Every file and value the start relies on, before anything is built or bound: a start
         * fails on its first problem with nothing logged as listening (sluiced --check-config
         * reports them all). */
        sl_diag d = {0};
        if (sl_startcheck_run(&n->opts, &d) > 0) {
            snprintf(err, errlen, "%s", d.n ? d.lines[0] : "start-up check failed");
            rc = -EINVAL;
        }
        sl_diag_free(&d);
    }
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
    /* the node's decider: the answer a client gets (service.c) */
    sl_decider_submit(&c->node->decider, 0, &c->batch, sl_wall_ms(), decide_done, c);
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
    sl_tls_ctx *atls = NULL;
    char terr[512];
    if (n->admin_tcp && n->opts.tls_cert[0] && !sl_addr_is_loopback(n->opts.admin_addr)) {
        if (sl_reload_read_server_tls(&n->opts, &atls, terr, sizeof terr))
            sl_log_error(&n->log, "reload of the admin listener's TLS files failed, keeping the "
                         "current ones: %s", terr);
        else if (!sl_adminsrv_set_tls(n->admin_tcp, atls))
            sl_log_info(&n->log, "reload: admin listener's TLS files read again");
        sl_tls_ctx_unref(atls);
    }
    sl_reload_peer_secret(&n->opts, n->peersig, &n->log);
    sl_reload_peers(&n->opts, n->argc, n->argv, n->router, &n->log);
    sl_reload_idents(&n->opts, &n->idents, n->service, n->server, &n->log);
    if (n->gossip) {
        char gerr[256];
        if (sl_gossipnode_reload_keyring(n->gossip, gerr, sizeof gerr))
            sl_log_error(&n->log, "reload of the gossip key ring failed, keeping the current "
                         "one: %s", gerr);
    }
    char serr[512];
    int src = n->rstore ? sl_rstore_reload_tls(n->rstore, serr, sizeof serr) : 1;
    if (src < 0)
        sl_log_error(&n->log, "reload of the Redis TLS files failed, keeping the current ones: %s",
                     serr);
    else if (src == 0)
        sl_log_info(&n->log, "reload: Redis TLS files read again");
    char aerr[512];
    int arc = sl_adminsrv_reload_token(n->admin_tcp, aerr, sizeof aerr);
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
    sl_adminsrv_shutdown(n->admin_tcp, left);
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
        sl_statedir_write(n->opts.state_dir, n->engine, n->snapshot_flags, &n->snapshot_key,
                          sl_wall_ms(), &n->log);
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
    sl_adminsrv_free(n->admin_tcp);
    sl_adminsrv_free(n->metrics_srv);
    sl_feed_free(n->feed);
    sl_observer_stop(n->observer); /* before the server goes: it posts to its workers */
    sl_server_free(n->server);
    sl_observer_free(n->observer);
    sl_alive_free(n->alive); /* after the server: its last posted steps have run */
    sl_statuspage_history_destroy(&n->history);
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
    sl_peersig_free(n->peersig);   /* after the router too: its peers sign with it */
    sl_secret_wipe(n->snapshot_key_buf, sizeof n->snapshot_key_buf);
    sl_engine_free(n->engine);
    sl_metrics_free(n->metrics);
    sl_config_free(&n->opts);
    sl_topology_destroy(&n->topology);
    for (int i = 0; n->argv && i < n->argc; i++)
        free(n->argv[i]);
    free(n->argv);
    free(n);
}

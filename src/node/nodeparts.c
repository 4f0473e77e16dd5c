/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A node's parts, each built from the options (node/node_int.h; node/node.c calls them in its
 * build order and releases what they made): the metrics registry and the engine with its
 * --state-dir snapshot, the gossip overlay, the router with peer TLS and the Redis store (and the
 * node's decider: one of them or the engine), the one etcd source and what attaches to it
 * (Levee quotas, the switchboard behind the protection
 * service, Envoy RLS rules), the service with its client identities and the role's handler
 * (observer, proxy with its limiter set), the admin and /metrics listeners, the Graphite bridge.
 * Each fills its field of struct sl_node and says what went wrong in err.
 */
#include "node/node_int.h"

#include "base/file.h"
#include "core/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- Graphite ------------------------------------------------------------------------------ */

/* --graphite-addr: start the bridge (nothing with an empty address) and its two metrics. */
int sl_nodeparts_graphite(sl_node *n, char *err, size_t errlen)
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

/* Peer calls over TLS when the port has it (or --peer-tls-cert names a certificate), and the
 * client-proxy's calls to its limiters also with --peer-tls-ca alone (docs/levee.md). */
static int start_peer_tls(sl_node *n, char *err, size_t errlen)
{
    const sl_options *o = &n->opts;
    bool proxy = o->role == SL_ROLE_PROXY;
    if (!(o->peer_tls_cert[0] || (proxy && o->peer_tls_ca[0])) ||
        (o->discovery == SL_DISCOVERY_NONE && !proxy))
        return 0;
    if (!o->peer_tls_ca[0])
        sl_log_warn(&n->log, "peer TLS without --peer-tls-ca: peers' certificates are not "
                             "verified (the client CA --tls-ca is not trusted for peers)");
    sl_tls_ctx *ctx;
    int rc = sl_reload_read_peer_tls(&n->opts, &ctx, err, errlen);
    if (rc)
        return rc;
    n->peer_tls = sl_tls_slot_new(ctx);
    sl_tls_ctx_unref(ctx);
    return n->peer_tls ? 0 : -ENOMEM;
}

/* Whether every address a cluster node is known by is loopback: its own (listen, advertise,
 * gossip) and, with a static list, every peer's. */
static bool cluster_on_loopback(const sl_options *o)
{
    if (!sl_addr_is_loopback(o->listen_addr) || !sl_addr_is_loopback(o->advertise_addr))
        return false;
    if (o->gossip_addr[0] && !sl_addr_is_loopback(o->gossip_addr))
        return false;
    if (o->discovery == SL_DISCOVERY_STATIC)
        for (size_t i = 0; i < o->peers.n; i++)
            if (!sl_addr_is_loopback(o->peers.items[i]))
                return false;
    return true;
}

/* --peer-auth resolved into what a PeersV1 call must prove (docs/cluster.md, "Peer
 * authentication"), with --peer-secret-file read; a clustered node with no credential off
 * loopback does not start (naming the options to set). */
static int start_peer_auth(sl_node *n, char *err, size_t errlen)
{
    const sl_options *o = &n->opts;
    int rc;
    if (o->peer_secret_file[0]) {
        sl_peersig_keys *k;
        char ferr[384];
        if ((rc = sl_peersig_keys_read(o->peer_secret_file, &k, ferr, sizeof ferr))) {
            snprintf(err, errlen, "peer-secret-file %s", ferr);
            return rc;
        }
        n->peersig = sl_peersig_new(k);
        sl_peersig_keys_unref(k);
        if (!n->peersig)
            return -ENOMEM;
    }
    bool clustered = o->discovery != SL_DISCOVERY_NONE;
    bool mtls = n->peer_tls && o->peer_tls_ca[0];
    int mode = o->peer_auth;
    if (mode == SL_PEER_AUTH_AUTO)
        mode = n->peersig ? SL_PEER_AUTH_SECRET : mtls ? SL_PEER_AUTH_MTLS : SL_PEER_AUTH_ADDRESS;
    if (mode == SL_PEER_AUTH_NONE)
        mode = SL_PEER_AUTH_INSECURE;
    if (mode == SL_PEER_AUTH_MTLS && !mtls) {
        snprintf(err, errlen, "peer-auth mtls: needs peer TLS (--tls-cert or --peer-tls-cert) "
                              "and --peer-tls-ca in a cluster");
        return -EINVAL;
    }
    bool credential = mode == SL_PEER_AUTH_SECRET || mode == SL_PEER_AUTH_MTLS;
    if (clustered && !credential && o->peer_auth == SL_PEER_AUTH_AUTO) {
        if (!cluster_on_loopback(o)) {
            snprintf(err, errlen, "a cluster node off loopback needs a peer credential: set "
                                  "--peer-secret-file FILE (or peer mTLS: --peer-tls-ca with "
                                  "--tls-cert), or --peer-auth insecure to opt out");
            return -EINVAL;
        }
        sl_log_warn(&n->log, "peer calls are not authenticated (a loopback-only cluster: any "
                             "process on this host can make them); set --peer-secret-file");
    }
    if (clustered && !credential && o->client_tokens_file[0]) {
        snprintf(err, errlen, "client-tokens-file: a cluster with client tokens needs a peer "
                              "credential (--peer-secret-file, or peer mTLS with --peer-tls-ca): "
                              "without one PeersV1 would let callers around the tokens");
        return -EINVAL;
    }
    if (o->peer_auth == SL_PEER_AUTH_ADDRESS || o->peer_auth == SL_PEER_AUTH_NONE)
        sl_log_warn(&n->log, "--peer-auth %s is deprecated: use %s",
                    o->peer_auth == SL_PEER_AUTH_ADDRESS ? "address" : "none",
                    o->peer_auth == SL_PEER_AUTH_ADDRESS ? "--peer-secret-file" : "insecure");
    if (mode == SL_PEER_AUTH_INSECURE)
        sl_log_warn(&n->log, "--peer-auth insecure: PeersV1 is served to anyone, without a "
                             "credential (counted in sluice_peer_insecure_calls_total)");
    n->peer_auth = mode;
    return 0;
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
int sl_nodeparts_storage(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    if (o->storage_addrs.n == 0)
        return 0;
    const char *eps[64];
    size_t neps = o->storage_addrs.n < 64 ? o->storage_addrs.n : 64;
    for (size_t i = 0; i < neps; i++)
        eps[i] = o->storage_addrs.items[i];
    sl_watched_conn sc = {
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

int sl_nodeparts_storage_watch(sl_node *n, char *err, size_t errlen)
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

int sl_nodeparts_quotas(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    if (o->storage_addrs.n == 0 && !(o->quota_file && o->quota_file[0]))
        return 0;
    sl_quotasrc_config qc = {
        .conn.source = n->storage, /* etcd; NULL: the quota file or nothing */
        .conn.file = o->quota_file,
        .conn.request_timeout_ms = o->storage_timeout_ns / 1000000,
        .conn.log = &n->log,
    };
    int rc = sl_quotasrc_new(&qc, &n->quotas);
    if (rc) {
        if (o->storage_addrs.n == 0)
            snprintf(err, errlen, "option 'quota-file': %s: %s", o->quota_file, strerror(-rc));
        else
            snprintf(err, errlen, "quotas from etcd: %s", strerror(-rc));
        return rc;
    }
    return sl_quotasrc_register_metrics(n->quotas, n->metrics);
}

/* ---- protection (kill switches, shadow mode, leases, shedders) ------------------------------ */

int sl_nodeparts_protection(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    sl_killswitch_config kc = {
        .conn.source = n->storage, /* etcd; NULL: the quota file or nothing */
        .conn.file = o->quota_file,
        .max_entries = (size_t)o->max_switches,
        .conn.request_timeout_ms = o->storage_timeout_ns / 1000000,
        .conn.log = &n->log,
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

/* The admin listeners (unless --admin-api=false): the Unix socket (--admin-socket, always) and
 * TCP (--admin-addr, only when given: with the token, and off loopback with TLS); and the
 * read-only /metrics one (--metrics-addr): listeners of their own, so the client port serves
 * neither admin call. Every address must be had: a taken one fails the start. */
int sl_nodeparts_admin(sl_node *n, char *err, size_t errlen)
{
    const sl_options *o = &n->opts;
    sl_adminsrv_config ac = {.token_file = NULL, .admin = true,
                             .protect = n->protect, .metrics = n->metrics,
                             .max_body_bytes = 65536,
                             .status = {.instance = o->instance_id, .listen_addr = o->listen_addr,
                                        .advertise_addr = o->discovery != SL_DISCOVERY_NONE
                                                              ? o->advertise_addr : NULL,
                                        .workers = (int)o->workers, .started_ms = sl_wall_ms(),
                                        .engine = n->engine, .router = n->router,
                                        .protect = n->protect, .quotas = n->quotas,
                                        .service = n->service, .history = &n->history,
                                        .opts = o}};
    int rc;
    if (o->admin_api) {
        char path[256], dir[256];
        if (sl_config_admin_socket(o->admin_socket, path, sizeof path, dir, sizeof dir)) {
            snprintf(err, errlen, "admin-socket: the path is too long (at most 107 bytes)");
            return -ENAMETOOLONG;
        }
        /* the default directory under $XDG_RUNTIME_DIR or /run: ours, the owner's alone */
        if (dir[0] && mkdir(dir, 0700) && errno != EEXIST) {
            rc = -errno;
            snprintf(err, errlen, "admin-socket %s: cannot create %s: %s (set --admin-socket "
                     "PATH, or --admin-api=false)", path, dir, strerror(-rc));
            return rc;
        }
        ac.socket_path = path;
        if ((rc = sl_adminsrv_start(&ac, &n->admin, err, errlen)))
            return rc;
        sl_log_info(&n->log, "admin listening socket=%s", path);
        ac.socket_path = NULL;
    }
    if (o->admin_api && o->admin_addr[0]) {
        ac.addr = o->admin_addr;
        ac.token_file = o->admin_token_file;
        ac.counts_with = n->admin;
        sl_tls_ctx *tls = NULL;
        bool want_tls = !sl_addr_is_loopback(o->admin_addr) && o->tls_cert[0];
        if (want_tls && (rc = sl_reload_read_server_tls(o, &tls, err, errlen)))
            return rc;
        ac.tls = tls;
        rc = sl_adminsrv_start(&ac, &n->admin_tcp, err, errlen);
        sl_tls_ctx_unref(tls); /* the listener holds its own reference */
        if (rc)
            return rc;
        sl_log_info(&n->log, "admin listening addr=%s port=%u token=yes tls=%s", ac.addr,
                    sl_adminsrv_port(n->admin_tcp), tls ? "yes" : "no");
        ac.tls = NULL;
    }
    if (o->metrics_addr[0]) {
        ac.addr = o->metrics_addr;
        ac.token_file = NULL;
        ac.admin = false;
        ac.counts_with = NULL;
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

/* --cluster-hash-secret-file: the clustered engine's key ids keyed with the cluster's secret
 * (core/store.h), before anything is decided or loaded; without it, a warning: chosen keys can
 * share another key's state. */
static int cluster_key_ids(sl_node *n, const sl_options *o, char *err, size_t errlen)
{
    sl_key_ids ids;
    const char *path = o->cluster_hash_secret_file;
    if (!path || !path[0]) {
        sl_log_warn(&n->log, "cluster key ids are unkeyed (the public XXH3 seed): clients can "
                             "compute keys that share another key's state; set "
                             "--cluster-hash-secret-file on every node");
        return 0;
    }
    char *buf = NULL, ferr[1024];
    size_t len = 0;
    int rc = sl_secret_read(path, 4096, &buf, &len, ferr, sizeof ferr); /* the owner's alone */
    if (rc) {
        snprintf(err, errlen, "--cluster-hash-secret-file: %s", ferr);
        return rc;
    }
    size_t all = len;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    rc = sl_key_ids_init(&ids, buf, len);
    sl_secret_free(buf, all);
    if (rc) {
        snprintf(err, errlen, "--cluster-hash-secret-file %s: %zu bytes, at least %d needed "
                 "(e.g. head -c 32 /dev/urandom | base64 > FILE)", path, len,
                 SL_KEY_IDS_MIN_MATERIAL);
        return rc;
    }
    sl_engine_set_key_ids(n->engine, &ids);
    sl_log_info(&n->log, "cluster key ids keyed fingerprint=%016llx (must match on every node)",
                (unsigned long long)ids.fingerprint);
    sl_secret_wipe(&ids, sizeof ids);
    return 0;
}

/* With a cluster secret, the snapshot is authenticated under a key derived from it (a snapshot
 * someone else wrote is not loaded; node/statedir.h), and during a rotation (two secrets) a
 * snapshot under the second is accepted too. The file is read again by the router's
 * part, which keeps the secret; the derived key stays here, wiped at free. */
static int snapshot_key(sl_node *n, char *err, size_t errlen)
{
    const sl_options *o = &n->opts;
    if (!o->peer_secret_file[0])
        return 0;
    sl_peersig_keys *k;
    char ferr[384];
    int rc = sl_peersig_keys_read(o->peer_secret_file, &k, ferr, sizeof ferr);
    if (rc) {
        snprintf(err, errlen, "peer-secret-file %s", ferr);
        return rc;
    }
    /* written with the first secret's key; during a rotation the second's is accepted too */
    rc = sl_peersig_keys_derive(k, 0, "snapshot", n->snapshot_key_buf[0]);
    bool two = !rc && sl_peersig_keys_count(k) > 1 &&
               !sl_peersig_keys_derive(k, 1, "snapshot", n->snapshot_key_buf[1]);
    sl_peersig_keys_unref(k);
    if (rc) {
        snprintf(err, errlen, "peer-secret-file: cannot derive the snapshot's key");
        return rc;
    }
    n->snapshot_key = (sl_statedir_key){n->snapshot_key_buf[0], SL_PEERSIG_DERIVED_LEN,
                                        two ? n->snapshot_key_buf[1] : NULL,
                                        two ? SL_PEERSIG_DERIVED_LEN : 0};
    return 0;
}

/* The metrics registry, the engine (with a --state-dir snapshot loaded into it) and the snapshot
 * timer. Fills *ecp: the router validates GLOBAL answers against the engine's limits. */
int sl_nodeparts_engine(sl_node *n, sl_engine_config *ecp, char *err, size_t errlen)
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
    /* A state directory that does not exist yet is made (its parent was found writable by the
     * start-up check), so that the first snapshot has somewhere to go. */
    if (o->state_dir && mkdir(o->state_dir, 0700) == 0)
        sl_log_info(&n->log, "state-dir %s created", o->state_dir);
    if (o->state_dir && (rc = snapshot_key(n, err, errlen)))
        return rc;
    sl_statedir_snap snap = {0};
    if (o->state_dir && sl_statedir_read(o->state_dir, &acfg, &n->snapshot_key, &n->log, &snap)) {
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
    if (ec.cluster_keys && (rc = cluster_key_ids(n, o, err, errlen))) {
        sl_statedir_load(&snap, NULL, &acfg, 0, &n->log); /* unmaps only */
        return rc;
    }
    if (snap.map)
        sl_statedir_load(&snap, n->engine, &acfg, sl_wall_ms(), &n->log);
    if (o->state_dir &&
        (rc = sl_statedir_timer_start(&n->snapshot_timer, o->state_dir, n->engine,
                                      n->snapshot_flags, &n->snapshot_key,
                                      o->snapshot_period_ns / 1000000,
                                      &n->log))) {
        snprintf(err, errlen, "snapshot timer: %s", strerror(-rc));
        return rc;
    }
    if ((rc = sl_collectors_engine(&n->collectors, n->metrics, n->engine)) ||
        (rc = sl_collectors_process(n->metrics))) {
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
        return rc;
    }

    *ecp = ec;
    return 0;
}

/* --gossip-addr: join the SWIM overlay (gossip/gossipnode.h), and its metrics. */
int sl_nodeparts_gossip(sl_node *n, char *err, size_t errlen)
{
    int rc = sl_gossipnode_start_options(&n->opts, &n->log, &n->gossip, err, errlen);
    if (!rc && n->gossip && (rc = sl_collectors_gossip(&n->collectors, n->metrics, n->gossip)))
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
    return rc;
}

int sl_nodeparts_router(sl_node *n, const sl_engine_config *ec, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    int rc;
    sl_router_config rcfg = {.engine = n->engine, .engine_cfg = ec, .workers = (int)o->workers,
                             .log = &n->log, .metrics = n->metrics};
    sl_router_config_from_options(&rcfg, o);
    rcfg.dns_server = o->dns_server;
    if ((rc = start_peer_tls(n, err, errlen)) || (rc = start_peer_auth(n, err, errlen)))
        return rc;
    rcfg.peer_tls = n->peer_tls;
    rcfg.peer_sig = n->peer_auth == SL_PEER_AUTH_SECRET ? n->peersig : NULL;
    rcfg.gossip = n->gossip;
    if ((rc = sl_router_new(&rcfg, &n->router))) {
        snprintf(err, errlen, "router: %s", strerror(-rc));
        return rc;
    }
    if (o->store == SL_STORE_REDIS) {
        sl_rstore_config sc = {
            .engine = n->engine, .engine_cfg = ec,
            .addrs = (const char *const *)(o->redis_sentinel.n ? o->redis_sentinel.items
                                                                : o->redis_addrs.items),
            .n_addrs = o->redis_sentinel.n ? o->redis_sentinel.n : o->redis_addrs.n,
            .sentinel_master = o->redis_sentinel.n ? o->redis_master : NULL,
            .user = o->redis_user, .password_file = o->redis_password_file,
            .timeout_ms = o->redis_timeout_ns / 1000000, .batch_items = o->redis_batch_items,
            .over_limit_cache = (uint32_t)o->redis_over_limit_cache,
            .fail_open = o->fail_open, .cluster = o->redis_cluster,
            .cluster_refresh_ms = o->redis_cluster_refresh_ns / 1000000,
            .max_reply_bytes = o->redis_max_reply, .max_queued_bytes = o->redis_max_queued,
            .tls = o->redis_tls, .tls_ca = o->redis_tls_ca, .tls_cert = o->redis_tls_cert,
            .tls_key = o->redis_tls_key, .tls_server_name = o->redis_tls_server_name,
            .workers = (int)o->workers, .log = &n->log, .metrics = n->metrics};
        if ((rc = sl_rstore_new(&sc, &n->rstore, err, errlen)))
            return rc;
    }

    /* The node's decider, chosen once (decide/decider.h): the Redis store under --store redis,
     * else in a cluster the router (each item to its owner), else the engine. A peer's
     * GetPeerRateLimits batch holds items it picked this node to own: in a cluster they go to
     * the router's owner side (decided here, never forwarded again, GLOBAL ones queued for
     * broadcast); on the Redis store every node decides its own items there, a peer's too;
     * standalone, the engine. */
    if (n->rstore) {
        n->decider = n->peer_decider = sl_rstore_decider(n->rstore);
    } else if (o->discovery != SL_DISCOVERY_NONE) {
        n->decider = sl_router_decider(n->router);
        n->peer_decider = sl_router_peer_decider(n->router);
    } else {
        n->decider = n->peer_decider = sl_decider_local(n->engine);
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
        .tls = n->peer_tls,
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
int sl_nodeparts_rls(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    bool dir = o->rls_config_dir && o->rls_config_dir[0];
    if (!dir && !n->storage)
        return 0;
    sl_rlssrc_config rc_cfg = {.conn.source = dir ? NULL : n->storage,
                               .conn.file = dir ? o->rls_config_dir : NULL,
                               .poll_ms = o->rls_poll_period_ns / 1000000, .conn.log = &n->log};
    int rc = sl_rlssrc_new(&rc_cfg, &n->rls, err, errlen);
    if (rc)
        return rc;
    if ((rc = sl_rlssrc_register_metrics(n->rls, n->metrics)))
        snprintf(err, errlen, "metrics: %s", strerror(-rc));
    return rc;
}

/* The request handler every dialect goes through (client identities first: it holds them). */
int sl_nodeparts_service(sl_node *n, char *err, size_t errlen)
{
    sl_options *o = &n->opts;
    int rc;
    if ((rc = load_idents(n, err, errlen)))
        return rc;
    sl_service_config scfg = {
        .engine = n->engine,
        .router = n->router,
        .rstore = n->rstore,
        .decider = &n->decider,
        .peer_decider = &n->peer_decider,
        .metrics = n->metrics,
        .log = &n->log,
        .workers = (int)o->workers,
        .advertise_addr = o->advertise_addr,
        .quotas = n->quotas,
        .protect = n->protect,
        .peer_auth = n->peer_auth,
        .peersig = n->peersig,
        .peer_skew_ms = o->peer_auth_skew_ns / 1000000,
        .peer_max_globals = (size_t)o->peer_max_globals,
        .peer_max_transfer_keys = (size_t)o->peer_max_transfer_keys,
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
                                   .all_or_nothing = o->rls_all_or_nothing,
                                   .quota_mode = o->rls_quota_mode,
                                   .dynamic_metadata = o->rls_dynamic_metadata,
                                   .near_permille =
                                       (uint32_t)(o->rls_near_limit_ratio * 1000 + 0.5),

                                   .max_names = (uint32_t)o->metrics_max_names};
    const struct {
        const char *opt, *v;
        char *to;
    } names[] = {{"rls-header-limit", o->rls_header_limit, scfg.rls_cfg.header_limit},
                 {"rls-header-remaining", o->rls_header_remaining, scfg.rls_cfg.header_remaining},
                 {"rls-header-reset", o->rls_header_reset, scfg.rls_cfg.header_reset}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].v) >= SL_RLS_HEADER_MAX) {
            snprintf(err, errlen, "option '%s': a header name of at most %d bytes",
                     names[i].opt, SL_RLS_HEADER_MAX - 1);
            return -EINVAL;
        }
        strcpy(names[i].to, names[i].v);
    }
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A node's parts, private to the node module's two files and to nothing else: node/node.c (the
 * build order, the worker hooks, the client port, start, reload, shutdown and the embedding API
 * of include/sluice/node.h) and node/nodeparts.c (each part built from the options). struct
 * sl_node is here so that both see it; nothing here is on a request path.
 */
#ifndef SLUICE_NODE_NODE_INT_H
#define SLUICE_NODE_NODE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "sluice/node.h"
#include "auth/addr.h"
#include "auth/idents.h"
#include "auth/peersig.h"
#include "auth/secret.h"
#include "gossip/gossipnode.h"
#include "cluster/router.h"
#include "config/config.h"
#include "config/killswitch.h"
#include "config/quotasrc.h"
#include "config/watched.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "core/snapshot.h"
#include "net/server.h"
#include "node/adminsrv.h"
#include "node/statuspage.h"
#include "node/alive.h"
#include "node/collectors.h"
#include "node/graphite.h"
#include "levee/observer.h"
#include "node/reload.h"
#include "node/service.h"
#include "node/statedir.h"
#include "protect/protect.h"
#include "levee/feed.h"
#include "levee/proxy.h"
#include "levee/topology.h"
#include "sluice/clock.h"

struct sl_node {
    sl_collectors collectors; /* the node's own metrics' arguments (node/collectors.h) */
    sl_options opts;
    sl_logger log;
    sl_metrics *metrics;
    sl_engine *engine;
    sl_router *router;
    sl_rstore *rstore;     /* --store redis, else NULL */
    sl_decider decider;    /* what decides every batch: the Redis store, the router or the engine
                              (sl_nodeparts_router picks it) */
    sl_decider peer_decider; /* what decides a peer's GetPeerRateLimits batch (the same rules) */
    sl_service *service;
    sl_server *server;
    sl_watched_source *storage; /* the one etcd watch feeding quotas and switches, or NULL */
    sl_quotasrc *quotas;   /* Levee quotas (file or etcd); NULL when neither is configured */
    sl_tls_slot *peer_tls; /* client context of peer calls over TLS (reloaded on SIGHUP), or NULL */
    sl_peersig *peersig;   /* the cluster secret (--peer-secret-file, reloaded on SIGHUP), or NULL */
    int peer_auth;         /* --peer-auth resolved (sl_nodeparts_router): what PeersV1 needs */
    sl_killswitch *switches; /* kill switches, shadow mode, concurrency and fleet settings */
    sl_protect *protect;     /* leases, shedders, switches on the request path */
    sl_rlssrc *rls;          /* --rls-config-dir for Envoy's ShouldRateLimit; NULL without */
    uv_timer_t expiry_timer;
    bool expiry_started;
    sl_statuspage_history history; /* the status page chart's past (sampled by expiry_tick) */
    int64_t history_next_ms;       /* monotonic ms: the next sample */
    int64_t gc_next_ms;    /* monotonic ms: when the next idle-key collection starts */
    bool gc_running;       /* a collection pass is in progress (worker 0 only) */
    int64_t limited_check_ms; /* monotonic ms: next look at evictions of limited keys */
    uint64_t limited_logged;  /* evictions of limited keys already logged */
    sl_graphite *graphite; /* NULL without --graphite-addr */
    sl_gossipnode *gossip; /* the SWIM overlay; NULL without --gossip-addr */
    sl_adminsrv *admin;    /* the admin socket (--admin-socket); NULL with --admin-api=false */
    sl_adminsrv *admin_tcp; /* the TCP admin listener; NULL without --admin-addr */
    sl_adminsrv *metrics_srv; /* the read-only /metrics listener; NULL without --metrics-addr */
    sl_idents *idents;     /* client identities; NULL without --client-tokens-file */
    sl_statedir_timer snapshot_timer; /* --snapshot-period writer (node/statedir.h) */
    sl_statedir_key snapshot_key; /* authenticates the snapshot: derived from the cluster secret
                                     (--peer-secret-file) into snapshot_key_buf; none: {0} */
    uint8_t snapshot_key_buf[2][SL_PEERSIG_DERIVED_LEN]; /* the first secret's, the second's */
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

#define SL_NODEPARTS_HIDDEN __attribute__((visibility("hidden")))

/* Each part of a node from its options, in build order (node.c build()): 0, or a negative errno
 * with the reason in err. What a part builds hangs off the node, for sl_node_free to release. */

/* The metrics registry, the engine (with a --state-dir snapshot loaded into it) and the snapshot
 * timer. Fills *ecp: the router validates GLOBAL answers against the engine's limits. */
SL_NODEPARTS_HIDDEN int sl_nodeparts_engine(sl_node *n, sl_engine_config *ecp, char *err,
                                            size_t errlen);
/* --gossip-addr: the SWIM overlay and its metrics (none without the option). */
SL_NODEPARTS_HIDDEN int sl_nodeparts_gossip(sl_node *n, char *err, size_t errlen);
/* The router (with peer TLS) and, under --store redis, the Redis store; then the node's
 * deciders. */
SL_NODEPARTS_HIDDEN int sl_nodeparts_router(sl_node *n, const sl_engine_config *ec, char *err,
                                            size_t errlen);
/* With --storage-addrs: the one etcd source of quotas, switches and RLS rules (not started). */
SL_NODEPARTS_HIDDEN int sl_nodeparts_storage(sl_node *n, char *err, size_t errlen);
/* Levee quotas (etcd or --quota-file; none without either). */
SL_NODEPARTS_HIDDEN int sl_nodeparts_quotas(sl_node *n, char *err, size_t errlen);
/* The switchboard and the protection service (leases, shedders, shadow mode). */
SL_NODEPARTS_HIDDEN int sl_nodeparts_protection(sl_node *n, char *err, size_t errlen);
/* Envoy RLS rules (--rls-config-dir, else etcd's, else none). */
SL_NODEPARTS_HIDDEN int sl_nodeparts_rls(sl_node *n, char *err, size_t errlen);
/* The etcd source started, once quotas, switches and RLS rules have attached to it. */
SL_NODEPARTS_HIDDEN int sl_nodeparts_storage_watch(sl_node *n, char *err, size_t errlen);
/* Client identities, the service, and the role's handler (observer, proxy). */
SL_NODEPARTS_HIDDEN int sl_nodeparts_service(sl_node *n, char *err, size_t errlen);
/* The admin listener and the read-only /metrics one. */
SL_NODEPARTS_HIDDEN int sl_nodeparts_admin(sl_node *n, char *err, size_t errlen);
/* --graphite-addr: the bridge and its metrics (last: every collector it renders exists). */
SL_NODEPARTS_HIDDEN int sl_nodeparts_graphite(sl_node *n, char *err, size_t errlen);

#endif

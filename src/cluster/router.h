/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The router: where each item of an API batch gets decided. On a standalone node every item goes
 * to the local engine. In a cluster (discovery != none) each item's owner is picked by consistent
 * hashing over the peer list; items owned here go to the engine, the others are batched per peer
 * and forwarded over PeersV1/GetPeerRateLimits, and GLOBAL items are answered from the local copy
 * and synchronised asynchronously (docs/cluster.md).
 *
 * The router is asynchronous: sl_router_submit() may call `done` before it returns (everything was
 * local) or later, on the same worker loop thread, when the last peer answered or timed out. Every
 * item of the batch has an answer (a response or a per-item error) when `done` runs. In a cluster
 * every answer carries metadata "owner" (the owner's advertise address); an answer made locally
 * because the owner could not be reached (--fail-open) also carries "fail_open" with the reason.
 *
 * Lifecycle in a daemon:
 *
 *     sl_router_new(&cfg, &r);                      // cfg from sl_router_config_from_options()
 *     server hooks: on_worker_start -> sl_router_worker_start(r, worker, loop)
 *                   on_worker_stop  -> sl_router_worker_stop(r, worker)
 *     sl_server_start(&srv, ...);
 *     sl_router_start(r, srv);                      // membership: registers, reads the peer list
 *     ...
 *     sl_router_stop(r);                            // leaves the cluster (etcd: revokes the lease)
 *     sl_server_shutdown(srv, grace); sl_server_wait(srv);
 *     sl_router_free(r);
 *
 * Threads: submit / peer_rate_limits / update_globals run on the worker loop named by `worker`;
 * health, peer_count and set_peers from any thread.
 */
#ifndef SLUICE_CLUSTER_ROUTER_H
#define SLUICE_CLUSTER_ROUTER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "decide/batch.h"
#include "decide/decider.h"
#include "cluster/peerwire.h"
#include "ctlplane/k8s.h"
#include "config/config.h"
#include "ctlplane/etcd.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "net/server.h"
#include "sluice/engine.h"

typedef struct sl_router sl_router;

typedef struct sl_router_config {
    sl_engine *engine;                   /* the local engine (not owned) */
    const sl_engine_config *engine_cfg;  /* its limits, to validate GLOBAL answers; NULL = defaults */

    /* Everything below matters only in a cluster; discovery SL_DISCOVERY_NONE (0) keeps the
     * standalone path. Zero values mean the defaults of sluiced's options. */
    int discovery;                       /* sl_discovery */
    int workers;                         /* worker loops of the server (>= 1) */
    const char *advertise_addr;          /* this node's peer address, "host:port" */
    const char *const *peers;            /* static */
    size_t n_peers;
    const char *dns_name;                /* dns */
    const char *dns_server;
    int64_t dns_period_ns;
    const char *const *etcd_endpoints;   /* etcd */
    size_t n_etcd_endpoints;
    const char *storage_prefix;
    int64_t peer_lease_ttl_ns;
    int64_t etcd_timeout_ns;
    sl_etcd_tls etcd_tls;                /* etcd over https:// (--storage-tls-*) */
    sl_k8s_config k8s;                   /* k8s; its strings live until sl_router_start returns */
    struct sl_gossipnode *gossip;        /* gossip: the node's overlay (gossip/gossipnode.h) */
    int picker;                          /* sl_peer_picker */
    unsigned replicas;
    int64_t batch_wait_ns;               /* 500 us */
    size_t batch_limit;                  /* 1000 (also the most a peer accepts in one call) */
    int64_t batch_timeout_ns;            /* 500 ms */
    int64_t global_sync_wait_ns;         /* 100 ms */
    size_t global_batch_limit;           /* 1000 */
    size_t global_max_keys;              /* GLOBAL keys held for local answers; 100000 */
    bool fail_open;
    size_t max_msg;                      /* largest peer answer decoded (bytes); 0 = 1 MiB */
    sl_tls_slot *peer_tls;               /* client context for peer calls over TLS (not owned;
                                            outlives the router; reloadable); NULL = h2c */
    struct sl_peersig *peer_sig;         /* the cluster secret every peer call is signed with
                                            (auth/peersig.h; not owned, reloadable); NULL = none */
    sl_logger *log;                      /* may be NULL */
    sl_metrics *metrics;                 /* may be NULL */
} sl_router_config;

/* Fill the cluster fields from sluiced's options (strings point into o, which must outlive the
 * router). engine and workers are the caller's. */
void sl_router_config_from_options(sl_router_config *c, const sl_options *o);

int sl_router_new(const sl_router_config *cfg, sl_router **out);
void sl_router_free(sl_router *r);

/* Server hooks (sl_server_config.on_worker_start / on_worker_stop), run in the worker thread. */
void sl_router_worker_start(sl_router *r, int worker, uv_loop_t *loop);
void sl_router_worker_stop(sl_router *r, int worker);

/* Start membership once the server runs (peer lists are handed to the loops with
 * sl_server_post). 0 or a negative errno. No-op when standalone. */
int sl_router_start(sl_router *r, sl_server *srv);
/* Leave the cluster gracefully (stops discovery; etcd: revokes the lease). Call before the
 * server shuts down. */
void sl_router_stop(sl_router *r);

/* Replace the peer list (what a membership source does; also for tests and embedders). Any
 * thread. */
void sl_router_set_peers(sl_router *r, const char *const *addrs, size_t n);

/* Decide every item of b that is not already answered (b->answered[i]). Call on worker loop
 * `worker`; `done(ud, b)` runs exactly once on that thread. */
void sl_router_submit(sl_router *r, int worker, sl_batch *b, int64_t now_ms, sl_batch_done_cb done,
                      void *ud);

/* PeersV1/GetPeerRateLimits, server side: this node owns every item (it never forwards again);
 * GLOBAL items are queued for broadcast. `done` runs exactly once on the worker thread. */
void sl_router_peer_rate_limits(sl_router *r, int worker, sl_batch *b, int64_t now_ms,
                                sl_batch_done_cb done, void *ud);

/* The router as a decider (decide/decider.h): submit is sl_router_submit, the worker hooks
 * sl_router_worker_start / _stop (a second start of a worker is a no-op, so the node may start
 * the router as its membership and again as its decider). The peer decider is the owner side,
 * sl_router_peer_rate_limits, with the same hooks: what a clustered node decides PeersV1 batches
 * with. Both point at r, which must outlive them. */
sl_decider sl_router_decider(sl_router *r);
sl_decider sl_router_peer_decider(sl_router *r);

/* PeersV1/UpdatePeerGlobals, server side: take the owners' states of GLOBAL keys. */
void sl_router_update_globals(sl_router *r, int worker, const sl_peerwire_global *g, size_t n,
                              int64_t now_ms);

/* PeersV1/TransferKeys, server side: check the key state records (cluster/handoff.h: at most
 * max_keys, 0 = no cap; each expiry within its limit's duration of now), then merge them into the
 * engine. Returns the number merged, or, merging none: -E2BIG (too many), -ERANGE (record
 * *bad_at expires too late), -EINVAL (record *bad_at is malformed). Any worker thread. */
int64_t sl_router_transfer_keys(sl_router *r, const uint8_t *records, size_t len, int64_t now_ms,
                                size_t max_keys, size_t *bad_at);

/* Graceful leave, after sl_router_stop(): switch every worker to the peer list without this node
 * (requests are forwarded to the next owners) and push every key to its next owner; wait at most
 * timeout_ms for that. 0, -ETIMEDOUT, or -ENOMEM. A standalone node or a list of one: 0 at once.
 * Not on a worker thread. */
int sl_router_leave(sl_router *r, int64_t timeout_ms);

/* HealthCheck: peers known (this node included; 1 when standalone), and unhealthy with a reason
 * ("|"-joined, Gubernator's style) while calls to some peer fail or this node is not in the peer
 * list. Any thread. */
void sl_router_health(sl_router *r, bool *healthy, int32_t *peer_count, char *why, size_t why_len);

/* Whether sa (a caller's address) has the IP of a member of the peer list as worker `worker`
 * sees it (this node included); false when standalone. On that worker's thread. How PeersV1 is
 * kept to peers without TLS (node/service.c). */
bool sl_router_is_peer(sl_router *r, int worker, const struct sockaddr *sa);
/* The same, or a member of the list before the current one: a node that has just left (its key
 * was removed from etcd) still pushes its keys to their next owners with TransferKeys. */
bool sl_router_was_peer(sl_router *r, int worker, const struct sockaddr *sa);
/* Whether a verified certificate's names (sl_exchange_peer_identity's list) name the host of a
 * member of the peer list as worker `worker` sees it (auth/addr.h sl_addr_names_host), or with
 * former, of the list before it (sl_router_was_peer's case); false when standalone. On that
 * worker's thread. How PeersV1 is kept to peers over mTLS. */
/* Whether addr (an advertised "host:port", as the peer list spells it) is a member of the current
 * peer list (former: or of the previous one). The worker's thread. */
bool sl_router_has_member(sl_router *r, int worker, const char *addr, bool former);
bool sl_router_names_peer(sl_router *r, int worker, const char *names, bool former);

/* One member of the peer list as the admin status page shows it (node/statuspage.c). */
typedef struct sl_router_peer {
    char addr[128];      /* its advertise address (cut to fit) */
    bool self;           /* this node */
    int err;             /* 0, or the negative errno of the last failed call to it */
    int64_t failed_at;   /* wall ms of that failure */
} sl_router_peer;

/* The current peer list: its first `cap` members into out; returns the list's length (0 when
 * standalone). Any thread. */
size_t sl_router_peers(sl_router *r, sl_router_peer *out, size_t cap);

/* Peers this node knows, itself included (1 when standalone). */
int sl_router_peer_count(const sl_router *r);

/* Counters (summed over workers). */
typedef struct sl_router_stats {
    uint64_t local;          /* items decided by this node's engine */
    uint64_t forwarded;      /* items sent to an owner */
    uint64_t peer_calls;     /* GetPeerRateLimits calls made (forwarding) */
    uint64_t peer_errors;    /* calls that failed (any method) */
    uint64_t retries;        /* items routed again after a membership change */
    uint64_t fail_open;      /* items answered locally because the owner failed */
    uint64_t global_local;   /* GLOBAL items answered from the local copy */
    uint64_t global_sends;   /* GLOBAL hit batches sent to owners */
    uint64_t broadcasts;     /* UpdatePeerGlobals calls made */
    uint64_t updates;        /* GLOBAL states received */
    uint64_t views;          /* peer lists applied */
} sl_router_stats;

void sl_router_stats_get(sl_router *r, sl_router_stats *out);

#endif

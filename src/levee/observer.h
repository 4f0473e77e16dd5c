/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_observer: Levee's observer role. It follows the SWIM overlay (gossip/gossipnode.h) and
 * streams the member table to connected clients (client-proxies) over gRPC server streaming,
 * sluice.levee.v1.Topology/Watch (proto/levee_topology.proto): first the full view at a version,
 * then one update per change (each with the version it brings the view to), and an empty update
 * every heartbeat so a client notices a dead observer by silence. It also registers itself in
 * etcd under <prefix>/observer/<NAME> = {"gossip": "ip:port", "service": "ip:port"}, held by a
 * lease it keeps alive (a dead observer's key goes with the lease), so that limiters find the
 * overlay (gossip/gossipseeds.h) and proxies find observers (levee/feed.h).
 *
 * Threads. The gossip thread reports changes (under the observer's mutex they go into the member
 * table and a bounded journal of recent changes) and wakes each worker loop with sl_server_post,
 * at most one wake-up pending per worker. Each worker owns its watchers: on a wake-up or a
 * heartbeat it pushes what each watcher has not seen yet — the journal's entries after the
 * watcher's version, or the full view again when the journal no longer reaches back that far.
 * A watcher whose unsent bytes pass --observer-max-queue-bytes (a slow or stalled consumer) is
 * closed with RESOURCE_EXHAUSTED; past --observer-max-watchers new streams are refused the same.
 *
 * Metrics: sluice_observer_watchers (gauge), sluice_observer_events_total (updates sent),
 * sluice_observer_slow_closed_total, sluice_observer_version (gauge).
 */
#ifndef SLUICE_LEVEE_OBSERVER_H
#define SLUICE_LEVEE_OBSERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "gossip/gossipnode.h"
#include "config/config.h"
#include "ctlplane/etcd.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "net/exchange.h"
#include "net/server.h"

#define SL_OBSERVER_WATCH_PATH "/sluice.levee.v1.Topology/Watch"

typedef struct sl_observer sl_observer;

typedef struct sl_observer_config {
    sl_gossipnode *gossip;     /* the overlay; not owned */
    int workers;
    int64_t heartbeat_ms;
    uint32_t max_watchers;
    size_t max_queue_bytes;
    size_t journal;            /* recent changes kept for catching up; 0 = 1024 */
    sl_metrics *metrics;       /* may be NULL */
    sl_logger *log;            /* may be NULL */
    sl_http_handler fallback;  /* everything but Watch */
    void *fallback_ud;
    /* registration (all NULL/0: none) */
    const sl_etcd_config *etcd;
    const char *prefix;        /* --storage-prefix */
    const char *name;          /* --observer-name */
    const char *gossip_addr;
    const char *service_addr;
    int64_t lease_ttl_s;
} sl_observer_config;

int sl_observer_new(const sl_observer_config *cfg, sl_observer **out, char *err, size_t errlen);
/* sluiced's options (--observer-*, registration with --storage-addrs and --observer-name). */
int sl_observer_new_options(const sl_options *o, sl_gossipnode *g, sl_metrics *m, sl_logger *log,
                            sl_http_handler fallback, void *fallback_ud, sl_observer **out,
                            char *err, size_t errlen);
/* Once the server runs: subscribe to the overlay (wakes go to its workers) and register in etcd. */
int sl_observer_start(sl_observer *o, sl_server *srv);
/* Close every stream (grpc-status UNAVAILABLE) and unregister (revoke the lease): the first step
 * of a shutdown, so that the server's drain does not wait on open streams. Idempotent. */
void sl_observer_stop(sl_observer *o);
/* After the server's workers stopped. NULL is ignored. */
void sl_observer_free(sl_observer *o);

/* The sl_http_handler of the client port (ud = the observer). */
void sl_observer_handle(void *ud, sl_exchange *ex);
void sl_observer_worker_start(sl_observer *o, int worker, uv_loop_t *loop);
void sl_observer_worker_stop(sl_observer *o, int worker);

/* Levee's way of configuring an observer: with no --gossip-addr, its addresses come from its
 * registration <prefix>/observer/<NAME> (written by the operator): gossip-addr := "gossip",
 * advertise-addr := "service", and listen-addr := "service" when listen-addr is the default.
 * 0 (nothing to do for another role or with --gossip-addr), or a negative errno with err set. */
#define SL_OBSERVER_DEFAULT_LISTEN "127.0.0.1:5454"
int sl_observer_addrs_from_etcd(sl_options *o, char *err, size_t errlen);

/* The registration value for <prefix>/observer/<NAME>, JSON, into out: its length, or -ENOSPC. */
int sl_observer_registration(const char *gossip_addr, const char *service_addr, char *out,
                             size_t outlen);

#endif

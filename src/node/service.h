/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service: what a sluice node answers on its client address (admin calls have a listener of
 * their own, node/adminsrv.h). It routes each exchange
 * by path to a dialect adapter (Gubernator gRPC + JSON gateway, Levee /attempt, metrics), turns
 * the wire message into a sl_batch, hands the batch to the node's decider (decide/decider.h),
 * and encodes the answer. It
 * counts every call (method, transport, code) and its latency.
 *
 * Per-call state (the batch and the output buffer) comes from a per-worker pool, so a warm worker
 * does not go back to malloc per call; the pool is touched only by its worker's thread.
 */
#ifndef SLUICE_NODE_SERVICE_H
#define SLUICE_NODE_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "api/gubernator.h"
#include "api/levee.h"
#include "api/rls.h"
#include "auth/idents.h"
#include "protect/protect.h"
#include "config/quotasrc.h"
#include "config/rlssrc.h"
#include "cluster/router.h"
#include "decide/decider.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "net/exchange.h"
#include "redis/rstore.h"

typedef struct sl_service sl_service;

/* Extra health condition (e.g. the quota store lost etcd): false + a reason makes HealthCheck
 * answer unhealthy; true with a non-empty `why` stays healthy and says why in the message
 * (degraded: e.g. deciding on the last known quotas). */
typedef bool (*sl_service_health_fn)(void *ud, char *why, size_t why_len);

typedef struct sl_service_config {
    sl_engine *engine;
    sl_router *router;            /* the cluster's membership: health, the peer list, PeersV1's
                                     UpdatePeerGlobals and TransferKeys */
    sl_rstore *rstore;            /* --store redis (the decider then): /attempt's state is in
                                     Redis; NULL otherwise */
    const sl_decider *decider;    /* decides every batch: the Redis store, the router or the
                                     engine (node/nodeparts.c chooses); outlives the service */
    const sl_decider *peer_decider; /* decides GetPeerRateLimits batches (items this node owns);
                                       NULL = decider */
    sl_metrics *metrics;          /* may be NULL */
    sl_logger *log;               /* may be NULL */
    int workers;                  /* worker loops that will call the handler */
    sl_gub_config gub;
    const char *advertise_addr;   /* reported by HealthCheck in a cluster */
    sl_service_health_fn health;  /* may be NULL */
    void *health_ud;
    sl_quotasrc *quotas;          /* Levee quotas for POST /attempt; NULL: /attempt is 404 */
    sl_levee_config levee;        /* how /attempt decides (no-quota mode, headers, ...) */
    sl_protect *protect;          /* shedders, leases, switches (protect/protect.h); may be NULL */
    const sl_idents *idents;      /* client identities (--client-tokens-file); NULL: off */
    int peer_auth;                /* what a PeersV1 call must prove, resolved (node/nodeparts.c):
                                     SL_PEER_AUTH_SECRET, _MTLS, _INSECURE or _ADDRESS */
    struct sl_peersig *peersig;   /* the cluster secret (SL_PEER_AUTH_SECRET), not owned */
    int64_t peer_skew_ms;         /* a signed call's time within this of now */
    size_t peer_max_globals;      /* most globals in one UpdatePeerGlobals (0 = no cap) */
    size_t peer_max_transfer_keys; /* most key states in one TransferKeys (0 = no cap) */
    sl_rlssrc *rls;               /* --rls-config-dir (config/rlssrc.h); NULL: ShouldRateLimit
                                     answers every descriptor OK without a limit */
    sl_rls_config rls_cfg;        /* ShouldRateLimit's bounds and headers (api/rls.h) */
    uint32_t max_held;            /* X-Delay-Mode: hold: most answers one worker holds at once
                                     (beyond: answered at once with X-Delay-Ms); 0 = never hold */
} sl_service_config;

/* The node's health verdict, the one HealthCheck, grpc.health.v1, the status page and
 * /v1/admin/status give: the router's (membership, peers) and then cfg.health's (quotas
 * loaded); `why` says why not, or notes a degraded but healthy node. */
bool sl_service_verdict(const sl_service *s, char *why, size_t why_len, int32_t *peer_count);

/* HTTP/2 gRPC requests the service takes at their headers (sl_http_early_cb, ud the service):
 * unknown services and methods, and reflection's streams. */
bool sl_service_early(void *ud, const sl_http_request *rq);

int sl_service_new(const sl_service_config *cfg, sl_service **out);
void sl_service_free(sl_service *s);

/* Replace the client identities (a reload of --client-tokens-file): calls that start from now
 * on use next; the previous set is returned, still in use by calls running on the workers. The
 * caller frees it once every worker has run past its current call (e.g. after an sl_server_post
 * to each has run). Switching identities on or off is not for this: next and the service's set
 * are both non-NULL. Any thread. */
const sl_idents *sl_service_swap_idents(sl_service *s, const sl_idents *next);

/* The sl_http_handler for the server (ud = the service). */
void sl_service_handle(void *ud, sl_exchange *ex);

/* A worker started: sample its loop's load for the worker shedder (node/loadtick.h) when the
 * service has protection. Call on that worker's thread. */
void sl_service_worker_start(sl_service *s, int worker, uv_loop_t *loop);

/* A worker is stopping: stop its load sampling and release what its thread holds (its quota
 * snapshot reference). Call on that worker's thread. */
void sl_service_worker_stop(sl_service *s, int worker);

#endif

/*
 * The router: where each item of an API batch gets decided. On a standalone node every item goes
 * to the local engine. In a cluster (discovery != none) each item's owner is picked by consistent
 * hashing over the peer list; items owned here go to the engine, the others are batched per peer
 * and forwarded over PeersV1/GetPeerRateLimits, and GLOBAL items are answered from the local copy
 * and synchronised asynchronously.
 *
 * The router is asynchronous: sl_router_submit() may call `done` before it returns (everything was
 * local) or later, on the same worker loop thread, when the last peer answered or timed out. Every
 * item of the batch has an answer (a response or a per-item error) when `done` runs.
 */
#ifndef SLUICE_CLUSTER_ROUTER_H
#define SLUICE_CLUSTER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/batch.h"
#include "sluice/engine.h"

typedef struct sl_router sl_router;
typedef void (*sl_router_done_cb)(void *ud, sl_batch *b);

typedef struct sl_router_config {
    sl_engine *engine;   /* the local engine (not owned) */
} sl_router_config;

int sl_router_new(const sl_router_config *cfg, sl_router **out);
void sl_router_free(sl_router *r);

/* Decide every item of b that is not already answered (b->answered[i]). Call on worker loop
 * `worker`; `done(ud, b)` runs exactly once on that thread. */
void sl_router_submit(sl_router *r, int worker, sl_batch *b, int64_t now_ms, sl_router_done_cb done,
                      void *ud);

/* Server side of PeersV1/GetPeerRateLimits: this node is the owner of every item; decide them
 * locally (and, for GLOBAL items, queue a broadcast of the new state). Same contract as submit. */
void sl_router_peer_rate_limits(sl_router *r, int worker, sl_batch *b, int64_t now_ms,
                                sl_router_done_cb done, void *ud);

/* Server side of PeersV1/UpdatePeerGlobals: the owner's state for GLOBAL keys held here. */
struct sl_gub_global;
void sl_router_update_globals(sl_router *r, int worker, const struct sl_gub_global *g, size_t n,
                              int64_t now_ms);

/* HealthCheck's view: *healthy false (with a reason in why) while peers fail; *peer_count counts
 * this node too (1 when standalone). */
void sl_router_health(const sl_router *r, bool *healthy, int32_t *peer_count, char *why,
                      size_t why_len);

/* Peers this node knows, itself included (1 when standalone). */
int sl_router_peer_count(const sl_router *r);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gubernator calls (gRPC and JSON) under sluice's protections (protect/protect.h,
 * docs/protection.md): the Gubernator dialect of the protection service. Items keep their
 * meaning; per item metadata "priority" and, for CONCURRENCY releases, "lease_id".
 * sl_gubprotect_begin() runs before the router (the worker shedder for the whole call; kill
 * switches; the fleet shedder for CONCURRENCY acquires; lease ids into the requests),
 * sl_gubprotect_end() after it (lease ids out, shadow mode, reasons). Every limiter goes through
 * the kill -> shadow -> enforce ladder (protect/ladder.h). Answers carry metadata: "lease_id",
 * "killswitch" ("on"), "shadow" (the limiter that would have rejected), "reason", and "shed"
 * ("fleet") on an item a shedder refused: a 503-class answer the caller must not fail open on.
 *
 * Switch names: an item's `name`; "fleet" and "shed" for the shedders; "*" for all. A request
 * may also ask for shadow mode with behavior SL_SHADOW.
 */
#ifndef SLUICE_API_GUBPROTECT_H
#define SLUICE_API_GUBPROTECT_H

#include <stdbool.h>
#include <stdint.h>

#include "decide/batch.h"
#include "protect/protect.h"

/* Per-call state between begin and end (in the batch's arena; NULL when there is none). */
typedef struct sl_gubprotect_call sl_gubprotect_call;

typedef struct sl_gubprotect_verdict {
    bool shed;               /* answer the whole call UNAVAILABLE (HTTP 503) */
    int64_t retry_after_s;
    char message[200];       /* the reason, for grpc-message / the JSON error */
} sl_gubprotect_verdict;

/*
 * Before the router. `peer`: a GetPeerRateLimits call (this node owns the items; only lease ids are
 * read: the entry node already applied everything else). Returns 0 to go on (items this function
 * answered are marked answered), or 1 when the call is shed: answer it with v->message and
 * UNAVAILABLE, and do not call sl_gubprotect_end().
 */
int sl_gubprotect_begin(sl_protect *p, int worker, sl_batch *b, bool peer, int64_t now_ms,
                        sl_gubprotect_call **call, sl_gubprotect_verdict *v);
/* The fleet's leases to route before the call's own items (NULL: none): non-critical CONCURRENCY
 * acquires and the fleet half of released tokens, items of the fleet's one key, so its owner
 * holds one count for the cluster. Route it (sl_router_submit), then call fleet_done, then route
 * the call's batch. The batch belongs to the call (end() frees it). */
sl_batch *sl_gubprotect_fleet_batch(sl_gubprotect_call *call);
/* The fleet batch's answers into the call's items: shed (OVER_LIMIT, metadata shed=fleet),
 * shadow, or a fleet lease to return with the item's own. An acquire the owner could not answer
 * (an error, or metadata fail_open) is decided on this node's share of the fleet instead
 * (limit / nodes; the item gets metadata fleet=local). */
void sl_gubprotect_fleet_done(sl_protect *p, sl_gubprotect_call *call, sl_batch *b, int nodes,
                              int64_t now_ms);
/* The owner's answer to fleet item j of fb (an acquire of `*limit`), into *r (r->lease_id the fleet
 * lease, the owner's or this node's): when the owner could not answer (an error, or metadata
 * fail_open) the lease is taken from this node's share instead (*limit becomes limit / nodes) and
 * the function returns true (say fleet=local). Both dialects decide fleet answers with it. */
bool sl_gubprotect_fleet_taken(sl_protect *p, const sl_batch *fb, size_t j, int64_t *limit,
                               int64_t duration_ms, int nodes, int64_t now, sl_response *r);
/* For a call of another dialect (/attempt, /release): fb (empty) becomes a one-item fleet batch
 * to route, hits 1 acquiring a lease of `limit` or hits -1 releasing `lease`. 0 or -ENOMEM. */
int sl_gubprotect_fleet_item(sl_protect *p, sl_batch *fb, int64_t hits, int64_t limit,
                             int64_t duration_ms, uint64_t lease);
/* The same for several leases in one batch (one round trip): each of the fleet's key (res NULL)
 * or of a resource's concurrency key (sl_protect_conc_key; the resource is copied into fb),
 * hits 1 acquires a lease of `limit`, 0 renews `lease` for duration_ms, -1 releases it. */
typedef struct sl_gubprotect_lease {
    const char *res;
    size_t res_len;
    int64_t hits, limit, duration_ms;
    uint64_t lease;
} sl_gubprotect_lease;
int sl_gubprotect_lease_batch(sl_protect *p, sl_batch *fb, const sl_gubprotect_lease *items,
                              size_t n);
/* A resource's routed concurrency lease: as sl_gubprotect_fleet_taken, the fallback on this
 * node's key of the resource (sl_protect_conc_take_local) with limit / nodes. */
bool sl_gubprotect_conc_taken(sl_protect *p, const sl_batch *fb, size_t j, const char *res,
                              size_t rlen, int64_t *limit, int64_t duration_ms, int nodes,
                              int64_t now, sl_response *r);
/* Give a fleet lease and a resource's concurrency lease back (either 0: none): one of this
 * node's fallback keys is released here, one of the owner's goes into a heap batch to route and
 * hand to sl_gubprotect_giveback_done (NULL: nothing to route, or out of memory: the lease runs
 * out after its duration). */
sl_batch *sl_gubprotect_lease_release(sl_protect *p, uint64_t fleet, const char *res,
                                      size_t rlen, uint64_t conc, int64_t now);
/* Give a fleet lease back: one of this node's share is released here (NULL), one of the owner's
 * becomes a heap batch to route and hand to sl_gubprotect_giveback_done (NULL when out of memory:
 * the lease runs out after its duration). */
sl_batch *sl_gubprotect_fleet_release(sl_protect *p, uint64_t lease, int64_t now);
/* A routed fleet release's answer, counted in sluice_leases_total: 1 released, 0 not found
 * (released already or expired), -1 failed. */
int sl_gubprotect_fleet_released(sl_protect *p, const sl_response *r);
/* After end(): fleet leases of the owner that rejected items must give back, as a batch the
 * caller routes and then hands to giveback_done (which frees it); NULL when there are none. */
sl_batch *sl_gubprotect_giveback(sl_gubprotect_call *call);
void sl_gubprotect_giveback_done(sl_protect *p, sl_batch *giveback);
/* After the router, before encoding. `call` from begin (may be NULL). */
void sl_gubprotect_end(sl_protect *p, sl_gubprotect_call *call, sl_batch *b, bool peer,
                       int64_t now_ms);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Levee's POST /attempt and POST /release under sluice's protections (protect/protect.h,
 * docs/protection.md): the Levee dialect of the protection service. Header values in, one
 * sl_answer out (api/answer.h), rendered by node/serviceatt.c.
 *
 *   POST /attempt   X-Resource, X-Prefix, X-Method, X-Req-Id as for Levee (api/levee.h), plus
 *                   X-Priority: critical | post | get | test  (absent: GET/HEAD/OPTIONS -> get,
 *                               another X-Method -> post, no method -> the configured default)
 *                   X-Concurrency: acquire  -> a lease: 200 carries X-Lease-Id
 *   POST /release   X-Lease-Id (X-Resource when the id does not carry it) -> 200, 404, 400
 *
 * The checks run in this order, each through the kill -> shadow -> enforce ladder
 * (protect/ladder.h): the global kill switch "*" (nothing else runs); the worker shedder (503; it
 * protects sluiced itself, so it must cost the least); the fleet shedder (503, acquire of a
 * non-critical call); the resource's concurrency limit (429, acquire); then Levee's rate quotas
 * (429). A rejection by a later check gives back the leases of the earlier ones (one engine call
 * each), and a rate quota is never charged for a call that does not run. In a cluster the fleet is
 * one count at the fleet key's owner (sl_attempt_begin / sl_attempt_resume: the caller routes the
 * lease with api/gubprotect.h's fleet item, as for a Gubernator call; X-Fleet: local when the
 * owner could not answer and this node's share decided), and so is the resource's concurrency
 * limit (the item of its key goes in the same batch; X-Concurrency-Source: local for the
 * fallback); a node on its own decides both here. Answers that reject say
 * so with Retry-After, the RateLimit header fields and a one-line reason; X-Sluice-Shadow and
 * X-Sluice-Killswitch name the limiters a switch admitted through.
 *
 * Switch names: "levee" (all rate quotas; the Levee namespace) or a quota's name, "concurrency",
 * "fleet", "shed", "*". On /attempt the limits are the server's: no client flag asks for shadow.
 */
#ifndef SLUICE_API_ATTEMPT_H
#define SLUICE_API_ATTEMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/answer.h"
#include "decide/batch.h"
#include "api/levee.h"
#include "protect/protect.h"

typedef struct sl_attempt_req {
    sl_levee_request levee;   /* X-Resource, X-Prefix, X-Method, X-Req-Id */
    const char *priority;     /* X-Priority; NULL = absent */
    size_t priority_len;
    const char *concurrency;  /* X-Concurrency; NULL = absent */
    size_t concurrency_len;
    const char *lease_id;     /* X-Lease-Id, for X-Concurrency: renew; NULL = absent */
    size_t lease_id_len;
} sl_attempt_req;

typedef struct sl_attempt_release_req {
    const char *lease_id;     /* X-Lease-Id */
    size_t lease_id_len;
    const char *resource;     /* X-Resource (optional when the lease id carries it) */
    size_t resource_len;
    const char *req_id;       /* X-Req-Id (echoed) */
    size_t req_id_len;
} sl_attempt_release_req;

/* An /attempt whose fleet lease is the cluster's (sl_attempt_begin returned 1): what its decision
 * needs once the fleet key's owner answered. */
typedef struct sl_attempt_fleet {
    int64_t limit;         /* the fleet's non-critical limit: the whole cluster's */
    int64_t node_limit;    /* a node on its own: its share by the group size */
    int64_t duration_ms;
    sl_killswitch_mode mode;
    sl_ladder ladder;      /* the checks so far */
    /* The rate quotas in a store (--store redis): in, the batch their items go into (NULL: the
     * engine decides them); the rest is the call's state while the store decides. */
    sl_batch *store;
    sl_levee_plan *plan;
    uint64_t fleet_id, conc_id; /* leases held */
    bool routed, local;         /* the fleet lease is the owner's; X-Fleet: local */
    /* In: the batch a cluster or a store routes the call's leases in (NULL: a node on its own,
     * they are decided here) and the group's size (the fallback's share). With it, the
     * resource's concurrency lease is the cluster's too: an item of its key
     * (sl_protect_conc_key) beside the fleet's, one round trip for both. */
    sl_batch *leases;
    int nodes;
    /* The items of `leases` (-1: none): the fleet's, the resource's concurrency lease's. */
    int fleet_item, conc_item;
    int64_t conc_limit, conc_duration_ms; /* the cluster's limit; a renewal's duration */
    sl_killswitch_mode conc_mode;
    bool conc_routed, conc_local; /* conc_id is the owner's; X-Concurrency-Source: local */
    uint64_t conc_back;           /* out: the owner's concurrency lease a rejection gives back */
    int phase;                    /* sl_attempt_start / _step: what the batch in flight is */
} sl_attempt_fleet;

/*
 * Decide one /attempt on `worker`'s thread. `lcfg` and `snap` as for sl_levee_attempt(); the rate
 * quotas and the leases are decided by the protection service's engine. The answer may point
 * into req (X-Req-Id) and into itself.
 */
void sl_attempt_decide(sl_protect *p, int worker, const sl_levee_config *lcfg,
                       const sl_quota_snap *snap, const sl_attempt_req *req, int64_t now_ms,
                       sl_answer *out);
void sl_attempt_release(sl_protect *p, const sl_attempt_release_req *req, int64_t now_ms,
                        sl_answer *out);

/*
 * The same with one fleet for the cluster (docs/protection.md "One fleet for the cluster"): when
 * `routed` is non-NULL and the call needs a fleet lease, *routed is filled and 1 returned without
 * an answer: the caller takes a lease of routed->limit from the fleet key's owner (a fleet item,
 * api/gubprotect.h, read back with sl_gubprotect_fleet_taken) and calls sl_attempt_resume with
 * it. Otherwise (0) *out is the answer, as sl_attempt_decide's (routed NULL: the fleet lease is
 * this node's, its limit divided by the group size).
 */
int sl_attempt_begin(sl_protect *p, int worker, const sl_levee_config *lcfg,
                     const sl_quota_snap *snap, const sl_attempt_req *req, int64_t now_ms,
                     sl_attempt_fleet *routed, sl_answer *out);
#define SL_ATTEMPT_STORE 2 /* sl_attempt_begin / _resume: routed->store holds the rate quotas'
                              items: decide them, then sl_attempt_store_done */
#define SL_ATTEMPT_RENEW 3 /* sl_attempt_begin: routed->leases holds a renewal of the owner's
                              concurrency lease: route it, then sl_attempt_renewed */
/* The rest of a routed /attempt: `fleet` the owner's answer (or this node's share's when `local`:
 * the answer says X-Fleet: local); NULL on a node on its own (no cluster): the lease is taken
 * here, of node_limit, as sl_attempt_decide does. `req` and `snap` as current now (re-read: the
 * call waited). *giveback: a fleet lease a later check's rejection gives back
 * (sl_gubprotect_fleet_release), 0 none. */
int sl_attempt_resume(sl_protect *p, int worker, const sl_levee_config *lcfg,
                      const sl_quota_snap *snap, const sl_attempt_req *req,
                      sl_attempt_fleet *st, const sl_response *fleet, bool local,
                      int64_t now_ms, sl_answer *out, uint64_t *giveback);

/* A routed renewal's answer (routed->leases answered): 200, 404 not found, 500 failed. */
void sl_attempt_renewed(const sl_attempt_req *req, const sl_attempt_fleet *st, sl_answer *out);

/*
 * Rate quotas decided in a store (routed->store set before sl_attempt_begin or _resume, which
 * then return SL_ATTEMPT_STORE, api/levee.h's sl_levee_plan_begin): the store decided st->store's
 * items. 1: st->store now holds the give-backs of a rejection: decide them and call again. 0:
 * *out is the answer (started again here: *out may have served other calls meanwhile), and
 * *giveback as sl_attempt_resume's.
 */
int sl_attempt_store_done(sl_protect *p, int worker, const sl_levee_config *lcfg,
                          const sl_attempt_req *req, sl_attempt_fleet *st, int64_t now_ms,
                          sl_answer *out, uint64_t *giveback);

/*
 * /attempt start to finish as one state machine, for a caller that only reads the request,
 * hands a batch on when asked and writes the answer (node/serviceatt.c). It walks
 * sl_attempt_begin, _resume, _store_done and _renewed in their order; *st is the call's state
 * between two steps (the caller keeps it with the call). What the caller does next:
 *
 *   SL_ATTEMPT_DO_SEND   *out is the answer (after sl_attempt_step: route the leases
 *                        sl_attempt_giveback gives, if any, first)
 *   SL_ATTEMPT_DO_ROUTE  route st->leases to the owners (the router), then sl_attempt_step
 *   SL_ATTEMPT_DO_STORE  hand st->store to the Redis store, then sl_attempt_step
 *
 * `batch`: the call's batch in a cluster or on a store (NULL: a node on its own: everything is
 * decided here and the answer is at once); `store`: the rate quotas go to the Redis store in it;
 * `nodes`: the nodes this node knows (the fallback's share), read again for each step.
 */
enum { SL_ATTEMPT_DO_SEND, SL_ATTEMPT_DO_ROUTE, SL_ATTEMPT_DO_STORE };
int sl_attempt_start(sl_protect *p, int worker, const sl_levee_config *lcfg,
                     const sl_quota_snap *snap, const sl_attempt_req *req, sl_batch *batch,
                     bool store, int nodes, int64_t now_ms, sl_attempt_fleet *st,
                     sl_answer *out);
/* The batch handed on was answered: the next step. `req` and `snap` as current now (re-read:
 * the call waited); *giveback as sl_attempt_resume's. */
int sl_attempt_step(sl_protect *p, int worker, const sl_levee_config *lcfg,
                    const sl_quota_snap *snap, const sl_attempt_req *req, sl_attempt_fleet *st,
                    int nodes, int64_t now_ms, sl_answer *out, uint64_t *giveback);
/* After sl_attempt_step answered: the leases a rejection gives back to their owners (the fleet
 * lease `giveback`, st->conc_back), as a heap batch to route and hand to
 * sl_gubprotect_giveback_done; NULL when there is none (or out of memory: they run out). */
sl_batch *sl_attempt_giveback(sl_protect *p, const sl_attempt_req *req,
                              const sl_attempt_fleet *st, uint64_t giveback, int64_t now_ms);

/* /release; `routed`: a fleet lease of the owner's is the caller's to give back: returned (then
 * *out is not the answer: call sl_attempt_release_answer with *conc_rc and the owner's result,
 * sl_gubprotect_fleet_released). 0: *out is the answer. */
uint64_t sl_attempt_release_begin(sl_protect *p, const sl_attempt_release_req *req,
                                  int64_t now_ms, bool routed, int *conc_rc, sl_answer *out);
/* /release in a cluster or on a store (st->leases set, as for sl_attempt_begin): the leases of
 * this node's fallback keys go back here, the owners' into st->leases (st->fleet_item,
 * st->conc_item; st->local: the fleet lease was this node's share's, released here): 1, route
 * it and call sl_attempt_release_done; 0: *out is the answer. */
int sl_attempt_release_route(sl_protect *p, const sl_attempt_release_req *req, int64_t now_ms,
                             sl_attempt_fleet *st, int *conc_rc, sl_answer *out);
void sl_attempt_release_done(sl_protect *p, const sl_attempt_release_req *req,
                             const sl_attempt_fleet *st, int conc_rc, sl_answer *out);
/* A /release's answer from what its leases' gives returned (1 released, 0 not found, -1 failed). */
void sl_attempt_release_answer(const sl_attempt_release_req *req, int conc_rc, int fleet_rc,
                               sl_answer *out);

#endif

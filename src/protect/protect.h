/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protection as a service, after Stripe's "Scaling your API with rate limiters": what the
 * dialects (api/attempt.c for Levee's /attempt and /release, api/gubprotect.c for Gubernator
 * batches) ask before and after a decision. It owns
 *
 *   - the worker-utilization shedder of each worker loop (runtime/shed.h), which protects sluiced
 *     itself: fed with load samples (sl_protect_observe; node/loadtick.c samples the loop), it
 *     admits or sheds calls by priority;
 *   - the leases of the fleet shedder and of a resource's concurrency limit: CONCURRENCY keys of
 *     the engine, "<ns>.conc"/<resource> and "<ns>.fleet"/noncritical, taken and given back here
 *     and counted (sluice_leases_total); over the Gubernator API the fleet key is routed to its
 *     owner by the caller (one count for the cluster), with "<ns>.fleet"/noncritical.local here
 *     as the fallback while the owner is unreachable; in a cluster or on a store /attempt routes a
 *     resource's lease the same way, "<ns>.conc.local"/<resource> its fallback;
 *   - each worker's view of the switchboard (config/killswitch.h) and the counters of the
 *     kill -> shadow -> enforce ladder (protect/ladder.h);
 *   - the rate limit on its own would-reject and shed log lines.
 *
 * It knows no dialect: no HTTP header, no metadata, no batch. docs/protection.md is the user's
 * description.
 *
 * Threads: everything that takes `worker` runs on that worker's loop thread (worker -1 or out of
 * range: a spare slot for callers without a worker, one thread at a time).
 */
#ifndef SLUICE_PROTECT_PROTECT_H
#define SLUICE_PROTECT_PROTECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/killswitch.h"
#include "config/quota.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "runtime/shed.h"
#include "protect/ladder.h"
#include "protect/who.h"
#include "sluice/engine.h"

typedef struct sl_protect_config {
    sl_engine *engine;            /* decides the leases (not owned) */
    sl_killswitch *switches;      /* may be NULL: nothing is ever switched */
    sl_metrics *metrics;          /* may be NULL */
    sl_logger *log;               /* may be NULL */
    int workers;                  /* worker loops that call in */
    bool shed;                    /* run the worker-utilization shedder (--shed) */
    sl_shedder_options shed_opts; /* --shed-target, --shed-low, ... */
    int64_t shed_interval_ms;     /* how often a worker samples its load (--shed-interval; 100) */
    sl_priority default_priority; /* calls that say nothing (--default-priority; critical) */
    const char *name;             /* engine namespace of the leases; NULL = "levee" */
    int64_t log_per_second;       /* would-reject and shed log lines per second at most (20) */
    sl_who_config who;            /* who is limited: --metrics-max-names, --top-keys, ... */
} sl_protect_config;

void sl_protect_config_default(sl_protect_config *c);

typedef struct sl_protect sl_protect;

int sl_protect_new(const sl_protect_config *cfg, sl_protect **out);
/* After every worker stopped. */
void sl_protect_free(sl_protect *p);
/* A worker is stopping: release what its thread holds (its switchboard reference). */
void sl_protect_worker_stop(sl_protect *p, int worker);

const sl_protect_config *sl_protect_cfg(const sl_protect *p);
int sl_protect_workers(const sl_protect *p);

/* The worker's current switchboard snapshot (NULL without one: nothing switched). */
const sl_killswitch_snap *sl_protect_switches(sl_protect *p, int worker);
/* A ladder record that counts into this service's sluice_protect_events_total. */
void sl_protect_ladder(sl_protect *p, sl_ladder *l);

/* At most log_per_second lines of would-reject and shed logging per second: true = log it. */
bool sl_protect_log_ok(sl_protect *p, sl_log_level lvl);
/* Who is limited (protect/who.h): per-limit counters and top keys. Never NULL after new. */
sl_who *sl_protect_who(sl_protect *p);

/* ---- the worker shedder ------------------------------------------------------------------- */

/* Feed a worker's shedder one utilization sample (0..1). Returns what sl_shed_observe() returns
 * and logs a move of the level. */
int sl_protect_observe(sl_protect *p, int worker, int64_t now_ms, double utilization);
double sl_protect_shed_level(sl_protect *p, int worker);
double sl_protect_shed_util(sl_protect *p, int worker);
/* Does the worker shedder admit a call of this priority? (always with --shed off) */
bool sl_protect_shed_admit(sl_protect *p, int worker, sl_priority prio);
/* Retry-After of a shed call, ms: the time the level needs to fall one step (at least 1 s). */
int64_t sl_protect_shed_retry_ms(const sl_protect *p);
/* "sluiced is overloaded and sheds <prio> traffic (<classes>); retry in <s> s" into buf. */
size_t sl_protect_shed_reason(sl_protect *p, int worker, sl_priority prio, char *buf,
                              size_t cap);

/* ---- leases ------------------------------------------------------------------------------- */

/* Levee's group size for a resource: `override` when > 0, else factor/key/<res> or
 * factor/default of the snapshot's tree, else 1. res may be NULL. */
uint32_t sl_protect_group_size(uint32_t override, const sl_quota_snap *snap, const char *res,
                               size_t len);
/* One limiter's share of a limit: floor(v / df), at least 1 unless v is 0. */
int64_t sl_protect_share(int64_t v, uint32_t df);
/* The fleet's non-critical limit: floor((1 - reserve) * share(capacity, df)). */
int64_t sl_protect_fleet_limit(const sl_killswitch_fleet *f, uint32_t df);

/* Take a lease of the fleet (limit from sl_protect_fleet_limit) or of a resource's concurrency
 * limit: r as the engine answers (r->lease_id with SL_UNDER_LIMIT). */
void sl_protect_fleet_take(sl_protect *p, int64_t limit, int64_t duration_ms, int64_t now,
                           sl_response *r);
void sl_protect_conc_take(sl_protect *p, const char *res, size_t len, int64_t limit,
                          int64_t duration_ms, int64_t now, sl_response *r);
/* Give a lease back (lease 0: nothing). 1 released, 0 not found, -1 another error. */
int sl_protect_fleet_give(sl_protect *p, uint64_t lease, int64_t now);
int sl_protect_conc_give(sl_protect *p, const char *res, size_t len, uint64_t lease, int64_t now);
/* The fleet-wide fleet (Gubernator dialect): one CONCURRENCY key, "<ns>.fleet"/"noncritical",
 * whose leases the caller routes to the key's owner like any item (*name, *key: this service's
 * strings, valid for its life). While the owner cannot be reached, a node takes its leases from
 * a key of its own, "<ns>.fleet"/"noncritical.local", with its share of the limit (limit / nodes):
 * the fallback. sl_protect_fleet_take_local / _give_local decide that key here. */
void sl_protect_fleet_key(const sl_protect *p, const char **name, size_t *name_len,
                          const char **key, size_t *key_len);
void sl_protect_fleet_take_local(sl_protect *p, int64_t limit, int64_t duration_ms, int64_t now,
                                 sl_response *r);
int sl_protect_fleet_give_local(sl_protect *p, uint64_t lease, int64_t now);
/* Count a fleet lease decided elsewhere (by the fleet key's owner) in sluice_leases_total. */
typedef enum { SL_PROTECT_LEASE_ACQUIRED, SL_PROTECT_LEASE_RELEASED, SL_PROTECT_LEASE_NOT_FOUND }
    sl_protect_lease_event;
void sl_protect_lease_count(sl_protect *p, sl_protect_lease_event ev);

/* Renew a resource's lease: it expires duration_ms from now. 1 renewed, 0 not found, -1 error. */
int sl_protect_conc_renew(sl_protect *p, const char *res, size_t len, uint64_t lease,
                          int64_t duration_ms, int64_t now);

/* The cluster's concurrency limit of a resource (/attempt in a cluster or on a store): the
 * CONCURRENCY key "<ns>.conc"/<resource>, whose leases the caller routes to the key's owner like
 * the fleet's (*name: this service's string, valid for its life). While the owner cannot be
 * reached, a node takes its leases from a key of its own, "<ns>.conc.local"/<resource>, with its
 * share of the limit (limit / nodes): the fallback; _take_local, _give_local (not found not
 * counted: the lease may be the owner's) and _renew_local decide that key here. */
void sl_protect_conc_key(const sl_protect *p, const char **name, size_t *name_len);
void sl_protect_conc_take_local(sl_protect *p, const char *res, size_t len, int64_t limit,
                                int64_t duration_ms, int64_t now, sl_response *r);
int sl_protect_conc_give_local(sl_protect *p, const char *res, size_t len, uint64_t lease,
                               int64_t now);
int sl_protect_conc_renew_local(sl_protect *p, const char *res, size_t len, uint64_t lease,
                                int64_t duration_ms, int64_t now);

#endif

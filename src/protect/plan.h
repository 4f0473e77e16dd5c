/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One call's walk of the protection ladder, written once for both dialects (api/attempt.c for
 * Levee's /attempt, api/gubprotect.c for Gubernator calls), docs/protection.md:
 *
 *   "*" (the global switch) -> the worker shedder -> the fleet shedder -> a concurrency limit
 *   -> the rate limits
 *
 * A sl_plan is the walk's record: the worker's switchboard snapshot the walk reads (one for the
 * whole walk, so every step sees the same switches) and the sl_ladder that notes and counts what
 * the switches did (protect/ladder.h). Each step asks the ladder whether its limiter runs and,
 * for the shedders, whether a rejection stands; the dialect builds the plan from its request
 * (X-Priority / metadata "priority", X-Concurrency / a CONCURRENCY item), takes the leases a step
 * names, and says the outcome in its own terms (503 + RateLimit for /attempt, UNAVAILABLE or
 * metadata for an item). The plan knows no dialect: no header, no metadata, no batch; it holds
 * no memory.
 *
 * Threads: a plan lives on the worker's loop thread that started it.
 */
#ifndef SLUICE_PROTECT_PLAN_H
#define SLUICE_PROTECT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protect/ladder.h"
#include "protect/protect.h"

typedef struct sl_plan {
    sl_protect *p;
    int worker;
    const sl_killswitch_snap *ks; /* the worker's switchboard (NULL: nothing switched) */
    sl_killswitch_mode global;    /* the switch "*" */
    sl_ladder ladder;             /* what the switches did so far (answer headers, metrics) */
} sl_plan;

/* Start a call's walk on `worker`: an empty ladder, the worker's current switchboard. */
void sl_plan_start(sl_plan *pl, sl_protect *p, int worker);
/* Go on with a walk that waited (a routed lease, a store's decision): the ladder as it was
 * (`saved`), the switchboard as it is now. */
void sl_plan_resume(sl_plan *pl, sl_protect *p, int worker, const sl_ladder *saved);

/* The global switch "*": false when it turns every limiter off (noted: the call is admitted
 * without any further step). */
bool sl_plan_all(sl_plan *pl);

typedef enum sl_plan_verdict {
    SL_PLAN_PASS,   /* the step let the call through (or did not apply, or its switch is off) */
    SL_PLAN_REJECT, /* the step rejects and the rejection stands (counted rejected) */
    SL_PLAN_SHADOW  /* the step would reject: shadow mode admits (noted would_reject) */
} sl_plan_verdict;

/* The worker shedder for a call of priority `prio` (a Gubernator call: its most important
 * item's): it runs with --shed, for non-critical calls, unless "*" is off. */
sl_plan_verdict sl_plan_shed(sl_plan *pl, int prio);

/* A lease a step takes: its limit (the cluster's, not divided), duration and the switch's mode
 * (enforce or shadow: the lease's answer goes through sl_ladder_rejects with it). */
typedef struct sl_plan_lease {
    int64_t limit, duration_ms;
    sl_killswitch_mode mode;
    const sl_killswitch_fleet *fleet; /* sl_plan_fleet: the fleet's settings (a node's share) */
} sl_plan_lease;

/* The fleet shedder's step for one non-critical acquire: true when a fleet is configured and
 * its switch lets it run (*l the lease to take), false when there is no fleet lease to take
 * (a switch that is off is noted). The caller decides which calls are non-critical acquires. */
bool sl_plan_fleet(sl_plan *pl, sl_plan_lease *l);
/* A resource's concurrency limit (/attempt with X-Concurrency: acquire): true when the
 * resource has one and its switch lets it run (*l the lease to take). */
bool sl_plan_conc(sl_plan *pl, const char *res, size_t len, sl_plan_lease *l);

#endif

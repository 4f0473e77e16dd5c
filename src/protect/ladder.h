/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kill -> shadow -> enforce ladder: what a limiter's switch does to it, written once for every
 * limiter of sluice's protections (the worker shedder, the fleet shedder, a resource's concurrency
 * limit and the rate limits) and for every dialect that runs them (Levee's /attempt, Gubernator
 * batches).
 *
 *   switch     before the limiter runs     when it rejects
 *   killed     it does not run             (it did not run; a switch found later admits too)
 *   shadow     it runs                     admitted, counted would_reject, logged
 *   enforce    it runs                     rejected, counted rejected
 *
 * A limiter's mode is the stronger of its own switch and the global one ("*"); a switchboard
 * with nothing set (quiet) is enforce for everyone, whatever the name. The limiters are an enum
 * with one table of names: the metric label, the switch that governs it, and the token in the
 * X-Sluice-Shadow / X-Sluice-Killswitch answer headers.
 *
 * A sl_ladder is one request's (or one call's) record: which limiters a switch turned off or to
 * shadow, and the counters it bumps (sluice_protect_events_total). It holds no memory.
 */
#ifndef SLUICE_PROTECT_LADDER_H
#define SLUICE_PROTECT_LADDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/killswitch.h"
#include "runtime/metrics.h"

typedef enum sl_ladder_limiter {
    SL_LADDER_NONE = 0,  /* nothing rejected */
    SL_LADDER_RATE,      /* rate limits (Levee quotas, Gubernator items) */
    SL_LADDER_CONC,      /* a resource's (or an item's) concurrency limit */
    SL_LADDER_FLEET,     /* the fleet shedder */
    SL_LADDER_SHED,      /* the worker shedder */
    SL_LADDER_ALL,       /* the global switch "*" */
    SL_LADDER_COUNT
} sl_ladder_limiter;

typedef enum sl_ladder_event {
    SL_LADDER_REJECTED,     /* enforced: 429/503 or OVER_LIMIT */
    SL_LADDER_WOULD_REJECT, /* shadow mode: admitted */
    SL_LADDER_KILLSWITCH,   /* admitted by a switch */
    SL_LADDER_EVENT_COUNT
} sl_ladder_event;

/* "rate", "concurrency", "fleet", "shed", "all"; "none" for SL_LADDER_NONE. */
const char *sl_ladder_name(sl_ladder_limiter lim);
/* The switch that governs a limiter ("concurrency", "fleet", "shed", "*"); NULL for the rate
 * limits, whose switch is the quota's or the item's name. */
const char *sl_ladder_switch(sl_ladder_limiter lim, size_t *len);

/* The counters of sluice_protect_events_total (NULL entries count nothing). */
typedef struct sl_ladder_counters {
    sl_metrics_counter *c[SL_LADDER_COUNT][SL_LADDER_EVENT_COUNT];
} sl_ladder_counters;

/* Register the family and fill c (every series); 0 or a negative errno. */
int sl_ladder_register_metrics(sl_metrics *m, sl_ladder_counters *c);

typedef struct sl_ladder {
    const sl_ladder_counters *counters; /* may be NULL */
    uint8_t killed;                     /* bit (1 << limiter) */
    uint8_t shadowed;
} sl_ladder;

void sl_ladder_init(sl_ladder *l, const sl_ladder_counters *counters);

/* The mode for a switch name, combined with the global switch (the stronger wins). */
sl_killswitch_mode sl_ladder_mode(const sl_killswitch_snap *s, const char *name, size_t len);
/* The mode of a limiter by its own switch (not for SL_LADDER_RATE: use sl_ladder_mode). */
sl_killswitch_mode sl_ladder_mode_of(const sl_killswitch_snap *s, sl_ladder_limiter lim);

/* Before a limiter runs: false when its switch is off (noted and counted killswitch). */
bool sl_ladder_runs(sl_ladder *l, sl_ladder_limiter lim, sl_killswitch_mode m);
/* The limiter rejected: true when the rejection stands (counted rejected); false when the switch
 * admits the call (shadow: noted and counted would_reject; killed: noted and counted killswitch). */
bool sl_ladder_rejects(sl_ladder *l, sl_ladder_limiter lim, sl_killswitch_mode m);
/* Count one event without noting it (a batch item's own answer carries the note). */
void sl_ladder_count(const sl_ladder *l, sl_ladder_limiter lim, sl_ladder_event ev);

/* "shed, rate" (the global switch as "*") for the limiters noted in a bit set; returns the length
 * written (NUL-terminated), 0 when none is set. */
size_t sl_ladder_list(uint8_t set, char *buf, size_t cap);

#endif

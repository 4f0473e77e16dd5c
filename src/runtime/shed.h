/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker-utilization shedder's pure core (the model is described in sluice/shed.h): a level
 * moved by observations with hysteresis, and per-class admission by a low-discrepancy sequence.
 * No clock, no thread, no allocation: sluiced keeps one per worker loop (fed by that loop's busy
 * fraction, src/protect/protect.c) and the client library's sl_shedder wraps one (src/client/shedder.c).
 *
 * The level is stored in thousandths in an atomic word, so that admission on any thread reads it
 * without a lock while the observer moves it; the sequence counters are atomic for the same reason.
 */
#ifndef SLUICE_RUNTIME_SHED_H
#define SLUICE_RUNTIME_SHED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sluice/shed.h"

#define SL_SHED_MILLI_MAX 3000 /* SL_SHED_LEVEL_MAX in thousandths */

typedef struct sl_shed {
    sl_shedder_options cfg;
    /* observer side (one thread) */
    double util;          /* smoothed utilization; < 0 before the first sample */
    int64_t last;         /* time of the last sample */
    int64_t over_since;   /* start of the current stay above target, or -1 */
    int64_t under_since;  /* start of the current stay below low, or -1 */
    /* shared */
    _Atomic uint32_t level;                      /* thousandths, 0..SL_SHED_MILLI_MAX */
    _Atomic uint64_t util_bits;                  /* the smoothed utilization, for readers */
    _Atomic uint64_t seq[SL_PRIORITY_COUNT];     /* calls seen per class (the sequence index) */
    _Atomic uint64_t shed[SL_PRIORITY_COUNT];
    _Atomic uint64_t raises, lowers;
} sl_shed;

/* cfg NULL = defaults; the options must pass sl_shedder_options_check(). */
void sl_shed_init(sl_shed *s, const sl_shedder_options *cfg);
int sl_shed_observe(sl_shed *s, int64_t now_ms, double utilization);
bool sl_shed_admit(sl_shed *s, sl_priority p);

/* Share of class p shed at a level (thousandths): 0 for critical; test first, then get, post. */
double sl_shed_fraction_at(uint32_t level_milli, sl_priority p);
uint32_t sl_shed_level_milli(const sl_shed *s);
double sl_shed_util(const sl_shed *s);

/* Force the level (thousandths, clamped): for an operator's override and for tests. */
void sl_shed_set_level(sl_shed *s, uint32_t level_milli);

/* The most important class (partly) shed at a level: test at level 0.5, get at 1.5, post at 3;
 * SL_PRIORITY_CRITICAL when nothing is shed. For messages ("shedding get traffic"). */
sl_priority sl_shed_top_class(uint32_t level_milli);

void sl_shed_stats(const sl_shed *s, sl_shedder_stats *out);

#endif

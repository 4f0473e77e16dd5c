/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsluice load shedding: priorities and the worker-utilization shedder, for a service that wants
 * to protect its own worker pool the way sluiced protects itself (docs/protection.md).
 *
 * Traffic comes in four classes, after Stripe's "Scaling your API with rate limiters":
 *
 *     critical   never shed (e.g. creating a charge)
 *     post       writes, shed last
 *     get        reads
 *     test       test-mode traffic, shed first
 *
 * The shedder turns a utilization signal (busy workers / workers, or any 0..1 load figure) into a
 * shed LEVEL between 0 and 3: level 0.4 sheds 40 % of test traffic; 1.5 sheds all test traffic
 * and half of get; 3 sheds everything but critical. The level moves slowly and with hysteresis, so
 * that it does not flap:
 *
 *   - it rises by raise_step each time the (smoothed) utilization has stayed above `target` for
 *     raise_after_ms;
 *   - it falls by lower_step each time the utilization has stayed below `low` for lower_after_ms
 *     (lower_after_ms > raise_after_ms and lower_step < raise_step: shedding starts faster than
 *     it stops, as a rising load is the dangerous direction);
 *   - between `low` and `target` it holds.
 *
 * Which calls of a class are shed is decided by a low-discrepancy sequence, not by a random
 * number: over any n calls of a class the share shed is the class's fraction within O(log n / n),
 * so a level is exact at small volumes too, and runs are repeatable.
 *
 * Usage (a pool of 32 workers; a monitor thread samples it every 100 ms):
 *
 *     sl_shedder *sh;
 *     sl_shedder_new(NULL, &sh);                         // defaults
 *     // monitor:   sl_shedder_observe_workers(sh, now_ms, busy, 32);
 *     // per call:  if (!sl_shedder_admit(sh, sl_priority_parse(hdr, SL_PRIORITY_POST)))
 *     //                answer 503 with Retry-After;
 *
 * Thread safety: sl_shedder_admit() and the getters may be called from any number of threads;
 * observe from one thread at a time (the monitor).
 */
#ifndef SLUICE_SHED_H
#define SLUICE_SHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_priority {
    SL_PRIORITY_CRITICAL = 0,
    SL_PRIORITY_POST = 1,
    SL_PRIORITY_GET = 2,
    SL_PRIORITY_TEST = 3,
    SL_PRIORITY_COUNT
} sl_priority;

/* "critical", "post", "get", "test"; NULL for a value out of range. */
SL_EXPORT
const char *sl_priority_name(sl_priority p);
/* The class named by s[0..n) (any case, blanks around it allowed), or -EINVAL. */
SL_EXPORT
int sl_priority_from_name(const char *s, size_t n);

/* The shed level at which every class but critical is shed. */
#define SL_SHED_LEVEL_MAX 3.0

typedef struct sl_shedder_options {
    double target;          /* raise above this utilization (0.9) */
    double low;             /* lower below this utilization (0.7); low <= target */
    int64_t raise_after_ms; /* over target this long before each raise (1000) */
    int64_t lower_after_ms; /* under low this long before each lower (5000) */
    double raise_step;      /* level added per raise (0.25) */
    double lower_step;      /* level removed per lower (0.1) */
    double smoothing;       /* EWMA weight of a new observation, (0, 1]; 1 = none (0.5) */
} sl_shedder_options;

SL_EXPORT
void sl_shedder_options_default(sl_shedder_options *o);
/* -EINVAL (and a static reason in *why, which may be NULL) for options out of range. */
SL_EXPORT
int sl_shedder_options_check(const sl_shedder_options *o, const char **why);

typedef struct sl_shedder sl_shedder;

/* o NULL = defaults. 0, -EINVAL or -ENOMEM. */
SL_EXPORT
int sl_shedder_new(const sl_shedder_options *o, sl_shedder **out);
SL_EXPORT
void sl_shedder_free(sl_shedder *s);

/* Feed one utilization sample taken at now_ms (any monotonic or wall clock in ms; negative or
 * backwards steps are treated as no time passing). Returns +1 when the level rose, -1 when it
 * fell, 0 otherwise. */
SL_EXPORT
int sl_shedder_observe(sl_shedder *s, int64_t now_ms, double utilization);
/* The same with utilization = busy / total (total 0 counts as idle). */
SL_EXPORT
int sl_shedder_observe_workers(sl_shedder *s, int64_t now_ms, unsigned busy, unsigned total);

/* Should a call of this class be served? Critical always is; a value out of range counts as
 * test. Counts the decision. */
SL_EXPORT
bool sl_shedder_admit(sl_shedder *s, sl_priority p);

SL_EXPORT
double sl_shedder_level(const sl_shedder *s);                      /* 0 .. SL_SHED_LEVEL_MAX */
SL_EXPORT
double sl_shedder_fraction(const sl_shedder *s, sl_priority p);    /* share of p shed now */
SL_EXPORT
double sl_shedder_utilization(const sl_shedder *s);                /* the smoothed signal */

typedef struct sl_shedder_stats {
    uint64_t admitted[SL_PRIORITY_COUNT];
    uint64_t shed[SL_PRIORITY_COUNT];
    uint64_t raises, lowers;
} sl_shedder_stats;

SL_EXPORT
void sl_shedder_stats_get(const sl_shedder *s, sl_shedder_stats *out);

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is limited: per-limit counters and a top-K of keys per limit and event, so that a dark
 * launch (a limiter in shadow mode) can name the callers it would hit.
 *
 * A limit is the Gubernator item's name, or the /attempt quota (or resource) that decided; a
 * key is the item's unique_key or the /attempt resource. Events: rejected (enforced), would_reject
 * (shadow mode: admitted) and shed (fleet or worker shedder). Each event bumps
 * sluice_limit_events_total{limit,event} and counts the key in the (limit, event) sketch
 * (core/topk.h, space-saving with halving decay).
 *
 * Cardinality guard: the first max_names distinct limit names get their own label value and their
 * own sketches; every later name is counted as "other". A known name is found by a bounded scan of
 * at most max_names hashes; counters and sketches are created once, when a name is first seen, so
 * nothing is allocated per event after that. Only events (rejections, shadow rejections, sheds)
 * come here - an admitted call never does - and they take one mutex.
 */
#ifndef SLUICE_PROTECT_WHO_H
#define SLUICE_PROTECT_WHO_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/metrics.h"

typedef enum sl_who_event {
    SL_WHO_REJECTED,
    SL_WHO_WOULD_REJECT,
    SL_WHO_SHED,
    SL_WHO_EVENT_COUNT
} sl_who_event;

#define SL_WHO_OTHER "other"
#define SL_WHO_MAX_NAMES 1000     /* largest max_names */
#define SL_WHO_MAX_K 1000         /* largest k (slots per sketch) */
#define SL_WHO_NAME_MAX 128       /* a limit name is cut at this many bytes */

typedef struct sl_who_config {
    uint32_t max_names;           /* --metrics-max-names (32) */
    uint32_t k;                   /* --top-keys: keys kept per limit and event (32) */
    int64_t half_life_ms;         /* --top-half-life: counts halve this often (60 s); 0 = never */
    sl_metrics *metrics;          /* may be NULL: no counters */
} sl_who_config;

void sl_who_config_default(sl_who_config *c);

typedef struct sl_who sl_who;

/* 0, -EINVAL (max_names or k out of range) or -ENOMEM (or the metrics registry's error). */
int sl_who_new(const sl_who_config *cfg, sl_who **out);
void sl_who_free(sl_who *w);

/* "rejected", "would_reject", "shed". */
const char *sl_who_event_name(sl_who_event ev);

/* One event of key under limit. Any thread. */
void sl_who_note(sl_who *w, const char *limit, size_t limit_len, sl_who_event ev, const char *key,
                 size_t key_len, int64_t now_ms);

/* The top keys as JSON (malloc'd into *out; the caller frees it), at most `top` keys per limit
 * and event, the largest count first:
 *   {"half_life_ms":60000,"k":32,"limits":[{"limit":"L","event":"would_reject","total":N,
 *    "keys":[{"key":"K","count":C,"error":E}, ...]}, ...]}
 * limit_filter (NULL = all) keeps one limit. Bytes outside printable ASCII in names and keys are
 * shown as '?'. 0 or -ENOMEM. Any thread. */
int sl_who_top_json(sl_who *w, const char *limit_filter, size_t top, int64_t now_ms, char **out,
                    size_t *len);

#endif

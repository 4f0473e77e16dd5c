/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsluice engine: "may this key take N hits now?"
 *
 * The engine is pure computation over an in-memory, sharded key store. It does no I/O, starts no
 * threads, and never reads the clock itself: every call takes `now` (epoch milliseconds) from the
 * caller, so tests and the simulator drive it on a virtual clock (see sluice/clock.h).
 *
 * Thread safety: any number of threads may call sl_engine_decide*() on one engine concurrently.
 * Decisions on one key are linearizable (the key's shard is locked for the decision); decisions on
 * keys in different shards proceed in parallel.
 *
 * Errors: functions that can fail return 0 or a negative errno value. A request that is invalid gets
 * a per-item error (sl_response.error, a static string) and never changes state.
 */
#ifndef SLUICE_ENGINE_H
#define SLUICE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/export.h"
#include "sluice/types.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef struct sl_request {
    const char *name;        /* limit name (Gubernator "name"), not NUL-terminated necessarily */
    size_t name_len;
    const char *unique_key;  /* e.g. account id */
    size_t unique_key_len;
    int64_t hits;            /* 0 peeks; negative gives back (buckets) */
    int64_t limit;
    int64_t duration;        /* milliseconds, or a sl_gregorian value with DURATION_IS_GREGORIAN */
    int64_t burst;           /* LEAKY_BUCKET: bucket size, 0 = limit; GCRA: extra requests admitted
                                at once beyond one (Levee's burst), 0 = strict pacing */
    int64_t created_at;      /* epoch ms the request was made; 0 = now */
    int32_t algorithm;       /* sl_algorithm */
    int32_t behavior;        /* OR of sl_behavior */
    int32_t sub_windows;     /* SLIDING_WINDOW: number of sub-windows per window; 0 or 1 = classic */
    uint64_t lease_id;       /* CONCURRENCY: the lease a release (hits -1) frees or a renewal
                                (hits 0) extends to now + duration; 0 = none */
    int64_t max_delay_ms;    /* GCRA: how long the caller will wait (ms); a request that would
                                conform within that time is admitted with its slot reserved and
                                resp.delay_ms set (delay instead of reject). <= 0 = reject at once;
                                other algorithms ignore it (docs/algorithms.md) */
} sl_request;

typedef struct sl_response {
    int32_t status;          /* sl_status */
    int64_t limit;
    int64_t remaining;
    int64_t reset_time;      /* epoch ms when the limit is fully available again */
    int64_t retry_after;     /* ms until this request could pass; 0 when admitted */
    const char *error;       /* NULL, or a static message: the item failed and changed nothing */
    uint64_t lease_id;       /* CONCURRENCY: the lease an admitted acquire (hits 1) took; else 0 */
    int64_t delay_ms;        /* GCRA with max_delay_ms: admitted, but the request must wait this
                                long (<= max_delay_ms) before it goes; 0 = go now */
} sl_response;

typedef struct sl_engine_config {
    size_t max_keys;         /* hard cap on keys held (gc-max-keys); LRU idle keys are evicted */
    uint64_t max_memory;     /* hard cap on the store's bytes, side buffers included (sluiced's
                                max-memory, SL_DEFAULT_MAX_MEMORY); 0 (default) = keys only */
    unsigned shards;         /* power of two; 0 = default (64) */
    int64_t max_log_limit;   /* SLIDING_LOG: largest limit accepted (memory is O(limit) per key) */
    int32_t max_sub_windows; /* SLIDING_WINDOW: most sub-windows accepted */
    int64_t max_concurrency_limit; /* CONCURRENCY: largest limit (16 bytes per lease held) */
    uint64_t hash_seed;      /* 0 = random per engine (hash flooding resistance) */
    /* Impossible inputs (docs/algorithms.md, "Bad input and overflow"); 0 = no bound. */
    int64_t max_count;        /* largest |hits|, limit and burst (default 2^53) */
    int64_t max_duration_ms;  /* largest duration (default 100 years; Gregorian codes exempt) */
    int64_t max_clock_skew_ms; /* largest |created_at - now| when created_at is set (default 0) */
    bool cluster_keys;       /* hash keys through the cluster's key id (name + "_" + unique_key,
                                the picker's hash) with a keyed permutation, so that a held key's
                                owner can be found from its store hash (state hand-off) */
} sl_engine_config;

/* Defaults of sl_engine_config_default(): 2^53 is the largest integer a double (the leaky bucket's
 * remaining, a JSON number) holds exactly; 100 years of ms. */
#define SL_DEFAULT_MAX_MEMORY ((uint64_t)256 << 20)
#define SL_DEFAULT_MAX_COUNT (INT64_C(1) << 53)
#define SL_DEFAULT_MAX_DURATION_MS (INT64_C(36525) * 86400000) /* 36,525 days */

typedef struct sl_engine_stats {
    uint64_t keys;                               /* keys held now */
    uint64_t capacity;                           /* slots allocated */
    uint64_t bytes;                              /* bytes held by the store (tables + side buffers) */
    uint64_t evictions;                          /* keys evicted because the store was full */
    uint64_t evictions_limited;                  /* keys at their limit evicted (not in evictions) */
    uint64_t expirations;                        /* keys removed because they expired */
    uint64_t collections;                        /* keys removed as idle (sl_engine_collect_idle) */
    uint64_t errors;                             /* requests answered with a per-item error */
    uint64_t decisions[SL_ALGORITHM_COUNT][2];   /* by algorithm and sl_status */
} sl_engine_stats;

typedef struct sl_engine sl_engine;

SL_EXPORT
void sl_engine_config_default(sl_engine_config *cfg);
SL_EXPORT
int sl_engine_new(const sl_engine_config *cfg, sl_engine **out);
SL_EXPORT
void sl_engine_free(sl_engine *e);

/* Decide one request at `now_ms`. Always fills *resp. */
SL_EXPORT
void sl_engine_decide(sl_engine *e, const sl_request *req, sl_response *resp, int64_t now_ms);

/* Decide n requests in order (same answers as n calls to sl_engine_decide, faster: hashes and
 * prefetches ahead). */
SL_EXPORT
void sl_engine_decide_batch(sl_engine *e, const sl_request *reqs, sl_response *resps, size_t n,
                            int64_t now_ms);

/* Active expiry: examine at most max_work slots across shards, removing expired keys. Returns the
 * number removed. Call periodically (bounded work per tick). */
SL_EXPORT
size_t sl_engine_expire(sl_engine *e, int64_t now_ms, size_t max_work);

/*
 * Idle-key collection (Levee's gc-period / gc-collect): examine at most max_work key slots,
 * continuing one walk over the whole store from where the previous call stopped, and remove every
 * key that has expired or has had no hits for at least idle_ms (idle_ms <= 0: expired keys only).
 * Idleness is measured from the key's last access, to 1.024 s and never early; idle_ms beyond
 * 18.6 hours finds no idle key. Returns the number of keys removed; *pass_done (may be NULL) is set
 * true by the call that completes a walk over every key, so a collection is the run of calls up to
 * pass_done, each with a bounded pause. Removing an idle key that has not expired forgets its state
 * (the next hit starts afresh): that is the point of gc-collect, so choose it longer than the
 * windows whose counts must survive a pause in traffic.
 */
SL_EXPORT
size_t sl_engine_collect_idle(sl_engine *e, int64_t now_ms, int64_t idle_ms, size_t max_work,
                              bool *pass_done);

/*
 * The same walk, which also removes every information-free key (its state equals a fresh key's:
 * bucket full, TAT <= now, window over, no lease; removing it changes no answer) that has had no
 * hits for at least free_idle_ms (<= 0: none). idle_ms as above (<= 0: no key is collected for
 * idleness alone). sl_engine_collect_idle(e, now, idle, ...) is sl_engine_collect(e, now, idle, -1,
 * ...).
 */
SL_EXPORT
size_t sl_engine_collect(sl_engine *e, int64_t now_ms, int64_t idle_ms, int64_t free_idle_ms,
                         size_t max_work, bool *pass_done);

/* Remove one key (name, unique_key). Returns true if it was held. */
SL_EXPORT
bool sl_engine_remove(sl_engine *e, const char *name, size_t name_len, const char *key,
                      size_t key_len);

SL_EXPORT
void sl_engine_stats_get(sl_engine *e, sl_engine_stats *out);

/* Validate a request without deciding it: NULL if valid, else the static error message. The
 * clock-skew bound needs the time: sl_request_check_time() (the engine calls both). */
SL_EXPORT
const char *sl_request_validate(const sl_request *req, const sl_engine_config *cfg);
/* NULL, or the error for a created_at further than cfg->max_clock_skew_ms from now_ms. */
SL_EXPORT
const char *sl_request_check_time(const sl_request *req, const sl_engine_config *cfg,
                                  int64_t now_ms);

SL_EXPORT
const char *sl_algorithm_name(int32_t algorithm);   /* "TOKEN_BUCKET", ... or NULL */
SL_EXPORT
int sl_algorithm_from_name(const char *s, size_t n); /* -1 if unknown; accepts any case */

#ifdef __cplusplus
}
#endif
#endif

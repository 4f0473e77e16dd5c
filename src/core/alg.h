/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rate-limit algorithms over one key's state. Internal to libsluice: the store (store.c) finds or
 * creates the key's slot under its shard lock and calls sl_alg_decide(); the algorithms never touch
 * the store, the clock or a lock. docs/algorithms.md describes every algorithm's exact semantics.
 *
 * State is kept small so that a store slot is one 64-byte cache line: 8 bytes of hash, 8 of expiry,
 * 8 of header and 40 of algorithm state. Algorithms whose state grows with the limit (sliding log,
 * sliding window with sub-windows, concurrency leases) keep a pointer to a side buffer they own;
 * sl_alg_release() frees it. CONCURRENCY lays its state over `raw` (core/concurrency.c).
 * A state holds no pointer into itself, so the store may copy it (memcpy) from a scratch state into
 * a slot or between slots.
 *
 * Contract with the store:
 *   - A key that is absent, or found with sl_alg_expired(expire_at, now), is decided on a state with
 *     algorithm == SL_ALG_NONE (an expired key must be sl_alg_release()d first: it may own memory).
 *   - After sl_alg_decide(), a state left at SL_ALG_NONE means "no key": the store removes it (or
 *     never inserts it). The algorithms leave NONE whenever the key is back to its full, untouched
 *     condition (e.g. a peek on a new key, a GCRA key fully replenished, a window with no hits), so
 *     idle keys cost nothing. Gubernator's buckets always keep their item, as Gubernator does.
 *   - sl_alg_decide() allocates only to create a side buffer (a new sliding-log / sub-window state,
 *     or a sliding-log key whose limit changed: the ring is resized). On allocation failure it
 *     answers with an error and leaves the state exactly as it was.
 *   - A request with a different algorithm than the state's starts from a fresh state (Gubernator
 *     drops the old item the same way).
 */
#ifndef SLUICE_CORE_ALG_H
#define SLUICE_CORE_ALG_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/engine.h"

#define SL_ALG_NONE 0xff /* algorithm byte of a state that holds nothing (a new key) */

typedef struct sl_state {
    uint8_t algorithm;   /* sl_algorithm, or SL_ALG_NONE */
    uint8_t status;      /* token bucket: its sticky sl_status */
    uint16_t aux16;      /* fixed window: 1 when the window is a Gregorian interval */
    uint32_t aux32;      /* sliding window: sub-windows (1 = classic two-window estimate) */
    union {
        /* Gubernator's TokenBucketItem; the item's ExpireAt is the store's expire_at. */
        struct { int64_t limit, duration, remaining, created_at; } tb;
        /* Gubernator's LeakyBucketItem (remaining is fractional, as Gubernator's float64). */
        struct { int64_t limit, duration; double remaining; int64_t updated_at, burst; } lb;
        /* Theoretical arrival time TAT = tat + tat_frac / limit ms, exactly (0 <= tat_frac < limit). */
        struct { int64_t tat, tat_frac, limit, duration, burst; } gcra;
        struct { int64_t limit, duration, window_start, count; } fw;
        /* window_start: start of the current sub-window; cur: its count. The S previous sub-windows'
         * counts are in `prev` (S = 1) or in the side buffer `ring` of S int64 (S > 1). */
        struct {
            int64_t limit, duration, window_start, cur;
            union { int64_t prev; int64_t *ring; };
        } sw;
        /* Ring of `cap` admission timestamps (ms), oldest at ring[head], `len` of them held; cap is
         * the limit, or more while a lowered limit still has more live entries. */
        struct { int64_t cap, duration; int64_t *ring; int64_t head, len; } log;
        int64_t raw[5];
    } u;
} sl_state;

_Static_assert(sizeof(sl_state) == 48, "sl_state must stay 48 bytes (64-byte store slot)");

struct sl_conc_ids;

/* Limits the engine was configured with that algorithms enforce. A value <= 0 means the default. */
typedef struct sl_alg_config {
    int64_t max_log_limit;
    int32_t max_sub_windows;
    int64_t max_concurrency_limit;
    /* Largest remaining a token bucket keeps: Gubernator lets negative hits raise it past the
     * limit, and repeated give-backs would reach INT64_MAX. <= 0: no bound. */
    int64_t max_count;
    /* CONCURRENCY's lease-id generator (the engine's, core/concurrency.h); NULL: random ids */
    struct sl_conc_ids *lease_ids;
} sl_alg_config;

/* Defaults for the two limits above (engine flags max-log-limit, max-sub-windows). A sliding-log key
 * costs 8 bytes per unit of limit, a sub-window 8 bytes. */
#define SL_ALG_DEFAULT_MAX_LOG_LIMIT INT64_C(10000)
#define SL_ALG_DEFAULT_MAX_SUB_WINDOWS 60
/* Hard ceiling on sub-windows whatever the configuration says (the count lives in aux32 and the
 * retry computation walks them). */
#define SL_ALG_MAX_SUB_WINDOWS 65536

/*
 * Decide `req` against `st` at `now` (epoch ms; the decision time is req->created_at when it is not
 * 0, as in Gubernator). *expire_at is the key's expiry (epoch ms): read by the algorithms that keep
 * Gubernator's ExpireAt semantics, and set whenever state is kept. Fills *resp completely.
 * Re-checks the numeric fields (sl_request_validate() minus the name checks) and answers with an
 * error, changing nothing, if they are invalid. cfg may be NULL (defaults).
 */
void sl_alg_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t now,
                   const sl_alg_config *cfg, sl_response *resp);

/* True when a key whose expiry is `expire_at` no longer exists at `now`: expire_at < now, which is
 * Gubernator's CacheItem.IsExpired(). The store's lazy and active expiry both use this. */
bool sl_alg_expired(int64_t expire_at, int64_t now);

/* Free any side buffer the state owns and mark it SL_ALG_NONE. Safe on a NONE state. */
void sl_alg_release(sl_state *st);

/*
 * What evicting a key would forget (the store's eviction order, store.c). FREE: the state says
 * nothing a fresh key would not (bucket full, GCRA TAT <= now, window over, log empty, no lease
 * held, or expired): removing it changes no answer. LIMITED: the key is at its limit now (the next
 * hit would be refused): removing it would admit what the limit refuses. HOLDS: in between (some
 * of the limit used). One predicate per algorithm (sl_<alg>_info), all without allocation; those of
 * the side-buffer algorithms read their buffer.
 */
typedef enum sl_alg_info { SL_INFO_FREE = 0, SL_INFO_HOLDS = 1, SL_INFO_LIMITED = 2 } sl_alg_info;
sl_alg_info sl_alg_info_of(const sl_state *st, int64_t expire_at, int64_t now);

/* Bytes of side buffers the state owns (for the store's memory accounting). */
uint64_t sl_alg_side_bytes(const sl_state *st);

/* The numeric checks of sl_request_validate() (everything but name and unique_key): NULL or the
 * static error. cfg may be NULL (defaults). */
const char *sl_alg_check(const sl_request *req, const sl_alg_config *cfg);

/* Error messages that callers and tests compare against. */
extern const char sl_alg_err_nomem[];

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_overcache: keys known to be over their limit, answered without a round trip to Redis (as
 * envoyproxy/ratelimit's local over-limit cache). Pure: one table per worker, no locks, no I/O,
 * `now` passed in.
 *
 * A decision from Redis that rejected hits with nothing left (OVER_LIMIT, remaining 0) says the
 * same hits, or more, are rejected until now + retry_after: nothing this node does can make room
 * before then except a give-back (negative hits) or RESET_REMAINING, which go to Redis and clear
 * the entry. A later request for the key with the same limit, duration and algorithm and at least
 * as many hits is answered from the entry until then: OVER_LIMIT, remaining 0, the cached
 * reset_time, retry_after counting down. A give-back or a reset through any worker of the node
 * clears the key on every worker (a per-slot count they share). Its hits are not sent, so Redis does not count them (a
 * fixed window that counts rejected hits counts fewer, as upstream's cache does; the answers do
 * not change). What the cache cannot see: a give-back made through another node within the
 * entry's time (the key then has room a little earlier than this worker
 * answers; docs/store.md).
 *
 * The table is direct-mapped (a slot per hash, the newest entry wins): bounded memory, O(1), and
 * a flood of over-limit keys only evicts entries, never grows anything. The hash is keyed with a
 * per-table random seed, so chosen keys cannot be made to share a slot.
 */
#ifndef SLUICE_REDIS_OVERCACHE_H
#define SLUICE_REDIS_OVERCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/engine.h"

typedef struct sl_overcache_entry sl_overcache_entry;

/* What a store's workers share: the hash's seed and size, and per slot a count of the give-backs
 * and resets seen by any worker, so that one worker's give-back clears every worker's entry. */
typedef struct sl_overcache_shared {
    uint32_t mask;  /* entries - 1 */
    uint64_t seed;
    _Atomic uint32_t clears[];
} sl_overcache_shared;

/* A worker's table. */
typedef struct sl_overcache {
    sl_overcache_entry *e; /* NULL: the cache is off */
    sl_overcache_shared *sh;
} sl_overcache;

/* entries: rounded up to a power of two (at most 1 << 20); 0 turns the cache off (*out NULL).
 * seed: the hash's key (0: from getrandom). 0 or -ENOMEM. */
int sl_overcache_shared_new(uint32_t entries, uint64_t seed, sl_overcache_shared **out);
void sl_overcache_shared_free(sl_overcache_shared *sh);
/* A worker's table over sh (NULL: off). 0 or -ENOMEM. */
int sl_overcache_init(sl_overcache *c, sl_overcache_shared *sh);
void sl_overcache_free(sl_overcache *c);

/* Whether q, at now, is known over its limit; if so *resp is its answer. */
bool sl_overcache_answer(sl_overcache *c, const sl_request *q, int64_t now, sl_response *resp);

/* What Redis answered q at now: a rejection with nothing left is kept, anything that can make
 * room (an admission, a give-back, a reset) clears the key's entry. */
void sl_overcache_learn(sl_overcache *c, const sl_request *q, int64_t now, const sl_response *r);

#endif

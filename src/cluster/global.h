/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GLOBAL behaviour's state on one node (Gubernator v2 semantics, docs/cluster.md):
 *
 *   non-owner  answers a GLOBAL request at once from its local copy of the key and adds the hits
 *              to a per-key sum; the router sends the sums to the owners every --global-sync-wait
 *              or as soon as --global-batch-limit keys have hits waiting.
 *   owner      applies those sums (as GetPeerRateLimits items, with DRAIN_OVER_LIMIT) and notes
 *              the key as changed; the router broadcasts the current state of changed keys to
 *              every other peer (UpdatePeerGlobals) on the same schedule.
 *   everyone   replaces its local copy with the owner's state when a broadcast (or the owner's
 *              answer to our own hits) arrives.
 *
 * The local copy is the owner's last known state (status, remaining, reset_time) minus the hits
 * admitted here since that state was made. Before the owner has said anything it is a fresh limit
 * (remaining = limit until duration has passed), as a Gubernator non-owner's first answer is.
 * Once reset_time has passed the limit is whole again. This model is algorithm-agnostic and errs
 * on the strict side for buckets that leak between broadcasts.
 *
 * Memory is bounded: at most max_keys entries; a full table makes sl_global_hit() answer -ENOSPC
 * and the router forwards such a request to its owner like a non-GLOBAL one. Idle entries leave
 * through sl_global_expire().
 *
 * Thread safety: every function may be called from any worker thread (entries live in shards,
 * each under its own mutex; the two "waiting" lists have one mutex each).
 */
#ifndef SLUICE_CLUSTER_GLOBAL_H
#define SLUICE_CLUSTER_GLOBAL_H

#include <stddef.h>
#include <stdint.h>

#include "decide/batch.h"
#include "sluice/engine.h"

typedef struct sl_global sl_global;

typedef struct sl_global_config {
    size_t max_keys;     /* entries held at most; 0 = 100000 */
    size_t batch_limit;  /* keys per send/broadcast that make it go at once; 0 = 1000 */
    uint64_t hash_seed;  /* keys the table's own hash of the key ids (shards and buckets), so a
                            client cannot aim keys at one chain; 0 = random per table (tests
                            may fix it) */
} sl_global_config;

/* Signals returned (OR-ed) by sl_global_hit / sl_global_touch for the router's timers. */
enum {
    SL_GLOBAL_ARM = 1,   /* the list went from empty to non-empty: arm the sync timer */
    SL_GLOBAL_FULL = 2,  /* the list holds batch_limit keys: send now */
};

typedef struct sl_global_stats {
    uint64_t keys;            /* entries held */
    uint64_t hits_waiting;    /* keys with hits to send */
    uint64_t touched_waiting; /* keys to broadcast */
    uint64_t local_answers;   /* requests answered from a local copy */
    uint64_t updates;         /* owner states applied */
    uint64_t full;            /* requests refused because the table was full */
    uint64_t longest_chain;   /* most entries one lookup walked so far (a hash-flood gauge) */
} sl_global_stats;

int sl_global_new(const sl_global_config *cfg, sl_global **out);
void sl_global_free(sl_global *g);

/*
 * Non-owner: answer `req` (already validated; key_hash = sl_picker_key_hash of its key) from the
 * local copy at `now` and queue its hits (hits != 0) for the owner. 0 with *resp filled and
 * *signals set, or -ENOSPC (table full: forward the request instead), -ENOMEM.
 */
int sl_global_hit(sl_global *g, uint64_t key_hash, const sl_request *req, int64_t now,
                  sl_response *resp, int *signals);

/* Owner: the key's state changed (call it for GLOBAL requests with hits != 0 it decided), so it
 * is broadcast at the next sync. 0, -ENOSPC or -ENOMEM; *signals as above. */
int sl_global_touch(sl_global *g, uint64_t key_hash, const sl_request *req, int64_t now,
                    int *signals);

/* Apply the owner's state of a key (joined key name + "_" + unique_key). Creates the entry when
 * it is not held (if there is room). */
void sl_global_update(sl_global *g, uint64_t key_hash, const char *key, size_t key_len,
                      const sl_response *state, int32_t algorithm, int64_t duration, int64_t now);

/*
 * Take the waiting hits of up to `max` keys: appended to `b` (which must be empty: reset) as
 * requests with the summed hits, the first hit's created_at, the key's latest limit, duration,
 * algorithm and behaviour (RESET_REMAINING if any hit asked for it). Strings are copied into b.
 * Returns the number of items, or a negative errno (-ENOMEM: nothing was taken).
 */
int sl_global_take_hits(sl_global *g, sl_batch *b, size_t max);
/* Take up to `max` keys to broadcast, the same way, as requests with hits = 0 (a peek at the
 * engine gives the state to send). */
int sl_global_take_touched(sl_global *g, sl_batch *b, size_t max);

size_t sl_global_hits_waiting(sl_global *g);
size_t sl_global_touched_waiting(sl_global *g);

/* Remove up to max_work idle entries whose state has lapsed (not waiting to be sent, reset_time
 * and last use more than one duration ago). Returns the number removed. */
size_t sl_global_expire(sl_global *g, int64_t now, size_t max_work);

void sl_global_stats_get(sl_global *g, sl_global_stats *out);

#endif

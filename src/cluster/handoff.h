/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hand-off: when the peer list changes, the state of every key this node holds but no longer owns
 * goes to the key's new owner over PeersV1/TransferKeys, which merges it (the more restrictive
 * state wins, core/keystate.h). On a graceful leave the same walk runs over the list without this
 * node, so every key goes to its next owner. docs/cluster.md gives the guarantees and the bound.
 *
 * The sender is a state machine on one worker loop (worker 0's, driven by a timer of its own): each
 * step walks at most `step_work` slots of the store (sl_store_export, one shard lock at a time),
 * turns each held key's store hash back into its cluster key id (the engine runs with
 * cluster_keys), asks the picker for the owner, and appends the key's record, with the id in its
 * hash field, to that owner's batch. A batch of `batch_bytes` goes out as one call; one call per
 * peer is in flight at a time, and the walk waits while a full batch cannot go. When a call
 * succeeds, the keys it carried are removed here (once the walk is over: a removal shifts keys
 * back into slots the walk has passed); when it fails, they stay, the failure is logged once per
 * walk, and the walk runs again a second later for the keys left (at most 5 times; then the next
 * list change sends them; a leaving node does not retry).
 * Every walk makes a second pass over the store once the keys taken in the first are removed:
 * a key that a concurrent removal (expiry, eviction) or table growth moved into a slot the first
 * pass had passed is found then. A new list restarts the walk; batches not
 * sent yet are dropped (their keys are walked again under the new list).
 *
 * The receiver (sl_handoff_receive) is pure: decode each record, map the id to this engine's store
 * hash, import.
 */
#ifndef SLUICE_CLUSTER_HANDOFF_H
#define SLUICE_CLUSTER_HANDOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "cluster/picker.h"
#include "core/alg.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "sluice/engine.h"

typedef struct sl_handoff sl_handoff;

/* Called once when a call ends: err 0 (the peer took the batch) or a negative errno. */
typedef void (*sl_handoff_sent_cb)(void *cb_ud, int err);

typedef struct sl_handoff_config {
    sl_engine *engine;          /* created with cluster_keys */
    uv_loop_t *loop;            /* the loop every call below runs on */
    size_t batch_bytes;         /* records per call, in bytes; 0 = 256 KiB */
    size_t step_work;           /* store slots examined per step; 0 = 4096 */
    int retries;                /* walks again after failed calls: 0 = 5, < 0 = none */
    int64_t retry_ms;           /* between them; 0 = 1000 */
    sl_logger *log;             /* may be NULL */
    /* counters (each may be NULL): keys a peer took, keys whose call failed, record bytes taken */
    sl_metrics_counter *m_sent, *m_failed, *m_bytes;
    /* Start a TransferKeys call to the peer with index `peer` in the list given to begin(), with
     * `framed` (a framed TransferKeysReq, taken on success). 0: cb will run once, later; else a
     * negative errno and cb never runs. */
    int (*send)(void *ud, size_t peer, sl_buf *framed, sl_handoff_sent_cb cb, void *cb_ud);
    void *ud;
    /* The walk begun with `token` is over (finished or replaced): release what begin() was given.
     * May be NULL. */
    void (*release)(void *ud, void *token);
    /* The walk begun with `token` ran to its end (every batch answered), just before release.
     * May be NULL. */
    void (*done)(void *ud, void *token);
} sl_handoff_config;

typedef struct sl_handoff_stats {
    uint64_t walks, walks_done;   /* walks begun, walks that ran to their end */
    uint64_t keys, bytes, calls;  /* keys and record bytes taken by peers, calls that succeeded */
    uint64_t failed_calls, failed_keys;
    int64_t last_ms;              /* wall time of the last walk that ran to its end */
} sl_handoff_stats;

int sl_handoff_new(const sl_handoff_config *cfg, sl_handoff **out);
/* Stop walking, drop unsent batches; calls in flight end through the send callbacks later (their
 * completions are ignored once closed). Frees h once nothing refers to it. */
void sl_handoff_close(sl_handoff *h);

/*
 * Begin a walk over the store for the list `picker` (n peers, this node at index self, or -1 when
 * this node is leaving): every key whose owner is not self is sent to its owner. Replaces a walk
 * in progress. The picker must stay valid until release(token) is called. On the loop thread.
 */
void sl_handoff_begin(sl_handoff *h, const sl_picker *picker, long self, void *token);

/* Is a walk (or one of its calls) still going? On the loop thread. */
bool sl_handoff_busy(const sl_handoff *h);
/* Counters. On the loop thread. */
void sl_handoff_stats_get(const sl_handoff *h, sl_handoff_stats *out);

/*
 * Bounds on what a peer sends (issue 25): the latest expiry (or reset) a state of a limit of
 * `duration` may have at `now`: now + 2 x its span + 1 s, the span being the duration in ms, a
 * year for the small numbers that name Gregorian intervals (0..5, which a state does not tell
 * apart from milliseconds), at least 1 s; saturating.
 */
int64_t sl_handoff_latest_expiry(int64_t now, int64_t duration);
/*
 * Check a TransferKeysReq's records before merging any: 0; -E2BIG more than max_keys records (0
 * = no cap); -ERANGE record *bad_at expires later than sl_handoff_latest_expiry allows for its
 * limit (a concurrency state: 24 hours); -EINVAL record *bad_at is malformed.
 */
int sl_handoff_check(const sl_alg_config *cfg, const uint8_t *records, size_t len, int64_t now,
                     size_t max_keys, size_t *bad_at);

/*
 * Receiver: merge the key state records of a TransferKeysReq into the engine (cluster_keys) at
 * `now`. Returns the number of records merged (held afterwards); *bad (may be NULL) counts the
 * malformed one that stopped the decoding (0 or 1). cfg bounds the records (the engine's limits).
 */
size_t sl_handoff_receive(sl_engine *e, const sl_alg_config *cfg, const uint8_t *records,
                          size_t len, int64_t now, size_t *bad);

#endif

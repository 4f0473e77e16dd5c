/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GLOBAL sync of one worker loop: the sender and receiver beside global.c's state
 * (docs/cluster.md). global.c holds the per-key copies and the "waiting" lists; this module
 * moves them over the wire on the worker's loop:
 *
 *   hits       a non-owner's waiting hits go to each key's owner as GetPeerRateLimits items
 *              (DRAIN_OVER_LIMIT) every --global-sync-wait, or at once when --global-batch-limit
 *              keys wait; the owner's answers replace the local copies.
 *   broadcasts an owner's changed keys go to every other peer (UpdatePeerGlobals) on the same
 *              schedule, or a tenth of an interval after peers' hits were applied here.
 *   updates    owner states received from peers replace the local copies.
 *   expiry     idle copies leave once a second (on the one worker configured to do it).
 *
 * The router keeps the peer list, the connections and their health; this module asks it through
 * sl_globalsync_ops for a key's owner and for the peers to broadcast to, and tells it how every
 * call ended (for health, metrics and error counts).
 *
 * Lifecycle: sl_globalsync_new (any thread) -> sl_globalsync_start(loop) on the worker thread ->
 * ... -> sl_globalsync_stop (closes the timers; waiting hits are dropped) -> the loop runs the
 * close callbacks -> sl_globalsync_free. Everything except new, free and stats_get runs on the
 * worker's loop thread.
 */
#ifndef SLUICE_CLUSTER_GLOBALSYNC_H
#define SLUICE_CLUSTER_GLOBALSYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "decide/batch.h"
#include "cluster/peerwire.h"
#include "cluster/global.h"
#include "cluster/peer.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "sluice/engine.h"

typedef struct sl_globalsync sl_globalsync;

/* The calls this module makes (the `method` of sl_globalsync_ops.call_done). */
enum {
    SL_GLOBALSYNC_HITS,       /* GetPeerRateLimits with GLOBAL hits, to an owner */
    SL_GLOBALSYNC_BROADCAST,  /* UpdatePeerGlobals, to every other peer */
};

/* A remote peer as the router's current view has it. vidx and version are the router's own and
 * come back unchanged in call_done. */
typedef struct sl_globalsync_peer {
    sl_peer *conn;
    const char *addr;
    size_t vidx;
    uint64_t version;
} sl_globalsync_peer;

typedef struct sl_globalsync_ops {
    /* Whether the worker has a peer list at all (nothing is sent before it has one). */
    bool (*has_view)(void *ud);
    /* The owner of a key hash: true with *out filled when it is a remote peer with a
     * connection, false when this node owns it (or no peer can). */
    bool (*owner)(void *ud, uint64_t key_hash, sl_globalsync_peer *out);
    /* Slots of the current view, and the remote peer in slot i (false: this node or none). */
    size_t (*slots)(void *ud);
    bool (*peer)(void *ud, size_t i, sl_globalsync_peer *out);
    /* A call ended: err 0 (answered OK) or a negative errno; t0 = sl_mono_ns() at the start. */
    void (*call_done)(void *ud, int method, const sl_globalsync_peer *p, int64_t t0, int err);
} sl_globalsync_ops;

typedef struct sl_globalsync_config {
    sl_engine *engine;                   /* the local engine (not owned) */
    sl_global *global;                   /* the node's GLOBAL state (not owned) */
    int64_t sync_wait_ns;                /* --global-sync-wait (> 0) */
    size_t batch_limit;                  /* --global-batch-limit, at most SL_BATCH_MAX_ITEMS */
    int64_t call_timeout_ms;             /* deadline of each call (--batch-timeout) */
    size_t max_msg;                      /* largest owner answer decoded (bytes) */
    bool expire;                         /* this worker runs sl_global_expire once a second */
    sl_logger *log;                      /* may be NULL */
    sl_metrics_counter *m_local_answers; /* may be NULL */
    sl_metrics_counter *m_updates;       /* may be NULL */
    const sl_globalsync_ops *ops;
    void *ud;                            /* for ops */
} sl_globalsync_config;

typedef struct sl_globalsync_stats {
    uint64_t local_answers;  /* GLOBAL requests answered from the local copy */
    uint64_t sends;          /* GLOBAL hit batches sent to owners */
    uint64_t broadcasts;     /* UpdatePeerGlobals calls made */
    uint64_t updates;        /* owner states received by UpdatePeerGlobals */
} sl_globalsync_stats;

int sl_globalsync_new(const sl_globalsync_config *cfg, sl_globalsync **out);
void sl_globalsync_start(sl_globalsync *s, uv_loop_t *loop);
void sl_globalsync_stop(sl_globalsync *s);
void sl_globalsync_free(sl_globalsync *s);

/* Non-owner: answer the GLOBAL request q (validated; key_hash its sl_picker_key_hash) from the
 * local copy into *resp and queue its hits. Returns sl_global_hit()'s code: 0 or -ENOMEM
 * mean answered; -ENOSPC means the table is full and the caller forwards q instead. */
int sl_globalsync_hit(sl_globalsync *s, uint64_t key_hash, const sl_request *q, int64_t now,
                      sl_response *resp);

/* Owner: this node decided the GLOBAL request q with hits != 0: broadcast its new state. */
void sl_globalsync_decided(sl_globalsync *s, uint64_t key_hash, const sl_request *q, int64_t now);

/* Owner: a peer's GetPeerRateLimits batch b was decided here; its GLOBAL items with hits are
 * broadcast soon (a tenth of a sync interval). */
void sl_globalsync_peer_batch(sl_globalsync *s, const sl_batch *b, int64_t now);

/* UpdatePeerGlobals received: take the owners' states. */
void sl_globalsync_update(sl_globalsync *s, const sl_peerwire_global *g, size_t n, int64_t now);

/* Counters of this worker (any thread). */
void sl_globalsync_stats_get(sl_globalsync *s, sl_globalsync_stats *out);

#endif

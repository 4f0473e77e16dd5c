/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_decider: what decides a batch, behind one interface. There are three: the local engine
 * (sl_decider_local, here), the router (cluster/router.h sl_router_decider: the owner of each
 * item, this node's engine or a peer) and the Redis store (redis/rstore.h sl_rstore_decider).
 * The node picks one when it is built (node/nodeparts.c) and the service hands every batch to it
 * (node/service.c) without asking which it is.
 *
 * A decider is an operations table and the object it works on (the engine, the router, the
 * store), two pointers, made by value: it allocates nothing. The object's owner frees the object
 * in its own order (the node: node/node.c, which stops the router before the server and frees
 * the store before the router), so the table has no free.
 *
 * submit decides every item of b that is not already answered (b->answered[i]) and then calls
 * done(ud, b) exactly once, on worker `worker`'s loop thread: before it returns (the local
 * engine; the router when every item is this node's; an error answered at once) or later (a
 * peer's or Redis's answer). Every item has an answer then: a response or a per-item error.
 *
 * worker_start / worker_stop are the server's worker hooks (net/server.h), run on that worker's
 * thread: a decider with connections of its own makes them there, on the worker's libuv loop
 * (opaque here: decide has no event loop), and closes them when the worker stops, answering what
 * is still in flight.
 */
#ifndef SLUICE_DECIDE_DECIDER_H
#define SLUICE_DECIDE_DECIDER_H

#include <stddef.h>
#include <stdint.h>

#include "decide/batch.h"
#include "sluice/engine.h"

struct uv_loop_s; /* libuv's uv_loop_t */

typedef struct sl_decider_ops {
    const char *name; /* "local", "router", "peers", "redis": for logs and tests */
    void (*submit)(void *self, int worker, sl_batch *b, int64_t now_ms, sl_batch_done_cb done,
                   void *ud);
    /* NULL: nothing per worker (the local engine) */
    void (*worker_start)(void *self, int worker, struct uv_loop_s *loop);
    void (*worker_stop)(void *self, int worker);
} sl_decider_ops;

typedef struct sl_decider {
    const sl_decider_ops *ops;
    void *self;
} sl_decider;

/* Hand b to d (see above). Inline: the request path pays one indirect call, nothing more. */
static inline void sl_decider_submit(const sl_decider *d, int worker, sl_batch *b, int64_t now_ms,
                                     sl_batch_done_cb done, void *ud)
{
    d->ops->submit(d->self, worker, b, now_ms, done, ud);
}

static inline void sl_decider_worker_start(const sl_decider *d, int worker,
                                           struct uv_loop_s *loop)
{
    if (d->ops->worker_start)
        d->ops->worker_start(d->self, worker, loop);
}

static inline void sl_decider_worker_stop(const sl_decider *d, int worker)
{
    if (d->ops->worker_stop)
        d->ops->worker_stop(d->self, worker);
}

/* Decide b's items that are not answered yet on the engine: the whole batch in one
 * sl_engine_decide_batch() when none is, else item by item. Also the router's own path for keys
 * this node owns. */
void sl_decider_decide_local(sl_engine *e, sl_batch *b, int64_t now_ms);

/* The local engine as a decider: one sl_engine_decide_batch() over the batch (item by item when
 * some are already answered), then done, before submit returns. The engine is not owned. */
sl_decider sl_decider_local(sl_engine *engine);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decider interface (decide/decider.h) and its one implementation at this layer, the local
 * engine: what a standalone node decides with. The router and the Redis store implement theirs
 * beside their own code (cluster/router.c, redis/rstore.c).
 */
#include "decide/decider.h"

void sl_decider_decide_local(sl_engine *e, sl_batch *b, int64_t now_ms)
{
    if (b->n_answered == 0) {
        /* the whole batch at once: its keys hashed first and their slots prefetched */
        sl_engine_decide_batch(e, b->reqs, b->resps, b->n, now_ms);
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        if (!b->answered[i])
            sl_engine_decide(e, &b->reqs[i], &b->resps[i], now_ms);
}

static void local_submit(void *self, int worker, sl_batch *b, int64_t now_ms,
                         sl_batch_done_cb done, void *ud)
{
    (void)worker; /* the engine is shared by every worker: no per-worker state */
    sl_decider_decide_local(self, b, now_ms);
    done(ud, b);
}

static const sl_decider_ops local_ops = {.name = "local", .submit = local_submit};

sl_decider sl_decider_local(sl_engine *engine)
{
    return (sl_decider){.ops = &local_ops, .self = engine};
}

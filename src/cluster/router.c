/*
 * Router (see router.h). This file holds the standalone path: every item is decided by the local
 * engine, in request order, with the engine's batch entry point when no item was pre-answered (it
 * hashes and prefetches ahead, which matters for 1000-item calls).
 */
#include "cluster/router.h"

#include <errno.h>
#include <stdlib.h>

struct sl_router {
    sl_engine *engine;
};

int sl_router_new(const sl_router_config *cfg, sl_router **out)
{
    sl_router *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->engine = cfg->engine;
    *out = r;
    return 0;
}

void sl_router_free(sl_router *r)
{
    free(r);
}

static void decide_local(sl_router *r, sl_batch *b, int64_t now_ms)
{
    if (b->n_answered == 0) {
        sl_engine_decide_batch(r->engine, b->reqs, b->resps, b->n, now_ms);
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        if (!b->answered[i])
            sl_engine_decide(r->engine, &b->reqs[i], &b->resps[i], now_ms);
}

void sl_router_submit(sl_router *r, int worker, sl_batch *b, int64_t now_ms, sl_router_done_cb done,
                      void *ud)
{
    (void)worker;
    decide_local(r, b, now_ms);
    done(ud, b);
}

void sl_router_peer_rate_limits(sl_router *r, int worker, sl_batch *b, int64_t now_ms,
                                sl_router_done_cb done, void *ud)
{
    (void)worker;
    decide_local(r, b, now_ms);
    done(ud, b);
}

void sl_router_update_globals(sl_router *r, int worker, const struct sl_gub_global *g, size_t n,
                              int64_t now_ms)
{
    /* A standalone node owns every key: there is no copy of another owner's state to update. */
    (void)r, (void)worker, (void)g, (void)n, (void)now_ms;
}

void sl_router_health(const sl_router *r, bool *healthy, int32_t *peer_count, char *why,
                      size_t why_len)
{
    (void)r;
    *healthy = true;
    *peer_count = 1;
    if (why_len)
        why[0] = '\0';
}

int sl_router_peer_count(const sl_router *r)
{
    (void)r;
    return 1;
}

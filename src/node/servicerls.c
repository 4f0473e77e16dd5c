/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's Envoy half: RLS v3 ShouldRateLimit (node/service.c routes it here; the call
 * record and the shared helpers are node/service_int.h). The request is planned into the call's
 * batch against the worker's current --rls-config-dir rules (api/rls.h), checked against the
 * caller's identity and the worker shedder like GetRateLimits, handed where GetRateLimits items
 * go (submit: the Redis store under --store redis, else the router), and the RateLimitResponse
 * encoded from the answers when they came (rls_done, on the call's worker loop), counted per
 * domain and rule (api/rlsmetrics.h). An item that could not be decided (its owner unreachable,
 * Redis unreachable without --fail-open) makes the call UNAVAILABLE (sl_rls_encode).
 */
#include "node/service_int.h"

#include <errno.h>
#include <stdlib.h>

static void giveback_sent(void *ud, sl_batch *g)
{
    (void)ud;
    sl_batch_free(g);
    free(g);
}

/* An all-or-nothing group that was refused gives back what its other limits took (api/rls.h
 * sl_rls_giveback), fire and forget, where the call's items went. */
static void give_back(sl_service *s, sl_call *c, sl_batch *b, int64_t now)
{
    if (!sl_rls_may_give_back(c->rls))
        return;
    sl_batch *g = malloc(sizeof *g);
    if (!g)
        return;
    sl_batch_init(g, 0);
    if (!sl_rls_giveback(c->rls, b, g)) {
        giveback_sent(NULL, g);
        return;
    }
    submit(s, c->worker, g, now, giveback_sent, NULL);
}

static void rls_done(void *ud, sl_batch *b)
{
    sl_call *c = ud;
    sl_service *s = c->svc;
    int64_t now = sl_exchange_now_ms(c->ex);
    if (s->cfg.protect)
        sl_gubprotect_end(s->cfg.protect, c->prot, b, false, now);
    give_back(s, c, b, now);
    sl_grpc_status st;
    size_t mark;
    int rc = sl_grpc_frame_begin(&c->out, &mark);
    if (!rc)
        rc = sl_rls_encode(c->rls, b, now, &c->out, &st);
    if (!rc)
        rc = sl_grpc_frame_end(&c->out, mark);
    if (!rc) {
        sl_exchange_respond_grpc(c->ex, c->out.data, c->out.len, SL_GRPC_OK, NULL);
        sl_rls_count(c->rls, b, s->rls_metrics);
        count_call(s, M_SHOULD_RATE_LIMIT, T_GRPC, SL_GRPC_OK, c->t0);
    } else if (rc == -EAGAIN) {
        sl_service_answer_status(s, c->ex, M_SHOULD_RATE_LIMIT, T_GRPC, &st, c->t0);
    } else {
        sl_service_answer_error(s, c->ex, M_SHOULD_RATE_LIMIT, T_GRPC, SL_GRPC_INTERNAL,
                                "could not encode the response", c->t0);
    }
    sl_rls_end(c->rls);
    sl_service_call_put(c);
}

void sl_service_should_rate_limit(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                  int64_t t0)
{
    sl_grpc_status st;
    const uint8_t *msg = NULL;
    size_t len = 0;
    const sl_ident *id = NULL;
    if (idents_of(s) && !(id = sl_service_who(s, ex, rq, M_SHOULD_RATE_LIMIT, T_GRPC, t0)))
        return;
    sl_call *c = call_open(s, ex, rq, M_SHOULD_RATE_LIMIT, T_GRPC, &msg, &len, t0);
    if (!c)
        return;
    sl_rlsconf *conf = NULL;
    if (s->cfg.rls)
        conf = (sl_rlsconf *)sl_rlssrc_read(s->cfg.rls, &pool_of(s, c->worker)->rls_reader);
    int rc = sl_rls_begin(&s->cfg.rls_cfg, conf, msg, len, &c->batch, &c->rls, &st);
    int64_t now;
    if (!call_admit(s, c, id, rc, &st, false, &now))
        return;
    submit(s, c->worker, &c->batch, now, rls_done, c);
}

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

#include "api/rlsjson.h"

#include <errno.h>
#include <stdlib.h>

/* An all-or-nothing group that was refused gives back what its other limits took (api/rls.h
 * sl_rls_giveback). */
static size_t rls_giveback(void *ctx, sl_batch *gb)
{
    sl_call *c = ctx;
    return sl_rls_may_give_back(c->rls) ? sl_rls_giveback(c->rls, &c->batch, gb) : 0;
}

/* POST /json's answer: the RateLimitResponse rls.c writes, as protojson (api/rlsjson.h); 200,
 * 429 when OVER_LIMIT, as envoyproxy/ratelimit answers; an undecided descriptor is a 500. */
static void json_done(sl_service *s, sl_call *c, sl_batch *b, int64_t now)
{
    sl_grpc_status st;
    sl_buf pb;
    sl_buf_init(&pb, 0);
    int overall = 0;
    int rc = sl_rls_encode(c->rls, b, now, &pb, &st);
    if (!rc) {
        sl_buf_reset(&c->out);
        rc = sl_rlsjson_response((const uint8_t *)pb.data, pb.len, &c->out, &overall);
    }
    if (!rc) {
        int code = overall == 1 ? 200 : overall == 2 ? 429 : 500;
        sl_exchange_respond_simple(c->ex, code, "application/json", c->out.data, c->out.len);
        sl_rls_count(c->rls, b, s->rls_metrics);
        count_call(s, M_SHOULD_RATE_LIMIT, T_HTTP, SL_GRPC_OK, c->t0);
    } else if (rc == -EAGAIN) {
        sl_service_answer_status(s, c->ex, M_SHOULD_RATE_LIMIT, T_HTTP, &st, c->t0);
    } else {
        sl_service_answer_error(s, c->ex, M_SHOULD_RATE_LIMIT, T_HTTP, SL_GRPC_INTERNAL,
                                "could not encode the response", c->t0);
    }
    sl_buf_free(&pb);
    sl_rls_end(c->rls);
    sl_service_call_put(c);
}

static void rls_done(void *ud, sl_batch *b)
{
    sl_call *c = ud;
    sl_service *s = c->svc;
    int64_t now = sl_exchange_now_ms(c->ex);
    if (s->cfg.protect)
        sl_gubprotect_end(s->cfg.protect, c->prot, b, false, now);
    giveback_submit(s, c->worker, now, rls_giveback, c);
    sl_grpc_status st;
    if (c->transport == T_HTTP) {
        json_done(s, c, b, now);
        return;
    }
    size_t mark;
    int rc = sl_grpc_frame_begin(&c->out, &mark);
    if (!rc)
        rc = sl_rls_encode(c->rls, b, now, &c->out, &st);
    if (!rc)
        rc = sl_grpc_frame_end(&c->out, mark);
    if (!rc) {
        sl_exchange_respond_grpc(c->ex, c->out.data, c->out.len, SL_GRPC_OK, NULL);
        sl_rls_count(c->rls, b, s->rls_metrics);
        count_call(s, c->method, T_GRPC, SL_GRPC_OK, c->t0);
    } else if (rc == -EAGAIN) {
        sl_service_answer_status(s, c->ex, c->method, T_GRPC, &st, c->t0);
    } else {
        sl_service_answer_error(s, c->ex, c->method, T_GRPC, SL_GRPC_INTERNAL,
                                "could not encode the response", c->t0);
    }
    sl_rls_end(c->rls);
    sl_service_call_put(c);
}

void sl_service_should_rate_limit(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                  int method, int transport, int64_t t0)
{
    sl_grpc_status st;
    const uint8_t *msg = NULL;
    size_t len = 0;
    const sl_ident *id = NULL;
    if (idents_of(s) && !(id = sl_service_who(s, ex, rq, method, transport, t0)))
        return;
    sl_call *c = call_open(s, ex, rq, method, transport, &msg, &len, t0);
    if (!c)
        return;
    if (transport == T_HTTP) { /* POST /json: the same message, from protojson */
        const char *why;
        sl_buf_reset(&c->out);
        int jrc = sl_rlsjson_request((const char *)rq->body, rq->body_len, &c->out, &why);
        if (jrc) {
            sl_service_answer_error(s, ex, M_SHOULD_RATE_LIMIT, T_HTTP,
                                    jrc == -ENOMEM ? SL_GRPC_RESOURCE_EXHAUSTED
                                                   : SL_GRPC_INVALID_ARGUMENT,
                                    why, t0);
            sl_service_call_put(c);
            return;
        }
        msg = (const uint8_t *)c->out.data;
        len = c->out.len;
    }
    sl_rlsconf *conf = NULL;
    if (s->cfg.rls)
        conf = (sl_rlsconf *)sl_rlssrc_read(s->cfg.rls, &pool_of(s, c->worker)->rls_reader);
    sl_rls_mode mode = method == M_CHECK_RATE_LIMIT ? SL_RLS_CHECK
                       : method == M_REPORT       ? SL_RLS_REPORT
                                                  : SL_RLS_SHOULD;
    int rc = sl_rls_begin_mode(&s->cfg.rls_cfg, conf, mode, msg, len, &c->batch, &c->rls, &st);
    int64_t now;
    if (!call_admit(s, c, id, rc, &st, false, &now))
        return;
    submit(s, c->worker, &c->batch, now, rls_done, c);
}

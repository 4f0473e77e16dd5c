/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's Levee half: POST /attempt and POST /release (node/service.c routes them here; the
 * call record and the shared helpers are node/service_int.h). /attempt is decided by
 * api/attempt.h's state machine under protection (else api/levee.h's rate quotas alone) into the
 * worker's one sl_answer, and the answer goes out at once or held for its X-Delay-Ms
 * (node/held.h). This file only reads the request, hands the call's batch on when the machine
 * asks (its leases to their owners, its rate quotas to Redis: attempt_hand_off) and writes the
 * answer. On a node on its own the machine answers at once; in a cluster or on the Redis store
 * the call waits in a call record (the machine's state in it) for each answer (attempt_done), and
 * a /release for its give-backs (release_done). A waiting call reads its request headers again
 * when it resumes, so it keeps nothing of them.
 */
#include "node/service_int.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

static void header_value(const sl_http_request *rq, const char *name, const char **v, size_t *n)
{
    const sl_http_header *h = sl_http_header_find(rq, name);
    *v = h ? h->value : NULL;
    *n = h ? h->value_len : 0;
}

/* Send an /attempt or /release answer: its headers go as they are (sl_answer_header has
 * sl_http_header's layout), Content-Type in the slot the answer keeps for it. */
static void respond_answer(sl_service *s, sl_exchange *ex, int method, sl_answer *r, int64_t t0)
{
    size_t nh = r->n_headers;
    if (r->body && r->content_type)
        r->headers[nh++] = (sl_answer_header){"content-type", sizeof "content-type" - 1,
                                              r->content_type, strlen(r->content_type)};
    sl_http_response resp = {
        .status = r->status,
        .headers = (const sl_http_header *)r->headers,
        .nheaders = nh,
        .body = r->body,
        .body_len = r->body ? r->body_len : 0,
    };
    sl_exchange_respond(ex, &resp);
    if (method == M_ATTEMPT)
        sl_metrics_counter_inc(s->attempts[r->outcome]);
    count_call(s, method, T_HTTP, r->grpc_code, t0);
}

_Static_assert(sizeof(sl_answer_header) == sizeof(sl_http_header) &&
                   offsetof(sl_answer_header, name_len) == offsetof(sl_http_header, name_len) &&
                   offsetof(sl_answer_header, value) == offsetof(sl_http_header, value) &&
                   offsetof(sl_answer_header, value_len) == offsetof(sl_http_header, value_len),
               "sl_answer_header must keep sl_http_header's layout");

/* /attempt and /release with identities: a known token or certificate (401 otherwise) whose
 * prefixes hold the resource (403 otherwise; a /release without X-Resource is judged by its
 * identity alone). */
static bool resource_allowed(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int method,
                             const char *res, size_t res_len, int64_t t0)
{
    static const char unauth[] = "unauthorized: send Authorization: Bearer <client token>\n";
    static const char denied[] = "forbidden: this client may not use this resource\n";
    bool sent;
    const sl_ident *id = sl_service_ident_of(s, ex, rq, &sent);
    if (!id) {
        sl_service_answer_text(s, ex, method, 401, "text/plain; charset=utf-8", unauth,
                               sizeof unauth - 1, SL_GRPC_UNAUTHENTICATED, t0);
        return false;
    }
    if ((res || method == M_ATTEMPT) && !sl_ident_allows(id, res ? res : "", res_len)) {
        sl_service_answer_text(s, ex, method, 403, "text/plain; charset=utf-8", denied,
                               sizeof denied - 1, SL_GRPC_PERMISSION_DENIED, t0);
        return false;
    }
    return true;
}

/* X-Delay-Mode: hold on an admitted, delayed answer: its X-Delay-Ms (node/held.h). 0 = answer now. */
static int64_t hold_for(const sl_http_request *rq, const sl_answer *r)
{
    const char *m;
    size_t ml;
    header_value(rq, "x-delay-mode", &m, &ml);
    if (!m || ml != 4 || strncasecmp(m, "hold", 4))
        return 0;
    return sl_held_delay_ms(r);
}

/* A held /attempt answer went out: counted as an immediate one is (respond_answer). */
void sl_service_held_sent(void *ud, int outcome, int grpc_code, int64_t t0)
{
    sl_service *s = ud;
    sl_metrics_counter_inc(s->attempts[outcome]);
    count_call(s, M_ATTEMPT, T_HTTP, grpc_code, t0);
}

/* The protection's request headers of an /attempt. */
static inline __attribute__((always_inline)) void
attempt_prot_headers(const sl_http_request *rq, sl_attempt_req *q)
{
    header_value(rq, "x-priority", &q->priority, &q->priority_len);
    header_value(rq, "x-concurrency", &q->concurrency, &q->concurrency_len);
    header_value(rq, "x-lease-id", &q->lease_id, &q->lease_id_len);
}

/* The request headers of an /attempt (the protection's too when `prot`). */
static inline __attribute__((always_inline)) void
attempt_headers(const sl_http_request *rq, sl_attempt_req *q, bool prot)
{
    header_value(rq, "x-resource", &q->levee.resource, &q->levee.resource_len);
    header_value(rq, "x-prefix", &q->levee.prefix, &q->levee.prefix_len);
    header_value(rq, "x-method", &q->levee.method, &q->levee.method_len);
    header_value(rq, "x-req-id", &q->levee.req_id, &q->levee.req_id_len);
    header_value(rq, "x-max-delay", &q->levee.max_delay, &q->levee.max_delay_len);
    if (prot)
        attempt_prot_headers(rq, q);
}

/* The worker's /attempt answer goes out: held for its X-Delay-Ms when asked, else now. */
static inline __attribute__((always_inline)) void
attempt_send(sl_service *s, sl_exchange *ex, const sl_http_request *rq, const sl_attempt_req *q,
             sl_call_pool *p, int64_t t0)
{
    int64_t hold_ms = q->levee.max_delay ? hold_for(rq, &p->answer) : 0;
    if (hold_ms > 0 && sl_held_add(&p->held, ex, &p->answer, hold_ms, t0))
        return;
    respond_answer(s, ex, M_ATTEMPT, &p->answer, t0);
}

static void attempt_done(void *ud, sl_batch *b);

/* The state machine asks for a decision (api/attempt.h): the call's batch goes to the node's
 * decider (the Redis store under --store redis, where DO_STORE comes from; else the router or the
 * engine), and attempt_done takes the answer. False: nothing to hand on. */
static bool attempt_hand_off(sl_service *s, sl_call *c, int next, int64_t now)
{
    if (next != SL_ATTEMPT_DO_STORE && next != SL_ATTEMPT_DO_ROUTE)
        return false;
    submit(s, c->worker, &c->batch, now, attempt_done, c);
    return true;
}

/* A waiting /attempt's batch was answered (its leases' owners, the Redis store): the state
 * machine's next step, with the request headers and quotas read again (the call waited); then
 * the next hand-off, or the leases a rejection gives back go to their owners and the answer out. */
static void attempt_done(void *ud, sl_batch *b)
{
    (void)b;
    sl_call *c = ud;
    sl_service *s = c->svc;
    sl_call_pool *p = pool_of(s, c->worker);
    const sl_http_request *rq = sl_exchange_request(c->ex);
    sl_attempt_req q;
    attempt_headers(rq, &q, true);
    int64_t now = sl_exchange_now_ms(c->ex);
    const sl_quota_snap *snap = sl_quotasrc_read(s->cfg.quotas, &p->quota_reader);
    uint64_t back;
    int next = sl_attempt_step(s->cfg.protect, c->worker, &s->cfg.levee, snap, &q, &c->att,
                               sl_router_peer_count(s->cfg.router), now, &p->answer, &back);
    if (attempt_hand_off(s, c, next, now))
        return;
    sl_batch *gb = sl_attempt_giveback(s->cfg.protect, &q, &c->att, back, now);
    if (gb)
        submit(s, c->worker, gb, now, giveback_done, s->cfg.protect);
    attempt_send(s, c->ex, rq, &q, p, c->t0);
    sl_service_call_put(c);
}

/* Levee's /attempt: under protection when the node has it (api/attempt.h's state machine decides;
 * this only reads the request, hands a batch on when asked and sends the answer), else the rate
 * quotas alone. */
void sl_service_attempt(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    int worker = sl_exchange_worker(ex);
    sl_call_pool *p = pool_of(s, worker);
    sl_attempt_req q;
    attempt_headers(rq, &q, false);
    if (idents_of(s) && !resource_allowed(s, ex, rq, M_ATTEMPT, q.levee.resource,
                                           q.levee.resource_len, t0))
        return;
    const sl_quota_snap *snap = sl_quotasrc_read(s->cfg.quotas, &p->quota_reader);
    int64_t now = sl_exchange_now_ms(ex);
    if (!s->cfg.protect) {
        sl_levee_attempt(&s->cfg.levee, snap, s->cfg.engine, &q.levee, now, &p->answer);
        attempt_send(s, ex, rq, &q, p, t0);
        return;
    }
    attempt_prot_headers(rq, &q); /* (the Levee headers are read above: read once) */
    sl_call *c = NULL; /* on the Redis store or in a cluster: the call its items wait in */
    int nodes = sl_router_peer_count(s->cfg.router);
    if (__builtin_expect(s->cfg.rstore != NULL || nodes > 1, 0) &&
        !(c = sl_service_call_get(s, ex, M_ATTEMPT, T_HTTP, t0))) {
        sl_service_answer_error(s, ex, M_ATTEMPT, T_HTTP, SL_GRPC_RESOURCE_EXHAUSTED,
                                "out of memory", t0);
        return;
    }
    sl_attempt_fleet st; /* a node on its own: the call's state lives as long as this call */
    int next = sl_attempt_start(s->cfg.protect, worker, &s->cfg.levee, snap, &q,
                                c ? &c->batch : NULL, s->cfg.rstore != NULL, nodes, now,
                                c ? &c->att : &st, &p->answer);
    if (c && attempt_hand_off(s, c, next, now))
        return;
    if (c)
        sl_service_call_put(c);
    attempt_send(s, ex, rq, &q, p, t0);
}

static void release_headers(const sl_http_request *rq, sl_attempt_release_req *rr)
{
    header_value(rq, "x-lease-id", &rr->lease_id, &rr->lease_id_len);
    header_value(rq, "x-resource", &rr->resource, &rr->resource_len);
    header_value(rq, "x-req-id", &rr->req_id, &rr->req_id_len);
}

/* The owners answered a /release: of both its leases in a cluster or on the Redis store
 * (api/attempt.h sl_attempt_release_route), else of the fleet lease given back to its owner. */
static void release_done(void *ud, sl_batch *b)
{
    sl_call *c = ud;
    sl_service *s = c->svc;
    sl_call_pool *p = pool_of(s, c->worker);
    sl_attempt_release_req rr;
    release_headers(sl_exchange_request(c->ex), &rr);
    if (c->rel_routed)
        sl_attempt_release_done(s->cfg.protect, &rr, &c->att, c->att_rc, &p->answer);
    else
        sl_attempt_release_answer(&rr, c->att_rc,
                                  sl_gubprotect_fleet_released(s->cfg.protect, &b->resps[0]),
                                  &p->answer);
    respond_answer(s, c->ex, M_RELEASE, &p->answer, c->t0);
    sl_service_call_put(c);
}

/* /release: the concurrency lease here, a fleet lease of the owner's given back to it (routed);
 * in a cluster or on the Redis store both leases are the owners' (one batch). */
void sl_service_release(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    sl_call_pool *p = pool_of(s, sl_exchange_worker(ex));
    sl_attempt_release_req rr;
    release_headers(rq, &rr);
    if (idents_of(s) && !resource_allowed(s, ex, rq, M_RELEASE, rr.resource, rr.resource_len, t0))
        return;
    int64_t now = sl_exchange_now_ms(ex);
    int conc_rc;
    if (s->cfg.rstore || sl_router_peer_count(s->cfg.router) > 1) {
        sl_call *c = sl_service_call_get(s, ex, M_RELEASE, T_HTTP, t0);
        if (!c) {
            sl_service_answer_error(s, ex, M_RELEASE, T_HTTP, SL_GRPC_RESOURCE_EXHAUSTED,
                                    "out of memory", t0);
            return;
        }
        c->att.leases = &c->batch;
        if (sl_attempt_release_route(s->cfg.protect, &rr, now, &c->att, &conc_rc, &p->answer)) {
            c->att_rc = conc_rc;
            c->rel_routed = true;
            submit(s, c->worker, &c->batch, now, release_done, c);
            return;
        }
        sl_service_call_put(c);
        respond_answer(s, ex, M_RELEASE, &p->answer, t0);
        return;
    }
    uint64_t fleet = sl_attempt_release_begin(s->cfg.protect, &rr, now, true, &conc_rc,
                                              &p->answer);
    if (fleet) {
        sl_call *c = sl_service_call_get(s, ex, M_RELEASE, T_HTTP, t0);
        if (c && !sl_gubprotect_fleet_item(s->cfg.protect, &c->batch, -1, 0, 1, fleet)) {
            c->att_rc = conc_rc;
            c->rel_routed = false;
            submit(s, c->worker, &c->batch, now, release_done, c);
            return;
        }
        if (c)
            sl_service_call_put(c);
        sl_attempt_release_answer(&rr, conc_rc, -1, &p->answer);
    }
    respond_answer(s, ex, M_RELEASE, &p->answer, t0);
}

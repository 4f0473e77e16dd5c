/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Service: routing and the per-call flow (see service.h). Levee's /attempt and /release are
 * node/serviceatt.c, Envoy's ShouldRateLimit node/servicerls.c; the three share the call record
 * and the helpers in node/service_int.h.
 *
 *   exchange -> route by (grpc?, method, path) -> decode into the call's batch -> decider
 *            -> encode into the call's buffer -> respond -> count + observe latency
 *
 * A call record is taken from the worker's pool when a request needs the router and returned
 * after the answer; requests answered at once (health, metrics, errors) need none.
 */
#include "node/service_int.h"

#include "api/rlsjson.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/grpczip.h"
#include "auth/bearer.h"
#include "cluster/peerwire.h"

static const char *const method_names[M_COUNT] = {
    "GetRateLimits", "HealthCheck", "LiveCheck", "GetPeerRateLimits",
    "UpdatePeerGlobals", "TransferKeys", "Attempt", "Metrics", "other", "Release",
    "ShouldRateLimit", "CheckRateLimit", "Report", "Check", "Watch", "ServerReflectionInfo",
};
static const char *const transport_names[T_COUNT] = {"grpc", "http"};

/* ---- metrics ------------------------------------------------------------------------------- */

const char *sl_service_method_name(int method)
{
    return method >= 0 && method < M_COUNT ? method_names[method] : "other";
}

sl_metrics_counter *sl_service_count_series(sl_service *s, int method, int transport, int code)
{
    /* First call with this outcome: resolve the series once (takes the registry lock). */
    const char *v[3] = {method_names[method], transport_names[transport], sl_grpc_code_name(code)};
    sl_metrics_counter *c = sl_metrics_counter_get(s->calls_family, v, 3);
    atomic_store_explicit(&s->calls[method][transport][code], c, memory_order_release);
    return c;
}

static int register_metrics(sl_service *s)
{
    sl_metrics *m = s->cfg.metrics;
    if (!m)
        return 0;
    int rc = sl_metrics_counter_family(m, "sluice_calls_total",
                                       "API calls answered, by method, transport and gRPC code "
                                       "(HTTP answers are counted with the code they map to).",
                                       "method,transport,code", &s->calls_family);
    if (rc)
        return rc;
    static const double bounds[] = {SL_METRICS_LATENCY_BUCKETS};
    sl_metrics_family *lat;
    rc = sl_metrics_histogram_family(m, "sluice_call_duration_seconds",
                                     "Time from a complete request to its answer, by method and "
                                     "transport.",
                                     "method,transport", bounds, SL_METRICS_LATENCY_NBUCKETS, 1e9,
                                     &lat);
    if (rc)
        return rc;
    sl_metrics_family *pd;
    rc = sl_metrics_counter_family(m, "sluice_peer_denied_total",
                                   "PeersV1 calls refused (UNAUTHENTICATED or PERMISSION_DENIED): "
                                   "the caller did not prove it is a member of the peer list "
                                   "(reasons in sluice_peer_refused_total).",
                                   "", &pd);
    if (rc)
        return rc;
    s->peer_denied = sl_metrics_counter_get(pd, NULL, 0);
    if ((rc = sl_service_peer_metrics(s)))
        return rc;
    sl_metrics_family *ex;
    rc = sl_metrics_counter_family(m, "sluice_deadline_expired_total",
                                   "gRPC calls whose grpc-timeout had passed before their items "
                                   "were decided: not decided (GetRateLimits: every item answered "
                                   "with Gubernator's deadline error; others DEADLINE_EXCEEDED).",
                                   "", &ex);
    if (rc)
        return rc;
    s->expired = sl_metrics_counter_get(ex, NULL, 0);
    if ((rc = sl_rlsmetrics_new(m, s->cfg.rls_cfg.max_names, &s->rls_metrics)))
        return rc;
    if (s->cfg.quotas) {
        sl_metrics_family *att;
        rc = sl_metrics_counter_family(m, "sluice_levee_attempts_total",
                                       "Levee POST /attempt answers by outcome (accepted 200, "
                                       "rejected 429, failed 500, malformed 400).",
                                       "outcome", &att);
        if (rc)
            return rc;
        for (int o = SL_ANSWER_ACCEPTED; o <= SL_ANSWER_MALFORMED; o++) {
            const char *v[1] = {sl_answer_outcome_name((sl_answer_outcome)o)};
            s->attempts[o] = sl_metrics_counter_get(att, v, 1);
        }
        /* Levee's four outcomes: a shed call was rejected, a release of no lease malformed */
        s->attempts[SL_ANSWER_SHED] = s->attempts[SL_ANSWER_REJECTED];
        s->attempts[SL_ANSWER_NOT_FOUND] = s->attempts[SL_ANSWER_MALFORMED];
    }
    /* Pre-create the latency series of the methods that exist on each transport. */
    static const struct { int m, t; } used[] = {
        {M_GET_RATE_LIMITS, T_GRPC}, {M_GET_RATE_LIMITS, T_HTTP}, {M_HEALTH_CHECK, T_GRPC},
        {M_HEALTH_CHECK, T_HTTP},    {M_LIVE_CHECK, T_GRPC},      {M_LIVE_CHECK, T_HTTP},
        {M_GET_PEER_RATE_LIMITS, T_GRPC}, {M_UPDATE_PEER_GLOBALS, T_GRPC},
        {M_TRANSFER_KEYS, T_GRPC},   {M_ATTEMPT, T_HTTP},
        {M_METRICS, T_HTTP},         {M_OTHER, T_GRPC},           {M_OTHER, T_HTTP},
        {M_RELEASE, T_HTTP},         {M_SHOULD_RATE_LIMIT, T_GRPC},
        {M_GRPC_HEALTH_CHECK, T_GRPC}, {M_GRPC_HEALTH_WATCH, T_GRPC}, {M_REFLECTION, T_GRPC},
    };
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
        const char *v[2] = {method_names[used[i].m], transport_names[used[i].t]};
        s->latency[used[i].m][used[i].t] = sl_metrics_histogram_get(lat, v, 2);
    }
    return 0;
}

/* ---- call pool ----------------------------------------------------------------------------- */

sl_call *sl_service_call_get(sl_service *s, sl_exchange *ex, int method, int transport, int64_t t0)
{
    int worker = sl_exchange_worker(ex);
    sl_call_pool *p = pool_of(s, worker);
    sl_call *c = p->free;
    if (c) {
        p->free = c->next;
        p->n--;
        p->bytes -= c->kept;
    } else {
        c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        sl_batch_init(&c->batch, 0);
        sl_buf_init(&c->out, 0);
        sl_buf_init(&c->zin, 0);
    }
    c->svc = s;
    c->ex = ex;
    c->worker = worker;
    c->method = (uint8_t)method;
    c->transport = (uint8_t)transport;
    c->t0 = t0;
    c->prot = NULL;
    c->rls = NULL;
    c->next = NULL;
    c->enc = SL_GRPCZIP_IDENTITY;
    c->deadline = 0;
    return c;
}

static void call_free(sl_call *c)
{
    sl_batch_free(&c->batch);
    sl_buf_free(&c->out);
    sl_buf_free(&c->zin);
    free(c);
}

void sl_service_call_put(sl_call *c)
{
    sl_call_pool *p = pool_of(c->svc, c->worker);
    sl_batch_reset(&c->batch);
    sl_buf_reset(&c->out);
    sl_buf_reset(&c->zin);
    size_t kept = c->batch.arena_bytes + c->out.alloc + c->zin.alloc;
    if (p->n >= POOL_MAX || p->bytes + kept > POOL_MAX_BYTES) {
        call_free(c);
        return;
    }
    c->kept = kept;
    p->bytes += kept;
    c->ex = NULL;
    c->next = p->free;
    p->free = c;
    p->n++;
}

/* ---- answers ------------------------------------------------------------------------------- */

void sl_service_answer_status(sl_service *s, sl_exchange *ex, int method, int transport,
                              const sl_grpc_status *st, int64_t t0)
{
    if (transport == T_GRPC) {
        sl_exchange_respond_grpc_status(ex, st->code, st->message);
    } else {
        sl_buf b;
        sl_buf_init(&b, 0);
        if (sl_gub_encode_error_json(st, &b) == 0)
            sl_exchange_respond_simple(ex, st->http_status, "application/json", b.data, b.len);
        else
            sl_exchange_respond_simple(ex, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
        sl_buf_free(&b);
    }
    count_call(s, method, transport, st->code, t0);
}

void sl_service_answer_error(sl_service *s, sl_exchange *ex, int method, int transport, int code,
                             const char *msg, int64_t t0)
{
    sl_grpc_status st;
    sl_grpc_status_set(&st, code, "%s", msg);
    sl_service_answer_status(s, ex, method, transport, &st, t0);
}

/* Text answers for plain HTTP routes (404, 405, /metrics). */
void sl_service_answer_text(sl_service *s, sl_exchange *ex, int method, int status,
                            const char *ctype, const char *body, size_t len, int code, int64_t t0)
{
    sl_exchange_respond_simple(ex, status, ctype, body, len);
    count_call(s, method, T_HTTP, code, t0);
}

/* A call shed by the worker shedder: gRPC UNAVAILABLE, or HTTP 503 with Retry-After and
 * grpc-gateway's error body. Both carry "sluice-shed: worker" (a trailer-only gRPC answer's
 * headers are its trailers), so a client tells "sluiced shed me" (do not fail open) from an
 * UNAVAILABLE or 503 of something that never reached sluiced (fail open): docs/protection.md. */
void sl_service_answer_shed(sl_service *s, sl_exchange *ex, int method, int transport,
                            const sl_gubprotect_verdict *v, int64_t t0)
{
    sl_grpc_status st;
    sl_grpc_status_set(&st, SL_GRPC_UNAVAILABLE, "%s", v->message);
    char ra[24];
    int n = snprintf(ra, sizeof ra, "%lld", (long long)v->retry_after_s);
    sl_http_header shed = SL_HTTP_HEADER("sluice-shed", "worker");
    sl_http_header rah = {"retry-after", 11, ra, n > 0 ? (size_t)n : 0};
    sl_buf b;
    sl_buf_init(&b, 0);
    if (transport == T_GRPC) {
        char num[12];
        int nn = snprintf(num, sizeof num, "%d", SL_GRPC_UNAVAILABLE);
        sl_http_header h[6] = {SL_HTTP_HEADER("content-type", "application/grpc"),
                               {"grpc-status", 11, num, nn > 0 ? (size_t)nn : 0}, shed, rah,
                               SL_HTTP_HEADER("grpc-accept-encoding", SL_GRPC_ACCEPT_ENCODING)};
        size_t nh = 5;
        if (sl_grpc_message_encode(st.message, strnlen(st.message, sizeof st.message), &b) == 0)
            h[nh++] = (sl_http_header){"grpc-message", 12, (const char *)b.data, b.len};
        sl_http_response resp = {.status = 200, .headers = h, .nheaders = nh};
        sl_exchange_respond(ex, &resp);
    } else if (sl_gub_encode_error_json(&st, &b) == 0) {
        sl_http_header h[3] = {SL_HTTP_HEADER("content-type", "application/json"), rah, shed};
        sl_http_response resp = {.status = 503, .headers = h, .nheaders = 3, .body = b.data,
                                 .body_len = b.len};
        sl_exchange_respond(ex, &resp);
    } else {
        sl_exchange_respond_simple(ex, 503, "text/plain; charset=utf-8", "overloaded\n", 11);
    }
    sl_buf_free(&b);
    count_call(s, method, transport, SL_GRPC_UNAVAILABLE, t0);
}

/* ---- client identities (--client-tokens-file) ---------------------------------------------- */

const sl_idents *sl_service_swap_idents(sl_service *s, const sl_idents *next)
{
    return atomic_exchange_explicit(&s->idents, next, memory_order_acq_rel);
}

/* The caller's identity, or NULL: the "cert:" identity of the connection's verified client
 * certificate when the file has one for its name (one hash lookup), else that of its bearer token
 * (one hash lookup); *sent: whether it sent an Authorization header at all. */
const sl_ident *sl_service_ident_of(const sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                    bool *sent)
{
    const char *cn = sl_exchange_peer_identity(ex);
    const sl_idents *set = idents_of(s);
    const sl_ident *id = cn ? sl_idents_find_cert(set, cn, strlen(cn)) : NULL;
    const sl_http_header *h = sl_http_header_find(rq, "authorization");
    const char *tok;
    size_t len;
    *sent = h != NULL;
    if (id || !h || sl_bearer_from_header(h->value, h->value_len, &tok, &len))
        return id;
    return sl_idents_find(set, tok, len);
}

/* The caller's identity, or NULL after answering UNAUTHENTICATED (HTTP 401). */
const sl_ident *sl_service_who(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                               int method, int transport, int64_t t0)
{
    bool h;
    const sl_ident *id = sl_service_ident_of(s, ex, rq, &h);
    if (!id)
        sl_service_answer_error(s, ex, method, transport, SL_GRPC_UNAUTHENTICATED,
                                h ? "unknown bearer token"
                                  : "missing bearer token (Authorization: Bearer) or known "
                                    "client certificate",
                                t0);
    return id;
}

/* Whether every item's limit name is inside the identity's prefixes; if not, the status for the
 * whole call (PERMISSION_DENIED, naming the first item outside). */
bool sl_service_items_allowed(const sl_ident *id, const sl_batch *b, sl_grpc_status *st)
{
    for (size_t i = 0; i < b->n; i++) {
        const sl_request *q = &b->reqs[i];
        if (!sl_ident_allows(id, q->name, q->name_len)) {
            sl_grpc_status_set(st, SL_GRPC_PERMISSION_DENIED,
                              "'%s' may not use the limit name of item %zu", sl_ident_name(id), i);
            return false;
        }
    }
    return true;
}

/* ---- GetRateLimits ------------------------------------------------------------------------- */

static size_t gub_giveback(void *ctx, sl_batch *gb)
{
    return sl_gub_all_or_nothing(ctx, gb);
}

static void rate_limits_done(void *ud, sl_batch *b)
{
    sl_call *c = ud;
    sl_service *s = c->svc;
    int rc;
    if (s->cfg.protect) {
        int64_t now = sl_exchange_now_ms(c->ex);
        sl_gubprotect_end(s->cfg.protect, c->prot, b, c->method == M_GET_PEER_RATE_LIMITS, now);
        sl_batch *gb = c->prot ? sl_gubprotect_giveback(c->prot) : NULL;
        if (gb)
            submit(s, c->worker, gb, now, giveback_done, s->cfg.protect);
    }
    if (c->method == M_GET_RATE_LIMITS) /* a peer's items are a part of its caller's batch */
        giveback_submit(s, c->worker, sl_exchange_now_ms(c->ex), gub_giveback, b);
    if (c->transport == T_GRPC) {
        size_t mark;
        rc = sl_grpc_frame_begin(&c->out, &mark);
        if (!rc)
            rc = c->method == M_GET_PEER_RATE_LIMITS ? sl_gub_encode_peer_resp_pb(b, &c->out)
                                                     : sl_gub_encode_pb(b, &c->out);
        if (!rc)
            rc = sl_grpc_frame_end(&c->out, mark);
        if (!rc)
            rc = sl_service_respond_grpc_msg(c, &c->out);
    } else {
        rc = sl_gub_encode_json(b, &c->out);
        if (!rc) {
            sl_exchange_respond_simple(c->ex, 200, "application/json", c->out.data, c->out.len);
            count_call(s, c->method, T_HTTP, SL_GRPC_OK, c->t0);
        }
    }
    if (rc)
        sl_service_answer_error(s, c->ex, c->method, c->transport, SL_GRPC_INTERNAL,
                                "could not encode the response", c->t0);
    sl_service_call_put(c);
}

/* ---- gRPC message encodings and deadlines ---------------------------------------------------- */

/* The request's grpc-encoding (absent: identity). */
static sl_grpczip_enc request_encoding(const sl_http_request *rq)
{
    const sl_http_header *h = rq->grpc_encoding;
    return h ? sl_grpczip_parse(h->value, h->value_len) : SL_GRPCZIP_IDENTITY;
}

/* The encoding of the answer to a call: the request's own, as grpc-go does, when the client
 * lists it in grpc-accept-encoding (gRPC clients that compress do), else none. */
static uint8_t answer_encoding(const sl_http_request *rq)
{
    sl_grpczip_enc e = request_encoding(rq);
    if (e == SL_GRPCZIP_IDENTITY || e == SL_GRPCZIP_UNSUPPORTED)
        return SL_GRPCZIP_IDENTITY;
    const sl_http_header *a = rq->grpc_accept_encoding;
    return a && sl_grpczip_accepts(a->value, a->value_len, e) ? (uint8_t)e : SL_GRPCZIP_IDENTITY;
}

int sl_service_respond_grpc_msg(sl_call *c, sl_buf *framed)
{
    sl_service *s = c->svc;
    const char *encname = NULL;
    const sl_buf *body = framed;
    if (c->enc != SL_GRPCZIP_IDENTITY && framed->len >= SL_GRPC_HDR_LEN) {
        /* the request's message is decoded and no longer read: its buffer takes the answer */
        sl_buf_reset(&c->zin);
        if (sl_buf_reserve(&c->zin, SL_GRPC_HDR_LEN) == 0) {
            c->zin.len = SL_GRPC_HDR_LEN;
            size_t n = framed->len - SL_GRPC_HDR_LEN;
            if (sl_grpczip_deflate((sl_grpczip_enc)c->enc, framed->data + SL_GRPC_HDR_LEN, n,
                                   &c->zin) == 0 &&
                sl_grpc_frame_header(c->zin.data, c->zin.len - SL_GRPC_HDR_LEN, true) == 0) {
                body = &c->zin;
                encname = sl_grpczip_name((sl_grpczip_enc)c->enc);
            }
        } /* else: uncompressed, which every client takes */
    }
    const sl_http_request *rq = sl_exchange_request(c->ex);
    sl_exchange_respond_grpc_enc(c->ex, body->data, body->len, SL_GRPC_OK, NULL, encname,
                                 rq->grpc_accept_encoding || rq->grpc_encoding);
    count_call(s, c->method, T_GRPC, SL_GRPC_OK, c->t0);
    return 0;
}

/* The deadline of a call from its grpc-timeout (0: none), measured from t0. -EINVAL: malformed. */
static int request_deadline(const sl_http_request *rq, int64_t t0, int64_t *deadline)
{
    *deadline = 0;
    const sl_http_header *h = rq->grpc_timeout;
    if (!h)
        return 0;
    int64_t ms;
    if (sl_grpc_timeout_parse(h->value, h->value_len, &ms))
        return -EINVAL;
    /* a deadline already past when it arrives (0n, 0m) is t0 itself: expired */
    *deadline = ms ? t0 + ms * 1000000 : t0;
    return 0;
}

void sl_service_call_grpc(sl_call *c, const sl_http_request *rq)
{
    c->enc = answer_encoding(rq);
    if (request_deadline(rq, c->t0, &c->deadline))
        c->deadline = 0; /* refused in route_grpc before a call is opened */
}

static const char deadline_msg[] = "the call's deadline (grpc-timeout) passed before its items "
                                   "were decided";

bool sl_service_call_expired(sl_call *c)
{
    if (!c->deadline || sl_mono_ns() < c->deadline)
        return false;
    sl_metrics_counter_inc(c->svc->expired);
    sl_service_answer_error(c->svc, c->ex, c->method, c->transport, SL_GRPC_DEADLINE_EXCEEDED,
                            deadline_msg, c->t0);
    return true;
}

/* The protobuf message inside a gRPC request body: exactly one message, inflated into `zin` when
 * it is compressed (capped at the same size as an uncompressed one). */
int sl_service_grpc_payload(sl_service *s, const sl_http_request *rq, sl_buf *zin,
                            const uint8_t **msg, size_t *len, sl_grpc_status *st)
{
    sl_grpc_msg m;
    const char *err = NULL;
    int rc = sl_grpc_frame_decode(rq->body, rq->body_len, s->cfg.gub.max_msg, &m, &err);
    if (rc == -EMSGSIZE) {
        sl_grpc_status_set(st, SL_GRPC_RESOURCE_EXHAUSTED, "%s", err ? err : "message too large");
        return rc;
    }
    if (rc == -EAGAIN) {
        sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT, "truncated gRPC message");
        return rc;
    }
    if (rc) {
        sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT, "%s", err ? err : "bad gRPC framing");
        return rc;
    }
    if (m.frame_len != rq->body_len) {
        sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT,
                          "a unary call carries exactly one message");
        return -EPROTO;
    }
    *msg = m.data;
    *len = m.len;
    if (!m.compressed)
        return 0;
    sl_grpczip_enc e = request_encoding(rq);
    if (e == SL_GRPCZIP_IDENTITY) {
        /* the spec: a compressed flag without grpc-encoding is the client's bug */
        sl_grpc_status_set(st, SL_GRPC_INTERNAL,
                          "a compressed message without grpc-encoding (the encodings served: "
                          SL_GRPC_ACCEPT_ENCODING ")");
        return -EPROTO;
    }
    if (e == SL_GRPCZIP_UNSUPPORTED) { /* refused at the headers; kept for callers without them */
        sl_grpc_status_set(st, SL_GRPC_UNIMPLEMENTED,
                          "grpc-encoding not supported (the encodings served: "
                          SL_GRPC_ACCEPT_ENCODING ")");
        return -ENOTSUP;
    }
    sl_buf_reset(zin);
    rc = sl_grpczip_inflate(e, m.data, m.len, s->cfg.gub.max_msg, zin);
    if (rc == -EMSGSIZE) {
        sl_grpc_status_set(st, SL_GRPC_RESOURCE_EXHAUSTED,
                          "the %s message inflates past the largest message served (%zu bytes)",
                          sl_grpczip_name(e), s->cfg.gub.max_msg);
        return rc;
    }
    if (rc) {
        sl_grpc_status_set(st, rc == -ENOMEM ? SL_GRPC_RESOURCE_EXHAUSTED
                                             : SL_GRPC_INVALID_ARGUMENT,
                          rc == -ENOMEM ? "out of memory" : "the %s message does not inflate",
                          sl_grpczip_name(e));
        return rc;
    }
    *msg = zin->data ? zin->data : (const uint8_t *)"";
    *len = zin->len;
    return 0;
}

/* Hand the call's items to the node's decider (after the fleet's, when there were any). A
 * peer's GetPeerRateLimits is the one special case, by method: its items are this node's (the
 * peer picked it as their owner), so they go to the peer decider, which in a cluster decides them
 * here and never forwards them again (the router's owner side); on the Redis store and
 * standalone it is the decider itself (node/nodeparts.c). */
static void route_items(sl_service *s, sl_call *c, int64_t now)
{
    const sl_decider *d = c->method == M_GET_PEER_RATE_LIMITS ? s->cfg.peer_decider
                                                               : s->cfg.decider;
    sl_decider_submit(d, c->worker, &c->batch, now, rate_limits_done, c);
}

/* The fleet's leases are answered (api/gubprotect.h): apply them, then route the items. */
static void fleet_done(void *ud, sl_batch *fb)
{
    (void)fb;
    sl_call *c = ud;
    sl_service *s = c->svc;
    int64_t now = sl_exchange_now_ms(c->ex);
    sl_gubprotect_fleet_done(s->cfg.protect, c->prot, &c->batch,
                             sl_router_peer_count(s->cfg.router), now);
    route_items(s, c, now);
}

/* Gubernator's per-item error for an item met after the call's deadline (its ctx.Err()). */
#define GUB_DEADLINE_ERROR "Error while iterating request items: context deadline exceeded"

/* peer_proven: a GetPeerRateLimits whose caller proved it is a member (servicepeer.c); one taken
 * without a credential is a client call when client tokens are on (the tokens still hold). */
static void get_rate_limits(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                            int method, int transport, bool peer_proven, int64_t t0)
{
    sl_grpc_status st;
    const uint8_t *msg = NULL;
    size_t len = 0;
    const sl_ident *id = NULL;
    if (idents_of(s) && (method == M_GET_RATE_LIMITS || !peer_proven) &&
        !(id = sl_service_who(s, ex, rq, method, transport, t0)))
        return;
    sl_call *c = call_open(s, ex, rq, method, transport, &msg, &len, t0);
    if (!c)
        return;
    int rc;
    if (transport == T_HTTP)
        rc = sl_gub_decode_json(&s->cfg.gub, (const char *)rq->body, rq->body_len, &c->batch, &st);
    else if (method == M_GET_PEER_RATE_LIMITS)
        rc = sl_gub_decode_peer_pb(&s->cfg.gub, msg, len, &c->batch, &st);
    else
        rc = sl_gub_decode_pb(&s->cfg.gub, msg, len, &c->batch, &st);
    if (!rc && c->deadline && sl_mono_ns() >= c->deadline) {
        /* Gubernator's way: every item answered with the context's error, none decided, the
         * call itself OK (a client that has given up reads nothing; one that has not, learns) */
        sl_metrics_counter_inc(s->expired);
        for (size_t i = 0; i < c->batch.n; i++)
            if (!c->batch.answered[i])
                sl_batch_answer(&c->batch, i, GUB_DEADLINE_ERROR);
        rate_limits_done(c, &c->batch);
        return;
    }
    int64_t now;
    if (!call_admit(s, c, id, rc, &st, method == M_GET_PEER_RATE_LIMITS, &now))
        return;
    if (s->cfg.protect) {
        sl_batch *fb = c->prot ? sl_gubprotect_fleet_batch(c->prot) : NULL;
        if (fb) { /* the fleet's leases first, from the fleet key's owner */
            submit(s, c->worker, fb, now, fleet_done, c);
            return;
        }
    }
    route_items(s, c, now);
}

/* ---- UpdatePeerGlobals --------------------------------------------------------------------- */

static void update_peer_globals(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                int64_t t0)
{
    sl_grpc_status st;
    const uint8_t *msg;
    size_t len;
    sl_call *c = call_open(s, ex, rq, M_UPDATE_PEER_GLOBALS, T_GRPC, &msg, &len, t0);
    if (!c)
        return;
    sl_peerwire_global *g = NULL;
    size_t n = 0;
    int64_t now = sl_exchange_now_ms(ex);
    size_t late = 0;
    if (sl_peerwire_decode_globals(s->cfg.gub.max_msg, msg, len, &c->batch, &g, &n, &st)) {
        sl_service_answer_status(s, ex, M_UPDATE_PEER_GLOBALS, T_GRPC, &st, t0);
    } else if (s->cfg.peer_max_globals && n > s->cfg.peer_max_globals) {
        sl_service_peer_refuse(s, ex, rq, M_UPDATE_PEER_GLOBALS, SL_SVC_PEER_TOO_MANY_GLOBALS,
                               SL_GRPC_INVALID_ARGUMENT,
                               "more globals in one UpdatePeerGlobals than --peer-max-globals",
                               t0);
    } else if ((late = sl_service_globals_out_of_bound(g, n, now)) > 0) {
        char why[128];
        snprintf(why, sizeof why, "global %zu resets further than its duration from now",
                 late - 1);
        sl_service_peer_refuse(s, ex, rq, M_UPDATE_PEER_GLOBALS, SL_SVC_PEER_EXPIRY,
                               SL_GRPC_INVALID_ARGUMENT, why, t0);
    } else {
        sl_router_update_globals(s->cfg.router, c->worker, g, n, now);
        /* UpdatePeerGlobalsResp is an empty message: a frame of length 0. */
        static const uint8_t empty[SL_GRPC_HDR_LEN] = {0, 0, 0, 0, 0};
        sl_exchange_respond_grpc(ex, empty, sizeof empty, SL_GRPC_OK, NULL);
        count_call(s, M_UPDATE_PEER_GLOBALS, T_GRPC, SL_GRPC_OK, t0);
    }
    sl_service_call_put(c);
}

/* ---- TransferKeys (hand-off: cluster/handoff.h) ---------------------------------------------- */

static void transfer_keys(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    sl_grpc_status st;
    const uint8_t *msg, *recs;
    size_t len, rlen;
    sl_buf zin;
    sl_buf_init(&zin, 0);
    if (sl_service_grpc_payload(s, rq, &zin, &msg, &len, &st)) {
        sl_buf_free(&zin);
        sl_service_answer_status(s, ex, M_TRANSFER_KEYS, T_GRPC, &st, t0);
        return;
    }
    if (sl_peerwire_decode_transfer_req(msg, len, &recs, &rlen)) {
        sl_buf_free(&zin);
        sl_service_answer_error(s, ex, M_TRANSFER_KEYS, T_GRPC, SL_GRPC_INVALID_ARGUMENT,
                                "malformed TransferKeysReq", t0);
        return;
    }
    size_t bad_at = 0;
    int64_t merged = sl_router_transfer_keys(s->cfg.router, recs, rlen, sl_exchange_now_ms(ex),
                                             s->cfg.peer_max_transfer_keys, &bad_at);
    sl_buf_free(&zin); /* the records are merged: the inflated message is not read again */
    if (merged == -E2BIG) {
        sl_service_peer_refuse(s, ex, rq, M_TRANSFER_KEYS, SL_SVC_PEER_TOO_MANY_KEYS,
                               SL_GRPC_INVALID_ARGUMENT,
                               "more key states in one TransferKeys than --peer-max-transfer-keys",
                               t0);
        return;
    }
    if (merged == -ERANGE) {
        char why[128];
        snprintf(why, sizeof why, "key state %zu expires further than its limit's duration "
                 "from now", bad_at);
        sl_service_peer_refuse(s, ex, rq, M_TRANSFER_KEYS, SL_SVC_PEER_EXPIRY,
                               SL_GRPC_INVALID_ARGUMENT, why, t0);
        return;
    }
    if (merged < 0) {
        sl_service_answer_error(s, ex, M_TRANSFER_KEYS, T_GRPC, SL_GRPC_INVALID_ARGUMENT,
                                "malformed key state record", t0);
        return;
    }
    sl_buf out;
    sl_buf_init(&out, 0);
    if (sl_peerwire_encode_transfer_resp(merged, &out)) {
        sl_service_answer_error(s, ex, M_TRANSFER_KEYS, T_GRPC, SL_GRPC_RESOURCE_EXHAUSTED,
                                "out of memory", t0);
    } else {
        sl_exchange_respond_grpc(ex, out.data, out.len, SL_GRPC_OK, NULL);
        count_call(s, M_TRANSFER_KEYS, T_GRPC, SL_GRPC_OK, t0);
    }
    sl_buf_free(&out);
}

/* ---- health -------------------------------------------------------------------------------- */

bool sl_service_verdict(const sl_service *s, char *why, size_t why_len, int32_t *peer_count)
{
    bool healthy = true;
    int32_t count = 1;
    if (why_len)
        why[0] = 0;
    sl_router_health(s->cfg.router, &healthy, &count, why, why_len);
    if (s->cfg.health && healthy) {
        char extra[256] = "";
        if (!s->cfg.health(s->cfg.health_ud, extra, sizeof extra))
            healthy = false;
        if (extra[0] && why_len) /* a reason, or a note on a degraded but healthy node */
            snprintf(why, why_len, "%s", extra);
    }
    if (peer_count)
        *peer_count = count;
    return healthy;
}

static void health(sl_service *s, sl_exchange *ex, int transport, int64_t t0)
{
    char why[256] = "";
    sl_gub_health h = {.healthy = true, .peer_count = 1, .advertise_address = NULL};
    h.healthy = sl_service_verdict(s, why, sizeof why, &h.peer_count);
    h.message = why[0] ? why : NULL;
    if (h.peer_count > 1)
        h.advertise_address = s->cfg.advertise_addr;
    sl_grpc_status st;
    if (!sl_gub_health_ok(&h, &st)) {
        sl_service_answer_status(s, ex, M_HEALTH_CHECK, transport, &st, t0);
        return;
    }
    sl_buf b;
    sl_buf_init(&b, 0);
    int rc;
    if (transport == T_GRPC) {
        size_t mark;
        rc = sl_grpc_frame_begin(&b, &mark);
        if (!rc)
            rc = sl_gub_encode_health_pb(&h, &b);
        if (!rc)
            rc = sl_grpc_frame_end(&b, mark);
        if (!rc)
            sl_exchange_respond_grpc(ex, b.data, b.len, SL_GRPC_OK, NULL);
    } else {
        rc = sl_gub_encode_health_json(&h, &b);
        if (!rc)
            sl_exchange_respond_simple(ex, 200, "application/json", b.data, b.len);
    }
    sl_buf_free(&b);
    if (rc)
        sl_service_answer_error(s, ex, M_HEALTH_CHECK, transport, SL_GRPC_INTERNAL, "encode failed",
                                t0);
    else
        count_call(s, M_HEALTH_CHECK, transport, SL_GRPC_OK, t0);
}

static void live(sl_service *s, sl_exchange *ex, int transport, int64_t t0)
{
    if (transport == T_GRPC) {
        static const uint8_t empty[SL_GRPC_HDR_LEN] = {0, 0, 0, 0, 0};
        sl_exchange_respond_grpc(ex, empty, sizeof empty, SL_GRPC_OK, NULL);
    } else {
        sl_exchange_respond_simple(ex, 200, "application/json", "{}", 2);
    }
    count_call(s, M_LIVE_CHECK, transport, SL_GRPC_OK, t0);
}

static void metrics(sl_service *s, sl_exchange *ex, int64_t t0)
{
    char *txt = NULL;
    size_t len = 0;
    if (!s->cfg.metrics || sl_metrics_render_prometheus(s->cfg.metrics, &txt, &len)) {
        sl_service_answer_text(s, ex, M_METRICS, 500, "text/plain; charset=utf-8",
                               "metrics unavailable\n", 20, SL_GRPC_INTERNAL, t0);
        return;
    }
    sl_service_answer_text(s, ex, M_METRICS, 200, SL_METRICS_PROMETHEUS_CONTENT_TYPE, txt, len,
                           SL_GRPC_OK, t0);
    free(txt);
}

/* ---- routing ------------------------------------------------------------------------------- */

static bool method_is(const sl_http_request *rq, const char *m)
{
    return strcmp(rq->method, m) == 0;
}

/* PeersV1 is for the proven members of the peer list only (node/servicepeer.c). */
#define PEERS_PREFIX "/pb.gubernator.PeersV1/"

/* The method a gRPC path names (M_OTHER for a PeersV1 method sluice does not serve), or -1. */
static int grpc_method(const sl_http_request *rq)
{
    if (sl_http_path_is(rq, SL_GUB_PATH_GET_RATE_LIMITS))
        return M_GET_RATE_LIMITS;
    if (rq->path_len > sizeof PEERS_PREFIX - 1 &&
        !memcmp(rq->path, PEERS_PREFIX, sizeof PEERS_PREFIX - 1))
        return sl_http_path_is(rq, SL_PEERWIRE_PATH_GET_PEER_RATE_LIMITS)  ? M_GET_PEER_RATE_LIMITS
               : sl_http_path_is(rq, SL_PEERWIRE_PATH_UPDATE_PEER_GLOBALS) ? M_UPDATE_PEER_GLOBALS
               : sl_http_path_is(rq, SL_PEERWIRE_PATH_TRANSFER_KEYS)       ? M_TRANSFER_KEYS
                                                                           : M_OTHER;
    if (sl_http_path_is(rq, SL_RLS_PATH))
        return M_SHOULD_RATE_LIMIT;
    if (sl_http_path_is(rq, SL_RLS_KUADRANT_CHECK_PATH))
        return M_CHECK_RATE_LIMIT;
    if (sl_http_path_is(rq, SL_RLS_KUADRANT_REPORT_PATH))
        return M_REPORT;
    if (sl_http_path_is(rq, SL_GUB_PATH_HEALTH_CHECK))
        return M_HEALTH_CHECK;
    if (sl_http_path_is(rq, SL_GUB_PATH_LIVE_CHECK))
        return M_LIVE_CHECK;
    if (sl_http_path_is(rq, SL_GRPCSTD_HEALTH_CHECK))
        return M_GRPC_HEALTH_CHECK;
    if (sl_http_path_is(rq, SL_GRPCSTD_HEALTH_WATCH))
        return M_GRPC_HEALTH_WATCH;
    if (sl_http_path_is(rq, SL_GRPCSTD_REFLECTION_V1) ||
        sl_http_path_is(rq, SL_GRPCSTD_REFLECTION_V1ALPHA))
        return M_REFLECTION;
    return -1;
}

/* What the headers alone refuse: an unsupported grpc-encoding (UNIMPLEMENTED: every gRPC answer
 * carries grpc-accept-encoding, so the client falls back), a malformed grpc-timeout. SL_GRPC_OK
 * when none; else the code and *msg. */
static int headers_refusal(const sl_http_request *rq, int64_t t0, const char **msg)
{
    if (request_encoding(rq) == SL_GRPCZIP_UNSUPPORTED) {
        *msg = "grpc-encoding not supported (the encodings served: " SL_GRPC_ACCEPT_ENCODING ")";
        return SL_GRPC_UNIMPLEMENTED;
    }
    int64_t dl;
    if (request_deadline(rq, t0, &dl)) {
        *msg = "malformed grpc-timeout (at most 8 digits and one of H M S m u n)";
        return SL_GRPC_INVALID_ARGUMENT;
    }
    return SL_GRPC_OK;
}

static const char unknown_method[] = "unknown service or method";

/* A refused encoding or deadline waits for the body like any unary call (it follows the headers
 * at once): answered early, the RST_STREAM(NO_ERROR) after the answer races the client's upload,
 * which some HTTP/2 clients (curl) take for the answer lost. */
bool sl_service_early(void *ud, const sl_http_request *rq)
{
    (void)ud;
    int m = grpc_method(rq);
    return m < 0 || m == M_OTHER || m == M_REFLECTION;
}

static void route_grpc(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    int m = grpc_method(rq);
    if (m < 0) {
        sl_service_answer_error(s, ex, M_OTHER, T_GRPC, SL_GRPC_UNIMPLEMENTED, unknown_method, t0);
        return;
    }
    const char *msg;
    int code = headers_refusal(rq, t0, &msg);
    if (code != SL_GRPC_OK) {
        sl_service_answer_error(s, ex, m, T_GRPC, code, msg, t0);
        return;
    }
    switch (m) {
    case M_GET_RATE_LIMITS:
        get_rate_limits(s, ex, rq, M_GET_RATE_LIMITS, T_GRPC, false, t0);
        return;
    case M_GET_PEER_RATE_LIMITS:
    case M_UPDATE_PEER_GLOBALS:
    case M_TRANSFER_KEYS:
    case M_OTHER: {
        /* a node that has just left may still push its keys here (with the same proof as
         * any PeersV1 call) */
        bool proven;
        if (!sl_service_peer_admit(s, ex, rq, m, m == M_TRANSFER_KEYS, t0, &proven))
            return;
        if (!proven && idents_of(s) && (m == M_UPDATE_PEER_GLOBALS || m == M_TRANSFER_KEYS))
            sl_service_peer_refuse(s, ex, rq, m, SL_SVC_PEER_TOKENS, SL_GRPC_PERMISSION_DENIED,
                                   "with client tokens, peer state calls need a peer credential "
                                   "(--peer-secret-file or peer mTLS)", t0);
        else if (m == M_GET_PEER_RATE_LIMITS)
            get_rate_limits(s, ex, rq, M_GET_PEER_RATE_LIMITS, T_GRPC, proven, t0);
        else if (m == M_UPDATE_PEER_GLOBALS)
            update_peer_globals(s, ex, rq, t0);
        else if (m == M_TRANSFER_KEYS)
            transfer_keys(s, ex, rq, t0);
        else
            sl_service_answer_error(s, ex, M_OTHER, T_GRPC, SL_GRPC_UNIMPLEMENTED, unknown_method,
                                    t0);
        return;
    }
    case M_SHOULD_RATE_LIMIT:
    case M_CHECK_RATE_LIMIT:
    case M_REPORT:
        sl_service_should_rate_limit(s, ex, rq, m, T_GRPC, t0);
        return;
    case M_HEALTH_CHECK:
        health(s, ex, T_GRPC, t0);
        return;
    case M_LIVE_CHECK:
        live(s, ex, T_GRPC, t0);
        return;
    case M_GRPC_HEALTH_CHECK:
    case M_GRPC_HEALTH_WATCH:
        sl_service_grpc_health(s, ex, rq, m == M_GRPC_HEALTH_WATCH, t0);
        return;
    case M_REFLECTION:
        sl_service_reflection(s, ex, rq, t0);
        return;
    default:
        sl_service_answer_error(s, ex, M_OTHER, T_GRPC, SL_GRPC_UNIMPLEMENTED, unknown_method, t0);
    }
}

static void route_http(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    static const char allow_post[] = "method not allowed: use POST\n";
    static const char allow_get[] = "method not allowed: use GET\n";
    int m = -1;
    bool want_post = false;
    if (sl_http_path_is(rq, SL_GUB_HTTP_GET_RATE_LIMITS)) {
        m = M_GET_RATE_LIMITS;
        want_post = true;
    } else if (sl_http_path_is(rq, SL_GUB_HTTP_HEALTH_CHECK)) {
        m = M_HEALTH_CHECK;
    } else if (sl_http_path_is(rq, SL_GUB_HTTP_LIVE_CHECK)) {
        m = M_LIVE_CHECK;
    } else if (sl_http_path_is(rq, "/metrics")) {
        m = M_METRICS;
    } else if (sl_http_path_is(rq, "/attempt") && s->cfg.quotas) {
        m = M_ATTEMPT;
        want_post = true;
    } else if (sl_http_path_is(rq, "/release") && s->cfg.quotas && s->cfg.protect) {
        m = M_RELEASE;
        want_post = true;
    } else if (sl_http_path_is(rq, SL_RLSJSON_PATH)) {
        m = M_SHOULD_RATE_LIMIT;
        want_post = true;
    }
    if (m < 0) {
        static const char nf[] = "not found\n";
        sl_service_answer_text(s, ex, M_OTHER, 404, "text/plain; charset=utf-8", nf, sizeof nf - 1,
                               SL_GRPC_NOT_FOUND, t0);
        return;
    }
    bool get_like = method_is(rq, "GET") || method_is(rq, "HEAD");
    if (want_post ? !method_is(rq, "POST") : !get_like) {
        const char *msg = want_post ? allow_post : allow_get;
        sl_service_answer_text(s, ex, m, 405, "text/plain; charset=utf-8", msg, strlen(msg),
                               SL_GRPC_UNIMPLEMENTED, t0);
        return;
    }
    switch (m) {
    case M_GET_RATE_LIMITS:
        get_rate_limits(s, ex, rq, M_GET_RATE_LIMITS, T_HTTP, false, t0);
        break;
    case M_SHOULD_RATE_LIMIT:
        sl_service_should_rate_limit(s, ex, rq, M_SHOULD_RATE_LIMIT, T_HTTP, t0);
        break;
    case M_HEALTH_CHECK:
        health(s, ex, T_HTTP, t0);
        break;
    case M_LIVE_CHECK:
        live(s, ex, T_HTTP, t0);
        break;
    case M_METRICS:
        metrics(s, ex, t0);
        break;
    case M_ATTEMPT:
        sl_service_attempt(s, ex, rq, t0);
        break;
    case M_RELEASE:
        sl_service_release(s, ex, rq, t0);
        break;
    default:
        break;
    }
}

void sl_service_handle(void *ud, sl_exchange *ex)
{
    sl_service *s = ud;
    int64_t t0 = sl_mono_ns();
    const sl_http_request *rq = sl_exchange_request(ex);
    if (rq->grpc)
        route_grpc(s, ex, rq, t0);
    else
        route_http(s, ex, rq, t0);
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

int sl_service_new(const sl_service_config *cfg, sl_service **out)
{
    sl_service *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    if (!s->cfg.peer_decider)
        s->cfg.peer_decider = cfg->decider;
    atomic_init(&s->idents, cfg->idents);
    s->npools = (cfg->workers > 0 ? cfg->workers : 1) + 1;
    size_t bytes = (size_t)s->npools * sizeof *s->pools; /* a multiple of the 64-byte alignment */
    s->pools = aligned_alloc(64, bytes);
    if (s->pools)
        memset(s->pools, 0, bytes);
    if (!s->pools) {
        free(s);
        return -ENOMEM;
    }
    for (int i = 0; i < s->npools; i++) {
        s->pools[i].held = (sl_held_list){.max = cfg->max_held, .sent = sl_service_held_sent,
                                          .sent_ud = s};
        s->pools[i].last_verdict = -1;
    }
    int rc = sl_grpcstd_refl_new(sl_grpcstd_descriptor_set, sl_grpcstd_descriptor_set_len,
                                 &s->refl);
    if (rc) {
        free(s->pools);
        free(s);
        return rc;
    }
    rc = register_metrics(s);
    if (rc) {
        sl_service_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sl_service_worker_start(sl_service *s, int worker, uv_loop_t *loop)
{
    if (s->cfg.protect && worker >= 0 && worker < s->npools - 1)
        sl_loadtick_start(&s->pools[worker].tick, s->cfg.protect, worker, loop);
    if (worker >= 0 && worker < s->npools - 1)
        sl_service_watch_start(s, worker, loop);
}

void sl_service_worker_stop(sl_service *s, int worker)
{
    sl_call_pool *p = pool_of(s, worker);
    if (worker >= 0 && worker < s->npools - 1) {
        sl_loadtick_stop(&p->tick);
        sl_service_watch_stop(s, worker);
    }
    sl_held_flush(&p->held);
    sl_quotasrc_reader_release(&p->quota_reader);
    sl_rlssrc_reader_release(&p->rls_reader);
}

void sl_service_free(sl_service *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->npools; i++) {
        sl_quotasrc_reader_release(&s->pools[i].quota_reader);
        sl_rlssrc_reader_release(&s->pools[i].rls_reader);
        sl_call *c = s->pools[i].free;
        while (c) {
            sl_call *next = c->next;
            call_free(c);
            c = next;
        }
    }
    free(s->pools);
    sl_rlsmetrics_free(s->rls_metrics);
    sl_grpcstd_refl_free(s->refl);
    free(s);
}

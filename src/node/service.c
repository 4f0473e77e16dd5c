/*
 * Service: routing and the per-call flow (see service.h).
 *
 *   exchange -> route by (grpc?, method, path) -> decode into the call's batch -> router
 *            -> encode into the call's buffer -> respond -> count + observe latency
 *
 * A call record is taken from the worker's pool when a request needs the router and returned
 * after the answer; requests answered at once (health, metrics, errors) need none.
 */
#include "node/service.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/attempt.h"
#include "api/gubprotect.h"
#include "auth/bearer.h"
#include "node/held.h"
#include "node/loadtick.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

enum { T_GRPC, T_HTTP, T_COUNT };
enum {
    M_GET_RATE_LIMITS,
    M_HEALTH_CHECK,
    M_LIVE_CHECK,
    M_GET_PEER_RATE_LIMITS,
    M_UPDATE_PEER_GLOBALS,
    M_TRANSFER_KEYS,
    M_ATTEMPT,
    M_METRICS,
    M_OTHER,
    M_RELEASE,
    M_SHOULD_RATE_LIMIT,
    M_COUNT
};
#define N_CODES 17

static const char *const method_names[M_COUNT] = {
    "GetRateLimits", "HealthCheck", "LiveCheck", "GetPeerRateLimits",
    "UpdatePeerGlobals", "TransferKeys", "Attempt", "Metrics", "other", "Release",
    "ShouldRateLimit",
};
static const char *const transport_names[T_COUNT] = {"grpc", "http"};

/* Calls cached per worker, and the memory they may keep between calls; past either, a returned
 * call is freed (bounds idle memory after a burst of large calls). A pooled call keeps an arena
 * chunk sized to its last call (about 210 KiB after a 1000-item call), so repeated calls of one
 * size allocate nothing. */
#define POOL_MAX 256
#define POOL_MAX_BYTES ((size_t)16 << 20)

typedef struct sl_call {
    sl_service *svc;
    sl_exchange *ex;
    int worker;
    uint8_t method, transport;
    int64_t t0;
    size_t kept;            /* bytes counted in its pool while pooled */
    sl_gubprotect_call *prot; /* protection's state between begin and end */
    sl_rls_call *rls;         /* ShouldRateLimit's plan (in the batch's arena) */
    sl_attempt_fleet att;     /* /attempt waiting for its fleet lease (api/attempt.h) */
    int att_rc;               /* /release waiting for its fleet lease: the concurrency give's */
    sl_batch batch;
    sl_buf out;
    struct sl_call *next;
} sl_call;

/* What one worker thread keeps: its call records, its reference to the current quota snapshot,
 * room for one /attempt answer and the load sampling of its shedder. Only that worker touches
 * it. */
typedef struct sl_call_pool {
    sl_call *free;
    sl_held_list held;   /* /attempt answers held for their X-Delay-Ms (X-Delay-Mode: hold) */
    size_t n;
    size_t bytes;        /* arena + output memory the pooled calls keep */
    sl_quotasrc_reader quota_reader;
    sl_rlssrc_reader rls_reader; /* its reference to the current --rls-config-dir contents */
    sl_answer answer;
    sl_loadtick tick;
} __attribute__((aligned(64))) sl_call_pool;

struct sl_service {
    sl_service_config cfg;
    sl_call_pool *pools; /* workers + 1 (the last for callers without a worker) */
    int npools;
    sl_metrics_family *calls_family;
    _Atomic(sl_metrics_counter *) calls[M_COUNT][T_COUNT][N_CODES];
    sl_metrics_histogram *latency[M_COUNT][T_COUNT];
    sl_metrics_counter *attempts[SL_ANSWER_OUTCOME_COUNT];
    sl_metrics_counter *peer_denied; /* PeersV1 calls from a non-member */
    sl_rlsmetrics *rls_metrics;      /* ShouldRateLimit's outcomes (api/rlsmetrics.h) */
    _Atomic(const sl_idents *) idents; /* cfg.idents, then what sl_service_swap_idents set */
};

/* ---- metrics ------------------------------------------------------------------------------- */

static void count_call(sl_service *s, int method, int transport, int code, int64_t t0)
{
    if (!s->cfg.metrics)
        return;
    if (code < 0 || code >= N_CODES)
        code = SL_GRPC_UNKNOWN;
    sl_metrics_counter *c = atomic_load_explicit(&s->calls[method][transport][code],
                                                 memory_order_acquire);
    if (!c) {
        /* First call with this outcome: resolve the series once (takes the registry lock). */
        const char *v[3] = {method_names[method], transport_names[transport],
                            sl_grpc_code_name(code)};
        c = sl_metrics_counter_get(s->calls_family, v, 3);
        atomic_store_explicit(&s->calls[method][transport][code], c, memory_order_release);
    }
    sl_metrics_counter_inc(c);
    sl_metrics_histogram_observe(s->latency[method][transport], sl_mono_ns() - t0);
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
                                   "PeersV1 calls refused (PERMISSION_DENIED): the caller is not a "
                                   "member of the peer list.",
                                   "", &pd);
    if (rc)
        return rc;
    s->peer_denied = sl_metrics_counter_get(pd, NULL, 0);
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
    };
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) {
        const char *v[2] = {method_names[used[i].m], transport_names[used[i].t]};
        s->latency[used[i].m][used[i].t] = sl_metrics_histogram_get(lat, v, 2);
    }
    return 0;
}

/* ---- call pool ----------------------------------------------------------------------------- */

static sl_call_pool *pool_of(sl_service *s, int worker)
{
    if (worker < 0 || worker >= s->npools - 1)
        worker = s->npools - 1;
    return &s->pools[worker];
}

static sl_call *call_get(sl_service *s, sl_exchange *ex, int method, int transport, int64_t t0)
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
    return c;
}

static void call_free(sl_call *c)
{
    sl_batch_free(&c->batch);
    sl_buf_free(&c->out);
    free(c);
}

static void call_put(sl_call *c)
{
    sl_call_pool *p = pool_of(c->svc, c->worker);
    sl_batch_reset(&c->batch);
    sl_buf_reset(&c->out);
    size_t kept = c->batch.arena_bytes + c->out.alloc;
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

static void answer_status(sl_service *s, sl_exchange *ex, int method, int transport,
                          const sl_gub_status *st, int64_t t0)
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

static void answer_error(sl_service *s, sl_exchange *ex, int method, int transport, int code,
                         const char *msg, int64_t t0)
{
    sl_gub_status st;
    sl_gub_status_set(&st, code, "%s", msg);
    answer_status(s, ex, method, transport, &st, t0);
}

/* Text answers for plain HTTP routes (404, 405, /metrics). */
static void answer_text(sl_service *s, sl_exchange *ex, int method, int status, const char *ctype,
                        const char *body, size_t len, int code, int64_t t0)
{
    sl_exchange_respond_simple(ex, status, ctype, body, len);
    count_call(s, method, T_HTTP, code, t0);
}

/* A call shed by the worker shedder: gRPC UNAVAILABLE, or HTTP 503 with Retry-After and
 * grpc-gateway's error body. Both carry "sluice-shed: worker" (a trailer-only gRPC answer's
 * headers are its trailers), so a client tells "sluiced shed me" (do not fail open) from an
 * UNAVAILABLE or 503 of something that never reached sluiced (fail open): docs/protection.md. */
static void answer_shed(sl_service *s, sl_exchange *ex, int method, int transport,
                        const sl_gubprotect_verdict *v, int64_t t0)
{
    sl_gub_status st;
    sl_gub_status_set(&st, SL_GRPC_UNAVAILABLE, "%s", v->message);
    char ra[24];
    int n = snprintf(ra, sizeof ra, "%lld", (long long)v->retry_after_s);
    sl_http_header shed = SL_HTTP_HEADER("sluice-shed", "worker");
    sl_http_header rah = {"retry-after", 11, ra, n > 0 ? (size_t)n : 0};
    sl_buf b;
    sl_buf_init(&b, 0);
    if (transport == T_GRPC) {
        char num[12];
        int nn = snprintf(num, sizeof num, "%d", SL_GRPC_UNAVAILABLE);
        sl_http_header h[5] = {SL_HTTP_HEADER("content-type", "application/grpc"),
                               {"grpc-status", 11, num, nn > 0 ? (size_t)nn : 0}, shed, rah};
        size_t nh = 4;
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

/* The current identities (NULL: off); a set swapped out stays valid until this call returns
 * (sl_service_swap_idents). */
static const sl_idents *idents_of(const sl_service *s)
{
    return atomic_load_explicit(&((sl_service *)s)->idents, memory_order_acquire);
}

const sl_idents *sl_service_swap_idents(sl_service *s, const sl_idents *next)
{
    return atomic_exchange_explicit(&s->idents, next, memory_order_acq_rel);
}

/* The caller's identity, or NULL: the "cert:" identity of the connection's verified client
 * certificate when the file has one for its name (one hash lookup), else that of its bearer token
 * (one hash lookup); *sent: whether it sent an Authorization header at all. */
static const sl_ident *ident_of(const sl_service *s, sl_exchange *ex, const sl_http_request *rq,
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
static const sl_ident *who(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int method,
                           int transport, int64_t t0)
{
    bool h;
    const sl_ident *id = ident_of(s, ex, rq, &h);
    if (!id)
        answer_error(s, ex, method, transport, SL_GRPC_UNAUTHENTICATED,
                     h ? "unknown bearer token"
                       : "missing bearer token (Authorization: Bearer) or known client certificate",
                     t0);
    return id;
}

/* Whether every item's limit name is inside the identity's prefixes; if not, the status for the
 * whole call (PERMISSION_DENIED, naming the first item outside). */
static bool items_allowed(const sl_ident *id, const sl_batch *b, sl_gub_status *st)
{
    for (size_t i = 0; i < b->n; i++) {
        const sl_request *q = &b->reqs[i];
        if (!sl_ident_allows(id, q->name, q->name_len)) {
            sl_gub_status_set(st, SL_GRPC_PERMISSION_DENIED,
                              "'%s' may not use the limit name of item %zu", sl_ident_name(id), i);
            return false;
        }
    }
    return true;
}

/* ---- GetRateLimits ------------------------------------------------------------------------- */

/* Items whose state is the cluster's: to the Redis store under --store redis, else the router. */
static void submit(sl_service *s, int worker, sl_batch *b, int64_t now, sl_rstore_done_cb done,
                   void *ud)
{
    if (s->cfg.rstore)
        sl_rstore_submit(s->cfg.rstore, worker, b, now, done, ud);
    else
        sl_router_submit(s->cfg.router, worker, b, now, done, ud);
}

/* Fleet leases given back after a call: counted, then freed (api/gubprotect.h). */
static void giveback_done(void *ud, sl_batch *b)
{
    sl_gubprotect_giveback_done(ud, b);
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
    if (c->transport == T_GRPC) {
        size_t mark;
        rc = sl_grpc_frame_begin(&c->out, &mark);
        if (!rc)
            rc = c->method == M_GET_PEER_RATE_LIMITS ? sl_gub_encode_peer_resp_pb(b, &c->out)
                                                     : sl_gub_encode_pb(b, &c->out);
        if (!rc)
            rc = sl_grpc_frame_end(&c->out, mark);
        if (!rc) {
            sl_exchange_respond_grpc(c->ex, c->out.data, c->out.len, SL_GRPC_OK, NULL);
            count_call(s, c->method, T_GRPC, SL_GRPC_OK, c->t0);
        }
    } else {
        rc = sl_gub_encode_json(b, &c->out);
        if (!rc) {
            sl_exchange_respond_simple(c->ex, 200, "application/json", c->out.data, c->out.len);
            count_call(s, c->method, T_HTTP, SL_GRPC_OK, c->t0);
        }
    }
    if (rc)
        answer_error(s, c->ex, c->method, c->transport, SL_GRPC_INTERNAL,
                     "could not encode the response", c->t0);
    call_put(c);
}

/* The protobuf message inside a gRPC request body (exactly one uncompressed message). */
static int grpc_payload(sl_service *s, const sl_http_request *rq, const uint8_t **msg,
                        size_t *len, sl_gub_status *st)
{
    sl_grpc_msg m;
    const char *err = NULL;
    int rc = sl_grpc_frame_decode(rq->body, rq->body_len, s->cfg.gub.max_msg, &m, &err);
    if (rc == -EMSGSIZE) {
        sl_gub_status_set(st, SL_GRPC_RESOURCE_EXHAUSTED, "%s", err ? err : "message too large");
        return rc;
    }
    if (rc == -EAGAIN) {
        sl_gub_status_set(st, SL_GRPC_INVALID_ARGUMENT, "truncated gRPC message");
        return rc;
    }
    if (rc) {
        sl_gub_status_set(st, SL_GRPC_INVALID_ARGUMENT, "%s", err ? err : "bad gRPC framing");
        return rc;
    }
    if (m.compressed) {
        sl_gub_status_set(st, SL_GRPC_UNIMPLEMENTED, "compressed messages are not supported");
        return -ENOTSUP;
    }
    if (m.frame_len != rq->body_len) {
        sl_gub_status_set(st, SL_GRPC_INVALID_ARGUMENT,
                          "a unary call carries exactly one message");
        return -EPROTO;
    }
    *msg = m.data;
    *len = m.len;
    return 0;
}

/* Hand the call's items to the router (after the fleet's, when there were any). */
static void route_items(sl_service *s, sl_call *c, int64_t now)
{
    if (s->cfg.rstore) /* every node decides its own items in Redis: nothing to forward */
        sl_rstore_submit(s->cfg.rstore, c->worker, &c->batch, now, rate_limits_done, c);
    else if (c->method == M_GET_PEER_RATE_LIMITS)
        sl_router_peer_rate_limits(s->cfg.router, c->worker, &c->batch, now, rate_limits_done, c);
    else
        sl_router_submit(s->cfg.router, c->worker, &c->batch, now, rate_limits_done, c);
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

static void get_rate_limits(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                            int method, int transport, int64_t t0)
{
    sl_gub_status st;
    const uint8_t *msg = NULL;
    size_t len = 0;
    const sl_ident *id = NULL;
    if (idents_of(s) && method == M_GET_RATE_LIMITS &&
        !(id = who(s, ex, rq, method, transport, t0)))
        return;
    if (transport == T_GRPC && grpc_payload(s, rq, &msg, &len, &st)) {
        answer_status(s, ex, method, transport, &st, t0);
        return;
    }
    sl_call *c = call_get(s, ex, method, transport, t0);
    if (!c) {
        answer_error(s, ex, method, transport, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory", t0);
        return;
    }
    int rc;
    if (transport == T_HTTP)
        rc = sl_gub_decode_json(&s->cfg.gub, (const char *)rq->body, rq->body_len, &c->batch, &st);
    else if (method == M_GET_PEER_RATE_LIMITS)
        rc = sl_gub_decode_peer_pb(&s->cfg.gub, msg, len, &c->batch, &st);
    else
        rc = sl_gub_decode_pb(&s->cfg.gub, msg, len, &c->batch, &st);
    if (!rc && id && !items_allowed(id, &c->batch, &st))
        rc = -EACCES;
    if (rc) {
        answer_status(s, ex, method, transport, &st, t0);
        call_put(c);
        return;
    }
    int64_t now = sl_exchange_now_ms(ex);
    if (s->cfg.protect) {
        sl_gubprotect_verdict v;
        if (sl_gubprotect_begin(s->cfg.protect, c->worker, &c->batch,
                                method == M_GET_PEER_RATE_LIMITS, now, &c->prot, &v)) {
            answer_shed(s, ex, method, transport, &v, t0);
            call_put(c);
            return;
        }
        sl_batch *fb = c->prot ? sl_gubprotect_fleet_batch(c->prot) : NULL;
        if (fb) { /* the fleet's leases first, from the fleet key's owner */
            submit(s, c->worker, fb, now, fleet_done, c);
            return;
        }
    }
    route_items(s, c, now);
}

/* ---- Envoy RLS ShouldRateLimit (api/rls.h) ------------------------------------------------ */

static void rls_done(void *ud, sl_batch *b)
{
    sl_call *c = ud;
    sl_service *s = c->svc;
    int64_t now = sl_exchange_now_ms(c->ex);
    if (s->cfg.protect)
        sl_gubprotect_end(s->cfg.protect, c->prot, b, false, now);
    sl_gub_status st;
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
        answer_status(s, c->ex, M_SHOULD_RATE_LIMIT, T_GRPC, &st, c->t0);
    } else {
        answer_error(s, c->ex, M_SHOULD_RATE_LIMIT, T_GRPC, SL_GRPC_INTERNAL,
                     "could not encode the response", c->t0);
    }
    sl_rls_end(c->rls);
    call_put(c);
}

static void should_rate_limit(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                              int64_t t0)
{
    sl_gub_status st;
    const uint8_t *msg = NULL;
    size_t len = 0;
    const sl_ident *id = NULL;
    if (idents_of(s) && !(id = who(s, ex, rq, M_SHOULD_RATE_LIMIT, T_GRPC, t0)))
        return;
    if (grpc_payload(s, rq, &msg, &len, &st)) {
        answer_status(s, ex, M_SHOULD_RATE_LIMIT, T_GRPC, &st, t0);
        return;
    }
    sl_call *c = call_get(s, ex, M_SHOULD_RATE_LIMIT, T_GRPC, t0);
    if (!c) {
        answer_error(s, ex, M_SHOULD_RATE_LIMIT, T_GRPC, SL_GRPC_RESOURCE_EXHAUSTED,
                     "out of memory", t0);
        return;
    }
    sl_rlsconf *conf = NULL;
    if (s->cfg.rls)
        conf = (sl_rlsconf *)sl_rlssrc_read(s->cfg.rls, &pool_of(s, c->worker)->rls_reader);
    int rc = sl_rls_begin(&s->cfg.rls_cfg, conf, msg, len, &c->batch, &c->rls, &st);
    if (!rc && id && !items_allowed(id, &c->batch, &st))
        rc = -EACCES;
    if (rc) {
        sl_rls_end(c->rls);
        answer_status(s, ex, M_SHOULD_RATE_LIMIT, T_GRPC, &st, t0);
        call_put(c);
        return;
    }
    int64_t now = sl_exchange_now_ms(ex);
    if (s->cfg.protect) {
        sl_gubprotect_verdict v;
        if (sl_gubprotect_begin(s->cfg.protect, c->worker, &c->batch, false, now, &c->prot, &v)) {
            sl_rls_end(c->rls);
            answer_shed(s, ex, M_SHOULD_RATE_LIMIT, T_GRPC, &v, t0);
            call_put(c);
            return;
        }
    }
    sl_router_submit(s->cfg.router, c->worker, &c->batch, now, rls_done, c);
}

/* ---- UpdatePeerGlobals --------------------------------------------------------------------- */

static void update_peer_globals(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                int64_t t0)
{
    sl_gub_status st;
    const uint8_t *msg;
    size_t len;
    if (grpc_payload(s, rq, &msg, &len, &st)) {
        answer_status(s, ex, M_UPDATE_PEER_GLOBALS, T_GRPC, &st, t0);
        return;
    }
    sl_call *c = call_get(s, ex, M_UPDATE_PEER_GLOBALS, T_GRPC, t0);
    if (!c) {
        answer_error(s, ex, M_UPDATE_PEER_GLOBALS, T_GRPC, SL_GRPC_RESOURCE_EXHAUSTED,
                     "out of memory", t0);
        return;
    }
    sl_gub_global *g = NULL;
    size_t n = 0;
    if (sl_gub_decode_globals_pb(&s->cfg.gub, msg, len, &c->batch, &g, &n, &st)) {
        answer_status(s, ex, M_UPDATE_PEER_GLOBALS, T_GRPC, &st, t0);
    } else {
        sl_router_update_globals(s->cfg.router, c->worker, g, n, sl_exchange_now_ms(ex));
        /* UpdatePeerGlobalsResp is an empty message: a frame of length 0. */
        static const uint8_t empty[SL_GRPC_HDR_LEN] = {0, 0, 0, 0, 0};
        sl_exchange_respond_grpc(ex, empty, sizeof empty, SL_GRPC_OK, NULL);
        count_call(s, M_UPDATE_PEER_GLOBALS, T_GRPC, SL_GRPC_OK, t0);
    }
    call_put(c);
}

/* ---- TransferKeys (hand-off: cluster/handoff.h) ---------------------------------------------- */

static void transfer_keys(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    sl_gub_status st;
    const uint8_t *msg, *recs;
    size_t len, rlen;
    if (grpc_payload(s, rq, &msg, &len, &st)) {
        answer_status(s, ex, M_TRANSFER_KEYS, T_GRPC, &st, t0);
        return;
    }
    if (sl_gub_decode_transfer_req(msg, len, &recs, &rlen)) {
        answer_error(s, ex, M_TRANSFER_KEYS, T_GRPC, SL_GRPC_INVALID_ARGUMENT,
                     "malformed TransferKeysReq", t0);
        return;
    }
    int64_t merged = sl_router_transfer_keys(s->cfg.router, recs, rlen, sl_exchange_now_ms(ex));
    sl_buf out;
    sl_buf_init(&out, 0);
    if (sl_gub_encode_transfer_resp(merged, &out)) {
        answer_error(s, ex, M_TRANSFER_KEYS, T_GRPC, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory",
                     t0);
    } else {
        sl_exchange_respond_grpc(ex, out.data, out.len, SL_GRPC_OK, NULL);
        count_call(s, M_TRANSFER_KEYS, T_GRPC, SL_GRPC_OK, t0);
    }
    sl_buf_free(&out);
}

/* ---- health -------------------------------------------------------------------------------- */

static void health(sl_service *s, sl_exchange *ex, int transport, int64_t t0)
{
    char why[256] = "";
    sl_gub_health h = {.healthy = true, .peer_count = 1, .advertise_address = NULL};
    sl_router_health(s->cfg.router, &h.healthy, &h.peer_count, why, sizeof why);
    if (s->cfg.health && h.healthy) {
        char extra[256] = "";
        if (!s->cfg.health(s->cfg.health_ud, extra, sizeof extra))
            h.healthy = false;
        if (extra[0]) /* a reason, or a note on a degraded but healthy node */
            snprintf(why, sizeof why, "%s", extra);
    }
    h.message = why[0] ? why : NULL;
    if (h.peer_count > 1)
        h.advertise_address = s->cfg.advertise_addr;
    sl_gub_status st;
    if (!sl_gub_health_ok(&h, &st)) {
        answer_status(s, ex, M_HEALTH_CHECK, transport, &st, t0);
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
        answer_error(s, ex, M_HEALTH_CHECK, transport, SL_GRPC_INTERNAL, "encode failed", t0);
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
        answer_text(s, ex, M_METRICS, 500, "text/plain; charset=utf-8", "metrics unavailable\n",
                    20, SL_GRPC_INTERNAL, t0);
        return;
    }
    answer_text(s, ex, M_METRICS, 200, SL_METRICS_PROMETHEUS_CONTENT_TYPE, txt, len, SL_GRPC_OK,
                t0);
    free(txt);
}

/* ---- Levee /attempt ------------------------------------------------------------------------ */

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
    const sl_ident *id = ident_of(s, ex, rq, &sent);
    if (!id) {
        answer_text(s, ex, method, 401, "text/plain; charset=utf-8", unauth, sizeof unauth - 1,
                    SL_GRPC_UNAUTHENTICATED, t0);
        return false;
    }
    if ((res || method == M_ATTEMPT) && !sl_ident_allows(id, res ? res : "", res_len)) {
        answer_text(s, ex, method, 403, "text/plain; charset=utf-8", denied, sizeof denied - 1,
                    SL_GRPC_PERMISSION_DENIED, t0);
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
static void held_sent(void *ud, int outcome, int grpc_code, int64_t t0)
{
    sl_service *s = ud;
    sl_metrics_counter_inc(s->attempts[outcome]);
    count_call(s, M_ATTEMPT, T_HTTP, grpc_code, t0);
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
    if (prot) {
        header_value(rq, "x-priority", &q->priority, &q->priority_len);
        header_value(rq, "x-concurrency", &q->concurrency, &q->concurrency_len);
        header_value(rq, "x-lease-id", &q->lease_id, &q->lease_id_len);
    }
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

/* A waiting /attempt is decided: the fleet lease a later rejection gave back goes to its owner,
 * and the answer goes out. */
static void attempt_answered(sl_service *s, sl_call *c, const sl_http_request *rq,
                             const sl_attempt_req *q, uint64_t back, int64_t now)
{
    sl_batch *gb = back || c->att.conc_back
                       ? sl_gubprotect_lease_release(s->cfg.protect, back, q->levee.resource,
                                                     q->levee.resource_len, c->att.conc_back, now)
                       : NULL;
    if (gb)
        submit(s, c->worker, gb, now, giveback_done, s->cfg.protect);
    attempt_send(s, c->ex, rq, q, pool_of(s, c->worker), c->t0);
    call_put(c);
}

/* The Redis store decided an /attempt's rate quotas (api/attempt.h sl_attempt_store_done): its
 * give-backs go again, else the answer goes out. */
static void attempt_store_done(void *ud, sl_batch *b)
{
    (void)b;
    sl_call *c = ud;
    sl_service *s = c->svc;
    sl_call_pool *p = pool_of(s, c->worker);
    const sl_http_request *rq = sl_exchange_request(c->ex);
    int64_t now = sl_exchange_now_ms(c->ex);
    sl_attempt_req q;
    attempt_headers(rq, &q, true);
    uint64_t back;
    if (sl_attempt_store_done(s->cfg.protect, c->worker, &s->cfg.levee, &q, &c->att, now,
                              &p->answer, &back)) {
        sl_rstore_submit(s->cfg.rstore, c->worker, &c->batch, now, attempt_store_done, c);
        return;
    }
    attempt_answered(s, c, rq, &q, back, now);
}

/* The fleet key's owner answered an /attempt's fleet lease (or could not: this node's share,
 * api/gubprotect.h): the decision goes on, its headers and quotas read again (the call waited). */
static void attempt_fleet_done(void *ud, sl_batch *fb)
{
    sl_call *c = ud;
    sl_service *s = c->svc;
    sl_call_pool *p = pool_of(s, c->worker);
    const sl_http_request *rq = sl_exchange_request(c->ex);
    int64_t now = sl_exchange_now_ms(c->ex);
    sl_attempt_req q;
    attempt_headers(rq, &q, true);
    sl_response r;
    bool fleet = c->att.fleet_item >= 0, local = false; /* else the concurrency lease alone */
    if (fleet)
        local = sl_gubprotect_fleet_taken(s->cfg.protect, fb, (size_t)c->att.fleet_item,
                                          &c->att.limit, c->att.duration_ms,
                                          sl_router_peer_count(s->cfg.router), now, &r);
    const sl_quota_snap *snap = sl_quotasrc_read(s->cfg.quotas, &p->quota_reader);
    uint64_t back;
    if (sl_attempt_resume(s->cfg.protect, c->worker, &s->cfg.levee, snap, &q, &c->att,
                          fleet ? &r : NULL, local, now, &p->answer, &back) == SL_ATTEMPT_STORE) {
        sl_rstore_submit(s->cfg.rstore, c->worker, &c->batch, now, attempt_store_done, c);
        return;
    }
    attempt_answered(s, c, rq, &q, back, now);
}

/* A non-critical acquire's fleet lease: in a cluster or in Redis, the one count at the fleet
 * key's owner, routed like any item (true: the answer waits for it); on a node on its own, here.
 * `sc`: the call of an /attempt on the Redis store (its rate quotas go there). */
static bool attempt_fleet(sl_service *s, sl_exchange *ex, const sl_attempt_req *q,
                          const sl_quota_snap *snap, sl_attempt_fleet *st, sl_call *sc,
                          int64_t now, int64_t t0)
{
    int worker = sl_exchange_worker(ex);
    sl_response oom = {.error = "out of memory"}, *fr = NULL;
    if (sc || sl_router_peer_count(s->cfg.router) > 1) {
        sl_call *c = sc ? sc : call_get(s, ex, M_ATTEMPT, T_HTTP, t0);
        if (c && !sl_gubprotect_fleet_item(s->cfg.protect, &c->batch, 1, st->limit,
                                           st->duration_ms, 0)) {
            c->att = *st;
            submit(s, worker, &c->batch, now, attempt_fleet_done, c);
            return true;
        }
        if (c && c != sc)
            call_put(c);
        fr = &oom;
        st->store = NULL; /* the engine decides (the caller puts sc back) */
    }
    uint64_t back;
    sl_attempt_resume(s->cfg.protect, worker, &s->cfg.levee, snap, q, st, fr, false, now,
                      &pool_of(s, worker)->answer, &back);
    return false;
}

/* The owner of a renewed lease's key answered (api/attempt.h SL_ATTEMPT_RENEW). */
static void attempt_renew_done(void *ud, sl_batch *b)
{
    (void)b;
    sl_call *c = ud;
    sl_service *s = c->svc;
    sl_call_pool *p = pool_of(s, c->worker);
    const sl_http_request *rq = sl_exchange_request(c->ex);
    sl_attempt_req q;
    attempt_headers(rq, &q, true);
    sl_attempt_renewed(&q, &c->att, &p->answer);
    attempt_send(s, c->ex, rq, &q, p, c->t0);
    call_put(c);
}

/* Levee's /attempt: under protection when the node has it, else the rate quotas alone. */
static void attempt(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
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
    if (s->cfg.protect) {
        attempt_headers(rq, &q, true);
        sl_attempt_fleet st;
        sl_call *c = NULL; /* on the Redis store or in a cluster: the call its items wait in */
        st.store = st.leases = NULL;
        int nodes = sl_router_peer_count(s->cfg.router);
        if (__builtin_expect(s->cfg.rstore != NULL || nodes > 1, 0)) {
            if (!(c = call_get(s, ex, M_ATTEMPT, T_HTTP, t0))) {
                answer_error(s, ex, M_ATTEMPT, T_HTTP, SL_GRPC_RESOURCE_EXHAUSTED,
                             "out of memory", t0);
                return;
            }
            st.store = s->cfg.rstore ? &c->batch : NULL;
            st.leases = &c->batch; /* the fleet's and the resource's leases: one round trip */
            st.nodes = nodes;
        }
        int rc = sl_attempt_begin(s->cfg.protect, worker, &s->cfg.levee, snap, &q, now, &st,
                                  &p->answer);
        if (rc == SL_ATTEMPT_STORE) {
            c->att = st;
            sl_rstore_submit(s->cfg.rstore, worker, &c->batch, now, attempt_store_done, c);
            return;
        }
        if (rc && st.leases) {
            c->att = st;
            submit(s, worker, &c->batch, now,
                   rc == SL_ATTEMPT_RENEW ? attempt_renew_done : attempt_fleet_done, c);
            return;
        }
        if (rc && attempt_fleet(s, ex, &q, snap, &st, c, now, t0))
            return; /* c, if any, is the fleet's now */
        if (c)
            call_put(c);
    } else {
        sl_levee_attempt(&s->cfg.levee, snap, s->cfg.engine, &q.levee, now, &p->answer);
    }
    attempt_send(s, ex, rq, &q, p, t0);
}

static void release_headers(const sl_http_request *rq, sl_attempt_release_req *rr)
{
    header_value(rq, "x-lease-id", &rr->lease_id, &rr->lease_id_len);
    header_value(rq, "x-resource", &rr->resource, &rr->resource_len);
    header_value(rq, "x-req-id", &rr->req_id, &rr->req_id_len);
}

/* The fleet key's owner answered a /release's give-back of its fleet lease. */
static void release_fleet_done(void *ud, sl_batch *fb)
{
    sl_call *c = ud;
    sl_service *s = c->svc;
    sl_call_pool *p = pool_of(s, c->worker);
    sl_attempt_release_req rr;
    release_headers(sl_exchange_request(c->ex), &rr);
    sl_attempt_release_answer(&rr, c->att_rc,
                              sl_gubprotect_fleet_released(s->cfg.protect, &fb->resps[0]),
                              &p->answer);
    respond_answer(s, c->ex, M_RELEASE, &p->answer, c->t0);
    call_put(c);
}

/* The owners of a /release's leases answered (api/attempt.h sl_attempt_release_route). */
static void release_routed_done(void *ud, sl_batch *b)
{
    (void)b;
    sl_call *c = ud;
    sl_service *s = c->svc;
    sl_call_pool *p = pool_of(s, c->worker);
    sl_attempt_release_req rr;
    release_headers(sl_exchange_request(c->ex), &rr);
    sl_attempt_release_done(s->cfg.protect, &rr, &c->att, c->att_rc, &p->answer);
    respond_answer(s, c->ex, M_RELEASE, &p->answer, c->t0);
    call_put(c);
}

/* /release: the concurrency lease here, a fleet lease of the owner's given back to it (routed);
 * in a cluster or on the Redis store both leases are the owners' (one batch). */
static void release(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    sl_call_pool *p = pool_of(s, sl_exchange_worker(ex));
    sl_attempt_release_req rr;
    release_headers(rq, &rr);
    if (idents_of(s) && !resource_allowed(s, ex, rq, M_RELEASE, rr.resource, rr.resource_len, t0))
        return;
    int64_t now = sl_exchange_now_ms(ex);
    int conc_rc;
    if (s->cfg.rstore || sl_router_peer_count(s->cfg.router) > 1) {
        sl_call *c = call_get(s, ex, M_RELEASE, T_HTTP, t0);
        if (!c) {
            answer_error(s, ex, M_RELEASE, T_HTTP, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory",
                         t0);
            return;
        }
        c->att.leases = &c->batch;
        if (sl_attempt_release_route(s->cfg.protect, &rr, now, &c->att, &conc_rc, &p->answer)) {
            c->att_rc = conc_rc;
            submit(s, c->worker, &c->batch, now, release_routed_done, c);
            return;
        }
        call_put(c);
        respond_answer(s, ex, M_RELEASE, &p->answer, t0);
        return;
    }
    uint64_t fleet = sl_attempt_release_begin(s->cfg.protect, &rr, now, true, &conc_rc,
                                              &p->answer);
    if (fleet) {
        sl_call *c = call_get(s, ex, M_RELEASE, T_HTTP, t0);
        if (c && !sl_gubprotect_fleet_item(s->cfg.protect, &c->batch, -1, 0, 1, fleet)) {
            c->att_rc = conc_rc;
            submit(s, c->worker, &c->batch, now, release_fleet_done, c);
            return;
        }
        if (c)
            call_put(c);
        sl_attempt_release_answer(&rr, conc_rc, -1, &p->answer);
    }
    respond_answer(s, ex, M_RELEASE, &p->answer, t0);
}

/* ---- routing ------------------------------------------------------------------------------- */

static bool method_is(const sl_http_request *rq, const char *m)
{
    return strcmp(rq->method, m) == 0;
}

/*
 * PeersV1 is for the members of the peer list only (issue 11). Without TLS a caller is judged by
 * its connection's source IP, which a peer's client sets by binding to its advertised IP
 * (cluster/peer.c); a client on the same IP as a peer passes, which docs/operations.md says.
 * With peer mTLS (peer TLS and a peer CA) the source IP does not count: the connection must
 * carry a verified client certificate, and one of its names (the identity or a DNS / IP
 * subjectAltName) must be the host of an address in the peer list (sl_addr_names_host).
 * TransferKeys is also served to a member of the list before the current one, by the same rule.
 */
#define PEERS_PREFIX "/pb.gubernator.PeersV1/"

static bool peer_allowed(sl_service *s, sl_exchange *ex, const sl_http_request *rq, bool former)
{
    if (s->cfg.peers_any)
        return true;
    if (s->cfg.peers_mtls)
        return sl_router_names_peer(s->cfg.router, sl_exchange_worker(ex),
                                    sl_exchange_peer_identity(ex), former);
    return former ? sl_router_was_peer(s->cfg.router, sl_exchange_worker(ex), rq->peer)
                  : sl_router_is_peer(s->cfg.router, sl_exchange_worker(ex), rq->peer);
}

static void peer_denied(sl_service *s, sl_exchange *ex, int method, int64_t t0)
{
    sl_metrics_counter_inc(s->peer_denied);
    answer_error(s, ex, method, T_GRPC, SL_GRPC_PERMISSION_DENIED,
                 "PeersV1 is served to the members of the peer list only", t0);
}

static void route_grpc(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    if (sl_http_path_is(rq, SL_GUB_PATH_GET_RATE_LIMITS)) {
        get_rate_limits(s, ex, rq, M_GET_RATE_LIMITS, T_GRPC, t0);
    } else if (rq->path_len > sizeof PEERS_PREFIX - 1 &&
               !memcmp(rq->path, PEERS_PREFIX, sizeof PEERS_PREFIX - 1)) {
        int m = sl_http_path_is(rq, SL_GUB_PATH_GET_PEER_RATE_LIMITS) ? M_GET_PEER_RATE_LIMITS
                : sl_http_path_is(rq, SL_GUB_PATH_UPDATE_PEER_GLOBALS) ? M_UPDATE_PEER_GLOBALS
                : sl_http_path_is(rq, SL_GUB_PATH_TRANSFER_KEYS)       ? M_TRANSFER_KEYS
                                                               : M_OTHER;
        /* a node that has just left may still push its keys here (by address or by
         * certificate, like any PeersV1 call) */
        if (!peer_allowed(s, ex, rq, m == M_TRANSFER_KEYS))
            peer_denied(s, ex, m, t0);
        else if (m == M_GET_PEER_RATE_LIMITS)
            get_rate_limits(s, ex, rq, M_GET_PEER_RATE_LIMITS, T_GRPC, t0);
        else if (m == M_UPDATE_PEER_GLOBALS)
            update_peer_globals(s, ex, rq, t0);
        else if (m == M_TRANSFER_KEYS)
            transfer_keys(s, ex, rq, t0);
        else
            answer_error(s, ex, M_OTHER, T_GRPC, SL_GRPC_UNIMPLEMENTED,
                         "unknown service or method", t0);
    } else if (sl_http_path_is(rq, SL_RLS_PATH)) {
        should_rate_limit(s, ex, rq, t0);
    } else if (sl_http_path_is(rq, SL_GUB_PATH_HEALTH_CHECK))
        health(s, ex, T_GRPC, t0);
    else if (sl_http_path_is(rq, SL_GUB_PATH_LIVE_CHECK))
        live(s, ex, T_GRPC, t0);
    else
        answer_error(s, ex, M_OTHER, T_GRPC, SL_GRPC_UNIMPLEMENTED, "unknown service or method",
                     t0);
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
    }
    if (m < 0) {
        static const char nf[] = "not found\n";
        answer_text(s, ex, M_OTHER, 404, "text/plain; charset=utf-8", nf, sizeof nf - 1,
                    SL_GRPC_NOT_FOUND, t0);
        return;
    }
    bool get_like = method_is(rq, "GET") || method_is(rq, "HEAD");
    if (want_post ? !method_is(rq, "POST") : !get_like) {
        const char *msg = want_post ? allow_post : allow_get;
        answer_text(s, ex, m, 405, "text/plain; charset=utf-8", msg, strlen(msg),
                    SL_GRPC_UNIMPLEMENTED, t0);
        return;
    }
    switch (m) {
    case M_GET_RATE_LIMITS:
        get_rate_limits(s, ex, rq, M_GET_RATE_LIMITS, T_HTTP, t0);
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
        attempt(s, ex, rq, t0);
        break;
    case M_RELEASE:
        release(s, ex, rq, t0);
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
    for (int i = 0; i < s->npools; i++)
        s->pools[i].held = (sl_held_list){.max = cfg->max_held, .sent = held_sent, .sent_ud = s};
    int rc = register_metrics(s);
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
}

void sl_service_worker_stop(sl_service *s, int worker)
{
    sl_call_pool *p = pool_of(s, worker);
    if (worker >= 0 && worker < s->npools - 1)
        sl_loadtick_stop(&p->tick);
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
    free(s);
}

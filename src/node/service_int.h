/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's internals, shared by the files of the service module and by nothing else:
 * node/service.c (routing, the call pool, answers, identities, Gubernator's methods, health,
 * lifecycle), node/serviceatt.c (Levee's /attempt and /release) and node/servicerls.c (Envoy's
 * ShouldRateLimit). The public interface is node/service.h. The helpers on the per-request path
 * are static inline here and the rest hidden, so that splitting the module costs the request
 * path no indirection: the dispatch (route_grpc, route_http) stays in service.c and calls the
 * dialects' handlers directly.
 */
#ifndef SLUICE_NODE_SERVICE_INT_H
#define SLUICE_NODE_SERVICE_INT_H

#include "node/service.h"

#include <errno.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/attempt.h"
#include "api/grpcstd.h"
#include "api/gubprotect.h"
#include "node/held.h"
#include "node/loadtick.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

#define SL_SVC_HIDDEN __attribute__((visibility("hidden")))

enum { T_GRPC, T_HTTP, T_COUNT };
/* Why a PeersV1 call was refused (sluice_peer_refused_total{reason}, node/servicepeer.c). */
enum {
    SL_SVC_PEER_UNAUTHENTICATED, /* no credential: no signature header, no certificate */
    SL_SVC_PEER_BAD_SIGNATURE,   /* a malformed signature, or one no secret gives */
    SL_SVC_PEER_SKEW,            /* a signature whose time is outside --peer-auth-skew */
    SL_SVC_PEER_NOT_MEMBER,      /* proven, but not a member of the peer list (or not a peer IP) */
    SL_SVC_PEER_TOKENS,          /* taken without a credential while client tokens are on */
    SL_SVC_PEER_TOO_MANY_GLOBALS, /* UpdatePeerGlobals over --peer-max-globals */
    SL_SVC_PEER_TOO_MANY_KEYS,   /* TransferKeys over --peer-max-transfer-keys */
    SL_SVC_PEER_EXPIRY,          /* a state expiring further than its limit's duration allows */
    SL_SVC_PEER_REFUSED_COUNT
};
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
    M_CHECK_RATE_LIMIT, /* Kuadrant/limitador's CheckRateLimit */
    M_REPORT,           /* and its Report */
    M_GRPC_HEALTH_CHECK,  /* grpc.health.v1.Health/Check */
    M_GRPC_HEALTH_WATCH,  /* grpc.health.v1.Health/Watch */
    M_REFLECTION,         /* grpc.reflection.v1 and v1alpha ServerReflectionInfo */
    M_COUNT
};
#define N_CODES 17

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
    sl_attempt_fleet att;     /* /attempt waiting: its state machine's (api/attempt.h) */
    int att_rc;               /* /release waiting for its fleet lease: the concurrency give's */
    bool rel_routed;          /* /release waiting for both its leases' owners (else the fleet's) */
    uint8_t enc;              /* the answer's message encoding (api/grpczip.h: the request's) */
    int64_t deadline;         /* sl_mono_ns() past which the call is not decided (0: none) */
    sl_batch batch;
    sl_buf out;
    sl_buf zin;               /* the inflated request message, then the compressed answer */
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
    struct sl_watch *watches; /* open grpc.health.v1 Watch streams (node/servicestd.c) */
    size_t nwatches;
    uv_timer_t watch_timer;   /* re-reads the verdict for them */
    bool watch_timer_on;
    int last_verdict;         /* the verdict the watches were last told (-1: none yet) */
} __attribute__((aligned(64))) sl_call_pool;

struct sl_service {
    sl_service_config cfg;
    sl_call_pool *pools; /* workers + 1 (the last for callers without a worker) */
    int npools;
    sl_metrics_family *calls_family;
    _Atomic(sl_metrics_counter *) calls[M_COUNT][T_COUNT][N_CODES];
    sl_metrics_histogram *latency[M_COUNT][T_COUNT];
    sl_metrics_counter *attempts[SL_ANSWER_OUTCOME_COUNT];
    sl_metrics_counter *peer_denied; /* PeersV1 calls refused: not a proven member */
    sl_metrics_counter *peer_refused[SL_SVC_PEER_REFUSED_COUNT]; /* by reason (servicepeer.c) */
    sl_metrics_counter *peer_insecure; /* PeersV1 calls taken without a credential */
    sl_metrics_counter *expired;     /* gRPC calls not decided: their deadline had passed */
    sl_rlsmetrics *rls_metrics;      /* ShouldRateLimit's outcomes (api/rlsmetrics.h) */
    _Atomic(const sl_idents *) idents; /* cfg.idents, then what sl_service_swap_idents set */
    sl_grpcstd_refl *refl;           /* the services and descriptors reflection serves */
};

/* ---- shared by the service's files (service.c defines them unless marked) ---------------- */

/* The series of a (method, transport, code) on its first use (count_call). */
SL_SVC_HIDDEN sl_metrics_counter *sl_service_count_series(sl_service *s, int method, int transport,
                                                          int code);
/* A call record from the worker's pool (NULL: out of memory), and back into it. */
SL_SVC_HIDDEN sl_call *sl_service_call_get(sl_service *s, sl_exchange *ex, int method,
                                           int transport, int64_t t0);
SL_SVC_HIDDEN void sl_service_call_put(sl_call *c);
/* Answers: a status (gRPC status or grpc-gateway's JSON error), an error of a code and message,
 * a plain text HTTP answer, a call shed by the worker shedder. Each counts the call. */
SL_SVC_HIDDEN void sl_service_answer_status(sl_service *s, sl_exchange *ex, int method,
                                            int transport, const sl_grpc_status *st, int64_t t0);
SL_SVC_HIDDEN void sl_service_answer_error(sl_service *s, sl_exchange *ex, int method,
                                           int transport, int code, const char *msg, int64_t t0);
SL_SVC_HIDDEN void sl_service_answer_text(sl_service *s, sl_exchange *ex, int method, int status,
                                          const char *ctype, const char *body, size_t len,
                                          int code, int64_t t0);
SL_SVC_HIDDEN void sl_service_answer_shed(sl_service *s, sl_exchange *ex, int method,
                                          int transport, const sl_gubprotect_verdict *v,
                                          int64_t t0);
/* Client identities: the caller's (or NULL; *sent: an Authorization header came), the caller's
 * or NULL after answering UNAUTHENTICATED, whether a batch's names are all the identity's. */
SL_SVC_HIDDEN const sl_ident *sl_service_ident_of(const sl_service *s, sl_exchange *ex,
                                                  const sl_http_request *rq, bool *sent);
SL_SVC_HIDDEN const sl_ident *sl_service_who(sl_service *s, sl_exchange *ex,
                                             const sl_http_request *rq, int method, int transport,
                                             int64_t t0);
SL_SVC_HIDDEN bool sl_service_items_allowed(const sl_ident *id, const sl_batch *b,
                                            sl_grpc_status *st);
/* The protobuf message of a unary gRPC request (0, or the status to answer), inflated into zin
 * when it came compressed. */
SL_SVC_HIDDEN int sl_service_grpc_payload(sl_service *s, const sl_http_request *rq, sl_buf *zin,
                                          const uint8_t **msg, size_t *len, sl_grpc_status *st);
/* Answer a call with its framed message `framed` and status OK, compressed with the call's
 * encoding (c->enc), and count it. 0. */
SL_SVC_HIDDEN int sl_service_respond_grpc_msg(sl_call *c, sl_buf *framed);
/* Whether the call's deadline passed; if so it is answered DEADLINE_EXCEEDED (not put back). */
SL_SVC_HIDDEN bool sl_service_call_expired(sl_call *c);

/* node/serviceatt.c: POST /attempt and POST /release, and the count of a held answer sent. */
SL_SVC_HIDDEN void sl_service_attempt(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                      int64_t t0);
SL_SVC_HIDDEN void sl_service_release(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                      int64_t t0);
SL_SVC_HIDDEN void sl_service_held_sent(void *ud, int outcome, int grpc_code, int64_t t0);

/* node/servicestd.c: gRPC's standard services (grpc.health.v1, server reflection). */
SL_SVC_HIDDEN void sl_service_grpc_health(sl_service *s, sl_exchange *ex,
                                          const sl_http_request *rq, bool watch, int64_t t0);
SL_SVC_HIDDEN void sl_service_reflection(sl_service *s, sl_exchange *ex,
                                         const sl_http_request *rq, int64_t t0);
SL_SVC_HIDDEN void sl_service_watch_start(sl_service *s, int worker, uv_loop_t *loop);
SL_SVC_HIDDEN void sl_service_watch_stop(sl_service *s, int worker);
/* The call's deadline and answer encoding from its request (service.c). */
SL_SVC_HIDDEN void sl_service_call_grpc(sl_call *c, const sl_http_request *rq);

/* node/servicepeer.c: who may make a PeersV1 call. The metric families; whether this call may
 * go on (if not it is answered, counted and logged; *proven: by a credential, not by the
 * opt-out or the deprecated address rule; former: a member of the previous peer list counts,
 * for TransferKeys); a refusal for a reason (SL_SVC_PEER_*) with a gRPC code. */
SL_SVC_HIDDEN int sl_service_peer_metrics(sl_service *s);
SL_SVC_HIDDEN bool sl_service_peer_admit(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                         int method, bool former, int64_t t0, bool *proven);
SL_SVC_HIDDEN void sl_service_peer_refuse(sl_service *s, sl_exchange *ex,
                                          const sl_http_request *rq, int method, int reason,
                                          int code, const char *msg, int64_t t0);
/* 1 + the index of the first global whose reset is later than its duration allows
 * (sl_handoff_latest_expiry), or 0. */
SL_SVC_HIDDEN size_t sl_service_globals_out_of_bound(const sl_peerwire_global *g, size_t n,
                                                     int64_t now);
/* node/service.c: a method's label ("GetPeerRateLimits", ...). */
SL_SVC_HIDDEN const char *sl_service_method_name(int method);

/* node/servicerls.c: Envoy RLS v3 ShouldRateLimit, over gRPC (T_GRPC) or as envoyproxy/ratelimit's
 * POST /json (T_HTTP), and Kuadrant/limitador's CheckRateLimit and Report over gRPC (method
 * M_SHOULD_RATE_LIMIT, M_CHECK_RATE_LIMIT, M_REPORT). */
SL_SVC_HIDDEN void sl_service_should_rate_limit(sl_service *s, sl_exchange *ex,
                                                const sl_http_request *rq, int method,
                                                int transport, int64_t t0);

/* ---- static inline helpers of the per-request path ---------------------------------------- */

/* Count an answered call and observe its latency. The first call with an outcome resolves its
 * series once, out of line (takes the registry lock); every later one is two atomic steps here. */
static inline void count_call(sl_service *s, int method, int transport, int code, int64_t t0)
{
    if (!s->cfg.metrics)
        return;
    if (code < 0 || code >= N_CODES)
        code = SL_GRPC_UNKNOWN;
    sl_metrics_counter *c = atomic_load_explicit(&s->calls[method][transport][code],
                                                 memory_order_acquire);
    if (!c)
        c = sl_service_count_series(s, method, transport, code);
    sl_metrics_counter_inc(c);
    sl_metrics_histogram_observe(s->latency[method][transport], sl_mono_ns() - t0);
}

static inline sl_call_pool *pool_of(sl_service *s, int worker)
{
    if (worker < 0 || worker >= s->npools - 1)
        worker = s->npools - 1;
    return &s->pools[worker];
}

/* The current identities (NULL: off); a set swapped out stays valid until this call returns
 * (sl_service_swap_idents). */
static inline const sl_idents *idents_of(const sl_service *s)
{
    return atomic_load_explicit(&((sl_service *)s)->idents, memory_order_acquire);
}

/* Items whose state is the cluster's (GetRateLimits' and ShouldRateLimit's items, leases and their
 * give-backs, /attempt's rate quotas in Redis): to the node's one decider, whichever it is. */
static inline void submit(sl_service *s, int worker, sl_batch *b, int64_t now,
                          sl_batch_done_cb done, void *ud)
{
    sl_decider_submit(s->cfg.decider, worker, b, now, done, ud);
}

/* A call that needs the router: its gRPC message first (when `transport` is gRPC), then a call
 * record; NULL after answering the caller (a bad message, or out of memory). */
static inline sl_call *call_open(sl_service *s, sl_exchange *ex, const sl_http_request *rq,
                                 int method, int transport, const uint8_t **msg, size_t *len,
                                 int64_t t0)
{
    sl_grpc_status st;
    sl_call *c = sl_service_call_get(s, ex, method, transport, t0);
    if (!c) {
        sl_service_answer_error(s, ex, method, transport, SL_GRPC_RESOURCE_EXHAUSTED,
                                "out of memory", t0);
        return NULL;
    }
    if (transport == T_GRPC && sl_service_grpc_payload(s, rq, &c->zin, msg, len, &st)) {
        sl_service_answer_status(s, ex, method, transport, &st, t0);
        sl_service_call_put(c);
        return NULL;
    }
    if (transport == T_GRPC)
        sl_service_call_grpc(c, rq);
    return c;
}

/* A decoded call goes on (true, *now set), or it is answered and put back: its decoding failed
 * (rc, *st), an item's name is not the caller identity's (`id`), or the worker shedder sheds it
 * (protection begun here: api/gubprotect.h; `peer`: a GetPeerRateLimits call). */
static inline bool call_admit(sl_service *s, sl_call *c, const sl_ident *id, int rc,
                              sl_grpc_status *st, bool peer, int64_t *now)
{
    if (!rc && id && !sl_service_items_allowed(id, &c->batch, st))
        rc = -EACCES;
    if (!rc && c->deadline && sl_service_call_expired(c)) { /* answered: not decided */
        if (c->rls)
            sl_rls_end(c->rls);
        sl_service_call_put(c);
        return false;
    }
    sl_gubprotect_verdict v;
    if (!rc) {
        *now = sl_exchange_now_ms(c->ex);
        if (!s->cfg.protect || !sl_gubprotect_begin(s->cfg.protect, c->worker, &c->batch, peer,
                                                    *now, &c->prot, &v))
            return true;
    }
    if (c->rls)
        sl_rls_end(c->rls);
    if (rc)
        sl_service_answer_status(s, c->ex, c->method, c->transport, st, c->t0);
    else
        sl_service_answer_shed(s, c->ex, c->method, c->transport, &v, c->t0);
    sl_service_call_put(c);
    return false;
}

/* An all-or-nothing give-back (api/rls.h sl_rls_giveback, api/gubernator.h
 * sl_gub_all_or_nothing): build(ctx, NULL) says whether there is one, build(ctx, gb) fills it; it
 * goes where the call's items went, fire and forget, and is freed when answered. */
static inline void giveback_sent(void *ud, sl_batch *g)
{
    (void)ud;
    sl_batch_free(g);
    free(g);
}

static inline void giveback_submit(sl_service *s, int worker, int64_t now,
                                   size_t (*build)(void *ctx, sl_batch *gb), void *ctx)
{
    if (!build(ctx, NULL))
        return;
    sl_batch *g = malloc(sizeof *g);
    if (!g)
        return;
    sl_batch_init(g, 0);
    if (!build(ctx, g)) {
        giveback_sent(NULL, g);
        return;
    }
    submit(s, worker, g, now, giveback_sent, NULL);
}

/* Fleet leases given back after a call: counted, then freed (api/gubprotect.h). */
static inline void giveback_done(void *ud, sl_batch *b)
{
    sl_gubprotect_giveback_done(ud, b);
}

#endif

/*
 * Protection on the request path, after Stripe's "Scaling your API with rate limiters": the
 * concurrency limiter and the fleet-usage shedder of Levee's POST /attempt, the worker-utilization
 * shedder that protects sluiced itself, shadow mode (dark launch) and kill switches applied to
 * every answer, and the answers that say so: 429 for rate and concurrency rejections, 503 for
 * shedding, each with Retry-After, the RateLimit header fields and a one-line reason.
 * docs/protection.md is the user's description; this header is the service's.
 *
 * Levee (HTTP):
 *   POST /attempt   X-Resource, X-Prefix, X-Method, X-Req-Id as before, plus
 *                   X-Priority: critical | post | get | test  (absent: GET/HEAD -> get, another
 *                               X-Method -> post, no method -> the configured default)
 *                   X-Concurrency: acquire  -> a lease: 200 carries X-Lease-Id
 *   POST /release   X-Lease-Id (X-Resource when the id does not carry it) -> 200, 404, 400
 *   The order of the checks: kill switch "*", worker shedder (503), fleet shedder (503, acquire
 *   of a non-critical call), the resource's concurrency limit (429, acquire), then Levee's rate
 *   quotas (429). A later rejection gives back the leases taken before it.
 *
 * Gubernator (gRPC and JSON): items keep their meaning; per item metadata "priority" and, for
 * CONCURRENCY releases, "lease_id". sl_protect_batch_begin() runs before the router (the worker
 * shedder for the whole call; kill switches; the fleet shedder for CONCURRENCY acquires; lease
 * ids into the requests), sl_protect_batch_end() after it (lease ids out, shadow mode, reasons).
 * Answers carry metadata: "lease_id", "killswitch" ("on"), "shadow" ("would_reject"), "reason".
 *
 * Switch names (config/killswitch.h): a Gubernator item's `name`; for /attempt "levee" (all rate
 * quotas) or a quota's name, "concurrency", "fleet"; "shed" for the worker shedder; "*" for all.
 * A request may also ask for shadow mode with behavior SL_SHADOW (Gubernator only: on /attempt
 * the limits are the server's, and a client flag must not switch them off).
 *
 * Threads: everything that takes `worker` runs on that worker's loop thread (worker -1 or out of
 * range: a spare slot for callers without a worker, one thread at a time). The worker shedder's
 * timer lives on the worker's loop (sl_protect_worker_start).
 */
#ifndef SLUICE_API_PROTECT_H
#define SLUICE_API_PROTECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "api/batch.h"
#include "api/levee.h"
#include "config/killswitch.h"
#include "config/quota.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/shed.h"
#include "sluice/engine.h"

typedef struct sl_protect_config {
    sl_engine *engine;            /* decides /attempt's leases and the fleet's (not owned) */
    sl_killswitch *switches;      /* may be NULL: nothing is ever switched */
    sl_metrics *metrics;          /* may be NULL */
    sl_logger *log;               /* may be NULL */
    int workers;                  /* worker loops that call in */
    bool shed;                    /* run the worker-utilization shedder (--shed) */
    sl_shedder_options shed_opts; /* --shed-target, --shed-low, ... */
    int64_t shed_interval_ms;     /* how often a worker samples its load (--shed-interval; 100) */
    sl_priority default_priority; /* calls that say nothing (--default-priority; critical) */
    const char *name;             /* engine namespace of /attempt's leases; NULL = "levee" */
    int64_t log_per_second;       /* would-reject and shed log lines per second at most (20) */
} sl_protect_config;

void sl_protect_config_default(sl_protect_config *c);

typedef struct sl_protect sl_protect;

int sl_protect_new(const sl_protect_config *cfg, sl_protect **out);
/* After every worker stopped. */
void sl_protect_free(sl_protect *p);

/* Server hooks, on the worker's thread: sample the loop's busy time every shed_interval_ms
 * (libuv's idle-time metric) and move that worker's shed level. */
void sl_protect_worker_start(sl_protect *p, int worker, uv_loop_t *loop);
void sl_protect_worker_stop(sl_protect *p, int worker);

/* Feed a worker's shedder one utilization sample (what the timer does; for tests and for callers
 * that measure load their own way). Returns what sl_shed_observe() returns. */
int sl_protect_observe(sl_protect *p, int worker, int64_t now_ms, double utilization);
double sl_protect_shed_level(sl_protect *p, int worker);

/* ---- Levee /attempt and /release ---------------------------------------------------------- */

typedef struct sl_protect_attempt_req {
    sl_levee_request levee;   /* X-Resource, X-Prefix, X-Method, X-Req-Id */
    const char *priority;     /* X-Priority; NULL = absent */
    size_t priority_len;
    const char *concurrency;  /* X-Concurrency; NULL = absent */
    size_t concurrency_len;
} sl_protect_attempt_req;

typedef struct sl_protect_release_req {
    const char *lease_id;     /* X-Lease-Id */
    size_t lease_id_len;
    const char *resource;     /* X-Resource (optional when the lease id carries it) */
    size_t resource_len;
    const char *req_id;       /* X-Req-Id (echoed) */
    size_t req_id_len;
} sl_protect_release_req;

typedef enum sl_protect_outcome {
    SL_PROTECT_ACCEPTED = 0,  /* 200 */
    SL_PROTECT_REJECTED = 1,  /* 429: rate or concurrency */
    SL_PROTECT_SHED = 2,      /* 503: fleet or worker shedder */
    SL_PROTECT_FAILED = 3,    /* 500 */
    SL_PROTECT_MALFORMED = 4, /* 400 */
    SL_PROTECT_NOT_FOUND = 5, /* 404: release of an unknown lease */
    SL_PROTECT_OUTCOME_COUNT
} sl_protect_outcome;

const char *sl_protect_outcome_name(sl_protect_outcome o);

#define SL_PROTECT_MAX_HEADERS 12

typedef struct sl_protect_response {
    int status;
    sl_protect_outcome outcome;
    sl_levee_outcome levee_outcome; /* for Levee's attempts counter: SHED counts as rejected */
    int grpc_code;                  /* the gRPC code the status maps to, for call counters */
    const char *limiter;            /* what rejected or shed: "rate", "concurrency", "fleet",
                                       "shed"; NULL */
    const char *body;               /* a one-line reason ending in '\n', or NULL */
    size_t body_len;
    const char *content_type;       /* with a body */
    size_t n_headers;               /* sl_levee_header has sl_http_header's layout */
    sl_levee_header headers[SL_PROTECT_MAX_HEADERS];
    int64_t retry_after_ms;
    sl_levee_response levee;        /* the rate decision (holds some header values) */
    char buf[1024];                 /* the other header values and the body */
} sl_protect_response;

/*
 * Decide one /attempt (see the top of this file). `lcfg` and `snap` as for sl_levee_attempt();
 * leases are decided by cfg->engine. The response may point into req (X-Req-Id) and into itself.
 */
void sl_protect_attempt(sl_protect *p, int worker, const sl_levee_config *lcfg,
                        const sl_quota_snap *snap, const sl_protect_attempt_req *req,
                        int64_t now_ms, sl_protect_response *out);
void sl_protect_release(sl_protect *p, int worker, const sl_levee_config *lcfg,
                        const sl_quota_snap *snap, const sl_protect_release_req *req,
                        int64_t now_ms, sl_protect_response *out);

/* ---- Gubernator batches --------------------------------------------------------------------- */

/* Per-call state between begin and end (in the batch's arena; NULL when there is none). */
typedef struct sl_protect_call sl_protect_call;

typedef struct sl_protect_verdict {
    bool shed;               /* answer the whole call UNAVAILABLE (HTTP 503) */
    int64_t retry_after_s;
    char message[200];       /* the reason, for grpc-message / the JSON error */
} sl_protect_verdict;

/*
 * Before the router. `peer`: a GetPeerRateLimits call (this node owns the items; only lease ids are
 * read: the entry node already applied everything else). Returns 0 to go on (items this function
 * answered are marked answered), or 1 when the call is shed: answer it with v->message and
 * UNAVAILABLE, and do not call sl_protect_batch_end().
 */
int sl_protect_batch_begin(sl_protect *p, int worker, sl_batch *b, bool peer, int64_t now_ms,
                           sl_protect_call **call, sl_protect_verdict *v);
/* After the router, before encoding. `call` from begin (may be NULL). */
void sl_protect_batch_end(sl_protect *p, int worker, sl_protect_call *call, sl_batch *b,
                          bool peer, int64_t now_ms);

/* ---- admin ---------------------------------------------------------------------------------- */

#define SL_PROTECT_ADMIN_PATH "/v1/admin/killswitch"

typedef struct sl_protect_admin_response {
    int status;
    const char *content_type;
    char *body;              /* malloc'd; free() it */
    size_t body_len;
} sl_protect_admin_response;

/*
 * GET: the switchboard as JSON (switches, concurrency limits, fleet, each worker's shed level).
 * POST {"name": "N", "on": true|false} or {"name": "N", "mode": "on"|"shadow"|"off"}: override the
 * switch N on this node ("*" = every limiter); answers the switch as JSON. 400 with a JSON error
 * for a bad body, 405 for another method, 503 without a switchboard.
 */
void sl_protect_admin(sl_protect *p, const char *method, const uint8_t *body, size_t len,
                      sl_protect_admin_response *out);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsluice client: ask a sluiced (or any Gubernator v2 / Levee-compatible server) for decisions.
 *
 * One sl_client talks to one address over HTTP/2: cleartext (prior knowledge), or TLS with ALPN
 * h2 when sl_client_options.tls (or any tls_* file, or an "https://" address) asks for it:
 *   - sl_client_check()   gRPC /pb.gubernator.V1/GetRateLimits, one or many items per call;
 *   - sl_client_health()  gRPC /pb.gubernator.V1/HealthCheck (and sl_client_live(): LiveCheck);
 *   - sl_client_attempt() Levee's POST /attempt (X-Resource, X-Prefix, X-Method, X-Req-Id);
 *   - sl_client_acquire() / sl_client_release()  concurrency leases (POST /attempt with
 *     X-Concurrency: acquire -> X-Lease-Id; POST /release with X-Lease-Id).
 * Over gRPC a lease is an item with algorithm SL_CONCURRENCY: hits 1 acquires (the answer's
 * metadata "lease_id" names the lease), hits -1 with item metadata "lease_id" releases. Priority is
 * the X-Priority header for Levee calls and item metadata "priority" over gRPC.
 *
 * Shed is not failure. A call sluiced refuses to protect the service it guards (its fleet or worker
 * shedder) is a decision, a 503-class "back off", never failed open: a Levee attempt is then
 * SL_ATTEMPT_REJECTED with `shed` set; a Gubernator call shed whole (grpc-status UNAVAILABLE with
 * the trailer "sluice-shed") answers every item OVER_LIMIT with metadata "shed" and "reason", and
 * an item the fleet shedder refused carries metadata "shed" = "fleet" from the server itself;
 * either way the reply's `shed` is set. An UNAVAILABLE without that trailer did not come from
 * sluiced's shedders (a proxy, a dying server) and falls under the failure policy below.
 *
 * Failure policy. A rate limiter must not take its callers down with it: when a call fails (connect
 * refused or in backoff, timeout, reset, malformed answer, server error status), the client by
 * default FAILS OPEN: it answers "allowed" (UNDER_LIMIT items, an accepted attempt) with
 * `failed_open` set and the cause in `err`, returns 0, and counts it (sl_client_stats.failed_open).
 * With sl_client_options.fail_closed it answers "denied" (OVER_LIMIT items with an error, a
 * rejected attempt), returns the negative errno, and counts failed_closed. Either way the answer is
 * usable as is: code that ignores the return value still does the configured thing.
 *
 * TLS. The server's certificate is verified by default: it must chain to tls_ca_file (else to
 * the system's trust store) and carry the name tls_server_name (else the host of the address: a
 * DNS name, or an IP address matched against the certificate's IP subjectAltNames). With
 * tls_cert_file / tls_key_file the client shows a certificate to servers that ask for one (sluiced
 * --tls-client-auth). A handshake that fails (wrong CA, expired certificate, name mismatch, our
 * certificate refused or missing) fails the call like an unreachable server, -EKEYREJECTED, under
 * the failure policy and the reconnect backoff; sl_client_stats.tls_failures counts them and
 * sl_client_tls_error() says why. It is never "shed".
 *
 * Every call has a timeout (timeout_ms <= 0 takes the client's default). Each call either gets an
 * answer or fails at its deadline; nothing is retried behind the caller's back. A server that hangs
 * (accepts, never answers) would cost every call its whole timeout: a circuit breaker counts
 * consecutive timeouts and, once open, fails calls at once (-EHOSTDOWN, under the failure policy)
 * for a cool-down, then lets one probe through (sl_client_options.breaker_*).
 *
 * Synchronous calls do their I/O on the calling thread over a connection taken from a small pool
 * (one caller per connection at a time, so concurrent callers never queue behind each other's
 * round trip). Asynchronous calls (*_async) return at once; their callback runs later, exactly once,
 * on the client's own I/O thread (started by the first async call), which multiplexes every async
 * call onto one HTTP/2 connection. A callback must not block for long (it delays the other async
 * calls) and must not call sl_client_free(); it may start further calls.
 *
 * Thread safety: every function may be called from any number of threads on one client, except
 * sl_client_free(), which must be the last call and not run concurrently with any other.
 *
 * Errors are negative errno values: -EINVAL (bad argument), -E2BIG (too many items), -ENOMEM,
 * -ETIMEDOUT, -ECONNREFUSED / -ECONNRESET / -EPIPE / ... (transport), -EKEYREJECTED (TLS failed), -EPROTO (malformed answer or an
 * unexpected status), -EHOSTDOWN (the circuit breaker is open), -EAGAIN (async queue full: the callback will not be called), -ECANCELED (the
 * client was freed while the call was pending).
 */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/types.h"
#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_CLIENT_DEFAULT_PORT 5454
#define SL_CLIENT_MAX_ITEMS 1000   /* items per check call (Gubernator's batch limit) */

typedef struct sl_client sl_client;

typedef struct sl_client_options {
    int timeout_ms;             /* default per-call timeout (200) */
    int connect_timeout_ms;     /* a TCP connect taking longer fails (1000) */
    int reconnect_backoff_ms;   /* after a failed connect, calls fail at once for this long (100) */
    bool fail_closed;           /* false (default): fail open; true: fail closed */
    unsigned max_sync_conns;    /* connections for synchronous calls (8); more callers wait */
    unsigned max_async_pending; /* async calls queued or in flight (4096); more get -EAGAIN */
    size_t max_response_bytes;  /* bigger answers fail the call with -EMSGSIZE (4 MiB) */
    /* Circuit breaker on timeouts: after breaker_timeouts consecutive timeouts (5; < 0 never), calls
     * fail at once with -EHOSTDOWN (under the failure policy, no I/O) for breaker_cooldown_ms
     * (1000); then one call goes through as a probe: an answer closes the breaker, a timeout
     * opens it for another cool-down. HealthCheck and LiveCheck bypass it. */
    int breaker_timeouts;
    int breaker_cooldown_ms;
    /* TLS (see above). The files are read by sl_client_new(): the strings need not outlive it. */
    bool tls;                    /* speak TLS; implied by any tls_* file and an "https://" address */
    const char *tls_ca_file;     /* PEM bundle the server's certificate must chain to; NULL: the
                                    system's trust store */
    const char *tls_cert_file;   /* client certificate (PEM chain), for servers that ask; NULL: none */
    const char *tls_key_file;    /* its private key (PEM) */
    const char *tls_server_name; /* the name the server's certificate must carry (and SNI); NULL:
                                    the host of the address; "": no name check, the CA alone */
} sl_client_options;

SL_EXPORT
void sl_client_options_default(sl_client_options *o);

/* addr: "host:port", "[v6]:port", "host" (port 5454), "http://host:port" or "https://host:port"
 * (TLS). The name is resolved and the TLS files are loaded here, once. Does not connect: the first
 * call does. Returns 0, -EINVAL (a malformed address, or TLS files that do not load), a TLS file's
 * negative errno when it cannot be read (-ENOENT, -EACCES), -EHOSTUNREACH, -ENOMEM. */
SL_EXPORT
int sl_client_new(const char *addr, const sl_client_options *opt, sl_client **out);
/* Pending async calls complete with -ECANCELED (under the failure policy) before this returns. */
SL_EXPORT
void sl_client_free(sl_client *c);

/* ------------------------------------------------------------------ gRPC GetRateLimits */

typedef struct sl_client_kv {
    const char *key;
    const char *value;
} sl_client_kv;

/* One rate limit to ask about, the client's own type (not the engine's request, so that the engine
 * can change its own without changing this library's ABI): the fields of Gubernator's
 * RateLimitReq, plus sluice's extensions. */
typedef struct sl_client_request {
    const char *name;        /* limit name; need not be NUL-terminated (name_len says) */
    size_t name_len;
    const char *unique_key;  /* e.g. an account id */
    size_t unique_key_len;
    int64_t hits;            /* 0 peeks; negative gives back (buckets) */
    int64_t limit;
    int64_t duration;        /* milliseconds, or an sl_gregorian value with DURATION_IS_GREGORIAN */
    int64_t burst;           /* LEAKY_BUCKET: bucket size; GCRA: extra requests admitted at once */
    int64_t created_at;      /* epoch ms the request was made; 0 = now */
    int32_t algorithm;       /* sl_algorithm */
    int32_t behavior;        /* OR of sl_behavior */
    int32_t sub_windows;     /* SLIDING_WINDOW: sub-windows per window (> 1 sent as metadata) */
    uint64_t lease_id;       /* CONCURRENCY: the lease a release (hits -1) or renewal (hits 0) names */
    int64_t max_delay_ms;    /* GCRA: how long the caller will wait for a delayed admission (ms) */
} sl_client_request;

/* The server's answer to one item, the client's own type (as sl_client_request). */
typedef struct sl_client_response {
    int32_t status;          /* sl_status */
    int64_t limit;
    int64_t remaining;
    int64_t reset_time;      /* epoch ms when the limit is fully available again */
    int64_t retry_after;     /* ms until this request could pass; 0 when admitted */
    const char *error;       /* NULL, or the item's error */
    uint64_t lease_id;       /* CONCURRENCY: the lease an admitted acquire took; else 0 */
    int64_t delay_ms;        /* GCRA with max_delay_ms: wait this long before going; 0 = now */
} sl_client_response;

typedef struct sl_client_item {
    /* name, unique_key, hits, limit, duration, algorithm, behavior, burst, created_at as on the wire;
     * sub_windows > 1 is sent as metadata "sub_windows". */
    sl_client_request req;
    const sl_client_kv *metadata; /* extra RateLimitReq.metadata entries (e.g. priority, lease_id) */
    size_t metadata_count;
} sl_client_item;

typedef struct sl_client_result {
    /* status, limit, remaining, reset_time (epoch ms) and error as the server sent them.
     * retry_after is 0: Gubernator's answer has none (reset_time says when). error points into the
     * reply and lives as long as it does. */
    sl_client_response resp;
    const sl_client_kv *metadata; /* RateLimitResp.metadata, e.g. "owner", "lease_id", "shed" */
    size_t metadata_count;
} sl_client_result;

/* The value of metadata `key` of a result ("shed": "fleet" | "worker" when a shedder refused the
 * item), or NULL. */
SL_EXPORT
const char *sl_client_result_meta(const sl_client_result *r, const char *key);

typedef struct sl_client_check_reply {
    int err;              /* 0, or why the call failed (the items below are then synthesized) */
    bool failed_open;     /* the call failed and the items say UNDER_LIMIT because of the policy */
    bool shed;            /* sluiced shed the call or an item of it: not a failure, not failed open */
    int http_status;      /* :status of the answer, 0 if none */
    int grpc_status;      /* grpc-status, -1 if none arrived */
    const char *grpc_message; /* grpc-message (percent-decoded), or NULL */
    size_t count;         /* == the number of items asked */
    sl_client_result *items;
    void *priv_;          /* storage: release with sl_client_check_reply_free() */
} sl_client_check_reply;

SL_EXPORT
void sl_client_check_reply_free(sl_client_check_reply *r);

/* Decide n items (1..SL_CLIENT_MAX_ITEMS) in one GetRateLimits call. Fills *out in every case but
 * argument errors (-EINVAL, -E2BIG, -ENOMEM: *out is then empty); free it with
 * sl_client_check_reply_free(). Returns 0 with answers (real, or failed open) or, failing closed,
 * the negative errno with OVER_LIMIT items. */
SL_EXPORT
int sl_client_check(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                    sl_client_check_reply *out);

/* `reply` belongs to the client and is freed when the callback returns; to keep it, copy the struct
 * and zero *reply (sl_client_check_reply_free() on a zeroed reply does nothing). */
typedef void (*sl_client_check_cb)(void *ud, int rc, sl_client_check_reply *reply);
/* 0: cb will be called exactly once with what sl_client_check() would return. Negative: it won't. */
SL_EXPORT
int sl_client_check_async(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                          sl_client_check_cb cb, void *ud);

/* ------------------------------------------------------------------ gRPC HealthCheck / LiveCheck */

typedef struct sl_health_reply {
    int err;            /* 0 or the transport/protocol failure */
    bool healthy;       /* status == "healthy" and gRPC OK */
    int grpc_status;    /* -1 if none */
    char status[32];    /* "healthy" / "unhealthy" */
    char message[512];  /* why (HealthCheckResp.message or grpc-message), truncated */
    int32_t peer_count;
    char advertise_address[128];
} sl_health_reply;

/* Health has no failure policy: it reports. 0 when the server answered (healthy or not; see
 * out->healthy), negative errno when it could not be asked (out->err says the same). */
SL_EXPORT
int sl_client_health(sl_client *c, int timeout_ms, sl_health_reply *out);
typedef void (*sl_client_health_cb)(void *ud, int rc, const sl_health_reply *reply);
SL_EXPORT
int sl_client_health_async(sl_client *c, int timeout_ms, sl_client_health_cb cb, void *ud);
/* LiveCheck: 0 when the process answered, else negative errno. */
SL_EXPORT
int sl_client_live(sl_client *c, int timeout_ms);

/* ------------------------------------------------------------------ Levee /attempt, leases */

typedef struct sl_attempt {
    const char *resource; /* X-Resource, required */
    const char *prefix;   /* X-Prefix, optional */
    const char *method;   /* X-Method, optional */
    const char *req_id;   /* X-Req-Id, optional */
    const char *priority; /* X-Priority: "critical" | "post" | "get" | "test", optional */
} sl_attempt;

typedef enum sl_attempt_outcome {
    SL_ATTEMPT_ACCEPTED = 0, /* 200 */
    SL_ATTEMPT_REJECTED = 1, /* 429, or 503 with a RateLimit field (sluice shedding load) */
    SL_ATTEMPT_FAILED = 2,   /* anything else: 500, 400, no answer */
} sl_attempt_outcome;

typedef struct sl_attempt_reply {
    sl_attempt_outcome outcome; /* what the server said (FAILED if it said nothing useful) */
    bool allowed;               /* the decision to act on, after the failure policy */
    bool failed_open;           /* outcome FAILED and allowed because of the policy */
    bool shed;                  /* REJECTED by a shedder (503 with a RateLimit field): back off */
    int err;                    /* 0, or the failure (-ETIMEDOUT, -ECONNREFUSED, -EPROTO, ...) */
    int http_status;            /* 0 if no answer */
    int64_t retry_after_ms;     /* Retry-After, -1 if absent */
    /* IETF RateLimit / RateLimit-Policy fields (either draft syntax: "limit=10, remaining=3,
     * reset=5" or "\"p\";r=3;t=5" with policy "\"p\";q=10;w=1"), or the older RateLimit-Limit /
     * -Remaining / -Reset headers; -1 when absent. */
    int64_t rl_limit, rl_remaining, rl_reset_s, rl_window_s;
    char ratelimit[256];        /* raw RateLimit header (truncated), "" if absent */
    char ratelimit_policy[256]; /* raw RateLimit-Policy header */
    char lease_id[128];         /* X-Lease-Id (acquire) */
    char message[256];          /* response body on REJECTED or FAILED (sluice's text), truncated */
} sl_attempt_reply;

/* POST /attempt. Returns 0 with a decision in out->allowed, or, failing closed, the negative errno
 * with allowed = false; -EINVAL for a missing resource or a header value with control bytes. */
SL_EXPORT
int sl_client_attempt(sl_client *c, const sl_attempt *a, int timeout_ms, sl_attempt_reply *out);
/* Like attempt, with X-Concurrency: acquire; when allowed, out->lease_id names the lease (empty if
 * the call failed open: there is nothing to release). */
SL_EXPORT
int sl_client_acquire(sl_client *c, const sl_attempt *a, int timeout_ms, sl_attempt_reply *out);
/* POST /release with X-Lease-Id (a: optional resource headers). No failure policy: 0 when the server
 * took it (2xx), -ENOENT for 404, else negative errno. An empty lease id returns 0 at once. */
SL_EXPORT
int sl_client_release(sl_client *c, const sl_attempt *a, const char *lease_id, int timeout_ms,
                      sl_attempt_reply *out);

/* POST /attempt with X-Concurrency: renew and X-Lease-Id (a: X-Resource when the id does not carry
 * the resource): the lease now expires `duration` after this call. No failure policy: 0 renewed,
 * -ENOENT unknown or expired (the slot is gone), else negative errno. */
SL_EXPORT
int sl_client_renew(sl_client *c, const sl_attempt *a, const char *lease_id, int timeout_ms,
                    sl_attempt_reply *out);

typedef void (*sl_client_attempt_cb)(void *ud, int rc, const sl_attempt_reply *reply);
SL_EXPORT
int sl_client_attempt_async(sl_client *c, const sl_attempt *a, int timeout_ms,
                            sl_client_attempt_cb cb, void *ud);
SL_EXPORT
int sl_client_acquire_async(sl_client *c, const sl_attempt *a, int timeout_ms,
                            sl_client_attempt_cb cb, void *ud);
SL_EXPORT
int sl_client_release_async(sl_client *c, const sl_attempt *a, const char *lease_id,
                            int timeout_ms, sl_client_attempt_cb cb, void *ud);

SL_EXPORT
int sl_client_renew_async(sl_client *c, const sl_attempt *a, const char *lease_id, int timeout_ms,
                          sl_client_attempt_cb cb, void *ud);

/* ------------------------------------------------------------------ lease renewer */

/* Keeps held leases alive for work that runs longer than their duration: each lease added is
 * renewed in the background every duration / 2 (a renewal that gets no answer is retried after
 * duration / 8), until it is released or stopped here. A Levee lease is renewed with
 * sl_client_renew_async, a Gubernator CONCURRENCY lease with a check of the same item with hits 0
 * and metadata lease_id. The renewer has one thread of its own that only schedules; the calls run
 * on the client's async I/O thread. A lease the server answers "not found" (released elsewhere,
 * expired before a renewal got through) is lost: no longer renewed, reported by
 * sl_client_renewer_status. At most max_leases are held at once. Free the renewer before its
 * client; freeing does not release the leases (they run out after their duration). */
typedef struct sl_client_renewer sl_client_renewer;

typedef struct sl_client_renewer_options {
    unsigned max_leases; /* leases renewed at once (1024, at most 65536); more: -ENOSPC */
    int timeout_ms;      /* each renewal's timeout (0: the client's default) */
} sl_client_renewer_options;

SL_EXPORT
void sl_client_renewer_options_default(sl_client_renewer_options *o);
/* 0, -EINVAL, -ENOMEM, -EAGAIN (no thread). */
SL_EXPORT
int sl_client_renewer_new(sl_client *c, const sl_client_renewer_options *o,
                          sl_client_renewer **out);
SL_EXPORT
void sl_client_renewer_free(sl_client_renewer *r);

/* Renew a Levee lease (from sl_client_acquire: reply.lease_id) of duration_ms; a: the attempt it
 * was taken with (X-Resource is sent; the other fields are not needed). *handle names it here.
 * 0, -EINVAL (empty id, duration < 2 ms), -ENOSPC, -ENOMEM. */
SL_EXPORT
int sl_client_renewer_add_levee(sl_client_renewer *r, const sl_attempt *a, const char *lease_id,
                                int64_t duration_ms, uint64_t *handle);
/* Renew a Gubernator CONCURRENCY lease: item as acquired (name, unique_key, limit, duration;
 * hits is sent as 0), lease_id from the answer's metadata. Same returns. */
SL_EXPORT
int sl_client_renewer_add_item(sl_client_renewer *r, const sl_client_item *item,
                               const char *lease_id, uint64_t *handle);
/* Stop renewing (a renewal already out still lands). 0, or -ENOENT for an unknown handle. */
SL_EXPORT
int sl_client_renewer_stop(sl_client_renewer *r, uint64_t handle);
/* Stop renewing and give the lease back (sl_client_release, or a check with hits -1): 0, -ENOENT
 * (unknown handle, or the server no longer knew the lease), or the release's error. */
SL_EXPORT
int sl_client_renewer_release(sl_client_renewer *r, uint64_t handle, int timeout_ms);

typedef struct sl_client_lease_status {
    bool lost;         /* the server answered "not found": the slot is gone, not renewed any more */
    uint64_t renewals; /* renewals the server confirmed */
    uint64_t failures; /* renewals that got no answer (retried) */
} sl_client_lease_status;

/* 0, or -ENOENT for an unknown handle. */
SL_EXPORT
int sl_client_renewer_status(sl_client_renewer *r, uint64_t handle, sl_client_lease_status *out);
/* Leases renewed now (held or lost, not yet stopped or released). */
SL_EXPORT
size_t sl_client_renewer_count(sl_client_renewer *r);

/* ------------------------------------------------------------------ stats */

typedef struct sl_client_stats {
    uint64_t calls;            /* calls started (sync + async) */
    uint64_t failed_open;      /* calls that failed and were answered "allowed" */
    uint64_t failed_closed;    /* calls that failed and were answered "denied" */
    uint64_t timeouts;         /* calls that failed at their deadline */
    uint64_t transport_errors; /* calls that failed otherwise (connect, reset, protocol, status) */
    uint64_t connects;         /* TCP connections established */
    uint64_t connect_failures; /* TCP connects that failed or timed out */
    uint64_t async_pending;    /* async calls queued or in flight now */
    uint64_t async_rejected;   /* async calls refused with -EAGAIN */
    uint64_t breaker_trips;    /* times the breaker opened (re-opens after a failed probe count) */
    uint64_t breaker_rejected; /* calls failed at once because the breaker was open */
    uint64_t breaker_probes;   /* half-open probes sent */
    uint64_t shed;             /* calls sluiced answered "shed" (whole, or one item or more) */
    bool breaker_open;         /* the breaker is open or half-open now */
    uint64_t tls_failures;     /* TLS handshakes that failed (also in connect_failures) */
} sl_client_stats;

SL_EXPORT
void sl_client_stats_get(sl_client *c, sl_client_stats *out);
/* OpenSSL's reason for the last failed TLS handshake ("certificate verify failed", ...), "" if
 * none failed. Static text: valid for the process's life. */
SL_EXPORT
const char *sl_client_tls_error(sl_client *c);

/* ------------------------------------------------------------------ retry helpers */

/* For code calling an API that sluice protects (docs/protection.md "Clients: reacting to 429 and
 * 503"). Pure: the caller keeps the random state (any seed; 0 is replaced) and does the sleeping. */

/* Next xorshift64 value of *state. */
SL_EXPORT
uint64_t sl_client_rand_next(uint64_t *state);
/* Capped exponential backoff with full jitter: uniform in [0, min(cap_ms, base_ms * 2^attempt)]
 * (attempt counts from 0). 0 when base_ms or cap_ms <= 0. */
SL_EXPORT
int64_t sl_client_backoff_ms(unsigned attempt, int64_t base_ms, int64_t cap_ms, uint64_t *rng);
/* How long to wait before retrying after reply r (attempt counts from 0): -1 when not to retry
 * (accepted, or a 4xx other than 408/429: the request itself is wrong); with a Retry-After, that
 * plus up to a quarter of the backoff as jitter (never sooner than the server asked); else the
 * backoff. A 503 (sluice shedding load) is retried like a 429, later, never treated as "allowed". */
SL_EXPORT
int64_t sl_client_retry_delay_ms(const sl_attempt_reply *r, unsigned attempt, int64_t base_ms,
                                 int64_t cap_ms, uint64_t *rng);

/* Parse one response header into an attempt reply (used by the client and by the CLI's HTTP/1.1
 * path): Retry-After, RateLimit, RateLimit-Policy, RateLimit-Limit/-Remaining/-Reset, X-Lease-Id.
 * Names compare case-insensitively; other headers are ignored. */
SL_EXPORT
void sl_attempt_reply_header(sl_attempt_reply *r, const char *name, size_t name_len,
                             const char *value, size_t value_len);
/* Reset *r to "no answer yet" (all header fields absent). */
SL_EXPORT
void sl_attempt_reply_init(sl_attempt_reply *r);

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The call record, shared by the client's modules (internal; not installed).
 *
 * Every call of include/sluice/client.h, sync or async, becomes one `call`: an HTTP/2 request
 * (path, headers, body: built by the protocol module, bytes owned by the call) plus what is needed
 * to turn any outcome into a typed reply — the response, or only an errno when the transport
 * failed, in which case the failure policy synthesizes the answer. sl_call_decode() is that single
 * place, so the sync and async paths cannot disagree about what a failure means.
 *
 * Who does what:
 *   client.c     the public API: options, client lifecycle, stats, one function per call
 *   call.c       this record's lifecycle: new, free, decode (dispatch by kind), deliver (async)
 *   gubcall.c    the Gubernator gRPC calls: GetRateLimits / HealthCheck / LiveCheck, encode, decode
 *   leveecall.c  Levee's POST /attempt and /release: headers out, status + RateLimit headers in
 *   clientio.c   the I/O: the connection pool (sync path) and the async I/O thread
 *   breaker.c    the circuit breaker on timeouts (pure; client.c locks it, call.c feeds it)
 *   backoff.c    the public retry/backoff-with-jitter helpers (pure)
 *   renewsched.c when to renew which held lease (pure)
 *   renewer.c    the public lease renewer: renews held leases in the background
 * The sl_client record is here too: each module reads the options and bumps the counters; only
 * clientio.c touches the pool and queue fields.
 */
#ifndef SLUICE_CLIENT_CALL_H
#define SLUICE_CLIENT_CALL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "client/breaker.h"
#include "client/h2conn.h"
#include "sluice/client.h"

typedef enum { K_CHECK, K_HEALTH, K_LIVE, K_ATTEMPT, K_ACQUIRE, K_RELEASE, K_RENEW } sl_call_kind;

typedef struct sl_call {
    struct sl_call *next;
    sl_client *c;
    sl_call_kind kind;
    int64_t deadline_ns;
    int timeout_ms;
    const char *path;
    sl_h2c_field hdrs[10];
    size_t nhdrs;
    char grpc_timeout[16];
    sl_buf body;        /* the request body, until a connection takes it */
    char *strs;         /* copies of header values */
    int64_t *limits;    /* check: each item's limit, for synthesized answers */
    size_t nitems;
    /* completion */
    bool async;
    bool gated;         /* went through the breaker: its outcome is recorded there */
    union {
        sl_client_check_cb check;
        sl_client_health_cb health;
        sl_client_attempt_cb attempt;
    } cb;
    void *ud;
    int rc;
    union {
        sl_client_check_reply check;
        sl_health_reply health;
        sl_attempt_reply attempt;
    } r;
} sl_call;

struct sl_client {
    sl_client_options opt;
    sl_h2conn_target target;

    /* clientio.c: the sync pool */
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    sl_h2conn **idle;
    size_t nidle;
    unsigned nconns;

    /* clientio.c: the async queue and its I/O thread */
    pthread_mutex_t q_mu;
    bool io_started, stopping;
    pthread_t io;
    int wake_fd;
    sl_call *q_head, *q_tail;

    /* breaker.c's state machine, under brk_mu (client.c) */
    pthread_mutex_t brk_mu;
    sl_breaker brk;
    _Atomic uint64_t breaker_rejected, breaker_probes;

    _Atomic uint64_t calls, failed_open, failed_closed, timeouts, transport_errors;
    _Atomic uint64_t async_pending, async_rejected;
    _Atomic uint64_t shed; /* calls sluiced answered "shed" (gubcall.c, leveecall.c) */
};

/* A call of this kind with the client's default timeout when timeout_ms <= 0. NULL: -ENOMEM. */
sl_call *sl_call_new(sl_client *c, sl_call_kind kind, int timeout_ms);
void sl_call_free(sl_call *k);

/* Add a request header (name and value must outlive the call: literals or k->strs). */
void sl_call_add_hdr(sl_call *k, const char *name, const char *value, size_t vlen);

/* Turn the outcome (a response, or err when there is none) into the typed reply and k->rc. */
void sl_call_decode(sl_call *k, const sl_h2c_resp *resp, int err);
/* Async: deliver to the callback and free the call. */
void sl_call_deliver(sl_call *k);

/* Ask the breaker whether call k may start now (health/live calls always may). false: it is open;
 * the caller decodes the call with -EHOSTDOWN. */
bool sl_call_gate(sl_call *k);

/* Count a failed call as a timeout or a transport error. */
void sl_call_count_failure(sl_client *c, int err);
/* Copy n bytes of src into dst (cap bytes), truncated and NUL-terminated. */
void sl_call_copy_trunc(char *dst, size_t cap, const void *src, size_t n);
/* Leading non-negative integer of a header value [s, s+n) (spaces, tabs, quotes skipped); -1 if
 * none or it overflows. */
int64_t sl_call_header_int(const char *s, size_t n);

#endif

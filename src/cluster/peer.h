/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_peer: an asynchronous gRPC client for one peer address on one libuv loop - how a node talks
 * PeersV1 to the others. One persistent cleartext HTTP/2 connection (prior knowledge, h2c) carries
 * every call as its own stream; the sans-I/O session h2client/h2client.h does the protocol and the
 * deadlines, this module moves bytes between it and a non-blocking socket (written with
 * MSG_NOSIGNAL: the process's SIGPIPE disposition is left alone), frames messages and reconnects.
 *
 * Calls are unary: sl_peer_call() sends one framed request message and later runs the callback
 * exactly once, on the loop thread, with the response message, a gRPC error status, or a
 * transport error: -ETIMEDOUT (the call's deadline passed: its stream is reset), -ECONNRESET (the
 * connection broke), -ECONNREFUSED (it could not be made, or the peer refused the stream),
 * -EPROTO (not a gRPC answer), -EMSGSIZE (answer over max_msg), -ECANCELED (sl_peer_close()).
 *
 * Connection failure costs callers nothing: after a failed connect, calls fail at once (the call
 * returns the error, the callback is not run) until a backoff has passed, doubling from
 * backoff_min to backoff_max while connects keep failing; the next call after it tries again. A
 * connection that worked and then broke is replaced by the next call at once. A GOAWAY from the
 * peer lets the old connection finish its streams while new calls open a new one.
 *
 * Callbacks never run from inside sl_peer_call(); they may call sl_peer_call() and sl_peer_close()
 * themselves. Not thread-safe: one peer object belongs to one loop thread.
 */
#ifndef SLUICE_CLUSTER_PEER_H
#define SLUICE_CLUSTER_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "h2client/h2client.h"
#include "tls/tls.h"

typedef struct sl_peer sl_peer;

typedef struct sl_peer_config {
    uv_loop_t *loop;
    const char *addr;            /* "host:port" or "[v6]:port"; names are resolved (async) */
    int64_t connect_timeout_ms;  /* 0 = 1000 */
    int64_t backoff_min_ms;      /* 0 = 50 */
    int64_t backoff_max_ms;      /* 0 = 1000 */
    size_t max_msg;              /* largest response message; 0 = 4 MiB */
    size_t max_abandoned;        /* timed-out streams the peer has not closed yet before the
                                    connection is dropped; 0 = 1024 */
    sl_tls_slot *tls;            /* a client context: TLS (ALPN h2) to the peer, its certificate
                                    checked against the context's CA and its name or IP against the
                                    host of addr; NULL = h2c. Not owned, outlives
                                    the peer; each connection starts under the slot's context of
                                    the moment (a reload changes it for new connections). */
    const char *source_ip;       /* numeric IP the connections come from (the node's advertised
                                    IP, which peers check); NULL or "": the kernel's choice */
    struct sl_peersig *sig;      /* the cluster secret (auth/peersig.h): every sl_peer_call
                                    carries its signature; NULL = none. Not owned, outlives the
                                    peer (a reload changes the secret for the next calls) */
    const char *sender;          /* this node's advertised address, signed with each call
                                    (copied); needed with sig */
} sl_peer_config;

typedef struct sl_peer_result {
    int err;                 /* 0: the call completed (see grpc_status); else a negative errno */
    int grpc_status;         /* sl_grpc_code when err == 0 */
    const char *message;     /* grpc-message, or what went wrong; never NULL */
    const uint8_t *msg;      /* the response message (unframed) when err == 0 and status OK */
    size_t len;
} sl_peer_result;

/* Runs once per accepted call, on the loop thread. The result lives during the call only. */
typedef void (*sl_peer_cb)(void *ud, const sl_peer_result *res);

typedef struct sl_peer_stats {
    uint64_t calls, ok, failed, timeouts;
    uint64_t connects, connect_failures;
} sl_peer_stats;

/* Parse "host:port" / "[v6]:port" into host (without brackets) and port. 0 or -EINVAL. */
int sl_peer_split_addr(const char *addr, char *host, size_t host_size, uint16_t *port);

int sl_peer_new(const sl_peer_config *cfg, sl_peer **out);

/*
 * Start a unary call: POST `path` (e.g. "/pb.gubernator.PeersV1/GetPeerRateLimits") with
 * `framed`, a gRPC-framed request message (wire/grpc_frame.h). The call takes the buffer's memory
 * on success (framed is left empty). Returns 0 (cb will run), or a negative errno without taking
 * the buffer or running cb: the connection is in backoff (the last connect error), the peer is
 * closed (-ECANCELED), -ENOMEM.
 */
int sl_peer_call(sl_peer *p, const char *path, sl_buf *framed, int64_t timeout_ms, sl_peer_cb cb,
                 void *ud);

/*
 * A plain HTTP/2 call on the same connections (how Levee's client-proxy relays POST /attempt):
 * `method` `path` with extra request headers (names lowercase; copied) and `body` (taken on
 * success, may be NULL). The callback gets the answer as it came: HTTP status, headers, body; no
 * gRPC framing or status is looked at. Return values and errors as sl_peer_call().
 */
#define SL_PEER_HTTP_MAX_FIELDS 32 /* response fields kept (the rest are dropped) */
typedef struct sl_peer_http_result {
    int err;                     /* 0, or a negative errno as for sl_peer_call */
    const char *message;         /* what went wrong; never NULL */
    int status;                  /* HTTP status when err == 0 */
    const sl_h2c_field *fields;  /* response headers then trailers, in arrival order */
    size_t nfields;
    const uint8_t *body;
    size_t len;
} sl_peer_http_result;
typedef void (*sl_peer_http_cb)(void *ud, const sl_peer_http_result *res);
int sl_peer_http(sl_peer *p, const char *method, const char *path, const sl_h2c_field *headers,
                 size_t nheaders, sl_buf *body, int64_t timeout_ms, sl_peer_http_cb cb, void *ud);

/* Fail every call in flight with -ECANCELED (their callbacks run before this returns), close the
 * connections, and free the peer once libuv has closed its handles. */
void sl_peer_close(sl_peer *p);

const char *sl_peer_addr(const sl_peer *p);
/* Calls started and not answered yet. */
size_t sl_peer_inflight(const sl_peer *p);
/* True when a connection is open (a call now would not wait for a connect). */
bool sl_peer_connected(const sl_peer *p);
void sl_peer_stats_get(const sl_peer *p, sl_peer_stats *out);

#endif

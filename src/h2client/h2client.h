/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_h2c: one client-side HTTP/2 session, sans I/O — the protocol half of every HTTP/2 client in
 * sluice (the fail-open client's connections, the cluster's peer connections).
 *
 * Bytes the transport read go in through sl_h2c_recv(); frames to write come out of sl_h2c_send()
 * into a buffer the transport writes as its socket takes it. The session never touches a socket,
 * a clock or a thread: time comes in as an argument (sl_h2c_expire), so the same code runs over a
 * poll() loop, a libuv loop, or a test that moves bytes between it and a server session in memory.
 *
 * nghttp2 does the protocol (framing, HPACK, flow control, stream states). This module adds what
 * both clients need on top: each request becomes one completion — `done` runs exactly once with
 * the response (strict 3-digit :status, headers then trailers in arrival order, body) or a
 * negative errno — with caps on what a response may make us hold, deadlines, and the ownership
 * rule that lets a caller give up on a stream early: a stream that timed out is completed at once
 * and reset, but its memory (nghttp2's data provider may still read the request body) stays until
 * nghttp2 closes it; sl_h2c_abandoned() counts those, so a transport can drop a connection whose
 * peer never closes them.
 *
 * Completions are queued while nghttp2 runs and delivered at the end of sl_h2c_recv(),
 * sl_h2c_send(), sl_h2c_expire() and sl_h2c_free(), never from sl_h2c_submit(), so `done` never
 * runs inside nghttp2. `done` may call sl_h2c_submit() on the same session; it must not free it.
 *
 * Errors given to `done`: -ETIMEDOUT (deadline), -ECONNRESET (the peer reset the stream or it
 * ended without a complete answer), -ECONNREFUSED (the peer refused the stream, or the request
 * could not be sent, e.g. after GOAWAY), -EPROTO (malformed :status), -EMSGSIZE (over a cap),
 * -ENOMEM, or whatever the transport passes to sl_h2c_free().
 *
 * Not thread-safe: a session belongs to one thread at a time.
 */
#ifndef SLUICE_H2CLIENT_H2CLIENT_H
#define SLUICE_H2CLIENT_H2CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct sl_h2c_field {
    const char *name;   /* lowercase, as HTTP/2 requires */
    size_t name_len;
    const char *value;
    size_t value_len;
} sl_h2c_field;

typedef struct sl_h2c_config {
    size_t max_body;         /* response body cap; over it the stream fails, -EMSGSIZE. 0 = 4 MiB */
    size_t max_header_bytes; /* response header+trailer bytes cap, same failure. 0 = 64 KiB */
    uint32_t stream_window;  /* our per-stream receive window. 0 = 1 MiB */
    uint32_t conn_window;    /* our connection receive window. 0 = 4 * stream_window */
} sl_h2c_config;

typedef struct sl_h2c_req {
    const char *method;          /* "POST" */
    const char *scheme;          /* NULL = "http" */
    const char *authority;       /* :authority, e.g. "10.0.0.1:1051" */
    const char *path;            /* "/attempt" */
    const sl_h2c_field *headers; /* extra request headers (names lowercase), copied at submit */
    size_t nheaders;
    sl_buf *body;                /* taken at submit (left empty); NULL or empty: no DATA frame */
    int64_t deadline;            /* in the caller's time unit (see sl_h2c_expire); INT64_MAX: none */
    /* A streamed response (e.g. gRPC server streaming): when set, DATA bytes go to on_data as
     * they arrive instead of into the body (no max_body: the callee bounds what it keeps), and
     * `done` still runs once at the end. It runs inside sl_h2c_recv: it must not call sl_h2c_*
     * on this session; a negative errno it returns fails the stream with that error. */
    int (*on_data)(void *ud, const uint8_t *p, size_t n);
} sl_h2c_req;

typedef struct sl_h2c_resp {
    int err;                     /* 0, or negative errno: the stream failed, the rest is partial */
    int status;                  /* :status (100..999), 0 if no valid response headers arrived */
    const sl_h2c_field *fields;  /* response headers, then trailers, in arrival order */
    size_t nfields;
    sl_buf *body;                /* the body; `done` may take its memory (move it, leave it empty) */
} sl_h2c_resp;

/* The response lives during the call only (except a body the callee took). */
typedef void (*sl_h2c_done_fn)(void *ud, const sl_h2c_resp *resp);

typedef struct sl_h2c sl_h2c;

/* A session with the client preface and SETTINGS queued for sending. cfg may be NULL.
 * 0 or -ENOMEM. */
int sl_h2c_new(const sl_h2c_config *cfg, sl_h2c **out);
/* Complete every stream whose `done` has not run with `err` (the connection is gone), then free. */
void sl_h2c_free(sl_h2c *s, int err);

/* Queue a request. 0: `done` runs exactly once, later. Negative errno: `done` never runs and the
 * body was not taken: -EAGAIN (the peer sent GOAWAY: use another connection), -EINVAL, -ENOMEM. */
int sl_h2c_submit(sl_h2c *s, const sl_h2c_req *req, sl_h2c_done_fn done, void *ud);

/* Feed bytes read from the transport. 0, or -EPROTO: the peer broke the protocol and the session
 * is unusable (free it). Runs completions. */
int sl_h2c_recv(sl_h2c *s, const uint8_t *data, size_t len);
/* Append frames to write to `out` until nothing is left or out->len reaches `high_water`.
 * 0, -EPROTO or -ENOMEM (the session is unusable). Runs completions. */
int sl_h2c_send(sl_h2c *s, sl_buf *out, size_t high_water);
/* Complete every stream whose deadline is <= now with -ETIMEDOUT and reset it. Runs completions. */
void sl_h2c_expire(sl_h2c *s, int64_t now);

/* Earliest deadline of a stream whose `done` has not run, INT64_MAX if none. */
int64_t sl_h2c_next_deadline(const sl_h2c *s);
/* sl_h2c_send() has frames to give. */
bool sl_h2c_want_write(const sl_h2c *s);
/* The peer sent GOAWAY: no new stream may start here. */
bool sl_h2c_goaway(const sl_h2c *s);
/* Nothing left to read or write (e.g. GOAWAY and every stream closed): the transport may close. */
bool sl_h2c_over(const sl_h2c *s);
/* Requests submitted whose `done` has not run. */
size_t sl_h2c_pending(const sl_h2c *s);
/* Streams completed early (timed out) that the peer has not closed yet. */
size_t sl_h2c_abandoned(const sl_h2c *s);

/* First field named `name` (lowercase) or NULL. */
const sl_h2c_field *sl_h2c_resp_find(const sl_h2c_resp *r, const char *name);
/* The response's grpc-status: -1 when absent, its value when 1 to 3 ASCII digits, else 2
 * (UNKNOWN, as gRPC says a status that does not parse is). */
int sl_h2c_grpc_status(const sl_h2c_resp *r);
/* Parse an HTTP :status value: exactly three ASCII digits, 100..999. The status or -EPROTO. */
int sl_h2c_parse_status(const uint8_t *v, size_t len);

#endif

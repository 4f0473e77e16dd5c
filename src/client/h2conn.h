/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_h2conn: one client-side HTTP/2 connection (cleartext with prior knowledge, or TLS with ALPN
 * h2) for the sluice client: a non-blocking TCP socket driving one sans-I/O session
 * (h2client/h2client.h), which does the protocol and turns each stream into one completion: `done` is called exactly once per accepted
 * request, with the response (status, headers + trailers, body) or a negative errno (transport
 * failure, -ETIMEDOUT at the request's deadline, -ECANCELED on free).
 *
 * The connection is event-driven so that one thread can multiplex many streams (the client's async
 * I/O thread polls it beside its wake-up fd), and sl_h2conn_roundtrip() wraps the same machinery
 * into a blocking call with a deadline for the synchronous API. A connection that fails is closed
 * and the next submit reconnects, unless the last connect failed less than `backoff_ns` ago: then
 * submits fail at once, so a dead server costs callers nothing instead of a timeout each.
 *
 * With a TLS context on the target, a TLS session (tls/tls.h) sits between the socket and the
 * HTTP/2 session (h2client/h2sock.c moves the bytes, as for the peer client). The connection counts as
 * connecting until the handshake is done: the connect deadline covers it, and a handshake that
 * fails (wrong CA, expired certificate, name mismatch, no client certificate where one is
 * required) is a failed connect, -EKEYREJECTED, with the same backoff as a refused one.
 *
 * Writes use send(MSG_NOSIGNAL): a server that hung up gives EPIPE, never SIGPIPE, whatever the
 * embedding program did with that signal.
 *
 * Not thread-safe: one connection is used by one thread at a time (the client hands pooled
 * connections to one caller at a time). The sl_h2conn_target is shared by every connection to one
 * address and only updated with atomics.
 */
#ifndef SLUICE_CLIENT_H2CONN_H
#define SLUICE_CLIENT_H2CONN_H

#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "h2client/h2client.h"
#include "tls/tls.h"

/* Where to connect and the limits every connection to that place obeys. */
typedef struct sl_h2conn_target {
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char authority[300];        /* :authority sent with every request */
    int64_t connect_timeout_ns; /* a connect taking longer fails the connection (and its streams) */
    int64_t backoff_ns;         /* after a failed connect, refuse to reconnect for this long */
    size_t max_body;            /* response body cap; a larger body fails the stream, -EMSGSIZE */
    size_t max_header_bytes;    /* response header+trailer bytes cap, same failure */
    size_t max_abandoned;       /* timed-out streams the peer has not closed yet, before we hang up */
    sl_tls_ctx *tls;            /* NULL: cleartext; else TLS under it (the target's owner frees it) */
    char server_name[256];      /* TLS: the name the server's certificate must carry ("" none) */
    /* shared state */
    _Atomic int64_t fail_until_ns;   /* sl_mono_ns() before which connects are refused */
    _Atomic int last_connect_err;    /* negative errno of the last failed connect */
    _Atomic uint64_t connects;       /* connections established */
    _Atomic uint64_t connect_failures;
    _Atomic uint64_t tls_failures;        /* handshakes that failed (counted in connect_failures too) */
    const char *_Atomic tls_error;        /* OpenSSL's reason for the last one (static text) */
} sl_h2conn_target;

/* Fill addr/authority from "host:port", "[v6]:port", "host" (default_port), "http://host:port"
 * or "https://host:port" (a scheme is skipped: TLS is on when the tls field is set); server_name gets
 * the host as written (a name or an IP literal); limits get defaults. Resolves host names (blocking getaddrinfo), so call it off hot paths.
 * Returns 0, -EINVAL (malformed) or -EHOSTUNREACH (name does not resolve). */
int sl_h2conn_target_init(sl_h2conn_target *t, const char *addr, uint16_t default_port);

typedef struct sl_h2conn_req {
    const char *method;          /* "POST" */
    const char *path;            /* "/attempt" */
    const sl_h2c_field *headers; /* extra request headers (names lowercase) */
    size_t nheaders;
    sl_buf *body;                /* taken when the submit succeeds; NULL/empty: no body */
    int64_t deadline_ns;         /* sl_mono_ns() time at which the request fails with -ETIMEDOUT */
} sl_h2conn_req;

typedef struct sl_h2conn sl_h2conn;

int sl_h2conn_new(sl_h2conn_target *t, sl_h2conn **out); /* 0 or -ENOMEM; does not connect yet */
void sl_h2conn_free(sl_h2conn *c);                       /* completes every stream, -ECANCELED */

/* Start a request, connecting first if needed. 0: `done` will be called exactly once, from
 * sl_h2conn_process() / sl_h2conn_roundtrip() / sl_h2conn_free(). Negative errno: `done` is never
 * called (-ECONNREFUSED & co. when the connect fails at once or is in backoff, -EAGAIN when the
 * server sent GOAWAY and streams are still draining: use another connection, -ENOMEM, -EINVAL). */
int sl_h2conn_submit(sl_h2conn *c, const sl_h2conn_req *req, sl_h2c_done_fn done, void *ud);

/* What to poll for: p->fd is -1 when the connection is closed. */
void sl_h2conn_pollfd(const sl_h2conn *c, struct pollfd *p);
/* Do the I/O `revents` allows, then fail streams whose deadline is <= now_ns, then run
 * completions. */
void sl_h2conn_process(sl_h2conn *c, short revents, int64_t now_ns);
/* Earliest deadline of a pending stream or connect, INT64_MAX if none. */
int64_t sl_h2conn_next_deadline(const sl_h2conn *c);
/* Requests submitted and not completed yet. */
size_t sl_h2conn_pending(const sl_h2conn *c);
/* True when the connection can take no new stream and has none pending (GOAWAY drained, or
 * closed): the owner may free it. */
bool sl_h2conn_finished(const sl_h2conn *c);
/* Notice, without blocking, a peer that hung up while the connection sat idle in a pool, so the
 * next submit reconnects instead of failing on a dead socket. */
void sl_h2conn_refresh(sl_h2conn *c);

/* Blocking: submit, then poll this connection until `done` has run (at the latest at the request's
 * deadline). Returns sl_h2conn_submit()'s error (done not called) or 0 (done called). */
int sl_h2conn_roundtrip(sl_h2conn *c, const sl_h2conn_req *req, sl_h2c_done_fn done, void *ud);

#endif

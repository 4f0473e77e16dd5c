/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One client connection, sans I/O: bytes in (sl_conn_feed), handler calls, bytes out (the `out`
 * buffer). It sniffs the protocol from the first bytes — the HTTP/2 client preface
 * "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" means HTTP/2 with prior knowledge, anything else HTTP/1.1 —
 * and owns the protocol session (h1.c or h2.c, called through its table: proto.h) from then on.
 * Nothing here knows about sockets, so the same code runs under libuv (server.c), in unit tests
 * and under libFuzzer. On a TLS port the TLS layer (tls.h) sits between the socket and
 * sl_conn_feed: the connection sees plaintext, and the driver seals `out` (ALPN's choice needs no
 * help here: an h2 client sends the preface).
 *
 * The driver's loop:
 *   feed what was read -> write sl_conn_out() -> consume what was written;
 *   when the wake callback fires (an answer arrived outside feed): sl_conn_pump(), then write;
 *   stop reading while !sl_conn_wants_read(); once sl_conn_done() and out is empty, close.
 */
#ifndef SLUICE_NET_CONN_H
#define SLUICE_NET_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net/exchange.h"
#include "base/buf.h"

typedef struct sl_proto sl_proto; /* a protocol session: net/proto.h */

/* What the connection is doing, for the driver's timeouts. */
typedef enum sl_conn_phase {
    SL_CONN_IDLE,    /* between requests, nothing owed: idle timeout */
    SL_CONN_READING, /* part of a request received: read timeout */
    SL_CONN_BUSY,    /* waiting for handlers to answer: no timeout of ours */
    SL_CONN_WRITING, /* answers made, held back by the client (HTTP/2 flow control): write
                        timeout, progress is `produced` */
} sl_conn_phase;

typedef void (*sl_conn_wake_cb)(void *ud);

typedef struct sl_conn {
    sl_http_ctx *ctx;
    sl_buf out;                 /* bytes for the socket; the driver consumes from the front */
    sl_conn_wake_cb wake;
    void *wake_ud;
    struct sockaddr_storage peer;
    bool has_peer;
    bool in_feed;               /* inside feed/pump: answers need no wake */
    bool woken;                 /* wake already requested, not yet pumped */
    bool draining;
    bool fatal;                 /* close without further output handling */
    uint8_t sniff_len;
    char sniff[24];
    uint64_t completed;         /* progress marker for the read timeout: requests completed
                                   (HTTP/2: the oldest one being received) */
    size_t req_bytes;           /* request bytes held by its attached exchanges (net/reqmem.h):
                                   the server closes the largest holders when over the bound */
    int64_t read_since;         /* HTTP/2: when the oldest request still being received began
                                   (ctx clock, ms; 0: none): each stream keeps its own read
                                   deadline, whatever completes on the other streams */
    uint64_t produced;          /* HTTP/2 answer body bytes released by the client's window
                                   (progress marker for the write timeout) */
    const char *peer_identity;  /* TLS: the verified client certificate's name (tls/tls.h), set
                                   by the driver once the handshake is done; NULL otherwise */
    sl_proto *sess;             /* NULL while sniffing, then the h1 or h2 session */
} sl_conn;

/* peer may be NULL. wake may be NULL (then the driver must pump after every answer). */
sl_conn *sl_conn_new(sl_http_ctx *ctx, const struct sockaddr *peer, sl_conn_wake_cb wake,
                     void *wake_ud);
/* Frees; exchanges still owed by handlers are detached (their answers become no-ops). */
void sl_conn_free(sl_conn *c);

/* Process bytes from the client. Returns 0, or a negative errno when the connection must close
 * at once (out of memory); protocol errors are answered in `out` and end with sl_conn_done(). */
int sl_conn_feed(sl_conn *c, const void *data, size_t len);
/* The client closed its sending side. */
void sl_conn_eof(sl_conn *c);
/* Continue work deferred by backpressure or produced by answers outside feed. */
void sl_conn_pump(sl_conn *c);
/* Graceful drain: GOAWAY on HTTP/2, Connection: close on the last HTTP/1.1 answer; the
 * connection ends once what was already received is answered. */
void sl_conn_shutdown(sl_conn *c);

static inline sl_buf *sl_conn_out(sl_conn *c)
{
    return &c->out;
}
/* False while the connection holds enough unanswered input or unwritten output. */
bool sl_conn_wants_read(const sl_conn *c);
/* Work held back by backpressure (input kept unparsed, frames kept in nghttp2) that a pump can
 * move on once `out` has been written. */
bool sl_conn_has_backlog(const sl_conn *c);
/* Nothing more will be produced: close once `out` is written. */
bool sl_conn_done(const sl_conn *c);
sl_conn_phase sl_conn_phase_get(const sl_conn *c);
/* 0 while sniffing, else SL_HTTP_1 / SL_HTTP_2. */
int sl_conn_proto(const sl_conn *c);

/* For h1.c/h2.c: ask the driver to pump soon (no-op inside feed/pump). */
void sl_conn_request_wake(sl_conn *c);

#endif

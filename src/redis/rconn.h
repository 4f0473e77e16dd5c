/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_rconn: one pipelined connection to a Redis server on a libuv loop, plain TCP or TLS
 * (tls/tls.h) - what the Redis store (redis/rstorectl.c) talks to Redis over, in place of hiredis's
 * async context and libuv adapter: Debian 12's hiredis (0.14) has neither TLS nor timeouts, so
 * hiredis stays only the protocol library here (its reply reader, hiredis/read.h, parses what
 * comes back; commands are written in RESP as its redisFormatCommandArgv writes them).
 *
 * Commands are queued with a (callback, priv) pair and answered in order, one reply each.
 * Everything queued on a connection during one loop iteration goes out in one write (a check
 * handle flushes after the I/O phase, an idle handle keeps the loop from sleeping on queued
 * bytes); commands queued before the connection (and its TLS handshake) is up wait for it.
 *
 * Ownership, as with hiredis's async context: after a failed connect (connect callback with a
 * negative errno) or a lost connection (the disconnect callback), the connection frees itself -
 * the caller drops its pointer in that callback. Every command pending then is answered with a
 * NULL reply, exactly once: on a failed connect after the connect callback, on a lost connection
 * before the disconnect callback. sl_rconn_free (by the caller, outside its callbacks or inside
 * one: then deferred to its return) answers the pending commands with NULL replies and calls
 * neither callback. Memory is released once libuv has closed the socket.
 *
 * Bounds: at most out_max bytes of commands waiting to be written (a command that would pass it
 * is refused, -ENOBUFS), and in one reply at most in_max bytes on the wire and at most in_max / 64
 * elements announced by its array headers (64 bytes: what the reader allocates for an element;
 * it allocates an array's table as soon as it reads the header). A reply past either bound
 * closes the connection: -EMSGSIZE to the disconnect callback, counted in sl_rconn_stats. No
 * allocation per command beyond the buffers' growth and what hiredis's reader allocates for a
 * reply.
 *
 * Single-threaded: everything on the loop's thread.
 */
#ifndef SLUICE_REDIS_RCONN_H
#define SLUICE_REDIS_RCONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "tls/tls.h"

typedef struct sl_rconn sl_rconn;

/* A command's answer: reply is a hiredis redisReply (hiredis/hiredis.h), freed after the callback
 * returns; NULL when the connection failed or was freed first. */
typedef void (*sl_rconn_reply_cb)(sl_rconn *c, void *reply, void *priv);
/* Connected (status 0: the TCP connect and, with TLS, the handshake done) or failed (a negative
 * errno: the connection frees itself after the callback). */
typedef void (*sl_rconn_connect_cb)(sl_rconn *c, int status);
/* A connection that was up is lost (a negative errno: -ECONNRESET the server closed, -EMSGSIZE a
 * reply past in_max, -EPROTO a protocol or TLS error, ...); it frees itself after the callback. */
typedef void (*sl_rconn_disconnect_cb)(sl_rconn *c, int status);

/* Counters a connection adds to (optional; shared by the connections of one loop, read from any
 * thread). */
typedef struct sl_rconn_stats {
    _Atomic uint64_t oversized;  /* connections closed for a reply past in_max */
    _Atomic uint64_t tls_failed; /* TLS handshakes or sessions that failed */
    _Atomic uint64_t writes;     /* socket writes started (one per loop iteration at most) */
} sl_rconn_stats;

typedef struct sl_rconn_config {
    uv_loop_t *loop;
    const char *host;           /* an IP address, v4 or v6 (no name resolution) */
    int port;
    sl_tls_ctx *tls;            /* a client context: TLS (the session takes a reference); NULL:
                                   plain TCP, unless tls_slot */
    sl_tls_slot *tls_slot;      /* or TLS under the slot's current context (reloads) */
    const char *server_name;    /* TLS: the name the server's certificate must carry (and the
                                   SNI); NULL: host (an IP matches the certificate's IP SANs) */
    size_t out_max;             /* bytes of commands waiting to be written; 0 = 64 MiB */
    size_t in_max;              /* bytes of one reply, and 64 per element; 0 = 64 MiB */
    sl_rconn_connect_cb on_connect;
    sl_rconn_disconnect_cb on_disconnect;
    void *data;                 /* sl_rconn_data */
    sl_rconn_stats *stats;      /* may be NULL */
} sl_rconn_config;

/* A connection, connecting. 0, or a negative errno (-EINVAL: host is not an IP address; the
 * socket or the TLS session could not be made) with nothing to free. */
int sl_rconn_new(const sl_rconn_config *cfg, sl_rconn **out);
/* Close now: pending commands are answered with NULL replies (see above). NULL is fine. */
void sl_rconn_free(sl_rconn *c);

/* Queue one command (argv[i] of argvlen[i] bytes). 0, or a negative errno and cb is never called:
 * -ENOTCONN the connection failed or is being freed, -ENOBUFS past out_max, -ENOMEM. */
int sl_rconn_command(sl_rconn *c, sl_rconn_reply_cb cb, void *priv, int argc, const char **argv,
                     const size_t *argvlen);

/* The caller's pointer (cfg.data), which it may change (e.g. to NULL before freeing). */
void *sl_rconn_data(const sl_rconn *c);
void sl_rconn_set_data(sl_rconn *c, void *data);
/* Why the connection failed, for a log line ("" while it has not). */
const char *sl_rconn_error(const sl_rconn *c);

/* The RESP encoding of a command (an array of bulk strings) into dst (cap bytes): its length,
 * written only when it fits (call with cap 0 to size it). */
size_t sl_rconn_encode(char *dst, size_t cap, int argc, const char **argv, const size_t *argvlen);

/* The reply reader a connection reads with, apart from the socket (tests/fuzz/fuzz_rconn.c drives
 * it as deliver does): hiredis's reader with its createArray bounded, and the two bounds above —
 * at most in_max bytes on the wire and in_max / 64 announced array elements per reply (in_max 0
 * = 64 MiB). */
typedef struct sl_rconn_reader sl_rconn_reader;
/* 0 or -ENOMEM. */
int sl_rconn_reader_new(size_t in_max, sl_rconn_reader **out);
void sl_rconn_reader_free(sl_rconn_reader *r);
/* Bytes from the server: 0 or -ENOMEM. */
int sl_rconn_reader_feed(sl_rconn_reader *r, const uint8_t *p, size_t n);
/* The next reply: 1 with *reply (a hiredis redisReply; freeReplyObject it), 0 when none is
 * complete yet, -EMSGSIZE a reply past either bound, -EPROTO a protocol error (*why: hiredis's
 * message, valid until the reader is freed). After a negative result the reader is done. */
int sl_rconn_reader_next(sl_rconn_reader *r, void **reply, const char **why);

#endif

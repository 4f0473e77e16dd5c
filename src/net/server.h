/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The listening server: N worker threads, each with its own uv_loop and its own listening socket
 * on the same address (SO_REUSEPORT, so the kernel spreads connections and no lock or handoff is
 * shared between workers). Each worker runs the sans-I/O connections of conn.c over libuv TCP
 * handles: one read buffer per loop, one write per read batch (uv_try_write first, a queued
 * uv_write only for what the socket did not take), TCP_NODELAY, per-connection timeouts kept in
 * per-phase lists ordered by deadline (no timer per connection), graceful drain.
 *
 * Typical use (the daemon):
 *
 *     static void handle(void *ud, sl_exchange *ex) {
 *         const sl_http_request *rq = sl_exchange_request(ex);
 *         if (rq->grpc) sl_exchange_respond_grpc(ex, reply, reply_len, 0, NULL);
 *         else sl_exchange_respond_simple(ex, 200, "application/json", "{}", 2);
 *     }
 *     sl_server_config cfg;
 *     sl_server_config_defaults(&cfg);
 *     cfg.host = "0.0.0.0"; cfg.port = 1050; cfg.workers = 2;
 *     cfg.handler = handle; cfg.handler_ud = app;
 *     sl_server *srv;
 *     int rc = sl_server_start(&srv, &cfg);    // bound and serving when it returns 0
 *     ...                                       // later, from any thread or a signal handler:
 *     sl_server_shutdown(srv, 5000);            // drain, at most 5 s
 *     sl_server_wait(srv);                      // joins the workers
 *     sl_server_free(srv);
 */
#ifndef SLUICE_NET_SERVER_H
#define SLUICE_NET_SERVER_H

#include <stdint.h>
#include <uv.h>

#include "net/exchange.h"
#include "tls/tls.h"

typedef struct sl_server sl_server;

#define SL_SERVER_MAX_UNIX 8

typedef struct sl_server_config {
    const char *host;          /* numeric IPv4/IPv6 address; default "0.0.0.0" */
    uint16_t port;             /* 0: any free port (read it back with sl_server_port) */
    const char *unix_path;     /* non-NULL: a Unix stream socket at this path instead of host and
                                  port (mode 0600; one worker; removed by sl_server_free; see
                                  sl_listener_unix_socket for a file already there) */
    bool exclusive;            /* no SO_REUSEPORT: one worker, and no other socket can join the
                                  port (admin and metrics listeners) */
    const char *const *unix_extra; /* besides host:port, Unix stream sockets at these paths (a
                                  sidecar's port: --listen-unix), polled by every worker; at
                                  most SL_SERVER_MAX_UNIX; removed by sl_server_free */
    size_t n_unix_extra;
    unsigned unix_extra_mode;  /* their files' mode; 0 = 0660 */
    int workers;               /* loops/threads; default 1 */
    int backlog;               /* listen backlog; default 1024 */
    uint32_t max_conns;        /* open connections over all workers; above: accepted and closed.
                                  default 10000 */
    uint32_t idle_timeout_ms;  /* keep-alive connection with nothing owed; default 60000 */
    uint32_t read_timeout_ms;  /* a request (or a new connection's first bytes) must arrive whole
                                  within this; default 30000 */
    uint32_t write_timeout_ms; /* output blocked without progress; default 30000 */
    uint32_t linger_ms;        /* after the last answer: read and drop before closing, so the
                                  client sees the answer rather than a reset; default 2000 */
    uint64_t max_request_memory; /* request bytes buffered over all workers' connections, past
                                  which new requests get 503 / RESOURCE_EXHAUSTED and the
                                  connections holding the most are closed (net/reqmem.h);
                                  0: unbounded (counted only). Default 0; sluiced passes
                                  --max-request-memory */
    sl_http_limits limits;     /* protocol limits (0 fields: defaults) */
    sl_tls_ctx *tls;           /* a server context: every connection speaks TLS (the server takes
                                  its own reference); NULL: plaintext */
    uint32_t tls_handshake_timeout_ms; /* a TLS handshake must complete within this; 10000 */
    sl_http_handler handler;
    void *handler_ud;
    sl_http_early_cb early;    /* optional: gRPC requests the handler takes at their headers */
    /* Optional, run in the worker thread: attach per-loop things (signals, peer clients) before
     * the loop serves, and close them when the worker has drained (the loop ends once every
     * handle on it is closed). */
    void (*on_worker_start)(void *ud, int worker, uv_loop_t *loop);
    void (*on_worker_stop)(void *ud, int worker, uv_loop_t *loop);
    void *hooks_ud;
} sl_server_config;

void sl_server_config_defaults(sl_server_config *cfg);

/* Bind every worker's socket (errors come back here, e.g. -EADDRINUSE) and start the workers.
 * 0 or a negative errno. */
int sl_server_start(sl_server **out, const sl_server_config *cfg);
/* The bound port (useful with port 0). */
uint16_t sl_server_port(const sl_server *srv);
int sl_server_workers(const sl_server *srv);
uv_loop_t *sl_server_loop(sl_server *srv, int worker);

/* Graceful drain, callable from any thread and from a signal handler (atomics and
 * uv_async_send only): stop accepting, GOAWAY on HTTP/2, Connection: close on HTTP/1.1, let
 * exchanges in flight finish, close idle connections; after grace_ms close whatever is left.
 * Repeated calls are harmless (the first deadline holds). */
void sl_server_shutdown(sl_server *srv, uint32_t grace_ms);
/* Join the workers (they end after a shutdown). 0 or a negative errno. */
int sl_server_wait(sl_server *srv);
/* After sl_server_wait. */
void sl_server_free(sl_server *srv);

/* Run fn(ud) on a worker's loop thread, from any thread (how another thread hands an answer
 * back: post, then respond inside fn). 0, -EINVAL, -ENOMEM, or -ESHUTDOWN once the worker ended
 * (fn is then not run: the caller still owns ud). */
int sl_server_post(sl_server *srv, int worker, void (*fn)(void *ud), void *ud);

/* TLS (a server started with cfg.tls): the context for connections accepted from now on, e.g.
 * certificates reloaded on SIGHUP. Connections already open keep theirs (each session holds a
 * reference). Takes its own reference; callable from any thread. -EINVAL on a plaintext server. */
int sl_server_set_tls(sl_server *srv, sl_tls_ctx *ctx);
/* TLS counters summed over workers (zeros on a plaintext server); callable from any thread. */
void sl_server_tls_stats(const sl_server *srv, sl_tls_stats *out);

/* Counters summed over workers; callable from any thread. */
void sl_server_stats(const sl_server *srv, sl_net_stats *out);
/* The bound on buffered request bytes: limit, bytes held now and at peak, requests refused and
 * connections closed for it; callable from any thread. */
void sl_server_reqmem_stats(const sl_server *srv, sl_reqmem_stats *out);

/* The server leaves the process's SIGPIPE disposition alone: it writes with send(MSG_NOSIGNAL),
 * and its worker threads block SIGPIPE for themselves, so a libuv write to a client that hung up
 * fails with EPIPE instead of ending the process (see docs/architecture.md, "SIGPIPE"). */
/* One worker's counters (e.g. to see how SO_REUSEPORT spread the connections). */
void sl_server_worker_stats(const sl_server *srv, int worker, sl_net_stats *out);

#endif

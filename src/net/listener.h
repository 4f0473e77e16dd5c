/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The accepting end of a worker (net/server.c): its listening socket of the SO_REUSEPORT group
 * (made here: libuv 1.44 has no UV_TCP_REUSEPORT), watched with a uv_poll_t and accepted with
 * accept4, so that at the file limit (EMFILE/ENFILE, where libuv's own accept loop retries without
 * end) accepting pauses and a timer with backoff resumes it. Each accepted descriptor (non-blocking,
 * close-on-exec) goes to one callback; the connection is the server's business. Per connection, not
 * per request: nothing here is on the read/write path.
 */
#ifndef SL_NET_LISTENER_H
#define SL_NET_LISTENER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "net/exchange.h"

typedef void (*sl_listener_accept_cb)(void *ud, int fd);

/* Embedded in its owner (a worker); the fields are the module's. */
typedef struct sl_listener {
    uv_poll_t poll;
    uv_timer_t retry;       /* resumes accepting after the file limit was hit */
    uint32_t backoff_ms;
    int fd;                 /* the listening socket; -1 once closed */
    bool stopped;
    sl_http_ctx *ctx;       /* counts the pauses (SL_NET_ACCEPT_PAUSES) */
    sl_listener_accept_cb on_accept;
    void *ud;
} sl_listener;

/* A non-blocking listening socket bound to sa with SO_REUSEADDR and SO_REUSEPORT. fd or -errno. */
int sl_listener_socket(const struct sockaddr *sa, socklen_t len, int backlog);
/* The same, with SO_REUSEPORT only if reuseport: without it no other socket can join the port
 * (the admin and metrics listeners: a same-user process must not receive their connections). */
int sl_listener_socket_ex(const struct sockaddr *sa, socklen_t len, int backlog, bool reuseport);
/* A non-blocking listening Unix stream socket at path, mode 0600 before it accepts anything. A
 * socket file there that no one answers (left by a killed process) is replaced; a live one is
 * -EADDRINUSE; anything else at path -EEXIST (never removed). fd or -errno. */
int sl_listener_unix_socket(const char *path, int backlog);
/* SO_REUSEPORT lets any socket of the same user join the port, so a second server started on a
 * taken port would silently share it. A plain bind first tells whether the port is free: 0 or
 * -errno (-EADDRINUSE). */
int sl_listener_probe_free(const struct sockaddr *sa, socklen_t len);

/* Take fd (from sl_listener_socket) on loop: the poll handle first (on failure no handle is left
 * to close, and fd stays the caller's), then the retry timer. 0 or a libuv error. */
int sl_listener_init(sl_listener *l, uv_loop_t *loop, int fd, sl_http_ctx *ctx,
                     sl_listener_accept_cb on_accept, void *ud);
/* Start accepting. 0 or a libuv error. */
int sl_listener_start(sl_listener *l);
/* Stop accepting for good (drain): closes the poll handle, then the socket. The retry timer
 * stays open (stopped) until sl_listener_close_timer. */
void sl_listener_stop(sl_listener *l);
void sl_listener_close_timer(sl_listener *l);
/* After sl_listener_init, on a loop that is not running: close both handles (the caller runs the
 * loop to finish), then call sl_listener_release_fd. */
void sl_listener_close_handles(sl_listener *l);
/* Close the socket if it is still open (the poll handle must be closed). */
void sl_listener_release_fd(sl_listener *l);

#endif

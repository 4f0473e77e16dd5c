/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_h2sock: the socket half shared by sluice's HTTP/2 clients — the few calls that move bytes
 * between a non-blocking TCP socket and a sans-I/O client session (h2client/h2client.h). Each client
 * brings its own readiness source (poll() in client/h2conn.c, a libuv uv_poll_t in
 * cluster/peer.c); what they do once a socket is ready is the same and lives here once.
 *
 * With TLS, a TLS session (tls/tls.h) sits between the socket and the HTTP/2 session; how its bytes
 * move is also here once (sl_h2sock_tls_read / sl_h2sock_tls_write).
 *
 * Writes use send(MSG_NOSIGNAL): a peer that hung up is EPIPE for that connection, never a SIGPIPE
 * for the process, whatever the embedding program did with the signal.
 */
#ifndef SLUICE_H2CLIENT_H2SOCK_H
#define SLUICE_H2CLIENT_H2SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "h2client/h2client.h"
#include "tls/tls.h"

/* A non-blocking, close-on-exec TCP socket with TCP_NODELAY, connecting to sa. The fd (>= 0)
 * with *now set when the connect completed at once, or a negative errno (nothing to close). */
int sl_h2sock_connect(const struct sockaddr *sa, socklen_t len, bool *now);
/* The same, bound first to the local address src (port 0: any) when src is not NULL and of sa's
 * family: how a peer client makes its connections come from the node's own advertised IP, which
 * the receiving node checks (docs/operations.md, "Peers"). A bind that fails (the IP is not
 * local) leaves the choice to the kernel. */
int sl_h2sock_connect_from(const struct sockaddr *sa, socklen_t len, const struct sockaddr *src,
                           socklen_t srclen, bool *now);
/* After the socket turned writable while connecting: 0 connected, or the connect's negative errno. */
int sl_h2sock_connect_result(int fd);

/* Read what the socket has (at most max_reads reads of cap bytes into buf) into the session.
 * 0: nothing more for now. -ECONNRESET: the peer closed. -EPROTO: the session rejected the
 * bytes. Another negative errno: the socket failed. */
int sl_h2sock_read(sl_h2c *s, int fd, uint8_t *buf, size_t cap, int max_reads);
/* The same reads with what arrives handed to feed(ud, bytes, n) instead of the session (e.g. a
 * TLS layer in front of it, cluster/peer.c): feed's negative errno ends the reads and is
 * returned. 0: nothing more for now; -ECONNRESET: the peer closed; else the socket's error. */
int sl_h2sock_read_to(int fd, uint8_t *buf, size_t cap, int max_reads,
                      int (*feed)(void *ud, const uint8_t *p, size_t n), void *ud);
/* Move the session's frames out: fill `out` up to high_water, send, repeat until the session has
 * nothing left or the socket is full (what it did not take stays in `out`). 0, or a negative
 * errno: the session (-EPROTO, -ENOMEM) or the socket (-EPIPE, -ECONNRESET, ...) failed. */
int sl_h2sock_write(sl_h2c *s, int fd, sl_buf *out, size_t high_water);
/* Send what `out` holds, consuming what the socket took: 0 all of it, -EAGAIN the socket is full,
 * or the socket's negative errno. */
int sl_h2sock_send(int fd, sl_buf *out);

/* The same two moves with a TLS session (tls/tls.h) between the HTTP/2 session and the socket,
 * for every client that speaks TLS (client/h2conn.c, cluster/peer.c).
 *
 * sl_h2sock_tls_read: what the socket has, through the TLS session (which drives the handshake)
 * into the HTTP/2 session; plain (plain_cap bytes) is scratch for the decrypted bytes, and may be
 * buf itself (what was read is copied into the TLS session before anything is decrypted). 0, or
 * -ECONNRESET (the peer closed or sent close_notify), -EKEYREJECTED (TLS failed: handshake,
 * certificate, bad record; sl_tls_failure_get / sl_tls_error say why), -EPROTO (HTTP/2), or the
 * socket's negative errno. Handshake bytes TLS wants to send wait in sl_tls_out(tls): call
 * sl_h2sock_tls_write next.
 *
 * sl_h2sock_tls_write: the session's frames into `plain` (up to high_water), sealed into
 * sl_tls_out(tls) once the handshake is done (before, they wait in `plain`), and sent; nothing
 * more is sealed while high_water bytes of ciphertext wait for the socket. 0 (what the socket did
 * not take stays in sl_tls_out), or a negative errno as sl_h2sock_write. */
int sl_h2sock_tls_read(sl_h2c *s, sl_tls *tls, int fd, uint8_t *buf, size_t cap, uint8_t *plain,
                       size_t plain_cap, int max_reads);
int sl_h2sock_tls_write(sl_h2c *s, sl_tls *tls, int fd, sl_buf *plain, size_t high_water);

#endif

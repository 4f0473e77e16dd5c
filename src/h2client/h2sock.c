/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket calls for the HTTP/2 clients (see h2sock.h): connect, read into the session, write out
 * of it, directly or through a TLS session. Only non-blocking sockets; EINTR is retried, EAGAIN
 * ends a round.
 */
#include "h2client/h2sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

int sl_h2sock_connect(const struct sockaddr *sa, socklen_t len, bool *now)
{
    return sl_h2sock_connect_from(sa, len, NULL, 0, now);
}

int sl_h2sock_connect_from(const struct sockaddr *sa, socklen_t len, const struct sockaddr *src,
                           socklen_t srclen, bool *now)
{
    *now = false;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (src && src->sa_family == sa->sa_family)
        (void)bind(fd, src, srclen); /* not local: the kernel picks, as without src */
    if (connect(fd, sa, len) == 0) {
        *now = true;
    } else if (errno != EINPROGRESS) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int sl_h2sock_connect_result(int fd)
{
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
        return -errno;
    if (soerr)
        return -soerr;
    struct sockaddr_storage peer;
    socklen_t pl = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
        return errno == ENOTCONN ? -EAGAIN : -errno; /* not connected yet */
    return 0;
}

static int feed_session(void *ud, const uint8_t *p, size_t n)
{
    return sl_h2c_recv(ud, p, n) < 0 ? -EPROTO : 0;
}

int sl_h2sock_read(sl_h2c *s, int fd, uint8_t *buf, size_t cap, int max_reads)
{
    return sl_h2sock_read_to(fd, buf, cap, max_reads, feed_session, s);
}

int sl_h2sock_read_to(int fd, uint8_t *buf, size_t cap, int max_reads,
                      int (*feed)(void *ud, const uint8_t *p, size_t n), void *ud)
{
    for (int i = 0; i < max_reads; i++) {
        ssize_t n = recv(fd, buf, cap, 0);
        if (n > 0) {
            int rc = feed(ud, buf, (size_t)n);
            if (rc < 0)
                return rc;
            if ((size_t)n < cap)
                return 0;
            continue;
        }
        if (n == 0)
            return -ECONNRESET;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
    return 0;
}

int sl_h2sock_send(int fd, sl_buf *out)
{
    while (out->len) {
        /* MSG_NOSIGNAL: a peer that hung up is EPIPE here, not a SIGPIPE for the process */
        ssize_t w = send(fd, out->data, out->len, MSG_NOSIGNAL);
        if (w > 0) {
            sl_buf_consume(out, (size_t)w);
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return -EAGAIN;
        return w < 0 ? -errno : -EPIPE;
    }
    return 0;
}

int sl_h2sock_write(sl_h2c *s, int fd, sl_buf *out, size_t high_water)
{
    for (;;) {
        int rc = sl_h2c_send(s, out, high_water);
        if (rc < 0)
            return rc;
        if (out->len == 0)
            return 0;
        rc = sl_h2sock_send(fd, out);
        if (rc < 0)
            return rc == -EAGAIN ? 0 : rc;
    }
}

typedef struct tls_feed_ctx {
    sl_h2c *s;
    sl_tls *tls;
    uint8_t *plain;
    size_t cap;
} tls_feed_ctx;

/* Bytes read, through the TLS session into the HTTP/2 session (sl_h2sock_read_to's feed). */
static int feed_tls(void *ud, const uint8_t *p, size_t n)
{
    tls_feed_ctx *f = ud;
    if (sl_tls_feed(f->tls, p, n) != 0) /* copies p: f->plain may be the same memory */
        return -EKEYREJECTED;
    for (;;) {
        ssize_t m = sl_tls_read(f->tls, f->plain, f->cap);
        if (m == 0)
            return 0;
        if (m < 0)
            return m == -ECONNRESET ? -ECONNRESET : -EKEYREJECTED;
        if (sl_h2c_recv(f->s, f->plain, (size_t)m) < 0)
            return -EPROTO;
    }
}

int sl_h2sock_tls_read(sl_h2c *s, sl_tls *tls, int fd, uint8_t *buf, size_t cap, uint8_t *plain,
                       size_t plain_cap, int max_reads)
{
    tls_feed_ctx f = {.s = s, .tls = tls, .plain = plain, .cap = plain_cap};
    return sl_h2sock_read_to(fd, buf, cap, max_reads, feed_tls, &f);
}

int sl_h2sock_tls_write(sl_h2c *s, sl_tls *tls, int fd, sl_buf *plain, size_t high_water)
{
    sl_buf *o = sl_tls_out(tls);
    for (;;) {
        if (o->len < high_water) {
            int rc = sl_h2c_send(s, plain, high_water);
            if (rc < 0)
                return rc;
            ssize_t k = plain->len ? sl_tls_write(tls, plain->data, plain->len) : 0;
            if (k < 0)
                return (int)k;
            sl_buf_consume(plain, (size_t)k);
        }
        if (!o->len)
            return 0;
        int rc = sl_h2sock_send(fd, o);
        if (rc < 0)
            return rc == -EAGAIN ? 0 : rc;
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One client-side HTTP/2 connection over a non-blocking TCP socket (see h2conn.h).
 *
 * The protocol lives in the sans-I/O session (h2client/h2client.c) and the socket calls in
 * h2client/h2sock.c (reads go to the session, its frames are kept in `out` and written with
 * send(MSG_NOSIGNAL) as the socket takes them); this file adds the connection's life: connect
 * with a deadline and a shared backoff, poll(), and the blocking round trip. The session queues
 * completions and runs them once nghttp2 has returned, so a `done` callback never re-enters it;
 * streams whose peer never closes them after a timeout are bounded by max_abandoned: past it the
 * connection is evidently unhealthy and is dropped.
 *
 * With TLS the connection goes CONNECTING (TCP) -> HANDSHAKE (TLS, still under the connect
 * deadline) -> OPEN; frames the session queues before the handshake is done wait in `out`.
 */
#include "client/h2conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h2client/h2sock.h"
#include "sluice/clock.h"

#define READ_CHUNK 16384
#define READS_PER_PROCESS 64    /* bound the work one readable event may do */
#define OUT_HIGH_WATER 65536    /* stop pulling frames from the session past this many unsent bytes */
#define STREAM_WINDOW (1 << 20) /* big enough for a 1000-item GetRateLimits answer in one go */

typedef enum { H2C_CLOSED, H2C_CONNECTING, H2C_HANDSHAKE, H2C_OPEN } h2c_state;

struct sl_h2conn {
    sl_h2conn_target *t;
    h2c_state state;
    int fd;
    sl_h2c *sess;
    int64_t connect_deadline_ns;
    sl_buf out;   /* frames not sent yet (with TLS: not sealed yet) */
    sl_tls *tls;  /* TLS session, or NULL */
};

/* ---------------------------------------------------------------- target */

int sl_h2conn_target_init(sl_h2conn_target *t, const char *addr, uint16_t default_port)
{
    memset(t, 0, sizeof *t);
    t->connect_timeout_ns = 1000000000LL;
    t->backoff_ns = 0;
    t->max_body = (size_t)4 << 20;
    t->max_header_bytes = 64 << 10;
    t->max_abandoned = 256;
    if (!addr)
        return -EINVAL;
    if (strncmp(addr, "http://", 7) == 0)
        addr += 7;
    else if (strncmp(addr, "https://", 8) == 0)
        addr += 8;
    size_t n = strcspn(addr, "/");
    if (n == 0 || n >= 256)
        return -EINVAL;
    char buf[256];
    memcpy(buf, addr, n);
    buf[n] = 0;

    char *host = buf, *port = NULL;
    bool v6 = false;
    if (buf[0] == '[') {
        char *end = strchr(buf, ']');
        if (!end)
            return -EINVAL;
        *end = 0;
        host = buf + 1;
        v6 = true;
        if (end[1] == ':')
            port = end + 2;
        else if (end[1] != 0)
            return -EINVAL;
    } else {
        char *colon = strchr(buf, ':');
        if (colon && strchr(colon + 1, ':')) {
            v6 = true; /* a bare IPv6 literal: no port */
        } else if (colon) {
            *colon = 0;
            port = colon + 1;
        }
    }
    if (*host == 0)
        host = "127.0.0.1";
    unsigned long p = default_port;
    if (port) {
        char *e;
        errno = 0;
        p = strtoul(port, &e, 10);
        if (*port == 0 || *e != 0 || errno || p == 0 || p > 65535)
            return -EINVAL;
    }
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%lu", p);

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, portstr, &hints, &res) != 0 || !res)
        return -EHOSTUNREACH;
    memcpy(&t->addr, res->ai_addr, res->ai_addrlen);
    t->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    snprintf(t->authority, sizeof t->authority, v6 ? "[%s]:%s" : "%s:%s", host, portstr);
    snprintf(t->server_name, sizeof t->server_name, "%s", host);
    return 0;
}

/* ---------------------------------------------------------------- connection */

static void connect_failed(sl_h2conn *c, int err)
{
    sl_h2conn_target *t = c->t;
    atomic_store(&t->last_connect_err, err);
    atomic_store(&t->fail_until_ns, sl_mono_ns() + t->backoff_ns);
    atomic_fetch_add(&t->connect_failures, 1);
}

static void connected(sl_h2conn *c)
{
    c->state = H2C_OPEN;
    if (c->tls && !sl_tls_ready(c->tls)) {
        c->state = H2C_HANDSHAKE; /* counted connected once the handshake is done */
        return;
    }
    atomic_fetch_add(&c->t->connects, 1);
    atomic_store(&c->t->fail_until_ns, 0);
}

/* Close the socket and session; every stream the caller still waits for completes with err. */
static void teardown(sl_h2conn *c, int err)
{
    sl_h2c *sess = c->sess;
    c->sess = NULL;
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    c->state = H2C_CLOSED;
    sl_buf_reset(&c->out);
    sl_tls_free(c->tls);
    c->tls = NULL;
    sl_h2c_free(sess, err);
}

int sl_h2conn_new(sl_h2conn_target *t, sl_h2conn **out)
{
    sl_h2conn *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->t = t;
    c->fd = -1;
    c->state = H2C_CLOSED;
    sl_buf_init(&c->out, 0);
    *out = c;
    return 0;
}

void sl_h2conn_free(sl_h2conn *c)
{
    if (!c)
        return;
    teardown(c, -ECANCELED);
    sl_buf_free(&c->out);
    free(c);
}

static int conn_start(sl_h2conn *c)
{
    sl_h2conn_target *t = c->t;
    int64_t now = sl_mono_ns();
    if (now < atomic_load(&t->fail_until_ns)) {
        int e = atomic_load(&t->last_connect_err);
        return e ? e : -ECONNREFUSED;
    }
    bool open_now;
    int fd = sl_h2sock_connect((const struct sockaddr *)&t->addr, t->addrlen, &open_now);
    if (fd < 0) {
        connect_failed(c, fd);
        return fd;
    }
    sl_h2c_config hc = {.max_body = t->max_body, .max_header_bytes = t->max_header_bytes,
                        .stream_window = STREAM_WINDOW, .conn_window = 4 * STREAM_WINDOW};
    int rc = sl_h2c_new(&hc, &c->sess);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    if (t->tls) {
        c->tls = sl_tls_new(t->tls, t->server_name[0] ? t->server_name : NULL);
        if (!c->tls || sl_tls_read(c->tls, NULL, 0) < 0) { /* the ClientHello, sent by do_write */
            sl_tls_free(c->tls);
            c->tls = NULL;
            sl_h2c_free(c->sess, -ENOMEM);
            c->sess = NULL;
            close(fd);
            return -ENOMEM;
        }
    }
    c->fd = fd;
    c->connect_deadline_ns = t->connect_timeout_ns > 0 ? now + t->connect_timeout_ns : INT64_MAX;
    c->state = H2C_CONNECTING;
    if (open_now)
        connected(c);
    return 0;
}

int sl_h2conn_submit(sl_h2conn *c, const sl_h2conn_req *req, sl_h2c_done_fn done, void *ud)
{
    if (!req || !req->method || !req->path || !done)
        return -EINVAL;
    if (c->state != H2C_CLOSED &&
        (sl_h2c_goaway(c->sess) || (c->state == H2C_OPEN && sl_h2c_over(c->sess)))) {
        if (sl_h2c_pending(c->sess))
            return -EAGAIN;
        teardown(c, -ECONNRESET); /* only abandoned streams remain: nobody waits for them */
    }
    if (c->state == H2C_CLOSED) {
        int rc = conn_start(c);
        if (rc < 0)
            return rc;
    }
    sl_h2c_req r = {.method = req->method, .authority = c->t->authority, .path = req->path,
                    .headers = req->headers, .nheaders = req->nheaders, .body = req->body,
                    .deadline = req->deadline_ns};
    return sl_h2c_submit(c->sess, &r, done, ud);
}

/* ---------------------------------------------------------------- I/O */

/* TLS failed: a failed connect (backoff), counted, with OpenSSL's reason kept. Also after our
 * side finished the handshake: under TLS 1.3 a server refuses our certificate (or its absence)
 * with an alert that arrives then. */
static void tls_failed(sl_h2conn *c)
{
    sl_h2conn_target *t = c->t;
    atomic_fetch_add(&t->tls_failures, 1);
    atomic_store(&t->tls_error, sl_tls_error(c->tls));
    connect_failed(c, -EKEYREJECTED);
    teardown(c, -EKEYREJECTED);
}

static void do_read(sl_h2conn *c)
{
    uint8_t buf[READ_CHUNK];
    int rc;
    if (c->tls) {
        /* buf serves for the plaintext too: the callers' stacks stay as small as without TLS */
        rc = sl_h2sock_tls_read(c->sess, c->tls, c->fd, buf, sizeof buf, buf, sizeof buf,
                                READS_PER_PROCESS);
        if (rc == -EKEYREJECTED) {
            tls_failed(c);
            return;
        }
        if (c->state == H2C_HANDSHAKE && sl_tls_ready(c->tls))
            connected(c);
    } else {
        rc = sl_h2sock_read(c->sess, c->fd, buf, sizeof buf, READS_PER_PROCESS);
    }
    if (rc < 0) {
        if (c->state == H2C_HANDSHAKE)
            connect_failed(c, rc); /* the server hung up on the handshake */
        teardown(c, rc);
    }
}

static void do_write(sl_h2conn *c)
{
    int rc = c->tls ? sl_h2sock_tls_write(c->sess, c->tls, c->fd, &c->out, OUT_HIGH_WATER)
                    : sl_h2sock_write(c->sess, c->fd, &c->out, OUT_HIGH_WATER);
    if (rc == -EPROTO && c->tls && sl_tls_failure_get(c->tls) != SL_TLS_OK)
        tls_failed(c);
    else if (rc < 0)
        teardown(c, rc);
}

/* Bytes waiting for the socket: frames, and with TLS the sealed records. */
static size_t unsent(const sl_h2conn *c)
{
    return c->out.len + (c->tls ? sl_tls_out(c->tls)->len : 0);
}

static void expire(sl_h2conn *c, int64_t now)
{
    if ((c->state == H2C_CONNECTING || c->state == H2C_HANDSHAKE) &&
        now >= c->connect_deadline_ns) {
        connect_failed(c, -ETIMEDOUT);
        teardown(c, -ETIMEDOUT);
        return;
    }
    if (c->state == H2C_CLOSED)
        return;
    sl_h2c_expire(c->sess, now);
    if (sl_h2c_abandoned(c->sess) > c->t->max_abandoned)
        teardown(c, -ETIMEDOUT);
}

void sl_h2conn_process(sl_h2conn *c, short revents, int64_t now_ns)
{
    if (c->state == H2C_CONNECTING && (revents & (POLLOUT | POLLERR | POLLHUP))) {
        int rc = sl_h2sock_connect_result(c->fd);
        if (rc == 0) {
            connected(c);
        } else if (rc != -EAGAIN) {
            connect_failed(c, rc);
            teardown(c, rc);
        }
    }
    if ((c->state == H2C_OPEN || c->state == H2C_HANDSHAKE) &&
        (revents & (POLLIN | POLLERR | POLLHUP)))
        do_read(c);
    expire(c, now_ns);
    if (c->state == H2C_OPEN || c->state == H2C_HANDSHAKE)
        do_write(c);
    if (c->state == H2C_OPEN && sl_h2c_over(c->sess) && unsent(c) == 0)
        teardown(c, -ECONNRESET); /* the session is over (GOAWAY and nothing left) */
}

void sl_h2conn_pollfd(const sl_h2conn *c, struct pollfd *p)
{
    p->revents = 0;
    p->events = 0;
    p->fd = c->state == H2C_CLOSED ? -1 : c->fd;
    if (c->state == H2C_CONNECTING)
        p->events = POLLOUT;
    else if (c->state == H2C_HANDSHAKE) /* frames wait for the handshake: only its bytes go */
        p->events = POLLIN | (sl_tls_out(c->tls)->len ? POLLOUT : 0);
    else if (c->state == H2C_OPEN)
        p->events = POLLIN | ((unsent(c) || sl_h2c_want_write(c->sess)) ? POLLOUT : 0);
}

int64_t sl_h2conn_next_deadline(const sl_h2conn *c)
{
    if (c->state == H2C_CLOSED)
        return INT64_MAX;
    int64_t dl = sl_h2c_next_deadline(c->sess);
    if ((c->state == H2C_CONNECTING || c->state == H2C_HANDSHAKE) && c->connect_deadline_ns < dl)
        dl = c->connect_deadline_ns;
    return dl;
}

size_t sl_h2conn_pending(const sl_h2conn *c)
{
    return c->sess ? sl_h2c_pending(c->sess) : 0;
}

bool sl_h2conn_finished(const sl_h2conn *c)
{
    return c->state == H2C_CLOSED || (sl_h2c_pending(c->sess) == 0 && sl_h2c_goaway(c->sess));
}

void sl_h2conn_refresh(sl_h2conn *c)
{
    if (c->state != H2C_OPEN)
        return;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0)
        sl_h2conn_process(c, p.revents, sl_mono_ns());
}

typedef struct roundtrip {
    bool fired;
    sl_h2c_done_fn done;
    void *ud;
} roundtrip;

static void roundtrip_done(void *ud, const sl_h2c_resp *r)
{
    roundtrip *rt = ud;
    rt->fired = true;
    rt->done(rt->ud, r);
}

int sl_h2conn_roundtrip(sl_h2conn *c, const sl_h2conn_req *req, sl_h2c_done_fn done, void *ud)
{
    roundtrip rt = {.done = done, .ud = ud};
    int rc = sl_h2conn_submit(c, req, roundtrip_done, &rt);
    if (rc < 0)
        return rc;
    /* Write at once: on an open connection the socket almost always takes the request. */
    sl_h2conn_process(c, 0, sl_mono_ns());
    while (!rt.fired) {
        struct pollfd p;
        sl_h2conn_pollfd(c, &p);
        int64_t now = sl_mono_ns();
        int64_t dl = sl_h2conn_next_deadline(c);
        int tmo;
        if (dl == INT64_MAX)
            tmo = -1;
        else if (dl <= now)
            tmo = 0;
        else
            tmo = (int)((dl - now + 999999) / 1000000); /* round up: never spin before it */
        int n = poll(&p, p.fd >= 0 ? 1 : 0, tmo);
        if (n < 0 && errno != EINTR)
            n = 0;
        sl_h2conn_process(c, n > 0 ? p.revents : 0, sl_mono_ns());
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protocol sniffing and the protocol-independent face of a connection (see conn.h).
 */
#include "net/conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "net/h1.h"
#include "net/h2.h"
#include "net/proto.h"

static const char preface[24] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* Output a connection may buffer: answers already produced must fit (pipelined answers are
 * bounded by h1_max_pipeline and the handlers' answer sizes). */
#define OUT_CAP ((size_t)64 << 20)

sl_conn *sl_conn_new(sl_http_ctx *ctx, const struct sockaddr *peer, sl_conn_wake_cb wake,
                     void *wake_ud)
{
    sl_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ctx = ctx;
    c->wake = wake;
    c->wake_ud = wake_ud;
    sl_buf_init(&c->out, OUT_CAP);
    if (peer) {
        size_t n = peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                   : peer->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                : 0;
        if (n) {
            memcpy(&c->peer, peer, n);
            c->has_peer = true;
        }
    }
    return c;
}

void sl_conn_free(sl_conn *c)
{
    if (!c)
        return;
    if (c->sess)
        c->sess->ops->free(c->sess);
    sl_buf_free(&c->out);
    free(c);
}

static void proto_feed(sl_conn *c, const char *p, size_t n)
{
    if (n)
        c->sess->ops->feed(c->sess, p, n);
}

/* Once per connection, when the sniffing has decided: from then on every call goes through the
 * session's own table, so nothing here asks again which protocol the connection speaks. */
static int choose(sl_conn *c, const sl_proto_ops *ops)
{
    c->sess = ops->new(c);
    if (!c->sess) {
        c->fatal = true;
        return -ENOMEM;
    }
    /* Draining before the first request arrived: serve nothing. */
    if (c->draining)
        sl_conn_shutdown(c);
    return 0;
}

int sl_conn_feed(sl_conn *c, const void *data, size_t len)
{
    const char *p = data;
    if (c->fatal)
        return -EPIPE;
    if (!len)
        return 0;
    c->in_feed = true;
    int rc = 0;
    if (!c->sess) {
        size_t k = sizeof preface - c->sniff_len;
        if (k > len)
            k = len;
        if (memcmp(p, preface + c->sniff_len, k) != 0) {
            rc = choose(c, &sl_h1_ops);
        } else if (c->sniff_len + k == sizeof preface) {
            rc = choose(c, &sl_h2_ops);
        } else {
            memcpy(c->sniff + c->sniff_len, p, k);
            c->sniff_len = (uint8_t)(c->sniff_len + k);
            c->in_feed = false;
            return 0;
        }
        if (rc == 0) {
            /* The bytes held while undecided go first; `sniff` holds a prefix of the preface,
             * so these are exactly the bytes the client sent. */
            proto_feed(c, c->sniff, c->sniff_len);
            c->sniff_len = 0;
            if (!c->fatal)
                proto_feed(c, p, len);
        }
    } else {
        proto_feed(c, p, len);
    }
    c->in_feed = false;
    if (c->fatal)
        return rc ? rc : -EPROTO;
    return rc;
}

void sl_conn_pump(sl_conn *c)
{
    c->woken = false;
    if (c->fatal)
        return;
    c->in_feed = true;
    if (c->sess)
        c->sess->ops->pump(c->sess);
    c->in_feed = false;
}

void sl_conn_eof(sl_conn *c)
{
    c->in_feed = true;
    if (c->sess)
        c->sess->ops->eof(c->sess);
    else
        c->fatal = true; /* nothing was asked */
    c->in_feed = false;
}

void sl_conn_shutdown(sl_conn *c)
{
    c->draining = true;
    bool outer = !c->in_feed;
    c->in_feed = true;
    if (c->sess)
        c->sess->ops->shutdown(c->sess);
    if (outer)
        c->in_feed = false;
}

bool sl_conn_wants_read(const sl_conn *c)
{
    if (c->fatal)
        return false;
    if (c->sess)
        return c->sess->ops->wants_read(c->sess);
    return !c->draining;
}

bool sl_conn_done(const sl_conn *c)
{
    if (c->fatal)
        return true;
    if (c->sess)
        return c->sess->ops->done(c->sess);
    return c->draining;
}

bool sl_conn_has_backlog(const sl_conn *c)
{
    if (c->fatal)
        return false;
    if (c->sess)
        return c->sess->ops->has_backlog(c->sess);
    return false;
}

sl_conn_phase sl_conn_phase_get(const sl_conn *c)
{
    if (c->sess)
        return c->sess->ops->phase(c->sess);
    return SL_CONN_READING; /* a new connection owes us its first request */
}

int sl_conn_proto(const sl_conn *c)
{
    return c->sess ? (int)c->sess->ops->proto : 0;
}

void sl_conn_request_wake(sl_conn *c)
{
    if (c->in_feed || c->woken || !c->wake)
        return;
    c->woken = true;
    c->wake(c->wake_ud);
}

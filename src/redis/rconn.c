/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One pipelined Redis connection on a libuv loop, plain or TLS (see rconn.h): the socket
 * (uv_tcp_t), the TLS session between it and the protocol when asked for, the RESP encoding of
 * commands into one output buffer flushed once per loop iteration, hiredis's reader for the
 * replies, and the FIFO of callbacks they answer. Two output buffers take turns: one gathers
 * commands while the other is being written, so a busy connection reuses their memory.
 */
#include "redis/rconn.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "base/buf.h"

#define DEFAULT_MAX ((size_t)64 << 20)
#define RBUF_SIZE (64 * 1024)
#define PLAIN_SIZE (16 * 1024)
#define QUEUE_MIN 64
#define TLS_CHUNK ((size_t)16 << 20)
/* What one element of a reply costs in memory once hiredis's reader has built it (a redisReply,
 * its allocation's overhead, its slot in the parent's element table): in_max bounds the elements
 * announced by a reply's array headers with it, not only the reply's bytes on the wire, because
 * the reader allocates an array's element table when it reads the header. */
#define ELEMENT_BYTES 64

typedef struct pending {
    sl_rconn_reply_cb cb;
    void *priv;
} pending;

struct sl_rconn_reader {
    redisReader *rd;
    redisReplyObjectFunctions fns;        /* hiredis's, with createArray bounded */
    const redisReplyObjectFunctions *hfn; /* hiredis's own */
    size_t in_max;
    uint64_t elements;    /* array elements announced by the reply being read */
    bool too_many;        /* the reader stopped on an array past the bound */
    uint64_t fed;         /* reply bytes fed to the reader */
    uint64_t reply_start; /* `fed` where the reply being read began */
};

struct sl_rconn {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    uv_check_t check; /* flushes what the iteration queued, after the I/O phase */
    uv_idle_t idle;   /* while something is queued: the loop does not sleep before the check */
    int open_handles; /* handles not closed yet: memory is freed when none is left */
    sl_rconn_config cfg;
    void *data;
    sl_tls *tls;
    sl_rconn_reader *rd;  /* the replies' reader, bounded by in_max */
    sl_buf out;       /* commands gathered, not yet written (plaintext) */
    sl_buf wbuf;      /* the bytes of the write in flight */
    pending *q;       /* ring of callbacks in command order */
    size_t qcap, qhead, qlen;
    int depth;            /* callbacks of the caller running */
    bool tcp_up;          /* connected (TLS may still be shaking hands) */
    bool up;              /* commands can go out: connected and, with TLS, the handshake done */
    bool writing;
    bool armed;           /* check + idle started */
    bool dead;            /* closing: nothing more goes out, every callback answered */
    bool free_asked;      /* sl_rconn_free from inside a callback: done when it returns */
    char err[160];
    uint8_t rbuf[RBUF_SIZE];
    uint8_t *plain;       /* TLS: decrypted bytes (PLAIN_SIZE) */
};

/* ---- RESP encoding ----------------------------------------------------------------------------- */

static size_t digits(size_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static char *put_num(char *p, char tag, size_t v)
{
    size_t n = digits(v);
    *p++ = tag;
    for (size_t i = n; i > 0; i--) {
        p[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

size_t sl_rconn_encode(char *dst, size_t cap, int argc, const char **argv, const size_t *argvlen)
{
    size_t need = 3 + digits((size_t)argc);
    for (int i = 0; i < argc; i++)
        need += 3 + digits(argvlen[i]) + argvlen[i] + 2;
    if (need > cap)
        return need;
    char *p = put_num(dst, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        p = put_num(p, '$', argvlen[i]);
        if (argvlen[i])
            memcpy(p, argv[i], argvlen[i]);
        p += argvlen[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    return need;
}

/* ---- lifetime --------------------------------------------------------------------------------- */

/* The memory of c (its handles closed, or never opened). */
static void release(sl_rconn *c)
{
    sl_tls_free(c->tls);
    sl_rconn_reader_free(c->rd);
    sl_buf_free(&c->out);
    sl_buf_free(&c->wbuf);
    free(c->q);
    free(c->plain);
    free(c);
}

static void on_closed(uv_handle_t *h)
{
    sl_rconn *c = h->data;
    if (--c->open_handles > 0)
        return;
    release(c);
}

static void close_handles(sl_rconn *c)
{
    uv_close((uv_handle_t *)&c->tcp, on_closed); /* cancels the connect and the write */
    uv_close((uv_handle_t *)&c->check, on_closed);
    uv_close((uv_handle_t *)&c->idle, on_closed);
}

/* Every pending command answered with no reply, in order. */
static void answer_all(sl_rconn *c)
{
    c->depth++;
    while (c->qlen) {
        pending p = c->q[c->qhead];
        c->qhead = (c->qhead + 1) & (c->qcap - 1);
        c->qlen--;
        p.cb(c, NULL, p.priv);
    }
    c->depth--;
}

static void set_err(sl_rconn *c, const char *why, int status)
{
    if (why && why[0])
        snprintf(c->err, sizeof c->err, "%s", why);
    else
        snprintf(c->err, sizeof c->err, "%s", strerror(-status));
}

/* The connection failed: closed, the caller told (connect or disconnect callback), every
 * pending command answered with NULL, in hiredis's order. */
static void fail(sl_rconn *c, int status, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    set_err(c, why, status);
    close_handles(c);
    bool was_up = c->up;
    c->up = false;
    c->depth++;
    if (!was_up && c->cfg.on_connect)
        c->cfg.on_connect(c, status);
    answer_all(c);
    if (was_up && c->cfg.on_disconnect)
        c->cfg.on_disconnect(c, status);
    c->depth--;
}

static void close_now(sl_rconn *c)
{
    c->dead = true;
    c->up = false;
    close_handles(c);
    answer_all(c);
}

void sl_rconn_free(sl_rconn *c)
{
    if (!c || c->dead)
        return;
    if (c->depth > 0) {
        c->free_asked = true;
        return;
    }
    close_now(c);
}

/* At the end of a libuv callback: a free asked for by one of the caller's callbacks. */
static void settle(sl_rconn *c)
{
    if (c->free_asked && !c->dead && c->depth == 0)
        close_now(c);
}

static bool gone(const sl_rconn *c)
{
    return c->dead || c->free_asked;
}

/* ---- writing ---------------------------------------------------------------------------------- */

static void swap_bytes(sl_buf *a, sl_buf *b)
{
    uint8_t *d = a->data;
    size_t l = a->len, al = a->alloc;
    a->data = b->data;
    a->len = b->len;
    a->alloc = b->alloc;
    b->data = d;
    b->len = l;
    b->alloc = al;
}

static void on_write(uv_write_t *req, int status);

/* What is waiting goes out in one write, unless a write is in flight (its end flushes again). */
static void flush(sl_rconn *c)
{
    if (c->dead || c->writing || !c->tcp_up)
        return;
    if (c->tls) {
        if (c->up && c->out.len) {
            /* at most TLS_CHUNK a write: the session's record buffer stays within its cap */
            size_t k = c->out.len < TLS_CHUNK ? c->out.len : TLS_CHUNK;
            ssize_t n = sl_tls_write(c->tls, c->out.data, k);
            if (n < 0) {
                fail(c, (int)n, "TLS write failed");
                return;
            }
            sl_buf_consume(&c->out, (size_t)n);
        }
        sl_buf *o = sl_tls_out(c->tls);
        if (!o->len)
            return;
        swap_bytes(&c->wbuf, o); /* wbuf is empty: no copy of the records */
    } else {
        if (!c->out.len)
            return;
        swap_bytes(&c->wbuf, &c->out);
    }
    uv_buf_t b = uv_buf_init((char *)c->wbuf.data, (unsigned)c->wbuf.len);
    c->writing = true;
    if (c->cfg.stats) /* one thread writes it: no locked add */
        atomic_store_explicit(&c->cfg.stats->writes,
                              atomic_load_explicit(&c->cfg.stats->writes, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    int rc = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc) {
        c->writing = false;
        fail(c, rc, uv_strerror(rc));
    }
}

static void on_write(uv_write_t *req, int status)
{
    sl_rconn *c = req->data;
    c->writing = false;
    c->wbuf.len = 0;
    if (c->dead)
        return;
    if (status < 0) {
        fail(c, status, uv_strerror(status));
        return;
    }
    flush(c);
}

static void on_check(uv_check_t *h)
{
    sl_rconn *c = h->data;
    uv_check_stop(&c->check);
    uv_idle_stop(&c->idle);
    c->armed = false;
    flush(c);
}

static void on_idle(uv_idle_t *h)
{
    (void)h; /* only there to keep the loop's poll from sleeping on queued bytes */
}

static void arm(sl_rconn *c)
{
    if (c->armed || c->writing || !c->up)
        return;
    c->armed = true;
    uv_check_start(&c->check, on_check);
    uv_idle_start(&c->idle, on_idle);
}

int sl_rconn_command(sl_rconn *c, sl_rconn_reply_cb cb, void *priv, int argc, const char **argv,
                     const size_t *argvlen)
{
    if (gone(c))
        return -ENOTCONN;
    size_t n = sl_rconn_encode(NULL, 0, argc, argv, argvlen);
    if (n > c->cfg.out_max - c->out.len)
        return -ENOBUFS;
    if (c->qlen == c->qcap) {
        size_t cap = c->qcap ? c->qcap * 2 : QUEUE_MIN;
        pending *q = malloc(cap * sizeof *q);
        if (!q)
            return -ENOMEM;
        for (size_t i = 0; i < c->qlen; i++)
            q[i] = c->q[(c->qhead + i) & (c->qcap - 1)];
        free(c->q);
        c->q = q;
        c->qcap = cap;
        c->qhead = 0;
    }
    int rc = sl_buf_reserve(&c->out, n);
    if (rc)
        return rc == -EMSGSIZE ? -ENOBUFS : rc;
    sl_rconn_encode((char *)c->out.data + c->out.len, n, argc, argv, argvlen);
    c->out.len += n;
    c->q[(c->qhead + c->qlen++) & (c->qcap - 1)] = (pending){cb, priv};
    arm(c);
    return 0;
}

/* ---- reading ---------------------------------------------------------------------------------- */

/* The connection (and its TLS handshake) is up: the caller told, queued commands sent. */
static void became_up(sl_rconn *c)
{
    c->up = true;
    if (c->cfg.on_connect) {
        c->depth++;
        c->cfg.on_connect(c, 0);
        c->depth--;
    }
}

/* The reader's createArray: hiredis's, once the elements the reply has announced so far fit in
 * in_max (ELEMENT_BYTES each); else NULL, which stops the reader (too_many says why). */
static void *bounded_array(const redisReadTask *task, int elements)
{
    sl_rconn_reader *r = task->privdata;
    if (elements > 0)
        r->elements += (uint64_t)elements;
    if (elements < 0 || r->elements > r->in_max / ELEMENT_BYTES) {
        r->too_many = true;
        return NULL;
    }
    return r->hfn->createArray(task, elements);
}

int sl_rconn_reader_new(size_t in_max, sl_rconn_reader **out)
{
    sl_rconn_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->rd = redisReaderCreate())) {
        free(r);
        return -ENOMEM;
    }
    r->in_max = in_max ? in_max : DEFAULT_MAX;
    r->hfn = r->rd->fn;
    r->fns = *r->rd->fn;
    r->fns.createArray = bounded_array;
    r->rd->fn = &r->fns;
    r->rd->privdata = r;
    *out = r;
    return 0;
}

void sl_rconn_reader_free(sl_rconn_reader *r)
{
    if (!r)
        return;
    redisReaderFree(r->rd); /* before r: it frees a reply through r->fns */
    free(r);
}

int sl_rconn_reader_feed(sl_rconn_reader *r, const uint8_t *p, size_t n)
{
    if (redisReaderFeed(r->rd, (const char *)p, n) != REDIS_OK)
        return -ENOMEM;
    r->fed += n;
    return 0;
}

int sl_rconn_reader_next(sl_rconn_reader *r, void **reply, const char **why)
{
    *reply = NULL;
    *why = NULL;
    void *rep = NULL;
    if (redisReaderGetReply(r->rd, &rep) != REDIS_OK) {
        if (r->too_many)
            return -EMSGSIZE;
        *why = r->rd->errstr;
        return -EPROTO;
    }
    if (!rep) /* the reply being read, so far */
        return r->fed - r->reply_start > r->in_max ? -EMSGSIZE : 0;
    uint64_t end = r->fed - (r->rd->len - r->rd->pos);
    if (end - r->reply_start > r->in_max) {
        freeReplyObject(rep);
        return -EMSGSIZE;
    }
    r->reply_start = end;
    r->elements = 0;
    *reply = rep;
    return 1;
}

static void oversized(sl_rconn *c)
{
    if (c->cfg.stats)
        atomic_fetch_add_explicit(&c->cfg.stats->oversized, 1, memory_order_relaxed);
    char why[96];
    snprintf(why, sizeof why, "a reply longer than %zu bytes", c->cfg.in_max);
    fail(c, -EMSGSIZE, why);
}

/* Plaintext from the server: replies parsed and answered in order. 0, or -1 when the connection
 * is closing (failed, or freed by a callback). */
static int deliver(sl_rconn *c, const uint8_t *p, size_t n)
{
    if (sl_rconn_reader_feed(c->rd, p, n)) {
        fail(c, -ENOMEM, "no memory for a reply");
        return -1;
    }
    for (;;) {
        void *reply;
        const char *err;
        int rc = sl_rconn_reader_next(c->rd, &reply, &err);
        if (rc == -EMSGSIZE) {
            oversized(c);
            return -1;
        }
        if (rc < 0) {
            char why[160];
            snprintf(why, sizeof why, "protocol error: %s", err);
            fail(c, -EPROTO, why);
            return -1;
        }
        if (rc == 0)
            break;
        if (c->qlen == 0) {
            freeReplyObject(reply);
            fail(c, -EPROTO, "a reply to no command");
            return -1;
        }
        pending q = c->q[c->qhead];
        c->qhead = (c->qhead + 1) & (c->qcap - 1);
        c->qlen--;
        c->depth++;
        q.cb(c, reply, q.priv);
        c->depth--;
        freeReplyObject(reply);
        if (gone(c))
            return -1;
    }
    return 0;
}

static void tls_failed(sl_rconn *c, int rc)
{
    if (rc != -ECONNRESET && c->cfg.stats)
        atomic_fetch_add_explicit(&c->cfg.stats->tls_failed, 1, memory_order_relaxed);
    char why[160];
    snprintf(why, sizeof why, "TLS: %s",
             rc == -ECONNRESET ? "the server closed the session" : sl_tls_error(c->tls));
    fail(c, rc == -ECONNRESET ? -ECONNRESET : -EPROTO, why);
}

/* Bytes from the socket through the TLS session. */
static void read_tls(sl_rconn *c, const uint8_t *p, size_t n)
{
    int rc = sl_tls_feed(c->tls, p, n);
    if (rc) {
        tls_failed(c, rc);
        return;
    }
    for (;;) {
        ssize_t m = sl_tls_read(c->tls, c->plain, PLAIN_SIZE);
        if (!c->up && sl_tls_ready(c->tls)) {
            became_up(c);
            if (gone(c))
                return;
        }
        if (m == 0)
            break;
        if (m < 0) {
            tls_failed(c, (int)m);
            return;
        }
        if (deliver(c, c->plain, (size_t)m))
            return;
    }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    sl_rconn *c = h->data;
    *buf = uv_buf_init((char *)c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    sl_rconn *c = s->data;
    if (c->dead || nread == 0)
        return;
    if (nread < 0) {
        if (c->tls && !sl_tls_ready(c->tls) && c->cfg.stats) /* the handshake never ended */
            atomic_fetch_add_explicit(&c->cfg.stats->tls_failed, 1, memory_order_relaxed);
        fail(c, nread == UV_EOF ? -ECONNRESET : (int)nread,
             nread == UV_EOF ? "the server closed the connection" : uv_strerror((int)nread));
        return;
    }
    if (c->tls)
        read_tls(c, c->rbuf, (size_t)nread);
    else
        deliver(c, c->rbuf, (size_t)nread);
    settle(c);
    flush(c); /* handshake records, or what the callbacks queued (also armed: harmless) */
}

static void on_connected(uv_connect_t *req, int status)
{
    sl_rconn *c = req->data;
    if (c->dead)
        return;
    if (status < 0) {
        fail(c, status, uv_strerror(status));
        return;
    }
    c->tcp_up = true;
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) {
        fail(c, rc, uv_strerror(rc));
        return;
    }
    if (c->tls) {
        ssize_t m = sl_tls_read(c->tls, c->plain, PLAIN_SIZE); /* the ClientHello */
        if (m < 0) {
            tls_failed(c, (int)m);
            return;
        }
    } else {
        became_up(c);
    }
    settle(c);
    flush(c);
}

/* ---- construction ----------------------------------------------------------------------------- */

int sl_rconn_new(const sl_rconn_config *cfg, sl_rconn **out)
{
    *out = NULL;
    union {
        struct sockaddr sa;
        struct sockaddr_in v4;
        struct sockaddr_in6 v6;
    } addr;
    if (!cfg->host || cfg->port < 1 || cfg->port > 65535)
        return -EINVAL;
    if (uv_ip4_addr(cfg->host, cfg->port, &addr.v4) != 0 &&
        uv_ip6_addr(cfg->host, cfg->port, &addr.v6) != 0)
        return -EINVAL;
    sl_rconn *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->cfg = *cfg;
    c->cfg.host = NULL;
    c->cfg.server_name = NULL;
    c->cfg.tls = NULL;
    c->cfg.tls_slot = NULL;
    if (!c->cfg.out_max)
        c->cfg.out_max = DEFAULT_MAX;
    if (!c->cfg.in_max)
        c->cfg.in_max = DEFAULT_MAX;
    c->data = cfg->data;
    sl_buf_init(&c->out, c->cfg.out_max);
    sl_buf_init(&c->wbuf, c->cfg.out_max);
    int rc = -ENOMEM;
    if (sl_rconn_reader_new(c->cfg.in_max, &c->rd))
        goto fail;
    if (cfg->tls || cfg->tls_slot) {
        const char *name = cfg->server_name && cfg->server_name[0] ? cfg->server_name : cfg->host;
        if (!(c->plain = malloc(PLAIN_SIZE)) ||
            !(c->tls = cfg->tls_slot ? sl_tls_slot_session(cfg->tls_slot, name)
                                     : sl_tls_new(cfg->tls, name)))
            goto fail;
    }
    if ((rc = uv_tcp_init(cfg->loop, &c->tcp)))
        goto fail;
    uv_check_init(cfg->loop, &c->check);
    uv_idle_init(cfg->loop, &c->idle);
    c->tcp.data = c->check.data = c->idle.data = c->creq.data = c->wreq.data = c;
    c->open_handles = 3;
    if ((rc = uv_tcp_connect(&c->creq, &c->tcp, &addr.sa, on_connected))) {
        c->dead = true;
        close_handles(c); /* frees c */
        return rc;
    }
    *out = c;
    return 0;
fail:
    release(c);
    return rc;
}

void *sl_rconn_data(const sl_rconn *c)
{
    return c->data;
}

void sl_rconn_set_data(sl_rconn *c, void *data)
{
    c->data = data;
}

const char *sl_rconn_error(const sl_rconn *c)
{
    return c->err;
}

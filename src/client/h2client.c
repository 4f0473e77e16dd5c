/*
 * One client-side HTTP/2 connection over a non-blocking TCP socket (see h2client.h).
 *
 * nghttp2's client session is driven in memory: bytes read from the socket go to
 * nghttp2_session_mem_recv(), and what nghttp2_session_mem_send() produces is copied into `out`
 * and written as the socket takes it. nghttp2 invokes our callbacks from inside mem_recv; they only
 * record state and move finished streams onto a completion list, which sl_h2c_process() runs once
 * the session is consistent again, so a `done` callback never re-enters nghttp2.
 *
 * A stream has two owners: the caller (until `done` ran) and nghttp2 (until it closes the stream).
 * A stream that timed out is completed for the caller at once and reset, but its memory stays until
 * nghttp2 closes it (the data provider may still point at it). Streams the peer never closes are
 * bounded by max_abandoned: past it the connection is evidently unhealthy and is dropped.
 */
#include "client/h2client.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/clock.h"
#include "base/buf.h"

#define READ_CHUNK 16384
#define READS_PER_PROCESS 64    /* bound the work one readable event may do */
#define OUT_HIGH_WATER 65536    /* stop pulling frames from nghttp2 past this many unsent bytes */
#define MAX_REQ_HEADERS 32
#define STREAM_WINDOW (1 << 20) /* big enough for a 1000-item GetRateLimits answer in one go */

typedef enum { H2C_CLOSED, H2C_CONNECTING, H2C_OPEN } h2c_state;

typedef struct h2c_stream {
    struct h2c_stream *next, *prev;  /* every stream the connection still holds */
    struct h2c_stream *done_next;    /* completion list */
    int32_t id;
    int64_t deadline_ns;
    sl_h2c_done_fn done;
    void *ud;
    int status;
    int err;
    bool end_stream; /* the peer finished its side */
    bool finished;   /* completion queued for the caller */
    bool ran;        /* completion ran: the caller no longer cares */
    bool closed;     /* nghttp2 no longer references the stream */
    uint8_t *req_body;
    size_t req_len, req_off;
    sl_buf hdrs; /* fields as [u32 name_len][u32 value_len][name][value] */
    size_t nfields;
    sl_buf body;
} h2c_stream;

struct sl_h2c {
    sl_h2c_target *t;
    h2c_state state;
    int fd;
    nghttp2_session *sess;
    nghttp2_session_callbacks *cbs;
    int64_t connect_deadline_ns;
    bool goaway;
    sl_buf out;
    h2c_stream *streams;
    size_t pending;   /* streams not finished */
    size_t abandoned; /* streams ran but not closed */
    h2c_stream *done_head, *done_tail;
};

/* ---------------------------------------------------------------- target */

int sl_h2c_target_init(sl_h2c_target *t, const char *addr, uint16_t default_port)
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
    return 0;
}

/* ---------------------------------------------------------------- streams */

static void stream_unlink(sl_h2c *c, h2c_stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

static void stream_free(h2c_stream *s)
{
    sl_buf_free(&s->hdrs);
    sl_buf_free(&s->body);
    free(s->req_body);
    free(s);
}

/* Hand the stream to the caller (queued; run by run_completions). */
static void stream_finish(sl_h2c *c, h2c_stream *s, int err)
{
    if (s->finished)
        return;
    s->finished = true;
    if (err && !s->err)
        s->err = err;
    c->pending--;
    s->done_next = NULL;
    if (c->done_tail)
        c->done_tail->done_next = s;
    else
        c->done_head = s;
    c->done_tail = s;
}

static void run_completions(sl_h2c *c)
{
    h2c_stream *s;
    while ((s = c->done_head)) {
        c->done_head = s->done_next;
        if (!c->done_head)
            c->done_tail = NULL;

        sl_h2c_resp r = {.err = s->err, .status = s->status, .body = s->body.data,
                         .body_len = s->body.len};
        sl_h2c_field *fields = NULL;
        if (s->nfields) {
            fields = calloc(s->nfields, sizeof *fields);
            if (!fields) {
                if (!r.err)
                    r.err = -ENOMEM;
            } else {
                const uint8_t *p = s->hdrs.data;
                for (size_t i = 0; i < s->nfields; i++) {
                    uint32_t nl, vl;
                    memcpy(&nl, p, 4);
                    memcpy(&vl, p + 4, 4);
                    fields[i].name = (const char *)p + 8;
                    fields[i].name_len = nl;
                    fields[i].value = (const char *)p + 8 + nl;
                    fields[i].value_len = vl;
                    p += 8 + nl + vl;
                }
                r.fields = fields;
                r.nfields = s->nfields;
            }
        }
        sl_h2c_done_fn done = s->done;
        s->done = NULL;
        s->ran = true;
        done(s->ud, &r);
        free(fields);
        if (s->closed) {
            stream_unlink(c, s);
            stream_free(s);
        } else {
            c->abandoned++;
        }
    }
}

/* ---------------------------------------------------------------- connection */

static void connect_failed(sl_h2c *c, int err)
{
    sl_h2c_target *t = c->t;
    atomic_store(&t->last_connect_err, err);
    atomic_store(&t->fail_until_ns, sl_mono_ns() + t->backoff_ns);
    atomic_fetch_add(&t->connect_failures, 1);
}

static void connected(sl_h2c *c)
{
    c->state = H2C_OPEN;
    atomic_fetch_add(&c->t->connects, 1);
    atomic_store(&c->t->fail_until_ns, 0);
}

/* Close the socket and session; every stream the caller still waits for completes with err. */
static void teardown(sl_h2c *c, int err)
{
    if (c->sess) {
        nghttp2_session_del(c->sess); /* frees its streams without calling back */
        c->sess = NULL;
    }
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    c->state = H2C_CLOSED;
    c->goaway = false;
    sl_buf_reset(&c->out);
    h2c_stream *s = c->streams, *next;
    for (; s; s = next) {
        next = s->next;
        s->closed = true;
        if (!s->finished) {
            stream_finish(c, s, err);
        } else if (s->ran) {
            stream_unlink(c, s);
            stream_free(s);
        }
    }
    c->abandoned = 0;
}

static h2c_stream *find_stream(sl_h2c *c, int32_t id)
{
    h2c_stream *s = c->sess ? nghttp2_session_get_stream_user_data(c->sess, id) : NULL;
    if (s)
        return s;
    for (s = c->streams; s; s = s->next)
        if (s->id == id && !s->closed)
            return s;
    return NULL;
}

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    h2c_stream *s = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    if (!s || frame->hd.type != NGHTTP2_HEADERS || s->err)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        int st = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++)
            st = st * 10 + (value[i] - '0');
        s->status = st;
        return 0;
    }
    if (namelen && name[0] == ':')
        return 0;
    uint32_t nl = (uint32_t)namelen, vl = (uint32_t)valuelen;
    if (sl_buf_reserve(&s->hdrs, 8 + namelen + valuelen) < 0) {
        s->err = -EMSGSIZE;
        nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        return 0;
    }
    sl_buf_append(&s->hdrs, &nl, 4);
    sl_buf_append(&s->hdrs, &vl, 4);
    sl_buf_append(&s->hdrs, name, namelen);
    sl_buf_append(&s->hdrs, value, valuelen);
    s->nfields++;
    return 0;
}

static int on_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *ud)
{
    h2c_stream *s = nghttp2_session_get_stream_user_data(sess, id);
    if (!s || s->err)
        return 0;
    if (sl_buf_append(&s->body, data, len) < 0) {
        s->err = -EMSGSIZE;
        nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *frame, void *ud)
{
    sl_h2c *c = ud;
    switch (frame->hd.type) {
    case NGHTTP2_GOAWAY:
        c->goaway = true;
        break;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            h2c_stream *s = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
            if (s)
                s->end_stream = true;
        }
        break;
    default:
        break;
    }
    return 0;
}

static void stream_closed(sl_h2c *c, h2c_stream *s, uint32_t error_code)
{
    s->closed = true;
    if (!s->finished) {
        int err = 0;
        if (!s->end_stream)
            err = error_code == NGHTTP2_REFUSED_STREAM ? -ECONNREFUSED : -ECONNRESET;
        stream_finish(c, s, err);
    } else if (s->ran) {
        c->abandoned--;
        stream_unlink(c, s);
        stream_free(s);
    }
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t error_code, void *ud)
{
    h2c_stream *s = nghttp2_session_get_stream_user_data(sess, id);
    if (s)
        stream_closed(ud, s, error_code);
    return 0;
}

/* A request whose HEADERS never left (cancelled while queued, or refused after GOAWAY): nghttp2
 * will not report it closed, so do it here. */
static int on_frame_not_send(nghttp2_session *sess, const nghttp2_frame *frame, int lib_error,
                             void *ud)
{
    sl_h2c *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    h2c_stream *s = find_stream(c, frame->hd.stream_id);
    if (s && !s->closed)
        stream_closed(c, s, NGHTTP2_REFUSED_STREAM);
    return 0;
}

static ssize_t body_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    h2c_stream *s = src->ptr;
    size_t n = s->req_len - s->req_off;
    if (n > len)
        n = len;
    memcpy(buf, s->req_body + s->req_off, n);
    s->req_off += n;
    if (s->req_off == s->req_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

int sl_h2c_new(sl_h2c_target *t, sl_h2c **out)
{
    sl_h2c *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    if (nghttp2_session_callbacks_new(&c->cbs) != 0) {
        free(c);
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_header_callback(c->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c->cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(c->cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(c->cbs, on_frame_not_send);
    c->t = t;
    c->fd = -1;
    c->state = H2C_CLOSED;
    sl_buf_init(&c->out, 0);
    *out = c;
    return 0;
}

void sl_h2c_free(sl_h2c *c)
{
    if (!c)
        return;
    teardown(c, -ECANCELED);
    run_completions(c);
    nghttp2_session_callbacks_del(c->cbs);
    sl_buf_free(&c->out);
    free(c);
}

static int conn_start(sl_h2c *c)
{
    sl_h2c_target *t = c->t;
    int64_t now = sl_mono_ns();
    if (now < atomic_load(&t->fail_until_ns)) {
        int e = atomic_load(&t->last_connect_err);
        return e ? e : -ECONNREFUSED;
    }
    int fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    bool open_now = false;
    if (connect(fd, (const struct sockaddr *)&t->addr, t->addrlen) == 0) {
        open_now = true;
    } else if (errno != EINPROGRESS) {
        int err = -errno;
        close(fd);
        connect_failed(c, err);
        return err;
    }
    if (nghttp2_session_client_new(&c->sess, c->cbs, c) != 0) {
        close(fd);
        return -ENOMEM;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
    };
    nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, 4 * STREAM_WINDOW);
    c->fd = fd;
    c->goaway = false;
    c->connect_deadline_ns = t->connect_timeout_ns > 0 ? now + t->connect_timeout_ns : INT64_MAX;
    c->state = H2C_CONNECTING;
    if (open_now)
        connected(c);
    return 0;
}

static bool session_over(const sl_h2c *c)
{
    return c->state != H2C_CLOSED &&
           (c->goaway || (c->state == H2C_OPEN && !nghttp2_session_want_read(c->sess) &&
                          !nghttp2_session_want_write(c->sess)));
}

int sl_h2c_submit(sl_h2c *c, const sl_h2c_req *req, sl_h2c_done_fn done, void *ud)
{
    if (!req || !req->method || !req->path || !done || req->nheaders > MAX_REQ_HEADERS)
        return -EINVAL;
    if (session_over(c)) {
        if (c->pending)
            return -EAGAIN;
        teardown(c, -ECONNRESET); /* only abandoned streams remain: nobody waits for them */
    }
    if (c->state == H2C_CLOSED) {
        int rc = conn_start(c);
        if (rc < 0)
            return rc;
    }

    h2c_stream *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    if (req->body_len) {
        s->req_body = malloc(req->body_len);
        if (!s->req_body) {
            free(s);
            return -ENOMEM;
        }
        memcpy(s->req_body, req->body, req->body_len);
        s->req_len = req->body_len;
    }
    sl_buf_init(&s->hdrs, c->t->max_header_bytes);
    sl_buf_init(&s->body, c->t->max_body);
    s->deadline_ns = req->deadline_ns;
    s->done = done;
    s->ud = ud;

#define NV(n, nl, v, vl) {(uint8_t *)(n), (uint8_t *)(v), (nl), (vl), NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv nva[4 + MAX_REQ_HEADERS] = {
        NV(":method", 7, req->method, strlen(req->method)),
        NV(":scheme", 7, "http", 4),
        NV(":authority", 10, c->t->authority, strlen(c->t->authority)),
        NV(":path", 5, req->path, strlen(req->path)),
    };
    size_t nv = 4;
    for (size_t i = 0; i < req->nheaders; i++) {
        const sl_h2c_field *f = &req->headers[i];
        nva[nv++] = (nghttp2_nv)NV(f->name, f->name_len, f->value, f->value_len);
    }
#undef NV
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = body_read};
    int32_t id = nghttp2_submit_request(c->sess, NULL, nva, nv, s->req_len ? &prd : NULL, s);
    if (id < 0) {
        stream_free(s);
        return id == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
    }
    s->id = id;
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    c->pending++;
    return 0;
}

/* ---------------------------------------------------------------- I/O */

static void do_read(sl_h2c *c)
{
    uint8_t buf[READ_CHUNK];
    for (int i = 0; i < READS_PER_PROCESS; i++) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n > 0) {
            ssize_t r = nghttp2_session_mem_recv(c->sess, buf, (size_t)n);
            if (r < 0) {
                teardown(c, -EPROTO);
                return;
            }
            if ((size_t)n < sizeof buf)
                return;
            continue;
        }
        if (n == 0) {
            teardown(c, -ECONNRESET);
            return;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            teardown(c, -errno);
        return;
    }
}

static void do_write(sl_h2c *c)
{
    for (;;) {
        while (c->out.len < OUT_HIGH_WATER) {
            const uint8_t *d;
            ssize_t n = nghttp2_session_mem_send(c->sess, &d);
            if (n < 0) {
                teardown(c, -EPROTO);
                return;
            }
            if (n == 0)
                break;
            if (sl_buf_append(&c->out, d, (size_t)n) < 0) {
                teardown(c, -ENOMEM);
                return;
            }
        }
        if (c->out.len == 0)
            return;
        ssize_t w = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
        if (w > 0) {
            sl_buf_consume(&c->out, (size_t)w);
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        teardown(c, w < 0 ? -errno : -EPIPE);
        return;
    }
}

static void expire(sl_h2c *c, int64_t now)
{
    if (c->state == H2C_CONNECTING && now >= c->connect_deadline_ns) {
        connect_failed(c, -ETIMEDOUT);
        teardown(c, -ETIMEDOUT);
        return;
    }
    for (h2c_stream *s = c->streams; s; s = s->next) {
        if (s->finished || s->deadline_ns > now)
            continue;
        stream_finish(c, s, -ETIMEDOUT);
        if (c->sess && !s->closed)
            nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    }
    if (c->abandoned > c->t->max_abandoned)
        teardown(c, -ETIMEDOUT);
}

void sl_h2c_process(sl_h2c *c, short revents, int64_t now_ns)
{
    if (c->state == H2C_CONNECTING && (revents & (POLLOUT | POLLERR | POLLHUP))) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        struct sockaddr_storage peer;
        socklen_t pl = sizeof peer;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            soerr = errno;
        if (soerr) {
            connect_failed(c, -soerr);
            teardown(c, -soerr);
        } else if (getpeername(c->fd, (struct sockaddr *)&peer, &pl) == 0) {
            connected(c);
        }
    }
    if (c->state == H2C_OPEN && (revents & (POLLIN | POLLERR | POLLHUP)))
        do_read(c);
    expire(c, now_ns);
    if (c->state == H2C_OPEN)
        do_write(c);
    if (c->state == H2C_OPEN && !nghttp2_session_want_read(c->sess) &&
        !nghttp2_session_want_write(c->sess) && c->out.len == 0)
        teardown(c, -ECONNRESET); /* the session is over (GOAWAY and nothing left) */
    run_completions(c);
}

void sl_h2c_pollfd(const sl_h2c *c, struct pollfd *p)
{
    p->revents = 0;
    p->events = 0;
    p->fd = c->state == H2C_CLOSED ? -1 : c->fd;
    if (c->state == H2C_CONNECTING)
        p->events = POLLOUT;
    else if (c->state == H2C_OPEN)
        p->events = POLLIN | ((c->out.len || nghttp2_session_want_write(c->sess)) ? POLLOUT : 0);
}

int64_t sl_h2c_next_deadline(const sl_h2c *c)
{
    if (c->done_head)
        return 0;
    int64_t dl = c->state == H2C_CONNECTING ? c->connect_deadline_ns : INT64_MAX;
    for (const h2c_stream *s = c->streams; s; s = s->next)
        if (!s->finished && s->deadline_ns < dl)
            dl = s->deadline_ns;
    return dl;
}

size_t sl_h2c_pending(const sl_h2c *c)
{
    return c->pending;
}

bool sl_h2c_finished(const sl_h2c *c)
{
    return c->pending == 0 && !c->done_head && (c->state == H2C_CLOSED || c->goaway);
}

void sl_h2c_refresh(sl_h2c *c)
{
    if (c->state != H2C_OPEN)
        return;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0)
        sl_h2c_process(c, p.revents, sl_mono_ns());
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

int sl_h2c_roundtrip(sl_h2c *c, const sl_h2c_req *req, sl_h2c_done_fn done, void *ud)
{
    roundtrip rt = {.done = done, .ud = ud};
    int rc = sl_h2c_submit(c, req, roundtrip_done, &rt);
    if (rc < 0)
        return rc;
    /* Write at once: on an open connection the socket almost always takes the request. */
    sl_h2c_process(c, 0, sl_mono_ns());
    while (!rt.fired) {
        struct pollfd p;
        sl_h2c_pollfd(c, &p);
        int64_t now = sl_mono_ns();
        int64_t dl = sl_h2c_next_deadline(c);
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
        sl_h2c_process(c, n > 0 ? p.revents : 0, sl_mono_ns());
    }
    return 0;
}

const sl_h2c_field *sl_h2c_resp_find(const sl_h2c_resp *r, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < r->nfields; i++)
        if (r->fields[i].name_len == n && memcmp(r->fields[i].name, name, n) == 0)
            return &r->fields[i];
    return NULL;
}

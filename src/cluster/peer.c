/*
 * Peer client (see peer.h). Structure:
 *
 *   sl_peer ── cur: conn (the one new calls go to) ── draining: conns that got a GOAWAY
 *      │                 │
 *      └─ done queue     └─ active streams (sorted by deadline) ─ abandoned streams
 *
 * A stream (one call) is freed when two things are over: its callback ran ("delivered") and
 * nghttp2 no longer refers to it ("released": the stream closed, was never submitted, or the
 * session is gone). A call that times out is delivered at once and reset; its memory waits in the
 * connection's abandoned list for nghttp2's close callback, so nghttp2's data provider never reads
 * freed memory. Callbacks are queued while nghttp2 is running and delivered at the end of each
 * libuv callback, so user code never runs inside nghttp2.
 */
#include "cluster/peer.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/server.h"
#include "wire/grpc_frame.h"

#define READ_BUF 16384
#define OUT_HIGH_WATER ((size_t)4 << 20)
#define STREAM_WINDOW ((int32_t)4 << 20)
#define CONN_WINDOW ((int32_t)16 << 20)

enum { C_RESOLVING, C_CONNECTING, C_OPEN, C_DEAD };

typedef struct conn conn;

typedef struct pstream {
    struct pstream *next, *prev;
    conn *c;                 /* NULL once the session is gone */
    int32_t id;              /* 0 until submitted */
    bool delivered, released, on_list;
    int list;                /* which list it is on */
    int64_t deadline;
    sl_buf req;
    size_t req_off;
    sl_buf resp;
    int http_status;
    int grpc_status;         /* -1 until seen */
    char grpc_message[256];
    int err;
    const char *err_text;
    sl_peer_cb cb;
    void *ud;
    char path[96];
} pstream;

enum { L_NONE, L_ACTIVE, L_ABANDONED, L_DONE };

typedef struct slist {
    pstream *head, *tail;
    size_t n;
} slist;

struct conn {
    sl_peer *p;
    conn *next_draining;
    int state;
    bool goaway, writing, gai_pending, was_open;
    int handles;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_connect_t creq;
    uv_getaddrinfo_t gai;
    uv_write_t wreq;
    nghttp2_session *sess;
    slist active, abandoned;
    int64_t connect_deadline;
    sl_buf out, wbuf;
    char rbuf[READ_BUF];
};

struct sl_peer {
    uv_loop_t *loop;
    char *addr;
    char host[256];
    char port[8];
    struct sockaddr_storage sa;
    bool numeric;
    sl_peer_config cfg;
    conn *cur;
    conn *draining;
    slist done;
    int conns;
    int depth;               /* >0 while delivering: do not free */
    bool closing;
    int64_t fail_until, backoff;
    int last_err;
    size_t inflight;
    sl_peer_stats st;
    nghttp2_session_callbacks *cbs;
};

/* ---- lists ---- */

static void list_push_sorted(slist *l, pstream *s, int which)
{
    /* deadlines are nearly always appended in order: search from the tail */
    pstream *at = l->tail;
    while (at && at->deadline > s->deadline)
        at = at->prev;
    s->prev = at;
    s->next = at ? at->next : l->head;
    if (s->next)
        s->next->prev = s;
    else
        l->tail = s;
    if (at)
        at->next = s;
    else
        l->head = s;
    l->n++;
    s->on_list = true;
    s->list = which;
}

static void list_push(slist *l, pstream *s, int which)
{
    s->next = NULL;
    s->prev = l->tail;
    if (l->tail)
        l->tail->next = s;
    else
        l->head = s;
    l->tail = s;
    l->n++;
    s->on_list = true;
    s->list = which;
}

static void list_del(slist *l, pstream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        l->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        l->tail = s->prev;
    s->next = s->prev = NULL;
    l->n--;
    s->on_list = false;
    s->list = L_NONE;
}

static void stream_free(pstream *s)
{
    sl_buf_free(&s->req);
    sl_buf_free(&s->resp);
    free(s);
}

/* ---- completion ---- */

static void deliver(sl_peer *p);
static void conn_flush(conn *c);
static void conn_kill(conn *c, int err, const char *why);
static void rearm(conn *c);

/* The call is over (answer or error): queue its callback. */
static void finish(pstream *s, int err, const char *why)
{
    conn *c = s->c;
    sl_peer *p = c->p;
    if (s->on_list && s->list == L_ACTIVE)
        list_del(&c->active, s);
    s->err = err;
    s->err_text = why;
    list_push(&p->done, s, L_DONE);
}

static void build_result(sl_peer *p, pstream *s, sl_peer_result *r)
{
    memset(r, 0, sizeof *r);
    r->err = s->err;
    r->message = s->err_text ? s->err_text : "";
    if (r->err)
        return;
    if (s->http_status != 200) {
        r->err = -EPROTO;
        snprintf(s->grpc_message, sizeof s->grpc_message, "peer answered HTTP %d",
                 s->http_status);
        r->message = s->grpc_message;
        return;
    }
    if (s->grpc_status < 0) {
        r->err = -EPROTO;
        r->message = "peer answer without grpc-status";
        return;
    }
    r->grpc_status = s->grpc_status;
    r->message = s->grpc_message;
    if (s->grpc_status != 0)
        return;
    sl_grpc_msg m;
    const char *e = NULL;
    int rc = sl_grpc_frame_decode(s->resp.data, s->resp.len, p->cfg.max_msg, &m, &e);
    if (rc == 0 && m.compressed) {
        rc = -EPROTO;
        e = "compressed answer";
    } else if (rc == 0 && m.frame_len != s->resp.len) {
        rc = -EPROTO;
        e = "more than one message in a unary answer";
    } else if (rc == -EAGAIN) {
        e = "truncated answer";
    }
    if (rc) {
        r->err = rc == -EMSGSIZE ? -EMSGSIZE : -EPROTO;
        r->message = e ? e : "bad gRPC framing";
        return;
    }
    r->msg = m.data;
    r->len = m.len;
}

static void maybe_free_peer(sl_peer *p)
{
    if (p->closing && p->conns == 0 && p->depth == 0 && !p->done.head) {
        if (p->cbs)
            nghttp2_session_callbacks_del(p->cbs);
        free(p->addr);
        free(p);
    }
}

static void deliver(sl_peer *p)
{
    if (p->depth)
        return; /* the outer delivery loop picks new entries up */
    p->depth++;
    pstream *s;
    while ((s = p->done.head)) {
        list_del(&p->done, s);
        sl_peer_result r;
        build_result(p, s, &r);
        p->inflight--;
        if (r.err == 0 && r.grpc_status == 0)
            p->st.ok++;
        else
            p->st.failed++;
        if (r.err == -ETIMEDOUT)
            p->st.timeouts++;
        s->cb(s->ud, &r);
        s->delivered = true;
        if (s->released)
            stream_free(s);
        else if (s->c)
            list_push(&s->c->abandoned, s, L_ABANDONED);
        else
            stream_free(s); /* defensive: no session can refer to it */
    }
    p->depth--;
    maybe_free_peer(p);
}

/* ---- nghttp2 callbacks ---- */

static int on_header(nghttp2_session *sess, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    (void)flags;
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    pstream *s = nghttp2_session_get_stream_user_data(sess, frame->hd.stream_id);
    if (!s || s->delivered)
        return 0;
    if (namelen == 7 && !memcmp(name, ":status", 7)) {
        int v = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            v = v * 10 + (value[i] - '0');
        s->http_status = v;
    } else if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
        int v = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            if (value[i] >= '0' && value[i] <= '9')
                v = v * 10 + (value[i] - '0');
        s->grpc_status = v;
    } else if (namelen == 12 && !memcmp(name, "grpc-message", 12)) {
        sl_buf b;
        sl_buf_init(&b, 4096);
        if (sl_grpc_message_decode((const char *)value, valuelen, &b) == 0)
            snprintf(s->grpc_message, sizeof s->grpc_message, "%s", (const char *)b.data);
        sl_buf_free(&b);
    }
    return 0;
}

static int on_data(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *ud)
{
    (void)flags;
    conn *c = ud;
    pstream *s = nghttp2_session_get_stream_user_data(sess, id);
    if (!s || s->delivered || s->list != L_ACTIVE)
        return 0;
    if (s->resp.len + len > c->p->cfg.max_msg + SL_GRPC_HDR_LEN ||
        sl_buf_append(&s->resp, data, len)) {
        nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        finish(s, -EMSGSIZE, "peer answer larger than the limit");
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *sess, const nghttp2_frame *frame, void *ud)
{
    (void)sess;
    conn *c = ud;
    if (frame->hd.type == NGHTTP2_GOAWAY && !c->goaway) {
        c->goaway = true;
        sl_peer *p = c->p;
        if (p->cur == c) {
            p->cur = NULL;
            c->next_draining = p->draining;
            p->draining = c;
        }
    }
    return 0;
}

static int on_stream_close(nghttp2_session *sess, int32_t id, uint32_t error_code, void *ud)
{
    (void)ud;
    pstream *s = nghttp2_session_get_stream_user_data(sess, id);
    if (!s)
        return 0;
    s->released = true;
    if (s->delivered) {
        if (s->on_list && s->list == L_ABANDONED)
            list_del(&s->c->abandoned, s);
        stream_free(s);
        return 0;
    }
    if (s->list != L_ACTIVE)
        return 0; /* already finished (e.g. too large), waiting in the done queue */
    if (error_code == NGHTTP2_REFUSED_STREAM)
        finish(s, -ECONNREFUSED, "peer refused the stream");
    else if (error_code != NGHTTP2_NO_ERROR)
        finish(s, -ECONNRESET, "peer reset the stream");
    else
        finish(s, 0, NULL);
    return 0;
}

static ssize_t body_read(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)sess;
    (void)id;
    (void)ud;
    pstream *s = src->ptr;
    size_t left = s->req.len - s->req_off;
    size_t n = left < len ? left : len;
    memcpy(buf, s->req.data + s->req_off, n);
    s->req_off += n;
    if (s->req_off == s->req.len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        /* the request is sent: give its memory back early */
        sl_buf_free(&s->req);
        s->req_off = 0;
    }
    return (ssize_t)n;
}

/* ---- connection I/O ---- */

static void on_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->handles > 0 || c->gai_pending)
        return;
    sl_peer *p = c->p;
    sl_buf_free(&c->out);
    sl_buf_free(&c->wbuf);
    free(c);
    p->conns--;
    maybe_free_peer(p);
}

static void unlink_conn(conn *c)
{
    sl_peer *p = c->p;
    if (p->cur == c)
        p->cur = NULL;
    for (conn **pp = &p->draining; *pp; pp = &(*pp)->next_draining)
        if (*pp == c) {
            *pp = c->next_draining;
            break;
        }
}

/* Tear the connection down: every call on it fails with err. */
static void conn_kill(conn *c, int err, const char *why)
{
    if (c->state == C_DEAD)
        return;
    sl_peer *p = c->p;
    bool never_open = !c->was_open;
    c->state = C_DEAD;
    unlink_conn(c);
    pstream *s;
    while ((s = c->active.head)) {
        s->released = true;
        finish(s, err, why);
        s->c = NULL;
    }
    while ((s = c->abandoned.head)) {
        list_del(&c->abandoned, s);
        stream_free(s);
    }
    /* calls already finished but not delivered may still be known to nghttp2 */
    for (s = p->done.head; s; s = s->next)
        if (s->c == c) {
            s->released = true;
            s->c = NULL;
        }
    if (c->sess) {
        nghttp2_session_del(c->sess);
        c->sess = NULL;
    }
    if (never_open) {
        p->st.connect_failures++;
        p->fail_until = (int64_t)uv_now(p->loop) + p->backoff;
        p->backoff = p->backoff * 2 > p->cfg.backoff_max_ms ? p->cfg.backoff_max_ms : p->backoff * 2;
    }
    p->last_err = err;
    if (c->gai_pending)
        uv_cancel((uv_req_t *)&c->gai);
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_write(uv_write_t *req, int status)
{
    conn *c = req->data;
    c->writing = false;
    sl_buf_reset(&c->wbuf);
    if (c->state == C_DEAD)
        return;
    if (status < 0) {
        conn_kill(c, -ECONNRESET, "write to peer failed");
        deliver(c->p);
        return;
    }
    conn_flush(c);
    deliver(c->p);
}

static void conn_flush(conn *c)
{
    if (c->state != C_OPEN)
        return;
    for (;;) {
        while (c->out.len < OUT_HIGH_WATER && nghttp2_session_want_write(c->sess)) {
            const uint8_t *d;
            ssize_t n = nghttp2_session_mem_send(c->sess, &d);
            if (n < 0) {
                conn_kill(c, -EPROTO, "HTTP/2 session error");
                return;
            }
            if (n == 0)
                break;
            if (sl_buf_append(&c->out, d, (size_t)n)) {
                conn_kill(c, -ENOMEM, "out of memory");
                return;
            }
        }
        if (c->writing || c->out.len == 0)
            break;
        uv_buf_t b = uv_buf_init((char *)c->out.data, (unsigned)c->out.len);
        int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (w > 0) {
            sl_buf_consume(&c->out, (size_t)w);
            continue;
        }
        if (w < 0 && w != UV_EAGAIN) {
            conn_kill(c, -ECONNRESET, "write to peer failed");
            return;
        }
        /* the socket is full: hand the rest to libuv and keep producing into a fresh buffer */
        sl_buf tmp = c->wbuf;
        c->wbuf = c->out;
        c->out = tmp;
        sl_buf_reset(&c->out);
        b = uv_buf_init((char *)c->wbuf.data, (unsigned)c->wbuf.len);
        c->wreq.data = c;
        if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write)) {
            conn_kill(c, -ECONNRESET, "write to peer failed");
            return;
        }
        c->writing = true;
        break;
    }
    /* the peer said GOAWAY and everything on this connection is over: close it */
    if (c->goaway && !c->active.head && !c->abandoned.head && !c->writing && c->out.len == 0)
        conn_kill(c, -ECONNRESET, "connection closed");
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn *c = h->data;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = st->data;
    sl_peer *p = c->p;
    if (c->state == C_DEAD)
        return;
    if (nread < 0) {
        conn_kill(c, -ECONNRESET, nread == UV_EOF ? "peer closed the connection"
                                                  : "connection to peer broke");
        deliver(p);
        return;
    }
    if (nread > 0) {
        ssize_t r = nghttp2_session_mem_recv(c->sess, (const uint8_t *)buf->base, (size_t)nread);
        if (r < 0) {
            conn_kill(c, -EPROTO, "HTTP/2 protocol error from peer");
            deliver(p);
            return;
        }
        conn_flush(c);
        if (c->state != C_DEAD)
            rearm(c);
    }
    deliver(p);
}

static int submit(conn *c, pstream *s)
{
    nghttp2_nv nva[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)":path", (uint8_t *)s->path, 5, strlen(s->path), NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)":authority", (uint8_t *)c->p->addr, 10, strlen(c->p->addr),
         NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, NGHTTP2_NV_FLAG_NONE},
    };
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = body_read};
    int32_t id = nghttp2_submit_request(c->sess, NULL, nva, sizeof nva / sizeof nva[0], &prd, s);
    if (id < 0)
        return -ENOMEM;
    s->id = id;
    s->released = false;
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    conn *c = t->data;
    sl_peer *p = c->p;
    int64_t now = (int64_t)uv_now(p->loop);
    if (c->state != C_OPEN && now >= c->connect_deadline) {
        conn_kill(c, -ETIMEDOUT, "connect to peer timed out");
        deliver(p);
        return;
    }
    pstream *s;
    while ((s = c->active.head) && s->deadline <= now) {
        if (s->id > 0 && c->sess)
            nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        finish(s, -ETIMEDOUT, "peer call timed out");
    }
    if (c->abandoned.n > p->cfg.max_abandoned) {
        conn_kill(c, -ECONNRESET, "too many abandoned calls on the peer connection");
        deliver(p);
        return;
    }
    conn_flush(c);
    if (c->state != C_DEAD)
        rearm(c);
    deliver(p);
}

static void rearm(conn *c)
{
    int64_t next = INT64_MAX;
    if (c->state != C_OPEN)
        next = c->connect_deadline;
    if (c->active.head && c->active.head->deadline < next)
        next = c->active.head->deadline;
    if (next == INT64_MAX) {
        uv_timer_stop(&c->timer);
        return;
    }
    int64_t now = (int64_t)uv_now(c->p->loop);
    uv_timer_start(&c->timer, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

static void on_connect(uv_connect_t *req, int status)
{
    conn *c = req->data;
    sl_peer *p = c->p;
    if (c->state == C_DEAD)
        return;
    if (status < 0) {
        conn_kill(c, status == UV_ECONNREFUSED ? -ECONNREFUSED : -EHOSTUNREACH,
                  status == UV_ECONNREFUSED ? "connection refused by peer"
                                            : "cannot connect to peer");
        deliver(p);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (nghttp2_session_client_new(&c->sess, p->cbs, c)) {
        conn_kill(c, -ENOMEM, "out of memory");
        deliver(p);
        return;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)STREAM_WINDOW},
    };
    nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW);
    c->state = C_OPEN;
    c->was_open = true;
    p->st.connects++;
    p->backoff = p->cfg.backoff_min_ms;
    p->fail_until = 0;
    p->last_err = 0;
    for (pstream *s = c->active.head; s;) {
        pstream *nx = s->next;
        if (submit(c, s))
            finish(s, -ENOMEM, "out of memory");
        s = nx;
    }
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read)) {
        conn_kill(c, -ECONNRESET, "cannot read from peer");
        deliver(p);
        return;
    }
    conn_flush(c);
    if (c->state != C_DEAD)
        rearm(c);
    deliver(p);
}

static void start_connect(conn *c, const struct sockaddr *sa)
{
    c->state = C_CONNECTING;
    c->creq.data = c;
    int rc = uv_tcp_connect(&c->creq, &c->tcp, sa, on_connect);
    if (rc)
        conn_kill(c, -EHOSTUNREACH, "cannot connect to peer");
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    conn *c = req->data;
    c->gai_pending = false;
    sl_peer *p = c->p;
    if (c->state == C_DEAD) {
        uv_freeaddrinfo(res);
        if (c->handles == 0) {
            /* the handles closed while the lookup ran: finish what on_handle_closed skipped */
            c->handles = 1;
            on_handle_closed((uv_handle_t *)&c->tcp);
        }
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        conn_kill(c, -EHOSTUNREACH, "peer address does not resolve");
        deliver(p);
        return;
    }
    start_connect(c, res->ai_addr);
    uv_freeaddrinfo(res);
    if (c->state != C_DEAD)
        rearm(c);
    deliver(p);
}

static conn *conn_new(sl_peer *p)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->p = p;
    sl_buf_init(&c->out, 0);
    sl_buf_init(&c->wbuf, 0);
    uv_tcp_init(p->loop, &c->tcp);
    uv_timer_init(p->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    p->conns++;
    c->connect_deadline = (int64_t)uv_now(p->loop) + p->cfg.connect_timeout_ms;
    if (p->numeric) {
        start_connect(c, (const struct sockaddr *)&p->sa);
    } else {
        c->state = C_RESOLVING;
        c->gai.data = c;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        if (uv_getaddrinfo(p->loop, &c->gai, on_resolved, p->host, p->port, &hints) == 0)
            c->gai_pending = true;
        else
            conn_kill(c, -EHOSTUNREACH, "peer address does not resolve");
    }
    return c;
}

/* ---- public ---- */

int sl_peer_split_addr(const char *addr, char *host, size_t host_size, uint16_t *port)
{
    if (!addr || !*addr)
        return -EINVAL;
    const char *colon, *hs = addr, *he;
    if (addr[0] == '[') {
        he = strchr(addr, ']');
        if (!he || he[1] != ':')
            return -EINVAL;
        hs = addr + 1;
        colon = he + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || strchr(addr, ':') != colon)
            return -EINVAL;
        he = colon;
    }
    size_t hl = (size_t)(he - hs);
    if (hl == 0 || hl >= host_size)
        return -EINVAL;
    char *end;
    long v = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || v < 1 || v > 65535)
        return -EINVAL;
    memcpy(host, hs, hl);
    host[hl] = '\0';
    *port = (uint16_t)v;
    return 0;
}

int sl_peer_new(const sl_peer_config *cfg, sl_peer **out)
{
    *out = NULL;
    sl_net_ignore_sigpipe();
    sl_peer *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cfg = *cfg;
    if (!p->cfg.connect_timeout_ms)
        p->cfg.connect_timeout_ms = 1000;
    if (!p->cfg.backoff_min_ms)
        p->cfg.backoff_min_ms = 50;
    if (!p->cfg.backoff_max_ms)
        p->cfg.backoff_max_ms = 1000;
    if (!p->cfg.max_msg)
        p->cfg.max_msg = (size_t)4 << 20;
    if (!p->cfg.max_abandoned)
        p->cfg.max_abandoned = 1024;
    p->loop = cfg->loop;
    p->backoff = p->cfg.backoff_min_ms;
    uint16_t port;
    if (sl_peer_split_addr(cfg->addr, p->host, sizeof p->host, &port)) {
        free(p);
        return -EINVAL;
    }
    snprintf(p->port, sizeof p->port, "%u", port);
    if (uv_ip4_addr(p->host, port, (struct sockaddr_in *)&p->sa) == 0 ||
        uv_ip6_addr(p->host, port, (struct sockaddr_in6 *)&p->sa) == 0)
        p->numeric = true;
    p->addr = strdup(cfg->addr);
    if (!p->addr || nghttp2_session_callbacks_new(&p->cbs)) {
        free(p->addr);
        free(p);
        return -ENOMEM;
    }
    p->cfg.addr = p->addr;
    nghttp2_session_callbacks_set_on_header_callback(p->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(p->cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(p->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(p->cbs, on_stream_close);
    *out = p;
    return 0;
}

int sl_peer_call(sl_peer *p, const char *path, sl_buf *framed, int64_t timeout_ms, sl_peer_cb cb,
                 void *ud)
{
    if (p->closing)
        return -ECANCELED;
    if (strlen(path) >= sizeof ((pstream *)0)->path)
        return -EINVAL;
    conn *c = p->cur;
    if (!c) {
        if ((int64_t)uv_now(p->loop) < p->fail_until)
            return p->last_err ? p->last_err : -ECONNREFUSED;
        c = conn_new(p);
        if (!c)
            return -ENOMEM;
        if (c->state == C_DEAD) {
            deliver(p);
            return p->last_err ? p->last_err : -EHOSTUNREACH;
        }
        p->cur = c;
    }
    pstream *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->c = c;
    s->released = true; /* nghttp2 knows nothing of it yet */
    s->grpc_status = -1;
    s->cb = cb;
    s->ud = ud;
    s->deadline = (int64_t)uv_now(p->loop) + (timeout_ms > 0 ? timeout_ms : 1);
    snprintf(s->path, sizeof s->path, "%s", path);
    sl_buf_init(&s->resp, p->cfg.max_msg + SL_GRPC_HDR_LEN + 1);
    s->req = *framed;
    if (c->state == C_OPEN && submit(c, s)) {
        free(s);
        return -ENOMEM;
    }
    sl_buf_init(framed, framed->cap);
    list_push_sorted(&c->active, s, L_ACTIVE);
    p->inflight++;
    p->st.calls++;
    if (c->state == C_OPEN)
        conn_flush(c);
    if (c->state != C_DEAD)
        rearm(c);
    return 0;
}

void sl_peer_close(sl_peer *p)
{
    if (!p || p->closing)
        return;
    p->closing = true;
    p->depth++;
    while (p->cur)
        conn_kill(p->cur, -ECANCELED, "peer client closed");
    while (p->draining)
        conn_kill(p->draining, -ECANCELED, "peer client closed");
    p->depth--;
    deliver(p);
}

const char *sl_peer_addr(const sl_peer *p)
{
    return p->addr;
}

size_t sl_peer_inflight(const sl_peer *p)
{
    return p->inflight;
}

bool sl_peer_connected(const sl_peer *p)
{
    return p->cur && p->cur->state == C_OPEN;
}

void sl_peer_stats_get(const sl_peer *p, sl_peer_stats *out)
{
    *out = p->st;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer client (see peer.h). Structure:
 *
 *   sl_peer ── cur: conn (the one new calls go to) ── draining: conns that got a GOAWAY
 *      │                 │
 *      └─ done queue     └─ socket (uv_poll_t) + sans-I/O HTTP/2 session (h2client/h2client.h)
 *
 * The session does the protocol, the deadlines and the stream bookkeeping (a call that timed out
 * is completed at once and reset, its memory waits in the session for nghttp2's close). This
 * file owns the socket: a non-blocking TCP socket watched by a uv_poll_t, read and written by
 * h2client/h2sock.c with send(MSG_NOSIGNAL), so a peer that hung up is EPIPE for this connection and
 * never a SIGPIPE for the process, on whichever thread the embedder runs the loop (libuv's own
 * stream writes use write(2), which raises SIGPIPE: see docs/architecture.md).
 *
 * The session completes a call by handing its answer to on_answer(), which keeps what the result
 * needs (it takes the body's memory) and queues the call; queued calls are delivered at the end
 * of each libuv callback, so user code never runs inside the session or nghttp2.
 *
 * With a TLS context (cfg.tls) the same session runs over a TLS session (tls/tls.h) between it
 * and the socket: the handshake starts when TCP connects, frames written before it completes wait
 * in `out`, and the peer's certificate must chain to the context's CA.
 */
#include "cluster/peer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth/peersig.h"
#include "h2client/h2client.h"
#include "h2client/h2sock.h"
#include "sluice/clock.h"
#include "tls/tls.h"
#include "wire/grpc_frame.h"

#define READ_BUF 16384
#define READS_PER_EVENT 64
#define OUT_HIGH_WATER ((size_t)4 << 20)
#define STREAM_WINDOW ((uint32_t)4 << 20)
#define CONN_WINDOW ((uint32_t)16 << 20)
#define MAX_PATH 96

enum { C_RESOLVING, C_CONNECTING, C_OPEN, C_DEAD };

typedef struct conn conn;

typedef struct pcall {
    struct pcall *next;
    conn *c;
    sl_peer_cb cb;
    void *ud;
    int err;
    const char *err_text;
    int http_status;
    int grpc_status;         /* -1 until seen */
    char grpc_message[256];
    sl_buf resp;
    sl_peer_http_cb hcb;     /* sl_peer_http(): the answer as it came, not gRPC */
    sl_h2c_field *fields;    /* its response fields, one allocation with their bytes */
    size_t nfields;
} pcall;

struct conn {
    sl_peer *p;
    conn *next_draining;
    int state;
    bool goaway, gai_pending, was_open, poll_init;
    int handles;
    int fd;
    int events;              /* what the poll handle watches */
    int early_err;           /* the connect failed before any callback: reported by the timer */
    int kill_err;
    const char *kill_why;
    uv_poll_t poll;
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    sl_h2c *sess;
    int64_t connect_deadline;
    sl_buf out;
    sl_tls *tls;             /* TLS to the peer, or NULL */
    uint8_t rbuf[READ_BUF];
    uint8_t plain[READ_BUF]; /* TLS: plaintext of the record being read */
};

struct sl_peer {
    uv_loop_t *loop;
    char *addr;
    char *sender;            /* cfg.sender, copied (signed calls) */
    char host[256];
    char port[8];
    struct sockaddr_storage sa;
    struct sockaddr_storage src; /* cfg.source_ip, port 0; ss_family 0 when none */
    bool numeric;
    sl_peer_config cfg;
    conn *cur;
    conn *draining;
    pcall *done_head, *done_tail;
    int conns;
    int depth;               /* >0 while delivering: do not free */
    bool closing;
    int64_t fail_until, backoff;
    int last_err;
    size_t inflight;
    sl_peer_stats st;
};

/* ---- completion ---- */

static void conn_flush(conn *c);
static void conn_kill(conn *c, int err, const char *why);
static void rearm(conn *c);
static void on_poll(uv_poll_t *h, int status, int events);

static const char *err_text(int err)
{
    switch (err) {
    case -ETIMEDOUT:
        return "peer call timed out";
    case -ECONNREFUSED:
        return "peer refused the stream";
    case -ECONNRESET:
        return "peer reset the stream";
    case -EMSGSIZE:
        return "peer answer larger than the limit";
    case -EPROTO:
        return "peer answered with a malformed :status";
    case -ENOMEM:
        return "out of memory";
    default:
        return "peer call failed";
    }
}

/* An HTTP call's response fields, copied (they live during the session's callback only): at
 * most SL_PEER_HTTP_MAX_FIELDS, within the session's header-bytes cap. Out of memory: none. */
static void keep_fields(pcall *k, const sl_h2c_resp *r)
{
    size_t n = r->nfields < SL_PEER_HTTP_MAX_FIELDS ? r->nfields : SL_PEER_HTTP_MAX_FIELDS;
    size_t bytes = n * sizeof(sl_h2c_field);
    for (size_t i = 0; i < n; i++)
        bytes += r->fields[i].name_len + r->fields[i].value_len + 2;
    if (!n || !(k->fields = malloc(bytes)))
        return;
    char *p = (char *)(k->fields + n);
    for (size_t i = 0; i < n; i++) {
        const sl_h2c_field *f = &r->fields[i];
        sl_h2c_field *g = &k->fields[i];
        memcpy(p, f->name, f->name_len);
        p[f->name_len] = '\0';
        g->name = p;
        g->name_len = f->name_len;
        p += f->name_len + 1;
        memcpy(p, f->value, f->value_len);
        p[f->value_len] = '\0';
        g->value = p;
        g->value_len = f->value_len;
        p += f->value_len + 1;
    }
    k->nfields = n;
}

/* The session finished a call: keep what the result needs and queue it for delivery. */
static void on_answer(void *ud, const sl_h2c_resp *r)
{
    pcall *k = ud;
    conn *c = k->c;
    sl_peer *p = c->p;
    k->err = r->err;
    if (r->err)
        k->err_text = c->state == C_DEAD && r->err == c->kill_err ? c->kill_why : err_text(r->err);
    k->http_status = r->status;
    if (k->hcb)
        keep_fields(k, r);
    k->grpc_status = sl_h2c_grpc_status(r);
    const sl_h2c_field *m = sl_h2c_resp_find(r, "grpc-message");
    if (m) {
        sl_buf b;
        sl_buf_init(&b, 4096);
        if (sl_grpc_message_decode(m->value, m->value_len, &b) == 0)
            snprintf(k->grpc_message, sizeof k->grpc_message, "%.*s", (int)b.len,
                     (const char *)b.data);
        sl_buf_free(&b);
    }
    k->resp = *r->body; /* take the body's memory */
    sl_buf_init(r->body, 0);
    k->next = NULL;
    if (p->done_tail)
        p->done_tail->next = k;
    else
        p->done_head = k;
    p->done_tail = k;
}

static void build_result(sl_peer *p, pcall *s, sl_peer_result *r)
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
    if (p->closing && p->conns == 0 && p->depth == 0 && !p->done_head) {
        free(p->addr);
        free(p->sender);
        free(p);
    }
}

static void deliver(sl_peer *p)
{
    if (p->depth)
        return; /* the outer delivery loop picks new entries up */
    p->depth++;
    pcall *k;
    while ((k = p->done_head)) {
        p->done_head = k->next;
        if (!p->done_head)
            p->done_tail = NULL;
        p->inflight--;
        if (k->err == -ETIMEDOUT)
            p->st.timeouts++;
        if (k->hcb) {
            sl_peer_http_result h = {.err = k->err, .message = k->err_text ? k->err_text : "",
                                     .status = k->http_status, .fields = k->fields,
                                     .nfields = k->nfields, .body = k->resp.data,
                                     .len = k->resp.len};
            if (k->err)
                p->st.failed++;
            else
                p->st.ok++;
            k->hcb(k->ud, &h);
        } else {
            sl_peer_result r;
            build_result(p, k, &r);
            if (r.err == 0 && r.grpc_status == 0)
                p->st.ok++;
            else
                p->st.failed++;
            k->cb(k->ud, &r);
        }
        sl_buf_free(&k->resp);
        free(k->fields);
        free(k);
    }
    p->depth--;
    maybe_free_peer(p);
}
/* ---- connection ---- */

static void on_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->handles > 0 || c->gai_pending)
        return;
    sl_peer *p = c->p;
    if (c->fd >= 0)
        close(c->fd); /* only now: libuv no longer watches it */
    sl_buf_free(&c->out);
    sl_tls_free(c->tls);
    free(c);
    p->conns--;
    deliver(p); /* calls a write failure inside sl_peer_call() failed; frees a closed peer */
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
    c->kill_err = err;
    c->kill_why = why;
    unlink_conn(c);
    sl_h2c *sess = c->sess;
    c->sess = NULL;
    sl_h2c_free(sess, err); /* queues every call still waiting, with err */
    if (never_open) {
        p->st.connect_failures++;
        p->fail_until = (int64_t)uv_now(p->loop) + p->backoff;
        p->backoff = p->backoff * 2 > p->cfg.backoff_max_ms ? p->cfg.backoff_max_ms : p->backoff * 2;
    }
    p->last_err = err;
    if (c->gai_pending)
        uv_cancel((uv_req_t *)&c->gai);
    if (c->poll_init)
        uv_close((uv_handle_t *)&c->poll, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void watch(conn *c, int events)
{
    if (c->state == C_DEAD || !c->poll_init || events == c->events)
        return;
    c->events = events;
    if (uv_poll_start(&c->poll, events, on_poll) != 0)
        conn_kill(c, -ECONNRESET, "cannot watch the peer connection");
}

static void conn_flush(conn *c)
{
    if (c->state != C_OPEN)
        return;
    int rc = c->tls ? sl_h2sock_tls_write(c->sess, c->tls, c->fd, &c->out, OUT_HIGH_WATER)
                    : sl_h2sock_write(c->sess, c->fd, &c->out, OUT_HIGH_WATER);
    if (rc < 0) {
        if (rc == -EPROTO || rc == -ENOMEM)
            conn_kill(c, rc, rc == -ENOMEM ? "out of memory" : "HTTP/2 session error");
        else
            conn_kill(c, -ECONNRESET, "write to peer failed");
        return;
    }
    /* the peer said GOAWAY (or ended the session) and everything on it is over: close it */
    /* unsent: what waits for the socket (with TLS, the ciphertext; plaintext waits for it) */
    size_t unsent = c->tls ? sl_tls_out(c->tls)->len : c->out.len;
    if ((c->goaway || sl_h2c_over(c->sess)) && sl_h2c_pending(c->sess) == 0 &&
        sl_h2c_abandoned(c->sess) == 0 && c->out.len == 0 && unsent == 0) {
        conn_kill(c, -ECONNRESET, "connection closed");
        return;
    }
    watch(c, UV_READABLE | (unsent ? UV_WRITABLE : 0));
}

static void note_goaway(conn *c)
{
    if (c->goaway || !c->sess || !sl_h2c_goaway(c->sess))
        return;
    c->goaway = true;
    sl_peer *p = c->p;
    if (p->cur == c) {
        p->cur = NULL;
        c->next_draining = p->draining;
        p->draining = c;
    }
}

/* A TLS connection is connecting until its handshake is done: the connect deadline covers it, and
 * a failed handshake is a failed connect (backoff), not a broken connection. */
static bool connecting(const conn *c)
{
    return c->state != C_OPEN || (c->tls && !sl_tls_ready(c->tls));
}

static void tls_failed(conn *c)
{
    if (connecting(c))
        c->was_open = false;
    conn_kill(c, -ECONNRESET, "TLS with peer failed (handshake or certificate)");
}

static void do_read(conn *c)
{
    int rc = c->tls ? sl_h2sock_tls_read(c->sess, c->tls, c->fd, c->rbuf, sizeof c->rbuf, c->plain,
                                         sizeof c->plain, READS_PER_EVENT)
                    : sl_h2sock_read(c->sess, c->fd, c->rbuf, sizeof c->rbuf, READS_PER_EVENT);
    if (rc == -EKEYREJECTED)
        tls_failed(c);
    else if (rc == -EPROTO)
        conn_kill(c, -EPROTO, "HTTP/2 protocol error from peer");
    else if (rc == -ECONNRESET)
        conn_kill(c, -ECONNRESET, "peer closed the connection");
    else if (rc < 0)
        conn_kill(c, -ECONNRESET, "connection to peer broke");
    else
        note_goaway(c);
}

static void on_open(conn *c)
{
    sl_peer *p = c->p;
    c->state = C_OPEN;
    c->was_open = true;
    p->st.connects++;
    p->backoff = p->cfg.backoff_min_ms;
    p->fail_until = 0;
    p->last_err = 0;
    if (c->tls && sl_tls_read(c->tls, NULL, 0) < 0) /* the ClientHello, sent by conn_flush */
        tls_failed(c);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    conn *c = h->data;
    sl_peer *p = c->p;
    if (c->state == C_DEAD)
        return;
    if (c->state == C_CONNECTING) {
        int rc = status < 0 ? -ECONNREFUSED : sl_h2sock_connect_result(c->fd);
        if (rc == -EAGAIN) {
            deliver(p);
            return;
        }
        if (rc < 0) {
            conn_kill(c, rc == -ECONNREFUSED ? -ECONNREFUSED : -EHOSTUNREACH,
                      rc == -ECONNREFUSED ? "connection refused by peer" : "cannot connect to peer");
            deliver(p);
            return;
        }
        on_open(c);
    } else if (status < 0) {
        conn_kill(c, -ECONNRESET, "connection to peer broke");
        deliver(p);
        return;
    } else if (events & UV_READABLE) {
        do_read(c);
    }
    conn_flush(c);
    if (c->state != C_DEAD)
        rearm(c);
    deliver(p);
}

static void on_timer(uv_timer_t *t)
{
    conn *c = t->data;
    sl_peer *p = c->p;
    int64_t now = (int64_t)uv_now(p->loop);
    if (c->state != C_OPEN && c->early_err) {
        conn_kill(c, c->early_err, c->early_err == -ECONNREFUSED ? "connection refused by peer"
                                                                 : "cannot connect to peer");
        deliver(p);
        return;
    }
    if (connecting(c) && now >= c->connect_deadline) {
        conn_kill(c, -ETIMEDOUT, "connect to peer timed out");
        deliver(p);
        return;
    }
    sl_h2c_expire(c->sess, now);
    if (sl_h2c_abandoned(c->sess) > p->cfg.max_abandoned) {
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
    int64_t next = sl_h2c_next_deadline(c->sess);
    if (connecting(c) && c->connect_deadline < next)
        next = c->connect_deadline;
    if (c->early_err)
        next = 0;
    if (next == INT64_MAX) {
        uv_timer_stop(&c->timer);
        return;
    }
    int64_t now = (int64_t)uv_now(c->p->loop);
    uv_timer_start(&c->timer, on_timer, (uint64_t)(next > now ? next - now : 0), 0);
}

/* A connect that failed at once is reported from the timer, like one that fails later, so the
 * call that started it still returns 0 and gets its answer through the callback. */
static void connect_failed_early(conn *c, int err)
{
    c->early_err = err == -ECONNREFUSED ? -ECONNREFUSED : -EHOSTUNREACH;
}

static void start_connect(conn *c, const struct sockaddr *sa, socklen_t salen)
{
    c->state = C_CONNECTING;
    bool now;
    const struct sockaddr *src = (const struct sockaddr *)&c->p->src;
    c->fd = sl_h2sock_connect_from(sa, salen, src->sa_family ? src : NULL,
                                   src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                              : sizeof(struct sockaddr_in),
                                   &now);
    if (c->fd < 0) {
        connect_failed_early(c, c->fd);
        c->fd = -1;
        return;
    }
    if (uv_poll_init_socket(c->p->loop, &c->poll, c->fd) != 0) {
        connect_failed_early(c, -EHOSTUNREACH);
        return;
    }
    c->poll.data = c;
    c->poll_init = true;
    c->handles++;
    c->events = UV_WRITABLE; /* also when connected at once: on_poll opens it */
    if (uv_poll_start(&c->poll, UV_WRITABLE, on_poll) != 0)
        connect_failed_early(c, -EHOSTUNREACH);
}

static socklen_t sa_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
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
            on_handle_closed((uv_handle_t *)&c->timer);
        }
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        conn_kill(c, -EHOSTUNREACH, "peer address does not resolve");
        deliver(p);
        return;
    }
    start_connect(c, res->ai_addr, res->ai_addrlen);
    uv_freeaddrinfo(res);
    rearm(c);
    deliver(p);
}

static conn *conn_new(sl_peer *p)
{
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    sl_h2c_config hc = {.max_body = p->cfg.max_msg + SL_GRPC_HDR_LEN,
                        .stream_window = STREAM_WINDOW, .conn_window = CONN_WINDOW};
    if (sl_h2c_new(&hc, &c->sess) != 0) {
        free(c);
        return NULL;
    }
    /* the peer's certificate must name the host we called (its IP SAN for a numeric address) */
    if (p->cfg.tls && !(c->tls = sl_tls_slot_session(p->cfg.tls, p->host))) {
        sl_h2c_free(c->sess, -ENOMEM);
        free(c);
        return NULL;
    }
    c->p = p;
    c->fd = -1;
    sl_buf_init(&c->out, 0);
    uv_timer_init(p->loop, &c->timer);
    c->timer.data = c;
    c->handles = 1;
    p->conns++;
    c->connect_deadline = (int64_t)uv_now(p->loop) + p->cfg.connect_timeout_ms;
    if (p->numeric) {
        start_connect(c, (const struct sockaddr *)&p->sa, sa_len((const struct sockaddr *)&p->sa));
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
    if (cfg->source_ip && cfg->source_ip[0] &&
        uv_ip4_addr(cfg->source_ip, 0, (struct sockaddr_in *)&p->src) != 0 &&
        uv_ip6_addr(cfg->source_ip, 0, (struct sockaddr_in6 *)&p->src) != 0)
        memset(&p->src, 0, sizeof p->src); /* not numeric: no bind */
    p->cfg.source_ip = NULL; /* the caller's string is not kept */
    if (uv_ip4_addr(p->host, port, (struct sockaddr_in *)&p->sa) == 0 ||
        uv_ip6_addr(p->host, port, (struct sockaddr_in6 *)&p->sa) == 0)
        p->numeric = true;
    p->addr = strdup(cfg->addr);
    p->sender = cfg->sig && cfg->sender ? strdup(cfg->sender) : NULL;
    if (!p->addr || (cfg->sig && !p->sender)) {
        free(p->addr);
        free(p->sender);
        free(p);
        return cfg->sig && !cfg->sender ? -EINVAL : -ENOMEM;
    }
    p->cfg.addr = p->addr;
    p->cfg.sender = p->sender;
    *out = p;
    return 0;
}

/* Start call k (its callback set) as `req` on the current connection, opening one if needed.
 * 0, or a negative errno with k freed and the body not taken. */
static int submit(sl_peer *p, pcall *k, sl_h2c_req *req, int64_t timeout_ms)
{
    req->authority = p->addr;
    req->deadline = (int64_t)uv_now(p->loop) + (timeout_ms > 0 ? timeout_ms : 1);
    conn *c;
    int rc;
    for (int attempt = 0;; attempt++) {
        c = p->cur;
        if (!c) {
            rc = (int64_t)uv_now(p->loop) < p->fail_until ? (p->last_err ? p->last_err
                                                                         : -ECONNREFUSED)
                                                          : 0;
            if (!rc && !(c = conn_new(p)))
                rc = -ENOMEM;
            if (!rc && c->state == C_DEAD) {
                deliver(p);
                rc = p->last_err ? p->last_err : -EHOSTUNREACH;
            }
            if (rc) {
                free(k);
                return rc;
            }
            p->cur = c;
        }
        k->c = c;
        rc = sl_h2c_submit(c->sess, req, on_answer, k);
        if (rc != -EAGAIN || attempt)
            break;
        /* no new stream fits on this connection: let it drain, open another */
        c->goaway = true;
        p->cur = NULL;
        c->next_draining = p->draining;
        p->draining = c;
    }
    if (rc < 0) {
        free(k);
        return rc == -EAGAIN ? -ECONNRESET : rc;
    }
    p->inflight++;
    p->st.calls++;
    conn_flush(c);
    if (c->state != C_DEAD)
        rearm(c);
    return 0;
}

int sl_peer_call(sl_peer *p, const char *path, sl_buf *framed, int64_t timeout_ms, sl_peer_cb cb,
                 void *ud)
{
    if (p->closing)
        return -ECANCELED;
    if (strlen(path) >= MAX_PATH)
        return -EINVAL;
    char sig[SL_PEERSIG_VALUE_MAX];
    sl_h2c_field hdrs[3] = {
        {"content-type", 12, "application/grpc", 16},
        {"te", 2, "trailers", 8},
    };
    size_t nh = 2;
    if (p->cfg.sig) { /* the cluster secret's proof (docs/cluster.md, "Peer authentication") */
        sl_peersig_keys *keys = sl_peersig_get(p->cfg.sig);
        int n = keys ? sl_peersig_sign(keys, path, strlen(path), sl_wall_ms(), p->sender,
                                       framed->data, framed->len, sig, sizeof sig)
                     : -ENOKEY;
        sl_peersig_keys_unref(keys);
        if (n < 0)
            return n;
        hdrs[nh++] = (sl_h2c_field){SL_PEERSIG_HEADER, sizeof SL_PEERSIG_HEADER - 1, sig,
                                    (size_t)n};
    }
    pcall *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    k->cb = cb;
    k->ud = ud;
    k->grpc_status = -1;
    sl_h2c_req req = {.method = "POST", .path = path, .headers = hdrs, .nheaders = nh,
                      .body = framed};
    return submit(p, k, &req, timeout_ms);
}

int sl_peer_http(sl_peer *p, const char *method, const char *path, const sl_h2c_field *headers,
                 size_t nheaders, sl_buf *body, int64_t timeout_ms, sl_peer_http_cb cb, void *ud)
{
    if (p->closing)
        return -ECANCELED;
    if (strlen(path) >= MAX_PATH)
        return -EINVAL;
    pcall *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    k->hcb = cb;
    k->ud = ud;
    k->grpc_status = -1;
    sl_h2c_req req = {.method = method, .path = path, .headers = headers, .nheaders = nheaders,
                      .body = body};
    return submit(p, k, &req, timeout_ms);
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The libuv shell around the sans-I/O connections (see server.h).
 *
 * Per worker: a loop, a listener (net/listener.c: a listening socket of the SO_REUSEPORT group,
 * accept4 from a uv_poll_t, paused with backoff at the file limit), one 64 KiB read buffer (a
 * read is processed before the next one is allocated), a prepare handle that flushes connections
 * whose answers arrived outside a read callback, and one ticking timer that walks per-phase
 * timeout lists (net/timeouts.h).
 * Every connection sits in exactly one list (idle, reading, writing, lingering, busy; writing is
 * also where an HTTP/2 connection waits for a client that keeps its flow-control window shut,
 * SL_CONN_WRITING, so one that will not read is closed after the write timeout); within a
 * list all entries share one timeout and are appended when they enter, so the list is in deadline
 * order and the tick only looks at heads.
 *
 * The async handle (shutdown requests and posted closures) is unreferenced, so the loop ends when
 * everything else is closed; it is closed only in sl_server_free, after the threads are joined,
 * which makes uv_async_send from a signal handler safe at any time before free.
 */
#include "net/server.h"

#include <errno.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/conn.h"
#include "net/listener.h"
#include "net/timeouts.h"

enum { TL_IDLE, TL_READING, TL_WRITING, TL_LINGER, TL_BUSY, TL_HANDSHAKE, TL_COUNT };

#define READ_BUF_SIZE (64 * 1024)
/* Output buffers above this are released once written, so one large answer does not pin
 * memory for the connection's lifetime. */
#define KEEP_OUT_BYTES (256 * 1024)
#define WBUF_CAP ((size_t)64 << 20)
/* Plaintext out of one TLS read: a record's worth. */
#define TLS_PLAIN_BUF (16 * 1024)

enum { TS_HANDSHAKES, TS_PLAINTEXT, TS_CERT, TS_PROTOCOL, TS_TIMED_OUT, TS_RELOADS, TS_COUNT };

typedef struct worker worker;
typedef struct sconn sconn;

struct sconn {
    uv_tcp_t tcp;
    worker *w;
    sl_conn *c;
    sl_buf wbuf;        /* bytes of the uv_write in flight */
    size_t woff;        /* part of wbuf the socket took before uv_write */
    uv_write_t wreq;
    uv_shutdown_t sreq;
    sl_tnode tn;        /* its place in the worker's timeout lists (net/timeouts.h) */
    uint64_t tprog;
    sconn *dnext;
    uint64_t nwrites;
    sl_tls *tls;        /* TLS session; NULL on a plaintext server */
    bool dirty, writing, reading, closing, shut, eof, counted, tls_ready;
};

typedef struct post_item {
    struct post_item *next;
    void (*fn)(void *ud);
    void *ud;
} post_item;

struct worker {
    sl_server *srv;
    int idx;
    uv_loop_t loop;
    sl_listener listener;
    sl_listener ux[SL_SERVER_MAX_UNIX]; /* the --listen-unix sockets (a dup of each per worker) */
    size_t ux_init;                     /* of them, initialised on the loop */
    uv_async_t async;
    uv_prepare_t prepare;
    uv_timer_t tick;
    uv_timer_t drain_timer;
    uv_thread_t thread;
    bool loop_init, handles_init, thread_started;
    bool draining, finished;
    sl_http_ctx *ctx;
    sl_tlist lists[TL_COUNT];
    uint32_t timeout[TL_COUNT];
    sconn *dirty;
    uint32_t nconns;
    uint64_t shed_at;   /* loop ms + 1 of the last shed_worst walk */
    uv_mutex_t post_mu;
    post_item *post_head, *post_tail;
    bool post_closed;
    char rbuf[READ_BUF_SIZE];
    char tbuf[TLS_PLAIN_BUF]; /* TLS: plaintext of the read being processed */
};

struct sl_server {
    sl_server_config cfg;
    int nworkers;
    worker *workers;
    uint16_t port;
    _Atomic uint32_t open;
    _Atomic int shutdown_req;
    _Atomic uint32_t grace_ms;
    sl_tls_slot *tls;   /* the context for new connections (replaced on reload); NULL: plaintext */
    sl_reqmem reqmem;   /* request bytes buffered by every worker's connections */
    _Atomic uint64_t tls_stat[TS_COUNT];
    char *unix_path;    /* a copy of cfg.unix_path once bound there: the file removed at free */
    char *ux_path[SL_SERVER_MAX_UNIX]; /* cfg.unix_extra once bound: removed at free */
    size_t n_ux;
};

void sl_server_config_defaults(sl_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->host = "0.0.0.0";
    cfg->workers = 1;
    cfg->backlog = 1024;
    cfg->max_conns = 10000;
    cfg->idle_timeout_ms = 60000;
    cfg->read_timeout_ms = 30000;
    cfg->write_timeout_ms = 30000;
    cfg->linger_ms = 2000;
    cfg->tls_handshake_timeout_ms = 10000;
    sl_http_limits_defaults(&cfg->limits);
}

/* ---- timeout lists ---- */

static inline sconn *sc_of(sl_tnode *n)
{
    return n ? (sconn *)((char *)n - offsetof(sconn, tn)) : NULL;
}

static inline void tl_remove(worker *w, sconn *sc)
{
    sl_timeouts_remove(w->lists, &sc->tn);
}

static inline void tl_append(worker *w, sconn *sc, int which)
{
    sl_timeouts_append(w->lists, &sc->tn, which, uv_now(&w->loop));
}

/* ---- connections ---- */

static void maybe_finish(worker *w);

static void on_closed(uv_handle_t *h)
{
    sconn *sc = h->data;
    worker *w = sc->w;
    if (sc->counted) {
        atomic_fetch_sub(&w->srv->open, 1);
        sl_net_stat_add(w->ctx, SL_NET_CONNS_OPEN, (uint64_t)-1);
        w->nconns--;
    }
    sl_buf_free(&sc->wbuf);
    free(sc);
    maybe_finish(w);
}

static void close_now(sconn *sc)
{
    if (sc->closing)
        return;
    worker *w = sc->w;
    sc->closing = true;
    if (sc->dirty) {
        for (sconn **pp = &w->dirty; *pp; pp = &(*pp)->dnext)
            if (*pp == sc) {
                *pp = sc->dnext;
                break;
            }
        sc->dirty = false;
    }
    tl_remove(w, sc);
    /* Detach the exchanges now, so handlers learn at once that the client is gone. */
    sl_conn_free(sc->c);
    sc->c = NULL;
    sl_tls_free(sc->tls); /* after the conn: it points at the session's peer identity */
    sc->tls = NULL;
    uv_close((uv_handle_t *)&sc->tcp, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    sconn *sc = h->data;
    buf->base = sc->w->rbuf;
    buf->len = READ_BUF_SIZE;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void conn_progress(sconn *sc);

static void set_reading(sconn *sc, bool want)
{
    if (want == sc->reading)
        return;
    if (want) {
        if (uv_read_start((uv_stream_t *)&sc->tcp, on_alloc, on_read) == 0)
            sc->reading = true;
    } else {
        uv_read_stop((uv_stream_t *)&sc->tcp);
        sc->reading = false;
    }
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    sconn *sc = req->data;
    if (sc->closing)
        return;
    if (status < 0 || sc->eof)
        close_now(sc);
}

static int send_direct(sconn *sc, const uint8_t *data, size_t len);

/* Everything is answered and written: send FIN, then read and drop until the client closes (or
 * the linger timeout), so unread input does not turn our close into a reset that could destroy
 * the last answer on its way. */
static void begin_shut(sconn *sc)
{
    worker *w = sc->w;
    if (sc->shut)
        return;
    sc->shut = true;
    if (sc->tls && sc->tls_ready) {
        /* TLS: a close_notify before the FIN, best effort (a few bytes on an idle socket) */
        sl_tls_close(sc->tls);
        sl_buf *o = sl_tls_out(sc->tls);
        if (o->len > 0)
            send_direct(sc, o->data, o->len);
        sl_buf_reset(o);
    }
    tl_remove(w, sc);
    tl_append(w, sc, TL_LINGER);
    sc->sreq.data = sc;
    if (uv_shutdown(&sc->sreq, (uv_stream_t *)&sc->tcp, on_shutdown) != 0) {
        close_now(sc);
        return;
    }
    if (!sc->eof)
        set_reading(sc, true);
}

static void on_write(uv_write_t *req, int status)
{
    sconn *sc = req->data;
    worker *w = sc->w;
    sc->writing = false;
    sc->nwrites++;
    if (sc->closing)
        return;
    if (status < 0) {
        close_now(sc);
        return;
    }
    sl_net_stat_add(w->ctx, SL_NET_BYTES_OUT, sc->wbuf.len - sc->woff);
    if (sc->wbuf.alloc > KEEP_OUT_BYTES)
        sl_buf_free(&sc->wbuf);
    else
        sl_buf_reset(&sc->wbuf);
    sl_conn_pump(sc->c);
    conn_progress(sc);
}

/* Write what the connection produced: straight to the socket when it takes it all (the common
 * case), otherwise the rest goes to a queued uv_write and output keeps accumulating meanwhile.
 *
 * SIGPIPE: the library must not change the process's disposition, and libuv writes streams with
 * write(2)/writev(2), which raise SIGPIPE when the peer has gone (Linux has no SO_NOSIGPIPE). So
 * the direct write is our own send(MSG_NOSIGNAL) on the handle's socket — nothing is queued on
 * the handle when we get here (!writing), so bypassing uv_try_write keeps the byte order — and
 * the uv_write that carries a remainder runs on a worker thread, which blocks SIGPIPE for itself
 * (worker_main): a signal it raises stays pending on that thread and the write fails with EPIPE. */
static int send_direct(sconn *sc, const uint8_t *data, size_t len)
{
    uv_os_fd_t fd;
    if (uv_fileno((const uv_handle_t *)&sc->tcp, &fd) != 0)
        return UV_EBADF;
    for (;;) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n >= 0)
            return (int)(n > INT32_MAX ? INT32_MAX : n);
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
}

static void flush(sconn *sc)
{
    if (sc->writing)
        return;
    sl_buf *out = sl_conn_out(sc->c);
    if (sc->tls) {
        /* Seal the plaintext; what goes to the socket is the session's output. */
        if (out->len && sc->tls_ready) {
            ssize_t k = sl_tls_write(sc->tls, out->data, out->len);
            if (k < 0) {
                close_now(sc);
                return;
            }
            sl_buf_consume(out, (size_t)k);
        }
        out = sl_tls_out(sc->tls);
    }
    if (!out->len)
        return;
    int n = send_direct(sc, out->data, out->len);
    if (n < 0) {
        close_now(sc);
        return;
    }
    if ((size_t)n == out->len) {
        sl_net_stat_add(sc->w->ctx, SL_NET_BYTES_OUT, (uint64_t)n);
        if (out->alloc > KEEP_OUT_BYTES)
            sl_buf_free(out);
        else
            sl_buf_reset(out);
        return;
    }
    sl_net_stat_add(sc->w->ctx, SL_NET_BYTES_OUT, (uint64_t)n);
    sl_buf tmp = sc->wbuf;
    sc->wbuf = *out;
    *out = tmp;
    sl_buf_reset(out);
    sc->woff = (size_t)n;
    uv_buf_t rest = uv_buf_init((char *)sc->wbuf.data + n, (unsigned)(sc->wbuf.len - (size_t)n));
    sc->wreq.data = sc;
    if (uv_write(&sc->wreq, (uv_stream_t *)&sc->tcp, &rest, 1, on_write) != 0) {
        close_now(sc);
        return;
    }
    sc->writing = true;
}

static void timer_update(sconn *sc)
{
    worker *w = sc->w;
    int want;
    uint64_t prog;
    if (sc->shut)
        return; /* stays in LINGER */
    if (sc->writing) {
        want = TL_WRITING;
        prog = sc->nwrites + sc->c->produced;
    } else if (sc->tls && !sc->tls_ready) {
        want = TL_HANDSHAKE;
        prog = 0;
    } else {
        sl_conn_phase ph = sl_conn_phase_get(sc->c);
        want = ph == SL_CONN_IDLE      ? TL_IDLE
               : ph == SL_CONN_READING ? TL_READING
               : ph == SL_CONN_WRITING ? TL_WRITING
                                       : TL_BUSY;
        prog = ph == SL_CONN_WRITING ? sc->nwrites + sc->c->produced : sc->c->completed;
        if (want == TL_READING && sc->c->read_since) {
            /* HTTP/2: the deadline of the oldest stream still being received, from when that
             * stream began (not from when another one completed). */
            uint64_t now = uv_now(&w->loop);
            int64_t t = sc->c->read_since - w->ctx->wall_offset;
            uint64_t stamp = t < 0 ? 0 : (uint64_t)t > now ? now : (uint64_t)t;
            if (sc->tn.list != TL_READING || sc->tn.stamp != stamp) {
                tl_remove(w, sc);
                sl_timeouts_insert(w->lists, &sc->tn, TL_READING, stamp);
            }
            sc->tprog = prog;
            return;
        }
    }
    if (want != sc->tn.list || prog != sc->tprog) {
        tl_remove(w, sc);
        tl_append(w, sc, want);
        sc->tprog = prog;
    }
}

/* Rounds of pump+write per event before yielding to other connections (then the prepare
 * handle carries on next iteration). */
#define MAX_ROUNDS 16

static void on_wake(void *ud);

/* After any event on a connection: write, decide on reading, closing and its timeout. */
static void conn_progress(sconn *sc)
{
    if (sc->closing)
        return;
    flush(sc);
    if (sc->closing)
        return;
    sl_conn *c = sc->c;
    /* Work held back by the output high-water mark can go on once the socket took the output
     * (uv_try_write usually takes it all, and then no write callback will come to resume it). */
    for (int round = 0; !sc->writing && !c->out.len && sl_conn_has_backlog(c); round++) {
        if (round == MAX_ROUNDS) {
            on_wake(sc);
            break;
        }
        sl_conn_pump(c);
        if (!c->out.len)
            break; /* waiting for handlers */
        flush(sc);
        if (sc->closing)
            return;
    }
    if (sc->shut)
        return;
    if (c->fatal) {
        close_now(sc);
        return;
    }
    if (sl_conn_done(c)) {
        if (!sc->writing && !sl_conn_out(c)->len)
            begin_shut(sc);
        else
            set_reading(sc, false);
        return;
    }
    set_reading(sc, !sc->eof && sl_conn_wants_read(c));
    timer_update(sc);
}

static void tls_stat(sl_server *srv, int which)
{
    atomic_fetch_add_explicit(&srv->tls_stat[which], 1, memory_order_relaxed);
}

/* TLS: network bytes into the session, its plaintext into the connection. A failed handshake
 * (plaintext, a refused certificate, garbage) is counted, its alert sent if the socket takes it,
 * and the connection closed; no log line (an attacker could flood it), the counters tell. */
static void tls_read(sconn *sc, const char *data, size_t len)
{
    worker *w = sc->w;
    ssize_t n = sl_tls_feed(sc->tls, data, len);
    while (n >= 0) {
        n = sl_tls_read(sc->tls, w->tbuf, sizeof w->tbuf);
        if (!sc->tls_ready && sl_tls_ready(sc->tls)) {
            sc->tls_ready = true;
            sc->c->peer_identity = sl_tls_peer_identity(sc->tls);
            tls_stat(w->srv, TS_HANDSHAKES);
        }
        if (n <= 0)
            break;
        if (sl_conn_feed(sc->c, w->tbuf, (size_t)n) < 0 || sc->c->fatal)
            return;
    }
    if (n == 0)
        return;
    if (!sc->tls_ready) {
        sl_tls_failure f = sl_tls_failure_get(sc->tls);
        tls_stat(w->srv, f == SL_TLS_FAIL_PLAINTEXT ? TS_PLAINTEXT
                         : f == SL_TLS_FAIL_CERT    ? TS_CERT
                                                    : TS_PROTOCOL);
        sl_buf *o = sl_tls_out(sc->tls);
        if (!sc->writing && o->len)
            send_direct(sc, o->data, o->len);
        close_now(sc);
        return;
    }
    if (n == -ECONNRESET) { /* close_notify: the client's sending side is done */
        sc->eof = true;
        set_reading(sc, false);
        sl_conn_eof(sc->c);
        return;
    }
    sc->c->fatal = true; /* a bad record after the handshake */
}

static void shed_worst(worker *w);

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    sconn *sc = s->data;
    if (sc->closing)
        return;
    if (nread > 0) {
        sl_net_stat_add(sc->w->ctx, SL_NET_BYTES_IN, (uint64_t)nread);
        if (sc->shut)
            return; /* lingering: dropped */
        if (sc->tls)
            tls_read(sc, buf->base, (size_t)nread);
        else
            sl_conn_feed(sc->c, buf->base, (size_t)nread);
        conn_progress(sc);
        if (sl_reqmem_over(&sc->w->srv->reqmem))
            shed_worst(sc->w); /* (a closed sc stays allocated until its close callback) */
        return;
    }
    if (nread == 0)
        return;
    if (nread == UV_EOF && !sc->shut) {
        sc->eof = true;
        set_reading(sc, false);
        sl_conn_eof(sc->c);
        conn_progress(sc);
        return;
    }
    close_now(sc);
}

static void on_wake(void *ud)
{
    sconn *sc = ud;
    if (sc->dirty || sc->closing)
        return;
    sc->dirty = true;
    sc->dnext = sc->w->dirty;
    sc->w->dirty = sc;
}

static void on_prepare(uv_prepare_t *p)
{
    worker *w = p->data;
    while (w->dirty) {
        sconn *sc = w->dirty;
        w->dirty = sc->dnext;
        sc->dirty = false;
        sc->dnext = NULL;
        if (sc->closing)
            continue;
        sl_conn_pump(sc->c);
        conn_progress(sc);
    }
}

static void conn_open(worker *w, int fd, bool on_unix);

static void on_connection(void *ud, int fd)
{
    conn_open(ud, fd, false);
}

static void on_unix_connection(void *ud, int fd)
{
    conn_open(ud, fd, true);
}

static void conn_open(worker *w, int fd, bool on_unix)
{
    sl_server *srv = w->srv;
    sconn *sc = calloc(1, sizeof *sc);
    if (!sc) {
        close(fd);
        return;
    }
    sc->w = w;
    sc->tn.list = -1;
    sl_buf_init(&sc->wbuf, WBUF_CAP);
    uv_tcp_init(&w->loop, &sc->tcp);
    sc->tcp.data = sc;
    if (uv_tcp_open(&sc->tcp, fd) != 0) {
        close(fd);
        sc->closing = true;
        uv_close((uv_handle_t *)&sc->tcp, on_closed);
        return;
    }
    if (w->draining) {
        sc->closing = true;
        uv_close((uv_handle_t *)&sc->tcp, on_closed);
        return;
    }
    if (atomic_fetch_add(&srv->open, 1) >= srv->cfg.max_conns) {
        atomic_fetch_sub(&srv->open, 1);
        sl_net_stat_add(w->ctx, SL_NET_CONNS_REFUSED, 1);
        sc->closing = true;
        uv_close((uv_handle_t *)&sc->tcp, on_closed);
        return;
    }
    sc->counted = true;
    w->nconns++;
    sl_net_stat_add(w->ctx, SL_NET_CONNS_ACCEPTED, 1);
    sl_net_stat_add(w->ctx, SL_NET_CONNS_OPEN, 1);
    struct sockaddr_storage peer;
    int plen = sizeof peer;
    bool have = false;
    if (!srv->unix_path && !on_unix) { /* a Unix socket has neither Nagle nor an IP peer */
        uv_tcp_nodelay(&sc->tcp, 1);
        have = uv_tcp_getpeername(&sc->tcp, (struct sockaddr *)&peer, &plen) == 0;
    }
    sc->c = sl_conn_new(w->ctx, have ? (struct sockaddr *)&peer : NULL, on_wake, sc);
    if (!sc->c) {
        sc->closing = true;
        uv_close((uv_handle_t *)&sc->tcp, on_closed);
        return;
    }
    if (srv->tls) {
        sc->tls = sl_tls_slot_session(srv->tls, NULL);
        if (!sc->tls) {
            close_now(sc);
            return;
        }
    }
    tl_append(w, sc, sc->tls ? TL_HANDSHAKE : TL_READING);
    set_reading(sc, true);
    if (!sc->reading)
        close_now(sc);
}

/* ---- the bound on buffered request bytes (net/reqmem.h) ---- */

/* Connections closed per call at most: the others' workers close theirs too, and the next call
 * (next read or tick) carries on if the count is still over. */
#define SHED_MAX 8

/* Over --max-request-memory: close this worker's connections holding the most request bytes
 * until the shared count is back under its low-water mark (sl_reqmem_above_low: some room for
 * new requests before the bound is reached again). Only a connection holding at least an even
 * share of the limit over the open connections is closed: a client sending small requests is
 * never the one to go, however many bytes others hold. Every worker does this on its reads and
 * its ticks while the count is over, each among its own connections; one walk of them per
 * closing, at most once per loop millisecond. */
static void shed_worst(worker *w)
{
    sl_reqmem *m = &w->srv->reqmem;
    uint64_t now = uv_now(&w->loop);
    if (!sl_reqmem_over(m) || w->shed_at == now + 1)
        return;
    w->shed_at = now + 1;
    uint32_t open = atomic_load(&w->srv->open);
    size_t fair = (size_t)(m->limit / (open ? open : 1));
    for (int k = 0; k < SHED_MAX && sl_reqmem_above_low(m); k++) {
        sconn *worst = NULL;
        for (int l = 0; l < TL_COUNT; l++)
            for (sconn *sc = sc_of(w->lists[l].head); sc; sc = sc_of(sc->tn.next))
                if (sc->c && sc->c->req_bytes >= fair && sc->c->req_bytes &&
                    (!worst || sc->c->req_bytes > worst->c->req_bytes))
                    worst = sc;
        if (!worst)
            return;
        sl_reqmem_count_closed(m);
        close_now(worst);
    }
}

/* ---- worker ---- */

static void on_tick(uv_timer_t *t)
{
    worker *w = t->data;
    uint64_t now = uv_now(&w->loop);
    sl_http_ctx_resync_clock(w->ctx);
    shed_worst(w);
    for (int l = 0; l < TL_COUNT; l++) {
        uint32_t to = w->timeout[l];
        if (!to)
            continue;
        sconn *sc;
        while ((sc = sc_of(w->lists[l].head)) && sl_timeouts_due(&sc->tn, to, now)) {
            sl_net_stat_add(w->ctx, SL_NET_CONNS_TIMED_OUT, 1);
            if (l == TL_HANDSHAKE)
                tls_stat(w->srv, TS_TIMED_OUT);
            if (l == TL_IDLE) {
                /* Politely: GOAWAY on HTTP/2, then the usual FIN and linger. */
                sl_conn_shutdown(sc->c);
                conn_progress(sc);
            }
            if (!sc->closing && sc->tn.list == l && w->lists[l].head == &sc->tn)
                close_now(sc);
        }
    }
}

static void for_each_conn(worker *w, void (*fn)(sconn *sc))
{
    size_t n = 0;
    for (int l = 0; l < TL_COUNT; l++)
        for (sconn *sc = sc_of(w->lists[l].head); sc; sc = sc_of(sc->tn.next))
            n++;
    if (!n)
        return;
    sconn **all = malloc(n * sizeof *all);
    if (!all) {
        /* Out of memory while draining: close as we walk (close_now unlinks the head). */
        for (int l = 0; l < TL_COUNT; l++)
            while (w->lists[l].head)
                close_now(sc_of(w->lists[l].head));
        return;
    }
    size_t i = 0;
    for (int l = 0; l < TL_COUNT; l++)
        for (sconn *sc = sc_of(w->lists[l].head); sc; sc = sc_of(sc->tn.next))
            all[i++] = sc;
    for (i = 0; i < n; i++)
        fn(all[i]);
    free(all);
}

static void drain_one(sconn *sc)
{
    if (sc->closing)
        return;
    sl_conn_shutdown(sc->c);
    conn_progress(sc);
}

static void on_drain_timeout(uv_timer_t *t)
{
    worker *w = t->data;
    for_each_conn(w, close_now);
}

static void run_posts(worker *w, bool close)
{
    uv_mutex_lock(&w->post_mu);
    post_item *p = w->post_head;
    w->post_head = w->post_tail = NULL;
    if (close)
        w->post_closed = true;
    uv_mutex_unlock(&w->post_mu);
    while (p) {
        post_item *n = p->next;
        p->fn(p->ud);
        free(p);
        p = n;
    }
}

static void maybe_finish(worker *w)
{
    if (!w->draining || w->finished || w->nconns)
        return;
    w->finished = true;
    uv_close((uv_handle_t *)&w->tick, NULL);
    uv_close((uv_handle_t *)&w->drain_timer, NULL);
    sl_listener_close_timer(&w->listener);
    for (size_t k = 0; k < w->srv->n_ux; k++)
        sl_listener_close_timer(&w->ux[k]);
    uv_close((uv_handle_t *)&w->prepare, NULL);
    run_posts(w, true);
    if (w->srv->cfg.on_worker_stop)
        w->srv->cfg.on_worker_stop(w->srv->cfg.hooks_ud, w->idx, &w->loop);
}

static void start_drain(worker *w)
{
    w->draining = true;
    sl_listener_stop(&w->listener);
    for (size_t k = 0; k < w->srv->n_ux; k++)
        sl_listener_stop(&w->ux[k]);
    uv_timer_start(&w->drain_timer, on_drain_timeout, atomic_load(&w->srv->grace_ms), 0);
    for_each_conn(w, drain_one);
    maybe_finish(w);
}

static void on_async(uv_async_t *a)
{
    worker *w = a->data;
    /* Drain first: a closure posted after sl_server_shutdown must see the draining state. */
    if (atomic_load(&w->srv->shutdown_req) && !w->draining)
        start_drain(w);
    if (!w->finished)
        run_posts(w, false);
}

static void worker_main(void *arg)
{
    worker *w = arg;
    sl_server *srv = w->srv;
    /* This thread is the library's own: a write(2) by libuv to a peer that hung up raises SIGPIPE
     * at this thread, and blocked here it stays pending on it (discarded when the thread ends)
     * instead of running the process's disposition. See flush(). */
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, NULL);
    if (srv->cfg.on_worker_start)
        srv->cfg.on_worker_start(srv->cfg.hooks_ud, w->idx, &w->loop);
    uv_run(&w->loop, UV_RUN_DEFAULT);
}

/* ---- setup ---- */

static int worker_init(worker *w)
{
    sl_server *srv = w->srv;
    const sl_server_config *cfg = &srv->cfg;
    int rc = uv_loop_init(&w->loop);
    if (rc)
        return rc;
    w->loop_init = true;
    /* The total budget of unsent answers is shared out over the workers (one ctx each). */
    sl_http_limits lim = cfg->limits, d;
    sl_http_limits_defaults(&d);
    if (!lim.unsent_bytes)
        lim.unsent_bytes = d.unsent_bytes;
    lim.unsent_bytes = lim.unsent_bytes / (size_t)srv->nworkers + 1;
    w->ctx = sl_http_ctx_new(&lim, cfg->handler, cfg->handler_ud);
    if (!w->ctx)
        return -ENOMEM;
    sl_http_ctx_set_early(w->ctx, cfg->early);
    sl_http_ctx_attach_loop(w->ctx, &w->loop, w->idx);
    sl_http_ctx_set_reqmem(w->ctx, &srv->reqmem);
    if ((rc = uv_mutex_init(&w->post_mu)))
        return rc;
    w->timeout[TL_IDLE] = cfg->idle_timeout_ms;
    w->timeout[TL_READING] = cfg->read_timeout_ms;
    w->timeout[TL_WRITING] = cfg->write_timeout_ms;
    w->timeout[TL_LINGER] = cfg->linger_ms;
    w->timeout[TL_BUSY] = 0;
    w->timeout[TL_HANDSHAKE] = srv->tls ? cfg->tls_handshake_timeout_ms : 0;
    uint32_t tick = sl_timeouts_tick_ms(w->timeout, TL_COUNT);

    if ((rc = sl_listener_init(&w->listener, &w->loop, w->listener.fd, w->ctx, on_connection, w)))
        return rc; /* first, so that on failure no handle is left to close */
    uv_async_init(&w->loop, &w->async, on_async);
    w->async.data = w;
    uv_unref((uv_handle_t *)&w->async);
    uv_prepare_init(&w->loop, &w->prepare);
    w->prepare.data = w;
    uv_prepare_start(&w->prepare, on_prepare);
    uv_unref((uv_handle_t *)&w->prepare);
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_timer_start(&w->tick, on_tick, tick, tick);
    uv_timer_init(&w->loop, &w->drain_timer);
    w->drain_timer.data = w;
    w->handles_init = true;
    for (size_t k = 0; k < srv->n_ux; k++) {
        if ((rc = sl_listener_init(&w->ux[k], &w->loop, w->ux[k].fd, w->ctx, on_unix_connection,
                                   w)))
            return rc;
        w->ux_init = k + 1;
        if ((rc = sl_listener_start(&w->ux[k])))
            return rc;
    }
    return sl_listener_start(&w->listener);
}

/* Close whatever a worker has and release it (the loop is not running). */
static void worker_teardown(worker *w)
{
    if (w->handles_init) {
        uv_handle_t *hs[] = {(uv_handle_t *)&w->async, (uv_handle_t *)&w->prepare,
                             (uv_handle_t *)&w->tick, (uv_handle_t *)&w->drain_timer};
        sl_listener_close_handles(&w->listener);
        for (size_t k = 0; k < w->ux_init; k++)
            sl_listener_close_handles(&w->ux[k]);
        for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
            if (!uv_is_closing(hs[i]))
                uv_close(hs[i], NULL);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        uv_mutex_destroy(&w->post_mu);
    }
    sl_listener_release_fd(&w->listener); /* after its poll handle is closed */
    for (size_t k = 0; k < w->srv->n_ux; k++) {
        if (k < w->ux_init)
            sl_listener_release_fd(&w->ux[k]);
        else if (w->ux[k].fd >= 0)
            close(w->ux[k].fd);
        w->ux[k].fd = -1;
    }
    if (w->loop_init)
        uv_loop_close(&w->loop);
    sl_http_ctx_free(w->ctx);
    post_item *p = w->post_head;
    while (p) {
        post_item *n = p->next;
        free(p);
        p = n;
    }
}

int sl_server_start(sl_server **out, const sl_server_config *cfg_in)
{
    *out = NULL;
    if (!cfg_in || !cfg_in->handler)
        return -EINVAL;
    sl_server_config d;
    sl_server_config_defaults(&d);
    sl_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->cfg = *cfg_in;
    sl_server_config *cfg = &srv->cfg;
    cfg->unix_path = NULL; /* srv->unix_path once bound: the caller's string may not last */
    const char *unix_path = cfg_in->unix_path;
    if (!cfg->host)
        cfg->host = d.host;
    if (cfg->workers <= 0)
        cfg->workers = 1;
    if (cfg->backlog <= 0)
        cfg->backlog = d.backlog;
    if (!cfg->max_conns)
        cfg->max_conns = d.max_conns;
    sl_reqmem_init(&srv->reqmem, cfg->max_request_memory, (unsigned)cfg->workers);

    if (unix_path || cfg->exclusive)
        cfg->workers = 1; /* one socket: no SO_REUSEPORT group to spread over */
    struct sockaddr_storage ss;
    socklen_t slen;
    if (unix_path) {
        ss.ss_family = AF_UNIX;
        slen = 0;
    } else if (uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)&ss) == 0) {
        slen = sizeof(struct sockaddr_in);
    } else if (uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)&ss) == 0) {
        slen = sizeof(struct sockaddr_in6);
    } else {
        free(srv);
        return -EINVAL;
    }

    srv->nworkers = cfg->workers;
    srv->workers = calloc((size_t)srv->nworkers, sizeof *srv->workers);
    if (!srv->workers || (cfg->tls && !(srv->tls = sl_tls_slot_new(cfg->tls)))) {
        free(srv->workers);
        free(srv);
        return -ENOMEM;
    }
    cfg->tls = NULL; /* the caller's reference stays the caller's; ours is in srv->tls */
    int rc = cfg->port && !unix_path ? sl_listener_probe_free((struct sockaddr *)&ss, slen)
                                          : 0;
    for (int i = 0; i < srv->nworkers; i++) {
        worker *w = &srv->workers[i];
        w->srv = srv;
        w->idx = i;
        w->listener.fd = -1;
        for (size_t k = 0; k < SL_SERVER_MAX_UNIX; k++)
            w->ux[k].fd = -1;
    }
    if (!rc && cfg_in->n_unix_extra > SL_SERVER_MAX_UNIX)
        rc = -E2BIG;
    /* Unix listeners beside the port: one socket each, a dup per worker so that every worker
     * polls it (a Unix socket has no SO_REUSEPORT); the kernel hands each connection to one */
    for (size_t k = 0; !rc && k < cfg_in->n_unix_extra; k++) {
        const char *path = cfg_in->unix_extra[k];
        int fd = sl_listener_unix_socket(path, cfg->backlog);
        if (fd < 0) {
            rc = fd;
            break;
        }
        if (!(srv->ux_path[k] = strdup(path))) {
            unlink(path);
            close(fd);
            rc = -ENOMEM;
            break;
        }
        srv->n_ux = k + 1;
        if (chmod(path, cfg_in->unix_extra_mode ? cfg_in->unix_extra_mode : 0660))
            rc = -errno;
        for (int i = 0; !rc && i < srv->nworkers; i++)
            if ((srv->workers[i].ux[k].fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
                rc = -errno;
        close(fd);
    }
    cfg->unix_extra = NULL;
    cfg->n_unix_extra = 0;
    if (unix_path && !rc) {
        int fd = sl_listener_unix_socket(unix_path, cfg->backlog);
        if (fd < 0)
            rc = fd;
        else
            srv->workers[0].listener.fd = fd;
        if (fd >= 0 && !(srv->unix_path = strdup(unix_path))) {
            unlink(unix_path);
            rc = -ENOMEM;
        }
    }
    for (int i = 0; i < srv->nworkers && !rc && !unix_path; i++) {
        int fd = sl_listener_socket_ex((struct sockaddr *)&ss, slen, cfg->backlog,
                                       !cfg->exclusive);
        if (fd < 0) {
            rc = fd;
            break;
        }
        srv->workers[i].listener.fd = fd;
        if (i == 0) {
            /* With port 0 the kernel picked one: the other workers join that port. */
            struct sockaddr_storage b;
            socklen_t bl = sizeof b;
            if (getsockname(fd, (struct sockaddr *)&b, &bl)) {
                rc = -errno;
                break;
            }
            uint16_t port = b.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&b)->sin6_port
                                                    : ((struct sockaddr_in *)&b)->sin_port;
            if (ss.ss_family == AF_INET6)
                ((struct sockaddr_in6 *)&ss)->sin6_port = port;
            else
                ((struct sockaddr_in *)&ss)->sin_port = port;
            srv->port = ntohs(port);
        }
    }
    for (int i = 0; i < srv->nworkers && !rc; i++)
        rc = worker_init(&srv->workers[i]);
    for (int i = 0; i < srv->nworkers && !rc; i++) {
        worker *w = &srv->workers[i];
        rc = uv_thread_create(&w->thread, worker_main, w);
        if (!rc)
            w->thread_started = true;
    }
    if (rc) {
        sl_server_shutdown(srv, 0);
        sl_server_wait(srv);
        sl_server_free(srv);
        return rc;
    }
    *out = srv;
    return 0;
}

uint16_t sl_server_port(const sl_server *srv)
{
    return srv->port;
}

int sl_server_workers(const sl_server *srv)
{
    return srv->nworkers;
}

uv_loop_t *sl_server_loop(sl_server *srv, int worker)
{
    if (worker < 0 || worker >= srv->nworkers)
        return NULL;
    return &srv->workers[worker].loop;
}

void sl_server_shutdown(sl_server *srv, uint32_t grace_ms)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&srv->shutdown_req, &expected, 1))
        atomic_store(&srv->grace_ms, grace_ms);
    else
        return;
    for (int i = 0; i < srv->nworkers; i++)
        if (srv->workers[i].handles_init)
            uv_async_send(&srv->workers[i].async);
}

int sl_server_wait(sl_server *srv)
{
    int rc = 0;
    for (int i = 0; i < srv->nworkers; i++) {
        worker *w = &srv->workers[i];
        if (w->thread_started) {
            int r = uv_thread_join(&w->thread);
            if (r && !rc)
                rc = r;
            w->thread_started = false;
        }
    }
    return rc;
}

void sl_server_free(sl_server *srv)
{
    if (!srv)
        return;
    for (int i = 0; i < srv->nworkers; i++)
        worker_teardown(&srv->workers[i]);
    free(srv->workers);
    sl_tls_slot_free(srv->tls);
    for (size_t k = 0; k < srv->n_ux; k++) {
        unlink(srv->ux_path[k]);
        free(srv->ux_path[k]);
    }
    if (srv->unix_path) {
        unlink(srv->unix_path);
        free(srv->unix_path);
    }
    free(srv);
}

int sl_server_set_tls(sl_server *srv, sl_tls_ctx *ctx)
{
    if (!ctx || !srv->tls)
        return -EINVAL;
    sl_tls_slot_set(srv->tls, ctx);
    tls_stat(srv, TS_RELOADS);
    return 0;
}

void sl_server_tls_stats(const sl_server *srv, sl_tls_stats *out)
{
    uint64_t v[TS_COUNT];
    for (int i = 0; i < TS_COUNT; i++)
        v[i] = atomic_load_explicit(&srv->tls_stat[i], memory_order_relaxed);
    *out = (sl_tls_stats){.handshakes = v[TS_HANDSHAKES],
                          .fail_plaintext = v[TS_PLAINTEXT],
                          .fail_cert = v[TS_CERT],
                          .fail_protocol = v[TS_PROTOCOL],
                          .timed_out = v[TS_TIMED_OUT],
                          .reloads = v[TS_RELOADS]};
}

int sl_server_post(sl_server *srv, int worker_idx, void (*fn)(void *ud), void *ud)
{
    if (!fn || worker_idx < 0 || worker_idx >= srv->nworkers)
        return -EINVAL;
    worker *w = &srv->workers[worker_idx];
    post_item *p = malloc(sizeof *p);
    if (!p)
        return -ENOMEM;
    p->next = NULL;
    p->fn = fn;
    p->ud = ud;
    uv_mutex_lock(&w->post_mu);
    if (w->post_closed) {
        uv_mutex_unlock(&w->post_mu);
        free(p);
        return -ESHUTDOWN;
    }
    if (w->post_tail)
        w->post_tail->next = p;
    else
        w->post_head = p;
    w->post_tail = p;
    uv_mutex_unlock(&w->post_mu);
    uv_async_send(&w->async);
    return 0;
}

void sl_server_stats(const sl_server *srv, sl_net_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < srv->nworkers; i++)
        if (srv->workers[i].ctx)
            sl_http_ctx_stats(srv->workers[i].ctx, out);
}

void sl_server_reqmem_stats(const sl_server *srv, sl_reqmem_stats *out)
{
    sl_reqmem_stats_get(&srv->reqmem, out);
}

void sl_server_worker_stats(const sl_server *srv, int worker_idx, sl_net_stats *out)
{
    memset(out, 0, sizeof *out);
    if (worker_idx >= 0 && worker_idx < srv->nworkers && srv->workers[worker_idx].ctx)
        sl_http_ctx_stats(srv->workers[worker_idx].ctx, out);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gossipnode: runs gossip/swim over real sockets on a thread of its own (the design is in
 * gossipnode.h). Everything that touches the swim holds `mu`, so readers on other threads (the
 * metrics page, a subscriber registering) see a consistent table; the loop thread is the only one
 * that calls libuv. SIGPIPE is blocked on that thread (the library's own, see docs/architecture.md
 * "Error conventions"), so a peer that hangs up mid-write costs one exchange.
 */
#include "gossip/gossipnode.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "auth/addr.h"
#include "gossip/gossipseeds.h"
#include "gossip/keyring.h"
#include "gossip/swimmeta.h"
#include "sluice/clock.h"

#define FRAME_HDR 4
#define SEAL_CAP (SL_SWIMWIRE_MAX_UDP + SL_KEYRING_MAX_OVERHEAD)
/* Unauthenticated packets (or, without a key ring, all packets) taken from one source in one
 * second; beyond, they are dropped unread (counted as rate_limited). A member sends a peer a few
 * datagrams a probe interval; 200 leaves room for aggressive tunings. */
#define SOURCE_RATE 200
/* push/pull frames that failed to open, from one IP in one second, before its connections are
 * closed unread for the rest of it (members exchange a few a push/pull interval) */
#define STREAM_FAIL_RATE 50
#define SOURCE_SLOTS 256

typedef struct stream stream;

typedef struct sub {
    sl_gossipnode_fn fn;
    void *ud;
} sub;

/* One source's count in the current second (a direct-mapped table: sources that collide share a
 * count, which only makes the limit stricter for them). */
typedef struct srcrate {
    uint64_t h, sec;
    unsigned n;
} srcrate;

struct sl_gossipnode {
    sl_gossipnode_config cfg;
    char *addr, *name, *keyring_file;
    char **seeds;
    sl_logger *log;
    pthread_t th;
    int thread_started, joined;
    uv_loop_t loop;
    uv_udp_t udp;
    uv_tcp_t lsn;
    uv_timer_t timer;
    uv_async_t async;
    int loop_ready, udp_ready, lsn_ready, timer_ready, async_ready;
    pthread_mutex_t mu;
    sl_swim *swim;
    sl_keyring *ring;
    sl_keyring_guard *guard;
    uint64_t rate_seed;
    srcrate rate[SOURCE_SLOTS];
    unsigned npending;      /* incoming exchanges not yet authenticated */
    sub subs[SL_GOSSIPNODE_MAX_SUBS];
    int stop_req, leaving, closing;
    uint64_t leave_until;
    stream *streams;        /* open exchanges, to close at shutdown */
    unsigned nstreams;
    uint8_t seal[SEAL_CAP];
    uint8_t open[SL_SWIMWIRE_MAX_UDP];
    char rx[65536];         /* one received datagram */
};

struct stream {
    sl_gossipnode *g;
    stream *prev, *next;
    uv_tcp_t tcp;
    uv_timer_t deadline;
    uv_connect_t conn;
    uv_write_t wr;
    int outgoing, open_handles, pending;
    uint8_t *out;           /* frame to write */
    size_t outlen;
    sl_swimwire_frame in;   /* the message being read */
    char peer[80];
};

/* --- addresses */

static int to_sockaddr(const char *addr, struct sockaddr_storage *ss)
{
    char host[64];
    unsigned short port;
    if (sl_addr_split(addr, host, sizeof host, &port) || !port)
        return -EINVAL;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return -EINVAL;
}

static void to_name(const struct sockaddr *sa, char *out, size_t len)
{
    char ip[64] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        uv_ip4_name(a, ip, sizeof ip);
        port = ntohs(a->sin_port);
        snprintf(out, len, "%s:%u", ip, port);
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        uv_ip6_name(a, ip, sizeof ip);
        port = ntohs(a->sin6_port);
        snprintf(out, len, "[%s]:%u", ip, port);
    }
}

static uint64_t now_ms(sl_gossipnode *g)
{
    uv_update_time(&g->loop);
    return uv_now(&g->loop);
}

/* --- unauthenticated sources */

/* The count of `src` (an "ip:port", or an IP) in this second. Called under mu. */
static unsigned *source_count(sl_gossipnode *g, const char *src)
{
    uint64_t h = g->rate_seed;
    for (const char *p = src; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    srcrate *r = &g->rate[h % SOURCE_SLOTS];
    uint64_t sec = (uint64_t)sl_wall_ms() / 1000;
    if (r->h != h || r->sec != sec)
        *r = (srcrate){h, sec, 0};
    return &r->n;
}

/* The count of push/pull frames from the IP of `peer` ("ip:port": connections come from
 * ephemeral ports) that failed to open in this second. Called under mu. */
static unsigned *stream_fails(sl_gossipnode *g, const char *peer)
{
    char key[96];
    snprintf(key, sizeof key, "tcp %s", peer);
    char *colon = strrchr(key, ':');
    if (colon)
        *colon = '\0';
    return source_count(g, key);
}

/* Open a sealed packet and check it is fresh: its plaintext length, or a negative errno with the
 * drop counted (decrypt, replay or stale). Called under mu, with a ring. */
static int open_fresh(sl_gossipnode *g, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                      sl_keyring_sealed *info)
{
    int r = sl_keyring_open(g->ring, in, len, out, cap, info);
    if (r < 0) {
        sl_swim_count_drop(g->swim, SL_SWIM_DROP_DECRYPT);
        return r;
    }
    int fresh = sl_keyring_guard_check(g->guard, info, (uint64_t)sl_wall_ms());
    if (fresh < 0) {
        sl_swim_count_drop(g->swim, fresh == -EALREADY ? SL_SWIM_DROP_REPLAY : SL_SWIM_DROP_STALE);
        return fresh;
    }
    return r;
}

/* --- the timer: always set to the protocol's next deadline */

static void on_timer(uv_timer_t *t);

static void arm(sl_gossipnode *g)
{
    if (g->closing)
        return;
    uint64_t now = uv_now(&g->loop), next = sl_swim_next_deadline(g->swim);
    if (g->leaving && g->leave_until < next)
        next = g->leave_until;
    uv_timer_start(&g->timer, on_timer, next > now ? next - now : 0, 0);
}

/* --- streams (push/pull) */

static void stream_closed(uv_handle_t *h)
{
    stream *s = h->data;
    if (--s->open_handles)
        return;
    free(s->out);
    sl_swimwire_frame_free(&s->in);
    free(s);
}

static void stream_close(stream *s)
{
    sl_gossipnode *g = s->g;
    if (!s->open_handles || uv_is_closing((uv_handle_t *)&s->tcp))
        return;
    if (s->prev)
        s->prev->next = s->next;
    else
        g->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    if (s->pending)
        g->npending--;
    else
        g->nstreams--;
    uv_close((uv_handle_t *)&s->tcp, stream_closed);
    uv_close((uv_handle_t *)&s->deadline, stream_closed);
}

static void on_deadline(uv_timer_t *t)
{
    stream_close(t->data);
}

static unsigned stream_cap(const sl_gossipnode *g)
{
    return g->cfg.max_streams ? g->cfg.max_streams : 32;
}

/* An outgoing exchange takes a slot at once (we chose to open it); an incoming one is pending,
 * in a pool of the same size, until its first frame authenticates (see message()). */
static stream *stream_new(sl_gossipnode *g, int outgoing)
{
    unsigned cap = stream_cap(g);
    if (g->closing || (outgoing && g->nstreams >= cap))
        return NULL;
    if (!outgoing && g->npending >= cap) {
        /* the pending pool is full: the oldest unauthenticated connection goes (it has had the
         * longest to send its frame), so holding connections open cannot lock members out; a
         * member's exchange needs only the moment its first frame takes to arrive */
        stream *old = NULL;
        for (stream *x = g->streams; x; x = x->next)
            if (x->pending)
                old = x; /* the list is newest first: the last pending one is the oldest */
        if (!old)
            return NULL;
        pthread_mutex_lock(&g->mu);
        sl_swim_count_drop(g->swim, SL_SWIM_DROP_QUEUE_FULL);
        pthread_mutex_unlock(&g->mu);
        stream_close(old);
    }
    stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->g = g;
    s->outgoing = outgoing;
    uv_tcp_init(&g->loop, &s->tcp);
    uv_timer_init(&g->loop, &s->deadline);
    s->tcp.data = s->deadline.data = s;
    s->open_handles = 2;
    int64_t to = g->cfg.stream_timeout_ms > 0 ? g->cfg.stream_timeout_ms : 5000;
    uv_timer_start(&s->deadline, on_deadline, (uint64_t)to, 0);
    s->next = g->streams;
    if (g->streams)
        g->streams->prev = s;
    g->streams = s;
    if (outgoing) {
        g->nstreams++;
    } else {
        s->pending = 1;
        g->npending++;
    }
    return s;
}

/* Frame p (sealed when there is a ring) into s->out. Called under mu. */
static int frame(sl_gossipnode *g, stream *s, const uint8_t *p, size_t len)
{
    size_t body = len + (g->ring ? SL_KEYRING_OVERHEAD + strlen(g->name) : 0);
    uint8_t *f = malloc(FRAME_HDR + body);
    if (!f)
        return -ENOMEM;
    if (g->ring) {
        int r = sl_keyring_seal(g->ring, g->name, (uint64_t)sl_wall_ms(), p, len, f + FRAME_HDR,
                                body);
        if (r < 0) {
            free(f);
            return r;
        }
    } else {
        memcpy(f + FRAME_HDR, p, len);
    }
    _Static_assert(FRAME_HDR == SL_SWIMWIRE_FRAME_HDR, "one framing");
    f[0] = (uint8_t)(body >> 24);
    f[1] = (uint8_t)(body >> 16);
    f[2] = (uint8_t)(body >> 8);
    f[3] = (uint8_t)body;
    free(s->out);
    s->out = f;
    s->outlen = FRAME_HDR + body;
    return 0;
}

static void on_written(uv_write_t *w, int status);
static void on_read(uv_stream_t *h, ssize_t n, const uv_buf_t *buf);

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    stream *s = h->data;
    uint8_t *p;
    size_t room;
    sl_swimwire_frame_room(&s->in, &p, &room);
    *buf = uv_buf_init((char *)p, (unsigned)room);
}

static void write_out(stream *s)
{
    uv_buf_t b = uv_buf_init((char *)s->out, (unsigned)s->outlen);
    s->wr.data = s;
    if (uv_write(&s->wr, (uv_stream_t *)&s->tcp, &b, 1, on_written) != 0)
        stream_close(s);
}

static void reply_cb(void *rctx, const uint8_t *p, size_t len)
{
    stream *s = rctx;
    if (frame(s->g, s, p, len) != 0)
        s->outlen = 0;
}

/* A whole message arrived: open it, hand it to the protocol, answer a PUSH. */
static void message(stream *s)
{
    sl_gossipnode *g = s->g;
    pthread_mutex_lock(&g->mu);
    const uint8_t *p = s->in.buf;
    size_t len = s->in.want;
    uint8_t *plain = NULL;
    if (g->ring) {
        plain = malloc(len ? len : 1);
        sl_keyring_sealed info;
        int r = plain ? open_fresh(g, s->in.buf, len, plain, len, &info) : -ENOMEM;
        if (r < 0) {
            (*stream_fails(g, s->peer))++;
            pthread_mutex_unlock(&g->mu);
            free(plain);
            stream_close(s);
            return;
        }
        p = plain;
        len = (size_t)r;
    } else {
        sl_swim_count_unauthenticated(g->swim);
    }
    if (s->pending) {
        /* authenticated (or, without a ring, whole): now it takes one of the slots */
        if (g->nstreams >= stream_cap(g)) {
            sl_swim_count_drop(g->swim, SL_SWIM_DROP_QUEUE_FULL);
            pthread_mutex_unlock(&g->mu);
            free(plain);
            stream_close(s);
            return;
        }
        s->pending = 0;
        g->npending--;
        g->nstreams++;
    }
    s->outlen = 0;
    sl_swim_recv_stream(g->swim, s->peer, p, len, now_ms(g), s->outgoing ? NULL : reply_cb, s);
    arm(g);
    pthread_mutex_unlock(&g->mu);
    free(plain);
    if (!s->outgoing && s->outlen) {
        uv_read_stop((uv_stream_t *)&s->tcp);
        write_out(s);
    } else {
        stream_close(s);
    }
}

static void on_read(uv_stream_t *h, ssize_t n, const uv_buf_t *buf)
{
    stream *s = h->data;
    if (n < 0) {
        stream_close(s);
        return;
    }
    if (n == 0)
        return;
    int r = sl_swimwire_frame_got(&s->in, (size_t)n,
                                  s->g->cfg.tun.max_stream_bytes + SL_KEYRING_MAX_OVERHEAD);
    if (r < 0) {
        pthread_mutex_lock(&s->g->mu);
        sl_swim_count_drop(s->g->swim, SL_SWIM_DROP_OVERSIZE);
        pthread_mutex_unlock(&s->g->mu);
        stream_close(s);
        return;
    }
    if (r == 1)
        message(s);
}

static void on_written(uv_write_t *w, int status)
{
    stream *s = w->data;
    if (status < 0 || !s->outgoing) {
        stream_close(s);
        return;
    }
    if (uv_read_start((uv_stream_t *)&s->tcp, alloc_cb, on_read) != 0)
        stream_close(s);
}

static void on_connect(uv_connect_t *c, int status)
{
    stream *s = c->data;
    if (status < 0) {
        stream_close(s);
        return;
    }
    write_out(s);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void on_connection(uv_stream_t *lsn, int status)
{
    sl_gossipnode *g = lsn->data;
    if (status < 0)
        return;
    stream *s = stream_new(g, 0);
    if (!s) {
        /* over the cap: accept and close at once, so the backlog does not fill */
        uv_tcp_t *t = malloc(sizeof *t);
        if (t) {
            uv_tcp_init(&g->loop, t);
            if (uv_accept(lsn, (uv_stream_t *)t) == 0) {
                pthread_mutex_lock(&g->mu);
                sl_swim_count_drop(g->swim, SL_SWIM_DROP_QUEUE_FULL);
                pthread_mutex_unlock(&g->mu);
            }
            uv_close((uv_handle_t *)t, free_handle);
        }
        return;
    }
    if (uv_accept(lsn, (uv_stream_t *)&s->tcp) != 0) {
        stream_close(s);
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&s->tcp, (struct sockaddr *)&ss, &len) == 0)
        to_name((struct sockaddr *)&ss, s->peer, sizeof s->peer);
    /* an IP whose frames keep failing to open is not read for the rest of the second */
    pthread_mutex_lock(&g->mu);
    int limited = g->ring && *stream_fails(g, s->peer) >= STREAM_FAIL_RATE;
    if (limited)
        sl_swim_count_drop(g->swim, SL_SWIM_DROP_RATE_LIMITED);
    pthread_mutex_unlock(&g->mu);
    if (limited) {
        stream_close(s);
        return;
    }
    if (uv_read_start((uv_stream_t *)&s->tcp, alloc_cb, on_read) != 0)
        stream_close(s);
}

/* swim's send_stream: called under mu on the loop thread (or before it starts) */
static void cb_stream(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    sl_gossipnode *g = ctx;
    struct sockaddr_storage ss;
    if (g->closing || to_sockaddr(addr, &ss))
        return;
    stream *s = stream_new(g, 1);
    if (!s)
        return;
    snprintf(s->peer, sizeof s->peer, "%s", addr);
    s->conn.data = s;
    if (frame(g, s, p, len) != 0 ||
        uv_tcp_connect(&s->conn, &s->tcp, (struct sockaddr *)&ss, on_connect) != 0)
        stream_close(s);
}

/* --- datagrams */

static void cb_send(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    sl_gossipnode *g = ctx;
    struct sockaddr_storage ss;
    if (g->closing || to_sockaddr(addr, &ss))
        return;
    if (g->ring) {
        int r = sl_keyring_seal(g->ring, g->name, (uint64_t)sl_wall_ms(), p, len, g->seal,
                                sizeof g->seal);
        if (r < 0)
            return;
        p = g->seal;
        len = (size_t)r;
    }
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)len);
    (void)uv_udp_try_send(&g->udp, &b, 1, (struct sockaddr *)&ss); /* loss is SWIM's business */
}

static void udp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    sl_gossipnode *g = h->data;
    *buf = uv_buf_init(g->rx, sizeof g->rx);
}

static void on_udp(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *sa,
                   unsigned flags)
{
    sl_gossipnode *g = h->data;
    if (n <= 0 || !sa)
        return;
    char from[80];
    to_name(sa, from, sizeof from);
    pthread_mutex_lock(&g->mu);
    const uint8_t *p = (const uint8_t *)buf->base;
    size_t len = (size_t)n;
    if (flags & UV_UDP_PARTIAL || len > SEAL_CAP) {
        sl_swim_count_drop(g->swim, SL_SWIM_DROP_OVERSIZE);
        pthread_mutex_unlock(&g->mu);
        return;
    }
    if (g->ring) {
        /* a source whose packets keep failing is not worth decrypting for the rest of the second
         * (by ip:port: members on one host share an IP, each sends from its gossip port) */
        unsigned *fails = source_count(g, from);
        if (*fails >= SOURCE_RATE) {
            sl_swim_count_drop(g->swim, SL_SWIM_DROP_RATE_LIMITED);
            pthread_mutex_unlock(&g->mu);
            return;
        }
        sl_keyring_sealed info;
        int r = open_fresh(g, p, len, g->open, sizeof g->open, &info);
        if (r < 0) {
            (*fails)++;
            pthread_mutex_unlock(&g->mu);
            return;
        }
        sl_swim_recv_sealed(g->swim, from, info.sender, g->open, (size_t)r, now_ms(g));
    } else {
        unsigned *n = source_count(g, from);
        if (*n >= SOURCE_RATE) {
            sl_swim_count_drop(g->swim, SL_SWIM_DROP_RATE_LIMITED);
            pthread_mutex_unlock(&g->mu);
            return;
        }
        (*n)++;
        sl_swim_count_unauthenticated(g->swim);
        sl_swim_recv(g->swim, from, p, len, now_ms(g));
    }
    arm(g);
    pthread_mutex_unlock(&g->mu);
}

/* --- membership changes */

static void cb_change(void *ctx, const sl_swim_member *m, int old)
{
    sl_gossipnode *g = ctx;
    if (g->log && old >= 0 && !m->is_self)
        sl_log_info(g->log, "gossip: member %s (%s) %s -> %s", m->name, m->addr,
                    sl_member_status_name((sl_member_status)old),
                    sl_member_status_name(m->status));
    for (int i = 0; i < SL_GOSSIPNODE_MAX_SUBS; i++)
        if (g->subs[i].fn)
            g->subs[i].fn(g->subs[i].ud, m, old);
}

static int cb_check_member(void *ctx, const char *addr, size_t addr_len, const uint8_t *meta,
                           size_t meta_len)
{
    (void)ctx;
    const char *why;
    return sl_swimmeta_check_member(addr, addr_len, meta, meta_len, &why);
}

/* --- the loop */

static void close_all(sl_gossipnode *g)
{
    g->closing = 1;
    while (g->streams)
        stream_close(g->streams);
    uv_close((uv_handle_t *)&g->udp, NULL);
    uv_close((uv_handle_t *)&g->lsn, NULL);
    uv_close((uv_handle_t *)&g->timer, NULL);
    uv_close((uv_handle_t *)&g->async, NULL);
}

static void on_timer(uv_timer_t *t)
{
    sl_gossipnode *g = t->data;
    pthread_mutex_lock(&g->mu);
    uint64_t now = now_ms(g);
    sl_swim_tick(g->swim, now);
    if (g->leaving && now >= g->leave_until) {
        pthread_mutex_unlock(&g->mu);
        close_all(g);
        return;
    }
    arm(g);
    pthread_mutex_unlock(&g->mu);
}

static void on_async(uv_async_t *a)
{
    sl_gossipnode *g = a->data;
    pthread_mutex_lock(&g->mu);
    if (g->stop_req && !g->leaving) {
        uint64_t now = now_ms(g);
        sl_swim_leave(g->swim, now);
        g->leaving = 1;
        uint64_t linger = 3 * (uint64_t)g->cfg.tun.gossip_interval_ms;
        g->leave_until = now + (linger > 1000 ? 1000 : linger);
        arm(g);
    }
    pthread_mutex_unlock(&g->mu);
}

static void *loop_thread(void *arg)
{
    sl_gossipnode *g = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    uv_run(&g->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* --- lifecycle */

static void g_free(sl_gossipnode *g)
{
    if (g->loop_ready) {
        if (!g->thread_started) {
            /* handles opened but the thread never ran: close them here */
            while (g->streams)
                stream_close(g->streams);
            if (g->udp_ready)
                uv_close((uv_handle_t *)&g->udp, NULL);
            if (g->lsn_ready)
                uv_close((uv_handle_t *)&g->lsn, NULL);
            if (g->timer_ready)
                uv_close((uv_handle_t *)&g->timer, NULL);
            if (g->async_ready)
                uv_close((uv_handle_t *)&g->async, NULL);
            uv_run(&g->loop, UV_RUN_DEFAULT);
        }
        uv_loop_close(&g->loop);
    }
    sl_swim_free(g->swim);
    sl_keyring_free(g->ring);
    sl_keyring_guard_free(g->guard);
    for (size_t i = 0; i < g->cfg.n_seeds; i++)
        free(g->seeds[i]);
    free(g->seeds);
    free(g->addr);
    free(g->name);
    free(g->keyring_file);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

int sl_gossipnode_start(const sl_gossipnode_config *cfg, sl_gossipnode **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    struct sockaddr_storage ss;
    if (!cfg->addr || to_sockaddr(cfg->addr, &ss)) {
        snprintf(err, errlen, "gossip address '%s': not a numeric ip:port",
                 cfg->addr ? cfg->addr : "");
        return -EINVAL;
    }
    sl_gossipnode *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    pthread_mutex_init(&g->mu, NULL);
    g->cfg = *cfg;
    g->log = cfg->log;
    /* the address as datagrams from it will read (to_name): a member's own packets are known
     * by their source address matching its gossip address (swim.h "trust") */
    char canon[80];
    to_name((struct sockaddr *)&ss, canon, sizeof canon);
    g->addr = strdup(canon);
    g->name = strdup(cfg->name && cfg->name[0] ? cfg->name : cfg->addr);
    g->keyring_file = strdup(cfg->keyring_file ? cfg->keyring_file : "");
    g->seeds = calloc(cfg->n_seeds ? cfg->n_seeds : 1, sizeof *g->seeds);
    int rc = -ENOMEM;
    if (!g->addr || !g->name || !g->keyring_file || !g->seeds)
        goto fail;
    for (size_t i = 0; i < cfg->n_seeds; i++)
        if (!(g->seeds[i] = strdup(cfg->seeds[i])))
            goto fail;
    sl_swim_config_defaults(&g->cfg.tun);
    if (!g->keyring_file[0] && !cfg->insecure && !sl_addr_is_loopback(cfg->addr)) {
        snprintf(err, errlen, "gossip: --gossip-addr %s is not a loopback address and "
                 "--gossip-keyring-file is not set: anyone who can reach it could join or "
                 "rewrite the cluster; set --gossip-keyring-file (or --gossip-insecure to run "
                 "unauthenticated)", cfg->addr);
        rc = -EINVAL;
        goto fail;
    }
    if (g->keyring_file[0] && (rc = sl_keyring_load(g->keyring_file, &g->ring, err, errlen)))
        goto fail;
    if (g->ring &&
        (rc = sl_keyring_guard_new(cfg->replay_window_ms ? cfg->replay_window_ms : 30000,
                                   4 * (size_t)g->cfg.tun.max_members, &g->guard))) {
        snprintf(err, errlen, "gossip: no memory for the replay guard");
        goto fail;
    }
    g->rate_seed = (uint64_t)uv_hrtime() * 0x9E3779B97F4A7C15ull | 1;
    rc = uv_loop_init(&g->loop);
    if (rc)
        goto uvfail;
    g->loop_ready = 1;
    uv_udp_init(&g->loop, &g->udp);
    g->udp_ready = 1;
    uv_tcp_init(&g->loop, &g->lsn);
    g->lsn_ready = 1;
    uv_timer_init(&g->loop, &g->timer);
    g->timer_ready = 1;
    uv_async_init(&g->loop, &g->async, on_async);
    g->async_ready = 1;
    g->udp.data = g->lsn.data = g->timer.data = g->async.data = g;
    if ((rc = uv_udp_bind(&g->udp, (struct sockaddr *)&ss, 0)) ||
        (rc = uv_tcp_bind(&g->lsn, (struct sockaddr *)&ss, 0)) ||
        (rc = uv_listen((uv_stream_t *)&g->lsn, 64, on_connection)) ||
        (rc = uv_udp_recv_start(&g->udp, udp_alloc, on_udp)))
        goto uvfail;
    sl_swim_config sc = g->cfg.tun;
    sc.name = g->name;
    sc.addr = g->addr;
    sc.meta = cfg->meta;
    sc.meta_len = cfg->meta_len;
    sc.seed = (uint64_t)uv_hrtime() ^ (uint64_t)(uintptr_t)g;
    sc.cb = (sl_swim_callbacks){g, cb_send, cb_stream, cb_change, cb_check_member};
    if ((rc = sl_swim_new(&sc, now_ms(g), &g->swim, err, errlen)))
        goto fail;
    if (cfg->n_seeds &&
        (rc = sl_swim_join(g->swim, (const char *const *)g->seeds, cfg->n_seeds, now_ms(g)))) {
        snprintf(err, errlen, "gossip seeds: each a numeric ip:port");
        goto fail;
    }
    arm(g);
    if (pthread_create(&g->th, NULL, loop_thread, g)) {
        rc = -EAGAIN;
        snprintf(err, errlen, "gossip: cannot start a thread");
        goto fail;
    }
    g->thread_started = 1;
    if (g->log)
        sl_log_info(g->log, "gossip: %s on %s, %zu seeds%s", g->name, g->addr, cfg->n_seeds,
                    g->ring ? ", authenticated and encrypted" : "");
    if (g->log && !g->ring)
        sl_log_warn(g->log, "gossip: no --gossip-keyring-file: %s; every gossip packet is "
                    "taken unauthenticated (sluice_gossip_trust_total{event=\"unauthenticated\"}) "
                    "and anyone who can reach %s can join or rewrite the cluster",
                    cfg->insecure ? "--gossip-insecure" : "loopback address", g->addr);
    *out = g;
    return 0;
uvfail:
    snprintf(err, errlen, "gossip address %s: %s", cfg->addr, uv_strerror(rc));
fail:
    g_free(g);
    return rc;
}

void sl_gossipnode_stop(sl_gossipnode *g)
{
    if (!g || g->joined)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop_req = 1;
    pthread_mutex_unlock(&g->mu);
    uv_async_send(&g->async);
    pthread_join(g->th, NULL);
    g->joined = 1;
}

void sl_gossipnode_free(sl_gossipnode *g)
{
    if (!g)
        return;
    sl_gossipnode_stop(g);
    g_free(g);
}

int sl_gossipnode_subscribe(sl_gossipnode *g, sl_gossipnode_fn fn, void *ud)
{
    pthread_mutex_lock(&g->mu);
    int slot = -1;
    for (int i = 0; i < SL_GOSSIPNODE_MAX_SUBS && slot < 0; i++)
        if (!g->subs[i].fn)
            slot = i;
    if (slot < 0) {
        pthread_mutex_unlock(&g->mu);
        return -ENOSPC;
    }
    g->subs[slot] = (sub){fn, ud};
    for (size_t i = 0; i < sl_swim_member_count(g->swim); i++) {
        sl_swim_member m;
        if (sl_swim_member_at(g->swim, i, &m) == 0)
            fn(ud, &m, -1);
    }
    pthread_mutex_unlock(&g->mu);
    return 0;
}

void sl_gossipnode_unsubscribe(sl_gossipnode *g, sl_gossipnode_fn fn, void *ud)
{
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < SL_GOSSIPNODE_MAX_SUBS; i++)
        if (g->subs[i].fn == fn && g->subs[i].ud == ud)
            g->subs[i] = (sub){NULL, NULL};
    pthread_mutex_unlock(&g->mu);
}

int sl_gossipnode_members(sl_gossipnode *g, sl_gossipnode_member **out, uint64_t *version)
{
    pthread_mutex_lock(&g->mu);
    size_t n = sl_swim_member_count(g->swim);
    sl_gossipnode_member *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        pthread_mutex_unlock(&g->mu);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        sl_swim_member m;
        sl_swim_member_at(g->swim, i, &m);
        snprintf(v[i].name, sizeof v[i].name, "%s", m.name);
        snprintf(v[i].addr, sizeof v[i].addr, "%s", m.addr);
        memcpy(v[i].meta, m.meta, m.meta_len);
        v[i].meta_len = m.meta_len;
        v[i].status = m.status;
        v[i].incarnation = m.incarnation;
        v[i].is_self = m.is_self;
    }
    if (version)
        *version = sl_swim_version(g->swim);
    pthread_mutex_unlock(&g->mu);
    *out = v;
    return (int)n;
}

void sl_gossipnode_stats(sl_gossipnode *g, sl_swim_stats *out)
{
    pthread_mutex_lock(&g->mu);
    sl_swim_get_stats(g->swim, out);
    pthread_mutex_unlock(&g->mu);
}

int sl_gossipnode_reload_keyring(sl_gossipnode *g, char *err, size_t errlen)
{
    if (!g || !g->keyring_file[0])
        return 0;
    sl_keyring *k;
    int rc = sl_keyring_load(g->keyring_file, &k, err, errlen);
    if (rc)
        return rc;
    pthread_mutex_lock(&g->mu);
    sl_keyring *old = g->ring;
    g->ring = k;
    pthread_mutex_unlock(&g->mu);
    sl_keyring_free(old);
    if (g->log)
        sl_log_info(g->log, "gossip: key ring reloaded, %zu keys", sl_keyring_count(k));
    return 0;
}

/* --- configuration from sluiced's options */

int sl_gossipnode_start_options(const sl_options *o, sl_logger *log, sl_gossipnode **out,
                                char *err, size_t errlen)
{
    *out = NULL;
    if (!o->gossip_addr[0])
        return 0;
    uint8_t meta[SL_SWIM_MAX_META];
    int ml = sl_swimmeta_put(meta, sizeof meta, 0, "service", o->advertise_addr);
    if (ml >= 0)
        ml = sl_swimmeta_put(meta, sizeof meta, (size_t)ml, "role",
                             o->role == SL_ROLE_PROXY      ? "proxy"
                             : o->role == SL_ROLE_OBSERVER ? "observer"
                                                           : "limiter");
    if (ml < 0) {
        snprintf(err, errlen, "gossip: advertise-addr '%s' does not fit the metadata",
                 o->advertise_addr);
        return -EINVAL;
    }
    /* the seeds: --gossip-seeds, and with etcd the observers registered there */
    size_t max = o->gossip_seeds.n + SL_GOSSIPSEEDS_MAX, ns = 0, given = o->gossip_seeds.n;
    char **seeds = calloc(max, sizeof *seeds);
    if (!seeds)
        return -ENOMEM;
    for (; ns < given; ns++)
        seeds[ns] = o->gossip_seeds.items[ns];
    if (o->storage_addrs.n) {
        sl_etcd_config ec;
        sl_gossipseeds_etcd_config(o, &ec);
        int got = sl_gossipseeds_from_etcd(&ec, o->storage_prefix, seeds, &ns, max);
        if (got < 0)
            sl_log_warn(log, "gossip: observers in etcd not read (%s); joining through "
                        "--gossip-seeds only", strerror(-got));
        else if (got)
            sl_log_info(log, "gossip: %d observers from etcd as seeds", got);
    }
    sl_gossipnode_config gc = {
        .addr = o->gossip_addr,
        .name = o->gossip_name[0] ? o->gossip_name : o->advertise_addr,
        .seeds = (const char *const *)seeds,
        .n_seeds = ns,
        .keyring_file = o->gossip_keyring_file,
        .insecure = o->gossip_insecure,
        .replay_window_ms = (uint64_t)(o->gossip_replay_window_ns / 1000000),
        .meta = meta,
        .meta_len = (size_t)ml,
        .tun = {
            .probe_interval_ms = (uint32_t)(o->gossip_probe_interval_ns / 1000000),
            .probe_timeout_ms = (uint32_t)(o->gossip_probe_timeout_ns / 1000000),
            .indirect_probes = (uint32_t)o->gossip_indirect_probes,
            .retransmit_mult = (uint32_t)o->gossip_retransmit_mult,
            .suspicion_min_mult = (uint32_t)o->gossip_suspicion_mult,
            .suspicion_max_mult = (uint32_t)o->gossip_suspicion_max_mult,
            .gossip_interval_ms = (uint32_t)(o->gossip_interval_ns / 1000000),
            .gossip_fanout = (uint32_t)o->gossip_fanout,
            .pushpull_interval_ms = o->gossip_pushpull_interval_ns
                                        ? (uint32_t)(o->gossip_pushpull_interval_ns / 1000000)
                                        : UINT32_MAX, /* never */
            .dead_keep_ms = (uint32_t)(o->gossip_dead_keep_ns / 1000000),
            .max_members = (uint32_t)o->gossip_max_members,
            .max_stream_bytes = (size_t)o->gossip_max_stream_bytes,
        },
        .stream_timeout_ms = o->gossip_timeout_ns / 1000000,
        .log = log,
    };
    int rc = sl_gossipnode_start(&gc, out, err, errlen);
    for (size_t i = given; i < ns; i++)
        free(seeds[i]);
    free(seeds);
    return rc;
}
